"""Wide dense data, more columns than rows: calopt's default against the 5-fold route and its twin.

The wide benchmark's sets have at most a few hundred columns below 10,000 rows, and the text
sets are sparse; this one is the shape of expression arrays and wide binary surveys: 430-2,000
rows × 1,000-5,000 dense columns (Gaussian of unequal scales, or 0/1 at 10% or 2%), a planted
linear signal on 30-100 columns, label = score + logistic noise above a quantile (10-20%
positive), split 70/30. Eight shapes, three seeds each, F1 and G-mean; the shapes are split once
into a development half (even positions) and a confirmation half (odd).

Each cell: calopt's default (``bench_suite.run_calopt``), scikit-learn's
``TunedThresholdClassifierCV`` route (``bench_suite.run_route``) and its twin (the route with
its folds shuffled by seed 1, the route's own spread).

    python benchmarks/bench_wide_dense.py --half dev --out benchmarks/results/wide_dense_dev.json
    python benchmarks/bench_wide_dense.py --half confirm --out benchmarks/results/wide_dense_confirm.json
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_suite
import synthetic_shapes

#: (name, rows, columns, informative columns, kind, positive rate)
SHAPES = [
    ("gauss-430x1000", 430, 1000, 30, "gauss", 0.15),
    ("gauss-860x2000", 860, 2000, 40, "gauss", 0.15),
    ("gauss-1700x3000", 1700, 3000, 60, "gauss", 0.10),
    ("gauss-570x5000", 570, 5000, 50, "gauss", 0.20),
    ("bin10-2000x3000", 2000, 3000, 60, "bin10", 0.10),
    ("bin10-860x2000", 860, 2000, 40, "bin10", 0.15),
    ("bin2-2000x5000", 2000, 5000, 100, "bin2", 0.10),
    ("bin2-1000x3000", 1000, 3000, 60, "bin2", 0.15),
]
SEEDS = 3


def make(shape: tuple, seed: int) -> bench_suite.Dataset:
    """One seed of one shape, split 70/30 at random."""
    name, n, d, informative, kind, rate = shape
    rng = np.random.default_rng([sum(map(ord, name)), seed])
    if kind == "gauss":
        X = rng.normal(size=(n, d)) * rng.gamma(2, 1, size=d)
        standard = X / X.std(axis=0)
    else:
        X = (rng.random((n, d)) < (0.1 if kind == "bin10" else 0.02)).astype(np.float64)
        standard = X
    w = np.zeros(d)
    w[rng.choice(d, informative, replace=False)] = rng.normal(size=informative)
    score = standard @ w
    noisy = (score - score.mean()) / score.std() * 2 + rng.logistic(size=n)
    y = (noisy > np.quantile(noisy, 1 - rate)).astype(int)
    order = rng.permutation(n)
    train, test = order[:int(0.7 * n)], order[int(0.7 * n):]
    return bench_suite.Dataset(name, f"synthetic wide dense ({kind})", X[train], y[train], X[test], y[test],
                               1, 0, f"random 70/30, seed {seed}")


def main(argv: list[str] | None = None) -> None:
    synthetic_shapes.main(argv, __doc__.splitlines()[0], "wide_dense", SHAPES, SEEDS, make)


if __name__ == "__main__":
    main()

"""Large sparse text-like data, more columns than rows: calopt's default against the 5-fold route and its twin.

The real text sets (SMS, sentences) have a few thousand rows; this one has the shape of a
larger corpus: 20,000-40,000 training rows × 30,000-100,000 columns, 30-100 words a row drawn
from a Zipf vocabulary, rows scaled to unit length (TF-IDF-like) or 0/1 (hashed presence), a
planted linear signal on 200 of the 2,000 most frequent words and 200 rarer ones, label = score +
logistic noise above a quantile (3-10% positive). Eight shapes, two seeds each, F1 and G-mean;
the shapes are split once into a development half (even positions) and a confirmation half (odd).

Each cell: calopt's default (``bench_suite.run_calopt``), scikit-learn's
``TunedThresholdClassifierCV`` route (``bench_suite.run_route``) and its twin (the route with
its folds shuffled by seed 1, the route's own spread).

    python benchmarks/bench_large_sparse.py --half dev
    python benchmarks/bench_large_sparse.py --half confirm --calopt-kwargs '{"select": "cv:5"}' --out OUT.json
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_suite
import synthetic_shapes

#: (name, training rows, columns, words a row, kind, positive rate)
SHAPES = [
    ("tfidf-24kx30k", 24_000, 30_000, 40, "tfidf", 0.05),
    ("tfidf-30kx60k", 30_000, 60_000, 80, "tfidf", 0.10),
    ("binary-30kx32k", 30_000, 32_768, 50, "binary", 0.08),
    ("tfidf-40kx50k", 40_000, 50_000, 30, "tfidf", 0.03),
    ("tfidf-22kx100k", 22_000, 100_000, 100, "tfidf", 0.08),
    ("binary-25kx60k", 25_000, 60_000, 60, "binary", 0.05),
    ("tfidf-32kx40k", 32_000, 40_000, 60, "tfidf", 0.06),
    ("binary-40kx40k", 40_000, 40_000, 40, "binary", 0.10),
]
SEEDS = 2
TEST_ROWS = 10_000


def make(shape: tuple, seed: int) -> bench_suite.Dataset:
    """One seed of one shape: training rows and 10,000 test rows from the same distribution."""
    import scipy.sparse as sp

    name, n, d, per_row, kind, rate = shape
    rng = np.random.default_rng([sum(map(ord, name)), seed])
    total = n + TEST_ROWS
    frequency = 1.0 / np.arange(1, d + 1) ** 1.1
    frequency /= frequency.sum()
    counts = rng.poisson(per_row, size=total) + 1
    words = rng.choice(d, size=int(counts.sum()), p=frequency)
    rows = np.repeat(np.arange(total), counts)
    X = sp.csr_matrix((np.ones(words.size), (rows, words)), shape=(total, d))  # duplicates summed
    X.sum_duplicates()
    if kind == "binary":
        X.data[:] = 1.0
    else:
        X.data = np.log1p(X.data) * rng.uniform(0.5, 1.5, size=X.data.size)
        X = sp.csr_matrix(X.multiply(1 / np.sqrt(X.multiply(X).sum(axis=1))))
    w = np.zeros(d)
    w[rng.choice(2_000, 200, replace=False)] = rng.normal(size=200) * 4
    w[2_000 + rng.choice(d - 2_000, 200, replace=False)] = rng.normal(size=200) * 8
    score = X @ w
    noisy = (score - score.mean()) / score.std() * 2 + rng.logistic(size=total)
    y = (noisy > np.quantile(noisy, 1 - rate)).astype(int)
    return bench_suite.Dataset(name, f"synthetic sparse text-like ({kind})", X[:n], y[:n], X[n:], y[n:],
                               1, 0, f"{n} training rows, {TEST_ROWS} test rows, seed {seed}")


def main(argv: list[str] | None = None) -> None:
    synthetic_shapes.main(argv, __doc__.splitlines()[0], "large_sparse", SHAPES, SEEDS, make)


if __name__ == "__main__":
    main()

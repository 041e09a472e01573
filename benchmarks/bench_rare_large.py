"""Large data with a rare class (fraud-like): calopt's default against the split route and its twin.

The size benchmark's large dense sets have a common positive class; transactions and screening
data have 10⁵-10⁶ rows and a class of 0.05-0.4%: a few hundred rows, so that the large-data
sample (100,000 rows and more, at least 2,000 a feature) holds fewer than 500 of them. Eight
shapes, 120,000-1,000,000 training rows × 8-60 dense columns (Gaussian of unequal scales, one
log-normal amount column, a product of two columns in the score), label = score + logistic
noise above a quantile; two seeds each, F1 and G-mean; 30% more rows as the test set; the
shapes split once into a development half (even positions) and a confirmation half (odd).

Each cell: calopt's default (``bench_suite.run_calopt``), the route a user takes at this size
(the size benchmark's: ``MaxAbsScaler + LogisticRegression`` on 80% of the rows, the threshold
the exact best cut on the other 20%; ``bench_sizes.SplitRoute``) and its twin (the split drawn
by seed 1).

    python benchmarks/bench_rare_large.py --half dev
    python benchmarks/bench_rare_large.py --half confirm --out OUT.json
    python benchmarks/bench_rare_large.py --half dev --stream   # calopt streams the rows from disk
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_sizes
import bench_suite
import synthetic_shapes

#: (name, training rows, columns, positive rate)
SHAPES = [
    ("rare-280kx30", 280_000, 30, 0.0017),
    ("rare-150kx10", 150_000, 10, 0.002),
    ("rare-400kx20", 400_000, 20, 0.001),
    ("rare-200kx60", 200_000, 60, 0.003),
    ("rare-1mx15", 1_000_000, 15, 0.0005),
    ("rare-300kx40", 300_000, 40, 0.004),
    ("rare-600kx25", 600_000, 25, 0.0008),
    ("rare-120kx8", 120_000, 8, 0.003),
]
SEEDS = 2


def make(shape: tuple, seed: int) -> bench_suite.Dataset:
    """One seed of one shape: the training rows and 30% more as the test rows."""
    name, n, d, rate = shape
    rng = np.random.default_rng([sum(map(ord, name)), seed])
    total = int(n * 1.3)
    X = rng.normal(size=(total, d)) * rng.gamma(2.0, 1.0, size=d)
    X[:, -1] = rng.lognormal(3.0, 1.5, size=total)  # an amount
    w = rng.normal(size=d) * (rng.random(d) < 0.5) / X.std(axis=0)
    score = X @ w + 0.5 * np.tanh(X[:, 0] / X[:, 0].std()) * X[:, 1] / X[:, 1].std()
    score = (score - score.mean()) / score.std() * 2.5 + rng.logistic(size=total)
    y = (score > np.quantile(score, 1 - rate)).astype(np.int64)
    return bench_suite.Dataset(name, "synthetic rare class, large", X[:n], y[:n], X[n:], y[n:], 1, 0,
                               f"first {n} rows train, the rest test (seed {seed})")


def split_route(data: bench_suite.Dataset, measure: str, cv_seed: int | None = None) -> dict[str, Any]:
    """The size benchmark's route at 100,000 rows and more (its twin: the split drawn by ``cv_seed``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.perf_counter()
        route = bench_sizes.SplitRoute(measure, data.positive, 0 if cv_seed is None else cv_seed)
        route.fit(data.X_train, data.y_train)
        seconds = time.perf_counter() - started
        predicted = route.predict(data.X_test, data.negative)
    return {**bench_suite.test_record(measure, data.y_test, predicted, data.positive, data.negative),
            "seconds": seconds}


def streamed(data: bench_suite.Dataset, measure: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """calopt's cell with the training rows streamed: ``X.npy`` and ``y.npy`` written to a
    temporary directory (not timed), ``calopt.fit(open_stream(DIR), measure=...)`` timed."""
    import tempfile

    import calopt
    from calopt.io.stream import open_stream

    with tempfile.TemporaryDirectory() as directory:
        np.save(Path(directory) / "X.npy", data.X_train)
        np.save(Path(directory) / "y.npy", data.y_train)
        started = time.perf_counter()
        model = calopt.fit(open_stream(directory), measure=measure, seed=0, positive=data.positive, **kwargs)
        seconds = time.perf_counter() - started
    predicted = model.predict(data.X_test)
    return {**bench_suite.test_record(measure, data.y_test, predicted, data.positive, data.negative),
            "seconds": seconds, "options": {"select": (model.fit_report.selection or {}).get("rule"),
                                            "subsample": dict(model.fit_report.subsample or {})}}


def main(argv: list[str] | None = None) -> None:
    synthetic_shapes.main(argv, __doc__.splitlines()[0], "rare_large", SHAPES, SEEDS, make, split_route, streamed)


if __name__ == "__main__":
    main()

"""Seconds of calopt's default fit, best and median of 5 in one process, one BLAS thread: for
changes that keep every model to the bit (compare two checkouts' outputs: the thresholds are
printed to 9 digits, and must be equal).

Sets: three low-dimensional large shapes (``bench_rare_large.make`` with a common class: 5% and
20% positive; the large-data sample's regime, where the per-pass bookkeeping is a larger share
of a fit) and four public sets of the wide benchmark (split 0).

    python benchmarks/bench_fit_times.py                # this checkout
    PYTHONPATH=OTHER:OTHER/plugins python benchmarks/bench_fit_times.py   # another checkout's calopt
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_rare_large
import bench_suite

SHAPES = [(150_000, 5, 0.05), (250_000, 6, 0.05), (400_000, 8, 0.2)]
PUBLIC = ["magic04", "sylva", "a9a", "ijcnn1"]
REPEATS = 5


def main() -> None:
    bench_suite.limit_threads()
    warnings.simplefilter("ignore")
    import calopt

    print(f"calopt from {Path(calopt.__file__).parent}")
    sets = {}
    for n, d, rate in SHAPES:
        data = bench_rare_large.make((f"x{n}{d}", n, d, rate), 0)
        sets[f"{n // 1000}k×{d}, {rate:.0%}"] = (data.X_train, data.y_train)
    for name in PUBLIC:
        data = bench_suite.catalogue()[name](0)
        sets[name] = (data.X_train, data.y_train)
    calopt.fit(*sets["magic04"], measure="f1")  # the process's first fit (imports, caches)
    for name, (X, y) in sets.items():
        for measure in ("f1", "gmean"):
            seconds = []
            for _ in range(REPEATS):
                started = time.perf_counter()
                model = calopt.fit(X, y, measure=measure)
                seconds.append(time.perf_counter() - started)
            seconds.sort()
            print(f"{name:16s} {measure:5s} best {seconds[0]:.3f} s  median {seconds[REPEATS // 2]:.3f} s  "
                  f"threshold {model.threshold:.9f}", flush=True)


if __name__ == "__main__":
    main()

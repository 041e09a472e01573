"""Large K-class data: the rule chosen on every row against on a class-weighted sample of 50,000.

``calopt.training.multiclass.rule_rows``: beyond ``RULE_ROWS`` training rows the fold models and
the K-class rule work on a sample (every row of the small classes, the large ones drawn down to a
common quota, rows weighted back to the whole data's class counts). The K-class benchmark's sets
are all below 50,000 training rows; these are not: six synthetic shapes of 100,000-400,000
training rows × 10-54 dense columns, 5-12 long-tailed classes (the largest 10-50 times the
smallest), a linear score plus Gumbel noise; one seed, G-mean, min-recall and macro-F1; 30% more
rows as the test set; the shapes split once into a development half (even positions) and a
confirmation half (odd). Each cell: calopt's default with the sample (today), with every row
(``RULE_ROWS`` set past the data), and one multinomial ``LogisticRegression`` fit for the time.

    python benchmarks/bench_multiclass_large.py --half dev --out benchmarks/results/multiclass_large_dev.json

``--mid``: four shapes of 20,000-80,000 training rows (below the sample, where the model's C is
chosen by the out-of-fold log loss): calopt's default against ``algorithm="multinomial:C=1"``
(no C chosen), the C chosen and the time over one LR fit (a cost check, not a rule's choice).

    python benchmarks/bench_multiclass_large.py --mid   # benchmarks/results/multiclass_mid.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_multiclass_measures as bench  # noqa: E402
import bench_suite  # noqa: E402

#: (name, training rows, columns, classes, largest over smallest class)
SHAPES = [
    ("mc-340kx54-7", 340_000, 54, 7, 15),
    ("mc-150kx20-5", 150_000, 20, 5, 20),
    ("mc-200kx30-10", 200_000, 30, 10, 30),
    ("mc-100kx10-6", 100_000, 10, 6, 10),
    ("mc-400kx16-12", 400_000, 16, 12, 50),
    ("mc-120kx40-8", 120_000, 40, 8, 25),
]
MEASURES = ["gmean", "min", "f1"]
#: --mid: (name, training rows, columns, classes, largest over smallest class), below RULE_ROWS
MID_SHAPES = [
    ("mc-20kx20-5", 20_000, 20, 5, 10),
    ("mc-50kx30-10", 50_000, 30, 10, 20),
    ("mc-80kx8-4", 80_000, 8, 4, 30),
    ("mc-30kx100-15", 30_000, 100, 15, 20),
]


def make(shape: tuple, seed: int = 0) -> dict:
    """One shape: training and test rows, class codes 0..K-1 (largest class first)."""
    name, n, d, K, ratio = shape
    rng = np.random.default_rng([sum(map(ord, name)), seed])
    share = np.geomspace(1.0, 1.0 / ratio, K)
    total = int(n * 1.3 / share.mean() * share.max() * 1.05)
    X = rng.normal(size=(total, d))
    W = rng.normal(size=(d, K)) * 0.6
    y = np.argmax(X @ W + rng.gumbel(size=(total, K)), axis=1)
    keep = rng.random(total) < share[y] / share.max()
    X, y = X[keep], y[keep]
    X, y = X[:int(n * 1.3)], y[:int(n * 1.3)]
    return {"X_train": X[:n], "y_train": y[:n], "X_test": X[n:], "y_test": y[n:], "classes": np.arange(K)}


def _shape_and_lr(shape: tuple) -> tuple[dict, float]:
    """One shape's data and the seconds of one multinomial LogisticRegression fit on it (the unit)."""
    data = make(shape)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bench.logistic().fit(data["X_train"], data["y_train"])
    return data, time.perf_counter() - started


def run(shapes: list[tuple], out: Path, rows: int | None = None) -> None:
    import calopt
    import calopt.training.multiclass as multiclass

    bench_suite.limit_threads()
    cells = {}
    for shape in shapes:
        data, lr_seconds = _shape_and_lr(shape)
        for measure in MEASURES:
            cell = {"lr_seconds": lr_seconds}
            for variant, limit in (("sample", rows or multiclass.RULE_ROWS), ("every", 10**9)):
                saved, multiclass.RULE_ROWS = multiclass.RULE_ROWS, limit
                try:
                    started = time.perf_counter()
                    model = calopt.fit(data["X_train"], data["y_train"], measure=measure, seed=0)
                    seconds = time.perf_counter() - started
                finally:
                    multiclass.RULE_ROWS = saved
                values = bench.test_values(data["y_test"], model.predict(data["X_test"]), data["classes"])
                cell[variant] = {"value": values[measure], "seconds": seconds}
            cells[f"{shape[0]}|{measure}"] = cell
            print(f"{shape[0]:16s} {measure:5s} sample {cell['sample']['value']:.4f} {cell['sample']['seconds']:.2f}s "
                  f"every {cell['every']['value']:.4f} {cell['every']['seconds']:.2f}s LR {lr_seconds:.2f}s", flush=True)
    out.write_text(json.dumps({**bench_suite._header({}), "cells": cells}, indent=1))
    print(summary(cells))


def run_mid(out: Path) -> None:
    """calopt's default (C chosen) against C = 1 given, on :data:`MID_SHAPES`."""
    import calopt

    bench_suite.limit_threads()
    calopt.fit(*(lambda d: (d["X_train"], d["y_train"]))(make(("warm-up", 5_000, 5, 3, 3))), measure="gmean")
    cells = {}
    for shape in MID_SHAPES:
        data, lr_seconds = _shape_and_lr(shape)
        for measure in ("gmean", "f1"):
            cell = {"lr_seconds": lr_seconds}
            for variant, algorithm in (("default", "multinomial"), ("C=1", "multinomial:C=1")):
                started = time.perf_counter()
                model = calopt.fit(data["X_train"], data["y_train"], measure=measure, seed=0, algorithm=algorithm)
                seconds = time.perf_counter() - started
                values = bench.test_values(data["y_test"], model.predict(data["X_test"]), data["classes"])
                cell[variant] = {"value": values[measure], "seconds": seconds, "C": model.fit_report.decision.C}
            cells[f"{shape[0]}|{measure}"] = cell
            print(f"{shape[0]:16s} {measure:5s} default {cell['default']['value']:.4f} (C {cell['default']['C']:g}) "
                  f"{cell['default']['seconds'] / lr_seconds:.2f}x LR, C=1 {cell['C=1']['value']:.4f} "
                  f"{cell['C=1']['seconds'] / lr_seconds:.2f}x LR (LR {lr_seconds:.2f} s)", flush=True)
    out.write_text(json.dumps({**bench_suite._header({}), "cells": cells}, indent=1))


def summary(cells: dict) -> str:
    diffs = np.array([c["sample"]["value"] - c["every"]["value"] for c in cells.values()])
    ratio_s = np.median([c["sample"]["seconds"] / c["lr_seconds"] for c in cells.values()])
    ratio_e = np.median([c["every"]["seconds"] / c["lr_seconds"] for c in cells.values()])
    return (f"{len(cells)} cells: sample − every row, mean {diffs.mean():+.4f}, worst {diffs.min():+.4f}; "
            f"median fit time over one LR fit: sample {ratio_s:.2f}, every row {ratio_e:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=["dev", "confirm"])
    parser.add_argument("--mid", action="store_true", help="the shapes below the sample: C chosen against C = 1")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--rows", type=int, default=None, help="the sample's rows (default: RULE_ROWS)")
    args = parser.parse_args(argv)
    if args.mid:
        run_mid(args.out or Path(__file__).parent / "results" / "multiclass_mid.json")
        return
    if args.half is None:
        parser.error("--half or --mid is required")
    out = args.out or Path(__file__).parent / "results" / f"multiclass_large_{args.half}.json"
    run(SHAPES[0::2] if args.half == "dev" else SHAPES[1::2], out, args.rows)


if __name__ == "__main__":
    main()

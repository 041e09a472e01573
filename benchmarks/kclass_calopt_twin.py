"""calopt's own fold noise on the K-class benchmark: calopt refit with its folds drawn by another
seed (``calopt.fit(..., seed=1)``: the fold models and so the rule's out-of-fold probabilities
change, the multinomial model does not), on every cell of a ``bench_multiclass_measures.py`` run,
against that run's argmax and tuned rules. The criterion "mean margin ≥ +0.02 over the argmax"
has no route twin (the argmax does not depend on folds); this is calopt's.

    python benchmarks/kclass_calopt_twin.py --against kwin --jobs 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from pathlib import Path
from statistics import mean, pstdev

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_multiclass_measures as bench
from bench_suite import RESULTS, limit_threads, load_results


def task(arguments: tuple[str, int, int]) -> tuple[str, int, dict[str, float]]:
    """The test value of ``calopt.fit(..., seed=SEED)`` for each measure on one dataset × split."""
    import warnings

    import calopt

    warnings.simplefilter("ignore")
    name, split, seed = arguments
    data = bench.load_split_data(name, split)
    classes = np.arange(len(data["classes"]))
    values = {}
    for measure in bench.MEASURES:
        model = calopt.fit(data["X_train"], data["classes"][data["y_train"]], measure=measure, seed=seed)
        codes = np.searchsorted(data["classes"], model.predict(data["X_test"]))
        values[measure] = bench.test_values(data["y_test"], codes, classes)[measure]
    return name, split, values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="kwin", help="the benchmark run whose cells are compared")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    against = load_results(bench.results_path(args.against))
    names = sorted(against["datasets"])
    tasks = [(n, s, args.seed) for n in names for s in range(3)]
    with multiprocessing.get_context("spawn").Pool(args.jobs, initializer=limit_threads) as pool:
        rows = pool.map(task, tasks)
    out = RESULTS / f"multiclass_measures_{args.against}_calopt-seed{args.seed}.json"
    out.write_text(json.dumps({"against": args.against, "seed": args.seed,
                               "cells": {f"{n}|{m}|split{s}": v for n, s, values in rows for m, v in values.items()}},
                              indent=1))
    print(f"{len(rows)} dataset × split tasks, against {args.against}; mean over the cells of each measure "
          f"(calopt: the run's, seed 0; twin: seed {args.seed}):")
    print("| measure | cells | calopt − argmax | twin − argmax | calopt − coord | twin − coord | "
          "calopt − xcolumns | twin − xcolumns | sd of twin − calopt |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for measure in bench.MEASURES:
        cells = [(against["cells"][f"{n}|{measure}|split{s}"], values[measure]) for n, s, values in rows
                 if f"{n}|{measure}|split{s}" in against["cells"]]
        if not cells:
            continue

        def margin(other: str, twin: bool, cells: list = cells) -> float:
            return mean((t if twin else c["calopt"]["value"]) - c[other]["value"] for c, t in cells)

        spread = pstdev([t - c["calopt"]["value"] for c, t in cells])
        print(f"| {measure} | {len(cells)} | {margin('argmax', False):+.4f} | {margin('argmax', True):+.4f} | "
              f"{margin('coord', False):+.4f} | {margin('coord', True):+.4f} | {margin('xcolumns', False):+.4f} | "
              f"{margin('xcolumns', True):+.4f} | {spread:.4f} |")


if __name__ == "__main__":
    main()

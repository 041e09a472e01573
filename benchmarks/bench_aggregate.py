"""Aggregating calopt models by mirror descent vs the best single model, on a9a (issue 4).

For each measure and seed s = 0 … repeat−1, on the embedded a9a (official train/test):

* base models: ``calopt.fit(X, y, measure=M, algorithm=A, seed=s)`` with every other
  default, for each registered algorithm A that solves M's family (spade for a concave
  measure; stamp and amp for a pseudo-linear one; plugin, sgd, gd, subgradient for
  any), mirror descent itself left out;
* aggregate: ``calopt.aggregate.aggregate(models, X, y, radius=λ, measure=M, seed=s)``
  on the same training data, λ fixed (``--lambda``, default calopt's, 1) for every measure.

Done-when (issue 4): on every seed the aggregate's test value is at most 0.005 below
the best single model's (best chosen on the test data, the strictest comparison).
Prints a Markdown table of the means over seeds and the worst per-seed gap, and
writes JSON to benchmarks/results/aggregate.json.

    python benchmarks/bench_aggregate.py [--repeat 5] [--measures f1 gmean] [--lambda 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import calopt
from calopt import datasets
from calopt.training.aggregate import RADIUS, aggregate

RESULTS = Path(__file__).resolve().parent / "results"
TOLERANCE = 0.005


def solvers(measure):
    """Registered algorithms for ``measure``'s family, mirror descent excluded."""
    family = calopt.get_measure(measure).family
    return [entry.name for entry in calopt.list_algorithms()
            if entry.component.family in ("any", family) and entry.name not in ("mirror-descent", "multinomial")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measures", nargs="+", default=["f1", "fbeta:beta=2", "jaccard", "gower-legendre",
                                                             "gmean", "hmean", "qmean", "min"])
    parser.add_argument("--repeat", type=int, default=5, help="seeds 0 … repeat−1")
    parser.add_argument("--lambda", dest="radius", type=float, default=RADIUS, help="λ, Σθ = λ")
    parser.add_argument("--epochs", type=int, default=10, help="passes of the aggregation")
    args = parser.parse_args()
    train, test = datasets.load("a9a", "train"), datasets.load("a9a", "test")
    rows = []
    for measure in args.measures:
        names = solvers(measure)
        runs = []
        for seed in range(args.repeat):
            models = {name: calopt.fit(train.X, train.labels, measure=measure, algorithm=name, seed=seed)
                      for name in names}
            started = time.perf_counter()
            combined = aggregate(models, train.X, train.labels, radius=args.radius, measure=measure,
                                 epochs=args.epochs, seed=seed)
            seconds = time.perf_counter() - started
            single = {name: model.score(test.X, test.labels) for name, model in models.items()}
            value = combined.score(test.X, test.labels)
            runs.append({"seed": seed, "single": single, "aggregate": value, "seconds": seconds,
                         "theta": dict(zip(names, combined.fit_report.aggregate["theta"])),
                         "gap": value - max(single.values())})
        row = {
            "measure": measure, "lambda": args.radius, "epochs": args.epochs, "models": names,
            "single_test": {n: float(np.mean([r["single"][n] for r in runs])) for n in names},
            "aggregate_test": float(np.mean([r["aggregate"] for r in runs])),
            "best_single_test": float(np.mean([max(r["single"].values()) for r in runs])),
            "worst_gap": min(r["gap"] for r in runs),
            "aggregate_seconds": float(np.median([r["seconds"] for r in runs])),
            "runs": runs,
        }
        row["ok"] = bool(row["worst_gap"] >= -TOLERANCE)
        rows.append(row)
        print(f"{measure}: " + ", ".join(f"{n} {v:.4f}" for n, v in row["single_test"].items())
              + f" | aggregate {row['aggregate_test']:.4f} | worst gap {row['worst_gap']:+.4f}"
              + f" | {row['aggregate_seconds']:.2f} s", flush=True)
    print(f"\nmeans over seeds 0-{args.repeat - 1}, λ = {args.radius:g}, {args.epochs} passes\n")
    print("| measure | base models (test) | best single | aggregate | worst per-seed gap | aggregate s |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        bases = ", ".join(f"{n} {v:.4f}" for n, v in row["single_test"].items())
        print(f"| {row['measure']} | {bases} | {row['best_single_test']:.4f} | {row['aggregate_test']:.4f} | "
              f"{row['worst_gap']:+.4f} | {row['aggregate_seconds']:.2f} |")
    RESULTS.mkdir(exist_ok=True)
    machine = f"{platform.processor() or platform.machine()}, {platform.system()}, Python {platform.python_version()}"
    (RESULTS / "aggregate.json").write_text(json.dumps({"machine": machine, "dataset": "a9a", "rows": rows},
                                                       indent=2))
    print(f"\n{sum(r['ok'] for r in rows)}/{len(rows)} measures meet the target "
          f"(aggregate ≥ best single − {TOLERANCE} on every seed)")


if __name__ == "__main__":
    main()

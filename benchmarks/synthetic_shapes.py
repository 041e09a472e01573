"""The runner of the synthetic shape benchmarks (``bench_wide_dense.py``, ``bench_large_sparse.py``):
each cell calopt's default, scikit-learn's tuned-threshold route and its twin (the route with
its folds shuffled by seed 1) on one seed of one shape, for F1 and G-mean; the shapes split once
into a development half (even positions) and a confirmation half (odd)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_suite

MEASURES = ["f1", "gmean"]


def run(shapes: list[tuple], seeds: int, make: Callable[[tuple, int], Any], kwargs: dict[str, Any],
        half: str, out: Path, route: Callable[..., dict[str, Any]] | None = None,
        fit: Callable[..., dict[str, Any]] | None = None) -> None:
    """Every cell of ``shapes`` × ``seeds`` × :data:`MEASURES`, written to ``out``; prints a line a
    cell and the summary. ``route(data, measure, cv_seed=None)``: the route and its twin
    (default :func:`bench_suite.run_route`, the 5-fold tuned threshold); ``fit(data, measure,
    kwargs)``: calopt's cell (default :func:`bench_suite.run_calopt`, in memory)."""
    bench_suite.limit_threads()
    run_route = bench_suite.run_route if route is None else route
    run_calopt = bench_suite.run_calopt if fit is None else fit
    warm = make(shapes[0], 0)  # the process's first fits (imports, first calls) are not timed
    run_calopt(warm, MEASURES[0], kwargs)
    run_route(warm, MEASURES[0])
    cells = {}
    for shape in shapes:
        for seed in range(seeds):
            data = make(shape, seed)
            for measure in MEASURES:
                calopt = run_calopt(data, measure, kwargs)
                route = run_route(data, measure)
                twin = run_route(data, measure, cv_seed=1)
                cell = {"calopt": calopt.get("value"), "route": route["value"], "twin": twin["value"],
                        "calopt_seconds": calopt.get("seconds"), "route_seconds": route["seconds"],
                        "rule": (calopt.get("options") or {}).get("select"), "error": calopt.get("error"),
                        "load_1min": os.getloadavg()[0]}
                cells[f"{shape[0]}|{measure}|{seed}"] = cell
                print(f"{shape[0]:18s} {measure:6s} seed {seed}: route {cell['route']:.4f} calopt "
                      f"{cell['calopt']:.4f} ({cell['calopt'] - cell['route']:+.4f}) twin {cell['twin'] - cell['route']:+.4f}",
                      flush=True)
    out.write_text(json.dumps({"half": half, "calopt_kwargs": kwargs, **bench_suite._header({}), "cells": cells},
                              indent=1))
    print(summary(cells))


def summary(cells: dict) -> str:
    """Mean margin over the route (calopt's and the twin's), the worst cell, cells below −0.02."""
    lines = ["| measure | cells | calopt − route | twin − route | worst: calopt / twin | below −0.02: calopt / twin | time ratio (median) |",
             "|---|---:|---:|---:|---|---|---:|"]
    for measure in [*MEASURES, "all"]:
        chosen = [c for k, c in cells.items() if measure == "all" or k.split("|")[1] == measure]
        margin = np.array([c["calopt"] - c["route"] for c in chosen])
        twin = np.array([c["twin"] - c["route"] for c in chosen])
        ratio = np.median([c["calopt_seconds"] / c["route_seconds"] for c in chosen])
        lines.append(f"| {measure} | {len(chosen)} | {margin.mean():+.4f} | {twin.mean():+.4f} | "
                     f"{margin.min():+.4f} / {twin.min():+.4f} | {np.sum(margin < -0.02)} / {np.sum(twin < -0.02)} | "
                     f"{ratio:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None, description: str, name: str, shapes: list[tuple], seeds: int,
         make: Callable[[tuple, int], Any], route: Callable[..., dict[str, Any]] | None = None,
         stream: Callable[..., dict[str, Any]] | None = None) -> None:
    """The command line of a shape benchmark: ``--half``, ``--out`` (default
    ``results/<name>_<half>.json``, ``<name>_stream_<half>.json`` with ``--stream``),
    ``--calopt-kwargs``, ``--report``; ``--stream`` (where ``stream`` is given: calopt's cell
    from a memory-mapped copy of the training rows, ``stream(data, measure, kwargs)``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--half", choices=["dev", "confirm"], required=True)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--calopt-kwargs", default="{}", help="JSON object of extra keyword arguments for calopt.fit")
    parser.add_argument("--report", action="store_true", help="only print the summary of --out")
    if stream is not None:
        parser.add_argument("--stream", action="store_true",
                            help="calopt trains on the rows streamed from a memory-mapped copy (open_stream)")
    args = parser.parse_args(argv)
    streamed = getattr(args, "stream", False)
    out = args.out or Path(__file__).parent / "results" / f"{name}{'_stream' if streamed else ''}_{args.half}.json"
    if args.report:
        print(summary(json.loads(out.read_text())["cells"]))
        return
    half = shapes[0::2] if args.half == "dev" else shapes[1::2]
    run(half, seeds, make, json.loads(args.calopt_kwargs), args.half, out, route, stream if streamed else None)

"""Reading files: calopt's CSV reader against ``pandas.read_csv`` on the same generated file.

Writes a seeded 100,000 × 20 CSV (19 features drawn from a normal distribution, written
with ``repr`` so every value round-trips, and a 0/1 label column last, no header), then
times, best of ``--repeat`` runs each:

* ``calopt.io.files.read_data`` on it (delimiter sniffed, header detected: the CLI's path);
* ``pandas.read_csv`` with its default float parser, and with ``float_precision="round_trip"``
  (the exact parser calopt reads through);
* pyarrow's CSV reader (``pyarrow.csv.read_csv``), when pyarrow is installed;

and checks that calopt's features are bit-identical to Python's ``float`` of every field.
Prints a table of seconds and MB/s (the file's bytes over the best time) and writes
``--out`` as JSON.

``--products`` also times the two products of a sparse mini-batch (a9a's shape: 325 rows of
123 columns, 11% nonzero) four ways: SciPy's C++ loops called directly (the private
``scipy.sparse._sparsetools`` that :mod:`calopt.io.csr` uses), :class:`calopt.io.csr.CsrRows`
on its public route (the same loops through public ``csr_array``/``csc_array`` views of the
batch, made without the constructor: what calopt runs where the private loops cannot be
imported), the public ``scipy.sparse`` route (a CSR matrix built on the batch's arrays, then
``@``), and NumPy's ``bincount`` over precomputed row numbers (public, the same sums in the
same order); microseconds per batch. Then, end to end, ``calopt.fit`` on the embedded a9a and
ijcnn1 training sets (sparse as read, dense, a9a also with int64 index arrays as
``load_svmlight_file`` reads them): the default fit, and SPADE (G-mean) and STAMP (F1) for
``--epochs`` passes without selection, with the private loops and on the public route
(``calopt.io.csr.csr_matvec`` and ``calopt.io.batches.csr_row_index`` set to None),
interleaved in one process, best of ``--fit-repeat``: wall and CPU seconds, their ratios, and
whether the two models are equal bit for bit. ``--products-only`` skips the CSV readers.

    python benchmarks/bench_io.py
    python benchmarks/bench_io.py --rows 100000 --columns 20 --out benchmarks/results/io.json
    python benchmarks/bench_io.py --products --products-only --fit-repeat 9 --epochs 10
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe  # noqa: E402


def write_file(path: Path, rows: int, columns: int, seed: int = 0) -> None:
    """A seeded CSV of ``columns − 1`` normal features (``repr``: round-trip text) and a 0/1 label."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, columns - 1))
    y = (rng.random(rows) < 0.1).astype(int)
    with open(path, "w", newline="") as f:
        for row, label in zip(X.tolist(), y.tolist()):
            f.write(",".join(map(repr, row)) + f",{label}\n")


def best_time(function: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The least wall time of ``repeat`` calls, and the last call's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def readers(path: Path) -> dict[str, Callable[[], Any]]:
    """The readers timed, by name."""
    import pandas as pd

    from calopt.io.files import read_data

    found = {
        "calopt read_data": lambda: read_data(path),
        "pandas.read_csv (default float parser)": lambda: pd.read_csv(path, header=None),
        "pandas.read_csv (float_precision='round_trip')": lambda: pd.read_csv(
            path, header=None, float_precision="round_trip"),
    }
    try:
        import pyarrow.csv as pacsv
    except ImportError:
        return found
    found["pyarrow.csv.read_csv"] = lambda: pacsv.read_csv(
        path, read_options=pacsv.ReadOptions(autogenerate_column_names=True))
    return found


def check_identical(path: Path, dataset: Any) -> bool:
    """Whether calopt's features are bit-identical to Python's ``float`` of every field."""
    with open(path, newline="") as f:
        reference = np.array([[float(field) for field in row[:-1]] for row in csv.reader(f)])
    return reference.shape == dataset.X.shape and bool(
        (reference.view(np.uint64) == dataset.X.view(np.uint64)).all())


def products(repeat: int = 5, number: int = 2000) -> dict[str, float]:
    """Microseconds per batch of ``X_b @ w`` and ``X_b.T @ c`` (a9a-shaped), by route; each route's
    results are checked bit-identical to the public scipy route's."""
    import timeit

    import scipy.sparse as sp

    from calopt.io.csr import CsrRows

    X = sp.random(32_561, 123, density=0.11, format="csr", random_state=0)
    B, first_row = 325, 1000
    indptr = X.indptr[first_row:first_row + B + 1]
    first, last = int(indptr[0]), int(indptr[-1])
    data, indices = X.data[first:last], X.indices[first:last]
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))  # once per epoch
    rng = np.random.default_rng(0)
    w, c = rng.standard_normal(123), rng.standard_normal(B)

    def public() -> tuple[np.ndarray, np.ndarray]:
        batch = sp.csr_matrix((data, indices, indptr - first), shape=(B, 123))
        return batch @ w, batch.T @ c

    def bincount() -> tuple[np.ndarray, np.ndarray]:
        rows = row_of[first:last] - first_row
        return (np.bincount(rows, weights=data * w.take(indices), minlength=B),
                np.bincount(indices, weights=data * c.take(rows), minlength=123))

    def views() -> tuple[np.ndarray, np.ndarray]:
        rows = CsrRows(X.data, X.indices, indptr, 123)
        return rows @ w, rows.T @ c

    routes = {"calopt CsrRows, private loops (calopt's route)": views,
              "calopt CsrRows, public route (views, no constructor)": _on_public_route(views),
              "scipy.sparse (public): build + X @ w + X.T @ c": public,
              "numpy.bincount (public)": bincount}
    try:
        from scipy.sparse._sparsetools import csc_matvec, csr_matvec
    except ImportError:
        pass
    else:
        def kernels() -> tuple[np.ndarray, np.ndarray]:
            Xw, Xc = np.zeros(B), np.zeros(123)
            csr_matvec(B, 123, indptr, X.indices, X.data, w, Xw)
            csc_matvec(123, B, indptr, X.indices, X.data, c, Xc)
            return Xw, Xc

        routes = {"scipy _sparsetools kernels (private)": kernels, **routes}
    expected = public()
    timed = {}
    for name, route in routes.items():
        got = route()
        assert all((a.view(np.uint64) == b.view(np.uint64)).all() for a, b in zip(got, expected)), name
        timed[name] = round(min(timeit.repeat(route, number=number, repeat=repeat)) / number * 1e6, 1)
    return timed


def _on_public_route(function: Callable[[], Any]) -> Callable[[], Any]:
    """``function`` run with calopt's public route: scipy's private loops hidden from calopt.io."""
    import calopt.io.batches
    import calopt.io.csr

    def run() -> Any:
        saved = calopt.io.csr.csr_matvec, calopt.io.batches.csr_row_index
        calopt.io.csr.csr_matvec = calopt.io.batches.csr_row_index = None
        try:
            return function()
        finally:
            calopt.io.csr.csr_matvec, calopt.io.batches.csr_row_index = saved

    return run


def fit_cases(epochs: int) -> dict[str, tuple[Any, np.ndarray, dict[str, Any]]]:
    """The end-to-end fits: name → (X, y, calopt.fit keywords)."""
    from calopt import datasets

    cases = {}
    for name in ("a9a", "ijcnn1"):
        data = datasets.load(name, "train")
        X, y = data.X.tocsr(), np.asarray(data.labels)
        forms = {"sparse": X, "dense": X.toarray()}
        if name == "a9a":
            forms["sparse, int64 indices"] = X64 = X.copy()
            X64.indices, X64.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
        for form, features in forms.items():
            cases[f"{name} {form}, default fit"] = (features, y, {"measure": "gmean"})
            if form != "dense":
                for algorithm, measure in (("spade", "gmean"), ("stamp", "f1")):
                    cases[f"{name} {form}, {algorithm} {epochs} epochs"] = (
                        features, y, {"measure": measure, "algorithm": algorithm, "select": "none", "epochs": epochs})
    return cases


def end_to_end(repeat: int, epochs: int) -> dict[str, dict[str, Any]]:
    """Per case: best wall and CPU seconds of the private loops and of the public route, run
    alternately (ABBA) in this process, their ratios, and whether the models are bit-identical."""
    import calopt

    found = {}
    for label, (X, y, keywords) in fit_cases(epochs).items():
        def fit(X=X, y=y, keywords=keywords) -> Any:
            return calopt.fit(X, y, seed=0, **keywords)

        routes = {"private": fit, "public": _on_public_route(fit)}
        best = {name: [float("inf"), float("inf")] for name in routes}
        models = {}
        for round_ in range(repeat):
            for name in (list(routes) if round_ % 2 == 0 else list(routes)[::-1]):
                wall, cpu = time.perf_counter(), time.process_time()
                model = routes[name]()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
                models[name] = (np.asarray(model.coef).tobytes(), np.asarray(model.intercept).tobytes(),
                                float(model.threshold).hex())
        (pw, pc), (qw, qc) = best["private"], best["public"]
        found[label] = {"private_wall_s": round(pw, 3), "public_wall_s": round(qw, 3), "wall_ratio": round(qw / pw, 3),
                        "private_cpu_s": round(pc, 3), "public_cpu_s": round(qc, 3), "cpu_ratio": round(qc / pc, 3),
                        "bit_identical": models["private"] == models["public"]}
        print(f"| {label} | " + " | ".join(str(v) for v in found[label].values()) + " |", flush=True)
    return found


def read_files(args: argparse.Namespace) -> dict[str, Any]:
    """The CSV readers' table."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "data.csv"
        write_file(path, args.rows, args.columns)
        size = path.stat().st_size
        results = {}
        for name, read in readers(path).items():
            seconds, value = best_time(read, args.repeat)
            results[name] = {"seconds": round(seconds, 4), "mb_per_s": round(size / 1e6 / seconds, 1)}
            if name.startswith("calopt"):
                results[name]["bit_identical_to_float"] = check_identical(path, value)
    report = {"rows": args.rows, "columns": args.columns, "mb": round(size / 1e6, 1), "repeat": args.repeat,
              "readers": results}
    print(f"{args.rows} × {args.columns} CSV, {report['mb']} MB, best of {args.repeat}")
    print("| reader | seconds | MB/s |")
    print("|---|---:|---:|")
    for name, row in results.items():
        print(f"| {name} | {row['seconds']} | {row['mb_per_s']} |")
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--products", action="store_true", help="also time a sparse batch's two products, and fits")
    parser.add_argument("--products-only", action="store_true", help="the products and fits, not the CSV readers")
    parser.add_argument("--fit-repeat", type=int, default=5, help="runs of each fit on each route (best kept)")
    parser.add_argument("--epochs", type=int, default=10, help="passes of the SPADE and STAMP fits")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"machine": describe(), "load_before": os.getloadavg()}
    print(report["machine"], "load", report["load_before"])
    if not args.products_only:
        report.update(read_files(args))
    if args.products or args.products_only:
        report["products_us_per_batch"] = products()
        print("| sparse batch products (a9a shape) | µs per batch |")
        print("|---|---:|")
        for name, us in report["products_us_per_batch"].items():
            print(f"| {name} | {us} |")
        print(f"| fit (best of {args.fit_repeat}) | private wall s | public wall s | ratio | private CPU s "
              "| public CPU s | ratio | bit-identical |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        report["fits"] = end_to_end(args.fit_repeat, args.epochs)
        report.update(fit_repeat=args.fit_repeat, epochs=args.epochs, load_after=os.getloadavg())
        print("load", report["load_after"])
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()

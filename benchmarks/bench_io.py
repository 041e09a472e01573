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
123 columns, 11% nonzero): SciPy's C++ loops called directly (the private
``scipy.sparse._sparsetools``, which calopt no longer imports: the reference),
:class:`calopt.io.csr.CsrRows` as calopt runs it (scipy's public ``@`` on reused public arrays),
``CsrRows`` with the private loops patched in (the route calopt had before issue 24), the public
``scipy.sparse`` route (a CSR matrix built on the batch's arrays, then ``@``), and NumPy's
``bincount`` over precomputed row numbers (public, the same sums in the same order; float64
only); microseconds per batch. Then, end to end, ``calopt.fit`` on the embedded a9a and ijcnn1
training sets (sparse as read, dense, a9a also with int64 index arrays as
``load_svmlight_file`` reads them): the default fit, and SPADE (G-mean) and STAMP (F1) for
``--epochs`` passes without selection, with the private loops patched into calopt (products and
the epoch's row gather, :mod:`private_loops`) and as calopt is, interleaved in one process, best
of ``--fit-repeat``: wall and CPU seconds, their ratios, and whether the two models are equal bit
for bit. ``--products-only`` skips the CSV readers.

``--libsvm MB`` times LIBSVM text instead (issue 25): two seeded files of about MB megabytes
each, a9a-like sparse (14 of 123 features, values 1) and dense (100 features, normal values times
10^-2..10^2 written with 6-8 significant digits), and their ``.gz``; in rounds (best of
``--repeat``), one process: the raw read and the gzip decompression (the bounds), calopt's
streamed pass (``open_stream(...).parts()``, what an epoch reads), ``convert`` and ``read_data``,
and a streamed pass of the ``.gz``; ``--out`` keeps the file's CSV figures and sets its
``libsvm`` entry. scikit-learn's ``load_svmlight_file`` and, with ``--before
TREE`` (``git archive <commit> calopt cli | tar -x -C TREE``), the earlier calopt's pass and
convert (in a subprocess on TREE, in the same rounds) are timed on the first ``--prefix-mb`` of
each file (their rates are slow), beside calopt's on the same prefix. Every calopt result is
checked bit-identical to ``load_svmlight_file``'s on the prefix.

    python benchmarks/bench_io.py
    python benchmarks/bench_io.py --rows 100000 --columns 20 --out benchmarks/results/io.json
    python benchmarks/bench_io.py --products --products-only --fit-repeat 9 --epochs 10
    python benchmarks/bench_io.py --libsvm 400 --before /tmp/before --out benchmarks/results/io.json
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
import private_loops  # noqa: E402
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

    def rows() -> tuple[np.ndarray, np.ndarray]:  # as the reader serves a batch: its own slices
        batch = CsrRows(X.data[first:last], X.indices[first:last], indptr - first, 123, own=True)
        return batch @ w, batch.T @ c

    def kernels() -> tuple[np.ndarray, np.ndarray]:
        Xw, Xc = np.zeros(B), np.zeros(123)
        private_loops.csr_matvec(B, 123, indptr, X.indices, X.data, w, Xw)
        private_loops.csc_matvec(123, B, indptr, X.indices, X.data, c, Xc)
        return Xw, Xc

    routes = {"scipy _sparsetools kernels (private, reference)": kernels,
              "calopt CsrRows (public scipy arrays, calopt's route)": rows,
              "calopt CsrRows with the private loops patched in (before issue 24)": _on_private_loops(rows),
              "scipy.sparse (public): build + X @ w + X.T @ c": public,
              "numpy.bincount (public)": bincount}
    expected = public()
    for name, route in routes.items():
        got = route()
        assert all((a.view(np.uint64) == b.view(np.uint64)).all() for a, b in zip(got, expected)), name
    best = dict.fromkeys(routes, float("inf"))
    for _ in range(repeat):  # the routes in turn, so that a change of load reaches them all
        for name, route in routes.items():
            best[name] = min(best[name], timeit.timeit(route, number=number) / number)
    return {name: round(seconds * 1e6, 1) for name, seconds in best.items()}


def _on_private_loops(function: Callable[[], Any]) -> Callable[[], Any]:
    """``function`` run with scipy's private loops patched into calopt.io (the reference)."""
    def run() -> Any:
        with private_loops.patched():
            return function()

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
    """Per case: best wall and CPU seconds with the private loops patched in and of calopt as it is
    (public scipy only), run alternately (ABBA) in this process, their ratios, and whether the
    models are bit-identical."""
    import calopt

    found = {}
    for label, (X, y, keywords) in fit_cases(epochs).items():
        def fit(X=X, y=y, keywords=keywords) -> Any:
            return calopt.fit(X, y, seed=0, **keywords)

        routes = {"private": _on_private_loops(fit), "public": fit}
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


def write_libsvm(path: Path, rows: int, kind: str, seed: int = 0) -> None:
    """A seeded LIBSVM file: ``sparse`` (a9a-like: 14 of 123 features, values 1, labels ±1 with 25%
    positive) or ``dense`` (100 features, normal values times 10^-2..10^2, 6-8 significant digits)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for start in range(0, rows, 20_000):
            m = min(20_000, rows - start)
            labels = np.where(rng.random(m) < 0.25, "+1", "-1").tolist()
            if kind == "sparse":
                columns = np.sort(np.argpartition(rng.random((m, 123)), 14, axis=1)[:, :14], axis=1) + 1
                lines = [label + " " + " ".join(f"{j}:1" for j in row) for label, row in zip(labels, columns.tolist())]
            else:
                X = rng.standard_normal((m, 100)) * 10.0 ** rng.integers(-2, 3, size=(m, 100))
                digits = rng.integers(6, 9, size=(m, 100)).tolist()
                lines = [label + " " + " ".join(f"{j}:{v:.{p}g}" for j, (v, p) in enumerate(zip(row, places), 1))
                         for label, row, places in zip(labels, X.tolist(), digits)]
            f.write("\n".join(lines) + "\n")


#: Bytes a row of each kind takes, about (to size the files).
_ROW_BYTES = {"sparse": 75, "dense": 1340}

_BEFORE = """
import json, shutil, sys, tempfile, time
from pathlib import Path
import calopt
from calopt.io.stream import convert, open_stream
path, what = sys.argv[1], sys.argv[2]
started = time.perf_counter()
if what == "pass":
    rows = sum(part.X.shape[0] for part in open_stream(path).parts())
else:
    out = Path(tempfile.mkdtemp()) / "out"
    rows = convert(open_stream(path), out).n_rows
    shutil.rmtree(out.parent)
print(json.dumps({"seconds": time.perf_counter() - started, "rows": rows, "module": calopt.__file__}))
"""


def _before(tree: Path, path: Path, what: str) -> float:
    """Seconds of the earlier calopt's streamed pass or convert of ``path`` (a subprocess on ``tree``)."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    # run in the tree: ``-c`` puts the working directory first on the path, before PYTHONPATH
    done = subprocess.run([sys.executable, "-c", _BEFORE, str(path.resolve()), what], env=env, cwd=tree,
                          capture_output=True, text=True, check=True)
    if not json.loads(done.stdout)["module"].startswith(str(tree.resolve())):
        raise RuntimeError(f"the earlier calopt was not the one imported: {done.stdout}")
    return json.loads(done.stdout)["seconds"]


def _libsvm_routes(path: Path, prefix: Path, before: Path | None) -> dict[str, tuple[Path, Callable[[], Any]]]:
    """The timed routes, by name: (the file timed, the call)."""
    import gzip
    import shutil

    from sklearn.datasets import load_svmlight_file

    from calopt.io.files import read_data
    from calopt.io.stream import convert, open_stream

    def raw(file: Path) -> Callable[[], Any]:
        def read() -> None:
            with (gzip.open(file, "rb") if file.suffix == ".gz" else open(file, "rb")) as f:
                while f.read(32 << 20):
                    pass
        return read

    def streamed(file: Path) -> Callable[[], int]:
        return lambda: sum(part.X.shape[0] for part in open_stream(file).parts())

    def converted(file: Path) -> Callable[[], Any]:
        def run() -> Any:
            out = Path(tempfile.mkdtemp(dir=file.parent)) / "out"
            try:
                return convert(open_stream(file), out).n_rows
            finally:
                shutil.rmtree(out.parent)
        return run

    gz = path.with_name(path.name + ".gz")
    routes = {
        "raw read": (path, raw(path)),
        "gzip decompression (.gz)": (path, raw(gz)),
        "calopt streamed pass": (path, streamed(path)),
        "calopt convert": (path, converted(path)),
        "calopt read_data": (path, lambda: read_data(path)),
        "calopt streamed pass (.gz)": (path, streamed(gz)),
        "prefix: load_svmlight_file": (prefix, lambda: load_svmlight_file(str(prefix))),
        "prefix: calopt streamed pass": (prefix, streamed(prefix)),
        "prefix: calopt convert": (prefix, converted(prefix)),
    }
    if before is not None:
        routes["prefix: before, streamed pass"] = (prefix, lambda: _before(before, prefix, "pass"))
        routes["prefix: before, convert"] = (prefix, lambda: _before(before, prefix, "convert"))
    return routes


def _identical_to_sklearn(prefix: Path) -> bool:
    """Whether calopt's reading of ``prefix`` (in memory, and streamed) is load_svmlight_file's, bit for bit."""
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    from calopt.io.files import read_data
    from calopt.io.stream import _stack, open_stream, survey, widen

    X, y = load_svmlight_file(str(prefix))
    X = sp.csr_matrix(X)
    source = open_stream(prefix, chunk_bytes=4 << 20)
    found = survey(source)
    streamed = _stack([widen(part.X, found.n_features) for part in source.parts()])
    same = True
    for got in (read_data(prefix).X, streamed):
        got = sp.csr_matrix(got)
        same &= got.shape == X.shape and bool((got.indptr == X.indptr).all() and (got.indices == X.indices).all()
                                                and (got.data.view(np.uint64) == X.data.view(np.uint64)).all())
    return same and bool((read_data(prefix).labels == y).all())


def libsvm(megabytes: float, prefix_mb: float, repeat: int, directory: Path, before: Path | None) -> dict[str, Any]:
    """The LIBSVM figures (see the module docstring): per kind, seconds (best of ``repeat``
    interleaved rounds) and MB/s of the decompressed text of the file each route read."""
    import gzip
    import shutil

    report: dict[str, Any] = {}
    for kind in ("sparse", "dense"):
        path, prefix = directory / f"{kind}.svm", directory / f"{kind}-prefix.svm"
        if not path.exists():
            write_libsvm(path, int(megabytes * 1e6 / _ROW_BYTES[kind]), kind)
            with open(path, "rb") as f, gzip.open(path.with_name(path.name + ".gz"), "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g, 32 << 20)
            prefix.unlink(missing_ok=True)
        if not prefix.exists():
            with open(path, "rb") as f:
                head = f.read(int(prefix_mb * 1e6))
            prefix.write_bytes(head[:head.rfind(b"\n") + 1])
        routes = _libsvm_routes(path, prefix, before)
        best = {name: float("inf") for name in routes}
        for _ in range(repeat):
            for name, (_, route) in routes.items():
                started = time.perf_counter()
                seconds = route()
                elapsed = time.perf_counter() - started
                best[name] = min(best[name], seconds if name.startswith("prefix: before") else elapsed)
        size = {name: file.stat().st_size for name, (file, _) in routes.items()}
        report[kind] = {"mb": round(path.stat().st_size / 1e6, 1), "prefix_mb": round(prefix.stat().st_size / 1e6, 1),
                        "gz_mb": round(path.with_name(path.name + ".gz").stat().st_size / 1e6, 1),
                        "bit_identical_to_load_svmlight_file": _identical_to_sklearn(prefix),
                        "routes": {name: {"seconds": round(best[name], 3),
                                          "mb_per_s": round(size[name] / 1e6 / best[name], 1)} for name in routes}}
    return report


def _print_libsvm(report: dict[str, Any]) -> None:
    for kind, found in report["libsvm"].items():
        print(f"{kind}: {found['mb']} MB ({found['gz_mb']} MB .gz; prefix {found['prefix_mb']} MB); "
              f"bit-identical to load_svmlight_file: {found['bit_identical_to_load_svmlight_file']}")
        print("| route | seconds | MB/s of text |")
        print("|---|---:|---:|")
        for name, row in found["routes"].items():
            print(f"| {name} | {row['seconds']} | {row['mb_per_s']} |")


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
    parser.add_argument("--libsvm", type=float, default=None, metavar="MB",
                        help="time LIBSVM text instead: files of about MB megabytes")
    parser.add_argument("--prefix-mb", type=float, default=100.0, help="--libsvm: MB the slow references read")
    parser.add_argument("--before", type=Path, default=None, help="--libsvm: an earlier calopt's source tree")
    parser.add_argument("--data-dir", type=Path, default=None, help="--libsvm: where the files are kept "
                        "(reused when present; default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.libsvm is not None:
        return libsvm_report(args)
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
    if args.out is not None:  # the LIBSVM figures of the same file, when there are some, are kept
        kept = json.loads(args.out.read_text()).get("libsvm") if args.out.exists() else None
        args.out.write_text(json.dumps({**report, **({"libsvm": kept} if kept else {})}, indent=1) + "\n")
    return report


def libsvm_report(args: argparse.Namespace) -> dict[str, Any]:
    """``--libsvm``: the LIBSVM text table, kept in ``--out`` beside the file's other figures."""
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.data_dir or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        report = {"machine": describe(), "cores_usable": len(os.sched_getaffinity(0)),
                  "load_average_before": os.getloadavg(), "repeat": args.repeat,
                  "libsvm": libsvm(args.libsvm, args.prefix_mb, args.repeat, directory, args.before),
                  "load_average_after": os.getloadavg()}
    _print_libsvm(report)
    print(f"load average before {report['load_average_before']}, after {report['load_average_after']}")
    if args.out is not None:  # beside the CSV figures of the same file, when there are some
        kept = json.loads(args.out.read_text()) if args.out.exists() else {}
        args.out.write_text(json.dumps({**kept, "libsvm": report}, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()

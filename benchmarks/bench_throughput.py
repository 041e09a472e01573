"""Epoch throughput of SPADE and STAMP vs scikit-learn's SGDClassifier, and the bandwidth bound.

On each dataset (the embedded ijcnn1 and a9a training splits, w8a from the shared data
folder), max-abs scaled once, in one process:

* calopt solver loop: ``calopt.training.loop.run`` on the prepared arrays with a fixed step
  (no step trial), SPADE on Q-mean and STAMP on F1 with hinge rewards, at fit's
  default batch size n/100 (32 to 1024); an epoch's time is the loop's own timing
  (shuffle, batches, the end-of-epoch sync), without the once-per-epoch record step.
* calopt.fit: the same algorithm and fixed step through ``calopt.fit``; per epoch, the
  loop time it reports, and its whole ``fit_seconds`` (conversion, scaling, the loop,
  threshold tuning) divided by the epochs.
* scikit-learn: ``SGDClassifier(loss="hinge")``, one ``partial_fit`` call per epoch
  (one shuffled pass of per-sample updates in Cython) after an untimed first call.

Every method runs on the CSR matrix as loaded (LIBSVM) and on a dense C-ordered copy of
the same data (other backends than NumPy get the dense copy on their device). Rounds
alternate between the methods so that a busy machine slows all of them alike; each
figure is the median over the rounds, wall clock, and the CPU time of the process is
kept too (steadier when other processes share the cores). Throughput is rows per
second. The bandwidth bound is the time to read X once, bytes(X) / bandwidth, with the
read bandwidth measured in the same run (a sum over a 256 MiB array, best of 5).

A per-batch table gives the µs of one solver update (SPADE on Q-mean and G-mean, STAMP
on F1) and of serving one batch, on the layout as loaded. A last table times the
reader alone (one epoch of shuffled batches plus the two products X·w and Xᵀ·c that
every solver makes per batch) for the ways a CSR matrix can be served: as calopt.io.csr.CsrRows batches, as scipy CSR batches, as dense batches
scattered from the CSR (the last two: what the reader falls back to without scipy's
product loops), or made dense once; "auto" is what calopt.io.batches.ArrayReader chooses.

    python benchmarks/bench_throughput.py [--datasets ijcnn1 a9a w8a] [--epochs 3]
        [--repeat 5] [--backend numpy|torch|array-api-strict|cupy] [--device 0]

Writes benchmarks/results/throughput.json (throughput-<backend>.json for another backend).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier

import calopt
import calopt.io.batches
from calopt import datasets
from machine import device_name
from calopt.algorithms import Problem
from calopt.backends import BACKENDS, is_sparse
from calopt.io.files import read_data
from calopt.io.labels import encode_binary
from calopt.training.pipeline import default_batch_size
from calopt.io.batches import ArrayReader
from calopt.training.loop import Trainer, run

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"
#: (algorithm, measure): the default algorithm of each family, with hinge rewards.
SOLVERS = [("spade", "qmean"), ("stamp", "f1")]
STEP = 10.0


def load(name: str):
    """Training split as CSR float64, max-abs scaled, and ±1 labels."""
    if name in datasets.names():
        data = datasets.load(name, "train")
    else:
        data = read_data(SHARED / f"{name}.bz2")
    y, _ = encode_binary(data.labels)
    X = sp.csr_matrix(data.X, dtype=np.float64)
    scale = np.asarray(abs(X).max(axis=0).toarray()).ravel()
    scale[scale == 0] = 1.0
    return (X @ sp.diags(1.0 / scale)).tocsr(), y


def nbytes(X, itemsize: int = 8) -> int:
    if is_sparse(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.shape[0] * X.shape[1] * itemsize)


def measure_bandwidth(backend, size_bytes: int = 1 << 28) -> dict:
    """Read bandwidth (a sum over a large array) and copy bandwidth in GB/s, best of 5."""
    xp = backend.xp
    itemsize = 4 if backend.dtype == xp.float32 else 8
    a = xp.ones((size_bytes // itemsize,), dtype=backend.dtype, device=backend.device)

    def best(fn) -> float:
        seconds = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            float(fn())  # the host sync
            seconds = min(seconds, time.perf_counter() - started)
        return seconds

    read = best(lambda: xp.sum(a))
    copy = best(lambda: xp.asarray(a, copy=True)[0])
    return {"bytes": size_bytes, "read_GBps": size_bytes / read / 1e9,
            "copy_GBps": 2 * size_bytes / copy / 1e9}


def timed(fn) -> tuple[float, float, object]:
    """(wall s, CPU s, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def solver(algorithm_name, measure, X, y, backend, epochs, batch_size):
    """The algorithm at the fixed step and its Problem (hinge rewards) on (X, y)."""
    n, d = X.shape
    problem = Problem(backend.xp, backend.dtype, backend.device, int(n), int(d),
                      float(np.mean(calopt.to_numpy(y) > 0)), calopt.get_measure(measure),
                      calopt.get_loss("hinge"), batch_size, epochs)
    return calopt.get_algorithm(algorithm_name, step=STEP), problem


def solver_epoch(algorithm_name, measure, X, y, backend, epochs, batch_size):
    """(wall s, CPU s) per epoch of the solver loop alone."""
    algorithm, problem = solver(algorithm_name, measure, X, y, backend, epochs, batch_size)
    reader = ArrayReader(X, y, backend.xp, backend.device)
    _, cpu, result = timed(lambda: run(algorithm, problem, reader, epochs=epochs, seed=0))
    assert result.status >= 0, result.message
    return result.seconds / result.epochs, cpu / result.epochs


def fit_epoch(algorithm_name, measure, X, y, backend, epochs, batch_size):
    """(loop s, CPU s of the whole fit, whole fit_seconds) per epoch of calopt.fit, fixed step."""
    _, cpu, model = timed(lambda: calopt.fit(
        X, y, measure=measure, algorithm=f"{algorithm_name}:step={STEP}", backend=backend.name,
        dtype=backend.dtype_name, device=backend.device, epochs=epochs, batch_size=batch_size, seed=0,
        select="none"))  # the loop alone, no selection
    return model.history[-1]["seconds"] / epochs, cpu / epochs, model.fit_seconds / epochs


def sgd_epoch(X, y, epochs):
    """(wall s, CPU s) per epoch: medians over ``epochs`` partial_fit passes."""
    classifier = SGDClassifier(loss="hinge", random_state=0)
    classifier.partial_fit(X, y, classes=np.array([-1.0, 1.0]))
    times = [timed(lambda: classifier.partial_fit(X, y))[:2] for _ in range(epochs)]
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


#: The ways a reader can serve a CSR matrix: (DENSE_DENSITY, DENSE_BATCH_DENSITY, CsrRows served):
#: with CsrRows, or without (scipy CSR or dense batches).
READER_LAYOUTS = {"csr rows": (np.inf, np.inf, True), "scipy csr batches": (np.inf, np.inf, False),
                  "dense batches": (np.inf, 0.0, False), "dense X": (0.0, 0.0, True), "auto": None}


def reader_epoch(X, y, batch_size, layout):
    """(wall s, CPU s) of one reader epoch with X·w and Xᵀ·c per batch (NumPy)."""
    batches = calopt.io.batches
    saved = batches.DENSE_DENSITY, batches.DENSE_BATCH_DENSITY, batches.fast_products
    dense, dense_batch, rows = READER_LAYOUTS[layout] or (saved[0], saved[1], True)
    batches.DENSE_DENSITY, batches.DENSE_BATCH_DENSITY = dense, dense_batch
    if not rows:
        batches.fast_products = lambda data, indices, indptr: False
    try:  # the reader reads the thresholds when built and in each epoch
        reader = ArrayReader(X, y, calopt.get_backend("numpy").xp)
        w, rng = np.zeros(X.shape[1]), np.random.default_rng(0)

        def one_epoch():
            for X_batch, y_batch, _ in reader.epoch(batch_size, rng):
                X_batch @ w
                X_batch.T @ y_batch

        return timed(one_epoch)[:2]
    finally:
        batches.DENSE_DENSITY, batches.DENSE_BATCH_DENSITY, batches.fast_products = saved


#: The per-batch table: the solvers of SOLVERS and SPADE on G-mean (its dual projection
#: is a root-finder, the costliest one).
PER_BATCH_SOLVERS = [*SOLVERS, ("spade", "gmean")]


def per_batch_costs(X, y, backend, batch_size, epochs: int = 20) -> dict:
    """µs a batch (best epoch of ``epochs``, batches served in order): each solver's update
    alone, timed around the call with the batch fresh from the reader, and the reader's
    serving of the batch."""
    reader = ArrayReader(X, y, backend.xp, backend.device)
    costs = {}
    for algorithm_name, measure in PER_BATCH_SOLVERS:
        algorithm, problem = solver(algorithm_name, measure, X, y, backend, epochs, batch_size)
        trainer = Trainer(algorithm)  # the loop's update (the step count of a scheduled solver)
        state, best = trainer.init(problem), float("inf")
        for epoch in range(epochs):
            spent = batches = 0
            for batch in reader.epoch(batch_size, np.random.default_rng(epoch)):
                started = time.perf_counter()
                state = trainer.update(state, batch, problem)
                spent += time.perf_counter() - started
                batches += 1
            best = min(best, spent / batches)
        costs[f"{algorithm_name} {measure}"] = 1e6 * best
    best = float("inf")
    for epoch in range(epochs):
        started, batches = time.perf_counter(), 0
        for _ in reader.epoch(batch_size, np.random.default_rng(epoch)):
            batches += 1
        best = min(best, (time.perf_counter() - started) / batches)
    costs["serve"] = 1e6 * best
    return costs


def summarise(values) -> dict:
    walls, cpus = [v[0] for v in values], [v[1] for v in values]
    return {"wall": statistics.median(walls), "wall_min": min(walls),
            "cpu": statistics.median(cpus), "cpu_min": min(cpus)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["ijcnn1", "a9a", "w8a"])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per timed run")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (medians are reported)")
    parser.add_argument("--backend", default="numpy", choices=BACKENDS)
    parser.add_argument("--dtype", default=None, help="float64 (cupy: float32)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="limit BLAS threads (default: the library's; 1 on a shared machine, where "
                             "a two-thread matrix-vector product can wait 50× longer on a busy core)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: fit's n/100")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from threadpoolctl import threadpool_info, threadpool_limits

    if args.blas_threads is not None:
        threadpool_limits(args.blas_threads)
    blas = [f"{i['internal_api']} {i['num_threads']} threads" for i in threadpool_info()]
    dtype = args.dtype or ("float32" if args.backend == "cupy" else "float64")
    backend = calopt.get_backend(args.backend, dtype=dtype, device=args.device)
    itemsize = 4 if dtype == "float32" else 8
    machine_name = device_name(backend)
    bandwidth = measure_bandwidth(backend)
    print(f"{backend.name} {dtype} on {machine_name}: read {bandwidth['read_GBps']:.1f} GB/s, "
          f"copy {bandwidth['copy_GBps']:.1f} GB/s", flush=True)
    rows, readers, per_batch = [], [], []
    for name in args.datasets:
        X_csr, y_host = load(name)
        n, d = X_csr.shape
        batch_size = args.batch_size or default_batch_size(n)
        layouts = {"dense": np.ascontiguousarray(X_csr.toarray())}
        if backend.name == "numpy":
            layouts = {"csr": X_csr, **layouts}
        timings: dict[tuple[str, str], list] = {}
        for _ in range(args.repeat):
            for layout, X_host in layouts.items():
                X = X_host if is_sparse(X_host) else backend.asarray(X_host)
                y = backend.asarray(y_host)
                for algorithm_name, measure in SOLVERS:
                    timings.setdefault((layout, algorithm_name), []).append(
                        solver_epoch(algorithm_name, measure, X, y, backend, args.epochs, batch_size))
                for algorithm_name, measure in SOLVERS:
                    timings.setdefault((layout, f"calopt.fit {algorithm_name}"), []).append(
                        fit_epoch(algorithm_name, measure, X, y, backend, args.epochs, batch_size))
                timings.setdefault((layout, "SGDClassifier"), []).append(sgd_epoch(X_host, y_host, args.epochs))
            if backend.name == "numpy":
                for layout in READER_LAYOUTS:
                    timings.setdefault(("reader", layout), []).append(
                        reader_epoch(X_csr, y_host, batch_size, layout))
        costs = per_batch_costs(X_csr if backend.name == "numpy" else backend.asarray(layouts["dense"]),
                                backend.asarray(y_host), backend, batch_size)
        per_batch.append({"dataset": name, "batch_size": batch_size, "layout": "csr" if backend.name == "numpy"
                          else "dense", "microseconds": costs})
        print(f"{name:7s} per batch of {batch_size}: "
              + ", ".join(f"{key} {value:.1f} µs" for key, value in costs.items()), flush=True)
        for (layout, method), values in timings.items():
            if layout == "reader":
                readers.append({"dataset": name, "n": int(n), "d": int(d), "density": X_csr.nnz / (n * d),
                                "batch_size": batch_size, "layout": method, **summarise(values)})
                continue
            stats = summarise(values)
            bound = nbytes(layouts[layout], itemsize) / (bandwidth["read_GBps"] * 1e9)
            row = {"dataset": name, "n": int(n), "d": int(d), "nnz": int(X_csr.nnz), "layout": layout,
                   "method": method, "batch_size": 1 if method == "SGDClassifier" else batch_size,
                   "device": "CPU (NumPy)" if method == "SGDClassifier" else backend.name,
                   **stats, "rows_per_second": n / stats["wall"],
                   "X_bytes": nbytes(layouts[layout], itemsize), "bandwidth_bound_seconds": bound,
                   "bandwidth_ratio": stats["wall"] / bound}
            if method.startswith("calopt.fit"):
                row["fit_seconds_per_epoch"] = statistics.median(v[2] for v in values)
            rows.append(row)
            print(f"{name:7s} {layout:5s} {method:17s} {1e3 * stats['wall']:8.2f} ms/epoch "
                  f"(cpu {1e3 * stats['cpu']:7.2f}, {n / stats['wall'] / 1e6:5.2f} M rows/s, "
                  f"{row['bandwidth_ratio']:5.0f}× the bound)", flush=True)
        for layout in layouts:
            sgd = summarise(timings[(layout, "SGDClassifier")])
            for algorithm_name, _ in SOLVERS:
                ours = summarise(timings[(layout, algorithm_name)])
                print(f"{name:7s} {layout:5s} {algorithm_name}: {sgd['wall'] / ours['wall']:.2f}× "
                      f"SGDClassifier's epoch rate (CPU time: {sgd['cpu'] / ours['cpu']:.2f}×)")
    for r in readers:
        print(f"reader {r['dataset']:7s} {r['layout']:13s} {1e3 * r['wall']:7.2f} ms/epoch (cpu {1e3 * r['cpu']:.2f})")
    out = args.out or RESULTS / ("throughput.json" if backend.name == "numpy" else f"throughput-{backend.name}.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({
        "machine": machine_name, "platform": f"{platform.system()}, Python {platform.python_version()}",
        "backend": backend.name, "dtype": dtype, "epochs": args.epochs, "repeat": args.repeat,
        "step": STEP, "blas": blas, "bandwidth": bandwidth, "rows": rows, "readers": readers,
        "per_batch": per_batch,
    }, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""Fit time per epoch against the number of rows n and of features d, on NumPy and CuPy.

Synthetic float32 data (standard normal features, labels from a noisy linear rule with
about 30% positives, generated on the host and moved to the device once) are trained
with ``calopt.fit`` at a fixed step (no step trial), fit's default batch size (n/100,
32 to 1024) and float32, SPADE on Q-mean and STAMP on F1. The time of an epoch is the
loop time fit reports (shuffle, batches, the end-of-epoch sync; the record step left
out), the median over the epochs of one run after a one-epoch warm-up run; ``fit_seconds``
(scaling, loop, threshold tuning) is kept too. The slope of log(time) against log(n) is fitted over n ≥ 10^5,
where every batch has 1024 rows: an epoch linear in n has slope 1.

    python benchmarks/bench_scaling.py [--backend numpy --backend cupy] [--max-n 3000000]
        [--epochs 3] [--features 100] [--device 0]

On a GPU machine, ``--backend numpy --backend cupy --max-n 10000000`` gives the 10^7 × 100
comparison of issue 5 (NumPy on that machine's CPU and CuPy on its GPU, same data).

Without --backend: NumPy, and CuPy too when it imports and sees a GPU. Writes
benchmarks/results/scaling.json (scaling-<backend>.json per backend other than numpy)
and plots every scaling*.json there into benchmarks/results/scaling.png.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
from pathlib import Path

import numpy as np

import calopt
from machine import device_name
from calopt.errors import BackendError

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = [("spade", "qmean"), ("stamp", "f1")]
STEP = 10.0
N_GRID = [10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6, 3 * 10**6, 10**7]
D_GRID = [10, 30, 100, 300, 1000]


def synthetic(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n × d float32 standard normal rows and ±1 labels (about 30% positives), in chunks."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(d).astype(np.float32) / np.float32(math.sqrt(d))
    X = np.empty((n, d), dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    for start in range(0, n, 1 << 20):
        stop = min(n, start + (1 << 20))
        block = rng.standard_normal((stop - start, d), dtype=np.float32)
        X[start:stop] = block
        noisy = block @ direction + np.float32(0.5) * rng.standard_normal(stop - start, dtype=np.float32)
        y[start:stop] = np.where(noisy > 0.6, 1.0, -1.0)
    return X, y


def time_fit(X, y, algorithm: str, measure: str, backend: str, epochs: int, device) -> dict:
    """Per-epoch loop time of calopt.fit after a one-epoch warm-up (the first pass over new
    memory pays its page faults, and CuPy compiles its kernels on first use)."""
    options = dict(measure=measure, algorithm=f"{algorithm}:step={STEP}", backend=backend,
                   dtype="float32", device=device, seed=0, select="none")  # the loop alone, no selection
    calopt.fit(X, y, epochs=1, **options)
    model = calopt.fit(X, y, epochs=epochs, **options)
    cumulative = [0.0] + [row["seconds"] for row in model.history]
    per_epoch = [b - a for a, b in zip(cumulative, cumulative[1:])]
    return {"epoch_seconds": statistics.median(per_epoch), "epoch_seconds_all": per_epoch,
            "fit_seconds": model.fit_seconds, "batch_size": model.fit_report.batch_size}


def slope(ns, seconds) -> float:
    return float(np.polyfit(np.log(ns), np.log(seconds), 1)[0])


def bench(backend_name: str, args) -> dict:
    device = None if backend_name in ("numpy", "array-api-strict") else args.device  # --device: the GPU
    backend = calopt.get_backend(backend_name, dtype="float32", device=device)
    name = device_name(backend)
    print(f"{backend_name} on {name}", flush=True)
    rows = []
    for n in [n for n in N_GRID if n <= args.max_n]:
        X_host, y_host = synthetic(n, args.features)
        X, y = backend.asarray(X_host), backend.asarray(y_host)  # moved to the device once
        del X_host
        for algorithm, measure in RUNS:
            row = {"n": n, "d": args.features, "algorithm": algorithm,
                   **time_fit(X, y, algorithm, measure, backend_name, args.epochs, device)}
            rows.append(row)
            print(f"  n={n:>9,} d={args.features:>4} {algorithm}: {1e3 * row['epoch_seconds']:9.2f} ms/epoch, "
                  f"fit {row['fit_seconds']:.2f} s (batch {row['batch_size']})", flush=True)
        del X, y
    by_d = []
    for d in D_GRID:
        X_host, y_host = synthetic(args.d_rows, d)
        X, y = backend.asarray(X_host), backend.asarray(y_host)
        algorithm, measure = RUNS[0]
        row = {"n": args.d_rows, "d": d, "algorithm": algorithm,
               **time_fit(X, y, algorithm, measure, backend_name, args.epochs, device)}
        by_d.append(row)
        print(f"  n={args.d_rows:>9,} d={d:>4} {algorithm}: {1e3 * row['epoch_seconds']:9.2f} ms/epoch", flush=True)
    slopes = {}
    for algorithm, _ in RUNS:
        points = [(r["n"], r["epoch_seconds"]) for r in rows if r["algorithm"] == algorithm and r["n"] >= 10**5]
        if len(points) >= 2:
            slopes[algorithm] = slope(*zip(*points))
            print(f"  {algorithm}: slope of log time vs log n (n ≥ 1e5) = {slopes[algorithm]:.3f}")
    return {"backend": backend_name, "device": name, "dtype": "float32", "epochs": args.epochs,
            "max_n": args.max_n, "step": STEP, "rows": rows, "by_d": by_d, "slopes": slopes}


def plot() -> None:
    """benchmarks/results/scaling.png from every scaling*.json in the results folder."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    results = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("scaling*.json"))]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for result in results:
        for algorithm, _ in RUNS:
            points = sorted((r["n"], r["epoch_seconds"]) for r in result["rows"] if r["algorithm"] == algorithm)
            if not points:
                continue
            ns, seconds = map(np.array, zip(*points))
            label = f"{result['backend']} {algorithm}"
            if algorithm in result["slopes"]:
                label += f" (slope {result['slopes'][algorithm]:.2f})"
            left.loglog(ns, seconds, "o-", label=label)
        points = sorted((r["d"], r["epoch_seconds"]) for r in result["by_d"])
        if points:
            ds, seconds = zip(*points)
            right.loglog(ds, seconds, "o-", label=f"{result['backend']} {result['by_d'][0]['algorithm']} "
                                                   f"(n = {result['by_d'][0]['n']:,})")
    ref_n = np.array([1e5, 1e7])
    left.loglog(ref_n, 1e-2 * ref_n / 1e5, "k:", label="slope 1 (linear)")
    left.set(xlabel="rows n (100 features, float32)", ylabel="seconds per epoch", title="Epoch time against n")
    right.set(xlabel="features d", ylabel="seconds per epoch", title="Epoch time against d")
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "scaling.png", dpi=110)
    print(f"wrote {RESULTS / 'scaling.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", action="append", choices=calopt.backends.BACKENDS,
                        help="repeat for several (default: numpy, and cupy when a GPU is usable)")
    parser.add_argument("--max-n", type=int, default=3 * 10**6,
                        help="largest n (default 3e6: 1.2 GB of float32 X, about 4 GB while fitting)")
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--d-rows", type=int, default=10**5, help="rows of the runs against d")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--device", default=None)
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="limit BLAS threads (default: the library's; 1 on a shared machine, where "
                             "a two-thread matrix-vector product can wait 50× longer on a busy core)")
    args = parser.parse_args()
    from threadpoolctl import threadpool_info, threadpool_limits

    if args.blas_threads is not None:
        threadpool_limits(args.blas_threads)
    blas = [f"{i['internal_api']} {i['num_threads']} threads" for i in threadpool_info()]
    backends = args.backend
    if backends is None:
        backends = ["numpy"]
        try:
            calopt.get_backend("cupy")
            backends.append("cupy")
        except BackendError:
            pass
    RESULTS.mkdir(exist_ok=True)
    for backend_name in backends:
        result = bench(backend_name, args)
        result["machine"] = f"{platform.system()}, Python {platform.python_version()}"
        result["blas"] = blas
        out = RESULTS / ("scaling.json" if backend_name == "numpy" else f"scaling-{backend_name}.json")
        out.write_text(json.dumps(result, indent=2))
        print(f"wrote {out}")
    plot()


if __name__ == "__main__":
    main()

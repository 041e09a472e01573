"""How close to the read bound a NumPy mini-batch epoch can come at all (issue 25: "epochs of
SPADE/STAMP at 10⁷ rows within 3× the read-bandwidth bound").

Not calopt: the least work any mini-batch epoch over a memory-mapped ``X.npy`` does, with the
cheapest update there is (one logistic-gradient step on a linear model: the batch's scores
``X_b·v`` and its gradient ``X_bᵀ·g``, nothing else), timed against the read bound measured as
``bench_stream.py epochs`` measures it (X summed once from the page cache, the faster of a sum
per 32 MB block and one sum over the map, best of 3 after a warm-up read). Each data path is a
row order and a way of making a batch:

* ``float64, rows``: calopt's today, without the algorithm: rows in a seeded random order,
  gathered (``np.take``), made float64 and divided by the per-feature scale;
* ``float32, rows``: the same order, the rows as stored (float32) and the scale folded into the
  weights (``v = w / scale``), the products in float32;
* ``float32, runs of R``: the order shuffled by runs of R consecutive rows (a coarser
  shuffle), gathered run by run, float32;
* ``float32, whole batches``: a batch is B consecutive rows (a view, nothing gathered), the
  batches in random order: the least a shuffled epoch can read.

One BLAS thread, one process. ``DIR`` holds ``X.npy`` (float32) and ``y.npy``: the size
benchmark's ``mmap-10m/train``. Results go to ``--out``.

``--calopt`` also times calopt's own SPADE (Q-mean) and STAMP (F1) epochs (``calopt.fit(open_stream(DIR),
algorithm=A, epochs=2, select="none")``, the loop's seconds from its history) with the stream's
batches replaced, for this measurement only, by the ``float32, runs of R`` path: the file's runs of
R rows in one seeded random order (no shuffle buffer), each batch float32 as stored in an object
whose products fold the scale in (``calopt.io.stream.FoldedRows``): the path without calopt's shuffle buffer
(since the tenth session calopt's own folded epochs serve the buffer's runs the same way:
``calopt.io.stream.FoldedRows``; ``bench_stream.py epochs`` times those).

    python benchmarks/epoch_floor.py DIR [--batch-size 1024] [--runs 16 64] [--epochs 2] [--calopt 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

BLOCK_BYTES = 32 << 20


def read_bound(X: np.ndarray) -> float:
    """Seconds to read X once from the page cache: the faster of a sum per 32 MB block and one
    sum over the whole map, best of 3 after a warm-up read."""
    flat = X.reshape(-1)
    step = max(1, BLOCK_BYTES // X.itemsize)
    float(np.add.reduce(flat))
    best = np.inf
    for _ in range(3):
        started = time.perf_counter()
        for start in range(0, flat.size, step):
            float(np.add.reduce(flat[start:start + step]))
        best = min(best, time.perf_counter() - started)
        started = time.perf_counter()
        float(np.add.reduce(flat))
        best = min(best, time.perf_counter() - started)
    return best


def _step(w: np.ndarray, X: np.ndarray, y: np.ndarray, scale: np.ndarray, folded: bool) -> np.ndarray:
    """One logistic-gradient step on a batch (the cheapest update: two products and a few vector ops)."""
    if folded:  # X as stored (float32), the scale in the weights
        v = (w / scale).astype(X.dtype)
        margins = y * (X @ v).astype(np.float64)
        g = (-y / (1.0 + np.exp(np.minimum(margins, 50.0)))).astype(X.dtype)
        return w - 1e-3 * (X.T @ g).astype(np.float64) / scale
    margins = y * (X @ w)
    return w - 1e-3 * (X.T @ (-y / (1.0 + np.exp(np.minimum(margins, 50.0)))))


def epoch(X: np.ndarray, y: np.ndarray, scale: np.ndarray, batch: int, run: int | None, folded: bool,
          rng: np.random.Generator) -> float:
    """Seconds of one epoch: ``run`` None = rows in random order, else runs of ``run`` rows
    (``run == batch``: whole batches, views)."""
    n, d = X.shape
    w = np.zeros(d)
    started = time.perf_counter()
    if run is None:
        order = rng.permutation(n)
        for start in range(0, n, batch):
            rows = order[start:start + batch]
            Xb = np.take(X, rows, axis=0)
            w = _step(w, Xb if folded else Xb / scale, y[rows], scale, folded)
        return time.perf_counter() - started
    usable = n // run * run
    runs, y_runs = X[:usable].reshape(-1, run, d), y[:usable].reshape(-1, run)
    order, per = rng.permutation(usable // run), max(1, batch // run)
    for start in range(0, order.size, per):
        chosen = order[start:start + per]
        if per == 1:  # a whole batch: a view of the mapping
            Xb, yb = runs[chosen[0]], y_runs[chosen[0]]
        else:
            Xb, yb = np.take(runs, chosen, axis=0).reshape(-1, d), y_runs[chosen].reshape(-1)
        w = _step(w, Xb if folded else Xb / scale, yb, scale, folded)
    return time.perf_counter() - started


def calopt_on_runs(directory: Path, run: int, algorithm: str, measure: str, epochs: int) -> list[float]:
    """Seconds of each of calopt's epochs with its stream's batches served as float32 runs of ``run``
    rows (see the module's docstring); the patch is undone before returning."""
    import calopt
    from calopt.io import stream
    from calopt.io.batches import Batch
    from calopt.io.stream import FoldedRows

    def runs_epoch(self, mapped, parts, batch_size, rng, name):  # StreamReader._mapped_epoch's signature
        X = mapped.X
        usable = X.shape[0] // run * run
        blocks, labels = X[:usable].reshape(-1, run, X.shape[1]), self.y[:usable].reshape(-1, run)
        inverse, order, per = 1.0 / self.scale, rng.permutation(usable // run), max(1, batch_size // run)
        for start in range(0, order.size, per):
            chosen = order[start:start + per]
            yield Batch(FoldedRows(np.take(blocks, chosen, axis=0).reshape(-1, X.shape[1]), inverse),
                        labels[chosen].reshape(-1), None)

    original = stream.StreamReader._mapped_epoch
    stream.StreamReader._mapped_epoch = runs_epoch
    try:
        model = calopt.fit(stream.open_stream(directory), measure=measure, algorithm=algorithm, epochs=epochs,
                           select="none")
    finally:
        stream.StreamReader._mapped_epoch = original
    cumulative = [row["seconds"] for row in model.history]
    return [b - a for a, b in zip([0.0, *cumulative[:-1]], cumulative)]


def main(argv: list[str] | None = None) -> None:
    from threadpoolctl import threadpool_limits

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--runs", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--calopt", type=int, metavar="R", help="also calopt's SPADE and STAMP epochs on runs of R rows")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "epoch_floor.json")
    args = parser.parse_args(argv)
    threadpool_limits(1)
    X = np.load(args.directory / "X.npy", mmap_mode="r")
    labels = np.load(args.directory / "y.npy")
    y = np.where(labels == labels.max(), 1.0, -1.0)
    scale = np.maximum(np.abs(X[:100_000]).max(axis=0).astype(np.float64), 1e-12)
    B = args.batch_size
    paths: list[tuple[str, Any, bool]] = [("float64, rows", None, False), ("float32, rows", None, True)]
    paths += [(f"float32, runs of {r}", r, True) for r in args.runs if r < B]
    paths.append(("float32, whole batches", B, True))
    rng = np.random.default_rng(0)
    results: list[dict[str, Any]] = []
    for name, run, folded in paths:
        bound = read_bound(X)
        seconds = [epoch(X, y, scale, B, run, folded, rng) for _ in range(args.epochs)]
        results.append({"path": name, "batch_size": B, "bound_seconds": bound, "epoch_seconds": seconds,
                        "ratio": min(seconds) / bound})
        print(f"{name:26s} batch {B}: read bound {bound:.3f} s, epochs {', '.join(f'{s:.3f}' for s in seconds)} s: "
              f"{min(seconds) / bound:.2f}× the bound", flush=True)
    for algorithm, measure in (("spade", "qmean"), ("stamp", "f1")) if args.calopt else ():
        bound = read_bound(X)
        seconds = calopt_on_runs(args.directory, args.calopt, algorithm, measure, args.epochs)
        results.append({"path": f"calopt {algorithm}, float32, runs of {args.calopt}", "batch_size": None,
                        "bound_seconds": bound, "epoch_seconds": seconds, "ratio": min(seconds) / bound})
        print(f"calopt {algorithm} ({measure}), runs of {args.calopt}: read bound {bound:.3f} s, epochs "
              f"{', '.join(f'{s:.3f}' for s in seconds)} s: {min(seconds) / bound:.2f}× the bound", flush=True)
    out = {"machine": describe(), "rows": int(X.shape[0]), "features": int(X.shape[1]), "dtype": str(X.dtype),
           "results": results}
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

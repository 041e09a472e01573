"""SLND against plain SGD and scikit-learn's SGDClassifier on letter and MNIST-10k (issue 4).

Paper 000 (Figures 5-7) plots top-1 accuracy against passes for SLND and SGD. Here,
for letter (20,000 × 16, 26 classes) and the 10,000 MNIST test images (784 pixels,
10 classes), each split 70/30 stratified (seed 0) and max-abs scaled on the training
part, in the same run:

* SLND: ``calopt train TRAIN --test TEST --algorithm slnd --epochs 10 --json`` in a
  subprocess on the splits written as .npz; the test top-1 after each pass comes from
  the JSON history (seed 0 is the run judged; seeds 1 and 2 show the spread).
* plain SGD, the paper's baseline: the same command with
  ``--algorithm slnd:precondition=false,step=S`` (the same loop with x* = x̃) for each
  step scale S of a grid, for ``--sgd-passes`` passes, and the first pass at which it
  reaches SLND's final test top-1. Its best S is picked with hindsight on the test
  curve (the most favourable choice for SGD).
* scikit-learn: ``SGDClassifier(loss="log_loss", max_iter=10, tol=None,
  random_state=s)`` on the same scaled arrays (s = 0 judged; 1 and 2 for the spread).

Issue 4 is done when SLND reaches its final accuracy within a fifth of the passes
plain SGD needs, and SLND's test top-1 ≥ SGDClassifier's. Writes
benchmarks/results/slnd.json and benchmarks/results/slnd_convergence.png.

    python benchmarks/bench_slnd.py [--sgd-passes 100] [--steps 8 32 128 512 2048]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import top_k_accuracy_score
from sklearn.model_selection import train_test_split

from calopt.io.files import read_data

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"
SLND_PASSES = 10


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    """The 10,000 MNIST test images (IDX3, big-endian header then uint8 pixels) and labels."""
    with gzip.open(SHARED / "mnist-t10k-images-idx3-ubyte.gz", "rb") as handle:
        raw = handle.read()
    n, rows, cols = (int.from_bytes(raw[k:k + 4], "big") for k in (4, 8, 12))
    X = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols).astype(np.float64)
    with gzip.open(SHARED / "mnist-t10k-labels-idx1-ubyte.gz", "rb") as handle:
        y = np.frombuffer(handle.read(), dtype=np.uint8, offset=8).astype(np.int64)
    return X, y


def load_letter() -> tuple[np.ndarray, np.ndarray]:
    data = read_data(SHARED / "letter.keel.csv.bz2")
    return np.asarray(data.X, dtype=np.float64), data.labels


def split_and_scale(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Stratified 70/30 split (seed 0), both parts divided by the training part's max |x|."""
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scale = np.abs(X_train).max(axis=0)
    scale[scale == 0] = 1.0
    return X_train / scale, X_test / scale, y_train, y_test


def calopt_train(train: Path, test: Path, algorithm: str, epochs: int, seed: int = 0) -> dict:
    """``calopt train TRAIN --test TEST --algorithm A --epochs E --json`` in a subprocess."""
    command = [sys.executable, "-m", "calopt_cli", "train", str(train), "--test", str(test),
               "--algorithm", algorithm, "--epochs", str(epochs), "--seed", str(seed), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
    report = json.loads(done.stdout)
    report["command"] = " ".join(["calopt", *command[3:]])
    return report


def first_pass(curve: list[float], target: float) -> int | None:
    """The first pass (1-based) whose test top-1 is ≥ target; None if none is."""
    reached = np.flatnonzero(np.asarray(curve) >= target - 1e-12)
    return int(reached[0]) + 1 if reached.size else None


def run_dataset(name: str, X: np.ndarray, y: np.ndarray, steps: list[float], sgd_passes: int,
                folder: Path) -> dict:
    X_train, X_test, y_train, y_test = split_and_scale(X, y)
    train, test = folder / f"{name}-train.npz", folder / f"{name}-test.npz"
    np.savez(train, X=X_train, y=y_train)
    np.savez(test, X=X_test, y=y_test)

    runs = [calopt_train(train, test, "slnd", SLND_PASSES, seed) for seed in (0, 1, 2)]
    slnd = runs[0]
    slnd_curve = [row["test"] for row in slnd["history"]]
    final = slnd["test"]["top1"]
    slnd_pass = first_pass(slnd_curve, final)
    print(f"{name}: SLND top-1 by pass {', '.join(f'{v:.3f}' for v in slnd_curve)} "
          f"(rank {slnd['rank']}, {slnd['fit_seconds']:.2f} s)", flush=True)

    sgd = []
    for step in steps:
        report = calopt_train(train, test, f"slnd:precondition=false,step={step}", sgd_passes)
        curve = [row["test"] for row in report["history"]]
        sgd.append({"step": step, "command": report["command"], "test_top1": curve,
                    "fit_seconds": report["fit_seconds"], "passes_to_slnd_final": first_pass(curve, final)})
        print(f"{name}: plain SGD step {step:g}: top-1 at passes 1/10/{sgd_passes} = {curve[0]:.3f}/"
              f"{curve[min(9, len(curve) - 1)]:.3f}/{curve[-1]:.3f}, reaches {final:.4f} at pass "
              f"{sgd[-1]['passes_to_slnd_final']}", flush=True)
    reached = [entry for entry in sgd if entry["passes_to_slnd_final"] is not None]
    best = min(reached, key=lambda e: e["passes_to_slnd_final"]) if reached else max(
        sgd, key=lambda e: e["test_top1"][-1])

    sklearn_runs = []
    for seed in (0, 1, 2):
        started = time.perf_counter()
        classifier = SGDClassifier(loss="log_loss", max_iter=10, tol=None, random_state=seed).fit(X_train, y_train)
        seconds = time.perf_counter() - started
        scores = classifier.decision_function(X_test)
        sklearn_runs.append({"seed": seed, "fit_seconds": seconds,
                             "top1": float(np.mean(classifier.predict(X_test) == y_test)),
                             "top5": float(top_k_accuracy_score(y_test, scores, k=5, labels=classifier.classes_))})
    spread = ", ".join(f"{run['top1']:.4f}" for run in sklearn_runs)
    print(f"{name}: SGDClassifier top-1 {sklearn_runs[0]['top1']:.4f} (seeds 0-2: {spread})", flush=True)

    sgd_needs = best["passes_to_slnd_final"]
    speed_ok = slnd_pass is not None and slnd_pass * 5 <= (sgd_needs if sgd_needs is not None else sgd_passes)
    return {
        "name": name, "n_train": int(X_train.shape[0]), "n_test": int(X_test.shape[0]),
        "n_features": int(X.shape[1]), "n_classes": int(np.unique(y).size),
        "slnd": {"command": slnd["command"], "test_top1": slnd_curve, "top1": final,
                 "top5": slnd["test"]["top5"], "macro_f1": slnd["test"]["macro"], "rank": slnd["rank"],
                 "batch_size": slnd["batch_size"], "loss": slnd["loss"], "fit_seconds": slnd["fit_seconds"],
                 "passes_to_final": slnd_pass,
                 "top1_seeds": [run["test"]["top1"] for run in runs]},
        "sgd": sgd,
        "sgd_best": {"step": best["step"], "passes_to_slnd_final": sgd_needs,
                     "top1_after_10": best["test_top1"][min(9, len(best["test_top1"]) - 1)],
                     "top1_last": best["test_top1"][-1]},
        "sgdclassifier": {"top1": sklearn_runs[0]["top1"], "top5": sklearn_runs[0]["top5"],
                          "fit_seconds": sklearn_runs[0]["fit_seconds"], "seeds": sklearn_runs},
        "done_when": {
            "slnd_within_a_fifth_of_sgd_passes": bool(speed_ok),
            "sgd_passes_needed": sgd_needs if sgd_needs is not None else f"> {sgd_passes}",
            "slnd_top1_at_least_sgdclassifier": bool(final >= sklearn_runs[0]["top1"]),
        },
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 3.9))
    for axis, result in zip(np.atleast_1d(axes), results):
        slnd = result["slnd"]
        axis.plot(range(1, len(slnd["test_top1"]) + 1), slnd["test_top1"], "o-", color="C3", lw=2,
                  label=f"SLND (rank {slnd['rank']})")
        shades = plt.cm.viridis(np.linspace(0.0, 0.85, len(result["sgd"])))
        for shade, entry in zip(shades, result["sgd"]):
            axis.plot(range(1, len(entry["test_top1"]) + 1), entry["test_top1"], color=shade, lw=1,
                      alpha=0.8, label=f"plain SGD, step {entry['step']:g}")
        axis.axhline(slnd["top1"], color="C3", ls=":", lw=1)
        axis.plot([10], [result["sgdclassifier"]["top1"]], "k*", ms=10, label="SGDClassifier, 10 epochs")
        axis.set(xscale="log", xlabel="passes over the data", ylabel="test top-1 accuracy",
                 title=f"{result['name']} ({result['n_classes']} classes, d = {result['n_features']})")
        low = min(min(e["test_top1"][4:] or e["test_top1"]) for e in result["sgd"])
        axis.set_ylim(max(0.0, min(low, slnd["test_top1"][0]) - 0.02), slnd["top1"] + 0.04)
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sgd-passes", type=int, default=100)
    parser.add_argument("--steps", type=float, nargs="+", default=[8, 32, 128, 512, 2048])
    parser.add_argument("--datasets", nargs="+", default=["letter", "mnist"])
    args = parser.parse_args()
    loaders = {"letter": load_letter, "mnist": load_mnist}
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.datasets:
            X, y = loaders[name]()
            results.append(run_dataset(name, X, y, args.steps, args.sgd_passes, Path(folder)))
    RESULTS.mkdir(exist_ok=True)
    document = {"machine": platform.platform(), "python": platform.python_version(),
                "split": "stratified 70/30, seed 0, max-abs scaled on the training part",
                "slnd_passes": SLND_PASSES, "sgd_passes": args.sgd_passes, "datasets": results}
    (RESULTS / "slnd.json").write_text(json.dumps(document, indent=2))
    plot(results, RESULTS / "slnd_convergence.png")
    print("\n| data | SLND top-1 (pass reached) | top-5 | plain SGD: passes to SLND's top-1 (step) "
          "| SGDClassifier top-1 | done |")
    print("|---|---|---|---|---|---|")
    for r in results:
        done = r["done_when"]
        print(f"| {r['name']} | {r['slnd']['top1']:.4f} ({r['slnd']['passes_to_final']}) | "
              f"{r['slnd']['top5']:.4f} | {done['sgd_passes_needed']} ({r['sgd_best']['step']:g}) | "
              f"{r['sgdclassifier']['top1']:.4f} | "
              f"{done['slnd_within_a_fifth_of_sgd_passes'] and done['slnd_top1_at_least_sgdclassifier']} |")


if __name__ == "__main__":
    main()

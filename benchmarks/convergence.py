"""Test value against epochs: SPADE on Q-mean and STAMP on F1 (paper 002, Figures 1 and 3).

Trains with calopt's defaults (step chosen by the trial) for 25 passes, recording the
test measure after each pass, on ijcnn1 and a9a (official test files). Writes
benchmarks/results/convergence.json and, when matplotlib is installed,
benchmarks/results/convergence.png.

    python benchmarks/convergence.py [--epochs 25]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import calopt
from calopt import datasets

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = [("qmean", "spade"), ("f1", "stamp")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=25)
    args = parser.parse_args()
    curves = []
    for name in ("ijcnn1", "a9a"):
        train, test = datasets.load(name, "train"), datasets.load(name, "test")
        for measure, algorithm in RUNS:
            model = calopt.fit(train.X, train.labels, measure=measure, algorithm=algorithm,
                               epochs=args.epochs, eval_set=(test.X, test.labels), select="none")
            curve = {"dataset": name, "measure": measure, "algorithm": model.algorithm,
                     "test": [row["test"] for row in model.history],
                     "seconds": [row["seconds"] for row in model.history]}
            curves.append(curve)
            shown = ", ".join(f"{v:.3f}" for v in curve["test"][:: max(1, args.epochs // 8)])
            print(f"{name} {measure} {model.algorithm}: test by epoch {shown} … final {curve['test'][-1]:.4f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "convergence.json").write_text(json.dumps(curves, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for axis, (measure, algorithm) in zip(axes, RUNS):
        for curve in curves:
            if curve["measure"] == measure:
                axis.plot(range(1, len(curve["test"]) + 1), curve["test"], marker=".", label=curve["dataset"])
        axis.set(title=f"{algorithm.upper()} on {measure}", xlabel="passes over the data", ylabel=f"test {measure}")
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / "convergence.png", dpi=110)


if __name__ == "__main__":
    main()

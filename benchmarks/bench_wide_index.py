"""Issue 25: a 400-row LIBSVM file with one feature index at 10⁷, through the command line.

Writes the file (fixed seed: 400 rows, 5 of features 1-49 each, 30% positives; row 8 also has
feature 10⁷), then runs ``calopt train`` (the default, and ``--stream``), ``calopt evaluate``
and ``calopt predict`` on it, each command in a process of its own, and reports each one's
peak resident memory (``ru_maxrss`` of that one child), wall seconds, exit code and the size
of the model file::

    python benchmarks/bench_wide_index.py --workdir /tmp/wide-index --out /tmp/wide-index.json

Before the present-columns map, ``calopt train`` needed (10, 18, 10⁷) float64 L-BFGS histories
(13.4 GiB each) and was killed or stopped with a MemoryError.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WIDTH = 10**7
_MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)")


def write_file(path: Path, rows: int = 400, seed: int = 0) -> None:
    """The benchmark's LIBSVM file (about 19 KB)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(rows):
        label = 1 if rng.random() < 0.3 else -1
        features = sorted(int(j) for j in rng.choice(np.arange(1, 50), size=5, replace=False))
        values = {j: round(float(rng.normal() + (0.8 if label > 0 else 0)), 3) for j in features}
        if i == 7:
            values[WIDTH] = 1.0
        lines.append(f"{label} " + " ".join(f"{j}:{v}" for j, v in sorted(values.items())))
    path.write_text("\n".join(lines) + "\n")


def measured(argv: list[str], cwd: Path) -> dict[str, float]:
    """Peak RSS (MB) and wall seconds of ``argv`` run alone in a child process."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", _MEASURE, *argv], cwd=cwd, capture_output=True, text=True,
                            check=True)
    peak_kb, code = result.stdout.split()
    return {"peak_rss_mb": round(int(peak_kb) / 1024, 1), "seconds": round(time.perf_counter() - started, 2),
            "exit_code": int(code)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    write_file(args.workdir / "wide.svm")
    calopt = str(Path(sys.executable).with_name("calopt"))
    commands = {
        "train": [calopt, "train", "wide.svm", "--no-progress", "-o", "wide.npz"],
        "evaluate": [calopt, "evaluate", "wide.npz", "wide.svm"],
        "predict": [calopt, "predict", "wide.npz", "wide.svm", "--out", "predictions.txt"],
        "train --stream": [calopt, "train", "wide.svm", "--stream", "--no-progress", "-o", "wide-stream.npz"],
    }
    results = {"file_bytes": (args.workdir / "wide.svm").stat().st_size, "load_1min": os.getloadavg()[0]}
    for name, argv in commands.items():
        results[name] = measured(argv, args.workdir)
        print(f"{name:15s} {results[name]}", flush=True)
    results["model_bytes"] = (args.workdir / "wide.npz").stat().st_size
    results["load_1min_after"] = os.getloadavg()[0]
    print(f"model file {results['model_bytes']} bytes; load {results['load_1min']:.2f}-{results['load_1min_after']:.2f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

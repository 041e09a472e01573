"""Regenerate BENCHMARKS.md: runs every benchmark in this folder, then writes the report.

    python benchmarks/report.py            # about 3 minutes on 2 cores
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REPORT = HERE.parent / "BENCHMARKS.md"


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()}, Python {platform.python_version()}"


def main() -> None:
    for script in ("bench_measures.py", "convergence.py"):
        subprocess.run([sys.executable, str(HERE / script)], check=True)
    rows = json.loads((RESULTS / "measures.json").read_text())["rows"]
    curves = json.loads((RESULTS / "convergence.json").read_text())
    import calopt
    import sklearn

    lines = [
        "# Benchmarks",
        "",
        f"Machine: {_machine()}. calopt {calopt.__version__}, scikit-learn {sklearn.__version__}.",
        "GPU: not yet measured (no GPU was lent to the session that produced these figures).",
        "",
        "Regenerate everything with `python benchmarks/report.py` (needs scikit-learn, and",
        "matplotlib for the figure). Figures vary by a few percent from run to run.",
        "",
        "## Measures: calopt defaults vs the scikit-learn plug-in route",
        "",
        "`python benchmarks/bench_measures.py` — for each dataset and measure, in one process:",
        "calopt is `calopt.fit(X, y, measure=M, seed=s)` with every other default, for seeds 0,",
        "1 and 2; its test value is the mean over the seeds (range in brackets) and its time the",
        "median `fit_seconds` (scaling, the step trial, 10 passes and threshold tuning, no",
        "loading). scikit-learn is",
        "MaxAbsScaler + `TunedThresholdClassifierCV(LogisticRegression(max_iter=1000), cv=0.2,",
        "refit=False)` tuning the threshold for the measure on a 20% validation split (time:",
        "scaler + fit). Both test values are computed by the same functions written from",
        "scikit-learn's confusion matrix. ijcnn1 and a9a use their official test files; w8a a",
        "stratified 70/30 split (seed 0). Times are medians of 3 runs.",
        "",
        "| dataset | measure | calopt algorithm (step chosen, seed 0) | calopt test (seeds 0-2) | sklearn test | Δ | calopt s | sklearn s | speed-up |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['measure']} | {r['algorithm']} | {r['calopt_test']:.4f} "
            f"({r['calopt_test_min']:.3f}-{r['calopt_test_max']:.3f}) | "
            f"{r['sklearn_test']:.4f} | {r['calopt_test'] - r['sklearn_test']:+.4f} | "
            f"{r['calopt_seconds']:.3f} | {r['sklearn_seconds']:.3f} | {r['speedup']:.1f}× |"
        )
    met = sum(r["ok"] for r in rows)
    lines += [
        "",
        f"{met} of {len(rows)} rows meet the target of issue 3 (test value at least the scikit-learn",
        "route's minus 0.01, and a shorter fit time).",
        "",
        "Timing caveat: on this shared 2-core machine the scikit-learn route's time varies",
        "between runs of the script (ijcnn1 from 0.45 s to 0.77 s, a9a from 0.41 s to 1.3 s in",
        "the session that wrote this), while calopt's stays within about ±10%. The table is",
        "one run; read its speed-ups as a range of roughly 1.3-3×, not as exact.",
        "",
        "## Convergence: test value against passes (paper 002, Figures 1 and 3)",
        "",
        "`python benchmarks/convergence.py` — SPADE on Q-mean and STAMP on F1 with the default",
        "step trial, 25 passes, test value after each pass (decision threshold 0, i.e. before",
        "the final threshold tuning).",
        "",
        "![convergence](benchmarks/results/convergence.png)",
        "",
        "| dataset | run | " + " | ".join(f"pass {i}" for i in (1, 2, 3, 5, 10, 15, 20, 25)) + " |",
        "|---|---|" + "---:|" * 8,
    ]
    for c in curves:
        picks = [c["test"][i - 1] if i <= len(c["test"]) else float("nan") for i in (1, 2, 3, 5, 10, 15, 20, 25)]
        lines.append(f"| {c['dataset']} | {c['algorithm']} on {c['measure']} | "
                     + " | ".join(f"{v:.3f}" for v in picks) + " |")
    REPORT.write_text("\n".join(lines) + "\n")
    print(f"wrote {REPORT}")


if __name__ == "__main__":
    main()

"""Training under rate constraints (issue 16): calopt against the plug-in route.

Two tasks on the shared binary datasets (ijcnn1 and a9a with their official test files,
w8a with a stratified 70/30 split, seed 0), three bounds each:

* recall at precision ≥ p, p ∈ {0.6, 0.75, 0.9};
* TPR at FPR ≤ f, f ∈ {0.01, 0.05, 0.1} (Neyman-Pearson).

Routes, in one process:

* plug-in (scikit-learn only, written here independently of calopt): MaxAbsScaler, then
  LogisticRegression (C=1) on a stratified 80% of the training rows; the threshold is the
  one with the best validation recall among those meeting the constraint on the other 20%
  (none meeting it: the threshold closest to feasible).
* calopt (default route): ``calopt.fit(X, y, measure="recall", constraints=[spec])``:
  L-BFGS on the logistic loss, C and the passes chosen on held-out rows among the
  feasible thresholds; the threshold the best feasible one on the out-of-fold scores,
  carried over by positive share to the nearest one feasible on the training rows too
  (the row records the rule, ``threshold_rule``, and the held-out value of the rate).
* calopt (constrained solver): the same with ``algorithm="constrained"``, the
  Lagrangian primal-dual solver.

For each: the test recall (the objective), the test value of the constrained rate, and
whether it meets the bound within the test split's sampling error: the bound is met when
the test value is on the right side of it, "within error" when it misses by at most two
standard errors √(r(1−r)/m) (m: the test rows the rate is a share of: predicted positives
for precision, negatives for FPR), and "violated" beyond. Test values are computed from
scikit-learn's confusion matrix. Prints a Markdown table and writes
benchmarks/results/constraints.json.

    python benchmarks/bench_constraints.py [--datasets ijcnn1 a9a w8a]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix
from sklearn.model_selection import train_test_split as sklearn_split
from sklearn.preprocessing import MaxAbsScaler

import calopt
from calopt.models.archive import atomic_write

from bench_measures import load  # the shared datasets, split as the measures table splits them
from machine import cpu_name

RESULTS = Path(__file__).resolve().parent / "results"
TASKS = [("precision", ">=", bound) for bound in (0.6, 0.75, 0.9)] + [("fpr", "<=", bound) for bound in (0.01, 0.05, 0.1)]




def rates(y_true, y_pred):
    """(recall, precision, fpr, predicted positives, negatives) from scikit-learn's confusion matrix."""
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[-1, 1]).ravel().astype(float)
    return {"recall": tp / (tp + fn) if tp + fn else 0.0, "precision": tp / (tp + fp) if tp + fp else 0.0,
            "fpr": fp / (fp + tn) if fp + tn else 0.0, "predicted_positive": tp + fp, "negatives": fp + tn}


def plugin_route(X, y, X_test, rate, op, bound):
    """Logistic regression on 80%, the best feasible threshold for recall on the other 20%."""
    started = time.perf_counter()
    scaler = MaxAbsScaler().fit(X)
    rows = np.arange(y.size)
    fit_rows, held_rows = sklearn_split(rows, test_size=0.2, stratify=y, random_state=0)
    model = LogisticRegression(max_iter=2000).fit(scaler.transform(X[fit_rows]), y[fit_rows])
    scores = model.decision_function(scaler.transform(X[held_rows]))
    y_held = y[held_rows]
    order = np.argsort(-scores, kind="stable")
    positive = y_held[order] > 0
    tp, fp = np.cumsum(positive), np.cumsum(~positive)  # predicting the top k+1 positive
    recall = tp / positive.sum()
    value = tp / (tp + fp) if rate == "precision" else fp / (~positive).sum()
    distinct = np.r_[scores[order][:-1] > scores[order][1:], True]
    violation = np.maximum(bound - value, 0) if op == ">=" else np.maximum(value - bound, 0)
    key = np.where(violation > 0, -1 - violation, recall)
    key[~distinct] = -np.inf
    k = int(np.argmax(key))
    sorted_scores = scores[order]
    threshold = (sorted_scores[k] + sorted_scores[k + 1]) / 2 if k + 1 < sorted_scores.size else sorted_scores[k] - 1
    seconds = time.perf_counter() - started
    return seconds, np.where(model.decision_function(scaler.transform(X_test)) > threshold, 1, -1)


def calopt_route(X, y, X_test, spec, algorithm):
    model = calopt.fit(X, y, measure="recall", constraints=[spec], algorithm=algorithm, seed=0)
    return model.fit_seconds, model.predict(X_test), model


def judged(value, bound, op, m):
    """'met', 'within error' (misses by ≤ 2 standard errors of a share of m rows) or 'violated'; and 2·SE."""
    error = 2 * math.sqrt(max(value * (1 - value), 1e-12) / m) if m else float("inf")
    miss = bound - value if op == ">=" else value - bound
    return ("met" if miss <= 0 else "within error" if miss <= error else "violated"), error


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["ijcnn1", "a9a", "w8a"])
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        X, y, X_test, y_test = load(name)
        for rate, op, bound in TASKS:
            spec = f"{rate}{op}{bound}"
            routes = {"plug-in": plugin_route(X, y, X_test, rate, op, bound)[:2]}
            held_out = {}  # calopt's own account: the threshold's rule and the held-out value of the constraint
            for label, algorithm in (("calopt", None), ("calopt constrained", "constrained")):
                seconds, predicted, model = calopt_route(X, y, X_test, spec, algorithm)
                routes[label] = (seconds, predicted)
                entry, = model.fit_report.constraints
                held_out[label] = {"threshold_rule": model.fit_report.threshold_rule,
                                   "held_out_rate": entry["validation"],
                                   "held_out_satisfied": entry["validation_satisfied"],
                                   "train_rate": entry["train"]}
            for label, (seconds, predicted) in routes.items():
                test = rates(y_test, predicted)
                m = test["predicted_positive"] if rate == "precision" else test["negatives"]
                verdict, error = judged(test[rate], bound, op, m)
                rows.append({"dataset": name, "constraint": spec, "route": label, "test_recall": float(test["recall"]),
                             "test_rate": float(test[rate]), "two_se": float(error), "verdict": verdict,
                             "seconds": float(seconds), **held_out.get(label, {})})
                print(f"{name:7s} {spec:16s} {label:19s} recall {test['recall']:.4f} {rate} {test[rate]:.4f} "
                      f"(±{error:.4f}) {verdict:12s} {seconds:6.2f} s", flush=True)
    summary = {}
    for route in ("calopt", "calopt constrained"):
        pairs = [(r, next(p for p in rows if p["dataset"] == r["dataset"] and p["constraint"] == r["constraint"]
                          and p["route"] == "plug-in")) for r in rows if r["route"] == route]
        both_ok = [(r, p) for r, p in pairs if r["verdict"] != "violated" and p["verdict"] != "violated"]
        summary[route] = {
            "rows": len(pairs),
            "meets_or_beats_plugin_recall": int(sum(r["test_recall"] >= p["test_recall"] for r, p in pairs)),
            "rows_both_within_error": len(both_ok),
            "meets_or_beats_where_both_within_error": int(sum(r["test_recall"] >= p["test_recall"]
                                                              for r, p in both_ok)),
            "violated": int(sum(r["verdict"] == "violated" for r, _ in pairs)),
        }
    summary["plug-in"] = {"violated": int(sum(r["verdict"] == "violated" for r in rows if r["route"] == "plug-in"))}
    machine = {"cpu": cpu_name(), "python": platform.python_version(), "numpy": np.__version__,
               "calopt": calopt.__version__, "command": "python benchmarks/bench_constraints.py"}
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps({"machine": machine, "summary": summary, "rows": rows}, indent=2)
    atomic_write(RESULTS / "constraints.json", lambda f: f.write(text), mode="w")
    print()
    print(json.dumps(summary, indent=2))
    print()
    print("| dataset | constraint | plug-in recall | calopt recall | calopt constrained recall | "
          "plug-in test rate | calopt test rate | constrained test rate |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.datasets:
        for rate, op, bound in TASKS:
            spec = f"{rate}{op}{bound}"
            got = {r["route"]: r for r in rows if r["dataset"] == name and r["constraint"] == spec}
            marks = {"met": "", "within error": " (≈)", "violated": " ✗"}
            print(f"| {name} | {spec} | " + " | ".join(f"{got[k]['test_recall']:.4f}" for k in got) + " | " +
                  " | ".join(f"{got[k]['test_rate']:.4f} ±{got[k]['two_se']:.4f}{marks[got[k]['verdict']]}"
                             for k in got) + " |")


if __name__ == "__main__":
    main()

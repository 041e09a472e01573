"""Which rule should set a constrained model's final threshold (issue 16, item 2)?

One fit per (dataset, constraint, algorithm, selection rule) — the tasks of
``bench_constraints.py`` — and every candidate rule applied to the same fit, so the rules
differ only in the threshold. The settings selection keeps the chosen candidate's
out-of-fold scores (every held-out row scored by a fold model that did not see it); the
model is the refit one (every row). The rules:

* ``train``: the best feasible threshold on the refit model's own training scores
  (what calopt did before);
* ``oof-score``: the best feasible threshold on the out-of-fold scores, used as it is on
  the refit model's scores (fold and refit models are trained alike, on the same scale);
* ``oof-share``: the same threshold carried over by its positive share (the refit model
  predicts positive that share of its training rows);
* ``oof-score-z1`` / ``oof-share-z1`` and ``-z2``: the threshold chosen on the out-of-fold
  scores with each constraint's bound moved by z standard errors of its held-out rate
  (√(r(1−r)/m), m its denominator count there): a one-sided confidence bound, z = 1
  and z = 1.645; then carried over by score or share;
* ``train-z1``: the training-rows rule with the same one-SE margin;
* ``oof-share-feasible`` (and ``-z1-``): the out-of-fold share, but among the thresholds
  that meet the constraints on the refit model's training rows, the one nearest it
  (none does: the ``train`` rule's closest to feasible). It guards the share against a
  jump across tied scores that the fold models' pooled scores do not have.

For each: the test recall, the test rate and ``bench_constraints.judged``'s verdict
(met / within two test SEs / violated). Also the plug-in route of that script for the
recall comparison. Writes benchmarks/results/constraint_threshold_rules.json.

    python benchmarks/constraint_threshold_rules.py [--datasets ijcnn1 a9a w8a] [--select holdout:0.2 cv:5]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import calopt
from calopt.backends import to_numpy
from calopt.constraints import RATES, ConstrainedMeasure
from calopt.models.archive import atomic_write
from calopt.training import selection as selection_module
from calopt.training.threshold import best_threshold, feasible_threshold_at_share, threshold_at_share

from bench_constraints import TASKS, judged, plugin_route, rates
from bench_measures import load
from machine import cpu_name

RESULTS = Path(__file__).resolve().parent / "results"
ALGORITHMS = {"calopt": None, "calopt constrained": "constrained"}


@dataclasses.dataclass(frozen=True)
class MarginMeasure(ConstrainedMeasure):
    """A constrained measure whose constraints must hold z standard errors inside their bounds."""

    name: ClassVar[str] = "constrained-margin"
    z: float = 1.0

    def from_counts(self, tp, fp, tn, fn, *, xp):
        value = self.objective.from_counts(tp, fp, tn, fn, xp=xp)
        violation = xp.zeros_like(value)
        counts = (tp, fp, tn, fn)
        for constraint in self.constraints:
            rate = constraint.value(tp, fp, tn, fn, xp=xp)
            denominator = sum(c * k for c, k in zip(RATES[constraint.rate][1], counts) if c)
            se = xp.sqrt(rate * (1 - rate) / xp.maximum(denominator, xp.ones_like(denominator)))
            gap = (constraint.bound + self.z * se - rate) if constraint.lower else (rate + self.z * se - constraint.bound)
            violation = violation + xp.maximum(gap, xp.zeros_like(gap))
        return xp.where(violation > 0, -1.0 - violation, value)


def capture():
    """Patch Selector.chosen to keep the (selector, state) of the last run."""
    seen: dict[str, Any] = {}
    original = selection_module.Selector.chosen

    def chosen(self, state):
        seen["selector"], seen["state"] = self, state
        return original(self, state)

    selection_module.Selector.chosen = chosen
    return seen


def rule_thresholds(measure, oof, y_held, train_scores, y):
    """Each rule's threshold on the refit model's scores."""
    out = {"train": best_threshold(train_scores, y, measure)[0]}
    out["train-z1"] = best_threshold(train_scores, y, MarginMeasure(objective=measure.objective,
                                                                     constraints=measure.constraints, z=1.0))[0]
    for suffix, z in (("", 0.0), ("-z1", 1.0), ("-z2", 1.645)):
        m = measure if z == 0 else MarginMeasure(objective=measure.objective, constraints=measure.constraints, z=z)
        t, _ = best_threshold(oof, y_held, m)
        share = float(np.mean(oof > t))
        out[f"oof-score{suffix}"] = t
        out[f"oof-share{suffix}"] = float(threshold_at_share(train_scores, share))
        if z != 1.645:
            t, found = feasible_threshold_at_share(train_scores, y, measure, share)
            out[f"oof-share{suffix}-feasible"] = float(t) if bool(found) else out["train"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["ijcnn1", "a9a", "w8a"])
    parser.add_argument("--select", nargs="+", default=["holdout:0.2", "cv:5"])
    args = parser.parse_args()
    seen = capture()
    rows = []
    for name in args.datasets:
        X, y, X_test, y_test = load(name)
        for rate, op, bound in TASKS:
            spec = f"{rate}{op}{bound}"
            _, plug_predicted = plugin_route(X, y, X_test, rate, op, bound)
            plug = rates(y_test, plug_predicted)
            for select in args.select:
                for route, algorithm in ALGORITHMS.items():
                    model = calopt.fit(X, y, measure="recall", constraints=[spec], algorithm=algorithm, seed=0,
                                       select=select)
                    selector, state = seen["selector"], seen["state"]
                    y_held, oof, _ = (None if a is None else to_numpy(a) for a in selector.held_out_scores(state))
                    train_scores = np.asarray(model.decision_function(X)) + model.threshold
                    test_scores = np.asarray(model.decision_function(X_test)) + model.threshold
                    thresholds = rule_thresholds(selector.measure, oof, y_held, train_scores, y)
                    for rule, t in thresholds.items():
                        test = rates(y_test, np.where(test_scores > t, 1, -1))
                        m = test["predicted_positive"] if rate == "precision" else test["negatives"]
                        verdict, error = judged(test[rate], bound, op, m)
                        rows.append({"dataset": name, "constraint": spec, "select": select, "route": route,
                                     "rule": rule, "test_recall": float(test["recall"]),
                                     "test_rate": float(test[rate]), "two_se": float(error), "verdict": verdict,
                                     "plugin_recall": float(plug["recall"]), "plugin_rate": float(plug[rate]),
                                     "fit_seconds": float(model.fit_seconds)})
                        print(f"{name:7s} {spec:16s} {select:11s} {route:19s} {rule:13s} recall "
                              f"{test['recall']:.4f} (plug-in {plug['recall']:.4f}) {rate} {test[rate]:.4f} "
                              f"{verdict}", flush=True)
    summary = {}
    for select in args.select:
        for route in ALGORITHMS:
            for rule in dict.fromkeys(r["rule"] for r in rows):
                chosen = [r for r in rows if r["select"] == select and r["route"] == route and r["rule"] == rule]
                key = f"{select} {route} {rule}"
                summary[key] = {
                    "rows": len(chosen),
                    "met": sum(r["verdict"] == "met" for r in chosen),
                    "violated": sum(r["verdict"] == "violated" for r in chosen),
                    "violated_outside_ijcnn1": sum(r["verdict"] == "violated" for r in chosen
                                                   if r["dataset"] != "ijcnn1"),
                    "recall_at_least_plugin": sum(r["test_recall"] >= r["plugin_recall"] for r in chosen),
                    "mean_recall": float(np.mean([r["test_recall"] for r in chosen])),
                    "mean_signed_slack": float(np.mean([(r["test_rate"] - float(r["constraint"].split("=")[1])) *
                                                        (1 if ">=" in r["constraint"] else -1) for r in chosen])),
                }
    machine = {"cpu": cpu_name(), "python": platform.python_version(), "numpy": np.__version__,
               "calopt": calopt.__version__,
               "command": "python benchmarks/constraint_threshold_rules.py " + " ".join(
                   ["--datasets", *args.datasets, "--select", *args.select])}
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps({"machine": machine, "summary": summary, "rows": rows}, indent=2)
    atomic_write(RESULTS / "constraint_threshold_rules.json", lambda f: f.write(text), mode="w")
    print()
    print("| select | route | rule | met | violated (outside ijcnn1) | recall ≥ plug-in | mean recall | mean slack |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for key, s in summary.items():
        select, route, rule = key.split(" ", 1)[0], key.split(" ", 1)[1].rsplit(" ", 1)[0], key.rsplit(" ", 1)[1]
        print(f"| {select} | {route} | {rule} | {s['met']}/{s['rows']} | {s['violated']} ({s['violated_outside_ijcnn1']}) "
              f"| {s['recall_at_least_plugin']} | {s['mean_recall']:.4f} | {s['mean_signed_slack']:+.4f} |")


if __name__ == "__main__":
    main()

"""Time to reach the plug-in route's test value: calopt vs scikit-learn (issue 5).

For each dataset and measure (the data of bench_measures.py), in the same process:

* the target is the test value of scikit-learn's plug-in route (MaxAbsScaler, then
  TunedThresholdClassifierCV(LogisticRegression) tuning the threshold for the measure on a
  20% validation split), and its time is that route's fit time;
* calopt: ``calopt.fit(X, y, measure=M, algorithm=<the measure's own solver>, epochs=E,
  eval_set=(X_test, y_test), select="none")``: SPADE or STAMP with the one-pass step trial,
  as before the settings selection (the binary default is now lbfgs). Its history holds the test value after each pass, at that pass's tuned
  threshold (what the model would be if training stopped there), and the loop's
  cumulative seconds; the time to the target is the fixed cost (scaling, step trial,
  final tuning: ``fit_seconds`` minus the loop's time) plus the loop's seconds at the
  first pass whose test value reaches it;
* ``SGDClassifier`` with balanced class weights (``class_weight="balanced"``, given to
  ``partial_fit`` as the equivalent sample weights n / (2·n_class), which ``partial_fit``
  needs), on the same max-abs-scaled data, one ``partial_fit`` pass at a time, its own
  predictions scored after each pass; the time is the scaling plus the passes up to the
  first one that reaches the target.

A method that does not reach the target within E passes gets "not reached", with its
best value. Writes benchmarks/results/time_to_target.json.

    python benchmarks/bench_time_to_target.py [--epochs 20] [--datasets ijcnn1 a9a w8a]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.preprocessing import MaxAbsScaler

import calopt
from bench_measures import MEASURES, _score, load, sklearn_route
from machine import describe

RESULTS = Path(__file__).resolve().parent / "results"


def first_reaching(values: list[float], seconds: list[float], target: float) -> tuple[int | None, float | None]:
    """The first pass (1-based) whose value reaches ``target``, and its cumulative seconds."""
    for index, value in enumerate(values):
        if value >= target:
            return index + 1, seconds[index]
    return None, None


def calopt_curve(X, y, X_test, y_test, measure, epochs, seed):
    """Test values after each pass and the time to each (fixed cost included)."""
    # the measure's own solver with the one-pass step trial (select="none"), as this benchmark was defined
    own = calopt.registry.default_algorithm(calopt.get_measure(measure), "direct")
    model = calopt.fit(X, y, measure=measure, algorithm=own, epochs=epochs, seed=seed, eval_set=(X_test, y_test),
                       select="none")
    loop = [row["seconds"] for row in model.history]
    fixed = model.fit_seconds - loop[-1]
    return [row["test"] for row in model.history], [fixed + s for s in loop], model.algorithm


def sgd_balanced_curve(X, y, X_test, y_test, measure, epochs, seed):
    """SGDClassifier with balanced weights, one pass at a time: test values and times."""
    score = _score(measure)
    started = time.perf_counter()
    scaler = MaxAbsScaler().fit(X)
    Xs = scaler.transform(X)
    counts = {label: np.sum(y == label) for label in (-1, 1)}
    weights = np.where(y > 0, y.size / (2 * counts[1]), y.size / (2 * counts[-1]))
    classifier = SGDClassifier(random_state=seed)
    elapsed = time.perf_counter() - started
    Xs_test = scaler.transform(X_test)
    values, times = [], []
    for _ in range(epochs):
        begun = time.perf_counter()
        classifier.partial_fit(Xs, y, classes=np.array([-1, 1]), sample_weight=weights)
        elapsed += time.perf_counter() - begun
        values.append(score(y_test, classifier.predict(Xs_test)))
        times.append(elapsed)
    return values, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["ijcnn1", "a9a", "w8a"])
    parser.add_argument("--measures", nargs="+", default=MEASURES)
    parser.add_argument("--epochs", type=int, default=20, help="passes of calopt and SGDClassifier")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        X, y, X_test, y_test = load(name)
        for measure in args.measures:
            plugin_seconds, predictions = sklearn_route(X, y, X_test, measure)
            target = _score(measure)(y_test, predictions)
            ours, ours_times, algorithm = calopt_curve(X, y, X_test, y_test, measure, args.epochs, args.seed)
            sgd, sgd_times = sgd_balanced_curve(X, y, X_test, y_test, measure, args.epochs, args.seed)
            row = {"dataset": name, "measure": measure, "target": target, "plugin_seconds": plugin_seconds,
                   "algorithm": algorithm, "calopt_test": ours, "calopt_seconds": ours_times,
                   "sgd_test": sgd, "sgd_seconds": sgd_times}
            for key, values, times in (("calopt", ours, ours_times), ("sgd", sgd, sgd_times)):
                row[f"{key}_pass"], row[f"{key}_time"] = first_reaching(values, times, target)
            rows.append(row)
            shown = {key: (f"{row[key + '_time']:.3f} s (pass {row[key + '_pass']})" if row[key + "_pass"]
                           else f"not reached (best {max(row[key + '_test']):.4f})") for key in ("calopt", "sgd")}
            print(f"{name} {measure}: target {target:.4f} in {plugin_seconds:.3f} s; "
                  f"calopt {shown['calopt']}; SGDClassifier balanced {shown['sgd']}", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "time_to_target.json").write_text(json.dumps(
        {"machine": describe(), "epochs": args.epochs, "seed": args.seed, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()

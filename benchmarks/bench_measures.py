"""calopt with defaults vs scikit-learn's plug-in route, per dataset and measure (issue 3).

For each dataset (ijcnn1 and a9a with their official test files, w8a with a stratified
70/30 split, seed 0) and each of the seven measures, in the same process:

* calopt: ``calopt.fit(X, y, measure=M, seed=s)`` with every other default, for seeds
  s = 0 … repeat−1; test value = the mean over the seeds (a stochastic method is judged
  by its mean, and the spread is recorded); time = median ``fit_seconds`` (scaling, step
  trial, training and threshold tuning; no loading).
* scikit-learn: MaxAbsScaler, then TunedThresholdClassifierCV(LogisticRegression,
  cv=0.2, refit=False) tuning the threshold for the measure on a 20% validation split;
  time = scaler fit/transform + the tuned classifier's fit.

Test values of both are computed by the same functions below, written from
scikit-learn's confusion matrix (independent of calopt). Prints a Markdown table and
writes JSON to benchmarks/results/measures.json.

    python benchmarks/bench_measures.py [--repeat 3] [--datasets ijcnn1 a9a w8a]
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
from sklearn.metrics import confusion_matrix, make_scorer
from sklearn.model_selection import TunedThresholdClassifierCV
from sklearn.preprocessing import MaxAbsScaler

import calopt
from calopt import datasets
from calopt.io.files import read_data, train_test_split
from calopt.io.labels import encode_binary

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"


def _rates(y_true, y_pred):
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[-1, 1]).ravel().astype(float)
    return tp, fp, tn, fn


def _div(a, b):
    return a / b if b else 0.0


def _score(name):
    def value(y_true, y_pred):
        tp, fp, tn, fn = _rates(y_true, y_pred)
        tpr, tnr = _div(tp, tp + fn), _div(tn, tn + fp)
        return {
            "min": lambda: min(tpr, tnr),
            "hmean": lambda: _div(2 * tpr * tnr, tpr + tnr),
            "qmean": lambda: 1 - math.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2),
            "gmean": lambda: math.sqrt(tpr * tnr),
            "f1": lambda: _div(2 * tp, 2 * tp + fn + fp),
            "jaccard": lambda: _div(tp, tp + fp + fn),
            "gower-legendre": lambda: _div(tp + tn, tp + 0.5 * (fp + fn) + tn),
        }[name]()

    return value


MEASURES = ["min", "hmean", "qmean", "gmean", "f1", "jaccard", "gower-legendre"]


def load(name):
    if name in datasets.names():
        train, test = datasets.load(name, "train"), datasets.load(name, "test")
    else:
        whole = read_data(SHARED / f"{name}.bz2")
        train, test = train_test_split(whole, 0.3, seed=0)
    y_train, _ = encode_binary(train.labels)
    y_test, _ = encode_binary(test.labels)
    return train.X, y_train, test.X, y_test


def sklearn_route(X, y, X_test, measure):
    started = time.perf_counter()
    scaler = MaxAbsScaler().fit(X)
    Xs = scaler.transform(X)
    tuned = TunedThresholdClassifierCV(
        LogisticRegression(max_iter=1000), scoring=make_scorer(_score(measure)),
        cv=0.2, refit=False, random_state=0,
    ).fit(Xs, y)
    seconds = time.perf_counter() - started
    return seconds, tuned.predict(scaler.transform(X_test))


def calopt_route(X, y, X_test, measure, seed):
    model = calopt.fit(X, y, measure=measure, seed=seed)
    return model.fit_seconds, model.predict(X_test), model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["ijcnn1", "a9a", "w8a"])
    parser.add_argument("--measures", nargs="+", default=MEASURES)
    parser.add_argument("--repeat", type=int, default=3, help="timing repeats (the median is kept)")
    args = parser.parse_args()
    rows = []
    print("| dataset | measure | calopt algorithm (seed 0) | calopt test | sklearn test | Δ | calopt s | sklearn s | speed-up |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.datasets:
        X, y, X_test, y_test = load(name)
        for measure in args.measures:
            score = _score(measure)
            ours = [calopt_route(X, y, X_test, measure, seed) for seed in range(args.repeat)]
            theirs = [sklearn_route(X, y, X_test, measure) for _ in range(args.repeat)]
            ours_s = float(np.median([o[0] for o in ours]))
            theirs_s = float(np.median([t[0] for t in theirs]))
            values = [score(y_test, o[1]) for o in ours]
            ours_v, theirs_v = float(np.mean(values)), score(y_test, theirs[0][1])
            row = {"dataset": name, "measure": measure, "algorithm": ours[0][2].algorithm,
                   "calopt_test": ours_v, "calopt_test_min": min(values), "calopt_test_max": max(values), "sklearn_test": theirs_v, "calopt_seconds": ours_s,
                   "sklearn_seconds": theirs_s, "speedup": theirs_s / ours_s,
                   "ok": bool(ours_v >= theirs_v - 0.01 and ours_s < theirs_s)}
            rows.append(row)
            print(f"| {name} | {measure} | {row['algorithm']} | {ours_v:.4f} | {theirs_v:.4f} | "
                  f"{ours_v - theirs_v:+.4f} | {ours_s:.3f} | {theirs_s:.3f} | {row['speedup']:.1f}× |",
                  flush=True)
    RESULTS.mkdir(exist_ok=True)
    machine = f"{platform.processor() or platform.machine()}, {platform.system()}, Python {platform.python_version()}"
    (RESULTS / "measures.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    print(f"\n{sum(r['ok'] for r in rows)}/{len(rows)} rows meet the target "
          "(test value ≥ sklearn − 0.01 and faster)")


if __name__ == "__main__":
    main()

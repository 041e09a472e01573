"""The K-class decision rule against the argmax and against one scikit-learn multinomial fit (issue 26).

Each shared multiclass set in long-tailed form (class c of K, in label order, keeps a share
geomspace(1, 0.1, K)[c] of its rows: the largest class 10× the smallest), split 70/30
stratified; per split and measure: the test value of ``calopt.fit(X, y, measure=M)`` (the
rule), of the argmax of the same model's scores, and of the argmax of scikit-learn's
``LogisticRegression`` (multinomial, lbfgs, max_iter 1000, C=1, on max-abs scaled features);
the fit time of calopt against LogisticRegression's, measured in turn in this process (best of
``--repeats``). Run: ``python benchmarks/bench_kclass_rule.py --sets letter satimage``.
"""

from __future__ import annotations

import argparse
import bz2
import json
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SETS = {"letter": "letter.keel.csv.bz2", "satimage": "satimage.keel.csv.bz2", "pendigits": "pendigits.keel.csv.bz2",
        "optdigits": "optdigits.keel.csv.bz2"}


def load(name: str, data: Path) -> tuple[np.ndarray, np.ndarray]:
    rows = [line.replace(" ", "").split(",") for line in bz2.open(data / SETS[name], "rt") if line.strip()]
    return np.array([r[:-1] for r in rows], dtype=np.float64), np.array([r[-1] for r in rows])


def long_tailed(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    keep = []
    for c, share in zip(classes, np.geomspace(1.0, 0.1, classes.size)):
        rows = np.flatnonzero(y == c)
        keep.append(rng.choice(rows, size=max(2, int(round(share * rows.size))), replace=False))
    keep = np.sort(np.concatenate(keep))
    return X[keep], y[keep]


def best_time(fit, repeats: int) -> tuple[float, object]:
    times, model = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        model = fit()
        times.append(time.perf_counter() - started)
    return min(times), model


def run(name: str, measures: list[str], splits: int, repeats: int, data: Path) -> list[dict]:
    import calopt
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MaxAbsScaler

    X, y = long_tailed(*load(name, data), seed=0)
    out = []
    for split in range(splits):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=split)
        scaler = MaxAbsScaler().fit(X_train)
        for spec in measures:
            measure = calopt.get_measure(spec)
            reference = rule = None
            t_ref, t_rule = [], []
            for _ in range(repeats):  # interleaved
                seconds, reference = best_time(lambda: LogisticRegression(max_iter=1000).fit(
                    scaler.transform(X_train), y_train), 1)
                t_ref.append(seconds)
                seconds, rule = best_time(lambda: calopt.fit(X_train, y_train, measure=spec, seed=split), 1)
                t_rule.append(seconds)
            classes = list(rule.classes)
            codes = np.searchsorted(np.array(classes), y_test)

            def value(predicted_codes):
                K = len(classes)
                matrix = np.bincount(codes * K + predicted_codes, minlength=K * K).reshape(K, K).astype(float)
                return float(measure.from_confusion(matrix, xp=np))

            argmax = np.argmax(np.asarray(rule.decision_function(X_test)), axis=1)
            sk = np.searchsorted(np.array(classes), reference.predict(scaler.transform(X_test)))
            decision = rule.fit_report.decision
            out.append({"set": name, "split": split, "measure": spec, "rows": int(y.size), "K": len(classes),
                        "smallest_test_class": int(np.bincount(codes).min()),
                        "rule": value(rule.predict_codes(X_test)), "argmax": value(argmax),
                        "sklearn_argmax": value(sk), "held_out": decision.held_out, "gap": decision.gap,
                        "fit_s": min(t_rule), "sklearn_s": min(t_ref), "ratio": min(t_rule) / min(t_ref)})
            print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["letter", "satimage", "pendigits"])
    parser.add_argument("--measures", nargs="+", default=["gmean", "min", "f1"])
    parser.add_argument("--splits", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=SHARED)
    args = parser.parse_args()
    rows = [row for name in args.sets for row in run(name, args.measures, args.splits, args.repeats, args.data)]
    for name in args.sets:
        for spec in args.measures:
            cell = [r for r in rows if r["set"] == name and r["measure"] == spec]
            print(f"{name:10s} {spec:6s} rule {np.mean([r['rule'] for r in cell]):.3f}  argmax "
                  f"{np.mean([r['argmax'] for r in cell]):.3f}  sklearn argmax {np.mean([r['sklearn_argmax'] for r in cell]):.3f}"
                  f"  time ratio (median) {np.median([r['ratio'] for r in cell]):.2f}")


if __name__ == "__main__":
    main()

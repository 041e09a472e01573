"""Measures over K classes (issue 26): each against scikit-learn's, imbalanced-learn's or a plain loop.

The values come from :meth:`calopt.Measure.from_confusion` on the K × K confusion matrix of
:func:`calopt.measures.confusion_matrix`; the references see only the labels. Cases include
classes absent from the labels, from the predictions or from both (a model's K classes on a
split that lacks some), all-wrong predictions (zero_division) and sample weights.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn import metrics

from calopt import get_measure
from calopt.errors import ParameterError
from calopt.measures import confusion_matrix

geometric_mean_score = pytest.importorskip("imblearn.metrics").geometric_mean_score
XP = np  # NumPy is an array API namespace since 2.0


def _cases():
    rng = np.random.default_rng(0)
    cases = []
    for K in (3, 4, 6):
        for _ in range(6):
            n = int(rng.integers(5, 60))
            y_true = rng.integers(0, K, n)
            y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, K, n))
            cases.append((K, y_true, y_pred, None))
            cases.append((K, y_true, y_pred, rng.random(n) + 0.1))
        missing = np.arange(10) % (K - 1)  # class K-1 in neither: the model knows more classes than the split
        cases.append((K, missing, np.where(np.arange(10) < 6, missing, np.roll(missing, 1)), None))
        cases.append((K, np.zeros(8, dtype=int), np.arange(8) % K, None))  # one true class, every class predicted
        cases.append((K, np.arange(9) % K, (np.arange(9) + 1) % K, None))  # every prediction wrong
        only_true = np.arange(12) % K
        cases.append((K, only_true, np.where(only_true == 1, 0, only_true), None))  # class 1 never predicted
    return cases


CASES = _cases()


def _value(spec: str, K: int, y_true, y_pred, weight) -> float:
    matrix = confusion_matrix(XP.asarray(y_true), XP.asarray(y_pred), K, xp=XP,
                              weight=None if weight is None else XP.asarray(weight))
    return float(get_measure(spec).from_confusion(matrix, xp=XP))


def _present(y_true, y_pred) -> list[int]:
    return sorted(set(np.asarray(y_true).tolist()) | set(np.asarray(y_pred).tolist()))


def _recalls(y_true, y_pred, weight) -> list[float]:
    """Plain loop: each present class's weighted recall (0 for a class that is never true)."""
    weight = np.ones(len(y_true)) if weight is None else weight
    out = []
    for c in _present(y_true, y_pred):
        true = sum(w for t, w in zip(y_true, weight) if t == c)
        hit = sum(w for t, p, w in zip(y_true, y_pred, weight) if t == c and p == c)
        out.append(hit / true if true > 0 else 0.0)
    return out


@pytest.mark.parametrize("K, y_true, y_pred, weight", CASES)
def test_the_confusion_matrix_is_scikit_learn_s(K, y_true, y_pred, weight):
    ours = confusion_matrix(XP.asarray(y_true), XP.asarray(y_pred), K, xp=XP,
                            weight=None if weight is None else XP.asarray(weight))
    theirs = metrics.confusion_matrix(y_true, y_pred, labels=np.arange(K), sample_weight=weight)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("K, y_true, y_pred, weight", CASES)
def test_averaged_measures_equal_scikit_learn_s(K, y_true, y_pred, weight):
    kw = {"sample_weight": weight, "zero_division": 0}
    expected = {
        "f1": metrics.f1_score(y_true, y_pred, average="macro", **kw),
        "f1:average=micro": metrics.f1_score(y_true, y_pred, average="micro", **kw),
        "fbeta:beta=2": metrics.fbeta_score(y_true, y_pred, beta=2, average="macro", **kw),
        "fbeta:beta=0.5,average=micro": metrics.fbeta_score(y_true, y_pred, beta=0.5, average="micro", **kw),
        "jaccard": metrics.jaccard_score(y_true, y_pred, average="macro", **kw),
        "jaccard:average=micro": metrics.jaccard_score(y_true, y_pred, average="micro", **kw),
        "precision": metrics.precision_score(y_true, y_pred, average="macro", **kw),
        "accuracy": metrics.accuracy_score(y_true, y_pred, sample_weight=weight),
    }
    for spec, value in expected.items():
        assert _value(spec, K, y_true, y_pred, weight) == pytest.approx(value, abs=1e-12), spec


@pytest.mark.parametrize("K, y_true, y_pred, weight", CASES)
def test_balanced_accuracy_is_scikit_learn_s(K, y_true, y_pred, weight):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "y_pred contains classes not in y_true"
        expected = metrics.balanced_accuracy_score(y_true, y_pred, sample_weight=weight)
    assert _value("balanced-accuracy", K, y_true, y_pred, weight) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("K, y_true, y_pred, weight", CASES)
def test_gmean_is_imbalanced_learn_s_multiclass_gmean(K, y_true, y_pred, weight):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its recall of a class never true is 0 with a warning
        expected = geometric_mean_score(y_true, y_pred, average="multiclass", sample_weight=weight)
    assert _value("gmean", K, y_true, y_pred, weight) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("K, y_true, y_pred, weight", CASES)
def test_the_means_of_the_recalls_equal_a_plain_loop(K, y_true, y_pred, weight):
    recalls = _recalls(y_true, y_pred, weight)
    expected = {
        "min": min(recalls),
        "hmean": 0.0 if min(recalls) == 0 else len(recalls) / sum(1 / r for r in recalls),
        "qmean": 1 - math.sqrt(sum((1 - r) ** 2 for r in recalls) / len(recalls)),
        "gmean": 0.0 if min(recalls) == 0 else math.prod(recalls) ** (1 / len(recalls)),
    }
    for spec, value in expected.items():
        assert _value(spec, K, y_true, y_pred, weight) == pytest.approx(value, abs=1e-12), spec


MEASURES = ["min", "hmean", "qmean", "gmean", "balanced-accuracy", "accuracy", "f1", "fbeta:beta=2", "jaccard",
            "gower-legendre", "precision", "tpr", "tnr"]


@pytest.mark.parametrize("spec", MEASURES)
def test_two_classes_are_the_binary_measure_exactly(spec):
    """K = 2, classes (negative, positive): from_confusion is from_counts to the bit, whatever the counts."""
    rng = np.random.default_rng(1)
    measure = get_measure(spec)
    for _ in range(50):
        matrix = rng.integers(0, 5, (2, 2)).astype(np.float64)
        tp, fp, tn, fn = matrix[1, 1], matrix[0, 1], matrix[0, 0], matrix[1, 0]
        expected = measure.from_counts(XP.asarray(tp), XP.asarray(fp), XP.asarray(tn), XP.asarray(fn), xp=XP)
        assert float(measure.from_confusion(XP.asarray(matrix), xp=XP)) == float(expected)


def test_binary_balanced_accuracy_is_scikit_learn_s():
    rng = np.random.default_rng(2)
    for _ in range(30):
        y_true, y_pred = rng.integers(0, 2, 20), rng.integers(0, 2, 20)
        matrix = confusion_matrix(XP.asarray(y_true), XP.asarray(y_pred), 2, xp=XP)
        assert float(get_measure("bacc").from_confusion(matrix, xp=XP)) == pytest.approx(
            metrics.balanced_accuracy_score(y_true, y_pred), abs=1e-12)


def test_a_two_class_measure_refuses_more_classes():
    matrix = confusion_matrix(XP.asarray([0, 1, 2]), XP.asarray([0, 1, 2]), 3, xp=XP)
    with pytest.raises(ParameterError, match="'tpr' is for two classes; the data have 3"):
        get_measure("tpr").from_confusion(matrix, xp=XP)


def test_an_unknown_average_is_refused():
    with pytest.raises(ParameterError, match="average must be one of macro, micro"):
        get_measure("f1:average=weighted")


def test_the_measures_run_on_array_api_strict_as_on_numpy():
    xps = pytest.importorskip("array_api_strict")
    K, y_true, y_pred, weight = CASES[1]
    for spec in MEASURES[:-2]:
        ours = get_measure(spec).from_confusion(
            confusion_matrix(xps.asarray(y_true), xps.asarray(y_pred), K, xp=xps, weight=xps.asarray(weight)), xp=xps)
        assert float(ours) == pytest.approx(_value(spec, K, y_true, y_pred, weight), abs=1e-12), spec


def test_list_measures_says_which_work_on_more_classes():
    import json

    from typer.testing import CliRunner

    from calopt_cli.app import app

    listed = json.loads(CliRunner().invoke(app, ["list-measures", "--json"]).stdout)
    multiclass = {entry["name"]: entry["multiclass"] for entry in listed}
    assert multiclass["tpr"] is None and multiclass["tnr"] is None
    for name in ("gmean", "hmean", "qmean", "min", "balanced-accuracy", "accuracy", "fbeta", "jaccard"):
        assert multiclass[name], name


@pytest.mark.parametrize("spec", MEASURES[:-2])
def test_a_stack_of_matrices_gives_each_one_s_value(spec):
    """(m, K, K) in one call equals m calls: what a search over many decision rules evaluates."""
    measure = get_measure(spec)
    for K in (2, 3, 5):
        stack = np.stack([confusion_matrix(XP.asarray(t), XP.asarray(p), K, xp=XP)
                          for _, t, p, _ in [c for c in CASES if c[0] == max(K, 3)][:8]
                          if max(t.max(), p.max()) < K] or [np.eye(K)])
        batched = measure.from_confusion(XP.asarray(stack), xp=XP)
        one_by_one = [float(measure.from_confusion(XP.asarray(m), xp=XP)) for m in stack]
        np.testing.assert_allclose(batched, one_by_one, rtol=0, atol=1e-15)


@pytest.mark.parametrize("K, y_true, y_pred, weight", CASES[::3])
def test_the_multiclass_scorer_is_the_measure_on_k_classes(K, y_true, y_pred, weight):
    """measure_score(average="multiclass") on text labels equals scikit-learn's and imbalanced-learn's
    scores of the same labels (the scorer a grid search over a K-class CaloptClassifier uses)."""
    from calopt.sklearn import make_scorer, measure_score

    names = np.array(["ant", "bee", "cat", "dog", "eel", "fox"])
    t, p = names[y_true], names[y_pred]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = {"gmean": geometric_mean_score(t, p, average="multiclass", sample_weight=weight),
                    "f1": metrics.f1_score(t, p, average="macro", sample_weight=weight, zero_division=0),
                    "balanced-accuracy": metrics.balanced_accuracy_score(t, p, sample_weight=weight)}
    for spec, value in expected.items():
        ours = measure_score(t, p, measure=spec, average="multiclass", sample_weight=weight)
        assert ours == pytest.approx(value, abs=1e-12), spec

    from sklearn.base import BaseEstimator, ClassifierMixin

    class Fixed(ClassifierMixin, BaseEstimator):  # an estimator that predicts p, as a scorer calls it
        classes_ = names

        def predict(self, X):
            return p

    scored = make_scorer("gmean", average="multiclass")(Fixed(), np.zeros((len(t), 1)), t, sample_weight=weight)
    assert scored == pytest.approx(expected["gmean"], abs=1e-12)


K_CLASS = ["min", "hmean", "qmean", "gmean", "balanced-accuracy", "accuracy", "f1", "fbeta:beta=2", "jaccard",
           "f1:average=micro"]


@pytest.mark.parametrize("spec", K_CLASS)
def test_the_class_count_form_is_the_confusion_matrix_s_value(spec):
    """from_class_counts of each class's one-vs-rest counts (TP, FP, TN, FN, counted by plain loops)
    equals from_confusion on every case (absent classes, weights); has_class_count_form says so."""
    from calopt.measures import has_class_count_form

    measure = get_measure(spec)
    assert has_class_count_form(measure)
    for K, y_true, y_pred, weight in CASES:
        w = np.ones(len(y_true)) if weight is None else weight
        counts = np.zeros((4, K))
        for t, p, v in zip(y_true, y_pred, w):
            for c in range(K):
                counts[0 if (t == c and p == c) else 1 if p == c else 3 if t == c else 2, c] += v
        tp, fp, fn, tn = counts[0], counts[1], counts[3], counts[2]
        expected = _value(spec, K, y_true, y_pred, weight)
        assert float(measure.from_class_counts(tp, fp, tn, fn, xp=XP)) == pytest.approx(expected, abs=1e-12)


def test_a_measure_that_overrides_from_classes_alone_has_no_class_count_form():
    """A subclass whose from_classes uses more than the counts (here an off-diagonal cell) must not be
    searched on counts; one that gives from_class_counts is, and its from_classes follows it."""
    import dataclasses

    from calopt.measures import has_class_count_form
    from calopt_measures.concave import GMean

    @dataclasses.dataclass(frozen=True)
    class OffDiagonal(GMean):
        def from_classes(self, matrix, *, xp):
            return matrix[..., 0, 1]

    @dataclasses.dataclass(frozen=True)
    class Counted(GMean):
        def from_class_counts(self, tp, fp, tn, fn, *, xp):
            return xp.sum(tp, axis=-1)

    assert not has_class_count_form(OffDiagonal())
    assert has_class_count_form(Counted())
    matrix = np.arange(9.0).reshape(3, 3)
    assert float(Counted().from_confusion(matrix, xp=XP)) == 0 + 4 + 8

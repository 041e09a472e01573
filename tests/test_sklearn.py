"""calopt inside scikit-learn: CaloptClassifier against scikit-learn's own checks, scorers against
scikit-learn's and imbalanced-learn's metrics, and model export to a scikit-learn classifier.

References are independent of the code under test: scikit-learn's estimator checks and
metrics, imbalanced-learn's G-mean, formulas written here from confusion matrices, and
:func:`calopt.fit` (the pipeline the estimator wraps) for what the estimator must equal.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import pickle
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from imblearn.metrics import geometric_mean_score
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import (
    balanced_accuracy_score,
    confusion_matrix,
    f1_score,
    fbeta_score,
    jaccard_score,
)
from sklearn.metrics import make_scorer as sklearn_make_scorer
from sklearn.model_selection import (
    GridSearchCV,
    StratifiedKFold,
    TunedThresholdClassifierCV,
    cross_val_score,
)
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import MaxAbsScaler, StandardScaler
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.estimator_checks import check_array_api_input, check_classifiers_train, parametrize_with_checks
from sklearn.utils.metaestimators import available_if

import calopt
from calopt import datasets, registry
from calopt.models.report import PartialFitReport
from calopt.registry import plugin_manager
from calopt.sklearn import CaloptClassifier, make_scorer, measure_score

#: The checks a stochastic configuration fails, as scikit-learn declares them for its own SGDClassifier
#: (sklearn/utils/_test_common/instance_generator.py), for the same reason.
SGD_EXPECTED_FAILURES = {
    check: "a stochastic solver draws its mini-batches at random, so a row of weight k is not k copies of "
           "the row (scikit-learn declares the same for SGDClassifier)"
    for check in ("check_sample_weight_equivalence_on_dense_data", "check_sample_weight_equivalence_on_sparse_data")
}
#: The same checks for the default, lbfgs with its settings chosen on folds: a row of weight k lies in one
#: fold and its k copies in several, as in any cross-validation; and calopt rescales weights to mean 1 (only
#: their ratios matter, as documented), so lbfgs's ℓ2 term weighs as much against n rows of weight k as
#: against n rows, where k copies of each row would make it k times lighter.
FOLD_EXPECTED_FAILURES = {
    check: "the settings are chosen on folds drawn over rows (a row of weight k lies in one fold, its k copies "
           "in several), and weights are rescaled to mean 1, so the l2 term does not shrink with k copies"
    for check in SGD_EXPECTED_FAILURES
}
#: Where predict_proba exists (the logistic models) its argmax is not always predict's class, whose threshold is tuned
#: for the measure: scikit-learn declares the same check for its TunedThresholdClassifierCV. The check's other
#: assertions run on the same estimator without predict_proba (test_check_classifiers_train_without_predict_proba).
THRESHOLD_EXPECTED_FAILURES = {
    "check_classifiers_train": "the threshold is tuned for the measure, not at probability 0.5, so predict_proba's "
                               "argmax need not be predict (scikit-learn declares the same for TunedThresholdClassifierCV)"
}
#: The check weighs class 0 by 1000 and class 1 by 1e-4 and wants 87% of the predictions to be class 0. calopt tunes
#: the threshold for the measure, not the weighted error: under these weights every threshold's weighted F1 is ~1e-7
#: (so its best is nearly arbitrary), and G-mean does not change with class weights at all (TPR and TNR each lie
#: within one class). The exact semantics are tested against compute_sample_weight below.
CLASS_WEIGHT_EXPECTED_FAILURES = {
    "check_class_weight_classifiers": "the threshold maximises the measure, not the class-weighted accuracy: with "
                                      "weights 1000 and 1e-4 the weighted F1 of every threshold is ~0, and G-mean "
                                      "does not depend on class weights"
}
ESTIMATORS = [
    CaloptClassifier(),  # binary: lbfgs, settings cross-fitted; multiclass: multinomial L-BFGS
    CaloptClassifier(algorithm="gd", select="none"),  # deterministic, no folds: passes the sample-weight checks
    CaloptClassifier(measure="gmean", algorithm="spade"),  # the measure's own solver
    CaloptClassifier(measure="gmean", algorithm="plugin"),  # the papers' plug-in route (a held-out threshold)
]
STOCHASTIC = {"spade", "stamp", "sgd", "plugin"}


@pytest.fixture(autouse=True)
def _scipy_array_api(monkeypatch):
    """scikit-learn refuses array-API dispatch unless SCIPY_ARRAY_API=1 (for SciPy's own array-API
    support); calopt calls no SciPy function on array-API inputs, so setting it here suffices."""
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")


def expected_failed_checks(estimator: CaloptClassifier) -> dict[str, str]:
    """None for gd without folds (deterministic, full batch, an ℓ2 term of 1e-6); SGD's for a stochastic
    solver; the folds' (and the mean-1 weights') reason for the default, lbfgs cross-fitted; the tuned
    threshold's where predict_proba exists, and the measure's (class weights) for all but gd."""
    if estimator.algorithm in STOCHASTIC:
        failures = dict(SGD_EXPECTED_FAILURES)
    else:
        failures = {} if estimator.select == "none" else dict(FOLD_EXPECTED_FAILURES)
    if hasattr(estimator, "predict_proba"):
        failures.update(THRESHOLD_EXPECTED_FAILURES)
    if estimator.select != "none":
        failures.update(CLASS_WEIGHT_EXPECTED_FAILURES)
    return failures


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_expected_failures_are_the_ones_scikit_learn_declares_for_sgd():
    """Read from scikit-learn's own table of its test suite, when this version has it."""
    try:
        from sklearn.linear_model import SGDClassifier
        from sklearn.utils._test_common.instance_generator import PER_ESTIMATOR_XFAIL_CHECKS
    except ImportError:  # pragma: no cover - a private module of scikit-learn's tests
        pytest.skip("this scikit-learn has no PER_ESTIMATOR_XFAIL_CHECKS table")
    assert set(SGD_EXPECTED_FAILURES) <= set(PER_ESTIMATOR_XFAIL_CHECKS[SGDClassifier])
    assert set(THRESHOLD_EXPECTED_FAILURES) <= set(PER_ESTIMATOR_XFAIL_CHECKS[TunedThresholdClassifierCV])


class _WithoutProbabilities(CaloptClassifier):
    """CaloptClassifier without predict_proba, for the rest of check_classifiers_train."""

    @available_if(lambda estimator: False)
    def predict_proba(self, X):  # pragma: no cover - never available
        raise AssertionError


@pytest.mark.parametrize("options", [{}, {"measure": "gmean", "algorithm": "plugin"}])
def test_check_classifiers_train_without_predict_proba(options):
    """Everything check_classifiers_train asserts but predict_proba's argmax (accuracy, shapes, decision_function
    agreeing with predict, errors on a wrong width), on the configurations that have predict_proba."""
    estimator = _WithoutProbabilities(**options)
    assert not hasattr(estimator, "predict_proba")
    check_classifiers_train("CaloptClassifier", estimator)
    check_classifiers_train("CaloptClassifier", estimator, readonly_memmap=True, X_dtype="float32")


def test_the_docstring_s_check_estimator_call_passes_clean():
    """The call the docstring shows is the configuration checked here with no expected failure."""
    call = 'check_estimator(CaloptClassifier(algorithm="gd", select="none"))'
    assert call in " ".join(CaloptClassifier.__doc__.split())
    clean = CaloptClassifier(algorithm="gd", select="none")
    assert any(estimator.get_params() == clean.get_params() for estimator in ESTIMATORS)
    assert expected_failed_checks(clean) == {}


def _binary_data(n=400, seed=0, weights=(0.8,)):
    return make_classification(n_samples=n, n_features=8, n_informative=5, weights=list(weights),
                               random_state=seed)


# -- the estimator is calopt.fit ---------------------------------------------------------------
@pytest.mark.parametrize("measure, algorithm", [("f1", None), ("gmean", None), ("qmean", "plugin")])
def test_fit_is_calopt_fit(measure, algorithm):
    X, y = _binary_data()
    estimator = CaloptClassifier(measure, algorithm=algorithm, random_state=3).fit(X, y)
    model = calopt.fit(X, y, measure=measure, algorithm=algorithm, seed=3)
    np.testing.assert_array_equal(estimator.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(estimator.predict(X), model.predict(X))
    assert estimator.coef_.shape == (1, 8) and estimator.intercept_.shape == (1,)
    assert estimator.model_.algorithm == model.algorithm
    assert estimator.n_iter_ == model.fit_report.epochs >= 1


def test_multiclass_is_one_vs_rest_as_calopt_fit():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])
    labels = names[y]
    estimator = CaloptClassifier(random_state=0).fit(X, labels)
    model = calopt.fit(X, y, seed=0)
    assert model.gains is not None  # the default measure, F1: the macro-F1 rule
    scores = model.decision_function(X)
    proba = np.exp(scores - scores.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(estimator.predict_proba(X), proba)
    np.testing.assert_allclose(estimator.decision_function(X), proba @ model.gains)  # the rule's scores
    assert estimator.coef_.shape == (3, 4) and estimator.intercept_.shape == (3,)
    np.testing.assert_array_equal(estimator.predict(X), names[np.argmax(proba @ model.gains, axis=1)])
    np.testing.assert_array_equal(estimator.predict(X), names[model.predict(X)])
    assert estimator.predict(X).dtype.kind == "U"
    assert estimator.score(X, labels) == pytest.approx(f1_score(labels, estimator.predict(X), average="macro"))
    assert estimator.score(X, labels) == pytest.approx(model.score(X, y))


def test_multiclass_estimator_trains_for_min_recall_and_keeps_predict_proba():
    """CaloptClassifier(measure="min") on long-tailed classes: predict is the rule's, whose least
    per-class recall (scikit-learn's recall_score) beats the argmax of the same probabilities."""
    from sklearn.datasets import make_classification
    from sklearn.metrics import recall_score

    X, y = make_classification(1500, 10, n_informative=6, n_classes=4, weights=[0.6, 0.25, 0.1, 0.05],
                               random_state=0)
    estimator = CaloptClassifier(measure="min", random_state=0).fit(X, y)
    predicted = estimator.predict(X)
    argmax = estimator.classes_[np.argmax(estimator.predict_proba(X), axis=1)]
    assert recall_score(y, predicted, average=None).min() > recall_score(y, argmax, average=None).min() + 0.2
    assert estimator.score(X, y) == pytest.approx(recall_score(y, predicted, average=None).min())
    decision = estimator.model_.fit_report.decision
    assert decision.rule == "gain matrix" and decision.held_out > decision.argmax


def test_string_labels_train_the_same_model_as_numbers():
    X, y = _binary_data()
    words = np.where(y == 1, "yes", "no")  # sorted: "no" < "yes", so "yes" is the positive class
    as_words = CaloptClassifier(random_state=0).fit(X, words)
    as_numbers = CaloptClassifier(random_state=0).fit(X, y)
    assert as_words.classes_.tolist() == ["no", "yes"]
    np.testing.assert_array_equal(as_words.decision_function(X), as_numbers.decision_function(X))
    np.testing.assert_array_equal(as_words.predict(X), np.where(as_numbers.predict(X) == 1, "yes", "no"))
    assert as_words.model_.classes == ("no", "yes")


def test_score_is_the_measure_trained_for():
    X, y = _binary_data(seed=1)
    estimator = CaloptClassifier("fbeta:beta=2", random_state=0).fit(X, y)
    assert estimator.score(X, y) == pytest.approx(fbeta_score(y, estimator.predict(X), beta=2))
    weights = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    assert estimator.score(X, y, sample_weight=weights) == pytest.approx(
        fbeta_score(y, estimator.predict(X), beta=2, sample_weight=weights))


def test_sparse_and_dense_input_give_the_same_model():
    X, y = _binary_data()
    X[np.abs(X) < 0.8] = 0.0
    dense = CaloptClassifier("gmean", random_state=0).fit(X, y)
    sparse = CaloptClassifier("gmean", random_state=0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sparse.decision_function(sp.csc_matrix(X)), dense.decision_function(X),
                               rtol=1e-9, atol=1e-12)


def test_float32_input_trains_in_float32():
    X, y = _binary_data()
    estimator = CaloptClassifier("gmean", random_state=0).fit(X.astype(np.float32), y)
    assert estimator.coef_.dtype == np.float32 and estimator.intercept_.dtype == np.float32
    assert estimator.decision_function(X.astype(np.float32)).dtype == np.float32
    assert estimator.model_.fit_report.dtype == "float32"
    reference = CaloptClassifier("gmean", random_state=0).fit(X, y)
    assert np.mean(estimator.predict(X) == reference.predict(X)) > 0.97


def test_read_only_input_is_used_and_left_as_it_was():
    X, y = _binary_data()
    weights = np.linspace(0.0, 2.0, y.size)
    copies = X.copy(), y.copy(), weights.copy()
    for array in (X, y, weights):
        array.flags.writeable = False
    estimator = CaloptClassifier(random_state=0).fit(X, y, sample_weight=weights)
    estimator.predict(X)
    estimator.partial_fit(X, y, sample_weight=weights)
    for array, copy in zip((X, y, weights), copies):
        np.testing.assert_array_equal(array, copy)


def test_feature_names_of_a_data_frame():
    pandas = pytest.importorskip("pandas")
    X, y = _binary_data()
    frame = pandas.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    estimator = CaloptClassifier(random_state=0).fit(frame, y)
    assert estimator.feature_names_in_.tolist() == list(frame.columns)
    assert estimator.n_features_in_ == X.shape[1]
    with pytest.raises(ValueError, match="feature names"):
        estimator.predict(frame[list(reversed(frame.columns))])


def test_random_state():
    X, y = _binary_data()
    first = CaloptClassifier(random_state=5).fit(X, y)
    again = CaloptClassifier(random_state=5).fit(X, y)
    np.testing.assert_array_equal(first.coef_, again.coef_)
    drawn = CaloptClassifier(random_state=np.random.RandomState(5)).fit(X, y)
    assert drawn.model_.fit_report.seed == np.random.RandomState(5).randint(np.iinfo(np.int32).max)


def test_errors_are_scikit_learn_value_errors():
    X, y = _binary_data()
    with pytest.raises(ValueError, match="only one class"):
        CaloptClassifier().fit(X, np.ones_like(y))
    with pytest.raises(ValueError, match="zero"):
        CaloptClassifier().fit(X, y, sample_weight=np.zeros(y.size))
    with pytest.raises(ValueError, match="class 1 has no row with a positive sample_weight"):
        CaloptClassifier().fit(X, y, sample_weight=(y == 0).astype(float) + 0.0 * y)
    with pytest.raises(calopt.UnknownNameError, match="did you mean 'gmean'"):
        CaloptClassifier("gmaen").fit(X, y)


# -- sample weights ----------------------------------------------------------------------------
@pytest.mark.parametrize("classes", [2, 3])
def test_integer_weights_equal_repeated_rows_for_gd(classes):
    """gd is deterministic: a row of weight k is k copies of the row, and weight 0 leaves it out
    (without cross-fitting: folds would put a row's copies apart)."""
    X, y = make_classification(n_samples=60, n_features=5, n_informative=4, n_redundant=0, n_classes=classes,
                               random_state=2)
    weights = np.random.default_rng(4).integers(0, 4, y.size)
    weighted = CaloptClassifier(algorithm="gd", epochs=30, select="none", random_state=0).fit(X, y, sample_weight=weights)
    repeated = CaloptClassifier(algorithm="gd", epochs=30, select="none", random_state=0).fit(
        np.repeat(X, weights, axis=0), np.repeat(y, weights))
    np.testing.assert_allclose(weighted.decision_function(X), repeated.decision_function(X), rtol=1e-9, atol=1e-9)
    unweighted = CaloptClassifier(algorithm="gd", epochs=30, select="none", random_state=0).fit(X, y)
    assert not np.allclose(unweighted.decision_function(X), weighted.decision_function(X))


def test_the_estimator_and_calopt_fit_give_one_weighted_one_vs_rest_model():
    """One class at a time with sample weights: calopt.fit and the estimator train the same model,
    each class's scores divided by their weighted spread (they have weighted standard deviation 1 on
    the training rows; unweighted, they would not), and integer weights equal repeated rows there."""
    X, y = make_classification(n_samples=90, n_features=5, n_informative=4, n_redundant=0, n_classes=3,
                               random_state=2)
    weights = np.random.default_rng(4).integers(1, 5, y.size).astype(float)
    options = dict(algorithm="gd", epochs=20, select="none")
    model = calopt.fit(X, y, **options, seed=0, sample_weight=weights)
    estimator = CaloptClassifier(**options, random_state=0).fit(X, y, sample_weight=weights)
    assert model.fit_report.one_vs_rest == "per class"
    np.testing.assert_array_equal(estimator.model_.coef, model.coef)
    np.testing.assert_array_equal(estimator.model_.intercept, model.intercept)
    assert estimator.model_.fit_report.score_spreads == model.fit_report.score_spreads
    scores = np.asarray(model.decision_function(X))
    mean = weights @ scores / weights.sum()
    np.testing.assert_allclose(np.sqrt(weights @ (scores - mean) ** 2 / weights.sum()), 1.0, rtol=1e-9)
    assert not np.allclose(scores.std(axis=0), 1.0, rtol=1e-3)
    repeated = calopt.fit(np.repeat(X, weights.astype(int), axis=0), np.repeat(y, weights.astype(int)), **options,
                          seed=0)
    np.testing.assert_allclose(model.fit_report.score_spreads, repeated.fit_report.score_spreads, rtol=1e-9)


# -- pos_label, class_weight, C, predict_proba -------------------------------------------------
def test_pos_label_picks_the_positive_class_and_keeps_classes_order():
    """pos_label="no" trains calopt.fit's model with positive="no"; decision_function > 0 still means classes_[1]
    ("yes"), so the scores are that model's negated, and score is the measure of "no" (scikit-learn's f1_score)."""
    X, y = _binary_data()
    words = np.where(y == 1, "yes", "no")
    estimator = CaloptClassifier(pos_label="no", random_state=0).fit(X, words)
    model = calopt.fit(X, words, positive="no", seed=0)
    assert estimator.classes_.tolist() == ["no", "yes"] and estimator.model_.classes == ("yes", "no")
    np.testing.assert_array_equal(estimator.decision_function(X), -model.decision_function(X))
    np.testing.assert_array_equal(estimator.predict(X), model.predict(X))
    np.testing.assert_array_equal(estimator.predict(X), estimator.classes_[(estimator.decision_function(X) > 0) * 1])
    assert estimator.score(X, words) == pytest.approx(f1_score(words, estimator.predict(X), pos_label="no"))
    proba = estimator.predict_proba(X)  # columns in classes_ order, ranked as decision_function
    assert np.all(np.diff(proba[np.argsort(estimator.decision_function(X)), 1]) >= 0)
    on_yes = CaloptClassifier(pos_label="yes", random_state=0).fit(X, words)
    assert on_yes.model_.classes == ("no", "yes")
    with pytest.raises(ValueError, match="maybe"):
        CaloptClassifier(pos_label="maybe").fit(X, words)
    with pytest.raises(ValueError, match="pos_label='no' is for two classes"):
        CaloptClassifier(pos_label="no").fit(*load_iris(return_X_y=True))


def test_pos_label_default_is_calopt_fit_s_and_a_tie_is_classes_1():
    """Without pos_label the positive class is calopt.fit's own default for the same labels; two classes of
    equal size (which calopt.fit asks to name) take scikit-learn's classes_[1]."""
    X, y = _binary_data()
    for labels in (y, np.where(y == 1, 1, 2), np.where(y == 1, "yes", "no"), y == 1):
        estimator = CaloptClassifier(random_state=0).fit(X, labels)
        assert estimator.model_.classes == calopt.fit(X, labels, seed=0).classes
    balanced = np.where(np.arange(y.size) % 2 == 0, "a", "b")
    assert CaloptClassifier(random_state=0).fit(X, balanced).model_.classes == ("a", "b")


def test_partial_fit_takes_pos_label():
    X, y = _binary_data()
    words = np.where(y == 1, "yes", "no")
    on_no = CaloptClassifier(algorithm="gd", pos_label="no", random_state=0)
    on_yes = CaloptClassifier(algorithm="gd", random_state=0)
    for _ in range(3):
        on_no.partial_fit(X, words, classes=["no", "yes"])
        on_yes.partial_fit(X, words, classes=["no", "yes"])
    assert on_no.model_.classes == ("yes", "no") and on_yes.model_.classes == ("no", "yes")
    # gd on the swapped labels is the same run negated: the scores for "yes" agree
    np.testing.assert_allclose(on_no.decision_function(X), on_yes.decision_function(X), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("class_weight", ["balanced", {0: 1.0, 1: 3.0}])
def test_class_weight_is_scikit_learn_s_sample_weights(class_weight):
    """class_weight is compute_sample_weight(class_weight, y) multiplied into sample_weight, as in scikit-learn."""
    X, y = _binary_data()
    weights = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    weighted = CaloptClassifier(class_weight=class_weight, random_state=0).fit(X, y, sample_weight=weights)
    reference = CaloptClassifier(random_state=0).fit(X, y, sample_weight=weights * compute_sample_weight(class_weight, y))
    np.testing.assert_array_equal(weighted.decision_function(X), reference.decision_function(X))
    alone = CaloptClassifier(class_weight=class_weight, random_state=0).fit(X, y)
    by_class = CaloptClassifier(random_state=0).fit(X, y, sample_weight=compute_sample_weight(class_weight, y))
    np.testing.assert_array_equal(alone.decision_function(X), by_class.decision_function(X))
    assert not np.array_equal(alone.decision_function(X), CaloptClassifier(random_state=0).fit(X, y).decision_function(X))


def test_class_weight_in_multiclass_and_partial_fit():
    X, y = load_iris(return_X_y=True)
    rows = np.r_[0:50, 50:70, 100:150]  # an imbalanced three-class problem
    X, y = X[rows], y[rows]
    balanced = CaloptClassifier(class_weight="balanced", random_state=0).fit(X, y)
    reference = CaloptClassifier(random_state=0).fit(X, y, sample_weight=compute_sample_weight("balanced", y))
    np.testing.assert_array_equal(balanced.decision_function(X), reference.decision_function(X))
    weights = {0: 1.0, 1: 4.0, 2: 1.0}
    stream = CaloptClassifier(algorithm="gd", class_weight=weights, random_state=0).partial_fit(X, y, classes=[0, 1, 2])
    weighted = CaloptClassifier(algorithm="gd", random_state=0).partial_fit(
        X, y, classes=[0, 1, 2], sample_weight=compute_sample_weight(weights, y))
    np.testing.assert_array_equal(stream.decision_function(X), weighted.decision_function(X))
    with pytest.raises(ValueError, match="class_weight='balanced' needs every row's class"):
        CaloptClassifier(class_weight="balanced").partial_fit(X, y, classes=[0, 1, 2])


def test_C_is_searchable_in_grid_search():
    """GridSearchCV over C: each candidate's cross-validated F1 is the one computed here by hand, and the refit
    model trained lbfgs with that C (the spec C fixes, not searched among the candidates)."""
    X, y = _binary_data(n=300)
    search = GridSearchCV(CaloptClassifier(random_state=0), {"C": [0.01, 100.0]}, scoring=make_scorer("f1"), cv=3)
    search.fit(X, y)
    for params, mean in zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]):
        folds = []
        for train, test in StratifiedKFold(3).split(X, y):
            fitted = CaloptClassifier(random_state=0, **params).fit(X[train], y[train])
            folds.append(f1_score(y[test], fitted.predict(X[test])))
        assert mean == pytest.approx(np.mean(folds))
    assert search.best_estimator_.model_.algorithm == f"lbfgs:C={float(search.best_params_['C'])}"
    small, large = (CaloptClassifier(C=C, random_state=0).fit(X, y) for C in (0.01, 100.0))
    assert np.linalg.norm(small.coef_) < np.linalg.norm(large.coef_)
    multiclass = CaloptClassifier(C=3.0, random_state=0).fit(*load_iris(return_X_y=True))
    assert multiclass.model_.algorithm.startswith("multinomial:") and "C=3.0" in multiclass.model_.algorithm


@pytest.mark.parametrize("options, message", [
    ({"algorithm": "spade", "measure": "gmean"}, "algorithm 'spade' has no parameter C"),
    ({"algorithm": "lbfgs:C=3"}, "both set C"),
    ({"algorithm": "auto"}, "name the algorithm C is for"),
])
def test_C_errors(options, message):
    X, y = _binary_data()
    with pytest.raises(ValueError, match=message):
        CaloptClassifier(C=1.0, **options).fit(X, y)
    with pytest.raises(ValueError, match="C must be a positive number"):
        CaloptClassifier(C=-1.0).fit(X, y)


def test_predict_proba_is_logistic_regression_s():
    """lbfgs with C fixed and run to convergence is scikit-learn's LogisticRegression on the max-abs scaled
    features, and the multinomial model on dense features its LogisticRegression on standardized ones:
    the same probabilities (before calopt's threshold or decision rule)."""
    X, y = _binary_data()
    estimator = CaloptClassifier(algorithm="lbfgs:tol=1e-10", C=0.5, epochs=300, select="none", random_state=0)
    reference = make_pipeline(MaxAbsScaler(), LogisticRegression(C=0.5, tol=1e-10, max_iter=10_000))
    np.testing.assert_allclose(estimator.fit(X, y).predict_proba(X), reference.fit(X, y).predict_proba(X), atol=1e-6)
    X, y = load_iris(return_X_y=True)
    estimator = CaloptClassifier(algorithm="multinomial:tol=1e-10", C=2.0, epochs=300, random_state=0)
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=2.0, tol=1e-10, max_iter=10_000))
    np.testing.assert_allclose(estimator.fit(X, y).predict_proba(X), reference.fit(X, y).predict_proba(X), atol=1e-6)


def test_predict_proba_of_the_default_sums_to_one_and_ranks_as_decision_function():
    X, y = _binary_data(weights=(0.9,))
    estimator = CaloptClassifier(random_state=0).fit(X, y)
    proba = estimator.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.all(np.diff(proba[np.argsort(estimator.decision_function(X)), 1]) >= 0)
    # the measure's threshold is not probability 0.5: predict is decision_function > 0
    np.testing.assert_array_equal(estimator.predict(X), (estimator.decision_function(X) > 0) * 1)


@pytest.mark.parametrize("options", [
    {"algorithm": "spade", "measure": "gmean"},
    {"algorithm": "stamp"},
    {"algorithm": "lbfgs", "loss": "squared"},
])
def test_predict_proba_is_absent_without_a_logistic_model(options):
    X, y = _binary_data()
    estimator = CaloptClassifier(**options, random_state=0)
    assert not hasattr(estimator, "predict_proba")
    assert not hasattr(estimator.fit(X, y), "predict_proba")
    with pytest.raises(AttributeError, match="predict_proba"):
        estimator.predict_proba(X)


def test_predict_proba_is_absent_one_class_at_a_time():
    """lbfgs on three classes trains each against the rest, each with its own threshold and scale: no
    probabilities; the default (multinomial) has them."""
    X, y = load_iris(return_X_y=True)
    assert not hasattr(CaloptClassifier(algorithm="lbfgs", random_state=0).fit(X, y), "predict_proba")
    proba = CaloptClassifier(random_state=0).fit(X, y).predict_proba(X)
    assert proba.shape == (150, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


# -- partial_fit -------------------------------------------------------------------------------
def test_partial_fit_keeps_the_solver_state_across_calls():
    """k calls of gd on the whole data are k gradient steps: calopt.fit's gd with k epochs (no scaling,
    threshold 0), which runs the loop once over k epochs."""
    X, y = _binary_data()
    estimator = CaloptClassifier(algorithm="gd", random_state=0)
    for _ in range(7):
        estimator.partial_fit(X, y, classes=[0, 1])
    model = calopt.fit(X, y, algorithm="gd", epochs=7, scale=False, tune_threshold=False, seed=0)
    np.testing.assert_allclose(estimator.coef_[0], model.coef, rtol=1e-9)
    np.testing.assert_allclose(estimator.intercept_[0], model.intercept, rtol=1e-9)
    assert estimator.n_iter_ == 7 and estimator.model_.fit_report.partial_fit == PartialFitReport(calls=7, rows=7 * y.size)


def test_partial_fit_on_a_stream_of_mini_batches_reaches_what_fit_reaches():
    train, test = datasets.load("a9a", "train"), datasets.load("a9a", "test")
    stream = CaloptClassifier("gmean", algorithm="spade:step=10", random_state=0)
    order = np.random.default_rng(0).permutation(train.n_samples)
    for epoch in range(3):
        for start in range(0, train.n_samples, 500):
            rows = order[start:start + 500]
            stream.partial_fit(train.X[rows], train.labels[rows], classes=[-1.0, 1.0])
    fitted = CaloptClassifier("gmean", random_state=0).fit(train.X, train.labels)
    reference = geometric_mean_score(test.labels, fitted.predict(test.X))
    assert geometric_mean_score(test.labels, stream.predict(test.X)) > reference - 0.02
    assert stream.n_iter_ == 3 * math.ceil(train.n_samples / 500)


def test_partial_fit_multiclass_trains_one_model_per_class():
    X, y = load_iris(return_X_y=True)
    X = MaxAbsScaler().fit_transform(X)
    estimator = CaloptClassifier("gmean", algorithm="spade:step=10", random_state=0)
    rng = np.random.default_rng(0)
    for _ in range(30):
        rows = rng.choice(y.size, 20, replace=False)
        estimator.partial_fit(X[rows], y[rows], classes=[0, 1, 2])
    assert estimator.coef_.shape == (3, 4)
    assert np.mean(estimator.predict(X) == y) > 0.8


def test_partial_fit_after_fit_starts_from_fit_s_coefficients():
    X, y = _binary_data()
    estimator = CaloptClassifier("gmean", algorithm="spade:step=1", random_state=0).fit(X, y)
    fitted = estimator.coef_.copy()
    estimator.partial_fit(X[:50], y[:50])
    fresh = CaloptClassifier("gmean", algorithm="spade:step=1", random_state=0).partial_fit(X[:50], y[:50],
                                                                                              classes=[0, 1])
    assert np.linalg.norm(estimator.coef_ - fitted) < np.linalg.norm(fresh.coef_ - fitted)
    assert not np.array_equal(estimator.coef_, fitted)


def test_partial_fit_errors():
    X, y = _binary_data()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        CaloptClassifier().partial_fit(X, y)
    estimator = CaloptClassifier(random_state=0).partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="is not the same as on the first call"):
        estimator.partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="label 7 is not one of the classes"):
        estimator.partial_fit(X[:3], np.array([0, 1, 7]))
    with pytest.raises(ValueError, match="X has 7 features, but CaloptClassifier is expecting 8"):
        estimator.partial_fit(X[:, :7], y)
    with pytest.raises(ValueError, match="transforms the whole training data"):
        CaloptClassifier(algorithm="slnd").partial_fit(X, y, classes=[0, 1])


def test_partial_fit_pickles_mid_stream():
    X, y = _binary_data()
    estimator = CaloptClassifier("gmean", random_state=0).partial_fit(X[:200], y[:200], classes=[0, 1])
    copy = pickle.loads(pickle.dumps(estimator))
    estimator.partial_fit(X[200:], y[200:])
    copy.partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(copy.coef_, estimator.coef_)


# -- new calopt.fit options become constructor parameters ----------------------------------------
class _WithThresholdOption(CaloptClassifier):
    """What adding a calopt.fit option takes: a constructor parameter of the same name."""

    def __init__(self, measure="f1", *, algorithm=None, loss=None, epochs=None, select="auto", patience=20,
                 max_epochs=100, batch_size=None, backend=None, random_state=None, tune_threshold=True):
        super().__init__(measure, algorithm=algorithm, loss=loss, epochs=epochs, select=select, patience=patience,
                         max_epochs=max_epochs, batch_size=batch_size, backend=backend, random_state=random_state)
        self.tune_threshold = tune_threshold


def test_a_constructor_parameter_reaches_calopt_fit_by_its_name():
    X, y = _binary_data()
    untuned = _WithThresholdOption(random_state=0, tune_threshold=False).fit(X, y)
    model = calopt.fit(X, y, seed=0, tune_threshold=False)
    np.testing.assert_array_equal(untuned.decision_function(X), model.decision_function(X))
    assert untuned.model_.threshold == 0.0
    assert CaloptClassifier(random_state=0).fit(X, y).model_.threshold != 0.0


# -- array API ---------------------------------------------------------------------------------
@pytest.mark.parametrize("namespace, device, dtype", [
    ("numpy", None, None),
    ("array_api_strict", "CPU_DEVICE", "float64"),
    ("array_api_strict", "device1", "float32"),
    ("torch", "cpu", "float64"),
    ("torch", "cpu", "float32"),
])
@pytest.mark.parametrize("estimator", ESTIMATORS[:3], ids=["default", "gd", "gmean"])
def test_check_array_api_input(estimator, namespace, device, dtype):
    check_array_api_input(type(estimator).__name__, estimator, array_namespace=namespace, device_name=device,
                          dtype_name=dtype, check_sample_weight=True)


def test_torch_inputs_train_and_predict_on_torch():
    torch = pytest.importorskip("torch")
    X, y = _binary_data()
    with sklearn.config_context(array_api_dispatch=True):
        estimator = CaloptClassifier("gmean", random_state=0).fit(torch.asarray(X), torch.asarray(y))
        scores = estimator.decision_function(torch.asarray(X))
        predictions = estimator.predict(torch.asarray(X))
    assert isinstance(estimator.coef_, torch.Tensor) and isinstance(scores, torch.Tensor)
    assert isinstance(predictions, torch.Tensor) and predictions.dtype == torch.int64
    assert estimator.model_.fit_report.backend == "torch"
    on_numpy = CaloptClassifier("gmean", random_state=0).fit(X, y)
    # the same run to rounding: scores of order 1 agree to 1e-6 (torch and NumPy sum in different orders,
    # and L-BFGS's later passes carry that difference along)
    np.testing.assert_allclose(scores.numpy(), on_numpy.decision_function(X), rtol=1e-6, atol=1e-6)
    with sklearn.config_context(array_api_dispatch=True), pytest.raises(ValueError, match="same namespace"):
        estimator.predict(X)


@pytest.mark.parametrize("library", ["array_api_strict", "torch"])
def test_partial_fit_under_array_api_dispatch(library):
    xp = pytest.importorskip(library)
    X, y = _binary_data()
    stream = CaloptClassifier("gmean", random_state=0)
    on_numpy = CaloptClassifier("gmean", random_state=0)
    with sklearn.config_context(array_api_dispatch=True):
        for start in range(0, 400, 100):
            stream.partial_fit(xp.asarray(X[start:start + 100]), xp.asarray(y[start:start + 100]), classes=[0, 1])
            on_numpy.partial_fit(X[start:start + 100], y[start:start + 100], classes=[0, 1])
        assert type(stream.coef_) is type(xp.asarray(X))
        np.testing.assert_allclose(np.asarray(stream.decision_function(xp.asarray(X))),
                                   on_numpy.decision_function(X), rtol=1e-6, atol=1e-9)
        fitted = CaloptClassifier("gmean", random_state=0).fit(xp.asarray(X), xp.asarray(y))
        fitted.partial_fit(xp.asarray(X[:100]), xp.asarray(y[:100]))  # after fit: from its coefficients
        assert type(fitted.coef_) is type(xp.asarray(X))


# -- scorers -----------------------------------------------------------------------------------
def _reference(name: str, y_true, y_pred, weight=None) -> float:
    """Each built-in measure from scikit-learn's (weighted) confusion matrix, by its textbook formula."""
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[0, 1], sample_weight=weight).ravel()
    tpr, tnr = tp / (tp + fn), tn / (tn + fp)
    return {
        "min": min(tpr, tnr),
        "hmean": 2 * tpr * tnr / (tpr + tnr),
        "qmean": 1 - math.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2),
        "gmean": math.sqrt(tpr * tnr),
        "fbeta": 2 * tp / (2 * tp + fp + fn),
        "jaccard": tp / (tp + fp + fn),
        "gower-legendre": (tp + tn) / (tp + tn + 0.5 * (fp + fn)),
    }[name]


BUILT_IN = ["min", "hmean", "qmean", "gmean", "fbeta", "jaccard", "gower-legendre"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_scorer_matches_the_textbook_formula(name):
    X, y = _binary_data(seed=2)
    estimator = LogisticRegression().fit(X, y)
    predicted = estimator.predict(X)
    weight = np.random.default_rng(1).uniform(0.1, 3.0, y.size)
    assert make_scorer(name)(estimator, X, y) == pytest.approx(_reference(name, y, predicted))
    assert make_scorer(name)(estimator, X, y, sample_weight=weight) == pytest.approx(
        _reference(name, y, predicted, weight))


def test_scorer_matches_scikit_learn_and_imbalanced_learn():
    X, y = _binary_data(seed=3)
    estimator = LogisticRegression().fit(X, y)
    predicted = estimator.predict(X)
    assert make_scorer("f1")(estimator, X, y) == pytest.approx(f1_score(y, predicted))
    assert make_scorer("fbeta:beta=0.5")(estimator, X, y) == pytest.approx(fbeta_score(y, predicted, beta=0.5))
    assert make_scorer("jaccard")(estimator, X, y) == pytest.approx(jaccard_score(y, predicted))
    assert make_scorer("gmean")(estimator, X, y) == pytest.approx(geometric_mean_score(y, predicted))
    assert make_scorer("f1", pos_label=0)(estimator, X, y) == pytest.approx(f1_score(y, predicted, pos_label=0))
    words = np.where(y == 1, "yes", "no")
    on_words = LogisticRegression().fit(X, words)
    assert make_scorer("f1", pos_label="yes")(on_words, X, words) == pytest.approx(f1_score(y, predicted))
    with pytest.raises(ValueError, match="pos_label=1 is not a valid label"):
        make_scorer("f1")(on_words, X, words)


def test_macro_scorer_is_the_mean_over_classes():
    X, y = load_iris(return_X_y=True)
    estimator = LogisticRegression(max_iter=1000).fit(X[::3], y[::3])
    predicted = estimator.predict(X)
    assert make_scorer("f1", average="macro")(estimator, X, y) == pytest.approx(
        f1_score(y, predicted, average="macro"))
    assert make_scorer("gmean", average="macro")(estimator, X, y) == pytest.approx(np.mean(
        [geometric_mean_score(y == c, predicted == c) for c in range(3)]))
    with pytest.raises(ValueError, match="multiclass but average='binary'; use average='multiclass'"):
        make_scorer("f1", average="binary")(estimator, X, y)


def test_scorers_default_to_the_k_class_form_with_more_than_two_classes():
    """Without ``average``, three classes score the measure's K-class form (imbalanced-learn's
    multiclass G-mean, scikit-learn's macro F1 and balanced accuracy), as the estimator's score;
    a measure with no K-class form the mean over the classes; two classes stay binary."""
    from sklearn.metrics import recall_score

    X, y = load_iris(return_X_y=True)
    estimator = LogisticRegression(max_iter=1000).fit(X[::7], y[::7])
    predicted = estimator.predict(X)
    assert make_scorer("gmean")(estimator, X, y) == pytest.approx(
        geometric_mean_score(y, predicted, average="multiclass"))
    assert make_scorer("f1")(estimator, X, y) == pytest.approx(f1_score(y, predicted, average="macro"))
    assert make_scorer("balanced-accuracy")(estimator, X, y) == pytest.approx(balanced_accuracy_score(y, predicted))
    assert make_scorer("tpr")(estimator, X, y) == pytest.approx(np.mean(
        [recall_score(y == c, predicted == c) for c in range(3)]))
    two = y < 2
    binary = LogisticRegression(max_iter=1000).fit(X[two][::5], y[two][::5])
    assert make_scorer("f1")(binary, X[two], y[two]) == pytest.approx(f1_score(y[two], binary.predict(X[two])))
    # labels given: three classes where a fold's truth and predictions hold two (the K-class form:
    # the macro F1 of the classes present, as scikit-learn's default labels; binary F1 would be 2/3)
    truth, guess = [0, 0, 1, 1, 1], [0, 1, 1, 1, 0]
    assert measure_score(truth, guess, measure="f1", labels=[0, 1, 2]) == pytest.approx(
        f1_score(truth, guess, average="macro"))
    assert measure_score(truth, guess, measure="f1") == pytest.approx(f1_score(truth, guess))
    model = CaloptClassifier("gmean").fit(X, y)
    assert make_scorer("gmean")(model, X, y) == pytest.approx(model.score(X, y))


def test_every_registered_measure_has_a_scorer_plugins_included():
    """A plugin's measure, registered at run time, scores like scikit-learn's balanced accuracy."""

    @dataclasses.dataclass(frozen=True)
    class Balanced(calopt.ConcaveMeasure):
        """(TPR + TNR) / 2."""

        name: ClassVar[str] = "test-balanced"

        def psi(self, tpr, tnr, *, xp):
            return (tpr + tnr) / 2

        def conjugate(self, alpha, beta, *, xp):
            return xp.zeros_like(alpha)

        def conjugate_grad(self, alpha, beta, *, xp):
            return xp.zeros_like(alpha), xp.zeros_like(beta)

        def project(self, alpha, beta, *, xp):
            return xp.full_like(alpha, 0.5), xp.full_like(beta, 0.5)

    class Plugin:
        @calopt.hookimpl
        def register_measures(self, register):
            register(Balanced)

    plugin_manager.register(Plugin(), name="test-sklearn-plugin")
    try:
        X, y = _binary_data(seed=4)
        estimator = LogisticRegression().fit(X, y)
        for entry in registry.list_measures():
            values = cross_val_score(LogisticRegression(), X, y, cv=3, scoring=make_scorer(entry.name))
            assert values.shape == (3,) and np.all((values >= 0) & (values <= 1))
        assert make_scorer("test-balanced")(estimator, X, y) == pytest.approx(
            balanced_accuracy_score(y, estimator.predict(X)))
    finally:
        plugin_manager.unregister(name="test-sklearn-plugin")


def test_scorer_names_an_unknown_measure_at_once():
    with pytest.raises(calopt.UnknownNameError, match="unknown measure 'gmaen'"):
        make_scorer("gmaen")


def test_scorer_repr_and_pickle():
    scorer = make_scorer("fbeta:beta=2", pos_label="yes")
    assert repr(scorer) == ("make_scorer(measure_score, response_method='predict', measure=fbeta:beta=2.0, "
                            "pos_label=yes)")
    assert repr(pickle.loads(pickle.dumps(scorer))) == repr(scorer)


def test_measure_score_conventions():
    # no positive predicted nor present: F1 is 0 (scikit-learn's zero_division=0), G-mean 1 when a
    # class is absent from both truth and predictions (imbalanced-learn)
    assert measure_score([0, 0, 0], [0, 0, 0], measure="f1") == 0.0
    assert measure_score([0, 0, 0], [0, 0, 0], measure="gmean") == geometric_mean_score([0, 0, 0], [0, 0, 0])


def test_grid_search_over_measures_in_a_pipeline_on_real_data():
    """GridSearchCV's cross-validated G-mean of each candidate equals imbalanced-learn's G-mean on the
    same folds, computed here by hand."""
    data = datasets.load("a9a", "train")
    X, y = data.X[:6000], data.labels[:6000]
    pipeline = Pipeline([("scale", MaxAbsScaler()), ("clf", CaloptClassifier(random_state=0))])
    search = GridSearchCV(pipeline, {"clf__measure": ["gmean", "f1"]}, scoring=make_scorer("gmean"), cv=3)
    search.fit(X, y)
    for params, mean in zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]):
        folds = []
        for train, test in StratifiedKFold(3).split(X, y):
            fitted = clone(pipeline).set_params(**params).fit(X[train], y[train])
            folds.append(geometric_mean_score(y[test], fitted.predict(X[test])))
        assert mean == pytest.approx(np.mean(folds))
    assert search.best_params_["clf__measure"] in ("gmean", "f1")
    assert search.score(X, y) == pytest.approx(geometric_mean_score(y, search.predict(X)))


def test_scorer_is_the_objective_of_tuned_threshold_classifier_cv():
    """The threshold tuned for calopt's G-mean scorer is the one tuned for imbalanced-learn's G-mean."""
    X, y = _binary_data(n=600, seed=5, weights=(0.9,))
    ours = TunedThresholdClassifierCV(LogisticRegression(), scoring=make_scorer("gmean"), cv=3,
                                      random_state=0).fit(X, y)
    theirs = TunedThresholdClassifierCV(LogisticRegression(), scoring=sklearn_make_scorer(geometric_mean_score),
                                        cv=3, random_state=0).fit(X, y)
    assert ours.best_threshold_ == theirs.best_threshold_
    assert ours.best_score_ == pytest.approx(theirs.best_score_)


def test_tuned_threshold_around_a_partial_fit_model():
    """partial_fit leaves the solver's threshold 0; TunedThresholdClassifierCV(cv="prefit") tunes it
    on held-out rows for the measure."""
    X, y = _binary_data(n=1000, seed=6, weights=(0.9,))
    stream = CaloptClassifier("f1", random_state=0)
    for start in range(0, 700, 100):
        stream.partial_fit(X[start:start + 100], y[start:start + 100], classes=[0, 1])
    tuned = TunedThresholdClassifierCV(stream, scoring=make_scorer("f1"), cv="prefit", refit=False).fit(
        X[700:], y[700:])
    assert f1_score(y[700:], tuned.predict(X[700:])) >= f1_score(y[700:], stream.predict(X[700:]))


# -- export to scikit-learn --------------------------------------------------------------------
def test_binary_model_to_sklearn_predicts_exactly_as_calopt():
    train = datasets.load("a9a", "train")
    model = calopt.fit(train.X, train.labels, measure="gmean", seed=0)
    exported = model.to_sklearn()
    assert type(exported).__module__.startswith("sklearn.")
    sklearn.utils.validation.check_is_fitted(exported)
    np.testing.assert_array_equal(exported.decision_function(train.X), model.decision_function(train.X))
    np.testing.assert_array_equal(exported.predict(train.X), model.predict(train.X))
    dense = train.X[:500].toarray()
    np.testing.assert_allclose(exported.decision_function(dense), model.decision_function(dense), rtol=1e-12)
    np.testing.assert_allclose(exported.intercept_, [model.intercept])  # the tuned threshold is folded in
    assert model.threshold != 0.0
    again = pickle.loads(pickle.dumps(exported))
    np.testing.assert_array_equal(again.predict(dense), model.predict(dense))


def test_multiclass_model_to_sklearn_predicts_exactly_as_calopt(tmp_path):
    X, y = load_iris(return_X_y=True)
    labels = np.array(["a", "b", "c"])[y]
    calopt.fit(X, labels, seed=0, measure="accuracy").save(tmp_path / "iris.npz")  # the argmax
    model = calopt.load_model(tmp_path / "iris.npz")
    with pytest.raises(calopt.ParameterError, match="decision rule"):  # a rule a LinearSVC cannot hold
        calopt.fit(X, labels, seed=0, measure="gmean").to_sklearn()
    exported = model.to_sklearn()
    np.testing.assert_array_equal(exported.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(exported.predict(X), model.predict(X))
    assert exported.classes_.tolist() == ["a", "b", "c"] and not hasattr(exported, "predict_proba")


def test_estimator_model_exports_with_the_user_s_labels():
    X, y = _binary_data()
    words = np.where(y == 1, "yes", "no")
    estimator = CaloptClassifier(random_state=0).fit(X, words)
    exported = estimator.model_.to_sklearn()
    np.testing.assert_array_equal(exported.predict(X), estimator.predict(X))


# -- the manual's examples ---------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_the_manual_s_scikit_learn_example_runs():
    """Every Python block of the guide's "Use from scikit-learn" page, in order, in one namespace (the
    torch block when PyTorch is there)."""
    blocks = _python_blocks(ROOT / "docs" / "guide" / "sklearn.md")
    assert len(blocks) == 3 and "GridSearchCV" in blocks[0] and "partial_fit" in blocks[1]
    namespace: dict = {}
    for block in blocks:
        if "import torch" in block and importlib.util.find_spec("torch") is None:
            continue
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["search"].best_params_["caloptclassifier__measure"] in ("gmean", "hmean", "f1")
    assert namespace["clf"].score(namespace["test"].X, namespace["test"].labels) > 0.75
    assert type(namespace["exported"]).__name__ == "LinearSVC"
    if "on_torch" in namespace:
        assert type(namespace["on_torch"].coef_).__module__ == "torch"


def test_the_readme_s_python_and_scikit_learn_examples_run():
    """The README's two Python blocks ("From Python", "From scikit-learn") run as printed."""
    blocks = _python_blocks(ROOT / "README.md")
    assert len(blocks) == 2 and "calopt.fit" in blocks[0] and "GridSearchCV" in blocks[1]
    namespace: dict = {}
    exec(compile(blocks[0].replace('model.save("model.npz")', "pass"), "README.md", "exec"), namespace)
    assert namespace["model"].score(namespace["test"].X, namespace["test"].labels) > 0.75  # ijcnn1's G-mean
    exec(compile(blocks[1], "README.md", "exec"), namespace)
    assert namespace["search"].best_params_["C"] in (0.1, 1, 10)
    assert namespace["search"].score(namespace["test"].X, namespace["test"].labels) > 0.75  # a9a's

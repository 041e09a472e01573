"""calopt against what scikit-learn users already have, on one split: what ``calopt compare`` runs.

For K > 2 classes (:func:`_compare_classes`): calopt's multinomial model with the decision rule
for the measure, the argmax of the same model, and scikit-learn's multinomial
``LogisticRegression``, each scored by the measure's K-class value.

For a binary problem and a measure, each method trains on the same training rows and is
scored on the same test rows:

* calopt's algorithms (by default the measure's own solver and the plug-in route, L-BFGS), each
  :func:`calopt.fit` with ``eval_set`` so its history holds the test value after every
  pass;
* SGD on the logistic loss: scikit-learn's ``SGDClassifier(loss="log_loss")`` on
  max-abs-scaled features, one ``partial_fit`` pass at a time, its own predictions (no
  threshold tuning) scored after each pass;
* scikit-learn's route for a measure: ``TunedThresholdClassifierCV`` around
  ``MaxAbsScaler`` + ``LogisticRegression(max_iter=1000)``, the threshold tuned for the
  measure by 5-fold cross-validation with :func:`calopt.sklearn.make_scorer`, then refit.

With rate constraints (``constraints=["precision>=0.9"]``, issue 16) calopt's algorithms
train subject to them (by default the constrained solver and the plug-in route), the
scikit-learn route tunes its threshold among those meeting them (its scorer is the
constrained measure: the measure where every constraint holds on a fold, below every
feasible value elsewhere), and SGD, which has no way to honour them, is left out; each
method reports each constraint's test value. With K classes the constraints name a class
(``recall[fraud]>=0.8``): calopt's decision rule is trained subject to them, and each method
(calopt's rule, the argmax of the same model, scikit-learn's argmax) reports each one's test
value, its class against the rest.

Each result is data (:class:`MethodRun`): the test value, TPR and TNR, the fit seconds,
the passes over the training data, and the curve of test values by pass and by seconds.
Fit seconds count training only (calopt: scaling, step trial, loop and threshold; the
others: their ``fit``/``partial_fit`` calls and the scaling), never loading or scoring.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from calopt import registry
from calopt.constraints import ConstrainedMeasure, RateConstraint, class_constrained, constrain, parse_constraints
from calopt.errors import DataError, ParameterError
from calopt.measures import confusion_counts
from calopt.io.labels import encode_binary, label_text
from calopt.sklearn import make_scorer, measure_score
from calopt.training.api import fit
from calopt.training.plan import DEFAULT_EPOCHS

__all__ = ["Comparison", "MethodRun", "compare"]

#: Cross-validation folds of scikit-learn's tuned-threshold route (its default).
ROUTE_FOLDS = 5


@dataclasses.dataclass
class MethodRun:
    """One method's result: test ``value``, ``tpr``, ``tnr``, fit ``seconds``, ``passes``, and its curve.

    ``curve`` holds one ``{"passes", "seconds", "value"}`` row per point measured (per pass
    for the iterative methods, one row for a method scored only at the end), seconds
    cumulative.
    """

    method: str
    value: float
    tpr: float | None  #: None for K classes
    tnr: float | None
    seconds: float
    passes: float
    curve: list[dict[str, float]]
    #: The method in full (the figure's legend); ``method`` is the short name of a table row.
    description: str = ""
    #: How the passes were counted.
    note: str = ""
    #: The warnings the method raised while it trained (first line of each, once).
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: With constraints: ``{"constraint", "test", "satisfied", "error", "within_error"}`` for each, on
    #: the test rows (``error``: two standard errors of the rate there).
    constraints: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Comparison:
    """Every method's :class:`MethodRun` on one split, and what the split was."""

    measure: str  #: the measure as the user named it
    positive: Any  #: the positive label (None for K classes)
    n_train: int
    n_test: int
    test_positive_rate: float
    runs: list[MethodRun]

    def as_dict(self) -> dict[str, Any]:
        return {"measure": self.measure, "positive": None if self.positive is None else label_text(self.positive),
                "n_train": self.n_train, "n_test": self.n_test,
                "test_positive_rate": None if self.positive is None else self.test_positive_rate,
                "methods": [dataclasses.asdict(run) for run in self.runs]}


def compare(X: Any, y: Any, X_test: Any, y_test: Any, *, measure: Any = "f1", algorithms: Any = None,
            epochs: int | None = None, seed: int = 0, positive: Any = None, constraints: Any = None) -> Comparison:
    """Train every method on (X, y) and score it on (X_test, y_test) for ``measure`` (module docstring).

    ``algorithms`` lists calopt's algorithm specs to run (default: the measure's own solver
    and the plug-in route, ``lbfgs``); ``epochs`` is the passes of calopt's algorithms
    (None: chosen on held-out rows, as :func:`calopt.fit` does) and of SGD (10 when None);
    ``positive`` the positive label (default: calopt's, :func:`~calopt.io.labels.binary_classes`: 1 of
    {0, 1} or {-1, 1}, True, else the smaller class); ``constraints``
    rate constraints (see the module docstring).
    """
    parsed = parse_constraints(constraints)
    spec = registry.get_measure(measure).spec
    if np.unique(np.asarray(y)).size > 2:
        if positive is not None:
            raise ParameterError(f"a positive class: not for K-class labels (the training labels have "
                                 f"{np.unique(np.asarray(y)).size} classes)")
        return _compare_classes(X, np.asarray(y), X_test, np.asarray(y_test), spec,
                                measure if isinstance(measure, str) else spec, algorithms, epochs, seed, parsed)
    constrained = constrain(registry.get_measure(spec), parsed)
    label = measure if isinstance(measure, str) else spec
    y, y_test = np.asarray(y), np.asarray(y_test)
    _, (negative, positive) = encode_binary(y, positive=positive, source="training labels")
    unknown = ~np.isin(y_test, [negative, positive])
    if np.any(unknown):
        raise DataError(f"row {int(np.flatnonzero(unknown)[0]) + 1}: label {y_test[unknown][0]!r} is not one of "
                        f"the training classes ({negative!r}, {positive!r})", source="test labels")
    if algorithms is None:
        algorithms = list(dict.fromkeys(registry.compared_algorithms(constrained)))
    score = _scorer(spec, positive)
    runs = [_calopt_run(X, y, X_test, y_test, spec, algorithm, epochs, seed, positive, score, parsed)
            for algorithm in algorithms]
    if not parsed:  # SGD at its own threshold cannot honour constraints
        runs.append(_sgd_run(X, y, X_test, y_test, epochs or DEFAULT_EPOCHS, seed, score))
    runs.append(_route_run(X, y, X_test, y_test, spec, seed, positive, score, constrained))
    return Comparison(label, positive, int(X.shape[0]), int(X_test.shape[0]), float(np.mean(y_test == positive)),
                      runs)


def _compare_classes(X: Any, y: np.ndarray, X_test: Any, y_test: np.ndarray, spec: str, label: str,
                     algorithms: Any, epochs: int | None, seed: int,
                     constraints: tuple[RateConstraint, ...] = ()) -> Comparison:
    """K classes: calopt (the multinomial model with the rule for the measure, and the argmax of the
    same model's scores) against scikit-learn's multinomial ``LogisticRegression`` (max-abs scaled,
    ``max_iter=1000``, its argmax), each scored by the measure's K-class value; TPR and TNR are None.
    Per-class ``constraints`` (``recall[CLASS]>=0.8``): calopt's rule is trained subject to them,
    and every method reports each one's test value (its class against the rest)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    # resolved to their classes before any training: a constraint naming no class, or a class
    # not in the training labels, is one line
    classes = np.unique(y)
    resolved = getattr(class_constrained(constrain(registry.get_measure(spec), constraints), classes),
                       "constraints", ())

    def score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return measure_score(y_true, y_pred, measure=spec, average="multiclass")

    def held(predicted: np.ndarray) -> list[dict[str, Any]]:
        return [_test_constraints((constraint,), y_test, predicted, classes[constraint.code])[0]
                for constraint in resolved]

    runs = []
    for algorithm in algorithms or ["multinomial"]:
        model = fit(X, y, measure=spec, algorithm=algorithm, epochs=epochs, seed=seed,
                    constraints=constraints or None)
        predicted = model.predict(X_test)
        runs.append(_class_run(f"calopt {model.algorithm}", score(y_test, predicted), model.fit_seconds,
                               len(model.history), f"calopt {model.algorithm}, {_rule_text(model)}",
                               constraints=held(predicted)))
        if getattr(model, "has_rule", False):
            argmax = np.asarray(model.classes)[np.argmax(np.asarray(model.decision_function(X_test)), axis=1)]
            runs.append(_class_run(f"calopt {model.algorithm}, argmax", score(y_test, argmax), model.fit_seconds,
                                   len(model.history), f"calopt {model.algorithm}, the argmax of its scores",
                                   constraints=held(argmax)))
    counting, iterations = _counting(LogisticRegression)
    caught: list[str] = []
    started = time.perf_counter()
    with _recorded(caught):
        reference = make_pipeline(MaxAbsScaler(), counting(max_iter=1000)).fit(X, y)
    seconds = time.perf_counter() - started
    predicted = reference.predict(X_test)
    runs.append(_class_run("sklearn LR, argmax", score(y_test, predicted), seconds, sum(iterations),
                           "scikit-learn LogisticRegression (multinomial), its argmax", caught, held(predicted)))
    return Comparison(label, None, int(X.shape[0]), int(X_test.shape[0]), float("nan"), runs)


def _rule_text(model: Any) -> str:
    decision = getattr(model.fit_report, "decision", None)
    return "the argmax" if decision is None or decision.rule == "argmax" else f"its {decision.rule} rule"


def _class_run(method: str, value: float, seconds: float, passes: float, description: str,
               caught: list[str] | None = None, constraints: list[dict[str, Any]] | None = None) -> MethodRun:
    return MethodRun(method, float(value), None, None, seconds, float(passes),
                     [{"passes": float(passes), "seconds": seconds, "value": float(value)}], description,
                     "passes of the training loop (calopt) or L-BFGS iterations (scikit-learn)", caught or [],
                     constraints or [])


def _scorer(spec: str, positive: Any) -> Any:
    """(value, TPR, TNR) of predicted labels against true ones, ``positive`` the positive label."""

    def score(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[float, float, float]:
        is_positive, said_positive = y_true == positive, y_pred == positive
        tpr = float(np.mean(said_positive[is_positive])) if np.any(is_positive) else 0.0
        tnr = float(np.mean(~said_positive[~is_positive])) if np.any(~is_positive) else 0.0
        return measure_score(y_true, y_pred, measure=spec, pos_label=positive), tpr, tnr

    return score


def _test_constraints(constraints: tuple[RateConstraint, ...], y_test: np.ndarray, predicted: np.ndarray,
                      positive: Any) -> list[dict[str, Any]]:
    """Each constraint's value on the test rows, whether it holds there, and the test rows'
    sampling error (:meth:`~calopt.constraints.RateConstraint.judge`)."""
    truth = np.where(y_test == positive, 1.0, -1.0)
    said = np.where(predicted == positive, 1.0, -1.0)
    entries = []
    for constraint in constraints:
        judged = constraint.judge(truth, said, xp=np)
        entries.append({"constraint": constraint.spec, "test": judged["value"], "satisfied": judged["satisfied"],
                        "error": judged["error"], "within_error": judged["within_error"]})
    return entries


def _calopt_run(X: Any, y: np.ndarray, X_test: Any, y_test: np.ndarray, spec: str, algorithm: str,
                epochs: int | None, seed: int, positive: Any, score: Any,
                constraints: tuple[RateConstraint, ...] = ()) -> MethodRun:
    model = fit(X, y, measure=spec, algorithm=algorithm, epochs=epochs, seed=seed, positive=positive,
                eval_set=(X_test, y_test), constraints=constraints or None)
    loop = [row["seconds"] for row in model.history]
    fixed = model.fit_seconds - (loop[-1] if loop else 0.0)  # scaling, step trial, final threshold
    curve = [{"passes": float(row["epoch"]), "seconds": fixed + row["seconds"], "value": float(row["test"])}
             for row in model.history]
    predicted = model.predict(X_test)
    value, tpr, tnr = score(y_test, predicted)
    measure = constrain(registry.get_measure(spec), constraints)
    own, route = (registry.get_algorithm(name).name for name in registry.compared_algorithms(measure))
    role = {own: "the constrained solver" if constraints else "the measure's own solver",
            route: "the plug-in route", "plugin": "the papers' plug-in route"}.get(registry.get_algorithm(algorithm).name)
    run = MethodRun(f"calopt {model.algorithm}", value, tpr, tnr, model.fit_seconds, float(len(model.history)),
                    curve, f"calopt {model.algorithm}" + (f", {role}" if role else ""),
                    "passes of the training loop (the step trial is in the seconds)",
                    constraints=_test_constraints(constraints, y_test, predicted, positive))
    return run


def _sgd_run(X: Any, y: np.ndarray, X_test: Any, y_test: np.ndarray, epochs: int, seed: int,
             score: Any) -> MethodRun:
    from sklearn.linear_model import SGDClassifier
    from sklearn.preprocessing import MaxAbsScaler

    started = time.perf_counter()
    scaler = MaxAbsScaler().fit(X)
    X_scaled = scaler.transform(X)
    seconds = time.perf_counter() - started
    X_test_scaled = scaler.transform(X_test)
    sgd = SGDClassifier(loss="log_loss", random_state=seed)
    classes, caught = np.unique(y), []
    curve = []
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        with _recorded(caught):
            sgd.partial_fit(X_scaled, y, classes=classes)
        seconds += time.perf_counter() - started
        value, tpr, tnr = score(y_test, sgd.predict(X_test_scaled))
        curve.append({"passes": float(epoch), "seconds": seconds, "value": value})
    run = MethodRun("sklearn SGD, log loss", value, tpr, tnr, seconds, float(epochs), curve,
                    "scikit-learn SGDClassifier(loss='log_loss'), its own threshold",
                    "one partial_fit pass each", caught)
    return run


def _route_run(X: Any, y: np.ndarray, X_test: Any, y_test: np.ndarray, spec: str, seed: int, positive: Any,
               score: Any, constrained: Any = None) -> MethodRun:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import TunedThresholdClassifierCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    counting, iterations = _counting(LogisticRegression)
    scoring = make_scorer(spec, pos_label=positive)
    if isinstance(constrained, ConstrainedMeasure):  # the best threshold among the feasible ones
        scoring = _constrained_scorer(constrained, positive)
    route = TunedThresholdClassifierCV(make_pipeline(MaxAbsScaler(), counting(max_iter=1000)),
                                       scoring=scoring, cv=ROUTE_FOLDS, random_state=seed)
    caught: list[str] = []
    started = time.perf_counter()
    with _recorded(caught):
        route.fit(X, y)
    seconds = time.perf_counter() - started
    predicted = route.predict(X_test)
    value, tpr, tnr = score(y_test, predicted)
    passes = float(sum(iterations))
    run = MethodRun("sklearn tuned-threshold LR", value, tpr, tnr, seconds, passes,
                    [{"passes": passes, "seconds": seconds, "value": value}],
                    f"scikit-learn TunedThresholdClassifierCV(LogisticRegression), {ROUTE_FOLDS}-fold",
                    f"L-BFGS iterations of its {ROUTE_FOLDS} cross-validation fits and the refit "
                    f"(each at least one pass)", caught,
                    _test_constraints(getattr(constrained, "constraints", ()), y_test, predicted, positive))
    return run


def _constrained_scorer(measure: ConstrainedMeasure, positive: Any) -> Any:
    """A scikit-learn scorer of predicted labels for a measure subject to constraints."""
    from sklearn.metrics import make_scorer as sklearn_make_scorer

    def constrained_score(y_true: Any, y_pred: Any) -> float:
        truth = np.where(np.asarray(y_true) == positive, 1.0, -1.0)
        said = np.where(np.asarray(y_pred) == positive, 1.0, -1.0)
        return float(measure.from_counts(*confusion_counts(truth, said, xp=np), xp=np))

    return sklearn_make_scorer(constrained_score, response_method="predict")


@contextmanager
def _recorded(caught: list[str]) -> Iterator[None]:
    """Record the warnings of the block in ``caught`` (``Category: first line``, each once) instead
    of printing them: scikit-learn's ConvergenceWarning, say, is a result of the comparison."""
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield
    for record in records:
        text = f"{record.category.__name__}: {str(record.message).strip().splitlines()[0]}"
        if text not in caught:
            caught.append(text)


def _counting(estimator_class: type) -> tuple[type, list[int]]:
    """A subclass of ``estimator_class`` (same name and parameters) whose fits append ``n_iter_`` to a list.

    ``TunedThresholdClassifierCV`` fits clones of its estimator, which keep the class, so
    the list sees the cross-validation fits and the refit.
    """
    iterations: list[int] = []

    class Counting(estimator_class):  # type: ignore[misc, valid-type]
        def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
            super().fit(X, y, sample_weight=sample_weight)
            iterations.append(int(np.max(self.n_iter_)))
            return self

    Counting.__name__ = Counting.__qualname__ = estimator_class.__name__
    return Counting, iterations

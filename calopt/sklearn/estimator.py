"""calopt inside scikit-learn: the estimator :class:`CaloptClassifier`.

:class:`CaloptClassifier` is :func:`calopt.fit` behind scikit-learn's estimator API, so
it goes where any classifier goes (``Pipeline``, ``GridSearchCV``, ``cross_val_score``,
``TunedThresholdClassifierCV``); its ``score`` is :func:`calopt.sklearn.measure_score`
of the measure it was trained for.

The estimator follows scikit-learn's contract (checked in the tests by
``parametrize_with_checks``): parameters stored by ``__init__`` and nothing else, input
validation by ``validate_data``, tags through ``__sklearn_tags__``, and array-API
support: under ``sklearn.config_context(array_api_dispatch=True)`` a PyTorch, CuPy or
array-api-strict ``X`` trains on its own library and device, and ``coef_``,
``intercept_``, ``decision_function`` and ``predict`` (for numeric classes) stay there.
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from typing import Any

import numpy as np
import sklearn
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from calopt import registry
from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend, backend_of, device, get_backend, is_sparse, namespace, to_numpy
from calopt.components import parse_spec
from calopt.errors import CaloptError, ParameterError
from calopt.constraints import ClassRateConstraint, parse_constraints, unmet_message
from calopt.io.labels import json_label, label_text, show_label
from calopt.io.stream import is_chunked
from calopt.models.linear import LinearModel, Model
from calopt.models.report import FitReport, PartialFitReport
from calopt.models.rule import softmax
from calopt.sklearn.scorers import labels_1d, measure_score, sample_weights
from calopt.training.loop import Trainer, run
from calopt.training.api import fit
from calopt.training.plan import FitPlan, build_model
from calopt.training.pipeline import prepare, resolve_backend
from calopt.training.selection import MAX_EPOCHS, PATIENCE, choose_settings
from calopt.training.stream import partial_fit_chunks

__all__ = ["CaloptClassifier"]

#: The algorithms whose model is a logistic one (its scores before the threshold are log-odds):
#: ``predict_proba`` is theirs, with the logistic loss.
LOGISTIC_ALGORITHMS = frozenset({"lbfgs", "multinomial", "plugin"})
#: The estimator's parameters that are not :func:`calopt.fit`'s own (they become its arguments).
_OWN_PARAMETERS = ("random_state", "pos_label", "class_weight", "C")


# -- the estimator ---------------------------------------------------------------------------
class CaloptClassifier(ClassifierMixin, BaseEstimator):
    """A linear classifier trained for a performance measure, as a scikit-learn estimator.

    ``fit`` is :func:`calopt.fit`: two classes train a binary model (decision
    ``X @ coef_.T + intercept_ > 0`` for ``classes_[1]``, the threshold tuned for the
    measure folded into ``intercept_``), more a multiclass one (the argmax of the class
    scores: multinomial by default, else one class against the rest at a time).
    ``partial_fit`` trains on the caller's mini-batches (one update per call unless
    ``batch_size`` splits them), keeping the solver's state between calls.
    ``predict_proba`` gives the logistic model's probabilities where there is one (lbfgs,
    multinomial, plugin); ``predict`` thresholds for the measure, not at 0.5.

    scikit-learn's estimator checks pass, every one, with
    ``check_estimator(CaloptClassifier(algorithm="gd", select="none"))``. The default
    configuration passes them all but four, declared with their reasons in
    ``tests/test_sklearn.py``: the two sample-weight equivalence checks (settings chosen on
    folds drawn over rows), ``check_classifiers_train``'s demand that ``predict_proba``'s
    argmax be ``predict`` (the threshold is tuned for the measure; scikit-learn declares
    the same for its ``TunedThresholdClassifierCV``), and ``check_class_weight_classifiers``
    (its weights 1000 and 1e-4 make every threshold's weighted F1 about 0)::

        check_estimator(CaloptClassifier(), expected_failed_checks={
            "check_sample_weight_equivalence_on_dense_data": "folds",
            "check_sample_weight_equivalence_on_sparse_data": "folds",
            "check_classifiers_train": "threshold tuned for the measure",
            "check_class_weight_classifiers": "threshold tuned for the measure"})

    Parameters
    ----------
    measure : str or calopt.Measure, default="f1"
        The measure to maximise, as a spec (``"gmean"``, ``"fbeta:beta=2"``); see
        ``calopt.list_measures()``. ``score`` reports it.
    algorithm : str or calopt.Algorithm, default=None
        The solver (``"lbfgs"``, ``"spade"``, ``"stamp:step=10"``, ``"gd"``...). None:
        ``"lbfgs"`` for two classes (the plug-in route: logistic regression, then the
        threshold best for the measure), ``"multinomial"`` for more. ``partial_fit``
        without it uses the measure's own stochastic solver (concave: ``"spade"``,
        pseudo-linear: ``"stamp"``).
    loss : str or calopt.Loss, default=None
        The margin loss or reward; None: the algorithm's default.
    epochs : int, default=None
        Passes over the training data (``fit``); None: chosen on held-out rows (until
        the held-out measure has not improved for ``patience`` passes, at most
        ``max_epochs``), or 10 with ``select="none"``.
    select : str, default="auto"
        How ``fit`` chooses the settings (step, regularisation, passes, threshold) on
        rows the weights do not see: ``"cv:K"``, ``"holdout:F"``, ``"none"`` (the
        solver's one-pass trial), or ``"auto"`` (5-fold below 20,000 rows or below 500 rows
        of the smaller class, else a 20% split); see
        :func:`calopt.fit`.
    patience : int, default=20
        Passes without improvement on the held-out rows before ``fit`` stops.
    max_epochs : int, default=100
        The most passes ``fit`` makes when it chooses them.
    batch_size : int, default=None
        Mini-batch size; None: n/100 between 32 and 1024 (``fit``), the whole call
        (``partial_fit``).
    backend : str, default=None
        Where to train: ``"numpy"``, ``"torch"``, ``"cupy"``, ``"array-api-strict"``;
        None: X's own library.
    random_state : int, RandomState instance or None, default=None
        Seeds shuffling and the step trial; an int gives the same model every time (the
        seed of :func:`calopt.fit`).
    constraints : list of str, default=None
        Rate constraints for two classes (``["precision>=0.9", "fpr<=0.01"]``): ``fit``
        maximises ``measure`` subject to them (see :func:`calopt.fit`); each one's
        training and held-out value is in ``model_.fit_report.constraints`` and one not
        met on the training data is a ``UserWarning``. ``partial_fit`` does not take them.
    pos_label : label, default=None
        The positive class of two (the one the measure is about): :func:`calopt.fit`'s
        ``positive``. None: calopt's default (1 for {0, 1} and {-1, 1}, True for booleans,
        the smaller class for other labels), or ``classes_[1]`` when both classes have
        as many rows. ``decision_function > 0`` means ``classes_[1]`` whichever it is (the
        model's scores are negated when the positive class is ``classes_[0]``); ``score``
        is the measure of the positive class. ``partial_fit``: the model's positive class
        after ``fit``, else ``pos_label``, else ``classes_[1]``.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, as in scikit-learn: ``compute_sample_weight(class_weight,
        y)`` multiplies ``sample_weight`` (``"balanced"``: n_samples / (n_classes * count)).
        ``partial_fit`` takes a dict only.
    C : float, default=None
        The inverse regularisation strength of lbfgs and multinomial (their logistic
        regression's ``C``), searchable by ``GridSearchCV``: a number fixes it (it is added
        to the algorithm's spec; another algorithm is an error), None chooses it with the
        other settings on held-out rows.
    randomised : bool, default=False
        Three or more classes: predict by the randomised Frank-Wolfe mixture of decision rules
        (each row draws its rule, with the model's seed) instead of the deterministic rule
        (:func:`calopt.fit`'s ``randomised``). Two classes: an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted (the positive class of two is ``model_.classes[1]``).
    coef_ : array of shape (1, n_features) or (n_classes, n_features)
        Weights in the original feature space (the scaling used in training is folded
        in), in X's array namespace, device and floating dtype.
    intercept_ : array of shape (1,) or (n_classes,)
        Intercepts, the binary decision threshold included.
    n_features_in_ : int
        The number of features seen by ``fit``.
    feature_names_in_ : ndarray of shape ``(n_features_in_,)``
        Defined when X has string column names (a DataFrame).
    n_iter_ : int
        The passes over the training data of the model ``fit`` returned (the chosen
        number when ``epochs`` is None), or the number of ``partial_fit`` calls.
    model_ : calopt.LinearModel or calopt.MulticlassModel
        The fitted calopt model (history, ``save``, ``to_sklearn``).

    Notes
    -----
    Every other constructor parameter is passed to :func:`calopt.fit` by its name, so a
    new option of ``calopt.fit`` becomes an estimator parameter by adding it to
    ``__init__`` (and to the docstring), nothing else.
    """

    def __init__(self, measure: Any = "f1", *, algorithm: Any = None, loss: Any = None, epochs: int | None = None,
                 select: str = "auto", patience: int = PATIENCE, max_epochs: int = MAX_EPOCHS,
                 batch_size: int | None = None, backend: str | None = None, random_state: Any = None,
                 constraints: Any = None, pos_label: Any = None, class_weight: Any = None, C: float | None = None,
                 randomised: bool = False):
        self.measure = measure
        self.algorithm = algorithm
        self.loss = loss
        self.epochs = epochs
        self.select = select
        self.patience = patience
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.backend = backend
        self.random_state = random_state
        self.constraints = constraints
        self.pos_label = pos_label
        self.class_weight = class_weight
        self.C = C
        self.randomised = randomised

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.array_api_support = True
        return tags

    # -- training ------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> CaloptClassifier:
        """Train on (X, y) with :func:`calopt.fit`; rows of ``sample_weight`` 0 take no part.

        Sample weights weigh each row in the solver's losses, rewards and rates and in the
        threshold; only their ratios matter (calopt rescales them to mean 1).
        """
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_float_dtypes(X))
        y = labels_1d(y, "y")
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        codes = codes.reshape(-1)
        _require_two_classes(self.classes_)
        weight = self._weights(y, sample_weight, codes.size)
        if weight is not None and not np.all(weight > 0):  # a row of weight 0 is a row left out
            rows = np.flatnonzero(weight > 0)
            X, codes, weight = _take_rows(X, rows), codes[rows], weight[rows]
            missing = np.setdiff1d(np.arange(self.classes_.size), codes)
            if missing.size:
                raise ValueError(f"class {show_label(self.classes_[missing[0]])} has no row with a positive "
                                 f"sample_weight; every class needs one")
        binary = self.classes_.size == 2
        if self.pos_label is not None and not binary:
            raise ValueError(f"pos_label={self.pos_label!r} is for two classes; y has {self.classes_.size}")
        options = {name: value for name, value in self.get_params(deep=False).items() if name not in _OWN_PARAMETERS}
        options["algorithm"] = self._algorithm(self.classes_.size)
        if binary:  # the labels themselves: calopt.fit chooses the positive class (pos_label, else its default)
            counts = np.bincount(codes, minlength=2)
            tie = self.pos_label is None and counts[0] == counts[1]  # scikit-learn's convention: classes_[1]
            positive = self.classes_[1] if tie else self.pos_label
            model = fit(X, _plain(self.classes_)[codes], **options, positive=positive, seed=_seed(self.random_state),
                        sample_weight=weight)
        else:  # the classes as codes: a per-class constraint's class is named by its code
            options["constraints"] = _class_codes(options.get("constraints"), self.classes_)
            model = fit(X, codes, **options, seed=_seed(self.random_state), sample_weight=weight)
        for entry in model.fit_report.constraints or ():
            if not entry["satisfied"]:
                warnings.warn(unmet_message(entry), UserWarning, stacklevel=2)
        if not binary:
            model = dataclasses.replace(model, classes=tuple(json_label(c) for c in self.classes_))
        self._set_model(model, X)
        self.n_iter_ = int(model.fit_report.epochs)
        self.__dict__.pop("_stream", None)
        return self

    def partial_fit(self, X: Any, y: Any = None, classes: Any = None, sample_weight: Any = None) -> CaloptClassifier:
        """One pass of the solver over the caller's rows, continuing from the previous call.

        The first call needs ``classes`` (every label the stream will have). Each call
        is one mini-batch (or ``batch_size`` rows at a time) of the algorithm: its state
        (iterates, averages, dual variables, levels) carries over to the next call.
        Compared with ``fit``: the features are used as given (no scaling: scale them
        first, as for ``SGDClassifier``); the decision threshold is 0, the solver's own
        (tune it on held-out data with ``TunedThresholdClassifierCV(est, cv="prefit",
        refit=False)``); the positive rate the solvers use is the running weighted share
        of the positives, (positives + 1)/(rows + 2); a step scale not given in the
        algorithm's spec is chosen by calopt's trial on the first call's rows; sample
        weights multiply each row's term as given. More than two classes train one
        binary model per class. Without ``algorithm``, ``partial_fit`` uses the measure's own
        stochastic solver (``spade``, ``stamp``): the default of ``fit``, L-BFGS, needs the
        whole data at every step. After ``fit``, the first call starts the
        solver from ``coef_`` and ``intercept_`` (its other state, such as the step count
        and the dual variables, starts afresh).

        With ``y`` None, ``X`` is an iterable of ``(X, y)`` chunks (or a file source,
        :func:`calopt.io.stream.open_stream`), each one call in turn
        (:func:`calopt.training.stream.partial_fit_chunks`).
        """
        if self.constraints:
            raise ValueError("constraints are applied by fit (the threshold among the feasible ones); "
                             "partial_fit does not take them")
        if y is None and sample_weight is None and is_chunked(X):
            return partial_fit_chunks(self, X, classes)
        stream = self.__dict__.get("_stream")
        fitted = hasattr(self, "classes_")
        if not fitted and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit")
        if classes is not None:
            classes = np.unique(labels_1d(classes, "classes"))
            if fitted and not np.array_equal(classes, self.classes_):
                raise ValueError(f"classes={classes.tolist()} is not the same as on the first call to "
                                 f"partial_fit ({self.classes_.tolist()})")
        first = not fitted
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_float_dtypes(X), reset=first)
        y = labels_1d(y, "y")
        check_classification_targets(y)
        if first:
            _require_two_classes(classes)
            self.classes_ = classes
        codes = np.searchsorted(self.classes_, y)
        unknown = (codes >= self.classes_.size) | (self.classes_[np.minimum(codes, self.classes_.size - 1)] != y)
        if np.any(unknown):
            known = ", ".join(show_label(c) for c in self.classes_)
            raise ValueError(f"label {show_label(y[np.flatnonzero(unknown)[0]])} is not one of the classes "
                             f"({known}) given on the first call to partial_fit")
        if isinstance(self.class_weight, str):
            raise ValueError(f"class_weight={self.class_weight!r} needs every row's class at once; partial_fit "
                             f"takes a dict of weights, or compute them first (sklearn.utils.class_weight)")
        weight = self._weights(y, sample_weight, codes.size)
        if weight is not None and not np.all(weight > 0):
            rows = np.flatnonzero(weight > 0)
            X, codes, weight = _take_rows(X, rows), codes[rows], weight[rows]
        if stream is None:  # the first call, or the first after fit: from fit's coefficients
            positive = self._stream_positive()
            initial = None
            if not first:  # coef_ and intercept_ score classes_[1]; the solver scores the positive class
                sign = -1.0 if positive == 0 else 1.0
                initial = (sign * to_numpy(self.coef_), sign * to_numpy(self.intercept_))
            stream = _Stream.start(self, X, codes, weight, initial, positive)
        stream.update(X, codes, weight)
        self._stream = stream
        self._set_model(stream.model(self.classes_), X)
        self.n_iter_ = stream.calls
        return self

    def _set_model(self, model: Model, X: Any) -> None:
        """Keep ``model`` and its weights as ``coef_`` and ``intercept_`` in X's namespace and dtype.

        A binary model whose positive class is ``classes_[0]`` has its scores negated, so that
        ``decision_function > 0`` means ``classes_[1]`` (scikit-learn's convention).
        """
        self.model_ = model
        sign = -1.0 if self._positive_index() == 0 else 1.0
        coef = sign * np.asarray(model.coef, dtype=np.float64).reshape(model.coef.shape[0], -1).T
        intercept = sign * np.asarray(model.intercept, dtype=np.float64).reshape(-1)
        like = _backend_like(X)
        self.coef_, self.intercept_ = like.asarray(coef), like.asarray(intercept)

    def _stream_positive(self) -> int:
        """The positive class of partial_fit (binary): the model's (fit's) when there is one, else
        ``pos_label``, else ``classes_[1]`` (a stream cannot count the classes in advance)."""
        if self.classes_.size != 2:
            return 1
        if hasattr(self, "model_"):
            return self._positive_index()
        if self.pos_label is None:
            return 1
        matches = np.flatnonzero(np.asarray(self.classes_ == self.pos_label, dtype=bool))
        if matches.size == 0:
            raise ValueError(f"pos_label={self.pos_label!r} is not one of the classes "
                             f"({', '.join(show_label(c) for c in self.classes_)})")
        return int(matches[0])

    def _positive_index(self) -> int | None:
        """The index in ``classes_`` of the fitted binary model's positive class (None: more classes)."""
        if not isinstance(self.model_, LinearModel):
            return None
        return int(np.flatnonzero(np.asarray(self.classes_ == self.model_.classes[1], dtype=bool))[0])

    def _weights(self, y: np.ndarray, sample_weight: Any, n: int) -> np.ndarray | None:
        """``sample_weight`` times the weights of ``class_weight`` (scikit-learn's ``compute_sample_weight``)."""
        weight = None if sample_weight is None else sample_weights(sample_weight, n)
        if self.class_weight is None:
            return weight
        by_class = compute_sample_weight(self.class_weight, y)
        return sample_weights(by_class if weight is None else weight * by_class, n)

    def _algorithm(self, n_classes: int) -> Any:
        """The ``algorithm`` given to :func:`calopt.fit`: as given, with ``C`` in its spec when set."""
        if self.C is None:
            return self.algorithm
        if isinstance(self.C, bool) or not isinstance(self.C, numbers.Real) or not (0 < self.C < np.inf):
            raise ValueError(f"C must be a positive number or None (chosen on held-out rows), got {self.C!r}")
        task = "binary" if n_classes == 2 else "multiclass"
        spec = self.algorithm or registry.default_algorithm(registry.get_measure(self.measure), task)
        if isinstance(spec, str) and spec.strip().lower() == "auto":
            raise ValueError(f"C={self.C!r} with algorithm='auto': name the algorithm C is for ('lbfgs')")
        if not isinstance(spec, str):
            spec = spec.spec
        name, params = parse_spec(spec)
        if "C" not in registry.get_algorithm(name).params:
            raise ValueError(f"C={self.C!r}: algorithm {name!r} has no parameter C (lbfgs and multinomial have)")
        if "C" in params:
            raise ValueError(f"C={self.C!r} and algorithm={spec!r} both set C; give it once")
        return f"{spec}{',' if params else ':'}C={float(self.C)!r}"

    # -- prediction ----------------------------------------------------------------------
    def decision_function(self, X: Any) -> Any:
        """Scores ``X @ coef_.T + intercept_``: (n,) for two classes (> 0: ``classes_[1]``), else (n, n_classes);
        a model with a deterministic decision rule for a K-class measure gives the rule's scores
        ``softmax(X @ coef_.T + intercept_) @ model_.gains``, whose argmax is ``predict``."""
        check_is_fitted(self)
        self._check_namespace(X, "decision_function")
        scores = self._scores(X)
        gains = getattr(self.model_, "gains", None)
        if scores.ndim == 2 and gains is not None:  # the rule's scores, whose argmax predict gives
            ruled = softmax(np.asarray(to_numpy(scores), dtype=np.float64)) @ gains
            return ruled if isinstance(scores, np.ndarray) else namespace(scores).asarray(ruled, device=device(scores))
        return scores

    def predict(self, X: Any) -> Any:
        """Class labels: ``classes_[1]`` where the binary score is > 0, else the argmax of the class scores.

        A multinomial model trained for a K-class measure other than accuracy predicts by the
        decision rule chosen for it on out-of-fold probabilities (``model_.fit_report.decision``;
        ``predict_proba`` stays the softmax). Numeric labels come back in X's array namespace and
        device; other labels as a NumPy array.
        """
        check_is_fitted(self)
        self._check_namespace(X, "predict")
        scores = self._scores(X)
        xp = namespace(scores)
        index = xp.astype(scores > 0, xp.int64) if scores.ndim == 1 else xp.argmax(scores, axis=1)
        if scores.ndim == 2 and getattr(self.model_, "has_rule", False):  # the rule chosen for the measure
            codes = self.model_.predict_codes(None, np.asarray(to_numpy(scores), dtype=np.float64))
            index = codes if isinstance(scores, np.ndarray) else xp.asarray(codes, device=device(scores))
        if self.classes_.dtype.kind in "biuf" and not isinstance(scores, np.ndarray):
            return xp.take(xp.asarray(self.classes_, device=device(scores)), index, axis=0)
        return self.classes_[to_numpy(index)]

    @available_if(lambda estimator: _has_logistic_model(estimator))
    def predict_proba(self, X: Any) -> Any:
        """Class probabilities (columns in ``classes_`` order) from the logistic model's scores before
        the threshold: the sigmoid of the binary log-odds, the softmax of the multinomial scores.

        Available where the model is a logistic one: algorithm lbfgs, multinomial or plugin with
        the logistic loss (the defaults; one class against the rest at a time is not). The
        threshold ``predict`` uses is tuned for the measure, not at 0.5, so
        ``predict_proba(X).argmax(1)`` need not be ``predict``'s class: the probabilities are
        the logistic model's, the decision is the measure's.
        """
        check_is_fitted(self)
        self._check_namespace(X, "predict_proba")
        scores = self._scores(X)
        xp = namespace(scores)
        if scores.ndim == 2:  # multinomial: softmax
            exp = xp.exp(scores - xp.max(scores, axis=1, keepdims=True))
            return exp / xp.sum(exp, axis=1, keepdims=True)
        sign = -1.0 if self._positive_index() == 0 else 1.0
        log_odds = scores + sign * float(self.model_.threshold)  # of classes_[1]
        small = xp.exp(-xp.abs(log_odds))  # never overflows
        proba = xp.where(log_odds >= 0, 1.0 / (1.0 + small), small / (1.0 + small))
        return xp.stack([1.0 - proba, proba], axis=1)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """The measure the model was trained for on (X, y): for more than two classes its K-class value
        (G-mean of the per-class recalls, macro F1, ...), or the mean over the classes of its
        one-vs-rest values for a measure with no K-class form."""
        check_is_fitted(self)
        binary = self.classes_.size == 2
        kclass = not binary and self.classes_.size > 2 and registry.get_measure(self.model_.measure).multiclass
        return measure_score(y, self.predict(X), measure=self.model_.measure, sample_weight=sample_weight,
                             pos_label=self.classes_[self._positive_index()] if binary else None,
                             average="binary" if binary else "multiclass" if kclass else "macro",
                             labels=None if binary else self.classes_)

    def _scores(self, X: Any) -> Any:
        X = validate_data(self, X, accept_sparse="csr", dtype=_float_dtypes(X), reset=False)
        like = _backend_like(X)
        scores = X @ like.asarray(self.coef_).T + like.asarray(self.intercept_)
        scores = np.asarray(scores) if is_sparse(X) else scores
        return scores[:, 0] if self.classes_.size == 2 else scores

    def _check_namespace(self, X: Any, method: str) -> None:
        """Under array-API dispatch, X must come from fit's library and device (scikit-learn's rule)."""
        if not sklearn.get_config()["array_api_dispatch"]:
            return
        fitted, given = _library(self.coef_), _library(X)
        if fitted != given:
            raise ValueError(f"Inputs passed to {type(self).__name__}.{method}() must use the same namespace "
                             f"and the same device as those passed to fit(): fit had {fitted[0]} on "
                             f"{fitted[1]}, {method} has {given[0]} on {given[1]}")


@dataclasses.dataclass
class _Stream:
    """The state of a partial_fit run: one solver state per binary problem (one, or one per class)."""

    algorithms: list[Algorithm]
    problem: Problem  #: with ``xp=None`` (a module does not pickle); :attr:`backend` gives it back
    backend_name: str
    dtype_name: str
    device: Any
    batch_size: int | None  #: rows per update; None: the whole call
    seed: int
    states: list[Any]
    positives: np.ndarray  #: summed weight of each problem's positives so far
    total: float = 0.0  #: summed weight of the rows so far
    calls: int = 0
    rows: int = 0
    positive: int = 1  #: the code of the positive class (two classes)

    @property
    def backend(self) -> Backend:
        return get_backend(self.backend_name, dtype=self.dtype_name, device=self.device)

    @classmethod
    def start(cls, estimator: CaloptClassifier, X: Any, codes: np.ndarray, weight: np.ndarray | None,
              initial: tuple[np.ndarray, np.ndarray] | None = None, positive: int = 1) -> _Stream:
        """Resolve the components, check them, choose unset settings on the first call's rows, and
        start each solver from ``initial`` (coef (K, d), intercept (K,)) when given, else from 0;
        two classes train class ``positive`` (a code) against the other."""
        backend = resolve_backend(X, estimator.backend, None, None)
        plan = FitPlan.resolve(measure=estimator.measure, algorithm=estimator.algorithm, loss=estimator.loss,
                               task="direct", batch_size=estimator.batch_size, seed=_seed(estimator.random_state),
                               scale=False, tune_threshold=False, select="none")
        algorithm = plan.components.algorithm
        if algorithm.multiclass or type(algorithm).prepare is not Algorithm.prepare:
            raise ValueError(f"algorithm {algorithm.name!r} transforms the whole training data before it "
                             f"trains; partial_fit needs one that updates on any mini-batch")
        own_iterate = type(algorithm).with_iterate is not Algorithm.with_iterate
        if initial is not None and own_iterate:
            raise ValueError(f"algorithm {algorithm.name!r} has its own parametrisation, so partial_fit cannot "
                             f"start it from the coefficients fit found: fit again, or use a new estimator")
        n_problems = 1 if estimator.classes_.size == 2 else estimator.classes_.size
        problem = plan.problem(backend, codes.size, X.shape[1], 0.5, batch_size=estimator.batch_size or int(codes.size),
                               epochs=None)
        algorithm.check_problem(problem)
        seed = plan.seed
        counted = np.ones(codes.size) if weight is None else weight
        data = prepare(X, _one_vs_rest(codes, 0, n_problems, positive), backend, False)  # on the backend once
        algorithms = []
        for k in range(n_problems):
            y_pm = _one_vs_rest(codes, k, n_problems, positive)
            trial = problem._replace(positive_rate=_positive_rate(float(counted @ (y_pm > 0)), float(np.sum(counted))))
            algorithms.append(choose_settings(algorithm, trial, data.X, y_pm, np.arange(codes.size), seed, backend,
                                              weight))
        states = [None] * n_problems
        if initial is not None:  # the solver's own state from scratch, its iterate fit's (w, b)
            states = []
            for k, algorithm in enumerate(algorithms):
                state = Trainer(algorithm).init(problem)
                w, b = backend.asarray(initial[0][k]), problem.scalar(float(initial[1][k]))
                states.append(state._replace(algorithm=algorithm.with_iterate(state.algorithm, (w, b))))
        return cls(algorithms, problem._replace(xp=None), backend.name, backend.dtype_name, backend.device,
                   estimator.batch_size, seed, states, np.zeros(n_problems), positive=positive)

    def update(self, X: Any, codes: np.ndarray, weight: np.ndarray | None) -> None:
        """One pass of each problem's solver over these rows (labels as codes into the classes)."""
        backend = self.backend
        counted = np.ones(codes.size) if weight is None else weight
        self.calls, self.rows, self.total = self.calls + 1, self.rows + codes.size, self.total + float(np.sum(counted))
        max_weight = self.problem.max_weight if weight is None else max(self.problem.max_weight, float(np.max(weight)))
        problem = self.problem._replace(xp=backend.xp, n_samples=int(codes.size), max_weight=max_weight,
                                        batch_size=self.batch_size or int(codes.size))
        data = prepare(X, _one_vs_rest(codes, 0, len(self.algorithms), self.positive), backend, False,
                       weight)  # on the backend once
        for k, algorithm in enumerate(self.algorithms):
            y_pm = _one_vs_rest(codes, k, len(self.algorithms), self.positive)
            self.positives[k] += float(counted @ (y_pm > 0))
            problem_k = problem._replace(positive_rate=_positive_rate(self.positives[k], self.total))
            labelled = data if k == 0 else data.with_labels(y_pm)
            reader = algorithm.prepare(problem_k, labelled.X, labelled.y, weight=labelled.rows_weight(), seed=self.seed)
            result = run(algorithm, problem_k, reader, epochs=1, seed=self.seed + self.calls, state=self.states[k])
            if result.status < 0:
                warnings.warn(f"partial_fit call {self.calls}: the update diverged (non-finite weights) and was "
                              f"left out; give the algorithm a smaller step ({algorithm.name}:step=...)",
                              ConvergenceWarning, stacklevel=3)
            self.states[k] = result.state
        self.problem = problem._replace(xp=None)

    def model(self, classes: np.ndarray) -> Model:
        """The calopt model of the current states (threshold 0: the solvers' own decision)."""
        weights = [Trainer(a).weights(s) for a, s in zip(self.algorithms, self.states)]
        coef = np.stack([np.asarray(to_numpy(w), dtype=np.float64) for w, _ in weights], axis=1)
        intercept = np.asarray([float(to_numpy(b)) for _, b in weights])
        labels = tuple(json_label(c) for c in classes)
        if len(self.algorithms) == 1:  # (negative, positive)
            labels = (labels[1 - self.positive], labels[self.positive])
        report = FitReport(epochs=self.calls, batch_size=self.batch_size, seed=self.seed, backend=self.backend_name,
                           dtype=self.dtype_name, scale=False, tune_threshold=False,
                           partial_fit=PartialFitReport(self.calls, self.rows),
                           algorithm_params=tuple(a.params for a in self.algorithms))
        binary = len(self.algorithms) == 1
        return build_model(coef[:, 0] if binary else coef, float(intercept[0]) if binary else intercept, labels,
                           report, measure=self.problem.measure, algorithm=self.algorithms[0],
                           loss=self.problem.loss, scale=np.ones(coef.shape[0]),
                           message=f"partial_fit: {self.calls} calls, {self.rows} rows",
                           **({"threshold": 0.0} if binary else {}))


# -- helpers -----------------------------------------------------------------------------------
def _has_logistic_model(estimator: CaloptClassifier) -> bool:
    """Whether the model (before fit: the algorithm and loss asked for) is a logistic one."""
    try:
        if hasattr(estimator, "model_"):
            model = estimator.model_
            name, loss = parse_spec(model.algorithm)[0], parse_spec(model.loss)[0]
            together = isinstance(model, LinearModel) or registry.get_algorithm(name).multiclass
            return together and name in LOGISTIC_ALGORITHMS and loss == "logistic"
        if estimator.algorithm is None or (isinstance(estimator.algorithm, str)
                                           and estimator.algorithm.strip().lower() == "auto"):
            return estimator.loss is None or registry.get_loss(estimator.loss).name == "logistic"
        algorithm = registry.get_algorithm(estimator.algorithm)
        loss = registry.get_loss(estimator.loss or registry.default_loss(algorithm))
        return algorithm.name in LOGISTIC_ALGORITHMS and loss.name == "logistic"
    except CaloptError:  # an unknown name: fit says so
        return False


def _plain(labels: np.ndarray) -> np.ndarray:
    """Labels held as Python objects (a pandas column) as a plain array of text or numbers."""
    return np.asarray(labels.tolist()) if labels.dtype == object else labels


def _float_dtypes(X: Any) -> tuple[Any, Any]:
    """The floating dtypes X may keep (float64, float32), in X's namespace under array-API dispatch."""
    if sklearn.get_config()["array_api_dispatch"] and not is_sparse(X):
        try:
            xp = namespace(X)
        except TypeError:  # a list, a DataFrame: NumPy's
            xp = None
        if xp is not None:
            return xp.float64, xp.float32
    return np.float64, np.float32


def _library(x: Any) -> tuple[str, str]:
    """(array library, device) of ``x``; sparse matrices, lists and DataFrames are NumPy's."""
    backend = get_backend("numpy") if is_sparse(x) else backend_of(x)
    return backend.name, str(backend.device or "cpu")


def _backend_like(X: Any) -> Backend:
    """The backend of X's library, device and floating dtype (NumPy for scipy.sparse)."""
    if is_sparse(X):
        return get_backend("numpy", dtype=np.dtype(X.dtype).name)
    return backend_of(X)


def _class_codes(constraints: Any, classes: np.ndarray) -> Any:
    """Per-class constraints (``"recall[fraud]>=0.8"``) with each class named by its position in
    ``classes`` (what :meth:`CaloptClassifier.fit` trains on), the others as given; a class not
    among them is a one-line ParameterError naming the classes."""
    parsed = parse_constraints(constraints)
    if not any(isinstance(c, ClassRateConstraint) for c in parsed):
        return constraints
    texts = [label_text(json_label(c)) for c in classes]
    for constraint in parsed:
        if isinstance(constraint, ClassRateConstraint) and constraint.label not in texts:
            raise ParameterError(f"constraint {constraint.spec!r}: no class {constraint.label!r} in y "
                                 f"({', '.join(texts[:10])}{', ...' if len(texts) > 10 else ''})")
    return [dataclasses.replace(c, label=str(texts.index(c.label))) if isinstance(c, ClassRateConstraint) else c
            for c in parsed]


def _require_two_classes(classes: np.ndarray) -> None:
    if classes.size < 2:
        raise ValueError(f"CaloptClassifier needs samples of at least 2 classes in the data, but the data "
                         f"contain only one class: {show_label(classes[0])}")


def _take_rows(X: Any, rows: np.ndarray) -> Any:
    if is_sparse(X) or isinstance(X, np.ndarray):
        return X[rows]
    xp = namespace(X)
    return xp.take(X, xp.asarray(rows, device=device(X)), axis=0)


def _seed(random_state: Any) -> int:
    """calopt's seed: an int as it is, else a draw from scikit-learn's ``check_random_state``."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def _one_vs_rest(codes: np.ndarray, k: int, n_problems: int, positive: int = 1) -> np.ndarray:
    """Labels ±1 of problem k: class ``positive`` against the other (binary), class k against the rest."""
    return np.where(codes == (positive if n_problems == 1 else k), 1.0, -1.0)


def _positive_rate(positives: float, total: float) -> float:
    """The running share of the positives, (positives + 1)/(total + 2): in (0, 1) before both classes show."""
    return float((positives + 1.0) / (total + 2.0))  # a Python float: array-api-strict takes no NumPy scalar

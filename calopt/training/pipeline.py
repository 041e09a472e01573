"""The training pipeline: prepare the data → choose settings → run the loop → tune the threshold → build the model.

The in-memory source of a :class:`~calopt.training.plan.FitPlan` (:func:`calopt.fit` on arrays
dispatches here, :mod:`calopt.training.api`): two classes train a binary :class:`LinearModel`
(:func:`fit_binary`), more train one-vs-rest (:class:`MulticlassModel`,
:func:`fit_multiclass_arrays`), either all classes together (an algorithm that declares
``multiclass``: multinomial, SLND) or one binary run per class (:class:`OneVsRest`).
Aggregation (:mod:`calopt.training.aggregate`) is the same pipeline on the base models' scores.
What happens, in order (each step documented because each is a choice):

1. The algorithm, when not given, is the one a plugin registered as the default for
   the task and the measure's family (the built-ins: two classes → ``lbfgs``, the plug-in
   route; more → ``multinomial``; the measure's own solver on a stream or a Dask cluster,
   concave → ``spade``, pseudo-linear → ``stamp``), and the loss the one registered for the
   algorithm (the built-ins: the hinge reward ``min(1, y·s)`` of the papers'
   experiments for the non-decomposable solvers, the logistic loss for the others).
2. Features are scaled by their maximum absolute value (sparse data stays sparse); the
   scaling is folded into the saved coefficients. An intercept is always fitted.
3. Parameters an algorithm declares as tunable (its step scale η₀), when not given, are
   chosen by a short trial on held-out training data (:mod:`calopt.training.selection`).
4. The loop makes ``epochs`` passes over the training data.
5. The decision threshold is tuned for the measure: on the training data, or on the
   held-out part for algorithms that hold one out (the plug-in). One-vs-rest models
   tune each class's threshold and put the classes' scores on one scale.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse

from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend, backend_of, column_max_abs, get_backend, is_sparse, to_numpy
from calopt.backends import device, namespace
from calopt.constraints import ConstrainedMeasure, RateConstraint, RateObjective, class_constrained, no_class_constraints, parse_constraint
from calopt.constraints import held_out_unmet_message, unmet_message
from calopt.errors import DataError, ModelFileError, ParameterError, TrainingError, TrainingInterrupted
from calopt.io.labels import encode_among, encode_binary, encode_like, encode_multiclass, json_label, label_text
from calopt.measures import Measure, confusion_counts
from calopt.models.linear import LinearModel, Model, MulticlassModel
from calopt.models.report import DataReading, DecisionReport, FitReport
from calopt.training import rowspace
from calopt.training.checkpoint import Checkpoint, data_fingerprint, run_resumable
from calopt.training.loop import NONFINITE, EpochRecord, LoopResult
from calopt.training.multiclass import choose_decision, skip_reason
from calopt.training.plan import DEFAULT_EPOCHS, FitPlan, RunControl, default_batch_size
from calopt.training.rowspace import RowSpace
from calopt.training.sampling import RowSample, sample_size, smaller_class
from calopt.training.selection import (
    CV_ROWS,
    HOLDOUT,
    Arm,
    Rule,
    Selector,
    choose_settings,
    fold_weights,
    foldable,
    folds_of,
    grid_of,
    load_fold_splitter,
    resolve_rule,
    stratified_split,
    take_rows,
    trains_by_candidate,
)
from calopt.training.threshold import best_cut, best_threshold, feasible_threshold_at_share, threshold_at_share

__all__ = ["DEFAULT_EPOCHS", "BinaryTask", "MulticlassTask", "OneVsRest", "Prepared", "Trained",
           "default_batch_size", "fit_binary", "fit_multiclass_arrays", "prepare", "resolve_backend",
           "sample_weights", "score_spread", "selection_rule", "train"]

Array = Any
Callback = Callable[[EpochRecord], None]
#: How a constrained model's threshold was chosen (``model.fit_report.threshold_rule``): the
#: settings selection's best feasible threshold on the out-of-fold scores, carried over by its
#: positive share to the nearest threshold that meets the constraints on the training rows too.
SHARE_FEASIBLE = "out-of-fold share, feasible on the training rows"
#: ... or, where no threshold meets them on the training rows, the closest to feasible there.
TRAINING_CLOSEST = "closest to feasible on the training rows"
#: Without a settings selection (``select="none"``): the best feasible threshold where the measure's is tuned.
TUNED_FEASIBLE = "best feasible on the training rows"
TUNED_FEASIBLE_HELD_OUT = "best feasible on the held-out part"


def resolve_backend(X: Any, backend: str | None, dtype: str | None, device: Any) -> Backend:
    """``backend`` by name (float32 by default on CuPy, else float64), or X's own when None."""
    if backend is None:
        return backend_of(X, dtype=dtype)
    return get_backend(backend, dtype=dtype or ("float32" if backend == "cupy" else "float64"), device=device)


# -- 1. prepare the data ------------------------------------------------------------------
@dataclass
class Prepared:
    """Training features on the backend, max-abs scaled, with their labels ±1 (host and device).

    ``y_host`` is (n,) for one binary problem or (C, n) one-vs-rest; ``scale`` (host,
    float64) divides each feature (ones when unscaled) and is folded into the model;
    ``weight`` holds the sample weights (host, mean 1; None: all 1); ``raw`` is the
    caller's X, untouched.
    """

    X: Any
    y_host: np.ndarray
    y: Array
    scale: np.ndarray
    backend: Backend
    raw: Any = None
    weight: np.ndarray | None = None

    def with_labels(self, y_host: np.ndarray) -> Prepared:
        """The same features with other labels (one class of a one-vs-rest problem)."""
        return dataclasses.replace(self, y_host=y_host, y=self.backend.asarray(y_host))

    def rows_weight(self, rows: np.ndarray | None = None) -> Array | None:
        """The sample weights of ``rows`` on the backend, rescaled to mean 1 (all rows: as they are)."""
        if self.weight is None:
            return None
        weight = self.weight if rows is None else self.weight[rows] / np.mean(self.weight[rows])
        return self.backend.asarray(weight)


def sample_weights(sample_weight: Any, n: int) -> np.ndarray | None:
    """``sample_weight`` as float64 weights of mean 1 (None stays None); bad ones are a ParameterError."""
    if sample_weight is None:
        return None
    weight = np.asarray(to_numpy(sample_weight), dtype=np.float64)
    if weight.shape != (n,):
        raise ParameterError(f"sample_weight has shape {weight.shape}; the data have {n} rows")
    if not (np.all(np.isfinite(weight)) and np.all(weight >= 0)):
        raise ParameterError("sample_weight must hold finite numbers ≥ 0")
    if not np.sum(weight) > 0:
        raise ParameterError("sample_weight is 0 for every row")
    return weight * (n / np.sum(weight))


def prepare(X: Any, y_pm: np.ndarray, backend: Backend, scale: bool | np.ndarray,
            weight: np.ndarray | None = None, *, owned: bool = False) -> Prepared:
    """``X`` on the backend (scipy.sparse stays sparse on NumPy), scaled by its column max-abs.

    ``scale`` is True (compute the scaling from X), False (none), or the scaling of the
    training data to apply to evaluation data; ``weight`` the sample weights (mean 1).
    ``owned``: X is the caller's private copy (a large data set's sample), which dense NumPy
    rows of the backend's dtype are scaled in (no second copy of the rows; the same numbers).
    """
    raw = X
    if is_sparse(X) and backend.name == "numpy":
        X = X.tocsr().astype(np.dtype(backend.dtype))
    else:
        X = backend.asarray(X)
    xp = backend.xp
    in_place = owned and X is raw and type(X) is np.ndarray and X.flags.writeable
    if isinstance(scale, np.ndarray):
        factors = scale
    elif not scale:
        factors = np.ones(X.shape[1])
    elif is_sparse(X) or isinstance(X, np.ndarray):
        factors = column_max_abs(X)
    else:
        factors = to_numpy(xp.max(xp.abs(X), axis=0)).astype(np.float64)
    factors[~(factors > 0) | ~np.isfinite(factors)] = 1.0
    if scale is not False:
        if is_sparse(X):
            X = (X @ scipy.sparse.diags(1.0 / factors)).tocsr().astype(X.dtype)
        elif in_place:
            X /= backend.asarray(factors)
        else:
            X = X / backend.asarray(factors)
    return Prepared(X, y_pm, backend.asarray(y_pm), factors, backend, raw, weight)


# -- 2-4. settings, the loop, the threshold ---------------------------------------------------
@dataclass
class Trained:
    """What :func:`train` returns: the weights on the prepared features and how they were reached."""

    w: np.ndarray  #: (d,) or (d, C), host float64
    b: Any  #: a float, or (C,)
    threshold: float  #: subtracted from the scores (0 for one-vs-rest trained together)
    algorithm: Algorithm  #: with the settings chosen
    loss: Any  #: the loss it trained with
    result: LoopResult
    batch_size: int
    seconds: float  #: solver time (setting selection, loop and threshold; no recording)
    reader: Any  #: what served the loop (SLND's reports its rank)
    selection: dict[str, Any] | None = None  #: what the settings selection chose (its report)
    #: The held-out labels, the chosen model's out-of-fold predictions and the weights (selection only).
    held_out: tuple[Array, Array, Array | None] | None = None


Rows = tuple[Any, Array, Array | None]  # features, labels ±1 and sample weights (or None), on the backend


class BinaryTask:
    """Threshold and history of a binary problem: the measure at the tuned threshold.

    ``train``, ``tune`` (where the threshold is tuned: the training rows unless the
    algorithm holds some out) and ``evaluation`` are :data:`Rows` on the backend; the
    scores never leave the device, only the numbers of the history do.
    """

    def __init__(self, measure: Measure, train: Rows, *, tune: Rows | None = None,
                 evaluation: Rows | None = None, tune_threshold: bool = True):
        self.measure, self.train, self.evaluation = measure, train, evaluation
        self.tune = train if tune is None else tune
        self.tune_threshold = tune_threshold
        #: The positive share the settings selection chose (:meth:`Selector._score`): the model's
        #: threshold puts that share of its training rows above it
        #: (:func:`~calopt.training.threshold.threshold_at_share`) instead of tuning there.
        self.share: float | None = None
        #: The raw threshold on the scores when the selection found that the share does not carry
        #: over to new rows (:meth:`~calopt.training.selection.Selector._share_fails`); None: the share.
        self.cut: float | None = None
        #: How the last threshold of a constrained model was chosen (:data:`SHARE_FEASIBLE` or
        #: :data:`TRAINING_CLOSEST`; None: tuned on the ``tune`` rows as any measure's is).
        self.rule: str | None = None
        #: Each training row's own term in its score by a model (weights → (n,)), subtracted from
        #: the scores where the share is cut, when the selection chose so (wide sparse rows in
        #: their span: :meth:`~calopt.training.rowspace.RowSpace.own_terms`); None: the scores.
        self.own: Callable[[Any], Any] | None = None

    def _cut(self, w: Array, b: Array) -> tuple[Array, Array | None]:
        """The threshold (0-d) for (w, b) and, when tuned on the training rows, the value there."""
        X, y, weight = self.tune
        scores = X @ w + b
        if self.share is not None and isinstance(self.measure, ConstrainedMeasure):
            threshold, found = feasible_threshold_at_share(scores, y, self.measure, self.share, weight)
            self.rule = SHARE_FEASIBLE
            if bool(found):
                return threshold, None
            self.rule = TRAINING_CLOSEST
            return best_cut(scores, y, self.measure, weight)
        if self.cut is not None:
            xp = namespace(scores)
            return xp.asarray(self.cut, dtype=scores.dtype, device=device(scores)), None
        if self.share is not None:
            if self.own is not None:
                scores = scores - namespace(scores).asarray(self.own(w), dtype=scores.dtype, device=device(scores))
            return threshold_at_share(scores, self.share, weight), None
        return best_cut(scores, y, self.measure, weight)

    def threshold(self, w: Array, b: Array) -> float:
        """The decision threshold for (w, b): at the positive share chosen on held-out data,
        tuned for the measure, or 0."""
        if not self.tune_threshold:
            return 0.0
        return float(self._cut(w, b)[0])

    def _value(self, w: Array, b: Array, X: Any, y: Array, weight: Array | None) -> Array:
        xp = namespace(y)
        scores = X @ w + b
        predictions = xp.where(scores > 0, xp.ones_like(y), -xp.ones_like(y))
        counts = confusion_counts(y, predictions, xp=xp, dtype=y.dtype, weight=weight)
        return self.measure.from_counts(*counts, xp=xp)

    def record(self, w: Array, b: Array, *, share: float | None = None, cut: float | None = None) -> dict[str, float]:
        """The measure on the training (and test) data at this epoch's tuned threshold (or at the
        positive ``share`` chosen on held-out rows, or its raw ``cut`` where the share does not carry
        over: the settings selection's best so far).

        Tuned on the training rows, the training value is the best cut's own.
        """
        best = None
        if share is not None:  # the selection's rule so far; the task's own share, cut and rule stay as they were
            kept = (self.share, self.cut, self.rule)
            self.share, self.cut = share, cut
            b = b - self._cut(w, b)[0]
            self.share, self.cut, self.rule = kept
        elif self.tune_threshold:
            threshold, best = self._cut(w, b)
            b = b - threshold
        row = {"train": best if best is not None and self.tune is self.train else self._value(w, b, *self.train)}
        if self.evaluation is not None:
            row["test"] = self._value(w, b, *self.evaluation)
        return {key: float(value) for key, value in row.items()}


class MulticlassTask:
    """History of classes trained together: top-1 accuracy of the argmax (no threshold)."""

    def __init__(self, train: tuple[Any, Array], evaluation: tuple[Any, Array] | None, backend: Backend):
        self.train, self.evaluation, self.backend = train, evaluation, backend  # (X, codes)

    def threshold(self, w: Array, b: Array) -> float:
        return 0.0

    def _top1(self, w: Array, b: Array, X: Any, codes: Array) -> float:
        xp = self.backend.xp
        hits = xp.argmax(X @ w + b, axis=1) == codes
        return float(xp.mean(xp.astype(hits, self.backend.dtype)))

    def record(self, w: Array, b: Array, *, train: Array | None = None) -> dict[str, float]:
        """Top-1 on the training (and test) rows; ``train``: the training value when the passes
        already computed it (:meth:`~calopt.algorithms.Algorithm.train_top1`)."""
        row = {"train": self._top1(w, b, *self.train) if train is None else float(train)}
        if self.evaluation is not None:
            row["test"] = self._top1(w, b, *self.evaluation)
        return row


def train(data: Prepared, algorithm: Algorithm, problem: Problem, task: Any, *, seed: int,
          run_options: dict[str, Any], kept: np.ndarray | None = None, callback: Callback | None = None,
          checkpoint: Any = None, checkpoint_every: int | None = None, resume: Checkpoint | None = None,
          interrupt: Callable[[], bool] | None = None, started: float | None = None,
          selector: Selector | None = None) -> Trained:
    """Choose settings, run the loop (resumable) and tune the threshold, on prepared data.

    ``kept`` indexes the rows the weights may see (all when None; the plug-in holds the
    rest out for its threshold); ``task`` gives the threshold and the history row of
    each epoch (binary measure or multiclass top-1). ``run_options`` are what a resumed
    run must repeat. With a ``selector`` (:class:`~calopt.training.selection.Selector`)
    the loop runs the settings selection, whose best candidate's refit model is the
    model, thresholded at the positive share chosen on held-out rows; without one,
    binary problems get the one-pass step trial (``select="none"``).
    """
    started = time.perf_counter() if started is None else started
    backend = data.backend
    all_rows = kept is None or kept.size == data.y_host.shape[-1]
    train_X, train_y = (data.X, data.y) if all_rows else (take_rows(data.X, kept, backend),
                                                          backend.asarray(data.y_host[kept]))
    train_weight = data.rows_weight(None if all_rows else kept)
    runner = algorithm if selector is None else selector
    runner.check_problem(problem)
    fingerprint = functools.cache(lambda: data_fingerprint(data.X, data.y_host, backend, data.scale, data.weight))
    if resume is not None:  # the settings chosen by the interrupted run (a selection run: its state)
        resume.check(run_options, fingerprint())
        if selector is None:
            runner = algorithm = resume.make_algorithm(algorithm)
    elif selector is None and data.y_host.ndim == 1:
        rows = np.arange(data.y_host.size) if kept is None else kept
        runner = algorithm = choose_settings(algorithm, problem, data.X, data.y_host, rows, seed, backend,
                                             data.weight)
    record = _Recorder(task, runner, selector)
    reader = runner.prepare(problem, train_X, train_y, weight=train_weight, seed=seed)
    result = run_resumable(runner, problem, reader, epochs=problem.epochs, seed=seed, backend=backend,
                           options=run_options, fingerprint=fingerprint, record=record, callback=callback,
                           checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                           interrupt=interrupt)
    report, loss, held_out = None, problem.loss, None
    if selector is not None:
        selection = selector.chosen(result.state.algorithm)
        held_out = selector.held_out_predictions(result.state.algorithm)
        algorithm, loss, report = selection.algorithm, selection.loss, selection.report()
        # Under rate constraints too the threshold is chosen on the out-of-fold scores (the best feasible
        # there) and carried over by positive share, but to the nearest threshold that also meets the
        # constraints on the training rows: benchmarks/constraint_threshold_rules.py measured the rules.
        task.share = selection.share
        task.cut = selection.threshold if selection.raw else None
        task.own = selector.own_terms if selection.own_terms else None
        if selector.latest and selection.diverged:  # the passes were given: say it stopped short
            result = dataclasses.replace(result, status=NONFINITE, message=(
                f"diverged in epoch {selection.diverged}: non-finite weights; kept epoch {selection.epochs}"))
        if not selector.moved(result.state.algorithm):
            raise TrainingError(f"training made no progress: the weights of {selector.spec} are still 0 after "
                                f"{result.epochs} epochs, for every setting tried")
    else:  # a selection may choose a constant model (all negative, say) on held-out evidence
        _check_progress(result, algorithm)
    w, b = result.weights
    threshold = task.threshold(w, b)
    if isinstance(getattr(task, "measure", None), ConstrainedMeasure) and task.tune_threshold:
        task.rule = task.rule if selector is not None else (
            TUNED_FEASIBLE if task.tune is task.train else TUNED_FEASIBLE_HELD_OUT)
    b_host = to_numpy(b).astype(np.float64)
    seconds = time.perf_counter() - started - record.seconds + (resume.seconds if resume else 0.0)
    return Trained(to_numpy(w).astype(np.float64), float(b_host) if b_host.ndim == 0 else b_host, threshold,
                   algorithm, loss, result, problem.batch_size, seconds, reader, report, held_out)


class _Recorder:
    """The history row of each epoch (:func:`train`'s ``record``), timed apart from the training.

    Without a selection: the task's row for the epoch's model (the training top-1 the passes
    computed, when the algorithm gives it); with one: the best model so far at its positive
    share, recorded again only when that model changed.
    """

    def __init__(self, task: Any, runner: Any, selector: Selector | None):
        self.task, self.runner, self.selector = task, runner, selector
        self.seconds = 0.0  #: spent recording
        self.recorded: dict[Any, dict[str, float]] = {}

    def __call__(self, info: EpochRecord) -> dict[str, float]:
        begun = time.perf_counter()
        task, selector = self.task, self.selector
        if selector is None:
            known = None if info.state.parts else self.runner.train_top1(info.state.algorithm)
            row = task.record(*info.weights) if known is None else task.record(*info.weights, train=known)
        else:
            key = selector.model_key(info.state.algorithm)
            if key not in self.recorded:
                share, cut = selector.threshold_rule(info.state.algorithm)
                self.recorded.clear()
                self.recorded[key] = {} if share is None else task.record(*info.weights, share=share, cut=cut)
            row = dict(self.recorded[key])
        self.seconds += time.perf_counter() - begun
        return row


def constraint_report(constraints: tuple[RateConstraint, ...], w: Array, b: Array, *, train: Rows,
                      validation: Rows | None = None, held_out: tuple[Array, Array, Array | None] | None = None,
                      test: Rows | None = None) -> list[dict[str, Any]]:
    """Each constraint's value for the model (w, b) (thresholded at 0) on the training, held-out and test
    rows, and whether it holds there (``satisfied``: on the training rows).

    The held-out values are those of the ``validation`` rows (the plug-in's held-out part), or of the
    settings selection's out-of-fold predictions ``held_out`` (labels, predictions ±1, weights).
    """
    def rates(X: Any, y: Array, weight: Array | None) -> list[dict[str, Any]]:
        xp = namespace(y)
        predictions = xp.where(X @ w + b > 0, xp.ones_like(y), -xp.ones_like(y))
        return rates_of(y, predictions, weight)

    def rates_of(y: Array, predictions: Array, weight: Array | None) -> list[dict[str, Any]]:
        return [constraint.judge(y, predictions, xp=namespace(y), weight=weight) for constraint in constraints]

    values = {"train": rates(*train)}
    if held_out is not None:
        values["validation"] = rates_of(*held_out)
    elif validation is not None:
        values["validation"] = rates(*validation)
    if test is not None:
        values["test"] = rates(*test)
    report = []
    for k, constraint in enumerate(constraints):
        entry = {"constraint": constraint.spec, **{split: column[k]["value"] for split, column in values.items()}}
        entry["satisfied"] = values["train"][k]["satisfied"]
        for split in ("validation", "test"):  # rows the weights did not see: with their sampling error
            if split in values:
                judged = values[split][k]
                entry[f"{split}_satisfied"] = judged["satisfied"]
                entry[f"{split}_error"] = judged["error"]
                entry[f"{split}_within_error"] = judged["within_error"]
        report.append(entry)
    return report


def report_best(entry: dict[str, Any], w: Array, b: float, train: Rows) -> float:
    """The best value of the entry's rate that any threshold of the scores X @ w + b reaches on the training rows."""
    constraint = parse_constraint(entry["constraint"])
    X, y, weight = train
    _, value = best_threshold(X @ w + b, y, RateObjective(constraint), weight)
    return value if constraint.lower else -value


def _check_progress(result: LoopResult, algorithm: Algorithm) -> None:
    """Refuse the result of a run that left no model: diverged in its first epoch, or never moved.

    A run that diverges later keeps its last finite epoch (status −1 and a message),
    which callers must report.
    """
    if result.status == NONFINITE and result.epochs == 0:
        raise TrainingError(f"training diverged in its first epoch (non-finite weights) with {algorithm.spec}; "
                            f"a smaller step or another loss may help")
    w, b = result.weights
    xp = namespace(w)
    if not bool(xp.any(w != 0) | xp.any(b != 0)):
        raise TrainingError(f"training made no progress: the weights of {algorithm.spec} are still 0 after "
                            f"{result.epochs} epochs")


# -- the in-memory source: arrays, binary (constrained too) or one-vs-rest ------------------------
def fit_binary(X: Any, labels: np.ndarray, plan: FitPlan, *, positive: Any = None, backend: str | None = None,
               dtype: str | None = None, device: Any = None, sample_weight: Any = None,
               eval_set: tuple[Any, Any] | None = None) -> LinearModel:
    """The plan on two-class arrays (``labels`` as read): labels ±1, the rule for the data, the
    features prepared on the backend, then :func:`_fit_binary`."""
    no_class_constraints(plan.measure)
    y_pm, classes = encode_binary(labels, positive=positive, source="training labels")
    resolved = resolve_backend(X, backend, dtype, device)
    if X.shape[0] != y_pm.shape[0]:
        raise ParameterError(f"X has {X.shape[0]} rows but y has {y_pm.shape[0]} labels")
    weight = sample_weights(sample_weight, y_pm.size)
    eval_labels = None if eval_set is None else encode_like(to_numpy(eval_set[1]), classes,
                                                            source="evaluation labels")
    load_fold_splitter()  # a one-off import, not training time
    started = time.perf_counter()
    rows = _row_sample(X, y_pm, plan, weight)
    train_X, train_y = (X, y_pm) if rows is None else (X[rows.sample], y_pm[rows.sample])
    evaluation = None if eval_set is None else (eval_set[0], eval_labels)
    model = fit_rows(train_X, train_y, classes, plan, resolved, started,
                     weight=weight if rows is None else rows.weight, eval_set=evaluation,
                     standardized=rows is not None, sampled=rows is not None, dtype_given=dtype is not None)
    return model if rows is None else rows.cut(model, X, y_pm, plan.measure, tune=plan.tune_threshold)


def fit_rows(X: Any, y_pm: np.ndarray, classes: tuple[Any, Any], plan: FitPlan, resolved: Backend, started: float,
             *, weight: np.ndarray | None = None, eval_set: tuple[Any, np.ndarray] | None = None,
             standardized: bool = False, sampled: bool = False, dtype_given: bool = True) -> LinearModel:
    """The binary plan on rows with labels ±1: the rule for the data, the features prepared on the
    backend (dense ones ``standardized`` when asked, for a large data set's sample; sparse text
    in float32 unless ``dtype_given``: :func:`text_backend`), in the span of the rows where they
    are wide, then :func:`_fit_binary`. An in-memory large data set's ``sampled`` rows
    (:mod:`calopt.training.sampling`) take one held-out split: the threshold is cut on the other
    rows, so the held-out rows only choose the settings. ``sampled`` rows are the caller's copy
    (drawn from the data set), which :func:`prepare` may scale in place."""
    rule = selection_rule(plan.components.algorithms, plan.select, y_pm, sampled)
    if not dtype_given:
        resolved = text_backend(X, plan, rule, resolved)
    data = prepare(X, y_pm, resolved, plan.scale, weight, owned=sampled)
    evaluation = None if eval_set is None else prepare(eval_set[0], eval_set[1], resolved, data.scale)
    shift = None
    if standardized and plan.scale is not False and not is_sparse(data.X):
        data, shift, transform = standardize(data)
        if evaluation is not None:
            evaluation = dataclasses.replace(evaluation, X=transform(evaluation.X), scale=data.scale)
    wide = _wide(data.X)  # of the columns, before any row space
    space = RowSpace.of(data.X, plan.components.algorithms, data.backend, _models(plan, rule))
    if space is None:
        return _fit_binary(data, classes, plan, rule, evaluation, started, shift=shift, wide=wide)
    # wide rows: trained in their span, the model mapped back to the columns
    columns_scale, unit = data.scale, np.ones(space.features.shape[1])
    data = dataclasses.replace(data, X=resolved.asarray(space.features), scale=unit)
    if evaluation is not None:
        evaluation = dataclasses.replace(evaluation, X=resolved.asarray(space.coordinates(evaluation.X)), scale=unit)
    return space.expand(_fit_binary(data, classes, plan, rule, evaluation, started, wide=wide,
                                    own_terms=space.own_terms if space.sparse else None), columns_scale)


def text_backend(X: Any, plan: FitPlan, rule: Rule, resolved: Backend) -> Backend:
    """The backend of a binary run whose dtype the user left to calopt: float32 in place of
    NumPy's float64 for sparse rows (text) on which the selection's L-BFGS trains each candidate
    in a trainer of its own (:func:`~calopt.training.selection.trains_by_candidate`: a pass's time is
    the two-loop recursion's traffic over the histories, which float32 halves) and which do not
    train in the span of their rows (float64 only: :func:`~calopt.training.rowspace.applies`);
    ``resolved`` elsewhere. The model keeps float64 weights (the float32 ones, exactly).

    Measured (BENCHMARKS.md, "Text in float32"): SMS spam and the sentiment sentences fit in
    0.5-0.8 of the float64 time (medians of five fits), with the same test value in 232 of the
    252 text cells of both halves and the others on either side (the development half's mean
    margins moved by at most 0.0001)."""
    if not (is_sparse(X) and resolved.name == "numpy" and resolved.dtype_name == "float64") or rule.kind == "none":
        return resolved
    algorithms = plan.components.algorithms
    n, d, entries = int(X.shape[0]), int(X.shape[1]), int(X.nnz)
    per_candidate = (rule.folds if rule.kind == "cv" else 1) + 1
    if not all(trains_by_candidate(algorithm, entries, d, per_candidate) for algorithm in algorithms) \
            or rowspace.applies(n, d, entries, algorithms, _models(plan, rule)):
        return resolved
    return get_backend("numpy", dtype="float32")


def _wide(X: Any) -> bool:
    """Whether rows ``X`` have at least as many columns as rows: a model can separate them
    (:class:`~calopt.training.selection.Selector`'s ``wide``)."""
    return int(X.shape[1]) >= int(X.shape[0])


def _models(plan: FitPlan, rule: Rule) -> int:
    """How many models a binary run of the plan trains at once: each candidate setting's fold
    models and refit one under a selection, else one."""
    if rule.kind == "none":
        return 1
    per_setting = (rule.folds if rule.kind == "cv" else 1) + 1
    return per_setting * sum(len(grid_of(candidate, plan.components.fixed))
                             for candidate, _ in plan.components.candidates)


def _row_sample(X: Any, y_pm: np.ndarray, plan: FitPlan, weight: np.ndarray | None) -> RowSample | None:
    """The rows a large fit trains on (:mod:`calopt.training.sampling`), or None (every row): only
    under the automatic selection, without sample weights or rate constraints, for host arrays."""
    host = isinstance(X, np.ndarray) or (is_sparse(X) and hasattr(X, "tocsr"))
    if plan.select is not None or weight is not None or isinstance(plan.measure, ConstrainedMeasure) or not host:
        return None
    if any(not foldable(algorithm) for algorithm in plan.components.algorithms):
        return None
    size = sample_size(int(y_pm.size), int(X.shape[1]), smaller_class(y_pm)[1])
    return None if size is None else RowSample.draw(y_pm, size, plan.seed)


def selection_rule(algorithms: list[Algorithm], rule: Rule | None, y: np.ndarray, sampled: bool = False) -> Rule:
    """The rule for training ``algorithms`` on labels ``y`` (±1): ``rule``
    (None: automatic) checked against the data, or ``none`` when an algorithm reads the data its
    own way (it cannot be cross-fitted: an error when a rule was given). On a large data set's
    sample (``sampled``) the automatic rule is one held-out split where the smaller class leaves
    each side a row."""
    if rule is not None and rule.kind == "none":
        return rule
    unfoldable = [algorithm.name for algorithm in algorithms if not foldable(algorithm)]
    if unfoldable:
        if rule is not None:
            raise ParameterError(f"select={rule}: algorithm {unfoldable[0]!r} trains on a reader of its own and "
                                 f"cannot be cross-fitted; use select='none'")
        return Rule("none")  # its own settings, DEFAULT_EPOCHS passes
    if sampled and rule is None and min(np.sum(y > 0), np.sum(y <= 0)) >= 3:
        rule = Rule("holdout", fraction=HOLDOUT)
    return resolve_rule(rule, y, CV_ROWS)


def _binary_task(data: Prepared, plan: FitPlan, rule: Rule, evaluation: Prepared | None
                 ) -> tuple[Problem, BinaryTask, np.ndarray, np.ndarray]:
    """The problem and the task of a binary run, and the rows the weights see (``kept``) and
    those an algorithm holds out for its threshold without a selection (``held``)."""
    backend, y_pm, weight = data.backend, data.y_host, data.weight
    algorithm = plan.components.algorithm
    kept, held = np.arange(y_pm.size), np.arange(0)
    if rule.kind == "none" and algorithm.holdout > 0:  # selection tunes the threshold out of fold
        kept, held = stratified_split(y_pm, algorithm.holdout, plan.seed)
    train_X = data.X if held.size == 0 else take_rows(data.X, kept, backend)
    train_y = data.y if held.size == 0 else backend.asarray(y_pm[kept])
    train_weight = None if weight is None else weight[kept]
    tune = None
    if held.size:
        tune = (take_rows(data.X, held, backend), backend.asarray(y_pm[held]),
                None if weight is None else backend.asarray(weight[held]))
    positive = y_pm[kept] > 0
    positive_rate = float(np.mean(positive) if weight is None else
                          np.sum(train_weight[positive]) / np.sum(train_weight))
    problem = plan.problem(backend, kept.size, data.X.shape[1], positive_rate,
                           batch_size=plan.budget.batch(int(kept.size), plan.components.algorithms),
                           epochs=plan.budget.passes(),
                           max_weight=1.0 if weight is None else float(np.max(train_weight) / np.mean(train_weight)))
    task = BinaryTask(plan.measure, (train_X, train_y, data.rows_weight(kept if held.size else None)), tune=tune,
                      evaluation=None if evaluation is None else (evaluation.X, evaluation.y, None),
                      tune_threshold=plan.tune_threshold)
    return problem, task, kept, held


def _selector(data: Prepared, plan: FitPlan, rule: Rule, problem: Problem, wide: bool = False,
              own_terms: Callable[[Any], Any] | None = None) -> tuple[Selector | None, Problem]:
    """The settings selection of ``rule`` (None for ``none``) and the problem it runs on (its pass cap)."""
    if rule.kind == "none":
        return None, problem
    budget, y_pm, weight = plan.budget, data.y_host, data.weight
    rule_folds = folds_of(y_pm, rule, plan.seed)
    K = rule.folds if rule.kind == "cv" else 1
    top = float(np.max(fold_weights(rule_folds, K, weight)))
    entries = int(data.X.nnz) if is_sparse(data.X) else int(data.X.shape[0]) * int(data.X.shape[1])
    arms = [Arm.build(candidate, candidate_loss, grid_of(candidate, plan.components.fixed), problem, K,
                      data.backend, top, entries) for candidate, candidate_loss in plan.components.candidates]
    selector = Selector(arms, rule, rule_folds, data.X, y_pm, weight, plan.measure, data.backend,
                        patience=None if budget.epochs is not None else budget.patience,
                        latest=budget.epochs is not None, wide=wide, own_terms=own_terms)
    return selector, problem._replace(epochs=budget.epochs or budget.max_epochs)


def _run_options(plan: FitPlan, classes: tuple[Any, ...], problem: Problem, backend: Backend,
                 evaluation: Any, rule: Rule) -> dict[str, Any]:
    """What a resumed binary run must repeat (the checkpoint's options)."""
    components = plan.components
    options = {"measure": plan.measure.spec, "algorithm": components.algorithm.spec, "loss": components.loss.spec,
               "epochs": plan.budget.epochs, "batch_size": problem.batch_size, "seed": plan.seed,
               "backend": backend.name, "dtype": backend.dtype_name, "scale": plan.scale,
               "tune_threshold": plan.tune_threshold, "eval_set": evaluation is not None,
               "classes": [json_label(c) for c in classes], "select": str(rule)}
    if len(components.candidates) > 1:
        options["algorithm"] = options["loss"] = "auto"
    return options


def _fit_binary(data: Prepared, classes: tuple[Any, Any], plan: FitPlan, rule: Rule, evaluation: Prepared | None,
                started: float, run: RunControl | None = None, shift: np.ndarray | None = None,
                wide: bool | None = None, own_terms: Callable[[Any], Any] | None = None) -> LinearModel:
    """The binary plan on prepared data (labels ±1, classes known) with the selection ``rule``.

    ``run`` replaces the plan's run control (one class of a one-vs-rest run, its own); ``wide``
    says whether the rows have at least as many columns as rows (None: ``data.X``'s, which
    in the span of the rows are not the columns'); ``own_terms`` (sparse rows in their span:
    :meth:`~calopt.training.rowspace.RowSpace.own_terms`) gives each training row's own term
    in its score by a model, for the selection's threshold (:class:`Selector`'s ``own_terms``).
    """
    wide = _wide(data.X) if wide is None else wide
    backend, measure, run = data.backend, plan.measure, run or plan.run
    problem, task, kept, held = _binary_task(data, plan, rule, evaluation)
    run_options = _run_options(plan, classes, problem, backend, evaluation, rule)
    for candidate, candidate_loss in plan.components.candidates:
        candidate.check_problem(problem._replace(loss=candidate_loss))
    selector, problem = _selector(data, plan, rule, problem, wide, own_terms)
    trained = train(data, plan.components.algorithm, problem, task, seed=plan.seed, run_options=run_options,
                    kept=None if held.size == 0 else kept, started=started, selector=selector, **run.keywords())
    constrained, message = {}, trained.result.message
    if isinstance(measure, ConstrainedMeasure):
        constrained, message = _constraint_outcome(measure, trained, task, backend)
    report = FitReport(epochs=trained.selection["epochs"] if trained.selection else trained.result.epochs,
                       batch_size=trained.batch_size, seed=plan.seed, backend=backend.name, dtype=backend.dtype_name,
                       scale=plan.scale, tune_threshold=plan.tune_threshold,
                       algorithm_params=trained.algorithm.params, select=str(rule), selection=trained.selection,
                       **constrained)
    intercept = trained.b - trained.threshold - (0.0 if shift is None else float(shift @ trained.w))
    return plan.model(trained.w / data.scale, intercept, classes, report,
                      algorithm=trained.algorithm, loss=trained.loss, scale=data.scale, threshold=trained.threshold,
                      history=trained.result.history, fit_seconds=trained.seconds, status=trained.result.status,
                      message=message)


def _constraint_outcome(measure: ConstrainedMeasure, trained: Trained, task: BinaryTask,
                        backend: Backend) -> tuple[dict[str, Any], str]:
    """The constraints' report (each one's values, what thresholds could reach for one not met) and
    the model's message with the constraints not met."""
    w, b = backend.asarray(trained.w), backend.asarray(np.float64(trained.b - trained.threshold))
    report = constraint_report(measure.constraints, w, b, train=task.train,
                               validation=None if task.tune is task.train else task.tune,
                               held_out=trained.held_out, test=task.evaluation)
    b_raw = backend.asarray(np.float64(trained.b))
    if not all(entry["satisfied"] for entry in report):  # for the messages: what thresholds can reach
        X_train, y_train, weight_train = task.train
        jointly = best_threshold(X_train @ w + b_raw, y_train, measure, weight_train)[1] >= 0
        for entry in report:
            if not entry["satisfied"]:
                entry["best"] = report_best(entry, w, b_raw, task.train)
                entry["jointly"] = bool(jointly)
    unmet = [unmet_message(entry) for entry in report if not entry["satisfied"]]
    if trained.selection is not None:  # its value is the objective's among feasible thresholds
        trained.selection["measure"] = measure.spec
    if trained.selection is not None and trained.selection["value"] < 0:  # none feasible out of fold
        unmet.insert(0, held_out_unmet_message(report, trained.selection["rule"]))
    message = "; ".join(filter(None, [trained.result.message, *unmet]))
    return {"constraints": tuple(report), "threshold_rule": task.rule}, message


def fit_multiclass_arrays(X: Any, labels: np.ndarray, plan: FitPlan, *, backend: str | None = None,
                          dtype: str | None = None, device: Any = None, sample_weight: Any = None,
                          eval_set: tuple[Any, Any] | None = None, randomised: bool = False) -> MulticlassModel:
    """The plan on arrays of two or more classes, one-vs-rest: every class in one run (an algorithm
    that declares ``multiclass``, then the decision rule for the measure:
    :mod:`calopt.training.multiclass`) or one binary run per class (see :func:`calopt.fit_multiclass`)."""
    codes, classes = encode_multiclass(labels, source="training labels")
    if classes.size < 2:
        raise DataError(f"only one class ({label_text(classes[0])}); need two or more", source="training labels")
    if X.shape[0] != codes.size:
        raise ParameterError(f"X has {X.shape[0]} rows but y has {codes.size} labels")
    algorithm, rule = plan.components.algorithm, plan.select
    if algorithm.multiclass and rule is not None and rule.kind != "none":
        raise ParameterError(f"select={rule}: algorithm {algorithm.name!r} trains every class at once and is not "
                             f"cross-fitted; use select='auto' (its own stopping rule) or 'none'")
    classes = tuple(json_label(c) for c in classes)
    C = len(classes)
    load_fold_splitter()  # a one-off import, not training time
    started = time.perf_counter()
    resolved = resolve_backend(X, backend, dtype, device)
    eval_codes = None if eval_set is None else encode_among(to_numpy(eval_set[1]), classes,
                                                            source="evaluation labels")
    members = codes[None, :] == np.arange(C)[:, None]
    data = prepare(X, np.where(members, 1.0, -1.0), resolved, plan.scale, sample_weights(sample_weight, codes.size))
    # what a resumed run must repeat; "classes" tells a multiclass checkpoint from a binary one
    options = {"classes": list(classes), "one_vs_rest": "together" if algorithm.multiclass else "per class",
               "measure": plan.measure.spec, "algorithm": algorithm.spec, "loss": plan.components.loss.spec,
               "epochs": plan.budget.epochs, "batch_size": plan.budget.batch_size, "seed": plan.seed,
               "backend": resolved.name, "dtype": resolved.dtype_name, "scale": plan.scale,
               "eval_set": eval_set is not None}
    if not algorithm.multiclass:
        evaluation = None
        if eval_set is not None:
            evaluation = prepare(eval_set[0], np.where(eval_codes == np.arange(C)[:, None], 1.0, -1.0),
                                 resolved, data.scale)
        options["select"] = str(rule or "auto")
        return OneVsRest(data, classes, plan, options).fit(evaluation, started)
    evaluation = None
    if eval_set is not None:
        eval_data = prepare(eval_set[0], eval_codes, resolved, data.scale)
        evaluation = (eval_data.X, resolved.xp.asarray(eval_codes, device=resolved.device))
    return _fit_together(data, codes, classes, plan, evaluation, options, started, randomised)


def _fit_together(data: Prepared, codes: np.ndarray, classes: tuple[Any, ...], plan: FitPlan,
                  evaluation: tuple[Any, Array] | None, options: dict[str, Any], started: float,
                  randomised: bool = False) -> MulticlassModel:
    """Every class in one run of an algorithm that declares ``multiclass`` (top-1 in the history),
    then the decision rule for the measure on out-of-fold probabilities (:func:`choose_decision`):
    on the features standardized where dense (:func:`_standardized`), in the span of the rows
    where they are wide (:mod:`calopt.training.rowspace`)."""
    data, shift, evaluation = _standardized(data, plan, evaluation)
    space = RowSpace.of(data.X, [plan.components.algorithm], data.backend, models=len(classes))  # a class a model
    if space is None:
        return _train_together(data, codes, classes, plan, evaluation, options, started, randomised, shift)
    columns_scale, resolved = data.scale, data.backend
    data = dataclasses.replace(data, X=resolved.asarray(space.features), scale=np.ones(space.features.shape[1]))
    if evaluation is not None:
        evaluation = (resolved.asarray(space.coordinates(evaluation[0])), evaluation[1])
    model = space.expand(_train_together(data, codes, classes, plan, evaluation, options, started, randomised,
                                         None), columns_scale)
    if shift is None:
        return model
    weights = model.coef * columns_scale[:, None]  # the weights of the standardized columns, X'BU
    return dataclasses.replace(model, intercept=model.intercept - shift @ weights)


def _train_together(data: Prepared, codes: np.ndarray, classes: tuple[Any, ...], plan: FitPlan,
                    evaluation: tuple[Any, Array] | None, options: dict[str, Any], started: float,
                    randomised: bool, shift: np.ndarray | None) -> MulticlassModel:
    """:func:`_fit_together` on its prepared features."""
    algorithm, resolved, C = plan.components.algorithm, data.backend, len(classes)
    # until the algorithm's own convergence test stops it, or the fixed default
    default = plan.budget.max_epochs if type(algorithm).converged is not Algorithm.converged else DEFAULT_EPOCHS
    problem = plan.problem(resolved, codes.size, data.X.shape[1], 1.0 / C,
                           batch_size=plan.budget.batch(int(codes.size), [algorithm]),
                           epochs=plan.budget.passes(default), n_classes=C)
    task = MulticlassTask((data.X, resolved.xp.asarray(codes, device=resolved.device)), evaluation, resolved)
    trained = train(data, algorithm, problem, task, seed=plan.seed, run_options=options, started=started,
                    **plan.run.keywords())
    report = FitReport(epochs=trained.result.epochs, batch_size=problem.batch_size, seed=plan.seed,
                       backend=resolved.name, dtype=resolved.dtype_name, scale=plan.scale,
                       algorithm_params=trained.algorithm.params, rank=getattr(trained.reader, "rank", None),
                       sample=getattr(trained.reader, "sample", None))
    deciding = time.perf_counter()
    # C is chosen with the rule, unless the user gave it or asked for no selection
    choose_c = "C" not in plan.components.fixed and not (plan.select is not None and plan.select.kind == "none")
    rule, decision, chosen = choose_decision(data.X, codes, data.weight, trained.w, trained.b,
                                             measure=class_constrained(plan.measure, classes),
                                             algorithm=trained.algorithm, seed=plan.seed, randomised=randomised,
                                             choose_c=choose_c)
    w, b = (trained.w, trained.b) if chosen is None else (chosen[0].astype(trained.w.dtype), chosen[1].astype(trained.b.dtype))
    intercept = b if shift is None else b - shift @ w
    return plan.model(w / data.scale[:, None], intercept, classes, report.replace(decision=decision),
                      algorithm=trained.algorithm, scale=data.scale, history=trained.result.history,
                      fit_seconds=trained.seconds + time.perf_counter() - deciding, status=trained.result.status,
                      message=trained.result.message, **rule)


def _standardized(data: Prepared, plan: FitPlan, evaluation: tuple[Any, Array] | None
                  ) -> tuple[Prepared, np.ndarray | None, tuple[Any, Array] | None]:
    """Dense features on NumPy for the multinomial model: centred and divided by their standard
    deviation (scikit-learn's ``StandardScaler``), not only max-abs scaled; sparse ones (and
    ``scale=False``) as they are. Returns the data, the shift ``μ/σ`` (in the max-abs units, folded
    into the intercepts: scores = X·w/(s·σ) + b − (μ/σ)·w) or None, and the evaluation rows alike.

    Why: max-abs scaling keeps a column's offset (a value of 2950 ± 300 becomes 0.98 ± 0.1), which
    the L2 penalty then fights; on the K-class benchmark's dense sets the multinomial argmax
    trailed StandardScaler + LogisticRegression by 0.06-0.11 (page_blocks balanced accuracy 0.38
    against 0.73), and the decision rule starts from those probabilities.
    """
    if plan.scale is False or is_sparse(data.X) or plan.components.algorithm.name != "multinomial":
        return data, None, evaluation
    data, shift, transform = standardize(data)
    return data, shift, None if evaluation is None else (transform(evaluation[0]), evaluation[1])


def standardize(data: Prepared) -> tuple[Prepared, np.ndarray, Any]:
    """Dense max-abs-scaled features centred and divided by their standard deviation: the data, the
    shift μ/σ (scores = X·w/(s·σ) + b − (μ/σ)·w, folded into the intercepts) and the transform
    for other rows of the same features."""
    xp, backend = data.backend.xp, data.backend
    X = data.X  # prepare's own scaled copy (scaling is on): centred in place, no second copy of the rows
    fast = isinstance(X, np.ndarray) and X.dtype == np.float64
    if fast:  # NumPy's std without its centred and squared copies of the rows (each sums the rows in order)
        mean_x = np.mean(X, axis=0)
        X -= mean_x
        spread, mean = np.sqrt(np.einsum("ij,ij->j", X, X) / X.shape[0]), mean_x
    else:
        spread = to_numpy(xp.std(X, axis=0)).astype(np.float64)
        mean = to_numpy(xp.mean(X, axis=0)).astype(np.float64)
    spread[~(spread > 0) | ~np.isfinite(spread)] = 1.0
    on_device = backend.asarray(mean), backend.asarray(spread)

    def transform(X: Any) -> Any:
        return (X - on_device[0]) / on_device[1]

    if not fast:
        X -= on_device[0]
    X /= on_device[1]
    return dataclasses.replace(data, X=X, scale=data.scale * spread), mean / spread, transform


def score_spread(scores: np.ndarray, weight: np.ndarray | None = None) -> float:
    """The standard deviation of one class's training scores (weighted by the sample weights when
    given, so that integer weights give what repeated rows give); 1 when it is 0 or not finite.

    One class at a time, each class's scores are divided by it, to put the classes on one scale
    for the argmax (:func:`calopt.fit_multiclass`).
    """
    if weight is None:
        spread = float(np.std(scores))
    else:
        scores = np.asarray(scores, dtype=np.float64)
        mean = weight @ scores / np.sum(weight)
        spread = float(np.sqrt(weight @ (scores - mean) ** 2 / np.sum(weight)))
    return spread if spread > 0 and np.isfinite(spread) else 1.0


class OneVsRest:
    """One-vs-rest by the binary plan once per class; checkpoints name the class and keep the finished ones.

    A class's own checkpoint is wrapped in the multiclass one: its options and fingerprint
    move to ``one_vs_rest`` (with the finished classes), so resuming checks the multiclass
    run, restores the finished classes and resumes the current one. Each class's scores
    are divided by their spread on the training rows (:func:`score_spread`, weighted by the
    sample weights).
    """

    def __init__(self, data: Prepared, classes: tuple[Any, ...], plan: FitPlan, options: dict[str, Any]):
        self.data, self.classes, self.plan, self.options = data, classes, plan, options
        self.fingerprint = functools.cache(lambda: data_fingerprint(data.X, data.y_host, data.backend, data.scale))
        self.finished: list[dict[str, Any]] = []  # per class: coef, intercept, history, status, message, options

    def _restore(self, resume: Checkpoint) -> Checkpoint:
        """The finished classes of a one-vs-rest checkpoint, and the current class's own checkpoint."""
        resume.check(self.options, self.fingerprint())
        part = resume.one_vs_rest or {}
        done = part.get("finished", [])
        coefs = resume.arrays.get("finished.coef")
        if not isinstance(part.get("class"), int) or len(done) != part["class"] or \
                (done and (coefs is None or coefs.ndim != 2 or coefs.shape[1] != len(done))):
            raise ModelFileError(f"{resume.source}: incomplete one-vs-rest checkpoint")
        self.finished = [{**entry, "coef": coefs[:, c]} for c, entry in enumerate(done)]
        return dataclasses.replace(resume, options=part["options"], fingerprint=part["fingerprint"], one_vs_rest=None)

    def wrap(self, inner: Checkpoint, c: int) -> Checkpoint:
        """Class ``c``'s checkpoint inside the multiclass one, with the finished classes."""
        arrays = dict(inner.arrays)
        if self.finished:
            arrays["finished.coef"] = np.stack([entry["coef"] for entry in self.finished], axis=1)
        return dataclasses.replace(inner, options=self.options, fingerprint=self.fingerprint(), arrays=arrays,
                                   one_vs_rest={"class": c, "label": label_text(self.classes[c]),
                                                "options": inner.options, "fingerprint": inner.fingerprint,
                                                "finished": [{k: v for k, v in entry.items() if k != "coef"}
                                                             for entry in self.finished]})

    def _run(self, c: int, resume: Checkpoint | None) -> RunControl:
        """Class ``c``'s run control: its checkpoints wrapped, its epochs counted across the classes."""
        run, C = self.plan.run, len(self.classes)
        cap = self.plan.budget.epochs or self.plan.budget.max_epochs  # a class's passes at the most
        write = None if run.checkpoint is None else (lambda inner: self.wrap(inner, c).save(run.checkpoint))
        on_epoch = None if run.callback is None else (lambda info: run.callback(
            info._replace(epoch=c * cap + info.epoch, total_epochs=C * cap)))
        return RunControl(on_epoch, write, run.checkpoint_every, resume, run.interrupt)

    def fit(self, evaluation: Prepared | None, started: float) -> MulticlassModel:
        """Train the classes not finished yet, in order, and put them together."""
        data, plan = self.data, self.plan
        # each class searches every tunable, the ones the user gave too (as before the plan: the
        # models stay as they were; a given step is kept with select="none")
        plan = dataclasses.replace(plan, components=dataclasses.replace(plan.components, fixed=frozenset()))
        resume = plan.run.resume
        current = None if resume is None else self._restore(resume)
        first_to_fit = len(self.finished)
        for c in range(first_to_fit, len(self.classes)):
            class_data = data.with_labels(data.y_host[c])
            class_eval = None if evaluation is None else evaluation.with_labels(evaluation.y_host[c])
            try:
                rule = selection_rule([plan.components.algorithm], plan.select, class_data.y_host)
                model = _fit_binary(class_data, (-1.0, 1.0), plan, rule, class_eval, time.perf_counter(),
                                    self._run(c, current if c == first_to_fit else None))
            except TrainingInterrupted as exc:
                saved = self.wrap(exc.checkpoint, c)
                path = plan.run.checkpoint
                where = f"; checkpoint written to {path}" if path is not None else ""
                raise TrainingInterrupted(f"training interrupted in {saved.describe()}{where}", saved,
                                          path) from None
            spread = score_spread(to_numpy(model.decision_function(data.raw)), data.weight)
            self.finished.append({"coef": model.coef / spread, "intercept": model.intercept / spread,
                                  "spread": spread, "history": model.history, "status": model.status,
                                  "message": model.message, "options": model.fit_report.to_json(),
                                  "scale": model.scale.tolist()})
        return self._model(started)

    def _model(self, started: float) -> MulticlassModel:
        """The classes' models as one: their weights side by side, the history averaged over the classes."""
        finished, resume = self.finished, self.plan.run.resume
        history = [
            {"epoch": rows[0]["epoch"], "seconds": sum(r["seconds"] for r in rows),
             **{key: float(np.mean([r[key] for r in rows])) for key in ("train", "test") if key in rows[0]}}
            for rows in zip(*(entry["history"] for entry in finished))
        ]
        first = finished[0]
        measure = getattr(self.plan.measure, "objective", self.plan.measure)
        report = FitReport.from_json(first["options"]).replace(
            one_vs_rest="per class", score_spreads=tuple(entry.get("spread", 1.0) for entry in finished),
            decision=DecisionReport(rule="argmax", measure=measure.spec, reason=skip_reason(
                measure, self.plan.components.algorithm, len(self.classes))))
        coef = np.stack([entry["coef"] for entry in finished], axis=1)
        return self.plan.model(
            coef, np.array([entry["intercept"] for entry in finished]), self.classes, report, scale=np.asarray(first["scale"], dtype=np.float64), history=history,
            fit_seconds=time.perf_counter() - started + (resume.seconds if resume else 0.0),
            status=min(entry["status"] for entry in finished),
            message="; ".join(dict.fromkeys(entry["message"] for entry in finished)))


def named(X: Any, model: Model) -> Model:
    """``model`` with the names of a DataFrame's columns as its ``feature_names`` (when they are
    distinct strings, as scikit-learn's ``feature_names_in_``); other inputs leave it as it is."""
    names = list(getattr(X, "columns", None) if hasattr(X, "columns") and hasattr(X, "dtypes") else [])
    if names and all(isinstance(name, str) for name in names) and len(set(names)) == len(names):
        model.fit_report = model.fit_report.replace(data=dataclasses.replace(model.fit_report.data or DataReading(),
                                                                             feature_names=tuple(names)))
    return model

"""``calopt.aggregate``: combine trained models by mirror descent with averaging (paper 001).

The base predictors are the decision functions of saved binary models,
``h_i(x) = (x·w_i + b_i)/s_i``, each divided by a fixed scale ``s_i`` that puts it at
its own best φ-risk on the aggregation data: s_i = max|score_i| / a_i, with a_i the
slope minimising mean φ(y·a·score_i/max|score_i|) (:func:`risk_slope`). The models
are then on one footing (for the logistic loss, each h_i is the model's best fit of the
log-odds by a multiple of its score), and with λ = 1 each vertex of Θ is one model at
that scale, so the least risk over Θ is never above the best single model's. The loss
is weighted per class by the measure's gradient at the best model
(:func:`measure_weights`), and the scales are for that weighted loss. The weights
θ ≥ 0 with Σθ = λ (``radius``) are learnt by the algorithm a plugin declares for
aggregation (the built-in: mirror descent with ``signed=False``, the models being
already oriented), run by the training pipeline over the matrix of base predictions,
the class weights given as sample weights. Each base predictor
is linear, so the aggregate Σθ_i h_i(x) is linear too: the result is an ordinary
:class:`~calopt.models.linear.LinearModel` with ``coef = Σθ_i w_i/s_i`` and
``intercept = Σθ_i b_i/s_i − threshold``, the threshold tuned for the measure on the
aggregation data as :func:`calopt.fit` does.

The mixture is then checked on rows θ̂ did not see (``select``, the training pipeline's
rule: K-fold cross-fitting below :data:`~calopt.training.selection.CV_MINORITY` rows of
the smaller class, one stratified held-out part from there on): refitted without each
fold (scales and class weights included), its out-of-fold scores at their best threshold
are compared with each model alone on the same rows; the best model alone replaces the
mixture only when it wins on at least 90% of paired bootstrap resamples of those rows
(:func:`select_candidate`), and the one kept is refitted on every row. Without the check
the mixture trailed the best single model (picked on the test data) by more than 0.005 in
a third of the wide benchmark's cells with ≥ 30 test positives
(benchmarks/bench_aggregate_suite.py, BENCHMARKS.md).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from calopt.backends import get_backend, to_numpy
from calopt.errors import DataError, ModelFileError, ParameterError
from calopt.io.labels import encode_like
from calopt.losses import Loss
from calopt.measures import Measure
from calopt.models.linear import LinearModel
from calopt.models.report import FitReport
from calopt.training.loop import CONVERGED
from calopt.training.pipeline import BinaryTask, Trained, prepare, train
from calopt.training.plan import Budget, Components, FitPlan, check_count
from calopt.training.selection import (
    CONFIDENCE,
    Rule,
    folds_of,
    load_fold_splitter,
    parse_rule,
    resolve_rule,
    win_probability,
)
from calopt.training.threshold import best_threshold

__all__ = ["BATCH_SIZE", "RADIUS", "AggregationTask", "Mixture", "aggregate", "fit_mixture", "load_models",
           "measure_weights", "risk_slope", "select_candidate"]

Array = Any

Models = Mapping[str, LinearModel] | Sequence[LinearModel | str | os.PathLike]
#: Default mini-batch size. An update costs O(batch·M) with M the (few) models, and the
#: Theorem's rate is in the number of updates. On a9a (G-mean, 10 passes, seeds 0-2, in
#: an earlier set-up: max-abs scaled scores, λ = 100, the Theorem's temperature) the
#: aggregate's test value was 0.0015-0.0035 below the best single model with batches of
#: 32, 0.0037-0.0058 with n/100 = 325, and 0.0002-0.0026 pointwise (30× slower).
BATCH_SIZE = 32
#: Default λ = Σθ. Each base predictor is at its φ-risk-optimal scale, so with λ = 1 the
#: aggregates are the convex combinations of the models, vertices (each model alone)
#: included: the least risk over Θ is at most the best single model's. On a9a (seeds
#: 0-4, 6-7 solvers, 10 passes; benchmarks/bench_aggregate.py) λ = 1 kept the test value
#: within 0.0044 of the best single model on all 8 measures (mean gap −0.0009); λ = 2
#: lost up to 0.010 (jaccard), a sum of models more confident than each.
RADIUS = 1.0
_LOG_SLOPE_BOUND = 10.0
#: Step of the central differences of the measure in (TPR, TNR).
_RATE_STEP = 1e-4


def load_models(models: Models) -> dict[str, LinearModel]:
    """The models by name (a file's path, or ``models[i]`` for an object), checked to agree.

    Paths are read with :meth:`LinearModel.load`. All models must have the same number
    of features and the same classes; a mismatch is a one-line ModelFileError naming
    the model.
    """
    if isinstance(models, Mapping):
        named = dict(models)
    else:
        named = {}
        for i, item in enumerate(models):
            if isinstance(item, LinearModel):
                named[f"models[{i}]"] = item
            elif str(item) in named:
                raise ParameterError(f"{item}: given twice; aggregate distinct models")
            else:
                named[str(item)] = LinearModel.load(item)
    if len(named) < 2:
        raise ParameterError(f"aggregate needs at least 2 models, got {len(named)}")
    (first_name, first), *others = named.items()
    for name, model in others:
        if model.n_features != first.n_features:
            raise ModelFileError(
                f"{name}: has {model.n_features} features, {first_name} has {first.n_features}")
        if tuple(model.classes) != tuple(first.classes):
            raise ModelFileError(
                f"{name}: classes {list(model.classes)} differ from {first_name}'s {list(first.classes)}")
    return named


def measure_weights(scores: np.ndarray, y: np.ndarray, measure: Any) -> tuple[float, float, int]:
    """Class weights (w₊, w₋) that make the loss follow ``measure`` near the best model, and its index.

    The best model is the one with the highest measure on (scores, y) at its own tuned
    threshold; there the measure's gradient (a, b) = ∂M/∂(TPR, TNR) (central
    differences of ``measure.from_rates``, so any registered measure works) gives the
    linearisation a·TPR + b·TNR = Σ_positives a/P·1[correct] + Σ_negatives b/N·1[correct],
    a weighted accuracy. Its weights, rescaled so that they average 1 over the rows,
    are w₊ = a/((a+b)·p) and w₋ = b/((a+b)·(1−p)), p the positive rate. Where a or b
    is not positive (min(TPR, TNR) away from its kink) the two rates count equally,
    a = b (the balanced weights).
    """
    values = [best_threshold(column, y, measure) for column in scores.T]
    best = int(np.argmax([value for _, value in values]))
    predicted = scores[:, best] > values[best][0]
    positives = y > 0
    tpr, tnr = float(np.mean(predicted[positives])), float(np.mean(~predicted[~positives]))
    p = float(np.mean(positives))
    h = _RATE_STEP
    tpr, tnr = min(max(tpr, h), 1 - h), min(max(tnr, h), 1 - h)

    xp = get_backend("numpy").xp

    def at(t: float, u: float) -> float:
        return float(measure.from_rates(xp.asarray(t), xp.asarray(u), p, xp=xp))

    a = (at(tpr + h, tnr) - at(tpr - h, tnr)) / (2 * h)
    b = (at(tpr, tnr + h) - at(tpr, tnr - h)) / (2 * h)
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        a = b = 1.0
    return a / ((a + b) * p), b / ((a + b) * (1 - p)), best


def risk_slope(u: np.ndarray, y: np.ndarray, loss: Any, weights: np.ndarray | None = None) -> float:
    """a > 0 minimising the φ-risk mean w·φ(y·a·u) of the scaled scores u ∈ [−1, 1] (Brent, on log a).

    The risk is convex in a, so unimodal in log a; the search is bounded to
    a ∈ [e⁻¹⁰, e¹⁰] (a score that separates the data pushes a to the upper end).
    """
    w = 1.0 if weights is None else weights
    xp = get_backend("numpy").xp

    def risk(log_a: float) -> float:
        return float(np.mean(w * loss.value(y * (math.exp(log_a) * u), xp=xp)))

    return math.exp(minimize_scalar(risk, bounds=(-_LOG_SLOPE_BOUND, _LOG_SLOPE_BOUND), method="bounded",
                                    options={"xatol": 1e-8}).x)


class AggregationTask(BinaryTask):
    """The binary task of the pipeline, whose history also records the weighted loss on the aggregation data."""

    def __init__(self, H: Array, y: Array, weight: Array, measure: Measure, loss: Loss, tune_threshold: bool,
                 xp: Any):
        super().__init__(measure, (H, y, None), tune_threshold=tune_threshold)
        self.H, self.y, self.weight, self.loss, self.xp = H, y, weight, loss, xp

    def record(self, w: Array, b: Array) -> dict[str, float]:
        xp = self.xp
        loss = float(xp.mean(self.weight * self.loss.value(self.y * (self.H @ w + b), xp=xp)))
        return {**super().record(w, b), "loss": loss}


@dataclass
class Mixture:
    """θ̂ learnt on some rows: the weights of the models' raw scores are ``theta / scales``."""

    theta: np.ndarray  #: θ̂ over the scaled base predictors (Σθ = λ)
    scales: np.ndarray  #: s_i, each model's score divided by it is at its φ-risk-optimal scale
    class_weights: tuple[float, float]  #: (w₋, w₊) of the loss
    anchor: int | None  #: the model the measure weights were taken at (None: unweighted)
    trained: Trained | None  #: the pipeline's run (None: a vertex, no run)

    @property
    def weights(self) -> np.ndarray:
        return self.theta / self.scales


def fit_mixture(scores: np.ndarray, y_pm: np.ndarray, plan: FitPlan, *, algorithm: Any, weighting: str,
                tune_threshold: bool, started: float | None = None, vertex: int | None = None) -> Mixture:
    """θ̂ for the base scores ``scores`` (n × M) and labels ±1: the scales and class weights from these
    rows, then ``algorithm`` (mirror descent) over the scaled scores (the training pipeline, with the
    plan's budget and seed); with ``vertex`` = i, no run: θ = λ·e_i, model i alone at its scale."""
    measure, loss = plan.measure, plan.components.loss
    scales = np.max(np.abs(scores), axis=0)
    scales[~(scales > 0) | ~np.isfinite(scales)] = 1.0
    if weighting == "measure":
        positive_weight, negative_weight, anchor = measure_weights(scores, y_pm, measure)
    else:
        positive_weight, negative_weight, anchor = 1.0, 1.0, None
    # mean 1 over the rows by construction (measure_weights), so used as they are
    row_weights = np.where(y_pm > 0, positive_weight, negative_weight)
    scales = scales / np.array([risk_slope(scores[:, j] / scales[j], y_pm, loss, row_weights)
                                for j in range(scores.shape[1])])
    if vertex is not None:
        theta = np.zeros(scores.shape[1])
        theta[vertex] = algorithm.radius
        return Mixture(theta, scales, (negative_weight, positive_weight), anchor, None)
    predictions = scores / scales  # H(x): each model at its φ-risk-optimal scale
    backend = get_backend("numpy")
    data = prepare(predictions, y_pm, backend, scale=False, weight=row_weights)
    problem = plan.problem(backend, y_pm.size, scores.shape[1], float(np.mean(y_pm > 0)),
                           batch_size=plan.budget.batch_size, epochs=plan.budget.epochs,
                           max_weight=max(positive_weight, negative_weight))
    task = AggregationTask(data.X, data.y, data.rows_weight(), measure, loss, tune_threshold, backend.xp)
    trained = train(data, algorithm, problem, task, seed=plan.seed, run_options={}, started=started)
    return Mixture(np.asarray(trained.w, dtype=np.float64), scales, (negative_weight, positive_weight), anchor,
                   trained)


def select_candidate(scores: np.ndarray, y_pm: np.ndarray, candidates: list[tuple[str, Any, int | None]],
                     rule: Rule, plan: FitPlan, *, weighting: str) -> tuple[int, list[float], float]:
    """The chosen candidate's index, every candidate's held-out value, and how sure the choice is.

    ``candidates[0]`` is the mixture (name, algorithm, None): it is fitted by
    :func:`fit_mixture` on the rows outside each fold of ``rule`` (K folds, or the one
    held-out part of a split) — the scales and class weights included — and scores that
    fold's rows; its value is the measure of these out-of-fold scores at their best
    threshold (as the training pipeline's selection judges its candidates). A model alone
    (name, algorithm, i) learns nothing from the rows: its value is that of its own scores
    on the held-out rows.

    The mixture, which contains every model alone (λ = 1), is kept unless the best model
    alone (the first of equals) beats it on at least :data:`CONFIDENCE` of paired bootstrap
    resamples of the held-out rows, each at its best threshold there
    (:func:`~calopt.training.selection.win_probability`, the rule that compares the
    measure's own solver with the plug-in route). Taking the highest held-out value
    instead picked, among candidates within 0.002 of each other on magic04's held-out rows,
    a model 0.0065-0.0106 below the best on the test split in four of its 21 cells
    (benchmarks/bench_aggregate_suite.py, split seeds 0-2).
    """
    measure, seed = plan.measure, plan.seed
    fold = folds_of(y_pm, rule, seed)
    parts = range(rule.folds) if rule.kind == "cv" else (0,)
    held = fold >= 0
    held_scores = []
    for _, algorithm, vertex in candidates:
        if vertex is not None:  # nothing learnt but a scale, which orders no row differently
            held_scores.append(scores[held, vertex])
            continue
        out_of_fold = np.zeros(y_pm.size)
        for k in parts:
            fit_rows = fold != k if rule.kind == "cv" else fold == -1
            mixture = fit_mixture(scores[fit_rows], y_pm[fit_rows], plan, algorithm=algorithm, vertex=vertex,
                                  weighting=weighting, tune_threshold=False)
            out_of_fold[fold == k] = scores[fold == k] @ mixture.weights
        held_scores.append(out_of_fold[held])
    cuts = [best_threshold(column, y_pm[held], measure) for column in held_scores]
    values = [value for _, value in cuts]
    best = 1 + int(np.argmax(values[1:]))
    predicted = [np.where(column > threshold, 1.0, -1.0) for column, (threshold, _) in zip(held_scores, cuts)]
    confidence = win_probability(y_pm[held], predicted[best], predicted[0], measure, seed=seed)
    return (best if confidence >= CONFIDENCE else 0), values, confidence


def aggregate(
    models: Models,
    X: Any,
    y: Any,
    *,
    radius: float = RADIUS,
    measure: Any = None,
    algorithm: Any = None,
    loss: Any = "logistic",
    epochs: int = 10,
    batch_size: int | None = None,
    seed: int = 0,
    weighting: str = "measure",
    tune_threshold: bool = True,
    select: str = "auto",
) -> LinearModel:
    """The ℓ1-constrained combination (Σθ = ``radius``, θ ≥ 0) of ``models`` learnt on (X, y).

    ``models`` are model files, LinearModel objects, or a mapping name → model, with
    the same features and classes. ``measure`` (default: the models' common measure)
    tunes the threshold of the result; ``loss`` is the convex φ of
    Q(θ, (x, y)) = w_y·φ(y·θᵀH(x)), with class weights w_y from the measure
    (``weighting="measure"``, :func:`measure_weights`) or 1 (``"none"``), given to the
    algorithm as sample weights. ``algorithm`` (a spec or object) learns θ; by default
    the one a plugin declared for aggregation (mirror descent with averaging), with its
    ``radius`` parameter set to ``radius``. ``batch_size`` defaults to :data:`BATCH_SIZE`.
    This is the training pipeline (:func:`calopt.training.pipeline.train`) on the
    matrix of base predictions.

    ``select`` chooses, on rows θ̂ did not see, between the learnt mixture and the best
    model alone (a vertex of Θ), which must beat it with confidence (:func:`select_candidate`):
    ``"auto"`` (K-fold cross-fitting when the smaller class has fewer than
    :data:`~calopt.training.selection.CV_MINORITY` rows, else one stratified held-out part,
    as :func:`calopt.fit` decides), ``"cv:K"``, ``"holdout:F"``, or ``"none"`` (the
    mixture, no check). The one kept is refitted on every row. The result's
    ``report.aggregate`` records the models, their scales, θ̂, the candidates'
    held-out values, the bootstrap win probability and what was chosen.
    """
    named = load_models(models)
    names, bases = list(named), list(named.values())
    if measure is None:
        measures = {model.measure for model in bases}
        if len(measures) != 1:
            raise ParameterError(
                f"the models were trained for different measures ({', '.join(sorted(measures))}); "
                "give the measure to aggregate for")
        measure = measures.pop()
    components = Components.resolve(measure, algorithm, loss, task="aggregate", radius=radius)
    check_count("batch_size", batch_size)  # before its default
    budget = Budget(epochs, batch_size=batch_size or BATCH_SIZE)
    if weighting not in ("measure", "none"):
        raise ParameterError(f"weighting must be 'measure' or 'none', got {weighting!r}")
    plan = FitPlan(components, budget, seed=seed, scale=False, tune_threshold=tune_threshold,
                   select=parse_rule(select))
    if X.shape[1] != bases[0].n_features:
        raise DataError(f"X has {X.shape[1]} features, the models have {bases[0].n_features}")
    y_pm = encode_like(to_numpy(y), bases[0].classes, source="aggregation labels")
    if X.shape[0] != y_pm.shape[0]:
        raise ParameterError(f"X has {X.shape[0]} rows but y has {y_pm.shape[0]} labels")
    if not (0 < np.sum(y_pm > 0) < y_pm.size):
        raise DataError("only one class; aggregation needs both", source="aggregation labels")
    rule = resolve_rule(plan.select, y_pm)

    load_fold_splitter()  # a one-off import, not training time
    started = time.perf_counter()
    scores = np.column_stack([to_numpy(model.decision_function(X)).astype(np.float64)
                              for model in bases])
    chosen, selection = _choose(scores, y_pm, names, rule, plan, weighting)
    mixture = fit_mixture(scores, y_pm, plan, algorithm=chosen[1], vertex=chosen[2], weighting=weighting,
                          tune_threshold=tune_threshold, started=started)
    return _aggregate_model(plan, bases, names, scores, y_pm, mixture, selection, chosen, started, weighting)


def _choose(scores: np.ndarray, y_pm: np.ndarray, names: list[str], rule: Rule, plan: FitPlan,
            weighting: str) -> tuple[tuple[str, Any, int | None], dict[str, Any] | None]:
    """The candidate kept (the mixture, or a model alone: :func:`select_candidate`) and the selection's
    account (None without one)."""
    algorithm = plan.components.algorithm
    candidates = [("mixture", algorithm, None)]
    if rule.kind == "none":
        return candidates[0], None
    candidates += [(name, algorithm, j) for j, name in enumerate(names)]
    chosen, values, confidence = select_candidate(scores, y_pm, candidates, rule, plan, weighting=weighting)
    selection = {"rule": str(rule), "chosen": candidates[chosen][0],
                 "candidates": [{"candidate": name, "value": value} for (name, _, _), value in zip(candidates, values)],
                 "best_alone": candidates[1 + int(np.argmax(values[1:]))][0], "win_probability": confidence,
                 "confidence": CONFIDENCE}
    return candidates[chosen], selection


def _aggregate_model(plan: FitPlan, bases: list[LinearModel], names: list[str], scores: np.ndarray,
                     y_pm: np.ndarray, mixture: Mixture, selection: dict[str, Any] | None,
                     chosen: tuple[str, Any, int | None], started: float, weighting: str) -> LinearModel:
    """The aggregate as one linear model, Σθ_i w_i/s_i, with its threshold and the account of the run."""
    name, algorithm, vertex = chosen
    weights, trained = mixture.weights, mixture.trained
    if trained is None:  # a vertex: the model alone, its threshold tuned as the pipeline's would be
        threshold = best_threshold(scores @ weights, y_pm, plan.measure)[0] if plan.tune_threshold else 0.0
        history, epochs_run, status = [], 0, CONVERGED
        message = (f"{names[vertex]} alone: it beat the mixture on {selection['win_probability']:.0%} of bootstrap "
                   f"resamples of the held-out rows ({selection['rule']})")
        seconds = time.perf_counter() - started
    else:
        threshold, history, epochs_run = trained.threshold, trained.result.history, trained.result.epochs
        status, message, seconds = trained.result.status, trained.result.message, trained.seconds
        algorithm = trained.algorithm
    coef = sum(weight * model.coef for weight, model in zip(weights, bases))
    intercept = float(sum(weight * model.intercept for weight, model in zip(weights, bases)))
    negative_weight, positive_weight = mixture.class_weights
    report = FitReport(epochs=epochs_run, batch_size=plan.budget.batch_size, seed=plan.seed, backend="numpy",
                       dtype=get_backend("numpy").dtype_name, tune_threshold=plan.tune_threshold,
                       algorithm_params=algorithm.params,
                       aggregate={"models": names, "scales": mixture.scales.tolist(), "theta": mixture.theta.tolist(),
                                  "weighting": weighting, "class_weights": [negative_weight, positive_weight],
                                  "anchor": None if mixture.anchor is None else names[mixture.anchor],
                                  "base_algorithms": [model.algorithm for model in bases],
                                  "select": selection, "chosen": name})
    return plan.model(np.asarray(coef, dtype=np.float64), intercept - threshold, tuple(bases[0].classes), report,
                      algorithm=algorithm, threshold=threshold, history=history, fit_seconds=seconds, status=status,
                      message=message)

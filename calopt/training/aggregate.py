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
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from calopt import registry
from calopt.algorithms import Problem
from calopt.backends import get_backend, to_numpy
from calopt.errors import DataError, ModelFileError, ParameterError
from calopt.io.labels import encode_like
from calopt.losses import Loss
from calopt.measures import Measure
from calopt.models.linear import LinearModel
from calopt.training.pipeline import BinaryTask, prepare, train
from calopt.training.threshold import best_threshold
from calopt.version import __version__

__all__ = ["BATCH_SIZE", "RADIUS", "AggregationTask", "aggregate", "load_models", "measure_weights", "risk_slope"]

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
    matrix of base predictions. The result's ``options["aggregate"]`` records the
    models, their scales and θ̂.
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
    measure, loss = registry.get_measure(measure), registry.get_loss(loss)
    algorithm = registry.get_algorithm(algorithm or registry.default_algorithm(measure, "aggregate"), radius=radius)
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise ParameterError(f"{name} must be a whole number ≥ 1, got {value!r}")
    if weighting not in ("measure", "none"):
        raise ParameterError(f"weighting must be 'measure' or 'none', got {weighting!r}")
    if X.shape[1] != bases[0].n_features:
        raise DataError(f"X has {X.shape[1]} features, the models have {bases[0].n_features}")
    y_pm = encode_like(to_numpy(y), bases[0].classes, source="aggregation labels")
    if X.shape[0] != y_pm.shape[0]:
        raise ParameterError(f"X has {X.shape[0]} rows but y has {y_pm.shape[0]} labels")
    if not (0 < np.sum(y_pm > 0) < y_pm.size):
        raise DataError("only one class; aggregation needs both", source="aggregation labels")

    started = time.perf_counter()
    scores = np.column_stack([to_numpy(model.decision_function(X)).astype(np.float64)
                              for model in bases])
    scales = np.max(np.abs(scores), axis=0)
    scales[~(scales > 0) | ~np.isfinite(scales)] = 1.0
    if weighting == "measure":
        positive_weight, negative_weight, anchor = measure_weights(scores, y_pm, measure)
    else:
        positive_weight, negative_weight, anchor = 1.0, 1.0, None
    # mean 1 over the rows by construction (measure_weights), so used as they are
    row_weights = np.where(y_pm > 0, positive_weight, negative_weight)
    scales = scales / np.array([risk_slope(scores[:, j] / scales[j], y_pm, loss, row_weights)
                                for j in range(len(bases))])
    predictions = scores / scales  # H(x): each model at its φ-risk-optimal scale

    backend = get_backend("numpy")
    data = prepare(predictions, y_pm, backend, scale=False, weight=row_weights)
    n = int(y_pm.size)
    problem = Problem(backend.xp, backend.dtype, backend.device, n, len(bases), float(np.mean(y_pm > 0)),
                      measure, loss, batch_size or BATCH_SIZE, epochs,
                      max_weight=max(positive_weight, negative_weight))
    task = AggregationTask(data.X, data.y, data.rows_weight(), measure, loss, tune_threshold, backend.xp)
    trained = train(data, algorithm, problem, task, seed=seed, run_options={}, started=started)
    theta = trained.w
    weights = theta / scales
    coef = sum(weight * model.coef for weight, model in zip(weights, bases))
    intercept = float(sum(weight * model.intercept for weight, model in zip(weights, bases)))
    return LinearModel(
        coef=np.asarray(coef, dtype=np.float64),
        intercept=intercept - trained.threshold,
        classes=tuple(bases[0].classes),
        measure=measure.spec,
        algorithm=trained.algorithm.spec,
        loss=loss.spec,
        threshold=trained.threshold,
        options={"epochs": trained.result.epochs, "batch_size": problem.batch_size, "seed": seed,
                 "backend": backend.name, "dtype": backend.dtype_name,
                 "tune_threshold": tune_threshold, "algorithm_params": trained.algorithm.params,
                 "aggregate": {"models": names, "scales": scales.tolist(), "theta": theta.tolist(),
                               "weighting": weighting, "class_weights": [negative_weight, positive_weight],
                               "anchor": None if anchor is None else names[anchor],
                               "base_algorithms": [model.algorithm for model in bases]}},
        history=trained.result.history,
        fit_seconds=trained.seconds,
        status=trained.result.status,
        message=trained.result.message,
        version=__version__,
    )

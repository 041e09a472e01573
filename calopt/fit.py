"""``calopt.fit``: train a linear classifier for a measure, with defaults chosen from the data.

What happens, in order (each step documented because each is a choice):

1. The algorithm follows the measure's family (concave → ``spade``, pseudo-linear →
   ``stamp``) and the reward is the hinge reward ``min(1, y·s)`` (the papers'
   experiments); the plug-in baseline uses the logistic loss.
2. Features are scaled by their maximum absolute value (sparse data stays sparse);
   the scaling is folded into the saved coefficients. An intercept is always fitted.
3. An algorithm's step scale η₀, when not given, is chosen by a short trial: one pass
   with each candidate on a stratified subsample, scored by the measure on held-out
   training data (the spec's practical notes: the scale decides the result).
4. The main run makes ``epochs`` passes over the training data.
5. The decision threshold is then tuned for the measure: on the training data, or on
   the held-out part for algorithms that hold one out (the plug-in). This is the
   open choice of the papers; tuning gave equal or better held-out values in our
   benchmarks (BENCHMARKS.md).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from calopt import registry
from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend, backend_of, get_backend, is_sparse, to_numpy
from calopt.checkpoint import Checkpoint, checked_resume, data_fingerprint, run_resumable
from calopt.errors import ParameterError
from calopt.measures import Measure, confusion_counts
from calopt.model import LinearModel, json_label
from calopt.solve import ArrayReader, EpochRecord, run

__all__ = ["best_threshold", "default_algorithm", "default_loss", "fit", "resolve_backend"]

Array = Any
_DEFAULT_ALGORITHM = {"concave": "spade", "pseudo-linear": "stamp"}
#: Rows used by the step-size trial (each candidate gets one pass over them).
_TRIAL_ROWS = 20_000


def default_algorithm(measure: Measure) -> str:
    """The algorithm for the measure's family (concave → spade, pseudo-linear → stamp)."""
    return _DEFAULT_ALGORITHM.get(measure.family, "plugin")


def default_loss(algorithm: Algorithm) -> str:
    """The algorithm's own default loss, else hinge for a reward-driven algorithm, else logistic."""
    return algorithm.default_loss or ("hinge" if algorithm.needs_reward else "logistic")


def resolve_backend(X: Any, backend: str | None, dtype: str | None, device: Any) -> Backend:
    """``backend`` by name (float32 by default on CuPy, else float64), or X's own when None."""
    if backend is None:
        return backend_of(X, dtype=dtype)
    return get_backend(backend, dtype=dtype or ("float32" if backend == "cupy" else "float64"), device=device)


def default_batch_size(n_samples: int) -> int:
    """Mini-batch size from the data size: n/100, between 32 and 1024."""
    return int(min(1024, max(32, n_samples // 100)))


def best_threshold(scores: np.ndarray, y: np.ndarray, measure: Measure) -> tuple[float, float]:
    """The threshold on ``scores`` that maximises ``measure`` for labels ``y`` (±1), and its value.

    Every cut between distinct sorted scores is evaluated at once from cumulative
    confusion counts; the threshold is the midpoint of the best cut.
    """
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    sorted_scores, positive = scores[order], np.asarray(y)[order] > 0
    tp = np.concatenate([[0.0], np.cumsum(positive, dtype=np.float64)])
    fp = np.arange(scores.size + 1, dtype=np.float64) - tp
    n_pos, n_neg = tp[-1], fp[-1]
    # a cut after position k is valid where the k-th and (k+1)-th scores differ
    valid = np.ones(scores.size + 1, dtype=bool)
    valid[1:-1] = sorted_scores[:-1] > sorted_scores[1:]
    import array_api_compat.numpy as npx

    values = np.asarray(measure.from_counts(tp, fp, n_neg - fp, n_pos - tp, xp=npx))
    values = np.where(valid, values, -np.inf)
    k = int(np.argmax(values))
    if k == 0:
        threshold = sorted_scores[0] + 1.0 if scores.size else 0.0
    elif k == scores.size:
        threshold = sorted_scores[-1] - 1.0
    else:
        threshold = (sorted_scores[k - 1] + sorted_scores[k]) / 2
    return float(threshold), float(values[k])


def _stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (kept, held out) with ``fraction`` of each class held out."""
    rng = np.random.default_rng(seed)
    kept, held = [], []
    for label in (-1.0, 1.0):
        index = rng.permutation(np.flatnonzero(y == label))
        cut = int(round(fraction * index.size))
        held.append(index[:cut])
        kept.append(index[cut:])
    return np.sort(np.concatenate(kept)), np.sort(np.concatenate(held))


def _rows(X: Any, index: np.ndarray, backend: Backend) -> Any:
    if is_sparse(X):
        return X[index]
    return backend.xp.take(X, backend.xp.asarray(index, device=backend.device), axis=0)


def _measure_value(measure: Measure, w: Array, b: Array, X: Any, y: Array, xp: Any) -> float:
    scores = X @ w + b
    predictions = xp.where(scores > 0, xp.ones_like(y), -xp.ones_like(y))
    return float(measure.from_counts(*confusion_counts(y, predictions, xp=xp, dtype=y.dtype), xp=xp))


class _Data:
    """Arrays on the backend, max-abs scaled, with their ±1 labels (host and device).

    ``scale`` is True (compute the scaling from X), False (none), or the scaling of
    the training data to apply to evaluation data.
    """

    def __init__(self, X: Any, y_pm: np.ndarray, backend: Backend, scale: bool | np.ndarray):
        if is_sparse(X) and backend.name == "numpy":
            X = X.tocsr().astype(np.dtype(backend.dtype))
        else:
            X = backend.asarray(X)
        xp = backend.xp
        if isinstance(scale, np.ndarray):
            self.scale = scale
        elif not scale:
            self.scale = np.ones(X.shape[1])
        elif is_sparse(X):
            self.scale = np.asarray(abs(X).max(axis=0).toarray(), dtype=np.float64).ravel()
        else:
            self.scale = to_numpy(xp.max(xp.abs(X), axis=0)).astype(np.float64)
        self.scale[~(self.scale > 0) | ~np.isfinite(self.scale)] = 1.0
        if scale is not False:
            if is_sparse(X):
                import scipy.sparse

                X = (X @ scipy.sparse.diags(1.0 / self.scale)).tocsr().astype(X.dtype)
            else:
                X = X / backend.asarray(self.scale)
        self.X, self.y_host = X, y_pm
        self.y = backend.asarray(y_pm)


def fit(
    X: Any,
    y: Any,
    *,
    measure: Any = "f1",
    algorithm: Any = None,
    loss: Any = None,
    backend: str | None = None,
    dtype: str | None = None,
    device: Any = None,
    epochs: int = 10,
    batch_size: int | None = None,
    seed: int = 0,
    scale: bool = True,
    tune_threshold: bool = True,
    positive: Any = None,
    eval_set: tuple[Any, Any] | None = None,
    callback: Callable[[EpochRecord], None] | None = None,
    checkpoint: str | os.PathLike | Callable[[Checkpoint], None] | None = None,
    checkpoint_every: int | None = None,
    resume: Any = None,
    interrupt: Callable[[], bool] | None = None,
) -> LinearModel:
    """Train a linear classifier that maximises ``measure`` on (X, y).

    ``X`` is a 2-D array of any supported backend (or scipy.sparse, kept sparse on
    NumPy), ``y`` any two-valued labels (``positive`` picks the positive class).
    ``measure``, ``algorithm`` and ``loss`` are names with optional parameters
    (``"fbeta:beta=2"``) or component objects. ``backend`` (``numpy``,
    ``array-api-strict``, ``torch``, ``cupy``) defaults to X's own; ``dtype`` is
    float64 except on the GPU (float32). ``eval_set=(X_test, y_test)`` adds the test
    value of each epoch to the history. Returns a :class:`~calopt.model.LinearModel`
    whose ``history`` has one row per epoch (``train`` and ``test`` at the threshold
    tuned as for the final model, so the last row is the model's own values) and
    ``fit_seconds`` the solver time.

    Interruption (:mod:`calopt.checkpoint`): ``interrupt()`` is checked after every
    batch; when it returns true, training stops and raises
    :class:`~calopt.errors.TrainingInterrupted` holding the checkpoint (also written to
    ``checkpoint`` when given, as it is every ``checkpoint_every`` epochs; a callable
    ``checkpoint`` is handed each Checkpoint to write instead).
    ``resume=`` that checkpoint or its path, with the same data and options, skips the
    step trial and ends with the model an uninterrupted run gives.
    """
    from calopt import __version__, get_algorithm, get_loss, get_measure
    from calopt.data import encode_binary, encode_like

    measure = get_measure(measure)
    algorithm = get_algorithm(algorithm or default_algorithm(measure))
    loss = get_loss(loss or default_loss(algorithm))
    if not (isinstance(epochs, int) and epochs >= 1):
        raise ParameterError(f"epochs must be a whole number ≥ 1, got {epochs!r}")
    if batch_size is not None and not (isinstance(batch_size, int) and batch_size >= 1):
        raise ParameterError(f"batch size must be a whole number ≥ 1, got {batch_size!r}")
    resume = checked_resume(checkpoint, checkpoint_every, resume)

    y_pm, classes = encode_binary(to_numpy(y), positive=positive, source="training labels")
    resolved = resolve_backend(X, backend, dtype, device)
    if X.shape[0] != y_pm.shape[0]:
        raise ParameterError(f"X has {X.shape[0]} rows but y has {y_pm.shape[0]} labels")

    started = time.perf_counter()
    data = _Data(X, y_pm, resolved, scale)
    xp = resolved.xp
    kept, held = np.arange(y_pm.size), np.arange(0)
    if algorithm.holdout > 0:
        kept, held = _stratified_split(y_pm, algorithm.holdout, seed)
    train_X, train_y = (data.X, data.y) if held.size == 0 else (
        _rows(data.X, kept, resolved), resolved.asarray(y_pm[kept]))
    p = float(np.mean(y_pm[kept] > 0))
    problem = Problem(xp, resolved.dtype, resolved.device, int(kept.size), int(data.X.shape[1]),
                      p, measure, loss, batch_size or default_batch_size(int(kept.size)), epochs)
    algorithm.check_problem(problem)
    run_options = {"measure": measure.spec, "algorithm": algorithm.spec, "loss": loss.spec,
                   "epochs": epochs, "batch_size": problem.batch_size, "seed": seed,
                   "backend": resolved.name, "dtype": resolved.dtype_name, "scale": scale,
                   "tune_threshold": tune_threshold, "eval_set": eval_set is not None,
                   "classes": [json_label(c) for c in classes]}
    fingerprint = functools.cache(lambda: data_fingerprint(data.X, y_pm, resolved, data.scale))
    if resume is not None:  # the step chosen by the interrupted run's trial
        resume.check(run_options, fingerprint())
        algorithm = resume.make_algorithm()
    else:
        algorithm = _choose_step(algorithm, problem, data, kept, seed, resolved)

    eval_data = None
    if eval_set is not None:
        X_eval, y_eval = eval_set
        y_eval_pm = encode_like(to_numpy(y_eval), classes, source="evaluation labels")
        eval_data = _Data(X_eval, y_eval_pm, resolved, scale=data.scale)
    tune_X, tune_y = (train_X, y_pm[kept]) if held.size == 0 else (
        _rows(data.X, held, resolved), y_pm[held])

    def tuned_threshold(w: Array, b: Array) -> float:
        """The decision threshold for (w, b): tuned for the measure, or 0."""
        if not tune_threshold:
            return 0.0
        return best_threshold(to_numpy(tune_X @ w + b), tune_y, measure)[0]

    record_seconds = 0.0

    def record(info: EpochRecord) -> dict[str, float]:
        """The measure on the training (and test) data at this epoch's tuned threshold."""
        nonlocal record_seconds
        begun = time.perf_counter()
        w, b = info.weights
        b = b - tuned_threshold(w, b)
        row = {"train": _measure_value(measure, w, b, train_X, train_y, xp)}
        if eval_data is not None:
            row["test"] = _measure_value(measure, w, b, eval_data.X, eval_data.y, xp)
        record_seconds += time.perf_counter() - begun
        return row

    result = run_resumable(algorithm, problem, algorithm.prepare(problem, train_X, train_y, seed=seed),
                           epochs=epochs, seed=seed, backend=resolved, options=run_options,
                           fingerprint=fingerprint, record=record, callback=callback,
                           checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                           interrupt=interrupt)
    w, b = algorithm.weights(result.state)
    w_host, b_host = to_numpy(w).astype(np.float64), float(to_numpy(b))
    threshold = tuned_threshold(w, b)
    fit_seconds = time.perf_counter() - started - record_seconds + (resume.seconds if resume else 0.0)
    return LinearModel(
        coef=w_host / data.scale,
        intercept=b_host - threshold,
        classes=classes,
        measure=measure.spec,
        algorithm=algorithm.spec,
        loss=loss.spec,
        scale=data.scale,
        threshold=threshold,
        options={"epochs": result.epochs, "batch_size": problem.batch_size, "seed": seed,
                 "backend": resolved.name, "dtype": resolved.dtype_name,
                 "scale": scale, "tune_threshold": tune_threshold,
                 "algorithm_params": algorithm.params},
        history=result.history,
        fit_seconds=fit_seconds,
        status=result.status,
        message=result.message,
        version=__version__,
    )


def _choose_step(algorithm: Algorithm, problem: Problem, data: _Data, kept: np.ndarray,
                 seed: int, backend: Backend) -> Algorithm:
    """Fill an unset ``step`` by a one-pass trial of each candidate on held-out data."""
    candidates = getattr(algorithm, "step_candidates", ())
    if not candidates or getattr(algorithm, "step", 0) is not None:
        return algorithm
    y_kept = data.y_host[kept]
    fit_part, check_part = _stratified_split(y_kept, 0.2, seed + 1)
    rng = np.random.default_rng(seed + 2)
    fit_part = kept[np.sort(rng.permutation(fit_part)[:_TRIAL_ROWS])]
    check_part = kept[np.sort(rng.permutation(check_part)[:_TRIAL_ROWS])]
    X_fit, y_fit = _rows(data.X, fit_part, backend), backend.asarray(data.y_host[fit_part])
    X_check = _rows(data.X, check_part, backend)
    trial_problem = problem._replace(n_samples=int(fit_part.size), epochs=1,
                                     batch_size=min(problem.batch_size, max(1, fit_part.size // 50)))
    best, best_value = None, -np.inf
    for step in candidates:
        candidate = registry.get("algorithm", algorithm.name, **{**algorithm.params, "step": step})
        result = run(candidate, trial_problem, ArrayReader(X_fit, y_fit, problem.xp, backend.device),
                     epochs=1, seed=seed)
        w, b = candidate.weights(result.state)
        if result.status < 0:
            continue
        _, value = best_threshold(to_numpy(X_check @ w + b), data.y_host[check_part], problem.measure)
        if value > best_value:
            best, best_value = candidate, value
    return best if best is not None else registry.get(
        "algorithm", algorithm.name, **{**algorithm.params, "step": candidates[0]})

"""The training pipeline: ``fit`` (binary) and ``fit_multiclass`` (one-vs-rest).

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

import dataclasses
import functools
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse

from calopt import registry
from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend, backend_of, get_backend, is_sparse, to_numpy
from calopt.errors import DataError, ModelFileError, ParameterError, TrainingInterrupted
from calopt.io.batches import ArrayReader
from calopt.io.labels import encode_among, encode_binary, encode_like, encode_multiclass, json_label, label_text
from calopt.measures import Measure, confusion_counts
from calopt.models.linear import LinearModel, MulticlassModel
from calopt.training.checkpoint import Checkpoint, checked_resume, data_fingerprint, run_resumable
from calopt.training.loop import EpochRecord, run
from calopt.training.threshold import best_threshold
from calopt.version import __version__

__all__ = ["default_algorithm", "default_loss", "fit", "fit_multiclass", "resolve_backend"]

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
    value of each epoch to the history. Returns a :class:`~calopt.models.linear.LinearModel`
    whose ``history`` has one row per epoch (``train`` and ``test`` at the threshold
    tuned as for the final model, so the last row is the model's own values) and
    ``fit_seconds`` the solver time.

    Interruption (:mod:`calopt.training.checkpoint`): ``interrupt()`` is checked after every
    batch; when it returns true, training stops and raises
    :class:`~calopt.errors.TrainingInterrupted` holding the checkpoint (also written to
    ``checkpoint`` when given, as it is every ``checkpoint_every`` epochs; a callable
    ``checkpoint`` is handed each Checkpoint to write instead).
    ``resume=`` that checkpoint or its path, with the same data and options, skips the
    step trial and ends with the model an uninterrupted run gives.
    """
    measure = registry.get_measure(measure)
    algorithm = registry.get_algorithm(algorithm or default_algorithm(measure))
    loss = registry.get_loss(loss or default_loss(algorithm))
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


def fit_multiclass(
    X: Any,
    y: Any,
    *,
    algorithm: Any = "slnd",
    loss: Any = None,
    measure: Any = "f1",
    backend: str | None = None,
    dtype: str | None = None,
    device: Any = None,
    epochs: int = 10,
    batch_size: int | None = None,
    seed: int = 0,
    scale: bool = True,
    eval_set: tuple[Any, Any] | None = None,
    callback: Callable[[EpochRecord], None] | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: Any = None,
    interrupt: Callable[[], bool] | None = None,
) -> MulticlassModel:
    """Train a one-vs-rest linear classifier on (X, y) with any number of classes ≥ 2.

    ``algorithm`` (default SLND) trains all classes in one run when it declares
    ``multiclass``; any other algorithm is run by :func:`calopt.fit` once per class
    (class c as positive, with ``measure``); each class's scores are then put on a
    common scale for the argmax: centred at its threshold tuned for ``measure`` (0 is
    "class c" by that class's own rule) and divided by their standard deviation on the
    training data. On letter (70/30, seed 0) that took test top-1 from 0.37 to 0.55
    (spade, gmean) and from 0.35 to 0.62 (stamp, f1). Features are max-abs scaled as in
    calopt.fit. ``eval_set=(X_test, y_test)`` adds the test top-1 accuracy (multiclass
    algorithms) or the macro test measure (one class at a time) to each history row.
    ``callback`` runs after each epoch (of each class, one class at a time).

    ``checkpoint``, ``checkpoint_every``, ``resume`` and ``interrupt`` work as in
    :func:`calopt.fit` (:class:`~calopt.errors.TrainingInterrupted`, then ``resume=``);
    one class at a time, the checkpoint also holds the classes already finished.
    """
    labels = to_numpy(y)
    codes, classes = encode_multiclass(labels)
    if classes.size < 2:
        raise DataError(f"training labels: only one class ({label_text(classes[0])}); need two or more")
    if X.shape[0] != codes.size:
        raise ParameterError(f"X has {X.shape[0]} rows but y has {codes.size} labels")
    if not (isinstance(epochs, int) and epochs >= 1):
        raise ParameterError(f"epochs must be a whole number ≥ 1, got {epochs!r}")
    resume = checked_resume(checkpoint, checkpoint_every, resume)
    measure = registry.get_measure(measure)
    algorithm = registry.get_algorithm(algorithm)
    loss = registry.get_loss(loss or default_loss(algorithm))
    classes = tuple(json_label(c) for c in classes)
    C = len(classes)
    started = time.perf_counter()
    resolved = resolve_backend(X, backend, dtype, device)
    # what a resumed run must repeat; "classes" tells a multiclass checkpoint from a binary one
    options = {"classes": list(classes), "one_vs_rest": "together" if algorithm.multiclass else "per class",
               "measure": measure.spec, "algorithm": algorithm.spec, "loss": loss.spec, "epochs": epochs,
               "batch_size": batch_size, "seed": seed, "backend": resolved.name,
               "dtype": resolved.dtype_name, "scale": scale, "eval_set": eval_set is not None}
    fingerprint = functools.cache(lambda: data_fingerprint(X, codes, backend_of(X)))
    if resume is not None:
        resume.check(options, fingerprint())

    eval_codes = None if eval_set is None else encode_among(to_numpy(eval_set[1]), classes,
                                                            source="evaluation labels")
    if not algorithm.multiclass:
        return _fit_one_class_at_a_time(
            X, codes, classes, algorithm, loss, measure, eval_set, eval_codes, options, fingerprint,
            started, checkpoint=checkpoint, resume=resume, fit_options=dict(
                backend=backend, dtype=dtype, device=device, epochs=epochs, batch_size=batch_size, seed=seed,
                scale=scale, callback=callback, checkpoint_every=checkpoint_every, interrupt=interrupt))

    xp = resolved.xp
    members = codes[None, :] == np.arange(C)[:, None]
    data = _Data(X, np.where(members, 1.0, -1.0), resolved, scale)
    problem = Problem(xp, resolved.dtype, resolved.device, int(codes.size), int(data.X.shape[1]),
                      1.0 / C, measure, loss, batch_size or default_batch_size(int(codes.size)),
                      epochs, n_classes=C)
    algorithm.check_problem(problem)
    if resume is not None:
        algorithm = resume.make_algorithm()
    reader = algorithm.prepare(problem, data.X, data.y, seed=seed)
    train_codes = xp.asarray(codes, device=resolved.device)
    evaluation = None
    if eval_set is not None:
        eval_data = _Data(eval_set[0], eval_codes, resolved, scale=data.scale)
        evaluation = (eval_data.X, xp.asarray(eval_codes, device=resolved.device))
    record_seconds = 0.0

    def top1(w: Array, b: Array, X_part: Any, codes_part: Array) -> float:
        hits = xp.argmax(X_part @ w + b, axis=1) == codes_part
        return float(xp.mean(xp.astype(hits, resolved.dtype)))

    def record(info: EpochRecord) -> dict[str, float]:
        nonlocal record_seconds
        begun = time.perf_counter()
        w, b = info.weights
        row = {"train": top1(w, b, data.X, train_codes)}
        if evaluation is not None:
            row["test"] = top1(w, b, *evaluation)
        record_seconds += time.perf_counter() - begun
        return row

    result = run_resumable(algorithm, problem, reader, epochs=epochs, seed=seed, backend=resolved,
                           options=options, fingerprint=fingerprint, record=record, callback=callback,
                           checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                           interrupt=interrupt)
    w, b = algorithm.weights(result.state)
    return MulticlassModel(
        coef=to_numpy(w).astype(np.float64) / data.scale[:, None],
        intercept=to_numpy(b).astype(np.float64),
        classes=classes, measure=measure.spec, algorithm=algorithm.spec, loss=loss.spec,
        scale=data.scale,
        options={"epochs": result.epochs, "batch_size": problem.batch_size, "seed": seed,
                 "backend": resolved.name, "dtype": resolved.dtype_name, "scale": scale,
                 "algorithm_params": algorithm.params,
                 "rank": getattr(reader, "rank", None), "sample": getattr(reader, "sample", None)},
        history=result.history,
        fit_seconds=time.perf_counter() - started - record_seconds + (resume.seconds if resume else 0.0),
        status=result.status, message=result.message, version=__version__,
    )


def _fit_one_class_at_a_time(
    X: Any, codes: np.ndarray, classes: tuple[Any, ...], algorithm: Any, loss: Any, measure: Any,
    eval_set: tuple[Any, Any] | None, eval_codes: np.ndarray | None, options: dict[str, Any],
    fingerprint: Callable[[], dict[str, Any]], started: float, *, checkpoint: Any,
    resume: Checkpoint | None, fit_options: dict[str, Any],
) -> MulticlassModel:
    """One-vs-rest by :func:`calopt.fit` once per class; checkpoints name the class and keep the finished ones.

    A class's own checkpoint is wrapped in the multiclass one: its options and
    fingerprint move to ``one_vs_rest`` (with the finished classes), so resuming checks
    the multiclass run, restores the finished classes and resumes the current one.
    """
    finished: list[dict[str, Any]] = []  # per class: coef, intercept, history, status, message, options
    current = None
    if resume is not None:
        part = resume.one_vs_rest or {}
        done = part.get("finished", [])
        coefs = resume.arrays.get("finished.coef")
        if not isinstance(part.get("class"), int) or len(done) != part["class"] or \
                (done and (coefs is None or coefs.ndim != 2 or coefs.shape[1] != len(done))):
            raise ModelFileError(f"{resume.source}: incomplete one-vs-rest checkpoint")
        finished = [{**entry, "coef": coefs[:, c]} for c, entry in enumerate(done)]
        current = dataclasses.replace(resume, options=part["options"], fingerprint=part["fingerprint"],
                                      one_vs_rest=None)

    def wrap(inner: Checkpoint, c: int) -> Checkpoint:
        arrays = dict(inner.arrays)
        if finished:
            arrays["finished.coef"] = np.stack([entry["coef"] for entry in finished], axis=1)
        return dataclasses.replace(inner, options=options, fingerprint=fingerprint(), arrays=arrays, one_vs_rest={
            "class": c, "label": label_text(classes[c]), "options": inner.options, "fingerprint": inner.fingerprint,
            "finished": [{k: v for k, v in entry.items() if k != "coef"} for entry in finished]})

    first_to_fit = len(finished)
    for c in range(first_to_fit, len(classes)):
        write = None if checkpoint is None else (lambda inner, c=c: wrap(inner, c).save(checkpoint))
        try:
            model = fit(X, np.where(codes == c, 1.0, -1.0), measure=measure, algorithm=algorithm, loss=loss,
                        positive=1.0, checkpoint=write,
                        resume=current if c == first_to_fit else None,
                        eval_set=None if eval_set is None else (eval_set[0], np.where(eval_codes == c, 1.0, -1.0)),
                        **fit_options)
        except TrainingInterrupted as exc:
            saved = wrap(exc.checkpoint, c)
            where = f"; checkpoint written to {checkpoint}" if checkpoint is not None else ""
            raise TrainingInterrupted(f"training interrupted in {saved.describe()}{where}", saved,
                                      checkpoint) from None
        spread = float(np.std(to_numpy(model.decision_function(X))))
        spread = spread if spread > 0 and np.isfinite(spread) else 1.0
        finished.append({"coef": model.coef / spread, "intercept": model.intercept / spread,
                         "spread": spread, "history": model.history,
                         "status": model.status, "message": model.message, "options": model.options,
                         "scale": model.scale.tolist()})

    history = [
        {"epoch": rows[0]["epoch"], "seconds": sum(r["seconds"] for r in rows),
         **{key: float(np.mean([r[key] for r in rows])) for key in ("train", "test") if key in rows[0]}}
        for rows in zip(*(entry["history"] for entry in finished))
    ]
    first = finished[0]
    return MulticlassModel(
        coef=np.stack([entry["coef"] for entry in finished], axis=1),
        intercept=np.array([entry["intercept"] for entry in finished]),
        classes=classes, measure=measure.spec, algorithm=algorithm.spec, loss=loss.spec,
        scale=np.asarray(first["scale"], dtype=np.float64),
        options={**first["options"], "one_vs_rest": "per class",
                 "score_spreads": [entry.get("spread", 1.0) for entry in finished]},
        history=history, fit_seconds=time.perf_counter() - started + (resume.seconds if resume else 0.0),
        status=min(entry["status"] for entry in finished),
        message="; ".join(dict.fromkeys(entry["message"] for entry in finished)),
        version=__version__,
    )

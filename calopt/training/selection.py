"""Settings chosen on data the weights do not see: the step trial.

An algorithm declares the parameters it wants chosen from the data in its
``tunables`` attribute (:class:`calopt.algorithms.Tunable`: the parameter and the
candidate values). When the user leaves such a parameter unset, each candidate gets
one pass over a stratified subsample of the training rows and is scored by the
measure, at its best threshold, on a held-out 20% of them; the best candidate wins
(the spec's practical notes: the step scale decides the result, the theory only its
decay).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend, is_sparse, to_numpy
from calopt.io.batches import ArrayReader
from calopt.training.loop import run
from calopt.training.threshold import best_threshold

__all__ = ["TRIAL_ROWS", "choose_settings", "stratified_split", "take_rows"]

#: Rows used by the trial (each candidate gets one pass over at most this many).
TRIAL_ROWS = 20_000


def stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (kept, held out) of labels ``y`` (±1) with ``fraction`` of each class held out."""
    rng = np.random.default_rng(seed)
    kept, held = [], []
    for label in (-1.0, 1.0):
        index = rng.permutation(np.flatnonzero(y == label))
        cut = int(round(fraction * index.size))
        held.append(index[:cut])
        kept.append(index[cut:])
    return np.sort(np.concatenate(kept)), np.sort(np.concatenate(held))


def take_rows(X: Any, index: np.ndarray, backend: Backend) -> Any:
    """The rows ``index`` of X (a backend array, or scipy.sparse on NumPy)."""
    if is_sparse(X):
        return X[index]
    return backend.xp.take(X, backend.xp.asarray(index, device=backend.device), axis=0)


def choose_settings(algorithm: Algorithm, problem: Problem, X: Any, y: np.ndarray, kept: np.ndarray,
                    seed: int, backend: Backend, weight: np.ndarray | None = None) -> Algorithm:
    """``algorithm`` with each unset tunable parameter filled by a one-pass trial of its candidates.

    ``X`` holds the training rows on the backend (``kept`` indexes those the weights may
    see), ``y`` their ±1 labels and ``weight`` their sample weights (or None) on the host.
    A candidate whose trial diverges is skipped; when all do, the first candidate is kept.
    """
    for tunable in algorithm.tunables:
        if getattr(algorithm, tunable.name) is not None:
            continue
        algorithm = _trial(algorithm, tunable.name, tunable.candidates, problem, X, y, weight, kept, seed,
                           backend)
    return algorithm


def _trial(algorithm: Algorithm, name: str, candidates: tuple[Any, ...], problem: Problem, X: Any,
           y: np.ndarray, weight: np.ndarray | None, kept: np.ndarray, seed: int, backend: Backend) -> Algorithm:
    fit_part, check_part = stratified_split(y[kept], 0.2, seed + 1)
    rng = np.random.default_rng(seed + 2)
    fit_part = kept[np.sort(rng.permutation(fit_part)[:TRIAL_ROWS])]
    check_part = kept[np.sort(rng.permutation(check_part)[:TRIAL_ROWS])]
    X_fit, y_fit = take_rows(X, fit_part, backend), backend.asarray(y[fit_part])
    w_fit = None if weight is None else backend.asarray(weight[fit_part] / np.mean(weight[fit_part]))
    w_check = None if weight is None else weight[check_part]
    X_check = take_rows(X, check_part, backend)
    trial_problem = problem._replace(n_samples=int(fit_part.size), epochs=1,
                                     batch_size=min(problem.batch_size, max(1, fit_part.size // 50)))
    best, best_value = None, -np.inf
    for value in candidates:
        candidate = dataclasses.replace(algorithm, **{name: value})
        result = run(candidate, trial_problem, ArrayReader(X_fit, y_fit, problem.xp, backend.device, w_fit),
                     epochs=1, seed=seed)
        if result.status < 0:
            continue
        w, b = result.weights
        _, score = best_threshold(to_numpy(X_check @ w + b), y[check_part], problem.measure, w_check)
        if score > best_value:
            best, best_value = candidate, score
    return best if best is not None else dataclasses.replace(algorithm, **{name: candidates[0]})

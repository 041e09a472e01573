"""The one training loop, and the in-memory reader that serves it mini-batches.

Data reach the loop through a reader: ``epoch(batch_size, rng)`` yields the shuffled
mini-batches of one pass and ``full()`` returns all the data (for once-per-epoch
evaluation and batch algorithms). :class:`ArrayReader` serves arrays already on the
backend; a reader of files larger than memory implements the same two methods.

The loop owns epochs, shuffling, timing, history, callbacks and stopping; algorithms
only ``update`` on one mini-batch (see :mod:`calopt.algorithms`). Host/device
synchronisation happens once per epoch, in the record step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from calopt.algorithms import Algorithm, Problem
from calopt.backends import is_sparse

__all__ = ["ArrayReader", "BatchReader", "EpochRecord", "LoopResult", "run"]

Array = Any

#: Status codes of a finished loop (SciPy style).
CONVERGED, MAXITER, CALLBACK, NONFINITE = 0, 1, 2, -1


class BatchReader(Protocol):
    n_samples: int
    n_features: int

    def epoch(self, batch_size: int, rng: np.random.Generator | None) -> Iterator[tuple[Array, Array]]:
        """The mini-batches of one pass, shuffled by ``rng`` (in order when None)."""

    def full(self) -> tuple[Array, Array]:
        """All the data as one (X, y) pair."""


@dataclass
class ArrayReader:
    """In-memory data (a backend array, or a scipy.sparse CSR matrix on NumPy) and labels ±1.

    Each epoch permutes the rows once (one gather on the device) and then serves
    contiguous slices, so a batch costs no per-row indexing.
    """

    X: Array
    y: Array
    xp: Any
    device: Any = None

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def epoch(self, batch_size: int, rng: np.random.Generator | None) -> Iterator[tuple[Array, Array]]:
        X, y = self.X, self.y
        if rng is not None:
            order = rng.permutation(self.n_samples)
            if is_sparse(X):
                X, y = X[order], self.xp.take(y, self.xp.asarray(order, device=self.device), axis=0)
            else:
                index = self.xp.asarray(order, device=self.device)
                X, y = self.xp.take(X, index, axis=0), self.xp.take(y, index, axis=0)
        n = self.n_samples
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)  # the standard leaves out-of-bounds stops undefined
            yield X[start:stop, :], y[start:stop]

    def full(self) -> tuple[Array, Array]:
        return self.X, self.y


class EpochRecord(NamedTuple):
    """What the loop hands a callback after each epoch."""

    epoch: int
    seconds: float  #: cumulative training time (without the record step)
    state: Any
    weights: tuple[Array, Array]


@dataclass
class LoopResult:
    state: Any
    epochs: int
    seconds: float
    status: int
    message: str
    history: list[dict[str, float]] = field(default_factory=list)


def run(
    algorithm: Algorithm,
    problem: Problem,
    reader: BatchReader,
    *,
    epochs: int,
    seed: int | None = 0,
    state: Any = None,
    start_epoch: int = 0,
    record: Callable[[EpochRecord], dict[str, float]] | None = None,
    callback: Callable[[EpochRecord], None] | None = None,
    rng_state: dict | None = None,
) -> LoopResult:
    """Run ``algorithm`` for ``epochs`` passes over ``reader``.

    ``record(epoch_record)`` returns the numbers to store in the history (it runs
    outside the timed part); ``callback(epoch_record)`` may raise ``StopIteration``
    to stop cleanly. A non-finite model stops the loop with status NONFINITE and
    the last finite state. ``state``/``start_epoch``/``rng_state`` resume a run.
    """
    xp = problem.xp
    rng = np.random.default_rng(seed)
    if rng_state is not None:
        rng.bit_generator.state = rng_state
    if state is None:
        state = algorithm.init(problem)
    history: list[dict[str, float]] = []
    seconds, status, message = 0.0, MAXITER, f"stopped after {epochs} epochs"
    epoch = start_epoch
    while epoch < epochs:
        started = time.perf_counter()
        previous = state
        for X_batch, y_batch in reader.epoch(problem.batch_size, rng):
            state = algorithm.update(state, X_batch, y_batch, problem)
        X_all, y_all = reader.full()
        state = algorithm.end_epoch(state, X_all, y_all, problem)
        w, b = algorithm.weights(state)
        finite = bool(xp.all(xp.isfinite(w))) and bool(xp.isfinite(b))  # the epoch's sync
        seconds += time.perf_counter() - started
        epoch += 1
        if not finite:
            state, epoch = previous, epoch - 1
            status, message = NONFINITE, f"diverged in epoch {epoch + 1}: non-finite weights; kept epoch {epoch}"
            break
        info = EpochRecord(epoch, seconds, state, (w, b))
        row: dict[str, float] = {"epoch": epoch, "seconds": seconds}
        if record is not None:
            row.update(record(info))
        row.update({k: float(v) for k, v in algorithm.describe_state(state).items()})
        history.append(row)
        if callback is not None:
            try:
                callback(info)
            except StopIteration:
                status, message = CALLBACK, f"stopped by the callback after epoch {epoch}"
                break
        if algorithm.converged(state):
            status, message = CONVERGED, f"converged after {epoch} epochs"
            break
    return LoopResult(state, epoch, seconds, status, message, history)

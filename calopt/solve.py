"""The one training loop, and the in-memory reader that serves it mini-batches.

Data reach the loop through a reader: ``epoch(batch_size, rng)`` yields the shuffled
mini-batches of one pass and ``full()`` returns all the data (for once-per-epoch
evaluation and batch algorithms). :class:`ArrayReader` serves arrays already on the
backend; a reader of files larger than memory implements the same two methods.

The loop owns epochs, shuffling, timing, history, callbacks, checkpoints and stopping;
algorithms only ``update`` on one mini-batch (see :mod:`calopt.algorithms`). Host/device
synchronisation happens once per epoch, in the record step.

An ``interrupt`` flag is checked after every batch: when it is set the loop stops with
status INTERRUPTED and returns its position (epoch, batch, the generator's state at the
start of that epoch), which :mod:`calopt.checkpoint` saves; ``run(..., resume=result)``
regenerates the epoch's permutation, skips the batches done and ends exactly where an
uninterrupted run would.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from calopt.algorithms import Algorithm, Problem
from calopt.backends import is_sparse
from calopt.csr import CsrRows, fast_products

try:  # the C++ loops behind scipy's X[rows] and X.toarray(), without their checks and copies
    from scipy.sparse._sparsetools import csr_row_index, csr_todense
except ImportError:  # pragma: no cover - a SciPy that moved them: its public routes instead
    csr_row_index = csr_todense = None

__all__ = ["INTERRUPTED", "ArrayReader", "BatchReader", "EpochRecord", "LoopResult", "run"]

Array = Any

#: Status codes of a finished loop (SciPy style); INTERRUPTED: stopped mid-run, resumable.
CONVERGED, MAXITER, CALLBACK, INTERRUPTED, NONFINITE = 0, 1, 2, 3, -1


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
    contiguous slices, so a batch costs no per-row indexing; batches of at least
    :data:`GATHER_BATCH_ROWS` rows, and dense data of at least :data:`BATCH_GATHER_BYTES`,
    are gathered batch by batch instead. A CSR matrix with at least
    :data:`DENSE_DENSITY` nonzeros per cell is made dense once, here (ijcnn1); a sparser
    one is permuted as CSR each epoch (scipy's row gather on the index arrays, a fraction
    of the bytes of a dense copy) and its slices are served as :class:`calopt.csr.CsrRows`
    (a9a, w8a), whose products with vectors run scipy's C++ loops directly. Without those
    loops (a SciPy that moved them) the slices are served dense from
    :data:`DENSE_BATCH_DENSITY` nonzeros per cell, else as scipy CSR matrices.
    """

    X: Array
    y: Array
    xp: Any
    device: Any = None

    def __post_init__(self) -> None:
        if not is_sparse(self.X):
            return
        n, d = self.X.shape
        if self.X.nnz >= DENSE_DENSITY * n * d:  # at most 2.2× the bytes of the CSR
            self.X = self.X.toarray()
        elif not self.X.has_canonical_format:
            # dense batches are scattered from the nonzeros: duplicates must be summed first
            # (on a copy; permuting rows keeps a matrix canonical, so this is done once)
            self.X = self.X.copy()
            self.X.sum_duplicates()

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def epoch(self, batch_size: int, rng: np.random.Generator | None) -> Iterator[tuple[Array, Array]]:
        X, y, order = self.X, self.y, None
        if rng is not None:
            order = rng.permutation(self.n_samples)
            if is_sparse(X):
                y = self.xp.take(y, self.xp.asarray(order, device=self.device), axis=0)
            else:
                index = self.xp.asarray(order, device=self.device)
                if batch_size >= GATHER_BATCH_ROWS or _nbytes(X, self.xp) >= BATCH_GATHER_BYTES:
                    yield from _gathered_batches(X, y, index, batch_size, self.xp)
                    return
                X, y = self.xp.take(X, index, axis=0), self.xp.take(y, index, axis=0)
        if is_sparse(X):
            yield from _sparse_batches(X, y, batch_size, order)
            return
        n = self.n_samples
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)  # the standard leaves out-of-bounds stops undefined
            yield X[start:stop, :], y[start:stop]

    def full(self) -> tuple[Array, Array]:
        return self.X, self.y


#: Dense data of at least this many bytes are gathered batch by batch (one ``take`` of the
#: batch's rows, multiplied while still in cache) instead of permuted whole each epoch: on
#: the CPU the whole permuted copy of a large X costs a second pass over memory and fresh
#: pages every epoch (10^6 × 100 float32: 162-203 ms an epoch whole, 99-119 ms by batch;
#: 3·10^6: 0.85-4.2 s against 0.47-0.49 s), and on a GPU it would double X's memory.
BATCH_GATHER_BYTES = 1 << 26
#: Batches of at least this many rows are gathered one by one whatever the data's size:
#: the rows are used while in cache, which beat permuting the whole X first (2-core AMD
#: EPYC, SPADE epoch at fit's default batch: ijcnn1 dense 6.3 → 4.8 ms, a9a dense 13.5 →
#: 7.9 ms); at 32 rows a batch the extra ``take`` per batch made it 7% slower.
GATHER_BATCH_ROWS = 64


def _nbytes(X: Array, xp: Any) -> int:
    return int(X.shape[0]) * int(X.shape[1]) * (xp.finfo(X.dtype).bits // 8)


def _gathered_batches(
    X: Array, y: Array, index: Array, batch_size: int, xp: Any
) -> Iterator[tuple[Array, Array]]:
    """The rows ``index[start:stop]`` of X and y, one batch at a time (dense X)."""
    n = int(X.shape[0])
    for start in range(0, n, batch_size):
        rows = index[start:min(start + batch_size, n)]
        yield xp.take(X, rows, axis=0), xp.take(y, rows, axis=0)


#: Nonzeros per cell from which a CSR matrix is trained on as a dense array. A reader
#: epoch (with the two products a batch) costs about 1.7 ns a cell dense and 5.5 ns a
#: nonzero as CSR (2-core AMD EPYC), so dense wins above a density of about 0.3
#: (ijcnn1, 0.59: 2.8 ms dense against 6.2 ms; the reader table of bench_throughput.py).
DENSE_DENSITY = 0.3
#: Without scipy's product loops (see calopt.csr): nonzeros per cell from which the
#: batches of a CSR matrix are served dense (a9a, 0.11: about 7 µs to build a batch and
#: 9 µs of dense products against 45-50 µs of scipy slicing and sparse products; w8a,
#: 0.039 with 300 features: CSR is faster). With them, CsrRows beat both: a reader epoch
#: with the two products a batch, a9a 3.2 ms against 4.7 ms dense, w8a 4.9 against 12.7
#: (bench_throughput.py's reader table).
DENSE_BATCH_DENSITY = 0.05


def _sparse_batches(
    X: Any, y: Array, batch_size: int, order: np.ndarray | None = None
) -> Iterator[tuple[Any, Array]]:
    """Consecutive row slices of a CSR matrix (NumPy only), or of its rows ``order`` when
    given (y already in that order): CsrRows, or without scipy's loops dense when dense
    enough, else scipy CSR matrices."""
    n, d = X.shape
    data, indices, indptr = (X.data, X.indices, X.indptr) if order is None else _csr_rows(X, order)
    fast = fast_products(data, indices, indptr)
    dense = not fast and X.nnz >= DENSE_BATCH_DENSITY * n * d
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        if dense:
            yield _dense_rows(data, indices, indptr[start:stop + 1], d), y[start:stop]
        elif fast:
            yield CsrRows(data, indices, indptr[start:stop + 1], d), y[start:stop]
        else:
            first, last = indptr[start], indptr[stop]
            yield type(X)((data[first:last], indices[first:last], indptr[start:stop + 1] - first),
                          shape=(stop - start, d)), y[start:stop]


def _csr_rows(X: Any, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, indptr) of the CSR matrix X[order]: scipy's row gather without the
    checks and copies of a new matrix (a9a: 0.36 ms an epoch, X[order] 0.48 ms)."""
    if csr_row_index is None or X.indices.dtype != X.indptr.dtype:
        X = X[order]
        return X.data, X.indices, X.indptr
    indptr = np.empty(len(order) + 1, dtype=X.indptr.dtype)
    indptr[0] = 0
    np.cumsum(np.diff(X.indptr)[order], out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=X.indices.dtype)
    data = np.empty(int(indptr[-1]), dtype=X.data.dtype)
    csr_row_index(len(order), order.astype(X.indptr.dtype), X.indptr, X.indices, X.data, indices, data)
    return data, indices, indptr


def _dense_rows(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, d: int) -> np.ndarray:
    """The rows of a CSR matrix that ``indptr`` (a slice of its row pointers, not rebased)
    delimits, as a zeroed (rows × d) block with their nonzeros added in."""
    rows = len(indptr) - 1
    block = np.zeros((rows, d), dtype=data.dtype)
    if csr_todense is not None:  # one C++ loop over the rows (a9a: 7 µs a batch)
        csr_todense(rows, d, indptr, indices, data, block)
        return block
    first, last = indptr[0], indptr[-1]
    cells = np.repeat(np.arange(0, rows * d, d), np.diff(indptr))  # scattered: 17 µs a batch
    cells += indices[first:last]
    block.ravel()[cells] = data[first:last]
    return block


class EpochRecord(NamedTuple):
    """What the loop hands a callback after each epoch."""

    epoch: int
    seconds: float  #: cumulative training time (without the record step)
    state: Any
    weights: tuple[Array, Array]


@dataclass
class LoopResult:
    """Where the loop stopped; with status INTERRUPTED, enough to resume it exactly."""

    state: Any
    epochs: int  #: epochs completed
    seconds: float
    status: int
    message: str
    history: list[dict[str, float]] = field(default_factory=list)
    #: Batches done in the unfinished epoch ``epochs + 1`` (0 at an epoch boundary).
    batch: int = 0
    #: ``bit_generator.state`` of the shuffling generator at the start of that epoch.
    rng_state: dict | None = None
    #: The state at the start of that epoch (mid-epoch only): the fallback of a divergence.
    epoch_start_state: Any = None


# Overflow and NaN are the loop's to catch (status NONFINITE, the last finite state kept),
# not NumPy warnings to print mid-run.
@np.errstate(over="ignore", invalid="ignore", divide="ignore")
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
    resume: LoopResult | None = None,
    interrupt: Callable[[], bool] | None = None,
    checkpoint: Callable[[LoopResult], None] | None = None,
    checkpoint_every: int = 0,
) -> LoopResult:
    """Run ``algorithm`` for ``epochs`` passes over ``reader``.

    ``record(epoch_record)`` returns the numbers to store in the history (it runs
    outside the timed part); ``callback(epoch_record)`` may raise ``StopIteration``
    to stop cleanly. A non-finite model stops the loop with status NONFINITE and
    the last finite state. ``state``/``start_epoch``/``rng_state`` start from an
    epoch boundary; ``resume`` (an INTERRUPTED result, or a checkpoint's) continues
    mid-epoch with its history and time. ``interrupt()`` is checked after each batch;
    when true the loop stops with status INTERRUPTED. ``checkpoint(position)`` is
    called every ``checkpoint_every`` completed epochs while the loop goes on.
    """
    xp = problem.xp
    rng = np.random.default_rng(seed)
    history: list[dict[str, float]] = []
    seconds, skip, epoch_start_state = 0.0, 0, None
    if resume is not None:
        state, start_epoch, rng_state = resume.state, resume.epochs, resume.rng_state
        history, seconds, skip = list(resume.history), resume.seconds, resume.batch
        epoch_start_state = resume.epoch_start_state if resume.batch else None
    if rng_state is not None:
        rng.bit_generator.state = rng_state
    if state is None:
        state = algorithm.init(problem)
    status, message = MAXITER, f"stopped after {epochs} epochs"
    epoch = start_epoch
    while epoch < epochs:
        started = time.perf_counter()
        previous = state if epoch_start_state is None else epoch_start_state
        epoch_rng_state, epoch_start_state = rng.bit_generator.state, None
        batches = itertools.islice(reader.epoch(problem.batch_size, rng), skip, None)
        done, skip = skip, 0
        for X_batch, y_batch in batches:
            state = algorithm.update(state, X_batch, y_batch, problem)
            done += 1
            if interrupt is not None and interrupt():
                seconds += time.perf_counter() - started
                return LoopResult(state, epoch, seconds, INTERRUPTED,
                                  f"interrupted in epoch {epoch + 1} after batch {done}",
                                  history, done, epoch_rng_state, previous)
        X_all, y_all = reader.full()
        state = algorithm.end_epoch(state, X_all, y_all, problem)
        w, b = algorithm.weights(state)
        finite = bool(xp.all(xp.isfinite(w))) and bool(xp.all(xp.isfinite(b)))  # the epoch's sync
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
        if checkpoint is not None and checkpoint_every and epoch % checkpoint_every == 0 and epoch < epochs:
            checkpoint(LoopResult(state, epoch, seconds, INTERRUPTED, f"checkpoint after epoch {epoch}",
                                  list(history), 0, rng.bit_generator.state))
    return LoopResult(state, epoch, seconds, status, message, history)

"""Readers: what serves the training loop its mini-batches.

A reader has ``epoch(batch_size, rng)``, the shuffled mini-batches of one pass, and
``full()``, all the data (for once-per-epoch evaluation and batch algorithms), each a
:class:`Batch` of features, labels and optional sample weights. :class:`ArrayReader`
serves arrays already on the backend, or a scipy CSR matrix on NumPy; a reader of files
larger than memory implements the same two methods.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from calopt.backends import is_sparse
from calopt.io.csr import CsrRows, fast_products
from calopt.io.rows import FeatureRows

__all__ = ["ArrayReader", "Batch", "BatchReader"]

Array = Any


class Batch(NamedTuple):
    """Rows an algorithm updates on: features, labels ±1, and sample weights.

    ``X`` is a backend array (B, d), a sparse batch on NumPy (:class:`calopt.io.csr.CsrRows`
    or scipy CSR), or what an algorithm's own reader serves; ``y`` is (B,) or (C, B)
    one-vs-rest; ``weight`` is (B,) (or like ``y``) with mean 1 over the training data,
    None when every row weighs 1, so unweighted training pays nothing for weights.
    """

    X: Array
    y: Array
    weight: Array | None = None


class BatchReader(Protocol):
    n_samples: int
    n_features: int

    def epoch(self, batch_size: int, rng: np.random.Generator | None) -> Iterator[Batch]:
        """The mini-batches of one pass, shuffled by ``rng`` (in order when None)."""

    def full(self) -> Batch:
        """All the data as one batch."""


@dataclass
class ArrayReader(FeatureRows):
    """In-memory data (a backend array, or a scipy.sparse CSR matrix on NumPy) and labels ±1.

    Each epoch permutes the rows once (one gather on the device) and then serves
    contiguous slices, so a batch costs no per-row indexing; batches of at least
    :data:`GATHER_BATCH_ROWS` rows, and dense data of at least :data:`BATCH_GATHER_BYTES`,
    are gathered batch by batch instead. A CSR matrix with at least
    :data:`DENSE_DENSITY` nonzeros per cell is made dense once, here (ijcnn1); a sparser
    one is permuted as CSR each epoch (scipy's row gather on the index arrays, a fraction
    of the bytes of a dense copy) and its slices are served as :class:`calopt.io.csr.CsrRows`
    (a9a, w8a), whose products with vectors run scipy's own products on the batch's arrays
    without building a scipy matrix per batch. Index arrays
    of two integer types or integer values (which CsrRows does not take) are served dense
    from :data:`DENSE_BATCH_DENSITY` nonzeros per cell, else as scipy CSR matrices.
    """

    X: Array
    y: Array
    xp: Any
    device: Any = None
    #: Sample weights (n,) on the backend, mean 1; None: every row weighs 1.
    weight: Array | None = None

    def __post_init__(self) -> None:
        if not is_sparse(self.X):
            return
        n, d = self.X.shape
        if self.X.nnz >= DENSE_DENSITY * n * d:  # at most 2.2× the bytes of the CSR
            self.X = self.X.toarray()
            return
        if not self.X.has_canonical_format:
            # dense batches are scattered from the nonzeros: duplicates must be summed first
            # (on a copy; permuting rows keeps a matrix canonical, so this is done once)
            self.X = self.X.copy()
            self.X.sum_duplicates()
        self.X = _int32_indices(self.X)

    def epoch(self, batch_size: int, rng: np.random.Generator | None) -> Iterator[Batch]:
        xp, X, y, weight, order = self.xp, self.X, self.y, self.weight, None
        if rng is not None:
            order = rng.permutation(self.n_samples)  # drawn even when unused: the same stream either way
        if order is not None and batch_size >= self.n_samples:
            order = None  # one batch: its row order would change nothing but the order of its sums
        if order is not None:
            index = xp.asarray(order, device=self.device)
            if not is_sparse(X) and (batch_size >= GATHER_BATCH_ROWS or _nbytes(X, xp) >= BATCH_GATHER_BYTES):
                yield from _gathered_batches(X, y, weight, index, batch_size, xp)
                return
            y = xp.take(y, index, axis=0)
            weight = None if weight is None else xp.take(weight, index, axis=0)
            if not is_sparse(X):
                X = xp.take(X, index, axis=0)
        if is_sparse(X):
            yield from _sparse_batches(X, y, weight, batch_size, order)
            return
        n = self.n_samples
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)  # the standard leaves out-of-bounds stops undefined
            yield Batch(X[start:stop, :], y[start:stop, ...], None if weight is None else weight[start:stop, ...])

    def full(self) -> Batch:
        return Batch(self.X, self.y, self.weight)


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


def _int32_indices(X: Any) -> Any:
    """X with int32 index arrays where they fit (a new matrix on the same values), else X.

    scipy's row gather ``X[order]`` (the epoch's permutation) returns int32 index arrays
    whenever they fit, so on int64 ones (what ``load_svmlight_file`` reads) it also checks and
    converts them every epoch: a9a 5.4 ms an epoch against 1.2 ms on int32 arrays. Converted once
    here, the gather moves half the index bytes."""
    if X.indices.dtype == X.indptr.dtype == np.int32 or max(X.nnz, *X.shape) > np.iinfo(np.int32).max:
        return X
    return type(X)((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)


def _nbytes(X: Array, xp: Any) -> int:
    return int(X.shape[0]) * int(X.shape[1]) * (xp.finfo(X.dtype).bits // 8)


def _gathered_batches(
    X: Array, y: Array, weight: Array | None, index: Array, batch_size: int, xp: Any
) -> Iterator[Batch]:
    """The rows ``index[start:stop]`` of X, y and the weights, one batch at a time (dense X)."""
    n = int(X.shape[0])
    for start in range(0, n, batch_size):
        rows = index[start:min(start + batch_size, n)]
        yield Batch(xp.take(X, rows, axis=0), xp.take(y, rows, axis=0),
                    None if weight is None else xp.take(weight, rows, axis=0))


#: Nonzeros per cell from which a CSR matrix is trained on as a dense array. A reader
#: epoch (with the two products a batch) costs about 1.7 ns a cell dense and 5.5 ns a
#: nonzero as CSR (2-core AMD EPYC), so dense wins above a density of about 0.3
#: (ijcnn1, 0.59: 2.8 ms dense against 6.2 ms; the reader table of bench_throughput.py).
DENSE_DENSITY = 0.3
#: When CsrRows cannot serve a CSR matrix (see :func:`calopt.io.csr.fast_products`):
#: nonzeros per cell from which its batches are served dense (a9a, 0.11: about 7 µs to
#: build a batch and 9 µs of dense products against 45-50 µs of scipy slicing and sparse
#: products; w8a, 0.039 with 300 features: CSR is faster). Where it can, CsrRows beat
#: both: a reader epoch with the two products a batch, a9a 3.2 ms against 4.7 ms dense,
#: w8a 4.9 against 12.7 (bench_throughput.py's reader table).
DENSE_BATCH_DENSITY = 0.05


def _sparse_batches(
    X: Any, y: Array, weight: Array | None, batch_size: int, order: np.ndarray | None = None
) -> Iterator[Batch]:
    """Consecutive row slices of a CSR matrix (NumPy only), or of its rows ``order`` when
    given (y and the weights already in that order): CsrRows, or where they cannot serve
    the arrays dense when dense enough, else scipy CSR matrices."""
    n, d = X.shape
    data, indices, indptr = (X.data, X.indices, X.indptr) if order is None else _csr_rows(X, order)
    fast = fast_products(data, indices, indptr)
    dense = not fast and X.nnz >= DENSE_BATCH_DENSITY * n * d
    bounds = [*indptr[:n:batch_size].tolist(), int(indptr[n])]  # each batch's first nonzero, as ints
    for batch, start in enumerate(range(0, n, batch_size)):
        stop = min(start + batch_size, n)
        if dense:
            rows = _dense_rows(data, indices, indptr[start:stop + 1], d)
        elif fast:  # the batch's own slices, its row pointers from 0
            first, last = bounds[batch], bounds[batch + 1]
            rows = CsrRows(data[first:last], indices[first:last], indptr[start:stop + 1] - first, d, own=True)
        else:
            first, last = indptr[start], indptr[stop]
            rows = type(X)((data[first:last], indices[first:last], indptr[start:stop + 1] - first),
                           shape=(stop - start, d))
        yield Batch(rows, y[start:stop, ...], None if weight is None else weight[start:stop, ...])


def _csr_rows(X: Any, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, indptr) of the CSR matrix X[order]: scipy's row gather (its C++ loop plus
    index checks and bookkeeping over the rows: a9a 0.8-1.2 ms an epoch, 0.2-0.4 ms more than the
    loop called directly, which calopt did before issue 24)."""
    X = X[order]
    return X.data, X.indices, X.indptr


def _dense_rows(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, d: int) -> np.ndarray:
    """The rows of a CSR matrix that ``indptr`` (a slice of its row pointers, not rebased)
    delimits, as a zeroed (rows × d) block with their nonzeros added in, in their order (what
    scipy's ``toarray`` does: duplicates summed, a stored −0.0 read as 0.0)."""
    rows = len(indptr) - 1
    block = np.zeros((rows, d), dtype=data.dtype)
    first, last = indptr[0], indptr[-1]
    cells = np.repeat(np.arange(0, rows * d, d), np.diff(indptr))
    cells += indices[first:last]
    np.add.at(block.reshape(-1), cells, data[first:last])
    return block

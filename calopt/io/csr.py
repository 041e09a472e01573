"""Mini-batches of a CSR matrix that multiply vectors without building a scipy matrix per batch.

A solver's mini-batch update on sparse data is two products, ``X @ w`` and ``X.T @ c`` with
NumPy vectors. Through a ``scipy.sparse`` matrix built for the batch each costs far more than
its arithmetic on a batch of a few thousand nonzeros (a9a, 325 rows: building the matrix
16 µs, ``X.T`` building a CSC matrix again), because of the constructor's checks.
:class:`CsrRows` holds the rows as slices of the reader's arrays, never copied or validated,
and multiplies through two scipy matrices per thread and batch shape (a ``csr_matrix``, and a
``csc_matrix`` for the transpose), made once by the public constructor: each product sets their
public ``data``, ``indices`` and ``indptr`` to the batch's arrays, multiplies with scipy's own
product and clears them. The sums are scipy's C++ loops' (``csr_matvec(s)``,
``csc_matvec(s)``), so the models are the same bit for bit as through any scipy matrix of the
same rows. Only public scipy is used (issue 24): no private module, no instance built without
the constructor. Against calling those loops directly (the private
``scipy.sparse._sparsetools``, calopt's route before), scipy's dispatch costs about 1-2 µs a
product idle, more in a solver's loop: mini-batch SPADE and STAMP on a9a 3-8% slower, full-batch
fits as fast or faster (BENCHMARKS.md, "Sparse batches").
Every other use, whatever the operand, method or attribute, goes to an ordinary scipy CSR
matrix of the same rows, built once on first use, so code written for scipy.sparse keeps
working; :func:`calopt.backends.is_sparse` is true for it (``scipy.sparse.issparse`` is not).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np
import scipy.sparse

__all__ = ["CsrRows", "fast_products"]


def fast_products(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray) -> bool:
    """Whether :class:`CsrRows` can multiply on these arrays as they are: index arrays of one
    integer type (what scipy's loops take, which its constructor would otherwise convert) and
    floating-point values."""
    return indices.dtype == indptr.dtype and indices.dtype.kind == "i" and data.dtype.kind == "f"


#: Each thread's scipy matrices that run the products, by batch shape: (csr_matrix, csc_matrix).
_local = threading.local()
#: Batch shapes kept per thread (a reader's epoch has at most two: its batches and the last one).
SHAPES_KEPT = 8


def _operators(shape: tuple[int, int]) -> tuple[Any, Any]:
    """This thread's empty ``csr_matrix`` of ``shape`` and ``csc_matrix`` of its transpose, made by
    the public constructor on first use and reused by every product of a batch of that shape. Kept
    per thread, so two threads never multiply through the same one."""
    kept = getattr(_local, "operators", None)
    if kept is None:
        kept = _local.operators = {}
    if len(kept) >= SHAPES_KEPT:
        kept.clear()
    pair = kept[shape] = (scipy.sparse.csr_matrix(shape), scipy.sparse.csc_matrix(shape[::-1]))
    return pair


def _product(rows: CsrRows, transposed: bool, other: np.ndarray) -> Any:
    """``rows @ other`` (``rows.T @ other`` when ``transposed``) for a 1-D or 2-D NumPy array: scipy's
    product on this thread's matrix of the batch's shape, its public ``data``, ``indices`` and
    ``indptr`` set to the batch's arrays for the product and cleared after it (so it holds no
    reader's arrays between products). A scipy matrix's ``*`` is its matrix product, the same
    call as ``@`` without the scalar check ``@`` makes first (1.3 µs less a product)."""
    try:
        matrix = _local.operators[rows.shape][transposed]
    except (AttributeError, KeyError):
        matrix = _operators(rows.shape)[transposed]
    arrays = rows._batch
    if arrays is None:
        arrays = rows._arrays()
    matrix.data, matrix.indices, matrix.indptr = arrays
    try:
        return matrix * other
    finally:
        matrix.data = matrix.indices = matrix.indptr = None


class CsrRows:
    """Consecutive rows of a CSR matrix given by its ``data`` and ``indices`` arrays and a
    slice ``indptr`` of its row pointers (not rebased): a (len(indptr) − 1) × d batch.

    ``X @ v`` and ``X.T @ v`` for a 1-D or 2-D NumPy array ``v`` (a vector, or the weights of
    stacked models) are scipy's products on the batch's arrays, each one call of scipy's ``@``
    (see the module's docstring); anything else is delegated to :meth:`tocsr`. Built by
    :class:`calopt.io.batches.ArrayReader` only when :func:`fast_products` holds.
    """

    __slots__ = ("data", "indices", "indptr", "shape", "_matrix", "_batch")
    ndim = 2

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_features: int, *,
                 own: bool = False):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = (len(indptr) - 1, int(n_features))
        self._matrix: Any = None
        # own: the arrays are the batch's alone (indptr from 0 to len(data)), as the reader makes them
        self._batch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = (data, indices, indptr) if own else None

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1] - self.indptr[0])

    @property
    def T(self) -> _TransposedRows:
        return _TransposedRows(self)

    def transpose(self) -> _TransposedRows:
        return _TransposedRows(self)

    def tocsr(self) -> scipy.sparse.csr_matrix:
        """The same rows as a scipy CSR matrix (built once, sharing nothing with the reader)."""
        if self._matrix is None:
            data, indices, indptr = self._arrays()
            self._matrix = scipy.sparse.csr_matrix((data.copy(), indices.copy(), indptr.copy()), shape=self.shape)
        return self._matrix

    def toarray(self) -> np.ndarray:
        return self.tocsr().toarray()

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows' own ``data``, ``indices`` and rebased ``indptr``: slices of the reader's
        arrays (made once a batch), for products only, never handed out (they share memory)."""
        if self._batch is None:
            first, last = int(self.indptr[0]), int(self.indptr[-1])
            self._batch = self.data[first:last], self.indices[first:last], self.indptr - self.indptr[0]
        return self._batch

    def __matmul__(self, other: Any) -> Any:
        if type(other) is np.ndarray and other.ndim in (1, 2):
            return _product(self, False, other)
        return self.tocsr() @ _unwrap(other)

    def __rmatmul__(self, other: Any) -> Any:
        return _unwrap(other) @ self.tocsr()

    def __abs__(self) -> scipy.sparse.csr_matrix:
        return abs(self.tocsr())

    def __neg__(self) -> scipy.sparse.csr_matrix:
        return -self.tocsr()

    def __getattr__(self, name: str) -> Any:  # methods and attributes not defined above
        return _delegate(getattr(self.tocsr(), name))

    def __repr__(self) -> str:
        return f"<CsrRows {self.shape[0]}×{self.shape[1]}, {self.nnz} stored elements>"


class _TransposedRows:
    """``rows.T``: the same arrays read as a d × B CSC matrix."""

    __slots__ = ("rows",)
    ndim = 2

    def __init__(self, rows: CsrRows):
        self.rows = rows

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows.shape[1], self.rows.shape[0]

    @property
    def dtype(self) -> np.dtype:
        return self.rows.dtype

    @property
    def T(self) -> CsrRows:
        return self.rows

    def __matmul__(self, other: Any) -> Any:
        if type(other) is np.ndarray and other.ndim in (1, 2):
            return _product(self.rows, True, other)
        return self.rows.tocsr().T @ _unwrap(other)

    def __rmatmul__(self, other: Any) -> Any:
        return _unwrap(other) @ self.rows.tocsr().T

    def __getattr__(self, name: str) -> Any:
        return _delegate(getattr(self.rows.tocsr().T, name))


def _unwrap(x: Any) -> Any:
    return x.tocsr() if isinstance(x, CsrRows) else x.rows.tocsr().T if isinstance(x, _TransposedRows) else x


def _delegate(attribute: Any) -> Any:
    """A scipy matrix's attribute; a method gets CsrRows arguments as scipy matrices."""
    if not callable(attribute):
        return attribute

    @functools.wraps(attribute)
    def method(*args: Any, **kwargs: Any) -> Any:
        return attribute(*map(_unwrap, args), **{key: _unwrap(value) for key, value in kwargs.items()})

    return method


def _binary(name: str) -> Any:
    def operator(self: Any, other: Any) -> Any:
        return getattr(_unwrap(self), name)(_unwrap(other))

    operator.__name__ = name
    return operator


# Arithmetic (X * 2, X + X, X / s, ...) is scipy's on the same rows.
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__pow__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(CsrRows, _name, _binary(_name))
    setattr(_TransposedRows, _name, _binary(_name))

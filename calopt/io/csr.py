"""Mini-batches of a CSR matrix that multiply vectors without scipy's per-call overhead.

A solver's mini-batch update on sparse data is two products, ``X @ w`` and
``X.T @ c`` with NumPy vectors. Through a ``scipy.sparse`` matrix built for the batch
each costs far more than its arithmetic on a batch of a few thousand nonzeros (a9a, 325
rows: building the matrix 16 µs, ``X @ w`` 6.5 µs, ``X.T @ c`` 21 µs, ``X.T`` building a
CSC matrix again), because of format checks and dispatch. :class:`CsrRows` holds the rows
as slices of the index arrays, never copied or validated, and runs those two products
with the C++ loops scipy itself ends in (``csr_matvec``, ``csc_matvec``: 3.8 and 4.0 µs
there), imported from the private ``scipy.sparse._sparsetools``. Where they cannot be
imported, the same loops run through public scipy arrays that are not constructed (a
copy of an empty CSR or CSC array of the batch's shape, its ``data``, ``indices`` and
``indptr`` set to the batch's arrays: :func:`_view`), so the models are the same bit for
bit; that route costs scipy's dispatch and the two views, about 10 µs more a batch: the
same full-batch fits, mini-batch SPADE and STAMP on a9a 13-19% slower (BENCHMARKS.md, "Sparse batches").
Every other use, whatever the operand, method or attribute, goes to an ordinary scipy CSR
matrix of the same rows, built once on first use, so code written for scipy.sparse keeps
working; :func:`calopt.backends.is_sparse` is true for it (``scipy.sparse.issparse`` is not).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.sparse

try:  # scipy's own C++ product loops, without the dispatch of its public operators
    from scipy.sparse._sparsetools import csc_matvec, csc_matvecs, csr_matvec, csr_matvecs
except ImportError:  # pragma: no cover - a SciPy that moved them: the same loops through public arrays
    csc_matvec = csr_matvec = csc_matvecs = csr_matvecs = None

__all__ = ["CsrRows", "fast_products"]


def fast_products(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray) -> bool:
    """Whether :class:`CsrRows` can multiply on these arrays as they are: index arrays of one
    integer type (what scipy's loops take, which its constructor would otherwise convert) and
    floating-point values."""
    return indices.dtype == indptr.dtype and indices.dtype.kind == "i" and data.dtype.kind == "f"


@functools.lru_cache(maxsize=64)
def _empty(kind: type, shape: tuple[int, int]) -> Any:
    """A scipy array of this kind and shape, only ever copied (so no flag is cached on it), without
    arrays: every copy gets its own, and the cache keeps no row pointers of a large shape."""
    template = kind(shape)
    template.data = template.indices = template.indptr = None
    return template


def _view(kind: type, shape: tuple[int, int], data: np.ndarray, indices: np.ndarray, indptr: np.ndarray) -> Any:
    """A scipy ``csr_array`` or ``csc_array`` on these arrays (a valid one: ``indptr`` starts at 0
    and ends at ``len(data)``), without the constructor's checks and conversions: a shallow copy of
    an empty array of the shape, its public ``data``, ``indices`` and ``indptr`` attributes set.
    The copy is made as :func:`copy.copy` makes it (a new instance, the attributes of the original),
    without the protocol look-ups that take it from 0.35 to 3.5 µs."""
    view = kind.__new__(kind)
    view.__dict__.update(_empty(kind, shape).__dict__)
    view.data, view.indices, view.indptr = data, indices, indptr
    return view


def _product(rows: CsrRows, transposed: bool, other: np.ndarray) -> np.ndarray:
    """``rows @ other`` (``rows.T @ other`` when ``transposed``) for a vector or C-contiguous
    matrix ``other`` of the rows' dtype: scipy's loops called directly, else through views."""
    if csr_matvec is None:
        return rows._views()[transposed] @ other
    matvec, matvecs = (csc_matvec, csc_matvecs) if transposed else (csr_matvec, csr_matvecs)
    out_rows, inner = rows.shape[::-1] if transposed else rows.shape
    if other.ndim == 1:
        out = np.zeros(out_rows, dtype=rows.data.dtype)
        matvec(out_rows, inner, rows.indptr, rows.indices, rows.data, other, out)
    else:
        out = np.zeros((out_rows, other.shape[1]), dtype=rows.data.dtype)
        matvecs(out_rows, inner, other.shape[1], rows.indptr, rows.indices, rows.data, other.ravel(), out.ravel())
    return out


class CsrRows:
    """Consecutive rows of a CSR matrix given by its ``data`` and ``indices`` arrays and a
    slice ``indptr`` of its row pointers (not rebased): a (len(indptr) − 1) × d batch.

    ``X @ v`` and ``X.T @ v`` for a 1-D NumPy array ``v`` of the data's dtype return new
    1-D arrays, and for a C-contiguous 2-D one (the weights of stacked models) new 2-D
    arrays, each one call of scipy's loops (see the module's docstring); anything else is
    delegated to :meth:`tocsr`. Built by
    :class:`calopt.io.batches.ArrayReader` only when :func:`fast_products` holds.
    """

    __slots__ = ("data", "indices", "indptr", "shape", "_matrix", "_pair")
    ndim = 2

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_features: int):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = (len(indptr) - 1, int(n_features))
        self._matrix: Any = None
        self._pair: tuple[Any, Any] | None = None

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
            first, last = self.indptr[0], self.indptr[-1]
            self._matrix = scipy.sparse.csr_matrix(
                (self.data[first:last].copy(), self.indices[first:last].copy(), self.indptr - first),
                shape=self.shape)
        return self._matrix

    def toarray(self) -> np.ndarray:
        return self.tocsr().toarray()

    def _views(self) -> tuple[Any, Any]:
        """The rows as a ``scipy.sparse.csr_array`` and, read as their transpose, a ``csc_array``, on
        slices of the reader's arrays: for products only, never handed out (they share memory)."""
        if self._pair is None:
            first, last = self.indptr[0], self.indptr[-1]
            arrays = self.data[first:last], self.indices[first:last], self.indptr - first
            self._pair = (_view(scipy.sparse.csr_array, self.shape, *arrays),
                          _view(scipy.sparse.csc_array, self.shape[::-1], *arrays))
        return self._pair

    def _takes(self, v: Any) -> bool:
        return type(v) is np.ndarray and v.ndim in (1, 2) and v.dtype == self.data.dtype and v.flags.c_contiguous

    def __matmul__(self, other: Any) -> Any:
        if self._takes(other) and other.shape[0] == self.shape[1]:
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
        rows = self.rows
        if rows._takes(other) and other.shape[0] == rows.shape[0]:
            return _product(rows, True, other)
        return rows.tocsr().T @ _unwrap(other)

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

"""SciPy's private C++ loops patched into calopt.io, for benchmarks only: the reference route.

calopt multiplies sparse mini-batches and gathers an epoch's rows through scipy's public arrays
(issue 24). Before, it called the loops behind them directly, imported from the private
``scipy.sparse._sparsetools``. :func:`patched` puts that route back in place of
``calopt.io.csr._product`` and ``calopt.io.batches._csr_rows`` (the same loops, so the same
models bit for bit), so a benchmark can time both in one process. Nothing in calopt imports this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy.sparse._sparsetools import csc_matvec, csc_matvecs, csr_matvec, csr_matvecs, csr_row_index

__all__ = ["csc_matvec", "csr_matvec", "gather", "patched", "product"]


def product(rows: Any, transposed: bool, other: np.ndarray) -> Any:
    """``rows @ other`` (``rows.T @ other``) by scipy's loops on the reader's arrays, as calopt ran
    them before issue 24 (operands of the rows' dtype, C-contiguous; any other to scipy)."""
    if other.dtype != rows.data.dtype or not other.flags.c_contiguous:
        return rows.tocsr().T @ other if transposed else rows.tocsr() @ other
    matvec, matvecs = (csc_matvec, csc_matvecs) if transposed else (csr_matvec, csr_matvecs)
    out_rows, inner = rows.shape[::-1] if transposed else rows.shape
    if other.shape[0] != inner:
        raise ValueError(f"dimension mismatch: {other.shape[0]} against {inner}")
    if other.ndim == 1:
        out = np.zeros(out_rows, dtype=rows.data.dtype)
        matvec(out_rows, inner, rows.indptr, rows.indices, rows.data, other, out)
    else:
        out = np.zeros((out_rows, other.shape[1]), dtype=rows.data.dtype)
        matvecs(out_rows, inner, other.shape[1], rows.indptr, rows.indices, rows.data, other.ravel(), out.ravel())
    return out


def gather(X: Any, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, indptr) of ``X[order]`` by scipy's row-gather loop, without the checks and
    the new matrix of ``X[order]``."""
    if X.indices.dtype != X.indptr.dtype:
        X = X[order]
        return X.data, X.indices, X.indptr
    indptr = np.empty(len(order) + 1, dtype=X.indptr.dtype)
    indptr[0] = 0
    np.cumsum(np.diff(X.indptr)[order], out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=X.indices.dtype)
    data = np.empty(int(indptr[-1]), dtype=X.data.dtype)
    csr_row_index(len(order), order.astype(X.indptr.dtype), X.indptr, X.indices, X.data, indices, data)
    return data, indices, indptr


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """calopt.io with the private loops for its products and its epoch row gather."""
    import calopt.io.batches
    import calopt.io.csr

    saved = calopt.io.csr._product, calopt.io.batches._csr_rows
    calopt.io.csr._product, calopt.io.batches._csr_rows = product, gather
    try:
        yield
    finally:
        calopt.io.csr._product, calopt.io.batches._csr_rows = saved

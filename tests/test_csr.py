"""calopt.io.csr.CsrRows: the mini-batch type of sparse data, checked against scipy.sparse."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

import calopt
from calopt.backends import is_sparse
from calopt.io.csr import CsrRows, fast_products
from calopt.io.batches import ArrayReader


def _matrix(n=40, d=7, density=0.3, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = scipy.sparse.random(n, d, density=density, format="csr", random_state=seed, dtype=dtype)
    X.data = rng.normal(size=X.nnz).astype(dtype)
    return X


def _rows(X, start, stop):
    """Rows start:stop of X as CsrRows on X's own arrays (the row pointers not rebased)."""
    assert fast_products(X.data, X.indices, X.indptr)
    return CsrRows(X.data, X.indices, X.indptr[start:stop + 1], X.shape[1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("start, stop", [(0, 40), (5, 17), (39, 40), (12, 12)])
def test_products_with_vectors_are_scipys(dtype, start, stop):
    X = _matrix(dtype=dtype)
    rows, block = _rows(X, start, stop), X[start:stop]
    rng = np.random.default_rng(1)
    w, c = rng.normal(size=7).astype(dtype), rng.normal(size=stop - start).astype(dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for got, want in ((rows @ w, block @ w), (rows.T @ c, block.T @ c)):
        assert type(got) is np.ndarray and got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert rows.shape == block.shape and rows.T.shape == block.T.shape and rows.nnz == block.nnz


def test_everything_else_goes_to_an_equal_scipy_matrix():
    X = _matrix(density=0.5)
    rows, block = _rows(X, 3, 30), X[3:30]
    assert is_sparse(rows) and rows.ndim == 2 and rows.dtype == X.dtype
    np.testing.assert_array_equal(rows.toarray(), block.toarray())
    np.testing.assert_allclose((rows.T @ rows).toarray(), (block.T @ block).toarray())  # a Gram matrix
    np.testing.assert_allclose(rows @ np.ones((7, 2)), block @ np.ones((7, 2)))  # 2-D operand
    np.testing.assert_allclose(rows @ np.arange(7), block @ np.arange(7))  # integer vector
    assert abs(rows).max() == abs(block).max()
    assert rows.multiply(rows).sum() == pytest.approx(block.multiply(block).sum())  # CsrRows argument
    np.testing.assert_allclose((rows * 2 + rows).toarray(), (block * 3).toarray())
    np.testing.assert_allclose((rows.T / 2).toarray(), (block.T / 2).toarray())
    assert rows.max() == block.max() and rows.T.nnz == block.nnz
    np.testing.assert_allclose(np.ones(27) @ rows, np.ones(27) @ block)
    with pytest.raises(ValueError):
        rows @ np.ones(6)  # the wrong length is scipy's error, not a silent read past the end


def test_a_scipy_matrix_from_it_owns_its_arrays():
    X = _matrix()
    before = X.data.copy()
    matrix = _rows(X, 2, 9).tocsr()
    matrix.data[:] = 0.0
    np.testing.assert_array_equal(X.data, before)


def test_reader_serves_csr_rows_of_the_permuted_matrix():
    X = _matrix(n=50, d=30, density=0.05)  # below the density made dense once
    y = np.where(np.arange(50) % 3 == 0, 1.0, -1.0)
    reader = ArrayReader(X, y, calopt.get_backend("numpy").xp)
    order = np.random.default_rng(7).permutation(50)
    served = list(reader.epoch(16, np.random.default_rng(7)))
    assert [type(batch.X) for batch in served] == [CsrRows] * 4
    np.testing.assert_array_equal(np.vstack([batch.X.toarray() for batch in served]), X[order].toarray())
    np.testing.assert_array_equal(np.concatenate([batch.y for batch in served]), y[order])

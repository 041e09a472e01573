"""calopt.io.csr.CsrRows: the mini-batch type of sparse data, checked against plain loops and scipy.sparse."""

from __future__ import annotations

import sys

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


def _loop_products(X, start, stop, W, C):
    """X[start:stop] @ W and X[start:stop].T @ C by plain loops over the nonzeros: each sum from 0
    in the order the nonzeros are stored (the order of scipy's loops, so equal bit for bit)."""
    XW = np.zeros((stop - start, W.shape[1]), dtype=X.dtype)
    XtC = np.zeros((X.shape[1], C.shape[1]), dtype=X.dtype)
    for row in range(start, stop):
        for k in range(X.indptr[row], X.indptr[row + 1]):
            column, value = X.indices[k], X.data[k]
            for j in range(W.shape[1]):  # NumPy scalars: float32 sums stay float32
                XW[row - start, j] = XW[row - start, j] + value * W[column, j]
                XtC[column, j] = XtC[column, j] + value * C[row - start, j]
    return XW, XtC


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("start, stop", [(0, 40), (5, 17), (12, 12)])
def test_products_are_the_plain_loops_bit_for_bit(dtype, index, start, stop):
    """Vectors and stacked columns (the weights of several models), each batch of rows of a matrix
    with either index type: the sums of a plain loop, exactly (models stay bit-identical)."""
    X = _matrix(dtype=dtype)
    X.indices, X.indptr = X.indices.astype(index), X.indptr.astype(index)  # as set, not as scipy would choose
    rng = np.random.default_rng(2)
    W, C = rng.normal(size=(7, 3)).astype(dtype), rng.normal(size=(stop - start, 3)).astype(dtype)
    XW, XtC = _loop_products(X, start, stop, W, C)
    rows = _rows(X, start, stop)
    for got, want in ((rows @ W, XW), (rows.T @ C, XtC), (rows @ W[:, 1].copy(), XW[:, 1]),
                      (rows.T @ C[:, 2].copy(), XtC[:, 2])):
        assert got.dtype == dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes(), (got, want)


def test_batches_of_one_shape_do_not_share_their_products():
    """Batches of the same shape, one after the other and then again in reverse: each product is
    its own rows' (nothing of one batch is left in another)."""
    X = _matrix(n=48, d=9, density=0.4)
    w = np.random.default_rng(3).normal(size=(9, 1))
    batches = [_rows(X, start, start + 12) for start in range(0, 48, 12)]
    for rows in batches + batches[::-1]:
        start = int(np.searchsorted(X.indptr, rows.indptr[0]))
        want, _ = _loop_products(X, start, start + 12, w, np.zeros((12, 1)))
        np.testing.assert_array_equal(rows @ w, want)
        np.testing.assert_array_equal(rows.T @ np.ones(12), X[start:start + 12].toarray().sum(axis=0))


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


def test_reader_serves_int64_indices_as_int32_without_touching_the_callers_matrix():
    """A matrix with int64 index arrays (what load_svmlight_file reads) is served the same rows,
    its caller's arrays left as they were."""
    X = _matrix(n=50, d=30, density=0.05)
    X64 = X.copy()  # scipy's constructor would make them int32
    X64.indices, X64.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    y = np.where(np.arange(50) % 3 == 0, 1.0, -1.0)
    reader = ArrayReader(X64, y, calopt.get_backend("numpy").xp)
    served = list(reader.epoch(16, np.random.default_rng(7)))
    assert [type(batch.X) for batch in served] == [CsrRows] * 4
    assert X64.indices.dtype == X64.indptr.dtype == np.int64
    order = np.random.default_rng(7).permutation(50)
    np.testing.assert_array_equal(np.vstack([batch.X.toarray() for batch in served]), X[order].toarray())


def test_reader_serves_csr_rows_of_the_permuted_matrix():
    X = _matrix(n=50, d=30, density=0.05)  # below the density made dense once
    y = np.where(np.arange(50) % 3 == 0, 1.0, -1.0)
    reader = ArrayReader(X, y, calopt.get_backend("numpy").xp)
    order = np.random.default_rng(7).permutation(50)
    served = list(reader.epoch(16, np.random.default_rng(7)))
    assert [type(batch.X) for batch in served] == [CsrRows] * 4
    np.testing.assert_array_equal(np.vstack([batch.X.toarray() for batch in served]), X[order].toarray())
    np.testing.assert_array_equal(np.concatenate([batch.y for batch in served]), y[order])


@pytest.mark.parametrize("algorithm, measure", [("spade", "gmean"), ("stamp", "f1"), ("lbfgs", "f1")])
def test_training_on_csr_rows_is_training_on_scipy_batches_bit_for_bit(algorithm, measure, monkeypatch):
    """Mini-batch and full-batch training on sparse data: the model trained on CsrRows batches is
    the model trained on scipy CSR matrices built for each batch (scipy's own products), bit for bit."""
    import calopt.io.batches

    X = _matrix(n=600, d=40, density=0.1, seed=5)
    y = np.where(np.asarray(X.sum(axis=1)).ravel() + np.random.default_rng(5).normal(size=600) > 0.5, 1, 0)
    kwargs = dict(measure=measure, algorithm=algorithm, select="none", epochs=3, batch_size=50, seed=0)
    served = []
    epoch = calopt.io.batches.ArrayReader.epoch

    def recording(self, *args):
        for batch in epoch(self, *args):
            served.append(type(batch.X))
            yield batch

    monkeypatch.setattr(calopt.io.batches.ArrayReader, "epoch", recording)
    on_rows = calopt.fit(X, y, **kwargs)
    rows_served, served[:] = set(served), []
    monkeypatch.setattr(calopt.io.batches, "fast_products", lambda data, indices, indptr: False)
    monkeypatch.setattr(calopt.io.batches, "DENSE_BATCH_DENSITY", 2.0)  # scipy CSR batches, never dense
    on_scipy = calopt.fit(X, y, **kwargs)
    if algorithm != "lbfgs":
        assert rows_served == {CsrRows} and set(served) == {scipy.sparse.csr_matrix}
    assert np.asarray(on_rows.coef).tobytes() == np.asarray(on_scipy.coef).tobytes()
    assert np.asarray(on_rows.intercept).tobytes() == np.asarray(on_scipy.intercept).tobytes()
    assert float(on_rows.threshold).hex() == float(on_scipy.threshold).hex()


def test_empty_rows_and_single_columns_are_the_plain_loops():
    """Rows without nonzeros (first, inside, last), stacked columns of width 1 and a batch of empty
    rows only: the sums of a plain loop, exactly."""
    dense = np.zeros((9, 5))
    dense[1, [0, 3]] = [1.5, -2.0]
    dense[3, [1, 2, 4]] = [0.25, 3.0, -1.0]
    dense[6, 4] = 7.0
    X = scipy.sparse.csr_matrix(dense)
    rng = np.random.default_rng(6)
    for start, stop in [(0, 9), (0, 1), (4, 6), (7, 9)]:
        W, C = rng.normal(size=(5, 1)), rng.normal(size=(stop - start, 1))
        XW, XtC = _loop_products(X, start, stop, W, C)
        rows = _rows(X, start, stop)
        for got, want in ((rows @ W, XW), (rows.T @ C, XtC), (rows @ W[:, 0].copy(), XW[:, 0]),
                          (rows.T @ C[:, 0].copy(), XtC[:, 0])):
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (start, stop, got, want)


def test_operands_of_another_dtype_or_layout_get_scipys_products():
    """A float64 vector with float32 rows, a Fortran-ordered and a strided operand: what scipy's
    matrix of the same rows gives (its upcast and its copies)."""
    X = _matrix(dtype=np.float32)
    rows, block = _rows(X, 5, 30), X[5:30]
    rng = np.random.default_rng(8)
    w, W, C = rng.normal(size=7), np.asfortranarray(rng.normal(size=(7, 3))), rng.normal(size=(25, 6))[:, ::2]
    for got, want in ((rows @ w, block @ w), (rows @ W, block @ W), (rows.T @ C, block.T @ C),
                      (rows.T @ C.astype(np.float32), block.T @ C.astype(np.float32))):
        assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_product_keeps_no_reference_to_the_batch_arrays():
    """After a product nothing of calopt holds the batch's arrays (the scipy arrays each thread
    multiplies through are emptied), so a reader's permuted copy is freed with its batches."""
    import gc
    import weakref

    X = _matrix()
    data, indices, indptr = X.data.copy(), X.indices.copy(), X.indptr.copy()
    refs = [weakref.ref(data), weakref.ref(indices), weakref.ref(indptr)]
    rows = CsrRows(data, indices, indptr[3:20], 7)
    rows @ np.ones(7), rows.T @ np.ones(16), rows @ np.ones((7, 2))
    del rows, data, indices, indptr
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]


def test_threads_multiplying_batches_of_one_shape_get_their_own_products():
    """Two threads multiplying batches of the same shape at once: each product is its own rows'."""
    import threading

    X = _matrix(n=400, d=20, density=0.2, seed=9)
    w = np.random.default_rng(9).normal(size=20)
    batches = [(start, _rows(X, start, start + 20)) for start in range(0, 400, 20)]
    expected = {start: X[start:start + 20] @ w for start, _ in batches}
    failures = []

    def work(part):
        for _ in range(300):
            for start, rows in part:
                try:
                    if not np.array_equal(rows @ w, expected[start]):
                        failures.append(start)
                except Exception as error:  # another thread's arrays, or none, under this one's product
                    failures.append(repr(error))

    threads = [threading.Thread(target=work, args=(batches[i::2],)) for i in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_column_max_abs_is_scipys_max_of_abs(dtype):
    """calopt.backends.column_max_abs against scipy's abs(X).max(axis=0): negative entries, empty
    columns, duplicate and unsorted entries of a hand-built CSR (summed first, as scipy does), CSC
    input, a NaN, and no rows."""
    from calopt.backends import column_max_abs

    rng = np.random.default_rng(4)
    X = scipy.sparse.random(50, 40, density=0.1, format="csr", random_state=rng,
                            data_rvs=rng.standard_normal).astype(dtype)
    keep = np.ones(40)
    keep[7] = 0  # an empty column
    X = (X @ scipy.sparse.diags(keep)).tocsr().astype(dtype)
    X.eliminate_zeros()

    def scipy_max(M):
        return np.asarray(abs(M).max(axis=0).toarray(), dtype=np.float64).ravel()

    for M in (X, X.tocsc()):
        np.testing.assert_array_equal(column_max_abs(M), scipy_max(M))
    # two stored entries of (0, 3) and (2, 5), unsorted: their sums count
    hand = scipy.sparse.csr_matrix((np.array([1.5, -2.0, 4.0, 0.5, -3.0, -1.0], dtype=dtype), np.array([3, 1, 3, 5, 0, 5]),
                          np.array([0, 3, 3, 6])), shape=(3, 6))
    got = column_max_abs(hand)
    assert hand.nnz == 6  # the caller's matrix is left as it was (scipy's max sums it in place)
    np.testing.assert_array_equal(got, [3.0, 2.0, 0.0, 5.5, 0.0, 0.5])
    np.testing.assert_array_equal(got, scipy_max(hand))
    with_nan = X.copy()
    with_nan.data[0] = np.nan
    column = with_nan.indices[0]
    assert np.isnan(column_max_abs(with_nan)[column])
    np.testing.assert_array_equal(column_max_abs(X[:0]), np.zeros(40))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [0, 1, 31, 32, 1000, 1003])
def test_column_max_abs_of_dense_rows_is_numpys_max_of_abs(dtype, rows):
    """Dense rows (folded 32 rows to a row where C-contiguous): NumPy's abs(X).max(axis=0), for
    a C-ordered, a Fortran-ordered and a strided X, and a NaN shows."""
    from calopt.backends import column_max_abs

    X = (np.random.default_rng(rows).standard_normal((rows, 7)) * [1, 10, 0.1, 5, 1e3, 2, 3]).astype(dtype)
    for M in (X, np.asfortranarray(X), X[::2]):
        expected = np.abs(M).max(axis=0).astype(np.float64) if M.shape[0] else np.zeros(7)
        np.testing.assert_array_equal(column_max_abs(M), expected)
    if rows:
        X[rows // 2, 4] = np.nan
        assert np.isnan(column_max_abs(X)[4]) and not np.isnan(column_max_abs(X)[3])

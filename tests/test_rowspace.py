"""Training wide data in the span of its rows (calopt/training/rowspace.py): the same models as
over the columns, checked against NumPy identities, the column run and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

import calopt
from calopt.backends import get_backend
from calopt.training import rowspace
from calopt.training.rowspace import RowSpace, cheaper
from calopt_algorithms.lbfgs import Lbfgs
from calopt_algorithms.spade import Spade

NUMPY = get_backend("numpy")


def _wide(n: int = 120, d: int = 3_000, density: float = 0.02, seed: int = 0, duplicates: int = 0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng, data_rvs=rng.standard_normal)
    if duplicates:  # repeated rows: K is singular, the pivoted factor stops at its rank
        X = sp.vstack([X, X[:duplicates]]).tocsr()
    w = np.zeros(d)
    w[:50] = rng.standard_normal(50) * 3
    y = np.where(X @ w + rng.logistic(size=X.shape[0]) > 1.0, 1, 0)
    return X, y


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("duplicates", [0, 30])
def test_features_reproduce_the_gram_matrix_and_the_map_back(dense, duplicates):
    X, _ = _wide(duplicates=duplicates)
    X = X.toarray() if dense else X
    space = RowSpace.of(X, [Lbfgs()], NUMPY, models=18)
    assert space is not None
    K = np.asarray((X @ X.T).toarray() if sp.issparse(X) else X @ X.T)
    Phi = space.features
    assert Phi.shape[1] == min(X.shape[0] - duplicates, X.shape[0])  # the rank: duplicated rows add none
    np.testing.assert_allclose(Phi @ Phi.T, K, rtol=0, atol=1e-10 * np.abs(K).max())
    np.testing.assert_allclose(space.coordinates(X), Phi, rtol=0, atol=1e-9 * np.abs(Phi).max())
    u = np.random.default_rng(1).standard_normal(Phi.shape[1])
    w = space.weights(u)
    assert w.shape == (X.shape[1],)
    np.testing.assert_allclose(X @ w, Phi @ u, rtol=1e-9, atol=1e-9)  # the scores
    np.testing.assert_allclose(w @ w, u @ u, rtol=1e-9)  # the penalty


def test_the_rule_counts_the_bytes_a_pass_moves():
    assert cheaper(2_000, 100_000, 2_000_000, models=18)  # the size benchmark's very wide set
    assert not cheaper(2_000, 100_000, 2_000_000, models=1)  # one model: the columns cost less
    assert not cheaper(5_000, 300, 60_000, models=18)  # more rows than columns: never
    assert not cheaper(3_900, 7_000, 60_000, models=18)  # text of a few thousand rows: n² dominates
    assert not cheaper(10_000, 1_000_000, 2_000_000, models=18)  # the set-up: n³/3 operations, 1.6 GB
    assert cheaper(1_000, 50_000, 500_000, models=5)  # a multinomial model of 5 classes on wide rows
    X, _ = _wide()
    assert RowSpace.of(X, [Lbfgs()], NUMPY, models=18) is not None
    assert RowSpace.of(X, [Lbfgs(), Spade()], NUMPY, models=18) is None
    assert RowSpace.of(X, [Lbfgs()], get_backend("numpy", dtype="float32"), models=18) is None


def _columns_only(monkeypatch):
    monkeypatch.setattr(rowspace, "cheaper", lambda *args, **kwargs: False)


def test_a_converged_model_is_scikit_learns_and_the_columns_one(monkeypatch):
    X, y = _wide(duplicates=10)
    options = dict(measure="f1", algorithm="lbfgs:C=1.0,tol=1e-10", select="none", epochs=400)
    wide = calopt.fit(X, y, **options)
    assert wide.coef.shape == (X.shape[1],)
    scale = np.maximum(abs(X).max(axis=0).toarray().ravel(), 0)
    scale[scale == 0] = 1
    reference = LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000).fit(X @ sp.diags(1 / scale), y)
    np.testing.assert_allclose(wide.coef, reference.coef_.ravel() / scale, rtol=1e-5, atol=1e-7)
    _columns_only(monkeypatch)
    columns = calopt.fit(X, y, **options)
    np.testing.assert_allclose(wide.coef, columns.coef, rtol=1e-6, atol=1e-8)  # both converged (tol 1e-10)
    # the trained intercept (the threshold, cut on a few held-out rows, may sit anywhere on a tie)
    np.testing.assert_allclose(wide.intercept + wide.threshold, columns.intercept + columns.threshold, atol=1e-7)


def test_the_default_selection_chooses_as_over_the_columns(monkeypatch):
    X, y = _wide(n=300, d=8_000, seed=3)
    X_test, y_test = _wide(n=400, d=8_000, seed=4)
    assert RowSpace.of(X, [Lbfgs()], NUMPY, models=18) is not None
    wide = calopt.fit(X, y, measure="gmean", eval_set=(X_test, y_test))
    assert wide.fit_report.dtype == "float64"
    _columns_only(monkeypatch)  # (over the columns these rows would train in float32 unless asked)
    columns = calopt.fit(X, y, measure="gmean", eval_set=(X_test, y_test), dtype="float64")
    assert wide.fit_report.selection["algorithm"] == columns.fit_report.selection["algorithm"]
    assert wide.fit_report.selection["epochs"] == columns.fit_report.selection["epochs"]
    np.testing.assert_allclose(wide.coef, columns.coef, rtol=1e-7, atol=1e-10)
    assert np.mean(wide.predict(X_test) == columns.predict(X_test)) > 0.99
    assert [round(h["validation"], 9) for h in wide.history] == [round(h["validation"], 9) for h in columns.history]


def _classes(X, seed: int = 0, K: int = 4):
    rng = np.random.default_rng(seed)
    W = np.zeros((X.shape[1], K))
    W[:40] = rng.standard_normal((40, K)) * 3
    scores = np.asarray(X @ W) + rng.gumbel(size=(X.shape[0], K))
    return np.argmax(scores, axis=1)


@pytest.mark.parametrize("dense", [False, True])  # dense: standardized, the shift folded into the intercepts
def test_multinomial_in_row_space_is_the_columns_model(monkeypatch, dense):
    X, _ = _wide(n=150, d=1_000 if dense else 3_000, density=0.03, seed=5)
    y = _classes(X, seed=6)
    X = X.toarray() + 1.0 if dense else X  # dense columns with an offset: the standardization moves them
    assert RowSpace.of(X, [Lbfgs()], NUMPY, models=4) is not None
    options = dict(measure="gmean", algorithm="multinomial:tol=1e-10", epochs=300)
    wide = calopt.fit(X, y, **options)
    assert wide.coef.shape == (X.shape[1], 4)
    _columns_only(monkeypatch)
    columns = calopt.fit(X, y, **options)
    scale = np.abs(columns.coef).max()
    np.testing.assert_allclose(wide.coef, columns.coef, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(wide.intercept, columns.intercept, rtol=0, atol=1e-6 * max(1.0, scale))
    np.testing.assert_allclose(wide.decision_function(X), columns.decision_function(X), rtol=0, atol=1e-5)
    assert np.array_equal(wide.predict(X), columns.predict(X))


@pytest.mark.parametrize("rows", [3, 255, 600, 1031])
def test_the_gram_matrix_of_sparse_rows_in_blocks_is_the_dense_product(rows):
    """XX' of sparse rows, made in row blocks in threads, against the dense product (and the
    same numbers whatever the blocks)."""
    from calopt.training.rowspace import _gram

    X = sp.random(rows, 900, density=0.02, random_state=rows, format="csr")
    dense = X.toarray()
    got = _gram(X)
    np.testing.assert_allclose(got, dense @ dense.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got, (X @ X.T).toarray())

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
    # the trained intercepts agree; the thresholds need not: over the columns the refit model keeps the
    # raw out-of-fold threshold, in the rows' span the out-of-fold share without the rows' own terms
    np.testing.assert_allclose(wide.intercept + wide.threshold, columns.intercept + columns.threshold, atol=1e-7)
    assert wide.fit_report.selection["threshold_transfer"].startswith("out-of-fold positive share")
    assert columns.fit_report.selection["threshold_transfer"].startswith("out-of-fold threshold")
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


@pytest.mark.parametrize("rows", [3, 255, 600, 1031, 2100])
@pytest.mark.parametrize("shuffled", [False, True])
def test_the_gram_matrix_of_sparse_rows_in_blocks_is_the_dense_product(rows, shuffled):
    """XX' of sparse rows, made in row blocks in threads (those on and below the diagonal), against
    the dense product, and below the diagonal the same numbers as scipy's whole product, also
    where each row's entries are stored out of order (above it then the mirror image)."""
    from calopt.training.rowspace import _gram

    X = sp.random(rows, 900, density=0.02, random_state=rows, format="csr")
    if shuffled:  # each row's entries in a random order
        rng = np.random.default_rng(rows)
        order = np.concatenate([start + rng.permutation(stop - start) for start, stop in zip(X.indptr[:-1], X.indptr[1:])])
        X = sp.csr_matrix((X.data[order], X.indices[order], X.indptr), shape=X.shape)
        assert not X.has_sorted_indices
    dense = X.toarray()
    got = _gram(X)
    np.testing.assert_allclose(got, dense @ dense.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.tril(got), np.tril((X @ X.T).toarray()))
    np.testing.assert_array_equal(got, got.T)


@pytest.mark.parametrize("duplicates", [0, 12])
def test_own_terms_are_each_rows_term_in_its_score(duplicates):
    """Against a plain loop: with w = Σ_j a_j x_j (a from a least-squares fit of w on the pivot
    rows), row i's own term is its score less Σ_{j≠i} a_j⟨x_j, x_i⟩; 0 for a row off the pivots."""
    X, _ = _wide(n=60, d=900, density=0.05, seed=7, duplicates=duplicates)
    space = RowSpace.of(X, [Lbfgs()], NUMPY, models=18)
    assert space is not None
    u = np.random.default_rng(8).standard_normal(space.features.shape[1])
    w = space.weights(u)
    rows = X.toarray()
    pivots = space.pivots
    a = np.zeros(X.shape[0])
    a[pivots] = np.linalg.lstsq(rows[pivots].T, w, rcond=None)[0]
    np.testing.assert_allclose(rows.T @ a, w, rtol=1e-9, atol=1e-9)  # w is in the pivot rows' span
    scores = rows @ w
    expected = np.zeros(X.shape[0])
    for i in pivots:
        others = sum(a[j] * (rows[j] @ rows[i]) for j in range(X.shape[0]) if j != i)
        expected[i] = scores[i] - others
    got = space.own_terms(u)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9 * np.abs(scores).max())
    assert np.all(got[np.setdiff1d(np.arange(X.shape[0]), pivots)] == 0)


def _planted(n: int, d: int, seed: int, n_test: int = 4_000):
    """Binary sparse rows at 1% non-zero (the size benchmark's very wide set, smaller): 40 planted
    columns, each 1 in 20% of the rows; a tenth of the rows positive through logistic noise."""
    rng = np.random.default_rng(seed)
    planted = rng.choice(d, 40, replace=False)
    w = np.zeros(d)
    w[planted] = rng.standard_normal(40)

    def rows(count):
        noise = sp.random(count, d, density=0.01, format="csr", random_state=rng)
        active = sp.csr_matrix((rng.random((count, 40)) < 0.2).astype(float))
        signal = sp.csr_matrix((active.data, planted[active.indices], active.indptr), shape=(count, d))
        return ((noise + signal) > 0).astype(float).tocsr()

    X, X_test = rows(n), rows(n_test)
    score = X @ w
    cut = np.quantile(score + rng.logistic(size=n), 0.9)
    return X, (score + rng.logistic(size=n) > cut).astype(int), X_test, (X_test @ w + rng.logistic(size=n_test) > cut)


@pytest.mark.parametrize("seed", [1, 3, 5])
def test_wide_sparse_rows_keep_the_out_of_fold_share_on_new_rows(seed):
    """Sparse rows with fifty times more columns than rows, trained in their span: the refit model
    separates its training rows and its scores' level moves between passes, so the raw out-of-fold
    threshold puts about twice the out-of-fold share of new rows above it. Cut at that share on the
    training rows' scores without their own terms, new rows get about the share, and F1 gains."""
    X, y, X_test, y_test = _planted(400, 20_000, seed)
    model = calopt.fit(X, y, measure="f1")
    selection = model.fit_report.selection
    assert selection["threshold_transfer"].startswith("out-of-fold positive share")
    assert (selection["threshold_kept"], selection["threshold_reason"]) == ("out-of-fold positive share",
                                                                              "wide sparse rows")
    scores = model.decision_function(X_test)  # the threshold folded into the intercept
    raw = scores + model.threshold > selection["threshold"]
    share, new, raw_share = selection["positive_share"], np.mean(scores > 0), np.mean(raw)
    assert abs(new - share) < 0.06
    assert abs(new - share) < abs(raw_share - share)
    tp, predicted = np.sum((scores > 0) & y_test), np.sum(scores > 0)
    tp_raw, predicted_raw = np.sum(raw & y_test), np.sum(raw)
    assert 2 * tp / (predicted + y_test.sum()) > 2 * tp_raw / (predicted_raw + y_test.sum())
    # the cut is the share of the training rows' scores without their own terms (by a plain loop)
    rows = X.toarray() / model.scale
    coef = model.coef * model.scale  # the weights on the scaled rows
    a = np.linalg.lstsq(rows.T, coef, rcond=None)[0]  # w = X'a (the rows are independent here)
    np.testing.assert_allclose(rows.T @ a, coef, rtol=1e-8, atol=1e-10)
    own = a * np.einsum("ij,ij->i", rows, rows)
    trained = rows @ coef + model.intercept - own
    assert abs(np.mean(trained > 0) - share) <= 1.5 / X.shape[0]


def test_wide_dense_rows_keep_the_raw_threshold():
    X, y = _wide(n=200, d=3_000, density=1.0, seed=9)
    X = X.toarray()
    assert RowSpace.of(X, [Lbfgs()], NUMPY, models=18) is not None
    model = calopt.fit(X, y, measure="f1")
    assert model.fit_report.selection["threshold_transfer"].startswith("out-of-fold threshold")

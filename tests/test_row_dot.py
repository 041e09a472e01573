"""calopt.backends.row_dot, put_slot, put_slot_where and lbfgs_direction: the per-row inner products,
the memory ring and the two-loop recursion L-BFGS uses, against plain loops and the dense BFGS update;
and the stacked models' flat rows, column sums and finiteness it reads them with."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calopt.backends import (column_sums, finite_columns, get_backend, lbfgs_direction, put_slot, put_slot_where, row_dot,
                             stack_rows, transposed_product, unstack_rows)


def _loop(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    flat_a, flat_c = a.reshape(-1, a.shape[-1]), c.reshape(-1, c.shape[-1])
    return np.array([math.fsum(x * y for x, y in zip(ra, rc)) for ra, rc in zip(flat_a, flat_c)]).reshape(a.shape[:-1])


@pytest.mark.parametrize("shape", [(7,), (3, 11), (18, 2001), (2, 4, 5)])
@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
def test_row_dot_is_the_inner_product_of_each_row(shape, backend):
    if backend == "array-api-strict":
        pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(len(shape))
    a, c = rng.standard_normal(shape), rng.standard_normal(shape)
    chosen = get_backend(backend)
    got = np.asarray(row_dot(chosen.asarray(a), chosen.asarray(c), chosen.xp))
    assert got.shape == shape[:-1]
    np.testing.assert_allclose(got, _loop(a, c), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
@pytest.mark.parametrize("head", [0, 2, 4])
@pytest.mark.parametrize("pattern", [(True, True, True, True), (True, False, True, False), (False, False, False, True)])
def test_the_memory_ring_drops_the_oldest_pair_of_the_chosen_models(backend, head, pattern):
    """Read from the ring's start (``head``, then ``head`` + 1 after the update), a chosen model's
    pairs are its old ones without the oldest, then the new one; another model's are unchanged:
    a loop over slots and models on the pairs in order."""
    if backend == "array-api-strict":
        pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(3)
    slots, models, d = 5, len(pattern), 6
    memory, new = rng.standard_normal((slots, models, d)), rng.standard_normal((models, d))
    in_order = np.stack([memory[(head + i) % slots] for i in range(slots)])  # oldest first
    expected = in_order.copy()
    for j, chosen in enumerate(pattern):
        if chosen:
            for i in range(slots - 1):
                expected[i, j] = in_order[i + 1, j]
            expected[-1, j] = new[j]
    chosen = get_backend(backend)
    where = chosen.xp.asarray(np.array(pattern))
    ring = np.asarray(put_slot_where(chosen.asarray(memory.copy()), head, chosen.asarray(new), where, chosen.xp))
    got = np.stack([ring[(head + 1 + i) % slots] for i in range(slots)])
    np.testing.assert_array_equal(got, expected)
    if all(pattern):
        ring = np.asarray(put_slot(chosen.asarray(memory.copy()), head, chosen.asarray(new), chosen.xp))
        np.testing.assert_array_equal(np.stack([ring[(head + 1 + i) % slots] for i in range(slots)]), expected)


def _dense_bfgs_direction(g, pairs):
    """−H·g with H from the BFGS inverse update applied pair by pair, oldest first, to γI
    (γ = sᵀy/yᵀy of the newest pair; Nocedal & Wright eq. 6.17 and 7.20), as dense matrices."""
    if not pairs:
        return -g / max(np.linalg.norm(g), 1.0)
    s_new, y_new = pairs[-1]
    H = np.eye(g.size) * (s_new @ y_new) / (y_new @ y_new)
    for s_i, y_i in pairs:
        rho = 1.0 / (y_i @ s_i)
        left = np.eye(g.size) - rho * np.outer(s_i, y_i)
        H = left @ H @ left.T + rho * np.outer(s_i, s_i)
    return -H @ g


@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
@pytest.mark.parametrize("head, pairs", [(0, 0), (0, 3), (2, 5), (3, 5)])
def test_the_two_loop_recursion_is_the_dense_bfgs_update(backend, head, pairs):
    """Stacked models with their own pairs in a ring of 5 slots (``pairs`` of them filled, the
    oldest at ``head``; one model with no pair at all): each model's direction against the
    BFGS inverse-Hessian update built as a dense matrix."""
    if backend == "array-api-strict":
        pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(pairs + head)
    slots, models, p = 5, 3, 6
    s, y, rho = np.zeros((slots, models, p)), np.zeros((slots, models, p)), np.zeros((slots, models))
    g = rng.standard_normal((models, p))
    kept = {j: [] for j in range(models)}
    for t in range(pairs):
        slot = (head - pairs + t) % slots  # the newest pair just before the ring's start
        for j in range(models - 1):  # the last model has no pair
            A = rng.standard_normal((p, p))
            s_t = rng.standard_normal(p)
            y_t = (A @ A.T + np.eye(p)) @ s_t  # a positive definite curvature: yᵀs > 0
            s[slot, j], y[slot, j], rho[slot, j] = s_t, y_t, 1 / (y_t @ s_t)
            kept[j].append((s_t, y_t))
    order = [(head - pairs + t) % slots for t in range(pairs)]
    chosen = get_backend(backend)
    got = np.asarray(lbfgs_direction(chosen.asarray(g), chosen.asarray(s), chosen.asarray(y), chosen.asarray(rho),
                                     order, (head - 1) % slots, chosen.xp))
    for j in range(models):
        np.testing.assert_allclose(got[j], _dense_bfgs_direction(g[j], kept[j]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("head, pairs", [(0, 0), (2, 5), (3, 2)])
def test_one_models_direction_is_the_dense_update_and_the_stacked_path_to_the_bit(dtype, head, pairs):
    """One model (a 1-D ``g``: NumPy's scalar path) against the dense BFGS update, and bitwise
    equal to the same model as a stack of one (the array path), in its own dtype."""
    rng = np.random.default_rng(10 * pairs + head)
    slots, p = 5, 7
    s, y, rho = np.zeros((slots, p)), np.zeros((slots, p)), np.zeros(slots)
    kept = []
    for t in range(pairs):
        slot = (head - pairs + t) % slots
        A = rng.standard_normal((p, p))
        s_t = rng.standard_normal(p)
        y_t = (A @ A.T + np.eye(p)) @ s_t
        s[slot], y[slot], rho[slot] = s_t, y_t, 1 / (y_t @ s_t)
        kept.append((s_t, y_t))
    g = rng.standard_normal(p)
    order, newest = [(head - pairs + t) % slots for t in range(pairs)], (head - 1) % slots
    g, s, y, rho = (a.astype(dtype) for a in (g, s, y, rho))
    one = lbfgs_direction(g, s, y, rho, order, newest, np)
    stacked = lbfgs_direction(g[None], s[:, None], y[:, None], rho[:, None], order, newest, np)[0]
    assert one.dtype == dtype and one.shape == (p,)
    np.testing.assert_array_equal(one, stacked)
    tolerance = 1e-9 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(one, _dense_bfgs_direction(g.astype(np.float64), kept), rtol=tolerance,
                               atol=tolerance * 1e-3)


def _functional_two_loop(g, s, y, rho, order, newest):
    """The two-loop recursion written plainly, each update a new array (as the array API path
    computes it), inner products by ``einsum`` over the last axis."""
    dot = lambda a, c: np.einsum("...i,...i->...", a, c)  # noqa: E731
    q, alphas = g, []
    for i in reversed(order):
        alpha = rho[i] * dot(s[i], q)
        q = q - alpha[:, None] * y[i]
        alphas.append(alpha)
    yy = dot(y[newest], y[newest])
    one = np.ones_like(yy)
    gamma = np.where(rho[newest] > 0, (1 / np.where(rho[newest] > 0, rho[newest], one)) / np.where(yy > 0, yy, one),
                     1 / np.maximum(np.sqrt(dot(g, g)), one))
    r = gamma[:, None] * q
    for i, alpha in zip(order, reversed(alphas)):
        r = r + s[i] * (alpha - rho[i] * dot(y[i], r))[:, None]
    return -r


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "transposed"])
@pytest.mark.parametrize("head, pairs", [(0, 0), (2, 5), (3, 2)])
def test_stacked_numpy_direction_updates_in_place_to_the_same_bits(dtype, layout, head, pairs):
    """Stacked models on NumPy (their vector updates in place, in two buffers) against the plain
    recursion, to the bit: ``einsum``'s sums depend on the operands' memory layout, so a ``g``
    that is a transposed view (L-BFGS's flat parameters of a dense stack) must be read as it is;
    empty slots (ρ = 0) and no pair at all included. The caller's ``g`` is left as it was."""
    rng = np.random.default_rng(100 * pairs + head)
    slots, models, p = 5, 4, 203
    s, y, rho = np.zeros((slots, models, p)), np.zeros((slots, models, p)), np.zeros((slots, models))
    for t in range(pairs):
        slot = (head - pairs + t) % slots
        s[slot] = rng.standard_normal((models, p))
        y[slot] = s[slot] * rng.uniform(0.5, 2.0, p) + 0.1 * rng.standard_normal((models, p))
        rho[slot] = 1 / np.einsum("mp,mp->m", s[slot], y[slot])
    rho[:, -1] = 0  # the last model has no pair
    g = rng.standard_normal((models, p)) if layout == "C" else np.asfortranarray(rng.standard_normal((models, p)))
    s, y, rho, g = s.astype(dtype), y.astype(dtype), rho.astype(dtype), g.astype(dtype, order="K")
    before = g.copy()
    order, newest = [(head - pairs + t) % slots for t in range(pairs)], (head - 1) % slots
    got = lbfgs_direction(g, s, y, rho, order, newest, np)
    expected = _functional_two_loop(g, s, y, rho, order, newest)
    assert got.dtype == expected.dtype == dtype
    assert got.tobytes() == expected.tobytes()
    np.testing.assert_array_equal(g, before)


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 3, 2), (300, 40, 6), (50, 900, 18)])
@pytest.mark.parametrize("kind", ["dense", "float32", "sparse", "vector", "strict"])
def test_the_transposed_product_is_x_transposed_times_the_coefficients(shape, kind):
    """X.T @ coef, against a plain loop over the rows in float64, for every kind of operand (the
    dense NumPy one computed as (coef.T @ X).T)."""
    import array_api_strict
    import scipy.sparse as sp

    n, d, m = shape
    rng = np.random.default_rng(n + d + m)
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.3)
    coef = rng.standard_normal((n, m))
    expected = np.zeros((d, m))
    for i in range(n):
        expected += np.outer(X[i], coef[i])
    if kind == "vector":
        coef, expected = coef[:, 0], expected[:, 0]
    tolerance = 1e-12
    if kind == "float32":
        X, coef, tolerance = X.astype(np.float32), coef.astype(np.float32), 1e-4
    elif kind == "sparse":
        X = sp.csr_matrix(X)
    elif kind == "strict":
        X, coef = array_api_strict.asarray(X), array_api_strict.asarray(coef)
    got = transposed_product(X, coef)
    assert got.shape == expected.shape
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), expected, rtol=tolerance, atol=tolerance * max(n, 1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (2100, 6), (20_000, 18), (0, 4)])
def test_column_sums_are_numpys_sums_over_the_rows_to_the_bit(dtype, shape):
    """C-ordered 2-D NumPy arrays through einsum: NumPy's own ``sum(axis=0)`` bit for bit (both add
    row after row), and within rounding of an exact sum; other layouts and namespaces as ``xp.sum``."""
    rng = np.random.default_rng(shape[0] + shape[1])
    a = (rng.standard_normal(shape) * rng.uniform(0.1, 1e3, shape[1])).astype(dtype)
    got = column_sums(a, np)
    assert got.dtype == dtype
    assert got.tobytes() == np.sum(a, axis=0).tobytes()
    exact = np.array([math.fsum(column) for column in a.astype(np.float64).T]).reshape(shape[1])
    np.testing.assert_allclose(got, exact, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-2)
    fortran = np.asfortranarray(a)
    assert column_sums(fortran, np).tobytes() == np.sum(fortran, axis=0).tobytes()
    strict = get_backend("array-api-strict")
    np.testing.assert_allclose(np.asarray(column_sums(strict.asarray(a), strict.xp), dtype=np.float64), exact,
                               rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-2)


@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
def test_finite_columns_flag_each_column_with_an_inf_or_a_nan(backend):
    """Against a loop over the columns: inf, -inf and NaN anywhere in a column make it False."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4_197, 6))
    w[0, 1], w[4_196, 2], w[2_000, 4] = np.inf, -np.inf, np.nan
    chosen = get_backend(backend)
    got = np.asarray(finite_columns(chosen.asarray(w), chosen.xp))
    assert got.tolist() == [all(math.isfinite(v) for v in w[:, j]) for j in range(6)] == [
        True, False, False, True, False, True]


@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
@pytest.mark.parametrize("layout", ["C", "transposed"])
def test_stacked_rows_hold_each_models_weights_then_its_intercept(backend, layout):
    """(w (d, M), b (M,)) as rows (w[:, m], b[m]), against a loop; on NumPy C-ordered whatever w's
    layout (a transposed view, as L-BFGS's gradient sums of dense rows are), and back: w C-ordered
    (what a sparse product reads), the same numbers."""
    rng = np.random.default_rng(1)
    d, M = 13, 4
    w = rng.standard_normal((d, M)) if layout == "C" else rng.standard_normal((M, d)).T
    b = rng.standard_normal(M)
    chosen = get_backend(backend)
    z = stack_rows(chosen.asarray(w), chosen.asarray(b), chosen.xp)
    expected = np.stack([np.append(w[:, m], b[m]) for m in range(M)])
    np.testing.assert_array_equal(np.asarray(z), expected)
    w_back, b_back = unstack_rows(z, chosen.xp)
    np.testing.assert_array_equal(np.asarray(w_back), w)
    np.testing.assert_array_equal(np.asarray(b_back), b)
    if backend == "numpy":
        assert z.flags.c_contiguous and w_back.flags.c_contiguous

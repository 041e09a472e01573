"""The built-in performance measures against scikit-learn, imbalanced-learn, plain formulas
and brute-force geometry (spec, "Performance measures"; paper 002, Tables 1 and 2).

No expected value here comes from calopt: counts come from scikit-learn's
``confusion_matrix``, scores from scikit-learn and imbalanced-learn, dual minima and
projections from dense searches over each dual region's boundary.
"""

from __future__ import annotations

import math
import warnings

import array_api_compat
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn.metrics import confusion_matrix, f1_score, fbeta_score, jaccard_score

import calopt
from calopt.errors import DataError, ParameterError, UnknownNameError

geometric_mean_score = pytest.importorskip("imblearn.metrics").geometric_mean_score

NP = calopt.get_backend("numpy").xp
CONCAVE = ["min", "hmean", "qmean", "gmean"]
PSEUDO_LINEAR = ["fbeta", "jaccard", "gower-legendre"]
ALL = CONCAVE + PSEUDO_LINEAR
#: Measures with their parameters, as specs.
CONFIGURED = [*ALL, "f1", "fbeta:beta=0.5", "fbeta:beta=2.5", "gower-legendre:sigma=2"]


# --- labelings and reference scores -------------------------------------------------


def _as_labels(pairs):
    return np.array([t for t, _ in pairs]), np.array([p for _, p in pairs])


def _labels(true, pred):
    return np.array(true), np.array(pred)


labelings = st.lists(
    st.tuples(st.sampled_from([-1, 1]), st.sampled_from([-1, 1])), min_size=1, max_size=60
).map(_as_labels)

EDGE_CASES = [
    _labels([1, -1, 1, -1, -1], [-1, -1, -1, -1, -1]),  # all-negative predictions
    _labels([1, 1, -1, -1], [-1, -1, 1, 1]),  # no true positives, all wrong
    _labels([1, -1, -1, 1, -1], [1, 1, 1, 1, 1]),  # all-positive predictions
    _labels([1, 1, 1], [1, 1, 1]),  # positives only, perfect
    _labels([1, 1, 1], [1, -1, 1]),  # positives only
    _labels([-1, -1, -1, -1], [-1, -1, -1, -1]),  # negatives only, perfect
    _labels([-1, -1, -1, -1], [-1, 1, -1, -1]),  # negatives only
    _labels([-1], [1]),
]


def with_edge_cases(test):
    for case in EDGE_CASES:
        test = example(case)(test)
    return test


def counts_of(y_true, y_pred):
    """(TP, FP, TN, FN) as Python ints, from scikit-learn."""
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[-1, 1]).ravel()
    return int(tp), int(fp), int(tn), int(fn)


def _ratio(numerator, denominator):
    return numerator / denominator if denominator else 0.0


def plain_formula(name, params, tp, fp, tn, fn):
    """min, hmean, qmean, gower-legendre in plain Python (0/0 taken as 0).

    A class that appears neither in the labels nor in the predictions is left out as
    imbalanced-learn's geometric mean does: its rate counts as 1, so predicting a
    one-class sample perfectly scores 1, as with ``geometric_mean_score``.
    """
    tpr, tnr = _ratio(tp, tp + fn), _ratio(tn, tn + fp)
    if tp + fn + fp == 0 and tn > 0:
        tpr = 1.0
    if tn + fp + fn == 0 and tp > 0:
        tnr = 1.0
    if name == "min":
        return min(tpr, tnr)
    if name == "hmean":
        return _ratio(2 * tpr * tnr, tpr + tnr)
    if name == "qmean":
        return 1 - math.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2)
    if name == "gower-legendre":
        return _ratio(tp + tn, tp + tn + params.get("sigma", 0.5) * (fp + fn))
    raise AssertionError(name)


def reference_score(spec, y_true, y_pred):
    measure = calopt.get_measure(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if measure.name == "fbeta":
            if measure.beta == 1:
                return f1_score(y_true, y_pred, zero_division=0)
            return fbeta_score(y_true, y_pred, beta=measure.beta, zero_division=0)
        if measure.name == "jaccard":
            return jaccard_score(y_true, y_pred, zero_division=0)
        if measure.name == "gmean":
            return geometric_mean_score(y_true, y_pred)
    return plain_formula(measure.name, measure.params, *counts_of(y_true, y_pred))


def from_counts(measure, counts, dtype="float64"):
    arrays = [NP.asarray(c, dtype=getattr(NP, dtype)) for c in counts]
    return float(measure.from_counts(*arrays, xp=NP))


# --- values from counts and rates ---------------------------------------------------


@pytest.mark.parametrize("spec", CONFIGURED)
@settings(max_examples=60, deadline=None)
@given(labeling=labelings)
@with_edge_cases
def test_from_counts_matches_reference(spec, labeling):
    y_true, y_pred = labeling
    measure = calopt.get_measure(spec)
    expected = reference_score(spec, y_true, y_pred)
    assert from_counts(measure, counts_of(y_true, y_pred)) == pytest.approx(expected, abs=1e-12)
    assert measure.score(y_true, y_pred) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("spec", CONFIGURED)
def test_from_counts_matches_reference_on_large_skewed_samples(spec):
    rng = np.random.default_rng(7)
    measure = calopt.get_measure(spec)
    for size in (2, 17, 300, 5000):
        for positive_rate in (0.01, 0.2, 0.5, 0.95):
            y_true = np.where(rng.random(size) < positive_rate, 1, -1)
            flip = rng.random(size) < rng.uniform(0, 0.6)
            y_pred = np.where(flip, -y_true, y_true)
            expected = reference_score(spec, y_true, y_pred)
            got = from_counts(measure, counts_of(y_true, y_pred))
            assert got == pytest.approx(expected, abs=1e-12)


def test_concave_measures_zero_division_follows_imbalanced_learn():
    """A class missing from labels and predictions is left out (rate 1); a class only
    predicted has recall 0/0 = 0; an empty sample scores 0."""
    gmean = calopt.get_measure("gmean")
    assert from_counts(gmean, (3, 0, 0, 0)) == 1.0  # positives only, all right
    assert from_counts(gmean, (0, 0, 4, 0)) == 1.0  # negatives only, all right
    assert from_counts(gmean, (2, 0, 0, 1)) == 0.0  # positives only, one predicted negative
    assert from_counts(gmean, (0, 1, 3, 0)) == 0.0
    assert from_counts(gmean, (0, 0, 0, 0)) == 0.0
    # the other concave measures of the two rates follow the same rule
    for name in ("min", "hmean", "qmean"):
        measure = calopt.get_measure(name)
        assert from_counts(measure, (3, 0, 0, 0)) == 1.0
        assert from_counts(measure, (0, 0, 4, 0)) == 1.0
        assert from_counts(measure, (0, 0, 0, 0)) == 0.0
    # negatives predicted but none in the labels: TNR = 0/0 = 0, as for gmean above
    assert from_counts(calopt.get_measure("qmean"), (2, 0, 0, 1)) == pytest.approx(
        1 - math.sqrt(((1 / 3) ** 2 + 1) / 2))


@pytest.mark.parametrize("spec", CONFIGURED)
@settings(max_examples=60, deadline=None)
@given(labeling=labelings)
@with_edge_cases
def test_from_rates_matches_from_counts(spec, labeling):
    y_true, y_pred = labeling
    tp, fp, tn, fn = counts_of(y_true, y_pred)
    if tp + fn == 0 or tn + fp == 0:
        return  # the rates need both classes
    measure = calopt.get_measure(spec)
    p = (tp + fn) / len(y_true)
    tpr, tnr = NP.asarray(tp / (tp + fn)), NP.asarray(tn / (tn + fp))
    expected = reference_score(spec, y_true, y_pred)
    assert float(measure.from_rates(tpr, tnr, p, xp=NP)) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("spec", [s for s in CONFIGURED if s not in CONCAVE])
def test_coefficients_are_python_floats_and_need_a_valid_positive_rate(spec):
    measure = calopt.get_measure(spec)
    coefficients = measure.coefficients(0.3)
    assert [type(c) for part in coefficients for c in part] == [float] * 6
    for p in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(DataError, match="positive rate"):
            measure.coefficients(p)


def test_fbeta_coefficients_reduce_to_the_papers_f1_weights():
    """F1 with θ = 1 (p = 1/2): a = (0, 2, 0), b = (2, 1, -1) (spec, AMP and STAMP)."""
    assert calopt.get_measure("f1").coefficients(0.5) == ((0.0, 2.0, 0.0), (2.0, 1.0, -1.0))


# --- the concave measures: duality, conjugate gradients -----------------------------


def _segment(lo, hi):
    return lambda t: (lo[0] + t * (hi[0] - lo[0]), lo[1] + t * (hi[1] - lo[1])), (
        lambda t: (np.full_like(t, hi[0] - lo[0]), np.full_like(t, hi[1] - lo[1]))
    )


RADIUS_Q = math.sqrt(0.5)
#: Each dual region's boundary as curves (point(t), derivative(t), t-interval).
BOUNDARIES = {
    "min": [(*_segment((0.0, 1.0), (1.0, 0.0)), (0.0, 1.0))],
    "hmean": [
        (lambda t: (2 * (1 - t) ** 2, 2 * t**2), lambda t: (-4 * (1 - t), 4 * t), (0.0, 1.0)),
        (
            lambda t: (2 * np.cos(t), 2 * np.sin(t)),
            lambda t: (-2 * np.sin(t), 2 * np.cos(t)),
            (0.0, math.pi / 2),
        ),
    ],
    "qmean": [
        (
            lambda t: (RADIUS_Q * np.cos(t), RADIUS_Q * np.sin(t)),
            lambda t: (-RADIUS_Q * np.sin(t), RADIUS_Q * np.cos(t)),
            (0.0, math.pi / 2),
        ),
        (*_segment((0.0, 0.0), (RADIUS_Q, 0.0)), (0.0, 1.0)),
        (*_segment((0.0, 0.0), (0.0, RADIUS_Q)), (0.0, 1.0)),
    ],
    "gmean": [
        (
            lambda t: (np.exp(t) / 2, np.exp(-t) / 2),
            lambda t: (np.exp(t) / 2, -np.exp(-t) / 2),
            (-25.0, 25.0),
        )
    ],
}


def in_region(name, a, b, tol=0.0):
    """Membership of the dual regions as the spec writes them."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    quadrant = (a >= -tol) & (b >= -tol)
    if name == "min":
        return quadrant & (np.abs(a + b - 1) <= tol)
    if name == "hmean":
        roots = np.sqrt(np.maximum(a, 0)) + np.sqrt(np.maximum(b, 0))
        return quadrant & (roots >= math.sqrt(2) - tol) & (a**2 + b**2 <= 4 + tol)
    if name == "qmean":
        return quadrant & (a**2 + b**2 <= 0.5 + tol)
    if name == "gmean":
        return (a >= 0) & (b >= 0) & (a * b >= 0.25 - tol)
    raise AssertionError(name)


def dense_boundary(name, points=20001):
    """Points of the boundary of the dual region of ``name`` (for minimising over it)."""
    # G-mean: with P, N ≥ 0.05 the minimiser has |log(2α)| ≤ log(20)/2, well inside ±6
    pieces = [
        curve(np.linspace(*((-6.0, 6.0) if name == "gmean" else interval), points))
        for curve, _, interval in BOUNDARIES[name]
    ]
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


@pytest.mark.parametrize("name", CONCAVE)
def test_psi_is_the_minimum_over_the_dual_region(name):
    """Ψ(P, N) = min over A_Ψ of αP + βN − Ψ*(α, β) (paper 002, §4): a linear (Q-mean:
    affine) objective over a convex region is least on its boundary."""
    measure = calopt.get_measure(name)
    rng = np.random.default_rng(1)
    low = 0.05 if name == "gmean" else 0.0  # G-mean: unbounded region, keep P, N > 0
    rates = rng.uniform(low, 1.0, size=(40, 2))
    rates = np.concatenate([rates, [[1.0, 1.0], [low, 1.0], [1.0, low], [0.5, 0.5]]])
    alpha, beta = dense_boundary(name)
    conjugate = measure.conjugate(NP.asarray(alpha), NP.asarray(beta), xp=NP)
    for tpr, tnr in rates:
        dual_minimum = np.min(alpha * tpr + beta * tnr - conjugate)
        psi = float(measure.psi(NP.asarray(tpr), NP.asarray(tnr), xp=NP))
        assert psi == pytest.approx(dual_minimum, abs=2e-7)


@pytest.mark.parametrize("name", CONCAVE)
def test_dual_start_is_in_the_region(name):
    measure = calopt.get_measure(name)
    assert in_region(name, *measure.dual_start, tol=1e-15)
    assert measure.lipschitz == (name != "gmean")


def _interior_points(name, rng, size=200):
    """Points strictly inside each 2-D dual region (for finite differences)."""
    a, b = rng.uniform(0, 3, size=(2, 20 * size))
    if name == "hmean":
        keep = (np.sqrt(a) + np.sqrt(b) > math.sqrt(2) + 1e-3) & (a**2 + b**2 < 4 - 1e-3)
    elif name == "qmean":
        a, b = a / 3, b / 3
        keep = (a > 1e-3) & (b > 1e-3) & (a**2 + b**2 < 0.5 - 1e-3)
    else:
        keep = a * b > 0.25 + 1e-3
    return a[keep][:size], b[keep][:size]


@pytest.mark.parametrize("name", CONCAVE)
def test_conjugate_grad_matches_finite_differences(name):
    measure = calopt.get_measure(name)
    rng = np.random.default_rng(2)
    h = 1e-6

    def conjugate(a, b):
        return measure.conjugate(NP.asarray(a), NP.asarray(b), xp=NP)

    if name == "min":
        # the region is a segment: only the derivative along it is defined
        t = rng.uniform(0.01, 0.99, 100)
        a, b = t, 1 - t
        along = (conjugate(a + h, b - h) - conjugate(a - h, b + h)) / (2 * h)
        grad_a, grad_b = measure.conjugate_grad(NP.asarray(a), NP.asarray(b), xp=NP)
        np.testing.assert_allclose(grad_a - grad_b, along, atol=1e-8)
        return
    a, b = _interior_points(name, rng)
    assert a.size > 50
    grad_a, grad_b = measure.conjugate_grad(NP.asarray(a), NP.asarray(b), xp=NP)
    d_alpha = (conjugate(a + h, b) - conjugate(a - h, b)) / (2 * h)
    d_beta = (conjugate(a, b + h) - conjugate(a, b - h)) / (2 * h)
    np.testing.assert_allclose(grad_a, d_alpha, atol=1e-8)
    np.testing.assert_allclose(grad_b, d_beta, atol=1e-8)


def test_conjugate_values_follow_table_1():
    """Ψ* is 0 on the regions of min, hmean and gmean and α + β − 1 on Q-mean's."""
    a, b = NP.asarray([0.2, 0.5, 0.0]), NP.asarray([0.3, 0.1, 0.7])
    for name in ("min", "hmean", "gmean"):
        np.testing.assert_array_equal(calopt.get_measure(name).conjugate(a, b, xp=NP), 0.0)
    np.testing.assert_allclose(
        calopt.get_measure("qmean").conjugate(a, b, xp=NP), [-0.5, -0.4, -0.3], atol=1e-15
    )


# --- projections onto the dual regions ----------------------------------------------


def _nearest_on_curve(curve, derivative, interval, z, grid=4001, chunk=256):
    """The nearest point of a curve to each row of ``z``: a dense search, then bisection
    on the sign of (c(t) − z)·c'(t) between the neighbours of the best grid point."""
    ts = np.linspace(*interval, grid)
    cx, cy = curve(ts)
    best = np.empty(len(z), dtype=int)
    for start in range(0, len(z), chunk):
        part = z[start : start + chunk]
        # |c − z|² − |z|², which keeps its precision for far-away z
        excess = cx**2 + cy**2 - 2 * (cx[None, :] * part[:, :1] + cy[None, :] * part[:, 1:])
        best[start : start + chunk] = np.argmin(excess, axis=1)
    lo, hi = ts[np.maximum(best - 1, 0)], ts[np.minimum(best + 1, grid - 1)]
    for _ in range(100):
        mid = (lo + hi) / 2
        px, py = curve(mid)
        dx, dy = derivative(mid)
        increasing = (px - z[:, 0]) * dx + (py - z[:, 1]) * dy > 0
        lo, hi = np.where(increasing, lo, mid), np.where(increasing, mid, hi)
    t = (lo + hi) / 2
    point = np.stack(curve(t), axis=1)
    excess = point[:, 0] * (point[:, 0] - 2 * z[:, 0]) + point[:, 1] * (point[:, 1] - 2 * z[:, 1])
    span = interval[1] - interval[0]
    interior = (t > interval[0] + 1e-12 * span) & (t < interval[1] - 1e-12 * span)
    return point, excess, interior


def brute_force_projection(name, z):
    """The point itself when inside, else the nearest point of the region's boundary,
    compared by |c − z|² − |z|² (precise for far-away z). Where two pieces are equally
    near to rounding, the stationary point inside a piece beats another's end point."""
    best, best_excess = np.array(z, dtype=float), np.full(len(z), np.inf)
    best_interior = np.zeros(len(z), dtype=bool)
    tie = 1e-14 * (1 + np.abs(z).max(axis=1)) ** 2
    for curve, derivative, interval in BOUNDARIES[name]:
        point, excess, interior = _nearest_on_curve(curve, derivative, interval, z)
        better = (excess < best_excess - tie) | (
            (excess <= best_excess + tie) & interior & ~best_interior
        )
        best[better], best_excess[better] = point[better], excess[better]
        best_interior[better] = interior[better]
    inside = in_region(name, z[:, 0], z[:, 1])
    best[inside] = z[inside]
    return best


def closed_form_projection(name, z):
    a, b = z[:, 0], z[:, 1]
    if name == "min":  # onto the line α + β = 1, then the segment
        alpha = np.clip(a - (a + b - 1) / 2, 0, 1)
        return np.stack([alpha, 1 - alpha], axis=1)
    if name == "qmean":  # onto the quadrant, then the disc
        clipped = np.maximum(z, 0)
        norm = np.linalg.norm(clipped, axis=1, keepdims=True)
        return np.where(norm > RADIUS_Q, clipped * RADIUS_Q / np.where(norm > 0, norm, 1), clipped)
    raise AssertionError(name)


def project(name, z, dtype="float64"):
    measure = calopt.get_measure(name)
    alpha = NP.asarray(z[:, 0], dtype=getattr(NP, dtype))
    beta = NP.asarray(z[:, 1], dtype=getattr(NP, dtype))
    out = measure.project(alpha, beta, xp=NP)
    return np.stack([np.asarray(out[0], dtype=float), np.asarray(out[1], dtype=float)], axis=1)


def _sample_points():
    """Near, far, negative, on the axes, at the origin and corners, on the boundary."""
    rng = np.random.default_rng(3)
    axis = rng.uniform(-5, 5, 60)
    # fmt: off
    special = [
        [0, 0], [2, 0], [0, 2], [0.5, 0.5], [1, 1], [-1, -1], [3, 3], [-3, 0.2],
        [0.2, -3], [1e6, -1e6], [-1e6, -1e6], [1e6, 1e6], [1e5, 0], [0, -1e5],
        [1e-9, 1e-9], [0.25, 1.0], [5, 1e-3], [-1, 5], [5, -1], [1.5, 1.5],
    ]
    # fmt: on
    parts = [
        special,
        rng.uniform(-1, 3, size=(400, 2)),
        rng.normal(scale=10, size=(150, 2)),
        rng.normal(scale=1e3, size=(100, 2)),
        -rng.uniform(0, 10, size=(60, 2)),
        np.stack([axis, np.zeros_like(axis)], axis=1),
        np.stack([np.zeros_like(axis), axis], axis=1),
        rng.uniform(0, 1, size=(100, 2)) * 10.0 ** rng.integers(-4, 5, size=(100, 1)),
    ]
    return np.concatenate([np.asarray(p, dtype=float) for p in parts])


POINTS = _sample_points()


def _boundary_points(name, count=200):
    rng = np.random.default_rng(4)
    out = []
    for curve, _, interval in BOUNDARIES[name]:
        if name == "gmean":
            interval = (-4, 4)
        x, y = curve(rng.uniform(*interval, count))
        out.append(np.stack([x, y], axis=1))
    return np.concatenate(out)


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 1e-6)])
@pytest.mark.parametrize("name", CONCAVE)
def test_projection_equals_brute_force(name, dtype, tol):
    z = np.concatenate([POINTS, _boundary_points(name)])
    if dtype == "float32":
        z = z.astype(np.float32).astype(float)  # the points float32 can hold
    got = project(name, z, dtype)
    expected = brute_force_projection(name, z)
    scale = 1 + np.abs(z).max(axis=1, keepdims=True)
    np.testing.assert_allclose(got, expected, rtol=0, atol=tol * scale.max())
    assert np.all(np.abs(got - expected) <= tol * scale)


@pytest.mark.parametrize("name", ["min", "qmean"])
def test_projection_equals_closed_form(name):
    z = np.concatenate([POINTS, _boundary_points(name)])
    expected = closed_form_projection(name, z)
    np.testing.assert_allclose(project(name, z), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", CONCAVE)
def test_projection_lands_in_region_and_is_idempotent(name, dtype):
    z = POINTS
    eps = 1e-12 if dtype == "float64" else 1e-5
    once = project(name, z, dtype)
    assert np.all(in_region(name, once[:, 0], once[:, 1], tol=eps * (1 + np.abs(once).max(1))))
    twice = project(name, once, dtype)
    np.testing.assert_allclose(twice, once, rtol=eps, atol=eps)


@pytest.mark.parametrize("name", ["hmean", "qmean", "gmean"])
def test_projection_leaves_interior_points_unchanged(name):
    a, b = _interior_points(name, np.random.default_rng(5), size=300)
    z = np.stack([a, b], axis=1)
    np.testing.assert_array_equal(project(name, z), z)


def test_min_projection_keeps_points_of_the_segment():
    t = np.random.default_rng(6).uniform(0, 1, 300)
    z = np.stack([t, 1 - t], axis=1)
    np.testing.assert_allclose(project("min", z), z, rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", CONCAVE)
@settings(max_examples=80, deadline=None)
@given(
    point=st.tuples(
        st.floats(-1e4, 1e4, allow_subnormal=False), st.floats(-1e4, 1e4, allow_subnormal=False)
    )
)
def test_projection_of_any_point_equals_brute_force(name, point):
    z = np.asarray([point], dtype=float)
    expected = brute_force_projection(name, z)
    tol = 1e-9 * (1 + np.abs(z).max())
    np.testing.assert_allclose(project(name, z), expected, rtol=0, atol=tol)


@pytest.mark.parametrize("name", CONCAVE)
def test_projection_is_elementwise_on_any_shape(name):
    measure = calopt.get_measure(name)
    z = POINTS[:24]
    flat = project(name, z)
    alpha = NP.reshape(NP.asarray(z[:, 0]), (2, 3, 4))
    beta = NP.reshape(NP.asarray(z[:, 1]), (2, 3, 4))
    out_a, out_b = measure.project(alpha, beta, xp=NP)
    assert out_a.shape == out_b.shape == (2, 3, 4)
    np.testing.assert_array_equal(np.reshape(out_a, -1), flat[:, 0])
    np.testing.assert_array_equal(np.reshape(out_b, -1), flat[:, 1])
    scalar_a, scalar_b = measure.project(NP.asarray(z[3, 0]), NP.asarray(z[3, 1]), xp=NP)
    assert np.shape(scalar_a) == np.shape(scalar_b) == ()
    assert (float(scalar_a), float(scalar_b)) == (flat[3, 0], flat[3, 1])


# --- every backend, float64 and float32 ----------------------------------------------

COUNTS = {  # (TP, FP, TN, FN), zero divisions included
    (5,): ([3, 0, 0, 5, 0], [1, 0, 4, 0, 0], [6, 7, 0, 0, 0], [2, 0, 3, 0, 0]),
    (): (3, 1, 6, 2),
}
RATES = {(5,): ([0.8, 0.0, 1.0, 0.3, 0.0], [0.6, 1.0, 0.0, 0.3, 0.0]), (): (0.75, 0.4)}
DUALS = {(5,): ([0.3, -1.0, 2.5, 0.0, 40.0], [0.9, -2.0, 0.1, 0.0, -3.0]), (): (-0.4, 1.7)}


def _check_like(backend, out, dtype, shape, expected):
    xp = backend.xp
    assert array_api_compat.array_namespace(out) is array_api_compat.array_namespace(
        xp.asarray(0.0)
    )
    assert out.dtype == dtype
    assert tuple(out.shape) == shape
    tol = 1e-12 if dtype == xp.float64 else 2e-5
    np.testing.assert_allclose(backend.to_numpy(out), np.asarray(expected), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(), (5,)], ids=["0d", "1d"])
@pytest.mark.parametrize("spec", CONFIGURED)
def test_every_backend_and_dtype(spec, shape, backend, float_dtype):
    measure = calopt.get_measure(spec)
    xp = backend.xp
    dtype = getattr(xp, float_dtype)

    def inputs(values):
        return [backend.asarray(v, dtype=dtype) for v in values]

    def reference(values):
        return [NP.asarray(v, dtype=NP.float64) for v in values]

    _check_like(
        backend,
        measure.from_counts(*inputs(COUNTS[shape]), xp=xp),
        dtype,
        shape,
        measure.from_counts(*reference(COUNTS[shape]), xp=NP),
    )
    _check_like(
        backend,
        measure.from_rates(*inputs(RATES[shape]), 0.3, xp=xp),
        dtype,
        shape,
        measure.from_rates(*reference(RATES[shape]), 0.3, xp=NP),
    )
    if measure.family != "concave":
        return
    _check_like(
        backend,
        measure.psi(*inputs(RATES[shape]), xp=xp),
        dtype,
        shape,
        measure.psi(*reference(RATES[shape]), xp=NP),
    )
    region_point = inputs([np.full(shape, v) for v in measure.dual_start])
    _check_like(
        backend,
        measure.conjugate(*region_point, xp=xp),
        dtype,
        shape,
        measure.conjugate(*reference([np.full(shape, v) for v in measure.dual_start]), xp=NP),
    )
    for got, expected in zip(
        measure.conjugate_grad(*region_point, xp=xp),
        measure.conjugate_grad(*reference([np.full(shape, v) for v in measure.dual_start]), xp=NP),
    ):
        _check_like(backend, got, dtype, shape, expected)
    for got, expected in zip(
        measure.project(*inputs(DUALS[shape]), xp=xp),
        measure.project(*reference(DUALS[shape]), xp=NP),
    ):
        _check_like(backend, got, dtype, shape, expected)


# --- names and parameters through the registry --------------------------------------


def test_parameters_through_the_registry():
    assert calopt.get_measure("fbeta:beta=2").beta == 2.0
    assert isinstance(calopt.get_measure("fbeta:beta=2").beta, float)
    assert calopt.get_measure("f1").beta == 1.0
    assert calopt.get_measure("f1") == calopt.get_measure("fbeta")
    assert calopt.get_measure("fbeta", beta=0.5).beta == 0.5
    assert calopt.get_measure("gower-legendre:sigma=0.3").sigma == 0.3
    assert calopt.get_measure("Gower_Legendre").name == "gower-legendre"
    measure = calopt.get_measure("fbeta:beta=2")
    assert calopt.get_measure(measure.spec) == measure


@pytest.mark.parametrize(
    "spec, word",
    [
        ("fbeta:beta=-1", "beta"),
        ("fbeta:beta=0", "beta"),
        ("fbeta:beta=inf", "beta"),
        ("fbeta:beta=nan", "beta"),
        ("fbeta:beta=two", "beta"),
        ("gower-legendre:sigma=0", "sigma"),
        ("gower-legendre:sigma=-0.5", "sigma"),
        ("fbeta:gamma=2", "gamma"),
        ("jaccard:beta=1", "beta"),
        ("gmean:beta=1", "beta"),
    ],
)
def test_bad_parameters_raise_parameter_error(spec, word):
    with pytest.raises(ParameterError, match=word):
        calopt.get_measure(spec)


def test_unknown_measure_suggests_the_close_name():
    with pytest.raises(UnknownNameError, match="fbeta") as info:
        calopt.get_measure("fbta")
    assert "fbeta" in info.value.suggestions


def test_list_measures_shows_all_seven():
    entries = {entry.name: entry for entry in calopt.list_measures()}
    families = dict.fromkeys(CONCAVE, "concave") | dict.fromkeys(PSEUDO_LINEAR, "pseudo-linear")
    for name, family in families.items():
        info = entries[name].describe()
        assert info["family"] == family
        assert info["plugin"] == "calopt"
        assert info["summary"]
    assert entries["fbeta"].aliases == ("f1",)
    assert entries["fbeta"].describe()["params"] == {"beta": 1.0, "average": "macro"}
    assert entries["gower-legendre"].describe()["params"] == {"sigma": 0.5, "average": "macro"}


@pytest.mark.parametrize("given, spec", [("f1", "f1"), ("fbeta", "f1"), ("fbeta:beta=1.0", "f1"),
                                         ("f1:average=micro", "f1:average=micro"), ("fbeta:beta=2", "fbeta:beta=2.0")])
def test_f_beta_at_beta_1_is_named_f1_as_a_user_names_it(given, spec):
    """Tables, reports and model files name F-β with β = 1 by its alias, f1 (what `-m f1` asked
    for), and the name recreates the same measure."""
    measure = calopt.get_measure(given)
    assert measure.spec == spec
    assert calopt.get_measure(measure.spec) == measure


# --- monotone measures (the threshold search's bound) ----------------------------------------
MONOTONE_SPECS = ["accuracy", "balanced-accuracy", "f1", "fbeta:beta=0.5", "fbeta:beta=3.0", "gmean",
                  "gower-legendre", "gower-legendre:sigma=2.0", "hmean", "jaccard", "min", "precision", "qmean",
                  "tnr", "tpr"]


@pytest.mark.parametrize("spec", MONOTONE_SPECS)
def test_a_measure_declared_monotone_is_monotone_at_every_count(spec):
    """Every built-in measure is declared monotone, and is: a true positive for a false negative
    never lowers its value, a false positive for a true negative never raises it, at every count
    of classes of 0 to 6 rows (both classes absent too)."""
    from calopt.measures import is_monotone

    measure = calopt.get_measure(spec)
    assert is_monotone(measure)
    for P in range(7):
        for N in range(7):
            tp, fp = np.meshgrid(np.arange(P + 1.0), np.arange(N + 1.0), indexing="ij")
            value = measure.from_counts(tp, fp, N - fp, P - tp, xp=NP)
            assert np.all(np.diff(value, axis=0) >= -1e-12), (P, N)
            assert np.all(np.diff(value, axis=1) <= 1e-12), (P, N)


def test_a_measure_that_redefines_the_value_is_not_monotone_unless_it_says_so():
    import dataclasses
    from typing import ClassVar

    from calopt.measures import is_monotone
    from calopt_measures.concave import GMean
    from calopt_measures.pseudo_linear import FBeta

    @dataclasses.dataclass(frozen=True)
    class Balanced(FBeta):  # the value unchanged: still monotone
        name: ClassVar[str] = "balanced-f"

    @dataclasses.dataclass(frozen=True)
    class Odd(FBeta):
        name: ClassVar[str] = "odd"

        def from_counts(self, tp, fp, tn, fn, *, xp):
            return xp.abs(tp - fp)

    @dataclasses.dataclass(frozen=True)
    class OddPsi(GMean):
        name: ClassVar[str] = "odd-psi"

        def psi(self, tpr, tnr, *, xp):
            return xp.abs(tpr - tnr)

    assert is_monotone(Balanced()) and not is_monotone(Odd()) and not is_monotone(OddPsi())

"""The built-in losses: values and derivatives against independent formulas, stability
at extreme margins, the smooth/calibrated/reward flags, every backend, the registry."""

from __future__ import annotations

import json

import array_api_compat
import numpy as np
import pytest
import scipy.special

import calopt

NAMES = ["calibrated-hinge", "exponential", "hinge", "logistic", "squared"]
SMOOTH = ["calibrated-hinge", "exponential", "logistic", "squared"]
#: (smooth, calibrated, reward) per the spec's table of losses.
FLAGS = {
    "calibrated-hinge": (True, True, False),
    "exponential": (True, True, True),
    "hinge": (False, True, True),
    "logistic": (True, True, True),
    "squared": (True, True, False),
}
EXTREME_MARGINS = [-1e4, -1e3, -50.0, -1.0, 0.0, 1.0, 50.0, 1e3, 1e4]
METHODS = ["value", "derivative", "second_derivative", "reward_value", "reward_derivative"]

xp_np = array_api_compat.array_namespace(np.empty(0))


# Plain references in float64 NumPy/SciPy, written from the spec's table (not the plugin).
def _calibrated_hinge(z):
    return np.maximum(0.0, -z) - np.log(2.0 + np.abs(z))


REFERENCE_VALUE = {
    "logistic": lambda z: np.log1p(np.exp(-z)),  # safe for |z| ≤ 30
    "calibrated-hinge": _calibrated_hinge,
    "squared": lambda z: (1.0 - z) ** 2,
    "exponential": lambda z: np.exp(-z),
    "hinge": lambda z: np.maximum(0.0, 1.0 - z),
}
REFERENCE_DERIVATIVE = {
    "logistic": lambda z: -scipy.special.expit(-z),
    "calibrated-hinge": lambda z: np.piecewise(
        z, [z >= 0, z < 0], [lambda t: -1.0 / (2.0 + t), lambda t: -1.0 + 1.0 / (2.0 - t)]
    ),
    "squared": lambda z: -2.0 * (1.0 - z),
    "exponential": lambda z: -np.exp(-z),
    "hinge": lambda z: np.where(z < 1, -1.0, 0.0),
}
REFERENCE_SECOND = {
    "logistic": lambda z: scipy.special.expit(z) * scipy.special.expit(-z),
    "calibrated-hinge": lambda z: 1.0 / (2.0 + np.abs(z)) ** 2,
    "squared": lambda z: np.full_like(z, 2.0),
    "exponential": lambda z: np.exp(-z),
    "hinge": lambda z: np.zeros_like(z),
}

# Margins in the range where the plain formulas are exact, including 0 and the hinge kink.
GRID = np.concatenate([np.linspace(-30.0, 30.0, 241), [1.0, -1e-9, 1e-9]])
# Away from the hinge kink z = 1, for finite differences.
FD_GRID = np.linspace(-8.0, 8.0, 97)
FD_GRID = FD_GRID[np.abs(FD_GRID - 1.0) > 0.05]


def _loss(name):
    return calopt.get_loss(name)


def _call(loss, method, z, xp=xp_np):
    return getattr(loss, method)(z, xp=xp)


def _assert_central_difference(function, derivative, z, h=1e-6):
    """``derivative`` agrees with the central difference of ``function`` on ``z``."""
    numeric = (function(z + h, xp=xp_np) - function(z - h, xp=xp_np)) / (2 * h)
    scale = np.maximum(1.0, np.abs(function(z, xp=xp_np)))  # relative where |f| is large
    np.testing.assert_allclose(derivative(z, xp=xp_np) / scale, numeric / scale, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_value_matches_plain_formula(name):
    got = _loss(name).value(GRID, xp=xp_np)
    np.testing.assert_allclose(got, REFERENCE_VALUE[name](GRID), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_derivatives_match_plain_formulas(name):
    loss = _loss(name)
    np.testing.assert_allclose(
        loss.derivative(GRID, xp=xp_np), REFERENCE_DERIVATIVE[name](GRID), rtol=1e-12, atol=1e-14
    )
    np.testing.assert_allclose(
        loss.second_derivative(GRID, xp=xp_np), REFERENCE_SECOND[name](GRID), rtol=1e-12, atol=1e-14
    )


@pytest.mark.parametrize("name", NAMES)
def test_value_and_derivative_together_match_plain_formulas(name):
    value, derivative = _loss(name).value_and_derivative(GRID, xp=xp_np)
    np.testing.assert_allclose(value, REFERENCE_VALUE[name](GRID), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(derivative, REFERENCE_DERIVATIVE[name](GRID), rtol=1e-12, atol=1e-14)


def test_logistic_matches_scipy_far_from_zero():
    # log(1 + e^{-z}) = -log(expit(z)); SciPy's log_expit is stable everywhere.
    z = np.array([-700.0, -100.0, -40.0, 40.0, 100.0, 700.0])
    got = _loss("logistic").value(z, xp=xp_np)
    np.testing.assert_allclose(got, -scipy.special.log_expit(z), rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_derivative_matches_finite_differences(name):
    loss = _loss(name)
    _assert_central_difference(loss.value, loss.derivative, FD_GRID)


@pytest.mark.parametrize("name", SMOOTH)
def test_second_derivative_matches_finite_differences(name):
    loss = _loss(name)
    _assert_central_difference(loss.derivative, loss.second_derivative, FD_GRID)


@pytest.mark.parametrize("name", SMOOTH)
def test_smooth_losses_are_continuously_differentiable_at_zero(name):
    # Left and right limits of F' agree at 0 (the calibrated hinge's two branches meet there).
    d = _loss(name).derivative
    left, right = d(np.array(-1e-12), xp=xp_np), d(np.array(1e-12), xp=xp_np)
    assert abs(float(left) - float(right)) < 1e-10


@pytest.mark.parametrize("name", ["calibrated-hinge", "logistic"])
def test_curvature_is_largest_at_zero(name):
    # Paper 000, remark after eq. 3: F''(x) ≤ F''(0) = 1/4 for the calibrated losses (2), (3).
    second = _loss(name).second_derivative
    assert float(second(np.array(0.0), xp=xp_np)) == pytest.approx(0.25, abs=1e-15)
    assert np.all(second(GRID, xp=xp_np) <= 0.25)


@pytest.mark.parametrize("name", NAMES)
def test_convex_with_valid_subgradients(name):
    # F(y) ≥ F(x) + F'(x)(y − x) for all pairs: F' is a (sub)gradient of a convex F,
    # including the hinge at its kink, where any value in [−1, 0] would do.
    loss = _loss(name)
    z = np.concatenate([np.linspace(-6.0, 6.0, 49), [1.0]])
    x, y = z[:, None], z[None, :]
    lower = loss.value(x, xp=xp_np) + loss.derivative(x, xp=xp_np) * (y - x)
    assert np.all(loss.value(y, xp=xp_np) >= lower - 1e-12)
    assert np.all(loss.second_derivative(z, xp=xp_np) >= 0)


def test_hinge_subgradient_at_the_kink_is_zero():
    # Spec: subgradient −1[z < 1], so 0 at z = 1, −1 just below it.
    hinge = _loss("hinge")
    z = np.array([1.0 - 1e-12, 1.0, 1.0 + 1e-12])
    np.testing.assert_array_equal(hinge.derivative(z, xp=xp_np), [-1.0, 0.0, 0.0])
    # The reward 1 − F is min(1, z).
    margins = np.array([-2.0, 0.5, 1.0, 3.0])
    np.testing.assert_array_equal(hinge.reward_value(margins, xp=xp_np), np.minimum(1.0, margins))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", NAMES)
def test_stable_at_extreme_margins(name, method, dtype):
    # pytest turns RuntimeWarning (overflow, invalid value) into an error.
    z = np.array(EXTREME_MARGINS, dtype=dtype)
    out = _call(_loss(name), method, z)
    assert out.dtype == np.dtype(dtype)
    assert out.shape == z.shape
    assert np.all(np.isfinite(out)), dict(zip(EXTREME_MARGINS, out))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_extreme_margins_keep_the_shape_of_the_loss(name, dtype):
    # No clipping or cancellation flips a sign or breaks convexity at huge margins.
    loss = _loss(name)
    z = np.array(EXTREME_MARGINS, dtype=dtype)
    value, slope = loss.value(z, xp=xp_np), loss.derivative(z, xp=xp_np)
    assert np.all(np.diff(slope) >= 0)  # F' non-decreasing
    assert np.all(loss.second_derivative(z, xp=xp_np) >= 0)
    if loss.reward:
        assert np.all(value >= 0) and np.all(np.diff(value) <= 0)
        assert np.all(slope <= 0)
    # The extreme values themselves, in the input's precision, where the formula is finite.
    expected = {
        "logistic": (1e4, 0.0),
        "calibrated-hinge": (1e4 - np.log(2 + 1e4), -np.log(2 + 1e4)),
        "squared": ((1 + 1e4) ** 2, (1 - 1e4) ** 2),
        "hinge": (1 + 1e4, 0.0),
    }
    if name in expected:
        np.testing.assert_allclose(value[[0, -1]], expected[name], rtol=1e-6)
    else:  # exponential: clipped, huge but finite, at −1e4; underflows to 0 at +1e4
        assert value[0] > 1e37 and value[-1] == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_reward_flag_is_exactly_nonnegative_and_nonincreasing(name):
    loss = _loss(name)
    z = np.linspace(-20.0, 20.0, 401)
    value, slope = loss.value(z, xp=xp_np), loss.derivative(z, xp=xp_np)
    is_reward = bool(np.all(value >= 0) and np.all(np.diff(value) <= 0) and np.all(slope <= 0))
    assert loss.reward is is_reward
    if loss.reward:
        assert np.all(loss.reward_value(z, xp=xp_np) <= 1)


@pytest.mark.parametrize("name", NAMES)
def test_reward_is_one_minus_loss(name):
    loss = _loss(name)
    np.testing.assert_allclose(loss.reward_value(GRID, xp=xp_np), 1 - loss.value(GRID, xp=xp_np))
    np.testing.assert_allclose(
        loss.reward_derivative(GRID, xp=xp_np), -loss.derivative(GRID, xp=xp_np)
    )
    _assert_central_difference(loss.reward_value, loss.reward_derivative, FD_GRID)


@pytest.mark.parametrize("name", NAMES)
def test_calibrated_losses_decrease_at_zero(name):
    loss = _loss(name)
    assert loss.calibrated
    assert float(loss.derivative(np.array(0.0), xp=xp_np)) < 0


@pytest.mark.parametrize("name", NAMES)
def test_flags_and_family(name):
    loss_class = type(_loss(name))
    assert (loss_class.smooth, loss_class.calibrated, loss_class.reward) == FLAGS[name]
    assert loss_class.family == ("smooth" if loss_class.smooth else "nonsmooth")
    assert loss_class.summary()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(), (7,)])
@pytest.mark.parametrize("name", NAMES)
def test_every_backend_agrees_with_numpy(backend, name, shape, dtype):
    rng = np.random.default_rng(0)
    z_host = rng.uniform(-5.0, 5.0, size=shape).astype(dtype)
    if shape:
        z_host[:3] = [0.0, 1.0, -1e4]  # the kinks and an extreme margin
    xp = backend.xp
    z = backend.asarray(z_host, dtype=getattr(xp, dtype))
    loss = _loss(name)
    for method in METHODS:
        out = _call(loss, method, z, xp=xp)
        assert array_api_compat.array_namespace(out) is array_api_compat.array_namespace(z)
        assert out.dtype == z.dtype, method
        assert tuple(out.shape) == shape, method
        assert array_api_compat.device(out) == array_api_compat.device(z)
        expected = _call(loss, method, z_host)
        rtol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(
            backend.to_numpy(out), expected, rtol=rtol, atol=0, err_msg=method
        )
    np.testing.assert_array_equal(backend.to_numpy(z), z_host)  # input untouched


def test_registry_lists_the_builtin_losses():
    builtin = {entry.name: entry for entry in calopt.list_losses() if entry.plugin == "calopt"}
    assert sorted(builtin) == NAMES
    for name, entry in builtin.items():
        info = json.loads(json.dumps(entry.describe()))
        smooth, calibrated, reward = FLAGS[name]
        assert info["smooth"] is smooth
        assert info["calibrated"] is calibrated
        assert info["reward"] is reward
        assert info["family"] == ("smooth" if smooth else "nonsmooth")
        assert info["params"] == {}
        assert info["summary"]
        assert isinstance(calopt.get_loss(name), calopt.Loss)


def test_registry_lookups():
    assert calopt.get_loss("hinge").smooth is False
    assert calopt.get_loss("Calibrated_Hinge").name == "calibrated-hinge"
    with pytest.raises(calopt.UnknownNameError, match="did you mean 'logistic'") as info:
        calopt.get_loss("logistc")
    assert "logistic" in info.value.suggestions
    with pytest.raises(calopt.ParameterError, match="no parameter"):
        calopt.get_loss("hinge:margin=2")

"""calopt.scalars.FLOATS: the dual projections on Python floats agree with the array code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import calopt
from calopt.algorithms import Problem
from calopt.scalars import FLOATS
from calopt.io.batches import ArrayReader
from calopt.training.loop import run

NP = calopt.get_backend("numpy").xp
FLOAT_MEASURES = [entry.name for entry in calopt.list_measures()
                  if getattr(entry.component, "float_projection", False)]
values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.sampled_from([0.0, 0.5, 0.25, -0.5])


def test_the_built_in_concave_measures_project_on_floats():
    assert set(FLOAT_MEASURES) == {"gmean", "hmean", "min", "qmean"}


@pytest.mark.parametrize("name", FLOAT_MEASURES)
@settings(max_examples=300, deadline=None)
@given(alpha=values, beta=values)
@example(alpha=0.5, beta=0.5)  # on the boundary (G-mean: αβ = 1/4)
@example(alpha=3.0, beta=-2.0)
@example(alpha=1e-300, beta=1e300)
def test_float_projection_is_the_array_projection(name, alpha, beta):
    measure = calopt.get_measure(name)
    with np.errstate(all="ignore"):  # as in the training loop
        expected = measure.project(NP.asarray(alpha), NP.asarray(beta), xp=NP)
    got = measure.project(alpha, beta, xp=FLOATS)
    assert all(type(value) is float for value in got)
    for g, e in zip(got, expected):
        assert g == pytest.approx(float(e), rel=1e-12, abs=1e-12)


def test_floats_follow_numpy_on_edge_values():
    with np.errstate(all="ignore"):
        for a, b in [(math.nan, 1.0), (1.0, math.nan), (-math.inf, 2.0), (2.0, 2.0)]:
            for ours, theirs in ((FLOATS.maximum, np.maximum), (FLOATS.minimum, np.minimum)):
                np.testing.assert_equal(ours(a, b), float(theirs(a, b)))
        for x in (-1.0, 0.0, 1e-320, 2.0, math.inf, math.nan):
            np.testing.assert_equal(FLOATS.log(x), float(np.log(x)))
            np.testing.assert_equal(FLOATS.sqrt(x), float(np.sqrt(x)))
        for x in (-1e4, 0.0, 700.0, 710.0, 1e6, math.inf, -math.inf, math.nan):
            np.testing.assert_equal(FLOATS.exp(x), float(np.exp(x)))
    assert FLOATS.where(True, 1.0, 2.0) == 1.0 and FLOATS.clip(5.0, 0.0, 1.0) == 1.0


def _spade_run(measure, X, y):
    problem = Problem(NP, NP.float64, None, X.shape[0], X.shape[1], float(np.mean(y > 0)), measure,
                      calopt.get_loss("hinge"), 8)
    return run(calopt.get_algorithm("spade", step=1.0), problem, ArrayReader(X, y, NP), epochs=2, seed=0)


def test_a_measure_without_float_projection_keeps_arrays():
    """A plugin measure that has not opted in is projected with the array namespace."""
    gmean = calopt.get_measure("gmean")
    seen = []

    class ArrayOnly(type(gmean)):
        float_projection = False

        def project(self, alpha, beta, *, xp):
            seen.append(xp)
            return super().project(alpha, beta, xp=xp)

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), np.where(rng.random(40) < 0.3, 1.0, -1.0)
    arrays = _spade_run(ArrayOnly(), X, y)
    assert seen and all(xp is NP for xp in seen)
    floats = _spade_run(gmean, X, y)  # the same run through FLOATS
    np.testing.assert_allclose(floats.state.algorithm.w, arrays.state.algorithm.w, rtol=1e-12)
    assert float(floats.state.algorithm.alpha) == pytest.approx(float(arrays.state.algorithm.alpha), rel=1e-12)
    assert floats.state.algorithm.alpha.dtype == NP.float64 and floats.state.algorithm.alpha.shape == ()

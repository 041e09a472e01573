"""Step schedules and the chain of shared parts (calopt.algorithms, issue 24)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import calopt
from calopt.algorithms import (
    BallProjection,
    BudgetStep,
    Chain,
    Constant,
    InverseSqrt,
    IterateAverage,
    Power,
    Problem,
    SqrtGrowth,
    step_size,
)


# -- the schedules -------------------------------------------------------------------------
@pytest.mark.parametrize(("schedule", "values"), [
    (InverseSqrt(2.0), {1: 2.0, 4: 1.0, 16: 0.5}),  # η₀/√t
    (Constant(0.3), {1: 0.3, 7: 0.3, 1000: 0.3}),
    (SqrtGrowth(0.5), {0: 0.5, 3: 1.0, 15: 2.0}),  # β₀·√(t+1), from t = 0
    (Power(-0.25), {1: 1.0, 16: 0.5, 81: 1 / 3}),  # ε(t) = t^(−1/4)
    (BudgetStep(3.0, 9), {1: 1.0, 5: 1.0, 9: 1.0}),  # η/√K at every step
])
def test_schedules_give_their_known_values(schedule, values):
    for t, expected in values.items():
        assert schedule(t) == pytest.approx(expected, rel=1e-15)


def test_step_size_is_the_inverse_square_root_schedule_to_the_bit():
    """The public ``calopt.step_size`` (plugins use it) is η₀/√t exactly, as before."""
    for scale in (0.1, 1.0, 3.7, 100.0):
        for t in (1, 2, 3, 10, 12345):
            assert step_size(scale, t) == scale / math.sqrt(t) == InverseSqrt(scale)(t)
    assert calopt.step_size is step_size


def test_a_schedule_of_per_model_scales_gives_per_model_steps():
    """A stacked run's scale is an (M,) array: the step is one per model."""
    scales = np.array([1.0, 10.0, 100.0])
    np.testing.assert_array_equal(InverseSqrt(scales)(4), scales / 2)


# -- the chain of parts --------------------------------------------------------------------
def test_a_chain_of_projection_and_average_is_the_plain_loop():
    """Project each iterate onto the ball, then keep the running mean of the projected ones."""
    rng = np.random.default_rng(0)
    steps = [(rng.normal(size=3), float(rng.normal())) for _ in range(6)]
    chain = Chain((BallProjection(1.5), IterateAverage()))
    params = (np.zeros(3), np.float64(0.0))
    state = chain.init(params)
    projected = []
    for w, b in steps:
        previous = params
        params, state = chain.update(previous, (previous[0] + 2 * w, previous[1] + 2 * b), state, _problem(6, 3, 1))
        projected.append(np.append(*params))
    reference, w_ref = [], np.zeros(4)
    for w, b in steps:
        w_ref = w_ref + 2 * np.append(w, b)
        w_ref = w_ref * min(1.0, 1.5 / np.linalg.norm(w_ref))
        reference.append(w_ref)
    np.testing.assert_allclose(projected, reference, rtol=1e-12)
    assert max(np.linalg.norm(r) for r in reference) == pytest.approx(1.5)  # the ball was hit
    np.testing.assert_allclose(np.append(*chain.output(params, state)), np.mean(reference, axis=0), rtol=1e-12)
    assert chain.output(params, chain.init(params)) == params  # nothing averaged yet: the iterate


def _problem(n, d, batch_size):
    return Problem(np, np.float64, "cpu", n, d, 0.5, calopt.get_measure("f1"), calopt.get_loss("logistic"), batch_size)

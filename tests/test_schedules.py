"""Step schedules, the chain of shared parts and the loop's one step counter (calopt.algorithms, issue 24)."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, NamedTuple

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
from calopt.errors import ModelFileError, TrainingInterrupted
from calopt.io.batches import ArrayReader
from calopt.training.checkpoint import Checkpoint
from calopt.training.loop import run


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


# -- the loop's step counter ---------------------------------------------------------------
class _Seen(NamedTuple):
    w: np.ndarray
    b: np.ndarray
    steps: tuple  #: the t each update was given (a test's record, not a counter)


@dataclasses.dataclass(frozen=True)
class _Recorder(calopt.Algorithm):
    """Moves w by η₀/√t and records the t the loop hands it."""

    name: ClassVar[str] = "recorder"
    needs_reward: ClassVar[bool] = False
    scheduled: ClassVar[bool] = True

    def init(self, problem: Problem) -> _Seen:
        return _Seen(problem.zeros(problem.n_features), problem.scalar(0.0), ())

    def update(self, state: _Seen, batch, problem: Problem, t: int) -> _Seen:
        return _Seen(state.w + InverseSqrt(1.0)(t), state.b, state.steps + (t,))


@dataclasses.dataclass(frozen=True)
class _Unscheduled(_Recorder):
    """A plugin's three-argument ``update`` (no ``scheduled``)."""

    name: ClassVar[str] = "unscheduled"
    scheduled: ClassVar[bool] = False

    def update(self, state: _Seen, batch, problem: Problem) -> _Seen:
        return _Seen(state.w + 1.0, state.b, state.steps + (None,))


def _problem(n, d, batch_size):
    return Problem(np, np.float64, "cpu", n, d, 0.5, calopt.get_measure("f1"), calopt.get_loss("logistic"), batch_size)


def test_the_loop_counts_the_updates_and_hands_the_count_to_a_scheduled_algorithm():
    """10 rows in batches of 3: 4 updates an epoch, t = 1…12 over 3 epochs, in the loop's state."""
    X, y = np.ones((10, 2)), np.array([1.0, -1.0] * 5)
    result = run(_Recorder(), _problem(10, 2, 3), ArrayReader(X, y, np), epochs=3, seed=0)
    assert result.state.algorithm.steps == tuple(range(1, 13))
    assert result.state.step == 12
    np.testing.assert_allclose(result.state.algorithm.w, sum(1 / math.sqrt(t) for t in range(1, 13)))
    unscheduled = run(_Unscheduled(), _problem(10, 2, 3), ArrayReader(X, y, np), epochs=3, seed=0)
    assert unscheduled.state.algorithm.steps == (None,) * 12 and unscheduled.state.step == 12


def test_the_count_runs_on_across_a_resumed_interruption():
    """Interrupted after 5 updates and resumed: t continues at 6 (the counter is checkpointed)."""
    X, y = np.ones((10, 2)), np.array([1.0, -1.0] * 5)
    calls = iter(range(100))
    stopped = run(_Recorder(), _problem(10, 2, 3), ArrayReader(X, y, np), epochs=3, seed=0,
                  interrupt=lambda: next(calls) == 4)
    assert stopped.state.step == 5
    resumed = run(_Recorder(), _problem(10, 2, 3), ArrayReader(X, y, np), epochs=3, seed=0, resume=stopped)
    assert resumed.state.algorithm.steps == tuple(range(1, 13))


def amp_reference(X, y, order, *, step, inner_epochs, epochs):
    """AMP (paper 002, Alg. 2) for F1 one point at a time: η₀/√t ascent on V(·, v), t restarting at
    1 after each level update (every ``inner_epochs`` passes, the level the 0-1 F1 of the iterate)."""
    n, p = len(y), float(np.mean(y > 0))
    theta = (1 - p) / p
    b0 = 1 + theta
    w, b, v, t = np.zeros(X.shape[1]), 0.0, 0.0, 0
    for epoch in range(epochs):
        for i in order[epoch * n:(epoch + 1) * n]:
            t += 1
            x, label = X[i], y[i]
            dr = 1.0 if label * (x @ w + b) < 1 else 0.0
            weight = (2 / b0 - v / b0) / p if label > 0 else (theta * v / b0) / (1 - p)
            w, b = w + step / math.sqrt(t) * weight * dr * label * x, b + step / math.sqrt(t) * weight * dr * label
        if (epoch + 1) % inner_epochs == 0:
            predicted = X @ w + b > 0
            tpr, tnr = np.mean(predicted[y > 0]), np.mean(~predicted[y < 0])
            v = 2 * tpr / (1 + theta + tpr - theta * tnr)
            t = 0
    return w, b, v


@pytest.mark.parametrize("inner_epochs", [1, 2])
def test_amp_restarts_its_steps_after_each_level_update(inner_epochs):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0.2, 1.0, -1.0)
    algorithm = calopt.get_algorithm("amp", step=0.7, inner_epochs=inner_epochs, tol=0.0)
    problem = Problem(np, np.float64, "cpu", 40, 3, float(np.mean(y > 0)), calopt.get_measure("f1"),
                      calopt.get_loss("hinge"), 1)
    result = run(algorithm, problem, ArrayReader(X, y, np), epochs=4, seed=2)
    shuffle = np.random.default_rng(2)  # the loop's permutations
    order = [i for _ in range(4) for i in shuffle.permutation(40)]
    w, b, v = amp_reference(X, y, order, step=0.7, inner_epochs=inner_epochs, epochs=4)
    state = result.state.algorithm
    np.testing.assert_allclose(np.append(state.w, state.b), np.append(w, b), rtol=1e-12, atol=1e-12)
    assert float(state.level) == pytest.approx(v, abs=1e-12) and v > 0
    # t running on instead (no restart) gives another model: the test tells them apart
    unrestarted = amp_reference(X, y, order, step=0.7, inner_epochs=100, epochs=4)
    assert np.max(np.abs(np.append(*unrestarted[:2]) - np.append(w, b))) > 1e-6


# -- checkpoints of the previous state layout ----------------------------------------------------
def test_a_checkpoint_with_a_solver_step_counter_is_refused_in_one_line(tmp_path):
    """A checkpoint written before the loop owned the counter (a ``t`` in SPADE's state, none in the
    loop's) is refused with one line naming both layouts, not resumed wrongly."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] > 0.3, 1, 0)
    path = tmp_path / "run.ckpt.npz"
    calls = iter(range(10**6))
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, measure="gmean", algorithm="spade:step=1.0", select="none", epochs=3, batch_size=10,
                   checkpoint=path, interrupt=lambda: next(calls) == 40)
    saved = Checkpoint.load(path)
    top = saved.state
    assert top["fields"] == ["algorithm", "parts", "step"]
    inner = top["values"][0]
    old = dataclasses.replace(saved, state={
        "fields": ["algorithm", "parts"],
        "values": [{"fields": ["t", *inner["fields"]], "values": [{"int": 41}, *inner["values"]]},
                   top["values"][1]]})
    with pytest.raises(ModelFileError) as error:
        calopt.fit(X, y, measure="gmean", algorithm="spade:step=1.0", select="none", epochs=3, batch_size=10,
                   resume=old)
    message = str(error.value)
    assert "\n" not in message and "fields (algorithm, parts)" in message and "(algorithm, parts, step)" in message


@pytest.mark.parametrize("spec", ["stamp:step=2.0,radius=0.5,stage_length=30", "amp:step=2.0,radius=0.5"])
def test_a_resumed_checkpoint_file_ends_with_the_uninterrupted_model(tmp_path, spec):
    """The loop's counter, STAMP's clock and stage parts (the ball's and the average's states)
    and AMP's clock go through a checkpoint file and back: the resumed run's model is the
    uninterrupted run's, to the bit."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=400) > 0.5, 1, 0)
    options = dict(measure="f1", algorithm=spec, select="none", epochs=3, batch_size=7, seed=4)
    whole = calopt.fit(X, y, **options)
    path = tmp_path / "run.ckpt.npz"
    calls = iter(range(10**6))
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, checkpoint=path, interrupt=lambda: next(calls) == 75, **options)  # mid-epoch 2
    resumed = calopt.fit(X, y, resume=path, **options)
    assert np.array_equal(resumed.coef, whole.coef) and resumed.intercept == whole.intercept
    assert resumed.threshold == whole.threshold

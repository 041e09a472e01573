"""The plug-in baseline: a class-probability model by logistic ERM, then a tuned threshold."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

from calopt.algorithms import Algorithm, Problem, step_size

Array = Any


class ErmState(NamedTuple):
    t: int
    w: Array
    b: Array
    w_avg: Array
    b_avg: Array


@dataclasses.dataclass(frozen=True)
class PlugIn(Algorithm):
    """Plug-in: logistic ERM (averaged SGD), then the threshold best for the measure on held-out data."""

    name: ClassVar[str] = "plugin"
    family: ClassVar[str] = "any"
    needs_reward: ClassVar[bool] = False
    holdout: ClassVar[float] = 0.2
    step_candidates: ClassVar[tuple[float, ...]] = (0.1, 1.0, 10.0)

    #: Step scale η₀ (η_t = η₀/√t); unset: chosen on held-out data.
    step: float | None = None
    #: L2 regularisation λ of (1/m)·Σ F(y·s) + λ‖w‖².
    l2: float = 1e-6

    def check_params(self) -> None:
        if self.step is not None:
            self.require_positive("step")
        self.require(self.l2 >= 0, f"l2 must be ≥ 0, got {self.l2!r}")

    def init(self, problem: Problem) -> ErmState:
        w, b = problem.zeros(problem.n_features), problem.scalar(0.0)
        return ErmState(0, w, b, w, b)

    def update(self, state: ErmState, X: Array, y: Array, problem: Problem) -> ErmState:
        xp = problem.xp
        t = state.t + 1
        margins = y * (X @ state.w + state.b)
        coef = problem.loss.derivative(margins, xp=xp) * y
        batch = y.shape[0]
        grad_w = (X.T @ coef) / batch + 2 * self.l2 * state.w
        grad_b = xp.sum(coef) / batch
        eta = step_size(self.step if self.step is not None else 1.0, t)
        w, b = state.w - eta * grad_w, state.b - eta * grad_b
        return ErmState(
            t, w, b, state.w_avg + (w - state.w_avg) / t, state.b_avg + (b - state.b_avg) / t
        )

    def weights(self, state: ErmState) -> tuple[Array, Array]:
        return state.w_avg, state.b_avg

"""SPADE: stochastic primal-dual ascent for concave measures (paper 002, Algorithm 1)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, NamedTuple

from calopt.algorithms import (
    Algorithm,
    BallProjection,
    Batch,
    InverseSqrt,
    IterateAverage,
    Part,
    Power,
    Problem,
    Schedule,
    Tunable,
    column,
    reward_terms,
    weighted_reward_gradient,
)
from calopt.backends import is_numpy
from calopt.scalars import FLOATS

Array = Any


class SpadeState(NamedTuple):
    w: Array
    b: Array
    alpha: Array  #: dual variable of the positives (weight on TPR)
    beta: Array  #: dual variable of the negatives (weight on TNR)


@dataclasses.dataclass(frozen=True)
class Spade(Algorithm):
    """SPADE: stochastic primal-dual ascent for concave measures (paper 002, Alg. 1)."""

    name: ClassVar[str] = "spade"
    family: ClassVar[str] = "concave"
    products_only: ClassVar[bool] = True  # batches only through X @ w and X.T @ c
    tunables: ClassVar[tuple[Tunable, ...]] = (Tunable("step", (1.0, 10.0, 100.0)),
                                               Tunable("radius", (None, 1.0), trial=False))
    stackable: ClassVar[bool] = True
    scheduled: ClassVar[bool] = True
    absent_columns_inert: ClassVar[bool] = True

    #: Primal step scale η₀ (η_t = η₀/√t); unset: chosen on held-out data.
    step: float | None = None
    #: Dual step scale η'₀ (η'_t = η'₀/√t). The dual gradient holds r⁺ = r/p, large
    #: for a rare class; 0.1 was equal or better than 1 and 0.3 on ijcnn1, a9a and w8a
    #: (w8a, 3% positives: min 0.835 → 0.853 over seeds 0-2, spread 0.057 → 0.004).
    dual_step: float = 0.1
    #: Radius of the ball W that (w, b) is projected onto (unset: unbounded).
    radius: float | None = None
    #: Output the average of the iterates (the paper) rather than the last one.
    average: bool = True

    def check_params(self) -> None:
        if self.step is not None:
            self.require_positive("step")
        self.require_positive("dual_step")
        if self.radius is not None:
            self.require_positive("radius")

    def parts(self) -> tuple[Part, ...]:
        """The ball W (steps 6 and 8) when ``radius`` is set, then the average of the iterates (step 19)."""
        return tuple(part for part in (BallProjection(self.radius) if self.radius is not None else None,
                                       IterateAverage() if self.average else None) if part is not None)

    @functools.cached_property
    def schedules(self) -> tuple[Schedule, Schedule, Schedule]:
        """η_t = η₀/√t (steps 5-9), η'_t = η'₀/√t (steps 11-17) and the G-mean's reward offset
        ε(t) = t^(−1/4) (Theorem 5)."""
        return (InverseSqrt(self.step if self.step is not None else 1.0), InverseSqrt(self.dual_step),
                Power(-0.25))

    def init(self, problem: Problem) -> SpadeState:
        alpha, beta = problem.measure.dual_start
        return SpadeState(problem.coef_zeros(), problem.constant(0.0), problem.constant(alpha),
                          problem.constant(beta))

    def update(self, state: SpadeState, batch: Batch, problem: Problem, t: int) -> SpadeState:
        xp, p, measure = problem.xp, problem.positive_rate, problem.measure
        X, y, weight = batch
        step, dual_step, offset = self.schedules
        size = y.shape[0]
        ones = y * y  # y ∈ {−1, +1}: y·y is a vector of ones
        reward, dr_ds = reward_terms(state.w, state.b, X, y, problem.loss, xp=xp, weight=weight)
        positive = column(y, dr_ds) > 0
        if not measure.lipschitz:  # G-mean: rewards offset by ε(t) = t^(-1/4) (Theorem 5)
            reward = reward + (offset(t) if weight is None else offset(t) * weight)
        # Σ r and Σ y·r as dot products (xp.sum costs several times more on a small
        # batch); the class sums are Σ₊ r = (Σ r + Σ y·r)/2 and Σ₋ r = (Σ r − Σ y·r)/2.
        reward_sum, reward_signed = ones @ reward, y @ reward
        # Primal ascent (steps 5-9), the step η_t folded into the gradient's weights; the loop
        # projects onto W (BallProjection).
        eta = step(t)
        grad_w, grad_b = weighted_reward_gradient(
            X, y, dr_ds, state.alpha, state.beta, p, xp=xp, positive=positive, scale=eta, ones=ones
        )
        # Dual descent on ℓᵈ = α·r⁺ + β·r⁻ − Ψ*(α, β) (steps 11-17; sign per Appendix B),
        # with r± the batch means of r⁺ and r⁻; a constant ∇Ψ* stays a Python number.
        eta_dual = dual_step(t)
        grad_alpha, grad_beta = measure.constant_conjugate_grad or measure.conjugate_grad(
            state.alpha, state.beta, xp=xp
        )
        alpha, beta = state.alpha, state.beta
        host = measure.float_projection and is_numpy(xp) and alpha.ndim == 0
        if host:  # on NumPy, the scalar step on Python floats (calopt.scalars): no ufunc calls
            alpha, beta, reward_sum, reward_signed = map(float, (alpha, beta, reward_sum, reward_signed))
        alpha, beta = measure.project(
            alpha + eta_dual * grad_alpha - (reward_sum + reward_signed) * (0.5 * eta_dual / (size * p)),
            beta + eta_dual * grad_beta - (reward_sum - reward_signed) * (0.5 * eta_dual / (size * (1 - p))),
            xp=FLOATS if host else xp,
        )
        if host:
            alpha, beta = problem.scalar(alpha), problem.scalar(beta)
        return SpadeState(state.w + grad_w, state.b + grad_b, alpha, beta)

    def describe_state(self, state: SpadeState) -> dict[str, Array]:
        return {"alpha": state.alpha, "beta": state.beta}

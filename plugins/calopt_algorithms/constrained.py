"""A Lagrangian primal-dual solver for a measure subject to rate constraints (spec, "Rate constraints").

The measure's own method (SPADE's dual (α, β) for a concave measure, paper 002 Alg. 1;
a running level for a pseudo-linear one, as STAMP's valuation, paper 002 Alg. 3) gives the
weights of the surrogate rates P(w), N(w); each constraint, linear in (TPR, TNR)
(:meth:`~calopt.constraints.RateConstraint.linear`), adds its dual variable λ_k times its
coefficients. The primal player ascends the Lagrangian on the surrogate rates (the
rewards); the dual player descends on the constraints' 0-1 rates on the mini-batch, the
"proxy" split of Cotter, Jiang and Sridharan (ALT 2019, Definition 2 and Section 4), which
keeps λ honest about the rates that are reported.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, NamedTuple

from calopt.algorithms import (
    Algorithm,
    Batch,
    InverseSqrt,
    IterateAverage,
    Problem,
    Schedule,
    Tunable,
    column,
    weighted_reward_gradient,
)
from calopt.errors import ParameterError

Array = Any


class ConstrainedState(NamedTuple):
    w: Array
    b: Array
    alpha: Array  #: the objective's weight on TPR (SPADE's dual α; unused for pseudo-linear measures)
    beta: Array  #: the objective's weight on TNR
    tpr: Array  #: running mean of the mini-batches' TPR (the level of a pseudo-linear objective)
    tnr: Array  #: running mean of the mini-batches' TNR
    multipliers: Array  #: (K,) the constraints' dual variables λ ≥ 0
    offsets: Array  #: (K,) u0 of each constraint u0 + u1·TPR + u2·TNR ≥ 0 (constants)
    tpr_coefs: Array  #: (K,) u1
    tnr_coefs: Array  #: (K,) u2


def _objective(problem: Problem) -> Any:
    """The measure the constraints constrain (the measure itself when there are none)."""
    return getattr(problem.measure, "objective", problem.measure)


def lagrangian_weights(objective_weights: tuple[Array, Array], multipliers: Array, tpr_coefs: Array,
                       tnr_coefs: Array) -> tuple[Array, Array]:
    """The weights of the surrogate (TPR, TNR) in the Lagrangian: the objective's plus Σ λ_k·(u1_k, u2_k)."""
    weight_pos, weight_neg = objective_weights
    return weight_pos + multipliers @ tpr_coefs, weight_neg + multipliers @ tnr_coefs


@dataclasses.dataclass(frozen=True)
class Constrained(Algorithm):
    """Lagrangian primal-dual ascent for a measure subject to rate constraints (one dual variable each)."""

    name: ClassVar[str] = "constrained"
    family: ClassVar[str] = "constrained"
    tunables: ClassVar[tuple[Tunable, ...]] = (Tunable("step", (1.0, 10.0, 100.0)),)
    scheduled: ClassVar[bool] = True
    absent_columns_inert: ClassVar[bool] = True

    #: Primal step scale η₀ (η_t = η₀/√t); unset: chosen on held-out data.
    step: float | None = None
    #: Step scale of the objective's dual (α, β) (as SPADE's ``dual_step``).
    dual_step: float = 0.1
    #: Step scale of the constraints' dual variables λ (η_t = η₀/√t).
    multiplier_step: float = 1.0
    #: The largest λ (the dual variables live in [0, bound], Cotter et al.'s bounded multipliers).
    multiplier_bound: float = 100.0
    #: Output the average of the iterates rather than the last one.
    average: bool = True

    def check_params(self) -> None:
        if self.step is not None:
            self.require_positive("step")
        self.require_positive("dual_step", "multiplier_step", "multiplier_bound")

    def parts(self):
        return (IterateAverage(),) if self.average else ()

    @functools.cached_property
    def schedules(self) -> tuple[Schedule, Schedule, Schedule]:
        """The steps η₀/√t of the primal player, of the objective's dual (α, β) and of the multipliers λ."""
        return (InverseSqrt(self.step if self.step is not None else 1.0), InverseSqrt(self.dual_step),
                InverseSqrt(self.multiplier_step))

    def check_problem(self, problem: Problem) -> None:
        """A concave or pseudo-linear measure, constrained or not (without constraints this is the
        measure's own method: SPADE's update, or STAMP's valuation at a running level)."""
        objective = _objective(problem)
        if objective.family not in ("concave", "pseudo-linear"):
            raise ParameterError(f"algorithm {self.name!r} optimises concave or pseudo-linear measures, "
                                 f"constrained or not; {objective.name!r} is {objective.family}")
        if problem.n_classes > 1:
            raise ParameterError(f"algorithm {self.name!r} trains two classes")
        if not problem.loss.reward:
            raise ParameterError(f"algorithm {self.name!r} needs a reward-capable loss (non-negative and "
                                 f"non-increasing: hinge, logistic, exponential); {problem.loss.name!r} is not")

    def init(self, problem: Problem) -> ConstrainedState:
        alpha, beta = getattr(_objective(problem), "dual_start", (0.5, 0.5))
        linear = [constraint.linear(problem.positive_rate) for constraint in getattr(problem.measure, "constraints", ())]

        def vector(values: list[float]) -> Array:
            return problem.xp.asarray(values, dtype=problem.dtype, device=problem.device)

        return ConstrainedState(problem.coef_zeros(), problem.scalar(0.0), problem.scalar(alpha),
                                problem.scalar(beta), problem.scalar(0.5), problem.scalar(0.5),
                                vector([0.0] * len(linear)), *(vector([u[k] for u in linear]) for k in range(3)))

    def update(self, state: ConstrainedState, batch: Batch, problem: Problem, t: int) -> ConstrainedState:
        """One step of both players; t (the loop's) also makes the running means of the batch rates."""
        xp, p, loss = problem.xp, problem.positive_rate, problem.loss
        objective = _objective(problem)
        X, y, weight = batch
        size = y.shape[0]
        step, dual_step, multiplier_step = self.schedules
        ones = y * y  # y ∈ {−1, +1}
        margins = y * (X @ state.w + state.b)
        reward = loss.reward_value(margins, xp=xp)
        dr_ds = loss.reward_derivative(margins, xp=xp) * y
        correct = xp.astype(margins > 0, margins.dtype)  # the 0-1 reward
        if weight is not None:
            reward, dr_ds, correct = reward * weight, dr_ds * weight, correct * weight
        # batch means of the one-point forms r·1[y=1]/p and r·1[y=−1]/(1−p), of the surrogate and 0-1 rewards
        reward_sum, reward_signed = ones @ reward, y @ reward
        correct_sum, correct_signed = ones @ correct, y @ correct
        tpr = (correct_sum + correct_signed) * (0.5 / (size * p))
        tnr = (correct_sum - correct_signed) * (0.5 / (size * (1 - p)))
        eta_dual = dual_step(t)
        alpha, beta = state.alpha, state.beta
        if objective.family == "concave":  # SPADE's weights and dual step (paper 002, Alg. 1, steps 5-17)
            weights = (alpha, beta)
            grad_alpha, grad_beta = objective.constant_conjugate_grad or objective.conjugate_grad(alpha, beta, xp=xp)
            alpha, beta = objective.project(
                alpha + eta_dual * grad_alpha - (reward_sum + reward_signed) * (0.5 * eta_dual / (size * p)),
                beta + eta_dual * grad_beta - (reward_sum - reward_signed) * (0.5 * eta_dual / (size * (1 - p))),
                xp=xp)
        else:  # STAMP's valuation V(w, v) at the level v = M(running TPR, TNR) (paper 002, Alg. 3)
            (a0, a1, a2), (b0, b1, b2) = objective.coefficients(p)
            denominator = b0 + b1 * state.tpr + b2 * state.tnr
            level = (a0 + a1 * state.tpr + a2 * state.tnr) / xp.where(denominator > 0, denominator,
                                                                       xp.ones_like(denominator))
            weights = ((a1 - level * b1) / b0, (a2 - level * b2) / b0)
        weight_pos, weight_neg = lagrangian_weights(weights, state.multipliers, state.tpr_coefs, state.tnr_coefs)
        eta = step(t)
        grad_w, grad_b = weighted_reward_gradient(X, y, dr_ds, weight_pos, weight_neg, p, xp=xp,
                                                  positive=column(y, dr_ds) > 0, scale=eta, ones=ones)
        # λ descends on the constraints' 0-1 slack u0 + u1·TPR + u2·TNR of the batch, kept in [0, bound]
        slack = state.offsets + state.tpr_coefs * tpr + state.tnr_coefs * tnr
        multipliers = state.multipliers - multiplier_step(t) * slack
        multipliers = xp.minimum(xp.maximum(multipliers, 0.0), self.multiplier_bound)
        return state._replace(w=state.w + grad_w, b=state.b + grad_b, alpha=alpha, beta=beta,
                              tpr=state.tpr + (tpr - state.tpr) / t, tnr=state.tnr + (tnr - state.tnr) / t,
                              multipliers=multipliers)

    def describe_state(self, state: ConstrainedState) -> dict[str, Array]:
        return {f"lambda{k + 1}": state.multipliers[k] for k in range(state.multipliers.shape[0])}

"""calopt-example: a third-party calopt plugin with one measure, one loss and one algorithm.

calopt finds this module through the ``calopt`` entry point in this package's
pyproject.toml, imports it, and calls the hooks below. Each hook receives a
``register`` callback; calopt owns the names, aliases, duplicate detection and the
parsing of ``name:key=value`` specs, so a plugin only hands over its classes. Everything
a plugin needs comes from ``calopt`` itself (no ``array_api_compat`` import): the base
classes, ``Problem``, ``Batch``, the shared parts and the backend helpers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import calopt

__all__ = ["AveragedPerceptron", "Youden", "SmoothedHinge", "register_algorithms",
           "register_default_losses", "register_losses", "register_measures"]

Array = Any


@dataclasses.dataclass(frozen=True)
class Youden(calopt.ConcaveMeasure):
    """Youden's J statistic (informedness): TPR + TNR − 1.

    Ψ(P, N) = P + N − 1 is linear, so in Ψ(P, N) = min over (α, β) of α·P + β·N − Ψ*(α, β)
    the dual region is the single point (1, 1), where Ψ* = 1 and ∇Ψ* = 0; the projection
    onto the region is that point.
    """

    name: ClassVar[str] = "youden"
    dual_start: ClassVar[tuple[float, float]] = (1.0, 1.0)

    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        return tpr + tnr - 1

    def conjugate(self, alpha: Array, beta: Array, *, xp: Any) -> Array:
        return xp.ones_like(alpha)

    def conjugate_grad(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        return xp.zeros_like(alpha), xp.zeros_like(beta)

    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        return xp.full_like(alpha, 1.0), xp.full_like(beta, 1.0)


@dataclasses.dataclass(frozen=True)
class SmoothedHinge(calopt.Loss):
    """Quadratically smoothed hinge: 0 for z ≥ 1, (1 − z)²/2 for 0 < z < 1, 1/2 − z for z ≤ 0.

    With t = clip(1 − z, 0, 1): F(z) = t²/2 + max(−z, 0), F'(z) = −t, and
    F''(z) = 1 on 0 < z < 1, else 0. It is differentiable, classification calibrated,
    non-negative and non-increasing (so 1 − F is a reward bounded by 1).
    """

    name: ClassVar[str] = "smoothed-hinge"
    family: ClassVar[str] = "smooth"
    smooth: ClassVar[bool] = True
    calibrated: ClassVar[bool] = True
    reward: ClassVar[bool] = True

    def value(self, z: Array, *, xp: Any) -> Array:
        t = xp.clip(1 - z, min=0.0, max=1.0)
        return t * t / 2 + xp.clip(-z, min=0.0)

    def derivative(self, z: Array, *, xp: Any) -> Array:
        return -xp.clip(1 - z, min=0.0, max=1.0)

    def second_derivative(self, z: Array, *, xp: Any) -> Array:
        return xp.astype((z > 0) & (z < 1), z.dtype)


class PerceptronState(NamedTuple):
    w: Array
    b: Array


@dataclasses.dataclass(frozen=True)
class AveragedPerceptron(calopt.Algorithm):
    """Averaged perceptron: w ← w + η·y·x for every misclassified row, the model the mean iterate.

    Rosenblatt's rule on mini-batches (the batch's mistakes summed, divided by its size),
    with Freund and Schapire's averaging (Machine Learning 37, 1999), which calopt's loop
    applies: ``parts`` declares it, and the step η is chosen on held-out data when unset
    (``tunables``). It minimises no loss and serves any measure through the tuned
    threshold. Sample weights weigh each row's step.
    """

    name: ClassVar[str] = "averaged-perceptron"
    family: ClassVar[str] = "any"
    needs_reward: ClassVar[bool] = False
    tunables: ClassVar[tuple[calopt.Tunable, ...]] = (calopt.Tunable("step", (0.1, 1.0, 10.0)),)

    #: Step η (unset: chosen by calopt's trial among the tunable candidates).
    step: float | None = None

    def check_params(self) -> None:
        if self.step is not None:
            self.require_positive("step")

    def parts(self) -> tuple[Any, ...]:
        return (calopt.IterateAverage(),)

    def init(self, problem: calopt.Problem) -> PerceptronState:
        return PerceptronState(problem.zeros(problem.n_features), problem.scalar(0.0))

    def update(self, state: PerceptronState, batch: calopt.Batch, problem: calopt.Problem) -> PerceptronState:
        xp = problem.xp
        X, y, weight = batch
        mistakes = y * (X @ state.w + state.b) <= 0
        coef = xp.where(mistakes, y, xp.zeros_like(y)) * ((self.step or 1.0) / y.shape[0])
        if weight is not None:
            coef = coef * weight
        return PerceptronState(state.w + X.T @ coef, state.b + xp.sum(coef))


@calopt.hookimpl
def register_measures(register):
    """Register Youden's J (also known as ``informedness``)."""
    register(Youden, aliases=("informedness",))


@calopt.hookimpl
def register_losses(register):
    """Register the smoothed hinge loss."""
    register(SmoothedHinge)


@calopt.hookimpl
def register_algorithms(register):
    """Register the averaged perceptron."""
    register(AveragedPerceptron)


@calopt.hookimpl
def register_default_losses(register):
    """calopt asks every algorithm for a loss; the perceptron uses none, and says so with the hinge
    (its rule is the subgradient of the hinge at margin 0)."""
    register("hinge", algorithm="averaged-perceptron")

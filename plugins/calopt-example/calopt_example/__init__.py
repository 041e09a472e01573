"""calopt-example: a third-party calopt plugin with one measure and one loss.

calopt finds this module through the ``calopt`` entry point in this package's
pyproject.toml, imports it, and calls the two hooks below. Each hook receives a
``register`` callback; calopt owns the names, aliases, duplicate detection and the
parsing of ``name:key=value`` specs, so a plugin only hands over its classes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import calopt

__all__ = ["BalancedAccuracy", "SmoothedHinge", "register_losses", "register_measures"]

Array = Any


@dataclasses.dataclass(frozen=True)
class BalancedAccuracy(calopt.ConcaveMeasure):
    """Balanced accuracy (TPR + TNR) / 2, the mean of the two class recalls.

    Ψ(P, N) = (P + N) / 2 is linear, so in Ψ(P, N) = min over (α, β) of α·P + β·N − Ψ*(α, β)
    the dual region is the single point (1/2, 1/2), where Ψ* = 0 and ∇Ψ* = 0; the
    projection onto the region is that point.
    """

    name: ClassVar[str] = "balanced-accuracy"
    dual_start: ClassVar[tuple[float, float]] = (0.5, 0.5)

    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        return (tpr + tnr) / 2

    def conjugate(self, alpha: Array, beta: Array, *, xp: Any) -> Array:
        return xp.zeros_like(alpha)

    def conjugate_grad(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        return xp.zeros_like(alpha), xp.zeros_like(beta)

    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        return xp.full_like(alpha, 0.5), xp.full_like(beta, 0.5)


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


@calopt.hookimpl
def register_measures(register):
    """Register balanced accuracy (also known as ``bacc``)."""
    register(BalancedAccuracy, aliases=("bacc",))


@calopt.hookimpl
def register_losses(register):
    """Register the smoothed hinge loss."""
    register(SmoothedHinge)

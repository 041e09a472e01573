"""calopt's built-in losses, registered through the ``calopt`` entry-point group.

Five margin losses F(z), z = y·wᵀx (spec, "Losses (calibrated surrogates) and
rewards"): logistic, calibrated hinge (paper 000, eq. 3), squared, exponential and
hinge. Every method is elementwise on arrays of any shape, keeps the input's dtype and
device (constants are Python scalars, which the array API standard casts to the array's
dtype), and stays finite without warnings for margins up to ±1e4 in float32 and float64.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from calopt.hookspecs import hookimpl
from calopt.losses import Loss

__all__ = ["CalibratedHinge", "Exponential", "Hinge", "Logistic", "Squared"]

Array = Any


@dataclasses.dataclass(frozen=True)
class Logistic(Loss):
    """Logistic loss log(1 + exp(-z)), computed without overflow (paper 000, eq. 2)."""

    name: ClassVar[str] = "logistic"
    family: ClassVar[str] = "smooth"
    smooth: ClassVar[bool] = True
    calibrated: ClassVar[bool] = True
    reward: ClassVar[bool] = True
    max_curvature: ClassVar[float | None] = 0.25

    def value(self, z: Array, *, xp: Any) -> Array:
        # log(1 + e^{-z}) = max(0, -z) + log1p(e^{-|z|}); the exponent is never positive.
        return xp.maximum(-z, 0.0) + xp.log1p(xp.exp(-xp.abs(z)))

    def derivative(self, z: Array, *, xp: Any) -> Array:
        # F'(z) = -sigmoid(-z); with e = e^{-|z|}, sigmoid(-z) is e/(1+e) for z ≥ 0, 1/(1+e) else.
        e = xp.exp(-xp.abs(z))
        return -xp.where(z >= 0, e, xp.ones_like(e)) / (1 + e)

    def value_and_derivative(self, z: Array, *, xp: Any) -> tuple[Array, Array]:
        # value and derivative above, sharing e = e^{-|z|} (the same operations on the same numbers)
        e = xp.exp(-xp.abs(z))
        return xp.maximum(-z, 0.0) + xp.log1p(e), -xp.where(z >= 0, e, xp.ones_like(e)) / (1 + e)

    def second_derivative(self, z: Array, *, xp: Any) -> Array:
        # F''(z) = sigmoid(z)·sigmoid(-z) = e/(1+e)², with e = e^{-|z|} (even in z). Rounding
        # can exceed the exact bound F'' ≤ F''(0) = 1/4 by an ulp near 0; the minimum restores it.
        e = xp.exp(-xp.abs(z))
        return xp.minimum(e / ((1 + e) * (1 + e)), 0.25)


@dataclasses.dataclass(frozen=True)
class CalibratedHinge(Loss):
    """Calibrated hinge max(0, -z) - log(2 + |z|): convex, differentiable (paper 000, eq. 3)."""

    name: ClassVar[str] = "calibrated-hinge"
    family: ClassVar[str] = "smooth"
    smooth: ClassVar[bool] = True
    calibrated: ClassVar[bool] = True
    #: Negative for large margins, so 1 − F is unbounded: not a reward.
    reward: ClassVar[bool] = False
    max_curvature: ClassVar[float | None] = 0.25

    def value(self, z: Array, *, xp: Any) -> Array:
        return xp.maximum(-z, 0.0) - xp.log(2 + xp.abs(z))

    def derivative(self, z: Array, *, xp: Any) -> Array:
        # -1/(2+z) for z ≥ 0 and -1 + 1/(2-z) for z < 0; both are -1/2 at 0.
        inverse = 1 / (2 + xp.abs(z))
        return xp.where(z >= 0, -inverse, inverse - 1)

    def second_derivative(self, z: Array, *, xp: Any) -> Array:
        # 1/(2+|z|)², at most F''(0) = 1/4 (paper 000, remark after eq. 3).
        inverse = 1 / (2 + xp.abs(z))
        return inverse * inverse


@dataclasses.dataclass(frozen=True)
class Squared(Loss):
    """Squared loss (1 - z)²."""

    name: ClassVar[str] = "squared"
    family: ClassVar[str] = "smooth"
    smooth: ClassVar[bool] = True
    calibrated: ClassVar[bool] = True
    #: Increasing for z > 1, so not a reward.
    reward: ClassVar[bool] = False
    max_curvature: ClassVar[float | None] = 2.0

    def value(self, z: Array, *, xp: Any) -> Array:
        residual = 1 - z
        return residual * residual

    def derivative(self, z: Array, *, xp: Any) -> Array:
        return 2 * (z - 1)

    def second_derivative(self, z: Array, *, xp: Any) -> Array:
        return xp.full_like(z, 2)


@dataclasses.dataclass(frozen=True)
class Exponential(Loss):
    """Exponential loss exp(-z), its exponent clipped so that it stays finite.

    The exponent -z is clipped at ⌊log(largest finite value of the dtype)⌋ (88 in
    float32, 709 in float64), so value and derivatives stay finite and keep their sign
    for very negative margins; below z = −88 (float32) or −709 (float64) they are flat.
    """

    name: ClassVar[str] = "exponential"
    family: ClassVar[str] = "smooth"
    smooth: ClassVar[bool] = True
    calibrated: ClassVar[bool] = True
    reward: ClassVar[bool] = True
    #: F''(z) = e^{-z} is unbounded: no smoothness constant (gradient descent refuses it).
    max_curvature: ClassVar[float | None] = None

    @staticmethod
    def _clipped_exp(z: Array, *, xp: Any) -> Array:
        largest_exponent = math.floor(math.log(xp.finfo(z.dtype).max))
        return xp.exp(xp.minimum(-z, float(largest_exponent)))

    def value(self, z: Array, *, xp: Any) -> Array:
        return self._clipped_exp(z, xp=xp)

    def derivative(self, z: Array, *, xp: Any) -> Array:
        return -self._clipped_exp(z, xp=xp)

    def second_derivative(self, z: Array, *, xp: Any) -> Array:
        return self._clipped_exp(z, xp=xp)


@dataclasses.dataclass(frozen=True)
class Hinge(Loss):
    """Hinge loss max(0, 1 - z); reward min(1, z) (subgradient methods only)."""

    name: ClassVar[str] = "hinge"
    family: ClassVar[str] = "nonsmooth"
    smooth: ClassVar[bool] = False
    calibrated: ClassVar[bool] = True
    reward: ClassVar[bool] = True
    #: Not differentiable at z = 1: no smoothness constant (use the subgradient method).
    max_curvature: ClassVar[float | None] = None

    def value(self, z: Array, *, xp: Any) -> Array:
        return xp.maximum(1 - z, 0.0)

    def derivative(self, z: Array, *, xp: Any) -> Array:
        # The subgradient -1[z < 1] of the spec: 0 at the kink z = 1 (the right derivative).
        return xp.astype(z >= 1, z.dtype) - 1

    def second_derivative(self, z: Array, *, xp: Any) -> Array:
        # 0 wherever it is defined (everywhere but z = 1, where 0 is returned too).
        return xp.zeros_like(z)

    # The rewards in one operation each: the solvers call them on every mini-batch.
    def reward_value(self, z: Array, *, xp: Any) -> Array:
        return xp.minimum(z, 1.0)

    def reward_derivative(self, z: Array, *, xp: Any) -> Array:
        return xp.astype(z < 1, z.dtype)


@hookimpl
def register_losses(register):
    """Register the built-in losses."""
    for loss in (Logistic, CalibratedHinge, Squared, Exponential, Hinge):
        register(loss)

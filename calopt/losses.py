"""Margin losses F(z), z = y·wᵀx, and the rewards r = 1 − F(z) built from them.

A loss gives its value, derivative (a subgradient where it is not differentiable)
and second derivative elementwise on arrays of any shape, stably for margins up to
±1e4 in float32 and float64. Flags say whether it is smooth, classification
calibrated, and usable as a reward for the non-decomposable solvers (non-negative and
non-increasing, so that 1 − F is bounded above by 1; spec, "Losses and rewards").
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

from calopt.components import Component

__all__ = ["Loss"]

Array = Any


@dataclasses.dataclass(frozen=True)
class Loss(Component):
    """A margin loss F(z)."""

    kind: ClassVar[str] = "loss"
    #: Differentiable everywhere (gradient methods); False means subgradients only.
    smooth: ClassVar[bool] = True
    #: Classification calibrated.
    calibrated: ClassVar[bool] = True
    #: Non-negative and non-increasing: 1 − F is a reward bounded above by 1.
    reward: ClassVar[bool] = False
    #: sup_z F''(z), the curvature bound that makes the ERM objective smooth (gradient
    #: descent's step 1/M); None where F is not differentiable or F'' is unbounded.
    max_curvature: ClassVar[float | None] = None

    @abc.abstractmethod
    def value(self, z: Array, *, xp: Any) -> Array:
        """F(z)."""
        raise NotImplementedError

    @abc.abstractmethod
    def derivative(self, z: Array, *, xp: Any) -> Array:
        """F'(z) (a subgradient where F is not differentiable)."""
        raise NotImplementedError

    def value_and_derivative(self, z: Array, *, xp: Any) -> tuple[Array, Array]:
        """(F(z), F'(z)): what a full-batch solver evaluates each pass (a loss may share work
        between the two; the same numbers as :meth:`value` and :meth:`derivative`)."""
        return self.value(z, xp=xp), self.derivative(z, xp=xp)

    @abc.abstractmethod
    def second_derivative(self, z: Array, *, xp: Any) -> Array:
        """F''(z) where it is defined (0 almost everywhere for piecewise-linear losses)."""
        raise NotImplementedError

    def reward_value(self, z: Array, *, xp: Any) -> Array:
        """r = 1 − F(z)."""
        return 1 - self.value(z, xp=xp)

    def reward_derivative(self, z: Array, *, xp: Any) -> Array:
        """dr/dz = −F'(z)."""
        return -self.derivative(z, xp=xp)

    @classmethod
    def properties(cls) -> dict[str, Any]:
        return {"smooth": cls.smooth, "calibrated": cls.calibrated, "reward": cls.reward}

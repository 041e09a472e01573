"""The concave measures of paper 002, Table 1: Min, H-mean, Q-mean and G-mean of (TPR, TNR).

On K > 2 classes each is the same mean of the K per-class recalls (``psi_classes``), over
the classes in the labels or the predictions (:meth:`calopt.ConcaveMeasure.from_classes`):
G-mean is imbalanced-learn's ``geometric_mean_score(average="multiclass")``.

Each gives Ψ, its concave conjugate Ψ* and ∇Ψ* on the sufficient dual region A_Ψ, and
the Euclidean projection onto A_Ψ. The projections work elementwise on arrays of any
shape with a fixed amount of work and no host synchronisation: Min and Q-mean in closed
form, H-mean in closed form piece by piece (the nearest point of its parabola arc is
the root of a depressed cubic), G-mean by a few bisection steps and then Newton's
method for the foot point on the hyperbola αβ = 1/4.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from calopt.measures import ConcaveMeasure, safe_divide

__all__ = ["GMean", "HMean", "Min", "QMean"]

Array = Any


def _zeros(alpha: Array, beta: Array, *, xp: Any) -> Array:
    return xp.zeros_like(alpha + beta)


def _mean_over(values: Array, present: Array, *, xp: Any) -> Array:
    """The mean of ``values`` over the ``present`` classes (0 when none is)."""
    count = xp.sum(xp.astype(present, values.dtype), axis=-1)
    return safe_divide(xp.sum(xp.where(present, values, xp.zeros_like(values)), axis=-1), count, xp=xp)


def _any_zero(recalls: Array, present: Array, *, xp: Any) -> Array:
    """Whether a present class has recall 0 (a mean of reciprocals or logarithms is then 0)."""
    return xp.any(present & (recalls == 0), axis=-1) | ~xp.any(present, axis=-1)


def _choose(condition: Array, first: tuple, second: tuple, *, xp: Any) -> tuple:
    """The pair ``first`` where ``condition`` holds, else ``second`` (elementwise)."""
    return tuple(xp.where(condition, x, y) for x, y in zip(first, second))


@dataclasses.dataclass(frozen=True)
class _Homogeneous(ConcaveMeasure):
    """A positively homogeneous Ψ (min, H-mean, G-mean): Ψ* = 0 and ∇Ψ* = 0 on its
    dual region (paper 002, Table 1)."""

    constant_conjugate_grad: ClassVar[tuple[float, float] | None] = (0.0, 0.0)
    float_projection: ClassVar[bool] = True  # the projections below use only calopt.scalars.FLOATS

    def conjugate(self, alpha: Array, beta: Array, *, xp: Any) -> Array:
        return _zeros(alpha, beta, xp=xp)

    def conjugate_grad(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        zeros = _zeros(alpha, beta, xp=xp)
        return zeros, xp.zeros_like(zeros)


@dataclasses.dataclass(frozen=True)
class Min(_Homogeneous):
    """Min of TPR and TNR: min(P, N)."""

    name: ClassVar[str] = "min"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: The dual optimum when P = N.
    dual_start: ClassVar[tuple[float, float]] = (0.5, 0.5)

    multiclass: ClassVar[str | None] = "the smallest per-class recall"

    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        return xp.minimum(tpr, tnr)

    def psi_classes(self, recalls: Array, present: Array, *, xp: Any) -> Array:
        smallest = xp.min(xp.where(present, recalls, xp.ones_like(recalls)), axis=-1)
        return xp.where(xp.any(present, axis=-1), smallest, xp.zeros_like(smallest))

    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        """Onto the segment α + β = 1, α, β ≥ 0: project onto the line, then clip."""
        on_line = (alpha - beta + 1) * 0.5
        alpha_new = xp.clip(on_line, 0.0, 1.0)
        return alpha_new, 1 - alpha_new


@dataclasses.dataclass(frozen=True)
class HMean(_Homogeneous):
    """Harmonic mean of TPR and TNR: 2PN / (P + N)."""

    name: ClassVar[str] = "hmean"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: The dual optimum when P = N (on the parabola √α + √β = √2).
    dual_start: ClassVar[tuple[float, float]] = (0.5, 0.5)

    multiclass: ClassVar[str | None] = "the harmonic mean of the per-class recalls"

    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        return safe_divide(2 * tpr * tnr, tpr + tnr, xp=xp)

    def psi_classes(self, recalls: Array, present: Array, *, xp: Any) -> Array:
        usable = present & (recalls > 0)
        inverse = xp.where(usable, 1 / xp.where(usable, recalls, xp.ones_like(recalls)), xp.zeros_like(recalls))
        mean = _mean_over(inverse, present, xp=xp)
        return xp.where(_any_zero(recalls, present, xp=xp), xp.zeros_like(mean), safe_divide(xp.ones_like(mean), mean, xp=xp))

    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        """Onto {√α + √β ≥ √2} ∩ {α² + β² ≤ 4} ∩ R+².

        The region lies between the parabola arc (2(1−t)², 2t²), t ∈ [0, 1], and the
        quarter circle of radius 2, which meet at the corners (2, 0) and (0, 2). A point
        outside projects, by the normal cones of the pieces: from the quadrant beyond
        the circle radially onto it; else with a + b > 2 (so a < 0 or b < 0) onto the
        corner on its side; else onto the arc (corners included).
        """
        a, b = alpha, beta
        zero, two = xp.zeros_like(a), xp.full_like(a, 2.0)
        # Nearest point of the arc: (z − x(t))·x'(t) = 0 is, with u = t − 1/2, the
        # depressed cubic u³ + p·u + q = 0, p = (3 − a − b)/4, q = (a − b)/8. For
        # a + b < 3 (p > 0) it has one real root, stably
        # u = −2√(p/3)·sinh(asinh((3q/2p)·√(3/p))/3). The arc is used only where
        # a + b ≤ 2; the floor on p keeps the discarded values elsewhere finite.
        p = xp.maximum((3 - a - b) * 0.25, xp.full_like(a, 0.125))
        q = (a - b) * 0.125
        root = xp.sqrt(p / 3)
        u = -2 * root * xp.sinh(xp.asinh(1.5 * q / (p * root)) / 3)
        t = xp.clip(u + 0.5, 0.0, 1.0)
        best = (2 * (1 - t) ** 2, 2 * t**2)

        corner = _choose(a < 0, (zero, two), (two, zero), xp=xp)
        best = _choose(a + b > 2, corner, best, xp=xp)
        radius = xp.hypot(a, b)
        radial = (a >= 0) & (b >= 0) & (radius > 2)
        scale = 2 / xp.where(radial, radius, xp.ones_like(radius))
        best = _choose(radial, (a * scale, b * scale), best, xp=xp)

        inside = (
            (a >= 0)
            & (b >= 0)
            & (xp.sqrt(xp.maximum(a, zero)) + xp.sqrt(xp.maximum(b, zero)) >= math.sqrt(2))
            & (radius <= 2)
        )
        return _choose(inside, (a, b), best, xp=xp)


@dataclasses.dataclass(frozen=True)
class QMean(ConcaveMeasure):
    """Quadratic mean of the error rates: 1 − √(((1−P)² + (1−N)²)/2)."""

    name: ClassVar[str] = "qmean"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: The dual optimum when P = N (on the arc α² + β² = 1/2).
    dual_start: ClassVar[tuple[float, float]] = (0.5, 0.5)
    float_projection: ClassVar[bool] = True

    multiclass: ClassVar[str | None] = "1 − the root mean square of the per-class error rates"

    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        return 1 - xp.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) * 0.5)

    def psi_classes(self, recalls: Array, present: Array, *, xp: Any) -> Array:
        value = 1 - xp.sqrt(_mean_over((1 - recalls) ** 2, present, xp=xp))
        return xp.where(xp.any(present, axis=-1), value, xp.zeros_like(value))

    def conjugate(self, alpha: Array, beta: Array, *, xp: Any) -> Array:
        return alpha + beta - 1

    constant_conjugate_grad: ClassVar[tuple[float, float] | None] = (1.0, 1.0)

    def conjugate_grad(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        ones = xp.ones_like(alpha + beta)
        return ones, xp.ones_like(ones)

    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        """Onto the quarter disc α² + β² ≤ 1/2, α, β ≥ 0: clip to the quadrant, then
        shrink onto the disc (exact for a ball centred at the cone's apex). The factor
        r/max(|z|, r) is exactly 1 inside the disc; SPADE calls this every mini-batch,
        so it is arithmetic on the inputs, without ``where`` or new constant arrays."""
        radius = math.sqrt(0.5)
        a, b = xp.maximum(alpha, 0.0), xp.maximum(beta, 0.0)
        scale = radius / xp.maximum(xp.hypot(a, b), radius)
        return a * scale, b * scale


@dataclasses.dataclass(frozen=True)
class GMean(_Homogeneous):
    """Geometric mean of TPR and TNR: √(P·N)."""

    name: ClassVar[str] = "gmean"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: The dual optimum when P = N (on the hyperbola αβ = 1/4).
    dual_start: ClassVar[tuple[float, float]] = (0.5, 0.5)
    #: The dual region is unbounded: SPADE adds ε(t) = t^(-1/4) to the rewards.
    lipschitz: ClassVar[bool] = False
    #: Bisection steps that narrow the bracket of the foot point, then Newton steps
    #: from above: float64 accuracy for points up to 1e9 from the origin (measured:
    #: 8 + 4 steps already suffice there, 6 + 5 too).
    bisection_steps: ClassVar[int] = 3
    newton_steps: ClassVar[int] = 4

    multiclass: ClassVar[str | None] = "the geometric mean of the per-class recalls"

    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        return xp.sqrt(tpr * tnr)

    def psi_classes(self, recalls: Array, present: Array, *, xp: Any) -> Array:
        usable = present & (recalls > 0)
        logs = xp.where(usable, xp.log(xp.where(usable, recalls, xp.ones_like(recalls))), xp.zeros_like(recalls))
        mean = _mean_over(logs, present, xp=xp)
        return xp.where(_any_zero(recalls, present, xp=xp), xp.zeros_like(mean), xp.exp(mean))

    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        """Onto {αβ ≥ 1/4} ∩ R+², a convex region bounded by one branch of a hyperbola.

        A point outside projects onto the foot point (e^u/2, e^(−u)/2) of the
        hyperbola; with (a, b) sorted so that a ≥ b, u ≥ 0 is the unique root of
        g(u) = sinh(2u) − a·e^u + b·e^(−u), and g is increasing and convex right of it.
        Fujiwara's bound on the positive root of s⁴ − 2a·s³ + 2b·s − 1 (s = e^u) brackets
        u; bisection narrows the bracket and Newton's method from its upper end then
        decreases monotonically to the root.
        """
        swap = alpha < beta
        a, b = xp.maximum(alpha, beta), xp.minimum(alpha, beta)
        # (SPADE projects every mini-batch: constants are Python numbers, shared terms
        # are computed once)
        bound = 2 * xp.maximum(xp.maximum(2 * a, (2 * xp.maximum(-b, 0.0)) ** (1 / 3)), 2**-0.25)
        # The foot point lies up and to the right of (a, b): e^u/2 ≥ a, and e^(−u)/2 ≥ b
        # when b > 0. So u ∈ [log 2a, −log 2b], a narrow bracket for the points near the
        # hyperbola that SPADE's dual steps produce (discarded values for points inside);
        # b ≤ 1/(2·bound) leaves the bound as it is (up to rounding).
        lower = xp.log(xp.maximum(2 * a, 1.0))
        upper = xp.log(xp.minimum(bound, 0.5 / xp.maximum(b, 0.5 / bound)))
        upper = xp.maximum(upper, lower)  # crossed only for points inside

        for _ in range(self.bisection_steps):
            middle = (lower + upper) * 0.5
            s = xp.exp(middle)
            r = 1 / s
            root_above = (s * s - r * r) * 0.5 - a * s + b * r < 0  # g(middle) < 0
            lower = xp.where(root_above, middle, lower)
            upper = xp.where(root_above, upper, middle)
        u, ones = upper, xp.ones_like(upper)
        for _ in range(self.newton_steps):
            s = xp.exp(u)
            r = 1 / s
            s2, r2, a_s, b_r = s * s, r * r, a * s, b * r
            g = (s2 - r2) * 0.5 - a_s + b_r  # g(u)
            slope = s2 + r2 - a_s - b_r  # g'(u)
            # slope > 0 all the way down for points outside; the guard and the clip
            # only keep the (discarded) values for points inside finite
            # clip to the bracket (maximum/minimum: array-api-compat's clip costs more)
            u = xp.minimum(xp.maximum(u - g / xp.where(slope > 0, slope, ones), lower), upper)
        foot_a = xp.exp(u) * 0.5
        foot_b = 0.25 / foot_a
        foot = _choose(swap, (foot_b, foot_a), (foot_a, foot_b), xp=xp)
        inside = (alpha >= 0) & (beta >= 0) & (alpha * beta >= 0.25)
        return _choose(inside, (alpha, beta), foot, xp=xp)

"""Performance measures as functions of (TPR, TNR): the two families the solvers use.

A *concave* measure Ψ(P, N) (min, H-, Q-, G-mean) exposes Ψ, its concave conjugate Ψ*,
∇Ψ* and the Euclidean projection onto its sufficient dual region A_Ψ (paper 002,
Table 1): that is all SPADE needs. A *pseudo-linear* measure
(a0 + a1·P + a2·N) / (b0 + b1·P + b2·N) (F-β, Jaccard, Gower-Legendre; paper 002,
Table 2, with the F-β correction of the spec) exposes its coefficients as functions of
the positive rate p: that is all AMP and STAMP need.

Every method takes its namespace as the required keyword ``xp`` and works elementwise
on arrays of any shape (0-d included); zero divided by zero is 0, as in scikit-learn.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

from calopt.backends import backend_of
from calopt.components import Component

__all__ = [
    "ConcaveMeasure",
    "Measure",
    "PseudoLinearMeasure",
    "confusion_counts",
    "safe_divide",
]

Array = Any


def safe_divide(numerator: Array, denominator: Array, *, xp: Any) -> Array:
    """``numerator / denominator`` with 0 where the denominator is 0 (no warning)."""
    nonzero = denominator != 0
    ones = xp.ones_like(denominator)
    return xp.where(nonzero, numerator / xp.where(nonzero, denominator, ones), xp.zeros_like(ones))


def confusion_counts(y_true: Array, y_pred: Array, *, xp: Any, dtype: Any = None,
                     weight: Array | None = None) -> tuple:
    """(TP, FP, TN, FN) as 0-d arrays, for labels and predictions in {-1, +1}; sums of the
    sample ``weight`` when given."""
    dtype = xp.float64 if dtype is None else dtype
    positive, predicted = y_true > 0, y_pred > 0

    def count(mask: Array) -> Array:
        if weight is not None:
            return xp.sum(xp.where(mask, weight, xp.zeros_like(weight)))
        return xp.sum(xp.astype(mask, dtype))

    return (
        count(positive & predicted),
        count(~positive & predicted),
        count(~positive & ~predicted),
        count(positive & ~predicted),
    )


@dataclasses.dataclass(frozen=True)
class Measure(Component):
    """A performance measure of a binary classifier; greater is better."""

    kind: ClassVar[str] = "measure"

    @abc.abstractmethod
    def from_rates(self, tpr: Array, tnr: Array, p: float, *, xp: Any) -> Array:
        """The measure from the true positive and negative rates and the positive rate p."""
        raise NotImplementedError

    @abc.abstractmethod
    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The measure from confusion counts (arrays or 0-d arrays of one float dtype)."""
        raise NotImplementedError

    def score(self, y_true: Array, y_pred: Array, *, xp: Any = None) -> float:
        """The measure of predictions ``y_pred`` against ``y_true`` (both in {-1, +1})."""
        if xp is None:
            xp = backend_of(y_true, y_pred).xp
        counts = confusion_counts(xp.asarray(y_true), xp.asarray(y_pred), xp=xp)
        return float(self.from_counts(*counts, xp=xp))

    @classmethod
    def properties(cls) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True)
class ConcaveMeasure(Measure):
    """Ψ(P, N), concave in (TPR, TNR): solved by SPADE through its conjugate.

    Ψ(P, N) = min over (α, β) in the dual region of α·P + β·N − Ψ*(α, β).
    """

    family: ClassVar[str] = "concave"
    #: A point of the dual region to start the dual iterate from.
    dual_start: ClassVar[tuple[float, float]] = (0.5, 0.5)
    #: Whether the dual region is bounded (False for G-mean: not Lipschitz).
    lipschitz: ClassVar[bool] = True
    #: ∇Ψ* as two numbers where it is constant on the dual region (Table 1: (0, 0) for a
    #: positively homogeneous Ψ, (1, 1) for Q-mean), so a solver can skip ``conjugate_grad``
    #: on every mini-batch; None: it varies, call ``conjugate_grad``.
    constant_conjugate_grad: ClassVar[tuple[float, float] | None] = None
    #: Whether ``project`` also runs on Python floats with ``xp=calopt.scalars.FLOATS``
    #: (only the functions that namespace has); SPADE then projects on the host that way.
    float_projection: ClassVar[bool] = False

    @abc.abstractmethod
    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        """Ψ(P, N)."""
        raise NotImplementedError

    @abc.abstractmethod
    def conjugate(self, alpha: Array, beta: Array, *, xp: Any) -> Array:
        """Ψ*(α, β) for (α, β) in the dual region."""
        raise NotImplementedError

    @abc.abstractmethod
    def conjugate_grad(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        """∇Ψ*(α, β) for (α, β) in the dual region (paper 002, Table 1)."""
        raise NotImplementedError

    @abc.abstractmethod
    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        """Euclidean projection of (α, β) onto the dual region; a fixed amount of work,
        without host synchronisation, so it can run on every mini-batch."""
        raise NotImplementedError

    def from_rates(self, tpr: Array, tnr: Array, p: float, *, xp: Any) -> Array:
        return self.psi(tpr, tnr, xp=xp)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """Ψ(TPR, TNR), where a class absent from both the labels and the predictions has
        rate 1 (imbalanced-learn's ``geometric_mean_score`` and scikit-learn's
        ``balanced_accuracy_score`` leave it out, so a perfect prediction of a one-class
        sample scores 1); other undefined rates, and an empty sample, give 0."""
        positive_absent = ((tp + fn + fp) == 0) & (tn > 0)
        negative_absent = ((tn + fp + fn) == 0) & (tp > 0)
        tpr = xp.where(positive_absent, xp.ones_like(tp), safe_divide(tp, tp + fn, xp=xp))
        tnr = xp.where(negative_absent, xp.ones_like(tn), safe_divide(tn, tn + fp, xp=xp))
        return self.psi(tpr, tnr, xp=xp)


@dataclasses.dataclass(frozen=True)
class PseudoLinearMeasure(Measure):
    """(a0 + a1·P + a2·N) / (b0 + b1·P + b2·N): solved by AMP / STAMP."""

    family: ClassVar[str] = "pseudo-linear"

    @abc.abstractmethod
    def coefficients(self, p: float) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """The coefficients ``(a0, a1, a2), (b0, b1, b2)`` at positive rate ``p`` (0 < p < 1)."""
        raise NotImplementedError

    def from_rates(self, tpr: Array, tnr: Array, p: float, *, xp: Any) -> Array:
        (a0, a1, a2), (b0, b1, b2) = self.coefficients(p)
        return safe_divide(a0 + a1 * tpr + a2 * tnr, b0 + b1 * tpr + b2 * tnr, xp=xp)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """From the rates at the counts' positive rate (0 when a class is absent).

        Subclasses should override this with the popular count form, which also
        defines the degenerate cases; this default serves measures that only give
        their coefficients. It reads the positive rate on the host once.
        """
        positives, total = xp.max(tp + fn), xp.max(tp + fn + tn + fp)
        p = float(positives / total) if float(total) > 0 else 0.0
        if not 0.0 < p < 1.0:
            return xp.zeros_like(tp + fp)
        tpr = safe_divide(tp, tp + fn, xp=xp)
        tnr = safe_divide(tn, tn + fp, xp=xp)
        return self.from_rates(tpr, tnr, p, xp=xp)

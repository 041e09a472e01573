"""The pseudo-linear measures of paper 002, Table 2: F-β, Jaccard and Gower-Legendre; and precision.

Each is a ratio of affine functions of (TPR, TNR) whose coefficients depend on the
label skew θ = (1 − p)/p (spec, "Performance measures"; the F-β row carries the spec's
correction of the paper's β²·TP to β²·FN). From counts, each uses its popular form and
is 0 where its denominator is 0, as scikit-learn's scores with ``zero_division=0``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from calopt.errors import DataError
from calopt.measures import PseudoLinearMeasure, safe_divide

__all__ = ["FBeta", "GowerLegendre", "Jaccard", "Precision"]

Array = Any
#: The largest β or σ: their squares and products with counts (up to 1e12) stay far from
#: overflow; β = 1e6 already weighs recall 10¹² times precision.
_LARGEST = 1e6
Coefficients = tuple[tuple[float, float, float], tuple[float, float, float]]


def _skew(p: float) -> float:
    """θ = (1 − p)/p, the ratio of negatives to positives (0 < p < 1)."""
    if not 0.0 < p < 1.0:
        raise DataError(
            f"the positive rate p must be in (0, 1), got {p!r}: the labels need both classes"
        )
    return (1.0 - p) / p


@dataclasses.dataclass(frozen=True)
class FBeta(PseudoLinearMeasure):
    """F-β score: (1+β²)TP / ((1+β²)TP + β²FN + FP); β = 1 is F1."""

    name: ClassVar[str] = "fbeta"
    #: Weight of recall relative to precision.
    beta: float = 1.0

    def check_params(self) -> None:
        self.require_positive("beta", at_most=_LARGEST)

    def coefficients(self, p: float) -> Coefficients:
        theta, beta2 = _skew(p), float(self.beta) ** 2
        return (0.0, 1.0 + beta2, 0.0), (beta2 + theta, 1.0, -theta)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        weighted_tp = (1 + float(self.beta) ** 2) * tp
        return safe_divide(weighted_tp, weighted_tp + float(self.beta) ** 2 * fn + fp, xp=xp)


@dataclasses.dataclass(frozen=True)
class Jaccard(PseudoLinearMeasure):
    """Jaccard index: TP / (TP + FP + FN)."""

    name: ClassVar[str] = "jaccard"

    def coefficients(self, p: float) -> Coefficients:
        theta = _skew(p)
        return (0.0, 1.0, 0.0), (1.0 + theta, 0.0, -theta)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        return safe_divide(tp, tp + fp + fn, xp=xp)


@dataclasses.dataclass(frozen=True)
class GowerLegendre(PseudoLinearMeasure):
    """Gower-Legendre index: (TP + TN) / (TP + σ(FP + FN) + TN)."""

    name: ClassVar[str] = "gower-legendre"
    #: Weight of the errors (1: accuracy, 2: Rogers-Tanimoto).
    sigma: float = 0.5

    def check_params(self) -> None:
        self.require_positive("sigma", at_most=_LARGEST)

    def coefficients(self, p: float) -> Coefficients:
        theta, sigma = _skew(p), float(self.sigma)
        return (0.0, 1.0, theta), (sigma * (1.0 + theta), 1.0 - sigma, theta * (1.0 - sigma))

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        correct = tp + tn
        return safe_divide(correct, correct + float(self.sigma) * (fp + fn), xp=xp)


@dataclasses.dataclass(frozen=True)
class Precision(PseudoLinearMeasure):
    """Precision: TP / (TP + FP).

    p·P / (p·P + (1−p)(1−N)), divided by p: (0, 1, 0) / (θ, 1, −θ). Optimised alone its optimum
    is a few sure positives; it is meant to be optimised subject to rate constraints.
    """

    name: ClassVar[str] = "precision"

    def coefficients(self, p: float) -> Coefficients:
        theta = _skew(p)
        return (0.0, 1.0, 0.0), (theta, 1.0, -theta)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        return safe_divide(tp, tp + fp, xp=xp)

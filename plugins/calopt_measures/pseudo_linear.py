"""The pseudo-linear measures of paper 002, Table 2: F-β, Jaccard and Gower-Legendre; and precision.

Each is a ratio of affine functions of (TPR, TNR) whose coefficients depend on the
label skew θ = (1 − p)/p (spec, "Performance measures"; the F-β row carries the spec's
correction of the paper's β²·TP to β²·FN). From counts, each uses its popular form and
is 0 where its denominator is 0, as scikit-learn's scores with ``zero_division=0``.

On K > 2 classes each is the macro average of its one-vs-rest values (``average="micro"``:
the value of the counts summed over the classes), as scikit-learn's ``f1_score``,
``fbeta_score``, ``jaccard_score`` and ``precision_score`` average them; accuracy is the
share of rows whose class is predicted.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from calopt.errors import DataError
from calopt.measures import PseudoLinearMeasure, safe_divide

__all__ = ["Accuracy", "FBeta", "GowerLegendre", "Jaccard", "Precision"]

Array = Any
#: The largest β or σ: their squares and products with counts (up to 1e12) stay far from
#: overflow; β = 1e6 already weighs recall 10¹² times precision.
_LARGEST = 1e6
Coefficients = tuple[tuple[float, float, float], tuple[float, float, float]]


#: The averages over K > 2 classes (a parameter of the measures below).
AVERAGES = ("macro", "micro")


def _check_average(measure: PseudoLinearMeasure) -> None:
    measure.require(measure.average in AVERAGES,
                    f"average must be one of {', '.join(AVERAGES)}, got {measure.average!r}")


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
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: Weight of recall relative to precision.
    beta: float = 1.0
    #: Over K > 2 classes: ``macro`` (the mean of the one-vs-rest values) or ``micro``.
    average: str = "macro"

    def check_params(self) -> None:
        self.require_positive("beta", at_most=_LARGEST)
        _check_average(self)

    @property
    def spec(self) -> str:
        """``f1`` (its alias) for β = 1, as a user names it: ``fbeta:beta=2.0`` otherwise."""
        spec = super().spec
        if float(self.beta) != 1.0:
            return spec
        return "f1" + spec[len(self.name):]

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
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: Over K > 2 classes: ``macro`` (the mean of the one-vs-rest values) or ``micro``.
    average: str = "macro"

    def check_params(self) -> None:
        _check_average(self)

    def coefficients(self, p: float) -> Coefficients:
        theta = _skew(p)
        return (0.0, 1.0, 0.0), (1.0 + theta, 0.0, -theta)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        return safe_divide(tp, tp + fp + fn, xp=xp)


@dataclasses.dataclass(frozen=True)
class GowerLegendre(PseudoLinearMeasure):
    """Gower-Legendre index: (TP + TN) / (TP + σ(FP + FN) + TN)."""

    name: ClassVar[str] = "gower-legendre"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: Weight of the errors (1: accuracy, 2: Rogers-Tanimoto).
    sigma: float = 0.5
    #: Over K > 2 classes: ``macro`` (the mean of the one-vs-rest values) or ``micro``.
    average: str = "macro"

    def check_params(self) -> None:
        self.require_positive("sigma", at_most=_LARGEST)
        _check_average(self)

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
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    #: Over K > 2 classes: ``macro`` (the mean of the one-vs-rest values) or ``micro``.
    average: str = "macro"

    def check_params(self) -> None:
        _check_average(self)

    def coefficients(self, p: float) -> Coefficients:
        theta = _skew(p)
        return (0.0, 1.0, 0.0), (theta, 1.0, -theta)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        return safe_divide(tp, tp + fp, xp=xp)


@dataclasses.dataclass(frozen=True)
class Accuracy(PseudoLinearMeasure):
    """Accuracy: (TP + TN) / n, the share of rows whose class is predicted.

    p·P + (1−p)·N: (0, p, 1−p) / (1, 0, 0). On imbalanced data the constant majority
    prediction scores high; it is here to compare with, and for rate constraints.
    """

    name: ClassVar[str] = "accuracy"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    multiclass: ClassVar[str | None] = "the share of rows whose class is predicted"

    def coefficients(self, p: float) -> Coefficients:
        _skew(p)  # both classes needed, as for every pseudo-linear measure
        return (0.0, p, 1.0 - p), (1.0, 0.0, 0.0)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        return safe_divide(tp + tn, tp + fp + tn + fn, xp=xp)

    def from_classes(self, matrix: Array, *, xp: Any) -> Array:
        eye = xp.eye(matrix.shape[-1], dtype=matrix.dtype, device=getattr(matrix, "device", None))
        return safe_divide(xp.sum(matrix * eye, axis=(-2, -1)), xp.sum(matrix, axis=(-2, -1)), xp=xp)

    def from_class_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The share of rows predicted right, from the one-vs-rest counts."""
        return safe_divide(xp.sum(tp, axis=-1), xp.sum(tp + fn, axis=-1), xp=xp)

"""The plain rates TPR (recall) and TNR as measures to optimise (precision, pseudo-linear, is in
:mod:`calopt_measures.pseudo_linear`).

TPR and TNR are linear in (TPR, TNR), so concave (SPADE solves them): Ψ(P, N) = P has the
one-point dual region {(1, 0)} and Ψ* = 0 there (Ψ(P, N) = N: {(0, 1)}). From counts each
is 0 where its denominator is, as scikit-learn's ``recall_score`` with ``zero_division=0``.
Optimised alone each has a trivial optimum (predict everything positive for recall);
they are meant to be optimised subject to rate constraints ("the best recall with
precision ≥ 0.9": ``-m recall --constraint "precision>=0.9"``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from calopt.measures import ConcaveMeasure, safe_divide

__all__ = ["TNR", "TPR", "BalancedAccuracy"]

Array = Any


@dataclasses.dataclass(frozen=True)
class _Linear(ConcaveMeasure):
    """Ψ(P, N) = a·P + b·N for one of (a, b) = (1, 0), (0, 1): its dual region is the point (a, b)."""

    constant_conjugate_grad: ClassVar[tuple[float, float] | None] = (0.0, 0.0)

    def psi(self, tpr: Array, tnr: Array, *, xp: Any) -> Array:
        a, b = self.dual_start
        return a * tpr + b * tnr

    def conjugate(self, alpha: Array, beta: Array, *, xp: Any) -> Array:
        return xp.zeros_like(alpha + beta)

    def conjugate_grad(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        zeros = xp.zeros_like(alpha + beta)
        return zeros, xp.zeros_like(zeros)

    def project(self, alpha: Array, beta: Array, *, xp: Any) -> tuple[Array, Array]:
        """Onto the one point of the dual region."""
        a, b = self.dual_start
        zeros = xp.zeros_like(alpha + beta)
        return zeros + a, zeros + b


@dataclasses.dataclass(frozen=True)
class TPR(_Linear):
    """True positive rate (recall, sensitivity): TP / (TP + FN)."""

    name: ClassVar[str] = "tpr"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    dual_start: ClassVar[tuple[float, float]] = (1.0, 0.0)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        return safe_divide(tp, tp + fn, xp=xp)


@dataclasses.dataclass(frozen=True)
class TNR(_Linear):
    """True negative rate (specificity): TN / (TN + FP)."""

    name: ClassVar[str] = "tnr"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    dual_start: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        return safe_divide(tn, tn + fp, xp=xp)


@dataclasses.dataclass(frozen=True)
class BalancedAccuracy(_Linear):
    """Balanced accuracy: the mean of the per-class recalls, (TPR + TNR)/2 for two classes."""

    name: ClassVar[str] = "balanced-accuracy"
    monotone: ClassVar[bool] = True  #: (:attr:`~calopt.measures.Measure.monotone`)
    dual_start: ClassVar[tuple[float, float]] = (0.5, 0.5)
    multiclass: ClassVar[str | None] = "the mean of the per-class recalls"

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """(TPR + TNR)/2 over the classes in the labels, as scikit-learn's ``balanced_accuracy_score``
        (a class absent from the labels is left out; a one-class sample scores its one recall)."""
        positives, negatives = tp + fn, tn + fp
        total = safe_divide(tp, positives, xp=xp) + safe_divide(tn, negatives, xp=xp)
        count = xp.astype(positives > 0, total.dtype) + xp.astype(negatives > 0, total.dtype)
        return safe_divide(total, count, xp=xp)

    def from_classes(self, matrix: Array, *, xp: Any) -> Array:
        true = xp.sum(matrix, axis=-1)
        eye = xp.eye(matrix.shape[-1], dtype=matrix.dtype, device=getattr(matrix, "device", None))
        recalls = safe_divide(xp.sum(matrix * eye, axis=-1), true, xp=xp)
        return safe_divide(xp.sum(recalls, axis=-1), xp.sum(xp.astype(true > 0, recalls.dtype), axis=-1), xp=xp)

    def from_class_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The mean recall over the classes in the labels, from the one-vs-rest counts."""
        true = tp + fn
        recalls = safe_divide(tp, true, xp=xp)
        return safe_divide(xp.sum(recalls, axis=-1), xp.sum(xp.astype(true > 0, recalls.dtype), axis=-1), xp=xp)

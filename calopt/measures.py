"""Performance measures as functions of (TPR, TNR): the two families the solvers use.

A *concave* measure Ψ(P, N) (min, H-, Q-, G-mean) exposes Ψ, its concave conjugate Ψ*,
∇Ψ* and the Euclidean projection onto its sufficient dual region A_Ψ (paper 002,
Table 1): that is all SPADE needs. A *pseudo-linear* measure
(a0 + a1·P + a2·N) / (b0 + b1·P + b2·N) (F-β, Jaccard, Gower-Legendre; paper 002,
Table 2, with the F-β correction of the spec) exposes its coefficients as functions of
the positive rate p: that is all AMP and STAMP need.

Every method takes its namespace as the required keyword ``xp`` and works elementwise
on arrays of any shape (0-d included); zero divided by zero is 0, as in scikit-learn.

**More than two classes.** A measure that extends to K classes says how in
``multiclass`` and computes its value from a K × K confusion matrix
(:meth:`Measure.from_confusion`, rows the true classes, columns the predicted ones;
:func:`confusion_matrix`). A concave measure is then its function of the K per-class
recalls (``psi_classes``: G-mean, H-mean, Q-mean, min; for K = 2 exactly Ψ(TPR, TNR)), a
pseudo-linear one the macro (or, with ``average="micro"``, micro) average of its
one-vs-rest values, as scikit-learn's ``f1_score(average="macro")`` is. The classes
counted are those present in the labels or the predictions, as scikit-learn's and
imbalanced-learn's scores count them; a measure may define its own (balanced accuracy,
accuracy).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

from calopt.backends import backend_of
from calopt.components import Component
from calopt.errors import ParameterError

__all__ = [
    "ConcaveMeasure",
    "Measure",
    "PseudoLinearMeasure",
    "class_counts",
    "confusion_counts",
    "confusion_matrix",
    "has_class_count_form",
    "is_monotone",
    "present_classes",
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


def confusion_matrix(y_true: Array, y_pred: Array, n_classes: int, *, xp: Any, dtype: Any = None,
                     weight: Array | None = None) -> Array:
    """The K × K confusion matrix of class codes 0..K−1 (rows: true classes, columns: predicted),
    sums of the sample ``weight`` when given: one-hot rows multiplied, so any namespace serves."""
    dtype = xp.float64 if dtype is None else dtype
    classes = xp.arange(n_classes, device=getattr(y_true, "device", None))
    true = xp.astype(xp.reshape(y_true, (-1, 1)) == classes, dtype)
    predicted = xp.astype(xp.reshape(y_pred, (-1, 1)) == classes, dtype)
    if weight is not None:
        true = true * xp.reshape(xp.astype(weight, dtype), (-1, 1))
    return xp.matmul(xp.permute_dims(true, (1, 0)), predicted)


def class_counts(matrix: Array, *, xp: Any) -> tuple[Array, Array, Array, Array]:
    """Per class, one against the rest: (TP, FP, TN, FN) as (..., K) arrays of (..., K, K) matrices."""
    K = matrix.shape[-1]
    eye = xp.eye(K, dtype=matrix.dtype, device=getattr(matrix, "device", None))
    tp = xp.sum(matrix * eye, axis=-1)
    true, predicted = xp.sum(matrix, axis=-1), xp.sum(matrix, axis=-2)
    fn, fp = true - tp, predicted - tp
    return tp, fp, xp.sum(true, axis=-1, keepdims=True) - tp - fp - fn, fn


def present_classes(matrix: Array, *, xp: Any) -> Array:
    """Whether each class occurs among the labels or the predictions (a (..., K) boolean array)."""
    return (xp.sum(matrix, axis=-1) > 0) | (xp.sum(matrix, axis=-2) > 0)


def _present(tp: Array, fp: Array, fn: Array) -> Array:
    """:func:`present_classes` from the one-vs-rest counts (TP + FN: the class's rows, TP + FP: its
    predictions; the same booleans, the counts being sums of non-negative numbers)."""
    return (tp + fn > 0) | (tp + fp > 0)


def has_class_count_form(measure: Measure) -> bool:
    """Whether ``measure``'s K-class value is :meth:`Measure.from_class_counts` of the one-vs-rest
    counts: the class that defines its ``from_class_counts`` is the one that defines its
    ``from_classes``, or derives from it (a measure that overrides ``from_classes`` alone may use
    more of the matrix than those counts)."""
    def owner(name: str) -> type:
        return next(c for c in type(measure).__mro__ if name in vars(c))

    counts = owner("from_class_counts")
    return counts is not Measure and issubclass(counts, owner("from_classes"))


@dataclasses.dataclass(frozen=True)
class Measure(Component):
    """A performance measure of a binary classifier; greater is better."""

    kind: ClassVar[str] = "measure"
    #: How the measure extends to more than two classes (shown by ``calopt list-measures``);
    #: None: it does not, and :meth:`from_confusion` refuses K > 2.
    multiclass: ClassVar[str | None] = None
    #: Whether the value never falls when a false negative becomes a true positive, nor rises when
    #: a true negative becomes a false positive, at any counts of the two classes (their totals
    #: fixed): a threshold search may then bound a block of cuts by its best corner and skip the
    #: blocks that cannot hold the best (:func:`calopt.training.threshold.best_cut`, the same cut).
    #: It counts only where the class that defines the value declares it (:func:`is_monotone`).
    monotone: ClassVar[bool] = False

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

    def from_confusion(self, matrix: Array, *, xp: Any) -> Array:
        """The measure from a K × K confusion matrix (:func:`confusion_matrix`).

        For K = 2 the classes are (negative, positive) in that order and the value is
        :meth:`from_counts`'s, exactly; K > 2 calls :meth:`from_classes`. A stack of matrices
        (..., K, K) gives a value for each.
        """
        K = matrix.shape[-1]
        if K == 2:
            return self.from_counts(matrix[..., 1, 1], matrix[..., 0, 1], matrix[..., 0, 0], matrix[..., 1, 0], xp=xp)
        if self.multiclass is None:
            raise ParameterError(f"measure {self.spec!r} is for two classes; the data have {K}")
        return self.from_classes(matrix, xp=xp)

    def from_classes(self, matrix: Array, *, xp: Any) -> Array:
        """The measure of K > 2 classes from their confusion matrix (measures with ``multiclass``):
        :meth:`from_class_counts` of its one-vs-rest counts, unless a measure defines its own."""
        return self.from_class_counts(*class_counts(matrix, xp=xp), xp=xp)

    def from_class_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The measure of K > 2 classes from each class's counts against the rest ((..., K) arrays:
        TP, FP, TN, FN), for a measure whose K-class value depends on the confusion matrix only
        through them (every one calopt defines). A class is present when it is in the labels or
        the predictions (TP + FN > 0 or TP + FP > 0). The decision rule's search evaluates many
        candidate rules at once this way (O(K) numbers each, not K²):
        :func:`has_class_count_form` says when it may."""
        raise NotImplementedError(f"measure {self.name!r} declares multiclass but defines neither from_classes "
                                  f"nor from_class_counts")

    @classmethod
    def properties(cls) -> dict[str, Any]:
        """What ``calopt list-measures`` shows beside the name: how the measure extends to K classes."""
        return {"multiclass": cls.multiclass}


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

    def psi_classes(self, recalls: Array, present: Array, *, xp: Any) -> Array:
        """Ψ of the K per-class ``recalls`` (K,) over the classes ``present`` (a boolean (K,)): the
        measures that extend to K classes define it (G-mean: the geometric mean of the recalls)."""
        raise NotImplementedError(f"measure {self.name!r} declares multiclass but defines no psi_classes")

    def from_class_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """Ψ of the per-class recalls of the classes in the labels or the predictions; a class
        predicted but absent from the labels has recall 0, as imbalanced-learn's
        ``geometric_mean_score(average="multiclass")`` counts it."""
        return self.psi_classes(safe_divide(tp, tp + fn, xp=xp), _present(tp, fp, fn), xp=xp)

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
    multiclass: ClassVar[str | None] = "the mean of its one-vs-rest values (average=micro: of the summed counts)"

    def from_class_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The macro average of the one-vs-rest values over the classes in the labels or the
        predictions (scikit-learn's ``average="macro"``), or with ``average="micro"`` the value
        of the counts summed over the classes."""
        if getattr(self, "average", "macro") == "micro":
            return self.from_counts(xp.sum(tp, axis=-1), xp.sum(fp, axis=-1), xp.sum(tn, axis=-1),
                                    xp.sum(fn, axis=-1), xp=xp)
        present = _present(tp, fp, fn)
        values = xp.where(present, self.from_counts(tp, fp, tn, fn, xp=xp), xp.zeros_like(tp))
        return safe_divide(xp.sum(values, axis=-1), xp.sum(xp.astype(present, values.dtype), axis=-1), xp=xp)

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


def is_monotone(measure: Measure) -> bool:
    """Whether ``measure`` is :attr:`Measure.monotone`, as declared by the class that defines its
    value: the one that defines ``from_counts``, or, where that is :class:`ConcaveMeasure`'s
    (Ψ of the rates), the one that defines ``psi``. A subclass that redefines the value without
    declaring it again is not (its parent's promise need not hold for it)."""
    def owner(name: str) -> type:
        return next(c for c in type(measure).__mro__ if name in vars(c))

    value = owner("from_counts")
    if value is ConcaveMeasure:
        value = owner("psi")
    return vars(value).get("monotone") is True

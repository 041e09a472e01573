"""Scores and scikit-learn scorers for every calopt measure: :func:`measure_score`, :func:`make_scorer`.

scikit-learn has none of G-, H-, Q-mean, min(TPR, TNR), Gower-Legendre or the plugins'
measures; :func:`make_scorer` makes any registered one a ``scoring=``. The checks of
labels and sample weights here are the estimator's too (:mod:`calopt.sklearn.estimator`).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.metrics import make_scorer as sklearn_make_scorer

from calopt import registry
from calopt.backends import get_backend, to_numpy
from calopt.measures import confusion_counts, confusion_matrix

__all__ = ["labels_1d", "make_scorer", "measure_score", "sample_weights"]

_NUMPY = get_backend("numpy").xp


def measure_score(y_true: Any, y_pred: Any, *, measure: Any, pos_label: Any = 1, average: str | None = None,
                  labels: Any = None, sample_weight: Any = None) -> float:
    """The value of a calopt ``measure`` for predicted labels ``y_pred`` against ``y_true``.

    ``average=None`` (the default) is ``"binary"`` for two labels and, for more (in the labels,
    the predictions or ``labels``), ``"multiclass"`` where the measure has a K-class form, else
    ``"macro"``: what :meth:`CaloptClassifier.score <calopt.sklearn.CaloptClassifier.score>` gives
    for a model trained for it. ``average="binary"`` scores ``pos_label`` against the other label, as
    scikit-learn's ``f1_score`` does (pos_label 1 by default; give it for other labels);
    ``average="macro"`` is the mean over ``labels`` (default: every label in ``y_true``
    or ``y_pred``) of each label against the rest, what a one-vs-rest
    :class:`~calopt.sklearn.CaloptClassifier` reports. ``average="multiclass"`` is the
    measure's own definition on K classes (:meth:`calopt.Measure.from_confusion`: G-mean of the
    K per-class recalls, as imbalanced-learn's ``geometric_mean_score(average="multiclass")``;
    F1 the macro F1; see ``calopt list-measures``), over ``labels`` (default: every label in
    ``y_true`` or ``y_pred``). Counts are sums of ``sample_weight`` when given.
    Undefined ratios follow the measure (calopt's: 0/0 is 0, as scikit-learn's scores with
    ``zero_division=0``; for the concave measures a class absent from both the truth and
    the predictions has rate 1, as imbalanced-learn's ``geometric_mean_score``).
    """
    measure = registry.get_measure(measure)
    y_true, y_pred = labels_1d(y_true, "y_true"), labels_1d(y_pred, "y_pred")
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true has {y_true.shape[0]} labels but y_pred has {y_pred.shape[0]}")
    weight = None if sample_weight is None else sample_weights(sample_weight, y_true.shape[0], zero_ok=True)
    present = np.unique(np.concatenate([y_true, y_pred]))
    if average is None:
        classes = present.size if labels is None else max(present.size, np.unique(np.asarray(labels)).size)
        average = "binary" if classes <= 2 else "multiclass" if measure.multiclass else "macro"
    if average == "binary":
        if present.size > 2:
            raise ValueError(f"Target is multiclass but average='binary'; use average='multiclass' (the "
                             f"measure over the classes) or 'macro' (each against the rest) "
                             f"(labels: {present.tolist()})")
        if present.size == 2 and pos_label not in present.tolist():
            raise ValueError(f"pos_label={pos_label!r} is not a valid label: it should be one of "
                             f"{present.tolist()}")
        positives = np.asarray([pos_label], dtype=object)
    elif average == "macro":
        positives = present if labels is None else np.asarray(labels)
    elif average == "multiclass":
        return _multiclass_score(measure, y_true, y_pred, present if labels is None else np.asarray(labels), weight)
    else:
        raise ValueError(f"average must be 'binary', 'macro' or 'multiclass', got {average!r}")
    values = []
    for label in positives:  # the measure of `label` against the rest
        truth = np.where(y_true == label, 1.0, -1.0)
        predicted = np.where(y_pred == label, 1.0, -1.0)
        counts = confusion_counts(truth, predicted, xp=_NUMPY, weight=weight)
        values.append(float(measure.from_counts(*counts, xp=_NUMPY)))
    return float(np.mean(values)) if values else 0.0


def _multiclass_score(measure: Any, y_true: np.ndarray, y_pred: np.ndarray, labels: np.ndarray,
                      weight: np.ndarray | None) -> float:
    """The measure on the K × K confusion matrix of ``labels`` (rows whose truth or prediction is
    another label are left out, as scikit-learn's scores with ``labels=`` leave them)."""
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    index_true, index_pred = np.searchsorted(labels[order], y_true), np.searchsorted(labels[order], y_pred)
    known = (index_true < labels.size) & (index_pred < labels.size)
    known[known] &= (labels[order][index_true[known]] == y_true[known]) & (labels[order][index_pred[known]] == y_pred[known])
    codes_true, codes_pred = order[index_true[known]], order[index_pred[known]]
    matrix = confusion_matrix(codes_true, codes_pred, labels.size, xp=_NUMPY,
                              weight=None if weight is None else weight[known])
    return float(measure.from_confusion(matrix, xp=_NUMPY))


def make_scorer(measure: Any, *, pos_label: Any = None, average: str | None = None, labels: Any = None) -> Any:
    """A scikit-learn scorer of predicted labels for any registered measure (plugins' too).

    ``make_scorer("gmean")``, ``make_scorer("fbeta:beta=2")``: use it as ``scoring=`` in
    ``cross_val_score`` and ``GridSearchCV``, or as the objective of
    ``TunedThresholdClassifierCV``. ``pos_label`` (default 1, as scikit-learn's own
    scorers), ``average`` and ``labels`` are those of :func:`measure_score`; give
    ``pos_label`` when the labels are not {0, 1} or {−1, 1}. With more than two classes it
    scores the measure's K-class form by default (G-mean of the per-class recalls, macro F1,
    ...), as the estimator's ``score`` does. An unknown measure is an error here, not at the
    first score.
    """
    spec = registry.get_measure(measure).spec
    options = {key: value for key, value in (("pos_label", pos_label), ("average", average), ("labels", labels))
               if value is not None}
    return sklearn_make_scorer(measure_score, response_method="predict", measure=spec, **options)


def labels_1d(y: Any, what: str) -> np.ndarray:
    """Labels as a host 1-D NumPy array (from any array library, a list, a Series)."""
    labels = np.asarray(to_numpy(y))
    if labels.ndim != 1:
        labels = labels.reshape(-1) if labels.ndim == 2 and 1 in labels.shape else labels
    if labels.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {labels.shape}")
    return labels


def sample_weights(sample_weight: Any, n: int, zero_ok: bool = False) -> np.ndarray:
    """``sample_weight`` as a host float64 array of n finite weights ≥ 0, not all zero."""
    if isinstance(sample_weight, numbers.Number):
        sample_weight = np.full(n, sample_weight)
    weight = np.asarray(to_numpy(sample_weight), dtype=np.float64)
    if weight.shape != (n,):
        raise ValueError(f"sample_weight.shape == {weight.shape}, expected {(n,)}")
    if not np.all(np.isfinite(weight)) or np.any(weight < 0):
        raise ValueError("sample_weight must hold finite numbers ≥ 0")
    if not zero_ok and not np.any(weight > 0):
        raise ValueError("sample_weight is zero for every row: at least one weight must be positive")
    return weight

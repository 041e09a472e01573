"""Class labels: the ±1 and 0..C−1 codes the solvers use, and labels shown as users wrote them.

Labels arrive as the user's own values (floats from LIBSVM, strings or numbers from CSV,
anything two-valued from Python). They are encoded once, at the edge: binary problems
as float64 ±1 with the (negative, positive) labels kept for the model, multiclass ones
as integer codes into the sorted classes. Every problem is a one-line
:class:`~calopt.errors.DataError` naming the labels' source.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calopt.errors import DataError, one_line

__all__ = [
    "encode_among",
    "encode_binary",
    "encode_like",
    "encode_multiclass",
    "json_label",
    "label_text",
    "show_label",
]

#: Longest label shown in a message; longer ones are cut with an ellipsis.
_SHOWN_LABEL = 40


def json_label(value: Any) -> Any:
    """A class label as a JSON value (NumPy scalars become Python ones)."""
    return value.item() if isinstance(value, np.generic) else value


def label_text(value: Any) -> str:
    """A class label as users write it: ``7`` for 7.0, ``A`` for 'A' (output lines, JSON keys)."""
    value = json_label(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def show_label(value: Any) -> str:
    """A label for a message: ``1`` for 1.0, ``'g'`` for a string, cut when long."""
    value = json_label(value)
    text = one_line(label_text(value), _SHOWN_LABEL)
    return repr(text) if isinstance(value, str) else text


def _labels_array(labels: Any, source: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise DataError(f"labels must be 1-D, not of shape {labels.shape}", source=source)
    if labels.size == 0:
        raise DataError("no labels", source=source)
    if labels.dtype.kind == "f" and np.isnan(labels).any():
        raise DataError(f"label {int(np.flatnonzero(np.isnan(labels))[0])} is NaN", source=source)
    return labels


def encode_binary(
    labels: Any, *, positive: Any = None, source: str = "labels"
) -> tuple[np.ndarray, tuple[Any, Any]]:
    """Two-valued ``labels`` as float64 ±1, and ``(negative_label, positive_label)``.

    The positive class is ``positive`` when given (matched by value or by its string form,
    so ``"4"`` selects 4.0 and ``"+1"`` selects 1.0); otherwise the larger label: 1 for
    {-1, 1} and {0, 1}, True for booleans, 4 for {2, 4}, ``'h'`` for {'g', 'h'}.
    """
    labels = _labels_array(labels, source)
    classes = [c.item() for c in np.unique(labels)]
    if len(classes) != 2:
        shown = ", ".join(show_label(c) for c in classes[:5]) + (", …" if len(classes) > 5 else "")
        if len(classes) == 1:
            raise DataError(f"only one class ({shown}); a binary problem needs two", source=source)
        raise DataError(f"{len(classes)} classes ({shown}); a binary problem needs exactly two", source=source)
    if positive is None:
        positive_label = classes[1]
    else:
        positive_label = _match_label(positive, classes, source)
    negative_label = classes[0] if positive_label == classes[1] else classes[1]
    y = np.where(labels == positive_label, 1.0, -1.0)
    return y, (negative_label, positive_label)


def encode_like(values: Any, classes: tuple[Any, Any], *, source: str = "labels",
                unit: str = "row") -> np.ndarray:
    """Encode labels in {-1, +1} given the (negative, positive) labels of a binary problem.

    The values may use both labels or only one of them, but no third value (the error
    names the source and the ``unit`` of the position: ``row``, or ``line`` for a label file).
    """
    values = _labels_array(values, source)
    negative, positive = classes
    is_positive, is_negative = values == positive, values == negative
    unknown = np.flatnonzero(~(is_positive | is_negative))
    if unknown.size:
        row = int(unknown[0]) + 1
        raise DataError(f"{unit} {row}: label {show_label(values[row - 1])} is not one of "
                        f"the classes ({show_label(negative)} and {show_label(positive)})", source=source)
    return np.where(is_positive, 1.0, -1.0)


def _match_label(wanted: Any, classes: list[Any], source: str) -> Any:
    for c in classes:
        if type(wanted) is not str and wanted == c:
            return c
    text = str(wanted).strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    for c in classes:
        if text in (str(c), show_label(c).strip("'")):
            return c
        if isinstance(c, bool) and text.lower() == str(c).lower():
            return c
        if number is not None and isinstance(c, (int, float)) and number == c:
            return c
    raise DataError(f"positive class {show_label(wanted)} is not among the labels "
                    f"({' and '.join(show_label(c) for c in classes)})", source=source)


def encode_multiclass(labels: Any, *, source: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """Integer codes 0..K-1 for ``labels``, and the K sorted classes they index."""
    labels = _labels_array(labels, source)
    classes, codes = np.unique(labels, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), classes


def encode_among(labels: Any, classes: tuple[Any, ...], *, source: str = "labels") -> np.ndarray:
    """Codes 0..C-1 of ``labels`` among known ``classes``; an unknown label is a DataError."""
    labels = _labels_array(labels, source)
    codes = np.full(labels.shape[0], -1, dtype=np.int64)
    for code, label in enumerate(classes):  # == matches 7 and 7.0; a str never equals a number
        match = np.asarray(labels == label, dtype=bool)
        if match.shape == codes.shape:
            codes[match] = code
    unknown = np.flatnonzero(codes < 0)
    if unknown.size:
        def text(label: Any) -> str:
            return one_line(label_text(label), _SHOWN_LABEL)

        shown = ", ".join(text(c) for c in classes[:8]) + (", …" if len(classes) > 8 else "")
        raise DataError(f"row {int(unknown[0]) + 1}: label {text(labels[unknown[0]])} "
                        f"is not one of the model's classes ({shown})", source=source)
    return codes

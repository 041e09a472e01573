"""Class labels: the ±1 and 0..C−1 codes the solvers use, and labels shown as users wrote them.

Labels arrive as the user's own values (floats from LIBSVM, strings or numbers from CSV,
anything from Python: lists, NumPy arrays, pandas columns of any dtype), made a plain
NumPy array by :func:`label_values`. They are encoded once, at the edge: binary problems
as float64 ±1 with the (negative, positive) labels kept for the model, multiclass ones
as integer codes into the sorted classes. Every problem is a one-line
:class:`~calopt.errors.DataError` naming the labels' source.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from calopt.errors import DataError, one_line

__all__ = [
    "binary_classes",
    "encode_among",
    "encode_binary",
    "encode_like",
    "encode_multiclass",
    "json_label",
    "label_text",
    "label_values",
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


def _missing(values: np.ndarray) -> np.ndarray:
    """Where an object array holds no label: None, NaN, pandas' NA or NaT."""
    pandas = sys.modules.get("pandas")  # pd.NA and pd.NaT exist only once pandas is imported
    if pandas is not None:
        return np.asarray(pandas.isna(values), dtype=bool)
    return np.array([v is None or (isinstance(v, (float, np.floating, np.datetime64, np.timedelta64)) and v != v)
                     for v in values], dtype=bool)


def _kind(value: Any) -> str:
    """``text``, ``boolean``, ``number`` or ``other``: what one label of an object array is."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, (bool, np.bool_)):
        return "boolean"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "number"
    return "other"


def _from_objects(labels: np.ndarray, source: str) -> np.ndarray:
    """Labels held as Python objects (pandas object, string or categorical columns) as a plain
    NumPy array: text (``<U``), booleans, or numbers; a mixture is an error naming the row."""
    kinds = [_kind(v) for v in labels]
    other = next((i for i, k in enumerate(kinds) if k == "other"), None)
    if other is not None:
        raise DataError(f"row {other + 1}: label {show_label(labels[other])} of type "
                        f"{type(labels[other]).__name__} is not a class label (give text, numbers or booleans)",
                        source=source)
    found = set(kinds)
    if "text" in found and len(found) > 1:
        first = kinds.index("text")
        number = next(i for i, k in enumerate(kinds) if k != "text")
        raise DataError(f"row {first + 1}: label {show_label(labels[first])} is text where row {number + 1}'s "
                        f"({show_label(labels[number])}) is not; the labels must be all text or all numbers",
                        source=source)
    if found == {"text"}:
        return labels.astype(str)
    return np.asarray(labels.tolist())  # booleans stay booleans; numbers become int64 or float64


def label_values(labels: Any, *, source: str = "labels") -> np.ndarray:
    """``labels`` of any kind (a list, a NumPy array, a pandas Series of object, string,
    categorical, boolean or numeric dtype) as a 1-D NumPy array of text, booleans or numbers.

    A missing label (None, NaN, pandas' NA, NaT) is a one-line DataError naming its row
    (from 1); so are labels that mix text with numbers.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise DataError(f"labels must be 1-D, not of shape {labels.shape}", source=source)
    if labels.size == 0:
        raise DataError("no labels", source=source)
    kind = labels.dtype.kind
    if kind in "fcOMm":
        missing = np.isnat(labels) if kind in "Mm" else _missing(labels) if kind == "O" else np.isnan(labels)
        if missing.any():
            row = int(np.flatnonzero(missing)[0])
            value = labels[row]
            shown = "None" if value is None else "NaN" if isinstance(value, (float, np.floating)) else str(value)
            raise DataError(f"row {row + 1}: the label is missing ({shown})", source=source)
    if kind == "O":
        return _from_objects(labels, source)
    if kind == "S":
        return np.char.decode(labels, "utf-8", errors="replace")
    if kind in "McmV":
        raise DataError(f"labels of dtype {labels.dtype} are not class labels (give text, numbers or booleans)",
                        source=source)
    return labels


def binary_classes(classes: Any, counts: Any, *, positive: Any = None, source: str = "labels") -> tuple[Any, Any]:
    """The (negative, positive) labels of a two-class problem with these ``classes`` (sorted)
    and their row ``counts``.

    The positive class is ``positive`` when given (matched by value or by its string form,
    so ``"4"`` selects 4.0 and ``"+1"`` selects 1.0). Otherwise it is 1 for {0, 1} and
    {-1, 1} (as numbers or their text), True for booleans, and for any other labels the
    smaller class, the rare class imbalanced measures are about; two classes of equal
    size are an error asking for the positive class.
    """
    classes = [json_label(c) for c in classes]
    if len(classes) != 2:
        shown = ", ".join(show_label(c) for c in classes[:5]) + (", …" if len(classes) > 5 else "")
        if len(classes) == 1:
            raise DataError(f"only one class ({shown}); a binary problem needs two", source=source)
        raise DataError(f"{len(classes)} classes ({shown}); a binary problem needs exactly two", source=source)
    if positive is not None:
        positive_label = _match_label(positive, classes, source)
    elif _conventional(classes):
        positive_label = max(classes, key=_number)
    else:
        counts = [int(c) for c in counts]
        if counts[0] == counts[1]:
            raise DataError(f"the classes {show_label(classes[0])} and {show_label(classes[1])} have {counts[0]} "
                            f"rows each: name the positive class (--positive, or positive= in Python)",
                            source=source)
        positive_label = classes[int(np.argmin(counts))]
    negative_label = classes[0] if positive_label == classes[1] else classes[1]
    return negative_label, positive_label


def _number(value: Any) -> float | None:
    """A label's numeric value (``"-1"`` → −1.0), None for other text."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _conventional(classes: list[Any]) -> bool:
    """Whether two labels are {0, 1}, {−1, 1} or {False, True}, whose positive class is 1 (True)."""
    values = {_number(c) for c in classes}
    return values in ({0.0, 1.0}, {-1.0, 1.0})


def encode_binary(
    labels: Any, *, positive: Any = None, source: str = "labels"
) -> tuple[np.ndarray, tuple[Any, Any]]:
    """Two-valued ``labels`` as float64 ±1, and ``(negative_label, positive_label)``.

    The positive class is chosen by :func:`binary_classes`: ``positive`` when given, else 1
    for {0, 1} and {-1, 1}, True for booleans, and the smaller class for any other labels
    (``'fraud'`` among many ``'ok'``).
    """
    labels = label_values(labels, source=source)
    classes, counts = np.unique(labels, return_counts=True)
    negative_label, positive_label = binary_classes(classes, counts, positive=positive, source=source)
    y = np.where(labels == positive_label, 1.0, -1.0)
    return y, (negative_label, positive_label)


def encode_like(values: Any, classes: tuple[Any, Any], *, source: str = "labels",
                unit: str = "row") -> np.ndarray:
    """Encode labels in {-1, +1} given the (negative, positive) labels of a binary problem.

    The values may use both labels or only one of them, but no third value (the error
    names the source and the ``unit`` of the position: ``row``, or ``line`` for a label file).
    """
    values = label_values(values, source=source)
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
    labels = label_values(labels, source=source)
    classes, codes = np.unique(labels, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), classes


def encode_among(labels: Any, classes: tuple[Any, ...], *, source: str = "labels") -> np.ndarray:
    """Codes 0..C-1 of ``labels`` among known ``classes``; an unknown label is a DataError."""
    labels = label_values(labels, source=source)
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

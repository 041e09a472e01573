"""Data files in, :class:`Dataset` out: the one module that knows file formats.

Reads LIBSVM/svmlight (kept sparse), CSV and NPZ files, plain or compressed with bzip2 or
gzip. Every problem with an input becomes a one-line :class:`~calopt.errors.DataError`
that names the file, the line (or column) and what is wrong; nothing here trains or
writes anything. Labels are kept as read (:mod:`calopt.io.labels` encodes them).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import math
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from calopt.errors import DataError, ParameterError, UnknownNameError

__all__ = [
    "FORMATS",
    "Dataset",
    "align_features",
    "read_data",
    "read_label_file",
    "read_libsvm",
    "train_test_split",
]

#: Names accepted by ``read_data(format=...)``; ``svmlight`` = ``libsvm``, ``tsv`` = ``csv``.
FORMATS = ("csv", "libsvm", "npz", "svmlight", "tsv")
_CSV_SUFFIXES = (".csv", ".tsv", ".data")
_MAGIC = {"bz2": b"BZh", "gz": b"\x1f\x8b"}
_ZIP_MAGIC = b"PK\x03\x04"
_DECOMPRESSION_ERRORS = (OSError, EOFError, zlib.error)


@dataclass(frozen=True, eq=False)
class Dataset:
    """Features ``X`` (float64 ndarray, or CSR for LIBSVM), the labels as read, and where from.

    ``labels`` keeps the file's own values (floats for LIBSVM, strings or floats for CSV)
    so that a model can report classes the way the user wrote them; :func:`encode_binary`
    turns them into ±1.
    """

    X: Any
    labels: np.ndarray
    source: str = "<arrays>"

    def __post_init__(self) -> None:
        if getattr(self.X, "ndim", None) != 2:
            raise DataError(f"{self.source}: features must form a 2-D array")
        if np.ndim(self.labels) != 1 or len(self.labels) != self.X.shape[0]:
            raise DataError(
                f"{self.source}: {self.X.shape[0]} rows of features "
                f"but labels of shape {np.shape(self.labels)}"
            )

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def classes(self) -> np.ndarray:
        """The distinct labels, sorted."""
        return np.unique(self.labels)

    def __repr__(self) -> str:
        kind = "sparse" if sp.issparse(self.X) else "dense"
        return (
            f"Dataset(source={self.source!r}, n_samples={self.n_samples}, "
            f"n_features={self.n_features}, {kind}, classes={len(self.classes)})"
        )


# ----------------------------------------------------------------------------- opening


def _one_line(text: object, limit: int = 120) -> str:
    """``text`` squeezed onto one line and cut at ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _excerpt(line: bytes | str, limit: int = 60) -> str:
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")
    line = line.rstrip("\r\n")
    return repr(line) if len(line) <= limit else repr(line[:limit]) + "…"


def _compression(path: Path, source: str) -> str | None:
    """``"bz2"``, ``"gz"`` or ``None``, from the first bytes; a .bz2/.gz name must agree."""
    if not path.exists():
        raise DataError(f"{source}: no such file")
    if path.is_dir():
        raise DataError(f"{source}: is a directory, not a data file")
    try:
        with open(path, "rb") as f:
            magic = f.read(3)
    except OSError as exc:
        raise DataError(f"{source}: cannot read ({exc.strerror or exc})") from None
    found = next((kind for kind, m in _MAGIC.items() if magic.startswith(m)), None)
    named = next((kind for kind in _MAGIC if path.name.lower().endswith("." + kind)), None)
    if named and found != named:
        label = "bzip2" if named == "bz2" else "gzip"
        raise DataError(f"{source}: not a {label} file (the name ends in .{named})")
    return found


def _open(path: Path, compression: str | None):
    if compression == "bz2":
        return bz2.open(path, "rb")
    if compression == "gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _corrupt(source: str, compression: str | None, exc: BaseException) -> DataError:
    if compression:
        label = "bzip2" if compression == "bz2" else "gzip"
        return DataError(f"{source}: corrupt {label} data ({_one_line(exc)})")
    return DataError(f"{source}: cannot read ({_one_line(exc)})")


def _read_bytes(path: Path, source: str, compression: str | None, size: int = -1) -> bytes:
    """The (decompressed) content, or its first ``size`` bytes."""
    try:
        with _open(path, compression) as f:
            return f.read(size)
    except _DECOMPRESSION_ERRORS as exc:
        raise _corrupt(source, compression, exc) from None


#: Control bytes that never occur in a text data file (tab, line feed, VT, FF, CR do).
_BINARY = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")


def _check_text(head: bytes, source: str) -> None:
    """Refuse binary content: a control byte, or bytes that are not UTF-8, in ``head``."""
    found = _BINARY.search(head)
    if found:
        raise DataError(f"{source}: binary data (byte 0x{found.group()[0]:02x} at offset "
                        f"{found.start()}), not a LIBSVM, CSV or NPZ file")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the end of the head
            line = head.count(b"\n", 0, exc.start) + 1
            raise DataError(f"{source}: line {line}: not UTF-8 text (byte 0x{head[exc.start]:02x} at "
                            f"offset {exc.start}); calopt reads UTF-8 LIBSVM or CSV files, or .npz") from None


def _first_line(head: bytes) -> bytes:
    """The first line that is neither blank nor a ``#`` comment."""
    lines = (line.strip() for line in head.split(b"\n"))
    return next((line for line in lines if line and not line.startswith(b"#")), b"")


def _format(path: Path, format: str | None, head: bytes) -> str:
    """``"libsvm"``, ``"csv"`` or ``"npz"``: as given, else from the name (and a zip header)."""
    if format is not None:
        key = str(format).strip().lower()
        if key not in FORMATS:
            raise UnknownNameError("format", str(format), FORMATS)
        return {"svmlight": "libsvm", "tsv": "csv"}.get(key, key)
    name = path.name.lower()
    for ending in (".bz2", ".gz"):
        name = name.removesuffix(ending)
    suffix = Path(name).suffix
    if suffix == ".npz" or head.startswith(_ZIP_MAGIC):
        return "npz"
    if suffix in _CSV_SUFFIXES or (suffix == ".txt" and b"," in _first_line(head)):
        return "csv"
    return "libsvm"


# ----------------------------------------------------------------------------- reading


def read_data(
    path: str | os.PathLike,
    *,
    format: str | None = None,
    label_column: int | str = -1,
    n_features: int | None = None,
    delimiter: str | None = None,
) -> Dataset:
    """Read a LIBSVM/svmlight, CSV or NPZ file (optionally ``.bz2``/``.gz``) into a Dataset.

    The format comes from the name without its compression suffix: ``.npz`` (arrays ``X``
    and ``y``), ``.csv``/``.tsv``/``.data`` (and ``.txt`` with commas) are CSV, anything
    else is LIBSVM, read with scikit-learn's ``load_svmlight_file`` (``zero_based="auto"``:
    indices are one-based unless a 0 appears) and kept sparse. CSV options:
    ``label_column`` (an index, negative from the end, or a header name) and ``delimiter``
    (sniffed from ``,``, ``;``, tab and ``, ``; a header row is recognized by its
    non-numeric feature fields). ``n_features`` pads narrower files with zero columns and
    rejects wider ones. Raises :class:`DataError` for anything unreadable.
    """
    source = os.fspath(path)
    source = source.decode(errors="replace") if isinstance(source, bytes) else source
    path = Path(source)
    compression = _compression(path, source)
    head = _read_bytes(path, source, compression, 1 << 16)
    kind = _format(path, format, head)
    if kind == "npz":
        dataset = _read_npz(path, source, compression)
    else:
        if not head.strip() and len(head) < 1 << 16:
            raise DataError(f"{source}: empty file")
        _check_text(head, source)
        if kind == "csv":
            dataset = _read_csv(path, source, compression, label_column, delimiter)
        else:
            dataset = _read_libsvm(path, source, compression)
    if n_features is not None:
        dataset = _align(dataset, n_features, f"expected {n_features} (n_features)")
    return dataset


def read_libsvm(path: str | os.PathLike, *, zero_based: bool | str = "auto") -> Dataset:
    """A LIBSVM/svmlight file (plain, .bz2 or .gz) with the given index base, kept sparse."""
    source = os.fspath(path)
    return _read_libsvm(Path(source), source, _compression(Path(source), source), zero_based)


def _read_libsvm(
    path: Path, source: str, compression: str | None, zero_based: bool | str = "auto"
) -> Dataset:
    """A LIBSVM/svmlight file through scikit-learn's parser; errors located by a re-scan."""
    from sklearn.datasets import load_svmlight_file

    try:
        with _open(path, compression) as f:
            X, labels = load_svmlight_file(f, dtype=np.float64, zero_based=zero_based)
    except _DECOMPRESSION_ERRORS as exc:
        raise _corrupt(source, compression, exc) from None
    except (ValueError, OverflowError) as exc:
        raise _libsvm_error(path, source, compression, zero_based, exc) from None
    if X.shape[0] == 0:
        raise DataError(f"{source}: no data lines (only blank lines or comments)")
    if not (np.isfinite(X.data).all() and np.isfinite(labels).all()):
        raise _libsvm_error(path, source, compression, zero_based, None, X=X)
    return Dataset(X.tocsr(), labels, source)


def _libsvm_problem(line: bytes, zero_based: bool | str) -> str | None:
    """What is wrong with one LIBSVM line (sklearn's grammar, plus non-finite values)."""
    tokens = line.split(b"#", 1)[0].split()
    if not tokens:
        return None
    try:
        label = float(tokens[0])
    except ValueError:
        return f"label {_excerpt(tokens[0], 20)} is not a number"
    if not math.isfinite(label):
        return f"label is {label}"
    previous = -1
    for position, token in enumerate(tokens[1:]):
        if position == 0 and token.startswith(b"qid:"):
            continue
        index_text, colon, value_text = token.partition(b":")
        if not colon:
            return f"{_excerpt(token, 20)} is not an index:value pair"
        try:
            index = int(index_text)
        except ValueError:
            return f"feature index {_excerpt(index_text, 20)} is not an integer"
        if index < 0 or (index == 0 and zero_based is False) or index >= 2**63:
            return f"feature index {index} is out of range"
        if index <= previous:
            return f"feature index {index} after {previous}: indices must increase"
        try:
            value = float(value_text)
        except ValueError:
            return f"feature {index}: value {_excerpt(value_text, 20)} is not a number"
        if not math.isfinite(value):
            return f"feature {index} is {value} (values must be finite)"
        previous = index
    return None


def _libsvm_error(
    path: Path,
    source: str,
    compression: str | None,
    zero_based: bool | str,
    exc: BaseException | None,
    X: Any = None,
) -> DataError:
    """Re-scan the text for the first bad line and describe it."""
    try:
        with _open(path, compression) as f:
            for number, line in enumerate(f, start=1):
                problem = _libsvm_problem(line, zero_based)
                if problem:
                    return DataError(f"{source}: line {number}: {problem} in {_excerpt(line)}")
    except _DECOMPRESSION_ERRORS as err:
        return _corrupt(source, compression, err)
    if X is not None:  # the scan disagreed with the parser: locate by row instead
        k = int(np.flatnonzero(~np.isfinite(X.data))[0]) if X.nnz else 0
        row = int(np.searchsorted(X.indptr, k, side="right")) - 1
        return DataError(f"{source}: data row {row + 1}: a label or feature is not finite")
    return DataError(f"{source}: not a LIBSVM/svmlight file ({_one_line(exc)})")


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{source}: line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})"
        ) from None


def _numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) for the non-blank lines, skipping a KEEL ``@`` header."""
    in_header = True
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or (in_header and stripped.startswith("@")):
            continue
        in_header = False
        yield number, line.rstrip("\r")


def _sniff_delimiter(line: str) -> str | None:
    """The most frequent of ``,`` ``;`` tab in ``line``; ``None`` (whitespace) if none."""
    counts = {d: line.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=counts.get)
    return best if counts[best] else None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _split_rows(
    lines: list[tuple[int, str]], delimiter: str | None, source: str
) -> list[list[str]]:
    if delimiter is None:
        return [line.split() for _, line in lines]
    reader = csv.reader((line for _, line in lines), delimiter=delimiter, skipinitialspace=True)
    try:
        return [[field.strip() for field in row] for row in reader]
    except csv.Error as exc:
        number = lines[min(reader.line_num, len(lines)) - 1][0]
        raise DataError(f"{source}: line {number}: {_one_line(exc)}") from None


def _read_csv(
    path: Path,
    source: str,
    compression: str | None,
    label_column: int | str,
    delimiter: str | None,
) -> Dataset:
    """A delimited text file: numeric feature columns and one label column."""
    text = _decode(_read_bytes(path, source, compression), source)
    lines = list(_numbered_lines(text))
    if not lines:
        raise DataError(f"{source}: empty file")
    if delimiter is None:
        delimiter = _sniff_delimiter(lines[0][1])
    else:
        delimiter = {"tab": "\t", "\\t": "\t", " ": None, "": None}.get(delimiter, delimiter)
        if delimiter is not None and delimiter.strip():
            delimiter = delimiter.strip()  # KEEL's ", " is "," with the spaces skipped
        if delimiter is not None and len(delimiter) != 1:
            raise ParameterError(f"delimiter must be one character (or ', '), not {delimiter!r}")
    rows = _split_rows(lines, delimiter, source)
    n_columns = len(rows[0])
    for (number, line), row in zip(lines, rows):
        if len(row) != n_columns:
            raise DataError(
                f"{source}: line {number}: {len(row)} fields where line {lines[0][0]} "
                f"has {n_columns} (delimiter {delimiter or 'whitespace'!r})"
            )
    if n_columns < 2:
        raise DataError(
            f"{source}: line {lines[0][0]}: one column only; need features and a label "
            f"(delimiter {delimiter or 'whitespace'!r})"
        )

    first = rows[0]

    def looks_like_header(label_index: int) -> bool:  # no feature field is a number
        return not any(_is_number(f) for c, f in enumerate(first) if c != label_index)

    header: list[str] | None = None
    if (
        isinstance(label_column, str)
        and label_column in first
        and looks_like_header(first.index(label_column))
    ):
        header, label_index = first, first.index(label_column)
    else:
        label_index = _column_index(label_column, first, n_columns, source, lines[0][0])
        if looks_like_header(label_index):
            header = first
    if header is not None:
        lines, rows = lines[1:], rows[1:]
        if not rows:
            raise DataError(f"{source}: a header line but no data lines")

    table = np.array(rows, dtype=str)
    label_text = table[:, label_index]
    feature_text = np.delete(table, label_index, axis=1)
    feature_columns = [c for c in range(n_columns) if c != label_index]

    def where(row: int, column: int) -> str:
        name = f" ({header[feature_columns[column]]!r})" if header else ""
        return f"line {lines[row][0]}, column {feature_columns[column] + 1}{name}"

    try:
        X = feature_text.astype(np.float64)
    except ValueError:
        X = np.empty(feature_text.shape)
        for (i, j), field in np.ndenumerate(feature_text):
            try:
                X[i, j] = float(field)
            except ValueError:
                raise DataError(
                    f"{source}: {where(i, j)}: {_excerpt(field, 30)} is not a number"
                ) from None
    bad = np.argwhere(~np.isfinite(X))
    if len(bad):
        i, j = bad[0]
        raise DataError(
            f"{source}: {where(i, j)}: {str(feature_text[i, j])!r} is not finite "
            "(features must be finite numbers)"
        )
    labels = _parse_labels(label_text, [n for n, _ in lines], source)
    return Dataset(X, labels, source)


def _column_index(
    label_column: int | str, first: list[str], n_columns: int, source: str, line: int
) -> int:
    """``label_column`` (an int, or a str naming a column or holding an int) as 0..n-1."""
    column = label_column
    if isinstance(column, str):
        try:
            column = int(column)
        except ValueError:
            names = ", ".join(repr(f) for f in first[:8]) + (", …" if n_columns > 8 else "")
            raise DataError(
                f"{source}: line {line}: no column named {label_column!r} (first line: {names})"
            ) from None
    if not -n_columns <= column < n_columns:
        raise DataError(
            f"{source}: label column {label_column} is out of range: the file has "
            f"{n_columns} columns"
        )
    return column % n_columns


def _parse_labels(text: np.ndarray, numbers: list[int], source: str) -> np.ndarray:
    """Labels as float64 when every one is a number, else as strings; no blanks or NaN."""
    blank = np.flatnonzero(np.char.str_len(text) == 0)
    if len(blank):
        raise DataError(f"{source}: line {numbers[blank[0]]}: the label is empty")
    try:
        values = text.astype(np.float64)
    except ValueError:
        if not all(_is_number(t) for t in text):
            return text
        values = np.array([float(t) for t in text])
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        first_bad = int(bad[0])
        raise DataError(
            f"{source}: line {numbers[first_bad]}: label {str(text[first_bad])!r} is not finite"
        )
    return values


def _read_npz(path: Path, source: str, compression: str | None) -> Dataset:
    """An ``.npz`` archive holding ``X`` (2-D, numeric) and ``y`` (1-D, same length)."""
    file = BytesIO(_read_bytes(path, source, compression)) if compression else path
    failures = (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)
    try:
        archive = np.load(file, allow_pickle=False)
    except failures as exc:
        raise DataError(f"{source}: not an NPZ archive ({_one_line(exc)})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataError(f"{source}: a single .npy array, not an NPZ archive with X and y")
    with archive:
        missing = [key for key in ("X", "y") if key not in archive.files]
        if missing:
            found = ", ".join(archive.files) or "nothing"
            raise DataError(
                f"{source}: no array {' or '.join(missing)} in the archive (found: {found})"
            )
        try:
            X, y = archive["X"], archive["y"]
        except failures as exc:
            raise DataError(f"{source}: unreadable array ({_one_line(exc)})") from None
    if X.ndim != 2 or X.dtype.kind not in "biuf":
        raise DataError(f"{source}: X must be a 2-D numeric array, not {X.dtype} {X.shape}")
    if y.ndim != 1 or y.dtype.kind not in "biufUS":
        raise DataError(f"{source}: y must be a 1-D array of labels, not {y.dtype} {y.shape}")
    if len(y) != X.shape[0]:
        raise DataError(f"{source}: X has {X.shape[0]} rows but y has {len(y)} labels")
    if X.shape[0] == 0:
        raise DataError(f"{source}: X has no rows")
    X = X.astype(np.float64)
    bad = np.argwhere(~np.isfinite(X))
    if len(bad):
        i, j = bad[0]
        raise DataError(f"{source}: X[{i}, {j}] is {X[i, j]} (row {i}, column {j}, from 0)")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        i = int(np.flatnonzero(~np.isfinite(y))[0])
        raise DataError(f"{source}: y[{i}] is {y[i]} (labels must be finite)")
    return Dataset(X, y, source)


def read_label_file(path: str | os.PathLike) -> np.ndarray:
    """One label per line (plain, .bz2 or .gz): float64 if all are numbers, else strings."""
    source = os.fspath(path)
    path = Path(source)
    compression = _compression(path, source)
    raw = _read_bytes(path, source, compression)
    _check_text(raw, source)
    lines = [line.strip() for line in _decode(raw, source).split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise DataError(f"{source}: empty file")
    for number, line in enumerate(lines, start=1):
        if not line:
            raise DataError(f"{source}: line {number}: empty line (one label per line)")
        if len(line.split()) > 1:
            raise DataError(f"{source}: line {number}: more than one value in {_excerpt(line)}")
    return _parse_labels(np.array(lines, dtype=str), list(range(1, len(lines) + 1)), source)


# ----------------------------------------------------------------------------- features


def align_features(dataset: Dataset, n_features: int) -> Dataset:
    """``dataset`` with exactly ``n_features`` columns: zero columns are appended to a
    narrower one (a test file whose last features never occur); a wider one is an error."""
    return _align(dataset, n_features, f"the model has {n_features}")


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _align(dataset: Dataset, n_features: int, expected: str) -> Dataset:
    if not _is_count(n_features) or n_features < 0:
        raise ParameterError(f"n_features must be a non-negative integer, not {n_features!r}")
    have = dataset.n_features
    if have == n_features:
        return dataset
    if have > n_features:
        raise DataError(f"{dataset.source} has {have} features, {expected}")
    X = dataset.X
    if sp.issparse(X):
        X = X.tocsr(copy=True)
        X.resize((X.shape[0], int(n_features)))
    else:
        X = np.hstack([X, np.zeros((X.shape[0], n_features - have), dtype=X.dtype)])
    return Dataset(X, dataset.labels, dataset.source)


# ----------------------------------------------------------------------------- splitting


def train_test_split(
    dataset: Dataset, test_size: float = 0.3, *, seed: int = 0, stratify: bool = True
) -> tuple[Dataset, Dataset]:
    """A seeded (stratified by default) split into a train and a test Dataset."""
    from sklearn.model_selection import train_test_split as sklearn_split

    n = dataset.n_samples
    valid = (isinstance(test_size, float) and 0.0 < test_size < 1.0) or (
        _is_count(test_size) and 0 < test_size < n
    )
    if not valid:
        raise ParameterError(
            f"test_size must be a fraction in (0, 1) or a count in 1..{n - 1}, not {test_size!r}"
        )
    try:
        X_train, X_test, y_train, y_test = sklearn_split(
            dataset.X,
            dataset.labels,
            test_size=test_size,
            random_state=seed,
            stratify=dataset.labels if stratify else None,
        )
    except ValueError as exc:
        raise DataError(f"{dataset.source}: cannot split ({_one_line(exc)})") from None
    return (
        Dataset(X_train, y_train, f"{dataset.source} [train part]"),
        Dataset(X_test, y_test, f"{dataset.source} [test part]"),
    )

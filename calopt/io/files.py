"""Data files in, :class:`Dataset` out: the one module that knows file formats.

Reads LIBSVM/svmlight (kept sparse, in 32 MB blocks through the vectorised parser of
:mod:`calopt.io.svmtext`, scikit-learn's for lines it does not take: the same values),
CSV (through pandas' C parser) and NPZ files, plain or compressed with bzip2 or gzip. Every problem with an
input becomes a one-line :class:`~calopt.errors.DataError` that names the file, the line
(or column) and what is wrong: the libraries read, and the text is re-scanned line by line
only when they fail, to say where. Nothing here trains or writes anything. Labels are kept as read (:mod:`calopt.io.labels` encodes them).
"""

from __future__ import annotations

import bz2
import csv
import functools
import gzip
import itertools
import math
import os
import re
import stat
import sys
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from calopt.errors import DataError, ParameterError, UnknownNameError, one_line
from calopt.io.rows import FeatureRows
from calopt.io.svmtext import parse_lines, read_ahead

__all__ = [
    "FORMATS",
    "Dataset",
    "ReadOptions",
    "align_features",
    "npz_arrays",
    "read_data",
    "read_label_file",
    "read_libsvm",
    "train_test_split",
]

#: Names accepted by ``read_data(format=...)``; ``svmlight`` = ``libsvm``, ``tsv`` = ``csv``.
FORMATS = ("csv", "libsvm", "npz", "svmlight", "tsv")
_CSV_SUFFIXES = (".csv", ".tsv", ".data")
_LIBSVM_SUFFIXES = (".svm", ".libsvm", ".svmlight")
_MAGIC = {"bz2": b"BZh", "gz": b"\x1f\x8b"}
_ZIP_MAGIC = b"PK\x03\x04"
_DECOMPRESSION_ERRORS = (OSError, EOFError, zlib.error)


@dataclass(frozen=True, eq=False)
class Dataset(FeatureRows):
    """Features ``X`` (float64 ndarray, or CSR for LIBSVM), the labels as read, and where from.

    ``labels`` keeps the file's own values (floats for LIBSVM, strings or floats for CSV)
    so that a model can report classes the way the user wrote them; :func:`encode_binary`
    turns them into ±1. ``labels`` is None only for a file read without labels
    (``read_data(..., labelled=False)``: a CSV of features to predict).

    How the file was read, so that a model can read its test files the same way:
    ``format`` (``libsvm``, ``csv``, ``npz``; ``arrays`` when built in Python),
    ``zero_based`` (LIBSVM: the index base used; None otherwise) and ``open_width``
    (whether the width is only the largest index seen, so that a narrower file may be
    padded with zero columns: a LIBSVM file, or arrays; not CSV, NPZ or an embedded
    dataset, whose width is known). A CSV file with a header also gives the features'
    ``feature_names`` (in the order of X's columns) and the ``label_name``; None: the
    columns are known by position only. ``label_index`` is the label's column in a CSV.
    """

    X: Any
    labels: np.ndarray | None
    source: str = "<arrays>"
    format: str = "arrays"
    zero_based: bool | None = None
    open_width: bool = True
    feature_names: tuple[str, ...] | None = None
    label_name: str | None = None
    label_index: int | None = None

    def __post_init__(self) -> None:
        if getattr(self.X, "ndim", None) != 2:
            raise DataError(f"{self.source}: features must form a 2-D array")
        if self.labels is not None and (np.ndim(self.labels) != 1 or len(self.labels) != self.X.shape[0]):
            raise DataError(
                f"{self.source}: {self.X.shape[0]} rows of features "
                f"but labels of shape {np.shape(self.labels)}"
            )

    def like(self, X: Any, labels: np.ndarray | None, source: str | None = None) -> Dataset:
        """Other rows or columns of this data set, read the same way."""
        return replace(self, X=X, labels=labels, source=self.source if source is None else source)

    @property
    def classes(self) -> np.ndarray:
        """The distinct labels, sorted."""
        if self.labels is None:
            raise DataError(f"{self.source}: no labels")
        return np.unique(self.labels)

    def __repr__(self) -> str:
        kind = "sparse" if sp.issparse(self.X) else "dense"
        classes = "unlabelled" if self.labels is None else f"classes={len(self.classes)}"
        return (
            f"Dataset(source={self.source!r}, n_samples={self.n_samples}, "
            f"n_features={self.n_features}, {kind}, {classes})"
        )


# ----------------------------------------------------------------------------- opening


def _excerpt(line: bytes | str, limit: int = 60) -> str:
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")
    line = line.rstrip("\r\n")
    return repr(line) if len(line) <= limit else repr(line[:limit]) + "…"


#: The path that means standard input.
STDIN = "-"


@dataclass(frozen=True)
class _Input:
    """A data file to read: its name for messages, its compression and, for a stream, its bytes.

    A regular file is opened as often as reading needs (a sniff of its head, then the
    parser). Anything else (``-`` for stdin, a pipe such as ``<(bzcat a9a.bz2)``, a FIFO)
    can be read only once, so :func:`_input` reads it whole into ``content`` and every
    later step reads that buffer: the one reader for streams.
    """

    path: Path
    source: str
    content: bytes | None = None
    compression: str | None = None
    #: The number of the first line of ``content`` in its file (a chunk of a streamed file).
    first_line: int = 1


def _input(path: str | os.PathLike) -> _Input:
    """The file at ``path`` (``-``: stdin) ready to read; a stream is read once, whole."""
    source = os.fspath(path)
    source = source.decode(errors="replace") if isinstance(source, bytes) else source
    if source == STDIN:
        found = _Input(Path(source), "<stdin>", _read_stream(sys.stdin.buffer, "<stdin>"))
        return replace(found, compression=_compression(found))
    path = Path(source)
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise DataError(f"{source}: no such file") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{source}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(status.st_mode):
        raise DataError(f"{source}: is a directory, not a data file")
    content = None
    if not stat.S_ISREG(status.st_mode):  # a pipe, FIFO, device: one pass only
        try:
            with open(path, "rb") as stream:
                content = _read_stream(stream, source)
        except OSError as exc:
            raise DataError(f"{source}: cannot read ({exc.strerror or exc})") from None
    found = _Input(path, source, content)
    return replace(found, compression=_compression(found))


def _read_stream(stream: Any, source: str) -> bytes:
    try:
        return stream.read()
    except OSError as exc:
        raise DataError(f"{source}: cannot read ({exc.strerror or exc})") from None


def _compression(found: _Input) -> str | None:
    """``"bz2"``, ``"gz"`` or ``None``, from the first bytes; a .bz2/.gz name must agree."""
    if found.content is not None:
        magic = found.content[:3]
    else:
        try:
            with open(found.path, "rb") as f:
                magic = f.read(3)
        except OSError as exc:
            raise DataError(f"{found.source}: cannot read ({exc.strerror or exc})") from None
    kind = next((kind for kind, m in _MAGIC.items() if magic.startswith(m)), None)
    named = next((kind for kind in _MAGIC if found.path.name.lower().endswith("." + kind)), None)
    if named and kind != named:
        label = "bzip2" if named == "bz2" else "gzip"
        raise DataError(f"{found.source}: not a {label} file (the name ends in .{named})")
    return kind


def _open(found: _Input):
    """The (decompressed) bytes of ``found`` as a binary file, from the start."""
    target: Any = BytesIO(found.content) if found.content is not None else found.path
    if found.compression == "bz2":
        return bz2.open(target, "rb")
    if found.compression == "gz":
        return gzip.open(target, "rb")
    return target if isinstance(target, BytesIO) else open(target, "rb")


def _corrupt(found: _Input, exc: BaseException) -> DataError:
    if found.compression:
        label = "bzip2" if found.compression == "bz2" else "gzip"
        return DataError(f"{found.source}: corrupt {label} data ({one_line(exc)})")
    return DataError(f"{found.source}: cannot read ({one_line(exc)})")


def _read_bytes(found: _Input, size: int = -1) -> bytes:
    """The (decompressed) content, or its first ``size`` bytes."""
    try:
        with _open(found) as f:
            return f.read(size)
    except _DECOMPRESSION_ERRORS as exc:
        raise _corrupt(found, exc) from None


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


#: The UTF-8 byte-order mark some editors put at the start of a text file (read as no text).
_BOM = b"\xef\xbb\xbf"


def _skip_bom(f: Any, found: _Input) -> Any:
    """``f`` (the start of ``found``'s text) past a byte-order mark, as CSV is read (``utf-8-sig``)."""
    if found.first_line == 1 and f.read(len(_BOM)) != _BOM:
        f.seek(0)
    return f


def _first_line(head: bytes) -> bytes:
    """The first line that is neither blank nor a ``#`` comment."""
    lines = (line.strip() for line in head.removeprefix(_BOM).split(b"\n"))
    return next((line for line in lines if line and not line.startswith(b"#")), b"")


#: A LIBSVM line: a label, then ``index:value`` pairs (or ``qid:``), nothing else.
_LIBSVM_TOKEN = re.compile(rb"(?:qid|[0-9]+):\S*")


def _format(found: _Input, format: str | None, head: bytes) -> str:
    """``"libsvm"``, ``"csv"`` or ``"npz"``: as given, else from the name, else from the content.

    ``.npz`` (or a zip header) is NPZ; ``.csv``, ``.tsv`` and ``.data`` are CSV; ``.svm``,
    ``.libsvm`` and ``.svmlight`` are LIBSVM; any other name (``.txt``, ``.t``, none at
    all as for a pipe) is LIBSVM when its first data line is a label alone or with an
    ``index:value`` pair, else CSV.
    """
    if format is not None:
        key = str(format).strip().lower()
        if key not in FORMATS:
            raise UnknownNameError("format", str(format), FORMATS)
        return {"svmlight": "libsvm", "tsv": "csv"}.get(key, key)
    name = found.path.name.lower()
    for ending in (".bz2", ".gz"):
        name = name.removesuffix(ending)
    suffix = Path(name).suffix
    if suffix == ".npz" or head.startswith(_ZIP_MAGIC):
        return "npz"
    if suffix in _CSV_SUFFIXES:
        return "csv"
    if suffix in _LIBSVM_SUFFIXES:
        return "libsvm"
    tokens = _first_line(head).split()
    libsvm = _is_number(tokens[0]) and (len(tokens) == 1 or any(_LIBSVM_TOKEN.fullmatch(t) for t in tokens[1:])) \
        if tokens else True
    return "libsvm" if libsvm else "csv"


# ----------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class ReadOptions:
    """How a data file is read: the keywords :func:`read_data` and
    :func:`calopt.io.stream.open_stream` share (each takes them by name and builds this).

    ``format`` (``csv``, ``libsvm``, ``npz``, ``svmlight``, ``tsv``, and ``parquet`` for a
    stream; None: from the name, then the first line); ``zero_based``, the LIBSVM index
    base (``"auto"``: one-based unless an index 0 appears; a Dataset records the base
    used, so that test files can be read with the training file's); and the CSV options:
    ``label_column`` (an index, negative from the end, or a header name), ``delimiter``
    (default: sniffed from ``;``, tab, ``,`` and whitespace) and ``header`` (True/False,
    default: detected, see :func:`_looks_like_header`).
    """

    format: str | None = None
    label_column: int | str = -1
    delimiter: str | None = None
    header: bool | None = None
    zero_based: bool | str = "auto"

    @classmethod
    def named(cls, function: str, options: dict[str, Any]) -> ReadOptions:
        """The options given to ``function`` by keyword; another keyword is Python's TypeError."""
        unknown = sorted(options.keys() - {option.name for option in fields(cls)})
        if unknown:
            raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
        return cls(**options)


def read_data(
    path: str | os.PathLike,
    *,
    n_features: int | None = None,
    n_features_of: str | None = None,
    labelled: bool = True,
    columns: dict[str, Any] | None = None,
    **options: Any,
) -> Dataset:
    """Read a LIBSVM/svmlight, CSV or NPZ file (optionally ``.bz2``/``.gz``) into a Dataset.

    ``path`` may be ``-`` (stdin) or a pipe: a stream is read once, whole, into memory.
    The format comes from the name without its compression suffix: ``.npz`` (arrays ``X``
    and ``y``), ``.csv``/``.tsv``/``.data`` are CSV; any other name is LIBSVM when its
    first data line is ``label index:value ...``, else CSV. LIBSVM is read as scikit-learn's
    parser reads it (:func:`_read_libsvm`) and kept sparse, CSV with pandas' (:func:`_read_csv`).
    ``options`` are the keywords of :class:`ReadOptions`: ``format``, ``label_column``,
    ``delimiter``, ``header`` and ``zero_based``.

    ``n_features`` is the width the features must have (``n_features_of`` names whose
    width it is, for the message): a narrower LIBSVM file is padded with zero columns
    (absent trailing features are zero), any other difference is a DataError. With
    ``labelled=False`` (features to predict) a CSV with exactly ``n_features`` columns
    has no label column, and an NPZ needs no ``y``; the Dataset's ``labels`` is then None.

    ``columns`` (``{"feature_names": [...], "label_column": name}``, how a model's training
    CSV named its columns) reads a CSV with a header by name: its features in that order,
    whatever the file's; a missing feature or an unknown column is an error naming it; the
    label column is ``label_column`` when it names one, else the recorded one (ignored,
    when present, with ``labelled=False``). Such a CSV without a header is an error unless
    ``header=False`` asks for the columns by position.
    Raises :class:`DataError` for anything unreadable.
    """
    read = ReadOptions.named("read_data", options)
    found = _input(path)
    head = _read_bytes(found, 1 << 16)
    kind = _format(found, read.format, head)
    if kind == "npz":
        dataset = _read_npz(found, labelled)
    else:
        if not head.strip() and len(head) < 1 << 16:
            raise DataError(f"{found.source}: empty file")
        _check_text(head, found.source)
        if kind == "csv":
            unlabelled_width = None if labelled else n_features
            dataset = _read_csv(found, read.label_column, read.delimiter, read.header, unlabelled_width, columns,
                                labelled)
        else:
            dataset = _read_libsvm(found, read.zero_based)
    if n_features is not None:
        reference = f"{n_features_of} has {n_features}" if n_features_of else f"expected {n_features}"
        dataset = _align(dataset, n_features, reference)
    return dataset


def read_libsvm(path: str | os.PathLike, *, zero_based: bool | str = "auto") -> Dataset:
    """A LIBSVM/svmlight file (plain, .bz2 or .gz) with the given index base, kept sparse."""
    return _read_libsvm(_input(path), zero_based)


def _read_libsvm(found: _Input, zero_based: bool | str = "auto") -> Dataset:
    """A LIBSVM/svmlight file, read in blocks of whole lines (:func:`read_libsvm_block`; the
    next block read and decompressed while one is parsed), the blocks stacked.

    The indices are parsed as written, then the base is applied here: ``"auto"`` is
    zero-based exactly when an index 0 occurs, and an index 0 in a file read as
    one-based is an error (it would be silently dropped, or shift every column).
    """
    parts = [read_libsvm_block(found, block, line, one_based=zero_based is False)
             for line, _, block in read_ahead(text_blocks(found, LIBSVM_BLOCK_BYTES))]
    parts = [part for part in parts if part[0].shape[0]]
    if not parts:
        raise DataError(f"{found.source}: no data lines (only blank lines or comments)")
    width = max(X.shape[1] for X, _, _ in parts)
    X = parts[0][0] if len(parts) == 1 else sp.vstack([_widened(X, width) for X, _, _ in parts], format="csr")
    labels = np.concatenate([labels for _, labels, _ in parts])
    if zero_based == "auto":
        zero_based = any(has_zero for _, _, has_zero in parts)
    if not zero_based:
        X = one_based_columns(X)
    return Dataset(X, labels, found.source, format="libsvm", zero_based=bool(zero_based), open_width=True)


def _widened(X: Any, width: int) -> Any:
    if X.shape[1] == width:
        return X
    X = X.tocsr(copy=True)
    X.resize((X.shape[0], width))
    return X


#: Text (decompressed) parsed at a time by :func:`_read_libsvm`.
LIBSVM_BLOCK_BYTES = 32 << 20


def _sklearn_libsvm(found: _Input, rescan_zero_based: bool) -> tuple[Any, np.ndarray]:
    """The lines of ``found`` (a block) through scikit-learn's parser, indices as written; a
    parse error becomes the error naming the first bad line (:func:`_libsvm_error`)."""
    from sklearn.datasets import load_svmlight_file

    try:
        with _open(found) as f:
            X, labels = load_svmlight_file(_skip_bom(f, found), dtype=np.float64, zero_based=True)
    except _DECOMPRESSION_ERRORS as exc:
        raise _corrupt(found, exc) from None
    except (ValueError, OverflowError) as exc:
        raise _libsvm_error(found, rescan_zero_based, exc) from None
    return X.tocsr(), labels


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
        if index == 0 and zero_based is False:
            return "feature index 0 in a file read with one-based indices (the training data's)"
        if index < 0 or index >= 2**63:
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


def _libsvm_error(found: _Input, zero_based: bool | str, exc: BaseException | None, X: Any = None) -> DataError:
    """Re-scan the text for the first bad line and describe it."""
    try:
        with _open(found) as f:
            for number, line in enumerate(_skip_bom(f, found), start=found.first_line):
                problem = _libsvm_problem(line, zero_based)
                if problem:
                    return DataError(f"{found.source}: line {number}: {problem} in {_excerpt(line)}")
    except _DECOMPRESSION_ERRORS as err:
        return _corrupt(found, err)
    if X is not None:  # the scan disagreed with the parser: locate by row instead
        k = int(np.flatnonzero(~np.isfinite(X.data))[0]) if X.nnz else 0
        row = int(np.searchsorted(X.indptr, k, side="right")) - 1
        return DataError(f"{found.source}: data row {row + 1}: a label or feature is not finite")
    return DataError(f"{found.source}: not a LIBSVM/svmlight file ({one_line(exc)})")


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{source}: line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})"
        ) from None


def _numbered_lines(text: str, first_line: int = 1) -> Iterator[tuple[int, str]]:
    """(line number, line) for the non-blank lines, skipping a KEEL ``@`` header."""
    in_header = first_line == 1
    for number, line in enumerate(text.split("\n"), start=first_line):
        stripped = line.strip()
        if not stripped or (in_header and stripped.startswith("@")):
            continue
        in_header = False
        yield number, line.rstrip("\r")


def _sniff_delimiter(lines: list[tuple[int, str]]) -> str | None:
    """The delimiter of the first lines: ``;``, tab or ``,`` (in that order of preference)
    when it occurs the same number of times on each; ``None`` (whitespace) if none does.

    ``;`` comes first because a file separated by ``;`` may use ``,`` as its decimal mark,
    while a ``,`` file has no ``;`` in its numbers.
    """
    sample = [line for _, line in lines[:_SNIFF_LINES]]
    for candidate in (";", "\t", ","):
        counts = {line.count(candidate) for line in sample}
        if len(counts) == 1 and counts != {0}:
            return candidate
    counts = {d: sample[0].count(d) for d in (";", "\t", ",")}  # ragged: the first line decides
    best = max(counts, key=counts.get)
    return best if counts[best] else None


def _is_number(text: str | bytes) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


#: The longest field a CSV file may hold: the csv module's default limit, fixed here rather than read
#: from ``csv.field_size_limit()``, which any library may raise for the whole process (SciPy's ARFF
#: reader does), so that what calopt accepts does not depend on what was imported before it.
FIELD_LIMIT = 131_072


def _split_rows(
    lines: list[tuple[int, str]], delimiter: str | None, source: str
) -> list[list[str]]:
    if delimiter is None:
        return [line.split() for _, line in lines]
    reader = csv.reader((line for _, line in lines), delimiter=delimiter, skipinitialspace=True)
    rows = []
    try:
        for row in reader:
            if any(len(field) > FIELD_LIMIT for field in row):
                raise csv.Error(f"field larger than field limit ({FIELD_LIMIT})")
            rows.append([field.strip() for field in row])
    except csv.Error as exc:
        number = lines[min(reader.line_num, len(lines)) - 1][0]
        raise DataError(f"{source}: line {number}: {one_line(exc)}") from None
    return rows


#: ``--delimiter`` names for the characters that are awkward to type.
_DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "space": None, "whitespace": None, " ": None, "": None}


def _csv_delimiter(delimiter: str | None, lines: list[tuple[int, str]]) -> str | None:
    """The delimiter given (a character, ``tab``, ``whitespace``, KEEL's ``, ``), else sniffed."""
    if delimiter is None:
        return _sniff_delimiter(lines)
    delimiter = _DELIMITER_NAMES.get(delimiter.lower() if len(delimiter) > 1 else delimiter, delimiter)
    if delimiter is not None and delimiter.strip():
        delimiter = delimiter.strip()  # KEEL's ", " is "," with the spaces skipped
    if delimiter is not None and (len(delimiter) != 1 or delimiter in "\"\r\n"):
        raise ParameterError(f"delimiter must be one character, tab or whitespace, not {_excerpt(delimiter, 20)}")
    return delimiter


def _integer(text: str) -> int | None:
    """``text`` as a whole number (ASCII digits, optional sign), else None."""
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text.strip()) else None


def _looks_like_header(first: list[str], label_index: int | None, others_numeric: Callable[[int], bool]) -> bool:
    """Whether the first row names the columns (the rule when neither --header nor --no-header).

    It does when (1) none of its feature fields is a number (``a,b,class``); or (2) its
    fields are the column numbers ``0,1,2,...`` or ``1,2,3,...`` (three columns or more:
    what a data frame without names writes); or (3) its label field is not a number
    while every other row's label is one (``0,1,2,y`` over labels -1 and 1;
    ``others_numeric(label_index)`` says whether there are other rows and every one's label
    is a number). Any other first row is data: a row with a number among its features is
    never dropped.
    """
    features = [field for column, field in enumerate(first) if column != label_index]
    if features and not any(_is_number(field) for field in features):
        return True
    numbers = [_integer(field) for field in first]
    if len(first) >= 3 and numbers[0] in (0, 1) and numbers == list(range(numbers[0], numbers[0] + len(first))):
        return True
    return label_index is not None and not _is_number(first[label_index]) and others_numeric(label_index)


def _all_numbers(text: Iterable[str]) -> bool:
    """Whether every one of ``text`` (stripped fields) is a number (``float`` reads it)."""
    return all(_is_number(t) for t in text)


@dataclass(frozen=True)
class _CsvOptions:
    """How :func:`read_data` was asked to read a CSV file (see there)."""

    label_column: int | str
    delimiter: str | None
    header: bool | None
    unlabelled_width: int | None = None
    columns: dict[str, Any] | None = None
    labelled: bool = True


def _read_csv(
    found: _Input,
    label_column: int | str,
    delimiter: str | None,
    header: bool | None,
    unlabelled_width: int | None = None,
    columns: dict[str, Any] | None = None,
    labelled: bool = True,
) -> Dataset:
    """A delimited text file: numeric feature columns and one label column.

    With ``unlabelled_width`` (features to predict), a file of exactly that many columns
    has no label column; with ``columns`` (a model's names) a file with a header is read
    by name (:func:`read_data`). Read through pandas (:func:`_csv_through_pandas`); the
    text is scanned line by line (:func:`_scan_csv`) only when pandas cannot vouch for
    every row (a bad value, a ragged line, quotes across lines, …): the scan reads the
    same values, or names the line and column of the first bad one.
    """
    options = _CsvOptions(label_column, delimiter, header, unlabelled_width, columns, labelled)
    raw = _read_bytes(found)
    try:
        return _csv_through_pandas(found, raw, options)
    except _Rescan:
        return _scan_csv(found, raw, options)


class _Rescan(Exception):
    """pandas cannot vouch for a CSV's reading: scan the text line by line instead (:func:`_scan_csv`)."""


#: Whitespace other than space, tab, CR and LF (every character ``str.isspace`` takes): ``str.split``
#: separates fields at it where pandas' whitespace delimiter does not.
_ODD_SPACE = re.compile("[\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_ODD_SPACE_BYTES = (b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")
#: Data lines the delimiter is sniffed from (:func:`_sniff_delimiter`).
_SNIFF_LINES = 20
_NOT_SPACE = re.compile(rb"\S")


def _csv_through_pandas(found: _Input, raw: bytes, options: _CsvOptions) -> Dataset:
    """:func:`_read_csv` through ``pandas.read_csv`` (C engine), or :class:`_Rescan`.

    The first data lines are read as the scan reads them (delimiter, header, label column:
    the same functions); the rest goes to pandas, features as float64 (its float parser is
    correctly rounded: the values ``float`` gives), the label column as text. Whatever the
    scan would report, or might split otherwise (a NUL byte, a lone CR, quotes across
    lines, other whitespace between fields, a field that is no finite number, a ragged
    line), raises :class:`_Rescan`, never an error of its own.
    """
    source = found.source
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    lines, body = _csv_head(raw, found.first_line)
    delimiter = _csv_delimiter(options.delimiter, lines)
    _check_splittable(raw, delimiter)
    try:
        first = _split_rows(lines[:1], delimiter, source)[0]
        if lines[0][1].count('"') % 2:
            raise _Rescan
        rest: dict[int, tuple[np.ndarray, np.ndarray]] = {}

        def table(label_index: int | None) -> tuple[np.ndarray, np.ndarray]:
            if label_index not in rest:
                rest[label_index] = _pandas_rows(raw, body, delimiter, len(first), label_index)
            return rest[label_index]

        def others_numeric(label_index: int) -> bool:
            labels = table(label_index)[1]
            return len(labels) > 0 and _all_numbers(labels.tolist())

        header, label_index, feature_columns = _csv_columns(first, lines[0][0], delimiter, options, source,
                                                            others_numeric)
        values, label_text = table(label_index)
        if header and not len(values):
            raise _Rescan
        X = _csv_matrix(values, None if header else first, feature_columns, label_index)
        if not header and label_index is not None:
            label_text = np.concatenate([np.array([first[label_index]], dtype=str), label_text])
        labels = None if label_index is None else _parse_labels(label_text, range(len(label_text)), source)
    except (DataError, ValueError):
        raise _Rescan from None
    return _csv_dataset(X, labels, first if header else None, feature_columns, label_index, source)


def _csv_matrix(values: np.ndarray, first: list[str] | None, feature_columns: list[int],
                label_index: int | None) -> np.ndarray:
    """The features (float64, one copy): the first row's fields (``first``, None when a header) over
    pandas' ``values`` (the columns but the label's); :class:`_Rescan` if any is not finite. In
    Fortran order, as the scan's NumPy conversion of a column selection leaves them (and pandas
    holds them): the same array to the last bit of every product a model computes with it."""
    positions = [c if label_index is None or c < label_index else c - 1 for c in feature_columns]
    above = 0 if first is None else 1
    X = np.empty((above + len(values), len(feature_columns)), order="F")
    if first is not None:
        X[0] = np.array([first[c] for c in feature_columns], dtype=str).astype(np.float64)
    X[above:] = values if positions == list(range(values.shape[1])) else values[:, positions]
    if not np.isfinite(X).all():
        raise _Rescan
    return X


def _csv_head(raw: bytes, first_line: int) -> tuple[list[tuple[int, str]], int]:
    """The first data lines of a CSV's text, numbered (as many as the delimiter is sniffed from),
    and the offset in ``raw`` of the line after the first of them. The head read grows from
    64 kB until it holds them (wide lines) or is the whole text."""
    size = 1 << 16
    while True:
        head = raw[:size]
        if len(head) < len(raw):
            head = head[:head.rfind(b"\n") + 1]
        try:
            lines = list(itertools.islice(_numbered_lines(head.decode("utf-8"), first_line), _SNIFF_LINES))
        except UnicodeDecodeError:
            raise _Rescan from None
        if len(lines) == _SNIFF_LINES or len(head) == len(raw):
            break
        size *= 4
    if not lines:
        raise _Rescan
    body = 0
    for _ in range(lines[0][0] - first_line + 1):
        body = raw.find(b"\n", body) + 1
        if body == 0:
            return lines, len(raw)
    return lines, body


def _check_splittable(raw: bytes, delimiter: str | None) -> None:
    """:class:`_Rescan` unless pandas splits ``raw`` into the lines and fields the scan does: no NUL
    (the :mod:`csv` module refuses it), no CR but before LF (the scan's lines end at LF only),
    and with the whitespace delimiter no quote (``str.split`` knows none) and no whitespace but
    spaces and tabs between fields."""
    if b"\x00" in raw or (b"\r" in raw and raw.count(b"\r") != raw.count(b"\r\n")):
        raise _Rescan
    if delimiter is None:
        if b'"' in raw or any(space in raw for space in _ODD_SPACE_BYTES):
            raise _Rescan
        if not raw.isascii() and _ODD_SPACE.search(raw.decode("utf-8", errors="replace")):
            raise _Rescan


def _pandas_rows(raw: bytes, body: int, delimiter: str | None, n_columns: int,
                 label_index: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The lines of ``raw`` from offset ``body`` through ``pandas.read_csv``: the columns other than
    the label's as float64 (rows × columns), and the label column's stripped fields (text).
    :class:`_Rescan` when pandas fails, or its rows or columns are not the scan's."""
    import pandas as pd

    if not _NOT_SPACE.search(raw, body):
        return np.zeros((0, n_columns - (label_index is not None))), np.zeros(0, dtype=str)
    dtypes: dict[int, Any] = {c: np.float64 for c in range(n_columns)}
    if label_index is not None:
        dtypes[label_index] = object
    text = BytesIO(raw)  # shares raw's bytes
    text.seek(body)
    try:
        frame = pd.read_csv(text, sep=delimiter or r"\s+", header=None, dtype=dtypes,
                            na_filter=False, skipinitialspace=True, skip_blank_lines=True, quotechar='"',
                            engine="c", encoding="utf-8", **_pandas_float_options())
    except (ValueError, TypeError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        raise _Rescan from None
    if frame.shape[1] != n_columns or (b'"' in raw and len(frame) != _data_lines(raw, body)):
        raise _Rescan
    labels = np.zeros(0, dtype=str)
    if label_index is not None:
        column = frame.pop(label_index).to_numpy(dtype=object)
        if pd.api.types.infer_dtype(column, skipna=False) != "string":  # a missing field, say
            raise _Rescan
        labels = np.strings.strip(column.astype(str))
        if labels.size and int(np.max(np.strings.str_len(column.astype(str)))) > FIELD_LIMIT:
            raise _Rescan  # the scan (the csv module) refuses a field that long, naming its line
    return frame.to_numpy(dtype=np.float64), labels


def _data_lines(raw: bytes, start: int) -> int:
    """The lines of ``raw`` from ``start`` that hold more than whitespace (as the scan counts them)."""
    return sum(1 for line in raw[start:].decode("utf-8").split("\n") if line.strip())


@functools.cache
def _pandas_float_options() -> dict[str, Any]:
    """``float_precision="round_trip"`` before pandas 3.1 (whose default converter was not correctly
    rounded); nothing from 3.1 on, where every converter is the correctly rounded one."""
    import pandas as pd

    version = tuple(int(part) for part in re.findall(r"\d+", pd.__version__)[:2])
    return {} if version >= (3, 1) else {"float_precision": "round_trip"}


def _scan_csv(found: _Input, raw: bytes, options: _CsvOptions) -> Dataset:
    """:func:`_read_csv` by a line-by-line scan (:mod:`csv` and ``float``), naming the line and
    column of anything wrong: the reference the pandas reading must agree with."""
    source = found.source
    lines = list(_numbered_lines(_decode(raw, source), found.first_line))
    if not lines:
        raise DataError(f"{source}: empty file")
    delimiter = _csv_delimiter(options.delimiter, lines)
    rows = _split_rows(lines, delimiter, source)
    n_columns = len(rows[0])
    for (number, line), row in zip(lines, rows):
        if len(row) != n_columns:
            raise DataError(
                f"{source}: line {number}: {len(row)} fields where line {lines[0][0]} "
                f"has {n_columns} (delimiter {delimiter or 'whitespace'!r})"
            )

    def others_numeric(label_index: int) -> bool:
        return len(rows) > 1 and _all_numbers(row[label_index] for row in rows[1:])

    header, label_index, feature_columns = _csv_columns(rows[0], lines[0][0], delimiter, options, source,
                                                        others_numeric)
    names = rows[0] if header else None
    if header:
        lines, rows = lines[1:], rows[1:]
        if not rows:
            raise DataError(f"{source}: a header line but no data lines")
    table = np.array(rows, dtype=str)
    X = _csv_features(table, feature_columns, names, lines, source)
    labels = None if label_index is None else _parse_labels(table[:, label_index], [n for n, _ in lines], source)
    return _csv_dataset(X, labels, names, feature_columns, label_index, source)


def _csv_columns(first: list[str], line: int, delimiter: str | None, options: _CsvOptions, source: str,
                 others_numeric: Callable[[int], bool]) -> tuple[bool, int | None, list[int]]:
    """Whether the first row (``first``, on line ``line``) is a header, the label column's index
    (None: none) and the feature columns' indices, in the order X takes them."""
    columns, header = options.columns, options.header
    named = columns is not None and columns.get("feature_names") is not None
    if named and header is not False and (header or _names_a_column(first, columns)):
        label_index, feature_columns = _columns_by_name(first, columns, options.label_column, options.labelled,
                                                        f"{source}: line {line}")
        return True, label_index, feature_columns
    if named and header is None:
        raise DataError(f"{source}: line {line}: no header naming the model's features "
                        f"({_names_text(columns['feature_names'])}); add one, or give --no-header to read the "
                        f"columns by position")
    header, label_index = _csv_layout(first, line, options, delimiter, source, others_numeric)
    return header, label_index, [c for c in range(len(first)) if c != label_index]


def _csv_dataset(X: np.ndarray, labels: np.ndarray | None, names: list[str] | None, feature_columns: list[int],
                 label_index: int | None, source: str) -> Dataset:
    """The Dataset of a CSV's features and labels, with the header's names (None: no header)."""
    feature_names = tuple(names[c] for c in feature_columns) if names else None
    if feature_names is not None and len(set(feature_names)) < len(feature_names):
        feature_names = None  # a name given twice cannot find its column: by position
    return Dataset(X, labels, source, format="csv", open_width=False, feature_names=feature_names,
                   label_name=names[label_index] if names and label_index is not None else None,
                   label_index=label_index)


def _names_text(names: list[str], limit: int = 8) -> str:
    return ", ".join(_excerpt(n, 20) for n in names[:limit]) + (", …" if len(names) > limit else "")


def _names_a_column(first: list[str], columns: dict[str, Any]) -> bool:
    """Whether a first row names any of a model's columns (or is no row of numbers)."""
    known = set(columns["feature_names"]) | {columns.get("label_column")}
    return any(field in known for field in first) or not any(_is_number(field) for field in first)


def _columns_by_name(first: list[str], columns: dict[str, Any], label_column: int | str, labelled: bool,
                     where: str) -> tuple[int | None, list[int]]:
    """The label column's index (None: none) and the model's features' indices, from a header."""
    wanted, recorded = columns["feature_names"], columns.get("label_column")
    label = label_column if isinstance(label_column, str) and _integer(label_column) is None else recorded
    position = {name: index for index, name in enumerate(first)}
    if len(position) < len(first):
        twice = next(name for name, count in Counter(first).items() if count > 1)
        raise DataError(f"{where}: the column {_excerpt(twice, 30)} is named twice; the model reads columns by name")
    missing = [name for name in wanted if name not in position]
    if missing:
        raise DataError(f"{where}: no column {_excerpt(missing[0], 30)}, a feature of the model"
                        + (f" ({len(missing)} missing: {_names_text(missing)})" if len(missing) > 1 else ""))
    if labelled and label not in position:
        shown = f" named {_excerpt(label, 30)}" if label is not None else " (the model names none)"
        raise DataError(f"{where}: no label column{shown}; give --label-column")
    known = set(wanted) | {label}
    unknown = next((name for name in first if name not in known), None)
    if unknown is not None:
        also = (f" nor its label column {_excerpt(label, 30)}" if label is not None else
                " (the label column? give --label-column)")
        raise DataError(f"{where}: column {_excerpt(unknown, 30)} is not a feature of the model{also}")
    return (position[label] if labelled else None), [position[name] for name in wanted]


def _csv_layout(first: list[str], line: int, options: _CsvOptions, delimiter: str | None, source: str,
                others_numeric: Callable[[int], bool]) -> tuple[bool, int | None]:
    """Whether the first row is a header, and the label column's index (None: no label column)."""
    n_columns, label_column, header = len(first), options.label_column, options.header
    has_label = n_columns != options.unlabelled_width
    if n_columns < 2 and has_label:
        raise DataError(
            f"{source}: line {line}: one column only; need features and a label "
            f"(delimiter {delimiter or 'whitespace'!r})"
        )
    label_index: int | None = None
    if has_label and isinstance(label_column, str) and _integer(label_column) is None:
        if header is False or label_column not in first:
            names = ", ".join(_excerpt(f, 20) for f in first[:8]) + (", …" if n_columns > 8 else "")
            raise DataError(f"{source}: line {line}: no column named {_excerpt(label_column, 30)} "
                            f"(first line: {names}{'; --no-header given' if header is False else ''})")
        label_index, header = first.index(label_column), True
    elif has_label:
        label_index = _column_index(label_column, n_columns, source)
    if header is None:
        header = _looks_like_header(first, label_index, others_numeric)
    return bool(header), label_index


def _csv_features(table: np.ndarray, feature_columns: list[int], names: list[str] | None,
                  lines: list[tuple[int, str]], source: str) -> np.ndarray:
    """The feature columns of a CSV's fields as float64; a field that is no finite number is an error."""
    feature_text = table[:, feature_columns]

    def where(row: int, column: int) -> str:
        name = f" ({_excerpt(names[feature_columns[column]], 30)})" if names else ""
        return f"line {lines[row][0]}, column {feature_columns[column] + 1}{name}"

    try:
        X = feature_text.astype(np.float64)
    except ValueError:
        X = np.empty(feature_text.shape)
        for (i, j), field in np.ndenumerate(feature_text):
            try:
                X[i, j] = float(field)
            except ValueError:
                hint = " (a decimal comma? calopt reads decimal points)" if _is_number(field.replace(",", ".")) else ""
                raise DataError(f"{source}: {where(i, j)}: {_excerpt(field, 30)} is not a number{hint}") from None
    bad = np.argwhere(~np.isfinite(X))
    if len(bad):
        i, j = bad[0]
        raise DataError(
            f"{source}: {where(i, j)}: {_excerpt(str(feature_text[i, j]), 30)} is not finite "
            "(features must be finite numbers)"
        )
    return X


def _column_index(label_column: int | str, n_columns: int, source: str) -> int:
    """``label_column`` (an int, or a str holding one) as 0..n-1."""
    column = _integer(label_column) if isinstance(label_column, str) else label_column
    if not -n_columns <= column < n_columns:
        raise DataError(
            f"{source}: label column {label_column} is out of range: the file has "
            f"{n_columns} columns"
        )
    return column % n_columns


def _parse_labels(text: np.ndarray, numbers: Sequence[int], source: str) -> np.ndarray:
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
            f"{source}: line {numbers[first_bad]}: label {_excerpt(str(text[first_bad]), 30)} is not finite"
        )
    return values


#: The most a deflated zip member can expand (deflate's limit is about 1032:1).
_DEFLATE_RATIO = 1032
_NPY_MAGIC = b"\x93NUMPY"


def _size_text(n: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def _member_problem(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> str | None:
    """What is wrong with one ``.npy`` member, from its header alone (nothing allocated)."""
    name = info.filename
    with archive.open(info) as member:
        try:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
            else:
                return f"{name}: .npy format version {version[0]}.{version[1]} is not supported"
        except (ValueError, EOFError, SyntaxError) as exc:
            return f"{name}: not a .npy array ({one_line(exc, 80)})"
        header = member.tell()
    if dtype.hasobject:
        return f"{name}: an array of Python objects (refused: reading it would need pickle)"
    declared = math.prod(shape) * dtype.itemsize
    shape_text = "×".join(map(str, shape)) or "scalar"
    if declared > info.file_size - header:
        return (f"{name}: declares a {shape_text} {dtype} array ({_size_text(declared)}) but holds "
                f"{_size_text(max(info.file_size - header, 0))}")
    stored = info.compress_size if info.compress_type == zipfile.ZIP_STORED else info.compress_size * _DEFLATE_RATIO
    if info.file_size > stored + 1024:
        return f"{name}: declares {_size_text(info.file_size)} in {_size_text(info.compress_size)} of archive"
    return None


def npz_arrays(file: str | os.PathLike | BytesIO) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` archive (a path or an open binary file), read without pickle.

    Every member's ``.npy`` header (magic, shape, dtype) is read first and its declared
    size checked against the bytes the member holds, and those against its stored or
    compressed size, before any array is allocated: a forged header cannot ask for
    terabytes. Raises ``ValueError`` naming the member for a bad one; zip errors
    (``zipfile.BadZipFile``, ``OSError``, ``EOFError``) pass through for the caller to word.
    """
    with zipfile.ZipFile(file) as archive:
        members = archive.infolist()
        for info in members:
            problem = _member_problem(archive, info)
            if problem:
                raise ValueError(problem)
        arrays = {}
        for info in members:
            with archive.open(info) as member:
                arrays[info.filename.removesuffix(".npy")] = np.lib.format.read_array(member, allow_pickle=False)
        return arrays


def _read_npz(found: _Input, labelled: bool = True) -> Dataset:
    """An ``.npz`` archive holding ``X`` (2-D, numeric) and ``y`` (1-D, same length; optional
    when not ``labelled``)."""
    source = found.source
    file = BytesIO(_read_bytes(found)) if found.compression or found.content is not None else found.path
    if _read_bytes(found, len(_NPY_MAGIC)) == _NPY_MAGIC:
        raise DataError(f"{source}: a single .npy array, not an NPZ archive with X and y")
    try:
        arrays = npz_arrays(file)
    except ValueError as exc:
        raise DataError(f"{source}: {one_line(exc)}") from None
    except (OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, NotImplementedError) as exc:
        raise DataError(f"{source}: not an NPZ archive ({one_line(exc)})") from None
    missing = [key for key in ("X", "y") if key not in arrays and (labelled or key == "X")]
    if missing:
        names = ", ".join(_excerpt(name, 20) for name in list(arrays)[:8]) or "nothing"
        raise DataError(f"{source}: no array {' or '.join(missing)} in the archive (found: {names})")
    X, y = arrays["X"], arrays.get("y")
    if X.ndim != 2 or X.dtype.kind not in "biuf":
        raise DataError(f"{source}: X must be a 2-D numeric array, not {X.dtype} {X.shape}")
    if y is not None and (y.ndim != 1 or y.dtype.kind not in "biufUS"):
        raise DataError(f"{source}: y must be a 1-D array of labels, not {y.dtype} {y.shape}")
    if y is not None and len(y) != X.shape[0]:
        raise DataError(f"{source}: X has {X.shape[0]} rows but y has {len(y)} labels")
    if X.shape[0] == 0:
        raise DataError(f"{source}: X has no rows")
    X = X.astype(np.float64)
    bad = np.argwhere(~np.isfinite(X))
    if len(bad):
        i, j = bad[0]
        raise DataError(f"{source}: X[{i}, {j}] is {X[i, j]} (row {i}, column {j}, from 0)")
    if y is not None and y.dtype.kind == "f" and not np.isfinite(y).all():
        i = int(np.flatnonzero(~np.isfinite(y))[0])
        raise DataError(f"{source}: y[{i}] is {y[i]} (labels must be finite)")
    return Dataset(X, y, source, format="npz", open_width=False)


def read_label_file(path: str | os.PathLike) -> np.ndarray:
    """One label per line (plain, .bz2 or .gz; ``-`` or a pipe read once): float64 if all are
    numbers, else strings."""
    found = _input(path)
    source = found.source
    raw = _read_bytes(found)
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


def align_features(dataset: Dataset, n_features: int, *, of: str = "the model") -> Dataset:
    """``dataset`` with exactly ``n_features`` columns, the width of ``of`` (for the message).

    The one width rule: zero columns are appended to a narrower LIBSVM file (its width is
    only its largest index, and absent trailing features are zero); any other difference,
    a wider file or a CSV/NPZ file or an embedded dataset of another width, is a one-line
    DataError naming the file and both widths.
    """
    return _align(dataset, n_features, f"{of} has {n_features}")


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _align(dataset: Dataset, n_features: int, reference: str) -> Dataset:
    if not _is_count(n_features) or n_features < 0:
        raise ParameterError(f"n_features must be a non-negative integer, not {n_features!r}")
    have = dataset.n_features
    if have == n_features:
        return dataset
    if have > n_features or not dataset.open_width:
        label = " and a label column" if dataset.format == "csv" and dataset.labels is not None else ""
        raise DataError(f"{dataset.source} has {have} features{label}, {reference}")
    X = dataset.X
    if sp.issparse(X):
        X = X.tocsr(copy=True)
        X.resize((X.shape[0], int(n_features)))
    else:
        X = np.hstack([X, np.zeros((X.shape[0], n_features - have), dtype=X.dtype)])
    return dataset.like(X, dataset.labels)


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
        raise DataError(f"{dataset.source}: cannot split ({one_line(exc)})") from None
    return (
        dataset.like(X_train, y_train, f"{dataset.source} [train part]"),
        dataset.like(X_test, y_test, f"{dataset.source} [test part]"),
    )


# ----------------------------------------------------------------------------- blocks (streaming)
# The rules above, applied to a file read in blocks of whole lines (calopt.io.stream): the
# same parser on each block, with the file's line numbers in its messages.


def open_text(path: str | os.PathLike, format: str | None = None) -> tuple[_Input, str]:
    """A regular data file ready to read in blocks, and its format (``libsvm``, ``csv``, ``npz``),
    after the checks :func:`read_data` makes first (no such file, empty, binary, not UTF-8)."""
    found = _input(path)
    if found.content is not None:
        raise ParameterError(f"{found.source}: a stream reads its data at least twice: give a regular file, "
                             f"not a pipe or standard input")
    head = _read_bytes(found, 1 << 16)
    kind = _format(found, format, head)
    if kind != "npz":
        if not head.strip() and len(head) < 1 << 16:
            raise DataError(f"{found.source}: empty file")
        _check_text(head, found.source)
    return found, kind


def text_blocks(found: _Input, block_bytes: int) -> Iterator[tuple[int, int, bytes]]:
    """(number of its first line, byte offset in the decompressed text, bytes) of consecutive
    blocks of about ``block_bytes`` bytes of whole lines (the last may lack its line feed)."""
    line, offset, rest = 1, 0, b""
    try:
        with _open(found) as f:
            while True:
                block = f.read(block_bytes)
                if not block:
                    break
                block = rest + block
                cut = block.rfind(b"\n") + 1
                if cut == 0:
                    rest = block
                    continue
                piece, rest = block[:cut], block[cut:]
                yield line, offset, piece
                line, offset = line + piece.count(b"\n"), offset + len(piece)
    except _DECOMPRESSION_ERRORS as exc:
        raise _corrupt(found, exc) from None
    if rest.strip():
        yield line, offset, rest


def _block(found: _Input, block: bytes, first_line: int) -> _Input:
    return replace(found, content=block, compression=None, first_line=first_line)


def read_libsvm_block(found: _Input, block: bytes, first_line: int, *,
                      one_based: bool = False) -> tuple[Any, np.ndarray, bool]:
    """Lines of a LIBSVM file: (CSR features with the indices as written, labels, whether an
    index 0 occurs). ``one_based``: an index 0 is the error :func:`read_data` gives, at its line.

    Read by :func:`calopt.io.svmtext.parse_lines` (vectorised) when every line is of the common
    form, else by scikit-learn's parser: the same values either way, and the same errors."""
    chunk = _block(found, block, first_line)
    text = block[len(_BOM):] if first_line == 1 and block.startswith(_BOM) else block
    fast = parse_lines(text)
    if fast is None:
        X, labels = _sklearn_libsvm(chunk, rescan_zero_based=not one_based)
    else:
        values, indices, indptr, labels = fast
        width = int(indices.max()) + 1 if indices.size else 1  # scikit-learn's width
        X = sp.csr_matrix((values, indices, indptr), shape=(labels.size, width))
    if X.shape[0] and not (np.isfinite(X.data).all() and np.isfinite(labels).all()):
        raise _libsvm_error(chunk, not one_based, None, X=X)
    has_zero = bool(X.nnz) and int(X.indices.min()) == 0
    if one_based and has_zero:
        raise _libsvm_error(chunk, False, None, X=X)
    return X, labels, has_zero


def one_based_columns(X: Any) -> Any:
    """LIBSVM features read as written, with one-based indices: column j becomes j − 1."""
    return sp.csr_matrix((X.data, X.indices - 1, X.indptr), shape=(X.shape[0], max(X.shape[1] - 1, 0)))


def csv_layout(found: _Input, block: bytes, label_column: int | str, delimiter: str | None) -> tuple[str, str]:
    """The label column's index and the delimiter (as options for :func:`read_csv_block`) that
    :func:`read_data` settles on the first lines of a CSV file (``block``: its first block)."""
    lines = list(itertools.islice(_numbered_lines(_decode(block, found.source)), _SNIFF_LINES))
    delimiter = _csv_delimiter(delimiter, lines)
    first = _split_rows(lines[:1], delimiter, found.source)[0]
    if isinstance(label_column, str) and _integer(label_column) is None:
        label_index = first.index(label_column)
    else:
        label_index = _column_index(label_column, len(first), found.source)
    return str(label_index), "whitespace" if delimiter is None else delimiter


def read_csv_block(found: _Input, block: bytes, first_line: int, label_column: int | str,
                   delimiter: str | None, header: bool | None) -> tuple[np.ndarray, np.ndarray, dict[str, Any] | None]:
    """Lines of a CSV file: (features, labels, the header's names), read by :func:`read_data`'s rules;
    the names are ``{"feature_names", "label_column"}`` as a model records them, None without a header."""
    dataset = _read_csv(_block(found, block, first_line), label_column, delimiter, header)
    names = None if dataset.feature_names is None else {"feature_names": list(dataset.feature_names),
                                                        "label_column": dataset.label_name}
    return dataset.X, dataset.labels, names


def label_column_index(label_column: int | str, names: list[str], source: str) -> int:
    """The label column among ``names``: a name, or an index (negative from the end)."""
    if isinstance(label_column, str) and _integer(label_column) is None:
        if label_column not in names:
            raise DataError(f"{source}: no column named {_excerpt(label_column, 30)} "
                            f"(columns: {', '.join(_excerpt(n, 20) for n in names[:8])})")
        return names.index(label_column)
    return _column_index(label_column, len(names), source)

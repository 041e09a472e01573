"""LIBSVM text parsed with vectorised NumPy operations, and blocks read ahead of the parser.

:func:`parse_lines` reads lines of the common form (a label, then ``index:value`` pairs,
indices in increasing order, separated by spaces or tabs, ``\\n`` or ``\\r\\n`` line ends,
blank lines) without a Python loop over tokens: the byte positions of the tokens and
colons are found with array operations, indices and whole numbers are read digit by
digit, and other numbers by pandas' C parser (correctly rounded: the values of Python's
``float``, which scikit-learn's parser calls). Anything else (comments, ``qid:``, letters,
a bad token, unsorted indices, an index of 10 digits or more) returns None, and the caller
reads those lines with scikit-learn's parser, which gives the values or the error it always
gave. So the values are scikit-learn's to the bit, and no line is read differently.

:func:`read_ahead` reads (and decompresses) the next block in a thread while the current
one is parsed: file reads and zlib/bz2 release the GIL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from io import BytesIO
from queue import Empty, Queue
from typing import Any

import numpy as np

__all__ = ["parse_lines", "read_ahead"]

_DIGITS = b"0123456789"
#: The bytes a line may hold on the vectorised path: whitespace, digits, ``+-.eE:``.
_ALLOWED_BYTES = b" \t\r\n" + _DIGITS + b"+-.eE:"
#: Longest index (digits) read on the vectorised path: below 2³¹, as scikit-learn's parser needs.
MAX_INDEX_DIGITS = 9
#: Bytes of text parsed at a time (whole lines).
PIECE_BYTES = 1 << 20
#: An integer of at most this many digits is exact in float64 (read digit by digit).
_EXACT_DIGITS = 15


def parse_lines(block: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(values float64, indices int32 as written, indptr int64, labels float64) of the LIBSVM
    lines ``block``, as scikit-learn's ``load_svmlight_file`` reads them; None when a line is
    not of the common form (see the module's docstring): read it with scikit-learn's parser.

    Read :data:`PIECE_BYTES` of whole lines at a time: the arrays of a piece stay in the
    allocator's reused memory, where those of a whole block would be mapped and faulted in
    afresh at every call (1 MB pieces: 0.7 s for a 32 MB block where one piece takes 3 s)."""
    if block.translate(None, _ALLOWED_BYTES):  # a byte outside the common form
        return None
    parts, start = [], 0
    while start < len(block):
        stop = block.rfind(b"\n", start, start + PIECE_BYTES) + 1
        if stop <= start:  # a line longer than a piece
            stop = block.find(b"\n", start + PIECE_BYTES) + 1 or len(block)
        part = _parse_piece(block[start:stop])
        if part is None:
            return None
        parts.append(part)
        start = stop
    if not parts:
        return np.zeros(0), np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64), np.zeros(0)
    values, indices, indptrs, labels = zip(*parts)
    offsets = np.cumsum([0] + [len(v) for v in values[:-1]])
    indptr = np.concatenate([[0]] + [p[1:] + offset for p, offset in zip(indptrs, offsets)]).astype(np.int64)
    return np.concatenate(values), np.concatenate(indices), indptr, np.concatenate(labels)


def _parse_piece(block: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`parse_lines` on at most a few megabytes."""
    a = np.frombuffer(b"\n" + block + b"\n", dtype=np.uint8)
    space = a <= 32  # the only bytes ≤ 32 left are space, tab, CR and LF
    edges = np.flatnonzero(space[:-1] != space[1:]) + 1  # a token's start, then its end, ...
    del space
    starts, ends = edges[0::2], edges[1::2]
    newlines = np.flatnonzero(a == 10)
    first = np.searchsorted(starts, newlines[:-1])  # each line's first token, if before the line's end
    inside = first < starts.size
    first = first[inside]
    labels_at = first[starts[first] < newlines[1:][inside]]
    pair = np.ones(starts.size, dtype=bool)
    pair[labels_at] = False
    pair_starts, pair_ends = starts[pair], ends[pair]
    colons = np.flatnonzero(a == 58)
    # every pair token holds exactly one colon, with text on both sides; no other token holds one
    if colons.size != pair_starts.size or not ((pair_starts < colons) & (colons < pair_ends - 1)).all():
        return None
    indices = _digits(a, pair_starts, colons - pair_starts, MAX_INDEX_DIGITS)
    if indices is None:
        return None
    counts = np.diff(np.append(labels_at, starts.size)) - 1
    indptr = np.zeros(labels_at.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    if not _increasing(indices, indptr):
        return None
    label_starts, label_ends = starts[labels_at], ends[labels_at]
    values = labels = None
    # a point or an exponent can only be in a label or a value (the indices are digits): not
    # every number is whole, and pandas reads them all (as it would after _whole's None)
    if not (b"." in block or b"e" in block or b"E" in block):
        values = _whole(a, colons + 1, pair_ends - colons - 1)
        labels = _whole(a, label_starts, label_ends - label_starts)
    if values is None or labels is None:  # numbers with a point or an exponent: pandas reads them
        numbers = _numbers_of(a, pair_starts, colons, labels_at.size + indices.size)
        if numbers is None:
            return None
        is_label = np.zeros(numbers.size, dtype=bool)
        is_label[np.arange(labels_at.size) + indptr[:-1]] = True
        labels, values = numbers[is_label], numbers[~is_label]
    return values, indices, indptr, labels


def _increasing(indices: np.ndarray, indptr: np.ndarray) -> bool:
    """Whether each row's indices increase strictly (scikit-learn refuses them otherwise)."""
    if indices.size < 2:
        return True
    need = np.ones(indices.size - 1, dtype=bool)
    first = indptr[1:-1]
    first = first[(first > 0) & (first < indices.size)]
    need[first - 1] = False
    return not (need & (np.diff(indices) <= 0)).any()


def _digits(a: np.ndarray, starts: np.ndarray, lengths: np.ndarray, limit: int) -> np.ndarray | None:
    """The whole numbers written as digits only at ``starts`` (int32 up to 9 digits, else int64);
    None if any is not, or is longer than ``limit`` digits. Read from the last digit back."""
    dtype = np.int32 if limit <= 9 else np.int64
    if not starts.size:
        return np.zeros(0, dtype=dtype)
    width = int(lengths.max())
    if width > limit:
        return None
    last = starts + lengths - 1
    value = a[last] - np.uint8(48)  # wraps: a byte that is no digit is > 9
    if (value > 9).any():
        return None
    value = value.astype(dtype)
    shortest = int(lengths.min())
    for k in range(1, width):
        digit = a[last - k] - np.uint8(48)
        bad = digit > 9
        if k >= shortest:
            inside = lengths > k
            bad &= inside
            digit *= inside
        if bad.any():
            return None
        value += digit * dtype(10 ** k)
    return value


def _whole(a: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """The whole numbers (an optional sign, then at most 15 digits: exact in float64) written at
    ``starts``, as float64 (``-0`` is -0.0, as ``float`` reads it); None if any is another number."""
    sign = a[starts]
    signed = (sign == 45) | (sign == 43)
    if not signed.any():
        digits = _digits(a, starts, lengths, _EXACT_DIGITS)
        return None if digits is None else digits.astype(np.float64)
    if not (lengths > signed).all():
        return None
    digits = _digits(a, starts + signed, lengths - signed, _EXACT_DIGITS)
    if digits is None:
        return None
    values = digits.astype(np.float64)
    np.negative(values, out=values, where=sign == 45)
    return values


#: Whitespace and the colon, each made a line end: one number per line.
_ONE_PER_LINE = bytes.maketrans(b" \t\r:", b"\n\n\n\n")


def _numbers_of(a: np.ndarray, pair_starts: np.ndarray, colons: np.ndarray, expected: int) -> np.ndarray | None:
    """The labels and values of the text ``a`` in order, read by pandas' C parser (correctly
    rounded, Python's grammar: ``float``'s values), the indices and colons blanked out first
    (read already); None if one is not a number or there are not ``expected`` of them."""
    import pandas as pd

    text = a.copy()
    lengths = colons - pair_starts
    for k in range(int(lengths.max()) + 1 if lengths.size else 0):  # index digits, then the colon
        text[(pair_starts + k)[lengths >= k]] = 10
    try:
        table = pd.read_csv(BytesIO(text.tobytes().translate(_ONE_PER_LINE)), header=None, dtype=np.float64,
                            na_filter=False, engine="c", skip_blank_lines=True)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None
    if table.shape != (expected, 1):
        return None
    return table.to_numpy()[:, 0]


# ----------------------------------------------------------------------------- reading ahead


def read_ahead(items: Iterable[Any], depth: int = 1) -> Iterator[Any]:
    """The items of ``items`` in order, the next ``depth`` of them produced by a background
    thread while the caller works on the current one: reading and decompressing a block (file
    reads and zlib/bz2 release the GIL) overlap with parsing the previous one. An exception
    in ``items`` is raised here, at its place in the order; closing the generator stops the
    thread after the item it is producing."""
    queue: Queue = Queue(maxsize=max(1, depth))
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                queue.put((item, None))
            queue.put((done, None))
        except BaseException as exc:  # handed to the consumer, raised there
            queue.put((done, exc))

    thread = threading.Thread(target=produce, name="calopt-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = queue.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue
            try:
                queue.get(timeout=0.05)
            except Empty:
                pass
        thread.join()

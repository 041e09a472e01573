"""Data larger than memory: chunked sources, the first pass over them, and the streaming reader.

A :class:`ChunkSource` reads one file (or one directory) part by part, in bounded memory,
with the rules of the in-memory readers of :mod:`calopt.io.files` (each text chunk goes
through the same parser, so index base, width, labels and error messages agree):

- LIBSVM/svmlight and CSV text, plain or ``.gz``/``.bz2``, read in blocks of whole lines;
- a directory of ``.npy`` arrays, memory-mapped: ``X.npy`` + ``y.npy`` (dense) or
  ``data.npy``, ``indices.npy``, ``indptr.npy`` + ``y.npy`` (CSR, zero-based indices),
  optionally with the ``calopt-stream.json`` that :func:`convert` writes;
- Parquet through pyarrow (the optional extra ``calopt[parquet]``), by row group;
- an iterable of ``(X, y)`` chunks built in Python.

:func:`survey` is the first pass: row and class counts, the width, the index base and
the max-abs scaling, and a uniform sample of rows for the step trial. :class:`StreamReader`
then serves the training loop (:mod:`calopt.training.loop`) like an
:class:`~calopt.io.batches.ArrayReader`: each epoch reads the parts in a seeded random
order (plain text files are read at their byte offsets; compressed text can only be
read in file order) through a bounded shuffle buffer. Only O(n) numbers (the labels,
the scores) are ever held for the whole data; features are O(part + buffer) (a
memory-mapped ``X.npy``: the mapped pages of the parts that still have rows in the buffer,
:class:`MappedRows`).
"""

from __future__ import annotations

import errno
import json
import math
import mmap
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from calopt.backends import column_max_abs, is_numpy
from calopt.errors import DataError, ParameterError, one_line
from calopt.io.batches import ArrayReader, Batch
from calopt.io.files import (
    Dataset,
    ReadOptions,
    csv_layout,
    label_column_index,
    one_based_columns,
    open_text,
    read_csv_block,
    read_libsvm_block,
    text_blocks,
)
from calopt.io.labels import label_values
from calopt.io.svmtext import read_ahead

__all__ = [
    "BUFFER_ROWS",
    "CHUNK_BYTES",
    "STREAM_ABOVE_BYTES",
    "ChunkSource",
    "StreamReader",
    "Survey",
    "chunk_source",
    "convert",
    "is_chunked",
    "open_stream",
    "read_whole",
    "survey",
    "widen",
]

#: Bytes of text (decompressed) parsed at a time: about 2-3× that in memory while parsed.
CHUNK_BYTES = 32 << 20
#: Bytes of LIBSVM text :func:`convert` parses at a time (see :meth:`ChunkSource.for_convert`):
#: a sparse block's arrays stay below glibc's largest mmap threshold (32 MB).
CONVERT_CHUNK_BYTES = 4 << 20
#: Blocks of LIBSVM text :func:`convert` parses at once, in threads (:func:`_in_threads`).
CONVERT_PARSE_THREADS = 2
#: Rows the shuffle buffer keeps back to mix with the next part.
BUFFER_ROWS = 50_000
#: ``calopt train`` streams a data file at least this large without being asked (--stream).
STREAM_ABOVE_BYTES = 1 << 30
#: Rows of the pool gathered at a time to serve batches (at least one batch).
GATHER_ROWS = 16_384
#: Where an epoch serves folded batches (:class:`FoldedRows`: float32 rows of a memory-mapped
#: ``X.npy`` to an algorithm that reads rows only through products), the shuffle keeps runs of
#: this many consecutive rows together, and a batch mixes at least :data:`RUNS_A_BATCH` runs
#: (:func:`run_rows`): at 10⁷ × 100 float32, an epoch's gathers and products took 4.8 times the
#: time of reading the mapping once with rows drawn one by one, 2.2 times with runs of 64
#: (``benchmarks/epoch_floor.py``).
RUN_ROWS = 64
#: The fewest runs a batch mixes: runs are at most batch_size / RUNS_A_BATCH rows (1 below that).
RUNS_A_BATCH = 16
#: A memory-mapped ``X.npy`` of at most this share of the machine's physical memory stays mapped,
#: every page, from one epoch to the next (:class:`StreamReader`'s ``keep_mapped``): the page cache
#: holds such a file anyway, and mapping it again each epoch and releasing each part's pages when
#: the buffer is done with it (what a larger file gets, so that the resident set holds the buffer's
#: parts, not the file) made an epoch at 10⁷ × 100 float32 fault every page in again: 0.23 s of the
#: reader's 0.86 s.
KEEP_MAPPED_SHARE = 0.25
#: Linux's ``MADV_POPULATE_READ`` (``mmap`` names it from Python 3.13): map a range's pages now.
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)
#: The description file :func:`convert` writes into its directory.
META = "calopt-stream.json"
_PARQUET_MAGIC = b"PAR1"


@dataclass
class Part:
    """Features (float64 ndarray or CSR, the part's own width for LIBSVM) and labels as read."""

    X: Any
    labels: np.ndarray
    #: The unit ``ChunkSource.read`` reads again (a text block, a row range, a row group, a chunk).
    unit: int = 0
    #: LIBSVM: whether an index 0 occurs (the first pass decides the index base from it).
    has_zero: bool = False


# ----------------------------------------------------------------------------- sources
class ChunkSource:
    """A file read part by part. ``parts()`` yields every part in file order;
    ``read(i)`` reads part ``i`` again when ``seekable`` (after ``parts()`` has run once)."""

    source: str = "<chunks>"
    format: str = "arrays"
    zero_based: bool | None = None
    #: Whether the width is only the largest index seen (LIBSVM), as :class:`~calopt.io.files.Dataset`.
    open_width: bool = True
    seekable: bool = False
    #: The number of rows when known before reading (array directories), else None.
    n_rows: int | None = None
    #: The columns' names, ``{"feature_names", "label_column"}``, when the file names them (a CSV
    #: header once its first block is read, Parquet), else None: the columns are known by position.
    columns: dict[str, Any] | None = None
    #: The peak bytes a row of the first pass's sample costs, when known before reading (array
    #: directories), else None: a dense directory's sample is filled in place (a row's bytes as
    #: read); a CSR directory's is stacked from its parts at the end of the pass (twice them).
    sample_row_bytes: float | None = None

    def parts(self) -> Iterator[Part]:
        raise NotImplementedError

    def read(self, index: int) -> Iterator[Part]:
        raise NotImplementedError

    def read_many(self, order: Iterable[int]) -> Iterator[tuple[int, Part]]:
        """(unit, part) of ``read(unit)`` for each unit of ``order`` in turn (a source may read ahead)."""
        for index in order:
            for part in self.read(index):
                yield index, part

    def settle(self, survey: Survey) -> None:
        """Learn what the first pass found (the index base of a LIBSVM file)."""

    def mapped(self) -> MappedRows | None:
        """Every row of the features, as read (float32 or float64), mapped once for a pass that
        gathers rows in any order (:meth:`StreamReader.epoch`); None when the source has no such
        file (text, CSR, Parquet, chunks, features of another dtype)."""
        return None

    def written_shift(self) -> int:
        """What to subtract from the column indices of the parts the first pass read (1 for a
        LIBSVM file found one-based: read as written until then), 0 for any other source."""
        return 0

    def shift_before_settled(self, seen_zero: bool) -> int:
        """What :func:`convert` subtracts from a part's column indices as it writes them in the
        first pass, before :meth:`written_shift` is known: that shift if it is known already,
        else its likely value (a LIBSVM file read with ``zero_based="auto"``: 1 until an index 0
        has been seen, ``seen_zero``); the parts where the guess was wrong are mended at the end."""
        return 0

    def for_convert(self) -> ChunkSource:
        """The source :func:`convert` reads (itself; a LIBSVM text file in smaller blocks)."""
        return self


class _TextSource(ChunkSource):
    """LIBSVM or CSV text in blocks of whole lines; a plain file is seekable by byte offset.
    ``parse_threads`` > 1: ``parts()`` parses that many blocks at once in threads (in order)."""

    parse_threads = 1

    def __init__(self, found: Any, chunk_bytes: int):
        self.found, self.source, self.chunk_bytes = found, found.source, int(chunk_bytes)
        self.seekable = found.compression is None
        self.spans: list[tuple[int, int, int]] = []  # (first line, offset, length)

    def parts(self) -> Iterator[Part]:
        self.spans = []

        def blocks() -> Iterator[tuple[int, bytes]]:
            for line, offset, block in text_blocks(self.found, self.chunk_bytes):
                if block.strip():
                    self.spans.append((line, offset, len(block)))
                    yield line, block

        read = read_ahead(blocks())
        parsed = _in_threads(self._parse, read, self.parse_threads) if self.parse_threads > 1 \
            else (self._parse(block, line) for line, block in read)
        for unit, part in enumerate(parsed):
            part.unit = unit
            yield part

    def read(self, index: int) -> Iterator[Part]:
        for _, part in self.read_many([index]):
            yield part

    def read_many(self, order: Iterable[int]) -> Iterator[tuple[int, Part]]:
        """The blocks of ``order`` read at their offsets, the next read while one is parsed."""
        order = [int(index) for index in order]

        def blocks() -> Iterator[tuple[int, bytes]]:
            with open(self.found.path, "rb") as f:
                for index in order:
                    line, offset, length = self.spans[index]
                    f.seek(offset)
                    yield line, f.read(length)

        for index, (line, block) in zip(order, read_ahead(blocks()) if len(order) > 1 else blocks()):
            yield index, self._parse(block, line)

    def _parse(self, block: bytes, line: int) -> Part:
        raise NotImplementedError


class _LibsvmSource(_TextSource):
    """LIBSVM text: each block through :func:`calopt.io.files.read_libsvm_block` as written
    (zero-based), the base applied once the first pass has seen every index."""

    format, open_width = "libsvm", True

    def __init__(self, found: Any, chunk_bytes: int, zero_based: bool | str):
        super().__init__(found, chunk_bytes)
        self.requested, self.zero_based = zero_based, None

    def _parse(self, block: bytes, line: int) -> Part:
        X, labels, has_zero = read_libsvm_block(self.found, block, line, one_based=self.requested is False)
        if self.zero_based is False:
            X = one_based_columns(X)
        return Part(X, labels, has_zero=has_zero)

    def written_shift(self) -> int:
        return 1 if self.zero_based is False else 0

    def shift_before_settled(self, seen_zero: bool) -> int:
        if self.requested == "auto":
            return 0 if seen_zero else 1
        return 0 if self.requested else 1

    def for_convert(self) -> ChunkSource:
        """A copy reading blocks of at most :data:`CONVERT_CHUNK_BYTES`: :func:`convert` writes each
        part and drops it, so its parts need not be the stream's units (the arrays are the same
        whatever the blocks), and a small block's arrays are taken from memory the allocator
        reuses, where those of a 32 MB block are mapped and faulted in afresh each time."""
        copy = _LibsvmSource(self.found, min(self.chunk_bytes, CONVERT_CHUNK_BYTES), self.requested)
        copy.parse_threads = CONVERT_PARSE_THREADS
        return copy

    def settle(self, survey: Survey) -> None:
        """The index base, and the width, scaling and sample of a one-based file (seen as written)."""
        self.zero_based = bool(survey.has_zero) if self.requested == "auto" else bool(self.requested)
        if not self.zero_based and survey.n_features:
            survey.n_features -= 1
            survey.max_abs = survey.max_abs[1:]
            if survey.sample is not None:
                survey.sample = survey.sample[:, 1:]


def _in_threads(parse: Callable[[bytes, int], Part], blocks: Iterable[tuple[int, bytes]],
                threads: int) -> Iterator[Part]:
    """``parse(block, line)`` of each ``(line, block)`` in order, ``threads`` blocks parsed at
    once by a pool of threads (NumPy's kernels and pandas' parser release the GIL) while the
    caller works on the part before: an exception is raised at its block's place."""
    with ThreadPoolExecutor(threads, thread_name_prefix="calopt-parse") as pool:
        pending: deque[Future] = deque()
        try:
            for line, block in blocks:
                pending.append(pool.submit(parse, block, line))
                if len(pending) > threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


class _CsvSource(_TextSource):
    """CSV text: the first block read with the options given (delimiter sniffed, header
    detected, label column by name or index as :func:`calopt.io.files.read_data` does),
    every later block with the layout the first one settled."""

    format, open_width = "csv", False

    def __init__(self, found: Any, chunk_bytes: int, label_column: int | str, delimiter: str | None,
                 header: bool | None):
        super().__init__(found, chunk_bytes)
        self.options = (label_column, delimiter, header)
        self.layout: tuple[str, str] | None = None  # (label column index, delimiter) after the first block

    def _parse(self, block: bytes, line: int) -> Part:
        if line == 1:
            X, labels, self.columns = read_csv_block(self.found, block, line, *self.options)
            self.layout = csv_layout(self.found, block, *self.options[:2])
        else:
            X, labels, _ = read_csv_block(self.found, block, line, *self.layout, False)
        return Part(X, labels)


def _checked_features(X: Any, labels: np.ndarray, source: str, first_row: int) -> Part:
    """A part of an array file: numeric features (float32 stays float32, other numbers become
    float64) and finite labels. Dense features are checked for finiteness by the first pass,
    in the max-abs reduction it makes anyway (:func:`_part_max_abs`); sparse ones here."""
    if getattr(X, "dtype", np.dtype(object)).kind not in "biuf":
        raise DataError(f"{source}: features must be numeric, not {X.dtype}")
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    X = X.astype(dtype, copy=False) if sp.issparse(X) else np.asarray(X, dtype=dtype)
    if sp.issparse(X) and not np.isfinite(X.data).all():
        _not_finite(X, source, first_row)
    labels = np.asarray(labels)
    if labels.dtype.kind not in "biufUS":
        raise DataError(f"{source}: labels must be numbers or strings, not {labels.dtype}")
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        row = first_row + int(np.flatnonzero(~np.isfinite(labels))[0])
        raise DataError(f"{source}: y[{row}] is not finite (labels must be finite)")
    return Part(X, labels)


def _not_finite(X: Any, source: str, first_row: int) -> None:
    """Raise the error naming the first non-finite feature of a part (rows counted from ``first_row``)."""
    if sp.issparse(X):
        k = int(np.flatnonzero(~np.isfinite(X.data))[0])
        row, column = int(np.searchsorted(X.indptr, k, side="right")) - 1, int(X.indices[k])
    else:
        row, column = (int(i) for i in np.argwhere(~np.isfinite(X))[0])
    raise DataError(f"{source}: X[{first_row + row}, {column}] is not finite (row {first_row + row}, from 0)")


def _load_npy(path: Path, source: str) -> np.memmap:
    """A C-ordered ``.npy`` array of numbers or strings, opened by ``np.load(mmap_mode="r",
    allow_pickle=False)`` (which checks its header against the file's size, and never
    unpickles); what numpy refuses is explained by :func:`_npy_problem`. Its rows are read
    through :func:`_rows_of` and :func:`_mapped_rows`, never through this mapping."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError, SyntaxError) as exc:
        raise DataError(f"{source}: {path.name}: {_npy_problem(path, exc)}") from None
    if not isinstance(array, np.memmap):  # an .npz archive under a .npy name
        array.close()
        raise DataError(f"{source}: {path.name}: not a .npy array (a zip archive)")
    if array.dtype.kind not in "biufUS":
        raise DataError(f"{source}: {path.name}: an array of {array.dtype} (numbers or strings only; never pickle)")
    if array.ndim > 1 and not array.flags.c_contiguous:
        raise DataError(f"{source}: {path.name}: Fortran order; save it in C order (rows contiguous) to stream it")
    return array


def _npy_problem(path: Path, exc: BaseException) -> str:
    """Why ``np.load`` refused ``path`` (``exc``), from its header: Python objects, fewer bytes than
    the header declares, else numpy's own words."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(f)
            offset = f.tell()
        size = os.path.getsize(path)
    except (OSError, ValueError, EOFError, SyntaxError):
        return f"not a .npy array ({one_line(exc, 80)})"
    if dtype.hasobject:
        return f"an array of {dtype} (numbers or strings only; never pickle)"
    if offset + math.prod(shape) * dtype.itemsize > size:
        return f"declares {'×'.join(map(str, shape))} {dtype} but holds {size - offset} bytes"
    return f"not a .npy array ({one_line(exc, 80)})"


def _rows_of(array: np.memmap, start: int, stop: int, dtype: Any = None) -> np.ndarray:
    """A copy of rows ``start:stop`` through a mapping of those rows only, unmapped on return:
    reading part by part, neither the address space nor the resident set holds the whole file
    (a shuffled epoch over a dense ``X.npy`` maps it whole, read-only: :class:`MappedRows`)."""
    part = _mapped_rows(array, start, stop)
    rows = np.array(part, dtype=dtype or array.dtype, copy=True)
    del part  # the last reference: unmapped here
    return rows


def _mapped_rows(array: np.memmap, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of an array :func:`_load_npy` opened, as a read-only mapping of those rows
    only (unmapped when the last reference goes): what a pass reads once, with no copy of its own.
    The rows are not a slice of ``array``: pages read through its whole-file mapping would stay
    resident for as long as the source lives."""
    row_bytes = array.dtype.itemsize * math.prod(array.shape[1:])
    if stop <= start or row_bytes == 0:
        return np.zeros((max(stop - start, 0), *array.shape[1:]), dtype=array.dtype)
    return np.memmap(array.filename, dtype=array.dtype, mode="r", offset=array.offset + start * row_bytes,
                     shape=(stop - start, *array.shape[1:]))


class MappedRows:
    """An ``X.npy`` mapped whole and read-only for one epoch (:meth:`ChunkSource.mapped`): ``X`` is
    every row as written (a view of the mapping, no copy), and :meth:`drop` takes the pages of
    rows the epoch is done with out of the process's resident set (the page cache keeps them),
    so that it holds the pages of the parts whose rows are still in the shuffle buffer, not the
    file. The address space holds the file, read-only: a shared file mapping, which is neither
    private memory nor counted by ``RLIMIT_DATA``."""

    def __init__(self, array: np.memmap):
        with open(array.filename, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._offset, self._row_bytes = int(array.offset), array.dtype.itemsize * math.prod(array.shape[1:])
        self.X = np.frombuffer(self._map, dtype=array.dtype, count=array.size, offset=self._offset).reshape(array.shape)

    @property
    def nbytes(self) -> int:
        return len(self._map)

    def populate(self) -> None:
        """Map every page now, in one call (``MADV_POPULATE_READ``, Linux 5.14 and later; elsewhere
        nothing): cheaper than the page faults of a first pass over the file."""
        if hasattr(self._map, "madvise"):
            try:
                self._map.madvise(MADV_POPULATE_READ)
            except (OSError, ValueError):  # an older kernel, another system: the faults as before
                pass

    def drop(self, start: int, stop: int) -> None:
        """Release the whole pages of rows ``start:stop`` (their first and last page may hold other rows)."""
        page = mmap.PAGESIZE
        low = -(-(self._offset + start * self._row_bytes) // page) * page
        high = (self._offset + stop * self._row_bytes) // page * page
        if high > low and hasattr(self._map, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, low, high - low)

    def close(self) -> None:
        self.X = None
        try:
            self._map.close()
        except BufferError:  # a view of the rows is still held somewhere: unmapped when it goes
            pass


#: The fields of :data:`META` a directory's reading uses, and what each must be.
_META_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "format": ("one of libsvm, csv, npy, csr, parquet",
               lambda v: isinstance(v, str) and v in ("libsvm", "csv", "npy", "csr", "parquet")),
    "n_features": ("a whole number ≥ 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "zero_based": ("true, false or null", lambda v: v is None or isinstance(v, bool)),
    "open_width": ("true or false", lambda v: isinstance(v, bool)),
}


def _check_meta(meta: Any, where: str) -> None:
    """Refuse a :data:`META` document that is not an object, or whose fields in use have the wrong
    type (``"n_features": "five"``), with one line naming the field."""
    if not isinstance(meta, dict):
        raise DataError(f"{where}: must be a JSON object, not {one_line(json.dumps(meta), 40)}")
    for name, (kind, valid) in _META_FIELDS.items():
        if name in meta and not valid(meta[name]):
            raise DataError(f"{where}: {name} must be {kind}, not {one_line(json.dumps(meta[name]), 40)}")


class _ArrayDirectory(ChunkSource):
    """A directory of memory-mapped ``.npy`` arrays, read ``part_rows`` rows at a time."""

    seekable = True

    def __init__(self, path: Path, part_rows: int):
        self.path, self.source, self.part_rows = path, str(path), int(part_rows)
        meta_path = path / META
        self.meta: dict[str, Any] = {}
        if meta_path.is_file():
            try:
                self.meta = json.loads(meta_path.read_text())
            except (OSError, ValueError) as exc:
                raise DataError(f"{self.source}: {META}: {one_line(exc, 80)}") from None
            _check_meta(self.meta, f"{self.source}: {META}")
        self.y = _load_npy(path / "y.npy", self.source)
        if self.y.ndim != 1:
            raise DataError(f"{self.source}: y.npy must be 1-D, not of shape {self.y.shape}")
        self.n_rows = int(self.y.shape[0])
        self.zero_based = self.meta.get("zero_based")

    def parts(self) -> Iterator[Part]:
        for index in range(math.ceil(self.n_rows / self.part_rows)):
            yield from self.read(index)

    def _rows(self, index: int) -> tuple[int, int]:
        start = index * self.part_rows
        return start, min(start + self.part_rows, self.n_rows)


class _DenseDirectory(_ArrayDirectory):
    format, open_width = "npy", False

    def __init__(self, path: Path, part_rows: int):
        super().__init__(path, part_rows)
        self.X = _load_npy(path / "X.npy", self.source)
        if self.X.ndim != 2 or self.X.shape[0] != self.n_rows:
            raise DataError(f"{self.source}: X.npy has shape {self.X.shape}; y.npy has {self.n_rows} labels")
        self.format = self.meta.get("format", "npy")
        self.open_width = bool(self.meta.get("open_width", False))
        self.sample_row_bytes = float(self.X.dtype.itemsize * math.prod(self.X.shape[1:]))

    def mapped(self) -> MappedRows | None:
        X = self.X
        if X.dtype not in (np.float32, np.float64) or X.size == 0:
            return None
        return MappedRows(X)

    def read(self, index: int) -> Iterator[Part]:
        start, stop = self._rows(index)
        if self.X.dtype.kind not in "biuf":
            raise DataError(f"{self.source}: X.npy must hold numbers, not {self.X.dtype}")
        X = _mapped_rows(self.X, start, stop)
        if X.dtype not in (np.float32, np.float64):
            X = np.array(X, dtype=np.float64)
        # float32 and float64 rows are served as the mapping itself: the pass that reads them
        # makes the only copy (the pool's, the sample's) or none (the first pass's reductions)
        yield replace(_checked_features(X, _rows_of(self.y, start, stop), self.source, start), unit=index)


class _CsrDirectory(_ArrayDirectory):
    format, open_width = "csr", True

    def __init__(self, path: Path, part_rows: int):
        super().__init__(path, part_rows)
        self.data, self.indices, self.indptr = (_load_npy(path / f"{name}.npy", self.source)
                                                for name in ("data", "indices", "indptr"))
        if self.indptr.ndim != 1 or self.indptr.shape[0] != self.n_rows + 1 or self.data.shape != self.indices.shape \
                or int(_rows_of(self.indptr, self.n_rows, self.n_rows + 1)[0]) != self.data.shape[0]:
            raise DataError(f"{self.source}: data, indices and indptr do not form a CSR matrix of "
                            f"{self.n_rows} rows (y.npy's)")
        if self.indices.dtype.kind not in "iu" or self.indptr.dtype.kind not in "iu":
            raise DataError(f"{self.source}: indices and indptr must be integers")
        self.format = self.meta.get("format", "csr")
        self.width = self.meta.get("n_features")
        self.sample_row_bytes = 2 * ((self.data.dtype.itemsize + self.indices.dtype.itemsize) * self.data.shape[0]
                                     / max(1, self.n_rows) + 8)

    def read(self, index: int) -> Iterator[Part]:
        start, stop = self._rows(index)
        pointers = _rows_of(self.indptr, start, stop + 1, np.int64)
        first, last = int(pointers[0]), int(pointers[-1])
        steps = np.diff(pointers)
        if (start == 0 and first != 0) or first < 0 or last > self.data.shape[0] or int(steps.min()) < 0:
            row = start + int(np.argmax(steps < 0)) if int(steps.min()) < 0 else start
            raise DataError(f"{self.source}: indptr.npy: row {row} (from 0) does not lie within the data "
                            f"(indptr must start at 0, never decrease and end at {self.data.shape[0]})")
        indices = _rows_of(self.indices, first, last)
        self._check_columns(indices, pointers, start)
        width = self.width if self.width is not None else (int(indices.max()) + 1 if indices.size else 0)
        X = sp.csr_matrix((_rows_of(self.data, first, last), indices, pointers - first), shape=(stop - start, width))
        if not X.has_canonical_format:  # unsorted or repeated columns; scipy would sum the repeats
            _refuse_repeated_columns(X, self.source, start)
        yield replace(_checked_features(X, _rows_of(self.y, start, stop), self.source, start), unit=index)

    def _check_columns(self, indices: np.ndarray, pointers: np.ndarray, start: int) -> None:
        """Every column index within 0..width−1 (≥ 0 when the width is not recorded)."""
        if not indices.size:
            return
        bad = indices < 0 if self.width is None else (indices < 0) | (indices >= self.width)
        if bad.any():
            k = int(np.argmax(bad))
            row = start + int(np.searchsorted(pointers - pointers[0], k, side="right")) - 1
            bound = "must be ≥ 0" if self.width is None else f"is outside 0..{self.width - 1} ({META}: " \
                f"{self.width} features)"
            raise DataError(f"{self.source}: row {row} (from 0): column index {int(indices[k])} {bound}")


def _refuse_repeated_columns(X: sp.csr_matrix, source: str, first_row: int) -> None:
    """Raise the error naming the first row that holds a column twice (the same in a LIBSVM file
    is refused too); rows whose distinct columns are merely unsorted pass."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    order = np.lexsort((X.indices, rows))
    repeated = (rows[order][1:] == rows[order][:-1]) & (X.indices[order][1:] == X.indices[order][:-1])
    if repeated.any():
        k = order[int(np.argmax(repeated))]
        raise DataError(f"{source}: row {first_row + int(rows[k])} (from 0): column {int(X.indices[k])} appears "
                        f"twice (a row's column indices must be distinct)")


class _ParquetSource(ChunkSource):
    """A Parquet file through pyarrow: a part is a row group, read ``part_rows`` rows at a time;
    the label column by index (negative from the end) or name, every other column a feature."""

    format, open_width, seekable = "parquet", False, True

    def __init__(self, path: Path, part_rows: int, label_column: int | str):
        try:
            import pyarrow
            import pyarrow.parquet as pq
        except ImportError:
            raise ParameterError(f"{path}: reading Parquet needs pyarrow: pip install 'calopt[parquet]'") from None
        self.source, self.part_rows = str(path), int(part_rows)
        try:
            self.file = pq.ParquetFile(path)
        except (pyarrow.ArrowException, OSError, ValueError) as exc:
            raise DataError(f"{self.source}: not a Parquet file ({one_line(exc, 80)})") from None
        names = self.file.schema_arrow.names
        if len(names) < 2:
            raise DataError(f"{self.source}: {len(names)} column; need features and a label")
        self.label = names[label_column_index(label_column, names, self.source)]
        self.features = [name for name in names if name != self.label]
        if len(set(names)) == len(names):  # a name given twice cannot find its column: by position
            self.columns = {"feature_names": self.features, "label_column": self.label}
        self.errors = pyarrow.ArrowException
        self.starts = np.concatenate([[0], np.cumsum([self.file.metadata.row_group(g).num_rows
                                                      for g in range(self.file.num_row_groups)])])

    def parts(self) -> Iterator[Part]:
        for group in range(self.file.num_row_groups):
            yield from self.read(group)

    def read(self, index: int) -> Iterator[Part]:
        first = int(self.starts[index])
        for batch in self.file.iter_batches(batch_size=self.part_rows, row_groups=[index]):
            try:
                X = np.column_stack([batch.column(name).to_numpy(zero_copy_only=False) for name in self.features])
            except (self.errors, ValueError, TypeError) as exc:
                raise DataError(f"{self.source}: row group {index}: {one_line(exc, 80)}") from None
            column = batch.column(self.label)
            if column.null_count:  # to_numpy would make them None (a class "None") or NaN
                row = first + int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0]) + 1
                raise DataError(f"{self.source}: row {row}: the label (column {one_line(self.label, 40)!r}) is missing")
            labels = column.to_numpy(zero_copy_only=False)
            if labels.dtype.kind == "O":
                labels = labels.astype(str)
            yield replace(_checked_features(X, labels, self.source, first), unit=index)
            first += batch.num_rows


class _Chunks(ChunkSource):
    """``(X, y)`` pairs from Python: a list (seekable) or any iterable that can be iterated again."""

    format, open_width = "arrays", False

    def __init__(self, chunks: Iterable[Any]):
        self.chunks, self.seekable = chunks, isinstance(chunks, Sequence)

    def parts(self) -> Iterator[Part]:
        iterator = iter(self.chunks)
        if iterator is self.chunks:
            raise ParameterError("the chunks are a one-shot iterator (a generator?); training reads them at least "
                                 "twice: pass a list, an object whose __iter__ starts again, or a file source "
                                 "(calopt.io.stream.open_stream)")
        start = 0
        for index, item in enumerate(iterator):
            yield replace(self._part(item, start), unit=index)
            start += int(np.shape(item[1])[0]) if _is_pair(item) else 0

    def read(self, index: int) -> Iterator[Part]:
        yield replace(self._part(self.chunks[index], 0), unit=index)

    def _part(self, item: Any, start: int) -> Part:
        from calopt.backends import to_numpy

        if not _is_pair(item):
            raise ParameterError(f"each chunk must be a pair (X, y), not {type(item).__name__}")
        X, labels = item
        X = X.tocsr() if sp.issparse(X) else to_numpy(X)
        labels = np.asarray(to_numpy(labels))
        if labels.dtype.kind == "O" and labels.ndim == 1 and labels.size:  # a pandas column of text, say
            labels = label_values(labels, source=f"the chunk at row {start}")
        if getattr(X, "ndim", 0) != 2 or labels.ndim != 1 or X.shape[0] != labels.shape[0]:
            raise DataError(f"chunk at row {start}: X of shape {np.shape(X)} and y of shape {labels.shape} "
                            f"(need 2-D X and 1-D y of as many rows)")
        return _checked_features(X, labels, "chunks", start)


def _is_pair(item: Any) -> bool:
    return isinstance(item, (tuple, list)) and len(item) == 2


def is_chunked(X: Any) -> bool:
    """Whether ``X`` is a chunked source: a :class:`ChunkSource`, or a list/iterable of (X, y) pairs."""
    if isinstance(X, ChunkSource):
        return True
    if hasattr(X, "shape") or isinstance(X, (str, bytes, os.PathLike)) or not isinstance(X, Iterable):
        return False
    if isinstance(X, Sequence):
        return len(X) > 0 and all(_is_pair(item) for item in X)
    return True  # an iterable without a shape: chunks (checked as they are read)


def chunk_source(X: Any) -> ChunkSource:
    return X if isinstance(X, ChunkSource) else _Chunks(X)


def open_stream(
    path: str | os.PathLike,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    part_rows: int | None = None,
    **options: Any,
) -> ChunkSource:
    """A chunked source for a data file or directory (see the module docstring for the layouts).

    ``options`` are the keywords of :class:`~calopt.io.files.ReadOptions` (``format``,
    ``label_column``, ``delimiter``, ``header``, ``zero_based``), meaning what they mean for
    :func:`calopt.io.files.read_data`. Text is parsed ``chunk_bytes`` (decompressed) at a
    time; arrays and Parquet are read ``part_rows`` rows at a time (default: about
    ``chunk_bytes`` of ``X.npy``'s rows, of float64 rows otherwise).
    """
    read = ReadOptions.named("open_stream", options)
    source = os.fspath(path)
    if source == "-":
        raise ParameterError("a stream reads its data at least twice: give a file, not standard input")
    if not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise ParameterError(f"chunk_bytes must be a whole number ≥ 1, not {chunk_bytes!r}")
    path = Path(source)
    if path.is_dir():
        rows = part_rows or max(1, chunk_bytes // (8 * 100))
        if (path / "X.npy").exists():
            if part_rows is None:  # about chunk_bytes of X's own rows (float32: twice the rows of float64)
                X = _load_npy(path / "X.npy", source)
                rows = max(1, chunk_bytes // max(1, X.dtype.itemsize * math.prod(X.shape[1:])))
            return _DenseDirectory(path, rows)
        if (path / "indptr.npy").exists():
            return _CsrDirectory(path, rows)
        raise DataError(f"{source}: is a directory, not a data file nor arrays to stream (X.npy, or data.npy, "
                        f"indices.npy and indptr.npy (CSR), with y.npy)")
    if (read.format or "").lower() == "parquet" or path.suffix in (".parquet", ".pq") \
            or _magic(path) == _PARQUET_MAGIC:
        return _ParquetSource(path, part_rows or 65_536, read.label_column)
    found, kind = open_text(path, read.format)
    if kind == "npz":
        raise DataError(f"{source}: an .npz archive cannot be memory-mapped; save X.npy and y.npy in a directory "
                        f"(or train in memory)")
    if kind == "csv":
        return _CsvSource(found, chunk_bytes, read.label_column, read.delimiter, read.header)
    return _LibsvmSource(found, chunk_bytes, read.zero_based)


def _magic(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(len(_PARQUET_MAGIC))
    except OSError:
        return b""  # open_text words the error


# ----------------------------------------------------------------------------- the first pass
@dataclass
class Survey:
    """What the first pass over a source found.

    ``labels`` holds every label in file order (O(n): what the loop needs for the class
    counts and the threshold); ``max_abs`` each feature's largest absolute value;
    ``part_rows`` the rows of each part; ``sample`` a uniform sample of at most
    ``sample_rows`` rows (raw features as read, float32 kept, their row numbers in
    ``sample_index``, increasing).
    """

    source: str
    format: str
    n_rows: int
    n_features: int
    labels: np.ndarray
    max_abs: np.ndarray
    part_rows: list[int]
    zero_based: bool | None = None
    has_zero: bool = False
    open_width: bool = True
    nnz: int = 0
    sparse: bool = False
    sample: Any = None
    sample_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: The seeded random keys of the sample's rows (the sample is the rows with the smallest keys).
    sample_keys: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: The columns' names when the file gives them (:attr:`ChunkSource.columns`).
    columns: dict[str, Any] | None = None
    #: With ``class_rows``: per label (at most two), a uniform sample of at most that many of its
    #: rows, as (rows, row numbers increasing, keys), drawn with keys of their own (independent of
    #: ``sample``'s), so a rare class keeps its rows where the uniform sample holds a few of them.
    class_samples: list[tuple[Any, np.ndarray, np.ndarray]] = field(default_factory=list)

    def bottom(self, rows: int) -> np.ndarray:
        """Positions in ``sample`` of its ``rows`` rows with the smallest keys, increasing: the
        bottom-``rows`` sample of the same keys (all of the sample when it holds no more)."""
        if self.sample_keys.size <= rows:
            return np.arange(self.sample_keys.size)
        return np.sort(np.argpartition(self.sample_keys, rows)[:rows])

    def reading(self) -> dict[str, Any]:
        """How the file was read (a model's ``options["data"]``, as for in-memory files; with the
        columns' names when the file gives them, so that later CSV files are matched by name)."""
        return {"format": self.format, "zero_based": self.zero_based, "n_features": self.n_features,
                **(self.columns or {})}


def widen(X: Any, width: int) -> Any:
    """X with ``width`` columns (zero columns appended; a narrower LIBSVM part)."""
    if X.shape[1] == width:
        return X
    if sp.issparse(X):
        X = X.tocsr(copy=True)
        X.resize((X.shape[0], width))
        return X
    return np.hstack([X, np.zeros((X.shape[0], width - X.shape[1]))])


def _stack(blocks: list[Any]) -> Any:
    if len(blocks) == 1:
        return blocks[0]
    width = max(block.shape[1] for block in blocks)
    blocks = [widen(block, width) for block in blocks]
    return sp.vstack(blocks, format="csr") if sp.issparse(blocks[0]) else np.concatenate(blocks)


def _part_max_abs(X: Any, source: str, first_row: int) -> np.ndarray:
    """Each column's largest absolute value in a part (float64), and the dense part's finiteness
    check: max and min are two vectorised reductions over the rows as read (no ``abs`` copy),
    and a NaN or an infinity anywhere shows in them."""
    if X.shape[0] == 0:
        return np.zeros(X.shape[1])
    part_max = column_max_abs(X)
    if not sp.issparse(X) and not np.isfinite(part_max).all():
        _not_finite(X, source, first_row)
    return part_max


def _bottom_index(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The row numbers (increasing), and their keys, of the ``k`` smallest of ``n`` keys ``rng.random`` draws in
    order, drawn a block at a time (the same keys as drawn part by part: a generator's
    stream does not depend on how its draws are split), holding O(k + block) keys."""
    block, bound = max(1 << 20, k), np.inf
    keys, index = np.zeros(0), np.zeros(0, dtype=np.int64)
    for start in range(0, n, block):
        part_keys = rng.random(min(block, n - start))
        take = np.flatnonzero(part_keys < bound)  # a key above the k-th smallest so far cannot enter
        keys, index = np.concatenate([keys, part_keys[take]]), np.concatenate([index, start + take])
        if keys.size > k:
            keep = np.argpartition(keys, k)[:k]
            keys, index = keys[keep], index[keep]
            bound = float(keys.max())
    order = np.argsort(index)
    return index[order], keys[order]


class _BottomK:
    """The rows with the ``k`` smallest keys seen so far (bottom-k sampling, a uniform sample
    without replacement when the keys are uniform): a part's rows enter only with a key below
    the k-th smallest so far, and the candidates are cut back to ``k`` whenever they exceed
    1.5 k, so the sample is never re-stacked at every part and holds at most 1.5 k rows."""

    def __init__(self, k: int):
        self.k, self.bound = int(k), np.inf
        self.keys: list[np.ndarray] = []
        self.index: list[np.ndarray] = []
        self.rows: list[Any] = []
        self.held = 0

    def add(self, X: Any, keys: np.ndarray, first_row: int) -> None:
        take = np.flatnonzero(keys < self.bound)
        if take.size == 0:
            return
        rows = X[take]  # a copy (of the mapping's rows, for a memory-mapped part)
        self.rows.append(rows if sp.issparse(rows) else np.asarray(rows))
        self.keys.append(keys[take])
        self.index.append(first_row + take)
        self.held += take.size
        if self.held > 1.5 * self.k:
            self._cut()

    def _cut(self) -> None:
        keys, index, rows = np.concatenate(self.keys), np.concatenate(self.index), _stack(self.rows)
        if keys.size > self.k:
            keep = np.sort(np.argpartition(keys, self.k)[:self.k])
            keys, index, rows = keys[keep], index[keep], rows[keep]
            self.bound = float(keys.max())
        self.keys, self.index, self.rows, self.held = [keys], [index], [rows], keys.size

    def result(self, width: int) -> tuple[Any, np.ndarray, np.ndarray]:
        """(rows, their row numbers, increasing, their keys) of the sample."""
        if not self.keys:
            return None, np.zeros(0, dtype=np.int64), np.zeros(0)
        self._cut()
        rows = [widen(block, width) for block in self.rows]
        return rows[0], self.index[0], self.keys[0]


def survey(source: ChunkSource, *, sample_rows: int = 0, seed: int = 0,
           progress: Callable[[int, str], None] | None = None, each: Callable[[Part], None] | None = None,
           scale: bool = True, class_rows: int = 0) -> Survey:
    """The first pass: counts, width, index base, max-abs scaling and a uniform row sample.

    The sample keeps the rows with the ``sample_rows`` smallest seeded random keys
    (bottom-k sampling: chosen from the keys alone before the pass when the source knows its
    row count, :func:`_bottom_index`, else part by part, :class:`_BottomK`; the same rows
    either way); ``Survey.sample_keys`` are their keys, so
    the rows with the m < ``sample_rows`` smallest of them are the bottom-m sample.
    ``progress(rows, "survey")`` is called after each part, ``each(part)`` with each part as
    read (what :func:`convert` writes as the pass goes). ``scale=False`` (:func:`convert`, which
    does not use it) leaves ``max_abs`` zero for sparse parts instead of reducing every stored
    value (dense parts are still reduced: the reduction is their finiteness check).
    ``class_rows``: also keep, for each label, the bottom-``class_rows`` of its rows by keys of
    their own (``Survey.class_samples``; none when the labels take more than two values).
    """
    rng = np.random.default_rng([seed, 7])
    class_rng = np.random.default_rng([seed, 11])
    per_label: dict[Any, _BottomK] | None = {} if class_rows else None
    labels, part_rows, max_abs = [], [], np.zeros(0)
    width, nnz, has_zero, sparse, kinds = 0, 0, False, False, set()
    bottom = _BottomK(sample_rows) if sample_rows and source.n_rows is None else None
    # with the row count known, the sample's rows are known before the pass (from the keys
    # alone) and each is copied once, as its part goes by
    chosen, chosen_keys = _bottom_index(rng, source.n_rows, sample_rows) if sample_rows and bottom is None \
        else (None, None)
    picked: list[Any] = []
    n = 0
    for part in source.parts():
        X, rows = part.X, int(part.X.shape[0])
        if part.unit >= len(part_rows):
            part_rows.append(0)
        part_rows[part.unit] += rows
        if rows == 0:
            continue
        sparse = sp.issparse(X)
        if not source.open_width and width and X.shape[1] != width:
            raise DataError(f"{source.source}: rows from {n}: {X.shape[1]} features where earlier rows have {width}")
        width = max(width, int(X.shape[1]))
        part_max = _part_max_abs(X, source.source, n) if scale or not sparse else np.zeros(X.shape[1])
        max_abs = np.maximum(np.pad(max_abs, (0, width - max_abs.size)), np.pad(part_max, (0, width - part_max.size)))
        nnz += int(X.nnz) if sparse else rows * int(X.shape[1])
        has_zero |= part.has_zero
        kinds.add("text" if part.labels.dtype.kind in "US" else "number")
        if len(kinds) > 1:
            raise DataError(f"{source.source}: rows from {n}: labels are text where earlier ones are numbers "
                            f"(or the other way round); a streamed file's labels must be all numbers or all text")
        labels.append(np.asarray(part.labels))
        if each is not None:
            each(part)
        if per_label is not None:
            per_label = _add_by_label(per_label, X, np.asarray(part.labels), class_rng.random(rows), n, class_rows)
        if bottom is not None:
            bottom.add(X, rng.random(rows), n)
        elif chosen is not None:
            first, last = np.searchsorted(chosen, n), np.searchsorted(chosen, n + rows)
            if last > first and (sp.issparse(X) or source.open_width):
                picked.append(X[chosen[first:last] - n])
            elif last > first:  # dense rows of one width: copied straight into the sample
                if not picked:
                    picked.append(np.empty((chosen.size, X.shape[1]), dtype=X.dtype))
                np.take(X, chosen[first:last] - n, axis=0, out=picked[0][first:last])
        del X, part  # a memory-mapped part is unmapped here
        n += rows
        if progress is not None:
            progress(n, "survey")
    if n == 0:
        raise DataError(f"{source.source}: no data rows")
    if bottom is not None:
        sample, sample_index, sample_keys = bottom.result(width)
    elif chosen is not None:
        if n != source.n_rows:
            raise DataError(f"{source.source}: {n} rows read where {source.n_rows} were announced")
        sample, sample_index, sample_keys = _stack([widen(block, width) for block in picked]), chosen, chosen_keys
    else:
        sample, sample_index, sample_keys = None, np.zeros(0, np.int64), np.zeros(0)
    found = Survey(source.source, source.format, n, width, np.concatenate(labels), max_abs, part_rows,
                   has_zero=has_zero, open_width=source.open_width, nnz=nnz, sparse=sparse,
                   sample=sample, sample_index=sample_index, sample_keys=sample_keys, columns=source.columns,
                   class_samples=[] if per_label is None else [kept.result(width) for kept in per_label.values()])
    source.settle(found)
    found.zero_based = source.zero_based
    return found


def _add_by_label(per_label: dict[Any, _BottomK], X: Any, labels: np.ndarray, keys: np.ndarray, first_row: int,
                  k: int) -> dict[Any, _BottomK] | None:
    """Each label's rows of a part into its own bottom-``k`` sample (a row of another label enters
    with key ∞, never); None once more than two labels have been seen (a stream trains two classes)."""
    for label in np.unique(labels):
        key = label.item()
        if key not in per_label:
            if len(per_label) == 2:
                return None
            per_label[key] = _BottomK(k)
        per_label[key].add(X, np.where(labels == label, keys, np.inf), first_row)
    return per_label


def read_whole(source: ChunkSource) -> Dataset:
    """All the rows of ``source`` (a directory of arrays or a Parquet file) in memory, as
    :func:`calopt.io.files.read_data` gives a file (float64 features, CSR when sparse): read
    without streaming (``calopt train --no-stream``). The first pass (:func:`survey`)
    checks the parts and settles the width and index base, as it does for a stream, so the
    data and the way later files are read are the stream's."""
    found = survey(source)
    blocks = [widen(part.X, found.n_features) for part in source.parts()]
    X = _stack(blocks)
    X = X.astype(np.float64) if sp.issparse(X) else np.array(X, dtype=np.float64)  # a copy, not the mapping
    return Dataset(X, found.labels, found.source, format=found.format, zero_based=found.zero_based,
                   open_width=found.open_width)


# ----------------------------------------------------------------------------- the reader
def _physical_memory() -> int:
    """The machine's physical memory in bytes (0 where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return 0


def run_rows(batch_size: int) -> int:
    """Rows a run of a folded epoch holds: :data:`RUN_ROWS`, fewer where a batch would mix fewer
    than :data:`RUNS_A_BATCH` runs (1 from batches of 31 rows down: batch size 1 draws single
    rows, the papers' pointwise updates)."""
    return max(1, min(RUN_ROWS, batch_size // RUNS_A_BATCH))


class FoldedRows:
    """A batch of rows as stored (float32) standing for the rows divided by the scale: ``X @ w``
    is ``X_stored @ (w / scale)`` and ``X.T @ c`` is ``(X_storedᵀ @ c) / scale``, each product
    in the rows' dtype and returned in float64. The scale is folded into the d-vector (or the
    (d, k) matrix) instead of dividing every entry of every row; the products are the scaled
    rows' to float32's rounding, not to the bit. What an epoch serves an algorithm that reads a
    batch's rows only through these two products (``Algorithm.products_only``)."""

    ndim = 2

    def __init__(self, X: np.ndarray, inverse: np.ndarray):
        self.X, self.inverse, self.shape = X, inverse, X.shape
        self.dtype = np.dtype(np.float64)

    def __matmul__(self, other: Any) -> np.ndarray:
        inverse = self.inverse if other.ndim == 1 else self.inverse[:, None]
        return (self.X @ (other * inverse).astype(self.X.dtype)).astype(np.float64)

    @property
    def T(self) -> _Transpose:
        return _Transpose(self)

    def transposed_product(self, other: Any) -> np.ndarray:
        """``self.T @ other``: the stored rows' product, divided by the scale after it."""
        product = (self.X.T @ other.astype(self.X.dtype)).astype(np.float64)
        return product * (self.inverse if product.ndim == 1 else self.inverse[:, None])


class _Transpose:
    """``rows.T`` of a rows object (:class:`FoldedRows`, :class:`StreamedRows`): its ``@`` is
    ``rows.transposed_product``."""

    ndim = 2

    def __init__(self, rows: Any):
        self.rows, self.shape = rows, rows.shape[::-1]

    def __matmul__(self, other: Any) -> np.ndarray:
        return self.rows.transposed_product(other)


class StreamedRows:
    """The training features of a stream as a (n, d) operand of ``@``: ``X @ w`` reads every
    part in file order and returns the (n,) or (n, k) products; ``X.T @ c`` sums the parts'
    products. What the once-per-epoch steps (threshold, levels) need of ``reader.full()``,
    with one part's features in memory at a time."""

    ndim = 2

    def __init__(self, reader: StreamReader):
        self.reader = reader
        self.shape = (reader.n_samples, reader.n_features)
        self.dtype = np.dtype(np.float64)

    def __matmul__(self, other: Any) -> np.ndarray:
        return np.concatenate([X @ other for X, _, _ in self.reader.in_order("scores")])

    @property
    def T(self) -> _Transpose:
        return _Transpose(self)

    def transposed_product(self, other: Any) -> np.ndarray:
        """``self.T @ other``: the parts' products summed, in file order."""
        total = None
        for X, start, stop in self.reader.in_order("gradient"):
            term = X.T @ other[start:stop]
            total = term if total is None else total + term
        return total


class _Runs:
    """A mapped epoch's pool: runs of consecutive rows, as (first row, rows) pairs in pool order,
    and the part each run lies in. A part enters as runs of ``run`` rows from its first row (the
    last one shorter); a serve takes whole runs in a drawn order and splits at most one, the run
    its last batch ends in, keeping that run's other rows as a run in its place."""

    def __init__(self, run: int):
        self.run = run
        empty = np.zeros(0, dtype=np.int64)
        self.firsts, self.lengths, self.parts, self.size = empty, empty, empty, 0

    def add(self, start: int, stop: int, part: int) -> None:
        firsts = np.arange(start, stop, self.run, dtype=np.int64)
        lengths = np.minimum(self.run, stop - firsts)
        self.firsts = np.concatenate([self.firsts, firsts])
        self.lengths = np.concatenate([self.lengths, lengths])
        self.parts = np.concatenate([self.parts, np.full(firsts.size, part, dtype=np.int64)])
        self.size += stop - start

    def take(self, order: np.ndarray, serve: int) -> np.ndarray:
        """The rows of the runs in ``order`` (a permutation of the pool's runs), the first
        ``serve`` of them; the runs not served stay in pool order (the one split, its rest)."""
        if self.run == 1:  # runs of one row: the rows themselves
            rows = self.firsts[order[:serve]]
            kept = np.sort(order[serve:])
        else:
            lengths = self.lengths[order]
            ends = np.cumsum(lengths)
            whole = int(np.searchsorted(ends, serve, side="right"))  # runs served whole
            rows = np.repeat(self.firsts[order[:whole]] - (ends[:whole] - lengths[:whole]), lengths[:whole])
            rows += np.arange(rows.size, dtype=np.int64)
            part = serve - rows.size  # rows served of the next run: its rest stays
            if part:
                split = order[whole]
                rows = np.concatenate([rows, self.firsts[split] + np.arange(part, dtype=np.int64)])
                self.firsts[split] += part
                self.lengths[split] -= part
            kept = np.sort(order[whole:])
        self.firsts, self.lengths, self.parts = self.firsts[kept], self.lengths[kept], self.parts[kept]
        self.size -= serve
        return rows


class StreamReader:
    """The loop's reader over a chunked source: ``epoch`` shuffles by part order and a
    bounded buffer, ``full()`` is the whole data as :class:`StreamedRows`.

    Features are divided by ``scale`` (the survey's max-abs, fixed) as
    :func:`calopt.training.pipeline.prepare` does in memory; ``y`` holds the ±1 labels
    of every row in file order. An epoch with ``rng`` reads the parts in the order
    ``rng.permutation`` gives (when the source can seek and has more than one part),
    adds each to a pool, and whenever the pool holds more than ``buffer_rows`` rows
    serves a seeded random choice of whole batches from it, keeping ``buffer_rows`` rows
    to mix with the next part; at the end the rest is served in random order. Every row
    is served exactly once an epoch. With one part and a buffer at least as large, an
    epoch is exactly :class:`~calopt.io.batches.ArrayReader`'s (one ``rng.permutation(n)``).
    A memory-mapped ``X.npy`` (:meth:`ChunkSource.mapped`) is served by the same steps with
    row numbers in the pool, each batch gathered from the mapping (:meth:`_mapped_epoch`).
    """

    def __init__(self, source: ChunkSource, found: Survey, y: np.ndarray, scale: np.ndarray, xp: Any, *,
                 buffer_rows: int = BUFFER_ROWS, progress: Callable[[int, str], None] | None = None,
                 folded: bool = False, keep_mapped: bool | None = None):
        if not isinstance(buffer_rows, int) or isinstance(buffer_rows, bool) or buffer_rows < 0:
            raise ParameterError(f"buffer_rows must be a whole number ≥ 0, not {buffer_rows!r}")
        self.source, self.survey, self.y, self.scale, self.xp = source, found, y, scale, xp
        self.buffer_rows, self.progress = int(buffer_rows), progress
        #: serve a memory-mapped float32 ``X.npy``'s epochs folded (:class:`FoldedRows`, runs of
        #: :func:`run_rows`): the caller's algorithm reads rows only through products
        self.folded = bool(folded)
        #: keep a memory-mapped ``X.npy`` mapped whole from one epoch to the next (no part's pages
        #: released) until :meth:`close`; None: when it is at most :data:`KEEP_MAPPED_SHARE` of the
        #: physical memory
        self.keep_mapped = keep_mapped
        self._kept: MappedRows | None = None
        self.starts = np.concatenate([[0], np.cumsum(found.part_rows)]).astype(np.int64)
        self.passes = 0

    @property
    def n_samples(self) -> int:
        return self.survey.n_rows

    @property
    def n_features(self) -> int:
        return self.survey.n_features

    def prepared(self, X: Any) -> Any:
        X = widen(X, self.n_features)
        if sp.issparse(X):
            return (X @ sp.diags(1.0 / self.scale)).tocsr()
        return X / self.scale

    def _parts(self, order: Sequence[int] | None, prepare: bool = True) -> Iterator[tuple[Any, int, int]]:
        """(features, first row, stop row) of the parts in ``order`` (None: a pass in file order),
        scaled (float64), or as read (widened) with ``prepare`` false."""
        ready = self.prepared if prepare else (lambda X: widen(X, self.n_features))
        if order is None:
            start = 0
            for part in self.source.parts():
                stop = start + int(part.X.shape[0])
                if stop > start:
                    yield ready(part.X), start, stop
                start = stop
            return
        unit, start = None, 0
        for index, part in self.source.read_many(order):
            if index != unit:
                unit, start = index, int(self.starts[index])
            stop = start + int(part.X.shape[0])
            yield ready(part.X), start, stop
            start = stop

    def in_order(self, name: str, prepare: bool = True) -> Iterator[tuple[Any, int, int]]:
        """Every part in file order (a pass of ``name`` for the progress display), scaled, or as
        read with ``prepare`` false."""
        done = 0
        order = range(len(self.survey.part_rows)) if self.source.seekable else None
        for X, start, stop in self._parts(order, prepare):
            yield X, start, stop
            done += stop - start
            if self.progress is not None:
                self.progress(done, name)

    def epoch(self, batch_size: int, rng: np.random.Generator | None) -> Iterator[Batch]:
        self.passes += 1
        name = f"epoch {self.passes}"
        n_parts = len(self.survey.part_rows)
        order = None
        if self.source.seekable:
            order = rng.permutation(n_parts) if rng is not None and n_parts > 1 else range(n_parts)
        parts = list(order) if order is not None else None
        mapped = self._mapping() if parts is not None and not self.survey.sparse else None
        if mapped is not None:
            yield from self._mapped_epoch(mapped, parts, batch_size, rng, name, kept=mapped is self._kept)
            return
        pool, done = _DensePool() if not self.survey.sparse else _BlockPool(), 0
        for seen, (X, start, stop) in enumerate(self._parts(parts, prepare=False), start=1):
            pool.add(X, np.arange(start, stop))
            last = parts is not None and seen == len(parts)
            if rng is None or (not last and pool.size > self.buffer_rows):
                pooled, rows = pool.arrays()
                serve, chosen = self._draw(rows.size, last, batch_size, rng)
                if serve:
                    yield from self._batches(pooled, rows, chosen[:serve], batch_size)
                    done += serve
                    if self.progress is not None:
                        self.progress(done, name)
                del pooled, rows
                pool.keep(np.sort(chosen[serve:]))
                del chosen
        if pool.size:
            pooled, rows = pool.arrays()
            chosen = np.arange(rows.size) if rng is None else rng.permutation(rows.size)
            yield from self._batches(pooled, rows, chosen, batch_size)
            done += rows.size
            if self.progress is not None:
                self.progress(done, name)

    def _mapping(self) -> MappedRows | None:
        """The mapping an epoch gathers from: the kept one, or a new one (kept when ``keep_mapped``
        says so)."""
        if self._kept is not None:
            return self._kept
        mapped = self.source.mapped()
        keep = self.keep_mapped
        if mapped is not None and (keep or keep is None and mapped.nbytes <= KEEP_MAPPED_SHARE * _physical_memory()):
            self._kept = mapped
            mapped.populate()
        return mapped

    def close(self) -> None:
        """Release the mapping kept between epochs (if any); the next epoch maps the file again."""
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()

    def _draw(self, size: int, last: bool, batch_size: int, rng: np.random.Generator | None,
              runs: int | None = None) -> tuple[int, np.ndarray]:
        """How many rows of a pool of ``size`` to serve now (whole batches, ``buffer_rows`` kept
        back to mix with the next part; in file order without ``rng``, all of them at the ``last``
        part), and the pool's ``runs`` (its rows when None) in the order they are served: a
        ``rng.permutation``."""
        runs = size if runs is None else runs
        if rng is None:
            return (size if last else (size // batch_size) * batch_size), np.arange(runs)
        return ((size - self.buffer_rows) // batch_size) * batch_size, rng.permutation(runs)

    def _mapped_epoch(self, mapped: MappedRows, parts: list[int], batch_size: int, rng: np.random.Generator | None,
                      name: str, kept: bool = False) -> Iterator[Batch]:
        """:meth:`epoch` over rows mapped whole (:meth:`ChunkSource.mapped`): the pool holds row
        numbers only (:class:`_Runs` of one row), and each batch is gathered from the mapping by
        them. The same steps as the pool of rows below (parts added in ``parts`` order, the same
        draws of ``rng``, the rows kept back in pool order), so the same batches, to the bit (the
        same rows as read, made float64 and scaled when served), without copying a part into the
        pool or the kept rows within it. A part none of whose rows is left in the pool leaves the
        resident set (:meth:`MappedRows.drop`), and the mapping is closed at the epoch's end,
        unless it is ``kept`` for the next epoch (:meth:`_mapping`: then neither). Folded
        (``folded``, float32 rows, NumPy): the pool holds runs of :func:`run_rows` consecutive
        rows of a part (single rows below batches of 32, the draws above), the draws permute the
        runs, and each batch is the rows as stored in :class:`FoldedRows`."""
        X, starts, done = mapped.X, self.starts, 0
        fold = self.folded and X.dtype == np.float32 and is_numpy(self.xp)
        pool, live = _Runs(run_rows(batch_size) if fold else 1), np.zeros(len(self.survey.part_rows), dtype=np.int64)
        try:
            for seen, index in enumerate(parts, start=1):
                start, stop = int(starts[index]), int(starts[index + 1])
                pool.add(start, stop, index)
                live[index] = stop - start
                if rng is None or (seen < len(parts) and pool.size > self.buffer_rows):
                    serve, order = self._draw(pool.size, seen == len(parts), batch_size, rng, pool.firsts.size)
                    rows = pool.take(order, serve)
                    if serve:
                        yield from self._gathered(X, rows, batch_size, fold)
                        done += serve
                        if self.progress is not None:
                            self.progress(done, name)
                    if not kept:
                        left = np.bincount(pool.parts, minlength=live.size)
                        for gone in np.flatnonzero((live > 0) & (left == 0)):
                            mapped.drop(int(starts[gone]), int(starts[gone + 1]))
                        live = left
            if pool.size:
                runs = pool.firsts.size
                rows = pool.take(np.arange(runs) if rng is None else rng.permutation(runs), pool.size)
                yield from self._gathered(X, rows, batch_size, fold)
                done += rows.size
                if self.progress is not None:
                    self.progress(done, name)
        finally:
            del X
            if not kept:
                mapped.close()

    def _gathered(self, X: np.ndarray, rows: np.ndarray, batch_size: int, fold: bool = False) -> Iterator[Batch]:
        """The ``rows`` of ``X`` (all the rows, as read), in that order, a batch at a time: made
        float64 and scaled, or as stored in :class:`FoldedRows` (``fold``)."""
        if fold:  # X is 2-D, as wide as the data (a dense directory's X.npy)
            inverse = 1.0 / np.asarray(self.scale, dtype=np.float64)
            prepared = lambda stored: FoldedRows(stored, inverse)  # noqa: E731
        else:
            prepared = self.prepared
        labels, take = self.y[rows], X.take
        for start in range(0, rows.size, batch_size):
            yield Batch(prepared(take(rows[start:start + batch_size], axis=0)), labels[start:start + batch_size], None)

    def _batches(self, X: Any, rows: np.ndarray, chosen: np.ndarray, batch_size: int) -> Iterator[Batch]:
        """The pool's rows ``chosen`` (features as read), in that order, as the batches of an
        ArrayReader: the pool is copied as read (float32 stays float32, half the bytes of
        float64) and each row is made float64 and scaled once, when served. Dense rows are
        gathered a batch at a time (as the ArrayReader gathers large data); CSR rows
        :data:`GATHER_ROWS` rows (whole batches) at a time: a CSR pool made dense by the
        ArrayReader costs that many dense rows, not the pool's."""
        if not sp.issparse(X):  # a batch at a time: gathered, scaled and used while in cache
            for start in range(0, chosen.size, batch_size):
                some = chosen[start:start + batch_size]
                yield Batch(self.prepared(np.take(X, some, axis=0)), self.y[rows[some]], None)
            return
        step = max(1, GATHER_ROWS // batch_size) * batch_size
        for start in range(0, chosen.size, step):
            some = chosen[start:start + step]
            yield from ArrayReader(self.prepared(X[some]), self.y[rows[some]], self.xp, None).epoch(batch_size, None)

    def full(self) -> Batch:
        return Batch(StreamedRows(self), self.y, None)


class _BlockPool:
    """The shuffle buffer's rows as a list of blocks (CSR parts), stacked when served."""

    def __init__(self) -> None:
        self.blocks: list[Any] = []
        self.rows: list[np.ndarray] = []
        self.size = 0

    def add(self, X: Any, rows: np.ndarray) -> None:
        self.blocks.append(X)
        self.rows.append(rows)
        self.size += rows.size

    def arrays(self) -> tuple[Any, np.ndarray]:
        """(features, row numbers) of the pool (one stacked copy, kept as the only block)."""
        self.blocks, self.rows = [_stack(self.blocks)], [np.concatenate(self.rows)]
        return self.blocks[0], self.rows[0]

    def keep(self, rest: np.ndarray) -> None:
        """Keep only the pool's rows ``rest`` (positions in :meth:`arrays`, in that order)."""
        X, rows = self.arrays()
        self.blocks, self.rows = ([X[rest]], [rows[rest]]) if rest.size else ([], [])
        self.size = int(rest.size)


class _DensePool:
    """The shuffle buffer's dense rows in one array reused for the whole epoch (its dtype
    that of the rows as read): a part is copied in once, behind the rows kept back, and
    serving the pool is a view of it, where stacking a list would copy every row again
    into freshly allocated (page-faulting) memory at each part."""

    def __init__(self) -> None:
        self.X: np.ndarray | None = None
        self.rows = np.zeros(0, dtype=np.int64)
        self.size = 0

    def add(self, X: np.ndarray, rows: np.ndarray) -> None:
        m = rows.size
        if self.X is None or self.size + m > self.X.shape[0] or self.X.dtype != np.result_type(self.X, X) \
                or self.X.shape[1] != X.shape[1]:
            capacity = max(self.size + m, 2 * m)
            grown = np.empty((capacity, X.shape[1]), dtype=X.dtype if self.X is None else np.result_type(self.X, X))
            grown_rows = np.empty(capacity, dtype=np.int64)
            if self.size:
                grown[:self.size], grown_rows[:self.size] = self.X[:self.size], self.rows[:self.size]
            self.X, self.rows = grown, grown_rows
        self.X[self.size:self.size + m] = X
        self.rows[self.size:self.size + m] = rows
        self.size += m

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.X[:self.size], self.rows[:self.size]

    def keep(self, rest: np.ndarray) -> None:
        k = int(rest.size)
        if k:
            self.X[:k], self.rows[:k] = np.take(self.X, rest, axis=0), self.rows[rest]
        self.size = k


# ----------------------------------------------------------------------------- convert
def convert(source: ChunkSource, out: str | os.PathLike, *,
            progress: Callable[[int, str], None] | None = None) -> Survey:
    """Write ``source`` once into the binary layout :func:`open_stream` memory-maps (as
    Vowpal Wabbit's cache does): a directory ``out`` with CSR arrays (a LIBSVM file:
    ``data.npy``, ``indices.npy`` zero-based, ``indptr.npy``) or ``X.npy`` (dense), the
    labels as read in ``y.npy``, and :data:`META` saying how the file was read.

    One pass: the first pass (:func:`survey`: sizes, width, index base) writes each part
    as it reads it (:class:`_ArrayWriter`, from a thread, while the next part is parsed), and
    the arrays' ``.npy`` headers are written for their final shapes at the end. A LIBSVM
    file is read in blocks of :data:`CONVERT_CHUNK_BYTES` (:meth:`ChunkSource.for_convert`:
    ``source`` itself is not read, nor settled); its indices are written zero-based as the
    pass goes when the base is known or, read with ``zero_based="auto"``, taken to be
    one-based until an index 0 is seen: the parts written before it are mended in place at
    the end. A second pass is made only when the first could not write as it read (a dense
    part wider than the first, an index beyond int32). The returned survey's ``max_abs`` is
    zero for sparse data (convert does not use it: ``survey(scale=False)``). Everything
    is written into a temporary directory beside ``out`` and renamed to ``out`` at the end;
    on any error or interrupt the temporary directory is removed, so ``out`` is either whole
    or absent. ``out`` must not exist.
    """
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise ParameterError(f"{out}: exists; convert writes a new directory (remove it or name another)")
    if not out.parent.is_dir():
        raise ParameterError(f"{out}: the directory {out.parent} does not exist")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name[:40]}.", suffix=".tmp", dir=out.parent))
    try:
        found = _convert_into(source.for_convert(), tmp, progress)
        labels = found.labels if found.labels.dtype.kind != "O" else found.labels.astype(str)
        np.save(tmp / "y.npy", labels, allow_pickle=False)
        meta = {"layout": "csr" if found.sparse else "dense", "format": found.format, "source": found.source,
                "n_rows": found.n_rows, "n_features": found.n_features, "zero_based": found.zero_based,
                "open_width": found.open_width, "nnz": found.nnz}
        (tmp / META).write_text(json.dumps(meta, indent=1) + "\n")
        for file in tmp.iterdir():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):  # a full disk, a quota: nothing was left
            raise DataError(f"{out}: cannot write ({one_line(exc.strerror or exc, 80)}); nothing was written") \
                from None
        raise
    return found


def _convert_into(source: ChunkSource, directory: Path, progress: Callable[[int, str], None] | None) -> Survey:
    """The arrays of ``source`` written into ``directory`` by the first pass (or, when it could not
    write as it read, by a second), and the survey."""
    writer = _ArrayWriter(directory)
    seen_zero = False

    def write(part: Part) -> None:
        nonlocal seen_zero
        seen_zero |= part.has_zero
        writer.add(part.X, shift=source.shift_before_settled(seen_zero))

    try:
        with writer:
            found = survey(source, progress=progress, each=write, scale=False)
    except _Rewrite:
        for name in _ArrayWriter.NAMES:
            (directory / f"{name}.npy").unlink(missing_ok=True)
        found = survey(source, progress=progress, scale=False)
        writer = _ArrayWriter(directory, width=found.n_features, wide_indices=found.n_features >= 2**31)
        with writer:
            for part in source.parts():
                writer.add(part.X)
                if progress is not None:
                    progress(writer.rows, "convert")
        if writer.rows != found.n_rows or (found.sparse and writer.nnz != found.nnz):
            raise DataError(f"{found.source}: changed while it was converted ({writer.rows} rows, "
                            f"{found.n_rows} at first)")
        writer.finish(found.n_features, shift=0)
        return found
    writer.finish(found.n_features, shift=source.written_shift())
    return found


class _Rewrite(Exception):
    """The first pass cannot write a part as it reads it: :func:`convert` makes a second pass."""


#: Whether :class:`_OutFile` tries ``O_DIRECT`` (where the OS has it; the file system may still refuse).
DIRECT_WRITES = True


class _OutFile:
    """One array file written front to back. Through ``O_DIRECT`` where the OS and the file
    system take it: the bytes are gathered in a page-aligned buffer and go from there to the
    disk, not through the page cache (on the 2-core VM, writing 900 MB through the page cache
    took 0.2-2 s of kernel CPU and its fsync 0.4 s more; the same bytes direct, 0.43 s of
    waiting and no CPU). Else, and from the first write the file system refuses (EINVAL), a
    plain buffered file. The bytes are the same either way."""

    #: Offsets, lengths and the buffer's address are multiples of this for ``O_DIRECT``.
    ALIGN = 4096
    #: Bytes gathered before a direct write (a multiple of :attr:`ALIGN`).
    STAGE = 8 << 20

    def __init__(self, path: Path):
        self.path, self.fd, self.handle = path, -1, None
        self.held = self.written = 0  # bytes in the buffer; bytes in the file before them
        if DIRECT_WRITES and hasattr(os, "O_DIRECT"):
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT | os.O_CLOEXEC, 0o666)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
        if self.fd < 0:
            self.handle = open(path, "wb")  # noqa: SIM115 (open until close())
        else:
            self.stage = np.frombuffer(mmap.mmap(-1, self.STAGE), dtype=np.uint8)

    def write(self, array: np.ndarray) -> None:
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if self.handle is not None:
            self.handle.write(memoryview(raw))
            return
        done = 0
        while done < raw.size:
            take = min(raw.size - done, self.STAGE - self.held)
            self.stage[self.held:self.held + take] = raw[done:done + take]
            self.held, done = self.held + take, done + take
            if self.held == self.STAGE:
                self._drain(self.STAGE)
                if self.handle is not None:  # refused: the rest through the page cache
                    self.handle.write(memoryview(raw[done:]))
                    return

    def _drain(self, length: int) -> None:
        """Write the buffer's first ``length`` bytes (a multiple of :attr:`ALIGN`) and empty it;
        on EINVAL, write them through a buffered file instead, which takes every later write."""
        view, done = memoryview(self.stage)[:length], 0
        try:
            while done < length:
                done += os.write(self.fd, view[done:])
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            os.close(self.fd)
            self.fd, self.handle = -1, open(self.path, "r+b")  # noqa: SIM115 (open until close())
            self.handle.seek(self.written + done)
            self.handle.write(view[done:self.held])
            self.handle.truncate()
        self.written, self.held = self.written + length, 0

    def close(self, complete: bool = True) -> None:
        """Close the file; ``complete``: write the bytes still in the buffer first (the last
        block zero-padded for ``O_DIRECT``, the file then cut to its length)."""
        if self.handle is None and self.fd >= 0:
            try:
                if complete and self.held:
                    size = self.written + self.held
                    padded = -(-self.held // self.ALIGN) * self.ALIGN
                    self.stage[self.held:padded] = 0
                    self.held = padded
                    self._drain(padded)
                    if self.handle is None:
                        os.ftruncate(self.fd, size)
                    else:
                        self.handle.truncate(size)
            finally:
                if self.fd >= 0:
                    os.close(self.fd)
                    self.fd = -1
        if self.handle is not None:
            self.handle.close()


class _ArrayWriter:
    """The arrays of :func:`convert`'s layout, appended part by part behind ``.npy`` headers
    (numpy's own writer; their length does not depend on the first axis, so the headers of
    the final shapes are written over them at the end): CSR ``data``, ``indices`` (int32, or
    int64 with ``wide_indices``), ``indptr``; or a dense ``X`` of the first part's width
    (``width``: of that width, narrower parts widened). A part's arrays are cast, shifted and
    written by a thread (NumPy's kernels and file writes release the GIL) while the next part
    is parsed; the main thread only checks that it can be written as read."""

    NAMES = ("data", "indices", "indptr", "X")

    def __init__(self, directory: Path, *, width: int | None = None, wide_indices: bool = False):
        self.directory, self.width = directory, width
        self.index_type = np.dtype(np.int64 if wide_indices else np.int32)
        self.files: dict[str, _OutFile] = {}
        self.sparse: bool | None = None
        self.rows = self.nnz = 0
        #: (first stored value, shift) of each run of parts whose indices were written with ``shift`` subtracted
        self.shifts: list[tuple[int, int]] = []
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="calopt-convert")
        self.pending: Future | None = None

    def __enter__(self) -> _ArrayWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        complete = exc[0] is None  # else the files are left as they are (and removed)
        try:
            self._wait()
        except BaseException:
            complete = False
            raise
        finally:
            self.thread.shutdown(wait=True)
            for handle in self.files.values():
                handle.close(complete)

    def _wait(self) -> None:
        """Until the last part is written (its error, a full disk say, raised here)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def _write(self, work: Callable[[], None]) -> None:
        self._wait()  # at most one part in flight: memory stays one part's
        self.pending = self.thread.submit(work)

    def _open(self, names: tuple[str, ...]) -> None:
        for name in names:
            self.files[name] = _OutFile(self.directory / f"{name}.npy")
            self.files[name].write(np.zeros(_HEADER_BYTES, dtype=np.uint8))
        if "indptr" in names:
            self.files["indptr"].write(np.zeros(1, dtype=np.int64))

    def add(self, X: Any, shift: int = 0) -> None:
        """Append the rows of one part (features as the first pass reads them), ``shift``
        subtracted from its column indices."""
        sparse = sp.issparse(X)
        if self.sparse is None:
            self.sparse = sparse
            self._open(("data", "indices", "indptr") if sparse else ("X",))
            self.width = self.width if self.width is not None or sparse else int(X.shape[1])
        if sparse != self.sparse:
            raise _Rewrite
        if sparse:
            X = X.tocsr()
            top = np.iinfo(self.index_type).max
            if X.nnz and X.shape[1] - 1 > top and int(X.indices.max()) > top:
                raise _Rewrite
            if not self.shifts or self.shifts[-1][1] != shift:
                self.shifts.append((self.nnz, shift))
            self._write(partial(self._write_sparse, X.data, X.indices, X.indptr, self.nnz, shift))
            self.nnz += int(X.nnz)
        else:
            if X.shape[1] > self.width:
                raise _Rewrite
            self._write(partial(self._write_dense, X))
        self.rows += int(X.shape[0])

    def _write_sparse(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, offset: int,
                      shift: int) -> None:
        self.files["data"].write(np.asarray(data, dtype=np.float64))
        self.files["indices"].write(np.subtract(indices, shift, dtype=self.index_type) if shift
                                    else np.asarray(indices, dtype=self.index_type))
        self.files["indptr"].write(np.add(indptr[1:], offset, dtype=np.int64))

    def _write_dense(self, X: np.ndarray) -> None:
        self.files["X"].write(np.asarray(widen(X, self.width), dtype=np.float64))

    def finish(self, width: int, shift: int) -> None:
        """The headers of the final shapes; the indices made ``shift`` less than written (a one-based
        file's) where the parts were written with another shift. After the ``with`` block: every
        part written and the files closed."""
        shapes = {"data": (np.float64, (self.nnz,)), "indices": (self.index_type, (self.nnz,)),
                  "indptr": (np.int64, (self.rows + 1,)), "X": (np.float64, (self.rows, width))}
        for name in self.files:
            dtype, shape = shapes[name]
            with open(self.directory / f"{name}.npy", "r+b") as f:
                np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                          "fortran_order": False, "shape": shape})
                if f.tell() != _HEADER_BYTES:
                    raise RuntimeError(f"a .npy header of {f.tell()} bytes, not {_HEADER_BYTES}")
        runs = [(first, stop, written) for (first, written), stop
                in zip(self.shifts, [first for first, _ in self.shifts[1:]] + [self.nnz])
                if written != shift and stop > first]
        if runs:
            indices = np.load(self.directory / "indices.npy", mmap_mode="r+")
            for first, stop, written in runs:
                for start in range(first, stop, 1 << 24):
                    indices[start:min(stop, start + (1 << 24))] += written - shift
            indices.flush()
            del indices


#: The bytes of a ``.npy`` header of version 1.0 for a 1-D or 2-D array (numpy pads it to 128
#: whatever the first axis, so that the shape can grow in place).
_HEADER_BYTES = 128

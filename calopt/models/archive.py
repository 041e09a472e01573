"""calopt's file format: an ``.npz`` of plain arrays plus a checksummed JSON document.

Models, multiclass models and checkpoints are all written by :func:`save_archive` and
read by :func:`load_archive`: NumPy arrays (no object arrays, read with
``allow_pickle=False``, so loading never executes anything), a JSON document stored as
UTF-8 bytes under ``metadata`` with the format name, its version and a SHA-256
checksum. Writes follow :func:`atomic_write` (a regular file is replaced by a rename,
never left half-written; ``/dev/null``, a FIFO or a terminal is written in place), and
deterministic: the zip entries carry a fixed date and timings stay out of the file, so
the same model gives the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from calopt.errors import DataError, ModelFileError, one_line
from calopt.io.files import npz_arrays

__all__ = ["FORMAT_NAMES", "PACKED_MIN_BYTES", "PACKED_SHARE", "atomic_write", "load_archive", "pack_rows", "read_format", "read_npz",
           "save_archive", "saved_history", "unpack_rows", "write_npz"]

def _umask() -> int:
    """The process's file-creation mask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, but brief)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None], *, mode: str = "wb") -> None:
    """Call ``write(file)`` so that ``path`` is never left half-written, and only ``path`` changes.

    The one rule for every file calopt writes (models, checkpoints, predictions):

    - a regular file (new or existing) is written to a temporary file in the same
      directory, flushed, fsync-ed and renamed over the target; a new file gets the mode
      the umask allows (0666 & ~umask), an existing one keeps its mode;
    - a symbolic link is followed: its final target is written by the rule above, and the
      link stays a link;
    - anything else that exists (``/dev/null``, ``/dev/stdout``, a FIFO, a terminal, or a
      link to one) is written in place, in one piece, never replaced.

    A write the system refuses (a full disk, ``/dev/full``, a quota) is a one-line
    :class:`~calopt.errors.DataError` naming the path; a regular file is then left as it was.
    """
    try:
        _write_atomically(Path(path), write, mode)
    except OSError as exc:
        raise DataError(f"{path}: cannot write ({one_line(exc.strerror or exc, 80)})") from None


def _write_atomically(path: Path, write: Callable[[Any], None], mode: str) -> None:
    try:
        found = os.stat(path)  # follows links: what the path points at
    except FileNotFoundError:
        found = None
    except OSError:  # e.g. a name too long: let open() say so below
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode):
        content = io.BytesIO() if "b" in mode else io.StringIO()
        write(content)  # whole first: zip needs a file that tells positions; a device tells none
        with open(path, mode) as handle:
            handle.write(content.getvalue())
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    permissions = stat.S_IMODE(found.st_mode) if found is not None else 0o666 & ~_umask()
    # the temporary name is short whatever the target's: a 255-byte name stays writable
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:40]}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), permissions)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: The date stamped on every archive entry (zip's earliest), so equal models give equal bytes.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
#: Timing fields kept in memory but not written: they differ from run to run.
_TIMINGS = ("fit_seconds", "seconds")


def write_npz(handle: Any, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` (what ``np.savez`` writes) with fixed dates.

    Entries are written in the given order, as ``.npy`` without pickle, so the bytes
    depend on the arrays alone.
    """
    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
            info.external_attr = 0o600 << 16
            with archive.open(info, mode="w", force_zip64=True) as entry:
                np.lib.format.write_array(entry, np.asanyarray(value), allow_pickle=False)


def read_npz(path: str | os.PathLike, what: str) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path``, read without pickle and each member's declared
    size checked before it is allocated (:func:`calopt.io.files.npz_arrays`); a one-line
    ModelFileError when it is missing, empty, truncated, no archive or holds a bad array
    (``what``: "model file", ...)."""
    path, magic = Path(path), None
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
        return npz_arrays(path)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, not a calopt {what}") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, NotImplementedError) as exc:
        if magic is None:
            problem = f"cannot read ({getattr(exc, 'strerror', None) or exc})"
        elif not magic:
            problem = "empty file"
        elif magic != b"PK\x03\x04":
            problem = "not an .npz archive"
        elif isinstance(exc, ValueError):  # a member that is no array, an object array, a forged size
            problem = f"unreadable array ({exc})"
        else:  # a zip archive, cut short or damaged
            problem = f"truncated or corrupt archive ({type(exc).__name__}: {exc})"
        raise ModelFileError(f"{path}: not a calopt {what}: {problem}") from None


#: How deeply the metadata's JSON may nest (a model's is 3 deep, a checkpoint's about 12).
_MAX_DEPTH = 64
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _metadata(blob: np.ndarray) -> Any:
    """The JSON document in the ``metadata`` array; ValueError when it is not one, or nests
    deeper than :data:`_MAX_DEPTH` (counted before parsing: no RecursionError)."""
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise ValueError(f"metadata is a {blob.dtype} array, not UTF-8 bytes")
    raw = blob.tobytes()
    depth = 0
    for token in _JSON_TOKENS.finditer(raw):
        bracket = token.group()
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > _MAX_DEPTH:
                raise ValueError(f"metadata nested more than {_MAX_DEPTH} levels deep")
        elif bracket in (b"]", b"}"):
            depth -= 1
    return json.loads(raw.decode())


def _checksum(arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for key in sorted(arrays):
        digest.update(key.encode())
        digest.update(np.ascontiguousarray(arrays[key], dtype=np.float64).tobytes())
    digest.update(json.dumps(metadata, sort_keys=True).encode())
    return digest.hexdigest()


#: What each calopt file format is called in messages.
FORMAT_NAMES = {
    "calopt-linear-model": "calopt model file",
    "calopt-multiclass-model": "calopt multiclass model file",
    "calopt-checkpoint": "calopt checkpoint",
}


def save_archive(path: str | os.PathLike, arrays: dict[str, np.ndarray], metadata: dict[str, Any],
                 *, checksum: Callable[..., str] = _checksum) -> None:
    """Write ``arrays`` and the JSON ``metadata`` (checksummed) atomically as a deterministic ``.npz``."""
    metadata = {**metadata, "sha256": checksum(arrays, metadata)}
    blob = np.frombuffer(json.dumps(metadata).encode(), dtype=np.uint8)
    atomic_write(path, lambda handle: write_npz(handle, {"metadata": blob, **arrays}))


def load_archive(path: str | os.PathLike, *, format: str, version: int,
                 checksum: Callable[..., str] = _checksum) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and metadata of a file written by :func:`save_archive` in ``format``.

    Every problem is a one-line ModelFileError naming the file: unreadable, not an
    archive, no metadata, another format, a newer format version, a checksum mismatch.
    """
    path, what = Path(path), FORMAT_NAMES[format].removeprefix("calopt ")
    arrays = read_npz(path, what)
    if "metadata" not in arrays:
        raise ModelFileError(f"{path}: not a calopt {what} (no metadata)")
    try:
        metadata = _metadata(arrays.pop("metadata"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError too
        raise ModelFileError(f"{path}: not a calopt {what} (unreadable metadata: {one_line(exc, 80)})") from None
    kind = metadata.get("format") if isinstance(metadata, dict) else None
    if kind != format:
        other = f" (it is a {FORMAT_NAMES[kind]})" if kind in FORMAT_NAMES else ""
        raise ModelFileError(f"{path}: not a calopt {what}{other}")
    found = metadata.get("format_version")
    if not isinstance(found, int) or found > version:
        raise ModelFileError(f"{path}: {what} format version {found} is newer than this calopt "
                             f"understands ({version}); upgrade calopt")
    for key, value in arrays.items():  # before the checksum, which reads them as numbers
        if value.dtype.kind not in "biuf":
            raise ModelFileError(f"{path}: array {one_line(key, 80)} holds {value.dtype} values; a calopt {what} "
                                 "holds numbers only")
    if metadata.pop("sha256", None) != checksum(arrays, metadata):
        raise ModelFileError(f"{path}: checksum mismatch: the {what} is corrupt")
    return arrays, metadata


#: An array is stored by the rows that differ from its background value (:func:`pack_rows`) when
#: it is at least this large (a model file of a few hundred features stays as it always was) ...
PACKED_MIN_BYTES = 2**20
#: ... and those rows are at most this share of its rows: the file is then at most half the dense one.
PACKED_SHARE = 0.25


def pack_rows(name: str, array: np.ndarray, background: float) -> dict[str, np.ndarray]:
    """``{name: array}`` (float64), or, when it is at least :data:`PACKED_MIN_BYTES` and at most
    :data:`PACKED_SHARE` of its rows (first axis) differ from ``background``, those rows:
    ``name.rows`` (int64, increasing), ``name.values`` (rows, ...) and ``name.shape``. A 10⁷-wide
    model trained on a thousand columns is then kilobytes, not 80 MB (:func:`unpack_rows`)."""
    array = np.asarray(array, dtype=np.float64)
    if array.ndim == 0 or array.nbytes < PACKED_MIN_BYTES:
        return {name: array}
    differs = array != background
    rows = np.flatnonzero(differs.reshape(array.shape[0], -1).any(axis=1))
    if rows.size > PACKED_SHARE * array.shape[0]:
        return {name: array}
    return {f"{name}.rows": rows.astype(np.int64), f"{name}.values": array[rows],
            f"{name}.shape": np.asarray(array.shape, dtype=np.int64)}


def _physical_memory() -> float:
    """This machine's memory in bytes (inf where the system does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE")) * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return float("inf")


def unpack_rows(arrays: dict[str, np.ndarray], name: str, background: float) -> np.ndarray | None:
    """The array ``name`` of a file's ``arrays``, stored whole or by :func:`pack_rows` (removed from
    ``arrays``); None when it holds neither. A ModelFileError for packed parts that do not fit
    together (rows out of range or not increasing, values of another shape, a width that does not
    fit in memory)."""
    if name in arrays:
        return arrays.pop(name)
    parts = [arrays.pop(f"{name}.{part}", None) for part in ("rows", "values", "shape")]
    if all(part is None for part in parts):
        return None
    missing = [part for part, array in zip(("rows", "values", "shape"), parts) if array is None]
    if missing:
        raise ModelFileError(f"{name} is packed but has no {missing[0]} array")
    rows, values, shape = parts
    if not (shape.ndim == 1 and 1 <= shape.size <= 2 and shape.dtype.kind in "iu" and np.all(shape >= 0)):
        raise ModelFileError(f"{name}.shape must be 1 or 2 whole numbers, not {one_line(shape.tolist(), 40)}")
    shape = tuple(int(n) for n in shape)
    if not (rows.ndim == 1 and rows.dtype.kind in "iu" and values.shape == (rows.size, *shape[1:])
            and (rows.size == 0 or (rows[0] >= 0 and rows[-1] < shape[0] and np.all(np.diff(rows) > 0)))):
        raise ModelFileError(f"{name} is packed inconsistently (rows {rows.shape} {rows.dtype}, values "
                             f"{values.shape}, shape {shape})")
    if 8 * np.prod(shape, dtype=np.float64) > _physical_memory():
        raise ModelFileError(f"{name} has shape {shape}: larger than this machine's memory")
    array = np.full(shape, background, dtype=np.float64)
    array[rows] = values
    return array


def saved_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as a model file keeps it: without the timings, which differ run to run."""
    return [{k: v for k, v in row.items() if k not in _TIMINGS} for row in history]


def read_format(path: str | os.PathLike) -> str | None:
    """The ``format`` named in the metadata of the archive at ``path``; None when unreadable."""
    try:
        metadata = _metadata(npz_arrays(path)["metadata"])
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, NotImplementedError):
        return None
    return metadata.get("format") if isinstance(metadata, dict) else None

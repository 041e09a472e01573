"""The fitted linear model and its file format (no pickle, versioned, checksummed).

A model file is a NumPy ``.npz`` archive holding float64 arrays (``coef``, ``scale``)
and a JSON document (``metadata``, stored as UTF-8 bytes) with the intercept, the
classes, the measure / algorithm / loss specs, the fit options, the history and the
library version. It is read with ``allow_pickle=False`` and its checksum verified, so
loading never executes anything. Writes are atomic (a temporary file, then rename).

The same model gives the same bytes: timings (``fit_seconds``, the history's
``seconds``) stay in memory and out of the file, and the archive's entries carry a
fixed date (:func:`write_npz`). Files written before this still load.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from calopt.backends import backend_of, is_sparse
from calopt.errors import DataError, ModelFileError
from calopt.measures import confusion_counts

__all__ = ["FORMAT_VERSION", "LinearModel", "atomic_write", "json_label", "linear_scores", "load_archive", "load_model", "read_npz",
           "save_archive", "saved_history", "write_npz"]

FORMAT = "calopt-linear-model"
FORMAT_VERSION = 1


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None], *, mode: str = "wb") -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, mode) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
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
    """The arrays of the ``.npz`` at ``path``, read without pickle; a one-line ModelFileError
    when it is missing, empty, truncated or no archive (``what``: "model file", ...)."""
    path, magic = Path(path), None
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, not a calopt {what}") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        if magic is None:
            problem = f"cannot read ({getattr(exc, 'strerror', None) or exc})"
        elif not magic:
            problem = "empty file"
        elif magic != b"PK\x03\x04":
            problem = "not an .npz archive"
        elif isinstance(exc, ValueError):  # e.g. an object array, refused without unpickling
            problem = f"unreadable array ({exc})"
        else:  # a zip archive, cut short or damaged
            problem = f"truncated or corrupt archive ({type(exc).__name__}: {exc})"
        raise ModelFileError(f"{path}: not a calopt {what}: {problem}") from None


def _checksum(arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for key in sorted(arrays):
        digest.update(key.encode())
        digest.update(np.ascontiguousarray(arrays[key], dtype=np.float64).tobytes())
    digest.update(json.dumps(metadata, sort_keys=True).encode())
    return digest.hexdigest()


def linear_scores(X: Any, coef: np.ndarray, intercept: Any) -> Any:
    """``X @ coef + intercept`` on X's backend (NumPy for scipy.sparse), in X's floating dtype.

    ``coef`` is (d,) or (d, C) and ``intercept`` a number or (C,); a wrong number of
    features is a DataError.
    """
    if X.shape[1] != coef.shape[0]:
        raise DataError(f"X has {X.shape[1]} features, the model has {coef.shape[0]}")
    if is_sparse(X):
        return np.asarray(X @ coef + intercept)
    backend = backend_of(X)  # working dtype: X's floating dtype, else float64
    if not backend.xp.isdtype(X.dtype, "real floating"):
        X = backend.asarray(X)
    return X @ backend.asarray(coef) + backend.asarray(intercept)


#: What each calopt file format is called in messages.
_FORMAT_NAMES = {
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
    path, what = Path(path), _FORMAT_NAMES[format].removeprefix("calopt ")
    arrays = read_npz(path, what)
    try:
        metadata = json.loads(arrays.pop("metadata").tobytes().decode())
    except (KeyError, AttributeError, UnicodeDecodeError, json.JSONDecodeError):
        raise ModelFileError(f"{path}: not a calopt {what} (no readable metadata)") from None
    kind = metadata.get("format") if isinstance(metadata, dict) else None
    if kind != format:
        other = f" (it is a {_FORMAT_NAMES[kind]})" if kind in _FORMAT_NAMES else ""
        raise ModelFileError(f"{path}: not a calopt {what}{other}")
    found = metadata.get("format_version")
    if not isinstance(found, int) or found > version:
        raise ModelFileError(f"{path}: {what} format version {found} is newer than this calopt "
                             f"understands ({version}); upgrade calopt")
    if metadata.pop("sha256", None) != checksum(arrays, metadata):
        raise ModelFileError(f"{path}: checksum mismatch: the {what} is corrupt")
    return arrays, metadata


def json_label(value: Any) -> Any:
    """A class label as a JSON value (NumPy scalars become Python ones)."""
    return value.item() if hasattr(value, "item") else value


def saved_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as a model file keeps it: without the timings, which differ run to run."""
    return [{k: v for k, v in row.items() if k not in _TIMINGS} for row in history]


@dataclass
class LinearModel:
    """A linear classifier ``sign(X @ coef + intercept)`` trained for a measure.

    ``coef`` is in the original feature space (the max-abs scaling used in training
    is folded in; ``scale`` keeps it for reference) and ``intercept`` includes the
    tuned decision threshold.
    """

    coef: np.ndarray
    intercept: float
    classes: tuple[Any, Any] = (-1.0, 1.0)
    measure: str = "fbeta"
    algorithm: str = ""
    loss: str = ""
    scale: np.ndarray | None = None
    threshold: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)
    fit_seconds: float = 0.0
    status: int = 0
    message: str = ""
    version: str = ""

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[0])

    # -- prediction ---------------------------------------------------------------
    def decision_function(self, X: Any) -> Any:
        """Scores ``X @ coef + intercept`` on X's backend (NumPy for scipy.sparse)."""
        return linear_scores(X, self.coef, self.intercept)

    def predict_signs(self, X: Any) -> Any:
        """Predictions in {−1, +1} on X's backend."""
        scores = self.decision_function(X)
        xp = backend_of(scores).xp
        return xp.where(scores > 0, xp.ones_like(scores), -xp.ones_like(scores))

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels (the original two values), as a host NumPy array."""
        from calopt.backends import to_numpy

        signs = to_numpy(self.predict_signs(X))
        return np.asarray(self.classes)[(signs > 0).astype(np.intp)]

    def score(self, X: Any, y: Any, measure: Any = None) -> float:
        """The measure (default: the one trained for) of the predictions on (X, y)."""
        return self.evaluate(X, y, [measure or self.measure])[0]["value"]

    def evaluate(self, X: Any, y: Any, measures: Any = None) -> list[dict[str, Any]]:
        """For each measure (default: the model's), its value, TPR and TNR on (X, y)."""
        from calopt import get_measure
        from calopt.backends import to_numpy
        from calopt.data import encode_like
        from calopt.measures import safe_divide

        y_pm = encode_like(to_numpy(y), self.classes, source="labels")
        signs = to_numpy(self.predict_signs(X))
        xp = backend_of(signs).xp
        tp, fp, tn, fn = confusion_counts(np.asarray(y_pm), signs, xp=xp)
        tpr, tnr = float(safe_divide(tp, tp + fn, xp=xp)), float(safe_divide(tn, tn + fp, xp=xp))
        return [
            {"measure": m.spec, "value": float(m.from_counts(tp, fp, tn, fn, xp=xp)),
             "tpr": tpr, "tnr": tnr}
            for m in (get_measure(spec) for spec in (measures or [self.measure]))
        ]

    # -- files --------------------------------------------------------------------
    def _metadata(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "calopt_version": self.version,
            "intercept": float(self.intercept),
            "threshold": float(self.threshold),
            "classes": [json_label(c) for c in self.classes],
            "measure": self.measure,
            "algorithm": self.algorithm,
            "loss": self.loss,
            "options": self.options,
            "history": saved_history(self.history),
            "status": self.status,
            "message": self.message,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the model to ``path`` atomically (an ``.npz`` archive, no pickle)."""
        arrays = {"coef": np.asarray(self.coef, dtype=np.float64)}
        if self.scale is not None:
            arrays["scale"] = np.asarray(self.scale, dtype=np.float64)
        save_archive(path, arrays, self._metadata())

    @classmethod
    def load(cls, path: str | os.PathLike) -> LinearModel:
        """Read a model written by :meth:`save`; any problem is a one-line ModelFileError."""
        path = Path(path)
        arrays, metadata = load_archive(path, format=FORMAT, version=FORMAT_VERSION)
        if "coef" not in arrays:
            raise ModelFileError(f"{path}: incomplete model file (no coef array)")
        try:
            return cls(
                coef=arrays["coef"],
                intercept=float(metadata["intercept"]),
                classes=tuple(metadata["classes"]),
                measure=metadata["measure"],
                algorithm=metadata["algorithm"],
                loss=metadata["loss"],
                scale=arrays.get("scale"),
                threshold=float(metadata["threshold"]),
                options=metadata["options"],
                history=metadata["history"],
                fit_seconds=float(metadata.get("fit_seconds", 0.0)),  # older files only
                status=int(metadata["status"]),
                message=metadata["message"],
                version=metadata["calopt_version"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"{path}: incomplete model metadata ({exc})") from None


def load_model(path: str | os.PathLike) -> Any:
    """Read a model file of either kind: a LinearModel, or a MulticlassModel (calopt.multiclass).

    The kind comes from the ``format`` of the file's metadata; when that cannot be
    read, LinearModel.load says what is wrong with the file.
    """
    from calopt import multiclass

    try:
        with np.load(path, allow_pickle=False) as archive:
            kind = json.loads(archive["metadata"].tobytes().decode()).get("format")
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, AttributeError, UnicodeDecodeError):
        kind = None
    return (multiclass.MulticlassModel if kind == multiclass.FORMAT else LinearModel).load(path)

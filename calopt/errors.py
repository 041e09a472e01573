"""The exceptions calopt raises on purpose.

Every error a user can cause (bad input, an unknown name, a bad parameter) is a
:class:`CaloptError`; the CLI turns these into one line on stderr and exit code 2.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

__all__ = [
    "BackendError",
    "CaloptError",
    "DataError",
    "ModelFileError",
    "ParameterError",
    "RegistryError",
    "TrainingError",
    "TrainingInterrupted",
    "UnknownNameError",
    "one_line",
]


def one_line(text: object, limit: int = 120) -> str:
    """``text`` for an error message: squeezed onto one line and cut at ``limit`` characters
    (a 1 MB label or a forged field is never echoed whole)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class CaloptError(Exception):
    """Base class of the errors a user can cause; the message is one line."""

    #: The CLI's exit code for this error (2: bad input or options).
    exit_code: int = 2


class UnknownNameError(CaloptError, LookupError):
    """A measure, loss, algorithm or backend name that is not registered."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(f"unknown {kind} {name!r}{hint} (known: {', '.join(known)})")
        self.kind, self.name, self.known, self.suggestions = kind, name, known, close


class ParameterError(CaloptError, ValueError):
    """A component parameter (``fbeta:beta=-1``) or a solver option is invalid."""


class RegistryError(CaloptError):
    """Two plugins register the same name, or a plugin registers something malformed."""


class BackendError(CaloptError):
    """An array backend is unavailable (not installed, no GPU) or inputs disagree."""


class DataError(CaloptError, ValueError):
    """A data file or array cannot be used: the message names the file and line.

    ``source`` (when given) names what was wrong, apart from the ``detail``: the message
    is ``"source: detail"``, and :meth:`renamed` lets a caller put the file's name where
    the library could only say "training labels".
    """

    def __init__(self, detail: str, *, source: str | None = None):
        super().__init__(f"{source}: {detail}" if source else detail)
        self.source, self.detail = source, detail

    def renamed(self, sources: Mapping[str, str]) -> DataError:
        """This error with its ``source`` replaced by ``sources[source]`` (itself when not named)."""
        if self.source not in sources:
            return self
        return DataError(self.detail, source=sources[self.source])


class ModelFileError(CaloptError):
    """A model file is truncated, corrupt, from a newer format, or not a calopt model."""


class TrainingError(CaloptError):
    """Training produced no usable model: it diverged before finishing an epoch, or made no progress."""

    exit_code = 3


class TrainingInterrupted(CaloptError):
    """Training stopped on request (Ctrl-C, SIGTERM) after a batch; it can be resumed.

    ``checkpoint`` is the :class:`calopt.training.checkpoint.Checkpoint` of the run (pass it, or
    ``path`` where it was written, as ``calopt.fit(..., resume=...)``).
    """

    def __init__(self, message: str, checkpoint: object = None, path: object = None):
        super().__init__(message)
        self.checkpoint, self.path = checkpoint, path

"""Where the commands write: every output path is checked before any work starts.

:func:`check_outputs` is the one check behind ``train --model-out/--checkpoint/--plot``,
``compare --plot``, ``aggregate --model-out`` and ``predict --out``. It runs before data are read or a model
is trained, so a run never ends with "cannot write" after minutes of work, and it
refuses, with one line naming the option and the path, an output that would damage
something: a directory, a path in a missing or unwritable directory, a name too long
for the file system, an input file of the same run, or another output of the same
run. The writing itself follows :func:`calopt.models.archive.atomic_write` (regular
files replaced atomically, ``/dev/null``, FIFOs and terminals written in place).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import typer

from calopt.errors import ParameterError
from calopt.models.archive import atomic_write

__all__ = ["STDIN", "STDOUT", "Output", "check_outputs", "check_stdin_once", "write_text"]

#: The path that means standard output (``predict --out -``).
STDOUT = "-"
#: The path that means standard input (a data file read from a pipe).
STDIN = "-"
_NAME_MAX = 255


@dataclass(frozen=True)
class Output:
    """A checked output path: ``existed`` when a regular file was there before this run
    (calopt then never deletes it), ``special`` for ``-``, devices, FIFOs and the like."""

    option: str
    path: Path
    existed: bool
    special: bool


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """(device, inode) of the regular file ``path`` points at, None for anything else."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISREG(found.st_mode) else None


def _shown(path: str | os.PathLike, limit: int = 100) -> str:
    """A path for a message, cut in the middle when long."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-limit // 2:]}"


def _too_long(path: Path) -> str | None:
    for part in path.parts:
        if len(os.fsencode(part)) > _NAME_MAX:
            return f"the name {part[:24]}… is {len(os.fsencode(part))} bytes long (the limit is {_NAME_MAX})"
    if len(os.fsencode(str(path))) >= 4096:
        return "the path is longer than 4096 bytes"
    return None


def _check_one(option: str, path: Path, stdout_ok: bool) -> Output:
    refuse = lambda problem: ParameterError(f"{option} {_shown(path)}: {problem}")  # noqa: E731
    if str(path) == STDOUT:
        if not stdout_ok:
            raise refuse("standard output ('-') is only for predict --out; name a file")
        return Output(option, path, existed=False, special=True)
    problem = _too_long(path)
    if problem:
        raise refuse(problem)
    try:
        found = os.stat(path)  # follows links: what would be written
    except FileNotFoundError:
        found = None
    except NotADirectoryError:
        raise refuse("a folder in the path is a file, not a directory") from None
    except OSError as exc:
        raise refuse(f"cannot use this path ({exc.strerror or exc})") from None
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise refuse("is a directory; name a file in it")
    if found is not None and not stat.S_ISREG(found.st_mode):  # /dev/null, a FIFO, a terminal
        if not os.access(path, os.W_OK):
            raise refuse("not writable")
        return Output(option, path, existed=False, special=True)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    folder = target.parent
    if not folder.exists():
        raise refuse(f"no such directory {str(folder)!r}")
    if not folder.is_dir():
        raise refuse(f"{str(folder)!r} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise refuse(f"the directory {str(folder)!r} is not writable")
    return Output(option, path, existed=os.path.lexists(path), special=False)


def check_outputs(
    outputs: dict[str, str | os.PathLike | None],
    inputs: Iterable[str | os.PathLike | None],
    *,
    stdout_ok: Iterable[str] = (),
    may_equal: dict[str, str | os.PathLike | None] | None = None,
) -> dict[str, Output]:
    """Check each ``{option: path}`` output (None: not given) before any work; return them.

    Refused with one ParameterError line naming the option and path: a directory, a
    missing or unwritable directory, a name over 255 bytes, a path that is (or links
    to) one of ``inputs`` (compared by device and inode, so other spellings and hard
    links count), two options naming the same file, and ``-`` except for the options in
    ``stdout_ok``. ``may_equal`` lets an output be one named input (the checkpoint may
    be the ``--resume`` file it continues).
    """
    allowed = set(stdout_ok)
    exempt = {option: _identity(path) for option, path in (may_equal or {}).items() if path is not None}
    named = {str(path): _identity(path) for path in inputs if path is not None}
    checked: dict[str, Output] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        output = _check_one(option, Path(path), option in allowed)
        identity = None if output.special else _identity(path)
        for source, other in named.items():
            if identity is not None and identity == other and identity != exempt.get(option):
                raise ParameterError(f"{option} {_shown(path)}: is the input file {_shown(source)}; "
                                     "calopt does not write over its inputs")
            if not output.special and _inside(path, source):
                raise ParameterError(f"{option} {_shown(path)}: is inside the input directory {_shown(source)}; "
                                     "calopt does not write over its inputs")
        real = None if output.special else os.path.realpath(path)
        for before in checked.values():
            if before.special or output.special:
                continue
            if real == os.path.realpath(before.path) or (identity is not None and identity == _identity(before.path)):
                raise ParameterError(f"{option} {_shown(path)}: is also {before.option} {_shown(before.path)}; "
                                     "name two different files")
        checked[option] = output
    return checked


def _inside(path: str | os.PathLike, source: str) -> bool:
    """Whether ``path`` lies within ``source`` when ``source`` is a directory (a stream's folder:
    writing there could replace one of its arrays), links resolved."""
    if source == "-" or not os.path.isdir(source):
        return False
    folder = os.path.realpath(source)
    return os.path.commonpath([folder, os.path.realpath(path)]) == folder


def check_stdin_once(inputs: dict[str, str | os.PathLike | None]) -> None:
    """Refuse, before anything is read, a run that names standard input (``-``) for two of its
    ``{option: path}`` inputs: a pipe is read once, and the second would read an empty file."""
    named = [option for option, path in inputs.items() if path is not None and str(path) == STDIN]
    if len(named) > 1:
        raise ParameterError(f"{named[1]} -: standard input is also {named[0]}, and it can be read only once; "
                             "save one of them to a file")


def write_text(output: Output | None, text: str) -> None:
    """``text`` on stdout (no output, or ``-``), else to the output's file by the atomic-write rule."""
    if output is None or str(output.path) == STDOUT:
        typer.echo(text, nl=False)
    else:
        atomic_write(output.path, lambda handle: handle.write(text), mode="w")

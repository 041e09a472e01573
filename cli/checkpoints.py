"""Checkpoints and interrupts of ``calopt train``: where checkpoints go, and what Ctrl-C does.

:func:`checked_outputs` checks ``--model-out``, the checkpoint and ``--plot`` before any data
are read; :func:`interruptible` runs the training with SIGINT and SIGTERM turned into a
request to stop after the current batch, and an interrupt into one line and exit code
130; :func:`remove_finished_checkpoint` deletes the checkpoint a finished run created.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from calopt.errors import ParameterError, TrainingInterrupted
from calopt_cli.outputs import Output, check_outputs

__all__ = ["checked_outputs", "default_checkpoint", "interruptible", "remove_finished_checkpoint",
           "stop_requests"]


def default_checkpoint(model_out: Output | None) -> Path:
    """OUT.ckpt.npz beside --model-out OUT.npz (a file), else ./calopt-checkpoint.npz."""
    if model_out is not None and not model_out.special:  # not beside /dev/null or a FIFO
        return model_out.path.with_name(model_out.path.name.removesuffix(".npz") + ".ckpt.npz")
    return Path("calopt-checkpoint.npz")


def checked_outputs(model_out: Path | None, checkpoint: Path | None, resume: Path | None,
                    checkpoint_every: int | None, inputs: list[Any],
                    plot: Path | None = None) -> tuple[Output | None, Output | None, str]:
    """The checked --model-out and checkpoint outputs, before any data are read; --plot is
    checked with them (against the inputs and each other), and written by the same rule.

    The checkpoint is --checkpoint, else the --resume file (which it may overwrite),
    else the default beside the model. The default is not one the user named: when it
    already exists, or cannot be written, checkpoints are not written at all (the
    returned reason says why), unless --checkpoint-every asks for them, which makes it
    an error.
    """
    named = checkpoint or resume
    option = "--checkpoint" if checkpoint is not None or resume is None else "--resume"
    checked = check_outputs({"--model-out": model_out, option: named, "--plot": plot}, inputs,
                            may_equal={option: resume})
    if named is not None:
        return checked.get("--model-out"), checked[option], ""
    default = default_checkpoint(checked.get("--model-out"))
    try:
        output = check_outputs({"--model-out": model_out, "--plot": plot, "--checkpoint": default},
                               inputs)["--checkpoint"]
        if output.existed:
            raise ParameterError(f"--checkpoint {default}: the default checkpoint exists (from an earlier run?); "
                                 f"continue it with --resume {default}, or name another with --checkpoint")
    except ParameterError as exc:
        if checkpoint_every is not None:
            raise
        return checked.get("--model-out"), None, str(exc)
    return checked.get("--model-out"), output, ""


@contextmanager
def stop_requests() -> Iterator[threading.Event]:
    """An event set by SIGINT (Ctrl-C) or SIGTERM while the block runs; handlers restored after.

    The training loop stops after the current batch when it is set; a second signal
    stops at once (KeyboardInterrupt).
    """
    requested = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        if requested.is_set():
            raise KeyboardInterrupt
        requested.set()

    previous = {}
    if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)
    try:
        yield requested
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


@contextmanager
def interruptible(checkpoint: Output | None, no_checkpoint: str) -> Iterator[threading.Event]:
    """:func:`stop_requests` around a training run; an interrupt becomes one line and exit 130.

    Interrupted after a batch (TrainingInterrupted), the line names the checkpoint to
    resume from. A stop requested after the last batch, while the run was being
    finished (the threshold tuned), is an interrupt too: calopt.fit has returned a
    model, but the user asked to stop, so no model is written.
    """
    try:
        with stop_requests() as stop:
            yield stop
            late = stop.is_set()
    except TrainingInterrupted as exc:
        if exc.path is None:
            typer.echo(f"calopt: interrupted in {exc.checkpoint.describe()}; no checkpoint written ({no_checkpoint})",
                       err=True)
        else:
            typer.echo(f"calopt: interrupted in {exc.checkpoint.describe()}: checkpoint written to "
                       f"{exc.path}; to continue, run the same command with --resume {exc.path}", err=True)
        raise typer.Exit(130) from None
    if late:
        path = checkpoint.path if checkpoint is not None else None
        resume = (f"; to continue from {path}, run the same command with --resume {path}"
                  if path is not None and not checkpoint.special and path.is_file() else "")
        typer.echo(f"calopt: interrupted after the last batch; no model written{resume}", err=True)
        raise typer.Exit(130)


def remove_finished_checkpoint(checkpoint: Output | None) -> None:
    """The run is complete: a checkpoint file this run created is deleted; one that was there
    before (the --resume file, a path the user named) is left alone."""
    if checkpoint is not None and not checkpoint.existed and not checkpoint.special:
        checkpoint.path.unlink(missing_ok=True)

"""The training progress bar of ``calopt train``, binary and multiclass alike."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["epoch_progress"]


@contextlib.contextmanager
def epoch_progress(total: int | None, *, enabled: bool) -> Iterator[Callable[[Any], None]]:
    """A transient bar on stderr over ``total`` epochs; yields the per-epoch callback.

    The callback takes the loop's EpochRecord and advances the bar by one epoch, or to
    the record's epoch number when that is further (a resumed run starts part-way),
    showing that epoch's seconds; the record's ``total_epochs`` sets the bar's length
    (the training run knows it: one-vs-rest one class at a time counts every class's
    epochs). Disabled (``--json``, ``--no-progress``), it does nothing. The bar is
    removed when the block exits, however it exits.
    """
    if not enabled:
        yield lambda info: None
        return
    progress = Progress(TextColumn("[bold]training[/bold]"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("epochs · {task.fields[value]}"), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)
    task = progress.add_task("train", total=total, value="")
    done = 0

    def on_epoch(info: Any) -> None:
        nonlocal done
        done = max(done + 1, info.epoch)
        total = getattr(info, "total_epochs", None) or progress.tasks[0].total
        progress.update(task, completed=done, total=total, value=f"{info.seconds:.2f}s")

    on_epoch.progress = progress  # type: ignore[attr-defined]  # for tests
    with progress:
        yield on_epoch

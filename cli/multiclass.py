"""``calopt train`` / ``evaluate`` / ``predict`` on data with more than two classes.

Thin over :func:`calopt.fit_multiclass` and :class:`calopt.MulticlassModel`: training
reports top-1 and top-5 accuracy and, for the requested measure, its one-vs-rest value
per class and their macro average (a rich table, or ``--json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

import calopt
from calopt.errors import ParameterError
from calopt.io.files import Dataset
from calopt.io.labels import label_text
from calopt.models.linear import MulticlassModel
from calopt_cli.options import echo_json, epochs_text, run_fields
from calopt_cli.progress import epoch_progress

__all__ = ["evaluate", "prediction_lines", "train"]


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON form of one evaluation: top1, top5, and the first measure's per_class and macro."""
    first = result["measures"][0]
    return {"top1": result["top1"], "top5": result["top5"], "measure": first["measure"],
            "per_class": first["per_class"], "macro": first["macro"]}


def train(
    train_set: Dataset,
    test_set: Dataset | None,
    *,
    measure: str,
    algorithm: str,
    loss: str,
    backend: str,
    dtype: str | None,
    device: Any,
    epochs: int,
    batch_size: int | None,
    seed: int | None,
    model_out: Path | None,
    as_json: bool,
    no_progress: bool,
    binary_only: dict[str, Any],
    checkpoint: Path,
    checkpoint_every: int | None,
    resume: Path | None,
    interrupt: Callable[[], bool],
) -> None:
    """Train one-vs-rest (SLND unless ``algorithm`` names another) and report the accuracies.

    ``binary_only`` holds the options that only binary training takes (--positive);
    any of them set is an error here. The checkpoint options and ``interrupt`` go to
    :func:`calopt.fit_multiclass` (the caller turns its TrainingInterrupted into exit 130).
    """
    given = [name for name, value in binary_only.items() if value is not None]
    if given:
        raise ParameterError(f"{', '.join(given)}: binary training only; "
                             f"{train_set.source} has {np.unique(train_set.labels).size} classes")
    chosen = calopt.get_algorithm(algorithm or "slnd")
    n_classes = int(np.unique(train_set.labels).size)
    total = epochs if chosen.multiclass else epochs * n_classes  # one-vs-rest: each class's epochs
    with epoch_progress(total, enabled=not (as_json or no_progress)) as on_epoch:
        model = calopt.fit_multiclass(
            train_set.X, train_set.labels, algorithm=chosen, loss=loss or None, measure=measure,
            backend=backend, dtype=dtype, device=device, epochs=epochs, batch_size=batch_size,
            seed=0 if seed is None else seed, callback=on_epoch,
            eval_set=(test_set.X, test_set.labels) if test_set is not None else None,
            checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume, interrupt=interrupt,
        )
    if model_out is not None:
        model.save(model_out)
    results = [(train_set.source, model.evaluate(train_set.X, train_set.labels))]
    if test_set is not None:
        results.append((test_set.source, model.evaluate(test_set.X, test_set.labels)))
    if as_json:
        echo_json({
            "task": "multiclass",
            "classes": [label_text(c) for c in model.classes],
            **run_fields(model),
            "rank": model.options.get("rank"),
            "train": _summary(results[0][1]),
            "test": _summary(results[1][1]) if test_set is not None else None,
            "history": model.history,
            "status": model.message,
            "model": str(model_out) if model_out is not None else None,
        })
        return
    console = Console()
    table = Table(title=f"{model.algorithm} · one-vs-rest, {model.n_classes} classes")
    for column in ("data", "top-1", "top-5", f"{model.measure} (macro)"):
        table.add_column(column, justify="left" if column == "data" else "right")
    for name, result in results:
        table.add_row(name, f"{result['top1']:.4f}", f"{result['top5']:.4f}",
                      f"{result['measures'][0]['macro']:.4f}")
    rank = f", rank {model.options['rank']}" if model.options.get("rank") else ""
    table.caption = (f"{model.options['backend']}, {epochs_text(model.options['epochs'])}{rank}, "
                     f"fit in {model.fit_seconds:.2f} s")
    console.print(table)
    console.print(_per_class_table(model.measure, results))
    if model_out is not None:
        console.print(f"model written to {model_out}")


def _per_class_table(measure: str, results: list[tuple[str, dict[str, Any]]]) -> Table:
    """One row per class: the measure's one-vs-rest value on each data set."""
    table = Table(title=f"{measure} per class (one-vs-rest)")
    table.add_column("class")
    for name, _ in results:
        table.add_column(name, justify="right")
    per_class = [result["measures"][0]["per_class"] for _, result in results]
    for label in per_class[0]:
        table.add_row(label, *(f"{values[label]:.4f}" for values in per_class))
    return table


def evaluate(model: MulticlassModel, model_path: Path, dataset: Dataset, measures: list[str] | None,
             as_json: bool) -> None:
    """Top-1/top-5 accuracy and each measure's per-class values and macro average."""
    result = model.evaluate(dataset.X, dataset.labels, measures or None)
    if as_json:
        echo_json({"model": str(model_path), "data": dataset.source, **result})
        return
    console = Console()
    console.print(f"{model_path} on {dataset.source} ({dataset.n_samples} rows): "
                  f"top-1 {result['top1']:.4f}, top-5 {result['top5']:.4f}")
    table = Table()
    table.add_column("class")
    for entry in result["measures"]:
        table.add_column(entry["measure"], justify="right")
    for label in result["measures"][0]["per_class"]:
        table.add_row(label, *(f"{entry['per_class'][label]:.4f}" for entry in result["measures"]))
    table.add_row("macro", *(f"{entry['macro']:.4f}" for entry in result["measures"]), style="bold")
    console.print(table)


def prediction_lines(model: MulticlassModel, X: Any, *, scores: bool) -> list[str]:
    """One line per row: the predicted class, or the C scores separated by spaces."""
    if scores:
        return [" ".join(repr(float(v)) for v in row) for row in np.asarray(model.decision_function(X))]
    return [label_text(label) for label in model.predict(X)]

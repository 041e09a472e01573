"""The tables and texts that show a model's results, shared by ``train``, ``evaluate`` and ``compare``.

Each function builds a rich :class:`~rich.table.Table` (or a string) from the JSON-like
values the library returns (a model's ``summary`` and ``report``, the constraints'
account); the commands print them.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from calopt.io.labels import label_text

__all__ = ["HEADERS", "WITHIN_ERROR_NOTE", "class_rates_table", "constraint_mark", "constraints_table", "per_class_table",
           "positive_text", "summary_table", "trivial_top5"]

#: Column headers of the summary values a model reports.
HEADERS = {"value": "value", "tpr": "TPR", "tnr": "TNR", "top1": "top-1", "top5": "top-5", "accuracy": "accuracy"}

#: Under a table of constraint values on rows the model did not train on.
WITHIN_ERROR_NOTE = "≈: misses the bound by less than two standard errors of the rate on those rows"


def positive_text(model: Any) -> str | None:
    """A binary model's positive class as the user wrote it (``fraud``, ``1``); None for one-vs-rest."""
    return None if model.positive is None else label_text(model.positive)


def trivial_top5(key: str, summary: dict[str, Any]) -> bool:
    """Whether ``key`` is the top-5 accuracy of a model of at most 5 classes (1 whatever it
    predicts: not worth a column)."""
    return key == "top5" and len(summary.get("per_class") or summary.get("recall") or {}) <= 5


def summary_table(title: str, rows: list[tuple[str, dict[str, Any]]], measure: str) -> Table:
    """One row per data set with the scalar values of a model's summary (a multiclass model's
    ``value`` headed by its measure: its K-class value)."""
    keys = [key for key, value in rows[0][1].items() if isinstance(value, float) and not trivial_top5(key, rows[0][1])]
    headers = {**HEADERS, "value": measure} if "per_class" in rows[0][1] else HEADERS
    table = Table(title=title)
    table.add_column("data")
    for key in keys:
        table.add_column(headers.get(key, f"{measure} ({key})"), justify="right")
    for name, summary in rows:
        table.add_row(name, *(f"{summary[key]:.4f}" for key in keys))
    return table


def constraint_mark(satisfied: bool, within_error: bool = False) -> str:
    """✓ holds, ≈ misses by less than the rows' sampling error (two standard errors), ✗ misses."""
    return "✓" if satisfied else "≈" if within_error else "✗"


def constraints_table(entries: list[dict[str, Any]]) -> Table:
    """One row per constraint: its value on each data set reported, and whether it holds on each
    (on held-out and test rows, ≈ for a miss within their sampling error)."""
    splits = [split for split in ("train", "validation", "test") if split in entries[0]]
    table = Table(title="constraints")
    table.add_column("constraint")
    for split in splits:
        table.add_column("held-out" if split == "validation" else split, justify="right")
    marks = []
    for entry in entries:
        row = [constraint_mark(entry["satisfied"]) if split == "train" else
               constraint_mark(entry[f"{split}_satisfied"], entry.get(f"{split}_within_error", False))
               for split in splits]
        marks.extend(row)
        table.add_row(entry["constraint"], *(f"{entry[split]:.4f} {mark}" for split, mark in zip(splits, row)))
    if "≈" in marks:
        table.caption = WITHIN_ERROR_NOTE
    return table


def class_rates_table(rows: list[tuple[str, dict[str, Any]]]) -> Table:
    """One row per class: its recall and precision on each data set (multiclass summaries)."""
    return per_class_table("recall and precision per class", [
        (f"{name} {rate}", summary[rate]) for name, summary in rows for rate in ("recall", "precision")])


def per_class_table(title: str, columns: list[tuple[str, dict[str, float]]]) -> Table:
    """One row per class: a measure's one-vs-rest value in each column."""
    table = Table(title=title)
    table.add_column("class")
    for name, _ in columns:
        table.add_column(name, justify="right")
    for label in columns[0][1]:
        table.add_row(label, *(f"{values[label]:.4f}" for _, values in columns))
    return table

"""``calopt list-measures``, ``list-losses`` and ``list-algorithms``: what the plugins provide."""

from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from calopt import registry
from calopt_cli.options import JsonOpt, echo_json

__all__ = ["list_algorithms", "list_losses", "list_measures"]

_LOSS_FLAGS = ("smooth", "calibrated", "reward")
_PLURAL = {"measure": "measures", "loss": "losses", "algorithm": "algorithms"}


def _params_text(params: dict[str, Any]) -> str:
    return "\n".join(f"{key}={value}" for key, value in params.items()) or "-"


def _show(kind: str, as_json: bool, flags: tuple[str, ...] = ()) -> None:
    """Print the registered components of ``kind`` as a table (plain aligned rows when stdout
    is not a terminal), or as JSON.

    ``flags`` are boolean properties shown together in one column (the losses' smooth,
    calibrated, reward).
    """
    described = [entry.describe() for entry in registry.list_entries(kind)]
    if as_json:
        echo_json(described)
        return
    # Columns that would be empty for every row (losses have no parameters) are left out.
    columns: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], str]]] = [
        ("name", {"style": "bold cyan", "no_wrap": True}, lambda info: info["name"]),
        ("family", {"no_wrap": True}, lambda info: info["family"] or "-"),
        ("parameters", {"overflow": "fold"}, lambda info: _params_text(info["params"])),
        ("properties", {"no_wrap": True}, lambda info: "\n".join(filter(info.get, flags)) or "-"),
        ("classes", {"no_wrap": True}, lambda info: "2 or more" if info.get("multiclass") else "2"),
        ("aliases", {}, lambda info: "\n".join(info["aliases"]) or "-"),
        ("plugin", {"no_wrap": True}, lambda info: info["plugin"]),
        ("summary", {"ratio": 1}, lambda info: info["summary"]),
    ]
    keep = {
        "parameters": not described or any(info["params"] for info in described),
        "properties": bool(flags),
        "classes": any("multiclass" in info for info in described),
        "aliases": not described or any(info["aliases"] for info in described),
    }
    columns = [column for column in columns if keep.get(column[0], True)]
    console = Console()
    if not console.is_terminal:  # piped: one plain line per entry, never wrapped inside a value
        rows = [[header for header, _, _ in columns]]
        rows += [[cell(info).replace("\n", ", ") for _, _, cell in columns] for info in described]
        widths = [max(len(row[i]) for row in rows) for i in range(len(columns) - 1)]
        for row in rows:
            typer.echo("  ".join([*(text.ljust(width) for text, width in zip(row, widths)), row[-1]]).rstrip())
        return
    table = Table(title=f"calopt {_PLURAL[kind]}", title_justify="left")
    for header, style, _ in columns:
        table.add_column(header, **style)
    for info in described:
        table.add_row(*(cell(info) for _, _, cell in columns))
    if not described:
        table.caption = f"No {_PLURAL[kind]} are registered (yet)."
    console.print(table)


def list_measures(as_json: JsonOpt = False) -> None:
    """List the performance measures and the plugins that provide them.

    A measure's family (concave or pseudo-linear) decides which algorithms can train for it;
    "classes" says whether it is defined on more than two classes (--json: "multiclass" says
    how: G-mean is the geometric mean of the per-class recalls, F1 the mean of its
    one-vs-rest values, ...).

    Use one as [bold]--measure name[/bold] or [bold]--measure name:key=value[/bold] (fbeta:beta=2).
    """
    _show("measure", as_json)


def list_losses(as_json: JsonOpt = False) -> None:
    """List the margin losses and the plugins that provide them.

    Properties: smooth (differentiable), calibrated, reward (1 - F is usable as a reward).
    """
    _show("loss", as_json, _LOSS_FLAGS)


def list_algorithms(as_json: JsonOpt = False) -> None:
    """List the training algorithms and the measure family each one solves."""
    _show("algorithm", as_json)

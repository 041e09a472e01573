"""Options shared by several commands, each defined once as an ``Annotated`` alias.

A command declares ``measure: MeasureOpt = "f1"`` or ``as_json: JsonOpt = False`` and
gets the same flag names, help text and shell completion as every other command.
Names are validated where that costs nothing (``--backend``, ``--dtype``); whether a
backend's library or GPU is actually there is checked when the command resolves it.
"""

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from calopt.backends import BACKENDS
from calopt.errors import UnknownNameError

__all__ = [
    "AlgorithmOpt",
    "BackendOpt",
    "DeviceOpt",
    "DtypeOpt",
    "JsonOpt",
    "LossOpt",
    "MeasureOpt",
    "PlotOpt",
    "PositiveOpt",
    "SeedOpt",
    "echo_json",
    "epochs_text",
    "json_text",
    "run_fields",
]

DTYPES = ("float64", "float32")


def _completer(kind: str):
    """Shell completion of registered ``kind`` names (measure, loss, algorithm)."""

    def complete(incomplete: str) -> list[tuple[str, str]]:
        from calopt import registry

        return [
            (entry.name, entry.component.summary())
            for entry in registry.list_entries(kind)
            if entry.name.startswith(incomplete)
        ]

    return complete


def _choice(kind: str, known: tuple[str, ...]):
    """A parameter callback accepting only ``known`` values (one-line error otherwise)."""

    def check(value: Optional[str]) -> Optional[str]:
        if value is not None and value not in known:
            raise UnknownNameError(kind, value, known)
        return value

    return check


def _complete_from(known: tuple[str, ...]):
    def complete(incomplete: str) -> list[str]:
        return [name for name in known if name.startswith(incomplete)]

    return complete


JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print machine-readable JSON on stdout instead of a table."),
]

MeasureOpt = Annotated[
    str,
    typer.Option(
        "--measure",
        "-m",
        metavar="SPEC",
        help="Performance measure as a spec: [bold]name[/bold] or "
        "[bold]name:key=value,...[/bold] (gmean, fbeta:beta=2). "
        "See [bold]calopt list-measures[/bold].",
        autocompletion=_completer("measure"),
    ),
]

LossOpt = Annotated[
    str,
    typer.Option(
        "--loss",
        "-l",
        metavar="SPEC",
        help="Margin loss as a spec (logistic, hinge, ...). See [bold]calopt list-losses[/bold].",
        autocompletion=_completer("loss"),
    ),
]

AlgorithmOpt = Annotated[
    str,
    typer.Option(
        "--algorithm",
        "-a",
        metavar="SPEC",
        help="Training algorithm as a spec (spade, stamp:step=10, ...). "
        "See [bold]calopt list-algorithms[/bold].",
        autocompletion=_completer("algorithm"),
    ),
]

BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend",
        "-b",
        metavar="NAME",
        help=f"Array backend: {', '.join(BACKENDS)} (cupy runs on an NVIDIA GPU).",
        callback=_choice("backend", BACKENDS),
        autocompletion=_complete_from(BACKENDS),
    ),
]

DtypeOpt = Annotated[
    str,
    typer.Option(
        "--dtype",
        metavar="NAME",
        help="Working floating-point dtype: float64 or float32.",
        callback=_choice("dtype", DTYPES),
        autocompletion=_complete_from(DTYPES),
    ),
]

DeviceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--device",
        metavar="DEVICE",
        help="Device for the backend: cpu, a GPU index (0) or cuda:N. Default: the backend's default.",
        show_default=False,
    ),
]

SeedOpt = Annotated[
    Optional[int],
    typer.Option(
        "--seed",
        metavar="N",
        min=0,
        help="Random seed, a whole number ≥ 0 (shuffling, initialisation); the same seed gives the same run.",
        show_default=False,
    ),
]

PositiveOpt = Annotated[
    Optional[str],
    typer.Option(
        "--positive",
        metavar="LABEL",
        help="Label of the positive class, as written in the label file "
        "(default: the greater of the two labels).",
        show_default=False,
    ),
]


def json_text(data: Any) -> str:
    """``data`` as the indented JSON every command's ``--json`` prints."""
    return json.dumps(data, indent=2, default=str)


PlotOpt = Annotated[
    Optional[Path],
    typer.Option("--plot", help="Also draw the figure to this file, .png or .svg (needs the extra calopt\\[plot]).",
                 show_default=False),
]


def echo_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (the ``--json`` output of every command)."""
    typer.echo(json_text(data))


def run_fields(model: Any) -> dict[str, Any]:
    """What a trained model's ``--json`` report starts with (binary and multiclass alike)."""
    return {key: getattr(model, key) for key in ("measure", "algorithm", "loss")} | {
        "backend": model.options["backend"], "dtype": model.options["dtype"],
        "fit_seconds": model.fit_seconds, "epochs": model.options["epochs"],
        "batch_size": model.options["batch_size"]}


def epochs_text(epochs: int) -> str:
    """``1 epoch``, ``10 epochs``: for table captions."""
    return f"{epochs} epoch{'' if epochs == 1 else 's'}"

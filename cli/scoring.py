"""``calopt score``: a performance measure of predicted labels against true labels."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import calopt
from calopt.backends import get_backend
from calopt.io.files import read_label_file
from calopt.io.labels import encode_binary, encode_like, label_text, show_label
from calopt.errors import DataError
from calopt.measures import confusion_counts, safe_divide
from calopt_cli.options import JsonOpt, MeasureOpt, PositiveOpt, echo_json

__all__ = ["score"]


def score(
    labels: Annotated[
        Path, typer.Argument(help="File of true labels, one per line (two distinct values).")
    ],
    predictions: Annotated[
        Path,
        typer.Argument(help="File of predicted labels, one per line, using the same two values."),
    ],
    measure: MeasureOpt,
    positive: PositiveOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Score predicted labels against true labels with a performance measure.

    Both files hold one label per line, in the same order; predictions use the same labels.

    Prints the measure, TPR, TNR and the confusion counts; --json prints one JSON object.

    Example: [bold]calopt score y.txt predicted.txt --measure fbeta:beta=2[/bold]
    """
    scorer = calopt.get_measure(measure)
    y_true, classes = encode_binary(
        read_label_file(labels), positive=positive, source=str(labels)
    )
    predicted = read_label_file(predictions)
    if len(predicted) != len(y_true):
        raise DataError(
            f"{labels} has {len(y_true)} labels but {predictions} has {len(predicted)}; "
            "they must match line by line"
        )
    y_pred = encode_like(predicted, classes, source=str(predictions), unit="line")

    backend = get_backend("numpy")
    xp = backend.xp
    tp, fp, tn, fn = confusion_counts(backend.asarray(y_true), backend.asarray(y_pred), xp=xp)
    result = {
        "measure": scorer.spec,
        "positive": label_text(classes[1]),
        "value": float(scorer.from_counts(tp, fp, tn, fn, xp=xp)),
        "tpr": float(safe_divide(tp, tp + fn, xp=xp)),
        "tnr": float(safe_divide(tn, tn + fp, xp=xp)),
        "tp": int(tp),
        "fp": int(fp),
        "tn": int(tn),
        "fn": int(fn),
    }
    if as_json:
        echo_json(result)
        return
    console = Console()
    console.print(
        f"{predictions} against {labels}, positive label {show_label(classes[1])}:",
        highlight=False,
        markup=False,
    )
    table = Table(show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row(scorer.spec, f"{result['value']:.6f}")
    table.add_row("TPR", f"{result['tpr']:.6f}")
    table.add_row("TNR", f"{result['tnr']:.6f}")
    for key in ("tp", "fp", "tn", "fn"):
        table.add_row(key.upper(), str(result[key]))
    console.print(table)

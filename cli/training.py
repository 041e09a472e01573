"""``calopt train``, ``calopt evaluate`` and ``calopt predict``: thin commands over calopt.fit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import calopt
from calopt import datasets
from calopt.data import Dataset, align_features, read_data
from calopt.errors import ParameterError
from calopt.model import LinearModel, atomic_write
from calopt_cli.options import (
    AlgorithmOpt,
    BackendOpt,
    DeviceOpt,
    DtypeOpt,
    JsonOpt,
    LossOpt,
    MeasureOpt,
    PositiveOpt,
    SeedOpt,
    echo_json,
)

__all__ = ["evaluate", "predict", "train"]

DataArg = Annotated[
    Optional[str],
    typer.Argument(
        help="Data file (LIBSVM/svmlight, CSV or .npz; .bz2/.gz allowed) or the name of an "
        "embedded dataset (a9a, ijcnn1). Default: the embedded a9a.",
        show_default=False,
    ),
]
LabelColumnOpt = Annotated[
    str,
    typer.Option("--label-column", help="CSV only: the label column, by index (-1: last) or header name."),
]


def _load(source: str, *, label_column: str = "-1", split: str = "train") -> Dataset:
    """A data file, or an embedded dataset when ``source`` names one and is not a file."""
    if not Path(source).exists() and source in datasets.names():
        return datasets.load(source, split)
    column: Any = int(label_column) if label_column.lstrip("-").isdigit() else label_column
    return read_data(source, label_column=column)


def _summary_table(title: str, rows: list[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(title=title)
    for column in ("data", "value", "TPR", "TNR"):
        table.add_column(column, justify="right" if column != "data" else "left")
    for name, result in rows:
        table.add_row(name, f"{result['value']:.4f}", f"{result['tpr']:.4f}", f"{result['tnr']:.4f}")
    return table


def train(
    data: DataArg = None,
    test: Annotated[
        Optional[str],
        typer.Option("--test", help="Test data, scored after training (padded to the training features)."),
    ] = None,
    measure: MeasureOpt = "f1",
    algorithm: AlgorithmOpt = "",
    loss: LossOpt = "",
    backend: BackendOpt = "numpy",
    dtype: DtypeOpt = None,
    device: DeviceOpt = None,
    epochs: Annotated[int, typer.Option("--epochs", "-e", help="Passes over the training data.")] = 10,
    batch_size: Annotated[
        Optional[int],
        typer.Option("--batch-size", help="Mini-batch size (default: n/100, from 32 to 1024)."),
    ] = None,
    seed: SeedOpt = 0,
    positive: PositiveOpt = None,
    label_column: LabelColumnOpt = "-1",
    model_out: Annotated[
        Optional[Path], typer.Option("--model-out", "-o", help="Write the trained model here (.npz).")
    ] = None,
    as_json: JsonOpt = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Train a linear classifier that maximises a performance measure.

    The algorithm follows the measure's family unless given (concave: spade,
    pseudo-linear: stamp). Without DATA, trains on the embedded a9a and tests on its
    test split.

    Example: [bold]calopt train ijcnn1 --test ijcnn1.t --measure gmean[/bold]
    """
    if epochs < 1:
        raise ParameterError(f"--epochs must be ≥ 1, got {epochs}")
    if batch_size is not None and batch_size < 1:
        raise ParameterError(f"--batch-size must be ≥ 1, got {batch_size}")
    source = data or "a9a"
    train_set = _load(source, label_column=label_column)
    test_set = None
    if test is not None:
        test_set = align_features(_load(test, label_column=label_column, split="test"), train_set.n_features)
    elif data is None or (not Path(source).exists() and source in datasets.names()):
        test_set = datasets.load(source, "test")

    progress = None
    if not (as_json or no_progress):
        progress = Progress(TextColumn("[bold]training[/bold]"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("epochs · {task.fields[value]}"), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        task = progress.add_task("train", total=epochs, value="")
        progress.start()

    def on_epoch(info: Any) -> None:
        if progress is not None:
            progress.update(task, completed=info.epoch, value=f"{info.seconds:.2f}s")

    try:
        model = calopt.fit(
            train_set.X, train_set.labels, measure=measure, algorithm=algorithm or None,
            loss=loss or None, backend=backend, dtype=dtype, device=device, epochs=epochs,
            batch_size=batch_size, seed=seed, positive=positive, callback=on_epoch,
            eval_set=(test_set.X, test_set.labels) if test_set is not None else None,
        )
    finally:
        if progress is not None:
            progress.stop()
    if model_out is not None:
        model.save(model_out)
    train_result = model.evaluate(train_set.X, train_set.labels)[0]
    test_result = model.evaluate(test_set.X, test_set.labels)[0] if test_set is not None else None
    if as_json:
        echo_json({
            "measure": model.measure,
            "algorithm": model.algorithm,
            "loss": model.loss,
            "backend": model.options["backend"],
            "dtype": model.options["dtype"],
            "fit_seconds": model.fit_seconds,
            "epochs": model.options["epochs"],
            "batch_size": model.options["batch_size"],
            "train": {k: train_result[k] for k in ("value", "tpr", "tnr")},
            "test": None if test_result is None else {k: test_result[k] for k in ("value", "tpr", "tnr")},
            "history": model.history,
            "status": model.message,
            "model": str(model_out) if model_out is not None else None,
        })
        return
    console = Console()
    rows = [(train_set.source, train_result)] + ([(test_set.source, test_result)] if test_result else [])
    table = _summary_table(f"{model.measure} · {model.algorithm}", rows)
    table.caption = (f"{model.options['backend']}, {model.options['epochs']} epochs, "
                     f"fit in {model.fit_seconds:.2f} s")
    console.print(table)
    if model_out is not None:
        console.print(f"model written to {model_out}")


def evaluate(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="A model file written by calopt train.")],
    data: Annotated[str, typer.Argument(help="Data file, or an embedded dataset name (its test split).")],
    measure: Annotated[
        Optional[list[str]],
        typer.Option("--measure", "-m", help="Measure spec; repeat for several (default: the model's)."),
    ] = None,
    label_column: LabelColumnOpt = "-1",
    as_json: JsonOpt = False,
) -> None:
    """Evaluate a trained model on labelled data with any registered measures."""
    model = LinearModel.load(model_path)
    dataset = align_features(_load(data, label_column=label_column, split="test"), model.n_features)
    results = model.evaluate(dataset.X, dataset.labels, measure or None)
    if as_json:
        echo_json({"model": str(model_path), "data": dataset.source, "n_samples": dataset.n_samples,
                   "results": results})
        return
    table = Table(title=f"{model_path} on {dataset.source} ({dataset.n_samples} rows)")
    for column in ("measure", "value", "TPR", "TNR"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for result in results:
        table.add_row(result["measure"], f"{result['value']:.4f}", f"{result['tpr']:.4f}", f"{result['tnr']:.4f}")
    Console().print(table)


def predict(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="A model file written by calopt train.")],
    data: Annotated[str, typer.Argument(help="Data file (labels are ignored), or an embedded dataset name (its test split).")],
    out: Annotated[
        Optional[Path], typer.Option("--out", help="Write here (atomically) instead of stdout.")
    ] = None,
    scores: Annotated[bool, typer.Option("--scores", help="Write decision scores, not labels.")] = False,
    label_column: LabelColumnOpt = "-1",
) -> None:
    """Predict labels (or scores) for a data file, one per line."""
    model = LinearModel.load(model_path)
    dataset = align_features(_load(data, label_column=label_column, split="test"), model.n_features)
    values = np.asarray(model.decision_function(dataset.X)) if scores else model.predict(dataset.X)
    lines = [repr(float(v)) if scores else _label_text(v) for v in values]
    text = "\n".join(lines) + ("\n" if lines else "")
    if out is None:
        typer.echo(text, nl=False)
    else:
        atomic_write(out, lambda handle: handle.write(text), mode="w")


def _label_text(value: Any) -> str:
    """A label as written in label files: 1 rather than 1.0 for whole numbers."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)

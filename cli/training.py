"""``calopt train``, ``calopt evaluate`` and ``calopt predict``: thin commands over calopt.fit."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

import calopt
from calopt.errors import ParameterError, TrainingInterrupted
from calopt.io import datasets
from calopt.io.files import Dataset, align_features, read_data
from calopt.io.labels import encode_binary, label_text
from calopt.models.archive import atomic_write
from calopt.models.linear import MulticlassModel, load_model
from calopt_cli import multiclass
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
    epochs_text,
    run_fields,
)
from calopt_cli.progress import epoch_progress

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


def _check_labels(dataset: Dataset, positive: Any) -> None:
    """Two-valued label problems (one class only, an unknown ``--positive``), naming the file."""
    if np.unique(dataset.labels).size <= 2:
        encode_binary(dataset.labels, positive=positive, source=f"{dataset.source} labels")


def _checkpoint_path(checkpoint: Path | None, resume: Path | None, model_out: Path | None) -> Path:
    """--checkpoint, else the --resume file, else OUT.ckpt.npz beside --model-out OUT.npz,
    else ./calopt-checkpoint.npz."""
    if checkpoint is not None or resume is not None:
        return checkpoint or resume
    if model_out is not None:
        return model_out.with_name(model_out.name.removesuffix(".npz") + ".ckpt.npz")
    return Path("calopt-checkpoint.npz")


@contextmanager
def _stop_requests() -> Iterator[threading.Event]:
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
def _interruptible(checkpoint_path: Path) -> Iterator[threading.Event]:
    """:func:`_stop_requests` around a training run; its TrainingInterrupted becomes one line
    naming the checkpoint, and exit code 130."""
    try:
        with _stop_requests() as stop:
            yield stop
    except TrainingInterrupted as exc:
        typer.echo(f"calopt: interrupted in {exc.checkpoint.describe()}: checkpoint written to "
                   f"{checkpoint_path}; to continue, run the same command with --resume {checkpoint_path}",
                   err=True)
        raise typer.Exit(130) from None


def _remove_finished_checkpoint(checkpoint_path: Path, checkpoint_every: int | None, resume: Path | None) -> None:
    """The run is complete: nothing is left to resume."""
    if checkpoint_every is not None or resume is not None:
        checkpoint_path.unlink(missing_ok=True)


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
    checkpoint: Annotated[
        Optional[Path],
        typer.Option("--checkpoint", help="Where to write checkpoints (default: the --resume file, "
                     "else OUT.ckpt.npz beside --model-out OUT.npz, else ./calopt-checkpoint.npz).",
                     show_default=False),
    ] = None,
    checkpoint_every: Annotated[
        Optional[int],
        typer.Option("--checkpoint-every", help="Also write a checkpoint every N epochs.", show_default=False),
    ] = None,
    resume: Annotated[
        Optional[Path],
        typer.Option("--resume", help="Continue the interrupted run saved in this checkpoint "
                     "(give the same data and options).", show_default=False),
    ] = None,
) -> None:
    """Train a linear classifier that maximises a performance measure.

    The algorithm follows the measure's family unless given (concave: spade,
    pseudo-linear: stamp). Without DATA, trains on the embedded a9a and tests on its
    test split.

    Ctrl-C (or SIGTERM) stops after the current batch, writes a checkpoint and exits
    with code 130; the same command with --resume CHECKPOINT ends with the model an
    uninterrupted run gives (multiclass runs too). The checkpoint is deleted once a run
    finishes.

    Example: [bold]calopt train ijcnn1 --test ijcnn1.t --measure gmean[/bold]
    """
    if epochs < 1:
        raise ParameterError(f"--epochs must be ≥ 1, got {epochs}")
    if batch_size is not None and batch_size < 1:
        raise ParameterError(f"--batch-size must be ≥ 1, got {batch_size}")
    if checkpoint_every is not None and checkpoint_every < 1:
        raise ParameterError(f"--checkpoint-every must be ≥ 1, got {checkpoint_every}")
    if resume is not None and not resume.is_file():
        raise ParameterError(f"--resume {resume}: no such checkpoint file")
    source = data or "a9a"
    train_set = _load(source, label_column=label_column)
    test_set = None
    if test is not None:
        test_set = align_features(_load(test, label_column=label_column, split="test"), train_set.n_features)
    elif data is None or (not Path(source).exists() and source in datasets.names()):
        test_set = datasets.load(source, "test")
    checkpoint_path = _checkpoint_path(checkpoint, resume, model_out)
    if np.unique(train_set.labels).size > 2:  # one-vs-rest: calopt_cli.multiclass
        with _interruptible(checkpoint_path) as stop:
            multiclass.train(
                train_set, test_set, measure=measure, algorithm=algorithm, loss=loss, backend=backend,
                dtype=dtype, device=device, epochs=epochs, batch_size=batch_size, seed=seed,
                model_out=model_out, as_json=as_json, no_progress=no_progress,
                binary_only={"--positive": positive}, checkpoint=checkpoint_path,
                checkpoint_every=checkpoint_every, resume=resume, interrupt=stop.is_set)
        _remove_finished_checkpoint(checkpoint_path, checkpoint_every, resume)
        return
    _check_labels(train_set, positive)

    with _interruptible(checkpoint_path) as stop, \
            epoch_progress(epochs, enabled=not (as_json or no_progress)) as on_epoch:
        model = calopt.fit(
            train_set.X, train_set.labels, measure=measure, algorithm=algorithm or None,
            loss=loss or None, backend=backend, dtype=dtype, device=device, epochs=epochs,
            batch_size=batch_size, seed=seed, positive=positive, callback=on_epoch,
            eval_set=(test_set.X, test_set.labels) if test_set is not None else None,
            checkpoint=checkpoint_path, checkpoint_every=checkpoint_every, resume=resume,
            interrupt=stop.is_set,
        )
    if model_out is not None:
        model.save(model_out)
    _remove_finished_checkpoint(checkpoint_path, checkpoint_every, resume)
    if model.status < 0:
        typer.echo(f"calopt: warning: {model.message}", err=True)
    train_result = model.evaluate(train_set.X, train_set.labels)[0]
    test_result = model.evaluate(test_set.X, test_set.labels)[0] if test_set is not None else None
    if as_json:
        echo_json({
            **run_fields(model),
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
    table.caption = (f"{model.options['backend']}, {epochs_text(model.options['epochs'])}, "
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
    model = load_model(model_path)
    dataset = align_features(_load(data, label_column=label_column, split="test"), model.n_features)
    if isinstance(model, MulticlassModel):
        return multiclass.evaluate(model, model_path, dataset, measure, as_json)
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
    model = load_model(model_path)
    dataset = align_features(_load(data, label_column=label_column, split="test"), model.n_features)
    if isinstance(model, MulticlassModel):
        lines = multiclass.prediction_lines(model, dataset.X, scores=scores)
    else:
        values = np.asarray(model.decision_function(dataset.X)) if scores else model.predict(dataset.X)
        lines = [repr(float(v)) if scores else label_text(v) for v in values]
    text = "\n".join(lines) + ("\n" if lines else "")
    if out is None:
        typer.echo(text, nl=False)
    else:
        atomic_write(out, lambda handle: handle.write(text), mode="w")


"""``calopt train``, ``calopt evaluate`` and ``calopt predict``: thin commands over calopt.fit and the models.

The library decides everything about the training (binary or one-vs-rest, the defaults,
validation); these commands load files, call it, and render what it returns: a model's
``summary`` (train), ``report`` (evaluate) and predictions, with the same code for every
kind of model.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import calopt
from calopt import plotting
from calopt.constraints import held_out_unmet_message, parse_constraints, unmet_message
from calopt.errors import DataError, ParameterError, TrainingInterrupted
from calopt.io import datasets
from calopt.io.files import STDIN, Dataset, align_features, read_data
from calopt.io.labels import label_text
from calopt.models.linear import load_model
from calopt.training.selection import MAX_EPOCHS, PATIENCE
from calopt_cli.options import (
    AlgorithmOpt,
    BackendOpt,
    ConstraintOpt,
    DaskOpt,
    DeviceOpt,
    DtypeOpt,
    EpochsOpt,
    JsonOpt,
    LossOpt,
    MaxEpochsOpt,
    MeasureOpt,
    PatienceOpt,
    PlotOpt,
    PositiveOpt,
    SeedOpt,
    SelectOpt,
    echo_json,
    epochs_text,
    json_text,
    run_fields,
    selection_text,
)
from calopt_cli.cluster import cluster_input, dask_client
from calopt_cli.outputs import Output, check_outputs, check_stdin_once, write_text
from calopt_cli.progress import epoch_progress
from calopt_cli.report import record_reading, run_report
from calopt_cli.stream import StreamOpt, read_whole_source, streams, train_stream

__all__ = ["CsvOptions", "DataArg", "DelimiterOpt", "HeaderOpt", "LabelColumnOpt", "evaluate", "load_dataset",
           "model_reading", "positive_text", "predict", "reading", "train"]

DataArg = Annotated[
    Optional[str],
    typer.Argument(
        help="Data file (LIBSVM/svmlight, CSV or .npz; .bz2/.gz allowed) or the name of an "
        "embedded dataset (a9a, ijcnn1). Default: the embedded a9a.",
        show_default=False,
    ),
]
LabelColumnOpt = Annotated[
    Optional[str],
    typer.Option("--label-column", metavar="COLUMN", show_default=False,
                 help="CSV only: the label column, by index (-1: last) or header name. Default: the last column; "
                 "a file read for a model trained on a CSV with a header: the model's label column, by name."),
]
DelimiterOpt = Annotated[
    Optional[str],
    typer.Option("--delimiter", metavar="CHAR", show_default=False,
                 help="CSV only: the field delimiter: a character (',' ';'), 'tab' or 'whitespace'. "
                 "Default: sniffed from the first lines (';' before tab before ',')."),
]
HeaderOpt = Annotated[
    Optional[bool],
    typer.Option("--header/--no-header", show_default=False,
                 help="CSV only: whether the first line names the columns. Default: it does when none of "
                 "its features is a number, when it is the column numbers 0,1,2,... or 1,2,3,..., or "
                 "when its label is not a number and every other label is."),
]
#: Column headers of the summary values a model reports.
_HEADERS = {"value": "value", "tpr": "TPR", "tnr": "TNR", "top1": "top-1", "top5": "top-5"}


@dataclass(frozen=True)
class CsvOptions:
    """How to read a CSV file: ``--label-column``, ``--delimiter``, ``--header/--no-header``."""

    label_column: str | None = None  #: None: the last column, or the model's label column by name
    delimiter: str | None = None
    header: bool | None = None


def reading(dataset: Dataset) -> dict[str, Any]:
    """How a training file was read, kept in the model (:func:`calopt_cli.report.record_reading`)
    so that every later file (``--test``, evaluate, predict, aggregate) is read the same way: with the
    training CSV's header, its features' and label column's names (later CSV files are
    matched by name); ``feature_names`` None: by position."""
    read = {"format": dataset.format, "zero_based": dataset.zero_based, "n_features": dataset.n_features}
    if dataset.format == "csv":  # None: no header, the columns are known by position
        names = list(dataset.feature_names) if dataset.feature_names is not None else None
        last = dataset.label_index in (None, dataset.n_features)  # the default, recorded as None
        read |= {"feature_names": names, "label_column": dataset.label_name if names is not None else None,
                 "label_index": None if last else dataset.label_index}
    return read


def model_reading(model: Any) -> dict[str, Any]:
    """How the model's training data were read (older model files: only its width is known)."""
    return {**(run_report(model).data or {}), "n_features": model.n_features}


def load_dataset(source: str, csv: CsvOptions, *, split: str = "train", like: dict[str, Any] | None = None,
                 of: str = "the model", labelled: bool = True) -> Dataset:
    """A data file (``-``: stdin), or an embedded dataset when ``source`` names one and is not a file.

    ``like`` is how the training data were read (:func:`reading`): the one index-base rule
    (a LIBSVM file is read with the training file's base, never guessed again, so a test
    file that happens not to use index 0 is not shifted by a column) and the one width
    rule (:func:`calopt.io.files.align_features`: only a narrower LIBSVM file is padded;
    ``of`` names whose width it is). When the training CSV named its columns, a CSV is
    matched by name (:func:`calopt.io.files.read_data`'s ``columns``); without names, its
    label column is the training CSV's unless ``--label-column`` says otherwise.
    ``labelled=False`` (predict) accepts a CSV of features alone.
    """
    like = like or {}
    if source != STDIN and not Path(source).exists() and source in datasets.names():
        dataset = datasets.load(source, split)
        return dataset if like.get("n_features") is None else align_features(dataset, like["n_features"], of=of)
    zero_based = like.get("zero_based")
    named = like.get("feature_names") is not None
    recorded = like.get("label_index")  # the training CSV's label column (files of before: the last)
    label_column = csv.label_column if csv.label_column is not None else str(-1 if recorded is None else recorded)
    return read_data(source, label_column=label_column,
                     delimiter=csv.delimiter, header=csv.header,
                     zero_based="auto" if zero_based is None else zero_based,
                     n_features=like.get("n_features"), n_features_of=of, labelled=labelled,
                     columns={key: like.get(key) for key in ("feature_names", "label_column")} if named else None)


def _default_checkpoint(model_out: Output | None) -> Path:
    """OUT.ckpt.npz beside --model-out OUT.npz (a file), else ./calopt-checkpoint.npz."""
    if model_out is not None and not model_out.special:  # not beside /dev/null or a FIFO
        return model_out.path.with_name(model_out.path.name.removesuffix(".npz") + ".ckpt.npz")
    return Path("calopt-checkpoint.npz")


def _train_outputs(model_out: Path | None, checkpoint: Path | None, resume: Path | None,
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
    default = _default_checkpoint(checked.get("--model-out"))
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
def _interruptible(checkpoint: Output | None, no_checkpoint: str) -> Iterator[threading.Event]:
    """:func:`_stop_requests` around a training run; an interrupt becomes one line and exit 130.

    Interrupted after a batch (TrainingInterrupted), the line names the checkpoint to
    resume from. A stop requested after the last batch, while the run was being
    finished (the threshold tuned), is an interrupt too: calopt.fit has returned a
    model, but the user asked to stop, so no model is written.
    """
    try:
        with _stop_requests() as stop:
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


def _remove_finished_checkpoint(checkpoint: Output | None) -> None:
    """The run is complete: a checkpoint file this run created is deleted; one that was there
    before (the --resume file, a path the user named) is left alone."""
    if checkpoint is not None and not checkpoint.existed and not checkpoint.special:
        checkpoint.path.unlink(missing_ok=True)


def positive_text(model: Any) -> str | None:
    """A binary model's positive class as the user wrote it (``fraud``, ``1``); None for one-vs-rest."""
    return None if model.positive is None else label_text(model.positive)


def _summary_table(title: str, rows: list[tuple[str, dict[str, Any]]], measure: str) -> Table:
    """One row per data set with the scalar values of a model's summary."""
    keys = [key for key, value in rows[0][1].items() if isinstance(value, float)]
    table = Table(title=title)
    table.add_column("data")
    for key in keys:
        table.add_column(_HEADERS.get(key, f"{measure} ({key})"), justify="right")
    for name, summary in rows:
        table.add_row(name, *(f"{summary[key]:.4f}" for key in keys))
    return table


#: Under a table of constraint values on rows the model did not train on.
WITHIN_ERROR_NOTE = "≈: misses the bound by less than two standard errors of the rate on those rows"


def constraint_mark(satisfied: bool, within_error: bool = False) -> str:
    """✓ holds, ≈ misses by less than the rows' sampling error (two standard errors), ✗ misses."""
    return "✓" if satisfied else "≈" if within_error else "✗"


def _constraints_table(entries: list[dict[str, Any]]) -> Table:
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


def _per_class_table(title: str, columns: list[tuple[str, dict[str, float]]]) -> Table:
    """One row per class: a measure's one-vs-rest value in each column."""
    table = Table(title=title)
    table.add_column("class")
    for name, _ in columns:
        table.add_column(name, justify="right")
    for label in columns[0][1]:
        table.add_row(label, *(f"{values[label]:.4f}" for _, values in columns))
    return table


def train(
    data: DataArg = None,
    test: Annotated[
        Optional[str],
        typer.Option("--test", metavar="FILE",
                     help="Test data, scored after training; read like the training data (a LIBSVM file with "
                     "its index base; only a narrower LIBSVM file is padded to its width)."),
    ] = None,
    measure: MeasureOpt = "f1",
    constraint: ConstraintOpt = None,
    algorithm: AlgorithmOpt = "",
    loss: LossOpt = "",
    backend: BackendOpt = "numpy",
    dtype: DtypeOpt = None,
    device: DeviceOpt = None,
    epochs: EpochsOpt = None,
    select: SelectOpt = "auto",
    patience: PatienceOpt = PATIENCE,
    max_epochs: MaxEpochsOpt = MAX_EPOCHS,
    batch_size: Annotated[
        Optional[int],
        typer.Option("--batch-size", min=1, metavar="N", help="Mini-batch size (default: n/100, from 32 to 1024)."),
    ] = None,
    seed: SeedOpt = 0,
    positive: PositiveOpt = None,
    label_column: LabelColumnOpt = "-1",
    delimiter: DelimiterOpt = None,
    header: HeaderOpt = None,
    model_out: Annotated[
        Optional[Path], typer.Option("--model-out", "-o", metavar="FILE", help="Write the trained model here (.npz).")
    ] = None,
    as_json: JsonOpt = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    checkpoint: Annotated[
        Optional[Path],
        typer.Option("--checkpoint", metavar="FILE", help="Where to write checkpoints (default: the --resume file, "
                     "else OUT.ckpt.npz beside --model-out OUT.npz, else ./calopt-checkpoint.npz).",
                     show_default=False),
    ] = None,
    checkpoint_every: Annotated[
        Optional[int],
        typer.Option("--checkpoint-every", min=1, metavar="N", help="Also write a checkpoint every N epochs.",
                     show_default=False),
    ] = None,
    resume: Annotated[
        Optional[Path],
        typer.Option("--resume", metavar="FILE", help="Continue the interrupted run saved in this checkpoint "
                     "(give the same data and options).", show_default=False),
    ] = None,
    plot: PlotOpt = None,
    dask: DaskOpt = None,
    stream: StreamOpt = None,
) -> None:
    """Train a linear classifier that maximises a performance measure.

    Two classes train a binary classifier, by default with lbfgs (the plug-in route:
    logistic regression, then the threshold best for the measure); more train a
    multiclass model (by default multinomial, all classes at once; another --algorithm
    trains one class against the rest at a time), reported by top-1 and top-5 accuracy
    and the measure per class. With --stream or --dask the algorithm is the measure's own
    solver unless given (concave: spade, pseudo-linear: stamp). Without DATA, trains on
    the embedded a9a and tests on its test split.

    Ctrl-C (or SIGTERM) stops after the current batch, writes a checkpoint and exits
    with code 130; the same command with --resume CHECKPOINT ends with the model an
    uninterrupted run gives. A checkpoint file the run created is deleted once it
    finishes; one that existed before (the --resume file) is kept.

    With --constraint, the measure is maximised subject to rate constraints; each one's
    value on the training, held-out and test data is reported, and one not met on the
    training data is a warning with the best value any threshold of the model reaches:
    [bold]calopt train a9a -m recall -c "precision>=0.75"[/bold].

    Example: [bold]calopt train ijcnn1 --measure gmean[/bold]
    """
    constraints = parse_constraints(constraint)  # bad specs fail before anything is read or written
    if constraints and dask is not None:
        raise ParameterError("--constraint with --dask: a cluster run does not train under rate constraints")
    if resume is not None and not resume.is_file():
        raise ParameterError(f"--resume {resume}: " + ("is a directory, not a checkpoint file" if resume.is_dir()
                                                       else "no such checkpoint file" if not resume.exists()
                                                       else "not a regular file (a checkpoint is an .npz file)"))
    check_stdin_once({"DATA": data, "--test": test})
    if plot is not None:
        plotting.check_plot_path(plot)  # before training
    source = data or "a9a"
    model_output, checkpoint_output, no_checkpoint = _train_outputs(
        model_out, checkpoint, resume, checkpoint_every, [source, test, resume], plot)
    csv = CsvOptions(label_column, delimiter, header)
    if (streams(source, stream) if data is not None else bool(stream)):  # out of core: calopt_cli.stream
        return train_stream(source, csv, test=test, model_output=model_output, as_json=as_json,
                            no_progress=no_progress,
                            options=dict(measure=measure, algorithm=algorithm or None, loss=loss or None,
                                         epochs=epochs, batch_size=batch_size, seed=seed or 0, positive=positive,
                                         select=select),
                            refused={"--backend": backend != "numpy", "--dtype": dtype, "--device": device,
                                     "--checkpoint": checkpoint, "--checkpoint-every": checkpoint_every,
                                     "--resume": resume, "--plot": plot, "--dask": dask,
                                     "--constraint": constraints})
    if dask is not None:  # the workers read the training file; the test file is read after training
        cluster_X, cluster_y, read_options, train_set = cluster_input(source, csv, backend, device)
    else:  # --no-stream reads a directory of arrays or a Parquet file whole
        train_set = read_whole_source(source, csv) or load_dataset(source, csv)
    test_set = None
    if test is not None and dask is None:
        test_set = load_dataset(test, csv, split="test", like=reading(train_set),
                                of=f"the training data ({train_set.source})")
    elif test is None and (data is None or (not Path(source).exists() and source in datasets.names())):
        test_set = datasets.load(source, "test")
    sources = {"training labels": f"{source if train_set is None else train_set.source} labels"}
    if test_set is not None:
        sources["evaluation labels"] = f"{test_set.source} labels"
    try:
        with _interruptible(checkpoint_output, no_checkpoint) as stop, dask_client(dask) as client, \
                epoch_progress(None, enabled=not (as_json or no_progress)) as on_epoch:
            if client is not None:
                from calopt.training.distributed import fit_on_cluster
                model = fit_on_cluster(
                    cluster_X, cluster_y, cluster=client, measure=measure, algorithm=algorithm or None,
                    loss=loss or None, dtype=dtype, epochs=epochs, select=select, batch_size=batch_size,
                    seed=0 if seed is None else seed, positive=positive, read_options=read_options,
                    callback=on_epoch, checkpoint=checkpoint_output.path if checkpoint_output is not None else None,
                    checkpoint_every=checkpoint_every, resume=resume, interrupt=stop.is_set)
            else:
                model = calopt.fit(
                    train_set.X, train_set.labels, measure=measure, algorithm=algorithm or None,
                    loss=loss or None, backend=backend, dtype=dtype, device=device, epochs=epochs,
                    select=select, patience=patience, max_epochs=max_epochs, batch_size=batch_size, seed=0 if seed is None else seed, positive=positive, callback=on_epoch,
                    eval_set=(test_set.X, test_set.labels) if test_set is not None else None,
                    checkpoint=checkpoint_output.path if checkpoint_output is not None else None,
                    checkpoint_every=checkpoint_every, resume=resume,
                    interrupt=stop.is_set, constraints=constraints or None,
                )
    except DataError as exc:
        raise exc.renamed(sources) from None
    if train_set is not None:
        record_reading(model, reading(train_set))
    report = run_report(model)
    if test is not None and dask is not None:
        test_set = load_dataset(test, csv, split="test", like=report.data, of=f"the training data ({source})")
    if model_output is not None:
        model.save(model_output.path)
    _remove_finished_checkpoint(checkpoint_output)
    if model.status < 0:  # reported, and the exit code says so after the results
        typer.echo(f"calopt: warning: {model.message}; exit code 3", err=True)
    constrained = report.constraints
    selection = report.selection or {}
    if constrained and selection.get("value", 0.0) < 0:  # no threshold feasible on the held-out rows
        typer.echo(f"calopt: warning: {held_out_unmet_message(constrained, selection['rule'])}", err=True)
    for entry in constrained:
        if not entry["satisfied"]:
            typer.echo(f"calopt: warning: {unmet_message(entry)}", err=True)
    if dask is not None:  # measured by the workers at the end of training
        summaries = [(source if train_set is None else train_set.source, report.cluster["train"])]
    else:
        summaries = [(train_set.source, model.summary(train_set.X, train_set.labels))]
    if test_set is not None:
        summaries.append((test_set.source, model.summary(test_set.X, test_set.labels)))
    if plot is not None:  # the run's history, drawn as calopt compare draws its methods
        plotting.save_figure(plotting.history_figure(
            model, [(s.source, s.X, s.labels) for s in (train_set, test_set) if s is not None]), plot)
    if as_json:
        echo_json({
            "task": "multiclass" if "per_class" in summaries[0][1] else "binary",
            "classes": [label_text(c) for c in model.classes],
            "positive": positive_text(model),
            **run_fields(model),
            **({"rank": report.rank} if report.rank else {}),
            "train": summaries[0][1],
            "test": summaries[1][1] if test_set is not None else None,
            **({"constraints": constrained, "threshold_rule": report.threshold_rule}
               if constraints else {}),
            "history": model.history,
            "status": model.message,
            "model": str(model_out) if model_out is not None else None,
            "plot": str(plot) if plot is not None else None,
        })
        if model.status < 0:
            raise typer.Exit(3)
        return
    console = Console()
    title = model.describe() + (f" (diverged: {model.message})" if model.status < 0 else "")
    table = _summary_table(title, summaries, model.measure)
    rank = f", rank {report.rank}" if report.rank else ""
    cluster = report.cluster
    passes = epochs_text(report.epochs) if not cluster else \
        f"{epochs_text(report.epochs, 'round')} on {cluster['workers']} Dask workers ({cluster['mode']})"
    positive_class = f", positive class {positive_text(model)}" if model.positive is not None else ""
    table.caption = escape(f"{report.backend}, {passes}{rank}{positive_class}, "
                           f"fit in {model.fit_seconds:.2f} s")
    console.print(table)
    chosen = selection_text(report.selection, model.measure)
    if chosen:
        console.print(chosen)
    if constrained:
        console.print(_constraints_table(constrained))
    if "per_class" in summaries[0][1]:
        console.print(_per_class_table(f"{model.measure} per class (one-vs-rest)",
                                       [(name, summary["per_class"]) for name, summary in summaries]))
    if model_out is not None:
        console.print(f"model written to {model_out}")
    if plot is not None:
        console.print(f"figure written to {plot}")
    if model.status < 0:
        raise typer.Exit(3)


def evaluate(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="A model file written by calopt train.")],
    data: Annotated[str, typer.Argument(help="Data file, or an embedded dataset name (its test split).")],
    measure: Annotated[
        Optional[list[str]],
        typer.Option("--measure", "-m", metavar="SPEC",
                     help="Measure spec; repeat for several (default: the model's)."),
    ] = None,
    label_column: LabelColumnOpt = None,
    delimiter: DelimiterOpt = None,
    header: HeaderOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate a trained model on labelled data with any registered measures.

    One-vs-rest models also report top-1 and top-5 accuracy, and each measure per class
    with its macro average (the value shown).
    """
    model = load_model(model_path)
    dataset = load_dataset(data, CsvOptions(label_column, delimiter, header), split="test", like=model_reading(model))
    try:
        report = model.report(dataset.X, dataset.labels, measure or None)
    except DataError as exc:
        raise exc.renamed({"labels": f"{dataset.source} labels"}) from None
    if as_json:
        echo_json({"model": str(model_path), "data": dataset.source, "positive": positive_text(model), **report})
        return
    console = Console()
    positive_class = f", positive class {positive_text(model)}" if model.positive is not None else ""
    title = f"{model_path} on {dataset.source} ({report['n_samples']} rows{positive_class})"
    accuracy = [f"{_HEADERS[key]} {report[key]:.4f}" for key in ("top1", "top5") if key in report]
    if accuracy:  # a line of its own: a long title would wrap inside the narrow table
        console.print(f"{title}: {', '.join(accuracy)}", highlight=False, markup=False)
    keys = [key for key in ("value", "tpr", "tnr") if key in report["measures"][0]]
    table = Table(title=None if accuracy else title)
    table.add_column("measure")
    for key in keys:
        table.add_column(_HEADERS[key], justify="right")
    for entry in report["measures"]:
        table.add_row(entry["measure"], *(f"{entry[key]:.4f}" for key in keys))
    console.print(table)
    if "per_class" in report["measures"][0]:
        console.print(_per_class_table("per class (one-vs-rest)",
                                       [(entry["measure"], entry["per_class"]) for entry in report["measures"]]))


def predict(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="A model file written by calopt train.")],
    data: Annotated[str, typer.Argument(help="Data file (labels are ignored), or an embedded dataset name (its test split).")],
    out: Annotated[
        Optional[Path], typer.Option("--out", metavar="FILE",
                                     help="Write here instead of stdout ('-': stdout; a file is replaced "
                                     "atomically, /dev/null or a FIFO written in place).")
    ] = None,
    scores: Annotated[bool, typer.Option("--scores", help="Write decision scores, not labels (one-vs-rest: "
                                          "each class's score, separated by spaces).")] = False,
    label_column: LabelColumnOpt = None,
    delimiter: DelimiterOpt = None,
    header: HeaderOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict labels (or scores) for a data file, one per line.

    --json writes one object instead: the model, the data, and the predictions (or scores) as a list.
    """
    output = check_outputs({"--out": out}, [model_path, data], stdout_ok={"--out"}).get("--out")
    model = load_model(model_path)
    dataset = load_dataset(data, CsvOptions(label_column, delimiter, header), split="test", like=model_reading(model),
                           labelled=False)
    if scores:
        values = np.asarray(calopt.to_numpy(model.decision_function(dataset.X)), dtype=np.float64)
        rows: list[Any] = [[float(v) for v in np.atleast_1d(row)] for row in values]
        lines = [" ".join(repr(v) for v in row) for row in rows]
        if values.ndim == 1:
            rows = [row[0] for row in rows]
    else:
        rows = lines = [label_text(label) for label in model.predict(dataset.X)]
    if as_json:
        key = "scores" if scores else "predictions"
        text = json_text({"model": str(model_path), "data": dataset.source, "n_samples": len(rows), key: rows}) + "\n"
    else:
        text = "\n".join(lines) + ("\n" if lines else "")
    write_text(output, text)

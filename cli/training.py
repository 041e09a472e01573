"""``calopt train``, ``calopt evaluate`` and ``calopt predict``: thin commands over calopt.fit and the models.

The library decides everything about the training (binary or one-vs-rest, the defaults,
validation); these commands load files, call it, and render what it returns: a model's
``summary`` (train), ``report`` (evaluate) and predictions, with the same code for every
kind of model.

``calopt train`` only gathers its options into three frozen records, :class:`TrainData`
(what to read), :class:`TrainSettings` (how to train) and :class:`TrainOutputs` (what to
write and show), and hands them to :func:`run_train`: check the options and outputs, route
(a stream: :mod:`calopt_cli.stream`; a Dask cluster; in memory), load, fit, finish, render.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import calopt
from calopt.reporting import plotting
from calopt.constraints import RateConstraint, held_out_unmet_message, parse_constraints, unmet_message
from calopt.errors import DataError, ParameterError
from calopt.io import datasets
from calopt.io.files import Dataset
from calopt.io.labels import label_text
from calopt.models.linear import load_model
from calopt.training.selection import MAX_EPOCHS, PATIENCE
from calopt_cli.checkpoints import checked_outputs, interruptible, remove_finished_checkpoint
from calopt_cli.cluster import cluster_input, dask_client
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
    subsample_text,
)
from calopt_cli.outputs import Output, check_outputs, check_stdin_once, write_text
from calopt_cli.progress import epoch_progress
from calopt_cli.reading import (CsvOptions, DelimiterOpt, HeaderOpt, LabelColumnOpt, embedded, load_dataset,
                                model_reading, reading)
from calopt_cli.render import (HEADERS, class_rates_table, constraints_table, per_class_table, positive_text,
                               summary_table, trivial_top5)
from calopt_cli.report import RunReport, record_reading, run_report
from calopt_cli.stream import StreamOpt, read_whole_source, streams, train_stream

__all__ = ["DataArg", "TrainData", "TrainOutputs", "TrainSettings", "evaluate", "predict", "run_train", "train"]

DataArg = Annotated[
    Optional[str],
    typer.Argument(
        help="Data file (LIBSVM/svmlight, CSV or .npz; .bz2/.gz allowed) or the name of an "
        "embedded dataset (a9a, ijcnn1). Default: the embedded a9a.",
        show_default=False,
    ),
]
TestOpt = Annotated[
    Optional[str],
    typer.Option("--test", metavar="FILE",
                 help="Test data, scored after training; read like the training data (a LIBSVM file with "
                 "its index base; only a narrower LIBSVM file is padded to its width)."),
]
BatchSizeOpt = Annotated[
    Optional[int],
    typer.Option("--batch-size", min=1, metavar="N", help="Mini-batch size (default: n/100, from 32 to 1024)."),
]
NoProgressOpt = Annotated[bool, typer.Option("--no-progress", help="No progress bar.")]
CheckpointOpt = Annotated[
    Optional[Path],
    typer.Option("--checkpoint", metavar="FILE", help="Where to write checkpoints (default: the --resume file, "
                 "else OUT.ckpt.npz beside --model-out OUT.npz, else ./calopt-checkpoint.npz).",
                 show_default=False),
]
CheckpointEveryOpt = Annotated[
    Optional[int],
    typer.Option("--checkpoint-every", min=1, metavar="N", help="Also write a checkpoint every N epochs.",
                 show_default=False),
]
ResumeOpt = Annotated[
    Optional[Path],
    typer.Option("--resume", metavar="FILE", help="Continue the interrupted run saved in this checkpoint "
                 "(give the same data and options).", show_default=False),
]


@dataclass(frozen=True)
class TrainData:
    """What ``calopt train`` reads: DATA (None: the embedded a9a, tested on its test split),
    ``--test`` and how to read a CSV."""

    data: str | None
    test: str | None
    csv: CsvOptions

    @property
    def source(self) -> str:
        """The training data's name: DATA, else ``a9a``."""
        return self.data or "a9a"


@dataclass(frozen=True)
class TrainSettings:
    """How ``calopt train`` trains: the options as given (``""``: the library's default)."""

    measure: str
    constraint: list[str] | None
    algorithm: str
    loss: str
    backend: str
    dtype: str | None
    device: str | None
    epochs: int | None
    select: str
    patience: int
    max_epochs: int
    batch_size: int | None
    seed: int | None
    positive: str | None
    dask: str | None  #: None: in this process; 'local' or a scheduler's address
    stream: bool | None  #: None: streamed when the source calls for it (:func:`calopt_cli.stream.streams`)
    randomised: bool = False  #: K classes: the Frank-Wolfe mixture instead of the deterministic rule


@dataclass(frozen=True)
class TrainOutputs:
    """What ``calopt train`` writes and how it shows the run: the model, the checkpoints, the
    figure; JSON or tables; the progress bar."""

    model_out: Path | None
    checkpoint: Path | None
    checkpoint_every: int | None
    resume: Path | None
    plot: Path | None
    as_json: bool
    no_progress: bool


@dataclass(frozen=True)
class _Checked:
    """A train run's options once checked, before anything is read: the parsed constraints and the
    outputs it may write (``no_checkpoint``: why no checkpoint is written, when none is)."""

    constraints: tuple[RateConstraint, ...]
    model: Output | None
    checkpoint: Output | None
    no_checkpoint: str


@dataclass(frozen=True)
class _Rows:
    """What a train run trains and tests on: ``name`` names the training data in messages;
    ``train_set`` is None when the Dask workers read the file themselves, and ``cluster`` is
    then what they read, ``(X, labels, read_options)`` (:func:`calopt_cli.cluster.cluster_input`)."""

    name: str
    train_set: Dataset | None
    test_set: Dataset | None
    cluster: tuple[Any, Any, dict[str, Any]] | None


def _check(read: TrainData, settings: TrainSettings, outputs: TrainOutputs) -> _Checked:
    """Everything refused before any data are read or anything written: the constraint specs,
    --constraint with --dask, the --resume file, stdin named twice, the --plot format and
    every output path (:func:`calopt_cli.checkpoints.checked_outputs`)."""
    constraints = parse_constraints(settings.constraint)  # bad specs fail before anything is read or written
    if constraints and settings.dask is not None:
        raise ParameterError("--constraint with --dask: a cluster run does not train under rate constraints")
    resume = outputs.resume
    if resume is not None and not resume.is_file():
        raise ParameterError(f"--resume {resume}: " + ("is a directory, not a checkpoint file" if resume.is_dir()
                                                       else "no such checkpoint file" if not resume.exists()
                                                       else "not a regular file (a checkpoint is an .npz file)"))
    check_stdin_once({"DATA": read.data, "--test": read.test})
    if outputs.plot is not None:
        plotting.check_plot_path(outputs.plot)  # before training
    model, checkpoint, no_checkpoint = checked_outputs(outputs.model_out, outputs.checkpoint, resume,
                                                       outputs.checkpoint_every, [read.source, read.test, resume],
                                                       outputs.plot)
    return _Checked(constraints, model, checkpoint, no_checkpoint)


def _streamed(read: TrainData, settings: TrainSettings) -> bool:
    """Whether the run streams: as --stream/--no-stream says, else as DATA calls for (the
    embedded a9a only when --stream asks)."""
    return streams(read.source, settings.stream) if read.data is not None else bool(settings.stream)


def _train_streamed(read: TrainData, settings: TrainSettings, outputs: TrainOutputs, checked: _Checked) -> None:
    """The out-of-core route (:func:`calopt_cli.stream.train_stream`), which refuses the options
    a stream does not take."""
    train_stream(read.source, read.csv, test=read.test, model_output=checked.model, as_json=outputs.as_json,
                 no_progress=outputs.no_progress,
                 options=dict(measure=settings.measure, algorithm=settings.algorithm or None,
                              loss=settings.loss or None, epochs=settings.epochs, batch_size=settings.batch_size,
                              seed=settings.seed or 0, positive=settings.positive, select=settings.select),
                 refused={"--backend": settings.backend != "numpy", "--dtype": settings.dtype,
                          "--device": settings.device, "--checkpoint": outputs.checkpoint,
                          "--checkpoint-every": outputs.checkpoint_every, "--resume": outputs.resume,
                          "--plot": outputs.plot, "--dask": settings.dask, "--constraint": checked.constraints,
                          "--randomised": settings.randomised})


def _load(read: TrainData, settings: TrainSettings) -> _Rows:
    """The training rows (with --dask, what the workers read) and the test rows read before
    training: --test (with --dask, read after training instead), else an embedded dataset's
    test split."""
    source, csv = read.source, read.csv
    cluster = None
    if settings.dask is not None:  # the workers read the training file; the test file is read after training
        *cluster, train_set = cluster_input(source, csv, settings.backend, settings.device)
    else:  # --no-stream reads a directory of arrays or a Parquet file whole
        train_set = read_whole_source(source, csv) or load_dataset(source, csv)
    test_set = None
    if read.test is not None and settings.dask is None:
        test_set = load_dataset(read.test, csv, split="test", like=reading(train_set),
                                of=f"the training data ({train_set.source})")
    elif read.test is None and (read.data is None or embedded(source)):
        test_set = datasets.load(source, "test")
    name = source if train_set is None else train_set.source
    return _Rows(name, train_set, test_set, tuple(cluster) if cluster is not None else None)


def _fit(rows: _Rows, settings: TrainSettings, outputs: TrainOutputs, checked: _Checked) -> Any:
    """The model, trained in this process (:func:`calopt.fit`) or on the Dask cluster, with the
    progress bar, checkpoints and Ctrl-C handling (:func:`calopt_cli.checkpoints.interruptible`);
    a data error names the file its labels came from."""
    sources = {"training labels": f"{rows.name} labels"}
    if rows.test_set is not None:
        sources["evaluation labels"] = f"{rows.test_set.source} labels"
    common = dict(measure=settings.measure, algorithm=settings.algorithm or None, loss=settings.loss or None,
                  dtype=settings.dtype, epochs=settings.epochs, select=settings.select,
                  batch_size=settings.batch_size, seed=0 if settings.seed is None else settings.seed,
                  positive=settings.positive, checkpoint_every=outputs.checkpoint_every, resume=outputs.resume,
                  checkpoint=checked.checkpoint.path if checked.checkpoint is not None else None)
    try:
        with interruptible(checked.checkpoint, checked.no_checkpoint) as stop, dask_client(settings.dask) as client, \
                epoch_progress(None, enabled=not (outputs.as_json or outputs.no_progress)) as on_epoch:
            if client is not None:
                X, y, read_options = rows.cluster
                return calopt.fit(X, y, cluster=client, read_options=read_options, callback=on_epoch,
                                  interrupt=stop.is_set, randomised=settings.randomised, **common)
            test_set = rows.test_set
            return calopt.fit(rows.train_set.X, rows.train_set.labels, backend=settings.backend,
                              device=settings.device, patience=settings.patience, max_epochs=settings.max_epochs,
                              callback=on_epoch, interrupt=stop.is_set, constraints=checked.constraints or None,
                              randomised=settings.randomised,
                              eval_set=(test_set.X, test_set.labels) if test_set is not None else None, **common)
    except DataError as exc:
        raise exc.renamed(sources) from None


def _warn(model: Any, report: RunReport) -> None:
    """One ``calopt: warning:`` line each: a diverged run (exit code 3 after the results), rate
    constraints no threshold met on the held-out rows, and each constraint the model misses."""
    if model.status < 0:  # reported, and the exit code says so after the results
        typer.echo(f"calopt: warning: {model.message}; exit code 3", err=True)
    constrained = report.constraints
    selection = report.selection or {}
    if constrained and selection.get("value", 0.0) < 0:  # no threshold feasible on the held-out rows
        typer.echo(f"calopt: warning: {held_out_unmet_message(constrained, selection['rule'])}", err=True)
    for entry in constrained:
        if not entry["satisfied"]:
            typer.echo(f"calopt: warning: {unmet_message(entry)}", err=True)
    decision = getattr(model.fit_report, "decision", None)
    for entry in (decision.constraints or ()) if decision is not None else ():
        if not entry["satisfied"]:
            typer.echo(f"calopt: warning: constraint {entry['constraint']!r} is not met on the out-of-fold "
                       f"probabilities ({entry['value']:.4f}): no rule of per-class weights reached it there; "
                       f"the rule is the closest to it", err=True)


def decision_text(decision: Any) -> str:
    """One line on a multiclass model's rule: where it was chosen, its held-out value against the argmax's."""
    kind = "randomised rule (Frank-Wolfe mixture)" if decision.rule == "randomised" else "decision rule (gain matrix)"
    rows = f" of a class-weighted sample of {decision.rows:,} rows" if decision.rows else ""
    text = (f"{kind} for {decision.measure}, chosen on {decision.folds}-fold out-of-fold probabilities{rows}: "
            f"held-out {decision.held_out:.4f} against the argmax's {decision.argmax:.4f}")
    if decision.constraints:  # per-class constraints: each one there, at the rule and at the argmax
        text += "; " + "; ".join(
            f"{entry['constraint']}: {entry['value']:.4f} ({'met' if entry['satisfied'] else 'NOT met'}; the argmax's "
            f"{entry['argmax']:.4f})" for entry in decision.constraints)
    else:
        text += f" (Frank-Wolfe gap {decision.gap:.2g})"
    if decision.C_log_loss:
        losses = ", ".join(f"C={entry['C']:g} {entry['log_loss']:.4f}" for entry in decision.C_log_loss)
        text += f"; C = {decision.C:g}, chosen by the out-of-fold log loss ({losses})"
    elif decision.C_kept is not None and decision.C_kept != "given":
        text += f"; C = {decision.C:g} kept: {decision.C_kept}"
    return text


def run_train(read: TrainData, settings: TrainSettings, outputs: TrainOutputs) -> None:
    """``calopt train``: check, route, load, fit; then write the model (the checkpoint a
    finished run created is deleted), warn, draw --plot and show the results."""
    checked = _check(read, settings, outputs)
    if _streamed(read, settings):  # out of core: calopt_cli.stream
        return _train_streamed(read, settings, outputs, checked)
    rows = _load(read, settings)
    model = _fit(rows, settings, outputs, checked)
    if rows.train_set is not None:
        record_reading(model, reading(rows.train_set))
    report = run_report(model)
    test_set = rows.test_set
    if read.test is not None and settings.dask is not None:
        test_set = load_dataset(read.test, read.csv, split="test", like=report.data,
                                of=f"the training data ({read.source})")
    if checked.model is not None:
        model.save(checked.model.path)
    remove_finished_checkpoint(checked.checkpoint)
    _warn(model, report)
    summaries = [(rows.name, report.cluster["train"] if settings.dask is not None  # measured by the workers
                  else model.summary(rows.train_set.X, rows.train_set.labels))]
    if test_set is not None:
        summaries.append((test_set.source, model.summary(test_set.X, test_set.labels)))
    if outputs.plot is not None:  # the run's history, drawn as calopt compare draws its methods
        plotting.save_figure(plotting.history_figure(
            model, [(s.source, s.X, s.labels) for s in (rows.train_set, test_set) if s is not None]), outputs.plot)
    if outputs.as_json:
        _echo_train(model, report, summaries, outputs, constrained=bool(checked.constraints))
    else:
        _print_train(model, report, summaries, outputs)
    if model.status < 0:
        raise typer.Exit(3)


def _echo_train(model: Any, report: RunReport, summaries: list[tuple[str, dict[str, Any]]],
                outputs: TrainOutputs, *, constrained: bool) -> None:
    """``calopt train --json``: the run, the training and test summaries, the history."""
    echo_json({
        "task": "multiclass" if "per_class" in summaries[0][1] else "binary",
        "classes": [label_text(c) for c in model.classes],
        "positive": positive_text(model),
        **run_fields(model),
        **({"rank": report.rank} if report.rank else {}),
        "train": summaries[0][1],
        "test": summaries[1][1] if len(summaries) > 1 else None,
        **({"constraints": report.constraints, "threshold_rule": report.threshold_rule} if constrained else {}),
        "history": model.history,
        "status": model.message,
        "model": str(outputs.model_out) if outputs.model_out is not None else None,
        "plot": str(outputs.plot) if outputs.plot is not None else None,
    })


def _print_train(model: Any, report: RunReport, summaries: list[tuple[str, dict[str, Any]]],
                 outputs: TrainOutputs) -> None:
    """``calopt train``'s tables: the summaries (the run in the caption), the settings chosen,
    the constraints, the measure per class; then where the model and figure were written."""
    console = Console()
    positive_class = f" · positive class {positive_text(model)}" if model.positive is not None else ""
    title = model.describe() + positive_class + (f" (diverged: {model.message})" if model.status < 0 else "")
    table = summary_table(escape(title), summaries, model.measure)
    rank = f", rank {report.rank}" if report.rank else ""
    cluster = report.cluster
    passes = epochs_text(report.epochs) if not cluster else \
        f"{epochs_text(report.epochs, 'round')} on {cluster['workers']} Dask workers ({cluster['mode']})"
    dtype = "" if report.dtype == "float64" else f" {report.dtype}"  # float32: the GPU's, or text's by default
    table.caption = escape(f"{report.backend}{dtype}, {passes}{rank}, fit in {model.fit_seconds:.2f} s")
    console.print(table)
    chosen = selection_text(report.selection, model.measure)
    if chosen:
        console.print(chosen)
    if report.subsample:
        console.print(subsample_text(report.subsample, model.measure))
    if report.constraints:
        console.print(constraints_table(report.constraints))
    if "per_class" in summaries[0][1]:
        decision = report.decision
        if decision is not None and decision.rule != "argmax":
            console.print(escape(decision_text(decision)), highlight=False)
        console.print(per_class_table(f"{model.measure} per class (one-vs-rest)",
                                      [(name, summary["per_class"]) for name, summary in summaries]))
        console.print(class_rates_table(summaries))
    if outputs.model_out is not None:
        console.print(f"model written to {outputs.model_out}")
    if outputs.plot is not None:
        console.print(f"figure written to {outputs.plot}")


def train(
    data: DataArg = None,
    test: TestOpt = None,
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
    batch_size: BatchSizeOpt = None,
    seed: SeedOpt = 0,
    positive: PositiveOpt = None,
    label_column: LabelColumnOpt = "-1",
    delimiter: DelimiterOpt = None,
    header: HeaderOpt = None,
    model_out: Annotated[
        Optional[Path], typer.Option("--model-out", "-o", metavar="FILE", help="Write the trained model here (.npz).")
    ] = None,
    as_json: JsonOpt = False,
    no_progress: NoProgressOpt = False,
    checkpoint: CheckpointOpt = None,
    checkpoint_every: CheckpointEveryOpt = None,
    resume: ResumeOpt = None,
    plot: PlotOpt = None,
    dask: DaskOpt = None,
    stream: StreamOpt = None,
    randomised: Annotated[bool, typer.Option(
        "--randomised", help="Three or more classes: predict by the randomised Frank-Wolfe mixture of decision "
        "rules (each row draws one, seeded) instead of the deterministic rule.")] = False,
) -> None:
    """Train a linear classifier that maximises a performance measure.

    Two classes train a binary classifier, by default with lbfgs (the plug-in route:
    logistic regression, then the threshold best for the measure); more train a
    multiclass model (by default multinomial, all classes at once, then the decision rule
    that maximises the measure over the K classes, chosen on out-of-fold probabilities:
    -m gmean is the G-mean of the per-class recalls, -m f1 the macro F1, -m accuracy keeps
    the argmax; another --algorithm trains one class against the rest at a time and
    predicts the argmax), reported by the measure, per-class recall and precision, and
    top-1 and top-5 accuracy; -c "recall[CLASS]>=B" (or precision) bounds one class's rate. With --stream or --dask the algorithm is the measure's own
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
    run_train(
        TrainData(data, test, CsvOptions(label_column, delimiter, header)),
        TrainSettings(measure=measure, constraint=constraint, algorithm=algorithm, loss=loss, backend=backend,
                      dtype=dtype, device=device, epochs=epochs, select=select, patience=patience,
                      max_epochs=max_epochs, batch_size=batch_size, seed=seed, positive=positive, dask=dask,
                      stream=stream, randomised=randomised),
        TrainOutputs(model_out=model_out, checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                     plot=plot, as_json=as_json, no_progress=no_progress),
    )


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

    Multiclass models report each measure's K-class value (G-mean of the per-class recalls,
    macro F1, ...; a measure without one: the macro average of its one-vs-rest values) of
    their predictions (by the decision rule chosen for their measure, if any), each measure
    per class (one-vs-rest), each class's recall and precision, and top-1 and top-5
    accuracy of their scores.
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
    accuracy = [f"{HEADERS[key]} {report[key]:.4f}" for key in ("top1", "top5")
                if key in report and not trivial_top5(key, report)]
    if accuracy:  # a line of its own: a long title would wrap inside the narrow table
        console.print(f"{title}: {', '.join(accuracy)}", highlight=False, markup=False)
    keys = [key for key in ("value", "tpr", "tnr") if key in report["measures"][0]]
    table = Table(title=None if accuracy else title)
    table.add_column("measure")
    for key in keys:
        table.add_column(HEADERS[key], justify="right")
    for entry in report["measures"]:
        table.add_row(entry["measure"], *(f"{entry[key]:.4f}" for key in keys))
    console.print(table)
    if "per_class" in report["measures"][0]:
        console.print(per_class_table("per class (one-vs-rest)",
                                       [(entry["measure"], entry["per_class"]) for entry in report["measures"]]))
        console.print(class_rates_table([(dataset.source, report)]))


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

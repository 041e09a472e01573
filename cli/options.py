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
from calopt.training.plan import MAX_SEED
from calopt_cli.report import run_report

__all__ = [
    "AlgorithmOpt",
    "BackendOpt",
    "DeviceOpt",
    "DtypeOpt",
    "EpochsOpt",
    "JsonOpt",
    "LossOpt",
    "MAX_SEED",
    "MaxEpochsOpt",
    "MeasureOpt",
    "PatienceOpt",
    "PlotOpt",
    "PositiveOpt",
    "SeedOpt",
    "SelectOpt",
    "echo_json",
    "epochs_text",
    "selection_text",
    "subsample_text",
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

ConstraintOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--constraint",
        "-c",
        metavar="SPEC",
        show_default=False,
        help="A rate constraint, repeatable: RATE>=BOUND or RATE<=BOUND over tpr (recall), tnr, fpr, fnr, "
        "precision, predicted-positive-rate, accuracy ('precision>=0.9', 'fpr<=0.01'). The measure is "
        "maximised subject to them; the threshold is the best feasible one on held-out rows, carried to the "
        "final model by its positive share (among thresholds feasible on the training rows too). "
        "-a constrained trains by the Lagrangian primal-dual solver, the default by the plug-in route. "
        "On three or more classes name the class: 'recall[fraud]>=0.8' or 'precision[CLASS]<=B' bounds that "
        "class's rate for the decision rule.",
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
        help="Training algorithm as a spec (lbfgs:C=10, spade, stamp:step=10, ...), or auto: the measure's own "
        "solver and the plug-in route (lbfgs) on the same held-out rows, keeping the better. Default: lbfgs "
        "for two classes (the plug-in route: logistic regression, then the threshold best for the measure), "
        "multinomial for more; with --stream or --dask, the measure's own solver (concave: spade, "
        "pseudo-linear: stamp). See [bold]calopt list-algorithms[/bold].",
        autocompletion=_completer("algorithm"),
    ),
]

EpochsOpt = Annotated[
    Optional[int],
    typer.Option("--epochs", "-e", min=1, metavar="N", show_default=False,
                 help="Passes over the training data. Default: until the held-out measure has not improved "
                 "for --patience passes, at most --max-epochs (10 with --select none)."),
]

SelectOpt = Annotated[
    str,
    typer.Option("--select", metavar="RULE",
                 help="How the settings (step, regularisation, passes, threshold) are chosen on rows the "
                 "weights do not see: cv:K (K-fold cross-fitting), holdout:F (one stratified split) or none "
                 "(the algorithm's own one-pass trial). auto: cv:5 below 20,000 rows or below 500 rows in the "
                 "smaller class, else holdout:0.2."),
]

PatienceOpt = Annotated[
    int,
    typer.Option("--patience", min=1, metavar="N",
                 help="Stop when no candidate setting improved on the held-out rows for N passes."),
]

MaxEpochsOpt = Annotated[
    int,
    typer.Option("--max-epochs", min=1, metavar="N", help="The most passes a run with chosen passes makes."),
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
        help="Working floating-point dtype: float64 or float32 (default: float64; float32 on the GPU and "
             "for sparse text trained by the default selection).",
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
        max=MAX_SEED,
        help="Random seed, a whole number from 0 to 2³²−1 (shuffling, initialisation); the same seed gives "
        "the same run.",
        show_default=False,
    ),
]

DaskOpt = Annotated[
    Optional[str],
    typer.Option(
        "--dask",
        metavar="local|ADDRESS",
        help="Train on a Dask cluster, each worker reading its own rows of DATA: 'local' starts one on this "
        "machine, else the scheduler's address (needs calopt[dask]; gd: exact rounds, spade/stamp/sgd: "
        "local rounds, one per pass).",
        show_default=False,
    ),
]

PositiveOpt = Annotated[
    Optional[str],
    typer.Option(
        "--positive",
        metavar="LABEL",
        help="Label of the positive class, as written in the label file (default: 1 for labels 0/1 and -1/1, "
        "true for booleans, otherwise the smaller class, the rare one; classes of equal size need it).",
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
    report = run_report(model)
    return {key: getattr(model, key) for key in ("measure", "algorithm", "loss")} | {
        "backend": report.backend, "dtype": report.dtype, "fit_seconds": model.fit_seconds,
        "epochs": report.epochs, "batch_size": report.batch_size} | (
        {"selection": report.selection} if report.selection else {}) | (
        {"decision": report.decision.to_json()} if report.decision is not None else {}) | (
        {"subsample": report.subsample} if report.subsample else {})


def epochs_text(epochs: int, unit: str = "epoch") -> str:
    """``1 epoch``, ``10 epochs`` (or rounds): for table captions."""
    return f"{epochs} {unit}{'' if epochs == 1 else 's'}"


def selection_text(selection: dict[str, Any] | None, measure: str) -> str | None:
    """What a run's settings selection chose, in a sentence (None without one)."""
    if not selection:
        return None
    measure = selection.get("measure", measure)  # a constrained run names its objective and constraints
    value = (f"{selection['value']:.4f}" if selection["value"] >= 0 or " subject to " not in measure else
             "not reached: no threshold met the constraints there")
    text = (f"chosen by {selection['rule']}: {selection['algorithm']} at {epochs_text(selection['epochs'])} "
            f"of {selection['epochs_run']}, held-out {measure} {value}")
    if selection.get("compared"):
        text += "; compared " + ", ".join(f"{c['algorithm']} {c['value']:.4f}" for c in selection["compared"])
    transfer = selection.get("threshold_transfer")
    if transfer:
        kept, reason = selection.get("threshold_kept"), selection.get("threshold_reason")
        if kept is None:  # a model file from before the two fields: "RULE … (REASON[: more])"
            kept = "out-of-fold positive share" if transfer.startswith("out-of-fold positive share") else \
                "out-of-fold threshold"
            reason = transfer.partition("(")[2].rstrip(")").partition(":")[0]
        said = ("the out-of-fold positive share kept, cut without the training rows' own terms"
                if kept == "out-of-fold positive share" else "the out-of-fold threshold kept")
        text += f"; {said} ({reason})" if reason else f"; {transfer}"
    return text


def subsample_text(subsample: dict[str, Any], measure: str) -> str:
    """How a large run used its rows (calopt.training.sampling), in a sentence."""
    weighted = subsample.get("weighted", False)  # a rare class: a case-control sample
    drawn = subsample.get("drawn", "case-control" if weighted else "stratified")  # a stream's: uniform
    text = f"trained on a {drawn} sample of {subsample['rows']:,} of {subsample['of']:,} rows"
    if weighted:
        text += (f" ({subsample['smaller_class_rows']:,} of the smaller class; the rows weighted back to "
                 f"the data's class shares)")
    if "value" in subsample:
        text += (f"; threshold: the best cut on the other {subsample['cut_rows']:,} rows "
                 f"{'(weighted likewise) ' if weighted else ''}({measure} {subsample['value']:.4f} there)")
    return text

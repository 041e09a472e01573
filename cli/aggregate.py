"""``calopt aggregate``: combine trained models by mirror descent with averaging (paper 001).

The command gathers its options into one frozen :class:`AggregateOptions` and hands it to
:func:`run_aggregate`: check the options and the output, load the models and the data,
aggregate, write the model, show the mixture against each model alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from calopt.training.aggregate import RADIUS, load_models
from calopt.training.aggregate import aggregate as aggregate_models
from calopt.errors import DataError, ParameterError
from calopt.io.files import Dataset
from calopt.io.labels import encode_like
from calopt.training.selection import parse_rule
from calopt_cli.outputs import Output, check_outputs, check_stdin_once
from calopt_cli.options import JsonOpt, MeasureOpt, SeedOpt, echo_json, epochs_text
from calopt_cli.report import RunReport, record_reading, run_report
from calopt_cli.reading import CsvOptions, DelimiterOpt, HeaderOpt, LabelColumnOpt, load_dataset, model_reading

__all__ = ["AggregateOptions", "aggregate", "run_aggregate"]


@dataclass(frozen=True)
class AggregateOptions:
    """``calopt aggregate``'s options as given: the models, the data, how to aggregate, the output."""

    models: list[Path]
    data: str
    model_out: Path
    radius: float  #: --lambda
    measure: str  #: "": the models' own
    test: str | None
    epochs: int
    weighting: str
    select: str
    seed: int | None
    csv: CsvOptions
    as_json: bool


def _common_reading(named: dict[str, Any]) -> dict[str, Any]:
    """How the models' training data were read; models read with different index bases, or
    whose features are named differently, are not combined (their coefficients would mean
    different features)."""
    readings = {name: model_reading(model) for name, model in named.items()}
    (first, like), *others = readings.items()
    for name, other in others:
        if None not in (like.get("zero_based"), other.get("zero_based")) and like["zero_based"] != other["zero_based"]:
            bases = {True: "zero-based", False: "one-based"}
            raise ParameterError(f"{first} was trained on {bases[like['zero_based']]} data, {name} on "
                                 f"{bases[other['zero_based']]}: their features differ")
        names = (like.get("feature_names"), other.get("feature_names"))
        if None not in names and names[0] != names[1]:
            raise ParameterError(f"{first} and {name} were trained on features named differently, or in another "
                                 f"order: their coefficients cannot be combined")
    return like


def _check(options: AggregateOptions) -> Output:
    """Everything refused before any file is read: --lambda, --epochs, the --select rule, stdin
    named twice; the checked --model-out."""
    if not (math.isfinite(options.radius) and options.radius > 0):
        raise ParameterError(f"--lambda must be a finite number > 0, got {options.radius}")
    if options.epochs < 1:
        raise ParameterError(f"--epochs must be ≥ 1, got {options.epochs}")
    parse_rule(options.select)  # a bad rule is refused before any file is read
    check_stdin_once({"--data": options.data, "--test": options.test})
    outputs = check_outputs({"--model-out": options.model_out}, [*options.models, options.data, options.test])
    return outputs["--model-out"]


def _load(options: AggregateOptions, named: dict[str, Any], like: dict[str, Any]) -> tuple[Dataset, Dataset | None]:
    """The aggregation data and the --test rows, read as the models' training data were; test
    labels the models cannot score are refused before the work, not after it."""
    data_set = load_dataset(options.data, options.csv, like=like, of="each model")
    test_set = None
    if options.test is not None:
        test_set = load_dataset(options.test, options.csv, split="test", like=like, of="each model")
        # before the work, not after it: labels the models cannot score
        encode_like(test_set.labels, next(iter(named.values())).classes, source=f"{test_set.source} labels")
    return data_set, test_set


def _fit(options: AggregateOptions, named: dict[str, Any], data_set: Dataset) -> Any:
    """The aggregate model (:func:`calopt.training.aggregate.aggregate`); a data error names the
    aggregation data's file."""
    try:
        return aggregate_models(named, data_set.X, data_set.labels, radius=options.radius,
                                measure=options.measure or None, epochs=options.epochs,
                                seed=options.seed if options.seed is not None else 0, weighting=options.weighting,
                                select=options.select)
    except DataError as exc:  # about the aggregation data: name the file
        if exc.source is None:
            raise DataError(exc.detail, source=data_set.source) from None
        raise exc.renamed({"aggregation labels": f"{data_set.source} labels"}) from None


def run_aggregate(options: AggregateOptions) -> None:
    """``calopt aggregate``: check, load, aggregate, score each model and the mixture on the
    data (and --test), write the model (last: a failed run leaves none), show the result."""
    output = _check(options)
    named = load_models(options.models)
    like = _common_reading(named)
    data_set, test_set = _load(options, named, like)
    model = _fit(options, named, data_set)
    sets = [data_set] + ([test_set] if test_set is not None else [])
    report = run_report(model)
    details = report.aggregate
    rows = [(name, theta, base) for name, theta, base in zip(named, details["theta"], named.values())]
    rows.append(("aggregate", sum(details["theta"]), model))
    values = [[base.score(s.X, s.labels, model.measure) for s in sets] for _, _, base in rows]
    record_reading(model, like)
    model.save(output.path)  # last: a run that fails (on --test, say) leaves no model behind
    if options.as_json:
        _echo_aggregate(options, model, report, rows, values, sets)
    else:
        _print_aggregate(options, model, report, rows, values, sets)


def _echo_aggregate(options: AggregateOptions, model: Any, report: RunReport, rows: list[tuple[str, float, Any]],
                    values: list[list[float]], sets: list[Dataset]) -> None:
    """``calopt aggregate --json``: each model's weight, scale and values, the mixture's, the history."""
    details = report.aggregate
    echo_json({
        "measure": model.measure,
        "lambda": options.radius,
        "class_weights": dict(zip(("negative", "positive"), details["class_weights"])),
        "chosen": details["chosen"],
        "select": details["select"],
        "models": [
            {"model": name, "theta": theta, "scale": scale,
             **{key: value for key, value in zip(("data", "test"), row)}}
            for (name, theta, _), scale, row in zip(rows, details["scales"], values)
        ],
        "aggregate": dict(zip(("data", "test"), values[-1])),
        "data": sets[0].source,
        "test": sets[1].source if len(sets) > 1 else None,
        "history": model.history,
        "model": str(options.model_out),
    })


def _print_aggregate(options: AggregateOptions, model: Any, report: RunReport, rows: list[tuple[str, float, Any]],
                     values: list[list[float]], sets: list[Dataset]) -> None:
    """``calopt aggregate``'s table (each model's θ and values, then the mixture's), the loss
    weighting, what the held-out check chose, where the model was written."""
    details = report.aggregate
    table = Table(title=f"{model.measure} · aggregate of {len(rows) - 1} models, λ = {options.radius:g}")
    table.add_column("model")
    table.add_column("θ", justify="right")
    for s in sets:
        table.add_column(s.source, justify="right")
    for (name, theta, _), row in zip(rows, values):
        table.add_row(name, f"{theta:.4g}", *(f"{value:.4f}" for value in row))
    negative, positive = details["class_weights"]
    weighting = (f"loss weights for {model.measure}: positives {positive:.3g}, negatives {negative:.3g}"
                 if details["weighting"] == "measure" else "unweighted loss")
    table.caption = f"{epochs_text(report.epochs)}, fit in {model.fit_seconds:.2f} s"
    console = Console()
    console.print(table)
    console.print(weighting)
    if details["select"] is not None:
        held_out = ", ".join(f"{c['candidate']} {c['value']:.4f}" for c in details["select"]["candidates"])
        console.print(f"chosen on held-out rows ({details['select']['rule']}): {details['chosen']} ({held_out})")
    console.print(f"model written to {options.model_out}")


def aggregate(
    models: Annotated[
        list[Path], typer.Argument(metavar="MODEL...", help="Model files written by calopt train (two or more).")
    ],
    data: Annotated[
        str,
        typer.Option("--data", metavar="FILE",
                     help="Aggregation data: a data file or an embedded dataset name (its train split)."),
    ],
    model_out: Annotated[
        Path, typer.Option("--model-out", "-o", metavar="FILE", help="Write the aggregate model here (.npz).")
    ],
    radius: Annotated[
        float,
        typer.Option("--lambda", metavar="NUMBER",
                     help="λ, the total weight Σθ = λ of the models (the ℓ1 radius). Each model is scaled "
                     "to its best logistic fit on DATA, so λ = 1 mixes them as they "
                     "are and a larger λ makes the mixture more confident."),
    ] = RADIUS,
    measure: MeasureOpt = "",
    test: Annotated[
        Optional[str],
        typer.Option("--test", metavar="FILE",
                     help="Test data, scored after aggregating (an embedded name: its test split)."),
    ] = None,
    epochs: Annotated[int, typer.Option("--epochs", "-e", metavar="N", help="Passes over the aggregation data.")] = 10,
    weighting: Annotated[
        str,
        typer.Option("--weighting", metavar="NAME",
                     help="'measure': weigh the loss per class by the measure's gradient at the best model "
                     "on DATA; 'none': the plain logistic loss."),
    ] = "measure",
    select: Annotated[
        str,
        typer.Option("--select", metavar="RULE",
                     help="How the mixture is checked against each model alone, on rows θ did not see: cv:K "
                     "(K-fold cross-fitting), holdout:F (one stratified split) or none (always the mixture). "
                     "auto: cv:5 below 500 rows in the smaller class, else holdout:0.2. The better one on "
                     "those rows is refitted on all of DATA."),
    ] = "auto",
    seed: SeedOpt = 0,
    label_column: LabelColumnOpt = "-1",
    delimiter: DelimiterOpt = None,
    header: HeaderOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Combine trained models into one, Σθᵢ·hᵢ(x) with θ ≥ 0 and Σθ = λ (mirror descent, paper 001).

    Each model's scores are scaled to their best logistic fit on DATA; the weights
    minimise the logistic loss, each class weighted by the measure's gradient at the
    best of the models, by mirror descent with averaging, and the
    threshold is tuned for the measure (default: the models' own) on DATA. The mixture
    is then compared with each model alone on rows its weights did not see (--select),
    and the better is refitted on all of DATA. The result is an ordinary linear model
    for evaluate and predict.

    Example: [bold]calopt aggregate f1-stamp.npz f1-plugin.npz --data a9a -o f1-agg.npz[/bold]
    """
    run_aggregate(AggregateOptions(models=models, data=data, model_out=model_out, radius=radius, measure=measure,
                                   test=test, epochs=epochs, weighting=weighting, select=select, seed=seed,
                                   csv=CsvOptions(label_column, delimiter, header), as_json=as_json))

"""``calopt compare``: calopt's solvers against scikit-learn's routes on one split (:mod:`calopt.reporting.comparison`).

The command gathers its options into one frozen :class:`CompareOptions` and hands it to
:func:`run_compare`: check, split, run every method, draw --plot, show the table or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from calopt.reporting import plotting
from calopt.constraints import RateConstraint, parse_constraints
from calopt.errors import ParameterError
from calopt.io import datasets
from calopt.io.files import Dataset, train_test_split
from calopt.io.labels import label_text
from calopt_cli.options import MAX_SEED, ConstraintOpt, JsonOpt, MeasureOpt, PlotOpt, PositiveOpt, echo_json
from calopt_cli.outputs import check_outputs, check_stdin_once
from calopt_cli.reading import CsvOptions, DelimiterOpt, HeaderOpt, LabelColumnOpt, embedded, load_dataset, reading
from calopt_cli.render import WITHIN_ERROR_NOTE, constraint_mark

__all__ = ["CompareOptions", "compare", "run_compare"]

#: Share of the rows held out for testing when DATA is a file and --test is not given.
TEST_SIZE = 0.3


@dataclass(frozen=True)
class CompareOptions:
    """``calopt compare``'s options as given: the data, what to compare, the figure, JSON or a table."""

    data: str
    test: str | None
    measure: str
    constraint: list[str] | None
    algorithm: list[str] | None  #: None: the measure's own solver and lbfgs
    epochs: int | None
    seed: int
    positive: str | None
    csv: CsvOptions
    plot: Path | None
    as_json: bool


def _split(options: CompareOptions) -> tuple[Dataset, Dataset]:
    """The training and test rows: --test read like DATA, else an embedded dataset's test
    split, else :data:`TEST_SIZE` of DATA held out, stratified."""
    train_set = load_dataset(options.data, options.csv)
    if options.test is not None:
        test_set = load_dataset(options.test, options.csv, split="test", like=reading(train_set),
                                of=f"the training data ({train_set.source})")
    elif embedded(options.data):
        test_set = datasets.load(options.data, "test")
    else:
        train_set, test_set = train_test_split(train_set, TEST_SIZE, seed=options.seed)
    return train_set, test_set


def run_compare(options: CompareOptions) -> None:
    """``calopt compare``: check (the constraint specs, stdin, --plot) before anything is read,
    split, run the methods (a warning line each), draw --plot, show the result."""
    constraints = parse_constraints(options.constraint)  # a bad spec fails before anything is read
    check_stdin_once({"DATA": options.data, "--test": options.test})
    plot = options.plot
    if plot is not None:
        plotting.check_plot_path(plot)  # before any work: the format, then the path
        check_outputs({"--plot": plot}, [options.data, options.test])
    train_set, test_set = _split(options)
    if plot is not None and len(set(train_set.labels.tolist())) > 2:
        raise ParameterError("--plot draws two-class operating points (TPR, TNR); the training labels have "
                             f"{len(set(train_set.labels.tolist()))} classes")
    from calopt.reporting.comparison import compare as run_comparison  # scikit-learn: imported when compare runs

    result = run_comparison(train_set.X, train_set.labels, test_set.X, test_set.labels, measure=options.measure,
                            algorithms=options.algorithm or None, epochs=options.epochs, seed=options.seed,
                            positive=options.positive, constraints=constraints or None)
    for run in result.runs:
        for warning in run.warnings:
            typer.echo(f"calopt: warning: {run.method}: {warning}", err=True)
    if plot is not None:
        plotting.save_figure(plotting.comparison_figure(result, data=train_set.source, test=test_set.source), plot)
    if options.as_json:
        echo_json({"data": train_set.source, "test": test_set.source, **result.as_dict(),
                   "plot": str(plot) if plot is not None else None})
        return
    _print_comparison(result, constraints, train_set, test_set, plot)


def _print_comparison(result: Any, constraints: tuple[RateConstraint, ...], train_set: Dataset, test_set: Dataset,
                      plot: Path | None) -> None:
    """``calopt compare``'s table: each method's test value, TPR, TNR, constraints, seconds and
    passes; the split and the positive label in the caption."""
    table = Table(title=escape(f"{result.measure} on {test_set.source}"))  # a name may hold [brackets]
    table.add_column("method")
    binary = result.positive is not None
    for header in (f"test {result.measure}", *(("TPR", "TNR") if binary else ()), *(c.spec for c in constraints),
                   "fit s", "passes"):
        table.add_column(escape(header), justify="right")
    for run in result.runs:
        held = [f"{entry['test']:.4f} {constraint_mark(entry['satisfied'], entry['within_error'])}"
                for entry in run.constraints]
        rates = (f"{run.tpr:.4f}", f"{run.tnr:.4f}") if binary else ()
        table.add_row(escape(run.method), f"{run.value:.4f}", *rates, *held, f"{run.seconds:.2f}", f"{run.passes:g}")
    within = any(not e["satisfied"] and e["within_error"] for run in result.runs for e in run.constraints)
    if not binary:
        caption = (f"trained on {train_set.source} ({result.n_train:,} rows), tested on {result.n_test:,} rows; "
                   f"the measure over every class" + (", each class's constraint its class against the rest"
                                                      if constraints else ""))
    else:
        caption = (f"trained on {train_set.source} ({result.n_train:,} rows), tested on {result.n_test:,} rows; "
                   f"positive label {label_text(result.positive)} ({result.test_positive_rate:.1%} of the test rows)")
    table.caption = escape(caption + (f"\n{WITHIN_ERROR_NOTE}" if within else ""))
    console = Console()
    console.print(table)
    if plot is not None:
        console.print(f"figure written to {plot}", markup=False, highlight=False)


def compare(
    data: Annotated[str, typer.Argument(help="Training data: a file (LIBSVM/svmlight, CSV or .npz) or an "
                                        "embedded dataset name (a9a, ijcnn1; tested on its test split).")],
    test: Annotated[
        Optional[str],
        typer.Option("--test", help=f"Test data (default: the embedded dataset's test split, else "
                     f"{TEST_SIZE:.0%} of DATA held out, stratified).", show_default=False),
    ] = None,
    measure: MeasureOpt = "f1",
    constraint: ConstraintOpt = None,
    algorithm: Annotated[
        Optional[list[str]],
        typer.Option("--algorithm", "-a", help="A calopt algorithm to run; repeat for several "
                     "(default: the measure's own solver and lbfgs, the plug-in route).", show_default=False),
    ] = None,
    epochs: Annotated[Optional[int], typer.Option(
        "--epochs", "-e", min=1, show_default=False,
        help="Passes of calopt's algorithms (default: chosen on held-out rows) and of SGD (default 10).")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, metavar="N",
                                      help="Random seed of every method (and of the split).")] = 0,
    positive: PositiveOpt = None,
    label_column: LabelColumnOpt = "-1",
    delimiter: DelimiterOpt = None,
    header: HeaderOpt = None,
    plot: PlotOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare calopt with scikit-learn's routes for a measure, on the same split.

    Runs the measure's own solver and calopt's plug-in route, lbfgs (or the --algorithm list),
    SGD on the logistic loss (scikit-learn's SGDClassifier, one pass at a time) and
    scikit-learn's TunedThresholdClassifierCV(LogisticRegression) tuned for the measure;
    prints each one's test value, TPR, TNR, fit seconds and passes over the training
    data. --plot draws the test value by pass and by fit time, and each method's
    operating point among the measure's level curves in the (TPR, TNR) plane.

    With --constraint, calopt trains subject to the rate constraints (the constrained
    solver and the plug-in route), scikit-learn's route tunes its threshold among those
    meeting them on its folds, SGD is left out, and each constraint's test value is shown:
    [bold]calopt compare a9a -m recall -c "precision>=0.75"[/bold].

    Example: [bold]calopt compare a9a -m gmean --plot gmean.png[/bold]
    """
    run_compare(CompareOptions(data=data, test=test, measure=measure, constraint=constraint, algorithm=algorithm,
                               epochs=epochs, seed=seed, positive=positive,
                               csv=CsvOptions(label_column, delimiter, header), plot=plot, as_json=as_json))

"""``calopt convert`` and the streaming route of ``calopt train`` (``--stream``, or a large file).

Thin over :mod:`calopt.io.stream` and :func:`calopt.fit` on a stream (:mod:`calopt.training.stream`):
open the source with the CSV options, show each pass's rows and rows per second, render the result.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from calopt_cli.options import JsonOpt, echo_json, epochs_text, run_fields, subsample_text
from calopt_cli.reading import CsvOptions, load_dataset
from calopt_cli.report import run_report
from rich.console import Console
from rich.progress import Progress, TextColumn, TimeElapsedColumn

import calopt
from calopt.errors import DataError, ParameterError
from calopt.io.labels import label_text
from calopt.io.files import STDIN, Dataset
from calopt.io.stream import STREAM_ABOVE_BYTES, open_stream, read_whole
from calopt.io.stream import convert as convert_source

__all__ = ["StreamOpt", "convert", "read_whole_source", "streams", "train_stream"]

StreamOpt = Annotated[
    bool | None,
    typer.Option("--stream/--no-stream", show_default=False,
                 help="Read the data part by part in bounded memory (LIBSVM/CSV text, .gz/.bz2, a directory "
                 "written by calopt convert or of .npy arrays, Parquet). Default: streamed when DATA is such a "
                 f"directory, a Parquet file or a file of at least {STREAM_ABOVE_BYTES >> 30} GiB; --no-stream "
                 "reads it into memory."),
]


def streams(source: str, stream: bool | None) -> bool:
    """Whether ``calopt train`` streams ``source``: as asked, else a directory or a file of at
    least :data:`~calopt.io.stream.STREAM_ABOVE_BYTES` bytes, or a Parquet file."""
    if stream is not None:
        return stream
    path = Path(source)
    try:
        return path.is_dir() or path.suffix in (".parquet", ".pq") or (
            path.is_file() and path.stat().st_size >= STREAM_ABOVE_BYTES)
    except OSError:
        return False


def read_whole_source(source: str, csv: CsvOptions) -> Dataset | None:
    """``calopt train --no-stream`` on a directory of arrays or a Parquet file: its rows in
    memory (:func:`calopt.io.stream.read_whole`); None for anything else (a data file
    :func:`calopt.io.files.read_data` reads)."""
    path = Path(source)
    if source == STDIN or not (path.is_dir() or path.suffix in (".parquet", ".pq")):
        return None
    return read_whole(_open(source, csv))


@contextlib.contextmanager
def pass_progress(enabled: bool) -> Iterator[Callable[[int, str], None]]:
    """A transient line on stderr (a terminal only): the pass (survey, epoch k, threshold), its rows and
    rows per second."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda rows, name: None
        return
    progress = Progress(TextColumn("[bold]{task.fields[name]}[/bold]"), TextColumn("{task.fields[rows]} rows"),
                        TextColumn("{task.fields[rate]} rows/s"), TimeElapsedColumn(),
                        console=console, transient=True)
    task = progress.add_task("stream", total=None, name="", rows="0", rate="-")
    current = {"name": None, "started": 0.0}

    def on_rows(rows: int, name: str) -> None:
        if name != current["name"]:
            current.update(name=name, started=time.perf_counter())
        elapsed = time.perf_counter() - current["started"]
        rate = f"{rows / elapsed:,.0f}" if elapsed > 0 else "-"
        progress.update(task, name=name, rows=f"{rows:,}", rate=rate)

    with progress:
        yield on_rows


def _open(source: str, csv: CsvOptions, zero_based: bool | str = "auto") -> Any:
    return open_stream(source, label_column=csv.label_column, delimiter=csv.delimiter, header=csv.header,
                       zero_based=zero_based)


def train_stream(source: str, csv: CsvOptions, *, test: str | None, options: dict[str, Any], refused: dict[str, Any],
                 model_output: Any, as_json: bool, no_progress: bool) -> None:
    """``calopt train --stream``: the options a stream does not take are refused first (one
    line each, before anything is read); ``--test`` is read in memory, like the training file."""
    for option, value in refused.items():
        if value:
            raise ParameterError(f"{option}: not supported with --stream (a stream trains with --select auto or none, "
                                 f"on NumPy, without checkpoints)")
    if str(options.get("select", "auto")).strip().lower() not in ("auto", "none"):
        raise ParameterError(f"--select {options['select']}: a stream trains with --select auto (a large one on its "
                             f"first pass's sample) or none (the step trial on a sample, a fixed number of passes); "
                             f"cross-fitting every row needs the rows in memory")
    stream = _open(source, csv)
    with pass_progress(not (as_json or no_progress)) as on_rows:
        try:
            model = calopt.fit(stream, progress=on_rows, **options)
        except DataError as exc:
            raise exc.renamed({"training labels": f"{stream.source} labels"}) from None
    report = run_report(model)
    test_summary = None
    if test is not None:
        test_set = load_dataset(test, csv, split="test", like=report.data,
                                of=f"the training data ({stream.source})")
        test_summary = model.summary(test_set.X, test_set.labels)
    if model_output is not None:
        model.save(model_output.path)
    train_value = model.history[-1].get("train") if model.history else None
    if as_json:
        echo_json({"task": "binary", "classes": [label_text(c) for c in model.classes],
                   "positive": label_text(model.positive), **run_fields(model),
                   "stream": report.stream, "train": {"value": train_value}, "test": test_summary,
                   "history": model.history, "status": model.message,
                   "model": str(model_output.path) if model_output is not None else None})
        if model.status < 0:
            raise typer.Exit(3)
        return
    console = Console()
    stream_info = report.stream
    parts, passes = stream_info['parts'], stream_info['passes']
    console.print(f"{model.describe()}: streamed {stream_info['rows']:,} rows in {parts} part{'s' * (parts != 1)}, "
                  f"{passes} pass{'es' * (passes != 1)}, {epochs_text(report.epochs)}, "
                  f"positive class {label_text(model.positive)}, fit in {model.fit_seconds:.2f} s",
                  markup=False, highlight=False)
    if train_value is not None:
        console.print(f"train {model.measure}: {train_value:.4f}")
    if report.subsample:
        console.print(subsample_text(report.subsample, model.measure), markup=False, highlight=False)
    if test_summary is not None:
        console.print(f"test {model.measure}: {test_summary['value']:.4f} (TPR {test_summary['tpr']:.4f}, "
                      f"TNR {test_summary['tnr']:.4f})")
    if model_output is not None:
        console.print(f"model written to {model_output.path}")
    if model.status < 0:
        typer.echo(f"calopt: warning: {model.message}; exit code 3", err=True)
        raise typer.Exit(3)


def convert(
    data: Annotated[str, typer.Argument(metavar="IN", help="A LIBSVM/svmlight or CSV file (.gz/.bz2 allowed), "
                                        "or Parquet.")],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="The directory to write (must not exist).")],
    label_column: Annotated[str, typer.Option("--label-column", metavar="COLUMN",
                                              help="CSV/Parquet: the label column, by index (-1: last) or name.")]
    = "-1",
    delimiter: Annotated[str | None, typer.Option("--delimiter", metavar="CHAR", show_default=False,
                                                     help="CSV: the field delimiter (default: sniffed).")] = None,
    header: Annotated[bool | None, typer.Option("--header/--no-header", show_default=False,
                                                   help="CSV: whether the first line names the columns "
                                                   "(default: detected).")] = None,
    as_json: JsonOpt = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress line.")] = False,
) -> None:
    """Convert a text data file once into the binary layout that --stream memory-maps.

    LIBSVM becomes a CSR directory (data.npy, indices.npy zero-based, indptr.npy), CSV
    and Parquet a dense X.npy; labels go to y.npy as read, and calopt-stream.json records
    how the file was read (its index base and width), so a model trained on OUT reads its
    test files like the original. Read in bounded memory, in one pass; OUT appears
    only when complete (nothing is left on an error or Ctrl-C).

    Example: [bold]calopt convert big.svm.gz big.calopt && calopt train big.calopt --stream[/bold]
    """
    if os.path.lexists(out):
        raise ParameterError(f"{out}: exists; convert writes a new directory (remove it or name another)")
    if not out.parent.is_dir():
        raise ParameterError(f"{out}: the directory {out.parent} does not exist")
    if Path(data).is_dir():
        raise ParameterError(f"{data}: is a directory (already converted?); convert reads a text or Parquet file")
    started = time.perf_counter()
    source = _open(data, CsvOptions(label_column, delimiter, header))
    with pass_progress(not (as_json or no_progress)) as on_rows:
        found = convert_source(source, out, progress=on_rows)
    result = {"source": found.source, "out": str(out), "rows": found.n_rows, "features": found.n_features,
              "layout": "csr" if found.sparse else "dense", "zero_based": found.zero_based, "nonzeros": found.nnz,
              "seconds": round(time.perf_counter() - started, 3)}
    if as_json:
        echo_json(result)
        return
    Console().print(f"converted {found.source} ({found.n_rows:,} rows × {found.n_features:,} features, "
                    f"{result['layout']}) to {out} in {result['seconds']:.1f} s")

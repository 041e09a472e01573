"""How the commands read data files: the CSV options, and every later file read like the training file.

:func:`load_dataset` is the one reader behind ``train`` (DATA and ``--test``), ``evaluate``,
``predict``, ``aggregate`` and ``compare``: a data file, standard input (``-``) or an
embedded dataset. :func:`reading` is how a training file was read, kept in the model
(:func:`calopt_cli.report.record_reading`), and :func:`model_reading` gives it back, so
that a test file is read with the training file's index base, width and column names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from calopt.io import datasets
from calopt.io.files import STDIN, Dataset, align_features, read_data
from calopt_cli.report import run_report

__all__ = ["CsvOptions", "DelimiterOpt", "HeaderOpt", "LabelColumnOpt", "embedded", "load_dataset",
           "model_reading", "reading"]

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


@dataclass(frozen=True)
class CsvOptions:
    """How to read a CSV file: ``--label-column``, ``--delimiter``, ``--header/--no-header``."""

    label_column: str | None = None  #: None: the last column, or the model's label column by name
    delimiter: str | None = None
    header: bool | None = None


def embedded(source: str) -> bool:
    """Whether ``source`` names an embedded dataset (a9a, ijcnn1): no file of that name exists."""
    return source != STDIN and not Path(source).exists() and source in datasets.names()


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
    if embedded(source):
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

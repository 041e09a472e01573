"""How a model was trained: the typed :class:`FitReport` every fitted model carries as ``model.fit_report``.

A report is a frozen dataclass of what the training run chose and found (the passes, the
batch size, the seed, the backend, the settings selection's account, the constraints'
values, how a stream or a Dask cluster served the rows, how the training file was read),
replacing the untyped ``model.options`` dict (now a deprecated read-only view of the report).
Fields a run does not have are None. The accounts of a component are kept as the JSON they give
(:attr:`FitReport.selection`, :attr:`FitReport.constraints`, :attr:`FitReport.aggregate`);
the run's own parts are typed: :class:`DataReading`, :class:`StreamReport`,
:class:`ClusterReport`, :class:`PartialFitReport`.

A model file keeps the report as the JSON object under its ``options`` key
(:meth:`FitReport.to_json`), the same document as before, so files written before the
report still load (:meth:`FitReport.from_json` checks each field's type: a forged file is a
one-line :class:`~calopt.errors.ModelFileError`) and files written now load in older calopt.
Keys this version does not know are kept in :attr:`FitReport.extra` and written back.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from calopt.errors import ModelFileError, one_line

__all__ = ["ClusterReport", "DataReading", "DecisionReport", "FitReport", "PartialFitReport", "StreamReport"]

JSON = Any


def _check(condition: bool, problem: str) -> None:
    if not condition:
        raise ModelFileError(problem)


def _shown(value: Any, limit: int = 40) -> str:
    """A value from a file, for a message: its JSON, cut when long."""
    return one_line(json.dumps(value, default=str), limit)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _plain(value: Any) -> JSON:
    """``value`` as JSON data: tuples as lists, mappings as dicts, NumPy scalars as Python numbers."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def _alternatives(annotation: str) -> list[str]:
    """The types of a union annotation, split at its top-level ``|`` (``Mapping[str, Any] | None``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(annotation):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "|" and depth == 0:
            parts.append(annotation[start:i].strip())
            start = i + 1
    return parts + [annotation[start:].strip()]


def _fits(annotation: str, value: Any) -> bool:
    """Whether a JSON ``value`` is of the field type ``annotation``: one of its alternatives (``None``,
    ``bool``, ``int``, ``float``, ``str``, a ``Mapping`` as an object, ``tuple[T, ...]`` as a list of
    T); any other type is not checked."""
    for kind in _alternatives(annotation):
        if kind == "None":
            fits = value is None
        elif kind == "bool":
            fits = isinstance(value, bool)
        elif kind == "int":
            fits = _is_count(value)
        elif kind == "float":
            fits = _is_number(value)
        elif kind == "str":
            fits = isinstance(value, str)
        elif kind.startswith("Mapping"):
            fits = isinstance(value, dict)
        elif kind.startswith("tuple[") and kind.endswith(", ...]"):
            fits = isinstance(value, list) and all(_fits(kind[len("tuple["):-len(", ...]")], item) for item in value)
        else:
            fits = True
        if fits:
            return True
    return False


class _Part:
    """A typed part of a report, read from and written to its JSON object (None fields left out)."""

    #: The key of this part in the report's JSON (for messages).
    KEY: ClassVar[str] = ""

    def to_json(self) -> dict[str, JSON]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, value: Any) -> Any:
        """The part of a file's report, each field checked against its annotation (unknown keys dropped)."""
        _check(isinstance(value, dict), f"options.{cls.KEY} must be an object, not {_shown(value)}")
        fields = {f.name: f.type for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for key, item in value.items():
            if key in fields and not _fits(str(fields[key]), item):
                raise ModelFileError(f"options.{cls.KEY}.{key} is not what a model file holds there: {_shown(item)}")
        return cls(**{key: tuple(item) if isinstance(item, list) and str(fields[key]).startswith("tuple[") else item
                      for key, item in value.items() if key in fields})


@dataclass(frozen=True)
class DataReading(_Part):
    """How the training file was read, so that later files are read the same way.

    ``zero_based`` is the LIBSVM index base; ``feature_names`` the CSV header's (or a
    DataFrame's) feature columns, by which later CSV files and DataFrames are matched;
    ``label_column`` the label's name, ``label_index`` its position when the CSV has no
    header and the label is not the last column.
    """

    format: str | None = None
    zero_based: bool | None = None
    n_features: int | None = None
    feature_names: tuple[str, ...] | None = None
    label_column: str | None = None
    label_index: int | None = None

    KEY: ClassVar[str] = "data"

    def to_json(self) -> dict[str, JSON]:
        """The reading as a file records it: a read file's ``format``, ``zero_based`` and ``n_features``
        (a CSV's column keys too) even when None, other None fields left out."""
        always = ("format", "zero_based", "n_features") if self.format is not None else ()
        if self.format == "csv":
            always += ("feature_names", "label_column", "label_index")
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name in always or getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, value: Any, width: int | None = None) -> DataReading:
        """The reading of a file's ``options.data``, checked (``width``: the model's features)."""
        _check(isinstance(value, dict) and (value.get("zero_based") is None or type(value["zero_based"]) is bool)
               and isinstance(value.get("format", ""), str),
               f"options.data must say how the training data were read, not {_shown(value)}")
        names, label, index = value.get("feature_names"), value.get("label_column"), value.get("label_index")
        _check(names is None or (isinstance(names, list) and (width is None or len(names) == width) and
                                 all(isinstance(n, str) for n in names) and len(set(names)) == len(names)),
               f"options.data.feature_names must be {width} distinct names, not {_shown(names)}")
        _check(label is None or isinstance(label, str),
               f"options.data.label_column must be a name, not {_shown(label)}")
        _check(index is None or (type(index) is int and 0 <= index <= (width if width is not None else index)),
               f"options.data.label_index must be a column number, not {_shown(index)}")
        _check(value.get("n_features") is None or _is_count(value["n_features"]),
               f"options.data.n_features must be a whole number, not {_shown(value.get('n_features'))}")
        reading = super().from_json(value)
        return dataclasses.replace(reading, feature_names=None if names is None else tuple(names))


@dataclass(frozen=True)
class StreamReport(_Part):
    """How a stream served the rows (:func:`calopt.training.stream.fit_stream`)."""

    rows: int
    parts: int
    buffer_rows: int
    sample_rows: int  #: rows of the step trial's sample
    seekable: bool
    threshold_rows: int  #: rows whose scores tuned the threshold (0: not tuned)
    exact_threshold: bool  #: whether one more pass found the best cut of every row's score
    passes: int  #: reads of the data: the survey, the epochs and the exact threshold's

    KEY: ClassVar[str] = "stream"


@dataclass(frozen=True)
class ClusterReport(_Part):
    """How a Dask cluster trained the model (:mod:`calopt.training.distributed`)."""

    mode: str  #: "exact" or "local"
    workers: int
    local_steps: int | None = None
    #: The training measure, TPR and TNR at the threshold: ``{"value", "tpr", "tnr"}``.
    train: Mapping[str, float] | None = None

    KEY: ClassVar[str] = "cluster"


@dataclass(frozen=True)
class PartialFitReport(_Part):
    """What ``CaloptClassifier.partial_fit`` has seen: its calls and rows."""

    calls: int
    rows: int

    KEY: ClassVar[str] = "partial_fit"


@dataclass(frozen=True)
class DecisionReport(_Part):
    """How a multiclass model decides for its K-class measure (:mod:`calopt.training.multiclass`).

    ``rule`` is ``"gain matrix"`` (the deterministic rule chosen on out-of-fold
    probabilities), ``"randomised"`` (the Frank-Wolfe mixture, when asked for) or
    ``"argmax"`` (accuracy, or where no rule was chosen: ``reason`` says why). The values
    are the measure's on the out-of-fold probabilities: ``held_out`` of the rule used,
    ``argmax`` of the argmax, ``mixture`` of the Frank-Wolfe mixture and ``gap`` its
    Frank-Wolfe gap (for a concave measure, a bound on how far the mixture is from the best
    rule on those rows).
    """

    rule: str
    measure: str | None = None
    reason: str | None = None
    folds: int | None = None
    fold_passes: int | None = None  #: L-BFGS evaluations (passes) at the most of each fold model
    held_out: float | None = None
    argmax: float | None = None
    mixture: float | None = None
    gap: float | None = None
    iterations: int | None = None  #: Frank-Wolfe iterations
    #: the training rows the rule was chosen on, where a sample of them (None: every row)
    rows: int | None = None
    #: the model's inverse regularisation strength (the multinomial objective's C), chosen by the
    #: out-of-fold log loss unless ``C_kept`` says why not
    C: float | None = None
    #: each candidate C's out-of-fold log loss (``C``, ``log_loss``), where C was chosen
    C_log_loss: tuple[Mapping[str, Any], ...] | None = None
    #: why C was not chosen, where it was not: ``"given"`` (the user gave C, or asked for no selection)
    #: or the size that keeps it
    C_kept: str | None = None
    #: per-class rate constraints the rule was chosen under: each one's ``constraint`` (its text),
    #: ``value`` on the out-of-fold probabilities and whether it was ``satisfied`` there
    constraints: tuple[Mapping[str, Any], ...] | None = None

    KEY: ClassVar[str] = "decision"


_PARTS: dict[str, type[_Part]] = {"data": DataReading, "stream": StreamReport, "cluster": ClusterReport,
                                  "partial_fit": PartialFitReport, "decision": DecisionReport}


@dataclass(frozen=True)
class FitReport:
    """How a model was trained (``model.fit_report``); None where a run has no such thing.

    Each field's type is what a model file's ``options`` holds under its name (lists for
    tuples, objects for mappings and parts); :meth:`from_json` checks it.
    """

    #: Passes over the training data of the model (the chosen number with a settings
    #: selection; rounds on a Dask cluster; calls of ``partial_fit``).
    epochs: int | None = None
    batch_size: int | None = None  #: rows of a mini-batch
    seed: int | None = None  #: the run's seed (shuffling, folds, the step trial)
    backend: str | None = None  #: where the solver ran (``"numpy"``, ``"torch"``, ...)
    dtype: str | None = None  #: its floating dtype (``"float64"``)
    scale: bool | None = None  #: whether the features were max-abs scaled
    tune_threshold: bool | None = None  #: whether the threshold was tuned for the measure
    #: The algorithm's parameters as trained (chosen ones included), one mapping per binary
    #: problem for ``partial_fit``.
    algorithm_params: Mapping[str, Any] | tuple[Mapping[str, Any], ...] | None = None
    select: str | None = None  #: the settings selection's rule (``"cv:5"``, ``"holdout:0.2"``, ``"none"``)
    #: What the selection chose (:meth:`~calopt.training.selection.Selection.report`).
    selection: Mapping[str, Any] | None = None
    #: Each rate constraint's value on the training, held-out and test rows and whether it
    #: holds there (:func:`~calopt.training.pipeline.constraint_report`).
    constraints: tuple[Mapping[str, Any], ...] | None = None
    threshold_rule: str | None = None  #: how a constrained model's threshold was chosen
    data: DataReading | None = None  #: how the training file was read
    stream: StreamReport | None = None  #: how a stream served the rows
    cluster: ClusterReport | None = None  #: how a Dask cluster trained the model
    partial_fit: PartialFitReport | None = None  #: what ``partial_fit`` has seen
    rank: int | None = None  #: SLND's rank
    sample: int | None = None  #: the rows of SLND's sample
    #: Large data (:mod:`calopt.training.sampling`): the rows the model trained on (``rows`` of
    #: ``of``) and the best cut on the ``cut_rows`` others (``threshold_shift``, ``value``).
    subsample: Mapping[str, Any] | None = None
    one_vs_rest: str | None = None  #: ``"per class"`` when a multiclass model was trained one class at a time
    #: Each class's score spread on the training rows, by which its scores were divided
    #: (one class at a time).
    score_spreads: tuple[float, ...] | None = None
    #: How a multiclass model decides for its measure (the gain-matrix rule's account).
    decision: DecisionReport | None = None
    #: The account of ``calopt.aggregate`` (the models, their scales, θ̂, the selection).
    aggregate: Mapping[str, Any] | None = None
    #: Keys of a model file this version does not know, kept and written back.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> FitReport:
        """This report with ``changes`` (:func:`dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)

    @property
    def feature_names(self) -> tuple[str, ...] | None:
        """The features' names when the training data named them (else None)."""
        return None if self.data is None else self.data.feature_names

    def to_json(self) -> dict[str, JSON]:
        """The report as the JSON object of a model file (None fields left out; ``extra`` merged in)."""
        found: dict[str, JSON] = dict(_plain(self.extra))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or value is None:
                continue
            found[f.name] = value.to_json() if isinstance(value, _Part) else _plain(value)
        return found

    @classmethod
    def from_json(cls, value: Any, width: int | None = None) -> FitReport:
        """The report of a file's ``options`` object (files of every calopt version), each field checked."""
        _check(isinstance(value, dict), f"options must be an object, not {_shown(value)}")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        fields: dict[str, Any] = {"extra": {key: item for key, item in value.items() if key not in known}}
        for key, item in value.items():
            if key in known and item is not None:
                fields[key] = cls._field(key, item, width)
        return cls(**fields)

    @staticmethod
    def _field(key: str, item: Any, width: int | None) -> Any:
        """One field of a file's report as its type; a ModelFileError naming it when it is not one."""
        if key == "data":
            return DataReading.from_json(item, width)
        if key in _PARTS:
            try:
                return _PARTS[key].from_json(item)
            except TypeError:  # a required field missing
                raise ModelFileError(f"options.{key} is incomplete: {_shown(item)}") from None
        _check(_fits(str(_ANNOTATIONS[key]), item),
               f"options.{key} is not what a model file holds there: {_shown(item)}")
        return tuple(item) if isinstance(item, list) else item


#: Each plain field's type, by which a file's value is checked (:func:`_fits`).
_ANNOTATIONS = {f.name: f.type for f in dataclasses.fields(FitReport)}

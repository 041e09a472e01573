"""What the commands read of how a model was trained: the one place the CLI touches ``model.fit_report``.

A trained model keeps its run's account (the passes, the backend, the settings selection,
the constraints' values, how a stream or a Dask cluster served the rows, how the training
file was read) in ``model.fit_report`` (:class:`~calopt.models.report.FitReport`). The
commands never read it themselves: they read
:func:`run_report`, a frozen :class:`RunReport` of those values as the JSON the commands
print, and record how the training data were read with :func:`record_reading`. When the
model's account changes shape, these two functions change, and nothing else in the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calopt.models.report import DataReading

__all__ = ["RunReport", "record_reading", "run_report"]


@dataclass(frozen=True)
class RunReport:
    """A trained model's account of its run, as plain JSON values; None where the run has none.

    ``data`` is how the training data were read (:func:`calopt_cli.reading.reading`; older
    model files: None); ``stream``, ``cluster`` and ``aggregate`` are the accounts of a
    streamed, Dask or aggregation run; ``constraints`` is empty without rate constraints.
    """

    backend: str | None
    dtype: str | None
    epochs: int | None
    batch_size: int | None
    rank: int | None
    selection: dict[str, Any] | None
    threshold_rule: str | None
    constraints: list[dict[str, Any]]
    data: dict[str, Any] | None
    stream: dict[str, Any] | None
    cluster: dict[str, Any] | None
    aggregate: dict[str, Any] | None
    #: large data: the rows trained on and the rows the threshold was cut on (calopt.training.sampling)
    subsample: dict[str, Any] | None = None
    decision: Any = None  #: a multiclass model's :class:`~calopt.models.report.DecisionReport`


def run_report(model: Any) -> RunReport:
    """What ``model`` reports of its training run (read when called: after :func:`record_reading`)."""
    report = model.fit_report
    return RunReport(
        backend=report.backend, dtype=report.dtype, epochs=report.epochs, batch_size=report.batch_size,
        rank=report.rank, selection=None if report.selection is None else dict(report.selection),
        threshold_rule=report.threshold_rule, constraints=[dict(entry) for entry in report.constraints or ()],
        data=_json(report.data), stream=_json(report.stream), cluster=_json(report.cluster),
        aggregate=None if report.aggregate is None else dict(report.aggregate), decision=report.decision,
        subsample=None if report.subsample is None else dict(report.subsample),
    )


def _json(part: Any) -> dict[str, Any] | None:
    """A typed part of the report as the JSON the commands print (None: the run has none)."""
    return None if part is None else part.to_json()


def record_reading(model: Any, reading: dict[str, Any]) -> None:
    """Keep in ``model`` how its training data were read, for every later file read for it
    (``--test``, evaluate, predict, aggregate); saved with the model."""
    model.fit_report = model.fit_report.replace(data=DataReading.from_json(reading))

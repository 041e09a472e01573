"""The typed fit report (``model.fit_report``) that replaced ``model.options`` (issue 24).

Model files written by the code before it (tests/data/old-models, written at the commit
named in tests/data/old_models.py) load with every field typed, and save back the same
``options`` document; a file whose report holds the wrong type is a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import calopt
from calopt.errors import ModelFileError
from calopt.models.archive import load_archive, read_format, save_archive
from calopt.models.linear import LinearModel, load_model
from calopt.models.report import DataReading, FitReport, PartialFitReport, StreamReport

OLD = Path(__file__).parent / "data" / "old-models"
FILES = sorted(path.name for path in OLD.glob("*.npz"))


def raw_options(path: Path) -> dict:
    """The ``options`` object of a model file, as JSON (not through the report)."""
    return load_archive(path, format=read_format(path), version=1)[1]["options"]


def without_nulls(options: dict) -> dict:
    """``options`` without its null keys (at the top and in ``data``): null and absent say the same."""
    kept = {key: value for key, value in options.items() if value is not None}
    if "data" in kept:
        kept["data"] = {key: value for key, value in kept["data"].items() if value is not None}
    return kept


def test_every_kind_of_old_file_is_here():
    assert FILES == ["aggregate.npz", "constrained.npz", "dataframe.npz", "partial-fit.npz", "per-class.npz",
                     "slnd.npz", "stream.npz"]


@pytest.mark.parametrize("name", FILES)
def test_an_old_file_loads_and_saves_back_the_same_options(name, tmp_path):
    raw = raw_options(OLD / name)
    model = load_model(OLD / name)
    assert isinstance(model.fit_report, FitReport) and model.fit_report.extra == {}
    assert without_nulls(model.fit_report.to_json()) == without_nulls(raw)
    model.save(tmp_path / name)
    assert without_nulls(raw_options(tmp_path / name)) == without_nulls(raw)
    assert load_model(tmp_path / name).fit_report == model.fit_report
    assert model.fit_report.epochs == raw["epochs"] and model.fit_report.backend == "numpy"


def test_an_old_constrained_file_has_its_selection_and_constraints():
    raw, report = raw_options(OLD / "constrained.npz"), load_model(OLD / "constrained.npz").fit_report
    assert report.select == "cv:5" and report.selection == raw["selection"]
    assert report.threshold_rule == raw["threshold_rule"] and isinstance(report.threshold_rule, str)
    assert report.constraints == tuple(raw["constraints"]) and report.constraints[0]["constraint"] == "fpr<=0.2"
    assert isinstance(report.algorithm_params, dict) and report.algorithm_params["C"] == raw["algorithm_params"]["C"]


def test_old_one_vs_rest_slnd_stream_partial_fit_and_dataframe_files_are_typed():
    per_class = load_model(OLD / "per-class.npz").fit_report
    assert per_class.one_vs_rest == "per class" and isinstance(per_class.score_spreads, tuple)
    assert per_class.score_spreads == tuple(raw_options(OLD / "per-class.npz")["score_spreads"])
    assert len(per_class.score_spreads) == load_model(OLD / "per-class.npz").n_classes
    slnd = load_model(OLD / "slnd.npz").fit_report
    assert (slnd.rank, slnd.sample) == (5, 300)
    stream = load_model(OLD / "stream.npz").fit_report
    raw = raw_options(OLD / "stream.npz")
    assert stream.stream == StreamReport(**raw["stream"]) and stream.stream.rows == 600
    assert stream.data == DataReading(format="csv", zero_based=None, n_features=6,
                                      feature_names=tuple(f"f{j}" for j in range(6)), label_column="label")
    partial = load_model(OLD / "partial-fit.npz").fit_report
    assert partial.partial_fit == PartialFitReport(calls=3, rows=300)
    assert isinstance(partial.algorithm_params, tuple) and len(partial.algorithm_params) == 10
    frame = load_model(OLD / "dataframe.npz")
    assert frame.feature_names == [f"f{j}" for j in range(6)] and frame.fit_report.data.format is None


def test_the_deprecated_options_view_is_the_report_read_only():
    model = load_model(OLD / "constrained.npz")
    with pytest.warns(DeprecationWarning, match="fit_report"):
        options = model.options
    assert options["selection"] == model.fit_report.selection and options["epochs"] == model.fit_report.epochs
    with pytest.raises(TypeError):
        options["epochs"] = 1  # type: ignore[index]


def test_a_new_model_has_its_report_typed():
    a9a = calopt.datasets.load("a9a", "train")
    model = calopt.fit(a9a.X[:400], np.asarray(a9a.labels[:400]), select="none", epochs=2, seed=3)
    report = model.fit_report
    assert (report.epochs, report.seed, report.select, report.scale, report.tune_threshold) == (2, 3, "none", True,
                                                                                                 True)
    assert report.batch_size == 400 and report.dtype == "float64" and report.selection is None


@pytest.mark.parametrize(("options", "problem"), [
    ({"epochs": "3"}, "options.epochs"),
    ({"score_spreads": [1.0, "x"]}, "options.score_spreads"),
    ({"stream": {"rows": 3}}, "options.stream is incomplete"),
    ({"cluster": [1]}, "options.cluster must be an object"),
    ({"cluster": {"mode": "local", "workers": "2"}}, "options.cluster.workers"),
    ({"partial_fit": {"calls": 2, "rows": True}}, "options.partial_fit.rows"),
    ({"constraints": {"constraint": "fpr<=0.1"}}, "options.constraints"),
    ({"data": {"zero_based": "yes"}}, "options.data must say how"),
])
def test_a_report_of_the_wrong_type_is_a_one_line_error(options, problem, tmp_path):
    arrays, metadata = load_archive(OLD / "dataframe.npz", format=LinearModel.FORMAT, version=1)
    save_archive(tmp_path / "forged.npz", arrays, {**metadata, "options": options})
    with pytest.raises(ModelFileError, match=problem) as error:
        load_model(tmp_path / "forged.npz")
    assert "\n" not in str(error.value) and "forged.npz" in str(error.value)


def test_unknown_keys_of_a_later_file_are_kept():
    report = FitReport.from_json({"epochs": 2, "later": {"x": [1, 2]}})
    assert report.extra == {"later": {"x": [1, 2]}} and report.to_json() == {"epochs": 2, "later": {"x": [1, 2]}}
    assert json.loads(json.dumps(report.to_json())) == report.to_json()

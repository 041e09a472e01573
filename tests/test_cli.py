"""The calopt command line: listings, ``score`` against scikit-learn, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import pytest
import typer
from imblearn.metrics import geometric_mean_score
from sklearn.metrics import f1_score, fbeta_score, jaccard_score, recall_score
from typer.testing import CliRunner

import calopt
from calopt.errors import DataError
from calopt_cli.app import CaloptGroup, app
from calopt_cli.options import BackendOpt, DtypeOpt, JsonOpt, SeedOpt, echo_json

runner = CliRunner()

BUILTIN_MEASURES = {"min", "hmean", "qmean", "gmean", "fbeta", "jaccard", "gower-legendre"}
BUILTIN_LOSSES = {"logistic", "calibrated-hinge", "squared", "exponential", "hinge"}


def invoke(*args: str, **kwargs):
    return runner.invoke(app, list(args), **kwargs)


def assert_one_line_error(result, *fragments: str) -> str:
    """Exit code 2, one ``calopt: error:`` line on stderr holding ``fragments``, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if not line.startswith("calopt: warning:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("calopt: error: "), result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess, without calopt's own switches."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALOPT_")}
    env.update(extra)
    return env


def write_labels(path: Path, labels) -> Path:
    path.write_text("".join(f"{label}\n" for label in labels))
    return path


# -------------------- version, help


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"calopt {calopt.__version__}"


def test_help_lists_the_commands():
    result = invoke("--help")
    assert result.exit_code == 0, result.output
    for command in ("score", "list-measures", "list-losses", "list-algorithms"):
        assert command in result.stdout


def test_no_arguments_shows_help():
    result = invoke()
    assert "Usage" in result.output
    assert "Traceback" not in result.output


# -------------------- listings


def test_list_measures_json_has_the_builtins():
    result = invoke("list-measures", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    entries = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert BUILTIN_MEASURES <= set(entries)
    for name in BUILTIN_MEASURES:
        assert entries[name]["plugin"] == "calopt"
        assert entries[name]["family"] in {"concave", "pseudo-linear"}
        assert isinstance(entries[name]["params"], dict)
    assert "beta" in entries["fbeta"]["params"]


def test_list_losses_json_has_the_builtins_and_flags():
    result = invoke("list-losses", "--json")
    assert result.exit_code == 0, result.output
    entries = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert BUILTIN_LOSSES <= set(entries)
    for name in BUILTIN_LOSSES:
        assert entries[name]["plugin"] == "calopt"
        assert {"smooth", "calibrated", "reward"} <= set(entries[name])
    assert entries["logistic"]["smooth"] is True
    assert entries["hinge"]["smooth"] is False


def test_list_algorithms_json_is_a_list():
    result = invoke("list-algorithms", "--json")
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)
    assert isinstance(entries, list)
    for entry in entries:
        assert {"name", "family", "params", "plugin"} <= set(entry)


@pytest.mark.parametrize("command", ["list-measures", "list-losses", "list-algorithms"])
def test_list_tables(command):
    result = invoke(command)
    assert result.exit_code == 0, result.output
    for column in ("name", "family", "plugin", "summary"):
        assert column in result.stdout
    if command == "list-losses":
        assert "properties" in result.stdout and "calibrated" in result.stdout
    if command == "list-measures":
        assert "parameters" in result.stdout and "beta=1.0" in result.stdout


def test_list_measures_table_shows_defaults():
    result = runner.invoke(app, ["list-measures"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "gower-legendre" in result.stdout
    assert "beta=" in result.stdout


# -------------------- score


LABEL_SETS = {"pm1": (-1, 1), "01": (0, 1), "12": (1, 2)}


@pytest.fixture(params=sorted(LABEL_SETS))
def label_files(request, tmp_path):
    """Random true and predicted label files (70% agreement) over one pair of labels."""
    negative, positive = LABEL_SETS[request.param]
    rng = np.random.default_rng(len(request.param) + negative + positive)
    n = 200
    truth = rng.random(n) < 0.3
    predicted = np.where(rng.random(n) < 0.7, truth, ~truth)
    y_true = np.where(truth, positive, negative)
    y_pred = np.where(predicted, positive, negative)
    return (
        write_labels(tmp_path / "y.txt", y_true),
        write_labels(tmp_path / "pred.txt", y_pred),
        y_true,
        y_pred,
        (negative, positive),
    )


SKLEARN = {
    "fbeta": lambda t, p, pos: f1_score(t, p, pos_label=pos),
    "fbeta:beta=2": lambda t, p, pos: fbeta_score(t, p, beta=2, pos_label=pos),
    "jaccard": lambda t, p, pos: jaccard_score(t, p, pos_label=pos),
    "gmean": lambda t, p, pos: geometric_mean_score(t, p),
}


@pytest.mark.parametrize("spec", sorted(SKLEARN))
def test_score_agrees_with_sklearn(label_files, spec):
    labels, predictions, y_true, y_pred, (negative, positive) = label_files
    result = invoke("score", str(labels), str(predictions), "--measure", spec, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["value"] == pytest.approx(SKLEARN[spec](y_true, y_pred, positive), abs=1e-12)
    assert out["tpr"] == pytest.approx(recall_score(y_true, y_pred, pos_label=positive))
    assert out["tnr"] == pytest.approx(recall_score(y_true, y_pred, pos_label=negative))
    assert out["measure"] == calopt.get_measure(spec).spec
    assert set(out) == {"measure", "positive", "value", "tpr", "tnr", "tp", "fp", "tn", "fn"}
    counts = (out["tp"], out["fp"], out["tn"], out["fn"])
    assert sum(counts) == len(y_true)
    assert out["tp"] == int(np.sum((y_true == positive) & (y_pred == positive)))


def test_score_positive_option_chooses_the_class(label_files):
    labels, predictions, y_true, y_pred, (negative, positive) = label_files
    result = invoke(
        "score", str(labels), str(predictions), "-m", "fbeta", "--positive", str(negative), "--json"
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["value"] == pytest.approx(f1_score(y_true, y_pred, pos_label=negative))
    assert out["tpr"] == pytest.approx(recall_score(y_true, y_pred, pos_label=negative))


def test_score_table(tmp_path):
    labels = write_labels(tmp_path / "y.txt", [1, -1, 1, 1, -1])
    predictions = write_labels(tmp_path / "p.txt", [1, 1, -1, 1, -1])
    result = invoke("score", str(labels), str(predictions), "-m", "gmean")
    assert result.exit_code == 0, result.output
    assert "gmean" in result.stdout
    assert f"{np.sqrt(2 / 3 * 1 / 2):.6f}" in result.stdout
    assert "TPR" in result.stdout and "TNR" in result.stdout


def test_score_string_labels_and_a_subset_of_predictions(tmp_path):
    labels = write_labels(tmp_path / "y.txt", ["yes", "no", "yes", "no"])
    predictions = write_labels(tmp_path / "p.txt", ["yes"] * 4)
    result = invoke("score", str(labels), str(predictions), "-m", "fbeta", "--positive", "yes", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["tp"], out["fp"], out["tn"], out["fn"]) == (2, 2, 0, 0)
    assert out["value"] == pytest.approx(f1_score(["yes", "no"] * 2, ["yes"] * 4, pos_label="yes"))


# -------------------- errors


@pytest.fixture
def small_files(tmp_path):
    labels = write_labels(tmp_path / "y.txt", [1, -1, 1, -1])
    predictions = write_labels(tmp_path / "p.txt", [1, 1, -1, -1])
    return labels, predictions


def test_unknown_measure_suggests_a_name(small_files):
    labels, predictions = small_files
    result = invoke("score", str(labels), str(predictions), "--measure", "fbta")
    assert_one_line_error(result, "did you mean", "'fbeta'")


def test_bad_measure_parameter_is_one_line(small_files):
    labels, predictions = small_files
    result = invoke("score", str(labels), str(predictions), "--measure", "fbeta:beta=-1")
    assert_one_line_error(result, "beta")


def test_unknown_measure_parameter_is_one_line(small_files):
    labels, predictions = small_files
    result = invoke("score", str(labels), str(predictions), "--measure", "fbeta:gamma=2")
    assert_one_line_error(result, "gamma")


def test_missing_file_is_one_line(small_files, tmp_path):
    labels, _ = small_files
    missing = tmp_path / "nowhere.txt"
    result = invoke("score", str(labels), str(missing), "-m", "gmean")
    assert_one_line_error(result, str(missing))


def test_different_lengths_name_both_files(small_files, tmp_path):
    labels, _ = small_files
    short = write_labels(tmp_path / "short.txt", [1, -1, 1])
    result = invoke("score", str(labels), str(short), "-m", "gmean")
    assert_one_line_error(result, str(labels), str(short), "4", "3")


def test_prediction_outside_the_labels_names_the_file(small_files, tmp_path):
    labels, _ = small_files
    predictions = write_labels(tmp_path / "p3.txt", [1, -1, 3, 1])
    result = invoke("score", str(labels), str(predictions), "-m", "gmean")
    assert_one_line_error(result, str(predictions), "line 3", "3")


def test_labels_with_three_classes_are_one_line(tmp_path):
    labels = write_labels(tmp_path / "y.txt", [1, 2, 3])
    predictions = write_labels(tmp_path / "p.txt", [1, 2, 3])
    result = invoke("score", str(labels), str(predictions), "-m", "gmean")
    assert_one_line_error(result, str(labels))


def test_unknown_positive_label_is_one_line(small_files):
    labels, predictions = small_files
    result = invoke("score", str(labels), str(predictions), "-m", "gmean", "--positive", "7")
    assert_one_line_error(result, "7")


def test_missing_measure_option_is_a_usage_error(small_files):
    labels, predictions = small_files
    result = invoke("score", str(labels), str(predictions))
    assert result.exit_code == 2, result.output
    assert "--measure" in result.output
    assert "Traceback" not in result.output


# -------------------- shared options and error wiring


def _demo_app() -> typer.Typer:
    """A root app wired like calopt's, with one command using the shared options."""
    demo = typer.Typer(cls=CaloptGroup)

    @demo.callback()
    def root() -> None:
        """Demo."""

    @demo.command()
    def run(
        backend: BackendOpt = "numpy",
        dtype: DtypeOpt = "float64",
        seed: SeedOpt = None,
        as_json: JsonOpt = False,
        fail: Annotated[str, typer.Option()] = "",
    ) -> None:
        """Echo the options."""
        if fail == "data":
            raise DataError("data.txt: line 3: bad label\nsecond line")
        if fail == "bug":
            raise ZeroDivisionError("a bug")
        echo_json({"backend": backend, "dtype": dtype, "seed": seed})

    return demo


def test_shared_options_parse_and_validate():
    demo = _demo_app()
    result = runner.invoke(demo, ["run", "--backend", "array-api-strict", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"backend": "array-api-strict", "dtype": "float64", "seed": 3}
    assert_one_line_error(runner.invoke(demo, ["run", "--backend", "numpi"]), "did you mean", "'numpy'")
    assert_one_line_error(runner.invoke(demo, ["run", "--dtype", "float16"]), "dtype")


def test_known_errors_become_one_line_and_bugs_keep_their_exception(monkeypatch):
    demo = _demo_app()
    line = assert_one_line_error(runner.invoke(demo, ["run", "--fail", "data"]), "line 3")
    assert line == "calopt: error: data.txt: line 3: bad label second line"
    bug = runner.invoke(demo, ["run", "--fail", "bug"])
    assert isinstance(bug.exception, ZeroDivisionError)
    monkeypatch.setenv("CALOPT_DEBUG", "1")
    debug = runner.invoke(demo, ["run", "--fail", "data"])
    assert isinstance(debug.exception, DataError)


# -------------------- the console script


def _script(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.skip(f"no {name} console script next to {sys.executable}")
    return str(path)


def test_console_script_and_module_smoke(tmp_path):
    env = clean_env()
    version = f"calopt {calopt.__version__}"
    script = subprocess.run(
        [_script("calopt"), "--version"], capture_output=True, text=True, env=env, timeout=120
    )
    assert script.returncode == 0, script.stderr
    assert script.stdout.strip() == version
    module = subprocess.run(
        [sys.executable, "-m", "calopt_cli", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert module.returncode == 0, module.stderr
    assert module.stdout.strip() == version

    labels = write_labels(tmp_path / "y.txt", [1, -1, 1, -1])
    error = subprocess.run(
        [_script("calopt"), "score", str(labels), str(labels), "-m", "gmaen"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert error.returncode == 2, error.stderr
    assert error.stderr.count("\n") == 1 and "did you mean" in error.stderr
    assert "Traceback" not in error.stderr

    debug = subprocess.run(
        [_script("calopt"), "score", str(labels), str(labels), "-m", "gmaen"],
        capture_output=True,
        text=True,
        env=clean_env(CALOPT_DEBUG="1"),
        timeout=120,
    )
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and "UnknownNameError" in debug.stderr

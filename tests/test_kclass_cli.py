"""``calopt train``, ``evaluate``, ``predict`` and ``compare`` on K-class data trained for a K-class
measure (issue 26, item 3): values checked against imbalanced-learn and scikit-learn on the
predictions ``calopt predict`` writes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from imblearn.metrics import geometric_mean_score
from sklearn.metrics import f1_score, precision_score, recall_score
from typer.testing import CliRunner

from calopt_cli.app import app

runner = CliRunner()


def _write(path, X, y):
    path.write_text("".join(",".join(f"{v:.5f}" for v in row) + f",{label}\n" for row, label in zip(X, y)))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Long-tailed classes 'ant' (most) ... 'eel' (fewest) as headerless CSV, train and test."""
    rng = np.random.default_rng(0)
    names = np.array(["ant", "bee", "cat", "dog", "eel"])
    sizes = np.round(np.geomspace(400, 40, 5)).astype(int)
    centres = rng.normal(size=(5, 6)) * 1.3
    X = np.concatenate([rng.normal(size=(2 * s, 6)) + centres[k] for k, s in enumerate(sizes)])
    y = np.repeat(names, 2 * sizes)
    order = rng.permutation(y.size)
    X, y = X[order], y[order]
    folder = tmp_path_factory.mktemp("kclass")
    half = y.size // 2
    _write(folder / "train.csv", X[:half], y[:half])
    _write(folder / "test.csv", X[half:], y[half:])
    return folder, y[half:]


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_train_gmean_reports_the_k_class_value_and_per_class_rates(files, tmp_path):
    folder, y_test = files
    model = tmp_path / "m.npz"
    out = _json(runner.invoke(app, ["train", str(folder / "train.csv"), "--test", str(folder / "test.csv"),
                                    "-m", "gmean", "-o", str(model), "--json"]))
    assert out["task"] == "multiclass" and out["decision"]["rule"] == "gain matrix"
    assert out["decision"]["held_out"] >= out["decision"]["argmax"]
    predicted = np.array(_predictions(model, folder / "test.csv"))
    assert out["test"]["value"] == pytest.approx(geometric_mean_score(y_test, predicted, average="multiclass"))
    labels = ["ant", "bee", "cat", "dog", "eel"]
    assert [out["test"]["recall"][c] for c in labels] == pytest.approx(
        recall_score(y_test, predicted, labels=labels, average=None))
    assert [out["test"]["precision"][c] for c in labels] == pytest.approx(
        precision_score(y_test, predicted, labels=labels, average=None, zero_division=0))
    table = runner.invoke(app, ["train", str(folder / "train.csv"), "--test", str(folder / "test.csv"), "-m",
                                "gmean", "--no-progress"], terminal_width=200)
    assert table.exit_code == 0, table.output
    assert "recall and precision per class" in table.stdout and "decision rule (gain matrix) for gmean" in table.stdout
    assert f"{out['test']['value']:.4f}" in table.stdout
    assert "top-1" in table.stdout and "top-5" not in table.stdout  # 5 classes: top-5 is 1 whatever is predicted
    # the C chosen and each candidate's out-of-fold log loss, as the JSON has them, on the rule's line
    losses = out["decision"]["C_log_loss"]
    assert [entry["C"] for entry in losses] == [0.1, 1.0, 10.0]
    assert out["decision"]["C"] == min(losses, key=lambda entry: entry["log_loss"])["C"]
    line = ", ".join(f"C={entry['C']:g} {entry['log_loss']:.4f}" for entry in losses)
    assert f"C = {out['decision']['C']:g}, chosen by the out-of-fold log loss ({line})" in " ".join(table.stdout.split())


def test_top5_is_shown_only_beyond_five_classes(tmp_path):
    """The tables show top-5 accuracy for 7 classes (where it says something), not for 5 or fewer."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(420, 4)) + np.repeat(rng.normal(size=(7, 4)) * 2, 60, axis=0)
    _write(tmp_path / "seven.csv", X, np.repeat([f"c{k}" for k in range(7)], 60))
    model = tmp_path / "m.npz"
    table = runner.invoke(app, ["train", str(tmp_path / "seven.csv"), "-m", "gmean", "-o", str(model), "--no-progress"],
                          terminal_width=200)
    assert table.exit_code == 0, table.output
    assert "top-5" in table.stdout
    evaluated = runner.invoke(app, ["evaluate", str(model), str(tmp_path / "seven.csv")], terminal_width=200)
    assert evaluated.exit_code == 0 and "top-5" in evaluated.stdout


def _predictions(model, data):
    result = runner.invoke(app, ["predict", str(model), str(data)])
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_evaluate_reports_the_k_class_measures_of_the_saved_rule(files, tmp_path):
    folder, y_test = files
    model = tmp_path / "f1.npz"
    assert runner.invoke(app, ["train", str(folder / "train.csv"), "-m", "f1", "-o", str(model), "--json"]).exit_code == 0
    predicted = np.array(_predictions(model, folder / "test.csv"))
    out = _json(runner.invoke(app, ["evaluate", str(model), str(folder / "test.csv"), "-m", "f1", "-m", "gmean",
                                    "--json"]))
    values = {entry["measure"]: entry["value"] for entry in out["measures"]}
    assert values["f1"] == pytest.approx(f1_score(y_test, predicted, average="macro"))
    assert values["gmean"] == pytest.approx(geometric_mean_score(y_test, predicted, average="multiclass"))
    assert out["accuracy"] == pytest.approx(np.mean(predicted == y_test))


def test_compare_on_k_classes_scores_each_method_by_the_k_class_measure(files):
    folder, _ = files
    out = _json(runner.invoke(app, ["compare", str(folder / "train.csv"), "--test", str(folder / "test.csv"),
                                    "-m", "min", "--json"]))
    methods = {run["method"]: run for run in out["methods"]}
    assert set(methods) == {"calopt multinomial", "calopt multinomial, argmax", "sklearn LR, argmax"}
    assert out["positive"] is None and methods["sklearn LR, argmax"]["tpr"] is None
    assert methods["calopt multinomial"]["value"] > methods["calopt multinomial, argmax"]["value"]


@pytest.mark.parametrize("constraint, message", [
    ("recall[emu]>=0.8", "no class 'emu' in the training labels (ant, "),
    ("recall>=0.8", "name the class, e.g. 'recall["),
    ("fpr[eel]<=0.1", "a class's constraint bounds its recall or precision, not 'fpr'"),
])
def test_constraints_on_k_classes_are_one_line_and_exit_2(files, tmp_path, constraint, message):
    folder, _ = files
    model = tmp_path / "never.npz"
    result = runner.invoke(app, ["train", str(folder / "train.csv"), "-m", "gmean", "-c", constraint, "-o",
                                 str(model)])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not model.exists()


def test_a_class_s_recall_constraint_is_met_by_the_rule_and_reported(files):
    """``-c "recall[eel]>=0.9"``: the rule is chosen under it; the line under the table and --json's
    ``decision.constraints`` give its value on the out-of-fold probabilities (met) beside the argmax's,
    and the test rows' recall of eel (counted here from --json's per-class recalls) is near it."""
    folder, _ = files
    args = ["train", str(folder / "train.csv"), "--test", str(folder / "test.csv"), "-m", "gmean"]
    plain = _json(runner.invoke(app, [*args, "--json"]))
    out = _json(runner.invoke(app, [*args, "-c", "recall[eel]>=0.9", "--json"]))
    (entry,) = out["decision"]["constraints"]
    assert entry["constraint"] == "recall[eel]>=0.9" and entry["satisfied"] and entry["value"] >= 0.9
    assert entry["argmax"] < 0.9
    recall = out["test"]["recall"]
    before = plain["test"]["recall"]
    assert recall["eel"] >= 0.8 and recall["eel"] > before["eel"]
    text = runner.invoke(app, [*args, "-c", "recall[eel]>=0.9"])
    assert text.exit_code == 0 and "recall[eel]>=0.9: " in text.output and "(met; the argmax's" in text.output

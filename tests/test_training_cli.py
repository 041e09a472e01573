"""calopt train / evaluate / predict through the CLI, as a user runs them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file
from sklearn.metrics import f1_score, jaccard_score
from typer.testing import CliRunner

from calopt_cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small imbalanced LIBSVM train file and a test file with fewer features."""
    folder = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 6))
    y = np.where(X[:, 0] - 0.5 * X[:, 3] + 0.3 * rng.normal(size=600) > 1.0, 1, -1)
    dump_svmlight_file(X, y, str(folder / "train.svm"))
    X_test = rng.normal(size=(200, 6))
    X_test[:, 5] = 0.0  # the last feature never appears: the file has 5 columns
    y_test = np.where(X_test[:, 0] - 0.5 * X_test[:, 3] > 1.0, 1, -1)
    dump_svmlight_file(X_test, y_test, str(folder / "test.svm"))
    return folder, y_test


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_train_json_has_the_documented_fields(files, tmp_path):
    folder, _ = files
    model = tmp_path / "m.npz"
    out = _json(runner.invoke(app, ["train", str(folder / "train.svm"), "--test", str(folder / "test.svm"),
                                    "--measure", "f1", "--epochs", "3", "--model-out", str(model), "--json"]))
    assert out["measure"] == "f1" and out["algorithm"].startswith("lbfgs")
    assert out["backend"] == "numpy" and out["epochs"] == 3 and out["fit_seconds"] > 0
    for split in ("train", "test"):
        assert set(out[split]) == {"value", "tpr", "tnr"} and 0 <= out[split]["value"] <= 1
    assert [row["epoch"] for row in out["history"]] == [1, 2, 3]
    assert all({"train", "test", "seconds"} <= set(row) for row in out["history"])
    assert model.is_file()


def test_evaluate_and_predict_agree_with_sklearn(files, tmp_path):
    folder, y_test = files
    model = tmp_path / "m.npz"
    _json(runner.invoke(app, ["train", str(folder / "train.svm"), "--measure", "jaccard",
                              "--epochs", "3", "--model-out", str(model), "--json"]))
    predictions = tmp_path / "pred.txt"
    result = runner.invoke(app, ["predict", str(model), str(folder / "test.svm"), "--out", str(predictions)])
    assert result.exit_code == 0, result.output
    predicted = np.loadtxt(predictions)
    assert predicted.shape == (200,) and set(np.unique(predicted)) <= {-1, 1}
    out = _json(runner.invoke(app, ["evaluate", str(model), str(folder / "test.svm"),
                                    "-m", "f1", "-m", "jaccard", "--json"]))
    values = {r["measure"]: r["value"] for r in out["measures"]}
    assert values["f1"] == pytest.approx(f1_score(y_test, predicted))
    assert values["jaccard"] == pytest.approx(jaccard_score(y_test, predicted))
    scores = runner.invoke(app, ["predict", str(model), str(folder / "test.svm"), "--scores"])
    assert scores.exit_code == 0
    np.testing.assert_array_equal(np.loadtxt(scores.stdout.splitlines()) > 0, predicted > 0)


def test_train_without_data_uses_the_embedded_a9a():
    out = _json(runner.invoke(app, ["train", "--measure", "qmean", "--json"]))
    assert out["algorithm"].startswith("lbfgs") and out["test"]["value"] > 0.7


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--epochs", "0"], "epochs"),
        (["--batch-size", "-3"], "batch-size"),
        (["--algorithm", "spad"], "did you mean 'spade'"),
        (["--algorithm", "spade", "--measure", "f1"], "concave"),
        (["--measure", "fbeta:beta=-1"], "beta"),
        (["--loss", "squared", "--measure", "gmean", "--algorithm", "spade"], "reward"),
        (["--backend", "cupi"], "did you mean 'cupy'"),
    ],
)
def test_bad_options_are_one_line_errors_and_write_nothing(files, tmp_path, arguments, message):
    folder, _ = files
    model = tmp_path / "never.npz"
    result = runner.invoke(app, ["train", str(folder / "train.svm"), "--model-out", str(model), *arguments])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not model.exists() and list(tmp_path.iterdir()) == []


def test_test_file_with_more_features_is_an_error(files, tmp_path):
    folder, _ = files
    wide = tmp_path / "wide.svm"
    wide.write_text("1 9:1.0\n-1 1:0.5\n")
    result = runner.invoke(app, ["train", str(folder / "train.svm"), "--test", str(wide)])
    # read with the zero-based training file's base (dump_svmlight_file writes zero-based): 10 columns
    assert result.exit_code == 2 and "10 features" in result.stderr


def test_predict_rejects_a_file_that_is_not_a_model(files, tmp_path):
    folder, _ = files
    fake = tmp_path / "fake.npz"
    fake.write_bytes(b"not a model at all")
    result = runner.invoke(app, ["predict", str(fake), str(folder / "test.svm")])
    assert result.exit_code == 2 and "fake.npz" in result.stderr


# -- the progress bar ---------------------------------------------------------------------


def _record(epoch):
    return type("Record", (), {"epoch": epoch, "seconds": 0.01})()


@pytest.mark.parametrize(("epochs", "completed"), [
    ([1, 2, 3], 3),  # a fresh run
    ([6, 7, 8], 8),  # resumed after epoch 5: the bar starts part-way
    ([1, 2, 1, 2, 1, 2], 6),  # one-vs-rest: each class counts its own epochs from 1
])
def test_progress_bar_counts_epochs(epochs, completed):
    from calopt_cli.progress import epoch_progress

    with epoch_progress(10, enabled=True) as on_epoch:
        for epoch in epochs:
            on_epoch(_record(epoch))
        task = on_epoch.progress.tasks[0]
        assert (task.completed, task.total) == (completed, 10)
    assert on_epoch.progress.live.is_started is False  # stopped when the block ends


def test_progress_bar_is_stopped_when_training_fails():
    from calopt_cli.progress import epoch_progress

    with pytest.raises(RuntimeError), epoch_progress(3, enabled=True) as on_epoch:
        on_epoch(_record(1))
        raise RuntimeError("training failed")
    assert on_epoch.progress.live.is_started is False


def test_disabled_progress_bar_does_nothing():
    from calopt_cli.progress import epoch_progress

    with epoch_progress(3, enabled=False) as on_epoch:
        assert on_epoch(_record(1)) is None
        assert not hasattr(on_epoch, "progress")


def test_text_trains_in_float32_and_says_so(tmp_path):
    """Sparse rows with many columns train in float32 unless --dtype is given; the run's caption
    and its JSON say which."""
    import scipy.sparse

    rng = np.random.default_rng(4)
    X = scipy.sparse.random(1500, 3000, density=0.003, random_state=5, format="csr")
    y = np.where(np.asarray(X @ rng.standard_normal(3000)).ravel() + 0.3 * rng.standard_normal(1500) > 0.4, 1, -1)
    path = tmp_path / "text.svm"
    dump_svmlight_file(X, y, str(path))
    shown = runner.invoke(app, ["train", str(path), "-m", "f1"])
    assert shown.exit_code == 0, shown.output
    assert "numpy float32," in shown.output
    assert _json(runner.invoke(app, ["train", str(path), "-m", "f1", "--json"]))["dtype"] == "float32"
    asked = runner.invoke(app, ["train", str(path), "-m", "f1", "--dtype", "float64"])
    assert asked.exit_code == 0 and "numpy, " in asked.output and "float32" not in asked.output

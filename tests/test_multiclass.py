"""Multiclass one-vs-rest: MulticlassModel against scikit-learn, model files, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from imblearn.metrics import geometric_mean_score
from sklearn.metrics import f1_score, jaccard_score, recall_score, top_k_accuracy_score
from typer.testing import CliRunner

import calopt
from calopt.errors import DataError, ModelFileError
from calopt.models.linear import LinearModel, load_model
from calopt.models.linear import MulticlassModel
from calopt.models.report import FitReport
from calopt_cli.app import app

runner = CliRunner()


def _blobs(n=300, d=4, classes=5, *, seed=0, spread=1.5, labels=None):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, d)) * 2.0
    codes = rng.integers(0, classes, n)
    X = centers[codes] + spread * rng.normal(size=(n, d))
    names = np.asarray(labels) if labels is not None else np.arange(classes)
    return X, names[codes]


def _random_model(d=4, classes=("a", "b", "c", "d", "e"), seed=1):
    rng = np.random.default_rng(seed)
    return MulticlassModel(coef=rng.normal(size=(d, len(classes))), intercept=rng.normal(size=len(classes)),
                           classes=tuple(classes), measure="f1", algorithm="slnd", loss="calibrated-hinge",
                           scale=np.ones(d), fit_report=FitReport(epochs=3, rank=2),
                           history=[{"epoch": 1, "seconds": 0.5, "train": 0.4}], fit_seconds=0.5)


# -- accuracy and measures against scikit-learn --------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_top_k_accuracy_matches_sklearn(k):
    model = _random_model()
    X, y = _blobs(400, 4, 5, seed=2, labels=list("abcde"))
    expected = top_k_accuracy_score(y, np.asarray(model.decision_function(X)), k=k, labels=list("abcde"))
    assert model.top_k_accuracy(X, y, k) == pytest.approx(expected)
    assert model.evaluate(X, y, top=(k,))[f"top{k}"] == pytest.approx(expected)


def test_per_class_measures_match_sklearn_on_the_binarised_predictions():
    X, y = _blobs(500, 4, 5, seed=3)
    model = calopt.fit_multiclass(X, y, epochs=3)
    predicted = model.predict(X)
    result = model.evaluate(X, y, ["f1", "jaccard", "gmean", "min"])
    references = {
        "f1": lambda t, p: f1_score(t, p, zero_division=0),
        "jaccard": lambda t, p: jaccard_score(t, p, zero_division=0),
        "gmean": geometric_mean_score,
        "min": lambda t, p: min(recall_score(t, p), recall_score(~t, ~p)),
    }
    assert [entry["measure"] for entry in result["measures"]] == ["f1", "jaccard", "gmean", "min"]
    for entry in result["measures"]:
        expected = {str(c): references[entry["measure"]](y == c, predicted == c) for c in range(5)}
        assert entry["per_class"] == pytest.approx(expected)
        assert entry["macro"] == pytest.approx(np.mean(list(expected.values())))
    # top-1 ranks the scores; the predictions are the rule's for the measure (macro F1 here)
    assert result["top1"] == pytest.approx(np.mean(np.argmax(model.decision_function(X), axis=1) == y))
    assert result["accuracy"] == pytest.approx(np.mean(predicted == y))
    assert result["measures"][0]["value"] == pytest.approx(f1_score(y, predicted, average="macro"))
    assert result["recall"] == pytest.approx(dict(zip(map(str, range(5)), recall_score(y, predicted, average=None))))


def test_a_class_never_predicted_scores_zero_like_sklearn():
    model = _random_model(classes=("a", "b", "c"))
    model.intercept = np.array([50.0, 0.0, -50.0])  # always "a"
    X, y = _blobs(60, 4, 3, seed=4, labels=["a", "b", "c"])
    per_class = model.evaluate(X, y)["measures"][0]["per_class"]
    assert per_class["c"] == 0.0 == f1_score(y == "c", model.predict(X) == "c", zero_division=0)


def test_unknown_labels_are_a_one_line_error():
    model = _random_model(classes=("a", "b", "c"))
    X, _ = _blobs(3, 4, 3)
    with pytest.raises(DataError, match="row 3: label z is not one of the model's classes"):
        model.evaluate(X, np.array(["a", "b", "z"]))


# -- training ---------------------------------------------------------------------------------


def test_fit_multiclass_keeps_the_original_labels_and_the_feature_space():
    X, y = _blobs(400, 3, 4, seed=5, spread=1.0, labels=["cat", "dog", "emu", "yak"])
    X = X * np.array([1.0, 100.0, 0.01])  # scaling is folded into coef
    model = calopt.fit_multiclass(X, y, epochs=5, measure="accuracy")  # accuracy: the argmax
    assert model.classes == ("cat", "dog", "emu", "yak")
    assert set(model.predict(X)) <= set(model.classes)
    assert model.coef.shape == (3, 4) and model.intercept.shape == (4,)
    scores = X @ model.coef + model.intercept
    np.testing.assert_array_equal(model.predict(X), np.asarray(model.classes)[scores.argmax(axis=1)])
    assert model.top_k_accuracy(X, y) > 0.8


def test_other_algorithms_train_one_class_at_a_time_through_fit():
    X, y = _blobs(240, 3, 3, seed=6)
    model = calopt.fit_multiclass(X, y, algorithm="plugin", measure="f1", epochs=2)
    for c in range(3):
        binary = calopt.fit(X, np.where(y == c, 1.0, -1.0), algorithm="plugin", measure="f1", epochs=2)
        spread = np.std(X @ binary.coef + binary.intercept)  # each class: its tuned rule, in units of its spread
        np.testing.assert_allclose(model.coef[:, c], binary.coef / spread)
        assert model.intercept[c] == pytest.approx(binary.intercept / spread)
    assert len(model.history) == 2


def test_fit_multiclass_needs_two_classes():
    X, _ = _blobs(20, 3, 2)
    with pytest.raises(DataError, match="only one class"):
        calopt.fit_multiclass(X, np.zeros(20))


# -- model files ------------------------------------------------------------------------------


@pytest.mark.parametrize("classes", [("a", "b", "c", "d", "e"), (0, 1, 2, 3, 4), (1.5, 2.0, 3.0, 7.0, 9.0)])
def test_model_file_round_trip(tmp_path, classes):
    model = _random_model(classes=classes)
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = load_model(path)
    assert isinstance(loaded, MulticlassModel)
    np.testing.assert_array_equal(loaded.coef, model.coef)
    np.testing.assert_array_equal(loaded.intercept, model.intercept)
    assert loaded.classes == model.classes
    assert (loaded.algorithm, loaded.loss, loaded.measure, loaded.fit_report) == (
        model.algorithm, model.loss, model.measure, model.fit_report)
    assert loaded.history == [{"epoch": 1, "train": 0.4}]  # timings stay out of the file
    X, _ = _blobs(50, 4, 5)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    model.save(tmp_path / "again.npz")
    assert (tmp_path / "again.npz").read_bytes() == path.read_bytes()


def test_load_model_dispatches_on_the_format(tmp_path):
    X, y = _blobs(100, 3, 2, seed=7)
    binary = calopt.fit(X, y, epochs=2)
    binary.save(tmp_path / "binary.npz")
    _random_model().save(tmp_path / "multi.npz")
    assert isinstance(load_model(tmp_path / "binary.npz"), LinearModel)
    assert isinstance(load_model(tmp_path / "multi.npz"), MulticlassModel)
    with pytest.raises(ModelFileError, match="not a calopt model file"):
        LinearModel.load(tmp_path / "multi.npz")
    with pytest.raises(ModelFileError, match="not a calopt multiclass model file"):
        MulticlassModel.load(tmp_path / "binary.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match="junk.npz"):
        load_model(tmp_path / "junk.npz")


def test_a_tampered_model_file_is_refused(tmp_path):
    path = tmp_path / "model.npz"
    model = _random_model()
    model.save(path)
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays["intercept"] = arrays["intercept"] + 1.0
    np.savez(path, **arrays)
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        load_model(path)


# -- the command line ---------------------------------------------------------------------------


@pytest.fixture
def letters_csv(tmp_path):
    X, y = _blobs(600, 4, 6, seed=8, spread=1.0, labels=list("ABCDEF"))
    lines = [",".join(f"{v:.5f}" for v in row) + f",{label}" for row, label in zip(X, y)]
    (tmp_path / "train.csv").write_text("\n".join(lines[:400]) + "\n")
    (tmp_path / "test.csv").write_text("\n".join(lines[400:]) + "\n")
    return tmp_path


def test_cli_train_reports_top_k_and_per_class_measures(letters_csv):
    out = letters_csv / "model.npz"
    result = runner.invoke(app, ["train", str(letters_csv / "train.csv"), "--test", str(letters_csv / "test.csv"),
                                 "--measure", "gmean", "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["algorithm"] == "multinomial" and report["classes"] == list("ABCDEF")
    test = report["test"]
    assert set(test) >= {"top1", "top5", "per_class", "macro", "measure"}
    assert test["measure"] == "gmean" and set(test["per_class"]) == set("ABCDEF")
    assert test["macro"] == pytest.approx(np.mean(list(test["per_class"].values())))
    assert 0.7 < test["top1"] <= test["top5"] <= 1.0
    assert len(report["history"]) == report["epochs"] and "test" in report["history"][-1]
    assert report["status"].startswith("converged after")
    model = load_model(out)
    X_test = np.loadtxt(letters_csv / "test.csv", delimiter=",", usecols=range(4))
    y_test = np.loadtxt(letters_csv / "test.csv", delimiter=",", usecols=4, dtype=str)
    assert model.top_k_accuracy(X_test, y_test, 1) == pytest.approx(test["top1"])

    evaluated = runner.invoke(app, ["evaluate", str(out), str(letters_csv / "test.csv"), "-m", "gmean", "--json"])
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["top1"] == pytest.approx(test["top1"])
    predicted = runner.invoke(app, ["predict", str(out), str(letters_csv / "test.csv")])
    assert predicted.exit_code == 0 and predicted.stdout.split() == list(model.predict(X_test))
    scores = runner.invoke(app, ["predict", str(out), str(letters_csv / "test.csv"), "--scores"])
    assert np.loadtxt(scores.stdout.splitlines()).shape == (200, 6)


def test_cli_train_prints_tables_and_refuses_binary_options(letters_csv):
    train = str(letters_csv / "train.csv")
    result = runner.invoke(app, ["train", train, "--no-progress", "--epochs", "2"])
    assert result.exit_code == 0, result.output
    assert "top-1" in result.stdout and "per class" in result.stdout
    refused = runner.invoke(app, ["train", train, "--positive", "A"])
    assert refused.exit_code == 2
    assert "calopt: error: positive='A': a positive class is for two-class labels" in refused.stderr
    assert "6 classes" in refused.stderr


# -- the default multiclass solver: the multinomial objective of LogisticRegression ---------------
@pytest.mark.parametrize("sparse, weighted", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_multinomial_reaches_logistic_regression(C, sparse, weighted):
    """Run to convergence, ``multinomial`` minimises the softmax loss + ‖W‖²/(2C) exactly as
    scikit-learn's multiclass LogisticRegression(lbfgs) does: the same weights, intercepts
    (both keep them summing to 0, the unpenalised direction the loss cannot see) and labels."""
    import scipy.sparse
    from sklearn.linear_model import LogisticRegression

    X, y = _blobs(240, 5, 4, seed=11, spread=2.0, labels=list("pqrs"))
    weight = np.random.default_rng(2).integers(1, 4, y.size).astype(float) if weighted else None
    X_in = scipy.sparse.csr_matrix(X) if sparse else X
    model = calopt.fit(X_in, y, measure="accuracy", algorithm=f"multinomial:C={C},tol=0", epochs=200,
                       select="none", scale=False,
                       sample_weight=weight)
    # calopt rescales the weights to mean 1: the same objective as C·mean(weight) in scikit-learn's sum
    scale = 1.0 if weight is None else float(np.mean(weight))
    reference = LogisticRegression(C=C / scale, tol=1e-12, max_iter=10_000).fit(X, y, sample_weight=weight)
    assert model.classes == tuple(reference.classes_)
    np.testing.assert_allclose(model.coef, reference.coef_.T, atol=1e-5)
    np.testing.assert_allclose(model.intercept, reference.intercept_, atol=1e-5)
    np.testing.assert_array_equal(model.predict(X), reference.predict(X))


def test_multinomial_stops_at_scikit_learns_tolerance():
    """With ``tol`` (default 1e-4, scikit-learn's) training ends by itself once max |∇f| is that
    small, well before the cap, and the model then matches LogisticRegression's at its tol."""
    from sklearn.linear_model import LogisticRegression

    X, y = _blobs(300, 4, 3, seed=4, spread=2.5)
    model = calopt.fit(X, y, algorithm="multinomial", epochs=500, select="none", scale=False)
    assert len(model.history) < 500 and model.status == 0 and model.message.startswith("converged")
    reference = LogisticRegression().fit(X, y)
    np.testing.assert_allclose(model.coef, reference.coef_.T, atol=5e-3)


@pytest.mark.parametrize("batch_size", [None, 50])
def test_multinomial_history_top1_is_the_models_own_on_the_training_rows(batch_size):
    """The training top-1 of every history row, which the passes count for free, is the share of
    training rows the epoch's model predicts right (argmax, ties to the first class as predict
    does: the first epoch's model is 0, every row a tie), computed here from the weights."""
    X, y = _blobs(300, 4, 5, seed=6, spread=2.5)
    seen = []
    model = calopt.fit(X, y, measure="accuracy", algorithm="multinomial", epochs=12, select="none", scale=False,
                       batch_size=batch_size, callback=lambda info: seen.append([np.asarray(a) for a in info.weights]))
    codes = np.searchsorted(np.asarray(model.classes), y)
    expected = [np.mean(np.argmax(X @ w + b, axis=1) == codes) for w, b in seen]
    assert expected[0] == np.mean(codes == 0)  # the zero model: all ties, the first class
    np.testing.assert_allclose([row["train"] for row in model.history], expected, rtol=0, atol=1e-12)
    assert model.history[-1]["train"] == np.mean(model.predict(X) == y)


MULTICLASS_ONLY = [entry.name for entry in calopt.list_algorithms() if not entry.component.binary]


@pytest.mark.parametrize("name", MULTICLASS_ONLY)
def test_multiclass_only_algorithms_match_numpy_on_every_backend(name, backend):
    """The conformance of test_conformance.py for the algorithms that train every class at once:
    the same model on every backend's own arrays, the input left as it was."""
    X, labels = _blobs(240, 5, 4, seed=13)
    X_host = X.copy()
    X_in = backend.asarray(X)
    reference = calopt.fit(X, labels, algorithm=name, epochs=4, batch_size=16, select="none")
    model = calopt.fit(X_in, labels, algorithm=name, epochs=4, batch_size=16, select="none")
    assert model.fit_report.backend == backend.backend.name
    np.testing.assert_allclose(model.coef, reference.coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.intercept, reference.intercept, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), reference.predict(X))
    np.testing.assert_array_equal(backend.to_numpy(X_in), X_host)


@pytest.mark.parametrize("device, dtype", [("device1", "float64"), ("no_float64", "float32")])
@pytest.mark.parametrize("name", MULTICLASS_ONLY)
def test_multiclass_only_algorithms_keep_to_the_data_device(name, device, dtype):
    """On array-api-strict's second device, or one without float64, they train there and reach
    NumPy's model in that dtype."""
    strict = pytest.importorskip("array_api_strict")
    X, labels = _blobs(240, 5, 4, seed=13)
    on = strict.Device(device)
    model = calopt.fit(strict.asarray(X.astype(dtype), device=on), labels, algorithm=name, epochs=4, seed=1)
    assert model.status >= 0, model.message
    reference = calopt.fit(X.astype(dtype), labels, algorithm=name, epochs=4, seed=1)
    rtol = 1e-9 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(model.coef, reference.coef, rtol=rtol, atol=rtol)
    assert model.decision_function(strict.asarray(X.astype(dtype), device=on)).device == on

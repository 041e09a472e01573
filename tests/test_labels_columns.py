"""Issue 23, items 1-3: the positive class, labels of any dtype, CSV columns by name.

The positive class of labels other than {0, 1}, {-1, 1} and {False, True} is the smaller
class, and every output names it; labels of any pandas or NumPy dtype train, a missing one
(in a Python column or a Parquet file) is a one-line error naming its row; a model trained
on a CSV with a header reads later CSV files by column name. Values are checked against
scikit-learn's metrics and plain NumPy computed here, never against calopt's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import recall_score
from typer.testing import CliRunner

import calopt
from calopt.errors import DataError, ModelFileError
from calopt.io.labels import encode_binary
from calopt.models.archive import load_archive, save_archive
from calopt.models.linear import LinearModel, load_model
from calopt_cli.app import app

pd = pytest.importorskip("pandas")

runner = CliRunner()
FEATURES = ["amount", "age", "score"]
#: What every quick CLI training run here adds (the model's quality is not the point).
QUICK = ("--select", "none", "--epochs", "3", "--no-progress")


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def assert_one_line_error(result, *fragments: str) -> str:
    """Exit code 2 and one ``calopt: error:`` line holding ``fragments``, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calopt: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def fraud_frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Three features and a label column ``kind``: 'fraud' (about 12%, the rare class) or 'ok'."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    rare = X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 1.4
    frame = pd.DataFrame(X, columns=FEATURES)
    frame["kind"] = np.where(rare, "fraud", "ok")
    return frame


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """train.csv and test.csv (label column last), and the test rows with their columns reordered."""
    frame = fraud_frame()
    train, test = frame.iloc[:300], frame.iloc[300:]
    paths = {name: tmp_path / f"{name}.csv" for name in ("train", "test", "reordered", "unlabelled")}
    train.to_csv(paths["train"], index=False)
    test.to_csv(paths["test"], index=False)
    test[["score", "kind", "amount", "age"]].to_csv(paths["reordered"], index=False)
    test[["age", "score", "amount"]].to_csv(paths["unlabelled"], index=False)
    return paths


def trained(files: dict[str, Path], *options: str) -> Path:
    model = files["train"].with_name("model.npz")
    result = invoke("train", files["train"], "-o", model, *QUICK, *options)
    assert result.exit_code == 0, result.output
    return model


def predictions(model: Path, data: Path) -> list[str]:
    result = invoke("predict", model, data)
    assert result.exit_code == 0, result.output
    return result.stdout.split()


# -------------------- the positive class


def test_the_rare_class_is_positive_and_its_recall_is_reported(files):
    """The issue's reproduction: recall of 'fraud' (the rare class), not of 'ok', and the JSON says which."""
    model = files["train"].with_name("model.npz")
    result = invoke("train", files["train"], "--test", files["test"], "-o", model, "--measure", "recall",
                    "--constraint", "precision>=0.5", "--json", *QUICK)
    assert result.exit_code in (0, 3), result.output
    report = json.loads(result.stdout)
    assert report["positive"] == "fraud"
    truth = pd.read_csv(files["test"])["kind"]
    expected = recall_score(truth, predictions(model, files["test"]), pos_label="fraud")
    assert report["test"]["tpr"] == pytest.approx(expected)
    assert np.mean(truth == "fraud") < 0.2  # the rare class indeed


@pytest.mark.parametrize(("labels", "positive"), [
    (["ok"] * 9 + ["fraud"], "fraud"),
    (["a"] + ["b"] * 4, "a"),
    ([4.0, 4.0, 2.0, 4.0], 2.0),  # numbers other than {0, 1} and {-1, 1}: the smaller class too
    ([1, 1, 1, 0], 1),  # {0, 1}: 1, even when it is the larger class
    ([-1.0, 1.0, 1.0], 1.0),
    ([True, True, False], True),
    (np.array(["0", "1", "1"]), "1"),  # the same as text
])
def test_default_positive_class(labels, positive):
    y, (negative, chosen) = encode_binary(labels)
    assert chosen == positive and type(chosen) is type(positive)
    np.testing.assert_array_equal(y, np.where(np.asarray(labels) == positive, 1.0, -1.0))
    assert negative != positive


def test_classes_of_equal_size_ask_for_the_positive_class(files, tmp_path):
    frame = fraud_frame()
    frame["kind"] = np.where(np.arange(len(frame)) % 2 == 0, "left", "right")
    path = tmp_path / "even.csv"
    frame.to_csv(path, index=False)
    assert_one_line_error(invoke("train", path, *QUICK), "even.csv", "200 rows each", "--positive")
    with pytest.raises(DataError, match="positive="):
        calopt.fit(frame[FEATURES].to_numpy(), frame["kind"].to_numpy(), select="none", epochs=2)
    result = invoke("train", path, "--positive", "left", "--json", *QUICK)
    assert result.exit_code == 0 and json.loads(result.stdout)["positive"] == "left"


def test_a_stream_chooses_the_same_positive_class(files):
    frame = fraud_frame()
    chunks = [(frame[FEATURES].to_numpy()[start:start + 100], frame["kind"].to_numpy()[start:start + 100])
              for start in range(0, len(frame), 100)]

    assert calopt.fit(chunks, epochs=1).positive == "fraud"
    result = invoke("train", files["train"], "--stream", "--epochs", "1", "--json", "--no-progress")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["positive"] == "fraud"


def test_a_dask_run_chooses_the_same_positive_class():
    distributed = pytest.importorskip("distributed")
    frame = fraud_frame(300)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        model = calopt.fit(frame[FEATURES].to_numpy(), frame["kind"], cluster=client, epochs=2)
    assert model.positive == "fraud"


def test_score_names_the_positive_class(tmp_path):
    truth = ["ok", "ok", "fraud", "ok", "fraud", "ok", "ok"]
    said = ["ok", "fraud", "fraud", "ok", "ok", "ok", "ok"]
    (tmp_path / "y.txt").write_text("\n".join(truth) + "\n")
    (tmp_path / "p.txt").write_text("\n".join(said) + "\n")
    result = invoke("score", tmp_path / "y.txt", tmp_path / "p.txt", "-m", "recall", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["positive"] == "fraud"
    assert report["value"] == pytest.approx(recall_score(truth, said, pos_label="fraud"))


def test_every_output_names_the_positive_class(files):
    model_path = trained(files)
    assert load_archive(model_path, format=LinearModel.FORMAT, version=1)[1]["positive"] == "fraud"
    table = invoke("train", files["train"], *QUICK)
    assert "positive class fraud" in " ".join(table.stdout.split())
    evaluated = invoke("evaluate", model_path, files["test"], "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["positive"] == "fraud"
    assert "positive class fraud" in " ".join(invoke("evaluate", model_path, files["test"]).stdout.split())
    compared = invoke("compare", files["train"], "--test", files["test"], "--algorithm", "lbfgs", "--epochs", "2",
                      "--json")
    assert compared.exit_code == 0, compared.output
    assert json.loads(compared.stdout)["positive"] == "fraud"


def test_a_model_file_without_the_positive_key_still_loads(files, tmp_path):
    """Files of before issue 23 have classes (negative, positive) and no ``positive``; a forged one is refused."""
    arrays, metadata = load_archive(trained(files), format=LinearModel.FORMAT, version=1)
    old = tmp_path / "old.npz"
    save_archive(old, arrays, {key: value for key, value in metadata.items() if key != "positive"})
    assert load_model(old).positive == "fraud"
    forged = tmp_path / "forged.npz"
    save_archive(forged, arrays, {**metadata, "positive": "ok"})
    with pytest.raises(ModelFileError, match="positive"):
        load_model(forged)


# -------------------- labels of any dtype


LABEL_DTYPES = ["object", "string[python]", "string[pyarrow]", "category", "str", "numpy-unicode"]


def as_labels(values, dtype: str):
    return np.asarray(values, dtype=str) if dtype == "numpy-unicode" else pd.Series(values, dtype=dtype)


@pytest.mark.parametrize("dtype", LABEL_DTYPES)
def test_text_labels_of_any_dtype_train_the_same_model(dtype):
    frame = fraud_frame(200)
    X = frame[FEATURES].to_numpy()
    reference = calopt.fit(X, list(frame["kind"]), select="none", epochs=2)
    model = calopt.fit(X, as_labels(frame["kind"], dtype), select="none", epochs=2)
    assert model.classes == ("ok", "fraud") and all(type(c) is str for c in model.classes)
    np.testing.assert_array_equal(model.coef, reference.coef)
    np.testing.assert_array_equal(model.predict(X), reference.predict(X))


@pytest.mark.parametrize(("values", "dtype", "classes"), [
    ([True, False, False, False], "bool", (False, True)),
    ([3, 7, 7, 7], "int64", (7, 3)),
    ([3.5, 7.0, 7.0, 7.0], "float64", (7.0, 3.5)),
    ([3, 7, 7, 7], "Int64", (7, 3)),
    ([True, False, False, False], "boolean", (False, True)),
    ([3, 7, 7, 7], "category", (7, 3)),
])
def test_other_label_dtypes(values, dtype, classes):
    _, found = encode_binary(pd.Series(values * 10, dtype=dtype))
    assert found == classes


@pytest.mark.parametrize("dtype", [*LABEL_DTYPES, "Int64", "float64", "boolean", "category-int"])
def test_a_missing_label_is_an_error_naming_its_row(dtype):
    frame = fraud_frame(40)
    if dtype in ("Int64", "float64", "category-int"):
        values = [1.0 if kind == "fraud" else 0.0 for kind in frame["kind"]]
    elif dtype == "boolean":
        values = list(frame["kind"] == "fraud")
    else:
        values = list(frame["kind"])
    values[6] = None
    labels = (pd.Series(values, dtype="category") if dtype == "category-int" else
              np.array(values, dtype=object) if dtype == "numpy-unicode" else pd.Series(values, dtype=dtype))
    with pytest.raises(DataError, match=r"^training labels: row 7: the label is missing"):
        calopt.fit(frame[FEATURES].to_numpy(), labels, select="none", epochs=2)


@pytest.mark.parametrize("missing", [None, float("nan"), "NA", "NaT"])
def test_each_kind_of_missing_value_is_found(missing):
    value = {"NA": pd.NA, "NaT": pd.NaT}.get(missing, missing) if isinstance(missing, str) else missing
    labels = pd.Series(["a", "b", "b", value, "b"], dtype=object)
    with pytest.raises(DataError, match="row 4: the label is missing"):
        encode_binary(labels)


def test_text_mixed_with_numbers_is_an_error():
    with pytest.raises(DataError, match="row 2"):
        encode_binary(pd.Series([1, "fraud", 1, 1], dtype=object))


@pytest.mark.parametrize("kind", ["text", "numbers"])
def test_null_labels_in_a_parquet_file_are_an_error(tmp_path, kind):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    labels = ["ok" if i % 5 else "fraud" for i in range(50)] if kind == "text" else [float(i % 5 == 0)
                                                                                         for i in range(50)]
    labels[12] = None
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"a": np.arange(50.0), "b": np.ones(50), "class": pa.array(labels)}), path,
                   row_group_size=10)
    assert_one_line_error(invoke("train", path, "--stream", "--no-progress"), "nulls.parquet", "row 13",
                          "'class'", "missing")
    converted = tmp_path / "converted"
    assert_one_line_error(invoke("convert", path, converted), "nulls.parquet", "row 13", "'class'")
    assert not converted.exists()


# -------------------- columns by name


def by_hand(model_path: Path, frame: pd.DataFrame) -> list[str]:
    """The model's predictions on ``frame`` computed here: its coefficients in the model's feature order."""
    model = load_model(model_path)
    scores = frame[model.feature_names].to_numpy() @ model.coef + model.intercept
    return [model.classes[1] if s > 0 else model.classes[0] for s in scores]


def test_reordered_columns_give_the_same_predictions(files):
    """The issue's reproduction: predict on the test file with its columns reordered."""
    model = trained(files)
    assert load_model(model).feature_names == FEATURES
    expected = by_hand(model, pd.read_csv(files["test"]))
    assert predictions(model, files["test"]) == expected
    assert predictions(model, files["reordered"]) == expected
    assert predictions(model, files["unlabelled"]) == expected


def test_evaluate_finds_the_label_column_by_name(files):
    model = trained(files)
    result = invoke("evaluate", model, files["reordered"], "--measure", "recall", "--json")
    assert result.exit_code == 0, result.output
    truth = pd.read_csv(files["test"])["kind"]
    expected = recall_score(truth, by_hand(model, pd.read_csv(files["test"])), pos_label="fraud")
    assert json.loads(result.stdout)["measures"][0]["value"] == pytest.approx(expected)


def test_train_reads_its_test_file_by_name(files):
    plain = invoke("train", files["train"], "--test", files["test"], "--json", *QUICK)
    reordered = invoke("train", files["train"], "--test", files["reordered"], "--json", *QUICK)
    assert plain.exit_code == reordered.exit_code == 0, reordered.output
    assert json.loads(plain.stdout)["test"] == json.loads(reordered.stdout)["test"]


def test_a_missing_or_unknown_column_is_an_error_naming_it(files, tmp_path):
    model = trained(files)
    test = pd.read_csv(files["test"])
    missing, extra = tmp_path / "missing.csv", tmp_path / "extra.csv"
    test.drop(columns="age").to_csv(missing, index=False)
    test.assign(height=1.0).to_csv(extra, index=False)
    for command in ("predict", "evaluate"):
        assert_one_line_error(invoke(command, model, missing), "missing.csv", "'age'")
        assert_one_line_error(invoke(command, model, extra), "extra.csv", "'height'")


def test_a_file_without_its_header_needs_no_header_to_be_read_by_position(files, tmp_path):
    model = trained(files)
    bare = tmp_path / "bare.csv"
    pd.read_csv(files["test"]).to_csv(bare, index=False, header=False)
    assert_one_line_error(invoke("predict", model, bare), "bare.csv", "--no-header")
    result = invoke("predict", model, bare, "--no-header")
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == by_hand(model, pd.read_csv(files["test"]))


def test_a_model_trained_without_a_header_reads_by_position(files, tmp_path):
    bare_train, bare_test = tmp_path / "bare_train.csv", tmp_path / "bare_test.csv"
    pd.read_csv(files["train"]).to_csv(bare_train, index=False, header=False)
    pd.read_csv(files["test"]).to_csv(bare_test, index=False, header=False)
    model = tmp_path / "bare.npz"
    assert invoke("train", bare_train, "-o", model, *QUICK).exit_code == 0
    loaded = load_model(model)
    assert loaded.feature_names is None and loaded.fit_report.data.feature_names is None
    scores = pd.read_csv(files["test"])[FEATURES].to_numpy() @ loaded.coef + loaded.intercept
    assert predictions(model, bare_test) == [loaded.classes[int(s > 0)] for s in scores]


def test_fit_on_a_data_frame_records_its_column_names(files):
    frame = fraud_frame(200)
    model = calopt.fit(frame[FEATURES], frame["kind"], select="none", epochs=2)
    assert model.feature_names == FEATURES
    assert calopt.fit(frame[FEATURES].to_numpy(), frame["kind"], select="none", epochs=2).feature_names is None
    reordered = frame[["score", "amount", "age"]]
    expected = np.where(frame[FEATURES].to_numpy() @ model.coef + model.intercept > 0, "fraud", "ok")
    np.testing.assert_array_equal(model.predict(reordered), expected)
    with pytest.raises(DataError, match="'age'"):
        model.predict(frame[["score", "amount"]])
    with pytest.raises(DataError, match="'kind'"):
        model.predict(frame)


def test_a_model_file_with_bad_feature_names_is_refused(files, tmp_path):
    arrays, metadata = load_archive(trained(files), format=LinearModel.FORMAT, version=1)
    for names in (["amount", "age"], ["amount", "age", "age"], ["amount", "age", 3]):
        forged = tmp_path / "forged.npz"
        data = {**metadata["options"]["data"], "feature_names": names}
        save_archive(forged, arrays, {**metadata, "options": {**metadata["options"], "data": data}})
        with pytest.raises(ModelFileError, match="feature_names"):
            load_model(forged)


def test_a_streamed_model_records_its_columns_too(files, tmp_path):
    """A CSV header or a Parquet file's names, read in parts, are recorded as in memory."""
    streamed = tmp_path / "streamed.npz"
    result = invoke("train", files["train"], "--stream", "--epochs", "2", "--no-progress", "-o", streamed)
    assert result.exit_code == 0, result.output
    assert " rows in 1 part, " in result.output  # one part of a small file, in the singular
    assert load_model(streamed).feature_names == FEATURES
    expected = by_hand(streamed, pd.read_csv(files["test"]))
    assert predictions(streamed, files["reordered"]) == expected
    pytest.importorskip("pyarrow")
    parquet, from_parquet = tmp_path / "train.parquet", tmp_path / "parquet.npz"
    pd.read_csv(files["train"])[["kind", "score", "age", "amount"]].to_parquet(parquet)
    result = invoke("train", parquet, "--stream", "--label-column", "kind", "--epochs", "2", "--no-progress",
                    "-o", from_parquet)
    assert result.exit_code == 0, result.output
    assert load_model(from_parquet).feature_names == ["score", "age", "amount"]
    assert predictions(from_parquet, files["test"]) == by_hand(from_parquet, pd.read_csv(files["test"]))


def test_aggregate_refuses_models_whose_features_are_named_differently(files, tmp_path):
    """Coefficients of features in another order would be summed column by column: refused."""
    other_order = tmp_path / "other_order.csv"
    pd.read_csv(files["train"])[["score", "age", "amount", "kind"]].to_csv(other_order, index=False)
    first, second = tmp_path / "first.npz", tmp_path / "second.npz"
    for data, model in ((files["train"], first), (other_order, second)):
        assert invoke("train", data, "-o", model, *QUICK).exit_code == 0
    result = invoke("aggregate", first, second, "--data", files["train"], "-o", tmp_path / "agg.npz")
    assert_one_line_error(result, "first.npz", "second.npz", "named differently")
    assert not (tmp_path / "agg.npz").exists()


def test_without_a_header_the_label_column_is_the_training_files(files, tmp_path):
    """The label first, no header: predict and evaluate find it where training did (not the last column)."""
    test = pd.read_csv(files["test"])
    bare_train, bare_test = tmp_path / "bare_train.csv", tmp_path / "bare_test.csv"
    pd.read_csv(files["train"])[["kind", *FEATURES]].to_csv(bare_train, index=False, header=False)
    test[["kind", *FEATURES]].to_csv(bare_test, index=False, header=False)
    model = tmp_path / "bare.npz"
    assert invoke("train", bare_train, "--label-column", "0", "-o", model, *QUICK).exit_code == 0
    loaded = load_model(model)
    expected = [loaded.classes[int(s > 0)] for s in test[FEATURES].to_numpy() @ loaded.coef + loaded.intercept]
    assert predictions(model, bare_test) == expected
    result = invoke("evaluate", model, bare_test, "--measure", "recall", "--json")
    assert result.exit_code == 0, result.output
    value = json.loads(result.stdout)["measures"][0]["value"]
    assert value == pytest.approx(recall_score(test["kind"], expected, pos_label="fraud"))

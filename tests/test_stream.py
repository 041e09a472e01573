"""Issue 15, streaming: chunked sources read rows exactly as the in-memory readers do, the
shuffle buffer serves a seeded permutation, one chunk trains the in-memory model, convert
round-trips, and bad inputs to convert / --stream are one-line CLI errors."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from calopt_cli.app import app
from sklearn.datasets import dump_svmlight_file
from typer.testing import CliRunner

import calopt
from calopt.errors import DataError, ParameterError
from calopt.io.files import read_data
from calopt.models.report import DataReading
from calopt.io.stream import (
    StreamReader,
    _stack,
    chunk_source,
    convert,
    open_stream,
    survey,
    widen,
)
from calopt.sklearn import CaloptClassifier

runner = CliRunner()
SMALL = 2048  # bytes of text a chunk: every test file here is read in many parts


def _data(n: int = 600, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)), 3)
    X[rng.random(size=X.shape) < 0.4] = 0.0
    y = np.where(X[:, 0] - 0.7 * X[:, 1] + 0.3 * rng.normal(size=n) > 0.6, 1, -1)
    return X, y


def _rows(source) -> tuple[object, np.ndarray, object]:
    """Every row of a chunked source after its first pass, stacked: (X, labels, survey)."""
    found = survey(source)
    parts = list(source.parts())
    X = _stack([widen(part.X, found.n_features) for part in parts])
    return X, np.concatenate([part.labels for part in parts]), found


def _dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def _same_as_memory(source, path, **options) -> None:
    X, labels, found = _rows(source)
    expected = read_data(path, **options)
    assert len(found.part_rows) > 1
    assert found.n_features == expected.n_features and found.zero_based == expected.zero_based
    np.testing.assert_array_equal(_dense(X), _dense(expected.X))
    np.testing.assert_array_equal(labels, expected.labels)
    np.testing.assert_array_equal(found.labels, expected.labels)
    np.testing.assert_array_equal(found.max_abs, np.max(np.abs(_dense(expected.X)), axis=0))


@pytest.mark.parametrize("compression", ["", ".gz", ".bz2"])
@pytest.mark.parametrize("zero_based", [True, False])
def test_libsvm_chunks_equal_the_in_memory_reader(tmp_path, compression, zero_based):
    X, y = _data()
    X[:, -1] = 0.0
    X[-1, -1] = 2.5  # the widest index only in the last part
    plain = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(plain), zero_based=zero_based)
    path = tmp_path / f"d.svm{compression}"
    if compression:
        opener = gzip.open if compression == ".gz" else bz2.open
        with opener(path, "wb") as f:
            f.write(plain.read_bytes())
    source = open_stream(path, chunk_bytes=SMALL)
    assert source.seekable == (not compression)
    _same_as_memory(source, path)


def test_libsvm_chunk_errors_name_the_file_line(tmp_path):
    X, y = _data()
    path = tmp_path / "bad.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[450] = b"1 3:abc\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(DataError) as memory:
        read_data(path)
    with pytest.raises(DataError) as streamed:
        survey(open_stream(path, chunk_bytes=SMALL))
    assert "line 451" in str(memory.value)
    assert str(streamed.value) == str(memory.value)


def test_one_based_libsvm_with_index_zero_is_refused_with_its_line(tmp_path):
    path = tmp_path / "z.svm"
    path.write_text("".join(f"1 1:{i}\n" for i in range(400)) + "-1 0:1\n")
    with pytest.raises(DataError, match="line 401"):
        survey(open_stream(path, chunk_bytes=SMALL, zero_based=False))


@pytest.mark.parametrize("header", [True, False])
def test_csv_chunks_equal_the_in_memory_reader(tmp_path, header):
    X, y = _data()
    labels = np.where(y > 0, "yes", "no")
    names = "a;b;c;class;e;f;g;h;i\n" if header else ""
    rows = [";".join([*map(str, row[:3]), label, *map(str, row[3:])]) for row, label in zip(X, labels)]
    path = tmp_path / "d.csv"
    path.write_text(names + "\n".join(rows) + "\n")
    column = "class" if header else "3"
    _same_as_memory(open_stream(path, chunk_bytes=SMALL, label_column=column), path, label_column=column)


def test_npy_and_csr_directories_and_parquet_equal_the_arrays(tmp_path):
    X, y = _data()
    dense, csr = tmp_path / "dense", tmp_path / "csr"
    dense.mkdir(), csr.mkdir()
    np.save(dense / "X.npy", X.astype(np.float32))
    np.save(dense / "y.npy", y)
    matrix = sp.csr_matrix(X)
    for name in ("data", "indices", "indptr"):
        np.save(csr / f"{name}.npy", getattr(matrix, name))
    np.save(csr / "y.npy", y)
    for path, expected in ((dense, X.astype(np.float32).astype(np.float64)), (csr, X)):
        source = open_stream(path, part_rows=64)
        found_X, labels, found = _rows(source)
        assert len(found.part_rows) == 10
        np.testing.assert_array_equal(_dense(found_X)[:, :X.shape[1]], expected)
        np.testing.assert_array_equal(labels, y)
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    table = pa.table({**{f"x{j}": X[:, j] for j in range(X.shape[1])}, "label": y})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=100)
    source = open_stream(tmp_path / "d.parquet", part_rows=64)
    found_X, labels, found = _rows(source)
    assert found.part_rows == [100] * 6  # 6 row groups of 100 rows, read 64 at a time
    np.testing.assert_array_equal(found_X, X)
    np.testing.assert_array_equal(labels, y)
    reader = StreamReader(source, found, np.where(y > 0, 1.0, -1.0), np.ones(X.shape[1]), np, buffer_rows=50)
    served = np.concatenate([batch.X for batch in reader.epoch(32, np.random.default_rng(0))])
    np.testing.assert_array_equal(served[np.lexsort(served.T[::-1])], X[np.lexsort(X.T[::-1])])  # every row once


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(ParameterError, match=r"calopt\[parquet\]"):
        open_stream(path)


def _reader(n_parts: int, buffer_rows: int, n: int = 1000):
    X = np.arange(n, dtype=np.float64)[:, None] + 1.0
    chunks = [(X[i:i + n // n_parts], np.where(np.arange(i, i + n // n_parts) % 3 == 0, 1, -1))
              for i in range(0, n, n // n_parts)]
    source = chunk_source(chunks)
    found = survey(source)
    y = np.where(found.labels > 0, 1.0, -1.0)
    return StreamReader(source, found, y, np.ones(1), np, buffer_rows=buffer_rows)


def _served_rows(reader, seed, batch_size=32) -> np.ndarray:
    batches = list(reader.epoch(batch_size, np.random.default_rng(seed)))
    rows = np.concatenate([np.asarray(batch.X)[:, 0] for batch in batches]).astype(int) - 1
    labels = np.concatenate([batch.y for batch in batches])
    np.testing.assert_array_equal(labels, np.where(rows % 3 == 0, 1.0, -1.0))  # labels travel with their rows
    assert all(batch.X.shape[0] == batch_size for batch in batches[:-1])
    return rows


@pytest.mark.parametrize("n_parts, buffer_rows", [(10, 0), (10, 150), (4, 1000), (1, 100)])
def test_shuffle_buffer_serves_a_seeded_permutation(n_parts, buffer_rows):
    reader = _reader(n_parts, buffer_rows)
    first = _served_rows(reader, 3)
    np.testing.assert_array_equal(np.sort(first), np.arange(1000))
    assert not np.array_equal(first, np.arange(1000))
    np.testing.assert_array_equal(_served_rows(reader, 3), first)
    assert not np.array_equal(_served_rows(reader, 4), first)


def test_shuffle_buffer_mixes_parts():
    """With a buffer, a batch mixes rows of several parts (parts of 100 consecutive rows)."""
    rows = _served_rows(_reader(10, 300), 0, batch_size=100)
    parts_per_batch = [np.unique(rows[i:i + 100] // 100).size for i in range(0, 1000, 100)]
    assert min(parts_per_batch) >= 2


def test_one_chunk_trains_the_in_memory_model():
    X, y = _data(800)
    for algorithm, measure in (("spade", "gmean"), ("stamp", "f1")):
        memory = calopt.fit(X, y, measure=measure, algorithm=algorithm, select="none", epochs=3)
        streamed = calopt.fit([(X, y)], measure=measure, algorithm=algorithm, epochs=3)
        np.testing.assert_array_equal(streamed.coef, memory.coef)
        assert streamed.intercept == memory.intercept and streamed.threshold == memory.threshold
        assert streamed.fit_report.stream.parts == 1


def test_many_chunks_train_a_model_as_good(tmp_path):
    X, y = _data(4000)
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    memory = calopt.fit(X, y, measure="gmean", algorithm="spade", select="none", epochs=5)
    streamed = calopt.fit(open_stream(path, chunk_bytes=20_000), measure="gmean", epochs=5, buffer_rows=500)
    assert streamed.fit_report.stream.parts > 5
    value = streamed.evaluate(X, y)[0]["value"]
    assert value > memory.evaluate(X, y)[0]["value"] - 0.03
    assert streamed.history[-1]["train"] == pytest.approx(value)


def test_fit_refuses_what_a_stream_cannot_do():
    X, y = _data(200)
    with pytest.raises(ParameterError, match="one-shot"):
        calopt.fit((X, y) for _ in range(2))
    with pytest.raises(ParameterError, match="select"):
        calopt.fit([(X, y)], select="cv:3")
    with pytest.raises(ParameterError, match="sample_weight"):
        calopt.fit([(X, y)], sample_weight=np.ones(200))
    with pytest.raises(ParameterError, match="y is missing"):
        calopt.fit(X)
    with pytest.raises(DataError, match="two-class"):
        calopt.fit([(X, np.arange(200) % 3)])


def test_partial_fit_takes_chunks_as_one_call_each():
    X, y = _data(1500)
    chunks = [(X[i:i + 300], y[i:i + 300]) for i in range(0, 1500, 300)]
    together = CaloptClassifier(measure="gmean", random_state=0).partial_fit(iter(chunks), classes=[-1, 1])
    one_by_one = CaloptClassifier(measure="gmean", random_state=0)
    for X_part, y_part in chunks:
        one_by_one.partial_fit(X_part, y_part, classes=[-1, 1])
    np.testing.assert_array_equal(together.coef_, one_by_one.coef_)
    assert together.n_iter_ == 5


@pytest.mark.parametrize("kind", ["libsvm", "csv"])
def test_convert_round_trips(tmp_path, kind):
    X, y = _data()
    if kind == "libsvm":
        path = tmp_path / "d.svm.gz"
        dump_svmlight_file(X, y, str(tmp_path / "d.svm"), zero_based=False)
        with gzip.open(path, "wb") as f:
            f.write((tmp_path / "d.svm").read_bytes())
    else:
        path = tmp_path / "d.csv"
        path.write_text("".join(",".join(map(str, [*row, label])) + "\n" for row, label in zip(X, y)))
    out = tmp_path / "out"
    convert(open_stream(path, chunk_bytes=SMALL), out)
    meta = json.loads((out / "calopt-stream.json").read_text())
    assert meta["layout"] == ("csr" if kind == "libsvm" else "dense")
    assert meta["zero_based"] == (False if kind == "libsvm" else None)
    converted, labels, found = _rows(open_stream(out, part_rows=100))
    expected = read_data(path)
    np.testing.assert_array_equal(_dense(converted), _dense(expected.X))
    np.testing.assert_array_equal(labels, expected.labels)
    assert found.reading() == {"format": expected.format, "zero_based": expected.zero_based,
                               "n_features": expected.n_features}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_convert_leaves_nothing_when_interrupted(tmp_path, monkeypatch):
    X, y = _data()
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    from calopt.io import stream

    calls = []
    write = stream._ArrayWriter.add

    def interrupted(self, X, **options):  # after the first part is written into the temporary directory
        write(self, X, **options)
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(stream._ArrayWriter, "add", interrupted)
    with pytest.raises(KeyboardInterrupt):
        convert(open_stream(path, chunk_bytes=SMALL), tmp_path / "out")
    assert calls and sorted(p.name for p in tmp_path.iterdir()) == ["d.svm"]


# ----------------------------------------------------------------------------- the CLI
def _one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if not line.startswith("calopt: warning:")]
    assert len(errors) == 1 and errors[0].startswith("calopt: error: "), result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


@pytest.fixture
def files(tmp_path) -> Path:
    X, y = _data(1000)
    dump_svmlight_file(X, y, str(tmp_path / "train.svm"), zero_based=False)
    dump_svmlight_file(X[:300], y[:300], str(tmp_path / "test.svm"), zero_based=False)
    return tmp_path


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_cli_convert_then_train_streams(files):
    result = runner.invoke(app, ["convert", str(files / "train.svm"), str(files / "train.cal"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == 1000
    result = runner.invoke(app, ["train", str(files / "train.cal"), "--test", str(files / "test.svm"), "--json",
                                 "--epochs", "3", "-o", str(files / "m.npz"), "--measure", "gmean"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["stream"]["rows"] == 1000 and report["test"]["value"] > 0.6
    model = calopt.load_model(files / "m.npz")
    assert model.fit_report.data == DataReading(format="libsvm", zero_based=False, n_features=8)
    text = runner.invoke(app, ["train", str(files / "train.svm"), "--stream", "--epochs", "3", "--json",
                               "--measure", "gmean"])
    assert text.exit_code == 0, text.output
    assert json.loads(text.stdout)["train"]["value"] == report["train"]["value"]


@pytest.mark.parametrize("args, fragments", [
    (["convert", "{d}/train.svm", "{d}/test.svm"], ["exists"]),
    (["convert", "{d}/missing.svm", "{d}/out"], ["missing.svm", "no such file"]),
    (["convert", "{d}/train.svm", "{d}/nodir/out"], ["does not exist"]),
    (["convert", "{d}/bad.svm", "{d}/out"], ["bad.svm", "line 3"]),
    (["train", "{d}/train.svm", "--stream", "--resume", "{d}/test.svm"], ["--resume", "--stream"]),
    (["train", "{d}/train.svm", "--stream", "--select", "cv:3"], ["--select", "stream"]),
    (["train", "{d}/train.svm", "--stream", "--backend", "array-api-strict"], ["--backend"]),
    (["train", "-", "--stream"], ["standard input"]),
    (["train", "{d}/bad.svm", "--stream"], ["bad.svm", "line 3"]),
    (["train", "{d}/three.svm", "--stream"], ["three.svm labels", "two-class"]),
])
def test_cli_bad_inputs_are_one_line_errors(files, args, fragments):
    (files / "bad.svm").write_text("1 1:2\n-1 2:1\n1 1:x\n")
    (files / "three.svm").write_text("1 1:2\n2 2:1\n3 1:1\n")
    before = _listing(files)
    result = runner.invoke(app, [a.format(d=files) for a in args])
    _one_line_error(result, *fragments)
    assert _listing(files) == before  # nothing written, nothing half-written


def test_the_manual_s_streaming_example_runs():
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "streaming.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    namespace: dict = {}
    exec(blocks[0], namespace)
    assert namespace["model"].fit_report.stream.parts == 4


def test_the_survey_sample_is_the_seeded_bottom_k():
    """The sample keeps exactly the rows with the smallest seeded keys, whatever the parts."""
    X = np.random.default_rng(0).normal(size=(5000, 3))
    y = (X[:, 0] > 0).astype(int)
    found = survey(chunk_source([(X[i:i + 100], y[i:i + 100]) for i in range(0, 5000, 100)]), sample_rows=300, seed=1)
    rng = np.random.default_rng([1, 7])
    keys = np.concatenate([rng.random(100) for _ in range(50)])
    expected = np.sort(np.argsort(keys)[:300])
    np.testing.assert_array_equal(found.sample_index, expected)
    np.testing.assert_array_equal(found.sample, X[expected])


def test_a_long_stream_tunes_the_threshold_on_a_seeded_sample(monkeypatch):
    import calopt.training.stream as streaming

    X, y = _data(2000)
    everything = calopt.fit([(X, y)], measure="gmean", epochs=2)
    monkeypatch.setattr(streaming, "THRESHOLD_ROWS", 500)
    sampled = calopt.fit([(X, y)], measure="gmean", epochs=2)
    again = calopt.fit([(X, y)], measure="gmean", epochs=2)
    np.testing.assert_array_equal(sampled.coef, everything.coef)  # the same weights, another cut
    assert sampled.threshold != everything.threshold and sampled.threshold == again.threshold


def test_train_streams_directories_and_large_files_unless_told(files, monkeypatch):
    import calopt_cli.stream as cli_stream

    train = str(files / "train.svm")
    assert not cli_stream.streams(train, None) and cli_stream.streams(train, True)
    monkeypatch.setattr(cli_stream, "STREAM_ABOVE_BYTES", 1000)
    assert cli_stream.streams(train, None) and not cli_stream.streams(train, False)
    assert cli_stream.streams(str(files), None) and not cli_stream.streams("a9a", None)


def _npy_directory(path: Path, X: np.ndarray, y: np.ndarray) -> Path:
    path.mkdir()
    np.save(path / "X.npy", X)
    np.save(path / "y.npy", y)
    return path


def test_a_known_row_count_samples_the_same_bottom_k(tmp_path):
    """An array directory (row count known before the pass: the sample chosen from the keys alone)
    keeps exactly the rows the part-by-part bottom-k keeps for the same data as chunks, and the
    rows with the m smallest keys of a sample are the bottom-m sample."""
    X, y = _data(3000, d=5)
    X32 = X.astype(np.float32)
    directory = survey(open_stream(_npy_directory(tmp_path / "d", X32, y), part_rows=97), sample_rows=400, seed=3)
    chunks = survey(chunk_source([(X32[i:i + 97], y[i:i + 97]) for i in range(0, 3000, 97)]), sample_rows=400,
                    seed=3)
    keys = np.random.default_rng([3, 7]).random(3000)  # the keys drawn in row order, whatever the parts
    expected = np.sort(np.argsort(keys)[:400])
    for found in (directory, chunks):
        np.testing.assert_array_equal(found.sample_index, expected)
        np.testing.assert_array_equal(found.sample_keys, keys[expected])
        assert found.sample.dtype == np.float32  # rows kept as read
        np.testing.assert_array_equal(found.sample, X32[expected])
    np.testing.assert_array_equal(directory.sample_index[directory.bottom(50)], np.sort(np.argsort(keys)[:50]))


def test_max_abs_and_the_finiteness_check_of_dense_parts(tmp_path):
    """The folded max/min reductions give numpy's max |x| per column for row counts that are not
    multiples of the fold, and a NaN or an infinity anywhere is named by row and column."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1001, 7)).astype(np.float32)
    X[1000, 3], X[17, 0] = -50.0, 40.0
    found = survey(open_stream(_npy_directory(tmp_path / "d", X, np.arange(1001) % 2), part_rows=333))
    np.testing.assert_array_equal(found.max_abs, np.max(np.abs(X.astype(np.float64)), axis=0))
    for row, column, value in ((998, 6, np.nan), (5, 2, -np.inf)):
        bad = X.copy()
        bad[row, column] = value
        source = open_stream(_npy_directory(tmp_path / f"bad{row}", bad, np.arange(1001) % 2), part_rows=333)
        with pytest.raises(DataError, match=rf"X\[{row}, {column}\] is not finite"):
            survey(source)
    with pytest.raises(DataError, match=r"X\[11, 1\] is not finite \(row 11"):
        calopt.fit([(X[:10], np.arange(10) % 2), (np.where(np.arange(14).reshape(2, 7) == 8, np.nan, 1.0),
                                                  np.array([0, 1]))])


def test_float32_rows_are_scaled_as_the_in_memory_float64_model():
    """float32 chunks are kept as read and scaled when served: one chunk trains the model of the
    in-memory pipeline on the same values as float64, to the bit."""
    X, y = _data(800)
    X32 = X.astype(np.float32)
    memory = calopt.fit(X32.astype(np.float64), y, measure="gmean", algorithm="spade", select="none", epochs=2)
    streamed = calopt.fit([(X32, y)], measure="gmean", algorithm="spade", epochs=2)
    np.testing.assert_array_equal(streamed.coef, memory.coef)
    assert streamed.intercept == memory.intercept and streamed.threshold == memory.threshold


def test_dense_and_csr_pools_serve_the_same_batches():
    """The reused dense shuffle pool serves the rows the list-of-blocks pool serves (the same data
    as CSR), in the same order, at every part and buffer size."""
    X, y = _data(1000)
    for part, buffer_rows in ((130, 0), (130, 300), (64, 1000), (1000, 100)):
        served = []
        for matrix in (X, sp.csr_matrix(X)):
            source = chunk_source([(matrix[i:i + part], y[i:i + part]) for i in range(0, 1000, part)])
            found = survey(source)
            reader = StreamReader(source, found, np.where(y > 0, 1.0, -1.0), found.max_abs, np,
                                  buffer_rows=buffer_rows)
            batches = list(reader.epoch(50, np.random.default_rng(5)))
            served.append((np.concatenate([_dense(b.X) for b in batches]), np.concatenate([b.y for b in batches])))
        # the same rows in the same order (CSR is scaled by 1/scale, dense divided: the last bit differs)
        np.testing.assert_allclose(served[0][0], served[1][0], rtol=1e-15, atol=0)
        np.testing.assert_array_equal(served[0][1], served[1][1])
        # every row exactly once, scaled by the max-abs of its column
        scaled = X / np.max(np.abs(X), axis=0)
        np.testing.assert_array_equal(np.sort(served[0][0], axis=0), np.sort(scaled, axis=0))


def test_the_sampled_threshold_is_the_brute_force_best_on_the_sample(monkeypatch):
    """Above THRESHOLD_ROWS the threshold is tuned on the rows with the smallest first-pass keys:
    the model's cut reaches the best G-mean over every cut of those rows' scores (brute force,
    scikit-learn's confusion matrix at each), and the history's training value is that best."""
    from sklearn.metrics import confusion_matrix

    import calopt.training.stream as streaming

    monkeypatch.setattr(streaming, "THRESHOLD_ROWS", 300)
    X, y = _data(2000)
    chunks = [(X[i:i + 250], y[i:i + 250]) for i in range(0, 2000, 250)]
    model = calopt.fit(chunks, measure="gmean", epochs=2, seed=4)
    assert model.fit_report.stream.threshold_rows == 300
    rows = np.sort(np.argsort(np.random.default_rng([4, 7]).random(2000))[:300])
    scores = X[rows] @ model.coef + model.intercept + model.threshold  # before the threshold
    labels = y[rows]

    def gmean(cut: float) -> float:
        (tn, fp), (fn, tp) = confusion_matrix(labels, np.where(scores > cut, 1, -1), labels=[-1, 1])
        return float(np.sqrt(tp / (tp + fn) * tn / (tn + fp)))

    cuts = np.concatenate([[scores.max() + 1], np.sort(scores)[::-1]])  # everything between two scores
    best = max(gmean(cut) for cut in cuts)
    assert gmean(model.threshold) == pytest.approx(best, abs=1e-12)
    assert model.history[-1]["train"] == pytest.approx(best, abs=1e-12)


def test_scaling_folded_into_the_weights_gives_the_scaled_scores():
    """X @ (w / scale) + b (rows as read, float32 included) equals (X / scale) @ w + b to 1e-12."""
    from calopt.training.stream import folded_scores

    X, _ = _data(5000)
    rng = np.random.default_rng(2)
    w, scale = rng.normal(size=X.shape[1]), np.abs(rng.normal(size=X.shape[1])) + 0.1
    for rows in (X, X.astype(np.float32), sp.csr_matrix(X)):
        expected = _dense(rows).astype(np.float64) / scale @ w + 0.3
        np.testing.assert_allclose(folded_scores(rows, w, 0.3, scale), expected, rtol=1e-12, atol=1e-12)


def test_memory_mapped_arrays_get_the_exact_cut_of_every_row(tmp_path, monkeypatch):
    """With a sample smaller than the data, an array directory's threshold is best_cut's on every
    training row's score (one more pass, a window of scores), not the sample's."""
    import calopt.training.stream as streaming
    from calopt.training.threshold import best_cut

    monkeypatch.setattr(streaming, "THRESHOLD_ROWS", 300)
    monkeypatch.setattr(streaming, "WINDOW_SHARE", 0.5)  # wide enough for 300 sampled rows
    X, y = _data(3000)
    source = open_stream(_npy_directory(tmp_path / "d", X.astype(np.float32), y), part_rows=256)
    model = calopt.fit(source, measure="gmean", epochs=2, seed=1)
    assert model.fit_report.stream.exact_threshold and model.fit_report.stream.passes == 4
    X64 = X.astype(np.float32).astype(np.float64)
    scores = X64 @ model.coef + model.intercept + model.threshold  # every row, before the threshold
    cut, best = best_cut(scores, np.where(y > 0, 1.0, -1.0), calopt.registry.get_measure("gmean"))
    assert model.threshold == pytest.approx(float(cut), rel=1e-9)
    assert model.history[-1]["train"] == pytest.approx(float(best), abs=1e-12)
    sampled = calopt.fit([(X64, y)], measure="gmean", epochs=2, seed=1)  # chunks: the sample's cut
    assert not sampled.fit_report.stream.exact_threshold


def test_the_exact_cut_gives_up_at_the_edge_of_its_window(tmp_path):
    """A sample cut far from the best one puts the best of the window at its edge: None (the
    sample's cut is kept), never a cut the window cannot vouch for."""
    from calopt.training.stream import window_cut

    X, y = _data(3000)
    source = open_stream(_npy_directory(tmp_path / "d", X, y), part_rows=500)
    found = survey(source)
    reader = StreamReader(source, found, np.where(y > 0, 1.0, -1.0), found.max_abs, np)
    w = np.zeros(X.shape[1])
    w[0], w[1] = 1.0, -0.7
    scores = X / found.max_abs @ w
    measure = calopt.registry.get_measure("gmean")
    assert window_cut(reader, w, 0.0, measure, scores, float(scores.max())) is None
    cut, best = best_cut_of(scores, y, measure)
    found_cut = window_cut(reader, w, 0.0, measure, scores, cut)
    assert found_cut is not None and found_cut[1] == pytest.approx(best, abs=1e-12)


def best_cut_of(scores, y, measure):
    from calopt.training.threshold import best_cut

    cut, best = best_cut(scores, np.where(y > 0, 1.0, -1.0), measure)
    return float(cut), float(best)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
@pytest.mark.parametrize("shape", [(0, 4), (1, 1), (2_700, 100), (20_001, 13)])
def test_a_part_s_scores_are_its_rows_times_the_weights_in_float64(dtype, shape):
    """The threshold pass's scores of a part (dense rows converted to float64 a cache-sized block at
    a time), against a plain float64 reference, and of sparse rows."""
    from calopt.training.stream import part_scores

    rng = np.random.default_rng(shape[0])
    X = (rng.standard_normal(shape) * 50).astype(dtype)
    coef = rng.standard_normal(shape[1])
    out = np.full(shape[0], np.nan)
    part_scores(X, coef, -0.75, out)
    expected = np.array([sum(float(x) * float(c) for x, c in zip(row, coef)) for row in X[:300]]) - 0.75
    np.testing.assert_allclose(out[:300], expected, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(out, X.astype(np.float64) @ coef - 0.75, rtol=1e-13, atol=1e-10)
    sparse = np.full(shape[0], np.nan)
    part_scores(sp.csr_matrix(X), coef, -0.75, sparse)
    np.testing.assert_allclose(sparse, out, rtol=1e-12, atol=1e-9)

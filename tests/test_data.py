"""The data layer: embedded datasets, file readers, feature alignment and label encoding.

Reference values (row, feature and positive counts, sha256) are copied from
shared/data/README.md, where they were checked by loading each file independently.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calopt import datasets
from calopt.io.files import Dataset, align_features, read_data, read_label_file, train_test_split
from calopt.io.labels import encode_binary, encode_multiclass
from calopt.errors import DataError, ParameterError, UnknownNameError

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# name, split -> (rows, features, positives, sha256 of the stored file)
EMBEDDED = {
    ("a9a", "train"): (
        32561, 123, 7841, "1dcb2b4aedea0b5a9e964192dd211675d16cf05ab6477ddd0702d87c1d1af8da"
    ),
    ("a9a", "test"): (
        16281, 123, 3846, "e55725b53c3c47f7053bd3ef12e41555539eac4c0fe989e69345cc4dd0ea6e8d"
    ),
    ("ijcnn1", "train"): (
        49990, 22, 4853, "b38a4198ce142d43e96fb86d17b87211feec1f909ac344fa057455c69de29de3"
    ),
    ("ijcnn1", "test"): (
        91701, 22, 8712, "acd1db430684fdd3f0c768ecc49aa8e749d0004fc117611220c2aa576a7b6a24"
    ),
}

# A small matrix with awkward values, and the same data in each text format.
DENSE = np.array([[0.5, 0.0, -2.25], [0.0, 1e-300, 0.0], [3.0, 0.0, 7.125], [0.0, 0.0, 0.0]])
LABELS = np.array([1.0, -1.0, -1.0, 1.0])
LIBSVM_TEXT = "+1 1:0.5 3:-2.25\n-1 2:1e-300\n# a comment line\n\n-1 1:3 3:7.125 # tail\n1\n"


def write(path: Path, content: str | bytes) -> Path:
    data = content.encode() if isinstance(content, str) else content
    if path.suffix == ".bz2":
        data = bz2.compress(data)
    elif path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


# ----------------------------------------------------------------------------- embedded


@pytest.mark.parametrize(("name", "split"), list(EMBEDDED))
def test_embedded_counts_match_the_readme(name, split):
    rows, features, positives, _ = EMBEDDED[name, split]
    dataset = datasets.load(name, split)
    assert dataset.source == f"{name}:{split}"
    assert (dataset.n_samples, dataset.n_features) == (rows, features)
    assert sp.issparse(dataset.X) and dataset.X.format == "csr"
    assert dataset.X.dtype == np.float64
    assert dataset.classes.tolist() == [-1.0, 1.0]
    assert int(np.sum(dataset.labels == 1.0)) == positives


@pytest.mark.parametrize(("name", "split"), list(EMBEDDED))
def test_packaged_files_have_the_readme_sha256(name, split):
    digest = hashlib.sha256(datasets.path(name, split).read_bytes()).hexdigest()
    assert digest == EMBEDDED[name, split][3]
    readme = (Path(datasets.__file__).parent / "README.md").read_text()
    assert digest in readme


def test_embedded_names_and_unknown_names():
    assert datasets.names() == ["a9a", "ijcnn1"]
    assert datasets.path("a9a", "test").name == "a9a.t.bz2"
    with pytest.raises(UnknownNameError, match="did you mean 'a9a'"):
        datasets.load("a9")
    with pytest.raises(UnknownNameError, match="split"):
        datasets.load("a9a", "validation")


def test_embedded_cache_cannot_be_corrupted_by_callers():
    first = datasets.load("a9a", "test")
    reference = first.X.sum(), first.labels.copy()
    first.X.data *= 0
    first.labels[:] = 7
    second = datasets.load("a9a", "test")
    assert second.X.sum() == reference[0]
    np.testing.assert_array_equal(second.labels, reference[1])


# ----------------------------------------------------------------------------- LIBSVM


@pytest.mark.parametrize("name", ["small.svm", "small.svm.bz2", "small.libsvm.gz", "small"])
def test_libsvm_round_trip_plain_and_compressed(tmp_path, name):
    dataset = read_data(write(tmp_path / name, LIBSVM_TEXT))
    assert sp.issparse(dataset.X) and dataset.X.format == "csr"
    np.testing.assert_array_equal(dense(dataset.X), DENSE)
    np.testing.assert_array_equal(dataset.labels, LABELS)
    assert dataset.source == str(tmp_path / name)


def test_libsvm_compression_is_recognized_by_content(tmp_path):
    path = tmp_path / "renamed.svm"
    path.write_bytes(bz2.compress(LIBSVM_TEXT.encode()))
    np.testing.assert_array_equal(dense(read_data(path).X), DENSE)


def test_libsvm_zero_based_indices_are_detected(tmp_path):
    dataset = read_data(write(tmp_path / "zero.svm", "1 0:4 2:5\n-1 1:6\n"))
    np.testing.assert_array_equal(dense(dataset.X), [[4, 0, 5], [0, 6, 0]])


def test_read_data_pads_to_n_features_and_rejects_fewer(tmp_path):
    path = write(tmp_path / "small.svm", LIBSVM_TEXT)
    padded = read_data(path, n_features=5)
    assert sp.issparse(padded.X) and padded.n_features == 5
    np.testing.assert_array_equal(dense(padded.X)[:, :3], DENSE)
    assert not dense(padded.X)[:, 3:].any()
    with pytest.raises(DataError, match=r"small\.svm has 3 features"):
        read_data(path, n_features=2)


# ----------------------------------------------------------------------------- CSV


CSV_CASES = {
    "label last, no header": ("d.csv", "0.5,0,-2.25,1\n0,1e-300,0,-1\n3,0,7.125,-1\n0,0,0,1\n", {}),
    "label first, header": (
        "d.csv",
        "y,a,b,c\n1,0.5,0,-2.25\n-1,0,1e-300,0\n-1,3,0,7.125\n1,0,0,0\n",
        {"label_column": 0},
    ),
    "label by name, in the middle": (
        "d.csv",
        "a,y,b,c\n0.5,1,0,-2.25\n0,-1,1e-300,0\n3,-1,0,7.125\n0,1,0,0\n",
        {"label_column": "y"},
    ),
    "label by index given as text": (
        "d.csv",
        "0.5,1,0,-2.25\n0,-1,1e-300,0\n3,-1,0,7.125\n0,1,0,0\n",
        {"label_column": "1"},
    ),
    "KEEL comma-space": (
        "k.dat",
        "0.5, 0, -2.25, 1\n0, 1e-300, 0, -1\n3, 0, 7.125, -1\n0, 0, 0, 1\n",
        {"format": "csv"},
    ),
    "semicolon, CRLF": (
        "d.csv", "0.5;0;-2.25;1\r\n0;1e-300;0;-1\r\n3;0;7.125;-1\r\n0;0;0;1\r\n", {}
    ),
    "tab, .tsv": (
        "d.tsv",
        "0.5\t0\t-2.25\t1\n0\t1e-300\t0\t-1\n3\t0\t7.125\t-1\n0\t0\t0\t1\n",
        {},
    ),
    "txt with commas, bz2": ("d.txt.bz2", "0.5,0,-2.25,1\n0,1e-300,0,-1\n3,0,7.125,-1\n0,0,0,1\n", {}),
    "explicit KEEL delimiter, gz": (
        "d.data.gz", "0.5, 0, -2.25, 1\n0, 1e-300, 0, -1\n3, 0, 7.125, -1\n0, 0, 0, 1\n",
        {"delimiter": ", "},
    ),
    "KEEL @ header, quoted names": (
        "d.csv",
        '@relation x\n@attribute a real\n"a","b","c","y"\n0.5,0,-2.25,1\n0,1e-300,0,-1\n'
        "3,0,7.125,-1\n0,0,0,1\n",
        {"label_column": "y"},
    ),
}


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_csv_variants_read_the_same_matrix(tmp_path, case):
    name, text, options = CSV_CASES[case]
    dataset = read_data(write(tmp_path / name, text), **options)
    assert isinstance(dataset.X, np.ndarray) and dataset.X.dtype == np.float64
    np.testing.assert_array_equal(dataset.X, DENSE)
    np.testing.assert_array_equal(dataset.labels, LABELS)


def test_csv_string_labels_and_header(tmp_path):
    path = write(tmp_path / "m.data", "length,width,class\n1.5,2,g\n3,4.25,h\n5,6,g\n")
    dataset = read_data(path)
    np.testing.assert_array_equal(dataset.X, [[1.5, 2], [3, 4.25], [5, 6]])
    assert dataset.labels.tolist() == ["g", "h", "g"]
    assert dataset.classes.tolist() == ["g", "h"]


def test_csv_is_never_padded_to_n_features(tmp_path):
    """A CSV's width is known: another width is wrong data, not absent trailing features."""
    with pytest.raises(DataError, match=r"d\.csv has 2 features and a label column, expected 4"):
        read_data(write(tmp_path / "d.csv", "1,2,0\n3,4,1\n"), n_features=4)


# ----------------------------------------------------------------------------- NPZ


@pytest.mark.parametrize("name", ["d.npz", "d.npz.gz", "d.npz.bz2", "zip-without-suffix.bin"])
def test_npz_round_trip_is_exact(tmp_path, name):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((7, 3))
    y = np.array(["a", "b", "a", "a", "b", "b", "a"])
    plain = tmp_path / "plain.npz"
    np.savez(plain, X=X, y=y)
    path = write(tmp_path / name, plain.read_bytes())
    dataset = read_data(path)
    np.testing.assert_array_equal(dataset.X, X)
    np.testing.assert_array_equal(dataset.labels, y)


def test_npz_integer_features_become_float64(tmp_path):
    np.savez(tmp_path / "i.npz", X=np.arange(6).reshape(3, 2), y=np.array([0, 1, 1]))
    dataset = read_data(tmp_path / "i.npz")
    assert dataset.X.dtype == np.float64
    assert dataset.labels.tolist() == [0, 1, 1]


# ----------------------------------------------------------------------------- errors


def npz_bytes(tmp_path: Path, **arrays) -> bytes:
    target = tmp_path / "scratch.npz"
    np.savez(target, **arrays)
    return target.read_bytes()


# name, content, fragments the message must contain (besides the file name)
ERROR_CASES = {
    "empty libsvm": ("e.svm", b"", ["empty file"]),
    "comments only": ("e.svm", b"# nothing\n\n", ["no data lines"]),
    "empty csv": ("e.csv", b"\n  \n", ["empty file"]),
    "header only": ("e.csv", b"a,b,y\n", ["no data lines"]),
    "binary garbage": ("g.svm", bytes(range(256)), ["binary data"]),
    "binary without NUL": ("g.bin", bytes(range(255, 0, -1)), ["binary data", "0x7f at offset 128"]),
    "high bytes only": ("g.svm", b"1 1:2\n" + bytes(range(128, 256)) * 2, ["line 2", "UTF-8", "0x80"]),
    "not utf-8 csv": ("g.csv", b"1,2,a\n3,4,\xff\xfe\n", ["line 2", "UTF-8"]),
    "bad label": ("b.svm", b"1 1:2\n-1 2:3\nspam 1:1\n", ["line 3", "label", "spam"]),
    "bad index": ("b.svm", b"1 1:2\n1 x:3\n", ["line 2", "index", "'x'"]),
    "bad value": ("b.svm", b"1 1:2\n\n1 3:abc\n", ["line 3", "feature 3", "abc"]),
    "missing colon": ("b.svm", b"1 1:2 7\n", ["line 1", "index:value"]),
    "unsorted indices": ("b.svm", b"1 1:1\n1 4:2 2:1\n", ["line 2", "increase"]),
    "huge index": ("b.svm", b"1 99999999999999999999:1\n", ["line 1", "out of range"]),
    "nan in libsvm": ("b.svm", b"1 1:2\n1 1:3\n-1 2:nan\n", ["line 3", "feature 2", "nan"]),
    "inf in libsvm": (
        "b.svm.bz2", bz2.compress(b"1 1:2\n1 1:1e999\n"), ["line 2", "feature 1", "inf"]
    ),
    "nan label": ("b.svm", b"1 1:2\nnan 1:3\n", ["line 2", "label", "nan"]),
    "non-numeric csv feature": ("b.csv", b"1,2,a\n3,?,b\n", ["line 2", "column 2", "'?'"]),
    "csv feature with header": ("b.csv", b"p,q,y\n1,2,a\n3,x4,b\n", ["line 3", "column 2", "'q'"]),
    "nan in csv": ("b.csv", b"1,2,a\n3,4,b\n5,nan,a\n", ["line 3", "column 2", "not finite"]),
    "inf in csv": ("b.csv", b"1,2,a\n-inf,4,b\n", ["line 2", "column 1", "not finite"]),
    "ragged csv": ("b.csv", b"1,2,a\n3,4,b\n5,b\n", ["line 3", "2 fields"]),
    "empty csv label": ("b.csv", b"1,2,a\n3,4,\n", ["line 2", "label is empty"]),
    "single csv column": ("b.csv", b"1\n2\n", ["one column"]),
    "corrupt bz2": ("c.svm.bz2", bz2.compress(b"1 1:2\n" * 100)[:-12], ["corrupt bzip2"]),
    "not bz2 at all": ("c.svm.bz2", b"1 1:2\n", ["not a bzip2 file"]),
    "corrupt gz": ("c.csv.gz", gzip.compress(b"1,2,a\n" * 300)[:-20], ["corrupt gzip"]),
    "bad gz stream": ("c.svm.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 40, ["corrupt gzip"]),
    "npz garbage": ("n.npz", b"this is not a zip archive", ["not an NPZ archive"]),
    "npz truncated": ("n.npz", None, ["NPZ"]),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_bad_files_raise_one_line_data_errors(tmp_path, case):
    name, content, fragments = ERROR_CASES[case]
    if content is None:
        content = npz_bytes(tmp_path, X=np.eye(40), y=np.arange(40))[:300]
    path = tmp_path / name
    path.write_bytes(content)  # written as given: compressed cases are pre-compressed
    with pytest.raises(DataError) as info:
        read_data(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize(
    ("arrays", "fragment"),
    [
        ({"X": np.eye(3)}, "no array y"),
        ({"y": np.arange(3)}, "no array X"),
        ({"X": np.eye(3), "y": np.arange(4)}, "3 rows but y has 4 labels"),
        ({"X": np.arange(3.0), "y": np.arange(3)}, "2-D numeric"),
        ({"X": np.array([["a", "b"]]), "y": np.arange(1)}, "2-D numeric"),
        ({"X": np.array([[1.0, np.nan]]), "y": np.arange(1)}, "X[0, 1] is nan"),
        ({"X": np.eye(2), "y": np.array([1.0, np.inf])}, "y[1] is inf"),
    ],
)
def test_bad_npz_contents(tmp_path, arrays, fragment):
    path = tmp_path / "bad.npz"
    path.write_bytes(npz_bytes(tmp_path, **arrays))
    with pytest.raises(DataError, match=r"bad\.npz") as info:
        read_data(path)
    assert fragment in str(info.value)


def test_npz_with_object_arrays_is_refused_without_unpickling(tmp_path):
    path = tmp_path / "pickled.npz"
    np.savez(path, X=np.eye(2), y=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(DataError, match="pickled.npz"):
        read_data(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(DataError, match=r"nowhere\.svm: no such file"):
        read_data(tmp_path / "nowhere.svm")
    with pytest.raises(DataError, match="is a directory"):
        read_data(tmp_path)


def test_bad_options(tmp_path):
    path = write(tmp_path / "d.csv", "a,b,y\n1,2,x\n")
    with pytest.raises(DataError, match=r"d\.csv: line 1: no column named 'z'"):
        read_data(path, label_column="z")
    with pytest.raises(DataError, match="label column 3 is out of range: the file has 3 columns"):
        read_data(path, label_column=3)
    with pytest.raises(UnknownNameError, match="format"):
        read_data(path, format="xlsx")
    with pytest.raises(ParameterError, match="delimiter"):
        read_data(path, delimiter="::")


def test_sparse_non_finite_values_are_located_by_line(tmp_path):
    text = "".join(f"1 {i % 5 + 1}:{i}\n" for i in range(50)) + "# note\n-1 2:1 4:-inf\n"
    with pytest.raises(DataError, match=r"line 52: feature 4 is -inf"):
        read_data(write(tmp_path / "late.svm.gz", text))


# ----------------------------------------------------------------------------- features


def test_align_features_pads_sparse_and_dense():
    sparse = Dataset(sp.csr_matrix(DENSE), LABELS, "train.svm")
    padded = align_features(sparse, 5)
    assert sp.issparse(padded.X) and padded.X.format == "csr" and padded.X.shape == (4, 5)
    np.testing.assert_array_equal(dense(padded.X), np.hstack([DENSE, np.zeros((4, 2))]))
    dense_padded = align_features(Dataset(DENSE, LABELS, "t.csv"), 4)
    np.testing.assert_array_equal(dense_padded.X, np.hstack([DENSE, np.zeros((4, 1))]))
    assert align_features(sparse, 3) is sparse


def test_align_features_rejects_extra_features():
    test = Dataset(sp.csr_matrix((2, 130)), np.array([1.0, -1.0]), "test.svm")
    with pytest.raises(DataError, match="^test.svm has 130 features, the model has 123$"):
        align_features(test, 123)
    with pytest.raises(ParameterError):
        align_features(test, -1)


def test_dataset_checks_its_shapes():
    with pytest.raises(DataError, match="3 rows of features"):
        Dataset(np.eye(3), np.arange(2), "x")
    dataset = Dataset(np.eye(2), np.array(["b", "a"]), "x")
    assert (dataset.n_samples, dataset.n_features) == (2, 2)
    assert dataset.classes.tolist() == ["a", "b"]
    assert "n_samples=2" in repr(dataset)


# ----------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    ("labels", "expected_y", "expected_classes"),
    [
        ([-1.0, 1.0, 1.0], [-1, 1, 1], (-1.0, 1.0)),
        ([1, 0, 0], [1, -1, -1], (0, 1)),
        ([1, 2, 2, 2], [1, -1, -1, -1], (2, 1)),  # other labels: the smaller class is positive
        ([4.0, 2.0, 2.0], [1, -1, -1], (2.0, 4.0)),
        ([True, False, False], [1, -1, -1], (False, True)),
        (["h", "g", "g"], [1, -1, -1], ("g", "h")),
    ],
)
def test_encode_binary_default_positive(labels, expected_y, expected_classes):
    y, classes = encode_binary(np.array(labels))
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, expected_y)
    assert classes == expected_classes
    assert all(type(c) in (float, int, bool, str) for c in classes)  # plain, JSON-friendly


@pytest.mark.parametrize(
    ("labels", "positive", "expected_y", "expected_classes"),
    [
        ([2.0, 4.0, 4.0], "2", [1, -1, -1], (4.0, 2.0)),
        ([2.0, 4.0, 4.0], "4", [-1, 1, 1], (2.0, 4.0)),
        ([-1.0, 1.0], "+1", [-1, 1], (-1.0, 1.0)),
        ([-1.0, 1.0], -1, [1, -1], (1.0, -1.0)),
        (["g", "h"], "g", [1, -1], ("h", "g")),
        (["1", "2"], 1, [1, -1], ("2", "1")),
        ([True, False], "false", [-1, 1], (True, False)),
    ],
)
def test_encode_binary_explicit_positive(labels, positive, expected_y, expected_classes):
    y, classes = encode_binary(np.array(labels), positive=positive)
    np.testing.assert_array_equal(y, expected_y)
    assert classes == expected_classes


@pytest.mark.parametrize(
    ("labels", "positive", "fragment"),
    [
        ([1.0, 1.0], None, "only one class (1)"),
        (list(range(7)), None, "7 classes (0, 1, 2, 3, 4, …)"),
        ([1, 2], "3", "positive class '3' is not among the labels (1 and 2)"),
        (["a", "b"], "c", "positive class 'c'"),
        ([1.0, np.nan], None, "NaN"),
        ([], None, "no labels"),
    ],
)
def test_encode_binary_errors(labels, positive, fragment):
    with pytest.raises(DataError, match="^train.csv: ") as info:
        encode_binary(np.array(labels), positive=positive, source="train.csv")
    assert fragment in str(info.value)


def test_encode_multiclass():
    codes, classes = encode_multiclass(np.array(["b", "a", "c", "a"]))
    np.testing.assert_array_equal(codes, [1, 0, 2, 0])
    assert codes.dtype == np.int64 and classes.tolist() == ["a", "b", "c"]
    codes, classes = encode_multiclass([7.0, 3.0, 7.0])
    np.testing.assert_array_equal(codes, [1, 0, 1])
    np.testing.assert_array_equal(classes, [3.0, 7.0])


def test_read_label_file(tmp_path):
    numbers = read_label_file(write(tmp_path / "y.txt", " 1\n-1 \n2.5\n\n\n"))
    assert numbers.dtype == np.float64 and numbers.tolist() == [1.0, -1.0, 2.5]
    words = read_label_file(write(tmp_path / "y.txt.gz", "cat\n1\ndog\n"))
    assert words.tolist() == ["cat", "1", "dog"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "empty file"),
        ("\n \n", "empty file"),
        ("1\n2 3\n", "line 2: more than one value"),
        ("1\n\n2\n", "line 2: empty line"),
        ("1\nnan\n", "line 2: label 'nan' is not finite"),
    ],
)
def test_read_label_file_errors(tmp_path, content, fragment):
    with pytest.raises(DataError, match=r"labels\.txt") as info:
        read_label_file(write(tmp_path / "labels.txt", content))
    assert fragment in str(info.value)
    with pytest.raises(DataError, match="no such file"):
        read_label_file(tmp_path / "absent.txt")


# ----------------------------------------------------------------------------- splitting


def test_train_test_split_stratified_and_seeded():
    dataset = datasets.load("a9a", "test")
    train, test = train_test_split(dataset, 0.25, seed=3)
    assert sp.issparse(train.X) and train.X.format == "csr"
    assert train.n_samples + test.n_samples == dataset.n_samples
    assert test.n_samples == int(np.ceil(0.25 * dataset.n_samples))
    rate = np.mean(dataset.labels == 1)
    assert abs(np.mean(train.labels == 1) - rate) < 1e-3
    assert abs(np.mean(test.labels == 1) - rate) < 1e-3
    again, _ = train_test_split(dataset, 0.25, seed=3)
    other, _ = train_test_split(dataset, 0.25, seed=4)
    assert (train.X != again.X).nnz == 0
    assert (train.X != other.X).nnz > 0
    assert train.n_features == dataset.n_features


def test_train_test_split_errors():
    tiny = Dataset(np.eye(3), np.array([0, 1, 1]), "tiny.csv")
    with pytest.raises(DataError, match="tiny.csv: cannot split"):
        train_test_split(tiny, 0.5)
    with pytest.raises(ParameterError):
        train_test_split(tiny, 1.5)
    train, test = train_test_split(tiny, 1, stratify=False)
    assert (train.n_samples, test.n_samples) == (2, 1)


# ----------------------------------------------------------------------------- shared files


def shared(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


def test_shared_keel_letter_reads_as_multiclass():
    dataset = read_data(shared("letter.keel.csv.bz2"))
    assert (dataset.n_samples, dataset.n_features) == (20000, 16)
    assert dataset.classes.tolist() == [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    counts = np.unique(dataset.labels, return_counts=True)[1]
    assert counts.min() == 734 and counts.max() == 813


def test_shared_keel_pendigits_comma_space():
    dataset = read_data(shared("pendigits.keel.csv.bz2"))
    assert (dataset.n_samples, dataset.n_features) == (10992, 16)
    assert np.unique(dataset.labels, return_counts=True)[1].tolist() == [
        1143, 1143, 1144, 1055, 1144, 1055, 1056, 1142, 1055, 1055
    ]


def test_shared_magic04_string_labels():
    dataset = read_data(shared("magic04.data.bz2"))
    assert (dataset.n_samples, dataset.n_features) == (19020, 10)
    y, classes = encode_binary(dataset.labels, source=dataset.source)
    assert classes == ("g", "h") and int(np.sum(y == 1)) == 6688


# ----------------------------------------------------------------------------- fuzzing

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SUFFIXES = ["x.svm", "x.csv", "x.txt", "x.npz", "x.svm.bz2", "x.csv.gz", "x"]
VALID_TEXTS = {
    "x.svm": LIBSVM_TEXT.encode(),
    "x.csv": b"a,b,y\n1.5,2,g\n3,4,h\n5,-6e3,g\n",
}


def read_or_data_error(path: Path) -> None:
    try:
        dataset = read_data(path)
    except DataError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert isinstance(dataset, Dataset)
        assert dataset.X.dtype == np.float64
        assert np.isfinite(dense(dataset.X)).all()


@FUZZ
@given(content=st.binary(max_size=400), name=st.sampled_from(SUFFIXES))
def test_random_bytes_give_a_dataset_or_a_data_error(tmp_path, content, name):
    path = tmp_path / name
    path.write_bytes(content)
    read_or_data_error(path)


@FUZZ
@given(
    name=st.sampled_from(sorted(VALID_TEXTS)),
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.binary(max_size=3)),
        min_size=1,
        max_size=4,
    ),
    compress=st.sampled_from(["", ".bz2", ".gz"]),
)
def test_mutated_files_give_a_dataset_or_a_data_error(tmp_path, name, edits, compress):
    content = bytearray(VALID_TEXTS[name])
    for position, length, replacement in edits:
        at = position % (len(content) + 1)
        content[at : at + length] = replacement
    read_or_data_error(write(tmp_path / (name + compress), bytes(content)))

"""Array directories streamed through ``np.load(mmap_mode="r")``: the rows as saved, and the refusals.

Each refusal is one line naming the directory and the file; the rows read are compared
with the arrays ``np.save`` wrote (the reference), part by part and whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from calopt.errors import DataError
from calopt.io.stream import open_stream, read_whole, survey


def _dense(tmp_path: Path, X: np.ndarray, y: np.ndarray) -> Path:
    folder = tmp_path / "dense"
    folder.mkdir()
    np.save(folder / "X.npy", X)
    np.save(folder / "y.npy", y)
    return folder


def test_dense_rows_are_the_saved_ones_part_by_part(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((1003, 7)), np.where(rng.random(1003) < 0.3, 1, -1)
    source = open_stream(_dense(tmp_path, X, y), part_rows=100)
    parts = list(source.parts())
    assert [part.X.shape[0] for part in parts] == [100] * 10 + [3]
    assert (np.concatenate([part.X for part in parts]).view(np.uint64) == X.view(np.uint64)).all()
    assert (np.concatenate([part.labels for part in parts]) == y).all()
    again = next(source.read(4))
    assert (again.X == X[400:500]).all() and (again.labels == y[400:500]).all()


def test_float32_rows_stay_float32_and_integers_become_float64(tmp_path):
    X = np.arange(24, dtype=np.float32).reshape(8, 3)
    part = next(open_stream(_dense(tmp_path, X, np.arange(8) % 2), part_rows=5).parts())
    assert part.X.dtype == np.float32 and (part.X == X[:5]).all()
    folder = tmp_path / "ints"
    folder.mkdir()
    np.save(folder / "X.npy", X.astype(np.int16))
    np.save(folder / "y.npy", np.arange(8) % 2)
    part = next(open_stream(folder, part_rows=5).parts())
    assert part.X.dtype == np.float64 and (part.X == X[:5]).all()


def test_csr_directory_is_the_saved_matrix(tmp_path):
    rng = np.random.default_rng(1)
    matrix = sp.random(300, 20, density=0.2, format="csr", random_state=2)
    y = np.where(rng.random(300) < 0.5, 1, -1)
    folder = tmp_path / "csr"
    folder.mkdir()
    for name in ("data", "indices", "indptr"):
        np.save(folder / f"{name}.npy", getattr(matrix, name))
    np.save(folder / "y.npy", y)
    whole = read_whole(open_stream(folder, part_rows=64))
    assert (whole.X != matrix[:, :whole.X.shape[1]]).nnz == 0 and (whole.labels == y).all()
    assert survey(open_stream(folder, part_rows=64)).n_rows == 300


def _write_npy(path: Path, header: dict, payload: bytes) -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(payload)


@pytest.mark.parametrize("make, message", [
    (lambda p: np.save(p, np.array([[{"a": 1}, None]] * 3, dtype=object), allow_pickle=True),
     "dense: X.npy: an array of object (numbers or strings only; never pickle)"),
    (lambda p: np.save(p, np.asfortranarray(np.ones((3, 2)))),
     "dense: X.npy: Fortran order; save it in C order (rows contiguous) to stream it"),
    (lambda p: _write_npy(p, {"descr": "<f8", "fortran_order": False, "shape": (3, 1000)}, b"\0" * 64),
     "dense: X.npy: declares 3×1000 float64 but holds 64 bytes"),
    (lambda p: p.write_bytes(b"not an array at all"), "dense: X.npy: not a .npy array ("),
    (lambda p: p.write_bytes(b""), "dense: X.npy: not a .npy array ("),
    (lambda p: np.save(p, np.zeros(3, dtype="M8[s]")), "dense: X.npy: an array of datetime64[s] (numbers or strings"),
])
def test_a_bad_array_is_refused_in_one_line(tmp_path, make, message):
    folder = _dense(tmp_path, np.ones((3, 2)), np.array([1, -1, 1]))
    make(folder / "X.npy")
    with pytest.raises(DataError) as error:
        survey(open_stream(folder, part_rows=2))
    text = str(error.value)
    assert text.startswith(f"{folder.parent}/{message}") or text.startswith(f"{folder}: {message[7:]}"), text
    assert "\n" not in text


def test_a_pickled_label_file_is_refused(tmp_path):
    folder = _dense(tmp_path, np.ones((3, 2)), np.array([1, -1, 1]))
    np.save(folder / "y.npy", np.array(["a", None, 3], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match=r"dense: y\.npy: an array of object \(numbers or strings only; never pickle\)"):
        open_stream(folder)


def test_shapes_that_do_not_agree_are_refused(tmp_path):
    folder = _dense(tmp_path, np.ones((3, 2)), np.array([1, -1, 1, 1]))
    with pytest.raises(DataError, match=r"X\.npy has shape \(3, 2\); y\.npy has 4 labels"):
        open_stream(folder)
    np.save(folder / "y.npy", np.ones((4, 1)))
    with pytest.raises(DataError, match=r"y\.npy must be 1-D, not of shape \(4, 1\)"):
        open_stream(folder)

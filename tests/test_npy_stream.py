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


# ----------------------------------------------------------------------------- epochs over the mapping
def _reference_epoch(X, y, starts, batch_size, buffer_rows, rng, scale, run=1):
    """The shuffle buffer's batches by its definition, with plain lists of row numbers: parts in
    ``rng.permutation`` order, each added to the pool as runs of ``run`` consecutive rows from
    its first row (the last shorter; ``run`` 1: single rows); past ``buffer_rows`` rows (not at
    the last part) a permutation of the pool's runs gives the rows in serving order, whole
    batches are served and the runs not served (the one the last batch ends in: its rest) stay,
    in pool order; the rest served at the end. ``rng`` None: parts in file order, each pool
    served in order, whole batches only until the last part."""
    n_parts = len(starts) - 1
    order = list(range(n_parts)) if rng is None or n_parts == 1 else list(rng.permutation(n_parts))
    pool, batches = [], []  # runs: lists of row numbers

    def serve(rows):
        for i in range(0, len(rows), batch_size):
            chunk = rows[i:i + batch_size]
            batches.append((X[chunk] / scale if scale is not None else X[chunk], y[chunk]))

    def rows_of(permutation, served):
        rows, kept = [], {}
        for place in permutation:
            room = served - len(rows)
            rows += pool[place][:max(room, 0)]
            if room < len(pool[place]):
                kept[place] = pool[place][max(room, 0):]
        return rows, [kept[place] for place in sorted(kept)]

    for k, part in enumerate(order):
        rows = list(range(starts[part], starts[part + 1]))
        pool += [rows[i:i + run] for i in range(0, len(rows), run)]
        size, last = sum(map(len, pool)), k == n_parts - 1
        if rng is None or (not last and size > buffer_rows):
            if rng is None:
                served = size if last else size // batch_size * batch_size
                permutation = list(range(len(pool)))
            else:
                served = (size - buffer_rows) // batch_size * batch_size
                permutation = list(rng.permutation(len(pool)))
            rows, pool = rows_of(permutation, served)
            serve(rows)
    if pool:
        permutation = range(len(pool)) if rng is None else rng.permutation(len(pool))
        serve(rows_of(permutation, sum(map(len, pool)))[0])
    return batches


def _reader(folder, part_rows, buffer_rows, folded=False, keep_mapped=False):
    from calopt.io.stream import StreamReader

    source = open_stream(folder, part_rows=part_rows)
    found = survey(source)
    y = np.where(found.labels > 0, 1.0, -1.0)
    return StreamReader(source, found, y, found.max_abs.astype(np.float64), np, buffer_rows=buffer_rows,
                        folded=folded, keep_mapped=keep_mapped), y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("part_rows, buffer_rows, batch_size", [(100, 0, 32), (100, 150, 32), (100, 150, 7),
                                                                (64, 1000, 50), (2000, 100, 64), (97, 5000, 10)])
def test_an_epoch_over_the_mapping_serves_the_shuffle_buffers_batches(tmp_path, dtype, part_rows, buffer_rows,
                                                                      batch_size):
    """A memory-mapped X.npy is served from the mapping by row numbers (no pool of rows): the
    batches of the shuffle buffer's definition (a plain-list reference), to the bit, seeded and
    in file order (rng None)."""
    rng = np.random.default_rng(1)
    X = (rng.standard_normal((1003, 7)) * [1, 10, 0.1, 3, 1, 1, 2]).astype(dtype)
    y = np.where(rng.random(1003) < 0.3, 1, -1)
    reader, y_pm = _reader(_dense(tmp_path, X, y), part_rows, buffer_rows)
    starts = list(range(0, 1003, part_rows)) + [1003]
    scale = np.max(np.abs(X), axis=0).astype(np.float64)
    for seed in (None, 0, 5):
        served = list(reader.epoch(batch_size, None if seed is None else np.random.default_rng(seed)))
        expected = _reference_epoch(X, y_pm, starts, batch_size, buffer_rows,
                                    None if seed is None else np.random.default_rng(seed), scale)
        assert len(served) == len(expected)
        for batch, (X_ref, y_ref) in zip(served, expected):
            assert batch.X.dtype == np.float64 and batch.X.shape == X_ref.shape
            assert (batch.X.view(np.uint64) == X_ref.view(np.uint64)).all()
            assert (batch.y == y_ref).all() and batch.weight is None


def test_run_rows_keeps_sixteen_runs_a_batch_and_single_rows_below():
    from calopt.io.stream import RUN_ROWS, run_rows

    assert [run_rows(b) for b in (1, 16, 31, 32, 100, 1024, 1025, 100_000)] == [1, 1, 1, 2, 6, 64, 64, RUN_ROWS]


def test_folded_rows_products_are_the_scaled_rows_products():
    from calopt.io.stream import FoldedRows

    rng = np.random.default_rng(3)
    X = (rng.standard_normal((40, 5)) * [1, 100, 0.01, 3, 1]).astype(np.float32)
    scale = np.max(np.abs(X), axis=0).astype(np.float64)
    folded, scaled = FoldedRows(X, 1.0 / scale), X.astype(np.float64) / scale
    assert folded.shape == (40, 5) and folded.T.shape == (5, 40)
    for w, c in ((rng.standard_normal(5), rng.standard_normal(40)), (rng.standard_normal((5, 3)), rng.standard_normal((40, 3)))):
        got, want = folded @ w, scaled @ w
        assert got.dtype == np.float64 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # float32 products
        np.testing.assert_allclose(folded.T @ c, scaled.T @ c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("part_rows, buffer_rows, batch_size", [(100, 150, 64), (97, 500, 50), (2000, 100, 1024),
                                                                (64, 0, 7), (100, 150, 200)])
def test_a_folded_epoch_serves_runs_of_the_shuffle_buffer(tmp_path, part_rows, buffer_rows, batch_size):
    """float32 rows served folded: the shuffle buffer's batches with the pool held as runs of
    run_rows(batch_size) rows of a part, the runs permuted (the plain-list reference), the rows
    as stored, to the bit; float64 rows are not folded (the buffer's batches of scaled rows, as before)."""
    from calopt.io.stream import FoldedRows, run_rows

    rng = np.random.default_rng(1)
    X = (rng.standard_normal((1003, 4)) * [1, 10, 0.1, 3]).astype(np.float32)
    y = np.where(rng.random(1003) < 0.3, 1, -1)
    reader, y_pm = _reader(_dense(tmp_path, X, y), part_rows, buffer_rows, folded=True)
    starts = list(range(0, 1003, part_rows)) + [1003]
    for seed in (None, 0, 5):
        served = list(reader.epoch(batch_size, None if seed is None else np.random.default_rng(seed)))
        expected = _reference_epoch(X, y_pm, starts, batch_size, buffer_rows,
                                    None if seed is None else np.random.default_rng(seed), None, run_rows(batch_size))
        assert len(served) == len(expected)
        for batch, (X_ref, y_ref) in zip(served, expected):
            assert isinstance(batch.X, FoldedRows) and batch.X.X.dtype == np.float32
            assert (batch.X.X.view(np.uint32) == X_ref.view(np.uint32)).all()
            assert (batch.y == y_ref).all() and batch.weight is None
    (tmp_path / "f64").mkdir()
    reader, _ = _reader(_dense(tmp_path / "f64", X.astype(np.float64), y), part_rows, buffer_rows, folded=True)
    assert all(type(batch.X) is np.ndarray for batch in reader.epoch(batch_size, np.random.default_rng(0)))


def test_a_folded_epoch_closes_its_mapping_and_drops_parts(tmp_path, monkeypatch):
    """A folded epoch (float32, runs of 4 at batch 64) drops each part once none of its rows is
    left in the buffer, serves every row once, and closes the mapping at its end and when the
    loop stops early; a zero column (scale 1) trains to finite weights."""
    import calopt
    from calopt.io import stream

    rng = np.random.default_rng(5)
    X = rng.standard_normal((1000, 3)).astype(np.float32)
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(1000) > 0.5, 1, -1)
    folder = _dense(tmp_path, X, y)
    reader, _ = _reader(folder, 50, 60, folded=True)
    closed, drops = [], []
    drop, close = stream.MappedRows.drop, stream.MappedRows.close
    monkeypatch.setattr(stream.MappedRows, "drop", lambda self, a, b: (drops.append((a, b)), drop(self, a, b)))
    monkeypatch.setattr(stream.MappedRows, "close", lambda self: (closed.append(True), close(self)))
    served = [row for batch in reader.epoch(64, np.random.default_rng(3)) for row in batch.X.X[:, 0]]
    assert sorted(served) == sorted(X[:, 0].tolist()) and closed == [True] and len(drops) >= 5
    epoch = reader.epoch(64, np.random.default_rng(4))
    next(epoch), next(epoch)
    epoch.close()
    assert closed == [True, True]
    X[:, 2] = 0.0  # a zero column: its scale is 1 in training (the reader is handed the factors)
    (tmp_path / "zero").mkdir()
    model = calopt.fit(open_stream(_dense(tmp_path / "zero", X, y)), measure="gmean", algorithm="spade", epochs=2,
                       select="none", batch_size=64)
    assert np.all(np.isfinite(model.coef)) and model.coef.ravel()[2] == 0.0


def test_parts_whose_rows_all_left_the_pool_leave_the_resident_set(tmp_path, monkeypatch):
    """Each part dropped from the mapping (its pages released) has no row served after the drop,
    at least one part is dropped mid-epoch, and the mapping is closed at the end of an epoch and
    when the loop stops early."""
    from calopt.io import stream

    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((1000, 3)).astype(np.float32), np.where(rng.random(1000) < 0.5, 1, -1)
    folder = _dense(tmp_path, X, y)
    reader, _ = _reader(folder, 50, 60)
    events, closed = [], []
    drop, close = stream.MappedRows.drop, stream.MappedRows.close
    monkeypatch.setattr(stream.MappedRows, "drop", lambda self, a, b: (events.append(("drop", a, b)), drop(self, a, b)))
    monkeypatch.setattr(stream.MappedRows, "close", lambda self: (closed.append(True), close(self)))
    scale = np.max(np.abs(X), axis=0).astype(np.float64)
    for batch in reader.epoch(16, np.random.default_rng(3)):
        rows = [int(np.flatnonzero((X / scale == row).all(axis=1))[0]) for row in batch.X]
        events.append(("served", rows))
    assert closed == [True]
    drops = [event for event in events if event[0] == "drop"]
    assert 5 <= len(drops) < 20 and all(b - a == 50 for _, a, b in drops)
    for k, event in enumerate(events):
        if event[0] == "drop":
            later = [row for other in events[k:] if other[0] == "served" for row in other[1]]
            assert not any(event[1] <= row < event[2] for row in later)
    served = [row for event in events if event[0] == "served" for row in event[1]]
    assert sorted(served) == list(range(1000))
    epoch = reader.epoch(16, np.random.default_rng(3))
    next(epoch), next(epoch)
    epoch.close()
    assert closed == [True, True]


@pytest.mark.parametrize("folded", [False, True])
def test_a_small_mapping_is_kept_between_epochs_and_serves_the_same_batches(tmp_path, monkeypatch, folded):
    """A mapping kept between epochs (keep_mapped; by default a file of at most KEEP_MAPPED_SHARE
    of the physical memory) is made once and populated once, releases no part and stays open
    across epochs until the reader is closed, and its epochs are the batches of the mapping made
    and dropped each epoch, to the bit; a fit from a directory closes it at its end."""
    import calopt
    from calopt.io import stream

    rng = np.random.default_rng(6)
    X = rng.standard_normal((1000, 3)).astype(np.float32)
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(1000) > 0.5, 1, -1)
    folder = _dense(tmp_path, X, y)
    made, drops, closed, populated = [], [], [], []
    mapped, drop, close = stream._DenseDirectory.mapped, stream.MappedRows.drop, stream.MappedRows.close
    populate = stream.MappedRows.populate
    monkeypatch.setattr(stream.MappedRows, "populate", lambda self: (populated.append(True), populate(self)))
    monkeypatch.setattr(stream._DenseDirectory, "mapped", lambda self: (made.append(True), mapped(self))[1])
    monkeypatch.setattr(stream.MappedRows, "drop", lambda self, a, b: (drops.append((a, b)), drop(self, a, b)))
    monkeypatch.setattr(stream.MappedRows, "close", lambda self: (closed.append(True), close(self)))
    kept, _ = _reader(folder, 50, 60, folded=folded, keep_mapped=None)  # 12 KB: kept by the share
    fresh, _ = _reader(folder, 50, 60, folded=folded, keep_mapped=False)
    for seed in (3, 4):
        for a, b in zip(kept.epoch(64, np.random.default_rng(seed)), fresh.epoch(64, np.random.default_rng(seed)),
                        strict=True):
            got, want = (a.X.X, b.X.X) if folded else (a.X, b.X)
            assert got.dtype == want.dtype and (got == want).all() and (a.y == b.y).all()
    assert len(made) == 3 and len(closed) == 2 and len(drops) >= 10  # the fresh reader's two epochs
    assert len(populated) == 1
    kept.close()
    assert len(closed) == 3
    next(iter(kept.epoch(64, np.random.default_rng(5))))  # mapped again after close
    assert len(made) == 4
    kept.close()
    monkeypatch.setattr(stream, "KEEP_MAPPED_SHARE", 0.0)  # every file released part by part
    small, _ = _reader(folder, 50, 60, folded=folded, keep_mapped=None)
    list(small.epoch(64, np.random.default_rng(3)))
    assert len(closed) == 5 and len(made) == 5
    monkeypatch.setattr(stream, "KEEP_MAPPED_SHARE", 1.0)
    made.clear(), closed.clear(), drops.clear()
    calopt.fit(open_stream(folder, part_rows=50), measure="gmean", algorithm="spade", epochs=3, select="none",
               batch_size=64)
    assert len(made) == 1 and closed == [True] and not drops


def test_populating_a_mapping_where_the_system_cannot_is_nothing(tmp_path):
    """MappedRows.populate asks for every page at once; a kernel without MADV_POPULATE_READ (an
    OSError) or a system without madvise leaves the mapping as it is, the rows unchanged."""
    from calopt.io import stream

    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    folder = _dense(tmp_path, X, np.array([1, -1, 1, -1]))
    mapped = open_stream(folder).mapped()

    class Refusing:
        def __init__(self, inner):
            self.inner = inner

        def madvise(self, *args):
            raise OSError(22, "Invalid argument")

        def __len__(self):
            return len(self.inner)

    mapped.populate()  # this kernel: the pages mapped, nothing else changes
    np.testing.assert_array_equal(mapped.X, X)
    inner, mapped._map = mapped._map, Refusing(mapped._map)
    mapped.populate()
    mapped._map = inner
    np.testing.assert_array_equal(mapped.X, X)
    assert mapped.nbytes == len(inner)
    mapped.close()


def test_a_directory_trains_the_in_memory_model(tmp_path):
    """One part and a buffer at least as large: float64 rows give the in-memory epochs to the bit,
    for SPADE and STAMP. float32 rows are served as stored, the scale folded into the products
    (FoldedRows, float32 products); below batches of 32 rows a run is one row, the in-memory
    order: the in-memory model to float32's rounding (measured: 1e-6 relative)."""
    import calopt

    rng = np.random.default_rng(4)
    X = np.round(rng.standard_normal((700, 6)), 2)
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.standard_normal(700) > 0.5, 1, -1)
    (tmp_path / "f64").mkdir(), (tmp_path / "f32").mkdir()
    float64, float32 = _dense(tmp_path / "f64", X, y), _dense(tmp_path / "f32", X.astype(np.float32), y)
    for algorithm, measure in (("spade", "gmean"), ("stamp", "f1")):
        memory = calopt.fit(X, y, measure=measure, algorithm=algorithm, select="none", epochs=3)
        streamed = calopt.fit(open_stream(float64), measure=measure, algorithm=algorithm, epochs=3, select="none")
        np.testing.assert_array_equal(streamed.coef, memory.coef)
        assert streamed.intercept == memory.intercept and streamed.threshold == memory.threshold
        X32 = X.astype(np.float32).astype(np.float64)
        memory = calopt.fit(X32, y, measure=measure, algorithm=algorithm, select="none", epochs=3, batch_size=16)
        streamed = calopt.fit(open_stream(float32), measure=measure, algorithm=algorithm, epochs=3, select="none",
                              batch_size=16)
        np.testing.assert_allclose(streamed.coef, memory.coef, rtol=2e-5, atol=1e-7)
        assert streamed.threshold == pytest.approx(memory.threshold, rel=2e-5, abs=1e-6)
        assert not np.array_equal(streamed.coef, memory.coef)  # float32 products: not the same bits
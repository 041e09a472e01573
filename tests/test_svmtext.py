"""Issue 25, LIBSVM parsing: the vectorised parser (calopt.io.svmtext) reads every line as
scikit-learn's load_svmlight_file does, to the bit, in memory, streamed and converted; lines it
does not take go to scikit-learn's parser; an error in any block names the file's line; the
block read ahead in a thread keeps the order of values and errors."""

from __future__ import annotations

import gzip
import json
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from calopt.errors import DataError
from calopt.io import files, stream
from calopt.io.files import read_data
from calopt.io.stream import _stack, convert, open_stream, survey, widen
from calopt.io.svmtext import parse_lines, read_ahead

#: Text of the common form: the vectorised parser reads it (parse_lines is not None).
COMMON = {
    "plain": b"1 1:0.5 3:2\n-1 2:1e-3\n",
    "crlf": b"1 1:1.25\r\n-1 2:2\r\n",
    "tabs and trailing spaces": b"1\t1:1  \t 2:3   \n  -1 4:5\t\n",
    "label only": b"1\n-1 1:1\n3\n",
    "signs and exponents": b"+1 1:+.5 2:-0 3:1E+05 4:-1.e-3 5:007 6:-12\n-1.5 2:1e-400 3:5.\n",
    "leading zeros in an index": b"2 0012:3 00013:4\n",
    "no final line feed": b"1 1:1\n-1 2:2",
    "blank lines": b"\n\n1 1:1\n\n  \n-1 2:2\n\n",
    "zero index": b"1 0:1 2:3\n0 1:2\n",
    "17 digits": b"1 1:0.30000000000000004 2:1.7976931348623157e308 3:4.9406564584124654e-324\n",
}
#: Text only scikit-learn's parser reads (the vectorised parser returns None): the same values.
OTHER = {
    "comments": b"# header\n1 1:1 # trailing\n\n-1 2:2\n",
    "qid": b"1 qid:3 1:1 2:2\n-1 qid:4 3:1\n",
    "index of 10 digits": b"1 0000000002:1\n",
    "nan label written in letters": b"1 1:1\n-1 2:inf\n",
    "underscore in a number": b"1 1:1_000\n",
    "vertical tab": b"1 1:1\x0b2:2\n",
    "index with a plus sign": b"1 +1:1 +3:2\n",
}


def _reference(text: bytes, zero_based: bool | str = True) -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = load_svmlight_file(BytesIO(text), dtype=np.float64, zero_based=zero_based)
    return sp.csr_matrix(X), y


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def _assert_same(X, labels, reference) -> None:
    X_ref, y_ref = reference
    X = sp.csr_matrix(X)
    assert X.shape == X_ref.shape
    np.testing.assert_array_equal(X.indptr, X_ref.indptr)
    np.testing.assert_array_equal(X.indices, X_ref.indices)
    np.testing.assert_array_equal(_bits(X.data), _bits(X_ref.data))
    np.testing.assert_array_equal(_bits(labels), _bits(y_ref))


@pytest.mark.parametrize("name", sorted(COMMON))
def test_parse_lines_reads_the_common_form_as_scikit_learn(name):
    text = COMMON[name]
    parsed = parse_lines(text)
    assert parsed is not None, "the vectorised parser must take this text"
    values, indices, indptr, labels = parsed
    width = int(indices.max()) + 1 if indices.size else 1
    _assert_same(sp.csr_matrix((values, indices, indptr), shape=(labels.size, width)), labels, _reference(text))


@pytest.mark.parametrize("name", sorted(OTHER))
def test_other_text_is_left_to_scikit_learn(name):
    assert parse_lines(OTHER[name]) is None


@pytest.mark.parametrize("bad", [b"1 1:\n", b"1 :1\n", b"1 1:2:3\n", b"1 2:1 1:1\n", b"1 1:1 1:2\n", b"1:1 2:2\n",
                                 b"1 1:1e\n", b"1 1:.\n", b"1 1:1-2\n", b"1 1.5:1\n", b"1 -1:1\n",
                                 b"1 1:1 2\n", b"1 1:--1\n", b"e 1:1\n", b"+ 1:1\n"])
def test_text_scikit_learn_refuses_is_not_read_by_the_vectorised_parser(bad):
    with pytest.raises((ValueError, OverflowError)):
        load_svmlight_file(BytesIO(bad), zero_based=True)
    assert parse_lines(bad) is None


def _random_text(rng: np.random.Generator, rows: int) -> bytes:
    """Rows of random values written in every way Python's ``float`` reads (repr, %g of 1-17
    digits, %e, whole numbers, signs, exponents far out), separated by spaces and tabs."""
    lines = []
    for _ in range(rows):
        k = int(rng.integers(0, 12))
        columns = np.sort(rng.choice(300, size=k, replace=False))
        parts = [str(int(rng.integers(-3, 4)))]
        for j in columns:
            v = float(rng.standard_normal() * 10.0 ** rng.integers(-30, 30))
            style = int(rng.integers(0, 5))
            text = (repr(v), f"{v:.{int(rng.integers(1, 18))}g}", f"{v:.{int(rng.integers(0, 12))}e}",
                    str(int(rng.integers(-10**6, 10**6))), f"{v:+.3f}")[style]
            parts.append(f"{j}:{text}")
        lines.append((" " if rng.random() < 0.8 else "\t").join(parts))
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("seed", range(4))
def test_random_text_is_read_to_the_bit(seed):
    text = _random_text(np.random.default_rng(seed), 3000)
    parsed = parse_lines(text)
    assert parsed is not None
    values, indices, indptr, labels = parsed
    width = int(indices.max()) + 1 if indices.size else 1
    _assert_same(sp.csr_matrix((values, indices, indptr), shape=(labels.size, width)), labels, _reference(text))


# ----------------------------------------------------------------------------- files, in memory and streamed
def _streamed(path: Path, **options):
    source = open_stream(path, chunk_bytes=64, **options)
    found = survey(source)
    parts = list(source.parts())
    return _stack([widen(part.X, found.n_features) for part in parts]), np.concatenate([p.labels for p in parts])


@pytest.mark.parametrize("name", sorted({**COMMON, **OTHER, "bom": None}))
@pytest.mark.parametrize("blocks", [1 << 20, 40])
def test_files_read_as_scikit_learn_reads_them(tmp_path, monkeypatch, name, blocks):
    """read_data (whole, and in blocks of 40 bytes) and a stream (64-byte parts) against
    load_svmlight_file with the same index base rule (``auto``), comments, BOM, qid, CRLF..."""
    text = b"\xef\xbb\xbf1 1:1\n-1 2:0.5\n" if name == "bom" else {**COMMON, **OTHER}[name]
    path = tmp_path / "data.svm"
    path.write_bytes(text)
    monkeypatch.setattr(files, "LIBSVM_BLOCK_BYTES", blocks)
    try:
        reference = _reference(text[3:] if name == "bom" else text, zero_based="auto")
    except ValueError:
        with pytest.raises(DataError):
            read_data(path)
        return
    if not (np.isfinite(reference[0].data).all() and np.isfinite(reference[1]).all()):
        with pytest.raises(DataError, match="line"):
            read_data(path)
        return
    dataset = read_data(path)
    _assert_same(dataset.X, dataset.labels, reference)
    _assert_same(*_streamed(path), reference)


def test_gzip_file_is_read_as_the_plain_one(tmp_path, monkeypatch):
    text = _random_text(np.random.default_rng(5), 2000)
    (tmp_path / "d.svm").write_bytes(text)
    (tmp_path / "d.svm.gz").write_bytes(gzip.compress(text))
    monkeypatch.setattr(files, "LIBSVM_BLOCK_BYTES", 4096)
    reference = _reference(text, zero_based="auto")
    for name in ("d.svm", "d.svm.gz"):
        dataset = read_data(tmp_path / name)
        _assert_same(dataset.X, dataset.labels, reference)


# ----------------------------------------------------------------------------- errors in any block
def _lines_with(bad_line: int, bad: str, n: int = 300) -> bytes:
    lines = [f"{1 if i % 3 else -1} 1:{i}.5 4:2 7:{i}" for i in range(1, n + 1)]
    lines[bad_line - 1] = bad
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("bad, words", [
    ("1 1:1 4:x1", "line 250: feature 4: value 'x1' is not a number"),
    ("1 1:1 4:inf", "line 250: feature 4 is inf (values must be finite)"),
    ("1 4:1 2:1", "line 250: feature index 2 after 4: indices must increase"),
    ("1 1:1 4 7:1", "line 250: '4' is not an index:value pair"),
])
def test_a_bad_token_in_a_later_block_is_named_by_its_line(tmp_path, monkeypatch, bad, words):
    path = tmp_path / "data.svm"
    path.write_bytes(_lines_with(250, bad))
    messages = []
    for blocks in (1 << 20, 256):
        monkeypatch.setattr(files, "LIBSVM_BLOCK_BYTES", blocks)
        with pytest.raises(DataError) as error:
            read_data(path)
        messages.append(str(error.value))
    with pytest.raises(DataError) as error:
        survey(open_stream(path, chunk_bytes=256))
    messages.append(str(error.value))
    with pytest.raises(DataError) as error:  # blocks parsed two at a time, in threads
        convert(open_stream(path, chunk_bytes=256), tmp_path / "out")
    messages.append(str(error.value))
    assert len(set(messages)) == 1
    assert messages[0].startswith(f"{path}: {words} in ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.svm"]


def test_the_first_bad_line_in_the_file_is_named_whatever_the_blocks(tmp_path, monkeypatch):
    lines = _lines_with(120, "1 1:nan").decode().splitlines()
    lines[279] = "1 1:oops"
    path = tmp_path / "data.svm"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(files, "LIBSVM_BLOCK_BYTES", 512)
    with pytest.raises(DataError, match="line 120: feature 1 is nan"):
        read_data(path)
    with pytest.raises(DataError, match="line 120: feature 1 is nan"):
        survey(open_stream(path, chunk_bytes=512))
    with pytest.raises(DataError, match="line 120: feature 1 is nan"):
        convert(open_stream(path, chunk_bytes=512), tmp_path / "out")


def test_index_zero_in_a_one_based_read_names_its_line_in_a_later_block(tmp_path, monkeypatch):
    path = tmp_path / "data.svm"
    path.write_bytes(_lines_with(200, "1 0:1 4:2"))
    monkeypatch.setattr(files, "LIBSVM_BLOCK_BYTES", 256)
    with pytest.raises(DataError, match="line 200: feature index 0 in a file read with one-based indices"):
        read_data(path, zero_based=False)
    assert read_data(path).zero_based is True  # auto: an index 0 makes it zero-based


# ----------------------------------------------------------------------------- reading ahead
def test_read_ahead_keeps_the_order_and_raises_in_place():
    def items():
        yield from range(5)
        raise DataError("bad item 5")

    seen = []
    with pytest.raises(DataError, match="bad item 5"):
        for item in read_ahead(items()):
            seen.append(item)
    assert seen == [0, 1, 2, 3, 4]


def test_read_ahead_stops_when_closed():
    produced = []

    def items():
        for i in range(1000):
            produced.append(i)
            yield i

    ahead = read_ahead(items(), depth=1)
    assert [next(ahead) for _ in range(3)] == [0, 1, 2]
    ahead.close()
    assert len(produced) <= 6  # the consumed items, the queued one and the one being produced


# ----------------------------------------------------------------------------- convert in one pass
@pytest.mark.parametrize("zero_based_text", [False, True])
def test_convert_writes_what_read_data_reads(tmp_path, zero_based_text):
    text = _random_text(np.random.default_rng(7), 1500)
    if not zero_based_text:  # no index 0: read one-based, indices made zero-based after the pass
        text = text.replace(b" 0:", b" 300:").replace(b"\t0:", b"\t300:")
        text = b"\n".join(_sorted_line(line) for line in text.splitlines()) + b"\n"
    path = tmp_path / "d.svm"
    path.write_bytes(text)
    expected = read_data(path)
    assert expected.zero_based is zero_based_text
    found = convert(open_stream(path, chunk_bytes=4096), tmp_path / "out")
    out = tmp_path / "out"
    data, indices, indptr = (np.load(out / f"{name}.npy") for name in ("data", "indices", "indptr"))
    meta = json.loads((out / "calopt-stream.json").read_text())
    X = sp.csr_matrix((data, indices, indptr), shape=(found.n_rows, meta["n_features"]))
    _assert_same(X, np.load(out / "y.npy"), (sp.csr_matrix(expected.X), expected.labels))
    assert meta["zero_based"] is zero_based_text and meta["nnz"] == expected.X.nnz


def _sorted_line(line: bytes) -> bytes:
    label, *pairs = line.split()
    pairs.sort(key=lambda pair: int(pair.split(b":")[0]))
    return b" ".join([label, *pairs])


def test_convert_makes_a_second_pass_when_the_first_cannot_write_as_it_reads(tmp_path, monkeypatch):
    text = _random_text(np.random.default_rng(8), 800)
    path = tmp_path / "d.svm"
    path.write_bytes(text)
    convert(open_stream(path, chunk_bytes=4096), tmp_path / "one")
    write, calls = stream._ArrayWriter.add, []

    def refuse_first(self, X, **options):
        calls.append(1)
        if len(calls) == 1:
            raise stream._Rewrite
        write(self, X, **options)

    monkeypatch.setattr(stream._ArrayWriter, "add", refuse_first)
    convert(open_stream(path, chunk_bytes=4096), tmp_path / "two")
    for name in ("data", "indices", "indptr", "y"):
        np.testing.assert_array_equal(np.load(tmp_path / "one" / f"{name}.npy"),
                                      np.load(tmp_path / "two" / f"{name}.npy"))
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


# ----------------------------------------------------------------------------- convert against load_svmlight_file
def _converted(out: Path) -> tuple[sp.csr_matrix, np.ndarray]:
    meta = json.loads((out / "calopt-stream.json").read_text())
    data, indices, indptr = (np.load(out / f"{name}.npy") for name in ("data", "indices", "indptr"))
    assert data.dtype == np.float64 and indices.dtype == np.int32 and indptr.dtype == np.int64
    for name, array in (("data", data), ("indices", indices), ("indptr", indptr)):  # no byte after the array
        assert (out / f"{name}.npy").stat().st_size == 128 + array.nbytes
    X = sp.csr_matrix((data, indices, indptr), shape=(meta["n_rows"], meta["n_features"]))
    return X, np.load(out / "y.npy")


def _late_zero_text(rows: int) -> bytes:
    """Zero-based text whose first index 0 is on its last line: read ``auto``, every part before
    that line was written taken to be one-based, and is mended at the end."""
    rng = np.random.default_rng(11)
    lines = []
    for i in range(rows):
        columns = np.sort(rng.choice(np.arange(1, 60), size=int(rng.integers(0, 8)), replace=False))
        values = [f"{v:.{int(rng.integers(1, 17))}g}" for v in rng.standard_normal(columns.size)]
        lines.append(" ".join([str(int(rng.integers(0, 2)))] + [f"{j}:{v}" for j, v in zip(columns, values)]))
    lines.append("1 0:2.5 7:1")
    return ("\n".join(lines) + "\n").encode()


CONVERTED = {"random zero-based": lambda: _random_text(np.random.default_rng(3), 2000),
             "zero on the last line": lambda: _late_zero_text(2000),
             "one-based": lambda: _late_zero_text(2000).rsplit(b"\n", 2)[0] + b"\n",
             **{name: (lambda text=text: text) for name, text in {**COMMON, **OTHER}.items()}}


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_convert_writes_what_load_svmlight_file_reads(tmp_path, monkeypatch, name, direct):
    """The converted arrays against scikit-learn's reading of the text (``zero_based="auto"``),
    bit for bit: many parts (4 KB blocks), the write buffer filled many times (8 KB), with
    O_DIRECT and through the page cache."""
    text = CONVERTED[name]()
    path = tmp_path / "d.svm"
    path.write_bytes(text)
    monkeypatch.setattr(stream, "DIRECT_WRITES", direct)
    monkeypatch.setattr(stream._OutFile, "STAGE", 2 * stream._OutFile.ALIGN)
    try:
        reference = _reference(text, zero_based="auto")
    except ValueError:
        with pytest.raises(DataError):
            convert(open_stream(path, chunk_bytes=4096), tmp_path / "out")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["d.svm"]
        return
    if not (np.isfinite(reference[0].data).all() and np.isfinite(reference[1]).all()):
        with pytest.raises(DataError, match="line"):  # scikit-learn reads inf; calopt refuses it
            convert(open_stream(path, chunk_bytes=4096), tmp_path / "out")
        return
    found = convert(open_stream(path, chunk_bytes=4096), tmp_path / "out")
    X, labels = _converted(tmp_path / "out")
    _assert_same(X, labels, reference)
    as_written = _reference(text, zero_based=True)[0]
    assert found.zero_based is bool(as_written.nnz and as_written.indices.min() == 0)


@pytest.mark.parametrize("zero_based", [True, False])
def test_convert_with_the_index_base_given(tmp_path, zero_based):
    text = _late_zero_text(1500).rsplit(b"\n", 2)[0] + b"\n"  # no index 0: either base reads it
    path = tmp_path / "d.svm"
    path.write_bytes(text)
    convert(open_stream(path, chunk_bytes=4096, zero_based=zero_based), tmp_path / "out")
    _assert_same(*_converted(tmp_path / "out"), _reference(text, zero_based=zero_based))


def _refusing_direct_writes(monkeypatch, refuse_at: int, short_at: int | None = None) -> list[int]:
    """os.write for O_DIRECT files refuses (EINVAL) its ``refuse_at``-th call, and writes one
    aligned block less than asked at its ``short_at``-th; returns the count of such calls."""
    import errno
    import os

    direct_fds, calls = set(), []
    real_open, real_write = os.open, os.write

    def opened(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if flags & getattr(os, "O_DIRECT", 0):
            direct_fds.add(fd)
        return fd

    def written(fd, data):
        if fd not in direct_fds:
            return real_write(fd, data)
        calls.append(1)
        if len(calls) == refuse_at:
            raise OSError(errno.EINVAL, "Invalid argument")
        if len(calls) == short_at and len(data) > stream._OutFile.ALIGN:
            return real_write(fd, memoryview(data)[:len(data) - stream._OutFile.ALIGN])
        return real_write(fd, data)

    monkeypatch.setattr(stream.os, "open", opened)
    monkeypatch.setattr(stream.os, "write", written)
    return calls


@pytest.mark.parametrize("refuse_at, short_at", [(1, None), (2, None), (3, 2), (10**9, 1)])
def test_convert_falls_back_when_direct_writes_are_refused(tmp_path, monkeypatch, refuse_at, short_at):
    """A file system refusing O_DIRECT at its first write or later (and a short write): the same
    bytes through the page cache from there."""
    if not hasattr(__import__("os"), "O_DIRECT"):
        pytest.skip("no O_DIRECT on this OS")
    text = _random_text(np.random.default_rng(5), 2000)
    path = tmp_path / "d.svm"
    path.write_bytes(text)
    monkeypatch.setattr(stream._OutFile, "STAGE", 2 * stream._OutFile.ALIGN)
    calls = _refusing_direct_writes(monkeypatch, refuse_at, short_at)
    convert(open_stream(path, chunk_bytes=4096), tmp_path / "out")
    if not calls:
        pytest.skip("the file system refused O_DIRECT when the file was opened")
    _assert_same(*_converted(tmp_path / "out"), _reference(text, zero_based="auto"))

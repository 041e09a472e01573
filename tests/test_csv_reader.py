"""The CSV reader on pandas: the values of a plain-loop reference, and errors naming line and column.

The reference (:func:`reference`) is written here from the :mod:`csv` module and ``float``
alone, the rules the reader documents: blank lines and a KEEL ``@`` header skipped, a
UTF-8 byte-order mark dropped, fields split by the delimiter (``str.split`` for
whitespace) and stripped, features ``float`` of their text, labels numbers when every
one is a number. Every file of the battery is read by :func:`calopt.io.files.read_data`
and compared bit for bit; the valid files that pandas can vouch for must be read without
the line-by-line scan (it is made to fail), so the values compared are pandas'.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import calopt.io.files as files
from calopt.errors import DataError
from calopt.io.files import read_data
from calopt.io.stream import open_stream, survey

#: Numbers whose nearest double is hard to find (halfway cases, subnormals, 17+ digits, long mantissas).
TRICKY = [
    "2.2250738585072011e-308", "2.2250738585072012e-308", "4.9406564584124654e-324", "2.4703282292062328e-324",
    "1.7976931348623157e308", "0.1", "0.30000000000000004", "9007199254740993", "9007199254740993.0", "1e23",
    "8.98846567431158e307", "123456789012345678901234567890", "0.000000000000000000000000000001",
    "1.00000000000000011102230246251565404236316680908203125",
    "1.00000000000000011102230246251565404236316680908203124",
    "1.00000000000000011102230246251565404236316680908203126", "7.038531e-26", "-0.0", "+1.5", ".5", "5.",
    "1E5", "1e-5", "3.0e+00", "2.225073858507201136057409796709131975934819546351645648e-308",
    "0.500000000000000166533453693773481063544750213623046875", "62.5364939768271845828", "8.10109172351e-10",
    "18446744073709551617", "-9223372036854775809", "0", "-7", "1e-320",
]


def tricky_numbers(count: int, seed: int = 0) -> list[str]:
    """:data:`TRICKY`, then random doubles written with 17 significant digits, ``repr`` and 25 digits."""
    rng = random.Random(seed)
    numbers = list(TRICKY)
    while len(numbers) < count:
        value = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if value == value and abs(value) != float("inf"):
            numbers.append(rng.choice(["%.17g", "%.25g", "%r", "%.3e"]) % value)
    return numbers[:count]


def reference(text: str, delimiter: str | None, header: bool, label_column: int = -1):
    """(features, labels, names) of a CSV text, by the documented rules with csv and float only."""
    lines = [line.rstrip("\r") for line in text.removeprefix("\ufeff").split("\n")]
    lines = [line for line in lines if line.strip()]
    while lines and lines[0].strip().startswith("@"):
        lines.pop(0)
    if delimiter is None:
        rows = [line.split() for line in lines]
    else:
        rows = [[field.strip() for field in row] for row in csv.reader(lines, delimiter=delimiter,
                                                                          skipinitialspace=True)]
    names = rows.pop(0) if header else None
    k = label_column % len(rows[0])
    X = np.array([[float(field) for j, field in enumerate(row) if j != k] for row in rows])
    texts = [row[k] for row in rows]
    try:
        labels = np.array([float(t) for t in texts])
    except ValueError:
        labels = np.array(texts)
    feature_names = tuple(name for j, name in enumerate(names) if j != k) if names else None
    return X, labels, feature_names


def table(n_rows: int, n_features: int, labels: list[str], seed: int = 0) -> list[list[str]]:
    """Rows of tricky numbers with a label from ``labels`` last."""
    numbers = tricky_numbers(n_rows * n_features, seed)
    return [numbers[i * n_features:(i + 1) * n_features] + [labels[i % len(labels)]] for i in range(n_rows)]


def lines_of(rows: list[list[str]], sep: str = ",") -> list[str]:
    return [sep.join(row) for row in rows]


ROWS = table(300, 6, ["1", "-1", "-1"])
TEXT_ROWS = table(200, 4, ["cat", "dog", "bird"], seed=1)

#: name -> (file text, what read_data is given, the reference's (delimiter, header, label column), whether
#: pandas reads it: False for the files only the line scan reads as documented).
BATTERY = {
    "plain": ("\n".join(lines_of(ROWS)) + "\n", {}, (",", False, -1), True),
    "no final newline": ("\n".join(lines_of(ROWS)), {}, (",", False, -1), True),
    "header": ("a,b,c,d,e,f,y\n" + "\n".join(lines_of(ROWS)) + "\n", {}, (",", True, -1), True),
    "numbered header": ("0,1,2,3,4,5,6\n" + "\n".join(lines_of(ROWS)) + "\n", {}, (",", True, -1), True),
    "label named y over numbers": ("0,1,2,3,4,5,y\n" + "\n".join(lines_of(ROWS)) + "\n", {}, (",", True, -1), True),
    "semicolon with spaces": ("\n".join(lines_of(ROWS, "; ")) + "\n", {}, (";", False, -1), True),
    "tab": ("\n".join(lines_of(ROWS, "\t")) + "\n", {}, ("\t", False, -1), True),
    "whitespace": ("\n".join("  " + "   ".join(r[:3]) + "\t" + " ".join(r[3:]) for r in ROWS) + "\n",
                   {"delimiter": "whitespace"}, (None, False, -1), True),
    "sniffed whitespace": ("\n".join(lines_of(ROWS, " ")) + "\n", {}, (None, False, -1), True),
    "crlf": ("\r\n".join(lines_of(ROWS)) + "\r\n", {}, (",", False, -1), True),
    "bom and header": ("\ufeffa,b,c,d,e,f,y\n" + "\n".join(lines_of(ROWS)) + "\n", {}, (",", True, -1), True),
    "blank lines": ("\n\n" + "\n  \n".join(lines_of(ROWS)) + "\n\t\n\n", {}, (",", False, -1), True),
    "keel": ("@relation x\n@attribute a real\n@data\n" + "\n".join(lines_of(ROWS, ", ")) + "\n", {},
             (",", False, -1), True),
    "text labels": ("\n".join(lines_of(TEXT_ROWS)) + "\n", {}, (",", False, -1), True),
    "text labels first": ("\n".join(",".join([r[-1], *r[:-1]]) for r in TEXT_ROWS) + "\n", {"label_column": 0},
                          (",", False, 0), True),
    "label by name": ("x1,cls,x2,x3,x4\n" + "\n".join(",".join([r[0], r[-1], *r[1:-1]]) for r in TEXT_ROWS)
                      + "\n", {"label_column": "cls"}, (",", True, 1), True),
    "quoted": ('"a","b,c","d","e","y"\n' + "\n".join(",".join(f'"{f}"' if j % 2 else f for j, f in enumerate(r))
                                                     for r in TEXT_ROWS) + "\n", {}, (",", True, -1), True),
    "trailing spaces": ("\n".join(", ".join(f + "  " for f in r) for r in TEXT_ROWS) + "\n", {},
                        (",", False, -1), True),
    "label with inner and outer spaces": ("\n".join(",".join(r[:-1]) + ",  big " + r[-1] + " " for r in TEXT_ROWS)
                                          + "\n", {}, (",", False, -1), True),
    "one row": ("1.5,2.5,1\n", {}, (",", False, -1), True),
    "header and one row": ("a,b,y\n1.5,2.5,1\n", {}, (",", True, -1), True),
    "no header forced": ("0,1,2,3,4,5,6\n" + "\n".join(lines_of(ROWS)) + "\n", {"header": False},
                         (",", False, -1), True),
    "unicode labels": ("\n".join(",".join(r[:-1]) + ",é" + r[-1] + "ß" for r in TEXT_ROWS) + "\n", {},
                       (",", False, -1), True),
    # only the scan reads these as documented: float's underscores, a field spanning lines, NBSP between fields
    "underscores": ("1_000,2,1\n3,4_5.5,0\n", {}, (",", False, -1), False),
    "quoted newline in a label": ('1,2,"a\nb"\n3,4,c\n5,6,d\n', {}, (",", False, -1), False),
    "whitespace with nbsp": ("1\xa02 7\n4 5\xa06\n", {"delimiter": "whitespace"}, (None, False, -1), False),
    "decimal exponent forms": ("\n".join(f"{a},{b},1" for a, b in [("1e5", ".5"), ("5.", "+3"), ("-0", "1E-3")])
                               + "\n", {}, (",", False, -1), True),
}


@pytest.fixture
def no_scan(monkeypatch):
    """Make the line-by-line scan fail: what is read comes from pandas."""
    def refuse(*args, **kwargs):
        raise AssertionError("scanned line by line")
    monkeypatch.setattr(files, "_scan_csv", refuse)


@pytest.mark.parametrize("name", list(BATTERY))
@pytest.mark.parametrize("compression", ["", ".gz", ".bz2"])
def test_reads_what_the_reference_reads(name, compression, tmp_path, monkeypatch):
    text, options, (delimiter, header, label_column), through_pandas = BATTERY[name]
    raw = text.encode("utf-8")
    raw = {"": raw, ".gz": gzip.compress(raw), ".bz2": bz2.compress(raw)}[compression]
    path = tmp_path / f"data.csv{compression}"
    path.write_bytes(raw)
    if through_pandas:
        monkeypatch.setattr(files, "_scan_csv", lambda *a, **k: pytest.fail("scanned line by line"))
    dataset = read_data(path, **options)
    X, labels, names = reference(text, delimiter, header, label_column)
    assert dataset.X.dtype == np.float64 and dataset.X.flags.f_contiguous  # the order the scan gives
    assert dataset.X.shape == X.shape
    assert (dataset.X.view(np.uint64) == X.view(np.uint64)).all(), "not bit-identical to float()"
    assert dataset.labels.dtype.kind == labels.dtype.kind
    assert dataset.labels.tolist() == labels.tolist()
    assert dataset.feature_names == names


#: Files outside the reference's rules, read as the scan reads them: a NUL beyond the head's binary
#: check (csv keeps it; NumPy's text arrays drop a trailing one, so the label is 0), a lone CR in a quoted label.
ODD = {
    "nul beyond the head": ("1,2,0\n" * 12_000 + "1,2,0\x00\n", {}, None, False),
    "cr in a quoted label": ('1,2,"a\rb"\n3,4,c\n', {}, None, False),
}


def test_pandas_and_the_scan_agree_on_every_battery_file(tmp_path):
    """The two readings of one file (pandas', the scan's) give the same Dataset."""
    for name, (text, options, _, _) in {**BATTERY, **ODD}.items():
        path = tmp_path / "data.csv"
        path.write_text(text, encoding="utf-8", newline="")
        found = files._input(path)
        request = files._CsvOptions(options.get("label_column", -1), options.get("delimiter"), options.get("header"))
        scanned = files._scan_csv(found, path.read_bytes(), request)
        read = read_data(path, **options)
        assert (read.X.view(np.uint64) == scanned.X.view(np.uint64)).all(), name
        assert (read.X.flags.c_contiguous, read.X.flags.f_contiguous) == \
            (scanned.X.flags.c_contiguous, scanned.X.flags.f_contiguous), name
        assert read.labels.tolist() == scanned.labels.tolist(), name
        assert (read.feature_names, read.label_name, read.label_index) == \
            (scanned.feature_names, scanned.label_name, scanned.label_index), name


def _reads_as_the_reference(path, rows) -> None:
    """A comma file of ``rows`` is read to the bit as the reference parser reads it."""
    text = "\n".join(lines_of(rows)) + "\n"
    path.write_text(text)
    X, labels, _ = reference(text, ",", False)
    dataset = read_data(path)
    assert (dataset.X.view(np.uint64) == X.view(np.uint64)).all() and (dataset.labels == labels).all()


def test_large_file_of_random_doubles_is_bit_identical(tmp_path, no_scan):
    _reads_as_the_reference(tmp_path / "big.csv", table(20_000, 10, ["0", "1"], seed=3))


@pytest.mark.parametrize("name", ["header", "text labels", "semicolon with spaces", "whitespace", "crlf",
                                  "bom and header", "keel", "blank lines"])
def test_a_streamed_csv_reads_its_blocks_through_pandas_as_in_memory(name, tmp_path, no_scan):
    """The streaming reader parses blocks of lines through the same parser: the same rows."""
    text, options, (delimiter, header, label_column), _ = BATTERY[name]
    path = tmp_path / "data.csv"
    path.write_text(text, encoding="utf-8", newline="")
    source = open_stream(path, chunk_bytes=2048, **options)
    parts = list(source.parts())
    assert len(parts) > 2
    X, labels, names = reference(text, delimiter, header, label_column)
    streamed = np.concatenate([part.X for part in parts])
    assert (streamed.view(np.uint64) == X.view(np.uint64)).all()
    assert np.concatenate([part.labels for part in parts]).tolist() == labels.tolist()
    assert (source.columns or {}).get("feature_names") == (list(names) if names else None)


def test_a_wide_file_is_read_through_pandas(tmp_path, no_scan):
    """Lines longer than the first 64 kB read for the sniff (3,000 columns) still go to pandas."""
    _reads_as_the_reference(tmp_path / "wide.csv", table(30, 2999, ["1", "0"], seed=4))


def test_stdin_is_read_through_pandas(tmp_path):
    text = "\n".join(lines_of(ROWS)) + "\n"
    code = ("import sys, numpy as np, calopt.io.files as f\n"
            "f._scan_csv = None\n"  # calling it would fail: the values come from pandas
            "d = f.read_data('-', format='csv')\n"
            "sys.stdout.write(d.X.tobytes().hex())")
    out = subprocess.run([sys.executable, "-c", code], input=text.encode(), capture_output=True, check=True).stdout
    X, _, _ = reference(text, ",", False)
    assert bytes.fromhex(out.decode()) == X.tobytes()


def test_model_columns_are_matched_by_name_through_pandas(tmp_path, no_scan):
    rows = TEXT_ROWS[:50]
    (tmp_path / "t.csv").write_text("x3,cls,x1,x2,x4\n" + "\n".join(
        ",".join([r[2], r[-1], r[0], r[1], r[3]]) for r in rows) + "\n")
    dataset = read_data(tmp_path / "t.csv", columns={"feature_names": ["x1", "x2", "x3", "x4"], "label_column": "cls"})
    expected = np.array([[float(f) for f in r[:4]] for r in rows])
    assert (dataset.X.view(np.uint64) == expected.view(np.uint64)).all()
    assert dataset.labels.tolist() == [r[-1] for r in rows]
    assert dataset.feature_names == ("x1", "x2", "x3", "x4")


# ----------------------------------------------------------------------------- errors
def _bad_file(tmp_path: Path, bad: str, row: int = 4321, column: int = 3, rows: int = 5000,
              compression: str = "") -> Path:
    """A CSV of ``rows`` valid rows (4 features and a label) with ``bad`` as feature ``column`` (from 1)
    on line ``row``."""
    lines = [f"{i}.5,{i % 7}.25,-{i},{i}e-3,{i % 2}" for i in range(rows)]
    fields = lines[row - 1].split(",")
    fields[column - 1] = bad
    lines[row - 1] = ",".join(fields)
    raw = ("\n".join(lines) + "\n").encode()
    path = tmp_path / f"bad.csv{compression}"
    path.write_bytes({"": raw, ".gz": gzip.compress(raw), ".bz2": bz2.compress(raw)}[compression])
    return path


@pytest.mark.parametrize("bad, message", [
    ("abc", "line 4321, column 3: 'abc' is not a number"),
    ("nan", "line 4321, column 3: 'nan' is not finite (features must be finite numbers)"),
    ("-inf", "line 4321, column 3: '-inf' is not finite"),
    ("1e400", "line 4321, column 3: '1e400' is not finite"),
    ("", "line 4321, column 3: '' is not a number"),
    ('"1,5"', "line 4321, column 3: '1,5' is not a number (a decimal comma? calopt reads decimal points)"),
    ("NA", "line 4321, column 3: 'NA' is not a number"),
    ("0x10", "line 4321, column 3: '0x10' is not a number"),
])
@pytest.mark.parametrize("compression", ["", ".gz"])
def test_a_bad_value_is_named_by_line_and_column(tmp_path, bad, message, compression):
    path = _bad_file(tmp_path, bad, compression=compression)
    with pytest.raises(DataError) as error:
        read_data(path)
    assert str(error.value) == f"{path}: {message}" or str(error.value).startswith(f"{path}: {message}")
    assert "\n" not in str(error.value)


def test_a_bad_value_after_a_header_names_the_column(tmp_path):
    path = tmp_path / "named.csv"
    path.write_text("a,b,c,y\n" + "1,2,3,0\n" * 100 + "1,x,3,0\n")
    with pytest.raises(DataError, match=r"named\.csv: line 102, column 2 \('b'\): 'x' is not a number"):
        read_data(path)


@pytest.mark.parametrize("text, message", [
    ("1,2,0\n" * 50 + "1,2\n", "line 51: 2 fields where line 1 has 3"),
    ("1,2,0\n" * 50 + "1,2,0,4\n", "line 51: 4 fields where line 1 has 3"),
    ("1,2,0\n" * 50 + "1,2,\n", "line 51: the label is empty"),
    ("1,2,0\n" * 50 + "1,2,nan\n", "line 51: label 'nan' is not finite"),
    ("1,2,0\n" * 50 + "1,2,0\r3,4,1\n", "line 51: new-line character seen in unquoted field"),
])
def test_a_bad_line_is_named(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(text.encode())
    with pytest.raises(DataError) as error:
        read_data(path)
    assert message in str(error.value) and str(error.value).startswith(f"{path}: ")


def test_a_bad_value_in_a_later_block_of_a_stream_names_the_files_line(tmp_path):
    path = _bad_file(tmp_path, "oops", row=4321, column=2)
    with pytest.raises(DataError, match=r"line 4321, column 2: 'oops' is not a number"):
        survey(open_stream(path, chunk_bytes=4096))


def test_the_cli_exits_2_with_one_line_naming_line_and_column(tmp_path):
    from calopt_cli.app import app

    path = _bad_file(tmp_path, "oops", row=4000, column=4)
    result = CliRunner().invoke(app, ["train", str(path), "--epochs", "1", "--no-progress"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"calopt: error: {path}: line 4000, column 4: 'oops' is not a number"]


def test_odd_whitespace_list_is_every_space_but_space_tab_cr_lf():
    """``_ODD_SPACE`` holds exactly the characters ``str.isspace`` takes besides space, tab, CR, LF."""
    wanted = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()} - set(" \t\r\n")
    found = {chr(c) for c in range(sys.maxunicode + 1) if files._ODD_SPACE.fullmatch(chr(c))}
    assert found == wanted


def test_float_parser_of_pandas_is_the_one_of_python():
    """What the reader relies on: pandas' float64 parsing of a column is ``float`` of each field."""
    import pandas as pd

    numbers = tricky_numbers(50_000, seed=5)
    frame = pd.read_csv(io.StringIO("\n".join(numbers) + "\n"), header=None, dtype={0: np.float64},
                        **files._pandas_float_options())
    expected = np.array([float(t) for t in numbers])
    assert (frame[0].to_numpy().view(np.uint64) == expected.view(np.uint64)).all()

"""Issue 12: a battery of hostile inputs through the CLI, generated from tables.

Every case must end the same way: exit code 2, exactly one ``calopt: error:`` line on
stderr that names the file or the parameter at fault, no traceback, no numpy repr, no
long value echoed whole, nothing on stdout, and not one file created, changed or removed
(the whole folder the case runs in is snapshotted before and after: outputs a failing
run named are not created either). The tables are crossed: each output problem with
each command that writes, each data problem with each place a data file is read, each
model-file problem with each command that reads a model.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse
from sklearn.datasets import dump_svmlight_file
from typer.testing import CliRunner

from calopt.models.archive import _checksum
from calopt_cli.app import app

runner = CliRunner()
FAST = ["--epochs", "2", "--no-progress"]
#: A case: the folder it runs in (templates copied in) -> argv, or (argv, stdin text).
Build = Callable[[Path], Any]


# ----------------------------------------------------------------------------- templates
@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> Path:
    """Data and model files every case starts from (copied into the case's own folder)."""
    folder = tmp_path_factory.mktemp("templates")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = np.where(X[:, 0] - 0.5 * X[:, 2] > 0.5, 1, -1)
    dump_svmlight_file(X, y, str(folder / "train.svm"))  # zero-based, as sklearn writes
    dump_svmlight_file(X, y, str(folder / "one.svm"), zero_based=False)
    X3 = np.round(rng.normal(size=(120, 3)), 4)
    y3 = np.where(X3[:, 0] > 0.2, 1, -1)
    (folder / "train.csv").write_text("".join(f"{a},{b},{c},{label}\n" for (a, b, c), label in zip(X3, y3)))
    for name, data, extra in [("m.npz", "train.svm", []), ("m2.npz", "train.svm", ["-a", "sgd"]),
                              ("m1.npz", "one.svm", []), ("mc.npz", "train.csv", [])]:
        result = runner.invoke(app, ["train", str(folder / data), "-o", str(folder / name), *FAST, *extra])
        assert result.exit_code == 0, result.output
    _interrupted_checkpoint(folder)
    return folder


#: the run whose checkpoint the checkpoint cases forge: 10 batches of 30 rows an epoch, 2 epochs
CHECKPOINTED = ["train", "train.svm", "--epochs", "2", "--batch-size", "30", "--no-progress"]


def _interrupted_checkpoint(folder: Path) -> None:
    """ck.npz: the checkpoint of CHECKPOINTED stopped after 13 batches (as Ctrl-C would stop it)."""
    import calopt
    import calopt_cli.training

    real_fit = calopt.fit

    def fit_stopped(*args, interrupt=None, **kwargs):
        batches = iter(range(12))
        return real_fit(*args, interrupt=lambda: next(batches, None) is None, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(calopt_cli.training.calopt, "fit", fit_stopped)
        patch.chdir(folder)
        result = runner.invoke(app, [*CHECKPOINTED, "--checkpoint", "ck.npz"])
    assert result.exit_code == 130, result.output


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: its kind, mode, and for a file its size and hash, for a link its target."""
    entries = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            detail: Any = os.readlink(path)
        elif stat.S_ISREG(info.st_mode):
            detail = (info.st_size, hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            detail = None
        entries[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), detail)
    return entries


def _run_case(tmp_path: Path, templates: Path, monkeypatch, build: Build, fragments: list[str]) -> str:
    folder = tmp_path / "case"
    shutil.copytree(templates, folder)
    monkeypatch.chdir(folder)  # relative names resolve here; the default checkpoint would land here
    built = build(folder)
    argv, stdin = built if isinstance(built, tuple) else (built, None)
    before = _snapshot(tmp_path)
    result = runner.invoke(app, [str(a) for a in argv], input=stdin)
    assert _snapshot(tmp_path) == before, "a file was created, changed or removed"
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert result.stdout == "", result.stdout
    lines = [line for line in result.stderr.splitlines() if not line.startswith("calopt: warning:")]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("calopt: error: "), line
    assert "np." not in line and "array(" not in line, line  # no numpy repr
    assert len(line) < 600, f"{len(line)} characters"  # long values are cut
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


# ----------------------------------------------------------------------------- helpers
def _write(folder: Path, name: str, content: str | bytes) -> str:
    (folder / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return name


def _mkdir(folder: Path, name: str) -> str:
    (folder / name).mkdir()
    return name


def _link(folder: Path, name: str, target: str) -> str:
    (folder / name).symlink_to(target)
    return name


def _unwritable_folder(folder: Path) -> str:
    """A directory this process cannot write in (as root, /proc/self: root may write anywhere else)."""
    if os.geteuid() == 0:
        return "/proc/self"
    locked = folder / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return str(locked)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _pickled() -> bytes:
    """A .npy of Python objects (written with pickle, which calopt never reads)."""
    buffer = io.BytesIO()
    np.save(buffer, np.array([[{"a": 1}, None], [None, None]], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _huge_member(shape: tuple[int, ...] = (10**7, 10**6)) -> bytes:
    """A .npy header declaring a huge float64 array, followed by 16 bytes."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buffer.getvalue() + bytes(16)


def _zip(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def _model_parts(folder: Path, model: str = "m.npz") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    with np.load(folder / model) as archive:
        arrays = {key: archive[key] for key in archive.files}
    metadata = json.loads(arrays.pop("metadata").tobytes())
    metadata.pop("sha256")
    return arrays, metadata


def _forged(folder: Path, name: str, arrays: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None,
            checksum: bool = True) -> str:
    """A copy of m.npz with arrays and metadata changed, and a checksum that matches (forged)."""
    saved_arrays, saved_metadata = _model_parts(folder)
    saved_arrays.update(arrays or {})
    saved_metadata.update(metadata or {})
    numeric = all(np.asarray(a).dtype.kind in "biuf" for a in saved_arrays.values())
    sha = _checksum(saved_arrays, saved_metadata) if checksum and numeric else "0" * 64
    blob = np.frombuffer(json.dumps({**saved_metadata, "sha256": sha}).encode(), np.uint8)
    members = {"metadata.npy": _npy(blob), **{f"{k}.npy": _npy(np.asarray(v)) for k, v in saved_arrays.items()}}
    return _write(folder, name, _zip(members))


# ----------------------------------------------------------------------------- output paths
#: command writing an output -> (option named in the message, argv with the output path)
WRITERS: dict[str, tuple[str, Callable[[str], list[str]]]] = {
    "train -o": ("--model-out", lambda out: ["train", "train.svm", "-o", out, *FAST]),
    "train --checkpoint": ("--checkpoint", lambda out: ["train", "train.svm", "-o", "new.npz", "--checkpoint", out,
                                                        "--checkpoint-every", "1", *FAST]),
    "aggregate -o": ("--model-out", lambda out: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "-o", out]),
    "predict --out": ("--out", lambda out: ["predict", "m.npz", "train.svm", "--out", out]),
}
#: problem -> (the output path, built in the case folder; fragments of the message)
OUTPUT_PROBLEMS: dict[str, tuple[Callable[[Path], str], list[str]]] = {
    "in a missing directory": (lambda d: "nodir/out.npz", ["nodir/out.npz", "no such directory"]),
    "in a missing nested directory": (lambda d: "a/b/c/out.npz", ["no such directory 'a/b/c'"]),
    "a directory": (lambda d: _mkdir(d, "adir"), ["adir", "is a directory"]),
    "the current directory": (lambda d: ".", ["is a directory"]),
    "a name over 255 bytes": (lambda d: "x" * 300, ["is 300 bytes long"]),
    "a non-ASCII name over 255 bytes": (lambda d: "é" * 130, ["is 260 bytes long"]),
    "a path over 4096 bytes": (lambda d: "/".join(["p" * 200] * 21), ["longer than 4096"]),
    "in an unwritable directory": (lambda d: f"{_unwritable_folder(d)}/out.npz", ["not writable"]),
    "under a file": (lambda d: "train.svm/out.npz", ["train.svm/out.npz", "is a file, not a directory"]),
    "the data file": (lambda d: "train.svm", ["train.svm", "is the input file"]),
    "the data file by another spelling": (lambda d: _mkdir(d, "sub") + "/../train.svm", ["is the input file"]),
    "a symlink to the data file": (lambda d: _link(d, "alias.svm", "train.svm"), ["alias.svm", "is the input file"]),
    "a hard link to the data file": (lambda d: os.link(d / "train.svm", d / "hard.svm") or "hard.svm",
                                     ["hard.svm", "is the input file"]),
    "a dangling link into a missing directory": (lambda d: _link(d, "dangling", "nowhere/out.npz"),
                                                 ["no such directory"]),
    "the first model file": (lambda d: "m.npz", ["m.npz", "is the input file"]),
}
OUTPUT_CASES = {
    f"{writer}: {problem}": (writer, problem)
    for writer in WRITERS for problem in OUTPUT_PROBLEMS
    if not (problem == "the first model file" and writer.startswith("train"))  # train reads no model
}
OUTPUT_CASES_EXTRA: dict[str, tuple[Build, list[str]]] = {
    "train -o -": (lambda d: ["train", "train.svm", "-o", "-", *FAST], ["--model-out -", "only for predict --out"]),
    "aggregate -o -": (lambda d: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "-o", "-"],
                       ["--model-out -", "only for predict --out"]),
    "train --checkpoint -": (lambda d: ["train", "train.svm", "--checkpoint", "-", *FAST], ["--checkpoint -"]),
    "train --checkpoint = -o": (lambda d: ["train", "train.svm", "-o", "m9.npz", "--checkpoint", "m9.npz", *FAST],
                                ["--checkpoint m9.npz", "is also --model-out m9.npz"]),
    "train --checkpoint = -o by a link": (
        lambda d: ["train", "train.svm", "-o", "m9.npz", "--checkpoint", _link(d, "m9link.npz", "m9.npz"), *FAST],
        ["is also --model-out m9.npz"]),
    "train -o = --test": (lambda d: ["train", "train.svm", "--test", "one.svm", "-o", "one.svm", *FAST],
                          ["--model-out one.svm", "is the input file"]),
    "train -o = --resume": (lambda d: ["train", "train.svm", "--resume", "m.npz", "-o", "m.npz", *FAST],
                            ["--model-out m.npz", "is the input file"]),
    "train --checkpoint = --test": (
        lambda d: ["train", "train.svm", "--test", "one.svm", "--checkpoint", "one.svm", *FAST],
        ["--checkpoint one.svm", "is the input file"]),
    "train: an existing default checkpoint with --checkpoint-every": (
        lambda d: ["train", "train.svm", "-o", "run.npz", "--checkpoint-every", "1",
                   _write(d, "run.ckpt.npz", b"an earlier run's") and "--no-progress", "--epochs", "2"],
        ["run.ckpt.npz", "--resume run.ckpt.npz"]),
    "aggregate -o = the second model": (lambda d: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "-o", "m2.npz"],
                                        ["--model-out m2.npz", "is the input file m2.npz"]),
    "aggregate -o = --test": (lambda d: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "--test", "one.svm",
                                         "-o", "one.svm"], ["is the input file one.svm"]),
    "predict --out = the model by a link": (
        lambda d: ["predict", "m.npz", "train.svm", "--out", _link(d, "mlink", "m.npz")], ["is the input file m.npz"]),
}


def _no_work_before_the_check(monkeypatch) -> None:
    """Reading data or a model before the outputs are checked is a bug: make it a traceback."""
    import calopt_cli.aggregate
    import calopt_cli.reading
    import calopt_cli.training

    def work(*args, **kwargs):
        raise AssertionError("data or a model was read before the output paths were checked")

    for module, name in [(calopt_cli.reading, "read_data"), (calopt_cli.training, "load_model"),
                         (calopt_cli.aggregate, "load_models")]:
        monkeypatch.setattr(module, name, work)


@pytest.mark.parametrize("case", list(OUTPUT_CASES))
def test_an_output_path_that_would_do_harm_is_refused_before_any_work(tmp_path, templates, monkeypatch, case):
    writer, problem = OUTPUT_CASES[case]
    option, argv = WRITERS[writer]
    path, fragments = OUTPUT_PROBLEMS[problem]
    _no_work_before_the_check(monkeypatch)
    _run_case(tmp_path, templates, monkeypatch, lambda d: argv(path(d)), [option, *fragments])


@pytest.mark.parametrize("case", list(OUTPUT_CASES_EXTRA))
def test_outputs_that_clash_are_refused(tmp_path, templates, monkeypatch, case):
    _run_case(tmp_path, templates, monkeypatch, *OUTPUT_CASES_EXTRA[case])


_COMPARE = ["compare", "train.svm", "-a", "lbfgs", "--epochs", "1"]
#: --plot against every input and every other output, through names, links and folders (issue 23)
PLOT_CASES: dict[str, tuple[Build, list[str]]] = {
    "train: --plot = DATA": (lambda d: ["train", _write(d, "d.svg", _SVM), "--plot", "d.svg", *FAST],
                             ["--plot d.svg", "is the input file d.svg"]),
    "train: --plot = --test": (lambda d: ["train", "train.svm", "--test", _write(d, "t.svg", _SVM), "--plot", "t.svg",
                                          *FAST], ["--plot t.svg", "is the input file t.svg"]),
    "train: --plot a link to DATA": (lambda d: ["train", "train.svm", "--plot", _link(d, "fig.svg", "train.svm"),
                                                *FAST], ["--plot fig.svg", "is the input file train.svm"]),
    "train: --plot a hard link to DATA": (
        lambda d: ["train", "train.svm", "--plot", os.link(d / "train.svm", d / "hard.svg") or "hard.svg", *FAST],
        ["--plot hard.svg", "is the input file"]),
    "train: --plot = -o": (lambda d: ["train", "train.svm", "-o", "same.png", "--plot", "same.png", *FAST],
                           ["--plot same.png", "is also --model-out same.png"]),
    "train: --plot = --checkpoint": (lambda d: ["train", "train.svm", "--checkpoint", "c.svg", "--plot", "c.svg",
                                                *FAST], ["--plot c.svg", "is also --checkpoint c.svg"]),
    "train: --plot = --resume": (lambda d: ["train", "train.svm", "--resume", _write(d, "r.svg", b"a checkpoint"),
                                            "--plot", "r.svg", *FAST], ["--plot r.svg", "is the input file r.svg"]),
    "train: --plot in a missing directory": (lambda d: ["train", "train.svm", "--plot", "nodir/f.svg", *FAST],
                                             ["--plot nodir/f.svg", "no such directory"]),
    "train: --plot a directory": (lambda d: ["train", "train.svm", "--plot", _mkdir(d, "f.svg"), *FAST],
                                  ["--plot f.svg", "is a directory"]),
    "compare: --plot = --test": (lambda d: [*_COMPARE, "--test", _write(d, "t.svg", _SVM), "--plot", "t.svg"],
                                 ["--plot t.svg", "is the input file t.svg"]),
    "compare: --plot = DATA": (lambda d: ["compare", _write(d, "d.svg", _SVM), "--plot", "d.svg"],
                               ["--plot d.svg", "is the input file d.svg"]),
    "compare: --plot a link to DATA": (lambda d: [*_COMPARE, "--plot", _link(d, "fig.png", "train.svm")],
                                       ["--plot fig.png", "is the input file train.svm"]),
    "compare: --plot in a missing directory": (lambda d: [*_COMPARE, "--plot", "nodir/f.png"],
                                               ["--plot nodir/f.png", "no such directory"]),
    "compare: --plot in an unwritable directory": (lambda d: [*_COMPARE, "--plot", f"{_unwritable_folder(d)}/f.png"],
                                                   ["--plot", "not writable"]),
}


@pytest.mark.parametrize("case", list(PLOT_CASES))
def test_a_figure_path_is_checked_like_every_output_before_any_work(tmp_path, templates, monkeypatch, case):
    """Issue 23: ``--plot`` was never compared with the inputs and the other outputs (``train d.svg --plot
    d.svg`` replaced the training file), and a figure in a missing folder failed after the training."""
    pytest.importorskip("matplotlib")
    _no_work_before_the_check(monkeypatch)
    _run_case(tmp_path, templates, monkeypatch, *PLOT_CASES[case])


def test_a_figure_through_a_link_to_another_file_is_written_there_atomically(tmp_path):
    """A --plot link to a file that is no input is followed (the link stays a link), like -o."""
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    dump_svmlight_file(X, np.where(X[:, 0] > 0.3, 1, -1), str(tmp_path / "d.svm"))
    (tmp_path / "old.svg").write_text("an older figure")
    (tmp_path / "fig.svg").symlink_to("old.svg")
    result = runner.invoke(app, ["train", str(tmp_path / "d.svm"), "--plot", str(tmp_path / "fig.svg"), *FAST])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "fig.svg").is_symlink()
    assert (tmp_path / "old.svg").read_text().lstrip().startswith("<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.svm", "fig.svg", "old.svg"]


# ----------------------------------------------------------------------------- data files
#: where a data file is read -> argv with the file
READERS: dict[str, Callable[[str], list[str]]] = {
    "train DATA": lambda f: ["train", f, "-o", "out.npz", *FAST],
    "train --test": lambda f: ["train", "train.svm", "--test", f, "-o", "out.npz", *FAST],
    "evaluate": lambda f: ["evaluate", "m.npz", f],
    "predict": lambda f: ["predict", "m.npz", f, "--out", "p.txt"],
    "aggregate --data": lambda f: ["aggregate", "m.npz", "m2.npz", "--data", f, "-o", "agg.npz"],
    "aggregate --test": lambda f: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "--test", f, "-o", "agg.npz"],
}
_SVM = "1 0:0.5 2:1.0\n-1 1:0.25\n1 0:0.75\n-1 2:-1.0\n"  # zero-based, as the models were trained
_HUGE_NPZ = _zip({"X.npy": _huge_member(), "y.npy": _npy(np.arange(3))})
#: problem -> (file built in the case folder, fragments, readers for which it is no error)
DATA_PROBLEMS: dict[str, tuple[Callable[[Path], Any], list[str], set[str]]] = {
    "a missing file": (lambda d: "nope.svm", ["nope.svm", "no such file"], set()),
    "an empty file": (lambda d: _write(d, "empty.svm", ""), ["empty.svm", "empty file"], set()),
    "a directory": (lambda d: _mkdir(d, "dir.svm"), ["dir.svm", "is a directory"], set()),
    "binary garbage": (lambda d: _write(d, "g.svm", np.random.default_rng(3).bytes(4000)),
                       ["g.svm", "binary data"], set()),
    "corrupt bzip2": (lambda d: _write(d, "c.svm.bz2", bz2.compress(_SVM.encode() * 50)[:60]),
                      ["c.svm.bz2", "corrupt bzip2"], set()),
    "corrupt gzip": (lambda d: _write(d, "c.svm.gz", gzip.compress(_SVM.encode() * 50)[:40]),
                     ["c.svm.gz", "corrupt gzip"], set()),
    "named .bz2, not bzip2": (lambda d: _write(d, "plain.svm.bz2", _SVM), ["plain.svm.bz2", "not a bzip2 file"], set()),
    "not UTF-8": (lambda d: _write(d, "latin.csv", b"1,2,a\n3,4,\xe9\xe9\n"), ["latin.csv", "UTF-8"], set()),
    "a NaN feature": (lambda d: _write(d, "nan.svm", "1 0:0.5\n-1 0:0.2 1:nan\n"),
                      ["nan.svm", "line 2", "feature 1 is nan"], set()),
    "an infinite CSV feature": (lambda d: _write(d, "inf.csv", "1,2,3,1\n4,inf,6,-1\n"),
                                ["inf.csv", "line 2, column 2", "not finite"], set()),
    "a ragged CSV": (lambda d: _write(d, "ragged.csv", "1,2,3,1\n4,5,-1\n"), ["ragged.csv", "line 2", "fields"], set()),
    "a CSV header without data": (lambda d: _write(d, "head.csv", "a,b,c,y\n"), ["head.csv", "no data lines"], set()),
    "decimal commas": (lambda d: _write(d, "comma.csv", "1,5;2,0;3,1;1\n0,5;1,0;2,2;-1\n"),
                       ["comma.csv", "decimal comma"], set()),
    "an npz declaring 80 TB": (lambda d: _write(d, "huge.npz", _HUGE_NPZ),
                               ["huge.npz", "declares a 10000000×1000000 float64 array"], set()),
    "an npz declaring 80 TB, deflated": (
        lambda d: _write(d, "hugez.npz", _zip({"X.npy": _huge_member(), "y.npy": _npy(np.arange(3))},
                                              zipfile.ZIP_DEFLATED)), ["hugez.npz", "declares"], set()),
    "an npz of objects": (lambda d: _write(d, "obj.npz", _zip({"X.npy": _pickled(), "y.npy": _npy(np.arange(2))})),
                          ["obj.npz", "objects"], set()),
    "an npz without X": (lambda d: _write(d, "nox.npz", _zip({"y.npy": _npy(np.arange(3))})), ["nox.npz", "no array X"],
                         set()),
    "an npz truncated": (lambda d: _write(d, "cut.npz", _zip({"X.npy": _npy(np.eye(40)),
                                                              "y.npy": _npy(np.arange(40))})[:300]),
                         ["cut.npz"], set()),
    "one class only": (lambda d: _write(d, "same.svm", "1 0:1\n1 1:2\n1 2:3\n"), ["same.svm", "class"],
                       {"train --test", "evaluate", "predict", "aggregate --test"}),
    "a label outside the model's classes": (lambda d: _write(d, "lab.svm", "1 0:0.5\n2 1:0.25\n-1 2:1\n"),
                                            ["lab.svm", "label 2 is not one of the classes"],
                                            {"train DATA", "predict"}),
    "a 100 kB label": (lambda d: _write(d, "long.svm", "1 0:1\n" + "9" * 100_000 + " 1:2\n-1 2:3\n"),
                       ["long.svm", "…"], {"train DATA", "predict"}),
    "a 1 MB field": (lambda d: _write(d, "field.csv", "1,2,3,1\n4,5,6," + "x" * 1_000_000 + "\n"),
                     ["field.csv", "line 2", "field larger than field limit"], set()),
    "a wider LIBSVM file": (lambda d: _write(d, "wide.svm", "1 0:1 40:2\n-1 1:0.5\n"), ["wide.svm", "41 features"],
                            {"train DATA"}),
    "a narrower CSV": (lambda d: _write(d, "narrow.csv", "1,2,1\n3,4,-1\n"),
                       ["narrow.csv", "2 features and a label column", "has 6"], {"train DATA"}),
    "a features-only CSV": (lambda d: _write(d, "features.csv", "1,2,3,4,5,6\n6,5,4,3,2,1\n"),
                            ["features.csv", "5 features and a label column", "has 6"], {"train DATA", "predict"}),
    "an empty stdin": (lambda d: ("-", ""), ["<stdin>", "empty file"], set()),
}
DATA_CASES = {f"{reader}: {problem}": (reader, problem) for reader in READERS for problem in DATA_PROBLEMS
              if reader not in DATA_PROBLEMS[problem][2]}


@pytest.mark.parametrize("case", list(DATA_CASES))
def test_a_bad_data_file_is_one_line_naming_it(tmp_path, templates, monkeypatch, case):
    reader, problem = DATA_CASES[case]
    make, fragments, _ = DATA_PROBLEMS[problem]

    def build(folder: Path) -> Any:
        made = make(folder)
        name, stdin = made if isinstance(made, tuple) else (made, None)
        return READERS[reader](name), stdin

    _run_case(tmp_path, templates, monkeypatch, build, fragments)


def test_the_width_message_names_the_training_data_not_a_model(tmp_path, templates, monkeypatch):
    """Before any model exists, the width to match is the training data's ("the model has 121" was said)."""
    line = _run_case(tmp_path, templates, monkeypatch,
                     lambda d: ["train", "a9a", "--test", "ijcnn1", *FAST],
                     ["ijcnn1:test has 22 features", "the training data (a9a:train) has 123"])
    assert "model" not in line


INDEX_BASE_CASES: dict[str, tuple[Build, list[str]]] = {
    "evaluate: index 0 for a one-based model": (lambda d: ["evaluate", "m1.npz", "train.svm"],
                                                ["train.svm", "line 1", "feature index 0", "one-based"]),
    "predict: index 0 for a one-based model": (lambda d: ["predict", "m1.npz", "train.svm"], ["train.svm", "index 0"]),
    "train --test: index 0 after one-based training": (lambda d: ["train", "one.svm", "--test", "train.svm", *FAST],
                                                       ["train.svm", "index 0"]),
    "aggregate: models of both index bases": (lambda d: ["aggregate", "m.npz", "m1.npz", "--data", "train.svm",
                                                         "-o", "agg.npz"], ["m.npz", "m1.npz", "zero-based"]),
}


@pytest.mark.parametrize("case", list(INDEX_BASE_CASES))
def test_a_file_in_another_index_base_is_refused(tmp_path, templates, monkeypatch, case):
    _run_case(tmp_path, templates, monkeypatch, *INDEX_BASE_CASES[case])


# ----------------------------------------------------------------------------- model files
#: command reading a model -> argv with the model file
MODEL_READERS: dict[str, Callable[[str], list[str]]] = {
    "evaluate": lambda m: ["evaluate", m, "train.svm"],
    "predict": lambda m: ["predict", m, "train.svm", "--out", "p.txt"],
    "aggregate": lambda m: ["aggregate", m, "m2.npz", "--data", "train.svm", "-o", "agg.npz"],
}
_DEEP = b'{"format": "calopt-linear-model", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
MODEL_PROBLEMS: dict[str, tuple[Callable[[Path], str], list[str]]] = {
    "missing": (lambda d: "gone.npz", ["gone.npz", "no such model file"]),
    "a directory": (lambda d: _mkdir(d, "dir.npz"), ["dir.npz", "is a directory"]),
    "empty": (lambda d: _write(d, "empty.npz", b""), ["empty.npz", "empty file"]),
    "text": (lambda d: _write(d, "notes.npz", "hello\n"), ["notes.npz", "not an .npz archive"]),
    "truncated": (lambda d: _write(d, "cut.npz", (d / "m.npz").read_bytes()[:700]), ["cut.npz", "truncated or corrupt"]),
    "an npz that is no model": (lambda d: _write(d, "foreign.npz", _zip({"w.npy": _npy(np.zeros(3))})),
                                ["foreign.npz", "no metadata"]),
    "a checkpoint": (lambda d: _forged(d, "ck.npz", metadata={"format": "calopt-checkpoint"}),
                     ["ck.npz", "it is a calopt checkpoint"]),
    "a newer format": (lambda d: _forged(d, "newer.npz", metadata={"format_version": 99}),
                       ["newer.npz", "format version 99 is newer"]),
    "a wrong checksum": (lambda d: _forged(d, "bad.npz", checksum=False), ["bad.npz", "checksum mismatch"]),
    "a forged 2-D coef": (lambda d: _forged(d, "twod.npz", arrays={"coef": np.ones((6, 2))}),
                          ["twod.npz", "coef of a binary model must be a vector"]),
    "a string array": (lambda d: _forged(d, "str.npz", arrays={"coef": np.array(["a", "b"])}),
                       ["str.npz", "array coef holds <U1 values"]),
    "a NaN in coef": (lambda d: _forged(d, "nan.npz", arrays={"coef": np.full(6, np.nan)}),
                      ["nan.npz", "coef holds values that are not finite"]),
    "arrays as classes": (lambda d: _forged(d, "cls.npz", metadata={"classes": [[1, 2], [3, 4]]}),
                          ["cls.npz", "classes must be a list of distinct labels"]),
    "three classes in a binary model": (lambda d: _forged(d, "three.npz", metadata={"classes": [1, 2, 3]}),
                                        ["three.npz", "2 classes, not 3"]),
    "a NaN intercept": (lambda d: _forged(d, "nanb.npz", metadata={"intercept": float("nan")}),
                        ["nanb.npz", "intercept must be a finite number"]),
    "options that are a list": (lambda d: _forged(d, "opt.npz", metadata={"options": [1]}),
                                ["opt.npz", "options must be an object"]),
    "a bad index base": (lambda d: _forged(d, "base.npz", metadata={"options": {"data": {"zero_based": "yes"}}}),
                         ["base.npz", "options.data"]),
    "a long string as status": (lambda d: _forged(d, "status.npz", metadata={"status": "s" * 10_000}),
                                ["status.npz", "status must be an integer", "…"]),
    "metadata nested 100,000 deep": (lambda d: _write(d, "deep.npz", _zip({"metadata.npy": _npy(np.frombuffer(
        _DEEP, np.uint8))})), ["deep.npz", "nested more than 64 levels"]),
    "metadata of floats": (lambda d: _write(d, "mf.npz", _zip({"metadata.npy": _npy(np.zeros(4))})),
                           ["mf.npz", "unreadable metadata"]),
    "a member declaring 80 TB": (lambda d: _write(d, "hugem.npz", _zip({"metadata.npy": _huge_member()})),
                                 ["hugem.npz", "declares a 10000000×1000000 float64 array"]),
}
MODEL_CASES = {f"{command}: {problem}": (command, problem) for command in MODEL_READERS for problem in MODEL_PROBLEMS}


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_a_bad_model_file_is_one_line_naming_it(tmp_path, templates, monkeypatch, case):
    command, problem = MODEL_CASES[case]
    make, fragments = MODEL_PROBLEMS[problem]
    _run_case(tmp_path, templates, monkeypatch, lambda d: MODEL_READERS[command](make(d)), fragments)


# ----------------------------------------------------------------------------- parameters
PARAMETER_CASES: dict[str, tuple[Build, list[str]]] = {
    "--seed -1": (lambda d: ["train", "train.svm", "--seed", "-1", *FAST], ["--seed", "greater than or equal to 0"]),
    "--seed 1.5": (lambda d: ["train", "train.svm", "--seed", "1.5", *FAST], ["--seed"]),
    "--epochs 1.5": (lambda d: ["train", "train.svm", "--epochs", "1.5", "--no-progress"], ["--epochs"]),
    "--epochs 0": (lambda d: ["train", "train.svm", "--epochs", "0"], ["--epochs"]),
    "--batch-size 0": (lambda d: ["train", "train.svm", "--batch-size", "0", *FAST], ["--batch-size"]),
    "--checkpoint-every 0": (lambda d: ["train", "train.svm", "--checkpoint-every", "0", *FAST], ["--checkpoint-every"]),
    "an unknown option": (lambda d: ["train", "train.svm", "--frobnicate"], ["--frobnicate"]),
    "a missing required option": (lambda d: ["aggregate", "m.npz", "m2.npz", "-o", "agg.npz"], ["--data"]),
    "a missing argument": (lambda d: ["evaluate", "m.npz"], ["DATA"]),
    "--label-column ²": (lambda d: ["train", "train.csv", "--label-column", "²", *FAST],
                         ["train.csv", "no column named '²'"]),
    "--label-column=--1": (lambda d: ["train", "train.csv", "--label-column=--1", *FAST], ["train.csv", "'--1'"]),
    "--label-column 99": (lambda d: ["train", "train.csv", "--label-column", "99", *FAST],
                          ["train.csv", "label column 99 is out of range"]),
    "--label-column of 1,000 characters": (lambda d: ["train", "train.csv", "--label-column", "c" * 1000, *FAST],
                                           ["train.csv", "no column named", "…"]),
    "--label-column with --no-header": (lambda d: ["train", _write(d, "named.csv", "a,b,y\n1,2,1\n3,4,-1\n"),
                                                   "--label-column", "y", "--no-header", *FAST],
                                        ["named.csv", "no column named 'y'", "--no-header"]),
    "--no-header over names": (lambda d: ["train", _write(d, "named.csv", "a,b,y\n1,2,1\n3,4,-1\n"), "--no-header",
                                          *FAST], ["named.csv", "line 1, column 1", "'a' is not a number"]),
    "--delimiter of two characters": (lambda d: ["train", "train.csv", "--delimiter", "::", *FAST], ["delimiter"]),
    "--delimiter that splits nothing": (lambda d: ["train", "train.csv", "--delimiter", ";", *FAST],
                                        ["train.csv", "one column only"]),
    "fbeta:beta=1e200": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=1e200", *FAST],
                         ["measure 'fbeta'", "beta", "1e+200"]),
    "gower-legendre:sigma=1e308": (lambda d: ["train", "train.svm", "-m", "gower-legendre:sigma=1e308", *FAST],
                                   ["measure 'gower-legendre'", "sigma"]),
    "fbeta:beta=1e999": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=1e999", *FAST], ["beta", "inf"]),
    "fbeta:beta=nan": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=nan", *FAST], ["beta", "nan"]),
    "fbeta:beta=-1": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=-1", *FAST], ["beta", "-1"]),
    "fbeta:beta=2,beta=3": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=2,beta=3", *FAST],
                            ["'beta' is given twice"]),
    "fbeta:beta=2,beta=2": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=2,beta=2", *FAST],
                            ["'beta' is given twice"]),
    "fbeta:beta=": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=", *FAST], ["bad parameter 'beta='"]),
    ":beta=2": (lambda d: ["train", "train.svm", "-m", ":beta=2", *FAST], ["no name"]),
    "fbeta:gamma=2": (lambda d: ["train", "train.svm", "-m", "fbeta:gamma=2", *FAST], ["no parameter 'gamma'"]),
    "fbeta:beta=abc": (lambda d: ["train", "train.svm", "-m", "fbeta:beta=abc", *FAST], ["not a valid float"]),
    "an unknown measure": (lambda d: ["train", "train.svm", "-m", "gmaen", *FAST], ["did you mean 'gmean'"]),
    "stamp:epochs=20": (lambda d: ["train", "train.svm", "-a", "stamp:epochs=20", *FAST], ["no parameter 'epochs'"]),
    "spade for f1": (lambda d: ["train", "train.svm", "-a", "spade", "-m", "f1", *FAST], ["concave"]),
    "squared loss for gmean": (lambda d: ["train", "train.svm", "-l", "squared", "-m", "gmean", "-a", "spade", *FAST], ["reward"]),
    "an unknown backend": (lambda d: ["train", "train.svm", "-b", "nump", *FAST], ["did you mean 'numpy'"]),
    "--dtype float16": (lambda d: ["train", "train.svm", "--dtype", "float16", *FAST], ["float16"]),
    "a GPU device for numpy": (lambda d: ["train", "train.svm", "--device", "cuda:0", *FAST], ["cuda:0"]),
    "--positive 7": (lambda d: ["train", "train.svm", "--positive", "7", *FAST], ["positive class '7'"]),
    "--resume missing": (lambda d: ["train", "train.svm", "--resume", "gone.npz", *FAST], ["--resume gone.npz"]),
    "--resume a model file": (lambda d: ["train", "train.svm", "--resume", "m.npz", *FAST],
                              ["m.npz", "not a calopt checkpoint (it is a calopt model file)"]),
    "evaluate -m unknown": (lambda d: ["evaluate", "m.npz", "train.svm", "-m", "f2"], ["unknown measure 'f2'"]),
    "aggregate one model": (lambda d: ["aggregate", "m.npz", "--data", "train.svm", "-o", "agg.npz"],
                            ["at least 2 models"]),
    "aggregate a model twice": (lambda d: ["aggregate", "m.npz", "m.npz", "--data", "train.svm", "-o", "agg.npz"],
                                ["m.npz", "given twice"]),
    "aggregate --lambda nan": (lambda d: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "-o", "agg.npz",
                                          "--lambda", "nan"], ["--lambda"]),
    "aggregate --lambda -1": (lambda d: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "-o", "agg.npz",
                                         "--lambda", "-1"], ["--lambda"]),
    "aggregate --weighting unknown": (lambda d: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "-o",
                                                 "agg.npz", "--weighting", "some"], ["weighting", "'some'"]),
    "--seed 2**32": (lambda d: ["train", "train.svm", "--seed", str(2**32), *FAST],
                     ["--seed", "less than or equal to 4294967295"]),
    "compare --seed 2**32": (lambda d: ["compare", "train.svm", "--seed", str(2**32)], ["--seed", "4294967295"]),
    "compare --seed -1": (lambda d: ["compare", "train.svm", "--seed", "-1"], ["--seed", "greater than or equal to 0"]),
    "--resume a directory": (lambda d: ["train", "train.svm", "--resume", _mkdir(d, "ck"), *FAST],
                             ["--resume ck", "is a directory"]),
    "train: stdin as DATA and --test": (lambda d: (["train", "-", "--test", "-", *FAST], _SVM),
                                        ["--test -", "standard input is also DATA", "read only once"]),
    "compare: stdin as DATA and --test": (lambda d: (["compare", "-", "--test", "-"], _SVM),
                                          ["--test -", "read only once"]),
    "aggregate: stdin as --data and --test": (
        lambda d: (["aggregate", "m.npz", "m2.npz", "--data", "-", "--test", "-", "-o", "agg.npz"], _SVM),
        ["--test -", "standard input is also --data"]),
    "aggregate models of other widths": (lambda d: ["aggregate", "m.npz", "mc.npz", "--data", "train.svm", "-o",
                                                    "agg.npz"], ["mc.npz", "3 features", "m.npz has 6"]),
}


@pytest.mark.parametrize("case", list(PARAMETER_CASES))
def test_a_bad_parameter_is_one_line_naming_it(tmp_path, templates, monkeypatch, case):
    _run_case(tmp_path, templates, monkeypatch, *PARAMETER_CASES[case])


def _csr_directory(folder: Path, name: str, meta: Any = None, **change: Callable[[np.ndarray], np.ndarray]) -> str:
    """A CSR directory (data, indices, indptr, y .npy) of a 4 x 3 matrix made by scipy, each array
    passed through ``change[name]``; ``meta`` (when given) written as its calopt-stream.json."""
    matrix = scipy.sparse.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0], [4, 5, 0], [0, 0, 6]]))
    arrays = {"data": matrix.data, "indices": matrix.indices, "indptr": matrix.indptr, "y": np.array([1, -1, 1, -1])}
    (folder / name).mkdir()
    for key, array in arrays.items():
        np.save(folder / name / f"{key}.npy", change.get(key, lambda a: a)(array.copy()))
    if meta is not None:
        (folder / name / "calopt-stream.json").write_text(json.dumps(meta))
    return name


def _put(array: np.ndarray, at: int, value: int) -> np.ndarray:
    array[at] = value
    return array


#: a hostile stream directory (train streams a directory) -> its message (issue 23)
STREAM_DIR_CASES: dict[str, tuple[Build, list[str]]] = {
    "calopt-stream.json is a list": (lambda d: ["train", _csr_directory(d, "s", meta=[]), *FAST],
                                     ["s: calopt-stream.json", "must be a JSON object, not []"]),
    "n_features is a word": (lambda d: ["train", _csr_directory(d, "s", meta={"n_features": "five"}), *FAST],
                             ["calopt-stream.json", "n_features must be a whole number", '"five"']),
    "n_features is negative": (lambda d: ["train", _csr_directory(d, "s", meta={"n_features": -3}), *FAST],
                               ["n_features must be a whole number ≥ 0, not -3"]),
    "an unknown format": (lambda d: ["train", _csr_directory(d, "s", meta={"format": "xyz"}), *FAST],
                          ["format must be one of libsvm, csv", '"xyz"']),
    "zero_based is a string": (lambda d: ["train", _csr_directory(d, "s", meta={"zero_based": "yes"}), *FAST],
                               ["zero_based must be true, false or null"]),
    "a decreasing indptr": (lambda d: ["train", _csr_directory(d, "s", indptr=lambda a: _put(a, 2, 1)), *FAST],
                            ["s: indptr.npy", "row 1 (from 0)", "never decrease"]),
    "an indptr not starting at 0": (lambda d: ["train", _csr_directory(d, "s", indptr=lambda a: _put(a, 0, 1)),
                                               *FAST], ["s: indptr.npy", "row 0", "start at 0"]),
    "a column twice in a row": (lambda d: ["train", _csr_directory(d, "s", indices=lambda a: _put(a, 4, 0)), *FAST],
                                ["s: row 2 (from 0): column 0 appears twice"]),
    "a negative column": (lambda d: ["train", _csr_directory(d, "s", indices=lambda a: _put(a, 2, -1)), *FAST],
                          ["s: row 1 (from 0): column index -1 must be ≥ 0"]),
    "a column beyond n_features": (
        lambda d: ["train", _csr_directory(d, "s", meta={"n_features": 3}, indices=lambda a: _put(a, 5, 7)), *FAST],
        ["s: row 3 (from 0): column index 7 is outside 0..2", "3 features"]),
}


@pytest.mark.parametrize("case", list(STREAM_DIR_CASES))
def test_a_bad_stream_directory_is_one_line_naming_it(tmp_path, templates, monkeypatch, case):
    _run_case(tmp_path, templates, monkeypatch, *STREAM_DIR_CASES[case])


def test_a_csr_directory_with_unsorted_distinct_columns_trains_like_its_sorted_twin(tmp_path):
    """Only repeated columns are refused: a row's distinct columns in any order are the same matrix."""
    rng = np.random.default_rng(1)
    X = scipy.sparse.random(200, 5, density=0.6, format="csr", random_state=2)
    y = np.where(rng.random(200) < 0.4, 1, -1)
    for name, reverse in [("sorted", False), ("unsorted", True)]:
        indices, data = X.indices.copy(), X.data.copy()
        if reverse:
            for row in range(200):
                cut = slice(X.indptr[row], X.indptr[row + 1])
                indices[cut], data[cut] = indices[cut][::-1], data[cut][::-1]
        (tmp_path / name).mkdir()
        for key, array in {"data": data, "indices": indices, "indptr": X.indptr, "y": y}.items():
            np.save(tmp_path / name / f"{key}.npy", array)
    runs = [runner.invoke(app, ["train", str(tmp_path / name), "--json", *FAST]) for name in ("sorted", "unsorted")]
    assert [r.exit_code for r in runs] == [0, 0], [r.output for r in runs]
    assert json.loads(runs[0].stdout)["train"] == json.loads(runs[1].stdout)["train"]


_FULL = "/dev/full"
#: a write the system refuses (ENOSPC) after the work: one line naming the path, nothing left behind
FULL_DISK_CASES: dict[str, tuple[Build, list[str]]] = {
    "train -o /dev/full": (lambda d: ["train", "train.svm", "-o", _FULL, *FAST], [_FULL, "cannot write"]),
    "predict --out /dev/full": (lambda d: ["predict", "m.npz", "train.svm", "--out", _FULL], [_FULL, "cannot write"]),
    "aggregate -o /dev/full": (lambda d: ["aggregate", "m.npz", "m2.npz", "--data", "train.svm", "-o", _FULL],
                               [_FULL, "cannot write"]),
}


@pytest.mark.skipif(not os.path.exists(_FULL), reason="no /dev/full here")
@pytest.mark.parametrize("case", list(FULL_DISK_CASES))
def test_a_full_disk_is_one_line_naming_the_output(tmp_path, templates, monkeypatch, case):
    _run_case(tmp_path, templates, monkeypatch, *FULL_DISK_CASES[case])


def test_a_bad_file_on_a_local_dask_cluster_is_one_line_without_the_workers_log(tmp_path):
    """Issue 23: the workers logged "Compute Failed ... Traceback:" (7 lines) before the one-line error.
    The workers are other processes, writing to the real stderr: the command runs as one too."""
    pytest.importorskip("distributed")
    import subprocess
    import sys

    (tmp_path / "bad.svm").write_text("1 0:1\n-1 0:nan\n1 1:2\n")
    result = subprocess.run([sys.executable, "-m", "calopt_cli", "train", "bad.svm", "--dask", "local", *FAST],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == ["calopt: error: bad.svm: line 2: feature 0 is nan (values must be finite) "
                                          "in '-1 0:nan'"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.svm"]


# ----------------------------------------------------------------------------- checkpoints
def _forged_checkpoint(folder: Path, name: str, change: Callable[[dict[str, Any]], None] = lambda m: None,
                       arrays: Callable[[dict[str, np.ndarray]], None] = lambda a: None) -> str:
    """A copy of ck.npz with its metadata and arrays changed in place, and a checksum that matches (forged)."""
    from calopt.training.checkpoint import _checksum as checkpoint_checksum

    with np.load(folder / "ck.npz") as archive:
        saved = {key: archive[key] for key in archive.files}
    metadata = json.loads(saved.pop("metadata").tobytes())
    metadata.pop("sha256")
    change(metadata)
    arrays(saved)
    blob = np.frombuffer(json.dumps({**metadata, "sha256": checkpoint_checksum(saved, metadata)}).encode(), np.uint8)
    return _write(folder, name, _zip({"metadata.npy": _npy(blob), **{f"{k}.npy": _npy(v) for k, v in saved.items()}}))


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda metadata: metadata.update(fields)


def _param(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda metadata: metadata["algorithm"]["params"].update({name: value})


def _grown(arrays: dict[str, np.ndarray]) -> None:
    """The first state array with rows gets one row more."""
    key = next(k for k in sorted(arrays) if k.startswith("state") and arrays[k].ndim >= 1)
    arrays[key] = np.concatenate([arrays[key], arrays[key][:1]])


#: a checkpoint with a valid checksum that does not fit the run resuming it -> its message (issue 23)
CHECKPOINT_CASES: dict[str, tuple[Callable[[Path], str], list[str]]] = {
    "negative epochs": (lambda d: _forged_checkpoint(d, "c.npz", _set(epochs=-5)),
                        ["c.npz", "epochs -5 is outside 0..2"]),
    "more epochs than the run's": (lambda d: _forged_checkpoint(d, "c.npz", _set(epochs=99)),
                                   ["c.npz", "epochs 99 is outside 0..2"]),
    "a batch beyond the epoch": (lambda d: _forged_checkpoint(d, "c.npz", _set(batch=500)),
                                 ["c.npz", "batch 500 is outside 0..10"]),
    "a negative batch": (lambda d: _forged_checkpoint(d, "c.npz", _set(batch=-1)), ["c.npz", "batch -1"]),
    "a batch after the last epoch": (lambda d: _forged_checkpoint(d, "c.npz", _set(epochs=2, batch=3)),
                                     ["c.npz", "after the last epoch"]),
    "another algorithm": (lambda d: _forged_checkpoint(d, "c.npz", lambda m: m["algorithm"].update(name="sgd")),
                          ["c.npz", "written by algorithm 'sgd'", "this run trains 'lbfgs'"]),
    "another parameter value": (lambda d: _forged_checkpoint(d, "c.npz", _param("C", 5.0)),
                                ["c.npz", "lbfgs C=5.0", "this run has C=1.0"]),
    "a parameter the algorithm lacks": (lambda d: _forged_checkpoint(d, "c.npz", _param("zeta", 1)),
                                        ["c.npz", "parameter zeta"]),
    "a garbage RNG state": (lambda d: _forged_checkpoint(d, "c.npz", _set(rng_state={"bit_generator": "PCG64",
                                                                                     "state": "garbage"})),
                            ["c.npz", "rng_state"]),
    "an RNG state of another generator": (
        lambda d: _forged_checkpoint(d, "c.npz", _set(rng_state=np.random.MT19937(0).state | {"state": {}})),
        ["c.npz", "rng_state"]),
    "a state array of another shape": (lambda d: _forged_checkpoint(d, "c.npz", arrays=_grown),
                                       ["c.npz", "has shape", "this run's has"]),
    "no RNG state": (lambda d: _forged_checkpoint(d, "c.npz", _set(rng_state=None)), ["c.npz", "rng_state is missing"]),
    "epochs of 1.5": (lambda d: _forged_checkpoint(d, "c.npz", _set(epochs=1.5)), ["c.npz", "whole numbers, not 1.5"]),
    "a history of numbers": (lambda d: _forged_checkpoint(d, "c.npz", _set(history=[1])), ["c.npz", "history"]),
    "a history longer than the epochs": (lambda d: _forged_checkpoint(d, "c.npz", lambda m: m.update(
        history=m["history"] * 2)), ["c.npz", "history must be a list of one object per epoch done (1)"]),
    "negative seconds": (lambda d: _forged_checkpoint(d, "c.npz", _set(seconds=-5.0)),
                         ["c.npz", "seconds must be a finite number ≥ 0"]),
}


@pytest.mark.parametrize("case", list(CHECKPOINT_CASES))
def test_a_checkpoint_that_does_not_fit_the_run_is_refused(tmp_path, templates, monkeypatch, case):
    """Issue 23: a forged checkpoint's epochs were obeyed (-5 ran 2,230 epochs), its algorithm, parameters
    and batch ignored, a garbage generator state or state shape a traceback."""
    make, fragments = CHECKPOINT_CASES[case]
    _run_case(tmp_path, templates, monkeypatch, lambda d: [*CHECKPOINTED, "--resume", make(d)], fragments)


def test_the_template_checkpoint_resumes_to_the_uninterrupted_model(tmp_path, templates, monkeypatch):
    """The checks refuse forgeries only: ck.npz itself resumes, to the model an uninterrupted run gives."""
    monkeypatch.chdir(shutil.copytree(templates, tmp_path / "case"))
    resumed = runner.invoke(app, [*CHECKPOINTED, "--resume", "ck.npz", "-o", "resumed.npz"])
    whole = runner.invoke(app, [*CHECKPOINTED, "-o", "whole.npz"])
    assert (resumed.exit_code, whole.exit_code) == (0, 0), resumed.output + whole.output
    with np.load("resumed.npz") as a, np.load("whole.npz") as b:
        assert np.array_equal(a["coef"], b["coef"])


# ----------------------------------------------------------------------------- score
SCORE_CASES: dict[str, tuple[Build, list[str]]] = {
    "a prediction outside the labels": (
        lambda d: ["score", _write(d, "y.txt", "1\n-1\n1\n"), _write(d, "p.txt", "1\n2\n1\n"), "-m", "f1"],
        ["p.txt", "line 2", "label 2 is not one of the classes (-1 and 1)"]),
    "a string outside the labels": (
        lambda d: ["score", _write(d, "y.txt", "yes\nno\n"), _write(d, "p.txt", "yes\nmaybe\n"), "-m", "f1",
                   "--positive", "yes"],
        ["p.txt", "label 'maybe'"]),
    "a 1 MB prediction": (
        lambda d: ["score", _write(d, "y.txt", "yes\nno\n"), _write(d, "p.txt", "yes\n" + "m" * 1_000_000 + "\n"),
                   "-m", "f1", "--positive", "yes"], ["p.txt", "…"]),
    "lengths that differ": (
        lambda d: ["score", _write(d, "y.txt", "1\n-1\n1\n"), _write(d, "p.txt", "1\n"), "-m", "f1"],
        ["y.txt has 3 labels but p.txt has 1"]),
    "three classes": (lambda d: ["score", _write(d, "y.txt", "1\n2\n3\n"), _write(d, "p.txt", "1\n2\n3\n"), "-m", "f1"],
                      ["y.txt", "3 classes"]),
    "a missing prediction file": (lambda d: ["score", _write(d, "y.txt", "1\n-1\n"), "gone.txt", "-m", "f1"],
                                  ["gone.txt", "no such file"]),
    "--positive outside the labels": (
        lambda d: ["score", _write(d, "y.txt", "yes\nno\n"), _write(d, "p.txt", "yes\nno\n"), "-m", "f1",
                   "--positive", "maybe"], ["y.txt", "positive class 'maybe'"]),
    "two values on a line": (lambda d: ["score", _write(d, "y.txt", "1\n-1 1\n"), _write(d, "p.txt", "1\n1\n"), "-m",
                                        "f1"], ["y.txt", "line 2", "more than one value"]),
    "a blank line": (lambda d: ["score", _write(d, "y.txt", "1\n\n-1\n"), _write(d, "p.txt", "1\n1\n1\n"), "-m", "f1"],
                     ["y.txt", "line 2", "empty line"]),
}


@pytest.mark.parametrize("case", list(SCORE_CASES))
def test_a_bad_score_input_is_one_line_naming_it(tmp_path, templates, monkeypatch, case):
    _run_case(tmp_path, templates, monkeypatch, *SCORE_CASES[case])


def test_the_battery_has_at_least_150_cases():
    tables = [OUTPUT_CASES, OUTPUT_CASES_EXTRA, PLOT_CASES, DATA_CASES, INDEX_BASE_CASES, STREAM_DIR_CASES,
              MODEL_CASES, CHECKPOINT_CASES, PARAMETER_CASES, FULL_DISK_CASES, SCORE_CASES]
    assert sum(map(len, tables)) + 1 >= 150


def test_a_long_field_is_refused_whatever_another_library_set_the_csv_limit_to(tmp_path):
    """SciPy's ARFF reader raises csv.field_size_limit for the whole process; calopt's own limit
    still names the line of a 1 MB field."""
    import csv

    from calopt.errors import DataError
    from calopt.io.files import read_data

    path = tmp_path / "field.csv"
    path.write_text("1,2,3,1\n4,5,6," + "x" * 1_000_000 + "\n")
    before = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)
    try:
        with pytest.raises(DataError, match="line 2"):
            read_data(path)
    finally:
        csv.field_size_limit(before)

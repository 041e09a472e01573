"""Issue 12, no silent harm: the reproducers whose right answer is not an error.

Files a user did not name are never touched (outputs are checked before training, a
checkpoint is deleted only when this run created it, special files are written in place),
and wrong data is never read as right (streams read once, the training file's index base
and width decide how test files are read). The hostile inputs that must fail are in
``test_cli_hostile.py``.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file
from typer.testing import CliRunner

import calopt
from calopt.models.archive import atomic_write
from calopt.models.report import DataReading
from calopt_cli.app import app

runner = CliRunner()


def _data(folder: Path, name: str = "d.svm", n: int = 300, d: int = 6, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 2] > 0.5, 1, -1)
    dump_svmlight_file(X, y, str(folder / name))
    return folder / name


def _ok(result) -> None:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


def _train(*args: str):
    return runner.invoke(app, ["train", *map(str, args), "--epochs", "2", "--no-progress"])


def _trained(folder: Path) -> tuple[Path, Path]:
    """A data file and a model trained on it."""
    data, model = _data(folder), folder / "m.npz"
    _ok(_train(data, "-o", model))
    return data, model


# ------------------------------------------------------------------ the atomic-write rule
def test_a_new_file_takes_its_mode_from_the_umask_and_an_existing_one_keeps_its_own(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.txt", lambda f: f.write("x"), mode="w")
        existing = tmp_path / "kept.txt"
        existing.write_text("old")
        existing.chmod(0o604)
        atomic_write(existing, lambda f: f.write("new"), mode="w")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE(existing.stat().st_mode) == 0o604 and existing.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "new.txt"]  # no temporary file left


def test_a_symlink_to_a_file_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write(link, lambda f: f.write("new"), mode="w")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "later.txt")
    atomic_write(dangling, lambda f: f.write("made"), mode="w")
    assert dangling.is_symlink() and (tmp_path / "later.txt").read_text() == "made"


def _drain(fifo: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as f:
            into.append(f.read())

    thread = threading.Thread(target=read)
    thread.start()
    return thread


@pytest.mark.parametrize("through_link", [False, True])
def test_a_fifo_is_written_in_place_never_replaced(tmp_path, through_link):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path = fifo
    if through_link:
        path = tmp_path / "to-fifo"
        path.symlink_to(fifo)
    received: list[bytes] = []
    reader = _drain(fifo, received)
    atomic_write(path, lambda f: f.write(b"through the pipe"))
    reader.join(timeout=10)
    assert received == [b"through the pipe"]
    assert stat.S_ISFIFO(fifo.stat().st_mode) and path.is_symlink() == through_link


def test_a_link_to_a_file_descriptor_writes_into_it(tmp_path):
    """A link to /proc/self/fd/N (what /dev/stdout is) writes to the descriptor; the link stays."""
    read_end, write_end = os.pipe()
    link = tmp_path / "stdout-like"
    link.symlink_to(f"/proc/self/fd/{write_end}")
    try:
        atomic_write(link, lambda f: f.write(b"model bytes"))
        os.close(write_end)
        assert os.read(read_end, 100) == b"model bytes"
    finally:
        os.close(read_end)
    assert link.is_symlink()


def test_a_device_node_is_written_in_place(tmp_path):
    """A copy of /dev/null made in the test folder: a bug replaces the copy, not the machine's."""
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot create a device node here")
    model = tmp_path / "m.npz"
    data = _data(tmp_path)
    _ok(_train(data, "--model-out", node))
    _ok(runner.invoke(app, ["train", str(data), "--epochs", "2", "--no-progress", "-o", str(model)]))
    _ok(runner.invoke(app, ["predict", str(model), str(data), "--out", str(node)]))
    assert stat.S_ISCHR(node.stat().st_mode)


def test_predict_writes_to_stdout_with_a_dash_and_as_json(tmp_path):
    data, model = _trained(tmp_path)
    plain = runner.invoke(app, ["predict", str(model), str(data)])
    dash = runner.invoke(app, ["predict", str(model), str(data), "--out", "-"])
    _ok(dash)
    assert dash.stdout == plain.stdout and len(dash.stdout.splitlines()) == 300
    assert not (tmp_path / "-").exists() and not Path("-").exists()
    as_json = runner.invoke(app, ["predict", str(model), str(data), "--json"])
    _ok(as_json)
    out = json.loads(as_json.stdout)
    assert out["n_samples"] == 300 and out["predictions"] == plain.stdout.split()
    scores = json.loads(runner.invoke(app, ["predict", str(model), str(data), "--json", "--scores"]).stdout)
    assert len(scores["scores"]) == 300 and all(isinstance(v, float) for v in scores["scores"])


def test_predictions_go_to_stdout_through_a_link_like_dev_stdout(tmp_path):
    """/dev/stdout is a link to /proc/self/fd/1: a link in the test folder stands for it (a bug then
    replaces the test's link, not the machine's /dev/stdout)."""
    import subprocess
    import sys

    data, model = _trained(tmp_path)
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALOPT_")}
    done = subprocess.run([sys.executable, "-m", "calopt_cli", "predict", str(model), str(data), "--out", str(stdout)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == runner.invoke(app, ["predict", str(model), str(data)]).stdout
    assert stdout.is_symlink() and os.readlink(stdout) == "/proc/self/fd/1"


def test_output_files_follow_the_umask(tmp_path):
    data = _data(tmp_path)
    old = os.umask(0o022)
    try:
        _ok(_train(data, "-o", tmp_path / "m.npz"))
        _ok(runner.invoke(app, ["predict", str(tmp_path / "m.npz"), str(data), "--out", str(tmp_path / "p.txt")]))
    finally:
        os.umask(old)
    for name in ("m.npz", "p.txt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


# ------------------------------------------------------------------ checkpoints
def test_a_checkpoint_this_run_created_is_deleted_one_that_existed_is_kept(tmp_path):
    data = _data(tmp_path)
    created = tmp_path / "new.ckpt.npz"
    _ok(runner.invoke(app, ["train", str(data), "--epochs", "3", "--no-progress", "-o", str(tmp_path / "a.npz"),
                            "--checkpoint", str(created), "--checkpoint-every", "1"]))
    assert not created.exists()
    kept = tmp_path / "mine.npz"
    kept.write_bytes(b"the user's own file, named as the checkpoint")
    _ok(runner.invoke(app, ["train", str(data), "--epochs", "3", "--no-progress", "-o", str(tmp_path / "b.npz"),
                            "--checkpoint", str(kept), "--checkpoint-every", "1"]))
    assert kept.exists()  # overwritten by checkpoints (the user named it), but never deleted


def test_an_existing_default_checkpoint_is_never_touched(tmp_path):
    data = _data(tmp_path)
    earlier = tmp_path / "m.ckpt.npz"  # the default checkpoint of -o m.npz, from an earlier run
    earlier.write_bytes(b"an earlier run's checkpoint")
    result = runner.invoke(app, ["train", str(data), "--epochs", "2", "--no-progress", "-o", str(tmp_path / "m.npz"),
                                 "--checkpoint-every", "1"])
    assert result.exit_code == 2 and "--resume" in result.stderr and "m.ckpt.npz" in result.stderr
    _ok(_train(data, "-o", tmp_path / "m.npz"))  # not asked for checkpoints: trains, writes none
    assert earlier.read_bytes() == b"an earlier run's checkpoint"


def test_ctrl_c_after_the_last_batch_is_an_interrupt_and_writes_no_model(tmp_path, monkeypatch):
    import calopt_cli.training

    real_fit = calopt.fit

    def fit_then_ctrl_c(*args, **kwargs):
        model = real_fit(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)  # arrives while the run is being finished
        return model

    monkeypatch.setattr(calopt_cli.training.calopt, "fit", fit_then_ctrl_c)
    data = _data(tmp_path)
    model = tmp_path / "m.npz"
    result = _train(data, "-o", model)
    assert result.exit_code == 130, result.output
    assert result.stderr.startswith("calopt: interrupted after the last batch; no model written")
    assert result.stderr.count("\n") == 1
    assert not model.exists()


# ------------------------------------------------------------------ one reader for streams
def test_a_pipe_is_read_once_whole_plain_or_compressed(tmp_path):
    """`calopt train <(cat big.svm)` read only the rows the format sniff left; `<(bzcat ...)` was refused."""
    import bz2

    data = _data(tmp_path, n=4395)
    reference = json.loads(_train(data, "--json").stdout)
    for content in (data.read_bytes(), bz2.compress(data.read_bytes())):
        fifo = tmp_path / f"pipe{len(content)}"
        os.mkfifo(fifo)
        writer = threading.Thread(target=lambda: fifo.write_bytes(content))
        writer.start()
        result = _train(fifo, "--json")
        writer.join(timeout=30)
        _ok(result)
        assert json.loads(result.stdout)["train"] == reference["train"]  # all 4,395 rows


def test_stdin_is_a_data_file_for_every_command(tmp_path):
    data = _data(tmp_path)
    model = tmp_path / "m.npz"
    _ok(runner.invoke(app, ["train", "-", "-o", str(model), "--epochs", "2", "--no-progress"], input=data.read_bytes()))
    piped = runner.invoke(app, ["predict", str(model), "-"], input=data.read_bytes())
    _ok(piped)
    assert piped.stdout == runner.invoke(app, ["predict", str(model), str(data)]).stdout
    evaluated = runner.invoke(app, ["evaluate", str(model), "-", "--json"], input=data.read_bytes())
    _ok(evaluated)
    assert json.loads(evaluated.stdout)["data"] == "<stdin>"
    labels = tmp_path / "y.txt"
    labels.write_text("1\n-1\n1\n")
    _ok(runner.invoke(app, ["score", str(labels), "-", "-m", "f1"], input="1\n1\n1\n"))


def test_csv_from_a_pipe_is_recognized_by_its_content(tmp_path):
    rows = "".join(f"{i % 7},{(i * 3) % 5},{1 if i % 3 else -1}\n" for i in range(60))
    result = runner.invoke(app, ["train", "-", "--epochs", "2", "--no-progress", "--json"], input=rows)
    _ok(result)
    assert json.loads(result.stdout)["classes"] == ["-1", "1"]


# ------------------------------------------------------------------ one index-base rule
def _zero_based_pair(folder: Path) -> tuple[Path, Path]:
    """A zero-based training file and a test file from the same rows with feature 0 left out."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 5))
    y = np.where(X[:, 1] + 0.5 * X[:, 2] > 0.3, 1, -1)
    dump_svmlight_file(X[:400], y[:400], str(folder / "train.svm"), zero_based=True)
    test = X[400:].copy()
    test[:, 0] = 0.0  # index 0 never appears: read on its own, the file looks one-based
    dump_svmlight_file(test, y[400:], str(folder / "test.svm"), zero_based=True)
    return folder / "train.svm", folder / "test.svm"


@pytest.mark.parametrize("name", ["bom.svm", "bom.txt", "bom.svm.gz"])
def test_a_libsvm_file_with_a_byte_order_mark_is_read_as_without_it(tmp_path, name):
    """Issue 23: CSV accepted a UTF-8 byte-order mark, LIBSVM refused it ("label '\\ufeff1' is not a number")."""
    import gzip

    from sklearn.datasets import load_svmlight_file

    from calopt.io.files import read_data

    plain = _data(tmp_path, "plain.svm")
    marked = b"\xef\xbb\xbf" + plain.read_bytes()
    (tmp_path / name).write_bytes(gzip.compress(marked) if name.endswith(".gz") else marked)
    X, y = load_svmlight_file(str(plain), zero_based=True)
    dataset = read_data(tmp_path / name)
    assert dataset.format == "libsvm"
    assert np.array_equal(dataset.X.toarray(), X.toarray()) and np.array_equal(dataset.labels, y)
    runs = [runner.invoke(app, ["train", str(path), "--stream", "--json", "--epochs", "2", "--no-progress"])
            for path in (plain, tmp_path / name)]
    for run in runs:
        _ok(run)
    assert json.loads(runs[0].stdout)["train"] == json.loads(runs[1].stdout)["train"]


def test_no_stream_reads_a_directory_or_a_parquet_file_into_memory(tmp_path):
    """Issue 23: the README says --no-stream reads a directory of arrays or a Parquet file into memory;
    both were refused ("is a directory", "binary data"). The model is the one trained on the same
    values from a LIBSVM (sparse) or CSV (dense) file."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(_data(tmp_path)), zero_based=True)
    (tmp_path / "csr").mkdir()
    for key, array in {"data": X.data, "indices": X.indices, "indptr": X.indptr, "y": y}.items():
        np.save(tmp_path / "csr" / f"{key}.npy", array)
    frame = pd.DataFrame(X.toarray(), columns=[f"f{j}" for j in range(X.shape[1])]).assign(y=y)
    frame.to_parquet(tmp_path / "d.parquet")
    frame.to_csv(tmp_path / "d.csv", index=False)
    coef = {}
    for name in ("csr", "d.svm", "d.parquet", "d.csv"):
        _ok(_train(tmp_path / name, "--no-stream", "-o", tmp_path / f"{name}.npz"))
        with np.load(tmp_path / f"{name}.npz") as model:
            coef[name] = model["coef"]
    assert np.array_equal(coef["csr"], coef["d.svm"])
    assert np.array_equal(coef["d.parquet"], coef["d.csv"])


def test_test_files_are_read_with_the_training_files_index_base(tmp_path):
    train, test = _zero_based_pair(tmp_path)
    model = tmp_path / "m.npz"
    out = json.loads(runner.invoke(app, ["train", str(train), "--test", str(test), "--epochs", "5",
                                         "--no-progress", "--json", "-o", str(model)]).stdout)
    assert out["test"]["value"] > 0.85  # shifted by a column it was about 0.3
    evaluated = json.loads(runner.invoke(app, ["evaluate", str(model), str(test), "--json"]).stdout)
    assert evaluated["measures"][0]["value"] == pytest.approx(out["test"]["value"])
    saved = calopt.load_model(model).fit_report.data
    assert saved == DataReading(format="libsvm", zero_based=True, n_features=5)
    predicted = runner.invoke(app, ["predict", str(model), str(test)]).stdout.split()
    truth = [line.split()[0] for line in test.read_text().splitlines()]
    f1 = 2 * sum(p == t == "1" for p, t in zip(predicted, truth)) / (predicted.count("1") + truth.count("1"))
    assert f1 == pytest.approx(out["test"]["value"])


def test_a_one_based_model_refuses_a_test_file_with_index_0(tmp_path):
    data = _data(tmp_path)  # dump_svmlight_file writes zero-based: make a one-based copy
    one_based = tmp_path / "one.svm"
    dump_svmlight_file(*_load(data), str(one_based), zero_based=False)
    model = tmp_path / "m.npz"
    _ok(_train(one_based, "-o", model))
    result = runner.invoke(app, ["evaluate", str(model), str(data)])
    assert result.exit_code == 2 and "d.svm: line 1: feature index 0" in result.stderr


def _load(path: Path):
    from sklearn.datasets import load_svmlight_file

    return load_svmlight_file(str(path), zero_based=True)


# ------------------------------------------------------------------ one width rule, CSV
def _csv(folder: Path, name: str, rows: int = 80, labels: bool = True, header: str | None = None,
         delimiter: str = ",") -> Path:
    rng = np.random.default_rng(4)
    X = np.round(rng.normal(size=(rows, 3)), 3)
    y = np.where(X[:, 0] > 0.2, 1, -1)
    lines = [delimiter.join(map(str, row)) + (f"{delimiter}{label}" if labels else "") for row, label in zip(X, y)]
    (folder / name).write_text((header + "\n" if header else "") + "\n".join(lines) + "\n")
    return folder / name


def test_a_features_only_csv_is_predicted_and_refused_by_evaluate(tmp_path):
    model = tmp_path / "m.npz"
    _ok(_train(_csv(tmp_path, "train.csv"), "-o", model))
    features = _csv(tmp_path, "features.csv", labels=False)
    labelled = runner.invoke(app, ["predict", str(model), str(_csv(tmp_path, "again.csv"))])
    alone = runner.invoke(app, ["predict", str(model), str(features)])
    _ok(alone)
    assert alone.stdout == labelled.stdout  # all three columns are features, none taken as a label
    refused = runner.invoke(app, ["evaluate", str(model), str(features)])
    assert refused.exit_code == 2
    assert refused.stderr == f"calopt: error: {features} has 2 features and a label column, the model has 3\n"


def test_a_narrower_libsvm_test_file_is_padded(tmp_path):
    data = _data(tmp_path)
    X, y = _load(data)
    X = X.toarray()
    X[:, -1] = 0.0
    dump_svmlight_file(X[:, :-1], y, str(tmp_path / "narrow.svm"), zero_based=True)
    result = _train(data, "--test", tmp_path / "narrow.svm", "--json")
    _ok(result)


@pytest.mark.parametrize("header", ["0,1,2,3", "1,2,3,4", "a,b,c,y", "0,1,2,y"])
def test_a_header_of_column_names_or_numbers_is_not_a_data_row(tmp_path, header):
    path = _csv(tmp_path, "h.csv", header=header)
    out = json.loads(_train(path, "--json").stdout)
    assert out["classes"] == ["-1", "1"]  # no third, bogus class from the header
    forced = runner.invoke(app, ["train", str(path), "--no-header", "--epochs", "2", "--no-progress", "--json"])
    if header.startswith("a"):  # forced to be data: its names are not numbers
        assert forced.exit_code == 2 and "h.csv: line 1, column 1" in forced.stderr
    else:  # forced to be data: its label field is a class of its own
        assert len(json.loads(forced.stdout)["classes"]) == 3


def test_header_and_delimiter_options(tmp_path):
    semicolons = _csv(tmp_path, "s.txt", delimiter=";", header="p;q;r;label")
    out = json.loads(_train(semicolons, "--json", "--label-column", "label").stdout)
    assert out["classes"] == ["-1", "1"]
    numbered = _csv(tmp_path, "n.csv", header="5,6,7,8")  # not column numbers: data, unless --header
    assert len(json.loads(_train(numbered, "--json").stdout)["classes"]) == 3
    assert json.loads(_train(numbered, "--json", "--header").stdout)["classes"] == ["-1", "1"]
    tabs = _csv(tmp_path, "t.data", delimiter="\t")
    assert json.loads(_train(tabs, "--json", "--delimiter", "tab").stdout)["classes"] == ["-1", "1"]
    wrong = runner.invoke(app, ["train", str(tabs), "--delimiter", ";", "--epochs", "2", "--no-progress"])
    assert wrong.exit_code == 2 and "t.data" in wrong.stderr


# ------------------------------------------------------------------ documentation that matches
COMMANDS = ["train", "evaluate", "predict", "aggregate", "score", "list-measures", "list-losses", "list-algorithms"]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_reads_well_at_80_columns(command):
    result = runner.invoke(app, [command, "--help"] if command else ["--help"], env={"COLUMNS": "80"})
    _ok(result)
    for artefact in ("<bool>", "<str>", "<int", "<float>", "<path>", "{"):
        assert artefact not in result.stdout, (artefact, result.stdout)
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    description = [line.strip() for line in result.stdout.split("╭")[0].splitlines()]  # above the panels
    paragraphs = "\n".join(description).split("\n\n")
    for rows in (paragraph.strip("\n").splitlines() for paragraph in paragraphs):
        assert all(len(row) > 50 for row in rows[:-1]), rows  # re-wrapped, not broken where the source was


def test_the_spec_examples_in_the_help_are_specs_that_work():
    import re

    text = " ".join(runner.invoke(app, ["train", "--help"], env={"COLUMNS": "200"}).stdout.split())
    for kind, get in (("Training algorithm", calopt.get_algorithm), ("Performance measure", calopt.get_measure),
                      ("Margin loss", calopt.get_loss)):
        examples = re.search(kind + r"[^(]*\(([^)]*)\)", text).group(1)
        for spec in [part.strip() for part in examples.split(",") if part.strip() not in ("...", "")]:
            get(spec)  # raises for a spec that does not work (stamp:epochs=20 did)


def test_the_train_help_example_runs():
    text = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "200"}).stdout
    example = next(line for line in text.splitlines() if "Example:" in line).split("Example:")[1].split()
    assert example[:2] == ["calopt", "train"]
    _ok(runner.invoke(app, [*example[1:], "--no-progress"]))


@pytest.mark.parametrize("command", ["list-measures", "list-losses", "list-algorithms"])
def test_piped_listings_are_plain_rows_one_per_entry(command):
    kind = command.removeprefix("list-")
    names = [entry["name"] for entry in json.loads(runner.invoke(app, [command, "--json"]).stdout)]
    result = runner.invoke(app, [command], env={"COLUMNS": "40"})  # CliRunner's stdout is not a terminal
    _ok(result)
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["name", "family"] and len(lines) == len(names) + 1, kind
    assert [line.split()[0] for line in lines[1:]] == names
    assert not any(box in result.stdout for box in "┃│━")


@pytest.mark.parametrize("name", [entry.name for entry in calopt.list_algorithms() if entry.component.binary])
def test_every_algorithm_runs_on_array_api_strict_s_second_device(name):
    """What the README says is tested: array-api-strict on its second device, not only its default."""
    pytest.importorskip("array_api_strict")
    family = next(e for e in calopt.list_algorithms() if e.name == name).component.family
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=200) > 0.4, 1, -1)
    options = dict(measure="gmean" if family == "concave" else "f1", algorithm=name, epochs=2, seed=1)
    on_numpy = calopt.fit(X, y, **options)
    on_device1 = calopt.fit(X, y, **options, backend="array-api-strict", device="device1")
    np.testing.assert_allclose(on_device1.coef, on_numpy.coef, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("option", ["-o", "--plot", "--checkpoint"])
@pytest.mark.parametrize("through_link", [False, True])
def test_no_output_lands_inside_the_stream_directory_being_read(tmp_path, option, through_link):
    """``train DIR --stream -o DIR/data.npy`` would replace the array it reads: refused before any
    work, every file of the directory byte for byte as it was (through a link to it too)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), np.where(rng.random(60) < 0.5, 1, -1)
    dump_svmlight_file(X, y, str(tmp_path / "in.svm"))
    assert runner.invoke(app, ["convert", str(tmp_path / "in.svm"), str(tmp_path / "s")]).exit_code == 0
    before = {f.name: f.read_bytes() for f in (tmp_path / "s").iterdir()}
    source = tmp_path / "s"
    if through_link:
        (tmp_path / "link").symlink_to(source, target_is_directory=True)
        source = tmp_path / "link"
    target = tmp_path / "s" / ("data.npy" if option == "-o" else "new.png" if option == "--plot" else "c.npz")
    result = runner.invoke(app, ["train", str(source), "--stream", "-m", "f1", option, str(target)])
    assert result.exit_code == 2 and "inside the input directory" in result.output
    assert {f.name: f.read_bytes() for f in (tmp_path / "s").iterdir()} == before

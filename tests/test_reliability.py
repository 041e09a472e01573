"""Reliability (issue 6): bad input through the CLI, interrupted and resumed training,
deterministic model files, safe checkpoint files, numerical safety."""

from __future__ import annotations

import bz2
import gzip
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
import dataclasses
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file
from typer.testing import CliRunner

import calopt
from calopt.algorithms import Algorithm, Problem, Tunable
from calopt.backends import get_backend
from calopt.training.checkpoint import Checkpoint
from calopt.errors import TrainingError, ModelFileError, ParameterError, TrainingInterrupted
from calopt.models.linear import LinearModel
from calopt.io.batches import ArrayReader
from calopt.training.loop import INTERRUPTED, NONFINITE, LoopResult, run
from calopt_cli.app import app

runner = CliRunner()


def assert_one_line_error(result, *fragments: str) -> str:
    """Exit code 2, one ``calopt: error:`` line on stderr holding ``fragments``, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if not line.startswith("calopt: warning:")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("calopt: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _imbalanced(n: int = 400, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 2] + 0.4 * rng.normal(size=n) > 0.9, 1, -1)
    return X, y


# ----------------------------------------------------------------- bad input through the CLI
def _write(folder: Path, name: str, content: str | bytes) -> str:
    path = folder / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def _train_file(folder: Path) -> str:
    X, y = _imbalanced(300, 6)
    dump_svmlight_file(X, y, str(folder / "train.svm"))
    return str(folder / "train.svm")


def _model_file(folder: Path) -> str:
    X, y = _imbalanced(300, 6)
    calopt.fit(X, y, measure="f1", epochs=2).save(folder / "good.npz")
    return str(folder / "good.npz")


def _metadata_edit(folder: Path, name: str, **changes: Any) -> str:
    """A copy of a good model file with its JSON metadata changed (checksum left stale)."""
    with np.load(_model_file(folder)) as archive:
        arrays = {key: archive[key] for key in archive.files}
    (folder / "good.npz").unlink()
    metadata = {**json.loads(arrays["metadata"].tobytes()), **changes}
    np.savez(folder / name, **{**arrays, "metadata": np.frombuffer(json.dumps(metadata).encode(), np.uint8)})
    return str(folder / name)


def _truncated_model(folder: Path) -> str:
    good = Path(_model_file(folder))
    data = good.read_bytes()
    good.unlink()
    return _write(folder, "truncated.npz", data[: len(data) // 2])


_SVM = "1 1:0.5 3:1.0\n-1 2:0.25\n1 1:0.75\n-1 3:-1.0\n"
_BAD_INPUTS = {
    # case: (files -> command line, fragments of the message)
    "missing file": (lambda d: ["train", str(d / "nope.svm")], ["nope.svm", "no such file"]),
    "empty file": (lambda d: ["train", _write(d, "empty.svm", "")], ["empty.svm", "empty file"]),
    "binary garbage": (
        lambda d: ["train", _write(d, "garbage.svm", np.random.default_rng(3).bytes(4000))],
        ["garbage.svm", "not a LIBSVM, CSV or NPZ file"]),
    "corrupt bz2": (
        lambda d: ["train", _write(d, "train.svm.bz2", bz2.compress(_SVM.encode() * 50)[:60])],
        ["train.svm.bz2", "corrupt bzip2"]),
    "corrupt gz": (
        lambda d: ["train", _write(d, "train.svm.gz", gzip.compress(_SVM.encode() * 50)[:40])],
        ["train.svm.gz", "corrupt gzip"]),
    "nan feature": (
        lambda d: ["train", _write(d, "nan.svm", "1 1:0.5\n-1 1:0.2 2:nan\n")],
        ["nan.svm", "line 2", "feature 2 is nan"]),
    "inf feature": (
        lambda d: ["train", _write(d, "inf.csv", "1.0,2.0,1\n3.0,inf,-1\n")],
        ["inf.csv", "line 2, column 2", "not finite"]),
    "single class": (
        lambda d: ["train", _write(d, "one.svm", "1 1:0.5\n1 1:0.2\n1 2:1\n")],
        ["one.svm", "only one class"]),
    "positive not among the labels": (
        lambda d: ["train", _train_file(d), "--positive", "7"],
        ["train.svm", "positive class '7' is not among the labels"]),
    "test has more features": (
        lambda d: ["train", _train_file(d), "--test", _write(d, "wide.svm", "1 9:1.0\n-1 1:0.5\n")],
        ["wide.svm", "10 features"]),  # read zero-based, as the training file is
    "unknown measure": (
        lambda d: ["train", _train_file(d), "--measure", "gmaen"],
        ["unknown measure 'gmaen'", "did you mean 'gmean'"]),
    "unknown loss": (
        lambda d: ["train", _train_file(d), "--loss", "hing"],
        ["unknown loss 'hing'", "did you mean 'hinge'"]),
    "unknown algorithm": (
        lambda d: ["train", _train_file(d), "--algorithm", "spad"],
        ["unknown algorithm 'spad'", "did you mean 'spade'"]),
    "unknown backend": (
        lambda d: ["train", _train_file(d), "--backend", "nump"],
        ["unknown backend 'nump'", "did you mean 'numpy'"]),
    "fbeta beta=-1": (
        lambda d: ["train", _train_file(d), "--measure", "fbeta:beta=-1"],
        ["measure 'fbeta'", "beta", "-1"]),
    "epochs 0": (lambda d: ["train", _train_file(d), "--epochs", "0"], ["--epochs", "greater than or equal to 1"]),
    "negative batch size": (
        lambda d: ["train", _train_file(d), "--batch-size", "-5"], ["--batch-size", "greater than or equal to 1"]),
    "checkpoint-every 0": (
        lambda d: ["train", _train_file(d), "--checkpoint-every", "0"], ["--checkpoint-every", "greater than or equal to 1"]),
    "resume missing": (
        lambda d: ["train", _train_file(d), "--resume", str(d / "gone.ckpt.npz")],
        ["gone.ckpt.npz", "no such checkpoint"]),
    "resume from a model file": (
        lambda d: ["train", _train_file(d), "--resume", _model_file(d)],
        ["good.npz", "not a calopt checkpoint (it is a calopt model file)"]),
    "model truncated": (
        lambda d: ["evaluate", _truncated_model(d), _train_file(d)],
        ["truncated.npz", "truncated or corrupt"]),
    "model from a newer format": (
        lambda d: ["evaluate", _metadata_edit(d, "newer.npz", format_version=99), _train_file(d)],
        ["newer.npz", "format version 99 is newer"]),
    "not a calopt model (npz)": (
        lambda d: ["evaluate", _write_npz(d, "foreign.npz"), _train_file(d)],
        ["foreign.npz", "not a calopt model file"]),
    "not a calopt model (text)": (
        lambda d: ["evaluate", _write(d, "notes.npz", "hello\n"), _train_file(d)],
        ["notes.npz", "not a calopt model file", "not an .npz archive"]),
    "predict with a truncated model": (
        lambda d: ["predict", _truncated_model(d), _train_file(d), "--out", str(d.parent / "out" / "p.txt")],
        ["truncated.npz", "truncated or corrupt"]),
}


def _write_npz(folder: Path, name: str) -> str:
    np.savez(folder / name, weights=np.zeros(3))
    return str(folder / name)


@pytest.mark.parametrize("case", list(_BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, case):
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    build, fragments = _BAD_INPUTS[case]
    arguments = build(inputs)
    written = sorted(inputs.iterdir())
    if arguments[0] == "train":
        arguments += ["--model-out", str(out / "model.npz"), "--no-progress"]
    result = runner.invoke(app, arguments)
    assert_one_line_error(result, *fragments)
    assert list(out.iterdir()) == []  # no model, no checkpoint, no temporary file
    assert sorted(inputs.iterdir()) == written


def test_three_labels_are_multiclass_or_a_one_line_error(tmp_path):
    """Three labels: one-vs-rest where multiclass training exists, else a binary-only error."""
    data = tmp_path / "three.svm"
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 3))
    dump_svmlight_file(X, np.argmax(X, axis=1) + 1, str(data))
    model = tmp_path / "m.npz"
    result = runner.invoke(app, ["train", str(data), "--epochs", "2", "--model-out", str(model), "--no-progress"])
    if result.exit_code == 0:
        assert model.is_file()
    else:
        assert_one_line_error(result, "3 classes")
        assert not model.exists()


# ------------------------------------------------------------ checkpoints: the file and its checks
class _Inner(NamedTuple):
    level: Any
    count: int


class _EveryKind(NamedTuple):
    matrix: Any
    vector: Any
    scalar: Any
    integers: Any
    flags: Any
    t: int
    huge: int
    gain: float
    flag: bool
    nothing: None
    sums: tuple
    inner: _Inner


class _Named:
    name, params = "spade", {"step": 10.0}


def _every_kind_state(xp: Any, dtype: Any) -> _EveryKind:
    rng = np.random.default_rng(5)

    def on(values, kind=None):
        return xp.asarray(np.asarray(values), dtype=kind or dtype)

    return _EveryKind(
        matrix=on(rng.normal(size=(3, 4))), vector=on(rng.normal(size=7)), scalar=on(-0.0),
        integers=on(np.arange(5), xp.int64), flags=on([True, False], xp.bool), t=17, huge=2**70,
        gain=float("inf"), flag=True, nothing=None, sums=(on(1.5), on(2.5), 3, None),
        inner=_Inner(on(np.nan), 4),
    )


@pytest.mark.parametrize("backend_name", ["numpy", "array-api-strict", "torch"])
def test_checkpoint_round_trips_every_kind_of_state_field(tmp_path, backend_name):
    if backend_name != "numpy":
        pytest.importorskip(backend_name.replace("-", "_"))
    backend = get_backend(backend_name)
    xp = backend.xp
    state = _every_kind_state(xp, xp.float32)
    position = LoopResult(state, 2, 1.25, INTERRUPTED, "", [{"epoch": 1, "train": 0.5}], 3,
                          np.random.default_rng(1).bit_generator.state, state)
    Checkpoint.capture(position, _Named(), options={"seed": 1}, fingerprint={"shape": [1, 1]}).save(
        tmp_path / "c.npz")
    loaded = Checkpoint.load(tmp_path / "c.npz")
    template = _every_kind_state(xp, xp.float32)
    restored = loaded.position(template, backend)
    assert (restored.epochs, restored.batch, restored.history) == (2, 3, [{"epoch": 1, "train": 0.5}])
    assert restored.rng_state == position.rng_state
    for got in (restored.state, restored.epoch_start_state):
        assert type(got) is _EveryKind and type(got.inner) is _Inner
        for name in ("matrix", "vector", "scalar", "integers", "flags"):
            value, expected = getattr(got, name), getattr(state, name)
            assert value.dtype == expected.dtype and tuple(value.shape) == tuple(expected.shape)
            np.testing.assert_array_equal(backend.to_numpy(value), backend.to_numpy(expected))
        assert (got.t, got.huge, got.gain, got.flag, got.nothing) == (17, 2**70, float("inf"), True, None)
        assert isinstance(got.sums, tuple) and got.sums[2:] == (3, None)
        assert float(backend.to_numpy(got.sums[1])) == 2.5
        assert np.isnan(float(backend.to_numpy(got.inner.level))) and got.inner.count == 4
    # a state type whose fields changed is refused, not silently mis-restored
    with pytest.raises(ModelFileError, match="fields"):
        loaded.position(_Inner(None, 0), backend)


def test_checkpoint_files_are_checked_and_never_unpickled(tmp_path):
    X, y = _imbalanced()
    path = tmp_path / "c.npz"
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, measure="gmean", algorithm="spade", epochs=2, checkpoint=path, interrupt=_StopAt(3))
    with np.load(path, allow_pickle=False) as archive:  # plain arrays and JSON only
        arrays = {key: archive[key] for key in archive.files}
    metadata = json.loads(arrays["metadata"].tobytes())
    tampered = tmp_path / "tampered.npz"
    key = next(key for key in arrays if key.startswith("state."))
    np.savez(tampered, **{**arrays, key: arrays[key] + 1})
    with pytest.raises(ModelFileError, match="checksum"):
        Checkpoint.load(tampered)
    newer = tmp_path / "newer.npz"
    np.savez(newer, **{**arrays, "metadata": np.frombuffer(
        json.dumps({**metadata, "format_version": 7}).encode(), np.uint8)})
    with pytest.raises(ModelFileError, match="version 7 is newer"):
        Checkpoint.load(newer)
    marker = tmp_path / "executed"
    crafted = tmp_path / "evil.ckpt.npz"
    crafted.write_bytes(pickle.dumps(_Payload(str(marker))))
    with pytest.raises(ModelFileError, match="not an .npz archive"):
        Checkpoint.load(crafted)
    sneaky = tmp_path / "sneaky.npz"
    np.savez(sneaky, metadata=np.array([_Payload(str(marker))], dtype=object))
    with pytest.raises(ModelFileError):
        Checkpoint.load(sneaky)
    assert not marker.exists()


class _Payload:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_resume_refuses_other_data_or_options(tmp_path):
    X, y = _imbalanced()
    path = tmp_path / "c.npz"
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, measure="gmean", algorithm="spade", epochs=2, seed=4, checkpoint=path, interrupt=_StopAt(3))
    with pytest.raises(ParameterError, match="seed 4, this run has 5"):
        calopt.fit(X, y, measure="gmean", algorithm="spade", epochs=2, seed=5, resume=path)
    with pytest.raises(ParameterError, match="measure 'gmean', this run has 'qmean'"):
        calopt.fit(X, y, measure="qmean", algorithm="spade", epochs=2, seed=4, resume=path)
    with pytest.raises(ParameterError, match="epochs 2, this run has 3"):
        calopt.fit(X, y, measure="gmean", algorithm="spade", epochs=3, seed=4, resume=path)
    other = X.copy()
    other[-1, 0] += 1e-9
    with pytest.raises(ParameterError, match="training data differ"):
        calopt.fit(other, y, measure="gmean", algorithm="spade", epochs=2, seed=4, resume=path)
    with pytest.raises(ParameterError, match="training data differ"):
        calopt.fit(X, -y, measure="gmean", algorithm="spade", epochs=2, seed=4, resume=path)
    result = runner.invoke(app, ["train", "a9a", "--resume", str(path), "--no-progress", "--epochs", "2"])
    assert_one_line_error(result, "c.npz", "written with")


def test_a_checkpoint_naming_f1_by_its_old_spec_resumes(tmp_path):
    """Checkpoints before the sixth session wrote F1 as ``fbeta`` (now ``f1``): such a file resumes
    to the uninterrupted model; another measure is still refused."""
    from calopt.training.checkpoint import Checkpoint

    X, y = _imbalanced()
    path = tmp_path / "c.npz"
    options = dict(measure="f1", algorithm="stamp", epochs=2, seed=4)
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, checkpoint=path, interrupt=_StopAt(3), **options)
    old = Checkpoint.load(path)
    assert old.options["measure"] == "f1"
    old.options["measure"] = "fbeta"
    old.save(path)
    resumed = calopt.fit(X, y, resume=path, **options)
    reference = calopt.fit(X, y, **options)
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    with pytest.raises(ParameterError, match="measure 'fbeta', this run has 'jaccard'"):
        calopt.fit(X, y, resume=path, **{**options, "measure": "jaccard"})


# --------------------------------------------------- resume mid-epoch, for every algorithm
class _StopAt:
    """An ``interrupt`` flag that turns true at its ``at``-th check (one check per batch)."""

    def __init__(self, at: int | None = None):
        self.at, self.calls = at, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls == self.at


def _measure_for(entry) -> str:
    return {"concave": "gmean", "pseudo-linear": "f1"}.get(entry.component.family, "f1")


def _same_model(resumed: LinearModel, reference: LinearModel, folder: Path) -> None:
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    np.testing.assert_array_equal(resumed.intercept, reference.intercept)
    assert getattr(resumed, "threshold", None) == getattr(reference, "threshold", None)
    assert (resumed.algorithm, resumed.status, resumed.message) == (
        reference.algorithm, reference.status, reference.message)
    resumed.save(folder / "resumed.npz")
    reference.save(folder / "reference.npz")
    assert (folder / "resumed.npz").read_bytes() == (folder / "reference.npz").read_bytes()


@pytest.mark.parametrize("name", [entry.name for entry in calopt.list_algorithms()])
def test_resume_mid_epoch_gives_the_uninterrupted_model(tmp_path, name):
    entry = next(e for e in calopt.list_algorithms() if e.name == name)
    X, y = _imbalanced() if entry.component.binary else _four_classes(200)
    options = dict(measure=_measure_for(entry), algorithm=name, epochs=3, batch_size=40, seed=7)
    counter = _StopAt()
    reference = calopt.fit(X, y, **options, interrupt=counter)
    batches = counter.calls
    assert batches >= 2
    for at in sorted({2, batches // 2 + 1, batches}):  # first epoch, mid-run, the very last batch
        path = tmp_path / f"at{at}.npz"
        with pytest.raises(TrainingInterrupted) as stopped:
            calopt.fit(X, y, **options, checkpoint=path, interrupt=_StopAt(at))
        assert stopped.value.path == path and path.is_file()
        saved = Checkpoint.load(path)
        assert saved.batch >= 1  # stopped after a batch: mid-epoch, or after the epoch's last one
        # interrupted again after resuming, then resumed from the second checkpoint
        again = tmp_path / f"again{at}.npz"
        try:
            resumed = calopt.fit(X, y, **options, resume=path, checkpoint=again, interrupt=_StopAt(2))
        except TrainingInterrupted:
            resumed = calopt.fit(X, y, **options, resume=again)
        _same_model(resumed, reference, tmp_path)
        # the checkpoint object itself resumes too, without a file
        assert np.array_equal(calopt.fit(X, y, **options, resume=stopped.value.checkpoint).coef, reference.coef)


def test_checkpoint_every_writes_epoch_boundaries_that_resume_exactly(tmp_path):
    X, y = _imbalanced()
    options = dict(measure="f1", algorithm="stamp", epochs=4, batch_size=32, seed=2)
    reference = calopt.fit(X, y, **options)
    path = tmp_path / "every.npz"
    seen: list[tuple[int, int]] = []

    def watch(info):
        if path.exists():
            saved = Checkpoint.load(path)
            seen.append((saved.epochs, saved.batch))

    calopt.fit(X, y, **options, checkpoint=path, checkpoint_every=2, callback=watch)
    assert seen[-1] == (2, 0)  # written after epoch 2 (not after the last one)
    _same_model(calopt.fit(X, y, **options, resume=path), reference, tmp_path)


@pytest.mark.parametrize("backend_name", ["array-api-strict", "torch"])
@pytest.mark.parametrize("algorithm", ["spade", "stamp"])
def test_resume_on_other_backends_restores_the_state_there(tmp_path, backend_name, algorithm):
    pytest.importorskip(backend_name.replace("-", "_"))
    X, y = _imbalanced()
    options = dict(measure="gmean" if algorithm == "spade" else "f1", algorithm=algorithm,
                   epochs=2, batch_size=30, seed=1, backend=backend_name)
    reference = calopt.fit(X, y, **options)
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, **options, checkpoint=tmp_path / "c.npz", interrupt=_StopAt(17))
    resumed = calopt.fit(X, y, **options, resume=tmp_path / "c.npz")
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    assert resumed.intercept == reference.intercept


# ------------------------------------------------- a real `calopt train`, interrupted by signals
def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CALOPT_")}


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 300.0) -> None:
    """Poll until ``path`` exists (the run has made progress) while ``process`` still runs."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"calopt train ended ({process.returncode}) before writing {path}: "
                        f"{process.communicate()[1]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no {path} after {timeout} s")
        time.sleep(0.02)


def _stop(process: subprocess.Popen, signum: int) -> str:
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    return stderr


def test_sigint_and_sigterm_then_resume_give_the_uninterrupted_model_bytes(tmp_path):
    train = [sys.executable, "-m", "calopt_cli", "train", "ijcnn1", "--measure", "gmean",
             "--batch-size", "16", "--epochs", "6", "--seed", "3", "--no-progress"]  # a few seconds
    popen = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
    reference = tmp_path / "reference.npz"
    done = subprocess.run([*train, "--model-out", str(reference)], capture_output=True, text=True,
                          env=_env(), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr

    model = tmp_path / "model.npz"
    first = tmp_path / "model.ckpt.npz"  # the default: beside --model-out
    process = subprocess.Popen([*train, "--model-out", str(model), "--checkpoint-every", "1"], **popen)
    _wait_for(first, process)  # epoch 1 is done
    message = _stop(process, signal.SIGINT)
    assert message.startswith("calopt: interrupted in epoch ") and f"--resume {first}" in message
    assert not model.exists() and not list(tmp_path.glob(".*.tmp"))
    after_sigint = Checkpoint.load(first)
    assert after_sigint.epochs >= 1

    second = tmp_path / "second.npz"
    process = subprocess.Popen([*train, "--model-out", str(model), "--resume", str(first),
                                "--checkpoint", str(second), "--checkpoint-every", "1"], **popen)
    _wait_for(second, process)
    _stop(process, signal.SIGTERM)
    after_sigterm = Checkpoint.load(second)
    assert (after_sigterm.epochs, after_sigterm.batch) > (after_sigint.epochs, after_sigint.batch)
    assert not model.exists()

    done = subprocess.run([*train, "--model-out", str(model), "--resume", str(second)],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert second.exists()  # a checkpoint the user named (--resume) is never deleted
    np.testing.assert_array_equal(LinearModel.load(model).coef, LinearModel.load(reference).coef)
    assert model.read_bytes() == reference.read_bytes()


def test_train_restores_the_signal_handlers(tmp_path):
    X, y = _imbalanced()
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"))
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    result = runner.invoke(app, ["train", str(tmp_path / "d.svm"), "--epochs", "2", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


# ------------------------------------------- multiclass: interrupted, resumed, and Ctrl-C anywhere
def _four_classes(n: int = 500, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.argmax(X[:, :4] + 0.5 * rng.normal(size=(n, 4)), axis=1) + 1


def _same_multiclass_model(resumed, reference, folder: Path) -> None:
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    assert resumed.history == [{**row, "seconds": resumed.history[i]["seconds"]}
                               for i, row in enumerate(reference.history)]
    resumed.save(folder / "resumed.npz")
    reference.save(folder / "reference.npz")
    assert (folder / "resumed.npz").read_bytes() == (folder / "reference.npz").read_bytes()


@pytest.mark.parametrize("algorithm", ["slnd", "stamp"])  # all classes at once; one class at a time
def test_multiclass_resume_mid_epoch_gives_the_uninterrupted_model(tmp_path, algorithm):
    X, y = _four_classes()
    options = dict(algorithm=algorithm, measure="f1", epochs=3, batch_size=25, seed=5)
    counter = _StopAt()
    reference = calopt.fit_multiclass(X, y, **options, interrupt=counter)
    batches = counter.calls
    assert batches >= 3
    for at in sorted({2, batches // 2 + 1, batches}):  # first batch of all, mid-run, the very last
        path = tmp_path / f"at{at}.npz"
        with pytest.raises(TrainingInterrupted) as stopped:
            calopt.fit_multiclass(X, y, **options, checkpoint=path, interrupt=_StopAt(at))
        assert stopped.value.path == path and path.is_file()
        saved = Checkpoint.load(path)
        assert saved.options["classes"] == [1, 2, 3, 4] and saved.batch >= 1
        if algorithm == "stamp":  # the class it stopped in, and the ones finished before it
            assert f"of 4), epoch {saved.epochs + 1}, after batch" in saved.describe()
            assert len(saved.one_vs_rest["finished"]) == saved.one_vs_rest["class"]
        again = tmp_path / f"again{at}.npz"
        try:
            resumed = calopt.fit_multiclass(X, y, **options, resume=path, checkpoint=again, interrupt=_StopAt(2))
        except TrainingInterrupted:
            resumed = calopt.fit_multiclass(X, y, **options, resume=again)
        _same_multiclass_model(resumed, reference, tmp_path)
        rest = _StopAt()  # the checkpoint object resumes too, without a file, and redoes no batch
        resumed = calopt.fit_multiclass(X, y, **options, resume=stopped.value.checkpoint, interrupt=rest)
        np.testing.assert_array_equal(resumed.coef, reference.coef)
        assert rest.calls == batches - at
    if algorithm == "stamp":  # stopped in the last class: the three before it come from the file
        assert Checkpoint.load(tmp_path / f"at{batches}.npz").one_vs_rest["class"] == 3


def test_multiclass_checkpoint_every_resumes_one_class_at_a_time(tmp_path):
    X, y = _four_classes()
    options = dict(algorithm="stamp", measure="f1", epochs=3, batch_size=25, seed=1)
    reference = calopt.fit_multiclass(X, y, **options)
    path = tmp_path / "every.npz"
    seen: list[tuple[int, int, int] | None] = []

    def watch(info):  # runs before the epoch's checkpoint is written
        saved = Checkpoint.load(path) if path.exists() else None
        seen.append(saved and (saved.one_vs_rest["class"], saved.epochs, saved.batch))
        if len(seen) == 8:  # in class 2 (0-based) after its second epoch
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # killed outright: the last periodic checkpoint is all there is
        calopt.fit_multiclass(X, y, **options, checkpoint=path, checkpoint_every=1, callback=watch)
    # none after a class's last epoch (the next class starts from its own first epoch)
    assert seen == [None, (0, 1, 0), (0, 2, 0), (0, 2, 0), (1, 1, 0), (1, 2, 0), (1, 2, 0), (2, 1, 0)]
    _same_multiclass_model(calopt.fit_multiclass(X, y, **options, resume=path), reference, tmp_path)


def test_multiclass_and_binary_checkpoints_refuse_each_other(tmp_path):
    X, y = _four_classes()
    path = tmp_path / "multi.npz"
    with pytest.raises(TrainingInterrupted):
        calopt.fit_multiclass(X, y, algorithm="slnd", epochs=2, checkpoint=path, interrupt=_StopAt(3))
    with pytest.raises(ParameterError, match=r"written with classes \[1, 2, 3, 4\], this run has \[-1, 1\]"):
        calopt.fit(X, np.where(y == 1, 1, -1), epochs=2, resume=path)
    with pytest.raises(ParameterError, match="seed 0, this run has 1"):
        calopt.fit_multiclass(X, y, algorithm="slnd", epochs=2, seed=1, resume=path)
    with pytest.raises(ParameterError, match="written with algorithm 'slnd', this run has 'stamp'"):
        calopt.fit_multiclass(X, y, algorithm="stamp", epochs=2, resume=path)
    with pytest.raises(ParameterError, match="training data differ"):
        calopt.fit_multiclass(X + 1e-9, y, algorithm="slnd", epochs=2, resume=path)
    binary = tmp_path / "binary.npz"
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, np.where(y == 1, 1, -1), algorithm="stamp", epochs=2, checkpoint=binary, interrupt=_StopAt(3))
    with pytest.raises(ParameterError, match=r"written with classes \[-1, 1\], this run has \[1, 2, 3, 4\]"):
        calopt.fit_multiclass(X, y, algorithm="slnd", epochs=2, resume=binary)
    dump_svmlight_file(X, np.where(y == 1, 1, -1), str(tmp_path / "two.svm"))
    result = runner.invoke(app, ["train", str(tmp_path / "two.svm"), "--resume", str(path), "--epochs", "2",
                                 "--no-progress"])
    assert_one_line_error(result, "multi.npz", "written with classes")


def test_sigint_stops_a_multiclass_cli_run_that_resumes_to_the_same_model_bytes(tmp_path):
    # all classes at once (multinomial, no early stop) on 2,000 rows of 5 classes: batch size 1 makes
    # ~50 ms epochs, a few seconds a run, and the signal lands in the middle of one
    X, y = _four_classes(n=2000, d=8)
    y = np.where(X[:, 7] > 1.2, 5, y)
    dump_svmlight_file(X, y, str(tmp_path / "classes.svm"))
    train = [sys.executable, "-m", "calopt_cli", "train", "classes.svm", "--algorithm", "multinomial:tol=0",
             "--batch-size", "1", "--epochs", "40", "--seed", "2", "--no-progress"]
    reference = tmp_path / "reference.npz"
    done = subprocess.run([*train, "--model-out", str(reference)], capture_output=True, text=True,
                          env=_env(), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    model, checkpoint = tmp_path / "model.npz", tmp_path / "model.ckpt.npz"
    process = subprocess.Popen([*train, "--model-out", str(model), "--checkpoint-every", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
    _wait_for(checkpoint, process)  # epoch 1 is done
    message = _stop(process, signal.SIGINT)
    assert message.startswith("calopt: interrupted in epoch ") and f"--resume {checkpoint}" in message
    assert not model.exists() and not list(tmp_path.glob(".*.tmp"))
    assert Checkpoint.load(checkpoint).options["one_vs_rest"] == "together"
    done = subprocess.run([*train, "--model-out", str(model), "--resume", str(checkpoint)],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert checkpoint.exists()  # the --resume file is the user's: kept
    assert model.read_bytes() == reference.read_bytes()


@pytest.mark.parametrize("command", ["train", "predict"])
def test_ctrl_c_outside_training_is_one_line_and_exit_130(tmp_path, monkeypatch, command):
    """A KeyboardInterrupt while a command loads its data: no traceback, no output file."""
    import calopt_cli.reading

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    data = _train_file(tmp_path)
    model = _model_file(tmp_path)
    monkeypatch.setattr(calopt_cli.reading, "read_data", interrupted)
    out = tmp_path / "out"
    out.mkdir()
    args = {"train": ["train", data, "--model-out", str(out / "m.npz"), "--no-progress"],
            "predict": ["predict", model, data, "--out", str(out / "p.txt")]}[command]
    result = runner.invoke(app, args)
    assert result.exit_code == 130, result.output
    assert result.stderr == "calopt: interrupted\n" and "Traceback" not in result.output
    assert list(out.iterdir()) == []


# ------------------------------------------------------------------------------ determinism
def test_same_seed_gives_the_same_model_bytes(tmp_path):
    X, y = _imbalanced(600)
    paths = []
    for run_index in range(2):
        model = calopt.fit(X, y, measure="qmean", epochs=3, seed=11)
        assert model.fit_seconds > 0 and "seconds" in model.history[0]  # timings kept in memory
        paths.append(tmp_path / f"m{run_index}.npz")
        model.save(paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()
    with zipfile.ZipFile(paths[0]) as archive:
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        metadata = json.loads(np.load(paths[0])["metadata"].tobytes())
    assert "fit_seconds" not in metadata and all("seconds" not in row for row in metadata["history"])
    other = tmp_path / "other.npz"
    calopt.fit(X, y, measure="qmean", epochs=3, seed=12).save(other)
    assert other.read_bytes() != paths[0].read_bytes()


def test_model_files_written_before_still_load(tmp_path):
    """Files from before the determinism change hold timings and np.savez's dates."""
    from calopt.models.archive import _checksum

    X, y = _imbalanced()
    model = calopt.fit(X, y, measure="f1", epochs=2)
    arrays = {"coef": model.coef, "scale": model.scale}
    metadata = {**model._metadata(), "fit_seconds": 1.5, "history": model.history}
    metadata["sha256"] = _checksum(arrays, metadata)
    np.savez(tmp_path / "old.npz", metadata=np.frombuffer(json.dumps(metadata).encode(), np.uint8), **arrays)
    loaded = LinearModel.load(tmp_path / "old.npz")
    assert loaded.fit_seconds == 1.5 and loaded.history == model.history
    np.testing.assert_array_equal(loaded.coef, model.coef)


# ------------------------------------------------------------------------- numerical safety
def _extreme(dtype: str, reward: bool) -> np.ndarray:
    """Margins near the largest float (reward losses), or where the value is representable."""
    big = {"float64": (1e300, 1e150), "float32": (3e38, 1e18)}[dtype][0 if reward else 1]
    return np.array([-big, -1e30 if reward else -1e10, -1.0, 0.0, 1.0, 1e10, big], dtype=dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", [entry.name for entry in calopt.list_losses()])
def test_losses_are_finite_without_warnings_at_extreme_margins(name, dtype):
    import array_api_compat

    loss = calopt.get_loss(name)
    xp = array_api_compat.array_namespace(np.empty(0))
    z = _extreme(dtype, loss.reward)
    methods = ["value", "derivative", "second_derivative"]
    methods += ["reward_value", "reward_derivative"] if loss.reward else []
    for method in methods:  # pytest turns RuntimeWarning (overflow, invalid) into an error
        out = np.asarray(getattr(loss, method)(z, xp=xp))
        assert out.dtype == z.dtype and np.all(np.isfinite(out)), (method, out)


class _Explode(NamedTuple):
    w: Any
    b: Any


class _Exploding(Algorithm):
    """w ← 1e200·w + 1 per batch: finite after epochs 1 and 2, infinite in epoch 3."""

    name = "exploding"

    def init(self, problem: Problem) -> _Explode:
        return _Explode(problem.zeros(problem.n_features), problem.scalar(0.0))

    def update(self, state, batch, problem):
        return state._replace(w=state.w * 1e200 + 1.0)


def test_a_diverging_run_stops_with_the_last_finite_model():
    X, y = _imbalanced(10, 3)
    backend = get_backend("numpy")
    problem = Problem(backend.xp, backend.dtype, None, 10, 3, 0.3, calopt.get_measure("gmean"),
                      calopt.get_loss("hinge"), 10)
    result = run(_Exploding(), problem, ArrayReader(backend.asarray(X), backend.asarray(y), backend.xp),
                 epochs=5)
    assert result.status == NONFINITE and result.epochs == 2
    assert result.message == "diverged in epoch 3: non-finite weights; kept epoch 2"
    np.testing.assert_array_equal(result.state.algorithm.w, np.full(3, 1e200))
    assert [row["epoch"] for row in result.history] == [1, 2]


@dataclasses.dataclass(frozen=True)
class _Idle(Algorithm):
    """Never moves from w = 0."""

    name: ClassVar[str] = "idle"

    def init(self, problem: Problem) -> _Explode:
        return _Explode(problem.zeros(problem.n_features), problem.scalar(0.0))

    def update(self, state, batch, problem):
        return state


def test_a_run_that_makes_no_progress_is_a_training_error():
    X, y = _imbalanced()
    with pytest.raises(TrainingError, match="made no progress: the weights of idle are still 0 after 3 epochs$"):
        calopt.fit(X, y, algorithm=_Idle(), loss="hinge", epochs=3, select="none")
    with pytest.raises(TrainingError, match="made no progress: the weights of idle are still 0 after 3 epochs, "
                                            "for every setting tried"):
        calopt.fit(X, y, algorithm=_Idle(), loss="hinge", epochs=3)
    assert TrainingError("x").exit_code == 3


def test_a_cli_run_diverging_in_its_first_epoch_is_an_error_and_writes_no_model(tmp_path):
    X, y = _imbalanced()
    dump_svmlight_file(X * 1e3, y, str(tmp_path / "d.svm"))
    model = tmp_path / "m.npz"
    result = runner.invoke(app, ["train", str(tmp_path / "d.svm"), "--measure", "gmean",
                                 "--algorithm", "spade:step=1e300", "--epochs", "3", "--model-out", str(model),
                                 "--select", "none", "--no-progress"])
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines() == [
        "calopt: error: training diverged in its first epoch (non-finite weights) with spade:step=1e+300; "
        "a smaller step or another loss may help"]
    assert not model.exists()


class _Overflowing(_Idle):
    """Every weight infinite after the first batch."""

    name = "overflowing"

    def update(self, state, batch, problem):
        return state._replace(w=state.w + math.inf)


@pytest.mark.parametrize("select", ["cv:3", "holdout:0.3"])
def test_a_selection_whose_every_candidate_diverges_is_a_training_error(select):
    """The selection drops a diverging candidate; when none is left there is no model, and it
    stops at once rather than running out its patience."""
    X, y = _imbalanced()
    with pytest.raises(TrainingError, match=r"^training diverged in its first epoch \(non-finite weights\) "
                                            r"with overflowing; a smaller step or another loss may help$"):
        calopt.fit(X, y, algorithm=_Overflowing(), loss="hinge", select=select)


@dataclasses.dataclass(frozen=True)
class _MaybeOverflowing(_Idle):
    """A perceptron-like step on the batch (its sample weights), or infinite weights with ``overflow``."""

    name: ClassVar[str] = "maybe-overflowing"
    tunables: ClassVar[tuple[Tunable, ...]] = (Tunable("overflow", (True, False), trial=False),)
    overflow: bool = True

    def update(self, state, batch, problem):
        X, y, weight = batch
        step = (y * (1.0 if weight is None else weight)) @ X / X.shape[0]
        return state._replace(w=state.w + (math.inf if self.overflow else step))


def test_a_selection_keeps_the_candidates_that_stay_finite():
    X, y = _imbalanced()
    model = calopt.fit(X, y, measure="gmean", algorithm=_MaybeOverflowing(), loss="hinge", select="cv:3",
                       max_epochs=4)
    report = {c["algorithm"]: c for c in model.fit_report.selection["candidates"]}
    assert report["maybe-overflowing"]["diverged"] == 1 and report["maybe-overflowing"]["value"] == -math.inf
    assert "diverged" not in report["maybe-overflowing:overflow=false"]
    assert model.algorithm == "maybe-overflowing:overflow=false" and np.all(np.isfinite(model.coef))
    assert model.status >= 0  # no divergence reported: the model is the finite candidate's


def test_a_cli_run_diverging_later_keeps_its_last_finite_epoch_and_exits_3(tmp_path):
    """Epochs 1-2 finite, epoch 3 not: the model of epoch 2 is written, the table says it
    diverged, a warning line too, and the exit code is 3 (never a run that looks fine)."""
    class Plugin:
        @calopt.hookimpl
        def register_algorithms(self, register):
            register(_Exploding)

    calopt.registry.plugin_manager.register(Plugin(), name="exploding-plugin")
    try:
        X, y = _imbalanced()
        dump_svmlight_file(X, y, str(tmp_path / "d.svm"))
        model = tmp_path / "m.npz"
        result = runner.invoke(app, ["train", str(tmp_path / "d.svm"), "-a", "exploding", "-l", "hinge",
                                     "--epochs", "5", "--batch-size", "1000", "--model-out", str(model),
                                     "--no-progress"])
    finally:
        calopt.registry.plugin_manager.unregister(name="exploding-plugin")
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines() == [
        "calopt: warning: diverged in epoch 3: non-finite weights; kept epoch 2; exit code 3"]
    assert "diverged" in result.stdout
    saved = LinearModel.load(model)
    assert saved.status == NONFINITE and saved.fit_report.epochs == 2 and np.all(np.isfinite(saved.coef))


def test_ctrl_c_while_the_cli_imports_is_one_line(monkeypatch, capsys):
    """The console script imports the app inside main(): a Ctrl-C there is exit 130, no traceback."""
    import calopt_cli

    class Interrupting:  # a finder that is "interrupted" while calopt_cli.app imports
        def find_spec(self, name, path=None, target=None):
            if name == "calopt_cli.app":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "calopt_cli.app")
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    with pytest.raises(SystemExit) as info:
        calopt_cli.main()
    assert info.value.code == 130
    assert capsys.readouterr().err == "calopt: interrupted\n"

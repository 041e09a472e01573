"""Checkpoints: everything needed to resume an interrupted training run exactly.

A checkpoint holds the algorithm's state (a NamedTuple of arrays and plain numbers,
copied to host NumPy arrays), the algorithm with the step its trial chose, the loop's
position (epochs done, batches done in the next one, the shuffling generator's state
at the start of that epoch), the history so far, the fit options and a fingerprint of
the training data. Resuming regenerates the epoch's permutation from the saved
generator state and skips the batches done, so the final model is the one an
uninterrupted run with the same seed gives.

Like a model file (:mod:`calopt.models.archive`) it is an ``.npz`` of plain arrays plus a JSON
document, written atomically, checksummed and read with ``allow_pickle=False``. The
state's NamedTuple type comes from the algorithm (its ``init``), never from the file,
so loading a checkpoint imports and executes nothing.

:func:`run_resumable` is the training loop with all of this around it, shared by
``calopt.fit`` and ``calopt.fit_multiclass``. A one-vs-rest run that trains one class at
a time holds the current class's checkpoint plus, in ``one_vs_rest``, which class it is
and the models of the classes already finished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import array_api_compat
import numpy as np

from calopt import registry
from calopt.backends import Backend, is_sparse, to_numpy
from calopt.errors import ModelFileError, ParameterError, TrainingInterrupted, one_line
from calopt.models.archive import load_archive, save_archive
from calopt.training.loop import INTERRUPTED, LoopResult, Trainer, run
from calopt.version import __version__

__all__ = ["FORMAT_VERSION", "Checkpoint", "checked_resume", "data_fingerprint", "run_resumable"]

FORMAT = "calopt-checkpoint"
#: 2: the state of the algorithm and of its shared parts (averages), and sample weights in
#: the fingerprint; a version-1 checkpoint cannot be resumed.
FORMAT_VERSION = 2
#: Rows of the training data hashed into its fingerprint (evenly spaced).
_FINGERPRINT_ROWS = 1000


# -- the state tree: NamedTuples of arrays and plain values <-> JSON + named arrays ---------
def _encode(value: Any, arrays: dict[str, np.ndarray], key: str) -> Any:
    """``value`` as JSON, with its arrays moved to host copies in ``arrays`` under ``key…``."""
    if value is None:
        return {"none": None}
    if isinstance(value, (bool, np.bool_)):
        return {"bool": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"int": int(value)}
    if isinstance(value, float):  # np.float64 too
        return {"float": float(value).hex()}  # exact, inf and nan included
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {"fields": list(value._fields),
                "values": [_encode(v, arrays, f"{key}.{i}") for i, v in enumerate(value)]}
    if isinstance(value, (tuple, list)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {kind: [_encode(v, arrays, f"{key}.{i}") for i, v in enumerate(value)]}
    if isinstance(value, (np.ndarray, np.generic)) or array_api_compat.is_array_api_obj(value):
        host = np.array(to_numpy(value), copy=True)
        if host.dtype.hasobject:
            raise ParameterError(f"cannot checkpoint state field {key}: an object array")
        arrays[key] = host
        return {"array": key}
    raise ParameterError(f"cannot checkpoint state field {key}: a {type(value).__name__}")


def _decode(tree: Any, template: Any, arrays: dict[str, np.ndarray], backend: Backend, where: str) -> Any:
    """The value ``tree`` encodes, arrays on ``backend``, NamedTuple types from ``template``."""
    if not isinstance(tree, dict) or len(tree) not in (1, 2):
        raise ModelFileError(f"{where}: malformed state entry {tree!r:.60}")
    if "array" in tree:
        host = arrays.get(tree["array"]) if isinstance(tree["array"], str) else None
        if host is None:
            raise ModelFileError(f"{where}: state array {tree['array']!r} is missing")
        xp = backend.xp
        dtype = getattr(xp, host.dtype.name, None) if host.dtype.kind in "biuf" else None
        if dtype is None:
            raise ModelFileError(f"{where}: state array {tree['array']!r} has dtype {host.dtype}")
        expected = getattr(template, "shape", None)
        if expected is not None and tuple(expected) != host.shape:
            raise ModelFileError(f"{where}: state array {tree['array']!r} has shape {_dims(host.shape)}, this run's "
                                 f"has {_dims(expected)}; resume with the data and options of the interrupted run")
        return backend.asarray(host, dtype=dtype)
    if "fields" in tree:
        fields, values = tree["fields"], tree.get("values")
        expected = getattr(template, "_fields", None)
        if expected is None or list(expected) != fields or not isinstance(values, list) \
                or len(values) != len(fields):
            raise ModelFileError(
                f"{where}: the saved state has fields ({', '.join(map(str, fields))}), the "
                f"algorithm's has ({', '.join(expected or ())}); it was written by another version"
            )
        return type(template)(*(_decode(v, getattr(template, f), arrays, backend, where)
                                for f, v in zip(fields, values)))
    (kind, value), = tree.items()
    if kind in ("tuple", "list") and isinstance(value, list):
        same = isinstance(template, (tuple, list)) and len(template) == len(value)
        items = [_decode(v, template[i] if same else None, arrays, backend, where)
                 for i, v in enumerate(value)]
        return tuple(items) if kind == "tuple" else items
    try:
        return {"none": lambda v: None, "bool": bool, "int": int, "str": str,
                "float": float.fromhex}[kind](value)
    except (KeyError, TypeError, ValueError):
        raise ModelFileError(f"{where}: malformed state entry {tree!r:.60}") from None


def _dims(shape: Any) -> str:
    """A shape for a message: ``300×6``, ``()`` for a scalar."""
    return "×".join(map(str, shape)) or "()"


def _check_generator_state(state: Any, where: str) -> None:
    """Refuse a shuffling generator state NumPy's PCG64 (what the loop draws with) does not take;
    a cluster run's is ``{"workers": [[state, steps], ...]}``."""
    states = [state]
    if isinstance(state, dict) and "workers" in state:
        entries = state["workers"]
        if not isinstance(entries, list) or not all(isinstance(e, list) and len(e) == 2 and isinstance(e[1], int)
                                                    and not isinstance(e[1], bool) and e[1] >= 0 for e in entries):
            raise ModelFileError(f"{where}: rng_state.workers must be a list of [state, steps] pairs")
        states = [entry[0] for entry in entries]
    for one in states:
        if one is None:
            continue
        try:
            np.random.PCG64().state = one
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise ModelFileError(f"{where}: rng_state is not a state of NumPy's PCG64 generator "
                                 f"({one_line(exc, 60)})") from None


def _checksum(arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> str:
    """SHA-256 of the arrays (with their dtypes and shapes: states mix ints and floats) and the
    metadata; model files keep their float64-only checksum so older files still verify."""
    digest = hashlib.sha256()
    for key in sorted(arrays):
        value = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}:{value.dtype.str}:{value.shape}".encode())
        digest.update(value.tobytes())
    digest.update(json.dumps(metadata, sort_keys=True).encode())
    return digest.hexdigest()


def data_fingerprint(X: Any, y: np.ndarray, backend: Backend, scale: np.ndarray | None = None,
                     weight: np.ndarray | None = None) -> dict[str, Any]:
    """Shape and a SHA-256 of evenly spaced rows of ``X``, all labels ``y``, the scaling and the sample weights.

    Cheap for any size (at most 1000 rows leave the device) and enough to tell a
    different training file from the one a checkpoint was written for.
    """
    n, d = int(X.shape[0]), int(X.shape[1])
    rows = np.unique(np.linspace(0, max(n - 1, 0), num=min(n, _FINGERPRINT_ROWS)).astype(np.intp))
    if is_sparse(X):
        sample = np.asarray(X[rows].toarray())
    else:
        sample = to_numpy(backend.xp.take(X, backend.xp.asarray(rows, device=backend.device), axis=0))
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(sample, dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(y, dtype=np.float64).tobytes())
    if scale is not None:
        digest.update(np.ascontiguousarray(scale, dtype=np.float64).tobytes())
    if weight is not None:
        digest.update(np.ascontiguousarray(weight, dtype=np.float64).tobytes())
    return {"shape": [n, d], "sha256": digest.hexdigest()}


def _same_measure(saved: Any, now: Any) -> bool:
    """Whether two measure specs name the same measure (``fbeta``, as checkpoints before the
    sixth session wrote F1, and ``f1``)."""
    try:
        return registry.get_measure(saved) == registry.get_measure(now)
    except Exception:  # noqa: BLE001 - an unknown spec differs, as written
        return False


@dataclass
class Checkpoint:
    """A training run stopped after a batch (or an epoch), on the host, ready to save or resume.

    Build one with :meth:`capture` from the loop's position; ``calopt.fit(...,
    resume=checkpoint_or_path)`` continues it.
    """

    algorithm: str  #: the algorithm's name
    algorithm_params: dict[str, Any]  #: its parameters, the step chosen by the trial included
    state: Any  #: the encoded state tree (see :func:`_encode`)
    epochs: int  #: epochs completed
    batch: int  #: batches done in epoch ``epochs + 1``
    rng_state: dict | None  #: the shuffling generator's state at the start of that epoch
    history: list[dict[str, Any]]
    seconds: float  #: training time so far
    options: dict[str, Any]  #: the fit options a resumed run must repeat
    fingerprint: dict[str, Any]  #: of the training data (:func:`data_fingerprint`)
    epoch_start_state: Any = None  #: encoded state at the start of the epoch (mid-epoch only)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    version: str = ""
    source: str = "checkpoint"  #: where it was read from, for messages
    #: One-vs-rest one class at a time: the class running (``class``, its ``label``), that
    #: class's own run ``options`` and ``fingerprint``, and the ``finished`` classes' models
    #: (their coefficients in ``arrays["finished.coef"]``). None for any other run.
    one_vs_rest: dict[str, Any] | None = None
    #: What the settings selection chose (its report, :meth:`calopt.training.selection.Selection.report`),
    #: so a resumed run does not select again; None without selection.
    selection: dict[str, Any] | None = None

    @classmethod
    def capture(cls, position: Any, algorithm: Any, *, options: dict[str, Any],
                fingerprint: dict[str, Any], selection: dict[str, Any] | None = None) -> Checkpoint:
        """Copy a loop position (a :class:`calopt.training.loop.LoopResult`) to the host."""
        arrays: dict[str, np.ndarray] = {}
        state = _encode(position.state, arrays, "state")
        start = None
        if position.batch and position.epoch_start_state is not None:
            start = _encode(position.epoch_start_state, arrays, "start")
        return cls(algorithm.name, dict(algorithm.params), state, int(position.epochs),
                   int(position.batch), position.rng_state, list(position.history),
                   float(position.seconds), options, fingerprint, start, arrays, __version__,
                   selection=selection)

    # -- resuming -------------------------------------------------------------------
    def make_algorithm(self, like: Any = None) -> Any:
        """The algorithm with the parameters (the step chosen included) of the interrupted run:
        ``like`` (the run's own algorithm object, :meth:`check_algorithm`-ed) with them, else the
        registered one by name."""
        if like is not None:
            self.check_algorithm(like)
            return dataclasses.replace(like, **self.algorithm_params)
        return registry.get("algorithm", self.algorithm, **self.algorithm_params)

    def check_algorithm(self, algorithm: Any) -> None:
        """Refuse a checkpoint of another algorithm, or with other parameters than the run's
        (one-line ParameterError naming the field); a parameter the run leaves unset (None,
        chosen from the data) may hold the value the interrupted run chose."""
        if self.algorithm != algorithm.name:
            raise ParameterError(f"{self.source}: written by algorithm {one_line(repr(self.algorithm), 40)}, "
                                 f"this run trains {algorithm.name!r}; resume with the options of the interrupted run")
        params = dict(algorithm.params)
        for key in sorted(set(params) | set(self.algorithm_params)):
            if key not in params or key not in self.algorithm_params:
                where = "this run's" if key in params else "the checkpoint's"
                raise ParameterError(f"{self.source}: parameter {one_line(key, 40)} of {algorithm.name} is "
                                     f"missing from {where} algorithm; resume with the options of the interrupted run")
            saved, now = self.algorithm_params[key], json.loads(json.dumps(params[key]))
            if now is not None and saved != now:
                raise ParameterError(f"{self.source}: written with {algorithm.name} {key}={one_line(saved, 40)}, "
                                     f"this run has {key}={now}; resume with the options of the interrupted run")

    def check_position(self, algorithm: Any, *, epochs: int, batches: int | None = None,
                       generator: bool = True) -> None:
        """Refuse a position the run cannot continue from (one line naming the field): another
        algorithm, epochs outside 0..``epochs`` (the run's limit), a history of another length,
        a time that is not a finite number ≥ 0, a batch outside 0..``batches`` (one epoch's), a
        batch after the last epoch, a generator state NumPy does not take (or none, when the
        run shuffles with one: ``generator``)."""
        self.check_algorithm(algorithm)
        if not all(isinstance(value, int) and not isinstance(value, bool) for value in (self.epochs, self.batch)):
            raise ModelFileError(f"{self.source}: epochs and batch must be whole numbers, not "
                                 f"{one_line(repr(self.epochs), 20)} and {one_line(repr(self.batch), 20)}")
        if not 0 <= self.epochs <= epochs:
            raise ModelFileError(f"{self.source}: epochs {self.epochs} is outside 0..{epochs} (this run's epochs)")
        if self.batch < 0 or (batches is not None and self.batch > batches):
            bound = "negative" if batches is None else f"outside 0..{batches} (the batches of one epoch)"
            raise ModelFileError(f"{self.source}: batch {self.batch} is {bound}")
        if self.batch and self.epochs == epochs:
            raise ModelFileError(f"{self.source}: batch {self.batch} of epoch {epochs + 1}, after the last epoch "
                                 f"({epochs})")
        if not isinstance(self.history, list) or len(self.history) != self.epochs or \
                not all(isinstance(row, dict) for row in self.history):
            raise ModelFileError(f"{self.source}: history must be a list of one object per epoch done ({self.epochs})")
        if not (isinstance(self.seconds, float) and math.isfinite(self.seconds) and self.seconds >= 0):
            raise ModelFileError(f"{self.source}: seconds must be a finite number ≥ 0, not {self.seconds!r}")
        if generator and self.rng_state is None:
            raise ModelFileError(f"{self.source}: rng_state is missing (the shuffling generator's state)")
        _check_generator_state(self.rng_state, self.source)

    def check(self, options: dict[str, Any], fingerprint: dict[str, Any]) -> None:
        """Refuse to resume with other data or options (one-line ParameterError naming them).

        The classes are compared first, so a multiclass checkpoint given binary data (or
        the reverse) says so.
        """
        for key in sorted(set(self.options) | set(options), key=lambda key: (key != "classes", key)):
            saved, now = self.options.get(key), options.get(key)
            if saved != now and not (key == "measure" and _same_measure(saved, now)):
                raise ParameterError(
                    f"{self.source}: written with {key} {saved!r}, this run has {now!r}; "
                    f"resume with the options of the interrupted run"
                )
        if fingerprint != self.fingerprint:
            shape = "×".join(map(str, self.fingerprint.get("shape", ())))
            raise ParameterError(
                f"{self.source}: the training data differ from those of the interrupted run "
                f"({shape} values, sha256 {str(self.fingerprint.get('sha256'))[:12]}…)"
            )

    def position(self, template: Any, backend: Backend) -> Any:
        """The loop position to pass as ``run(..., resume=...)``, arrays on ``backend``.

        ``template`` is a fresh ``Trainer(algorithm).init(problem)``: it gives the NamedTuple
        types, and a field mismatch is a clear error rather than a wrong resume.
        """
        state = _decode(self.state, template, self.arrays, backend, self.source)
        start = None if self.epoch_start_state is None else _decode(
            self.epoch_start_state, template, self.arrays, backend, self.source)
        return LoopResult(state, self.epochs, self.seconds, INTERRUPTED, "resumed",
                          [dict(row) for row in self.history], self.batch, self.rng_state, start)

    def describe(self) -> str:
        """Where the run stopped, in words: ``epoch 3, after batch 17``."""
        where = f"epoch {self.epochs + 1}, after batch {self.batch}" if self.batch else \
            f"the end of epoch {self.epochs}"
        if self.one_vs_rest is not None:
            part = self.one_vs_rest
            where = f"class {part['label']} ({part['class'] + 1} of {len(self.options['classes'])}), {where}"
        return where

    # -- files ----------------------------------------------------------------------
    def _metadata(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "calopt_version": self.version,
            "algorithm": {"name": self.algorithm, "params": self.algorithm_params},
            "state": self.state,
            "epoch_start_state": self.epoch_start_state,
            "epochs": self.epochs,
            "batch": self.batch,
            "rng_state": self.rng_state,
            "history": self.history,
            "seconds": self.seconds,
            "options": self.options,
            "fingerprint": self.fingerprint,
            "one_vs_rest": self.one_vs_rest,
            "selection": self.selection,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the checkpoint to ``path`` atomically (``.npz``, no pickle)."""
        save_archive(path, self.arrays, self._metadata(), checksum=_checksum)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Checkpoint:
        """Read a checkpoint written by :meth:`save`; any problem is a one-line ModelFileError."""
        path = Path(path)
        arrays, metadata = load_archive(path, format=FORMAT, version=FORMAT_VERSION, checksum=_checksum)
        if metadata.get("format_version") != FORMAT_VERSION:
            raise ModelFileError(f"{path}: checkpoint format version {metadata.get('format_version')} was written "
                                 f"by an older calopt and cannot be resumed by this one; train again")
        try:
            return cls(
                algorithm=str(metadata["algorithm"]["name"]),
                algorithm_params=dict(metadata["algorithm"]["params"]),
                state=metadata["state"],
                epochs=metadata["epochs"],  # checked as whole numbers by check_position, never rounded
                batch=metadata["batch"],
                rng_state=metadata["rng_state"],
                history=list(metadata["history"]),
                seconds=float(metadata["seconds"]),
                options=dict(metadata["options"]),
                fingerprint=dict(metadata["fingerprint"]),
                epoch_start_state=metadata["epoch_start_state"],
                arrays=arrays,
                version=str(metadata["calopt_version"]),
                source=str(path),
                one_vs_rest=metadata.get("one_vs_rest"),
                selection=metadata.get("selection"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"{path}: incomplete checkpoint metadata ({exc})") from None


def checked_resume(checkpoint: Any, checkpoint_every: Any, resume: Any) -> Checkpoint | None:
    """Check a fit's checkpoint options; return the checkpoint to resume (loaded from a path)."""
    if checkpoint_every is not None and not (isinstance(checkpoint_every, int) and checkpoint_every >= 1):
        raise ParameterError(f"checkpoint_every must be a whole number of epochs ≥ 1, got {checkpoint_every!r}")
    if checkpoint_every is not None and checkpoint is None:
        raise ParameterError("checkpoint_every needs a checkpoint path to write to")
    if resume is not None and not isinstance(resume, Checkpoint):
        resume = Checkpoint.load(resume)
    return resume


def run_resumable(
    algorithm: Any,
    problem: Any,
    reader: Any,
    *,
    epochs: int,
    seed: int,
    backend: Backend,
    options: dict[str, Any],
    fingerprint: Callable[[], dict[str, Any]],
    record: Callable[[Any], dict[str, float]] | None = None,
    callback: Callable[[Any], None] | None = None,
    checkpoint: str | os.PathLike | Callable[[Checkpoint], None] | None = None,
    checkpoint_every: int | None = None,
    resume: Checkpoint | None = None,
    interrupt: Callable[[], bool] | None = None,
    selection: dict[str, Any] | None = None,
) -> Any:
    """:func:`calopt.training.loop.run` with checkpoints; the loop's result unless interrupted.

    ``resume`` (a checkpoint already :meth:`~Checkpoint.check`-ed against ``options``
    and ``fingerprint()``) continues where it stopped, once :meth:`~Checkpoint.check_position`
    finds that position within this run (its algorithm, epochs, batch and generator state). ``checkpoint`` (a path, or a
    callable that writes a :class:`Checkpoint`) receives one every ``checkpoint_every``
    epochs and one when ``interrupt()`` turns true, which then raises
    :class:`~calopt.errors.TrainingInterrupted` holding it.
    """
    write = checkpoint if callable(checkpoint) else None
    if checkpoint is not None and write is None:
        def write(saved: Checkpoint) -> None:
            saved.save(checkpoint)

    def capture(position: Any) -> Checkpoint:
        return Checkpoint.capture(position, algorithm, options=options, fingerprint=fingerprint(),
                                  selection=selection)

    if resume is not None:
        n = getattr(reader, "n_samples", None)
        resume.check_position(algorithm, epochs=epochs, batches=-(-n // problem.batch_size)
                              if isinstance(n, int) and n > 0 and problem.batch_size else None)
    result = run(algorithm, problem, reader, epochs=epochs, seed=seed, record=record, callback=callback,
                 interrupt=interrupt,
                 resume=None if resume is None else resume.position(Trainer(algorithm).init(problem), backend),
                 checkpoint=None if write is None else lambda at: write(capture(at)),
                 checkpoint_every=checkpoint_every or 0)
    if result.status != INTERRUPTED:
        return result
    saved = capture(result)
    if write is not None:
        write(saved)
    path = None if checkpoint is None or callable(checkpoint) else checkpoint
    where = f"; checkpoint written to {path}" if path is not None else ""
    raise TrainingInterrupted(f"training interrupted in {saved.describe()}{where}", saved, path)

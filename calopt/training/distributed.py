"""Training on a Dask cluster: ``calopt.fit(..., cluster=client)``; the data stay on the workers.

Each of the W workers holds one shard of the training rows in its own memory: rows
``i::W`` of a file it reads itself, its own files ``i::W`` of a list, or rows ``i::W`` of
arrays scattered once from the client. calopt's own kernels run on each shard (NumPy,
through the algorithms' ``update``); only the state (a few d-vectors) and sums travel per
round, never rows, and the solvers never run on lazy Dask arrays. Two modes, chosen by
the algorithm:

- *exact* (algorithms whose updates only add sums: ``gd``, ``subgradient``, ``lbfgs``): each
  round every worker accumulates the algorithm's sums (loss, gradient, first-round Gram
  matrix) at the broadcast state over its shard; the client adds them and makes the one
  step (for lbfgs: accepts the trial point or halves its step; Spark MLlib's pattern). The
  model equals the single-process one to rounding.
- *local* (mini-batch algorithms: ``spade``, ``stamp``, ``sgd``): each round every worker
  runs ``local_steps`` mini-batch updates (default: one pass over its shard) from the
  broadcast state, and the client averages every state array, primal and dual, and the
  iterate averages (local SGD, Stich 2019; local SGDA for saddle points, Deng & Mahdavi,
  AISTATS 2021). One worker replays the single-process run bit for bit.

A first exact round gathers what the loop needs: the rows, the classes and their
counts, and each feature's max-abs (the scaling). Settings: the cross-fitted selection
needs every fold's model on every shard and is not done; a run is ``select="none"``: every
worker runs the one-pass step trial on its own rows (one pass on 80%, at most
``TRIAL_ROWS``) and sends each candidate's scores on its held-out 20%; the client keeps
the candidate with the best measure on the union, tuned as the single process tunes it. The decision threshold is tuned on the
training rows: each worker sends its scores (8 bytes a row, once, at the end) and the
client cuts them as :func:`~calopt.training.threshold.best_cut` does.

Checkpoints are written at round boundaries (the state, each worker's shuffling
generator and position) and resume like any other. A lost worker: its shard is
rebuilt (read again, or scattered again from the client's arrays) on a surviving
worker and the round is redone from the same broadcast state, so the model is the one an
undisturbed run gives; when that fails again it is a one-line :class:`TrainingError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import itertools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse

from calopt.algorithms import Algorithm, Problem
from calopt.backends import column_max_abs, get_backend, is_sparse, to_numpy
from calopt.errors import DataError, ParameterError, TrainingError, TrainingInterrupted
from calopt.io.batches import ArrayReader
from calopt.io.files import Dataset, align_features, read_data
from calopt.io.labels import binary_classes, encode_like, json_label, label_values
from calopt.measures import confusion_counts
from calopt.models.linear import LinearModel
from calopt.models.report import ClusterReport, DataReading, FitReport
from calopt.training.checkpoint import Checkpoint, data_fingerprint
from calopt.training.loop import INTERRUPTED, NONFINITE, LoopResult, Trainer
from calopt.training.loop import run as loop_run
from calopt.training.plan import FitPlan, RunControl, check_count
from calopt.training.selection import best_candidate, trial_scores
from calopt.training.threshold import best_cut

__all__ = ["EXACT", "LOCAL", "cluster_mode", "connect", "fit_on_cluster"]

EXACT, LOCAL = "exact", "local"
#: Rounds when ``epochs`` is not given: fit's passes without selection (pipeline.DEFAULT_EPOCHS).
DEFAULT_ROUNDS = 10
#: Times a round is tried when workers are lost before it is an error.
ROUND_ATTEMPTS = 3


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ParameterError("training on a Dask cluster needs dask.distributed: "
                             "pip install 'calopt[dask]'") from None
    return distributed


def connect(cluster: Any) -> tuple[Any, bool]:
    """A ``distributed.Client`` for ``cluster`` (a Client, or a scheduler address), and
    whether this call opened it (then the caller closes it)."""
    distributed = _distributed()
    if isinstance(cluster, distributed.Client):
        return cluster, False
    if isinstance(cluster, str) and cluster.strip():
        try:
            return distributed.Client(cluster.strip(), timeout="10s"), True
        except (OSError, TimeoutError, ValueError) as exc:
            raise ParameterError(f"cannot connect to the Dask scheduler at {cluster!r}: "
                                 f"{_one_line(exc)}") from None
    raise ParameterError(f"cluster must be a distributed.Client or a scheduler address, "
                         f"not {type(cluster).__name__}")


def cluster_mode(algorithm: Algorithm) -> str:
    """``exact`` for algorithms whose updates only add sums (``additive``: gd, subgradient,
    lbfgs), ``local`` for mini-batch ones; an algorithm with a data transform or an end-of-pass
    step of its own (amp, slnd) is a ParameterError."""
    kind = type(algorithm)
    own_reader = kind.prepare is not Algorithm.prepare
    if algorithm.multiclass or not algorithm.binary:
        raise ParameterError(f"algorithm {algorithm.name!r} trains several classes at once; "
                             f"a Dask run trains one binary model")
    if algorithm.additive and not own_reader:
        return EXACT
    if not own_reader and kind.end_epoch is Algorithm.end_epoch:
        return LOCAL
    raise ParameterError(f"algorithm {algorithm.name!r} does not run on a Dask cluster; use gd, "
                         f"subgradient or lbfgs (exact rounds), or spade, stamp or sgd (local rounds)")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


# -- what runs on the workers ------------------------------------------------------------------
@dataclass
class Shard:
    """A worker's prepared rows: max-abs scaled features, labels ±1, and its reader (built once)."""

    X: Any
    y: np.ndarray
    dtype: str
    reader: Any = None

    def serve(self) -> ArrayReader:
        if self.reader is None:
            backend = get_backend("numpy", dtype=self.dtype)
            self.reader = ArrayReader(self.X, backend.asarray(self.y), backend.xp, backend.device)
        return self.reader


def _read_shard(source: Any, index: int, count: int, read_options: dict[str, Any]) -> Dataset:
    """Rows ``index::count`` of one file, or the files ``index::count`` of a list (stacked)."""
    if isinstance(source, (str, os.PathLike)):
        data = read_data(source, **read_options)
        return data.like(data.X[index::count], data.labels[index::count])
    parts = [read_data(path, **read_options) for path in list(source)[index::count]]
    width = max(part.n_features for part in parts)
    parts = [align_features(part, width, of=parts[0].source) for part in parts]
    if any(is_sparse(part.X) for part in parts):
        X = scipy.sparse.vstack([scipy.sparse.csr_matrix(part.X) for part in parts], format="csr")
    else:
        X = np.concatenate([part.X for part in parts], axis=0)
    return parts[0].like(X, np.concatenate([part.labels for part in parts]))


def _shard_stats(data: Dataset) -> dict[str, Any]:
    """Rows, width, each label's count and each feature's max |x| of a raw shard."""
    labels, counts = np.unique(data.labels, return_counts=True)
    X = data.X
    maxabs = column_max_abs(X) if X.shape[0] else np.zeros(X.shape[1])
    return {"rows": int(X.shape[0]), "features": int(X.shape[1]), "labels": labels, "counts": counts,
            "maxabs": np.asarray(maxabs, dtype=np.float64), "open_width": data.open_width,
            "zero_based": data.zero_based, "format": data.format, "source": data.source}


def _prepare_shard(data: Dataset, classes: tuple[Any, Any], factors: np.ndarray, n_features: int,
                   dtype: str) -> Shard:
    """The shard scaled by the training data's max-abs ``factors`` and its labels ±1, with the
    arithmetic of :func:`calopt.training.pipeline.prepare` (which imports this module, so it is
    not called here); the one-worker test holds them to the same bits."""
    data = align_features(data, n_features, of="the training data")
    y = encode_like(data.labels, classes, source=f"{data.source} labels")
    backend = get_backend("numpy", dtype=dtype)
    if is_sparse(data.X):
        X = data.X.tocsr().astype(np.dtype(backend.dtype))
        X = (X @ scipy.sparse.diags(1.0 / factors)).tocsr().astype(X.dtype)
    else:
        X = backend.asarray(data.X) / backend.asarray(factors)
    return Shard(X, y, dtype)


def _fingerprint(shard: Shard, factors: np.ndarray) -> dict[str, Any]:
    return data_fingerprint(shard.X, shard.y, get_backend("numpy", dtype=shard.dtype), factors)


def _on_worker(problem: Problem, dtype: str) -> Problem:
    backend = get_backend("numpy", dtype=dtype)
    return problem._replace(xp=backend.xp, dtype=backend.dtype, device=backend.device)


def _trial_scores(shard: Shard, algorithm: Algorithm, problem: Problem, seed: int, name: str,
                  candidates: tuple[Any, ...]) -> tuple[list[np.ndarray | None], np.ndarray, Any]:
    """The step trial of ``select="none"`` on this shard: each candidate's scores on its held-out 20%."""
    backend = get_backend("numpy", dtype=shard.dtype)
    return trial_scores(algorithm, name, candidates, _on_worker(problem, shard.dtype), shard.X, shard.y, None,
                        np.arange(shard.y.size), seed, backend)


def _choose(shards: _Shards, algorithm: Algorithm, problem: Problem, seed: int) -> Algorithm:
    """``algorithm`` with each unset trial tunable chosen as :func:`~calopt.training.selection.choose_settings`
    does, every worker running the trial on its rows: a candidate is judged on the union of the
    workers' held-out rows (one worker: the single-process trial itself)."""
    for tunable in algorithm.tunables:
        if not tunable.trial or getattr(algorithm, tunable.name) is not None:
            continue
        parts = shards.map(_trial_scores, algorithm, problem, seed, tunable.name, tunable.candidates,
                           what="the step trial")
        scores = [None if any(part[0][c] is None for part in parts) else
                  np.concatenate([part[0][c] for part in parts]) for c in range(len(tunable.candidates))]
        algorithm = best_candidate(algorithm, tunable.name, tunable.candidates, scores,
                                   np.concatenate([part[1] for part in parts]), None, problem.measure)
    return algorithm


@np.errstate(over="ignore", invalid="ignore", divide="ignore")
def _exact_round(shard: Shard, algorithm: Algorithm, problem: Problem, state: Any) -> Any:
    """The algorithm's sums over this shard's batches, accumulated into ``state`` (in order)."""
    problem = _on_worker(problem, shard.dtype)
    trainer = Trainer(algorithm)
    for batch in shard.serve().epoch(problem.batch_size, None):
        state = trainer.update(state, batch, problem)
    return state


@np.errstate(over="ignore", invalid="ignore", divide="ignore")
def _local_round(shard: Shard, algorithm: Algorithm, problem: Problem, state: Any,
                 position: tuple[dict, int], steps: int | None) -> tuple[Any, tuple[dict, int]]:
    """``steps`` mini-batch updates (None: to the end of the pass) from ``state`` on this shard.

    ``position`` is the shard's shuffling generator at the start of its current pass and
    the batches done in it, as the loop resumes (:mod:`calopt.training.loop`).
    """
    problem = _on_worker(problem, shard.dtype)
    trainer, reader = Trainer(algorithm), shard.serve()
    per_pass = max(1, math.ceil(reader.n_samples / problem.batch_size))
    rng = np.random.default_rng(0)
    rng.bit_generator.state, skip = position
    done = 0
    while True:
        pass_start = rng.bit_generator.state
        for batch in itertools.islice(reader.epoch(problem.batch_size, rng), skip, None):
            state = trainer.update(state, batch, problem)
            done, skip = done + 1, skip + 1
            if steps is not None and done == steps:
                break
        if skip >= per_pass:  # the pass is over (its end-of-pass hook, as the loop calls it)
            state = trainer.end_epoch(state, reader.full(), problem)
            skip = 0
            if steps is None or done == steps:
                return state, (rng.bit_generator.state, 0)
        else:
            return state, (pass_start, skip)


def _scores(shard: Shard, w: np.ndarray, b: Any) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(to_numpy(shard.X @ w + b), dtype=np.float64), shard.y


# -- combining the workers' states ---------------------------------------------------------
def _sum_deltas(start: Any, states: Sequence[Any]) -> Any:
    """``start`` plus each worker's change to it: the exact sums of an additive ``update``."""
    if start is None:
        return None
    if isinstance(start, tuple):
        combined = [_sum_deltas(field, [state[i] for state in states]) for i, field in enumerate(start)]
        return type(start)(*combined) if hasattr(start, "_fields") else tuple(combined)
    total = start
    for state in states:
        if isinstance(start, np.ndarray):
            with np.errstate(invalid="ignore"):  # inf − inf where a field is unchanged: masked out
                changed = state != start
                total = total + np.where(changed, state - start, 0) if np.any(changed) else total
        elif state != start:
            total = total + (state - start)
    return np.asarray(total, dtype=start.dtype) if isinstance(start, np.ndarray) else total  # 0-d stays an array


def _average(states: Sequence[Any]) -> Any:
    """Every array (and number) of the states averaged; integers (step counts) rounded."""
    first = states[0]
    if len(states) == 1 or first is None or isinstance(first, (bool, str)):
        return first
    if isinstance(first, tuple):
        combined = [_average([state[i] for state in states]) for i in range(len(first))]
        return type(first)(*combined) if hasattr(first, "_fields") else tuple(combined)
    if isinstance(first, (int, np.integer)):
        return int(round(sum(int(s) for s in states) / len(states)))
    total = first
    for state in states[1:]:
        total = total + state
    total = total / len(states)
    return np.asarray(total, dtype=first.dtype) if isinstance(first, np.ndarray) else total  # 0-d stays an array


# -- the run ---------------------------------------------------------------------------------
_LOST = (concurrent.futures.CancelledError, asyncio.CancelledError, OSError, TimeoutError)


#: How long a run waits for a first worker when the cluster lists none (seconds).
WORKER_WAIT = 10.0


class _Shards:
    """The shard futures, one per worker, and how to build each again when its worker is lost."""

    def __init__(self, client: Any, source: Any, labels: Any, read_options: dict[str, Any]):
        self.client, self.source, self.labels, self.read_options = client, source, labels, read_options
        self.workers = sorted(client.scheduler_info()["workers"])
        if not self.workers:  # the client's view of the scheduler may lag (workers (re)connecting)
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except (TimeoutError, OSError):
                pass
            self.workers = sorted(client.scheduler_info()["workers"])
        if not self.workers:
            raise TrainingError(f"the Dask cluster has no workers (none joined within {WORKER_WAIT:g} s)")
        if isinstance(source, (list, tuple)):
            if not source:
                raise ParameterError("no training files given")
            self.workers = self.workers[:len(source)]  # a worker per file at the most
        self.count = len(self.workers)
        self.prepare_args: tuple | None = None
        self.futures = [self._raw(i, self.workers[i]) for i in range(self.count)]

    def _raw(self, i: int, worker: str | None) -> Any:
        target = None if worker is None else [worker]
        if self.labels is None:  # files: the worker reads its own rows
            return self.client.submit(_read_shard, self.source, i, self.count, self.read_options, pure=False,
                                      **({} if worker is None else {"workers": target, "allow_other_workers": True}))
        part = Dataset(self.source[i::self.count], np.asarray(self.labels)[i::self.count])
        return self.client.scatter(part, workers=target, hash=False)

    def prepare(self, *args: Any) -> None:
        self.prepare_args = args
        raw = self.futures
        self.futures = [self.client.submit(_prepare_shard, future, *args, workers=[self.workers[i]],
                                           allow_other_workers=True, pure=False)
                        for i, future in enumerate(raw)]
        self.client.gather(self.futures)  # a reading error surfaces here, once
        del raw

    def rebuild(self) -> None:
        """Build again the shards whose worker was lost, on the workers left."""
        alive = self.client.scheduler_info()["workers"]
        if not alive:
            raise TrainingError("the Dask cluster lost all its workers")
        for i, future in enumerate(self.futures):
            if future.status == "finished":
                continue
            worker = self.workers[i] if self.workers[i] in alive else None
            raw = self._raw(i, worker)
            self.futures[i] = raw if self.prepare_args is None else self.client.submit(
                _prepare_shard, raw, *self.prepare_args, pure=False,
                **({} if worker is None else {"workers": [worker], "allow_other_workers": True}))

    def map(self, function: Callable[..., Any], *args: Any, per_shard: Sequence[tuple] | None = None,
            what: str = "a round") -> list[Any]:
        """``function(shard, *args, *per_shard[i])`` on each shard's worker; a lost worker's round is redone."""
        last = None
        for _ in range(ROUND_ATTEMPTS):
            futures = [self.client.submit(function, shard, *args, *(per_shard[i] if per_shard else ()), pure=False)
                       for i, shard in enumerate(self.futures)]
            try:
                return self.client.gather(futures)
            except _LOST as exc:
                last = exc
                self.rebuild()
            except Exception as exc:
                if type(exc).__name__ != "KilledWorker":
                    raise
                last = exc
                self.rebuild()
        raise TrainingError(f"Dask workers were lost in {what} {ROUND_ATTEMPTS} times "
                            f"({type(last).__name__}: {_one_line(last)})")


def fit_on_cluster(X: Any, y: Any, options: dict[str, Any], *, cluster: Any, dtype: str | None = None,
                   positive: Any = None, local_steps: int | None = None,
                   read_options: dict[str, Any] | None = None) -> LinearModel:
    """Train a binary linear classifier on a Dask cluster (see the module docstring).

    ``X`` is a data file (each worker reads it and keeps rows ``i::W``), a list of files
    (worker i reads files ``i::W``; use this when one file does not fit a worker) read
    with ``read_options`` (:func:`~calopt.io.files.read_data`'s keywords), or an array
    (NumPy or scipy.sparse) with labels ``y``, whose rows ``i::W`` are scattered to worker
    i once. ``local_steps``: mini-batch updates per worker per round in local mode
    (default: one pass over the worker's shard); ``epochs`` counts rounds. ``options``
    are :func:`calopt.fit`'s (it calls this with ``cluster=``); ``select`` must be ``"none"``
    (the step trial on every worker's held-out rows), and ``"auto"`` means it here.
    """
    check_count("local_steps", local_steps)
    select = options.get("select", "auto")
    if str(select).strip().lower() not in ("none", "auto"):
        raise ParameterError(f"select={select!r}: a Dask run does not cross-fit its settings; use select='none' "
                             f"(the step trial on every worker's held-out rows)")
    files = isinstance(X, (str, os.PathLike)) or (isinstance(X, (list, tuple)) and X and
                                                   all(isinstance(p, (str, os.PathLike)) for p in X))
    if files and y is not None:
        raise ParameterError("the labels come from the training files; give y only with arrays")
    if not files and y is None:
        raise ParameterError("y is needed with arrays (or give a file path)")
    if not files and X.shape[0] != np.asarray(to_numpy(y)).shape[0]:
        raise ParameterError(f"X has {X.shape[0]} rows but y has {np.asarray(to_numpy(y)).shape[0]} labels")
    algorithm = options.get("algorithm")
    if isinstance(algorithm, str) and algorithm.strip().lower() == "auto":
        raise ParameterError("algorithm='auto' compares solvers by cross-fitting, which a Dask run does not do; "
                             "name the algorithm")
    plan = FitPlan.resolve(task="direct", **{**options, "select": "none"})
    mode = cluster_mode(plan.components.algorithm)
    if mode == EXACT and local_steps is not None:
        raise ParameterError(f"local_steps is for local rounds; {plan.components.algorithm.name!r} runs exact rounds")
    dtype = dtype or "float64"
    get_backend("numpy", dtype=dtype)  # an unknown dtype: the usual error, before any work
    _distributed()  # its first import is not training time
    started = time.perf_counter()
    client, opened = connect(cluster)
    try:
        arrays = None if files else (X if is_sparse(X) else np.asarray(to_numpy(X)))
        shards = _Shards(client, [os.fspath(p) for p in X] if isinstance(X, (list, tuple)) else
                         (os.fspath(X) if files else arrays),
                         None if files else label_values(to_numpy(y), source="training labels"),
                         dict(read_options or {}))
        return ClusterFit(plan, shards, mode, dtype, local_steps).fit(positive, files, started)
    finally:
        if opened:
            client.close()


@dataclass
class ClusterSurvey:
    """What the first exact round found: the rows, the width, the classes and their counts, the scaling."""

    classes: tuple[Any, Any]
    counts: dict[Any, int]
    n: int
    d: int
    reading: dict[str, Any]
    factors: np.ndarray


class ClusterFit:
    """The plan on Dask shards: the first round's survey, the step trial on every worker, the
    rounds, and the threshold on every worker's scores."""

    def __init__(self, plan: FitPlan, shards: _Shards, mode: str, dtype: str, local_steps: int | None):
        self.plan, self.shards, self.mode, self.dtype, self.local_steps = plan, shards, mode, dtype, local_steps

    def survey(self, positive: Any) -> ClusterSurvey:
        """The first exact round: rows, classes and their counts, the max-abs scaling."""
        shards = self.shards
        stats = shards.map(_shard_stats, what="the first pass")
        distinct = np.unique(np.concatenate([s["labels"] for s in stats]))
        if distinct.size > 2:
            raise ParameterError(f"the training labels have {distinct.size} classes; a Dask run trains two")
        counts: dict[Any, int] = {}
        for s in stats:
            for label, count in zip(s["labels"], s["counts"]):
                counts[label.item()] = counts.get(label.item(), 0) + int(count)
        classes = binary_classes(distinct, [counts[c.item()] for c in distinct], positive=positive,
                                 source="training labels")
        n, d = sum(s["rows"] for s in stats), max(s["features"] for s in stats)
        if len({s["zero_based"] for s in stats}) > 1:
            raise DataError("the training files use different index bases (0 and 1); give zero_based in "
                            "read_options")
        reading = {"format": stats[0]["format"], "zero_based": stats[0]["zero_based"], "n_features": d}
        if any(s["rows"] == 0 for s in stats):
            raise ParameterError(f"{n} rows for {shards.count} workers: a worker would get none")
        factors = np.max(np.stack([s["maxabs"] for s in stats]), axis=0)
        factors = factors if self.plan.scale else np.ones(d)
        factors[~(factors > 0) | ~np.isfinite(factors)] = 1.0
        return ClusterSurvey(classes, counts, n, d, reading, factors)

    def _options(self, found: ClusterSurvey, batch: int) -> dict[str, Any]:
        """What a resumed run must repeat (the checkpoint's options)."""
        plan, components = self.plan, self.plan.components
        return {"measure": plan.measure.spec, "algorithm": components.algorithm.spec, "loss": components.loss.spec,
                "epochs": plan.budget.epochs, "batch_size": batch, "seed": plan.seed, "backend": "numpy",
                "dtype": self.dtype, "scale": plan.scale, "tune_threshold": plan.tune_threshold,
                "classes": [json_label(c) for c in found.classes], "select": "none",
                "cluster": {"mode": self.mode, "workers": self.shards.count, "local_steps": self.local_steps}}

    def fit(self, positive: Any, files: bool, started: float) -> LinearModel:
        plan, shards, dtype, resume = self.plan, self.shards, self.dtype, self.plan.run.resume
        found = self.survey(positive)
        n, d, factors = found.n, found.d, found.factors
        shards.prepare(found.classes, factors, d, dtype)
        prints = shards.map(_fingerprint, factors, what="the fingerprint")
        fingerprint = {"shape": [n, d], "sha256": hashlib.sha256("".join(p["sha256"] for p in prints).encode()
                                                                  ).hexdigest()}
        batch = plan.budget.batch(n)  # n/100 within [32, 1024], full-batch algorithms too (shards sum their batches)
        rounds = plan.budget.passes(DEFAULT_ROUNDS)
        problem = plan.problem(None, n, d, found.counts[found.classes[1]] / n, batch_size=batch, epochs=rounds)
        algorithm = plan.components.algorithm
        algorithm.check_problem(_on_worker(problem, dtype))
        options = self._options(found, batch)
        if resume is not None:
            resume.check(options, fingerprint)
            algorithm = resume.make_algorithm(algorithm)
        else:
            algorithm = _choose(shards, algorithm, problem, plan.seed)
        result = _rounds(shards, algorithm, problem, get_backend("numpy", dtype=dtype), self.mode, rounds, plan.seed,
                         self.local_steps, options, fingerprint, plan.run)
        w, b = result.weights
        if result.status == NONFINITE and result.epochs == 0:
            raise TrainingError(f"training diverged in its first round (non-finite weights) with {algorithm.spec}; "
                                f"a smaller step or another loss may help")
        if not (np.any(w != 0) or np.any(b != 0)):
            raise TrainingError(f"training made no progress: the weights of {algorithm.spec} are still 0 after "
                                f"{result.epochs} rounds")
        threshold, train = _threshold(shards, w, b, plan.measure, plan.tune_threshold)
        if result.history:
            result.history[-1]["train"] = train["value"]
        report = FitReport(epochs=result.epochs, batch_size=batch, seed=plan.seed, backend="numpy", dtype=dtype,
                           scale=plan.scale, tune_threshold=plan.tune_threshold, algorithm_params=algorithm.params,
                           select="none", cluster=ClusterReport(mode=self.mode, workers=shards.count,
                                                                local_steps=self.local_steps, train=train),
                           data=DataReading.from_json(found.reading) if files else None)
        return plan.model(np.asarray(w, dtype=np.float64) / factors, float(b) - threshold, found.classes, report,
                          algorithm=algorithm, scale=factors, threshold=threshold, history=result.history,
                          fit_seconds=time.perf_counter() - started + (resume.seconds if resume else 0.0),
                          status=result.status, message=result.message)


def _threshold(shards: _Shards, w: Any, b: Any, measure: Any, tune: bool) -> tuple[float, dict[str, float]]:
    """The threshold tuned on all training rows (each worker's scores, once; 0 untuned) and the
    training measure, TPR and TNR there (what ``calopt train`` reports for the training data)."""
    parts = shards.map(_scores, w, b, what="the threshold")
    scores = np.concatenate([s for s, _ in parts])
    y = np.concatenate([labels for _, labels in parts])
    threshold = float(best_cut(scores, y, measure)[0]) if tune else 0.0
    predictions = np.where(scores - threshold > 0, 1.0, -1.0)
    tp, fp, tn, fn = confusion_counts(y, predictions, xp=np, dtype=np.float64)
    return threshold, {"value": float(measure.from_counts(tp, fp, tn, fn, xp=np)),
                       "tpr": float(tp / max(tp + fn, 1.0)), "tnr": float(tn / max(tn + fp, 1.0))}


class ShardRounds:
    """The combine hook (:class:`~calopt.training.loop.Rounds`) of a Dask run: one round broadcasts the
    state, runs every shard's pass from it and combines them, exact rounds by the sum of the
    workers' changes (then the end-of-pass step on the client), local rounds by the average."""

    def __init__(self, shards: _Shards, algorithm: Algorithm, problem: Problem, dtype: str, mode: str,
                 local_steps: int | None, positions: list[tuple[dict, int]], done: int = 0):
        self.shards, self.algorithm, self.mode, self.local_steps = shards, algorithm, mode, local_steps
        self.problem, self.host_problem = problem, _on_worker(problem, dtype)  # arrays-free: workers fill it in
        self.trainer, self.positions, self.round = Trainer(algorithm), positions, done  # rounds done before

    def __call__(self, state: Any) -> Any:
        self.round += 1
        what = f"round {self.round}"
        if self.mode == EXACT:
            sums = self.shards.map(_exact_round, self.algorithm, self.problem, state, what=what)
            return self.trainer.end_epoch(_sum_deltas(state, sums), None, self.host_problem)
        results = self.shards.map(_local_round, self.algorithm, self.problem, state, what=what,
                                  per_shard=[(position, self.local_steps) for position in self.positions])
        self.positions = [p for _, p in results]
        return _average([s for s, _ in results])

    def position(self) -> dict | None:
        """Each worker's shuffling generator and place in its pass (local rounds; exact ones have none)."""
        return {"workers": [[p, s] for p, s in self.positions]} if self.mode == LOCAL else None


def _rounds(shards: _Shards, algorithm: Algorithm, problem: Problem, backend: Any, mode: str, rounds: int,
            seed: int, local_steps: int | None, options: dict[str, Any], fingerprint: dict[str, Any],
            run: RunControl) -> LoopResult:
    """The loop of :mod:`calopt.training.loop` with :class:`ShardRounds` as its combine hook, one
    round an epoch; an interrupt at a round boundary saves a checkpoint and raises."""
    # worker i shuffles with its own generator; shard 0's is the seed's own, so one worker
    # replays the single-process run
    positions = [(np.random.default_rng(seed if i == 0 else [seed, i]).bit_generator.state, 0)
                 for i in range(shards.count)]
    template = Trainer(algorithm).init(_on_worker(problem, backend.dtype_name))
    at = None
    if run.resume is not None:
        # a round is an epoch of one "batch"; the workers' generators are saved in local mode only
        run.resume.check_position(algorithm, epochs=rounds, batches=0, generator=mode == LOCAL)
        at = run.resume.position(template, backend)
        saved = (at.rng_state or {}).get("workers") if mode == LOCAL else None
        if saved is not None:
            positions = [(entry[0], int(entry[1])) for entry in saved]
        at = dataclasses.replace(at, rng_state=None)  # the workers' generators are the hook's
    write = run.checkpoint if callable(run.checkpoint) else None
    if run.checkpoint is not None and write is None:
        def write(saved: Checkpoint) -> None:
            saved.save(run.checkpoint)

    def capture(position: LoopResult) -> Checkpoint:
        return Checkpoint.capture(position, algorithm, options=options, fingerprint=fingerprint)

    result = loop_run(algorithm, _on_worker(problem, backend.dtype_name), None, epochs=rounds, state=template,
                      resume=at, callback=run.callback, interrupt=run.interrupt, unit="round",
                      checkpoint=None if write is None else (lambda position: write(capture(position))),
                      checkpoint_every=run.checkpoint_every or 0,
                      rounds=ShardRounds(shards, algorithm, problem, backend.dtype_name, mode, local_steps, positions,
                                         0 if at is None else at.epochs))
    if result.status == INTERRUPTED:
        saved = capture(result)
        if write is not None:
            write(saved)
        path = None if run.checkpoint is None or callable(run.checkpoint) else run.checkpoint
        where = f"; checkpoint written to {path}" if path is not None else ""
        raise TrainingInterrupted(f"training interrupted at {saved.describe()}{where}", saved, path)
    return result

"""Training on a stream: the pipeline of :func:`calopt.fit` over data read part by part.

What changes against the in-memory pipeline (:mod:`calopt.training.pipeline`), each a choice:

1. A first pass (:func:`calopt.io.stream.survey`) counts the rows and classes and finds
   the max-abs scaling, and keeps a seeded uniform sample of the rows (bottom-k on random
   keys): the :data:`SAMPLE_ROWS` with the smallest keys for the step trial, the
   :func:`threshold_rows` with the smallest keys (a superset) for the threshold.
2. Settings are chosen as with ``select="none"``: the algorithm's step scale by the
   one-pass trial (:func:`~calopt.training.selection.choose_settings`) on that sample
   (the trial uses at most 2 × 20 000 rows in memory as well), and ``epochs`` passes
   (default 10). Cross-fitting and the held-out early stopping need the rows in memory
   for every fold model, so ``select="cv:K"``/``"holdout:F"`` are refused on a stream.
3. The loop reads the stream through :class:`~calopt.io.stream.StreamReader`: parts in
   a seeded random order and a bounded shuffle buffer; rows are scaled when served, or, for
   a memory-mapped float32 ``X.npy`` and an algorithm that reads rows only through products
   (SPADE, STAMP: ``Algorithm.products_only``), served as stored with the scale folded into
   those products and shuffled by runs of consecutive rows (:class:`~calopt.io.stream.FoldedRows`).
4. The threshold is tuned as ``select="none"`` does in memory, on the training rows'
   scores (rows the weights were trained on, not held-out ones), for every algorithm
   including the plug-in, which holds no rows out here: first on the threshold sample the
   first pass kept (every row up to :func:`threshold_rows`), whose features are held while
   training. When the sample is not every row and the source is memory-mapped arrays
   (cheap to read again), one more pass finds the best cut of every row's score in
   bounded memory (:func:`window_cut`); text is not parsed again for it. The last history row has
   the training value there; the per-epoch rows have the time and the rows per second,
   not the training value (it would cost a pass per epoch).

The default algorithm is the measure's own stochastic solver (``spade``, ``stamp``), as
for ``partial_fit``: one pass of it is one read of the data, where L-BFGS (``lbfgs``,
accepted) makes one step per pass. Two-class problems, NumPy float64, no sample
weights, no checkpoints: each is a clear error here.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend, get_backend, to_numpy
from calopt.errors import DataError, ParameterError, TrainingError
from calopt.io.labels import encode_binary
from calopt.io.stream import (
    BUFFER_ROWS,
    ChunkSource,
    StreamReader,
    Survey,
    chunk_source,
    is_chunked,
    survey,
    widen,
)
from calopt.models.linear import LinearModel
from calopt.models.report import DataReading, FitReport, StreamReport
from calopt.training.loop import NONFINITE, EpochRecord, run
from calopt.training.pipeline import fit_rows
from calopt.training.plan import FitPlan, check_count
from calopt.training.sampling import RowSample, rare_class, sample_size, smaller_class
from calopt.training.selection import CV_MINORITY, TRIAL_ROWS, choose_settings
from calopt.training.threshold import best_cut, cut_values

__all__ = ["SAMPLE_ROWS", "STREAM_BATCH_ROWS", "THRESHOLD_BYTES", "THRESHOLD_ROWS", "fit_chunks", "fit_stream",
           "folded_scores", "partial_fit_chunks", "threshold_rows", "window_cut"]

#: Rows the first pass keeps for the step trial (which uses at most 2 × TRIAL_ROWS).
SAMPLE_ROWS = 3 * TRIAL_ROWS
#: Training rows whose scores tune the threshold at most: the first pass keeps them (a seeded
#: uniform sample beyond), so the threshold costs no pass of its own; their features as read
#: are held while training, at most :data:`THRESHOLD_BYTES` of them (see :func:`threshold_rows`).
THRESHOLD_ROWS = 1_000_000
#: The most bytes the threshold sample's features take at their peak (see :func:`threshold_rows`).
THRESHOLD_BYTES = 256 << 20
#: The peak bytes of a sample row when the source cannot tell before reading (text, Parquet,
#: chunks): 1 KiB a row as read, times 2.5 (the part-by-part bottom-k holds up to 1.5 times
#: the sample and stacks it with the kept rows when it cuts back).
ROW_BYTES_GUESS = 2.5 * 1024
#: Rows of the threshold sample scored at a time (the scaled float64 copy of that many rows).
SCORE_ROWS = 65_536
#: The batch of a full-batch algorithm on a stream (its batches only accumulate a pass;
#: in memory its batch is the whole data).
STREAM_BATCH_ROWS = 65_536


def fit_stream(source: Any, plan: FitPlan, *, positive: Any = None, buffer_rows: int = BUFFER_ROWS,
               sample_rows: int = SAMPLE_ROWS, progress: Callable[[int, str], None] | None = None,
               found: Survey | None = None) -> LinearModel:
    """Train a binary linear classifier for the plan's measure on a stream of rows (see the module docstring).

    ``source`` is a :class:`~calopt.io.stream.ChunkSource` (:func:`~calopt.io.stream.open_stream`)
    or an iterable of ``(X, y)`` chunks that can be iterated more than once (a list).
    ``buffer_rows`` bounds the shuffle buffer; ``progress(rows, pass_name)`` is called
    after each part of each pass; ``found`` is the source's survey when already made (its labels
    and sample are released once used). :func:`calopt.fit` with ``y`` None resolves the plan
    (``task="direct"``: the measure's own solver by default) and calls this.
    """
    rule = plan.select
    if rule is not None and rule.kind != "none":
        raise ParameterError(f"select={rule}: a stream trains with select='none' (the step trial on a sample, "
                             f"a fixed number of passes); cross-fitting needs the rows in memory")
    check_count("sample_rows", sample_rows)
    if type(plan.components.algorithm).prepare is not Algorithm.prepare:
        raise ParameterError(f"algorithm {plan.components.algorithm.name!r} reads the data its own way and cannot "
                             f"train on a stream")
    return StreamFit(plan, chunk_source(source), buffer_rows, sample_rows, progress).fit(positive, found)


class StreamFit:
    """The plan on a stream: the survey, the step trial on its sample, the loop over a
    :class:`~calopt.io.stream.StreamReader`, the threshold on the kept sample (and a window pass)."""

    def __init__(self, plan: FitPlan, source: ChunkSource, buffer_rows: int, sample_rows: int,
                 progress: Callable[[int, str], None] | None):
        self.plan, self.source, self.buffer_rows, self.sample_rows = plan, source, buffer_rows, sample_rows
        self.progress = progress

    def _survey(self, positive: Any, found: Survey | None) -> tuple[Survey, np.ndarray, tuple[Any, Any], int]:
        """The first pass (or ``found``): the rows, the labels ±1 and classes, and the threshold rows to keep."""
        kept_rows = threshold_rows(self.source) if self.plan.tune_threshold else 0
        found = found or survey(self.source, sample_rows=max(self.sample_rows, kept_rows), seed=self.plan.seed,
                                progress=self.progress)
        if np.unique(found.labels).size > 2:
            raise DataError(f"{np.unique(found.labels).size} classes; streaming trains two-class problems "
                            f"(train one class against the rest in memory, or relabel)", source="training labels")
        y_pm, classes = encode_binary(found.labels, positive=positive, source="training labels")
        found.labels = found.labels[:0]  # encoded: the labels as read are O(n) memory no longer needed
        return found, y_pm, classes, kept_rows

    def _settings(self, found: Survey, reader: StreamReader, problem: Problem, y_pm: np.ndarray,
                  backend: Backend, kept_rows: int) -> tuple[Algorithm, int]:
        """The algorithm with its step chosen on the trial sample, and that sample's rows; the
        threshold's rows (features as read) kept in ``found``, the others released."""
        trial = found.bottom(self.sample_rows)  # the bottom-sample_rows sample of the first pass's keys
        sample = reader.prepared(found.sample[trial] if trial.size < found.sample_index.size else found.sample)
        algorithm = choose_settings(self.plan.components.algorithm, problem, sample, y_pm[found.sample_index[trial]],
                                    np.arange(trial.size), self.plan.seed, backend)
        if self.plan.tune_threshold:
            kept = found.bottom(kept_rows)
            if kept.size < found.sample_index.size:
                found.sample, found.sample_index, found.sample_keys = (found.sample[kept], found.sample_index[kept],
                                                                       found.sample_keys[kept])
        else:
            found.sample = None
        return algorithm, int(trial.size)

    def fit(self, positive: Any, found: Survey | None) -> LinearModel:
        plan, source = self.plan, self.source
        started = time.perf_counter()
        found, y_pm, classes, kept_rows = self._survey(positive, found)
        factors = np.ones(found.n_features) if not plan.scale else found.max_abs.astype(np.float64).copy()
        factors[~(factors > 0) | ~np.isfinite(factors)] = 1.0
        backend = get_backend("numpy", dtype="float64")
        n, d = found.n_rows, found.n_features
        algorithm = plan.components.algorithm
        batch_size = plan.budget.batch_size
        if batch_size is None:  # a full-batch algorithm's batches only accumulate a pass: bounded here
            batch_size = plan.budget.batch(n, [algorithm])
            batch_size = min(batch_size, STREAM_BATCH_ROWS) if algorithm.full_batch else batch_size
        problem = plan.problem(backend, n, d, float(np.mean(y_pm > 0)), batch_size=batch_size,
                               epochs=plan.budget.passes())
        algorithm.check_problem(problem)
        reader = StreamReader(source, found, backend.asarray(y_pm), factors, backend.xp, buffer_rows=self.buffer_rows,
                              progress=self.progress, folded=algorithm.products_only)
        try:  # a memory-mapped X.npy may stay mapped between epochs (StreamReader.keep_mapped)
            algorithm, trial_rows = self._settings(found, reader, problem, y_pm, backend, kept_rows)

            def record(info: EpochRecord) -> dict[str, float]:
                return {"rows_per_second": n * info.epoch / info.seconds if info.seconds > 0 else float("nan")}

            result = run(algorithm, problem, reader, epochs=problem.epochs, seed=plan.seed, record=record,
                         callback=plan.run.callback)
            w, b = result.weights
            if result.status == NONFINITE and result.epochs == 0 or not (np.any(w != 0) or np.any(b != 0)):
                raise TrainingError(f"training made no progress on the stream with {algorithm.spec} (diverged in its "
                                    f"first epoch, or the weights are still 0); a smaller step or another loss may help")
            threshold, train_value, exact_pass = self._threshold(reader, found, y_pm, w, b)
        finally:
            reader.close()
        history = [dict(row) for row in result.history]
        if history and train_value is not None:
            history[-1]["train"] = train_value
        report = FitReport(
            epochs=result.epochs, batch_size=batch_size, seed=plan.seed, backend=backend.name,
            dtype=backend.dtype_name, scale=plan.scale, tune_threshold=plan.tune_threshold,
            algorithm_params=algorithm.params, select="none",
            stream=StreamReport(rows=n, parts=len(found.part_rows), buffer_rows=self.buffer_rows,
                                sample_rows=trial_rows, seekable=source.seekable,
                                threshold_rows=int(found.sample_index.size) if plan.tune_threshold else 0,
                                exact_threshold=exact_pass, passes=1 + result.epochs + exact_pass),
            data=DataReading.from_json(found.reading()))
        w_host, b_host = to_numpy(w).astype(np.float64), float(to_numpy(b))
        return plan.model(w_host / factors, b_host - threshold, classes, report, algorithm=algorithm, scale=factors,
                          threshold=threshold, history=history, fit_seconds=time.perf_counter() - started,
                          status=result.status, message=result.message)

    def _threshold(self, reader: StreamReader, found: Survey, y_pm: np.ndarray, w: Any,
                   b: Any) -> tuple[float, float | None, bool]:
        """The threshold (0 untuned), the training value there, and whether a window pass made it exact.

        As :class:`~calopt.training.pipeline.BinaryTask` on the training rows: the best cut of
        their scores, on the kept sample; then, when the sample is not every row and the source is
        memory-mapped arrays (cheap to read again), :func:`window_cut` over every row.
        """
        if not self.plan.tune_threshold:
            return 0.0, None, False
        scores, labels = _sample_scores(reader, found.sample, w, b), y_pm[found.sample_index]
        found.sample = None
        cut, best = best_cut(scores, labels, self.plan.measure)
        threshold, train_value = float(cut), float(best)
        if scores.size < found.n_rows and self.source.n_rows is not None:
            exact = window_cut(reader, w, b, self.plan.measure, scores, threshold)
            if exact is not None:
                threshold, train_value = exact
            return threshold, train_value, True
        return threshold, train_value, False


def threshold_rows(source: ChunkSource) -> int:
    """The rows of the threshold sample: :data:`THRESHOLD_ROWS`, fewer when their features would
    take more than :data:`THRESHOLD_BYTES` at their peak (``source.sample_row_bytes``, else
    :data:`ROW_BYTES_GUESS`): a dense float32 ``X.npy`` of 100 columns, 671 088 rows; a CSR
    directory of 50 nonzeros a row, 220 752; text, 104 857)."""
    row_bytes = source.sample_row_bytes or ROW_BYTES_GUESS
    return int(max(1, min(THRESHOLD_ROWS, THRESHOLD_BYTES // max(1.0, row_bytes))))


#: The exact cut's window: the share of the rows around the sample's cut whose scores it keeps,
#: at most WINDOW_ROWS of them (see :func:`window_cut`).
WINDOW_SHARE = 0.04
WINDOW_ROWS = 2_000_000


def folded_scores(X: Any, w: np.ndarray, b: Any, scale: np.ndarray) -> np.ndarray:
    """``(X / scale) @ w + b`` as ``X @ (w / scale) + b``: the scaling folded into the weights, so
    rows as read (float32 too, made float64 here) are scored without a scaled copy."""
    folded = w / scale
    if sp.issparse(X) or X.dtype == np.float64:
        return X @ folded + b
    # float32 rows made float64 a block at a time, while in cache
    return np.concatenate([np.asarray(X[start:start + SCORE_ROWS // 4], dtype=np.float64) @ folded + b
                           for start in range(0, X.shape[0], SCORE_ROWS // 4)])


def window_cut(reader: StreamReader, w: np.ndarray, b: Any, measure: Any, sample_scores: np.ndarray,
               sample_cut: float) -> tuple[float, float] | None:
    """The best cut of every training row's score for ``measure``, and its value, with one pass and
    O(window) memory; None when it may lie outside the window (the sample's cut is then kept).

    The window is the scores between the sample's scores ranked :data:`WINDOW_SHARE`/2 of the
    sample below and above ``sample_cut`` (at most :data:`WINDOW_ROWS` rows of the data, in
    expectation). The pass scores each part (:func:`folded_scores`), counts the classes above
    the window and keeps the scores inside it; every cut between two distinct scores inside
    is then evaluated from those counts, as :func:`~calopt.training.threshold.best_cut` does on
    all the scores (the same values at those cuts, the midpoint as the threshold). A best cut
    at the window's edge is not trusted: the best may be beyond it.
    """
    n, y = reader.n_samples, reader.y
    ranked = np.sort(sample_scores)
    half = max(1, int(min(WINDOW_SHARE, WINDOW_ROWS / n) / 2 * ranked.size))
    at = int(np.searchsorted(ranked, sample_cut))
    low, high = ranked[max(0, at - half)], ranked[min(ranked.size - 1, at + half)]
    above_positive = above_negative = 0
    kept_scores, kept_positive = [], []
    for X, start, stop in reader.in_order("threshold", prepare=False):
        scores, positive = folded_scores(X, w, b, reader.scale), y[start:stop] > 0
        above, inside = scores > high, (scores >= low) & (scores <= high)
        above_positive += int(np.count_nonzero(above & positive))
        above_negative += int(np.count_nonzero(above & ~positive))
        kept_scores.append(scores[inside])
        kept_positive.append(positive[inside])
    scores, positive = np.concatenate(kept_scores), np.concatenate(kept_positive)
    del kept_scores, kept_positive
    if scores.size < 2:
        return None
    order = np.argsort(-scores, kind="stable")
    scores, positive = scores[order], positive[order]
    n_positive = int(np.count_nonzero(y > 0))
    values = cut_values(scores[:, None], positive[:, None], np.ones((scores.size, 1)), measure,
                        above=(above_positive, above_negative), totals=(n_positive, n - n_positive))[:, 0]
    k = int(np.argmax(values))
    if k == 0 or k == scores.size:  # at an edge of the window: the best may be beyond it
        return None
    return float((scores[k - 1] + scores[k]) / 2), float(values[k])


def _sample_scores(reader: StreamReader, rows: Any, w: np.ndarray, b: Any) -> np.ndarray:
    """The scores ``X @ w + b`` of the sample's rows scaled as in training, :data:`SCORE_ROWS`
    rows at a time (one product when fewer: the in-memory pipeline's scores, to the bit)."""
    n = int(rows.shape[0])
    if n <= SCORE_ROWS:
        return reader.prepared(rows) @ w + b
    return np.concatenate([reader.prepared(rows[start:start + SCORE_ROWS]) @ w + b
                           for start in range(0, n, SCORE_ROWS)])


#: Options of :func:`calopt.fit` that a stream does not take, and their in-memory defaults.
_IN_MEMORY_ONLY = {"backend": (None, "numpy"), "dtype": (None, "float64"), "device": (None,), "sample_weight": (None,),
                   "eval_set": (None,), "checkpoint": (None,), "checkpoint_every": (None,), "resume": (None,),
                   "interrupt": (None,), "constraints": (None,)}


def fit_chunks(source: Any, options: dict[str, Any], *, positive: Any = None, buffer_rows: int = BUFFER_ROWS,
               sample_rows: int = SAMPLE_ROWS, progress: Callable[[int, str], None] | None = None,
               **in_memory: Any) -> LinearModel:
    """:func:`calopt.fit` called with chunks (``y`` None): ``options`` (the plan's) and ``in_memory``
    checked, the plan resolved, then :func:`fit_stream`.

    ``select="auto"`` (fit's default) trains a large stream on its survey's sample where nothing
    the user chose asks otherwise (:func:`fit_stream_sample`), and means ``"none"`` on the
    stream's own route; ``patience`` and
    ``max_epochs`` belong to the selection and are unused; the options a stream does not
    support (other backends, sample weights, an evaluation set, checkpoints, constraints) are errors.
    """
    if not is_chunked(source):
        raise ParameterError("y is missing: give the labels with X, or X as a chunked source or a list of (X, y) "
                             "chunks")
    given = {**options, **in_memory}
    for name, allowed in _IN_MEMORY_ONLY.items():
        value = given.pop(name, None)
        if not any(value is ok or (isinstance(value, str) and value == ok) for ok in allowed):
            raise ParameterError(f"{name}: not supported when training on a stream of chunks")
    given.pop("patience", None), given.pop("max_epochs", None)
    found = None
    if str(given.get("select", "auto")).strip().lower() == "auto":
        given["select"] = "none"
        if all(given.get(name) is None for name in _USER_CHOICES) and given.get("tune_threshold", True):
            source = chunk_source(source)
            model, found = fit_stream_sample(source, given, positive=positive, buffer_rows=buffer_rows,
                                             sample_rows=sample_rows, progress=progress)
            if model is not None:
                return model
    plan = FitPlan.resolve(task="direct", **given)
    return fit_stream(source, plan, positive=positive, buffer_rows=buffer_rows, sample_rows=sample_rows,
                      progress=progress, found=found)


#: Options that, given, keep a large stream on the stream's own route (:func:`fit_stream_sample`).
_USER_CHOICES = ("algorithm", "loss", "epochs", "batch_size")


def fit_stream_sample(source: ChunkSource, options: dict[str, Any], *, positive: Any = None,
                      buffer_rows: int = BUFFER_ROWS, sample_rows: int = SAMPLE_ROWS,
                      progress: Callable[[int, str], None] | None = None) -> tuple[LinearModel | None, Survey]:
    """A large stream as large arrays are trained (:mod:`calopt.training.sampling`): the survey's
    uniform sample of :func:`~calopt.training.sampling.sample_size` rows (``max(50,000, 1,000 · d)``,
    fewer with few columns) trains the in-memory default (L-BFGS with its
    settings selection, dense features standardized), then one more pass scores every row and
    the threshold is the exact best cut of the measure on the rows the model never saw. Two reads
    of the data in all. A rare class (:func:`~calopt.training.sampling.rare_class`) trains on a
    weighted case-control sample instead, as in memory (:func:`_case_control`).
    Returns (None, the survey) where it does not apply, for :func:`fit_stream`
    to go on with: fewer than twice that many rows, a survey sample smaller than that (rows too
    wide for :func:`threshold_rows`' budget), or other than two classes."""
    started = time.perf_counter()
    found = survey(source, sample_rows=max(sample_rows, threshold_rows(source)),
                   seed=int(options.get("seed") or 0), progress=progress, class_rows=CV_MINORITY)
    counts = np.unique(found.labels, return_counts=True)[1]
    size = sample_size(found.n_rows, found.n_features, int(counts.min()))
    if size is None or found.sample_index.size < size or counts.size != 2:
        return None, found
    y_pm, classes = encode_binary(found.labels, positive=positive, source="training labels")
    trial = found.bottom(size)
    rows = found.sample_index[trial]
    plan = FitPlan.resolve(**{**options, "select": "auto"})
    drawn = _case_control(found, trial, y_pm, size)
    if drawn is None:
        model = fit_rows(found.sample[trial], y_pm[rows], classes, plan, get_backend("numpy", dtype="float64"),
                         started, standardized=True, sampled=True)  # one held-out split, as in memory
    else:  # a rare class: its own sample's rows and the uniform sample's of the other class, weighted
        X, sample = drawn
        rows = sample.sample
        model = fit_rows(X, y_pm[rows], classes, plan, get_backend("numpy", dtype="float64"), started,
                         weight=sample.weight, standardized=True, sampled=True)
    coef, intercept = np.asarray(model.coef, dtype=np.float64), float(model.intercept)
    scores, at = np.empty(found.n_rows), 0
    for part in source.parts():
        stop = at + int(part.X.shape[0])
        part_scores(part.X, coef[:part.X.shape[1]], intercept, scores[at:stop])  # a LIBSVM part may be narrower
        at = stop
        if progress is not None:
            progress(stop, "threshold")
    if drawn is None:
        rest = np.ones(found.n_rows, dtype=bool)
        rest[rows] = False
        sample = RowSample(rows, np.flatnonzero(rest))
    model = sample.cut_scores(model, scores[sample.rest], y_pm, plan.measure)
    report = model.fit_report.replace(  # the survey's sample, not stratified
        subsample={**model.fit_report.subsample, "drawn": "uniform" if drawn is None else "case-control"},
        stream=StreamReport(rows=found.n_rows, parts=len(found.part_rows), buffer_rows=buffer_rows,
                            sample_rows=int(rows.size), seekable=source.seekable,
                            threshold_rows=int(sample.rest.size), exact_threshold=True, passes=2),
        data=DataReading.from_json(found.reading()))
    return dataclasses.replace(model, fit_report=report, fit_seconds=time.perf_counter() - started), found


#: Rows of a dense part converted to float64 at a time by :func:`part_scores`: about 2 MB, in cache.
SCORE_BLOCK_VALUES = 2 ** 18


def part_scores(X: Any, coef: np.ndarray, intercept: float, out: np.ndarray) -> None:
    """``out[:] = X @ coef + intercept`` in float64 for one part's rows X (sparse, or dense).

    Dense rows of another dtype (a memory-mapped float32 ``X.npy``) are converted a block of
    SCORE_BLOCK_VALUES values at a time into one float64 buffer the cache holds, where NumPy's
    product converts the whole part first and writes and reads it again: 0.13 against 0.33 s
    a million rows of 100 columns. The same float64 values and products, but BLAS takes a
    block's last few rows apart from the others: a few hundred rows a million differ in the last
    bit from the whole part's product."""
    if sp.issparse(X) or X.dtype == np.float64 or X.ndim != 2 or X.shape[0] == 0:
        out[:] = X @ coef + intercept
        return
    rows = max(1, SCORE_BLOCK_VALUES // max(int(X.shape[1]), 1))
    buffer = np.empty((min(rows, int(X.shape[0])), int(X.shape[1])))
    for start in range(0, int(X.shape[0]), rows):
        block = X[start:start + rows]
        converted = buffer[:block.shape[0]]
        converted[...] = block
        np.matmul(converted, coef, out=out[start:start + block.shape[0]])
    out += intercept


def _case_control(found: Survey, trial: np.ndarray, y_pm: np.ndarray, size: int) -> tuple[Any, RowSample] | None:
    """Where the smaller class is rare (:func:`~calopt.training.sampling.rare_class`: fewer than
    CV_MINORITY of its rows in the sample; :mod:`calopt.training.sampling`, "A rare class"), the
    case-control sample of a stream: that
    class's rows from the survey's own sample of it (``class_samples``: its rows with the smallest
    keys of their own), the other class's from the uniform sample, ``size`` rows in all; its
    features (as read, in row order) and the :class:`RowSample`. None: the uniform sample serves."""
    small, count = smaller_class(y_pm)
    index = found.sample_index[trial]
    kept = RowSample.rare_rows(y_pm)
    if not rare_class(y_pm.size, found.n_features, count) or kept < 2:
        return None
    rare = next((block for block in found.class_samples if block[1].size and y_pm[block[1][0]] == small), None)
    if rare is None or rare[1].size < kept:
        return None
    rare_X, rare_index, rare_keys = rare
    chosen = np.sort(np.argpartition(rare_keys, kept - 1)[:kept]) if rare_keys.size > kept else np.arange(kept)
    common = trial[y_pm[index] != small]  # the uniform sample's rows of the other class, by their keys
    common = common[np.argsort(found.sample_keys[common], kind="stable")[:size - kept]]
    common = np.sort(common)
    parts = [rare_X[chosen], found.sample[common]]
    X = sp.vstack(parts, format="csr") if any(sp.issparse(p) for p in parts) else np.concatenate(parts)
    rows = np.concatenate([rare_index[chosen], found.sample_index[common]])
    order = np.argsort(rows, kind="stable")
    return X[order], RowSample.case_control(y_pm, rows[order])


def partial_fit_chunks(estimator: Any, chunks: Any, classes: Any = None) -> Any:
    """``estimator.partial_fit`` on each ``(X, y)`` chunk in turn (a one-shot iterator is fine:
    each chunk is used once). A :class:`~calopt.io.stream.ChunkSource` is surveyed first, for
    its width (a LIBSVM file's parts are as wide as their largest index) and, on the first
    call, its classes."""
    if isinstance(chunks, ChunkSource):
        found = survey(chunks)
        if classes is None and not hasattr(estimator, "classes_"):
            classes = np.unique(found.labels)
        chunks = ((widen(part.X, found.n_features), part.labels) for part in chunks.parts())
    for item in chunks:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ParameterError(f"each chunk must be a pair (X, y), not {type(item).__name__}")
        estimator.partial_fit(item[0], item[1], classes=classes)
        classes = None
    return estimator

"""Settings chosen on data the weights do not see.

**Cross-validated selection** (``select="auto"``, ``"cv:K"``, ``"holdout:F"``): an
algorithm's tunable parameters (:class:`calopt.algorithms.Tunable`: the step scale, the
regularisation) and the number of passes are chosen on held-out data, and so is the
decision threshold:

* the rule comes from the data (:func:`resolve_rule`): K-fold cross-fitting below
  :data:`CV_ROWS` rows or when the smaller class has fewer than :data:`CV_MINORITY` rows
  (where one split would leave a few dozen held-out rows of it); one stratified held-out
  fraction otherwise (large data, where K + 1 fits would cost too much);
* for each candidate, K fold models (a fold's held-out rows weigh 0) and the refit model
  (every row) are trained together, in one run of the training loop (:class:`Selector`);
  a ``stackable`` algorithm trains all of them as the columns of one stacked model on the
  same mini-batches, so the per-batch overhead is paid once for all;
* after each pass, each candidate's value is the measure of its out-of-fold scores (every
  row scored by the fold model that did not see it) at their best threshold, and a
  candidate that improved or tied its best keeps its refit model of that pass (a tie goes
  to the later, more trained model: on the wide benchmark this moved the mean margin from
  +0.0133 to +0.0170); training stops when no candidate has improved for ``patience``
  passes (or at ``max_epochs``);
* the model is the best candidate's refit model at its best pass (where candidates tie, the
  one nearest the algorithm's own settings: on tiny data the held-out rows often cannot
  tell them apart, and lbfgs's C = 1 did better there than the grid's first, most
  regularised end), with the threshold that
  predicts positive a share of its training rows (a rate, so it carries over between models
  whose scores differ in scale, which a raw threshold does not): with K folds, the share of
  the rows each fold model trained on that it puts above the best out-of-fold threshold
  (its in-sample share, the mean over the folds: where a model fits its training rows, as
  on sparse text with more features than rows, training rows score higher than new ones,
  and the share the threshold leaves above it on held-out rows would put the refit model's
  threshold too high); with one held-out split (large data), the share of the held-out rows
  above it; under rate constraints the held-out rows' share with K folds too (the rules
  ``benchmarks/constraint_threshold_rules.py`` measured), carried over to the nearest
  threshold that also meets them on the training rows (the pipeline's
  ``SHARE_FEASIBLE``: the pooled out-of-fold scores break ties that the refit model's
  scores keep, so a share can fall across a block of tied scores). On rows with at least as
  many columns as rows the refit model keeps the raw out-of-fold threshold (:meth:`Selector._raw`),
  except on sparse rows trained in their span, where it keeps the out-of-fold positive share,
  cut on its training rows' scores without their own terms
  (:meth:`~calopt.training.rowspace.RowSpace.own_terms`: what it gives rows it did not see).

**The one-pass trial** (``select="none"``, what calopt did before): an unset step scale
is chosen by one pass of each candidate over a stratified subsample, scored on a
held-out 20% of it; the model then trains for the epochs asked and tunes its threshold
on the training data (the spec's practical notes: the step scale decides the result).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend, device, finite_columns, get_backend, is_sparse, namespace, to_numpy
from calopt.components import Component, parse_spec
from calopt.constraints import ConstrainedMeasure
from calopt.errors import ParameterError, TrainingError
from calopt.io.batches import ArrayReader, Batch
from calopt.training.loop import Trainer, run
from calopt.training.rowspace import COORDINATE_BYTES, ENTRY_BYTES
from calopt.training.threshold import best_cut, best_threshold, positive_share, threshold_at_share

__all__ = ["BOOTSTRAP", "CONFIDENCE", "CV_MINORITY", "CV_ROWS", "FOLDS", "HOLDOUT", "MAX_EPOCHS", "PATIENCE",
           "THREAD_BYTES", "TRIAL_ROWS", "Arm", "Candidate", "Rule", "Selection", "SelectionState", "Selector",
           "best_candidate", "choose_settings", "fold_weights", "foldable", "folds_of", "load_fold_splitter",
           "given_parameters", "grid_of", "parse_rule", "pass_bytes", "resolve_rule", "stratified_folds",
           "stratified_split", "take_rows", "trial_scores", "win_probability"]

Array = Any
#: Rows used by the one-pass trial (each candidate gets one pass over at most this many).
TRIAL_ROWS = 20_000
#: Below this many rows in the smaller class the rule is K-fold cross-fitting, from it on
#: one held-out split (with 20% held out, a split then keeps ≥ 100 rows of that class).
CV_MINORITY = 500
#: Below this many rows the training pipeline cross-fits whatever the classes' sizes: K + 1
#: fits of each candidate instead of 2, and the fold models' in-sample share for the threshold.
#: A cost bound: cross-fitting the wide benchmark's six sets with ≥ 500 minority rows took 2-4×
#: the time of one split (ijcnn1 0.8 → 3.3 s) and raised the worst cell of sylva (9,160 rows)
#: from −0.046 to −0.005 and of ada (2,902) from −0.028 to −0.013; on a9a, ijcnn1 and w8a
#: (22,000-35,000 rows) it moved the mean by at most 0.0023, up or down.
CV_ROWS = 20_000
#: K of the K-fold rule.
FOLDS = 5
#: The held-out fraction of the split rule.
HOLDOUT = 0.2
#: Passes at the most when the number of passes is chosen (early stopping caps here).
MAX_EPOCHS = 100
#: Passes without improvement of the best held-out value (over every candidate) before training stops.
PATIENCE = 20
#: ``algorithm="auto"`` keeps the measure's own solver when it beats the plug-in route on at
#: least this share of bootstrap resamples of the held-out rows.
CONFIDENCE = 0.9
#: How much better the raw out-of-fold threshold must do on the folds than the in-sample
#: share before the refit model's threshold follows it (:meth:`Selector._share_fails`). Chosen
#: on the wide benchmark's development half among 0 and 0.02 (0.02 kept its within-0.01 share),
#: then confirmed: on wide dense data (430-2,000 rows × 1,000-5,000 columns) the share's cut had
#: left new rows at a fraction of the positives they needed (test G-mean 0.20 where the route
#: had 0.60), which the folds showed only in part. It had been 0.05, and only where the share's
#: cuts predicted less than half the share on the folds' held-out rows.
TRANSFER_MARGIN = 0.02
#: Bootstrap resamples for that comparison.
BOOTSTRAP = 500
_HOST = get_backend("numpy")


def stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (kept, held out) of labels ``y`` (±1) with ``fraction`` of each class held out."""
    rng = np.random.default_rng(seed)
    side = np.zeros(y.size, dtype=np.int8)  # 1: kept, 2: held out (each side's indices in order, no sort)
    for label in (-1.0, 1.0):
        index = rng.permutation(np.flatnonzero(y == label))
        cut = int(round(fraction * index.size))
        side[index[:cut]] = 2
        side[index[cut:]] = 1
    return np.flatnonzero(side == 1), np.flatnonzero(side == 2)


def take_rows(X: Any, index: np.ndarray, backend: Backend) -> Any:
    """The rows ``index`` of X (a backend array, or scipy.sparse on NumPy)."""
    if is_sparse(X):
        return X[index]
    return backend.xp.take(X, backend.xp.asarray(index, device=backend.device), axis=0)


def given_parameters(spec: Any) -> set[str]:
    """The parameters a user fixed: the keys of a spec string, or the fields of a component
    object that differ from their defaults. Tunables among them are not searched."""
    if isinstance(spec, Component):
        return {name for name, value in spec.params.items() if value != spec.param_defaults()[name]}
    if isinstance(spec, str):
        return set(parse_spec(spec)[1])
    return set()


# -- the rule ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """How settings are chosen: ``cv`` (K folds), ``holdout`` (one split), or ``none`` (the trial)."""

    kind: str
    folds: int = 0
    fraction: float = 0.0

    def __str__(self) -> str:
        return {"cv": f"cv:{self.folds}", "holdout": f"holdout:{self.fraction:g}"}.get(self.kind, "none")


def parse_rule(text: str | Rule) -> Rule | None:
    """``"cv:5"``, ``"holdout:0.2"``, ``"none"`` as a :class:`Rule`; ``"auto"`` as None (from the data)."""
    if isinstance(text, Rule):
        return text
    kind, _, value = str(text).strip().lower().partition(":")
    try:
        if kind == "auto" and not value:
            return None
        if kind == "none" and not value:
            return Rule("none")
        if kind == "cv":
            folds = int(value) if value else FOLDS
            if folds >= 2:
                return Rule("cv", folds=folds)
        elif kind == "holdout":
            fraction = float(value) if value else HOLDOUT
            if 0 < fraction < 1:
                return Rule("holdout", fraction=fraction)
    except ValueError:
        pass
    raise ParameterError(f"select={text!r}: expected auto, none, cv:K (K ≥ 2) or holdout:F (0 < F < 1)")


def resolve_rule(rule: Rule | None, y: np.ndarray, cv_rows: int = 0) -> Rule:
    """The rule for labels ``y`` (±1): as given, else K-fold below :data:`CV_MINORITY` rows in
    the smaller class or below ``cv_rows`` rows (the training pipeline passes :data:`CV_ROWS`),
    one held-out split otherwise. Rows with at least as many features as there are rows, which
    a model can fit, no longer take K folds at any size (they did until the fifth session, for
    the fold models' in-sample share): one split's fold model gives that share too
    (:class:`Selector`), at a third of the models. A given rule must leave each fold a row of
    that class; the automatic one takes fewer folds when it has fewer than K rows, and is
    ``none`` (nothing can be held out) when it has one."""
    minority = int(min(np.sum(y > 0), np.sum(y <= 0)))
    if rule is None:  # K = 5, or as many folds as that class has rows (none below 2)
        if minority < 2:
            return Rule("none")
        small = minority < CV_MINORITY or y.size < cv_rows
        rule = Rule("cv", folds=min(FOLDS, minority)) if small else Rule("holdout", fraction=HOLDOUT)
    if rule.kind == "cv" and rule.folds > minority:
        raise ParameterError(f"select={rule}: the smaller class has {minority} rows, fewer than the folds")
    if rule.kind == "holdout" and min(round(rule.fraction * minority), minority - round(rule.fraction * minority)) < 1:
        raise ParameterError(f"select={rule}: the smaller class has {minority} rows, too few to hold some out")
    return rule


def foldable(algorithm: Algorithm) -> bool:
    """Whether the selection can train ``algorithm`` on its folds: the selection serves the
    batches (every model's fold weights as sample weights), so an algorithm with a reader of
    its own (``prepare`` overridden, such as SLND's balanced, preconditioned one) cannot."""
    return type(algorithm).prepare is Algorithm.prepare


def load_fold_splitter() -> None:
    """Import scikit-learn's fold splitter (:func:`folds_of`) now, if it is not yet.

    Its first import (scikit-learn, SciPy's statistics, joblib: about a second, many under
    load) is not training: the fits call this before their clock starts, so that
    ``fit_seconds`` counts the fit alone, while ``import calopt`` stays without it.
    """
    import sklearn.model_selection  # noqa: F401


def folds_of(y: np.ndarray, rule: Rule, seed: int) -> np.ndarray:
    """The fold of each row (0..K−1; a split: 0 for the held-out rows, −1 for the others)."""
    if rule.kind == "holdout":
        _, held = stratified_split(y, rule.fraction, seed)
        fold = np.full(y.size, -1)
        fold[held] = 0
        return fold
    return stratified_folds(y > 0, rule.folds, seed)


def stratified_folds(labels: np.ndarray, k: int, seed: int) -> np.ndarray:
    """The fold (0..k−1) of each row, ``k`` folds stratified by ``labels`` (scikit-learn's
    shuffled ``StratifiedKFold``): the binary selection's and the K-class rule's cross-fitting.

    When every class has k rows or more, its folds are made here the way ``StratifiedKFold``
    makes them (classes in order of first appearance, each class's fold sizes dealt round-robin
    over the sorted labels, each class's folds shuffled by ``RandomState(seed)``; the same folds,
    tests/test_selection.py checks, without its input checks, a few tenths of a millisecond a
    fit); else ``StratifiedKFold`` itself, which warns or refuses."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    counts = np.bincount(inverse)
    if counts.min() >= k:
        _, appearance = np.unique(first, return_inverse=True)
        encoded = appearance[inverse.ravel()]
        ordered = np.sort(encoded)
        allocation = np.stack([np.bincount(ordered[i::k], minlength=first.size) for i in range(k)])
        rng = np.random.RandomState(seed)
        fold = np.empty(labels.size, dtype=np.int64)
        for c in range(first.size):
            folds_of_class = np.repeat(np.arange(k), allocation[:, c])
            rng.shuffle(folds_of_class)
            fold[encoded == c] = folds_of_class
        return fold
    from sklearn.model_selection import StratifiedKFold

    fold = np.empty(labels.size, dtype=np.int64)
    for f, (_, held) in enumerate(StratifiedKFold(k, shuffle=True, random_state=seed).split(
            np.zeros(labels.size), labels)):
        fold[held] = f
    return fold


def win_probability(y: np.ndarray, first: np.ndarray, second: np.ndarray, measure: Any,
                    weight: np.ndarray | None = None, *, resamples: int = BOOTSTRAP, seed: int = 0) -> float:
    """How often predictions ``first`` score strictly above ``second`` (``measure``; labels and
    predictions positive where > 0) on paired bootstrap resamples of the rows.

    A resample gives each row a Poisson(1) count (times its sample weight). The rows fall in
    eight kinds (label, each prediction); without weights a kind's resampled count is
    Poisson(its size), so a resample costs eight draws whatever the number of rows.
    """
    kind = (y > 0) * 4 + (first > 0) * 2 + (second > 0)  # (rows,) in 0..7
    rng = np.random.default_rng(seed)
    if weight is None:
        counts = rng.poisson(np.bincount(kind, minlength=8), size=(resamples, 8)).astype(np.float64)
    else:
        counts = np.zeros((resamples, 8))
        for start in range(0, kind.size, 4096):  # a (resamples, 4096) block at a time
            rows = slice(start, start + 4096)
            draws = rng.poisson(1.0, size=(resamples, kind[rows].size)) * weight[rows]
            counts += draws @ (kind[rows][:, None] == np.arange(8)[None, :])
    counts = counts.reshape(resamples, 2, 2, 2)  # (resample, label, first's prediction, second's)
    values = []
    for axis in (3, 2):  # sum out the other one's prediction
        table = counts.sum(axis=axis)  # (resample, label, prediction)
        tp, fn, fp, tn = table[:, 1, 1], table[:, 1, 0], table[:, 0, 1], table[:, 0, 0]
        values.append(np.asarray(measure.from_counts(tp, fp, tn, fn, xp=_HOST.xp), dtype=np.float64))
    return float(np.mean(values[0] > values[1]))


# -- cross-validated selection --------------------------------------------------------------
def grid_of(algorithm: Algorithm, fixed: set[str] | frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Every combination of the candidates of the tunables the user did not fix."""
    free = [tunable for tunable in algorithm.tunables if tunable.name not in fixed]
    if not free:
        return [{}]
    return [dict(zip((t.name for t in free), values)) for values in itertools.product(*(t.candidates for t in free))]


_NOT_SET = object()  # a tunable the algorithm has no value for


def grid_distance(algorithm: Algorithm, grid: list[dict[str, Any]]) -> np.ndarray:
    """(candidates,): how far each candidate's settings are from the algorithm's own, in steps
    of the grid, summed over the tunables: from the algorithm's value of a tunable where its
    candidates hold it (lbfgs ``C = 1``, gd ``l2 = 1e-6``), else from their middle (a step
    scale the one-pass trial would choose)."""
    anchors = {}
    for tunable in algorithm.tunables:
        own = getattr(algorithm, tunable.name, _NOT_SET)
        anchors[tunable.name] = (tunable.candidates, tunable.candidates.index(own) if own in tunable.candidates
                                 else (len(tunable.candidates) - 1) / 2)
    return np.array([sum(abs(anchors[name][0].index(value) - anchors[name][1]) for name, value in settings.items())
                     for settings in grid], dtype=np.float64)


def nearest_default_best(values: Any, distance: np.ndarray) -> int:
    """The index of the best of ``values``; ties go to the candidate nearest the algorithm's own
    settings (the smallest ``distance``, :func:`grid_distance`), then to the first. Where the
    held-out rows cannot tell candidates apart (a few positives, separable classes), the
    default stands (for lbfgs ``C = 1``, scikit-learn's), not the grid's first, most
    regularised end."""
    values = np.asarray(values, dtype=np.float64)
    tied = np.flatnonzero(values == values.max())
    return int(tied[np.argmin(distance[tied])])


def fold_weights(folds: np.ndarray, K: int, weight: np.ndarray | None) -> np.ndarray:
    """(n, K + 1): column k trains without fold k, column K (the refit) on every row; each column
    the sample weights (1 without) times its rows, rescaled to mean 1 over all rows."""
    user = np.ones(folds.size) if weight is None else weight
    columns = np.stack([folds != k for k in range(K)] + [np.ones(folds.size, dtype=bool)], axis=1) * user[:, None]
    return columns / np.mean(columns, axis=0)


def by_candidate(entries: int, d: int, models: int) -> bool:
    """Whether a full-batch stacked algorithm trains each candidate's ``models`` in a trainer of
    their own: where its own work a pass over a candidate's models (L-BFGS's recursion over
    their d coordinates) outweighs reading the ``entries`` of X, which each trainer then does
    again (text, wide data), so that a converged candidate's trainer can stop. Else one trainer
    reads X once a pass for every candidate (dense rows of a few hundred columns)."""
    return ENTRY_BYTES * entries <= COORDINATE_BYTES * d * models


#: A pass's work (:func:`pass_bytes`) from which the trainers of candidates that each train in their own
#: (:func:`by_candidate`) step in threads. Below it the threads took longer than one after the other: a
#: pass of a few thousand columns is mostly short NumPy calls that hold the GIL, so two threads wait on
#: each other instead of overlapping (three trainers of six text models: 14-15 against 9-10 ms a
#: pass). Chosen between the text sets of the size benchmark (in-process alternation, medians of 6
#: fits: sentences, 8.6 MB a pass, 0.88 of the threads' time without them; SMS spam, 15 MB, 1.18;
#: synthetic 4,000 × 7,000, 15 MB, 1.19) and confirmed on synthetic sparse rows of 5.8 and 9.1 MB
#: (0.84, 0.81) and 12.5 and 19.7 MB (1.04, 1.05). The models are the same either way.
THREAD_BYTES = 12_000_000


def pass_bytes(entries: int, d: int, models: int) -> int:
    """The bytes a full-batch pass of ``models`` stacked L-BFGS models moves (the cost model of
    :func:`by_candidate`): X's ``entries`` read twice, and the two-loop recursion over d coordinates."""
    return ENTRY_BYTES * entries + COORDINATE_BYTES * d * models


def trains_by_candidate(algorithm: Algorithm, entries: int, d: int, models: int) -> bool:
    """Whether :meth:`Arm.build` gives each of ``algorithm``'s candidates a trainer of its own: a
    stackable full-batch algorithm (L-BFGS) where :func:`by_candidate` holds."""
    return algorithm.stackable and algorithm.full_batch and by_candidate(entries, d, models)


@functools.lru_cache(maxsize=None)
def trainer_pool() -> ThreadPoolExecutor | None:
    """The threads that step an arm's trainers at once (:meth:`Arm.update`), one per core this
    process may run on; None on one core. Made once, on first use, and kept (idle threads cost
    nothing): a full-batch pass is a few milliseconds, so a pool a fit would be a noticeable
    share of the threads' gain on small data."""
    cores = trainer_cores()
    return ThreadPoolExecutor(cores, thread_name_prefix="calopt-trainer") if cores > 1 else None


def trainer_cores() -> int:
    """The cores this process may run on: :func:`trainer_pool`'s threads."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


# A forked child inherits the pool without its threads (work given to it would wait forever):
# the child makes its own on first use.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=trainer_pool.cache_clear)


@dataclass
class Arm:
    """One algorithm under selection: its candidates (the grid) × (K fold models + the refit).

    Column ``c·(K+1) + j`` of the arm's models is candidate c's model j. A stackable algorithm
    trains them as the columns of stacked models: all S·(K+1) in one trainer (X read once a
    pass for all of them), or, for a full-batch algorithm (L-BFGS) whose own work a pass
    outweighs reading X (:func:`by_candidate`), a candidate's K + 1 per trainer, so a candidate
    whose models have all converged stops costing passes (:meth:`Selector._retire`). Any other
    trains them one by one.
    """

    algorithm: Algorithm
    loss: Any
    grid: list[dict[str, Any]]
    problem: Problem  #: the problem of one trainer (its loss, n_models: the columns it trains)
    trainers: list[Trainer] = field(default_factory=list)
    K: int = 1  #: folds (a held-out split: 1); each candidate has K fold models and a refit one
    #: the arm's columns each trainer trains, (start, stop)
    spans: list[tuple[int, int]] = field(default_factory=list)
    #: whether a full-batch algorithm's trainers step in threads (:meth:`_each`): where each one's pass
    #: moves at least :data:`THREAD_BYTES`
    threaded: bool = True

    @classmethod
    def build(cls, algorithm: Algorithm, loss: Any, grid: list[dict[str, Any]], problem: Problem, K: int,
              backend: Backend, max_weight: float, entries: int) -> Arm:
        """The arm's trainers; ``entries``: the stored entries of the training rows (for :func:`by_candidate`)."""
        S, xp, width = len(grid), backend.xp, K + 1
        if algorithm.stackable:
            split = trains_by_candidate(algorithm, entries, problem.n_features, width)
            groups = [grid[c:c + 1] for c in range(S)] if split else [grid]
            trainers = []
            for group in groups:
                settings = {}
                for name in grid[0]:  # None (no ball) is inf in a stacked run
                    values = np.repeat([math.inf if c[name] is None else c[name] for c in group], width)
                    settings[name] = xp.asarray(values, dtype=backend.dtype, device=backend.device)
                trainers.append(Trainer(algorithm.stacked(settings)))
            per = width * len(groups[0])
        else:
            trainers = [Trainer(dataclasses.replace(algorithm, **settings)) for settings in grid for _ in range(width)]
            per = 1
        problem = problem._replace(loss=loss, max_weight=max_weight, n_models=per if algorithm.stackable else 1)
        threaded = not algorithm.stackable or pass_bytes(entries, problem.n_features, per) >= THREAD_BYTES
        return cls(algorithm, loss, grid, problem, trainers, K, [(j * per, (j + 1) * per) for j in range(len(trainers))],
                   threaded)

    def trainers_of(self, candidate: int) -> list[int]:
        """The trainers that train candidate's models."""
        first, last = candidate * (self.K + 1), (candidate + 1) * (self.K + 1)
        return [j for j, (start, stop) in enumerate(self.spans) if start < last and first < stop]

    def init(self) -> Any:
        return tuple(trainer.init(self.problem) for trainer in self.trainers)

    def _batches(self, batch: Batch) -> list[Batch]:
        """The batch for each trainer: its columns of the arm's weights (B, S·(K+1)), or one column."""
        X, y, weight = batch
        if len(self.trainers) == 1:
            return [Batch(X, y, weight)]
        return [Batch(X, y, weight[:, start] if stop == start + 1 else weight[:, start:stop])
                for start, stop in self.spans]

    def update(self, states: Any, batch: Batch, retired: list[bool]) -> Any:
        """Each trainer's update, but for the ``retired`` ones (their states kept as they are)."""
        return self._each(lambda trainer, state, part: trainer.update(state, part, self.problem), states,
                          self._batches(batch), retired)

    def end_epoch(self, states: Any, data: Batch, retired: list[bool]) -> Any:
        return self._each(lambda trainer, state, part: trainer.end_epoch(state, part, self.problem), states,
                          self._batches(data), retired)

    def _each(self, step: Any, states: Any, parts: list[Batch], retired: list[bool]) -> tuple:
        """``step(trainer, state, part)`` of each trainer not ``retired`` (the others' states as they
        are). A full-batch algorithm's trainers (L-BFGS split by candidate) step at once in
        :func:`trainer_pool`'s threads: NumPy's kernels and SciPy's sparse products release the
        GIL, and each trainer's state is its own, so the states are the same to the bit in any
        order (SMS spam text, 3 trainers of 6 models on 2 cores: about a fifth less time a
        fit), where each trainer's pass moves :data:`THREAD_BYTES` or more (``threaded``). A
        mini-batch algorithm's steps are too short to gain from threads."""
        live = [j for j, done in enumerate(retired) if not done]
        pool = trainer_pool() if self.algorithm.full_batch and self.threaded and len(live) > 1 else None
        if pool is None:
            stepped = {j: step(self.trainers[j], states[j], parts[j]) for j in live}
        else:
            stepped = dict(zip(live, pool.map(lambda j: step(self.trainers[j], states[j], parts[j]), live)))
        return tuple(stepped.get(j, state) for j, state in enumerate(states))

    def describe(self, states: Any, candidate: int) -> dict[str, float]:
        """The numbers ``describe_state`` gives for candidate's refit model (its objective, …)."""
        column = candidate * (self.K + 1) + self.K
        j = next(j for j, (start, stop) in enumerate(self.spans) if start <= column < stop)
        described = self.trainers[j].describe_state(states[j])
        within = column - self.spans[j][0]
        if self.spans[j][1] - self.spans[j][0] == 1:
            return {k: float(v) for k, v in described.items() if getattr(v, "ndim", 0) == 0}
        return {k: float(v[within]) if getattr(v, "ndim", 0) == 1 else float(v)
                for k, v in described.items() if getattr(v, "ndim", 0) <= 1}

    def _columns(self, states: Any, candidates: list[int], xp: Any, part: Any) -> list[Array]:
        """``part(trainer, state)`` (an array whose last axis is the trainer's columns, or one
        column without it) of the trainers of ``candidates``, cut to their columns, in order."""
        pieces = []
        for c in candidates:
            first, last = c * (self.K + 1), (c + 1) * (self.K + 1)
            for j in self.trainers_of(c):
                start, stop = self.spans[j]
                got = part(self.trainers[j], states[j])
                if got is None:
                    return []
                if stop == start + 1:  # one model: (d,) weights, a 0-d (or Python float) intercept
                    got = xp.expand_dims(xp.asarray(got), axis=-1)
                if (start, stop) != (first, last):
                    got = got[..., max(first, start) - start:min(last, stop) - start]
                pieces.append(got)
        return pieces

    def weights(self, states: Any, xp: Any, candidates: list[int] | None = None) -> tuple[Array, Array]:
        """The models of ``candidates`` (every one by default): w (d, ·), b (·,), candidate-major,
        K + 1 columns each."""
        candidates = list(range(len(self.grid))) if candidates is None else candidates
        if len(self.trainers) == 1 and len(candidates) == len(self.grid):
            return self.trainers[0].weights(states[0])
        models: dict[int, tuple[Array, Array]] = {}  # each trainer's (w, b) once (a copy each, for lbfgs)

        def model(trainer: Trainer, state: Any) -> tuple[Array, Array]:
            key = id(state)
            if key not in models:
                models[key] = trainer.weights(state)
            return models[key]

        w = self._columns(states, candidates, xp, lambda trainer, state: model(trainer, state)[0])
        b = self._columns(states, candidates, xp, lambda trainer, state: model(trainer, state)[1])
        return xp.concat(w, axis=-1), xp.concat(b, axis=-1)

    def output_scores(self, states: Any, candidates: list[int]) -> Array | None:
        """The scores X·w + b of every training row by the models of ``candidates`` at
        :meth:`weights`, (n, ·), where the algorithm kept them from the pass that evaluated those
        weights (full-batch L-BFGS); else None."""
        def kept(trainer: Trainer, state: Any) -> Array | None:
            get = None if trainer.chain.parts else getattr(trainer.algorithm, "output_scores", None)
            scores = None if get is None else get(state.algorithm)
            return scores if scores is not None and scores.ndim == 2 else None

        if len(self.trainers) == 1 and len(candidates) == len(self.grid):  # one trainer, every column
            return kept(self.trainers[0], states[0])
        pieces = self._columns(states, candidates, None, kept) if self.spans[0][1] - self.spans[0][0] > 1 else []
        if not pieces:
            return None
        return pieces[0] if len(pieces) == 1 else namespace(pieces[0]).concat(pieces, axis=-1)


class SelectionState(NamedTuple):
    """The arms' states, and each candidate's best held-out pass with its refit model then."""

    arms: tuple
    values: list  #: best held-out value of each candidate (every arm's, in order)
    epochs: list  #: the pass that reached it
    thresholds: list  #: the best threshold of the out-of-fold scores there
    shares: list  #: the positive share the refit model's threshold keeps (:meth:`Selector._score`)
    #: (held-out rows, candidates, K) with K folds: every row scored by every fold model at each
    #: candidate's best pass, for :meth:`Selector._share_fails` at the end; (0,) with one split
    seen: Array
    coef: Array  #: (d, candidates): each candidate's refit model at that pass
    intercept: Array  #: (candidates,)
    scores: Array  #: (held-out rows, candidates): the out-of-fold scores there (each row by the model that did not see it)
    best: float  #: the best held-out value so far
    stale: int  #: passes since it last improved
    passes: int  #: passes done
    diverged: list  #: the pass where each candidate's weights first were non-finite (0: never)
    #: per arm, per trainer: whether it has stopped (its models converged by their algorithm's own
    #: test: :meth:`Selector._retire`); its models then stay as they are
    retired: tuple = ()


class Selector:
    """The settings selection, as an algorithm the one training loop runs.

    Each pass updates every arm's models on the same mini-batches; at the end of the pass
    (:meth:`end_epoch`) the fold models score their held-out rows, each candidate's value
    is the measure of its out-of-fold scores at their best threshold, and a candidate
    that improved or tied its best keeps its refit model of that pass. The loop stops when the best value
    over all candidates has not improved for ``patience`` passes, or every candidate
    diverged (:meth:`converged`); the model is the chosen candidate's refit model at its
    best pass (:meth:`best_index`). With ``latest`` (the number of passes given) each
    candidate keeps its latest pass instead. Everything lives in the state, so a run is
    checkpointed and resumed like any other.
    """

    def __init__(self, arms: list[Arm], rule: Rule, folds: np.ndarray, X: Any, y: np.ndarray,
                 weight: np.ndarray | None, measure: Any, backend: Backend, *, patience: int | None,
                 latest: bool = False, confidence: float = CONFIDENCE, wide: bool = False,
                 own_terms: Callable[[Any], Any] | None = None):
        self._chosen: tuple | None = None  # (state key, best_index) of the last call
        #: the training rows have at least as many (present) columns as rows: a model can separate
        #: them, and with K folds the refit model keeps the raw out-of-fold threshold (:meth:`_raw`)
        self.wide = bool(wide)
        #: the rows are sparse and trained in their span, where the training rows' scores without
        #: their own terms stand for new rows' (:meth:`~calopt.training.rowspace.RowSpace.own_terms`):
        #: there the refit model keeps the out-of-fold positive share instead (:meth:`chosen`); the
        #: function of a model's weights that gives those terms, or None
        self.own_terms = own_terms
        self.confidence = confidence  #: how sure the bootstrap must be that the first arm beats the last
        self.arms, self.rule, self.folds, self.measure, self.backend = arms, rule, folds, measure, backend
        self.patience = patience
        #: keep each candidate's latest pass rather than its best (the number of passes is given)
        self.latest = latest
        self.K = rule.folds if rule.kind == "cv" else 1
        self.base = fold_weights(folds, self.K, weight)  # (n, K + 1)
        held = np.flatnonzero(folds >= 0)
        self.X_held = X if held.size == y.size else take_rows(X, held, backend)
        #: the held rows among the training rows (device indices), None where they are all of them
        self.held_index = None if held.size == y.size else backend.xp.asarray(held, device=backend.device)
        self.y_held = backend.asarray(y[held])
        self.w_held = None if weight is None else backend.asarray(weight[held])
        # (rows, 1, K + 1): 1 where the row is held out from fold k; 0 for the refit column
        mask = np.concatenate([folds[held][:, None] == np.arange(self.K)[None, :],
                               np.zeros((held.size, 1), dtype=bool)], axis=1)
        self.mask = backend.asarray(mask[:, None, :].astype(np.float64))
        #: (rows, candidates): where each held row's out-of-fold score is among a pass's scores
        #: (rows, candidates · (K + 1)), candidate-major: its fold's column of each candidate
        self.out_of_fold = backend.xp.asarray(np.maximum(folds[held], 0)[:, None]
                                              + (self.K + 1) * np.arange(max(len(arm.grid) for arm in arms))[None, :],
                                              device=backend.device)
        #: with K folds, each row's weight (1 without) where fold k's model trained on it, else 0
        #: (rows, 1, K), and its sum per fold: where the fold models' in-sample positive share is
        #: counted (:meth:`_seen_share`)
        self.seen = None
        if self.K > 1:
            seen = 1.0 - self.mask[:, :, :self.K]
            self.seen = seen if self.w_held is None else seen * self.w_held[:, None, None]
            self.seen_total = backend.xp.sum(self.seen, axis=0)
            #: per fold, the held rows it trained on and those it held out (device indices)
            self.fold_rows = [(backend.xp.asarray(np.flatnonzero(folds[held] != k), device=backend.device),
                               backend.xp.asarray((folds[held] == k)[:, None], device=backend.device))
                              for k in range(self.K)]
        #: with one held-out split on rows a model can fit (at least as many features as rows; in
        #: the row space, Φ's columns: the rows' rank): the rows the fold model trained on (device
        #: indices) and their weights, where its in-sample positive share is counted, as the K fold
        #: models' is (:meth:`_seen_share`); their scores come from ``X`` itself, not a copy of
        #: those rows (wide dense rows would double the memory), for an algorithm that does not
        #: keep its pass's scores
        self.X = X
        self.trained_index = self.w_trained = None
        if self.K == 1 and held.size < y.size and X.shape[1] >= y.size:
            trained = np.flatnonzero(folds < 0)
            self.trained_index = backend.xp.asarray(trained, device=backend.device)
            self.w_trained = None if weight is None else backend.asarray(weight[trained])
        self.sizes = [len(arm.grid) for arm in arms]
        #: each candidate's distance from the algorithm's own settings: where held-out values tie,
        #: the nearest is chosen (:meth:`best_index`)
        self.distance = np.concatenate([grid_distance(arm.algorithm, arm.grid) for arm in arms])
        #: the columns of each arm in the weights the reader serves: every candidate's K + 1
        bounds = np.cumsum([0] + [S * (self.K + 1) for S in self.sizes])
        self.columns = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))

    # -- what the loop and the checkpoints read ------------------------------------------
    @property
    def name(self) -> str:
        return self.arms[0].algorithm.name

    @property
    def params(self) -> dict[str, Any]:
        return self.arms[0].algorithm.params

    @property
    def spec(self) -> str:
        return self.arms[0].algorithm.spec

    def parts(self) -> tuple:
        return ()

    def check_problem(self, problem: Problem) -> None:
        for arm in self.arms:
            arm.algorithm.check_problem(arm.problem._replace(n_models=1))

    def prepare(self, problem: Problem, X: Any, y: Array, *, weight: Array | None = None,
                seed: int | None = None) -> ArrayReader:
        """The training rows with every model's sample weights: the fold weights (n, K + 1) once per
        candidate of every arm, made once here so a batch only slices them."""
        tiled = np.tile(self.base, (1, sum(self.sizes)))
        return ArrayReader(X, y, problem.xp, problem.device, self.backend.asarray(tiled))

    # -- the state machine ------------------------------------------------------------------
    def init(self, problem: Problem) -> SelectionState:
        total = sum(self.sizes)
        return SelectionState(tuple(arm.init() for arm in self.arms), [-math.inf] * total, [0] * total,
                              [0.0] * total, [0.0] * total,
                              problem.zeros(int(self.y_held.shape[0]), total, self.K) if self.K > 1 else problem.zeros(0),
                              problem.zeros(problem.n_features, total),
                              problem.zeros(total), problem.zeros(int(self.y_held.shape[0]), total), -math.inf,
                              0, 0, [0] * total, tuple([False] * len(arm.trainers) for arm in self.arms))

    def _split(self, batch: Batch) -> list[Batch]:
        """Each arm's share of a batch: its columns of the sample weights (the reader serves all arms')."""
        X, y, weight = batch
        return [Batch(X, y, weight[:, start:stop]) for start, stop in self.columns]

    def update(self, state: SelectionState, batch: Batch, problem: Problem) -> SelectionState:
        return state._replace(arms=tuple(arm.update(arm_state, part, retired) for arm, arm_state, part, retired
                                         in zip(self.arms, state.arms, self._split(batch), state.retired)))

    def end_epoch(self, state: SelectionState, data: Batch, problem: Problem) -> SelectionState:
        arms = tuple(arm.end_epoch(arm_state, part, retired) for arm, arm_state, part, retired
                     in zip(self.arms, state.arms, self._split(data), state.retired))
        passes = state.passes + 1
        return self._retire(self._score(state._replace(arms=arms, passes=passes), passes))

    def _active(self, state: SelectionState) -> list[list[int]]:
        """Per arm, its candidates that some trainer still trains."""
        return [[c for c in range(S) if not all(retired[j] for j in arm.trainers_of(c))]
                for arm, S, retired in zip(self.arms, self.sizes, state.retired)]

    def _retire(self, state: SelectionState) -> SelectionState:
        """Stop the trainers whose models have all converged by their algorithm's own test (L-BFGS:
        max |∇f| ≤ tol, where scikit-learn's lbfgs stops each of its fits): their best pass so
        far stays theirs, and later passes, which would only refine them within that tolerance,
        cost nothing. Under the automatic stop only (``patience``); with the passes given every
        model runs them all."""
        if self.patience is None:
            return state
        retired = tuple([done or trainer.converged(trainer_state)
                         for trainer, trainer_state, done in zip(arm.trainers, arm_state, arm_retired)]
                        for arm, arm_state, arm_retired in zip(self.arms, state.arms, state.retired))
        return state._replace(retired=retired)

    def _score(self, state: SelectionState, passes: int) -> SelectionState:
        """Score the out-of-fold predictions of every candidate still trained; keep each one's best pass."""
        xp = self.backend.xp
        held_out, refit_w, refit_b, finite, seen, index, trained = [], [], [], [], [], [], []
        offset = 0
        for arm, arm_state, S, candidates in zip(self.arms, state.arms, self.sizes, self._active(state)):
            if candidates:
                A = len(candidates)
                w, b = arm.weights(arm_state, xp, candidates)
                models_finite = finite_columns(w, xp) & xp.isfinite(b)
                finite.append(xp.all(xp.reshape(models_finite, (A, self.K + 1)), axis=1))
                kept = arm.output_scores(arm_state, candidates)  # the pass's own scores of these weights
                if self.trained_index is not None:  # the fold model's scores of the rows it trained on
                    fold = xp.asarray(np.arange(A) * (self.K + 1), device=self.backend.device)
                    every = self.X @ xp.take(w, fold, axis=1) + xp.take(b, fold) if kept is None \
                        else xp.take(kept, fold, axis=1)
                    trained.append(xp.take(every, self.trained_index, axis=0))
                if kept is None:
                    kept = self.X_held @ w + b
                elif self.held_index is not None:
                    kept = xp.take(kept, self.held_index, axis=0)
                scores = xp.reshape(kept, (-1, A, self.K + 1))
                # (rows, A): each row by the model that did not see it
                held_out.append(xp.take_along_axis(kept, self.out_of_fold[:, :A], axis=1))
                seen.append(scores[:, :, :self.K])
                refit = xp.asarray(np.arange(A) * (self.K + 1) + self.K, device=self.backend.device)
                refit_w.append(xp.take(w, refit, axis=1))
                refit_b.append(xp.take(b, refit, axis=0))
                index.extend(offset + c for c in candidates)
            offset += S
        total = offset
        if not index:
            return state
        held_out = xp.concat(held_out, axis=1)
        thresholds, values = best_cut(held_out, self.y_held, self.measure, self.w_held)
        seen = xp.concat(seen, axis=1)
        if self.K > 1 and not isinstance(self.measure, ConstrainedMeasure):
            shares = self._seen_share(seen, thresholds)
        elif trained and not isinstance(self.measure, ConstrainedMeasure):
            shares = positive_share(xp.concat(trained, axis=1), thresholds, self.w_trained)
        else:
            shares = positive_share(held_out, thresholds, self.w_held)
        finite = xp.astype(xp.concat(finite), values.dtype)
        numbers = to_numpy(xp.stack([thresholds, values, shares, finite], axis=1))  # one transfer a pass
        best_values, epochs = list(state.values), list(state.epochs)
        diverged = list(state.diverged)
        best_thresholds, best_shares = list(state.thresholds), list(state.shares)
        improved = np.zeros(total, dtype=bool)
        for c, (threshold, value, share, ok) in zip(index, numbers):
            diverged[c] = diverged[c] or (passes if not ok > 0 else 0)
            if math.isfinite(value) and math.isfinite(threshold) and not diverged[c] and (
                    self.latest or value >= best_values[c]):
                improved[c] = True
                best_values[c], epochs[c] = float(value), passes
                best_thresholds[c], best_shares[c] = float(threshold), float(share)
        if len(index) < total:  # the stopped candidates' columns: never kept below
            where = np.full(total, -1)
            where[index] = np.arange(len(index))
            gather = xp.asarray(np.maximum(where, 0), device=self.backend.device)
            held_out, seen = xp.take(held_out, gather, axis=1), xp.take(seen, gather, axis=1)
            refit_w, refit_b = [xp.take(xp.concat(refit_w, axis=1), gather, axis=1)], [xp.take(xp.concat(refit_b), gather)]
        best = max(best_values)
        stale = 0 if best > state.best else state.stale + 1
        state = state._replace(values=best_values, epochs=epochs, thresholds=best_thresholds, shares=best_shares,
                               best=best, stale=stale, diverged=diverged)
        if not improved.any():  # every candidate keeps its model and scores of an earlier pass
            return state
        keep = xp.asarray(improved, device=self.backend.device)
        return state._replace(coef=xp.where(keep[None, :], xp.concat(refit_w, axis=1), state.coef),
                              intercept=xp.where(keep, xp.concat(refit_b), state.intercept),
                              scores=xp.where(keep[None, :], held_out, state.scores),
                              seen=xp.where(keep[None, :, None], seen, state.seen) if self.K > 1 else state.seen)

    def _seen_share(self, scores: Array, thresholds: Array) -> Array:
        """(candidates,): the share of the rows it trained on that each fold model scores above its
        candidate's threshold, the mean over the K folds (``scores`` (rows, candidates, K): every
        row by every fold model; a row counts for fold k when fold k trained on it)."""
        xp = namespace(scores)
        zero = xp.zeros((), dtype=scores.dtype, device=device(scores))
        above = xp.where(scores > thresholds[None, :, None], self.seen, zero)  # the row's weight where above
        return xp.mean(xp.sum(above, axis=0) / self.seen_total, axis=1)

    def _share_fails(self, seen: Array, held_out: Array, shares: list[float]) -> Array:
        """(candidates,) booleans: whether the fold models show that the in-sample share does not
        carry over to rows a model did not see, so the refit model keeps the raw threshold.
        Run once, on the chosen candidate at its best pass (:meth:`chosen`): ``seen`` (rows,
        candidates, K) its fold models' scores of every row, ``held_out`` (rows, candidates) its
        out-of-fold scores, ``shares`` its in-sample shares.

        The in-sample share (:meth:`_seen_share`) assumes a model scores its training rows
        and new rows alike up to its fit. Where a model separates its training rows (far
        more features than rows), the share's cut lies above every new row's score and
        nothing new is predicted positive. Each fold model shows which happens: cut at the
        in-sample share on its own training rows, its held-out rows give the share rule's
        out-of-fold value; cut at the best out-of-fold threshold of the *other* folds, they
        give the raw threshold's (scikit-learn's refit route). The share fails where the
        raw threshold is better by more than :data:`TRANSFER_MARGIN`. The refit model can
        separate its rows further than the fold models do theirs, so the folds show a failure
        in part only: on wide dense data they put 27% of their held-out rows above the share's
        cuts where the refit model put 7% of new rows above its cut (the positive share 16%).
        """
        xp = namespace(seen)
        share_cut = xp.zeros_like(held_out)
        raw_cut = xp.zeros_like(held_out)
        for k, (trained, rows) in enumerate(self.fold_rows):
            fold_scores = xp.take(seen[:, :, k], trained, axis=0)
            weight = None if self.w_held is None else xp.take(self.w_held, trained)
            cuts = xp.stack([threshold_at_share(fold_scores[:, c], share, weight) for c, share in enumerate(shares)])
            raw = best_cut(xp.take(held_out, trained, axis=0), xp.take(self.y_held, trained), self.measure, weight)[0]
            share_cut = xp.where(rows, cuts[None, :], share_cut)
            raw_cut = xp.where(rows, raw[None, :], raw_cut)
        return self._value_at(held_out > raw_cut) > self._value_at(held_out > share_cut) + TRANSFER_MARGIN

    def _value_at(self, predicted: Array) -> Array:
        """(candidates,): the measure of the held rows' predictions (rows, candidates), booleans."""
        xp = namespace(predicted)
        positive = (self.y_held > 0)[:, None]
        mass = xp.ones_like(predicted, dtype=self.y_held.dtype) if self.w_held is None else \
            xp.broadcast_to(self.w_held[:, None], predicted.shape)
        zero = xp.zeros_like(mass)
        tp = xp.sum(xp.where(positive & predicted, mass, zero), axis=0)
        fp = xp.sum(xp.where(~positive & predicted, mass, zero), axis=0)
        tn = xp.sum(xp.where(~positive & ~predicted, mass, zero), axis=0)
        fn = xp.sum(xp.where(positive & ~predicted, mass, zero), axis=0)
        return self.measure.from_counts(tp, fp, tn, fn, xp=xp)

    def moved(self, state: SelectionState) -> bool:
        """Whether any model of any arm has left w = 0, b = 0 (one host transfer)."""
        xp = self.backend.xp
        flags = []
        for arm, arm_state in zip(self.arms, state.arms):
            w, b = arm.weights(arm_state, xp)
            flags.append(xp.any(w != 0) | xp.any(b != 0))
        return bool(to_numpy(xp.any(xp.stack(flags))))

    def converged(self, state: SelectionState) -> bool:
        """No candidate improved for ``patience`` passes, every candidate diverged, or (the passes
        not given) every model of every arm passed its algorithm's own convergence test (lbfgs:
        max |∇f| ≤ tol, where scikit-learn's lbfgs stops): later passes would leave the models,
        and so the held-out values, as they are."""
        if all(state.diverged):
            return True
        return self.patience is not None and (state.stale >= self.patience or self._settled(state))

    def _settled(self, state: SelectionState) -> bool:
        """Whether every model of every arm has converged by its algorithm's own test (an
        algorithm without one never has): every trainer stopped (:meth:`_retire`, which tests each
        once a pass, under the automatic stop, the only one that asks)."""
        return all(all(retired) for retired in state.retired)

    def iterate(self, state: SelectionState) -> tuple:
        return ()

    def output(self, state: SelectionState) -> tuple[Array, Array]:
        """The best candidate's refit model at its best pass (zeros before any pass was scored)."""
        index = self.best_index(state)
        return state.coef[:, index], state.intercept[index]

    def linear(self, params: tuple[Array, Array]) -> tuple[Array, Array]:
        return params

    def describe_state(self, state: SelectionState) -> dict[str, float]:
        """The chosen candidate's held-out value, and what its algorithm says of its refit model now."""
        if not math.isfinite(state.best):
            return {}
        index = self.best_index(state)
        arm, candidate = self._locate(index)
        return {**self.arms[arm].describe(state.arms[arm], candidate), "validation": state.values[index]}

    def _locate(self, index: int) -> tuple[int, int]:
        """(arm, candidate within it) of a candidate's index over every arm."""
        for arm, start in enumerate(itertools.accumulate([0] + self.sizes[:-1])):
            if index < start + self.sizes[arm]:
                return arm, index - start
        raise IndexError(index)

    # -- the result ---------------------------------------------------------------------------
    def best_index(self, state: SelectionState) -> int:
        """The chosen candidate: the best held-out value, except that with several arms the
        first (the measure's own solver) must beat the last (the plug-in route) with
        probability ``confidence`` over bootstrap resamples of the held-out rows
        (:meth:`win_probability`), or the last arm's best is chosen. The answer is kept for
        the state it was computed on, so the loop's calls cost one bootstrap per scored pass."""
        key = (state.passes, tuple(state.epochs))
        if self._chosen is not None and self._chosen[0] == key:
            return self._chosen[1]
        best = nearest_default_best(state.values, self.distance)
        if len(self.arms) > 1 and math.isfinite(state.best):
            first, last = self._arm_best(state, 0), self._arm_best(state, len(self.arms) - 1)
            if best != last and self.win_probability(state, first, last) < self.confidence:
                best = last
        self._chosen = (key, best)
        return best

    def _arm_best(self, state: SelectionState, arm: int) -> int:
        start, stop = sum(self.sizes[:arm]), sum(self.sizes[:arm + 1])
        return start + nearest_default_best(state.values[start:stop], self.distance[start:stop])

    def win_probability(self, state: SelectionState, first: int, second: int) -> float:
        """:func:`win_probability` of candidate ``first`` over ``second`` on the held-out rows, each
        with its best pass's out-of-fold predictions."""
        predicted = to_numpy(state.scores) > np.asarray(state.thresholds)[None, :]
        return win_probability(to_numpy(self.y_held), predicted[:, first], predicted[:, second], self.measure,
                               None if self.w_held is None else to_numpy(self.w_held))

    def model_key(self, state: SelectionState) -> tuple[int, int]:
        """What identifies the model :meth:`output` gives: the chosen candidate and its pass."""
        index = self.best_index(state)
        return index, state.epochs[index]

    def held_out_predictions(self, state: SelectionState) -> tuple[Array, Array, Array | None]:
        """The held-out labels (±1), the chosen candidate's out-of-fold predictions there (±1) and
        the rows' weights (or None), on the backend: what the held-out rates are computed from."""
        xp = namespace(self.y_held)
        index = self.best_index(state)
        positive = state.scores[:, index] > state.thresholds[index]
        return self.y_held, xp.where(positive, xp.ones_like(self.y_held), -xp.ones_like(self.y_held)), self.w_held

    def held_out_scores(self, state: SelectionState) -> tuple[Array, Array, Array | None]:
        """The held-out labels (±1), the chosen candidate's out-of-fold scores at its best pass (each
        row scored by the fold model that did not see it) and the rows' weights (or None), on the backend."""
        return self.y_held, state.scores[:, self.best_index(state)], self.w_held

    def threshold_rule(self, state: SelectionState) -> tuple[float | None, float | None]:
        """The chosen candidate's positive share so far (None before any pass was scored), and no
        raw threshold: the model's threshold puts the share of the training rows above it (the fold
        models' in-sample share with K folds, the held-out rows' share with one split). Whether the
        share carries over to new rows is checked once, at the end (:meth:`chosen`)."""
        if not math.isfinite(state.best):
            return None, None
        return state.shares[self.best_index(state)], None

    def _raw(self, state: SelectionState, index: int) -> bool:
        """Whether candidate ``index`` keeps the raw threshold (K folds only): always on ``wide`` rows,
        where the refit model separates its training rows further than the fold models do theirs
        and the folds show the share's failure in part only; elsewhere where the folds show it
        (:meth:`_share_fails`)."""
        if self.K == 1 or isinstance(self.measure, ConstrainedMeasure):
            return False
        if self.wide:
            return True
        pick = slice(index, index + 1)
        return bool(to_numpy(self._share_fails(state.seen[:, pick, :], state.scores[:, pick],
                                               [state.shares[index]]))[0])

    def _algorithm(self, index: int) -> Algorithm:
        """The algorithm of a candidate, with its settings."""
        arm, candidate = self._locate(index)
        return dataclasses.replace(self.arms[arm].algorithm, **self.arms[arm].grid[candidate])

    def chosen(self, state: SelectionState) -> Selection:
        """What the run chose: the best candidate of the best arm, with the evidence."""
        total = sum(self.sizes)
        if not math.isfinite(state.best):
            when = " in its first epoch" if all(d == 1 for d in state.diverged) else ""
            raise TrainingError(f"training diverged{when} (non-finite weights) with "
                                f"{', '.join(self._algorithm(c).spec for c in range(total))}; "
                                f"a smaller step or another loss may help")
        index = self.best_index(state)
        candidates = [Candidate(self._algorithm(c).spec, state.values[c], state.epochs[c], state.diverged[c])
                      for c in range(total)]
        compared = [{"algorithm": candidates[best].spec, "value": candidates[best].value,
                     "epochs": candidates[best].epoch}
                    for best in (self._arm_best(state, arm) for arm in range(len(self.arms)))]
        raw, share = self._raw(state, index), state.shares[index]
        own = raw and self.wide and self.own_terms is not None
        if own:  # the out-of-fold share, cut on the refit model's scores without their own terms
            xp = namespace(state.scores)
            threshold = xp.asarray(state.thresholds[index], dtype=state.scores.dtype, device=device(state.scores))
            share, raw = float(positive_share(state.scores[:, index], threshold, self.w_held)), False
        return Selection(self._algorithm(index), self.arms[self._locate(index)[0]].loss, state.epochs[index],
                         state.thresholds[index], share, state.values[index], self.rule, candidates,
                         state.passes, compared if len(self.arms) > 1 else [], state.diverged[index], raw,
                         raw and self.wide, own)


@dataclass
class Candidate:
    """One candidate setting (as an algorithm spec), and how it did on the held-out rows."""

    spec: str
    value: float  #: the best held-out value over the passes
    epoch: int  #: the pass that reached it
    diverged: int = 0  #: the pass where its weights became non-finite (0: never)


@dataclass
class Selection:
    """What the settings selection chose, and the evidence."""

    algorithm: Algorithm  #: with the chosen settings
    loss: Any  #: the loss it trained with
    epochs: int  #: the chosen number of passes
    threshold: float  #: the best threshold of the out-of-fold scores there
    #: the positive share the refit model's threshold keeps (in-sample with K folds, held-out with one
    #: split; out-of-fold with ``own_terms``)
    share: float
    value: float  #: the held-out value of the measure there
    rule: Rule
    candidates: list[Candidate] = field(default_factory=list)
    epochs_run: int = 0  #: passes the selection made (the chosen one plus the patience)
    #: ``algorithm="auto"``: each algorithm compared on the same folds, and its held-out value.
    compared: list[dict[str, Any]] = field(default_factory=list)
    diverged: int = 0  #: the pass where the chosen candidate's weights became non-finite (0: never)
    #: the refit model keeps the raw out-of-fold ``threshold``, the share not carrying over to new
    #: rows (:meth:`Selector._raw`); False: it keeps the positive ``share``
    raw: bool = False
    #: ``raw`` because the training rows are wide (at least as many columns as rows)
    wide: bool = False
    #: wide sparse rows trained in their span: ``share`` is the out-of-fold positive share, and the
    #: refit model's threshold puts it above the training rows' scores without their own terms
    #: (:meth:`~calopt.training.rowspace.RowSpace.own_terms`)
    own_terms: bool = False

    def report(self) -> dict[str, Any]:
        """A JSON-ready account (``model.fit_report.selection``, ``--json``)."""
        report = {"rule": str(self.rule), "value": self.value, "epochs": self.epochs, "epochs_run": self.epochs_run,
                  "threshold": self.threshold, "positive_share": self.share, "algorithm": self.algorithm.spec,
                  "loss": self.loss.spec,
                  "candidates": [{"algorithm": c.spec, "value": c.value, "epoch": c.epoch,
                                  **({"diverged": c.diverged} if c.diverged else {})} for c in self.candidates]}
        if self.compared:
            report["compared"] = self.compared
        # the refit model's threshold where it is not the in-sample share: ``threshold_kept`` (which
        # rule) and ``threshold_reason`` (why, in a few words) for programs, ``threshold_transfer``
        # (the two in a sentence) for people
        kept = None  # (rule, how it is cut, reason, more of the reason)
        if self.own_terms:
            kept = ("out-of-fold positive share", ", cut on the training rows' scores without their own terms",
                    "wide sparse rows", "the refit model separates its training rows, and its scores move between passes")
        if self.raw:
            kept = (("out-of-fold threshold", "", "as many columns as rows",
                     "a model separates its training rows, and the in-sample share does not carry over")
                    if self.wide else ("out-of-fold threshold", "", "the in-sample share does not carry over", ""))
        if kept:
            rule, how, reason, more = kept
            report["threshold_kept"], report["threshold_reason"] = rule, reason
            report["threshold_transfer"] = f"{rule}{how} ({reason}{': ' + more if more else ''})"
        return report


# -- the one-pass trial (select="none") -----------------------------------------------------
def choose_settings(algorithm: Algorithm, problem: Problem, X: Any, y: np.ndarray, kept: np.ndarray,
                    seed: int, backend: Backend, weight: np.ndarray | None = None) -> Algorithm:
    """``algorithm`` with each unset trial tunable filled by a one-pass trial of its candidates.

    ``X`` holds the training rows on the backend (``kept`` indexes those the weights may
    see), ``y`` their ±1 labels and ``weight`` their sample weights (or None) on the host.
    A candidate whose trial diverges is skipped; when all do, the first candidate is kept.
    """
    for tunable in algorithm.tunables:
        if not tunable.trial or getattr(algorithm, tunable.name) is not None:
            continue
        algorithm = _trial(algorithm, tunable.name, tunable.candidates, problem, X, y, weight, kept, seed,
                           backend)
    return algorithm


def trial_scores(algorithm: Algorithm, name: str, candidates: tuple[Any, ...], problem: Problem, X: Any,
                 y: np.ndarray, weight: np.ndarray | None, kept: np.ndarray, seed: int,
                 backend: Backend) -> tuple[list[np.ndarray | None], np.ndarray, np.ndarray | None]:
    """The one-pass trial's held-out scores of each candidate value of ``name`` (None where its pass
    diverged), the held-out labels and sample weights: one pass on 80% of ``kept`` (stratified, at
    most :data:`TRIAL_ROWS`), scored on the other 20%."""
    fit_part, check_part = stratified_split(y[kept], 0.2, seed + 1)
    rng = np.random.default_rng(seed + 2)
    fit_part = kept[np.sort(rng.permutation(fit_part)[:TRIAL_ROWS])]
    check_part = kept[np.sort(rng.permutation(check_part)[:TRIAL_ROWS])]
    X_fit, y_fit = take_rows(X, fit_part, backend), backend.asarray(y[fit_part])
    w_fit = None if weight is None else backend.asarray(weight[fit_part] / np.mean(weight[fit_part]))
    w_check = None if weight is None else weight[check_part]
    X_check = take_rows(X, check_part, backend)
    trial_problem = problem._replace(n_samples=int(fit_part.size), epochs=1,
                                     batch_size=min(problem.batch_size, max(1, fit_part.size // 50)))
    scores: list[np.ndarray | None] = []
    for value in candidates:
        candidate = dataclasses.replace(algorithm, **{name: value})
        result = run(candidate, trial_problem, ArrayReader(X_fit, y_fit, problem.xp, backend.device, w_fit),
                     epochs=1, seed=seed)
        w, b = result.weights
        scores.append(None if result.status < 0 else to_numpy(X_check @ w + b))
    return scores, y[check_part], w_check


def best_candidate(algorithm: Algorithm, name: str, candidates: tuple[Any, ...], scores: list[Any],
                   y: np.ndarray, weight: np.ndarray | None, measure: Any) -> Algorithm:
    """The candidate whose held-out ``scores`` reach the best measure at their best threshold (the
    first of equals; diverged ones, None, skipped; all diverged: the first candidate)."""
    best, best_value = None, -np.inf
    for value, candidate_scores in zip(candidates, scores):
        if candidate_scores is None:
            continue
        _, score = best_threshold(candidate_scores, y, measure, weight)
        if score > best_value:
            best, best_value = value, score
    return dataclasses.replace(algorithm, **{name: candidates[0] if best is None else best})


def _trial(algorithm: Algorithm, name: str, candidates: tuple[Any, ...], problem: Problem, X: Any,
           y: np.ndarray, weight: np.ndarray | None, kept: np.ndarray, seed: int, backend: Backend) -> Algorithm:
    scores, y_check, w_check = trial_scores(algorithm, name, candidates, problem, X, y, weight, kept, seed, backend)
    return best_candidate(algorithm, name, candidates, scores, y_check, w_check, problem.measure)

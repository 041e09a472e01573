"""Large data: the model estimated on a sample of the rows, its threshold cut on all the others.

Where there are many more rows than a linear model has parameters, the estimate stops
improving long before the rows run out, while every pass of the settings selection (its
candidates, its fold models) still reads every row. So, by default (``select="auto"``),
from :data:`MIN_ROWS` · 2 rows and at least 2 · :data:`ROWS_PER_FEATURE` rows per feature:

1. a stratified sample of ``max(MIN_ROWS, ROWS_PER_FEATURE · d)`` rows (fewer with few
   columns: "Few columns" below) trains the model
   with the settings selection the data's size calls for (one held-out split, the
   candidates, the passes), as any data set of that size would;
   Dense features are standardized for it (centred, divided by their standard deviation, as
   ``StandardScaler``; folded into the model), not only max-abs scaled: a column's offset left
   in place (covtype's elevation, 2950 ± 300) makes L-BFGS creep for 50-70 passes, standardized
   it converges in about 12 (300,000 × 54: 2.3-3.3 s → 0.6-1.0 s, test values within 0.0004);
2. the other rows, which the model never saw, score it once; the threshold is the exact
   best cut of the measure on them (:func:`~calopt.training.threshold.best_cut`): at least
   as many rows as the model trained on, more than the 20% split scikit-learn's
   ``TunedThresholdClassifierCV(cv=0.2)`` cuts on.

Why :data:`ROWS_PER_FEATURE` = 1,000: the excess logistic risk of a maximum-likelihood fit
on m rows is about d/(2m) nats (its asymptotic χ²_d/2m), 0.0005 at m = 1,000·d, a tenth
of what separates candidates the selection can tell apart; fixed from that bound before
measuring, not tuned on a benchmark. On the size benchmark's dense sets a plain
``LogisticRegression`` fitted on such a sample scored within 0.0006 of the fit on every
row (``benchmarks/bench_sizes.py``; docs/development/benchmark-notes.md). Sparse text has
tens of thousands of columns, so it needs tens of millions of rows before this applies.

**A rare class** (fraud, screening: a few hundred rows among 10⁵-10⁶) would leave the
stratified sample a few dozen of its rows, and the model estimated from them far worse than
one from all of them, while the majority class's rows add little past a point. So where the
stratified sample would hold fewer than :data:`~calopt.training.selection.CV_MINORITY` rows of
the smaller class, the sample keeps that many of them (at most :data:`RARE_KEPT` of them, the
rest for the cut) and fills up with the larger class: a case-control sample. Each row weighs
the inverse of its class's sampling fraction, in training and in the selection (the weighted
loss and measure are the whole data's, in expectation), and so does each row of the rest in
the cut. The sample's settings selection takes one held-out split whatever the smaller class's
count (its held-out rows choose the settings, not the threshold, which the rest's cut gives):
6 models instead of 18. On ``benchmarks/bench_rare_large.py`` (120,000-1,000,000 rows,
0.05-0.4% positive; BENCHMARKS.md, "Large data with a rare class") the mean margin over the
split route went from +0.0011 to +0.0120 (development half) and from −0.0037 to +0.0063
(confirmation half), the cells more than 0.02 below it from 4 and 2 to 0 and 1, and the median
time from 1.8 and 6.1 times the route's to 0.8 and 2.2. :data:`RARE_KEPT` is the route's 80%,
not tuned. A large stream does the same from its first pass, which keeps each class's own sample
of rows for it (:func:`calopt.training.stream.fit_stream_sample`).

**Few columns** (3-30 dense columns: physics events, sensors, forest cover): 50,000 rows are
far more than ``ROWS_PER_FEATURE`` a feature, and the sample's passes were the whole of a fit
that one ``LogisticRegression`` on every row matched in less time (150,000 × 5: 0.21 s against
0.10 s). Where the smaller class is not rare, the sample is the fewest rows that hold
CV_MINORITY of its rows, at least :data:`FEW_COLUMNS_ROWS` and ``ROWS_PER_FEATURE`` a feature
(:func:`sample_size`); a rare class keeps the case-control sample of ``max(MIN_ROWS,
ROWS_PER_FEATURE · d)`` rows (smaller ones did worse on ``bench_rare_large.py``, its
confirmation half: margin +0.0063 → +0.0024 at 20,000 rows). On
``benchmarks/bench_low_d_large.py`` (120,000-1,000,000 rows × 3-28 columns, 2-30% positive;
BENCHMARKS.md, "Large data with few columns") the median time went from 1.33 and 0.67 of the
split route's to 0.78 and 0.42 (development and confirmation halves), the mean margin over it
from +0.0031 to +0.0033 and from +0.0011 to +0.0014. 20,000 was chosen on the development half
among 10,000, 20,000 and 50,000 (10,000: 0.67 of the route's time, margin +0.0024).

A rule the user gives (``select="holdout:0.2"``, ``"cv:5"``, ``"none"``), rate
constraints (whose threshold is chosen with the constraints on the training rows) and
sample weights train on every row, as before.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from calopt.backends import to_numpy
from calopt.training.selection import CV_MINORITY, stratified_split
from calopt.training.threshold import best_cut

__all__ = ["FEW_COLUMNS_ROWS", "MIN_ROWS", "RARE_KEPT", "ROWS_PER_FEATURE", "RowSample", "rare_class", "sample_size",
           "smaller_class"]

#: The fewest rows of the sample where the smaller class is rare (and the regime starts at twice
#: ``max(MIN_ROWS, ROWS_PER_FEATURE · d)`` rows).
MIN_ROWS = 50_000
#: The fewest rows of the sample where the smaller class is not rare: enough for CV_MINORITY of its
#: rows, at least this many and ROWS_PER_FEATURE a feature (see the module's note, "Few columns").
FEW_COLUMNS_ROWS = 20_000
#: Rows of the sample per feature (see the module's note: an excess risk of about 0.0005 nats).
ROWS_PER_FEATURE = 1_000
#: The most of a rare class's rows the sample keeps (the rest are the cut's, as the route's 20%).
RARE_KEPT = 0.8


def sample_size(n_rows: int, n_features: int, smaller: int | None = None) -> int | None:
    """The rows to train on, or None (every row) when the data are not at least twice
    ``max(MIN_ROWS, ROWS_PER_FEATURE · d)``. That many where the smaller class (``smaller`` rows;
    None: not known) is rare (:func:`rare_class`); else as few as hold CV_MINORITY rows of it, at
    least FEW_COLUMNS_ROWS and ROWS_PER_FEATURE a feature."""
    rows = max(MIN_ROWS, ROWS_PER_FEATURE * max(int(n_features), 1))
    if n_rows < 2 * rows:
        return None
    if smaller is None or rare_class(n_rows, n_features, smaller):
        return rows
    needed = -(-CV_MINORITY * n_rows // max(int(smaller), 1))  # ⌈CV_MINORITY · n / smaller⌉
    return min(rows, max(FEW_COLUMNS_ROWS, ROWS_PER_FEATURE * max(int(n_features), 1), needed))


def smaller_class(y_pm: np.ndarray) -> tuple[float, int]:
    """The smaller class of labels ``y_pm`` (±1; of equal ones the positive) and its row count."""
    positives, negatives = int(np.sum(y_pm > 0)), int(np.sum(y_pm < 0))
    return (1.0, positives) if positives <= negatives else (-1.0, negatives)


def rare_class(n_rows: int, n_features: int, smaller: int) -> bool:
    """Whether a stratified sample of ``max(MIN_ROWS, ROWS_PER_FEATURE · d)`` rows would hold fewer
    than CV_MINORITY rows of the smaller class (``smaller`` of ``n_rows``): the case-control sample's
    regime (see the module's note, "A rare class")."""
    rows = max(MIN_ROWS, ROWS_PER_FEATURE * max(int(n_features), 1))
    return smaller * rows < CV_MINORITY * n_rows


@dataclass(frozen=True)
class RowSample:
    """The rows a large fit trains on (``sample``) and those it cuts its threshold on (``rest``)."""

    sample: np.ndarray
    rest: np.ndarray
    #: a case-control sample's row weights (the sample's, mean 1; the rest's), None: stratified
    weight: np.ndarray | None = None
    rest_weight: np.ndarray | None = None
    kept: int = 0  #: a case-control sample's rows of the smaller class

    @classmethod
    def draw(cls, y_pm: np.ndarray, rows: int, seed: int) -> RowSample:
        """A stratified sample of about ``rows`` of the labels ``y_pm`` (±1), the rest apart; where
        it would hold fewer than CV_MINORITY rows of the smaller class, a case-control sample of
        as many rows (see the module's note)."""
        rest, sample = stratified_split(y_pm, rows / y_pm.size, seed)
        small = smaller_class(y_pm)[0]
        rare = np.flatnonzero(y_pm == small)
        if np.sum(y_pm[sample] == small) >= CV_MINORITY:
            return cls(sample, rest)
        kept = cls.rare_rows(y_pm)
        if kept < 2:  # one or two rows of it: nothing to weigh (the stratified draw, as before)
            return cls(sample, rest)
        common = np.flatnonzero(y_pm != small)
        rng = np.random.default_rng(seed)
        return cls.case_control(y_pm, np.sort(np.concatenate([rng.permutation(rare)[:kept],
                                                               rng.permutation(common)[:rows - kept]])))

    @staticmethod
    def rare_rows(y_pm: np.ndarray) -> int:
        """How many rows of the smaller class of ``y_pm`` (±1) a case-control sample keeps."""
        return min(int(RARE_KEPT * smaller_class(y_pm)[1]), CV_MINORITY)

    @classmethod
    def case_control(cls, y_pm: np.ndarray, sample: np.ndarray) -> RowSample:
        """The case-control sample of the rows ``sample`` (increasing; drawn uniformly within each
        class): each row weighs the inverse of its class's sampling fraction (mean 1 over the
        sample), each row of the rest the inverse of its class's fraction left."""
        small = smaller_class(y_pm)[0]
        rest = np.setdiff1d(np.arange(y_pm.size), sample, assume_unique=True)
        in_sample = y_pm[sample] == small
        kept = int(np.sum(in_sample))
        fraction = {small: kept / np.sum(y_pm == small), -small: (sample.size - kept) / np.sum(y_pm != small)}
        weight = np.where(in_sample, 1 / fraction[small], 1 / fraction[-small])
        rest_weight = np.where(y_pm[rest] == small, 1 / (1 - fraction[small]), 1 / (1 - fraction[-small]))
        return cls(sample, rest, weight / weight.mean(), rest_weight, kept)

    def cut(self, model: Any, X: Any, y_pm: np.ndarray, measure: Any, *, tune: bool = True) -> Any:
        """``model`` (trained on the sample) with its threshold moved to the best cut of ``measure``
        on the rest of the rows, and the account in its fit report's ``subsample``."""
        scores = None if not tune else np.asarray(to_numpy(model.decision_function(X)), dtype=np.float64)[self.rest]
        return self.cut_scores(model, scores, y_pm, measure)

    def cut_scores(self, model: Any, scores: np.ndarray | None, y_pm: np.ndarray, measure: Any) -> Any:
        """:meth:`cut` with the rest's ``scores`` by ``model`` given (None: the threshold is not tuned)."""
        begun = time.perf_counter()
        account = {"rows": int(self.sample.size), "of": int(y_pm.size), "cut_rows": int(self.rest.size)}
        if scores is None:
            return dataclasses.replace(model, fit_report=model.fit_report.replace(subsample=account))
        if self.weight is not None:  # case-control: how many of the smaller class's rows it trained on
            account.update({"smaller_class_rows": self.kept, "weighted": True})
        shift, value = best_cut(scores, y_pm[self.rest], measure, self.rest_weight)
        shift, value = float(shift), float(value)
        account.update({"threshold_shift": shift, "value": value})
        return dataclasses.replace(model, intercept=model.intercept - shift, threshold=model.threshold + shift,
                                   fit_report=model.fit_report.replace(subsample=account),
                                   fit_seconds=model.fit_seconds + time.perf_counter() - begun)

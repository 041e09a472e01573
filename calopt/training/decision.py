"""The decision rule of K classes that maximises a measure, chosen on out-of-fold probabilities.

A probability model (the multinomial default) gives each row its class probabilities
η(x); the argmax is the rule for accuracy, not for G-mean, min-recall or macro-F1. The
rules here are *gain-matrix* rules: predict ``argmax_j Σ_i η_i(x) G[i, j]``, the
cost-sensitive plug-in for a K × K gain matrix G (per-class weights are the diagonal
ones). They are chosen for a measure on rows the probabilities were not fitted on (the
out-of-fold probabilities of the cross-fitting the binary threshold uses):

1. **Frank-Wolfe** over the confusion matrices the rules reach (Narasimhan, Ramaswamy,
   Saha, Agarwal, "Consistent Multiclass Algorithms for Complex Performance Measures",
   ICML 2015, Algorithm 1): at the current confusion matrix C the measure's gradient G
   is a gain matrix, its rule is the linear maximisation step, and C moves towards that
   rule's confusion matrix by the step 2/(t + 2). The mixture of the rules, each used
   with its weight, is the randomised classifier the method returns; ⟨G, Ĉ − C⟩, the
   Frank-Wolfe gap, bounds how far a concave measure's mixture value is from the best
   that the rules reach on these rows.
2. **A deterministic rule**: per-class weights (a diagonal G) by exact coordinate ascent from
   the start (the argmax, or the balanced rule ``argmax_j η_j/π_j`` when it scores as high:
   G-mean and min are 0, without a gradient, around an argmax that never predicts a class,
   and where both are 0 the balanced rule is the one whose recalls are all positive more
   often): for one class at a time every distinct decision its weight can give is evaluated
   at once (the rows switch to the class at sorted break points; for two classes the exact
   threshold search), the best taken (of equal ones, the nearest the current weight), class
   after class until none gains. Polishing the best Frank-Wolfe rule the same way and keeping
   the better of the two out of fold was measured too (benchmark's development half): it never
   did better on test, and macro-F1 lost 0.0015, so the Frank-Wolfe mixture is only the
   randomised rule and the certificate (its value and gap are reported).

The measure is evaluated on stacks of statistics at once: per-class true positives and
predicted counts for a measure of the one-vs-rest counts (:meth:`calopt.Measure.from_class_counts`,
every K-class measure calopt defines; O(K) numbers a candidate rule), else K × K confusion
matrices (:meth:`calopt.Measure.from_confusion`); gradients by forward differences, so any
registered measure serves.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from calopt.measures import Measure, has_class_count_form
from calopt.models.rule import gain_predictions, mixture_predictions

__all__ = ["DecisionRule", "choose_rule", "gain_predictions"]

#: Frank-Wolfe iterations by default (xcolumns' default too).
ITERATIONS = 20
#: Passes over the classes at the most of coordinate ascent (it stops when none gains).
ROUNDS = 20
#: A class's weight is searched over every interval of its break points up to this many of them;
#: beyond, over every one within a factor WINDOW of the current weight and COARSE evenly spaced
#: ones on either side (then every one around the best of those, if it is outside).
EXACT_BREAKS = 1024
WINDOW = 8.0
COARSE = 128
#: The window's intervals evaluated at the most: beyond, this many evenly spaced ones (and the
#: current scale's), then every interval between the best's neighbours. At 100,000 rows a window
#: held about 50,000 intervals, each a K-vector of the measure's counts: the rule was half of a
#: 6-class fit (100,000 × 10: 0.55 of 1.1 s, one LogisticRegression fit 0.2 s).
WINDOW_CUTS = 2048
#: The most confusion-matrix entries evaluated at once (measures without a class-count form).
MAX_CELLS = 2 ** 16


@dataclasses.dataclass(frozen=True)
class DecisionRule:
    """A gain-matrix rule for K classes and what it reached on the rows it was chosen on.

    ``gains`` (K, K): predict ``argmax_j (proba @ gains)[:, j]``. ``value`` is the measure of
    that deterministic rule on those rows, ``argmax_value`` the argmax's;
    ``mixture`` the Frank-Wolfe rules ``(weight, gains)`` of the randomised classifier,
    ``mixture_value`` the measure of its (expected) confusion matrix and ``gap`` its
    Frank-Wolfe gap.
    """

    gains: np.ndarray
    value: float
    argmax_value: float
    mixture: tuple[tuple[float, np.ndarray], ...]
    mixture_value: float
    gap: float
    iterations: int

    def predict(self, proba: Any) -> np.ndarray:
        """Class codes 0..K−1 of rows with probabilities ``proba`` (n, K)."""
        return gain_predictions(np.asarray(proba, dtype=np.float64), self.gains)

    def predict_randomised(self, proba: Any, rng: np.random.Generator) -> np.ndarray:
        """Class codes drawn from the Frank-Wolfe mixture: each row uses one of its rules, with
        the rule's weight as its probability."""
        weights, gains = self.mixture_arrays()
        return mixture_predictions(np.asarray(proba, dtype=np.float64), weights, gains,
                                   int(rng.integers(2**63 - 1)))

    def mixture_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The mixture as arrays: its weights (T,) and gain matrices (T, K, K)."""
        return (np.array([weight for weight, _ in self.mixture], dtype=np.float64),
                np.stack([gains for _, gains in self.mixture]).astype(np.float64))


def _confusion(codes: np.ndarray, predicted: np.ndarray, K: int, weight: np.ndarray | None) -> np.ndarray:
    """The K × K confusion matrix on the host (:func:`~calopt.measures.confusion_matrix`'s, by counting)."""
    return np.bincount(codes * K + predicted, weights=weight, minlength=K * K).reshape(K, K).astype(np.float64)


def _value(measure: Measure, matrices: np.ndarray) -> np.ndarray:
    return np.asarray(measure.from_confusion(matrices, xp=np), dtype=np.float64)


def _gradient(measure: Measure, C: np.ndarray) -> np.ndarray:
    """∂measure/∂C by forward differences (one stacked evaluation of K² + 1 matrices; counts only
    grow, so every matrix is a confusion matrix)."""
    K = C.shape[0]
    step = 1e-6 * max(float(C.sum()), 1.0)
    basis = np.eye(K * K).reshape(K * K, K, K) * step
    values = _value(measure, np.concatenate([C[None], C + basis]))
    return ((values[1:] - values[0]) / step).reshape(K, K)


def _class_count_gradient(measure: Measure, C: np.ndarray) -> np.ndarray:
    """∂measure/∂C for a measure of the per-class counts (TP, FP, FN of each class against the rest,
    and the total), by forward differences along 3K + 1 matrices instead of K² + 1.

    Such a measure's gradient has the form G[i, i] = a_i, G[i, j] = b_i + c_j (i ≠ j: a row of
    class i predicted j adds to FN_i and FP_j): the diagonal, and the steps (i, i+1) and
    (i, i+2), give a, b_i + c_{i+1} and b_i + c_{i+2}, so c up to a constant and then every
    b_i + c_j. Every K-class measure calopt defines has the form; :func:`_frank_wolfe`
    checks it against :func:`_gradient` at its first step and uses this one only if they agree.
    """
    K = C.shape[0]
    step = 1e-6 * max(float(C.sum()), 1.0)
    rows = np.tile(np.arange(K), 3)
    columns = np.concatenate([np.arange(K), (np.arange(K) + 1) % K, (np.arange(K) + 2) % K])
    basis = np.zeros((3 * K, K, K))
    basis[np.arange(3 * K), rows, columns] = step
    values = _value(measure, np.concatenate([C[None], C + basis]))
    slopes = (values[1:] - values[0]) / step
    diagonal, next_one, next_two = slopes[:K], slopes[K:2 * K], slopes[2 * K:]
    # c_{i+2} − c_{i+1} = next_two_i − next_one_i: c by cumulative sums from c_0 = 0
    c = np.concatenate([[0.0], np.cumsum(np.roll(next_two - next_one, 1))[:K - 1]])
    b = next_one - np.roll(c, -1)
    G = b[:, None] + c[None, :]
    G[np.arange(K), np.arange(K)] = diagonal
    return G


def _gradient_of(measure: Measure, C: np.ndarray) -> Any:
    """The gradient function for ``measure`` near C: :func:`_class_count_gradient` when it agrees
    with the full forward differences there (K ≥ 4), else :func:`_gradient`."""
    if C.shape[0] < 4:
        return _gradient
    full, fast = _gradient(measure, C), _class_count_gradient(measure, C)
    tolerance = 1e-4 * max(float(np.max(np.abs(full))), 1e-12)
    return _class_count_gradient if np.allclose(fast, full, rtol=0, atol=tolerance) else _gradient


def _frank_wolfe(rows: "_Rows", start: np.ndarray, iterations: int
                 ) -> tuple[list[tuple[float, np.ndarray]], np.ndarray, float]:
    """The Frank-Wolfe mixture from the rule ``start``: its rules with weights, the statistics of
    its (expected) confusion and its gap."""
    stats = rows.stats(_predictions(rows.proba, start))
    mixture: list[tuple[float, np.ndarray]] = [(1.0, start)]
    gap = np.inf
    for t in range(iterations):
        G, W = rows.gradient(stats)
        rule_stats = rows.stats(_predictions(rows.proba, G))
        gap = float(np.sum(W * (rule_stats - stats)))
        step = 2.0 / (t + 3)
        stats = (1 - step) * stats + step * rule_stats
        mixture = [(w * (1 - step), g) for w, g in mixture] + [(step, G)]
    return mixture, stats, gap


class _Rows:
    """The rows a rule is chosen on (probabilities, class codes, weights) with the measure, and the
    statistics of a prediction the measure needs: per class, the true positives and the predicted
    count ((2, K): the class counts are fixed) when the measure is a function of the one-vs-rest
    counts (:func:`~calopt.measures.has_class_count_form`: every K-class measure calopt
    defines), else the K × K confusion matrix. A stack of statistics is evaluated at once."""

    def __init__(self, measure: Measure, proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None):
        self.measure, self.proba, self.codes, self.weight = measure, proba, codes, weight
        self.K = proba.shape[1]
        self.row_weight = np.ones(codes.size) if weight is None else weight
        self.true = np.bincount(codes, weights=weight, minlength=self.K).astype(np.float64)
        self.total = np.sum(self.true, axis=-1, keepdims=True)
        self.counted = has_class_count_form(measure)
        self._matrix_gradient: Any = None

    def stats(self, predicted: np.ndarray) -> np.ndarray:
        """The statistics of the predicted class codes of the rows."""
        if not self.counted:
            return _confusion(self.codes, predicted, self.K, self.weight)
        hit = self.codes == predicted
        out = np.empty((2, self.K))  # (assigned, not stacked: this runs a few times a line search)
        out[0] = np.bincount(self.codes[hit], weights=None if self.weight is None else self.weight[hit],
                             minlength=self.K)
        out[1] = np.bincount(predicted, weights=self.weight, minlength=self.K)
        return out

    def values(self, stats: np.ndarray) -> np.ndarray:
        """The measure of each statistics of a stack (..., 2, K) or (..., K, K)."""
        if not self.counted:
            return _value(self.measure, stats)
        return _count_values(self.measure, stats[..., 0, :], stats[..., 1, :], self.true, self.total)

    def value_of(self, gains: np.ndarray) -> float:
        """The measure of the gain-matrix rule on the rows (its own predictions)."""
        return float(self.values(self.stats(_predictions(self.proba, gains))))

    def gradient(self, stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """∂measure/∂C at the rule of these statistics, as a gain matrix G (K, K), and as weights on
        the statistics (W: ⟨G, C' − C⟩ = Σ W·(stats' − stats) for rules on the same rows)."""
        if not self.counted:
            if self._matrix_gradient is None:  # chosen at the first point (see _gradient_of)
                self._matrix_gradient = _gradient_of(self.measure, stats)
            G = self._matrix_gradient(self.measure, stats)
            return G, G
        return _count_gradient(self.measure, stats[0], stats[1], self.true)


def _count_values(measure: Measure, tp: np.ndarray, predicted: np.ndarray, true: np.ndarray,
                  total: np.ndarray | None = None) -> np.ndarray:
    """The measure from per-class true positives, predicted and true counts ((..., K) each, broadcast);
    ``total``: ``true``'s sum over the classes where it is known."""
    fp, fn = predicted - tp, true - tp
    tn = (np.sum(true, axis=-1, keepdims=True) if total is None else total) - tp - fp - fn
    if tp.shape[-1] == 2:  # as from_confusion: class 1 against class 0
        return np.asarray(measure.from_counts(tp[..., 1], fp[..., 1], tn[..., 1], fn[..., 1], xp=np), dtype=np.float64)
    return np.asarray(measure.from_class_counts(tp, fp, tn, fn, xp=np), dtype=np.float64)


def _count_gradient(measure: Measure, tp: np.ndarray, predicted: np.ndarray, true: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """∂measure/∂C of a measure of the per-class counts, by forward differences along 3K + 1 points
    (one stacked evaluation): a row of class i predicted j adds to true_i and predicted_j (and to
    TP_i when j = i), so G[i, j] = ∂true_i + ∂predicted_j for j ≠ i, and G[i, i] is the slope
    along all three; returned with its weights on (TP, predicted)."""
    K = tp.size
    step = 1e-6 * max(float(true.sum()), 1.0)
    at = np.arange(K)
    points = np.empty((3, 3 * K + 1, K))  # TP, predicted, true of: the point, then along the diagonal,
    points[0], points[1], points[2] = tp, predicted, true  # predicted alone, true alone
    points[0, 1 + at, at] += step
    points[1, 1 + at, at] += step
    points[2, 1 + at, at] += step
    points[1, 1 + K + at, at] += step
    points[2, 1 + 2 * K + at, at] += step
    values = _count_values(measure, points[0], points[1], points[2])
    slopes = (values[1:] - values[0]) / step
    diagonal, along_predicted, along_true = slopes[:K], slopes[K:2 * K], slopes[2 * K:]
    G = along_true[:, None] + along_predicted[None, :]
    G[np.arange(K), np.arange(K)] = diagonal
    # ⟨G, ΔC⟩ with the class counts fixed: Σ_j ∂predicted_j·Δpredicted_j + Σ_i (G_ii − ∂true_i − ∂predicted_i)·ΔTP_i
    return G, np.stack([diagonal - along_true - along_predicted, along_predicted])


def _scores(proba: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """``proba @ gains``; per-class weights (a diagonal G, as coordinate ascent from a diagonal start
    keeps it) by one product per entry (the same numbers: the other terms are exact zeros)."""
    if np.count_nonzero(gains - np.diag(np.diagonal(gains))) == 0:
        return proba * np.diagonal(gains)
    return proba @ gains


def _predictions(proba: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """:func:`~calopt.models.rule.gain_predictions` (the same codes), by :func:`_scores`."""
    return np.argmax(_scores(proba, gains), axis=1)


def _two_best(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best and second-best class, as ``argmax`` ranks (of equal scores the lower class);
    ``scores`` (rows, K) is overwritten."""
    first = np.argmax(scores, axis=1)
    scores[np.arange(scores.shape[0]), first] = -np.inf
    return first, np.argmax(scores, axis=1)


class _Best:
    """Each row's scores under a per-class-weight rule (a diagonal gain matrix) and its two best
    classes (the first of equal ones, as ``argmax``): a line search over column j reads the best
    other class from them instead of an argmax over every column, and a new weight of column j
    recomputes them once (:func:`_polish`). The same numbers as :func:`_scores` and ``argmax``."""

    def __init__(self, proba: np.ndarray, gains: np.ndarray):
        self.proba, self.index = proba, np.arange(proba.shape[0])
        self.scores = _scores(proba, gains)
        self._rank()

    def _rank(self) -> None:
        self.first, self.second = _two_best(self.scores.copy())

    def reweigh(self, j: int, weight: float) -> None:
        """Column j's weight is now ``weight``. A row whose two best classes do not include j keeps
        them or takes j into them by two comparisons (the other classes' scores are unchanged and
        no better than the second); a row where j was one of them is ranked again in full."""
        scores, index = self.scores, self.index
        new = self.proba[:, j] * weight
        scores[:, j] = new
        first, second = self.first, self.second
        again = (first == j) | (second == j)
        # as argmax ranks: the higher score, of equal ones the lower class
        beats_first = (new > scores[index, first]) | ((new == scores[index, first]) & (j < first))
        beats_second = (new > scores[index, second]) | ((new == scores[index, second]) & (j < second))
        first, second = (np.where(beats_first, j, first),
                         np.where(beats_first, first, np.where(beats_second, j, second)))
        rows = np.flatnonzero(again)
        if rows.size:
            first[rows], second[rows] = _two_best(scores[rows])
        self.first, self.second = first, second

    def without(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Column j's scores, and each row's best other class and its score."""
        base = np.where(self.first == j, self.second, self.first)
        return self.scores[:, j].copy(), base, self.scores[self.index, base]


def _line_search(rows: _Rows, gains: np.ndarray, j: int, best: _Best | None = None) -> tuple[float, float]:
    """The best scale of column ``j`` of ``gains`` and its value (counted: the rows a scale
    switches, not the rule's predictions).

    Scaled by s > 0, column j wins a row whose score for j is positive once s exceeds the
    row's break point (the best other score over its own); sorted, the break points cut the
    scales into intervals of equal decisions, and the statistics of each interval are the ones
    below plus the rows that switched to j. Up to :data:`EXACT_BREAKS` break points every
    interval is evaluated; beyond, every interval within a factor :data:`WINDOW` of the current
    scale (:data:`WINDOW_CUTS` evenly spaced ones and the current scale's where there are more) and
    :data:`COARSE` evenly spaced ones on each side, then every interval between the best's
    neighbours if it is outside the window or the window was thinned. Of the best intervals the one nearest the current scale (1) is
    taken (no move on a plateau), at the geometric middle of its break points (half the first,
    twice the last at the ends).
    """
    n = rows.codes.size
    if best is not None:  # ``gains``' scores and best classes, kept (:class:`_Best`)
        own, base, others = best.without(j)
    else:
        scores = _scores(rows.proba, gains)
        own = scores[:, j].copy()
        scores[:, j] = -np.inf
        base = np.argmax(scores, axis=1)
        others = scores[np.arange(n), base]
    ratio = np.divide(others, own, out=np.full(n, np.inf), where=own > 0)  # ∞: never j's
    start = np.where(ratio <= 0, j, base)  # a break ≤ 0: j's at every scale s > 0
    movable = np.flatnonzero((ratio > 0) & np.isfinite(ratio))
    if movable.size == 0:
        return 1.0, -np.inf
    # Only cuts between distinct break points count (``valid``), and a row of a run of tied ones
    # counts into the same cut wherever the run puts it: unweighted the counts are whole numbers, so
    # the faster unstable sort gives the same values to the bit (weighted sums could regroup).
    order = movable[np.argsort(ratio[movable], kind=None if rows.weight is None else "stable")]
    breaks = ratio[order]
    m = breaks.size
    valid = np.ones(m + 1, dtype=bool)  # interval i: the first i rows switched, s in (breaks[i-1], breaks[i])
    valid[1:m] = breaks[:-1] < breaks[1:]
    switched = _Switch(rows, start, order, base[order], j)
    now = int(np.searchsorted(breaks, 1.0, side="left"))  # the interval of s = 1
    thinned = False
    if m <= EXACT_BREAKS:
        cuts = np.flatnonzero(valid)
    else:
        low, high = np.searchsorted(breaks, [1 / WINDOW, WINDOW])
        chosen = np.zeros(m + 1, dtype=bool)  # the window's intervals and the coarse ones, in order
        thinned = high - low > WINDOW_CUTS
        if thinned:  # evenly spaced ones and the current scale's, refined around the best below
            chosen[np.linspace(low, high, WINDOW_CUTS).astype(np.int64)] = True
            chosen[now] = True
        else:
            chosen[low:high + 1] = True
        chosen[np.linspace(0, low, COARSE).astype(np.int64)] = True
        chosen[np.linspace(high, m, COARSE).astype(np.int64)] = True
        cuts = np.flatnonzero(chosen & valid)
    values = switched.values(cuts)
    best = int(np.argmax(values))
    if m > EXACT_BREAKS and (thinned or not low <= cuts[best] <= high):  # every interval between the best's neighbours
        inner = np.arange(cuts[max(best - 1, 0)], cuts[min(best + 1, cuts.size - 1)] + 1)
        inner = inner[valid[inner]]
        cuts, at = np.unique(np.concatenate([cuts, inner]), return_index=True)
        values = np.concatenate([values, switched.values(inner)])[at]
    highest = float(np.max(values))
    top = cuts[values >= highest - 1e-12 * max(abs(highest), 1.0)]
    i = int(top[np.argmin(np.abs(top - now))])
    if i == 0:
        scale = breaks[0] / 2
    elif i == m:
        scale = breaks[-1] * 2
    else:
        scale = float(np.sqrt(breaks[i - 1] * breaks[i]))
    return float(scale), float(values[np.searchsorted(cuts, i)])


class _Switch:
    """The rows predicting ``start``, of which those of ``order`` (in that order; their class is
    otherwise ``base``) switch to j one after another: the measure when the first i have switched,
    for the cuts i asked for (sorted), by counting each row into the first cut that includes it
    (O(rows) plus O(K) a cut for the per-class counts; K × K matrices MAX_CELLS entries at a time)."""

    def __init__(self, rows: _Rows, start: np.ndarray, order: np.ndarray, base: np.ndarray, j: int):
        self.rows, self.j, self.base = rows, j, base
        self.codes, self.weight = rows.codes[order], rows.row_weight[order]
        self.below = rows.stats(start)

    def values(self, cuts: np.ndarray) -> np.ndarray:
        rows, K, j = self.rows, self.rows.K, self.j
        first = np.searchsorted(cuts, np.arange(self.codes.size), side="right")  # the first cut past the row
        keep = first < cuts.size
        first, codes, base, weight = first[keep], self.codes[keep], self.base[keep], self.weight[keep]
        if rows.counted:
            cells = cuts.size * K
            at = first * K
            moved = np.bincount(at + j, weights=weight, minlength=cells) - np.bincount(at + base, weights=weight,
                                                                                      minlength=cells)
            deltas = np.empty((cuts.size, 2, K))
            deltas[:, 0] = (np.bincount(at + j, weights=weight * (codes == j), minlength=cells)
                            - np.bincount(at + base, weights=weight * (codes == base), minlength=cells)).reshape(-1, K)
            deltas[:, 1] = moved.reshape(-1, K)
            return rows.values(self.below + np.cumsum(deltas, axis=0))
        # each row moves from (its class, base) to (its class, j) of the confusion matrix
        out, below = [], self.below
        chunk = max(1, MAX_CELLS // (K * K))
        for lo in range(0, cuts.size, chunk):
            hi = min(lo + chunk, cuts.size)
            part = (first >= lo) & (first < hi)
            size = hi - lo
            at = (first[part] - lo) * (K * K) + codes[part] * K
            deltas = (np.bincount(at + j, weights=weight[part], minlength=size * K * K)
                      - np.bincount(at + base[part], weights=weight[part], minlength=size * K * K))
            stacked = below + np.cumsum(deltas.reshape(size, K, K), axis=0)
            out.append(rows.values(stacked))
            below = stacked[-1]
        return np.concatenate(out)


def _polish(rows: _Rows, gains: np.ndarray, rounds: int) -> tuple[np.ndarray, float]:
    """Exact coordinate ascent over the columns' scales (per-class weights), class after class until
    K searches in a row gain nothing or after ``rounds`` passes over the classes; a class's best
    scale is taken when its value, counted again on the rule's own predictions, is higher."""
    K = rows.K
    value = rows.value_of(gains)
    diagonal = np.count_nonzero(gains - np.diag(np.diagonal(gains))) == 0  # and stays so: columns scale
    best = _Best(rows.proba, gains) if diagonal else None
    idle, enough = 0, K  # searches without a gain since the last gain; K, then K - 1 (the class that gained is at its best)
    for search in range(rounds * K):
        j = search % K
        scale, counted = _line_search(rows, gains, j, best)
        idle += 1
        if counted > value + 1e-12:  # checked on the rule's own predictions (ties, rounding)
            candidate = gains.copy()
            candidate[:, j] *= scale
            if best is None:
                exact = rows.value_of(candidate)
            else:  # the kept best classes are the candidate's predictions (value_of's, the same codes)
                best.reweigh(j, candidate[j, j])
                exact = float(rows.values(rows.stats(best.first)))
                if not exact > value + 1e-12:
                    best.reweigh(j, gains[j, j])
            if exact > value + 1e-12:
                gains, value, idle, enough = candidate, exact, 0, K - 1
        if idle >= enough:
            break
    return gains, value


def choose_rule(proba: Any, codes: Any, measure: Measure, *, sample_weight: Any = None,
                iterations: int = ITERATIONS, rounds: int = ROUNDS) -> DecisionRule:
    """The gain-matrix rule that maximises ``measure`` on rows with probabilities ``proba`` (n, K)
    and true class codes ``codes`` (n,), and the Frank-Wolfe mixture (see the module docstring).

    The deterministic rule returned is never worse than the argmax on these rows: the
    argmax is a candidate, and the coordinate ascent only accepts improvements.
    """
    proba = np.asarray(proba, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    rows = _Rows(measure, proba, codes, weight)
    K = proba.shape[1]
    identity = np.eye(K)
    # the balanced rule argmax_j η_j/π_j (the best for balanced accuracy) starts the search too: where
    # the argmax leaves a class unpredicted, G-mean or min is 0 around it and has no gradient
    prior = rows.true
    balanced = np.diag(np.where(prior > 0, prior.sum() / (K * np.maximum(prior, 1e-300)), 1.0))
    starts = np.stack([rows.stats(_predictions(proba, g)) for g in (identity, balanced)])
    start_values = rows.values(starts)
    argmax_value = float(start_values[0])
    first = balanced if start_values[1] >= start_values[0] else identity
    mixture, stats, gap = _frank_wolfe(rows, first, iterations)
    best, value = _polish(rows, first, rounds)
    return DecisionRule(gains=best, value=value, argmax_value=argmax_value, mixture=tuple(mixture),
                        mixture_value=float(rows.values(stats)), gap=gap, iterations=iterations)

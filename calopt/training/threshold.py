"""The decision threshold that maximises a measure on scored data (the papers' open choice).

Every cut between distinct sorted scores is evaluated at once from cumulative confusion
counts, so tuning costs one sort. It runs in the scores' own namespace, on their device:
only the best threshold and its value come back to the host (once per epoch when the
history records them), never the score vector.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calopt.backends import device, is_numpy, namespace, to_numpy
from calopt.measures import Measure, is_monotone

__all__ = ["best_cut", "best_threshold", "cut_values", "feasible_threshold_at_share", "positive_share",
           "threshold_at_share"]


Array = Any


def _above(x: Array, xp: Any) -> Array:
    """A threshold above ``x`` that ``x`` does not pass (``x > threshold`` is false): one above it,
    or the next number above it where adding one rounds back to ``x`` (|x| ≥ 2**53 in float64,
    2**24 in float32, where "one above the highest score" would otherwise predict it positive)."""
    up = x + 1.0
    return xp.where(up > x, up, xp.nextafter(x, xp.full_like(x, xp.inf)))


def _below(x: Array, xp: Any) -> Array:
    """A threshold below ``x`` that ``x`` passes: one below it, or the next number below it."""
    down = x - 1.0
    return xp.where(down < x, down, xp.nextafter(x, xp.full_like(x, -xp.inf)))


def _between(high: Array, low: Array, xp: Any) -> Array:
    """The midpoint of two sorted scores ``high`` > ``low``, a threshold that ``high`` passes and
    ``low`` does not; ``low`` itself where the midpoint rounds up to ``high`` (two adjacent
    floating-point numbers) or overflows."""
    middle = (high + low) / 2
    return xp.where(middle < high, middle, low)


def best_cut(scores: Array, y: Array, measure: Measure, weight: Array | None = None) -> tuple[Array, Array]:
    """The threshold on ``scores`` that maximises ``measure`` for labels ``y`` (±1), and its value,
    as 0-d arrays on the scores' device; for scores (n, S), S columns cut at once ((S,) arrays).

    The counts are sums of the sample ``weight`` when given. Cuts fall between distinct
    sorted scores; the threshold is the midpoint of the best cut (one above the highest
    score, or below the lowest, at the ends; where that rounds back onto a score, the next
    number past it, so the threshold always predicts the counts the value was computed for).
    Ties between cuts go to the first, the one with the fewest positive predictions.
    """
    xp = namespace(scores, y)
    if weight is None and is_numpy(xp) and scores.shape[0] > 0 and (scores.ndim == 1 or scores.shape[1] == 1):
        # one vector, or one column (the selection's last candidate left training)
        found = _best_cut_vector(scores if scores.ndim == 1 else scores[:, 0], y, measure)
        if found is not None:
            return found if scores.ndim == 1 else (found[0][None], found[1][None])
    columns = scores if scores.ndim == 2 else xp.reshape(scores, (-1, 1))
    n = columns.shape[0]
    if n == 0:
        zero = xp.zeros(columns.shape[1:], dtype=scores.dtype, device=device(scores))
        value = measure.from_counts(zero, zero, zero, zero, xp=xp)
        return (zero, value) if scores.ndim == 2 else (zero[0], value[0])
    # Only cuts between distinct scores count (cut_values), and at those the counts above are the
    # same whatever the order within a run of tied scores: unweighted, they are whole numbers, so
    # the faster unstable sort gives the same values to the bit. Weighted sums could regroup.
    order = xp.argsort(-columns, axis=0, stable=weight is not None)
    sorted_scores = xp.take_along_axis(columns, order, axis=0)
    flat = xp.reshape(order, (-1,))
    positive = xp.reshape(xp.take(y, flat), order.shape) > 0  # (n, S) labels in each column's order
    mass = None if weight is None else xp.reshape(xp.take(weight, flat), order.shape)
    values = cut_values(sorted_scores, positive, mass, measure)
    k = xp.argmax(values, axis=0, keepdims=True)  # (1, S)
    # the scores on each side of cut k (the ends extended by one): the threshold is their midpoint,
    # or one above the highest score (nothing positive), or one below the lowest (all positive)
    padded = xp.concat([_above(sorted_scores[:1, :], xp), sorted_scores, _below(sorted_scores[-1:, :], xp)], axis=0)
    above = xp.take_along_axis(padded, k, axis=0)[0, :]
    below = xp.take_along_axis(padded, k + 1, axis=0)[0, :]
    k = k[0, :]
    threshold = xp.where(k == 0, above, xp.where(k == n, below, _between(above, below, xp)))
    value = xp.take_along_axis(values, xp.reshape(k, (1, -1)), axis=0)[0, :]
    return (threshold, value) if scores.ndim == 2 else (threshold[0], value[0])


def _best_cut_vector(scores: np.ndarray, y: np.ndarray, measure: Measure) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`best_cut` of unweighted NumPy scores (n,), n ≥ 1: the same numbers, from sorted
    values instead of a sorting permutation (NumPy's vectorised sort is several times faster
    than its argsort: a large data set's cut on the 900,000 rows it did not train on at 10⁶).

    At an admitted cut k (the k highest scores, above the k-th highest s) the positives above
    are those scoring at least s, counted in the sorted positive scores; at the others (inside
    a run of tied scores) the value is −inf whatever the counts. None for NaN scores (sorted
    first here, last by the permutation): the column form then."""
    n = scores.shape[0]
    ascending = np.sort(scores)
    if np.isnan(ascending[-1]):
        return None
    positives = np.sort(scores[y > 0])
    hits = np.empty(n + 1, dtype=scores.dtype)
    hits[0] = 0
    # the positives scoring at least the j-th lowest score, for the j-th highest position (k = n − j)
    at_least = positives.size - np.searchsorted(positives, ascending, side="left")
    hits[1:] = at_least[::-1]
    sorted_scores = ascending[::-1]
    tp = hits  # the column form's 0.0 + counts: the same numbers (whole, at least 0)
    fp = np.arange(n + 1, dtype=scores.dtype)
    fp -= hits  # k − hits
    valid = np.empty(n + 1, dtype=bool)
    valid[0] = valid[n] = True
    np.greater(sorted_scores[:-1], sorted_scores[1:], out=valid[1:n])
    values = None
    if n + 1 >= 16 * CUT_BLOCK and is_monotone(measure):
        values = _bounded_values(tp, fp, valid, measure)
    if values is None:
        values = np.where(valid, measure.from_counts(tp, fp, fp[-1] - fp, tp[-1] - tp, xp=np), -np.inf)
    best = int(np.argmax(values))
    if best == 0:
        threshold = _above(sorted_scores[0], np)
    elif best == n:
        threshold = _below(sorted_scores[n - 1], np)
    else:
        threshold = _between(sorted_scores[best - 1], sorted_scores[best], np)
    return np.asarray(threshold, dtype=scores.dtype), np.asarray(values[best])


#: Consecutive cuts a block of :func:`_bounded_values` (a monotone measure's best cut of one large score vector).
CUT_BLOCK = 1024
#: How far below the best value found a block's bound may fall and the block still be evaluated: a
#: margin for the rounding of the measure's formula (a few units in the last place), so that the
#: cuts skipped hold no value a full evaluation would have chosen.
BOUND_SLACK = 1e-9


def _bounded_values(tp: np.ndarray, fp: np.ndarray, valid: np.ndarray, measure: Measure) -> np.ndarray | None:
    """The measure at the admitted cuts of the blocks of CUT_BLOCK consecutive cuts that can
    hold the best, −inf elsewhere (the same argmax as every cut's values), for an
    :func:`~calopt.measures.is_monotone` measure and the counts ``tp``, ``fp`` above each cut
    (non-decreasing over the admitted cuts). A block's values are at most the measure at its
    corner (the most true positives and the fewest false ones of its admitted cuts); the block
    of the highest corner is evaluated first, then every block whose corner reaches its best
    value less BOUND_SLACK. At 900,000 cuts a few thousand values instead of every one (the
    measure's formula was half of the cut's time). None where a corner is not finite: evaluate
    them all."""
    size, positives, negatives = tp.size, tp[-1], fp[-1]

    def measured(at: np.ndarray) -> np.ndarray:
        return np.where(valid[at], measure.from_counts(tp[at], fp[at], negatives - fp[at], positives - tp[at],
                                                        xp=np), -np.inf)

    starts = np.arange(0, size, CUT_BLOCK)
    ends = np.minimum(starts + CUT_BLOCK, size) - 1
    # the counts are those of the cuts only at the admitted ones (inside a run of tied scores they
    # are the whole run's): each block's first and last admitted cut (0 and n always are)
    admitted = np.flatnonzero(valid)
    first = admitted[np.searchsorted(admitted, starts)]
    last = admitted[np.searchsorted(admitted, ends, side="right") - 1]
    corner = measure.from_counts(tp[last], fp[first], negatives - fp[first], positives - tp[last], xp=np)
    if not np.all(np.isfinite(corner)):
        return None
    corner = np.where(first <= ends, corner, -np.inf)  # a block inside a run of ties admits no cut
    top = int(np.argmax(corner))
    found = float(np.max(measured(np.arange(starts[top], ends[top] + 1))))  # finite: it admits a cut
    runs = corner >= found - BOUND_SLACK * max(1.0, abs(found))
    at = np.flatnonzero(np.repeat(runs, CUT_BLOCK)[:size])
    values = np.full(size, -np.inf, dtype=corner.dtype)
    values[at] = measured(at)
    return values


def cut_values(sorted_scores: Array, positive: Array, mass: Array, measure: Measure, *,
               above: tuple[float, float] = (0.0, 0.0), totals: tuple[Any, Any] | None = None) -> Array:
    """The measure at every cut of scores sorted in decreasing order, (n + 1, S) for (n, S): the
    cut after position k predicts the first k rows positive; −inf where the k-th and (k+1)-th
    scores are equal (no threshold falls between them).

    ``positive`` (bool) and ``mass`` (the rows' weights; None: 1 each) are in the scores' order.
    ``above`` is the (positive, negative) mass above the first score and ``totals`` the whole
    set's, for scores that are a window of a larger set (default: nothing above, these rows).
    """
    xp = namespace(sorted_scores)
    if mass is None:  # counts: the negatives above cut k are the k rows less the positives (exact)
        hits = xp.cumulative_sum(xp.astype(positive, sorted_scores.dtype), axis=0, include_initial=True)
        k = xp.arange(sorted_scores.shape[0] + 1, dtype=sorted_scores.dtype, device=device(sorted_scores))
        tp, fp = above[0] + hits, above[1] + (k[:, None] - hits)
    else:
        zero = xp.zeros_like(sorted_scores)
        tp = above[0] + xp.cumulative_sum(xp.where(positive, mass, zero), axis=0, include_initial=True)
        fp = above[1] + xp.cumulative_sum(xp.where(positive, zero, mass), axis=0, include_initial=True)
    n_pos, n_neg = (tp[-1:, :], fp[-1:, :]) if totals is None else totals
    values = measure.from_counts(tp, fp, n_neg - fp, n_pos - tp, xp=xp)
    edge = xp.ones((1, sorted_scores.shape[1]), dtype=xp.bool, device=device(sorted_scores))
    valid = xp.concat([edge, sorted_scores[:-1, :] > sorted_scores[1:, :], edge], axis=0)
    return xp.where(valid, values, xp.full_like(values, -xp.inf))


def positive_share(scores: Array, threshold: Array, weight: Array | None = None) -> Array:
    """The (weighted) share of ``scores`` above ``threshold``, a 0-d array on their device (scores
    (n, S) and thresholds (S,): one share per column)."""
    xp = namespace(scores)
    above = xp.astype(scores > threshold, scores.dtype)
    if weight is None:
        return xp.mean(above, axis=0)
    weight = weight if above.ndim == 1 else weight[:, None]
    return xp.sum(above * weight, axis=0) / xp.sum(weight)


def threshold_at_share(scores: Array, share: float, weight: Array | None = None) -> Array:
    """The threshold that puts the (weighted) share ``share`` of ``scores`` above it, a 0-d array.

    A cut between sorted scores as :func:`best_cut` makes: the midpoint of the two scores
    around the cut whose share above is nearest ``share``; one above the highest score for
    0, one below the lowest for 1 (the next number past them where one rounds back).
    """
    if (weight is None and is_numpy(namespace(scores)) and scores.ndim == 1
            and 0 < scores.shape[0] < 2 ** (np.finfo(scores.dtype).nmant + 1)):
        return _nearest_share_selected(scores, share)
    return _cut_nearest_share(scores, share, weight)[0]


def _nearest_share_selected(scores: Any, share: float) -> Any:
    """:func:`_cut_nearest_share`'s threshold for unweighted NumPy scores without sorting them (the
    same number to the bit), in O(n): the admitted cuts nearest the target T = share·n are the two
    around the run of the ⌈T⌉-th highest score s, a = #(scores > s) and c = #(scores ≥ s) (no cut
    falls inside the run, and a < ⌈T⌉ ≤ c), found by one selection (``np.partition``) and counts.
    A history row and the selection's shares take it every pass (a full sort was 15% of a
    50,000-row fit)."""
    n = scores.shape[0]
    target = min(max(int(np.ceil(share * n)), 0), n)
    if target == 0:  # cut 0, admitted whatever the scores: one above the highest
        return np.asarray(_above(np.max(scores), np))
    s = np.partition(scores, n - target)[n - target]  # the target-th highest
    higher = scores > s
    a, c = int(np.count_nonzero(higher)), int(np.count_nonzero(scores >= s))
    # as the sorted route: the shares above cut k are the counts over the total in the scores' dtype
    # (exact counts: n below 2**24 in float32), ties to a
    shares = np.asarray([a, c], dtype=scores.dtype) / np.asarray(n, dtype=scores.dtype)
    distance = np.abs(shares - share)
    k = a if distance[0] <= distance[1] else c
    if k == a:
        high = np.min(scores, where=higher, initial=np.inf) if a > 0 else _above(s, np)
        low = s
    else:
        lower = scores < s
        high = s
        low = np.max(scores, where=lower, initial=-np.inf) if c < n else _below(s, np)
    return np.asarray(high if k == 0 else low if k == n else _between(high, low, np))


def feasible_threshold_at_share(scores: Array, y: Array, measure: Any, share: float,
                                weight: Array | None = None) -> tuple[Array, Array]:
    """The threshold nearest the positive ``share`` among those at which every constraint of
    ``measure`` (a :class:`~calopt.constraints.ConstrainedMeasure`) holds on (``scores``, labels
    ``y`` ±1), and whether any does (0-d arrays on the scores' device).

    Cuts as :func:`threshold_at_share` makes them (ties between shares go to the cut with
    fewer positive predictions); where no cut is feasible the threshold is meaningless and
    the flag is False.
    """
    xp = namespace(scores, y)

    def feasible(order: Array, mass: Array) -> Array:
        positive = xp.take(y, order) > 0
        zero = xp.zeros_like(mass)
        tp = xp.cumulative_sum(xp.where(positive, mass, zero), include_initial=True)
        fp = xp.cumulative_sum(xp.where(positive, zero, mass), include_initial=True)
        return measure.feasible(tp, fp, fp[-1] - fp, tp[-1] - tp, xp=xp)

    return _cut_nearest_share(scores, share, weight, feasible)


def _cut_nearest_share(scores: Array, share: float, weight: Array | None,
                       allowed: Any = None) -> tuple[Array, Array]:
    """The threshold of the cut between distinct sorted scores whose (weighted) share above is
    nearest ``share`` among the cuts ``allowed(order, mass)`` admits (a boolean per cut k = 0..n,
    from the scores' descending ``order`` and the rows' weights in it; None: every cut), and
    whether any is admitted. Ties between shares go to the cut with fewer positive predictions."""
    xp = namespace(scores)
    n = scores.shape[0]
    order = xp.argsort(-scores, stable=True)
    sorted_scores = xp.take(scores, order)
    mass = xp.ones_like(sorted_scores) if weight is None else xp.take(weight, order)
    above = xp.cumulative_sum(mass, include_initial=True) / xp.sum(mass)  # share above cut k, k = 0..n
    edge = xp.ones((1,), dtype=xp.bool, device=device(scores))
    admitted = xp.concat([edge, sorted_scores[:-1] > sorted_scores[1:], edge])
    if allowed is not None:
        admitted = admitted & allowed(order, mass)
    k = xp.argmin(xp.where(admitted, xp.abs(above - share), xp.full_like(above, xp.inf)))
    padded = xp.concat([_above(sorted_scores[:1], xp), sorted_scores, _below(sorted_scores[-1:], xp)])
    high, low = xp.unstack(xp.take(padded, xp.stack([k, k + 1])))
    return xp.where(k == 0, high, xp.where(k == n, low, _between(high, low, xp))), xp.any(admitted)


def best_threshold(scores: Array, y: Array, measure: Measure, weight: Array | None = None) -> tuple[float, float]:
    """:func:`best_cut` as Python floats (one transfer to the host)."""
    threshold, value = best_cut(scores, y, measure, weight)
    pair = to_numpy(namespace(threshold).stack([threshold, value]))
    return float(pair[0]), float(pair[1])

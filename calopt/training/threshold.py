"""The decision threshold that maximises a measure on scored data (the papers' open choice).

Every cut between distinct sorted scores is evaluated at once from cumulative confusion
counts, so tuning costs one sort. It runs in the scores' own namespace, on their device:
only the best threshold and its value come back to the host (once per epoch when the
history records them), never the score vector.
"""

from __future__ import annotations

from typing import Any

from calopt.backends import device, namespace, to_numpy
from calopt.measures import Measure

__all__ = ["best_cut", "best_threshold"]

Array = Any


def best_cut(scores: Array, y: Array, measure: Measure, weight: Array | None = None) -> tuple[Array, Array]:
    """The threshold on ``scores`` that maximises ``measure`` for labels ``y`` (±1), and its value,
    as 0-d arrays on the scores' device.

    The counts are sums of the sample ``weight`` when given. Cuts fall between distinct
    sorted scores; the threshold is the midpoint of the best cut (one above the highest
    score, or below the lowest, at the ends). Ties between cuts go to the first, the one
    with the fewest positive predictions.
    """
    xp = namespace(scores, y)
    n = scores.shape[0]
    order = xp.argsort(-scores, stable=True)
    sorted_scores = xp.take(scores, order)
    positive = xp.take(y, order) > 0
    zero, one = xp.zeros_like(sorted_scores), xp.ones_like(sorted_scores)
    mass = one if weight is None else xp.take(weight, order)
    tp = xp.cumulative_sum(xp.where(positive, mass, zero), include_initial=True)
    fp = xp.cumulative_sum(xp.where(positive, zero, mass), include_initial=True)
    n_pos, n_neg = tp[-1], fp[-1]
    values = measure.from_counts(tp, fp, n_neg - fp, n_pos - tp, xp=xp)
    # a cut after position k is valid where the k-th and (k+1)-th scores differ
    edge = xp.ones((1,), dtype=xp.bool, device=device(scores))
    valid = xp.concat([edge, sorted_scores[:-1] > sorted_scores[1:], edge]) if n else edge
    values = xp.where(valid, values, xp.full_like(values, -xp.inf))
    k = xp.argmax(values)
    if n == 0:
        return xp.asarray(0.0, dtype=scores.dtype, device=device(scores)), values[0]
    # the scores on each side of cut k (the ends extended by one): the threshold is their midpoint,
    # or one above the highest score (nothing positive), or one below the lowest (all positive)
    padded = xp.concat([sorted_scores[:1] + 1.0, sorted_scores, sorted_scores[-1:] - 1.0])
    above, below = xp.unstack(xp.take(padded, xp.stack([k, k + 1])))
    threshold = xp.where(k == 0, above, xp.where(k == n, below, (above + below) / 2))
    return threshold, xp.take(values, xp.reshape(k, (1,)))[0]


def best_threshold(scores: Array, y: Array, measure: Measure, weight: Array | None = None) -> tuple[float, float]:
    """:func:`best_cut` as Python floats (one transfer to the host)."""
    threshold, value = best_cut(scores, y, measure, weight)
    pair = to_numpy(namespace(threshold).stack([threshold, value]))
    return float(pair[0]), float(pair[1])

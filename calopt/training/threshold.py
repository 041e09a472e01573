"""The decision threshold that maximises a measure on scored data (the papers' open choice).

Every cut between distinct sorted scores is evaluated at once from cumulative confusion
counts, so tuning costs one sort.
"""

from __future__ import annotations

import numpy as np

from calopt.backends import get_backend
from calopt.measures import Measure

__all__ = ["best_threshold"]

_NUMPY = get_backend("numpy")


def best_threshold(scores: np.ndarray, y: np.ndarray, measure: Measure,
                   weight: np.ndarray | None = None) -> tuple[float, float]:
    """The threshold on ``scores`` that maximises ``measure`` for labels ``y`` (±1), and its value.

    Every cut between distinct sorted scores is evaluated at once from cumulative
    confusion counts (sums of the sample ``weight`` when given); the threshold is the
    midpoint of the best cut.
    """
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    sorted_scores, positive = scores[order], np.asarray(y)[order] > 0
    if weight is None:
        tp = np.concatenate([[0.0], np.cumsum(positive, dtype=np.float64)])
        fp = np.arange(scores.size + 1, dtype=np.float64) - tp
    else:
        weight = np.asarray(weight, dtype=np.float64)[order]
        tp = np.concatenate([[0.0], np.cumsum(np.where(positive, weight, 0.0))])
        fp = np.concatenate([[0.0], np.cumsum(np.where(positive, 0.0, weight))])
    n_pos, n_neg = tp[-1], fp[-1]
    # a cut after position k is valid where the k-th and (k+1)-th scores differ
    valid = np.ones(scores.size + 1, dtype=bool)
    valid[1:-1] = sorted_scores[:-1] > sorted_scores[1:]
    values = np.asarray(measure.from_counts(tp, fp, n_neg - fp, n_pos - tp, xp=_NUMPY.xp))
    values = np.where(valid, values, -np.inf)
    k = int(np.argmax(values))
    if k == 0:
        threshold = sorted_scores[0] + 1.0 if scores.size else 0.0
    elif k == scores.size:
        threshold = sorted_scores[-1] - 1.0
    else:
        threshold = (sorted_scores[k - 1] + sorted_scores[k]) / 2
    return float(threshold), float(values[k])

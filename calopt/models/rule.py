"""How a multiclass model decides for its measure: a gain-matrix rule on the softmax probabilities.

A multinomial model's scores give each row its class probabilities η(x) (the softmax).
The argmax of η is the rule for accuracy; for G-mean, min-recall or macro-F1 over K classes
the rule that training chose (:mod:`calopt.training.decision`) predicts
``argmax_j Σ_i η_i(x) G[i, j]`` for a K × K gain matrix G (:func:`gain_predictions`), or,
when a randomised rule was asked for, draws each row's rule from the Frank-Wolfe mixture
``(weights[t], gains[t])`` (:func:`mixture_predictions`). Kept here, beside the models,
so that prediction never imports training.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gain_predictions", "mixture_predictions", "softmax"]


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax of host scores (n, K), shifted so that exp cannot overflow."""
    shifted = np.exp(scores - np.max(scores, axis=1, keepdims=True))
    return shifted / np.sum(shifted, axis=1, keepdims=True)


def gain_predictions(proba: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """``argmax_j (proba @ gains)[:, j]`` (ties to the smaller class, as ``argmax``)."""
    return np.argmax(proba @ gains, axis=1)


def mixture_predictions(proba: np.ndarray, weights: np.ndarray, gains: np.ndarray, seed: int) -> np.ndarray:
    """Class codes drawn from the mixture: row i uses rule t with probability ``weights[t]``
    (``gains`` (T, K, K)); the draws come from ``seed``, so the same rows give the same codes."""
    rng = np.random.default_rng(seed)
    which = rng.choice(weights.size, size=proba.shape[0], p=weights / weights.sum())
    out = np.empty(proba.shape[0], dtype=np.int64)
    for t in np.unique(which):
        rows = which == t
        out[rows] = gain_predictions(proba[rows], gains[t])
    return out

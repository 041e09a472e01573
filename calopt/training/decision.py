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
2. **A deterministic rule**: the best of the Frank-Wolfe rules and the argmax, polished by
   exact coordinate ascent on the scale of each column of G (per-class weights): for one
   class at a time every distinct decision its weight can give is evaluated at once (the
   rows switch to the class at sorted break points), which for two classes is the exact
   threshold search.

The measure is evaluated by :meth:`calopt.Measure.from_confusion` on stacks of confusion
matrices; gradients by forward differences, so any registered measure serves.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from calopt.measures import Measure

__all__ = ["DecisionRule", "choose_rule", "gain_predictions"]

#: Frank-Wolfe iterations by default (the gap of the concave measures is then ~1e-3).
ITERATIONS = 40
#: Rounds of coordinate ascent over the classes' weights.
ROUNDS = 3
#: The most break points evaluated for one class's weight (evenly spaced ranks beyond that:
#: the search is exact on up to this many rows that can switch).
MAX_BREAKS = 512


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
        proba = np.asarray(proba, dtype=np.float64)
        weights = np.array([weight for weight, _ in self.mixture])
        which = rng.choice(len(self.mixture), size=proba.shape[0], p=weights / weights.sum())
        out = np.empty(proba.shape[0], dtype=np.int64)
        for k, (_, gains) in enumerate(self.mixture):
            rows = which == k
            out[rows] = gain_predictions(proba[rows], gains)
        return out


def gain_predictions(proba: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """``argmax_j (proba @ gains)[:, j]`` (ties to the smaller class, as ``argmax``)."""
    return np.argmax(proba @ gains, axis=1)


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


def _frank_wolfe(measure: Measure, proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None,
                 start: np.ndarray, iterations: int) -> tuple[list[tuple[float, np.ndarray]], np.ndarray, float]:
    """The Frank-Wolfe mixture from the argmax rule: its rules with weights, its confusion and gap."""
    K = proba.shape[1]
    C = _confusion(codes, gain_predictions(proba, start), K, weight)
    mixture: list[tuple[float, np.ndarray]] = [(1.0, start)]
    gap = np.inf
    for t in range(iterations):
        G = _gradient(measure, C)
        rule_C = _confusion(codes, gain_predictions(proba, G), K, weight)
        gap = float(np.sum(G * (rule_C - C)))
        step = 2.0 / (t + 3)
        C = (1 - step) * C + step * rule_C
        mixture = [(w * (1 - step), g) for w, g in mixture] + [(step, G)]
    return mixture, C, gap


def _coordinate_search(measure: Measure, proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None,
                       gains: np.ndarray, j: int) -> tuple[np.ndarray, float]:
    """The best scale of column ``j`` of ``gains``: every distinct decision it can give, evaluated at once.

    Scaled by s > 0, column j wins a row whose score for j is positive once s exceeds the
    row's break point (the best other score over its own); sorted, the break points cut
    the scales into intervals of equal decisions, and the confusion matrix of each
    interval is the one below plus the rows that switched to j (cumulative sums).
    """
    K = proba.shape[1]
    scores = proba @ gains
    masked = np.where(np.arange(K) == j, -np.inf, scores)
    base, others, own = np.argmax(masked, axis=1), np.max(masked, axis=1), scores[:, j]
    usable = own > 0
    breaks = np.unique(others[usable] / own[usable])
    breaks = breaks[breaks > 0]  # a row whose break is ≤ 0 goes to j at every scale s > 0
    if breaks.size > MAX_BREAKS:
        breaks = breaks[np.unique(np.linspace(0, breaks.size - 1, MAX_BREAKS).astype(np.int64))]
    if breaks.size == 0:
        return gains, -np.inf
    # one scale inside each interval: below the first break, between breaks, above the last
    scales = np.concatenate([breaks[:1] / 2, (breaks[:-1] + breaks[1:]) / 2, breaks[-1:] * 2])
    row_weight = np.ones(codes.size) if weight is None else weight
    switch = np.where(usable, np.searchsorted(scales, np.divide(others, own, out=np.full(own.shape, np.inf),
                                                                 where=usable), side="right"), scales.size)
    deltas = np.zeros((scales.size + 1, K, K))
    np.add.at(deltas, (switch, codes, np.full(codes.size, j)), row_weight)
    np.add.at(deltas, (switch, codes, base), -row_weight)
    below = _confusion(codes, base, K, weight)
    matrices = below + np.cumsum(deltas, axis=0)[:scales.size]
    best = int(np.argmax(_value(measure, matrices)))
    scaled = gains.copy()
    scaled[:, j] *= scales[best]
    exact = float(_value(measure, _confusion(codes, gain_predictions(proba, scaled), K, weight)))
    return scaled, exact


def _polish(measure: Measure, proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None,
            gains: np.ndarray, rounds: int) -> tuple[np.ndarray, float]:
    """Exact coordinate ascent over the columns' scales, ``rounds`` passes over the classes."""
    K = proba.shape[1]
    value = float(_value(measure, _confusion(codes, gain_predictions(proba, gains), K, weight)))
    for _ in range(rounds):
        before = value
        for j in range(K):
            candidate, candidate_value = _coordinate_search(measure, proba, codes, weight, gains, j)
            if candidate_value > value:
                gains, value = candidate, candidate_value
        if value <= before:
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
    K = proba.shape[1]
    identity = np.eye(K)
    argmax_value = float(_value(measure, _confusion(codes, gain_predictions(proba, identity), K, weight)))
    mixture, C, gap = _frank_wolfe(measure, proba, codes, weight, identity, iterations)
    candidates = [identity] + [g for _, g in mixture[1:]]
    stacked = np.stack([_confusion(codes, gain_predictions(proba, g), K, weight) for g in candidates])
    start = candidates[int(np.argmax(_value(measure, stacked)))]
    best, value = _polish(measure, proba, codes, weight, start, rounds)
    plain, plain_value = _polish(measure, proba, codes, weight, identity, rounds)
    if plain_value > value:
        best, value = plain, plain_value
    return DecisionRule(gains=best, value=value, argmax_value=argmax_value, mixture=tuple(mixture),
                        mixture_value=float(_value(measure, C)), gap=gap, iterations=iterations)

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
2. **A deterministic rule**: the best of the Frank-Wolfe rules and the start (the argmax,
   or the balanced rule ``argmax_j η_j/π_j`` when it scores as high: G-mean and min are 0,
   without a gradient, around an argmax that never predicts a class, and where both are 0
   the balanced rule is the one whose recalls are all positive more often), polished by
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
from calopt.models.rule import gain_predictions, mixture_predictions

__all__ = ["DecisionRule", "choose_rule", "gain_predictions"]

#: Frank-Wolfe iterations by default (the gap of the concave measures is then ~1e-3).
ITERATIONS = 40
#: Rounds of coordinate ascent over the classes' weights.
ROUNDS = 3
#: The most confusion-matrix entries evaluated at once for one class's weight: up to
#: MAX_CELLS / K² break points (at least 64) are evaluated exactly; beyond that, evenly spaced
#: ranks of them first, then every break of the best interval between them.
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


def _frank_wolfe(measure: Measure, proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None,
                 start: np.ndarray, iterations: int) -> tuple[list[tuple[float, np.ndarray]], np.ndarray, float]:
    """The Frank-Wolfe mixture from the rule ``start``: its rules with weights, its confusion and gap."""
    K = proba.shape[1]
    C = _confusion(codes, gain_predictions(proba, start), K, weight)
    mixture: list[tuple[float, np.ndarray]] = [(1.0, start)]
    gap = np.inf
    gradient = _gradient_of(measure, C) if iterations else _gradient
    for t in range(iterations):
        G = gradient(measure, C)
        rule_C = _confusion(codes, gain_predictions(proba, G), K, weight)
        gap = float(np.sum(G * (rule_C - C)))
        step = 2.0 / (t + 3)
        C = (1 - step) * C + step * rule_C
        mixture = [(w * (1 - step), g) for w, g in mixture] + [(step, G)]
    return mixture, C, gap


def _interval_scales(breaks: np.ndarray) -> np.ndarray:
    """One scale inside each interval of sorted break points: below the first, between, above the last."""
    return np.concatenate([breaks[:1] / 2, (breaks[:-1] + breaks[1:]) / 2, breaks[-1:] * 2])


def _scale_values(measure: Measure, codes: np.ndarray, row_weight: np.ndarray, below: np.ndarray,
                  base: np.ndarray, ratio: np.ndarray, j: int, scales: np.ndarray) -> np.ndarray:
    """The measure at each of the sorted ``scales`` of column j: the confusion matrix ``below`` (every
    row at its ``base`` class) plus the rows whose break ``ratio`` the scale exceeds, moved to j."""
    K = below.shape[0]
    switch = np.searchsorted(scales, ratio, side="right")  # the first scale index at which the row is j's
    # rows that switch at scale index s move from (code, base) to (code, j): one bincount each way
    cells = (scales.size + 1) * K * K
    at = switch * (K * K) + codes * K
    deltas = (np.bincount(at + j, weights=row_weight, minlength=cells)
              - np.bincount(at + base, weights=row_weight, minlength=cells)).reshape(scales.size + 1, K, K)
    return _value(measure, below + np.cumsum(deltas, axis=0)[:scales.size])


def _coordinate_search(measure: Measure, proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None,
                       gains: np.ndarray, j: int) -> tuple[np.ndarray, float]:
    """The best scale of column ``j`` of ``gains`` and its value (counted: the rows a scale
    switches, not the rule's predictions): every distinct decision it can give, evaluated at once.

    Scaled by s > 0, column j wins a row whose score for j is positive once s exceeds the
    row's break point (the best other score over its own); sorted, the break points cut
    the scales into intervals of equal decisions, and the confusion matrix of each
    interval is the one below plus the rows that switched to j (cumulative sums). Beyond
    :data:`MAX_CELLS` / K² break points, evenly spaced ranks of them are evaluated first, then
    every interval between the best one's neighbours (exact while the best interval holds no more than that).
    """
    K = proba.shape[1]
    scores = proba @ gains
    masked = np.where(np.arange(K) == j, -np.inf, scores)
    base, others, own = np.argmax(masked, axis=1), np.max(masked, axis=1), scores[:, j]
    usable = own > 0
    ratio = np.divide(others, own, out=np.full(own.shape, np.inf), where=usable)  # ∞: never j's
    breaks = np.unique(ratio[usable])
    breaks = breaks[breaks > 0]  # a row whose break is ≤ 0 goes to j at every scale s > 0
    if breaks.size == 0:
        return gains, -np.inf
    row_weight = np.ones(codes.size) if weight is None else weight
    below = _confusion(codes, base, K, weight)
    most = max(64, MAX_CELLS // (K * K))
    ranks = np.unique(np.linspace(0, breaks.size - 1, min(most, breaks.size)).astype(np.int64))
    scales = _interval_scales(breaks[ranks])
    values = _scale_values(measure, codes, row_weight, below, base, ratio, j, scales)
    best = int(np.argmax(values))
    best_value = float(values[best])
    if ranks.size < breaks.size:  # zoom in: every break between the best interval's ends
        low, high = ranks[max(best - 1, 0)], ranks[min(best, ranks.size - 1)]
        inner = breaks[low:high + 1]
        zoom = _interval_scales(inner[np.unique(np.linspace(0, inner.size - 1, min(most, inner.size))
                                                .astype(np.int64))])
        zoom_values = _scale_values(measure, codes, row_weight, below, base, ratio, j, zoom)
        if zoom_values.max() > best_value:
            scales, best, best_value = zoom, int(np.argmax(zoom_values)), float(zoom_values.max())
    scaled = gains.copy()
    scaled[:, j] *= scales[best]
    return scaled, best_value


def _polish(measure: Measure, proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None,
            gains: np.ndarray, rounds: int) -> tuple[np.ndarray, float]:
    """Exact coordinate ascent over the columns' scales, ``rounds`` passes over the classes (a
    class's best scale is taken when its value, counted again on the rule's own predictions,
    is higher)."""
    K = proba.shape[1]
    value = float(_value(measure, _confusion(codes, gain_predictions(proba, gains), K, weight)))
    for _ in range(rounds):
        before = value
        for j in range(K):
            candidate, counted = _coordinate_search(measure, proba, codes, weight, gains, j)
            if counted > value:  # the counted value, checked on the rule's own predictions (ties, rounding)
                exact = float(_value(measure, _confusion(codes, gain_predictions(proba, candidate), K, weight)))
                if exact > value:
                    gains, value = candidate, exact
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
    # the balanced rule argmax_j η_j/π_j (the best for balanced accuracy) starts the search too: where
    # the argmax leaves a class unpredicted, G-mean or min is 0 around it and has no gradient
    prior = np.bincount(codes, weights=weight, minlength=K).astype(np.float64)
    balanced = np.diag(np.where(prior > 0, prior.sum() / (K * np.maximum(prior, 1e-300)), 1.0))
    starts = np.stack([_confusion(codes, gain_predictions(proba, g), K, weight) for g in (identity, balanced)])
    start_values = _value(measure, starts)
    argmax_value = float(start_values[0])
    first = balanced if start_values[1] >= start_values[0] else identity
    mixture, C, gap = _frank_wolfe(measure, proba, codes, weight, first, iterations)
    candidates = [first] + [g for _, g in mixture[1:]]
    stacked = np.stack([_confusion(codes, gain_predictions(proba, g), K, weight) for g in candidates])
    start = candidates[int(np.argmax(_value(measure, stacked)))]
    best, value = _polish(measure, proba, codes, weight, start, rounds)
    if start is not first:  # the per-class weights from the start too (for two classes: the exact threshold)
        plain, plain_value = _polish(measure, proba, codes, weight, first, rounds)
        if plain_value > value:
            best, value = plain, plain_value
    return DecisionRule(gains=best, value=value, argmax_value=argmax_value, mixture=tuple(mixture),
                        mixture_value=float(_value(measure, C)), gap=gap, iterations=iterations)

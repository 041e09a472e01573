"""The K-class decision rule (calopt.training.decision): against brute force, a plain coordinate
ascent and the argmax, on probabilities whose labels are drawn from them."""

from __future__ import annotations

import numpy as np
import pytest

from calopt import get_measure
from calopt.measures import confusion_matrix
from calopt.training.decision import choose_rule, gain_predictions


def _long_tailed(n: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities of a long-tailed K-class problem (the largest class ~10x the smallest), and
    labels drawn from them, so the probabilities are calibrated."""
    rng = np.random.default_rng(seed)
    prior = np.geomspace(1.0, 0.1, K)
    logits = rng.normal(size=(n, K)) * 1.5 + np.log(prior / prior.sum())
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    codes = np.array([rng.choice(K, p=p) for p in proba])
    return proba, codes


def _measure_of(spec, codes, predicted, K, weight=None):
    return float(get_measure(spec).from_confusion(confusion_matrix(codes, predicted, K, xp=np, weight=weight), xp=np))


@pytest.mark.parametrize("spec", ["gmean", "hmean", "min", "f1", "balanced-accuracy"])
def test_two_classes_reach_the_best_threshold_by_brute_force(spec):
    proba, codes = _long_tailed(400, 2, seed=1)
    rule = choose_rule(proba, codes, get_measure(spec))
    cuts = np.unique(proba[:, 1])
    best = max(_measure_of(spec, codes, (proba[:, 1] >= c).astype(int), 2) for c in cuts)
    assert rule.value == pytest.approx(best, abs=1e-12)
    assert _measure_of(spec, codes, rule.predict(proba), 2) == pytest.approx(rule.value, abs=1e-12)


def _plain_coordinate_ascent(spec, proba, codes, K, grid=np.geomspace(0.05, 20, 61), rounds=3):
    """The competitor of the issue: per-class weights by coordinate ascent on a grid (plain loops)."""
    weights = np.ones(K)
    value = _measure_of(spec, codes, np.argmax(proba * weights, axis=1), K)
    for _ in range(rounds):
        for j in range(K):
            for g in grid:
                trial = weights.copy()
                trial[j] = g
                v = _measure_of(spec, codes, np.argmax(proba * trial, axis=1), K)
                if v > value:
                    weights, value = trial, v
    return value


@pytest.mark.parametrize("spec", ["gmean", "min", "f1", "balanced-accuracy"])
@pytest.mark.parametrize("K", [3, 5])
def test_the_rule_beats_the_argmax_and_matches_coordinate_ascent(spec, K):
    proba, codes = _long_tailed(600, K, seed=K)
    rule = choose_rule(proba, codes, get_measure(spec))
    argmax = _measure_of(spec, codes, np.argmax(proba, axis=1), K)
    assert rule.argmax_value == pytest.approx(argmax, abs=1e-12)
    assert rule.value >= argmax - 1e-12
    assert _measure_of(spec, codes, rule.predict(proba), K) == pytest.approx(rule.value, abs=1e-12)
    assert rule.value >= _plain_coordinate_ascent(spec, proba, codes, K) - 0.005


def test_frank_wolfe_reports_its_mixture_and_a_small_gap():
    proba, codes = _long_tailed(800, 4, seed=7)
    rule = choose_rule(proba, codes, get_measure("gmean"), iterations=60)
    weights = np.array([w for w, _ in rule.mixture])
    assert weights.sum() == pytest.approx(1.0) and np.all(weights >= 0)
    expected = sum(w * confusion_matrix(codes, gain_predictions(proba, g), 4, xp=np) for w, g in rule.mixture)
    assert rule.mixture_value == pytest.approx(float(get_measure("gmean").from_confusion(expected, xp=np)), abs=1e-9)
    assert np.isfinite(rule.gap) and rule.gap < 0.05
    assert rule.mixture_value > rule.argmax_value


def test_the_randomised_rule_uses_each_rule_with_its_weight():
    proba, codes = _long_tailed(300, 3, seed=3)
    rule = choose_rule(proba, codes, get_measure("gmean"), iterations=5)
    draws = rule.predict_randomised(np.repeat(proba[:1], 20000, axis=0), np.random.default_rng(0))
    expected = np.zeros(3)
    for w, g in rule.mixture:
        expected[gain_predictions(proba[:1], g)[0]] += w
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / draws.size, expected, atol=0.02)


def test_sample_weights_count_as_repeated_rows():
    proba, codes = _long_tailed(200, 3, seed=5)
    weight = np.random.default_rng(0).integers(1, 4, size=200)
    weighted = choose_rule(proba, codes, get_measure("gmean"), sample_weight=weight.astype(float))
    repeated = choose_rule(np.repeat(proba, weight, axis=0), np.repeat(codes, weight), get_measure("gmean"))
    assert weighted.value == pytest.approx(repeated.value, abs=1e-9)


@pytest.mark.parametrize("K", [4, 9])
def test_the_class_count_gradient_is_balanced_accuracy_s_own(K):
    """Frank-Wolfe's 3K + 1-point gradient against the analytic one of balanced accuracy,
    mean_k C_kk / r_k: ∂/∂C_ij = (δ_ij / r_i − C_ii / r_i²) / K; and the full K² one agrees."""
    from calopt.training.decision import _class_count_gradient, _gradient, _gradient_of

    C = np.random.default_rng(K).integers(1, 40, size=(K, K)).astype(float)
    rows = C.sum(axis=1)
    analytic = (np.eye(K) / rows[:, None] - (np.diag(C) / rows**2)[:, None]) / K
    measure = get_measure("balanced-accuracy")
    np.testing.assert_allclose(_class_count_gradient(measure, C), analytic, atol=1e-6)
    np.testing.assert_allclose(_gradient(measure, C), analytic, atol=1e-6)
    assert _gradient_of(measure, C) is _class_count_gradient


def test_where_every_rule_scores_zero_the_balanced_rule_is_kept():
    """A class no rule predicts right on these rows (its one row looks like another class) leaves
    G-mean 0 for the argmax and the balanced rule alike: the balanced rule argmax_j η_j/π_j is kept,
    which predicts the rare classes the argmax never does (checked by plain arithmetic)."""
    rng = np.random.default_rng(3)
    n, K = 600, 3
    codes = np.where(rng.random(n) < 0.8, 0, 1)
    codes[0] = 2  # the rare class: one row, whose probabilities say class 0
    proba = np.where(codes[:, None] == np.arange(K), 0.5, 0.25)
    proba[codes == 0] = [0.6, 0.3, 0.1]
    proba[codes == 1] = [0.55, 0.35, 0.1]
    proba[codes == 2] = [0.7, 0.2, 0.1]
    rule = choose_rule(proba, codes, get_measure("gmean"))
    assert rule.value == 0.0 and rule.argmax_value == 0.0
    prior = np.bincount(codes, minlength=K) / n
    balanced = np.argmax(proba / prior, axis=1)
    assert np.array_equal(rule.predict(proba), balanced)
    assert set(np.unique(rule.predict(proba))) != {0}  # the argmax predicts class 0 everywhere


def _best_scale_by_plain_loops(spec, proba, codes, gains, j):
    """Every distinct decision of column j's scale (one scale inside each interval of the sorted break
    points, each rule's predictions counted from scratch): the best value."""
    K = proba.shape[1]
    scores = proba @ gains
    others = np.max(np.where(np.arange(K) == j, -np.inf, scores), axis=1)
    breaks = np.unique(others[scores[:, j] > 0] / scores[scores[:, j] > 0, j])
    breaks = breaks[breaks > 0]
    scales = np.concatenate([breaks[:1] / 2, np.sqrt(breaks[:-1] * breaks[1:]), breaks[-1:] * 2])
    best = -np.inf
    for s in scales:
        trial = gains.copy()
        trial[:, j] *= s
        best = max(best, _measure_of(spec, codes, np.argmax(proba @ trial, axis=1), K))
    return best


@pytest.mark.parametrize("spec", ["gmean", "min", "f1", "hmean"])
def test_one_class_s_weight_search_is_every_decision_by_plain_loops(spec):
    """The line search of coordinate ascent (every interval up to EXACT_BREAKS break points) finds
    the best value of column j's scale that plain loops find, on the counts and on K × K matrices."""
    from calopt.training import decision

    proba, codes = _long_tailed(300, 4, seed=11)
    gains = np.diag([1.0, 1.7, 0.6, 2.5])
    measure = get_measure(spec)
    for j in range(4):
        expected = _best_scale_by_plain_loops(spec, proba, codes, gains, j)
        rows = decision._Rows(measure, proba, codes, None)
        scale, value = decision._line_search(rows, gains, j)
        assert value == pytest.approx(expected, abs=1e-12)
        trial = gains.copy()
        trial[:, j] *= scale
        assert _measure_of(spec, codes, np.argmax(proba @ trial, axis=1), 4) == pytest.approx(value, abs=1e-12)
        rows.counted = False  # the K × K route, a few matrices at a time
        old_cells, decision.MAX_CELLS = decision.MAX_CELLS, 16 * 10
        try:
            assert decision._line_search(rows, gains, j) == pytest.approx((scale, value), abs=1e-12)
        finally:
            decision.MAX_CELLS = old_cells


@pytest.mark.parametrize("spec", ["gmean", "min", "f1"])
def test_a_search_over_tied_break_points_is_every_decision_by_plain_loops(spec):
    """Rows with equal probabilities (each three times, of classes drawn apart) give runs of equal
    break points, which the unweighted search sorts in any order (only cuts between distinct ones
    count): its best value is the plain loops' one; weighted (a stable sort), it is the plain loops'
    on the rows repeated by their weights."""
    from calopt.training import decision

    proba, codes = _long_tailed(200, 4, seed=13)
    proba = np.repeat(proba, 3, axis=0)
    codes = np.random.default_rng(14).permutation(np.repeat(codes, 3))
    gains = np.diag([1.0, 1.3, 0.7, 2.0])
    weight = np.random.default_rng(13).integers(1, 4, size=codes.size)
    repeated, repeated_codes = np.repeat(proba, weight, axis=0), np.repeat(codes, weight)
    for j in range(4):
        rows = decision._Rows(get_measure(spec), proba, codes, None)
        expected = _best_scale_by_plain_loops(spec, proba, codes, gains, j)
        assert decision._line_search(rows, gains, j)[1] == pytest.approx(expected, abs=1e-12)
        rows = decision._Rows(get_measure(spec), proba, codes, weight.astype(float))
        expected = _best_scale_by_plain_loops(spec, repeated, repeated_codes, gains, j)
        assert decision._line_search(rows, gains, j)[1] == pytest.approx(expected, abs=1e-12)


def test_kept_best_classes_give_the_line_search_the_same_numbers():
    """Coordinate ascent keeps each row's scores and two best classes between searches
    (``decision._Best``); a search reads them instead of an argmax over every column. On
    probabilities with ties (rounded to tenths: rows where two classes tie, the first wins as in
    argmax) and after columns are reweighed, each search returns what a search from the gains
    alone returns, and the kept best classes are a plain loop's over the rows."""
    from calopt.training import decision

    proba, codes = _long_tailed(400, 5, seed=3)
    proba = np.round(proba, 1)
    rows = decision._Rows(get_measure("gmean"), proba, codes, None)
    gains = np.eye(5)
    best = decision._Best(proba, gains)
    for j, weight in [(2, 1.5), (0, 0.8), (4, 3.0), (2, 0.5)]:
        for k in range(5):
            assert decision._line_search(rows, gains, k, best) == decision._line_search(rows, gains, k)
        gains[j, j] = weight
        best.reweigh(j, weight)
        for i in range(proba.shape[0]):
            scores = [proba[i, c] * gains[c, c] for c in range(5)]
            first = max(range(5), key=lambda c: (scores[c], -c))
            second = max((c for c in range(5) if c != first), key=lambda c: (scores[c], -c))
            assert (best.first[i], best.second[i]) == (first, second)


@pytest.mark.parametrize("window_cuts", [2048, 32])
def test_beyond_exact_breaks_the_search_still_finds_the_plain_loop_best_near_the_weight(monkeypatch, window_cuts):
    """With fewer exact break points allowed than rows, the window around the current weight and the
    coarse ranks outside still reach the plain-loop best here (a smooth measure of 2,000 rows); so
    does a window thinned to 32 evenly spaced intervals, refined between the best's neighbours."""
    from calopt.training import decision

    monkeypatch.setattr(decision, "EXACT_BREAKS", 64)
    monkeypatch.setattr(decision, "WINDOW_CUTS", window_cuts)
    proba, codes = _long_tailed(2000, 3, seed=5)
    rows = decision._Rows(get_measure("gmean"), proba, codes, None)
    for j in range(3):
        expected = _best_scale_by_plain_loops("gmean", proba, codes, np.eye(3), j)
        assert decision._line_search(rows, np.eye(3), j)[1] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("spec", ["gmean", "f1", "min", "balanced-accuracy"])
@pytest.mark.parametrize("K", [3, 6])
def test_the_count_gradient_is_the_full_forward_difference_one(spec, K):
    """Frank-Wolfe's gradient from 3K + 1 count vectors against K² + 1 forward differences of the
    measure of confusion matrices, and its weights give ⟨G, C' − C⟩ for a confusion matrix C' with the
    same class counts."""
    from calopt.measures import class_counts
    from calopt.training.decision import _count_gradient, _gradient

    rng = np.random.default_rng(K)
    C = rng.integers(1, 40, size=(K, K)).astype(float)
    tp, fp, _, fn = class_counts(C, xp=np)
    G, W = _count_gradient(get_measure(spec), tp, tp + fp, tp + fn)
    full = _gradient(get_measure(spec), C)
    np.testing.assert_allclose(G, full, atol=1e-4 * max(np.max(np.abs(full)), 1e-9))
    other = rng.integers(1, 40, size=(K, K)).astype(float)
    other *= (C.sum(axis=1) / other.sum(axis=1))[:, None]  # the same rows of each class
    tp2, fp2, _, _ = class_counts(other, xp=np)
    assert np.sum(W * (np.stack([tp2, tp2 + fp2]) - np.stack([tp, tp + fp]))) == pytest.approx(
        np.sum(G * (other - C)), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("spec", ["gmean", "min", "f1", "hmean", "balanced-accuracy"])
def test_the_rule_is_a_coordinate_wise_best_by_plain_loops(spec):
    """No single class's weight of the chosen per-class weights does better on the rows (every decision
    the weight can give, by plain loops): coordinate ascent ran to its end."""
    proba, codes = _long_tailed(400, 5, seed=13)
    rule = choose_rule(proba, codes, get_measure(spec))
    assert np.count_nonzero(rule.gains - np.diag(np.diagonal(rule.gains))) == 0  # per-class weights
    for j in range(5):
        assert _best_scale_by_plain_loops(spec, proba, codes, rule.gains, j) <= rule.value + 1e-12


def test_a_class_constraint_s_rule_is_feasible_and_beats_the_one_weight_fix_by_plain_loops():
    """G-mean subject to recall[smallest] ≥ 0.85 on calibrated long-tailed probabilities: the chosen
    per-class weights meet the constraint (recall counted row by row) and reach at least the G-mean
    of the simplest feasible rule, the argmax with only that class's weight raised to the smallest
    scale that meets it (found by trying every break point in a plain loop)."""
    from calopt.constraints import class_constrained, constrain

    proba, codes = _long_tailed(1500, 4, seed=21)
    measure = class_constrained(constrain(get_measure("gmean"), "recall[3]>=0.85"), [0, 1, 2, 3])
    rule = choose_rule(proba, codes, measure)
    predicted = np.argmax(proba * np.diagonal(rule.gains), axis=1)

    def recall(pred, c):
        return sum(1 for p, t in zip(pred, codes) if t == c and p == c) / sum(1 for t in codes if t == c)

    assert recall(np.argmax(proba, axis=1), 3) < 0.85  # the argmax misses it
    assert recall(predicted, 3) >= 0.85
    others = np.max(proba[:, :3], axis=1)
    best_fix = None
    for scale in sorted(others[i] / proba[i, 3] * (1 + 1e-12) for i in range(codes.size)):
        weights = np.array([1.0, 1.0, 1.0, scale])
        fixed = np.argmax(proba * weights, axis=1)
        if recall(fixed, 3) >= 0.85:
            best_fix = _measure_of("gmean", codes, fixed, 4)
            break
    assert best_fix is not None
    assert _measure_of("gmean", codes, predicted, 4) >= best_fix - 1e-12

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

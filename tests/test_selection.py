"""The settings selection (calopt.training.selection): the rule, the folds, the stacked
candidates, the held-out values against independent computations, early stopping,
``algorithm="auto"`` and resuming a selection run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

import calopt
from calopt import registry
from calopt.errors import ParameterError, TrainingInterrupted
from calopt.training.loop import CONVERGED, MAXITER
from calopt.training.threshold import feasible_threshold_at_share, threshold_at_share
from calopt.training.selection import (
    FOLDS,
    Rule,
    fold_weights,
    folds_of,
    grid_of,
    parse_rule,
    resolve_rule,
    win_probability,
)


def _data(n=240, d=5, rate=0.25, seed=0, noise=0.8):
    """A linear rule with label noise: positives are the top ``rate`` of x·v + noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    z = X @ np.linspace(1.0, 0.2, d) + noise * rng.normal(size=n)
    y = np.where(z > np.quantile(z, 1 - rate), 1.0, -1.0)
    return X, y


# -- the rule ---------------------------------------------------------------------------------
def test_rules_parse_and_refuse_what_they_cannot_mean():
    assert parse_rule("cv:3") == Rule("cv", folds=3) and parse_rule("CV") == Rule("cv", folds=FOLDS)
    assert parse_rule("holdout:0.3") == Rule("holdout", fraction=0.3) and parse_rule("none") == Rule("none")
    assert parse_rule("auto") is None
    for bad in ("cv:1", "cv:x", "holdout:1", "holdout:0", "kfold", "none:2", "auto:3"):
        with pytest.raises(ParameterError, match=r"expected auto, none, cv:K \(K ≥ 2\) or holdout:F"):
            parse_rule(bad)


@pytest.mark.parametrize("positives, expected", [(12, "cv:5"), (499, "cv:5"), (500, "holdout:0.2"),
                                                 (3, "cv:3"), (1, "none")])
def test_the_automatic_rule_follows_the_smaller_class(positives, expected):
    y = np.where(np.arange(2000) < positives, 1.0, -1.0)
    assert str(resolve_rule(None, y)) == expected


def test_a_given_rule_needs_rows_of_the_smaller_class_in_every_fold():
    y = np.where(np.arange(100) < 3, 1.0, -1.0)
    with pytest.raises(ParameterError, match="select=cv:5: the smaller class has 3 rows, fewer than the folds"):
        resolve_rule(Rule("cv", folds=5), y)
    with pytest.raises(ParameterError, match="too few to hold some out"):
        resolve_rule(Rule("holdout", fraction=0.1), y)


def test_folds_are_stratified_and_each_model_sees_the_rest():
    y = np.where(np.arange(103) % 4 == 0, 1.0, -1.0)  # 26 positives
    folds = folds_of(y, Rule("cv", folds=5), seed=1)
    assert sorted(np.bincount(folds[y > 0])) == [5, 5, 5, 5, 6]
    weights = fold_weights(folds, 5, None)
    assert weights.shape == (103, 6)
    np.testing.assert_allclose(weights.mean(axis=0), 1.0)
    for k in range(5):  # fold k's model: no weight on fold k, the same weight on every other row
        assert np.all(weights[folds == k, k] == 0) and np.ptp(weights[folds != k, k]) == 0
    split = folds_of(y, Rule("holdout", fraction=0.2), seed=1)
    assert set(split) == {-1, 0} and np.sum((split == 0) & (y > 0)) == round(0.2 * 26)


# -- the plug-in route: L-BFGS converges to LogisticRegression ------------------------------------
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_lbfgs_reaches_logistic_regression(C, sparse):
    X, y = _data(n=300, d=6, seed=3)
    X_in = scipy.sparse.csr_matrix(X) if sparse else X
    model = calopt.fit(X_in, y, algorithm=f"lbfgs:C={C},tol=0", epochs=100, select="none", scale=False,
                       tune_threshold=False)
    reference = LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(model.coef, reference.coef_[0], atol=1e-6)
    assert model.intercept == pytest.approx(reference.intercept_[0], abs=1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_lbfgs_keeps_the_scores_of_its_model_from_the_pass_that_evaluated_it(sparse):
    """Full-batch L-BFGS keeps X·w + b of every row at the model it gives (the selection reads
    them instead of scoring again): after every pass, equal to the product of that model, for
    stacked models with different C on badly scaled rows (some passes step back, some models
    accept and others not); a pass of several batches keeps none."""
    from calopt.algorithms import Problem
    from calopt.io.batches import ArrayReader
    from calopt.training.loop import Trainer, run

    X, y = _data(n=150, d=5, seed=11)
    X = 100 * X
    X_in = scipy.sparse.csr_matrix(X) if sparse else X
    backend = calopt.get_backend("numpy")
    algorithm = registry.get_algorithm("lbfgs", tol=0).stacked({"C": np.array([0.01, 1.0, 1e4])})
    for batch, epochs in [(150, e) for e in range(1, 13)] + [(50, 3)]:
        problem = Problem(backend.xp, backend.dtype, backend.device, 150, 5, float(np.mean(y > 0)),
                          calopt.get_measure("f1"), calopt.get_loss("logistic"), batch, epochs, n_models=3)
        result = run(algorithm, problem, ArrayReader(X_in, y, problem.xp), epochs=epochs, seed=0)
        scores = algorithm.output_scores(result.state.algorithm)
        if batch < 150:
            assert scores is None
            continue
        w, b = Trainer(algorithm).weights(result.state)
        np.testing.assert_allclose(scores, X @ np.asarray(w) + np.asarray(b), rtol=1e-12, atol=1e-9)


def test_candidates_get_trainers_of_their_own_where_reading_x_is_the_smaller_cost():
    """by_candidate: a pass reads X once per trainer; L-BFGS's own work is about 320 bytes per
    coordinate and model. Text (SMS TF-IDF: 3,901 × 7,166, 52,029 entries) splits; dense rows of
    a few or a few hundred columns (magic04, sylva) and the row space's dense factor do not."""
    from calopt.training.selection import by_candidate

    assert by_candidate(52_029, 7_166, 6)
    assert not by_candidate(13_314 * 10, 10, 6)
    assert not by_candidate(9_160 * 212, 212, 6)
    assert not by_candidate(2_000 * 2_000, 2_000, 6)


def test_candidates_trainers_step_in_threads_from_a_passs_size(monkeypatch):
    """The trainers of a candidate each step in the trainer pool's threads only where each one's pass
    moves THREAD_BYTES or more (pass_bytes: X's entries and the recursion's coordinates); below it
    one after the other, and the models are the same to the bit either way."""
    from calopt.training import selection
    from calopt.training.selection import COORDINATE_BYTES, ENTRY_BYTES, THREAD_BYTES, pass_bytes

    assert pass_bytes(22_230, 4_197, 6) == ENTRY_BYTES * 22_230 + COORDINATE_BYTES * 4_197 * 6
    assert pass_bytes(22_230, 4_197, 6) < THREAD_BYTES <= pass_bytes(52_029, 7_166, 6)  # sentences, SMS spam

    class Pool:  # records the steps given to threads, runs them in this one
        mapped = 0

        def map(self, step, items):
            Pool.mapped += 1
            return list(map(step, items))

    monkeypatch.setattr(selection, "trainer_pool", lambda: Pool())
    X, y = _text_like(1500, 3000)  # 13,500 entries: 5.8 MB a pass
    alone = calopt.fit(X, y, measure="f1", algorithm="lbfgs", select="cv:3", seed=1)
    assert Pool.mapped == 0
    monkeypatch.setattr(selection, "THREAD_BYTES", 0)
    threaded = calopt.fit(X, y, measure="f1", algorithm="lbfgs", select="cv:3", seed=1)
    assert Pool.mapped > 0
    assert alone.coef.tobytes() == threaded.coef.tobytes()
    assert alone.threshold == threaded.threshold and alone.intercept == threaded.intercept


def test_a_candidate_whose_models_converged_is_not_trained_further(monkeypatch):
    """On sparse rows with many columns (L-BFGS's own work outweighs reading X) each candidate trains in a
    trainer of its own, and under the automatic stop a candidate whose K + 1 models have all met
    L-BFGS's tolerance stops: the strongly regularised one is updated on fewer passes than the
    run has, and the selection equals, to the tolerance's effect, a run where every candidate
    trains to the end."""
    from calopt.training.selection import Selector

    rng = np.random.default_rng(4)
    X = scipy.sparse.random(1500, 3000, density=0.003, random_state=5, format="csr")  # more rows than its row space pays for
    y = np.where(np.asarray(X @ rng.standard_normal(3000)).ravel() + 0.3 * rng.standard_normal(1500) > 0.4, 1, 0)
    cls = type(registry.get_algorithm("lbfgs"))
    calls: dict[tuple, int] = {}
    update = cls.update

    def counted(self, state, batch, problem):
        key = tuple(np.unique(np.asarray(self.C, dtype=np.float64)).round(6).tolist())  # float32 on text: 0.1 is 0.10000000149
        calls[key] = calls.get(key, 0) + 1
        return update(self, state, batch, problem)

    monkeypatch.setattr(cls, "update", counted)
    model = calopt.fit(X, y, measure="f1", algorithm="lbfgs", select="cv:3", seed=1)
    assert sorted(calls) == [(0.1,), (1.0,), (10.0,)]  # a trainer per candidate
    passes = model.fit_report.selection["epochs_run"]
    assert calls[(0.1,)] < passes and max(calls.values()) == passes
    monkeypatch.setattr(cls, "update", update)
    monkeypatch.setattr(Selector, "_retire", lambda self, state: state)
    every = calopt.fit(X, y, measure="f1", algorithm="lbfgs", select="cv:3", seed=1)
    got, want = model.fit_report.selection, every.fit_report.selection
    assert got["algorithm"] == want["algorithm"]
    np.testing.assert_allclose([c["value"] for c in got["candidates"]], [c["value"] for c in want["candidates"]],
                               atol=0.02)
    np.testing.assert_allclose(model.coef, every.coef, rtol=1e-2, atol=1e-3)


def _text_like(n=1500, d=3000, seed=4):
    """Sparse rows with many columns: the selection's L-BFGS trains a candidate a trainer."""
    rng = np.random.default_rng(seed)
    X = scipy.sparse.random(n, d, density=0.003, random_state=seed + 1, format="csr")
    y = np.where(np.asarray(X @ rng.standard_normal(d)).ravel() + 0.3 * rng.standard_normal(n) > 0.4, 1, 0)
    return X, y


def test_sparse_text_trains_in_float32_where_no_dtype_is_given():
    """Sparse rows on which each candidate trains in a trainer of its own work in float32 when the
    dtype is left to calopt: the same model to the bit as float32 asked for, float64 weights;
    float64 when asked for, on dense rows, without a selection, and in the span of wide rows."""
    X, y = _text_like()
    free = calopt.fit(X, y, measure="f1", seed=1)
    asked = calopt.fit(X, y, measure="f1", seed=1, dtype="float32")
    assert free.fit_report.dtype == asked.fit_report.dtype == "float32"
    assert free.coef.dtype == np.float64 and free.coef.tobytes() == asked.coef.tobytes()
    assert free.intercept == asked.intercept and free.fit_report.selection == asked.fit_report.selection
    assert calopt.fit(X, y, measure="f1", seed=1, dtype="float64").fit_report.dtype == "float64"
    assert calopt.fit(X, y, measure="f1", select="none", epochs=5).fit_report.dtype == "float64"
    dense_X, dense_y = _data(n=300, d=8)
    assert calopt.fit(scipy.sparse.csr_matrix(dense_X), dense_y, measure="f1").fit_report.dtype == "float64"
    wide_X, wide_y = _text_like(n=120, d=3000)  # few rows: trained in their span (float64 only)
    assert calopt.fit(wide_X, wide_y, measure="f1").fit_report.dtype == "float64"


def test_float32_text_predicts_as_float64_does():
    """The float32 run's model against the float64 run's (an independent computation of the same
    selection): the same candidate chosen, each candidate's held-out value and the test
    predictions nearly the same."""
    X, y = _text_like(n=2000)
    train, test = np.arange(1500), np.arange(1500, 2000)
    single = calopt.fit(X[train], y[train], measure="f1", seed=2)
    double = calopt.fit(X[train], y[train], measure="f1", seed=2, dtype="float64")
    assert (single.fit_report.dtype, double.fit_report.dtype) == ("float32", "float64")
    got, want = single.fit_report.selection, double.fit_report.selection
    assert got["algorithm"] == want["algorithm"]
    np.testing.assert_allclose([c["value"] for c in got["candidates"]], [c["value"] for c in want["candidates"]],
                               atol=0.01)
    assert np.mean(single.predict(X[test]) == double.predict(X[test])) >= 0.98


def test_candidates_trainers_step_in_threads_to_the_same_bits(monkeypatch):
    """Where each candidate has a trainer of its own (sparse rows with many columns), the trainers
    of a pass step at once in threads (here for any pass size: THREAD_BYTES lowered to 0): the
    model, its threshold and every candidate's held-out value and pass equal, to the bit, those
    of the trainers stepped one after another."""
    import threading

    from calopt.training import selection

    if selection.trainer_pool() is None:
        pytest.skip("one core: the trainers step one after another")
    monkeypatch.setattr(selection, "THREAD_BYTES", 0)
    rng = np.random.default_rng(4)
    X = scipy.sparse.random(1500, 3000, density=0.003, random_state=5, format="csr")
    y = np.where(np.asarray(X @ rng.standard_normal(3000)).ravel() + 0.3 * rng.standard_normal(1500) > 0.4, 1, 0)
    cls = type(registry.get_algorithm("lbfgs"))
    threads: set[str] = set()
    end_epoch = cls.end_epoch

    def recorded(self, state, data, problem):
        threads.add(threading.current_thread().name)
        return end_epoch(self, state, data, problem)

    monkeypatch.setattr(cls, "end_epoch", recorded)
    threaded = calopt.fit(X, y, measure="f1", select="cv:3", seed=1)
    assert any(name.startswith("calopt-trainer") for name in threads)
    threads.clear()
    monkeypatch.setattr(selection, "trainer_pool", lambda: None)
    serial = calopt.fit(X, y, measure="f1", select="cv:3", seed=1)
    assert threads == {threading.current_thread().name}
    assert threaded.coef.tobytes() == serial.coef.tobytes()
    assert float(threaded.intercept) == float(serial.intercept)
    assert float(threaded.threshold) == float(serial.threshold)
    assert threaded.fit_report.selection == serial.fit_report.selection


def _fit_in_child(X, y, queue):
    queue.put(calopt.fit(X, y, measure="f1", select="cv:3", seed=1).coef.tobytes())


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this system")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # Python 3.12+
def test_a_forked_process_trains_in_threads_of_its_own():
    """A process forked after a fit inherits the trainers' pool without its threads: it makes its
    own, and its fit ends with the parent's model (before, work given to the inherited pool
    would have waited forever)."""
    import multiprocessing

    from calopt.training import selection

    if selection.trainer_pool() is None:
        pytest.skip("one core: no pool")
    rng = np.random.default_rng(4)
    X = scipy.sparse.random(600, 2000, density=0.004, random_state=5, format="csr")
    y = np.where(np.asarray(X @ rng.standard_normal(2000)).ravel() + 0.3 * rng.standard_normal(600) > 0.4, 1, 0)
    parent = calopt.fit(X, y, measure="f1", select="cv:3", seed=1).coef.tobytes()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_fit_in_child, args=(X, y, queue))
    child.start()
    try:
        got = queue.get(timeout=120)
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
    assert got == parent


# -- the stacked run is the candidates run one by one -----------------------------------------------
@pytest.mark.parametrize("name, measure", [("spade", "gmean"), ("stamp", "f1"), ("sgd", "f1"), ("lbfgs", "f1")])
def test_stacked_candidates_equal_separate_runs(monkeypatch, name, measure):
    """A stackable algorithm trains every candidate × fold as columns of one model; the same
    selection with each model trained on its own gives the same values, passes and model."""
    X, y = _data(seed=5)
    options = dict(measure=measure, algorithm=name, select="cv:3", epochs=4, batch_size=32, seed=2)
    stacked = calopt.fit(X, y, **options)
    monkeypatch.setattr(type(registry.get_algorithm(name)), "stackable", False)
    separate = calopt.fit(X, y, **options)
    got, want = separate.fit_report.selection, stacked.fit_report.selection
    assert [c["algorithm"] for c in got["candidates"]] == [c["algorithm"] for c in want["candidates"]]
    np.testing.assert_allclose([c["value"] for c in got["candidates"]], [c["value"] for c in want["candidates"]],
                               rtol=1e-9)
    assert separate.algorithm == stacked.algorithm
    np.testing.assert_allclose(separate.coef, stacked.coef, rtol=1e-8, atol=1e-10)
    assert separate.intercept == pytest.approx(stacked.intercept, rel=1e-8, abs=1e-10)


# -- the held-out value is the measure of the out-of-fold scores ---------------------------------
@pytest.mark.parametrize("rule", ["holdout:0.25", "cv:3"])
def test_the_held_out_value_is_f1_of_the_out_of_fold_scores(rule):
    """L-BFGS uses every row of a pass, so fold k's model is L-BFGS on the other rows (its
    penalty per row kept: C·n/n_k); the value is the best F1 over cuts of the scores each
    held-out row gets from the model that did not see it (scikit-learn's f1_score)."""
    X, y = _data(n=200, seed=7)
    C, epochs = 1.0, 6
    model = calopt.fit(X, y, algorithm=f"lbfgs:C={C}", select=rule, epochs=epochs, scale=False, seed=4)
    folds = folds_of(y, parse_rule(rule), seed=4)
    held = folds >= 0
    scores = np.empty(y.size)
    for k in np.unique(folds[held]):
        train = folds != k
        fold_model = calopt.fit(X[train], y[train], algorithm=f"lbfgs:C={C * y.size / train.sum()}",
                                select="none", epochs=epochs, scale=False, tune_threshold=False)
        scores[folds == k] = fold_model.decision_function(X[folds == k])
    s, t = scores[held], y[held]
    cuts = np.concatenate([[s.max() + 1], np.unique(s) - 1e-9])
    best = max(f1_score(t, np.where(s > c, 1.0, -1.0), zero_division=0) for c in cuts)
    assert model.fit_report.selection["value"] == pytest.approx(best, abs=1e-12)
    # the model is the refit on every row, with the chosen settings and passes
    refit = calopt.fit(X, y, algorithm=f"lbfgs:C={C}", select="none", epochs=epochs, scale=False,
                       tune_threshold=False)
    np.testing.assert_allclose(model.coef, refit.coef, rtol=1e-8)


# -- the threshold: the positive share chosen on held-out rows ---------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("share", [0.0, 0.1, 0.37, 1.0])
def test_threshold_at_share_is_the_nearest_cut(share, weighted):
    """Brute force over every cut between distinct scores (and beyond both ends): the threshold's
    share above is the nearest to ``share`` there is."""
    rng = np.random.default_rng(2)
    scores = np.round(rng.normal(size=150), 1)  # ties
    weight = rng.integers(1, 4, 150).astype(float) if weighted else None
    mass = np.ones(150) if weight is None else weight

    def above(t):
        return float(np.sum(mass[scores > t]) / np.sum(mass))

    distinct = np.unique(scores)
    cuts = np.concatenate([[distinct[-1] + 1], (distinct[:-1] + distinct[1:]) / 2, [distinct[0] - 1]])
    nearest = min(abs(above(c) - share) for c in cuts)
    threshold = float(threshold_at_share(scores, share, weight))
    assert abs(above(threshold) - share) == pytest.approx(nearest, abs=1e-12)


def test_threshold_at_share_selects_the_same_bits_as_the_sort():
    """Unweighted NumPy scores take the O(n) selection; every other namespace the sorted cuts. On
    scores with runs of ties, float32 ones and shares at exact cut positions, both give the same
    threshold to the bit (array-api-strict takes the sorted route)."""
    xps = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(5)
    for trial in range(600):
        n = int(rng.integers(1, 40))
        scores = rng.normal(size=n)
        if trial % 3 == 1:
            scores = rng.integers(0, 3, n).astype(np.float64)  # long runs of ties
        if trial % 3 == 2:
            scores = np.round(scores, 1).astype(np.float32)
        share = [0.0, 1.0, float(rng.random()), int(rng.integers(0, n + 1)) / n][trial % 4]
        fast = threshold_at_share(scores, share)
        sorted_route = np.asarray(threshold_at_share(xps.asarray(scores), share))
        assert fast.dtype == sorted_route.dtype
        assert fast.tobytes() == sorted_route.tobytes(), (scores, share)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("share, specs", [(0.1, ["precision>=0.6"]), (0.45, ["precision>=0.6"]),
                                          (0.2, ["tpr>=0.7", "fpr<=0.5"]), (0.3, ["precision>=0.99"]),
                                          (0.3, ["tpr>=0.9", "fpr<=0.05"])])  # the last: none feasible
def test_feasible_threshold_at_share_is_the_nearest_feasible_cut(share, specs, weighted):
    """Brute force over every cut: among those where every constraint holds (counts summed by plain
    loops), the threshold's share above is the nearest to ``share``; none feasible: the flag says so."""
    from calopt.constraints import constrain, parse_constraints

    rng = np.random.default_rng(3)
    y = np.where(rng.uniform(size=200) < 0.4, 1.0, -1.0)
    scores = np.round(rng.normal(size=200) + 0.8 * y, 1)  # ties
    weight = rng.integers(1, 4, 200).astype(float) if weighted else None
    mass = np.ones(200) if weight is None else weight
    measure = constrain(calopt.get_measure("recall"), specs)

    def holds(t):
        tp = fp = fn = tn = 0.0
        for score, label, m in zip(scores, y, mass):
            if score > t:
                tp, fp = (tp + m, fp) if label > 0 else (tp, fp + m)
            else:
                fn, tn = (fn + m, tn) if label > 0 else (fn, tn + m)
        return all(c.holds(float(c.value(tp, fp, tn, fn, xp=np))) for c in parse_constraints(specs))

    def above(t):
        return float(np.sum(mass[scores > t]) / np.sum(mass))

    distinct = np.unique(scores)
    cuts = np.concatenate([[distinct[-1] + 1], (distinct[:-1] + distinct[1:]) / 2, [distinct[0] - 1]])
    feasible = [c for c in cuts if holds(c)]
    threshold, found = feasible_threshold_at_share(scores, y, measure, share, weight)
    assert bool(found) == bool(feasible)
    if feasible:
        assert holds(float(threshold))
        nearest = min(abs(above(c) - share) for c in feasible)
        assert abs(above(float(threshold)) - share) == pytest.approx(nearest, abs=1e-12)


def test_with_few_positives_the_threshold_comes_from_every_row_held_out_once():
    """12 positives: five folds (each positive scored once by a model that did not see it); the
    model predicts positive the share of its training rows the out-of-fold scores did."""
    X, y = _data(n=400, rate=0.03, seed=11, noise=0.3)
    assert np.sum(y > 0) == 12
    model = calopt.fit(X, y, measure="f1", algorithm="lbfgs", max_epochs=10, seed=0)
    chosen = model.fit_report.selection
    assert chosen["rule"] == "cv:5"
    share = np.mean(model.decision_function(X) > 0)
    assert abs(share - chosen["positive_share"]) <= 1 / 400


# -- passes: early stopping, the cap, and --epochs ------------------------------------------------
def test_training_stops_when_no_candidate_improved_for_patience_passes():
    X, y = _data(n=300, seed=8)
    model = calopt.fit(X, y, measure="f1", algorithm="stamp", patience=3, max_epochs=60, seed=1)
    chosen = model.fit_report.selection
    assert model.status == CONVERGED
    best = max(chosen["candidates"], key=lambda c: c["value"])  # the best value over every candidate
    assert chosen["epochs_run"] == best["epoch"] + 3 and chosen["value"] == best["value"]
    assert model.fit_report.epochs == chosen["epochs"] <= chosen["epochs_run"] < 60
    assert [row["epoch"] for row in model.history] == list(range(1, chosen["epochs_run"] + 1))
    # the history's held-out value is the best so far: it never decreases
    validation = [row["validation"] for row in model.history]
    assert validation == sorted(validation) and validation[-1] == pytest.approx(chosen["value"])


def test_a_selection_may_choose_the_constant_model_on_held_out_evidence():
    """Labels independent of X, 3% positives: for Gower-Legendre (accuracy-like) predicting every
    row negative is best, which L-BFGS's first pass (w = 0) does and no later pass beats; that is
    a model, not a failure (the later passes tie it, and ties go to the later pass)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(600, 4)), np.where(rng.random(600) < 0.03, 1.0, -1.0)
    model = calopt.fit(X, y, measure="gower-legendre", algorithm="lbfgs", patience=2, max_epochs=6)
    chosen = model.fit_report.selection
    assert model.status == 0 and np.all(model.predict(X) == -1)
    assert chosen["positive_share"] == 0 and chosen["epochs"] == chosen["epochs_run"]
    negatives = np.mean(y < 0)
    assert chosen["value"] == pytest.approx(negatives / (negatives + 0.5 * (1 - negatives)))


def test_max_epochs_caps_a_run_that_keeps_improving():
    X, y = _data(n=300, seed=8)
    model = calopt.fit(X, y, measure="f1", algorithm="stamp", patience=100, max_epochs=5, seed=1)
    assert model.status == MAXITER and model.fit_report.selection["epochs_run"] == 5


def test_epochs_force_the_passes_and_the_settings_are_still_chosen():
    X, y = _data(n=300, seed=8)
    model = calopt.fit(X, y, measure="gmean", algorithm="spade", epochs=4, seed=1)
    chosen = model.fit_report.selection
    assert chosen["epochs"] == chosen["epochs_run"] == model.fit_report.epochs == 4
    assert all(c["epoch"] == 4 for c in chosen["candidates"])  # each candidate's value at pass 4
    assert len(chosen["candidates"]) == 6 and model.algorithm == chosen["algorithm"]
    assert len(model.history) == 4


def test_given_settings_are_not_searched():
    X, y = _data(n=300, seed=8)
    model = calopt.fit(X, y, measure="gmean", algorithm="spade:step=10", epochs=2, seed=1)
    assert [c["algorithm"] for c in model.fit_report.selection["candidates"]] == [
        "spade:step=10.0", "spade:step=10.0,radius=1.0"]


def test_select_none_is_the_one_pass_trial_and_ten_passes():
    X, y = _data(n=300, seed=8)
    model = calopt.fit(X, y, measure="f1", select="none", seed=1)
    assert model.fit_report.selection is None and model.fit_report.select == "none"
    assert model.fit_report.epochs == 10 and len(model.history) == 10


def test_an_algorithm_with_its_own_reader_is_not_cross_fitted():
    """SLND trains on its balanced, preconditioned reader: the automatic rule is none, a given
    rule an error."""
    X, y = _data(n=300, seed=8)
    model = calopt.fit(X, y, algorithm="slnd", measure="f1")
    assert model.fit_report.selection is None and model.fit_report.select == "none"
    assert model.fit_report.epochs == 10
    with pytest.raises(ParameterError, match="select=cv:5: algorithm 'slnd' trains on a reader of its own"):
        calopt.fit(X, y, algorithm="slnd", select="cv:5")


# -- algorithm="auto" ---------------------------------------------------------------------------
def test_auto_compares_the_measures_solver_with_the_plug_in_route_on_the_same_folds():
    X, y = _data(n=300, seed=9)
    model = calopt.fit(X, y, measure="gmean", algorithm="auto", max_epochs=8, seed=0)
    chosen = model.fit_report.selection
    own, route = chosen["compared"]
    assert own["algorithm"].startswith("spade") and route["algorithm"].startswith("lbfgs")
    assert model.algorithm in (own["algorithm"], route["algorithm"])
    if model.algorithm == own["algorithm"]:  # the direct solver must have won on the held-out rows
        assert own["value"] > route["value"]
    spade = [c for c in chosen["candidates"] if c["algorithm"].startswith("spade")]
    assert len(spade) == 6 and len(chosen["candidates"]) == 9
    assert model.loss == ("logistic" if model.algorithm.startswith("lbfgs") else "hinge")


def _bootstrap_reference(y, first, second, measure, resamples, seed):
    """The paired bootstrap with a loop over resamples: rows drawn with replacement."""
    rng = np.random.default_rng(seed)
    wins = 0
    for _ in range(resamples):
        rows = rng.integers(0, y.size, y.size)
        wins += (f1_score(y[rows], first[rows], zero_division=0) > f1_score(y[rows], second[rows], zero_division=0))
    return wins / resamples


def test_win_probability_is_the_paired_bootstrap():
    rng = np.random.default_rng(3)
    y = np.where(rng.random(400) < 0.2, 1.0, -1.0)
    good = np.where(rng.random(400) < 0.85, y, -y)  # 85% right
    fair = np.where(rng.random(400) < 0.78, y, -y)
    measure = calopt.get_measure("f1")
    assert win_probability(y, good, good, measure) == 0.0  # a tie is not a win
    assert win_probability(y, y, -y, measure) == 1.0
    reference = _bootstrap_reference(y, good, fair, measure, 2000, seed=5)
    assert win_probability(y, good, fair, measure, resamples=20_000) == pytest.approx(reference, abs=0.03)
    weighted = win_probability(y, good, fair, measure, weight=np.full(400, 2.0), resamples=20_000)
    assert weighted == pytest.approx(reference, abs=0.03)


# -- a selection run resumes exactly ----------------------------------------------------------------
def test_an_interrupted_selection_resumes_to_the_same_model(tmp_path):
    X, y = _data(n=200, seed=10)
    options = dict(measure="gmean", algorithm="auto", patience=2, max_epochs=6, batch_size=32, seed=3)
    resumed = _interrupted_and_resumed(X, y, options, 11, tmp_path)  # mid-way through the second pass
    assert math.isfinite(resumed.fit_report.selection["value"])


def _interrupted_and_resumed(X, y, options, batches, tmp_path):
    """``calopt.fit`` stopped after ``batches`` batches with a checkpoint, then resumed from it:
    the resumed model, checked equal to the uninterrupted one (weights, choice and selection)."""
    reference = calopt.fit(X, y, **options)
    calls = 0

    def stop():
        nonlocal calls
        calls += 1
        return calls == batches

    path = tmp_path / "selection.npz"
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, **options, checkpoint=path, interrupt=stop)
    resumed = calopt.fit(X, y, **options, resume=path)
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    assert resumed.intercept == reference.intercept and resumed.algorithm == reference.algorithm
    assert resumed.fit_report.selection == reference.fit_report.selection
    return resumed


def test_a_selection_with_a_stopped_candidate_resumes_to_the_same_model(tmp_path):
    """Sparse rows with many columns: a trainer per candidate, the strongly regularised one
    stopped at its convergence (:func:`test_a_candidate_whose_models_converged_is_not_trained_further`);
    interrupted after that, the run resumes from its checkpoint to the uninterrupted model."""
    rng = np.random.default_rng(4)
    X = scipy.sparse.random(1500, 3000, density=0.003, random_state=5, format="csr")
    y = np.where(np.asarray(X @ rng.standard_normal(3000)).ravel() + 0.3 * rng.standard_normal(1500) > 0.4, 1, 0)
    options = dict(measure="f1", algorithm="lbfgs", select="cv:3", seed=1)
    # one batch a pass: stopped after pass 19, the C = 0.1 candidate having stopped at 12
    _interrupted_and_resumed(X, y, options, 20, tmp_path)


def test_ties_of_the_held_out_value_go_to_the_later_pass():
    """Separable classes with 12 positives: out of fold the measure reaches 1 after a pass or two
    and stays there; each candidate keeps the refit model of the last pass that ties its best, not
    the first (an early L-BFGS iterate, far from converged), and the run stops ``patience`` passes
    after the value last rose."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    y = np.where(np.arange(300) < 12, 1.0, -1.0)
    X[y > 0, 0] += 6.0
    model = calopt.fit(X, y, measure="min", algorithm="lbfgs:C=1", patience=4, max_epochs=40)
    chosen = model.fit_report.selection
    assert chosen["rule"] == "cv:5" and chosen["value"] == 1.0 and len(chosen["candidates"]) == 1
    reached = min(row["epoch"] for row in model.history if row["validation"] == 1.0)
    assert chosen["epochs_run"] == reached + 4 == len(model.history)
    assert chosen["epochs"] == chosen["epochs_run"]


def test_ties_between_candidates_go_to_the_algorithms_own_setting():
    """Separable classes with 12 positives: every C reaches 1 out of fold, and the held-out rows
    cannot tell them apart; lbfgs's own C = 1 (scikit-learn's default) is kept, not the grid's
    first (the most regularised, C = 0.1)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    y = np.where(np.arange(300) < 12, 1.0, -1.0)
    X[y > 0, 0] += 6.0
    model = calopt.fit(X, y, measure="min", patience=4, max_epochs=40)
    chosen = model.fit_report.selection
    assert [c["value"] for c in chosen["candidates"]] == [1.0, 1.0, 1.0]
    assert chosen["algorithm"] == "lbfgs"


@pytest.mark.parametrize("seed", range(20))
def test_nearest_default_best_is_a_plain_search(seed):
    """Against a plain loop: the highest value; among ties the smallest distance from the
    algorithm's own settings (steps of the grid summed over the tunables; the middle for a
    setting not on its grid), then the first."""
    from calopt.algorithms import Tunable
    from calopt.training.selection import grid_distance, nearest_default_best

    class Algorithm:  # what grid_distance reads: the tunables and the algorithm's own values
        tunables = (Tunable("step", (1.0, 10.0, 100.0)), Tunable("radius", (None, 1.0)), Tunable("l2", (0.1, 1.0)))
        step, radius, l2 = None, None, 1.0  # the step is not on its grid: its middle (10) is the anchor

    grid = grid_of(Algorithm())
    distance = grid_distance(Algorithm(), grid)
    for settings, d in zip(grid, distance):
        assert d == (abs([1.0, 10.0, 100.0].index(settings["step"]) - 1) + (settings["radius"] is not None)
                     + (settings["l2"] == 0.1))
    rng = np.random.default_rng(seed)
    values = rng.choice([-math.inf, 0.5, 0.75, 1.0], size=len(grid)).tolist()
    best = None
    for i, value in enumerate(values):
        if best is None or value > values[best] or (value == values[best] and distance[i] < distance[best]):
            best = i
    assert nearest_default_best(values, distance) == best


def test_the_positive_share_is_the_fold_models_in_sample_share(monkeypatch):
    """With K folds the refit model's threshold keeps the share of the rows each fold model trained on
    that it scores above the chosen out-of-fold threshold (the mean over the folds): checked against
    a plain loop over the fold models' scores as the selection computed them."""
    from calopt.training.selection import Selector

    calls = []
    seen_share = Selector._seen_share

    def spy(self, scores, thresholds):
        shares = seen_share(self, scores, thresholds)
        calls.append((np.asarray(scores), np.asarray(thresholds), np.asarray(self.mask)[:, 0, :], np.asarray(shares)))
        return shares

    monkeypatch.setattr(Selector, "_seen_share", spy)
    X, y = make_classification(n_samples=240, n_features=6, weights=[0.85], random_state=4)
    calopt.fit(X, y, measure="f1", select="cv:4", max_epochs=6, patience=2)
    assert calls
    for scores, thresholds, held, shares in calls:
        rows, candidates, K = scores.shape
        assert K == 4 and held.shape == (rows, K + 1)
        for c in range(candidates):
            per_fold = [np.mean([scores[i, c, k] > thresholds[c] for i in range(rows) if not held[i, k]])
                        for k in range(K)]
            assert shares[c] == pytest.approx(np.mean(per_fold), abs=1e-12)


def test_one_split_needs_many_rows_and_many_minority_rows():
    """One held-out split needs many rows of the smaller class and at least ``cv_rows`` rows; a
    given rule is kept."""
    y = np.where(np.arange(4000) < 600, 1.0, -1.0)
    assert resolve_rule(None, y) == Rule("holdout", fraction=0.2)
    assert resolve_rule(None, y, cv_rows=4001) == Rule("cv", folds=5)
    assert resolve_rule(None, y, cv_rows=4000) == Rule("holdout", fraction=0.2)
    assert resolve_rule(None, np.where(np.arange(4000) < 499, 1.0, -1.0)) == Rule("cv", folds=5)
    assert resolve_rule(Rule("cv", folds=3), y) == Rule("cv", folds=3)


@pytest.mark.parametrize(("columns", "algorithm", "measure"),
                         [(40, "lbfgs", "f1"), (900, "lbfgs", "f1"), (900, "spade", "qmean")])
def test_one_split_on_wide_rows_keeps_the_fold_model_s_in_sample_share(monkeypatch, columns, algorithm, measure):
    """With one held-out split on rows with at least as many features as rows, the refit model's
    share is the one the fold model puts above the held-out threshold among the rows it trained on
    (as the K fold models' is), weighted by the rows' weights; on narrower rows, the held-out rows'
    share. Checked against the fold model's scores of every training row, recomputed from its
    weights at the chosen pass, and a plain loop over the rows; for L-BFGS, which keeps the pass's
    scores of every row, and for SPADE, whose scores are computed from its weights."""
    import calopt.training.selection as selection

    rng = np.random.default_rng(5)
    n = 600
    X = scipy.sparse.random(n, columns, density=0.05, random_state=5, format="csr")
    y = np.where(X @ rng.normal(size=columns) + 0.3 * rng.normal(size=n) > 0.15, 1.0, -1.0)
    weight = rng.uniform(0.5, 2.0, size=n)
    kept = {}
    original = selection.Selector._score

    def spy(self, state, passes):  # every candidate's fold model at every pass, and what it chose
        new = original(self, state, passes)
        for arm, arm_state in zip(self.arms, new.arms):
            w, b = arm.weights(arm_state, np)
            kept[passes] = (np.asarray(w[:, 0::2]), np.asarray(b[0::2]), list(new.thresholds), list(new.shares),
                            list(new.epochs))
        kept["folds"] = self.folds
        return new

    monkeypatch.setattr(selection.Selector, "_score", spy)
    model = calopt.fit(X, y, measure=measure, algorithm=algorithm, select="holdout:0.2", sample_weight=weight,
                       scale=False, max_epochs=8, patience=3, seed=0)
    chosen = model.fit_report.selection
    folds = kept.pop("folds")
    index = [c["algorithm"] for c in chosen["candidates"]].index(chosen["algorithm"])
    w, b, thresholds, shares, epochs = kept[epochs_at := chosen["epochs"]]
    assert shares[index] == pytest.approx(chosen["positive_share"], abs=0)
    rows = np.flatnonzero(folds < 0) if columns >= n else np.flatnonzero(folds >= 0)
    scores = X[rows] @ w[:, index] + b[index]
    above = sum(weight[i] for i, s in zip(rows, scores) if s > thresholds[index])
    assert chosen["positive_share"] == pytest.approx(above / weight[rows].sum(), abs=1e-12)
    assert epochs_at == epochs[index]


def test_a_model_that_fits_its_training_rows_keeps_the_held_out_rate_on_new_rows():
    """Text-like rows (6,060 sparse binary features, 1,500 rows, 10% positives; positives carry a few of
    60 "spam" words): the refit model scores its own training rows higher than new ones, so neither
    the held-out rows' share applied to its training rows (2% of new rows predicted positive, F1 0.34
    here) nor a share of them carries over; with as many columns as rows it keeps the raw
    out-of-fold threshold, and on fresh rows it predicts positive about the positive rate and F1
    stays high."""
    rng = np.random.default_rng(0)

    def draw(n):
        y = np.where(rng.random(n) < 0.1, 1.0, -1.0)
        noise = scipy.sparse.random(n, 6000, density=0.003, random_state=rng, data_rvs=lambda k: np.ones(k))
        spam = scipy.sparse.random(n, 60, density=0.05, random_state=rng, data_rvs=lambda k: np.ones(k))
        return scipy.sparse.hstack([scipy.sparse.diags((y > 0).astype(float)) @ spam, noise]).tocsr(), y

    X, y = draw(1500)
    X_new, y_new = draw(5000)
    model = calopt.fit(X, y, measure="f1", seed=0)
    assert model.fit_report.selection["rule"] == "cv:5"
    predicted = np.asarray(model.predict(X_new)) > 0
    assert np.mean(predicted) > 0.7 * np.mean(y_new > 0)
    assert f1_score(y_new > 0, predicted) > 0.75


@pytest.mark.parametrize("columns", [299, 300, 2000])
def test_the_raw_threshold_is_kept_from_as_many_columns_as_rows(monkeypatch, columns):
    """300 training rows: from 300 columns on (2,000: trained in the span of the rows, whose rank
    is 150 here, every row twice) the refit model keeps the raw out-of-fold threshold and says why;
    at 299 columns the folds decide (:meth:`Selector._share_fails`), in their own words if they keep
    it. The CLI's selection line says which. A given rule of one split keeps the share at any width."""
    import calopt.training.pipeline as pipeline

    ranks = []
    row_space = pipeline.RowSpace.of

    def spy(*args, **kwargs):
        space = row_space(*args, **kwargs)
        ranks.append(None if space is None else space.features.shape[1])
        return space

    monkeypatch.setattr(pipeline.RowSpace, "of", spy)
    rng = np.random.default_rng(3)
    X = np.tile(rng.normal(size=(150, columns)), (2, 1)) if columns == 2000 else rng.normal(size=(300, columns))
    y = (X[:, 0] + X[:, 1] + rng.logistic(size=300) > 1.5).astype(int)
    model = calopt.fit(X, y, measure="f1", seed=0)
    transfer = model.fit_report.selection.get("threshold_transfer", "")
    assert model.fit_report.selection["rule"] == "cv:5"
    assert transfer.startswith("out-of-fold threshold (as many columns as rows") == (columns >= 300)
    assert ranks[-1] == (150 if columns == 2000 else None)
    from calopt_cli.options import selection_text

    line = selection_text(model.fit_report.selection, "f1")
    if columns >= 300:
        assert line.endswith("; the out-of-fold threshold kept (as many columns as rows)")
    else:  # the folds' check: the share kept here, or the raw threshold in its own words
        assert "threshold kept" not in line if not transfer else \
            line.endswith("; the out-of-fold threshold kept (the in-sample share does not carry over)")
    if transfer:
        assert model.fit_report.selection["threshold_kept"] == "out-of-fold threshold"
        assert model.fit_report.selection["threshold_reason"] == (
            "as many columns as rows" if columns >= 300 else "the in-sample share does not carry over")
    held = calopt.fit(X, y, measure="f1", seed=0, select="holdout:0.2")
    assert not {"threshold_transfer", "threshold_kept", "threshold_reason"} & set(held.fit_report.selection)


def test_the_selection_line_names_the_threshold_kept():
    from calopt_cli.options import selection_text

    chosen = {"rule": "cv:5", "algorithm": "lbfgs", "epochs": 3, "epochs_run": 9, "value": 0.5}
    assert selection_text(chosen, "f1") == "chosen by cv:5: lbfgs at 3 epochs of 9, held-out f1 0.5000"
    folds = {**chosen, "threshold_transfer": "out-of-fold threshold (the in-sample share does not carry over)"}
    assert selection_text(folds, "f1") == ("chosen by cv:5: lbfgs at 3 epochs of 9, held-out f1 0.5000; the "
                                           "out-of-fold threshold kept (the in-sample share does not carry over)")
    own = {**chosen, "threshold_transfer": "out-of-fold positive share, cut on the training rows' scores without "
                                           "their own terms (wide sparse rows: the refit model separates them)"}
    assert selection_text(own, "f1") == ("chosen by cv:5: lbfgs at 3 epochs of 9, held-out f1 0.5000; the "
                                         "out-of-fold positive share kept, cut without the training rows' own "
                                         "terms (wide sparse rows)")
    # the report's own fields, not its sentence, where it has them
    fields = {**chosen, "threshold_transfer": "anything (a sentence for people)", "threshold_kept":
              "out-of-fold positive share", "threshold_reason": "wide sparse rows"}
    assert selection_text(fields, "f1") == selection_text(own, "f1")
    fields = {**fields, "threshold_kept": "out-of-fold threshold", "threshold_reason": "as many columns as rows"}
    assert selection_text(fields, "f1").endswith("; the out-of-fold threshold kept (as many columns as rows)")


def _wide_rows(rng, n, d, chosen, w):
    """n binary rows of d columns at ~1% non-zero, ``chosen`` columns informative (weights ``w``)."""
    active = rng.random((n, chosen.size)) < 0.3
    noise = scipy.sparse.random(n, d, density=0.008, random_state=rng, data_rvs=lambda k: np.ones(k)).tocsr()
    signal = scipy.sparse.csr_matrix((np.ones(active.sum()), chosen[np.nonzero(active)[1]], np.concatenate(
        [[0], np.cumsum(active.sum(axis=1))])), shape=(n, d))
    X = (noise + signal).tocsr()
    X.data[:] = 1.0
    score = X @ w + rng.logistic(size=n)
    return X, np.where(score > np.quantile(score, 0.9), 1.0, -1.0)


def test_on_far_more_features_than_rows_the_threshold_still_predicts_new_positives(monkeypatch):
    """600 rows, 6,000 binary features (1% non-zero, 40 informative): for F1 the refit model separates
    its training rows, so the fold models' in-sample share put its cut above almost every new row's
    score (2% of new rows predicted positive, F1 0.32 before; on wider data 0). With as many columns
    as rows the refit model keeps the out-of-fold share cut without the rows' own terms (sparse rows
    in their span; the raw out-of-fold threshold elsewhere), for every measure: new rows are
    predicted positive at about the positive rate (F1 0.67, 0.64 with the raw threshold; G-mean 0.88,
    0.86 with the raw threshold, where the in-sample share's cut gave 0.89 and the tuned-threshold
    route 0.90); the report says why. With the in-sample share kept (the
    rule off) the old failure returns."""
    rng = np.random.default_rng(11)
    d, chosen = 6000, np.sort(rng.choice(6000, 40, replace=False))
    w = np.zeros(d)
    w[chosen] = rng.normal(size=40) * 3
    X, y = _wide_rows(rng, 600, d, chosen, w)
    X_new, y_new = _wide_rows(rng, 3000, d, chosen, w)

    def fresh(model):
        predicted = np.asarray(model.predict(X_new)) > 0
        tpr, tnr = np.mean(predicted[y_new > 0]), np.mean(~predicted[y_new < 0])
        return np.mean(predicted), f1_score(y_new > 0, predicted), np.sqrt(tpr * tnr)

    model = calopt.fit(X, y, measure="f1", seed=0)
    share, f1, _ = fresh(model)
    assert 0.05 < share < 0.3 and f1 > 0.55
    assert model.fit_report.selection["threshold_transfer"].startswith("out-of-fold positive share, cut on")
    gmean_model = calopt.fit(X, y, measure="gmean", seed=0)
    assert gmean_model.fit_report.selection["threshold_transfer"].startswith("out-of-fold positive share")
    assert fresh(gmean_model)[2] > 0.85
    monkeypatch.setattr(calopt.training.selection.Selector, "_raw", lambda self, state, index: False)
    share_before, f1_before, _ = fresh(calopt.fit(X, y, measure="f1", seed=0))
    assert share_before < 0.05 and f1_before < 0.4  # the failure the rule removes


def test_on_wide_dense_rows_the_threshold_carries_over_as_the_routes_does(monkeypatch):
    """420 training rows × 2,000 Gaussian columns of unequal scales, 40 informative, 14% positive:
    the models separate their training rows after a few passes, and the in-sample share's cut left
    no new row positive (test F1 and G-mean 0) where scikit-learn's tuned-threshold route gets 0.39
    and 0.62 (G-mean: its threshold tuned for balanced accuracy). With as many columns as rows the
    refit model keeps the raw out-of-fold threshold: 0.41 and 0.65, not below the route by 0.1. With
    the share kept (the raw threshold off) the failure returns."""
    from sklearn.model_selection import TunedThresholdClassifierCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    rng = np.random.default_rng(10)
    X = rng.normal(size=(600, 2000)) * rng.gamma(2, 1, size=2000)
    w = np.zeros(2000)
    w[:40] = rng.normal(size=40)
    score = (X / X.std(axis=0)) @ w
    score = (score - score.mean()) / score.std() * 2
    y = (score + rng.logistic(size=600) > np.quantile(score + rng.logistic(size=600), 0.85)).astype(int)
    X_train, y_train, X_new, y_new = X[:420], y[:420], X[420:], y[420:]

    def gmean(predicted):
        return np.sqrt(np.mean(predicted[y_new == 1]) * np.mean(~predicted[y_new == 0]))

    route = TunedThresholdClassifierCV(make_pipeline(MaxAbsScaler(), LogisticRegression(max_iter=1000)),
                                       scoring="f1", cv=5).fit(X_train, y_train)
    route_f1 = f1_score(y_new, route.predict(X_new))
    model = calopt.fit(X_train, y_train, measure="f1", seed=0)
    assert model.fit_report.selection["threshold_transfer"].startswith("out-of-fold threshold")
    assert f1_score(y_new, model.predict(X_new)) > route_f1 - 0.1
    route_gmean = gmean(TunedThresholdClassifierCV(
        make_pipeline(MaxAbsScaler(), LogisticRegression(max_iter=1000)),
        scoring="balanced_accuracy", cv=5).fit(X_train, y_train).predict(X_new) == 1)
    assert gmean(calopt.fit(X_train, y_train, measure="gmean", seed=0).predict(X_new) == 1) > route_gmean - 0.1
    monkeypatch.setattr(calopt.training.selection.Selector, "_raw", lambda self, state, index: False)
    assert gmean(calopt.fit(X_train, y_train, measure="gmean", seed=0).predict(X_new) == 1) < route_gmean - 0.2


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_stratified_folds_are_scikit_learn_s_stratified_k_fold(seed):
    """The folds made without StratifiedKFold's checks are its folds: labels of any kind and order
    (booleans, text, codes whose first appearance is not their order), k from 2 to the smallest class;
    below that, StratifiedKFold itself (which warns)."""
    import warnings

    from sklearn.model_selection import StratifiedKFold

    from calopt.training.selection import stratified_folds

    rng = np.random.default_rng(seed)
    cases = [rng.random(97) < 0.2, rng.integers(0, 5, 230), np.array(list("cabbcacbbbaacc" * 3)),
             np.repeat([3, 0, 2, 1], [7, 40, 12, 9])[rng.permutation(68)]]
    for labels in cases:
        smallest = int(np.unique(labels, return_counts=True)[1].min())
        for k in range(2, min(smallest, 6) + 1):
            expected = np.empty(labels.size, dtype=np.int64)
            for f, (_, held) in enumerate(StratifiedKFold(k, shuffle=True, random_state=seed).split(
                    np.zeros(labels.size), labels)):
                expected[held] = f
            np.testing.assert_array_equal(stratified_folds(labels, k, seed), expected)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stratified_folds(np.array([0] * 20 + [1] * 3), 5, seed)
    assert any("least populated class" in str(w.message) for w in caught)

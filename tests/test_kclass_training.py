"""Training for K-class measures (issue 26, items 2 and 3): the decision rule chosen on out-of-fold
probabilities, kept by the model and its file, reported; checked against scikit-learn's and
imbalanced-learn's scores of the predictions, scikit-learn's LogisticRegression on each fold and a
plain-loop reference of the rule."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from imblearn.metrics import geometric_mean_score
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, precision_score, recall_score

import calopt
from calopt.errors import ModelFileError, ParameterError, TrainingInterrupted
from calopt.training.checkpoint import Checkpoint
from calopt.training.multiclass import out_of_fold_proba

OLD = Path(__file__).parent / "data" / "old-models"


def _long_tailed(n: int = 900, K: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian classes of sizes falling geometrically (the largest 10x the smallest), overlapping."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(8, np.round(n * np.geomspace(1.0, 0.1, K) / np.geomspace(1.0, 0.1, K).sum())).astype(int)
    centres = rng.normal(size=(K, 5)) * 1.2
    X = np.concatenate([rng.normal(size=(s, 5)) + centres[k] for k, s in enumerate(sizes)])
    y = np.repeat(np.arange(K), sizes)
    order = rng.permutation(y.size)
    return X[order], y[order]


def _softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def gmean_model():
    X, y = _long_tailed()
    return X, y, calopt.fit(X, y, measure="gmean", seed=0)


def test_predict_is_the_gain_rule_on_the_softmax_and_scores_match_imblearn_and_sklearn(gmean_model):
    X, y, model = gmean_model
    assert model.gains.shape == (4, 4) and model.has_rule
    expected = np.argmax(_softmax(X @ model.coef + model.intercept) @ model.gains, axis=1)  # plain arithmetic
    predicted = model.predict(X)
    np.testing.assert_array_equal(predicted, expected)
    result = model.evaluate(X, y, ["gmean", "f1", "balanced-accuracy"])
    values = {entry["measure"]: entry["value"] for entry in result["measures"]}
    assert values["gmean"] == pytest.approx(geometric_mean_score(y, predicted, average="multiclass"))
    assert values["f1"] == pytest.approx(f1_score(y, predicted, average="macro"))
    assert model.score(X, y) == pytest.approx(values["gmean"])
    assert list(result["recall"].values()) == pytest.approx(recall_score(y, predicted, average=None))
    assert list(result["precision"].values()) == pytest.approx(
        precision_score(y, predicted, average=None, zero_division=0))
    argmax = np.argmax(model.decision_function(X), axis=1)
    assert result["top1"] == pytest.approx(np.mean(argmax == y))  # top-k ranks the scores
    assert result["accuracy"] == pytest.approx(np.mean(predicted == y))


def test_the_report_carries_the_held_out_values_and_the_rule_beats_the_argmax_there(gmean_model):
    X, y, model = gmean_model
    decision = model.fit_report.decision
    assert decision.rule == "gain matrix" and decision.measure == "gmean" and decision.folds == 5
    assert decision.held_out >= decision.argmax and decision.held_out > 0
    assert decision.gap is not None and np.isfinite(decision.gap)
    # on the training rows too the rule is well above the argmax of the same scores here
    argmax = np.argmax(model.decision_function(X), axis=1)
    assert geometric_mean_score(y, model.predict(X), average="multiclass") > \
        geometric_mean_score(y, argmax, average="multiclass") + 0.05


def test_fold_models_run_long_enough_are_scikit_learns_logistic_regression_on_the_fold():
    """out_of_fold_proba: each row's probabilities by LogisticRegression(C) fitted on the other folds'
    rows (the multinomial objective; run to convergence from a start that is not the fold's optimum)."""
    X, y = _long_tailed(300, 3, seed=2)
    fold = np.arange(y.size) % 3
    start = np.zeros((5, 3)), np.zeros(3)
    proba = out_of_fold_proba(X, y, None, *start, C=0.5, fold=fold, passes=500, tol=1e-9)
    for f in range(3):
        reference = LogisticRegression(C=0.5, tol=1e-10, max_iter=5000).fit(X[fold != f], y[fold != f])
        np.testing.assert_allclose(proba[fold == f], reference.predict_proba(X[fold == f]), atol=2e-4)


def test_accuracy_keeps_the_argmax_and_other_algorithms_say_why(gmean_model):
    X, y, _ = gmean_model
    model = calopt.fit(X, y, measure="accuracy")
    assert model.gains is None and model.fit_report.decision.rule == "argmax"
    np.testing.assert_array_equal(model.predict(X), np.argmax(model.decision_function(X), axis=1))
    per_class = calopt.fit_multiclass(X, y, measure="gmean", algorithm="plugin", epochs=2)
    assert per_class.gains is None and "one class against the rest" in per_class.fit_report.decision.reason
    slnd = calopt.fit(X, y, measure="gmean", algorithm="slnd", epochs=2)
    assert slnd.gains is None and "not probabilities" in slnd.fit_report.decision.reason



@pytest.mark.parametrize("spec", ["f1:average=micro", "fbeta:beta=2,average=micro", "jaccard:average=micro",
                                  "precision:average=micro", "gower-legendre:average=micro"])
def test_micro_averages_keep_the_argmax_which_maximises_them_as_it_does_accuracy(gmean_model, spec):
    """With one label a row a micro average is an increasing function of accuracy (scikit-learn's
    micro F1, precision and F-beta equal accuracy_score; micro Jaccard is accuracy / (2 − accuracy)):
    the model keeps the argmax, says why, and predicts as the accuracy model does. Macro averages and
    constrained micro ones still get a rule."""
    from sklearn.metrics import accuracy_score, fbeta_score, jaccard_score

    X, y, _ = gmean_model
    predicted = np.random.default_rng(1).integers(0, y.max() + 1, y.size)
    accuracy = accuracy_score(y, predicted)
    assert f1_score(y, predicted, average="micro") == pytest.approx(accuracy)
    assert fbeta_score(y, predicted, beta=2, average="micro") == pytest.approx(accuracy)
    assert jaccard_score(y, predicted, average="micro") == pytest.approx(accuracy / (2 - accuracy))
    model = calopt.fit(X, y, measure=spec)
    assert model.gains is None and model.fit_report.decision.rule == "argmax"
    assert "increasing function of accuracy alone" in model.fit_report.decision.reason
    np.testing.assert_array_equal(model.predict(X), calopt.fit(X, y, measure="accuracy").predict(X))
    assert calopt.fit(X, y, measure=spec.replace("average=micro", "average=macro")).gains is not None
    constrained = calopt.fit(X, y, measure=spec, constraints=["recall[0]>=0.9"])
    assert constrained.gains is not None

def test_model_files_keep_the_rule_and_older_files_load_as_the_argmax(gmean_model, tmp_path):
    X, y, model = gmean_model
    model.save(tmp_path / "rule.npz")
    loaded = calopt.load_model(tmp_path / "rule.npz")
    np.testing.assert_array_equal(loaded.gains, model.gains)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.fit_report.decision == model.fit_report.decision
    with zipfile.ZipFile(tmp_path / "rule.npz") as archive:
        assert "gains.npy" in archive.namelist()
    plain = calopt.fit(X, y, measure="accuracy")
    plain.save(tmp_path / "plain.npz")  # no rule: the version older calopt reads
    metadata = json.loads(bytes(np.load(tmp_path / "plain.npz")["metadata"]).decode())
    assert metadata["format_version"] == 1
    for name in ("per-class.npz", "slnd.npz"):  # files users already have: the argmax
        old = calopt.load_model(OLD / name)
        assert old.gains is None and old.fit_report.decision is None
        X_old = np.zeros((3, old.n_features))
        np.testing.assert_array_equal(old.predict(X_old),
                                      np.asarray(old.classes)[np.argmax(old.decision_function(X_old), axis=1)])


def test_a_rule_of_the_wrong_shape_is_a_one_line_model_file_error(gmean_model, tmp_path):
    _, _, model = gmean_model
    import dataclasses

    dataclasses.replace(model, gains=np.eye(3)).save(tmp_path / "bad.npz")
    with pytest.raises(ModelFileError, match=r"gains has shape \(3, 3\), not \(4, 4\)"):
        calopt.load_model(tmp_path / "bad.npz")


def test_randomised_rule_draws_reproducibly_from_the_mixture(tmp_path):
    X, y = _long_tailed(seed=3)
    model = calopt.fit(X, y, measure="gmean", randomised=True, seed=0)
    decision = model.fit_report.decision
    assert decision.rule == "randomised" and model.gains is None
    assert model.mixture_weights.sum() == pytest.approx(1.0)
    assert decision.held_out == decision.mixture
    first = model.predict(X)
    np.testing.assert_array_equal(first, model.predict(X))  # the model's seed
    proba = _softmax(model.decision_function(X))
    each = np.stack([np.argmax(proba @ g, axis=1) for g in model.mixture_gains])  # (T, n)
    assert np.all((each == first).any(axis=0))  # every row got one of the mixture's rules' classes
    model.save(tmp_path / "mixture.npz")
    np.testing.assert_array_equal(calopt.load_model(tmp_path / "mixture.npz").predict(X), first)
    with pytest.raises(ParameterError, match="three or more classes"):
        calopt.fit(X, np.minimum(y, 1), randomised=True)


def test_constraints_on_k_classes_name_a_class_of_the_labels():
    X, y = _long_tailed()
    with pytest.raises(ParameterError, match="with 4 classes name the class"):
        calopt.fit(X, y, measure="gmean", constraints="recall>=0.8")
    with pytest.raises(ParameterError, match=r"no class '7' in the training labels \(0, 1, 2, 3\)"):
        calopt.fit(X, y, measure="gmean", constraints="recall[7]>=0.8")
    with pytest.raises(ParameterError, match="for three or more classes"):
        calopt.fit(X, np.minimum(y, 1), measure="gmean", constraints="recall[1]>=0.8")
    with pytest.raises(ParameterError, match="decision rule of the multinomial model"):
        calopt.fit(X, y, measure="gmean", algorithm="slnd", constraints="recall[3]>=0.8")
    with pytest.raises(ParameterError, match="randomised"):
        calopt.fit(X, y, measure="gmean", randomised=True, constraints="recall[3]>=0.8")
    one = np.append(y, 4)  # a class of one row keeps the argmax: its constraints are not dropped silently
    with pytest.raises(ParameterError, match="need the decision rule, which this model cannot have: a class has"):
        calopt.fit(np.vstack([X, X[:1]]), one, measure="gmean", constraints="recall[3]>=0.8")


def test_a_class_s_recall_constraint_holds_on_new_rows():
    """The smallest class's recall bounded at 0.95: the model's rule meets it on the out-of-fold rows
    (its report) and, within sampling error, on 20,000 new rows of the same distribution, where
    the unconstrained rule's recall of that class is far lower; scikit-learn's recall_score."""
    from sklearn.metrics import recall_score

    X_all, y_all = _long_tailed(26_000, seed=3)  # one distribution (the class centres are the seed's)
    X, y, X_test, y_test = X_all[:6000], y_all[:6000], X_all[6000:], y_all[6000:]
    plain = calopt.fit(X, y, measure="gmean")
    model = calopt.fit(X, y, measure="gmean", constraints="recall[3]>=0.95")
    (entry,) = model.fit_report.decision.constraints
    assert entry["satisfied"] and entry["value"] >= 0.95
    recalls = recall_score(y_test, model.predict(X_test), average=None)
    before = recall_score(y_test, plain.predict(X_test), average=None)
    # the rule met it on the training rows' out-of-fold probabilities, a sample too: two standard
    # errors of the difference of the two recalls (the training and the new rows of class 3)
    error = 2 * np.sqrt(0.95 * 0.05 * (1 / np.sum(y == 3) + 1 / np.sum(y_test == 3)))
    assert recalls[3] >= 0.95 - error
    assert before[3] < 0.9
    assert model.measure == "gmean"  # the measure a model is scored by; the constraint is the rule's


class _StopAt:
    def __init__(self, at: int | None = None):
        self.at, self.calls = at, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.at is not None and self.calls >= self.at


def test_an_interrupted_run_resumes_to_the_same_rule(tmp_path):
    X, y = _long_tailed(seed=4)
    options = dict(measure="min", algorithm="multinomial:tol=0", epochs=6, batch_size=100, seed=1)
    counter = _StopAt()
    reference = calopt.fit(X, y, **options, interrupt=counter)
    path = tmp_path / "stop.npz"
    with pytest.raises(TrainingInterrupted):
        calopt.fit(X, y, **options, checkpoint=path, interrupt=_StopAt(counter.calls // 2))
    assert Checkpoint.load(path).options["measure"] == "min"
    resumed = calopt.fit(X, y, **options, resume=path)
    np.testing.assert_array_equal(resumed.gains, reference.gains)
    resumed.save(tmp_path / "resumed.npz")
    reference.save(tmp_path / "reference.npz")
    assert (tmp_path / "resumed.npz").read_bytes() == (tmp_path / "reference.npz").read_bytes()


def test_the_multinomial_model_is_standardscaler_logisticregression_on_dense_data():
    """Dense columns with large offsets and unequal spreads: the multinomial model (the argmax, for
    accuracy) is scikit-learn's StandardScaler + LogisticRegression(C=1) (the same optimum), not the
    max-abs-scaled fit whose offsets the penalty fights."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(4)
    n = 3000
    X = rng.standard_normal((n, 4)) * [300.0, 1.0, 25.0, 0.01] + [2950.0, 0.0, -40.0, 5.0]
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    logits = Z @ np.array([[1.5, -1.0, 0.0], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [0.5, 0.5, -1.0]])
    y = np.array([rng.choice(3, p=np.exp(row) / np.exp(row).sum()) for row in logits])
    model = calopt.fit(X, y, measure="accuracy")
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, tol=1e-8, max_iter=10_000)).fit(X, y)
    scores = X @ model.coef + model.intercept
    proba = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(proba / proba.sum(axis=1, keepdims=True), reference.predict_proba(X), atol=2e-3)
    assert np.mean(model.predict(X) == reference.predict(X)) > 0.995


def test_weighted_fold_models_minimise_the_documented_objective_and_sparse_rows_give_the_dense_ones():
    """out_of_fold_proba run to convergence with sample weights: each fold model minimises
    (1/m)·Σ s_i·[log Σ exp(z_i) − z_i,y_i] + ‖W‖²/(2·C·m) over its m rows, s the weights scaled to mean 1
    there (written here with plain loops and minimised by SciPy from zero, without a gradient); and a
    sparse matrix of the rows gives what the dense one gives."""
    import scipy.optimize
    import scipy.sparse

    X, y = _long_tailed(120, 3, seed=4)
    X = X[:, :3]
    fold = np.arange(y.size) % 3
    weight = np.random.default_rng(0).integers(1, 4, size=y.size).astype(float)
    start = np.zeros((3, 3)), np.zeros(3)
    proba = out_of_fold_proba(X, y, weight, *start, C=0.7, fold=fold, passes=500, tol=1e-10)
    for f in range(3):
        rows = np.flatnonzero(fold != f)
        s = weight[rows] / weight[rows].mean()

        def objective(z, rows=rows, s=s):
            W, b = z[:9].reshape(3, 3), z[9:]
            total = 0.0
            for i, si in zip(rows, s):
                scores = X[i] @ W + b
                total += si * (np.log(np.sum(np.exp(scores))) - scores[y[i]])
            return total / rows.size + np.sum(W * W) / (2 * 0.7 * rows.size)

        z = scipy.optimize.minimize(objective, np.zeros(12), method="BFGS", options={"gtol": 1e-9}).x
        held = fold == f
        np.testing.assert_allclose(proba[held], _softmax(X[held] @ z[:9].reshape(3, 3) + z[9:]), atol=1e-5)
    sparse = out_of_fold_proba(scipy.sparse.csr_matrix(X), y, None, *start, C=1.0, fold=fold, passes=7)
    np.testing.assert_allclose(sparse, out_of_fold_proba(X, y, None, *start, C=1.0, fold=fold, passes=7),
                               rtol=1e-10, atol=1e-12)


def test_rule_rows_keep_small_classes_whole_and_weigh_rows_back_to_the_class_counts():
    """Beyond RULE_ROWS rows the rule's sample keeps every row of the classes below an equal share,
    draws the others down to a common quota, and weighs each row by its class's count over its kept
    count (mean 1): by plain counting, the weighted class totals are the data's class shares."""
    from calopt.training.multiclass import rule_rows

    codes = np.repeat(np.arange(4), [50_000, 20_000, 3_000, 700])
    index, weight = rule_rows(codes, None, seed=1, rows=10_000)
    kept = np.bincount(codes[index], minlength=4)
    assert kept.tolist() == [3_150, 3_150, 3_000, 700]  # 10,000 − 3,700 shared by the two large classes
    assert index.size == 10_000 and np.unique(index).size == index.size
    assert weight.mean() == pytest.approx(1.0)
    totals = np.bincount(codes[index], weights=weight, minlength=4)
    np.testing.assert_allclose(totals / totals.sum(), np.bincount(codes) / codes.size, rtol=1e-12)
    assert rule_rows(codes, None, seed=1, rows=codes.size) == (None, None)


def test_a_large_k_class_fit_chooses_its_rule_on_the_sample_and_says_so(monkeypatch):
    """With RULE_ROWS below the training rows the model's report gives the rows its rule was
    chosen on, the rule still beats the argmax out of fold there, and its test G-mean is within
    0.03 of the rule chosen on every row (imbalanced-learn's G-mean)."""
    import calopt.training.multiclass as multiclass

    X, y = _long_tailed(6_000, K=5, seed=3)
    X_test, y_test = _long_tailed(6_000, K=5, seed=4)
    every = calopt.fit(X, y, measure="gmean", seed=0)
    monkeypatch.setattr(multiclass, "RULE_ROWS", 2_000)
    sampled = calopt.fit(X, y, measure="gmean", seed=0)
    decision = sampled.fit_report.decision
    assert decision.rows == 2_000 and every.fit_report.decision.rows is None
    from calopt_cli.training import decision_text
    assert "out-of-fold probabilities of a class-weighted sample of 2,000 rows:" in decision_text(decision)
    assert "sample" not in decision_text(every.fit_report.decision)
    assert decision.held_out >= decision.argmax
    ours = geometric_mean_score(y_test, sampled.predict(X_test), average="multiclass")
    assert ours >= geometric_mean_score(y_test, every.predict(X_test), average="multiclass") - 0.03


def test_the_estimator_names_a_constrained_class_by_its_label():
    """CaloptClassifier trains on class codes: a constraint names the class by its label, as y does."""
    from calopt.sklearn import CaloptClassifier

    X, y = _long_tailed()
    names = np.array(["ant", "bee", "cat", "eel"])[y]
    estimator = CaloptClassifier(measure="gmean", constraints=["recall[eel]>=0.9"]).fit(X, names)
    (entry,) = estimator.model_.fit_report.decision.constraints
    assert entry["constraint"] == "recall[eel]>=0.9" and entry["satisfied"] and entry["value"] >= 0.9
    with pytest.raises(ParameterError, match=r"no class 'emu' in y \(ant, bee, cat, eel\)"):
        CaloptClassifier(measure="gmean", constraints=["recall[emu]>=0.9"]).fit(X, names)


def _fold_log_loss(X: np.ndarray, y: np.ndarray, fold: np.ndarray, C: float) -> float:
    """The out-of-fold log loss of scikit-learn's LogisticRegression(C), fitted on each fold's other rows."""
    proba = np.empty((y.size, int(y.max()) + 1))
    for f in range(int(fold.max()) + 1):
        fitted = LogisticRegression(C=C, tol=1e-10, max_iter=10_000).fit(X[fold != f], y[fold != f])
        proba[fold == f] = fitted.predict_proba(X[fold == f])
    return float(-np.mean(np.log(proba[np.arange(y.size), y])))


def test_c_is_chosen_by_scikit_learns_out_of_fold_log_loss_and_the_model_is_its_logistic_regression(monkeypatch):
    """With the fold models and the model at the chosen C run to convergence, each candidate's reported
    log loss is that of scikit-learn's LogisticRegression(C) cross-validated on the same folds, the C
    chosen is the smallest's, and the model's probabilities are LogisticRegression(C)'s on every row."""
    import calopt.training.multiclass as multiclass
    from sklearn.preprocessing import StandardScaler

    monkeypatch.setattr(multiclass, "FOLD_PASSES", 800)
    monkeypatch.setattr(multiclass, "FOLD_TOL", 1e-10)
    X, y = _long_tailed(300, 3, seed=2)
    X = StandardScaler().fit_transform(X)  # calopt's own standardizing then leaves the rows as they are
    model = calopt.fit(X, y, measure="gmean", seed=0)
    decision = model.fit_report.decision
    fold = multiclass._folds(y, 0)
    expected = {C: _fold_log_loss(X, y, fold, C) for C in (0.1, 1.0, 10.0)}
    assert [entry["C"] for entry in decision.C_log_loss] == [0.1, 1.0, 10.0]
    for entry in decision.C_log_loss:
        assert entry["log_loss"] == pytest.approx(expected[entry["C"]], rel=1e-5)
    assert decision.C == min(expected, key=expected.get) == 10.0 and decision.C_kept is None
    reference = LogisticRegression(C=10.0, tol=1e-10, max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(_softmax(model.decision_function(X)), reference.predict_proba(X), atol=1e-5)


def test_a_given_c_or_no_selection_keeps_the_c_and_the_model_of_the_run():
    X, y = _long_tailed(300, 3, seed=2)
    chosen = calopt.fit(X, y, measure="gmean", seed=0)
    assert chosen.fit_report.decision.C == 10.0  # the default chooses another C here (the test above)
    for options in ({"algorithm": "multinomial:C=1"}, {"select": "none"}):
        kept = calopt.fit(X, y, measure="gmean", seed=0, **options)
        decision = kept.fit_report.decision
        assert decision.C == 1.0 and decision.C_log_loss is None and decision.C_kept == "given"
        # the model is the run's: the argmax model of the same data (accuracy chooses no rule and no C)
        plain = calopt.fit(X, y, measure="accuracy", seed=0)
        np.testing.assert_array_equal(kept.coef, plain.coef)
        np.testing.assert_array_equal(kept.intercept, plain.intercept)
    assert not np.array_equal(chosen.coef, plain.coef)


def test_c_is_kept_where_the_rule_works_on_a_sample_or_the_memory_would_be_large():
    from calopt.training.multiclass import C_CHOICE_BYTES, C_ROWS_A_PARAMETER, c_kept_reason

    small, wide = np.zeros((10, 100)), scipy_sparse_shape(10, 2_000_000)
    assert c_kept_reason(small, 5, sampled=False) is None
    assert "rule's sample" in c_kept_reason(small, 5, sampled=True)
    reason = c_kept_reason(wide, 20, sampled=False)
    assert "parameters a model" in reason and f"{C_CHOICE_BYTES >> 20} MiB" in reason
    # 4 classes of (3 + 1) weights: 16 parameters; kept from C_ROWS_A_PARAMETER rows a parameter
    assert c_kept_reason(np.zeros((16 * C_ROWS_A_PARAMETER - 1, 3)), 4, sampled=False) is None
    assert "rows for 16 parameters" in c_kept_reason(np.zeros((16 * C_ROWS_A_PARAMETER, 3)), 4, sampled=False)


def test_many_rows_a_parameter_keep_the_runs_c_and_say_why():
    """3 features and 4 classes (16 parameters) on 1,700 rows: the model is the C = 1 model the run
    trained (the accuracy model's coefficients) and the report says why C was not chosen; on 1,500
    rows (under 100 a parameter) C is chosen among the candidates."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1700, 3))
    y = np.argmax(X @ rng.normal(size=(3, 4)) + rng.gumbel(size=(1700, 4)), axis=1)
    kept = calopt.fit(X, y, measure="gmean", seed=0)
    assert "rows for 16 parameters" in kept.fit_report.decision.C_kept and kept.fit_report.decision.C == 1.0
    plain = calopt.fit(X, y, measure="accuracy", seed=0)
    np.testing.assert_array_equal(kept.coef, plain.coef)
    chosen = calopt.fit(X[:1500], y[:1500], measure="gmean", seed=0)
    assert chosen.fit_report.decision.C_kept is None and len(chosen.fit_report.decision.C_log_loss) == 3


def scipy_sparse_shape(n: int, d: int):
    import scipy.sparse

    return scipy.sparse.csr_matrix((n, d))


def test_large_fold_models_step_in_threads_to_the_same_bits(monkeypatch):
    """Above THREADED_PARAMETERS the K-class rule's fold models run in groups, a group's pass in a
    thread, and stop together: the out-of-fold probabilities, the C chosen, the model and its
    rule equal, to the bit, those of every model in one group."""
    import threading

    import scipy.sparse

    from calopt.training import multiclass, selection

    if selection.trainer_pool() is None:
        pytest.skip("one core: the fold models run in one group")
    rng = np.random.default_rng(7)
    X = scipy.sparse.random(400, 600, density=0.02, random_state=8, format="csr")
    y = np.argmax(np.asarray(X @ rng.standard_normal((600, 3))) + rng.gumbel(size=(400, 3)), axis=1)
    threads: set[str] = set()
    step = multiclass._LbfgsRun.step

    def recorded(self):
        threads.add(threading.current_thread().name)
        return step(self)

    monkeypatch.setattr(multiclass._LbfgsRun, "step", recorded)
    monkeypatch.setattr(multiclass, "THREADED_PARAMETERS", 1)
    threaded = calopt.fit(X, y, measure="gmean", seed=3)
    proba_threaded = out_of_fold_proba(X, y, None, np.zeros((600, 3)), np.zeros(3), 1.0, np.arange(400) % 4)
    assert any(name.startswith("calopt-trainer") for name in threads)
    threads.clear()
    monkeypatch.setattr(multiclass, "THREADED_PARAMETERS", 1 << 62)
    one = calopt.fit(X, y, measure="gmean", seed=3)
    proba_one = out_of_fold_proba(X, y, None, np.zeros((600, 3)), np.zeros(3), 1.0, np.arange(400) % 4)
    assert threads == {threading.current_thread().name}
    assert proba_threaded.tobytes() == proba_one.tobytes()
    assert threaded.coef.tobytes() == one.coef.tobytes() and threaded.intercept.tobytes() == one.intercept.tobytes()
    assert threaded.fit_report.decision == one.fit_report.decision
    assert threaded.fit_report.decision is not None


class _Quadratics:
    """f = ½Σa·x² − b·x per model (rows of a, b): model-wise independent, its gradient a·x − b."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def part(self, models):
        return _Quadratics(self.a[models], self.b[models])

    def __call__(self, x):
        return np.sum(0.5 * self.a * x * x - self.b * x, axis=1), self.a * x - self.b


def test_grouped_fold_models_stop_when_every_group_has_converged(monkeypatch):
    """Models in groups stop together, when the last group meets the tolerance: the first group's
    well-conditioned models converge in a few passes, the second's need many; every model equals
    its run in one group to the bit, and the slow ones reach their optimum a/b."""
    from calopt.training import multiclass, selection

    if selection.trainer_pool() is None:
        pytest.skip("one core: the models run in one group")
    rng = np.random.default_rng(2)
    a = np.vstack([np.ones((2, 64)), rng.uniform(1, 30, size=(2, 64))])
    b = rng.standard_normal((4, 64))
    start = np.zeros((4, 64))
    monkeypatch.setattr(multiclass, "THREADED_PARAMETERS", 1)
    grouped = multiclass._lbfgs(_Quadratics(a, b), start, 500, 1e-6)
    monkeypatch.setattr(multiclass, "THREADED_PARAMETERS", 1 << 62)
    one = multiclass._lbfgs(_Quadratics(a, b), start, 500, 1e-6)
    assert grouped.tobytes() == one.tobytes()
    assert np.max(np.abs(a * grouped - b)) <= 1e-6  # every model at its optimum b/a, to the tolerance
    assert np.max(np.abs(a * multiclass._lbfgs(_Quadratics(a, b), start, 5, 1e-6) - b)) > 1e-3  # not at 5

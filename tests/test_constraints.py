"""Rate constraints (issue 16): the spec parser, the constraints as linear functions of (TPR, TNR),
the constrained solver's update against a plain loop, a 2-D problem whose constrained optimum is
found by brute force, infeasible constraints, and the array-API path."""

from __future__ import annotations

import math

import numpy as np
import pytest

import calopt
from calopt.algorithms import Problem
from calopt.constraints import RATES, ConstrainedMeasure, constrain, parse_constraint, parse_constraints
from calopt.errors import ParameterError
from calopt.io.batches import Batch
from calopt.measures import confusion_counts


@pytest.mark.parametrize("spec, rate, lower, bound", [
    ("precision>=0.9", "precision", True, 0.9),
    (" fpr <= 0.01 ", "fpr", False, 0.01),
    ("recall>=0.95", "tpr", True, 0.95),
    ("predicted-positive-rate<=0.05", "predicted-positive-rate", False, 0.05),
    ("Predicted_Positive_Rate ≤ .05", "predicted-positive-rate", False, 0.05),
    ("accuracy>=1", "accuracy", True, 1.0),
    ("fnr<=0", "fnr", False, 0.0),
    ("tnr>=0.5", "tnr", True, 0.5),
])
def test_good_specs_parse(spec, rate, lower, bound):
    constraint = parse_constraint(spec)
    assert (constraint.spec, constraint.rate, constraint.lower, constraint.bound) == (spec, rate, lower, bound)


@pytest.mark.parametrize("spec, says", [
    ("precision>0.9", "must be >= or <="),
    ("precision=0.9", "must be >= or <="),
    ("precison>=0.9", "did you mean 'precision'"),
    ("f1>=0.5", "unknown rate 'f1'"),
    ("precision>=high", "is not a number"),
    ("precision>=1.5", "outside"),
    ("precision>=nan", "outside"),
    ("precision", "expected RATE>=BOUND"),
    (">=0.9", "expected RATE>=BOUND"),
    ("", "expected RATE>=BOUND"),
])
def test_bad_specs_are_one_line_errors_naming_the_spec(spec, says):
    with pytest.raises(ParameterError) as info:
        parse_constraint(spec)
    message = str(info.value)
    assert "\n" not in message and says in message and repr(spec) in message


def test_the_same_constraint_twice_is_refused():
    with pytest.raises(ParameterError, match="given twice"):
        parse_constraints(["precision>=0.9", "precision >= 0.90"])


def test_each_constraint_is_linear_in_the_rates():
    """u0 + u1·TPR + u2·TNR ≥ 0 exactly when the rate from the counts meets the bound (random counts)."""
    rng = np.random.default_rng(0)
    for rate in RATES:
        for lower in (True, False):
            for _ in range(200):
                tp, fp, tn, fn = rng.integers(1, 50, size=4).astype(float)
                bound = float(rng.uniform(0.05, 0.95))
                constraint = parse_constraint(f"{rate}{'>=' if lower else '<='}{bound}")
                value = float(constraint.value(tp, fp, tn, fn, xp=np))
                p = (tp + fn) / (tp + fp + tn + fn)
                u0, u1, u2 = constraint.linear(p)
                slack = u0 + u1 * tp / (tp + fn) + u2 * tn / (tn + fp)
                if abs(value - bound) > 1e-9:
                    assert (slack >= 0) == constraint.holds(value), (rate, lower, bound, value, slack)


def test_constrained_measure_prefers_feasible_then_closest():
    measure = constrain(calopt.get_measure("recall"), ["precision>=0.8"])
    assert isinstance(measure, ConstrainedMeasure) and measure.family == "constrained"
    # (tp, fp, tn, fn): feasible with recall 0.5; infeasible with recall 1 but precision 0.5 / 0.75
    tp, fp, tn, fn = (np.array(v, dtype=float) for v in ([5, 10, 10], [1, 10, 10 / 3], [20, 10, 10], [5, 0, 0]))
    values = measure.from_counts(tp, fp, tn, fn, xp=np)
    assert values[0] == pytest.approx(0.5)
    assert values[0] > values[2] > values[1]  # feasible > closer to feasible > further


# -- the dual update against a plain loop -----------------------------------------------------------
def _reference(points, labels, p, objective, constraints, step, dual_step, multiplier_step, bound):
    """The constrained solver's updates one point at a time, in plain Python floats (hinge reward).

    Objective weights: SPADE's (α, β) for a concave measure, (a1 − v·b1, a2 − v·b2)/b0 at the level
    v of the running 0-1 rates for a pseudo-linear one; λ descends on the point's 0-1 slack.
    """
    d = len(points[0])
    w, b = [0.0] * d, 0.0
    if objective.family == "concave":
        alpha, beta = objective.dual_start
    tpr_run = tnr_run = 0.5
    linear = [c.linear(p) for c in constraints]
    lam = [0.0] * len(constraints)
    for t, (x, y) in enumerate(zip(points, labels), start=1):
        score = sum(wi * xi for wi, xi in zip(w, x)) + b
        margin = y * score
        reward = min(1.0, margin)
        dr_ds = (1.0 if margin < 1 else 0.0) * y
        correct = 1.0 if margin > 0 else 0.0
        tpr = correct / p if y > 0 else 0.0
        tnr = correct / (1 - p) if y < 0 else 0.0
        eta, eta_dual = step / math.sqrt(t), dual_step / math.sqrt(t)
        if objective.family == "concave":
            weight_pos, weight_neg = alpha, beta
            r_pos = reward / p if y > 0 else 0.0
            r_neg = reward / (1 - p) if y < 0 else 0.0
            alpha, beta = (float(v) for v in objective.project(np.float64(alpha - eta_dual * r_pos),
                                                                np.float64(beta - eta_dual * r_neg), xp=np))
        else:
            (a0, a1, a2), (b0, b1, b2) = objective.coefficients(p)
            level = (a0 + a1 * tpr_run + a2 * tnr_run) / (b0 + b1 * tpr_run + b2 * tnr_run)
            weight_pos, weight_neg = (a1 - level * b1) / b0, (a2 - level * b2) / b0
        weight_pos += sum(l * u[1] for l, u in zip(lam, linear))
        weight_neg += sum(l * u[2] for l, u in zip(lam, linear))
        class_weight = weight_pos / p if y > 0 else weight_neg / (1 - p)
        w = [wi + eta * class_weight * dr_ds * xi for wi, xi in zip(w, x)]
        b = b + eta * class_weight * dr_ds
        lam = [min(max(l - multiplier_step / math.sqrt(t) * (u[0] + u[1] * tpr + u[2] * tnr), 0.0), bound)
               for l, u in zip(lam, linear)]
        tpr_run += (tpr - tpr_run) / t
        tnr_run += (tnr - tnr_run) / t
    return np.array(w), b, np.array(lam)


@pytest.mark.parametrize("objective, specs", [
    ("recall", ["precision>=0.7"]),
    ("gmean", ["fpr<=0.2", "tpr>=0.6"]),
    ("precision", ["recall>=0.8"]),
    ("f1", ["predicted-positive-rate<=0.3"]),
])
def test_batch_of_one_is_the_pointwise_update(objective, specs):
    rng = np.random.default_rng(3)
    n = 60
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + 0.8 * rng.normal(size=n) > 0.3, 1.0, -1.0)
    p = float(np.mean(y > 0))
    measure = constrain(calopt.get_measure(objective), specs)
    algorithm = calopt.get_algorithm("constrained:step=3,dual_step=0.2,multiplier_step=2,multiplier_bound=5,"
                                     "average=false")
    problem = Problem(np, np.float64, "cpu", n, 3, p, measure, calopt.get_loss("hinge"), 1, 1)
    algorithm.check_problem(problem)
    state = algorithm.init(problem)
    for i in range(n):
        state = algorithm.update(state, Batch(X[i:i + 1], y[i:i + 1], None), problem, i + 1)  # t: the loop's
    w, b, lam = _reference(X.tolist(), y.tolist(), p, measure.objective, measure.constraints, 3.0, 0.2, 2.0, 5.0)
    assert np.any(lam > 0)  # the constraints were priced at some point
    np.testing.assert_allclose(np.asarray(state.w), w, rtol=1e-10, atol=1e-12)
    assert float(state.b) == pytest.approx(b, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(np.asarray(state.multipliers), lam, rtol=1e-10, atol=1e-12)


def test_a_batch_is_the_mean_of_its_points():
    """One update on a batch equals the mean of the points' pointwise gradients and slacks (t = 1)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(16, 2))
    y = np.where(rng.uniform(size=16) < 0.4, 1.0, -1.0)
    measure = constrain(calopt.get_measure("recall"), ["precision>=0.6"])
    algorithm = calopt.get_algorithm("constrained:step=1,average=false")
    problem = Problem(np, np.float64, "cpu", 16, 2, 0.4, measure, calopt.get_loss("hinge"), 16, 1)
    start = algorithm.init(problem)
    start = start._replace(b=np.float64(0.2), w=np.array([0.3, -0.5]), multipliers=np.array([0.7]))
    batch = algorithm.update(start, Batch(X, y, None), problem, 1)
    singles = [algorithm.update(start, Batch(X[i:i + 1], y[i:i + 1], None), problem, 1) for i in range(16)]
    np.testing.assert_allclose(batch.w - start.w, np.mean([s.w - start.w for s in singles], axis=0), atol=1e-12)
    np.testing.assert_allclose(batch.multipliers - start.multipliers,
                               np.mean([s.multipliers - start.multipliers for s in singles], axis=0), atol=1e-12)


# -- a 2-D problem whose constrained optimum is known by brute force ---------------------------------
def _two_gaussians(n, seed):
    rng = np.random.default_rng(seed)
    y = np.where(rng.uniform(size=n) < 0.3, 1.0, -1.0)
    X = rng.normal(size=(n, 2)) + np.where(y[:, None] > 0, [1.2, 0.6], [0.0, 0.0])
    X[:, 1] *= 2.0  # an anisotropic problem: the best direction is not the mean difference's
    return X, y


def _brute_force(X, y, bound):
    """The best training recall with precision ≥ bound over linear models (720 directions × every threshold)."""
    best = 0.0
    for angle in np.linspace(0, 2 * np.pi, 720, endpoint=False):
        scores = X @ np.array([np.cos(angle), np.sin(angle)])
        order = np.argsort(-scores, kind="stable")
        positive = y[order] > 0
        tp, fp = np.cumsum(positive), np.cumsum(~positive)
        distinct = np.r_[scores[order][:-1] > scores[order][1:], True]
        feasible = distinct & (tp / (tp + fp) >= bound)
        if feasible.any():
            best = max(best, float(np.max(tp[feasible]) / positive.sum()))
    return best


@pytest.mark.parametrize("algorithm", ["constrained", "lbfgs"])
def test_two_dimensional_constrained_optimum(algorithm):
    X, y = _two_gaussians(1500, 0)
    optimum = _brute_force(X, y, 0.75)
    assert 0.1 < optimum < 0.95  # the constraint binds
    model = calopt.fit(X, y, measure="recall", constraints=["precision>=0.75"], algorithm=algorithm,
                       select="none", epochs=30, seed=0)
    entry, = model.fit_report.constraints
    assert entry["satisfied"] and entry["train"] >= 0.75
    assert model.fit_report.threshold_rule == "best feasible on the training rows"  # select="none"
    recall = calopt.get_measure("recall").score(y, model.predict(X))
    # within 0.03 of the optimum over linear models (and not above it by more than the grid's resolution)
    assert optimum - 0.03 <= recall <= optimum + 0.01, (recall, optimum)


# -- infeasible constraints, reporting -------------------------------------------------------------
def test_infeasible_constraints_are_reported_with_the_best_value():
    X, y = _two_gaussians(800, 1)
    model = calopt.fit(X, y, measure="recall", constraints=["fpr<=0.0", "tpr>=0.999"], algorithm="constrained",
                       select="none", epochs=3)
    entries = {e["constraint"]: e for e in model.fit_report.constraints}
    assert not (entries["fpr<=0.0"]["satisfied"] and entries["tpr>=0.999"]["satisfied"])
    assert "not met on the training data" in model.message
    unmet = [spec for spec, e in entries.items() if not e["satisfied"]]
    for spec in unmet:
        assert repr(spec) in model.message


def test_report_has_train_validation_and_test_values():
    X, y = _two_gaussians(1200, 2)
    model = calopt.fit(X[:900], y[:900], measure="recall", constraints=["precision>=0.7"],
                       eval_set=(X[900:], y[900:]), seed=0)
    entry, = model.fit_report.constraints
    assert set(entry) >= {"constraint", "train", "validation", "test", "satisfied", "test_satisfied", "test_error",
                          "test_within_error", "validation_error", "validation_within_error"}
    # chosen on the out-of-fold scores, the threshold is carried over to one that is feasible on the
    # training rows too: the constraint holds there
    assert entry["satisfied"] and entry["train"] >= 0.7
    # the history's last row is the model's own training value (feasible: the recall itself)
    assert model.history[-1]["train"] == pytest.approx(calopt.get_measure("recall").score(y[:900], model.predict(X[:900])))
    predictions = model.predict(X[900:])
    counts = confusion_counts(y[900:], predictions, xp=np)
    assert entry["test"] == pytest.approx(float(counts[0] / (counts[0] + counts[1])))
    assert model.measure == "tpr"


@pytest.mark.parametrize("spec, rows, value, within", [
    ("precision>=0.75", 100, 0.74, True),  # misses by 0.01 < 2·√(0.74·0.26/100) = 0.0877
    ("precision>=0.9", 100, 0.74, False),  # by 0.16
    ("precision>=0.75", 10_000, 0.74, False),  # 2 SE = 0.0088 < 0.01
    ("fpr<=0.05", 400, 0.06, True),  # 2·√(0.06·0.94/400) = 0.0237
    ("fpr<=0.05", 400, 0.04, True),  # holds
])
def test_a_miss_within_the_rows_sampling_error_is_told_apart(spec, rows, value, within):
    """judge(): the rate, strict satisfaction, and 2·√(r(1−r)/m) over the m rows the rate is a share
    of (predicted positives for precision, negatives for FPR), computed here from the counts."""
    constraint = parse_constraint(spec)
    hits = round(value * rows)
    if constraint.rate == "precision":  # `rows` predicted positive, `hits` of them right, 50 more negatives
        y = np.r_[np.ones(hits), -np.ones(rows - hits), -np.ones(50)]
        predictions = np.r_[np.ones(rows), -np.ones(50)]
    else:  # `rows` negatives, `hits` of them predicted positive, 30 positives
        y = np.r_[-np.ones(rows), np.ones(30)]
        predictions = np.r_[np.ones(hits), -np.ones(rows - hits), np.ones(30)]
    judged = constraint.judge(y, predictions, xp=np)
    assert judged["value"] == pytest.approx(value)
    assert judged["satisfied"] == constraint.holds(value)
    assert judged["error"] == pytest.approx(2 * math.sqrt(value * (1 - value) / rows))
    assert judged["within_error"] is within


def test_the_table_marks_a_miss_within_error_and_says_what_the_mark_means():
    from rich.console import Console

    from calopt_cli.render import constraints_table

    entries = [{"constraint": "precision>=0.75", "train": 0.76, "satisfied": True, "test": 0.744,
                "test_satisfied": False, "test_error": 0.016, "test_within_error": True},
               {"constraint": "tpr>=0.5", "train": 0.6, "satisfied": True, "test": 0.40,
                "test_satisfied": False, "test_error": 0.02, "test_within_error": False}]
    console = Console(width=100, record=True)
    console.print(constraints_table(entries))
    text = console.export_text()
    assert "0.7440 ≈" in text and "0.4000 ✗" in text and "0.7600 ✓" in text
    assert "misses the bound by less than two standard errors" in " ".join(text.split())
    entries[0]["test_within_error"] = False
    console = Console(width=100, record=True)
    console.print(constraints_table(entries))
    assert "≈" not in console.export_text()


def _best_feasible_cut(scores, y, bound):
    """Brute force: (threshold, recall) of the cut with the best recall among those with precision ≥ bound,
    each candidate threshold tried in a plain loop (the midpoints between distinct sorted scores and the
    two ends; ties go to the higher threshold, the fewer positive predictions)."""
    distinct = sorted(set(scores.tolist()), reverse=True)
    candidates = [distinct[0] + 1.0] + [(a + b) / 2 for a, b in zip(distinct, distinct[1:])] + [distinct[-1] - 1.0]
    best = (None, -1.0)
    for threshold in candidates:
        tp = sum(1 for s, label in zip(scores, y) if s > threshold and label > 0)
        fp = sum(1 for s, label in zip(scores, y) if s > threshold and label < 0)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / sum(1 for label in y if label > 0)
        if precision >= bound and recall > best[1]:
            best = (threshold, recall)
    return best


def _nearest_feasible_share(scores, y, bound, share):
    """Brute force: the threshold of ``scores`` with precision ≥ bound on (scores, y) whose share of
    positive predictions is nearest ``share`` (ties: the fewer positives)."""
    distinct = sorted(set(scores.tolist()), reverse=True)
    candidates = [distinct[0] + 1.0] + [(a + b) / 2 for a, b in zip(distinct, distinct[1:])] + [distinct[-1] - 1.0]
    best, gap = None, math.inf
    for threshold in candidates:
        predicted = scores > threshold
        tp, fp = int(np.sum(predicted & (y > 0))), int(np.sum(predicted & (y < 0)))
        if (tp / (tp + fp) if tp + fp else 0.0) >= bound and abs(np.mean(predicted) - share) < gap:
            best, gap = threshold, abs(np.mean(predicted) - share)
    return best


@pytest.mark.parametrize("algorithm, select", [("lbfgs", "cv:3"), ("constrained", "cv:3"), ("lbfgs", "holdout:0.3")])
def test_threshold_is_chosen_on_out_of_fold_scores(monkeypatch, algorithm, select):
    """The model's threshold: the best feasible one on the chosen candidate's out-of-fold scores (a brute-force
    scan), carried over by its positive share to the nearest threshold feasible on the training rows."""
    from calopt.training import pipeline
    from calopt.training.selection import Selector

    seen = {}
    chosen = Selector.chosen

    def spy(self, state):
        seen["held_out"] = [None if a is None else np.asarray(a) for a in self.held_out_scores(state)]
        return chosen(self, state)

    monkeypatch.setattr(Selector, "chosen", spy)
    X, y = _two_gaussians(500, 11)
    model = calopt.fit(X, y, measure="recall", constraints=["precision>=0.75"], algorithm=algorithm, select=select,
                       seed=0)
    y_held, oof, _ = seen["held_out"]
    threshold, recall = _best_feasible_cut(oof, y_held, 0.75)
    selection = model.fit_report.selection
    assert selection["threshold"] == pytest.approx(threshold) and selection["value"] == pytest.approx(recall)
    share = float(np.mean(oof > threshold))
    assert selection["positive_share"] == pytest.approx(share)
    entry, = model.fit_report.constraints
    held_predicted = oof > threshold
    assert entry["validation"] == pytest.approx(np.sum(held_predicted & (y_held > 0)) / np.sum(held_predicted))
    assert entry["validation_satisfied"] and entry["satisfied"]
    refit = np.asarray(model.decision_function(X)) + model.threshold  # the refit model's own scores
    assert model.threshold == pytest.approx(_nearest_feasible_share(refit, y, 0.75, share))
    assert model.fit_report.threshold_rule == pipeline.SHARE_FEASIBLE
    assert selection["measure"] == "tpr subject to precision>=0.75"


def test_infeasible_on_held_out_rows_is_one_line():
    X, y = _two_gaussians(600, 12)
    model = calopt.fit(X, y, measure="recall", constraints=["precision>=0.95", "tpr>=0.9"], select="cv:3", seed=0)
    assert model.fit_report.selection["value"] < 0
    missed = [e for e in model.fit_report.constraints if not e["validation_satisfied"]]
    assert missed
    rates = {"precision>=0.95": "precision", "tpr>=0.9": "tpr"}
    line = ("no threshold meets every constraint on the held-out rows (cv:3): kept the one closest to feasible "
            "there, which misses " + ", ".join(f"{e['constraint']} ({rates[e['constraint']]} {e['validation']:.4f})"
                                               for e in missed))
    assert line in model.message.split("; ")


def test_cli_names_the_constrained_objective_and_warns_of_held_out_infeasibility(svm_files):
    result = _cli("train", str(svm_files / "train.svm"), "-m", "recall", "-c", "precision>=0.6", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "held-out tpr subject to precision>=0.6 0." in " ".join(result.stdout.split())
    result = _cli("train", str(svm_files / "train.svm"), "-m", "recall", "-c", "precision>=0.95", "-c", "tpr>=0.9",
                  "--no-progress")
    assert result.exit_code == 0, result.output
    assert "held-out tpr subject to precision>=0.95, tpr>=0.9 not reached" in " ".join(result.stdout.split())
    warnings = [line for line in result.stderr.splitlines() if "on the held-out rows" in line]
    assert len(warnings) == 1 and warnings[0].startswith("calopt: warning: no threshold meets every constraint")


def test_constraints_refuse_multiclass_and_plain_solvers():
    X = np.random.default_rng(0).normal(size=(90, 2))
    with pytest.raises(ParameterError, match="with 3 classes name the class"):
        calopt.fit(X, np.arange(90) % 3, constraints=["precision>=0.5"])
    with pytest.raises(ParameterError, match="constrained"):
        calopt.fit(X, np.arange(90) % 2, measure="gmean", algorithm="spade", constraints=["precision>=0.5"])


@pytest.mark.parametrize("device, dtype", [("device1", "float64"), ("no_float64", "float32")])
def test_constrained_solver_on_array_api_strict_devices(device, dtype):
    strict = pytest.importorskip("array_api_strict")
    X, y = _two_gaussians(400, 5)
    on = strict.Device(device)
    options = dict(measure="recall", constraints=["precision>=0.7", "fpr<=0.3"], algorithm="constrained",
                   epochs=3, seed=0)
    model = calopt.fit(strict.asarray(X.astype(dtype), device=on), strict.asarray(y.astype(dtype), device=on),
                       **options)
    expected = calopt.fit(X.astype(dtype), y, **options)
    rtol = 1e-9 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(model.coef, expected.coef, rtol=rtol, atol=rtol)
    assert [e["train"] for e in model.fit_report.constraints] == pytest.approx(
        [e["train"] for e in expected.fit_report.constraints], abs=rtol)


# -- the command line ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def svm_files(tmp_path_factory):
    from sklearn.datasets import dump_svmlight_file

    folder = tmp_path_factory.mktemp("constraints")
    X, y = _two_gaussians(900, 7)
    dump_svmlight_file(X[:600], y[:600], str(folder / "train.svm"))
    dump_svmlight_file(X[600:], y[600:], str(folder / "test.svm"))
    return folder


def _cli(*args):
    from typer.testing import CliRunner

    from calopt_cli.app import app
    return CliRunner().invoke(app, list(args))


def test_cli_reports_each_constraint_in_json(svm_files, tmp_path):
    import json

    result = _cli("train", str(svm_files / "train.svm"), "--test", str(svm_files / "test.svm"), "-m", "recall",
                  "--constraint", "precision>=0.6", "-c", "fpr <= 0.2", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [entry["constraint"] for entry in out["constraints"]] == ["precision>=0.6", "fpr <= 0.2"]
    for entry in out["constraints"]:
        assert {"constraint", "train", "validation", "test", "satisfied"} <= set(entry)
        assert isinstance(entry["satisfied"], bool) and 0 <= entry["test"] <= 1
    assert out["measure"] == "tpr"
    assert out["threshold_rule"] == "out-of-fold share, feasible on the training rows"
    assert out["selection"]["measure"] == "tpr subject to precision>=0.6, fpr <= 0.2"


def test_cli_table_shows_the_constraints(svm_files):
    result = _cli("train", str(svm_files / "train.svm"), "--test", str(svm_files / "test.svm"), "-m", "recall",
                  "-c", "precision>=0.6", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "constraints" in result.stdout and "precision>=0.6" in result.stdout


def test_cli_warns_of_a_constraint_it_cannot_meet(svm_files):
    result = _cli("train", str(svm_files / "train.svm"), "-m", "recall", "-c", "precision>=0.999",
                  "-c", "tpr>=0.99", "-a", "constrained", "--select", "none", "--epochs", "2", "--json")
    assert result.exit_code == 0, result.output
    assert "calopt: warning: constraint" in result.stderr and "Traceback" not in result.output
    assert "none meets every constraint at once" in result.stderr or "no threshold of this model" in result.stderr


@pytest.mark.parametrize("spec", ["precision>0.9", "precison>=0.9", "precision>=2", "recall"])
def test_cli_rejects_bad_specs_with_one_line_and_writes_nothing(svm_files, tmp_path, spec):
    model = tmp_path / "m.npz"
    result = _cli("train", str(svm_files / "train.svm"), "-m", "recall", "-c", spec, "-o", str(model))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calopt: error: constraint") and repr(spec) in lines[0]
    assert "Traceback" not in result.output and not model.exists()
    assert list(tmp_path.iterdir()) == []


# -- scikit-learn and calopt compare ---------------------------------------------------------------
def test_estimator_takes_constraints_and_clones():
    from sklearn.base import clone
    from sklearn.metrics import precision_score

    from calopt.sklearn import CaloptClassifier

    X, y = _two_gaussians(1000, 8)
    estimator = CaloptClassifier("recall", constraints=["precision>=0.7"], random_state=0)
    fitted = clone(estimator).fit(X, y)
    assert fitted.model_.fit_report.constraints[0]["satisfied"]
    assert precision_score(y, fitted.predict(X)) >= 0.7
    with pytest.raises(ValueError, match="partial_fit"):
        CaloptClassifier("recall", constraints=["precision>=0.7"]).partial_fit(X, y, classes=[-1, 1])
    with pytest.warns(UserWarning, match="not met on the training data"):
        CaloptClassifier("recall", constraints=["precision>=0.999", "tpr>=0.99"], select="none",
                         epochs=2).fit(X, y)


def test_compare_reports_each_method_s_test_constraints():
    from calopt.reporting.comparison import compare

    X, y = _two_gaussians(1500, 9)
    result = compare(X[:1000], y[:1000], X[1000:], y[1000:], measure="recall", constraints=["precision>=0.7"],
                     epochs=5)
    methods = [run.method for run in result.runs]
    assert any("constrained" in m for m in methods) and any("lbfgs" in m for m in methods)
    assert not any("SGD" in m for m in methods)  # it cannot honour constraints: left out
    for run in result.runs:
        entry, = run.constraints
        assert entry["constraint"] == "precision>=0.7" and isinstance(entry["satisfied"], bool)


def test_cli_compare_with_a_constraint(svm_files):
    import json

    result = _cli("compare", str(svm_files / "train.svm"), "--test", str(svm_files / "test.svm"), "-m", "recall",
                  "-c", "precision>=0.6", "--epochs", "3", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert all(method["constraints"][0]["constraint"] == "precision>=0.6" for method in out["methods"])
    bad = _cli("compare", str(svm_files / "train.svm"), "-m", "recall", "-c", "precision=>>0.6")
    assert bad.exit_code == 2 and bad.stderr.startswith("calopt: error: constraint")


def test_constraints_are_refused_on_a_dask_cluster_before_anything_starts(tmp_path):
    """A cluster run does not train under constraints: one line, exit 2, no model, no cluster started."""
    model = tmp_path / "m.npz"
    result = _cli("train", "a9a", "-m", "recall", "-c", "precision>=0.9", "--dask", "local", "-o", str(model))
    assert result.exit_code == 2
    assert result.stderr == ("calopt: error: --constraint with --dask: a cluster run does not train under rate "
                             "constraints\n")
    assert not model.exists()
    with pytest.raises(ParameterError, match="Dask run does not train under rate constraints"):
        calopt.fit(np.eye(4), [0, 1, 0, 1], measure="recall", constraints=["precision>=0.9"],
                   cluster="tcp://127.0.0.1:1")

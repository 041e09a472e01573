"""SPADE, STAMP, AMP and the plug-in against plain-loop references written from paper 002.

With batch size 1 the vectorised mini-batch updates must reproduce the papers'
pointwise updates exactly (up to float64 rounding). The references below loop over
points one at a time in pure Python/NumPy with their own formulas for rewards,
conjugate gradients and projections, not calopt's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import calopt
from calopt.algorithms import Problem
from calopt.io.batches import ArrayReader, Batch
from calopt.training.loop import run


def _dataset(n=60, d=4, seed=0, positive_rate=0.3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.where(rng.random(n) < positive_rate, 1.0, -1.0)
    y[:2] = [1.0, -1.0]  # both classes present
    return X, y


def _problem(X, y, measure, loss="hinge", batch_size=1, backend="numpy"):
    b = calopt.get_backend(backend)
    return Problem(b.xp, b.dtype, b.device, X.shape[0], X.shape[1], float(np.mean(y > 0)),
                   calopt.get_measure(measure), calopt.get_loss(loss), batch_size)


def _run(algorithm, X, y, measure, *, epochs=2, seed=3, loss="hinge"):
    """The loop's result: ``state.algorithm`` is the algorithm's state, ``weights`` its model."""
    problem = _problem(X, y, measure, loss)
    return run(algorithm, problem, ArrayReader(X, y, problem.xp), epochs=epochs, seed=seed)


def _order(n, epochs, seed):
    rng = np.random.default_rng(seed)
    return [i for _ in range(epochs) for i in rng.permutation(n)]


def _hinge_reward(margin):
    return min(1.0, margin), (1.0 if margin < 1 else 0.0)  # r and dr/dmargin


# -- SPADE ---------------------------------------------------------------------------
def _project_qmean(a, b):
    a, b = max(a, 0.0), max(b, 0.0)
    norm = math.hypot(a, b)
    limit = math.sqrt(0.5)
    return (a, b) if norm <= limit else (a * limit / norm, b * limit / norm)


def _project_min(a, b):
    # projection onto {a + b = 1, a, b ≥ 0}
    shift = (a + b - 1) / 2
    a, b = a - shift, b - shift
    if a < 0:
        return 0.0, 1.0
    if b < 0:
        return 1.0, 0.0
    return a, b


def _project_gmean(a, b):
    """Nearest point of {αβ ≥ 1/4, α, β ≥ 0}: inside, or on the curve β = 1/(4α) (1-D search)."""
    from scipy.optimize import minimize_scalar

    if a > 0 and b > 0 and a * b >= 0.25:
        return a, b
    found = minimize_scalar(lambda u: (math.exp(u) - a) ** 2 + (0.25 / math.exp(u) - b) ** 2,
                            bounds=(-20, 20), method="bounded", options={"xatol": 1e-12})
    alpha = math.exp(found.x)
    return alpha, 0.25 / alpha


SPADE_REFERENCE = {
    "gmean": (lambda a, b: (0.0, 0.0), _project_gmean, (0.5, 0.5)),
    # measure: (∇Ψ*(α, β), projection, start)
    "qmean": (lambda a, b: (1.0, 1.0), _project_qmean, (0.5, 0.5)),
    "min": (lambda a, b: (0.0, 0.0), _project_min, (0.5, 0.5)),
}


def spade_reference(X, y, order, *, measure, step, dual_step, radius=None, gmean=False):
    """Paper 002, Algorithm 1, one point at a time (dual sign per Appendix B)."""
    p = float(np.mean(y > 0))
    conj_grad, project, (alpha, beta) = SPADE_REFERENCE[measure]
    w, b = np.zeros(X.shape[1]), 0.0
    w_sum, b_sum = np.zeros(X.shape[1]), 0.0
    for t, i in enumerate(order, start=1):
        x, label = X[i], y[i]
        margin = label * (x @ w + b)
        r, dr = _hinge_reward(margin)
        if gmean:
            r += t**-0.25
        eta, eta_dual = step / math.sqrt(t), dual_step / math.sqrt(t)
        weight = alpha / p if label > 0 else beta / (1 - p)  # ∇r⁺ = ∇r/p, ∇r⁻ = ∇r/(1-p)
        w_new = w + eta * weight * dr * label * x
        b_new = b + eta * weight * dr * label
        if radius is not None:
            norm = math.sqrt(w_new @ w_new + b_new**2)
            if norm > radius:
                w_new, b_new = w_new * radius / norm, b_new * radius / norm
        g_alpha, g_beta = conj_grad(alpha, beta)
        a, bb = alpha + eta_dual * g_alpha, beta + eta_dual * g_beta
        if label > 0:
            a -= eta_dual * r / p
        else:
            bb -= eta_dual * r / (1 - p)
        alpha, beta = project(a, bb)
        w, b = w_new, b_new
        w_sum, b_sum = w_sum + w, b_sum + b
    return w_sum / len(order), b_sum / len(order), w, b, alpha, beta


@pytest.mark.parametrize("measure", ["qmean", "min"])
@pytest.mark.parametrize("radius", [None, 0.5])
def test_spade_batch_one_is_the_pointwise_algorithm(measure, radius):
    X, y = _dataset()
    algorithm = calopt.get_algorithm("spade", step=2.0, dual_step=0.7, radius=radius)
    result = _run(algorithm, X, y, measure, epochs=2, seed=3)
    state = result.state.algorithm
    w_avg, b_avg, w, b, alpha, beta = spade_reference(
        X, y, _order(len(y), 2, 3), measure=measure, step=2.0, dual_step=0.7, radius=radius)
    np.testing.assert_allclose(state.w, w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.b, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose([float(state.alpha), float(state.beta)], [alpha, beta], atol=1e-12)
    np.testing.assert_allclose(result.weights[0], w_avg, rtol=1e-12, atol=1e-12)  # the loop's average part
    np.testing.assert_allclose(result.weights[1], b_avg, rtol=1e-12, atol=1e-12)


def test_spade_gmean_uses_the_reward_offset():
    """G-mean adds ε(t) = t^(-1/4) to the rewards (Theorem 5): batch 1 equals the reference."""
    X, y = _dataset(seed=5)
    algorithm = calopt.get_algorithm("spade", step=1.0, dual_step=0.3)
    state = _run(algorithm, X, y, "gmean", epochs=1, seed=2).state.algorithm
    _, _, w, b, alpha, beta = spade_reference(
        X, y, _order(len(y), 1, 2), measure="gmean", step=1.0, dual_step=0.3, gmean=True)
    np.testing.assert_allclose([float(state.alpha), float(state.beta)], [alpha, beta], rtol=1e-6)
    np.testing.assert_allclose(state.w, w, rtol=1e-6, atol=1e-9)
    # without the offset the dual path differs: the test can tell the two apart
    _, _, _, _, alpha_plain, _ = spade_reference(
        X, y, _order(len(y), 1, 2), measure="gmean", step=1.0, dual_step=0.3, gmean=False)
    assert abs(alpha_plain - alpha) > 1e-4


def test_spade_minibatch_is_the_mean_of_pointwise_terms():
    """A batch of B points moves w by the mean of the B pointwise gradients (same w_t)."""
    X, y = _dataset(n=8)
    algorithm = calopt.get_algorithm("spade", step=1.0, dual_step=0.5)
    problem = _problem(X, y, "qmean", batch_size=8)
    state = algorithm.init(problem)
    state = algorithm.update(state, Batch(X[:3], y[:3]), problem, 1)  # move away from w = 0
    after = algorithm.update(state, Batch(X, y), problem, 2)  # the loop's second update: η₀/√2
    p = float(np.mean(y > 0))
    w, b = np.asarray(state.w), float(state.b)
    grads = []
    for x, label in zip(X, y):
        _, dr = _hinge_reward(label * (x @ w + b))
        weight = float(state.alpha) / p if label > 0 else float(state.beta) / (1 - p)
        grads.append(weight * dr * label * np.append(x, 1.0))
    expected = np.append(w, b) + (1.0 / math.sqrt(2)) * np.mean(grads, axis=0)
    np.testing.assert_allclose(np.append(after.w, after.b), expected, rtol=1e-12)


# -- STAMP / AMP ---------------------------------------------------------------------
def f1_valuation(p):
    """(α, β, γ, δ) for F1 from its popular form TP·2/(2TP + FN + FP), written out by hand."""
    theta = (1 - p) / p
    b0 = 1 + theta
    return 2 / b0, 0.0, 1 / b0, -theta / b0


def f1_from_rates(tpr, tnr, p):
    theta = (1 - p) / p
    denominator = 1 + theta + tpr - theta * tnr
    return 2 * tpr / denominator if denominator else 0.0


def stamp_reference(X, y, order, *, step, stage_length, growth, level_fraction, level_kind, restart=True,
                    average=False, radius=None):
    """Paper 002, Algorithm 3 (F1), one point at a time, generalised to any skew θ.

    ``restart=False``: t runs on across model stages (level stages do not count); ``average``:
    w_e is the mean of the stage's iterates; ``radius``: each iterate projected onto the ball
    first. Returns the last iterate, the level and the model (the current stage's mean with
    ``average``, else the last iterate).
    """
    p = float(np.mean(y > 0))
    alpha, beta, gamma, delta = f1_valuation(p)
    w, b, v = np.zeros(X.shape[1]), 0.0, 0.0
    stage, phase, seen, t = 0, 0, 0, 0
    sums = [0.0, 0.0, 0.0, 0.0]
    w_stage, b_stage = w, b
    iterates = []  # the current model stage's
    for i in order:
        x, label = X[i], y[i]
        model_length = int(stage_length * growth**stage)
        if phase == 0:
            t += 1
            _, dr = _hinge_reward(label * (x @ w + b))
            weight = (alpha - v * gamma) / p if label > 0 else (beta - v * delta) / (1 - p)
            eta = step / math.sqrt(t)
            w, b = w + eta * weight * dr * label * x, b + eta * weight * dr * label
            norm = math.sqrt(float(w @ w) + b * b)
            if radius is not None and norm > radius:
                w, b = w * radius / norm, b * radius / norm
            iterates.append(np.append(w, b))
            seen += 1
            if seen >= model_length:
                mean = np.mean(iterates, axis=0)
                w_stage, b_stage = (mean[:-1], mean[-1]) if average else (w.copy(), b)
                phase, seen, sums = 1, 0, [0.0] * 4
        else:
            score = x @ w_stage + b_stage
            if level_kind == "reward":
                r = min(1.0, label * score)
            else:
                r = float(score > 0) if label > 0 else float(score <= 0)
            if label > 0:
                sums[0] += r
                sums[1] += 1
            else:
                sums[2] += r
                sums[3] += 1
            seen += 1
            if seen >= max(1, math.ceil(level_fraction * model_length)):
                if sums[1] > 0 and sums[3] > 0:
                    v = f1_from_rates(sums[0] / sums[1], sums[2] / sums[3], p)
                stage, phase, seen, iterates = stage + 1, 0, 0, []
                t = 0 if restart else t
    model = np.mean(iterates, axis=0) if average and iterates else np.append(w, b)
    return w, b, v, model


@pytest.mark.parametrize("level_kind", ["zero-one", "reward"])
def test_stamp_batch_one_is_the_pointwise_algorithm(level_kind):
    X, y = _dataset(n=80, seed=1, positive_rate=0.4)
    algorithm = calopt.get_algorithm(
        "stamp", step=1.5, stage_length=5, growth=2.0, level_fraction=0.5, level=level_kind,
        average=False, restart=True)
    state = _run(algorithm, X, y, "f1", epochs=3, seed=7).state.algorithm
    w, b, v, _ = stamp_reference(X, y, _order(len(y), 3, 7), step=1.5, stage_length=5, growth=2.0,
                                 level_fraction=0.5, level_kind=level_kind)
    assert state.stage >= 3  # several level updates happened
    np.testing.assert_allclose(state.w, w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(float(state.b), b, rtol=1e-12, atol=1e-12)
    assert float(state.level) == pytest.approx(v, abs=1e-12)


@pytest.mark.parametrize("restart", [False, True])
@pytest.mark.parametrize("radius", [None, 0.3])
def test_stamp_steps_projection_and_stage_means_are_the_pointwise_algorithms(restart, radius):
    """Batch 1 with the defaults' running step decay (the level stages do not advance t) or the
    paper's restarts, the ball and the stage averages (the model and w_e): the plain loop's."""
    X, y = _dataset(n=80, seed=4, positive_rate=0.4)
    algorithm = calopt.get_algorithm("stamp", step=1.5, stage_length=5, growth=2.0, level_fraction=0.5,
                                     restart=restart, radius=radius)
    result = _run(algorithm, X, y, "f1", epochs=3, seed=5)
    w, b, v, model = stamp_reference(X, y, _order(len(y), 3, 5), step=1.5, stage_length=5, growth=2.0,
                                     level_fraction=0.5, level_kind="zero-one", restart=restart,
                                     average=True, radius=radius)
    state = result.state.algorithm
    assert state.stage >= 3 and 0 < float(state.level) < 1
    np.testing.assert_allclose(np.append(state.w, state.b), np.append(w, b), rtol=1e-12, atol=1e-12)
    assert float(state.level) == pytest.approx(v, abs=1e-12)
    np.testing.assert_allclose(np.append(*result.weights), model, rtol=1e-12, atol=1e-12)
    if radius is not None:
        assert math.hypot(np.linalg.norm(w), b) <= radius * (1 + 1e-12)
    # the other setting gives another model: the test tells them apart
    _, _, _, other = stamp_reference(X, y, _order(len(y), 3, 5), step=1.5, stage_length=5, growth=2.0,
                                     level_fraction=0.5, level_kind="zero-one", restart=not restart,
                                     average=True, radius=radius)
    assert np.max(np.abs(other - model)) > 1e-6


def test_stamp_f1_weights_reduce_to_the_paper_for_balanced_classes():
    """θ = 1: the valuation weights on P and N are (1 − v/2) and v/2 (paper 002, Alg. 3)."""
    (a0, a1, a2), (b0, b1, b2) = calopt.get_measure("f1").coefficients(0.5)
    for v in (0.0, 0.3, 0.9):
        assert (a1 - v * b1) / b0 == pytest.approx(1 - v / 2)
        assert (a2 - v * b2) / b0 == pytest.approx(v / 2)


def test_amp_levels_are_the_measure_of_each_iterate_and_stop_when_flat():
    X, y = _dataset(n=200, seed=2, positive_rate=0.3)
    X[:, 0] += 1.5 * y  # a separable direction, so the level rises then settles
    algorithm = calopt.get_algorithm("amp", step=1.0, tol=1e-9)
    problem = _problem(X, y, "f1", batch_size=16)
    result = run(algorithm, problem, ArrayReader(X, y, problem.xp), epochs=30, seed=0,
                 record=lambda info: {})
    levels = [row["level"] for row in result.history]
    w, b = result.weights
    predictions = np.where(X @ np.asarray(w) + float(b) > 0, 1, -1)
    from sklearn.metrics import f1_score

    # the stored level is the F1 (0-1) of the current iterate before its last inner pass
    assert levels[0] > 0.5
    assert result.status == 0 or len(levels) == 30
    assert f1_score(y, predictions) >= levels[0] - 0.05


# -- families and rewards ------------------------------------------------------------
def test_wrong_family_and_non_reward_loss_are_clear_errors():
    X, y = _dataset()
    with pytest.raises(calopt.ParameterError, match="concave"):
        calopt.fit(X, y, measure="f1", algorithm="spade")
    with pytest.raises(calopt.ParameterError, match="reward"):
        calopt.fit(X, y, measure="qmean", algorithm="spade", loss="squared")


# -- the plug-in baseline ------------------------------------------------------------
def test_plugin_minimises_the_regularised_logistic_objective():
    """Averaged SGD on logistic + λ‖w‖² lands near scipy's optimum of the same objective."""
    from scipy.optimize import minimize

    X, y = _dataset(n=400, d=3, seed=4, positive_rate=0.4)
    X[:, 0] += y
    l2 = 1e-2
    algorithm = calopt.get_algorithm("plugin", step=1.0, l2=l2)
    problem = _problem(X, y, "f1", loss="logistic", batch_size=8)
    result = run(algorithm, problem, ArrayReader(X, y, problem.xp), epochs=60, seed=0)
    w, b = result.weights

    def objective(theta):
        margins = y * (X @ theta[:-1] + theta[-1])
        return np.mean(np.logaddexp(0, -margins)) + l2 * theta[:-1] @ theta[:-1]

    optimum = minimize(objective, np.zeros(4), method="BFGS", options={"gtol": 1e-10})
    ours = objective(np.append(w, b))
    assert ours - optimum.fun < 2e-3
    np.testing.assert_allclose(np.append(w, b), optimum.x, atol=0.1)


# -- sample weights ----------------------------------------------------------------------
@pytest.mark.parametrize("spec, measure, loss", [
    ("spade:step=3", "gmean", "hinge"), ("spade:step=3,radius=0.5", "qmean", "hinge"),
    ("amp:step=2", "f1", "hinge"), ("sgd:step=1", "f1", "logistic"), ("gd", "f1", "logistic"),
    ("subgradient:iterations=4", "f1", "hinge"), ("mirror-descent:radius=5", "f1", "logistic"),
])
def test_integer_sample_weights_equal_repeated_rows(spec, measure, loss):
    """With one batch a pass, rows of weight k train exactly as k copies of the row (weights are
    rescaled to mean 1, so the batch means agree), rows of weight 0 as no row at all."""
    X, y = _dataset(n=50, seed=6, positive_rate=0.4)
    counts = np.random.default_rng(1).integers(0, 4, size=50)
    counts[:2] = 1  # both classes kept
    weight = counts * (50 / counts.sum())
    algorithm = calopt.get_algorithm(spec)
    weighted_problem = _problem(X, y, measure, loss, batch_size=1000)._replace(
        positive_rate=float(np.sum(weight[y > 0]) / np.sum(weight)), epochs=4, max_weight=float(weight.max()))
    weighted = run(algorithm, weighted_problem, ArrayReader(X, y, weighted_problem.xp, weight=weight), epochs=4)
    X_rep, y_rep = np.repeat(X, counts, axis=0), np.repeat(y, counts)
    repeated_problem = _problem(X_rep, y_rep, measure, loss, batch_size=1000)._replace(
        epochs=4, max_weight=float(weight.max()))
    repeated = run(algorithm, repeated_problem, ArrayReader(X_rep, y_rep, repeated_problem.xp), epochs=4)
    for got, want in zip(weighted.weights, repeated.weights):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)
    assert np.any(np.asarray(weighted.weights[0]) != 0)


def test_fit_with_integer_weights_equals_fit_on_repeated_rows_for_gd():
    """calopt.fit (scaling, gd's exact gradient and constant M, the threshold tuned with the
    weights) on weighted rows equals the fit on the rows repeated; uniform weights change nothing.
    Without cross-fitting: folds put a row's copies apart (uniform weights are checked with it)."""
    X, y = _dataset(n=120, d=3, seed=8, positive_rate=0.35)
    X[:, 0] += y
    counts = np.random.default_rng(2).integers(1, 5, size=120)
    weighted = calopt.fit(X, y, algorithm="gd", measure="f1", epochs=30, select="none", sample_weight=counts)
    repeated = calopt.fit(np.repeat(X, counts, axis=0), np.repeat(y, counts), algorithm="gd", measure="f1",
                          epochs=30, select="none")
    np.testing.assert_allclose(weighted.coef, repeated.coef, rtol=1e-9)
    assert weighted.intercept == pytest.approx(repeated.intercept, rel=1e-9)
    plain = calopt.fit(X, y, algorithm="gd", measure="f1", epochs=5)
    uniform = calopt.fit(X, y, algorithm="gd", measure="f1", epochs=5, sample_weight=np.full(120, 7.0))
    np.testing.assert_allclose(uniform.coef, plain.coef, rtol=1e-12)
    with pytest.raises(calopt.ParameterError, match="sample_weight has shape"):
        calopt.fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(calopt.ParameterError, match="finite numbers ≥ 0"):
        calopt.fit(X, y, sample_weight=-np.ones(120))

"""First-order ERM (gd, sgd, subgradient; paper 003) against independent references.

The objective (1/m)·Σ F(y·(wᵀx + b)) + λ‖w‖² and its (sub)gradient are written out
here in NumPy from the spec's loss table; optima come from scipy.optimize (L-BFGS-B
for the smooth losses, SLSQP on the epigraph QP / linprog on the LP for hinge), the
smoothness constant from numpy's eigvalsh of the explicit Gram matrix, and SGD from
a plain loop over points.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse
from scipy.optimize import linprog, minimize
from typer.testing import CliRunner

import calopt
from calopt import datasets
from calopt.algorithms import Problem
from calopt.io.batches import ArrayReader
from calopt.training.loop import Trainer, run

CURVATURE = {"logistic": 0.25, "squared": 2.0, "calibrated-hinge": 0.25}


# -- independent references ------------------------------------------------------------
def loss_terms(z, loss):
    """F(z) and F'(z) (a subgradient for hinge), from the spec's table."""
    if loss == "logistic":
        return np.logaddexp(0, -z), -1 / (1 + np.exp(z))
    if loss == "squared":
        return (1 - z) ** 2, -2 * (1 - z)
    if loss == "hinge":
        return np.maximum(0, 1 - z), np.where(z < 1, -1.0, 0.0)
    raise ValueError(loss)


def objective(theta, X, y, loss, l2):
    """f(w, b) and its (sub)gradient in θ = (w, b); the intercept is not regularised."""
    w, b = theta[:-1], theta[-1]
    value, slope = loss_terms(y * (X @ w + b), loss)
    coef = slope * y / len(y)
    return value.mean() + l2 * w @ w, np.append(X.T @ coef + 2 * l2 * w, coef.sum())


def smooth_optimum(X, y, loss, l2):
    found = minimize(objective, np.zeros(X.shape[1] + 1), args=(X, y, loss, l2), jac=True,
                     method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 20000})
    assert np.abs(found.jac).max() < 1e-7
    return found.fun, found.x


def hinge_optimum(X, y, l2):
    """min (1/m)·Σ ξ + λ‖w‖² s.t. ξ ≥ 1 − y(Xw + b), ξ ≥ 0: linprog for λ = 0, else SLSQP."""
    m, d = X.shape
    margin_rows = -np.hstack([y[:, None] * X, y[:, None], np.eye(m)])  # −y·x̃ᵀθ − ξ ≤ −1
    bounds = [(None, None)] * (d + 1) + [(0, None)] * m
    if l2 == 0:
        found = linprog(np.r_[np.zeros(d + 1), np.full(m, 1 / m)], A_ub=margin_rows,
                        b_ub=-np.ones(m), bounds=bounds, method="highs")
        return found.fun, found.x[: d + 1]
    start = np.r_[np.zeros(d + 1), np.ones(m)]
    found = minimize(
        lambda v: (v[d + 1:].sum() / m + l2 * v[:d] @ v[:d],
                   np.r_[2 * l2 * v[:d], 0.0, np.full(m, 1 / m)]),
        start, jac=True, method="SLSQP", bounds=bounds,
        constraints=[{"type": "ineq", "fun": lambda v: -1 - margin_rows @ v, "jac": lambda v: -margin_rows}],
        options={"ftol": 1e-13, "maxiter": 500})
    assert found.success, found.message
    return objective(found.x[: d + 1], X, y, "hinge", l2)[0], found.x[: d + 1]


# -- data and plumbing -----------------------------------------------------------------
def synthetic(n=200, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.7 * rng.normal(size=n) > 0.3, 1.0, -1.0)
    return X, y


def ijcnn1_slice():
    """200 rows of the embedded ijcnn1 (60 positives, 140 negatives), dense, 22 features."""
    train = datasets.load("ijcnn1")
    rows = np.r_[np.flatnonzero(train.labels > 0)[:60], np.flatnonzero(train.labels < 0)[:140]]
    return train.X[rows].toarray(), train.labels[rows]


DATA = {"synthetic": synthetic, "ijcnn1": ijcnn1_slice}


def make_problem(X, y, loss, batch_size, backend="numpy", epochs=None):
    b = calopt.get_backend(backend)
    return Problem(b.xp, b.dtype, b.device, X.shape[0], X.shape[1], float(np.mean(y > 0)),
                   calopt.get_measure("f1"), calopt.get_loss(loss), batch_size, epochs)


def train(algorithm, X, y, loss, *, epochs, batch_size, seed=0, callback=None):
    """``epochs`` passes on NumPy; the history holds describe_state's numbers."""
    problem = make_problem(X, y, loss, batch_size, epochs=epochs)
    return run(algorithm, problem, ArrayReader(X, y, problem.xp), epochs=epochs, seed=seed,
               record=lambda info: {}, callback=callback)


def theta_of(algorithm, state):
    w, b = Trainer(algorithm).weights(state)
    return np.append(calopt.to_numpy(w), float(calopt.to_numpy(b)))


# -- gradient descent ------------------------------------------------------------------
@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_gd_reaches_the_scipy_optimum(data, loss):
    X, y = DATA[data]()
    l2 = 1e-2
    optimum, theta_star = smooth_optimum(X, y, loss, l2)
    algorithm = calopt.get_algorithm("gd", l2=l2, tol=1e-10)
    result = train(algorithm, X, y, loss, epochs=20000, batch_size=len(y))
    assert result.status == 0, result.message  # stopped by its gradient tolerance
    theta = theta_of(algorithm, result.state)
    assert objective(theta, X, y, loss, l2)[0] == pytest.approx(optimum, abs=1e-11)
    np.testing.assert_allclose(theta, theta_star, atol=1e-6)


def test_gd_objective_never_increases_and_follows_the_rate():
    """Step 1/M: f(w_{k+1}) ≤ f(w_k), and f(w_k) − f* ≤ M‖w_0 − w*‖²/(2k) (paper 003)."""
    X, y = ijcnn1_slice()
    l2 = 1e-3
    optimum, theta_star = smooth_optimum(X, y, "logistic", l2)
    algorithm = calopt.get_algorithm("gd", l2=l2)
    result = train(algorithm, X, y, "logistic", epochs=300, batch_size=32)
    values = np.array([row["objective"] for row in result.history])
    assert values[0] == pytest.approx(math.log(2))  # f at w_0 = 0
    assert np.all(np.diff(values) <= 1e-15)
    assert values[-1] < values[0] - 0.1  # it moved
    M = result.state.algorithm.smoothness
    k = np.arange(1, len(values))  # values[k] is f(w_k) after k steps
    assert np.all(values[1:] - optimum <= M * (theta_star @ theta_star) / (2 * k) + 1e-12)


@pytest.mark.parametrize("loss", ["logistic", "squared", "calibrated-hinge"])
@pytest.mark.parametrize("sparse", [False, True])
def test_smoothness_constant_matches_the_explicit_gram(loss, sparse):
    X, y = synthetic(n=150, d=4, seed=3)
    l2 = 0.05
    algorithm = calopt.get_algorithm("gd", l2=l2)
    data = scipy.sparse.csr_matrix(X) if sparse else X
    problem = make_problem(X, y, loss, batch_size=13)  # batches of unequal size
    result = run(algorithm, problem, ArrayReader(data, y, problem.xp), epochs=1, seed=1)
    X_tilde = np.hstack([X, np.ones((len(y), 1))])
    expected = CURVATURE[loss] * np.linalg.eigvalsh(X_tilde.T @ X_tilde / len(y)).max() + 2 * l2
    assert result.state.algorithm.smoothness == pytest.approx(expected, rel=1e-12)
    assert result.state.algorithm.gram is None  # dropped once M is known


def test_descent_lemma_holds_with_the_computed_constant():
    """f(θ') ≤ f(θ) + ∇f(θ)·(θ' − θ) + M/2‖θ' − θ‖² on random pairs; tight for squared loss."""
    X, y = ijcnn1_slice()
    rng = np.random.default_rng(7)
    l2 = 0.01
    for loss in ("logistic", "squared"):
        algorithm = calopt.get_algorithm("gd", l2=l2)
        M = train(algorithm, X, y, loss, epochs=1, batch_size=50).state.algorithm.smoothness
        for _ in range(200):
            theta = rng.normal(scale=rng.choice([0.1, 1.0, 5.0]), size=X.shape[1] + 1)
            other = theta + rng.normal(scale=rng.choice([0.01, 0.3, 3.0]), size=theta.size)
            f, grad = objective(theta, X, y, loss, l2)
            f_other, _ = objective(other, X, y, loss, l2)
            gap = other - theta
            assert f_other <= f + grad @ gap + M / 2 * gap @ gap + 1e-12 * (1 + abs(f))
        if loss == "squared":  # the Hessian is 2C + 2λ·diag(1, …, 1, 0): M is within 2λ of ‖H‖
            X_tilde = np.hstack([X, np.ones((len(y), 1))])
            hessian = 2 * X_tilde.T @ X_tilde / len(y) + 2 * l2 * np.diag(np.r_[np.ones(X.shape[1]), 0])
            top = np.linalg.eigvalsh(hessian).max()
            assert top <= M <= top + 2 * l2 + 1e-12


def test_gd_does_not_depend_on_the_batching():
    """The epoch's gradient is exact: batches of 7 and one full batch give the same iterates."""
    X, y = synthetic(n=120, seed=4)
    algorithm = calopt.get_algorithm("gd", l2=1e-3)
    small = train(algorithm, X, y, "logistic", epochs=15, batch_size=7, seed=5)
    full = train(algorithm, X, y, "logistic", epochs=15, batch_size=len(y), seed=0)
    np.testing.assert_allclose(theta_of(algorithm, small.state), theta_of(algorithm, full.state),
                               rtol=1e-12, atol=1e-14)
    # and one epoch is exactly one step 1/M from w_0 = 0
    one = train(algorithm, X, y, "logistic", epochs=1, batch_size=7)
    _, grad = objective(np.zeros(X.shape[1] + 1), X, y, "logistic", 1e-3)
    np.testing.assert_allclose(theta_of(algorithm, one.state), -grad / one.state.algorithm.smoothness,
                               rtol=1e-12)


def test_gd_refuses_losses_without_a_curvature_bound():
    X, y = synthetic(n=50)
    for loss in ("hinge", "exponential"):
        with pytest.raises(calopt.ParameterError, match="gd.*bounded curvature.*subgradient"):
            calopt.fit(X, y, algorithm="gd", loss=loss)


def test_loss_curvature_bounds_are_the_supremum_of_f_second_derivative():
    """max_curvature = sup F'' (by second differences of F on a grid), and None for the rest."""
    z = np.linspace(-30, 30, 600_001)
    h = z[1] - z[0]
    for name, bound in CURVATURE.items():
        if name == "calibrated-hinge":
            values = np.maximum(0, -z) - np.log(2 + np.abs(z))
        else:
            values = loss_terms(z, name)[0]
        second = (values[2:] - 2 * values[1:-1] + values[:-2]) / h**2
        assert calopt.get_loss(name).max_curvature == bound
        assert second.max() == pytest.approx(bound, rel=1e-4)
    assert calopt.get_loss("hinge").max_curvature is None
    assert calopt.get_loss("exponential").max_curvature is None


# -- SGD -------------------------------------------------------------------------------
def sgd_reference(X, y, order, *, loss, step, l2):
    """Pointwise SGD with η_t = η₀/√t and the running mean of the iterates, one point at a time."""
    w, b = np.zeros(X.shape[1]), 0.0
    w_sum, b_sum = np.zeros(X.shape[1]), 0.0
    for t, i in enumerate(order, start=1):
        _, slope = loss_terms(np.array(y[i] * (X[i] @ w + b)), loss)
        eta = step / math.sqrt(t)
        w, b = w - eta * (slope * y[i] * X[i] + 2 * l2 * w), b - eta * slope * y[i]
        w_sum, b_sum = w_sum + w, b_sum + b
    return w, b, w_sum / len(order), b_sum / len(order)


@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
def test_sgd_batch_one_is_the_pointwise_update(loss):
    X, y = synthetic(n=60, d=4, seed=2)
    algorithm = calopt.get_algorithm("sgd", step=0.3, l2=0.01)
    state = train(algorithm, X, y, loss, epochs=3, batch_size=1, seed=9).state
    rng = np.random.default_rng(9)
    order = [i for _ in range(3) for i in rng.permutation(len(y))]
    w, b, w_avg, b_avg = sgd_reference(X, y, order, loss=loss, step=0.3, l2=0.01)
    np.testing.assert_allclose(calopt.to_numpy(state.algorithm.w), w, rtol=1e-12, atol=1e-13)
    assert float(state.algorithm.b) == pytest.approx(b, rel=1e-12, abs=1e-13)
    np.testing.assert_allclose(theta_of(algorithm, state), np.append(w_avg, b_avg), rtol=1e-12,
                               atol=1e-13)
    last = calopt.get_algorithm("sgd", step=0.3, l2=0.01, average=False)
    np.testing.assert_allclose(theta_of(last, state._replace(parts=())), np.append(w, b), rtol=1e-12, atol=1e-13)


def test_averaged_sgd_gets_close_to_the_optimum():
    X, y = synthetic(n=400, d=5, seed=6)
    l2 = 1e-2
    optimum, theta_star = smooth_optimum(X, y, "logistic", l2)
    algorithm = calopt.get_algorithm("sgd", step=1.0, l2=l2)
    state = train(algorithm, X, y, "logistic", epochs=60, batch_size=8).state
    theta = theta_of(algorithm, state)
    assert objective(theta, X, y, "logistic", l2)[0] - optimum < 1e-3
    np.testing.assert_allclose(theta, theta_star, atol=0.05)


def test_plugin_is_sgd_with_a_holdout():
    X, y = synthetic(n=100, seed=8)
    plugin = calopt.get_algorithm("plugin", step=0.5, l2=1e-3)
    sgd = calopt.get_algorithm("sgd", step=0.5, l2=1e-3)
    a = train(plugin, X, y, "logistic", epochs=2, batch_size=10).state
    b = train(sgd, X, y, "logistic", epochs=2, batch_size=10).state
    np.testing.assert_array_equal(theta_of(plugin, a), theta_of(sgd, b))
    assert plugin.holdout == 0.2 and sgd.holdout == 0.0


# -- subgradient method ----------------------------------------------------------------
def noisy(n=200, d=5, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.where(X[:, 0] + X[:, 1] + 0.6 * rng.normal(size=n) > 0.2, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("l2", [0.0, 0.01])
def test_subgradient_best_iterate_meets_the_paper_bound(l2):
    """f(w_best) − f* ≤ (‖w_0 − w*‖² + η²Σ‖g_k‖²)/(2ηK) with η = 1/√K, K = 100, 400, 1600."""
    X, y = noisy()
    optimum, theta_star = hinge_optimum(X, y, l2)
    gaps = []
    for K in (100, 400, 1600):
        iterates = [np.zeros(X.shape[1] + 1)]  # w_0; the callback sees w_1, w_2, …
        algorithm = calopt.get_algorithm("subgradient", l2=l2)
        result = train(algorithm, X, y, "hinge", epochs=K, batch_size=64,
                       callback=lambda info: iterates.append(np.append(info.state.algorithm.w, info.state.algorithm.b)))
        assert result.epochs == K and result.state.algorithm.k == K
        scored = iterates[:K]  # w_0 … w_{K−1}: each scored in the pass of its subgradient
        values = [objective(theta, X, y, "hinge", l2)[0] for theta in scored]
        theta = theta_of(algorithm, result.state)
        np.testing.assert_allclose(theta, scored[int(np.argmin(values))], rtol=1e-12, atol=1e-14)
        best = objective(theta, X, y, "hinge", l2)[0]
        assert best == pytest.approx(min(values), rel=1e-12)
        assert float(result.state.algorithm.best_objective) == pytest.approx(best, rel=1e-12)
        eta = 1 / math.sqrt(K)
        squared_norms = sum(objective(t, X, y, "hinge", l2)[1] @ objective(t, X, y, "hinge", l2)[1]
                            for t in scored)
        bound = (theta_star @ theta_star + eta**2 * squared_norms) / (2 * eta * K)
        gaps.append(best - optimum)
        assert -1e-7 <= best - optimum <= bound
    assert gaps[2] < gaps[1] < gaps[0]
    assert gaps[2] < 0.02


def test_subgradient_iterations_set_the_step_and_stop_the_run():
    X, y = noisy(n=80)
    given = calopt.get_algorithm("subgradient", step=2.0, iterations=25)
    result = train(given, X, y, "hinge", epochs=100, batch_size=16)
    assert result.epochs == 25 and result.status == 0
    from_epochs = calopt.get_algorithm("subgradient", step=2.0)
    same = train(from_epochs, X, y, "hinge", epochs=25, batch_size=80)
    np.testing.assert_allclose(calopt.to_numpy(result.state.algorithm.w), calopt.to_numpy(same.state.algorithm.w),
                               rtol=1e-12)
    # the first step is −(η/√K)·g_0 at w_0 = 0
    one = calopt.get_algorithm("subgradient", step=2.0, iterations=25)
    state = train(one, X, y, "hinge", epochs=1, batch_size=16).state.algorithm
    _, g0 = objective(np.zeros(X.shape[1] + 1), X, y, "hinge", 1e-6)
    np.testing.assert_allclose(np.append(state.w, state.b), -2.0 / 5.0 * g0, rtol=1e-12)
    problem = make_problem(X, y, "hinge", 16, epochs=None)
    with pytest.raises(calopt.ParameterError, match="iterations"):
        from_epochs.init(problem)
    with pytest.raises(calopt.ParameterError, match="iterations"):
        calopt.get_algorithm("subgradient", iterations=0)


# -- backends, fit, CLI ----------------------------------------------------------------
@pytest.mark.parametrize("name, loss", [("gd", "logistic"), ("sgd", "squared"),
                                        ("subgradient", "hinge")])
def test_erm_solvers_agree_across_backends(backend, name, loss):
    X, y = synthetic(n=60, d=3, seed=12)
    algorithm = calopt.get_algorithm(name, **({"step": 0.5} if name == "sgd" else {}))
    reference = train(algorithm, X, y, loss, epochs=4, batch_size=16, seed=1)
    problem = make_problem(X, y, loss, 16, backend.name.split(":")[0], epochs=4)
    result = run(algorithm, problem, ArrayReader(backend.asarray(X), backend.asarray(y), problem.xp),
                 epochs=4, seed=1)
    np.testing.assert_allclose(theta_of(algorithm, result.state),
                               theta_of(algorithm, reference.state), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name, loss", [("gd", "logistic"), ("sgd", "logistic"),
                                        ("subgradient", "hinge")])
def test_fit_end_to_end(name, loss):
    X, y = synthetic(n=300, seed=13)
    model = calopt.fit(X, y, measure="f1", algorithm=name, epochs=30, seed=0)
    assert model.loss == loss  # each solver's default loss
    assert model.algorithm.startswith(name)
    assert len(model.history) == 30
    assert model.score(X, y) > 0.75
    if name != "sgd":
        assert all("objective" in row for row in model.history)
    sparse = calopt.fit(scipy.sparse.csr_matrix(X), y, measure="f1", algorithm=name, epochs=30, seed=0)
    np.testing.assert_allclose(sparse.coef, model.coef, rtol=1e-9, atol=1e-12)


def test_cli_trains_a9a_with_gd():
    from calopt_cli.app import app

    result = CliRunner().invoke(app, ["train", "a9a", "--algorithm", "gd", "--epochs", "3",
                                      "--json", "--no-progress"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["algorithm"] == "gd" and out["loss"] == "logistic" and out["epochs"] == 3
    objectives = [row["objective"] for row in out["history"]]
    assert objectives[0] == pytest.approx(math.log(2)) and objectives[2] < objectives[0]
    assert 0.3 < out["test"]["value"] <= 1
    refused = CliRunner().invoke(app, ["train", "a9a", "--algorithm", "gd", "--loss", "hinge",
                                       "--epochs", "1", "--json"])
    assert refused.exit_code == 2 and "bounded curvature" in refused.output


@pytest.mark.parametrize(
    "spec, key, expected",
    [
        ("subgradient:iterations=5", "iterations", 5),
        ("slnd:rank=12,sample=none", "rank", 12),
        ("slnd:rank=12,sample=none", "sample", None),
        ("sgd:step=0.5", "step", 0.5),
        ("sgd:step=none", "step", None),
        ("mirror-descent:beta0=2", "beta0", 2.0),
    ],
)
def test_optional_parameters_parse_from_specs(spec, key, expected):
    value = getattr(calopt.get_algorithm(spec), key)
    assert value == expected and type(value) is type(expected)


def test_a_whole_number_parameter_refuses_a_fraction():
    with pytest.raises(calopt.ParameterError, match="iterations='2.5' is not a valid int"):
        calopt.get_algorithm("subgradient:iterations=2.5")


@pytest.mark.parametrize("sparse", [False, True])
def test_wide_data_use_the_trace_bound_and_still_descend(monkeypatch, sparse):
    """Above GRAM_MAX_FEATURES, M = sup F''·mean ‖x̃‖² + 2λ ≥ the exact constant; f never increases."""
    from calopt_algorithms import erm

    X, y = synthetic(n=150, d=6, seed=8)
    if sparse:  # sparse enough to be served as CSR batches (calopt.io.csr.CsrRows)
        X = np.where(np.random.default_rng(0).random(X.shape) < 0.2, X, 0.0)
    l2 = 1e-3
    data = scipy.sparse.csr_matrix(X) if sparse else X
    problem = make_problem(X, y, "logistic", batch_size=17)
    exact = run(calopt.get_algorithm("gd", l2=l2), problem, ArrayReader(data, y, problem.xp),
                epochs=1, seed=1).state.algorithm.smoothness
    monkeypatch.setattr(erm, "GRAM_MAX_FEATURES", 4)
    result = run(calopt.get_algorithm("gd", l2=l2), problem, ArrayReader(data, y, problem.xp),
                 epochs=40, seed=1)
    expected = 0.25 * np.mean(np.sum(X * X, axis=1) + 1) + 2 * l2
    assert result.state.algorithm.smoothness == pytest.approx(expected, rel=1e-12)
    assert result.state.algorithm.smoothness >= exact
    values = np.array([row["objective"] for row in result.history])
    assert np.all(np.diff(values) <= 1e-15) and values[-1] < values[0] - 0.01

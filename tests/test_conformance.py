"""The conformance suite: every registered algorithm, measure and loss on every backend.

The parameter lists are read from the registry when the tests are collected, so a new
plugin (an installed package or a built-in added later) is tested here on numpy,
read-only numpy, array-api-strict, torch (CPU, when installed) and CuPy (with a GPU)
without new test code, in the manner of scikit-learn's ``check_*`` estimator checks.

The reference on every backend is NumPy in float64: the same seed must give the same
shuffling and so the same model, state and history within floating-point rounding,
and nothing may write to the caller's arrays. The per-component tests
(test_algorithms.py, test_measures.py, test_losses.py) check the built-ins against
independent formulas; this suite checks what every plugin must satisfy.
"""

from __future__ import annotations

import functools
import json
import math

import array_api_compat
import numpy as np
import pytest

import calopt
from calopt.algorithms import Problem
from calopt.errors import ParameterError
from calopt.io.batches import ArrayReader
from calopt.training.loop import run

NP = calopt.get_backend("numpy").xp
#: Every algorithm that trains two classes (the multiclass-only ones, whose models are (d, C),
#: have the same backend checks in test_multiclass.py).
ALGORITHMS = [entry.name for entry in calopt.list_algorithms() if entry.component.binary]
MEASURES = [entry.name for entry in calopt.list_measures()]
LOSSES = [entry.name for entry in calopt.list_losses()]

N_SAMPLES, N_FEATURES, BATCH, EPOCHS, SEED = 160, 5, 16, 2, 3


def test_the_registry_lists_the_builtins():
    """The lists this suite is parametrised over come from the registry (and are not empty)."""
    assert {"spade", "stamp", "amp", "plugin"} <= set(ALGORITHMS)
    assert {"fbeta", "qmean", "gmean"} <= set(MEASURES)
    assert {"hinge", "logistic"} <= set(LOSSES)


# --- shared helpers -------------------------------------------------------------------


def _dataset(n=N_SAMPLES, d=N_FEATURES, seed=0):
    """Tiny imbalanced data (about 30% positives), both classes present."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.7 * rng.normal(size=n) > 0.6, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    return X, y


def _problem(backend, measure, loss, *, n=N_SAMPLES, d=N_FEATURES, p=0.3, batch=BATCH):
    return Problem(backend.xp, backend.dtype, backend.device, n, d, p,
                   calopt.get_measure(measure), calopt.get_loss(loss), batch, epochs=EPOCHS)


@functools.lru_cache(maxsize=None)
def pairing(name: str) -> tuple[str, str]:
    """A measure and a loss that algorithm ``name`` accepts (its own ``check_problem`` decides).

    Measures of the algorithm's family come first (in name order); the loss is the
    algorithm's default, else hinge for reward-driven algorithms and logistic otherwise,
    then any other loss.
    """
    algorithm = calopt.get_algorithm(name)
    preferred = ["hinge", "logistic"] if algorithm.needs_reward else ["logistic", "hinge"]
    default = calopt.registry.default_loss(algorithm)
    preferred = [default, *preferred]
    losses = [loss for loss in preferred if loss in LOSSES] + [other for other in LOSSES if other not in preferred]
    measures = sorted(MEASURES, key=lambda m: calopt.get_measure(m).family != algorithm.family)
    numpy_backend = calopt.get_backend("numpy")
    for measure in measures:
        for loss in losses:
            try:
                algorithm.check_problem(_problem(numpy_backend, measure, loss))
            except ParameterError:
                continue
            return measure, loss
    raise AssertionError(f"algorithm {name!r} accepts no registered measure and loss")


def _leaves(value, path="state"):
    """(path, leaf) pairs of a state: NamedTuple/tuple/list/dict fields, arrays and numbers."""
    if array_api_compat.is_array_api_obj(value):
        yield path, value
    elif hasattr(value, "_fields"):
        for field in value._fields:
            yield from _leaves(getattr(value, field), f"{path}.{field}")
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}[{key!r}]")
    else:
        yield path, value


def _assert_same_state(got, expected, *, to_numpy, rtol, atol):
    """Every leaf of ``got`` (a state on some backend) equals the NumPy state ``expected``."""
    got_leaves, expected_leaves = dict(_leaves(got)), dict(_leaves(expected))
    assert got_leaves.keys() == expected_leaves.keys()
    for path, want in expected_leaves.items():
        have = got_leaves[path]
        if array_api_compat.is_array_api_obj(want):
            want = np.asarray(want, dtype=np.float64) if np.asarray(want).dtype.kind == "f" else np.asarray(want)
            have = to_numpy(have)
            scale = max(1.0, float(np.max(np.abs(want)))) if want.size and want.dtype.kind == "f" else 1.0
            np.testing.assert_allclose(have, want, rtol=rtol, atol=atol * scale, err_msg=path)
        elif isinstance(want, float):
            assert have == pytest.approx(want, rel=rtol, abs=atol), path
        else:
            assert have == want, path


def _assert_on_backend(state, backend, dtype):
    """Every array of the state lives in the backend's namespace; floats keep the dtype."""
    namespace = array_api_compat.array_namespace(backend.xp.asarray(0.0))
    for path, leaf in _leaves(state):
        if array_api_compat.is_array_api_obj(leaf):
            assert array_api_compat.array_namespace(leaf) is namespace, path
            if backend.xp.isdtype(leaf.dtype, "real floating"):
                assert leaf.dtype == dtype, path


# --- algorithms -----------------------------------------------------------------------


def _solve(name, backend, X, y):
    """EPOCHS passes of the solver loop, seed SEED, on inputs X, y of the calopt ``backend``."""
    measure, loss = pairing(name)
    algorithm = calopt.get_algorithm(name)
    y_host = backend.to_numpy(y)
    problem = _problem(backend, measure, loss, n=int(X.shape[0]), d=int(X.shape[1]),
                       p=float(np.mean(y_host > 0)))
    prepare = getattr(algorithm, "prepare", None)  # the algorithm's own reader, if it has one
    reader = (prepare(problem, X, y, seed=SEED) if prepare is not None
              else ArrayReader(X, y, backend.xp, backend.device))
    result = run(algorithm, problem, reader, epochs=EPOCHS, seed=SEED, record=lambda info: {})
    return algorithm, result


@functools.lru_cache(maxsize=None)
def _numpy_run(name, dtype):
    X, y = _dataset()
    backend = calopt.get_backend("numpy", dtype=dtype)
    return _solve(name, backend, backend.asarray(X), backend.asarray(y))[1]


@pytest.mark.parametrize("name", ALGORITHMS)
def test_algorithm_matches_numpy_on_every_backend(name, backend):
    """Same seed, same shuffling: the whole final state and history equal NumPy's (float64)."""
    X, y = _dataset()
    X_host, y_host = X.copy(), y.copy()
    X_in, y_in = backend.asarray(X), backend.asarray(y)
    algorithm, result = _solve(name, backend.backend, X_in, y_in)
    expected = _numpy_run(name, "float64")
    assert result.status >= 0, result.message
    assert (result.epochs, result.status) == (expected.epochs, expected.status)
    _assert_on_backend(result.state, backend, backend.dtype)
    _assert_same_state(result.state, expected.state, to_numpy=backend.to_numpy, rtol=1e-9, atol=1e-12)
    w, b = result.weights
    assert tuple(w.shape) == (N_FEATURES,) and tuple(b.shape) == ()
    for row, want in zip(result.history, expected.history):
        assert row.keys() == want.keys()
        for key in want.keys() - {"seconds"}:
            assert row[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), key
    # nothing wrote to the caller's arrays (read-only inputs would have raised)
    np.testing.assert_array_equal(backend.to_numpy(X_in), X_host)
    np.testing.assert_array_equal(backend.to_numpy(y_in), y_host)
    if backend.readonly:
        assert not X_in.flags.writeable and not y_in.flags.writeable


@pytest.mark.parametrize("name", ALGORITHMS)
def test_algorithm_same_when_batches_are_gathered_one_by_one(name, backend, monkeypatch):
    """Large data are gathered batch by batch instead of permuted whole: the same rows in
    the same order, so the same model (forced here for the tiny data)."""
    import calopt.io.batches

    monkeypatch.setattr(calopt.io.batches, "BATCH_GATHER_BYTES", 0)
    X, y = _dataset()
    _, result = _solve(name, backend.backend, backend.asarray(X), backend.asarray(y))
    _assert_same_state(result.state, _numpy_run(name, "float64").state, to_numpy=backend.to_numpy,
                       rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("density, route", [(0.005, "CsrRows"), (0.06, "CsrRows"), (0.6, "CsrRows"),
                                            (0.005, "no CsrRows"), (0.06, "no CsrRows")])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_algorithm_on_sparse_input_matches_dense(name, density, route, monkeypatch):
    """A CSR matrix (served as CsrRows batches, or made dense, by its density; where
    CsrRows cannot take the arrays, as scipy CSR batches or dense batches) trains the same
    model as its dense copy; duplicate entries count as their sum, and the caller's matrix
    is left as it was."""
    import scipy.sparse

    import calopt.io.batches

    if route == "no CsrRows":
        monkeypatch.setattr(calopt.io.batches, "fast_products", lambda data, indices, indptr: False)

    X, y = _dataset(d=100)
    rng = np.random.default_rng(4)
    X = np.where(rng.random(X.shape) < density, X, 0.0)
    X[np.arange(len(y)), rng.integers(0, 100, len(y))] += 0.5  # no empty rows
    backend = calopt.get_backend("numpy")
    _, expected = _solve(name, backend, X, backend.asarray(y))
    rows, cols = np.nonzero(X)
    values = X[rows, cols]
    split = values * rng.uniform(0.2, 0.8, size=values.size)  # each entry as two duplicates
    order = np.argsort(np.concatenate([rows, rows]), kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(y)) * 2)])
    X_csr = scipy.sparse.csr_matrix((np.concatenate([split, values - split])[order],
                                     np.concatenate([cols, cols])[order], indptr), shape=X.shape)
    assert not X_csr.has_canonical_format  # stored density 0.03, 0.14, 1.2: all three readers
    before = (X_csr.data.copy(), X_csr.indices.copy(), X_csr.indptr.copy())
    _, result = _solve(name, backend, X_csr, backend.asarray(y))
    _assert_same_state(result.state, expected.state, to_numpy=calopt.to_numpy, rtol=1e-9, atol=1e-12)
    for array, copy in zip((X_csr.data, X_csr.indices, X_csr.indptr), before):
        np.testing.assert_array_equal(array, copy)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_algorithm_keeps_float32(name, backend):
    """float32 data train in float32 (no silent upcast) and agree with NumPy float32."""
    backend32 = type(backend)(backend.name, "float32")
    X, y = _dataset()
    algorithm, result = _solve(name, backend32.backend, backend32.asarray(X), backend32.asarray(y))
    _assert_on_backend(result.state, backend32, backend32.dtype)
    expected = _numpy_run(name, "float32")
    w, b = result.weights
    w_ref, b_ref = expected.weights
    scale = max(1.0, float(np.max(np.abs(w_ref))))
    np.testing.assert_allclose(backend32.to_numpy(w), w_ref, rtol=1e-4, atol=1e-4 * scale)
    assert float(backend32.to_numpy(b)) == pytest.approx(float(b_ref), rel=1e-4, abs=1e-4 * scale)


@functools.lru_cache(maxsize=None)
def _numpy_fit(name):
    X, y = _dataset()
    measure, loss = pairing(name)
    return calopt.fit(X, y, measure=measure, algorithm=name, loss=loss, epochs=EPOCHS,
                      batch_size=BATCH, seed=SEED)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_fit_matches_numpy_on_every_backend(name, backend):
    """calopt.fit on the backend's own arrays (step trial, scaling, threshold) equals NumPy's."""
    X, y = _dataset()
    X_host, y_host = X.copy(), y.copy()
    X_in, y_in = backend.asarray(X), backend.asarray(y)
    measure, loss = pairing(name)
    model = calopt.fit(X_in, y_in, measure=measure, algorithm=name, loss=loss, epochs=EPOCHS,
                       batch_size=BATCH, seed=SEED)
    expected = _numpy_fit(name)
    assert model.fit_report.backend == backend.backend.name
    assert model.algorithm == expected.algorithm  # the same step was chosen
    scale = max(1.0, float(np.max(np.abs(expected.coef))))
    np.testing.assert_allclose(model.coef, expected.coef, rtol=1e-9, atol=1e-12 * scale)
    assert model.intercept == pytest.approx(expected.intercept, rel=1e-9, abs=1e-12 * scale)
    assert model.threshold == pytest.approx(expected.threshold, rel=1e-9, abs=1e-12 * scale)
    assert [row["train"] for row in model.history] == pytest.approx(
        [row["train"] for row in expected.history], abs=1e-12)
    np.testing.assert_array_equal(model.predict(X), expected.predict(X))
    np.testing.assert_array_equal(backend.to_numpy(X_in), X_host)
    np.testing.assert_array_equal(backend.to_numpy(y_in), y_host)


# --- measures -------------------------------------------------------------------------

COUNTS = {  # (TP, FP, TN, FN), zero divisions and one-class samples included
    (6,): ([3, 0, 0, 5, 0, 4], [1, 0, 4, 0, 0, 2], [6, 7, 0, 0, 0, 9], [2, 0, 3, 0, 0, 1]),
    (): (3, 1, 6, 2),
}
RATES = {(5,): ([0.8, 0.0, 1.0, 0.3, 0.0], [0.6, 1.0, 0.0, 0.3, 0.0]), (): (0.75, 0.4)}
DUALS = {(5,): ([0.3, -1.0, 2.5, 0.0, 40.0], [0.9, -2.0, 0.1, 0.0, -3.0]), (): (-0.4, 1.7)}


def _host(values):
    return [NP.asarray(v, dtype=NP.float64) for v in values]


def _check_like(backend, out, dtype, expected, what):
    xp = backend.xp
    assert array_api_compat.array_namespace(out) is array_api_compat.array_namespace(xp.asarray(0.0)), what
    assert out.dtype == dtype, what
    expected = np.asarray(expected)
    assert tuple(out.shape) == expected.shape, what
    tol = 1e-12 if dtype == xp.float64 else 2e-5
    np.testing.assert_allclose(backend.to_numpy(out), expected, rtol=tol, atol=tol, err_msg=what)


@pytest.mark.parametrize("shape", [(), (5,)], ids=["0d", "1d"])
@pytest.mark.parametrize("name", MEASURES)
def test_measure_matches_numpy_on_every_backend(name, shape, backend, float_dtype):
    """from_counts, from_rates and (concave) Ψ, Ψ*, ∇Ψ*, the projection agree with NumPy float64."""
    measure = calopt.get_measure(name)
    xp, dtype = backend.xp, getattr(backend.xp, float_dtype)
    counts = COUNTS[(6,) if shape else ()]

    def inputs(values):
        arrays = [backend.asarray(v, dtype=dtype) for v in values]
        return arrays, [backend.to_numpy(a).copy() for a in arrays]

    def untouched(arrays, copies):
        for array, copy in zip(arrays, copies):
            np.testing.assert_array_equal(backend.to_numpy(array), copy)

    arrays, copies = inputs(counts)
    _check_like(backend, measure.from_counts(*arrays, xp=xp), dtype,
                measure.from_counts(*_host(counts), xp=NP), "from_counts")
    untouched(arrays, copies)
    arrays, copies = inputs(RATES[shape])
    _check_like(backend, measure.from_rates(*arrays, 0.3, xp=xp), dtype,
                measure.from_rates(*_host(RATES[shape]), 0.3, xp=NP), "from_rates")
    if measure.family == "concave":
        _check_like(backend, measure.psi(*arrays, xp=xp), dtype,
                    measure.psi(*_host(RATES[shape]), xp=NP), "psi")
        start = [np.full(shape, v) for v in measure.dual_start]
        region, _ = inputs(start)
        _check_like(backend, measure.conjugate(*region, xp=xp), dtype,
                    measure.conjugate(*_host(start), xp=NP), "conjugate")
        for i, (got, want) in enumerate(zip(measure.conjugate_grad(*region, xp=xp),
                                            measure.conjugate_grad(*_host(start), xp=NP))):
            _check_like(backend, got, dtype, want, f"conjugate_grad[{i}]")
        duals, dual_copies = inputs(DUALS[shape])
        for i, (got, want) in enumerate(zip(measure.project(*duals, xp=xp),
                                            measure.project(*_host(DUALS[shape]), xp=NP))):
            _check_like(backend, got, dtype, want, f"project[{i}]")
        untouched(duals, dual_copies)
    untouched(arrays, copies)


@pytest.mark.parametrize("name", MEASURES)
def test_measure_score_matches_numpy_on_every_backend(name, backend):
    rng = np.random.default_rng(1)
    y_true = np.where(rng.random(50) < 0.3, 1.0, -1.0)
    y_pred = np.where(rng.random(50) < 0.4, 1.0, -1.0)
    measure = calopt.get_measure(name)
    got = measure.score(backend.asarray(y_true), backend.asarray(y_pred), xp=backend.xp)
    assert isinstance(got, float)
    assert got == pytest.approx(measure.score(y_true, y_pred, xp=NP), abs=1e-12)


@pytest.mark.parametrize("name", MEASURES)
def test_measure_from_rates_equals_from_counts(name):
    """With both classes present, the counts' value is the rates' value at their positive rate."""
    measure = calopt.get_measure(name)
    rng = np.random.default_rng(2)
    tp, fn, tn, fp = (rng.integers(1, 40, size=30).astype(np.float64) for _ in range(4))
    fn[:3], fp[3:6], tp[6:9] = 0.0, 0.0, 0.0  # perfect recall, perfect specificity, no hits
    for i in range(tp.size):  # the positive rate is a Python float, per confusion matrix
        p = (tp[i] + fn[i]) / (tp[i] + fn[i] + tn[i] + fp[i])
        counts = _host([tp[i], fp[i], tn[i], fn[i]])
        rates = _host([tp[i] / (tp[i] + fn[i]), tn[i] / (tn[i] + fp[i])])
        assert float(measure.from_counts(*counts, xp=NP)) == pytest.approx(
            float(measure.from_rates(*rates, p, xp=NP)), abs=1e-12)


@pytest.mark.parametrize("name", [m for m in MEASURES if calopt.get_measure(m).family == "concave"])
def test_concave_measure_dual_is_consistent(name):
    """Projection lands in the region (idempotent, dual_start kept) and weak duality holds:
    Ψ(P, N) ≤ αP + βN − Ψ*(α, β) for every (α, β) of the region (paper 002, Table 1)."""
    measure = calopt.get_measure(name)
    rng = np.random.default_rng(3)
    alpha, beta = _host(rng.uniform(-2.0, 3.0, size=(2, 200)))
    alpha, beta = measure.project(alpha, beta, xp=NP)
    again = measure.project(alpha, beta, xp=NP)
    np.testing.assert_allclose(np.asarray(again[0]), np.asarray(alpha), atol=1e-9)
    np.testing.assert_allclose(np.asarray(again[1]), np.asarray(beta), atol=1e-9)
    start = measure.project(*_host(measure.dual_start), xp=NP)
    np.testing.assert_allclose([float(v) for v in start], measure.dual_start, atol=1e-9)
    conjugate = np.asarray(measure.conjugate(alpha, beta, xp=NP))
    assert np.all(np.isfinite(conjugate))
    grid = np.linspace(0.0, 1.0, 11)
    for tpr in grid:
        for tnr in grid:
            psi = float(measure.psi(*_host([tpr, tnr]), xp=NP))
            bound = np.asarray(alpha) * tpr + np.asarray(beta) * tnr - conjugate
            assert psi <= float(np.min(bound)) + 1e-9, (tpr, tnr)


# --- losses ---------------------------------------------------------------------------

LOSS_METHODS = ["value", "derivative", "second_derivative", "reward_value", "reward_derivative"]


@pytest.mark.parametrize("shape", [(), (9,)], ids=["0d", "1d"])
@pytest.mark.parametrize("name", LOSSES)
def test_loss_matches_numpy_on_every_backend(name, shape, backend, float_dtype):
    """Every method keeps namespace, dtype, shape and device and agrees with NumPy."""
    rng = np.random.default_rng(0)
    z_host = rng.uniform(-5.0, 5.0, size=shape).astype(float_dtype)
    if shape:
        z_host[:5] = [0.0, 1.0, -1.0, -1e4, 1e4]  # kinks and extreme margins
    xp = backend.xp
    z = backend.asarray(z_host, dtype=getattr(xp, float_dtype))
    loss = calopt.get_loss(name)
    for method in LOSS_METHODS:
        out = getattr(loss, method)(z, xp=xp)
        assert array_api_compat.array_namespace(out) is array_api_compat.array_namespace(z), method
        assert out.dtype == z.dtype, method
        assert tuple(out.shape) == shape, method
        assert array_api_compat.device(out) == array_api_compat.device(z), method
        expected = getattr(loss, method)(NP.asarray(z_host), xp=NP)
        assert np.all(np.isfinite(backend.to_numpy(out))), method
        rtol = 1e-5 if float_dtype == "float32" else 1e-12
        np.testing.assert_allclose(backend.to_numpy(out), expected, rtol=rtol, atol=0, err_msg=method)
    np.testing.assert_array_equal(backend.to_numpy(z), z_host)


@pytest.mark.parametrize("name", LOSSES)
def test_loss_derivatives_bracket_one_sided_differences(name):
    """F' lies between the left and right difference quotients of F (a valid (sub)gradient),
    F'' likewise for F'; rewards are 1 − F and −F'; a reward loss is ≥ 0 and non-increasing."""
    loss = calopt.get_loss(name)
    z = NP.asarray(np.linspace(-6.0, 6.0, 241) + 1e-3)
    h, tol = 1e-6, 1e-5

    def check(function, derivative, what):
        left = (function(z, xp=NP) - function(z - h, xp=NP)) / h
        right = (function(z + h, xp=NP) - function(z, xp=NP)) / h
        value = derivative(z, xp=NP)
        scale = np.maximum(1.0, np.abs(value))
        assert np.all(value >= np.minimum(left, right) - tol * scale), what
        assert np.all(value <= np.maximum(left, right) + tol * scale), what

    check(loss.value, loss.derivative, "derivative")
    if loss.smooth:
        check(loss.derivative, loss.second_derivative, "second derivative")
    np.testing.assert_allclose(loss.reward_value(z, xp=NP), 1 - loss.value(z, xp=NP), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(loss.reward_derivative(z, xp=NP), -loss.derivative(z, xp=NP), rtol=1e-12, atol=1e-12)
    if loss.reward:
        values = np.asarray(loss.value(z, xp=NP))
        assert np.all(values >= 0) and np.all(np.diff(values) <= 1e-12)


# --- the command line, end to end on the embedded a9a ----------------------------------


def test_cli_train_a9a_array_api_strict_matches_numpy():
    """``calopt train a9a --backend array-api-strict`` gives numpy's test measure and history."""
    from typer.testing import CliRunner

    from calopt_cli.app import app

    runner = CliRunner()
    outputs = {}
    for backend in ("numpy", "array-api-strict"):
        result = runner.invoke(app, ["train", "a9a", "--backend", backend, "--epochs", "3", "--json"])
        assert result.exit_code == 0, result.output
        outputs[backend] = json.loads(result.stdout)
    numpy_out, strict_out = outputs["numpy"], outputs["array-api-strict"]
    assert strict_out["backend"] == "array-api-strict" and numpy_out["backend"] == "numpy"
    assert strict_out["algorithm"] == numpy_out["algorithm"]
    for split in ("train", "test"):
        for key in ("value", "tpr", "tnr"):
            assert strict_out[split][key] == pytest.approx(numpy_out[split][key], abs=1e-9), (split, key)
    for key in ("train", "test"):
        assert [row[key] for row in strict_out["history"]] == pytest.approx(
            [row[key] for row in numpy_out["history"]], abs=1e-9), key
    assert math.isfinite(numpy_out["test"]["value"]) and numpy_out["test"]["value"] > 0.5


# --- training actually trains, on every dtype and device --------------------------------


def _learnable(n=600, seed=5):
    """A clearly learnable imbalanced problem (about 25% positives) for the training checks."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES))
    y = np.where(1.5 * X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=n) > 1.0, 1.0, -1.0)
    return X, y


def _constant_values(measure, y):
    """The measure of the two constant predictors (every row positive, every row negative)."""
    values = []
    for sign in (1.0, -1.0):
        values.append(measure.score(y, np.full_like(y, sign), xp=NP))
    return values


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_algorithm_trains_in_each_dtype(name, dtype):
    """calopt.fit ends without divergence and beats both constant predictors by a margin,
    in float32 as in float64, and the two dtypes reach nearly the same model."""
    X, y = _learnable()
    measure, loss = pairing(name)
    model = calopt.fit(X.astype(dtype), y, measure=measure, algorithm=name, loss=loss, epochs=5, seed=SEED)
    assert model.status >= 0, model.message
    assert model.fit_report.dtype == dtype and model.fit_report.epochs >= 1
    value = model.score(X, y)
    floor = max(_constant_values(calopt.get_measure(measure), y))
    assert value > floor + 0.1, (value, floor)
    if dtype == "float32":
        reference = calopt.fit(X, y, measure=measure, algorithm=name, loss=loss, epochs=5, seed=SEED)
        assert value == pytest.approx(reference.score(X, y), abs=0.02)


@pytest.mark.parametrize("device, dtype", [("device1", "float64"), ("no_float64", "float32")])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_algorithm_keeps_to_the_data_device(name, device, dtype):
    """Data on array-api-strict's second device (or on one without float64) train there:
    every constant is made on the data's device and in its dtype (what CuPy on a second GPU,
    or a float32-only accelerator, needs), and the model equals NumPy's."""
    strict = pytest.importorskip("array_api_strict")
    X, y = _learnable(n=300)
    on = strict.Device(device)
    X_dev = strict.asarray(X.astype(dtype), device=on)
    y_dev = strict.asarray(y.astype(dtype), device=on)
    measure, loss = pairing(name)
    model = calopt.fit(X_dev, y_dev, measure=measure, algorithm=name, loss=loss, epochs=2, seed=SEED)
    assert model.status >= 0, model.message
    expected = calopt.fit(X.astype(dtype), y, measure=measure, algorithm=name, loss=loss, epochs=2, seed=SEED)
    assert model.algorithm == expected.algorithm
    rtol = 1e-9 if dtype == "float64" else 1e-4
    scale = max(1.0, float(np.max(np.abs(expected.coef))))
    np.testing.assert_allclose(model.coef, expected.coef, rtol=rtol, atol=rtol * scale)
    scores = model.decision_function(X_dev)
    assert scores.device == on

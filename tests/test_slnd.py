"""SLND (paper 000) against independent references: Lemma 1, Newton steps, pointwise loops.

The references use NumPy's SVD / ``solve`` and plain Python loops over one point at a
time with their own calibrated-hinge derivative and their own balanced sequences,
drawn with the same generator calls the reader documents (BalancedReader).
"""

from __future__ import annotations

import numpy as np
import pytest

import calopt
from calopt.algorithms import Problem
from calopt.errors import ParameterError
from calopt.io.batches import ArrayReader, Batch
from calopt.training.loop import run
from calopt_algorithms.slnd import Slnd, SlndBatch, default_rank, preconditioner

NP = calopt.get_backend("numpy").xp


def chinge_derivative(z: float) -> float:
    """F'(z) of the calibrated hinge max(0, -z) - log(2 + |z|) (paper 000, eq. 3)."""
    return -1.0 / (2.0 + z) if z >= 0 else -1.0 + 1.0 / (2.0 - z)


def _problem(n, d, *, loss="calibrated-hinge", batch_size=1, n_classes=1, backend="numpy"):
    b = calopt.get_backend(backend)
    return Problem(b.xp, b.dtype, b.device, n, d, 0.5, calopt.get_measure("f1"), calopt.get_loss(loss),
                   batch_size, None, n_classes)


def _blobs(n, d, classes, *, seed=0, spread=1.0, weights=None):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, d)) * 2.0
    y = rng.choice(classes, size=n, p=weights)
    return centers[y] + spread * rng.normal(size=(n, d)), y


def _spd(n, rank, seed=0):
    """A PSD matrix of the given rank with distinct eigenvalues (a covariance estimate)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(rank + 3, n)) * np.linspace(3.0, 0.5, n)
    H = A.T @ A / (rank + 3)
    if rank < n:  # project out n - rank directions
        Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
        keep = Q[:, :rank]
        H = keep @ keep.T @ H @ keep @ keep.T
    return (H + H.T) / 2


# -- Lemma 1 -----------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "rank_H", "k"), [(8, 8, 3), (9, 6, 4), (6, 6, 6)])
def test_lemma1_h_star_is_the_pseudo_inverse_of_the_truncated_svd(n, rank_H, k):
    """H* = P_k D_k⁻¹ P_kᵀ equals pinv of H's best rank-k approximation, built with numpy.linalg.svd."""
    H = _spd(n, rank_H)
    U, s, Vt = np.linalg.svd(H)
    reference = Vt[:k].T @ np.diag(1.0 / s[:k]) @ U[:, :k].T  # pinv(U_k S_k V_kᵀ)
    H_star = preconditioner(NP.asarray(H), k, xp=NP)
    np.testing.assert_allclose(H_star, reference, rtol=1e-9, atol=1e-9 * np.abs(reference).max())
    np.testing.assert_allclose(H_star, np.linalg.pinv(U[:, :k] * s[:k] @ Vt[:k]), atol=1e-8)


@pytest.mark.parametrize(("n", "rank_H", "k"), [(8, 8, 3), (9, 6, 4)])
def test_lemma1_h_star_minimises_the_frobenius_objective(n, rank_H, k):
    """‖I − H H'‖²_F over rank-k H' (eq. 12): H* attains n − k; random and perturbed rank-k H' do not beat it."""
    H = _spd(n, rank_H, seed=1)
    H_star = preconditioner(NP.asarray(H), k, xp=NP)
    assert np.linalg.matrix_rank(H_star) == k

    def objective(H_prime):
        return np.linalg.norm(np.eye(n) - H @ H_prime, "fro") ** 2

    best = objective(H_star)
    assert best == pytest.approx(n - k, abs=1e-8)
    rng = np.random.default_rng(2)
    for _ in range(200):  # random rank-k matrices, at random scales
        R = rng.normal(size=(n, k)) @ rng.normal(size=(k, n)) * 10.0 ** rng.uniform(-3, 1)
        assert objective(R) >= best - 1e-9
    values, vectors = np.linalg.eigh(H)
    P_k, D_k = vectors[:, -k:], values[-k:]
    for _ in range(200):  # rank-k perturbations of H* itself
        eps = 10.0 ** rng.uniform(-6, -1)
        P = P_k + eps * rng.normal(size=P_k.shape)
        D = (1.0 / D_k) * (1 + eps * rng.normal(size=k))
        assert objective(P @ np.diag(D) @ P.T) >= best - 1e-9


def test_lemma1_leading_eigenvalues_are_what_singles_h_star_out():
    """The minimum n − k of eq. 12 is also reached by other eigen-directions; H* is the one
    for which H H* H is the best rank-k approximation of H (‖H − H H' H‖_F, Eckart–Young),
    and it is not the truncated SVD of pinv(H) itself (that keeps the smallest eigenvalues)."""
    n, k = 7, 3
    H = _spd(n, n, seed=3)
    H_star = preconditioner(NP.asarray(H), k, xp=NP)
    values, vectors = np.linalg.eigh(H)
    smallest = vectors[:, :k] @ np.diag(1.0 / values[:k]) @ vectors[:, :k].T
    fro = np.linalg.norm
    assert fro(np.eye(n) - H @ smallest) ** 2 == pytest.approx(n - k)  # eq. 12 does not decide
    U, s, Vt = np.linalg.svd(H)
    best_rank_k = U[:, :k] * s[:k] @ Vt[:k]
    np.testing.assert_allclose(H @ H_star @ H, best_rank_k, atol=1e-10)
    rng = np.random.default_rng(4)
    best = fro(H - H @ H_star @ H)
    for _ in range(200):
        R = rng.normal(size=(n, k)) @ rng.normal(size=(k, n)) * 10.0 ** rng.uniform(-3, 1)
        assert fro(H - H @ R @ H) >= best - 1e-9
    pinv_truncated = np.linalg.pinv(H)
    U2, s2, Vt2 = np.linalg.svd(pinv_truncated)
    assert not np.allclose(U2[:, :k] * s2[:k] @ Vt2[:k], H_star)


def test_default_rank_is_the_numerical_rank_capped_by_the_class_sizes():
    spectrum = np.array([0.0, 1e-20, 1e-3, 0.1, 1.0, 10.0])
    assert default_rank(spectrum, 1000, np.finfo(float).eps) == 4  # 0 and 1e-20 are null
    assert default_rank(spectrum, 25, np.finfo(float).eps) == 2  # 25 rows: two directions
    assert default_rank(spectrum, 3, np.finfo(float).eps) == 1


# -- Newton steps --------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["calibrated-hinge", "logistic"])
def test_full_rank_exact_hessian_takes_newton_preconditioned_steps(loss):
    """k = d+1, m' = m and one batch per epoch: each epoch is w ← w − η·solve(H, g) (eq. 5 with H at 0)."""
    X, labels = _blobs(60, 3, 2, seed=5)
    labels[:30], labels[30:] = 0, 1  # equal classes: every row is in the balanced sequence
    y = np.where(labels == 1, 1.0, -1.0)
    n, d = X.shape
    algorithm = Slnd(rank=d + 1, sample=n, step=3.0)
    problem = _problem(n, d, loss=loss, batch_size=n)
    result = run(algorithm, problem, algorithm.prepare(problem, X, y, seed=0), epochs=3, seed=7)
    F = calopt.get_loss(loss)
    X_tilde = np.hstack([X, np.ones((n, 1))])
    curvature = float(F.second_derivative(np.zeros(()), xp=NP))
    H = curvature * X_tilde.T @ X_tilde / n
    w, eta = np.zeros(d + 1), 3.0 / n  # η = step/(m·L), L = 1 for H*H
    for _ in range(3):
        margins = y * (X_tilde @ w)
        g = X_tilde.T @ (y * np.asarray(F.derivative(margins, xp=NP)))  # Σ_i y F'(y wᵀx̃) x̃
        w = w - eta * np.linalg.solve(H, g)
    np.testing.assert_allclose(np.asarray(result.state.algorithm.W)[0], w, rtol=1e-9, atol=1e-12)


# -- batch size 1 = the pointwise algorithm, per class ------------------------------------


def slnd_reference(X, labels, *, n_classes, rank, sample, step, epochs, seed, prepare_seed, precondition=True):
    """Paper 000, eq. 8-11, one point at a time per class, on balanced sequences (section 3.2).

    Returns the last iterate W and the mean of the iterates W̄. The classes train side
    by side, one step each per update, so a class whose sequence is shorter than the
    longest waits (W unchanged) while the others finish, and W̄ counts those updates too.
    """
    n, d = X.shape
    X_tilde = np.hstack([X, np.ones((n, 1))])
    rows = X_tilde
    if sample < n:
        rows = X_tilde[np.sort(np.random.default_rng(prepare_seed).choice(n, sample, replace=False))]
    H = 0.25 * rows.T @ rows / sample  # F''(0) = 1/4 for the calibrated hinge
    if precondition:
        U, s, Vt = np.linalg.svd(H)
        X_star = X_tilde @ (Vt[:rank].T @ np.diag(1.0 / s[:rank]) @ U[:, :rank].T)
        L = 1.0
    else:
        X_star, L = X_tilde, np.linalg.eigvalsh(H).max()
    W = np.zeros((n_classes, d + 1))
    W_sum = np.zeros((n_classes, d + 1))
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        sequences = []
        for c in range(n_classes):  # the draws of one epoch, class by class
            positive, negative = np.flatnonzero(labels == c), np.flatnonzero(labels != c)
            size = min(positive.size, negative.size)
            if positive.size <= negative.size:
                negative = rng.choice(negative, size, replace=False)
            else:
                positive = rng.choice(positive, size, replace=False)
            order = rng.permutation(2 * size)
            sequences.append((np.r_[positive, negative][order], np.r_[np.ones(size), -np.ones(size)][order]))
        longest = max(len(sequence) for sequence, _ in sequences)
        for c, (sequence, signs) in enumerate(sequences):
            eta = step / (len(sequence) * L)
            for i, label in zip(sequence, signs):
                margin = label * (W[c] @ X_tilde[i])
                W[c] = W[c] - eta * label * chinge_derivative(margin) * X_star[i]
                W_sum[c] += W[c]
            W_sum[c] += (longest - len(sequence)) * W[c]  # the waiting updates
    return W, W_sum / (epochs * longest)


@pytest.mark.parametrize(("rank", "sample", "precondition"), [(3, 50, True), (5, 200, True), (None, 200, False)])
def test_batch_size_one_is_the_pointwise_algorithm_per_class(rank, sample, precondition):
    X, labels = _blobs(200, 4, 3, seed=8, weights=[0.2, 0.3, 0.5])  # unequal: padded sequences
    n, d = X.shape
    algorithm = Slnd(rank=rank, sample=sample, step=2.0, precondition=precondition)
    problem = _problem(n, d, batch_size=1, n_classes=3)
    members = np.where(labels[None, :] == np.arange(3)[:, None], 1.0, -1.0)
    reader = algorithm.prepare(problem, X, members, seed=11)
    result = run(algorithm, problem, reader, epochs=2, seed=4)
    expected, mean = slnd_reference(X, labels, n_classes=3, rank=rank, sample=sample, step=2.0, epochs=2,
                                    seed=4, prepare_seed=11, precondition=precondition)
    np.testing.assert_allclose(np.asarray(result.state.algorithm.W), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(result.state.parts[0].mean[0]), mean, rtol=1e-9, atol=1e-12)  # the loop's average
    coef, intercept = result.weights  # average=True by default: the mean
    np.testing.assert_allclose(np.asarray(coef), mean[:, :d].T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(intercept), mean[:, d], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n_positive", [60, 84, 30])  # tied, majority, minority positives
def test_batch_size_one_is_the_pointwise_algorithm_on_binary_data(n_positive):
    """Binary ±1 labels (C = 1: the positives against the rest), whichever side is sampled."""
    X, _ = _blobs(120, 3, 2, seed=10)
    y = np.where(np.arange(120) < n_positive, 1.0, -1.0)
    algorithm = Slnd(step=4.0, average=False)
    problem = _problem(120, 3, batch_size=1)
    result = run(algorithm, problem, algorithm.prepare(problem, X, y, seed=0), epochs=2, seed=6)
    expected, _ = slnd_reference(X, np.where(y > 0, 0, 1), n_classes=1, rank=4, sample=120, step=4.0,
                                 epochs=2, seed=6, prepare_seed=0)
    np.testing.assert_allclose(np.asarray(result.state.algorithm.W), expected, rtol=1e-9, atol=1e-12)
    w, b = result.weights  # average=False: the last iterate, eq. 11
    assert w.shape == (3,) and b.shape == ()
    np.testing.assert_allclose(np.asarray(w), expected[0, :3], rtol=1e-9, atol=1e-12)
    assert float(b) == pytest.approx(expected[0, 3], rel=1e-9, abs=1e-12)


def test_mini_batches_add_up_the_pointwise_steps_of_a_batch():
    """One batch of B rows moves w by the sum of the B pointwise steps taken from the same w."""
    X, labels = _blobs(90, 3, 3, seed=9)
    algorithm = Slnd(step=1.5)
    problem = _problem(90, 3, batch_size=1000, n_classes=3)
    members = np.where(labels[None, :] == np.arange(3)[:, None], 1.0, -1.0)
    reader = algorithm.prepare(problem, X, members, seed=0)
    (batch, y, _), = list(reader.epoch(1000, np.random.default_rng(1)))
    state = algorithm.update(algorithm.init(problem), Batch(batch, y), problem)
    expected = np.zeros((3, 4))
    for c in range(3):
        for row, x_star, label in zip(np.asarray(batch.x[c]), np.asarray(batch.x_star[c]), np.asarray(y[c])):
            expected[c] -= 1.5 * float(batch.rate[c, 0]) * label * chinge_derivative(0.0) * x_star * (label != 0)
    np.testing.assert_allclose(np.asarray(state.W), expected, atol=1e-12)


# -- binary data through calopt.fit, backends, parameters ----------------------------------


def test_binary_slnd_through_fit_is_the_positive_class_against_the_rest():
    X, labels = _blobs(300, 4, 2, seed=12, weights=[0.7, 0.3])
    model = calopt.fit(X, labels, algorithm="slnd", epochs=5, measure="f1")
    assert model.loss == "calibrated-hinge" and model.coef.shape == (4,)
    assert model.score(X, labels) > 0.8
    assert model.history[-1]["train"] > 0.8


@pytest.mark.parametrize("name", ["array-api-strict", "torch"])
def test_multiclass_slnd_is_the_same_on_other_backends(name):
    pytest.importorskip("torch" if name == "torch" else "array_api_strict")
    X, labels = _blobs(240, 5, 4, seed=13)
    reference = calopt.fit_multiclass(X, labels, algorithm="slnd", epochs=3, batch_size=16)
    other = calopt.fit_multiclass(calopt.get_backend(name).asarray(X), labels, algorithm="slnd", epochs=3,
                                  batch_size=16)
    np.testing.assert_allclose(other.coef, reference.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(other.intercept, reference.intercept, rtol=1e-8, atol=1e-10)


def test_slnd_beats_chance_by_far_on_letter_sized_data():
    """26 classes, 16 features, 20,000 rows (the size of letter): chance is 1/26 ≈ 0.04."""
    X, labels = _blobs(20_000, 16, 26, seed=14, spread=2.2)
    train, test = slice(0, 14_000), slice(14_000, None)
    model = calopt.fit_multiclass(X[train], labels[train], algorithm="slnd", eval_set=(X[test], labels[test]))
    assert model.fit_report.rank == 17
    top1 = model.top_k_accuracy(X[test], labels[test], 1)
    assert top1 > 0.6
    assert model.top_k_accuracy(X[test], labels[test], 5) > top1
    assert model.history[-1]["test"] == pytest.approx(top1)


def test_slnd_refuses_bad_parameters_and_losses():
    with pytest.raises(ParameterError, match="rank must be a whole number"):
        calopt.get_algorithm("slnd:rank=0")
    with pytest.raises(ParameterError, match="sample='2.5' is not a valid int"):
        calopt.get_algorithm("slnd:sample=2.5")
    with pytest.raises(ParameterError, match="sample must be a whole number"):
        calopt.get_algorithm("slnd", sample=2.5)
    with pytest.raises(ParameterError, match="step"):
        calopt.get_algorithm("slnd:step=-1")
    with pytest.raises(ParameterError, match="average must be true or false, got 1"):
        calopt.get_algorithm("slnd", average=1)
    X, labels = _blobs(100, 3, 2, seed=15)
    with pytest.raises(ParameterError, match="smooth loss"):
        calopt.fit(X, labels, algorithm="slnd", loss="hinge")
    X_flat = np.hstack([X, np.zeros((100, 2))])  # two null directions: numerical rank 4
    with pytest.raises(ParameterError, match="exceeds the numerical rank 4"):
        calopt.fit(X_flat, labels, algorithm="slnd:rank=6")


def test_slnd_needs_its_prepared_reader():
    X, labels = _blobs(40, 3, 2, seed=16)
    y = np.where(labels == 1, 1.0, -1.0)
    problem = _problem(40, 3, batch_size=8)
    with pytest.raises(ParameterError, match="Slnd.prepare"):
        run(Slnd(), problem, ArrayReader(X, y, NP), epochs=1)
    assert isinstance(next(Slnd().prepare(problem, X, y, seed=0).epoch(8, None))[0], SlndBatch)

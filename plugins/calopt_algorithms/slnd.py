"""SLND: stochastic low-rank Newton descent, one-vs-rest (paper 000, section 3).

For each class c, SLND minimises the unregularised calibrated risk (1/m)·Σ F(y·wᵀx̃)
(eq. 4) with x̃ = (x, 1), so that the intercept is preconditioned like any feature:

1. ``H = F''(0)·(1/m')·Σ x̃x̃ᵀ`` over m' rows sampled from the training data (section 3.1);
2. ``H = P D Pᵀ`` (``xp.linalg.eigh``) and ``H* = P_k D_k⁻¹ P_kᵀ`` from the k largest
   eigenvalues (eq. 8). Lemma 1: H* minimises ‖I − H H'‖_F over rank-k H' (the
   minimum, n − k, is also reached with other eigen-directions); what singles H*
   out is that it is the pseudo-inverse of H's best rank-k approximation, so
   H H* H is that approximation (Eckart–Young; tests/test_slnd.py checks both);
3. ``x* = H* x̃`` once for the whole training set (eq. 10);
4. ``w ← w − η·y·F'(y·wᵀx̃)·x*`` (eq. 11) along balanced sequences: every positive of c
   and as many negatives, sampled afresh each epoch (section 3.2).

H does not depend on the labels, so ONE H* (and one x*) serves every class, and the
classes train together: W is (C, d+1) and a mini-batch is a (C, B, d+1) stack of rows
of x̃ and of x*, one row of B per class, updated by two batched matmuls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple

import numpy as np

from calopt.algorithms import Algorithm, Batch, IterateAverage, Part, Problem
from calopt.backends import is_sparse, to_numpy
from calopt.errors import DataError, ParameterError

__all__ = ["BalancedReader", "Slnd", "SlndBatch", "SlndState", "default_rank", "low_rank_inverse",
           "numerical_rank", "preconditioner", "sequence_lengths"]

Array = Any

#: Rows per balanced sequence for each direction kept by the default rank (k ≤ m_c/10).
_ROWS_PER_DIRECTION = 10


class SlndState(NamedTuple):
    W: Array  #: (C, d+1): one row (w, b) per one-vs-rest class


class SlndBatch(NamedTuple):
    """What the balanced reader serves as ``X``: rows of x̃ and x*, and the per-class step unit."""

    x: Array  #: (C, B, d+1) rows of x̃ = (x, 1)
    x_star: Array  #: (C, B, d+1) the same rows of x* = H* x̃ (x̃ itself without preconditioning)
    rate: Array  #: (C, 1): η for step = 1, i.e. 1/(m_c·L), m_c the class's sequence length


def numerical_rank(eigenvalues: np.ndarray, eps: float) -> int:
    """Eigenvalues above ``λ_max·size·eps`` (NumPy's ``matrix_rank`` tolerance); below, 1/λ is noise."""
    return int(np.sum(eigenvalues > float(eigenvalues.max()) * eigenvalues.size * eps))


def default_rank(eigenvalues: np.ndarray, sequence_length: int, eps: float) -> int:
    """k: the numerical rank of H, at most a tenth of the shortest balanced sequence.

    The cap of one direction per ten rows a class trains on keeps the directions
    that w lives in well determined by the data (more overfit on MNIST, see Slnd).
    """
    return max(1, min(numerical_rank(eigenvalues, eps), sequence_length // _ROWS_PER_DIRECTION))


def low_rank_inverse(eigenvalues: Array, P: Array, rank: int) -> Array:
    """``P_k D_k⁻¹ P_kᵀ`` from an ascending eigendecomposition (``xp.linalg.eigh``) (eq. 8)."""
    size = eigenvalues.shape[0]
    P_k, D_k = P[:, size - rank:], eigenvalues[size - rank:]
    return (P_k / D_k) @ P_k.T


def preconditioner(H: Array, rank: int, *, xp: Any) -> Array:
    """``H* = P_k D_k⁻¹ P_kᵀ`` from the ``rank`` largest eigenvalues of the symmetric H (eq. 8)."""
    eigenvalues, P = xp.linalg.eigh(H)
    return low_rank_inverse(eigenvalues, P, rank)


def sequence_lengths(members: np.ndarray) -> np.ndarray:
    """m_c = 2·min(positives, negatives): the length of each class's balanced sequence."""
    positives = np.sum(members, axis=1)
    return 2 * np.minimum(positives, members.shape[1] - positives)


class BalancedReader:
    """Balanced one-vs-rest sequences of x̃ and x* rows (paper 000, section 3.2).

    ``members`` (C, n, host booleans) says which rows belong to each class. Each epoch,
    for each class in order, the smaller side (the positives, for one-vs-rest) is kept
    whole and the larger side sampled to the same size, ``rng.choice(side, size,
    replace=False)`` (the negatives when the sides are equal); the concatenation
    [positives, negatives] is then shuffled by ``rng.permutation``. With ``rng=None``
    the first rows of the larger side are used, in data order. The C sequences are
    padded to the longest with label 0, whose gradient y·F'(·) is 0, and a batch is
    the same B columns of every sequence, gathered once as (C, B, d+1) arrays, with the
    rows' sample weights (C, B) when there are any.
    """

    def __init__(self, X: Array, X_tilde: Array, X_star: Array, members: np.ndarray, rate: Array,
                 *, xp: Any, device: Any = None, rank: int | None = None, sample: int | None = None,
                 weight: Array | None = None):
        self.X, self.X_tilde, self.X_star, self.rate = X, X_tilde, X_star, rate
        self.xp, self.device, self.weight = xp, device, weight
        self.members = np.asarray(members, dtype=bool)
        #: The (C, n) one-vs-rest labels ±1 on the device, made once (for ``full``).
        self.signs = xp.asarray(np.where(self.members, 1.0, -1.0), dtype=X_tilde.dtype, device=device)
        self.positives = [np.flatnonzero(row) for row in self.members]
        self.negatives = [np.flatnonzero(~row) for row in self.members]
        self.lengths = sequence_lengths(self.members)
        #: The rank k of H* and the rows m' H was estimated from (for reports).
        self.rank, self.sample = rank, sample

    @property
    def n_samples(self) -> int:
        return int(self.X_tilde.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X_tilde.shape[1]) - 1

    def sequences(self, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and ±1 labels (C, L) of one epoch, padded with index 0 and label 0."""
        C, length = self.members.shape[0], int(self.lengths.max())
        index, labels = np.zeros((C, length), dtype=np.int64), np.zeros((C, length))
        for c, (positive, negative) in enumerate(zip(self.positives, self.negatives)):
            size = min(positive.size, negative.size)
            if rng is None:
                positive, negative = positive[:size], negative[:size]
            elif positive.size <= negative.size:
                negative = rng.choice(negative, size, replace=False)
            else:
                positive = rng.choice(positive, size, replace=False)
            rows = np.concatenate([positive, negative])
            signs = np.concatenate([np.ones(size), -np.ones(size)])
            if rng is not None:
                order = rng.permutation(rows.size)
                rows, signs = rows[order], signs[order]
            index[c, : rows.size], labels[c, : rows.size] = rows, signs
        return index, labels

    def epoch(self, batch_size: int, rng: np.random.Generator | None) -> Iterator[Batch]:
        xp = self.xp
        index, labels = self.sequences(rng)
        C, length = index.shape
        index = xp.asarray(index, device=self.device)
        labels = xp.asarray(labels, dtype=self.X_tilde.dtype, device=self.device)
        width = int(self.X_tilde.shape[1])
        for start in range(0, length, batch_size):
            stop = min(start + batch_size, length)
            rows = xp.reshape(index[:, start:stop], (-1,))
            shape = (C, stop - start, width)
            weight = None if self.weight is None else xp.reshape(xp.take(self.weight, rows, axis=0), shape[:2])
            yield Batch(SlndBatch(xp.reshape(xp.take(self.X_tilde, rows, axis=0), shape),
                                  xp.reshape(xp.take(self.X_star, rows, axis=0), shape), self.rate),
                        labels[:, start:stop], weight)

    def full(self) -> Batch:
        """The features and the (C, n) one-vs-rest labels ±1."""
        return Batch(self.X, self.signs, self.weight)


@dataclasses.dataclass(frozen=True)
class Slnd(Algorithm):
    """SLND: stochastic low-rank Newton descent, one-vs-rest (paper 000, eq. 8-11).

    No regulariser: the low rank of H* is the only restriction on w (which stays in
    the span of the k leading eigenvectors). The preconditioner is label-independent,
    so one H* serves every class of a multiclass problem (calopt.fit_multiclass trains
    them together); on binary data (calopt.fit) it is the positive class against the
    rest, C = 1. Defaults, measured on letter (d=16) and MNIST-10k (d=784), 70/30
    split, 10 passes, calibrated hinge (benchmarks/bench_slnd.py):

    * ``rank`` k: the numerical rank of H, capped at a tenth of the shortest balanced
      sequence (:func:`default_rank`). Letter needs all 17 directions (k = 14: top-1
      0.63 against 0.68); MNIST peaks for k in 80-150 (0.886-0.891) and falls with
      more (k = 365: 0.87), and its cap is 124.
    * ``sample`` m': ``min(m, max(1000, 10·(d+1)))`` rows, a covariance whose cost
      m'·d² is of the order of the eigendecomposition's d³; more rows changed top-1
      by less than the run-to-run spread on both data sets.
    * ``step``: η_c = step/(m_c·L), m_c the length of class c's balanced sequence
      and L the largest eigenvalue of the preconditioned Hessian at 0 (1 for H*H, a
      projection; λ_max(H) when ``precondition=False``): ``step`` is the number of
      Newton steps (1/L gradient steps) one pass adds up to. The paper's range
      Ω(1/m)…O(1/√m) is 1 ≤ step ≤ √m_c. The update of a mini-batch adds its B
      pointwise steps (the mean times B), so batch size 1 is eq. 11 and ``step``
      means the same for every batch size.
    * ``average``: the model is the running mean of the iterates (Polyak-Ruppert; not
      in the paper, whose form is ``average=false``, the iterates being the same).
      Averaging removes the last iterate's noise, which lets the step grow: mean test
      top-1 over seeds 0-2, 10 passes, MNIST / letter: last iterate at step 8 (the
      previous default) 0.886 / 0.676; averaged at step 16, 32, 64: 0.891 / 0.682,
      0.894 / 0.683, 0.895 / 0.681; batch sizes 16-140 changed it by < 0.002.

    ``precondition=False`` is the paper's baseline, the same loop with x* = x̃
    (plain stochastic gradient descent).
    """

    name: ClassVar[str] = "slnd"
    family: ClassVar[str] = "any"
    needs_reward: ClassVar[bool] = False
    multiclass: ClassVar[bool] = True

    #: Rank k of H* (unset: from the spectrum and the class sizes, see above).
    rank: int | None = None
    #: Rows m' sampled to estimate H (unset: min(m, max(1000, 10·(d+1)))).
    sample: int | None = None
    #: Newton steps per pass: η_c = step/(m_c·L).
    step: float = 32.0
    #: Precondition by H* (SLND); False: x* = x̃, plain SGD (the paper's baseline).
    precondition: bool = True
    #: The model is the mean of the iterates W_1 … W_t (Polyak-Ruppert), not the last one.
    average: bool = True

    def check_params(self) -> None:
        for key in ("rank", "sample"):
            value = getattr(self, key)
            self.require(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                           and float(value).is_integer() and value >= 1),
                         f"{key} must be a whole number ≥ 1, got {value!r}")
        self.require_positive("step")
        for key in ("precondition", "average"):
            self.require(isinstance(getattr(self, key), bool),
                         f"{key} must be true or false, got {getattr(self, key)!r}")

    def check_problem(self, problem: Problem) -> None:
        super().check_problem(problem)
        curvature = float(problem.loss.second_derivative(problem.scalar(0.0), xp=problem.xp))
        if not problem.loss.smooth or not curvature > 0:
            raise ParameterError(
                f"algorithm 'slnd' needs a smooth loss with F''(0) > 0 (calibrated-hinge, logistic, "
                f"squared, exponential); {problem.loss.name!r} is not"
            )

    # -- data ----------------------------------------------------------------------------
    def prepare(self, problem: Problem, X: Array, y: Array, *, weight: Array | None = None,
                seed: int | None = None) -> BalancedReader:
        """H* from m' sampled rows, x* = H* x̃ for every row, and the balanced reader (eq. 8, 10).

        The m' rows are drawn by ``np.random.default_rng(seed)`` (all rows when m' ≥ m),
        apart from the loop's shuffling; with sample weights, H is their weighted average.
        """
        xp, device, dtype = problem.xp, problem.device, problem.dtype
        members = to_numpy(y) > 0
        members = members.reshape(-1, members.shape[-1])  # (n,) binary → (1, n)
        lengths = sequence_lengths(members)
        if not lengths.min() > 0:
            raise DataError(f"algorithm 'slnd': class {int(np.argmin(lengths))} has no positives or no negatives")
        if is_sparse(X):
            X = xp.asarray(X.toarray(), dtype=dtype, device=device)
        n, d = int(X.shape[0]), int(X.shape[1])
        X_tilde = xp.concat([X, xp.ones((n, 1), dtype=dtype, device=device)], axis=1)
        sample = min(n, int(self.sample) if self.sample is not None else max(1000, 10 * (d + 1)))
        rows, row_weight = X_tilde, weight
        if sample < n:
            chosen = xp.asarray(np.sort(np.random.default_rng(seed).choice(n, sample, replace=False)), device=device)
            rows = xp.take(X_tilde, chosen, axis=0)
            row_weight = None if weight is None else xp.take(weight, chosen, axis=0)
        curvature = float(problem.loss.second_derivative(problem.scalar(0.0), xp=xp))
        if row_weight is None:
            H = (curvature / sample) * (rows.T @ rows)
        else:
            H = (curvature / float(xp.sum(row_weight))) * (rows.T @ (rows * row_weight[:, None]))
        if self.precondition:
            eigenvalues, P = xp.linalg.eigh(H)
            spectrum = to_numpy(eigenvalues)
            eps = float(np.finfo(np.float32 if dtype == xp.float32 else np.float64).eps)
            available = numerical_rank(spectrum, eps)
            rank = int(self.rank) if self.rank is not None else default_rank(spectrum, int(lengths.min()), eps)
            if rank > available:
                raise ParameterError(
                    f"algorithm 'slnd': rank {rank} exceeds the numerical rank {available} of H "
                    f"(d+1 = {d + 1} features with the intercept, m' = {sample} rows)"
                )
            X_star = X_tilde @ low_rank_inverse(eigenvalues, P, rank)
            curvature_max = 1.0  # H*·H is the projection onto the k leading eigenvectors
        else:
            X_star, rank = X_tilde, d + 1
            curvature_max = float(xp.max(xp.linalg.eigvalsh(H)))
        rate = xp.reshape(xp.asarray(1.0 / (lengths * curvature_max), dtype=dtype, device=device), (-1, 1))
        return BalancedReader(X, X_tilde, X_star, members, rate, xp=xp, device=device,
                              rank=rank, sample=sample, weight=weight)

    # -- the state machine ---------------------------------------------------------------
    def parts(self) -> tuple[Part, ...]:
        """The average of the iterates W_1 … W_t, with ``average``."""
        return (IterateAverage(),) if self.average else ()

    def init(self, problem: Problem) -> SlndState:
        return SlndState(problem.zeros(problem.n_classes, problem.n_features + 1))

    def update(self, state: SlndState, batch: Batch, problem: Problem) -> SlndState:
        """Eq. 11 for every class at once: W ← W − step·rate·Σ_b s·y·F'(y·wᵀx̃)·x*."""
        X, y, weight = batch
        if not isinstance(X, SlndBatch):
            raise ParameterError("algorithm 'slnd' trains on the reader of Slnd.prepare "
                                 "(calopt.fit builds it)")
        xp = problem.xp
        margins = y * xp.matmul(X.x, xp.expand_dims(state.W, axis=2))[:, :, 0]  # (C, B)
        coef = y * problem.loss.derivative(margins, xp=xp)  # 0 on padding (y = 0)
        if weight is not None:
            coef = coef * weight
        direction = xp.matmul(xp.expand_dims(coef, axis=1), X.x_star)[:, 0, :]  # (C, d+1)
        return SlndState(state.W - (self.step * X.rate) * direction)

    def iterate(self, state: SlndState) -> tuple[Array]:
        return (state.W,)

    def with_iterate(self, state: SlndState, params: tuple[Array]) -> SlndState:
        return state._replace(W=params[0])

    def linear(self, params: tuple[Array]) -> tuple[Array, Array]:
        """(w, b) for C = 1; (coef (d, C), intercepts (C,)) for a multiclass problem."""
        W, = params
        d = W.shape[1] - 1
        if W.shape[0] == 1:
            return W[0, :d], W[0, d]
        return W[:, :d].T, W[:, d]

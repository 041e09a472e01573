"""First-order ERM: gradient descent, SGD and the subgradient method (paper 003).

All three minimise the regularised empirical risk of a margin loss F,

    f(w, b) = (1/m)·Σ F(y_i·(wᵀx_i + b)) + λ‖w‖²    (the intercept b is not regularised),

and know nothing of the measure: it enters only through the threshold that
:func:`calopt.fit` tunes afterwards. The full-batch methods (``gd``, ``subgradient``)
never ask the reader for all the data: ``update`` accumulates the exact loss and
gradient at the current iterate over the epoch's mini-batches and ``end_epoch`` takes
the one step of the epoch, so data larger than memory work as well as arrays.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, NamedTuple

import numpy as np

from calopt.algorithms import (
    Algorithm,
    Batch,
    BudgetStep,
    InverseSqrt,
    IterateAverage,
    Part,
    Problem,
    Schedule,
    Tunable,
    column,
)
from calopt.backends import is_sparse
from calopt.errors import ParameterError

Array = Any


def _loss_gradient(w: Array, b: Array, batch: Batch, problem: Problem,
                   value: bool = True) -> tuple[Array | None, Array, Array]:
    """Batch sums of s·F(z), of s·∇_w F(z) = s·F'(z)·y·x and of s·∂_b F(z), z = y·(Xw + b), s the
    sample weights (1 without).

    The loss sum is None when ``value`` is False (SGD needs only the gradient).
    """
    xp, loss = problem.xp, problem.loss
    X, y, weight = batch
    scores = X @ w + b
    y = column(y, scores)
    margins = y * scores
    if value:
        losses, derivative = loss.value_and_derivative(margins, xp=xp)
    else:
        losses, derivative = None, loss.derivative(margins, xp=xp)
    coef = derivative * y
    if weight is not None:
        coef = coef * weight
        losses = None if losses is None else losses * weight
    return None if losses is None else xp.sum(losses, axis=0), X.T @ coef, xp.sum(coef, axis=0)


def _gram_sums(X: Array, weight: Array | None, problem: Problem) -> tuple[Array, Array]:
    """(Xᵀ diag(s) X, Xᵀs) of a batch, s the sample weights (1 without), dense (a scipy.sparse
    batch gives a small dense d×d)."""
    xp = problem.xp
    s = xp.ones((X.shape[0],), dtype=problem.dtype, device=problem.device) if weight is None else weight
    if is_sparse(X):
        weighted = X if weight is None else X.multiply(s[:, None]).tocsr()
        return xp.asarray((X.T @ weighted).toarray(), dtype=problem.dtype), xp.asarray(X.T @ s)
    return X.T @ (X if weight is None else X * s[:, None]), X.T @ s


#: Above this many features ``gd`` does not form the (d+1)² Gram matrix: M then uses the
#: trace bound λ_max(C) ≤ tr(C) = mean ‖x̃‖² (a larger M, so shorter steps, but the
#: objective still never increases). 4096 features: a 134 MB float64 Gram.
GRAM_MAX_FEATURES = 4096


def _square_norm_sum(X: Array, weight: Array | None, problem: Problem) -> Array:
    """Σ s·‖x̃‖² = Σ s·(‖x‖² + 1) over the batch's rows, s the sample weights (1 without;
    scipy.sparse on NumPy included)."""
    xp = problem.xp
    if weight is None:
        if is_sparse(X):
            return xp.asarray(float(X.multiply(X).sum()), dtype=problem.dtype) + float(X.shape[0])
        return xp.sum(X * X) + float(X.shape[0])
    if is_sparse(X):
        rows = xp.asarray(np.asarray(X.multiply(X).sum(axis=1)).ravel(), dtype=problem.dtype)
    else:
        rows = xp.sum(X * X, axis=1)
    return xp.sum((rows + 1) * weight)


def smoothness_constant(gram: Array, column_sums: Array | None, count: int, curvature: float,
                        l2: float, *, xp: Any) -> float:
    """M = sup F'' · λ_max((1/m)·Σ x̃x̃ᵀ) + 2λ with x̃ = (x, 1) (paper 003, "Smoothness").

    The Hessian of f in (w, b) is (1/m)·Σ F''(z_i)·x̃_i x̃_iᵀ + 2λ·diag(1, …, 1, 0), at most
    this M times the identity (squared loss: 2‖C_S‖ + 2λ; logistic: ‖C_S‖/4 + 2λ).
    With ``column_sums`` None, ``gram`` is the 0-d sum of ‖x̃‖² and λ_max is bounded by
    the trace (wide data, :data:`GRAM_MAX_FEATURES`).
    """
    if column_sums is None:
        return curvature * float(gram) / count + 2 * l2
    column = xp.reshape(column_sums, (-1, 1))
    corner = xp.full_like(gram[:1, :1], float(count))
    top = xp.concat([gram, column], axis=1)
    bottom = xp.concat([xp.reshape(column_sums, (1, -1)), corner], axis=1)
    second_moment = xp.concat([top, bottom], axis=0) / count
    return curvature * float(xp.max(xp.linalg.eigvalsh(second_moment))) + 2 * l2


@dataclasses.dataclass(frozen=True)
class _Erm(Algorithm):
    family: ClassVar[str] = "any"
    needs_reward: ClassVar[bool] = False
    #: gd's step bound is the Gram matrix's up to GRAM_MAX_FEATURES present columns, the trace bound
    #: above: a compacted run may use the Gram where the full width would not (a shorter bound).
    absent_columns_inert: ClassVar[bool] = True

    #: L2 regularisation λ of (1/m)·Σ F(y·s) + λ‖w‖² (the intercept is not regularised).
    l2: float = 1e-6

    #: λ is chosen on held-out rows when not given (the selection; the trial keeps 1e-6).
    tunables: ClassVar[tuple[Tunable, ...]] = (Tunable("l2", (1e-6, 1e-4, 1e-2), trial=False),)

    def check_params(self) -> None:
        self.require(isinstance(self.l2, (int, float)) and math.isfinite(self.l2) and self.l2 >= 0,
                     f"l2 must be a finite number ≥ 0, got {self.l2!r}")


class SgdState(NamedTuple):
    w: Array
    b: Array


@dataclasses.dataclass(frozen=True)
class Sgd(_Erm):
    """Mini-batch SGD on (1/m)·Σ F(y·s) + λ‖w‖² with steps η₀/√t, averaged (paper 003).

    Step t (t ≥ 1) moves (w, b) against the batch mean of ∇F plus 2λw with
    η_t = η₀/√t, the decay of the papers' stochastic solvers (a 1/(λt) schedule would
    stall for the tiny λ used here). With ``average`` the model is the mean of the
    iterates w_1..w_t (Polyak-Ruppert), which removes most of the noise of the last
    iterate. Batch size 1 is the pointwise update exactly.
    """

    name: ClassVar[str] = "sgd"
    tunables: ClassVar[tuple[Tunable, ...]] = (Tunable("step", (0.1, 1.0, 10.0)),
                                               Tunable("l2", (1e-6, 1e-4, 1e-2), trial=False))
    stackable: ClassVar[bool] = True
    scheduled: ClassVar[bool] = True

    #: Step scale η₀ (η_t = η₀/√t); unset: chosen on held-out data.
    step: float | None = None
    #: Output the mean of the iterates rather than the last one.
    average: bool = True

    def check_params(self) -> None:
        super().check_params()
        if self.step is not None:
            self.require_positive("step")

    def parts(self) -> tuple[Part, ...]:
        """The average of the iterates, with ``average``."""
        return (IterateAverage(),) if self.average else ()

    @functools.cached_property
    def schedule(self) -> Schedule:
        """η_t = η₀/√t."""
        return InverseSqrt(self.step if self.step is not None else 1.0)

    def init(self, problem: Problem) -> SgdState:
        return SgdState(problem.coef_zeros(), problem.constant(0.0))

    def update(self, state: SgdState, batch: Batch, problem: Problem, t: int) -> SgdState:
        _, grad_w, grad_b = _loss_gradient(state.w, state.b, batch, problem, value=False)
        size = batch.y.shape[0]
        eta = self.schedule(t)
        w = state.w - eta * (grad_w / size + 2 * self.l2 * state.w)
        b = state.b - eta * (grad_b / size)
        return SgdState(w, b)


class GdState(NamedTuple):
    k: int  #: gradient steps taken
    w: Array
    b: Array
    loss_sum: Array  #: Σ F(z) at (w, b) over the batches of the current epoch
    grad_w_sum: Array  #: Σ F'(z)·y·x at (w, b)
    grad_b_sum: Array  #: Σ F'(z)·y
    seen: int  #: points accumulated in the current epoch
    gram: Array | None  #: Σ xxᵀ over the first epoch, or Σ ‖x̃‖² for wide data (None once M is known)
    column_sums: Array | None  #: Σ x over the first epoch (None for wide data)
    smoothness: float | None  #: M, from the first epoch's data
    objective: Array  #: f(w_k, b_k) of the iterate the last step started from
    gradient_norm: Array  #: ‖∇f(w_k, b_k)‖ of that iterate


@dataclasses.dataclass(frozen=True)
class GradientDescent(_Erm):
    """Full-batch gradient descent with step 1/M, M the smoothness constant of the data (paper 003).

    One step per epoch: ``update`` accumulates the exact loss and gradient at the current
    iterate over the epoch's batches, ``end_epoch`` steps. M = sup F''·λ_max(C) + 2λ,
    C the uncentred second moment of x̃ = (x, 1), is computed from the first epoch's
    Gram matrix (d+1)×(d+1) (above :data:`GRAM_MAX_FEATURES` features, from its trace,
    a larger M that needs no d² memory). With step 1/M the objective never increases (the descent
    lemma) and f(w_K) − f* ≤ M‖w_0 − w*‖²/(2K) (paper 003, "GD Rates"). Needs a loss
    with bounded curvature (logistic, squared, calibrated hinge); use ``subgradient``
    for hinge.
    """

    name: ClassVar[str] = "gd"
    additive: ClassVar[bool] = True

    #: Stop when ‖∇f‖ at the iterate of an epoch is at most this (0: run every epoch).
    tol: float = 0.0

    def check_params(self) -> None:
        super().check_params()
        self.require(isinstance(self.tol, (int, float)) and self.tol >= 0,
                     f"tol must be ≥ 0, got {self.tol!r}")

    def check_problem(self, problem: Problem) -> None:
        super().check_problem(problem)
        if getattr(problem.loss, "max_curvature", None) is None:
            raise ParameterError(
                f"algorithm 'gd' needs a loss with bounded curvature F'' (logistic, squared, "
                f"calibrated-hinge); {problem.loss.name!r} has none: use 'subgradient' for it"
            )

    def init(self, problem: Problem) -> GdState:
        d = problem.n_features
        w, zero, nan = problem.zeros(d), problem.scalar(0.0), problem.scalar(math.nan)
        if d + 1 > GRAM_MAX_FEATURES:  # the trace bound: accumulate Σ ‖x̃‖² only
            return GdState(0, w, zero, zero, w, zero, 0, zero, None, None, nan, nan)
        return GdState(0, w, zero, zero, w, zero, 0, problem.zeros(d, d), w, None, nan, nan)

    def update(self, state: GdState, batch: Batch, problem: Problem) -> GdState:
        loss_sum, grad_w, grad_b = _loss_gradient(state.w, state.b, batch, problem)
        gram, column_sums = state.gram, state.column_sums
        if state.smoothness is None and column_sums is None:
            gram = gram + _square_norm_sum(batch.X, batch.weight, problem)
        elif state.smoothness is None:
            batch_gram, batch_sums = _gram_sums(batch.X, batch.weight, problem)
            gram, column_sums = gram + batch_gram, column_sums + batch_sums
        return state._replace(loss_sum=state.loss_sum + loss_sum,
                              grad_w_sum=state.grad_w_sum + grad_w,
                              grad_b_sum=state.grad_b_sum + grad_b,
                              seen=state.seen + batch.y.shape[0], gram=gram, column_sums=column_sums)

    def end_epoch(self, state: GdState, data: Batch, problem: Problem) -> GdState:
        xp, m = problem.xp, state.seen
        smoothness, gram, column_sums = state.smoothness, state.gram, state.column_sums
        if smoothness is None:
            smoothness = smoothness_constant(gram, column_sums, m, problem.loss.max_curvature,
                                             self.l2, xp=xp)
            gram = column_sums = None
        grad_w = state.grad_w_sum / m + 2 * self.l2 * state.w
        grad_b = state.grad_b_sum / m
        objective = state.loss_sum / m + self.l2 * xp.sum(state.w * state.w)
        zero = problem.scalar(0.0)
        return GdState(
            state.k + 1, state.w - grad_w / smoothness, state.b - grad_b / smoothness,
            zero, xp.zeros_like(state.w), zero, 0, gram, column_sums, smoothness, objective,
            xp.sqrt(xp.sum(grad_w * grad_w) + grad_b * grad_b),
        )

    def converged(self, state: GdState) -> bool:
        return self.tol > 0 and float(state.gradient_norm) <= self.tol

    def describe_state(self, state: GdState) -> dict[str, Array]:
        return {"objective": state.objective, "gradient_norm": state.gradient_norm,
                "smoothness": state.smoothness}


class SubgradientState(NamedTuple):
    k: int  #: subgradient steps taken
    budget: int  #: K, the number of steps the step size was set for
    w: Array
    b: Array
    loss_sum: Array  #: Σ F(z) at (w, b) over the batches of the current epoch
    grad_w_sum: Array  #: Σ g(z)·y·x at (w, b), g a subgradient of F
    grad_b_sum: Array
    seen: int
    objective: Array  #: f of the iterate the last step started from
    best_objective: Array  #: the smallest f seen so far
    w_best: Array  #: the iterate that reached it
    b_best: Array


@dataclasses.dataclass(frozen=True)
class Subgradient(_Erm):
    """Full-batch subgradient method with steps η/√K, returning the best iterate (paper 003).

    Epoch k accumulates the objective f(w_k) and a subgradient g_k at the current
    iterate over the batches and then steps w_{k+1} = w_k − (η/√K)·g_k. The model is the
    best iterate by objective among those scored, w_0..w_{K−1}: scoring an iterate costs
    no extra pass because its objective comes with its subgradient, so the iterate after
    the last step is never scored (with K = 1 the model is w_0 = 0). f(w_best) − f* ≤ (‖w_0 − w*‖² + L²η²)/(2η√K)
    (paper 003, "Implications for the Sub-gradient Method"). Works for any loss; meant
    for hinge.
    """

    name: ClassVar[str] = "subgradient"
    additive: ClassVar[bool] = True

    #: η of the constant step η/√K (the paper: η = 1).
    step: float = 1.0
    #: K, the number of steps (epochs); unset: the epochs of the run. The run stops after K.
    iterations: int | None = None

    def check_params(self) -> None:
        super().check_params()
        self.require_positive("step")
        if self.iterations is not None:
            self.require(isinstance(self.iterations, int) and self.iterations >= 1,
                         f"iterations must be a whole number ≥ 1, got {self.iterations!r}")

    def init(self, problem: Problem) -> SubgradientState:
        budget = self.iterations or problem.epochs
        if budget is None:
            raise ParameterError("algorithm 'subgradient' needs its number of steps K: "
                                 "set iterations=K or give the problem its epochs")
        w, zero = problem.zeros(problem.n_features), problem.scalar(0.0)
        inf = problem.scalar(math.inf)
        return SubgradientState(0, budget, w, zero, zero, w, zero, 0, inf, inf, w, zero)

    def update(self, state: SubgradientState, batch: Batch, problem: Problem) -> SubgradientState:
        loss_sum, grad_w, grad_b = _loss_gradient(state.w, state.b, batch, problem)
        return state._replace(loss_sum=state.loss_sum + loss_sum,
                              grad_w_sum=state.grad_w_sum + grad_w,
                              grad_b_sum=state.grad_b_sum + grad_b, seen=state.seen + batch.y.shape[0])

    def end_epoch(self, state: SubgradientState, data: Batch, problem: Problem) -> SubgradientState:
        xp, m = problem.xp, state.seen
        objective = state.loss_sum / m + self.l2 * xp.sum(state.w * state.w)
        better = objective < state.best_objective  # stays on the device: no sync
        eta = BudgetStep(self.step, state.budget)(state.k + 1)
        grad_w = state.grad_w_sum / m + 2 * self.l2 * state.w
        grad_b = state.grad_b_sum / m
        zero = problem.scalar(0.0)
        return SubgradientState(
            state.k + 1, state.budget, state.w - eta * grad_w, state.b - eta * grad_b,
            zero, xp.zeros_like(state.w), zero, 0, objective,
            xp.where(better, objective, state.best_objective),
            xp.where(better, state.w, state.w_best), xp.where(better, state.b, state.b_best),
        )

    def converged(self, state: SubgradientState) -> bool:
        """The K steps the step size was set for are done."""
        return state.k >= state.budget

    def output(self, state: SubgradientState) -> tuple[Array, Array]:
        """The best iterate by objective among those scored."""
        return state.w_best, state.b_best

    def describe_state(self, state: SubgradientState) -> dict[str, Array]:
        return {"objective": state.objective, "best_objective": state.best_objective}

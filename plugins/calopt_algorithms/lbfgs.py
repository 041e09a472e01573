"""L-BFGS on the regularised empirical risk: the converged plug-in route.

It minimises the objective of scikit-learn's ``LogisticRegression`` (for the logistic
loss), divided by C·m so that it is a mean:

    f(w, b) = (1/m)·Σ s_i·F(y_i·(wᵀx_i + b)) + ‖w‖²/(2·C·m)    (the intercept is not penalised),

with s the sample weights (mean 1). Each pass over the data evaluates f and its
gradient exactly at one point (``update`` accumulates them over the mini-batches, as
``gd`` does); ``end_epoch`` then takes one step of limited-memory BFGS (Nocedal & Wright,
*Numerical Optimization*, Algorithm 7.4, the two-loop recursion, memory ``memory``) with
a backtracking line search on the Armijo condition: a trial point that does not
decrease f enough halves its step and is evaluated in the next pass. The measure enters
through the threshold only, so this is the plug-in route of the papers with the risk
minimised to convergence, as the scikit-learn route does.

Stacked models (the settings selection) keep one memory, step and line search each:
every per-model quantity is an (M,) array and every decision a ``where``, so there is
no host synchronisation, and no Python loop over the models.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, NamedTuple

from calopt.algorithms import Algorithm, Batch, Problem, Tunable, column
from calopt.errors import ParameterError

Array = Any

#: Sufficient decrease of the Armijo condition, f(x + αp) ≤ f(x) + c₁·α·∇fᵀp.
_ARMIJO = 1e-4


class LbfgsState(NamedTuple):
    w: Array  #: the point being evaluated this pass (the trial point)
    b: Array
    loss_sum: Array  #: Σ s·F at (w, b) over the pass so far, per model
    grad_w_sum: Array  #: Σ s·F'·y·x
    grad_b_sum: Array  #: Σ s·F'·y
    x_w: Array  #: the accepted iterate (the model)
    x_b: Array
    f: Array  #: f at the accepted iterate (inf before the first pass)
    g_w: Array  #: ∇f there
    g_b: Array
    p_w: Array  #: the search direction from it
    p_b: Array
    step: Array  #: the step along it of the trial point
    s_w: Array  #: (memory, d[, M]) the last iterate differences
    s_b: Array  #: (memory[, M])
    y_w: Array  #: the matching gradient differences
    y_b: Array
    rho: Array  #: (memory[, M]) 1/yᵀs (0 for an empty slot)
    k: int  #: passes done
    g_max: Array  #: max |∇f| at the accepted iterate (inf before the first pass), per model
    hits: Array  #: share of the rows whose class has the top score at (w, b), over the pass so far (multinomial)
    ties: Array  #: scores tied at a row's top with another, over the pass so far (then ``hits`` is not top-1)
    x_hits: Array  #: ``hits`` at the accepted iterate
    x_ties: Array  #: ``ties`` there


@dataclasses.dataclass(frozen=True)
class Lbfgs(Algorithm):
    """L-BFGS on the L2-regularised risk (LogisticRegression's objective), then the best threshold."""

    name: ClassVar[str] = "lbfgs"
    family: ClassVar[str] = "any"
    needs_reward: ClassVar[bool] = False
    stackable: ClassVar[bool] = True
    full_batch: ClassVar[bool] = True
    tunables: ClassVar[tuple[Tunable, ...]] = (Tunable("C", (0.1, 1.0, 10.0), trial=False),)

    #: Inverse regularisation strength, as in scikit-learn's LogisticRegression: the penalty
    #: is ‖w‖²/(2·C) against the sum of the losses.
    C: float = 1.0
    #: Pairs (s, y) kept for the inverse-Hessian estimate.
    memory: int = 10
    #: Converged when max |∇f| at the accepted iterate is at most this (scikit-learn's tol, on the
    #: same mean objective); 0: never (the number of passes decides). A settings selection stops
    #: on its held-out rows instead.
    tol: float = 1e-4

    def check_params(self) -> None:
        self.require_positive("C")
        self.require(isinstance(self.memory, int) and not isinstance(self.memory, bool) and self.memory >= 1,
                     f"memory must be a whole number ≥ 1, got {self.memory!r}")
        self.require(isinstance(self.tol, (int, float)) and not isinstance(self.tol, bool) and self.tol >= 0,
                     f"tol must be a number ≥ 0, got {self.tol!r}")

    def check_problem(self, problem: Problem) -> None:
        super().check_problem(problem)
        if not problem.loss.smooth:
            raise ParameterError(f"algorithm {self.name!r} needs a differentiable loss (logistic, squared, "
                                 f"calibrated-hinge, exponential); {problem.loss.name!r} is not")
        if problem.epochs is not None and problem.epochs < 2:  # None: partial_fit, one call after another
            raise ParameterError(f"algorithm {self.name!r} needs 2 or more epochs: its first pass only evaluates "
                                 f"the gradient at 0")

    def init(self, problem: Problem) -> LbfgsState:
        w, b = problem.coef_zeros(), problem.constant(0.0)
        history_w = problem.zeros(self.memory, *w.shape)
        history_b = problem.zeros(self.memory, *b.shape)
        return LbfgsState(w, b, problem.constant(0.0), w, b, w, b, problem.constant(math.inf), w, b, w, b,
                          problem.constant(0.0), history_w, history_b, history_w, history_b, history_b, 0,
                          problem.constant(math.inf), *(problem.constant(0.0),) * 4)

    def update(self, state: LbfgsState, batch: Batch, problem: Problem) -> LbfgsState:
        """Accumulate s·F, and its gradient, at the trial point over one mini-batch."""
        xp, loss = problem.xp, problem.loss
        X, y, weight = batch
        scores = X @ state.w + state.b
        labels = column(y, scores)
        margins = labels * scores
        coef = loss.derivative(margins, xp=xp) * labels
        losses = loss.value(margins, xp=xp)
        if weight is not None:
            coef, losses = coef * weight, losses * weight
        return state._replace(loss_sum=state.loss_sum + xp.sum(losses, axis=0),
                              grad_w_sum=state.grad_w_sum + X.T @ coef,
                              grad_b_sum=state.grad_b_sum + xp.sum(coef, axis=0))

    def end_epoch(self, state: LbfgsState, data: Batch, problem: Problem) -> LbfgsState:
        """Accept the trial point if it decreased f enough (update the memory, new direction),
        else halve its step; the next pass evaluates the new trial point."""
        xp, m = problem.xp, problem.n_samples
        penalty = 1.0 / (self.C * m)  # the gradient of ‖w‖²/(2Cm)
        f = state.loss_sum / m + 0.5 * penalty * self._sum(state.w * state.w, xp)
        g_w = state.grad_w_sum / m + penalty * state.w
        g_b = state.grad_b_sum / m
        slope = self._inner(state.g_w, state.p_w, state.g_b, state.p_b, xp)  # ∇fᵀp at the iterate
        accept = (f <= state.f + _ARMIJO * state.step * slope) | ~xp.isfinite(state.f)
        # the memory, updated where the step is accepted and the curvature yᵀs is positive
        s_w, s_b = state.w - state.x_w, state.b - state.x_b
        y_w, y_b = g_w - state.g_w, g_b - state.g_b
        curvature = self._inner(y_w, s_w, y_b, s_b, xp)
        remember = accept & (curvature > 1e-10) & xp.isfinite(state.f)
        rolled = [xp.concat([stack[1:, ...], new[None, ...]], axis=0)
                  for stack, new in ((state.s_w, s_w), (state.s_b, s_b), (state.y_w, y_w), (state.y_b, y_b))]
        keep = xp.astype(remember, f.dtype)
        new_rho = keep / xp.where(remember, curvature, xp.ones_like(curvature))
        rho = xp.concat([state.rho[1:, ...], new_rho[None, ...]], axis=0)
        s_w_mem, s_b_mem, y_w_mem, y_b_mem = (xp.where(remember, new, old) for new, old in
                                              zip(rolled, (state.s_w, state.s_b, state.y_w, state.y_b)))
        rho = xp.where(remember, rho, state.rho)
        # the accepted iterate and its gradient
        x_w = xp.where(accept, state.w, state.x_w)
        x_b = xp.where(accept, state.b, state.x_b)
        f_x = xp.where(accept, f, state.f)
        gx_w = xp.where(accept, g_w, state.g_w)
        gx_b = xp.where(accept, g_b, state.g_b)
        p_w, p_b = self._direction(gx_w, gx_b, s_w_mem, s_b_mem, y_w_mem, y_b_mem, rho, xp)
        p_w = xp.where(accept, p_w, state.p_w)
        p_b = xp.where(accept, p_b, state.p_b)
        step = xp.where(accept, xp.ones_like(state.step), state.step * 0.5)
        g_max = xp.where(accept, xp.maximum(self._max(xp.abs(g_w), xp), self._max(xp.abs(g_b), xp, bias=True)),
                         state.g_max)
        return LbfgsState(x_w + step * p_w, x_b + step * p_b, xp.zeros_like(state.loss_sum),
                          xp.zeros_like(state.grad_w_sum), xp.zeros_like(state.grad_b_sum),
                          x_w, x_b, f_x, gx_w, gx_b, p_w, p_b, step, s_w_mem, s_b_mem, y_w_mem, y_b_mem, rho,
                          state.k + 1, g_max, xp.zeros_like(state.hits), xp.zeros_like(state.ties),
                          *((xp.where(accept, state.hits, state.x_hits), xp.where(accept, state.ties, state.x_ties))
                            if self.multiclass else (state.x_hits, state.x_ties)))

    # -- per-model reductions: a model's weights are w[:, m] and b[m] (overridden by Multinomial)
    @staticmethod
    def _sum(w: Array, xp: Any) -> Array:
        """Σ over one model's weights (the intercept apart): per model."""
        return xp.sum(w, axis=0)

    @staticmethod
    def _max(a: Array, xp: Any, *, bias: bool = False) -> Array:
        """max over one model's weights (``bias``: over its intercepts): per model."""
        return a if bias else xp.max(a, axis=0)

    def _inner(self, a_w: Array, b_w: Array, a_b: Array, b_b: Array, xp: Any) -> Array:
        """The inner product of two (w, b) pairs, per model."""
        return self._sum(a_w * b_w, xp) + self._sum_bias(a_b * b_b, xp)

    @staticmethod
    def _sum_bias(b: Array, xp: Any) -> Array:
        return b

    def converged(self, state: LbfgsState) -> bool:
        """Every model's gradient is within ``tol`` (max |∇f|), as scikit-learn's lbfgs stops."""
        xp = _namespace(state.g_max)
        return self.tol > 0 and bool(xp.all(state.g_max <= self.tol))

    def _direction(self, g_w: Array, g_b: Array, s_w: Array, s_b: Array, y_w: Array, y_b: Array, rho: Array,
                   xp: Any) -> tuple[Array, Array]:
        """−H·∇f by the two-loop recursion over the memory (empty slots have ρ = 0 and act as none);
        with no memory yet, the steepest descent direction scaled to unit length."""
        q_w, q_b = g_w, g_b
        memory = rho.shape[0]
        alphas = []
        for i in range(memory - 1, -1, -1):  # newest first
            alpha = rho[i, ...] * self._inner(s_w[i, ...], q_w, s_b[i, ...], q_b, xp)
            q_w, q_b = q_w - alpha * y_w[i, ...], q_b - alpha * y_b[i, ...]
            alphas.append(alpha)
        newest_yy = self._inner(y_w[-1, ...], y_w[-1, ...], y_b[-1, ...], y_b[-1, ...], xp)
        newest_sy = xp.where(rho[-1, ...] > 0, 1 / xp.where(rho[-1, ...] > 0, rho[-1, ...], xp.ones_like(rho[-1, ...])),
                             xp.zeros_like(rho[-1, ...]))
        norm = xp.sqrt(self._inner(g_w, g_w, g_b, g_b, xp))
        gamma = xp.where(rho[-1, ...] > 0, newest_sy / xp.where(newest_yy > 0, newest_yy, xp.ones_like(newest_yy)),
                         1 / xp.maximum(norm, xp.ones_like(norm)))
        r_w, r_b = gamma * q_w, gamma * q_b
        for i, alpha in zip(range(memory), reversed(alphas)):  # oldest first
            beta = rho[i, ...] * self._inner(y_w[i, ...], r_w, y_b[i, ...], r_b, xp)
            r_w, r_b = r_w + s_w[i, ...] * (alpha - beta), r_b + s_b[i, ...] * (alpha - beta)
        return -r_w, -r_b

    def iterate(self, state: LbfgsState) -> tuple[Array, Array]:
        return state.w, state.b

    def output(self, state: LbfgsState) -> tuple[Array, Array]:
        """The accepted iterate (the trial point before the first pass is scored)."""
        xp = _namespace(state.f)
        started = xp.isfinite(state.f)
        return xp.where(started, state.x_w, state.w), xp.where(started, state.x_b, state.b)

    def describe_state(self, state: LbfgsState) -> dict[str, Array]:
        return {"objective": state.f}


def _namespace(x: Array) -> Any:
    from calopt.backends import namespace

    return namespace(x)


@dataclasses.dataclass(frozen=True)
class Multinomial(Lbfgs):
    """L-BFGS on the multinomial logistic (softmax) loss of all the classes at once.

    The objective of scikit-learn's multiclass ``LogisticRegression``, divided by C·m:

        f(W, b) = (1/m)·Σ s_i·[log Σ_c exp(z_ic) − z_i,y_i] + ‖W‖²/(2·C·m),   z_i = Wᵀx_i + b,

    W (d, C), the intercepts not penalised. The classes share one model, so every
    inner product of the L-BFGS recursion runs over all of W and b; the rest is
    :class:`Lbfgs` (one pass evaluates f and ∇f, then one step with backtracking). The
    prediction is the argmax of the scores, as for one-vs-rest models. It stops when
    max |∇f| ≤ ``tol``, as scikit-learn's lbfgs does.
    """

    name: ClassVar[str] = "multinomial"
    multiclass: ClassVar[bool] = True
    binary: ClassVar[bool] = False  #: two classes: lbfgs minimises the same loss
    stackable: ClassVar[bool] = False
    tunables: ClassVar[tuple[Tunable, ...]] = ()

    def check_problem(self, problem: Problem) -> None:
        super().check_problem(problem)
        if problem.loss.name != "logistic":
            raise ParameterError(f"algorithm 'multinomial' minimises the multinomial logistic (softmax) loss: "
                                 f"the loss must be logistic, not {problem.loss.name!r}")

    def prepare(self, problem: Problem, X: Array, y: Array, *, weight: Array | None = None,
                seed: int | None = None) -> Any:
        """The rows with their one-hot labels (n, C), served row-first like any other reader
        (transposed from a class-major array: ``update`` works class-major)."""
        from calopt.io.batches import ArrayReader

        xp = problem.xp
        return ArrayReader(X, xp.astype(y > 0, problem.dtype).T, xp, problem.device, weight)

    def init(self, problem: Problem) -> LbfgsState:
        w, b, scalar = problem.zeros(problem.n_features, problem.n_classes), problem.zeros(problem.n_classes), \
            problem.scalar(0.0)
        history_w = problem.zeros(self.memory, *w.shape)
        history_b = problem.zeros(self.memory, *b.shape)
        return LbfgsState(w, b, scalar, w, b, w, b, problem.scalar(math.inf), w, b, w, b, scalar, history_w,
                          history_b, history_w, history_b, problem.zeros(self.memory), 0, problem.scalar(math.inf),
                          scalar, scalar, scalar, scalar)

    def update(self, state: LbfgsState, batch: Batch, problem: Problem) -> LbfgsState:
        """Accumulate s·(log-sum-exp − the true class's score), and its gradient, over one batch;
        and the rows the scores classify right (the training top-1 of the history, for free)."""
        xp = problem.xp
        X, onehot, weight = batch
        # Class-major (C, B) scores: on the CPU a reduction over the C classes of each row is a
        # loop per row, over the rows of (C, B) a few vector operations; and the arrays are
        # updated in place: each fresh (C, B) array costs more (page faults) than the arithmetic.
        onehot = onehot.T  # the reader holds it class-major: a contiguous (C, B) for the whole batch
        scores = state.w.T @ X.T
        scores += state.b[:, None]
        scores -= xp.max(scores, axis=0)  # shifted: exp cannot overflow; each row's top is 0
        true = xp.sum(onehot * scores, axis=0)  # the true class's (shifted) score
        # top-1 without an argmax: the true class is at the top; exact unless a row has tied tops
        # (counted: the history then scores the rows itself, as predict breaks ties)
        hits = xp.sum(xp.astype(true == 0, problem.dtype))
        ties = xp.astype(xp.count_nonzero(scores == 0), problem.dtype) - scores.shape[1]
        coef = xp.exp(scores)
        total = xp.sum(coef, axis=0)
        losses = xp.log(total) - true
        coef /= total
        coef -= onehot  # ∂loss/∂scores: the probabilities − the one-hot labels
        if weight is not None:
            coef *= weight
            losses *= weight
        return state._replace(loss_sum=state.loss_sum + xp.sum(losses),
                              grad_w_sum=state.grad_w_sum + X.T @ coef.T,
                              grad_b_sum=state.grad_b_sum + xp.sum(coef, axis=1),
                              hits=state.hits + hits / problem.n_samples, ties=state.ties + ties)

    def train_top1(self, state: LbfgsState) -> Array | None:
        """The accepted iterate was scored on every training row in the pass that tried it: its
        share of hits there is its training top-1 (unweighted, as the history's), unless a row
        had tied top scores (the zero model of the first pass: every row)."""
        return None if bool(state.x_ties > 0) else state.x_hits


    # one model: every reduction runs over all of W and b
    @staticmethod
    def _sum(w: Array, xp: Any) -> Array:
        return xp.sum(w)

    @staticmethod
    def _sum_bias(b: Array, xp: Any) -> Array:
        return xp.sum(b)

    @staticmethod
    def _max(a: Array, xp: Any, *, bias: bool = False) -> Array:
        return xp.max(a)

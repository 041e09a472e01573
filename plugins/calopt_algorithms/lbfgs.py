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
from calopt.backends import (column_sums, is_numpy, lbfgs_direction, put_slot, put_slot_where, row_dot, stack_rows,
                              transposed_product, unstack_rows)
from calopt.errors import ParameterError

Array = Any

#: Sufficient decrease of the Armijo condition, f(x + αp) ≤ f(x) + c₁·α·∇fᵀp.
_ARMIJO = 1e-4


class LbfgsState(NamedTuple):
    """The pass's sums at the trial point (w, b), and L-BFGS's own quantities on flat parameter
    vectors z = (w, b) (:meth:`Lbfgs._flat`: (d+1,), or (M, d+1) stacked; (d·C + C,) for the softmax)."""

    w: Array  #: the point being evaluated this pass (the trial point)
    b: Array
    loss_sum: Array  #: Σ s·F at (w, b) over the pass so far, per model
    grad_w_sum: Array  #: Σ s·F'·y·x
    grad_b_sum: Array  #: Σ s·F'·y
    x: Array  #: the accepted iterate (the model), flat
    f: Array  #: f at the accepted iterate (inf before the first pass)
    g: Array  #: ∇f there, flat
    p: Array  #: the search direction from it, flat
    step: Array  #: the step along it of the trial point
    s: Array  #: (memory, *z.shape) the last iterate differences
    y: Array  #: the matching gradient differences
    rho: Array  #: (memory[, M]) 1/yᵀs (0 for an empty slot)
    k: int  #: passes done
    g_max: Array  #: max |∇f| at the accepted iterate (inf before the first pass), per model
    hits: Array  #: share of the rows whose class has the top score at (w, b), over the pass so far (multinomial)
    ties: Array  #: scores tied at a row's top with another, over the pass so far (then ``hits`` is not top-1)
    x_hits: Array  #: ``hits`` at the accepted iterate
    x_ties: Array  #: ``ties`` there
    #: the slot of ``s``, ``y`` and ``rho`` holding the oldest pair (they are a ring: the pair i
    #: passes older than the newest is in slot (head − 1 − i) mod memory)
    head: int = 0
    #: the scores X·w + b of every row at the trial point, where the pass was one batch of all the
    #: rows (full-batch L-BFGS: (n,) or (n, M)), in the order the reader served them (an
    #: ArrayReader's single batch: the rows' own order); else None
    trial_scores: Array | None = None
    #: ``trial_scores`` at the accepted iterate (:meth:`Lbfgs.output_scores`)
    x_scores: Array | None = None


@dataclasses.dataclass(frozen=True)
class Lbfgs(Algorithm):
    """L-BFGS on the L2-regularised risk (LogisticRegression's objective), then the best threshold."""

    name: ClassVar[str] = "lbfgs"
    family: ClassVar[str] = "any"
    needs_reward: ClassVar[bool] = False
    stackable: ClassVar[bool] = True
    full_batch: ClassVar[bool] = True
    absent_columns_inert: ClassVar[bool] = True
    rotation_invariant: ClassVar[bool] = True
    additive: ClassVar[bool] = True  #: a pass adds f and ∇f at the trial point; end_epoch steps
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
        return self._init(problem, problem.coef_zeros(), problem.constant(0.0), problem.constant(0.0))

    def _init(self, problem: Problem, w: Array, b: Array, zero: Array) -> LbfgsState:
        """The state at (w, b) = 0 before the first pass (f = inf, an empty memory); ``zero`` is
        a per-model 0."""
        z = self._flat(w, b, problem.xp)
        inf = problem.xp.full_like(zero, math.inf)
        return LbfgsState(w, b, zero, w, b, z, inf, z, z, zero, problem.zeros(self.memory, *z.shape),
                          problem.zeros(self.memory, *z.shape),
                          problem.zeros(self.memory, *zero.shape), 0, inf, *(problem.scalar(0.0),) * 4)

    def update(self, state: LbfgsState, batch: Batch, problem: Problem) -> LbfgsState:
        """Accumulate s·F, and its gradient, at the trial point over one mini-batch."""
        xp, loss = problem.xp, problem.loss
        X, y, weight = batch
        scores = X @ state.w + state.b
        labels = column(y, scores)
        margins = labels * scores
        losses, derivative = loss.value_and_derivative(margins, xp=xp)
        coef = derivative * labels
        if weight is not None:
            coef, losses = coef * weight, losses * weight
        whole = int(scores.shape[0]) == problem.n_samples  # one batch of every row
        return state._replace(loss_sum=state.loss_sum + column_sums(losses, xp),
                              grad_w_sum=state.grad_w_sum + transposed_product(X, coef),
                              grad_b_sum=state.grad_b_sum + column_sums(coef, xp),
                              trial_scores=scores if whole else None)

    def end_epoch(self, state: LbfgsState, data: Batch, problem: Problem) -> LbfgsState:
        """Accept the trial point if it decreased f enough (update the memory, new direction),
        else halve its step; the next pass evaluates the new trial point."""
        xp, m = problem.xp, problem.n_samples
        penalty = 1.0 / (self.C * m)  # the gradient of ‖w‖²/(2Cm)
        z = self._flat(state.w, state.b, xp)
        f = state.loss_sum / m + 0.5 * penalty * self._squares(state.w, z, xp)
        g = self._gradient(state, z, penalty, m, xp)
        slope = self._dot(state.g, state.p, xp)  # ∇fᵀp at the iterate
        started = xp.isfinite(state.f)
        accept = (f <= state.f + _ARMIJO * state.step * slope) | ~started
        # the memory, updated where the step is accepted and the curvature yᵀs is positive
        s_new, y_new = z - state.x, g - state.g
        curvature = self._dot(y_new, s_new, xp)
        remember = accept & (curvature > 1e-10) & started
        new_rho = xp.astype(remember, f.dtype) / xp.where(remember, curvature, xp.ones_like(curvature))
        # (per-model scalars [..., None] meet z's last axis, the parameters); when every model
        # remembers (most passes: one host read a pass, as converged() makes), no masking copy
        every = bool(xp.all(remember))
        # the memory is a ring: slot ``head`` holds the oldest pair, the new one replaces it and
        # the ring moves on (in place on NumPy: this state's arrays are not read again)
        head = state.head
        if every:
            s_mem, y_mem, rho = (put_slot(old, head, new, xp) for old, new in
                                 ((state.s, s_new), (state.y, y_new), (state.rho, new_rho)))
            head = (head + 1) % self.memory
        elif bool(xp.any(remember)):
            s_mem, y_mem, rho = (put_slot_where(old, head, new, remember, xp) for old, new in
                                 ((state.s, s_new), (state.y, y_new), (state.rho, new_rho)))
            head = (head + 1) % self.memory
        else:
            s_mem, y_mem, rho = state.s, state.y, state.rho
        # the accepted iterate, its gradient and the direction from it (every model remembering
        # has accepted: no masking copies then)
        x = z if every else xp.where(accept[..., None], z, state.x)
        g_x = g if every else xp.where(accept[..., None], g, state.g)
        p = self._direction(g_x, s_mem, y_mem, rho, xp, min(state.k, self.memory), head)
        p = p if every else xp.where(accept[..., None], p, state.p)
        step = xp.where(accept, xp.ones_like(state.step), state.step * 0.5)
        g_max = xp.where(accept, xp.max(xp.abs(g), axis=-1), state.g_max)
        w, b = self._unflat(x + step[..., None] * p, state.w, xp)
        hits = (xp.where(accept, state.hits, state.x_hits), xp.where(accept, state.ties, state.x_ties)) \
            if self.multiclass else (state.x_hits, state.x_ties)
        return LbfgsState(w, b, xp.zeros_like(state.loss_sum), xp.zeros_like(state.grad_w_sum),
                          xp.zeros_like(state.grad_b_sum), x, xp.where(accept, f, state.f), g_x, p, step,
                          s_mem, y_mem, rho, state.k + 1, g_max, xp.zeros_like(state.hits),
                          xp.zeros_like(state.ties), *hits, head, None,
                          self._accepted_scores(state, accept, every))

    # -- flat parameters: a model's weights and intercept as one vector (overridden by Multinomial)
    # Model-major: a model's parameters are contiguous (on the CPU an inner product over the
    # last axis is several times faster than over the first of a (d+1, M) array).
    @staticmethod
    def _flat(w: Array, b: Array, xp: Any) -> Array:
        """(w, b) as z = (d+1,), or (M, d+1) for stacked models (a row each, C-ordered on NumPy)."""
        if w.ndim == 1:
            return xp.concat([w, xp.expand_dims(b, axis=0)])
        return stack_rows(w, b, xp)

    @staticmethod
    def _unflat(z: Array, like: Array, xp: Any) -> tuple[Array, Array]:
        """The (w, b) of z (``like``: an array of w's shape); stacked, w (d, M) C-ordered on NumPy
        (what a sparse product reads)."""
        if z.ndim == 1:
            return z[:-1], z[-1]
        return unstack_rows(z, xp)

    @staticmethod
    def _dot(a: Array, c: Array, xp: Any) -> Array:
        """The inner product of two flat parameter vectors, per model (over z's last axis)."""
        return row_dot(a, c, xp)

    @staticmethod
    def _sum(w: Array, xp: Any) -> Array:
        """Σ over one model's weights (the intercept apart): per model."""
        return xp.sum(w, axis=0)

    def _gradient(self, state: LbfgsState, z: Array, penalty: Any, m: int, xp: Any) -> Array:
        """∇f at the trial point (w, b), flat: the pass's sums / m, plus the penalty's gradient
        (stacked on NumPy in the flat rows, whose weights ``z`` already holds: no transposed
        copy of w; the same numbers per entry)."""
        if z.ndim == 2 and is_numpy(xp):
            g = self._flat(state.grad_w_sum, state.grad_b_sum, xp)
            g /= m
            g[:, :-1] += (penalty[:, None] if getattr(penalty, "ndim", 0) == 1 else penalty) * z[:, :-1]
            return g
        return self._flat(state.grad_w_sum / m + penalty * state.w, state.grad_b_sum / m, xp)

    def _squares(self, w: Array, z: Array, xp: Any) -> Array:
        """‖w‖² per model, for w and its flat z (stacked: over z's rows less their intercepts, each
        a contiguous row on NumPy)."""
        if z.ndim == 2:
            return row_dot(z[:, :-1], z[:, :-1], xp)
        return self._sum(w * w, xp)

    def converged(self, state: LbfgsState) -> bool:
        """Every model's gradient is within ``tol`` (max |∇f|), as scikit-learn's lbfgs stops."""
        xp = _namespace(state.g_max)
        return self.tol > 0 and bool(xp.all(state.g_max <= self.tol))

    def _direction(self, g: Array, s: Array, y: Array, rho: Array, xp: Any, used: int | None = None,
                   head: int = 0) -> Array:
        """−H·∇f by the two-loop recursion over the memory (empty slots have ρ = 0 and act as none);
        with no memory yet, the steepest descent direction, at most of unit length. The memory is a
        ring whose oldest slot is ``head``. ``used``: the newest slots that can hold a pair (one a
        pass at the most: ``min(k, memory)``); the older ones are empty, and skipping them leaves
        the same numbers (their terms are exact zeros)."""
        memory = rho.shape[0]
        order = [(head + i) % memory for i in range(memory - (memory if used is None else used), memory)]
        return lbfgs_direction(g, s, y, rho, order, (head - 1) % memory, xp)

    @staticmethod
    def _accepted_scores(state: LbfgsState, accept: Array, every: bool) -> Array | None:
        """The rows' scores at the new accepted iterate: the pass's where it was accepted, the
        accepted iterate's before where not (None where the pass or the iterate's pass was not
        one batch of every row)."""
        trial = state.trial_scores
        if trial is None or every or state.k == 0:  # the first pass is accepted everywhere
            return trial
        if state.x_scores is None:
            return None
        return _namespace(trial).where(accept, trial, state.x_scores)

    def output_scores(self, state: LbfgsState) -> Array | None:
        """X·w + b of every training row at :meth:`output`'s model, from the pass that evaluated it,
        in the order the reader served the rows (the settings selection's ArrayReader: their own);
        None where no single pass scored every row."""
        return state.x_scores

    def iterate(self, state: LbfgsState) -> tuple[Array, Array]:
        return state.w, state.b

    def output(self, state: LbfgsState) -> tuple[Array, Array]:
        """The accepted iterate (the trial point before the first pass is scored)."""
        xp = _namespace(state.f)
        w, b = self._unflat(state.x, state.w, xp)
        started = xp.isfinite(state.f)
        return xp.where(started, w, state.w), xp.where(started, b, state.b)

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
        return self._init(problem, problem.zeros(problem.n_features, problem.n_classes),
                          problem.zeros(problem.n_classes), problem.scalar(0.0))

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
                              grad_w_sum=state.grad_w_sum + transposed_product(X, coef.T),
                              grad_b_sum=state.grad_b_sum + xp.sum(coef, axis=1),
                              hits=state.hits + hits / problem.n_samples, ties=state.ties + ties)

    def train_top1(self, state: LbfgsState) -> Array | None:
        """The accepted iterate was scored on every training row in the pass that tried it: its
        share of hits there is its training top-1 (unweighted, as the history's), unless a row
        had tied top scores (the zero model of the first pass: every row)."""
        return None if bool(state.x_ties > 0) else state.x_hits

    # one model: (W, b) flattened into one vector
    @staticmethod
    def _flat(w: Array, b: Array, xp: Any) -> Array:
        return xp.concat([xp.reshape(w, (-1,)), b])

    @staticmethod
    def _unflat(z: Array, like: Array, xp: Any) -> tuple[Array, Array]:
        d, classes = like.shape
        return xp.reshape(z[:d * classes], (d, classes)), z[d * classes:]

    @staticmethod
    def _sum(w: Array, xp: Any) -> Array:
        return xp.sum(w)

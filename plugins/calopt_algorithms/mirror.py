"""Mirror descent with averaging: ℓ1-constrained aggregation of base predictors (paper 001).

Weights θ live on the scaled simplex Θ = {θ ≥ 0, Σθ = λ} over M base predictors
H(x) = (h_1(x), …, h_M(x)), with loss Q(θ, (x, y)) = φ(y·θᵀH(x)) for the problem's
convex margin loss φ. With the entropic proxy the algorithm is (paper 001, eqs. 9-11;
spec, "Mirror descent with averaging"):

    ζ₀ = 0,  u_i = ∇_θ Q(θ_{i−1}, Z_i),  ζ_i = ζ_{i−1} + γ_i·u_i,  θ_i = λ·softmax(−ζ_i/β_i),
    γ_i = 1,  β_i = β₀·√(i+1),  β₀ = L/√(ln M),  output θ̂ = Σ γ_i θ_{i−1} / Σ γ_i,

and the Theorem bounds the excess risk E A(θ̂_t) − min_Θ A by 2·L·λ·√(ln M)·√(t+1)/t.
A mini-batch replaces u_i by the batch mean of the pointwise gradients.

As a binary classifier the base predictors are the signed columns of X and a signed
constant, (x_1, …, x_d, −x_1, …, −x_d, 1, −1), so θ̂ is an ℓ1-constrained linear
model, ‖(w, b)‖₁ ≤ λ. With ``signed=False`` they are the columns of X as given (θ ≥ 0,
no intercept): ``calopt aggregate`` uses this to combine already oriented models.

L bounds ‖u‖_∞. With K = sup |h_j(x)|, every margin lies in [−Kλ, Kλ], and φ' is
non-decreasing (φ convex), so ‖u‖_∞ ≤ L = K·max(|φ'(−Kλ)|, |φ'(Kλ)|) (the paper's
example, L = K·|φ'(−Kλ)| for a non-increasing φ). K is the largest |x| seen so far,
and at least 1 (calopt.fit and aggregate scale every column to [−1, 1], so K = 1 there);
K, hence β_i, never decreases, which the Theorem's proof requires.

Sample weights s (mean 1) make the loss s_y·φ(y·θᵀH(x)), still convex in θ; L scales by
the largest weight (``Problem.max_weight``). ``calopt aggregate`` weighs each class by the
measure's gradient this way.

That β_i is the Theorem's (``temperature="theorem"``). The default, ``"adaptive"``,
replaces L²·(i+1) by the sum of the squared ‖u_j‖_∞ actually seen, which is at most
that and also never decreases: the same algorithm with a data-driven temperature (see
``MirrorDescent.temperature`` for what it changed).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, NamedTuple

from calopt.algorithms import Algorithm, Batch, IterateAverage, Part, Problem, Schedule, SqrtGrowth
from calopt.backends import device, is_sparse, namespace

Array = Any


class MirrorState(NamedTuple):
    zeta: Array  #: ζ_t, the summed gradients (dual space), shape (M,)
    theta: Array  #: θ_t = λ·softmax(−ζ_t/β_t), used by the next update
    bound: Array  #: K, the largest |h_j(x)| seen so far (at least 1), 0-d
    temperature: Array  #: β_t, 0-d
    squares: Array  #: Σ_{i≤t} ‖u_i‖²_∞, the gradients' size so far (adaptive temperature), 0-d


@dataclasses.dataclass(frozen=True)
class MirrorDescent(Algorithm):
    """Mirror descent with averaging: ℓ1-constrained linear model on the scaled simplex (paper 001)."""

    name: ClassVar[str] = "mirror-descent"
    family: ClassVar[str] = "any"
    needs_reward: ClassVar[bool] = False
    scheduled: ClassVar[bool] = True

    #: λ, the ℓ1 radius Σθ = λ (``--lambda`` of ``calopt aggregate``; ``lambda`` is a Python
    #: keyword). On a9a (max-abs scaled, logistic, 5 passes, adaptive temperature) the test F1
    #: was 0.666, 0.679 and 0.671 for λ = 10, 100, 1000 (an unconstrained logistic model has
    #: ‖(w, b)‖₁ ≈ 27).
    radius: float = 100.0
    #: How β_i grows: ``"adaptive"``, β_i = √(Σ_{j≤i} ‖u_j‖²_∞ / ln M) from the gradients
    #: seen (the AdaGrad-style rate of the entropic regulariser); ``"theorem"``,
    #: β_i = L·√(i+1)/√(ln M) with the worst-case L of the module docstring. L bounds every
    #: ‖u_j‖_∞, so the adaptive β_i is never larger; mini-batch means of φ'·y·h are far
    #: below L, and the Theorem's β_i kept θ near uniform. Measured (seeds 0-2, 10 passes):
    #: test F1 / G-mean of the ℓ1 classifier at λ = 100, a9a 0.666 / 0.809 → 0.679 / 0.818,
    #: ijcnn1 0.574 / 0.854 → 0.591 / 0.841; ``calopt aggregate`` on a9a (λ = 1), mean
    #: gap to the best single model −0.0029 → −0.0002 (benchmarks/bench_aggregate.py).
    temperature: str = "adaptive"
    #: β₀ of a fixed schedule β_i = β₀·√(i+1); when set it replaces ``temperature``.
    beta0: float | None = None
    #: Base predictors ±x_j and ±1 (an ℓ1 ball); False: the columns of X alone, θ ≥ 0.
    signed: bool = True

    def check_params(self) -> None:
        self.require_positive("radius")
        self.require(self.temperature in ("adaptive", "theorem"),
                     f"temperature must be 'adaptive' or 'theorem', got {self.temperature!r}")
        if self.beta0 is not None:
            self.require_positive("beta0")

    def n_predictors(self, n_features: int) -> int:
        """M, the number of base predictors for ``n_features`` columns."""
        return 2 * n_features + 2 if self.signed else n_features

    def check_problem(self, problem: Problem) -> None:
        super().check_problem(problem)
        self.require(self.n_predictors(problem.n_features) >= 2,
                     "needs at least 2 base predictors (M ≥ 2, so that ln M > 0)")

    def parts(self) -> tuple[Part, ...]:
        """The output θ̂: the mean of the weights the updates started from, θ_0 … θ_{t−1} (eq. 11)."""
        return (IterateAverage(lagged=True),)

    def init(self, problem: Problem) -> MirrorState:
        m = self.n_predictors(problem.n_features)
        zeta = problem.zeros(m)
        bound, squares = problem.scalar(1.0), problem.scalar(0.0)
        temperature = self._temperature(bound, squares, 0, problem)
        return MirrorState(zeta, self._mirror(zeta, temperature, problem), bound, temperature, squares)

    def update(self, state: MirrorState, batch: Batch, problem: Problem, t: int) -> MirrorState:
        xp = problem.xp
        X, y, weight = batch
        w, b = self._linear(state.theta)
        margins = y * (X @ w + b)
        coef = problem.loss.derivative(margins, xp=xp) * y
        if weight is not None:
            coef = coef * weight
        size = y.shape[0]
        grad = (X.T @ coef) / size  # batch mean of s·φ'(y·s)·y·x
        if self.signed:
            grad_b = xp.reshape(xp.sum(coef) / size, (1,))
            grad = xp.concat([grad, -grad, grad_b, -grad_b])
        zeta = state.zeta + grad  # γ_i = 1
        bound = xp.maximum(state.bound, _max_abs(X, xp, state.bound))
        squares = state.squares + xp.max(xp.abs(grad)) ** 2
        temperature = self._temperature(bound, squares, t, problem)
        return MirrorState(zeta, self._mirror(zeta, temperature, problem), bound, temperature, squares)

    def iterate(self, state: MirrorState) -> tuple[Array]:
        return (state.theta,)

    def with_iterate(self, state: MirrorState, params: tuple[Array]) -> MirrorState:
        return state._replace(theta=params[0])

    def linear(self, params: tuple[Array]) -> tuple[Array, Array]:
        theta, = params
        return self._linear(theta)

    def describe_state(self, state: MirrorState) -> dict[str, Array]:
        return {"temperature": state.temperature}

    # -- the pieces of eqs. 9-11 ------------------------------------------------------
    def _mirror(self, zeta: Array, temperature: Array, problem: Problem) -> Array:
        """θ = −∇W_β(ζ) = λ·softmax(−ζ/β), the max subtracted before exponentiating.

        β = 0 only while every gradient so far was 0 (adaptive rule), so ζ = 0 and θ is
        uniform; the floor is the dtype's smallest normal number, which float32 keeps.
        """
        xp = problem.xp
        logits = -zeta / xp.maximum(temperature, problem.tiny())
        e = xp.exp(logits - xp.max(logits))
        return self.radius * e / xp.sum(e)

    @functools.cached_property
    def schedule(self) -> Schedule:
        """√(t+1) times β₀ (a fixed schedule), or times 1 (the Theorem's, scaled by L/√(ln M))."""
        return SqrtGrowth(self.beta0 if self.beta0 is not None else 1.0)

    def _temperature(self, bound: Array, squares: Array, t: int, problem: Problem) -> Array:
        """β_t: β₀·√(t+1) for a given β₀; else adaptive, √(Σ‖u‖²_∞/ln M), or the Theorem's
        L·√(t+1)/√(ln M), L = K·max |φ'(±Kλ)| (module docstring)."""
        if self.beta0 is not None:
            return problem.scalar(self.schedule(t))
        xp = problem.xp
        log_m = math.log(self.n_predictors(problem.n_features))
        if self.temperature == "adaptive":
            return xp.sqrt(squares / log_m)
        edges = xp.stack([-bound, bound]) * self.radius
        lipschitz = bound * problem.max_weight * xp.max(xp.abs(problem.loss.derivative(edges, xp=xp)))
        return lipschitz * (self.schedule(t) / math.sqrt(log_m))

    def _linear(self, theta: Array) -> tuple[Array, Array]:
        """The linear model (w, b) of a weight vector θ over the base predictors."""
        if not self.signed:
            return theta, namespace(theta).zeros((), dtype=theta.dtype, device=device(theta))
        d = (theta.shape[0] - 2) // 2
        return theta[:d] - theta[d:2 * d], theta[2 * d] - theta[2 * d + 1]


def _max_abs(X: Array, xp: Any, like: Array) -> Array:
    """max |X| as a 0-d array like ``like`` (scipy.sparse batches on NumPy included)."""
    if is_sparse(X):
        return xp.asarray(abs(X).max() if X.nnz else 0.0, dtype=like.dtype, device=device(like))
    return xp.max(xp.abs(X))


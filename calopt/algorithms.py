"""Training algorithms as small state machines, the parts they share, and the mini-batch math.

An :class:`Algorithm` has an ``init`` that builds an explicit state (a NamedTuple of
arrays and plain numbers, so it can be checkpointed) and an ``update`` that takes one
mini-batch (:class:`~calopt.io.batches.Batch`) and returns the next state. It never
loops over the data and never mutates its inputs: the one loop lives in
:mod:`calopt.training.loop`.

What several algorithms share is written once here and composed, as optax composes
gradient transformations: an algorithm names the iterate the shared parts act on
(:meth:`Algorithm.iterate`, :meth:`Algorithm.with_iterate`) and lists its parts
(:meth:`Algorithm.parts`): :class:`BallProjection` (the papers' ball W) and
:class:`IterateAverage` (Polyak-Ruppert averaging, the papers' output). The loop applies
them after every update, in order, as one :class:`Chain`, and the model is the last
part's output.

Step sizes are :class:`Schedule` objects, η(t) of the update's number t:
:class:`InverseSqrt` (η₀/√t, the papers' decay; :func:`step_size` evaluates it),
:class:`Constant`, :class:`SqrtGrowth` (β₀·√(t+1), mirror descent's temperature),
:class:`Power` (t^p, SPADE's reward offset) and :class:`BudgetStep` (η/√K for a budget
of K steps, the subgradient method's). The step counter t is the loop's, one per run:
an algorithm that declares ``scheduled`` is called as ``update(state, batch, problem, t)``
and keeps no counter of its own (:class:`~calopt.training.loop.TrainerState` holds it).
The step scale an algorithm wants chosen from the data is declared in ``tunables``.

**Stacked models.** An algorithm that declares ``stackable`` trains ``problem.n_models``
models at once on the same mini-batches (the settings selection trains every fold and
candidate this way, paying the per-batch overhead once): ``w`` is then (d, M), ``b`` and
every per-model scalar (M,), the batch's sample weights (B, M) (a fold's held-out rows
weigh 0), and the tunable parameters per-model arrays (:meth:`Algorithm.stacked`).
Written with :func:`column` for labels and vector-first products (``ones @ r``), the same
code serves one model and M.

The model is linear with an intercept, ``s = X @ w + b``. Rewards come from a
reward-capable loss, ``r = 1 − F(y·s)`` (spec, "Losses and rewards"); with the
unbiased one-point forms ``r⁺ = r·1[y=1]/p`` and ``r⁻ = r·1[y=−1]/(1−p)``, a
mini-batch replaces each one-point term by its mean over the batch, which with batch
size 1 is the paper's pointwise update exactly. Sample weights (mean 1 over the
training data) multiply each row's term, and ``p`` is then the weighted share of the
positives.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar, NamedTuple, Protocol

from calopt.components import Component
from calopt.errors import ParameterError
from calopt.io.batches import ArrayReader, Batch
from calopt.losses import Loss
from calopt.measures import Measure

__all__ = [
    "Algorithm",
    "AverageState",
    "BallProjection",
    "Batch",
    "BudgetStep",
    "Chain",
    "Constant",
    "InverseSqrt",
    "IterateAverage",
    "Part",
    "Power",
    "Problem",
    "Schedule",
    "SqrtGrowth",
    "Tunable",
    "column",
    "project_ball",
    "reward_terms",
    "step_size",
    "weighted_reward_gradient",
]

Array = Any
Params = tuple[Array, ...]


class Problem(NamedTuple):
    """What an algorithm knows about the training problem (fixed during training)."""

    xp: Any
    dtype: Any
    device: Any
    n_samples: int
    n_features: int
    #: Share of the positives in the training data (weighted by the sample weights).
    positive_rate: float
    measure: Measure
    #: The loss whose reward 1 − F drives the non-decomposable solvers (or the ERM loss).
    loss: Loss
    batch_size: int
    #: Epochs the run will make (budget-dependent steps, e.g. the subgradient method's
    #: η/√K); None when unknown.
    epochs: int | None = None
    #: One-vs-rest classes trained together (algorithms with ``multiclass``); 1: binary.
    n_classes: int = 1
    #: The largest sample weight (1 without weights), for bounds that scale with it.
    max_weight: float = 1.0
    #: Models trained together by a ``stackable`` algorithm (1: one model).
    n_models: int = 1

    def zeros(self, *shape: int) -> Array:
        return self.xp.zeros(shape, dtype=self.dtype, device=self.device)

    def scalar(self, value: float) -> Array:
        """``value`` as a 0-d array of the working dtype on the problem's device."""
        return self.xp.asarray(value, dtype=self.dtype, device=self.device)

    def coef_zeros(self) -> Array:
        """Zero weights: (d,) for one model, (d, M) for ``n_models`` stacked ones."""
        return self.zeros(self.n_features) if self.n_models == 1 else self.zeros(self.n_features, self.n_models)

    def constant(self, value: float) -> Array:
        """A per-model scalar: 0-d for one model, (M,) for stacked ones."""
        if self.n_models == 1:
            return self.scalar(value)
        return self.xp.full((self.n_models,), value, dtype=self.dtype, device=self.device)

    def tiny(self) -> Array:
        """The smallest positive normal number of the working dtype, on the device: a floor
        for divisors that is never 0 in float32 (a constant like 1e-300 is)."""
        return self.scalar(self.xp.finfo(self.dtype).smallest_normal)


@dataclasses.dataclass(frozen=True)
class Tunable:
    """A parameter the pipeline chooses on data the weights do not see, when the user does not give it.

    ``name`` is the algorithm's dataclass field and ``candidates`` the values tried
    (:mod:`calopt.training.selection`). ``trial``: the one-pass trial of ``select="none"``
    chooses it too (the step scale, when unset); the cross-validated selection chooses
    every tunable.
    """

    name: str
    candidates: tuple[Any, ...]
    trial: bool = True


# -- the shared parts -----------------------------------------------------------------------
class Part(Protocol):
    """A transformation of the iterate applied by the loop after every update.

    ``init`` gives the part's own state (checkpointed with the algorithm's); ``update``
    gets the iterate before and after the algorithm's update and returns the iterate
    the algorithm continues from and the part's new state; ``output`` is the model the
    part stands for (the average, for averaging).
    """

    def init(self, params: Params, problem: Problem) -> Any: ...

    def update(self, previous: Params, params: Params, state: Any, problem: Problem) -> tuple[Params, Any]: ...

    def output(self, params: Params, state: Any) -> Params: ...


def column(y: Array, like: Array) -> Array:
    """Labels ``y`` (B,) shaped to broadcast against ``like``: (B, 1) for stacked (B, M) arrays."""
    return y[:, None] if like.ndim == 2 and y.ndim == 1 else y


def project_ball(w: Array, b: Array, radius: Any, *, xp: Any) -> tuple[Array, Array]:
    """Project ``(w, b)`` onto the Euclidean ball of ``radius`` (a rescaling; None: no ball).

    Stacked models (w (d, M)) each get their own norm, and ``radius`` may be an (M,)
    array (inf: no ball for that model).
    """
    if radius is None:
        return w, b
    norm = xp.sqrt(xp.sum(w * w, axis=0) + b * b)
    factor = xp.minimum(xp.ones_like(norm), radius / xp.maximum(norm, xp.full_like(norm, 1e-30)))
    return w * factor, b * factor


@dataclasses.dataclass(frozen=True)
class BallProjection:
    """Keep ``(w, b)`` in the Euclidean ball of ``radius`` (the set W of papers 002 and 003)."""

    radius: float

    def __call__(self, params: Params, xp: Any) -> Params:
        return project_ball(*params, self.radius, xp=xp)

    def init(self, params: Params, problem: Problem) -> None:
        return None

    def update(self, previous: Params, params: Params, state: None, problem: Problem) -> tuple[Params, None]:
        return self(params, problem.xp), None

    def output(self, params: Params, state: None) -> Params:
        return params


class AverageState(NamedTuple):
    mean: tuple  #: the running mean of the iterates seen
    count: int  #: how many


@dataclasses.dataclass(frozen=True)
class IterateAverage:
    """The running mean of the iterates, the model of the stochastic methods (Polyak-Ruppert).

    By default the mean of the iterates after updates 1…t (SPADE's output, paper 002);
    ``lagged`` averages the iterates the updates started from, 0…t−1 (mirror descent's
    θ̂, paper 001).
    """

    lagged: bool = False

    def init(self, params: Params, problem: Problem | None = None) -> AverageState:
        return AverageState(tuple(params), 0)

    def add(self, state: AverageState, params: Params) -> AverageState:
        """The mean with one more iterate."""
        count = state.count + 1
        return AverageState(tuple(mean + (p - mean) / count for mean, p in zip(state.mean, params)), count)

    def update(self, previous: Params, params: Params, state: AverageState,
               problem: Problem) -> tuple[Params, AverageState]:
        return params, self.add(state, previous if self.lagged else params)

    def output(self, params: Params, state: AverageState) -> Params:
        return state.mean if state.count else params


@dataclasses.dataclass(frozen=True)
class Chain:
    """Parts applied one after the other, as one part (optax's ``chain``).

    Its state is the tuple of the parts' states; ``update`` hands each part the iterate
    the previous one returned, and ``output`` is the last part's output. The loop runs an
    algorithm's :meth:`~Algorithm.parts` as one chain; STAMP runs one per model stage,
    restarted (``init``) at each stage.
    """

    parts: tuple[Part, ...] = ()

    def init(self, params: Params, problem: Problem | None = None) -> tuple:
        return tuple(part.init(params, problem) for part in self.parts)

    def update(self, previous: Params, params: Params, state: tuple, problem: Problem) -> tuple[Params, tuple]:
        states = []
        for part, part_state in zip(self.parts, state):
            params, part_state = part.update(previous, params, part_state, problem)
            states.append(part_state)
        return params, tuple(states)

    def output(self, params: Params, state: tuple) -> Params:
        for part, part_state in zip(self.parts, state):
            params = part.output(params, part_state)
        return params


# -- the step schedules ----------------------------------------------------------------------
class Schedule(Protocol):
    """A step size as a function of the update's number: ``schedule(t)`` is η(t), t ≥ 1.

    The scale may be a per-model (M,) array of a stacked run (:meth:`Algorithm.stacked`);
    the value is then an array too.
    """

    def __call__(self, t: int) -> Any: ...


@dataclasses.dataclass(frozen=True)
class Constant:
    """η(t) = ``value`` for every t."""

    value: Any

    def __call__(self, t: int) -> Any:
        return self.value


@dataclasses.dataclass(frozen=True)
class InverseSqrt:
    """η(t) = ``scale``/√t: the decay of the papers' stochastic solvers (η₀/√t)."""

    scale: Any

    def __call__(self, t: int) -> Any:
        return self.scale / math.sqrt(t)


@dataclasses.dataclass(frozen=True)
class SqrtGrowth:
    """η(t) = ``scale``·√(t+1): mirror descent's temperature β_t = β₀·√(t+1) (paper 001, eq. 10).

    It is defined at t = 0 too (the temperature before the first update).
    """

    scale: Any

    def __call__(self, t: int) -> Any:
        return self.scale * math.sqrt(t + 1)


@dataclasses.dataclass(frozen=True)
class Power:
    """η(t) = t^``exponent`` (SPADE's reward offset ε(t) = t^(−1/4), paper 002, Theorem 5)."""

    exponent: float

    def __call__(self, t: int) -> Any:
        return t**self.exponent


@dataclasses.dataclass(frozen=True)
class BudgetStep:
    """η(t) = ``scale``/√K for every t ≤ K = ``budget``: the constant step a bound after K steps
    is tuned for (the subgradient method's η/√K, paper 003)."""

    scale: Any
    budget: int

    def __call__(self, t: int) -> Any:
        return self.scale / math.sqrt(self.budget)


# -- the algorithm contract -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Algorithm(Component):
    """A training algorithm: ``init(problem) -> state``, ``update(state, batch, problem) -> state``.

    The default iterate is ``(state.w, state.b)`` and the model is that iterate (after
    the parts); an algorithm with another iterate (mirror descent's θ, SLND's W) says
    so in :meth:`iterate`, :meth:`with_iterate` and :meth:`linear`, and one whose model is
    not its iterate (STAMP's stage average, the subgradient method's best iterate) in
    :meth:`output`.
    """

    kind: ClassVar[str] = "algorithm"
    #: The measure family this algorithm optimises ("concave", "pseudo-linear", "any").
    family: ClassVar[str] = "any"
    #: Whether the non-decomposable reward must be bounded above (hinge, logistic, exp).
    needs_reward: ClassVar[bool] = True
    #: Fraction of the training data held out to tune the decision threshold (plug-in).
    holdout: ClassVar[float] = 0.0
    #: Trains the C one-vs-rest classes of a multiclass problem at once.
    multiclass: ClassVar[bool] = False
    #: Trains two-class problems too (a multiclass-only algorithm says False).
    binary: ClassVar[bool] = True
    #: Parameters chosen on held-out data when the user does not give them.
    tunables: ClassVar[tuple[Tunable, ...]] = ()
    #: ``update`` trains ``problem.n_models`` models at once (see the module docstring).
    stackable: ClassVar[bool] = False
    #: Each pass is one step on the whole data (the batches only accumulate it), so the
    #: default batch is the whole data: one update call a pass.
    full_batch: ClassVar[bool] = False
    #: ``update`` only adds sums at the iterate (loss, gradient) into the state and
    #: ``end_epoch`` makes the step: the sums of several shards add up to those of the
    #: whole data (exact rounds on a Dask cluster, :mod:`calopt.training.distributed`).
    additive: ClassVar[bool] = False
    #: ``update`` takes a fourth argument, ``t`` (≥ 1): the number of this update in the run,
    #: counted by the loop (:class:`~calopt.training.loop.TrainerState`), at which the
    #: algorithm evaluates its :class:`Schedule` objects; it keeps no step counter itself.
    scheduled: ClassVar[bool] = False
    #: A column with no entry in the training rows keeps weight 0 from the start and nothing
    #: else the algorithm computes depends on it: trained on the present columns only
    #: (:mod:`calopt.training.columns`), it gives the full width's model up to the rounding of
    #: sums over the features. False (the default, and mirror descent's 2d + 2 predictors, SLND's
    #: d-sized sample): it trains at the full width.
    absent_columns_inert: ClassVar[bool] = False
    #: The algorithm sees the features only through the scores Xw and inner products of vectors
    #: in the span of the training rows (an L2 penalty, no per-coordinate step or projection),
    #: so wide data can be trained in that span (:mod:`calopt.training.rowspace`): the same models
    #: up to rounding and a convergence test on other coordinates.
    rotation_invariant: ClassVar[bool] = False
    #: ``update`` reads a batch's rows only through the products ``X @ w`` and ``X.T @ c`` (no
    #: entry, sum or slice of X itself): a stream may serve them as stored with the scale folded
    #: into the products (:class:`~calopt.io.stream.FoldedRows`, float32 rows of a memory-mapped
    #: ``X.npy``), instead of a float64 copy of every row divided by the scale.
    products_only: ClassVar[bool] = False

    @abc.abstractmethod
    def init(self, problem: Problem) -> NamedTuple:
        """The state before the first update."""

    @abc.abstractmethod
    def update(self, state: NamedTuple, batch: Batch, problem: Problem) -> NamedTuple:
        """One step on the mini-batch (labels in {−1, +1}, optional sample weights).

        A ``scheduled`` algorithm's is ``update(state, batch, problem, t)``, t the loop's count
        of the updates so far, this one included.
        """

    def parts(self) -> tuple[Part, ...]:
        """The shared parts the loop applies after each update, in order (none by default)."""
        return ()

    def stacked(self, settings: dict[str, Array]) -> Algorithm:
        """A copy whose parameters ``settings`` hold one value per stacked model ((M,) arrays on
        the problem's device; radius inf for "no ball"). The values were checked one by one;
        the copy is for a stacked run only (its ``spec`` means nothing)."""
        copy = dataclasses.replace(self)
        for name, values in settings.items():
            object.__setattr__(copy, name, values)
        return copy

    def iterate(self, state: NamedTuple) -> Params:
        """The iterate the parts act on."""
        return state.w, state.b

    def output(self, state: NamedTuple) -> Params:
        """The model this state stands for, before the parts' outputs (the iterate by default)."""
        return self.iterate(state)

    def with_iterate(self, state: NamedTuple, params: Params) -> NamedTuple:
        """``state`` with its iterate replaced (after a projection)."""
        w, b = params
        return state._replace(w=w, b=b)

    def linear(self, params: Params) -> tuple[Array, Array]:
        """The linear model ``(w, b)`` of an iterate; (coef (d, C), intercepts (C,)) one-vs-rest."""
        return params

    def prepare(self, problem: Problem, X: Array, y: Array, *, weight: Array | None = None,
                seed: int | None = None) -> Any:
        """The reader that serves the data to the loop: a plain :class:`~calopt.io.batches.ArrayReader`.

        An algorithm that transforms the data once before training overrides it (SLND
        precomputes its preconditioned rows and serves balanced one-vs-rest batches).
        ``y`` is ±1 of shape (n,), or (C, n) one-vs-rest when ``problem.n_classes > 1``;
        ``weight`` the sample weights (n,), mean 1, or None.
        """
        return ArrayReader(X, y, problem.xp, problem.device, weight)

    def end_epoch(self, state: NamedTuple, data: Batch, problem: Problem) -> NamedTuple:
        """Called after each pass with the whole training data (batch algorithms use it)."""
        return state

    def converged(self, state: NamedTuple) -> bool:
        """Whether the algorithm has met its own stopping rule (checked once per epoch)."""
        return False

    def describe_state(self, state: NamedTuple) -> dict[str, Array]:
        """Named scalars to record in the history each epoch (dual variables, level)."""
        return {}

    def train_top1(self, state: NamedTuple) -> Array | None:
        """The training rows' top-1 accuracy of :meth:`output`'s model when the passes already
        computed it (a multiclass history row then needs no pass of its own); None: not known."""
        return None

    def check_problem(self, problem: Problem) -> None:
        """Refuse a measure of the wrong family, a loss unusable as a reward, two classes to a
        multiclass-only algorithm."""
        if not self.binary and problem.n_classes < 3:
            raise ParameterError(f"algorithm {self.name!r} trains three or more classes, not two")
        if self.family not in ("any", problem.measure.family):
            raise ParameterError(
                f"algorithm {self.name!r} optimises {self.family} measures; "
                f"{problem.measure.name!r} is {problem.measure.family}"
            )
        if self.needs_reward and not problem.loss.reward:
            raise ParameterError(
                f"algorithm {self.name!r} needs a reward-capable loss (non-negative and "
                f"non-increasing: hinge, logistic, exponential); {problem.loss.name!r} is not"
            )


# -- the mini-batch math ---------------------------------------------------------------------
def step_size(scale: float, t: int) -> float:
    """``scale / sqrt(t)`` for the t-th update (t ≥ 1): the papers' decay, ``InverseSqrt(scale)(t)``."""
    return InverseSqrt(scale)(t)


def reward_terms(
    w: Array, b: Array, X: Array, y: Array, loss: Loss, *, xp: Any, value: bool = True,
    weight: Array | None = None,
) -> tuple[Array | None, Array]:
    """Rewards ``r = 1 − F(y·s)`` (None unless ``value``) and ``dr/ds`` for the batch, ``s = X @ w + b``,
    each times the row's sample ``weight`` when given."""
    scores = X @ w + b
    y = column(y, scores)
    margins = y * scores
    reward = loss.reward_value(margins, xp=xp) if value else None
    dr_ds = loss.reward_derivative(margins, xp=xp) * y
    if weight is not None:
        reward = None if reward is None else reward * weight
        dr_ds = dr_ds * weight
    return reward, dr_ds


def weighted_reward_gradient(
    X: Array, y: Array, dr_ds: Array, weight_pos: Array, weight_neg: Array, p: float, *, xp: Any,
    positive: Array | None = None, scale: float = 1.0, ones: Array | None = None,
) -> tuple[Array, Array]:
    """``scale`` times the batch mean of ∇_(w,b) [weight_pos·r⁺ + weight_neg·r⁻].

    ``r⁺ = r·1[y=1]/p`` and ``r⁻ = r·1[y=−1]/(1−p)``; the weights are 0-d arrays
    (the dual variables of SPADE, the valuation weights of STAMP). ``positive`` is
    ``y > 0`` (shaped like ``dr_ds``, :func:`column`) and ``ones`` is ``y·y`` when the
    caller has them already. ``scale`` (a step size) and the 1/batch of the mean are
    folded into the per-class weights, so the d-vector is never scaled (this runs every
    batch); the intercept's sum is a dot product with ones, a fraction of the cost of
    ``xp.sum`` on a small batch.
    """
    batch = y.shape[0]
    positive = column(y, dr_ds) > 0 if positive is None else positive
    ones = y * y if ones is None else ones  # y ∈ {−1, +1}
    coef = xp.where(
        positive, weight_pos * (scale / (p * batch)), weight_neg * (scale / ((1 - p) * batch))
    ) * dr_ds
    return X.T @ coef, ones @ coef

"""Training algorithms as small state machines, and the mini-batch math they share.

An :class:`Algorithm` has an ``init`` that builds an explicit state (a NamedTuple of
arrays and plain numbers, so it can be checkpointed) and an ``update`` that takes one
mini-batch and returns the next state. It never loops over the data and never
mutates its inputs: the one loop lives in :mod:`calopt.training.loop`.

The model is linear with an intercept, ``s = X @ w + b``. Rewards come from a
reward-capable loss, ``r = 1 − F(y·s)`` (spec, "Losses and rewards"); with the
unbiased one-point forms ``r⁺ = r·1[y=1]/p`` and ``r⁻ = r·1[y=−1]/(1−p)``, a
mini-batch replaces each one-point term by its mean over the batch, which with batch
size 1 is the paper's pointwise update exactly.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar, NamedTuple

from calopt.components import Component
from calopt.errors import ParameterError
from calopt.io.batches import ArrayReader
from calopt.losses import Loss
from calopt.measures import Measure

__all__ = [
    "Algorithm",
    "Problem",
    "Tunable",
    "project_ball",
    "reward_terms",
    "weighted_reward_gradient",
]

Array = Any


class Problem(NamedTuple):
    """What an algorithm knows about the training problem (fixed during training)."""

    xp: Any
    dtype: Any
    device: Any
    n_samples: int
    n_features: int
    #: Fraction of positives in the training data.
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

    def zeros(self, *shape: int) -> Array:
        return self.xp.zeros(shape, dtype=self.dtype, device=self.device)

    def scalar(self, value: float) -> Array:
        return self.xp.asarray(value, dtype=self.dtype, device=self.device)


@dataclasses.dataclass(frozen=True)
class Tunable:
    """A parameter the pipeline chooses on held-out data when the user leaves it unset (None).

    ``name`` is the algorithm's dataclass field and ``candidates`` the values tried
    (:mod:`calopt.training.selection`).
    """

    name: str
    candidates: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class Algorithm(Component):
    """A training algorithm: ``init(problem) -> state``, ``update(state, X, y, problem) -> state``."""

    kind: ClassVar[str] = "algorithm"
    #: The measure family this algorithm optimises ("concave", "pseudo-linear", "any").
    family: ClassVar[str] = "any"
    #: Whether the non-decomposable reward must be bounded above (hinge, logistic, exp).
    needs_reward: ClassVar[bool] = True
    #: Fraction of the training data held out to tune the decision threshold (plug-in).
    holdout: ClassVar[float] = 0.0
    #: Trains the C one-vs-rest classes of a multiclass problem at once (calopt.fit_multiclass).
    multiclass: ClassVar[bool] = False
    #: Parameters chosen on held-out data when left unset (each a field whose default is None).
    tunables: ClassVar[tuple[Tunable, ...]] = ()

    @abc.abstractmethod
    def init(self, problem: Problem) -> NamedTuple:
        raise NotImplementedError

    @abc.abstractmethod
    def update(self, state: NamedTuple, X: Array, y: Array, problem: Problem) -> NamedTuple:
        """One step on the mini-batch (X, y), labels in {−1, +1}."""
        raise NotImplementedError

    def prepare(self, problem: Problem, X: Array, y: Array, *, seed: int | None = None) -> Any:
        """The reader that serves (X, y) to the loop: a plain :class:`~calopt.io.batches.ArrayReader`.

        An algorithm that transforms the data once before training overrides it (SLND
        precomputes its preconditioned rows and serves balanced one-vs-rest batches).
        ``y`` is ±1 of shape (n,), or (C, n) one-vs-rest when ``problem.n_classes > 1``.
        """
        return ArrayReader(X, y, problem.xp, problem.device)

    def end_epoch(self, state: NamedTuple, X: Array, y: Array, problem: Problem) -> NamedTuple:
        """Called after each pass with the whole training data (batch algorithms use it)."""
        return state

    def converged(self, state: NamedTuple) -> bool:
        """Whether the algorithm has met its own stopping rule (checked once per epoch)."""
        return False

    def weights(self, state: NamedTuple) -> tuple[Array, Array]:
        """The model ``(w, b)`` this state stands for (e.g. the averaged iterate)."""
        return state.w, state.b

    def describe_state(self, state: NamedTuple) -> dict[str, Array]:
        """Named scalars to record in the history each epoch (dual variables, level)."""
        return {}

    def check_problem(self, problem: Problem) -> None:
        """Refuse a measure of the wrong family or a loss unusable as a reward."""
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


def step_size(scale: float, t: int) -> float:
    """``scale / sqrt(t)`` for the t-th update (t ≥ 1): the papers' decay."""
    return scale / math.sqrt(t)


def reward_terms(
    w: Array, b: Array, X: Array, y: Array, loss: Loss, *, xp: Any, value: bool = True
) -> tuple[Array | None, Array]:
    """Rewards ``r = 1 − F(y·s)`` (None unless ``value``) and ``dr/ds`` for the batch, ``s = X @ w + b``."""
    scores = X @ w + b
    margins = y * scores
    reward = loss.reward_value(margins, xp=xp) if value else None
    return reward, loss.reward_derivative(margins, xp=xp) * y


def weighted_reward_gradient(
    X: Array, y: Array, dr_ds: Array, weight_pos: Array, weight_neg: Array, p: float, *, xp: Any,
    positive: Array | None = None, scale: float = 1.0, ones: Array | None = None,
) -> tuple[Array, Array]:
    """``scale`` times the batch mean of ∇_(w,b) [weight_pos·r⁺ + weight_neg·r⁻].

    ``r⁺ = r·1[y=1]/p`` and ``r⁻ = r·1[y=−1]/(1−p)``; the weights are 0-d arrays
    (the dual variables of SPADE, the valuation weights of STAMP). ``positive`` is
    ``y > 0`` and ``ones`` is ``y·y`` when the caller has them already. ``scale`` (a
    step size) and the 1/batch of the mean are folded into the per-class weights, so
    the d-vector is never scaled (this runs every batch); the intercept's sum is a dot
    product with ones, a fraction of the cost of ``xp.sum`` on a small batch.
    """
    batch = y.shape[0]
    positive = y > 0 if positive is None else positive
    ones = y * y if ones is None else ones  # y ∈ {−1, +1}
    coef = xp.where(
        positive, weight_pos * (scale / (p * batch)), weight_neg * (scale / ((1 - p) * batch))
    ) * dr_ds
    return X.T @ coef, coef @ ones


def project_ball(w: Array, b: Array, radius: float | None, *, xp: Any) -> tuple[Array, Array]:
    """Project ``(w, b)`` onto the Euclidean ball of ``radius`` (a rescaling; None: no ball)."""
    if radius is None:
        return w, b
    norm = xp.sqrt(xp.sum(w * w) + b * b)
    factor = xp.minimum(xp.ones_like(norm), radius / xp.maximum(norm, xp.full_like(norm, 1e-30)))
    return w * factor, b * factor

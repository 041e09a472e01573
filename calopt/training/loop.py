"""The one training loop.

Data reach the loop through a reader (:mod:`calopt.io.batches`): ``epoch(batch_size,
rng)`` yields the shuffled mini-batches of one pass and ``full()`` returns all the data.
The loop owns epochs, shuffling, timing, history, callbacks, checkpoints and stopping,
the step counter (the t of the algorithms' step schedules) and the parts algorithms
share (iterate averaging, projection onto a ball): a
:class:`Trainer` composes an algorithm with its :meth:`~calopt.algorithms.Algorithm.parts`.
Algorithms only ``update`` on one mini-batch (see :mod:`calopt.algorithms`).
Host/device synchronisation happens once per epoch, in the finiteness check and the
record step.

An ``interrupt`` flag is checked after every batch: when it is set the loop stops with
status INTERRUPTED and returns its position (epoch, batch, the generator's state at the
start of that epoch), which :mod:`calopt.training.checkpoint` saves;
``run(..., resume=result)`` regenerates the epoch's permutation, skips the batches done
and ends exactly where an uninterrupted run would.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from calopt.algorithms import Algorithm, Chain, Problem
from calopt.io.batches import Batch, BatchReader

__all__ = ["CALLBACK", "CONVERGED", "INTERRUPTED", "MAXITER", "NONFINITE", "EpochRecord", "LoopResult", "Rounds",
           "Trainer", "TrainerState", "run"]

Array = Any

#: Status codes of a finished loop (SciPy style); INTERRUPTED: stopped mid-run, resumable.
CONVERGED, MAXITER, CALLBACK, INTERRUPTED, NONFINITE = 0, 1, 2, 3, -1


class TrainerState(NamedTuple):
    """The state of an algorithm and of each of its shared parts, and the run's step counter."""

    algorithm: Any
    parts: tuple
    #: Updates made so far: the one step counter of the run (the t of a ``scheduled``
    #: algorithm's schedules, :mod:`calopt.algorithms`).
    step: int = 0


@dataclass(frozen=True)
class Trainer:
    """An algorithm composed with its shared parts: what the loop runs.

    After each ``update`` of the algorithm, each part transforms the iterate in turn
    (a projection returns a new iterate, an average keeps its running mean: one
    :class:`~calopt.algorithms.Chain`); the model is the algorithm's linear model of the
    last part's output. The trainer counts the updates and hands the count to a
    ``scheduled`` algorithm.
    """

    algorithm: Algorithm
    chain: Chain = field(init=False, repr=False)
    #: Whether ``update`` takes the step count (``scheduled``; duck-typed runners, the settings
    #: selection's, do not say).
    scheduled: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "chain", Chain(tuple(self.algorithm.parts())))  # built once, used every batch
        object.__setattr__(self, "scheduled", bool(getattr(self.algorithm, "scheduled", False)))

    def init(self, problem: Problem) -> TrainerState:
        state = self.algorithm.init(problem)
        return TrainerState(state, self.chain.init(self.algorithm.iterate(state), problem), 0)

    def update(self, state: TrainerState, batch: Batch, problem: Problem) -> TrainerState:
        algorithm, step = self.algorithm, state.step + 1
        if self.scheduled:
            inner = algorithm.update(state.algorithm, batch, problem, step)
        else:
            inner = algorithm.update(state.algorithm, batch, problem)
        if not self.chain.parts:
            return TrainerState(inner, (), step)
        params = algorithm.iterate(inner)
        changed, part_states = self.chain.update(algorithm.iterate(state.algorithm), params, state.parts, problem)
        if changed is not params:
            inner = algorithm.with_iterate(inner, changed)
        return TrainerState(inner, part_states, step)

    def end_epoch(self, state: TrainerState, data: Batch, problem: Problem) -> TrainerState:
        return state._replace(algorithm=self.algorithm.end_epoch(state.algorithm, data, problem))

    def weights(self, state: TrainerState) -> tuple[Any, Any]:
        """The model ``(w, b)`` of a state: the last part's output (the average), as linear weights."""
        return self.algorithm.linear(self.chain.output(self.algorithm.output(state.algorithm), state.parts))

    def converged(self, state: TrainerState) -> bool:
        return self.algorithm.converged(state.algorithm)

    def describe_state(self, state: TrainerState) -> dict[str, Any]:
        return self.algorithm.describe_state(state.algorithm)

    def history_numbers(self, state: TrainerState) -> dict[str, float]:
        """The numbers ``describe_state`` gives for a history row: its 0-d values (the per-model
        arrays of stacked runs are not history numbers)."""
        return {k: float(v) for k, v in self.describe_state(state).items() if getattr(v, "ndim", 0) == 0}


class EpochRecord(NamedTuple):
    """What the loop hands a callback after each epoch."""

    epoch: int
    seconds: float  #: cumulative training time (without the record step)
    state: Any
    weights: tuple[Array, Array]
    #: Epochs of the whole training run (one-vs-rest one class at a time: of all the classes,
    #: with ``epoch`` counted across them), for progress displays.
    total_epochs: int | None = None


@dataclass
class LoopResult:
    """Where the loop stopped; with status INTERRUPTED, enough to resume it exactly."""

    state: Any
    epochs: int  #: epochs completed
    seconds: float
    status: int
    message: str
    history: list[dict[str, float]] = field(default_factory=list)
    #: Batches done in the unfinished epoch ``epochs + 1`` (0 at an epoch boundary).
    batch: int = 0
    #: ``bit_generator.state`` of the shuffling generator at the start of that epoch.
    rng_state: dict | None = None
    #: The state at the start of that epoch (mid-epoch only): the fallback of a divergence.
    epoch_start_state: Any = None
    #: The model ``(w, b)`` of ``state`` (backend arrays).
    weights: tuple[Array, Array] | None = None


class Rounds(Protocol):
    """The combine hook of a distributed run: each epoch of the loop is one round.

    ``rounds(state)`` hands the state to the workers, runs their passes from it and combines
    what they return (exact rounds: the sum of their changes; local rounds: the average of
    their states), the end-of-pass step included; ``position()`` is what a checkpoint saves of
    the workers' shuffling generators (None when they have none).
    """

    def __call__(self, state: TrainerState) -> TrainerState: ...

    def position(self) -> dict | None: ...


# Overflow and NaN are the loop's to catch (status NONFINITE, the last finite state kept),
# not NumPy warnings to print mid-run.
@np.errstate(over="ignore", invalid="ignore", divide="ignore")
def run(
    algorithm: Algorithm,
    problem: Problem,
    reader: BatchReader | None,
    *,
    epochs: int,
    seed: int | None = 0,
    state: Any = None,
    start_epoch: int = 0,
    record: Callable[[EpochRecord], dict[str, float]] | None = None,
    callback: Callable[[EpochRecord], None] | None = None,
    rng_state: dict | None = None,
    resume: LoopResult | None = None,
    interrupt: Callable[[], bool] | None = None,
    checkpoint: Callable[[LoopResult], None] | None = None,
    checkpoint_every: int = 0,
    stop_on_nonfinite: bool = True,
    rounds: Rounds | None = None,
    unit: str = "epoch",
) -> LoopResult:
    """Run ``algorithm`` (composed with its parts, :class:`Trainer`) for ``epochs`` passes over ``reader``.

    States are :class:`TrainerState`; the result's ``weights`` are the model of its state.
    ``record(epoch_record)`` returns the numbers to store in the history (it runs
    outside the timed part); ``callback(epoch_record)`` may raise ``StopIteration``
    to stop cleanly. A non-finite model stops the loop with status NONFINITE and
    the last finite state. ``state``/``start_epoch``/``rng_state`` start from an
    epoch boundary; ``resume`` (an INTERRUPTED result, or a checkpoint's) continues
    mid-epoch with its history and time. ``interrupt()`` is checked after each batch;
    when true the loop stops with status INTERRUPTED. ``checkpoint(position)`` is
    called every ``checkpoint_every`` completed epochs while the loop goes on.
    ``stop_on_nonfinite=False`` skips the finiteness check (stacked models: one diverging
    candidate must not stop the others; the caller judges each).

    ``rounds`` (:class:`Rounds`, a Dask run's combine hook: :mod:`calopt.training.distributed`)
    makes each epoch one round, ``rounds(state)``, in place of the reader's mini-batches
    (``reader`` None); ``interrupt()`` is then checked after each round, and positions save
    ``rounds.position()``. ``unit`` names the epochs in the messages (``"round"``).
    """
    loop = _Loop(Trainer(algorithm), problem, reader, epochs, record, callback, interrupt, checkpoint,
                 checkpoint_every, stop_on_nonfinite, rounds, unit)
    rng = np.random.default_rng(seed)
    skip, epoch_start_state = 0, None
    if resume is not None:
        state, start_epoch, rng_state = resume.state, resume.epochs, resume.rng_state
        loop.history, loop.seconds, skip = list(resume.history), resume.seconds, resume.batch
        epoch_start_state = resume.epoch_start_state if resume.batch else None
    if rng_state is not None:
        rng.bit_generator.state = rng_state
    if state is None:
        state = loop.trainer.init(problem)
    return loop.run(state, start_epoch, rng, skip, epoch_start_state)


class _Loop:
    """One run of :func:`run`: its epochs, each a pass over the reader's batches or one round."""

    def __init__(self, trainer: Trainer, problem: Problem, reader: BatchReader | None, epochs: int,
                 record: Any, callback: Any, interrupt: Any, checkpoint: Any, checkpoint_every: int,
                 stop_on_nonfinite: bool, rounds: Rounds | None, unit: str):
        self.trainer, self.problem, self.reader, self.epochs = trainer, problem, reader, epochs
        self.record, self.callback, self.interrupt = record, callback, interrupt
        self.checkpoint, self.checkpoint_every, self.stop_on_nonfinite = checkpoint, checkpoint_every, stop_on_nonfinite
        self.rounds, self.unit = rounds, unit
        self.history: list[dict[str, float]] = []
        self.seconds = 0.0

    def _pass(self, state: Any, epoch: int, rng: Any, skip: int, started: float,
              previous: Any) -> tuple[Any, LoopResult | None]:
        """One epoch's updates from batch ``skip`` on: the state after them, or an INTERRUPTED result."""
        if self.rounds is not None:
            return self.rounds(state), None
        trainer, problem = self.trainer, self.problem
        epoch_rng_state = rng.bit_generator.state
        done = skip
        for batch in itertools.islice(self.reader.epoch(problem.batch_size, rng), skip, None):
            state = trainer.update(state, batch, problem)
            done += 1
            if self.interrupt is not None and self.interrupt():
                self.seconds += time.perf_counter() - started
                return state, LoopResult(state, epoch, self.seconds, INTERRUPTED,
                                         f"interrupted in epoch {epoch + 1} after batch {done}", self.history, done,
                                         epoch_rng_state, previous, trainer.weights(state))
        return trainer.end_epoch(state, self.reader.full(), problem), None

    def _position(self, state: Any, epoch: int, rng: Any, message: str) -> LoopResult:
        """The loop at the end of ``epoch``, resumable (a checkpoint's, or an interrupted round's)."""
        saved = self.rounds.position() if self.rounds is not None else rng.bit_generator.state
        return LoopResult(state, epoch, self.seconds, INTERRUPTED, message, list(self.history), 0, saved)

    def run(self, state: Any, epoch: int, rng: Any, skip: int, epoch_start_state: Any) -> LoopResult:
        trainer, xp, unit, epochs = self.trainer, self.problem.xp, self.unit, self.epochs
        status, message = MAXITER, f"stopped after {epochs} {unit}s"
        while epoch < epochs:
            started = time.perf_counter()
            previous = state if epoch_start_state is None else epoch_start_state
            epoch_start_state = None
            state, stopped = self._pass(state, epoch, rng, skip, started, previous)
            if stopped is not None:
                return stopped
            skip = 0
            w, b = trainer.weights(state)
            finite = not self.stop_on_nonfinite or bool(xp.all(xp.isfinite(w)) & xp.all(xp.isfinite(b)))  # one sync
            self.seconds += time.perf_counter() - started
            epoch += 1
            if not finite:
                state, epoch = previous, epoch - 1
                status, message = NONFINITE, f"diverged in {unit} {epoch + 1}: non-finite weights; kept {unit} {epoch}"
                break
            info = EpochRecord(epoch, self.seconds, state, (w, b), epochs)
            row: dict[str, float] = {"epoch": epoch, "seconds": self.seconds}
            if self.record is not None:
                row.update(self.record(info))
            row.update(trainer.history_numbers(state))
            self.history.append(row)
            if self.callback is not None:
                try:
                    self.callback(info)
                except StopIteration:
                    status, message = CALLBACK, f"stopped by the callback after {unit} {epoch}"
                    break
            if trainer.converged(state):
                status, message = CONVERGED, f"converged after {epoch} {unit}s"
                break
            if self.rounds is not None and self.interrupt is not None and self.interrupt() and epoch < epochs:
                return self._position(state, epoch, rng, f"interrupted after {unit} {epoch}")
            if self.checkpoint is not None and self.checkpoint_every and epoch % self.checkpoint_every == 0 \
                    and epoch < epochs:
                self.checkpoint(self._position(state, epoch, rng, f"checkpoint after {unit} {epoch}"))
        return LoopResult(state, epoch, self.seconds, status, message, self.history, weights=trainer.weights(state))

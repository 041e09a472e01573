"""The fit plan: what a training run is, resolved once from the user's options, before any data is read.

Every way of training (arrays binary, one-vs-rest or under rate constraints, a stream, a
Dask cluster, ``partial_fit`` batches, aggregation) starts from a :class:`FitPlan`:

- :class:`Components`: the measure (constrained when rate constraints are given) and the
  algorithm(s) with their losses, each resolved from its spec once, by the rule of the
  task (:meth:`Components.resolve`, the only place the registry's defaults are applied);
- :class:`Budget`: the passes and the mini-batch size, and the selection's patience and cap;
- :class:`RunControl`: the callback, the checkpoints, the checkpoint to resume and the interrupt
  flag, handed to the loop as they are;
- the seed, the scaling, whether the threshold is tuned, the selection rule asked for.

A source hands the plan its data's shape: :meth:`FitPlan.problem` is the one place a
:class:`~calopt.algorithms.Problem` is built, and :func:`build_model` the one place a
fitted model is (binary or one-vs-rest, with its :class:`~calopt.models.report.FitReport`).
Options travel inside as these small frozen objects; flat keywords exist only at the public
surface (:func:`calopt.fit` and friends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calopt import registry
from calopt.algorithms import Algorithm, Problem
from calopt.backends import Backend
from calopt.constraints import constrain, parse_constraints
from calopt.errors import ParameterError
from calopt.losses import Loss
from calopt.measures import Measure
from calopt.models.linear import LinearModel, Model, MulticlassModel
from calopt.models.report import FitReport
from calopt.training.checkpoint import Checkpoint, checked_resume
from calopt.training.loop import EpochRecord
from calopt.training.selection import MAX_EPOCHS, PATIENCE, Rule, given_parameters, parse_rule
from calopt.version import __version__

__all__ = ["DEFAULT_EPOCHS", "Budget", "Components", "FitPlan", "RunControl", "build_model", "check_count",
           "default_batch_size"]

#: Passes when they are not chosen on held-out data (``select="none"``) and not given.
DEFAULT_EPOCHS = 10


def check_count(name: str, value: Any) -> None:
    """A ParameterError unless ``value`` is None or a whole number ≥ 1."""
    if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ParameterError(f"{name} must be a whole number ≥ 1, got {value!r}")


#: The largest seed: every generator a fit seeds (NumPy's, scikit-learn's fold splitters) takes it.
MAX_SEED = 2**32 - 1


def check_seed(seed: Any) -> int:
    """``seed`` as an int in 0..:data:`MAX_SEED`; anything else is a one-line ParameterError."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= MAX_SEED:
        raise ParameterError(f"seed must be a whole number from 0 to 2**32 - 1, got {seed!r}")
    return int(seed)


def default_batch_size(n_samples: int, algorithms: Sequence[Algorithm] = ()) -> int:
    """Mini-batch size from the data size: n/100, between 32 and 1024; the whole data when
    every algorithm trained is a full-batch one (its batches only accumulate a pass)."""
    if algorithms and all(algorithm.full_batch for algorithm in algorithms):
        return max(1, int(n_samples))
    return int(min(1024, max(32, n_samples // 100)))


@dataclass(frozen=True)
class Budget:
    """The passes and the mini-batch size a run may use.

    ``epochs`` None: chosen by the settings selection (at most ``max_epochs``, stopping
    after ``patience`` passes without improvement), else :data:`DEFAULT_EPOCHS`;
    ``batch_size`` None: :func:`default_batch_size`. Each is checked when built.
    """

    epochs: int | None = None
    max_epochs: int = MAX_EPOCHS
    patience: int = PATIENCE
    batch_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "patience", "max_epochs"):
            check_count(name, getattr(self, name))

    def passes(self, default: int = DEFAULT_EPOCHS) -> int:
        """The passes to make when no selection chooses them: ``epochs``, else ``default``."""
        return default if self.epochs is None else self.epochs

    def batch(self, n_samples: int, algorithms: Sequence[Algorithm] = ()) -> int:
        """The mini-batch size: the one given, else :func:`default_batch_size`."""
        return self.batch_size or default_batch_size(n_samples, algorithms)


@dataclass(frozen=True)
class RunControl:
    """How the caller follows and steers the run: the loop's callback, checkpoints and interrupt flag.

    ``resume`` is a loaded :class:`~calopt.training.checkpoint.Checkpoint` (:meth:`checked`
    loads a path and checks the checkpoint options).
    """

    callback: Callable[[EpochRecord], None] | None = None
    checkpoint: Any = None
    checkpoint_every: int | None = None
    resume: Checkpoint | None = None
    interrupt: Callable[[], bool] | None = None

    @classmethod
    def checked(cls, callback: Any = None, checkpoint: Any = None, checkpoint_every: Any = None,
                resume: Any = None, interrupt: Any = None) -> RunControl:
        """The run control of a fit's options, checked (a bad ``checkpoint_every`` is an error)."""
        return cls(callback, checkpoint, checkpoint_every, checked_resume(checkpoint, checkpoint_every, resume),
                   interrupt)

    def keywords(self) -> dict[str, Any]:
        """The keywords of :func:`calopt.training.pipeline.train` (and the loop's resumable run)."""
        return dict(callback=self.callback, checkpoint=self.checkpoint, checkpoint_every=self.checkpoint_every,
                    resume=self.resume, interrupt=self.interrupt)


@dataclass(frozen=True)
class Components:
    """The measure and the (algorithm, loss) pairs to train, resolved from their specs.

    ``candidates`` holds one pair, or those ``algorithm="auto"`` compares on the same folds
    (the measure's own solver first). ``fixed`` names the parameters the user gave (not searched).
    """

    measure: Measure
    candidates: tuple[tuple[Algorithm, Loss], ...]
    fixed: frozenset[str] = field(default_factory=frozenset)

    @property
    def algorithm(self) -> Algorithm:
        return self.candidates[0][0]

    @property
    def loss(self) -> Loss:
        return self.candidates[0][1]

    @property
    def algorithms(self) -> list[Algorithm]:
        return [algorithm for algorithm, _ in self.candidates]

    @classmethod
    def resolve(cls, measure: Any, algorithm: Any = None, loss: Any = None, *, task: str = "binary",
                constraints: Any = None, **params: Any) -> Components:
        """The components of a run: ``measure`` (with ``constraints``), and the algorithm given or the
        one a plugin registered as the default for ``task`` (``binary``, ``multiclass``, ``direct``:
        the measure's own solver, ``aggregate``), with the loss given or the algorithm's default.

        ``algorithm="auto"`` (binary) compares the measure's own solver with the binary default;
        ``params`` are given to the algorithm (aggregation's ``radius``).
        """
        measure = registry.get_measure(measure)
        parsed = parse_constraints(constraints)
        if parsed:
            measure = constrain(measure, parsed)
        if task == "binary" and isinstance(algorithm, str) and algorithm.strip().lower() == "auto":
            chosen = [registry.get_algorithm(name) for name in dict.fromkeys(registry.compared_algorithms(measure))]
        else:
            default = None if task == "binary" else task
            spec = algorithm or (registry.default_algorithm(measure) if default is None
                                 else registry.default_algorithm(measure, default))
            chosen = [registry.get_algorithm(spec, **params)]
        fixed = frozenset(given_parameters(algorithm)) if len(chosen) == 1 else frozenset()
        return cls(measure, tuple((a, registry.get_loss(loss or registry.default_loss(a))) for a in chosen), fixed)


@dataclass(frozen=True)
class FitPlan:
    """A training run resolved from the user's options (see the module docstring).

    ``select`` is the rule asked for (None: ``"auto"``, decided from the data). A source
    builds its :class:`~calopt.algorithms.Problem` with :meth:`problem` and its model with
    :meth:`model`.
    """

    components: Components
    budget: Budget = field(default_factory=Budget)
    run: RunControl = field(default_factory=RunControl)
    seed: int = 0
    scale: bool = True
    tune_threshold: bool = True
    select: Rule | None = None

    @classmethod
    def resolve(cls, *, measure: Any = "f1", algorithm: Any = None, loss: Any = None, task: str = "binary",
                constraints: Any = None, epochs: int | None = None, max_epochs: int = MAX_EPOCHS,
                patience: int = PATIENCE, batch_size: int | None = None, seed: int = 0, scale: bool = True,
                tune_threshold: bool = True, select: Any = "auto", callback: Any = None, checkpoint: Any = None,
                checkpoint_every: Any = None, resume: Any = None, interrupt: Any = None) -> FitPlan:
        """The plan of a fit's flat options, each checked once (a bad one is a one-line ParameterError)."""
        components = Components.resolve(measure, algorithm, loss, task=task, constraints=constraints)
        budget = Budget(epochs, max_epochs, patience, batch_size)
        rule = parse_rule(select)
        return cls(components, budget, RunControl.checked(callback, checkpoint, checkpoint_every, resume, interrupt),
                   check_seed(seed), scale, tune_threshold, rule)

    @property
    def measure(self) -> Measure:
        return self.components.measure

    def problem(self, backend: Backend | None, n_samples: int, n_features: int, positive_rate: float, *,
                batch_size: int, epochs: int | None, loss: Loss | None = None, **extra: Any) -> Problem:
        """The :class:`~calopt.algorithms.Problem` of this plan on data of this shape (the one place one
        is built). ``backend`` None: arrays-free, for Dask workers to fill in; ``extra``:
        ``n_classes``, ``max_weight``."""
        xp, dtype, device = (None, None, None) if backend is None else (backend.xp, backend.dtype, backend.device)
        return Problem(xp, dtype, device, int(n_samples), int(n_features), positive_rate, self.measure,
                       loss or self.components.loss, batch_size, epochs, **extra)

    def model(self, coef: np.ndarray, intercept: Any, classes: tuple[Any, ...], report: FitReport, *,
              algorithm: Any = None, loss: Any = None, **fields: Any) -> Model:
        """The fitted model of this plan (:func:`build_model`): its measure (the objective of a
        constrained one), and the algorithm and loss trained (default: the plan's first)."""
        measure = getattr(self.measure, "objective", self.measure)
        return build_model(coef, intercept, classes, report, measure=measure,
                           algorithm=algorithm or self.components.algorithm, loss=loss or self.components.loss,
                           **fields)


def build_model(coef: np.ndarray, intercept: Any, classes: tuple[Any, ...], report: FitReport, *, measure: Any,
                algorithm: Any, loss: Any, **fields: Any) -> Model:
    """A fitted model: a :class:`~calopt.models.linear.LinearModel` for a vector ``coef``, a
    :class:`~calopt.models.linear.MulticlassModel` for a matrix (one column a class); components
    are recorded by their specs, with this calopt's version. ``fields`` are the model's other
    fields (``scale``, ``threshold``, ``history``, ``fit_seconds``, ``status``, ``message``)."""
    specs = {name: value if isinstance(value, str) else value.spec
             for name, value in (("measure", measure), ("algorithm", algorithm), ("loss", loss))}
    kind = LinearModel if np.ndim(coef) == 1 else MulticlassModel
    return kind(coef=coef, intercept=intercept, classes=classes, fit_report=report, version=__version__,
                **specs, **fields)

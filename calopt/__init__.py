"""calopt: train linear classifiers for the performance measure you care about.

The public API. The package is split by job, in layers: the kernel at the root (the
registry, components, backends, errors) with :mod:`calopt.io` (files, labels, readers,
embedded datasets); above them :mod:`calopt.models` (fitted models and their file format),
:mod:`calopt.training` (the loop, the fit plan, checkpoints, aggregation),
:mod:`calopt.sklearn` (the scikit-learn estimator and scorers) and
:mod:`calopt.reporting` (the comparison with scikit-learn, the figures), each importing
only what stands below it (``lint-imports``, pyproject.toml). Plugin authors subclass
:class:`Measure`, :class:`Loss` and :class:`Algorithm` from here.
"""

from __future__ import annotations

from calopt import registry
from calopt.algorithms import (
    Algorithm,
    BallProjection,
    Batch,
    BudgetStep,
    Chain,
    Constant,
    InverseSqrt,
    IterateAverage,
    Power,
    Problem,
    Schedule,
    SqrtGrowth,
    Tunable,
    reward_terms,
    step_size,
    weighted_reward_gradient,
)
from calopt.backends import Backend, backend_of, device, get_backend, is_numpy, is_sparse, namespace, to_numpy
from calopt.errors import (
    BackendError,
    CaloptError,
    DataError,
    ModelFileError,
    ParameterError,
    RegistryError,
    TrainingInterrupted,
    UnknownNameError,
)
from calopt.hookspecs import hookimpl
from calopt.io import datasets
from calopt.losses import Loss
from calopt.measures import ConcaveMeasure, Measure, PseudoLinearMeasure
from calopt.models.linear import LinearModel, MulticlassModel, load_model
from calopt.models.report import FitReport
from calopt.registry import (
    get_algorithm,
    get_loss,
    get_measure,
    list_algorithms,
    list_losses,
    list_measures,
)
from calopt.training.aggregate import aggregate
from calopt.training.api import fit, fit_multiclass  # arrays, a stream of chunks or a Dask cluster
from calopt.version import __version__

__all__ = [
    "Algorithm",
    "Backend",
    "BallProjection",
    "Batch",
    "BackendError",
    "BudgetStep",
    "CaloptError",
    "Chain",
    "ConcaveMeasure",
    "Constant",
    "DataError",
    "FitReport",
    "InverseSqrt",
    "IterateAverage",
    "LinearModel",
    "Loss",
    "Measure",
    "ModelFileError",
    "MulticlassModel",
    "ParameterError",
    "Problem",
    "Power",
    "PseudoLinearMeasure",
    "RegistryError",
    "Schedule",
    "SqrtGrowth",
    "TrainingInterrupted",
    "Tunable",
    "UnknownNameError",
    "__version__",
    "aggregate",
    "backend_of",
    "datasets",
    "device",
    "fit",
    "fit_multiclass",
    "get_algorithm",
    "get_backend",
    "get_loss",
    "get_measure",
    "hookimpl",
    "is_numpy",
    "is_sparse",
    "list_algorithms",
    "list_losses",
    "list_measures",
    "load_model",
    "namespace",
    "registry",
    "reward_terms",
    "step_size",
    "to_numpy",
    "weighted_reward_gradient",
]

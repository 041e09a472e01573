"""calopt: train linear classifiers for the performance measure you care about."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from calopt import registry
from calopt.backends import Backend, backend_of, get_backend, to_numpy
from calopt.errors import (
    BackendError,
    CaloptError,
    DataError,
    ModelFileError,
    ParameterError,
    RegistryError,
    UnknownNameError,
)
from calopt.fit import fit
from calopt.hookspecs import hookimpl
from calopt.losses import Loss
from calopt.measures import ConcaveMeasure, Measure, PseudoLinearMeasure
from calopt.model import LinearModel, load_model
from calopt.multiclass import MulticlassModel, fit_multiclass

try:
    __version__ = version("calopt")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+unknown"

__all__ = [
    "Backend",
    "BackendError",
    "CaloptError",
    "ConcaveMeasure",
    "DataError",
    "LinearModel",
    "Loss",
    "Measure",
    "ModelFileError",
    "MulticlassModel",
    "ParameterError",
    "PseudoLinearMeasure",
    "RegistryError",
    "UnknownNameError",
    "__version__",
    "backend_of",
    "fit",
    "fit_multiclass",
    "get_algorithm",
    "get_backend",
    "get_loss",
    "get_measure",
    "hookimpl",
    "list_algorithms",
    "list_losses",
    "list_measures",
    "load_model",
    "to_numpy",
]


def get_measure(spec: Any, /, **params: Any) -> Measure:
    """The measure named by ``spec`` (``"fbeta:beta=2"``, ``"gmean"``); ``params`` override."""
    return registry.get("measure", spec, **params)


def get_loss(spec: Any, /, **params: Any) -> Loss:
    """The loss named by ``spec`` (``"logistic"``, ``"hinge"``); ``params`` override."""
    return registry.get("loss", spec, **params)


def get_algorithm(spec: Any, /, **params: Any) -> Any:
    """The algorithm named by ``spec`` (``"spade"``, ``"stamp"``); ``params`` override."""
    return registry.get("algorithm", spec, **params)


def list_measures() -> list[registry.Entry]:
    """The registered measures, sorted by name."""
    return registry.list_entries("measure")


def list_losses() -> list[registry.Entry]:
    """The registered losses, sorted by name."""
    return registry.list_entries("loss")


def list_algorithms() -> list[registry.Entry]:
    """The registered algorithms, sorted by name."""
    return registry.list_entries("algorithm")

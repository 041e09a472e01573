"""Shared fixtures: the backend matrix every component test runs over."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from calopt.backends import get_backend
from calopt.errors import BackendError


def _gpu_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        get_backend("cupy")
    except BackendError:
        return False
    return True


_BACKEND_PARAMS = [
    pytest.param("numpy", id="numpy"),
    pytest.param("numpy:readonly", id="numpy-readonly"),
    pytest.param("array-api-strict", id="array-api-strict"),
    pytest.param(
        "torch",
        id="torch",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("torch") is None, reason="PyTorch not installed"
        ),
    ),
    pytest.param(
        "cupy",
        id="cupy",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a CUDA GPU"),
        ],
    ),
]


class TestBackend:
    """A calopt Backend plus a way to build inputs (read-only ones for numpy:readonly)."""

    def __init__(self, name: str, dtype: str = "float64"):
        self.readonly = name.endswith(":readonly")
        self.backend = get_backend(name.split(":")[0], dtype=dtype)
        self.name = name
        self.xp = self.backend.xp
        self.dtype = self.backend.dtype

    def asarray(self, x, dtype=None):
        """``x`` (NumPy data) as an input array on this backend."""
        out = self.backend.asarray(np.asarray(x), dtype=dtype)
        if self.readonly:
            out = np.array(out, copy=True)
            out.flags.writeable = False
        return out

    def to_numpy(self, x):
        return self.backend.to_numpy(x)

    def __repr__(self) -> str:
        return f"TestBackend({self.name})"


@pytest.fixture(params=_BACKEND_PARAMS)
def backend(request) -> TestBackend:
    """Each available backend in float64: numpy, read-only numpy, array-api-strict, torch, cupy."""
    return TestBackend(request.param)


@pytest.fixture(params=["float64", "float32"])
def float_dtype(request) -> str:
    return request.param


# Hypothesis explores new examples on every run; under CI the examples are fixed so a
# run is reproducible (a failure found locally is then added as an explicit example).
try:
    import os

    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, deadline=None)
    if os.environ.get("CI"):
        settings.load_profile("ci")
except ImportError:  # hypothesis is a test extra
    pass

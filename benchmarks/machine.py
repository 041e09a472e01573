"""What the benchmarks ran on: the CPU's model name, or the GPU's for a GPU backend."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def cpu_name() -> str:
    """``<model name>, <n> cores`` from /proc/cpuinfo (the platform's processor elsewhere)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def device_name(backend: Any) -> str:
    """The GPU's name for a CuPy or CUDA-torch calopt backend, else :func:`cpu_name`."""
    if backend.name == "cupy":
        import cupy

        device = cupy.cuda.Device() if backend.device is None else backend.device
        return cupy.cuda.runtime.getDeviceProperties(device.id)["name"].decode()
    if backend.name == "torch" and backend.device is not None and str(backend.device) != "cpu":
        import torch

        return torch.cuda.get_device_name(backend.device)
    return cpu_name()


def describe() -> str:
    """The CPU, the operating system and Python, for a report's header."""
    return f"{cpu_name()}, {platform.system()}, Python {platform.python_version()}"

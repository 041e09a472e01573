"""calopt's version, read once from the installed package metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("calopt")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+unknown"

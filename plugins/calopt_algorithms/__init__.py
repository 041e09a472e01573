"""calopt's built-in algorithms, registered through the ``calopt`` entry-point group."""

from __future__ import annotations

from calopt.hookspecs import hookimpl


@hookimpl
def register_algorithms(register):
    """Register the built-in algorithms."""

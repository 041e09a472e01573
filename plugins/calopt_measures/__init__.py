"""calopt's built-in measures, registered through the ``calopt`` entry-point group."""

from __future__ import annotations

from calopt.hookspecs import hookimpl


@hookimpl
def register_measures(register):
    """Register the built-in measures."""

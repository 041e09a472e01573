"""calopt's built-in losses, registered through the ``calopt`` entry-point group."""

from __future__ import annotations

from calopt.hookspecs import hookimpl


@hookimpl
def register_losses(register):
    """Register the built-in losses."""

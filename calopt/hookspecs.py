"""The hooks a calopt plugin implements (pluggy project name ``"calopt"``).

A plugin is a module (or object) listed in the ``calopt`` entry-point group of its
package metadata::

    [project.entry-points.calopt]
    my_measures = "my_package.measures"

and implements any of the hooks below with :data:`hookimpl`. Each hook receives a
``register`` callback; the core owns names, aliases, duplicate detection and
parameter parsing, so a plugin only says what it provides. calopt's own losses,
measures and algorithms are registered through exactly these hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pluggy

__all__ = ["Register", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("calopt")
hookimpl = pluggy.HookimplMarker("calopt")


class Register(Protocol):
    """The callback handed to the registration hooks."""

    def __call__(self, component: type, *, aliases: Sequence[str] = ()) -> None:
        """Register ``component``, a class whose ``name`` class attribute is its public name.

        Its dataclass fields are its parameters (``name:key=value`` on the command
        line); ``aliases`` are further names for the same class with its defaults.
        """


@hookspec
def register_measures(register: Register) -> None:
    """Register performance measures: subclasses of :class:`calopt.measures.ConcaveMeasure`
    or :class:`calopt.measures.PseudoLinearMeasure` (or another :class:`calopt.measures.Measure`).
    """


@hookspec
def register_losses(register: Register) -> None:
    """Register margin losses: subclasses of :class:`calopt.losses.Loss`."""


@hookspec
def register_algorithms(register: Register) -> None:
    """Register training algorithms: subclasses of :class:`calopt.algorithms.Algorithm`."""


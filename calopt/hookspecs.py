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

__all__ = ["Register", "RegisterDefaultAlgorithm", "RegisterDefaultLoss", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("calopt")
hookimpl = pluggy.HookimplMarker("calopt")


class Register(Protocol):
    """The callback handed to the registration hooks."""

    def __call__(self, component: type, *, aliases: Sequence[str] = ()) -> None:
        """Register ``component``, a class whose ``name`` class attribute is its public name.

        Its dataclass fields are its parameters (``name:key=value`` on the command
        line); ``aliases`` are further names for the same class with its defaults.
        """


class RegisterDefaultAlgorithm(Protocol):
    """The callback handed to :func:`register_default_algorithms`."""

    def __call__(self, spec: str, *, task: str = "binary", family: str = "any") -> None:
        """Declare ``spec`` (``"spade"``, ``"mirror-descent:signed=false"``) the algorithm that
        trains ``task`` problems for measures of ``family`` when the user names none.

        ``task`` is ``"binary"``, ``"direct"`` (the measure's own solver, which
        ``algorithm="auto"``, ``calopt compare`` and ``partial_fit`` use; it need not be the
        binary default), ``"multiclass"`` or ``"aggregate"`` (:func:`calopt.aggregate`); ``family`` a measure family (``"concave"``,
        ``"pseudo-linear"``) or ``"any"``, the fallback for families without their own.
        """


class RegisterDefaultLoss(Protocol):
    """The callback handed to :func:`register_default_losses`."""

    def __call__(self, spec: str, *, algorithm: str) -> None:
        """Declare ``spec`` (``"hinge"``) the loss that ``algorithm`` (a name) uses when none is given."""


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


@hookspec
def register_default_algorithms(register: RegisterDefaultAlgorithm) -> None:
    """Declare which algorithm trains a kind of problem when the user names none.

    Two plugins declaring a default for the same task and family is a warning, and an
    error only when that default is needed.
    """


@hookspec
def register_default_losses(register: RegisterDefaultLoss) -> None:
    """Declare which loss an algorithm uses when the user names none."""


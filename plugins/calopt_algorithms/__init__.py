"""calopt's built-in algorithms, registered through the ``calopt`` entry-point group."""

from __future__ import annotations

from calopt.hookspecs import hookimpl
from calopt_algorithms.altmax import Amp, Stamp
from calopt_algorithms.erm import GradientDescent, Sgd, Subgradient
from calopt_algorithms.mirror import MirrorDescent
from calopt_algorithms.plugin import PlugIn
from calopt_algorithms.spade import Spade
from calopt_algorithms.slnd import Slnd

__all__ = ["Amp", "PlugIn", "Spade", "Stamp"]


@hookimpl
def register_algorithms(register):
    """Register the built-in algorithms."""
    register(Spade)
    register(Stamp)
    register(Amp)
    register(PlugIn)
    register(MirrorDescent)
    register(GradientDescent)
    register(Sgd)
    register(Subgradient)
    register(Slnd)

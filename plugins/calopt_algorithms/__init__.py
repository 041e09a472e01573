"""calopt's built-in algorithms, registered through the ``calopt`` entry-point group.

Besides the algorithms, this plugin declares the defaults (the core names none): which
algorithm trains each kind of problem, and which loss each algorithm uses.
"""

from __future__ import annotations

from calopt.hookspecs import hookimpl
from calopt_algorithms.altmax import Amp, Stamp
from calopt_algorithms.constrained import Constrained
from calopt_algorithms.erm import GradientDescent, Sgd, Subgradient
from calopt_algorithms.lbfgs import Lbfgs, Multinomial
from calopt_algorithms.mirror import MirrorDescent
from calopt_algorithms.plugin import PlugIn
from calopt_algorithms.spade import Spade
from calopt_algorithms.slnd import Slnd

__all__ = ["Amp", "Constrained", "GradientDescent", "Lbfgs", "MirrorDescent", "Multinomial", "PlugIn", "Sgd", "Slnd", "Spade",
           "Stamp", "Subgradient"]


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
    register(Lbfgs)
    register(Multinomial)
    register(Slnd)
    register(Constrained)


@hookimpl
def register_default_algorithms(register):
    """Binary problems of every family: the plug-in route (L-BFGS on the logistic loss, C, the
    passes and the threshold chosen on held-out data). On the 79-dataset benchmark it was as
    good as the measures' own solvers on average and better in the cells with 30 or more test
    positives (90.5% within 0.01 of the cross-validated scikit-learn route, against 85.2%),
    in less time (BENCHMARKS.md). The measure's own solver (paper 002), for
    ``--algorithm auto``, ``calopt compare`` and ``partial_fit``: SPADE for concave measures,
    STAMP for pseudo-linear ones. For more than two classes the multinomial logistic loss by
    L-BFGS (SLND, paper 000, trailed it in top-1 on every shared multiclass set); mirror
    descent over the models' scores for aggregation (paper 001), the models being already
    oriented (no signed copies)."""
    register("lbfgs")
    register("spade", task="direct", family="concave")
    register("stamp", task="direct", family="pseudo-linear")
    register("constrained", task="direct", family="constrained")
    register("multinomial", task="multiclass")
    register("mirror-descent:signed=false", task="aggregate")


@hookimpl
def register_default_losses(register):
    """The reward-driven solvers use the hinge reward min(1, y·s) of the papers' experiments
    (paper 002); the loss minimisers the logistic loss, but the subgradient method, meant for
    the non-differentiable hinge (paper 003); SLND the calibrated hinge of paper 000 (eq. 3):
    averaged, mean top-1 over seeds 0-2, letter 0.683 against 0.644 (step 32) and 0.666
    (step 8) for the logistic loss; MNIST 0.893 against 0.895 and 0.899."""
    for name in ("spade", "stamp", "amp", "constrained"):
        register("hinge", algorithm=name)
    for name in ("plugin", "gd", "sgd", "lbfgs", "multinomial", "mirror-descent"):
        register("logistic", algorithm=name)
    register("hinge", algorithm="subgradient")
    register("calibrated-hinge", algorithm="slnd")

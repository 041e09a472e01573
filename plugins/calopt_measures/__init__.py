"""calopt's built-in measures, registered through the ``calopt`` entry-point group.

Concave measures (SPADE) live in :mod:`calopt_measures.concave`, pseudo-linear ones
(AMP, STAMP) in :mod:`calopt_measures.pseudo_linear`; they are registered exactly as a
third-party plugin would register its own.
"""

from __future__ import annotations

from calopt.hookspecs import hookimpl
from calopt_measures.concave import GMean, HMean, Min, QMean
from calopt_measures.pseudo_linear import Accuracy, FBeta, GowerLegendre, Jaccard, Precision
from calopt_measures.rates import TNR, TPR, BalancedAccuracy

__all__ = ["Accuracy", "BalancedAccuracy", "FBeta", "GMean", "GowerLegendre", "HMean", "Jaccard", "Min", "Precision", "QMean", "TNR", "TPR"]


@hookimpl
def register_measures(register):
    """Register the built-in measures."""
    register(Min)
    register(HMean)
    register(QMean)
    register(GMean)
    register(FBeta, aliases=("f1",))
    register(Jaccard)
    register(GowerLegendre)
    register(TPR, aliases=("recall",))
    register(TNR)
    register(Precision)
    register(BalancedAccuracy, aliases=("bacc",))
    register(Accuracy)

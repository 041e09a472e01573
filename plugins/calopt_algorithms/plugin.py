"""The plug-in baseline: a class-probability model by logistic ERM, then a tuned threshold."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from calopt_algorithms.erm import Sgd


@dataclasses.dataclass(frozen=True)
class PlugIn(Sgd):
    """Plug-in: logistic ERM (averaged SGD), then the threshold best for the measure on held-out data.

    The solver is :class:`~calopt_algorithms.erm.Sgd` (steps η₀/√t, iterate averaging);
    what makes it the plug-in is the 20% of the training data held out for the threshold.
    """

    name: ClassVar[str] = "plugin"
    holdout: ClassVar[float] = 0.2

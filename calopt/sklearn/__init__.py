"""calopt inside scikit-learn: the estimator :class:`CaloptClassifier` and scorers for every measure.

:class:`CaloptClassifier` (:mod:`calopt.sklearn.estimator`) is :func:`calopt.fit` behind
scikit-learn's estimator API, so it goes where any classifier goes (``Pipeline``,
``GridSearchCV``, ``cross_val_score``, ``TunedThresholdClassifierCV``);
:func:`make_scorer` (:mod:`calopt.sklearn.scorers`) turns any registered measure (G-, H-,
Q-mean, min(TPR, TNR), Gower-Legendre, plugins' measures: scikit-learn has none of these)
into a scorer for ``scoring=``.

This layer stands above training (:mod:`calopt.training`) and below reporting
(:mod:`calopt.reporting`); ``lint-imports`` checks it (pyproject.toml).
"""

from __future__ import annotations

from calopt.sklearn.estimator import CaloptClassifier
from calopt.sklearn.scorers import make_scorer, measure_score

__all__ = ["CaloptClassifier", "make_scorer", "measure_score"]

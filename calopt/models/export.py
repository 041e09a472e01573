"""calopt models as scikit-learn estimators, for the tools of that ecosystem (skops, ONNX converters).

A calopt model is a linear classifier, so a fitted scikit-learn linear classifier with the
same ``coef_``, ``intercept_`` (the decision threshold tuned for the measure folded in) and
``classes_`` predicts the same: ``classes_[1]`` where ``X @ coef_.T + intercept_ > 0``
(binary), else the argmax of the class scores (one-vs-rest). The container is
``LinearSVC`` because, like calopt, it has ``decision_function`` and ``predict`` and no
``predict_proba`` (calopt's scores are not probabilities); its hyperparameters (``C``,
``loss``) say nothing about how the weights were found.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["to_sklearn"]


def to_sklearn(coef: Any, intercept: Any, classes: Any) -> Any:
    """A fitted ``sklearn.svm.LinearSVC`` with these weights: ``coef`` (d,) and a number (binary),
    or (d, C) and (C,) (one-vs-rest), and the ``classes`` (negative, positive) or in column order."""
    from sklearn.svm import LinearSVC

    coef = np.asarray(coef, dtype=np.float64)
    estimator = LinearSVC()
    estimator.coef_ = coef.reshape(coef.shape[0], -1).T.copy()
    estimator.intercept_ = np.asarray(intercept, dtype=np.float64).reshape(-1).copy()
    estimator.classes_ = np.asarray(classes)
    estimator.n_features_in_ = int(coef.shape[0])
    estimator.n_iter_ = 0  # no iteration of LinearSVC's own solver ran
    return estimator

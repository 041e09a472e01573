"""The decision rule of a multinomial model for a K-class measure, chosen on out-of-fold probabilities.

After the probability model (the multinomial default, :func:`~calopt.training.pipeline.fit_multiclass_arrays`),
a K-class measure other than accuracy (G-mean, min or macro-F1 over K classes, ...) gets the
decision rule that maximises it (:func:`~calopt.training.decision.choose_rule`), chosen on
probabilities of rows the model that gave them did not see: the cross-fitting of the binary
threshold, with the folds stratified by class. To keep it cheap each fold model starts from
the model trained on every row and makes at most :data:`FOLD_PASSES` L-BFGS iterations on its
fold's rows (SciPy's L-BFGS-B on the multinomial objective the ``multinomial`` algorithm
minimises, scikit-learn's ``LogisticRegression``'s): the probabilities are those of models
near the fold's optimum, not of models trained to convergence (benchmarks/bench_kclass_rule.py
measured the cost and the values).

The rule is deterministic by default (a gain matrix: :mod:`calopt.models.rule`); with
``randomised=True`` the model keeps the Frank-Wolfe mixture instead, whose Frank-Wolfe gap
:class:`~calopt.models.report.DecisionReport` reports either way. Accuracy keeps the argmax
(its best rule); so do measures with no K-class form, algorithms whose scores are not
probabilities (SLND, one binary run per class) and data with a class of fewer than two rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.optimize
import scipy.sparse

from calopt.backends import is_sparse, to_numpy
from calopt.measures import Measure
from calopt.models.report import DecisionReport
from calopt.models.rule import softmax
from calopt.training.decision import ITERATIONS, choose_rule
from calopt.training.selection import stratified_folds

__all__ = ["FOLDS", "FOLD_PASSES", "choose_decision", "out_of_fold_proba", "skip_reason"]

#: Folds of the cross-fitting (fewer when the smallest class has fewer rows).
FOLDS = 5
#: L-BFGS iterations at the most of each fold model, from the model trained on every row.
FOLD_PASSES = 10


def skip_reason(measure: Measure, algorithm: Any, n_classes: int) -> str | None:
    """Why the model keeps the argmax (None: a rule is chosen)."""
    if n_classes < 3:
        return "two classes: calopt.fit trains a binary model with its threshold for them"
    if measure.name == "accuracy":
        return "the argmax is the best rule for accuracy"
    if measure.multiclass is None:
        return f"measure {measure.spec!r} has no K-class form; its one-vs-rest values are reported"
    if algorithm.name != "multinomial":
        how = "trains all classes at once" if algorithm.multiclass else "trains one class against the rest at a time"
        return f"algorithm {algorithm.name!r} {how} and gives scores, not probabilities (rules need multinomial)"
    return None


def _folds(codes: np.ndarray, seed: int) -> np.ndarray | None:
    """The fold of each row, stratified by class (None: a class has fewer than two rows)."""
    k = min(FOLDS, int(np.bincount(codes).min()))
    return None if k < 2 else stratified_folds(codes, k, seed)


def _objective(X: Any, onehot: np.ndarray, weight: np.ndarray, C: float) -> Any:
    """f and ∇f of the multinomial objective on these rows, flattened (W (d, K), then b (K,)):
    (1/m)·Σ s_i·[log Σ_c exp(z_ic) − z_i,y_i] + ‖W‖²/(2·C·m), the ``multinomial`` algorithm's."""
    m, (d, K) = onehot.shape[0], (X.shape[1], onehot.shape[1])

    def f(z: np.ndarray) -> tuple[float, np.ndarray]:
        W, b = z[:d * K].reshape(d, K), z[d * K:]
        scores = np.asarray(X @ W) + b
        top = np.max(scores, axis=1, keepdims=True)
        lse = np.log(np.sum(np.exp(scores - top), axis=1)) + top[:, 0]
        value = weight @ (lse - np.sum(onehot * scores, axis=1)) / m + np.sum(W * W) / (2 * C * m)
        residual = (np.exp(scores - lse[:, None]) - onehot) * weight[:, None]
        grad_w = np.asarray(X.T @ residual) / m + W / (C * m)
        return float(value), np.concatenate([grad_w.ravel(), residual.sum(axis=0) / m])

    return f


def out_of_fold_proba(X: Any, codes: np.ndarray, weight: np.ndarray | None, w: np.ndarray, b: np.ndarray,
                      C: float, fold: np.ndarray, passes: int | None = None) -> np.ndarray:
    """Each row's probabilities by the fold model that did not see it: the model (w, b) trained
    on every row, moved by at most ``passes`` L-BFGS iterations on the fold's other rows."""
    passes = FOLD_PASSES if passes is None else passes
    X = X.tocsr() if is_sparse(X) else np.asarray(to_numpy(X), dtype=np.float64)
    K = w.shape[1]
    onehot = (codes[:, None] == np.arange(K)).astype(np.float64)
    weight = np.ones(codes.size) if weight is None else np.asarray(weight, dtype=np.float64)
    start = np.concatenate([w.ravel(), b])
    proba = np.empty((codes.size, K))
    for f in range(int(fold.max()) + 1):
        train, held = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        X_train = X[train]
        rows_weight = weight[train] / np.mean(weight[train])
        found = scipy.optimize.minimize(_objective(X_train, onehot[train], rows_weight, C), start, jac=True,
                                        method="L-BFGS-B", options={"maxiter": passes})
        W, b_fold = found.x[:w.size].reshape(w.shape), found.x[w.size:]
        proba[held] = softmax(np.asarray(X[held] @ W) + b_fold)
    return proba


def choose_decision(X: Any, codes: np.ndarray, weight: np.ndarray | None, w: np.ndarray, b: np.ndarray, *,
                    measure: Measure, algorithm: Any, seed: int, randomised: bool = False
                    ) -> tuple[dict[str, np.ndarray], DecisionReport]:
    """The rule of a model (w, b) on the (scaled) training rows X: the model's rule arrays (``gains``
    (K, K); randomised: ``mixture_weights`` (T,) and ``mixture_gains`` (T, K, K); none: the
    argmax) and its account."""
    K = w.shape[1]
    reason = skip_reason(measure, algorithm, K)
    fold = None if reason is not None else _folds(codes, seed)
    if reason is None and fold is None:
        reason = "a class has fewer than two training rows: no out-of-fold probabilities"
    if reason is not None:
        return {}, DecisionReport(rule="argmax", measure=measure.spec, reason=reason)
    proba = out_of_fold_proba(X, codes, weight, w, b, float(algorithm.C), fold)
    rule = choose_rule(proba, codes, measure, sample_weight=weight, iterations=ITERATIONS)
    report = DecisionReport(rule="randomised" if randomised else "gain matrix", measure=measure.spec,
                            folds=int(fold.max()) + 1, fold_passes=FOLD_PASSES,
                            held_out=rule.mixture_value if randomised else rule.value,
                            argmax=rule.argmax_value, mixture=rule.mixture_value, gap=rule.gap,
                            iterations=rule.iterations)
    if randomised:
        weights, gains = rule.mixture_arrays()
        return {"mixture_weights": weights, "mixture_gains": gains}, report
    return {"gains": np.asarray(rule.gains, dtype=np.float64)}, report

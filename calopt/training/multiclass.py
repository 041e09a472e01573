"""The decision rule of a multinomial model for a K-class measure, chosen on out-of-fold probabilities.

After the probability model (the multinomial default, :func:`~calopt.training.pipeline.fit_multiclass_arrays`),
a K-class measure other than accuracy (G-mean, min or macro-F1 over K classes, ...) gets the
decision rule that maximises it (:func:`~calopt.training.decision.choose_rule`), chosen on
probabilities of rows the model that gave them did not see: the cross-fitting of the binary
threshold, with the folds stratified by class. To keep it cheap each fold model starts from
the model trained on every row and makes at most :data:`FOLD_PASSES` evaluations of L-BFGS on
its fold's rows (the multinomial objective the ``multinomial`` algorithm minimises,
scikit-learn's ``LogisticRegression``'s), all fold models at once: one product with the rows
a pass serves every fold, each with its own memory and line search, and a fold stops when
its gradient is within :data:`FOLD_TOL`. The probabilities are those of models near the
fold's optimum, not of models trained to convergence (benchmarks/bench_kclass_rule.py
measured the cost and the values; running them to convergence did not choose better rules on
the K-class benchmark's development half).

The model's C is chosen among :data:`C_CANDIDATES` by the out-of-fold log loss (the probability
model's own cross-validation, one C whatever the measure; :func:`_choose_c`): the fold models go
on from where they stopped for :data:`FOLD_PASSES` evaluations at each other C, beside the model
on every row at that C (from the model trained on every row at its own C), all at once; the C of
the smallest loss gives the model and the probabilities the rule is chosen on. Each other C's fold
models start from the own C's, not from the model on every row, which saw their held-out rows and
would flatter the C they started at (``benchmarks/kclass_rule_ideas.py``). A C the user gave, no
selection (``select="none"``), the rule's sample, :data:`C_ROWS_A_PARAMETER` rows a parameter and
memories beyond :data:`C_CHOICE_BYTES` keep it (:func:`c_kept_reason`).

Beyond :data:`RULE_ROWS` training rows the fold models and the rule work on a sample of that
many (:func:`rule_rows`): every row of a class with fewer than its share, the others drawn down
to it, each row weighted by its class's count over its sampled count (the weighted measure is the
whole data's, in expectation). A rule is K numbers, which 100,000 rows fix well, and the search's
cost grows with the rows: on a 7-class set of 339,056 rows × 54 the rule took 5.5 s of a 10.8 s
fit, one ``LogisticRegression`` fit 3.3 s. ``benchmarks/bench_multiclass_large.py`` chose 100,000
over 50,000 on its development half (test values against every row's rule: mean −0.0007 against
−0.0022; median fit time 1.75 and 1.28 times one LR fit, every row's 4.86).

The rule is deterministic by default (a gain matrix: :mod:`calopt.models.rule`); with
``randomised=True`` the model keeps the Frank-Wolfe mixture instead, whose Frank-Wolfe gap
:class:`~calopt.models.report.DecisionReport` reports either way. Accuracy keeps the argmax
(its best rule), and so do the micro averages, increasing functions of accuracy with one label a
row (:func:`accuracy_alone`: the ratio-of-linear measures, whose bisection on the level
(Narasimhan et al., as above) ends at the accuracy rule); so do measures with no K-class form, algorithms whose scores are not
probabilities (SLND, one binary run per class) and data with a class of fewer than two rows.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import scipy.sparse

from calopt.backends import is_sparse, lbfgs_direction, put_slot_where, to_numpy
from calopt.constraints import ClassConstrainedMeasure
from calopt.errors import ParameterError
from calopt.measures import Measure, PseudoLinearMeasure, class_counts, confusion_matrix
from calopt.models.report import DecisionReport
from calopt.models.rule import gain_predictions, softmax
from calopt.training.decision import ITERATIONS, choose_rule
from calopt.training.selection import stratified_folds, trainer_cores, trainer_pool

__all__ = ["CERTIFICATE_ITERATIONS", "C_CANDIDATES", "C_CHOICE_BYTES", "C_ROWS_A_PARAMETER", "FOLDS", "FOLD_PASSES",
           "RULE_ROWS", "accuracy_alone", "c_kept_reason", "choose_decision", "out_of_fold_proba", "rule_rows",
           "skip_reason"]

#: Folds of the cross-fitting (fewer when the smallest class has fewer rows).
FOLDS = 5
#: L-BFGS evaluations at the most of each fold model, from the model trained on every row.
FOLD_PASSES = 10
#: Frank-Wolfe iterations when the rule is deterministic (its mixture only reports a value and a
#: gap then; a randomised rule uses decision.ITERATIONS).
CERTIFICATE_ITERATIONS = 10
#: A fold model has converged when max |∇f| is at most this (the ``multinomial`` algorithm's tol).
FOLD_TOL = 1e-4
#: The inverse regularisation strengths the model's C is chosen among, by the out-of-fold log loss
#: (the lbfgs algorithm's candidates; where the user did not give C).
C_CANDIDATES = (0.1, 1.0, 10.0)
#: The most memory the other C's fold models' L-BFGS pairs may take; beyond it the model keeps its C.
C_CHOICE_BYTES = 1 << 30
#: From this many training rows a parameter the model keeps its C: the penalty ‖W‖²/(2·C·n) then
#: weighs little against the loss of n rows for any C of the grid (on the K-class benchmark's
#: sets of 15-70 rows a parameter the choice moved the test value by −0.0018 on average; from
#: 20,000 to 80,000 rows, 160-2,200 a parameter, it cost 1-2 ``LogisticRegression`` fits and
#: moved no value by 0.001: ``benchmarks/bench_multiclass_large.py --mid``).
C_ROWS_A_PARAMETER = 100
#: Pairs of each fold model's L-BFGS memory (:func:`_lbfgs`).
_LBFGS_MEMORY = 10
#: The most rows the fold models and the rule work on (:func:`rule_rows`).
RULE_ROWS = 100_000


def rule_rows(codes: np.ndarray, weight: np.ndarray | None, seed: int, rows: int | None = None
              ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The training rows the rule is chosen on, and their weights: every row (None) up to ``rows``;
    beyond, ``rows`` of them, each class keeping all its rows up to a common quota (the smallest
    classes whole), each row weighing its class's count over its kept count (times its sample
    weight; mean 1). ``rows``: :data:`RULE_ROWS` by default."""
    rows = RULE_ROWS if rows is None else rows
    if codes.size <= rows:
        return None, weight
    counts = np.bincount(codes)
    kept, left, order = counts.copy(), rows, np.argsort(counts, kind="stable")
    for i, k in enumerate(order):  # water-filling: the classes below an equal share keep every row
        share = left // (order.size - i)
        if counts[k] > share:  # this class and the larger ones share what is left, as evenly as can be
            larger = order[i:]
            kept[larger] = share
            kept[larger[:left - share * larger.size]] += 1
            break
        left -= counts[k]
    rng = np.random.default_rng(seed)
    index = np.sort(np.concatenate([rng.permutation(np.flatnonzero(codes == k))[:kept[k]]
                                    for k in range(counts.size)]))
    factor = counts / np.maximum(kept, 1)
    sampled = factor[codes[index]] * (1.0 if weight is None else weight[index])
    return index, sampled / sampled.mean()


def accuracy_alone(measure: Measure, n_classes: int) -> bool:
    """Whether ``measure``'s K-class value is an increasing function of accuracy alone: a micro
    average (``f1``, ``fbeta``, ``jaccard``, ``precision``, ``gower-legendre`` with
    ``average=micro``: the measure of the one-vs-rest counts summed over the classes). With one
    label a row, a row predicted wrong is one false positive (of the class predicted) and one
    false negative (of its own), so the sums are TP = a, FP = FN = n − a, TN = (K − 2)·n + a for a
    rows right of n: the value is a function of a, increasing for these measures (checked on a
    grid of a). The argmax then is the best rule, as for accuracy: Narasimhan et al.'s bisection
    on the level of a ratio-of-linear measure ends at the accuracy rule."""
    if n_classes < 3 or getattr(measure, "average", None) != "micro" or not isinstance(measure, PseudoLinearMeasure) \
            or type(measure).from_class_counts is not PseudoLinearMeasure.from_class_counts:
        return False
    right = np.linspace(0.0, 1.0, 101)  # a / n
    values = np.asarray(measure.from_counts(right, 1 - right, (n_classes - 2) + right, 1 - right, xp=np), dtype=np.float64)
    return bool(np.all(np.isfinite(values)) and np.all(np.diff(values) > 0))


def skip_reason(measure: Measure, algorithm: Any, n_classes: int) -> str | None:
    """Why the model keeps the argmax (None: a rule is chosen)."""
    if n_classes < 3:
        return "two classes: calopt.fit trains a binary model with its threshold for them"
    if measure.name == "accuracy":
        return "the argmax is the best rule for accuracy"
    if accuracy_alone(measure, n_classes):
        return (f"{measure.spec} of single-label classes is an increasing function of accuracy alone (summed "
                f"over the classes, FP = FN = the rows predicted wrong): the argmax is its best rule")
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


class _FoldObjectives:
    """f and ∇f of the multinomial objective of every fold model at once, on the rows each fold
    trains on: (1/m_f)·Σ s_i·[log Σ_c exp(z_ic) − z_i,y_i] + ‖W_f‖²/(2·C·m_f), the ``multinomial``
    algorithm's, with the rows' weights s (mean 1 over the fold's rows, 0 on its held-out rows).
    Parameters (F, d·K + K): each fold's W (d, K) flattened, then its b (K,). One product with the
    rows serves every fold (the held-out rows are scored too, with weight 0); the scores are
    fold- and class-major (F, K, n), so that every reduction over the classes is a few vector
    operations over the rows. Each model may have its own C ((F,)) and, instead of the folds of
    ``fold``, its own training rows (``train`` (F, n): the other C's fold models and the models on
    every row of :func:`_choose_c`)."""

    def __init__(self, X: Any, codes: np.ndarray, weight: np.ndarray | None, fold: np.ndarray | None, K: int,
                 C: Any, train: np.ndarray | None = None):
        if train is None:
            train = fold != np.arange(int(fold.max()) + 1)[:, None]  # (F, n): the rows each fold model trains on
        F = train.shape[0]
        s = train * (1.0 if weight is None else weight)
        self.m = train.sum(axis=1).astype(np.float64)  # rows per fold model
        # the weights of each fold's rows, mean 1 there, over its row count
        self.s = s / (s.sum(axis=1) / self.m)[:, None] / self.m[:, None]
        self.codes, self.K = codes, K
        self.C = np.broadcast_to(np.asarray(C, dtype=np.float64), (F,))
        self.d, self.rows = X.shape[1], np.arange(codes.size)
        # the rows with a column of ones: a model's flat parameters are then its (d + 1, K) matrix of
        # weights over intercepts, and one product gives scores with intercepts (and their gradient)
        ones = np.ones((codes.size, 1))
        self.X = scipy.sparse.hstack([X, ones], format="csr") if is_sparse(X) else np.hstack([X, ones])

    def part(self, models: slice) -> _FoldObjectives:
        """The objective of the models ``models`` alone (their rows' weights and C; X shared)."""
        part = copy.copy(self)
        part.s, part.m, part.C = self.s[models], self.m[models], self.C[models]
        return part

    def _W(self, z: np.ndarray) -> np.ndarray:
        """Every fold's W as (F, d, K)."""
        return z[:, :self.d * self.K].reshape(z.shape[0], self.d, self.K)

    def scores(self, z: np.ndarray) -> np.ndarray:
        """(F, K, n): every row's scores by every fold model."""
        F, K = z.shape[0], self.K
        Wt = z.reshape(F, self.d + 1, K).transpose(0, 2, 1).reshape(F * K, self.d + 1)
        product = np.asarray(self.X @ Wt.T).T if is_sparse(self.X) else Wt @ self.X.T
        return product.reshape(F, K, -1)

    def __call__(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """f (F,) and ∇f (F, d·K + K) of every fold model at z."""
        F, K, d = z.shape[0], self.K, self.d
        scores = self.scores(z)
        scores -= np.max(scores, axis=1, keepdims=True)
        true = scores[:, self.codes, self.rows]  # (F, n)
        residual = np.exp(scores, out=scores)
        total = residual.sum(axis=1)
        W = self._W(z)
        value = np.einsum("fn,fn->f", self.s, np.log(total) - true) + np.einsum("fdk,fdk->f", W, W) / (2 * self.C * self.m)
        residual *= (self.s / total)[:, None, :]  # s·p
        residual[:, self.codes, self.rows] -= self.s  # s·(p − onehot)
        flat = residual.reshape(F * K, -1)
        product = np.asarray(self.X.T @ flat.T).T if is_sparse(self.X) else flat @ self.X  # (F·K, d + 1)
        grad = product.reshape(F, K, d + 1).transpose(0, 2, 1).copy()
        grad[:, :d, :] += W / (self.C * self.m)[:, None, None]
        return value, grad.reshape(F, -1)


def _lbfgs(objective: Any, start: np.ndarray, passes: int, tol: float, memory: int = _LBFGS_MEMORY) -> np.ndarray:
    """At most ``passes`` evaluations of ``objective`` (f (M,) and ∇f (M, p) of M independent models
    at (M, p)) by limited-memory BFGS (the two-loop recursion) with a backtracking line search on
    the Armijo condition, each model its own memory and step (the ``multinomial`` algorithm's
    method, batched over the fold models); stops early when every model's max |∇f| ≤ ``tol``.

    Where the models are large (:data:`THREADED_PARAMETERS`), they run in groups, one a core of
    :func:`~calopt.training.selection.trainer_pool`, each group's pass in a thread (its product
    with the rows, its memory and its recursion: NumPy's kernels and SciPy's sparse products
    release the GIL) and the stop taken over every group, as for one group: each model's numbers
    depend on its own row of every array only, so the models are the same to the bit."""
    pool = trainer_pool()
    threaded = pool is not None and start.size >= THREADED_PARAMETERS and start.shape[0] > 1
    each = pool.map if threaded else map
    if threaded:
        groups = [slice(int(part[0]), int(part[-1]) + 1)
                  for part in np.array_split(np.arange(start.shape[0]), min(trainer_cores(), start.shape[0]))]
        runs = list(each(lambda group: _LbfgsRun(objective.part(group), start[group], memory), groups))
    else:
        runs = [_LbfgsRun(objective, start, memory)]
    for _ in range(passes - 1):
        if all([run.converged(tol) for run in runs]):
            break
        list(each(_LbfgsRun.step, runs))
    return runs[0].x if len(runs) == 1 else np.concatenate([run.x for run in runs])


#: Parameters of all the models at once from which :func:`_lbfgs` splits them among the cores
#: (BBC News TF-IDF, 5 classes: 12 models × 127,615; below it a pass is too short for threads).
THREADED_PARAMETERS = 1 << 18


class _LbfgsRun:
    """:func:`_lbfgs`'s state for a group of models: the iterate, f and ∇f there, the direction and
    step, the memory."""

    def __init__(self, objective: Any, start: np.ndarray, memory: int):
        self.objective, self.memory = objective, memory
        self.x = start.copy()
        self.f, self.g = objective(self.x)
        M = self.x.shape[0]
        self.s_mem, self.y_mem = np.zeros((memory, *self.x.shape)), np.zeros((memory, *self.x.shape))
        self.rho, self.step_size = np.zeros((memory, M)), np.ones(M)
        # The memory is a ring (the lbfgs algorithm's, :func:`~calopt.backends.put_slot_where`): slot
        # ``head`` holds the oldest pair, a new pair replaces it in place and the ring moves on; a model
        # that keeps its pairs has them moved with it. Shifting every slot a pass instead copied the
        # whole (10, folds, d·K) memory twice an evaluation (20,000 × 50,000 sparse rows of 20 classes:
        # 800 MB a pass, a third of the fold models' time).
        self.filled, self.head = 0, 0  # the slots some model uses (the others have ρ = 0 and act as none)
        self.p = self._direction(self.g)

    def _direction(self, g: np.ndarray) -> np.ndarray:
        memory, head = self.memory, self.head
        order = [(head + j) % memory for j in range(memory - self.filled, memory)]
        return lbfgs_direction(g, self.s_mem, self.y_mem, self.rho, order, (head - 1) % memory, np)

    def converged(self, tol: float) -> bool:
        """Whether every model of the group has max |∇f| ≤ ``tol``."""
        return bool(np.all(np.max(np.abs(self.g), axis=1) <= tol))

    def step(self) -> None:
        """One evaluation at the trial point: accepted or the step halved, per model."""
        x, f, g, p, step = self.x, self.f, self.g, self.p, self.step_size
        trial = x + step[:, None] * p
        f_new, g_new = self.objective(trial)
        accept = f_new <= f + 1e-4 * step * np.einsum("mp,mp->m", g, p)
        s_new, y_new = trial - x, g_new - g
        curvature = np.einsum("mp,mp->m", s_new, y_new)
        remember = accept & (curvature > 1e-10)
        if np.any(remember):
            self.filled = min(self.filled + 1, self.memory)
            self.s_mem = put_slot_where(self.s_mem, self.head, s_new, remember, np)
            self.y_mem = put_slot_where(self.y_mem, self.head, y_new, remember, np)
            self.rho = put_slot_where(self.rho, self.head, np.divide(1.0, curvature, out=np.zeros(x.shape[0]),
                                                                     where=remember), remember, np)
            self.head = (self.head + 1) % self.memory
        self.x = np.where(accept[:, None], trial, x)
        self.f, self.g = np.where(accept, f_new, f), np.where(accept[:, None], g_new, g)
        if np.any(accept):
            self.p = np.where(accept[:, None], self._direction(self.g), p)
        self.step_size = np.where(accept, 1.0, step * 0.5)


def out_of_fold_proba(X: Any, codes: np.ndarray, weight: np.ndarray | None, w: np.ndarray, b: np.ndarray,
                      C: float, fold: np.ndarray, passes: int | None = None, tol: float = FOLD_TOL) -> np.ndarray:
    """Each row's probabilities by the fold model that did not see it: the model (w, b) trained
    on every row, moved by at most ``passes`` evaluations of L-BFGS on the fold's other rows
    (every fold model at once: :class:`_FoldObjectives`, :func:`_lbfgs`), or until max |∇f| ≤ ``tol``."""
    passes = FOLD_PASSES if passes is None else passes
    X = X.tocsr() if is_sparse(X) else np.asarray(to_numpy(X), dtype=np.float64)
    weight = None if weight is None else np.asarray(weight, dtype=np.float64)
    return _out_of_fold(X, codes, weight, _flat(w, b), C, fold, passes, tol)[0]


def _flat(w: Any, b: Any) -> np.ndarray:
    """A model's (d, K) weights and (K,) intercepts as the fold objectives' flat parameters."""
    return np.concatenate([np.asarray(to_numpy(w), dtype=np.float64).ravel(),
                           np.asarray(to_numpy(b), dtype=np.float64)])


def _out_of_fold(X: Any, codes: np.ndarray, weight: np.ndarray | None, start: np.ndarray, C: float,
                 fold: np.ndarray, passes: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`out_of_fold_proba` from one model's flat parameters ``start``: the probabilities and
    the fold models found (F, d·K + K)."""
    F = int(fold.max()) + 1
    objective = _FoldObjectives(X, codes, weight, fold, start.size // (X.shape[1] + 1), C)
    found = _lbfgs(objective, np.tile(start, (F, 1)), passes, tol)
    return softmax(objective.scores(found)[fold, :, np.arange(codes.size)]), found


def _log_loss(proba: np.ndarray, codes: np.ndarray, weight: np.ndarray | None) -> float:
    """The (weighted) mean of −log p(true class) over the rows."""
    return float(-np.average(np.log(np.maximum(proba[np.arange(codes.size), codes], 1e-300)), weights=weight))


def c_kept_reason(X: Any, K: int, sampled: bool) -> str | None:
    """Why the model keeps its C rather than having it chosen (None: it is chosen)."""
    if sampled:
        return f"more than {RULE_ROWS:,} training rows (the rule's sample)"
    parameters = (X.shape[1] + 1) * K
    if X.shape[0] >= C_ROWS_A_PARAMETER * parameters:
        return (f"{X.shape[0]:,} rows for {parameters:,} parameters (at least {C_ROWS_A_PARAMETER} a parameter: "
                f"the penalty weighs little for any C)")
    if 2 * _LBFGS_MEMORY * (len(C_CANDIDATES) - 1) * (FOLDS + 1) * parameters * 8 > C_CHOICE_BYTES:
        return f"{parameters:,} parameters a model: the other C's L-BFGS memories would pass {C_CHOICE_BYTES >> 20} MiB"
    return None


def _choose_c(X: Any, codes: np.ndarray, weight: np.ndarray | None, start: np.ndarray, C: float, fold: np.ndarray,
              proba: np.ndarray, found: np.ndarray) -> tuple[float, np.ndarray, np.ndarray | None, tuple]:
    """C of :data:`C_CANDIDATES` by the out-of-fold log loss (ties: the model's own ``C``). The fold
    models at ``C`` (``found``, their probabilities ``proba``) go on for :data:`FOLD_PASSES` evaluations
    at each other C, and beside them the model ``start`` on every row at that C: all at once.
    Returns the C, its out-of-fold probabilities, its model's flat parameters (None: ``start``'s)
    and each candidate's log loss."""
    F, others = int(fold.max()) + 1, [c for c in C_CANDIDATES if c != C]
    train = np.concatenate([np.tile(fold != np.arange(F)[:, None], (len(others), 1)),
                            np.ones((len(others), codes.size), dtype=bool)])
    objective = _FoldObjectives(X, codes, weight, None, start.size // (X.shape[1] + 1),
                                np.concatenate([np.repeat(others, F), others]), train=train)
    z = _lbfgs(objective, np.concatenate([np.tile(found, (len(others), 1)), np.tile(start, (len(others), 1))]),
               FOLD_PASSES, FOLD_TOL)
    scores = objective.scores(z[:F * len(others)])
    candidates = {C: (proba, None)}
    for i, other in enumerate(others):
        candidates[other] = (softmax(scores[i * F + fold, :, np.arange(codes.size)]), z[F * len(others) + i])
    losses = {c: _log_loss(p, codes, weight) for c, (p, _) in candidates.items()}
    chosen = min(losses, key=lambda c: (losses[c], c != C))
    return chosen, *candidates[chosen], tuple({"C": c, "log_loss": losses[c]} for c in sorted(losses))


def choose_decision(X: Any, codes: np.ndarray, weight: np.ndarray | None, w: np.ndarray, b: np.ndarray, *,
                    measure: Measure, algorithm: Any, seed: int, randomised: bool = False, choose_c: bool = False
                    ) -> tuple[dict[str, np.ndarray], DecisionReport, tuple[np.ndarray, np.ndarray] | None]:
    """The rule of a model (w, b) on the (scaled) training rows X: the model's rule arrays (``gains``
    (K, K); randomised: ``mixture_weights`` (T,) and ``mixture_gains`` (T, K, K); none: the
    argmax), its account, and with ``choose_c`` the weights and intercepts ((d, K), (K,)) of the
    model at the C chosen when it is not the model's own (else None)."""
    K = w.shape[1]
    reason = skip_reason(measure, algorithm, K)
    index, weight = (None, weight) if reason is not None else rule_rows(codes, weight, seed)
    if index is not None:
        X = X.tocsr()[index] if is_sparse(X) else np.asarray(to_numpy(X), dtype=np.float64)[index]
        codes = codes[index]
    fold = None if reason is not None else _folds(codes, seed)
    if reason is None and fold is None:
        reason = "a class has fewer than two training rows: no out-of-fold probabilities"
    if reason is not None:
        if isinstance(measure, ClassConstrainedMeasure):  # never kept silently: the argmax ignores them
            raise ParameterError(f"the rate constraints ({', '.join(c.spec for c in measure.constraints)}) need "
                                 f"the decision rule, which this model cannot have: {reason}")
        return {}, DecisionReport(rule="argmax", measure=measure.spec, reason=reason), None
    X = X.tocsr() if is_sparse(X) else np.asarray(to_numpy(X), dtype=np.float64)
    weight = None if weight is None else np.asarray(weight, dtype=np.float64)
    C, start = float(algorithm.C), _flat(w, b)
    proba, found = _out_of_fold(X, codes, weight, start, C, fold, FOLD_PASSES, FOLD_TOL)
    kept = c_kept_reason(X, K, index is not None) if choose_c else "given"
    refit = losses = None
    if kept is None:
        C, proba, refit, losses = _choose_c(X, codes, weight, start, C, fold, proba, found)
    rule = choose_rule(proba, codes, measure, sample_weight=weight,
                       iterations=ITERATIONS if randomised else CERTIFICATE_ITERATIONS)
    held_out, argmax, mixture, gap, constraints = (rule.mixture_value if randomised else rule.value,
                                                   rule.argmax_value, rule.mixture_value, rule.gap, None)
    if isinstance(measure, ClassConstrainedMeasure):
        # the objective's values (the search's are −1 − violation where a constraint fails) and each
        # constraint at the rule and at the argmax, on the out-of-fold rows; the Frank-Wolfe mixture is
        # not chosen under the constraints (no certificate)
        def counts(predicted: np.ndarray) -> tuple[np.ndarray, ...]:
            return class_counts(confusion_matrix(codes, predicted, K, xp=np, weight=weight), xp=np)

        at_rule, at_argmax = counts(gain_predictions(proba, np.asarray(rule.gains))), counts(np.argmax(proba, axis=1))
        held_out = float(measure.objective.from_class_counts(*at_rule, xp=np))
        argmax = float(measure.objective.from_class_counts(*at_argmax, xp=np))
        mixture = gap = None
        constraints = tuple({**entry, "argmax": other["value"]}
                            for entry, other in zip(measure.report(*at_rule), measure.report(*at_argmax)))
    report = DecisionReport(rule="randomised" if randomised else "gain matrix", measure=measure.spec,
                            folds=int(fold.max()) + 1, fold_passes=FOLD_PASSES, C=C, C_log_loss=losses,
                            C_kept=kept,
                            rows=None if index is None else int(index.size), held_out=held_out, argmax=argmax,
                            mixture=mixture, gap=gap, iterations=rule.iterations, constraints=constraints)
    if randomised:
        weights, gains = rule.mixture_arrays()
        arrays = {"mixture_weights": weights, "mixture_gains": gains}
    else:
        arrays = {"gains": np.asarray(rule.gains, dtype=np.float64)}
    return arrays, report, None if refit is None else (refit[:-K].reshape(-1, K), refit[-K:])

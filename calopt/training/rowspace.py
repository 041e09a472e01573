"""Training in the span of the training rows: wide data at the cost of its rows, not its columns.

With more features than rows (text, wide binary data: 2,000 rows × 100,000 columns), the
default's L-BFGS selection keeps 18 stacked models with a memory of 10 pairs each: every pass
streams (10, 18, d) histories, most of a second per pass at d = 100,000, where the data's
own products cost a tenth of that.

An algorithm that is :attr:`~calopt.algorithms.Algorithm.rotation_invariant` (L-BFGS on the
L2-regularised risk) sees the features only through the scores Xw and inner products of
vectors in the span of the rows of X (its gradients X'c + w/C are there, starting from
w = 0). Any Φ (n × r) with ΦΦ' = XX' = K then trains the same models, in exact arithmetic,
in r ≤ n coordinates u, with w = X'Bu for the B that has KB = Φ and B'KB = I: the scores
agree (Xw = KBu = Φu) and so do the inner products (w'w = u'B'KBu = u'u). Φ comes from
LAPACK's Cholesky factorisation with pivoting of K (``dpstrf``, which stops at K's
numerical rank, so duplicated rows are fine): P'KP = LL' gives Φ = PL and B = P[L₁₁⁻ᵀ; 0].

Where this applies (:meth:`RowSpace.of`): a NumPy float64 run of a rotation-invariant
algorithm (every candidate of the plan), and where a run in row space, its set-up included, moves at
most half the bytes of one over the columns (:func:`cheaper`: the selection's stacked models count), which
also keeps K's n² floats below the size of the data and the histories. The models agree with the column run's to rounding; two things are
not the same to the bit: the sums run in another order, and L-BFGS's convergence test
(max |∇f| ≤ tol) is taken on the gradient's coordinates in row space, which are not the
columns' (the selection stops on its held-out rows first in the default).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from calopt.backends import is_sparse
from calopt.models.linear import Model

__all__ = ["RowSpace", "applies", "cheaper"]

#: Bytes a pass moves per stored entry of X (value and index, read by the scores and again by the gradient).
ENTRY_BYTES = 24
#: Bytes a pass moves per coordinate of one model in L-BFGS's two-loop recursion (memory 10:
#: about 40 reads and writes of 8 bytes; the same per coordinate in either space).
COORDINATE_BYTES = 320
#: Bytes a pass moves per entry of the dense n × n Φ (read by the scores and by the gradient).
DENSE_BYTES = 16


#: Passes a default run makes (its selection's 20 to 50): the row space's set-up is paid once against them.
PASSES = 30
#: Bytes of memory traffic one floating-point operation of the set-up costs as much time as (a
#: blocked Cholesky factorisation runs at about twice the memory bandwidth in operations a second).
FLOP_BYTES = 0.5


def cheaper(n: int, d: int, nnz: int, models: int) -> bool:
    """Whether training ``models`` stacked models over n rows in row space (Φ: n × n at most) moves
    at most half the bytes of training them over the d columns with ``nnz`` stored entries, over
    :data:`PASSES` passes: X (or Φ) is read once a pass for all the models, the histories once per
    model; the row space also pays its set-up once, the n × n Gram matrix and Φ written and K's
    pivoted Cholesky factorisation (n³/3 operations: 0.11 s at n = 2,000 here, so about 15 s and
    1.6 GB at n = 10,000)."""
    columns = ENTRY_BYTES * nnz + COORDINATE_BYTES * d * models
    rows = DENSE_BYTES * n * n + COORDINATE_BYTES * n * models
    setup = FLOP_BYTES * n ** 3 / 3 + DENSE_BYTES * n * n
    return n < d and 2 * (PASSES * rows + setup) <= PASSES * columns


def applies(n: int, d: int, nnz: int, algorithms: list[Any], models: int) -> bool:
    """Whether a NumPy float64 run of ``models`` stacked models of ``algorithms`` over n × d rows
    with ``nnz`` stored entries trains in row space (:meth:`RowSpace.of`): every algorithm
    rotation-invariant, and :func:`cheaper`."""
    return (all(getattr(algorithm, "rotation_invariant", False) for algorithm in algorithms)
            and n >= 2 and cheaper(n, d, nnz, models))


def _gram(X: Any) -> np.ndarray:
    """XX' (n × n, dense). Sparse rows: scipy's sparse products of row blocks, in threads (one per
    core, up to 4), for the blocks on and below the diagonal only, the others their transposes
    (5/8 of the products at 4 blocks: 0.75 → 0.5 s at 2,000 × 100,000 with 2·10⁶ entries). Each
    entry below the diagonal is the sum scipy forms for the whole product, over row i's entries
    in their stored order: the same numbers as ``X @ X.T``'s there (the pivoted Cholesky
    factorisation reads only those), and the matrix exactly symmetric."""
    if not is_sparse(X):
        return X @ X.T
    X = X.tocsr()
    n = X.shape[0]
    workers = max(1, min(4, os.cpu_count() or 1, n // 256))
    count = max(1, min(2 * workers, n // 256))
    cuts = np.linspace(0, n, count + 1).astype(int)
    spans = list(zip(cuts[:-1], cuts[1:]))
    blocks = [X[start:stop] for start, stop in spans]
    pairs = [(a, b) for a in range(count) for b in range(a + 1)]

    def product(pair: tuple[int, int]) -> np.ndarray:
        return (blocks[pair[0]] @ columns[pair[1]]).toarray()

    gram = np.empty((n, n))
    if workers == 1:
        columns = [block.T.tocsr() for block in blocks]
        done = [product(pair) for pair in pairs]
    else:
        with ThreadPoolExecutor(workers) as pool:
            columns = list(pool.map(lambda block: block.T.tocsr(), blocks))
            done = list(pool.map(product, pairs))
    for (a, b), block in zip(pairs, done):
        if a == b:  # a diagonal block: its lower triangle mirrored (rows stored out of order differ above)
            lower = np.tril_indices(block.shape[0], -1)
            block[lower[1], lower[0]] = block[lower]
        gram[spans[a][0]:spans[a][1], spans[b][0]:spans[b][1]] = block
        if a != b:
            gram[spans[b][0]:spans[b][1], spans[a][0]:spans[a][1]] = block.T
    return gram


@dataclass(frozen=True)
class RowSpace:
    """Φ (n × r) for the scaled training rows X (n × d), and the map back: w = X'Bu."""

    X: Any  #: the scaled training rows, host (scipy.sparse or ndarray)
    features: np.ndarray  #: Φ, (n, r) float64
    pivots: np.ndarray  #: the first r rows of K's pivoting (0-based)
    factor: np.ndarray  #: L₁₁ (r, r), lower triangular

    @classmethod
    def of(cls, X: Any, algorithms: list[Any], backend: Any, models: int) -> RowSpace | None:
        """The row space of scaled host rows ``X`` for a run of ``models`` stacked models; None where
        it does not apply (another backend or dtype, an algorithm that is not rotation-invariant, or
        not cheaper a pass: :func:`cheaper`)."""
        if backend.name != "numpy" or backend.dtype_name != "float64":
            return None
        n, d = (int(s) for s in X.shape)
        if not applies(n, d, int(X.nnz) if is_sparse(X) else n * d, algorithms, models):
            return None
        gram = np.ascontiguousarray(_gram(X), dtype=np.float64)
        c, piv, rank, info = scipy.linalg.lapack.dpstrf(gram, lower=1, overwrite_a=1)
        if info < 0 or rank < 1:
            return None  # pragma: no cover - an argument error, or X all zeros (nothing to train on)
        lower = np.tril(c[:, :rank])
        features = np.empty((n, rank))
        features[piv - 1] = lower
        return cls(X, features, piv[:rank] - 1, np.ascontiguousarray(lower[:rank]))

    def coordinates(self, rows: Any) -> np.ndarray:
        """Other rows (scaled as X) in Φ's coordinates: (rows X')B, (m, r)."""
        cross = rows @ self.X[self.pivots].T
        cross = cross.toarray() if is_sparse(cross) else np.asarray(cross)
        return scipy.linalg.solve_triangular(self.factor, cross.T, lower=True).T

    @property
    def sparse(self) -> bool:
        """Whether the training rows are sparse (:meth:`own_terms` applies)."""
        return is_sparse(self.X)

    @functools.cached_property
    def norms(self) -> np.ndarray:
        """‖x_i‖² of each training row (K's diagonal, from Φ: ΦΦ' = K), (n,)."""
        return np.einsum("ij,ij->i", self.features, self.features)

    def own_terms(self, u: Any) -> np.ndarray:
        """Each training row's own term in its score Φu by the model u: with w = X'a (a = Bu,
        non-zero at the pivot rows), row i's score is Σ_j a_j⟨x_j, x_i⟩ + b and its own term
        a_i‖x_i‖², (n,) (0 off the pivots: a row that repeats a pivot row is carried by it).

        The scores less these terms are what the model gives a row it did not train on with
        the same inner products, to first order (the other rows' terms do not move without
        row i): where the rows are nearly orthogonal, as sparse rows with many more columns
        than rows are, they score new rows as the model will, which its scores of its own
        training rows do not (it separates them)."""
        a = scipy.linalg.solve_triangular(self.factor, np.asarray(u, dtype=np.float64), lower=True, trans="T")
        own = np.zeros(self.features.shape[0])
        own[self.pivots] = a * self.norms[self.pivots]
        return own

    def weights(self, u: np.ndarray) -> np.ndarray:
        """w = X'Bu, (d,) for coordinates u (r,), or (d, C) for (r, C): a column a class."""
        w = self.X[self.pivots].T @ scipy.linalg.solve_triangular(self.factor, u, lower=True, trans="T")
        return np.asarray(w).reshape((self.X.shape[1], *u.shape[1:]))

    def expand(self, model: Model, scale: np.ndarray) -> Model:
        """``model`` (trained on Φ, unscaled) in the columns of X: coef X'Bu / ``scale``, X's scale."""
        coef = self.weights(np.asarray(model.coef, dtype=np.float64))
        return dataclasses.replace(model, coef=coef / scale.reshape((-1,) + (1,) * (coef.ndim - 1)), scale=scale)

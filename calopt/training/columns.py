"""Training on the columns present in the training rows: memory that grows with the non-zeros, not the width.

A LIBSVM file of 400 rows with one feature index at 10⁷ is 10⁷ columns wide, and the default
(L-BFGS under the settings selection: 18 stacked models with a memory of 10) would hold
(10, 18, 10⁷) float64 histories: 23 GB for a 14 KB file. A column with no stored entry in
the training rows gets no gradient from any row, so a linear model trained from 0 keeps
its weight at 0; with an L2 penalty (or none) 0 is the exact optimum there too. So the
solvers need only the present columns: :func:`on_present_columns` maps the training (and
evaluation) rows onto them once (:class:`PresentColumns`, O(non-zeros), no width-sized
array), trains, and expands the coefficients to the full width (weight 0, scale 1 where a
column never appeared) for the model. Everything in between sees the present columns only:
the scaling, the solvers' states, the selection's models, the checkpoints, and the selection's
"as many features as rows" (a column no row holds cannot fit a row: a stray index at 10⁷
does not turn a data set into a wide one).

The map applies where the data are scipy.sparse, at least half of the columns
(:data:`ABSENT_SHARE`) are absent, and every algorithm trained declares
:attr:`~calopt.algorithms.Algorithm.absent_columns_inert` (mirror descent, whose predictors
are the columns, and SLND, whose sample grows with them, do not: they train at the full
width). With half absent it at least halves every width-sized array of the solvers. Below
that the data are trained as they are: dropping empty columns regroups the solvers' sums
over the features (inner products, norms), which moves a model's last bits (relative
differences of about 1e-16 on the built-in algorithms), and a few empty columns save
nothing that matters. So every model with few absent columns, or none, is unchanged to the
bit (the first 2,000 rows of a9a, 6 of 123 columns absent, among them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from calopt.backends import is_sparse
from calopt.errors import ParameterError
from calopt.models.linear import Model
from calopt.training.plan import FitPlan

__all__ = ["ABSENT_SHARE", "PresentColumns", "on_present_columns"]

#: The map applies when at least this share of the training columns has no stored entry.
ABSENT_SHARE = 0.5


@dataclass(frozen=True)
class PresentColumns:
    """The columns of a sparse matrix with a stored entry (``present``, increasing) among ``width``."""

    present: np.ndarray
    width: int

    @classmethod
    def of(cls, X: Any) -> PresentColumns | None:
        """The present columns of scipy.sparse ``X``; None where the map does not apply (X not
        sparse, or fewer than :data:`ABSENT_SHARE` of its columns absent)."""
        if not is_sparse(X):
            return None
        width, indices = int(X.shape[1]), X.tocsr().indices
        if width <= 8 * indices.size:  # a mask of the width costs less than the indices: O(nnz), no sort
            mask = np.zeros(width, dtype=bool)
            mask[indices] = True
            present = np.flatnonzero(mask)
        else:  # far wider than the entries (the case this is for): sort the few indices
            present = np.unique(indices).astype(np.int64)
        if width - present.size < ABSENT_SHARE * width:
            return None
        return cls(present, width)

    def compact(self, X: Any, what: str = "X") -> Any:
        """Sparse ``X`` (``width`` columns) on the present columns only, in their order; entries in
        other columns are dropped (a column absent from the training rows has weight 0)."""
        csr = X.tocsr()
        if csr.shape[1] != self.width:
            raise ParameterError(f"{what} has {csr.shape[1]} features; the training data have {self.width}")
        at = np.searchsorted(self.present, csr.indices)
        hit = at < self.present.size
        hit[hit] = self.present[at[hit]] == csr.indices[hit]
        data, indptr = csr.data, csr.indptr
        if not hit.all():  # each row keeps its entries in present columns
            data, at = data[hit], at[hit]
            indptr = np.concatenate([[0], np.cumsum(hit)])[indptr].astype(indptr.dtype)
        return type(csr)((data, at.astype(csr.indices.dtype), indptr), shape=(csr.shape[0], self.present.size))

    def expand(self, model: Model) -> Model:
        """``model`` (trained on the present columns) at the full width: coefficients 0 and scale 1
        in the other columns; (d,) or (d, C) as the model's are."""
        coef = np.zeros((self.width, *model.coef.shape[1:]), dtype=model.coef.dtype)
        coef[self.present] = model.coef
        scale = None
        if model.scale is not None:
            scale = np.ones(self.width, dtype=np.float64)
            scale[self.present] = model.scale
        return dataclasses.replace(model, coef=coef, scale=scale)


def on_present_columns(fit: Callable[..., Model], X: Any, labels: Any, plan: FitPlan, *,
                       eval_set: tuple[Any, Any] | None = None, **keywords: Any) -> Model:
    """``fit(X, labels, plan, eval_set=eval_set, **keywords)``, on the present columns of sparse
    ``X`` (and of a sparse ``eval_set``) where :meth:`PresentColumns.of` applies and every algorithm
    of the plan is :attr:`~calopt.algorithms.Algorithm.absent_columns_inert`, the model expanded
    to X's width; as it is elsewhere."""
    columns = PresentColumns.of(X)
    if columns is not None and not all(a.absent_columns_inert for a in plan.components.algorithms):
        columns = None
    if columns is not None and eval_set is not None and not is_sparse(eval_set[0]):
        columns = None  # a dense evaluation set is as wide as X already: nothing to save
    if columns is None:
        return fit(X, labels, plan, eval_set=eval_set, **keywords)
    if eval_set is not None:
        eval_set = (columns.compact(eval_set[0], "eval_set X"), eval_set[1])
    return columns.expand(fit(columns.compact(X), labels, plan, eval_set=eval_set, **keywords))

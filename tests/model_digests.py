"""The bit-identity fixture: SHA-256 digests of models trained by every registered algorithm.

``python tests/model_digests.py`` trains each case of :data:`CASES` and writes
``tests/data/model_digests.json``: per case the SHA-256 of the coefficients' and the
intercepts' float64 bytes and the threshold (``float.hex``, exact), as
:func:`digest` computes them; ``tests/test_bit_identical.py`` trains the same cases
and compares.

The committed file was produced by commit 06f4e84 (main, before schedules became parts
of the training loop, issue 24 item 3), and regenerated since, deliberately, when
lbfgs's inner products moved from BLAS ``vecdot`` to ``einsum`` (issue 25: the same sums
in another order, so the last bits of lbfgs/multinomial models moved; the wide benchmark's
figures held on both halves), for the two multinomial cases when dense features came to be
standardized for the multinomial model (issue 26), and for the two lbfgs cases with selection when
stacked models' flat parameters came to be C-ordered (issue 25: the per-model inner products of the
gradient read contiguous rows, so their sums' last bits moved; the wide benchmark's figures held).
It is a regression fixture: a change that means to leave every model as it was must pass it
unchanged. Regenerate it only for a deliberate change of the
models, and say so in the commit that does.

The data are small and deterministic: the first rows of the embedded a9a and ijcnn1
training sets (binary) and scikit-learn's ``load_digits`` (multiclass, shipped with
scikit-learn, so CI needs no shared data).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

FIXTURE = Path(__file__).parent / "data" / "model_digests.json"
#: Rows of each binary data set used (the first ones of the training file).
ROWS = 2000
EPOCHS = 3
#: Rows per ``partial_fit`` call.
CHUNK = 250


class Case(NamedTuple):
    """One trained model: ``calopt.fit`` keywords on a data set."""

    data: str  #: "a9a", "ijcnn1" or "digits"
    algorithm: str
    measure: str = "f1"
    #: ``calopt.fit``'s ``select``, or "partial": :meth:`~calopt.sklearn.CaloptClassifier.partial_fit`
    #: on chunks of :data:`CHUNK` rows.
    select: str = "none"
    batch_size: int | None = None
    constraints: str | None = None


def _binary(algorithm: str, measure: str = "f1", *, selection: bool = True,
            constraints: str | None = None) -> list[Case]:
    """The algorithm on a9a and ijcnn1, without selection, and with the default selection when ``selection``."""
    modes = ("none", "auto") if selection else ("none",)
    return [Case(data, algorithm, measure, select, constraints=constraints)
            for data in ("a9a", "ijcnn1") for select in modes]


#: Every registered algorithm with its default selection and without (where it applies), then
#: the variants whose code paths hold a schedule, a step counter, a projection or an average.
CASES: tuple[Case, ...] = (
    *_binary("spade", "gmean"),
    *_binary("stamp"),
    *_binary("amp"),
    *_binary("plugin"),
    *_binary("sgd"),
    *_binary("gd"),
    *_binary("subgradient"),
    *_binary("lbfgs"),
    *_binary("mirror-descent"),
    *_binary("constrained", constraints="fpr<=0.2"),
    *_binary("slnd", selection=False),
    Case("digits", "slnd"),
    Case("digits", "slnd", select="auto"),
    Case("digits", "multinomial"),
    Case("digits", "multinomial", select="auto"),
    Case("digits", "slnd:average=false,precondition=false"),
    Case("a9a", "spade:radius=1.0", "gmean"),
    Case("a9a", "spade:step=10.0,average=false", "qmean"),
    Case("ijcnn1", "spade:step=10.0", "gmean", batch_size=1),
    Case("a9a", "stamp:radius=1.0,restart=true"),
    Case("a9a", "stamp:step=10.0,average=false,level=reward"),
    Case("ijcnn1", "stamp:step=10.0,stage_length=7", batch_size=1),
    Case("a9a", "amp:step=10.0,radius=1.0,inner_epochs=2"),
    Case("a9a", "sgd:step=1.0,average=false"),
    Case("ijcnn1", "sgd:step=1.0", batch_size=1),
    Case("a9a", "subgradient:iterations=2"),
    Case("a9a", "mirror-descent:temperature=theorem"),
    Case("a9a", "mirror-descent:beta0=0.5"),
    Case("ijcnn1", "mirror-descent:signed=false"),
    Case("a9a", "constrained:step=10.0,average=false"),
    Case("ijcnn1", "constrained:step=10.0", "gmean", constraints="tpr>=0.8"),
    Case("a9a", "spade", "gmean", select="partial"),
    Case("ijcnn1", "stamp", select="partial"),
    Case("a9a", "sgd:step=1.0", select="partial"),
    Case("digits", "spade:step=10.0", "gmean", select="partial"),
)


def key(case: Case) -> str:
    """The case's name in the fixture."""
    parts = [case.data, case.algorithm, case.measure, f"select={case.select}"]
    if case.batch_size is not None:
        parts.append(f"batch={case.batch_size}")
    if case.constraints is not None:
        parts.append(case.constraints)
    return " ".join(parts)


def load(name: str) -> tuple[Any, np.ndarray]:
    """(X, y) of a data set: the first :data:`ROWS` rows of a9a or ijcnn1 (sparse), or digits."""
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return np.asarray(X[:900], dtype=np.float64), y[:900]
    from calopt import datasets

    data = datasets.load(name, "train")
    return data.X[:ROWS], np.asarray(data.labels[:ROWS])


def digest(model: Any) -> dict[str, str | None]:
    """SHA-256 of the coefficients and of the intercepts (float64 bytes) and the threshold (hex)."""
    threshold = getattr(model, "threshold", None)
    return {
        "coef": hashlib.sha256(np.ascontiguousarray(model.coef, dtype=np.float64).tobytes()).hexdigest(),
        "intercept": hashlib.sha256(np.ascontiguousarray(model.intercept, dtype=np.float64).tobytes()).hexdigest(),
        "threshold": None if threshold is None else float(threshold).hex(),
    }


def train(case: Case, data: dict[str, tuple[Any, np.ndarray]]) -> Any:
    """The model of ``case`` (seed 0, :data:`EPOCHS` passes without selection, at most 4 with)."""
    import calopt

    X, y = data[case.data]
    if case.select == "partial":
        return _partial(case, X, y)
    budget = {"epochs": EPOCHS} if case.select == "none" else {"max_epochs": 4, "patience": 2}
    return calopt.fit(X, y, algorithm=case.algorithm, measure=case.measure, select=case.select, seed=0,
                      batch_size=case.batch_size, constraints=case.constraints, **budget)


def _partial(case: Case, X: Any, y: np.ndarray) -> Any:
    """The estimator after ``partial_fit`` on consecutive chunks of the rows (seed 0)."""
    from calopt.sklearn import CaloptClassifier

    estimator = CaloptClassifier(case.measure, algorithm=case.algorithm, random_state=0)
    for start in range(0, X.shape[0], CHUNK):
        estimator.partial_fit(X[start:start + CHUNK], y[start:start + CHUNK], classes=np.unique(y))
    return _Fitted(estimator.coef_, estimator.intercept_)


class _Fitted(NamedTuple):
    coef: np.ndarray
    intercept: np.ndarray


def digests() -> dict[str, dict[str, str | None]]:
    """The digest of every case's model."""
    data = {name: load(name) for name in sorted({case.data for case in CASES})}
    return {key(case): digest(train(case, data)) for case in CASES}


def main() -> None:
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(CASES)} digests to {FIXTURE}", file=sys.stderr)


if __name__ == "__main__":
    main()

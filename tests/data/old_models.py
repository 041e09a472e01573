"""Model files written by calopt before the typed fit report: ``tests/data/old-models/*.npz``.

The committed files were written by commit 8f3079a (main, the last before
:class:`~calopt.models.report.FitReport` replaced the untyped ``model.options`` dict,
issue 24 item 2), with that commit's code::

    git archive 8f3079a | tar -x -C /tmp/calopt-base
    PYTHONPATH=/tmp/calopt-base:/tmp/calopt-base/plugins python tests/data/old_models.py

``tests/test_fit_report.py`` loads them with the current code. Each file holds one kind of
``options`` the old code wrote: a settings selection under rate constraints, one class at
a time (score spreads), SLND (its rank and sample), a DataFrame's column names, a streamed
CSV (the stream's account and how the file was read), ``partial_fit`` and an aggregate.
Do not regenerate them with later code: they stand for files users already have.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "old-models"


def main() -> None:
    import calopt
    import pandas as pd
    from calopt import datasets
    from calopt.io.stream import open_stream
    from calopt.sklearn import CaloptClassifier
    from sklearn.datasets import load_digits

    OUT.mkdir(exist_ok=True)
    a9a = datasets.load("a9a", "train")
    X, y = a9a.X[:600], np.asarray(a9a.labels[:600])
    calopt.fit(X, y, constraints="fpr<=0.2", max_epochs=3, patience=2, seed=0).save(OUT / "constrained.npz")
    digits_X, digits_y = load_digits(return_X_y=True)
    digits_X, digits_y = digits_X[:300], digits_y[:300]
    calopt.fit(digits_X, digits_y, algorithm="spade:step=10.0", measure="gmean", select="none", epochs=2,
               seed=0).save(OUT / "per-class.npz")
    calopt.fit(digits_X, digits_y, algorithm="slnd", select="none", epochs=2, seed=0).save(OUT / "slnd.npz")
    frame = pd.DataFrame(X[:, :6].toarray(), columns=[f"f{j}" for j in range(6)])
    first = calopt.fit(frame, y, algorithm="gd", select="none", epochs=2, seed=0)
    first.save(OUT / "dataframe.npz")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.csv"
        frame.assign(label=y).to_csv(path, index=False)
        calopt.fit(open_stream(path), algorithm="spade", measure="gmean", epochs=2, seed=0).save(OUT / "stream.npz")
    estimator = CaloptClassifier("gmean", algorithm="spade:step=10.0", random_state=0)
    for start in range(0, 300, 100):
        estimator.partial_fit(digits_X[start:start + 100], digits_y[start:start + 100], classes=np.unique(digits_y))
    estimator.model_.save(OUT / "partial-fit.npz")
    second = calopt.fit(frame, y, algorithm="sgd", select="none", epochs=2, seed=0)
    calopt.aggregate([first, second], frame.to_numpy(), y, epochs=2, seed=0).save(OUT / "aggregate.npz")
    print(f"wrote {len(list(OUT.glob('*.npz')))} model files to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""The epoch-floor benchmark's folded products against the scaled rows' own, and its epochs
serving every row once on a small mapping."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_modules import load

floor = load("epoch_floor")


def test_folded_products_equal_the_scaled_rows_products():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 7)).astype(np.float32)
    scale = np.abs(X).max(axis=0).astype(np.float64)
    w, c = rng.standard_normal(7), rng.standard_normal(50)
    folded = floor.FoldedRows(X, 1.0 / scale)
    scaled = X.astype(np.float64) / scale
    assert folded.shape == X.shape
    np.testing.assert_allclose(folded @ w, scaled @ w, rtol=1e-5, atol=1e-5)  # float32 products
    np.testing.assert_allclose(folded.T @ c, scaled.T @ c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("run", [None, 4, 16])
def test_an_epoch_reads_every_row_once(tmp_path, monkeypatch, run):
    """Each path's epoch hands the step every row exactly once (rows tagged by their number)."""
    n, d = 96, 3
    X = np.zeros((n, d), dtype=np.float32)
    X[:, 0] = np.arange(n)
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    seen = []
    monkeypatch.setattr(floor, "_step", lambda w, Xb, yb, scale, folded: (seen.extend(np.asarray(Xb)[:, 0]), w)[1])
    scale = np.ones(d)
    seconds = floor.epoch(mapped, np.ones(n), scale, 16, run, run is not None, np.random.default_rng(0))
    assert seconds >= 0 and sorted(int(v) for v in seen) == list(range(n))
    assert floor.read_bound(mapped) > 0

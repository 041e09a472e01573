"""The epoch-floor benchmark's epochs serving every row once on a small mapping (its folded
products are calopt's FoldedRows, tested in test_npy_stream.py)."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_modules import load

floor = load("epoch_floor")


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

"""The medium-size benchmark's harness: its binary task rule against a plain loop, its fixed
halves, and its report's rows and summary against numbers written out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from benchmark_modules import load

bench = load("bench_medium")


def _rarest_eligible(y: np.ndarray, share: float) -> object:
    """The rule as a plain loop: over the classes in sorted order, the one with the fewest rows
    among those holding at least ``share`` of them (the first on a tie)."""
    best, best_count = None, None
    for label in sorted(set(y.tolist())):
        count = sum(1 for value in y.tolist() if value == label)
        if count >= share * len(y) and (best_count is None or count < best_count):
            best, best_count = label, count
    return best


@pytest.mark.parametrize("counts", [
    {"a": 500, "b": 30, "c": 9, "d": 461},   # c under 2%: b is the rarest eligible class
    {"x": 20, "y": 20, "z": 960},             # a tie at exactly 2%: the first in sorted order
    {7: 300, 3: 300, 5: 400},                 # numeric labels
])
def test_binary_task_takes_the_rarest_class_with_two_percent(counts):
    y = np.repeat(np.array(list(counts)), list(counts.values()))
    np.random.default_rng(0).shuffle(y)
    labels, positive = bench.binary_task(y)
    assert positive == _rarest_eligible(y, bench.MIN_SHARE)
    np.testing.assert_array_equal(labels, (y == positive).astype(int))


def test_halves_alternate_by_rows_and_cover_every_set():
    rows = {"fars": 100_968, "kr_vs_k": 28_056, "letter": 20_000, "nursery": 12_960, "pendigits": 10_992,
            "mnist-10k": 10_000, "optdigits": 5_620}
    assert set(bench.HALVES) == set(bench.SHARED) | set(bench.COMMON) == set(rows)
    by_rows = sorted(rows, key=rows.get, reverse=True)
    assert [bench.HALVES[n] for n in by_rows] == ["dev", "confirm"] * 3 + ["dev"]


def test_report_rows_and_summary(tmp_path, monkeypatch):
    route = {"datasets": {"letter": {"train_rows": 14000, "features": 16, "test_positives": 220},
                          "nursery": {"train_rows": 9072, "features": 19, "test_positives": 98}},
             "cells": {"letter|f1|split0": {"value": 0.50, "seconds": 2.0},
                       "letter|f1|split1": {"value": 0.60, "seconds": 1.0},
                       "nursery|f1|split0": {"value": 0.80, "seconds": 4.0}},
             "twins": {"letter|f1|split0": {"value": 0.49, "seconds": 2.0},
                       "letter|f1|split1": {"value": 0.63, "seconds": 1.0},
                       "nursery|f1|split0": {"value": 0.80, "seconds": 4.0}}}
    ours = {"cells": {"letter|f1|split0": {"value": 0.52, "seconds": 1.0},
                      "letter|f1|split1": {"value": 0.57, "seconds": 1.5},
                      "nursery|f1|split0": {"value": 0.81, "seconds": 1.0},
                      "nursery|f1|split1": {"value": 0.9, "seconds": 1.0}},  # no route: left out
            "datasets": {}}
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(bench, "ROUTE_FILE", tmp_path / "medium_route.json")
    (tmp_path / "medium_route.json").write_text(json.dumps(route))
    (tmp_path / "medium_t.json").write_text(json.dumps(ours))
    got = {r["key"]: r for r in bench.rows("t")}
    assert sorted(got) == ["letter|f1|split0", "letter|f1|split1", "nursery|f1|split0"]
    assert got["letter|f1|split1"]["margin"] == pytest.approx(-0.03)
    assert got["letter|f1|split1"]["twin_margin"] == pytest.approx(0.03)
    assert got["letter|f1|split0"]["ratio"] == pytest.approx(0.5)
    lines = bench.report("t", None).splitlines()
    letter = next(line for line in lines if line.startswith("| letter |"))
    # ratios 0.5 and 1.5: median 1.00, max 1.50; margins +0.02 and −0.03: mean −0.005; twin (−0.01 + 0.03)/2
    assert "| 14,000 × 16 | 220 | 2 | 1.00 (1.50) | -0.0050 | +0.0100 | 1 (0) |" in letter
    confirm = next(line for line in lines if line.startswith("| **confirm half** |"))
    assert "| 1 | 0.25 (0.25) | +0.0100 | +0.0000 | 0 (0) |" in confirm

"""The wide benchmark's summary statistics, on a hand-made table of cells.

Every expected number below was worked out by hand from the table, not by the code.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_suite.py"
_spec = importlib.util.spec_from_file_location("bench_suite", _PATH)
suite = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_suite", suite)  # dataclasses look their module up there
_spec.loader.exec_module(suite)


def _cell(dataset, measure, margin, train_rows, test_positives, calopt_s, route_s, algorithm,
          error=None):
    route = 0.5
    return {"dataset": dataset, "measure": measure, "calopt": route + margin, "route": route,
            "margin": margin, "train_rows": train_rows, "test_positives": test_positives,
            "calopt_seconds": calopt_s, "route_seconds": route_s, "algorithm": algorithm,
            "error": error}


CELLS = [
    _cell("A", "f1", +0.05, 500, 40, 1.0, 10.0, "stamp"),      # won
    _cell("A", "gmean", -0.01, 500, 40, 2.0, 4.0, "spade"),    # tied (on the edge), within
    _cell("B", "f1", -0.03, 2000, 35, 1.0, 5.0, "stamp"),      # lost, resolved, below −0.02
    _cell("B", "gmean", 0.0, 2000, 30, 1.0, 2.0, "spade"),     # tied; 30 positives is resolved
    _cell("C", "f1", -0.015, 10000, 5, 3.0, 3.0, "stamp"),     # lost, too few positives
    _cell("C", "gmean", +0.02, 10000, 29, 1.0, 4.0, "spade"),  # won; 29 is not resolved
    _cell("D", "f1", -0.30, 800, 12, None, 6.0, "error", error="ValueError: boom"),  # lost
    _cell("D", "gmean", +0.01, 4000, 100, 1.0, 8.0, "spade"),  # tied (on the edge), within
]


def test_won_tied_lost_and_margins():
    overall = suite.summarize(CELLS)["overall"]
    assert (overall["won"], overall["tied"], overall["lost"]) == (2, 3, 3)
    assert overall["mean_margin"] == pytest.approx(-0.275 / 8)
    # sorted: −.30 −.03 −.015 −.01 | 0 .01 .02 .05
    assert overall["median_margin"] == pytest.approx(-0.005)


def test_buckets():
    summary = suite.summarize(CELLS)
    rows = [(b["won"], b["tied"], b["lost"]) for b in summary["by_train_rows"]]
    assert rows == [(1, 1, 1), (0, 2, 1), (1, 0, 1)]  # 4,000 rows is in the middle bucket
    positives = [(b["won"], b["tied"], b["lost"]) for b in summary["by_test_positives"]]
    assert positives == [(0, 0, 1), (1, 0, 1), (1, 3, 1)]
    assert summary["by_test_positives"][0]["tpr_se_at_median"] == pytest.approx((0.16 / 5) ** 0.5)


def test_resolved_cells_and_time():
    summary = suite.summarize(CELLS)
    assert summary["resolved"] == {"cells": 5, "within": 4, "share_within": 0.8, "below_far": 1}
    # ratios of the 7 timed cells: .1 .125 .2 .25 .5 .5 1
    assert summary["time"]["median_ratio"] == pytest.approx(0.25)
    assert summary["time"]["median_calopt_seconds"] == 1.0
    assert summary["time"]["median_route_seconds"] == 4.0


def test_criteria_worst_and_groups():
    summary = suite.summarize(CELLS)
    assert [c["pass"] for c in summary["criteria"]] == [False, False, False, False, True]
    assert [(r["dataset"], r["measure"]) for r in summary["worst"][:3]] == [
        ("D", "f1"), ("B", "f1"), ("C", "f1")]
    assert [r["dataset"] for r in summary["errors"]] == ["D"]
    assert summary["by_measure"]["gmean"]["mean_margin"] == pytest.approx(0.02 / 4)
    assert summary["by_algorithm"]["spade"]["cells"] == 4
    assert summary["by_algorithm"]["stamp"]["mean_margin"] == pytest.approx(0.005 / 3)


def test_all_criteria_can_pass():
    cells = [_cell("E", "f1", +0.02, 5000, 50, 1.0, 4.0, "stamp"),
             _cell("E", "min", 0.0, 5000, 50, 1.0, 4.0, "spade")]
    assert all(c["pass"] for c in suite.summarize(cells)["criteria"])


def test_measures_from_counts():
    # TP 8, FP 2, TN 85, FN 5: TPR 8/13, TNR 85/87
    value = {m: suite.measure_from_counts(m, 8, 2, 85, 5) for m in suite.MEASURES}
    assert value["min"] == pytest.approx(8 / 13)
    assert value["f1"] == pytest.approx(16 / 23)
    assert value["jaccard"] == pytest.approx(8 / 15)
    assert value["gower-legendre"] == pytest.approx(93 / 96.5)
    assert value["gmean"] == pytest.approx((8 / 13 * 85 / 87) ** 0.5)
    assert suite.measure_from_counts("hmean", 0, 0, 10, 5) == 0.0  # 0/0 counts as 0


def test_across_splits_averages_each_variant_and_counts_the_auto_choices(tmp_path, monkeypatch):
    """--report --across: one row per (variant, split) with the criteria, their mean, and the
    arms an ``auto`` variant chose, from results files written here by hand."""
    monkeypatch.setattr(suite, "RESULTS", tmp_path)
    monkeypatch.setattr(suite, "ROUTE_FILE", tmp_path / "suite_route.json")
    keys = [f"{name}|f1|split{s}" for s in (0, 1) for name in ("A", "B")]
    route = {"cells": {k: {"value": 0.5, "seconds": 2.0} for k in keys}, "datasets": {}}
    suite.write_results(tmp_path / "suite_route.json", route)
    info = {"A": {"train_rows": 500, "test_positives": 40}, "B": {"train_rows": 900, "test_positives": 10}}
    for s, (a, b) in enumerate([(0.53, 0.47), (0.495, 0.525)]):
        cells = {f"A|f1|split{s}": {"value": a, "seconds": 1.0, "algorithm": "lbfgs:C=10.0"},
                 f"B|f1|split{s}": {"value": b, "seconds": 0.5, "algorithm": "stamp:step=10.0"}}
        suite.write_results(tmp_path / f"suite_auto-s{s}.json", {"cells": cells, "datasets": info})
    text = suite.across(["auto"], [0, 1], ["f1"])
    assert "| auto | 0 | 2 | +0.0000 | +0.0000 | 1.000 | 0 | 0.38 |" in text  # margins +0.03, −0.03
    assert "| auto | 1 | 2 | +0.0100 | +0.0100 | 1.000 | 0 | 0.38 |" in text  # −0.005, +0.025
    assert "| **auto** | mean | 4 | +0.0050 | +0.0050 | 1.000 | 0.0 | 0.38 |" in text
    assert "auto split 0: the measure's own solver in 1 cells, the plug-in route in 1" in text


def test_small_runs_only_the_sets_the_wide_benchmark_leaves_out(monkeypatch, tmp_path):
    """--small: a set under 300 rows or 15 positives is excluded from the wide benchmark and is the
    only kind loaded with --small; its results go apart."""
    rng = np.random.default_rng(0)

    def table(rows, positives):
        return {"data": rng.normal(size=(rows, 3)), "target": np.r_[np.ones(positives), np.zeros(rows - positives)],
                "name": f"{rows} rows"}

    fake = type("Module", (), {"load_tiny": staticmethod(lambda: table(120, 9)),
                               "load_big": staticmethod(lambda: table(400, 40))})
    monkeypatch.setattr(suite, "_imbalanced_module", lambda: fake)
    monkeypatch.setattr(suite, "RESULTS", tmp_path)
    for small, kept, left_out in ((False, "big", "tiny"), (True, "tiny", "big")):
        monkeypatch.setattr(suite, "SMALL", small)
        assert suite._load_imbalanced(kept, 0).X_train.shape[0] == round(0.7 * (400 if kept == "big" else 120))
        with pytest.raises(suite.Excluded):
            suite._load_imbalanced(left_out, 0)
        assert suite.results_path("x").name == ("suite_small_x.json" if small else "suite_x.json")


def _bench_text():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_text.py"
    spec = importlib.util.spec_from_file_location("bench_text", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_text_reads_both_collections(tmp_path):
    """The SMS file (with its header line) and the sentences' three files, one of whose sentences
    holds U+0085, which ``str.splitlines`` would take for a line break."""
    bench_text = _bench_text()
    sms = tmp_path / "SMSSpamCollection"
    sms.write_text("cat\tmsg\nham\tok lar\nspam\tWIN a prize\nham\tsee you\n", encoding="utf-8")
    name, texts, labels = bench_text.messages(sms)
    assert name == "sms" and texts == ["ok lar", "WIN a prize", "see you"] and labels.tolist() == [0, 1, 0]
    folder = tmp_path / "sentences"
    folder.mkdir()
    for file, content in (("amazon_cells_labelled.txt", "Great phone.\t1\nBroke at once.\t0\n"),
                          ("imdb_labelled.txt", "The script is\u0085was there a script?  \t0\n"),
                          ("yelp_labelled.txt", "Loved it.\t1\r\n")):
        (folder / file).write_text(content, encoding="utf-8", newline="")
    name, texts, labels = bench_text.messages(folder)
    assert name == "sentences" and len(texts) == 4 and labels.tolist() == [1, 0, 0, 1]
    assert texts[2] == "The script is\u0085was there a script?  "
    (folder / "yelp_labelled.txt").write_text("no label here\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="yelp_labelled.txt:1"):
        bench_text.messages(folder)


def test_bench_text_reads_bbc_with_its_rarest_category_positive(tmp_path):
    """BBC News: train, val and test CSVs (text,category, quoted text with commas and newlines),
    read in that order; the rarest category is positive, ties broken by name."""
    bench_text = _bench_text()
    folder = tmp_path / "bbc"
    folder.mkdir()
    (folder / "train.csv").write_text('text,category\n"a, b",sport\n"c\nd",tech\n', encoding="utf-8")
    (folder / "val.csv").write_text("text,category\ne,sport\nf,business\n", encoding="utf-8")
    (folder / "test.csv").write_text("text,category\ng,business\nh,sport\n", encoding="utf-8")
    name, texts, labels = bench_text.messages(folder)
    assert name == "bbc" and texts == ["a, b", "c\nd", "e", "f", "g", "h"]
    assert labels.tolist() == [0, 1, 0, 0, 0, 0]  # tech: 1 article (business 2, sport 3)


def test_bench_text_summary_counts_calopt_and_the_twin_against_the_route():
    bench_text = _bench_text()
    cells = {"a": {"margin": 0.02, "twin_margin": 0.0}, "b": {"margin": -0.03, "twin_margin": -0.005},
             "c": {"margin": -0.01, "twin_margin": 0.01}, "d": {"margin": 0.0, "twin_margin": -0.025}}
    summary = bench_text.summarize(cells)
    assert summary["cells"] == 4
    assert summary["mean_margin"] == pytest.approx(-0.005) and summary["twin_mean_margin"] == pytest.approx(-0.005)
    assert summary["median_margin"] == pytest.approx(-0.005) and summary["twin_median_margin"] == pytest.approx(-0.0025)
    assert summary["within_0.01"] == 0.75 and summary["twin_within_0.01"] == 0.75
    assert summary["below_-0.02"] == 1 and summary["twin_below_-0.02"] == 1
    assert summary["worst"] == -0.03 and summary["twin_worst"] == -0.025


# -- the development / confirmation halves (issue 25) ---------------------------------

def _committed_split():
    return json.loads(suite.SPLIT_FILE.read_text())


def test_the_committed_split_is_the_rule_applied_to_the_committed_sets():
    """Fixed: split.json is make_split of the sets the committed split-0 results hold, and a few
    assignments are pinned here, so neither a new rule nor a new set moves a set silently."""
    committed = _committed_split()
    assert suite.make_split(suite.split_sets_from_results()) == committed
    halves = suite.load_split()
    pinned = {"magic04": "dev", "w8a": "dev", "hiva": "dev", "ecoli1": "dev", "glass0": "confirm",
              "ijcnn1": "confirm", "a9a": "confirm", "sylva": "confirm", "yeast1": "confirm", "pima": "dev"}
    assert {name: halves[name] for name in pinned} == pinned


def test_the_split_is_disjoint_and_covers_every_set_of_both_benchmarks():
    committed = _committed_split()
    dev, confirm = set(committed["halves"]["dev"]), set(committed["halves"]["confirm"])
    assert not dev & confirm
    wide = set(suite.load_results(suite.RESULTS / "suite_default-s0.json")["datasets"])
    small = set(suite.load_results(suite.RESULTS / "suite_small_default-s0.json")["datasets"])
    assert (len(wide), len(small)) == (79, 39)
    assert dev | confirm == wide | small


def test_the_split_keeps_families_together_and_is_balanced():
    committed = _committed_split()
    halves, sets = suite.load_split(), committed["sets"]
    for name in halves:  # sets cut from the same rows never straddle the halves
        assert all(halves[other] == halves[name] for other in halves if suite.family(other) == suite.family(name))
    assert halves["wisconsin"] == halves["breast-cancer"]
    for benchmark in ("wide", "small"):
        members = {h: [sets[n] for n in committed["halves"][h] if sets[n]["benchmark"] == benchmark]
                   for h in suite.HALVES}
        assert abs(len(members["dev"]) - len(members["confirm"])) <= 2
        medians = [np.median([s["rows"] for s in members[h]]) for h in suite.HALVES]
        assert max(medians) / min(medians) < 2
    for half in suite.HALVES:  # each wide half holds large and wide sets, not only small dense ones
        wide = [sets[n] for n in committed["halves"][half] if sets[n]["benchmark"] == "wide"]
        assert sum(s["rows"] > 10_000 for s in wide) >= 2
        assert sum(s["features"] >= 100 for s in wide) >= 2


def test_make_split_by_hand():
    """Families whole, the largest family first, then the counts balanced and ties to the half
    with fewer log-rows: worked out by hand."""
    def s(rows, benchmark="wide"):
        return {"benchmark": benchmark, "rows": rows, "features": 5}

    sets = {"yeast1": s(1000), "yeast2": s(1000), "yeast_3_vs_4": s(500),  # family yeast, 3 sets
            "pima": s(700), "german": s(1000), "magic04": s(19000), "iris0": s(150, "small")}
    halves = suite.make_split(sets)["halves"]
    # imbalance = Σ over wide, small of |count here after − count there|:
    # yeast (3 sets) first: 3 either way, no rows yet: dev. Then by rows: iris0 (small): 3 + 1
    # either way, no small rows yet: dev. pima: dev 4 + 1, confirm 2 + 1: confirm. german: dev
    # 3 + 1, confirm 1 + 1: confirm. magic04: dev 2 + 1, confirm 0 + 1: confirm.
    assert halves == {"dev": ["iris0", "yeast1", "yeast2", "yeast_3_vs_4"],
                      "confirm": ["german", "magic04", "pima"]}
    assert suite.family("kr_vs_k_zero_vs_eight") == suite.family("kr_vs_k_one_vs_fifteen") == "kr"
    assert suite.family("sk-digits-8") == "sk-digits" != suite.family("sk-wine-0")


def test_halves_report_keeps_each_half_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "RESULTS", tmp_path)
    monkeypatch.setattr(suite, "ROUTE_FILE", tmp_path / "suite_route.json")
    monkeypatch.setattr(suite, "SPLIT_FILE", tmp_path / "split.json")
    (tmp_path / "split.json").write_text(json.dumps({"halves": {"dev": ["A"], "confirm": ["B"]}}))
    info = {"A": {"train_rows": 500, "test_positives": 40}, "B": {"train_rows": 900, "test_positives": 40}}
    route = {"cells": {f"{n}|f1|split0": {"value": 0.5, "seconds": 2.0} for n in "AB"}, "datasets": info}
    suite.write_results(tmp_path / "suite_route.json", route)
    cells = {"A|f1|split0": {"value": 0.53, "seconds": 1.0, "algorithm": "lbfgs"},
             "B|f1|split0": {"value": 0.47, "seconds": 1.0, "algorithm": "lbfgs"}}
    suite.write_results(tmp_path / "suite_default-s0.json", {"cells": cells, "datasets": info})
    text = suite.halves_report(["default"], [0], ["f1"])
    dev, confirm = text.split("#### Confirmation")
    assert "| default | 0 | 1 | +0.0300 |" in dev and "-0.0300" not in dev
    assert "| default | 0 | 1 | -0.0300 |" in confirm and "| 1.000 | 0 |" not in confirm
    assert suite.in_half(["A", "B"], "confirm") == ["B"]
    with pytest.raises(SystemExit, match="does not place C"):
        suite.in_half(["A", "C"], "dev")


# -- bench_sizes.py (issue 25) -------------------------------------------------------------

def _bench_sizes():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_sizes.py"
    spec = importlib.util.spec_from_file_location("bench_sizes", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_sizes", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bench_sizes_exact_cut_by_hand():
    """Scores 3, 2, 2, 1 with positives at 3 and one 2: the cuts keep ties together. F1: top 1
    → 2/3, top 3 → 4/5, all → 4/6: the cut below the 2s, threshold 1.5. G-mean: top 1 and top 3
    both √0.5: the first, threshold 2.5."""
    sizes = _bench_sizes()
    scores, positive = np.array([2.0, 3.0, 1.0, 2.0]), np.array([False, True, False, True])
    assert sizes.exact_cut(scores, positive, "f1") == 1.5
    assert sizes.exact_cut(scores, positive, "gmean") == 2.5
    assert sizes.exact_cut(scores, positive, "jaccard") == 1.5  # 2/3 at the top 3, 1/2 at the top 1
    assert sizes.exact_cut(np.array([1.0, 2.0]), np.array([True, True]), "f1") == 0.0  # all positive


def test_bench_sizes_wide_sparse_generator_is_fixed_and_has_the_stated_shape():
    sizes = _bench_sizes()
    a, b = sizes.wide_sparse(quick=True), sizes.wide_sparse(quick=True)
    assert a.X_train.shape == (1_000, 20_000) and a.X_test.shape == (4_000, 20_000)
    assert (a.X_train != b.X_train).nnz == 0 and np.array_equal(a.y_test, b.y_test)
    assert abs(a.X_train.nnz / (1_000 * 20_000) - 0.01) < 0.0005
    assert set(np.unique(a.X_train.data)) == {1.0}
    assert 0.07 < a.y_train.mean() < 0.13
    c = sizes.wide_sparse(quick=True, draw=2)  # another draw: the same shape, other rows and labels
    assert c.X_train.shape == a.X_train.shape and (c.X_train != a.X_train).nnz > 0
    assert abs(c.X_train.nnz / (1_000 * 20_000) - 0.01) < 0.0005 and 0.07 < c.y_train.mean() < 0.13
    assert (sizes.wide_sparse(quick=True, draw=0).X_train != a.X_train).nnz == 0


def test_bench_rare_large_shapes_and_its_split_route():
    """The rare-class benchmark's generator gives the training rows asked for and 30% more as the
    test rows, the positive class at its rate over all of them; its route is the size benchmark's
    split route, whose test value is scikit-learn's F1 of its predictions."""
    from benchmark_modules import load
    from sklearn.metrics import f1_score

    rare = load("bench_rare_large")
    data = rare.make(("tiny-rare", 20_000, 5, 0.01), 0)
    assert data.X_train.shape == (20_000, 5) and data.X_test.shape == (6_000, 5)
    everything = np.concatenate([data.y_train, data.y_test])
    assert abs(everything.mean() - 0.01) < 0.0005
    record = rare.split_route(data, "f1")
    sizes = load("bench_sizes")
    route = sizes.SplitRoute("f1", 1, 0).fit(data.X_train, data.y_train)
    assert record["value"] == pytest.approx(f1_score(data.y_test, route.predict(data.X_test, 0)), abs=1e-12)

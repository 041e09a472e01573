"""Aggregation over the wide benchmark: the aggregate against the best single model (issue 13, item 5).

The datasets, splits, measures and test measures are ``bench_suite.py``'s (imported, not
copied). For each split seed s (``--seeds``; 70/30 stratified with ``random_state=s``,
ijcnn1 and a9a keep their test files) and each (dataset, measure) with at least
``bench_suite.RESOLVED`` (30) test positives in that split — a *cell*:

* base models: ``calopt.fit(X, y, measure=M, algorithm=A, seed=s, select=BASE_SELECT)``
  for every registered algorithm A of M's family, as ``bench_aggregate.py`` picks them
  (mirror descent, ``constrained`` and the multiclass-only ``multinomial`` left out);
  ``--base-select`` (default ``none``: each algorithm's defaults, its one-pass step trial,
  10 passes, threshold on the training rows) keeps the cost bounded — with the selected
  defaults (``auto``) a model cost 0.7-3.9 s on ijcnn1 against 0.1-0.2 s. The base models are
  cached (``results/aggregate_suite_models/``, not committed), so variants of the
  aggregation (``--tag``, ``--aggregate-kwargs``) reuse them;
* the aggregate: ``calopt.aggregate(models, X_train, y_train, measure=M, seed=s,
  **aggregate_kwargs)`` on the same training rows;
* recorded: every single model's test value, the aggregate's, the best single model
  (picked on the test data, the strict comparison) and the gap aggregate − best.

Target (issue 13): gap ≥ −0.005 in ≥ 95% of the cells. Cells below 30 test positives are
not run (listed by ``--report``). Results go to ``results/aggregate_suite_<tag>.json``,
written after every cell (a rerun continues where it stopped).

    python benchmarks/bench_aggregate_suite.py [--seeds 0 1 2] [--datasets 'yeast*'] [--tag default]
    python benchmarks/bench_aggregate_suite.py --tag before --aggregate-kwargs '{"select": "none"}'
    python benchmarks/bench_aggregate_suite.py --report [--tag default] [--compare before]
    python benchmarks/bench_aggregate_suite.py --floor     # how often even the test-best model is within 0.005
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import warnings
from collections import defaultdict
from pathlib import Path
from statistics import mean, median
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_suite as suite  # noqa: E402  (the datasets, splits and measures of the wide benchmark)
from bench_aggregate import TOLERANCE, solvers  # noqa: E402

RESULTS = HERE / "results"
CACHE = RESULTS / "aggregate_suite_models"
TARGET = 0.95  # share of cells within TOLERANCE
BUCKETS = [(30, 100), (100, 1000), (1000, 10**9)]  # test positives


def base_models(data: suite.Dataset, measure: str, seed: int, select: str) -> dict[str, Any]:
    """One model per algorithm of ``measure``'s family, read from the cache when there."""
    import calopt
    from calopt.models.linear import LinearModel

    models = {}
    for name in solvers(measure):
        path = CACHE / f"{data.name}|{measure}|split{seed}|{select}|{name}.npz"
        if path.exists():
            models[name] = LinearModel.load(path)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = calopt.fit(data.X_train, data.y_train, measure=measure, algorithm=name, seed=seed,
                               positive=data.positive, select=select)
        CACHE.mkdir(parents=True, exist_ok=True)
        model.save(path)
        models[name] = model
    return models


def test_value(model: Any, data: suite.Dataset, measure: str) -> float:
    return suite.measure_value(data.y_test, model.predict(data.X_test), measure=measure,
                               pos_label=data.positive, neg_label=data.negative)


def run_cell(data: suite.Dataset, measure: str, seed: int, select: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """One cell: the base models, the aggregate and their test values (an exception is recorded)."""
    from calopt.training.aggregate import aggregate

    try:
        started = time.perf_counter()
        models = base_models(data, measure, seed, select)
        base_seconds = time.perf_counter() - started
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            combined = aggregate(models, data.X_train, data.y_train, measure=measure, seed=seed, **kwargs)
        seconds = time.perf_counter() - started
    except Exception as error:  # noqa: BLE001 - every failure is a result here
        return {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(limit=-4)}
    single = {name: test_value(model, data, measure) for name, model in models.items()}
    value = test_value(combined, data, measure)
    best = max(single, key=single.get)
    details = combined.fit_report.aggregate
    return {"single": single, "aggregate": value, "best": best, "gap": value - single[best],
            "seconds": seconds, "base_seconds": base_seconds,
            "theta": dict(zip(details["models"], details["theta"])),
            "options": suite._plain({k: v for k, v in details.items() if k not in ("models", "base_algorithms")})}


def run(args: argparse.Namespace) -> None:
    suite.limit_threads()
    path = RESULTS / f"aggregate_suite_{args.tag}.json"
    results = suite.load_results(path)
    setting = {"aggregate_kwargs": args.aggregate_kwargs, "base_select": args.base_select}
    if results["cells"] and results.get("setting") != setting:
        sys.exit(f"tag {args.tag!r} was run with {results.get('setting')}, not {setting}: choose another --tag")
    results.update(suite._header({"tag": args.tag, "setting": setting}))
    results.setdefault("small", {})
    names = suite.select(list(suite.catalogue()), args.datasets)
    started, done = time.perf_counter(), 0
    for seed in args.seeds:
        for name in names:
            keys = {m: suite.cell_key(name, m, seed) for m in args.measures}
            if all(k in results["cells"] or f"{name}|split{seed}" in results["small"]
                   or name in results["skipped"] for k in keys.values()):
                continue
            try:
                data = suite.catalogue()[name](seed)
            except suite.Excluded as why:
                results["skipped"][name] = {"reason": str(why), "excluded": True}
                continue
            except Exception as error:  # noqa: BLE001 - a failed load is reported (as bench_suite does)
                results["skipped"][name] = {"reason": f"{type(error).__name__}: {str(error).strip()}",
                                            "excluded": False}
                print(f"SKIP {name}: failed to load: {results['skipped'][name]['reason']}", flush=True)
                continue
            info = data.info()
            results["datasets"][f"{name}|split{seed}"] = info
            if info["test_positives"] < suite.RESOLVED:
                results["small"][f"{name}|split{seed}"] = info["test_positives"]
                suite.write_results(path, results)
                continue
            for measure, key in keys.items():
                if key in results["cells"]:
                    continue
                record = run_cell(data, measure, seed, args.base_select, args.aggregate_kwargs)
                results["cells"][key] = record
                suite.write_results(path, results)
                done += 1
                shown = record.get("error") or (f"best {record['best']} {record['single'][record['best']]:.4f}, "
                                                f"aggregate {record['aggregate']:.4f}, gap {record['gap']:+.4f}, "
                                                f"{record['seconds']:.2f} s")
                print(f"[{time.perf_counter() - started:7.1f} s] {key}: {shown}", flush=True)
    print(f"{done} cells in {time.perf_counter() - started:.0f} s", flush=True)


def rows_of(results: dict[str, Any], measures: list[str]) -> list[dict[str, Any]]:
    rows = []
    for key, record in results["cells"].items():
        dataset, measure, split = key.split("|")
        if measure not in measures:
            continue
        seed = int(split.removeprefix("split"))
        info = results["datasets"][f"{dataset}|split{seed}"]
        row = {"dataset": dataset, "measure": measure, "seed": seed, "test_positives": info["test_positives"],
               "train_rows": info["train_rows"], "error": record.get("error")}
        if not row["error"]:
            row.update(gap=record["gap"], aggregate=record["aggregate"], best=record["best"],
                       best_value=record["single"][record["best"]], seconds=record["seconds"],
                       chosen=record["options"].get("chosen"))
        rows.append(row)
    return rows


def summary_lines(rows: list[dict[str, Any]], results: dict[str, Any]) -> list[str]:
    ok = [r for r in rows if not r["error"]]
    within = [r for r in ok if r["gap"] >= -TOLERANCE]
    share = len(within) / len(rows) if rows else 0.0
    seeds = sorted({r["seed"] for r in rows})
    lines = [
        f"Tag `{results.get('tag')}`, setting `{json.dumps(results.get('setting'))}`; machine: "
        f"{results.get('machine')}, one thread; calopt {results.get('calopt')}.",
        "",
        f"{len(rows)} cells (split seeds {', '.join(map(str, seeds))}; {len({r['dataset'] for r in rows})} datasets "
        f"with ≥ {suite.RESOLVED} test positives); errors: {len(rows) - len(ok)}.",
        f"Within {TOLERANCE} of the best single model (test): **{len(within)}/{len(rows)} = {100 * share:.1f}%** "
        f"(target ≥ {100 * TARGET:.0f}%: {'met' if share >= TARGET else 'NOT met'}); mean gap "
        f"{mean(r['gap'] for r in ok):+.4f}, median {median(r['gap'] for r in ok):+.4f}, worst "
        f"{min(r['gap'] for r in ok):+.4f}; aggregate above the best single model in "
        f"{sum(r['gap'] > 0 for r in ok)} cells. Median aggregation time "
        f"{median(r['seconds'] for r in ok):.2f} s.",
        "",
        "| measure | cells | within 0.005 | mean gap | median gap | worst gap |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups: dict[str, list] = defaultdict(list)
    for r in ok:
        groups[r["measure"]].append(r)
    for measure in [m for m in suite.MEASURES if m in groups]:
        g = groups[measure]
        lines.append(f"| {measure} | {len(g)} | {sum(r['gap'] >= -TOLERANCE for r in g)} | "
                     f"{mean(r['gap'] for r in g):+.4f} | {median(r['gap'] for r in g):+.4f} | "
                     f"{min(r['gap'] for r in g):+.4f} |")
    lines += ["", "| split seed | cells | within 0.005 | mean gap | worst gap |", "|---:|---:|---:|---:|---:|"]
    for seed in seeds:
        g = [r for r in ok if r["seed"] == seed]
        lines.append(f"| {seed} | {len(g)} | {sum(r['gap'] >= -TOLERANCE for r in g)} | "
                     f"{mean(r['gap'] for r in g):+.4f} | {min(r['gap'] for r in g):+.4f} |")
    lines += ["", "| test positives | cells | within 0.005 | mean gap | worst gap | one test positive is worth (TPR) |",
              "|---|---:|---:|---:|---:|---:|"]
    for low, high in BUCKETS:
        g = [r for r in ok if low <= r["test_positives"] < high]
        if g:
            within = sum(r["gap"] >= -TOLERANCE for r in g)
            lines.append(f"| {low}–{high - 1 if high < 10**9 else ''} | {len(g)} | "
                         f"{within} ({100 * within / len(g):.0f}%) | "
                         f"{mean(r['gap'] for r in g):+.4f} | {min(r['gap'] for r in g):+.4f} | "
                         + (f"{1 / (high - 1):.3f}–{1 / low:.3f} |" if high < 10**9 else f"≤ {1 / low:.4f} |"))
    worst = sorted(ok, key=lambda r: r["gap"])[:15]
    lines += ["", "Worst cells:", "",
              "| dataset | measure | seed | test positives | best single | aggregate | gap | chosen |",
              "|---|---|---:|---:|---|---:|---:|---|"]
    lines += [f"| {r['dataset']} | {r['measure']} | {r['seed']} | {r['test_positives']} | {r['best']} "
              f"{r['best_value']:.4f} | {r['aggregate']:.4f} | {r['gap']:+.4f} | {r['chosen'] or ''} |" for r in worst]
    chosen = defaultdict(int)
    for r in ok:
        if r["chosen"]:
            chosen[r["chosen"]] += 1
    if chosen:
        ranked = sorted(chosen.items(), key=lambda kv: -kv[1])
        lines += ["", "Chosen setting: " + ", ".join(f"{k} {v}" for k, v in ranked) + "."]
    small = results.get("small", {})
    if small:
        lines += ["", f"Not run (fewer than {suite.RESOLVED} test positives): {len(small)} (dataset, split) pairs "
                  f"× {len(suite.MEASURES)} measures."]
    return lines


def report(args: argparse.Namespace) -> None:
    results = suite.load_results(RESULTS / f"aggregate_suite_{args.tag}.json")
    rows = rows_of(results, args.measures)
    print("\n".join(summary_lines(rows, results)))
    if args.compare:
        other = {(r["dataset"], r["measure"], r["seed"]): r
                 for r in rows_of(suite.load_results(RESULTS / f"aggregate_suite_{args.compare}.json"), args.measures)}
        pairs = [(r, other[k]) for r in rows if not r["error"]
                 if (k := (r["dataset"], r["measure"], r["seed"])) in other and not other[k]["error"]]
        if pairs:
            deltas = [a["aggregate"] - b["aggregate"] for a, b in pairs]
            ours, theirs = (sum(r["gap"] >= -TOLERANCE for r in side) for side in zip(*pairs))
            print(f"\n`{args.tag}` vs `{args.compare}` on {len(pairs)} shared cells: within {TOLERANCE} "
                  f"{ours} vs {theirs}; aggregate Δ mean {mean(deltas):+.4f}, better by > {TOLERANCE} in "
                  f"{sum(d > TOLERANCE for d in deltas)}, worse by > {TOLERANCE} in "
                  f"{sum(d < -TOLERANCE for d in deltas)}.")


def floor(args: argparse.Namespace, resamples: int = 200) -> None:
    """How often the single model best on the whole test split is within TOLERANCE of the best
    single model on a bootstrap resample of the test rows: what even knowing the best model
    (optimistically, it was picked on these rows) would score on this comparison."""
    suite.limit_threads()
    results = suite.load_results(RESULTS / f"aggregate_suite_{args.tag}.json")
    select = results["setting"]["base_select"]
    rng = np.random.default_rng(0)
    shares, positives, second, trained_best, loaded = {}, {}, {}, {}, {}
    for key, record in results["cells"].items():
        name, measure, split = key.split("|")
        seed = int(split.removeprefix("split"))
        if measure not in args.measures or record.get("error"):
            continue
        if (name, seed) not in loaded:
            loaded = {(name, seed): suite.catalogue()[name](seed)}
        data = loaded[name, seed]
        models = base_models(data, measure, seed, select)
        positive = data.y_test == data.positive
        counts = rng.multinomial(positive.size, np.full(positive.size, 1 / positive.size), size=resamples)
        values = np.empty((resamples, len(models)))
        for j, model in enumerate(models.values()):
            predicted = model.predict(data.X_test) == data.positive
            tp, fp = counts @ (predicted & positive), counts @ (predicted & ~positive)
            fn, tn = counts @ (~predicted & positive), counts @ (~predicted & ~positive)
            values[:, j] = [suite.measure_from_counts(measure, *c) for c in zip(tp, fp, tn, fn)]
        best = list(models).index(record["best"])
        shares[key] = float(np.mean(values[:, best] - values.max(axis=1) >= -TOLERANCE))
        positives[key] = results["datasets"][f"{name}|split{seed}"]["test_positives"]
        single = sorted(record["single"].values())
        second[key] = single[-2] - single[-1]
        on_train = {n: suite.measure_value(data.y_train, m.predict(data.X_train), measure=measure,
                                           pos_label=data.positive, neg_label=data.negative)
                    for n, m in models.items()}
        trained_best[key] = record["single"][max(on_train, key=on_train.get)] - single[-1]
    for label, gaps in (("the second-best single model", second),
                        ("the model best on the training rows", trained_best)):
        print(f"{label} within {TOLERANCE} of the test-best: {100 * mean(g >= -TOLERANCE for g in gaps.values()):.1f}% "
              f"of the cells, mean gap {mean(gaps.values()):+.4f}")
    print(f"The test-best single model within {TOLERANCE} of the best on {resamples} bootstrap resamples of "
          f"the test rows: {100 * mean(shares.values()):.1f}% of (cell, resample) pairs ({len(shares)} cells)")
    for low, high in BUCKETS:
        group = [shares[k] for k in shares if low <= positives[k] < high]
        if group:
            print(f"  {low}-{high - 1 if high < 10**9 else ''} test positives: {len(group)} cells, "
                  f"{100 * mean(group):.1f}%")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", metavar="PATTERN", help="shell patterns of dataset names")
    parser.add_argument("--measures", nargs="+", default=suite.MEASURES, choices=suite.MEASURES)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                        help="split seeds (also the fits' seeds)")
    parser.add_argument("--tag", default="default", help="name of this aggregation variant")
    parser.add_argument("--aggregate-kwargs", type=json.loads, default={},
                        help="JSON object of extra keyword arguments for calopt.aggregate")
    parser.add_argument("--base-select", default="none", help="select= of the base models' calopt.fit")
    parser.add_argument("--report", action="store_true", help="only print the summary of saved results")
    parser.add_argument("--compare", metavar="TAG", help="with --report: compare against another tag")
    parser.add_argument("--floor", action="store_true",
                        help="only the noise floor of the comparison (bootstrap of the test rows) for --tag")
    args = parser.parse_args(argv)
    if args.floor:
        floor(args)
        return
    if not args.report:
        run(args)
    report(args)


if __name__ == "__main__":
    main()

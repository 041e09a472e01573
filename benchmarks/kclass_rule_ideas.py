"""Ideas for the K-class rule, tried on cached out-of-fold probabilities (issue 26).

For every dataset × split of ``bench_multiclass_measures.py`` (the same prepared sets and 70/30
splits), ``calopt.fit(X, y, measure="gmean", algorithm="multinomial:C=<C>", seed=0)`` is run once for
each C of ``CS``, and what its rule is chosen on is kept: the out-of-fold probabilities of the
training rows (:func:`calopt.training.multiclass.out_of_fold_proba`, caught on the way), their
class codes, and the model's test probabilities (the softmax of its scores). From those, any rule
idea is a few milliseconds a cell: :func:`evaluate` chooses the rule of an idea on the out-of-fold
rows of each cell and gives its test value, beside the saved values of the tuned competitors of a
benchmark run (``--against TAG``, the same cells).

Ideas (``IDEAS``):

* ``base``: the rule as calopt chooses it (C = 1); its test values equal the benchmark's calopt
  cells (checked: ``base_gap`` in the output);
* ``c-oof``: C of {0.1, 1, 10} chosen by the out-of-fold value of its rule (ties: C = 1), the way
  the binary default selects by cross-validation;
* ``c-logloss``: C of {0.1, 1, 10} chosen by the out-of-fold log loss of the probabilities (the
  probability model's own cross-validation, whatever the measure); ``c-oof-recall``: ``c-oof`` for
  the measures of the recalls, ``base`` for macro-F1;
* ``c-logloss-plugin``: ``c-logloss``, with balanced accuracy (linear in the confusion matrix)
  by its plug-in rule ``argmax_j η_j/π_j`` unpolished (the Bayes rule for calibrated η);
* ``pseudo-A``: for G-mean and H-mean the rule is chosen on recalls counted with A pseudo-rows,
  (TP + A) / (n + 2A), so that a rule trading a class of a few rows to a small recall out of
  fold pays less than nothing (other measures as ``base``).

    python benchmarks/kclass_rule_ideas.py cache --jobs 2          # every set, splits 0-2
    python benchmarks/kclass_rule_ideas.py evaluate --against kfast --half dev
    python benchmarks/kclass_rule_ideas.py time                    # what c-logloss would cost
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_multiclass_measures as bench  # noqa: E402
from bench_suite import RESULTS, limit_threads, load_results  # noqa: E402

CACHE = RESULTS / "kclass_ideas_cache"
CS = (0.1, 1.0, 10.0)


def cache_task(arguments: tuple[str, int]) -> str:
    """Cache one dataset × split: per C, the out-of-fold probabilities, training codes, test
    probabilities and the fit's seconds."""
    import calopt
    import calopt.training.multiclass as multiclass
    from calopt.models.rule import softmax

    name, split = arguments
    path = CACHE / f"{name}__{split}.npz"
    if path.exists():
        return f"{path.name} cached"
    data = bench.load_split_data(name, split)
    caught: dict[str, np.ndarray] = {}
    original = multiclass.out_of_fold_proba

    def keep(*args: Any, **kwargs: Any) -> np.ndarray:
        caught["oof"] = original(*args, **kwargs)
        return caught["oof"]

    multiclass.out_of_fold_proba = keep
    arrays: dict[str, Any] = {"y_train": data["y_train"], "y_test": data["y_test"],
                              "smallest_test_class": data["info"]["smallest_test_class"]}
    try:
        for C in CS:
            caught.clear()
            started = time.perf_counter()
            model = calopt.fit(data["X_train"], data["classes"][data["y_train"]], measure="gmean",
                               algorithm=f"multinomial:C={C}", seed=0)
            arrays[f"seconds_{C}"] = time.perf_counter() - started
            arrays[f"oof_{C}"] = caught["oof"]
            arrays[f"test_{C}"] = softmax(np.asarray(model.decision_function(data["X_test"]), dtype=np.float64))
    finally:
        multiclass.out_of_fold_proba = original
    np.savez_compressed(path, **arrays)
    return f"{path.name}: " + ", ".join(f"C={C} {arrays[f'seconds_{C}']:.2f} s" for C in CS)


def cache(args: argparse.Namespace) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    names = bench.in_half(bench.select(list(bench.catalogue()), args.datasets), args.half)
    tasks = [(n, s) for s in args.splits for n in names]
    if args.jobs <= 1:
        limit_threads()
        for line in map(cache_task, tasks):
            print(line, flush=True)
        return
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(args.jobs, initializer=limit_threads) as pool:
        for line in pool.imap_unordered(cache_task, tasks):
            print(line, flush=True)


def pseudo_measure(spec: str, a: float) -> Any:
    """``spec``'s measure, its K-class value counting each class's recall with ``a`` pseudo-rows:
    (TP + a) / (TP + FN + 2a)."""
    import dataclasses

    import calopt

    measure = calopt.get_measure(spec)
    base = type(measure)

    def from_class_counts(self, tp, fp, tn, fn, *, xp):  # noqa: ANN001
        return base.from_class_counts(self, tp + a, fp, tn, fn + a, xp=xp)

    cls = type(f"Pseudo{base.__name__}", (base,), {"from_class_counts": from_class_counts})
    return cls(**{f.name: getattr(measure, f.name) for f in dataclasses.fields(measure)})


def logloss_c(cached: Any) -> float:
    """The C of ``CS`` whose out-of-fold probabilities have the smallest log loss (ties: C = 1)."""
    codes = cached["y_train"]
    losses = {C: -np.mean(np.log(np.maximum(cached[f"oof_{C}"][np.arange(codes.size), codes], 1e-300))) for C in CS}
    return min(CS, key=lambda C: (losses[C], C != 1.0))


def rule_codes(idea: str, cached: Any, measure: str) -> np.ndarray:
    """The test class codes of ``idea``'s rule for ``measure`` on one cached dataset × split."""
    import calopt
    from calopt.training.decision import choose_rule
    from calopt.training.multiclass import CERTIFICATE_ITERATIONS

    codes = cached["y_train"]
    spec = measure

    def chosen(C: float, m: Any) -> Any:
        return choose_rule(cached[f"oof_{C}"], codes, m, iterations=CERTIFICATE_ITERATIONS)

    if idea == "base":
        return chosen(1.0, calopt.get_measure(spec)).predict(cached["test_1.0"])
    if idea == "c-oof":
        rules = {C: chosen(C, calopt.get_measure(spec)) for C in CS}
        best = max(CS, key=lambda C: (rules[C].value, C == 1.0))
        return rules[best].predict(cached[f"test_{best}"])
    if idea == "c-logloss":
        best = logloss_c(cached)
        return chosen(best, calopt.get_measure(spec)).predict(cached[f"test_{best}"])
    if idea == "c-logloss-plugin":  # c-logloss; balanced accuracy (linear in C) by its plug-in rule, unpolished
        if measure != "balanced-accuracy":
            return rule_codes("c-logloss", cached, measure)
        best = logloss_c(cached)
        prior = np.bincount(codes, minlength=cached["test_1.0"].shape[1]).astype(np.float64)
        return np.argmax(cached[f"test_{best}"] / np.maximum(prior, 1e-300), axis=1)
    if idea == "c-oof-recall":  # c-oof for the measures of the recalls, base for F1
        return rule_codes("base" if measure == "f1" else "c-oof", cached, measure)
    if idea.startswith("guard-"):  # the argmax unless the rule beats it out of fold by more than the margin
        rule = chosen(1.0, calopt.get_measure(spec))
        if rule.value - rule.argmax_value > float(idea.removeprefix("guard-")):
            return rule.predict(cached["test_1.0"])
        return np.argmax(cached["test_1.0"], axis=1)
    if idea.startswith("pseudo-"):
        a = float(idea.removeprefix("pseudo-"))
        m = pseudo_measure(spec, a) if measure in ("gmean", "hmean") else calopt.get_measure(spec)
        return chosen(1.0, m).predict(cached["test_1.0"])
    raise ValueError(idea)


def evaluate(args: argparse.Namespace) -> None:
    against = load_results(bench.results_path(args.against))
    names = bench.in_half(bench.select(sorted(against["datasets"]), args.datasets), args.half)
    rows = []
    for name in names:
        for split in args.splits:
            path = CACHE / f"{name}__{split}.npz"
            key_cells = {m: against["cells"].get(f"{name}|{m}|split{split}") for m in bench.MEASURES}
            if not path.exists() or any(c is None for c in key_cells.values()):
                continue
            cached = np.load(path)
            K = int(cached["y_train"].max()) + 1
            classes = np.arange(K)
            for measure in args.measures:
                values = {idea: bench.test_values(cached["y_test"], rule_codes(idea, cached, measure), classes)[measure]
                          for idea in args.ideas}
                cell = key_cells[measure]
                rows.append({"dataset": name, "split": split, "measure": measure,
                             "resolved": int(cached["smallest_test_class"]) >= bench.RESOLVED, "values": values,
                             "others": {m: cell[m]["value"] for m in ("calopt", "argmax", "coord", "xcolumns")}})
    print(f"{len({r['dataset'] for r in rows})} datasets, half {args.half or 'all'}, against {args.against}; "
          f"mean test value and mean margin over argmax / coord / xcolumns:")
    print("| measure | idea | cells | value | − argmax | − coord | − xcolumns | resolved: − coord | − xcolumns |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for measure in args.measures:
        chosen = [r for r in rows if r["measure"] == measure]
        resolved = [r for r in chosen if r["resolved"]]
        if not chosen:
            continue
        gap = max(abs(r["values"].get("base", r["others"]["calopt"]) - r["others"]["calopt"]) for r in chosen)
        for idea in args.ideas:
            def margin(rs: list, other: str) -> str:
                return f"{mean(r['values'][idea] - r['others'][other] for r in rs):+.4f}" if rs else "–"
            print(f"| {measure} | {idea} | {len(chosen)} | {mean(r['values'][idea] for r in chosen):.4f} | "
                  f"{margin(chosen, 'argmax')} | {margin(chosen, 'coord')} | {margin(chosen, 'xcolumns')} | "
                  f"{margin(resolved, 'coord')} | {margin(resolved, 'xcolumns')} |")
        print(f"(base against the run's calopt cells: largest difference {gap:.2g})")


def _ModelsObjective(X: np.ndarray, codes: np.ndarray, train: np.ndarray, K: int, C: np.ndarray) -> Any:
    """:class:`calopt.training.multiclass._FoldObjectives` of M models, each its own training rows
    (``train`` (M, n)) and its own C (``C`` (M,)): the fold models of every C at once, or the model
    on every row at one C (a refit warm-started from the C = 1 model)."""
    from calopt.training.multiclass import _FoldObjectives

    return _FoldObjectives(X, codes, None, None, K, np.asarray(C, dtype=np.float64), train=train)


def c_choice_seconds(X: np.ndarray, codes: np.ndarray, w: np.ndarray, b: np.ndarray, fold: np.ndarray
                     ) -> tuple[float, float, float]:
    """Seconds of what ``c-logloss`` adds to a fit, done as cheaply as we saw how: the fold models
    of the three C at once (FOLD_PASSES evaluations each, from the C = 1 model, like today's),
    then, when the out-of-fold log loss picks C ≠ 1, the model on every row at that C by L-BFGS
    from the C = 1 model (at most 100 evaluations, to FOLD_TOL). Returns (fold models, refit, C)."""
    from calopt.models.rule import softmax
    from calopt.training.multiclass import FOLD_PASSES, FOLD_TOL, _lbfgs

    F, K, n = int(fold.max()) + 1, w.shape[1], codes.size
    start = np.concatenate([w.ravel(), b])
    started = time.perf_counter()
    train = np.tile(fold != np.arange(F)[:, None], (len(CS), 1))
    objective = _ModelsObjective(X, codes, train, K, np.repeat(CS, F))
    scores = objective.scores(_lbfgs(objective, np.tile(start, (len(CS) * F, 1)), FOLD_PASSES, FOLD_TOL))
    losses = [-np.mean(np.log(np.maximum(softmax(scores[i * F + fold, :, np.arange(n)])[np.arange(n), codes],
                                         1e-300))) for i in range(len(CS))]
    chosen = min(range(len(CS)), key=lambda i: (losses[i], CS[i] != 1.0))
    folds_seconds = time.perf_counter() - started
    started = time.perf_counter()
    if CS[chosen] != 1.0:
        objective = _ModelsObjective(X, codes, np.ones((1, n), dtype=bool), K, np.array([CS[chosen]]))
        _lbfgs(objective, start[None], 100, FOLD_TOL)
    return folds_seconds, time.perf_counter() - started, float(CS[chosen])


def timing(args: argparse.Namespace) -> None:
    """calopt's fit time over one LR fit's, and what c-logloss would add (:func:`c_choice_seconds`),
    interleaved in this process, best of ``--repeats``; split 0 of each set."""
    import os

    import calopt
    import calopt.training.multiclass as multiclass

    limit_threads()
    caught: dict[str, Any] = {}
    original = multiclass.out_of_fold_proba

    def keep(X, codes, weight, w, b, C, fold, **options):  # noqa: ANN001
        started = time.perf_counter()
        proba = original(X, codes, weight, w, b, C, fold, **options)
        caught.update(X=X, codes=codes, w=np.asarray(w, dtype=np.float64), b=np.asarray(b, dtype=np.float64),
                      fold=fold, seconds=time.perf_counter() - started)
        return proba

    multiclass.out_of_fold_proba = keep
    names = bench.in_half(bench.select(list(bench.catalogue()), args.datasets), args.half)
    print(f"load {os.getloadavg()[0]:.2f}; times over one LR fit, best of {args.repeats}")
    print("| dataset | LR ms | calopt | its fold models | + three C's fold models | + refit | c-logloss | C |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    now, then = [], []
    for name in names:
        data = bench.load_split_data(name, 0)
        best: dict[str, float] = {}
        for _ in range(args.repeats):
            started = time.perf_counter()
            bench.logistic().fit(data["X_train"], data["y_train"])
            seconds = {"lr": time.perf_counter() - started}
            started = time.perf_counter()
            calopt.fit(data["X_train"], data["classes"][data["y_train"]], measure="gmean", seed=0)
            seconds["calopt"], seconds["oof"] = time.perf_counter() - started, caught["seconds"]
            seconds["folds3"], seconds["refit"], C = c_choice_seconds(*(caught[k] for k in ("X", "codes", "w", "b",
                                                                                              "fold")))
            best = {k: min(best.get(k, math.inf), v) for k, v in seconds.items()}
        lr = best["lr"]
        ratio = (best["calopt"] - best["oof"] + best["folds3"] + best["refit"]) / lr
        now.append(best["calopt"] / lr)
        then.append(ratio)
        print(f"| {name} | {lr * 1e3:.1f} | {best['calopt'] / lr:.2f} | {best['oof'] / lr:.2f} | {best['folds3'] / lr:.2f} | "
              f"{best['refit'] / lr:.2f} | {ratio:.2f} | {C:g} |", flush=True)
    print(f"median: calopt {np.median(now):.2f}x, with c-logloss {np.median(then):.2f}x; load {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["cache", "evaluate", "time"])
    parser.add_argument("--repeats", type=int, default=5, help="time: best of this many")
    parser.add_argument("--datasets", nargs="+", metavar="PATTERN")
    parser.add_argument("--half", choices=bench.HALVES)
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--measures", nargs="+", default=bench.MEASURES, choices=bench.MEASURES)
    parser.add_argument("--ideas", nargs="+", default=["base", "c-oof", "pseudo-0.5"])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--against", default="kfast", help="the benchmark run whose competitors' values are compared")
    args = parser.parse_args(argv)
    {"cache": cache, "evaluate": evaluate, "time": timing}[args.action](args)


if __name__ == "__main__":
    main()

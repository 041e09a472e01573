"""Issue 25's size benchmark: calopt's default against the route a user takes at each size,
same data, same process, fit seconds, test value and peak memory.

Datasets (a name each, ``--only NAME``; ``--quick`` shrinks the synthetic ones for a smoke run):

* ``sms``, ``sentences``: real sparse text, TF-IDF (``TfidfVectorizer(sublinear_tf=True)``
  fitted on the training part), stratified 70/30, seed 0; read by ``bench_text.messages`` from
  ``--sms PATH/SMSSpamCollection`` and ``--sentences PATH/sentiment_dir`` (UCI, CC BY 4.0, not
  shipped; see bench_text.py). Skipped, with a note, when the path is not given or absent;
  ``--draw K`` splits with seed K instead;
* ``wide-sparse``: synthetic very wide sparse, 2,000 training rows × 100,000 binary features at
  1% non-zero (about 1,000 a row); 100 features are informative (each 1 in 20% of the rows, an
  N(0, 1) weight), the rest share the remaining non-zeros uniformly; the label is the weighted sum
  plus logistic noise above its 90th percentile (about 10% positive; the Bayes rule's test F1 is
  about 0.7, a plain LogisticRegression's about 0.43); 10,000 test rows from the same generator
  (quick: 1,000 × 20,000, 50 informative, 4,000 test rows); ``--draw K`` draws it again with
  seeds [25 + K, ·] (one draw is one training set: its selection noise shows across draws);
* ``dense-300k``: covtype's shape, 300,000 × 54 dense: 10 continuous columns of unequal
  scales and two one-hot blocks (4 and 40 categories, skewed), the label a fixed linear score
  plus logistic noise cut at the 85th percentile; 100,000 test rows (quick: 30,000 rows);
* ``dense-1m``: 10⁶ × 100 standard normal float64, in memory, the label a fixed linear score plus
  logistic noise (about 28% positive, bench_stream_dense's generator); 200,000 test rows
  (quick: 10⁵ rows);
* ``mmap-10m``: 10⁷ × 100 float32 memory-mapped: ``bench_stream_dense.generate`` writes
  ``WORKDIR/mmap-10m/train/{X,y}.npy`` and ``test.npz`` (10⁶ rows) once, reused after
  (quick: 2 × 10⁵ rows, ``WORKDIR/mmap-quick``).

Methods, each cell (dataset × measure) in one process per dataset:

* ``calopt``: ``calopt.fit(X, y, measure=M)``, the default; for ``mmap-10m`` the stream route,
  ``calopt.fit(open_stream(WORKDIR/.../train), measure=M)``;
* ``route``: below 100,000 training rows ``TunedThresholdClassifierCV(make_pipeline(MaxAbsScaler(),
  LogisticRegression(max_iter=1000)), scoring=<measure scorer>, cv=5)`` (``bench_suite.run_route``);
  from 100,000 rows the same pipeline fitted once on 80% of the rows (the split
  ``TunedThresholdClassifierCV(cv=0.2)`` draws: ``StratifiedShuffleSplit(1, test_size=0.2,
  random_state=0)``), the threshold the best exact cut of the measure on the other 20%
  (no refit; ``TunedThresholdClassifierCV(cv=0.2, refit=False)`` would fit the pipeline twice).
  For ``mmap-10m`` the route loads ``X.npy`` into memory first, and its seconds include the load;
* ``twin``: the route with its folds (``StratifiedKFold(5, shuffle=True, random_state=1)``) or
  its split (``random_state=1``) shuffled by another seed: the route's own variability.

Per method: fit seconds (around the fit call only), the test value (``bench_suite.measure_value``,
from scikit-learn's confusion matrix), and the peak resident memory of the fit: the process's
high-water mark (VmHWM) reset just before the fit (``/proc/self/clear_refs``) and read just after;
it includes the data already in memory (``rss_before_mb``; the table shows the peak and, in
brackets, the peak less that), and for ``mmap-10m`` the mapped file's pages the fit touched
(resident while mapped, though the kernel may drop them). Each dataset runs in its own
process after a warm-up fit of each method; the 1-minute load average is recorded with each
cell (the machine is shared). BLAS threads are left as they are unless ``--threads N``.

    python benchmarks/bench_sizes.py --quick --workdir /tmp/sizes --out benchmarks/results/sizes_quick.json
    python benchmarks/bench_sizes.py --only wide-sparse dense-300k
    python benchmarks/bench_sizes.py --only wide-sparse --draw 3 --out benchmarks/results/sizes_wide_draw3.json
    python benchmarks/bench_sizes.py --sms PATH/SMSSpamCollection --sentences PATH/sentiment_dir --only sms sentences
    python benchmarks/bench_sizes.py --workdir /big/disk --only mmap-10m   # writes 4 GB once
    python benchmarks/bench_sizes.py --report [--out FILE]                 # the table of saved results
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_suite  # noqa: E402

DATASETS = ["sms", "sentences", "wide-sparse", "dense-300k", "dense-1m", "mmap-10m"]
MEASURES = ["f1", "gmean"]
SPLIT_FROM = 100_000  # training rows from which the route tunes its threshold on one 20% split
TWIN_SEED = 1
MARK = "@@cell "  # a child's result line


# -- memory ----------------------------------------------------------------------------

def _status_kb(field_name: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field_name}:\s+(\d+) kB", text, re.M).group(1))


def reset_peak() -> bool:
    """Reset this process's resident high-water mark (Linux ≥ 4.0); False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_mb() -> float:
    return _status_kb("VmRSS") / 1024


def peak_mb() -> float:
    """The high-water mark since the last :func:`reset_peak` (``ru_maxrss`` where there is no /proc)."""
    try:
        return _status_kb("VmHWM") / 1024
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- data --------------------------------------------------------------------------------

@dataclass
class Data:
    name: str
    description: str
    X_train: Any
    y_train: np.ndarray
    X_test: Any
    y_test: np.ndarray
    positive: Any = 1
    negative: Any = 0
    stream: Path | None = None  # the memory-mapped training directory (calopt streams it)
    notes: dict[str, Any] = field(default_factory=dict)

    def suite_dataset(self) -> bench_suite.Dataset:
        return bench_suite.Dataset(self.name, self.description, self.X_train, self.y_train, self.X_test,
                                   self.y_test, self.positive, self.negative, "")

    def info(self) -> dict[str, Any]:
        X = self.X_train
        nonzero = X.nnz if hasattr(X, "nnz") else None
        return {"description": self.description, "train_rows": int(X.shape[0]), "features": int(X.shape[1]),
                "test_rows": int(self.X_test.shape[0]), "sparse": hasattr(X, "nnz"),
                "density": None if nonzero is None else nonzero / (X.shape[0] * X.shape[1]),
                "dtype": str(X.dtype), "memory_mapped": self.stream is not None,
                "train_positives": int(np.sum(self.y_train == self.positive)),
                "test_positives": int(np.sum(self.y_test == self.positive)), **self.notes}


def _logistic_labels(rng: np.random.Generator, scores: np.ndarray, cut: float) -> np.ndarray:
    return (scores + rng.logistic(size=scores.size) > cut).astype(np.int64)


def wide_sparse(quick: bool, draw: int = 0) -> Data:
    """n × d binary CSR at 1% non-zero with a planted linear signal: ``informative`` columns, each
    1 in 20% of the rows with an N(0, 1) weight; the other columns share the rest of the 1%.
    ``draw`` K > 0: the same generator with seeds [25 + K, ·] (another signal, rows and labels)."""
    import scipy.sparse as sp

    n, d, informative = (1_000, 20_000, 50) if quick else (2_000, 100_000, 100)
    n_test = 4_000 if quick else 10_000
    base = 25 + draw
    rng = np.random.default_rng([base, 1])
    chosen = np.sort(rng.choice(d, informative, replace=False))
    others = np.setdiff1d(np.arange(d), chosen)
    w = np.zeros(d)
    w[chosen] = rng.normal(size=informative)
    rest = (0.01 * d - 0.2 * informative) / others.size

    def rows(rng: np.random.Generator, count: int) -> sp.csr_matrix:
        active = rng.random((count, informative)) < 0.2
        per_row = rng.binomial(others.size, rest, size=count)
        indices = [np.sort(np.concatenate([chosen[active[i]], rng.choice(others, per_row[i], replace=False)]))
                   for i in range(count)]
        indptr = np.concatenate([[0], np.cumsum([a.size for a in indices])])
        return sp.csr_matrix((np.ones(indptr[-1]), np.concatenate(indices), indptr), shape=(count, d))

    X_train, X_test = rows(np.random.default_rng([base, 2]), n), rows(np.random.default_rng([base, 3]), n_test)
    pilot = rows(np.random.default_rng([base, 4]), 2_000) @ w
    cut = float(np.quantile(pilot + np.random.default_rng([base, 5]).logistic(size=pilot.size), 0.9))
    y_train = _logistic_labels(np.random.default_rng([base, 6]), X_train @ w, cut)
    y_test = _logistic_labels(np.random.default_rng([base, 7]), X_test @ w, cut)
    return Data("wide-sparse", f"synthetic binary sparse, 1% non-zero, {informative} informative columns "
                "(each 1 in 20% of rows, N(0, 1) weights), label: score + logistic noise > its 90th percentile"
                + (f"; draw {draw} (seeds [{base}, ·])" if draw else ""),
                X_train, y_train, X_test, y_test)


def covtype_like(quick: bool) -> Data:
    """covtype's shape (54 columns: 10 continuous of unequal scales, one-hot blocks of 4 and 40)."""
    n, n_test = (30_000, 10_000) if quick else (300_000, 100_000)
    rng = np.random.default_rng([25, 10])
    scales = np.array([300, 100, 8, 200, 60, 1500, 25, 20, 40, 1300], dtype=np.float64)
    centres = np.array([2950, 155, 14, 270, 45, 2350, 212, 223, 142, 1980], dtype=np.float64)
    area_p = np.array([0.45, 0.05, 0.44, 0.06])
    soil_p = rng.dirichlet(np.full(40, 0.4))
    w = np.concatenate([rng.normal(size=10), rng.normal(size=4), rng.normal(scale=1.5, size=40)])

    def rows(rng: np.random.Generator, count: int) -> np.ndarray:
        X = np.zeros((count, 54))
        X[:, :10] = centres + scales * rng.standard_normal((count, 10))
        X[np.arange(count), 10 + rng.choice(4, count, p=area_p)] = 1.0
        X[np.arange(count), 14 + rng.choice(40, count, p=soil_p)] = 1.0
        return X

    def score(X: np.ndarray) -> np.ndarray:
        return np.concatenate([(X[:, :10] - centres) / scales, X[:, 10:]], axis=1) @ w

    X_train, X_test = rows(np.random.default_rng([25, 11]), n), rows(np.random.default_rng([25, 12]), n_test)
    pilot = score(rows(np.random.default_rng([25, 13]), 50_000))
    cut = float(np.quantile(pilot + np.random.default_rng([25, 14]).logistic(size=pilot.size), 0.85))
    return Data("dense-300k", "synthetic dense, covtype's shape (10 continuous, one-hot 4 + 40)",
                X_train, _logistic_labels(np.random.default_rng([25, 15]), score(X_train), cut),
                X_test, _logistic_labels(np.random.default_rng([25, 16]), score(X_test), cut))


def dense_1m(quick: bool) -> Data:
    """bench_stream_dense's distribution (N(0, 1) rows, a fixed linear score plus logistic noise,
    about 28% positive), in memory, float64."""
    import bench_stream_dense as sd

    n, n_test = (100_000, 50_000) if quick else (1_000_000, 200_000)
    w = np.random.default_rng([25, 20]).normal(size=sd.D) / np.sqrt(sd.D) * 3
    pilot = sd._rows(np.random.default_rng([25, 21]), 200_000, w, 0.0)[0] @ w.astype(np.float32)
    cut = float(np.quantile(pilot, 0.72))
    X_train, y_train = sd._rows(np.random.default_rng([25, 22]), n, w, cut)
    X_test, y_test = sd._rows(np.random.default_rng([25, 23]), n_test, w, cut)
    return Data("dense-1m", "synthetic dense N(0, 1), float64 in memory", X_train.astype(np.float64),
                (y_train > 0).astype(np.int64), X_test.astype(np.float64), (y_test > 0).astype(np.int64))


def memory_mapped(quick: bool, workdir: Path) -> Data:
    """bench_stream_dense's 10⁷ × 100 float32 directory, generated once under ``workdir``."""
    import bench_stream_dense as sd

    directory = workdir / ("mmap-quick" if quick else "mmap-10m")
    rows = 200_000 if quick else 10_000_000
    notes: dict[str, Any] = {}
    if not ((directory / "train" / "y.npy").exists() and (directory / "test.npz").exists()):
        started = time.perf_counter()
        sd.generate(directory, rows, 0)
        notes["generate_seconds"] = round(time.perf_counter() - started, 1)
    y_train = np.load(directory / "train" / "y.npy")
    if y_train.size != rows:
        raise SystemExit(f"{directory}: {y_train.size:,} rows, expected {rows:,}: remove it to regenerate")
    X_train = np.load(directory / "train" / "X.npy", mmap_mode="r")
    test = np.load(directory / "test.npz")
    return Data("mmap-10m", f"bench_stream_dense's generator, float32 memory-mapped ({directory})",
                X_train, y_train, test["X"], test["y"], positive=1, negative=-1, stream=directory / "train",
                notes=notes)


def text(name: str, path: Path | None, draw: int = 0) -> Data:
    import bench_text
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.model_selection import train_test_split

    if path is None or not path.exists():
        option = "--sms" if name == "sms" else "--sentences"
        raise FileNotFoundError(f"no {option} path given" if path is None else f"{option} {path} does not exist")
    _, texts, labels = bench_text.messages(path)
    t_train, t_test, y_train, y_test = train_test_split(texts, labels, test_size=0.3, random_state=draw,
                                                        stratify=labels)
    vectorizer = TfidfVectorizer(sublinear_tf=True)
    X_train = vectorizer.fit_transform(t_train).astype(np.float64)
    return Data(name, f"{path.name}, TF-IDF, stratified 70/30 seed {draw}", X_train, np.asarray(y_train),
                vectorizer.transform(t_test), np.asarray(y_test))


def load(name: str, args: argparse.Namespace) -> Data:
    if name in ("sms", "sentences"):
        return text(name, getattr(args, name), args.draw)
    if name == "wide-sparse":
        return wide_sparse(args.quick, args.draw)
    if name == "dense-300k":
        return covtype_like(args.quick)
    if name == "dense-1m":
        return dense_1m(args.quick)
    if name == "mmap-10m":
        return memory_mapped(args.quick, args.workdir)
    raise KeyError(name)


# -- the methods --------------------------------------------------------------------------

def exact_cut(scores: np.ndarray, positive: np.ndarray, measure: str) -> float:
    """The threshold (predict positive where score > it) that maximises ``measure`` on these
    rows: every cut between distinct sorted scores tried (independent of calopt)."""
    order = np.argsort(-scores, kind="stable")
    s, p = scores[order], positive[order]
    tp = np.concatenate([[0], np.cumsum(p)])
    fp = np.concatenate([[0], np.cumsum(~p)])
    last = np.concatenate([np.flatnonzero(s[1:] != s[:-1]), [s.size - 1]])  # the last row of each run of ties
    k = np.concatenate([[0], last + 1])  # cuts: the top k rows positive
    P, N = tp[-1], fp[-1]
    TP, FP = tp[k].astype(float), fp[k].astype(float)
    FN, TN = P - TP, N - FP
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.array([bench_suite.measure_from_counts(measure, a, b, c, e)
                           for a, b, c, e in zip(TP, FP, TN, FN)]) if measure not in ("f1", "gmean") else (
            np.where(2 * TP + FP + FN > 0, 2 * TP / (2 * TP + FP + FN), 0.0) if measure == "f1" else
            np.sqrt(np.where(P > 0, TP / P, 0.0) * np.where(N > 0, TN / N, 0.0)))
    best = int(np.argmax(values))
    top = k[best]
    if top == 0:
        return float(s[0]) + 1.0
    if top == s.size:
        return float(s[-1]) - 1.0
    return float((s[top - 1] + s[top]) / 2)


def _pipeline():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    return make_pipeline(MaxAbsScaler(), LogisticRegression(max_iter=1000))


class SplitRoute:
    """The pipeline fitted on 80% of the rows, its threshold cut on the other 20%."""

    def __init__(self, measure: str, positive: Any, seed: int):
        self.measure, self.positive, self.seed = measure, positive, seed

    def fit(self, X: Any, y: np.ndarray) -> "SplitRoute":
        from sklearn.model_selection import StratifiedShuffleSplit

        fit_rows, held = next(StratifiedShuffleSplit(1, test_size=0.2, random_state=self.seed).split(
            np.zeros((y.size, 1)), y))
        self.model = _pipeline().fit(X[np.sort(fit_rows)], y[np.sort(fit_rows)])
        held = np.sort(held)
        sign = 1.0 if self.model.classes_[1] == self.positive else -1.0
        self.sign = sign
        self.threshold = exact_cut(sign * self.model.decision_function(X[held]), y[held] == self.positive,
                                   self.measure)
        return self

    def predict(self, X: Any, negative: Any) -> np.ndarray:
        return np.where(self.sign * self.model.decision_function(X) > self.threshold, self.positive, negative)


def _record(data: Data, measure: str, fit: Callable[[], Any], predict: Callable[[Any], np.ndarray]) -> dict:
    import gc

    gc.collect()
    before, load_before = rss_mb(), os.getloadavg()[0]
    resettable = reset_peak()
    started = time.perf_counter()
    model = fit()
    seconds = time.perf_counter() - started
    peak = peak_mb()
    record = bench_suite.test_record(measure, data.y_test, predict(model), data.positive, data.negative)
    record.update({"seconds": seconds, "peak_rss_mb": round(peak, 1), "rss_before_mb": round(before, 1),
                   "peak_since_reset": resettable, "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]})
    return record, model


def run_method(data: Data, measure: str, method: str) -> dict[str, Any]:
    import calopt

    train_rows = int(data.y_train.size)
    if method == "calopt":
        if data.stream is not None:
            from calopt.io.stream import open_stream

            def fit():
                return calopt.fit(open_stream(data.stream), measure=measure)
        else:
            def fit():
                return calopt.fit(data.X_train, data.y_train, measure=measure)
        record, model = _record(data, measure, fit, lambda m: m.predict(data.X_test))
        selection = model.fit_report.selection or {}
        record.update({"algorithm": model.algorithm, "rule": selection.get("rule"),
                       "fit_seconds": float(model.fit_seconds)})
        return record
    seed = 0 if method == "route" else TWIN_SEED
    if train_rows < SPLIT_FROM:
        suite_data = data.suite_dataset()
        started_load = os.getloadavg()[0]
        before = rss_mb()
        resettable = reset_peak()
        record = bench_suite.run_route(suite_data, measure, None if method == "route" else seed)
        record.update({"peak_rss_mb": round(peak_mb(), 1), "rss_before_mb": round(before, 1),
                       "peak_since_reset": resettable,
                       "load_1min": [round(started_load, 2), round(os.getloadavg()[0], 2)],
                       "route": "TunedThresholdClassifierCV(MaxAbsScaler + LogisticRegression, cv=5"
                                + ("" if method == "route" else f", folds shuffled by seed {seed}") + ")"})
        return record
    if data.stream is not None:  # the user's route loads the array into memory first
        def fit():
            started = time.perf_counter()
            X = np.load(data.stream / "X.npy")
            y = np.load(data.stream / "y.npy")
            fit.load_seconds = time.perf_counter() - started
            return SplitRoute(measure, data.positive, seed).fit(X, y)
    else:
        def fit():
            return SplitRoute(measure, data.positive, seed).fit(data.X_train, data.y_train)
    record, model = _record(data, measure, fit, lambda m: m.predict(data.X_test, data.negative))
    record.update({"threshold": model.threshold,
                   "route": f"MaxAbsScaler + LogisticRegression on 80%, exact cut on 20% (split seed {seed})"})
    if data.stream is not None:
        record["load_seconds"] = fit.load_seconds
    return record


def warm_up() -> None:
    """One tiny fit of each method, so no cell pays first-call imports and plugin loading."""
    import calopt

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + rng.normal(size=300) > 1).astype(np.int64)
    calopt.fit(X, y, measure="f1")
    SplitRoute("f1", 1, 0).fit(X, y)
    bench_suite.run_route(bench_suite._binary("warm-up", "random", X, y), "f1")


def run_dataset(name: str, args: argparse.Namespace) -> None:
    """In a child process: one dataset, every measure and method; one result line each."""
    if args.threads:
        for variable in bench_suite.THREAD_VARIABLES:
            os.environ[variable] = str(args.threads)
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=args.threads)
    warm_up()
    started = time.perf_counter()
    try:
        data = load(name, args)
    except FileNotFoundError as why:
        print(MARK + json.dumps({"skip": str(why)}), flush=True)
        return
    print(MARK + json.dumps({"info": {**data.info(), "build_seconds": round(time.perf_counter() - started, 1),
                                      "rss_with_data_mb": round(rss_mb(), 1)}}), flush=True)
    for measure in args.measures:
        cell = {}
        for method in ("calopt", "route", "twin"):
            cell[method] = run_method(data, measure, method)
            r = cell[method]
            print(f"  {name} {measure} {method:6s}: {r['value']:.4f} in {r['seconds']:.2f} s, "
                  f"peak {r['peak_rss_mb']:.0f} MB (load {r['load_1min'][0]:.2f})", file=sys.stderr, flush=True)
        print(MARK + json.dumps({"cell": measure, "methods": cell}, default=float), flush=True)


# -- the parent ---------------------------------------------------------------------------

def summarize_cell(methods: dict[str, dict]) -> dict[str, Any]:
    ours, route, twin = methods["calopt"], methods["route"], methods["twin"]
    return {"time_ratio": ours["seconds"] / route["seconds"],
            "peak_rss_ratio": ours["peak_rss_mb"] / route["peak_rss_mb"],
            "margin": ours["value"] - route["value"], "twin_margin": twin["value"] - route["value"],
            "twin_time_ratio": twin["seconds"] / route["seconds"]}


def run(args: argparse.Namespace, argv: list[str] | None = None) -> None:
    import sklearn

    import calopt
    from machine import describe

    results = json.loads(args.out.read_text()) if args.out.exists() else {"datasets": {}, "cells": {}, "skipped": {}}
    if results.get("quick", args.quick) != args.quick:
        raise SystemExit(f"{args.out} holds {'quick' if results['quick'] else 'full'} results: give another --out")
    command_line = " ".join(["python", "benchmarks/bench_sizes.py", *(argv if argv is not None else sys.argv[1:])])
    results.update({"machine": describe(), "calopt": calopt.__version__, "scikit-learn": sklearn.__version__,
                    "quick": args.quick, "threads": args.threads or "as found (BLAS default)"})
    names = args.only or DATASETS
    for name in names:
        command = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--workdir", str(args.workdir),
                   "--measures", *args.measures, "--draw", str(args.draw)] + (["--quick"] if args.quick else []) + (
            ["--threads", str(args.threads)] if args.threads else []) + [
            f"--{key}={getattr(args, key)}" for key in ("sms", "sentences") if getattr(args, key)]
        print(f"{name}: uptime load {os.getloadavg()}", flush=True)
        started = time.perf_counter()
        child = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        for line in child.stdout.splitlines():
            if not line.startswith(MARK):
                print(line)
                continue
            message = json.loads(line[len(MARK):])
            if "skip" in message:
                results["skipped"][name] = message["skip"]
                results["datasets"].pop(name, None)
                print(f"SKIP {name}: {message['skip']}", flush=True)
            elif "info" in message:
                results["datasets"][name] = {**message["info"], "command": command_line,
                                             "run_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
                results["skipped"].pop(name, None)
            else:
                key = f"{name}|{message['cell']}"
                results["cells"][key] = {**message["methods"], **summarize_cell(message["methods"])}
        if child.returncode:
            results["skipped"][name] = f"the child process failed (exit {child.returncode})"
            print(f"FAILED {name}: exit {child.returncode}", flush=True)
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
        bench_suite.write_results(args.out, results)
    print(report(results))


def _memory(method: dict[str, Any]) -> str:
    return f"{method['peak_rss_mb']:.0f} (+{method['peak_rss_mb'] - method['rss_before_mb']:.0f})"


def report(results: dict[str, Any]) -> str:
    """The table of a results file, as Markdown."""
    lines = [f"Machine: {results.get('machine')}; calopt {results.get('calopt')}, scikit-learn "
             f"{results.get('scikit-learn')}; threads {results.get('threads')}"
             + ("; **quick sizes**" if results.get("quick") else "") + ".",
             "",
             "| dataset | train rows × features | measure | calopt | route | twin | calopt − route | twin − route "
             "| calopt s | route s | twin s | time ratio | peak MB calopt (fit's own) | peak MB route (fit's own) "
             "| load |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for key, cell in results["cells"].items():
        name, measure = key.split("|")
        info = results["datasets"].get(name, {})
        shape = f"{info.get('train_rows', 0):,} × {info.get('features', 0):,}"
        ours, route, twin = cell["calopt"], cell["route"], cell["twin"]
        loads = [m["load_1min"][0] for m in (ours, route, twin)]
        lines.append(f"| {name} | {shape} | {measure} | {ours['value']:.4f} | {route['value']:.4f} | "
                     f"{twin['value']:.4f} | {cell['margin']:+.4f} | {cell['twin_margin']:+.4f} | "
                     f"{ours['seconds']:.2f} | {route['seconds']:.2f} | {twin['seconds']:.2f} | "
                     f"{cell['time_ratio']:.2f} | {_memory(ours)} | {_memory(route)} | "
                     f"{min(loads):.1f}–{max(loads):.1f} |")
    commands = {}
    for name, info in results["datasets"].items():
        commands.setdefault(info.get("command", "?"), []).append(f"{name} ({info.get('run_at', '?')})")
    lines += ["", "Commands: " + "; ".join(f"`{c}`: {', '.join(n)}" for c, n in commands.items()) + "."]
    if results.get("skipped"):
        lines += ["", "Not run: " + "; ".join(f"{n}: {why}" for n, why in results["skipped"].items()) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=DATASETS, metavar="NAME",
                        help=f"these datasets only ({', '.join(DATASETS)})")
    parser.add_argument("--measures", nargs="+", default=MEASURES, choices=bench_suite.MEASURES)
    parser.add_argument("--quick", action="store_true", help="smaller synthetic sizes, for a smoke run")
    parser.add_argument("--draw", type=int, default=0,
                        help="another draw of a set: wide-sparse's generator with seeds [25 + DRAW, ·], the "
                             "text sets' 70/30 split with seed DRAW (0: the sets as they are)")
    parser.add_argument("--sms", type=Path, help="the SMSSpamCollection file")
    parser.add_argument("--sentences", type=Path, help="the Sentiment Labelled Sentences directory")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/calopt-sizes"),
                        help="where the memory-mapped data are generated (once; 4 GB for mmap-10m)")
    parser.add_argument("--threads", type=int, help="limit BLAS/OpenMP threads (default: leave them)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file (default benchmarks/results/sizes.json, sizes_quick.json with --quick)")
    parser.add_argument("--report", action="store_true", help="print the table of --out and exit")
    parser.add_argument("--child", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = HERE / "results" / ("sizes_quick.json" if args.quick else "sizes.json")
    if args.child:
        run_dataset(args.child, args)
    elif args.report:
        print(report(json.loads(args.out.read_text())))
    else:
        run(args, argv)


if __name__ == "__main__":
    main()

"""Real sparse text, outside the wide benchmark: calopt's default against the wide benchmark's
route on TF-IDF features. Three public collections (not shipped: give the path):

* the SMS Spam Collection (Almeida & Gómez Hidalgo; UCI, CC BY 4.0): the tab-separated
  ``SMSSpamCollection`` file, label (``ham``/``spam``) then text, an optional ``cat\tmsg`` header line; 5,574
  messages, 13.4% spam (positive);
* Sentiment Labelled Sentences (Kotzias et al., 2015; UCI, CC BY 4.0): a directory with
  ``amazon_cells_labelled.txt``, ``imdb_labelled.txt`` and ``yelp_labelled.txt`` (a sentence,
  a tab, 0 or 1); 3,000 sentences, half positive;
* BBC News (Greene & Cunningham, 2006, for research use; the copy in GitHub
  ``LTSACH/AILearningHub`` at 46f242a, ``datasets/bbcnews/data/``): a directory with ``train.csv``, ``val.csv`` and ``test.csv``
  (``text,category``, five categories); 2,225 articles, the rarest category (entertainment,
  17.3%) positive, the rule fixed before any result (the medium benchmark's: the rarest class
  against the rest). Not used to choose any rule: a text set for confirmation only.

TF-IDF (scikit-learn's ``TfidfVectorizer(sublinear_tf=True)``, fitted on the training part;
with ``--binary``, word presence: ``CountVectorizer(binary=True)``, the wide binary shape),
stratified 70/30 splits with seeds 0-2, the seven measures, two variants: the whole
collection, and every negative with a seeded sample of positives making ``--rate`` of the
rows. calopt's default (``calopt.fit(X, y, measure=M)``) against ``bench_suite.run_route``
(TunedThresholdClassifierCV(MaxAbsScaler + LogisticRegression, cv=5) tuned for the measure),
in the same run, and the route's twin (its folds shuffled by seed 1: the route's own noise on
the cell). Writes ``--out`` and prints a line a cell and the summary.

    python benchmarks/bench_text.py PATH/SMSSpamCollection --rate 0.03
    python benchmarks/bench_text.py PATH/sentiment_dir --rate 0.1 --out benchmarks/results/text_sentences.json
    python benchmarks/bench_text.py PATH/SMSSpamCollection --binary --out benchmarks/results/text_binary.json
    python benchmarks/bench_text.py PATH/bbc --rate 0.03 [--binary] --out benchmarks/results/text_bbc[_binary].json
    python benchmarks/bench_text.py PATH/bbc --rate 0.03 --route-from benchmarks/results/text_bbc.json --out NEW.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_suite  # noqa: E402


def _lines(path: Path) -> list[str]:
    """The file's lines, split at newlines only (``str.splitlines`` also splits at U+0085, which
    one of the sentences contains)."""
    return path.read_text(encoding="utf-8").replace("\r\n", "\n").rstrip("\n").split("\n")


def messages(path: Path) -> tuple[str, list[str], np.ndarray]:
    """The collection's name, texts and labels (1 positive: spam, a positive sentence, or BBC's rarest
    category)."""
    if path.is_dir() and (path / "train.csv").is_file():  # BBC News: text,category
        import pandas as pd

        table = pd.concat([pd.read_csv(path / f"{part}.csv") for part in ("train", "val", "test")],
                          ignore_index=True)
        counts = table["category"].value_counts()
        rarest = sorted(counts.index[counts == counts.min()])[0]
        return "bbc", table["text"].astype(str).tolist(), (table["category"] == rarest).to_numpy().astype(int)
    if path.is_dir():
        texts, labels = [], []
        for name in ("amazon_cells_labelled.txt", "imdb_labelled.txt", "yelp_labelled.txt"):
            for number, line in enumerate(_lines(path / name), 1):
                text, _, label = line.rpartition("\t")
                if label.strip() not in ("0", "1") or not text.strip():
                    raise SystemExit(f"{path / name}:{number}: expected a sentence, a tab and 0 or 1")
                texts.append(text)
                labels.append(int(label))
        return "sentences", texts, np.asarray(labels)
    texts, labels = [], []
    for number, line in enumerate(_lines(path), 1):
        label, _, text = line.partition("\t")
        if label == "cat" and number == 1:
            continue
        if label not in ("ham", "spam") or not text:
            raise SystemExit(f"{path}:{number}: expected 'ham' or 'spam', a tab and the text")
        texts.append(text)
        labels.append(1 if label == "spam" else 0)
    return "sms", texts, np.asarray(labels)


def summarize(cells: dict[str, dict]) -> dict[str, float]:
    """calopt's and the twin's margins over the route: mean, median, the share of cells no more than
    0.01 below it, the cells more than 0.02 below it, the worst."""
    summary: dict[str, float] = {"cells": len(cells)}
    for name, key in (("", "margin"), ("twin_", "twin_margin")):
        margins = np.array([cell[key] for cell in cells.values() if key in cell])
        if margins.size:
            summary.update({f"{name}mean_margin": float(margins.mean()), f"{name}median_margin": float(np.median(margins)),
                            f"{name}within_0.01": float(np.mean(margins >= -0.01)),
                            f"{name}below_-0.02": int(np.sum(margins < -0.02)), f"{name}worst": float(margins.min())})
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the SMSSpamCollection file, the sentences' directory or BBC's")
    parser.add_argument("--rate", type=float, default=0.03, help="the positive share of the second variant")
    parser.add_argument("--binary", action="store_true",
                        help="word presence (0/1 features: CountVectorizer(binary=True)) instead of TF-IDF")
    parser.add_argument("--calopt-kwargs", default="{}", help="JSON object of extra keyword arguments for calopt.fit")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "text.json")
    parser.add_argument("--route-from", type=Path, metavar="RESULTS",
                        help="take the route's and its twin's values and seconds from this results file (the same "
                             "collection, rate and features) instead of fitting them again: calopt alone is run")
    args = parser.parse_args()
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.model_selection import train_test_split

    bench_suite.limit_threads()
    name, texts, y_all = messages(args.path)
    kwargs = json.loads(args.calopt_kwargs)
    cached = bench_suite.load_results(args.route_from)["cells"] if args.route_from else None
    spam, ham = np.flatnonzero(y_all == 1), np.flatnonzero(y_all == 0)
    sample = np.random.default_rng(0).choice(spam, int(args.rate / (1 - args.rate) * ham.size), replace=False)
    variants = {name: np.arange(y_all.size),
                f"{name}{round(100 * args.rate)}": np.sort(np.concatenate([ham, sample]))}
    features = "word presence" if args.binary else "TF-IDF"
    cells = {}
    for variant, keep in variants.items():
        for seed in (0, 1, 2):
            t_train, t_test, y_train, y_test = train_test_split(
                [texts[i] for i in keep], y_all[keep], test_size=0.3, random_state=seed, stratify=y_all[keep])
            vectorizer = CountVectorizer(binary=True) if args.binary else TfidfVectorizer(sublinear_tf=True)
            X_train = vectorizer.fit_transform(t_train).astype(np.float64)
            data = bench_suite.Dataset(variant, f"{name}, {features}", X_train, y_train,
                                       vectorizer.transform(t_test), y_test, 1, 0,
                                       f"stratified 70%/30%, seed {seed}")
            for measure in bench_suite.MEASURES:
                key = f"{variant}|{measure}|{seed}"
                if cached is not None:
                    if key not in cached or "twin" not in cached[key]:
                        raise SystemExit(f"{args.route_from}: no route and twin for {key}")
                    route = {"value": cached[key]["route"], "seconds": cached[key]["route_seconds"]}
                    twin = {"value": cached[key]["twin"]}
                else:
                    route = bench_suite.run_route(data, measure)
                    twin = bench_suite.run_route(data, measure, cv_seed=1)
                ours = bench_suite.run_calopt(data, measure, kwargs)
                if "error" in ours:
                    raise SystemExit(f"{variant} {measure} seed {seed}: {ours['error']}")
                selection = ours["options"].get("selection", {})
                cell = {"route": route["value"], "calopt": ours["value"], "margin": ours["value"] - route["value"],
                        "twin": twin["value"], "twin_margin": twin["value"] - route["value"],
                        "route_seconds": route["seconds"], "calopt_seconds": ours["seconds"],
                        "test_positives": int(np.sum(y_test == 1)), "features": int(X_train.shape[1]),
                        "rule": selection.get("rule"), "algorithm": selection.get("algorithm")}
                cells[key] = cell
                print(f"{variant:11s} {measure:15s} seed {seed}: route {cell['route']:.4f} calopt {cell['calopt']:.4f} "
                      f"({cell['margin']:+.4f}; twin {cell['twin_margin']:+.4f}) {cell['rule']} {cell['algorithm']}",
                      flush=True)
    summary = summarize(cells)
    bench_suite.write_results(args.out, {"features": features, "calopt_kwargs": kwargs, "summary": summary, "cells": cells})
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

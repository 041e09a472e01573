"""Large data (calopt.training.sampling): the model trained on a sample, its threshold the exact
best cut on the rows it never saw; checked against scikit-learn's measures on those rows."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score

import calopt
from calopt.training import sampling
from calopt.training.sampling import RowSample, sample_size


def test_sample_size_rule():
    assert sample_size(99_999, 5) is None  # below twice the fewest rows: every row
    assert sample_size(100_000, 5) == sampling.MIN_ROWS
    assert sample_size(1_000_000, 100) == 100 * sampling.ROWS_PER_FEATURE
    assert sample_size(150_000, 100) is None  # fewer than 2,000 rows per feature: every row
    # the smaller class known: as few rows as hold 500 of it, at least 20,000 and 1,000 a feature
    assert sample_size(99_999, 5, 30_000) is None  # the regime starts where it did
    assert sample_size(150_000, 5, 30_000) == 20_000  # 20%: 4,000 of it in 20,000 rows
    assert sample_size(400_000, 8, 8_000) == 25_000  # 2%: 500 of it need 25,000 rows
    assert sample_size(1_000_000, 30, 500_000) == 30_000  # 1,000 a feature
    assert sample_size(1_000_000, 100, 500_000) == 100_000
    # rare (fewer than 500 of it in 50,000 rows, or in 1,000 a feature): the case-control sample's size
    assert sample_size(300_000, 5, 2_999) == 50_000 and sampling.rare_class(300_000, 5, 2_999)
    assert not sampling.rare_class(300_000, 5, 3_000) and sample_size(300_000, 5, 3_000) == 50_000  # 500 in 50,000
    assert sample_size(300_000, 5, 6_000) == 25_000
    assert sample_size(1_000_000, 60, 8_000) == 60_000  # 480 of it in 60,000 rows


def _data(n: int, d: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.array([1.0, 3.0, 0.5, 10.0])[:d]
    score = X @ (np.array([1.0, -0.5, 2.0, 0.1])[:d]) + rng.logistic(size=n)
    return X, (score > np.quantile(score, 0.9)).astype(np.int64)


@pytest.fixture(scope="module")
def large() -> tuple[np.ndarray, np.ndarray]:
    return _data(2 * sampling.MIN_ROWS + 10_000)


def test_large_fit_cuts_its_threshold_on_the_rows_it_did_not_train_on(large):
    X, y = large
    model = calopt.fit(X, y, measure="f1")
    account = model.fit_report.subsample
    assert account["of"] == y.size and account["rows"] + account["cut_rows"] == y.size
    # 10% positive: 2,000 of them in the fewest rows a few columns take (FEW_COLUMNS_ROWS)
    assert abs(account["rows"] - sampling.FEW_COLUMNS_ROWS) <= 1
    # the same stratified draw: its rest rows are where the threshold was cut
    rows = RowSample.draw(np.where(y == 1, 1.0, -1.0), sampling.FEW_COLUMNS_ROWS, 0)
    assert rows.rest.size == account["cut_rows"]
    rest_X, rest_y = X[rows.rest], y[rows.rest]
    scores = model.decision_function(rest_X)
    assert account["value"] == pytest.approx(f1_score(rest_y, scores > 0), abs=1e-12)
    # no threshold at a neighbouring distinct score does better there (scikit-learn's F1)
    distinct = np.unique(scores)
    at = np.searchsorted(distinct, 0.0)
    for shift in distinct[max(at - 3, 0):at + 3]:
        assert f1_score(rest_y, scores > shift) <= account["value"] + 1e-12


def test_large_fit_matches_the_split_route(large):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, y = large
    X_test, y_test = _data(40_000, seed=1)
    model = calopt.fit(X, y, measure="f1")
    fit, held, y_fit, y_held = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    route = LogisticRegression(max_iter=1000).fit(fit, y_fit)
    held_scores = route.decision_function(held)
    cuts = np.quantile(held_scores, np.linspace(0.5, 0.99, 400))
    cut = cuts[np.argmax([f1_score(y_held, held_scores > c) for c in cuts])]
    route_f1 = f1_score(y_test, route.decision_function(X_test) > cut)
    assert f1_score(y_test, model.predict(X_test)) >= route_f1 - 0.01


def _rare(n: int, rate: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Four columns, a positive class of ``rate`` (the top of a noisy linear score)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * np.array([1.0, 3.0, 0.5, 10.0])
    score = X @ np.array([1.0, -0.5, 2.0, 0.1]) + rng.logistic(size=n)
    return X, (score > np.quantile(score, 1 - rate)).astype(np.int64)


def _split_route_f1(X, y, X_test, y_test):
    """Test F1 of scikit-learn's route at this size: LogisticRegression on 80% of the rows, the
    threshold the best of the 400 highest held-out scores on the other 20%."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    fit, held, y_fit, y_held = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    route = LogisticRegression(max_iter=1000).fit(fit, y_fit)
    held_scores = route.decision_function(held)
    cuts = np.unique(held_scores)[-400:]
    cut = cuts[np.argmax([f1_score(y_held, held_scores > c) for c in cuts])]
    return f1_score(y_test, route.decision_function(X_test) > cut)


def test_a_rare_class_keeps_its_rows_in_a_weighted_case_control_sample():
    """Where the stratified sample would hold fewer than CV_MINORITY rows of the smaller class, it
    keeps min(RARE_KEPT of them, CV_MINORITY) and fills up with the other class; the sample's weights
    (mean 1) and the rest's put each class at its share of every row, by plain counting."""
    from calopt.training.selection import CV_MINORITY

    y = np.where(np.arange(200_000) % 500 == 0, 1.0, -1.0)  # 400 positive rows
    draw = RowSample.draw(y, 50_000, 3)
    assert draw.sample.size == 50_000 and np.intersect1d(draw.sample, draw.rest).size == 0
    assert draw.sample.size + draw.rest.size == y.size
    kept = int(np.sum(y[draw.sample] > 0))
    assert kept == min(int(sampling.RARE_KEPT * 400), CV_MINORITY) == 320
    assert draw.weight.mean() == pytest.approx(1.0)
    for rows, weight in ((draw.sample, draw.weight), (draw.rest, draw.rest_weight)):
        positive = y[rows] > 0
        share = weight[positive].sum() / weight.sum()
        assert share == pytest.approx(400 / y.size, rel=1e-12)  # the whole data's positive share
    # each rest row stands for 1/(1 − f) rows of its class: the class's count over the rest
    assert draw.rest_weight[y[draw.rest] > 0].sum() == pytest.approx(400)
    assert draw.rest_weight[y[draw.rest] < 0].sum() == pytest.approx(y.size - 400)
    # a common class: the stratified sample as before, no weights
    common = np.where(np.arange(200_000) % 10 == 0, 1.0, -1.0)
    stratified = RowSample.draw(common, 50_000, 3)
    assert stratified.weight is None and stratified.rest_weight is None
    assert int(np.sum(common[stratified.sample] > 0)) == 5_000
    # two rows of the smaller class: nothing to weigh, the stratified draw (no division by 0)
    two = np.where(np.arange(200_000) < 2, 1.0, -1.0)
    assert RowSample.draw(two, 50_000, 3).weight is None


def test_a_rare_class_s_large_fit_cuts_on_the_weighted_rest_and_is_level_with_the_split_route():
    """0.3% positive in 130,000 rows: the case-control sample trains (one held-out split), the
    threshold is the best cut of the rest weighted back to the whole data's shares (scikit-learn's
    F1 with those weights), and on new rows the model does at least as well as scikit-learn's
    logistic regression cut on a 20% split."""

    X, y = _rare(130_000, 0.003)
    model = calopt.fit(X, y, measure="f1")
    account = model.fit_report.subsample
    assert account["weighted"] and account["smaller_class_rows"] == int(sampling.RARE_KEPT * y.sum())
    assert model.fit_report.selection["rule"] == "holdout:0.2"
    draw = RowSample.draw(np.where(y == 1, 1.0, -1.0), account["rows"], 0)
    scores = model.decision_function(X[draw.rest])
    assert account["value"] == pytest.approx(f1_score(y[draw.rest], scores > 0, sample_weight=draw.rest_weight),
                                             abs=1e-12)
    X_test, y_test = _rare(200_000, 0.003, seed=1)
    assert f1_score(y_test, model.predict(X_test)) >= _split_route_f1(X, y, X_test, y_test) - 0.02


def test_the_survey_keeps_each_class_s_own_bottom_k(tmp_path):
    """``class_rows``: per label, the rows with the smallest of their own seeded keys (drawn in row
    order, whatever the parts: a directory, whose row count is known, and chunks alike); a class
    with fewer rows keeps them all; a third label drops them."""
    from calopt.io.stream import chunk_source, open_stream, survey

    X, y = _rare(3000, 0.01)
    keys = np.random.default_rng([4, 11]).random(3000)
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "X.npy", X)
    np.save(tmp_path / "d" / "y.npy", y)
    for source in (open_stream(tmp_path / "d", part_rows=97),
                   chunk_source([(X[i:i + 250], y[i:i + 250]) for i in range(0, 3000, 250)])):
        found = survey(source, sample_rows=100, seed=4, class_rows=40)
        assert len(found.class_samples) == 2
        for rows, index, kept_keys in found.class_samples:
            label = y[index[0]]
            mine = np.flatnonzero(y == label)
            expected = np.sort(mine[np.argsort(keys[mine])[:40]])
            np.testing.assert_array_equal(index, expected)
            np.testing.assert_array_equal(kept_keys, keys[expected])
            np.testing.assert_array_equal(rows, X[expected])
    three = np.arange(3000) % 3
    assert survey(chunk_source([(X, three)]), class_rows=40).class_samples == []


def test_a_streamed_rare_class_trains_on_a_case_control_sample_too(tmp_path):
    """A large stream with 0.3% positive rows trains as the same rows in memory do: the smaller
    class's rows from the survey's own sample of it (RARE_KEPT of them), the rest of the sample the
    uniform sample's other class, weighted back (one held-out split); the threshold is the best cut
    of the rest weighted by count over count left per class (scikit-learn's weighted F1, weights by
    plain counting); on new rows level with the route cut on a 20% split."""

    from calopt.io.stream import open_stream

    X, y = _rare(130_000, 0.003)
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "X.npy", X)
    np.save(tmp_path / "d" / "y.npy", y)
    model = calopt.fit(open_stream(tmp_path / "d"), measure="f1")
    account = model.fit_report.subsample
    kept = int(sampling.RARE_KEPT * y.sum())
    assert account["drawn"] == "case-control" and account["weighted"] and account["smaller_class_rows"] == kept
    assert model.fit_report.selection["rule"] == "holdout:0.2"
    assert model.fit_report.stream.sample_rows == account["rows"] == sample_size(y.size, 4)
    # the sample, drawn again from the seeded keys: the positives with the smallest keys of their own
    # (seed 0's second stream), the negatives with the smallest of the uniform sample's keys
    common_kept = account["rows"] - kept
    rare_keys = np.random.default_rng([0, 11]).random(y.size)
    uniform_keys = np.random.default_rng([0, 7]).random(y.size)
    positives, negatives = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    trained = np.concatenate([positives[np.argsort(rare_keys[positives])[:kept]],
                              negatives[np.argsort(uniform_keys[negatives])[:common_kept]]])
    rest = np.setdiff1d(np.arange(y.size), trained)
    # a rest row stands for count / (count − kept) rows of its class
    weight = np.where(y[rest] == 1, positives.size / (positives.size - kept),
                      negatives.size / (negatives.size - common_kept))
    value = f1_score(y[rest], model.decision_function(X[rest]) > 0, sample_weight=weight)
    assert account["value"] == pytest.approx(value, abs=1e-12)
    X_test, y_test = _rare(200_000, 0.003, seed=1)
    assert f1_score(y_test, model.predict(X_test)) >= _split_route_f1(X, y, X_test, y_test) - 0.02


def test_a_stream_s_uniform_sample_takes_one_held_out_split_as_in_memory(tmp_path):
    """2% positive in 110,000 rows, 4 columns: not rare, so the sample is the 25,000 rows that hold
    about 500 positives; the survey's uniform draw holds 498 here (the seeded keys, counted below),
    which alone would have called for 5-fold cross-fitting: as in memory, the sample takes one
    held-out split (its rest gives the threshold)."""
    from calopt.io.stream import open_stream

    rng = np.random.default_rng(0)
    X = rng.standard_normal((110_000, 4))
    y = np.zeros(110_000, dtype=np.int64)
    y[rng.choice(110_000, 2_200, replace=False)] = 1
    X[y == 1] += 0.8
    assert sample_size(y.size, 4, 2_200) == 25_000
    drawn = np.argsort(np.random.default_rng([0, 7]).random(y.size))[:25_000]  # the survey's keys, seed 0
    assert y[drawn].sum() == 498  # fewer than CV_MINORITY in the draw itself
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "X.npy", X)
    np.save(tmp_path / "d" / "y.npy", y)
    model = calopt.fit(open_stream(tmp_path / "d"), measure="gmean")
    assert model.fit_report.subsample["drawn"] == "uniform" and model.fit_report.subsample["rows"] == 25_000
    assert model.fit_report.selection["rule"] == "holdout:0.2"
    assert calopt.fit(X, y, measure="gmean").fit_report.selection["rule"] == "holdout:0.2"


@pytest.mark.parametrize("options", [{"select": "holdout:0.2"}, {"sample_weight": "ones"},
                                     {"measure": "recall", "constraints": ["precision>=0.5"]}])
def test_every_row_trains_when_the_user_says_how(large, options):
    X, y = large
    options = dict(options)
    if options.get("sample_weight") == "ones":
        options["sample_weight"] = np.ones(y.size)
    options.setdefault("measure", "f1")
    model = calopt.fit(X, y, max_epochs=3, **options)
    assert model.fit_report.subsample is None


def test_below_the_regime_nothing_changes():
    X, y = _data(2 * sampling.MIN_ROWS - 1)
    assert calopt.fit(X, y, measure="gmean", max_epochs=3).fit_report.subsample is None


def test_standardized_scores_map_back_to_the_raw_features():
    """The model trained on standardized features, expressed on the raw ones (coef w/(s·σ), intercept
    b − (μ/σ)·w), gives the same scores: plain arithmetic against the transform."""
    from calopt.backends import get_backend
    from calopt.training.pipeline import prepare, standardize

    rng = np.random.default_rng(2)
    X = rng.standard_normal((500, 3)) * [300.0, 1.0, 0.01] + [2950.0, -4.0, 5.0]
    data, shift, transform = standardize(prepare(X, np.where(rng.random(500) < 0.3, 1.0, -1.0),
                                                 get_backend("numpy"), True))
    w, b = rng.standard_normal(3), 0.7
    np.testing.assert_allclose(np.asarray(data.X) @ w + b, X @ (w / data.scale) + b - shift @ w, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(data.X).mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(data.X).std(axis=0), 1.0, rtol=1e-9)
    # other rows of the same features (max-abs scaled as the training rows were) get the same transform
    np.testing.assert_allclose(transform(X[:5] / np.abs(X).max(axis=0)), np.asarray(data.X)[:5], rtol=1e-9)


def _directory(path, X, y):
    path.mkdir()
    np.save(path / "X.npy", X.astype(np.float32))
    np.save(path / "y.npy", y)
    return path


def test_a_large_stream_trains_on_the_surveys_sample_and_cuts_on_every_other_row(large, tmp_path):
    from calopt.io.stream import open_stream, survey
    from calopt.training.stream import threshold_rows

    X, y = large
    directory = _directory(tmp_path / "large", X, y)
    model = calopt.fit(open_stream(directory), measure="f1")
    account, stream = model.fit_report.subsample, model.fit_report.stream
    rows = sampling.FEW_COLUMNS_ROWS  # 10% positive (as in memory)
    assert account["rows"] == rows and account["cut_rows"] == y.size - rows
    assert stream.passes == 2 and stream.exact_threshold and stream.threshold_rows == account["cut_rows"]
    # the sample: the survey's rows with the smallest keys (the same seed), the rest the others
    source = open_stream(directory)
    found = survey(source, sample_rows=max(calopt.training.stream.SAMPLE_ROWS, threshold_rows(source)), seed=0)
    rest = np.setdiff1d(np.arange(y.size), found.sample_index[found.bottom(rows)])
    X32 = X.astype(np.float32)
    scores = model.decision_function(X32[rest])
    assert account["value"] == pytest.approx(f1_score(y[rest], scores > 0), abs=1e-12)
    distinct = np.unique(scores)  # no neighbouring cut does better there (scikit-learn's F1)
    at = np.searchsorted(distinct, 0.0)
    for shift in distinct[max(at - 3, 0):at + 3]:
        assert f1_score(y[rest], scores > shift) <= account["value"] + 1e-12
    # as good on new rows as the in-memory large-data route
    X_test, y_test = _data(40_000, seed=1)
    in_memory = calopt.fit(X, y, measure="f1")
    assert f1_score(y_test, model.predict(X_test)) >= f1_score(y_test, in_memory.predict(X_test)) - 0.01


@pytest.mark.parametrize("options", [{"algorithm": "stamp"}, {"epochs": 2}, {"tune_threshold": False}])
def test_a_stream_keeps_its_own_route_when_the_user_chooses(large, tmp_path, options):
    from calopt.io.stream import open_stream

    X, y = large
    model = calopt.fit(open_stream(_directory(tmp_path / "large", X, y)), measure="f1", **options)
    assert model.fit_report.subsample is None and model.fit_report.stream.passes > 2


def test_a_small_stream_keeps_its_own_route(tmp_path):
    from calopt.io.stream import open_stream

    X, y = _data(20_000)
    model = calopt.fit(open_stream(_directory(tmp_path / "small", X, y)), measure="f1")
    assert model.fit_report.subsample is None and model.fit_report.stream.passes > 2


def test_the_cli_says_a_rare_class_s_sample_is_case_control_and_weighted():
    """``calopt train``'s sentence about a large run's rows names the case-control sample, how many
    rows of the smaller class it kept and that the cut's rows are weighted too; a stratified sample
    is described as before."""
    from calopt_cli.options import subsample_text

    account = {"rows": 50_000, "of": 130_000, "cut_rows": 80_000, "smaller_class_rows": 312, "weighted": True,
               "value": 0.2878}
    text = subsample_text(account, "f1")
    assert text.startswith("trained on a case-control sample of 50,000 of 130,000 rows (312 of the smaller class")
    assert "the best cut on the other 80,000 rows (weighted likewise) (f1 0.2878 there)" in text
    plain = subsample_text({"rows": 50_000, "of": 300_000, "cut_rows": 250_000, "value": 0.7}, "f1")
    assert plain == "trained on a stratified sample of 50,000 of 300,000 rows; threshold: the best cut on the " \
                    "other 250,000 rows (f1 0.7000 there)"


def test_a_large_fit_scales_its_own_sample_and_leaves_the_user_s_rows_as_they_were(large):
    """The sample is scaled and centred in place (no second copy of its rows): the user's array is
    not, and the standardized features are those of plain NumPy arithmetic on a copy."""
    from calopt.backends import get_backend
    from calopt.training.pipeline import prepare, standardize

    X, y = large
    before = X.copy()
    calopt.fit(X, y, measure="f1", max_epochs=3)
    np.testing.assert_array_equal(X, before)
    rows = np.arange(0, X.shape[0], 7)
    sample = X[rows]
    data = prepare(sample, y[rows], get_backend("numpy"), True, owned=True)
    assert data.X is sample  # scaled in the caller's copy
    scaled = X[rows] / np.maximum(np.abs(X[rows]).max(axis=0), np.finfo(float).tiny)
    np.testing.assert_array_equal(data.X, scaled)
    data, shift, _ = standardize(data)
    np.testing.assert_array_equal(data.X, (scaled - scaled.mean(axis=0)) / scaled.std(axis=0))
    np.testing.assert_array_equal(shift, scaled.mean(axis=0) / scaled.std(axis=0))

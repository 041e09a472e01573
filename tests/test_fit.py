"""calopt.fit, thresholds and model files, against independent references."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.metrics import f1_score, jaccard_score

import calopt
from imblearn.metrics import geometric_mean_score
from calopt import datasets
from calopt.training.threshold import best_cut, best_threshold
from calopt.models.linear import LinearModel


@pytest.fixture(scope="module")
def a9a_small():
    train = datasets.load("a9a", "train")
    rows = np.random.default_rng(0).permutation(train.n_samples)[:4000]
    return train.X[rows], train.labels[rows]


def _separable(n=300, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0.8, 1.0, -1.0)  # imbalanced, linearly separable
    return X, y


@pytest.mark.parametrize("measure", ["f1", "jaccard", "gower-legendre"])
def test_best_threshold_matches_brute_force(measure):
    rng = np.random.default_rng(1)
    scores = np.round(rng.normal(size=300), 1)  # many ties
    y = np.where(rng.random(300) < 0.3, 1.0, -1.0)
    threshold, value = best_threshold(scores, y, calopt.get_measure(measure))
    reference = {"f1": f1_score, "jaccard": jaccard_score}.get(measure)

    def measure_at(t):
        predicted = np.where(scores > t, 1.0, -1.0)
        if reference is not None:
            return reference(y, predicted, zero_division=0)
        tp = np.sum((predicted > 0) & (y > 0)); tn = np.sum((predicted < 0) & (y < 0))
        return (tp + tn) / (tp + tn + 0.5 * (len(y) - tp - tn))

    candidates = np.concatenate([[scores.max() + 1], np.unique(scores) - 1e-9, [scores.min() - 1]])
    brute = max(measure_at(t) for t in candidates)
    assert value == pytest.approx(brute, abs=1e-12)
    assert measure_at(threshold) == pytest.approx(brute, abs=1e-12)


@pytest.mark.parametrize("measure", ["f1", "gmean"])
def test_the_threshold_is_tuned_on_the_scores_device_with_sample_weights(measure):
    """best_cut runs where the scores are (array-api-strict's second device here) and returns
    0-d arrays there; integer weights count like repeated rows (a brute-force reference)."""
    strict = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(4)
    scores = np.round(rng.normal(size=200), 1)
    y = np.where(rng.random(200) < 0.3, 1.0, -1.0)
    counts = rng.integers(0, 4, size=200).astype(float)
    device = strict.Device("device1")
    threshold, value = best_cut(strict.asarray(scores, device=device), strict.asarray(y, device=device),
                                calopt.get_measure(measure), strict.asarray(counts, device=device))
    assert threshold.device == device and value.device == device and threshold.shape == ()
    repeated_scores, repeated_y = np.repeat(scores, counts.astype(int)), np.repeat(y, counts.astype(int))
    reference = {"f1": lambda t, p: f1_score(t, p, zero_division=0),
                 "gmean": lambda t, p: geometric_mean_score(t, p)}[measure]
    candidates = np.concatenate([[scores.max() + 1], np.unique(scores) - 1e-9, [scores.min() - 1]])
    brute = max(reference(repeated_y, np.where(repeated_scores > t, 1.0, -1.0)) for t in candidates)
    assert float(value) == pytest.approx(brute, abs=1e-12)
    assert reference(repeated_y, np.where(repeated_scores > float(threshold), 1.0, -1.0)) == pytest.approx(brute)


@pytest.mark.parametrize("measure", ["min", "qmean", "hmean", "gmean", "f1", "jaccard"])
def test_separable_data_reaches_the_optimum(measure):
    """Separable data: the model recovers the separating hyperplane x0 + x1/2 = 0.8."""
    X, y = _separable()
    model = calopt.fit(X, y, measure=measure, epochs=20, seed=0)
    truth = np.array([1.0, 0.5, 0.0, 0.0, 0.0])
    cosine = model.coef @ truth / (np.linalg.norm(model.coef) * np.linalg.norm(truth))
    assert cosine > 0.98
    assert -model.intercept / (model.coef @ truth / (truth @ truth)) == pytest.approx(0.8, abs=0.1)
    assert model.score(X, y) >= 0.95


def test_model_predicts_original_labels_and_uses_folded_scaling(a9a_small):
    X, y = a9a_small
    labels = np.where(y > 0, "rich", "poor")
    model = calopt.fit(X, labels, measure="f1", epochs=3, positive="rich")
    assert model.classes == ("poor", "rich")
    predicted = model.predict(X)
    assert set(np.unique(predicted)) <= {"poor", "rich"}
    scores = np.asarray(X @ model.coef + model.intercept)
    np.testing.assert_allclose(model.decision_function(X), scores)
    np.testing.assert_array_equal(predicted == "rich", scores > 0)
    expected = f1_score(labels, predicted, pos_label="rich")
    assert model.score(X, labels) == pytest.approx(expected)
    assert len(model.history) == 3 and all("train" in row for row in model.history)


def test_sparse_and_dense_inputs_give_the_same_model(a9a_small):
    X, y = a9a_small
    sparse_model = calopt.fit(X, y, measure="qmean", epochs=2)
    dense_model = calopt.fit(X.toarray(), y, measure="qmean", epochs=2)
    np.testing.assert_allclose(sparse_model.coef, dense_model.coef, rtol=1e-9, atol=1e-12)
    assert sparse_model.intercept == pytest.approx(dense_model.intercept, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("measure, algorithm", [
    ("f1", "stamp:step=10"), ("jaccard", "amp:step=10"), ("gmean", "spade:step=10"),
    ("hmean", "spade:step=10"), ("qmean", "spade:step=10"), ("min", "spade:step=10"),
    ("gower-legendre", "plugin:step=1"),
])
def test_array_api_strict_backend_gives_the_numpy_model(measure, algorithm):
    """Every solver runs under array-api-strict (no non-standard call) with the same result."""
    X, y = _separable(n=400, seed=3)
    X[:, 2] += 0.3 * y
    ours = calopt.fit(X, y, measure=measure, epochs=3, algorithm=algorithm)
    strict = calopt.fit(X, y, measure=measure, epochs=3, algorithm=algorithm,
                        backend="array-api-strict")
    np.testing.assert_allclose(strict.coef, ours.coef, rtol=1e-9, atol=1e-12)
    assert strict.fit_report.backend == "array-api-strict"


def test_plugin_holds_out_data_for_the_threshold(a9a_small):
    X, y = a9a_small
    model = calopt.fit(X, y, measure="f1", algorithm="plugin", epochs=3)
    assert model.loss == "logistic"
    assert model.score(X, y) > 0.5


def test_bad_parameters_are_clear_errors():
    X, y = _separable()
    with pytest.raises(calopt.ParameterError, match="epochs"):
        calopt.fit(X, y, epochs=0)
    with pytest.raises(calopt.ParameterError, match="batch_size"):
        calopt.fit(X, y, batch_size=-4)
    with pytest.raises(calopt.UnknownNameError, match="did you mean 'spade'"):
        calopt.fit(X, y, measure="qmean", algorithm="spad")
    with pytest.raises(calopt.DataError, match="one class"):
        calopt.fit(X, np.ones(len(y)))


# -- model files -------------------------------------------------------------------
def test_model_file_round_trip(tmp_path, a9a_small):
    X, y = a9a_small
    model = calopt.fit(X, y, measure="gmean", epochs=2)
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = LinearModel.load(path)
    np.testing.assert_array_equal(loaded.coef, model.coef)
    assert loaded.intercept == model.intercept and loaded.measure == "gmean"
    # timings stay out of the file (the same model gives the same bytes)
    assert loaded.history == [{k: v for k, v in row.items() if k != "seconds"} for row in model.history]
    assert loaded.classes == model.classes
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with np.load(path, allow_pickle=False) as archive:  # plain arrays only
        assert set(archive.files) == {"metadata", "coef", "scale"}
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]  # no temporary left


def test_model_trained_on_numpy_predicts_on_array_api_strict(tmp_path):
    import array_api_strict as xps

    X, y = _separable()
    model = calopt.fit(X, y, measure="hmean", epochs=2)
    model.save(tmp_path / "m.npz")
    loaded = LinearModel.load(tmp_path / "m.npz")
    scores = loaded.decision_function(xps.asarray(X))
    np.testing.assert_allclose(np.asarray(scores), model.decision_function(X), rtol=1e-12)


def test_corrupt_newer_and_foreign_model_files_are_rejected(tmp_path):
    X, y = _separable()
    model = calopt.fit(X, y, measure="f1", epochs=2)
    good = tmp_path / "good.npz"
    model.save(good)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:200])
    with pytest.raises(calopt.ModelFileError, match="truncated.npz"):
        LinearModel.load(truncated)

    import json

    with np.load(good) as archive:
        arrays = {k: archive[k] for k in archive.files}
    metadata = json.loads(arrays["metadata"].tobytes())
    tampered = tmp_path / "tampered.npz"
    np.savez(tampered, **{**arrays, "coef": arrays["coef"] + 1})
    with pytest.raises(calopt.ModelFileError, match="checksum"):
        LinearModel.load(tampered)
    newer = tmp_path / "newer.npz"
    metadata["format_version"] = 99
    np.savez(newer, **{**arrays, "metadata": np.frombuffer(json.dumps(metadata).encode(), np.uint8)})
    with pytest.raises(calopt.ModelFileError, match="newer"):
        LinearModel.load(newer)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, a=np.zeros(3))
    with pytest.raises(calopt.ModelFileError, match="not a calopt model"):
        LinearModel.load(foreign)


class _Payload:
    """Unpickled, it creates the file ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickle_renamed_as_a_model_is_rejected_without_running(tmp_path):
    marker = tmp_path / "pickle-executed"
    crafted = tmp_path / "evil.npz"
    crafted.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(calopt.ModelFileError):
        LinearModel.load(crafted)
    assert not marker.exists()
    # an .npz holding a pickled object array is refused as well
    sneaky = tmp_path / "sneaky.npz"
    np.savez(sneaky, metadata=np.array([_Payload(marker)], dtype=object), coef=np.zeros(2))
    with pytest.raises(calopt.ModelFileError):
        LinearModel.load(sneaky)
    assert not marker.exists()


@pytest.mark.parametrize("algorithm", ["stamp", "plugin"])
def test_the_last_history_row_is_the_final_models_values(algorithm):
    """History values use each epoch's tuned threshold, as the final model does."""
    train, test = datasets.load("ijcnn1", "train"), datasets.load("ijcnn1", "test")
    rows = np.random.default_rng(0).permutation(train.n_samples)[:6000]
    X, y = train.X[rows], train.labels[rows]
    model = calopt.fit(X, y, measure="f1", algorithm=algorithm, epochs=3, eval_set=(test.X, test.labels))
    assert model.threshold != 0.0
    if algorithm != "plugin":  # the plug-in's "train" is its training part, without the held-out 20%
        assert model.history[-1]["train"] == pytest.approx(model.score(X, y), abs=1e-12)
    assert model.history[-1]["test"] == pytest.approx(model.score(test.X, test.labels), abs=1e-12)


# -- fit_seconds -------------------------------------------------------------------------------
#: Each fit in a fresh interpreter: the module's clock (its ``time``) notes the modules loaded at
#: its first reading; the script prints those loaded from then to the end of the fit.
_CLOCKED_FIT = """
import sys, time
import numpy as np
import calopt
from calopt.training import aggregate, pipeline, stream

class Clock:
    first = None

    def perf_counter(self):
        if self.first is None:
            self.first = set(sys.modules)
        return time.perf_counter()

rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4))
y = (X[:, 0] + rng.normal(size=300) > 0.8).astype(int)
{setup}
clock = Clock()
{module}.time = clock
model = {fit}
assert clock.first is not None and model.fit_seconds >= 0
print(sorted(set(sys.modules) - clock.first))
"""
CLOCKED = {
    "binary": ("", "pipeline", "calopt.fit(X, y, seed=0)"),
    "multinomial": ("", "pipeline", "calopt.fit(X, rng.integers(0, 3, 300), seed=0)"),
    "one-vs-rest": ("", "pipeline", "calopt.fit(X, rng.integers(0, 3, 300), algorithm='gd', seed=0)"),
    "stream": ("", "stream", "calopt.fit([(X[:150], y[:150]), (X[150:], y[150:])], epochs=2, seed=0)"),
    "aggregate": ("bases = [calopt.fit(X, y, algorithm=name, select='none', epochs=2) for name in ('gd', 'lbfgs')]",
                  "aggregate", "calopt.aggregate(bases, X, y, select='cv:3')"),
}


@pytest.mark.parametrize("case", list(CLOCKED))
def test_fit_seconds_count_no_import(case):
    """No module is first imported while a fit's clock runs (the first fit used to count the one-off
    import of scikit-learn's fold splitter and SciPy's statistics: 8 s against 0.8 s the second time).
    A fresh interpreter, so that nothing was imported before."""
    setup, module, fit = CLOCKED[case]
    script = textwrap.dedent(_CLOCKED_FIT).format(setup=setup, module=module, fit=fit)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("seed", [2**32, -1, 1.5, True, "3"])
def test_a_bad_seed_is_one_parameter_error_naming_it(seed):
    """Issue 23: calopt.fit(seed=2**32) raised NumPy's ValueError from scikit-learn's fold splitter."""
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(calopt.ParameterError, match=r"seed must be a whole number from 0 to 2\*\*32 - 1"):
        calopt.fit(X, y, seed=seed)


def test_the_largest_seed_trains():
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    assert calopt.fit(X, y, seed=2**32 - 1).score(X, y) > 0.8


@pytest.mark.parametrize("weighted", [False, True])
def test_best_cut_with_many_ties_matches_a_plain_loop(weighted):
    """Scores on a coarse grid (runs of equal scores, which the unweighted sort leaves in any
    order): the best cut's value and threshold equal a loop over every distinct threshold
    scored by scikit-learn, ties to the cut with the fewest positive predictions."""
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(7)
    scores = np.round(rng.standard_normal((3_000, 3)), 1)  # about 60 distinct values a column
    y = np.where(rng.random(3_000) < 0.2 + 0.1 * (scores[:, 0] > 0), 1.0, -1.0)
    weight = rng.uniform(0.5, 2.0, 3_000) if weighted else None
    thresholds, values = best_cut(scores, y, calopt.get_measure("f1"), weight)
    for column in range(3):
        s = scores[:, column]
        cuts = np.concatenate([[s.max() + 1.0], (np.unique(s)[::-1][:-1] + np.unique(s)[::-1][1:]) / 2,
                               [s.min() - 1.0]])
        loop = [f1_score(y > 0, s > t, sample_weight=weight, zero_division=0.0) for t in cuts]
        best = int(np.argmax(np.round(loop, 12)))
        assert values[column] == pytest.approx(loop[best], abs=1e-12)
        assert thresholds[column] == pytest.approx(cuts[best], abs=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("measure", ["f1", "gmean"])
def test_best_cut_of_one_score_vector_matches_a_plain_loop(dtype, measure):
    """One unweighted score vector (cut from its sorted values, not a sorting permutation): ties,
    extreme scores and both ends; the value and threshold of a loop over every distinct
    threshold scored by scikit-learn / imbalanced-learn, ties to the fewest positive predictions."""
    from imblearn.metrics import geometric_mean_score
    from sklearn.metrics import f1_score

    score = {"f1": lambda y, p: f1_score(y, p, zero_division=0.0),
             "gmean": lambda y, p: geometric_mean_score(y, p, average="binary")}[measure]
    rng = np.random.default_rng(11)
    for case in range(4):
        n = (50, 400, 3_000, 3_000)[case]
        s = np.round(rng.standard_normal(n), 1 if case % 2 else 3).astype(dtype)
        if case == 3:
            s[rng.random(n) < 0.05] = 50.0
            s[rng.random(n) < 0.05] = -50.0
        y = np.where(rng.random(n) < 0.3 + 0.3 * (s > 0), 1.0, -1.0)
        threshold, value = best_cut(s, y, calopt.get_measure(measure))
        distinct = np.unique(s)[::-1]
        cuts = [distinct[0] + 1.0, *((distinct[:-1] + distinct[1:]) / 2), distinct[-1] - 1.0]
        loop = [score(y > 0, s > t) for t in cuts]
        best = int(np.argmax(np.round(loop, 12)))
        assert float(value) == pytest.approx(loop[best], abs=1e-6)
        assert float(threshold) == pytest.approx(float(cuts[best]), rel=1e-6, abs=1e-6)
        assert np.sum(s > threshold) == np.sum(s > cuts[best])
        assert threshold.dtype == dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("measure", ["f1", "gmean", "jaccard"])
def test_best_cut_of_one_score_column_is_the_column_forms_to_the_bit(dtype, measure):
    """Scores (n, 1) (the selection's last candidate left training) take the vector form: the same
    threshold and value, to the bit, as that column cut beside another in the column form."""
    rng = np.random.default_rng(13)
    for n, decimals in ((40, 1), (2_100, 2), (2_100, 6)):
        s = np.round(rng.standard_normal((n, 2)), decimals).astype(dtype)
        y = np.where(rng.random(n) < 0.3 + 0.3 * (s[:, 0] > 0), 1.0, -1.0)
        one_threshold, one_value = best_cut(s[:, :1], y, calopt.get_measure(measure))
        thresholds, values = best_cut(s, y, calopt.get_measure(measure))
        assert one_threshold.shape == one_value.shape == (1,)
        assert one_threshold.dtype == thresholds.dtype and one_value.dtype == values.dtype
        assert one_threshold[0].tobytes() == thresholds[0].tobytes()
        assert one_value[0].tobytes() == values[0].tobytes()


@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_thresholds_at_the_ends_and_between_adjacent_scores_separate_them(backend, dtype):
    """A threshold "one above the highest score" that rounds back to it (|score| ≥ 2**24 in float32)
    would predict that score positive, and a midpoint of two adjacent numbers that rounds up to the
    higher would predict it negative: each cut and share is checked by counting the scores above
    the threshold it returns (the count the cut's value was computed for)."""
    from calopt.backends import get_backend
    from calopt.training.threshold import threshold_at_share

    chosen = get_backend(backend, dtype=dtype)
    xp, kind = chosen.xp, np.dtype(dtype).type
    huge = np.array([3e30, 1e30, -2e30, -5e30], dtype=kind)
    top = kind(1.0)
    adjacent = np.array([np.nextafter(top, kind(2)), top, kind(0.5), kind(0.25)], dtype=kind)
    y = np.array([-1.0, -1.0, 1.0, 1.0])
    y_adjacent = np.array([1.0, -1.0, -1.0, -1.0])
    for scores, labels, measure, above in ((huge, y, "tnr", 0), (huge, y, "tpr", 4), (huge, y, "f1", 4),
                                           (adjacent, y_adjacent, "f1", 1)):
        S, Y = chosen.asarray(scores), chosen.asarray(labels)
        columns = chosen.asarray(np.stack([scores, scores[::-1]], axis=1))
        for cut in (best_cut(S, Y, calopt.get_measure(measure))[0],
                    best_cut(xp.reshape(S, (-1, 1)), Y, calopt.get_measure(measure))[0][0],
                    best_cut(columns, Y, calopt.get_measure(measure))[0][0]):
            assert int(np.sum(scores > np.asarray(cut))) == above
    for share, above in ((0.0, 0), (1.0, 4), (0.5, 2)):
        for weight in (None, chosen.asarray(np.ones(4))):
            for scores in (huge, adjacent):
                t = threshold_at_share(chosen.asarray(scores), share, weight)
                assert int(np.sum(scores > np.asarray(t))) == above


def test_best_cut_of_one_score_vector_with_nan_scores_cuts_as_the_column_form():
    """NaN scores sort first by value but last by the permutation: the vector form defers to the column form."""
    s = np.array([0.1, np.nan, 0.5, -1.0, np.nan, 0.3])
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    for measure in ("f1", "gmean"):
        threshold, value = best_cut(s, y, calopt.get_measure(measure))
        thresholds, values = best_cut(s[:, None], y, calopt.get_measure(measure))
        assert threshold == thresholds[0] and value == values[0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ties", [False, True])
def test_best_cut_of_a_large_score_vector_is_the_column_form_s(dtype, ties):
    """Above 16 runs of cuts a monotone measure's runs that cannot hold the best cut are skipped:
    the threshold and value are those of the column form (every cut evaluated, from a sorting
    permutation), to the bit, for every built-in measure; and for a measure not declared monotone."""
    import dataclasses
    from typing import ClassVar

    from calopt.training.threshold import CUT_BLOCK
    from calopt_measures.pseudo_linear import FBeta

    @dataclasses.dataclass(frozen=True)
    class Bumpy(FBeta):  # not monotone: every cut evaluated
        name: ClassVar[str] = "bumpy"

        def from_counts(self, tp, fp, tn, fn, *, xp):
            return xp.sin(tp / 97.0) + xp.cos(fp / 89.0)

    rng = np.random.default_rng(5)
    n = 40 * CUT_BLOCK
    s = rng.standard_normal(n)
    # nearly every top score positive, every bottom one negative (the runs of ties at either end
    # are of one class, where counts taken inside a run would leave the measure's domain)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-4 * s)), 1.0, -1.0)
    s = (np.round(s * 8) / 8 if ties else s + 0.3 * rng.standard_normal(n)).astype(dtype)
    specs = ["accuracy", "balanced-accuracy", "f1", "fbeta:beta=3.0", "gmean", "gower-legendre", "hmean", "jaccard",
             "min", "precision", "qmean", "tnr", "tpr"]
    # and one class nearly alone, on runs of ties (counts taken inside a run leave the domain)
    few = (np.round(rng.standard_normal(n) * 2) / 2).astype(dtype), np.where(rng.random(n) < 0.998, 1.0, -1.0)
    for measure in [calopt.get_measure(spec) for spec in specs] + [Bumpy()]:
        for scores, labels in ((s, y), few):
            threshold, value = best_cut(scores, labels, measure)
            thresholds, values = best_cut(scores[:, None], labels, measure)
            assert threshold == thresholds[0] and value == values[0], measure.spec

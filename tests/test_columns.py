"""Training on the columns present in the training rows (issue 25: memory grows with the non-zeros).

References: scipy's own column slicing for the compaction, the full-width run (the map switched
off) for the models, a subprocess under an address-space limit for the memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import calopt
from calopt.errors import ModelFileError
from calopt.models.archive import PACKED_MIN_BYTES, save_archive
from calopt.models.linear import LinearModel, MulticlassModel, load_model
from calopt.training import columns
from calopt.training.columns import PresentColumns


def _padded(dense: np.ndarray, width: int, seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray]:
    """``dense`` spread over ``width`` columns at random places (the others empty), and those places."""
    where = np.sort(np.random.default_rng(seed).choice(width, dense.shape[1], replace=False))
    X = sp.lil_matrix((dense.shape[0], width))
    X[:, where] = dense
    return X.tocsr(), where


def _problem(n: int = 300, k: int = 12, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, k)) * (rng.random((n, k)) < 0.4)
    return dense, (dense @ rng.normal(size=k) + rng.logistic(size=n) > 0.8).astype(int)


def _full_width(monkeypatch, fit):
    """``fit()`` with the map switched off (every model at the data's own width)."""
    with monkeypatch.context() as patch:
        patch.setattr(columns, "ABSENT_SHARE", 2.0)
        return fit()


def test_compact_is_scipys_column_slice_and_drops_other_columns():
    rng = np.random.default_rng(3)
    X = sp.hstack([sp.random(40, 20, density=0.1, random_state=4), sp.csr_matrix((40, 30))], format="csr")
    X = X[:, rng.permutation(50)]  # at most 20 present columns of 50, spread out
    present = np.unique(X.indices)
    columns_of = PresentColumns.of(X)
    assert columns_of is not None and columns_of.width == 50
    np.testing.assert_array_equal(columns_of.present, present)
    compact = columns_of.compact(X)
    reference = X[:, present]
    assert compact.shape == reference.shape and (compact != reference).nnz == 0
    # entries in absent columns too, and empty rows
    other = sp.vstack([sp.random(20, 50, density=0.3, random_state=5), sp.csr_matrix((5, 50))], format="csr")
    other = other[rng.permutation(25)]
    compact_other = columns_of.compact(other, "eval_set X")
    assert (compact_other != other[:, present]).nnz == 0
    assert compact_other.has_sorted_indices
    with pytest.raises(calopt.ParameterError, match="eval_set X has 49 features; the training data have 50"):
        columns_of.compact(other[:, :49], "eval_set X")


def test_the_map_applies_to_sparse_data_with_half_the_columns_absent_only():
    dense, _ = _problem()
    assert PresentColumns.of(dense) is None  # dense data: trained as they are
    assert PresentColumns.of(_padded(dense, 2 * dense.shape[1])[0]) is not None  # half absent
    assert PresentColumns.of(_padded(dense, 2 * dense.shape[1] - 1)[0]) is None  # fewer than half


@pytest.mark.parametrize("options", [
    {},  # the default: lbfgs under the settings selection (18 stacked models)
    {"algorithm": "spade", "measure": "gmean", "select": "none", "epochs": 4},
    {"algorithm": "stamp", "select": "cv:3", "max_epochs": 4, "patience": 2},
    {"algorithm": "gd", "select": "none", "epochs": 4},
    {"algorithm": "constrained", "constraints": "fpr<=0.2", "select": "none", "epochs": 4},
])
def test_a_model_on_the_present_columns_is_the_full_width_model(monkeypatch, options):
    """The same model to rounding (the sums over the features group differently), weight 0 and
    scale 1 in the empty columns; an evaluation set's history too."""
    dense, y = _problem()
    X, where = _padded(dense, 5 * dense.shape[1])
    eval_set = (X[:100], y[:100])
    # float64 given: left to calopt, the full width's sparse rows would train in float32
    # (pipeline.text_backend counts their columns), the present columns' in float64
    options = {"max_epochs": 6, "patience": 2, "dtype": "float64", **options}
    compact = calopt.fit(X, y, eval_set=eval_set, **options)
    full = _full_width(monkeypatch, lambda: calopt.fit(X, y, eval_set=eval_set, **options))
    assert compact.coef.shape == full.coef.shape == (X.shape[1],)
    np.testing.assert_allclose(compact.coef, full.coef, rtol=1e-10, atol=1e-12 * np.max(np.abs(full.coef)))
    assert abs(compact.intercept - full.intercept) <= 1e-10 * max(1.0, abs(full.intercept))
    absent = np.setdiff1d(np.arange(X.shape[1]), where)
    assert np.all(compact.coef[absent] == 0) and np.all(compact.scale[absent] == 1)
    np.testing.assert_array_equal(compact.scale, full.scale)
    assert [row["test"] for row in compact.history] == pytest.approx([row["test"] for row in full.history])
    np.testing.assert_array_equal(compact.predict(X), full.predict(X))


def test_one_vs_rest_and_multinomial_on_the_present_columns(monkeypatch):
    from sklearn.datasets import load_digits

    digits, y = load_digits(return_X_y=True)
    X, where = _padded(digits[:500], 3 * 64)
    for options in ({"algorithm": "multinomial"}, {"algorithm": "lbfgs", "select": "holdout:0.25"}):
        compact = calopt.fit_multiclass(X, y[:500], max_epochs=5, patience=2, **options)
        full = _full_width(monkeypatch, lambda: calopt.fit_multiclass(X, y[:500], max_epochs=5, patience=2,
                                                                      **options))
        assert compact.coef.shape == (3 * 64, 10)
        np.testing.assert_allclose(compact.coef, full.coef, rtol=1e-10, atol=1e-12 * np.max(np.abs(full.coef)))
        assert np.all(compact.coef[np.setdiff1d(np.arange(3 * 64), where)] == 0)


def test_an_algorithm_that_counts_the_columns_trains_at_the_full_width(monkeypatch):
    """Mirror descent's predictors are the columns (2d + 2): empty ones change its model, so it is
    not mapped, and its model is the full width's to the bit."""
    dense, y = _problem()
    X, _ = _padded(dense, 4 * dense.shape[1])
    options = {"algorithm": "mirror-descent", "select": "none", "epochs": 3}
    compact, full = calopt.fit(X, y, **options), _full_width(monkeypatch, lambda: calopt.fit(X, y, **options))
    np.testing.assert_array_equal(compact.coef, full.coef)
    mapped = calopt.fit(PresentColumns.of(X).compact(X), y, **options)  # what a mapped run would train
    assert not np.allclose(mapped.coef, full.coef[PresentColumns.of(X).present])


# -- the model file ---------------------------------------------------------------------------
def _wide_model(width: int, rows: np.ndarray, classes: int = 0) -> LinearModel | MulticlassModel:
    rng = np.random.default_rng(7)
    shape = (width,) if not classes else (width, classes)
    coef, scale = np.zeros(shape), np.ones(width)
    coef[rows] = rng.normal(size=(rows.size, *shape[1:]))
    scale[rows] = rng.uniform(0.5, 3.0, size=rows.size)
    if not classes:
        return LinearModel(coef, 0.25, (0, 1), "f1", "lbfgs", "logistic", scale=scale, threshold=0.1)
    return MulticlassModel(coef, rng.normal(size=classes), tuple(range(classes)), "f1", "multinomial",
                           "logistic", scale=scale)


@pytest.mark.parametrize("classes", [0, 3])
def test_a_wide_model_with_few_weights_is_a_small_file_that_loads_equal(tmp_path, classes):
    rows = np.sort(np.random.default_rng(8).choice(10**6, 1000, replace=False))
    model = _wide_model(10**6, rows, classes)
    model.save(tmp_path / "wide.npz")
    assert (tmp_path / "wide.npz").stat().st_size < 64_000  # dense: 16 MB and more
    loaded = load_model(tmp_path / "wide.npz")
    np.testing.assert_array_equal(loaded.coef, model.coef)
    np.testing.assert_array_equal(loaded.scale, model.scale)
    np.testing.assert_array_equal(loaded.intercept, model.intercept)
    with np.load(tmp_path / "wide.npz") as archive:
        assert json.loads(archive["metadata"].tobytes())["format_version"] == 2


def test_dense_and_small_models_keep_the_first_format(tmp_path):
    """Models with many weights, or too small to gain, are written as before (version 1, whole arrays)."""
    width = PACKED_MIN_BYTES // 8
    for model in (_wide_model(width, np.arange(0, width, 3)), _wide_model(1000, np.arange(10))):
        model.save(tmp_path / "m.npz")
        with np.load(tmp_path / "m.npz") as archive:
            assert set(archive.files) == {"metadata", "coef", "scale"}
            assert json.loads(archive["metadata"].tobytes())["format_version"] == 1
        np.testing.assert_array_equal(load_model(tmp_path / "m.npz").coef, model.coef)


@pytest.mark.parametrize("change, message", [
    (lambda a: a.update({"coef.rows": a["coef.rows"][::-1].copy()}), "coef is packed inconsistently"),
    (lambda a: a.update({"coef.rows": a["coef.rows"] + 10**6}), "coef is packed inconsistently"),
    (lambda a: a.update({"coef.values": a["coef.values"][:-1]}), "coef is packed inconsistently"),
    (lambda a: a.pop("coef.shape"), "coef is packed but has no shape array"),
    (lambda a: a.update({"coef.shape": np.array([10**15]), "scale.shape": np.array([10**15])}),
     "larger than this machine's memory"),
    (lambda a: a.update({"coef.shape": np.array([-1])}), "coef.shape must be"),
])
def test_a_forged_packed_model_is_one_clear_error(tmp_path, change, message):
    model = _wide_model(10**6, np.arange(0, 10**6, 1000))
    arrays, metadata = model._arrays(), {**model._metadata(), "format_version": 2}
    change(arrays)
    save_archive(tmp_path / "forged.npz", arrays, metadata)  # a checksum that matches
    with pytest.raises(ModelFileError, match=message) as caught:
        load_model(tmp_path / "forged.npz")
    assert "\n" not in str(caught.value)


# -- the memory -------------------------------------------------------------------------------
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_a_file_with_a_feature_index_at_ten_million_trains_in_bounded_memory(tmp_path):
    """``calopt train`` on 400 rows, one of them with index 10⁷, under a 1.5 GiB address-space limit,
    with a peak RSS under 1 GiB: at the full width the default's L-BFGS histories alone are
    13 GiB (MemoryError, exit 1)."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(400):
        label = int(rng.random() < 0.3)
        features = {int(j): round(float(rng.normal() + label), 3) for j in rng.choice(np.arange(1, 50), 5, False)}
        if i == 7:
            features[10**7] = 1.0
        lines.append(f"{label} " + " ".join(f"{j}:{v}" for j, v in sorted(features.items())))
    (tmp_path / "wide.svm").write_text("\n".join(lines) + "\n")
    limit = 3 * 2**29
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
        from calopt_cli.app import main
        sys.argv = ["calopt", "train", "wide.svm", "--no-progress", "--json", "-o", "wide.npz"]
        try:
            main()
        finally:  # the peak resident memory (kB), the issue's figure: this image's VmHWM (ru_maxrss
            # would count the forked parent's pages: a long pytest run's 1.2 GB, not this process's)
            peak = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
            open("peak_rss_kb", "w").write(peak[0] if peak else str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    """)
    threads = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, **threads}, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    trained = json.loads(result.stdout)
    assert int((tmp_path / "peak_rss_kb").read_text()) < 2**20  # under 1 GiB (about 300 MB here)
    assert (tmp_path / "wide.npz").stat().st_size < 64_000
    model = load_model(tmp_path / "wide.npz")
    assert model.coef.shape == (10**7,) and model.coef[10**7 - 1] != 0  # 1-based index 10⁷: the last column
    assert np.count_nonzero(model.coef) <= 50
    from calopt.io.files import read_libsvm

    data = read_libsvm(tmp_path / "wide.svm")
    assert model.summary(data.X, data.labels)["value"] == pytest.approx(trained["train"]["value"], abs=0)

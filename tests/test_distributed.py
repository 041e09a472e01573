"""Training on a Dask cluster (calopt.training.distributed): in-process LocalClusters, small data."""

from __future__ import annotations

import logging

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import calopt  # noqa: E402
from calopt.errors import ParameterError, TrainingError, TrainingInterrupted  # noqa: E402


def _cluster(workers: int):
    return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=False,
                                    dashboard_address=":0", silence_logs=logging.CRITICAL)


@pytest.fixture(scope="module")
def two():
    with _cluster(2) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def one():
    with _cluster(1) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def a9a():
    data = calopt.datasets.load("a9a", "train")
    rows = np.random.default_rng(0).permutation(data.X.shape[0])[:1200]
    return data.X[rows], data.labels[rows]


def _same(first, second):
    return (np.array_equal(first.coef, second.coef) and first.intercept == second.intercept
            and first.threshold == second.threshold)


@pytest.mark.parametrize("algorithm", ["gd", "lbfgs"])
def test_exact_rounds_equal_single_process(two, a9a, algorithm):
    """gd, and lbfgs (the plug-in route's solver: a round evaluates f and ∇f at the trial point,
    the client takes the step or halves it), on two workers: the single-process model."""
    X, y = a9a
    single = calopt.fit(X, y, algorithm=algorithm, measure="f1", select="none", epochs=15)
    cluster = calopt.fit(X, y, algorithm=algorithm, measure="f1", epochs=15, cluster=two)
    assert cluster.fit_report.cluster.mode == "exact" and cluster.fit_report.cluster.workers == 2
    np.testing.assert_allclose(cluster.coef, single.coef, rtol=0, atol=1e-9)
    assert abs(cluster.intercept - single.intercept) < 1e-9
    assert abs(cluster.history[-1]["objective"] - single.history[-1]["objective"]) < 1e-12
    assert cluster.fit_report.cluster.train["value"] == pytest.approx(single.history[-1]["train"], abs=1e-12)


@pytest.mark.parametrize("algorithm, measure", [("spade", "gmean"), ("sgd", "f1"), ("stamp", "f1")])
def test_local_one_worker_is_the_single_process_run(one, a9a, algorithm, measure):
    X, y = a9a
    single = calopt.fit(X, y, algorithm=algorithm, measure=measure, select="none", epochs=3)
    cluster = calopt.fit(X, y, algorithm=algorithm, measure=measure, epochs=3, cluster=one)
    assert cluster.fit_report.cluster.mode == "local"
    assert cluster.algorithm == single.algorithm  # the step trial on the one shard: the same step
    assert _same(cluster, single)
    for key in single.history[-1]:
        if key != "seconds":
            assert cluster.history[-1][key] == single.history[-1][key]


def test_local_two_workers_close_to_single_process(two):
    train, test = calopt.datasets.load("a9a", "train"), calopt.datasets.load("a9a", "test")
    single = calopt.fit(train.X, train.labels, measure="gmean", algorithm="spade", select="none")
    cluster = calopt.fit(train.X, train.labels, measure="gmean", algorithm="spade", cluster=two)
    gap = cluster.score(test.X, test.labels) - single.score(test.X, test.labels)
    assert abs(gap) < 0.005


def test_files_are_read_by_the_workers(two, a9a, tmp_path):
    from sklearn.datasets import dump_svmlight_file

    X, y = a9a
    path = tmp_path / "part.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    arrays = calopt.fit(X, y, algorithm="spade", measure="gmean", epochs=2, cluster=two)
    from_file = calopt.fit(str(path), cluster=two, algorithm="spade", measure="gmean", epochs=2,
                               read_options={"n_features": X.shape[1]})
    np.testing.assert_allclose(from_file.coef, arrays.coef, rtol=1e-12, atol=1e-12)
    assert from_file.fit_report.data.format == "libsvm"
    # a list of files: worker i reads files i::2
    halves = [tmp_path / "a.svm", tmp_path / "b.svm"]
    dump_svmlight_file(X[0::2], y[0::2], str(halves[0]), zero_based=False)
    dump_svmlight_file(X[1::2], y[1::2], str(halves[1]), zero_based=False)
    listed = calopt.fit([str(p) for p in halves], cluster=two, algorithm="spade", measure="gmean", epochs=2,
                            read_options={"n_features": X.shape[1]})
    assert np.isfinite(listed.coef).all() and listed.fit_report.cluster.workers == 2


@pytest.mark.parametrize("source", ["arrays", "file"])
@pytest.mark.parametrize("when", ["between rounds", "racing the next round"])
def test_a_lost_worker_is_survived_with_the_same_model(a9a, tmp_path, source, when):
    """Scattered rows are scattered again, a file's rows read again (Dask recomputes them itself
    or calopt rebuilds them), and the round is redone from the same state: the same model."""
    import threading

    from sklearn.datasets import dump_svmlight_file

    X, y = a9a
    data = dict(X=X, y=y)
    if source == "file":
        path = tmp_path / "train.svm"
        dump_svmlight_file(X, y, str(path), zero_based=False)
        data = dict(X=str(path), read_options={"n_features": X.shape[1]})
    with _cluster(2) as cluster, distributed.Client(cluster) as client:
        undisturbed = calopt.fit(algorithm="spade", measure="gmean", epochs=4, cluster=client, **data)

    def lose_a_worker(record):
        if record.epoch == 2:
            worker = cluster.workers[max(cluster.workers)]
            if when == "between rounds":
                client.sync(worker.close)
            else:
                threading.Timer(0.002, client.sync, (worker.close,)).start()

    with _cluster(2) as cluster, distributed.Client(cluster) as client:
        survived = calopt.fit(algorithm="spade", measure="gmean", epochs=4, cluster=client,
                                  callback=lose_a_worker, **data)
        distributed.wait(client.submit(int, 1))
        assert len(client.scheduler_info()["workers"]) == 1
    assert _same(survived, undisturbed)


def test_losing_every_worker_is_a_one_line_error(a9a):
    X, y = a9a
    with _cluster(1) as cluster, distributed.Client(cluster) as client:
        def lose_all(record):
            for worker in list(cluster.workers.values()):
                client.sync(worker.close)

        with pytest.raises(TrainingError, match="lost") as caught:
            calopt.fit(X, y, algorithm="sgd", measure="f1", epochs=3, cluster=client, callback=lose_all)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("algorithm, measure", [("spade", "gmean"), ("gd", "f1"), ("lbfgs", "f1")])
def test_checkpoint_at_a_round_resumes_to_the_same_model(two, a9a, tmp_path, algorithm, measure):
    X, y = a9a
    whole = calopt.fit(X, y, algorithm=algorithm, measure=measure, epochs=4, cluster=two)
    rounds = iter(range(100))
    path = tmp_path / "run.ckpt.npz"
    with pytest.raises(TrainingInterrupted, match="end of epoch 2"):
        calopt.fit(X, y, algorithm=algorithm, measure=measure, epochs=4, cluster=two, checkpoint=path,
                   interrupt=lambda: next(rounds) == 1)
    resumed = calopt.fit(X, y, algorithm=algorithm, measure=measure, epochs=4, cluster=two, resume=path)
    assert _same(resumed, whole)
    assert [row["epoch"] for row in resumed.history] == [1, 2, 3, 4]
    with pytest.raises(ParameterError, match="epochs"):
        calopt.fit(X, y, algorithm=algorithm, measure=measure, epochs=5, cluster=two, resume=path)


@pytest.mark.parametrize("options, message", [
    ({"algorithm": "amp"}, "does not run on a Dask cluster"),
    ({"select": "cv:3"}, "does not cross-fit"),
    ({"algorithm": "auto"}, "name the algorithm"),
    ({"sample_weight": np.ones(1200)}, "sample_weight"),
    ({"backend": "array-api-strict"}, "backend"),
    ({"algorithm": "gd", "local_steps": 2}, "local rounds"),
])
def test_what_a_cluster_run_refuses(two, a9a, options, message):
    X, y = a9a
    with pytest.raises(ParameterError, match=message):
        calopt.fit(X, y, cluster=two, **options)


def test_local_steps_rounds(two, a9a):
    X, y = a9a
    model = calopt.fit(X, y, algorithm="sgd", measure="f1", epochs=3, batch_size=100, cluster=two)
    stepped = calopt.fit(X, y, algorithm="sgd", measure="f1", epochs=6, batch_size=100, local_steps=3,
                         cluster=two)
    assert stepped.fit_report.cluster.local_steps == 3
    # 600 rows a worker, 6 batches a pass: 6 rounds of 3 steps are 3 passes
    assert abs(stepped.score(X, y) - model.score(X, y)) < 0.05


def test_cli_dask_errors_are_one_line(tmp_path):
    from typer.testing import CliRunner

    from calopt_cli.app import app

    runner = CliRunner()
    data = tmp_path / "d.svm"
    data.write_text("1 1:0.5\n-1 2:0.5\n1 1:1\n-1 2:1\n")
    for arguments in (["--dask", "tcp://127.0.0.1:9"], ["--dask", "local", "--algorithm", "amp"],
                      ["--dask", "local", "--backend", "array-api-strict"]):
        result = runner.invoke(app, ["train", str(data), *arguments])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("calopt: error: "), result.stderr


def test_cli_dask_trains_on_the_workers(two, a9a, tmp_path):
    import json

    from sklearn.datasets import dump_svmlight_file
    from typer.testing import CliRunner

    from calopt_cli.app import app

    X, y = a9a
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    result = CliRunner().invoke(app, ["train", str(path), "--test", str(path), "--measure", "gmean", "--epochs", "2",
                                      "--dask", two.scheduler.address, "--json", "-o", str(tmp_path / "m.npz")])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["train"]["value"] == pytest.approx(report["test"]["value"], abs=1e-9)
    assert calopt.load_model(tmp_path / "m.npz").fit_report.cluster.workers == 2
    table = CliRunner().invoke(app, ["train", str(path), "--measure", "gmean", "--epochs", "2", "--no-progress",
                                     "--dask", two.scheduler.address], terminal_width=200)
    assert table.exit_code == 0, table.output
    assert "2 rounds on 2 Dask workers (local)" in table.stdout

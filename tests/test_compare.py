"""calopt compare and the figures: each method's numbers against scikit-learn run here by hand, the
files (PNG, SVG) as images of the expected size and panels, and the one-line errors."""

from __future__ import annotations

import dataclasses

import itertools
import json
import struct
import sys
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.metrics import f1_score, make_scorer, recall_score
from sklearn.model_selection import TunedThresholdClassifierCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler
from typer.testing import CliRunner

import calopt
from calopt.reporting import plotting
from calopt.reporting.comparison import compare
from calopt_cli.app import app

pytest.importorskip("matplotlib")
runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _split(seed: int = 0, n: int = 1500):
    X, y = make_classification(n_samples=n, n_features=10, n_informative=6, weights=[0.8], random_state=seed)
    return X[: n * 2 // 3], y[: n * 2 // 3], X[n * 2 // 3:], y[n * 2 // 3:]


@pytest.fixture(scope="module")
def comparison():
    X, y, X_test, y_test = _split()
    return compare(X, y, X_test, y_test, measure="f1", epochs=4, seed=0)


def test_each_method_is_scored_as_scikit_learn_scores_it_by_hand(comparison):
    X, y, X_test, y_test = _split()
    runs = {run.method.split(":")[0]: run for run in comparison.runs}
    assert list(runs) == ["calopt stamp", "calopt lbfgs", "sklearn SGD, log loss", "sklearn tuned-threshold LR"]

    def check(run, predicted):
        assert run.value == pytest.approx(f1_score(y_test, predicted))
        assert run.tpr == pytest.approx(recall_score(y_test, predicted, pos_label=1))
        assert run.tnr == pytest.approx(recall_score(y_test, predicted, pos_label=0))

    for algorithm in ("stamp", "lbfgs"):
        model = calopt.fit(X, y, measure="f1", algorithm=algorithm, epochs=4, seed=0)
        check(runs[f"calopt {algorithm}"], model.predict(X_test))
        assert runs[f"calopt {algorithm}"].passes == 4
    scaler = MaxAbsScaler().fit(X)
    sgd = SGDClassifier(loss="log_loss", random_state=0)
    for _ in range(4):
        sgd.partial_fit(scaler.transform(X), y, classes=[0, 1])
    check(runs["sklearn SGD, log loss"], sgd.predict(scaler.transform(X_test)))
    route = TunedThresholdClassifierCV(make_pipeline(MaxAbsScaler(), LogisticRegression(max_iter=1000)),
                                       scoring=make_scorer(f1_score), cv=5, random_state=0).fit(X, y)
    check(runs["sklearn tuned-threshold LR"], route.predict(X_test))
    # its passes: the L-BFGS iterations of the 5 cross-validation fits and the refit, at least the refit's
    assert runs["sklearn tuned-threshold LR"].passes >= route.estimator_[-1].n_iter_[0] + 5


def test_curves_hold_one_point_per_pass(comparison):
    for run in comparison.runs:
        single = run.method.startswith("sklearn tuned")
        assert len(run.curve) == (1 if single else 4)
        assert [row["passes"] for row in run.curve] == ([run.passes] if single else [1.0, 2.0, 3.0, 4.0])
        seconds = [row["seconds"] for row in run.curve]
        assert seconds == sorted(seconds) and seconds[-1] <= run.seconds + 1e-9
        assert run.curve[-1]["value"] == pytest.approx(run.value)
    assert comparison.test_positive_rate == pytest.approx(np.mean(_split()[3] == 1))


def test_algorithms_and_positive_label():
    X, y, X_test, y_test = _split(seed=1)
    words, words_test = np.where(y == 1, "rare", "common"), np.where(y_test == 1, "rare", "common")
    result = compare(X, words, X_test, words_test, measure="gmean", algorithms=["spade", "sgd"], epochs=2,
                     positive="rare")
    assert [run.method.split(":")[0] for run in result.runs][:2] == ["calopt spade", "calopt sgd"]
    assert result.positive == "rare"
    assert result.runs[0].description.endswith("the measure's own solver")


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _texts_do_not_overlap(fig) -> None:
    """Titles, axis labels, tick labels and legend entries: no two boxes intersect."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    texts = list(fig.texts)  # the suptitle
    texts += [t for legend in fig.legends for t in legend.get_texts()]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
        for axis in (ax.xaxis, ax.yaxis):  # the tick labels drawn: those of ticks inside the view
            low, high = sorted(axis.get_view_interval())
            texts += [label for tick, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels())
                      if low <= tick <= high and label.get_text()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text()]
    assert any(text.startswith("calopt ") for text, _ in boxes)
    for (first, a), (second, b) in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), f"{first!r} overlaps {second!r}"
    width, height = fig.bbox.width, fig.bbox.height
    for text, box in boxes:
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, f"{text!r} is cut off"


def test_comparison_figure_has_the_three_panels(comparison):
    # fit times fixed a decade apart a method, so that the time axis's log scale does not hang on the
    # machine's speed (measured times spanned 20x or not depending on the load)
    fixed = dataclasses.replace(comparison, runs=[
        dataclasses.replace(run, curve=[{**row, "seconds": 0.001 * 10 ** i * (j + 1)} for j, row in enumerate(run.curve)])
        for i, run in enumerate(comparison.runs)])
    fig = plotting.comparison_figure(fixed, data="train.npz", test="test.npz")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["test f1 by passes", "test f1 by fit time",
                      f"Operating points\nlevel curves of f1 at {comparison.test_positive_rate:.1%} positives"]
    assert [ax.get_xlabel() for ax in fig.axes] == [
        "passes over the training data (log scale)", "fit time (seconds, log scale)", "TPR (true positive rate)"]
    assert fig.axes[2].get_ylabel() == "TNR (true negative rate)"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [run.description for run in comparison.runs]
    assert len(fig.axes[0].get_lines()) == 4 and len(fig.axes[2].get_lines()) == 4  # a line, a point each
    _texts_do_not_overlap(fig)


def test_history_figure_of_a_binary_and_a_multiclass_model():
    X, y, X_test, y_test = _split()
    model = calopt.fit(X, y, measure="gmean", epochs=3, eval_set=(X_test, y_test))
    fig = plotting.history_figure(model, [("train", X, y), ("test", X_test, y_test)])
    assert [ax.get_title() for ax in fig.axes] == ["gmean by passes", "gmean by fit time",
                                                   "Operating points\nlevel curves of gmean"]
    points = [line.get_xydata()[0] for line in fig.axes[2].get_lines()]
    summary = model.summary(X_test, y_test)
    np.testing.assert_allclose(points[1], [summary["tpr"], summary["tnr"]])
    _texts_do_not_overlap(fig)
    labels = np.arange(600) % 3
    multiclass = calopt.fit(np.random.default_rng(0).normal(size=(600, 4)) + labels[:, None], labels, epochs=2)
    fig = plotting.history_figure(multiclass, [("train", None, labels)])
    assert [ax.get_title() for ax in fig.axes] == ["top-1 accuracy by passes", "top-1 accuracy by fit time"]


@pytest.fixture
def files(tmp_path):
    X, y, X_test, y_test = _split()
    np.savez(tmp_path / "train.npz", X=X, y=y)
    np.savez(tmp_path / "test.npz", X=X_test, y=y_test)
    return tmp_path


def test_cli_compare_writes_a_png_and_json(files):
    out = files / "out.png"
    result = runner.invoke(app, ["compare", str(files / "train.npz"), "--test", str(files / "test.npz"),
                                 "-m", "gmean", "-e", "3", "--plot", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["measure"] == "gmean" and report["plot"] == str(out)
    assert [m["method"].split(":")[0] for m in report["methods"]] == [
        "calopt spade", "calopt lbfgs", "sklearn SGD, log loss", "sklearn tuned-threshold LR"]
    assert set(report["methods"][0]) >= {"value", "tpr", "tnr", "seconds", "passes", "curve"}
    assert _png_size(out) == (round(3 * plotting.PANEL_WIDTH * plotting.DPI), round(plotting.HEIGHT * plotting.DPI))
    assert not list(files.glob(".out.png.*"))  # written atomically: no temporary file left


def test_cli_compare_table_and_svg(files):
    out = files / "out.svg"
    result = runner.invoke(app, ["compare", str(files / "train.npz"), "-m", "f1", "-a", "sgd", "-e", "2",
                                 "--plot", str(out)])
    assert result.exit_code == 0, result.output
    for header in ("test f1", "TPR", "TNR", "fit s", "passes", "calopt sgd", "sklearn tuned-threshold LR"):
        assert header in result.output
    assert "[test part]" in " ".join(result.output.split())  # no --test: a part of DATA held out
    root = ElementTree.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_cli_compare_on_a9a_writes_the_figure(tmp_path):
    out = tmp_path / "a9a.png"
    result = runner.invoke(app, ["compare", "a9a", "-m", "f1", "-e", "2", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert "a9a:test" in result.output and "figure written to" in result.output
    assert _png_size(out) == (1848, 616)


def test_cli_train_plot(files):
    out = files / "run.png"
    result = runner.invoke(app, ["train", str(files / "train.npz"), "--test", str(files / "test.npz"), "-e", "2",
                                 "--plot", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert _png_size(out) == (1848, 616)
    assert "figure written to" in result.output


@pytest.mark.parametrize("command", ["compare", "train"])
def test_plot_needs_a_png_or_svg_name(files, command):
    result = runner.invoke(app, [command, str(files / "train.npz"), "--plot", str(files / "out.pdf")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"calopt: error: --plot {files / 'out.pdf'}: the figure's file name must end in .png or .svg "
        f"(it picks the format)"]


@pytest.mark.parametrize("command", ["compare", "train"])
def test_plot_without_matplotlib_is_one_line_naming_the_extra(files, command, monkeypatch):
    for name in [name for name in sys.modules if name == "matplotlib" or name.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.setattr(calopt, "fit", lambda *args, **kwargs: pytest.fail("trained before refusing"))
    result = runner.invoke(app, [command, str(files / "train.npz"), "--plot", str(files / "out.png")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "calopt: error: drawing a figure needs matplotlib: pip install 'calopt[plot]'"]
    assert not (files / "out.png").exists()


def test_compare_on_three_classes_scores_the_k_class_measure_and_refuses_what_is_binary(files):
    """Three classes (issue 26): each method's test value is the K-class measure of its predictions;
    --plot (two-class operating points) and --positive are one line, exit 2, nothing written."""
    X = np.random.default_rng(0).normal(size=(90, 3))
    np.savez(files / "three.npz", X=X, y=np.arange(90) % 3)
    result = runner.invoke(app, ["compare", str(files / "three.npz"), "-m", "balanced-accuracy", "--json"])
    assert result.exit_code == 0, result.output
    methods = json.loads(result.stdout)["methods"]
    assert [m["method"] for m in methods][-1] == "sklearn LR, argmax"
    assert all(0.0 <= m["value"] <= 1.0 and m["tpr"] is None for m in methods)
    plot = files / "three.png"
    result = runner.invoke(app, ["compare", str(files / "three.npz"), "--plot", str(plot)])
    assert result.exit_code == 2 and not plot.exists()
    assert result.stderr.strip().splitlines() == [
        "calopt: error: --plot draws two-class operating points (TPR, TNR); the training labels have 3 classes"]
    result = runner.invoke(app, ["compare", str(files / "three.npz"), "--positive", "1"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


def test_compare_on_three_classes_reports_per_class_constraints_for_every_method(files, monkeypatch):
    """K classes with per-class constraints: calopt's rule trains subject to them (its model is
    calopt.fit's with the same constraints) and every method reports each constraint's test value,
    its class against the rest, equal to scikit-learn's recall and precision of its predictions;
    a constraint without a class, or naming no training class, is one line, exit 2, before any
    training."""
    from sklearn.metrics import precision_score

    X, y = make_classification(1500, 8, n_informative=5, n_classes=3, weights=[0.7, 0.2, 0.1], random_state=0)
    y = np.array(["a", "b", "c"])[y]
    specs = ["recall[c]>=0.8", "precision[b]>=0.5"]
    result = compare(X[:1000], y[:1000], X[1000:], y[1000:], measure="gmean", constraints=specs)
    model = calopt.fit(X[:1000], y[:1000], measure="gmean", constraints=specs)
    route = make_pipeline(MaxAbsScaler(), LogisticRegression(max_iter=1000)).fit(X[:1000], y[:1000])
    argmax = np.asarray(model.classes)[np.argmax(model.decision_function(X[1000:]), axis=1)]
    predictions = {"calopt multinomial": model.predict(X[1000:]), "calopt multinomial, argmax": argmax,
                   "sklearn LR, argmax": route.predict(X[1000:])}
    assert [run.method for run in result.runs] == list(predictions)
    truth = y[1000:]
    for run in result.runs:
        said = predictions[run.method]
        recall = recall_score(truth == "c", said == "c")
        precision = precision_score(truth == "b", said == "b")
        assert [entry["constraint"] for entry in run.constraints] == specs
        assert run.constraints[0]["test"] == pytest.approx(recall, abs=1e-12)
        assert run.constraints[1]["test"] == pytest.approx(precision, abs=1e-12)
        assert run.constraints[0]["satisfied"] == (recall >= 0.8)
    assert result.runs[0].constraints[0]["within_error"]  # the rule meets the recall bound on new rows
    assert not result.runs[2].constraints[0]["within_error"]  # the argmax does not come near it
    np.savez(files / "three.npz", X=X, y=y)
    monkeypatch.setattr("calopt.reporting.comparison.fit", lambda *a, **k: pytest.fail("trained before refusing"))
    for spec, message in [("recall>=0.8", "constraint 'recall>=0.8': with 3 classes name the class, e.g. "
                                          "'recall[c]>=0.8' (a class's recall or precision)"),
                          ("recall[q]>=0.8", "constraint 'recall[q]>=0.8': no class 'q' in the training labels "
                                             "(a, b, c)")]:
        result = runner.invoke(app, ["compare", str(files / "three.npz"), "-m", "gmean", "--constraint", spec])
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [f"calopt: error: {message}"]


def test_scikit_learn_warnings_are_one_line_each(files, monkeypatch):
    """A warning of scikit-learn's (L-BFGS stopping at max_iter) is a result: one line, each once."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    fit = LogisticRegression.fit

    def warning_fit(self, *args, **kwargs):
        warnings.warn("lbfgs failed to converge after 1000 iteration(s)\nIncrease max_iter.", ConvergenceWarning)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(LogisticRegression, "fit", warning_fit)
    result = runner.invoke(app, ["compare", str(files / "train.npz"), "-e", "1", "-a", "sgd"])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines() == [
        "calopt: warning: sklearn tuned-threshold LR: ConvergenceWarning: lbfgs failed to converge after 1000 "
        "iteration(s)"]

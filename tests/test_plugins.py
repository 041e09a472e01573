"""Plugins: registration, duplicates, broken plugins, CALOPT_LOAD_PLUGINS, and a real
third-party package (plugins/calopt-example) installed from wheels into a fresh venv."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pluggy
import pytest
from sklearn.metrics import balanced_accuracy_score
from typer.testing import CliRunner

import calopt
from calopt import registry
from calopt.registry import PluginLoadWarning, plugin_manager
from calopt_cli.app import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "plugins" / "calopt-example"
runner = CliRunner()


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess, without calopt's switches or a PYTHONPATH."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("CALOPT_") and k != "PYTHONPATH"
    }
    env.update(extra)
    return env


@contextlib.contextmanager
def registered(plugin: Any, name: str):
    """Register ``plugin`` on calopt's plugin manager for the duration of a block."""
    plugin_manager.register(plugin, name=name)
    failures = len(registry.load_failures)
    try:
        yield plugin
    finally:
        plugin_manager.unregister(name=name)
        del registry.load_failures[failures:]


# -------------------- toy plugins


@dataclasses.dataclass(frozen=True)
class ToyMeasure(calopt.Measure):
    """Toy measure: min(TPR, TNR) scaled by a level."""

    name: ClassVar[str] = "toy-measure"
    level: float = 1.0

    def check_params(self) -> None:
        self.require_positive("level")

    def from_rates(self, tpr, tnr, p, *, xp):
        return self.level * xp.minimum(tpr, tnr)

    def from_counts(self, tp, fp, tn, fn, *, xp):
        return self.from_rates(tp / (tp + fn), tn / (tn + fp), 0.5, xp=xp)


@dataclasses.dataclass(frozen=True)
class ToyLoss(calopt.Loss):
    """Toy loss: (1 - z)² / 2."""

    name: ClassVar[str] = "toy-loss"
    family: ClassVar[str] = "smooth"

    def value(self, z, *, xp):
        return (1 - z) ** 2 / 2

    def derivative(self, z, *, xp):
        return z - 1

    def second_derivative(self, z, *, xp):
        return xp.ones_like(z)


class ToyPlugin:
    @calopt.hookimpl
    def register_measures(self, register):
        register(ToyMeasure, aliases=("toy",))

    @calopt.hookimpl
    def register_losses(self, register):
        register(ToyLoss)


@pytest.fixture
def toy_plugin():
    with registered(ToyPlugin(), "toy-plugin") as plugin:
        yield plugin


def test_toy_plugin_appears_in_the_listings(toy_plugin):
    measures = {entry.name: entry for entry in calopt.list_measures()}
    assert measures["toy-measure"].plugin == "toy-plugin"
    assert measures["toy-measure"].aliases == ("toy",)
    losses = {entry.name: entry for entry in calopt.list_losses()}
    assert losses["toy-loss"].plugin == "toy-plugin"
    assert calopt.get_measure("toy:level=2") == ToyMeasure(level=2.0)

    result = runner.invoke(app, ["list-measures", "--json"])
    assert result.exit_code == 0, result.output
    listed = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert listed["toy-measure"]["plugin"] == "toy-plugin"
    assert listed["toy-measure"]["params"] == {"level": 1.0}
    assert listed["toy-measure"]["aliases"] == ["toy"]


def test_unregistered_plugin_disappears():
    with registered(ToyPlugin(), "toy-plugin"):
        assert "toy-measure" in {entry.name for entry in calopt.list_measures()}
    assert "toy-measure" not in {entry.name for entry in calopt.list_measures()}


def test_duplicate_name_names_both_plugins(toy_plugin):
    @dataclasses.dataclass(frozen=True)
    class Twin(ToyMeasure):
        """Another measure called toy-measure."""

    class TwinPlugin:
        @calopt.hookimpl
        def register_measures(self, register):
            register(Twin)

    with registered(TwinPlugin(), "toy-twin"):
        # Loading warns once, naming both; listing shows both; only looking the name up fails.
        with pytest.warns(PluginLoadWarning, match="'toy-measure' is registered by both 'toy-plugin' and 'toy-twin'"):
            listed = [entry.plugin for entry in calopt.list_measures() if entry.name == "toy-measure"]
        assert listed == ["toy-plugin", "toy-twin"]
        with pytest.raises(calopt.RegistryError) as excinfo:
            calopt.get_measure("toy-measure")
        assert "toy-plugin" in str(excinfo.value) and "toy-twin" in str(excinfo.value)
        assert "CALOPT_LOAD_PLUGINS" in str(excinfo.value)
        assert calopt.get_measure("toy") == ToyMeasure()  # the alias only one plugin claims
        assert calopt.get_measure("gmean").name == "gmean"  # every other name works

        result = runner.invoke(app, ["list-measures", "--json"])
        assert result.exit_code == 0, result.output
        assert [e["plugin"] for e in json.loads(result.stdout) if e["name"] == "toy-measure"] == ["toy-plugin", "toy-twin"]
        refused = runner.invoke(app, ["score", "--measure", "toy-measure", "y.txt", "y.txt"])
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.splitlines()[-1].startswith("calopt: error: measure 'toy-measure' is registered by both")
        assert "Traceback" not in refused.output


def test_duplicate_of_a_builtin_names_calopt():
    @dataclasses.dataclass(frozen=True)
    class FakeGmean(ToyMeasure):
        """Not the real G-mean."""

        name: ClassVar[str] = "gmean"

    class Impostor:
        @calopt.hookimpl
        def register_measures(self, register):
            register(FakeGmean)

    with registered(Impostor(), "impostor"):
        with pytest.warns(PluginLoadWarning, match="measure 'gmean' is registered by both"), \
                pytest.raises(calopt.RegistryError, match="'gmean' is registered by both") as excinfo:
            calopt.get_measure("gmean")
        assert "'calopt'" in str(excinfo.value) and "'impostor'" in str(excinfo.value)
        X = np.random.default_rng(0).normal(size=(200, 3))
        model = calopt.fit(X, X[:, 0] > 0.5, measure="qmean", epochs=2)  # other concave names still train
        assert model.measure == "qmean"


def test_plugin_whose_hook_raises_is_reported_and_skipped():
    class Raising:
        @calopt.hookimpl
        def register_measures(self, register):
            raise RuntimeError("boom")

    with registered(Raising(), "raising-plugin"):
        with pytest.warns(PluginLoadWarning, match="raising-plugin"):
            names = {entry.name for entry in calopt.list_measures()}
        assert "gmean" in names
        assert any("raising-plugin" in f and "boom" in f for f in registry.load_failures)

        result = runner.invoke(app, ["list-measures", "--json"])
        assert result.exit_code == 0, result.output
        assert "gmean" in {entry["name"] for entry in json.loads(result.stdout)}
        warnings = result.stderr.splitlines()
        assert warnings == [
            "calopt: warning: plugin 'raising-plugin' failed in register_measures "
            "(RuntimeError: boom); skipped (CALOPT_LOAD_PLUGINS lists the third-party plugins to load)"
        ]


def test_registering_a_non_component_is_reported_and_skipped():
    class Sloppy:
        @calopt.hookimpl
        def register_losses(self, register):
            register(len)
            register(ToyLoss)

    with registered(Sloppy(), "sloppy"):
        with pytest.warns(PluginLoadWarning, match="plugin 'sloppy' registered <built-in function len> as a loss"):
            names = {entry.name for entry in calopt.list_losses()}
        assert "toy-loss" in names and "logistic" in names


@dataclasses.dataclass(frozen=True)
class HalfLoss(calopt.Loss):
    """A loss without its derivatives."""

    name: ClassVar[str] = "half-loss"

    def value(self, z, *, xp):
        return xp.abs(z)


@dataclasses.dataclass(frozen=True)
class HalfAlgorithm(calopt.Algorithm):
    """An algorithm without an update."""

    name: ClassVar[str] = "half-algorithm"

    def init(self, problem):
        return ()


def test_a_component_missing_its_methods_is_skipped_with_one_warning():
    class Incomplete:
        @calopt.hookimpl
        def register_losses(self, register):
            register(HalfLoss)

        @calopt.hookimpl
        def register_algorithms(self, register):
            register(HalfAlgorithm)

    with registered(Incomplete(), "incomplete"):
        with pytest.warns(PluginLoadWarning) as caught:
            losses = {entry.name for entry in calopt.list_losses()}
        messages = [str(w.message) for w in caught]
        assert "plugin 'incomplete' registered loss 'half-loss' without derivative, second_derivative; " \
               "skipped (CALOPT_LOAD_PLUGINS lists the third-party plugins to load)" in messages
        assert any("algorithm 'half-algorithm' without update" in m for m in messages)
        assert "half-loss" not in losses and "logistic" in losses
        with pytest.raises(calopt.UnknownNameError):
            calopt.get_algorithm("half-algorithm")


def test_defaults_come_from_the_plugins_and_a_duplicate_breaks_only_its_own_key():
    assert calopt.registry.default_algorithm(calopt.get_measure("gmean")) == "lbfgs"
    assert calopt.registry.default_algorithm(calopt.get_measure("gmean"), "direct") == "spade"
    assert calopt.registry.default_algorithm(calopt.get_measure("f1"), "direct") == "stamp"
    assert calopt.registry.default_algorithm(calopt.get_measure("f1"), "multiclass") == "multinomial"
    assert calopt.registry.default_loss(calopt.get_algorithm("slnd")) == "calibrated-hinge"

    class Rival:
        @calopt.hookimpl
        def register_default_algorithms(self, register):
            register("plugin", task="direct", family="concave")

        @calopt.hookimpl
        def register_default_losses(self, register):
            register("exponential", algorithm="toy-algorithm")

    with registered(Rival(), "rival"):
        with pytest.warns(PluginLoadWarning, match="the direct solver of concave measures"):
            calopt.list_algorithms()
        with pytest.raises(calopt.RegistryError, match="registered by both 'calopt' and 'rival'"):
            calopt.registry.default_algorithm(calopt.get_measure("gmean"), "direct")
        with pytest.raises(calopt.RegistryError, match="registered by both 'calopt' and 'rival'"):
            calopt.fit(np.eye(4), [0, 1, 0, 1], measure="gmean", algorithm="auto")
        assert calopt.registry.default_algorithm(calopt.get_measure("f1"), "direct") == "stamp"
        assert calopt.registry.default_algorithm(calopt.get_measure("gmean")) == "lbfgs"
        X = np.random.default_rng(0).normal(size=(200, 3))
        assert calopt.fit(X, X[:, 0] > 0, measure="gmean", algorithm="spade", epochs=1).measure == "gmean"

    @dataclasses.dataclass(frozen=True)
    class Lonely(HalfAlgorithm):
        name: ClassVar[str] = "lonely"

        def update(self, state, X, y, problem):
            return state

    with pytest.raises(calopt.RegistryError, match="no plugin declares a default loss for algorithm 'lonely'"):
        calopt.registry.default_loss(Lonely())


def test_hookimpls_match_the_hookspecs(toy_plugin):
    calopt.list_measures()  # load the entry-point plugins
    plugin_manager.check_pending()

    class Misspelled:
        @calopt.hookimpl
        def register_measure(self, register):  # not a hook: missing "s"
            pass

    with registered(Misspelled(), "misspelled"):
        with pytest.raises(pluggy.PluginValidationError):
            plugin_manager.check_pending()


# -------------------- loading from entry points


_LIST = (
    "import json, calopt; print(json.dumps({kind: [e.name for e in getattr(calopt, 'list_' + kind)()]"
    " for kind in ('measures', 'losses', 'algorithms')}))"
)


def _listed(**env: str) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _LIST],
        capture_output=True,
        text=True,
        env=clean_env(**env),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_calopt_load_plugins_filters_third_party_plugins_only(broken_plugin_path):
    everything = _listed()
    assert "gmean" in everything["measures"] and "logistic" in everything["losses"]
    assert _listed(CALOPT_LOAD_PLUGINS="") == everything  # the built-ins always load
    assert _listed(CALOPT_LOAD_PLUGINS="measures") == everything


def test_the_cli_trains_with_no_third_party_plugin():
    done = subprocess.run([sys.executable, "-m", "calopt_cli", "train", "--json", "--epochs", "2"],
                          capture_output=True, text=True, env=clean_env(CALOPT_LOAD_PLUGINS=""), timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["algorithm"].startswith("lbfgs") and result["loss"] == "logistic"
    assert 0.5 < result["test"]["value"] < 1


@pytest.fixture
def exiting_plugin_path(tmp_path) -> Path:
    """A distribution ``rude`` whose calopt plugin calls sys.exit(3) when imported."""
    site = tmp_path / "site"
    info = site / "rude-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rude\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[calopt]\nrude = calopt_rude_plugin\n")
    (site / "calopt_rude_plugin.py").write_text("import sys\nsys.exit(3)\n")
    return site


def test_a_plugin_exiting_at_import_is_skipped(exiting_plugin_path):
    done = subprocess.run([sys.executable, "-m", "calopt_cli", "list-measures", "--json"], capture_output=True,
                          text=True, env=clean_env(PYTHONPATH=str(exiting_plugin_path)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "gmean" in {entry["name"] for entry in json.loads(done.stdout)}
    assert done.stderr.splitlines() == [
        "calopt: warning: plugin 'rude' from package 'rude' failed to load (SystemExit: 3); skipped "
        "(CALOPT_LOAD_PLUGINS lists the third-party plugins to load)"]


@pytest.fixture
def broken_plugin_path(tmp_path) -> Path:
    """A directory holding a distribution ``broken`` whose calopt plugin cannot be imported."""
    site = tmp_path / "site"
    info = site / "broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[calopt]\nbroken = calopt_broken_plugin\n")
    (site / "calopt_broken_plugin.py").write_text(
        'raise ImportError("this plugin is broken on purpose")\n'
    )
    return site


def test_broken_entry_point_is_reported_and_the_cli_still_works(broken_plugin_path, tmp_path):
    env = clean_env(PYTHONPATH=str(broken_plugin_path))
    warning = (
        "calopt: warning: plugin 'broken' from package 'broken' failed to load "
        "(ImportError: this plugin is broken on purpose); skipped "
        "(CALOPT_LOAD_PLUGINS lists the third-party plugins to load)"
    )
    listing = subprocess.run(
        [sys.executable, "-m", "calopt_cli", "list-measures", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert listing.returncode == 0, listing.stderr
    assert "gmean" in {entry["name"] for entry in json.loads(listing.stdout)}
    assert listing.stderr.splitlines() == [warning]

    labels = tmp_path / "y.txt"
    labels.write_text("1\n-1\n1\n")
    scored = subprocess.run(
        [sys.executable, "-m", "calopt_cli", "score", str(labels), str(labels), "-m", "gmean", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["value"] == 1.0
    assert scored.stderr.splitlines() == [warning]

    # The escape hatch: load only the plugins named.
    quiet = subprocess.run(
        [sys.executable, "-m", "calopt_cli", "list-measures", "--json"],
        capture_output=True,
        text=True,
        env={**env, "CALOPT_LOAD_PLUGINS": ""},
        timeout=120,
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""


# -------------------- the example plugin, in process


@pytest.fixture
def example_plugin(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import calopt_example

    if plugin_manager.is_registered(calopt_example):  # installed: already loaded
        yield calopt_example
        return
    with registered(calopt_example, "calopt-example"):
        yield calopt_example


def test_example_algorithm_batch_one_is_the_averaged_perceptron(example_plugin):
    """Batch size 1 is Rosenblatt's rule with Freund and Schapire's average (a plain loop)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=40) > 0, 1.0, -1.0)
    algorithm = calopt.get_algorithm("averaged-perceptron:step=0.5")
    backend = calopt.get_backend("numpy")
    problem = calopt.Problem(backend.xp, backend.dtype, None, 40, 3, float(np.mean(y > 0)), calopt.get_measure("bacc"),
                             calopt.get_loss("hinge"), 1)
    from calopt.io.batches import ArrayReader
    from calopt.training.loop import run

    result = run(algorithm, problem, ArrayReader(X, y, backend.xp), epochs=2, seed=4)
    w, b, w_sum, b_sum, steps = np.zeros(3), 0.0, np.zeros(3), 0.0, 0
    order = np.random.default_rng(4)
    for _ in range(2):
        for i in order.permutation(40):
            if y[i] * (X[i] @ w + b) <= 0:
                w, b = w + 0.5 * y[i] * X[i], b + 0.5 * y[i]
            w_sum, b_sum, steps = w_sum + w, b_sum + b, steps + 1
    np.testing.assert_allclose(result.weights[0], w_sum / steps, rtol=1e-12)
    assert float(result.weights[1]) == pytest.approx(b_sum / steps, rel=1e-12)


def test_example_plugin_registers_its_components(example_plugin):
    measure = calopt.get_measure("informedness")
    assert isinstance(measure, example_plugin.Youden)
    assert isinstance(calopt.get_loss("smoothed-hinge"), example_plugin.SmoothedHinge)
    losses = {entry.name: entry.describe() for entry in calopt.list_losses()}
    hinge = losses["smoothed-hinge"]
    assert hinge["plugin"] == "calopt-example"
    assert (hinge["smooth"], hinge["calibrated"], hinge["reward"]) == (True, True, True)


def test_youden_matches_sklearn(example_plugin, backend):
    """Youden's J is scikit-learn's adjusted balanced accuracy on two classes, and its dual region the point (1, 1)."""
    xp = backend.xp
    rng = np.random.default_rng(0)
    y_true = np.where(rng.random(100) < 0.3, 1.0, -1.0)
    y_pred = np.where(rng.random(100) < 0.8, y_true, -y_true)
    measure = calopt.get_measure("youden")
    value = measure.score(backend.asarray(y_true), backend.asarray(y_pred), xp=xp)
    assert value == pytest.approx(balanced_accuracy_score(y_true, y_pred, adjusted=True))

    alpha = backend.asarray([0.0, 0.3, 2.0])
    beta = backend.asarray([1.0, 0.5, -1.0])
    a, b = measure.project(alpha, beta, xp=xp)
    np.testing.assert_array_equal(backend.to_numpy(a), 1.0)
    np.testing.assert_array_equal(backend.to_numpy(b), 1.0)
    np.testing.assert_array_equal(backend.to_numpy(measure.conjugate(a, b, xp=xp)), 1.0)
    grad = measure.conjugate_grad(a, b, xp=xp)
    np.testing.assert_array_equal(backend.to_numpy(grad[0]), 0.0)
    # Ψ(P, N) = min over the dual region of α·P + β·N − Ψ*(α, β), the region being one point.
    tpr, tnr = backend.asarray([0.2, 0.9]), backend.asarray([0.6, 0.1])
    np.testing.assert_allclose(
        backend.to_numpy(measure.psi(tpr, tnr, xp=xp)),
        backend.to_numpy(a[:2] * tpr + b[:2] * tnr - measure.conjugate(a[:2], b[:2], xp=xp)),
    )


def test_smoothed_hinge_values_and_derivatives(example_plugin, backend):
    xp = backend.xp
    loss = calopt.get_loss("smoothed-hinge")
    z = np.array([-1e4, -2.0, -0.5, 0.0, 0.25, 0.5, 0.9, 1.0, 3.0, 1e4])
    expected = np.where(z >= 1, 0.0, np.where(z > 0, (1 - z) ** 2 / 2, 0.5 - z))
    zx = backend.asarray(z)
    np.testing.assert_allclose(backend.to_numpy(loss.value(zx, xp=xp)), expected)
    h = 1e-6
    inner = np.array([-2.0, -0.5, 0.25, 0.5, 0.9, 3.0])
    numeric = (
        backend.to_numpy(loss.value(backend.asarray(inner + h), xp=xp))
        - backend.to_numpy(loss.value(backend.asarray(inner - h), xp=xp))
    ) / (2 * h)
    np.testing.assert_allclose(
        backend.to_numpy(loss.derivative(backend.asarray(inner), xp=xp)), numeric, atol=1e-6
    )
    np.testing.assert_array_equal(
        backend.to_numpy(loss.second_derivative(backend.asarray(inner), xp=xp)),
        [0, 0, 1, 1, 1, 0],
    )
    assert np.all(np.diff(expected[np.argsort(z)]) <= 0) and np.all(expected >= 0)


# -------------------- the wheels, in a fresh venv


def _run(args: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None):
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env or clean_env()
    )
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _copy_source(source: Path, target: Path) -> Path:
    """Copy a source tree without build products, so that builds never write into it."""
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
        ".hypothesis", "tmp", "calopt-example",
    )
    shutil.copytree(source, target, ignore=ignore)
    return target


@pytest.mark.slow
def test_wheels_install_into_a_fresh_venv(tmp_path):
    pytest.importorskip("build")
    dist = tmp_path / "dist"
    for name, source in (("calopt", ROOT), ("calopt-example", EXAMPLE)):
        copy = _copy_source(source, tmp_path / "src" / name)
        build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(copy)]
        _run(build, cwd=tmp_path, timeout=300)
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["calopt", "calopt_example"]

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, timeout=120)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "--timeout", "120", *map(str, wheels)],
        cwd=tmp_path,
        timeout=600,
    )
    calopt_script = str(bin_dir / "calopt")

    # Nothing of the source tree is importable there: the wheels alone provide calopt.
    where = _run([str(python), "-c", "import calopt; print(calopt.__file__)"], cwd=tmp_path, timeout=60)
    assert str(venv) in where.stdout

    measures = json.loads(_run([calopt_script, "list-measures", "--json"], cwd=tmp_path, timeout=120).stdout)
    by_name = {entry["name"]: entry for entry in measures}
    assert by_name["youden"]["plugin"] == "calopt-example"
    assert by_name["youden"]["family"] == "concave"
    for name in ("gmean", "fbeta", "jaccard", "balanced-accuracy"):
        assert by_name[name]["plugin"] == "calopt"
    losses = json.loads(_run([calopt_script, "list-losses", "--json"], cwd=tmp_path, timeout=120).stdout)
    by_name = {entry["name"]: entry for entry in losses}
    assert by_name["smoothed-hinge"]["plugin"] == "calopt-example"
    assert by_name["logistic"]["plugin"] == "calopt"

    rng = np.random.default_rng(1)
    y_true = np.where(rng.random(60) < 0.25, 2, 1)
    y_pred = np.where(rng.random(60) < 0.75, y_true, 3 - y_true)
    (tmp_path / "y.txt").write_text("\n".join(map(str, y_true)) + "\n")
    (tmp_path / "p.txt").write_text("\n".join(map(str, y_pred)) + "\n")
    scored = _run(
        [calopt_script, "score", "y.txt", "p.txt", "--measure", "youden", "--positive", "2", "--json"],
        cwd=tmp_path,
        timeout=120,
    )
    assert scored.stderr == ""
    assert json.loads(scored.stdout)["value"] == pytest.approx(balanced_accuracy_score(y_true, y_pred, adjusted=True))

    # The plugin's algorithm trains through the CLI, with calopt's step trial and averaging,
    # and its model is as good on a9a's test split as the built-in sgd's (balanced accuracy).
    trained = json.loads(_run([calopt_script, "train", "--algorithm", "averaged-perceptron", "--measure", "bacc",
                               "--epochs", "3", "--json"], cwd=tmp_path, timeout=300).stdout)
    assert trained["algorithm"].startswith("averaged-perceptron:step=") and trained["loss"] == "hinge"
    assert trained["test"]["value"] > 0.75

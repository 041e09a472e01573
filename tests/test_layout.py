"""The package layout: modules by job, layers in subpackages, an import graph without cycles, no private names shared.

Every ``import`` counts, those inside functions included (a function-local import is the
usual way to hide a cycle), and so does ``from calopt import x`` of the package facade,
which imports everything.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "calopt"
#: Code shipped beside the core: the CLI and the built-in plugins (imported as these packages).
SHIPPED = {"calopt_cli": ROOT / "cli", "calopt_measures": ROOT / "plugins" / "calopt_measures",
           "calopt_losses": ROOT / "plugins" / "calopt_losses", "calopt_algorithms": ROOT / "plugins" / "calopt_algorithms"}


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name → file, for every .py file under ``root``."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join([package, *parts])] = path
    return modules


CORE = _modules(PACKAGE, "calopt")


def _imports(name: str, path: Path) -> set[str]:
    """The calopt modules ``name`` imports anywhere in its file (functions included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from calopt.io import datasets` imports the submodule when there is one
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in CORE else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in CORE:  # calopt.io.files.X → calopt.io.files
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    found.discard(name)
    return found


#: The layers from the top (issue 24): each imports only those below it (lint-imports checks it).
LAYERS = ["calopt_cli", "calopt.reporting", "calopt.sklearn", "calopt.training", "calopt.models"]


def test_the_core_is_split_by_job():
    for package in ("calopt.io", "calopt.training", "calopt.models", "calopt.sklearn", "calopt.reporting"):
        assert package in CORE
    assert {"calopt.registry", "calopt.components", "calopt.backends", "calopt.errors"} <= CORE.keys()
    assert {"calopt.sklearn.estimator", "calopt.sklearn.scorers", "calopt.reporting.comparison",
            "calopt.reporting.plotting"} <= CORE.keys()


def _root_modules() -> set[str]:
    """The modules directly in calopt/ (the facade left out): the kernel's."""
    return {name for name, path in CORE.items() if path.parent == PACKAGE and name != "calopt"}


def test_the_package_root_holds_the_kernel_only():
    """What stands above training (the estimator, reporting) is a subpackage, not a module beside
    the kernel: no module at the root imports training, directly or through others."""
    graph = {name: _imports(name, path) for name, path in CORE.items()}
    above = ("calopt.training", "calopt.sklearn", "calopt.reporting")
    for name in sorted(_root_modules()):
        seen, todo = set(), [name]
        while todo:
            for target in graph[todo.pop()] - seen:
                seen.add(target)
                todo.append(target)
        assert not {t for t in seen if t.startswith(above)}, f"{name} imports a layer above the kernel"


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_import_contracts_name_the_layout():
    """pyproject.toml's import-linter contracts cover the package as it is: the layers in their order,
    and every kernel module, io and models among the modules that never import training."""
    contracts = _pyproject()["tool"]["importlinter"]["contracts"]
    [layers] = [contract for contract in contracts if contract["type"] == "layers"]
    assert layers["layers"] == LAYERS
    for layer in LAYERS:
        assert layer in CORE or layer in SHIPPED
    [below] = [contract for contract in contracts if "calopt.training" in contract.get("forbidden_modules", ())]
    assert set(below["source_modules"]) == _root_modules() | {"calopt.io", "calopt.models"}
    assert set(below["forbidden_modules"]) == set(LAYERS[:-1])


def test_every_package_is_shipped():
    """setuptools' explicit ``packages`` list names every package of calopt (a new subpackage too)."""
    packages = {name for name, path in CORE.items() if path.name == "__init__.py"}
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    assert packages <= listed
    assert listed - packages == set(SHIPPED)


def test_the_import_graph_of_calopt_has_no_cycle():
    """Depth-first search for a back edge; a module importing its own package's facade
    (``calopt``, which imports every module) is a cycle too, except the facade itself."""
    graph = {name: _imports(name, path) for name, path in CORE.items()}
    for name, targets in graph.items():
        if name != "calopt":
            assert "calopt" not in targets, f"{name} imports the calopt facade"
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycle = trail[trail.index(target):] + [target] if target in trail else [node, target]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if target not in state:
                visit(target, trail + [target])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_the_cycle_check_can_fail(tmp_path):
    """The checker finds a cycle hidden in a function (the form the old code had)."""
    fake = {"calopt.a": "def f():\n    from calopt.b import g\n", "calopt.b": "import calopt.a\n"}
    for name, text in fake.items():
        (tmp_path / f"{name}.py").write_text(text)
    CORE.update({name: tmp_path / f"{name}.py" for name in fake})
    try:
        with pytest.raises(AssertionError, match="import cycle"):
            test_the_import_graph_of_calopt_has_no_cycle()
    finally:
        for name in fake:
            del CORE[name]


def _private_imports(path: Path) -> list[str]:
    """``from X import _name`` of a private name from another module, and ``module._name`` of an
    imported calopt module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    imported_modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("calopt", "calopt_")):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_") and a.name != "__version__"]
        if isinstance(node, ast.Import):
            imported_modules |= {alias.asname or alias.name for alias in node.names if alias.name.startswith("calopt")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and node.value.id in imported_modules:
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_private_name_is_used_outside_its_module():
    files = list(CORE.values()) + [path for root in SHIPPED.values() for path in root.rglob("*.py")]
    offenders = {str(path.relative_to(ROOT)): names for path in files if (names := _private_imports(path))}
    assert offenders == {}


def _private_modules(path: Path) -> list[str]:
    """Imports of another package's private module or name (``scipy.sparse._sparsetools``,
    ``from numpy._core import x``, ``from scipy.sparse import _base``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module != "__future__":
            modules = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [name for name in modules if not name.startswith("calopt")
                  and any(part.startswith("_") for part in name.split("."))]
    return found


def test_no_private_module_of_another_package_is_imported(tmp_path):
    """calopt, its CLI and plugins use other packages through their public modules only (issue 24:
    scipy's product and row-gather loops are reached through its public arrays)."""
    files = list(CORE.values()) + [path for root in SHIPPED.values() for path in root.rglob("*.py")]
    offenders = {str(path.relative_to(ROOT)): names for path in files if (names := _private_modules(path))}
    assert offenders == {}
    fake = tmp_path / "fake.py"  # the check can fail, a guarded import inside a function included
    fake.write_text("from __future__ import annotations\nimport numpy.linalg\nfrom . import _x\n"
                    "def f():\n    try:\n        from scipy.sparse._sparsetools import csr_matvec\n"
                    "    except ImportError:\n        import scipy._lib as lib\n")
    assert _private_modules(fake) == ["scipy.sparse._sparsetools.csr_matvec", "scipy._lib"]


def test_each_module_imports_on_its_own():
    """``python -c 'import calopt.x'`` in a fresh interpreter, for every module of calopt."""
    def load(name: str) -> tuple[str, int, str]:
        done = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
        return name, done.returncode, done.stderr[-500:]

    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [(name, err) for name, code, err in pool.map(load, sorted(CORE)) if code]
    assert failures == []

"""The defaults the help texts and docstrings state are the ones the library resolves.

Each text's clauses (split at ``.`` and ``;``) that speak of a default must name exactly
the algorithms that :func:`calopt.fit` trains when none is given (found by training, not
read from the registry), and the clauses about streams and ``partial_fit`` exactly the
ones those train.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import typer

import calopt
from calopt import registry
from calopt.sklearn import CaloptClassifier
from calopt.training import api
from calopt_cli.app import app

MEASURES = ("gmean", "f1")  # a concave measure and a pseudo-linear one


def _name(spec: str) -> str:
    return registry.get_algorithm(spec).name


@pytest.fixture(scope="module")
def resolved() -> dict[str, set[str]]:
    """The algorithm each route trains when none is named, for both measure families."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    two = (X[:, 0] > 0.5).astype(int)
    three = np.digitize(X[:, 0], [-0.5, 0.5])
    routes: dict[str, set[str]] = {"binary": set(), "multiclass": set(), "stream": set(), "partial_fit": set()}
    for measure in MEASURES:
        routes["binary"].add(_name(calopt.fit(X, two, measure=measure, epochs=2, select="none").algorithm))
        routes["multiclass"].add(_name(calopt.fit(X, three, measure=measure, epochs=2).algorithm))
        routes["stream"].add(_name(calopt.fit([(X[:60], two[:60]), (X[60:], two[60:])], measure=measure,
                                              epochs=1).algorithm))
        estimator = CaloptClassifier(measure).partial_fit(X, two, classes=[0, 1])
        routes["partial_fit"].add(_name(estimator.model_.algorithm))
    return routes


def _named(text: str, marker: str, *, quoted: bool = False) -> set[str]:
    """The registered algorithms named in the clauses of ``text`` that match ``marker``: as words
    (help texts), or ``quoted`` as code (docstrings, where "a plugin" is English)."""
    clauses = re.split(r"(?<=[.;])\s+", " ".join(text.split()))
    chosen = " ".join(clause for clause in clauses if re.search(marker, clause, flags=re.I))
    return {entry.name for entry in registry.list_algorithms()
            if re.search(rf'``"?{re.escape(entry.name)}(?=[:"`])' if quoted else
                         rf"(?<![\w-]){re.escape(entry.name)}(?![\w-])", chosen, flags=re.I)}


DEFAULT = r"\bdefault|^None:"


def _train_command():
    return typer.main.get_command(app).commands["train"]


def test_the_routes_resolve_as_the_texts_below_assume(resolved):
    """Two resolutions differ (in memory and on a stream), so the texts have something to get right."""
    assert resolved["binary"] != resolved["stream"] and resolved["stream"] == resolved["partial_fit"]


def test_train_help_states_the_real_defaults(resolved):
    command = _train_command()
    option = next(param for param in command.params if param.name == "algorithm")
    for text in (option.help, command.help):
        assert _named(text, DEFAULT) == resolved["binary"] | resolved["multiclass"], text
        assert _named(text, r"--stream") == resolved["stream"], text


def test_estimator_docstring_states_the_real_defaults(resolved):
    entry = re.search(r"\n    algorithm : [^\n]*\n(.*?)(?=\n    \w+ : )", CaloptClassifier.__doc__, flags=re.S)[1]
    assert _named(entry, DEFAULT, quoted=True) == resolved["binary"] | resolved["multiclass"], entry
    assert _named(entry, r"partial_fit", quoted=True) == resolved["partial_fit"], entry


def test_fit_docstrings_state_the_real_defaults(resolved):
    assert _named(api.fit.__doc__, DEFAULT, quoted=True) == resolved["binary"], api.fit.__doc__
    multiclass = api.fit_multiclass.__doc__
    assert _named(multiclass, DEFAULT, quoted=True) == resolved["multiclass"], multiclass

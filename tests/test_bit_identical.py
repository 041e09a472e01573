"""Every algorithm's models are bit-identical to those of the code before the restructuring (issue 24).

tests/data/model_digests.json holds the SHA-256 of each case's coefficients and
intercepts and its exact threshold, written by tests/model_digests.py at the commit its
docstring names; a refactoring that means to change no model must pass this unchanged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import model_digests  # noqa: E402

from calopt import registry  # noqa: E402

EXPECTED = json.loads(model_digests.FIXTURE.read_text())


@pytest.fixture(scope="module")
def data():
    return {name: model_digests.load(name) for name in sorted({case.data for case in model_digests.CASES})}


def test_the_fixture_covers_every_registered_algorithm_and_every_case():
    """Each built-in algorithm has a case without selection and one with the default selection,
    and the fixture has exactly the cases the generator trains."""
    assert set(EXPECTED) == {model_digests.key(case) for case in model_digests.CASES}
    builtin = {name for name, entry in registry.entries("algorithm").items() if entry.plugin == "calopt"}
    for select in ("none", "auto"):
        assert {case.algorithm.split(":")[0] for case in model_digests.CASES if case.select == select} >= builtin


def test_digest_tells_a_last_bit_apart():
    """One ulp in one coefficient changes the digest (the comparison can fail)."""
    coef = np.linspace(-1.0, 1.0, 7)
    model = model_digests._Fitted(coef, np.float64(0.5))
    nudged = model_digests._Fitted(np.nextafter(coef, 2.0 * (np.arange(7) == 3)), np.float64(0.5))
    assert model_digests.digest(model) != model_digests.digest(nudged)
    assert model_digests.digest(model) == model_digests.digest(model_digests._Fitted(coef.copy(), 0.5))


@pytest.mark.parametrize("case", model_digests.CASES, ids=model_digests.key)
def test_model_is_bit_identical(case, data):
    assert model_digests.digest(model_digests.train(case, data)) == EXPECTED[model_digests.key(case)]

"""calopt.backends.row_dot: the per-row inner products the lbfgs recursion uses, against plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calopt.backends import get_backend, row_dot


def _loop(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    flat_a, flat_c = a.reshape(-1, a.shape[-1]), c.reshape(-1, c.shape[-1])
    return np.array([math.fsum(x * y for x, y in zip(ra, rc)) for ra, rc in zip(flat_a, flat_c)]).reshape(a.shape[:-1])


@pytest.mark.parametrize("shape", [(7,), (3, 11), (18, 2001), (2, 4, 5)])
@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
def test_row_dot_is_the_inner_product_of_each_row(shape, backend):
    if backend == "array-api-strict":
        pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(len(shape))
    a, c = rng.standard_normal(shape), rng.standard_normal(shape)
    chosen = get_backend(backend)
    got = np.asarray(row_dot(chosen.asarray(a), chosen.asarray(c), chosen.xp))
    assert got.shape == shape[:-1]
    np.testing.assert_allclose(got, _loop(a, c), rtol=1e-12, atol=1e-12)

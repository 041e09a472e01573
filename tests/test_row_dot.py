"""calopt.backends.row_dot, put_slot and put_slot_where: the per-row inner products and the memory
ring the lbfgs recursion uses, against plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calopt.backends import get_backend, put_slot, put_slot_where, row_dot


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


@pytest.mark.parametrize("backend", ["numpy", "array-api-strict"])
@pytest.mark.parametrize("head", [0, 2, 4])
@pytest.mark.parametrize("pattern", [(True, True, True, True), (True, False, True, False), (False, False, False, True)])
def test_the_memory_ring_drops_the_oldest_pair_of_the_chosen_models(backend, head, pattern):
    """Read from the ring's start (``head``, then ``head`` + 1 after the update), a chosen model's
    pairs are its old ones without the oldest, then the new one; another model's are unchanged:
    a loop over slots and models on the pairs in order."""
    if backend == "array-api-strict":
        pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(3)
    slots, models, d = 5, len(pattern), 6
    memory, new = rng.standard_normal((slots, models, d)), rng.standard_normal((models, d))
    in_order = np.stack([memory[(head + i) % slots] for i in range(slots)])  # oldest first
    expected = in_order.copy()
    for j, chosen in enumerate(pattern):
        if chosen:
            for i in range(slots - 1):
                expected[i, j] = in_order[i + 1, j]
            expected[-1, j] = new[j]
    chosen = get_backend(backend)
    where = chosen.xp.asarray(np.array(pattern))
    ring = np.asarray(put_slot_where(chosen.asarray(memory.copy()), head, chosen.asarray(new), where, chosen.xp))
    got = np.stack([ring[(head + 1 + i) % slots] for i in range(slots)])
    np.testing.assert_array_equal(got, expected)
    if all(pattern):
        ring = np.asarray(put_slot(chosen.asarray(memory.copy()), head, chosen.asarray(new), chosen.xp))
        np.testing.assert_array_equal(np.stack([ring[(head + 1 + i) % slots] for i in range(slots)]), expected)

"""Data held as a features matrix ``X`` (rows × features): its shape, defined once for io's classes."""

from __future__ import annotations

from typing import Any

__all__ = ["FeatureRows"]


class FeatureRows:
    """Mixin of a class holding its features as ``X``: ``n_samples`` and ``n_features`` as Python ints.

    :class:`calopt.io.files.Dataset` (what a file holds) and
    :class:`calopt.io.batches.ArrayReader` (what serves the training loop) both are.
    """

    X: Any

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

"""The benchmark datasets that ship with calopt: a9a (UCI Adult) and ijcnn1, train and test.

The files are the LIBSVM copies described in ``README.md`` beside this module (origin,
counts, sha256). Parsed arrays are cached for the life of the process; every
:func:`load` hands back fresh copies, so a caller that scales ``X`` in place cannot
change what the next caller gets.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.resources
from pathlib import Path

import numpy as np

from calopt.io.files import Dataset, align_features, read_libsvm
from calopt.errors import UnknownNameError

__all__ = ["SPLITS", "load", "names", "path"]

SPLITS = ("train", "test")
#: name -> (train file, test file, number of features).
_DATASETS = {
    "a9a": ("a9a.bz2", "a9a.t.bz2", 123),
    "ijcnn1": ("ijcnn1.bz2", "ijcnn1.t.bz2", 22),
}
_extracted = contextlib.ExitStack()  # holds files unpacked from a zipped install
atexit.register(_extracted.close)


def names() -> list[str]:
    """The embedded datasets, sorted."""
    return sorted(_DATASETS)


def _check(name: str, split: str) -> tuple[str, str]:
    key = str(name).strip().lower()
    if key not in _DATASETS:
        raise UnknownNameError("dataset", str(name), _DATASETS)
    if split not in SPLITS:
        raise UnknownNameError("split", str(split), SPLITS)
    return key, split


def path(name: str, split: str = "train") -> Path:
    """The packaged ``.bz2`` LIBSVM file for ``name`` and ``split`` (``train`` or ``test``)."""
    key, split = _check(name, split)
    filename = _DATASETS[key][SPLITS.index(split)]
    resource = importlib.resources.files(__name__) / filename
    if isinstance(resource, Path):
        return resource
    return _extracted.enter_context(importlib.resources.as_file(resource))


@functools.lru_cache(maxsize=None)
def _parsed(key: str, split: str) -> tuple[object, np.ndarray]:
    """The parsed (X, labels) of one file, read-only; padded to the train width."""
    dataset = read_libsvm(path(key, split), zero_based=False)
    dataset = align_features(dataset, _DATASETS[key][2])
    for array in (dataset.X.data, dataset.X.indices, dataset.X.indptr, dataset.labels):
        array.flags.writeable = False
    return dataset.X, dataset.labels


def load(name: str, split: str = "train") -> Dataset:
    """An embedded dataset as a Dataset with sparse CSR ``X`` and ±1 float labels.

    Both splits of a dataset have the same number of features (a9a's test file never uses
    feature 123, so it is padded), and that width is known: another dataset's model is
    not padded to it. ``source`` is ``"name:split"``.
    """
    key, split = _check(name, split)
    X, labels = _parsed(key, split)
    return Dataset(X.copy(), labels.copy(), f"{key}:{split}", format="libsvm", zero_based=False, open_width=False)

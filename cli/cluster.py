"""``calopt train --dask local|ADDRESS``: the Dask client a run trains on, and what the workers read.

``local`` starts a ``LocalCluster`` on this machine (one single-threaded worker process
per core) for the run and closes it afterwards; anything else is a scheduler's address.
A training file is read by the workers themselves (rows ``i::W`` each), never by this
process; an embedded dataset is loaded here and its rows scattered once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from calopt.errors import ParameterError
from calopt.io import datasets
from calopt.io.files import STDIN
from calopt_cli.reading import CsvOptions, embedded


@contextmanager
def dask_client(spec: str | None) -> Iterator[Any]:
    """The client for ``--dask`` (None without it); a local cluster lives as long as the block."""
    if spec is None:
        yield None
        return
    from calopt.training.distributed import connect

    if spec.strip().lower() != "local":
        client, _ = connect(spec)
        try:
            yield client
        finally:
            client.close()
        return
    from distributed import Client, LocalCluster

    # the workers' own logs stay silent: a task's error (a bad data file) reaches this process,
    # which reports it as one line; at ERROR the workers printed it first with its traceback
    with LocalCluster(threads_per_worker=1, dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
            Client(cluster) as client:
        yield client


def cluster_input(source: str, csv: CsvOptions, backend: str | None,
                  device: Any) -> tuple[Any, Any, dict[str, Any], Any]:
    """What the workers train on: ``(path, None, read_options, None)`` for a file, or the embedded
    dataset's ``(X, labels, {}, dataset)``."""
    if backend not in (None, "numpy") or device is not None:
        raise ParameterError("--dask trains on NumPy on the workers; leave out --backend and --device")
    if source == STDIN:
        raise ParameterError("--dask: the workers read the training file themselves; give a file, not stdin")
    if embedded(source):
        dataset = datasets.load(source, "train")
        return dataset.X, dataset.labels, {}, dataset
    options = {"label_column": csv.label_column, "delimiter": csv.delimiter, "header": csv.header}
    return source, None, options, None

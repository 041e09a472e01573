"""The public training API: :func:`fit` and :func:`fit_multiclass`, flat keywords dispatched by input.

Each call resolves one :class:`~calopt.training.plan.FitPlan` from its options and hands it to
the source its input calls for:

- arrays with labels: :mod:`calopt.training.pipeline` (binary, constrained, one-vs-rest);
- ``y`` None: a chunked source or a list of ``(X, y)`` chunks, :mod:`calopt.training.stream`;
- ``cluster=``: Dask shards, :mod:`calopt.training.distributed`.

``calopt.fit``, ``calopt.fit_multiclass`` and :class:`calopt.sklearn.CaloptClassifier` call
these; nothing else parses the user's options.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from calopt.backends import to_numpy
from calopt.constraints import class_constrained, constrain, parse_constraints
from calopt.errors import ParameterError
from calopt.io.labels import label_values
from calopt.io.stream import BUFFER_ROWS
from calopt.models.linear import LinearModel, MulticlassModel
from calopt.training.checkpoint import Checkpoint
from calopt.training.columns import on_present_columns
from calopt.training.loop import EpochRecord
from calopt.training.pipeline import fit_binary, fit_multiclass_arrays, named
from calopt.training.plan import FitPlan
from calopt.training.selection import MAX_EPOCHS, PATIENCE
from calopt.training.stream import SAMPLE_ROWS, fit_chunks

__all__ = ["fit", "fit_multiclass"]

Callback = Callable[[EpochRecord], None]


# Over 80 lines: the public signature (flat keywords, one per option) and its reference documentation;
# the body is the dispatch by input, some 35 lines.
def fit(
    X: Any,
    y: Any = None,
    *,
    measure: Any = "f1",
    algorithm: Any = None,
    loss: Any = None,
    backend: str | None = None,
    dtype: str | None = None,
    device: Any = None,
    epochs: int | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    scale: bool = True,
    tune_threshold: bool = True,
    positive: Any = None,
    sample_weight: Any = None,
    select: str = "auto",
    patience: int = PATIENCE,
    max_epochs: int = MAX_EPOCHS,
    eval_set: tuple[Any, Any] | None = None,
    callback: Callback | None = None,
    checkpoint: str | os.PathLike | Callable[[Checkpoint], None] | None = None,
    checkpoint_every: int | None = None,
    resume: Any = None,
    interrupt: Callable[[], bool] | None = None,
    constraints: Any = None,
    cluster: Any = None,
    local_steps: int | None = None,
    read_options: dict[str, Any] | None = None,
    buffer_rows: int = BUFFER_ROWS,
    sample_rows: int = SAMPLE_ROWS,
    progress: Callable[[int, str], None] | None = None,
    randomised: bool = False,
) -> LinearModel | MulticlassModel:
    """Train a linear classifier that maximises ``measure`` on (X, y).

    ``X`` is a 2-D array of any supported backend (or scipy.sparse, kept sparse on
    NumPy, and trained on its present columns when at least half are empty:
    :mod:`calopt.training.columns`; a DataFrame's column names, distinct strings, become
    ``model.feature_names``),
    ``y`` the labels (any dtype; a missing one is an error). Two distinct labels train a binary
    :class:`~calopt.models.linear.LinearModel` (``positive`` picks the positive class; by
    default 1 of {0, 1} and {-1, 1}, True, else the smaller class: :func:`~calopt.io.labels.binary_classes`);
    more train one-vs-rest, as :func:`fit_multiclass` describes, and return a
    :class:`~calopt.models.linear.MulticlassModel`. ``measure``, ``algorithm`` and
    ``loss`` are names with optional parameters (``"fbeta:beta=2"``) or component
    objects. ``backend`` (``numpy``, ``array-api-strict``, ``torch``, ``cupy``) defaults
    to X's own; ``dtype`` is a dense X's own floating dtype, else float64, except on the GPU (float32)
    and for sparse text trained two classes at a time by the selection's L-BFGS with a
    trainer a candidate (float32: the same test values in 232 of 252 text cells, 0.5-0.8 of
    the time; the model's weights are float64 either way; give ``dtype`` to choose). ``sample_weight`` (n,)
    weighs each row in the losses, rewards and rates (TPR, TNR) the solvers and the
    threshold use; weights are rescaled to mean 1, so only their ratios matter.
    Settings are chosen on data the weights do not see (:mod:`calopt.training.selection`):
    ``select`` is ``"auto"`` (K-fold cross-fitting for small data, one held-out split for
    large), ``"cv:K"``, ``"holdout:F"``, or ``"none"`` (the one-pass step trial, 10 passes,
    the threshold tuned on the training data: calopt before selection). The algorithm's
    tunable parameters the user did not give, the number of passes (training stops when
    no candidate improved for ``patience`` passes, at most ``max_epochs``) and the
    threshold are chosen on the held-out scores. A model on all the rows is trained
    alongside the fold models with the same settings and batches; the result is that model
    at the chosen pass, with the threshold that predicts positive the share of its rows
    that the best held-out threshold did. ``epochs`` forces the number of passes.
    ``algorithm`` defaults to the one a plugin declares for binary problems (the built-ins:
    ``lbfgs``, the plug-in route); ``algorithm="auto"`` compares the measure's own solver
    (``spade``, ``stamp``) with it on the same folds and keeps the better
    (``model.fit_report.selection`` says which, with every candidate's held-out value).
    ``eval_set=(X_test, y_test)`` adds the test value of each epoch to the history. The
    model's ``history`` has one row per epoch (``train`` and ``test`` at the threshold
    tuned as for the final model, so the last row is the model's own values) and
    ``fit_seconds`` the solver time.

    Interruption (:mod:`calopt.training.checkpoint`): ``interrupt()`` is checked after
    every batch; when it returns true, training stops and raises
    :class:`~calopt.errors.TrainingInterrupted` holding the checkpoint (also written to
    ``checkpoint`` when given, as it is every ``checkpoint_every`` epochs; a callable
    ``checkpoint`` is handed each Checkpoint to write instead). ``resume=`` that
    checkpoint or its path, with the same data and options, skips the setting
    selection and ends with the model an uninterrupted run gives.

    More than two classes (:func:`fit_multiclass`): the multinomial model, then the decision rule
    that maximises ``measure`` over the K classes (G-mean, H-mean, Q-mean or min of the
    per-class recalls, balanced accuracy, macro or ``average=micro`` F-β and Jaccard), chosen
    on out-of-fold probabilities (:mod:`calopt.training.multiclass`); ``measure="accuracy"``
    keeps the argmax. The rule is deterministic (a gain matrix on the softmax probabilities)
    unless ``randomised=True`` (three or more classes only) asks for the Frank-Wolfe mixture;
    ``model.fit_report.decision`` holds its held-out value, the argmax's and the gap.

    ``constraints`` (binary only) are rate constraints, ``"precision>=0.9"``, ``"fpr<=0.01"``
    (:mod:`calopt.constraints`): the measure is then maximised subject to them. Settings
    are chosen on held-out rows by the measure at the best threshold that satisfies the
    constraints there (or the closest to feasible when none does). The model's threshold
    is chosen on rows the weights did not see: the best feasible one on the chosen
    candidate's out-of-fold scores, carried over by its positive share to the nearest
    threshold that meets the constraints on the training rows too (none does: the closest
    to feasible there); ``model.fit_report.threshold_rule`` says which, and the message says
    when no threshold met the constraints on the held-out rows. With ``select="none"`` it is
    the best feasible one on the training rows, or on the held-out part of an algorithm that
    holds one out;
    the default algorithm (``lbfgs``) trains the weights by the plug-in route;
    ``algorithm="constrained"`` by the Lagrangian primal-dual solver. ``model.fit_report.constraints`` holds each
    constraint's value on the training, held-out (``validation``: the out-of-fold predictions)
    and ``eval_set`` rows and whether it holds there;
    ``model.message`` says which are not met on the training data.

    ``cluster`` (a ``distributed.Client`` or a scheduler address) trains on a Dask cluster,
    the data staying on the workers; ``X`` may then be a data file or a list of files (``y``
    None), each worker reading its own share (:mod:`calopt.training.distributed`).

    ``local_steps`` (mini-batch updates per worker per round, local rounds) and ``read_options``
    (how each worker reads its training files, :func:`~calopt.io.files.read_data`'s keywords)
    are for ``cluster=`` only.

    Streaming: with ``y`` None (and no ``cluster``), ``X`` is a chunked source
    (:func:`calopt.io.stream.open_stream`) or a list of ``(X, y)`` chunks, read part by part in
    bounded memory (:mod:`calopt.training.stream`); ``select="auto"`` trains a large stream on
    its first pass's sample (:func:`~calopt.training.stream.fit_stream_sample`) and means
    ``"none"`` otherwise, and the options a stream does not support (other backends, sample weights, an evaluation
    set, checkpoints, constraints) are errors. ``buffer_rows`` bounds its shuffle buffer,
    ``sample_rows`` its step trial's sample, and ``progress(rows, pass_name)`` is called after
    each part of each pass (:func:`~calopt.training.stream.fit_stream`).
    """
    if randomised and (cluster is not None or y is None):
        raise ParameterError("randomised=True (--randomised) is for K-class labels in memory (a stream or a Dask run "
                             "trains two classes)")
    options = dict(measure=measure, algorithm=algorithm, loss=loss, epochs=epochs, batch_size=batch_size, seed=seed,
                   scale=scale, tune_threshold=tune_threshold, select=select, callback=callback,
                   checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume, interrupt=interrupt)
    in_memory = dict(backend=backend, dtype=dtype, device=device, sample_weight=sample_weight, eval_set=eval_set)
    streaming = dict(buffer_rows=buffer_rows, sample_rows=sample_rows, progress=progress)
    if cluster is not None:
        from calopt.training.distributed import fit_on_cluster

        if constraints:
            raise ParameterError("constraints with cluster=: a Dask run does not train under rate constraints")
        for name, value in (("backend", backend if backend not in (None, "numpy") else None), ("device", device),
                            ("sample_weight", sample_weight), ("eval_set", eval_set)):
            if value is not None:
                raise ParameterError(f"{name} is not supported with cluster= (the workers train on NumPy, "
                                     f"unweighted; score the returned model on a test set)")
        return fit_on_cluster(X, y, options, cluster=cluster, dtype=dtype, positive=positive,
                              local_steps=local_steps, read_options=read_options)
    _only_with("cluster=", local_steps=local_steps, read_options=read_options)
    if y is None:  # the options a stream does not take are refused there
        return fit_chunks(X, {**options, "patience": patience, "max_epochs": max_epochs, "constraints": constraints},
                          positive=positive, **streaming, **in_memory)
    _only_with("a stream (y None)", buffer_rows=None if buffer_rows == BUFFER_ROWS else buffer_rows,
               sample_rows=None if sample_rows == SAMPLE_ROWS else sample_rows, progress=progress)
    labels = label_values(to_numpy(y), source="training labels")
    count = np.unique(labels).size
    if count <= 2:
        if randomised:
            raise ParameterError("randomised=True (--randomised) is for three or more classes; the training labels have "
                                 f"{count} (their threshold is deterministic)")
        plan = FitPlan.resolve(constraints=constraints, patience=patience, max_epochs=max_epochs, **options)
        return named(X, on_present_columns(fit_binary, X, labels, plan, positive=positive, **in_memory))
    constrained = bool(parse_constraints(constraints))
    if constrained:  # checked against the classes before training
        if randomised:
            raise ParameterError("randomised=True (--randomised) with rate constraints: the Frank-Wolfe mixture is "
                                 "not chosen under them; the deterministic rule is")
        from calopt.registry import get_measure

        class_constrained(constrain(get_measure(options.get("measure") or "f1"), constraints), np.unique(labels))
    if positive is not None:
        raise ParameterError(f"positive={positive!r}: a positive class is for two-class labels; "
                             f"the training labels have {count} classes")
    del options["tune_threshold"]  # each class's threshold is tuned: it centres the class's scores
    if constrained:  # the multinomial model's decision rule meets them
        plan = FitPlan.resolve(task="multiclass", constraints=constraints, patience=patience, max_epochs=max_epochs,
                               **options)
        if plan.components.algorithm.name != "multinomial":
            raise ParameterError(f"rate constraints on K classes are met by the decision rule of the multinomial "
                                 f"model; algorithm {plan.components.algorithm.name!r} keeps the argmax of its scores")
        return named(X, on_present_columns(fit_multiclass_arrays, X, labels, plan, **in_memory))
    return named(X, fit_multiclass(X, labels, patience=patience, max_epochs=max_epochs, randomised=randomised,
                                   **options, **in_memory))


def _only_with(where: str, **given: Any) -> None:
    """A ParameterError naming the first option ``given`` (not None) that only ``where`` takes."""
    for name, value in given.items():
        if value is not None:
            raise ParameterError(f"{name} is for {where} only")


def fit_multiclass(X: Any, y: Any, **options: Any) -> MulticlassModel:
    """Train a one-vs-rest linear classifier on (X, y) with any number of classes ≥ 2.

    ``algorithm`` defaults to ``multinomial`` (the softmax loss by L-BFGS), whose model then
    predicts by the decision rule for ``measure`` over three or more classes, chosen on
    out-of-fold probabilities (:mod:`calopt.training.multiclass`; ``measure="accuracy"``,
    a measure with no K-class form and the other algorithms keep the argmax;
    ``randomised=True``: the Frank-Wolfe mixture). An algorithm
    that declares ``multiclass`` (multinomial, SLND) trains all classes in one run; any
    other algorithm runs the binary pipeline once per class (class c as positive, with
    ``measure``); each class's scores are then put on a common scale
    for the argmax: centred at its threshold tuned for ``measure`` (0 is "class c" by
    that class's own rule) and divided by their standard deviation on the training
    data. On letter (70/30, seed 0) that took test top-1 from 0.37 to 0.55 (spade,
    gmean) and from 0.35 to 0.62 (stamp, f1). Features are max-abs scaled as in
    :func:`fit`. ``eval_set=(X_test, y_test)`` adds the test top-1 accuracy (classes
    trained together) or the macro test measure (one class at a time) to each history
    row. ``callback`` runs after each epoch; one class at a time, its record counts the
    epochs of all classes (``epoch`` of ``total_epochs``).

    ``checkpoint``, ``checkpoint_every``, ``resume`` and ``interrupt`` work as in
    :func:`fit`; one class at a time, the checkpoint also holds the classes already
    finished.

    ``options`` are :func:`fit`'s keywords for arrays in memory (``measure``, ``algorithm``,
    ``loss``, ``backend``, ``dtype``, ``device``, ``epochs``, ``batch_size``, ``seed``, ``scale``,
    ``sample_weight``, ``select``, ``patience``, ``max_epochs``, ``eval_set`` and the run
    control), with the same defaults; those of two-class problems (``positive``,
    ``tune_threshold``, ``constraints``) and of other sources (``cluster=``, a stream's) are a
    TypeError, as an unknown keyword is. Unlike :func:`fit`, two classes train a one-vs-rest
    model too.
    """
    unknown = next((name for name in options if name not in _MULTICLASS), None)
    if unknown is not None:
        raise TypeError(f"fit_multiclass() got an unexpected keyword argument {unknown!r}")
    in_memory = {name: options.pop(name) for name in _IN_MEMORY if name in options}
    in_memory["randomised"] = bool(options.pop("randomised", False))
    labels = label_values(to_numpy(y), source="training labels")
    plan = FitPlan.resolve(task="multiclass", **options)
    return on_present_columns(fit_multiclass_arrays, X, labels, plan, **in_memory)


#: The keywords of :func:`fit` that :func:`fit_multiclass` takes, and those of them the arrays' own.
_MULTICLASS = frozenset(inspect.signature(fit).parameters) - {
    "X", "y", "positive", "tune_threshold", "constraints", "cluster", "local_steps", "read_options", "buffer_rows",
    "sample_rows", "progress"}
_IN_MEMORY = ("backend", "dtype", "device", "sample_weight", "eval_set")

"""The fitted models: one family, binary (:class:`LinearModel`) and one-vs-rest (:class:`MulticlassModel`).

Both are linear in the original feature space: the max-abs scaling (or any other affine
feature map) used in training is folded into ``coef`` and ``intercept``, and ``scale``
keeps the scaling for reference. A binary model predicts ``X @ coef + intercept > 0``
(the intercept includes the threshold tuned for the measure); a one-vs-rest model
predicts ``argmax_c (X @ coef + intercept)[:, c]``. Files use :mod:`calopt.models.archive`
under one format name per kind; :func:`load_model` reads either.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from calopt import registry
from calopt.backends import backend_of, get_backend, is_sparse, to_numpy
from calopt.errors import DataError, ModelFileError, ParameterError, one_line
from calopt.io.labels import encode_among, encode_like, json_label, label_text
from calopt.measures import confusion_counts, safe_divide
from calopt.models.archive import load_archive, pack_rows, read_format, save_archive, saved_history, unpack_rows
from calopt.models.export import to_sklearn
from calopt.models.report import FitReport
from calopt.models.rule import gain_predictions, mixture_predictions, softmax

__all__ = ["LinearModel", "Model", "MulticlassModel", "linear_scores", "load_model"]

_NUMPY = get_backend("numpy")
#: The format version of a model file with packed arrays (:meth:`Model.save`): the newest this calopt reads.
PACKED_VERSION = 2


def linear_scores(X: Any, coef: np.ndarray, intercept: Any) -> Any:
    """``X @ coef + intercept`` on X's backend (NumPy for scipy.sparse), in X's floating dtype.

    ``coef`` is (d,) or (d, C) and ``intercept`` a number or (C,); a wrong number of
    features is a DataError.
    """
    if X.shape[1] != coef.shape[0]:
        raise DataError(f"X has {X.shape[1]} features, the model has {coef.shape[0]}")
    if is_sparse(X):
        return np.asarray(X @ coef + intercept)
    backend = backend_of(X)  # working dtype: X's floating dtype, else float64
    if not backend.xp.isdtype(X.dtype, "real floating"):
        X = backend.asarray(X)
    return X @ backend.asarray(coef) + backend.asarray(intercept)


@dataclass
class Model:
    """What every fitted calopt model has: weights, classes, how it was trained, its history.

    ``fit_report`` (:class:`~calopt.models.report.FitReport`) says how it was trained; the command
    line adds ``fit_report.data``, how the training file was read (``format``, ``zero_based``: the
    LIBSVM index base, and ``n_features``), so that test files are read the same way. Files
    without it (older ones, or models saved from Python) are read with each file's own base.

    ``history`` has one row per epoch; ``status`` is the training loop's (0 converged,
    1 the epoch budget, 2 stopped by a callback, −1 diverged) and ``message`` says it
    in words. ``fit_seconds`` (solver time) and the history's ``seconds`` stay in
    memory: files leave timings out so the same model gives the same bytes.
    """

    coef: np.ndarray
    intercept: Any
    classes: tuple[Any, ...]
    measure: str = "f1"
    algorithm: str = ""
    loss: str = ""
    scale: np.ndarray | None = None
    fit_report: FitReport = field(default_factory=FitReport)
    history: list[dict[str, float]] = field(default_factory=list)
    fit_seconds: float = 0.0
    status: int = 0
    message: str = ""
    version: str = ""

    #: The ``format`` of this kind's model files.
    FORMAT: ClassVar[str] = ""
    #: The format version of a file without packed arrays (:data:`PACKED_VERSION`: with them).
    FORMAT_VERSION: ClassVar[int] = 1

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[0])

    @property
    def options(self) -> Mapping[str, Any]:
        """Deprecated: a read-only view of :attr:`fit_report` as the dict it replaced
        (``fit_report.to_json()``, what the model file holds), kept for one release so that code
        reading ``model.options[...]`` keeps working; read the report's typed fields instead."""
        warnings.warn("model.options is deprecated: read the typed model.fit_report (a FitReport) instead",
                      DeprecationWarning, stacklevel=2)
        return MappingProxyType(self.fit_report.to_json())

    @property
    def positive(self) -> Any:
        """The positive class (a binary model's ``classes[1]``); None for one-vs-rest."""
        return None

    def decision_function(self, X: Any) -> Any:
        """Scores ``X @ coef + intercept`` on X's backend (NumPy for scipy.sparse); a DataFrame's
        columns are matched by name when the model has :attr:`feature_names`."""
        return linear_scores(self._by_name(X), self.coef, self.intercept)

    def _by_name(self, X: Any) -> Any:
        """A DataFrame's columns in the order of :attr:`feature_names` (any order given, as a CSV's);
        a missing or unknown column is a DataError naming it. Anything else is returned as it is."""
        names, columns = self.feature_names, getattr(X, "columns", None)
        if names is None or columns is None or not hasattr(X, "dtypes"):
            return X
        given = list(columns)
        missing = next((name for name in names if name not in given), None)
        unknown = next((name for name in given if name not in set(names)), None)
        if missing is not None or unknown is not None:
            problem = (f"no column {missing!r}, a feature of the model" if missing is not None else
                       f"column {unknown!r} is not a feature of the model")
            raise DataError(f"X: {one_line(problem)} (its features: {one_line(', '.join(names), 80)})")
        return X[names].to_numpy()

    @property
    def feature_names(self) -> list[str] | None:
        """The features' names, in the order of ``coef``, when the training data named them
        (a CSV header, a DataFrame's columns); None: the features are matched by position."""
        names = self.fit_report.feature_names
        return None if names is None else list(names)

    def score(self, X: Any, y: Any, measure: Any = None) -> float:
        """The measure (default: the one trained for) on (X, y); the macro average one-vs-rest."""
        raise NotImplementedError

    def describe(self) -> str:
        """What the model is, in a few words (the title of the CLI's tables)."""
        raise NotImplementedError

    def summary(self, X: Any, y: Any) -> dict[str, Any]:
        """The model's own measure on (X, y), as ``calopt train`` reports it."""
        raise NotImplementedError

    def report(self, X: Any, y: Any, measures: Any = None) -> dict[str, Any]:
        """Each measure (default: the model's) on (X, y): ``{"n_samples", "measures": [{"measure",
        "value", ...}]}`` with ``tpr``/``tnr`` (binary) or ``per_class``/``macro`` and the top-k
        accuracies (one-vs-rest) beside ``value``; what ``calopt evaluate`` prints."""
        raise NotImplementedError

    # -- files ------------------------------------------------------------------------
    def _metadata(self) -> dict[str, Any]:
        return {
            "format": self.FORMAT,
            "format_version": self.FORMAT_VERSION,
            "calopt_version": self.version,
            "classes": [json_label(c) for c in self.classes],
            "measure": self.measure,
            "algorithm": self.algorithm,
            "loss": self.loss,
            "options": self.fit_report.to_json(),
            "history": saved_history(self.history),
            "status": self.status,
            "message": self.message,
        }

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = pack_rows("coef", self.coef, 0.0)
        if self.scale is not None:
            arrays.update(pack_rows("scale", self.scale, 1.0))
        return arrays

    def save(self, path: str | os.PathLike) -> None:
        """Write the model to ``path`` atomically (an ``.npz`` archive, no pickle).

        A model whose coefficients are mostly 0 (trained on few of many columns) keeps only the
        rows that are not (:func:`~calopt.models.archive.pack_rows`): format version 2, which
        calopt before it refuses as newer; every other model file is version 1, as before."""
        arrays, metadata = self._arrays(), self._metadata()
        if any(key.endswith(".rows") for key in arrays):
            metadata["format_version"] = PACKED_VERSION
        save_archive(path, arrays, metadata)

    @classmethod
    def _from_file(cls, arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> Model:
        raise NotImplementedError

    @classmethod
    def load(cls, path: str | os.PathLike) -> Model:
        """Read a model written by :meth:`save`; any problem is a one-line ModelFileError.

        After the checksum, every field is checked for its type and shape (:meth:`_common`,
        :meth:`_from_file`): a file whose checksum was forged still cannot hand
        ``predict`` a matrix where a vector belongs, or arrays where labels belong.
        """
        path = Path(path)
        arrays, metadata = load_archive(path, format=cls.FORMAT, version=PACKED_VERSION)
        try:
            return cls._from_file(arrays, metadata)
        except ModelFileError as exc:
            raise ModelFileError(f"{path}: {exc}") from None

    @staticmethod
    def _common(arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> dict[str, Any]:
        """The fields every model file holds, checked, as constructor arguments."""
        missing = [key for key in ("classes", "measure", "algorithm", "loss", "options", "history", "status",
                                   "message", "calopt_version") if key not in metadata]
        coef, scale = unpack_rows(arrays, "coef", 0.0), unpack_rows(arrays, "scale", 1.0)
        if missing or coef is None:
            raise ModelFileError(f"incomplete model file (no {(missing or ['coef array'])[0]})")
        coef = _numbers(coef, "coef")
        if scale is not None and (_numbers(scale, "scale").shape != coef.shape[:1]):
            raise ModelFileError(f"scale has shape {scale.shape}, coef {coef.shape}")
        classes = metadata["classes"]
        if not (isinstance(classes, list) and all(_is_label(c) for c in classes) and len(set(classes)) == len(classes)):
            raise ModelFileError(f"classes must be a list of distinct labels (strings or numbers), "
                                 f"not {_shown(classes)}")
        for key in ("measure", "algorithm", "loss", "message", "calopt_version"):
            _check(isinstance(metadata[key], str), f"{key} must be a string, not {_shown(metadata[key])}")
        report = FitReport.from_json(metadata["options"], width=int(coef.shape[0]))
        history = metadata["history"]
        _check(isinstance(history, list) and all(isinstance(row, dict) for row in history),
               f"history must be a list of objects, not {_shown(history)}")
        status = metadata["status"]
        _check(isinstance(status, int) and not isinstance(status, bool),
               f"status must be an integer, not {_shown(status)}")
        fit_seconds = metadata.get("fit_seconds", 0.0)  # files of before 0.1 only
        _check(_is_number(fit_seconds), f"fit_seconds must be a number, not {_shown(fit_seconds)}")
        return dict(
            coef=coef, classes=tuple(classes), measure=metadata["measure"], algorithm=metadata["algorithm"],
            loss=metadata["loss"], scale=scale, fit_report=report, history=history,
            fit_seconds=float(fit_seconds), status=status, message=metadata["message"],
            version=metadata["calopt_version"],
        )


def _check(condition: bool, problem: str) -> None:
    if not condition:
        raise ModelFileError(problem)


def _is_number(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_label(value: Any) -> bool:
    """A class label a file may hold: a string, a bool or a finite number."""
    return isinstance(value, (str, bool)) or _is_number(value)


def _numbers(array: np.ndarray, name: str) -> np.ndarray:
    """``array`` as finite float64; a ModelFileError for any other kind of array."""
    _check(array.dtype.kind in "biuf", f"{name} holds {array.dtype} values, not numbers")
    array = np.asarray(array, dtype=np.float64)
    _check(bool(np.isfinite(array).all()), f"{name} holds values that are not finite")
    return array


def _shown(value: Any, limit: int = 40) -> str:
    """A value from a file, for a message: its JSON, cut when long."""
    return one_line(json.dumps(value, default=str), limit)


@dataclass
class LinearModel(Model):
    """A binary linear classifier ``sign(X @ coef + intercept)`` trained for a measure.

    ``classes`` are the (negative, positive) labels; ``intercept`` includes the tuned
    decision ``threshold`` (kept for reference).
    """

    classes: tuple[Any, Any] = (-1.0, 1.0)
    measure: str = "fbeta"
    threshold: float = 0.0

    FORMAT: ClassVar[str] = "calopt-linear-model"

    # -- prediction ---------------------------------------------------------------
    def predict_signs(self, X: Any) -> Any:
        """Predictions in {−1, +1} on X's backend."""
        scores = self.decision_function(X)
        xp = backend_of(scores).xp
        return xp.where(scores > 0, xp.ones_like(scores), -xp.ones_like(scores))

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels (the original two values), as a host NumPy array."""
        signs = to_numpy(self.predict_signs(X))
        return np.asarray(self.classes)[(signs > 0).astype(np.intp)]

    def score(self, X: Any, y: Any, measure: Any = None) -> float:
        """The measure (default: the one trained for) of the predictions on (X, y)."""
        return self.evaluate(X, y, [measure or self.measure])[0]["value"]

    def evaluate(self, X: Any, y: Any, measures: Any = None) -> list[dict[str, Any]]:
        """For each measure (default: the model's), its value, TPR and TNR on (X, y)."""
        y_pm = encode_like(to_numpy(y), self.classes, source="labels")
        signs = to_numpy(self.predict_signs(X))
        xp = _NUMPY.xp
        tp, fp, tn, fn = confusion_counts(np.asarray(y_pm), signs, xp=xp)
        tpr, tnr = float(safe_divide(tp, tp + fn, xp=xp)), float(safe_divide(tn, tn + fp, xp=xp))
        return [
            {"measure": m.spec, "value": float(m.from_counts(tp, fp, tn, fn, xp=xp)), "tpr": tpr, "tnr": tnr}
            for m in (registry.get_measure(spec) for spec in (measures or [self.measure]))
        ]

    def summary(self, X: Any, y: Any) -> dict[str, Any]:
        """The model's own measure on (X, y): ``value``, ``tpr``, ``tnr``."""
        result = self.evaluate(X, y)[0]
        return {key: result[key] for key in ("value", "tpr", "tnr")}

    def report(self, X: Any, y: Any, measures: Any = None) -> dict[str, Any]:
        return {"n_samples": int(X.shape[0]), "measures": self.evaluate(X, y, measures)}

    def describe(self) -> str:
        return f"{self.measure} · {self.algorithm}"

    def to_sklearn(self) -> Any:
        """A fitted scikit-learn ``LinearSVC`` that predicts exactly as this model (skops, ONNX converters
        take it); ``coef_`` (1, d), ``intercept_`` with the threshold folded in, ``classes_``."""
        return to_sklearn(self.coef, self.intercept, self.classes)

    # -- files --------------------------------------------------------------------
    @property
    def positive(self) -> Any:
        """The positive class: the one TPR, recall and precision are about (``classes[1]``)."""
        return self.classes[1]

    def _metadata(self) -> dict[str, Any]:
        metadata = super()._metadata()
        return {**dict(list(metadata.items())[:4]), "positive": json_label(self.positive),
                "intercept": float(self.intercept), "threshold": float(self.threshold),
                **dict(list(metadata.items())[4:])}

    @classmethod
    def _from_file(cls, arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> LinearModel:
        common = cls._common(arrays, metadata)
        _check(common["coef"].ndim == 1,
               f"coef of a binary model must be a vector, not of shape {common['coef'].shape}")
        _check(len(common["classes"]) == 2, f"a binary model has 2 classes, not {len(common['classes'])}")
        for key in ("intercept", "threshold"):
            _check(_is_number(metadata.get(key)), f"{key} must be a finite number, not {_shown(metadata.get(key))}")
        positive = metadata.get("positive", common["classes"][1])  # files of before issue 23: classes[1]
        _check(type(positive) is type(common["classes"][1]) and positive == common["classes"][1],
               f"positive must be the second of the classes {_shown(list(common['classes']))}, "
               f"not {_shown(positive)}")
        return cls(**common, intercept=float(metadata["intercept"]), threshold=float(metadata["threshold"]))


@dataclass
class MulticlassModel(Model):
    """A linear classifier of C classes: class ``argmax_c (X @ coef + intercept)[:, c]``, or the
    decision rule chosen for its measure.

    ``coef`` is (d, C) and ``intercept`` (C,); ``classes`` are the original labels, in
    the order of the columns; ``measure`` is the measure trained for (its K-class value is
    :meth:`evaluate`'s ``value``; one with no K-class form is reported per class, one-vs-rest).
    A multinomial model trained for a K-class measure other than accuracy predicts by the
    gain-matrix rule (:mod:`calopt.models.rule`) on the softmax of its scores: ``gains``
    (C, C), or the randomised mixture ``mixture_weights`` (T,) and ``mixture_gains``
    (T, C, C), drawn with ``fit_report.seed``; without either, the argmax.
    ``fit_report.decision`` is the rule's account.
    """

    gains: np.ndarray | None = None
    mixture_weights: np.ndarray | None = None
    mixture_gains: np.ndarray | None = None

    FORMAT: ClassVar[str] = "calopt-multiclass-model"
    #: Version 2 files hold a decision rule; a model without one is written as version 1 (the
    #: same bytes as before), so that older calopt reads it and refuses only what it would misread.
    FORMAT_VERSION: ClassVar[int] = 2

    @property
    def has_rule(self) -> bool:
        """Whether the model predicts by a rule chosen for its measure rather than the argmax."""
        return self.gains is not None or self.mixture_weights is not None

    @property
    def n_classes(self) -> int:
        return int(self.coef.shape[1])

    # -- prediction ---------------------------------------------------------------------
    def predict_codes(self, X: Any, scores: np.ndarray | None = None) -> np.ndarray:
        """The predicted class codes 0..C−1 (host), by the model's rule (the argmax without one);
        ``scores`` are X's host scores when already computed."""
        if scores is None:
            scores = np.asarray(to_numpy(self.decision_function(X)), dtype=np.float64)
        if self.mixture_weights is not None:
            return mixture_predictions(softmax(scores), self.mixture_weights, self.mixture_gains,
                                       self.fit_report.seed or 0)
        if self.gains is not None:
            return gain_predictions(softmax(scores), self.gains)
        return np.argmax(scores, axis=1)

    def predict(self, X: Any) -> np.ndarray:
        """The predicted classes (original labels) as a host NumPy array."""
        return np.asarray(self.classes)[self.predict_codes(X)]

    def _ranked(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Codes of y, host scores (n, C), and how many classes score above each row's own."""
        codes = encode_among(to_numpy(y), self.classes, source="labels")
        scores = np.asarray(to_numpy(self.decision_function(X)), dtype=np.float64)
        if scores.shape[0] != codes.size:
            raise DataError(f"X has {scores.shape[0]} rows but y has {codes.size} labels")
        own = scores[np.arange(codes.size), codes]
        return codes, scores, np.sum(scores > own[:, None], axis=1)

    def top_k_accuracy(self, X: Any, y: Any, k: int = 1) -> float:
        """Fraction of rows whose class is among the k best-scored (ties count in its favour)."""
        if not (isinstance(k, int) and k >= 1):
            raise ParameterError(f"k must be a whole number ≥ 1, got {k!r}")
        _, _, above = self._ranked(X, y)
        return float(np.mean(above < k)) if above.size else 0.0

    def score(self, X: Any, y: Any, measure: Any = None) -> float:
        """The measure (default: the model's) of the predictions: its K-class value (G-mean of the
        per-class recalls, macro F1, ...), or for a measure without one its one-vs-rest macro average."""
        return self.evaluate(X, y, [measure or self.measure])["measures"][0]["value"]

    def evaluate(self, X: Any, y: Any, measures: Any = None, *, top: tuple[int, ...] = (1, 5)) -> dict[str, Any]:
        """Top-k accuracies of the scores; the predictions' accuracy, per-class recall and precision;
        for each measure its value, its per-class one-vs-rest values and their macro average.

        ``value`` is the measure of the C × C confusion matrix of the predictions (by the
        model's rule) for C ≥ 3 and a measure with a K-class form
        (:meth:`~calopt.measures.Measure.from_confusion`), else ``macro``. A class's
        one-vs-rest value is the measure of "predicted c" against "is c" over all rows;
        per-class entries are keyed by :func:`~calopt.io.labels.label_text` of the class.
        Returns ``{"n_samples", "top1", "top5", ..., "accuracy", "recall", "precision",
        "measures": [{"measure", "value", "per_class", "macro"}]}``.
        """
        codes, scores, above = self._ranked(X, y)
        result: dict[str, Any] = {"n_samples": int(codes.size)}
        for k in top:
            result[f"top{k}"] = float(np.mean(above < k)) if codes.size else 0.0
        C = self.n_classes
        predicted = self.predict_codes(X, scores)
        matrix = np.bincount(codes * C + predicted, minlength=C * C).reshape(C, C).astype(np.float64)
        tp = np.diag(matrix)
        fn, fp = matrix.sum(axis=1) - tp, matrix.sum(axis=0) - tp
        tn = codes.size - tp - fp - fn
        labels = [label_text(c) for c in self.classes]
        xp = _NUMPY.xp
        result["accuracy"] = float(np.sum(tp) / codes.size) if codes.size else 0.0
        result["recall"] = dict(zip(labels, map(float, safe_divide(tp, tp + fn, xp=xp))))
        result["precision"] = dict(zip(labels, map(float, safe_divide(tp, tp + fp, xp=xp))))
        result["measures"] = []
        for measure in (registry.get_measure(spec) for spec in (measures or [self.measure])):
            values = np.asarray(measure.from_counts(tp, fp, tn, fn, xp=xp), dtype=np.float64)
            macro = float(np.mean(values))
            kclass = C >= 3 and measure.multiclass is not None
            result["measures"].append({
                "measure": measure.spec,
                "value": float(measure.from_confusion(matrix, xp=xp)) if kclass else macro,
                "per_class": dict(zip(labels, map(float, values))),
                "macro": macro,
            })
        return result

    def summary(self, X: Any, y: Any) -> dict[str, Any]:
        """The model's measure (``value``: its K-class value), top-1 and top-5 accuracy of the scores,
        the measure per class and macro, and each class's recall and precision."""
        result = self.evaluate(X, y)
        first = result["measures"][0]
        return {"value": first["value"], "top1": result["top1"], "top5": result["top5"],
                "measure": first["measure"], "per_class": first["per_class"], "macro": first["macro"],
                "recall": result["recall"], "precision": result["precision"]}

    def report(self, X: Any, y: Any, measures: Any = None) -> dict[str, Any]:
        return self.evaluate(X, y, measures)

    def describe(self) -> str:
        if self.has_rule:
            kind = "randomised rule" if self.mixture_weights is not None else "rule"
            return f"{self.measure} · {self.algorithm}, {kind} for {self.n_classes} classes"
        return f"{self.algorithm} · one-vs-rest, {self.n_classes} classes"

    def to_sklearn(self) -> Any:
        """A fitted scikit-learn ``LinearSVC`` (one-vs-rest: the argmax) that predicts exactly as this
        model; ``coef_`` (C, d), ``intercept_`` (C,), ``classes_`` in column order. A model with a
        decision rule is refused: the argmax is not what it predicts."""
        if self.has_rule:
            raise ParameterError("to_sklearn: this model predicts by a decision rule on its probabilities "
                                 "(fit_report.decision), which a LinearSVC cannot hold")
        return to_sklearn(self.coef, self.intercept, self.classes)

    # -- files --------------------------------------------------------------------------
    def _metadata(self) -> dict[str, Any]:
        return {**super()._metadata(), "format_version": 2 if self.has_rule else 1}

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = super()._arrays()  # the coefficients first (packed or not), then the intercept (the files' order)
        coef = {key: arrays.pop(key) for key in list(arrays) if key.split(".")[0] == "coef"}
        rule = {name: np.asarray(value, dtype=np.float64) for name, value in
                (("gains", self.gains), ("mixture_weights", self.mixture_weights),
                 ("mixture_gains", self.mixture_gains)) if value is not None}
        return {**coef, "intercept": np.asarray(self.intercept, dtype=np.float64), **arrays, **rule}

    @classmethod
    def _from_file(cls, arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> MulticlassModel:
        if "intercept" not in arrays:
            raise ModelFileError("incomplete model file (no intercept array)")
        rule = {name: _numbers(arrays[name], name) for name in ("gains", "mixture_weights", "mixture_gains")
                if name in arrays}
        model = cls(**cls._common(arrays, metadata), intercept=_numbers(arrays["intercept"], "intercept"), **rule)
        C = model.n_classes if model.coef.ndim == 2 else -1
        if model.coef.ndim != 2 or model.intercept.shape != (C,) or len(model.classes) != C:
            raise ModelFileError(f"inconsistent shapes (coef {model.coef.shape}, "
                                 f"intercept {model.intercept.shape}, {len(model.classes)} classes)")
        _check(model.gains is None or model.gains.shape == (C, C),
               f"gains has shape {None if model.gains is None else model.gains.shape}, not ({C}, {C})")
        weights, gains = model.mixture_weights, model.mixture_gains
        _check((weights is None) == (gains is None), "a randomised rule needs mixture_weights and mixture_gains")
        _check(weights is None or (weights.ndim == 1 and weights.size >= 1 and bool(np.all(weights >= 0))
                                   and weights.sum() > 0 and gains.shape == (weights.size, C, C)),
               "the mixture's weights must be (T,) non-negative numbers with gains of shape (T, C, C)")
        _check(model.gains is None or weights is None, "a model holds gains or a mixture, not both")
        return model


def load_model(path: str | os.PathLike) -> Model:
    """Read a model file of either kind: a LinearModel or a MulticlassModel.

    The kind comes from the ``format`` of the file's metadata; when that cannot be
    read, LinearModel.load says what is wrong with the file.
    """
    kind = read_format(path)
    return (MulticlassModel if kind == MulticlassModel.FORMAT else LinearModel).load(path)

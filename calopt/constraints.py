"""Rate constraints: ``"precision>=0.9"``, ``"fpr<=0.01"``, and the measure they constrain.

A rate is a ratio of confusion counts (TPR, TNR, FPR, FNR, precision, predicted-positive
rate, accuracy); a constraint bounds one from below or above. ``rate ≥ c`` with rate =
num/den is ``num − c·den ≥ 0``, linear in the counts, and the counts per row are linear in
(TPR, TNR) at the positive rate p (TP/n = p·TPR, FN/n = p·(1−TPR), TN/n = (1−p)·TNR,
FP/n = (1−p)·(1−TNR)). So every constraint is ``u0 + u1·TPR + u2·TNR ≥ 0``
(:meth:`RateConstraint.linear`), which is what the constrained solver's dual variables
price (spec, "Rate constraints").

:class:`ConstrainedMeasure` is a measure subject to constraints, of family
``"constrained"``: its value on counts is the measure where every constraint holds and
``−1 − (total violation)`` where one does not, so the one threshold search
(:func:`~calopt.training.threshold.best_cut`) and the settings selection choose the best
threshold among the feasible ones, or the one closest to feasible when none is.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from typing import Any, ClassVar

from calopt.errors import ParameterError
from calopt.measures import Measure, confusion_counts, safe_divide

__all__ = ["CLASS_RATES", "RATES", "ClassConstrainedMeasure", "ClassRateConstraint", "ConstrainedMeasure",
           "RateConstraint", "RateObjective", "class_constrained", "constrain", "no_class_constraints", "parse_constraint",
           "held_out_unmet_message", "parse_constraints", "unmet_message"]

Array = Any

#: Each rate as (numerator, denominator), coefficients of the counts (TP, FP, TN, FN).
RATES: dict[str, tuple[tuple[int, int, int, int], tuple[int, int, int, int]]] = {
    "tpr": ((1, 0, 0, 0), (1, 0, 0, 1)),
    "tnr": ((0, 0, 1, 0), (0, 1, 1, 0)),
    "fpr": ((0, 1, 0, 0), (0, 1, 1, 0)),
    "fnr": ((0, 0, 0, 1), (1, 0, 0, 1)),
    "precision": ((1, 0, 0, 0), (1, 1, 0, 0)),
    "predicted-positive-rate": ((1, 1, 0, 0), (1, 1, 1, 1)),
    "accuracy": ((1, 0, 1, 0), (1, 1, 1, 1)),
}
#: Other names of the rates.
ALIASES = {"recall": "tpr", "sensitivity": "tpr", "specificity": "tnr", "ppr": "predicted-positive-rate",
           "positive-rate": "predicted-positive-rate"}
_SPEC = re.compile(r"^\s*(?P<rate>[A-Za-z][A-Za-z0-9_ -]*?)\s*(?P<op>>=|<=|≥|≤|=>|=<|>|<|==|=)\s*(?P<bound>.*?)\s*$")


@dataclasses.dataclass(frozen=True)
class RateConstraint:
    """``rate ≥ bound`` (``lower``) or ``rate ≤ bound``; ``spec`` is the text as given."""

    spec: str
    rate: str
    lower: bool
    bound: float

    def value(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The rate from confusion counts (0 where its denominator is 0)."""
        numerator, denominator = RATES[self.rate]
        counts = (tp, fp, tn, fn)
        return safe_divide(sum(c * k for c, k in zip(numerator, counts) if c),
                           sum(c * k for c, k in zip(denominator, counts) if c), xp=xp)

    def violation(self, value: Array, *, xp: Any) -> Array:
        """How far ``value`` (of the rate) is on the wrong side of the bound (0 when it holds)."""
        gap = self.bound - value if self.lower else value - self.bound
        return xp.maximum(gap, xp.zeros_like(gap))

    def holds(self, value: float) -> bool:
        return value >= self.bound if self.lower else value <= self.bound

    def linear(self, p: float) -> tuple[float, float, float]:
        """(u0, u1, u2) with ``u0 + u1·TPR + u2·TNR ≥ 0`` ⇔ the constraint, at positive rate ``p``.

        From ``±(num − c·den) ≥ 0`` in counts per row; scaled so that max(|u1|, |u2|) = 1, which
        puts every constraint's dual step on one scale.
        """
        numerator, denominator = RATES[self.rate]
        tp, fp, tn, fn = (a - self.bound * b for a, b in zip(numerator, denominator))
        sign = 1.0 if self.lower else -1.0
        # tp·p·TPR + fn·p·(1 − TPR) + tn·(1−p)·TNR + fp·(1−p)·(1 − TNR)
        u0 = sign * (fn * p + fp * (1 - p))
        u1 = sign * (tp - fn) * p
        u2 = sign * (tn - fp) * (1 - p)
        scale = max(abs(u1), abs(u2))
        return (u0 / scale, u1 / scale, u2 / scale) if scale > 0 else (u0, u1, u2)

    def judge(self, y: Array, predictions: Array, *, xp: Any, weight: Array | None = None) -> dict[str, Any]:
        """The rate of ``predictions`` on rows the model did not train on, and whether it holds
        there: ``value``, ``satisfied`` (strictly), ``error`` (two standard errors of the rate as
        a share of the rows it counts, 2·√(r(1−r)/m): the rows' sampling error; None when it
        counts none) and ``within_error`` (holds, or misses the bound by at most ``error``).
        """
        counts = confusion_counts(y, predictions, xp=xp, dtype=y.dtype, weight=weight)
        value = float(self.value(*counts, xp=xp))
        rows = float(sum(c * k for c, k in zip(RATES[self.rate][1], counts) if c))
        error = 2 * math.sqrt(value * (1 - value) / rows) if rows > 0 else None
        miss = self.bound - value if self.lower else value - self.bound
        return {"value": value, "satisfied": self.holds(value), "error": error,
                "within_error": self.holds(value) or (error is not None and miss <= error)}


def parse_constraint(spec: Any) -> RateConstraint:
    """``"precision>=0.9"`` as a :class:`RateConstraint`; bad text is a one-line ParameterError."""
    if isinstance(spec, RateConstraint):
        return spec
    if not isinstance(spec, str):
        raise ParameterError(f"constraint {spec!r}: expected text like 'precision>=0.9'")
    per_class = _CLASS_SPEC.match(spec)
    if per_class is not None:
        return _class_constraint(spec, per_class)
    match = _SPEC.match(spec)
    if match is None:
        raise ParameterError(f"constraint {spec!r}: expected RATE>=BOUND or RATE<=BOUND, e.g. 'precision>=0.9'")
    name = match["rate"].strip().lower().replace("_", "-").replace(" ", "-")
    op, bound_text = match["op"], match["bound"]
    rate = ALIASES.get(name, name)
    if rate not in RATES:
        known = sorted([*RATES, *ALIASES])
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (rates: {', '.join(sorted(RATES))})"
        raise ParameterError(f"constraint {spec!r}: unknown rate {name!r}{hint}")
    if op in (">", "<", "=", "=="):
        raise ParameterError(f"constraint {spec!r}: the operator must be >= or <=, not {op!r}")
    try:
        bound = float(bound_text)
    except ValueError:
        raise ParameterError(f"constraint {spec!r}: the bound {bound_text!r} is not a number") from None
    if not (math.isfinite(bound) and 0.0 <= bound <= 1.0):
        raise ParameterError(f"constraint {spec!r}: a rate lies in [0, 1]; the bound {bound_text} is outside")
    return RateConstraint(spec, rate, op in (">=", "≥", "=>"), bound)


#: ``RATE[CLASS]>=BOUND``: a rate of one class against the rest (K-class data).
_CLASS_SPEC = re.compile(r"^\s*(?P<rate>[^\[\]<>=]+)\[(?P<label>[^\]]*)\]\s*(?P<tail>.*)$")
#: The rates a per-class constraint bounds (a class's recall and precision against the rest).
CLASS_RATES = ("tpr", "precision")


@dataclasses.dataclass(frozen=True)
class ClassRateConstraint(RateConstraint):
    """``rate[label] ≥ bound`` (or ≤): a rate of class ``label`` against the rest, for K-class data
    (the decision rule: :func:`class_constrained`). ``code`` is the class's position among the
    model's classes once resolved (None before)."""

    label: str = ""
    code: int | None = None

    def of_classes(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The rate of class ``code`` from per-class one-vs-rest counts ((..., K) arrays)."""
        return self.value(tp[..., self.code], fp[..., self.code], tn[..., self.code], fn[..., self.code], xp=xp)


def _class_constraint(spec: str, match: Any) -> ClassRateConstraint:
    label = match["label"].strip()
    plain_spec = f"{match['rate'].strip()}{match['tail']}"
    try:
        plain = parse_constraint(plain_spec)
    except ParameterError as error:
        raise ParameterError(str(error).replace(repr(plain_spec), repr(spec), 1)) from None
    if plain.rate not in CLASS_RATES:
        raise ParameterError(f"constraint {spec!r}: a class's constraint bounds its recall or precision, "
                             f"not {plain.rate!r}")
    if not label:
        raise ParameterError(f"constraint {spec!r}: name the class in the brackets, e.g. 'recall[fraud]>=0.8'")
    return ClassRateConstraint(spec, plain.rate, plain.lower, plain.bound, label)


def parse_constraints(specs: Any) -> tuple[RateConstraint, ...]:
    """A spec or a list of them (None: none) as constraints; the same spec twice is an error."""
    if specs is None:
        return ()
    if isinstance(specs, (str, RateConstraint)):
        specs = [specs]
    constraints = tuple(parse_constraint(spec) for spec in specs)
    seen = set()
    for constraint in constraints:
        key = (constraint.rate, constraint.lower, constraint.bound, getattr(constraint, "label", None))
        if key in seen:
            raise ParameterError(f"constraint {constraint.spec!r} is given twice")
        seen.add(key)
    return constraints


@dataclasses.dataclass(frozen=True)
class _Subject(Measure):
    """An ``objective`` measure and the ``constraints`` it is subject to (their spec and no params
    of its own): what :class:`ConstrainedMeasure` and :class:`ClassConstrainedMeasure` share."""

    family: ClassVar[str] = "constrained"
    objective: Measure = None
    constraints: tuple[RateConstraint, ...] = ()

    @property
    def spec(self) -> str:
        return f"{self.objective.spec} subject to {', '.join(c.spec for c in self.constraints)}"

    @property
    def params(self) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True)
class ConstrainedMeasure(_Subject):
    """A measure maximised subject to rate constraints (family ``"constrained"``).

    Its value on counts is the objective's where every constraint holds, else
    ``−1 − Σ violations``: below every feasible value (measures lie in [0, 1]) and greater
    the closer to feasible, so a threshold search keeps the best feasible threshold or,
    when none is feasible, the one closest to feasible.
    """

    name: ClassVar[str] = "constrained"

    def violation(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """The total violation of the constraints at these counts (0 where every one holds)."""
        violation = xp.zeros_like(tp)
        for constraint in self.constraints:
            violation = violation + constraint.violation(constraint.value(tp, fp, tn, fn, xp=xp), xp=xp)
        return violation

    def feasible(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        """Where every constraint holds at these counts (a boolean array)."""
        return self.violation(tp, fp, tn, fn, xp=xp) <= 0

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        value = self.objective.from_counts(tp, fp, tn, fn, xp=xp)
        violation = self.violation(tp, fp, tn, fn, xp=xp)
        return xp.where(violation > 0, -1.0 - violation, value)

    def from_rates(self, tpr: Array, tnr: Array, p: float, *, xp: Any) -> Array:
        return self.from_counts(p * tpr, (1 - p) * (1 - tnr), (1 - p) * tnr, p * (1 - tpr), xp=xp)


@dataclasses.dataclass(frozen=True)
class ClassConstrainedMeasure(_Subject):
    """A K-class measure maximised subject to per-class rate constraints (:class:`ClassRateConstraint`,
    resolved to their classes): its value on per-class counts is the objective's where every
    constraint holds, else ``−1 − Σ violations`` (as :class:`ConstrainedMeasure`'s), so the
    decision rule's search keeps the best feasible rule, or the one closest to feasible when none is."""

    name: ClassVar[str] = "class-constrained"

    @property
    def multiclass(self) -> Any:  # type: ignore[override]
        return self.objective.multiclass

    def report(self, tp: Array, fp: Array, tn: Array, fn: Array) -> tuple[dict[str, Any], ...]:
        """Each constraint's rate at these per-class counts ((K,) NumPy arrays) and whether it holds."""
        import numpy as np

        values = [float(c.of_classes(tp, fp, tn, fn, xp=np)) for c in self.constraints]
        return tuple({"constraint": c.spec, "value": v, "satisfied": c.holds(v)}
                     for c, v in zip(self.constraints, values))

    def violation(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        violation = xp.zeros_like(tp[..., 0])
        for constraint in self.constraints:
            violation = violation + constraint.violation(constraint.of_classes(tp, fp, tn, fn, xp=xp), xp=xp)
        return violation

    def from_class_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        value = self.objective.from_class_counts(tp, fp, tn, fn, xp=xp)
        violation = self.violation(tp, fp, tn, fn, xp=xp)
        return xp.where(violation > 0, -1.0 - violation, value)

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        raise ParameterError("per-class rate constraints are for three or more classes")

    def from_rates(self, tpr: Array, tnr: Array, p: float, *, xp: Any) -> Array:
        raise ParameterError("per-class rate constraints are for three or more classes")


def no_class_constraints(measure: Measure) -> None:
    """A one-line ParameterError where ``measure`` (two classes) carries a per-class constraint:
    with two classes a class's recall is TPR or TNR, which the plain constraints name."""
    for constraint in getattr(measure, "constraints", ()):
        if isinstance(constraint, ClassRateConstraint):
            raise ParameterError(f"constraint {constraint.spec!r}: a class's constraint (RATE[CLASS]) is for three or "
                                 f"more classes; with two, bound tpr, tnr or precision of the positive class "
                                 f"(e.g. 'recall>={constraint.bound:g}')")


def class_constrained(measure: Measure, classes: Any) -> Measure:
    """``measure``'s objective subject to its per-class constraints (:class:`ClassRateConstraint`),
    each resolved to its class's position among ``classes`` (their text: ``label_text``);
    ``measure`` unchanged when it has none. A class not among them, or a constraint that names no
    class (K classes have no one positive class), is a one-line ParameterError."""
    from calopt.io.labels import label_text

    if not isinstance(measure, ConstrainedMeasure):
        return measure
    texts = [label_text(c) for c in classes]
    resolved = []
    for constraint in measure.constraints:
        if not isinstance(constraint, ClassRateConstraint):
            rate = "precision" if constraint.rate == "precision" else "recall"
            raise ParameterError(f"constraint {constraint.spec!r}: with {len(texts)} classes name the class, "
                                 f"e.g. '{rate}[{texts[-1]}]{'>=' if constraint.lower else '<='}{constraint.bound:g}' "
                                 f"(a class's recall or precision)")
        if constraint.label not in texts:
            raise ParameterError(f"constraint {constraint.spec!r}: no class {constraint.label!r} in the training "
                                 f"labels ({', '.join(texts[:10])}{', ...' if len(texts) > 10 else ''})")
        resolved.append(dataclasses.replace(constraint, code=texts.index(constraint.label)))
    return ClassConstrainedMeasure(objective=measure.objective, constraints=tuple(resolved))


def constrain(measure: Measure, constraints: Any) -> Measure:
    """``measure`` subject to ``constraints`` (specs or :class:`RateConstraint`); unchanged when there are none."""
    parsed = parse_constraints(constraints)
    if not parsed:
        return measure
    if isinstance(measure, ConstrainedMeasure):
        return dataclasses.replace(measure, constraints=measure.constraints + parsed)
    return ConstrainedMeasure(objective=measure, constraints=parsed)


@dataclasses.dataclass(frozen=True)
class RateObjective(Measure):
    """One constraint's rate as a measure, signed so that greater is better for the constraint
    (the rate for ``≥``, minus the rate for ``≤``): what a threshold search maximises to find
    the best value a model's scores can reach."""

    name: ClassVar[str] = "rate"
    constraint: RateConstraint = None

    @property
    def params(self) -> dict[str, Any]:
        return {}

    def from_counts(self, tp: Array, fp: Array, tn: Array, fn: Array, *, xp: Any) -> Array:
        value = self.constraint.value(tp, fp, tn, fn, xp=xp)
        return value if self.constraint.lower else -value

    def from_rates(self, tpr: Array, tnr: Array, p: float, *, xp: Any) -> Array:
        return self.from_counts(p * tpr, (1 - p) * (1 - tnr), (1 - p) * tnr, p * (1 - tpr), xp=xp)


def unmet_message(entry: dict[str, Any]) -> str:
    """The message for a constraint not met on the training data (an entry of the constraints report,
    with ``best``, the best value of its rate any threshold of the model reaches there, and
    ``jointly``, whether some threshold meets every constraint at once there)."""
    constraint = parse_constraint(entry["constraint"])
    side = "highest" if constraint.lower else "lowest"
    head = f"constraint {constraint.spec!r} is not met on the training data: {constraint.rate} {entry['train']:.4f}"
    if not constraint.holds(entry["best"]):
        return (f"{head}, and no threshold of this model meets it (the {side} reached is {entry['best']:.4f}): "
                f"relax it")
    if not entry["jointly"]:
        return (f"{head}; thresholds reach {entry['best']:.4f} alone, but none meets every constraint at once: "
                f"kept the threshold closest to feasible; relax one (a randomised mix of thresholds, which could reach "
                f"points between them, is not offered)")
    return (f"{head} at the threshold chosen on held-out rows (thresholds that meet it on the training data "
            f"exist: the {side} reached is {entry['best']:.4f})")


def held_out_unmet_message(entries: list[dict[str, Any]], rule: str) -> str:
    """The one line for a model none of whose thresholds meets every constraint on the held-out rows
    (``rule``: how they were held out), from the constraints report's ``validation`` values there."""
    missed = [f"{entry['constraint']} ({parse_constraint(entry['constraint']).rate} {entry['validation']:.4f})"
              for entry in entries if not entry.get("validation_satisfied", True)]
    return (f"no threshold meets every constraint on the held-out rows ({rule}): kept the one closest to feasible "
            f"there, which misses {', '.join(missed) or 'none alone'}")

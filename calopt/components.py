"""What every registered component (measure, loss, algorithm) has in common.

A component is a frozen dataclass with a ``name`` class attribute; its dataclass
fields are its parameters, each with a default. On the command line and in model
files a configured component is written as a *spec*: ``name`` or
``name:key=value,key=value`` (``fbeta:beta=2``, ``gower-legendre:sigma=0.3``).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar

from calopt.errors import ParameterError

__all__ = ["Component", "parse_spec", "normalize_name"]


def normalize_name(name: str) -> str:
    """Canonical form of a component name: lower case, ``-`` between words."""
    return name.strip().lower().replace("_", "-")


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``"fbeta:beta=2,x=1"`` into ``("fbeta", {"beta": "2", "x": "1"})``."""
    name, _, rest = spec.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ParameterError(f"bad parameter {item!r} in {spec!r}: expected key=value")
        key = key.strip().replace("-", "_")
        if key in params:
            raise ParameterError(f"parameter {key!r} is given twice in {spec!r}")
        params[key] = value.strip()
    if not name.strip():
        raise ParameterError(f"bad spec {spec!r}: no name before ':'")
    return normalize_name(name), params


def _convert(component: str, key: str, value: Any, default: Any, annotation: Any = "") -> Any:
    """Convert a parameter given as text to the type of its default.

    A parameter whose default is None takes ``none``, or a number: a whole number when
    the field is annotated ``int | None``, else a float.
    """
    if not isinstance(value, str) or isinstance(default, str):
        return value
    if default is None:
        if value.strip().lower() == "none":
            return None
        if str(annotation).replace(" ", "").split("|")[0] == "int":
            default = 0
    try:
        if isinstance(default, bool):
            lowered = value.lower()
            if lowered not in {"true", "false", "1", "0", "yes", "no"}:
                raise ValueError(value)
            return lowered in {"true", "1", "yes"}
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float) or default is None:
            return float(value)
    except ValueError:
        kind = type(default).__name__ if default is not None else "float"
        raise ParameterError(
            f"{component}: parameter {key}={value!r} is not a valid {kind}"
        ) from None
    return value


@dataclasses.dataclass(frozen=True)
class Component(abc.ABC):
    """Base of measures, losses and algorithms: named, parametrised, immutable.

    The methods a kind of component must provide are abstract in its base class, so the
    registry can refuse (and report) a plugin's class that leaves one out.
    """

    #: Public name (set by each subclass).
    name: ClassVar[str] = ""
    #: Family shown in listings: the measure family, the loss's smoothness, or the
    #: measure family an algorithm solves.
    family: ClassVar[str] = ""
    #: ``measure``, ``loss`` or ``algorithm`` (set by the three base classes).
    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self.check_params()

    def check_params(self) -> None:
        """Raise :class:`ParameterError` for invalid parameter values (override)."""

    def require(self, condition: bool, message: str) -> None:
        """Raise a :class:`ParameterError` prefixed with this component's name."""
        if not condition:
            raise ParameterError(f"{self.kind} {self.name!r}: {message}")

    def require_positive(self, *names: str, at_most: float | None = None) -> None:
        """Each named parameter must be a finite number > 0 (and ≤ ``at_most`` when given: a
        bound under which the component's arithmetic cannot overflow)."""
        for key in names:
            value = getattr(self, key)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
            if at_most is None:
                self.require(ok, f"{key} must be a finite number > 0, got {value!r}")
            else:
                self.require(ok and value <= at_most, f"{key} must be a number in (0, {at_most:g}], got {value!r}")

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        """The parameters and their defaults, in declaration order."""
        return {f.name: f.default for f in dataclasses.fields(cls) if f.init}

    @classmethod
    def summary(cls) -> str:
        """The first line of the class docstring."""
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0].strip() if doc else ""

    @classmethod
    def from_params(cls, params: dict[str, Any], *, label: str | None = None) -> Component:
        """Instantiate from parameters given as text or values, converting and checking them."""
        label = label or f"{cls.kind} {cls.name!r}"
        defaults = cls.param_defaults()
        unknown = sorted(set(params) - set(defaults))
        if unknown:
            have = ", ".join(defaults) or "none"
            raise ParameterError(
                f"{label} has no parameter {unknown[0]!r} (parameters: {have})"
            )
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        converted = {k: _convert(label, k, v, defaults[k], types[k]) for k, v in params.items()}
        try:
            return cls(**converted)
        except ParameterError:
            raise
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"{label}: {exc}") from None

    @property
    def params(self) -> dict[str, Any]:
        """This instance's parameter values."""
        return {key: getattr(self, key) for key in self.param_defaults()}

    @property
    def spec(self) -> str:
        """The spec that recreates this instance (``fbeta:beta=2.0``)."""
        changed = {k: v for k, v in self.params.items() if v != self.param_defaults()[k]}
        if not changed:
            return self.name
        return self.name + ":" + ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                                          for k, v in changed.items())

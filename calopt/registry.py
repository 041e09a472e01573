"""The plugin registry: loads the ``calopt`` entry points, resolves component names and defaults.

Plugins are imported once, lazily, from the ``calopt`` entry-point group. calopt's own
built-ins (the entry points of the ``calopt`` distribution) always load;
``CALOPT_LOAD_PLUGINS`` (comma-separated entry-point or package names; empty for none)
restricts which third-party plugins load, the escape hatch when a broken plugin gets in
the way. A plugin that fails to import (whatever it raises, ``sys.exit()`` included) is
reported in :data:`load_failures` (and as a warning) and skipped, and so is a component
that does not implement its interface (an abstract method left undefined).

Names belong to the plugins that register them. When two plugins register the same name
(or alias, or default), that is a warning when plugins load and an error naming both
packages only when the name is looked up; every other name keeps working. The tables are
rebuilt when the set of registered plugins changes, so plugins registered at run time
(tests, notebooks) take effect at once.

Defaults are declared by plugins too (:func:`calopt.hookspecs.register_default_algorithms`,
:func:`calopt.hookspecs.register_default_losses`): the core names no plugin.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import inspect
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from calopt import hookspecs
from calopt.algorithms import Algorithm
from calopt.components import Component, normalize_name, parse_spec
from calopt.errors import RegistryError, UnknownNameError
from calopt.losses import Loss
from calopt.measures import Measure

__all__ = [
    "BUILTIN_DISTRIBUTION",
    "TASKS",
    "Entry",
    "PluginLoadWarning",
    "compared_algorithms",
    "default_algorithm",
    "default_loss",
    "entries",
    "get",
    "get_algorithm",
    "get_loss",
    "get_measure",
    "list_algorithms",
    "list_entries",
    "list_losses",
    "list_measures",
    "load_failures",
    "load_plugins",
    "plugin_manager",
]

ENTRY_POINT_GROUP = "calopt"
#: The distribution whose entry points are calopt's built-ins (loaded whatever CALOPT_LOAD_PLUGINS says).
BUILTIN_DISTRIBUTION = "calopt"
#: The kinds of training problem a default algorithm is declared for; ``"direct"`` is the
#: measure's own solver (one that optimises the measure itself, for ``algorithm="auto"``,
#: ``calopt compare`` and ``partial_fit``), beside the ``"binary"`` default.
TASKS = ("binary", "direct", "multiclass", "aggregate")
_HOOKS = {
    "measure": "register_measures",
    "loss": "register_losses",
    "algorithm": "register_algorithms",
}
_BASES = {"measure": Measure, "loss": Loss, "algorithm": Algorithm}
#: How CALOPT_LOAD_PLUGINS is mentioned where a plugin is skipped.
_EXCLUDE_HINT = "CALOPT_LOAD_PLUGINS lists the third-party plugins to load"

plugin_manager = pluggy.PluginManager("calopt")
plugin_manager.add_hookspecs(hookspecs)
#: Which package provides each plugin registered from an entry point.
_distributions: dict[str, str] = {}
#: One line per plugin that could not be imported, failed in a hook, registered something
#: unusable, or claimed a name another plugin has.
load_failures: list[str] = []
_loaded = False


class PluginLoadWarning(UserWarning):
    """A plugin failed to import or to register, or two plugins claim one name."""


def _report(message: str) -> None:
    if message not in load_failures:
        load_failures.append(message)
        warnings.warn(message, PluginLoadWarning, stacklevel=3)


def load_plugins() -> None:
    """Import and register every plugin of the ``calopt`` entry-point group (once).

    Then builds the name tables, so that a duplicate name or an unusable component is
    reported as soon as plugins load.
    """
    global _loaded
    if _loaded:
        return
    _loaded = True
    wanted = os.environ.get("CALOPT_LOAD_PLUGINS")
    allowed = None if wanted is None else {w.strip() for w in wanted.split(",") if w.strip()}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "unknown"
        builtin = normalize_name(dist) == BUILTIN_DISTRIBUTION
        if not builtin and allowed is not None and ep.name not in allowed and dist not in allowed:
            continue
        plugin_name = f"{dist}:{ep.name}"
        if plugin_manager.has_plugin(plugin_name):
            continue
        try:
            plugin = ep.load()
            plugin_manager.register(plugin, name=plugin_name)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a broken plugin (even sys.exit) must not break calopt
            _report(
                f"plugin {ep.name!r} from package {dist!r} failed to load "
                f"({type(exc).__name__}: {exc}); skipped ({_EXCLUDE_HINT})"
            )
            continue
        _distributions[plugin_name] = dist
    _tables()


@dataclass(frozen=True)
class Entry:
    """One registered component: its class, the package that provides it, its aliases."""

    kind: str
    name: str
    component: type[Component]
    plugin: str
    aliases: tuple[str, ...] = ()

    def create(self, params: dict[str, Any] | None = None) -> Any:
        return self.component.from_params(params or {}, label=f"{self.kind} {self.name!r}")

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description (what ``calopt list-* --json`` prints)."""
        info: dict[str, Any] = {
            "name": self.name,
            "family": self.component.family,
            "params": self.component.param_defaults(),
            "plugin": self.plugin,
            "aliases": list(self.aliases),
            "summary": self.component.summary(),
        }
        info.update(getattr(self.component, "properties", lambda: {})())
        return info


@dataclass(frozen=True)
class _Claims:
    """What plugins registered under one key: the first claim, and every claimant."""

    value: Any
    plugins: tuple[str, ...]

    def get(self, what: str) -> Any:
        if len(self.plugins) > 1:
            raise RegistryError(f"{what} is registered by {_both(*self.plugins[:2])}; "
                                f"uninstall one, or leave one out ({_EXCLUDE_HINT})")
        return self.value


def _both(first: str, second: str) -> str:
    return f"both {first!r} and {second!r}" if first != second else f"{first!r} twice"


@dataclass(frozen=True)
class _Tables:
    components: dict[str, dict[str, _Claims]]  #: kind → name or alias → claims of entries
    entries: dict[str, list[Entry]]  #: kind → every registered entry, in registration order
    algorithms: dict[tuple[str, str], _Claims]  #: (task, family) → claims of algorithm specs
    losses: dict[str, _Claims]  #: algorithm name → claims of loss specs


_cache: tuple[tuple[Any, ...], _Tables] | None = None


def _plugin_label(impl: Any) -> str:
    return _distributions.get(impl.plugin_name, impl.plugin_name)


def _abstract_methods(component: type) -> list[str]:
    return sorted(getattr(component, "__abstractmethods__", ())) if inspect.isabstract(component) else []


def _claim(table: dict[Any, _Claims], key: Any, value: Any, plugin: str, what: str) -> None:
    if key not in table:
        table[key] = _Claims(value, (plugin,))
        return
    claims = table[key]
    if claims.value == value:  # the same thing again (an alias of itself): nothing to choose
        return
    table[key] = dataclasses.replace(claims, plugins=(*claims.plugins, plugin))
    _report(f"{what} is registered by {_both(claims.plugins[0], plugin)}; "
            f"looking it up is an error until one is removed")


def _call_hook(name: str, register: Any) -> None:
    """Call every implementation of hook ``name`` with ``register`` bound to its plugin's name."""
    for impl in getattr(plugin_manager.hook, name).get_hookimpls():  # registration order
        provider = _plugin_label(impl)
        try:
            impl.function(**{arg: functools.partial(register, provider) for arg in impl.argnames})
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - one broken plugin must not break the others
            _report(f"plugin {provider!r} failed in {name} ({type(exc).__name__}: {exc}); skipped "
                    f"({_EXCLUDE_HINT})")


def _build() -> _Tables:
    components: dict[str, dict[str, _Claims]] = {kind: {} for kind in _HOOKS}
    listed: dict[str, list[Entry]] = {kind: [] for kind in _HOOKS}
    tracing = bool(os.environ.get("CALOPT_TRACE_PLUGINS"))
    for kind, hook in _HOOKS.items():
        def register(provider: str, component: Any, *, aliases: Sequence[str] = (), _kind: str = kind) -> None:
            base = _BASES[_kind]
            if not (isinstance(component, type) and issubclass(component, base)) or not component.name:
                _report(f"plugin {provider!r} registered {component!r} as a {_kind}, but it is not a named "
                        f"{base.__module__}.{base.__qualname__} subclass; skipped ({_EXCLUDE_HINT})")
                return
            missing = _abstract_methods(component)
            if missing:
                _report(f"plugin {provider!r} registered {_kind} {component.name!r} without "
                        f"{', '.join(missing)}; skipped ({_EXCLUDE_HINT})")
                return
            names = [normalize_name(component.name), *map(normalize_name, aliases)]
            entry = Entry(_kind, names[0], component, provider, tuple(names[1:]))
            listed[_kind].append(entry)
            for name in names:
                _claim(components[_kind], name, entry, provider, f"{_kind} {name!r}")
            if tracing:
                print(f"calopt: trace: {provider} registered {_kind} {names[0]!r} "
                      f"({component.__module__}.{component.__qualname__})", file=sys.stderr)

        _call_hook(hook, register)

    algorithms: dict[tuple[str, str], _Claims] = {}

    def register_algorithm(provider: str, spec: str, *, task: str = "binary", family: str = "any") -> None:
        if task not in TASKS:
            raise RegistryError(f"task must be one of {', '.join(TASKS)}, not {task!r}")
        _claim(algorithms, (task, family), str(spec), provider, _default_claim(task, family))

    losses: dict[str, _Claims] = {}

    def register_loss(provider: str, spec: str, *, algorithm: str) -> None:
        key = normalize_name(algorithm)
        _claim(losses, key, str(spec), provider, f"the default loss of algorithm {key!r}")

    _call_hook("register_default_algorithms", register_algorithm)
    _call_hook("register_default_losses", register_loss)
    return _Tables(components, listed, algorithms, losses)


def _tables() -> _Tables:
    """The tables for the plugins registered now (rebuilt when that set changes)."""
    global _cache
    load_plugins()
    key = tuple(sorted((name, id(plugin)) for name, plugin in plugin_manager.list_name_plugin()))
    if _cache is None or _cache[0] != key:
        _cache = (key, _build())
    return _cache[1]


def entries(kind: str) -> dict[str, Entry]:
    """Map every name and alias of ``kind`` (measure, loss, algorithm) claimed by one plugin to its entry."""
    return {name: claims.value for name, claims in _tables().components[kind].items()
            if len(claims.plugins) == 1}


def list_entries(kind: str) -> list[Entry]:
    """Every registered component of ``kind`` (two, when two plugins claim one name), sorted by name."""
    return sorted(_tables().entries[kind], key=lambda entry: entry.name)


def get(kind: str, spec: str | Component, /, **params: Any) -> Any:
    """Instantiate the component named by ``spec`` (``"fbeta:beta=2"``), or pass one through.

    Keyword ``params`` override those in the spec. Raises
    :class:`~calopt.errors.UnknownNameError` (with suggestions) for an unknown name,
    :class:`~calopt.errors.RegistryError` for a name two plugins claim, and
    :class:`~calopt.errors.ParameterError` for unknown or invalid parameters.
    """
    if isinstance(spec, Component):
        if spec.kind != kind:
            raise RegistryError(f"expected a {kind}, got the {spec.kind} {spec.name!r}")
        return spec
    name, spec_params = parse_spec(spec)
    table = _tables().components[kind]
    if name not in table:
        raise UnknownNameError(kind, name, {entry.name for entry in _tables().entries[kind]})
    return table[name].get(f"{kind} {name!r}").create({**spec_params, **params})


def _default_claim(task: str, family: str) -> str:
    if task == "direct":
        return f"the direct solver of {family} measures"
    return f"the default algorithm for {task} problems of {family} measures"


def default_algorithm(measure: Measure, task: str = "binary", *, family: str | None = None) -> str:
    """The spec of the algorithm a plugin declared for ``task`` problems of the measure's family.

    A declaration for the family itself wins over one for ``"any"`` family; ``family="any"``
    asks for the route declared for every family. The built-ins declare the plug-in route
    (``lbfgs``) for binary problems of every family, and the measure's own solver
    (``spade``, ``stamp``) as the ``"direct"`` one.
    """
    tables = _tables()
    for family in dict.fromkeys((family or measure.family, "any")):
        if (task, family) in tables.algorithms:
            return tables.algorithms[task, family].get(_default_claim(task, family))
    raise RegistryError(f"no plugin declares a default algorithm for {task} problems of {measure.family} "
                        f"measures such as {measure.name!r}; name one (--algorithm)")


def compared_algorithms(measure: Measure) -> tuple[str, str]:
    """The measure's own solver (the ``"direct"`` default) and the binary default (the plug-in
    route for the built-ins): what ``algorithm="auto"`` and ``calopt compare`` put side by side."""
    return default_algorithm(measure, "direct"), default_algorithm(measure)


def default_loss(algorithm: Algorithm) -> str:
    """The spec of the loss a plugin declared for ``algorithm`` (by its name)."""
    claims = _tables().losses.get(normalize_name(algorithm.name))
    if claims is None:
        raise RegistryError(f"no plugin declares a default loss for algorithm {algorithm.name!r}; "
                            f"name one (--loss)")
    return claims.get(f"the default loss of algorithm {algorithm.name!r}")


def get_measure(spec: Any, /, **params: Any) -> Any:
    """The measure named by ``spec`` (``"fbeta:beta=2"``, ``"gmean"``); ``params`` override."""
    return get("measure", spec, **params)


def get_loss(spec: Any, /, **params: Any) -> Any:
    """The loss named by ``spec`` (``"logistic"``, ``"hinge"``); ``params`` override."""
    return get("loss", spec, **params)


def get_algorithm(spec: Any, /, **params: Any) -> Any:
    """The algorithm named by ``spec`` (``"spade"``, ``"stamp"``); ``params`` override."""
    return get("algorithm", spec, **params)


def list_measures() -> list[Entry]:
    """The registered measures, sorted by name."""
    return list_entries("measure")


def list_losses() -> list[Entry]:
    """The registered losses, sorted by name."""
    return list_entries("loss")


def list_algorithms() -> list[Entry]:
    """The registered algorithms, sorted by name."""
    return list_entries("algorithm")

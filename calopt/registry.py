"""The plugin registry: loads the ``calopt`` entry points and resolves component names.

Plugins are imported once, lazily, from the ``calopt`` entry-point group (calopt's own
built-ins included). ``CALOPT_LOAD_PLUGINS`` (comma-separated entry-point or package
names; empty for none) restricts which load, the escape hatch when a broken plugin gets
in the way. A plugin that fails to import is reported in :data:`load_failures` (and as
a warning) and skipped. The name tables are rebuilt from the hooks on every lookup, so
plugins registered at run time (tests, notebooks) take effect at once.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from calopt import hookspecs
from calopt.components import Component, normalize_name, parse_spec
from calopt.errors import RegistryError, UnknownNameError

__all__ = [
    "Entry",
    "PluginLoadWarning",
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
# CALOPT_TRACE_PLUGINS=1 prints each registration (plugin, kind, name, class) to stderr.
_HOOKS = {
    "measure": "register_measures",
    "loss": "register_losses",
    "algorithm": "register_algorithms",
}

plugin_manager = pluggy.PluginManager("calopt")
plugin_manager.add_hookspecs(hookspecs)
#: Which package provides each plugin registered from an entry point.
_distributions: dict[str, str] = {}
#: One line per plugin that could not be imported or failed in its hook.
load_failures: list[str] = []
_loaded = False


class PluginLoadWarning(UserWarning):
    """A plugin failed to import or to register, and was skipped."""


def _report(message: str) -> None:
    if message not in load_failures:
        load_failures.append(message)
        warnings.warn(message, PluginLoadWarning, stacklevel=3)


def load_plugins() -> None:
    """Import and register every plugin of the ``calopt`` entry-point group (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    wanted = os.environ.get("CALOPT_LOAD_PLUGINS")
    allowed = None if wanted is None else {w.strip() for w in wanted.split(",") if w.strip()}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "unknown"
        if allowed is not None and ep.name not in allowed and dist not in allowed:
            continue
        plugin_name = f"{dist}:{ep.name}"
        if plugin_manager.has_plugin(plugin_name):
            continue
        try:
            plugin = ep.load()
            plugin_manager.register(plugin, name=plugin_name)
        except Exception as exc:  # a broken plugin must not break calopt
            _report(
                f"plugin {ep.name!r} from package {dist!r} failed to load "
                f"({type(exc).__name__}: {exc}); skipped"
            )
            continue
        _distributions[plugin_name] = dist


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


def _plugin_label(impl: Any) -> str:
    return _distributions.get(impl.plugin_name, impl.plugin_name)


def entries(kind: str) -> dict[str, Entry]:
    """Map every name and alias of ``kind`` (measure, loss, algorithm) to its entry."""
    load_plugins()
    hook = getattr(plugin_manager.hook, _HOOKS[kind])
    table: dict[str, Entry] = {}
    tracing = bool(os.environ.get("CALOPT_TRACE_PLUGINS"))
    for impl in hook.get_hookimpls():  # registration order: built-ins before later plugins
        provider = _plugin_label(impl)

        def register(
            component: type, *, aliases: Sequence[str] = (), _provider: str = provider
        ) -> None:
            if not (isinstance(component, type) and issubclass(component, Component)):
                raise RegistryError(
                    f"plugin {_provider!r} registered {component!r}, which is not a calopt {kind} class"
                )
            if component.kind != kind or not component.name:
                raise RegistryError(
                    f"plugin {_provider!r} registered {component.__name__} as a {kind}, "
                    f"but it is a {component.kind or 'nameless component'}"
                )
            names = [normalize_name(component.name), *map(normalize_name, aliases)]
            entry = Entry(kind, names[0], component, _provider, tuple(names[1:]))
            for name in names:
                if name in table:
                    raise RegistryError(
                        f"{kind} {name!r} is registered by both "
                        f"{table[name].plugin!r} and {_provider!r}"
                    )
            for name in names:
                table[name] = entry
            if tracing:
                print(f"calopt: trace: {_provider} registered {kind} {names[0]!r} "
                      f"({component.__module__}.{component.__qualname__})", file=sys.stderr)

        try:
            impl.function(**{arg: register for arg in impl.argnames})
        except RegistryError:
            raise
        except Exception as exc:
            _report(
                f"plugin {provider!r} failed in {_HOOKS[kind]} "
                f"({type(exc).__name__}: {exc}); skipped"
            )
    return table


def list_entries(kind: str) -> list[Entry]:
    """The registered components of ``kind``, one per component, sorted by name."""
    unique = {entry.name: entry for entry in entries(kind).values()}
    return [unique[name] for name in sorted(unique)]


def get(kind: str, spec: str | Component, /, **params: Any) -> Any:
    """Instantiate the component named by ``spec`` (``"fbeta:beta=2"``), or pass one through.

    Keyword ``params`` override those in the spec. Raises
    :class:`~calopt.errors.UnknownNameError` (with suggestions) for an unknown name and
    :class:`~calopt.errors.ParameterError` for unknown or invalid parameters.
    """
    if isinstance(spec, Component):
        if spec.kind != kind:
            raise RegistryError(f"expected a {kind}, got the {spec.kind} {spec.name!r}")
        return spec
    name, spec_params = parse_spec(spec)
    table = entries(kind)
    if name not in table:
        raise UnknownNameError(kind, name, {e.name for e in table.values()})
    return table[name].create({**spec_params, **params})


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

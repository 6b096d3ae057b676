"""One registry for every extension point: domains, memory systems, rows and model-call kinds.

A plugin — a domain, a memory system, a base agent — is one folder plus one registration: its
package calls :meth:`Registry.register` on the registries below when it is imported, and every
runner, the CLI, the prompts and the contract tests read the registries instead of naming
plugins. Nothing else in the tree changes to add one (shared/DESIGN.md, "A plugin is one folder
plus one registration").

Where plugins come from (:func:`load_plugins`, called by every lookup, idempotent):

* the built-in packages listed in :data:`BUILTIN_PLUGINS` (imported once, in that order);
* every installed distribution's Python entry points in the group :data:`ENTRY_POINT_GROUP`
  (``cfjax.plugins``), the convention pytest (``pytest11``) and many others use. An entry point
  names a module (``mypkg.cfjax_plugin``) or a callable (``mypkg:register``); the module is
  imported and, when the entry point names a callable, it is called with no arguments. Its
  registrations then appear in ``--suite``, ``--rows`` and every runner.

A registration made in this process outside :func:`load_plugins` (a notebook's or a test's
``DOMAINS.register``) travels to the spawned worker processes of ``--workers N`` by value:
:func:`in_process_registrations` in the parent, :func:`restore_registrations` in each worker
(:func:`cfjax.experiments.common.run_pool` does both).

A plugin that fails to import (or whose registration callable raises) is one
:class:`PluginLoadError` — an ``ImportError`` — naming the entry point (never a silently missing row).

This module imports nothing from ``cfjax`` at import time but :mod:`cfjax.types`, so every layer
may import it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

__all__ = ["Registry", "UnknownPluginError", "DuplicatePluginError", "PluginLoadError", "ENTRY_POINT_GROUP",
           "BUILTIN_PLUGINS", "load_plugins", "in_process_registrations", "restore_registrations", "DOMAINS",
           "MEMORY_SYSTEMS", "ROWS", "CALLS", "AGENTS"]

T = TypeVar("T")

#: the Python entry-point group out-of-tree plugins register under
ENTRY_POINT_GROUP = "cfjax.plugins"

#: built-in plugin packages, imported (in this order) before any lookup; each registers itself
BUILTIN_PLUGINS: tuple[str, ...] = (
    "cfjax.llm.calls",
    "cfjax.domains.sql",
    "cfjax.domains.python",
    "cfjax.domains.sat",
    "cfjax.domains.math",
    "cfjax.countermem.calls",
    "cfjax.uplift.calls",
    "cfjax.expel",
    "cfjax.peers",
    "cfjax.agents",
)


class UnknownPluginError(KeyError):
    """A name that no plugin registered (the message lists the registered ones)."""

    def __str__(self) -> str:  # KeyError quotes its argument; this is a sentence
        return str(self.args[0])


class DuplicatePluginError(ValueError):
    """Two plugins registered the same name in one registry."""


class PluginLoadError(ImportError):
    """A ``cfjax.plugins`` entry point failed to load (the message names the entry point and its target;
    the CLI prints it as one line, exit status 2)."""


_REGISTRIES: dict[str, "Registry[Any]"] = {}
#: ``(registry, name)`` of the registrations made outside :func:`load_plugins`, in order
_IN_PROCESS: dict[tuple[str, str], None] = {}


class Registry(Generic[T]):
    """Name → plugin object, in registration order.

    Args:
      what: what the entries are (``"domain"``, ``"memory system"``, …), for error messages.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()
        _REGISTRIES[what] = self

    def register(self, name: str, obj: T, *, replace: bool = False) -> T:
        """Add ``obj`` under ``name`` and return it (usable as a decorator's body).

        Re-registering the *same* object (or an equal one of the same type: a copy restored in a worker)
        is a no-op that returns the registered one; another object under a taken name raises :class:`DuplicatePluginError` unless ``replace``.
        """
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise ValueError(f"a {self.what} name must be a non-empty string without spaces, got {name!r}")
        with self._lock:
            old = self._items.get(name)
            if old is not None and not replace and _same(old, obj):
                return old  # the same plugin again: a module imported twice, or restored in a worker first
            if old is not None and not replace:
                raise DuplicatePluginError(f"{self.what} {name!r} is registered twice "
                                           f"({_origin(old)} and {_origin(obj)})")
            self._items[name] = obj
            if not _LOADED["running"]:
                _IN_PROCESS[(self.what, name)] = None
        return obj

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a throwaway plugin clean up with this)."""
        with self._lock:
            self._items.pop(name, None)
            _IN_PROCESS.pop((self.what, name), None)

    def get(self, name: str) -> T:
        """The plugin named ``name``.

        Raises:
          UnknownPluginError: naming the registered ones.
        """
        load_plugins()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownPluginError(f"unknown {self.what} {name!r} (registered: "
                                     f"{', '.join(self._items) or 'none'})") from None

    def names(self) -> tuple[str, ...]:
        load_plugins()
        return tuple(self._items)

    def items(self) -> list[tuple[str, T]]:
        load_plugins()
        return list(self._items.items())

    def values(self) -> list[T]:
        load_plugins()
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self._items)})"


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - objects that cannot compare are different plugins
        return False


def _origin(obj: Any) -> str:
    mod = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{mod}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


#: ``name → DomainInfo`` (:class:`cfjax.types.DomainInfo`): one per domain folder
DOMAINS: Registry[Any] = Registry("domain")
#: ``name → MemorySystemInfo`` (:class:`cfjax.memory.MemorySystemInfo`): one per memory design
MEMORY_SYSTEMS: Registry[Any] = Registry("memory system")
#: ``name → RowSpec``: the rows of every runner's tables (:mod:`cfjax.experiments.countermem.rows`)
ROWS: Registry[Any] = Registry("row")
#: ``name → CallKind`` (:class:`cfjax.types.CallKind`): every kind of model call
CALLS: Registry[Any] = Registry("model-call kind")
#: ``name → BaseAgent``: the base agents every runner crosses with its rows (ReAct, Reflexion)
AGENTS: Registry[Any] = Registry("base agent")

_LOADED = {"done": False, "running": False}
_LOAD_LOCK = threading.RLock()


def load_plugins(*, force: bool = False) -> None:
    """Import the built-in plugins and every ``cfjax.plugins`` entry point (once per process).

    Raises:
      PluginLoadError: an ``ImportError``: a plugin failed to load (the message names the entry point and
        its target).
    """
    if _LOADED["done"] and not force:
        return
    with _LOAD_LOCK:
        if (_LOADED["done"] and not force) or _LOADED["running"]:
            return  # re-entrant call from a plugin's own import (it may look itself up)
        _LOADED["running"] = True
        try:
            for mod in BUILTIN_PLUGINS:
                importlib.import_module(mod)
            for ep in _entry_points():
                _load_entry_point(ep)
            _LOADED["done"] = True
        finally:
            _LOADED["running"] = False


def in_process_registrations() -> list[tuple[str, str, Any]]:
    """``(registry, name, object)`` of every live registration made outside :func:`load_plugins`
    whose object pickles (what a spawned worker would not see by loading the plugins itself)."""
    import pickle

    out = []
    for what, name in list(_IN_PROCESS):
        obj = _REGISTRIES[what]._items.get(name)
        if obj is None:
            continue
        try:
            pickle.dumps(obj)
        except Exception:  # noqa: BLE001 - an unpicklable plugin stays in-process (the worker names it unknown)
            continue
        out.append((what, name, obj))
    return out


def restore_registrations(entries: list[tuple[str, str, Any]]) -> None:
    """In a worker: load the plugins, then register each of ``entries`` whose name is still free."""
    load_plugins()
    for what, name, obj in entries:
        reg = _REGISTRIES[what]
        if name not in reg._items:
            reg.register(name, obj)


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def _load_entry_point(ep: Any) -> None:
    try:
        obj = ep.load()
        if callable(obj) and not isinstance(obj, type) and ":" in ep.value:
            obj()  # its registration function: a failure here is a failure to load, named the same way
    except Exception as e:  # a broken plugin must be named, not skipped
        raise PluginLoadError(f"cfjax plugin entry point {ep.name!r} ({ep.value}) failed to load: "
                              f"{type(e).__name__}: {e}") from e


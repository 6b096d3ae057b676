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

A plugin that fails to import is an error naming the entry point (never a silently missing row).

This module imports nothing from ``cfjax`` at import time but :mod:`cfjax.types`, so every layer
may import it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

__all__ = ["Registry", "UnknownPluginError", "DuplicatePluginError", "ENTRY_POINT_GROUP", "BUILTIN_PLUGINS",
           "load_plugins", "DOMAINS", "MEMORY_SYSTEMS", "ROWS", "CALLS", "AGENTS"]

T = TypeVar("T")

#: the Python entry-point group out-of-tree plugins register under
ENTRY_POINT_GROUP = "cfjax.plugins"

#: built-in plugin packages, imported (in this order) before any lookup; each registers itself
BUILTIN_PLUGINS: tuple[str, ...] = (
    "cfjax.llm.calls",
    "cfjax.domains.sql",
    "cfjax.domains.python",
    "cfjax.domains.sat",
    "cfjax.countermem.calls",
    "cfjax.uplift.calls",
    "cfjax.expel",
)


class UnknownPluginError(KeyError):
    """A name that no plugin registered (the message lists the registered ones)."""

    def __str__(self) -> str:  # KeyError quotes its argument; this is a sentence
        return str(self.args[0])


class DuplicatePluginError(ValueError):
    """Two plugins registered the same name in one registry."""


class Registry(Generic[T]):
    """Name → plugin object, in registration order.

    Args:
      what: what the entries are (``"domain"``, ``"memory system"``, …), for error messages.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def register(self, name: str, obj: T, *, replace: bool = False) -> T:
        """Add ``obj`` under ``name`` and return it (usable as a decorator's body).

        Re-registering the *same* object is a no-op (a module imported twice); another object under a
        taken name raises :class:`DuplicatePluginError` unless ``replace``.
        """
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise ValueError(f"a {self.what} name must be a non-empty string without spaces, got {name!r}")
        with self._lock:
            old = self._items.get(name)
            if old is not None and old is not obj and not replace:
                raise DuplicatePluginError(f"{self.what} {name!r} is registered twice "
                                           f"({_origin(old)} and {_origin(obj)})")
            self._items[name] = obj
        return obj

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a throwaway plugin clean up with this)."""
        with self._lock:
            self._items.pop(name, None)

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


def _origin(obj: Any) -> str:
    mod = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{mod}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


#: ``name → DomainInfo`` (:class:`cfjax.types.DomainInfo`): one per domain folder
DOMAINS: Registry[Any] = Registry("domain")
#: ``name → MemorySystemInfo`` (:class:`cfjax.memory.MemorySystemInfo`): one per memory design
MEMORY_SYSTEMS: Registry[Any] = Registry("memory system")
#: ``name → RowSpec``: the rows of every runner's tables (:mod:`cfjax.experiments.rows`)
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
      ImportError: a plugin failed to load (the message names the entry point and its target).
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


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def _load_entry_point(ep: Any) -> None:
    try:
        obj = ep.load()
    except Exception as e:  # a broken plugin must be named, not skipped
        raise ImportError(f"cfjax plugin entry point {ep.name!r} ({ep.value}) failed to load: "
                          f"{type(e).__name__}: {e}") from e
    if callable(obj) and not isinstance(obj, type) and ":" in ep.value:
        obj()


"""Lazy re-exports for the packages' public API (PEP 562 module ``__getattr__``).

Every package of cfjax keeps its implementation in modules and re-exports the public names in its
``__init__.py`` (optax/mctx style). A re-export that would import JAX, FAISS or a solver at
``import cfjax.<package>`` time is made *lazy*: the package lists the names per module and imports a
module only when one of its names is first read (``from cfjax.countermem import build_table`` works
as an ordinary import; the value is then cached on the package).

>>> __getattr__, __dir__, _lazy_all = lazy_exports(__name__, {
...     ".table": ["build_table", "load_table"],          # a name of a module of this package
...     ".antipersist": ["run_all as run_antipersist"],   # re-exported under another name
...     "cfjax.memory": ["MemorySystem"],                 # any module, by absolute name
... }, modules=("prompts",))                              # a submodule itself   # doctest: +SKIP

This module imports nothing from ``cfjax`` (it lives in :mod:`cfjax.infra`, which every layer may
use), so importing it costs nothing and creates no dependency between layers.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, Iterable[str]], *, modules: Iterable[str] = ()
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, names)`` for the package ``package``.

    Args:
      package: the package's ``__name__``.
      names: module → the names it exports; a module starting with ``.`` is relative to
        ``package``; ``"attr as alias"`` re-exports ``attr`` as ``alias``.
      modules: submodules of ``package`` that are themselves public names (imported on first use).

    Returns:
      the package's ``__getattr__`` and ``__dir__``, and the lazy names in order (for ``__all__``).

    Raises:
      ValueError: one name is listed twice.
    """
    table: dict[str, tuple[str, str | None]] = {}
    for mod, items in names.items():
        for item in items:
            attr, _, alias = (x.strip() for x in item.partition(" as "))
            key = alias or attr
            if key in table:
                raise ValueError(f"{package}: {key!r} is re-exported twice ({table[key][0]} and {mod})")
            table[key] = (mod, attr)
    for sub in modules:
        if sub in table:
            raise ValueError(f"{package}: {sub!r} is both a name and a submodule")
        table[sub] = ("." + sub, None)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        mod, attr = target
        module = importlib.import_module(mod, package)
        value = module if attr is None else getattr(module, attr)
        setattr(sys.modules[package], name, value)  # cached: __getattr__ is not asked again
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__, list(table)

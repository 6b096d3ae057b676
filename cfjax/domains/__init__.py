"""Built-in suites and their registry.

>>> suite = build_suite("sql", "/tmp/cfjax-suites/sql")   # writes what the environments need
>>> suite = open_suite("sql", "/tmp/cfjax-suites/sql")    # read-only, safe in worker processes
"""

from __future__ import annotations

import importlib
from pathlib import Path

from cfjax.domains.base import Suite

__all__ = ["SUITES", "build_suite", "open_suite", "Suite"]

#: suite name → "module:class"
SUITES: dict[str, str] = {
    "sql": "cfjax.domains.sql:SQLSuite",
    "pybugs": "cfjax.domains.python:PyBugsSuite",
    "sat": "cfjax.domains.sat:SATSuite",
}


def _cls(name: str) -> type:
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r} (available: {', '.join(SUITES)})")
    mod, cls = SUITES[name].split(":")
    return getattr(importlib.import_module(mod), cls)


def build_suite(name: str, root: str | Path) -> Suite:
    """Create (idempotently) and return the suite ``name`` under ``root``."""
    return _cls(name).build(Path(root))


def open_suite(name: str, root: str | Path) -> Suite:
    """The suite ``name`` that :func:`build_suite` wrote under ``root`` (read-only)."""
    return _cls(name).open(Path(root))

"""Thread-safe :mod:`ast` parsing for the Python domain's parent side (worlds, loaders, edits).

CPython 3.11 converts a parsed tree into Python objects with a recursion counter kept in
per-interpreter state. When two threads convert at once — the GIL can change hands inside, e.g. a
garbage collection running a finalizer — one of them may end with ``SystemError: AST constructor
recursion depth mismatch`` (seen under ``--max-inflight``, where many evaluations run on threads).
Every parse of this package goes through :func:`parse` / :func:`literal_eval`, which hold
:data:`AST_LOCK`; a mismatch that still happens (a parse elsewhere in the process, outside the lock)
is retried. ``ast.unparse`` and ``compile`` of source text build no Python tree objects and need no lock.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

__all__ = ["AST_LOCK", "parse", "literal_eval"]

#: held around every conversion of a parse tree into Python objects (re-entrant)
AST_LOCK = threading.RLock()
_TRIES = 3


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kwargs: Any) -> ast.AST:
    """:func:`ast.parse` under :data:`AST_LOCK` (the 3.11 race above is retried)."""
    for attempt in range(_TRIES):
        with AST_LOCK:
            try:
                return ast.parse(source, filename, mode, **kwargs)
            except SystemError as e:
                if "recursion depth mismatch" not in str(e) or attempt == _TRIES - 1:
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


def literal_eval(node_or_string: str | ast.AST) -> Any:
    """:func:`ast.literal_eval`, parsing a string with :func:`parse`."""
    if isinstance(node_or_string, str):
        node_or_string = parse(node_or_string.lstrip(" \t"), mode="eval")
    return ast.literal_eval(node_or_string)

"""Test cases as the parent holds them: parsing a test file, judging what the child reported.

The Python world's tests never enter the sandbox (:mod:`cfjax.domains.python.world`,
"Who judges: the parent"). :func:`parse_cases` turns a test file into cases (:class:`Case`) —
the call's arguments (sent to the child) and the expected value or built-in
exception (kept here) — and :func:`judge` decides each test from the plain data the
child reported, with the messages the suite's own ``_check`` helpers would write.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Any

__all__ = ["Case", "parse_cases", "judge", "CASE_FORMS"]

_MAX_MSG = 300  # a test message, as the harness bounds it


@dataclass(frozen=True)
class Case:
    """One test of a task, as the parent holds it: the call's arguments go to the child, the
    expected value (or exception class) never does."""

    name: str
    function: str
    call: str  # the call as the test file writes it, e.g. ``f(1, [2])`` (for messages)
    args: str  # the arguments as a tuple literal, e.g. ``(1, [2],)``
    kind: str  # "equals" | "raises"
    want: Any = None  # the expected value ("equals")
    exc: str = ""  # the expected built-in exception class name ("raises")
    message: str | None = None  # an ``assert``'s own message, shown when it fails


CASE_FORMS = ("`_check(<call text>, f(<literals>), <literal>)`", "`_check_raises(<call text>, lambda: "
               "f(<literals>), <built-in exception>)`", "`assert f(<literals>) == <literal>[, '<message>']`")


def _literal_call(node: ast.AST) -> tuple[str, str] | None:
    """``(function, args tuple literal)`` of ``f(<literals>)``, or None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args)):
        return None
    args = "(" + "".join(ast.unparse(a) + ", " for a in node.args) + ")"
    try:
        ast.literal_eval(args)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return node.func.id, args


def _case(fn: ast.FunctionDef) -> Case | None:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # a docstring
    if len(body) != 1:
        return None
    st = body[0]
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name) \
            and not st.value.keywords and len(st.value.args) == 3 \
            and isinstance(st.value.args[0], ast.Constant) and isinstance(st.value.args[0].value, str):
        helper, (text, call, want) = st.value.func.id, st.value.args
        if helper == "_check":
            fa = _literal_call(call)
            if fa is None:
                return None
            try:
                value = ast.literal_eval(want)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return None
            return Case(fn.name, fa[0], text.value, fa[1], "equals", want=value)
        if helper == "_check_raises" and isinstance(call, ast.Lambda) and isinstance(want, ast.Name) \
                and isinstance(getattr(builtins, want.id, None), type) \
                and issubclass(getattr(builtins, want.id), BaseException):
            fa = _literal_call(call.body)
            if fa is None:
                return None
            return Case(fn.name, fa[0], text.value, fa[1], "raises", exc=want.id)
        return None
    if isinstance(st, ast.Assert) and isinstance(st.test, ast.Compare) and len(st.test.ops) == 1 \
            and isinstance(st.test.ops[0], ast.Eq):
        fa = _literal_call(st.test.left)
        if fa is None:
            return None
        try:
            value = ast.literal_eval(st.test.comparators[0])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
        message = None
        if st.msg is not None:
            if not (isinstance(st.msg, ast.Constant) and isinstance(st.msg.value, str)):
                return None
            message = st.msg.value
        return Case(fn.name, fa[0], ast.unparse(st.test.left), fa[1], "equals", want=value, message=message)
    return None


def parse_cases(test_src: str, where: str = "<tests>") -> tuple[Case, ...]:
    """The cases of a test file: every top-level ``test*`` function, in definition order, must be one
    of :data:`CASE_FORMS` (what the built-in suite writes). Anything else is refused with a
    ``ValueError``: arbitrary test code would have to run *inside* the sandbox, next to the
    expected values — use ``runner="pytest"`` for such files, never for untrusted code."""
    try:
        tree = ast.parse(test_src)
    except SyntaxError as e:
        raise ValueError(f"{where}: the test file does not parse ({e})") from None
    cases: dict[str, Case] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            c = _case(node) if isinstance(node, ast.FunctionDef) else None
            if c is None:
                raise ValueError(f"{where}: test {node.name} is not a case the sandboxed runner can judge outside "
                                 f"the sandbox (one of {', '.join(CASE_FORMS)}); use runner='pytest' for "
                                 "arbitrary tests (not for untrusted code)")
            cases[c.name] = c
    functions = {c.function for c in cases.values()}
    if len(functions) > 1:
        raise ValueError(f"{where}: the tests call several functions ({', '.join(sorted(functions))}); one expected")
    return tuple(cases.values())


class _Opaque(Exception):
    """The child described a value that is not plain (its type name only)."""


_CONTAINER_NAMES = {"l": "list", "t": "tuple", "d": "dict"}


def _decode(v: Any, depth: int = 0) -> Any:
    """A value the child encoded (``_harness._make_encoder``) back into plain Python values."""
    if depth > 200:
        raise ValueError("too deep")
    if v is None or type(v) in (bool, int):
        return v
    if type(v) is not tuple or len(v) != 2 or type(v[0]) is not str:
        raise ValueError("not an encoded value")
    tag, x = v
    if tag == "f" and type(x) is str:
        return float(x)
    if tag == "s" and type(x) is str:
        return x
    if tag in ("l", "t") and type(x) is list:
        items = [_decode(e, depth + 1) for e in x]
        return items if tag == "l" else tuple(items)
    if tag == "d" and type(x) is list:
        out = {}
        for kv in x:
            if type(kv) is not tuple or len(kv) != 2:
                raise ValueError("not an encoded pair")
            out[_decode(kv[0], depth + 1)] = _decode(kv[1], depth + 1)
        return out
    if tag == "o" and type(x) is str:
        raise _Opaque(x[:80])
    raise ValueError("unknown tag")


def _shown_value(encoded: Any) -> tuple[bool, Any, str]:
    """``(plain, value, text)``: the value and its ``repr``, or "an object of type T" (the suite's
    ``_shown``: a container holding anything not plain is shown by its own type)."""
    try:
        value = _decode(encoded)
        return True, value, repr(value)
    except _Opaque as o:
        outer = encoded[0] if type(encoded) is tuple and encoded else ""
        name = _CONTAINER_NAMES.get(outer, str(o))
        return False, None, "an object of type " + name


def _verdict(case: Case, r: Any) -> tuple[str, str]:
    if not isinstance(r, (list, tuple)) or len(r) < 2:
        return "error", "the test process reported no result for this test"
    kind = r[1]
    if kind == "memory":
        return "memory", "MemoryError"
    if kind == "raised" and len(r) == 5:
        names, tname, msg = r[2], str(r[3])[:80], str(r[4])[:_MAX_MSG]
        if case.kind == "raises" and isinstance(names, list) and case.exc in names:
            return "passed", ""
        return "error", f"{tname}: {msg}"
    if kind == "value" and len(r) == 3:
        try:
            plain, got, shown = _shown_value(r[2])
        except (ValueError, TypeError, RecursionError, MemoryError, OverflowError):
            return "error", "the test process reported an unreadable value"
        if case.kind == "raises":
            return "failed", (case.call + " returned " + shown + ", expected " + case.exc)[:_MAX_MSG]
        try:
            equal = plain and bool(got == case.want)
        except RecursionError:
            equal = False
        if equal:
            return "passed", ""
        if case.message is not None:
            return "failed", case.message[:_MAX_MSG]
        return "failed", (case.call + " returned " + shown + ", expected " + repr(case.want))[:_MAX_MSG]
    return "error", "the test process reported an unreadable result"


def judge(cases: tuple[Case, ...], results: Any) -> list[tuple[str, str, str]]:
    """``(test name, verdict, message)`` per case, decided here from the values the child reported:
    whatever the child writes, a test passes only if the reported value equals the expected one."""
    by_name: dict[str, Any] = {}
    if isinstance(results, list):
        for r in results:
            if isinstance(r, (list, tuple)) and r and isinstance(r[0], str):
                by_name.setdefault(r[0], r)
    return [(c.name, *_verdict(c, by_name.get(c.name))) for c in cases]

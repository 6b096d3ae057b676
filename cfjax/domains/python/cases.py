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
import math
from dataclasses import dataclass
from typing import Any
from cfjax.domains.python._astsafe import literal_eval, parse as ast_parse

__all__ = ["Case", "parse_cases", "judge", "CASE_FORMS", "CheckProgram", "is_check_program", "render_check_program",
           "read_check_program", "CHECK_MARK"]

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
    #: the returned value is materialised with ``list(...)`` in the child first (a generator)
    materialize: bool = False
    #: numbers are compared with ``math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol)``
    #: (element-wise in lists, tuples and dict values) when ``abs_tol`` is not None
    abs_tol: float | None = None
    rel_tol: float = 0.0


CASE_FORMS = ("`_check(<call text>, f(<literals>), <literal>)`", "`_check_raises(<call text>, lambda: "
               "f(<literals>), <built-in exception>)`", "`assert f(<literals>) == <literal>[, '<message>']`",
              "`_check_close(<call text>, f(<literals>), <literal>, <abs_tol>, <rel_tol>)`",
              "any of these with `list(f(<literals>))` for `f(<literals>)` (a generator's items)")


def _literal_call(node: ast.AST) -> tuple[str, str, bool] | None:
    """``(function, args tuple literal, materialize)`` of ``f(<literals>)`` or ``list(f(<literals>))``,
    or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list" \
            and len(node.args) == 1 and not node.keywords:
        inner = _literal_call(node.args[0])
        return None if inner is None or inner[2] else (inner[0], inner[1], True)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args)):
        return None
    args = "(" + "".join(ast.unparse(a) + ", " for a in node.args) + ")"
    try:
        literal_eval(args)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return node.func.id, args, False


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _tolerance(node: ast.AST) -> float | None:
    ok, v = _literal(node)
    if not ok or type(v) not in (int, float) or not v >= 0 or v != v or v == float("inf"):
        return None
    return float(v)


def _case(fn: ast.FunctionDef) -> Case | None:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # a docstring
    if len(body) != 1:
        return None
    st = body[0]
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name) \
            and not st.value.keywords and len(st.value.args) in (3, 5) \
            and isinstance(st.value.args[0], ast.Constant) and isinstance(st.value.args[0].value, str):
        helper, (text, call, want, *tols) = st.value.func.id, st.value.args
        if helper in ("_check", "_check_close") and len(tols) == (2 if helper == "_check_close" else 0):
            fa = _literal_call(call)
            ok, value = _literal(want)
            if fa is None or not ok:
                return None
            abs_tol = rel_tol = None
            if tols:
                abs_tol, rel_tol = _tolerance(tols[0]), _tolerance(tols[1])
                if abs_tol is None or rel_tol is None:
                    return None
            return Case(fn.name, fa[0], text.value, fa[1], "equals", want=value, materialize=fa[2], abs_tol=abs_tol,
                        rel_tol=rel_tol or 0.0)
        if helper == "_check_raises" and not tols and isinstance(call, ast.Lambda) and isinstance(want, ast.Name) \
                and isinstance(getattr(builtins, want.id, None), type) \
                and issubclass(getattr(builtins, want.id), BaseException):
            fa = _literal_call(call.body)
            if fa is None:
                return None
            return Case(fn.name, fa[0], text.value, fa[1], "raises", exc=want.id, materialize=fa[2])
        return None
    if isinstance(st, ast.Assert) and isinstance(st.test, ast.Compare) and len(st.test.ops) == 1 \
            and isinstance(st.test.ops[0], ast.Eq):
        fa = _literal_call(st.test.left)
        ok, value = _literal(st.test.comparators[0])
        if fa is None or not ok:
            return None
        message = None
        if st.msg is not None:
            if not (isinstance(st.msg, ast.Constant) and isinstance(st.msg.value, str)):
                return None
            message = st.msg.value
        return Case(fn.name, fa[0], ast.unparse(st.test.left), fa[1], "equals", want=value, message=message,
                    materialize=fa[2])
    return None


#: what a refusal of :func:`parse_cases` advises by default (the world's API options)
_ADVICE = "use runner='pytest' for arbitrary tests (not for untrusted code)"


def parse_cases(test_src: str, where: str = "<tests>", *, advice: str = _ADVICE) -> tuple[Case, ...]:
    """The cases of a test file: every top-level ``test*`` function, in definition order, must be one
    of :data:`CASE_FORMS` (what the built-in suite writes). Anything else is refused with a
    ``ValueError`` (ending with ``advice``): arbitrary test code would have to run *inside* the
    candidate's sandbox, next to the expected values — such code is a *check program*
    (:func:`render_check_program`, run in a sandbox of its own), or ``runner="pytest"`` for a
    cross-check of trusted code."""
    try:
        tree = ast_parse(test_src)
    except SyntaxError as e:
        raise ValueError(f"{where}: the test file does not parse ({e})") from None
    cases: dict[str, Case] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            c = _case(node) if isinstance(node, ast.FunctionDef) else None
            if c is None:
                raise ValueError(f"{where}: test {node.name} is not a case the sandboxed runner can judge outside "
                                 f"the sandbox (one of {', '.join(CASE_FORMS)}); {advice}")
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
            equal = plain and (_close(got, case.want, case.abs_tol, case.rel_tol) if case.abs_tol is not None
                               else bool(got == case.want))
        except RecursionError:
            equal = False
        if equal:
            return "passed", ""
        if case.message is not None:
            return "failed", case.message[:_MAX_MSG]
        within = "" if case.abs_tol is None else f" (within abs_tol={case.abs_tol:g}, rel_tol={case.rel_tol:g})"
        return "failed", (case.call + " returned " + shown + ", expected " + repr(case.want) + within)[:_MAX_MSG]
    return "error", "the test process reported an unreadable result"


def _close(got: Any, want: Any, abs_tol: float, rel_tol: float, depth: int = 0) -> bool:
    """``got == want`` with numbers compared by :func:`math.isclose` (the ``_check_close`` helper's rule)."""
    number = (int, float)
    if type(got) in number and type(want) in number:
        return math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol)
    if depth > 100:
        return False
    if type(got) in (list, tuple) and type(got) is type(want):
        return len(got) == len(want) and all(_close(g, w, abs_tol, rel_tol, depth + 1) for g, w in zip(got, want))
    if type(got) is dict and type(want) is dict:
        return got.keys() == want.keys() and all(_close(got[k], want[k], abs_tol, rel_tol, depth + 1) for k in got)
    return bool(got == want)


def judge(cases: tuple[Case, ...], results: Any) -> list[tuple[str, str, str]]:
    """``(test name, verdict, message)`` per case, decided here from the values the child reported:
    whatever the child writes, a test passes only if the reported value equals the expected one."""
    by_name: dict[str, Any] = {}
    if isinstance(results, list):
        for r in results:
            if isinstance(r, (list, tuple)) and r and isinstance(r[0], str):
                by_name.setdefault(r[0], r)
    return [(c.name, *_verdict(c, by_name.get(c.name))) for c in cases]


# --------------------------------------------------------------------------- check programs

#: the first line of a test file that holds a *check program* (HumanEvalPack's ``check(candidate)``)
CHECK_MARK = "# cfjax check program 1 "


@dataclass(frozen=True)
class CheckProgram:
    """A benchmark's own check, run as written in a sandboxed process of its own
    (:mod:`cfjax.domains.python.proxy`): ``prelude`` (the task's own code the check may call, e.g.
    HumanEvalPack's imports and ``prompt`` with its helper functions) runs first, then the name
    ``entry_point`` is bound to the proxy of the candidate's function, then ``test`` runs (it calls
    ``check(<entry_point>)``). ``preamble`` runs in the *candidate's* module before the action
    (HumanEvalPack's imports and prompt, as the benchmark's program has them); it must never hold
    the answer (the action could capture what it defines)."""

    entry_point: str
    prelude: str
    test: str
    preamble: str = ""


def is_check_program(test_src: str) -> bool:
    return test_src.startswith(CHECK_MARK)


def _block(text: str) -> str:
    return text.rstrip("\n") + "\n" if text.strip() else ""


def render_check_program(entry_point: str, prelude: str, test: str, *, preamble: str = "") -> str:
    """The test file of a check program: a header line, the candidate's preamble, the prelude, the
    test (plain Python text; the header counts the lines of each part)."""
    import json

    preamble, prelude = _block(preamble), _block(prelude)
    head = json.dumps({"entry_point": entry_point, "preamble_lines": preamble.count("\n"),
                       "prelude_lines": prelude.count("\n")}, sort_keys=True)
    return CHECK_MARK + head + "\n" + preamble + prelude + test.rstrip("\n") + "\n"


def read_check_program(test_src: str, where: str = "<tests>") -> CheckProgram:
    """The parts of a file :func:`render_check_program` wrote (``ValueError`` if malformed)."""
    import json

    head, _, rest = test_src.partition("\n")
    try:
        meta = json.loads(head[len(CHECK_MARK):])
        entry, m, n = meta["entry_point"], meta["preamble_lines"], meta["prelude_lines"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{where}: a malformed check program header") from None
    if not (isinstance(entry, str) and entry.isidentifier() and all(type(x) is int and x >= 0 for x in (m, n))):
        raise ValueError(f"{where}: a malformed check program header")
    lines = rest.split("\n")

    def part(lo: int, hi: int) -> str:
        return "\n".join(lines[lo:hi]) + "\n" if hi > lo else ""

    return CheckProgram(entry, part(m, m + n), "\n".join(lines[m + n:]), part(0, m))

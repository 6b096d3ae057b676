"""Python decision units and one-unit edits (papers/countermem.md §3.2, Table 4, App. B.4).

The action of the Python bug-fixing domain is the complete source of one
function. Its *decision units* — what an agent decides in one step, and what a
local alternative (Eq. 1) changes — are found with :mod:`ast`, in source order:

* every **simple statement** of a function body (``x = ...``, ``total += x``,
  ``return ...``, an expression statement, ``raise``, ...): kind ``"return"``
  for ``return`` and ``"stmt"`` for all others; a docstring is not a unit;
* the **header** of every compound statement, separately from its body:
  ``if <test>:`` (kind ``"if"``), ``elif <test>:`` (``"elif"``),
  ``for <target> in <iter>:`` (``"for"``), ``while <test>:`` (``"while"``),
  ``with <items>:`` (``"with"``); their bodies are walked recursively, and so
  are ``else``/``try``/``except``/``finally`` blocks and nested functions.

Statements outside every function (imports, constants) are not units. Unit
texts and whole actions are printed with :func:`ast.unparse`, so "changed"
is a string comparison of canonical forms, and every unit text is one line.

:func:`replace_unit` replaces exactly one unit (a header replacement keeps the
body) and re-prints the function; :func:`rule_edits` lists the rule operators'
one-unit alternatives. First the *repair* operators (:data:`OPERATORS`:
comparison boundaries, ``range`` end ±1, ``//`` vs ``/``, ``is None`` vs
falsiness, ``reverse=True``, ``.lower()`` on compared strings, ``[-k:]`` vs
``[:k]``, ``d[k]`` vs ``d.get(k, 0)``), each available by name for the
scripted backbone's slips (:mod:`cfjax.domains.python.script`); then the
*distractor* operators (:data:`DISTRACTORS`): plausible, usually wrong edits
of the kind a model or a mutation-testing rule set also tries — a comparison
mirrored (``<`` ↔ ``>``) or negated (``==`` ↔ ``!=``, ``>`` ↔ ``<=``, ``in``
↔ ``not in``, ``is`` ↔ ``is not``, ``not x`` → ``x``), an order
comparison's bound moved by one in the direction that is *not* equivalent to
the inclusivity flip (``x > e`` → ``x > e + 1``), an integer literal ± 1,
``e ± 1`` → ``e``, a ``range`` start ± 1, a slice bound ± 1, a slice bound
moved to the other side (``xs[-k:]`` → ``xs[:-k]``), ``min`` ↔ ``max``,
``any`` ↔ ``all``, ``and`` ↔ ``or``, ``.lower()`` on one side of a
comparison only, ``round(a / b)``, ``float(a // b)``, ceiling division
``-(-a // b)``, ``a % b``, ``b / a``, ``sorted(x)`` → ``list(reversed(x))``
/ ``sorted(set(x))`` / ``sorted(x, key=str)`` / ``sorted(x, key=abs)``,
``d[k]`` → ``d.get(k)`` (no default, or ``1`` / ``-1``), ``not x`` → ``x == 0``
/ ``x is None or x == 0``, ``x is None`` →
``x == None``, ``a == b`` → ``a in b``, ``range(a ± 1, b ± 1)``, a slice
bound's sign flipped (``xs[:k]`` → ``xs[:-k]``), ``sorted(d.items())``. No slip uses a distractor, and the
distractors' edits come after all repair edits.

Edit *signatures* mask identifiers and literals but keep Python keywords,
common builtins and common method names (:data:`KEYWORDS`), after splitting
attribute access into separate tokens (``name.lower()`` →
``<id> . lower ( )``). :meth:`PythonEdits.transfer` carries a stored
``before → after`` unit edit onto the first unit of a new action with the same
masked shape through :func:`cfjax.types.bind_and_rewrite`, then
re-parses and re-prints the result.

All entry points are memoised (:func:`functools.lru_cache`): they are on the
hot path of the CounterMem pipeline.

Length: one module on purpose — units, canonical printing and the rule operators are one grammar
(each repair operator is the inverse of a slip and must stay beside the unit definitions it rewrites).
"""

from __future__ import annotations

import ast
import copy
import functools
import io
import keyword
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cfjax.domains.python._astsafe import parse as ast_parse
from cfjax.domains.common import bind_and_rewrite, masked_signature
from cfjax.types import EditError, EditModel, Unit

__all__ = [
    "PythonEdits", "KEYWORDS", "OPERATORS", "RULE_OPERATORS", "DISTRACTORS", "DISTRACTOR_OPERATORS", "units",
    "replace_unit", "normalize", "rule_edits", "distractor_edits", "apply_operator", "signature", "spaced",
    "entry_name", "header_of",
]

#: Tokens that edit signatures keep verbatim: Python keywords, common builtins and
#: method names. Names that are common *variable* names (``count``, ``values``,
#: ``items``, ``keys``, ``index``, ``key``, ``_``) are masked like any identifier.
KEYWORDS: frozenset[str] = frozenset(
    set(keyword.kwlist)
    | {"match", "case"}
    | {"range", "len", "sorted", "reversed", "sum", "min", "max", "abs", "round", "int", "float", "str", "bool",
       "list", "dict", "set", "tuple", "enumerate", "zip", "map", "filter", "any", "all", "isinstance", "print",
       "repr", "type", "divmod", "pow"}
    | {"lower", "upper", "casefold", "strip", "lstrip", "rstrip", "split", "join", "get", "append", "extend",
       "insert", "pop", "sort", "startswith", "endswith", "format", "reverse", "setdefault", "update"}
)

_HEADER_KINDS = ("if", "elif", "for", "while", "with")
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef, ast.Match) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
_CACHE = 8192


@dataclass
class _Loc:
    kind: str
    container: list
    index: int
    node: ast.stmt


# --------------------------------------------------------------------------- parsing and units


def _parse(src: str) -> ast.Module:
    try:
        return ast_parse(src)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise EditError(f"cannot parse Python: {type(e).__name__}: {e}") from None


def _is_docstring(st: ast.stmt) -> bool:
    return isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)


def _walk(body: list, out: list[_Loc], in_function: bool, function_body: bool = False) -> None:
    for idx, st in enumerate(body):
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _walk(st.body, out, True, function_body=True)
        elif isinstance(st, ast.ClassDef):
            _walk(st.body, out, False)
        elif not in_function:
            continue
        elif function_body and idx == 0 and _is_docstring(st):
            continue
        elif isinstance(st, ast.If):
            _walk_if(st, body, idx, out, is_elif=False)
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            out.append(_Loc("for", body, idx, st))
            _walk(st.body, out, True)
            _walk(st.orelse, out, True)
        elif isinstance(st, ast.While):
            out.append(_Loc("while", body, idx, st))
            _walk(st.body, out, True)
            _walk(st.orelse, out, True)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            out.append(_Loc("with", body, idx, st))
            _walk(st.body, out, True)
        elif isinstance(st, _COMPOUND):  # try / try* / match: no header unit, walk every block
            _walk(getattr(st, "body", []), out, True)
            for h in getattr(st, "handlers", []):
                _walk(h.body, out, True)
            for c in getattr(st, "cases", []):
                _walk(c.body, out, True)
            _walk(getattr(st, "orelse", []), out, True)
            _walk(getattr(st, "finalbody", []), out, True)
        else:
            out.append(_Loc("return" if isinstance(st, ast.Return) else "stmt", body, idx, st))


def _walk_if(st: ast.If, container: list, idx: int, out: list[_Loc], is_elif: bool) -> None:
    out.append(_Loc("elif" if is_elif else "if", container, idx, st))
    _walk(st.body, out, True)
    if len(st.orelse) == 1 and isinstance(st.orelse[0], ast.If):  # printed as `elif` by ast.unparse
        _walk_if(st.orelse[0], st.orelse, 0, out, is_elif=True)
    else:
        _walk(st.orelse, out, True)


def _locate(tree: ast.Module) -> list[_Loc]:
    out: list[_Loc] = []
    _walk(tree.body, out, in_function=False)
    return out


def header_of(st: ast.stmt, kind: str) -> str:
    """The one-line header text of a compound statement (``if x > 0:``)."""
    c = copy.copy(st)
    c.body = [ast.Pass()]
    if hasattr(c, "orelse"):
        c.orelse = []
    text = ast.unparse(c).split("\n", 1)[0]
    return "el" + text if kind == "elif" else text


def _unit_text(loc: _Loc) -> str:
    if loc.kind in _HEADER_KINDS:
        return header_of(loc.node, loc.kind)
    return ast.unparse(loc.node)


@functools.lru_cache(maxsize=_CACHE)
def _units(action: str) -> tuple[Unit, ...]:
    return tuple(Unit(loc.kind, _unit_text(loc)) for loc in _locate(_parse(action)))


def units(action: str) -> list[Unit]:
    """Decision units of ``action`` in source order. Raises :class:`EditError` if it does not parse."""
    return list(_units(action))


@functools.lru_cache(maxsize=_CACHE)
def normalize(action: str) -> str:
    """``ast.unparse(ast.parse(action))``; for unparsable text, the text with trailing
    whitespace and blank lines removed (indentation is meaningful and kept)."""
    try:
        return ast.unparse(ast_parse(action))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "\n".join(line.rstrip() for line in action.strip().splitlines() if line.strip())


def _parse_header(text: str, kind: str) -> ast.stmt:
    text = text.strip()
    if kind == "elif":
        if not text.startswith("elif"):
            raise EditError(f"an elif unit must be replaced by an elif header, got {text!r}")
        text = text[2:]
    if not text.endswith(":"):
        text += ":"
    if "\n" in text:
        raise EditError(f"a header replacement must be one line, got {text!r}")
    try:
        m = ast_parse(text + "\n    pass")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise EditError(f"cannot parse header {text!r}: {e}") from None
    want = {"if": (ast.If,), "elif": (ast.If,), "for": (ast.For, ast.AsyncFor), "while": (ast.While,),
            "with": (ast.With, ast.AsyncWith)}[kind]
    if len(m.body) != 1 or not isinstance(m.body[0], want):
        raise EditError(f"{text!r} is not a {kind} header")
    new = m.body[0]
    if new.body and not (len(new.body) == 1 and isinstance(new.body[0], ast.Pass)):
        raise EditError(f"a header replacement must not carry a body: {text!r}")
    return new


def _parse_simple(text: str, kind: str) -> ast.stmt:
    try:
        m = ast_parse(text.strip())
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise EditError(f"cannot parse statement {text!r}: {e}") from None
    if len(m.body) != 1:
        raise EditError(f"a replacement must be exactly one statement, got {len(m.body)}: {text!r}")
    st = m.body[0]
    if isinstance(st, _COMPOUND):
        raise EditError(f"a {kind} unit cannot be replaced by a compound statement: {text!r}")
    new_kind = "return" if isinstance(st, ast.Return) else "stmt"
    if new_kind != kind:
        raise EditError(f"unit kind mismatch: a {kind} unit cannot be replaced by a {new_kind}: {text!r}")
    return st


@functools.lru_cache(maxsize=_CACHE)
def replace_unit(action: str, index: int, new_text: str) -> str:
    """``action`` with unit ``index`` replaced by ``new_text`` (same kind), printed canonically.

    A header replacement (``if``/``elif``/``for``/``while``/``with``) keeps the
    body. Raises :class:`EditError` on a bad index, an unparsable replacement or
    one of another kind.
    """
    tree = _parse(action)
    locs = _locate(tree)
    if not isinstance(index, int) or not 0 <= index < len(locs):
        raise EditError(f"unit index {index} out of range (the action has {len(locs)} units)")
    loc = locs[index]
    if loc.kind in _HEADER_KINDS:
        new = _parse_header(new_text, loc.kind)
        st = loc.node
        if loc.kind in ("if", "elif", "while"):
            st.test = new.test
        elif loc.kind == "for":
            if type(new) is not type(st):
                raise EditError("a for header cannot switch between async and sync")
            st.target, st.iter = new.target, new.iter
        else:
            if type(new) is not type(st):
                raise EditError("a with header cannot switch between async and sync")
            st.items = new.items
    else:
        loc.container[loc.index] = _parse_simple(new_text, loc.kind)
    try:
        return ast.unparse(tree)
    except (ValueError, RecursionError) as e:  # pragma: no cover - unparse of a parsed tree
        raise EditError(f"cannot print the edited action: {e}") from None


# --------------------------------------------------------------------------- operators
#
# An operator maps one AST node to a list of replacement nodes (empty: it does
# not apply). Replacements share unchanged subtrees with the input; they are
# only ever printed, never mutated.

def _is_const(n: ast.AST, value: object) -> bool:
    return isinstance(n, ast.Constant) and type(n.value) is type(value) and n.value == value


def _is_none(n: ast.AST) -> bool:
    return isinstance(n, ast.Constant) and n.value is None


def _flip_ops(table: dict) -> Callable[[ast.AST], list]:
    def op(n: ast.AST) -> list:
        out = []
        if isinstance(n, ast.Compare):
            for j, o in enumerate(n.ops):
                new = table.get(type(o))
                if new is not None:
                    ops = list(n.ops)
                    ops[j] = new()
                    out.append(ast.Compare(n.left, ops, n.comparators))
        return out
    return op


_weaken = _flip_ops({ast.GtE: ast.Gt, ast.LtE: ast.Lt})
_strengthen = _flip_ops({ast.Gt: ast.GtE, ast.Lt: ast.LtE})


def _range_end(n: ast.AST) -> int | None:
    """Index of the end argument of a ``range(...)`` call, or None."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range" and not n.keywords \
            and 1 <= len(n.args) <= 3 and not any(isinstance(a, ast.Starred) for a in n.args):
        return 0 if len(n.args) == 1 else 1
    return None


def _plus_one(e: ast.AST) -> bool:
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and _is_const(e.right, 1)


def _minus_one(e: ast.AST) -> bool:
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and _is_const(e.right, 1)


def _with_end(n: ast.Call, j: int, end: ast.AST) -> ast.Call:
    args = list(n.args)
    args[j] = end
    return ast.Call(n.func, args, n.keywords)


def _range_inclusive(n: ast.AST) -> list:
    j = _range_end(n)
    if j is None:
        return []
    e = n.args[j]
    if _plus_one(e):
        return []
    if _minus_one(e):
        return [_with_end(n, j, e.left)]
    return [_with_end(n, j, ast.BinOp(e, ast.Add(), ast.Constant(1)))]


def _range_exclusive(n: ast.AST) -> list:
    j = _range_end(n)
    if j is None:
        return []
    e = n.args[j]
    if _plus_one(e):
        return [_with_end(n, j, e.left)]
    if _minus_one(e):
        return []
    return [_with_end(n, j, ast.BinOp(e, ast.Sub(), ast.Constant(1)))]


def _div_swap(src: type, dst: type) -> Callable[[ast.AST], list]:
    def op(n: ast.AST) -> list:
        if isinstance(n, ast.BinOp) and isinstance(n.op, src):
            return [ast.BinOp(n.left, dst(), n.right)]
        if isinstance(n, ast.AugAssign) and isinstance(n.op, src):
            return [ast.AugAssign(n.target, dst(), n.value)]
        return []
    return op


_true_div = _div_swap(ast.FloorDiv, ast.Div)
_floor_div = _div_swap(ast.Div, ast.FloorDiv)


def _falsy_check(n: ast.AST) -> list:
    """``x is None`` → ``not x``; ``x is not None`` → ``x``."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and _is_none(n.comparators[0]):
        if isinstance(n.ops[0], ast.Is):
            return [ast.UnaryOp(ast.Not(), n.left)]
        if isinstance(n.ops[0], ast.IsNot):
            return [n.left]
    return []


def _none_check(n: ast.AST) -> list:
    """``not x`` → ``x is None``."""
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return [ast.Compare(n.operand, [ast.Is()], [ast.Constant(None)])]
    return []


def _zero_check(n: ast.AST) -> list:
    """``x is None`` ↔ ``x == 0``."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1:
        if isinstance(n.ops[0], ast.Is) and _is_none(n.comparators[0]):
            return [ast.Compare(n.left, [ast.Eq()], [ast.Constant(0)])]
        if isinstance(n.ops[0], ast.Eq) and _is_const(n.comparators[0], 0):
            return [ast.Compare(n.left, [ast.Is()], [ast.Constant(None)])]
    return []


def _is_sort_call(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == "sorted")
        or (isinstance(n.func, ast.Attribute) and n.func.attr == "sort"))


def _reverse_kw(n: ast.Call) -> int | None:
    for j, k in enumerate(n.keywords):
        if k.arg == "reverse":
            return j
    return None


def _drop_reverse(n: ast.AST) -> list:
    if _is_sort_call(n):
        j = _reverse_kw(n)
        if j is not None and not (isinstance(n.keywords[j].value, ast.Constant) and not n.keywords[j].value.value):
            return [ast.Call(n.func, n.args, [k for i, k in enumerate(n.keywords) if i != j])]
    return []


def _add_reverse(n: ast.AST) -> list:
    if _is_sort_call(n):
        j = _reverse_kw(n)
        if j is None:
            return [ast.Call(n.func, n.args, list(n.keywords) + [ast.keyword("reverse", ast.Constant(True))])]
        v = n.keywords[j].value
        if isinstance(v, ast.Constant) and not v.value:
            kws = list(n.keywords)
            kws[j] = ast.keyword("reverse", ast.Constant(True))
            return [ast.Call(n.func, n.args, kws)]
    return []


def _is_lower(e: ast.AST) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("lower", "casefold") \
        and not e.args and not e.keywords


def _stringish(e: ast.AST) -> bool:
    """Could be a string operand of a comparison (not a number, None or bool literal)."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, str)
    return not isinstance(e, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
                              ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp))


def _case_compare(n: ast.AST) -> bool:
    return isinstance(n, ast.Compare) and len(n.ops) == 1 \
        and isinstance(n.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn))


def _case_sensitive(n: ast.AST) -> list:
    """Remove ``.lower()`` from both sides of a comparison."""
    if _case_compare(n) and (_is_lower(n.left) or _is_lower(n.comparators[0])):
        strip = (lambda e: e.func.value if _is_lower(e) else e)
        return [ast.Compare(strip(n.left), n.ops, [strip(n.comparators[0])])]
    return []


def _lowered(e: ast.AST) -> ast.AST:
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return ast.Constant(e.value.lower())
    return ast.Call(ast.Attribute(e, "lower", ast.Load()), [], [])


def _case_insensitive(n: ast.AST) -> list:
    """Add ``.lower()`` to both sides of a string comparison."""
    if _case_compare(n) and not _is_lower(n.left) and not _is_lower(n.comparators[0]) \
            and _stringish(n.left) and _stringish(n.comparators[0]) \
            and not (isinstance(n.left, ast.Constant) and isinstance(n.comparators[0], ast.Constant)):
        return [ast.Compare(_lowered(n.left), n.ops, [_lowered(n.comparators[0])])]
    return []


def _first_k(n: ast.AST) -> list:
    """``xs[-k:]`` → ``xs[:k]``."""
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice):
        s = n.slice
        if s.upper is None and s.step is None and isinstance(s.lower, ast.UnaryOp) and isinstance(s.lower.op, ast.USub):
            return [ast.Subscript(n.value, ast.Slice(None, s.lower.operand, None), n.ctx)]
    return []


def _last_k(n: ast.AST) -> list:
    """``xs[:k]`` → ``xs[-k:]``."""
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice):
        s = n.slice
        if s.lower is None and s.step is None and s.upper is not None:
            return [ast.Subscript(n.value, ast.Slice(ast.UnaryOp(ast.USub(), s.upper), None, None), n.ctx)]
    return []


def _is_get(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" \
        and 1 <= len(n.args) <= 2 and not n.keywords and not any(isinstance(a, ast.Starred) for a in n.args)


def _subscript(n: ast.AST) -> list:
    """``d.get(k, default)`` / ``d.get(k)`` → ``d[k]``."""
    if _is_get(n):
        return [ast.Subscript(n.func.value, n.args[0], ast.Load())]
    return []


def _get_default(n: ast.AST) -> list:
    """``d[k]`` → ``d.get(k, 0)``; ``d.get(k)`` → ``d.get(k, 0)``."""
    if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and not isinstance(n.slice, ast.Slice):
        return [ast.Call(ast.Attribute(n.value, "get", ast.Load()), [n.slice, ast.Constant(0)], [])]
    if _is_get(n) and len(n.args) == 1:
        return [ast.Call(n.func, [n.args[0], ast.Constant(0)], [])]
    return []


#: Named one-node operators (the scripted backbone's slips use them by name).
OPERATORS: dict[str, Callable[[ast.AST], list]] = {
    "weaken": _weaken,                      # >= → >, <= → <
    "strengthen": _strengthen,              # > → >=, < → <=
    "range_inclusive": _range_inclusive,    # range(a, b) → range(a, b + 1)
    "range_exclusive": _range_exclusive,    # range(a, b + 1) → range(a, b)
    "true_div": _true_div,                  # // → /
    "floor_div": _floor_div,                # / → //
    "falsy_check": _falsy_check,            # x is None → not x
    "none_check": _none_check,              # not x → x is None
    "zero_check": _zero_check,              # x is None ↔ x == 0
    "drop_reverse": _drop_reverse,          # sorted(x, reverse=True) → sorted(x)
    "add_reverse": _add_reverse,            # sorted(x) → sorted(x, reverse=True)
    "case_sensitive": _case_sensitive,      # a.lower() == b.lower() → a == b
    "case_insensitive": _case_insensitive,  # a == b → a.lower() == b.lower()
    "first_k": _first_k,                    # xs[-k:] → xs[:k]
    "last_k": _last_k,                      # xs[:k] → xs[-k:]
    "subscript": _subscript,                # d.get(k, 0) → d[k]
    "get_default": _get_default,            # d[k] → d.get(k, 0)
}

#: The repair operators :func:`rule_edits` applies first, in this order at every node.
RULE_OPERATORS: tuple[str, ...] = tuple(OPERATORS)


# --------------------------------------------------------------------------- distractor operators
#
# Plausible one-node edits that a model (or a mutation-testing rule set: relational / logical /
# arithmetic operator replacement, constant ± 1, slice-bound changes) also tries on a failing
# function, and that are usually wrong. They are *not* inverses of the scripted backbone's slips;
# :func:`rule_edits` lists their edits after every repair operator's edit.

_ORDER_CMP = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _int_const(n: ast.AST) -> bool:
    return isinstance(n, ast.Constant) and type(n.value) is int


def _add_const(e: ast.AST, d: int) -> ast.AST | None:
    """``e + d`` folded into a literal or an existing ``± c`` (``None`` for a negative literal)."""
    if _int_const(e):
        return ast.Constant(e.value + d) if e.value + d >= 0 else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)) and _int_const(e.right):
        c = e.right.value if isinstance(e.op, ast.Add) else -e.right.value
        c += d
        if c == 0:
            return e.left
        return ast.BinOp(e.left, ast.Add() if c > 0 else ast.Sub(), ast.Constant(abs(c)))
    return ast.BinOp(e, ast.Add() if d > 0 else ast.Sub(), ast.Constant(abs(d)))


def _mirror(n: ast.AST) -> list:
    """``a < b`` ↔ ``a > b``, ``a <= b`` ↔ ``a >= b`` (the comparison's direction reversed)."""
    return _flip_ops({ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE})(n)


_negate_cmp = _flip_ops({ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
                         ast.LtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is})


def _negate(n: ast.AST) -> list:
    """The condition negated: ``==`` ↔ ``!=``, ``<`` ↔ ``>=``, ``>`` ↔ ``<=``, ``in`` ↔ ``not in``,
    ``is`` ↔ ``is not``; ``not x`` → ``x``."""
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return [n.operand]
    return _negate_cmp(n)


def _shift_bound(n: ast.AST) -> list:
    """The right side of an order comparison moved by one, in the direction that is *not* the
    same as the inclusivity flip on integers: ``x > e`` → ``x > e + 1``, ``x >= e`` →
    ``x >= e - 1``, ``x < e`` → ``x < e - 1``, ``x <= e`` → ``x <= e + 1``."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], _ORDER_CMP):
        d = 1 if isinstance(n.ops[0], (ast.Gt, ast.LtE)) else -1
        new = _add_const(n.comparators[0], d)
        if new is not None:
            return [ast.Compare(n.left, n.ops, [new])]
    return []


def _skip_int_field(n: ast.AST, field: str, j: int | None) -> bool:
    if isinstance(n, ast.Compare) and any(isinstance(o, _ORDER_CMP) for o in n.ops):
        return True  # order comparisons: _shift_bound's direction only
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)) and field == "right":
        return True  # the ``± 1`` of ``e ± 1``: _drop_pm1
    if isinstance(n, ast.AugAssign):
        return True  # ``count += 1`` → ``count += 2`` is not a plausible repair
    if field == "args" and _range_end(n) == j:
        return True  # the range operators own the end
    return False


def _int_literal(n: ast.AST) -> list:
    """An integer literal ± 1 (``count = 0`` → ``count = 1``, ``d.get(k, 0)`` → ``d.get(k, 1)``,
    ``% 2 == 0`` → ``% 2 == 1``); never below zero, never a bool, not inside an order comparison,
    not the ``1`` of ``e ± 1``, not an augmented assignment, not a ``range`` end."""
    out = []
    for field, value in ast.iter_fields(n):
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for j, v in items:
            if not _int_const(v) or _skip_int_field(n, field, j):
                continue
            for w in (v.value + 1, v.value - 1):
                if w < 0:
                    continue
                new = copy.copy(n)
                if j is None:
                    setattr(new, field, ast.Constant(w))
                else:
                    setattr(new, field, value[:j] + [ast.Constant(w)] + value[j + 1:])
                out.append(new)
    return out


def _drop_pm1(n: ast.AST) -> list:
    """``e + 1`` → ``e``, ``e - 1`` → ``e``."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)) and _is_const(n.right, 1):
        return [n.left]
    return []


def _range_start(n: ast.AST) -> list:
    """``range(a, b)`` → ``range(a + 1, b)``, ``range(a - 1, b)`` (the start off by one)."""
    if _range_end(n) == 1:
        return [_with_end(n, 0, new) for d in (1, -1) if (new := _add_const(n.args[0], d)) is not None]
    return []


def _slice_bounds(n: ast.AST):
    """``(bound, rebuild)`` for each present bound of a step-less slice ``n`` (lower first), where
    ``rebuild(new)`` is ``n`` with that bound replaced by ``new``."""
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice) and n.slice.step is None:
        s = n.slice
        if s.lower is not None:
            yield s.lower, lambda new: ast.Subscript(n.value, ast.Slice(new, s.upper, None), n.ctx)
        if s.upper is not None:
            yield s.upper, lambda new: ast.Subscript(n.value, ast.Slice(s.lower, new, None), n.ctx)


def _slice_bound(n: ast.AST) -> list:
    """A slice bound ± 1: ``xs[:k]`` → ``xs[:k + 1]``, ``xs[:k - 1]``; ``xs[-k:]`` → ``xs[-k + 1:]``, ..."""
    return [rebuild(new) for b, rebuild in _slice_bounds(n) for d in (1, -1)
            if (new := _add_const(b, d)) is not None]


def _slice_side(n: ast.AST) -> list:
    """``xs[a:]`` ↔ ``xs[:a]`` (the same bound on the other side: ``xs[-k:]`` → ``xs[:-k]``)."""
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice) and n.slice.step is None:
        s = n.slice
        if s.lower is not None and s.upper is None:
            return [ast.Subscript(n.value, ast.Slice(None, s.lower, None), n.ctx)]
        if s.lower is None and s.upper is not None:
            return [ast.Subscript(n.value, ast.Slice(s.upper, None, None), n.ctx)]
    return []


_BUILTIN_SWAP = {"min": "max", "max": "min", "any": "all", "all": "any"}


def _swap_builtin(n: ast.AST) -> list:
    """``min`` ↔ ``max``, ``any`` ↔ ``all``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _BUILTIN_SWAP:
        return [ast.Call(ast.Name(_BUILTIN_SWAP[n.func.id], ast.Load()), n.args, n.keywords)]
    return []


def _bool_op(n: ast.AST) -> list:
    """``and`` ↔ ``or``."""
    if isinstance(n, ast.BoolOp):
        return [ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(), n.values)]
    return []


def _one_sided_case(n: ast.AST) -> list:
    """Case folding on one side only: ``a.lower() == b.lower()`` → ``a == b.lower()`` /
    ``a.lower() == b``; ``a == b`` → ``a.lower() == b`` / ``a == b.lower()``."""
    if not _case_compare(n):
        return []
    left, right = n.left, n.comparators[0]
    if _is_lower(left) and _is_lower(right):
        return [ast.Compare(left.func.value, n.ops, [right]), ast.Compare(left, n.ops, [right.func.value])]
    if _is_lower(left) or _is_lower(right) or not (_stringish(left) and _stringish(right)) \
            or isinstance(left, ast.Constant) or isinstance(right, ast.Constant):
        return []
    return [ast.Compare(_lowered(left), n.ops, [right]), ast.Compare(left, n.ops, [_lowered(right)])]


def _round_div(n: ast.AST) -> list:
    """``a / b`` → ``round(a / b)``."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
        return [ast.Call(ast.Name("round", ast.Load()), [n], [])]
    return []


def _float_floor(n: ast.AST) -> list:
    """``a // b`` → ``float(a // b)``."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv):
        return [ast.Call(ast.Name("float", ast.Load()), [n], [])]
    return []


def _ceil_div(n: ast.AST) -> list:
    """``a / b`` or ``a // b`` → ``-(-a // b)`` (ceiling division)."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)):
        return [ast.UnaryOp(ast.USub(), ast.BinOp(ast.UnaryOp(ast.USub(), n.left), ast.FloorDiv(), n.right))]
    return []


def _reversed_sort(n: ast.AST) -> list:
    """``sorted(x, ...)`` → ``list(reversed(x))`` (reversing instead of sorting)."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "sorted" and len(n.args) == 1 \
            and not isinstance(n.args[0], ast.Starred):
        return [ast.Call(ast.Name("list", ast.Load()), [ast.Call(ast.Name("reversed", ast.Load()), n.args, [])], [])]
    return []


def _get_no_default(n: ast.AST) -> list:
    """A missing key's default changed: ``d[k]`` → ``d.get(k)``, ``d.get(k, 1)``, ``d.get(k, -1)``;
    ``d.get(k, v)`` → ``d.get(k)``, ``d.get(k, -1)``."""
    minus_one = ast.UnaryOp(ast.USub(), ast.Constant(1))
    if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and not isinstance(n.slice, ast.Slice):
        get = ast.Attribute(n.value, "get", ast.Load())
        return [ast.Call(get, [n.slice], []), ast.Call(get, [n.slice, ast.Constant(1)], []),
                ast.Call(get, [n.slice, minus_one], [])]
    if _is_get(n) and len(n.args) == 2:
        return [ast.Call(n.func, [n.args[0]], []), ast.Call(n.func, [n.args[0], minus_one], [])]
    return []


def _falsy_zero(n: ast.AST) -> list:
    """``not x`` → ``x == 0``."""
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return [ast.Compare(n.operand, [ast.Eq()], [ast.Constant(0)])]
    return []


def _range_shift(n: ast.AST) -> list:
    """``range(a, b)`` → ``range(a + 1, b + 1)``, ``range(a - 1, b - 1)`` (a 0- vs 1-based shift)."""
    if _range_end(n) == 1:
        out = []
        for d in (1, -1):
            a, b = _add_const(n.args[0], d), _add_const(n.args[1], d)
            if a is not None and b is not None:
                out.append(ast.Call(n.func, [a, b] + list(n.args[2:]), n.keywords))
        return out
    return []


def _mod_div(n: ast.AST) -> list:
    """``a / b``, ``a // b`` → ``a % b`` (quotient and remainder confused)."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)):
        return [ast.BinOp(n.left, ast.Mod(), n.right)]
    return []


def _swap_div(n: ast.AST) -> list:
    """``a / b`` → ``b / a``, ``a // b`` → ``b // a`` (numerator and denominator swapped)."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)):
        return [ast.BinOp(n.right, n.op, n.left)]
    return []


def _explicit_falsy(n: ast.AST) -> list:
    """``not x`` → ``x is None or x == 0`` (spelled out, same meaning for numbers)."""
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        x = n.operand
        return [ast.BoolOp(ast.Or(), [ast.Compare(x, [ast.Is()], [ast.Constant(None)]),
                                      ast.Compare(x, [ast.Eq()], [ast.Constant(0)])])]
    return []


def _is_to_eq(n: ast.AST) -> list:
    """``x is None`` → ``x == None``, ``x is not None`` → ``x != None``."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and _is_none(n.comparators[0]) \
            and isinstance(n.ops[0], (ast.Is, ast.IsNot)):
        return [ast.Compare(n.left, [ast.Eq() if isinstance(n.ops[0], ast.Is) else ast.NotEq()], n.comparators)]
    return []


def _is_sorted_call(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "sorted" and len(n.args) == 1 \
        and not isinstance(n.args[0], ast.Starred)


def _sort_variants(n: ast.AST) -> list:
    """``sorted(x, ...)`` → ``sorted(set(x), ...)`` (duplicates dropped), ``sorted(x, ..., key=str)``
    (sorted as text) and ``sorted(x, ..., key=abs)`` (by magnitude)."""
    if not _is_sorted_call(n):
        return []
    out = [ast.Call(n.func, [ast.Call(ast.Name("set", ast.Load()), n.args, [])], n.keywords)]
    if not any(k.arg == "key" for k in n.keywords):
        for key in ("str", "abs"):
            out.append(ast.Call(n.func, n.args, list(n.keywords) + [ast.keyword("key", ast.Name(key, ast.Load()))]))
    return out


def _eq_to_in(n: ast.AST) -> list:
    """``a == b`` → ``a in b`` on strings (equality read as containment)."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.Eq) \
            and _stringish(n.left) and _stringish(n.comparators[0]) \
            and not isinstance(n.left, ast.Constant) and not isinstance(n.comparators[0], ast.Constant):
        return [ast.Compare(n.left, [ast.In()], n.comparators)]
    return []


def _slice_negate(n: ast.AST) -> list:
    """A slice bound's sign flipped: ``xs[:k]`` → ``xs[:-k]``, ``xs[-k:]`` → ``xs[k:]``."""
    return [rebuild(b.operand if isinstance(b, ast.UnaryOp) and isinstance(b.op, ast.USub) else ast.UnaryOp(ast.USub(), b))
            for b, rebuild in _slice_bounds(n) if not _is_const(b, 0)]


def _sorted_view(n: ast.AST) -> list:
    """``d.items()`` / ``d.values()`` / ``d.keys()`` → ``sorted(...)`` (iterate a dict in sorted order)."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("items", "values", "keys") \
            and not n.args and not n.keywords:
        return [ast.Call(ast.Name("sorted", ast.Load()), [n], [])]
    return []


#: Named distractor operators (not used by any slip), applied by :func:`rule_edits` after
#: every repair operator, in this order at every node.
DISTRACTORS: dict[str, Callable[[ast.AST], list]] = {
    "mirror": _mirror,                  # a < b ↔ a > b, a <= b ↔ a >= b
    "negate": _negate,                  # == ↔ !=, < ↔ >=, > ↔ <=, in ↔ not in, is ↔ is not, not x → x
    "shift_bound": _shift_bound,        # x > e → x > e + 1 (not the inclusivity-equivalent direction)
    "int_literal": _int_literal,        # an integer literal ± 1
    "drop_pm1": _drop_pm1,              # e + 1 → e, e - 1 → e
    "range_start": _range_start,        # range(a, b) → range(a ± 1, b)
    "slice_bound": _slice_bound,        # xs[:k] → xs[:k ± 1]
    "slice_side": _slice_side,          # xs[a:] ↔ xs[:a]
    "swap_builtin": _swap_builtin,      # min ↔ max, any ↔ all
    "bool_op": _bool_op,                # and ↔ or
    "one_sided_case": _one_sided_case,  # .lower() on one side of a comparison only
    "round_div": _round_div,            # a / b → round(a / b)
    "float_floor": _float_floor,        # a // b → float(a // b)
    "ceil_div": _ceil_div,              # a / b, a // b → -(-a // b)
    "reversed_sort": _reversed_sort,    # sorted(x) → list(reversed(x))
    "get_no_default": _get_no_default,  # d[k], d.get(k, v) → d.get(k), d.get(k, ±1)
    "falsy_zero": _falsy_zero,          # not x → x == 0
    "range_shift": _range_shift,        # range(a, b) → range(a ± 1, b ± 1)
    "mod_div": _mod_div,                # a / b, a // b → a % b
    "swap_div": _swap_div,              # a / b → b / a
    "explicit_falsy": _explicit_falsy,  # not x → x is None or x == 0
    "is_to_eq": _is_to_eq,              # x is None → x == None
    "sort_variants": _sort_variants,    # sorted(x) → sorted(set(x)), sorted(x, key=str / abs)
    "eq_to_in": _eq_to_in,              # a == b → a in b
    "slice_negate": _slice_negate,      # xs[:k] → xs[:-k], xs[-k:] → xs[k:]
    "sorted_view": _sorted_view,        # d.items() → sorted(d.items())
}

#: The distractor operators :func:`rule_edits` applies after the repair operators.
DISTRACTOR_OPERATORS: tuple[str, ...] = tuple(DISTRACTORS)

_ALL_OPERATORS: dict[str, Callable[[ast.AST], list]] = {**OPERATORS, **DISTRACTORS}


def _preorder(node: ast.AST) -> Iterator[ast.AST]:
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _preorder(child)


def _roots(loc: _Loc) -> tuple[str | None, ast.AST | None]:
    """(field, node) an operator may rewrite in a unit: the header's test/iter, or the statement."""
    if loc.kind in ("if", "elif", "while"):
        return "test", loc.node.test
    if loc.kind == "for":
        return "iter", loc.node.iter
    if loc.kind == "with":
        return None, None
    return None, loc.node


def _variant_text(loc: _Loc, field: str | None, new_root: ast.AST) -> str | None:
    try:
        if field is None:
            return ast.unparse(new_root)
        st = copy.copy(loc.node)
        setattr(st, field, new_root)
        return header_of(st, loc.kind)
    except (ValueError, AttributeError, TypeError, RecursionError):
        return None


def _unit_variants(loc: _Loc, ops: tuple[str, ...]) -> Iterator[str]:
    field, root = _roots(loc)
    if root is None:
        return
    for target in _preorder(root):
        for name in ops:
            for repl in _ALL_OPERATORS[name](target):
                new_root = repl if target is root else copy.deepcopy(root, {id(target): repl})
                text = _variant_text(loc, field, new_root)
                if text is not None:
                    yield text


@functools.lru_cache(maxsize=_CACHE)
def _rule_edits(action: str, ops: tuple[str, ...]) -> tuple[tuple[int, str], ...]:
    locs = _locate(_parse(action))
    out: list[tuple[int, str]] = []
    seen: set[tuple[int, str]] = set()
    for i, loc in enumerate(locs):
        old = _unit_text(loc)
        for text in _unit_variants(loc, ops):
            key = (i, text)
            if text != old and key not in seen:
                try:  # every proposal must be applicable
                    replace_unit(action, i, text)
                except EditError:
                    continue
                seen.add(key)
                out.append(key)
    return tuple(out)


@functools.lru_cache(maxsize=_CACHE)
def _all_rule_edits(action: str) -> tuple[tuple[int, str], ...]:
    repair = _rule_edits(action, RULE_OPERATORS)
    seen = set(repair)
    return repair + tuple(e for e in _rule_edits(action, DISTRACTOR_OPERATORS) if e not in seen)


def rule_edits(action: str, env: Any = None) -> list[tuple[int, str]]:
    """Every rule operator's one-unit alternative ``(unit_index, new_unit_text)``
    (``[]`` when the action does not parse). ``env`` is unused.

    First the repair operators' edits (:data:`RULE_OPERATORS`) in unit order, then the
    distractor operators' edits (:data:`DISTRACTOR_OPERATORS`) in unit order, without
    repeats: the repair edits keep the positions they had before distractors existed."""
    try:
        return list(_all_rule_edits(action))
    except EditError:
        return []


def distractor_edits(action: str, env: Any = None) -> list[tuple[int, str]]:
    """The distractor part of :func:`rule_edits` (what follows the repair operators' edits)."""
    try:
        return list(_all_rule_edits(action)[len(_rule_edits(action, RULE_OPERATORS)):])
    except EditError:
        return []


@functools.lru_cache(maxsize=_CACHE)
def apply_operator(action: str, name: str) -> str | None:
    """``action`` after operator ``name`` at its first applicable node (units in order,
    nodes in pre-order), or ``None`` when it applies nowhere or ``action`` does not parse."""
    try:
        edits = _rule_edits(action, (name,))
    except EditError:
        return None
    if not edits:
        return None
    i, text = edits[0]
    return replace_unit(action, i, text)


# --------------------------------------------------------------------------- signatures and transfer

_SKIP_TOKENS = (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
                tokenize.ENDMARKER)


@functools.lru_cache(maxsize=_CACHE)
def spaced(text: str) -> str:
    """``text``'s Python tokens joined by single spaces (``a.b(c)`` → ``a . b ( c )``), so that
    the generic signature tokenizer sees attribute names as separate tokens."""
    try:
        toks = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _SKIP_TOKENS]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return text
    return " ".join(toks)


_AUG = re.compile(r"(\*\*|//|>>|<<|[-+*/%&|^@:]) =(?!=)")
_PREFIX = re.compile(r"(?<![\w.])([rRbBuUfF]|[rR][bBfF]|[bBfF][rR]) (?=['\"])")


def _rejoin(text: str) -> str:
    """Undo the generic tokenizer's splits that Python does not accept (``+ =``, ``f 'x'``)."""
    return _PREFIX.sub(r"\1", _AUG.sub(r"\1=", text))


@functools.lru_cache(maxsize=_CACHE)
def signature(unit_text: str) -> str:
    """Masked shape of a Python unit: identifiers (not in :data:`KEYWORDS`), strings and
    numbers replaced by placeholders (``if value >= limit:`` → ``if <id> >= <id> :``)."""
    return _AUG.sub(r"\1=", masked_signature(spaced(unit_text), KEYWORDS))


@functools.lru_cache(maxsize=_CACHE)
def transfer(before: str, after: str, target: str) -> str | None:
    try:
        locs = _units(target)
    except EditError:
        return None
    b, a = spaced(before), spaced(after)
    sig = masked_signature(b, KEYWORDS)
    for i, u in enumerate(locs):
        t = spaced(u.text)
        if masked_signature(t, KEYWORDS) != sig:
            continue
        new = bind_and_rewrite(b, a, t, KEYWORDS)
        if new is None:
            continue
        try:
            out = replace_unit(target, i, _rejoin(new))
        except EditError:
            continue
        return out
    return None


@functools.lru_cache(maxsize=_CACHE)
def entry_name(source: str) -> str | None:
    """Name of the first top-level function of ``source`` (``None`` if none or unparsable)."""
    try:
        tree = ast_parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return st.name
    return None


class PythonEdits(EditModel):
    """One-decision-unit edits of a Python function (see the module docstring); ``env`` is unused."""

    name = "python"

    def units(self, action: str) -> list[Unit]:
        return units(action)

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        return replace_unit(action, index, new_text)

    def normalize(self, action: str) -> str:
        return normalize(action)

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        return rule_edits(action, env)

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        return transfer(before, after, target)

    def signature(self, unit_text: str) -> str:
        return signature(unit_text)

    def apply(self, action: str, operator: str) -> str | None:
        """``action`` after the named operator (:data:`OPERATORS` or :data:`DISTRACTORS`) at its
        first applicable node."""
        if operator not in _ALL_OPERATORS:
            raise KeyError(f"unknown Python edit operator {operator!r}; known: {sorted(_ALL_OPERATORS)}")
        return apply_operator(action, operator)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PythonEdits)

    def __hash__(self) -> int:
        return hash(PythonEdits)

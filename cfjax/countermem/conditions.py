"""Applicability conditions for CounterMem records (papers/countermem.md §3.3, App. B.2, D.8).

A stored correction carries a condition ``c``: a requirement of the *new* task
that must hold before the correction is applied. Retrieval drops every record
whose condition is false for the current task (§3.4). A condition is tested
against the task's observable attributes (:attr:`cfjax.domains.base.Task.attrs`),
a mapping of ``str`` to ``str | int | float | bool | tuple[str, ...]`` that
always contains ``"question"`` (the question text).

Conditions are written by the LLM (the ``CONDITION:`` line of DISTIL_RECORD),
so this module is a small, *safe* language: text is tokenised and parsed by a
hand-written recursive-descent parser into frozen dataclasses; nothing is ever
passed to ``eval``/``exec``/``compile`` or imported.

Grammar (keywords are case-insensitive; identifiers are ASCII, matched
case-insensitively and stored in lower case)::

    condition := "none" | expr
    expr      := term ("or" term)*
    term      := factor ("and" factor)*
    factor    := "not" factor | "(" expr ")" | atom
    atom      := "question" "contains" STRING
               | IDENT ("=" | "!=") (STRING | NUMBER | "true" | "false")
               | IDENT ("<" | "<=" | ">" | ">=") NUMBER
               | IDENT "in" "[" STRING ("," STRING)* "]"
               | "has" IDENT

    STRING := '"' ( any character except '"' and '\\' | '\\"' | '\\\\' )* '"'
    NUMBER := -?[0-9]+(.[0-9]*)?([eE][+-]?[0-9]+)?  |  -?.[0-9]+([eE][+-]?[0-9]+)?
    IDENT  := [a-z_][a-z0-9_]*   (not a keyword: none and or not contains in has true false)

``==`` is accepted as a spelling of ``=``. ``not`` binds tighter than ``and``,
which binds tighter than ``or``.

Examples::

    none
    question contains "at least" and column_type = "numeric"
    question contains "at least" and not question contains "more than"
    tables = "employees"                      # tuple attr: membership
    n_tables >= 2 and dialect in ["sqlite", "duckdb"]
    has order_by or (aggregate != "count" and not has group_by)

Evaluation semantics (``Condition.evaluate(attrs)``):

* ``none`` (:data:`UNIVERSAL`) is true for every task.
* ``question contains "p"``: ``p`` occurs in ``attrs["question"]`` as whole
  words (:func:`cfjax.types.contains_phrase`: word boundaries at both ends, after
  case folding and collapsing whitespace runs on both sides). Literal: "no more
  than" contains the words "more than".
* String equality and ``in`` are also case-folded and whitespace-normalised.
  For a tuple-valued attribute ``a = "v"`` means ``"v"`` is an element,
  ``a != "v"`` means it is not, and ``a in [...]`` means some element is listed.
* ``true``/``false`` compare only with ``bool`` attributes and numbers only with
  ``int``/``float`` attributes (``bool`` is not a number here); ``<``, ``<=``,
  ``>``, ``>=`` need a numeric attribute. NaN never satisfies an atom.
* A **missing** attribute (absent or ``None``) makes *every atom false* -- also
  ``a != "v"`` and ``has a``: a requirement that cannot be checked does not
  hold. Only ``not`` turns such a false into true, so ``not a = "v"`` is true
  for a task without ``a`` while ``a != "v"`` is false.
* A **type mismatch** (a string attribute compared with a number, a number with
  ``true``, a tuple with ``<``...) makes the atom false; evaluation never raises
  for attribute values.
* ``has a``: present and truthy -- a non-blank string, ``True``, a non-zero
  number, a non-empty tuple.

``str(cond)`` is a canonical text (lower-case keywords, single spaces, minimal
parentheses, ``=`` for ``==``, ``repr`` of numbers) and
``parse_condition(str(cond)) == cond`` for every parsed condition. Limits: at
most :data:`MAX_LENGTH` characters (in the text and in the canonical form) and
at most :data:`MAX_DEPTH` nested ``(`` / ``not`` levels.

Length: one module on purpose — the condition language's AST, evaluator, tokenizer and parser are one
grammar (App. B.2); the round-trip tests hold them together.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from cfjax.types import contains_phrase

__all__ = [
    "And",
    "Compare",
    "Condition",
    "ConditionError",
    "Contains",
    "Has",
    "InList",
    "KEYWORDS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "Not",
    "Or",
    "UNIVERSAL",
    "Universal",
    "parse_condition",
]

MAX_LENGTH = 500
"""Longest accepted condition text (characters), raw and canonical."""

MAX_DEPTH = 32
"""Deepest accepted nesting of ``(`` and ``not``."""

KEYWORDS = frozenset({"none", "and", "or", "not", "contains", "in", "has", "true", "false"})
"""Reserved words; never usable as attribute names."""

Literal = Union[str, int, float, bool]

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CANON_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]*\Z")
_NUMBER_RE = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_EQ_OPS = ("=", "!=")
_ORD_OPS = ("<", "<=", ">", ">=")
_OPS = _EQ_OPS + _ORD_OPS


class ConditionError(ValueError):
    """A condition text that does not parse, or an invalid condition node.

    Attributes:
      problem: what is wrong, without the position.
      column: 1-based column of the problem in the text, or ``None``.
      text: the offending text (``None`` for node construction errors).
    """

    def __init__(self, problem: str, column: int | None = None, text: str | None = None) -> None:
        self.problem = problem
        self.column = column
        self.text = text
        msg = problem if column is None else f"{problem} at column {column}"
        if text is not None:
            shown = text if len(text) <= 120 else text[:117] + "..."
            msg += f" in condition {shown!r}"
        super().__init__(msg)


# --------------------------------------------------------------------------- #
# helpers                                                                      #
# --------------------------------------------------------------------------- #


def _norm(s: str) -> str:
    """Case-fold and collapse whitespace (the comparison form of strings)."""
    return " ".join(s.casefold().split())


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render_literal(v: Literal) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return _quote(v)
    return repr(v)


def _lit_key(v: Literal) -> tuple[str, Any]:
    """Equality key that keeps ``true`` apart from ``1`` (``True == 1`` in Python)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, str):
        return ("s", v)
    return ("n", v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_ident(name: Any) -> None:
    if not isinstance(name, str) or not _CANON_IDENT_RE.match(name):
        raise ConditionError(f"invalid attribute name {name!r} (expected [a-z_][a-z0-9_]*)")
    if name in KEYWORDS:
        raise ConditionError(f"{name!r} is a keyword and cannot name an attribute")


def _check_literal(v: Any) -> None:
    if isinstance(v, (bool, str)):
        return
    if _is_number(v):
        if isinstance(v, float) and not math.isfinite(v):
            raise ConditionError(f"number {v!r} is not finite")
        return
    raise ConditionError(f"invalid value {v!r} (expected str, int, float or bool)")


_MISSING = object()


def _lookup(attrs: Mapping[str, Any], name: str) -> Any:
    if not isinstance(attrs, Mapping):
        raise TypeError(f"attrs must be a Mapping, not {type(attrs).__name__}")
    v = attrs.get(name, _MISSING)
    return _MISSING if v is None else v


def _is_seq(v: Any) -> bool:
    return isinstance(v, (tuple, list, frozenset, set))


# --------------------------------------------------------------------------- #
# AST                                                                          #
# --------------------------------------------------------------------------- #


class Condition:
    """Base class of condition nodes (all frozen, hashable dataclasses)."""

    __slots__ = ()
    _prec: ClassVar[int] = 3  # 0 or, 1 and, 2 not, 3 atom

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:
        """Whether the condition holds for a task with these attributes.

        Args:
          attrs: the task's observable attributes (``Task.attrs``).

        Returns:
          The truth value; never raises for any attribute values.

        Raises:
          TypeError: if ``attrs`` is not a mapping.
        """
        raise NotImplementedError

    @property
    def is_universal(self) -> bool:
        """True only for ``none``: the record applies to every task."""
        return False

    def attributes(self) -> frozenset[str]:
        """Names of the attributes the condition reads."""
        raise NotImplementedError

    def _render(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self._render()


@dataclass(frozen=True)
class Universal(Condition):
    """``none``: no requirement, true for every task."""

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        return True

    @property
    def is_universal(self) -> bool:  # noqa: D102
        return True

    def attributes(self) -> frozenset[str]:  # noqa: D102
        return frozenset()

    def _render(self) -> str:
        return "none"


UNIVERSAL: Universal = Universal()
"""The empty condition (``none``)."""


@dataclass(frozen=True)
class Contains(Condition):
    """``question contains "phrase"``: case-insensitive, whitespace-normalised, on word boundaries.

    Attributes:
      phrase: the phrase as written; must contain a non-whitespace character.
    """

    phrase: str

    def __post_init__(self) -> None:
        if not isinstance(self.phrase, str):
            raise ConditionError(f"phrase must be a string, not {type(self.phrase).__name__}")
        if not self.phrase.strip():
            raise ConditionError("'question contains' needs a non-empty phrase")

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        q = _lookup(attrs, "question")
        return isinstance(q, str) and contains_phrase(q, self.phrase)

    def attributes(self) -> frozenset[str]:  # noqa: D102
        return frozenset({"question"})

    def _render(self) -> str:
        return f"question contains {_quote(self.phrase)}"


@dataclass(frozen=True, eq=False)
class Compare(Condition):
    """``name op value`` with op one of ``= != < <= > >=``.

    Attributes:
      name: attribute name.
      op: the operator (``==`` is normalised to ``=``).
      value: a str, int, float or bool; ordering operators need a number.
    """

    name: str
    op: str
    value: Literal

    def __post_init__(self) -> None:
        _check_ident(self.name)
        if self.op == "==":
            object.__setattr__(self, "op", "=")
        if self.op not in _OPS:
            raise ConditionError(f"unknown operator {self.op!r}")
        _check_literal(self.value)
        if self.op in _ORD_OPS and not _is_number(self.value):
            raise ConditionError(f"operator {self.op!r} needs a number, not {self.value!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Compare):
            return NotImplemented
        return (self.name, self.op, _lit_key(self.value)) == (other.name, other.op, _lit_key(other.value))

    def __hash__(self) -> int:
        return hash((Compare, self.name, self.op, _lit_key(self.value)))

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        v = _lookup(attrs, self.name)
        if v is _MISSING:
            return False
        lit, op = self.value, self.op
        if isinstance(lit, bool):
            if not isinstance(v, bool):
                return False
            return (v == lit) if op == "=" else (v != lit)
        if isinstance(lit, str):
            want = _norm(lit)
            if isinstance(v, str):
                hit = _norm(v) == want
            elif _is_seq(v):
                hit = any(isinstance(e, str) and _norm(e) == want for e in v)
            else:
                return False
            return hit if op == "=" else not hit
        # numeric literal
        if not _is_number(v) or (isinstance(v, float) and math.isnan(v)):
            return False
        if op == "=":
            return v == lit
        if op == "!=":
            return v != lit
        if op == "<":
            return v < lit
        if op == "<=":
            return v <= lit
        if op == ">":
            return v > lit
        return v >= lit

    def attributes(self) -> frozenset[str]:  # noqa: D102
        return frozenset({self.name})

    def _render(self) -> str:
        return f"{self.name} {self.op} {_render_literal(self.value)}"


@dataclass(frozen=True)
class InList(Condition):
    """``name in ["a", "b", ...]``: the (or some tuple element of the) value is listed.

    Attributes:
      name: attribute name.
      values: the listed strings, in the order written (at least one).
    """

    name: str
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        _check_ident(self.name)
        if isinstance(self.values, str) or not _is_seq(self.values):
            raise ConditionError("'in' needs a list of strings")
        vals = tuple(self.values)
        if not vals:
            raise ConditionError("'in' needs at least one string")
        if not all(isinstance(x, str) for x in vals):
            raise ConditionError("'in' lists only strings")
        object.__setattr__(self, "values", vals)

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        v = _lookup(attrs, self.name)
        wanted = {_norm(x) for x in self.values}
        if isinstance(v, str):
            return _norm(v) in wanted
        if _is_seq(v):
            return any(isinstance(e, str) and _norm(e) in wanted for e in v)
        return False

    def attributes(self) -> frozenset[str]:  # noqa: D102
        return frozenset({self.name})

    def _render(self) -> str:
        return f"{self.name} in [{', '.join(_quote(x) for x in self.values)}]"


@dataclass(frozen=True)
class Has(Condition):
    """``has name``: the attribute is present and truthy.

    Attributes:
      name: attribute name.
    """

    name: str

    def __post_init__(self) -> None:
        _check_ident(self.name)

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        v = _lookup(attrs, self.name)
        if isinstance(v, bool):
            return v
        if isinstance(v, str):
            return bool(v.strip())
        if _is_number(v):
            return v != 0 and not (isinstance(v, float) and math.isnan(v))
        if _is_seq(v):
            return len(v) > 0
        return False

    def attributes(self) -> frozenset[str]:  # noqa: D102
        return frozenset({self.name})

    def _render(self) -> str:
        return f"has {self.name}"


def _check_operand(c: Any) -> None:
    if not isinstance(c, Condition):
        raise ConditionError(f"operand must be a Condition, not {type(c).__name__}")
    if isinstance(c, Universal):
        raise ConditionError("'none' must be the whole condition, not an operand")


@dataclass(frozen=True)
class Not(Condition):
    """``not operand``.

    Attributes:
      operand: the negated condition.
    """

    operand: Condition
    _prec: ClassVar[int] = 2

    def __post_init__(self) -> None:
        _check_operand(self.operand)

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        return not self.operand.evaluate(attrs)

    def attributes(self) -> frozenset[str]:  # noqa: D102
        return self.operand.attributes()

    def _render(self) -> str:
        inner = self.operand._render()
        return f"not ({inner})" if self.operand._prec < 2 else f"not {inner}"


@dataclass(frozen=True)
class _NAry(Condition):
    operands: tuple[Condition, ...]
    _word: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not _is_seq(self.operands) or isinstance(self.operands, (set, frozenset)):
            raise ConditionError(f"'{self._word}' needs a sequence of operands")
        ops = tuple(self.operands)
        if len(ops) < 2:
            raise ConditionError(f"'{self._word}' needs at least two operands")
        for c in ops:
            _check_operand(c)
        object.__setattr__(self, "operands", ops)

    def attributes(self) -> frozenset[str]:  # noqa: D102
        return frozenset().union(*(c.attributes() for c in self.operands))

    def _render(self) -> str:
        # a child of the same or lower precedence was parenthesised in the
        # source (chains are n-ary), so it is parenthesised again.
        parts = [f"({c._render()})" if c._prec <= self._prec else c._render() for c in self.operands]
        return f" {self._word} ".join(parts)


@dataclass(frozen=True)
class And(_NAry):
    """``a and b and ...`` (a chain is one node; parentheses make nested nodes).

    Attributes:
      operands: two or more conditions.
    """

    _word: ClassVar[str] = "and"
    _prec: ClassVar[int] = 1

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        return all(c.evaluate(attrs) for c in self.operands)


@dataclass(frozen=True)
class Or(_NAry):
    """``a or b or ...``.

    Attributes:
      operands: two or more conditions.
    """

    _word: ClassVar[str] = "or"
    _prec: ClassVar[int] = 0

    def evaluate(self, attrs: Mapping[str, Any]) -> bool:  # noqa: D102
        return any(c.evaluate(attrs) for c in self.operands)


# --------------------------------------------------------------------------- #
# tokenizer                                                                    #
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class _Tok:
    kind: str  # ident kw string number op lparen rparen lbrack rbrack comma eof
    value: Any
    col: int  # 1-based
    raw: str


_PUNCT = {"(": "lparen", ")": "rparen", "[": "lbrack", "]": "rbrack", ",": "comma"}
_HINTS = {
    "'": " (strings use double quotes)",
    "&": " (use 'and')",
    "|": " (use 'or')",
    "!": " (use 'not' or '!=')",
}


def _describe(tok: _Tok) -> str:
    return "end of condition" if tok.kind == "eof" else repr(tok.raw)


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)

    def err(problem: str, at: int) -> ConditionError:
        return ConditionError(problem, at + 1, text)

    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == '"':
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise err("unterminated string starting", i)
                c = text[j]
                if c == '"':
                    break
                if c == "\\":
                    nxt = text[j + 1] if j + 1 < n else ""
                    if nxt not in ('"', "\\"):
                        shown = "end of condition" if not nxt else repr("\\" + nxt)
                        raise err(f"invalid escape {shown} (only \\\" and \\\\ are allowed)", j)
                    buf.append(nxt)
                    j += 2
                    continue
                buf.append(c)
                j += 1
            toks.append(_Tok("string", "".join(buf), i + 1, text[i : j + 1]))
            i = j + 1
            continue
        m = _NUMBER_RE.match(text, i) if (ch.isdigit() or ch in "-.") else None
        if m and m.group():
            s = m.group()
            end = m.end()
            if end < n and (text[end].isalnum() or text[end] in "_.-"):
                raise err(f"malformed number {text[i:end + 1]!r}", i)
            if any(c in s for c in ".eE"):
                val: int | float = float(s)
                if not math.isfinite(val):
                    raise err(f"number {s!r} is out of range", i)
            else:
                val = int(s)
            toks.append(_Tok("number", val, i + 1, s))
            i = end
            continue
        m = _IDENT_RE.match(text, i)
        if m:
            word = m.group()
            low = word.lower()
            toks.append(_Tok("kw" if low in KEYWORDS else "ident", low, i + 1, word))
            i = m.end()
            continue
        two = text[i : i + 2]
        if two in ("<=", ">=", "!=", "=="):
            toks.append(_Tok("op", "=" if two == "==" else two, i + 1, two))
            i += 2
            continue
        if ch in "=<>":
            toks.append(_Tok("op", ch, i + 1, ch))
            i += 1
            continue
        if ch in _PUNCT:
            toks.append(_Tok(_PUNCT[ch], ch, i + 1, ch))
            i += 1
            continue
        raise err(f"unknown token {ch!r}{_HINTS.get(ch, '')}", i)
    toks.append(_Tok("eof", None, n + 1, ""))
    return toks


def _check_parens(toks: list[_Tok], text: str) -> None:
    stack: list[_Tok] = []
    for t in toks:
        if t.kind == "lparen":
            stack.append(t)
        elif t.kind == "rparen":
            if not stack:
                raise ConditionError("unbalanced parentheses: ')' has no matching '('", t.col, text)
            stack.pop()
    if stack:
        raise ConditionError("unbalanced parentheses: '(' is never closed", stack[-1].col, text)


# --------------------------------------------------------------------------- #
# parser                                                                       #
# --------------------------------------------------------------------------- #


class _Parser:
    def __init__(self, text: str, toks: list[_Tok]) -> None:
        self.text = text
        self.toks = toks
        self.pos = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.pos]

    @property
    def prev(self) -> _Tok | None:
        return self.toks[self.pos - 1] if self.pos else None

    def advance(self) -> _Tok:
        t = self.toks[self.pos]
        if t.kind != "eof":
            self.pos += 1
        return t

    def is_kw(self, word: str) -> bool:
        return self.tok.kind == "kw" and self.tok.value == word

    def fail(self, problem: str, tok: _Tok | None = None) -> ConditionError:
        return ConditionError(problem, (tok or self.tok).col, self.text)

    def expr(self, depth: int) -> Condition:
        parts = [self.term(depth)]
        while self.is_kw("or"):
            self.advance()
            parts.append(self.term(depth))
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def term(self, depth: int) -> Condition:
        parts = [self.factor(depth)]
        while self.is_kw("and"):
            self.advance()
            parts.append(self.factor(depth))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def factor(self, depth: int) -> Condition:
        t = self.tok
        if (t.kind == "kw" and t.value == "not") or t.kind == "lparen":
            if depth + 1 > MAX_DEPTH:
                raise self.fail(f"nesting deeper than {MAX_DEPTH} levels")
            self.advance()
            if t.kind == "kw":
                return Not(self.factor(depth + 1))
            inner = self.expr(depth + 1)
            if self.tok.kind != "rparen":
                raise self.fail(f"expected ')' to close '(' at column {t.col}, found {_describe(self.tok)}")
            self.advance()
            return inner
        return self.atom()

    def missing_operand(self) -> ConditionError:
        t, p = self.tok, self.prev
        after = f" after {p.raw!r}" if p is not None else ""
        if t.kind == "eof":
            if p is None:
                return self.fail("missing operand: empty condition")
            return self.fail(f"missing operand{after} (condition ends)")
        if t.kind == "rparen":
            return self.fail(f"missing operand{after}: found ')'")
        if t.kind == "kw" and t.value in ("and", "or"):
            return self.fail(f"missing operand before {t.raw!r}")
        if t.kind == "kw" and t.value == "none":
            return self.fail("'none' must be the whole condition")
        return self.fail(f"expected a condition, found {_describe(t)}")

    def atom(self) -> Condition:
        t = self.tok
        if t.kind == "kw" and t.value == "has":
            self.advance()
            name = self.tok
            if name.kind != "ident":
                raise self.fail(f"missing operand: 'has' needs an attribute name, found {_describe(name)}")
            self.advance()
            return Has(name.value)
        if t.kind != "ident":
            raise self.missing_operand()
        self.advance()
        name = t.value
        op = self.tok
        if op.kind == "kw" and op.value == "contains":
            if name != "question":
                raise self.fail(f"'contains' applies only to 'question', not {t.raw!r}", op)
            self.advance()
            s = self.tok
            if s.kind != "string":
                raise self.fail(f"missing operand: 'contains' needs a double-quoted phrase, found {_describe(s)}")
            if not s.value.strip():
                raise self.fail("'question contains' needs a non-empty phrase", s)
            self.advance()
            return Contains(s.value)
        if op.kind == "op":
            self.advance()
            v = self.tok
            if op.value in _EQ_OPS:
                if v.kind in ("string", "number"):
                    self.advance()
                    return Compare(name, op.value, v.value)
                if v.kind == "kw" and v.value in ("true", "false"):
                    self.advance()
                    return Compare(name, op.value, v.value == "true")
                hint = f' (did you mean "{v.raw}"?)' if v.kind == "ident" else ""
                raise self.fail(
                    f"missing operand: {op.raw!r} needs a string, number, true or false, "
                    f"found {_describe(v)}{hint}"
                )
            if v.kind != "number":
                raise self.fail(f"missing operand: {op.raw!r} needs a number, found {_describe(v)}")
            self.advance()
            return Compare(name, op.value, v.value)
        if op.kind == "kw" and op.value == "in":
            self.advance()
            if self.tok.kind != "lbrack":
                raise self.fail(f"missing operand: 'in' needs a list [\"...\", ...], found {_describe(self.tok)}")
            self.advance()
            values = []
            while True:
                s = self.tok
                if s.kind != "string":
                    if s.kind == "rbrack" and not values:
                        raise self.fail("missing operand: 'in' list is empty")
                    raise self.fail(f"missing operand: expected a double-quoted string in the list, found {_describe(s)}")
                values.append(s.value)
                self.advance()
                if self.tok.kind == "comma":
                    self.advance()
                    continue
                if self.tok.kind == "rbrack":
                    self.advance()
                    return InList(name, tuple(values))
                raise self.fail(f"expected ',' or ']' in the list, found {_describe(self.tok)}")
        if op.kind == "eof":
            raise self.fail(f"missing operator after attribute {t.raw!r} (condition ends)")
        raise self.fail(
            f"expected an operator (=, !=, <, <=, >, >=, in, contains) after {t.raw!r}, found {_describe(op)}"
        )


def parse_condition(text: str) -> Condition:
    """Parse a condition text into a :class:`Condition`.

    Args:
      text: the condition, e.g. ``'question contains "at least" and column_type = "numeric"'``
        or ``"none"`` (case-insensitive) for the universal condition.

    Returns:
      The parsed condition; :data:`UNIVERSAL` for ``none``.

    Raises:
      ConditionError: naming the problem and its column, for empty text, an
        unknown token, unbalanced parentheses, trailing input, a missing
        operand or operator, text over :data:`MAX_LENGTH` characters, or
        nesting deeper than :data:`MAX_DEPTH`.
      TypeError: if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"condition text must be str, not {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ConditionError(f"condition too long: {len(text)} characters (limit {MAX_LENGTH})", MAX_LENGTH + 1, text)
    if not text.strip():
        raise ConditionError("empty condition (write \"none\" for no requirement)", 1, text)
    toks = _tokenize(text)
    _check_parens(toks, text)
    if toks[0].kind == "kw" and toks[0].value == "none":
        if toks[1].kind != "eof":
            raise ConditionError(
                f"'none' must be the whole condition; unexpected trailing input {toks[1].raw!r}", toks[1].col, text
            )
        return UNIVERSAL
    p = _Parser(text, toks)
    cond = p.expr(0)
    if p.tok.kind != "eof":
        t = p.tok
        hint = " (missing 'and' / 'or'?)" if t.kind in ("ident", "kw", "lparen", "string", "number") else ""
        raise ConditionError(f"unexpected trailing input {t.raw!r}{hint}", t.col, text)
    canon = str(cond)
    if len(canon) > MAX_LENGTH:
        raise ConditionError(
            f"condition too long: its canonical form has {len(canon)} characters (limit {MAX_LENGTH})", None, text
        )
    return cond

"""The SAT domain's line-based constraint language: tokenizer, strict recursive-descent parser, printer.

One line is one quantified constraint group (the decision unit of Table 4);
:mod:`cfjax.domains.sat.sat_world` documents the language and grounds parsed
programs to CNF. Split from the world so that each module stays readable.

Limits: a program has at most ``MAX_TEXT`` characters and ``MAX_LINES``
constraint lines, a line at most ``MAX_LINE_CHARS`` characters (each length
is checked before anything is tokenised), a number at most ``MAX_NUMBER``,
a literal set at most 1000 elements. :func:`parse_line` and
:func:`parse_program` are memoised in byte-bounded LRU memos
(:mod:`cfjax.domains.sat.memo`; ``PARSE_LINE_BUDGET`` and
``PARSE_PROGRAM_BUDGET`` estimated bytes; a text too large for its memo is
parsed every time); errors are never memoised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cfjax.domains.sat.memo import byte_lru, text_cost

__all__ = ["EncodingError", "CARD_OPS", "KEYWORDS", "MAX_TEXT", "MAX_LINES", "MAX_LINE_CHARS", "MAX_NUMBER",
           "PARSE_LINE_BUDGET", "PARSE_PROGRAM_BUDGET", "Line", "Card", "Formula", "Lit", "Binding", "SetRef",
           "parse_line", "parse_program", "print_line", "program_lines"]

CARD_OPS = ("exactly", "atleast", "atmost", "morethan", "lessthan")
#: reserved words of the language (never masked in edit signatures)
KEYWORDS = frozenset({"each", "in", "of", "for", "not", *CARD_OPS})
_TWO_WORD = {("at", "least"): "atleast", ("at", "most"): "atmost", ("more", "than"): "morethan",
             ("fewer", "than"): "lessthan", ("less", "than"): "lessthan"}

MAX_TEXT = 100_000
MAX_LINES = 500
MAX_LINE_CHARS = 2_000
MAX_NUMBER = 100_000
#: estimated bytes of the memos of :func:`parse_line` / :func:`parse_program` (:mod:`cfjax.domains.sat.memo`)
PARSE_LINE_BUDGET = 16 << 20
PARSE_PROGRAM_BUDGET = 32 << 20


class EncodingError(Exception):
    """An encoding that cannot be used: ``kind`` is ``"parse_error"`` or ``"too_large"`` (or ``"timeout"``:
    grounding ran past its deadline, see :meth:`cfjax.domains.sat.sat_world.SATWorld.encode`)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


# --------------------------------------------------------------------------- AST


@dataclass(frozen=True)
class SetRef:
    """A set: a declared ``name``, a family member ``name[index]`` or a literal ``{...}``."""

    name: str | None
    index: str | None = None
    elems: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Binding:
    names: tuple[str, ...]
    is_tuple: bool
    source: SetRef


@dataclass(frozen=True)
class Lit:
    neg: bool
    var: str
    idx: tuple[str, ...]


@dataclass(frozen=True)
class Card:
    op: str
    k: int
    lits: tuple[Lit, ...]
    comp: tuple[Binding, ...] = ()


@dataclass(frozen=True)
class Formula:
    """``left`` alone is a clause (``lconn == "|"``) or unit facts (``"&"``);
    with ``right`` it is the implication ``left => right``."""

    left: tuple[Lit, ...]
    lconn: str
    right: tuple[Lit, ...] | None = None
    rconn: str = "|"


@dataclass(frozen=True)
class Line:
    each: tuple[Binding, ...]
    stmt: Card | Formula


# --------------------------------------------------------------------------- tokenizer and parser

_TOKEN = re.compile(r"\s+|#[^\n]*|->|=>|[A-Za-z_][A-Za-z0-9_]*|\d+|[\[\](){},:|&~-]")


def _tokenize(text: str) -> list[str]:
    out = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise EncodingError("parse_error", f"unexpected character {text[pos]!r} at column {pos + 1}")
        tok = m.group()
        pos = m.end()
        if tok[0].isspace() or tok[0] == "#":
            continue
        out.append(tok)
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> str:
        t = self.peek()
        if t is None:
            raise EncodingError("parse_error", "unexpected end of line")
        self.i += 1
        return t

    def expect(self, tok: str) -> None:
        t = self.peek()
        if t != tok:
            raise EncodingError("parse_error",
                                f"expected {tok!r}, found {t!r}" if t else f"expected {tok!r} at end of line")
        self.i += 1

    def name(self, what: str) -> str:
        t = self.peek()
        if t is None or not (t[0].isalpha() or t[0] == "_"):
            raise EncodingError("parse_error",
                                f"expected {what}, found {t!r}" if t else f"expected {what} at end of line")
        if t in KEYWORDS:
            raise EncodingError("parse_error", f"{t!r} is a keyword, not {what}")
        self.i += 1
        return t

    def atom(self) -> str:
        t = self.peek()
        if t is not None and t.isdigit():
            self.i += 1
            return str(_number(t))
        return self.name("an element or a bound name")

    # line := [each bindings :] stmt
    def line(self) -> Line:
        each: tuple[Binding, ...] = ()
        if self.peek() == "each":
            self.i += 1
            each = self.bindings()
            self.expect(":")
        stmt = self.stmt()
        if self.peek() is not None:
            raise EncodingError("parse_error", f"unexpected {self.peek()!r} after the constraint")
        _check_scopes(each, stmt)
        return Line(each, stmt)

    def bindings(self) -> tuple[Binding, ...]:
        out = [self.binding()]
        while self.peek() == ",":
            self.i += 1
            out.append(self.binding())
        return tuple(out)

    def binding(self) -> Binding:
        if self.peek() == "(":
            self.i += 1
            names = [self.name("a bound name")]
            while self.peek() == ",":
                self.i += 1
                names.append(self.name("a bound name"))
            self.expect(")")
            if len(names) < 2:
                raise EncodingError("parse_error", "a tuple pattern needs at least two names")
            is_tuple = True
        else:
            names = [self.name("a bound name")]
            is_tuple = False
        self.expect("in")
        return Binding(tuple(names), is_tuple, self.setref())

    def setref(self) -> SetRef:
        if self.peek() == "{":
            self.i += 1
            elems = [self.elem()]
            while self.peek() == ",":
                self.i += 1
                elems.append(self.elem())
            self.expect("}")
            if len(elems) > 1000:
                raise EncodingError("too_large", "a literal set has more than 1000 elements")
            return SetRef(None, None, tuple(elems))
        name = self.name("a set name")
        if self.peek() == "[":
            self.i += 1
            idx = self.atom()
            self.expect("]")
            return SetRef(name, idx)
        return SetRef(name)

    def elem(self) -> tuple[str, ...]:
        if self.peek() == "(":
            self.i += 1
            parts = [self.atom()]
            while self.peek() == ",":
                self.i += 1
                parts.append(self.atom())
            self.expect(")")
            return tuple(parts)
        return (self.atom(),)

    def card_op(self) -> str | None:
        t = self.peek()
        if t in CARD_OPS:
            self.i += 1
            return t
        two = _TWO_WORD.get((t, self.peek(1)))  # type: ignore[arg-type]
        if two is not None:
            self.i += 2
            return two
        return None

    def stmt(self) -> Card | Formula:
        op = self.card_op()
        if op is not None:
            t = self.next()
            if not t.isdigit():
                raise EncodingError("parse_error", f"expected a number after {op!r}, found {t!r}")
            k = _number(t)
            self.expect("of")
            lits = [self.lit()]
            while self.peek() == ",":
                self.i += 1
                lits.append(self.lit())
            comp: tuple[Binding, ...] = ()
            if self.peek() == "for":
                self.i += 1
                comp = self.bindings()
            return Card(op, k, tuple(lits), comp)
        left, lconn = self.lits()
        if self.peek() in ("=>", "->"):
            self.i += 1
            right, rconn = self.lits()
            return Formula(left, lconn, right, rconn)
        return Formula(left, lconn)

    def lits(self) -> tuple[tuple[Lit, ...], str]:
        out = [self.lit()]
        conn = ""
        while self.peek() in ("|", "&"):
            c = self.next()
            if conn and c != conn:
                raise EncodingError("parse_error", "mixing '|' and '&' on one side; write separate lines")
            conn = c
            out.append(self.lit())
        return tuple(out), conn or "|"

    def lit(self) -> Lit:
        neg = False
        while self.peek() in ("~", "-", "not"):
            self.i += 1
            neg = not neg
        var = self.name("a variable")
        idx: tuple[str, ...] = ()
        if self.peek() == "[":
            self.i += 1
            parts = [self.atom()]
            while self.peek() == ",":
                self.i += 1
                parts.append(self.atom())
            self.expect("]")
            idx = tuple(parts)
        return Lit(neg, var, idx)


def _number(tok: str) -> int:
    if len(tok) > 6 or int(tok) > MAX_NUMBER:
        raise EncodingError("parse_error", f"number {tok[:12]}{'…' if len(tok) > 12 else ''} is too large "
                                           f"(at most {MAX_NUMBER})")
    return int(tok)


def _check_scopes(each: tuple[Binding, ...], stmt: Card | Formula) -> None:
    seen: set[str] = set()
    for b in each + (stmt.comp if isinstance(stmt, Card) else ()):
        for n in b.names:
            if n in seen:
                raise EncodingError("parse_error", f"the name {n!r} is bound twice")
            seen.add(n)


@byte_lru(PARSE_LINE_BUDGET, lambda text, line: text_cost(text, 1))
def parse_line(text: str) -> Line:
    """Parse one constraint group (memoised, bounded by bytes; raises :class:`EncodingError`)."""
    if len(text) > MAX_LINE_CHARS:
        raise EncodingError("parse_error", f"a line has {len(text)} characters (at most {MAX_LINE_CHARS})")
    p = _Parser(text)
    if not p.toks:
        raise EncodingError("parse_error", "empty constraint")
    return p.line()


def program_lines(text: str) -> list[str]:
    """The constraint lines of an encoding: non-blank lines that are not only a comment."""
    if len(text) > MAX_TEXT:
        raise EncodingError("too_large", f"the encoding has {len(text)} characters (at most {MAX_TEXT})")
    out = []
    for raw in text.splitlines():
        s = raw.strip()
        if s and not s.startswith("#"):
            out.append(s)
    if len(out) > MAX_LINES:
        raise EncodingError("too_large", f"the encoding has {len(out)} lines (at most {MAX_LINES})")
    return out


@byte_lru(PARSE_PROGRAM_BUDGET, lambda text, lines: text_cost(text, len(lines)))
def parse_program(text: str) -> tuple[Line, ...]:
    """Every constraint line of ``text``, parsed (memoised, bounded by bytes; raises :class:`EncodingError`
    naming the 1-based constraint number)."""
    out = []
    for n, s in enumerate(program_lines(text), 1):
        try:
            out.append(parse_line(s))
        except EncodingError as e:
            raise EncodingError(e.kind, f"constraint {n}: {e.message}") from None
    return tuple(out)


# --------------------------------------------------------------------------- printer


def _p_set(s: SetRef) -> str:
    if s.name is None:
        return "{" + ", ".join(e[0] if len(e) == 1 else "(" + ",".join(e) + ")" for e in s.elems) + "}"
    return s.name if s.index is None else f"{s.name}[{s.index}]"


def _p_bind(b: Binding) -> str:
    head = "(" + ",".join(b.names) + ")" if b.is_tuple else b.names[0]
    return f"{head} in {_p_set(b.source)}"


def _p_lit(l: Lit) -> str:
    return ("~" if l.neg else "") + l.var + ("[" + ",".join(l.idx) + "]" if l.idx else "")


def print_line(line: Line) -> str:
    """Canonical text of a constraint group."""
    s = line.stmt
    if isinstance(s, Card):
        body = f"{s.op} {s.k} of " + ", ".join(_p_lit(l) for l in s.lits)
        if s.comp:
            body += " for " + ", ".join(_p_bind(b) for b in s.comp)
    else:
        body = f" {s.lconn} ".join(_p_lit(l) for l in s.left)
        if s.right is not None:
            body += " => " + f" {s.rconn} ".join(_p_lit(l) for l in s.right)
    if line.each:
        return "each " + ", ".join(_p_bind(b) for b in line.each) + ": " + body
    return body

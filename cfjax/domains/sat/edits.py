"""One-decision-unit edits of SAT and SMT encodings (papers/countermem.md §3.2, App. B.4, Table 4).

* :class:`SATEdits` — a unit is one constraint group (one line of the
  :mod:`cfjax.domains.sat.sat_world` language, kind ``"group"``), printed canonically.
* :class:`SMTEdits` — a unit is one top-level SMT-LIB command (kind
  ``"assert"``, ``"declare"`` or ``"command"``), printed canonically on one line.
* :class:`~cfjax.domains.sat.cnf.AnswerEdits` — a unit is the verdict line or one
  literal of an answer to a DIMACS formula (user suites, :mod:`cfjax.domains.sat.cnf`;
  rule edits: flip one literal's sign, switch the SAT/UNSAT claim).
* :class:`SatSmtEdits` — the suite's edit model: dispatches on the syntax of
  the action (an SMT-LIB script starts with ``(``; a SAT line never does; an
  answer's first line is a verdict or literals, :func:`~cfjax.domains.sat.cnf.is_answer`).

Rule operators (:meth:`rule_edits`), each changing exactly one unit:

=====================  ======================================================================
language               operators
=====================  ======================================================================
SAT cardinality group  the other four of exactly/atleast/atmost/morethan/lessthan; k ± 1;
                       drop one listed literal; reverse a pair pattern ``(u,v)`` → ``(v,u)``
SAT clause/implication swap the two sides of ``=>``; negate one literal; drop one literal;
                       reverse a pair pattern
SMT assertion          toggle ``<=``↔``<`` / ``>=``↔``>`` (one comparison, or all of them);
                       swap the two jobs of a comparison (``(>= s_b e_a)`` → ``(>= s_a e_b)``);
                       a numeral ± 1; ``(distinct s_a s_b)`` ↔ ``(or (<= e_a s_b) (<= e_b s_a))``;
                       ``=`` ↔ ``distinct``; drop one disjunct; add / remove ``not``; swap ``=>``
=====================  ======================================================================

After all of those, each unit's *distractors* (plausible, usually wrong edits that are no
inverse of a scripted slip; listed after every edit above, so those keep their positions):

=====================  ======================================================================
SAT clause/implication the connective of a side with two or more literals swapped
                       (``a | b`` ↔ ``a & b``); an implication read as a disjunction
                       (``a => b`` → ``a | b``)
SMT assertion          one comparison mirrored (``(<= a b)`` → ``(>= a b)``, ``<`` ↔ ``>``);
                       ``and`` ↔ ``or``
=====================  ======================================================================

:meth:`transfer` carries a stored ``before → after`` unit edit onto the first
unit of a new action with the same masked shape
(:func:`cfjax.types.bind_and_rewrite`, language keywords unmasked),
then adapts what the binding cannot: a number that the edit shifted
(``atleast 3`` → ``atleast 4``) is shifted by the same amount in the target,
and an identifier of ``after`` that ``before`` lacks but whose
``prefix_suffix`` shape matches a bound one (``e_a`` when ``s_a`` was bound to
``s_c``) is renamed to the target's suffix (``e_c``). The result is re-printed
through the language's parser. Parsing is memoised in byte-bounded memos
(:mod:`cfjax.domains.sat.memo`, ``UNITS_BUDGET`` estimated bytes each).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cfjax.domains.common import bind_and_rewrite, masked_signature
from cfjax.domains.sat.memo import byte_lru, text_cost
from cfjax.types import EditError, EditModel, Unit
from cfjax.domains.sat.sat_lang import (
    CARD_OPS, KEYWORDS, Binding, Card, EncodingError, Formula, Line, Lit, parse_line, print_line, program_lines,
)
from cfjax.domains.sat.smt_world import SMT_KEYWORDS, SExpr, SmtError, command_kind, parse_commands, print_sexpr, read_sexprs

__all__ = ["SATEdits", "SMTEdits", "SatSmtEdits", "is_smt", "EditError", "Unit"]

_TOK = re.compile(
    r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
    r"|\*\*|//|<=|>=|==|!=|<>|->|=>|\S"
)  # the tokenizer of cfjax.types (bind_and_rewrite / masked_signature)
_PREFIXED = re.compile(r"([A-Za-z]+)_(\w+)")


def is_smt(action: str) -> bool:
    """Whether ``action`` is an SMT-LIB script (its first non-comment character is ``(``)."""
    for line in action.splitlines():
        s = line.strip()
        if not s or s.startswith(";"):
            continue
        return s.startswith("(")
    return False


def _masked(tok: str, keywords: frozenset[str]) -> bool:
    return tok[0] in "'\"" or tok[0].isdigit() or ((tok[0].isalpha() or tok[0] == "_") and tok not in keywords)


def _carry(before: str, after: str, target_unit: str, keywords: frozenset[str]) -> str | None:
    """bind_and_rewrite plus the numeric-shift and suffix adaptations (module docstring)."""
    moved = bind_and_rewrite(before, after, target_unit, keywords)
    if moved is None:
        return None
    btoks, ttoks, atoks = _TOK.findall(before), _TOK.findall(target_unit), _TOK.findall(after)
    mtoks = _TOK.findall(moved)
    if len(mtoks) != len(atoks):  # pragma: no cover - bind_and_rewrite keeps the token count
        return moved
    binding = {b: t for b, t in zip(btoks, ttoks) if _masked(b, keywords)}
    suffix: dict[str, str] = {}
    for b, t in binding.items():
        mb, mt = _PREFIXED.fullmatch(b), _PREFIXED.fullmatch(t)
        if mb and mt and mb.group(1) == mt.group(1):
            suffix.setdefault(mb.group(2), mt.group(2))
    aligned = len(atoks) == len(btoks)
    for i, a in enumerate(atoks):
        if a in binding:
            continue
        if a.isdigit() and aligned and btoks[i].isdigit() and ttoks[i].isdigit() and a != btoks[i]:
            mtoks[i] = str(max(0, int(ttoks[i]) + int(a) - int(btoks[i])))
        elif a[0].isalpha() and a not in keywords:
            m = _PREFIXED.fullmatch(a)
            if m and m.group(2) in suffix:
                mtoks[i] = f"{m.group(1)}_{suffix[m.group(2)]}"
    return " ".join(mtoks)


# =========================================================================== SAT


#: estimated bytes of each of the three memos below (:mod:`cfjax.domains.sat.memo`)
UNITS_BUDGET = 16 << 20


def _units_cost(action: str, value: tuple) -> int:
    return text_cost(action, len(value))


@byte_lru(UNITS_BUDGET, _units_cost)
def _sat_lines(action: str) -> tuple[Line, ...]:
    try:
        return tuple(parse_line(s) for s in program_lines(action))
    except EncodingError as e:
        raise EditError(f"cannot parse the encoding: {e.message}") from None


@byte_lru(UNITS_BUDGET, _units_cost)
def _sat_units(action: str) -> tuple[Unit, ...]:
    return tuple(Unit("group", print_line(l)) for l in _sat_lines(action))


def _sat_one(text: str) -> Line:
    if "\n" in text.strip():
        raise EditError("a replacement must be one constraint group (one line)")
    try:
        return parse_line(text.strip())
    except EncodingError as e:
        raise EditError(f"cannot parse the replacement: {e.message}") from None


def _rev_bindings(bs: tuple[Binding, ...]) -> list[tuple[Binding, ...]]:
    out = []
    for i, b in enumerate(bs):
        if b.is_tuple:
            nb = Binding(tuple(reversed(b.names)), True, b.source)
            out.append(bs[:i] + (nb,) + bs[i + 1:])
    return out


def _sat_alternatives(line: Line) -> list[Line]:
    s = line.stmt
    out: list[Line] = []
    if isinstance(s, Card):
        for op in CARD_OPS:
            if op != s.op:
                out.append(Line(line.each, Card(op, s.k, s.lits, s.comp)))
        out.append(Line(line.each, Card(s.op, s.k + 1, s.lits, s.comp)))
        if s.k >= 1:
            out.append(Line(line.each, Card(s.op, s.k - 1, s.lits, s.comp)))
        if len(s.lits) >= 2:
            for i in range(len(s.lits)):
                out.append(Line(line.each, Card(s.op, s.k, s.lits[:i] + s.lits[i + 1:], s.comp)))
        for comp in _rev_bindings(s.comp):
            out.append(Line(line.each, Card(s.op, s.k, s.lits, comp)))
    else:
        if s.right is not None:
            out.append(Line(line.each, Formula(s.right, s.rconn, s.left, s.lconn)))
        sides = [("left", s.left)] + ([("right", s.right)] if s.right is not None else [])
        for name, lits in sides:
            for i, l in enumerate(lits):
                neg = lits[:i] + (Lit(not l.neg, l.var, l.idx),) + lits[i + 1:]
                out.append(Line(line.each, Formula(neg, s.lconn, s.right, s.rconn) if name == "left"
                                else Formula(s.left, s.lconn, neg, s.rconn)))
            if len(lits) >= 2:
                for i in range(len(lits)):
                    cut = lits[:i] + lits[i + 1:]
                    out.append(Line(line.each, Formula(cut, s.lconn, s.right, s.rconn) if name == "left"
                                    else Formula(s.left, s.lconn, cut, s.rconn)))
    for each in _rev_bindings(line.each):
        out.append(Line(each, s))
    return out


_OTHER_CONN = {"|": "&", "&": "|"}


def _sat_distractors(line: Line) -> list[Line]:
    """Distractor alternatives of a SAT constraint group (module docstring): the connective of a
    side with two or more literals swapped (``a | b`` ↔ ``a & b``), and an implication read as
    a disjunction (``a => b`` → ``a | b``)."""
    s = line.stmt
    out: list[Line] = []
    if isinstance(s, Formula):
        if len(s.left) >= 2:
            out.append(Line(line.each, Formula(s.left, _OTHER_CONN[s.lconn], s.right, s.rconn)))
        if s.right is not None and len(s.right) >= 2:
            out.append(Line(line.each, Formula(s.left, s.lconn, s.right, _OTHER_CONN[s.rconn])))
        if s.right is not None and (len(s.left) == 1 or s.lconn == "|") and (len(s.right) == 1 or s.rconn == "|"):
            out.append(Line(line.each, Formula(s.left + s.right, "|")))
    return out


def _splice(units: Sequence[Unit], index: int, new: str) -> str:
    """The action with unit ``index`` printed as ``new``, one unit per line."""
    return "\n".join(new if i == index else u.text for i, u in enumerate(units))


def _normalize_lines(units_of, action: str) -> str:
    """Canonical print through ``units_of``; whitespace-normalised lines when it does not parse."""
    try:
        return "\n".join(u.text for u in units_of(action))
    except EditError:
        return "\n".join(" ".join(l.split()) for l in action.splitlines() if l.strip())


class SATEdits(EditModel):
    """Constraint groups of the SAT language as decision units (kind ``"group"``)."""

    name = "sat"
    keywords = KEYWORDS

    def units(self, action: str) -> list[Unit]:
        return list(_sat_units(action))

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        us = _sat_units(action)
        if not 0 <= index < len(us):
            raise EditError(f"unit index {index} out of range (the encoding has {len(us)} units)")
        return _splice(us, index, print_line(_sat_one(new_text)))

    def normalize(self, action: str) -> str:
        return _normalize_lines(_sat_units, action)

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        try:
            lines = _sat_lines(action)
        except EditError:
            return []
        out: list[tuple[int, str]] = []
        seen: list[set[str]] = []
        for i, line in enumerate(lines):
            orig = print_line(line)
            seen.append({orig})
            for alt in _sat_alternatives(line):
                t = print_line(alt)
                if t not in seen[i]:
                    seen[i].add(t)
                    out.append((i, t))
        for i, line in enumerate(lines):  # distractors after every repair edit
            for alt in _sat_distractors(line):
                t = print_line(alt)
                if t not in seen[i]:
                    seen[i].add(t)
                    out.append((i, t))
        return out

    def signature(self, unit_text: str) -> str:
        return masked_signature(unit_text, self.keywords)

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        try:
            us = _sat_units(target)
            before_c = print_line(_sat_one(before))
            after_c = print_line(_sat_one(after))
        except EditError:
            return None
        sig = self.signature(before_c)
        for i, u in enumerate(us):
            if self.signature(u.text) != sig:
                continue
            moved = _carry(before_c, after_c, u.text, self.keywords)
            if moved is None:
                continue
            try:
                return self.replace_unit(target, i, moved)
            except EditError:
                continue
        return None


# =========================================================================== SMT


@byte_lru(UNITS_BUDGET, _units_cost)
def _smt_units(action: str) -> tuple[Unit, ...]:
    try:
        cmds = parse_commands(action)
    except SmtError as e:
        raise EditError(f"cannot parse the SMT-LIB script: {e.message}") from None
    return tuple(Unit(command_kind(c), print_sexpr(c)) for c in cmds)


def _smt_one(text: str) -> SExpr:
    try:
        cmds = parse_commands(text)
    except SmtError as e:
        raise EditError(f"cannot parse the replacement: {e.message}") from None
    if len(cmds) != 1:
        raise EditError(f"a replacement must be exactly one command, got {len(cmds)}")
    return cmds[0]


_TOGGLE = {"<=": "<", "<": "<=", ">=": ">", ">": ">="}
_STRICT = {"<=": "<", ">=": ">"}
_INCL = {"<": "<=", ">": ">="}


def _paths(term: SExpr, path: tuple[int, ...] = ()):
    stack = [(term, path)]
    while stack:
        t, p = stack.pop()
        yield t, p
        if isinstance(t, tuple):
            for i in range(len(t) - 1, -1, -1):
                stack.append((t[i], p + (i,)))


def _replace(term: SExpr, path: tuple[int, ...], new: SExpr) -> SExpr:
    if not path:
        return new
    assert isinstance(term, tuple)
    i = path[0]
    return term[:i] + (_replace(term[i], path[1:], new),) + term[i + 1:]


def _map_heads(term: SExpr, table: dict[str, str]) -> SExpr:
    if isinstance(term, str):
        return term
    if term and isinstance(term[0], str) and term[0] in table and len(term) == 3:
        return (table[term[0]],) + tuple(_map_heads(x, table) for x in term[1:])
    return tuple(_map_heads(x, table) for x in term)


def _job(sym: SExpr) -> tuple[str, str] | None:
    if isinstance(sym, str):
        m = _PREFIXED.fullmatch(sym)
        if m:
            return m.group(1), m.group(2)
    return None


def _smt_alternatives(term: SExpr) -> list[SExpr]:
    out: list[SExpr] = []
    n_cmp = 0
    for t, p in _paths(term):
        if not isinstance(t, tuple) or not t:
            if isinstance(t, str) and t.isdigit():
                out.append(_replace(term, p, str(int(t) + 1)))
                if int(t) > 0:
                    out.append(_replace(term, p, str(int(t) - 1)))
            continue
        head = t[0]
        if head in _TOGGLE and len(t) == 3:
            n_cmp += 1
            out.append(_replace(term, p, (_TOGGLE[head],) + t[1:]))
            ja, jb = _job(t[1]), _job(t[2])
            if ja and jb and ja[1] != jb[1]:
                out.append(_replace(term, p, (head, f"{ja[0]}_{jb[1]}", f"{jb[0]}_{ja[1]}")))
        elif head == "distinct" and len(t) == 3:
            out.append(_replace(term, p, ("=",) + t[1:]))
            ja, jb = _job(t[1]), _job(t[2])
            if ja and jb and ja[0] == jb[0] == "s" and ja[1] != jb[1]:
                a, b = ja[1], jb[1]
                out.append(_replace(term, p, ("or", ("<=", f"e_{a}", f"s_{b}"), ("<=", f"e_{b}", f"s_{a}"))))
        elif head == "=" and len(t) == 3:
            out.append(_replace(term, p, ("distinct",) + t[1:]))
        elif head == "=>" and len(t) == 3:
            out.append(_replace(term, p, ("=>", t[2], t[1])))
        elif head == "or" and len(t) >= 3:
            if len(t) == 3 and all(isinstance(x, tuple) and len(x) == 3 and x[0] in ("<=", "<") for x in t[1:]):
                j = [(_job(x[1]), _job(x[2])) for x in t[1:]]
                if all(a and b for a, b in j):
                    (ea, sb), (eb, sa) = j
                    if ea[0] == eb[0] == "e" and sa[0] == sb[0] == "s" and ea[1] == sa[1] and eb[1] == sb[1]:
                        out.append(_replace(term, p, ("distinct", f"s_{ea[1]}", f"s_{eb[1]}")))
            for i in range(1, len(t)):
                rest = t[:i] + t[i + 1:]
                out.append(_replace(term, p, rest if len(rest) > 2 else rest[1]))
        if head == "not" and len(t) == 2 and p == ():
            out.append(t[1])
    if not (isinstance(term, tuple) and term and term[0] == "not"):
        out.append(("not", term))
    if n_cmp >= 2:
        for table in (_STRICT, _INCL):
            out.append(_map_heads(term, table))
    return out


_MIRROR = {"<=": ">=", ">=": "<=", "<": ">", ">": "<"}


def _smt_distractors(term: SExpr) -> list[SExpr]:
    """Distractor alternatives of an assertion's term (module docstring): one comparison
    mirrored (``(<= a b)`` → ``(>= a b)``, ``(< a b)`` → ``(> a b)``), and ``and`` ↔ ``or``."""
    out: list[SExpr] = []
    for t, p in _paths(term):
        if not isinstance(t, tuple) or not t:
            continue
        head = t[0]
        if head in _MIRROR and len(t) == 3:
            out.append(_replace(term, p, (_MIRROR[head],) + t[1:]))
        elif head in ("and", "or") and len(t) >= 3:
            out.append(_replace(term, p, ("or" if head == "and" else "and",) + t[1:]))
    return out


class SMTEdits(EditModel):
    """Top-level SMT-LIB commands as decision units (kinds ``assert``/``declare``/``command``)."""

    name = "smt"
    keywords = SMT_KEYWORDS

    def units(self, action: str) -> list[Unit]:
        return list(_smt_units(action))

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        us = _smt_units(action)
        if not 0 <= index < len(us):
            raise EditError(f"unit index {index} out of range (the script has {len(us)} units)")
        cmd = _smt_one(new_text)
        if command_kind(cmd) != us[index].kind:
            raise EditError(f"unit {index} is a {us[index].kind!r} command; the replacement is a "
                            f"{command_kind(cmd)!r} command")
        return _splice(us, index, print_sexpr(cmd))

    def normalize(self, action: str) -> str:
        return _normalize_lines(_smt_units, action)

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        try:
            us = _smt_units(action)
        except EditError:
            return []
        out: list[tuple[int, str]] = []
        seen: dict[int, set[str]] = {}
        for i, u in enumerate(us):
            if u.kind != "assert":
                continue
            cmd = read_sexprs(u.text)[0]
            seen[i] = {u.text}
            for alt in _smt_alternatives(cmd[1]):
                t = print_sexpr(("assert", alt))
                if t not in seen[i]:
                    seen[i].add(t)
                    out.append((i, t))
        for i in seen:  # distractors after every repair edit
            for alt in _smt_distractors(read_sexprs(us[i].text)[0][1]):
                t = print_sexpr(("assert", alt))
                if t not in seen[i]:
                    seen[i].add(t)
                    out.append((i, t))
        return out

    def signature(self, unit_text: str) -> str:
        return masked_signature(unit_text, self.keywords)

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        try:
            us = _smt_units(target)
            bc, ac = _smt_one(before), _smt_one(after)
        except EditError:
            return None
        if command_kind(bc) != "assert" or command_kind(ac) != "assert":
            return None
        before_c, after_c = print_sexpr(bc), print_sexpr(ac)
        sig = self.signature(before_c)
        for i, u in enumerate(us):
            if u.kind != "assert" or self.signature(u.text) != sig:
                continue
            moved = _carry(before_c, after_c, u.text, self.keywords)
            if moved is None:
                continue
            try:
                return self.replace_unit(target, i, moved)
            except EditError:
                continue
        return None


# =========================================================================== both


class SatSmtEdits(EditModel):
    """The SAT suite's edit model: SMT-LIB scripts go to :class:`SMTEdits`, answers to DIMACS
    formulas to :class:`~cfjax.domains.sat.cnf.AnswerEdits`, everything else to :class:`SATEdits`
    (see :func:`is_smt`, :func:`~cfjax.domains.sat.cnf.is_answer`)."""

    name = "sat"

    def __init__(self) -> None:
        from cfjax.domains.sat.cnf import AnswerEdits

        self.sat = SATEdits()
        self.smt = SMTEdits()
        self.cnf = AnswerEdits()

    def _for(self, text: str) -> EditModel:
        from cfjax.domains.sat.cnf import is_answer

        if is_smt(text):
            return self.smt
        return self.cnf if is_answer(text) else self.sat

    def units(self, action: str) -> list[Unit]:
        return self._for(action).units(action)

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        return self._for(action).replace_unit(action, index, new_text)

    def normalize(self, action: str) -> str:
        return self._for(action).normalize(action)

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        return self._for(action).rule_edits(action, env)

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        ed = self._for(target)
        if self._for(before) is not ed:
            return None
        return ed.transfer(before, after, target, env)

    def signature(self, unit_text: str) -> str:
        return self._for(unit_text).signature(unit_text)

    def diff_units(self, before: str, after: str) -> tuple[int, Unit, Unit] | None:
        if self._for(before) is not self._for(after):
            return None
        return self._for(before).diff_units(before, after)

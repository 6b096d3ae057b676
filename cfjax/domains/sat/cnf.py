"""DIMACS CNF *answer* tasks: the agent answers a formula, the world checks the answer.

A DIMACS row of a user suite (:mod:`cfjax.domains.sat.user`) is a formula to *answer*, not to encode:
the action is either a satisfying assignment or the claim that none exists.

The answer format
-----------------
One item per line; blank lines and comment lines (``c …``, ``# …``) are skipped::

    answer   := [verdict] literals*
    verdict  := "s SATISFIABLE" | "s UNSATISFIABLE"      (SAT competition status lines)
              | "SAT" | "SATISFIABLE" | "UNSAT" | "UNSATISFIABLE"   (any case)
    literals := ["v"] LIT ([","] LIT)* ["0"]             (a model line "v 1 -2 3 0", or a bare list
                                                          "1 -2 3", also "[1, -2, 3]")
    LIT      := i | -i                                   (variable i true / false, 1 <= i <= n)

Without a verdict, literals mean ``s SATISFIABLE``. A ``0`` ends a model line (optional). Naming a
variable twice with one sign is harmless; with both signs is a parse error, as is a literal outside
``1..n``, a second verdict that contradicts the first, or an empty answer. The canonical print (what
:meth:`AnswerEdits.normalize` returns and the edit model's units are) is the verdict line and then
one literal per line, ordered by variable::

    s SATISFIABLE
    v 1
    v -2
    v 3

**Decision units** (:class:`AnswerEdits`): the verdict line (kind ``"verdict"``) and each literal
(kind ``"literal"``). The one-unit rule edits are *flip one literal's sign* (``v 2`` ↔ ``v -2``) and
*switch the claim* (``s SATISFIABLE`` ↔ ``s UNSATISFIABLE``). Under an UNSAT verdict the literal
lines are kept (so the switch is undone by switching back) but not read by the world, and only the
switch is offered. A unit's signature is its canonical text: the variables of two formulas are
unrelated, so a stored flip carries onto another answer only where it has the very same literal
(a verdict switch, onto any answer with the same verdict).

Checking
--------
The task's requirements (the row's ``rules``; default every clause) are checked *by the world in
plain Python* for an assignment — a solver is never trusted to say that an assignment is right:

* a clause holds when one of its literals is given true; ``assign`` (variable ``var`` is ``value``)
  holds when the answer gives it that value; ``count`` (``op``, ``k``: the number of true variables
  compares so) holds when it holds for *every* completion of the assignment. A variable the answer
  does not name has no value, so an accepted partial assignment extends to models only.
* An UNSAT claim is checked by the world's SAT solver (:func:`decide`: MiniSat 2.2 through
  :mod:`pysat`, the requirements as clauses and sequential-counter cardinality constraints, within
  the world's ``timeout_s``); the verdict is cached per task.

Scoring: an assignment scores the fraction of requirements it meets (``solved`` iff all hold; 0 on
failure with ``partial_credit=False``); a right UNSAT claim scores 1, a wrong one 0; the solver
running out of time on an UNSAT claim is ``completed=False``, ``error="timeout"``; an answer that
does not parse is ``error="parse_error"``. Everything is an outcome, never an exception.

Feedback says only what the world knows. ``"user"`` (a model checker's words): how many and which
clauses (their numbers, the first five) the assignment leaves unsatisfied, the variables it leaves
without a value, which stated requirements it violates; for an UNSAT claim, that the solver proves
it, finds the claim wrong (never the model it found), or ran out of time. ``"rich"`` adds how many
requirements an assignment meets and, once the solver has decided the formula, whether it is
satisfiable — never what the solver has not decided.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cfjax.types import EditError, EditModel, Outcome, Unit

__all__ = ["Answer", "AnswerError", "Requirement", "parse_answer", "print_answer", "is_answer", "AnswerEdits",
           "cnf_requirements", "holds", "decide", "check_answer", "SAT_LINE", "UNSAT_LINE", "ANSWER_FORMAT",
           "requirements_text", "dimacs_text"]

SAT_LINE, UNSAT_LINE = "s SATISFIABLE", "s UNSATISFIABLE"
_VERDICTS = {"s satisfiable": "sat", "s unsatisfiable": "unsat", "sat": "sat", "satisfiable": "sat",
             "unsat": "unsat", "unsatisfiable": "unsat"}
#: literals on one line (each separator is a comma or whitespace, so the match never backtracks far)
_LITS = re.compile(r"^(?:v\s+)?\[?\s*-?\d+(?:(?:\s*,\s*|\s+)-?\d+)*\s*,?\s*\]?$", re.IGNORECASE)
_BARE_V = re.compile(r"^v$", re.IGNORECASE)
_NUM = re.compile(r"-?\d+")
#: how the answer format is shown to the agent (the task context)
ANSWER_FORMAT = ("# Answer: a satisfying assignment as a model line ('v 1 -2 3 0': literal i is variable i true, "
                 "-i false; or one literal per line, optionally after 's SATISFIABLE'), or 's UNSATISFIABLE' "
                 "(also 'UNSAT') when no assignment meets the requirements. Every clause must contain a literal "
                 "the assignment makes true; a variable it does not name has no value.")


class AnswerError(ValueError):
    """An answer that does not parse (the message says why)."""


@dataclass(frozen=True)
class Answer:
    """A parsed answer: ``verdict`` ``"sat"`` | ``"unsat"`` and the literals (ordered by variable)."""

    verdict: str
    lits: tuple[int, ...]

    def values(self) -> dict[int, bool]:
        return {abs(x): x > 0 for x in self.lits}


def _comment(line: str) -> bool:
    return line.startswith("#") or line == "c" or line[:2] in ("c ", "c\t")


def _lines(text: str) -> list[str]:
    return [s for s in (raw.strip() for raw in text.splitlines()) if s and not _comment(s)]


def _verdict(line: str) -> str | None:
    return _VERDICTS.get(" ".join(line.lower().split()))


def is_answer(text: str) -> bool:
    """Whether ``text`` reads as an answer (its first non-comment line is a verdict or literals; the
    edit model dispatches on this). A constraint-language line never starts with a number, and
    ``v 1``/``s SATISFIABLE`` are not constraint-language lines."""
    for raw in text.splitlines():
        first = raw.strip()
        if first and not _comment(first):
            return _verdict(first) is not None or bool(_LITS.match(first))
    return False


def parse_answer(text: str, n: int | None = None) -> Answer:
    """The :class:`Answer` of ``text`` (module docstring); ``n``: the number of variables (literals
    outside ``1..n`` are refused). Raises :class:`AnswerError`."""
    verdict: str | None = None
    vals: dict[int, bool] = {}
    lines = _lines(text)
    if not lines:
        raise AnswerError("empty answer: give an assignment ('v 1 -2 3 0') or 'UNSAT'")
    for lineno, line in enumerate(lines, 1):
        v = _verdict(line)
        if v is not None:
            if verdict is not None and verdict != v:
                raise AnswerError(f"line {lineno}: a second verdict {line!r} contradicts the first")
            verdict = v
            continue
        if _BARE_V.match(line):
            continue
        if not _LITS.match(line):
            raise AnswerError(f"line {lineno}: {line[:60]!r} is neither a verdict ('s SATISFIABLE', "
                              "'s UNSATISFIABLE', 'UNSAT') nor literals ('v 1 -2 3 0')")
        for tok in _NUM.findall(line):
            lit = int(tok)
            if lit == 0:
                continue
            i = abs(lit)
            if n is not None and i > n:
                raise AnswerError(f"line {lineno}: literal {lit} names no variable of 1..{n}")
            if vals.get(i, lit > 0) != (lit > 0):
                raise AnswerError(f"line {lineno}: variable {i} is given both values")
            vals[i] = lit > 0
    lits = tuple(i if vals[i] else -i for i in sorted(vals))
    return Answer(verdict or "sat", lits)


def print_answer(ans: Answer) -> str:
    """The canonical print: the verdict line, then one ``v <literal>`` line per variable."""
    return "\n".join([SAT_LINE if ans.verdict == "sat" else UNSAT_LINE] + [f"v {x}" for x in ans.lits])


# --------------------------------------------------------------------------- the edit model


def _units(action: str) -> tuple[Unit, ...]:
    try:
        a = parse_answer(action)
    except AnswerError as e:
        raise EditError(f"cannot parse the answer: {e}") from None
    return (Unit("verdict", SAT_LINE if a.verdict == "sat" else UNSAT_LINE),) + tuple(
        Unit("literal", f"v {x}") for x in a.lits)


def _one(text: str) -> Unit:
    lines = _lines(text)
    if len(lines) != 1:
        raise EditError("a replacement must be one verdict line or one literal")
    v = _verdict(lines[0])
    if v is not None:
        return Unit("verdict", SAT_LINE if v == "sat" else UNSAT_LINE)
    nums = [int(t) for t in _NUM.findall(lines[0]) if int(t) != 0] if _LITS.match(lines[0]) else []
    if len(nums) != 1:
        raise EditError(f"a replacement must be one verdict line or one literal, got {lines[0][:60]!r}")
    return Unit("literal", f"v {nums[0]}")


class AnswerEdits(EditModel):
    """The verdict line and each literal of a DIMACS answer as decision units (module docstring)."""

    name = "cnf"

    def units(self, action: str) -> list[Unit]:
        return list(_units(action))

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        us = list(_units(action))
        if not 0 <= index < len(us):
            raise EditError(f"unit index {index} out of range (the answer has {len(us)} units)")
        new = _one(new_text)
        if new.kind != us[index].kind:
            raise EditError(f"unit {index} is a {us[index].kind}; the replacement is a {new.kind}")
        us[index] = new
        try:
            return print_answer(parse_answer("\n".join(u.text for u in us)))
        except AnswerError as e:
            raise EditError(f"the replacement breaks the answer: {e}") from None

    def normalize(self, action: str) -> str:
        try:
            return print_answer(parse_answer(action))
        except AnswerError:
            return "\n".join(" ".join(l.split()) for l in action.splitlines() if l.strip())

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        try:
            us = _units(action)
        except EditError:
            return []
        sat = us[0].text == SAT_LINE
        out = []
        if sat:
            for i, u in enumerate(us[1:], 1):
                lit = int(u.text.split()[1])
                out.append((i, f"v {-lit}"))
        out.append((0, UNSAT_LINE if sat else SAT_LINE))
        return out

    def signature(self, unit_text: str) -> str:
        try:
            return _one(unit_text).text
        except EditError:
            return " ".join(unit_text.split())

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        try:
            b, a, us = _one(before), _one(after), _units(target)
        except EditError:
            return None
        if a.kind != b.kind:
            return None
        for i, u in enumerate(us):
            if u == b:
                try:
                    return self.replace_unit(target, i, a.text)
                except EditError:
                    return None
        return None


# --------------------------------------------------------------------------- requirements


_OP_WORDS = {"==": "exactly", ">=": "at least", "<=": "at most", ">": "more than", "<": "fewer than"}


@dataclass(frozen=True)
class Requirement:
    """One checked requirement: the number of ``lits`` made true compares to ``k`` by ``op``.
    ``clause`` is the clause's 1-based number for a clause of the formula, else 0."""

    desc: str
    lits: tuple[int, ...]
    op: str
    k: int
    clause: int = 0


def cnf_requirements(n: int, clauses: Sequence[Sequence[int]], rules: Sequence[Mapping[str, Any]]
                     ) -> tuple[Requirement, ...]:
    """The requirements of a task: ``clauses`` (every clause of the formula holds), ``assign`` (``var``,
    ``value``: variable ``var`` is true / false), ``count`` (``op``, ``k``: the number of true variables
    compares so). Raises :class:`ValueError` (or :class:`KeyError`) on a bad rule."""
    out: list[Requirement] = []
    for r in rules:
        kind = r["rule"]
        if kind == "clauses":
            for j, c in enumerate(clauses, 1):
                out.append(Requirement(f"clause {j} ({' '.join(map(str, c))} 0) holds", tuple(c), ">=", 1, j))
        elif kind == "assign":
            i, value = int(r["var"]), r.get("value", True)
            if not isinstance(value, bool):
                raise ValueError(f"assign: value must be true or false, got {value!r}")
            if not 1 <= i <= n:
                raise ValueError(f"assign: variable {i} is not one of 1..{n}")
            out.append(Requirement(f"variable {i} is {'true' if value else 'false'}", (i if value else -i,), "==", 1))
        elif kind == "count":
            op, k = r["op"], int(r["k"])
            if op not in _OP_WORDS:
                raise ValueError(f"count: op must be one of {', '.join(_OP_WORDS)}, got {op!r}")
            out.append(Requirement(f"{_OP_WORDS[op]} {k} variable(s) are true", tuple(range(1, n + 1)), op, k))
        else:
            raise ValueError(f"unknown CNF rule {kind!r} (clauses, assign, count)")
    return tuple(out)


def requirements_text(reqs: Sequence[Requirement]) -> str:
    """The requirements other than the clauses, in words (``""`` when there are none)."""
    return "; ".join(r.desc for r in reqs if not r.clause)


def dimacs_text(n: int, clauses: Sequence[Sequence[int]]) -> str:
    """The formula in DIMACS CNF (the header, one clause per line)."""
    return "\n".join([f"p cnf {n} {len(clauses)}"] + [" ".join(map(str, c)) + " 0" for c in clauses])


def holds(req: Requirement, values: Mapping[int, bool]) -> bool:
    """Whether ``req`` holds for every completion of the (partial) assignment ``values``."""
    t = u = 0
    for x in req.lits:
        v = values.get(abs(x))
        if v is None:
            u += 1
        elif v == (x > 0):
            t += 1
    op, k = req.op, req.k
    if op == ">=":
        return t >= k
    if op == ">":
        return t > k
    if op == "<=":
        return t + u <= k
    if op == "<":
        return t + u < k
    if op == "==":
        return u == 0 and t == k
    raise ValueError(f"unknown operator {op!r}")  # pragma: no cover - cnf_requirements refuses it


def _encode(n: int, reqs: Sequence[Requirement]) -> list[list[int]] | None:
    """Clauses over variables ``1..n`` (plus auxiliaries) true exactly for the models of ``reqs``;
    ``None`` when some requirement can never hold."""
    from pysat.card import CardEnc, EncType

    out: list[list[int]] = []
    top = n
    for r in reqs:
        lits, m = list(r.lits), len(r.lits)
        op, k = r.op, r.k
        if op == ">":
            op, k = ">=", k + 1
        elif op == "<":
            op, k = "<=", k - 1
        bounds = ((">=", k),) if op == ">=" else (("<=", k),) if op == "<=" else ((">=", k), ("<=", k))
        for kind, b in bounds:
            if kind == ">=":
                if b <= 0:
                    continue
                if b > m:
                    return None
                if b == 1:
                    out.append(lits)
                    continue
                if b == m:
                    out.extend([x] for x in lits)
                    continue
                enc = CardEnc.atleast(lits=lits, bound=b, top_id=top, encoding=EncType.seqcounter)
            else:
                if b >= m:
                    continue
                if b < 0:
                    return None
                if b == 0:
                    out.extend([-x] for x in lits)
                    continue
                enc = CardEnc.atmost(lits=lits, bound=b, top_id=top, encoding=EncType.seqcounter)
            top = max(top, enc.nv)
            out.extend(enc.clauses)
    return out


def decide(n: int, reqs: Sequence[Requirement], timeout_s: float, solver: str = "m22") -> str:
    """``"sat"`` when some assignment meets every requirement, ``"unsat"`` when none does (the SAT
    solver's verdict within ``timeout_s``), else ``"timeout"``. A ``"sat"`` verdict is confirmed in
    plain Python on the solver's model."""
    clauses = _encode(n, reqs)
    if clauses is None:
        return "unsat"
    from cfjax.domains.sat.sat_world import solve_within

    res, model = solve_within(solver, clauses, timeout_s)
    if res != "sat":
        return res
    values = {abs(x): x > 0 for x in model if abs(x) <= n}
    for i in range(1, n + 1):
        values.setdefault(i, False)
    if not all(holds(r, values) for r in reqs):  # pragma: no cover - a solver bug
        return "timeout"
    return "sat"


# --------------------------------------------------------------------------- grading


MAX_FEEDBACK = 790
_SHOW = 5


def _clip(text: str) -> str:
    return text if len(text) <= MAX_FEEDBACK else text[: MAX_FEEDBACK - 1] + "…"


def _nums(xs: Sequence[int], noun: str) -> str:
    shown = ", ".join(map(str, xs[:_SHOW]))
    more = f" (… {len(xs) - _SHOW} more)" if len(xs) > _SHOW else ""
    return f"{noun}{'' if len(xs) == 1 else 's'} {shown}{more}"


def _status_sentence(status: str, extra: bool) -> str:
    what = "the formula with the stated requirements" if extra else "the formula"
    if status == "sat":
        return f" The solver finds {what} satisfiable."
    if status == "unsat":
        return f" The solver proves {what} unsatisfiable: no assignment meets every requirement."
    return ""


def check_answer(n: int, reqs: Sequence[Requirement], action: str, *, status, timeout_s: float,
                 partial_credit: bool = True, rich: bool = False) -> Outcome:
    """Grade ``action`` for the task with ``reqs`` over variables ``1..n`` (module docstring).

    ``status``: a callable ``() -> "sat" | "unsat" | "timeout"`` giving the solver's (cached) verdict on
    the requirements; it is called for an UNSAT claim, and in rich mode for a failing assignment."""
    start = time.perf_counter()

    def out(score: float, solved: bool, fb: str, error: str | None = None, completed: bool = True) -> Outcome:
        return Outcome(score, solved, completed, _clip(fb), error, time.perf_counter() - start)

    try:
        ans = parse_answer(action, n)
    except AnswerError as e:
        return out(0.0, False, f"Parse error: {e}", "parse_error")
    extra = any(not r.clause for r in reqs)
    with_reqs = " and the stated requirements" if extra else ""
    if ans.verdict == "unsat":
        st = status()
        if st == "unsat":
            return out(1.0, True, f"Solved: the solver proves that no assignment satisfies the formula{with_reqs}.")
        if st == "sat":
            every = " and every stated requirement" if extra else ""
            return out(0.0, False, f"The UNSAT claim is wrong: the solver finds an assignment that satisfies every "
                                   f"clause{every}.")
        return out(0.0, False, f"Timeout: the solver did not decide the formula within {timeout_s:g} s, so the "
                               "UNSAT claim is not checked.", "timeout", completed=False)
    values = ans.values()
    failed = [r for r in reqs if not holds(r, values)]
    n_clauses = sum(1 for r in reqs if r.clause)
    if not failed:
        what = f"all {n_clauses} clauses" if n_clauses else "the formula"
        every = " and every stated requirement" if extra else ""
        return out(1.0, True, f"Solved: the assignment satisfies {what}{every}.")
    bad_clauses = [r.clause for r in failed if r.clause]
    bad_reqs = [r.desc for r in failed if not r.clause]
    parts = []
    if bad_clauses:
        parts.append(f"The assignment leaves {len(bad_clauses)} of the {n_clauses} clauses unsatisfied: "
                     f"{_nums(bad_clauses, 'clause')}.")
        unset = sorted({abs(x) for r in failed if r.clause for x in r.lits if abs(x) not in values})
        if unset:
            parts.append(f"It gives no value to {_nums(unset, 'variable')} of those clauses.")
    if bad_reqs:
        noun = "requirement" if len(bad_reqs) == 1 else "requirements"
        shown = "; ".join(bad_reqs[:_SHOW]) + (f"; … ({len(bad_reqs) - _SHOW} more)" if len(bad_reqs) > _SHOW else "")
        lead = "It violates" if bad_clauses else (f"The assignment satisfies all {n_clauses} clauses but violates"
                                                 if n_clauses else "The assignment violates")
        parts.append(f"{lead} {len(bad_reqs)} stated {noun}: {shown}.")
    fb = " ".join(parts)
    total = len(reqs)
    passed = total - len(failed)
    if rich:
        fb += f" It meets {passed} of {total} requirements." + _status_sentence(status(), extra)
    score = passed / total if (partial_credit and total) else 0.0
    return out(score, False, fb)

"""SAT world model: a line-based constraint language, CNF expansion, a CDCL solver, a verifier.

The action of a SAT task is an *encoding* of a combinatorial problem (a map
colouring, a staff roster) over boolean variables that the task's
environment declares (``x[v,c]``: region ``v`` has colour ``c``). The world
model (papers/countermem.md §3.3, Table 4 "SAT solver / encoding") parses the
encoding, expands it to CNF (cardinality groups through
:class:`pysat.card.CardEnc`, sequential counters), solves it with a CDCL
solver (MiniSat 2.2 through :mod:`pysat` by default), decodes the model and
checks the decoded solution with the task's **own verifier**: the requirements the question states, checked in plain
Python over the instance, never by comparison with the gold encoding.

The constraint language
-----------------------
One non-blank line is one *constraint group* — one decision unit::

    line     := [ "each" bindings ":" ] stmt
    bindings := binding ("," binding)*
    binding  := NAME "in" set  |  "(" NAME ("," NAME)+ ")" "in" set
    set      := SETNAME  |  FAMILY "[" atom "]"  |  "{" elem ("," elem)* "}"
    stmt     := CARD NUM "of" lit ("," lit)* [ "for" bindings ]
              | lits [ "=>" lits ]               (a clause, or an implication; "->" also accepted)
    lits     := lit ("|" lit)*  |  lit ("&" lit)*
    lit      := ["~" | "-" | "not"] VAR [ "[" atom ("," atom)* "]" ]
    CARD     := exactly | atleast | atmost | morethan | lessthan
                (also written "at least", "at most", "more than", "fewer than", "less than")
    atom     := NAME | NUM           (# starts a comment)

Examples (colouring, roster)::

    each v in REGIONS: exactly 1 of x[v,c] for c in COLOURS
    each (u,v) in BORDERS, c in COLOURS: ~x[u,c] | ~x[v,c]
    each p in STAFF: atmost 3 of w[p,s] for s in SHIFTS
    each p in STAFF, d in DAYS: exactly 1 of w[p,s] for s in SHIFTS_ON[d]
    each s in SHIFTS: w[eve,s] => w[ann,s]
    each s in {mon_am, tue_pm}: w[ann,s]

Set names, set families (``SHIFTS_ON[d]``) and variables with their index
sets are declared by the environment (:class:`SATInstance`); an action
cannot declare anything. A name bound by ``each``/``for`` is a variable; any
other index is an element constant and must belong to the variable's index
set. ``morethan k`` is ``atleast k+1`` and ``lessthan k`` is ``atmost k-1``.
Implications print as ``=>`` (``->`` is read too): a canonical unit never
contains `` -> ``, the separator of a record's ``EDIT: before -> after`` line.
The parser is a strict recursive-descent parser over a tokenizer; nothing is
ever evaluated as Python.

Solving and scoring
-------------------
The verifier sees the two *extreme* solutions of the encoding: the
lexicographically largest and the lexicographically smallest model over the
declared variables in declaration order (each variable in turn is set true —
resp. false — whenever some model extends the choices made so far; computed
by incremental solving under assumptions). This choice is canonical (up to
the probes' conflict budget it does not depend on the solver's heuristics)
and an encoding that is too weak shows it in one of them. Each decoded solution is checked against the task's
verifier; the **worse** one is reported:

* ``score`` = fraction of the verifier's checks the solution passes
  (``solved`` iff all pass; with ``partial_credit=False`` a failure scores 0);
* unsatisfiable encoding → score 0, completed, feedback "the encoding is
  unsatisfiable" (``error=None``; ``feedback="rich"`` adds "but the problem has a solution" only
  where the world has solved the stated requirements — see :meth:`SATWorld.problem_status`);
* a syntax or semantic error (unknown variable or set, an element outside its
  index set, a wrong arity, an absurd number) → score 0, completed,
  ``error="parse_error"``;
* an encoding above ``max_clauses`` / ``max_vars`` (estimated *before*
  expanding, so a group that would expand to 10⁹ clauses fails at once, and
  counted again *while* expanding: after every environment of a group and
  every cardinality encoding) → score 0, completed, ``error="too_large"``;
* grounding and solving together running past ``timeout_s`` →
  ``completed=False``, ``error="timeout"``. One deadline, ``timeout_s`` after
  the evaluation starts, covers both: grounding polls it every
  ``POLL_EVERY`` work units (environments enumerated by ``each``/``for`` plus
  clauses emitted), at every line and before every cardinality encoding, so
  many lines of nested quantifiers stop at the deadline; the solver is
  interrupted through :meth:`pysat.solvers.Solver.interrupt` from a
  :class:`threading.Timer`. What cannot be interrupted is small and bounded
  by the clause limit: one :class:`pysat.card.CardEnc` call (at most about
  the group's estimate, ≤ ``max_clauses``) and one solver construction over
  at most ``max_clauses`` clauses, so an evaluation ends within ``timeout_s``
  plus a fraction of a second at the default limits. Each probe of the
  lexicographic search is also limited to ``lex_conflicts`` conflicts (a
  probe that runs out keeps the value of the current model, so the reported
  solution is always a model of the encoding; the limit is deterministic).

Feedback (``feedback=``) names the failed checks (in the question's terms) and never the gold.
What else it says is a world option:

* ``"user"`` (default): what a user-facing solver front end with the task's
  stated requirements returns — parse / size / solver errors, "unsatisfiable",
  and which stated requirements a solution of the encoding violates::

      Solved: the decoded solution meets every stated requirement.
      The encoding is unsatisfiable: no assignment satisfies all of its constraints.
      The encoding is satisfiable, but a solution it admits violates 2 stated requirements:
      shift mon_am has at least 2 staff; shift tue_pm has at least 2 staff.

* ``"rich"``: the diagnostic text of earlier versions, which adds what the
  verifier computes — whether the problem *has* a solution (for an
  unsatisfiable encoding: the world solves the verifier's own checks once per
  task, :meth:`SATWorld.problem_status`; "but the problem has a solution: some
  constraint is too strong" only when it found one, "and so are the stated
  requirements" when it proved there is none, plain "unsatisfiable" when it
  could not decide), which extreme solution failed, and how many of the
  verifier's grounded checks it passed (``passes only 14 of 16 checks``; the
  score). Feedback never states what the world does not know.

``score``/``solved`` never depend on the option.
Parsing is memoised (a pure function of the text) in LRU memos bounded by an
estimate of their bytes (:mod:`cfjax.domains.sat.memo`; limits in
:mod:`cfjax.domains.sat.sat_lang`); grounded CNF and outcomes are never
cached. The world's own tables (variable numbering per environment, compiled
checks per task) hold one entry per declared instance / task with rules, so
untrusted actions cannot grow them.
The world holds only plain data (picklable) and is deterministic (up to
where a deadline interrupts an encoding that runs out of time).

Length: the parser and printer live in :mod:`cfjax.domains.sat.sat_lang`; what stays here — grounding,
the verifier and the interruptible solver loop — shares one budget and one set of limits, and this
docstring documents the whole language.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cfjax.domains.sat.sat_lang import (CARD_OPS, KEYWORDS, Binding, Card, EncodingError, Formula, Line,  # noqa: F401
                                        Lit, SetRef, _p_lit, _p_set, parse_line, parse_program, print_line,
                                        program_lines)

MAX_FEEDBACK = 790
#: values of the ``feedback`` option (module docstring, "Solving and scoring")
FEEDBACK_MODES = ("user", "rich")
from cfjax.types import Outcome, Task

__all__ = [
    "SATInstance", "SATWorld", "EncodingError", "Check", "CARD_OPS", "KEYWORDS",
    "Line", "Card", "Formula", "Lit", "Binding", "SetRef",
    "parse_line", "parse_program", "print_line", "program_lines", "sat_checks", "SatSmtWorld", "FEEDBACK_MODES",
]

# --------------------------------------------------------------------------- instances


@dataclass(frozen=True, eq=False)
class SATInstance:
    """One environment of the SAT domain.

    Attributes:
      env_id: identifier.
      problem: ``"colouring"``, ``"roster"`` or any other label.
      sets: set name → elements; an element is an atom (``str``) or a tuple of
        atoms (pairs such as borders).
      families: family name → (key → elements), e.g. ``SHIFTS_ON[mon]``.
      vars: variable name → the names of its index sets (atoms only).
      description: what the instance is, for the task context.
      data: problem-specific facts the verifier reads (e.g. ``day_of`` a shift).
    """

    env_id: str
    problem: str
    sets: Mapping[str, tuple]
    vars: Mapping[str, tuple[str, ...]]
    families: Mapping[str, Mapping[str, tuple]] = field(default_factory=dict)
    description: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for v, doms in self.vars.items():
            for d in doms:
                if d not in self.sets:
                    raise ValueError(f"variable {v!r} is indexed by undeclared set {d!r}")
                if any(not isinstance(e, str) for e in self.sets[d]):
                    raise ValueError(f"variable {v!r} is indexed by {d!r}, whose elements are not atoms")

    def to_json(self) -> dict:
        return {"env_id": self.env_id, "solver": "sat", "problem": self.problem,
                "sets": {k: [list(e) if isinstance(e, tuple) else e for e in v] for k, v in self.sets.items()},
                "families": {k: {kk: list(vv) for kk, vv in v.items()} for k, v in self.families.items()},
                "vars": {k: list(v) for k, v in self.vars.items()}, "description": self.description,
                "data": dict(self.data)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SATInstance":
        def el(e):
            return tuple(e) if isinstance(e, list) else e

        return cls(d["env_id"], d["problem"], {k: tuple(el(e) for e in v) for k, v in d["sets"].items()},
                   {k: tuple(v) for k, v in d["vars"].items()},
                   {k: {kk: tuple(el(e) for e in vv) for kk, vv in v.items()}
                    for k, v in d.get("families", {}).items()},
                   d.get("description", ""), dict(d.get("data", {})))

    # ---- variable numbering: declared variables get ids 1..n_declared in declaration order
    def var_table(self) -> "_VarTable":
        return _VarTable(self)


class _VarTable:
    """Ids of the declared variables (plain data; rebuilt per world)."""

    def __init__(self, inst: SATInstance) -> None:
        self.info: dict[str, tuple[int, tuple[str, ...], tuple[dict[str, int], ...], tuple[int, ...]]] = {}
        self.names: list[tuple[str, tuple[str, ...]]] = [("", ())]
        off = 0
        for v, doms in inst.vars.items():
            sizes = [len(inst.sets[d]) for d in doms]
            strides = []
            acc = 1
            for s in reversed(sizes):
                strides.append(acc)
                acc *= s
            strides = tuple(reversed(strides))
            pos = tuple({e: i for i, e in enumerate(inst.sets[d])} for d in doms)
            self.info[v] = (off, doms, pos, strides)
            for combo in _product([inst.sets[d] for d in doms]):
                self.names.append((v, combo))
            off += acc
        self.n = off

    def id(self, var: str, idx: tuple[str, ...]) -> int:
        off, doms, pos, strides = self.info[var]
        return off + 1 + sum(p[e] * s for p, e, s in zip(pos, idx, strides))


def _product(lists: Sequence[Sequence[str]]) -> Iterator[tuple[str, ...]]:
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head,) + rest


# --------------------------------------------------------------------------- grounding


#: grounding polls its deadline every this many work units (environments enumerated + clauses emitted)
POLL_EVERY = 512


class _Grounder:
    def __init__(self, inst: SATInstance, table: _VarTable, max_clauses: int, max_vars: int,
                 deadline: float | None = None) -> None:
        self.inst = inst
        self.t = table
        self.max_clauses = max_clauses
        self.max_vars = max_vars
        self.top = table.n
        self.clauses: list[list[int]] = []
        self.unsat = False
        self.deadline = deadline
        self.work = 0  # environments enumerated + clauses emitted so far
        self._poll_at = POLL_EVERY

    def check_size(self) -> None:
        if len(self.clauses) > self.max_clauses or self.top > self.max_vars:
            raise EncodingError("too_large", f"the encoding exceeds {self.max_clauses:,} clauses or "
                                             f"{self.max_vars:,} variables")

    def poll(self) -> None:
        """Raise ``EncodingError("timeout")`` once the deadline has passed (called every ``POLL_EVERY`` units)."""
        self._poll_at = self.work + POLL_EVERY
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            raise EncodingError("timeout", "grounding did not finish before the deadline")

    # sets ------------------------------------------------------------------
    def _atom(self, a: str, env: Mapping[str, Any]) -> str:
        v = env.get(a, a)
        if isinstance(v, tuple):
            raise EncodingError("parse_error", f"{a!r} is bound to a tuple; unpack it with a pattern such as (u,v)")
        return v

    def set_values(self, ref: SetRef, env: Mapping[str, Any]) -> tuple:
        if ref.name is None:
            return tuple(tuple(self._atom(a, env) for a in e) if len(e) > 1 else self._atom(e[0], env)
                         for e in ref.elems)
        if ref.index is None:
            if ref.name in self.inst.sets:
                return self.inst.sets[ref.name]
            if ref.name in self.inst.families:
                raise EncodingError("parse_error", f"{ref.name} is a family of sets; write {ref.name}[key]")
            raise EncodingError("parse_error", f"unknown set {ref.name!r} (declared: {', '.join(self.inst.sets)})")
        fam = self.inst.families.get(ref.name)
        if fam is None:
            raise EncodingError("parse_error", f"unknown set family {ref.name!r}")
        key = self._atom(ref.index, env)
        if key not in fam:
            raise EncodingError("parse_error", f"{ref.name}[{key}]: {key!r} is not a key of {ref.name}")
        return fam[key]

    def max_size(self, ref: SetRef) -> int:
        if ref.name is None:
            return len(ref.elems)
        if ref.index is None:
            return len(self.inst.sets.get(ref.name, ()))
        fam = self.inst.families.get(ref.name, {})
        return max((len(v) for v in fam.values()), default=0)

    def envs(self, bindings: tuple[Binding, ...], env: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if not bindings:
            self.work += 1
            if self.work >= self._poll_at:
                self.poll()
            yield env
            return
        b, rest = bindings[0], bindings[1:]
        for e in self.set_values(b.source, env):
            if b.is_tuple:
                if not isinstance(e, tuple) or len(e) != len(b.names):
                    raise EncodingError("parse_error", f"cannot unpack an element of {_p_set(b.source)} into "
                                                       f"({','.join(b.names)})")
                new = dict(env)
                new.update(zip(b.names, e))
            else:
                new = dict(env)
                new[b.names[0]] = e
            yield from self.envs(rest, new)

    # literals --------------------------------------------------------------
    def lit(self, l: Lit, env: Mapping[str, Any]) -> int:
        info = self.t.info.get(l.var)
        if info is None:
            raise EncodingError("parse_error", f"unknown variable {l.var!r} (declared: {', '.join(self.t.info)})")
        _, doms, pos, _ = info
        if len(l.idx) != len(doms):
            raise EncodingError("parse_error", f"{l.var} takes {len(doms)} index(es), got {len(l.idx)} in {_p_lit(l)}")
        idx = []
        for a, d, p in zip(l.idx, doms, pos):
            v = self._atom(a, env)
            if v not in p:
                why = f"{v!r} is not in {d}" if a in env else f"{a!r} is neither a bound name nor an element of {d}"
                raise EncodingError("parse_error", f"{_p_lit(l)}: {why}")
            idx.append(v)
        v = self.t.id(l.var, tuple(idx))
        return -v if l.neg else v

    # groups ----------------------------------------------------------------
    def estimate(self, line: Line) -> int:
        inst = 1
        for b in line.each:
            inst *= max(1, self.max_size(b.source))
        s = line.stmt
        if isinstance(s, Card):
            n = len(s.lits)
            for b in s.comp:
                n *= max(1, self.max_size(b.source))
            k = s.k
            per = n * max(1, min(k + 1, max(n - k, 1))) * 2 + n
        else:
            ln, rn = len(s.left), len(s.right or ())
            per = max(1, ln) * max(1, rn)
        return inst * per

    def add_line(self, line: Line) -> None:
        est = self.estimate(line)
        if est > self.max_clauses:
            raise EncodingError("too_large", f"the group `{print_line(line)[:120]}` would expand to about {est:,} "
                                             f"clauses (at most {self.max_clauses:,})")
        self.poll()
        s = line.stmt
        for env in self.envs(line.each, {}):
            before = len(self.clauses)
            if isinstance(s, Card):
                lits = [self.lit(l, e) for e in self.envs(s.comp, env) for l in s.lits]
                self.card(lits, s.op, s.k)
            else:
                left = [self.lit(l, env) for l in s.left]
                if s.right is None:
                    if s.lconn == "|":
                        self.clauses.append(left)
                    else:
                        self.clauses.extend([x] for x in left)
                else:
                    right = [self.lit(l, env) for l in s.right]
                    # (∧/∨ left) -> (∧/∨ right)  ==  ¬left ∨ right
                    neg_left = [[-x for x in left]] if s.lconn == "&" else [[-x] for x in left]
                    pos_right = [right] if s.rconn == "|" else [[x] for x in right]
                    for a in neg_left:
                        for b in pos_right:
                            self.clauses.append(a + b)
            n = len(self.clauses)
            if n > self.max_clauses or self.top > self.max_vars:
                self.check_size()
            self.work += n - before
            if self.work >= self._poll_at:
                self.poll()

    def card(self, lits: list[int], op: str, k: int) -> None:
        if op == "morethan":
            op, k = "atleast", k + 1
        elif op == "lessthan":
            op, k = "atmost", k - 1
        if op in ("atleast", "exactly"):
            self._atleast(lits, k)
        if op in ("atmost", "exactly"):
            self._atmost(lits, k)

    def _atleast(self, lits: list[int], k: int) -> None:
        n = len(lits)
        if k <= 0:
            return
        if k > n:
            self.unsat = True
            self.clauses.append([])
        elif k == 1:
            self.clauses.append(list(lits))
        elif k == n:
            self.clauses.extend([x] for x in lits)
        else:
            self._enc("atleast", lits, k)

    def _atmost(self, lits: list[int], k: int) -> None:
        n = len(lits)
        if k >= n:
            return
        if k < 0:
            self.unsat = True
            self.clauses.append([])
        elif k == 0:
            self.clauses.extend([-x] for x in lits)
        else:
            self._enc("atmost", lits, k)

    def _enc(self, kind: str, lits: list[int], k: int) -> None:
        from pysat.card import CardEnc, EncType

        self.poll()  # one uninterruptible pysat call (its size is bounded by the group's estimate)
        fn = CardEnc.atleast if kind == "atleast" else CardEnc.atmost
        enc = fn(lits=lits, bound=k, top_id=self.top, encoding=EncType.seqcounter)
        self.top = max(self.top, enc.nv)
        self.clauses.extend(enc.clauses)
        self.check_size()


# --------------------------------------------------------------------------- verifier


@dataclass(frozen=True)
class Check:
    """One named check of the verifier: every term ``(literals, op, k)`` must hold,
    where a literal is ``(variable, index, wanted value)`` and the term counts the
    literals that hold."""

    desc: str
    terms: tuple[tuple[tuple[tuple[str, tuple[str, ...], bool], ...], str, int], ...]


_OPS = {"==": operator.eq, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
        "!=": operator.ne}
_OP_WORDS = {"==": "exactly", ">=": "at least", "<=": "at most", ">": "more than", "<": "fewer than"}


def _cnt(lits, op, k):
    return (tuple(lits), op, k)


def sat_checks(inst: SATInstance, rules: Sequence[Mapping[str, Any]]) -> tuple[Check, ...]:
    """The verifier of a task: its stated requirements (``rules``) as named checks over ``inst``.

    Colouring rules (variable ``x[region, colour]``): ``colours_per_region``
    (op, k), ``proper`` (bordering regions share no colour), ``colour_use``
    (op, k: regions per colour), ``paint`` (region, colour, value).
    Roster rules (variable ``w[person, shift]``): ``staffing`` (op, k: people
    per shift), ``load`` (op, k: shifts per person), ``daily`` (op, k: shifts
    per person and day), ``with`` (if, then: whenever ``if`` works a shift,
    ``then`` works it), ``assign`` (who, shift, value).
    """
    d = inst.data
    out: list[Check] = []
    for r in rules:
        kind = r["rule"]
        if inst.problem == "colouring":
            xv, R, C = d["var"], inst.sets[d["regions"]], inst.sets[d["colours"]]
            if kind == "colours_per_region":
                for v in R:
                    out.append(Check(f"region {v} has {_OP_WORDS[r['op']]} {r['k']} colour(s)",
                                     (_cnt([(xv, (v, c), True) for c in C], r["op"], r["k"]),)))
            elif kind == "proper":
                for u, v in inst.sets[d["borders"]]:
                    out.append(Check(f"bordering regions {u} and {v} share no colour",
                                     tuple(_cnt([(xv, (u, c), True), (xv, (v, c), True)], "<=", 1) for c in C)))
            elif kind == "colour_use":
                for c in C:
                    out.append(Check(f"colour {c} is used on {_OP_WORDS[r['op']]} {r['k']} region(s)",
                                     (_cnt([(xv, (v, c), True) for v in R], r["op"], r["k"]),)))
            elif kind == "paint":
                word = "has" if r.get("value", True) else "does not have"
                out.append(Check(f"region {r['region']} {word} colour {r['colour']}",
                                 (_cnt([(xv, (r["region"], r["colour"]), bool(r.get("value", True)))], "==", 1),)))
            else:
                raise ValueError(f"unknown colouring rule {kind!r}")
        elif inst.problem == "roster":
            wv, P, S = d["var"], inst.sets[d["staff"]], inst.sets[d["shifts"]]
            if kind == "staffing":
                for s in S:
                    out.append(Check(f"shift {s} has {_OP_WORDS[r['op']]} {r['k']} staff",
                                     (_cnt([(wv, (p, s), True) for p in P], r["op"], r["k"]),)))
            elif kind == "load":
                for p in P:
                    out.append(Check(f"{p} works {_OP_WORDS[r['op']]} {r['k']} shift(s)",
                                     (_cnt([(wv, (p, s), True) for s in S], r["op"], r["k"]),)))
            elif kind == "daily":
                fam = inst.families[d["shifts_on"]]
                for p in P:
                    for day in inst.sets[d["days"]]:
                        out.append(Check(f"{p} works {_OP_WORDS[r['op']]} {r['k']} shift(s) on {day}",
                                         (_cnt([(wv, (p, s), True) for s in fam[day]], r["op"], r["k"]),)))
            elif kind == "with":
                for s in S:
                    out.append(Check(f"{r['then']} works {s} whenever {r['if']} does",
                                     (_cnt([(wv, (r["if"], s), False), (wv, (r["then"], s), True)], ">=", 1),)))
            elif kind == "assign":
                word = "works" if r.get("value", True) else "does not work"
                out.append(Check(f"{r['who']} {word} {r['shift']}",
                                 (_cnt([(wv, (r["who"], r["shift"]), bool(r.get("value", True)))], "==", 1),)))
            else:
                raise ValueError(f"unknown roster rule {kind!r}")
        else:
            raise ValueError(f"no verifier for problem {inst.problem!r}")
    return tuple(out)


# --------------------------------------------------------------------------- the world


def _clip(text: str, limit: int = MAX_FEEDBACK) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: the ``"rich"`` text of an unsatisfiable encoding once the world has found a solution of the requirements
UNSAT_FEEDBACK = "The encoding is unsatisfiable, but the problem has a solution: some constraint is too strong."
#: the ``"rich"`` text of an unsatisfiable encoding once the world has proved the requirements unsatisfiable
UNSAT_PROBLEM_FEEDBACK = ("The encoding is unsatisfiable, and so are the stated requirements: no assignment meets "
                          "them all.")
#: ``Check`` operator → the cardinality keyword of the grounder (the requirements solved as CNF)
_CARD_OF_OP = {"==": "exactly", ">=": "atleast", "<=": "atmost", ">": "morethan", "<": "lessthan"}
#: the ``"user"`` text of an unsatisfiable encoding (nothing about whether the problem has a solution)
USER_UNSAT_FEEDBACK = "The encoding is unsatisfiable: no assignment satisfies all of its constraints."


def check_feedback_mode(feedback: str) -> str:
    """``feedback`` when it is a known mode (else ``ValueError`` naming the option)."""
    if feedback not in FEEDBACK_MODES:
        raise ValueError(f"feedback must be 'user' or 'rich', got {feedback!r}")
    return feedback


def solve_within(solver: str, clauses: Sequence[Sequence[int]], seconds: float) -> tuple[str, list[int]]:
    """``("sat", model)``, ``("unsat", [])`` or ``("timeout", [])``: ``clauses`` solved by the named
    python-sat solver, interrupted after ``seconds`` (wall clock)."""
    from pysat.solvers import Solver

    with Solver(name=solver, bootstrap_with=clauses) as s:
        timer = threading.Timer(max(0.0, seconds), s.interrupt)
        timer.daemon = True
        timer.start()
        try:
            res = s.solve_limited(expect_interrupt=True)
        finally:
            timer.cancel()
        if res is None:
            return "timeout", []
        return ("sat", s.get_model() or []) if res else ("unsat", [])


def violations_text(failed: Sequence[str], what: str) -> str:
    """The ``"user"`` text of a satisfiable encoding whose ``what`` (e.g. ``"a solution it admits"``)
    violates the stated requirements ``failed`` (at most five named)."""
    n = len(failed)
    shown = "; ".join(failed[:5]) + (f"; … ({n - 5} more)" if n > 5 else "")
    noun = "requirement" if n == 1 else "requirements"
    return f"The encoding is satisfiable, but {what} violates {n} stated {noun}: {shown}."


def _lex_extreme(s: Any, n: int, want: bool, deadline: float, budget: int) -> list[bool] | str:
    """The lexicographically largest (``want=True``) or smallest model over variables ``1..n``:
    each variable in turn takes ``want`` if some model extends the choices so far
    (incremental solving under assumptions, each probe limited to ``budget`` conflicts — a probe
    that runs out keeps the current model's value, so the result is always a model).
    Variables the encoding never mentions take ``want``."""
    res = s.solve_limited(expect_interrupt=True)
    if res is None:
        return "timeout"
    if res is False:
        return "unsat"
    known = s.nof_vars()

    def decode(model: list[int]) -> list[bool]:
        vals = [want] * (n + 1)
        for lit in model:
            a = lit if lit > 0 else -lit
            if a > n:
                break
            vals[a] = lit > 0
        return vals

    vals = decode(s.get_model() or [])
    fixed: list[int] = []
    for v in range(1, min(n, known) + 1):
        lit = v if want else -v
        if vals[v] != want:
            s.conf_budget(budget)
            res = s.solve_limited(assumptions=fixed + [lit], expect_interrupt=True)
            if res is None and time.perf_counter() >= deadline:
                return "timeout"
            if res:
                vals = decode(s.get_model() or [])
            else:
                lit = -lit
        fixed.append(lit)
    return vals


class SATWorld:
    """Executable SAT world model: ``evaluate(task, encoding) -> Outcome`` (see module docstring).

    Args:
      instances: ``env_id → SATInstance``.
      rules: ``task_id → requirements`` (the verifier's rules, see :func:`sat_checks`).
      timeout_s: wall-clock limit of the two solver runs together.
      max_clauses / max_vars: the largest CNF an encoding may expand to.
      solver: a :mod:`pysat.solvers` name that supports phases, interrupts and conflict budgets
        (MiniSat 2.2 ``"m22"`` by default; Glucose ignores conflict budgets under assumptions).
      partial_credit: score a failing solution by the fraction of checks passed (else 0).
      lex_conflicts: conflict budget of each probe of the lexicographic search (keeps it fast on
        tight cardinality instances, where proving a probe impossible is pigeonhole-hard).
      feedback: ``"user"`` (default: errors, unsatisfiable, the violated stated requirements) or
        ``"rich"`` (also whether the problem has a solution where the world has decided it,
        :meth:`problem_status`; the failing extreme and the checks passed).
    """

    def __init__(self, instances: Mapping[str, SATInstance], rules: Mapping[str, Sequence[Mapping[str, Any]]], *,
                 timeout_s: float = 2.0, max_clauses: int = 200_000, max_vars: int = 200_000, solver: str = "m22",
                 partial_credit: bool = True, lex_conflicts: int = 200, feedback: str = "user") -> None:
        self.feedback = check_feedback_mode(feedback)
        if timeout_s <= 0 or max_clauses <= 0 or max_vars <= 0:
            raise ValueError("timeout_s, max_clauses and max_vars must be positive")
        self.instances = dict(instances)
        self.rules = {k: tuple(v) for k, v in rules.items()}
        self.timeout_s = float(timeout_s)
        self.max_clauses = int(max_clauses)
        self.max_vars = int(max_vars)
        self.solver = solver
        self.partial_credit = partial_credit
        self.lex_conflicts = int(lex_conflicts)
        self._tables: dict[str, _VarTable] = {}
        self._checks: dict[str, tuple[Check, ...]] = {}
        self._compiled: dict[str, tuple] = {}
        self._status: dict[str, str] = {}

    # ---------------------------------------------------------------- helpers
    def _instance(self, env_id: str) -> SATInstance:
        try:
            return self.instances[env_id]
        except KeyError:
            raise ValueError(f"unknown SAT env_id {env_id!r} (known: {', '.join(sorted(self.instances))})") from None

    def _table(self, env_id: str) -> _VarTable:
        t = self._tables.get(env_id)
        if t is None:
            t = self._tables[env_id] = _VarTable(self._instance(env_id))
        return t

    def checks(self, task: Task) -> tuple[Check, ...]:
        """The task's verifier checks (built once per task from its rules)."""
        c = self._checks.get(task.task_id)
        if c is None:
            if task.task_id not in self.rules:
                raise ValueError(f"no verifier rules for task {task.task_id!r}")
            c = self._checks[task.task_id] = sat_checks(self._instance(task.env_id), self.rules[task.task_id])
        return c

    def _compiled_checks(self, task: Task) -> tuple:
        c = self._compiled.get(task.task_id)
        if c is None:
            table = self._table(task.env_id)
            c = self._compiled[task.task_id] = tuple(
                (chk.desc, tuple((tuple(table.id(v, idx) * (1 if want else -1) for v, idx, want in lits), _OPS[op], k)
                                 for lits, op, k in chk.terms))
                for chk in self.checks(task))
        return c

    def encode(self, task: Task, action: str, deadline: float | None = None) -> tuple[list[list[int]], int, bool]:
        """``(clauses, number of variables, trivially unsat)`` of an encoding (raises :class:`EncodingError`;
        kind ``"timeout"`` once :func:`time.perf_counter` passes ``deadline``, polled during grounding)."""
        lines = parse_program(action)
        if not lines:
            raise EncodingError("parse_error", "empty encoding: write one constraint group per line")
        g = _Grounder(self._instance(task.env_id), self._table(task.env_id), self.max_clauses, self.max_vars,
                      deadline)
        for n, line in enumerate(lines, 1):
            try:
                g.add_line(line)
            except EncodingError as e:
                raise EncodingError(e.kind, f"constraint {n}: {e.message}") from None
        return g.clauses, g.top, g.unsat

    def _solve(self, clauses: list[list[int]], n_decl: int, deadline: float) -> list[list[bool]] | str:
        """The lexicographically largest and smallest models over the declared variables
        (``"unsat"`` / ``"timeout"`` otherwise); see the module docstring."""
        from pysat.solvers import Solver

        models = []
        for want in (True, False):
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return "timeout"
            with Solver(name=self.solver, bootstrap_with=clauses) as s:
                s.set_phases([v if want else -v for v in range(1, n_decl + 1)])
                timer = threading.Timer(remaining, s.interrupt)
                timer.daemon = True
                timer.start()
                try:
                    res = _lex_extreme(s, n_decl, want, deadline, self.lex_conflicts)
                finally:
                    timer.cancel()
            if isinstance(res, str):
                return res
            models.append(res)
        return models

    def problem_status(self, task: Task) -> str:
        """Whether the task's stated requirements have a solution, as far as the world knows:
        ``"sat"`` (the solver found an assignment that passes every check — confirmed by the
        verifier), ``"unsat"`` (the checks, grounded as CNF, are unsatisfiable) or ``"unknown"``
        (too large, out of time — ``timeout_s`` of its own — or an operator the grounder lacks).
        Computed once per task (the verifier's own checks are the faithful encoding)."""
        st = self._status.get(task.task_id)
        if st is None:
            st = self._status[task.task_id] = self._decide_requirements(task)
        return st

    def _decide_requirements(self, task: Task) -> str:
        from pysat.solvers import Solver

        table = self._table(task.env_id)
        deadline = time.perf_counter() + self.timeout_s
        g = _Grounder(self._instance(task.env_id), table, self.max_clauses, self.max_vars, deadline)
        try:
            for chk in self.checks(task):
                for lits, op, k in chk.terms:
                    if op not in _CARD_OF_OP:
                        return "unknown"
                    g.card([table.id(v, idx) * (1 if want else -1) for v, idx, want in lits], _CARD_OF_OP[op], k)
        except EncodingError:
            return "unknown"
        if g.unsat:
            return "unsat"
        res, model = solve_within(self.solver, g.clauses, deadline - time.perf_counter())
        if res == "timeout":
            return "unknown"
        if res == "unsat":
            return "unsat"
        vals = [False] * (table.n + 1)
        for lit in model:
            if 0 < abs(lit) <= table.n:
                vals[abs(lit)] = lit > 0
        _, failed = self._score(self._compiled_checks(task), vals)
        return "unknown" if failed else "sat"

    def _unsat_feedback(self, task: Task) -> str:
        """What the world says of an unsatisfiable encoding (never more than it knows)."""
        if self.feedback != "rich":
            return USER_UNSAT_FEEDBACK
        st = self.problem_status(task)
        return UNSAT_FEEDBACK if st == "sat" else UNSAT_PROBLEM_FEEDBACK if st == "unsat" else USER_UNSAT_FEEDBACK

    def _timeout_text(self) -> str:
        return f"Timeout: the solver did not finish within {self.timeout_s:g} s."

    @staticmethod
    def _score(compiled: tuple, vals: list[bool]) -> tuple[int, list[str]]:
        failed = []
        for desc, terms in compiled:
            for ids, op, k in terms:
                cnt = 0
                for i in ids:
                    if (vals[i] if i > 0 else not vals[-i]):
                        cnt += 1
                if not op(cnt, k):
                    failed.append(desc)
                    break
        return len(compiled) - len(failed), failed

    # ---------------------------------------------------------------- evaluate
    def evaluate(self, task: Task, action: str) -> Outcome:
        """Parse, expand, solve and verify ``action`` for ``task`` (errors are outcomes)."""
        self._instance(task.env_id)
        compiled = self._compiled_checks(task)
        table = self._table(task.env_id)
        start = time.perf_counter()
        try:
            clauses, _, unsat = self.encode(task, action, start + self.timeout_s)
        except EncodingError as e:
            if e.kind == "timeout":
                return Outcome(0.0, False, False, self._timeout_text(), "timeout", time.perf_counter() - start)
            prefix = "Parse error" if e.kind == "parse_error" else "Too large"
            return Outcome(0.0, False, True, _clip(f"{prefix}: {e.message}"), e.kind, time.perf_counter() - start)
        rich = self.feedback == "rich"
        if unsat:
            return Outcome(0.0, False, True, self._unsat_feedback(task), None, time.perf_counter() - start)
        res = self._solve(clauses, table.n, start + self.timeout_s)
        if res == "timeout":
            return Outcome(0.0, False, False, self._timeout_text(), "timeout", time.perf_counter() - start)
        if res == "unsat":
            return Outcome(0.0, False, True, self._unsat_feedback(task), None, time.perf_counter() - start)
        worst: tuple[int, list[str], str] | None = None
        for vals, label in zip(res, ("largest", "smallest")):
            passed, failed = self._score(compiled, vals)
            if worst is None or passed < worst[0]:
                worst = (passed, failed, label)
        assert worst is not None
        passed, failed, label = worst
        total = len(compiled)
        if not failed:
            fb = (f"Solved: the decoded solution passes all {total} checks." if rich
                  else "Solved: the decoded solution meets every stated requirement.")
            return Outcome(1.0, True, True, fb, None, time.perf_counter() - start)
        frac = passed / total if total else 0.0
        score = frac if self.partial_credit else 0.0
        if not rich:
            return Outcome(score, False, True, _clip(violations_text(failed, "a solution it admits")), None,
                           time.perf_counter() - start)
        shown = "; ".join(failed[:5]) + (f"; … ({len(failed) - 5} more)" if len(failed) > 5 else "")
        fb = (f"The encoding is satisfiable, but one of its solutions (the lexicographically {label}) passes only "
              f"{passed} of {total} checks. Failed: {shown}.")
        return Outcome(score, False, True, _clip(fb), None, time.perf_counter() - start)


class SatSmtWorld:
    """One world over SAT and SMT environments: routes by ``task.domain`` (``"sat"`` / ``"smt"``).

    Args:
      instances: ``env_id → SATInstance | SMTInstance``.
      rules: ``task_id → requirements`` for both kinds of task.
      timeout_s: per-evaluation limit handed to both worlds; other keyword
        arguments go to :class:`SATWorld` (``max_clauses``, ``max_vars``,
        ``solver``) or to both (``partial_credit``, ``feedback``).
    """

    def __init__(self, instances: Mapping[str, Any], rules: Mapping[str, Sequence[Mapping[str, Any]]], *,
                 timeout_s: float = 2.0, partial_credit: bool = True, feedback: str = "user", **sat_kw: Any) -> None:
        from cfjax.domains.sat.smt_world import SMTInstance, SMTWorld

        self.feedback = check_feedback_mode(feedback)

        sat = {k: v for k, v in instances.items() if isinstance(v, SATInstance)}
        smt = {k: v for k, v in instances.items() if isinstance(v, SMTInstance)}
        other = sorted(set(instances) - set(sat) - set(smt))
        if other:
            raise TypeError(f"instances of unknown type: {other}")
        self.sat = SATWorld(sat, rules, timeout_s=timeout_s, partial_credit=partial_credit, feedback=feedback, **sat_kw)
        self.smt = SMTWorld(smt, rules, timeout_s=timeout_s, partial_credit=partial_credit, feedback=feedback)

    def evaluate(self, task: Task, action: str) -> Outcome:
        if task.domain == "sat":
            return self.sat.evaluate(task, action)
        if task.domain == "smt":
            return self.smt.evaluate(task, action)
        raise ValueError(f"task {task.task_id!r} has domain {task.domain!r}; expected 'sat' or 'smt'")

    def close(self) -> None:  # symmetry with SQLWorld; nothing to release
        pass

"""SMT world model: whitelisted SMT-LIB 2 (QF_LIA) encodings, Z3, a schedule verifier.

The action of an SMT task is an SMT-LIB 2 script in the QF_LIA logic, one
top-level command per line; every ``(assert …)`` is one decision unit
(papers/countermem.md Table 4, "SMT solver / encoding"). The environment
(:class:`SMTInstance`, a project schedule) *declares* the variables — the
start ``s_<job>`` and end ``e_<job>`` day of every job — and asserts the
environment's own facts (``e_j = s_j + duration_j``, ``0 <= s_j``,
``e_j <= horizon``) in a fixed prelude; the action only adds assertions
(re-declaring a prelude variable with its own sort is accepted and ignored).

Safety
------
The text is read by a strict, iterative s-expression reader (bounded length,
nesting depth, token count and numeral size; no strings, quoted symbols,
bit-vector literals or decimals) and every top-level command is checked
against a whitelist *before* Z3 sees anything:

* allowed: ``declare-const`` and ``declare-fun`` with no arguments (sorts
  ``Int``/``Bool``), ``assert``, ``check-sat`` and ``get-model`` (no-ops: the
  world runs the solver itself), ``set-logic QF_LIA`` (a no-op);
* refused with ``error="forbidden"``: every other command (``set-option``,
  ``set-info``, other logics, ``exit``, ``echo``, ``eval``, ``push``, ``pop``,
  ``reset``, ``define-fun``, ``define-fun-rec``, ``declare-sort``,
  ``get-value``…), functions with arguments, quantifiers and annotations.

The script Z3 parses (:func:`z3.parse_smt2_string`, in a fresh
:class:`z3.Context` per evaluation so results never depend on earlier calls)
is *re-printed* from the reader's tree, so nothing outside the whitelist can
reach it. Before that, every assertion is sort-checked by :func:`sort_of`
(Z3's own parser silently coerces ``true`` to ``1``): integer and boolean
terms only, linear arithmetic, ``div``/``mod`` by numerals only; anything
else is a ``parse_error``. Z3's parsed assertions are checked once more
against the same fragment.

Solving and scoring
-------------------
Like the SAT world, the verifier sees the two extreme solutions of the
encoding: Z3's optimiser finds the *earliest* schedule (minimal sum of start
days) and the *latest* one (maximal sum); each is decoded and checked against
the task's own verifier (its stated precedences, deadlines, release days,
resource rules — plain Python over the instance), and the worse is reported.
Score = fraction of checks passed (``solved`` iff all pass). Unsatisfiable →
score 0 ("the encoding is unsatisfiable"; ``feedback="rich"`` adds "but the
problem has a solution" only where the world has solved the stated
requirements, :meth:`SMTWorld.problem_status`);
reader/whitelist/Z3 errors → score 0, completed, ``error`` =
``"parse_error"``/``"forbidden"``/``"too_large"``; running past ``timeout_s``
→ ``completed=False``, ``error="timeout"``.

Bounds: one deadline, ``timeout_s`` after the evaluation starts, covers the
whole evaluation. The reader's limits (``MAX_TEXT`` characters, checked
before tokenising; ``MAX_TOKENS``, ``MAX_DEPTH``, ``MAX_COMMANDS``,
``MAX_NUMERAL_DIGITS``) bound what Z3 parses, and the check of Z3's parsed
terms stops at ``MAX_AST_NODES`` distinct terms and polls the deadline.
Each optimiser run gets what is left as Z3's ``timeout`` parameter (Z3
answering *unknown* is a timeout), and a :class:`threading.Timer` interrupts
the context (:meth:`z3.Context.interrupt`) ``Z3_INTERRUPT_GRACE_S`` after the
deadline in case some Z3 step ignores that parameter. Z3 has no per-context
memory limit: its ``memory_max_size`` is process-global, and in the Z3 build
in use a context created once it is exceeded crashes the process, so it is
deliberately not set; memory is bounded by the input limits and the deadline.
:func:`parse_commands` is memoised in a byte-bounded LRU memo
(:mod:`cfjax.domains.sat.memo`, ``PARSE_COMMANDS_BUDGET`` estimated bytes).

Feedback (``feedback=``, as in the SAT world): ``"user"`` (default) reports
errors, "unsatisfiable" and which stated requirements a schedule of the
encoding violates::

    Solved: the decoded schedule meets every stated requirement.
    The encoding is unsatisfiable: no schedule satisfies all of its assertions together with the environment's facts.
    The encoding is satisfiable, but a schedule it admits violates 1 stated requirement:
    pour starts strictly after dig ends.

``"rich"`` adds whether the problem has a solution (Z3 solves the verifier's
own checks with the environment's facts once per task: "but the problem has a
solution" when it finds a schedule, "and so are the stated requirements" when
it proves there is none, nothing when it cannot decide), which extreme
schedule failed and how many of the verifier's checks it passed. ``score``/``solved``
never depend on the option.

Length: one module on purpose — the s-expression reader, the command whitelist, the sort check and the
world share limits and error kinds; splitting them would scatter the sandbox's one set of rules.
"""

from __future__ import annotations

import operator
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from cfjax.domains.sat.memo import byte_lru, text_cost
from cfjax.types import Task
from cfjax.types import Outcome

__all__ = ["SMTInstance", "SMTWorld", "SmtError", "SExpr", "read_sexprs", "print_sexpr", "parse_commands",
           "command_kind", "schedule_checks", "sort_of", "SMT_KEYWORDS", "LinCheck", "FEEDBACK_MODES"]

SExpr = Union[str, tuple]

MAX_TEXT = 50_000
MAX_DEPTH = 40
MAX_TOKENS = 20_000
MAX_NUMERAL_DIGITS = 12
MAX_COMMANDS = 400
MAX_AST_NODES = 50_000
#: estimated bytes of the memo of :func:`parse_commands` (:mod:`cfjax.domains.sat.memo`)
PARSE_COMMANDS_BUDGET = 32 << 20
#: seconds past ``timeout_s`` after which a Z3 call that ignored its ``timeout`` parameter is interrupted
Z3_INTERRUPT_GRACE_S = 0.25
MAX_FEEDBACK = 790
#: values of the ``feedback`` option (module docstring)
FEEDBACK_MODES = ("user", "rich")

#: SMT-LIB words never masked in edit signatures (tokenised as by :func:`cfjax.types.masked_signature`)
SMT_KEYWORDS = frozenset({"assert", "declare", "const", "fun", "Int", "Bool", "and", "or", "not", "xor", "ite",
                          "distinct", "true", "false", "check", "sat", "get", "model", "set", "logic", "QF_LIA",
                          "div", "mod", "abs"})

ALLOWED_COMMANDS = frozenset({"declare-const", "declare-fun", "assert", "check-sat", "get-model", "set-logic"})
ALLOWED_LOGICS = frozenset({"QF_LIA"})
_FORBIDDEN_TERMS = frozenset({"forall", "exists", "lambda", "!", "match", "as", "par"})
_SORTS = frozenset({"Int", "Bool"})


class SmtError(Exception):
    """``kind``: ``"parse_error"``, ``"forbidden"`` or ``"too_large"``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


# --------------------------------------------------------------------------- reader

_TOK = re.compile(r"""\s+|;[^\n]*|\(|\)|"|\||#[xb][0-9A-Fa-f]*|[^\s()";|]+""")
_SYMBOL = re.compile(r"[A-Za-z~!@$%^&*_+=<>.?/\-][A-Za-z0-9~!@$%^&*_+=<>.?/\-]*")
_NUMERAL = re.compile(r"0|[1-9][0-9]*")


def read_sexprs(text: str) -> tuple[SExpr, ...]:
    """The top-level s-expressions of ``text`` (iterative; raises :class:`SmtError`)."""
    if len(text) > MAX_TEXT:
        raise SmtError("too_large", f"the script has {len(text)} characters (at most {MAX_TEXT})")
    stack: list[list] = [[]]
    n_tok = 0
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOK.match(text, pos)
        if m is None:  # pragma: no cover - the pattern matches any character
            raise SmtError("parse_error", f"unexpected character {text[pos]!r}")
        tok = m.group()
        pos = m.end()
        c = tok[0]
        if c.isspace() or c == ";":
            continue
        n_tok += 1
        if n_tok > MAX_TOKENS:
            raise SmtError("too_large", f"more than {MAX_TOKENS} tokens")
        if c == "(":
            if len(stack) > MAX_DEPTH:
                raise SmtError("parse_error", f"nesting deeper than {MAX_DEPTH} levels")
            stack.append([])
        elif c == ")":
            if len(stack) == 1:
                raise SmtError("parse_error", "unbalanced ')'")
            done = tuple(stack.pop())
            stack[-1].append(done)
        elif c == '"':
            end = text.find('"', pos)
            while end >= 0 and text.startswith('""', end):
                end = text.find('"', end + 2)
            if end < 0:
                raise SmtError("parse_error", "unterminated string literal")
            stack[-1].append(text[pos - 1:end + 1])
            pos = end + 1
        elif c == "|":
            raise SmtError("parse_error", "quoted symbols |…| are not allowed")
        elif c == "#":
            raise SmtError("parse_error", f"bit-vector literal {tok[:20]!r} is not part of QF_LIA")
        elif c == ":":
            if not _SYMBOL.fullmatch(tok[1:]) or len(tok) > 100:
                raise SmtError("parse_error", f"bad keyword {tok[:30]!r}")
            stack[-1].append(tok)
        elif c.isdigit():
            if not _NUMERAL.fullmatch(tok):
                raise SmtError("parse_error", f"bad numeral {tok[:30]!r} (integers only)")
            if len(tok) > MAX_NUMERAL_DIGITS:
                raise SmtError("parse_error", f"numeral with {len(tok)} digits (at most {MAX_NUMERAL_DIGITS})")
            stack[-1].append(tok)
        else:
            if not _SYMBOL.fullmatch(tok) or len(tok) > 100:
                raise SmtError("parse_error", f"bad symbol {tok[:30]!r}")
            stack[-1].append(tok)
    if len(stack) != 1:
        raise SmtError("parse_error", "unbalanced '(': missing ')'")
    return tuple(stack[0])


def print_sexpr(e: SExpr) -> str:
    """Canonical single-line print (iterative)."""
    if isinstance(e, str):
        return e
    out: list[str] = []
    stack: list[Any] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, tuple):
            out.append("(")
            stack.append(")")
            for i in range(len(x) - 1, -1, -1):
                stack.append(x[i])
                if i > 0:
                    stack.append(" ")
        else:  # pragma: no cover
            raise TypeError(x)
    return "".join(out)


def command_kind(cmd: SExpr) -> str:
    """``"declare"``, ``"assert"`` or ``"command"`` of a whitelisted top-level command."""
    head = cmd[0] if isinstance(cmd, tuple) and cmd else ""
    if head in ("declare-const", "declare-fun"):
        return "declare"
    if head == "assert":
        return "assert"
    return "command"


def _check_term(t: SExpr) -> None:
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            if x in _FORBIDDEN_TERMS:
                raise SmtError("forbidden", f"{x!r} is not allowed in a quantifier-free encoding")
            if x == "_":
                raise SmtError("parse_error", "indexed identifiers (_ …) are not part of QF_LIA")
            if x.startswith('"'):
                raise SmtError("parse_error", "string literals are not part of a QF_LIA encoding")
            if x.startswith(":"):
                raise SmtError("forbidden", f"attributes such as {x[:30]!r} are not allowed")
        else:
            if not x:
                raise SmtError("parse_error", "empty term ()")
            stack.extend(x)


def check_command(cmd: SExpr) -> SExpr:
    """Whitelist one top-level command (raises :class:`SmtError`)."""
    if isinstance(cmd, str):
        raise SmtError("parse_error", f"a top-level command must be a list, found {cmd[:30]!r}")
    if not cmd or not isinstance(cmd[0], str):
        raise SmtError("parse_error", "a top-level command must start with its name")
    head = cmd[0]
    if head not in ALLOWED_COMMANDS:
        raise SmtError("forbidden", f"the command {head[:40]!r} is not allowed (allowed: declare-const, "
                                    "declare-fun with no arguments, assert, check-sat, get-model)")
    if head == "set-logic":
        if len(cmd) != 2 or cmd[1] not in ALLOWED_LOGICS:
            raise SmtError("forbidden", f"only (set-logic QF_LIA) is allowed, got {print_sexpr(cmd)[:60]}")
    elif head in ("check-sat", "get-model"):
        if len(cmd) != 1:
            raise SmtError("parse_error", f"({head}) takes no arguments")
    elif head == "declare-const":
        if len(cmd) != 3 or not isinstance(cmd[1], str) or not isinstance(cmd[2], str):
            raise SmtError("parse_error", "expected (declare-const NAME SORT)")
        if cmd[2] not in _SORTS:
            raise SmtError("parse_error", f"sort {cmd[2][:30]!r} is not allowed (Int or Bool)")
    elif head == "declare-fun":
        if len(cmd) != 4 or not isinstance(cmd[1], str) or not isinstance(cmd[3], str):
            raise SmtError("parse_error", "expected (declare-fun NAME () SORT)")
        if cmd[2] != ():
            raise SmtError("forbidden", "functions with arguments are not allowed (QF_LIA: constants only)")
        if cmd[3] not in _SORTS:
            raise SmtError("parse_error", f"sort {cmd[3][:30]!r} is not allowed (Int or Bool)")
    elif head == "assert":
        if len(cmd) != 2:
            raise SmtError("parse_error", "expected (assert TERM)")
        _check_term(cmd[1])
    return cmd


@byte_lru(PARSE_COMMANDS_BUDGET, lambda text, cmds: text_cost(text, len(cmds)))
def parse_commands(text: str) -> tuple[SExpr, ...]:
    """The whitelisted top-level commands of an SMT-LIB script (memoised, bounded by bytes;
    raises :class:`SmtError`)."""
    cmds = read_sexprs(text)
    if len(cmds) > MAX_COMMANDS:
        raise SmtError("too_large", f"{len(cmds)} commands (at most {MAX_COMMANDS})")
    return tuple(check_command(c) for c in cmds)


_BOOL_OPS = frozenset({"and", "or", "xor", "=>"})
_CMP_OPS = frozenset({"<=", "<", ">=", ">"})


def _is_numeral(t: SExpr) -> bool:
    return (isinstance(t, str) and t.isdigit()) or (isinstance(t, tuple) and len(t) == 2 and t[0] == "-"
                                                    and isinstance(t[1], str) and t[1].isdigit())


def sort_of(t: SExpr, env: Mapping[str, str]) -> str:
    """The sort (``"Int"``/``"Bool"``) of a QF_LIA term over the declared constants ``env``
    (raises :class:`SmtError` ``parse_error`` for unknown names, wrong sorts or non-linear terms)."""
    if isinstance(t, str):
        if t.isdigit():
            return "Int"
        if t in ("true", "false"):
            return "Bool"
        if t in env:
            return env[t]
        raise SmtError("parse_error", f"unknown constant {t[:40]!r}")
    if not t or not isinstance(t[0], str):
        raise SmtError("parse_error", f"cannot apply {print_sexpr(t)[:40]}")
    head, args = t[0], t[1:]

    def want(sort: str, xs, what: str) -> None:
        for x in xs:
            got = sort_of(x, env)
            if got != sort:
                raise SmtError("parse_error", f"{what} expects {sort} arguments, got {got} in {print_sexpr(t)[:60]}")

    if head == "let":
        if len(t) != 3 or not isinstance(t[1], tuple):
            raise SmtError("parse_error", "expected (let ((name term) ...) body)")
        new = dict(env)
        for b in t[1]:
            if not (isinstance(b, tuple) and len(b) == 2 and isinstance(b[0], str)):
                raise SmtError("parse_error", "bad let binding")
            new[b[0]] = sort_of(b[1], env)
        return sort_of(t[2], new)
    if head == "not":
        if len(args) != 1:
            raise SmtError("parse_error", "not takes one argument")
        want("Bool", args, "not")
        return "Bool"
    if head in _BOOL_OPS:
        if len(args) < (2 if head in ("xor", "=>") else 1):
            raise SmtError("parse_error", f"{head} needs more arguments")
        want("Bool", args, head)
        return "Bool"
    if head in ("=", "distinct"):
        if len(args) < 2:
            raise SmtError("parse_error", f"{head} needs at least two arguments")
        first = sort_of(args[0], env)
        want(first, args[1:], head)
        return "Bool"
    if head == "ite":
        if len(args) != 3:
            raise SmtError("parse_error", "ite takes three arguments")
        want("Bool", args[:1], "ite")
        a = sort_of(args[1], env)
        want(a, args[2:], "ite")
        return a
    if head in _CMP_OPS:
        if len(args) < 2:
            raise SmtError("parse_error", f"{head} needs at least two arguments")
        want("Int", args, head)
        return "Bool"
    if head in ("+", "-", "*"):
        if not args or (head != "-" and len(args) < 2):
            raise SmtError("parse_error", f"{head} needs more arguments")
        want("Int", args, head)
        if head == "*" and sum(1 for a in args if not _is_numeral(a)) > 1:
            raise SmtError("parse_error", f"non-linear product {print_sexpr(t)[:60]} is not part of QF_LIA")
        return "Int"
    if head in ("div", "mod"):
        if len(args) != 2:
            raise SmtError("parse_error", f"{head} takes two arguments")
        want("Int", args, head)
        if not _is_numeral(args[1]) or args[1] in ("0", ("-", "0")):
            raise SmtError("parse_error", f"{head} only by a non-zero numeral in QF_LIA")
        return "Int"
    if head == "abs":
        if len(args) != 1:
            raise SmtError("parse_error", "abs takes one argument")
        want("Int", args, "abs")
        return "Int"
    raise SmtError("parse_error", f"unknown operator {head[:40]!r} (QF_LIA)")


# --------------------------------------------------------------------------- instances


@dataclass(frozen=True, eq=False)
class SMTInstance:
    """A project schedule: jobs with durations (days) inside ``[0, horizon]``.

    Variables ``s_<job>`` (start day) and ``e_<job>`` (end day) are Int
    constants declared by the environment, which also asserts
    ``e_j = s_j + duration``, ``s_j >= 0`` and ``e_j <= horizon``.
    """

    env_id: str
    problem: str
    jobs: tuple[tuple[str, int], ...]
    horizon: int
    description: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def durations(self) -> dict[str, int]:
        return dict(self.jobs)

    def declarations(self) -> list[tuple[str, str]]:
        return [(f"{p}_{j}", "Int") for j, _ in self.jobs for p in ("s", "e")]

    def prelude(self) -> str:
        lines = [f"(declare-const {n} {s})" for n, s in self.declarations()]
        for j, d in self.jobs:
            lines.append(f"(assert (= e_{j} (+ s_{j} {d})))")
            lines.append(f"(assert (>= s_{j} 0))")
            lines.append(f"(assert (<= e_{j} {self.horizon}))")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"env_id": self.env_id, "solver": "smt", "problem": self.problem, "jobs": [list(j) for j in self.jobs],
                "horizon": self.horizon, "description": self.description, "data": dict(self.data)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SMTInstance":
        return cls(d["env_id"], d["problem"], tuple((j, int(k)) for j, k in d["jobs"]), int(d["horizon"]),
                   d.get("description", ""), dict(d.get("data", {})))


# --------------------------------------------------------------------------- verifier

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq,
        "!=": operator.ne}


@dataclass(frozen=True)
class LinCheck:
    """A named check: at least one term ``(Σ coeff·var, op, const)`` holds."""

    desc: str
    terms: tuple[tuple[tuple[tuple[str, int], ...], str, int], ...]


def schedule_checks(inst: SMTInstance, rules: Sequence[Mapping[str, Any]]) -> tuple[LinCheck, ...]:
    """The verifier of a schedule task: one check per stated rule.

    Rules: ``after`` (job, prev, gap: job starts ≥ gap days after prev ends),
    ``deadline`` (job, day, strict: ends by / before the day), ``release``
    (job, day, strict: starts on or after / strictly after the day),
    ``disjoint`` (a, b: the two jobs do not overlap), ``distinct_start``
    (a, b: the two jobs start on different days).
    """
    dur = inst.durations
    out = []
    for r in rules:
        k = r["rule"]
        if k == "after":
            j, p, gap = r["job"], r["prev"], int(r.get("gap", 0))
            desc = (f"{j} starts at or after the end of {p}" if gap == 0 else
                    f"{j} starts strictly after {p} ends" if gap == 1 else f"{j} starts {gap}+ days after {p} ends")
            out.append(LinCheck(desc, (((("s_" + j, 1), ("s_" + p, -1)), ">=", dur[p] + gap),)))
        elif k == "deadline":
            j, day, strict = r["job"], int(r["day"]), bool(r.get("strict", False))
            desc = f"{j} ends {'before' if strict else 'by'} day {day}"
            out.append(LinCheck(desc, (((("s_" + j, 1),), "<" if strict else "<=", day - dur[j]),)))
        elif k == "release":
            j, day, strict = r["job"], int(r["day"]), bool(r.get("strict", False))
            desc = f"{j} starts {'after' if strict else 'on or after'} day {day}"
            out.append(LinCheck(desc, (((("s_" + j, 1),), ">" if strict else ">=", day),)))
        elif k == "disjoint":
            a, b = r["a"], r["b"]
            out.append(LinCheck(f"{a} and {b} do not overlap",
                                (((("s_" + b, 1), ("s_" + a, -1)), ">=", dur[a]),
                                 ((("s_" + a, 1), ("s_" + b, -1)), ">=", dur[b]))))
        elif k == "distinct_start":
            a, b = r["a"], r["b"]
            out.append(LinCheck(f"{a} and {b} start on different days", (((("s_" + a, 1), ("s_" + b, -1)), "!=", 0),)))
        else:
            raise ValueError(f"unknown schedule rule {k!r}")
    return tuple(out)


# --------------------------------------------------------------------------- the world

#: the ``"rich"`` text of an unsatisfiable encoding once the world has found a schedule meeting the requirements
UNSAT_FEEDBACK = "The encoding is unsatisfiable, but the problem has a solution: some assertion is too strong."
#: the ``"rich"`` text of an unsatisfiable encoding once the world has proved the requirements unsatisfiable
UNSAT_PROBLEM_FEEDBACK = ("The encoding is unsatisfiable, and so are the stated requirements: no schedule meets "
                          "them all within the environment's facts.")
#: the ``"user"`` text of an unsatisfiable encoding (nothing about whether the problem has a solution)
USER_UNSAT_FEEDBACK = ("The encoding is unsatisfiable: no schedule satisfies all of its assertions together with "
                       "the environment's facts.")


def _clip(text: str, limit: int = MAX_FEEDBACK) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _interrupt(ctx: Any, fired: threading.Event) -> None:
    fired.set()
    ctx.interrupt()


class SMTWorld:
    """Executable SMT (QF_LIA) world model: ``evaluate(task, script) -> Outcome`` (module docstring).

    Args:
      instances: ``env_id → SMTInstance``.
      rules: ``task_id → requirements`` (see :func:`schedule_checks`).
      timeout_s: wall-clock limit for the two optimiser runs together.
      partial_credit: score a failing schedule by the fraction of checks passed (else 0).
      feedback: ``"user"`` (default: errors, unsatisfiable, the violated stated requirements) or
        ``"rich"`` (also that the problem has a solution, the failing extreme and the checks passed).
    """

    def __init__(self, instances: Mapping[str, SMTInstance], rules: Mapping[str, Sequence[Mapping[str, Any]]], *,
                 timeout_s: float = 2.0, partial_credit: bool = True, feedback: str = "user") -> None:
        if feedback not in FEEDBACK_MODES:
            raise ValueError(f"feedback must be 'user' or 'rich', got {feedback!r}")
        self.feedback = feedback
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.instances = dict(instances)
        self.rules = {k: tuple(v) for k, v in rules.items()}
        self.timeout_s = float(timeout_s)
        self.partial_credit = partial_credit
        self._checks: dict[str, tuple[LinCheck, ...]] = {}
        self._status: dict[str, str] = {}

    def _instance(self, env_id: str) -> SMTInstance:
        try:
            return self.instances[env_id]
        except KeyError:
            raise ValueError(f"unknown SMT env_id {env_id!r} (known: {', '.join(sorted(self.instances))})") from None

    def checks(self, task: Task) -> tuple[LinCheck, ...]:
        c = self._checks.get(task.task_id)
        if c is None:
            if task.task_id not in self.rules:
                raise ValueError(f"no verifier rules for task {task.task_id!r}")
            c = self._checks[task.task_id] = schedule_checks(self._instance(task.env_id), self.rules[task.task_id])
        return c

    def problem_status(self, task: Task) -> str:
        """Whether the task's stated requirements have a schedule, as far as the world knows: ``"sat"``
        (Z3 found one and the verifier confirms it), ``"unsat"`` (Z3 proved there is none) or
        ``"unknown"`` (out of time: ``timeout_s`` of its own). Computed once per task from the
        verifier's own checks and the environment's facts."""
        st = self._status.get(task.task_id)
        if st is None:
            st = self._status[task.task_id] = self._decide_requirements(task)
        return st

    def _decide_requirements(self, task: Task) -> str:
        import z3

        inst = self._instance(task.env_id)
        checks = self.checks(task)
        ctx = z3.Context()
        try:
            var = {}
            facts = []
            for j, d in inst.jobs:
                s_, e_ = z3.Int(f"s_{j}", ctx), z3.Int(f"e_{j}", ctx)
                var[f"s_{j}"], var[f"e_{j}"] = s_, e_
                facts += [e_ == s_ + d, s_ >= 0, e_ <= inst.horizon]
            cmp = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b,
                   ">": lambda a, b: a > b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
            for c in checks:
                terms = []
                for coeffs, op, k in c.terms:
                    if op not in cmp or any(v not in var for v, _ in coeffs):
                        return "unknown"
                    terms.append(cmp[op](z3.Sum([a * var[v] for v, a in coeffs]), k))
                facts.append(z3.Or(terms))
            sol = z3.Solver(ctx=ctx)
            sol.set("timeout", max(1, int(self.timeout_s * 1000)))
            sol.add(facts)
            r = sol.check()
            if r == z3.unsat:
                return "unsat"
            if r != z3.sat:
                return "unknown"
            m = sol.model()
            vals = {f"s_{j}": m.eval(var[f"s_{j}"], model_completion=True).as_long() for j, _ in inst.jobs}
        except z3.Z3Exception:  # pragma: no cover - defensive
            return "unknown"
        finally:
            del ctx
        return "sat" if all(self._holds(c, vals) for c in checks) else "unknown"

    def _unsat_feedback(self, task: Task) -> str:
        """What the world says of an unsatisfiable encoding (never more than it knows)."""
        if self.feedback != "rich":
            return USER_UNSAT_FEEDBACK
        st = self.problem_status(task)
        return UNSAT_FEEDBACK if st == "sat" else UNSAT_PROBLEM_FEEDBACK if st == "unsat" else USER_UNSAT_FEEDBACK

    def script(self, inst: SMTInstance, action: str) -> str:
        """The script Z3 parses: the prelude plus the action's declarations and assertions,
        re-printed from the whitelisted tree (raises :class:`SmtError`)."""
        cmds = parse_commands(action)
        if not any(command_kind(c) == "assert" for c in cmds):
            raise SmtError("parse_error", "no (assert …) command: the encoding states no constraint")
        known = dict(inst.declarations())
        lines = [inst.prelude()]
        n_new = 0
        for c in cmds:
            kind = command_kind(c)
            if kind == "declare":
                name, sort = c[1], c[-1]
                if name in known:
                    if known[name] != sort:
                        raise SmtError("parse_error", f"{name} is declared by the environment as {known[name]}, "
                                                      f"not {sort}")
                    continue
                known[name] = sort
                n_new += 1
                lines.append(f"(declare-const {name} {sort})")
            elif kind == "assert":
                if sort_of(c[1], known) != "Bool":
                    raise SmtError("parse_error", f"assertion {print_sexpr(c)[:60]} is not a Bool term")
                lines.append(print_sexpr(c))
        return "\n".join(lines)

    @staticmethod
    def _validate(assertions, z3, deadline: float | None = None) -> None:
        """Keep the parsed assertions inside QF_LIA (raises :class:`SmtError`; kind ``"timeout"``
        once :func:`time.perf_counter` passes ``deadline``, polled every 256 terms)."""
        allowed = {z3.Z3_OP_TRUE, z3.Z3_OP_FALSE, z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT, z3.Z3_OP_ITE, z3.Z3_OP_AND,
                   z3.Z3_OP_OR, z3.Z3_OP_XOR, z3.Z3_OP_NOT, z3.Z3_OP_IMPLIES, z3.Z3_OP_ANUM, z3.Z3_OP_LE,
                   z3.Z3_OP_GE, z3.Z3_OP_LT, z3.Z3_OP_GT, z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_UMINUS,
                   z3.Z3_OP_MUL, z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_ABS, z3.Z3_OP_UNINTERPRETED}
        seen = 0
        stack = list(assertions)
        visited: set[int] = set()
        while stack:
            e = stack.pop()
            key = e.get_id()
            if key in visited:
                continue
            visited.add(key)
            seen += 1
            if seen > MAX_AST_NODES:
                raise SmtError("too_large", f"the assertions have more than {MAX_AST_NODES} distinct terms")
            if deadline is not None and not seen & 255 and time.perf_counter() >= deadline:
                raise SmtError("timeout", "checking the parsed assertions did not finish before the deadline")
            if z3.is_quantifier(e) or not z3.is_app(e):
                raise SmtError("forbidden", "quantifiers are not allowed (QF_LIA)")
            sort = e.sort().kind()
            if sort not in (z3.Z3_INT_SORT, z3.Z3_BOOL_SORT):
                raise SmtError("parse_error", f"term of sort {e.sort()} is not part of QF_LIA")
            k = e.decl().kind()
            if k not in allowed:
                raise SmtError("parse_error", f"operator {e.decl().name()!r} is not part of QF_LIA")
            if k == z3.Z3_OP_UNINTERPRETED and e.num_args() > 0:
                raise SmtError("forbidden", "functions with arguments are not allowed")
            if k == z3.Z3_OP_MUL and sum(1 for a in e.children() if not z3.is_int_value(a)) > 1:
                raise SmtError("parse_error", f"non-linear product {str(e)[:60]} is not part of QF_LIA")
            if k in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
                d = e.children()[1]
                if not z3.is_int_value(d) or d.as_long() == 0:
                    raise SmtError("parse_error", "div/mod only by a non-zero numeral in QF_LIA")
            stack.extend(e.children())

    def evaluate(self, task: Task, action: str) -> Outcome:
        """Whitelist, parse, optimise twice and verify ``action`` (errors are outcomes)."""
        import z3

        inst = self._instance(task.env_id)
        checks = self.checks(task)
        start = time.perf_counter()
        deadline = start + self.timeout_s

        def fail(kind: str, msg: str, completed: bool = True) -> Outcome:
            prefix = {"parse_error": "Parse error", "forbidden": "Forbidden", "too_large": "Too large",
                      "timeout": "Timeout", "solver_error": "Solver error"}.get(kind, kind)
            return Outcome(0.0, False, completed, _clip(f"{prefix}: {msg}"), kind, time.perf_counter() - start)

        def timed_out() -> Outcome:
            return Outcome(0.0, False, False, f"Timeout: the solver did not finish within {self.timeout_s:g} s",
                           "timeout", time.perf_counter() - start)

        try:
            text = self.script(inst, action)
        except SmtError as e:
            return fail(e.kind, e.message)
        ctx = z3.Context()
        # backstop: Z3 work that ignores its ``timeout`` parameter is interrupted shortly after the deadline
        fired = threading.Event()
        timer = threading.Timer(max(0.0, deadline - time.perf_counter()) + Z3_INTERRUPT_GRACE_S, _interrupt,
                                (ctx, fired))
        timer.daemon = True
        timer.start()
        try:
            try:
                fs = z3.parse_smt2_string(text, ctx=ctx)
            except z3.Z3Exception as e:
                if fired.is_set():
                    return timed_out()
                msg = e.value.decode() if isinstance(getattr(e, "value", None), bytes) else str(e)
                msg = re.sub(r"line \d+ column \d+: ", "", msg.replace("\n", " "))
                return fail("parse_error", msg[:300])
            try:  # the prelude (3 assertions per job) is the environment's own and trusted
                self._validate([fs[i] for i in range(3 * len(inst.jobs), len(fs))], z3, deadline)
            except SmtError as e:
                return timed_out() if e.kind == "timeout" else fail(e.kind, e.message)
            starts = [z3.Int(f"s_{j}", ctx) for j, _ in inst.jobs]
            try:
                values = self._extremes(z3, ctx, fs, inst, starts, start, task)
            except z3.Z3Exception as e:  # pragma: no cover - defensive: the solver failed, not the action
                if fired.is_set():
                    return timed_out()
                return fail("solver_error", str(e)[:200], False)
            if isinstance(values, Outcome):
                return values
        finally:
            timer.cancel()
            del ctx
        worst: tuple[list[str], str] | None = None
        for vals, label in zip(values, ("earliest", "latest")):
            failed = [c.desc for c in checks if not self._holds(c, vals)]
            if worst is None or len(failed) > len(worst[0]):
                worst = (failed, label)
        assert worst is not None
        failed, label = worst
        total = len(checks)
        rich = self.feedback == "rich"
        if not failed:
            fb = (f"Solved: the decoded schedule passes all {total} checks." if rich
                  else "Solved: the decoded schedule meets every stated requirement.")
            return Outcome(1.0, True, True, fb, None, time.perf_counter() - start)
        passed = total - len(failed)
        score = passed / total if (total and self.partial_credit) else 0.0
        if not rich:
            n = len(failed)
            shown = "; ".join(failed[:5]) + (f"; … ({n - 5} more)" if n > 5 else "")
            fb = (f"The encoding is satisfiable, but a schedule it admits violates {n} stated "
                  f"{'requirement' if n == 1 else 'requirements'}: {shown}.")
            return Outcome(score, False, True, _clip(fb), None, time.perf_counter() - start)
        shown = "; ".join(failed[:5]) + (f"; … ({len(failed) - 5} more)" if len(failed) > 5 else "")
        fb = (f"The encoding is satisfiable, but its {label} schedule passes only {passed} of {total} checks. "
              f"Failed: {shown}.")
        return Outcome(score, False, True, _clip(fb), None, time.perf_counter() - start)

    def _extremes(self, z3, ctx, fs, inst: SMTInstance, starts, start: float,
                  task: Task) -> list[dict[str, int]] | Outcome:
        """The earliest and the latest schedule of the encoding (or the failing outcome)."""
        values = []
        for sense in ("min", "max"):
            remaining = start + self.timeout_s - time.perf_counter()
            if remaining <= 0:
                return Outcome(0.0, False, False, f"Timeout: the solver did not finish within {self.timeout_s:g} s",
                               "timeout", time.perf_counter() - start)
            o = z3.Optimize(ctx=ctx)
            o.set("timeout", max(1, int(remaining * 1000)))
            o.set("elim_01", False)
            o.add(fs)
            obj = z3.Sum(starts)
            o.minimize(obj) if sense == "min" else o.maximize(obj)
            r = o.check()
            if r == z3.unsat:
                return Outcome(0.0, False, True, self._unsat_feedback(task), None, time.perf_counter() - start)
            if r != z3.sat:
                reason = o.reason_unknown()
                return Outcome(0.0, False, False, _clip(f"Timeout: the solver did not finish within "
                                                        f"{self.timeout_s:g} s ({reason})"),
                               "timeout", time.perf_counter() - start)
            m = o.model()
            values.append({f"s_{j}": m.eval(v, model_completion=True).as_long()
                           for (j, _), v in zip(inst.jobs, starts)})
        return values

    @staticmethod
    def _holds(c: LinCheck, vals: Mapping[str, int]) -> bool:
        for coeffs, op, k in c.terms:
            if _OPS[op](sum(a * vals[v] for v, a in coeffs), k):
                return True
        return False

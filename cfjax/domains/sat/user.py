"""User SAT/SMT encoding tasks and DIMACS answer tasks for ``--suite jsonl:PATH`` (:mod:`cfjax.domains.jsonl`).

The SAT/SMT world (:class:`~cfjax.domains.sat.sat_world.SatSmtWorld`) grades an *encoding* of a
problem over a structured instance with the task's own verifier — success needs no gold. A line
therefore carries what the world needs (``"domain": "sat"``):

=================  ==================================================================================
``question``       the request (required): the requirements in words
``instance``       the instance, an object in the form the built-in suite stores
                   (:meth:`SATInstance.to_json <cfjax.domains.sat.sat_world.SATInstance.to_json>`:
                   ``solver: "sat"``, ``problem`` ``colouring`` | ``roster``, ``sets``, ``families``,
                   ``vars``, ``data``; or ``solver: "smt"``, ``problem``, ``jobs``, ``horizon``); or
                   ``instance_path``, a JSON file holding that object (a built-in suite's
                   ``<env>.json`` is read too)
``rules``          the verifier's checker settings: the stated requirements as rule objects
                   (:func:`~cfjax.domains.sat.sat_world.sat_checks` for colouring and roster,
                   :func:`~cfjax.domains.sat.smt_world.schedule_checks` for schedules); required,
                   but for a DIMACS formula (below)
``start``          an encoding to repair, shown to the agent with the instance (optional; or
                   ``start_path``, a file holding it — an SMT-LIB script for a schedule)
``gold``           a reference encoding (optional; also ``encoding``, or ``gold_path``, a file): when
                   given, it must solve the task (the loader checks it once); it groups twins in the splits
=================  ==================================================================================

**DIMACS CNF.** Instead of ``instance``, a line may give a formula: ``dimacs`` (the text) or
``dimacs_path`` (a ``.cnf`` file, SATLIB's ``%`` trailer allowed). Such a task is to *answer* the
formula (:mod:`cfjax.domains.sat.cnf`): the action is a satisfying assignment — a model line
``v 1 -2 3 0`` (or one literal per line, or a bare list ``1 -2 3``; ``s SATISFIABLE`` optional) — or
the claim ``s UNSATISFIABLE`` (also ``UNSAT``). The world checks an assignment against every clause
in plain Python (the numbers of the first violated clauses are the feedback) and an UNSAT claim
with its SAT solver (a wrong claim is told so, never the model). Fields:

=================  ==================================================================================
``question``       optional (default: find a satisfying assignment or answer UNSAT)
``rules``          the requirements (default ``[{"rule": "clauses"}]``): ``clauses`` (every clause holds),
                   ``assign`` (``var``, ``value``: variable ``var`` is true / false), ``count`` (``op``,
                   ``k``: the number of true variables compares so); an UNSAT claim means no assignment
                   meets them all
``expect``         ``"sat"`` | ``"unsat"``: the answer key, for analysis only (never shown); the loader
                   warns when the solver disagrees
``start``          an answer to repair, shown to the agent (or ``start_path``)
``gold``           a reference answer (or ``gold_path``), checked to solve the task
=================  ==================================================================================

The agent sees the formula in DIMACS, the requirements other than the clauses, and the answer
format. Decision units: the verdict line and each literal (flip one literal's sign; switch the
claim). *Changed:* DIMACS tasks used to be encoding tasks solved by transcribing the formula; a
``start`` or ``gold`` that is an encoding rather than an answer is refused with one line saying so.
When the formula cannot be solved as stated — ``expect`` contradicts the solver, or the solver does
not decide it within the world's time limit (an UNSAT claim could not be checked) — the loader
prints one warning line per row (``cfjax: warning: FILE:LINE: …``; also :attr:`UserSat.warnings`).
An ``instance`` object of problem ``cnf`` is refused: give the formula as ``dimacs``.
Raw SMT-LIB problems are not instances of the SMT world (a project schedule);
SMT-LIB text is what its actions are (``start_path`` / ``gold_path``).

The environment is the instance (its ``env_id``; a formula's is its file's stem, or ``cnf_<hash>``
inline); lines that share an environment must give the same instance.

:class:`UserSatScript` (:mod:`cfjax.domains.sat.user_draft`, agent side, re-exported here) is the
scripted backbone's gold-free drafter: each attempt is the line's
``start`` (encoding or answer) with one rule edit of :class:`~cfjax.domains.sat.edits.SatSmtEdits`,
drawn uniformly from the attempt's seeded stream. Without ``start`` it answers a DIMACS formula by a
documented cheap heuristic (unit propagation and a seeded random descent, fixed probabilities; its
module docstring) and otherwise answers an empty encoding (the simulator writes no encoding from
words — a real backbone does). It knows no true fix and never reads ``expect`` or ``gold``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cfjax.domains.jsonl import JSONLError, Parsed, RowReader, UserDomain, UserRow
from cfjax.domains.sat.cnf import (ANSWER_FORMAT, AnswerError, Requirement, check_answer, cnf_requirements, decide,
                                   dimacs_text, parse_answer, print_answer, requirements_text)
from cfjax.domains.sat.instances import context_text
from cfjax.domains.sat.sat_world import Check, SATInstance, SATWorld, sat_checks
from cfjax.domains.sat.smt_world import SMTInstance, schedule_checks
from cfjax.domains.sat.tasks import observe_attrs
from cfjax.domains.sat.user_draft import UserSatScript
from cfjax.types import AnswerKey, Outcome, Task

__all__ = ["UserSat", "UserSatScript", "CNFSATWorld", "parse_dimacs", "cnf_instance", "cnf_checks", "DOMAIN",
           "DEFAULT_QUESTION", "DEFAULT_TIMEOUT_S"]


#: the SAT world's variable of a CNF instance and its index set
CNF_VAR, CNF_SET = "x", "VARS"
#: the question of a DIMACS line without one
DEFAULT_QUESTION = ("Find an assignment that satisfies every clause of the formula, or answer UNSAT if no "
                    "assignment does.")
#: the world's default time limit (s), under which the loader decides each formula once (its warnings)
DEFAULT_TIMEOUT_S = 2.0
_EXPECT = {"sat": "sat", "satisfiable": "sat", "unsat": "unsat", "unsatisfiable": "unsat"}
_CHANGED = ("DIMACS tasks are now answered, not encoded: give a satisfying assignment ('v 1 -2 3 0') or the claim "
            "'UNSAT'")


def parse_dimacs(text: str) -> tuple[int, list[list[int]]]:
    """``(number of variables, clauses)`` of DIMACS CNF text (``c`` comments; a ``p cnf n m`` header;
    clauses end with ``0`` and may span lines; SATLIB's ``%`` trailer ends the formula).

    Raises:
      ValueError: no header, a literal outside ``1..n``, an empty clause, an unterminated last clause
        or a clause count that differs from the header's.
    """
    n = m = None
    clauses: list[list[int]] = []
    cur: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("c"):
            continue
        if line.startswith("%"):
            break
        if line.startswith("p"):
            parts = line.split()
            if n is not None or len(parts) != 4 or parts[1] != "cnf" or not all(p.isdigit() for p in parts[2:]):
                raise ValueError(f"DIMACS line {lineno}: expected one header 'p cnf <variables> <clauses>'")
            n, m = int(parts[2]), int(parts[3])
            continue
        if n is None:
            raise ValueError(f"DIMACS line {lineno}: a clause before the 'p cnf' header")
        for tok in line.split():
            try:
                lit = int(tok)
            except ValueError:
                raise ValueError(f"DIMACS line {lineno}: {tok!r} is not a literal") from None
            if lit == 0:
                if not cur:
                    raise ValueError(f"DIMACS line {lineno}: an empty clause (the formula is unsatisfiable)")
                clauses.append(cur)
                cur = []
            elif abs(lit) > n:
                raise ValueError(f"DIMACS line {lineno}: literal {lit} names no variable of 1..{n}")
            else:
                cur.append(lit)
    if n is None:
        raise ValueError("no 'p cnf <variables> <clauses>' header")
    if cur:
        raise ValueError("the last clause does not end with 0")
    if n == 0 or not clauses:
        raise ValueError("the formula has no variables or no clauses")
    if len(clauses) != m:
        raise ValueError(f"the header announces {m} clauses, the formula has {len(clauses)}")
    return n, clauses


def cnf_instance(env_id: str, n: int, clauses: Sequence[Sequence[int]], description: str = "") -> SATInstance:
    """A DIMACS formula as an instance of the SAT world (problem ``cnf``: the set ``VARS = {v1, …, vn}``,
    the variable ``x[VARS]``; the clauses in ``data``)."""
    return SATInstance(env_id, "cnf", {CNF_SET: tuple(f"v{i}" for i in range(1, n + 1))}, {CNF_VAR: (CNF_SET,)},
                       description=description or f"a CNF formula over {n} variables with {len(clauses)} clauses",
                       data={"var": CNF_VAR, "clauses": [list(c) for c in clauses],
                             "var_doc": f"{CNF_VAR}[vi] is variable i of the formula"})


def _n_vars(inst: SATInstance) -> int:
    return len(inst.sets[CNF_SET])


def _requirements(inst: SATInstance, rules: Sequence[Mapping[str, Any]]) -> tuple[Requirement, ...]:
    return cnf_requirements(_n_vars(inst), inst.data["clauses"], rules)


def cnf_checks(inst: SATInstance, rules: Sequence[Mapping[str, Any]]) -> tuple[Check, ...]:
    """The requirements of a CNF task (``clauses``, ``assign``, ``count``;
    :func:`~cfjax.domains.sat.cnf.cnf_requirements`) as checks of the SAT world's verifier."""
    v = inst.data["var"]
    return tuple(Check(r.desc, (((tuple((v, (f"v{abs(x)}",), x > 0) for x in r.lits)), r.op, r.k),))
                 for r in _requirements(inst, rules))


def _checks(inst: SATInstance | SMTInstance, rules: Sequence[Mapping[str, Any]]) -> tuple:
    if isinstance(inst, SMTInstance):
        return schedule_checks(inst, rules)
    return cnf_checks(inst, rules) if inst.problem == "cnf" else sat_checks(inst, rules)


class CNFSATWorld(SATWorld):
    """The SAT world with DIMACS answer tasks (instances of problem ``cnf``): an action is an answer,
    graded by :func:`~cfjax.domains.sat.cnf.check_answer` (assignments checked clause by clause, an
    UNSAT claim by the solver, whose verdict is cached per task); other problems as before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reqs: dict[str, tuple[Requirement, ...]] = {}
        self._decided: dict[str, str] = {}

    def requirements(self, task: Task) -> tuple[Requirement, ...]:
        r = self._reqs.get(task.task_id)
        if r is None:
            if task.task_id not in self.rules:
                raise ValueError(f"no verifier rules for task {task.task_id!r}")
            r = self._reqs[task.task_id] = _requirements(self._instance(task.env_id), self.rules[task.task_id])
        return r

    def formula_status(self, task: Task) -> str:
        """The solver's verdict on the task's requirements (``"sat"``, ``"unsat"``, ``"timeout"``), once per task."""
        st = self._decided.get(task.task_id)
        if st is None:
            st = self._decided[task.task_id] = decide(_n_vars(self._instance(task.env_id)), self.requirements(task),
                                                      self.timeout_s, self.solver)
        return st

    def problem_status(self, task: Task) -> str:
        if self._instance(task.env_id).problem != "cnf":
            return super().problem_status(task)
        st = self.formula_status(task)
        return st if st in ("sat", "unsat") else "unknown"

    def checks(self, task: Task) -> tuple[Check, ...]:
        inst = self._instance(task.env_id)
        if inst.problem != "cnf":
            return super().checks(task)
        c = self._checks.get(task.task_id)
        if c is None:
            if task.task_id not in self.rules:
                raise ValueError(f"no verifier rules for task {task.task_id!r}")
            c = self._checks[task.task_id] = cnf_checks(inst, self.rules[task.task_id])
        return c

    def evaluate(self, task: Task, action: str) -> Outcome:
        inst = self._instance(task.env_id)
        if inst.problem != "cnf":
            return super().evaluate(task, action)
        return check_answer(_n_vars(inst), self.requirements(task), action, status=lambda: self.formula_status(task),
                            timeout_s=self.timeout_s, partial_credit=self.partial_credit,
                            rich=self.feedback == "rich")


def _world(instances: Mapping[str, Any], rules: Mapping[str, Sequence[Mapping[str, Any]]], **kwargs: Any) -> object:
    """A :class:`~cfjax.domains.sat.sat_world.SatSmtWorld` whose SAT half knows CNF instances."""
    from cfjax.domains.sat.sat_world import SatSmtWorld

    world = SatSmtWorld(instances, rules, **kwargs)
    sat_kw = {k: v for k, v in kwargs.items() if k not in ("timeout_s", "partial_credit", "feedback")}
    world.sat = CNFSATWorld(world.sat.instances, rules, timeout_s=world.sat.timeout_s,
                            partial_credit=world.sat.partial_credit, feedback=world.sat.feedback, **sat_kw)
    return world


def cnf_context(inst: SATInstance, reqs: Sequence[Requirement], start: str = "") -> str:
    """What the agent sees of a DIMACS task: the formula, the requirements beyond its clauses, the
    answer format and the answer to repair (if any)."""
    n, clauses = _n_vars(inst), inst.data["clauses"]
    lines = [f"# environment {inst.env_id} (cnf): {inst.description}",
             "# The formula (DIMACS CNF; literal i: variable i is true, -i: it is false; each clause ends with 0):",
             dimacs_text(n, clauses)]
    extra = requirements_text(reqs)
    if extra:
        lines.append(f"# Also required: {extra}.")
    if not any(r.clause for r in reqs):
        lines.append("# The clauses themselves are not required; only the requirements above are.")
    lines.append(ANSWER_FORMAT)
    if start:
        lines.append("# An answer to repair:\n" + start)
    return "\n".join(lines) + "\n"


class UserSat(UserDomain):
    """Encoding tasks over SAT/SMT instances and DIMACS answer tasks (module docstring)."""

    name = "sat"

    def __init__(self) -> None:
        self.instances: dict[str, SATInstance | SMTInstance] = {}
        self.rules: dict[str, tuple[dict, ...]] = {}
        self.starts: dict[str, str] = {}
        #: the loader's warnings, one line each (also printed to stderr when the file is first loaded)
        self.warnings: list[str] = []

    def _warn(self, path: Path, line: int, field: str, message: str) -> None:
        text = f"{path}:{line}: field {field!r}: {message}"
        self.warnings.append(text)
        print(f"cfjax: warning: {text}", file=sys.stderr)

    @staticmethod
    def _rules(r: RowReader, default: list | None = None) -> list:
        rules = default if default is not None and not r.has("rules") else \
            r.get("rules", list, what="the verifier's rules")
        if not rules or not all(isinstance(x, dict) and isinstance(x.get("rule"), str) for x in rules):
            raise r.error("rules", 'must be a non-empty list of objects with a "rule" name')
        return rules

    @staticmethod
    def _start(r: RowReader) -> tuple[str | None, str]:
        if r.has("start_path"):
            return "start_path", r.read_text("start_path", kind="encoding file")[1]
        return ("start" if r.has("start") else None), (r.text("start", required=False) or "")

    @staticmethod
    def _gold(r: RowReader) -> tuple[str | None, str]:
        gold_field = r.first(("gold", "encoding", "gold_path"))
        if gold_field == "gold_path":
            return gold_field, r.read_text("gold_path", kind="encoding file")[1]
        return gold_field, (r.text(gold_field) if gold_field else "")

    def parse(self, r: RowReader) -> Parsed:
        if r.has("dimacs") or r.has("dimacs_path"):
            return self._parse_dimacs(r)
        question = r.text("question")
        if r.has("instance"):
            where, doc = "instance", r.get("instance", dict)
        elif r.has("instance_path"):
            where = "instance_path"
            p, text = r.read_text("instance_path", kind="instance file")
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as e:
                raise r.error(where, f"{p.name} is not JSON ({e.msg})") from None
            if isinstance(doc, dict) and isinstance(doc.get("instance"), dict):
                doc = doc["instance"]  # a built-in suite's environment file
            if not isinstance(doc, dict):
                raise r.error(where, f"{p.name} must hold an instance object")
        else:
            raise r.error("instance", "missing (an instance object, instance_path, dimacs or dimacs_path)")
        try:
            inst = SMTInstance.from_json(doc) if doc.get("solver") == "smt" else SATInstance.from_json(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise r.error(where, f"not an instance of the SAT/SMT world ({type(e).__name__}: {e})") from None
        if isinstance(inst, SATInstance) and inst.problem == "cnf":
            raise r.error(where, "an instance of problem 'cnf' is a DIMACS formula: give it as 'dimacs' or "
                                 "'dimacs_path' (the task is to answer it)")
        rules = self._rules(r)
        try:
            checks = _checks(inst, rules)
        except (KeyError, TypeError, ValueError) as e:
            raise r.error("rules", f"the verifier cannot use them ({type(e).__name__}: {e})") from None
        if not checks:
            raise r.error("rules", "they state no checkable requirement on this instance")
        _, start = self._start(r)
        gold_field, gold = self._gold(r)
        solver = "smt" if isinstance(inst, SMTInstance) else "sat"
        attrs = observe_attrs(question, env=inst.env_id, problem=inst.problem, solver=solver)
        context = context_text(inst)
        if start:
            context += "\n# An encoding to repair:\n" + start.strip() + "\n"
        return Parsed(question, inst.env_id, context, attrs, gold=gold, task_domain=solver,
                      payload=(inst, tuple(rules), start or "", where, gold_field, None))

    def _answer(self, r: RowReader, field: str | None, text: str, n: int, what: str) -> str:
        """``text`` (a line's start or gold) as a canonical answer, or the one-line refusal."""
        try:
            return print_answer(parse_answer(text, n))
        except AnswerError as e:
            raise r.error(field, f"{_CHANGED}; this {what} is not an answer ({e})") from None

    def _parse_dimacs(self, r: RowReader) -> Parsed:
        if r.has("instance") or r.has("instance_path"):
            raise r.error("dimacs" if r.has("dimacs") else "dimacs_path",
                          "give either a formula or an instance, not both")
        if r.has("dimacs"):
            where, text, env = "dimacs", r.text("dimacs"), None
        else:
            where = "dimacs_path"
            p, text = r.read_text("dimacs_path", kind="DIMACS file")
            env = p.stem
        try:
            n, clauses = parse_dimacs(text)
        except ValueError as e:
            raise r.error(where, str(e)) from None
        env = env or "cnf_" + hashlib.sha256(repr(clauses).encode()).hexdigest()[:8]
        inst = cnf_instance(env, n, clauses)
        question = r.text("question") if r.has("question") else DEFAULT_QUESTION
        rules = self._rules(r, default=[{"rule": "clauses"}])
        try:
            reqs = _requirements(inst, rules)
        except (KeyError, TypeError, ValueError) as e:
            raise r.error("rules", f"the verifier cannot use them ({type(e).__name__}: {e})") from None
        if not reqs:
            raise r.error("rules", "they state no checkable requirement on this formula")
        expect = None
        if r.has("expect"):
            raw = r.text("expect")
            expect = _EXPECT.get(raw.strip().lower())
            if expect is None:
                raise r.error("expect", f"must be 'sat' or 'unsat', got {raw!r}")
        start_field, start = self._start(r)
        if start:
            start = self._answer(r, start_field, start, n, "start")
        gold_field, gold = self._gold(r)
        if gold:
            gold = self._answer(r, gold_field, gold, n, "gold")
            verdict = parse_answer(gold, n).verdict
            if expect is not None and verdict != expect:
                raise r.error("expect", f"is {expect!r}, but the gold answer claims {verdict.upper()}")
        attrs = observe_attrs(question, env=env, problem="cnf", solver="sat")
        return Parsed(question, env, cnf_context(inst, reqs, start), attrs, gold=gold, task_domain="sat",
                      extra={"expect": expect} if expect else {},
                      payload=(inst, tuple(rules), start, where, gold_field, expect))

    def finish(self, rows: Sequence[UserRow], path: Path, *, check: bool) -> None:
        first: dict[str, tuple[dict, int]] = {}
        for row in rows:
            inst, rules, start, where, _, _ = row.payload
            env = row.task.env_id
            doc = inst.to_json()
            if env in first and first[env][0] != doc:
                raise JSONLError(path, row.line, where, f"environment {env!r} is a different instance on line "
                                 f"{first[env][1]}: one instance per environment")
            first.setdefault(env, (doc, row.line))
            self.instances.setdefault(env, inst)
            self.rules[row.task.task_id] = rules
            self.starts[row.task.task_id] = start
        if check:
            world = _world(self.instances, self.rules, timeout_s=DEFAULT_TIMEOUT_S)
            for row in rows:
                if row.has_gold:
                    out = world.evaluate(row.task, row.key.gold)
                    if not out.solved:
                        raise JSONLError(path, row.line, row.payload[4],
                                         f"the gold {'answer' if _is_cnf(row) else 'encoding'} "
                                         f"does not solve the task: {out.feedback[:200]}")
            self._solvability(rows, path, world.sat)

    def _solvability(self, rows: Sequence[UserRow], path: Path, world: CNFSATWorld) -> None:
        """One warning line per DIMACS row whose formula cannot be solved as stated (module docstring)."""
        for row in rows:
            if not _is_cnf(row):
                continue
            inst, rules, _, where, _, expect = row.payload
            st = world.formula_status(row.task)
            with_reqs = " with the stated requirements" if any(x.get("rule") != "clauses" for x in rules) else ""
            if st == "timeout":
                self._warn(path, row.line, where, f"the solver does not decide the formula{with_reqs} within "
                           f"{world.timeout_s:g} s, so an UNSAT claim cannot be checked: if no assignment "
                           "satisfies it, no answer solves the task")
            elif expect == "sat" and st == "unsat":
                self._warn(path, row.line, "expect", f"is 'sat', but the solver proves the formula{with_reqs} "
                           "unsatisfiable: no assignment can solve the task (its answer is UNSAT)")
            elif expect == "unsat" and st == "sat":
                self._warn(path, row.line, "expect", f"is 'unsat', but the solver finds an assignment that "
                           f"satisfies the formula{with_reqs}: an UNSAT claim fails (an assignment solves it)")
            if "encod" in row.task.question.lower():
                self._warn(path, row.line, "question", "asks for an encoding, but a DIMACS task is answered: "
                           "the agent gives a satisfying assignment ('v 1 -2 3 0') or the claim 'UNSAT'")

    def world(self, root: Path, keys: Mapping[str, AnswerKey], **kwargs) -> object:
        return _world(self.instances, self.rules, **kwargs)

    def envs(self) -> Mapping[str, object]:
        return dict(self.instances)

    @property
    def edits(self):
        from cfjax.domains.sat.edits import SatSmtEdits

        return SatSmtEdits()

    def scripted_domain(self, tasks: Sequence[Task]):
        return UserSatScript(self.instances, {t.task_id: self.starts[t.task_id] for t in tasks})


def _is_cnf(row: UserRow) -> bool:
    inst = row.payload[0]
    return isinstance(inst, SATInstance) and inst.problem == "cnf"


DOMAIN = UserSat

"""User SAT/SMT encoding tasks for ``--suite jsonl:PATH`` (:mod:`cfjax.domains.jsonl`).

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
``dimacs_path`` (a ``.cnf`` file, SATLIB's ``%`` trailer allowed). It becomes an instance of problem
``cnf``: the set ``VARS = {v1, …, vn}`` and the variable ``x[VARS]`` (``x[vi]`` is variable ``i``),
and the formula is shown to the agent. Its checker settings (``rules``, default
``[{"rule": "clauses"}]``): ``clauses`` (every clause of the formula holds), ``assign`` (``var``,
``value``: variable ``var`` is true / false) and ``count`` (``op``, ``k``: the number of true
variables compares so). The task is to encode the formula and the stated requirements; the verifier
(:class:`CNFSATWorld`, the SAT world with these rules) checks the encoding's extreme solutions, as
for every SAT task. Raw SMT-LIB problems are not instances of the SMT world (a project schedule);
SMT-LIB text is what its actions are (``start_path`` / ``gold_path``).

The environment is the instance (its ``env_id``; a formula's is its file's stem, or ``cnf_<hash>``
inline); lines that share an environment must give the same instance.

:class:`UserSatScript` (:mod:`cfjax.domains.sat.user_draft`, agent side, re-exported here) is the
scripted backbone's gold-free drafter: each attempt is the line's
``start`` encoding with one rule edit of :class:`~cfjax.domains.sat.edits.SatSmtEdits`, drawn uniformly
from the attempt's seeded stream. Without ``start`` it transcribes a DIMACS formula the context shows
(one clause per line, then rule edits on later attempts) and otherwise answers an empty encoding
(the simulator writes no encoding from words — a real backbone does). It knows no true fix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cfjax.domains.jsonl import JSONLError, Parsed, RowReader, UserDomain, UserRow
from cfjax.domains.sat.instances import context_text
from cfjax.domains.sat.sat_world import _OP_WORDS, Check, SATInstance, SATWorld, sat_checks
from cfjax.domains.sat.smt_world import SMTInstance, schedule_checks
from cfjax.domains.sat.tasks import observe_attrs
from cfjax.domains.sat.user_draft import UserSatScript
from cfjax.types import AnswerKey, Task

__all__ = ["UserSat", "UserSatScript", "CNFSATWorld", "parse_dimacs", "cnf_instance", "cnf_checks", "DOMAIN"]


#: the SAT world's variable of a CNF instance and its index set
CNF_VAR, CNF_SET = "x", "VARS"


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


def _lit_text(lit: int) -> str:
    return ("~" if lit < 0 else "") + f"{CNF_VAR}[v{abs(lit)}]"


def cnf_instance(env_id: str, n: int, clauses: Sequence[Sequence[int]], description: str = "") -> SATInstance:
    """A DIMACS formula as an instance of the SAT world (problem ``cnf``; module docstring)."""
    return SATInstance(env_id, "cnf", {CNF_SET: tuple(f"v{i}" for i in range(1, n + 1))}, {CNF_VAR: (CNF_SET,)},
                       description=description or f"a CNF formula over {n} variables with {len(clauses)} clauses",
                       data={"var": CNF_VAR, "clauses": [list(c) for c in clauses],
                             "var_doc": f"{CNF_VAR}[vi] is variable i of the formula"})


def cnf_checks(inst: SATInstance, rules: Sequence[Mapping[str, Any]]) -> tuple[Check, ...]:
    """The verifier of a CNF task: ``clauses``, ``assign`` (var, value), ``count`` (op, k); module docstring."""
    v, n = inst.data["var"], len(inst.sets[CNF_SET])
    out: list[Check] = []
    for r in rules:
        kind = r["rule"]
        if kind == "clauses":
            for j, clause in enumerate(inst.data["clauses"], 1):
                lits = tuple((v, (f"v{abs(x)}",), x > 0) for x in clause)
                out.append(Check(f"clause {j} ({' | '.join(_lit_text(x) for x in clause)}) holds", ((lits, ">=", 1),)))
        elif kind == "assign":
            i, value = int(r["var"]), bool(r.get("value", True))
            if not 1 <= i <= n:
                raise ValueError(f"assign: variable {i} is not one of 1..{n}")
            out.append(Check(f"variable {i} is {'true' if value else 'false'}", ((((v, (f"v{i}",), value),), "==", 1),)))
        elif kind == "count":
            op, k = r["op"], int(r["k"])
            if op not in _OP_WORDS:
                raise ValueError(f"count: op must be one of {', '.join(_OP_WORDS)}, got {op!r}")
            lits = tuple((v, (f"v{i}",), True) for i in range(1, n + 1))
            out.append(Check(f"{_OP_WORDS[op]} {k} variable(s) are true", ((lits, op, k),)))
        else:
            raise ValueError(f"unknown CNF rule {kind!r} (clauses, assign, count)")
    return tuple(out)


def _checks(inst: SATInstance | SMTInstance, rules: Sequence[Mapping[str, Any]]) -> tuple:
    if isinstance(inst, SMTInstance):
        return schedule_checks(inst, rules)
    return cnf_checks(inst, rules) if inst.problem == "cnf" else sat_checks(inst, rules)


class CNFSATWorld(SATWorld):
    """The SAT world with the verifier of CNF instances (:func:`cnf_checks`); other problems as before."""

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


def _world(instances: Mapping[str, Any], rules: Mapping[str, Sequence[Mapping[str, Any]]], **kwargs: Any) -> object:
    """A :class:`~cfjax.domains.sat.sat_world.SatSmtWorld` whose SAT half knows CNF instances."""
    from cfjax.domains.sat.sat_world import SatSmtWorld

    world = SatSmtWorld(instances, rules, **kwargs)
    sat_kw = {k: v for k, v in kwargs.items() if k not in ("timeout_s", "partial_credit", "feedback")}
    world.sat = CNFSATWorld(world.sat.instances, rules, timeout_s=world.sat.timeout_s,
                            partial_credit=world.sat.partial_credit, feedback=world.sat.feedback, **sat_kw)
    return world


class UserSat(UserDomain):
    """Encoding tasks over SAT/SMT instances (module docstring)."""

    name = "sat"

    def __init__(self) -> None:
        self.instances: dict[str, SATInstance | SMTInstance] = {}
        self.rules: dict[str, tuple[dict, ...]] = {}
        self.starts: dict[str, str] = {}
        self.formulas: dict[str, str] = {}

    def parse(self, r: RowReader) -> Parsed:
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
        elif r.has("dimacs") or r.has("dimacs_path"):
            where, doc = ("dimacs", None) if r.has("dimacs") else ("dimacs_path", None)
        else:
            raise r.error("instance", "missing (an instance object, instance_path, dimacs or dimacs_path)")
        formula = ""
        if doc is None:  # a DIMACS formula
            if where == "dimacs":
                text, env = r.text("dimacs"), None
            else:
                p, text = r.read_text("dimacs_path", kind="DIMACS file")
                env = p.stem
            try:
                n, clauses = parse_dimacs(text)
            except ValueError as e:
                raise r.error(where, str(e)) from None
            env = env or "cnf_" + hashlib.sha256(repr(clauses).encode()).hexdigest()[:8]
            inst = cnf_instance(env, n, clauses)
            formula = "\n".join(" | ".join(_lit_text(x) for x in c) for c in clauses)
        else:
            try:
                inst = SMTInstance.from_json(doc) if doc.get("solver") == "smt" else SATInstance.from_json(doc)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise r.error(where, f"not an instance of the SAT/SMT world ({type(e).__name__}: {e})") from None
        if formula and not r.has("rules"):
            rules = [{"rule": "clauses"}]
        else:
            rules = r.get("rules", list, what="the verifier's rules")
        if not rules or not all(isinstance(x, dict) and isinstance(x.get("rule"), str) for x in rules):
            raise r.error("rules", 'must be a non-empty list of objects with a "rule" name')
        try:
            checks = _checks(inst, rules)
        except (KeyError, TypeError, ValueError) as e:
            raise r.error("rules", f"the verifier cannot use them ({type(e).__name__}: {e})") from None
        if not checks:
            raise r.error("rules", "they state no checkable requirement on this instance")
        start = r.read_text("start_path", kind="encoding file")[1] if r.has("start_path") else \
            r.text("start", required=False)
        gold_field = r.first(("gold", "encoding", "gold_path"))
        if gold_field == "gold_path":
            gold = r.read_text("gold_path", kind="encoding file")[1]
        else:
            gold = r.text(gold_field) if gold_field else ""
        solver = "smt" if isinstance(inst, SMTInstance) else "sat"
        attrs = observe_attrs(question, env=inst.env_id, problem=inst.problem, solver=solver)
        context = context_text(inst)
        if formula:
            context += "\n# The formula, one clause per line:\n" + formula + "\n"
        if start:
            context += "\n# An encoding to repair:\n" + start.strip() + "\n"
        return Parsed(question, inst.env_id, context, attrs, gold=gold, task_domain=solver,
                      payload=(inst, tuple(rules), start or "", where, gold_field, formula))

    def finish(self, rows: Sequence[UserRow], path: Path, *, check: bool) -> None:
        first: dict[str, tuple[dict, int]] = {}
        for row in rows:
            inst, rules, start, where, _, formula = row.payload
            env = row.task.env_id
            doc = inst.to_json()
            if env in first and first[env][0] != doc:
                raise JSONLError(path, row.line, where, f"environment {env!r} is a different instance on line "
                                 f"{first[env][1]}: one instance per environment")
            first.setdefault(env, (doc, row.line))
            self.instances.setdefault(env, inst)
            self.rules[row.task.task_id] = rules
            self.starts[row.task.task_id] = start
            self.formulas[row.task.task_id] = formula
        if check:
            world = _world(self.instances, self.rules)
            for row in rows:
                if row.has_gold:
                    out = world.evaluate(row.task, row.key.gold)
                    if not out.solved:
                        raise JSONLError(path, row.line, row.payload[4],
                                         f"the gold encoding does not solve the task: {out.feedback[:200]}")

    def world(self, root: Path, keys: Mapping[str, AnswerKey], **kwargs) -> object:
        return _world(self.instances, self.rules, **kwargs)

    def envs(self) -> Mapping[str, object]:
        return dict(self.instances)

    @property
    def edits(self):
        from cfjax.domains.sat.edits import SatSmtEdits

        return SatSmtEdits()

    def scripted_domain(self, tasks: Sequence[Task]):
        return UserSatScript(self.instances, {t.task_id: self.starts[t.task_id] for t in tasks},
                             {t.task_id: self.formulas[t.task_id] for t in tasks})


DOMAIN = UserSat

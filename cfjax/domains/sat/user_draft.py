"""The scripted backbone's gold-free drafter for user SAT/SMT suites (agent side; :mod:`cfjax.domains.sat.user`).

:class:`UserSatScript` holds what the prompts show — the instances (a DIMACS task's formula is in
its context) and the lines' ``start`` encodings or answers — and no answer key (never the line's
``gold`` or ``expect``). It knows no true fix.

* A line with a ``start``: each attempt is the start with one rule edit of
  :class:`~cfjax.domains.sat.edits.SatSmtEdits`, drawn uniformly from the attempt's seeded stream
  (for an answer: flip one literal, or switch the SAT/UNSAT claim).
* A DIMACS formula without a ``start``: each attempt answers it by one *descent*, a cheap heuristic
  of fixed competence drawn from the attempt's seeded stream:

  1. unit propagation from the formula's unit clauses; a conflict there proves the formula
     unsatisfiable, and the draft is ``s UNSATISFIABLE`` (a sound claim);
  2. otherwise variables ``1..n`` in order: each one still without a value takes, with probability
     :data:`P_FOLLOW` (= 0.8), the sign that makes more of the not yet satisfied clauses it occurs
     in true (a tie, or else: true with probability :data:`P_TRUE` = 1/2), then unit propagation;
  3. at the first conflict (a clause whose literals are all false) propagation stops and every
     remaining variable takes its value by the same rule, without propagation; then, with
     probability :data:`P_UNSAT_ON_CONFLICT` (= 1/4), the draft claims UNSAT (keeping its
     assignment lines, which the world does not read under that verdict, so switching the claim
     back restores them); else it answers the assignment.

  There is no backtracking: a descent that meets no conflict answers a satisfying assignment, one
  that meets a conflict answers a wrong assignment or an unproved UNSAT claim (on satisfiable
  random 3-SAT formulas of SATLIB's ``uf20-91`` kind about one descent in five meets no conflict;
  a pigeonhole formula always meets one). Each decision costs one pass over the clauses its
  variable occurs in, so a descent is linear in the formula's size. Probabilities are
  fixed a priori; the competence table of :mod:`cfjax.llm.scripted` (``p_error``, ``p_propose_fix``)
  does not apply.
* Any other line without a ``start``: an empty encoding (the simulator writes no encoding from
  words — a real backbone does).

Its unit names and broad conditions are those of the built-in suite's error model
(:class:`cfjax.domains.sat.script.SatScript`; both read the unit text or the task's observable
attributes only); an answer's units are a "verdict line" and an "assignment literal".

This module is marked agent-side (:data:`cfjax.types.AGENT_SIDE_MARKER`): the answer-key guard never
trusts it, although it lives under ``cfjax.domains``. The loader imports it, never the reverse.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from cfjax.domains.drafting import GoldFreeDrafting
from cfjax.domains.sat.cnf import Answer, is_answer, print_answer
from cfjax.domains.sat.script import SEMANTIC_KEYS, SatScript
from cfjax.llm.scripted import ScriptedConfig, ScriptedDomain
from cfjax.types import Task

#: agent-side code: never trusted by the answer-key guard (module docstring)
__cfjax_agent_side__ = True

__all__ = ["UserSatScript", "descent", "P_FOLLOW", "P_TRUE", "P_UNSAT_ON_CONFLICT"]

#: the probability that a decision follows the majority sign of the open clauses of its variable
P_FOLLOW = 0.8
#: the probability that a decision that does not follow it (or meets a tie) is true
P_TRUE = 0.5
#: the probability that a descent which met a conflict claims UNSAT
P_UNSAT_ON_CONFLICT = 0.25


def descent(n: int, clauses: Sequence[Sequence[int]], rng: random.Random) -> Answer:
    """One descent of the heuristic (module docstring) over variables ``1..n``."""
    occ: dict[int, list[int]] = {}
    for ci, c in enumerate(clauses):
        for x in c:
            occ.setdefault(x, []).append(ci)
    values: dict[int, bool] = {}
    queue: list[int] = []

    def assign(lit: int) -> bool:
        v = values.get(abs(lit))
        if v is not None:
            return v == (lit > 0)
        values[abs(lit)] = lit > 0
        queue.append(lit)
        return True

    def propagate() -> bool:
        while queue:
            lit = queue.pop()
            for ci in occ.get(-lit, ()):
                free, n_free = 0, 0
                for x in clauses[ci]:
                    v = values.get(abs(x))
                    if v is None:
                        free, n_free = x, n_free + 1
                    elif v == (x > 0):
                        break
                else:
                    if n_free == 0:
                        queue.clear()
                        return False
                    if n_free == 1:
                        assign(free)
        return True

    ok = all(assign(c[0]) for c in clauses if len(c) == 1) and propagate()
    if not ok:
        return Answer("unsat", ())
    def open_count(lit: int) -> int:
        return sum(1 for ci in occ.get(lit, ()) if not any(values.get(abs(x)) == (x > 0) for x in clauses[ci]))

    conflict = False
    for v in range(1, n + 1):
        if v in values:
            continue
        pos, neg = open_count(v), open_count(-v)
        if rng.random() < P_FOLLOW and pos != neg:
            lit = v if pos > neg else -v
        else:
            lit = v if rng.random() < P_TRUE else -v
        if conflict:
            values[v] = lit > 0
            continue
        assign(lit)
        if not propagate():
            conflict = True
    lits = tuple(i if values[i] else -i for i in range(1, n + 1))
    if conflict and rng.random() < P_UNSAT_ON_CONFLICT:
        return Answer("unsat", lits)
    return Answer("sat", lits)


class UserSatScript(GoldFreeDrafting, ScriptedDomain):
    """The scripted backbone's gold-free drafter (module docstring): what the prompts show — the
    instances (a DIMACS formula) and the start encodings or answers — and no answer key."""

    name = "sat"
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, instances: Mapping[str, Any], starts: Mapping[str, str]) -> None:
        from cfjax.domains.sat.edits import SatSmtEdits

        self.instances = dict(instances)
        self.starts = dict(starts)
        self.edits = SatSmtEdits()

    def env(self, task: Task) -> Any:
        return self.instances.get(task.env_id)

    def draft(self, task: Task, attempt: int, rng: random.Random, config: ScriptedConfig) -> str:
        base = self.starts.get(task.task_id, "")
        if base.strip():
            return self.one_rule_edit(self.edits.normalize(base), rng, self.env(task))
        inst = self.env(task)
        if getattr(inst, "problem", None) == "cnf":
            return print_answer(descent(len(inst.sets["VARS"]), inst.data["clauses"], rng))
        return ""

    def unit_kind_name(self, unit_text: str) -> str:
        if is_answer(unit_text):
            return "verdict line" if unit_text.strip().lower().startswith(("s ", "sat", "unsat")) \
                else "assignment literal"
        return SatScript.unit_kind_name(self, unit_text)  # type: ignore[arg-type]

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        return SatScript.broad_condition(self, task, rng)  # type: ignore[arg-type]

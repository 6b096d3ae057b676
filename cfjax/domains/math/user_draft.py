"""The scripted backbone's gold-free drafter for math user rows (agent side; :mod:`cfjax.domains.math.user`).

:class:`UserMathScript` holds what a real model's prompt shows — the statement and the proof to
repair, if the row gives one — and no answer key. With a ``start`` proof each draft is that proof with
one seeded rule edit of :class:`cfjax.domains.math.edits.CoqEdits` (like every user domain's drafter,
:class:`cfjax.domains.drafting.GoldFreeDrafting`); without one, the first draft is the documented
generic attempt ``intros.`` followed by one closer chosen from the statement's shape (``nia`` for a
nonlinear goal, ``lia`` for ``nat``/``Z`` arithmetic, ``auto`` otherwise) and each later attempt one
rule edit of it. It knows no true fix. The rule is fixed a priori and never tuned.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from cfjax.domains.drafting import GoldFreeDrafting
from cfjax.domains.math.edits import CoqEdits
from cfjax.domains.math.tasks import SEMANTIC_KEYS, statement_attrs
from cfjax.llm.scripted import ScriptedConfig, ScriptedDomain
from cfjax.types import Task

#: agent-side code: never trusted by the answer-key guard (module docstring)
__cfjax_agent_side__ = True

__all__ = ["UserMathScript", "generic_attempt"]


def generic_attempt(statement: str) -> str:
    """``intros.`` and one closer by the statement's shape (module docstring)."""
    a = statement_attrs(statement)
    closer = "nia." if a["nonlinear"] else ("lia." if a["type"] in ("nat", "Z") else "auto.")
    return "intros.\n" + closer


class UserMathScript(GoldFreeDrafting, ScriptedDomain):
    """The gold-free math drafter (module docstring)."""

    name = "math"
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, statements: Mapping[str, str], starts: Mapping[str, str]) -> None:
        self.statements, self.starts = dict(statements), dict(starts)
        self.edits = CoqEdits()

    def env(self, task: Task) -> Any:
        return None

    def draft(self, task: Task, attempt: int, rng: random.Random, config: ScriptedConfig) -> str:
        base = self.starts.get(task.task_id, "")
        if base.strip():
            return self.one_rule_edit(self.edits.normalize(base), rng)
        first = generic_attempt(self.statements.get(task.task_id, ""))
        return first if attempt == 0 else self.one_rule_edit(first, rng)

    def unit_kind_name(self, unit_text: str) -> str:
        return "tactic"

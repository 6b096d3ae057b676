"""The scripted backbone's gold-free repairer for user Python suites (agent side; :mod:`cfjax.domains.python.user`).

:class:`UserPyScript` holds the buggy programs the prompts show and no answer key (never the line's
``fix``). Every attempt rewrites the program with one rule edit of
:func:`cfjax.domains.python.edits.rule_edits`, drawn uniformly from the attempt's seeded stream; it knows
no true fix. Its unit names and broad conditions are those of the built-in suite's error model
(:class:`cfjax.domains.python.script.PyScript`; both read the unit text or the task's observable
attributes only).

This module is marked agent-side (:data:`cfjax.types.AGENT_SIDE_MARKER`): the answer-key guard never
trusts it, although it lives under ``cfjax.domains``. The loader imports it, never the reverse.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from cfjax.domains.drafting import GoldFreeDrafting
from cfjax.domains.python.script import SEMANTIC_KEY_ORDER, PyScript
from cfjax.llm.scripted import ScriptedConfig, ScriptedDomain
from cfjax.types import Task

#: agent-side code: never trusted by the answer-key guard (module docstring)
__cfjax_agent_side__ = True

__all__ = ["UserPyScript"]


class UserPyScript(GoldFreeDrafting, ScriptedDomain):
    """The scripted backbone's gold-free repairer (module docstring). It holds the buggy programs only."""

    name = "python"
    semantic_keys = SEMANTIC_KEY_ORDER

    def __init__(self, programs: Mapping[str, str]) -> None:
        from cfjax.domains.python.edits import PythonEdits

        self.programs = dict(programs)
        self.edits = PythonEdits()

    def draft(self, task: Task, attempt: int, rng: random.Random, config: ScriptedConfig) -> str:
        try:
            base = self.programs[task.task_id]
        except KeyError:
            raise KeyError(f"the python drafter has no program for task {task.task_id!r}") from None
        return self.one_rule_edit(self.edits.normalize(base), rng)

    def unit_kind_name(self, unit_text: str) -> str:
        return PyScript.unit_kind_name(self, unit_text)  # type: ignore[arg-type]

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        return PyScript.broad_condition(self, task, rng)  # type: ignore[arg-type]

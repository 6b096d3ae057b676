"""The scripted backbone's gold-free drafter for user SAT/SMT suites (agent side; :mod:`cfjax.domains.sat.user`).

:class:`UserSatScript` holds what the prompts show — the instances, the lines' ``start`` encodings and
the DIMACS formulas the contexts show (transcribed) — and no answer key (never the line's ``gold``).
Each attempt is the start encoding with one rule edit of :class:`~cfjax.domains.sat.edits.SatSmtEdits`,
drawn uniformly from the attempt's seeded stream; without a start it transcribes the formula (one
clause per line, then rule edits on later attempts), else answers an empty encoding. It knows no true
fix. Its unit names and broad conditions are those of the built-in suite's error model
(:class:`cfjax.domains.sat.script.SatScript`; both read the unit text or the task's observable
attributes only).

This module is marked agent-side (:data:`cfjax.types.AGENT_SIDE_MARKER`): the answer-key guard never
trusts it, although it lives under ``cfjax.domains``. The loader imports it, never the reverse.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from cfjax.domains.drafting import GoldFreeDrafting
from cfjax.domains.sat.script import SEMANTIC_KEYS, SatScript
from cfjax.llm.scripted import ScriptedConfig, ScriptedDomain
from cfjax.types import Task

#: agent-side code: never trusted by the answer-key guard (module docstring)
__cfjax_agent_side__ = True

__all__ = ["UserSatScript"]


class UserSatScript(GoldFreeDrafting, ScriptedDomain):
    """The scripted backbone's gold-free drafter (module docstring): what the prompts show — the
    instances, the start encodings and the DIMACS formulas (transcribed) — and no answer key."""

    name = "sat"
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, instances: Mapping[str, Any], starts: Mapping[str, str],
                 formulas: Mapping[str, str] | None = None) -> None:
        from cfjax.domains.sat.edits import SatSmtEdits

        self.instances = dict(instances)
        self.starts = dict(starts)
        self.formulas = dict(formulas or {})
        self.edits = SatSmtEdits()

    def env(self, task: Task) -> Any:
        return self.instances.get(task.env_id)

    def draft(self, task: Task, attempt: int, rng: random.Random, config: ScriptedConfig) -> str:
        base = self.starts.get(task.task_id, "")
        transcribed = not base.strip()
        if transcribed:
            base = self.formulas.get(task.task_id, "")
        if not base.strip():
            return ""
        base = self.edits.normalize(base)
        if transcribed and attempt == 0:
            return base
        return self.one_rule_edit(base, rng, self.env(task))

    def unit_kind_name(self, unit_text: str) -> str:
        return SatScript.unit_kind_name(self, unit_text)  # type: ignore[arg-type]

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        return SatScript.broad_condition(self, task, rng)  # type: ignore[arg-type]

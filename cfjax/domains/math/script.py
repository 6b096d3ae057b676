"""The scripted backbone's error model for the math suite (a seeded simulator, not an LLM).

:class:`MathScript` plugs into :class:`~cfjax.llm.scripted.ScriptedBackbone` like every domain's
error model. A draft is the theorem's gold proof with, at the documented rate (``p_error`` on base and
new-surface tasks, ``p_error_look_alike`` on look-alikes, times ``retry_factor`` per earlier attempt —
:mod:`cfjax.llm.scripted`'s table, the same for every domain and fixed before any result), the
theorem's **characteristic slip**: one documented one-sentence mistake of its family
(:mod:`cfjax.domains.math.theorems`), chosen when the theorem was written and checked to fail:

==================  =============================================================================
family              the slip (every one makes Coq reject the proof)
==================  =============================================================================
``missing_intros``  the ``intros`` sentence left out
``induction_var``   induction on another variable
``rewrite_dir``     the rewrite in the other direction
``wrong_lemma``     a plausible wrong or nonexistent lemma name
``lia_nia``         ``lia`` where the goal is nonlinear (``nia``/``ring`` needed)
``forgotten_case``  the case analysis left out (its bullets then fail)
==================  =============================================================================

On look-alike tasks the slip is the opposite choice (e.g. a rewrite in the direction the base task
needs), so a correction learned on the base task is wrong there. The slip is read from the answer
key (world side); the driver never sees it. Which fixes a model "knows" after a successful
``p_propose_fix`` draw (:meth:`true_fixes`) is the one-sentence difference to the gold — a
replacement, an inserted sentence (``intros``, ``destruct``) or a deleted one.

What a real model must do that the simulator only draws: find the tactic that closes a goal from
Coq's message and goal state, recall the right lemma name and direction, and choose the induction
variable and the case split — here a draw at the fixed rates above.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from cfjax.domains.base import KeyedErrorModel
from cfjax.domains.math.edits import CoqEdits
from cfjax.domains.math.tasks import SEMANTIC_KEYS
from cfjax.llm.scripted import ScriptedConfig
from cfjax.types import AnswerKey, EditError, Task

__all__ = ["MathScript"]


class MathScript(KeyedErrorModel):
    """The math error model (module docstring)."""

    name = "math"
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, envs: Mapping[str, Any], keys: Mapping[str, AnswerKey]) -> None:
        super().__init__(keys)
        self.envs = dict(envs or {})
        self.edits = CoqEdits()

    def env(self, task: Task) -> Any:
        return self.envs.get(task.env_id)

    def slip(self, name: str, action: str, task: Task, rng: random.Random) -> str | None:
        """The theorem's own slip (``name == "own"``) applied to ``action`` when ``action`` is still the
        gold's shape; ``None`` otherwise."""
        if name != "own":
            return None
        index, text = self._key(task).extra["slip"]
        try:
            return self.edits.replace_unit(action, index, text or "")
        except EditError:
            return None

    def draft(self, task: Task, attempt: int, rng: random.Random, config: ScriptedConfig) -> str:
        key = self._key(task)
        action = self.edits.normalize(key.gold)
        p = config.p_error_look_alike if key.variant == "look_alike" else config.p_error
        if rng.random() < p * config.retry_factor**attempt:
            action = self.slip("own", action, task, rng) or action
        return action

    def true_fixes(self, task: Task, action: str) -> dict[int, str]:
        gold = self.edits.normalize(self._key(task).gold)
        self.edits.units(action)  # raises EditError when the action does not parse
        d = self.edits.diff_units(action, gold)
        if d is not None:
            return {d[0]: d[2].text}
        return super().true_fixes(task, action)

    def unit_kind_name(self, unit_text: str) -> str:
        return "tactic"

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        u = rng.random()
        if u < 0.35 and "type" in task.attrs:
            return f'type = "{task.attrs["type"]}"'
        if u < 0.6 and "env" in task.attrs:
            return f'env = "{task.attrs["env"]}"'
        return "none"

"""What the gold-free scripted drafters of user suites share (agent side).

The drafters (``UserSQLScript``, ``UserPyScript``, ``UserSatScript``, each in its domain's
``user_draft`` module) are the scripted backbone's simulator of a user suite: they hold what a real
model's prompt shows and no answer key. This module and theirs are marked agent-side
(:data:`cfjax.types.AGENT_SIDE_MARKER`): the answer-key guard watches them although they live under the
trusted ``cfjax.domains`` prefix, so a read of a key from a drafter fails under
:func:`cfjax.types.answer_key_guard`. :mod:`cfjax.domains.jsonl` re-exports :class:`GoldFreeDrafting`.
"""

from __future__ import annotations

from typing import Any

from cfjax.types import EditError, Task

#: agent-side code: never trusted by the answer-key guard (module docstring)
__cfjax_agent_side__ = True

__all__ = ["GoldFreeDrafting"]


class GoldFreeDrafting:
    """What the scripted drafters of user suites share: they hold no answer key, so a draft is the
    given action with (at most) one seeded rule edit of the domain's edit model, and no fix is
    ever known (the world alone decides). Mixed into each domain's ``User*Script``."""

    edits: Any  # the domain's EditModel

    def one_rule_edit(self, base: str, rng: Any, *context: Any) -> str:
        """``base`` with one rule edit drawn from ``rng`` (``base`` itself when none applies)."""
        edits = self.edits.rule_edits(base, *context)
        if not edits:
            return base
        i, new = edits[rng.randrange(len(edits))]
        try:
            return self.edits.replace_unit(base, i, new)
        except EditError:
            return base

    def true_fixes(self, task: Task, action: str) -> dict[int, str]:
        """None known: without an answer key the drafter cannot tell which edit is right."""
        self.edits.units(action)  # an unparseable action raises EditError, as the interface says
        return {}

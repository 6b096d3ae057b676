"""The scripted backbone's error model for the toylist suite (the competence interface, world side).

==============  ==========================================  ==========================================
family          base / new-surface slip                     look-alike slip
==============  ==========================================  ==========================================
lower_bound     ``filter x >= v`` → ``filter x > v``          ``filter x > v`` → ``filter x >= v``
upper_bound     ``filter x <= v`` → ``filter x < v``          ``filter x < v`` → ``filter x <= v``
order           ``sort desc`` → ``sort asc``                  ``sort asc`` → ``sort desc``
distinct        ``count unique`` → ``count``                  ``count`` → ``count unique``
==============  ==========================================  ==========================================

Each slip changes exactly one step (the first it fits). Distilled conditions: the family's semantic
attribute (``boundary`` with ``bound_side``, ``order_direction``, ``cardinality``), the cue phrase, or a
too-broad ``env = "…"`` / ``none``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from cfjax.domains.base import KeyedErrorModel
from cfjax.types import AnswerKey, EditError, Task

from tests.plugins.toydomain.lang import PipelineError, Step, ToyListEdits, parse, print_pipeline

__all__ = ["ToyListScript", "ERRORS", "SEMANTIC_KEYS", "slip_text"]

ERRORS: dict[str, tuple[str, str, tuple[tuple[str, float], ...]]] = {
    "lower_bound": ("to_strict", "to_inclusive", ()),
    "upper_bound": ("to_strict", "to_inclusive", ()),
    "order": ("flip_order", "flip_order", ()),
    "distinct": ("drop_unique", "add_unique", ()),
}
SEMANTIC_KEYS = ("boundary", "order_direction", "cardinality")

_SLIPS = {
    "to_strict": {">=": ">", "<=": "<"},
    "to_inclusive": {">": ">=", "<": "<="},
    "flip_order": {"asc": "desc", "desc": "asc"},
    "drop_unique": {"count unique": "count"},
    "add_unique": {"count": "count unique"},
}
_KIND = {"to_strict": "filter", "to_inclusive": "filter", "flip_order": "sort", "drop_unique": "agg",
         "add_unique": "agg"}


def slip_text(name: str, action: str) -> str | None:
    """``action`` with the slip ``name`` on the first step it fits, or ``None``."""
    try:
        steps = parse(action)
    except PipelineError:
        return None
    table = _SLIPS[name]
    for i, s in enumerate(steps):
        if s.kind == _KIND[name] and s.op in table:
            steps[i] = Step(s.kind, table[s.op], s.n)
            return print_pipeline(steps)
    return None


class ToyListScript(KeyedErrorModel):
    """The toylist error model (the table of the module docstring)."""

    name = "toylist"
    errors = ERRORS
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, envs: Mapping[str, Any], keys: Mapping[str, AnswerKey]) -> None:
        super().__init__(keys)
        self.envs = dict(envs)
        self.edits = ToyListEdits()

    def env(self, task: Task) -> Any:
        return self.envs.get(task.env_id)

    def slip(self, name: str, action: str, task: Task, rng: random.Random) -> str | None:
        try:
            self.edits.units(action)
        except EditError:
            return None
        return slip_text(name, action)

    def unit_kind_name(self, unit_text: str) -> str:
        try:
            kind = parse(unit_text)[0].kind
        except PipelineError:
            return "step"
        return {"agg": "aggregation"}.get(kind, f"{kind} step")

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        if rng.random() < 0.5 and "env" in task.attrs:
            return f'env = "{task.attrs["env"]}"'
        return "none"

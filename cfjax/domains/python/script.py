"""The scripted backbone's error model for the Python bug-fixing suite.

:class:`PyScript` plugs into :class:`cfjax.llm.scripted.ScriptedBackbone`
(which documents drafts, local alternatives, distillation, revision, the
judge and ExpeL lessons for every domain). It is a *seeded simulator* of an
LLM's systematic errors, not an LLM. A draft is the gold function with the
task family's characteristic slip, each an edit of exactly one decision unit
(one statement or one compound-statement header, :mod:`cfjax.domains.python.edits`):

==================  =============================================  ==============================================
family              base / new-surface slip                        look-alike slip (the opposite one)
==================  =============================================  ==============================================
inclusive_range     ``range(low, high + 1)`` → ``range(low, high)``  ``range(low, high)`` → ``range(low, high + 1)``
                    (``range_exclusive``)                            (``range_inclusive``)
lower_bound         ``>=`` → ``>`` (``weaken``)                      ``>`` → ``>=`` (``strengthen``)
upper_bound         ``<=`` → ``<`` (``weaken``)                      ``<`` → ``<=`` (``strengthen``)
floor_division      ``//`` → ``/`` (``true_div``)                    ``/`` → ``//`` (``floor_div``)
none_check          ``x is None`` → ``not x`` (``falsy_check``)      ``not x`` → ``x is None`` (``none_check``)
sort_order          drops ``reverse=True`` (``drop_reverse``)        adds ``reverse=True`` (``add_reverse``)
case_insensitive    ``a.lower() == b.lower()`` → ``a == b``          ``a == b`` → ``a.lower() == b.lower()``
                    (``case_sensitive``)                             (``case_insensitive``)
last_k              ``xs[-k:]`` → ``xs[:k]`` (``first_k``)           ``xs[:k]`` → ``xs[-k:]`` (``last_k``)
missing_key         ``d.get(k, 0)`` → ``d[k]`` (``subscript``)       ``d[k]`` → ``d.get(k, 0)`` (``get_default``)
==================  =============================================  ==============================================

Every slip is one of the rule operators of :data:`cfjax.domains.python.edits.OPERATORS`
applied at its first applicable node, so the true fix of every slip is among
:meth:`PythonEdits.rule_edits` of the slipped draft.

Distillation's *semantic* condition is the family's lexicon attribute
(``range_end``, ``boundary`` (+ ``bound_side``), ``division``, ``missing``,
``order``, ``case_semantics``, ``slice_end``, ``absent_key``); the *too broad*
one is ``return_type = "<annotation>"`` (true on look-alikes with the same
signature shape) or ``none``.
"""

from __future__ import annotations

import random

from collections.abc import Mapping

from cfjax.domains.base import KeyedErrorModel
from cfjax.types import AnswerKey
from cfjax.types import Task
from cfjax.domains.python.edits import PythonEdits

__all__ = ["PyScript", "ERRORS", "SEMANTIC_KEY_ORDER"]

#: family → (slip on base and new-surface tasks, slip on look-alike tasks, extra slips)
ERRORS: dict[str, tuple[str, str, tuple[tuple[str, float], ...]]] = {
    "inclusive_range": ("range_exclusive", "range_inclusive", ()),
    "lower_bound": ("weaken", "strengthen", ()),
    "upper_bound": ("weaken", "strengthen", ()),
    "floor_division": ("true_div", "floor_div", ()),
    "none_check": ("falsy_check", "none_check", ()),
    "sort_order": ("drop_reverse", "add_reverse", ()),
    "case_insensitive": ("case_sensitive", "case_insensitive", ()),
    "last_k": ("first_k", "last_k", ()),
    "missing_key": ("subscript", "get_default", ()),
}

#: the lexicon attributes a question's semantics live in (first present one → semantic condition)
SEMANTIC_KEY_ORDER = ("range_end", "boundary", "division", "missing", "order", "case_semantics", "slice_end",
                      "absent_key")


class PyScript(KeyedErrorModel):
    """The Python error model (the table of the module docstring)."""

    name = "python"
    errors = ERRORS
    semantic_keys = SEMANTIC_KEY_ORDER

    def __init__(self, keys: Mapping[str, AnswerKey]) -> None:
        super().__init__(keys)
        self.edits = PythonEdits()

    def slip(self, name: str, action: str, task: Task, rng: random.Random) -> str | None:
        return self.edits.apply(action, name)

    def unit_kind_name(self, unit_text: str) -> str:
        t = unit_text.lstrip()
        if t.startswith(("for ", "async for ")):
            return "loop header"
        if t.startswith(("if ", "elif ", "while ")):
            return "condition"
        if t.startswith("return"):
            return "return statement"
        head = t.split("(", 1)[0]
        if "=" in head.replace("==", "").replace("<=", "").replace(">=", "").replace("!=", ""):
            return "assignment"
        return "statement"

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        rt = task.attrs.get("return_type")
        return f'return_type = "{rt}"' if rt and rng.random() < 0.5 else "none"

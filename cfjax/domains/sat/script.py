"""The scripted backbone's error model for the SAT/SMT suite.

:class:`SatScript` plugs into the domain-independent
:class:`~cfjax.llm.scripted.ScriptedBackbone` (whose module docstring
describes drafts, local alternatives, distillation, revision, the judge and
ExpeL lessons). Only the error model is domain specific: every family has
one characteristic *one-unit* slip on base and new-surface tasks and the
opposite slip on look-alike tasks. The slip is applied to the first unit it
fits, which in every generated gold is the family's own requirement.

==============  =========================================  ==============================================
family          base / new-surface slip                    look-alike slip
==============  =========================================  ==============================================
one_colour      ``exactly 1 of`` → ``atleast 1 of``        ``atleast 1 of`` → ``exactly 1 of``
cap             ``atmost k`` → ``lessthan k``              ``lessthan k`` → ``atmost k``
minimum         ``atleast k`` → ``morethan k``             ``morethan k`` → ``atleast k``
direction       ``w[t,s] => w[m,s]`` → ``w[m,s] => w[t,s]`` the same swap of the implication
daily           ``exactly 1`` → ``atmost 1``               ``atmost 1`` → ``exactly 1``
precedence      ``(>= s_b e_a)`` → ``(> s_b e_a)``;        ``(> s_b e_a)`` → ``(>= s_b e_a)``
                extra (weight 0.3): the two jobs swapped
                ``(>= s_a e_b)``
deadline        ``(<= e_j d)`` → ``(< e_j d)``             ``(< e_j d)`` → ``(<= e_j d)``
release         ``(>= s_j r)`` → ``(> s_j r)``             ``(> s_j r)`` → ``(>= s_j r)``
overlap         disjoint intervals                          ``(distinct s_a s_b)`` → disjoint intervals
                ``(or (<= e_a s_b) (<= e_b s_a))`` →
                ``(distinct s_a s_b)`` (starts differ only)
==============  =========================================  ==============================================

A base slip that makes a constraint *stronger* leaves the encoding
unsatisfiable on the task's tight instance (score 0); one that makes it
*weaker* admits a solution that fails some of the verifier's checks
(partial credit).

Distilled conditions: the semantic attribute of the family
(``cardinality``, ``boundary`` with ``bound_side``, ``direction``,
``precedence``, ``deadline``, ``release``, ``resource``), the cue phrase,
or a too-broad ``problem = "…"`` / ``solver = "…"`` / ``none``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from cfjax.domains.base import KeyedErrorModel
from cfjax.types import AnswerKey
from cfjax.types import Task
from cfjax.types import EditError
from cfjax.domains.sat.sat_lang import Card, Formula, Line, parse_line, print_line
from cfjax.domains.sat.edits import SatSmtEdits, is_smt
from cfjax.domains.sat.smt_world import SExpr, print_sexpr, read_sexprs

__all__ = ["SatScript", "ERRORS", "SEMANTIC_KEYS"]

ERRORS: dict[str, tuple[str, str, tuple[tuple[str, float], ...]]] = {
    "one_colour": ("to_atleast", "to_exactly", ()),
    "cap": ("to_strict", "to_inclusive", ()),
    "minimum": ("to_strict", "to_inclusive", ()),
    "direction": ("swap_direction", "swap_direction", ()),
    "daily": ("to_atmost", "to_exactly", ()),
    "precedence": ("to_strict", "to_inclusive", (("swap_pair", 0.3),)),
    "deadline": ("to_strict", "to_inclusive", ()),
    "release": ("to_strict", "to_inclusive", ()),
    "overlap": ("disjoint_to_distinct", "distinct_to_disjoint", ()),
}

SEMANTIC_KEYS = ("cardinality", "boundary", "direction", "precedence", "deadline", "release", "resource")

_CARD_SLIPS = {
    "to_atleast": {"exactly": "atleast"},
    "to_exactly": {"atleast": "exactly", "atmost": "exactly"},
    "to_atmost": {"exactly": "atmost"},
    "to_strict": {"atmost": "lessthan", "atleast": "morethan"},
    "to_inclusive": {"lessthan": "atmost", "morethan": "atleast"},
}
_SMT_CMP = {"to_strict": {"<=": "<", ">=": ">"}, "to_inclusive": {"<": "<=", ">": ">="}}


def _sat_slip(name: str, text: str) -> str | None:
    line = parse_line(text)
    s = line.stmt
    if isinstance(s, Card) and name in _CARD_SLIPS and s.op in _CARD_SLIPS[name]:
        return print_line(Line(line.each, Card(_CARD_SLIPS[name][s.op], s.k, s.lits, s.comp)))
    if isinstance(s, Formula) and name == "swap_direction" and s.right is not None:
        return print_line(Line(line.each, Formula(s.right, s.rconn, s.left, s.lconn)))
    return None


def _map_cmp(t: SExpr, table: dict[str, str]) -> tuple[SExpr, bool]:
    if isinstance(t, str):
        return t, False
    changed = False
    head: SExpr = t[0] if t else ""
    if t and isinstance(head, str) and head in table and len(t) == 3:
        head, changed = table[head], True
    kids = []
    for x in t[1:]:
        y, c = _map_cmp(x, table)
        kids.append(y)
        changed = changed or c
    return (head,) + tuple(kids) if t else t, changed


def _swap_pair(t: SExpr) -> SExpr | None:
    if isinstance(t, tuple) and len(t) == 3 and t[0] in ("<=", "<", ">=", ">") \
            and all(isinstance(x, str) and "_" in x for x in t[1:]):
        (pa, ja), (pb, jb) = (x.split("_", 1) for x in t[1:])  # type: ignore[union-attr]
        if ja != jb:
            return (t[0], f"{pa}_{jb}", f"{pb}_{ja}")
    return None


def _smt_slip(name: str, text: str) -> str | None:
    cmd = read_sexprs(text)[0]
    if not (isinstance(cmd, tuple) and cmd and cmd[0] == "assert"):
        return None
    body = cmd[1]
    if name in _SMT_CMP:
        new, changed = _map_cmp(body, _SMT_CMP[name])
        return print_sexpr(("assert", new)) if changed else None
    if name == "swap_pair":
        new = _swap_pair(body)
        return print_sexpr(("assert", new)) if new is not None else None
    if name == "disjoint_to_distinct" and isinstance(body, tuple) and len(body) == 3 and body[0] == "or":
        a, b = body[1], body[2]
        if all(isinstance(x, tuple) and len(x) == 3 and x[0] in ("<=", "<") for x in (a, b)):
            ea, sb = a[1], a[2]  # type: ignore[index]
            if isinstance(ea, str) and isinstance(sb, str) and ea.startswith("e_") and sb.startswith("s_"):
                return print_sexpr(("assert", ("distinct", "s_" + ea[2:], sb)))
    if name == "distinct_to_disjoint" and isinstance(body, tuple) and len(body) == 3 and body[0] == "distinct":
        a, b = body[1], body[2]
        if isinstance(a, str) and isinstance(b, str) and a.startswith("s_") and b.startswith("s_"):
            ja, jb = a[2:], b[2:]
            return print_sexpr(("assert", ("or", ("<=", f"e_{ja}", f"s_{jb}"), ("<=", f"e_{jb}", f"s_{ja}"))))
    return None


class SatScript(KeyedErrorModel):
    """The SAT/SMT error model (the table of the module docstring).

    Args:
      instances: ``env_id → SATInstance | SMTInstance`` (handed to the edit model's operators).
    """

    name = "sat"
    errors = ERRORS
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, instances: Mapping[str, Any], keys: Mapping[str, AnswerKey]) -> None:
        super().__init__(keys)
        self.instances = dict(instances or {})
        self.edits = SatSmtEdits()

    def env(self, task: Task) -> Any:
        return self.instances.get(task.env_id)

    def slip(self, name: str, action: str, task: Task, rng: random.Random) -> str | None:
        try:
            units = self.edits.units(action)
        except EditError:
            return None
        smt = is_smt(action)
        for i, u in enumerate(units):
            try:
                new = _smt_slip(name, u.text) if smt else _sat_slip(name, u.text)
            except Exception:  # a unit the slip cannot read is left alone
                new = None
            if new is not None and new != u.text:
                try:
                    return self.edits.replace_unit(action, i, new)
                except EditError:
                    return None
        return None

    def unit_kind_name(self, unit_text: str) -> str:
        t = unit_text.strip()
        if t.startswith("("):
            return "declaration" if t.startswith("(declare") else "assertion"
        try:
            s = parse_line(t).stmt
        except Exception:
            return "constraint group"
        if isinstance(s, Card):
            return "cardinality constraint"
        return "implication" if s.right is not None else "clause"

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        u = rng.random()
        if u < 0.35 and "problem" in task.attrs:
            return f'problem = "{task.attrs["problem"]}"'
        if u < 0.6 and "solver" in task.attrs:
            return f'solver = "{task.attrs["solver"]}"'
        return "none"

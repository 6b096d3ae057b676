"""The scripted backbone's SQL error model.

It is a *seeded simulator* of an LLM's systematic errors, not an LLM; see
:mod:`cfjax.llm.scripted` for drafts, alternatives, distillation, revision,
the judge and ExpeL lessons, which are domain independent. Each family has
one characteristic one-unit slip on base and new-surface tasks and the
opposite slip on look-alikes:

=================  ==================================  ========================================
family             base / new-surface error            look-alike error
=================  ==================================  ========================================
lower/upper_bound  ``>=`` → ``>`` (``<=`` → ``<``)     ``>`` → ``>=`` (``<`` → ``<=``)
join_key           FK join → ``a.id = b.id``           ``a.id = b.id`` → FK join
distinct           drops DISTINCT                      adds DISTINCT
null_check         ``IS NULL`` → ``= ''``              ``= ''`` → ``IS NULL``
string_case        ``LOWER(c) = 'x'`` → ``c = 'x'``    ``c = 'X'`` → ``LOWER(c) = 'x'``
count_nonnull      ``COUNT(col)`` → ``COUNT(*)``       ``COUNT(*)`` → ``COUNT(col)``
having             ``>=`` → ``>``; also FK join slip   ``>`` → ``>=``
order_limit        DESC → ASC                          ASC → DESC
=================  ==================================  ========================================
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from cfjax.domains.sql import edits as se
from cfjax.domains.sql.edits import SQLEdits
from cfjax.domains.base import KeyedErrorModel
from cfjax.types import AnswerKey, Task

__all__ = ["SQLScript", "ERRORS", "SEMANTIC_KEYS"]

# family → (error for base/new_surface, error for look_alike, [(extra error, weight)])
ERRORS: dict[str, tuple[str, str, tuple[tuple[str, float], ...]]] = {
    "lower_bound": ("weaken", "strengthen", ()),
    "upper_bound": ("weaken", "strengthen", ()),
    "join_key": ("join_ids", "join_fk", ()),
    "distinct": ("drop_distinct", "add_distinct", ()),
    "null_check": ("null_as_empty", "empty_as_null", ()),
    "string_case": ("case_sensitive", "case_insensitive", ()),
    "count_nonnull": ("count_star", "count_column", ()),
    "having": ("weaken", "strengthen", (("join_ids", 0.3),)),
    "order_limit": ("flip_order", "flip_order", ()),
}

# the lexicon attributes a question's semantics live in (for conditions)
SEMANTIC_KEYS = ("boundary", "join_semantics", "cardinality", "null_semantics", "case_semantics",
                  "count_semantics", "order_direction")


class SQLScript(KeyedErrorModel):
    """The SQL error model (the family table of the module docstring)."""

    name = "sql"
    errors = ERRORS
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, schemas: Mapping[str, se.SchemaLike], keys: Mapping[str, AnswerKey]) -> None:
        super().__init__(keys)
        self.schemas = dict(schemas)
        self.edits = SQLEdits()

    def env(self, task: Task) -> Any:
        return self.schemas.get(task.env_id)

    def slip(self, name: str, action: str, task: Task, rng: random.Random) -> str | None:
        schema = self.schemas.get(task.env_id)
        for i, unit in enumerate(se.units(action)):
            new = _slip(name, unit, action, schema)
            if new is not None and new != unit.text:
                try:
                    return se.replace_unit(action, i, new)
                except se.EditError:
                    return None
        return None

    def unit_kind_name(self, unit_text: str) -> str:
        return _unit_kind_name(unit_text)

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        ct = task.attrs.get("column_type")
        return f'column_type = "{ct}"' if ct and rng.random() < 0.5 else "none"


def _unit_kind_name(unit: str) -> str:
    u = unit.upper()
    if u.startswith("SELECT"):
        return "projection"
    if u.startswith("JOIN") or " JOIN " in u:
        return "join condition"
    if u.startswith("ORDER BY"):
        return "ordering"
    if u.startswith("LIMIT"):
        return "limit"
    if u.startswith("GROUP BY"):
        return "grouping"
    return "predicate"


def _slip(name: str, unit: se.Unit, sql: str, schema: se.SchemaLike | None) -> str | None:
    """The text of ``unit`` after slip ``name``, or ``None`` if it does not apply."""
    import sqlglot

    t = unit.text
    if unit.kind in ("where", "having"):
        node = sqlglot.parse_one(t, read=se.DIALECT)
        pairs = {"weaken": {exp.GTE: exp.GT, exp.LTE: exp.LT}, "strengthen": {exp.GT: exp.GTE, exp.LT: exp.LTE}}
        if name in pairs and type(node) in pairs[name]:
            cls = pairs[name][type(node)]
            return cls(this=node.this, expression=node.expression).sql(dialect=se.DIALECT)
        if name == "null_as_empty" and isinstance(node, exp.Is):
            return f"{node.this.sql(dialect=se.DIALECT)} = ''"
        if name == "empty_as_null" and isinstance(node, exp.EQ) and isinstance(node.expression, exp.Literal) \
                and node.expression.this == "":
            return f"{node.this.sql(dialect=se.DIALECT)} IS NULL"
        if name == "case_sensitive" and isinstance(node, exp.EQ) and isinstance(node.this, exp.Lower):
            return f"{node.this.this.sql(dialect=se.DIALECT)} = {node.expression.sql(dialect=se.DIALECT)}"
        if name == "case_insensitive" and isinstance(node, exp.EQ) and isinstance(node.expression, exp.Literal) \
                and node.expression.is_string and not isinstance(node.this, exp.Lower):
            return f"LOWER({node.this.sql(dialect=se.DIALECT)}) = '{node.expression.this.lower()}'"
        return None
    if unit.kind == "select":
        if name == "drop_distinct" and t.startswith("SELECT DISTINCT "):
            return "SELECT " + t[len("SELECT DISTINCT "):]
        if name == "add_distinct" and not t.startswith("SELECT DISTINCT ") and "COUNT(" not in t:
            return "SELECT DISTINCT " + t[len("SELECT "):]
        if name == "count_star" and t.startswith("SELECT COUNT(") and t != "SELECT COUNT(*)":
            return "SELECT COUNT(*)"
        if name == "count_column" and t == "SELECT COUNT(*)":
            edits = [e for _, e in se.rule_edits(sql, schema) if e.startswith("SELECT COUNT(") and e != t]
            return edits[0] if edits else None
        return None
    if unit.kind == "join" and name in ("join_ids", "join_fk"):
        cands = [e for i, e in se.rule_edits(sql, schema) if e.startswith("JOIN")]
        want_ids = name == "join_ids"
        for e in cands:
            if e.rstrip().endswith(".id") and (".id = " in e) == want_ids:
                return e
        return None
    if unit.kind == "order" and name == "flip_order":
        edits = [e for _, e in se.rule_edits(sql, schema) if e.startswith("ORDER BY")]
        return edits[0] if edits else None
    return None

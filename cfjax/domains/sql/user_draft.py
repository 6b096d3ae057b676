"""The scripted backbone's gold-free SQL drafter for user suites (agent side; :mod:`cfjax.domains.sql.user`).

:class:`UserSQLScript` holds the schemas the prompts show and no answer key. Its first draft is a
template query built from the question and the schema alone (:func:`draft_sql`); each later attempt is
that query with one rule edit of :func:`cfjax.domains.sql.edits.rule_edits`, drawn uniformly from the
attempt's seeded stream. It knows no true fix (:meth:`UserSQLScript.true_fixes` is empty).

This module is marked agent-side (:data:`cfjax.types.AGENT_SIDE_MARKER`): the answer-key guard never
trusts it, although it lives under ``cfjax.domains``. The loader (:mod:`cfjax.domains.sql.user`, which
reads the user's gold queries) imports it, never the reverse.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cfjax.domains.drafting import GoldFreeDrafting
from cfjax.domains.sql.databases import Column
from cfjax.domains.sql.script import SEMANTIC_KEYS, _unit_kind_name
from cfjax.llm.scripted import ScriptedConfig, ScriptedDomain
from cfjax.types import Task

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.domains.sql.user import SqliteSchema

#: agent-side code: never trusted by the answer-key guard (module docstring)
__cfjax_agent_side__ = True

__all__ = ["draft_sql", "UserSQLScript"]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _words(name: str) -> str:
    return " ".join(w for w in re.split(r"[^a-z0-9]+", name.lower()) if w)


def _find(plain: str, name: str) -> int:
    """Where the words of ``name`` (or their plural) first occur in ``plain`` (`` … ``-padded), else -1."""
    w = _words(name)
    if not w:
        return -1
    hits = [i for i in (plain.find(f" {w} "), plain.find(f" {w}s "), plain.find(f" {w}es ")) if i >= 0]
    return min(hits) if hits else -1


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w|\.\d)")
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")
_NUMERIC_TYPES = ("INT", "REAL", "FLOA", "DOUB", "NUM", "DEC")


def _is_numeric(col: Column) -> bool:
    return any(k in col.type for k in _NUMERIC_TYPES)


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else _quote(name)


def draft_sql(question: str, schema: SqliteSchema, attrs: Mapping[str, Any] | None = None) -> str:
    """A template query from the question and the schema alone (no gold, no data).

    The table is the first one the question mentions (else the first of the schema); ``how many`` /
    ``count`` / ``number of`` select ``COUNT(*)``; otherwise the columns the question names (else
    ``name`` when the table has one, else ``*``), ``DISTINCT`` when the cue parser saw a *unique*
    cardinality. Each number in the question filters the numeric column named nearest before it,
    with the comparison of the bound cue (``>=`` for an inclusive lower bound, ``>`` for a strict one,
    and so on; ``=`` without a cue); each quoted string filters a text column the question names
    (else the first text column) by equality. A *highest/lowest* cue with a number orders by the
    numeric column it names and takes that many rows.
    """
    attrs = attrs or {}
    # one space per other character: a position in ``plain`` is the question's position + 1
    plain = " " + re.sub(r"[^a-z0-9_]", " ", question.lower()) + " "
    if not schema.tables:
        return "SELECT 1"
    pos = [(min((p for p in (_find(plain, t.name), _find(plain, t.singular)) if p >= 0), default=-1), i)
           for i, t in enumerate(schema.tables)]
    hits = sorted((p, i) for p, i in pos if p >= 0)
    table = schema.tables[hits[0][1]] if hits else schema.tables[0]

    def named(col: Column) -> int:
        return _find(plain, col.name)

    filters: list[str] = []
    used: set[str] = set()
    numeric = [c for c in table.columns if _is_numeric(c) and named(c) >= 0]
    nums = [(m.start() + 1, m.group()) for m in _NUMBER.finditer(question)]
    order = attrs.get("order_direction")
    limit = None
    if order in ("asc", "desc") and nums and numeric:
        limit = nums[0][1]
        nums = nums[1:]
        used.add(numeric[0].name)
    side, boundary = attrs.get("bound_side"), attrs.get("boundary")
    op = {("lower", "inclusive"): ">=", ("lower", "strict"): ">", ("upper", "inclusive"): "<=",
          ("upper", "strict"): "<"}.get((side, boundary), "=")
    def nearest(cols: list[Column], at: int) -> Column | None:
        before = [c for c in cols if 0 <= named(c) < at and c.name not in used]
        return max(before, key=named) if before else next((c for c in cols if c.name not in used), None)

    for at, value in nums:
        col = nearest(numeric, at)
        if col is None:
            continue
        used.add(col.name)
        filters.append(f"{_ident(col.name)} {op} {value}")
    texts = [c for c in table.columns if not _is_numeric(c)]
    for m in _QUOTED.finditer(question):
        value = m.group(1) if m.group(1) is not None else m.group(2)
        col = nearest(texts, m.start() + 1)
        if col is None or not value:
            continue
        used.add(col.name)
        filters.append(f"{_ident(col.name)} = {_sql_literal(value)}")
    if re.search(r"\bhow many\b|\bcount\b|\bnumber of\b", plain):
        select = "SELECT COUNT(*)"
    else:
        cols = [c.name for c in table.columns if named(c) >= 0 and c.name not in used]
        if not cols:
            cols = [c.name for c in table.columns if c.name.lower() == "name"] or ["*"]
        distinct = "DISTINCT " if attrs.get("cardinality") == "unique" else ""
        select = "SELECT " + distinct + ", ".join(c if c == "*" else _ident(c) for c in cols)
    sql = f"{select} FROM {_ident(table.name)}"
    if filters:
        sql += " WHERE " + " AND ".join(filters)
    if limit is not None and numeric:
        sql += f" ORDER BY {_ident(numeric[0].name)} {'DESC' if order == 'desc' else 'ASC'} LIMIT {limit}"
    return sql


class UserSQLScript(GoldFreeDrafting, ScriptedDomain):
    """The scripted backbone's gold-free SQL drafter (module docstring). It holds the schemas only."""

    name = "sql"
    semantic_keys = SEMANTIC_KEYS

    def __init__(self, schemas: Mapping[str, SqliteSchema]) -> None:
        from cfjax.domains.sql.edits import SQLEdits

        self.schemas = dict(schemas)
        self.edits = SQLEdits()

    def env(self, task: Task) -> Any:
        return self.schemas.get(task.env_id)

    def draft(self, task: Task, attempt: int, rng: random.Random, config: ScriptedConfig) -> str:
        schema = self.schemas.get(task.env_id)
        base = draft_sql(task.question, schema, task.attrs) if schema is not None else "SELECT 1"
        base = self.edits.normalize(base)
        if attempt == 0:
            return base
        return self.one_rule_edit(base, rng, schema)

    def unit_kind_name(self, unit_text: str) -> str:
        return _unit_kind_name(unit_text)

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        tables = task.attrs.get("tables") or ()
        return f'env = "{task.env_id}"' if tables and rng.random() < 0.5 else "none"

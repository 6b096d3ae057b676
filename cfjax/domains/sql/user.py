"""User text-to-SQL tasks for ``--suite jsonl:PATH`` (:mod:`cfjax.domains.jsonl`), Spider and BIRD rows.

Fields of a line (``"domain": "sql"``):

============  ==========================================================================================
``question``  the request (required)
``query``     the gold SQL (Spider); also ``SQL`` (BIRD) or ``gold``; required — it defines the expected
              result and must run on its database
``db_path``   the sqlite file, relative to the JSONL file's folder (or absolute); or
``db_id``     the database id with ``db_dir``: ``<db_dir>/<db_id>/<db_id>.sqlite`` (the Spider and BIRD
              layout) or ``<db_dir>/<db_id>.sqlite``
``evidence``  BIRD's external knowledge, shown to the model with the schema (optional)
``ordered``   compare rows as a sequence (default: the gold has a top-level ``ORDER BY``)
============  ==========================================================================================

The environment is the database (``db_id``, else the file's stem). The context an agent sees is the
database's ``CREATE`` statements (and the evidence), as Spider/BIRD prompts show them. Observable
attributes: the SQL cue lexicon of :func:`cfjax.domains.sql.tasks.observe_attrs` on the question and
the tables whose names the question mentions. The world is :class:`~cfjax.domains.sql.world.SQLWorld`
over the user's files, which it opens read-only (its worker processes and limits).

:class:`UserSQLScript` is the scripted backbone's *gold-free* drafter for these tasks: it never holds
an answer key. Its first draft is a template query built from the question and the schema alone
(:func:`draft_sql`); each later attempt is that query with one rule edit of
:func:`cfjax.domains.sql.edits.rule_edits`, drawn uniformly from the attempt's seeded stream. It knows
no true fix (:meth:`UserSQLScript.true_fixes` is empty), so its local alternatives are rule edits that
only the world can tell apart.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfjax.domains.jsonl import GoldFreeDrafting, JSONLError, Parsed, RowReader, UserDomain, UserRow
from cfjax.domains.sql.databases import Column, ForeignKey, Table
from cfjax.domains.sql.script import SEMANTIC_KEYS, _unit_kind_name
from cfjax.domains.sql.tasks import observe_attrs
from cfjax.llm.scripted import ScriptedConfig, ScriptedDomain
from cfjax.types import AnswerKey, Task

__all__ = ["SqliteSchema", "read_schema", "draft_sql", "UserSQL", "UserSQLScript", "DOMAIN", "GOLD_FIELDS"]

#: the gold query's field, in the order looked up (Spider, BIRD, generic)
GOLD_FIELDS = ("query", "SQL", "gold")


@dataclass(frozen=True)
class SqliteSchema:
    """A user database's schema, read from the file: what the SQL edit model's operators need
    (:class:`cfjax.domains.sql.edits.SchemaLike`) and the ``CREATE`` text prompts show."""

    db_id: str
    tables: tuple[Table, ...]
    fks: tuple[ForeignKey, ...]
    ddl: str

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name.lower() == str(name).lower():
                return t
        raise KeyError(f"database {self.db_id!r} has no table {name!r}")

    def fk_between(self, child: str, parent: str) -> ForeignKey | None:
        for fk in self.fks:
            if fk.table.lower() == child.lower() and fk.ref_table.lower() == parent.lower():
                return fk
        return None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_schema(path: Path, db_id: str) -> SqliteSchema:
    """The schema of the sqlite file ``path``, opened read-only (``mode=ro``; never written)."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables, fks, ddl = [], [], []
        for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                                     "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"):
            cols = tuple(Column(c[1], (c[2] or "").upper(), "", nullable=not c[3] and not c[5])
                         for c in con.execute(f"PRAGMA table_info({_quote(name)})"))
            singular = name[:-1] if name.lower().endswith("s") and len(name) > 3 else name
            tables.append(Table(name, singular, 0, cols))
            for fk in con.execute(f"PRAGMA foreign_key_list({_quote(name)})"):
                fks.append(ForeignKey(name, fk[3], fk[2], fk[4] or "id"))
            if sql:
                ddl.append(sql.strip() + ";")
        return SqliteSchema(db_id, tuple(tables), tuple(fks), "\n".join(ddl))
    finally:
        con.close()


def _has_order_by(sql: str) -> bool:
    try:
        import sqlglot

        tree = sqlglot.parse_one(sql, read="sqlite")
        return tree.args.get("order") is not None
    except Exception:  # an unparseable gold (sqlglot is stricter than SQLite): the text decides
        depth, i, low = 0, 0, sql.lower()
        for i, ch in enumerate(low):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and low.startswith("order by", i):
                return True
        return False


# --------------------------------------------------------------------------- the loader


class UserSQL(UserDomain):
    """Spider/BIRD rows (module docstring)."""

    name = "sql"

    def __init__(self) -> None:
        self._schemas: dict[Path, SqliteSchema] = {}
        self.db_paths: dict[str, Path] = {}
        self.schemas: dict[str, SqliteSchema] = {}

    def _schema(self, r: RowReader, field_name: str, path: Path, db_id: str) -> SqliteSchema:
        got = self._schemas.get(path)
        if got is None:
            try:
                got = self._schemas[path] = read_schema(path, db_id)
            except sqlite3.Error as e:
                raise r.error(field_name, f"{path} is not a readable sqlite database ({e})") from None
        return got

    def parse(self, r: RowReader) -> Parsed:
        question = r.text("question")
        gold_field = r.first(GOLD_FIELDS)
        if gold_field is None:
            raise r.error("query", f"missing (the gold SQL: one of {', '.join(GOLD_FIELDS)})")
        gold = r.text(gold_field)
        if r.has("db_path"):
            path = r.file("db_path", kind="sqlite file")
            db_id = r.text("db_id") if r.has("db_id") else path.stem
            where = "db_path"
        elif r.has("db_id"):
            db_id = r.text("db_id")
            db_dir = r.text("db_dir", required=True) if r.has("db_dir") else None
            if db_dir is None:
                raise r.error("db_path", "missing (give db_path, or db_id with db_dir)")
            nested = Path(db_dir) / db_id / f"{db_id}.sqlite"
            flat = Path(db_dir) / f"{db_id}.sqlite"
            base = r.base_dir
            cand = next((c for c in (nested, flat) if ((c if c.is_absolute() else base / c)).is_file()), nested)
            path = r.file("db_dir", str(cand), kind="sqlite file")
            where = "db_dir"
        else:
            raise r.error("db_path", "missing (give db_path, or db_id with db_dir)")
        schema = self._schema(r, where, path, db_id)
        evidence = r.text("evidence", required=False, nonempty=False)
        ordered = r.get("ordered", bool, required=False)
        ordered = _has_order_by(gold) if ordered is None else ordered
        ql = " " + re.sub(r"[^a-z0-9_]+", " ", question.lower()) + " "
        mentioned = tuple(t.name for t in schema.tables if _mentions(ql, t))
        attrs = observe_attrs(question, env=db_id, tables=mentioned, column_type=None)
        context = f"-- Database `{db_id}` (SQLite)\n{schema.ddl}"
        if evidence and evidence.strip():
            context += f"\n-- Evidence: {evidence.strip()}"
        family = r.text("difficulty") if r.has("difficulty") and isinstance(r.row.get("difficulty"), str) else "user"
        return Parsed(question, db_id, context, attrs, gold=gold, ordered=bool(ordered), payload=(path, gold_field),
                      family=family)

    def finish(self, rows: Sequence[UserRow], path: Path, *, check: bool) -> None:
        first: dict[str, tuple[Path, int]] = {}
        for row in rows:
            db, _ = row.payload
            env = row.task.env_id
            if env in first and first[env][0] != db:
                raise JSONLError(path, row.line, "db_path", f"environment {env!r} is {first[env][0]} on line "
                                 f"{first[env][1]}, not {db}: one database per environment")
            first.setdefault(env, (db, row.line))
        self.db_paths = {env: db for env, (db, _) in first.items()}
        self.schemas = {env: self._schemas[db] for env, db in self.db_paths.items()}
        if check:
            self._check_gold(rows, path)

    def _check_gold(self, rows: Sequence[UserRow], path: Path) -> None:
        """Run every gold query once on its database (the world's own checks, in-process: the gold is
        the user's trusted input); a failure names its line."""
        from cfjax.domains.sql.world import SQLWorld

        world = SQLWorld(self.db_paths, {r.task.task_id: r.key for r in rows}, isolation="inprocess")
        try:
            for row in rows:
                try:
                    world.reference_result(row.task)
                except RuntimeError as e:  # "gold SQL of task … failed: <kind>: <message>"
                    detail = str(e).split("failed: ", 1)[-1]
                    raise JSONLError(path, row.line, row.payload[1],
                                     f"the gold query does not run on {row.payload[0].name}: {detail}") from None
        finally:
            world.close()

    def verify(self, rows: Sequence[UserRow], root: Path) -> None:
        for env, db in self.db_paths.items():
            if not db.is_file():
                raise FileNotFoundError(f"database of environment {env!r} not found: {db}")

    def world(self, root: Path, keys: Mapping[str, AnswerKey], **kwargs) -> object:
        from cfjax.domains.sql.world import SQLWorld

        return SQLWorld(self.db_paths, keys, **kwargs)

    def envs(self) -> Mapping[str, object]:
        return dict(self.schemas)

    @property
    def edits(self):
        from cfjax.domains.sql.edits import SQLEdits

        return SQLEdits()

    def scripted_domain(self, tasks: Sequence[Task]):
        return UserSQLScript(self.schemas)


DOMAIN = UserSQL


def _words(name: str) -> str:
    return " ".join(w for w in re.split(r"[^a-z0-9]+", name.lower()) if w)


def _find(plain: str, name: str) -> int:
    """Where the words of ``name`` (or their plural) first occur in ``plain`` (`` … ``-padded), else -1."""
    w = _words(name)
    if not w:
        return -1
    hits = [i for i in (plain.find(f" {w} "), plain.find(f" {w}s "), plain.find(f" {w}es ")) if i >= 0]
    return min(hits) if hits else -1


def _mentions(ql: str, table: Table) -> bool:
    return _find(ql, table.name) >= 0 or _find(ql, table.singular) >= 0


# --------------------------------------------------------------------------- the gold-free drafter

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

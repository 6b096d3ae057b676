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

:class:`UserSQLScript` (:mod:`cfjax.domains.sql.user_draft`, agent side, re-exported here) is the
scripted backbone's *gold-free* drafter for these tasks: it never holds an answer key. Its first draft is a template query built from the question and the schema alone
(:func:`draft_sql`); each later attempt is that query with one rule edit of
:func:`cfjax.domains.sql.edits.rule_edits`, drawn uniformly from the attempt's seeded stream. It knows
no true fix (:meth:`UserSQLScript.true_fixes` is empty), so its local alternatives are rule edits that
only the world can tell apart.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.domains.jsonl import JSONLError, Parsed, RowReader, UserDomain, UserRow
from cfjax.domains.sql.databases import Column, ForeignKey, Table
from cfjax.domains.sql.tasks import observe_attrs
from cfjax.domains.sql.user_draft import UserSQLScript, _find, _quote, draft_sql
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


def _mentions(ql: str, table: Table) -> bool:
    return _find(ql, table.name) >= 0 or _find(ql, table.singular) >= 0

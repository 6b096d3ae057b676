"""Task templates of the built-in SQL suite and their observable attributes.

Each template family targets one mistake that real text-to-SQL models make
and comes in three variants (papers/countermem.md §3.1, App. D.4):

========================  ==========================  =============================  ==========================
family                    base (the trap)             look-alike (changed condition)  new surface (same error)
========================  ==========================  =============================  ==========================
``lower_bound``           "at least v" → ``>=``       "strictly above v" → ``>``      "no fewer than v", "v or more"
``upper_bound``           "at most v" → ``<=``        "strictly below v" → ``<``      "no more than v", "v or less"
``join_key``              FK join                     "id numbers are equal" → PK=PK  "the … it belongs to"
``distinct``              "which different …"         "one row per …" (no DISTINCT)   "every value only once"
``null_check``            "is unknown" → IS NULL      "is an empty string" → = ''     "no … was recorded"
``string_case``           "ignoring capitalisation"   "exactly 'x' (case-sensitive)"  "regardless of case"
``count_nonnull``         "have a … on record"        "in total" → COUNT(*)           "whose … is known"
``having``                "at least n children"       "more than n children"          "no fewer than n"
``order_limit``           "k highest" → DESC          "k lowest" → ASC                "k largest"
========================  ==========================  =============================  ==========================

Observable attributes (``Task.attrs``) are what a parser of the question and
the schema can establish — cue phrases mapped to semantic classes by a fixed
lexicon (:func:`observe_attrs`), the environment, the tables and the type of
the filtered column. They never contain the gold query.
"""

from __future__ import annotations

import random
import re
import sqlite3
from pathlib import Path

from cfjax.domains.base import match_cues
from cfjax.domains.sql.databases import DatabaseSpec, schema_text
from cfjax.types import AnswerKey, Task

__all__ = ["LEXICON", "observe_attrs", "make_tasks", "FAMILIES"]

FAMILIES = (
    "lower_bound", "upper_bound", "join_key", "distinct", "null_check",
    "string_case", "count_nonnull", "having", "order_limit",
)

#: phrase → (attribute, value); longest phrases are matched first and consume
#: their span, so "no more than" never also counts as "more than".
LEXICON: dict[str, tuple[str, str]] = {
    "at least": ("boundary", "inclusive"), "no fewer than": ("boundary", "inclusive"),
    "no less than": ("boundary", "inclusive"), "or more": ("boundary", "inclusive"),
    "at most": ("boundary", "inclusive"), "no more than": ("boundary", "inclusive"),
    "or less": ("boundary", "inclusive"), "or fewer": ("boundary", "inclusive"),
    "strictly above": ("boundary", "strict"), "more than": ("boundary", "strict"),
    "greater than": ("boundary", "strict"), "strictly below": ("boundary", "strict"),
    "less than": ("boundary", "strict"), "fewer than": ("boundary", "strict"),
    "together with the name of its": ("join_semantics", "relationship"),
    "it belongs to": ("join_semantics", "relationship"),
    "id numbers are equal": ("join_semantics", "identifier"),
    "which different": ("cardinality", "unique"), "only once": ("cardinality", "unique"),
    "one row per": ("cardinality", "per_row"),
    "is unknown": ("null_semantics", "missing"), "was recorded": ("null_semantics", "missing"),
    "empty string": ("null_semantics", "empty"),
    "ignoring capitalisation": ("case_semantics", "insensitive"),
    "regardless of case": ("case_semantics", "insensitive"),
    "case-sensitive": ("case_semantics", "exact"),
    "on record": ("count_semantics", "non_null"), "is known": ("count_semantics", "non_null"),
    "in total": ("count_semantics", "all"),
    "highest": ("order_direction", "desc"), "largest": ("order_direction", "desc"),
    "lowest": ("order_direction", "asc"),
}
_SIDE = {
    "at least": "lower", "no fewer than": "lower", "no less than": "lower", "or more": "lower",
    "strictly above": "lower", "more than": "lower", "greater than": "lower",
    "at most": "upper", "no more than": "upper", "or less": "upper", "or fewer": "upper",
    "strictly below": "upper", "less than": "upper", "fewer than": "upper",
}


def observe_attrs(question: str, *, env: str, tables: tuple[str, ...], column_type: str | None) -> dict:
    """Observable attributes of a question (see module docstring)."""
    attrs: dict = {"question": question, "env": env, "tables": tables}
    if column_type is not None:
        attrs["column_type"] = column_type
    match_cues(question, LEXICON, _SIDE, attrs)
    if re.search(r"\bhow many\b|\bcount\b", question.lower()):
        attrs["aggregate"] = "count"
    return attrs


class _Maker:
    def __init__(self, spec: DatabaseSpec, db_path: Path, seed: int) -> None:
        self.spec = spec
        self.rng = random.Random(seed)
        self.con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        self.context = schema_text(spec)
        self.tasks: list[tuple[Task, AnswerKey]] = []
        self.counter: dict[str, int] = {}

    def values(self, table: str, col: str) -> list:
        return [r[0] for r in self.con.execute(f"SELECT {col} FROM {table} WHERE {col} IS NOT NULL ORDER BY {col}")]

    def add(self, family: str, variant: str, question: str, gold: str, tables: tuple[str, ...],
            column_type: str | None = None, ordered: bool = False) -> None:
        n = self.counter.get(family, 0)
        self.counter[family] = n + 1
        tid = f"sql/{self.spec.db_id}/{family}/{n:02d}"
        attrs = observe_attrs(question, env=self.spec.db_id, tables=tables, column_type=column_type)
        self.tasks.append((Task(tid, question, self.spec.db_id, self.context, attrs, domain="sql"),
                           AnswerKey(tid, gold, family, variant, ordered)))

    def threshold(self, table: str, col: str, k: int) -> list[int]:
        """k distinct thresholds that occur in the data, away from the extremes."""
        vals = sorted(set(self.values(table, col)))
        inner = vals[len(vals) // 5: max(len(vals) // 5 + 1, 4 * len(vals) // 5)]
        return sorted(self.rng.sample(inner, min(k, len(inner))))


def make_tasks(spec: DatabaseSpec, db_path: str | Path, seed: int = 0) -> list[tuple[Task, AnswerKey]]:
    """All tasks of one database with their answer keys, deterministic for ``seed``."""
    m = _Maker(spec, Path(db_path), seed)
    try:
        _bounds(m)
        _joins(m)
        _distinct(m)
        _nulls(m)
        _case(m)
        _counts(m)
        _having(m)
        _order(m)
    finally:
        m.con.close()
    return m.tasks


def _bounds(m: _Maker) -> None:
    phr = {
        ("lower_bound", "base"): ["whose {p} is at least {v}"],
        ("lower_bound", "look_alike"): ["whose {p} is strictly above {v}", "whose {p} is more than {v}"],
        ("lower_bound", "new_surface"): ["whose {p} is no fewer than {v}", "with a {p} of {v} or more"],
        ("upper_bound", "base"): ["whose {p} is at most {v}"],
        ("upper_bound", "look_alike"): ["whose {p} is strictly below {v}", "whose {p} is less than {v}"],
        ("upper_bound", "new_surface"): ["whose {p} is no more than {v}", "with a {p} of {v} or less"],
    }
    ops = {("lower_bound", True): ">=", ("lower_bound", False): ">", ("upper_bound", True): "<=", ("upper_bound", False): "<"}
    for table, col, phrase in m.spec.numeric:
        t = m.spec.table(table)
        for family in ("lower_bound", "upper_bound"):
            vs = m.threshold(table, col, 4)
            plan = [("base", vs[0]), ("base", vs[1 % len(vs)]), ("look_alike", vs[2 % len(vs)]), ("new_surface", vs[3 % len(vs)])]
            for variant, v in plan:
                tmpl = m.rng.choice(phr[(family, variant)])
                q = f"List the names of {t.name} " + tmpl.format(p=phrase, v=v) + "."
                op = ops[(family, variant != "look_alike")]
                m.add(family, variant, q, f"SELECT name FROM {table} WHERE {col} {op} {v}", (table,), "numeric")


def _alias(name: str, other: str | None = None) -> str:
    a = name[0]
    if other is not None and other[0] == a:
        return name[:2]
    return a


def _joins(m: _Maker) -> None:
    for fk in m.spec.fks:
        c, p = m.spec.table(fk.table), m.spec.table(fk.ref_table)
        ca, pa = _alias(c.name), _alias(p.name, c.name)
        fk_join = f"SELECT {ca}.name, {pa}.name FROM {c.name} AS {ca} JOIN {p.name} AS {pa} ON {ca}.{fk.column} = {pa}.id"
        id_join = f"SELECT {ca}.name, {pa}.name FROM {c.name} AS {ca} JOIN {p.name} AS {pa} ON {ca}.id = {pa}.id"
        m.add("join_key", "base", f"List each {c.singular}'s name together with the name of its {p.singular}.",
              fk_join, (c.name, p.name))
        m.add("join_key", "new_surface", f"For every {c.singular}, show its name and the name of the {p.singular} it belongs to.",
              fk_join, (c.name, p.name))
        m.add("join_key", "look_alike", f"List pairs of {c.singular} and {p.singular} names whose id numbers are equal.",
              id_join, (c.name, p.name))


def _distinct(m: _Maker) -> None:
    for table, col, phrase in m.spec.text:
        t = m.spec.table(table)
        m.add("distinct", "base", f"Which different {phrase} values appear among the {t.name}?",
              f"SELECT DISTINCT {col} FROM {table}", (table,), "text")
        m.add("distinct", "new_surface", f"List the {phrase} of the {t.name}, every value only once.",
              f"SELECT DISTINCT {col} FROM {table}", (table,), "text")
        m.add("distinct", "look_alike", f"List the {phrase} of the {t.name}, one row per {t.singular}.",
              f"SELECT {col} FROM {table}", (table,), "text")


def _nulls(m: _Maker) -> None:
    for table, col, phrase in m.spec.nullable:
        t = m.spec.table(table)
        m.add("null_check", "base", f"List the names of {t.name} whose {phrase} is unknown.",
              f"SELECT name FROM {table} WHERE {col} IS NULL", (table,), "text")
        m.add("null_check", "new_surface", f"List the names of {t.name} for whom no {phrase} was recorded.",
              f"SELECT name FROM {table} WHERE {col} IS NULL", (table,), "text")
        m.add("null_check", "look_alike", f"List the names of {t.name} whose {phrase} is stored as an empty string.",
              f"SELECT name FROM {table} WHERE {col} = ''", (table,), "text")


def _case(m: _Maker) -> None:
    for table, col, phrase in m.spec.text:
        t = m.spec.table(table)
        present = set(m.values(table, col))
        # only values also stored in another capitalisation: the case trap must be observable
        vals = sorted({v for v in present if v[:1].isupper() and not v.isupper()
                       and any(w != v and w.lower() == v.lower() for w in present)})
        picks = m.rng.sample(vals, min(3, len(vals)))
        for variant, v in zip(("base", "new_surface", "look_alike"), picks):
            lo = v.lower()
            if variant == "base":
                q = f"List the names of {t.name} whose {phrase} is '{lo}', ignoring capitalisation."
                gold = f"SELECT name FROM {table} WHERE LOWER({col}) = '{lo}'"
            elif variant == "new_surface":
                q = f"List the names of {t.name} whose {phrase} matches '{lo}' regardless of case."
                gold = f"SELECT name FROM {table} WHERE LOWER({col}) = '{lo}'"
            else:
                q = f"List the names of {t.name} whose {phrase} is written exactly '{v}' (case-sensitive)."
                gold = f"SELECT name FROM {table} WHERE {col} = '{v}'"
            m.add("string_case", variant, q, gold, (table,), "text")


def _counts(m: _Maker) -> None:
    for table, col, phrase in m.spec.nullable:
        t = m.spec.table(table)
        m.add("count_nonnull", "base", f"How many {t.name} have an {phrase} on record?" if phrase[0] in "aeiou"
              else f"How many {t.name} have a {phrase} on record?", f"SELECT COUNT({col}) FROM {table}", (table,), "text")
        m.add("count_nonnull", "new_surface", f"Count the {t.name} whose {phrase} is known.",
              f"SELECT COUNT({col}) FROM {table}", (table,), "text")
        m.add("count_nonnull", "look_alike", f"How many {t.name} are there in total, with or without an {phrase}?"
              if phrase[0] in "aeiou" else f"How many {t.name} are there in total, with or without a {phrase}?",
              f"SELECT COUNT(*) FROM {table}", (table,), "text")


def _having(m: _Maker) -> None:
    for fk in m.spec.fks:
        c, p = m.spec.table(fk.table), m.spec.table(fk.ref_table)
        ca, pa = _alias(c.name), _alias(p.name, c.name)
        counts = sorted({r[0] for r in m.con.execute(
            f"SELECT COUNT(*) FROM {c.name} GROUP BY {fk.column}")})
        inner = counts[1:-1] or counts
        base = f"SELECT {pa}.name FROM {p.name} AS {pa} JOIN {c.name} AS {ca} ON {ca}.{fk.column} = {pa}.id GROUP BY {pa}.id HAVING COUNT(*) "
        for variant, phrase, op in (("base", "at least", ">="), ("look_alike", "more than", ">"),
                                    ("new_surface", "no fewer than", ">=")):
            n = m.rng.choice(inner)
            m.add("having", variant, f"Which {p.name} have {phrase} {n} {c.name}? Give their names.",
                  base + f"{op} {n}", (p.name, c.name), "numeric")


def _order(m: _Maker) -> None:
    for table, col, phrase in m.spec.rank:
        t = m.spec.table(table)
        for variant, q, d in (
            ("base", "Which {k} {n} have the highest {p}? List their names from the highest down.", "DESC"),
            ("new_surface", "Name the {k} {n} with the largest {p}, largest first.", "DESC"),
            ("look_alike", "Which {k} {n} have the lowest {p}? List their names from the lowest up.", "ASC"),
        ):
            k = m.rng.randint(2, 5)
            m.add("order_limit", variant, q.format(k=k, n=t.name, p=phrase),
                  f"SELECT name FROM {table} ORDER BY {col} {d} LIMIT {k}", (table,), "numeric", ordered=True)

"""Generated SQLite databases of the built-in SQL suite.

Five small databases from different domains (hr, shop, school, library,
clinic), each with its own schema, foreign keys, nullable columns and dirty
text values, generated from an explicit seed with :mod:`random.Random` — the
same seed gives the same bytes of data on every machine. Values are chosen
so that the traps of the task templates are *observable*: boundary values
occur in the data, NULL and empty strings both occur, text columns carry
inconsistent capitalisation, ranking columns are unique, and child tables
have more rows than their parents (so joining on the wrong key changes the
result).
"""

from __future__ import annotations

import os
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Column", "Table", "ForeignKey", "DatabaseSpec", "DATABASES", "build_database", "schema_text"]


@dataclass(frozen=True)
class Column:
    """``gen`` is a generator spec: ``pk``, ``name``, ``int:lo:hi``,
    ``uniq:lo:hi`` (unique integers), ``city``, ``choice:a|b|c``, ``email``,
    ``fk:<table>``, ``nullint:lo:hi``."""

    name: str
    type: str
    gen: str
    nullable: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    singular: str
    rows: int
    columns: tuple[Column, ...]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name!r} has no column {name!r}")


@dataclass(frozen=True)
class ForeignKey:
    table: str
    column: str
    ref_table: str
    ref_column: str = "id"


@dataclass(frozen=True)
class DatabaseSpec:
    """A database and the columns the task templates may use.

    ``numeric``: (table, column, phrase) pairs for threshold filters;
    ``text``: text columns with repeated values (DISTINCT, case);
    ``nullable``: nullable text columns (NULL vs empty string);
    ``rank``: unique numeric columns for ORDER BY … LIMIT.
    """

    db_id: str
    domain: str
    tables: tuple[Table, ...]
    fks: tuple[ForeignKey, ...]
    numeric: tuple[tuple[str, str, str], ...]
    text: tuple[tuple[str, str, str], ...]
    nullable: tuple[tuple[str, str, str], ...]
    rank: tuple[tuple[str, str, str], ...]
    seed: int = 0
    extra: dict = field(default_factory=dict)

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"database {self.db_id!r} has no table {name!r}")

    def fk_between(self, child: str, parent: str) -> ForeignKey | None:
        for fk in self.fks:
            if fk.table == child and fk.ref_table == parent:
                return fk
        return None


def _c(name: str, type_: str, gen: str, nullable: bool = False) -> Column:
    return Column(name, type_, gen, nullable)


_PK = _c("id", "INTEGER", "pk")
_NAME = _c("name", "TEXT", "name")

DATABASES: tuple[DatabaseSpec, ...] = (
    DatabaseSpec(
        "hr", "human resources",
        tables=(
            Table("departments", "department", 8, (_PK, _c("name", "TEXT", "label"), _c("city", "TEXT", "city"),
                                                   _c("budget", "INTEGER", "uniq:100:999"))),
            Table("employees", "employee", 60, (_PK, _NAME, _c("age", "INTEGER", "int:20:64"),
                                                _c("salary", "INTEGER", "uniq:30000:99000"),
                                                _c("dept_id", "INTEGER", "fk:departments"),
                                                _c("email", "TEXT", "email", True), _c("city", "TEXT", "city"),
                                                _c("hired_year", "INTEGER", "int:2001:2024"))),
        ),
        fks=(ForeignKey("employees", "dept_id", "departments"),),
        numeric=(("employees", "age", "age"), ("employees", "hired_year", "hiring year")),
        text=(("employees", "city", "city"),),
        nullable=(("employees", "email", "email address"),),
        rank=(("employees", "salary", "salary"), ("departments", "budget", "budget")),
        seed=101,
    ),
    DatabaseSpec(
        "shop", "online shop",
        tables=(
            Table("customers", "customer", 40, (_PK, _NAME, _c("city", "TEXT", "city"), _c("age", "INTEGER", "int:18:80"),
                                                _c("email", "TEXT", "email", True))),
            Table("products", "product", 25, (_PK, _c("name", "TEXT", "label"),
                                              _c("category", "TEXT", "choice:Books|Garden|Toys|Kitchen|Sports"),
                                              _c("price", "INTEGER", "uniq:3:400"), _c("stock", "INTEGER", "int:0:60"))),
            Table("orders", "order", 90, (_PK, _c("name", "TEXT", "label"), _c("customer_id", "INTEGER", "fk:customers"),
                                          _c("product_id", "INTEGER", "fk:products"),
                                          _c("quantity", "INTEGER", "int:1:9"),
                                          _c("shipped_date", "TEXT", "date", True))),
        ),
        fks=(ForeignKey("orders", "customer_id", "customers"), ForeignKey("orders", "product_id", "products")),
        numeric=(("customers", "age", "age"), ("products", "stock", "stock level"), ("orders", "quantity", "quantity")),
        text=(("customers", "city", "city"), ("products", "category", "category")),
        nullable=(("customers", "email", "email address"), ("orders", "shipped_date", "shipping date")),
        rank=(("products", "price", "price"),),
        seed=202,
    ),
    DatabaseSpec(
        "school", "school administration",
        tables=(
            Table("teachers", "teacher", 10, (_PK, _NAME, _c("subject", "TEXT", "choice:Math|Art|Biology|History"),
                                              _c("email", "TEXT", "email", True))),
            Table("courses", "course", 18, (_PK, _c("name", "TEXT", "label"), _c("teacher_id", "INTEGER", "fk:teachers"),
                                            _c("credits", "INTEGER", "int:1:8"), _c("capacity", "INTEGER", "uniq:10:90"))),
            Table("students", "student", 50, (_PK, _NAME, _c("age", "INTEGER", "int:16:30"), _c("city", "TEXT", "city"),
                                              _c("email", "TEXT", "email", True), _c("score", "INTEGER", "uniq:100:999"))),
            Table("enrollments", "enrollment", 110, (_PK, _c("name", "TEXT", "label"),
                                                     _c("student_id", "INTEGER", "fk:students"),
                                                     _c("course_id", "INTEGER", "fk:courses"),
                                                     _c("grade", "INTEGER", "nullint:40:100", True))),
        ),
        fks=(ForeignKey("courses", "teacher_id", "teachers"), ForeignKey("enrollments", "student_id", "students"),
             ForeignKey("enrollments", "course_id", "courses")),
        numeric=(("students", "age", "age"), ("courses", "credits", "number of credits")),
        text=(("students", "city", "home city"), ("teachers", "subject", "subject")),
        nullable=(("students", "email", "email address"), ("teachers", "email", "email address")),
        rank=(("students", "score", "test score"), ("courses", "capacity", "capacity")),
        seed=303,
    ),
    DatabaseSpec(
        "library", "public library",
        tables=(
            Table("authors", "author", 14, (_PK, _NAME, _c("country", "TEXT", "choice:Chile|Kenya|Norway|Japan|Peru"))),
            Table("books", "book", 45, (_PK, _c("name", "TEXT", "label"), _c("author_id", "INTEGER", "fk:authors"),
                                        _c("pages", "INTEGER", "uniq:80:900"), _c("year", "INTEGER", "int:1950:2024"),
                                        _c("genre", "TEXT", "choice:Poetry|Crime|Fantasy|Essay"))),
            Table("members", "member", 35, (_PK, _NAME, _c("city", "TEXT", "city"), _c("age", "INTEGER", "int:12:90"),
                                            _c("phone", "TEXT", "email", True))),
            Table("loans", "loan", 80, (_PK, _c("name", "TEXT", "label"), _c("book_id", "INTEGER", "fk:books"),
                                        _c("member_id", "INTEGER", "fk:members"), _c("days", "INTEGER", "int:1:40"))),
        ),
        fks=(ForeignKey("books", "author_id", "authors"), ForeignKey("loans", "book_id", "books"),
             ForeignKey("loans", "member_id", "members")),
        numeric=(("books", "year", "publication year"), ("members", "age", "age"), ("loans", "days", "loan length in days")),
        text=(("members", "city", "city"), ("books", "genre", "genre")),
        nullable=(("members", "phone", "phone number"),),
        rank=(("books", "pages", "page count"),),
        seed=404,
    ),
    DatabaseSpec(
        "clinic", "medical clinic",
        tables=(
            Table("doctors", "doctor", 9, (_PK, _NAME, _c("specialty", "TEXT", "choice:Cardiology|Oncology|Pediatrics"),
                                           _c("city", "TEXT", "city"), _c("email", "TEXT", "email", True))),
            Table("patients", "patient", 55, (_PK, _NAME, _c("age", "INTEGER", "int:1:95"), _c("city", "TEXT", "city"),
                                              _c("weight", "INTEGER", "uniq:3:150"),
                                              _c("insurance", "TEXT", "email", True))),
            Table("visits", "visit", 100, (_PK, _c("name", "TEXT", "label"), _c("patient_id", "INTEGER", "fk:patients"),
                                           _c("doctor_id", "INTEGER", "fk:doctors"), _c("cost", "INTEGER", "int:20:300"),
                                           _c("minutes", "INTEGER", "int:5:90"))),
        ),
        fks=(ForeignKey("visits", "patient_id", "patients"), ForeignKey("visits", "doctor_id", "doctors")),
        numeric=(("patients", "age", "age"), ("visits", "cost", "cost"), ("visits", "minutes", "duration in minutes")),
        text=(("patients", "city", "city"), ("doctors", "specialty", "specialty")),
        nullable=(("patients", "insurance", "insurance number"), ("doctors", "email", "email address")),
        rank=(("patients", "weight", "weight"),),
        seed=505,
    ),
)

_FIRST = "Ada Bo Cai Dev Eli Fay Gus Hana Ivo Jun Kai Lea Mo Nia Oto Pia Quin Rui Sol Tam Uma Vic Wen Xia Yara Zed".split()
_LAST = "Abe Berg Costa Diaz Eze Fox Gray Holm Ito Jain Kerr Lund Moss Novak Ortiz Park Quist Rossi Silva Tran".split()
_CITIES = ("Paris", "Lima", "Oslo", "Accra", "Kyoto", "Quito", "Porto", "Dakar")
_WORDS = "amber basil cedar delta ember flint grove harbor iris juniper kestrel lumen maple nova onyx".split()


def _dirty_city(rng: random.Random) -> str:
    city = rng.choice(_CITIES)
    r = rng.random()
    if r < 0.12:
        return city.lower()
    if r < 0.18:
        return city.upper()
    return city


def _value(col: Column, table: Table, row: int, rng: random.Random, used: dict, sizes: dict) -> object:
    kind, _, arg = col.gen.partition(":")
    if kind == "pk":
        return row + 1
    if kind == "name":
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if kind == "label":
        return f"{table.singular.title()} {rng.choice(_WORDS).title()} {row + 1}"
    if kind == "int":
        lo, hi = map(int, arg.split(":"))
        return rng.randint(lo, hi)
    if kind == "nullint":
        lo, hi = map(int, arg.split(":"))
        return None if rng.random() < 0.2 else rng.randint(lo, hi)
    if kind == "uniq":
        lo, hi = map(int, arg.split(":"))
        pool = used.setdefault((table.name, col.name), rng.sample(range(lo, hi + 1), table.rows))
        return pool[row]
    if kind == "city":
        return _dirty_city(rng)
    if kind == "choice":
        v = rng.choice(arg.split("|"))
        return v.lower() if rng.random() < 0.15 else v  # dirty case, as for cities
    if kind in ("email", "date") and row < 2:
        return None if row == 0 else ""  # both kinds of "missing" occur even in small tables
    if kind == "email":
        r = rng.random()
        if r < 0.25:
            return None
        if r < 0.4:
            return ""
        return f"{rng.choice(_WORDS)}{row}@example.org"
    if kind == "date":
        r = rng.random()
        if r < 0.3:
            return None
        if r < 0.4:
            return ""
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "fk":
        # skewed so some parents have many children and some none
        n = sizes[arg]
        return min(n, 1 + int(rng.random() ** 1.6 * n))
    raise ValueError(f"unknown column generator {col.gen!r}")


def build_database(spec: DatabaseSpec, path: str | Path) -> Path:
    """Create ``path`` (overwriting) with the schema and seeded data of ``spec``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    rng = random.Random(spec.seed)
    sizes = {t.name: t.rows for t in spec.tables}
    used: dict = {}
    con = sqlite3.connect(tmp)
    try:
        for t in spec.tables:
            cols = []
            for c in t.columns:
                decl = f"{c.name} {c.type}" + (" PRIMARY KEY" if c.gen == "pk" else "") + ("" if c.nullable else " NOT NULL" if c.gen != "pk" else "")
                cols.append(decl)
            for fk in spec.fks:
                if fk.table == t.name:
                    cols.append(f"FOREIGN KEY ({fk.column}) REFERENCES {fk.ref_table}({fk.ref_column})")
            con.execute(f"CREATE TABLE {t.name} ({', '.join(cols)})")
            rows = [tuple(_value(c, t, i, rng, used, sizes) for c in t.columns) for i in range(t.rows)]
            con.executemany(f"INSERT INTO {t.name} VALUES ({', '.join('?' * len(t.columns))})", rows)
        con.commit()
    finally:
        con.close()
    tmp.replace(path)
    return path


def schema_text(spec: DatabaseSpec) -> str:
    """The environment context shown to the executor: CREATE TABLE statements."""
    lines = [f"-- database {spec.db_id} ({spec.domain})"]
    for t in spec.tables:
        cols = []
        for c in t.columns:
            cols.append(f"  {c.name} {c.type}{'' if c.nullable or c.gen == 'pk' else ' NOT NULL'}"
                        f"{' PRIMARY KEY' if c.gen == 'pk' else ''}")
        for fk in spec.fks:
            if fk.table == t.name:
                cols.append(f"  FOREIGN KEY ({fk.column}) REFERENCES {fk.ref_table}({fk.ref_column})")
        lines.append(f"CREATE TABLE {t.name} (\n" + ",\n".join(cols) + "\n);")
    return "\n".join(lines)

"""Tests for the SQL world model (cfjax.domains.sql.world)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cfjax.types import AnswerKey, Task
from cfjax.types import Outcome
from cfjax.types import World as Evaluator
from cfjax.domains.sql.world import SQLWorld, split_statements

CITIES = ["Paris", "Berlin", "Rome", "Oslo", "Lima"]


CONTEXT = "people(id, name, age, city, email)"
GOLD_AT_LEAST = "SELECT name FROM people WHERE age >= 40"


def _default_id(gold: str, ordered: bool) -> str:
    return f"t/{'ordered' if ordered else 'multiset'}/{gold}"


#: (gold, explicit task_id or None, ordered) of every task the tests evaluate. The world reads
#: answer keys, which it receives at construction, so every key is registered up front.
_SPECS = [
    (GOLD_AT_LEAST, None, False),
    ("SELECT name FROM people WHERE age > 40", "gt", False),
    ("SELECT city FROM people", None, False),
    ("SELECT id FROM people ORDER BY id", "u", False),
    ("SELECT id FROM people ORDER BY id", "o", True),
    ("SELECT item, price FROM prices", None, False),
    ("SELECT 2.5 * 2", "f2", False),
    ("SELECT 0.12345649999999", "f4", False),
    ("SELECT 'Paris'", "f5", False),
    ("SELECT 5", "f6", False),
    ("SELECT id, email FROM people WHERE id <= 8", None, False),
    ("SELECT NULL", "n2", False),
    ("SELECT name FROM people WHERE age > 1000", None, False),
    ("SELECT count(*) FROM people", None, False),
    ("SELECT count(*) FROM people", "c", False),
    ("SELECT nope FROM people", "bad-gold", False),
    ("SELECT id FROM people WHERE id <= 3 ORDER BY id", None, True),
]
KEYS: dict[str, AnswerKey] = {}
for _gold, _tid, _ordered in _SPECS:
    _tid = _tid or _default_id(_gold, _ordered)
    assert _tid not in KEYS, _tid
    KEYS[_tid] = AnswerKey(_tid, _gold, ordered=_ordered)


def _task(gold: str, *, task_id: str | None = None, ordered: bool = False, env_id: str = "hr") -> Task:
    """The task whose answer key (registered in ``KEYS``) has ``gold`` and ``ordered``."""
    task_id = task_id or _default_id(gold, ordered)
    key = KEYS[task_id]
    assert (key.gold, key.ordered) == (gold, ordered), f"register {task_id!r} in _SPECS"
    return Task(task_id, "q", env_id, CONTEXT)


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


@pytest.fixture()
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "hr.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, "
        "city TEXT, email TEXT)"
    )
    rows = []
    for i in range(1, 31):
        email = None if i % 4 == 0 else f"p{i}@example.org"
        rows.append((i, f"Person{i}", 18 + (i * 7) % 40, CITIES[i % len(CITIES)], email))
    conn.executemany("INSERT INTO people VALUES (?, ?, ?, ?, ?)", rows)
    conn.execute("CREATE TABLE prices (item TEXT, price REAL)")
    conn.executemany(
        "INSERT INTO prices VALUES (?, ?)", [("a", 0.1), ("b", 0.2), ("c", 1 / 3), ("d", 2.5)]
    )
    conn.commit()
    conn.close()
    # Make the mtime clearly in the past so a rewrite would be detected.
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    return path


@pytest.fixture(params=["subprocess", "inprocess"])
def world(db_path: Path, request: pytest.FixtureRequest) -> Iterator[SQLWorld]:
    """The world in both isolations (the default worker processes and the in-process engine)."""
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=0.5, max_rows=500, isolation=request.param)
    yield w
    w.close()


@pytest.fixture(params=["subprocess", "inprocess"])
def rich_world(db_path: Path, request: pytest.FixtureRequest) -> Iterator[SQLWorld]:
    """The world with ``feedback="rich"`` (the diagnostic text: expected row counts, overlap)."""
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=0.5, max_rows=500, feedback="rich", isolation=request.param)
    yield w
    w.close()


def test_is_evaluator(world: SQLWorld) -> None:
    assert isinstance(world, Evaluator)
    assert world.env_ids == ("hr",)


def test_correct_query_scores_one(world: SQLWorld) -> None:
    task = _task(GOLD_AT_LEAST)
    out = world.evaluate(task, "SELECT p.name AS n FROM people p WHERE p.age > 39 ORDER BY name")
    assert isinstance(out, Outcome)
    assert (out.score, out.solved, out.completed, out.error) == (1.0, True, True, None)
    assert out.elapsed_s > 0
    assert world.evaluate(task, GOLD_AT_LEAST).score == 1.0


def test_wrong_boundary_partial_credit(rich_world: SQLWorld) -> None:
    task = _task(GOLD_AT_LEAST)
    n_exp = len(rich_world.reference_rows(task))
    n_got = len(rich_world.reference_rows(_task("SELECT name FROM people WHERE age > 40", task_id="gt")))
    assert 0 < n_got < n_exp
    out = rich_world.evaluate(task, "SELECT name FROM people WHERE age > 40")
    assert out.completed and not out.solved and out.error is None
    assert 0.0 < out.score < 1.0
    assert out.score == pytest.approx(0.9 * 2 * n_got / (n_got + n_exp))
    assert f"returned {n_got} rows" in out.feedback
    assert f"expected result has {n_exp} rows" in out.feedback
    assert "age" not in out.feedback and ">=" not in out.feedback  # gold not revealed
    assert len(out.feedback) < 800


def test_no_partial_credit(db_path: Path) -> None:
    w = SQLWorld({"hr": db_path}, KEYS, partial_credit=False)
    out = w.evaluate(_task(GOLD_AT_LEAST), "SELECT name FROM people WHERE age > 40")
    assert out.score == 0.0 and not out.solved and out.completed
    w.close()


def test_multiset_duplicates_matter(rich_world: SQLWorld) -> None:
    task = _task("SELECT city FROM people")  # 30 rows, 5 distinct
    out = rich_world.evaluate(task, "SELECT DISTINCT city FROM people")
    assert not out.solved
    assert out.score == pytest.approx(0.9 * 2 * 5 / (5 + 30))
    assert "5 rows overlap" in out.feedback


def test_order_ignored_unless_ordered(rich_world: SQLWorld) -> None:
    unordered = _task("SELECT id FROM people ORDER BY id", task_id="u")
    assert rich_world.evaluate(unordered, "SELECT id FROM people ORDER BY id DESC").solved
    ordered = _task("SELECT id FROM people ORDER BY id", task_id="o", ordered=True)
    good = rich_world.evaluate(ordered, "SELECT id FROM people ORDER BY id")
    assert good.solved and good.score == 1.0
    bad = rich_world.evaluate(ordered, "SELECT id FROM people ORDER BY id DESC")
    assert bad.completed and not bad.solved
    assert bad.score == 0.5
    assert "order differs" in bad.feedback
    # Ordered task with a different multiset: 0.9 * F1.
    short = rich_world.evaluate(ordered, "SELECT id FROM people WHERE id <= 15 ORDER BY id")
    assert short.score == pytest.approx(0.9 * 2 * 15 / 45)


def test_float_tolerance(world: SQLWorld) -> None:
    task = _task("SELECT item, price FROM prices")
    out = world.evaluate(
        task,
        "SELECT item, price + 1e-9 FROM prices UNION ALL SELECT 'x', 1 LIMIT 4",
    )
    assert out.solved
    # int vs float compared numerically
    task2 = _task("SELECT 2.5 * 2", task_id="f2")
    assert world.evaluate(task2, "SELECT 5").solved
    # beyond tolerance
    out3 = world.evaluate(task, "SELECT item, price + 1e-3 FROM prices")
    assert not out3.solved and out3.score == 0.0
    # values straddling a rounding boundary still match
    task4 = _task("SELECT 0.12345649999999", task_id="f4")
    assert world.evaluate(task4, "SELECT 0.1234565").solved
    # strings are exact and never equal numbers
    task5 = _task("SELECT 'Paris'", task_id="f5")
    assert not world.evaluate(task5, "SELECT 'paris'").solved
    task6 = _task("SELECT 5", task_id="f6")
    assert not world.evaluate(task6, "SELECT '5'").solved


def test_null_handling(world: SQLWorld) -> None:
    task = _task("SELECT id, email FROM people WHERE id <= 8")
    assert world.evaluate(task, "SELECT id, email FROM people WHERE id < 9").solved
    out = world.evaluate(task, "SELECT id, coalesce(email, '') FROM people WHERE id <= 8")
    assert not out.solved
    assert out.score == pytest.approx(0.9 * 2 * 6 / 16)
    task2 = _task("SELECT NULL", task_id="n2")
    assert world.evaluate(task2, "SELECT NULL").solved
    assert not world.evaluate(task2, "SELECT 0").solved


def test_column_count_mismatch(rich_world: SQLWorld) -> None:
    task = _task(GOLD_AT_LEAST)
    out = rich_world.evaluate(task, "SELECT name, age FROM people WHERE age >= 40")
    assert out.completed and not out.solved and out.score == 0.0
    assert "Wrong column count: got 2, expected 1" in out.feedback


def test_empty_results(world: SQLWorld) -> None:
    task = _task("SELECT name FROM people WHERE age > 1000")
    assert world.evaluate(task, "SELECT name FROM people WHERE 0").solved
    out = world.evaluate(task, "SELECT name FROM people")
    assert out.score == 0.0 and not out.solved


@pytest.mark.parametrize(
    "sql",
    ["SELECT nam FROM people", "SELEC name FROM people", "SELECT name FROM nowhere", ""],
)
def test_sql_errors_are_completed_outcomes(world: SQLWorld, sql: str) -> None:
    out = world.evaluate(_task(GOLD_AT_LEAST), sql)
    assert (out.score, out.solved, out.completed, out.error) == (0.0, False, True, "sql_error")
    assert out.feedback.startswith("SQL error:")


def test_sql_error_message(world: SQLWorld) -> None:
    out = world.evaluate(_task(GOLD_AT_LEAST), "SELECT x FROM people")
    assert out.feedback == "SQL error: no such column: x"


HOSTILE = [
    "DROP TABLE people",
    "DELETE FROM people",
    "INSERT INTO people VALUES (99, 'Eve', 50, 'Oslo', NULL)",
    "UPDATE people SET age = 99",
    "REPLACE INTO people VALUES (1, 'Eve', 50, 'Oslo', NULL)",
    "EXPLAIN SELECT 1",
    "CREATE TABLE evil (x)",
    "ALTER TABLE people ADD COLUMN z",
    "ATTACH DATABASE '{other}' AS x",
    "PRAGMA writable_schema=1",
    "PRAGMA query_only=OFF",
    "SELECT load_extension('x')",
    "SELECT 1; DROP TABLE people",
    "SELECT name FROM people WHERE age >= 40; DELETE FROM people",
    "BEGIN",
    "VACUUM",
    "VACUUM INTO '{other}'",
    "WITH x AS (SELECT 1) DELETE FROM people",
    "WITH x AS (SELECT 1) INSERT INTO people SELECT 100, 'Eve', 50, 'Oslo', NULL",
    "SELECT * FROM pragma_table_info('people')",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_sql_is_refused_and_harmless(
    world: SQLWorld, db_path: Path, tmp_path: Path, sql: str
) -> None:
    other = tmp_path / "other.sqlite"
    sql = sql.format(other=other)
    before = _fingerprint(db_path)
    task = _task(GOLD_AT_LEAST)
    out = world.evaluate(task, sql)
    assert out.completed and not out.solved and out.score == 0.0
    assert out.error == "forbidden", out
    assert out.feedback.startswith("Forbidden:")
    assert _fingerprint(db_path) == before
    assert not other.exists()
    assert not any(p.name.startswith("x") for p in tmp_path.iterdir())
    # The evaluation copy was not polluted: the next check is unaffected.
    assert world.evaluate(task, GOLD_AT_LEAST).score == 1.0
    assert world.evaluate(_task("SELECT count(*) FROM people", task_id="c"), "SELECT 30").solved


def test_source_file_untouched_by_evaluations(world: SQLWorld, db_path: Path) -> None:
    before = _fingerprint(db_path)
    for sql in (GOLD_AT_LEAST, "SELECT * FROM people", "SELECT bogus"):
        world.evaluate(_task(GOLD_AT_LEAST), sql)
    assert _fingerprint(db_path) == before
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["hr.sqlite"]


def test_endless_recursive_cte_times_out(world: SQLWorld) -> None:
    task = _task("SELECT count(*) FROM people")
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
    t0 = time.perf_counter()
    out = world.evaluate(task, sql)
    wall = time.perf_counter() - t0
    assert (out.completed, out.error, out.score, out.solved) == (False, "timeout", 0.0, False)
    assert wall < 0.5 + 1.0
    assert out.elapsed_s >= 0.5
    # still usable afterwards
    assert world.evaluate(task, "SELECT 30").solved


def test_too_many_rows(world: SQLWorld) -> None:
    task = _task(GOLD_AT_LEAST)
    t0 = time.perf_counter()
    out = world.evaluate(task, "SELECT a.id, b.id, c.id FROM people a, people b, people c")
    assert time.perf_counter() - t0 < 2.0
    assert out.completed and not out.solved and out.score == 0.0
    assert out.error == "too_many_rows"
    assert "500" in out.feedback


def test_unknown_env_raises(world: SQLWorld) -> None:
    with pytest.raises(ValueError, match="nope"):
        world.evaluate(_task(GOLD_AT_LEAST, env_id="nope"), GOLD_AT_LEAST)


def test_failing_gold_raises(world: SQLWorld) -> None:
    with pytest.raises(RuntimeError, match="bad-gold"):
        world.evaluate(_task("SELECT nope FROM people", task_id="bad-gold"), "SELECT 1")


def test_task_without_answer_key_raises(world: SQLWorld) -> None:
    task = Task("no-key", "q", "hr", CONTEXT)
    assert not hasattr(task, "gold") and not hasattr(task, "ordered")  # the key holds them
    with pytest.raises(ValueError, match="no-key"):
        world.evaluate(task, GOLD_AT_LEAST)


def test_missing_database_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        SQLWorld({"x": tmp_path / "missing.sqlite"}, {})


def test_reference_rows_cached(world: SQLWorld) -> None:
    task = _task("SELECT id FROM people WHERE id <= 3 ORDER BY id", ordered=True)
    assert world.reference_rows(task) == [(1,), (2,), (3,)]
    assert world.reference_result(task) is world.reference_result(task)


def test_split_statements() -> None:
    assert split_statements("SELECT 1") == ["SELECT 1"]
    assert split_statements("SELECT 1;  -- trailing\n") == ["SELECT 1"]
    assert split_statements("SELECT ';' AS x /* ; */ ;") == ["SELECT ';' AS x /* ; */ "]
    assert split_statements("SELECT 'it''s'; SELECT 2") == ["SELECT 'it''s'", " SELECT 2"]
    assert split_statements(" ; ;") == []
    assert len(split_statements('SELECT "a;b" FROM [x;y]; DROP TABLE t')) == 2


def test_equal_rows_fast_path_agrees_with_the_tolerant_comparator() -> None:
    """``_score`` skips the comparator when the rows are equal under ``==`` in the same order; that
    is sound only if such rows always match tolerantly, as sequences and as multisets."""
    import random

    from cfjax.domains.sql.world import QueryResult, _Comparator

    rng = random.Random(0)
    pool = [None, 0, 1, -1, 2**53 + 1, 2**62, 0.0, -0.0, 1.0, 0.1, 1e-300, 1e300, float("inf"), "", "a", "A",
            "0", b"", b"a", 3, 3.0, 2**53]
    w = SQLWorld.__new__(SQLWorld)  # only the comparator and the scoring options are needed
    w._cmp, w.partial_credit = _Comparator(1e-6), True
    for _ in range(300):
        n_cols = rng.randint(1, 3)
        rows = tuple(tuple(rng.choice(pool) for _ in range(n_cols)) for _ in range(rng.randint(0, 6)))
        # an equal copy whose numbers may change kind (3 vs 3.0): still == row by row
        copy = tuple(tuple(float(v) if isinstance(v, int) and abs(v) < 2**53 and rng.random() < 0.5 else v
                           for v in r) for r in rows)
        assert copy == rows
        assert w._cmp.sequence_equal(copy, rows)
        assert w._cmp.overlap(copy, rows) == len(rows)
        for ordered in (False, True):
            score, solved, _ = w._score(QueryResult(n_cols, copy), QueryResult(n_cols, rows), ordered=ordered)
            assert (score, solved) == (1.0, True)


def test_leftover_matching_equals_the_full_greedy_scan() -> None:
    """``overlap`` pairs leftover rows only with rows of the same non-numeric values; the count must be
    the one the plain greedy scan over all leftovers finds (the earlier implementation)."""
    import random

    from cfjax.domains.sql import world as wm

    def reference_overlap(cmp, got, expected):  # the earlier implementation, verbatim in effect
        buckets = {}
        for row in expected:
            buckets.setdefault(cmp.row_key(row), []).append(row)
        matched, unmatched = 0, []
        for row in got:
            bucket = buckets.get(cmp.row_key(row))
            for idx, cand in enumerate(bucket or []):
                if wm._rows_close(row, cand, cmp.tol):
                    bucket.pop(idx)
                    matched += 1
                    break
            else:
                unmatched.append(row)
        rest = [r for b in buckets.values() for r in b]
        if unmatched and rest and len(unmatched) * len(rest) <= wm._LEFTOVER_BUDGET:
            for row in unmatched:
                for idx, cand in enumerate(rest):
                    if wm._rows_close(row, cand, cmp.tol):
                        rest.pop(idx)
                        matched += 1
                        break
        return matched

    rng = random.Random(1)
    values = [None, "a", "b", b"a", 0, 1, 1.0, 0.1234565, 0.12345649999999, 0.1234564, 2.5, 2.5000001, 7]
    for tol in (1e-6, 1e-3, 0.0):
        cmp = wm._Comparator(tol)
        for _ in range(400):
            n_cols = rng.randint(1, 2)
            rows = lambda k: [tuple(rng.choice(values) for _ in range(n_cols)) for _ in range(k)]  # noqa: E731
            got, expected = rows(rng.randint(0, 12)), rows(rng.randint(0, 12))
            assert cmp.overlap(got, expected) == reference_overlap(cmp, got, expected), (got, expected)


def _split_statements_by_character(sql: str) -> list[str]:
    """The earlier, character-by-character splitter: the reference for ``split_statements``."""
    statements: list[str] = []
    start, has_token, i, n = 0, False, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and j + 1 < n and sql[j + 1] == close:
                        j += 2
                        continue
                    break
                j += 1
            i, has_token = j + 1, True
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif ch == ";":
            if has_token:
                statements.append(sql[start:i])
            start, has_token = i + 1, False
            i += 1
        else:
            has_token = has_token or not ch.isspace()
            i += 1
    if has_token:
        statements.append(sql[start:])
    return statements


def test_split_statements_matches_the_character_scanner() -> None:
    import random

    rng = random.Random(7)
    alphabet = ["'", '"', "`", "[", "]", ";", "-", "--", "/", "*", "/*", "*/", "\n", " ", "\t", "\u00a0", "a",
                "SELECT 1", "''", "x;y"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert split_statements(text) == _split_statements_by_character(text), repr(text)

"""``--suite jsonl:PATH`` with text-to-SQL rows in the formats of Spider and BIRD (issue 14).

The tests write their own small benchmark: a sqlite database in the Spider layout
(``database/<db_id>/<db_id>.sqlite``) and JSONL rows with Spider's fields (``db_id``,
``question``, ``query``) or BIRD's (``db_id``, ``question``, ``SQL``, ``evidence``). One test per
kind of malformed file checks that the error names the line and the field at fault; the end-to-end
tests run ``cfjax countermem run`` and ``cfjax upliftmem run`` on the file with tiny settings.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest

from cfjax.config import ConfigError, ScriptedConfig
from cfjax.domains import build_suite, open_suite, register_jsonl, suite_base
from cfjax.domains.jsonl import JSONLError, JSONLSuite, load
from cfjax.domains.sql.user import UserSQLScript, draft_sql

# --------------------------------------------------------------------------- the benchmark files

_QUESTIONS = [  # Spider-style (question, gold) over the concert_singer-like schema below
    ("How many singers do we have?", "SELECT count(*) FROM singer"),
    ("How many singers are there in total?", "SELECT count(*) FROM singer"),
    ("List the names of singers whose age is at least 30.", "SELECT name FROM singer WHERE age >= 30"),
    ("List the names of singers whose age is more than 33.", "SELECT name FROM singer WHERE age > 33"),
    ("List the names of singers whose age is at most 25.", "SELECT name FROM singer WHERE age <= 25"),
    ("Show the name of singers whose country is 'France'.", "SELECT name FROM singer WHERE country = 'France'"),
    ("What are the names of stadiums with capacity at least 5000?", "SELECT name FROM stadium WHERE capacity >= 5000"),
    ("What are the names of stadiums with capacity less than 4000?", "SELECT name FROM stadium WHERE capacity < 4000"),
    ("How many concerts are there in year 2015?", "SELECT count(*) FROM concert WHERE year = 2015"),
    ("Which different location values appear among the stadiums?", "SELECT DISTINCT location FROM stadium"),
    ("What are the 3 stadium names with the highest capacity?", "SELECT name FROM stadium ORDER BY capacity DESC LIMIT 3"),
    ("Show the names of the 2 singers with the lowest age.", "SELECT name FROM singer ORDER BY age ASC LIMIT 2"),
    ("How many stadiums are there?", "SELECT count(*) FROM stadium"),
    ("List the names of singers who are older than 35.", "SELECT name FROM singer WHERE age > 35"),
    ("Show the concert names of concerts whose year is at least 2014.",
     "SELECT concert_name FROM concert WHERE year >= 2014"),
    ("How many singers are from country 'Netherlands'?", "SELECT count(*) FROM singer WHERE country = 'Netherlands'"),
]


def make_db(path: Path, seed: int = 0) -> Path:
    """A small concert/singer database (Spider's ``concert_singer`` shape) with foreign keys."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT, location TEXT, capacity INTEGER);
        CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
        CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT,
                              stadium_id INTEGER REFERENCES stadium(stadium_id), year INTEGER);
    """)
    r = random.Random(seed)
    for i in range(1, 11):
        con.execute("INSERT INTO stadium VALUES (?,?,?,?)", (i, f"Stadium {i}", r.choice(["Raith", "Ayr"]), 1000 * i))
    for i in range(1, 21):
        con.execute("INSERT INTO singer VALUES (?,?,?,?)", (i, f"Singer {i}", r.choice(["France", "Netherlands"]), 20 + i))
    for i in range(1, 16):
        con.execute("INSERT INTO concert VALUES (?,?,?,?)", (i, f"Concert {i}", r.randint(1, 10), 2010 + i % 6))
    con.commit()
    con.close()
    return path


def write_jsonl(path: Path, rows: list, raw_lines: dict[int, str] | None = None) -> Path:
    """``rows`` as JSON lines; ``raw_lines`` (1-based line → text) replaces lines verbatim."""
    lines = [json.dumps(r) for r in rows]
    for i, text in (raw_lines or {}).items():
        lines[i - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def spider_rows(n: int = 16) -> list[dict]:
    return [{"domain": "sql", "db_id": "concert_singer", "db_dir": "database", "question": q, "query": s}
            for q, s in _QUESTIONS[:n]]


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("spider")
    make_db(d / "database" / "concert_singer" / "concert_singer.sqlite")
    write_jsonl(d / "spider_dev.jsonl", spider_rows())
    return d


@pytest.fixture(scope="module")
def suite(bench, tmp_path_factory) -> JSONLSuite:
    name = register_jsonl(f"jsonl:{bench / 'spider_dev.jsonl'}")
    root = tmp_path_factory.mktemp("root") / name
    build_suite(name, root)
    return open_suite(name, root)


# --------------------------------------------------------------------------- loading


def test_spider_rows_load_as_a_suite(suite, bench):
    assert suite.name == "jsonl-spider_dev" and suite.domain == "sql" and suite.base == "sql"
    assert suite_base(suite.name) == "sql"
    assert len(suite.tasks) == 16
    t = suite.tasks[2]
    assert t.task_id == "jsonl-spider_dev/concert_singer/L00003" and t.env_id == "concert_singer"
    assert t.domain == "sql" and t.question == _QUESTIONS[2][0]
    assert "CREATE TABLE singer" in t.context and "SELECT" not in t.context  # schema, never the gold
    assert t.attrs["tables"] == ("singer",)
    assert suite.keys[t.task_id].gold == _QUESTIONS[2][1]
    assert suite.keys[suite.tasks[10].task_id].ordered and not suite.keys[t.task_id].ordered  # ORDER BY decides
    # the suite root holds the manifest and a copy of the file; the database stays where it is
    assert (suite.root / "suite.json").is_file() and (suite.root / "tasks.jsonl").read_text() == \
        (bench / "spider_dev.jsonl").read_text()
    assert suite.envs()["concert_singer"].fk_between("concert", "stadium").column == "stadium_id"


def test_bird_rows_with_sql_field_evidence_and_db_path(tmp_path):
    make_db(tmp_path / "dbs" / "shop.sqlite")
    rows = [{"domain": "sql", "question_id": i, "db_path": "dbs/shop.sqlite", "question": q, "SQL": s,
             "evidence": "age refers to singer.age", "difficulty": "simple" if i % 2 else "moderate"}
            for i, (q, s) in enumerate(_QUESTIONS)]
    lf = load(write_jsonl(tmp_path / "bird_dev.jsonl", rows))
    t = lf.rows[0].task
    assert t.env_id == "shop" and t.task_id == "jsonl-bird_dev/shop/0"
    assert "-- Evidence: age refers to singer.age" in t.context
    assert {r.key.family for r in lf.rows} == {"simple", "moderate"}  # BIRD's difficulty is the family


def test_splits_are_derived_deterministic_and_nonempty(suite):
    a, b = suite.splits(seed=12345), suite.splits(seed=12345)
    assert [t.task_id for t in a.eval] == [t.task_id for t in b.eval]
    assert all(len(getattr(a, s)) > 0 for s in ("build", "train", "val", "eval"))
    ids = [t.task_id for s in ("build", "train", "val", "eval") for t in getattr(a, s)]
    assert sorted(ids) == sorted(t.task_id for t in suite.tasks)  # a partition
    c = suite.splits(seed=7)
    assert [t.task_id for t in c.eval] != [t.task_id for t in a.eval]


def test_split_field_overrides_and_new_env_holdout(tmp_path):
    for db in ("a", "b", "c"):
        make_db(tmp_path / f"{db}.sqlite", seed=ord(db))
    rows = [{"domain": "sql", "db_path": f"{db}.sqlite", "question": q, "query": s}
            for db in ("a", "b") for q, s in _QUESTIONS]
    rows += [{"domain": "sql", "db_path": "c.sqlite", "question": q, "query": s} for q, s in _QUESTIONS[:4]]
    rows[0]["split"] = "eval"
    rows[1]["split"] = "build"
    s = JSONLSuite.build(tmp_path / "root", write_jsonl(tmp_path / "three.jsonl", rows))
    assert s.holdout_envs == ("c",)  # the smallest environment, at most 20 % of the tasks
    sp = s.splits(seed=1)
    assert s.tasks[0] in sp.eval and s.tasks[1] in sp.build
    assert {t.env_id for t in sp.build + sp.train + sp.val} == {"a", "b"}  # c is eval only: new_env
    assert all(t in sp.eval for t in s.tasks if t.env_id == "c")


def test_user_database_is_never_written(suite, bench):
    db = bench / "database" / "concert_singer" / "concert_singer.sqlite"
    before = (db.read_bytes(), db.stat().st_mtime_ns)
    with suite.world(isolation="inprocess") as w:
        t = suite.tasks[0]
        assert w.evaluate(t, "SELECT count(*) FROM singer").solved
        out = w.evaluate(t, "DELETE FROM singer")
        assert not out.solved and out.error == "forbidden"
    assert (db.read_bytes(), db.stat().st_mtime_ns) == before


def test_scripted_drafter_never_reads_gold(suite, tmp_path):
    """The gold-free drafter gets the schemas only; changing every gold changes no draft."""
    sd = suite.scripted_domain()
    assert isinstance(sd, UserSQLScript) and not hasattr(sd, "_keys")
    d = tmp_path
    make_db(d / "database" / "concert_singer" / "concert_singer.sqlite")
    rows = spider_rows()
    for r in rows:
        r["query"] = "SELECT 1"  # another gold for every question
    other = JSONLSuite.build(d / "root", write_jsonl(d / "spider_dev.jsonl", rows), label=suite.name)
    od = other.scripted_domain()
    cfg = ScriptedConfig()
    for t, u in zip(suite.tasks, other.tasks):
        for attempt in range(3):
            assert sd.draft(t, attempt, random.Random(attempt), cfg) == od.draft(u, attempt, random.Random(attempt), cfg)
    assert sd.true_fixes(suite.tasks[0], "SELECT count(*) FROM singer") == {}


def test_scripted_drafter_runs_under_the_answer_key_guard(suite):
    """The drafter's module is marked agent-side, so the guard watches it under ``cfjax.domains``: every
    draft, rule edit and (empty) fix list is made with answer keys unreadable to it."""
    import cfjax.domains.sql.user_draft as mod
    from cfjax.types import AGENT_SIDE_MARKER, answer_key_guard

    assert getattr(mod, AGENT_SIDE_MARKER) is True and UserSQLScript.__module__ == mod.__name__
    sd, cfg = suite.scripted_domain(), ScriptedConfig()
    with answer_key_guard():
        for t in suite.tasks:
            for attempt in range(3):
                d = sd.draft(t, attempt, random.Random(attempt), cfg)
            assert sd.true_fixes(t, d) == {}


def test_template_drafts_solve_the_plain_questions(suite):
    with suite.world(isolation="inprocess") as w:
        sd = suite.scripted_domain()
        solved = sum(w.evaluate(t, sd.draft(t, 0, random.Random(0), ScriptedConfig())).solved for t in suite.tasks)
    assert 4 <= solved < len(suite.tasks)  # a template reader: some, never all
    schema = suite.envs()["concert_singer"]
    assert draft_sql("How many singers do we have?", schema) == "SELECT COUNT(*) FROM singer"
    assert draft_sql("Names of singers whose age is at least 30.", schema,
                     {"boundary": "inclusive", "bound_side": "lower"}) == "SELECT name FROM singer WHERE age >= 30"


# --------------------------------------------------------------------------- malformed files: one test per case


def _err(path: Path) -> JSONLError:
    with pytest.raises(JSONLError) as e:
        load(path)
    assert isinstance(e.value, ConfigError)
    return e.value


@pytest.fixture
def d(tmp_path) -> Path:
    make_db(tmp_path / "database" / "concert_singer" / "concert_singer.sqlite")
    return tmp_path


def test_error_not_json(d):
    e = _err(write_jsonl(d / "x.jsonl", spider_rows(3), {2: '{"domain": "sql", "question": '}))
    assert (e.line, e.field) == (2, None) and "not valid JSON" in str(e) and "x.jsonl:2:" in str(e)


def test_error_not_an_object(d):
    e = _err(write_jsonl(d / "x.jsonl", spider_rows(3), {3: '["sql"]'}))
    assert e.line == 3 and "one JSON object" in str(e)


def test_error_missing_field(d):
    rows = spider_rows(3)
    del rows[1]["question"]
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (2, "question") and "missing" in str(e)
    rows = spider_rows(3)
    del rows[2]["query"]
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (3, "query") and "gold SQL" in str(e)


def test_error_wrong_type(d):
    rows = spider_rows(3)
    rows[1]["question"] = 42
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (2, "question") and "must be a string, got an integer" in str(e)
    rows = spider_rows(3)
    rows[0]["split"] = "test"
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (1, "split")


def test_error_unknown_domain(d):
    rows = spider_rows(3)
    rows[0]["domain"] = "cobol"
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (1, "domain") and "unknown domain 'cobol'" in str(e)
    rows = spider_rows(3)
    del rows[2]["domain"]
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (3, "domain")


def test_error_mixed_domains(d):
    rows = spider_rows(3)
    rows[2]["domain"] = "python"
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (3, "domain") and "line 1" in str(e)


def test_error_missing_sqlite_file(d):
    rows = spider_rows(3)
    rows[1] = {"domain": "sql", "db_path": "nowhere.sqlite", "question": "q?", "query": "SELECT 1"}
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (2, "db_path") and "sqlite file not found" in str(e)
    rows = spider_rows(3)
    rows[2]["db_id"] = "flight_2"
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (3, "db_dir") and "flight_2" in str(e)


def test_error_gold_query_does_not_run(d):
    rows = spider_rows(4)
    rows[3]["query"] = "SELECT nme FROM singer"
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (4, "query") and "no such column: nme" in str(e)
    rows = spider_rows(4)
    rows[1] = {k: v for k, v in rows[1].items() if k != "query"} | {"SQL": "DROP TABLE singer"}
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (2, "SQL") and "forbidden" in str(e)


def test_error_duplicate_ids(d):
    rows = spider_rows(4)
    rows[0]["question_id"] = 7
    rows[3]["question_id"] = 7
    e = _err(write_jsonl(d / "x.jsonl", rows))
    assert (e.line, e.field) == (4, "question_id") and "also on line 1" in str(e)


def test_error_empty_file(d):
    (d / "x.jsonl").write_text("\n# only a comment\n\n")
    e = _err(d / "x.jsonl")
    assert e.line is None and "no tasks" in str(e)


def test_error_too_few_tasks_for_splits(d):
    s = JSONLSuite.build(d / "root", write_jsonl(d / "x.jsonl", spider_rows(3)))
    with pytest.raises(ConfigError, match="too few"):
        s.splits()
    rows = spider_rows(3)
    for r, split in zip(rows, ("build", "train", "eval")):
        r["split"] = split
    s = JSONLSuite.build(d / "root2", write_jsonl(d / "y.jsonl", rows))
    with pytest.raises(ConfigError, match=r"split\(s\) val would be empty"):
        s.splits()
    sp = s.splits(n_val=0)  # a file that fixes every split: exactly as given
    assert [len(sp.build), len(sp.train), len(sp.val), len(sp.eval)] == [1, 1, 0, 1]


def test_cli_prints_the_error_in_one_line(d, tmp_path, capsys):
    from cfjax.cli import main

    rows = spider_rows(3)
    rows[1]["query"] = "SELECT nme FROM singer"
    path = write_jsonl(d / "bad.jsonl", rows)
    rc = main(["countermem", "run", "--suite", f"jsonl:{path}", "--out", str(tmp_path / "out"), "--quick"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("cfjax: ")
    assert "bad.jsonl:2: field 'query':" in err
    assert not (tmp_path / "out").exists()  # refused before anything is written


# --------------------------------------------------------------------------- every method runs on it


def test_countermem_run_end_to_end(bench, tmp_path, capsys):
    from cfjax.cli import main

    out = tmp_path / "cm"
    rc = main(["countermem", "run", "--suite", f"jsonl:{bench / 'spider_dev.jsonl'}", "--out", str(out), "--quick",
               "--rows", "cf_memory", "--max-tasks", "6", "--workers", "1", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    assert res["suites"] == ["jsonl-spider_dev"]
    unit = res["units"][0]
    assert unit["suite"] == "jsonl-spider_dev" and set(unit["rows"]) >= {"none", "cf_memory"}
    assert 0.0 <= unit["rows"]["cf_memory"]["success"] <= 100.0
    assert len(unit["outcomes"]["cf_memory"]) == len(unit["eval_ids"]) > 0
    assert (out / "jsonl-spider_dev" / "split_12345" / "seed_0" / "store.json").is_file()
    assert (out / "suites" / "jsonl-spider_dev" / "suite.json").is_file()
    report = (out / "report.txt").read_text()
    assert "jsonl-spider_dev" in report and "[" in report  # success with its paired interval


@pytest.mark.slow
def test_upliftmem_run_end_to_end(bench, tmp_path):
    from cfjax.cli import main

    out = tmp_path / "um"
    rc = main(["upliftmem", "run", "--suite", f"jsonl:{bench / 'spider_dev.jsonl'}", "--out", str(out), "--quick",
               "--rows", "upliftmem", "--max-tasks", "6", "--workers", "1", "--debug"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert "jsonl-spider_dev" in json.dumps(res["outcomes"])
    per = json.loads((out / "jsonl-spider_dev" / "results.json").read_text())
    assert per["suite"] == "jsonl-spider_dev" and "upliftmem" in per["rows"]

"""Attacks on the SQL world's resource bounds, as a hostile model would write them (issue 12).

Every attack must end as an :class:`~cfjax.types.Outcome` (never an exception) within
``timeout_s + 1 s`` of wall-clock time; the test process's memory must stay bounded (resident set
and its peak grow by less than 100 MB); the database file's bytes and modification time must not
change; and an ordinary query evaluated afterwards must still be scored correctly (a killed worker
is replaced). Failures of the sandbox itself — a worker that crashes, is killed, cannot start,
closes its pipe or sends garbage — are outcomes too (``error="worker_error"``, not completed).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cfjax.domains.sql import world as world_module
from cfjax.domains.sql.world import SQLWorld
from cfjax.infra.cache import CachedWorld
from cfjax.types import AnswerKey, Outcome, Task

TIMEOUT = 1.0
GOLD = "SELECT name FROM people WHERE age >= 40"
KEYS = {
    "t": AnswerKey("t", GOLD),
    "count": AnswerKey("count", "SELECT count(*) FROM people"),
}
TASK = Task("t", "q", "hr", "people(id, name, age, city)")
COUNT = Task("count", "q", "hr", "people(id, name, age, city)")
REAL_WORKER = world_module._WORKER_SCRIPT

# a 999,999-character string (just inside SQLITE_LIMIT_LENGTH's default) built in one function call
BIG = "printf('%.*c', 999999, 'x')"
_CTE = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n}) "

#: name -> (sql, the error kinds the outcome may have). ``None`` in the set: the query may finish
#: (a completed, wrong answer) on a fast machine. Every outcome is checked for the bounds above.
ATTACKS: dict[str, tuple[str, set]] = {
    # one LIKE over a 10^6-character string: a single SQLite call the progress handler cannot stop
    "like_printf_1e6": (f"SELECT 1 WHERE {BIG} LIKE '%{'x' * 998}y'", {"timeout", None}),
    "like_group_concat_1e6": (
        "SELECT 1 WHERE (SELECT group_concat(printf('%.*c', 1000, 'x'), '') FROM ("
        + _CTE.format(n=999) + f"SELECT i FROM c)) LIKE '%{'x' * 998}y'",
        {"timeout", None},
    ),
    "like_pattern_too_long": (f"SELECT {BIG} LIKE '%{'x' * 20000}y'", {"sql_error"}),
    "glob_pattern_too_long": (f"SELECT {BIG} GLOB '*{'x' * 20000}y'", {"sql_error"}),
    "instr_1e6": (f"SELECT instr({BIG}, printf('%.*c', 500000, 'x') || 'y')", {"timeout", None}),
    # huge values
    "zeroblob_1e9": ("SELECT zeroblob(1000000000)", {"sql_error"}),
    "zeroblob_300_columns": ("SELECT " + ", ".join(["zeroblob(10000000)"] * 300), {"sql_error"}),
    "zeroblob_60_columns": ("SELECT " + ", ".join(["zeroblob(10000000)"] * 60), {"sql_error"}),
    "zeroblob_100_columns_1mb": ("SELECT " + ", ".join(["zeroblob(1000000)"] * 100), {"too_large_result"}),
    "zeroblob_rows": (
        _CTE.format(n=1000) + "SELECT " + ", ".join(["zeroblob(1000000)"] * 50) + " FROM c",
        {"too_large_result", "memory"},
    ),
    "randomblob_rows": (_CTE.format(n=100) + "SELECT randomblob(1000000) FROM c", {"too_large_result"}),
    "printf_2e9": ("SELECT printf('%.*c', 2000000000, 'x')", {"timeout", "sql_error"}),
    "replace_blowup": (f"SELECT replace({BIG}, 'x', 'yy')", {"sql_error"}),
    "hex_blowup": ("SELECT hex(randomblob(1000000))", {"sql_error"}),
    "many_rows_of_strings": (_CTE.format(n=9000) + "SELECT printf('%.*c', 2000, 'x') FROM c",
                             {"too_large_result"}),
    # recursive CTEs, joins and aggregates
    "cte_doubling_string": ("WITH RECURSIVE c(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM c) "
                            "SELECT length(s) FROM c", {"sql_error"}),
    "cte_endless_big_rows": ("WITH RECURSIVE c(i, s) AS (SELECT 1, zeroblob(100000) UNION ALL "
                             "SELECT i + 1, s FROM c) SELECT count(*), sum(length(s)) FROM c", {"timeout"}),
    "cross_join_explosion": ("SELECT count(*) FROM people a, people b, people c, people d, people e, people f",
                             {"timeout"}),
    "cross_join_sorted": ("SELECT a.name || b.name || c.name FROM people a, people b, people c, people d "
                          "ORDER BY random()", {"timeout"}),
    "group_concat_endless": ("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) "
                             "SELECT group_concat(i) FROM c", {"timeout", "sql_error"}),
    # the query text itself
    "nested_parentheses_40k": ("SELECT " + "(" * 40000 + "1" + ")" * 40000, {"sql_error"}),
    "nested_parentheses_60k": ("SELECT " + "(" * 60000 + "1" + ")" * 60000, {"too_large"}),
    "deep_expression": ("SELECT " + "+".join(["1"] * 20000), {"sql_error"}),
    "nested_functions": ("SELECT " + "abs(" * 5000 + "1" + ")" * 5000, {"sql_error"}),
    "literal_30mb": ("SELECT '" + "x" * 30_000_000 + "'", {"too_large"}),
    "comment_30mb": ("SELECT 1 /*" + "x" * 30_000_000 + "*/", {"too_large"}),
    "lone_surrogate": ("SELECT '\ud800'", {"sql_error"}),
    "null_character": ("SELECT 1\x00", {"sql_error"}),
    "invalid_utf8_result": ("SELECT CAST(randomblob(900000) AS TEXT)", {"sql_error"}),
}


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


def _rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process, in MB."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _reset_peak() -> bool:
    """Reset this process's peak RSS (``VmHWM``), where the kernel allows it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def db_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sql_attacks") / "hr.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, city TEXT)")
    conn.executemany("INSERT INTO people VALUES (?, ?, ?, ?)",
                     [(i, f"Person{i}", 18 + (i * 7) % 40, ["Oslo", "Rome", "Lima"][i % 3]) for i in range(1, 61)])
    conn.commit()
    conn.close()
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    return path


@pytest.fixture(scope="module")
def world(db_path: Path):
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=TIMEOUT)
    assert w.evaluate(TASK, GOLD).solved  # starts the worker, caches the reference
    yield w
    w.close()


def _assert_ordinary_query_works(w: SQLWorld) -> None:
    out = w.evaluate(TASK, "SELECT p.name FROM people AS p WHERE p.age > 39")
    assert (out.score, out.solved, out.completed, out.error) == (1.0, True, True, None), out
    assert w.evaluate(COUNT, "SELECT 60").solved


def _assert_bounded(out: Outcome, wall: float) -> None:
    assert isinstance(out, Outcome)
    assert wall < TIMEOUT + 1.0, f"took {wall:.2f} s"
    assert out.score == 0.0 and not out.solved
    if not out.completed:
        assert out.error in ("timeout", "worker_error"), out
    assert len(out.feedback) < 800


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_bounded(world: SQLWorld, db_path: Path, name: str) -> None:
    sql, kinds = ATTACKS[name]
    before = _fingerprint(db_path)
    peak_reset = _reset_peak()
    rss0, peak0 = _rss_mb()
    t0 = time.perf_counter()
    out = world.evaluate(TASK, sql)
    wall = time.perf_counter() - t0
    rss1, peak1 = _rss_mb()
    _assert_bounded(out, wall)
    assert out.error in kinds, out
    assert rss1 - rss0 < 100, f"RSS grew by {rss1 - rss0:.0f} MB"
    if peak_reset:
        assert peak1 - rss0 < 100, f"peak RSS rose {peak1 - rss0:.0f} MB above the start"
    assert _fingerprint(db_path) == before
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["hr.sqlite"]
    _assert_ordinary_query_works(world)


def test_limits_are_options(db_path: Path) -> None:
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=TIMEOUT, max_value_bytes=1000, max_columns=3,
                 max_like_pattern=10, max_query_chars=200, max_result_bytes=10_000,
                 sqlite_limits={"SQLITE_LIMIT_EXPR_DEPTH": 20})
    try:
        assert w.sqlite_limits["SQLITE_LIMIT_LENGTH"] == 1000
        assert w.sqlite_limits["SQLITE_LIMIT_SQL_LENGTH"] == 800
        assert w.sqlite_limits["SQLITE_LIMIT_COLUMN"] == 5  # raised to the schema table's 5 columns
        cases = {
            "SELECT zeroblob(1001)": "sql_error",
            "SELECT 1, 2, 3, 4, 5, 6": "sql_error",
            "SELECT 'a' LIKE '%%%%%%%%%%%'": "sql_error",
            "SELECT " + "+".join(["1"] * 30): "sql_error",
            "SELECT " + " " * 200 + "1": "too_large",
            "SELECT printf('%.*c', 900, 'x') FROM people": "too_large_result",
        }
        for sql, kind in cases.items():
            out = w.evaluate(TASK, sql)
            assert (out.error, out.completed, out.score) == (kind, True, 0.0), (sql, out)
        assert w.evaluate(TASK, GOLD).solved
    finally:
        w.close()
    with pytest.raises(ValueError, match="SQLITE_LIMIT_NOPE"):
        SQLWorld({"hr": db_path}, KEYS, sqlite_limits={"SQLITE_LIMIT_NOPE": 1})
    for bad in ({"isolation": "thread"}, {"workers": 0}, {"max_result_bytes": 0}, {"kill_grace_s": -1}):
        with pytest.raises(ValueError):
            SQLWorld({"hr": db_path}, KEYS, **bad)


def test_length_checked_before_tokenizing(world: SQLWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(sql: str) -> list[str]:
        raise AssertionError("tokenized a query over the length limit")

    monkeypatch.setattr(world_module, "split_statements", boom)
    t0 = time.perf_counter()
    out = world.evaluate(TASK, "SELECT '" + "x" * 30_000_000 + "'")
    assert time.perf_counter() - t0 < 0.5
    assert (out.error, out.completed) == ("too_large", True)
    assert out.feedback.startswith("Too large: the query has 30000009 characters")


def test_hard_kill_respawns_worker(world: SQLWorld) -> None:
    """A single SQLite call that ignores the progress handler: the parent kills the worker."""
    pids = {w.proc.pid for w in world._pool._idle}
    t0 = time.perf_counter()
    out = world.evaluate(TASK, "SELECT printf('%.*c', 2000000000, 'x')")
    wall = time.perf_counter() - t0
    assert (out.error, out.completed, out.score) == ("timeout", False, 0.0)
    assert out.feedback == f"Timeout: the query did not finish within {TIMEOUT:g} s"
    assert TIMEOUT <= wall < TIMEOUT + 1.0
    for pid in pids:  # killed and reaped
        assert not Path(f"/proc/{pid}").exists()
    _assert_ordinary_query_works(world)
    assert world.worker_processes == 1


def test_worker_killed_mid_query_is_an_outcome(world: SQLWorld) -> None:
    _assert_ordinary_query_works(world)
    (worker,) = world._pool._idle  # the one the next evaluation will use
    killer = threading.Timer(0.3, os.kill, (worker.proc.pid, signal.SIGKILL))
    killer.start()
    out = world.evaluate(TASK, "SELECT count(*) FROM people a, people b, people c, people d, people e")
    killer.join()
    assert (out.error, out.completed, out.score) == ("worker_error", False, 0.0), out
    assert out.feedback.startswith("Sandbox error:") and "signal 9" in out.feedback
    _assert_ordinary_query_works(world)


def test_idle_worker_killed_from_outside_is_replaced(world: SQLWorld) -> None:
    for w in list(world._pool._idle):
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.wait()
    _assert_ordinary_query_works(world)


# --------------------------------------------------------------------------- broken workers

FAKE_WORKERS = {
    # sends garbage instead of a frame
    "garbage": "out.write(b'\\x07not a frame at all' * 10); out.flush(); time.sleep(30)",
    # an empty frame
    "empty_frame": "out.write(struct.pack('<Q', 0)); out.flush(); time.sleep(30)",
    # a header announcing a terabyte
    "huge_header": "out.write(struct.pack('<Q', 1 << 40)); out.flush(); time.sleep(30)",
    # a pickle that would call os.system if the parent unpickled it naively
    "pickle_global": ("p = pickle.dumps(('ok', 1, [(Evil(),)]))\n"
                      "    out.write(struct.pack('<Q', len(p)) + p); out.flush(); time.sleep(30)"),
    # a well-formed pickle of the wrong shape
    "wrong_shape": ("p = pickle.dumps(('ok', 2, [(1, 2), [2, 3]]))\n"
                    "    out.write(struct.pack('<Q', len(p)) + p); out.flush(); time.sleep(30)"),
    # exits on the first request
    "exits": "sys.exit(3)",
    # closes its output and keeps running
    "closes": "os.close(1); time.sleep(30)",
    # never answers
    "silent": "time.sleep(30)",
}


def _fake_worker(tmp_path: Path, behaviour: str, *, ready: bool = True) -> Path:
    script = tmp_path / "fake_worker.py"
    script.write_text(textwrap.dedent("""\
        import os, pickle, struct, sys, time
        class Evil:
            def __reduce__(self):
                return (os.system, ("touch {canary}",))
        inp, out = sys.stdin.buffer, sys.stdout.buffer
        def read_frame():
            n = struct.unpack('<Q', inp.read(8))[0]
            return inp.read(n)
        read_frame()
        if {ready}:
            p = pickle.dumps(('ready',))
            out.write(struct.pack('<Q', len(p)) + p); out.flush()
        else:
            sys.exit(1)
        read_frame()
        if True:
            {behaviour}
        """).format(canary=tmp_path / "canary", ready=ready, behaviour=behaviour))
    return script


@pytest.mark.parametrize("behaviour", list(FAKE_WORKERS))
def test_broken_worker_is_an_outcome(db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     behaviour: str) -> None:
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=0.5)
    try:
        assert w.evaluate(TASK, GOLD).solved  # reference cached with the real worker
        w._pool.close()
        w._pool = None
        monkeypatch.setattr(world_module, "_WORKER_SCRIPT", str(_fake_worker(tmp_path, FAKE_WORKERS[behaviour])))
        t0 = time.perf_counter()
        out = w.evaluate(TASK, GOLD)
        wall = time.perf_counter() - t0
        assert wall < 0.5 + 1.0
        expected = "timeout" if behaviour == "silent" else "worker_error"
        assert (out.error, out.completed, out.score, out.solved) == (expected, False, 0.0, False), out
        assert not (tmp_path / "canary").exists()
        assert w.worker_processes == 0  # the broken worker was killed
        monkeypatch.setattr(world_module, "_WORKER_SCRIPT", REAL_WORKER)
        assert w.evaluate(TASK, GOLD).solved  # a real worker again
    finally:
        w.close()


def test_worker_that_cannot_start(db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_module, "_WORKER_SCRIPT", str(_fake_worker(tmp_path, "pass", ready=False)))
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=0.5)
    try:
        with pytest.raises(RuntimeError, match="worker_error"):  # the gold cannot be computed
            w.evaluate(TASK, GOLD)
    finally:
        w.close()

    def no_processes(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(world_module, "_WORKER_SCRIPT", REAL_WORKER)
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=0.5)
    try:
        assert w.evaluate(TASK, GOLD).solved
        w._pool.close()
        w._pool = None
        monkeypatch.setattr(world_module.subprocess, "Popen", no_processes)
        out = w.evaluate(TASK, GOLD)
        assert (out.error, out.completed) == ("worker_error", False)
        assert "Resource temporarily unavailable" in out.feedback
    finally:
        w.close()


def test_reply_unpickler_refuses_globals() -> None:
    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())

    with pytest.raises(pickle.UnpicklingError):
        world_module._safe_loads(pickle.dumps(Evil()))
    assert world_module._safe_loads(pickle.dumps([(1, 2.5, "a", b"b", None)])) == [(1, 2.5, "a", b"b", None)]


# --------------------------------------------------------------------------- lifecycle


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_workers_start_lazily_and_close(db_path: Path) -> None:
    w = SQLWorld({"hr": db_path}, KEYS)
    assert w.worker_processes == 0
    assert w.evaluate(TASK, GOLD).solved
    assert w.worker_processes == 1
    pid = w._pool._idle[0].proc.pid
    assert _alive(pid)
    w.close()
    assert w.worker_processes == 0 and not _alive(pid)
    w.close()  # idempotent


def test_garbage_collection_stops_workers(db_path: Path) -> None:
    w = SQLWorld({"hr": db_path}, KEYS)
    assert w.evaluate(TASK, GOLD).solved
    pid = w._pool._idle[0].proc.pid
    del w
    import gc

    gc.collect()
    assert not _alive(pid)


def test_pickle_round_trip(db_path: Path) -> None:
    w = SQLWorld({"hr": db_path}, KEYS, timeout_s=0.7, max_columns=50)
    try:
        assert w.evaluate(TASK, GOLD).solved  # a worker is running
        copy = pickle.loads(pickle.dumps(w))
        assert copy.worker_processes == 0  # workers are never pickled; the copy starts its own
        assert (copy.timeout_s, copy.sqlite_limits, copy.env_ids) == (0.7, w.sqlite_limits, ("hr",))
        out = copy.evaluate(TASK, "SELECT name FROM people WHERE age > 39")
        assert out.solved and copy.worker_processes == 1
        copy.close()
        assert w.evaluate(TASK, GOLD).solved  # the original is unaffected
        cached = pickle.loads(pickle.dumps(CachedWorld(w)))  # as the experiment runner ships it
        assert cached.evaluate(TASK, GOLD).solved
        cached.world.close()
    finally:
        w.close()


def test_workers_stop_when_the_interpreter_exits(db_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    code = textwrap.dedent(f"""
        import os, signal, sys, types
        # import the world without the packages' __init__ (which load the whole library: seconds)
        for name in ("cfjax.domains", "cfjax.domains.sql"):
            sys.modules[name] = types.ModuleType(name)
            sys.modules[name].__path__ = [os.path.join({str(root)!r}, *name.split("."))]
        from cfjax.domains.sql.world import SQLWorld
        from cfjax.types import AnswerKey, Task
        w = SQLWorld({{"hr": {str(db_path)!r}}}, {{"t": AnswerKey("t", "SELECT 1")}})
        assert w.evaluate(Task("t", "q", "hr", ""), "SELECT 1").solved
        print(w._pool._idle[0].proc.pid, flush=True)
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        """)
    procs = {how: subprocess.Popen([sys.executable, "-c", code, how], stdout=subprocess.PIPE, text=True, cwd=root)
             for how in ("exit", "kill")}
    for how, proc in procs.items():
        stdout, _ = proc.communicate(timeout=120)
        pid = int(stdout.split()[0])
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), how


def test_threads_share_a_bounded_pool(db_path: Path) -> None:
    w = SQLWorld({"hr": db_path}, KEYS, workers=2)
    try:
        results: list[bool] = []

        def run() -> None:
            for _ in range(20):
                results.append(w.evaluate(TASK, "SELECT name FROM people WHERE age >= 40").solved)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [True] * 80
        assert 1 <= w.worker_processes <= 2
    finally:
        w.close()


def test_ordinary_outcomes_identical_in_both_isolations(suite) -> None:
    """Every built-in task's gold and its distractor variants: the same outcome either way."""
    from cfjax.domains.sql import edits as se

    inproc, sub = suite.world(isolation="inprocess"), suite.world()
    try:
        n = 0
        for task in suite.tasks[::6]:
            gold = suite.keys[task.task_id].gold
            variants = [gold] + [se.replace_unit(gold, i, t) for i, t in se.distractor_edits(gold)[:3]]
            for sql in variants:
                a, b = inproc.evaluate(task, sql), sub.evaluate(task, sql)
                assert (a.score, a.solved, a.completed, a.feedback, a.error) == (
                    b.score, b.solved, b.completed, b.feedback, b.error), sql
                n += 1
        assert n > 60
    finally:
        inproc.close()
        sub.close()

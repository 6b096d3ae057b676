"""Tests for the anti-persistence outcome log (papers/anti-persistence.md App. B.5),
including a real SIGKILL crash test of the append path."""

from __future__ import annotations

import inspect
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cfjax.antipersist.outcome_log as ol
from cfjax.antipersist.outcome_log import (
    FIELDS,
    MODES,
    FrozenLogError,
    LogCapacityError,
    OutcomeArrays,
    OutcomeEntry,
    OutcomeLog,
    OutcomeLogError,
    OutcomeLogWarning,
    cost_adjusted_reward,
    next_capacity,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")


def _attempt(i: int, dim: int) -> dict:
    """Deterministic arguments of :meth:`OutcomeLog.record` for the i-th attempt."""
    import math

    return {
        "task_id": f"task-{i}",
        "task_type": ("alfworld", "webshop", "scienceworld")[i % 3],
        "instruction": f"instruction {i}: " + "\u00e9x" * (i % 400),  # sometimes > 500 chars
        "embedding": [math.sin(0.37 * i + 0.011 * j) for j in range(dim)],
        "mode": ("none", "imitation", "strategic", "corrective")[i % 4],
        "success": i % 3 != 1,
        "kappa": i % 2,
        "update_index": i + 1,
    }


def _expected(i: int, dim: int) -> OutcomeEntry:
    a = _attempt(i, dim)
    return OutcomeEntry.make(
        embedding=a["embedding"], mode=a["mode"], y=a["success"], kappa=a["kappa"],
        task_type=a["task_type"], task_id=a["task_id"], instruction=a["instruction"],
    )


def _load_quiet(path: Path, **kw: Any) -> tuple[OutcomeLog, list[str]]:
    """Load, returning the malformed-line warnings (and failing on any other warning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = OutcomeLog.load(path, **kw)
    for w in caught:
        assert issubclass(w.category, OutcomeLogWarning), w
    return log, [str(w.message) for w in caught]


# --------------------------------------------------------------------------- #
# schema                                                                       #
# --------------------------------------------------------------------------- #


def test_schema_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    log = OutcomeLog(p)
    a = _attempt(3, 8)
    assert log.record(**a) == "logged"
    e = log.entries[0]
    assert e == _expected(3, 8)
    # exactly the seven fields, in order, with JSON types
    line = p.read_text(encoding="utf-8")
    assert line.endswith("\n") and line.count("\n") == 1
    obj = json.loads(line)
    assert tuple(obj) == FIELDS
    assert obj == {
        "embedding": a["embedding"], "mode": a["mode"], "reward": 1.0 - 0.05 * a["kappa"],
        "raw_success": a["success"], "task_type": a["task_type"], "task_id": "task-3",
        "instruction": a["instruction"],
    }
    assert isinstance(obj["raw_success"], bool) and isinstance(obj["task_id"], str)
    # exact float round trip, also from float32 input
    v32 = np.linspace(-1, 1, 8, dtype=np.float32) / 3
    e32 = OutcomeEntry.make(embedding=v32, mode="corrective", y=0, kappa=1, task_type="t", task_id="x", instruction="")
    assert OutcomeEntry.from_json(json.loads(json.dumps(e32.to_json()))) == e32
    assert np.array_equal(np.asarray(e32.embedding, np.float32), v32)
    assert e32.mode_index == 3 and e32.dim == 8 and hash(e32) == hash(OutcomeEntry(**e32.to_json()))
    log2, warned = _load_quiet(p)
    assert log2.entries == [e] and not warned


def test_entry_validation() -> None:
    ok: dict[str, Any] = dict(embedding=[0.1, 0.2], mode="none", reward=0.5, raw_success=True,
                              task_type="alfworld", task_id="7", instruction="go")
    OutcomeEntry(**ok)
    bad = [
        (dict(mode="reflective"), ValueError, "unknown mode"),
        (dict(mode=None), TypeError, "mode"),
        (dict(embedding=[0.1, float("nan")]), ValueError, "not finite"),
        (dict(embedding=[float("inf")]), ValueError, "not finite"),
        (dict(embedding=[]), ValueError, "empty"),
        (dict(embedding="0.1,0.2"), TypeError, "embedding"),
        (dict(embedding=[True, 0.2]), TypeError, "embedding"),
        (dict(embedding=np.zeros((2, 2))), TypeError, "1-D"),
        (dict(reward=1.5), ValueError, "use OutcomeEntry.make"),
        (dict(reward=float("nan")), ValueError, "finite"),
        (dict(reward="1"), TypeError, "reward"),
        (dict(raw_success=1), TypeError, "raw_success"),
        (dict(task_id=7), TypeError, "task_id"),
        (dict(task_id=""), ValueError, "task_id"),
        (dict(task_type=""), ValueError, "task_type"),
        (dict(instruction="x" * 501), ValueError, "501 characters"),
        (dict(instruction="bad \ud800"), ValueError, "UTF-8"),
    ]
    for change, exc, msg in bad:
        with pytest.raises(exc, match=msg):
            OutcomeEntry(**{**ok, **change})
    with pytest.raises(Exception):
        OutcomeEntry(**ok).mode = "strategic"  # type: ignore[misc]  # frozen


def test_reward_clipping_and_truncation() -> None:
    assert cost_adjusted_reward(True, 0) == 1.0
    assert cost_adjusted_reward(1, 1) == pytest.approx(0.95)
    assert cost_adjusted_reward(False, 1) == pytest.approx(-0.05)
    assert cost_adjusted_reward(0, 100) == -1.0  # clipped below
    assert cost_adjusted_reward(1, 0, lam=0.0) == 1.0
    assert cost_adjusted_reward(1, 3, lam=1.0) == -1.0
    assert cost_adjusted_reward(np.bool_(True), np.int64(2), 0.25) == 0.5
    for args, exc in [((2, 0), ValueError), ((0.5, 0), ValueError), ((1, -1), ValueError), ((1, 1.0), TypeError),
                      ((1, True), TypeError), ((1, 1, -0.1), ValueError), ((1, 1, float("inf")), ValueError)]:
        with pytest.raises(exc):
            cost_adjusted_reward(*args)
    e = OutcomeEntry.make(embedding=[1.0], mode="strategic", y=0, kappa=50, task_type="t", task_id="i",
                          instruction="\u00e9" * 600, lam=0.05)
    assert e.reward == -1.0 and e.raw_success is False
    assert e.instruction == "\u00e9" * 500  # characters, not bytes


def test_one_reward_definition_the_kernel_restates_it() -> None:
    """The host-side reward is the one the log stores; the bandit kernel's in-kernel restatement
    (jnp) and its NumPy twin agree with it, and the default λ is the same everywhere."""
    from cfjax.kernels import bandit as bk
    from cfjax.kernels.reference import bandit_reward_reference

    assert ol.DEFAULT_LAMBDA == bk.BanditConfig().lam
    for y in (0, 1):
        for kappa in (0, 1, 2, 30):
            for lam in (0.0, 0.05, 0.5):
                r = cost_adjusted_reward(y, kappa, lam)
                assert float(bk.bandit_reward(float(y), float(kappa), lam)) == pytest.approx(r, abs=1e-6)
                assert float(bandit_reward_reference(y, kappa, lam)) == pytest.approx(r, abs=1e-12)


def test_the_protocol_logs_the_observable_task_type(tmp_path: Path) -> None:
    """task_type holds Task.domain (observable), never an answer-key family; the column format is unchanged."""
    from cfjax.types import Task

    task = Task("sql/hr/x/0", "q", "hr", "schema", {"question": "q"}, "sql")
    log = OutcomeLog(tmp_path / "l.jsonl")
    assert log.record(task.task_id, task.domain, task.question, [1.0, 0.0], "none", True, 0, update_index=1) == "logged"
    line = json.loads((tmp_path / "l.jsonl").read_text())
    assert list(line) == list(FIELDS) and line["task_type"] == "sql"


# --------------------------------------------------------------------------- #
# update protocol                                                              #
# --------------------------------------------------------------------------- #


def test_three_skip_rules(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    log = OutcomeLog(p)
    a = _attempt(0, 4)
    assert log.record(**{**a, "update_index": 0}) == "initial_update"
    assert log.record(**{**a, "update_index": 0, "embedding": None, "infrastructure_failure": True}) == "initial_update"
    assert log.record(**{**a, "embedding": None}) == "embedding_failure"
    assert log.record(**{**a, "embedding": []}) == "embedding_failure"
    assert log.record(**{**a, "embedding": [0.1, float("nan"), 0.0, 0.0]}) == "embedding_failure"
    assert log.record(**{**a, "embedding": None, "infrastructure_failure": True}) == "embedding_failure"
    assert log.record(**a, infrastructure_failure=True) == "infrastructure_failure"
    assert len(log) == 0 and not p.exists()  # skipped attempts never touch the file
    assert log.skipped == {"initial_update": 2, "embedding_failure": 4, "infrastructure_failure": 1}
    assert log.record(**a) == "logged" and len(log) == 1
    # invalid arguments raise even when a skip rule would apply
    with pytest.raises(ValueError, match="unknown mode"):
        log.record(**{**a, "update_index": 0, "mode": "reflective"})
    with pytest.raises(TypeError, match="embedding"):
        log.record(**{**a, "embedding": "not a vector"})
    with pytest.raises(TypeError, match="success"):
        log.record(**{**a, "success": 1})
    with pytest.raises(ValueError, match="update_index"):
        log.record(**{**a, "update_index": -1})
    with pytest.raises(ValueError, match="4-dim"):  # dimension must match the log's
        log.record(**{**a, "embedding": [1.0, 2.0]})
    assert len(log) == 1 and log.skipped["initial_update"] == 2
    assert OutcomeLog.load(p).entries == log.entries


def test_reload_in_file_order_with_consecutive_timestamps(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    empty = OutcomeLog.load(p)
    assert len(empty) == 0 and empty.timestamps == [] and empty.dim is None and not p.exists()
    log = OutcomeLog(p, durability="flush")
    for i in range(5):
        assert log.record(**_attempt(i, 6)) == "logged"
    assert log.timestamps == [0, 1, 2, 3, 4]
    re, warned = _load_quiet(p)
    assert not warned and re.entries == [_expected(i, 6) for i in range(5)] and re.timestamps == list(range(5))
    # appending to a reloaded log continues the timestamps; a second reload agrees
    assert re.append(_expected(5, 6)) == 5
    assert re.record(**_attempt(6, 6)) == "logged"
    assert re.timestamps == list(range(7))
    re2, _ = _load_quiet(p)
    assert re2.entries == [_expected(i, 6) for i in range(7)] and re2.timestamps == list(range(7))
    assert len(p.read_bytes().splitlines()) == 7


def test_malformed_lines_are_skipped_with_warnings(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    good = [_expected(i, 3).to_json() for i in range(4)]

    def with_(i: int, **kw: Any) -> str:
        return json.dumps({**good[i], **kw})

    missing = dict(good[0])
    del missing["reward"]
    lines = [
        json.dumps(good[0]),  # 1 ok
        "this is not json",  # 2 garbage
        with_(0, reward="high"),  # 3 wrong type
        with_(0, task_id=7),  # 4 int task id
        json.dumps(missing),  # 5 missing field
        json.dumps(good[1]),  # 6 ok
        with_(0, raw_success=1),  # 7 wrong type
        with_(0, embedding=[0.1, None, 0.3]),  # 8 wrong element type
        with_(0, mode="reflective"),  # 9 unknown mode
        with_(0, reward=1.5),  # 10 out of range (never clipped on read)
        with_(0, extra=1),  # 11 unexpected field
        "",  # 12 blank: ignored silently
        "[1, 2, 3]",  # 13 not an object
        json.dumps(good[2]),  # 14 ok
        with_(0, reward=float("nan")),  # 15 NaN literal
    ]
    raw = ("\n".join(lines) + "\n").encode() + b"\xff\xfe\n" + json.dumps(good[3]).encode() + b"\n"
    torn = json.dumps(_expected(4, 3).to_json()).encode()[:-9]
    p.write_bytes(raw + torn)  # 16 invalid UTF-8, 17 ok, 18 torn last line
    log, warned = _load_quiet(p)
    assert log.entries == [_expected(i, 3) for i in range(4)]
    assert log.timestamps == [0, 1, 2, 3]
    bad = [2, 3, 4, 5, 7, 8, 9, 10, 11, 13, 15, 16, 18]
    assert log.malformed_lines == bad and log.n_malformed == len(bad)
    assert len(warned) == len(bad)
    for n, msg in zip(bad, warned):
        assert f"line {n}:" in msg and str(p) in msg
    assert "torn last line" in warned[-1]
    assert "missing ['reward']" in warned[3] and "unexpected ['extra']" in warned[8]
    # appending after a torn tail starts a new line; the torn line stays skipped
    before = p.read_bytes()
    assert log.record(**_attempt(9, 3)) == "logged"
    assert p.read_bytes().startswith(before + b"\n")
    log2, warned2 = _load_quiet(p)
    assert log2.entries == [_expected(i, 3) for i in (0, 1, 2, 3, 9)] and log2.timestamps == list(range(5))
    assert log2.malformed_lines == bad and "torn last line" not in warned2[-1]


def test_deep_and_huge_lines_are_malformed_lines_not_a_crash(tmp_path: Path, monkeypatch) -> None:
    """One line of 100,000 ``[`` (or a line over the byte cap) no longer makes the whole log unloadable."""
    p = tmp_path / "log.jsonl"
    log = OutcomeLog(p)
    log.record(**_attempt(0, 3))
    with open(p, "ab") as f:
        f.write(b"[" * 100_000 + b"\n")  # line 2: RecursionError before
        f.write(b'{"embedding": [' + b"0.5, " * 40_000 + b"0.5]}\n")  # line 3: over the (patched) cap
    _load_quiet(p)[0].record(**_attempt(1, 3))
    monkeypatch.setattr(ol, "MAX_LINE_BYTES", 150_000)
    log, warned = _load_quiet(p)
    assert log.entries == [_expected(0, 3), _expected(1, 3)]
    assert log.malformed_lines == [2, 3]
    assert "JSONTooDeepError" in warned[0] and "nested deeper than" in warned[0]
    assert "longer than 150000 bytes" in warned[1]


def test_open_removes_stale_temps_unless_frozen(tmp_path: Path) -> None:
    p = tmp_path / "row.outcomes.jsonl"
    OutcomeLog(p).record(**_attempt(0, 3))
    stale = tmp_path / ".row.outcomes.jsonl.77.0123456789abcdef.tmp"
    fresh = tmp_path / ".row.outcomes.jsonl.78.0123456789abcdef.tmp"
    other = tmp_path / ".notes.jsonl.77.0123456789abcdef.tmp"
    for t in (stale, fresh, other):
        t.write_bytes(b"x")
    old = time.time() - 3600
    for t in (stale, other):
        os.utime(t, (old, old))
    OutcomeLog(p, frozen=True)
    assert stale.exists()  # a frozen (evaluation) open changes nothing on disk
    assert len(OutcomeLog(p)) == 1
    assert not stale.exists() and fresh.exists() and other.exists()


def test_frozen_log_raises_and_leaves_file_byte_identical(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    log = OutcomeLog(p)
    for i in range(3):
        log.record(**_attempt(i, 4))
    before, mtime = p.read_bytes(), p.stat().st_mtime_ns
    log.freeze()
    assert log.frozen
    with pytest.raises(FrozenLogError):
        log.record(**_attempt(3, 4))
    with pytest.raises(FrozenLogError):  # even an attempt that would be skipped
        log.record(**{**_attempt(3, 4), "update_index": 0})
    with pytest.raises(FrozenLogError):
        log.append(_expected(3, 4))
    assert len(log) == 3 and log.skipped == {r: 0 for r in ol.SKIP_REASONS}
    ev = OutcomeLog.load(p, frozen=True)  # an evaluation process
    assert ev.entries == log.entries
    ev.as_arrays(4, 4)
    with pytest.raises(FrozenLogError):
        ev.record(**_attempt(3, 4))
    assert p.read_bytes() == before and p.stat().st_mtime_ns == mtime
    missing = OutcomeLog(tmp_path / "none.jsonl", frozen=True)
    with pytest.raises(FrozenLogError):
        missing.record(**_attempt(0, 4))
    assert not (tmp_path / "none.jsonl").exists()


def test_durability_levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="durability"):
        OutcomeLog(tmp_path / "x.jsonl", durability="none")
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    fl = OutcomeLog(tmp_path / "flush.jsonl", durability="flush")
    for i in range(3):
        fl.record(**_attempt(i, 2))
    assert calls == []
    fs = OutcomeLog(tmp_path / "fsync.jsonl")
    assert fs.durability == "fsync"
    fs.record(**_attempt(0, 2))
    assert len(calls) == 2  # file + directory (the append created the file)
    fs.record(**_attempt(1, 2))
    fs.record(**_attempt(2, 2))
    assert len(calls) == 4  # one fsync per later append
    assert (tmp_path / "flush.jsonl").read_bytes() == (tmp_path / "fsync.jsonl").read_bytes()


def test_failed_append_poisons_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "log.jsonl"
    log = OutcomeLog(p)
    log.record(**_attempt(0, 2))

    def boom(*a: Any, **k: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ol, "append_jsonl", boom)
    with pytest.raises(OSError):
        log.record(**_attempt(1, 2))
    monkeypatch.undo()
    with pytest.raises(OutcomeLogError, match="reopen"):
        log.record(**_attempt(1, 2))
    assert len(log) == 1
    re = OutcomeLog.load(p)
    assert re.record(**_attempt(1, 2)) == "logged" and len(re) == 2


# --------------------------------------------------------------------------- #
# kernel view                                                                  #
# --------------------------------------------------------------------------- #


def test_as_arrays_layout(tmp_path: Path) -> None:
    log = OutcomeLog(tmp_path / "log.jsonl", durability="flush")
    arr = log.as_arrays(4, 3)
    assert not arr.valid.any() and (arr.mode == -1).all()
    for i in range(5):
        log.record(**_attempt(i, 3))
    arr = log.as_arrays(8, 3)
    assert isinstance(arr, OutcomeArrays)
    emb, mode, reward, t, valid = arr
    assert emb.shape == (8, 3) and emb.dtype == np.float32
    assert mode.shape == reward.shape == t.shape == valid.shape == (8,)
    assert mode.dtype == np.int32 and reward.dtype == np.float32 and t.dtype == np.int32 and valid.dtype == np.bool_
    want = [_expected(i, 3) for i in range(5)]
    assert np.array_equal(emb[:5], np.array([e.embedding for e in want], np.float32))
    assert mode[:5].tolist() == [MODES.index(e.mode) for e in want] == [0, 1, 2, 3, 0]
    assert np.array_equal(reward[:5], np.array([e.reward for e in want], np.float32))
    assert t.tolist() == [0, 1, 2, 3, 4, -1, -1, -1]
    assert valid.tolist() == [True] * 5 + [False] * 3
    assert not emb[5:].any() and (mode[5:] == -1).all() and not reward[5:].any()
    assert log.as_arrays(5, 3).valid.all()
    with pytest.raises(LogCapacityError, match="next_capacity"):
        log.as_arrays(4, 3)
    with pytest.raises(ValueError, match="expected 5"):
        log.as_arrays(8, 5)
    assert [next_capacity(n) for n in (0, 1, 64, 65, 1000)] == [64, 64, 64, 128, 1024]
    assert next_capacity(3, minimum=1) == 4 and next_capacity(1, minimum=1) == 1


# --------------------------------------------------------------------------- #
# real crash test: SIGKILL an fsync-ing appender                               #
# --------------------------------------------------------------------------- #

_DIM = 1024  # ~20 KB per line: several pages, so a kill can tear a write

_APPENDER = textwrap.dedent(inspect.getsource(_attempt)) + textwrap.dedent(
    """
    import sys
    from cfjax.antipersist.outcome_log import OutcomeLog

    path, dim = sys.argv[1], int(sys.argv[2])
    log = OutcomeLog(path, durability="fsync")
    i = len(log)
    print("ready", i, flush=True)
    while True:
        assert log.record(**_attempt(i, dim)) == "logged"
        print(i, flush=True)  # acknowledged: record() returned
        i += 1
    """
)


@posix_only
def test_sigkill_during_fsync_appends_keeps_a_prefix(tmp_path: Path) -> None:
    p = tmp_path / "outcomes.jsonl"
    rng = random.Random(20241105)
    expected = {}
    n_prev, torn_rounds = 0, 0
    for rnd in range(6):
        before = p.read_bytes() if p.exists() else b""
        proc = subprocess.Popen([sys.executable, "-c", _APPENDER, str(p), str(_DIM)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout is not None and proc.stderr is not None
            head = proc.stdout.readline().split()
            assert head and head[0] == b"ready", proc.stderr.read().decode()
            assert int(head[1]) == n_prev  # the writer resumed from the reloaded log
            acked = []
            for _ in range(rng.randint(0, 25)):  # kill at a random point of the append loop
                line = proc.stdout.readline()
                assert line, "writer exited early"
                acked.append(int(line))
            time.sleep(rng.uniform(0.0, 0.02))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            acked += [int(x) for x in proc.stdout.read().split()]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        assert acked == list(range(n_prev, n_prev + len(acked)))

        after = p.read_bytes() if p.exists() else b""
        assert after.startswith(before)  # nothing written before this run was altered
        log, warned = _load_quiet(p)
        n = len(log)
        last_acked = acked[-1] if acked else n_prev - 1
        # every acknowledged record survived; at most the one in flight is missing or extra
        assert last_acked + 1 <= n <= last_acked + 2, (rnd, last_acked, n)
        for i in range(n):
            if i not in expected:
                expected[i] = _expected(i, _DIM)
        assert log.entries == [expected[i] for i in range(n)]  # records 0..n-1, in order, unaltered
        assert log.timestamps == list(range(n))
        assert log.n_malformed <= rnd + 1  # at most one torn line per crash
        torn_rounds += bool(after) and not after.endswith(b"\n")
        n_prev = n

    # a later append after the crashes still yields a loadable log
    log, _ = _load_quiet(p)
    assert log.record(**_attempt(n_prev, _DIM)) == "logged"
    final, warned = _load_quiet(p)
    assert final.entries == [expected[i] for i in range(n_prev)] + [_expected(n_prev, _DIM)]
    assert final.timestamps == list(range(n_prev + 1))
    assert len(warned) == final.n_malformed <= 6 and n_prev > 0


def test_embedding_fast_path_validates_like_the_general_path() -> None:
    """The protocol hands the log float32 arrays and lists of floats; the fast path keeps every check."""
    from cfjax.antipersist.outcome_entry import _coerce_embedding

    v = np.array([0.1, -0.25, 3.0], np.float32)
    assert _coerce_embedding(v) == tuple(v.tolist()) and all(type(x) is float for x in _coerce_embedding(v))
    assert _coerce_embedding([1.0, 2.0]) == (1.0, 2.0) and _coerce_embedding((1.0,)) == (1.0,)
    assert _coerce_embedding([1e308, 1e308]) == (1e308, 1e308)  # the sum overflows, the terms are finite
    for bad in ([1.0, float("inf")], [float("nan"), 1.0], np.array([1.0, np.inf]), [1.0, float("-inf"), float("inf")]):
        with pytest.raises(ValueError, match="not finite"):
            _coerce_embedding(bad)
    for bad in ([1.0, True], [1.0, "2"], np.array([[1.0]])):
        with pytest.raises(TypeError):
            _coerce_embedding(bad)
    with pytest.raises(ValueError, match="empty"):
        _coerce_embedding([])

"""The on-disk response cache: keys, reruns without requests, the temperature rule, concurrent writers, corruption."""

from __future__ import annotations

import pickle
import sqlite3
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cfjax.llm.base import DraftRequest, TextBackbone, Usage
from cfjax.llm.cache import SCHEMA_VERSION, ResponseCache, canonical_key
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.openai_client import OpenAIBackbone, OpenAIConfig
from cfjax.types import Completion, Task

from tests.llm_server import FakeLLMServer, FaultPlan  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
IDENT = {"backend": "openai", "model": "m", "temperature": 0.0, "seed": 0, "max_tokens": 64}


def echo(prompt: str) -> str:
    return f"ACTION:\n```sql\nSELECT '{prompt[-12:]}'\n```"


def tasks(n: int) -> list[Task]:
    return [Task(f"t{i}", "sql", f"question {i}?", "CREATE TABLE t(x INTEGER);") for i in range(n)]


def cfg(srv: FakeLLMServer, path: Path, **kw) -> OpenAIConfig:
    base = dict(base_url=srv.base_url, model="m", backoff_s=0.001, timeout_s=5.0, seed=3, cache_path=str(path))
    base.update(kw)
    return OpenAIConfig(**base)


def test_key_is_canonical_and_covers_every_field():
    k = canonical_key(IDENT, "p")
    assert k == canonical_key(dict(reversed(list(IDENT.items()))), "p") and len(k) == 64
    assert len({k, canonical_key(IDENT, "p "), canonical_key({**IDENT, "seed": 1}, "p"),
                canonical_key({**IDENT, "model": "n"}, "p"), canonical_key({**IDENT, "temperature": 0.5}, "p"),
                canonical_key({**IDENT, "max_tokens": 65}, "p")}) == 6


def test_rerun_with_the_cache_sends_no_request_and_keeps_the_usage(tmp_path):
    path = tmp_path / "c.sqlite"
    ts = tasks(6)
    with FakeLLMServer(echo) as srv:
        bb = OpenAIBackbone(cfg(srv, path))
        first = [bb.call(DRAFT_ACTION, DraftRequest(t)) for t in ts]
        assert len(srv.chat_requests) == 6
        assert bb.cache is not None and bb.cache.stats().as_dict() == \
            {"hits": 0, "misses": 6, "stores": 6, "corrupt": 0, "errors": 0, "hit_rate": 0.0}
        bb.close()
        srv.responder = lambda p: "the server must not be asked"  # a rerun against the same server
        bb2 = OpenAIBackbone(cfg(srv, path))
        again = [bb2.call(DRAFT_ACTION, DraftRequest(t)) for t in ts]
        assert len(srv.chat_requests) == 6
    assert again == first  # same text, same action, same usage (the method's cost is unchanged)
    st = bb2.stats()
    assert (st.calls, st.cached, st.sent, st.ok) == (6, 6, 0, 0)
    assert bb2.cache.stats().hit_rate == 1.0 and len(bb2.cache) == 6
    with FakeLLMServer(echo) as other:  # another server (URL) is another key, whatever the model is called
        bb4 = OpenAIBackbone(cfg(other, path))
        bb4.call(DRAFT_ACTION, DraftRequest(ts[0]))
        assert len(other.chat_requests) == 1
        bb4.close()
    with FakeLLMServer(echo) as srv:  # another seed is another key
        bb3 = OpenAIBackbone(cfg(srv, path, seed=4))
        bb3.call(DRAFT_ACTION, DraftRequest(ts[0]))
        assert len(srv.chat_requests) == 1


def test_sampling_is_not_cached_unless_forced(tmp_path):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer(echo) as srv:
        bb = OpenAIBackbone(cfg(srv, path, temperature=0.7))
        bb._call("X", "p", None)
        bb._call("X", "p", None)
        assert len(srv.chat_requests) == 2 and len(bb.cache) == 0 and bb.stats().cached == 0
        forced = OpenAIBackbone(cfg(srv, path, temperature=0.7, cache_force=True))
        forced._call("X", "p", None)
        forced._call("X", "p", None)
        assert len(srv.chat_requests) == 3 and forced.stats().cached == 1
        # Best-of-N: sample k of one prompt is its own draw (own seed on the wire, own cache entry)
        t = tasks(1)[0]
        for sample in (0, 1, 1, 2):
            forced.call(DRAFT_ACTION, DraftRequest(t, sample=sample))
        seeds = [r.body["seed"] for r in srv.chat_requests[3:]]
        assert len(seeds) == 3 and seeds[0] == 3 and len(set(seeds)) == 3 and forced.stats().cached == 2
        greedy = OpenAIBackbone(cfg(srv, path))  # at temperature 0 every sample is the same reply: one entry
        greedy.call(DRAFT_ACTION, DraftRequest(t, sample=0))
        greedy.call(DRAFT_ACTION, DraftRequest(t, sample=5))
        assert len(srv.chat_requests) == 7 and greedy.stats().cached == 1


def test_failed_calls_are_never_cached(tmp_path):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer(echo, faults=FaultPlan(rate=1.0, kinds=("not_json",))) as srv:
        bb = OpenAIBackbone(cfg(srv, path, max_retries=1))
        assert bb._call("X", "p", None).usage.failed == 1
    assert len(bb.cache) == 0 and bb.cache.stats().stores == 0
    cache = ResponseCache(tmp_path / "d.sqlite")
    assert cache.put("k", Completion("", Usage(3, 0, failed=1))) is False and len(cache) == 0


def test_corrupted_row_is_a_counted_miss_and_is_replaced(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    key = cache.key(IDENT, "p")
    assert cache.put(key, Completion("good", Usage(5, 1)))
    assert cache.put(key, Completion("other", Usage(5, 1))) is False  # INSERT OR IGNORE: the first reply stays
    assert cache.get(key) == Completion("good", Usage(5, 1))
    with sqlite3.connect(tmp_path / "c.sqlite") as raw:
        raw.execute("UPDATE completions SET text = 'tampered' WHERE key = ?", (key,))
    assert cache.get(key) is None
    st = cache.stats()
    assert (st.hits, st.misses, st.corrupt) == (1, 1, 1)
    assert cache.put(key, Completion("fresh", Usage(5, 1))) and cache.get(key) == Completion("fresh", Usage(5, 1))


def test_bad_files_are_refused_with_a_clear_error(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(ValueError, match="junk.sqlite cannot be opened as a response cache: file is not a database"):
        ResponseCache(junk)
    with pytest.raises(ValueError, match="cannot be opened as a response cache"):
        ResponseCache(tmp_path)  # a directory
    other = tmp_path / "v9.sqlite"
    with sqlite3.connect(other) as raw:
        raw.execute("PRAGMA user_version = 9")
    with pytest.raises(ValueError, match=f"schema version 9.*version {SCHEMA_VERSION}"):
        ResponseCache(other)


def test_pickles_as_its_path_and_reopens(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", Completion("t", Usage(1, 2)))
    clone = pickle.loads(pickle.dumps(cache))
    assert clone.path == cache.path and clone.get("k") == Completion("t", Usage(1, 2))


class Toy(TextBackbone):
    """A backbone whose replies count its calls (so a cached reply is visible)."""

    def __init__(self, identity):
        self.identity = identity
        self.n = 0

    def _complete(self, kind, prompt, req):
        self.n += 1
        return Completion(f"reply {self.n}", Usage(1, 1))

    def cache_identity(self):
        return self.identity


def test_cache_identity_contract(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    plain = Toy(None)  # not cacheable (the default of TextBackbone, e.g. the scripted simulator)
    plain.cache = cache
    assert [plain._call("X", "p", None).text for _ in range(2)] == ["reply 1", "reply 2"] and len(cache) == 0
    good = Toy({"backend": "toy", "model": "m", "temperature": 0.0, "seed": None})
    good.cache = cache
    assert [good._call("X", "p", None).text for _ in range(2)] == ["reply 1", "reply 1"] and good.n == 1
    bad = Toy({"backend": "toy", "model": "m", "temperature": 0.0})
    bad.cache = cache
    with pytest.raises(ValueError, match="lacks seed"):
        bad._call("X", "p", None)
    assert Toy(None).cache is None and TextBackbone.cache_force is False  # off unless a cache is set


def test_concurrent_writers_threads_and_two_processes(tmp_path):
    path = tmp_path / "shared.sqlite"
    # 16 threads, overlapping keys, one instance (one connection per thread)
    cache = ResponseCache(path)
    keys = [cache.key(IDENT, f"p{i % 40}") for i in range(400)]

    def work(i: int) -> None:
        k = keys[i]
        cache.put(k, Completion(f"reply {i % 40}", Usage(i % 40, 1)))
        got = cache.get(k)
        assert got == Completion(f"reply {i % 40}", Usage(i % 40, 1))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(work, range(400)))
    assert len(cache) == 40 and cache.stats().stores == 40 and cache.stats().errors == 0

    # two processes writing and reading the same file at once (overlapping keys, 600 puts each)
    script = textwrap.dedent("""
        import sys
        from cfjax.llm.cache import ResponseCache
        from cfjax.types import Completion, Usage
        cache = ResponseCache(sys.argv[1])
        ident = {"backend": "openai", "model": "m", "temperature": 0.0, "seed": 0}
        for i in range(600):
            j = (i * 7 + int(sys.argv[2])) % 300
            key = cache.key(ident, f"q{j}")
            cache.put(key, Completion(f"answer {j}", Usage(j, 2)))
            assert cache.get(key) == Completion(f"answer {j}", Usage(j, 2)), j
        st = cache.stats()
        print(st.stores, st.errors, st.corrupt)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), str(seed)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    counts = [tuple(map(int, out.split())) for out, _ in outs]
    assert all(errors == corrupt == 0 for _, errors, corrupt in counts)
    assert sum(stores for stores, _, _ in counts) == 300  # every key stored exactly once across both processes
    check = ResponseCache(path)
    assert len(check) == 340
    ident = {"backend": "openai", "model": "m", "temperature": 0.0, "seed": 0}
    assert all(check.get(check.key(ident, f"q{j}")) == Completion(f"answer {j}", Usage(j, 2)) for j in range(300))
    assert check.stats().corrupt == 0 and check.stats().hits == 300


def test_a_backbone_with_a_cache_in_a_subprocess_exits_without_close(tmp_path):
    """The client's loop thread is a daemon and the finalizer closes quietly: no hang, no error at exit."""
    path = tmp_path / "c.sqlite"
    script = textwrap.dedent("""
        import sys
        from concurrent.futures import ThreadPoolExecutor
        from cfjax.llm.openai_client import OpenAIBackbone, OpenAIConfig
        bb = OpenAIBackbone(OpenAIConfig(sys.argv[1], "m", seed=3, cache_path=sys.argv[2], timeout_s=10))
        with ThreadPoolExecutor(8) as pool:
            out = list(pool.map(lambda i: bb._call("X", f"prompt {i}", None), range(40)))
        print(sum(c.usage.failed for c in out), bb.stats().ok, bb.cache.stats().stores)
    """)
    with FakeLLMServer(echo) as srv:
        proc = subprocess.run([sys.executable, "-c", script, srv.base_url, str(path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.split() == ["0", "40", "40"]
        sent = len(srv.chat_requests)
        # this process reruns them from the file (same server, so same keys): no request at all
        bb = OpenAIBackbone(OpenAIConfig(srv.base_url, "m", seed=3, cache_path=str(path)))
        assert all(bb._call("X", f"prompt {i}", None).text == echo(f"prompt {i}") for i in range(40))
        assert len(srv.chat_requests) == sent and bb.stats().cached == 40
    assert threading.active_count() < 50


def test_a_locked_database_is_retried_and_other_errors_are_not():
    """Two processes opening one new cache file at once: SQLite may refuse the WAL switch with "database is
    locked" without waiting; the switch is retried (and any other error raised at once)."""
    import sqlite3

    import pytest

    from cfjax.llm.cache import _retry_locked

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "wal"

    assert _retry_locked(flaky, timeout_s=5.0) == "wal" and len(calls) == 3
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        _retry_locked(lambda: (_ for _ in ()).throw(sqlite3.OperationalError("no such table: x")))
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _retry_locked(lambda: (_ for _ in ()).throw(sqlite3.OperationalError("database is locked")), timeout_s=0.05)

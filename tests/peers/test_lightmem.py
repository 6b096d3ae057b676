"""LightMem (cfjax/peers/lightmem/): topic segmentation by adjacent-turn cosine, the short-term flush past
2,000 tokens, the sleep-time update/delete from later neighbours, top-10 recall; parsers, scripted
handlers under the answer-key guard, persistence, and one unit through the OpenAI client."""

from __future__ import annotations

import json

import pytest

from cfjax.llm.prompts import count_tokens
from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.common import EmbeddingIndex
from cfjax.peers.lightmem.calls import (LIGHTMEM_EXTRACT, LIGHTMEM_UPDATE, ExtractRequest, Turn, UpdateRequest,
                                        _parse_extract, _parse_update)
from cfjax.peers.lightmem.memory import LightMemSystem, SensoryBuffer, ShortTermBuffer, topic_boundaries
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

from tests.peers.conftest import openai_system


class _Canned:
    """A backbone answering LIGHTMEM_EXTRACT / LIGHTMEM_UPDATE with fixed texts, recording requests."""

    name = "canned"

    def __init__(self, extract: str = "NONE", update: str = '{"action": "ignore"}') -> None:
        self.replies = {"LIGHTMEM_EXTRACT": extract, "LIGHTMEM_UPDATE": update}
        self.requests: list[tuple[str, object]] = []

    def call(self, kind, req):
        self.requests.append((kind.name, req))
        return kind.parse(self.replies[kind.name], req, Usage(3, 4))


def _task(i: int, q: str | None = None) -> Task:
    return Task(f"t/{i}", q or f"question {i} at least", "env", "schema", {"cues": ("at least",)})


def _turn(task: Task, action: str, feedback: str = "wrong", i: int = 0, final: bool = False) -> Turn:
    return Turn(task, 0, i, Attempt(action, feedback, 1.0 if final else 0.0), final)


def _ctx(bb) -> SystemContext:
    return SystemContext(bb, edits=None, max_attempts=2)  # type: ignore[arg-type]


def test_registered_for_upliftmem_and_compare_and_says_why_not_the_others():
    info = MEMORY_SYSTEMS.get("lightmem")
    assert set(info.runners) == {"upliftmem", "compare"}
    for r in ("countermem", "antipersist"):
        assert "not a row of that paper's tables" in why_not(info, r)


def test_topic_boundaries_on_crafted_similarities():
    # sims[i-1] = cos(turn_i, turn_{i-1}); a topic starts at i when sims < 0.5 → turns 2 and 4
    assert topic_boundaries([0.9, 0.3, 0.6, 0.49], 0.5) == [2, 4]
    assert topic_boundaries([0.9, 0.3, 0.6, 0.49], 0.25) == []
    # upstream's sweep: 0.20 finds nothing (0.22 ≥ 0.20), 0.25 finds turn 4 (0.22 < 0.25) and stops there
    assert topic_boundaries([0.9, 0.3, 0.6, 0.22], 0.5, adaptive=True) == [4]


def test_sensory_buffer_cuts_where_the_hashed_cosine_falls_below_the_threshold():
    a, b = _task(1, "How many members have a phone number on record?"), _task(2, "List every distinct genre of books")
    turns = [_turn(a, "SELECT COUNT(*) FROM members"), _turn(a, "SELECT COUNT(phone) FROM members", i=1),
             _turn(b, "SELECT genre FROM books"), _turn(b, "SELECT DISTINCT genre FROM books", i=1),
             _turn(a, "SELECT COUNT(phone) FROM members WHERE 1", i=2)]
    idx = EmbeddingIndex()
    v = [idx.embed(t.text) for t in turns]
    sims = [float(v[i] @ v[i - 1]) for i in range(1, 5)]
    # the premise, computed with the same encoder: same-task neighbours ≥ 0.5, task switches < 0.5
    assert sims[0] >= 0.5 and sims[1] < 0.5 and sims[2] >= 0.5 and sims[3] < 0.5, sims
    buf = SensoryBuffer(idx.embed, max_tokens=10_000, threshold=0.5)
    assert all(buf.add(t) == [] for t in turns)  # far below its token limit: nothing is cut yet
    segs = buf.drain()
    assert [[turns.index(t) for t in s] for s in segs] == [[0, 1], [2, 3], [4]]


def _sized_turn(task: Task, tokens: int) -> Turn:
    """A turn whose text counts exactly ``tokens`` (each extra word ``w`` is one token)."""
    base = count_tokens(_turn(task, "SELECT 1", "").text)
    t = _turn(task, "SELECT 1", " ".join(["w"] * (tokens - base)))
    assert count_tokens(t.text) == tokens
    return t


def test_short_term_buffer_flushes_exactly_when_the_next_segment_would_pass_2000_tokens():
    stm = ShortTermBuffer(2000)
    s1, s2, s3 = [_sized_turn(_task(1), 1000)], [_sized_turn(_task(2), 1000)], [_sized_turn(_task(3), 30)]
    assert stm.add(s1) == [] and stm.add(s2) == []  # 1000 + 1000 = 2000: not past the threshold
    assert stm.tokens == 2000
    assert stm.add(s3) == [[s1, s2]]  # 2000 + 30 > 2000: the buffer so far is flushed, s3 starts the next
    assert stm.drain() == [[s3]] and stm.tokens == 0


def test_system_extracts_once_the_buffer_passes_the_threshold_and_flushes_the_rest_at_freeze():
    bb = _Canned(extract="LESSON (turn 2): write `a >= 1` instead of `a > 1`.\nEDIT: a > 1 -> a >= 1")
    s = LightMemSystem(_ctx(bb))
    assert isinstance(s, MemorySystem)
    big = [_sized_turn(_task(i), 1000) for i in range(4)]
    # 1000-token turns exceed the 512-token sensory buffer: each new turn closes the previous one as a topic;
    # STM: t0 (1000), t1 (2000), then t2 would make 3000 > 2000 → flush [t0, t1] (one call)
    for i, t in enumerate(big):
        s.update(Experience(t.task, (t.attempt,), False, 0))
        assert len(bb.requests) == (1 if i == 3 else 0)
    req = bb.requests[0][1]
    assert [tuple(x.task.task_id for x in seg) for seg in req.segments] == [("t/0",), ("t/1",)]
    assert s.summary()["entries"] == 1 and s.entries["m0"].source == "t/1"  # turn 2 of that flush is t/1's
    s.freeze()  # force: t3 closes, STM [t2, t3] is extracted (one more entry); then the sleep-time pass:
    # the two entries have the same (canned) text, cosine 1.0 ≥ 0.9 → one LIGHTMEM_UPDATE for the older (ignored)
    assert [k for k, _ in bb.requests] == ["LIGHTMEM_EXTRACT", "LIGHTMEM_EXTRACT", "LIGHTMEM_UPDATE"]
    assert bb.requests[2][1].target_id == "m0" and len(s) == 2
    assert s.ctx.ledger.total.llm_calls == 3 and s.summary()["pending_turns"] == 0
    with pytest.raises(FrozenMemoryError):
        s.update(Experience(_task(9), (), False, 0))


def _store(update: str) -> tuple[LightMemSystem, _Canned]:
    bb = _Canned(update=update)
    s = LightMemSystem(_ctx(bb))
    s._add_entry("When the task says 'at least', write `a >= 1`.\nEDIT: a > 1 -> a >= 1", "t/1")       # m0
    s._add_entry("When the task says 'at least', write `a >= 1`.\nEDIT: a > 1 -> a >= 1", "t/2")       # m1
    s._add_entry("Use LEFT JOIN to keep customers without orders.\nEDIT: JOIN -> LEFT JOIN", "t/3")    # m2
    return s, bb


def test_sleep_sends_each_entry_with_its_later_high_similarity_neighbours_and_deletes_per_reply():
    s, bb = _store('{"action": "delete"}')
    q = s.update_queues()
    # m1's queue (entries not later than it, itself dropped) holds m0 at cosine 1.0 (identical text) ≥ 0.9;
    # m2 lists m0 and m1 below 0.9; m0 has nobody earlier. So only m0 has a candidate source: m1.
    assert [h for h, _ in q["m1"]] == ["m0"] and q["m1"][0][1] == pytest.approx(1.0)
    assert q["m0"] == [] and all(sc < 0.9 for _, sc in q["m2"])
    s.sleep()
    assert [(k, r.target_id, r.candidates) for k, r in bb.requests] == [("LIGHTMEM_UPDATE", "m0", (s.entries["m1"].text,))]
    assert sorted(s.entries) == ["m1", "m2"] and "m0" not in s.index and s.counts["deleted"] == 1
    s.sleep()  # nothing new since: no further call
    assert len(bb.requests) == 1


def test_sleep_update_rewrites_the_text_and_keeps_the_embedding():
    s, bb = _store('{"action": "update", "new_memory": "REWRITTEN\\nEDIT: a > 1 -> a > 0"}')
    key = s.entries["m0"].key
    s.sleep()
    assert s.entries["m0"].text == "REWRITTEN\nEDIT: a > 1 -> a > 0" and s.counts["updated"] == 1
    assert s.index.similarity(key, "m0") == pytest.approx(1.0)  # the vector is the old text's (upstream)


def test_scripted_update_deletes_duplicates_and_updates_conflicts(sql_suite):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.peers.lightmem.calls import COMPETENCE
    from cfjax.types import answer_key_guard

    bb = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    t = "x.\nEDIT: a > 1 -> a >= 1"
    with answer_key_guard():
        dup = bb.call(LIGHTMEM_UPDATE, UpdateRequest("m0", t, ("y.\nEDIT: b -> c", t)))
        other = bb.call(LIGHTMEM_UPDATE, UpdateRequest("m0", t, ("y.\nEDIT: b -> c",)))
        ups = [bb.call(LIGHTMEM_UPDATE, UpdateRequest(f"m{i}", t, ("old.\nEDIT: a > 1 -> a < 1",
                                                                  "new.\nEDIT: a > 1 -> a > 2")))
               for i in range(200)]
    assert dup.action == "delete" and other.action == "ignore" and not dup.parse_failed
    done = [u for u in ups if u.action == "update"]
    assert all(u.new_memory == "new.\nEDIT: a > 1 -> a > 2" for u in done)  # the latest conflicting candidate
    assert abs(len(done) / 200 - COMPETENCE.p_update) < 0.1  # p = 0.8, binomial sd ≈ 0.028


def test_scripted_extract_reads_each_segments_trajectories_under_the_guard(sql_suite):
    from cfjax.infra.ledger import Ledger
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.memory import build_experience
    from cfjax.types import answer_key_guard

    bb = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    tasks = list(sql_suite.splits(seed=0, n_val=10).build)[:12]
    exps = build_experience(tasks, backbone=bb, world=sql_suite.world(), edits=sql_suite.edits, ledger=Ledger("x"),
                            episode0=1000, max_attempts=3)
    segs = tuple(tuple(Turn(e.task, e.episode, i, a, e.solved and i == len(e.attempts) - 1)
                       for i, a in enumerate(e.attempts)) for e in exps)
    with answer_key_guard():
        res = bb.call(LIGHTMEM_EXTRACT, ExtractRequest(segs))
    informative = sum(len(e.attempts) > 1 or not e.solved for e in exps)
    assert not res.parse_failed and 0 < len(res.entries) <= informative
    n_turns = sum(len(s) for s in segs)
    assert all(1 <= n <= n_turns and "EDIT:" in text for n, text in res.entries)


def test_parsers_survive_garbage():
    req = ExtractRequest(((_turn(_task(1), "a > 1"),),))
    bad = _parse_extract("I think the weather is nice", req, Usage(1, 1))
    assert bad.entries == () and bad.parse_failed
    assert _parse_extract("NONE", req, Usage(1, 1)).parse_failed is False
    ok = _parse_extract("LESSON (turn 7): a\nEDIT: x -> y\nLESSON: b", req, Usage(1, 1))
    assert ok.entries == ((0, "a\nEDIT: x -> y"), (0, "b"))  # turn 7 does not exist → unknown source
    ureq = UpdateRequest("m0", "t", ("c",))
    for text in ("garbage", "{not json", '{"action": "update"}', "[1, 2]"):
        r = _parse_update(text, ureq, Usage(1, 1))
        assert r.action == "ignore" and r.parse_failed, text
    assert _parse_update('Sure: {"action": "DELETE"}', ureq, Usage(1, 1)).action == "delete"


def test_recall_shows_at_most_ten_and_never_the_tasks_own(tmp_path):
    s = LightMemSystem(_ctx(_Canned()))
    for i in range(15):
        s._add_entry(f"lesson {i} about at least.\nEDIT: a > {i} -> a >= {i}", f"t/{i % 3}")
    mem = s.recall(RecallQuery(_task(0), (), "SELECT a > 1", 0, 0))
    ids = [line[1:-1] for line in mem.text.splitlines() if line.startswith("[m")]
    assert len(ids) == 10 and all(s.entries[i].source != "t/0" for i in ids)
    s.save(tmp_path / "lm.json")
    t = LightMemSystem(_ctx(_Canned()))
    t.load(tmp_path / "lm.json")
    assert {i: e.text for i, e in t.entries.items()} == {i: e.text for i, e in s.entries.items()}
    assert t.recall(RecallQuery(_task(0), (), "SELECT a > 1", 0, 0)).text == mem.text
    from cfjax.infra.io import atomic_write_json

    atomic_write_json(tmp_path / "bad.json", {"format": "cfjax.peers.lightmem/1", "entries": [["m0", "x"]],
                                              "next_seq": 1, "counts": {}})
    with pytest.raises(ValueError, match=r"bad\.json: field 'entries'"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a LightMem store"):
        t.load(tmp_path / "other.json")


def test_a_unit_through_the_openai_client(sql_suite):
    def extra(prompt: str) -> str | None:
        if "long-term memory of a coding agent (LightMem)" in prompt:
            return "LESSON (turn 1): write `>=` for 'at least'.\nEDIT: salary > 50000 -> salary >= 50000"
        if "(LightMem, offline update)" in prompt:
            return json.dumps({"action": "delete"})
        return None

    res, seen = openai_system(sql_suite, "lightmem", extra)
    assert any("long-term memory of a coding agent (LightMem)" in p for p in seen)
    assert 0 <= res["success"] <= 100
    assert res["summary"]["flushes"] >= 1 and res["summary"]["entries"] >= 1
    assert res["build_llm_calls"] >= res["summary"]["flushes"] + res["summary"]["update_calls"]


def test_fixed_store_exports_what_recall_shows_and_native_is_top_k():
    from cfjax.llm.prompts import split_memory_set
    from cfjax.memory import FixedStore

    s = LightMemSystem(_ctx(_Canned(update='{"action": "update", "new_memory": "REWRITTEN\\nEDIT: a > 1 -> a > 0"}')))
    for i in range(15):
        s._add_entry(f"lesson {i} about at least.\nEDIT: a > {i} -> a >= {i}", f"t/{i % 3}")
    s._add_entry("lesson 0 about at least.\nEDIT: a > 0 -> a >= 0", "t/1")  # m15 duplicates m0: m0 is rewritten
    s.freeze()
    assert isinstance(s, FixedStore) and s.counts["updated"] >= 1
    items = s.export_items()
    assert [i for i, _ in items] == [f"m{i}" for i in range(16)] and dict(items)["m0"].startswith("REWRITTEN")
    q = RecallQuery(_task(0), (), "SELECT a > 1", 0, 0)
    for k in (3, 5, 10):
        ids = s.native(q, k)
        # 16 entries, 5 of them t/0's own (m0, m3, m6, m9, m12) → 11 candidates ≥ k: exactly k, none own
        assert len(ids) == k and set(ids) <= set(dict(items)) and all(s.entries[i].source != "t/0" for i in ids)
        assert ids == s.native(q, 10)[:k]  # one ranking, cut at the budget
    shown = split_memory_set(s.recall(q).text)
    assert [i for i, _ in shown] == s.native(q, s.retrieve_k)  # default k = 10: what recall shows
    assert all(dict(items)[i] == text for i, text in shown)
    assert "m0" not in s.native(q, 16)  # m0 (rewritten) is t/0's own
    # t/1 owns m1, m4, m7, m10, m13 and m15: a budget of 16 finds the other 10
    ids = s.native(RecallQuery(_task(1), (), None, 0, 0), 16)
    assert len(ids) == 10 and not {"m1", "m4", "m7", "m10", "m13", "m15"} & set(ids)

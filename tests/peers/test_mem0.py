"""Mem0 v2 (cfjax/peers/mem0/): the four events on crafted conflicts with the exact resulting memories and
history log, a hallucinated temporary id ignored and logged, the "0", "1", … mapping in the prompt,
parsers on garbage, the scripted handlers under the answer-key guard, persistence, and a quick run
through the OpenAI client."""

from __future__ import annotations

import json

import pytest

from cfjax.infra.io import atomic_write_json
from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.mem0 import MEM0_EXTRACT, MEM0_PROBS, MEM0_UPDATE, ExtractRequest, Mem0System, UpdateRequest
from cfjax.peers.mem0.calls import _scripted_update
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

F_A = "For 'at least', write `a >= 1`.\nEDIT: a > 1 -> a >= 1"
F_B = "Join the orders on the customer key.\nEDIT: JOIN x -> JOIN y"
F_C = "For 'highest first', sort descending.\nEDIT: ASC -> DESC"
G2 = "Join the orders on the account key.\nEDIT: JOIN x -> JOIN z"  # conflict with F_B: same before, other after
G3 = "Sort ascending after all.\nEDIT: DESC -> ASC"  # the reverse of F_C
G4 = "Keep only the first row.\nEDIT: LIMIT 2 -> LIMIT 1"  # new
H1 = "Join on the region key.\nEDIT: JOIN x -> JOIN w"  # conflicts with G2 (which holds JOIN x now)


class _Rng:
    """Scripted draws: ``random()`` returns the given values in order, ``randrange`` returns 0."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def random(self) -> float:
        return self.values.pop(0)

    def randrange(self, n: int) -> int:
        return 0


class _Sim:
    def __init__(self, values: list[float]) -> None:
        self.r = _Rng(values)

    def rng(self, *key: object) -> _Rng:
        return self.r


class _Fake:
    """Extraction answers the canned facts of each task; the update is the scripted manager with
    scripted draws (so the test hand-computes its decisions). Prompts and requests are recorded."""

    name = "fake"

    def __init__(self, facts: dict[str, list[str]], draws: list[float]) -> None:
        self.facts, self.sim, self.prompts, self.updates = facts, _Sim(draws), [], []

    def call(self, kind, req):
        self.prompts.append(kind.render(req))
        if kind is MEM0_EXTRACT:
            return kind.parse(json.dumps({"facts": self.facts[req.task.task_id]}), req, Usage(3, 4))
        self.updates.append(req)
        return kind.parse(_scripted_update(self.sim, req), req, Usage(3, 4))


def _task(tid: str) -> Task:
    return Task(tid, f"question of {tid}", "env", "schema", {"cues": ("at least",)})


def _exp(tid: str, ep: int = 0) -> Experience:
    return Experience(_task(tid), (Attempt("a > 1", "wrong", 0.0), Attempt("a >= 1", "ok", 1.0)), True, ep)


def test_registered_for_upliftmem_and_compare_with_reasons():
    info = MEMORY_SYSTEMS.get("mem0")
    assert info.runners == ("upliftmem", "compare") and info.show == "revise"
    assert "not a row of the CounterMem paper's Table 1" in why_not(info, "countermem")
    assert "compare --methods mem0" in why_not(info, "antipersist")
    from cfjax.peers.mem0 import memory

    assert "ADD-only since 2026" in memory.__doc__ and "v2" in memory.__doc__


def test_the_four_events_and_a_hallucinated_id_with_the_exact_memories_and_history():
    fake = _Fake({"t/1": [F_A, F_B, F_C], "t/2": [F_A, G2, G3, G4], "t/3": [H1]},
                 # t/2: G2 conflict 0.5 < p_update 0.8 → UPDATE, 0.5 ≥ p_hallucinated 0.05 → its real id;
                 #      G3 reversed 0.5 < p_delete 0.7 → DELETE, 0.5 → real id (then ADD G3)
                 # t/3: H1 conflicts with G2: 0.5 → UPDATE, 0.01 < 0.05 → a hallucinated id:
                 #      str(len(shown) + 1 + randrange(3)) = str(4 + 1 + 0) = "5", not in {"0".."3"}
                 [0.5, 0.5, 0.5, 0.5, 0.5, 0.01])
    assert (MEM0_PROBS.p_update, MEM0_PROBS.p_delete, MEM0_PROBS.p_hallucinated_id) == (0.8, 0.7, 0.05)
    ctx = SystemContext(fake, edits=None, max_attempts=2)  # type: ignore[arg-type]
    s = Mem0System(ctx)
    assert isinstance(s, MemorySystem)
    s.build([_exp("t/1", 1), _exp("t/2", 2), _exp("t/3", 3)])
    # t/1: empty store → three ADDs (m0, m1, m2); t/2: F_A is m0's fact → NONE; G2 → UPDATE m1 (id kept);
    # G3 → DELETE m2, ADD m3; G4 → ADD m4; t/3: UPDATE "5" is ignored, m1 keeps G2
    assert {m.id: m.text for m in s.memories.values()} == {"m0": F_A, "m1": G2, "m3": G3, "m4": G4}
    assert s.memories["m1"].source == "t/2" and s.memories["m0"].source == "t/1"
    h = [(e["event"], e.get("memory_id"), e["status"]) for e in s.history]
    assert h[:8] == [("ADD", "m0", "applied"), ("ADD", "m1", "applied"), ("ADD", "m2", "applied"),
                     ("NONE", "m0", "applied"), ("UPDATE", "m1", "applied"), ("DELETE", "m2", "applied"),
                     ("ADD", "m3", "applied"), ("ADD", "m4", "applied")]
    upd = s.history[4]
    assert upd["old"] == F_B and upd["new"] == G2 and s.history[5]["old"] == F_C and s.history[5]["new"] is None
    # t/3 shows m0, m1, m3, m4: the three untouched ones come back NONE, then the hallucinated UPDATE
    assert sorted(e[1] for e in h[8:11]) == ["m0", "m3", "m4"] and all(e[0] == "NONE" for e in h[8:11])
    assert s.history[11] == {"event": "UPDATE", "temp_id": "5", "task": "t/3", "time": 3, "memory_id": None,
                             "status": "ignored", "reason": "unknown temporary id"}
    assert s.summary() == {"memories": 4, "history": 12, "ignored": 1, "add": 5, "update": 1, "delete": 1, "none": 4}
    assert ctx.ledger.total.llm_calls == 6  # one extraction and one update per interaction, each charged once
    # the prompt shows temporary ids "0".."3", never the real ids
    req = fake.updates[2]
    assert [i for i, _ in req.memories] == ["0", "1", "2", "3"]
    assert '"id": "3"' in fake.prompts[-1] and "m1" not in fake.prompts[-1]


def test_temporary_ids_follow_the_search_order_of_each_fact():
    fake = _Fake({"t/1": [F_A, F_B, F_C], "t/2": [F_C, F_A]}, [])
    s = Mem0System(SystemContext(fake, edits=None, max_attempts=2), search_k=1)  # type: ignore[arg-type]
    s.update(_exp("t/1"))
    s.update(_exp("t/2"))
    # search_k = 1: F_C's top-1 is m2 (the same text, cosine 1), F_A's is m0 → {"0": m2, "1": m0}
    assert s._temp_ids([F_C, F_A]) == {"0": "m2", "1": "m0"}
    assert fake.updates[1].memories == (("0", F_C), ("1", F_A))
    assert len(s.memories) == 3 and [e["event"] for e in s.history[3:]] == ["NONE", "NONE"]


def test_per_fact_update_option_makes_one_call_per_fact():
    fake = _Fake({"t/1": [F_A, F_B]}, [])
    ctx = SystemContext(fake, edits=None, max_attempts=2)  # type: ignore[arg-type]
    s = Mem0System(ctx, per_fact_update=True)
    s.update(_exp("t/1"))
    # F_A into the empty store → ADD m0; then F_B against m0 (shown as "0"), unrelated → m0 NONE, ADD m1
    assert [r.memories for r in fake.updates] == [(), (("0", F_A),)] and ctx.ledger.total.llm_calls == 3
    assert [(e["event"], e["memory_id"]) for e in s.history] == [("ADD", "m0"), ("NONE", "m0"), ("ADD", "m1")]


def test_defensive_mapping_never_applies_to_a_wrong_memory():
    s = Mem0System(SystemContext(_Fake({}, []), edits=None, max_attempts=2))  # type: ignore[arg-type]
    from cfjax.peers.mem0.calls import MemoryEvent

    s.apply([MemoryEvent("0", F_A, "ADD"), MemoryEvent("1", F_B, "ADD")], {}, "t/1")
    mapping = {"0": "m1"}
    s.apply([MemoryEvent("1", "x", "UPDATE"), MemoryEvent("9", "", "DELETE"), MemoryEvent("0", "", "DELETE"),
             MemoryEvent("0", "y", "UPDATE"), MemoryEvent("", "z", "NONE")], mapping, "t/2")
    assert {m.id: m.text for m in s.memories.values()} == {"m0": F_A}  # "1" is not m0's temp id here
    assert [(e["event"], e["status"], e.get("reason")) for e in s.history[2:]] == [
        ("UPDATE", "ignored", "unknown temporary id"), ("DELETE", "ignored", "unknown temporary id"),
        ("DELETE", "applied", None), ("UPDATE", "ignored", "memory already deleted"),
        ("NONE", "ignored", "unknown temporary id")]


def test_scripted_update_rules_without_draws_and_with_declines():
    t = _task("t/9")
    shown = (("0", F_A), ("1", F_B), ("2", F_C))
    # same edit → NONE (no draw); conflict with 0.9 ≥ p_update → ADD; reversed with 0.9 ≥ p_delete → only ADD
    out = json.loads(_scripted_update(_Sim([0.9, 0.9]), UpdateRequest(t, (F_A, G2, G3), shown)))["memory"]
    assert [(m["id"], m["event"]) for m in out] == [("1", "NONE"), ("2", "NONE"), ("0", "NONE"), ("3", "ADD"),
                                                    ("4", "ADD")]
    assert [m["text"] for m in out if m["event"] == "ADD"] == [G2, G3]


def test_parsers_survive_garbage():
    t = _task("t")
    for text in ("", "nope", "{bad json", "[1, 2]", '{"facts": "x"}'):
        r = MEM0_EXTRACT.parse(text, ExtractRequest(t, (), False), Usage(1, 1))
        assert r.facts == () and r.parse_failed
    r = MEM0_EXTRACT.parse('Sure!\n```json\n{"facts": ["a", 3, "  ", "b"]}\n```', ExtractRequest(t, (), False),
                           Usage(1, 1))
    assert r.facts == ("a", "b") and not r.parse_failed
    req = UpdateRequest(t, ("f",), (("0", "m"),))
    for text in ("", "{", '{"memory": 3}', "null"):
        u = MEM0_UPDATE.parse(text, req, Usage(1, 1))
        assert u.events == () and u.parse_failed
    u = MEM0_UPDATE.parse('{"memory": [{"id": 0, "text": "m", "event": "none"}, {"event": "MERGE"}, 7, '
                          '{"id": "1", "text": "f", "event": "ADD"}]}', req, Usage(1, 1))
    assert [(e.id, e.event, e.text) for e in u.events] == [("0", "NONE", "m"), ("1", "ADD", "f")] and u.parse_failed


def test_scripted_handlers_under_the_answer_key_guard(sql_suite):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.types import answer_key_guard

    sim = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    t = next(x for x in sql_suite.tasks if "count_nonnull" in x.task_id)
    gold = sql_suite.keys[t.task_id].gold  # the test builds the trajectory; the handlers never see a key
    bad = gold.replace("COUNT(" + gold.split("COUNT(")[1].split(")")[0] + ")", "COUNT(*)")
    contrast = (Attempt(bad, "wrong", 0.0), Attempt(gold, "correct", 1.0))
    with answer_key_guard():
        ext = sim.call(MEM0_EXTRACT, ExtractRequest(t, contrast, True, 1))
        first = sim.call(MEM0_EXTRACT, ExtractRequest(t, (Attempt(gold, "correct", 1.0),), True, 1))
        same = sim.call(MEM0_UPDATE, UpdateRequest(t, ext.facts, (("0", ext.facts[0]),), 1))
        new = sim.call(MEM0_UPDATE, UpdateRequest(t, ext.facts, (), 1))
    assert len(ext.facts) == 1 and not ext.parse_failed and "EDIT: SELECT COUNT(*) -> SELECT COUNT(email)" in ext.facts[0]
    assert first.facts == () and not first.parse_failed  # a first-attempt success: nothing to remember
    assert [(e.id, e.event) for e in same.events] == [("0", "NONE")]
    assert [(e.event, e.text) for e in new.events] == [("ADD", ext.facts[0])]


def test_save_load_bad_file_and_frozen(tmp_path):
    fake = _Fake({"t/1": [F_A, F_B], "t/2": [G2]}, [0.5, 0.5])
    s = Mem0System(SystemContext(fake, edits=None, max_attempts=2))  # type: ignore[arg-type]
    s.build([_exp("t/1"), _exp("t/2")])
    mem = s.recall(RecallQuery(_task("t/9"), (), "SELECT 1", 0, 0))
    assert mem is not None and mem.kind == "memories" and "[m0]" in mem.text and G2 in mem.text
    own = s.recall(RecallQuery(_task("t/2"), (), None, 0, 0))  # m1 now holds t/2's fact: never shown to t/2
    assert own is not None and "[m1]" not in own.text and "[m0]" in own.text
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(_exp("t/3"))
    s.save(tmp_path / "mem0.json")
    t = Mem0System(SystemContext(fake, edits=None, max_attempts=2))  # type: ignore[arg-type]
    t.load(tmp_path / "mem0.json")
    assert {m.id: m.text for m in t.memories.values()} == {m.id: m.text for m in s.memories.values()}
    assert t.history == s.history and t.summary() == s.summary() and t._next == s._next
    assert t.recall(RecallQuery(_task("t/9"), (), None, 0, 0)).text == mem.text
    atomic_write_json(tmp_path / "bad.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a Mem0 store"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "bad2.json", {"format": "cfjax.peers.mem0/1", "memories": [["m0", "x"]],
                                               "history": [], "next_id": 1, "clock": 1})
    with pytest.raises(ValueError, match="bad2.json: field 'memories'"):
        t.load(tmp_path / "bad2.json")


def test_a_quick_run_through_the_openai_client(sql_suite):
    from tests.peers.conftest import openai_system

    fact = "For 'at least', keep the boundary.\nEDIT: a > 1 -> a >= 1"

    def extra(prompt: str) -> str | None:
        if "You organise the long-term memory" in prompt:
            return json.dumps({"facts": [fact]})
        if "You manage the long-term memory" in prompt:
            return "```json\n" + json.dumps({"memory": [{"id": "0", "text": fact, "event": "ADD"}]}) + "\n```"
        return None

    res, seen = openai_system(sql_suite, "mem0", extra)
    extracted = [p for p in seen if "You organise the long-term memory" in p]
    updated = [p for p in seen if "You manage the long-term memory" in p]
    assert len(extracted) == 4 and 1 <= len(updated) <= 4  # one extraction per build episode
    assert 0 <= res["success"] <= 100 and res["build_llm_calls"] >= len(extracted) + len(updated)
    assert res["summary"]["memories"] == len(updated) and res["summary"]["add"] == len(updated)


def test_fixed_store_exports_what_recall_shows_and_native_is_its_top_k():
    from cfjax.llm.prompts import split_memory_set
    from cfjax.memory import FixedStore
    from cfjax.peers.mem0.calls import MemoryEvent

    s = Mem0System(SystemContext(None, edits=None, max_attempts=2))  # type: ignore[arg-type]
    for i, text in enumerate(["inclusive bounds use >= for at least", "count distinct ids",
                              "order by name ascending"]):
        s.apply([MemoryEvent(str(i), text, "ADD")], {}, f"src/{i}")
    assert isinstance(s, FixedStore)
    q = RecallQuery(Task("t/9", "at least five orders: inclusive bounds", "env", "schema", {}), (), None, 0, 0)
    shown = split_memory_set(s.recall(q).text)
    assert set(shown) <= set(s.export_items())
    assert s.native(q, s.k) == [mid for mid, _ in shown]
    assert len(s.native(q, 2)) == 2 and s.native(q, 2) == s.native(q, 3)[:2]

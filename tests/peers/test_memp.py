"""MemP (cfjax/peers/memp/): adjust-after-failure, hit/success bookkeeping, deprecation at hit = 3,
threshold retrieval, parser robustness, the scripted handlers under the answer-key guard, persistence,
and one quick system run through the OpenAI client."""

from __future__ import annotations

import pytest

from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.memp import (MEMP_ADJUST, MEMP_DISTILL, AdjustRequest, DistillRequest, MempConfig, MempSystem,
                              parse_workflow)
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

DISTILLED = "WORKFLOW:\n1. read the question\n2. write the query\nLESSON: use >= for at least\nEDIT: a > 1 -> a >= 1"
ADJUSTED = "WORKFLOW:\n1. read the bound\nLESSON: use > for strictly above\nEDIT: a >= 1 -> a > 1"


class _Canned:
    """A backbone answering MEMP_DISTILL and MEMP_ADJUST with fixed replies, counting the calls."""

    name = "canned"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def call(self, kind, req):
        self.calls.append(kind.name)
        return kind.parse(ADJUSTED if kind.name == "MEMP_ADJUST" else DISTILLED, req, Usage(3, 4))


def _task(i: int, q: str | None = None) -> Task:
    return Task(f"t/{i}", q or f"How many rows have value at least {i}?", "env", "schema", {"cues": ("at least",)})


def _exp(task: Task, solved: bool, episode: int) -> Experience:
    atts = (Attempt("a > 1", "wrong", 0.0), Attempt("a >= 1", "ok", 1.0)) if solved else \
        (Attempt("a > 1", "wrong", 0.0),)
    return Experience(task, atts, solved, episode)


def _system(**kw) -> tuple[MempSystem, _Canned]:
    bb = _Canned()
    return MempSystem(SystemContext(bb, edits=None, max_attempts=2), MempConfig(**kw)), bb  # type: ignore[arg-type]


def _shown(s: MempSystem, task: Task, episode: int) -> list[str]:
    mem = s.recall(RecallQuery(task, (), "SELECT 1", episode, 0))
    return [] if mem is None else [line[1:-1] for line in mem.text.splitlines() if line.startswith("[p")]


def test_registered_for_compare_antipersist_upliftmem_not_countermem():
    info = MEMORY_SYSTEMS.get("memp")
    assert set(info.runners) == {"antipersist", "upliftmem", "compare"}
    assert "not a row of the CounterMem paper's Table 1" in why_not(info, "countermem")
    with pytest.raises(ValueError):
        MempConfig(build="workflow")


def test_adjust_after_failure_rewrites_the_shown_workflow_exactly_as_the_reply_says():
    s, bb = _system(threshold=0.0)
    assert isinstance(s, MemorySystem)
    s.build([_exp(_task(1), True, 1)])  # solved → one MEMP_DISTILL → memory p0
    assert bb.calls == ["MEMP_DISTILL"] and s.items["p0"].workflow == \
        "1. read the question\n2. write the query\nLESSON: use >= for at least\nEDIT: a > 1 -> a >= 1"
    assert s.ctx.ledger.total.llm_calls == 1
    t2 = _task(2)
    assert _shown(s, t2, 7) == ["p0"]
    s.update(_exp(t2, False, 7))  # failed after p0 was shown → MEMP_ADJUST refines p0; nothing added
    assert bb.calls == ["MEMP_DISTILL", "MEMP_ADJUST"] and len(s) == 1
    assert s.items["p0"].workflow == "1. read the bound\nLESSON: use > for strictly above\nEDIT: a >= 1 -> a > 1"
    assert (s.items["p0"].hit, s.items["p0"].success) == (1, 0) and s.summary()["adjusted"] == 1
    # a failure with nothing shown changes nothing and calls nothing
    s.update(_exp(_task(3), False, 8))
    assert len(bb.calls) == 2 and len(s) == 1


def test_update_policies_all_and_validation():
    s_all, _ = _system(update="all")
    s_val, _ = _system(update="validation")
    for s in (s_all, s_val):
        s.build([_exp(_task(1), True, 1), _exp(_task(2), False, 2), _exp(_task(1), True, 3)])
    assert len(s_all) == 2 and len(s_val) == 1  # all adds the failure too; a stored query is never re-added


@pytest.mark.parametrize("successes, kept", [(1, False), (2, True)])
def test_hit_success_bookkeeping_and_deprecation_exactly_at_three_hits(successes, kept):
    # p0 is shown to three other tasks; `successes` of them succeed. After the 3rd update hit = 3 and
    # success/hit = 1/3 < 0.5 → removed; 2/3 ≥ 0.5 → kept. After two updates it is never removed.
    s, _ = _system(threshold=0.0, update="validation")
    s.build([_exp(_task(1), True, 1)])
    outcomes = [True] * successes + [False] * (3 - successes)
    for n, solved in enumerate(outcomes):
        t = _task(10 + n, f"Count the rows whose value is at least {n}")
        assert "p0" in _shown(s, t, 100 + n)
        assert "p0" in _shown(s, t, 100 + n)  # a second attempt of the same episode credits once
        s.update(Experience(t, (Attempt("a", "x", float(solved)),), solved, 100 + n))
        if n < 2:
            assert "p0" in s.items and s.items["p0"].hit == n + 1
    assert ("p0" in s.items) is kept
    if kept:
        assert (s.items["p0"].hit, s.items["p0"].success) == (3, 2)
    else:
        assert s.summary()["deprecated"] == 1


def test_query_retrieval_uses_the_threshold_top_k_and_never_the_own_task():
    s, _ = _system(threshold=0.5, k=2)
    s.build([_exp(_task(1, "How many members have a phone number on record?"), True, 1),
             _exp(_task(2, "How many members have an email address on record?"), True, 2),
             _exp(_task(3, "List the departments sorted by budget"), True, 3)])
    near = _task(9, "How many members have a phone number on record today?")
    sims = {m: s._by_query.similarity(near.question, m) for m in s.items}
    assert sims["p0"] >= 0.5 > sims["p2"]  # hashed cosines: the near-duplicate passes, the other does not
    got = s.retrieve(near, 0)
    assert got[0] == "p0" and "p2" not in got and len(got) <= 2
    assert all(sims[m] >= 0.5 for m in got)
    assert "p0" not in s.retrieve(_task(1, "How many members have a phone number on record?"), 0)  # own task
    s_high, _ = _system(threshold=0.99)
    s_high.build([_exp(_task(1, "How many members have a phone number on record?"), True, 1)])
    assert s_high.recall(RecallQuery(near, (), None, 0, 0)) is None  # nothing passes → no memory shown


def test_facts_and_random_retrieval():
    s, _ = _system(retrieve="facts")
    s.build([_exp(_task(1), True, 1), _exp(Task("t/2", "Other question", "env", "s", {"cues": ("at most",)}),
                                           True, 2)])
    assert s.retrieve(_task(5), 0)[0] == "p0"  # identical facts (cues=at least) → cosine 1
    r, _ = _system(retrieve="random", k=1)
    r.build([_exp(_task(i), True, i) for i in range(1, 6)])
    a, b = r.retrieve(_task(9), 3), r.retrieve(_task(9), 3)
    assert a == b and len(a) == 1  # seeded by (seed, task, episode)


def test_parser_is_robust_to_garbage():
    assert parse_workflow("") == ("", True)
    assert parse_workflow("I cannot help with that.") == ("", True)
    assert parse_workflow("WORKFLOW: none\nLESSON: none") == ("", False)
    body, failed = parse_workflow("Sure!\nWORKFLOW: check the bound\n- then write it\nEDIT: broken")
    assert body == "1. check the bound\n2. then write it" and not failed
    res = MEMP_DISTILL.parse("??", DistillRequest(_task(1), (), False), Usage(1, 1))
    assert res.workflow == "" and res.parse_failed


def test_scripted_handlers_under_the_answer_key_guard(sql_suite):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.types import answer_key_guard

    sim = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    t = sql_suite.tasks[0]
    first = Attempt("SELECT 1", "wrong result", 0.0)
    with answer_key_guard():
        d = sim.call(MEMP_DISTILL, DistillRequest(t, (first,), False, 5))
        ok = sim.call(MEMP_DISTILL, DistillRequest(t, (Attempt("SELECT 1", "ok", 1.0),), True, 5))
        a = sim.call(MEMP_ADJUST, AdjustRequest(t, d.workflow, (first,), 6))
    assert not d.parse_failed and d.workflow.startswith("1. Read the question")
    assert "LESSON:" not in ok.workflow and not ok.parse_failed  # a first-attempt success: steps, no lesson
    assert not a.parse_failed and a.workflow.count("LESSON:") <= 1
    assert parse_workflow(f"WORKFLOW:\n{d.workflow}") == (d.workflow, False)  # the stored form round-trips


def test_save_load_round_trip_bad_file_and_frozen_update(tmp_path):
    s, _ = _system(threshold=0.0)
    s.build([_exp(_task(1), True, 1), _exp(_task(2), True, 2)])
    _shown(s, _task(3), 4)
    s.update(_exp(_task(3), True, 4))
    s.save(tmp_path / "memp.json")
    t, _ = _system(threshold=0.0)
    t.load(tmp_path / "memp.json")
    assert t.summary()["memories"] == 3 and [(p.hit, p.success) for p in t.items.values()] == \
        [(p.hit, p.success) for p in s.items.values()]
    assert t.items["p0"].text() == s.items["p0"].text()
    from cfjax.infra.io import atomic_write_json, read_json

    data = read_json(tmp_path / "memp.json")
    atomic_write_json(tmp_path / "bad.json", {**{k: v for k, v in data.items() if k != "items"},
                                              "items": [{"mid": "p0"}]})
    with pytest.raises(ValueError, match=r"bad.json: items\[0\]\.source"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a MemP store"):
        t.load(tmp_path / "other.json")
    t.freeze()
    assert t.recall(RecallQuery(_task(3), (), None, 9, 0)) is not None and not t._shown  # frozen: nothing noted
    with pytest.raises(FrozenMemoryError):
        t.update(_exp(_task(5), True, 5))


def test_a_quick_run_through_the_openai_client(sql_suite):
    from tests.peers.conftest import openai_system

    def extra(prompt: str) -> str | None:
        if "procedural memory of how tasks like this one are done" in prompt:
            return DISTILLED
        if "Why did it fail? Refine the workflow" in prompt:
            return ADJUSTED
        return None

    res, seen = openai_system(sql_suite, "memp", extra)
    assert any("procedural memory of how tasks like this one are done" in p for p in seen)
    assert 0.0 <= res["success"] <= 100.0 and res["summary"]["memories"] >= 1
    assert res["build_llm_calls"] > res["summary"]["memories"]  # the episodes' calls plus one MEMP_DISTILL each

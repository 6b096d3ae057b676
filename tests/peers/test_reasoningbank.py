"""ReasoningBank (cfjax/peers/reasoningbank): the judge picks the success or the failure prompt, the
bank is append-only, retrieval is query-to-query top-1, MaTTS parallel uses k rollouts and one
self-contrast, sequential re-checks k − 1 times, verified feedback replaces the judge."""

from __future__ import annotations

import json

import pytest

from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext
from cfjax.peers.reasoningbank import ReasoningBankSystem, parse_items
from cfjax.peers.reasoningbank.calls import (RB_CONTRAST, RB_EXTRACT, RB_JUDGE, RB_RECHECK, ContrastRequest,
                                             ExtractRequest, JudgeRequest, RecheckRequest)
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage, answer_key_guard

from tests.peers.conftest import openai_unit


def _task(i: int, q: str | None = None) -> Task:
    return Task(f"t/{i}", q or f"question {i} at least", "env", "schema", {"cues": ("at least",)})


class _Fake:
    """Canned replies per call kind; records every request."""

    name = "fake"

    def __init__(self, judge: str = "STATUS: success") -> None:
        self.judge = judge
        self.calls: list[tuple[str, object]] = []

    def call(self, kind, req):
        self.calls.append((kind.name, req))
        if kind is RB_JUDGE:
            text = self.judge
        elif kind is RB_EXTRACT:
            tag = "win" if req.success else "fail"
            text = f"ITEM 1\nTITLE: {tag} {req.task.task_id}\nDESCRIPTION: d\nCONTENT: c\nEDIT: a > 1 -> a >= 1"
        elif kind is RB_CONTRAST:
            text = "\n".join(f"ITEM {i}\nTITLE: contrast {i}\nDESCRIPTION: d\nCONTENT: c" for i in range(1, 8))
        elif kind is RB_RECHECK:
            text = f"STATUS: failure\nITEM 1\nTITLE: rechecked {req.round}\nDESCRIPTION: d\nCONTENT: c"
        else:  # pragma: no cover
            raise AssertionError(kind.name)
        return kind.parse(text, req, Usage(3, 4))


def _exp(i: int, solved: bool, q: str | None = None) -> Experience:
    return Experience(_task(i, q), (Attempt("a > 1", "wrong", 0.0),) + ((Attempt("a >= 1", "ok", 1.0),) if solved else ()),
                      solved, i)


def _ctx(bb, rollout=None) -> SystemContext:
    return SystemContext(bb, edits=None, max_attempts=2, rollout=rollout)  # type: ignore[arg-type]


def test_judge_label_picks_the_prompt_and_the_bank_is_append_only():
    bb = _Fake(judge="STATUS: failure")
    s = ReasoningBankSystem(_ctx(bb))
    assert isinstance(s, MemorySystem)
    s.build([_exp(0, True), _exp(0, True)])  # the same task twice: two entries (append-only, no merge)
    assert [c[0] for c in bb.calls] == ["RB_JUDGE", "RB_EXTRACT"] * 2
    assert [e.items[0].title for e in s.entries] == ["fail t/0", "fail t/0"]  # the judge said failure
    assert not any(e.success for e in s.entries)
    assert s.ctx.ledger.total.llm_calls == 4 and s.ctx.ledger.verification.llm_calls == 4  # construction cost
    assert s.summary()["entries"] == 2 and s.summary()["judge_calls"] == 2


def test_verified_feedback_takes_the_evaluator_label_and_makes_no_judge_call():
    bb = _Fake(judge="STATUS: failure")
    s = ReasoningBankSystem(_ctx(bb), verified=True)
    s.build([_exp(0, True), _exp(1, False)])
    assert [c[0] for c in bb.calls] == ["RB_EXTRACT", "RB_EXTRACT"]
    assert [e.items[0].title for e in s.entries] == ["win t/0", "fail t/1"]
    assert all(req.step_outcomes for _, req in bb.calls)


def test_retrieval_is_query_to_query_top1_and_never_the_task_itself():
    bb = _Fake()
    s = ReasoningBankSystem(_ctx(bb))
    s.build([_exp(0, True, "list the orders placed at least twice"),
             _exp(1, True, "name the cities with rainfall above ten")])
    # the new query shares its words with task 0's query (not with any item: every item's text is alike)
    mem = s.recall(RecallQuery(_task(9, "list the orders placed at least three times"), (), "SELECT 1", 0, 0))
    assert mem is not None and mem.kind == "memories"
    assert "win t/0" in mem.text and "win t/1" not in mem.text
    own = s.recall(RecallQuery(_task(0, "list the orders placed at least twice"), (), "x", 0, 0))
    assert own is not None and "win t/1" in own.text and "win t/0" not in own.text


def test_matts_parallel_runs_k_rollouts_and_one_self_contrast_capped_at_five():
    bb = _Fake()
    seen = []

    def rollout(task, episode):
        seen.append(episode)
        return _exp(int(task.task_id[2:]), False)

    s = ReasoningBankSystem(_ctx(bb, rollout), scaling="parallel", k=3)
    s.build([_exp(4, True)])
    assert seen == [4 + 10_000_019, 4 + 2 * 10_000_019]  # k − 1 more rollouts, distinct episodes
    contrast = [req for name, req in bb.calls if name == "RB_CONTRAST"]
    assert len(contrast) == 1 and len(contrast[0].trajectories) == 3
    assert len(s.entries[0].items) == 5  # 7 items in the reply, at most 5 kept
    assert s.summary()["rollouts"] == 2


def test_matts_sequential_rechecks_k_minus_one_times_and_keeps_the_last():
    bb = _Fake(judge="STATUS: success")
    s = ReasoningBankSystem(_ctx(bb), scaling="sequential", k=3)
    s.build([_exp(2, True)])
    assert [c[0] for c in bb.calls] == ["RB_JUDGE", "RB_EXTRACT", "RB_RECHECK", "RB_RECHECK"]
    assert [req.round for name, req in bb.calls if name == "RB_RECHECK"] == [1, 2]
    assert s.entries[0].items[0].title == "rechecked 2" and s.entries[0].success is False


def test_parsers_survive_garbage():
    assert parse_items("no items here") == ()
    assert parse_items("ITEM 1\nTITLE: t\nCONTENT: c\nEDIT: broken") [0].edit is None
    assert len(parse_items("TITLE: a\nCONTENT: b\nTITLE: c\nCONTENT: d")) == 2  # a repeated field starts an item
    bb = _Fake(judge="the agent did fine")  # no STATUS line: counted, treated as failure
    s = ReasoningBankSystem(_ctx(bb))
    s.build([_exp(0, True)])
    assert s.summary()["judge_errors_unparsed"] == 1 and s.entries[0].items[0].title == "fail t/0"


def test_freeze_save_load(tmp_path):
    s = ReasoningBankSystem(_ctx(_Fake()))
    s.build([_exp(0, True), _exp(1, True)])
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(_exp(2, True))
    s.save(tmp_path / "rb.json")
    t = ReasoningBankSystem(_ctx(_Fake()))
    t.load(tmp_path / "rb.json")
    assert t.entries == s.entries
    from cfjax.infra.io import atomic_write_json

    atomic_write_json(tmp_path / "bad.json", {"format": "cfjax.peers.reasoningbank/1", "entries": [{"query": 1}]})
    with pytest.raises(ValueError, match="lacks a field"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "other.json", {"format": "x"})
    with pytest.raises(ValueError, match="not a ReasoningBank store"):
        t.load(tmp_path / "other.json")


def test_scripted_handlers_are_gold_free_and_follow_the_judged_status(sql_suite):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig

    bb = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    task = sql_suite.tasks[0]
    gold_free = [Attempt("SELECT name FROM t WHERE a > 1", "wrong rows", 0.0),
                 Attempt("SELECT name FROM t WHERE a >= 1", "correct", 1.0)]
    with answer_key_guard():
        j = bb.call(RB_JUDGE, JudgeRequest(task, gold_free, 0))
        win = bb.call(RB_EXTRACT, ExtractRequest(task, gold_free, True, 0))
        lose = bb.call(RB_EXTRACT, ExtractRequest(task, gold_free[:1], False, 0))
        con = bb.call(RB_CONTRAST, ContrastRequest(task, [gold_free[:1], gold_free], 0))
        rc = bb.call(RB_RECHECK, RecheckRequest(task, gold_free, win.items, 0, 2))
    assert j.success is not None and rc.success is not None
    assert win.items and win.items[0].edit == ("a > 1", "a >= 1")  # the contrast toward the final action
    assert 1 <= len(lose.items) <= 3 and all(it.edit is not None for it in lose.items)  # guesses
    assert con.items and len(con.items) <= 5


def test_all_four_rows_are_registered_for_countermem():
    from cfjax.experiments.countermem.rows import row_specs

    specs = row_specs()
    for name in ("reasoningbank", "reasoningbank_matts", "reasoningbank_matts_seq", "reasoningbank_verified"):
        assert name in specs and specs[name].table == "table1" and specs[name].transfer
        assert "countermem" in MEMORY_SYSTEMS.get(name).runners


def test_a_quick_unit_through_the_openai_client(sql_suite):
    def extra(prompt: str) -> str | None:
        if "You are an expert judge of agent trajectories" in prompt:
            return "STATUS: failure"
        if "extract preventative lessons" in prompt or "Extract the reasoning strategies" in prompt:
            return "ITEM 1\nTITLE: bounds\nDESCRIPTION: inclusive bounds\nCONTENT: use >= for at least\nEDIT: > -> >="
        return None

    res, seen = openai_unit(sql_suite, "reasoningbank", extra)
    assert any("You are an expert judge of agent trajectories" in p for p in seen)
    assert any("extract preventative lessons" in p for p in seen)
    row = res["rows"]["reasoningbank"]
    assert 0 <= row["success"] <= 100 and row["entries"] > 0 and row["judge_calls"] > 0
    assert row["llm_calls"] > res["rows"]["none"]["llm_calls"]  # revisions with its items are counted

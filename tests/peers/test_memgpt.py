"""MemGPT / Letta as a peer (cfjax/peers/memgpt/): core-memory tool semantics and limits, archival paging,
the memory-pressure warning, summarise-and-evict, tool chaining, frozen writes, parsers, the scripted
handlers under the answer-key guard, persistence, and a unit through the OpenAI client."""

from __future__ import annotations

import json
import math

import pytest

from cfjax.infra.ledger import Ledger
from cfjax.llm.prompts import count_tokens
from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.memgpt import MEMGPT_SUMMARIZE, MemGPTSystem, SummarizeRequest, parse_step, parse_summary
from cfjax.peers.memgpt.tools import READ_ONLY, Archival, CoreMemory, Message, core_entries, execute
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

LESSON = "When the task says 'at least', write `a >= 1` instead of `a > 1`.\nEDIT: a > 1 -> a >= 1"


class _Fake:
    """A backbone with scripted replies: ``steps`` (a list, popped in order; ``DONE`` when empty, or a
    function of the request) for MEMGPT_STEP and ``summary`` for MEMGPT_SUMMARIZE; it records requests."""

    name = "fake"

    def __init__(self, steps=(), summary: str = "SUMMARY: S") -> None:
        self.steps = steps if callable(steps) else list(steps)
        self.summary = summary
        self.prompts: list[str] = []
        self.requests: list = []

    def call(self, kind, req):
        self.prompts.append(kind.render(req))
        self.requests.append(req)
        if kind is MEMGPT_SUMMARIZE:
            return kind.parse(self.summary, req, Usage(3, 4))
        text = self.steps(req) if callable(self.steps) else (self.steps.pop(0) if self.steps else "DONE")
        return kind.parse(text, req, Usage(3, 4))


def _task(i: int) -> Task:
    return Task(f"t/{i}", f"question {i} at least", "env", "schema", {"cues": ("at least",)})


def _sys(fake: _Fake, **kw) -> MemGPTSystem:
    return MemGPTSystem(SystemContext(fake, edits=None, max_attempts=2), **kw)  # type: ignore[arg-type]


def _exp(i: int) -> Experience:
    return Experience(_task(i), (Attempt("a > 1", "wrong", 0.0), Attempt("a >= 1", "ok", 1.0)), True, i)


def _call(tool: str, **args) -> str:
    return f"TOOL: {tool}({json.dumps(args)})"


def test_registered_for_all_four_runners():
    info = MEMORY_SYSTEMS.get("memgpt")
    assert set(info.runners) == {"countermem", "antipersist", "compare", "upliftmem"} and info.show == "revise"
    assert "is a row of countermem" in why_not(info, "countermem")
    assert isinstance(_sys(_Fake()), MemorySystem)


def test_core_memory_append_replace_and_the_character_limit():
    core = CoreMemory({"k": "abc"}, {"k": 10})
    run = lambda tool, **a: execute(tool, a, core=core, archival=Archival(), recall=[], frozen=False,  # noqa: E731
                                    task_id="t")
    assert run("core_memory_append", block="k", text="de").ok and core.blocks["k"] == "abc\nde"  # 3 + 1 + 2 = 6
    # 6 + 1 + 3 = 10: exactly at the limit
    assert run("core_memory_append", block="k", text="xyz").ok and len(core.blocks["k"]) == 10
    over = run("core_memory_append", block="k", text="q")  # 10 + 1 + 1 = 12 > 10: refused, unchanged
    assert not over.ok and over.text.startswith("ERROR:") and "limit of 10" in over.text
    assert core.blocks["k"] == "abc\nde\nxyz"
    assert run("core_memory_replace", block="k", old="de", new="DE").ok and core.blocks["k"] == "abc\nDE\nxyz"
    assert not run("core_memory_replace", block="k", old="zz", new="y").ok  # old not in the block
    assert not run("core_memory_replace", block="k", old="DE", new="DEFG").ok  # 10 − 2 + 4 = 12 > 10
    assert run("core_memory_replace", block="k", old="\nDE", new="").ok and core.blocks["k"] == "abc\nxyz"  # delete
    assert not run("core_memory_append", block="nope", text="x").ok and not run("no_such_tool").ok
    assert not run("core_memory_append", block="k").ok  # a missing argument is a tool error, not an exception
    assert core_entries("s1\nEDIT: a -> b\ns2\nEDIT: c -> d\ntail") == ["s1\nEDIT: a -> b", "s2\nEDIT: c -> d", "tail"]


def test_archival_search_pages_of_five_and_skips_the_tasks_own_passages():
    arch = Archival()
    for i in range(7):
        arch.insert(f"passage number {i} about joins", "src")
    arch.insert("passage number 0 about joins", "me")  # the asking task's own: never shown to it
    q = "passage number 0 about joins"
    run = lambda page: execute("archival_memory_search", {"query": q, "page": page},  # noqa: E731
                               core=CoreMemory({}, {}), archival=arch, recall=[], frozen=True, task_id="me")
    p0, p1, p2 = run(0), run(1), run(2)
    # 7 passages of other tasks: pages of 5 → 5, 2, 0; the exact text match (cosine 1) ranks first
    assert [len(p.shown) for p in (p0, p1, p2)] == [5, 2, 0] and p0.shown[0][0] == "a1"
    ids = [i for p in (p0, p1) for i, _ in p.shown]
    assert sorted(ids) == [f"a{i}" for i in range(1, 8)] and "a8" not in ids
    assert "page 0 of 2 (5 of 7 results)" in p0.text and "no results on page 2" in p2.text
    assert not execute("archival_memory_search", {"query": "x", "page": -1}, core=CoreMemory({}, {}), archival=arch,
                       recall=[], frozen=False, task_id="me").ok


def _first_prompt_tokens(**kw) -> int:
    f = _Fake()
    _sys(f, **kw).recall(RecallQuery(_task(1), (), "SELECT 1", 0, 0))
    return count_tokens(f.prompts[0])


def test_pressure_warning_appears_exactly_past_75_percent():
    t = _first_prompt_tokens(context_budget=10**6)  # T: the context of the first step (no warning in it)
    b_ok = math.ceil(t / 0.75)  # the smallest budget with T ≤ 0.75·B: no warning
    for budget, warned in ((b_ok, False), (b_ok - 1, True)):  # 0.75·(B − 1) < T: the warning
        f = _Fake()
        _sys(f, context_budget=budget).recall(RecallQuery(_task(1), (), "SELECT 1", 0, 0))
        assert ("memory pressure" in f.prompts[0]) is warned
    f = _Fake()
    _sys(f, context_budget=b_ok - 1).recall(RecallQuery(_task(1), (), "SELECT 1", 0, 0))
    assert f"({t} of {b_ok - 1} tokens)" in f.prompts[0]  # the warning reports the counted context


def test_summarise_and_evict_keeps_the_context_under_budget_and_keeps_the_summary():
    t0 = _first_prompt_tokens(context_budget=10**6)
    f = _Fake()
    s = _sys(f, context_budget=t0 + 300)
    old = [Message("user", "w " * 50, "old") for _ in range(10)]  # "[user] w … w": 3 + 50 = 53 tokens each
    s.queue.messages[:] = old
    s.recall_storage[:] = old
    s.recall(RecallQuery(_task(1), (), "SELECT 1", 0, 0))  # unfrozen: the turn persists
    # queue 530 tokens > the 300 of room: summarise the oldest int(0.75·530) = 397 → 8 messages
    # (7·53 = 371 < 397 ≤ 424 = 8·53), keeping the last 3 − 1 (the turn's event) = 2
    summ = [r for r in f.requests if hasattr(r, "previous")]
    assert len(summ) == 1 and len(summ[0].messages) == 8 and s.counts["summaries"] == 1
    assert s.queue.summary == "S" and "### Summary of evicted messages\nS\n" in f.prompts[-1]
    assert count_tokens(f.prompts[-1]) <= t0 + 300
    assert len(s.queue.messages) == 2 + 1  # the two old messages kept, then the turn (its event; DONE adds none)
    assert len(s.recall_storage) == 10 + 1  # evicted messages stay in recall storage (+ the turn's event)


def test_tool_calls_chain_up_to_the_step_limit_and_heartbeat_false_ends_the_turn():
    loop = lambda req: _call("archival_memory_search", query="x")  # noqa: E731
    f = _Fake(loop)
    s = _sys(f)
    led = Ledger("eval")
    s.recall(RecallQuery(_task(1), (), "d", 0, 0, led))
    assert led.total.llm_calls == 4 and s.counts["searches"] == 4 and s.ctx.ledger.total.llm_calls == 0
    assert [r.step for r in f.requests] == [0, 1, 2, 3]
    f = _Fake([_call("archival_memory_search", query="x", request_heartbeat=False), _call("conversation_search",
                                                                                       query="x")])
    s = _sys(f)
    s.recall(RecallQuery(_task(1), (), "d", 0, 0))
    assert len(f.requests) == 1
    f = _Fake([_call("no_such_tool"), "DONE", _call("archival_memory_search", query="x")])
    s = _sys(f)
    s.recall(RecallQuery(_task(1), (), "d", 0, 0))
    assert len(f.requests) == 2 and s.counts["tool_errors"] == 1  # a failed call continues; DONE ends
    f = _Fake(["I think I should search.", _call("archival_memory_search", query="x")])
    s = _sys(f)
    s.recall(RecallQuery(_task(1), (), "d", 0, 0))
    assert len(f.requests) == 1 and s.counts["parse_failures"] == 1  # a parse failure ends the turn


def test_memorise_then_recall_shows_core_and_read_passages_never_the_tasks_own():
    other = "In a task like this, `x < 2` was part of a failed attempt; try `x <= 2`.\nEDIT: x < 2 -> x <= 2"
    f = _Fake([_call("archival_memory_insert", text=other), _call("core_memory_append", block="task_knowledge",
                                                                  text=LESSON), "DONE"])
    s = _sys(f)
    s.update(_exp(0))
    assert s.ctx.ledger.total.llm_calls == 3 and s.ctx.ledger.verification.llm_calls == 3
    assert s.core.blocks["task_knowledge"] == LESSON and len(s.archival) == 1
    s.freeze()
    f.steps = [_call("archival_memory_search", query="question 5", page=0), "DONE"]
    mem = s.recall(RecallQuery(_task(5), (), "SELECT 1", 0, 0))
    assert mem is not None and mem.kind == "memories"
    assert mem.text == f"[core.task_knowledge.1]\n{LESSON}\n[a1]\n{other}"
    f.steps = [_call("archival_memory_search", query="question 0"), "DONE"]
    assert s.recall(RecallQuery(_task(0), (), "SELECT 1", 0, 0)) is None  # all of it came from task t/0


def test_writes_are_refused_while_frozen_and_frozen_recall_leaves_memory_unchanged():
    f = _Fake([_call("archival_memory_insert", text="x"), _call("core_memory_append", block="task_knowledge",
                                                                text="y"), "DONE"])
    s = _sys(f)
    s.freeze()
    before = (dict(s.core.blocks), len(s.archival), len(s.queue.messages), len(s.recall_storage))
    led = Ledger("eval")
    s.recall(RecallQuery(_task(1), (), "d", 0, 0, led))
    assert f"ERROR: {READ_ONLY}" in f.prompts[1] and f"ERROR: {READ_ONLY}" in f.prompts[2]
    assert (dict(s.core.blocks), len(s.archival), len(s.queue.messages), len(s.recall_storage)) == before
    assert led.total.llm_calls == 3 and s.ctx.ledger.total.llm_calls == 0 and s.counts["tool_errors"] == 2
    with pytest.raises(FrozenMemoryError):
        s.update(_exp(2))


def test_parsers_are_robust_to_garbage():
    assert parse_step("DONE") == (None, {}, False) and parse_step("```\ndone.\n```") == (None, {}, False)
    assert parse_step('Thinking…\nTOOL: archival_memory_search({"query": "q", "page": 1})') == \
        ("archival_memory_search", {"query": "q", "page": 1}, False)
    assert parse_step("TOOL: conversation_search()") == ("conversation_search", {}, False)
    for bad in ("", "hello", "TOOL: x(not json)", "TOOL: x([1, 2])", "TOOL: (x)", None):
        assert parse_step(bad)[2] is True  # type: ignore[arg-type]
    assert parse_summary("SUMMARY: tried > then >=") == ("tried > then >=", False)
    assert parse_summary("no summary here") == ("", True) and parse_summary("SUMMARY:   ")[1]
    assert parse_summary("SUMMARY: " + "x" * 50, 10) == ("x" * 10, False)


def test_scripted_handlers_under_the_answer_key_guard(sql_suite):
    from cfjax.infra.cache import CachedWorld
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.memory import build_experience
    from cfjax.types import answer_key_guard

    sim = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    sp = sql_suite.splits(seed=12345, n_val=20)
    exps = build_experience(list(sp.build)[:12], backbone=sim, world=CachedWorld(sql_suite.world()),
                            edits=sql_suite.edits, ledger=Ledger("b"), episode0=1000, max_attempts=3)
    s = MemGPTSystem(SystemContext(sim, sql_suite.edits, 3))
    learnable = [e for e in exps if len(e.attempts) > 1]
    assert learnable, "the fixture should have some multi-attempt episodes"
    with answer_key_guard():
        s.build(exps)
        s.freeze()
        mems = [s.recall(RecallQuery(t, (), "SELECT 1", 2000 + i, 0)) for i, t in enumerate(list(sp.eval)[:6])]
        raw = sim.call(MEMGPT_SUMMARIZE, SummarizeRequest(exps[0].task, (Message("user", "a\nb"), Message("tool", "c")),
                                                          "prev"))
    assert s.counts["parse_failures"] == 0 and s.counts["memorise_turns"] == len(exps)
    assert 1 <= len(s.archival) <= len(learnable)  # one insert per lesson; none from first-attempt successes
    assert all(m is None or m.kind == "memories" for m in mems) and s.counts["recall_turns"] == 6
    assert raw.summary == "prev | a | c" and not raw.parse_failed


def test_save_load_round_trip_and_bad_files(tmp_path):
    from cfjax.infra.io import atomic_write_json, read_json

    f = _Fake([_call("archival_memory_insert", text="p1"), _call("core_memory_append", block="task_knowledge",
                                                                 text=LESSON), "DONE"])
    s = _sys(f)
    s.update(_exp(0))
    s.save(tmp_path / "m.json")
    t = _sys(_Fake())
    t.load(tmp_path / "m.json")
    assert t.core.blocks == s.core.blocks and t.archival.texts == s.archival.texts
    assert t.queue.messages == s.queue.messages and t.recall_storage == s.recall_storage
    assert t.summary() == s.summary() and t.core_sources == {LESSON: "t/0"}
    data = dict(read_json(tmp_path / "m.json"))
    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a MemGPT store"):
        t.load(tmp_path / "other.json")
    data["archival"] = [["a1", "p1"]]
    atomic_write_json(tmp_path / "bad.json", data)
    with pytest.raises(ValueError, match=r"bad\.json: field 'archival'"):
        t.load(tmp_path / "bad.json")


def test_a_quick_unit_through_the_openai_client(sql_suite):
    from .conftest import openai_unit

    def extra(prompt: str) -> str | None:
        if "You manage your own memory with tool calls (MemGPT)" not in prompt:
            return "SUMMARY: earlier episodes" if "Messages being evicted" in prompt else None
        first = "[assistant]" not in prompt.split("### This turn", 1)[1].split("### Memory statistics", 1)[0]
        if not first:
            return "DONE"
        if "MEMORISE:" in prompt:
            return _call("archival_memory_insert", text="inclusive bounds need >=\nEDIT: a > 1 -> a >= 1")
        return _call("archival_memory_search", query="at least", page=0)

    res, seen = openai_unit(sql_suite, "memgpt", extra)
    row = res["rows"]["memgpt"]
    assert any("You manage your own memory with tool calls (MemGPT)" in p and "MEMORISE:" in p for p in seen)
    assert any("RECALL:" in p for p in seen)
    assert 0 <= row["success"] <= 100 and row["tool_steps"] > 0 and row["memorise_turns"] > 0
    assert row["archival"] == row["memorise_turns"]  # one insert per memorise turn


LESSON2 = "For 'at most', write `b <= 2` instead of `b < 2`.\nEDIT: b < 2 -> b <= 2"


def _fixed_store(n_passages: int) -> tuple[MemGPTSystem, _Fake]:
    """A frozen store: t/0 wrote LESSON to core and ``n_passages`` archival passages, t/1 wrote LESSON2 to
    core; a recall turn searches the question (page 0) and ends."""
    f = _Fake()
    s = _sys(f, max_steps=n_passages + 2)
    f.steps = [_call("archival_memory_insert", text=f"passage {j} about question at least")
               for j in range(n_passages)] + [_call("core_memory_append", block="task_knowledge", text=LESSON), "DONE"]
    s.update(_exp(0))
    f.steps = [_call("core_memory_append", block="task_knowledge", text=LESSON2), "DONE"]
    s.update(_exp(1))
    s.freeze()
    f.steps = lambda req: (_call("archival_memory_search", query=req.task.question, page=0)
                           if req.mode == "recall" and req.step == 0 else "DONE")
    return s, f


def test_fixed_store_exports_core_and_archival_as_recall_shows_them():
    from cfjax.llm.prompts import split_memory_set
    from cfjax.memory import FixedStore

    s, f = _fixed_store(7)
    assert isinstance(s, FixedStore) and len(s.archival) == 7
    items = s.export_items()
    assert items == [("core.task_knowledge.1", LESSON), ("core.task_knowledge.2", LESSON2)] + \
        [(f"a{j + 1}", f"passage {j} about question at least") for j in range(7)]
    shown = split_memory_set(s.recall(RecallQuery(_task(5), (), "SELECT 1", 0, 0)).text)
    # recall: the 2 core entries, then page 0 of the search (5 of the 7 passages): 7 items, uncapped
    assert [i for i, _ in shown][:2] == ["core.task_knowledge.1", "core.task_knowledge.2"] and len(shown) == 7
    assert all(dict(items)[i] == text for i, text in shown)


def test_native_is_a_recall_turn_with_pages_of_k_capped_at_k_core_first():
    s, f = _fixed_store(7)
    q = lambda led=None: RecallQuery(_task(5), (), "SELECT 1", 0, 0, led)  # noqa: E731
    rec = [line[1:-1] for line in s.recall(q()).text.splitlines() if line.startswith("[")]
    core = ["core.task_knowledge.1", "core.task_knowledge.2"]
    led = Ledger("eval")
    n3 = s.native(q(led), 3)
    # pages of 3 → 2 core + 3 passages = 5 items, capped at 3: both core entries and the best passage
    assert n3 == core + [rec[2]] and "(3 of 7 results)" in f.prompts[-1]
    # search + DONE charged to the eval ledger; the build ledger keeps (7 + 2) + 2 memorise steps + 2 of recall
    assert led.total.llm_calls == 2 and s.ctx.ledger.total.llm_calls == 9 + 2 + 2
    assert s.archival.page_size == 5  # the page size of k was a view for that turn only
    # default page size 5: 2 core + 5 passages = 7 > 5 → the first 5 of what recall shows (native ≠ recall)
    assert s.native(q(), 5) == rec[:5] and len(rec) == 7
    n10 = s.native(q(), 10)  # pages of 10 → every passage: 2 + 7 = 9 ≤ 10
    assert len(n10) == 9 and n10[:7] == rec and set(n10) == {i for i, _ in s.export_items()}
    assert s.native(q(), 1) == core[:1]  # core alone exceeds k: the first k core entries, no search shown
    assert s.native(RecallQuery(_task(0), (), None, 0, 0), 3) == ["core.task_knowledge.2"]  # t/0's own: skipped
    assert s.native(q(), 0) == [] and s.counts["native_turns"] == 5
    small, _ = _fixed_store(3)  # 2 core + 3 passages = 5 = k: native with the default k equals recall
    shown = [line[1:-1] for line in small.recall(q()).text.splitlines() if line.startswith("[")]
    assert small.native(q(), small.config.page_size) == shown and len(shown) == 5

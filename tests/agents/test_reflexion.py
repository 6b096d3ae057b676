"""The base-agent axis (cfjax.agents): ReAct is the plain loop, Reflexion keeps self-reflections within a task."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

from cfjax.agents import REFLECT, ReflectRequest, ReflexionBackbone, parse_reflection
from cfjax.cli import main
from cfjax.infra.ledger import Ledger
from cfjax.llm import prompts
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.loop import best_of_n, draft_once, run_episode
from cfjax.registry import AGENTS
from cfjax.types import Attempt, DraftRequest, Outcome, Usage, answer_key_guard

HEADER = "### Reflections on earlier attempts"


class Recording:
    """A backbone that records every call (kind, rendered prompt, usage) and passes it on."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []
        self.name = inner.name
        self._lock = threading.Lock()

    def call(self, kind, req):
        res = self.inner.call(kind, req)
        with self._lock:
            self.calls.append((kind.name, kind.render(req), res.usage, req))
        return res

    def count(self, name: str) -> int:
        return sum(1 for k, *_ in self.calls if k == name)

    def prompts(self, name: str, task_id: str | None = None) -> list[str]:
        return [p for k, p, _, r in self.calls if k == name and (task_id is None or r.task.task_id == task_id)]


class NeverSolved:
    """A world that fails every attempt with feedback naming the task and the attempt."""

    def __init__(self) -> None:
        self.n: dict[str, int] = {}
        self._lock = threading.Lock()

    def evaluate(self, task, action):
        with self._lock:
            self.n[task.task_id] = self.n.get(task.task_id, 0) + 1
            k = self.n[task.task_id]
        return Outcome(0.0, False, True, f"wrong rows for {task.task_id} (check {k})")


def scripted(suite, **kw) -> ScriptedBackbone:
    return ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(**kw))


def reflections_block(prompt: str) -> str:
    if HEADER not in prompt:
        return ""
    return prompt.split(HEADER, 1)[1].split("###", 1)[0]


def test_both_agents_are_registered():
    assert {"react", "reflexion"} <= set(AGENTS.names())
    assert AGENTS.get("reflexion").title == "Reflexion"


def test_reflections_carry_within_a_task_and_at_most_three(suite):
    rec = Recording(scripted(suite))
    agent = ReflexionBackbone(rec)
    task = suite.tasks[0]
    ep = run_episode(task, world=NeverSolved(), edits=suite.edits, ledger=Ledger("t"), episode=7, max_attempts=5,
                     draft=draft_once(agent))
    assert len(ep.decisions) == 5
    drafts = rec.prompts("DRAFT_ACTION")
    refl = [p for k, p, *_ in rec.calls if k == "REFLECT"]
    assert len(drafts) == 5 and rec.count("REFLECT") == 4  # one reflection per failed attempt, never repeated
    assert HEADER not in drafts[0]
    texts = agent.reflections(task.task_id, 7)
    assert len(texts) == 4 and all("check" in t for t in texts)
    assert texts[0] in reflections_block(drafts[1])  # attempt 2 sees attempt 1's reflection
    blocks = [reflections_block(p) for p in drafts]
    assert [b.count("\n- ") for b in blocks] == [0, 1, 2, 3, 3]
    assert texts[0] not in blocks[4] and all(t in blocks[4] for t in texts[1:])  # the last 3 are kept
    assert "Your failed attempt 1" in refl[0] and "REFLECTION:" in refl[0]


def test_reflections_never_cross_tasks_even_with_the_same_episode_id(suite):
    rec = Recording(scripted(suite))
    agent = ReflexionBackbone(rec)
    a, b = suite.tasks[0], suite.tasks[1]
    world = NeverSolved()
    run_episode(a, world=world, edits=suite.edits, ledger=Ledger("a"), episode=0, max_attempts=3,
                draft=draft_once(agent))
    first_b = agent.call(DRAFT_ACTION, DraftRequest(b, (), 0))
    assert HEADER not in rec.prompts("DRAFT_ACTION", b.task_id)[0] and first_b.usage == rec.calls[-1][2]
    hb = (Attempt("SELECT 1", f"wrong rows for {b.task_id} (check 1)", 0.0),)
    agent.call(DRAFT_ACTION, DraftRequest(b, hb, 0))
    block = reflections_block(rec.prompts("DRAFT_ACTION", b.task_id)[1])
    assert b.task_id in block and a.task_id not in block


def test_two_tasks_on_threads_keep_their_own_reflections(suite):
    rec = Recording(scripted(suite))
    agent = ReflexionBackbone(rec)
    world = NeverSolved()
    tasks = list(suite.tasks[:6])

    def one(t):
        return run_episode(t, world=world, edits=suite.edits, ledger=Ledger(t.task_id), episode=0, max_attempts=3,
                           draft=best_of_n(agent, 3, workers=3))

    with ThreadPoolExecutor(6) as ex:
        list(ex.map(one, tasks))
    assert rec.count("REFLECT") == 2 * len(tasks)
    for t in tasks:
        for p in rec.prompts("DRAFT_ACTION", t.task_id):
            block = reflections_block(p)
            assert all(o.task_id not in block for o in tasks if o is not t)


def test_best_of_n_charges_each_reflection_once(suite):
    rec = Recording(scripted(suite))
    agent = ReflexionBackbone(rec)
    task = suite.tasks[2]
    led = Ledger("bon")
    run_episode(task, world=NeverSolved(), edits=suite.edits, ledger=led, episode=3, max_attempts=3,
                draft=best_of_n(agent, 5, workers=5))
    assert rec.count("DRAFT_ACTION") == 15 and rec.count("REFLECT") == 2  # N drafts of one attempt: one reflection
    inner = Usage()
    for _, _, u, _ in rec.calls:
        inner = inner + u
    assert led.total.tokens == inner.total  # the ledger counts every call, reflections included, exactly once


def test_react_prompts_are_byte_identical_to_the_plain_backbone(suite):
    react = AGENTS.get("react")
    plain, wrapped = Recording(scripted(suite)), Recording(scripted(suite))
    assert react.wrap(wrapped) is wrapped
    for rec in (plain, wrapped):
        bb = rec if rec is plain else react.wrap(rec)
        for i, t in enumerate(suite.tasks[:5]):
            run_episode(t, world=NeverSolved(), edits=suite.edits, ledger=Ledger("x"), episode=i, max_attempts=3,
                        draft=best_of_n(bb, 2))
    assert [c[:3] for c in plain.calls] == [c[:3] for c in wrapped.calls]
    assert all(HEADER not in p for _, p, *_ in plain.calls)
    req = DraftRequest(suite.tasks[0], (Attempt("SELECT 1", "no", 0.0),))
    assert prompts.render_draft(req) == prompts.render_draft(DraftRequest(req.task, req.history, reflections=()))


def test_a_reflection_makes_the_characteristic_slip_rarer(suite):
    """reflection_factor = 0: with a reflection shown the characteristic slip never fires (p_noise = 0)."""
    sure = scripted(suite, p_error=1.0, p_error_look_alike=1.0, p_noise=0.0, retry_factor=1.0, reflection_factor=0.0)
    h = (Attempt("SELECT 1", "wrong", 0.0),)
    slipped = fixed = 0
    for t in suite.tasks[:40]:
        gold = suite.edits.normalize(suite.answer_key(t.task_id).gold)
        plain = sure.call(DRAFT_ACTION, DraftRequest(t, h)).action
        shown = sure.call(DRAFT_ACTION, DraftRequest(t, h, reflections=("check the boundary",))).action
        slipped += plain != gold
        fixed += shown == gold
    assert slipped > 0 and fixed == 40


def test_scripted_reflect_reads_no_answer_key(suite, world):
    """Whole Reflexion episodes on the real world (which may read keys) with answer keys unreadable elsewhere."""
    rec = Recording(scripted(suite, p_error=1.0))
    agent = AGENTS.get("reflexion").wrap(rec)
    with answer_key_guard():
        for i, t in enumerate(suite.tasks[:12]):
            run_episode(t, world=world, edits=suite.edits, ledger=Ledger("g"), episode=i, max_attempts=3,
                        draft=draft_once(agent))
        n = rec.count("REFLECT")
        r = agent.call(REFLECT, ReflectRequest(suite.tasks[0], Attempt("SELECT 1", "no such column: x", 0.0)))
    assert n > 0 and any(HEADER in p for p in rec.prompts("DRAFT_ACTION"))
    assert r.reflection and "no such column" in r.reflection and r.usage.total > 0


def test_parse_reflection_is_strict():
    assert parse_reflection("thinking\nREFLECTION: use > not >=\nmore") == "use > not >="
    assert parse_reflection("I should use >") == "" and parse_reflection("REFLECTION:   ") == ""


def test_countermem_run_reports_table_1_for_reflexion(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["countermem", "run", "--suite", "sql", "--quick", "--agent", "reflexion", "--rows", "none",
               "best_of_n", "--no-progress", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Table 1 — memory mechanisms, base agent Reflexion" in text
    assert "base agent Reflexion" in (out / "report.txt").read_text()
    res = json.loads((out / "results.json").read_text())
    assert res["agent"] == "reflexion" and {u["agent"] for u in res["units"]} == {"reflexion"}
    assert "scripted backbone" in res["backbone"]


def test_unknown_agent_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main(["countermem", "run", "--suite", "sql", "--quick", "--agent", "nosuch", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "nosuch" in err and "reflexion" in err
    assert not (tmp_path / "x").exists()


def test_antipersist_has_the_reflexion_row_and_it_is_no_memory_under_reflexion(tmp_path):
    """Anti-Persistence Table 1's Reflexion row: no memory across tasks, the Reflexion agent within one;
    with ``--agent reflexion`` the no_memory row is the same run. The default rows include it and the
    table's memory peers (the original ExpeL, AutoRefine)."""
    import dataclasses

    from cfjax.config import APConfig, quick
    from cfjax.experiments.antipersist.runner import default_rows, run_all
    from cfjax.experiments.backbones import BackboneSpec

    assert {"reflexion", "expel_original", "autorefine"} <= set(default_rows())
    ap = dataclasses.replace(quick(APConfig()), iterations=1, tasks_per_iteration=6, max_eval_tasks=8,
                             seeds=(42,), split_seeds=(12345,))
    a = run_all(tmp_path / "a", suites=["sql"], rows=("no_memory", "reflexion"), cfg=ap, log=lambda s: None)
    b = run_all(tmp_path / "b", suites=["sql"], rows=("no_memory",), cfg=ap, log=lambda s: None,
                backbone=BackboneSpec("scripted", agent="reflexion"))
    ra, rb = a["suites"]["sql"]["rows"], b["suites"]["sql"]["rows"]
    assert ra["reflexion"]["final_success"] == rb["no_memory"]["final_success"]
    assert a["outcomes"]["sql"]["12345"]["rows"]["reflexion"] == b["outcomes"]["sql"]["12345"]["rows"]["no_memory"]

"""The shared experiment runner: metrics denominators, baselines, ablations, parallel = serial,
and the full pipeline through the OpenAI-compatible client against a loopback server."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cfjax.config import CounterMemConfig
from cfjax.countermem import baselines as B
from cfjax.countermem.agent import Decision, Episode
from cfjax.experiments.countermem.runner import (
    row_names,
    BackboneSpec,
    UnitJob,
    expand_rows,
    quick_splits,
    row_metrics,
    run_jobs,
    run_unit,
)
from cfjax.experiments.countermem.report import aggregate, draw_figures, format_report
from cfjax.experiments.countermem.rows import _random_retriever, _shuffled_retriever
from cfjax.countermem.store import MemoryStore
from cfjax.infra.ledger import Ledger
from cfjax.expel import EXPEL_INSIGHT, ExpeLMemory, InsightRequest
from cfjax.llm import prompts
from cfjax.llm.calls import BEST_OF_N_JUDGE, DRAFT_ACTION
from cfjax.domains.sql.edits import SQLEdits
from cfjax.infra.cache import CachedWorld
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.types import Attempt, Completion, JudgeRequest, Outcome, Task, Usage
from tests.llm_server import FakeLLMServer, canned_sql

SQL_EDITS = SQLEdits()

SMALL = CounterMemConfig()
SMALL = dataclasses.replace(SMALL, seeds=(0,), dqn=dataclasses.replace(SMALL.dqn, total_decisions=120,
                                                                       checkpoint_every=60),
                            experiment=dataclasses.replace(SMALL.experiment, accumulation_checkpoints=(0, 4, 8),
                                                                   forgetting_tasks=4))


def _task(tid: str, variant: str = "base", env: str = "hr") -> Task:  # variant: only the conditions map says it
    return Task(tid, f"q {tid}", env, "", {"question": f"q {tid}"})


def _dec(tid: str, *, slot: int = 0, n_retrieved: int = 0, changed: bool = False, solved: bool = False,
         label: int | None = None) -> Decision:
    return Decision(tid, 0, "d", "a", slot, None, n_retrieved, changed, float(solved), solved, 10, 1,
                    int(not solved), 0, label)


# --------------------------------------------------------------------------- metrics


def test_row_metrics_use_the_papers_denominators():
    tasks = [_task("a"), _task("b", "look_alike"), _task("c", env="zz")]
    eps = [Episode(tasks[0], [_dec("a", n_retrieved=3, slot=1, changed=True, label=-1),
                              _dec("a", n_retrieved=0, solved=True)]),
           Episode(tasks[1], [_dec("b", n_retrieved=2, slot=0), _dec("b", n_retrieved=1, slot=1, changed=False,
                                                                     label=0)]),
           Episode(tasks[2], [_dec("c", n_retrieved=2, slot=2, changed=True, solved=True, label=1)])]
    none = [Episode(tasks[0], [_dec("a")]), Episode(tasks[1], [_dec("b", solved=True)]),
            Episode(tasks[2], [_dec("c")])]
    led = Ledger("x")
    for t, k in (("a", 2), ("b", 2), ("c", 1)):
        for i in range(k):
            led.evaluation(t, Outcome(1.0 if (t, i) in (("a", 1), ("c", 0)) else 0.0,
                                      (t, i) in (("a", 1), ("c", 0)), True, ""))
    conds = {"a": "same_env", "b": "look_alike", "c": "new_env"}
    m = row_metrics(eps, led, memory=True, conditions=conds, paired=none)
    # 5 retrieval opportunities, 4 with ≥ 1 record
    assert m["opportunities"] == 5 and m["coverage"] == pytest.approx(4 / 5)
    # 3 selected uses, 1 harmful
    assert m["selected_uses"] == 3 and m["harmful_use"] == pytest.approx(1 / 3)
    # 8 retrieved records; 2 action changes, 1 harmful change
    assert m["action_changes_per_retrieved"] == pytest.approx(2 / 8)
    assert m["harmful_changes_per_retrieved"] == pytest.approx(1 / 8)
    assert m["success"] == pytest.approx(200 / 3) and m["calls_per_solved"] == pytest.approx(5 / 2)
    assert m["failed_per_solved"] == pytest.approx(3 / 2)
    assert (m["rescued"], m["broken"], m["net"]) == (2, 1, 1)
    assert set(m["by_condition"]) == {"same_env", "look_alike", "new_env"}
    assert m["by_condition"]["look_alike"]["harmful_use"] == 0.0
    assert m["by_condition"]["look_alike"]["broken"] == 1
    none_m = row_metrics(none, led, memory=False)
    assert none_m["coverage"] is None and none_m["harmful_use"] is None


def test_row_metrics_refuse_unpaired_runs():
    with pytest.raises(ValueError, match="same tasks"):
        row_metrics([Episode(_task("a"))], Ledger("x"), memory=False, paired=[Episode(_task("b"))])


def test_expand_rows():
    assert expand_rows(["all"]) == row_names()
    assert expand_rows(["best_of_n"]) == ("none", "best_of_n", "cf_memory")
    with pytest.raises(ValueError, match="unknown row"):
        expand_rows(["bogus"])


# --------------------------------------------------------------------------- baselines


class _CountingWorld:
    def __init__(self, world):
        self.world, self.calls = world, []

    def evaluate(self, task, action):
        self.calls.append(action)
        return self.world.evaluate(task, action)


class _BadJudge(ScriptedBackbone):
    def _complete(self, kind, prompt, req):
        if kind == prompts.BEST_OF_N_JUDGE:
            return Completion("I like the third one best", Usage(1, 1))
        return super()._complete(kind, prompt, req)


def test_best_of_n_judge_parse_failure_falls_back_to_candidate_1_and_is_logged(suite):
    bb = _BadJudge(suite.scripted_domain(), ScriptedConfig(seed=3, p_error=1.0))
    world = _CountingWorld(suite.world())
    task = next(t for t in suite.tasks if suite.keys[t.task_id].family == "lower_bound"
                and suite.keys[t.task_id].variant == "base")
    log = B.JudgeLog()
    ep = B.best_of_n_episode(task, backbone=bb, world=world, config=SMALL, n=5, edits=suite.edits,
                             ledger=Ledger("b"), episode=7, judge_log=log)
    assert log.parse_failures == log.calls == len(ep.decisions) and log.failed_replies
    # the verifier never chooses: exactly one evaluation per attempt, of candidate 1
    assert len(world.calls) == len(ep.decisions)
    from cfjax.llm.base import DraftRequest

    first = bb.call(DRAFT_ACTION, DraftRequest(task, (), 7, sample=0)).action
    assert world.calls[0] == first


def test_scripted_judge_prefers_the_most_common_candidate(suite):
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(p_judge_random=0.0))
    t = suite.tasks[0]
    r = bb.call(BEST_OF_N_JUDGE, JudgeRequest(t, (), ("SELECT 1", "SELECT 2", "SELECT 2"), 0))
    assert r.parsed and r.choice == 1
    assert prompts.parse_choice("CHOICE: 9", 3) is None and prompts.parse_choice("x\nCHOICE: 2\n", 3) == 1


def test_expel_lessons_come_from_trajectories_and_are_unchecked(suite):
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=1))
    t = next(t for t in suite.tasks if suite.keys[t.task_id].family == "lower_bound"
                and suite.keys[t.task_id].variant == "base")
    gold = SQLEdits().normalize(suite.keys[t.task_id].gold)
    wrong = gold.replace(">=", ">")
    fixed = bb.call(EXPEL_INSIGHT, InsightRequest(t, (Attempt(wrong, "wrong", 0.5), Attempt(gold, "ok", 1.0)), True, 0))
    assert "EDIT:" in fixed.lesson and ">=" in fixed.lesson
    assert bb.call(EXPEL_INSIGHT, InsightRequest(t, (Attempt(gold, "ok", 1.0),), True, 0)).lesson == ""
    guess = bb.call(EXPEL_INSIGHT, InsightRequest(t, (Attempt(wrong, "wrong", 0.5),), False, 0))
    assert guess.lesson.startswith("When") and "EDIT:" in guess.lesson
    mem = ExpeLMemory()
    mem.add("src", "q at least", fixed.lesson)
    assert mem.top1(t, t.question) is not None
    assert mem.top1(dataclasses.replace(t, task_id="src"), t.question) is None  # never its own source task


def test_wm_without_cf_checks_alternatives_within_the_task_and_counts_them(suite):
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0, p_error=1.0, retry_factor=1.0, p_noise=0.0))
    world = _CountingWorld(suite.world())
    task = next(t for t in suite.tasks if suite.keys[t.task_id].family == "lower_bound"
                and suite.keys[t.task_id].variant == "base")
    led = Ledger("wm")
    ep = B.wm_without_cf_episode(task, backbone=bb, world=world, config=SMALL, edits=SQLEdits(),
                                 env=suite.specs[task.env_id], ledger=led, episode=0)
    assert ep.solved  # the true fix is among the rule-operator alternatives
    assert led.total.eval_calls == len(world.calls) > len(ep.decisions)
    assert led.verification.eval_calls == led.total.eval_calls - len(ep.decisions)


def test_cf_without_wm_stores_unchecked_advice_without_evaluator_calls(suite):
    from cfjax.countermem.generator import expand_failure

    cfg = dataclasses.replace(SMALL.generator, verify=False)
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0, p_error=1.0, p_noise=0.0, p_propose_fix=1.0))
    world = _CountingWorld(suite.world())
    task = next(t for t in suite.tasks if suite.keys[t.task_id].family == "lower_bound"
                and suite.keys[t.task_id].variant == "base")
    from cfjax.llm.base import DraftRequest

    draft = bb.call(DRAFT_ACTION, DraftRequest(task)).action
    out = suite.world().evaluate(task, draft)
    store = MemoryStore(SMALL.store, SMALL.retrieval, edits=SQL_EDITS)
    import random

    exp = expand_failure(task, (), draft, out, backbone=bb, world=world, store=store, config=cfg,
                         schema=suite.specs[task.env_id], rng=random.Random(0), ledger=Ledger("c"), budget=[12],
                         edits=SQLEdits())
    assert world.calls == [] and exp.checked == 0
    assert exp.admitted == 1 and len(store) == 1
    rec = next(iter(store.records.values()))
    assert "Unverified" in rec.evidence
    assert rec.score_after == pytest.approx(min(1.0, rec.score_before + SMALL.generator.unverified_delta))


# --------------------------------------------------------------------------- retrieval ablations


def _small_store(suite):
    from cfjax.countermem.agent import Agent
    from cfjax.countermem.pipeline import construct

    sp = quick_splits(suite.splits(seed=1), 30)
    store = MemoryStore(SMALL.store, SMALL.retrieval, edits=SQL_EDITS)
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0))
    construct(Agent(bb, CachedWorld(suite.world()), SMALL, store=store, envs=suite.specs, edits=suite.edits), sp.build, seed=0)
    return store, sp


def test_random_and_shuffled_retrieval(suite):
    store, sp = _small_store(suite)
    assert len(store) >= 3
    emb = store.embedder.embed(["x"])[0]
    rnd = _random_retriever(store, 0)
    t = sp.eval[0]
    a = rnd(t, "x", emb, 0, True)
    assert len(a) == min(3, len(store)) and a == rnd(t, "x", emb, 0, True)  # seeded
    assert all(r.record.source_task != t.task_id for r in a)
    shf = _shuffled_retriever(store, sp.eval, 0)
    for t in sp.eval[:5]:
        got = [r.record.record_id for r in shf(t, "ignored", emb, 0, True)]
        others = [o for o in sp.eval if o.task_id != t.task_id]
        assert any(got == [r.record.record_id for r in store.retrieve(o, o.question)] for o in others)


# --------------------------------------------------------------------------- the runner


def test_unit_all_rows_then_report(suite, tmp_path):
    sp = quick_splits(suite.splits(seed=SMALL.split_seed, n_val=SMALL.n_val), 12)
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0))
    res = run_unit(suite, 0, SMALL, backbone=bb, rows=["all"], splits=sp, out_dir=tmp_path / "u")
    assert set(res["rows"]) == set(row_names()) - {"retention", "accumulation", "token_budget"}
    assert res["groups"]["token_budget"]["budget"] == 0 and res["groups"]["token_budget"]["rows"] == {}  # off
    rb = res["groups"]["accumulation"]["systems"]["reasoningbank"]  # Fig. 2a's memory baseline on the same stream
    assert list(rb) == ["0", "4", "8"] and rb["0"]["memory"]["entries"] == 0
    for name, m in res["rows"].items():
        assert 0 <= m["success"] <= 100 and m["n_tasks"] == len(sp.eval), name
        assert set(m["by_condition"]) <= {"same_env", "new_env", "new_surface", "look_alike"}
    assert set(res["groups"]["retention"]["rules"]) == {"utility", "similarity", "recency", "random"}
    acc = res["groups"]["accumulation"]["checkpoints"]
    assert list(acc) == ["0", "4", "8"] and acc["0"]["records"] == 0
    assert acc["0"]["success"] == res["rows"]["none"]["success"]  # an empty store changes nothing
    assert (tmp_path / "u" / "store.json").exists()
    # per-task paired outcomes of every row, in eval order, agreeing with the success figures
    assert res["eval_ids"] == [t.task_id for t in sp.eval] and len(res["conditions_by_task"]) == len(sp.eval)
    for name, m in res["rows"].items():
        assert 100.0 * sum(res["outcomes"][name]) / len(sp.eval) == pytest.approx(m["success"]), name
    assert {f"retention_{r}" for r in ("utility", "similarity", "recency", "random")} <= set(res["outcomes"])
    summary = aggregate([json.loads(json.dumps(res))])
    for name in res["rows"]:
        ci = summary["table"][name]["sql"]["ci"]
        assert ci["lo"] <= summary["table"][name]["sql"]["success"] <= ci["hi"], name
        if name != "none":
            d = summary["table"][name]["sql"]["vs_none"]
            assert d["mean"] == pytest.approx(res["rows"][name]["success"] - res["rows"]["none"]["success"])
    assert summary["table"]["no_condition"]["sql"]["vs_cf_memory"] is not None  # ablations vs the full method
    assert summary["retention"]["sql"]["utility"]["ci"] is not None
    text = format_report(summary, backbone="scripted")
    for key in ("Table 1", "cf_memory", "transfer", "retention", "accumulation", "look-alike",
                "95% interval", "Difference against none", "against the full method", "reasoningbank:",
                "Fig. 2c", "Construction cost per unit"):
        assert key in text, key
    lost = summary["accumulation"]["sql"]["forgetting"]
    assert lost["cf_memory"]["reference"] == 4 and set(lost["cf_memory"]["lost"]) == {"8"}  # the 4 earliest tasks
    assert set(lost["reasoningbank"]["lost"]) == {"8"}
    figs = draw_figures({"summary": summary, "backbone": "scripted"}, tmp_path / "fig")
    assert {p.name for p in figs} == {"accumulation.png", "retention.png", "transfer.png", "ablations.png",
                                      "rescued_broken.png"}
    assert all(p.stat().st_size > 5000 for p in figs)


def _strip_timing(r: dict) -> dict:
    r = dict(r)
    for k in ("timing", "seconds", "cache"):
        r.pop(k, None)
    return r


@pytest.mark.slow
def test_thread_and_process_pools_give_the_serial_results(suite):
    rows = ("none", "cf_memory", "best_of_n", "expel")
    job = UnitJob("sql", str(suite.root), 0, SMALL, rows, BackboneSpec("scripted"), max_tasks=10)
    serial = run_jobs([job, dataclasses.replace(job, seed=1)], workers=1)
    threaded = run_jobs([dataclasses.replace(job, threads=4)], workers=1)
    procs = run_jobs([job, dataclasses.replace(job, seed=1)], workers=2)
    assert _strip_timing(threaded[0]) == _strip_timing(serial[0])
    assert [_strip_timing(r) for r in procs] == [_strip_timing(r) for r in serial]
    assert serial[0]["rows"] != serial[1]["rows"]  # seeds differ


# --------------------------------------------------------------------------- a real HTTP backbone


def _canned(suite):
    """Canned completions for every App. D.8 prompt (:func:`llm_server.canned_sql`): drafts are the
    gold query with `>=` weakened to `>` (the boundary slip), revisions repair `>` to `>=`, the judge
    answers garbage every third call (thread-safe: rows and drafts run concurrently)."""
    import threading

    lock, state = threading.Lock(), {"judge": 0}

    def judge(prompt: str) -> str:
        with lock:
            state["judge"] += 1
            n = state["judge"]
        return "no idea" if n % 3 == 0 else "CHOICE: 2"

    return canned_sql(suite, slip=lambda prompt: True, judge=judge)


@pytest.mark.slow
def test_full_pipeline_through_the_openai_client_against_a_loopback_server(suite):
    from cfjax.llm.openai_client import OpenAIConfig

    with FakeLLMServer(_canned(suite)) as srv:
        spec = BackboneSpec("openai", OpenAIConfig(base_url=srv.base_url, model=srv.model, max_retries=0))
        sp = quick_splits(suite.splits(seed=SMALL.split_seed, n_val=SMALL.n_val), 10)
        res = run_unit(suite, 0, SMALL, backbone=spec.make(suite, 0, SMALL), rows=["all"], splits=sp, threads=4)
        seen = srv.prompts
    kinds = {
        "DRAFT_ACTION": "Write one action that answers the task",
        "GENERATE_LOCAL_ALTERNATIVES": "Propose at most",
        "DISTIL_RECORD": "Distil the checked contrast",
        "REVISE_WITH_RECORD": "A stored correction from an earlier task",
        "BEST_OF_N_JUDGE": "Choose exactly one candidate",
        "EXPEL_INSIGHT": "Extract one transferable lesson",
    }
    for kind, marker in kinds.items():
        assert any(marker in p for p in seen), f"no {kind} prompt reached the server"
    assert res["store"]["records"] > 0
    judge = res["rows"]["best_of_n"]["judge"]
    assert judge["parse_failures"] > 0 and judge["failed_replies"]
    # the server reports usage in characters: the ledger used it
    assert res["rows"]["none"]["tokens"] > 10 * res["rows"]["none"]["n_tasks"] * 50
    assert all(0 <= m["success"] <= 100 for m in res["rows"].values())


@pytest.mark.slow
def test_countermem_notebook_executes(tmp_path):
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    import re
    from pathlib import Path

    from cfjax.experiments.notebooks import execute_notebook, summarize

    path = Path(__file__).resolve().parents[2] / "notebooks" / "countermem.ipynb"
    nb = execute_notebook(path, workdir=tmp_path)
    s = summarize(nb)
    assert s["errors"] == 0 and s["pngs"] == 2  # learning curves + Fig. 3
    assert not any("execution" in c.metadata for c in nb.cells)  # volatile timestamps stripped
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "scripted backbone (seeded simulator, not an LLM)" in text
    assert "APPLIES WHEN:" in text and "EVIDENCE:" in text  # records with evidence and condition
    assert "APPLIES: offered to the selector" in text and "DOES NOT APPLY" in text  # Eq. 7, both ways
    assert "selectors in one jitted program" in text and "always top-1" in text and "DQN best ckpt mean" in text
    assert "Table 1" in text and "pybugs" in text and "sat" in text and "Difference against none" in text
    assert re.search(r"\d+\.\d \[\d+\.\d, \d+\.\d\]", text)  # success with its interval

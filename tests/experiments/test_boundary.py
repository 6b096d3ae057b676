"""The information boundary, tested (shared/DESIGN.md "The information boundary").

Agent-side code — backbones (the scripted one included), generator, distiller, judge, lesson
extractor, retrieval, selector — receives a :class:`~cfjax.types.Task` without gold, family, variant
or trap flags. Those live in :class:`~cfjax.types.AnswerKey`, readable under
:func:`~cfjax.types.answer_key_guard` only from ``cfjax.domains.*`` (worlds, suites, the simulator's
competence interface) and ``cfjax.experiments.*`` (analysis). A whole experiment unit runs under
the guard here: any agent-side read of a key fails the test. (Anti-Persistence's synthesizers and
bandit run under the guard in tests/antipersist/test_antipersist.py.)
"""

from __future__ import annotations

import dataclasses
import random
import typing

import pytest

from cfjax.config import CounterMemConfig
from cfjax.countermem.conditions import parse_condition
from cfjax.countermem.generator import expand_failure
from cfjax.countermem.store import MemoryStore
from cfjax.domains import build_suite
from cfjax.experiments.countermem import quick_splits, run_unit
from cfjax.infra.cache import CachedWorld
from cfjax.infra.ledger import Ledger
from cfjax.llm import prompts
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax import types as T
from cfjax.types import (AnswerKey, AnswerKeyAccessError, Attempt, DistilRequest, DraftRequest, InsightRequest,
                         JudgeRequest, MemoryText, ReviseRequest, Task, answer_key_guard)

HIDDEN = {"gold", "family", "variant", "ordered", "trap", "trap_flag", "answer_key", "key"}

SMALL = CounterMemConfig()
SMALL = dataclasses.replace(SMALL, seeds=(0,), dqn=dataclasses.replace(SMALL.dqn, total_decisions=80,
                                                                       checkpoint_every=40),
                            experiment=dataclasses.replace(SMALL.experiment, accumulation_checkpoints=(0, 4)))


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    root = tmp_path_factory.mktemp("boundary")
    return {n: build_suite(n, root / n) for n in ("sql", "pybugs", "sat")}


def test_task_and_requests_carry_no_hidden_field():
    assert not HIDDEN & {f.name for f in dataclasses.fields(Task)}
    for name in ("DraftRequest", "AlternativesRequest", "DistilRequest", "ReviseRequest", "JudgeRequest",
                 "InsightRequest", "MemoryText", "Attempt", "Outcome"):
        cls = getattr(T, name)
        hints = typing.get_type_hints(cls)
        assert not HIDDEN & set(hints), name
        assert AnswerKey not in hints.values(), name


def test_suite_tasks_show_no_answer(suites):
    for s in suites.values():
        assert isinstance(s, T.Domain)
        assert set(s.keys) == {t.task_id for t in s.tasks}
        for t in s.tasks:
            assert not HIDDEN & set(t.attrs), (t.task_id, sorted(t.attrs))
            gold = s.keys[t.task_id].gold
            assert gold.strip() not in t.context and gold.strip() not in t.question
            assert all(not (isinstance(v, str) and v.strip() == gold.strip()) for v in t.attrs.values())


def test_guard_refuses_agent_side_modules_and_allows_worlds_and_analysis():
    key = AnswerKey("t", "SELECT 1", "lower_bound", "look_alike")
    with answer_key_guard():
        for mod in ("cfjax.countermem.agent", "cfjax.llm.scripted", "cfjax.antipersist.guidance", "cfjax.infra.index",
                    "cfjax.loop"):
            for field in ("gold", "family", "variant", "ordered", "extra"):
                with pytest.raises(AnswerKeyAccessError, match=mod):
                    exec(f"key.{field}", {"__name__": mod, "key": key})
        for mod in ("cfjax.domains.sql.world", "cfjax.experiments.metrics", "tests.analysis"):
            assert eval("key.gold", {"__name__": mod, "key": key}) == "SELECT 1"
    assert key.family == "lower_bound"  # off: anyone may read (the guard costs a frame lookup)


def test_scripted_backbone_calls_read_no_key(suites):
    """Every call the scripted backbone answers runs under the guard; the answer reaches it only through
    the domain's competence interface (draft, true_fixes), which lives in cfjax.domains."""
    for name, s in suites.items():
        bb = ScriptedBackbone(s.scripted_domain(), ScriptedConfig(seed=0, p_error=1.0, p_propose_fix=1.0))
        world = s.world()
        t = next(t for t in s.tasks if s.keys[t.task_id].variant == "base")
        with answer_key_guard():
            d = bb.draft_action(DraftRequest(t)).action
            out = world.evaluate(t, d)
            units = [u.text for u in s.edits.units(d)]
            alts = bb.generate_local_alternatives(T.AlternativesRequest(t, (), d, out.feedback, units))
            assert alts.edits, name
            i, new = alts.edits[0]
            after = s.edits.replace_unit(d, i, new)
            diff = s.edits.diff_units(d, after)
            dist = bb.distil_record(DistilRequest(t, d, after, diff[1].text, diff[2].text, "checked"))
            rv = bb.revise_with_record(ReviseRequest(t, (), d, MemoryText("record", f"EDIT: {diff[1].text} -> "
                                                                                      f"{diff[2].text}")))
            bb.judge_candidates(JudgeRequest(t, (), (d, rv.action)))
            bb.extract_insight(InsightRequest(t, (Attempt(d, out.feedback, out.score),), False))
        # the condition names only attributes the DISTIL_RECORD prompt showed
        shown = prompts.render_distil(DistilRequest(t, d, after, diff[1].text, diff[2].text, "checked"))
        for attr in parse_condition(dist.condition).attributes() - {"question"}:
            assert f"  {attr} = " in shown, (name, attr, dist.condition)


def test_generator_and_distiller_read_no_key(suites):
    s = suites["sql"]
    bb = ScriptedBackbone(s.scripted_domain(), ScriptedConfig(seed=0, p_error=1.0, p_noise=0.0))
    world = CachedWorld(s.world())
    store = MemoryStore(SMALL.store, SMALL.retrieval, edits=s.edits)
    with answer_key_guard():
        done = 0
        for t in s.tasks[:40]:
            d = bb.draft_action(DraftRequest(t)).action
            out = world.evaluate(t, d)
            if out.solved or not out.completed:
                continue
            expand_failure(t, (), d, out, backbone=bb, world=world, store=store, config=SMALL.generator,
                           schema=s.envs()[t.env_id], rng=random.Random(0), ledger=Ledger("g"), budget=[12],
                           edits=s.edits)
            done += 1
        assert done and len(store) > 0
        store.freeze()
        t = s.tasks[41]
        assert store.retrieve(t, t.question) is not None  # retrieval under the guard


@pytest.mark.parametrize("name,rows,max_tasks", [("sql", ["all"], 8), ("pybugs", ["none", "best_of_n", "expel",
                                                                                   "wm_without_cf"], 5),
                                                 ("sat", ["none", "best_of_n", "expel", "cf_without_wm"], 6)])
def test_a_whole_unit_runs_with_answer_keys_unreadable_outside_worlds_and_analysis(suites, name, rows, max_tasks):
    s = suites[name]
    sp = quick_splits(s.splits(seed=SMALL.split_seed, n_val=SMALL.n_val), max_tasks)
    bb = ScriptedBackbone(s.scripted_domain(), ScriptedConfig(seed=0))
    with answer_key_guard():
        res = run_unit(s, 0, SMALL, backbone=bb, rows=rows, splits=sp)
    assert res["rows"]["cf_memory"]["n_tasks"] == len(sp.eval)
    assert set(res["rows"]) >= {"none", "cf_memory"}

"""The information boundary, tested (shared/DESIGN.md "The information boundary").

Agent-side code — backbones (the scripted one included), generator, distiller, judge, lesson
extractor, retrieval, selector — receives a :class:`~cfjax.types.Task` without gold, family, variant
or trap flags. Those live in :class:`~cfjax.types.AnswerKey`, readable under
:func:`~cfjax.types.answer_key_guard` only from ``cfjax.domains.*`` (worlds, suites, the simulator's
competence interface) and ``cfjax.experiments.*`` (analysis) — never from a module marked agent-side
(:data:`~cfjax.types.AGENT_SIDE_MARKER`: the user-suite drafters, the MemSyco-like answerer), whatever
its prefix. A whole experiment unit runs under
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
from cfjax.experiments.countermem.runner import quick_splits, run_unit
from cfjax.infra.cache import CachedWorld
from cfjax.infra.ledger import Ledger
from cfjax.llm import prompts
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax import types as T
from cfjax.countermem import calls as cm_calls
from cfjax.countermem.calls import DISTIL_RECORD, GENERATE_LOCAL_ALTERNATIVES, DistilRequest, render_distil
from cfjax.expel import calls as expel_calls
from cfjax.expel.calls import EXPEL_INSIGHT, InsightRequest
from cfjax.llm.calls import BEST_OF_N_JUDGE, DRAFT_ACTION, REVISE_WITH_RECORD
from cfjax.types import (AnswerKey, AnswerKeyAccessError, Attempt, DraftRequest, JudgeRequest, MemoryText,
                         ReviseRequest, Task, answer_key_guard)
from cfjax.registry import DOMAINS
from tests.domains import contract

HIDDEN = contract.HIDDEN  # fields an agent-side object must never carry

SMALL = CounterMemConfig()
SMALL = dataclasses.replace(SMALL, seeds=(0,), dqn=dataclasses.replace(SMALL.dqn, total_decisions=80,
                                                                       checkpoint_every=40),
                            experiment=dataclasses.replace(SMALL.experiment, accumulation_checkpoints=(0, 4)))


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    root = tmp_path_factory.mktemp("boundary")
    return {n: build_suite(n, root / n) for n in DOMAINS.names()}


def test_task_and_requests_carry_no_hidden_field():
    assert not HIDDEN & {f.name for f in dataclasses.fields(Task)}
    home = {"AlternativesRequest": cm_calls, "DistilRequest": cm_calls, "InsightRequest": expel_calls}
    for name in ("DraftRequest", "AlternativesRequest", "DistilRequest", "ReviseRequest", "JudgeRequest",
                 "InsightRequest", "MemoryText", "Attempt", "Outcome"):
        cls = getattr(home.get(name, T), name)
        hints = typing.get_type_hints(cls)
        assert not HIDDEN & set(hints), name
        assert AnswerKey not in hints.values(), name


def test_suite_tasks_show_no_answer(suites):
    for s in suites.values():
        contract.check_tasks_show_no_answer(s)


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


#: agent-side simulators that live under a trusted prefix, marked so that the guard watches them
AGENT_SIDE_MODULES = ("cfjax.domains.drafting", "cfjax.domains.sql.user_draft", "cfjax.domains.python.user_draft",
                      "cfjax.domains.sat.user_draft", "cfjax.experiments.upliftmem.memsyco.answerer",
                      "cfjax.experiments.upliftmem.memsyco.executor")


def test_a_module_marked_agent_side_is_never_trusted():
    """``__cfjax_agent_side__ = True`` overrides a trusted prefix (and applies outside ``cfjax`` too);
    the same names unmarked read as before."""
    key = AnswerKey("t", "SELECT 1", "lower_bound", "look_alike")
    with answer_key_guard():
        for mod in ("cfjax.domains.sql.user_draft", "cfjax.experiments.upliftmem.memsyco.answerer", "tests.my_agent"):
            for field in ("gold", "family", "variant", "ordered", "extra"):
                with pytest.raises(AnswerKeyAccessError, match="agent-side"):
                    exec(f"key.{field}", {"__name__": mod, T.AGENT_SIDE_MARKER: True, "key": key})
            assert eval("key.gold", {"__name__": mod, T.AGENT_SIDE_MARKER: False, "key": key}) == "SELECT 1"
    assert eval("key.gold", {"__name__": "cfjax.domains.sql.user_draft", T.AGENT_SIDE_MARKER: True,
                             "key": key}) == "SELECT 1"  # guard off: nothing is checked


def test_the_agent_side_simulators_are_marked_and_watched():
    """Every agent-side simulator under ``cfjax.domains`` / ``cfjax.experiments`` carries the marker, and a
    function of that module reading a key fails under the guard (its real module globals)."""
    import importlib
    import types

    from cfjax.domains.python.user import UserPyScript
    from cfjax.domains.sat.user import UserSatScript
    from cfjax.domains.sql.user import UserSQLScript

    def peek(k):
        return k.gold

    key = AnswerKey("t", "SELECT 1")
    for name in AGENT_SIDE_MODULES:
        mod = importlib.import_module(name)
        assert getattr(mod, T.AGENT_SIDE_MARKER, None) is True, name
        with answer_key_guard(), pytest.raises(AnswerKeyAccessError, match=name):
            types.FunctionType(peek.__code__, vars(mod))(key)
    # the drafters' own code (every class of their MRO under cfjax.domains) is in marked modules
    for cls in (UserSQLScript, UserPyScript, UserSatScript):
        for k in cls.__mro__:
            if k.__module__.startswith("cfjax.domains"):
                assert k.__module__ in AGENT_SIDE_MODULES, (cls.__name__, k.__module__)


def test_scripted_backbone_calls_read_no_key(suites):
    """Every call the scripted backbone answers runs under the guard; the answer reaches it only through
    the domain's competence interface (draft, true_fixes), which lives in cfjax.domains."""
    for s in suites.values():
        contract.check_scripted_calls_read_no_key(s)


def test_generator_and_distiller_read_no_key(suites):
    s = suites["sql"]
    bb = ScriptedBackbone(s.scripted_domain(), ScriptedConfig(seed=0, p_error=1.0, p_noise=0.0))
    world = CachedWorld(s.world())
    store = MemoryStore(SMALL.store, SMALL.retrieval, edits=s.edits)
    with answer_key_guard():
        done = 0
        for t in s.tasks[:40]:
            d = bb.call(DRAFT_ACTION, DraftRequest(t)).action
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


#: rows and evaluation tasks of the whole-unit run per built-in domain (sized to keep the test short)
UNIT = {"sql": (["all"], 8), "pybugs": (["none", "best_of_n", "expel", "wm_without_cf"], 5),
        "sat": (["none", "best_of_n", "expel", "cf_without_wm"], 6)}


@pytest.mark.parametrize("name", DOMAINS.names())
def test_a_whole_unit_runs_with_answer_keys_unreadable_outside_worlds_and_analysis(suites, name):
    rows, max_tasks = UNIT.get(name, (["none", "best_of_n", "expel", "cf_without_wm"], 5))
    contract.check_unit_under_guard(suites[name], SMALL, rows, max_tasks)

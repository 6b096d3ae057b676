"""Shared fixtures of the peer tests: a built SQL suite, a small CounterMem config, and one quick unit of
``countermem run`` through the OpenAI client against the loopback server (tests/llm_server.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from llm_server import FakeLLMServer, canned_sql

from cfjax.config import CounterMemConfig

SMALL = CounterMemConfig()
SMALL = dataclasses.replace(SMALL, seeds=(0,), dqn=dataclasses.replace(SMALL.dqn, total_decisions=40,
                                                                       checkpoint_every=20))


@pytest.fixture(scope="session")
def sql_suite(tmp_path_factory):
    from cfjax.domains import build_suite

    return build_suite("sql", tmp_path_factory.mktemp("peers") / "sql")


def openai_unit(suite, row: str, extra: Callable[[str], str | None], *, max_tasks: int = 6) -> tuple[dict, list[str]]:
    """Rows ``none`` and ``row`` of one quick unit with an OpenAI backbone on a loopback server.

    ``extra(prompt)`` answers the peer's own prompts (``None``: the SQL canned responder answers —
    drafts with the boundary slip, revisions that repair it). Returns the unit's result and every prompt
    the server saw."""
    from cfjax.experiments.countermem.runner import BackboneSpec, quick_splits, run_unit
    from cfjax.llm.openai_client import OpenAIConfig

    base = canned_sql(suite, slip=lambda prompt: True)

    def reply(prompt: str) -> str:
        r = extra(prompt)
        return base(prompt) if r is None else r

    with FakeLLMServer(reply) as srv:
        spec = BackboneSpec("openai", OpenAIConfig(base_url=srv.base_url, model=srv.model, max_retries=0))
        sp = quick_splits(suite.splits(seed=SMALL.split_seed, n_val=SMALL.n_val), max_tasks)
        res = run_unit(suite, 0, SMALL, backbone=spec.make(suite, 0, SMALL), rows=["none", row], splits=sp,
                       threads=2)
        seen = srv.prompts
    return res, seen


def openai_system(suite, name: str, extra: Callable[[str], str | None], *, n_build: int = 4, n_eval: int = 4,
                  max_attempts: int = 2) -> tuple[dict, list[str]]:
    """A quick unit of any registered memory system, whatever runners it declares, through the OpenAI
    client against the loopback server: built from the memory-free episodes of ``n_build`` source tasks,
    frozen, evaluated with its recall on ``n_eval`` held-out tasks (the ``compare`` protocol).

    Returns ``({"success", "build_llm_calls", "eval_llm_calls", "summary"}, prompts seen)``."""
    from cfjax.infra.cache import CachedWorld
    from cfjax.infra.ledger import Ledger
    from cfjax.llm.openai_client import OpenAIBackbone, OpenAIConfig
    from cfjax.memory import SystemContext, build_experience, recall_episode, rollout_fn
    from cfjax.registry import MEMORY_SYSTEMS

    base = canned_sql(suite, slip=lambda prompt: True)
    info = MEMORY_SYSTEMS.get(name)
    sp = suite.splits(seed=SMALL.split_seed, n_val=SMALL.n_val)
    world = CachedWorld(suite.world())

    def reply(prompt: str) -> str:
        r = extra(prompt)
        return base(prompt) if r is None else r

    with FakeLLMServer(reply) as srv:
        bb = OpenAIBackbone(OpenAIConfig(base_url=srv.base_url, model=srv.model, max_retries=0))
        led = Ledger(f"{name}/build")
        system = info.make(SystemContext(bb, suite.edits, max_attempts, 0, led,
                                         rollout_fn(backbone=bb, world=world, edits=suite.edits, ledger=led,
                                                    max_attempts=max_attempts)))
        system.build(build_experience(list(sp.build)[:n_build], backbone=bb, world=world, edits=suite.edits,
                                      ledger=led, episode0=1000, max_attempts=max_attempts))
        system.freeze()
        ev = Ledger("eval")
        solved = [recall_episode(t, system, info, backbone=bb, world=world, edits=suite.edits, ledger=ev,
                                 episode=2000 + i, max_attempts=max_attempts).solved
                  for i, t in enumerate(list(sp.eval)[:n_eval])]
        seen = srv.prompts
        bb.close()
    return ({"success": 100.0 * sum(solved) / len(solved), "build_llm_calls": led.total.llm_calls,
             "eval_llm_calls": ev.total.llm_calls, "summary": system.summary()}, seen)

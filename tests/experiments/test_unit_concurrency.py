"""Issue 23: what runs at once, and that it changes nothing.

* the first drafts of memory construction and selector training requested ahead
  (:class:`cfjax.loop.DraftPrefetch`) give the store, the selector and the ledgers of the serial loop;
* units of an LLM job share one client (:class:`cfjax.llm.openai_client.SharedTransport`): the server
  never sees more than ``max_inflight`` requests from all of them, and the results are those of the
  units run one after another.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np
import pytest

from llm_server import FakeLLMServer, canned_sql

from cfjax.config import CounterMemConfig, quick
from cfjax.countermem.agent import Agent
from cfjax.countermem.pipeline import construct, train_selector
from cfjax.countermem.store import MemoryStore
from cfjax.experiments.countermem.runner import BackboneSpec, concurrent_units, quick_splits, run_main
from cfjax.infra.cache import CachedWorld
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.openai_client import OpenAIBackbone, OpenAIConfig, SharedTransport
from cfjax.llm.scripted import ScriptedBackbone
from cfjax.loop import DraftPrefetch
from cfjax.types import DraftRequest


@pytest.fixture(scope="module")
def sql_suite(tmp_path_factory):
    from cfjax.domains import build_suite

    return build_suite("sql", tmp_path_factory.mktemp("suite") / "sql")


class _Counting:
    """A backbone wrapper that counts calls (thread-safe) — to see that nothing is sent twice."""

    def __init__(self, inner) -> None:
        self.inner, self.calls, self.lock = inner, 0, threading.Lock()

    def call(self, kind, req):
        with self.lock:
            self.calls += 1
        return self.inner.call(kind, req)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _agent(suite, cfg, backbone):
    store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    world = CachedWorld(suite.world(timeout_s=cfg.world_timeout_s, feedback=cfg.world_feedback))
    return Agent(backbone, world, cfg, store=store, envs=dict(suite.envs()), edits=suite.edits)


def test_prefetched_construction_and_training_equal_the_serial_loop(sql_suite):
    cfg = quick(CounterMemConfig())
    cfg = dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, total_decisions=60, checkpoint_every=30,
                                                           learning_starts=10))
    splits = quick_splits(sql_suite.splits(seed=12345, n_val=4), 8)
    out = {}
    for mode in ("serial", "prefetch"):
        bb = _Counting(ScriptedBackbone(sql_suite.scripted_domain(), dataclasses.replace(cfg.scripted, seed=0)))
        ag = _agent(sql_suite, cfg, bb)
        with ThreadPoolExecutor(8) as pool:
            p = pool if mode == "prefetch" else None
            led_c = construct(ag, splits.build, seed=0, pool=p)
            params, log, led_t = train_selector(ag, splits.train, splits.val, seed=0, pool=p)
        out[mode] = (ag.store.to_payload(), led_c.as_dict(), led_t.as_dict(), log.decisions, log.episodes,
                     log.checkpoints, [np.asarray(x).tobytes() for x in jax.tree.leaves(params)], bb.calls)
    s, q = out["serial"], out["prefetch"]
    assert json.dumps(s[0], sort_keys=True, default=str) == json.dumps(q[0], sort_keys=True, default=str)
    assert s[1:] == q[1:]  # ledgers, schedule, checkpoints, parameters and the number of calls sent


def test_draft_prefetch_hands_out_each_reply_once_and_counts_leftovers(sql_suite):
    bb = _Counting(ScriptedBackbone(sql_suite.scripted_domain()))
    t = sql_suite.tasks[:3]
    with ThreadPoolExecutor(2) as pool:
        pf = DraftPrefetch(bb, pool)
        pf.ahead([(t[0], 7), (t[1], 7), (t[0], 7)])  # a repeated request is not sent twice
        got = pf.take(t[0], 7)
        assert got == bb.inner.call(DRAFT_ACTION, DraftRequest(t[0], (), 7))
        assert pf.take(t[0], 7) is None and pf.take(t[2], 7) is None  # taken, never requested
        pf.close()
    assert (pf.taken, pf.unused, bb.calls) == (1, 1, 2)  # two requests sent, one taken, one left over


def test_shared_transport_bounds_the_requests_of_every_backbone_on_it(sql_suite):
    with FakeLLMServer(canned_sql(sql_suite), latency_s=0.05) as srv, SharedTransport(3) as tr:
        cfgs = [OpenAIConfig(base_url=srv.base_url, model=srv.model, max_inflight=16, seed=s) for s in (0, 1)]
        a, b = (OpenAIBackbone(c, transport=tr) for c in cfgs)
        assert a.max_inflight == b.max_inflight == 3
        reqs = [DraftRequest(t, (), 0) for t in sql_suite.tasks[:12]]
        with ThreadPoolExecutor(24) as ex:
            list(ex.map(lambda r: a.call(DRAFT_ACTION, r), reqs) )
            list(ex.map(lambda r: (a if reqs.index(r) % 2 else b).call(DRAFT_ACTION, r), reqs))
        assert srv.inflight_profile()["max"] <= 3
        a.close()
        b.call(DRAFT_ACTION, reqs[0])  # closing one backbone leaves the shared client open
        with pytest.raises(RuntimeError, match="closed"):
            a.call(DRAFT_ACTION, reqs[0])
        with pytest.raises(ValueError, match="one server"):
            OpenAIBackbone(OpenAIConfig(base_url=srv.base_url + "/other", model=srv.model), transport=tr)
        with pytest.raises(RuntimeError, match="shares a transport"):
            b.max_inflight = 5
        b.close()


def test_concurrent_units_default_and_override(monkeypatch):
    spec = BackboneSpec("openai", OpenAIConfig(base_url="http://127.0.0.1:1/v1", model="m"), inflight=32)
    assert concurrent_units(spec, 27) == 8 and concurrent_units(spec, 3) == 3 and concurrent_units(spec, 1) == 1
    assert concurrent_units(BackboneSpec("scripted"), 27) == 1
    monkeypatch.setenv("CFJAX_CONCURRENT_UNITS", "2")
    assert concurrent_units(spec, 27) == 2
    monkeypatch.setenv("CFJAX_CONCURRENT_UNITS", "zero")
    with pytest.raises(ValueError, match="CFJAX_CONCURRENT_UNITS"):
        concurrent_units(spec, 27)


@pytest.mark.slow
def test_units_on_one_shared_client_equal_units_one_after_another(tmp_path, sql_suite, monkeypatch):
    """Two units of an LLM job at once on one client: the server never sees more than max_inflight,
    and every figure is the one the units give when run one after another."""
    cfg = dataclasses.replace(quick(CounterMemConfig()), seeds=(0, 1))
    cfg = dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, total_decisions=40, checkpoint_every=20,
                                                           learning_starts=10))
    res = {}
    for mode, n in (("serial", "1"), ("together", "2")):
        monkeypatch.setenv("CFJAX_CONCURRENT_UNITS", n)
        with FakeLLMServer(canned_sql(sql_suite), latency_s=0.01) as srv:
            spec = BackboneSpec("openai", OpenAIConfig(base_url=srv.base_url, model=srv.model, max_inflight=4,
                                                       backoff_s=0.01, timeout_s=10.0), inflight=4)
            r = run_main(cfg, suites=["sql"], out=tmp_path / mode, rows=("none", "cf_memory"), backbone=spec,
                         max_tasks=6, progress=False, log=lambda s: None)
            res[mode] = (r, srv.inflight_profile())
    (a, pa), (b, pb) = res["serial"], res["together"]
    assert pb["max"] <= 4 and pa["max"] <= 4
    assert a["outcomes"] == b["outcomes"] and a["summary"] == b["summary"]
    for ua, ub in zip(a["units"], b["units"]):
        assert (ua["seed"], ua["rows"], ua["store"], ua["train"]) == (ub["seed"], ub["rows"], ub["store"], ub["train"])

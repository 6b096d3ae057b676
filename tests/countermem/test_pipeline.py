"""End to end: Algorithm 1 on a small slice of the SQL suite with the scripted backbone."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from cfjax.infra.checkpoint import load_params
from cfjax.cli import main
from cfjax.config import CounterMemConfig, load_toml
from cfjax.countermem.agent import Agent, skip_policy
from cfjax.countermem.pipeline import construct, episode_return, evaluate, train_selector
from cfjax.countermem.store import FrozenStoreError, MemoryStore
from cfjax.kernels import dqn
from cfjax.llm.scripted import SCRIPTED_LABEL, ScriptedBackbone, ScriptedConfig
from cfjax.types import Splits
from cfjax.domains.sql.edits import SQLEdits

SQL_EDITS = SQLEdits()



@pytest.fixture(scope="module")
def small(suite):
    s = suite.splits(seed=7)
    return Splits(s.build[:40], s.train[:24], s.val[:6], s.eval[:24])


@pytest.fixture(scope="module")
def cfg():
    c = CounterMemConfig(seeds=(0,))
    return dataclasses.replace(c, dqn=dataclasses.replace(c.dqn, total_decisions=120, learning_starts=20,
                                                           checkpoint_every=60, target_sync_every=40))


@pytest.fixture(scope="module")
def built(suite, small, cfg):
    world = suite.world()
    store = MemoryStore(cfg.store, cfg.retrieval, edits=SQL_EDITS)
    agent = Agent(ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0)), world, cfg, store=store,
                  envs=suite.specs, edits=suite.edits)
    ledger = construct(agent, small.build, seed=0)
    return agent, ledger


def test_construction_builds_verified_records_and_freezes(built):
    agent, ledger = built
    store = agent.store
    assert store.frozen
    assert len(store) > 0
    for rec in store.records.values():
        assert rec.delta > store.config.eps_adm  # verification gate (App. B.1)
        assert rec.score_after > rec.score_before
    assert ledger.verification.eval_calls > 0  # counterfactual checks are charged (App. D.6)
    assert ledger.total.eval_calls >= ledger.verification.eval_calls
    with pytest.raises(FrozenStoreError):
        store.update_reuse(next(iter(store.records)), 1)


def test_evaluation_leaves_the_store_untouched_and_is_paired(built, small, cfg):
    agent, _ = built
    before = json.dumps(agent.store.to_payload(), sort_keys=True)
    row_none, eps_none, _ = evaluate(agent, small.eval, skip_policy, memory=False, method="none")
    sel = dqn.jit_selector(dqn.make_dqn(cfg.dqn))
    params = sel.init(__import__("jax").random.PRNGKey(0), cfg.dqn.hparams()).params

    def greedy(z, m):
        return int(sel.greedy(params, z, m))

    row_cf, eps_cf, _ = evaluate(agent, small.eval, greedy, memory=True, method="cf_memory")
    assert json.dumps(agent.store.to_payload(), sort_keys=True) == before
    # the first memory-free drafts are identical in the paired rows
    assert [e.decisions[0].draft for e in eps_none] == [e.decisions[0].draft for e in eps_cf]
    assert row_none["coverage"] is None and row_none["harmful_use"] is None
    assert 0.0 <= row_cf["coverage"] <= 1.0
    # retrieval never returns a record from the task itself (Eq. 7)
    for ep in eps_cf:
        for d in ep.decisions:
            if d.record_id is not None:
                assert agent.store.records[d.record_id].source_task != ep.task.task_id


def test_selector_training_and_checkpoint_selection(built, small, cfg):
    agent, _ = built
    params, log, ledger = train_selector(agent, small.train, small.val, seed=0)
    assert log.decisions == cfg.dqn.total_decisions
    assert [c[0] for c in log.checkpoints] == [60, 120]
    assert log.best_return == max(c[1] for c in log.checkpoints)
    assert log.updates > 0
    assert ledger.total.eval_calls == log.decisions  # one evaluator call per decision


def test_episode_return_is_eq10(built, small, cfg):
    agent, _ = built
    from cfjax.infra.ledger import Ledger

    ep = agent.run_episode(small.eval[0], skip_policy, Ledger("x"), episode=5, memory=False)
    d = cfg.dqn
    expected = sum(float(i == len(ep.decisions) - 1 and x.solved) - d.lam_w - d.lam_f * x.failed
                   - d.lam_tau * x.tokens / d.tau0 for i, x in enumerate(ep.decisions))
    assert episode_return(ep, cfg) == pytest.approx(expected)


@pytest.mark.slow
def test_cli_main_job_writes_results(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["countermem", "run", "--suite", "sql", "--out", str(out), "--seeds", "0", "--split-seeds", "12345",
               "--decisions", "100",
               "--max-tasks", "16", "--rows", "none", "cf_memory", "--no-progress", "--workers", "1"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "scripted backbone" in printed and "cf_memory" in printed and "none" in printed
    res = json.loads((out / "results.json").read_text())
    assert res["backbone"] == SCRIPTED_LABEL and res["suites"] == ["sql"]
    assert res["rows"] == ["none", "cf_memory"]
    for method in ("none", "cf_memory"):
        m = res["summary"]["table"][method]["sql"]
        assert {"success", "success_std", "tokens", "calls_per_solved", "failed_per_solved", "coverage",
                "harmful_use"} <= set(m)
        assert 0.0 <= m["success"] <= 100.0
    assert res["summary"]["table"]["none"]["sql"]["coverage"] is None
    ci = res["summary"]["table"]["cf_memory"]["sql"]["ci"]
    assert ci["lo"] <= res["summary"]["table"]["cf_memory"]["sql"]["success"] <= ci["hi"]
    assert len(res["outcomes"]["sql"]["12345"]["rows"]["none"][0]) == len(res["outcomes"]["sql"]["12345"]["task_ids"])
    store = MemoryStore.load(out / "sql" / "split_12345" / "seed_0" / "store.json", SQL_EDITS)
    assert store.frozen
    params, meta = load_params(out / "sql" / "split_12345" / "seed_0" / "selector")
    assert meta["seed"] == 0 and meta["suite"] == "sql"
    q = dqn.jit_selector(dqn.make_dqn(dqn.DQNConfig())).q_values(params, np.zeros((98,), np.float32))
    assert q.shape == (5,)
    cfg = load_toml(CounterMemConfig, out / "config.toml")
    assert cfg.dqn.total_decisions == 100 and cfg.seeds == (0,)
    assert (out / "report.txt").read_text().startswith("CounterMem — " + SCRIPTED_LABEL)


def test_cli_rejects_unknown_suite(tmp_path, capsys):
    assert main(["countermem", "run", "--suite", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown suite" in capsys.readouterr().err

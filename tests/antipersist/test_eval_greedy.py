"""Held-out evaluation is frozen and greedy; the embedding text lets the ρ fallback fire; retrieval is
filtered by an observable task type (papers/anti-persistence.md §3.2 Eq. 3, App. B.3–B.5, D.1)."""

from __future__ import annotations

import dataclasses
import hashlib
import random

import numpy as np
import pytest

from cfjax.antipersist.guidance import MODES, Attempt, Trajectory
from cfjax.antipersist.memory import TrajectoryMemory, embed_text, task_type
from cfjax.antipersist.outcome_log import OutcomeLog
from cfjax.antipersist.protocol import (EVAL_BRANCHES, APConfig, eval_decisions, make_greedy_selector, make_selector,
                                        new_state, run_method, run_task)
from cfjax.kernels import bandit as bk
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.types import Task, answer_key_guard

# the default bandit config, as in test_antipersist.py, so the jitted selectors compile once per session
CFG = dataclasses.replace(APConfig(), iterations=2, tasks_per_iteration=12, seeds=(42,), split_seeds=(12345,))


def _unit(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


def _reference(log: OutcomeLog, query: np.ndarray, cfg: bk.BanditConfig) -> tuple[set[str], np.ndarray, bool]:
    """Independent float64 reference of the greedy rule from the log's entries: the modes whose r̂ is
    within float tolerance of the best supported r̂ (or of the global-best mean on the fallback branch),
    the r̂ vector and whether the fallback applies."""
    es = log.entries
    emb = np.array([e.embedding for e in es], np.float64)
    sim = emb @ np.asarray(query, np.float64) / (np.linalg.norm(emb, axis=1) * np.linalg.norm(query) + cfg.sim_eps)
    nb = np.argsort(-sim, kind="stable")[: cfg.b_hat]
    t_max = nb.max()
    w = np.maximum(sim[nb], 0.0) * cfg.gamma ** (t_max - nb)
    modes = np.array([MODES.index(es[i].mode) for i in nb])
    rew = np.array([es[i].reward for i in nb])
    wsum = np.array([w[modes == m].sum() for m in range(4)])
    r_hat = np.array([(w[modes == m] * rew[modes == m]).sum() / wsum[m] if wsum[m] > 0 else 0.0 for m in range(4)])
    fallback = sim[nb].mean() < cfg.rho or not (wsum > 0).any()
    if fallback:
        allm = np.array([MODES.index(e.mode) for e in es])
        allr = np.array([e.reward for e in es])
        g = np.array([allr[allm == m].mean() if (allm == m).any() else -np.inf for m in range(4)])
        best = {MODES[m] for m in range(4) if g[m] >= g.max() - 1e-5}
    else:
        best = {MODES[m] for m in range(4) if wsum[m] > 0 and r_hat[m] >= r_hat[wsum > 0].max() - 1e-5}
    return best, r_hat, fallback


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _NoExploration:
    """A training selector that must not be called at evaluation."""

    def __call__(self, *a, **k):
        raise AssertionError("the training (exploring) selector was called during held-out evaluation")


def test_greedy_kernel_drops_the_bonus_epsilon_round_robin_and_warmup():
    """A constructed log (the protocol's shapes and default config, so nothing extra compiles): 'none' is
    well supported with reward 1.0, 'imitation' has one neighbour with 0.95, 'strategic' and 'corrective'
    are absent. Training explores (round-robin, then the W_init warm-up forces an absent mode); the
    greedy evaluation rule picks argmax r̂ over the supported modes."""
    cfg = APConfig().bandit
    dim, cap = 512, APConfig().log_capacity
    log = bk.empty_log(cap, dim)
    rng = np.random.default_rng(0)
    base = _unit(rng.normal(size=dim))
    for i, (m, r) in enumerate([(0, 1.0)] * 6 + [(1, 0.95)]):
        log.emb[i] = _unit(base + 0.01 * rng.normal(size=dim))
        log.mode[i], log.reward[i], log.t[i], log.valid[i] = m, r, i, True
    q = np.zeros((64, dim), np.float32)
    q[0] = base
    far = _unit(rng.normal(size=dim))
    q[1] = far - (far @ base) * base  # orthogonal to the log: mean neighbourhood similarity ≈ 0 < ρ
    d = make_greedy_selector(cfg)(log, q)
    assert int(d.mode[0]) == bk.NONE and EVAL_BRANCHES[int(d.branch[0])] == "knn_greedy"
    assert bool(d.supported[0, 0]) and bool(d.supported[0, 1]) and not d.supported[0, 2:].any()
    assert float(d.r_hat[0, 1]) == pytest.approx(0.95)
    assert EVAL_BRANCHES[int(d.branch[1])] == "fallback" and int(d.mode[1]) == bk.NONE  # global best: 1.0 > 0.95
    train = make_selector(cfg)
    key = np.array([0, 1], np.uint32)
    assert int(train(log, q[0], 0, 2, key).branch) == bk.ROUND_ROBIN
    t = train(log, q[0], 5, 0, key)
    assert (int(t.branch), int(t.mode)) == (bk.WARMUP, bk.STRATEGIC)  # the least-used mode is forced


def test_held_out_evaluation_is_greedy_frozen_and_writes_nothing(suite, tmp_path):
    """Train a real anti-persistence state; then every held-out decision (a) never calls the exploring
    selector, (b) equals argmax of the estimated mean reward r̂ (independent float64 reference) or the
    global best on the ρ fallback, (c) is the same decided alone or in one batch, and (d) leaves the
    outcome log's length and bytes unchanged."""
    sp = suite.splits(seed=12345)
    world, bb = suite.world(), ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=42))
    states = []
    cfg = dataclasses.replace(CFG, iterations=4, tasks_per_iteration=40)  # 3 round-robin iterations, then Eq. 3
    run_method("anti_persistence", seed=42, train_pool=list(sp.build) + list(sp.train) + list(sp.val), eval_tasks=[],
               backbone=bb, world=world, edits=suite.edits, cfg=cfg, out_dir=tmp_path, on_eval=states.append)
    state = states[-1]
    state.freeze()
    n, digest = len(state.log), _digest(state.log.path)
    assert n >= 10
    tasks = list(sp.eval[::8])
    batch = eval_decisions(state, tasks, CFG)
    branches = set()
    for i, (task, choice) in enumerate(zip(tasks, batch)):
        best, _, fallback = _reference(state.log, state.trajectories.query(task), CFG.bandit)
        assert choice.mode in best, (task.task_id, choice, best)
        assert (choice.branch == "fallback") == fallback
        branches.add(choice.branch)
        alone = eval_decisions(state, [task], CFG)[0]  # one snapshot: alone = in the batch
        assert alone[:2] == choice[:2] and alone.sim == pytest.approx(choice.sim, abs=1e-5)
        rec = run_task(task, state, backbone=bb, world=world, edits=suite.edits, cfg=CFG, iteration=9, position=i,
                       episode=10_000 + i, rng=random.Random(i), train=False, selector=_NoExploration())
        assert (rec.mode, rec.branch) == (choice.mode, choice.branch)
    assert "knn_greedy" in branches
    assert len(state.log) == n and len(OutcomeLog(state.log.path)) == n and _digest(state.log.path) == digest


def test_run_method_evaluates_greedily(suite, tmp_path):
    """The iteration protocol itself: held-out branches are only fallback / knn_greedy (no round-robin,
    warm-up or ε) even in a round-robin training iteration, and the log only grows by training."""
    sp = suite.splits(seed=12345)
    sizes = []
    res, state = run_method("anti_persistence", seed=42, train_pool=list(sp.train), eval_tasks=list(sp.eval[:12]),
                            backbone=ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=42)),
                            world=suite.world(), edits=suite.edits, cfg=CFG, out_dir=tmp_path,
                            on_eval=lambda s: sizes.append(len(s.log)))
    assert sizes[0] == sizes[1] and sizes[2] == sizes[3] and sizes[2] > sizes[1]
    assert all(r.train_branches == {"round_robin": CFG.tasks_per_iteration} for r in res)  # Table 3: 3 iterations
    for r in res:
        assert set(r.branches) <= {"fallback", "knn_greedy"} and sum(r.branches.values()) == 12
        assert len(r.eval_sims) == 12


# --------------------------------------------------------------------------- embedding text, ρ, task type


def test_embedding_text_is_the_question_and_its_cues_not_the_schema(suite):
    t = next(x for x in suite.tasks if x.attrs.get("cues"))
    text = embed_text(t)
    assert text.startswith(t.question) and all(c in text for c in t.attrs["cues"])
    assert t.context[:40] not in text and len(text) < len(t.question) + 120
    assert t.context[:200] in embed_text(t, "paper")
    with pytest.raises(ValueError, match="unknown embedding text"):
        embed_text(t, "schema")
    with pytest.raises(ValueError, match="embed_text"):
        dataclasses.replace(APConfig(), embed_text="schema")


def test_the_fallback_can_fire_with_the_default_text_and_never_does_with_the_schema(suite):
    """One log entry per training-pool task (a real log repeats tasks, so its neighbourhoods are closer):
    held-out neighbourhoods fall below ρ = 0.7 for some tasks and clear it for others with the default
    text; with App. B.3's schema text every task clears ρ."""
    sp = suite.splits(seed=12345)
    pool = list(sp.build) + list(sp.train) + list(sp.val)
    fired = {}
    for text in ("question_cues", "paper"):
        mem = TrajectoryMemory(text=text)
        log = bk.empty_log(512, mem.embedder.dim)
        for i, t in enumerate(pool):
            log.emb[i], log.mode[i], log.reward[i], log.t[i], log.valid[i] = mem.query(t), i % 4, 1.0, i, True
        q = np.stack([mem.query(t) for t in sp.eval]).astype(np.float32)
        d = make_greedy_selector(APConfig().bandit)(log, q)
        fired[text] = float(np.mean(np.asarray(d.branch) == bk.FALLBACK))
    assert 0.0 < fired["question_cues"] < 1.0
    assert fired["paper"] == 0.0


def _task(tid, question, domain="sql", **attrs):
    return Task(tid, question, "db", "-- schema " * 80, {"question": question, **attrs}, domain)


def _traj(task, success):
    return Trajectory(task.task_id, task.question, tuple(task.attrs.get("cues", ())),
                      (Attempt("SELECT 1", "fb", float(success)),), success)


def test_task_type_is_observable_and_retrieval_is_filtered_by_it(suite):
    bound = _task("a", "names with age at least 3", cues=("at least",), boundary="inclusive", env="db")
    bound2 = _task("b", "names with age at most 9", cues=("at most",), boundary="inclusive", env="db")
    null = _task("c", "names whose age is at least unknown", cues=("is unknown",), null_semantics="null", env="db")
    plain = _task("d", "names with age at least 3", env="db")
    assert task_type(bound) == task_type(bound2) == "sql:boundary+env"
    assert task_type(null) == "sql:env+null_semantics" and task_type(plain) == "sql:env"
    assert task_type(dataclasses.replace(bound, domain="python")) != task_type(bound)
    with answer_key_guard():  # computed from the Task alone: no answer key is read
        types = {task_type(t) for t in suite.tasks}
    assert 5 <= len(types) < len(suite.tasks) // 5
    mem = TrajectoryMemory()
    for t in (null, plain, bound2):
        mem.add(_traj(t, True), t)
    assert [r.task_id for r in mem.retrieve(bound, success=True, k=5)] == ["b"]
    assert mem.retrieve(_task("e", "x", cues=("y",), other="z"), success=None, k=5) == []
    loose = TrajectoryMemory(type_filter=False)
    for t in (null, plain, bound2):
        loose.add(_traj(t, True), t)
    assert {r.task_id for r in loose.retrieve(bound, success=True, k=5)} == {"b", "c", "d"}
    assert mem.retrieve(bound, success=False, k=5) == []


def test_new_state_takes_the_text_filter_and_durability_from_the_config(tmp_path):
    cfg = dataclasses.replace(APConfig(), embed_text="paper", type_filter=False, log_durability="fsync")
    st = new_state("joint_memory", None, cfg)
    assert st.trajectories.text == "paper" and not st.trajectories.type_filter
    assert st.abstractions.text == "paper" and st.buffer.text == "paper"
    st = new_state("anti_persistence", tmp_path / "l.jsonl", cfg)
    assert st.log.durability == "fsync"
    assert new_state("anti_persistence", tmp_path / "m.jsonl").log.durability == APConfig().log_durability

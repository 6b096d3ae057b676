"""The decision-table trainer (kernels/trainer.py, jitted here by the caller) and its orchestration
(countermem/table.py, countermem/selectors.py)."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cfjax.countermem.selectors import (CheckpointMismatchError, grid_hparams, parse_grid, parse_seeds,
                                        train_resumable, train_selectors)
from cfjax.kernels import DecisionTable, DQNConfig, jit_selector, make_dqn, make_train, table_hash, table_reward
from cfjax.kernels.reference import evaluate_policy_reference

CFG = DQNConfig(total_decisions=1000, learning_starts=50, checkpoint_every=250, target_sync_every=100)


def hand_table(n_per_kind: int = 12, seed: int = 0) -> DecisionTable:
    """A decision graph with a known optimal policy.

    Kind A (feature +1): using the record (choice 1) solves at once; skipping
    fails and the retry row (only skip valid) solves — optimal: record.
    Kind B (feature −1): the record breaks a correct draft (fails, then a
    retry solves); skipping solves at once — optimal: skip.
    Kind C: no record retrieved (only skip valid) and skip solves.
    """
    rng = np.random.default_rng(seed)
    obs, mask, solved, nxt = [], [], [], []
    roots = []

    def row(feature: float, valid: list[int], solves: list[int], children: dict[int, int] | None = None) -> int:
        z = rng.normal(0, 0.1, 98).astype(np.float32)
        z[0] = feature
        m = np.zeros(5, bool)
        m[valid] = True
        s = np.zeros(5, bool)
        s[solves] = True
        n = np.full(5, -1, np.int32)
        for j, c in (children or {}).items():
            n[j] = c
        obs.append(z), mask.append(m), solved.append(s), nxt.append(n)
        return len(obs) - 1

    for _ in range(n_per_kind):
        retry_a = row(0.5, [0], [0])
        roots.append(row(1.0, [0, 1], [1], {0: retry_a}))
        retry_b = row(-0.5, [0], [0])
        roots.append(row(-1.0, [0, 1], [0], {1: retry_b}))
        roots.append(row(0.0, [0], [0]))
    obs, mask, solved, nxt = map(np.stack, (obs, mask, solved, nxt))
    calls = mask.astype(np.float32)
    failed = (mask & ~solved).astype(np.float32)
    tokens = np.where(mask, 300.0, 0.0).astype(np.float32) + np.where(np.arange(5) > 0, 200.0, 0.0) * mask
    roots = np.asarray(roots, np.int32)
    n = len(roots)
    return DecisionTable(obs, mask, calls, failed, tokens.astype(np.float32), solved, nxt,
                         roots[: n // 2], roots[n // 2: 3 * n // 4], roots[3 * n // 4:])


@pytest.fixture(scope="module")
def table():
    return hand_table()


@pytest.fixture(scope="module")
def trainer():
    return make_train(CFG, max_depth=2)


TRACES = collections.Counter()  # Python-level traces of the jitted programs (a retrace guard)


@pytest.fixture(scope="module")
def train_jit(trainer):
    def train(key, hp, table):
        TRACES["train"] += 1
        return trainer.train(key, hp, table)

    return jax.jit(train)


@pytest.fixture(scope="module")
def train_seeds(trainer):
    """The PureJaxRL shape: ``jit(vmap(train_logged))`` -> ``TrainOutput(runner_state, metrics)``."""
    return jax.jit(jax.vmap(trainer.train_logged, in_axes=(0, None, None)))


@pytest.fixture(scope="module")
def five_out(train_seeds, table):
    keys = jnp.stack([jax.random.PRNGKey(s) for s in range(5)])
    return jax.block_until_ready(train_seeds(keys, CFG.hparams(), table))


@pytest.fixture(scope="module")
def five(five_out):
    return five_out.runner_state


def optimal(table: DecisionTable, root: int) -> int:
    return 1 if table.obs[root][0] > 0.75 else 0


def test_learns_the_optimal_policy_for_every_seed(five, table, trainer):
    sel = jit_selector(make_dqn(CFG))
    for s in range(5):
        params = jax.tree.map(lambda x: x[s], five.best_params)
        for root in np.concatenate([table.train_roots, table.val_roots, table.eval_roots]):
            a = int(sel.greedy(params, table.obs[root], table.mask[root]))
            assert a == optimal(table, root), f"seed {s}, root {root}"
    # the optimal return: every task solved in one decision
    ret, solved = trainer.evaluate(jax.tree.map(lambda x: x[0], five.best_params), CFG.hparams(), table,
                                   table.eval_roots)
    assert float(solved) == 1.0


def test_evaluate_matches_numpy_reference(five, table, trainer):
    sel = jit_selector(make_dqn(CFG))
    hp = CFG.hparams()
    for s in (0, 3):
        params = jax.tree.map(lambda x: x[s], five.learner.params)  # last (not best) params: any policy
        ret, solved = trainer.evaluate(params, hp, table, table.eval_roots)
        ref = evaluate_policy_reference(lambda z: np.asarray(sel.q_values(params, z)), table, table.eval_roots, hp,
                                        max_depth=2, tau0=CFG.tau0)
        assert float(ret) == pytest.approx(ref[0], abs=1e-5)
        assert float(solved) == pytest.approx(ref[1])


def test_table_reward_is_eq10(table):
    hp = CFG.hparams()
    r = np.asarray(table_reward(table, jnp.arange(3), jnp.array([1, 0, 0]), hp, 1e4))
    for i, (row, j) in enumerate(zip(range(3), (1, 0, 0))):
        expect = (float(table.solved[row, j]) - 0.15 * table.calls[row, j] - 0.25 * table.failed[row, j]
                  - 0.02 * table.tokens[row, j] / 1e4)
        assert r[i] == pytest.approx(expect)


def test_replay_holds_only_valid_choices_and_schedule(five, table):
    rows, choices = np.asarray(five.buf_row[0]), np.asarray(five.buf_choice[0])
    size = int(five.buf_size[0])
    assert size == CFG.total_decisions  # capacity 1e4 > 1000 decisions
    assert table.mask[rows[:size], choices[:size]].all()
    # updates: decisions t ≥ learning_starts with t % train_every == 0
    n_updates = sum(1 for t in range(1, CFG.total_decisions + 1) if t >= CFG.learning_starts and t % CFG.train_every == 0)
    assert int(five.learner.step[0]) == n_updates
    assert not np.isnan(np.asarray(five.val_returns)).any()


def test_seeds_differ_and_same_seed_same_bits(five, train_jit, table):
    p = five.learner.params
    k0 = np.asarray(jax.tree.leaves(p)[0])
    assert not np.array_equal(k0[0], k0[1])
    a = train_jit(jax.random.PRNGKey(3), CFG.hparams(), table)
    b = train_jit(jax.random.PRNGKey(3), CFG.hparams(), table)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
    train_jit(jax.random.PRNGKey(4), CFG.hparams()._replace(lr=jnp.float32(2e-3)), table)
    assert TRACES["train"] == 1  # same shapes, new key and hyperparameters: compiled once


def test_scan_metrics_agree_with_the_state(five_out, five):
    """The scan bodies return their metrics (PureJaxRL): per decision and per checkpoint."""
    m = five_out.metrics
    n_chunks, ce = CFG.total_decisions // CFG.checkpoint_every, CFG.checkpoint_every
    assert m.reward.shape == (5, n_chunks, ce) and m.learner.loss.shape == (5, n_chunks, ce)
    assert m.val_return.shape == (5, n_chunks)
    np.testing.assert_array_equal(np.asarray(m.learner.updated).sum(axis=(1, 2)), np.asarray(five.learner.step))
    np.testing.assert_array_equal(np.asarray(m.episode_done).sum(axis=(1, 2)), np.asarray(five.episodes))
    np.testing.assert_allclose(np.asarray(m.reward).sum(axis=(1, 2)), np.asarray(five.train_return), rtol=1e-4)
    np.testing.assert_array_equal(np.asarray(m.val_return), np.asarray(five.val_returns))
    t = np.arange(1, CFG.total_decisions + 1).reshape(n_chunks, ce)
    sched = (t >= CFG.learning_starts) & (t % CFG.train_every == 0)
    assert (np.asarray(m.learner.updated) == sched).all()
    assert (np.asarray(m.learner.synced) == (t % CFG.target_sync_every == 0)).all()
    loss = np.asarray(m.learner.loss)
    assert np.isfinite(loss).all() and (loss[:, ~sched] == 0).all() and (loss[:, sched] > 0).any()
    eps = np.asarray(m.epsilon)[0].reshape(-1)  # Table 3: 0.30 -> 0.05 over eps_decay_steps, then flat
    expect = 0.30 + (0.05 - 0.30) * np.clip(np.arange(CFG.total_decisions) / CFG.eps_decay_steps, 0, 1)
    np.testing.assert_allclose(eps, expect, atol=1e-6)
    best = np.asarray(m.val_return).argmax(axis=1)  # first maximum = the kept checkpoint
    np.testing.assert_array_equal((best + 1) * ce, np.asarray(five.best_decision))


def test_vmapped_lane_equals_single_run(five, train_jit, table):
    single = train_jit(jax.random.PRNGKey(2), CFG.hparams(), table)
    lane = jax.tree.map(lambda x: x[2], five)
    for x, y in zip(jax.tree.leaves(single), jax.tree.leaves(lane)):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), atol=1e-6, rtol=0)


def test_grid_of_hyperparameters_vmaps(table):
    grid = parse_grid(["lr=1e-3,0", "gamma=0.9,0.95"])
    assert len(grid) == 4 and grid[1] == {"lr": 1e-3, "gamma": 0.95}
    hp = grid_hparams(CFG, grid)
    assert hp.lr.shape == (4,) and float(hp.lam_w[0]) == pytest.approx(CFG.lam_w)
    res = train_selectors(table, CFG, seeds=(0, 1), grid=grid, devices=jax.devices()[:1])
    assert res.val_return.shape == (4, 2)
    # lr = 0 never moves the parameters away from their initialisation
    init = jax.jit(jax.vmap(make_train(CFG).init, in_axes=(0, None)))(
        jnp.stack([jax.random.PRNGKey(s) for s in (0, 1)]), CFG.hparams())
    for x, y in zip(jax.tree.leaves(init.learner.params), jax.tree.leaves(jax.tree.map(lambda a: a[2], res.state.learner.params))):
        assert np.array_equal(np.asarray(x), np.asarray(y))


def test_only_skip_rows_work(table):
    only = DecisionTable(*(np.asarray(x) for x in table))
    only = only._replace(mask=np.zeros_like(only.mask).__or__(np.eye(5, dtype=bool)[0]))
    only = only._replace(next=np.full_like(only.next, -1))
    s = jax.jit(make_train(CFG).train)(jax.random.PRNGKey(0), CFG.hparams(), only)
    size = int(s.buf_size)
    assert (np.asarray(s.buf_choice)[:size] == 0).all()
    assert np.isfinite(np.asarray(jax.tree.leaves(s.learner.params)[0])).all()


def test_resume_equals_uninterrupted_and_refuses_other_table_or_config(tmp_path, table):
    cfg = DQNConfig()  # Table 3: 2,000 decisions, checkpoints every 250
    a = train_resumable(table, cfg, seeds=(0, 1), checkpoint_dir=tmp_path / "a", save_every=4, stop_after=4)
    assert int(np.asarray(a.learner.decisions)[0]) == 1000  # interrupted after decision 1000
    a = train_resumable(table, cfg, seeds=(0, 1), checkpoint_dir=tmp_path / "a", save_every=4)
    b = train_resumable(table, cfg, seeds=(0, 1), checkpoint_dir=tmp_path / "b", save_every=8)
    assert int(np.asarray(b.learner.decisions)[0]) == 2000
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
    other = hand_table(seed=1)
    assert table_hash(other) != table_hash(table)
    with pytest.raises(CheckpointMismatchError, match="decision table"):
        train_resumable(other, cfg, seeds=(0, 1), checkpoint_dir=tmp_path / "a")
    with pytest.raises(CheckpointMismatchError, match="config"):
        train_resumable(table, dataclasses.replace(cfg, gamma=0.9), seeds=(0, 1), checkpoint_dir=tmp_path / "a")


def test_parse_seeds_and_grid_errors():
    assert parse_seeds("0-4") == (0, 1, 2, 3, 4)
    assert parse_seeds("0,3,7") == (0, 3, 7)
    for bad in ("", "4-1", "1,1"):
        with pytest.raises(ValueError):
            parse_seeds(bad)
    for bad in (["lr"], ["nope=1"], ["lr=a"], ["lr=1", "lr=2"]):
        with pytest.raises(ValueError):
            parse_grid(bad)


def test_sharded_equals_unsharded(tmp_path):
    """Four forced host devices: the seed axis split across them gives the
    single-device results (run in a subprocess: the flag must precede jax)."""
    script = textwrap.dedent("""
        import os, sys, json
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
        import jax, numpy as np
        sys.path.insert(0, sys.argv[1])
        from test_trainer import hand_table, CFG
        from cfjax.countermem.selectors import train_selectors
        assert len(jax.devices()) == 4, jax.devices()
        t = hand_table()
        a = train_selectors(t, CFG, seeds=range(4), devices=jax.devices())
        b = train_selectors(t, CFG, seeds=range(4), devices=jax.devices()[:1])
        c = train_selectors(t, CFG, seeds=range(3), devices=jax.devices())   # padded to 4
        diff = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
                   for x, y in zip(jax.tree.leaves(a.state.learner.params), jax.tree.leaves(b.state.learner.params)))
        print(json.dumps({"diff": diff, "val_equal": bool(np.allclose(a.val_return, b.val_return, atol=1e-6)),
                          "pad_equal": bool(np.allclose(c.val_return, b.val_return[:, :3], atol=1e-6)),
                          "sharded": str(a.state.key.sharding)}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", script, os.path.dirname(__file__)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["diff"] <= 1e-6, res
    assert res["val_equal"] and res["pad_equal"], res


def test_stream_order_visits_every_root_once_per_pass_and_learns(table):
    """root_order="stream" (Algorithm 1 lines 16–25): pass p starts its episodes at the training roots in the
    permutation of fold_in(PRNGKey(root_stream_seed), p) — each root exactly once per pass, the same stream
    for every selector seed — and the learner still finds the optimal policy."""
    cfg = dataclasses.replace(CFG, root_order="stream")
    tr = make_train(cfg, max_depth=2)
    n = int(table.train_roots.shape[0])
    roots = set(np.asarray(table.train_roots).tolist())
    for seed in (0, 3):
        st = jax.jit(tr.train)(jax.random.PRNGKey(seed), cfg.hparams(), table)
        rows = np.asarray(st.buf_row)[: int(st.buf_size)].tolist()
        starts = [r for r in rows if r in roots]  # retry rows are never roots in the hand table
        for p in range(2):
            perm = np.asarray(jax.random.permutation(jax.random.fold_in(jax.random.PRNGKey(0), p), n))
            assert starts[p * n:(p + 1) * n] == np.asarray(table.train_roots)[perm].tolist()
        q = make_dqn(cfg).q_values
        for root in np.asarray(table.eval_roots):
            qv = np.where(np.asarray(table.mask[root]), np.asarray(q(st.best_params, table.obs[root])), -np.inf)
            assert int(np.argmax(qv)) == optimal(table, int(root))
    with pytest.raises(ValueError, match="root_order must be 'uniform' or 'stream'"):
        DQNConfig(root_order="cyclic")

"""Fixed policies next to the learned selectors (countermem/selectors.py, experiments/countermem/selectors.py):
skip only, always top-1 and the per-root oracle on a hand-checkable decision table, their paired
task-bootstrap intervals, and the train-selectors output that reports them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cfjax.countermem.selectors import (SelectorsResult, _by_task, compare_with_fixed_policies,
                                        fixed_policy_outcomes, oracle_actions, rollout, skip_actions,
                                        table_rewards, top1_actions, verdict)
from cfjax.countermem.table import TableMeta, save_table
from cfjax.kernels import DecisionTable, DQNConfig
from cfjax.kernels.trainer import table_hash

CFG = DQNConfig()  # Table 3 reward weights: λ_w = 0.15, λ_f = 0.25 (tokens are 0 below, so λ_τ does not matter)
WIN, LOSE = 1.0 - 0.15, -0.15 - 0.25  # reward of a choice that solves / fails: 0.85 / −0.40


def hand_table(samples: int = 1) -> DecisionTable:
    """Four tasks, max depth 2, no token costs. Per task (root → children), with the returns of
    skip only / always top-1 / oracle:

    A  skip fails → A1 (skip solves); record 1 solves.                     0.45 / 0.85 / 0.85
    B  skip solves; record 1 fails → B1 (skip fails, record 1 fails);
       record 2 solves.                                                     0.85 / −0.80 / 0.85
    C  no record; skip fails → C1 (skip fails, record 1 solves).          −0.80 / 0.45 / 0.45
    D  skip fails → D1 (skip fails); record 1 fails → D2 (skip fails,
       record 1 solves); record 2 fails → D3 (skip solves).               −0.80 / 0.45 / 0.45

    Means: skip −0.075 (50 % solved), top-1 0.2375 (75 %), oracle 0.65 (100 %). Train, val and eval
    roots are separate copies of the four trees; each eval task has ``samples`` identical copies.
    """
    obs, mask, solved, nxt = [], [], [], []
    rng = np.random.default_rng(0)

    def row(valid, solves, children=None):
        m, s, n = np.zeros(5, bool), np.zeros(5, bool), np.full(5, -1, np.int32)
        m[valid], s[solves] = True, True
        for j, c in (children or {}).items():
            n[j] = c
        obs.append(rng.normal(0, 0.1, 98).astype(np.float32)), mask.append(m), solved.append(s), nxt.append(n)
        return len(obs) - 1

    def task(kind):
        if kind == "A":
            return row([0, 1], [1], {0: row([0], [0])})
        if kind == "B":
            return row([0, 1, 2], [0, 2], {1: row([0, 1], [])})
        if kind == "C":
            return row([0], [], {0: row([0, 1], [1])})
        return row([0, 1, 2], [], {0: row([0], []), 1: row([0, 1], [1]), 2: row([0], [0])})

    roots = {k: [] for k in ("train", "val", "eval")}
    for split in roots:
        for kind in "ABCD":
            for _ in range(samples if split == "eval" else 1):
                roots[split].append(task(kind))
    obs, mask, solved, nxt = map(np.stack, (obs, mask, solved, nxt))
    calls = mask.astype(np.float32)
    failed = (mask & ~solved).astype(np.float32)
    tokens = np.zeros(mask.shape, np.float32)
    return DecisionTable(obs, mask, calls, failed, tokens, solved, nxt,
                         *(np.asarray(roots[k], np.int32) for k in ("train", "val", "eval")))


@pytest.fixture(scope="module")
def table():
    return hand_table()


def test_fixed_policies_by_hand(table):
    out = fixed_policy_outcomes(table, CFG.hparams(), tau0=CFG.tau0, max_depth=2)
    want = {"skip": ([WIN + LOSE, WIN, 2 * LOSE, 2 * LOSE], [1, 1, 0, 0]),
            "top1": ([WIN, 2 * LOSE, LOSE + WIN, LOSE + WIN], [1, 0, 1, 1]),
            "oracle": ([WIN, WIN, LOSE + WIN, LOSE + WIN], [1, 1, 1, 1])}
    for k, (ret, ok) in want.items():
        np.testing.assert_allclose(out[k][0], ret, atol=1e-6, err_msg=k)
        assert out[k][1].tolist() == [bool(x) for x in ok], k
    assert np.mean(out["skip"][0]) == pytest.approx(-0.075, abs=1e-6)
    assert np.mean(out["top1"][0]) == pytest.approx(0.2375, abs=1e-6)
    assert np.mean(out["oracle"][0]) == pytest.approx(0.65, abs=1e-6)


def test_policy_actions_and_rollout_rules(table):
    rew = table_rewards(table, CFG.hparams(), CFG.tau0)
    root = table.eval_roots
    assert (skip_actions(table) == 0).all()
    top1 = top1_actions(table)
    assert top1[root].tolist() == [1, 1, 0, 1]  # C offers no record: skip
    # the first valid record slot, also when slot 1 is empty
    odd = table._replace(mask=np.where(np.arange(5) == 1, False, table.mask))
    assert top1_actions(odd)[root].tolist() == [0, 2, 0, 2]
    acts, value = oracle_actions(table, rew, 2)
    assert acts[0, root].tolist() == [1, 0, 0, 1]  # B: skip and record 2 tie at 0.85 → skip; D: 1 and 2 tie → 1
    np.testing.assert_allclose(value[root], rollout(table, acts, root, rew, 2)[0], atol=1e-6)
    # the oracle bounds every fixed choice
    for a in (skip_actions(table), top1):
        assert (rollout(table, a, root, rew, 2)[0] <= value[root] + 1e-6).all()
    # max_depth 1 stops after the first decision
    np.testing.assert_allclose(rollout(table, skip_actions(table), root, rew, 1)[0], [LOSE, WIN, LOSE, LOSE],
                               atol=1e-6)
    with pytest.raises(ValueError, match="invalid"):
        rollout(table, np.full(len(table.obs), 2, np.int32), root, rew, 2)


def test_by_task_groups_adjacent_samples():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])  # 3 tasks × 2 samples
    assert _by_task(x, 2).tolist() == [[1, 3, 5], [2, 4, 6]]
    assert _by_task(np.stack([x, 10 * x]), 2).shape == (4, 3)  # seeds stack on the row axis
    with pytest.raises(ValueError, match="whole number"):
        _by_task(x, 4)


def _fake_result(table, learned_actions: dict[str, np.ndarray]) -> SelectorsResult:
    """A :class:`SelectorsResult` whose 'learned' selectors follow given fixed actions (no training)."""
    rew = table_rewards(table, CFG.hparams(), CFG.tau0)
    outs = [rollout(table, a, table.eval_roots, rew, 2) for a in learned_actions.values()]
    rr = np.stack([o[0] for o in outs])[None]
    rs = np.stack([o[1] for o in outs])[None]
    z = np.zeros((1, len(outs)))
    return SelectorsResult(seeds=tuple(range(len(outs))), grid=[{}], val_return=z, best_decision=z,
                           eval_return=rr.mean(-1), eval_solved=rs.mean(-1), val_curve=z[..., None], state=None,
                           devices=1, final_eval_return=rr.mean(-1), final_eval_solved=rs.mean(-1),
                           eval_root_return=rr, eval_root_solved=rs, final_root_return=rr, final_root_solved=rs)


def test_intervals_of_fixed_policies_and_paired_differences(table):
    rew = table_rewards(table, CFG.hparams(), CFG.tau0)
    res = _fake_result(table, {"as_top1": top1_actions(table), "as_oracle": oracle_actions(table, rew, 2)[0]})
    c = compare_with_fixed_policies(table, res, CFG, max_depth=2, samples=1, n_boot=500)
    assert c["n_tasks"] == 4 and c["level"] == 0.95
    fx = c["points"][0]["fixed"]
    assert fx["skip"]["return"]["mean"] == pytest.approx(-0.075, abs=1e-6)
    assert fx["top1"]["return"]["mean"] == pytest.approx(0.2375, abs=1e-6)
    assert fx["oracle"]["return"]["mean"] == pytest.approx(0.65, abs=1e-6)
    assert fx["skip"]["solved"]["mean"] == pytest.approx(50.0)
    assert fx["top1"]["solved"]["mean"] == pytest.approx(75.0)
    assert fx["oracle"]["solved"] == {"mean": 100.0, "lo": 100.0, "hi": 100.0, "level": 0.95}
    for d in fx.values():
        for k in ("return", "solved"):
            assert d[k]["lo"] <= d[k]["mean"] + 1e-9 <= d[k]["hi"] + 2e-9
    sel = {(s["params"], s["seed"]): s for s in c["points"][0]["selectors"]}
    assert len(sel) == 2 * 3  # best/final × (2 seeds + mean)
    same = sel[("best", 0)]  # follows top-1 exactly: a paired difference of exactly 0
    assert same["minus_top1"]["return"] == {"mean": 0.0, "lo": 0.0, "hi": 0.0, "level": 0.95}
    assert same["minus_top1"]["solved"]["mean"] == 0.0
    assert verdict(same["minus_top1"]["return"]).startswith("not distinguishable")
    ora = sel[("best", 1)]  # follows the oracle: per-task differences 0, 1.65, 0, 0
    d = ora["minus_top1"]["return"]
    assert d["mean"] == pytest.approx(0.65 - 0.2375, abs=1e-6)
    assert 0.0 <= d["lo"] <= d["mean"] <= d["hi"] <= 1.65 + 1e-6
    assert ora["minus_top1"]["solved"]["mean"] == pytest.approx(25.0)
    assert ora["oracle_minus"]["return"]["mean"] == pytest.approx(0.0, abs=1e-6)
    mean = sel[("best", "mean")]  # seeds stay inside each task
    assert mean["return"]["mean"] == pytest.approx((0.2375 + 0.65) / 2, abs=1e-6)
    assert mean["minus_top1"]["return"]["mean"] == pytest.approx((0.65 - 0.2375) / 2, abs=1e-6)
    json.dumps(c)  # JSON-ready
    assert verdict({"mean": 1, "lo": 0.1, "hi": 2}) == "beats top-1"
    assert verdict({"mean": -1, "lo": -2, "hi": -0.1}) == "worse than top-1"


def test_fixed_policies_follow_the_grid_reward_weights(table):
    hp = CFG.hparams()._replace(lam_w=np.float32(0.0), lam_f=np.float32(0.0))
    out = fixed_policy_outcomes(table, hp, tau0=CFG.tau0, max_depth=2)
    np.testing.assert_allclose(out["top1"][0], [1, 0, 1, 1], atol=1e-6)  # pure success reward
    np.testing.assert_allclose(out["oracle"][0], [1, 1, 1, 1], atol=1e-6)


def test_train_selectors_reports_fixed_policies_with_intervals(tmp_path):
    """End to end on a saved table (2 samples per eval task): JSON and printed table carry the fixed policies,
    every selector's intervals and learned − top-1; per-root outcomes average to the trainer's own figures."""
    from cfjax.experiments.countermem.selectors import train_selectors_main

    t = hand_table(samples=2)
    meta = TableMeta(table_hash(t), len(t.obs), {"train": 4, "val": 4, "eval": 8}, 2, 2, "hand", "hand", 0)
    save_table(tmp_path, t, meta)
    cfg = DQNConfig(total_decisions=250, learning_starts=50, checkpoint_every=250, target_sync_every=100)
    lines: list[str] = []
    payload = train_selectors_main(tmp_path, seeds="0-1", cfg=cfg, n_boot=200, log=lines.append)
    printed = "\n".join(lines)
    for want in ("skip only", "always top-1", "per-root oracle", "return − top-1", "DQN best ckpt seed 1",
                 "DQN final mean", "(mean over seeds) − top-1"):
        assert want in printed, want
    disk = json.loads((tmp_path / "selectors.json").read_text())
    assert disk["comparison"] == json.loads(json.dumps(payload["comparison"]))
    # a table file with one unnamed obs array (the format before the layouts were recorded) trains as its one
    # layout; random observations show neither layout's root budget, so it is reported as "unknown"
    assert disk["observations"] == ["unknown"] == list(disk["by_observation"]) and disk["observation"] == "unknown"
    assert disk["by_observation"]["unknown"]["comparison"] == disk["comparison"]
    assert "== observation 'unknown' (a table file from before the layouts were recorded" in printed
    assert [ln.split(":")[0] for ln in lines if ln.startswith("observation ")] == ["observation unknown"]
    c = payload["comparison"]
    assert c["n_tasks"] == 4 and c["samples_per_task"] == 2
    block = c["points"][0]
    assert block["fixed"]["top1"]["return"]["mean"] == pytest.approx(0.2375, abs=1e-6)
    assert block["fixed"]["oracle"]["solved"]["mean"] == pytest.approx(100.0)
    sel = {(s["params"], s["seed"]): s for s in block["selectors"]}
    for s, seed in enumerate([0, 1]):
        assert sel[("best", seed)]["return"]["mean"] == pytest.approx(payload["eval_return"][0][s], abs=1e-5)
        assert sel[("best", seed)]["solved"]["mean"] == pytest.approx(100 * payload["eval_solved"][0][s], abs=1e-4)
        assert sel[("final", seed)]["return"]["mean"] == pytest.approx(payload["final_eval_return"][0][s], abs=1e-5)
    for s in block["selectors"]:
        for k in ("return", "minus_top1", "minus_skip", "oracle_minus"):
            iv = s[k] if k == "return" else s[k]["return"]
            assert iv["lo"] <= iv["mean"] + 1e-9 <= iv["hi"] + 2e-9
        assert s["oracle_minus"]["return"]["lo"] >= -1e-6  # nothing beats the oracle

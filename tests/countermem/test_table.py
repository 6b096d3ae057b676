"""Counterfactual decision tables built from the SQL suite (countermem/table.py) and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cfjax.cli import main
from cfjax.config import CounterMemConfig
from cfjax.countermem.agent import Agent
from cfjax.countermem.pipeline import construct
from cfjax.countermem.store import MemoryStore
from cfjax.countermem.table import build_table, load_table
from cfjax.kernels.trainer import table_hash
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.types import Splits
from cfjax.domains.sql import SQLSuite
from cfjax.domains.sql.edits import SQLEdits

SQL_EDITS = SQLEdits()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("table")
    suite = SQLSuite.build(root / "db")
    s = suite.splits(seed=3)
    splits = Splits(s.build[:40], s.train[:10], s.val[:4], s.eval[:8])
    cfg = CounterMemConfig()
    store = MemoryStore(cfg.store, cfg.retrieval, edits=SQL_EDITS)
    agent = Agent(ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0)), suite.world(), cfg, store=store,
                  envs=suite.specs, edits=suite.edits)
    construct(agent, splits.build, seed=0)
    table, meta = build_table(agent, splits, root / "t", samples=2)
    return root, agent, splits, table, meta


def test_table_structure(setup):
    _, agent, splits, t, meta = setup
    R = len(t.obs)
    assert meta.rows == R and t.obs.shape == (R, 98) and t.mask.shape == (R, 5)
    assert meta.roots == {"train": 20, "val": 8, "eval": 16}
    assert t.mask[:, 0].all()  # skip is always valid
    assert not t.mask[:, 4].any()  # k = 3: the fourth slot is always masked
    valid = t.mask
    assert ((t.calls == 1) == valid).all()  # one evaluator call per checked choice
    assert (t.tokens[valid] > 0).all() and (t.tokens[~valid] == 0).all()
    assert ((t.failed == 1) == (valid & ~t.solved)).all()
    # solved choices end the episode; a next row exists only after a failed first attempt
    assert (t.next[t.solved] == -1).all()
    assert ((t.next >= 0) <= (valid & ~t.solved)).all()
    assert (t.next < R).all()
    children = t.next[t.next >= 0]
    roots = np.concatenate([t.train_roots, t.val_roots, t.eval_roots])
    assert not set(children) & set(roots)
    assert sorted(set(children) | set(roots)) == list(range(R))  # a forest
    # a record costs the revision call on top of the draft
    both = valid[:, 1]
    assert (t.tokens[both, 1] > t.tokens[both, 0]).all()


def test_table_outcomes_match_the_world_model(setup):
    """Choice 0 executes the draft: re-running the episode's draft reproduces the recorded outcome."""
    _, agent, splits, t, _ = setup
    from cfjax.llm.base import DraftRequest

    task = splits.train[0]
    draft = agent.backbone.draft_action(DraftRequest(task, (), 5_000_000)).action
    out = agent.world.evaluate(task, draft)
    root = int(t.train_roots[0])
    assert bool(t.solved[root, 0]) == out.solved


def test_resume_and_settings_check(setup):
    root, agent, splits, t, meta = setup
    t2, meta2 = build_table(agent, splits, root / "t", samples=2)  # all parts reused
    assert meta2.hash == meta.hash == table_hash(t2)
    with pytest.raises(ValueError, match="other settings"):
        build_table(agent, splits, root / "t", samples=3)


def test_load_detects_corruption(setup, tmp_path):
    root, *_ = setup
    t, meta = load_table(root / "t")
    assert table_hash(t) == meta.hash
    bad = tmp_path / "bad"
    bad.mkdir()
    import shutil

    shutil.copy(root / "t" / "table.json", bad / "table.json")
    d = dict(np.load(root / "t" / "table.npz"))
    d["obs"] = d["obs"] + 1
    np.savez(bad / "table.npz", **d)
    with pytest.raises(ValueError, match="corrupt"):
        load_table(bad)
    with pytest.raises(FileNotFoundError):
        load_table(tmp_path / "missing")


@pytest.mark.slow
def test_cli_table_and_train_selectors(tmp_path, capsys):
    out = tmp_path / "tbl"
    assert main(["countermem", "table", "--suite", "sql", "--out", str(out), "--samples", "1", "--no-progress"]) == 0
    assert (out / "table.npz").exists() and (out / "store.json").exists()
    assert main(["countermem", "train-selectors", "--table", str(out), "--seeds", "0-2", "--decisions", "500",
                 "--grid", "lr=1e-3,3e-4"]) == 0
    printed = capsys.readouterr().out
    assert "held-out return" in printed and "lr=0.0003" in printed
    assert "always top-1" in printed and "per-root oracle" in printed and "return − top-1" in printed
    res = json.loads((out / "selectors.json").read_text())
    assert np.asarray(res["val_return"]).shape == (2, 3)
    assert res["seeds"] == [0, 1, 2]
    # every selector next to the fixed policies, on the same held-out roots, with intervals
    comp = res["comparison"]
    assert comp["samples_per_task"] == 1 and len(comp["points"]) == 2
    for block in comp["points"]:
        assert set(block["fixed"]) == {"skip", "top1", "oracle"}
        assert len(block["selectors"]) == 2 * (3 + 1)  # best/final × (3 seeds + mean)
        for sel in block["selectors"]:
            iv = sel["minus_top1"]["return"]
            assert iv["lo"] <= iv["mean"] <= iv["hi"]
            assert sel["oracle_minus"]["return"]["lo"] >= -1e-6

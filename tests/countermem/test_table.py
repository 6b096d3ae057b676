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
from cfjax.llm.calls import DRAFT_ACTION
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
    draft = agent.backbone.call(DRAFT_ACTION, DraftRequest(task, (), 5_000_000)).action
    out = agent.world.evaluate(task, draft)
    root = int(t.train_roots[0])
    assert bool(t.solved[root, 0]) == out.solved


def test_resume_and_settings_check(setup):
    import os
    import time

    from cfjax.countermem.table import TableSettingsError
    from cfjax.infra.io import UserError

    root, agent, splits, t, meta = setup
    stale = root / "t" / "parts" / ".000003.npz.4242.0123456789abcdef.tmp"  # a build killed mid-write
    stale.write_bytes(b"PK partial")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    t2, meta2 = build_table(agent, splits, root / "t", samples=2)  # all parts reused
    assert meta2.hash == meta.hash == table_hash(t2)
    assert not stale.exists()
    with pytest.raises(TableSettingsError, match="other settings") as e:
        build_table(agent, splits, root / "t", samples=3)
    assert isinstance(e.value, ValueError) and isinstance(e.value, UserError)


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
    # a second build is refused without a flag, and --resume reuses everything (no part rebuilt)
    stamps = {p: p.stat().st_mtime_ns for p in sorted((out / "parts").iterdir())}
    capsys.readouterr()
    assert main(["countermem", "table", "--suite", "sql", "--out", str(out), "--samples", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not empty" in err and "--resume" in err and "--force" in err
    assert main(["countermem", "table", "--suite", "sql", "--out", str(out), "--samples", "1", "--no-progress",
                 "--resume"]) == 0
    assert "reusing the frozen store" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in sorted((out / "parts").iterdir())} == stamps
    assert main(["countermem", "table", "--suite", "sql", "--out", str(out), "--samples", "2", "--no-progress",
                 "--resume"]) == 2  # other settings: refused in one line
    assert "other settings" in capsys.readouterr().err
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
    # the results file is not overwritten without --force
    before = (out / "selectors.json").read_bytes()
    assert main(["countermem", "train-selectors", "--table", str(out), "--seeds", "0", "--decisions", "250"]) == 2
    assert "already exists" in capsys.readouterr().err and (out / "selectors.json").read_bytes() == before
    assert main(["countermem", "train-selectors", "--table", str(out), "--seeds", "0", "--decisions", "100",
                 "--force"]) == 2  # not a multiple of checkpoint_every: one line, nothing trained or written
    assert "multiple of checkpoint_every" in capsys.readouterr().err
    assert main(["countermem", "train-selectors", "--table", str(out), "--seeds", "0", "--decisions", "250",
                 "--n-boot", "50", "--force"]) == 0
    assert json.loads((out / "selectors.json").read_text())["seeds"] == [0]


# --------------------------------------------------------------------------- damaged table files


def tiny_table(d):
    """A hand-made, consistent 3-row table saved under ``d`` (no backbone, no suite)."""
    from cfjax.countermem.table import TableMeta, save_table
    from cfjax.kernels.trainer import DecisionTable

    R, A = 3, 5
    mask = np.zeros((R, A), bool)
    mask[:, :2] = True
    nxt = np.full((R, A), -1, np.int32)
    nxt[0, 1] = 1
    t = DecisionTable(np.ones((R, 98), np.float32), mask, mask.astype(np.float32), np.zeros((R, A), np.float32),
                      mask * 10.0, np.zeros((R, A), bool), nxt, np.array([0], np.int32), np.array([2], np.int32),
                      np.array([], np.int32))
    t = t._replace(tokens=t.tokens.astype(np.float32))
    meta = TableMeta(table_hash(t), R, {"train": 1, "val": 1, "eval": 0}, 2, 1, "scripted", "sql", 0)
    d.mkdir(parents=True, exist_ok=True)
    save_table(d, t, meta)
    return t, meta


def test_tiny_table_round_trip(tmp_path):
    t, meta = tiny_table(tmp_path / "t")
    t2, meta2 = load_table(tmp_path / "t")
    assert meta2 == meta and table_hash(t2) == meta.hash


@pytest.mark.parametrize("cut", [0.0, 0.1, 0.5, 0.99])
def test_truncated_npz_is_a_corrupt_file(tmp_path, cut):
    from cfjax.infra.io import CorruptFileError

    tiny_table(tmp_path / "t")
    npz = tmp_path / "t" / "table.npz"
    data = npz.read_bytes()
    npz.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(CorruptFileError, match="table.npz") as e:
        load_table(tmp_path / "t")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("change,needle", [
    (lambda m: m.update(extra=1), r"unknown key\(s\) \['extra'\]"),
    (lambda m: m.pop("seed"), r"missing key\(s\) \['seed'\]"),
    (lambda m: m.update(rows="3"), "key 'rows' must be int"),
    (lambda m: m.update(rows=True), "key 'rows' must be int"),
    (lambda m: m.update(rows=4), "obs has shape"),
    (lambda m: m.update(roots={"train": 1}), "key 'roots'"),
    (lambda m: m.update(roots={"train": 2, "val": 1, "eval": 0}), "train_roots do not match"),
    (lambda m: m.update(hash="0" * 64), "content hash"),
])
def test_bad_table_json_is_a_corrupt_file(tmp_path, change, needle):
    from cfjax.infra.io import CorruptFileError

    tiny_table(tmp_path / "t")
    p = tmp_path / "t" / "table.json"
    m = json.loads(p.read_text())
    change(m)
    p.write_text(json.dumps(m))
    with pytest.raises(CorruptFileError, match=needle):
        load_table(tmp_path / "t")


@pytest.mark.parametrize("text", ["[" * 100_000, "not json", "[1, 2]", ""])
def test_unparsable_table_json_is_a_corrupt_file(tmp_path, text):
    from cfjax.infra.io import CorruptFileError

    tiny_table(tmp_path / "t")
    (tmp_path / "t" / "table.json").write_text(text)
    with pytest.raises(CorruptFileError, match="table.json"):
        load_table(tmp_path / "t")


def test_inconsistent_arrays_under_a_matching_hash(tmp_path):
    """An attacker who rewrites table.npz and its hash still cannot make the trainer index out of range."""
    from cfjax.countermem.table import TableMeta, save_table
    from cfjax.infra.io import CorruptFileError

    t, meta = tiny_table(tmp_path / "t")
    bad = t._replace(next=np.where(t.next == 1, 7, t.next).astype(np.int32))
    save_table(tmp_path / "t", bad, TableMeta(**{**vars(meta), "hash": table_hash(bad)}))
    with pytest.raises(CorruptFileError, match="next holds row numbers outside"):
        load_table(tmp_path / "t")
    bad = t._replace(mask=t.mask.astype(np.float32))
    save_table(tmp_path / "t", bad, TableMeta(**{**vars(meta), "hash": table_hash(bad)}))
    with pytest.raises(CorruptFileError, match="wrong dtype"):
        load_table(tmp_path / "t")


def test_load_table_removes_stale_temps(tmp_path):
    import os
    import time

    tiny_table(tmp_path / "t")
    stale = tmp_path / "t" / ".table.npz.99.0123456789abcdef.tmp"
    fresh = tmp_path / "t" / ".table.json.99.0123456789abcdef.tmp"
    mine = tmp_path / "t" / "notes.tmp"
    for p in (stale, fresh, mine):
        p.write_bytes(b"partial")
    old = time.time() - 3600
    for p in (stale, mine):
        os.utime(p, (old, old))
    load_table(tmp_path / "t")
    assert not stale.exists() and fresh.exists() and mine.exists()

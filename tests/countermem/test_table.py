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
from cfjax.countermem.table import build_table, load_table, load_tables
from cfjax.countermem.table import file_hash
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
    tables, _ = load_tables(root / "t")
    assert meta2.hash == meta.hash == file_hash(tables) and table_hash(t2) == table_hash(tables["paper"])
    assert not stale.exists()
    with pytest.raises(TableSettingsError, match="other settings") as e:
        build_table(agent, splits, root / "t", samples=3)
    assert isinstance(e.value, ValueError) and isinstance(e.value, UserError)


def test_load_detects_corruption(setup, tmp_path):
    root, *_ = setup
    t, meta = load_table(root / "t")
    assert file_hash(load_tables(root / "t")[0]) == meta.hash
    bad = tmp_path / "bad"
    bad.mkdir()
    import shutil

    shutil.copy(root / "t" / "table.json", bad / "table.json")
    d = dict(np.load(root / "t" / "table.npz"))
    d["obs_legacy"] = d["obs_legacy"] + 1
    np.savez(bad / "table.npz", **d)
    with pytest.raises(ValueError, match="corrupt"):
        load_table(bad)
    with pytest.raises(FileNotFoundError):
        load_table(tmp_path / "missing")


def _online_observations(agent: Agent, task, episode: int) -> list[np.ndarray]:
    """Every decision of one (task, draft sample) in the table's depth-first row order, observed by the
    online agent's own :meth:`Agent.offer` (its configured ``agent.observation``), rebuilt here from the
    backbone and the world model (not from the table)."""
    from cfjax.infra.ledger import Ledger
    from cfjax.loop import draft_once
    from cfjax.types import Attempt

    ledger, out = Ledger("test"), []

    def node(history, tokens_so_far):
        attempt = len(history)
        prop = draft_once(agent.backbone)(task, history, episode=episode, attempt=attempt, ledger=ledger)
        retrieved, z, mask = agent.offer(task, history, prop.draft, attempt, tokens_so_far)
        out.append(z)
        for j in np.flatnonzero(mask):
            action, tok = prop.draft, prop.tokens
            if j > 0:
                action, rtok = agent.revise(task, history, prop.draft, retrieved[j - 1], episode, ledger)
                tok += rtok
            res = agent.world.evaluate(task, action)
            if not res.solved and attempt + 1 < agent.config.agent.max_attempts:
                node(history + [Attempt(action, res.feedback, float(res.score))], tokens_so_far + tok)

    node([], 0)
    return out


def test_table_stores_both_observations_as_the_online_agent_sees_them(setup):
    """One table holds the "paper" and the "legacy" observation of every row; each is bit-identical to what
    the online agent with ``agent.observation = <layout>`` observes at the same decision state."""
    import dataclasses

    from cfjax.countermem.table import _EP_TABLE, table_jobs

    root, agent, splits, t, meta = setup
    tables, meta2 = load_tables(root / "t")
    assert meta2 == meta and meta.observations == ("paper", "legacy") == tuple(tables)
    assert json.loads((root / "t" / "table.json").read_text())["observations"] == ["paper", "legacy"]
    assert table_hash(t) == table_hash(tables["paper"])  # build_table returns the agent's layout (the default)
    for k in ("mask", "calls", "failed", "tokens", "solved", "next", "train_roots", "val_roots", "eval_roots"):
        assert getattr(tables["paper"], k) is getattr(tables["legacy"], k)  # one copy of what is shared
    assert not np.array_equal(tables["paper"].obs, tables["legacy"].obs)
    jobs = table_jobs(splits, 2)
    starts = np.concatenate([t.train_roots, t.val_roots, t.eval_roots])
    ends = [*starts[1:], meta.rows]
    for layout in ("paper", "legacy"):
        cfg = dataclasses.replace(agent.config, agent=dataclasses.replace(agent.config.agent, observation=layout))
        online = Agent(agent.backbone, agent.world, cfg, store=agent.store, envs=agent.envs, edits=agent.edits)
        for n in range(len(jobs)):  # every row of the table
            _, task, sample = jobs[n]
            want = np.stack(_online_observations(online, task, _EP_TABLE + 1000 * sample))
            got = tables[layout].obs[starts[n]:ends[n]]
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), (layout, n)


def test_a_table_file_with_one_observation_still_loads(setup, tmp_path):
    """A table file from before the layouts were recorded (one ``obs`` array, no ``observations`` key, the
    DecisionTable hash): loads as the one layout its rows show; a table saved with one layout loads as it."""
    from cfjax.config import ConfigError
    from cfjax.countermem.table import TableMeta, infer_observation, save_table

    root, *_ = setup
    tables, meta = load_tables(root / "t")
    for layout, tab in tables.items():
        old = TableMeta(**{**vars(meta), "hash": table_hash(tab), "observations": ()})
        (tmp_path / layout).mkdir()
        save_table(tmp_path / layout, tab, old)
        assert "observations" not in json.loads((tmp_path / layout / "table.json").read_text())
        assert sorted(np.load(tmp_path / layout / "table.npz").files) == sorted(tab._fields)
        assert infer_observation(tab) == layout
        got, meta2 = load_tables(tmp_path / layout)
        assert list(got) == [layout] and meta2 == old and table_hash(got[layout]) == table_hash(tab)
        other = "legacy" if layout == "paper" else "paper"
        with pytest.raises(ConfigError, match=rf"{tmp_path / layout}.* holds the observation layout\(s\) "
                                              rf"{layout} only, not '{other}'"):
            load_table(tmp_path / layout, other)
    # one layout in the new format
    one = TableMeta(**{**vars(meta), "hash": file_hash({"legacy": tables["legacy"]}), "observations": ("legacy",)})
    (tmp_path / "one").mkdir()
    save_table(tmp_path / "one", tables["legacy"], one)
    got, meta3 = load_tables(tmp_path / "one")
    assert list(got) == ["legacy"] and meta3 == one \
        and table_hash(load_table(tmp_path / "one")[0]) == table_hash(tables["legacy"])


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
    # the table holds both observations: the grid × seeds is trained and reported once per layout
    assert printed.index("== observation 'paper'") < printed.index("== observation 'legacy'") \
        < printed.index("observations side by side")
    assert printed.count("per-root oracle") == 2 * 2  # per layout, per grid point
    summary = [ln for ln in printed.splitlines() if ln.startswith("observation ")]
    assert [ln.split()[1] for ln in summary] == ["paper", "paper", "legacy", "legacy"]  # × 2 grid points
    assert all("DQN − top-1 " in ln and "; DQN − skip " in ln for ln in summary)
    res = json.loads((out / "selectors.json").read_text())
    assert np.asarray(res["val_return"]).shape == (2, 3)
    assert res["seeds"] == [0, 1, 2]
    assert res["observation"] == "paper" and res["observations"] == ["paper", "legacy"]
    assert list(res["by_observation"]) == ["paper", "legacy"]
    for k, v in res["by_observation"]["paper"].items():  # the top-level keys are the paper layout's
        assert res[k] == v, k
    for lay, ln in zip(["paper", "legacy"], summary[::2]):  # the summary line is the comparison's kept mean
        sel = next(x for x in res["by_observation"][lay]["comparison"]["points"][0]["selectors"]
                   if x["params"] == "best" and x["seed"] == "mean")
        assert f"DQN − top-1 {sel['minus_top1']['return']['mean']:+.3f} [" in ln
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
                 "--n-boot", "50", "--force", "--observation", "legacy"]) == 0
    printed = capsys.readouterr().out
    assert "== observation 'legacy'" in printed and "== observation 'paper'" not in printed
    res = json.loads((out / "selectors.json").read_text())
    assert res["seeds"] == [0] and res["observation"] == "legacy" and list(res["by_observation"]) == ["legacy"]


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

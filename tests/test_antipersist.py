"""Anti-Persistence: guidance synthesis, discard-after-use, frozen evaluation, provenance, runner."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import random
import weakref
from pathlib import Path

import pytest

from cfjax.antipersist.guidance import (Attempt, Rule, SynthesisConfig, Trajectory, parse_rules, render_rules,
                                        synthesize)
from cfjax.antipersist.protocol import ROWS, APConfig, new_state, reproduced_errors, run_method, run_task
from cfjax.experiments.antipersist import run_all
from cfjax.kernels import bandit as bk
from cfjax.domains.sql.script import ScriptedSQLBackbone
from cfjax.llm.scripted import ScriptedConfig

CFG = dataclasses.replace(APConfig(), iterations=2, tasks_per_iteration=12, seeds=(42,))


@pytest.fixture(scope="module")
def splits(suite):
    return suite.splits()


@pytest.fixture(scope="module")
def selector():
    return bk.make_select(CFG.bandit).select_one


def traj(task_id, question, cues, actions, success, rules=(), applied=(), parents=(), flagged=()):
    atts = tuple(Attempt(a, "fb", 1.0 if (success and i == len(actions) - 1) else 0.0,
                         applied if i == len(actions) - 1 else ()) for i, a in enumerate(actions))
    return Trajectory(task_id, "lower_bound", question, cues, atts, success, tuple(rules), parents, flagged)


def test_rules_round_trip():
    rules = [Rule("g1.0", "at least", "age > 30", "age >= 30"), Rule("g1.1", None, "x = ''", "x IS NULL")]
    text = render_rules("strategic", rules)
    assert text.startswith("## Task-Specific Strategy")
    assert parse_rules(text) == rules
    assert rules[1].overgeneral and not rules[0].overgeneral
    assert rules[0].applies_to("names with an age of AT LEAST 3") and not rules[0].applies_to("strictly above 3")


def test_synthesis_without_records_is_empty_and_free(suite):
    task = suite.tasks[0]
    rng = random.Random(0)
    for mode in ("imitation", "strategic"):
        g = synthesize(mode, task, [], [], None, rng=rng, cfg=SynthesisConfig(), guidance_id="x")
        assert g.rules == () and g.calls == 0
    # corrective with successes but no failures: empty, and never falls back to strategic
    ok = traj("t1", "at least 3", ("at least",), ["SELECT a FROM t WHERE x > 3", "SELECT a FROM t WHERE x >= 3"], True)
    g = synthesize("corrective", task, [ok], [], ok, rng=rng, cfg=SynthesisConfig(), guidance_id="x")
    assert g.rules == () and g.calls == 0


def test_imitation_copies_the_fix_and_applied_rules_with_their_generality(suite):
    task = suite.tasks[0]
    fixed = traj("t1", "at least 3", ("at least",), ["SELECT a FROM t WHERE x > 3", "SELECT a FROM t WHERE x >= 3"], True)
    over = Rule("p.0", None, "y = ''", "y IS NULL")
    guided = traj("t2", "unknown", (), ["SELECT a FROM t WHERE y IS NULL"], True, rules=[over], applied=("p.0",),
                  parents=("p",), flagged=("p",))
    g = synthesize("imitation", task, [fixed, guided], [], None, rng=random.Random(1),
                   cfg=dataclasses.replace(SynthesisConfig(), p_overgeneral_imitation=0.0), guidance_id="g")
    keys = {(r.cue, r.before, r.after) for r in g.rules}
    assert ("at least", "x > 3", "x >= 3") in keys
    assert (None, "y = ''", "y IS NULL") in keys  # reproduced from the parent through the trajectory
    assert g.flagged and g.parent_flagged == ("p",) and g.calls == 1


def test_guidance_is_discarded_after_the_task(suite, splits, selector, tmp_path):
    """Structural: after run_task returns, nothing holds the synthesized guidance (anti-persistence);
    the persist-guidance ablation keeps it in its store."""
    world = suite.world()
    bb = ScriptedSQLBackbone(suite.specs, ScriptedConfig(seed=42))
    for row, alive in (("fixed_strategic", False), ("persist_guidance", True)):
        state = new_state(row, tmp_path / f"{row}.jsonl")
        rng = random.Random(0)
        # fill memory so synthesis has successes to read
        for i, t in enumerate(splits.train[:30]):
            run_task(t, state, backbone=bb, world=world, cfg=CFG, iteration=5, position=i, episode=i, rng=rng,
                     train=True, selector=selector)
        refs = []
        for i, t in enumerate(splits.train[30:60]):
            run_task(t, state, backbone=bb, world=world, cfg=CFG, iteration=5, position=i, episode=100 + i, rng=rng,
                     train=True, selector=selector, on_guidance=lambda g: refs.append(weakref.ref(g)))
        gc.collect()
        made = [r for r in refs]
        assert made, "no guidance was synthesized"
        live = [r() for r in made if r() is not None]
        if alive:
            assert live and all(g.rules for g in live)
        else:
            assert live == []
        assert state.abstractions is None or row == "persist_guidance"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "missing"


@pytest.mark.parametrize("row", ["anti_persistence", "joint_memory", "persist_guidance"])
def test_evaluation_leaves_every_store_byte_identical(suite, splits, selector, tmp_path, row):
    snaps: list[dict] = []

    def snapshot(state):
        d = tmp_path / f"snap{len(snaps)}"
        d.mkdir()
        state.trajectories.save(d / "traj.json")
        if state.abstractions is not None:
            state.abstractions.save(d / "abs.json")
        out = {p.name: _digest(p) for p in d.iterdir()}
        if state.log is not None:
            out["log"] = _digest(state.log.path)
        out["synthesized"] = json.dumps(state.synthesized, sort_keys=True)
        snaps.append(out)

    run_method(row, seed=42, train_pool=list(splits.train), eval_tasks=list(splits.eval[:15]), schemas=suite.specs,
               world=suite.world(), cfg=CFG, out_dir=tmp_path / "run", selector=selector, on_eval=snapshot)
    assert len(snaps) == 2 * CFG.iterations
    for before, after in zip(snaps[::2], snaps[1::2]):
        assert before == after


def test_reproduced_error_count():
    state = new_state("trajectory_memory", None)
    state.synthesized += [
        {"flagged": True, "parent_flagged": ["a"]},   # reproduced
        {"flagged": True, "parent_flagged": []},      # flagged, no flagged parent
        {"flagged": False, "parent_flagged": ["a"]},  # exposed, not reproduced
    ]
    assert reproduced_errors(state) == {"synthesized": 3, "flagged": 2, "exposed": 2, "reproduced": 1}


def test_rows_and_unknown_row():
    assert "anti_persistence" in ROWS and "no_memory" in ROWS
    with pytest.raises(ValueError, match="unknown row"):
        new_state("nope", None)


@pytest.mark.slow
def test_parallel_run_equals_serial(tmp_path):
    cfg = dataclasses.replace(APConfig(), iterations=2, tasks_per_iteration=8, seeds=(42, 43))
    rows = ("anti_persistence", "abstraction_memory")
    a = run_all(tmp_path / "serial", rows=rows, cfg=cfg, workers=1, log=lambda s: None)
    b = run_all(tmp_path / "parallel", rows=rows, cfg=cfg, workers=2, log=lambda s: None)
    assert a["jobs"] == b["jobs"]
    assert (tmp_path / "serial" / "success_by_iteration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = json.loads((tmp_path / "serial" / "results.json").read_text())
    assert res["backbone"].startswith("scripted backbone")
    assert set(res["rows"]) == set(rows)


@pytest.mark.slow
def test_notebook_executes(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = Path(__file__).parent.parent / "notebooks" / "antipersistence.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any(o.get("output_type") == "display_data" and "image/png" in o.get("data", {}) for o in outputs)
    assert not any(o.get("output_type") == "error" for o in outputs)

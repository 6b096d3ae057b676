"""Anti-Persistence: guidance synthesis, the executor through the one agent loop, discard-after-use,
frozen evaluation, provenance, the information boundary, every suite, the OpenAI-compatible path."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import random
import re
import weakref
from pathlib import Path

import pytest

from cfjax.antipersist.guidance import (Attempt, Rule, SynthesisConfig, Trajectory, compose_memory, parse_rules,
                                        rebind, render_rules, synthesize)
from cfjax.antipersist.protocol import (ROWS, APConfig, make_selector, new_state, reproduced_errors, run_method,
                                        run_task)
from cfjax.config import load_toml, save_toml
from cfjax.experiments.antipersist.runner import run_all
from cfjax.llm import prompts
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.scripted import SCRIPTED_LABEL, ScriptedBackbone, ScriptedConfig
from cfjax.types import DraftRequest, answer_key_guard
from cfjax.registry import DOMAINS

CFG = dataclasses.replace(APConfig(), iterations=2, tasks_per_iteration=12, seeds=(42,), split_seeds=(12345,))
TINY = dataclasses.replace(APConfig(), iterations=2, tasks_per_iteration=8, max_eval_tasks=10, seeds=(42,),
                           split_seeds=(12345,))


@pytest.fixture(scope="module")
def splits(suite):
    return suite.splits()


@pytest.fixture(scope="module")
def selector():
    return make_selector(CFG.bandit)


def scripted(suite, seed=42, **kw):
    return ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=seed, **kw))


def traj(task_id, question, cues, actions, success, rules=(), applied=(), parents=(), flagged=()):
    atts = tuple(Attempt(a, "fb", 1.0 if (success and i == len(actions) - 1) else 0.0,
                         applied if i == len(actions) - 1 else ()) for i, a in enumerate(actions))
    return Trajectory(task_id, question, cues, atts, success, tuple(rules), parents, flagged)


# --------------------------------------------------------------------------- guidance


def test_rules_round_trip():
    rules = [Rule("g1.0", "at least", "age > 30", "age >= 30"), Rule("g1.1", None, "x = ''", "x IS NULL")]
    text = render_rules("strategic", rules)
    assert text.startswith("## Task-Specific Strategy")
    assert parse_rules(text) == rules
    assert rules[1].overgeneral and not rules[0].overgeneral
    assert rules[0].applies_to("names with an age of AT LEAST 3") and not rules[0].applies_to("strictly above 3")


def test_synthesis_without_records_is_empty_and_free(suite):
    task, ed = suite.tasks[0], suite.edits
    rng = random.Random(0)
    for mode in ("imitation", "strategic"):
        g = synthesize(mode, task, [], [], None, edits=ed, rng=rng, cfg=SynthesisConfig(), guidance_id="x")
        assert g.rules == () and g.calls == 0
    # corrective with successes but no failures: empty, and never falls back to strategic
    ok = traj("t1", "at least 3", ("at least",), ["SELECT a FROM t WHERE x > 3", "SELECT a FROM t WHERE x >= 3"], True)
    g = synthesize("corrective", task, [ok], [], ok, edits=ed, rng=rng, cfg=SynthesisConfig(), guidance_id="x")
    assert g.rules == () and g.calls == 0


def test_imitation_copies_the_fix_and_applied_rules_with_their_generality(suite):
    task = suite.tasks[0]
    fixed = traj("t1", "at least 3", ("at least",), ["SELECT a FROM t WHERE x > 3", "SELECT a FROM t WHERE x >= 3"], True)
    over = Rule("p.0", None, "y = ''", "y IS NULL")
    guided = traj("t2", "unknown", (), ["SELECT a FROM t WHERE y IS NULL"], True, rules=[over], applied=("p.0",),
                  parents=("p",), flagged=("p",))
    g = synthesize("imitation", task, [fixed, guided], [], None, edits=suite.edits, rng=random.Random(1),
                   cfg=dataclasses.replace(SynthesisConfig(), p_overgeneral_imitation=0.0), guidance_id="g")
    keys = {(r.cue, r.before, r.after) for r in g.rules}
    assert ("at least", "x > 3", "x >= 3") in keys
    assert (None, "y = ''", "y IS NULL") in keys  # reproduced from the parent through the trajectory
    assert g.flagged and g.parent_flagged == ("p",) and g.calls == 1


def test_corrective_rebinds_the_good_shape_onto_the_failures_identifiers(suite):
    ed = suite.edits
    assert rebind("age > 30", "price >= 10", ed) == "age >= 30"
    assert rebind("name = ''", "email IS NULL", ed) == "name IS NULL"
    bad = traj("t1", "age at least 30", ("at least",), ["SELECT name FROM employees WHERE age > 30"], False)
    good = traj("t2", "price at least 10", ("at least",), ["SELECT name FROM products WHERE price >= 10"], True)
    g = synthesize("corrective", suite.tasks[0], [], [bad], good, edits=ed, rng=random.Random(0),
                   cfg=dataclasses.replace(SynthesisConfig(), p_overgeneral=0.0), guidance_id="c")
    assert [(r.cue, r.before, r.after) for r in g.rules] == [("at least", "age > 30", "age >= 30")]
    assert g.sources == ("t1", "t2") and g.calls == 1


def test_memory_kinds_and_the_prompt_limit():
    assert compose_memory("", []) is None
    rec = (f"## Relevant Past Experience (factual records)\nTask: q\n{prompts.FACTUAL_NOTES_HEADER}\n"
           "RULE f.0: ALWAYS REPLACE `a` WITH `b`")
    m = compose_memory(rec, [])
    assert m.kind == "trajectories" and "RULE f.0" in m.text
    g = compose_memory(rec, ["## Avoidance Rules (corrective reflection)\nRULE c.0: ALWAYS REPLACE `x` WITH `y`"])
    assert g.kind == "guidance" and "RULE c.0" in g.text and "RULE f.0" in g.text
    # the guidance rule is guidance; the records' pattern stays a note (picked up with p_pick_up_factual)
    assert [(r[0], r[4]) for r in prompts.parse_rule_sections(g.text)] == [("c.0", False), ("f.0", True)]
    long = compose_memory("", ["## H\n" + "\n".join(f"RULE r{i}: ALWAYS REPLACE `{'x' * 200}` WITH `y`"
                                                     for i in range(40))])
    assert len(long.text) <= 3000 and all(len(ln) > 200 or ln == "## H" for ln in long.text.split("\n"))


# --------------------------------------------------------------------------- the executor


class RecordingBackbone:
    """Wraps a backbone; records every DraftRequest; any other call fails the test."""

    def __init__(self, inner):
        self.inner, self.name, self.requests = inner, "recording", []

    def call(self, kind, req: DraftRequest):
        if kind is not DRAFT_ACTION:
            raise AssertionError(f"Anti-Persistence made a {kind.name} call of the backbone")
        self.requests.append(req)
        return self.inner.call(DRAFT_ACTION, req)

    def __getattr__(self, name):
        raise AssertionError(f"Anti-Persistence called {name} on the backbone")


def test_guidance_reaches_the_backbone_only_through_draft_request_memory(suite, splits, selector, tmp_path):
    bb = RecordingBackbone(scripted(suite, p_follow_guidance=1.0))
    world = suite.world()
    for row, kind in (("fixed_strategic", "guidance"), ("trajectory_memory", "trajectories")):
        state = new_state(row, None)
        rng = random.Random(0)
        made = []
        for i, t in enumerate(list(splits.build) + list(splits.train)):
            bb.requests.clear()
            run_task(t, state, backbone=bb, world=world, edits=suite.edits, cfg=CFG, iteration=5, position=i,
                     episode=i, rng=rng, train=True, selector=selector, on_guidance=made.append)
            mems = {r.memory for r in bb.requests}
            assert len(mems) == 1  # every attempt of the task sees the same memory
            mem = mems.pop()
            if mem is not None:
                assert mem.kind == kind
            if made and made[-1].rules:  # the synthesized rules are in the request the backbone saw
                assert all(r.render() in mem.text for r in made[-1].rules)
            made.clear()
        applied = [(a.applied, t.rules_in_context) for t in state.trajectories.records for a in t.attempts
                   if a.applied]
        assert applied, f"{row}: the backbone never reported an applied rule"
        for ids, ctx in applied:  # provenance: the APPLIED ids are rules that were in context
            assert set(ids) <= {r.rule_id for r in ctx}


def test_a_rule_learned_on_one_database_carries_onto_another_with_its_columns(suite):
    """The scripted backbone carries rules with EditModel.transfer and the target's schema: an hr join fix
    becomes the shop join with shop's foreign key, and never breaks a correct join."""
    hr = next(t for t in suite.tasks if t.task_id.startswith("sql/hr/join_key/"))
    shop = next(t for t in suite.tasks if t.task_id.startswith("sql/shop/join_key/"))
    gold = suite.keys[hr.task_id].gold
    slip = gold.replace("e.dept_id = d.id", "e.id = d.id")
    assert slip != gold
    learned = traj(hr.task_id, hr.question, tuple(hr.attrs["cues"]), [slip, gold], True)
    g = synthesize("imitation", shop, [learned], [], None, edits=suite.edits, rng=random.Random(0),
                   cfg=dataclasses.replace(SynthesisConfig(), p_overgeneral_imitation=0.0), guidance_id="g")
    assert len(g.rules) == 1 and "e.id = d.id" in g.rules[0].before and "e.dept_id = d.id" in g.rules[0].after
    mem = compose_memory("", [g.text])
    bb = scripted(suite, p_follow_guidance=1.0)
    world = suite.world()
    followed = 0
    for ep in range(12):
        res = bb.call(DRAFT_ACTION, DraftRequest(shop, (), ep, memory=mem))
        if res.applied:
            followed += 1
            assert "customer_id" in res.action and "dept_id" not in res.action, res.action
            assert world.evaluate(shop, res.action).solved
    assert followed
    # without the target's schema the stored column name would be copied and break the join
    r = g.rules[0]
    broken = suite.edits.transfer(r.before, r.after, suite.keys[shop.task_id].gold.replace(
        "o.customer_id = c.id", "o.id = c.id"), None)
    assert broken is not None and "dept_id" in broken and not world.evaluate(shop, broken).solved


def test_guidance_is_discarded_after_the_task(suite, splits, selector, tmp_path):
    """Structural: after run_task returns, nothing holds the synthesized guidance (anti-persistence);
    the persist-guidance ablation keeps it in its store."""
    world = suite.world()
    bb = scripted(suite)
    pool = list(splits.build) + list(splits.train)
    for row, alive in (("fixed_strategic", False), ("persist_guidance", True)):
        state = new_state(row, tmp_path / f"{row}.jsonl")
        rng = random.Random(0)
        for i, t in enumerate(pool[:30]):  # fill memory so synthesis has successes to read
            run_task(t, state, backbone=bb, world=world, edits=suite.edits, cfg=CFG, iteration=5, position=i,
                     episode=i, rng=rng, train=True, selector=selector)
        refs = []
        for i, t in enumerate(pool[30:60]):
            run_task(t, state, backbone=bb, world=world, edits=suite.edits, cfg=CFG, iteration=5, position=i,
                     episode=100 + i, rng=rng, train=True, selector=selector,
                     on_guidance=lambda g: refs.append(weakref.ref(g)))
        gc.collect()
        assert refs, "no guidance was synthesized"
        live = [r() for r in refs if r() is not None]
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

    run_method(row, seed=42, train_pool=list(splits.train), eval_tasks=list(splits.eval[:15]),
               backbone=scripted(suite), world=suite.world(), edits=suite.edits, cfg=CFG, out_dir=tmp_path / "run",
               selector=selector, on_eval=snapshot)
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


def test_config_round_trips_through_toml(tmp_path):
    cfg = dataclasses.replace(APConfig(), seeds=(1, 2), split_seeds=(3, 12345), max_eval_tasks=7, embed_text="paper",
                              type_filter=False, log_durability="fsync", synthesis=SynthesisConfig(p_overgeneral=0.2))
    save_toml(cfg, tmp_path / "ap.toml")
    assert load_toml(APConfig, tmp_path / "ap.toml") == cfg


# --------------------------------------------------------------------------- every suite, the boundary


@pytest.mark.parametrize("name", DOMAINS.names())
def test_every_suite_runs_without_reading_an_answer_key(name, tmp_path):
    """The whole protocol on each built-in suite, under the answer-key guard: agent-side code (the method,
    the scripted driver, the loop) never reads gold, family, variant or trap flags."""
    rows = ("no_memory", "anti_persistence", "joint_memory")
    with answer_key_guard():
        res = run_all(tmp_path, suites=(name,), rows=rows, cfg=TINY, workers=1, log=lambda s: None)
    p = res["suites"][name]
    assert res["backbone"] == SCRIPTED_LABEL and p["backbone"] == SCRIPTED_LABEL
    assert set(p["rows"]) == set(rows) and p["eval_tasks"] == 10
    for v in p["rows"].values():
        assert 0.0 <= v["final_success"] <= 100.0 and len(v["success_by_iteration"]) == TINY.iterations
        assert v["final_tokens_per_task"] > 0 and v["final_success_by_family"]
    assert (tmp_path / name / "success_by_iteration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / name / "results.json").read_text())["suite"] == name
    assert name in (tmp_path / "report.txt").read_text()
    assert load_toml(APConfig, tmp_path / "config.toml") == TINY
    logged = (tmp_path / name / "split_12345" / "seed_42" / "anti_persistence.outcomes.jsonl").read_text().splitlines()
    types = {json.loads(ln)["task_type"] for ln in logged}
    assert types and types <= set(DOMAINS.get(name).languages)  # Task.domain, not a family


# --------------------------------------------------------------------------- an OpenAI-compatible server


def _canned_ap(suite):
    """Drafts: the gold action, with `>=` weakened to `>` on the first attempt of every other task; under
    guidance the reply names the first RULE id it was shown in an APPLIED line."""
    by_q = {t.question: t for t in suite.tasks}

    def reply(prompt: str) -> str:
        m = re.search(r"### Task\n(.*?)\n\n", prompt, re.S)
        t = by_q.get(m.group(1)) if m else None
        gold = suite.keys[t.task_id].gold if t is not None else "SELECT 1"
        first = "(no earlier attempts)" in prompt
        action = gold.replace(" >= ", " > ") if first and len(t.question if t else "") % 2 else gold
        rules = re.findall(r"^RULE (\S+):", prompt, re.M)
        return f"ACTION:\n```sql\n{action}\n```" + (f"\nAPPLIED: {rules[0]}" if rules else "")

    return reply


def test_openai_backbone_through_the_cli_against_a_loopback_server(suite, tmp_path):
    from cfjax.cli import main
    from tests.llm_server import FakeLLMServer

    conf = tmp_path / "one_split.toml"
    save_toml(dataclasses.replace(APConfig(), split_seeds=(12345,)), conf)  # one split keeps the test small
    with FakeLLMServer(_canned_ap(suite)) as srv:
        rc = main(["antipersist", "run", "--suite", "sql", "--backbone", "openai", "--base-url", srv.base_url,
                   "--model", srv.model, "--rows", "fixed_imitation", "trajectory_memory", "--iterations", "2",
                   "--tasks", "10", "--max-tasks", "6", "--seeds", "42", "--workers", "1", "--config", str(conf),
                   "--out", str(tmp_path / "out")])
        seen = srv.prompts
    assert rc == 0
    assert all("Write one action that answers the task" in p for p in seen)  # only DRAFT_ACTION calls
    assert any("### Guidance synthesized for this task" in p and "\nRULE " in p for p in seen)
    assert any("### Records of similar past tasks" in p for p in seen)
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["backbone"].startswith("LLM ") and "scripted" not in res["backbone"]
    rows = res["suites"]["sql"]["rows"]
    assert all(0 <= v["final_success"] <= 100 for v in rows.values())
    assert rows["fixed_imitation"]["final_applied_per_task"] > 0  # APPLIED lines reached the provenance
    # the server reports usage in characters: the ledger used it
    assert rows["fixed_imitation"]["final_tokens_per_task"] > 500


# --------------------------------------------------------------------------- parallel = serial, the notebook


@pytest.mark.slow
def test_parallel_run_equals_serial(tmp_path):
    cfg = dataclasses.replace(TINY, seeds=(42, 43))
    rows = ("anti_persistence", "abstraction_memory")
    a = run_all(tmp_path / "serial", suites=("sql",), rows=rows, cfg=cfg, workers=1, log=lambda s: None)
    b = run_all(tmp_path / "parallel", suites=("sql",), rows=rows, cfg=cfg, workers=2, log=lambda s: None)
    def untimed(jobs):
        return [{k: v for k, v in j.items() if k != "profile"} for j in jobs]

    assert untimed(a["suites"]["sql"]["jobs"]) == untimed(b["suites"]["sql"]["jobs"])
    assert a["outcomes"] == b["outcomes"]
    res = json.loads((tmp_path / "serial" / "results.json").read_text())
    assert res["backbone"].startswith("scripted backbone")
    assert set(res["suites"]["sql"]["rows"]) == set(rows)


@pytest.mark.slow
def test_notebook_executes(tmp_path):
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    import re

    from cfjax.experiments.notebooks import execute_notebook, summarize

    path = Path(__file__).resolve().parents[2] / "notebooks" / "antipersistence.ipynb"
    nb = execute_notebook(path, workdir=tmp_path)
    s = summarize(nb)
    assert s["errors"] == 0 and s["pngs"] == 2  # mode selection + success by iteration
    assert not any("execution" in c.metadata for c in nb.cells)  # volatile timestamps stripped
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "scripted backbone (seeded simulator, not an LLM)" in text
    assert "Outcome: success" in text  # trajectories shown
    for mode in ("none", "imitation", "strategic", "corrective"):
        assert f"mode {mode}:" in text
    assert "RULE " in text and "the guidance was not persisted" in text
    assert "training branches" in text and "round_robin" in text
    assert "Anti-Persistence protocol on suite 'sql'" in text and "final [95% CI]" in text
    assert "Anti-Persistence, final held-out success" in text
    assert re.search(r"\d+\.\d \[\d+\.\d, \d+\.\d\]", text)  # final success with its interval

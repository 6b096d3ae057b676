"""Tests for the built-in SAT/SMT suite: instances, tasks, traps, attributes, the scripted error model."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict

import pytest

from cfjax.countermem.conditions import parse_condition
from cfjax.llm.base import DraftRequest
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.domains import SUITES, open_suite
from cfjax.domains.base import TRANSFER_CONDITIONS, transfer_condition
from cfjax.domains.sat import FAMILIES, FAMILY_KEY, INSTANCES, SAT_FAMILIES, SMT_FAMILIES, SATSuite, observe_attrs
from cfjax.domains.sat.script import ERRORS
from cfjax.domains.sat.edits import SatSmtEdits
from cfjax.types import MemoryText

VARIANTS = ("base", "look_alike", "new_surface")


@pytest.fixture(scope="module")
def sat_suite(tmp_path_factory) -> SATSuite:
    return SATSuite.build(tmp_path_factory.mktemp("satsuite"))


@pytest.fixture(scope="module")
def sat_world(sat_suite):
    return sat_suite.world()


@pytest.fixture(scope="module")
def trap_drafts(sat_suite) -> dict[str, str]:
    """Each task's draft with its family's characteristic slip forced on, no noise."""
    bb = ScriptedBackbone(sat_suite.scripted_domain(),
                          ScriptedConfig(p_error=1.0, p_error_look_alike=1.0, p_noise=0.0))
    return {t.task_id: bb.call(DRAFT_ACTION, DraftRequest(t)).action for t in sat_suite.tasks}


@pytest.fixture(scope="module")
def trap_outcomes(sat_suite, sat_world, trap_drafts) -> dict:
    return {t.task_id: sat_world.evaluate(t, trap_drafts[t.task_id]) for t in sat_suite.tasks}


def by_group(suite, tasks):
    g = defaultdict(list)
    for t in tasks:
        k = suite.answer_key(t.task_id)
        g[(k.family, k.variant)].append(t)
    return g


# analysis helpers: tests may read the answer keys that the suite holds (never an agent)
def gold(suite, t) -> str:
    return suite.answer_key(t.task_id).gold


def family_of(suite, t) -> str:
    return suite.answer_key(t.task_id).family


def variant_of(suite, t) -> str:
    return suite.answer_key(t.task_id).variant


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- shape


def test_suite_size_and_ids(sat_suite):
    tasks = sat_suite.tasks
    assert 150 <= len(tasks) <= 250
    assert len(FAMILIES) >= 8 and len(SAT_FAMILIES) >= 4 and len(SMT_FAMILIES) >= 4
    assert len(sat_suite.envs()) >= 4
    ids = [t.task_id for t in tasks]
    assert len(ids) == len(set(ids))
    for t in tasks:
        assert re.fullmatch(rf"sat/{t.env_id}/{family_of(sat_suite, t)}/\d{{3}}", t.task_id), t.task_id
        assert variant_of(sat_suite, t) in VARIANTS and family_of(sat_suite, t) in FAMILIES
        assert t.domain == ("smt" if family_of(sat_suite, t) in SMT_FAMILIES else "sat")
        assert t.env_id in sat_suite.envs() and not sat_suite.answer_key(t.task_id).ordered
        assert sat_suite.task(t.task_id) is t
        assert not any(hasattr(t, a) for a in ("gold", "family", "variant", "ordered"))  # the key holds them
    assert set(sat_suite.keys) == set(ids)
    groups = by_group(sat_suite, tasks)
    for fam in FAMILIES:
        for v in VARIANTS:
            assert groups[(fam, v)], (fam, v)
        assert len({t.env_id for t in tasks if family_of(sat_suite, t) == fam}) >= 2, fam
    assert SUITES["sat"] == "cfjax.domains.sat:SATSuite" and sat_suite.name == "sat"
    assert sat_suite.holdout_envs[0] in sat_suite.envs()


def test_every_gold_scores_one(sat_suite, sat_world):
    for t in sat_suite.tasks:
        o = sat_world.evaluate(t, gold(sat_suite, t))
        assert o.completed and o.solved and o.score == 1.0 and o.error is None, (t.task_id, o)
        assert sat_suite.edits.normalize(gold(sat_suite, t)) == gold(sat_suite, t)  # golds are printed canonically


def test_context_declares_the_environment_and_hides_the_gold(sat_suite):
    for t in sat_suite.tasks:
        inst = sat_suite.envs()[t.env_id]
        assert t.env_id in t.context
        if t.domain == "smt":
            assert all(f"(declare-const s_{j} Int)" in t.context for j, _ in inst.jobs)
        else:
            assert all(name in t.context for name in inst.sets) and all(v in t.context for v in inst.vars)
        for line in gold(sat_suite, t).splitlines():
            assert line not in t.context and line not in t.question


# --------------------------------------------------------------------------- traps


@pytest.mark.parametrize("family,variant", [(f, v) for f in FAMILIES for v in VARIANTS])
def test_characteristic_slip_is_observable(sat_suite, trap_drafts, trap_outcomes, family, variant):
    ed = sat_suite.edits
    tasks = by_group(sat_suite, sat_suite.tasks)[(family, variant)]
    unobservable = []
    for t in tasks:
        draft = trap_drafts[t.task_id]
        assert draft != ed.normalize(gold(sat_suite, t)), f"{t.task_id}: the slip did not apply"
        d = ed.diff_units(ed.normalize(gold(sat_suite, t)), draft)
        assert d is not None and d[0] == 0, f"{t.task_id}: the slip is not a one-unit change of the first unit"
        o = trap_outcomes[t.task_id]
        assert o.completed and o.error is None, (t.task_id, o)
        if o.score >= 1.0:
            unobservable.append(t.task_id)
    assert not unobservable, f"characteristic slip scores 1 on {unobservable}"


def test_slips_give_partial_credit_somewhere(sat_suite, trap_outcomes):
    """A too-weak slip admits a solution that fails *some* checks: partial credit, not always 0."""
    partial = {family_of(sat_suite, t) for t in sat_suite.tasks if 0.0 < trap_outcomes[t.task_id].score < 1.0}
    assert len(partial) >= 6, partial
    zero = {family_of(sat_suite, t) for t in sat_suite.tasks if trap_outcomes[t.task_id].score == 0.0}
    assert zero  # the too-strong slips make tight instances unsatisfiable


def test_rule_edits_of_slipped_drafts_contain_the_fix(sat_suite, sat_world, trap_drafts):
    ed = sat_suite.edits
    envs = sat_suite.envs()
    fixed, total = 0, 0
    for (family, variant), tasks in sorted(by_group(sat_suite, sat_suite.tasks).items()):
        for t in tasks[::2]:  # every other task keeps the test fast
            draft = trap_drafts[t.task_id]
            gold_unit = ed.units(gold(sat_suite, t))[0].text
            cands = ed.rule_edits(draft, envs[t.env_id])
            assert all(0 <= i < len(ed.units(draft)) for i, _ in cands)
            # the true fix (restore the family's unit) is a rule edit whenever the slip was a single operator
            total += 1
            if (0, gold_unit) in cands:
                assert sat_world.evaluate(t, ed.replace_unit(draft, 0, gold_unit)).solved
                fixed += 1
    assert fixed >= 0.85 * total, (fixed, total)


def test_transfer_of_a_fix_solves_another_base_task(sat_suite, sat_world):
    """The stored fix of a base task's characteristic slip, carried onto the same slip of another base
    task of the family — in the same and in another environment — solves it."""
    import random

    ed, dom = sat_suite.edits, sat_suite.scripted_domain()
    for fam in FAMILIES:
        slip = ERRORS[fam][0]
        base = [t for t in sat_suite.tasks if family_of(sat_suite, t) == fam and variant_of(sat_suite, t) == "base"]
        slipped = {t.task_id: dom.slip(slip, gold(sat_suite, t), t, random.Random(0)) for t in base}
        src = base[0]
        before, after = ed.units(slipped[src.task_id])[0].text, ed.units(gold(sat_suite, src))[0].text
        assert before != after
        other_env = [t for t in base if t.env_id != src.env_id]
        same_env = [t for t in base[1:] if t.env_id == src.env_id]
        assert other_env and same_env, fam
        for tgt in same_env[:2] + other_env[:2]:
            draft = slipped[tgt.task_id]
            assert sat_world.evaluate(tgt, draft).score < 1.0
            moved = ed.transfer(before, after, draft, sat_suite.envs()[tgt.env_id])
            assert moved is not None, (fam, src.task_id, tgt.task_id)
            o = sat_world.evaluate(tgt, moved)
            assert o.solved, (fam, src.task_id, tgt.task_id, moved, o)


def test_scripted_backbone_drafts_fail_on_traps_and_are_deterministic(sat_suite, sat_world, trap_drafts):
    cfg = ScriptedConfig(p_error=1.0, p_noise=0.0)
    a, b = ScriptedBackbone(sat_suite.scripted_domain(), cfg), ScriptedBackbone(sat_suite.scripted_domain(), cfg)
    for t in sat_suite.tasks:
        if variant_of(sat_suite, t) == "look_alike":
            continue
        ra, rb = a.call(DRAFT_ACTION, DraftRequest(t)), b.call(DRAFT_ACTION, DraftRequest(t))
        assert ra.raw == rb.raw and ra.action == rb.action
        assert ra.action == trap_drafts[t.task_id]
    for t in sat_suite.tasks[::7]:
        if variant_of(sat_suite, t) != "look_alike":
            assert sat_world.evaluate(t, a.call(DRAFT_ACTION, DraftRequest(t)).action).score < 1.0
    # with no errors at all the drafts are the golds
    clean = ScriptedBackbone(sat_suite.scripted_domain(), ScriptedConfig(p_error=0.0, p_error_look_alike=0.0,
                                                                       p_noise=0.0))
    for t in sat_suite.tasks[::9]:
        assert clean.call(DRAFT_ACTION, DraftRequest(t)).action == gold(sat_suite, t)


def test_scripted_domain_tables(sat_suite):
    dom = sat_suite.scripted_domain()
    assert dom.name == "sat" and isinstance(dom.edits, SatSmtEdits)
    assert set(dom.errors) == set(FAMILIES) == set(ERRORS)
    t = next(x for x in sat_suite.tasks if family_of(sat_suite, x) == "cap")
    assert parse_condition(dom.semantic_condition(t, "boundary"))
    import random

    for seed in range(6):
        assert parse_condition(dom.broad_condition(t, random.Random(seed)))
    assert dom.unit_kind_name("each p in STAFF: atmost 3 of w[p,s] for s in SHIFTS") == "cardinality constraint"
    assert dom.unit_kind_name("each s in SHIFTS: w[a,s] => w[b,s]") == "implication"
    assert dom.unit_kind_name("(assert (> s_a 1))") == "assertion"
    assert dom.env(t) is sat_suite.envs()[t.env_id]
    assert dom.slip("to_strict", "not an encoding (", t, random.Random(0)) is None


# --------------------------------------------------------------------------- attributes


def test_only_the_family_requirement_carries_cues(exact_suites):
    sat_suite = exact_suites("sat")
    """Supporting facts are worded without lexicon cues: the semantic attributes of a task are its family's."""
    from cfjax.domains.sat import LEXICON

    keys = {k for k, _ in LEXICON.values()}
    for t in sat_suite.tasks:
        assert {k for k in keys if k in t.attrs} == {FAMILY_KEY[family_of(sat_suite, t)]}, (t.task_id, t.attrs)


def test_attrs_distinguish_look_alikes_and_never_reveal_the_gold(exact_suites):
    sat_suite = exact_suites("sat")
    groups = by_group(sat_suite, sat_suite.tasks)
    for fam in FAMILIES:
        key = FAMILY_KEY[fam]
        base = {t.attrs.get(key) for t in groups[(fam, "base")] + groups[(fam, "new_surface")]}
        look = {t.attrs.get(key) for t in groups[(fam, "look_alike")]}
        assert len(base) == 1 and len(look) == 1 and base != look and None not in base | look, (fam, base, look)
    for t in sat_suite.tasks:
        a = t.attrs
        assert a["question"] == t.question and a["env"] == t.env_id and a["solver"] == t.domain
        assert a["problem"] in ("colouring", "roster", "schedule") and a["cues"]
        for v in a.values():
            for x in (v if isinstance(v, tuple) else (v,)):
                assert isinstance(x, (str, int, float, bool))
        for line in gold(sat_suite, t).splitlines():
            assert all(line not in str(v) for v in a.values()), (t.task_id, line)
        assert "(assert" not in t.question and "=>" not in t.question
        assert all(" -> " not in u.text for u in sat_suite.edits.units(gold(sat_suite, t)))  # the EDIT-line separator


@pytest.mark.parametrize("q,key,value", [
    ("Every region gets exactly one colour.", "cardinality", "exactly"),
    ("Every region gets at least one colour.", "cardinality", "at_least"),
    ("Each nurse works at most one shift per day.", "cardinality", "at_most"),
    ("Each staff member works at most 3 shifts.", "boundary", "inclusive"),
    ("Each staff member works fewer than 3 shifts.", "boundary", "strict"),
    ("Every shift is staffed by no fewer than 2 people.", "boundary", "inclusive"),
    ("dig starts strictly after pour has finished.", "precedence", "strict"),
    ("dig cannot begin until pour is done.", "precedence", "non_strict"),
    ("dig must be finished before day 9.", "deadline", "strict"),
    ("dig must be complete on or before day 9.", "deadline", "inclusive"),
    ("dig can only start after day 3.", "release", "strict"),
    ("dig may start on day 3 or later.", "release", "inclusive"),
    ("a and b may run in parallel.", "resource", "parallel"),
    ("eve never works a shift without ann.", "direction", "only_if"),
])
def test_observe_attrs(q, key, value, exact):
    a = observe_attrs(q, env="e", problem="roster", solver="sat")
    assert a[key] == value, a
    assert a["cues"] and a["question"] == q


def test_observe_attrs_longest_phrase_wins(exact):
    a = observe_attrs("Each staff member works no more than 4 shifts.", env="e", problem="roster", solver="sat")
    assert a["cues"] == ("no more than",) and a["boundary"] == "inclusive" and a["bound_side"] == "upper"
    b = observe_attrs("Every region gets at least one colour.", env="e", problem="colouring", solver="sat")
    assert "boundary" not in b and b["cues"] == ("at least one",)


# --------------------------------------------------------------------------- files, splits, determinism


def test_build_is_idempotent_and_open_reads_it(sat_suite, tmp_path):
    files = sorted(sat_suite.root.glob("*.json"))
    assert [f.stem for f in files] == sorted(i.env_id for i in INSTANCES)
    before = {f.name: (_sha(f), f.stat().st_mtime_ns) for f in files}
    again = SATSuite.build(sat_suite.root)
    assert {f.name: (_sha(f), f.stat().st_mtime_ns) for f in files} == before
    opened = open_suite("sat", sat_suite.root)
    key = lambda s: [(t.task_id, t.question, gold(s, t), t.context, dict(t.attrs), family_of(s, t), variant_of(s, t),
                      t.domain, s.answer_key(t.task_id).extra) for t in s.tasks]
    assert key(opened) == key(sat_suite) == key(again)
    assert opened.rules == sat_suite.rules
    other = SATSuite.build(tmp_path / "other")
    assert {f.name: _sha(f) for f in (tmp_path / "other").glob("*.json")} == {k: v[0] for k, v in before.items()}
    assert key(other) == key(sat_suite)
    with pytest.raises(FileNotFoundError):
        SATSuite.open(tmp_path / "missing")
    doc = json.loads((tmp_path / "other" / "project_a.json").read_text())
    first = sorted(doc["rules"])[0]
    doc["rules"][first] = []
    (tmp_path / "other" / "project_a.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError):
        SATSuite.open(tmp_path / "other")


def test_evaluation_never_changes_the_instance_files(sat_suite, sat_world, trap_drafts):
    files = sorted(sat_suite.root.glob("*.json"))
    before = {f.name: _sha(f) for f in files}
    hostile = ["(exit)", "(set-option :produce-models false)", "each v in REGIONS: x[v,red]\n" * 3,
               '(echo "x")', "__import__('os').remove('x')"]
    for t in sat_suite.tasks[::10]:
        sat_world.evaluate(t, gold(sat_suite, t))
        sat_world.evaluate(t, trap_drafts[t.task_id])
        for h in hostile:
            o = sat_world.evaluate(t, h)
            assert o.completed and not o.solved
    assert {f.name: _sha(f) for f in files} == before


def test_splits_are_disjoint_and_hold_out_an_environment(sat_suite):
    sp = sat_suite.splits(seed=12345)
    held = set(sat_suite.holdout_envs)
    ids = [{t.task_id for t in s} for s in (sp.build, sp.train, sp.val, sp.eval)]
    assert not (ids[0] | ids[1] | ids[2]) & ids[3]
    assert not ids[1] & ids[2]
    for s in (sp.build, sp.train, sp.val):
        assert all(t.env_id not in held for t in s)
    assert {t.task_id for t in sat_suite.tasks if t.env_id in held} <= ids[3]
    src = {x.env_id for x in sp.build}
    conds = {transfer_condition(t, sat_suite.answer_key(t.task_id), src) for t in sp.eval}
    assert conds == set(TRANSFER_CONDITIONS)


def test_world_kwargs_and_pickling(sat_suite):
    import pickle

    w = sat_suite.world(timeout_s=1.5, partial_credit=False)
    assert w.sat.timeout_s == 1.5 and w.smt.timeout_s == 1.5 and not w.sat.partial_credit
    w2 = pickle.loads(pickle.dumps(w))
    t = sat_suite.tasks[0]
    assert w2.evaluate(t, gold(sat_suite, t)).solved


def test_scripted_backbone_round_trip_through_records(sat_suite, sat_world):
    """Module I proposals parse, a distilled condition parses, and a rendered record's EDIT line carries
    the fix onto another task's draft (also for implications, whose units contain '=>')."""
    import random

    from cfjax.llm import prompts
    from cfjax.countermem.calls import DISTIL_RECORD, GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest, DistilRequest
    from cfjax.llm.base import Attempt, ReviseRequest
    from cfjax.llm.calls import REVISE_WITH_RECORD

    ed, dom = sat_suite.edits, sat_suite.scripted_domain()
    bb = ScriptedBackbone(dom, ScriptedConfig(p_ignore_record=0.0, p_propose_fix=1.0))
    for fam in FAMILIES:
        base = [t for t in sat_suite.tasks if family_of(sat_suite, t) == fam and variant_of(sat_suite, t) == "base"]
        src, tgt = base[0], next(t for t in base if t.env_id != base[0].env_id)
        s_draft = dom.slip(ERRORS[fam][0], gold(sat_suite, src), src, random.Random(0))
        o = sat_world.evaluate(src, s_draft)
        alts = bb.call(GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest(
            src, (Attempt(s_draft, o.feedback, o.score),), s_draft, o.feedback, [u.text for u in ed.units(s_draft)]))
        assert any(sat_world.evaluate(src, ed.replace_unit(s_draft, i, txt)).solved for i, txt in alts.edits), fam
        before, after = ed.units(s_draft)[0].text, ed.units(gold(sat_suite, src))[0].text
        dist = bb.call(DISTIL_RECORD, DistilRequest(src, s_draft, gold(sat_suite, src), before, after, "score 0 → 1"))
        parse_condition(dist.condition)
        record = prompts.render_record(dist.situation, before, after, s_draft, gold(sat_suite, src), "score 0 → 1",
                                       dist.condition)
        t_draft = dom.slip(ERRORS[fam][0], gold(sat_suite, tgt), tgt, random.Random(0))
        rev = bb.call(REVISE_WITH_RECORD, ReviseRequest(tgt, (), t_draft, MemoryText("record", record)))
        assert sat_world.evaluate(tgt, rev.action).solved, (fam, rev.action)

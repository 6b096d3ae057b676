"""Tests for the scripted backbone (cfjax.llm.scripted) and its documented error model."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from cfjax.countermem.calls import (DISTIL_RECORD, GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest, DistilRequest,
                                   render_distil)
from cfjax.countermem.conditions import parse_condition
from cfjax.countermem.store import Record
from cfjax.llm import prompts
from cfjax.llm.base import Attempt, DraftRequest, ReviseRequest
from cfjax.llm.calls import DRAFT_ACTION, REVISE_WITH_RECORD
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.domains.sql import edits as se
from cfjax.types import MemoryText
from cfjax.registry import DOMAINS

EDIT_LINE = re.compile(r"EDIT: REPLACE \[(\d+)\] WITH (\S.*)")
EXTRA_ERROR_FAMILIES = {"having"}  # families with a second error mode (FK join slip)


def bb(suite, **kw) -> ScriptedBackbone:
    return ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(**kw))


def gold(suite, t) -> str:
    """The task's reference action, normalised (analysis code reads the answer key)."""
    return se.normalize(suite.answer_key(t.task_id).gold)


def fam(suite, t) -> str:
    return suite.answer_key(t.task_id).family


def var(suite, t) -> str:
    return suite.answer_key(t.task_id).variant


def record(text: str) -> MemoryText:
    return MemoryText("record", text)


@pytest.fixture(scope="module")
def slipped(suite) -> list[tuple]:
    """(task, draft, gold, diff) for every task whose forced slip is one unit."""
    b = bb(suite, p_error=1.0, p_error_look_alike=1.0, p_noise=0.0)
    out = []
    for t in suite.tasks:
        d = b.call(DRAFT_ACTION, DraftRequest(t)).action
        g = gold(suite, t)
        diff = se.diff_units(d, g)
        if diff is not None:
            out.append((t, d, g, diff))
    return out


# --------------------------------------------------------------------------- drafts


def test_same_seed_same_draft_text_across_instances(suite):
    a, b = bb(suite, seed=3), bb(suite, seed=3)
    for t in suite.tasks:
        for ep in (0, 1):
            hist = (Attempt("SELECT 1", "wrong", 0.0),) if ep else ()
            ra = a.call(DRAFT_ACTION, DraftRequest(t, hist, ep))
            rb = b.call(DRAFT_ACTION, DraftRequest(t, hist, ep))
            assert ra.raw == rb.raw and ra.action == rb.action and ra.usage == rb.usage


def test_memoised_drafts_equal_fresh_draws_and_guidance_is_drawn_anew(suite):
    """The backbone draws a memory-free draft once per key: asking again (any order, any row) gives
    exactly what a fresh backbone draws, with the same usage charged per call; a draft under
    guidance is not memoised and equals a fresh backbone's too."""
    a = bb(suite, seed=5)
    guide = MemoryText("guidance", "RULE: ALWAYS\nEDIT: a -> b")
    reqs = [DraftRequest(t, (), ep, sample) for t in suite.tasks[:12] for ep in (0, 3) for sample in (0, 1)]
    first = [a.call(DRAFT_ACTION, r) for r in reqs]
    again = [a.call(DRAFT_ACTION, r) for r in reversed(reqs)][::-1]
    fresh = [bb(suite, seed=5).call(DRAFT_ACTION, r) for r in reqs]
    assert [(x.raw, x.usage) for x in first] == [(x.raw, x.usage) for x in again] == [(x.raw, x.usage) for x in fresh]
    assert len(a._drafts) == len(reqs)
    t = suite.tasks[0]
    g1 = a.call(DRAFT_ACTION, DraftRequest(t, (), 0, memory=guide))
    g2 = bb(suite, seed=5).call(DRAFT_ACTION, DraftRequest(t, (), 0, memory=guide))
    assert (g1.raw, g1.usage) == (g2.raw, g2.usage) and len(a._drafts) == len(reqs)


def test_different_seeds_differ_somewhere(suite):
    a, b = bb(suite, seed=0), bb(suite, seed=1)
    diffs = sum(a.call(DRAFT_ACTION, DraftRequest(t)).action != b.call(DRAFT_ACTION, DraftRequest(t)).action for t in suite.tasks)
    assert diffs > 10


def test_episode_and_sample_change_the_randomness(suite):
    b = bb(suite)
    base = [b.call(DRAFT_ACTION, DraftRequest(t)).action for t in suite.tasks]
    ep1 = [b.call(DRAFT_ACTION, DraftRequest(t, (), 1)).action for t in suite.tasks]
    s1 = [b.call(DRAFT_ACTION, DraftRequest(t, (), 0, 1)).action for t in suite.tasks]
    assert base != ep1 and base != s1


def test_no_error_no_noise_draft_is_normalised_gold(suite):
    b = bb(suite, p_error=0.0, p_error_look_alike=0.0, p_noise=0.0)
    for t in suite.tasks:
        for hist in ((), (Attempt("SELECT 1", "wrong", 0.0),)):
            r = b.call(DRAFT_ACTION, DraftRequest(t, hist))
            assert r.action == gold(suite, t), t.task_id
            assert r.raw == prompts.format_action(r.action)


def test_draft_output_contract_and_token_accounting(suite):
    b = bb(suite)
    t = suite.tasks[0]
    req = DraftRequest(t)
    r = b.call(DRAFT_ACTION, req)
    assert r.raw.startswith("ACTION:\n```sql\n") and r.raw.endswith("\n```")
    assert r.usage.prompt_tokens == prompts.count_tokens(prompts.render_draft(req))
    assert r.usage.completion_tokens == prompts.count_tokens(r.raw)


def test_forced_error_is_exactly_one_unit(suite):
    b = bb(suite, p_error=1.0, p_error_look_alike=1.0, p_noise=0.0)
    kinds = Counter()
    for t in suite.tasks:
        d = b.call(DRAFT_ACTION, DraftRequest(t)).action
        g = gold(suite, t)
        assert d != g, f"{t.task_id}: the characteristic slip did not fire"
        diff = se.diff_units(g, d)
        if fam(suite, t) in EXTRA_ERROR_FAMILIES and var(suite, t) != "look_alike":
            assert diff is not None or len(se.units(d)) == len(se.units(g)), t.task_id
            continue
        assert diff is not None, (t.task_id, g, d)
        kinds[(fam(suite, t), diff[1].kind)] += 1
    assert kinds[("lower_bound", "where")] and kinds[("join_key", "join")] and kinds[("order_limit", "order")]


@pytest.mark.parametrize("family,variant,before,after", [
    ("lower_bound", "base", ">=", ">"), ("lower_bound", "look_alike", ">", ">="),
    ("upper_bound", "base", "<=", "<"), ("upper_bound", "new_surface", "<=", "<"),
    ("null_check", "base", "IS NULL", "= ''"), ("null_check", "look_alike", "= ''", "IS NULL"),
    ("order_limit", "base", "DESC", "ASC"), ("order_limit", "look_alike", "ASC", "DESC"),
])
def test_slip_direction_matches_documented_table(suite, family, variant, before, after):
    b = bb(suite, p_error=1.0, p_error_look_alike=1.0, p_noise=0.0)
    ts = [t for t in suite.tasks if fam(suite, t) == family and var(suite, t) == variant]
    assert ts
    for t in ts:
        g = gold(suite, t)
        _, ub, ua = se.diff_units(g, b.call(DRAFT_ACTION, DraftRequest(t)).action)
        assert before in ub.text and after in ua.text and ub.text.replace(before, after, 1) == ua.text


def test_look_alike_rate_is_separate(suite):
    b = bb(suite, p_error=1.0, p_error_look_alike=0.0, p_noise=0.0)
    for t in suite.tasks:
        d = b.call(DRAFT_ACTION, DraftRequest(t)).action
        assert (d == gold(suite, t)) == (var(suite, t) == "look_alike"), t.task_id


def test_retry_factor_zero_fixes_on_retry(suite):
    b = bb(suite, p_error=1.0, p_error_look_alike=1.0, p_noise=0.0, retry_factor=0.0)
    hist = (Attempt("SELECT 1", "wrong", 0.0),)
    for t in suite.tasks[:60]:
        assert b.call(DRAFT_ACTION, DraftRequest(t, hist)).action == gold(suite, t)


def test_error_rate_is_close_to_p_error(suite):
    b = bb(suite, p_error=0.5, p_noise=0.0)
    ts = [t for t in suite.tasks if var(suite, t) != "look_alike" and fam(suite, t) not in EXTRA_ERROR_FAMILIES]
    n = wrong = 0
    for ep in range(4):
        for t in ts:
            wrong += b.call(DRAFT_ACTION, DraftRequest(t, (), ep)).action != gold(suite, t)
            n += 1
    assert abs(wrong / n - 0.5) < 0.06, wrong / n


def test_noise_only_drafts_differ_by_one_unit(suite):
    b = bb(suite, p_error=0.0, p_error_look_alike=0.0, p_noise=1.0)
    changed = 0
    for t in suite.tasks:
        d = b.call(DRAFT_ACTION, DraftRequest(t)).action
        g = gold(suite, t)
        if d != g:
            changed += 1
            assert se.diff_units(g, d) is not None, (t.task_id, d)
    assert changed > 0.9 * len(suite.tasks)


# --------------------------------------------------------------------------- revise


def _record(before: str, after: str, condition: str, *, src: str = "sql/hr/lower_bound/00") -> Record:
    orig = f"SELECT name FROM employees WHERE {before}"
    imp = f"SELECT name FROM employees WHERE {after}"
    return Record(src, "The question says 'at least'.", orig, imp, before, after, "ev", condition, 0.0, 1.0,
                  record_id=0)


def test_revise_applies_edit_ignoring_condition(suite):
    b = bb(suite, p_ignore_record=0.0)
    t = next(t for t in suite.tasks if fam(suite, t) == "lower_bound" and var(suite, t) == "look_alike")
    assert t.attrs["boundary"] == "strict"
    draft = gold(suite, t)
    assert " > " in draft
    rec = _record("hired_year > 2010", "hired_year >= 2010", 'boundary = "inclusive" and bound_side = "lower"')
    assert not parse_condition(rec.condition).evaluate(t.attrs)  # the condition is false here ...
    for with_cond in (True, False):
        out = b.call(REVISE_WITH_RECORD, ReviseRequest(t, (), draft, record(rec.render(with_condition=with_cond)))).action
        assert out == draft.replace(" > ", " >= ")  # ... and the backbone applies the edit anyway
        assert se.diff_units(draft, out) is not None


def test_revise_returns_draft_when_nothing_matches(suite):
    b = bb(suite, p_ignore_record=0.0)
    t = next(t for t in suite.tasks if fam(suite, t) == "upper_bound" and var(suite, t) == "base")
    draft = gold(suite, t).replace("<=", "<")
    for rec in [_record("a > 1", "a >= 1", "none"),  # no '>' unit in an upper-bound query
                _record("LOWER(city) = 'x'", "city = 'x'", "none")]:
        r = b.call(REVISE_WITH_RECORD, ReviseRequest(t, (), draft, record(rec.render())))
        assert r.action == draft
    r = b.call(REVISE_WITH_RECORD, ReviseRequest(t, (), draft, record("a record text without an edit line")))
    assert r.action == draft
    r = b.call(REVISE_WITH_RECORD, ReviseRequest(t, (), "not sql (", record(_record("a > 1", "a >= 1", "none").render())))
    assert r.action == "not sql ("


def test_revise_ignores_record_with_probability_one(suite):
    b = bb(suite, p_ignore_record=1.0)
    t = next(t for t in suite.tasks if fam(suite, t) == "lower_bound" and var(suite, t) == "look_alike")
    draft = gold(suite, t)
    r = b.call(REVISE_WITH_RECORD, ReviseRequest(t, (), draft, record(_record("a > 1", "a >= 1", "none").render())))
    assert r.action == draft


def test_revise_transfers_each_family_fix_to_other_tasks(suite, slipped):
    """A record distilled from one task repairs the same slip on the other tasks of its family."""
    b = bb(suite, p_ignore_record=0.0)
    by_family: dict[str, list] = {}
    for item in slipped:
        if var(suite, item[0]) != "look_alike":
            by_family.setdefault(fam(suite, item[0]), []).append(item)
    assert set(by_family) == {fam(suite, t) for t in suite.tasks}
    for family, items in by_family.items():
        t0, d0, g0, (_, ub, ua) = items[0]
        text = record(Record(t0.task_id, "s", d0, g0, ub.text, ua.text, "ev", "none", 0.0, 1.0).render())
        fixed = sum(b.call(REVISE_WITH_RECORD, ReviseRequest(t, (), d, text)).action == g for t, d, g, _ in items[1:])
        assert fixed == len(items) - 1, family


# --------------------------------------------------------------------------- distil


def test_distil_condition_always_parses(suite, slipped):
    b = bb(suite)
    kinds = Counter()
    for t, d, g, (_, ub, ua) in slipped:
        for ep in range(3):
            r = b.call(DISTIL_RECORD, DistilRequest(t, d, g, ub.text, ua.text, "evidence", ep))
            cond = parse_condition(r.condition)
            kinds[type(cond).__name__] += 1
            assert r.situation and se.signature(ub.text) in r.situation
            assert r.raw.splitlines()[0].startswith("SITUATION: ")
    # semantic, surface and too-broad conditions all occur
    assert {"Compare", "Contains", "Universal"} <= set(kinds), kinds


def test_distil_semantic_condition_holds_on_source(suite, slipped):
    b = bb(suite, p_condition_semantic=1.0, p_condition_surface=0.0)
    for t, d, g, (_, ub, ua) in slipped:
        r = b.call(DISTIL_RECORD, DistilRequest(t, d, g, ub.text, ua.text, "evidence"))
        assert parse_condition(r.condition).evaluate(t.attrs), (t.task_id, r.condition)


# --------------------------------------------------------------------------- alternatives


def test_alternatives_in_edit_grammar_with_valid_unit_index(suite, slipped):
    b = bb(suite)
    n_lines = 0
    for t, d, g, _ in slipped:
        us = se.units(d)
        req = AlternativesRequest(t, (), d, "feedback", [u.text for u in us], 4)
        r = b.call(GENERATE_LOCAL_ALTERNATIVES, req)
        lines = [ln for ln in r.raw.splitlines() if ln.strip()]
        assert len(lines) <= req.k
        for ln in lines:
            m = EDIT_LINE.fullmatch(ln)
            assert m, ln
            i = int(m.group(1))
            assert 0 <= i < len(us)
            new = se.replace_unit(d, i, m.group(2))  # parses as a unit of that kind
            assert se.diff_units(d, new) is not None
            n_lines += 1
        assert list(r.edits) == [(int(m.group(1)), m.group(2)) for m in map(EDIT_LINE.fullmatch, lines)]
    assert n_lines > len(slipped)


def test_alternatives_fix_and_wrong_proposals(suite, slipped):
    fix = bb(suite, p_propose_fix=1.0)
    nofix = bb(suite, p_propose_fix=0.0)
    for t, d, g, _ in slipped:
        us = [u.text for u in se.units(d)]
        req = AlternativesRequest(t, (), d, "feedback", us, 4)
        got = [se.replace_unit(d, i, x) for i, x in fix.call(GENERATE_LOCAL_ALTERNATIVES, req).edits]
        assert got and got[0] == g, t.task_id  # the true one-unit fix comes first
        wrong = [se.replace_unit(d, i, x) for i, x in nofix.call(GENERATE_LOCAL_ALTERNATIVES, req).edits]
        assert g not in wrong, t.task_id  # a wrong proposal is never the fix


def test_alternatives_unparsable_action(suite):
    b = bb(suite)
    t = suite.tasks[0]
    r = b.call(GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest(t, (), "SELEC (", "fb", ["SELEC ("], 4))
    assert r.edits == ()


def test_alternatives_fill_k_slots_with_distractors(suite, slipped):
    nofix = bb(suite, p_propose_fix=0.0)
    for t, d, g, _ in slipped:
        req = AlternativesRequest(t, (), d, "feedback", [u.text for u in se.units(d)], 4)
        n_pool = len([e for e in se.rule_edits(d, suite.envs()[t.env_id]) if se.replace_unit(d, *e) != g])
        got = nofix.call(GENERATE_LOCAL_ALTERNATIVES, req).edits
        assert len(got) >= min(4, n_pool), t.task_id  # first-order edits, then second-order ones
        assert len(got) <= 4 and len(set(got)) == len(got)
        assert all(se.normalize(se.replace_unit(d, i, x)) != se.normalize(g) for i, x in got), t.task_id


@pytest.mark.parametrize("name", DOMAINS.names())
def test_distilled_conditions_use_only_vocabulary_the_prompt_shows(name, tmp_path_factory):
    """Issue 11: a written condition names only attributes (with values) listed in the DISTIL_RECORD
    prompt, and phrases that occur in the question shown there."""
    from cfjax.countermem.conditions import Contains
    from cfjax.domains import build_suite

    s = build_suite(name, tmp_path_factory.mktemp(name))
    b = ScriptedBackbone(s.scripted_domain(), ScriptedConfig(p_error=1.0, p_error_look_alike=1.0, p_noise=0.0))
    checked = 0
    for t in s.tasks[::2]:
        d = b.call(DRAFT_ACTION, DraftRequest(t)).action
        g = s.edits.normalize(s.answer_key(t.task_id).gold)
        diff = s.edits.diff_units(d, g)
        if diff is None:
            continue
        req = DistilRequest(t, d, g, diff[1].text, diff[2].text, "evidence")
        prompt = render_distil(req)
        shown = prompt.rsplit("Attributes a new task is described by", 1)[1]
        cond = parse_condition(b.call(DISTIL_RECORD, req).condition)
        for k in cond.attributes() - {"question"}:
            assert f"  {k} = " in shown, (t.task_id, str(cond))
        stack = [cond]
        while stack:  # every atom: phrases from the question, compared values as listed
            c = stack.pop()
            stack += [v for v in vars(c).values() if hasattr(v, "evaluate")]
            stack += [x for v in vars(c).values() if isinstance(v, tuple) for x in v if hasattr(x, "evaluate")]
            if isinstance(c, Contains):
                assert c.phrase.lower() in t.question.lower(), (t.task_id, str(cond))
            elif hasattr(c, "name") and isinstance(getattr(c, "value", None), str):
                assert f'"{c.value}"' in shown.split(f"  {c.name} = ", 1)[1].split("\n", 1)[0], (t.task_id, str(cond))
        checked += 1
    assert checked > 20

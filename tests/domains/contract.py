"""What every registered domain must satisfy: the cross-domain contract checks, as plain functions.

The repository's tests run each check on every name in :data:`cfjax.registry.DOMAINS` (a plugin's
domain is picked up without an edit). A plugin author calls them on their own domain::

    from cfjax.domains import build_suite
    from tests.domains import contract

    def test_my_domain_keeps_the_contract(tmp_path):
        contract.check_all("mydomain", tmp_path)          # or one check at a time:
        suite = build_suite("mydomain", tmp_path / "suite")
        contract.check_tasks_show_no_answer(suite)

Checks (each raises ``AssertionError`` naming the domain and the task at fault):

* :func:`check_info` — the :class:`~cfjax.types.DomainInfo` it registered is complete and usable
  (the suite class resolves, the languages have prompt texts, the UpliftMem constants build);
* :func:`check_languages` — every task's action language (``Task.domain``) is one it declares, so the
  prompts can show it (an undeclared language is an error there, never the SQL prompts);
* :func:`check_tasks_show_no_answer`, :func:`check_scripted_calls_read_no_key`,
  :func:`check_unit_under_guard` — the information boundary (shared/DESIGN.md);
* :func:`check_splits`, :func:`check_no_twin_straddles` — the held-out protocol (Eq. 14);
* :func:`check_rule_edits` — every rule edit is one decision unit, parses and is distinct;
* :func:`check_competence` — the scripted generator's competence equals ``p_propose_fix``;
* :func:`check_bad_actions` — the world scores malformed actions 0 with feedback, never raises.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any, Sequence

from cfjax.registry import DOMAINS
from cfjax.types import AnswerKey, DomainInfo, EditError, Language, Outcome, answer_key_guard

__all__ = ["names", "HIDDEN", "BAD_ACTIONS", "check_info", "check_languages", "check_tasks_show_no_answer",
           "check_scripted_calls_read_no_key", "check_unit_under_guard", "check_splits", "check_no_twin_straddles",
           "check_rule_edits", "check_competence", "check_bad_actions", "check_all"]

#: fields an agent-side object must never carry (they live in the AnswerKey)
HIDDEN = {"gold", "family", "variant", "ordered", "trap", "trap_flag", "answer_key", "key"}

#: malformed actions every world must score 0 (with feedback) without raising
BAD_ACTIONS = ("", "   \n\t", "not an action at all ((", "\x00\x01\x02", "x" * 5000, "ACTION:\n```\n```")


def names() -> tuple[str, ...]:
    """Every registered domain (the built-in ones and every ``cfjax.plugins`` entry point's)."""
    return DOMAINS.names()


# --------------------------------------------------------------------------- the declaration


def check_info(name: str) -> DomainInfo:
    """The domain's :class:`DomainInfo`: named as registered, its suite class resolves to a suite of that
    name, every language has its three prompt texts, and UpliftMem's constants build."""
    import importlib

    from cfjax.config.uplift import UtilitySpec

    info = DOMAINS.get(name)
    assert isinstance(info, DomainInfo), (name, type(info))
    assert info.name == name, (name, info.name)
    mod, sep, cls = info.suite.partition(":")
    assert sep and mod and cls, f"{name}: DomainInfo.suite must be 'module:Class', got {info.suite!r}"
    suite_cls = getattr(importlib.import_module(mod), cls)
    assert getattr(suite_cls, "name", None) == name, (name, suite_cls)
    assert info.languages, f"{name}: declares no action language"
    for lang, spec in info.languages.items():
        assert isinstance(lang, str) and lang and not any(c.isspace() for c in lang), (name, lang)
        assert isinstance(spec, Language), (name, lang, spec)
        assert spec.system.strip() and spec.noun.strip() and spec.fence.strip(), (name, lang, spec)
    assert isinstance(info.untrusted_code, bool), name
    UtilitySpec(**info.utility)  # raises on a wrong key or value
    assert isinstance(info.k_cap, int) and info.k_cap >= 1, (name, info.k_cap)
    assert all(isinstance(v, (int, float)) and v > 0 for v in info.cost_weights.values()), (name, info.cost_weights)
    assert info.description.strip(), f"{name}: no description (the --suite help shows it)"
    return info


def check_languages(suite: Any) -> None:
    """Every task's ``Task.domain`` is a language the suite's domain declares, and the prompts render it."""
    from cfjax.llm import prompts
    from cfjax.types import DraftRequest

    langs = DOMAINS.get(suite.name).languages
    used = {t.domain for t in suite.tasks}
    assert used and used <= set(langs), (suite.name, sorted(used - set(langs)))
    for lang in used:
        t = next(t for t in suite.tasks if t.domain == lang)
        text = prompts.render_draft(DraftRequest(t))
        assert text.startswith(langs[lang].system) and f"```{langs[lang].fence}" in text, (suite.name, lang)


# --------------------------------------------------------------------------- the information boundary


def check_tasks_show_no_answer(suite: Any) -> None:
    """No task shows its answer: no hidden attribute, the gold in neither question, context nor attrs."""
    from cfjax import types as T

    s = suite
    assert isinstance(s, T.Domain)
    assert set(s.keys) == {t.task_id for t in s.tasks}
    for t in s.tasks:
        assert not HIDDEN & set(t.attrs), (t.task_id, sorted(t.attrs))
        gold = s.keys[t.task_id].gold
        assert gold.strip() not in t.context and gold.strip() not in t.question
        assert all(not (isinstance(v, str) and v.strip() == gold.strip()) for v in t.attrs.values())


def check_scripted_calls_read_no_key(suite: Any) -> None:
    """Every call the scripted backbone answers runs under the guard; the answer reaches it only through
    the domain's competence interface (draft, true_fixes), which lives in cfjax.domains."""
    from cfjax.countermem import calls as cm_calls
    from cfjax.countermem.calls import DISTIL_RECORD, GENERATE_LOCAL_ALTERNATIVES, DistilRequest, render_distil
    from cfjax.countermem.conditions import parse_condition
    from cfjax.expel.calls import EXPEL_INSIGHT, InsightRequest
    from cfjax.llm.calls import BEST_OF_N_JUDGE, DRAFT_ACTION, REVISE_WITH_RECORD
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.types import Attempt, DraftRequest, JudgeRequest, MemoryText, ReviseRequest

    name, s = suite.name, suite
    bb = ScriptedBackbone(s.scripted_domain(), ScriptedConfig(seed=0, p_error=1.0, p_propose_fix=1.0))
    world = s.world()
    t = next(t for t in s.tasks if s.keys[t.task_id].variant == "base")
    with answer_key_guard():
        d = bb.call(DRAFT_ACTION, DraftRequest(t)).action
        out = world.evaluate(t, d)
        units = [u.text for u in s.edits.units(d)]
        alts = bb.call(GENERATE_LOCAL_ALTERNATIVES, cm_calls.AlternativesRequest(t, (), d, out.feedback, units))
        assert alts.edits, name
        i, new = alts.edits[0]
        after = s.edits.replace_unit(d, i, new)
        diff = s.edits.diff_units(d, after)
        dist = bb.call(DISTIL_RECORD, DistilRequest(t, d, after, diff[1].text, diff[2].text, "checked"))
        rv = bb.call(REVISE_WITH_RECORD, ReviseRequest(t, (), d, MemoryText("record", f"EDIT: {diff[1].text} -> "
                                                                                  f"{diff[2].text}")))
        bb.call(BEST_OF_N_JUDGE, JudgeRequest(t, (), (d, rv.action)))
        bb.call(EXPEL_INSIGHT, InsightRequest(t, (Attempt(d, out.feedback, out.score),), False))
    # the condition names only attributes the DISTIL_RECORD prompt showed
    shown = render_distil(DistilRequest(t, d, after, diff[1].text, diff[2].text, "checked"))
    for attr in parse_condition(dist.condition).attributes() - {"question"}:
        assert f"  {attr} = " in shown, (name, attr, dist.condition)


def check_unit_under_guard(suite: Any, config: Any, rows: Sequence[str], max_tasks: int) -> dict:
    """A whole CounterMem experiment unit (``rows``, ``max_tasks`` evaluation tasks) runs with answer keys
    unreadable outside worlds and analysis; returns its result."""
    from cfjax.experiments.countermem.runner import quick_splits, run_unit
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig

    s, SMALL = suite, config
    sp = quick_splits(s.splits(seed=SMALL.split_seed, n_val=SMALL.n_val), max_tasks)
    bb = ScriptedBackbone(s.scripted_domain(), ScriptedConfig(seed=0))
    with answer_key_guard():
        res = run_unit(s, 0, SMALL, backbone=bb, rows=list(rows), splits=sp)
    assert res["rows"]["cf_memory"]["n_tasks"] == len(sp.eval)
    assert set(res["rows"]) >= {"none", "cf_memory"}
    return res


# --------------------------------------------------------------------------- the held-out protocol


def _ids(tasks) -> list[str]:
    return [x.task_id for x in tasks]


def check_splits(suite: Any, seed: int = 12345, n_val: int = 20) -> None:
    """The four splits are non-empty, disjoint, cover the suite and follow Eq. 14; they are a function of
    the seed; a held-out environment appears only in eval; no twin straddles the boundary."""
    from cfjax.types import check_disjoint

    sp = suite.splits(seed=seed, n_val=n_val)
    parts = {name: set(_ids(getattr(sp, name))) for name in ("build", "train", "val", "eval")}
    for name, ids in parts.items():
        assert len(ids) == len(getattr(sp, name)) > 0, (suite.name, name)
    names_ = list(parts)
    for i, a in enumerate(names_):
        for b in names_[i + 1:]:
            assert not parts[a] & parts[b], (suite.name, a, b)
    assert set().union(*parts.values()) == set(_ids(suite.tasks)), suite.name
    assert len(sp.val) == n_val, suite.name
    check_disjoint(sp.build, list(sp.train) + list(sp.val), sp.eval)
    again = suite.splits(seed=seed, n_val=n_val)
    for name in names_:
        assert _ids(getattr(again, name)) == _ids(getattr(sp, name)), (suite.name, name)
    held = set(getattr(suite, "holdout_envs", ()) or ())
    assert not any(t.env_id in held for t in list(sp.build) + list(sp.train) + list(sp.val)), suite.name
    check_no_twin_straddles(suite, seed)


def check_no_twin_straddles(suite: Any, seed: int) -> None:
    """Twins (same environment, same normalised gold action, e.g. base ↔ new-surface) never straddle
    the held-out boundary: the leak the id check alone cannot see."""
    s = suite
    sp = s.splits(seed=seed)

    def twin(t):
        return t.env_id, s.edits.normalize(s.answer_key(t.task_id).gold)

    seen = {twin(t) for part in (sp.build, sp.train, sp.val) for t in part}
    leaks = [t.task_id for t in sp.eval if twin(t) in seen]
    assert leaks == []
    # the suites do have twins, so the grouping is not vacuous
    keys = [twin(t) for t in s.tasks]
    assert len(set(keys)) < len(keys)


# --------------------------------------------------------------------------- the edit model


def drafts(suite: Any, attempts: int = 1) -> list[tuple[Any, str]]:
    """``(task, draft)`` of a scripted model that always errs (the domain's competence interface), for
    every task and attempt: actions the rule operators must handle."""
    from cfjax.llm.scripted import ScriptedConfig

    dom = suite.scripted_domain()
    cfg = ScriptedConfig(p_error=1.0, p_error_look_alike=1.0, p_noise=0.0)
    return [(t, dom.draft(t, a, random.Random(f"{t.task_id}/{a}"), cfg)) for t in suite.tasks for a in range(attempts)]


def check_rule_edits(suite: Any, actions: Sequence[tuple[str, Any]] | None = None, min_edits: int = 1) -> int:
    """Every rule edit of every action (default: every gold action and :func:`drafts`) replaces exactly
    one decision unit, parses, and is distinct from the others; returns how many edits were checked."""
    dom, ed = suite.scripted_domain(), suite.edits
    if actions is None:
        pairs = {(ed.normalize(suite.keys[t.task_id].gold), t) for t in suite.tasks}
        for t, a in drafts(suite):
            try:
                pairs.add((ed.normalize(a), t))
            except EditError:
                continue  # a draft that does not parse has no units to edit
        actions = sorted(pairs, key=lambda x: (x[1].task_id, x[0]))
    n = 0
    for a, t in actions:
        base = ed.units(a)
        edits = ed.rule_edits(a, dom.env(t))
        assert len(set(edits)) == len(edits), a
        results = set()
        for i, text in edits:
            assert text != base[i].text
            new = ed.replace_unit(a, i, text)
            d = ed.diff_units(a, new)
            assert d is not None and d[0] == i and d[2].text == text, (a, i, text)
            results.add(new)
            n += 1
        assert len(results) == len(edits) and ed.normalize(a) not in results
    assert n >= min_edits, (suite.name, n)
    return n


# --------------------------------------------------------------------------- the scripted generator's competence


def check_competence(suite: Any, *, min_fixable: int = 40, episodes: int = 4) -> None:
    """Among failed held-out drafts that one unit edit can fix, the share whose fix is among Module I's K
    alternatives equals ``ScriptedConfig.p_propose_fix`` within three standard errors (drafts with
    fewer than K wrong edits, where the rule fill reaches the fix regardless, are counted apart and
    must stay under a fifth)."""
    from cfjax.config import GeneratorConfig
    from cfjax.countermem.calls import GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest
    from cfjax.countermem.generator import propose_alternatives
    from cfjax.infra.ledger import Ledger
    from cfjax.llm.base import DraftRequest
    from cfjax.llm.calls import DRAFT_ACTION
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig

    K = GeneratorConfig().k_alternatives
    name = suite.name
    cfg = ScriptedConfig()
    ed = suite.edits
    envs = suite.envs()
    tasks = list(suite.splits(seed=12345).eval)
    blind = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(p_propose_fix=0.0))
    hits = n = short = short_hits = 0
    for ep in range(episodes):  # independent draft draws per task
        bb = ScriptedBackbone(suite.scripted_domain(), cfg)
        for t in tasks:
            d = ed.normalize(bb.call(DRAFT_ACTION, DraftRequest(t, episode=ep)).action)
            gold = ed.normalize(suite.answer_key(t.task_id).gold)
            if d == gold or ed.diff_units(d, gold) is None:  # solved, or not one-unit fixable
                continue
            fail = Outcome(0.0, False, True, "the result is not what was asked")
            alts = propose_alternatives(t, (), d, fail, backbone=bb, config=GeneratorConfig(),
                                        schema=envs.get(t.env_id), rng=random.Random(ep), ledger=Ledger("t"),
                                        episode=ep, edits=ed)
            assert len(alts) <= K
            hit = any(ed.normalize(a.action) == gold for a in alts)
            units = [u.text for u in ed.units(d)]
            if len(blind.call(GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest(t, (), d, "", units, K, ep)).edits) < K:
                short += 1  # fewer than K wrong edits exist: the rule fill reaches the fix regardless
                short_hits += hit
                continue
            n += 1
            hits += hit
    assert n >= min_fixable, n
    p = cfg.p_propose_fix
    share = hits / n
    se_ = (p * (1 - p) / n) ** 0.5
    assert abs(share - p) <= 3 * se_, f"{name}: {hits}/{n} = {share:.3f} vs p_propose_fix = {p} (±{3 * se_:.3f})"
    assert short <= 0.2 * (n + short), f"{name}: {short} of {n + short} fixable drafts have < K wrong edits"


# --------------------------------------------------------------------------- malformed actions


def check_bad_actions(suite: Any, actions: Sequence[str] = BAD_ACTIONS, n_tasks: int = 3) -> None:
    """The world scores every malformed action 0 — completed or not, never solved — with a feedback
    line, and never raises; the edit model either splits it into units or raises ``EditError``; the
    gold action of the same tasks is solved (the check is not vacuous)."""
    world = suite.world()
    try:
        tasks = [t for t in suite.tasks if suite.keys[t.task_id].variant == "base"][:n_tasks] or suite.tasks[:n_tasks]
        for t in tasks:
            for a in actions:
                out = world.evaluate(t, a)
                assert isinstance(out, Outcome), (suite.name, t.task_id, repr(a[:20]))
                assert out.score == 0.0 and not out.solved, (suite.name, t.task_id, repr(a[:20]), out)
                assert isinstance(out.feedback, str) and out.feedback.strip(), (suite.name, t.task_id, repr(a[:20]))
                try:
                    suite.edits.units(a)
                except EditError:
                    pass
            key: AnswerKey = suite.keys[t.task_id]
            assert world.evaluate(t, key.gold).solved, (suite.name, t.task_id)
    finally:
        close = getattr(world, "close", None)
        if close is not None:
            close()


# --------------------------------------------------------------------------- everything at once


def check_all(name: str, root: str | Path, *, config: Any = None, rows: Sequence[str] = ("none", "cf_memory"),
              max_tasks: int = 5, competence: bool = True) -> None:
    """Every check above on the registered domain ``name``, its suite built under ``root``."""
    from cfjax.config import CounterMemConfig
    from cfjax.domains import build_suite

    check_info(name)
    suite = build_suite(name, Path(root) / name)
    check_languages(suite)
    check_tasks_show_no_answer(suite)
    check_scripted_calls_read_no_key(suite)
    check_splits(suite)
    check_rule_edits(suite)
    check_bad_actions(suite)
    if competence:
        check_competence(suite)
    if config is None:
        c = CounterMemConfig()
        config = dataclasses.replace(c, seeds=(0,), dqn=dataclasses.replace(c.dqn, total_decisions=80,
                                                                             checkpoint_every=40),
                                     experiment=dataclasses.replace(c.experiment, accumulation_checkpoints=(0, 4)))
    check_unit_under_guard(suite, config, rows, max_tasks)

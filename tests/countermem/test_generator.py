"""Tests for Modules I-II (cfjax.countermem.generator) and the Eq. 6 reuse label (App. B.3)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from cfjax.config import GeneratorConfig, StoreConfig
from cfjax.countermem.agent import reuse_label
from cfjax.countermem.generator import expand_failure, propose_alternatives
from cfjax.countermem.store import MemoryStore
from cfjax.infra.ledger import Ledger
from cfjax.countermem.calls import GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest
from cfjax.llm.base import DraftRequest
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.types import Task
from cfjax.domains.sql import edits as se
from cfjax.types import Outcome
from cfjax.domains.sql.edits import SQLEdits

SQL_EDITS = SQLEdits()


@pytest.fixture(scope="module")
def backbone(suite) -> ScriptedBackbone:
    return ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(p_error=1.0, p_error_look_alike=1.0, p_noise=0.0))


@pytest.fixture(scope="module")
def failures(suite, world, backbone) -> list[tuple[Task, str, Outcome]]:
    """(task, failed draft, outcome), a spread over families, variants and databases."""
    out = []
    for t in suite.tasks[::3]:
        d = backbone.call(DRAFT_ACTION, DraftRequest(t)).action
        o = world.evaluate(t, d)
        if not o.solved and o.completed:
            out.append((t, d, o))
    assert len(out) > 60
    return out


class CountingWorld:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str, Outcome]] = []

    def evaluate(self, task: Task, action: str) -> Outcome:
        o = self.inner.evaluate(task, action)
        self.calls.append((task.task_id, action, o))
        return o


@dataclass
class ScriptedWorld:
    """Returns pre-set outcomes in call order."""

    outcomes: list[Outcome]
    calls: list[str] = field(default_factory=list)

    def evaluate(self, task: Task, action: str) -> Outcome:
        self.calls.append(action)
        return self.outcomes[len(self.calls) - 1]


# --------------------------------------------------------------------------- propose_alternatives


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_propose_alternatives_contract(suite, backbone, failures, k):
    cfg = GeneratorConfig(k_alternatives=k)
    n_full = 0
    for t, d, o in failures:
        ledger = Ledger("construct")
        alts = propose_alternatives(t, (), d, o, backbone=backbone, edits=SQL_EDITS, config=cfg, schema=suite.specs[t.env_id],
                                    rng=random.Random(0), ledger=ledger)
        assert len(alts) <= k
        actions = [a.action for a in alts]
        assert len(set(actions)) == len(actions)  # no duplicates
        assert se.normalize(d) not in actions  # no no-op
        for a in alts:
            diff = se.diff_units(d, a.action)
            assert diff is not None, (d, a)  # exactly one unit changed
            assert diff[0] == a.unit_index and diff[1].text == a.unit_before and diff[2].text == a.unit_after
        # backbone proposals first, then rule fill
        sources = [a.source for a in alts]
        assert sources == sorted(sources, key=lambda s: s != "backbone")
        bb_res = backbone.call(GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest(
            t, (), d, o.feedback, [u.text for u in se.units(d)], k, 0))
        expected_bb = []
        for i, x in bb_res.edits:
            new = se.replace_unit(d, i, x)
            if new not in expected_bb and se.diff_units(d, new) is not None:
                expected_bb.append(new)
        assert [a.action for a in alts if a.source == "backbone"] == expected_bb[:k]
        # rules fill every free slot when they can
        rule_outcomes = {se.replace_unit(d, i, x) for i, x in se.rule_edits(d, suite.specs[t.env_id])}
        pool = set(expected_bb) | {r for r in rule_outcomes if se.diff_units(d, r) is not None}
        assert len(alts) == min(k, len(pool))
        n_full += len(alts) == k
        # one LLM call, charged to verification, no evaluator call
        assert ledger.total.llm_calls == ledger.verification.llm_calls == 1
        assert ledger.total.eval_calls == 0
    if k <= 4:
        assert n_full > 0


def test_propose_alternatives_rules_only(suite, backbone, failures):
    cfg = GeneratorConfig(use_backbone=False)
    for t, d, o in failures[:30]:
        ledger = Ledger("construct")
        alts = propose_alternatives(t, (), d, o, backbone=backbone, edits=SQL_EDITS, config=cfg, schema=suite.specs[t.env_id],
                                    rng=random.Random(1), ledger=ledger)
        assert all(a.source == "rule" for a in alts)
        assert ledger.total.llm_calls == 0 and ledger.total.tokens == 0


def test_propose_alternatives_seeded_shuffle(suite, backbone, failures):
    cfg = GeneratorConfig(use_backbone=False, k_alternatives=2)
    t, d, o = next(f for f in failures if len(se.rule_edits(f[1], suite.specs[f[0].env_id])) > 3)
    run = lambda seed: [a.action for a in propose_alternatives(  # noqa: E731
        t, (), d, o, backbone=backbone, edits=SQL_EDITS, config=cfg, schema=suite.specs[t.env_id], rng=random.Random(seed),
        ledger=Ledger("c"))]
    assert run(5) == run(5)
    assert len({tuple(run(s)) for s in range(10)}) > 1


def test_propose_alternatives_unparsable_action(suite, backbone, world):
    t = suite.tasks[0]
    o = world.evaluate(t, "SELEC (")
    ledger = Ledger("c")
    assert propose_alternatives(t, (), "SELEC (", o, backbone=backbone, edits=SQL_EDITS, config=GeneratorConfig(),
                                schema=suite.specs[t.env_id], rng=random.Random(0), ledger=ledger) == []
    assert ledger.total.llm_calls == 0


# --------------------------------------------------------------------------- expand_failure


@pytest.mark.parametrize("budget0", [0, 1, 2, 3, 12])
def test_expand_failure_respects_verification_budget(suite, world, backbone, failures, budget0):
    store = MemoryStore(edits=SQL_EDITS)
    cw = CountingWorld(world)
    total_checked = 0
    budget = [budget0]
    for t, d, o in failures[:25]:
        ledger = Ledger("construct")
        before = budget[0]
        ex = expand_failure(t, (), d, o, backbone=backbone, edits=SQL_EDITS, world=cw, store=store, config=GeneratorConfig(),
                            schema=suite.specs[t.env_id], rng=random.Random(0), ledger=ledger, budget=budget)
        assert ex.checked == min(before, ex.proposed)
        assert budget[0] == before - ex.checked >= 0
        assert ledger.total.eval_calls == ledger.verification.eval_calls == ex.checked
        assert ledger.verification.llm_calls == ledger.total.llm_calls == 1 + ex.eligible  # alternatives + distils
        assert len(ex.admissions) == ex.eligible <= ex.checked
        total_checked += ex.checked
    assert len(cw.calls) == total_checked <= budget0


def test_expand_failure_admits_only_verified_gains(suite, world, backbone, failures):
    store = MemoryStore(StoreConfig(capacity=1000), edits=SQL_EDITS)
    cw = CountingWorld(world)
    n_adm = 0
    for t, d, o in failures:
        start = len(cw.calls)
        ex = expand_failure(t, (), d, o, backbone=backbone, edits=SQL_EDITS, world=cw, store=store, config=GeneratorConfig(),
                            schema=suite.specs[t.env_id], rng=random.Random(0), ledger=Ledger("c"), budget=[12])
        checks = cw.calls[start:]
        assert len(checks) == ex.checked
        gains = [o2.score - o.score for _, _, o2 in checks if o2.completed]
        assert ex.eligible == sum(g > store.config.eps_adm for g in gains)
        for adm in ex.admissions:
            if adm.admitted:
                n_adm += 1
                rec = store.records.get(adm.record_id)
                if rec is not None:
                    assert rec.source_task == t.task_id and rec.original == d
                    assert rec.score_before == o.score and rec.delta > store.config.eps_adm
                    assert se.diff_units(rec.original, rec.improved) is not None
    assert n_adm > 10
    assert all(r.delta > store.config.eps_adm for r in store.records.values())


def test_expand_failure_gate_on_scripted_outcomes(suite, backbone, failures):
    o = Outcome(0.0, False, True, "mismatch")
    cfg = GeneratorConfig(k_alternatives=4, use_backbone=False)
    for t, d, _ in failures:
        alts = propose_alternatives(t, (), d, o, backbone=backbone, edits=SQL_EDITS, config=cfg, schema=suite.specs[t.env_id],
                                    rng=random.Random(0), ledger=Ledger("c"))
        if len(alts) == 4:
            break
    assert len(alts) == 4
    fw = ScriptedWorld([
        Outcome(0.05, False, True, "Δ = ε_adm exactly"),  # not > ε_adm
        Outcome(1.0, True, False, "timeout", "timeout"),  # incomplete: never admissible
        Outcome(0.06, False, True, "just above"),
        Outcome(1.0, True, True, "solved"),
    ])
    store = MemoryStore(StoreConfig(lambda_r=0.0, lambda_i=0.0, tau_adm=0.0), edits=SQL_EDITS)
    ex = expand_failure(t, (), d, o, backbone=backbone, edits=SQL_EDITS, world=fw, store=store, config=cfg,
                        schema=suite.specs[t.env_id], rng=random.Random(0), ledger=Ledger("c"), budget=[10])
    assert fw.calls == [a.action for a in alts]  # every alternative checked once, from the same state
    assert ex.checked == 4 and ex.eligible == 2
    assert [round(a.score, 6) for a in ex.admissions] == [0.06, 1.0]
    assert sorted(round(r.delta, 6) for r in store.records.values()) == [0.06, 1.0]


# --------------------------------------------------------------------------- reuse label (App. B.3)


@pytest.mark.parametrize("changed,solved,score,reference,want", [
    (False, False, 0.0, None, 0),
    (False, True, 1.0, 0.0, 0),  # unchanged → neutral even when solved
    (False, False, 0.2, 0.9, 0),  # unchanged → neutral even when worse
    (True, True, 1.0, None, 1),
    (True, True, 1.0, 1.0, 1),  # changed and solved → beneficial regardless of the reference
    (True, False, 0.6, 0.3, 1),
    (True, False, 0.3, 0.6, -1),
    (True, False, 0.0, 0.9, -1),
    (True, False, 0.4, 0.4, 0),
    (True, False, 0.4, None, 0),  # no reference → neutral
    (True, False, 0.0, None, 0),
])
def test_reuse_label_truth_table(changed, solved, score, reference, want):
    assert reuse_label(changed, solved, score, reference) == want

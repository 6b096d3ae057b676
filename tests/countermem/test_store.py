"""Tests for the CounterMem memory store (cfjax.countermem.store).

Eq. 4 admission, Eq. 5 retention, Eq. 6 reuse, freeze, Eq. 7-8 retrieval and
crash-safe persistence (papers/countermem.md §3.3-3.4, App. B.1-B.4), checked
against hand computations with the normalisations documented on
:class:`cfjax.config.StoreConfig`.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import numpy as np
import pytest

from cfjax.config import RetrievalConfig, StoreConfig
from cfjax.countermem.store import (
    Candidate,
    FrozenStoreError,
    MemoryStore,
    reuse_update,
)
from cfjax.infra.io import temp_files_for
from cfjax.types import Task
from cfjax.domains.sql import observe_attrs
from cfjax.domains.sql.edits import signature
from cfjax.domains.sql.edits import SQLEdits

SQL_EDITS = SQLEdits()

# one-unit edits with pairwise different masked edits, so R = 0 among them
EDITS = [
    ("SELECT name FROM employees WHERE age > 30", "age > 30", "age >= 30",
     "SELECT name FROM employees WHERE age >= 30"),
    ("SELECT city FROM employees", "SELECT city", "SELECT DISTINCT city",
     "SELECT DISTINCT city FROM employees"),
    ("SELECT name FROM products ORDER BY price ASC LIMIT 3", "ORDER BY price ASC", "ORDER BY price DESC",
     "SELECT name FROM products ORDER BY price DESC LIMIT 3"),
    ("SELECT name FROM customers WHERE email = ''", "email = ''", "email IS NULL",
     "SELECT name FROM customers WHERE email IS NULL"),
    ("SELECT COUNT(*) FROM customers", "SELECT COUNT(*)", "SELECT COUNT(email)",
     "SELECT COUNT(email) FROM customers"),
]

SITUATIONS = [
    "The question says 'at least'. A numeric threshold predicate omitted its boundary value.",
    "The question asks which different values appear; duplicates were returned.",
    "The question asks for the highest values first; the ordering was ascending.",
    "The question asks for unknown values; an empty string was compared instead of NULL.",
    "The question counts rows that have a value on record; all rows were counted.",
]


def cand(i: int = 0, *, src: str | None = None, delta: float = 0.9, before: float = 0.0,
         condition: str = "none", situation: str | None = None, evidence: str = "checked from the same state") -> Candidate:
    orig, ub, ua, imp = EDITS[i % len(EDITS)]
    return Candidate(
        source_task=src if src is not None else f"src/{i}",
        situation=situation if situation is not None else SITUATIONS[i % len(SITUATIONS)],
        original=orig, improved=imp, unit_before=ub, unit_after=ua, evidence=evidence,
        condition=condition, score_before=before, score_after=before + delta,
    )


def task(task_id: str, question: str, *, env: str = "hr", tables: tuple[str, ...] = ("employees",),
         column_type: str | None = "numeric") -> Task:
    attrs = observe_attrs(question, env=env, tables=tables, column_type=column_type)
    return Task(task_id, question, env, "", attrs)


def emb(store: MemoryStore, text: str) -> np.ndarray:
    return store.embedder.embed([text])[0].astype(np.float64)


def hand_R(store: MemoryStore, unit_before: str, unit_after: str, condition: str, exclude: int | None = None) -> float:
    """R(m, M) as documented on StoreConfig: Σ_j sim(c, c_j) over stored records with the same
    masked edit (exact signature match) whose condition cosine is ≥ redundancy_threshold."""
    edit = (signature(unit_before), signature(unit_after))
    v = emb(store, condition)
    r = 0.0
    for rid, rec in store.records.items():
        if rid == exclude or (signature(rec.unit_before), signature(rec.unit_after)) != edit:
            continue
        s = float(v @ emb(store, rec.condition))
        if s >= store.config.redundancy_threshold:
            r += s
    return r


# --------------------------------------------------------------------------- Eq. 4


def test_test_edits_have_distinct_masked_edits():
    sigs = {(signature(c.unit_before), signature(c.unit_after)) for c in (cand(i) for i in range(len(EDITS)))}
    assert len(sigs) == len(EDITS)  # precondition of the hand computations below (R = 0 among them)


@pytest.mark.parametrize("delta", [0.06, 0.3, 0.9, 1.0])
def test_admission_score_empty_store(delta):
    store = MemoryStore(edits=SQL_EDITS)
    s, r, i = store.admission_score(cand(0, delta=delta))
    assert r == 0.0 and i == 0.0
    assert s == pytest.approx(store.config.lambda_delta * min(max(delta, 0.0), 1.0))


def test_admission_score_clips_delta_above_one():
    store = MemoryStore(StoreConfig(lambda_delta=2.0), edits=SQL_EDITS)
    c = Candidate("a", "sit", "q1", "q2", "age > 1", "age >= 1", "e", "none", -0.5, 1.0)  # Δ = 1.5
    assert c.delta == pytest.approx(1.5)
    s, _, _ = store.admission_score(c)
    assert s == pytest.approx(2.0 * 1.0)


def test_duplicate_advice_adds_redundancy_and_third_copy_is_rejected():
    store = MemoryStore(edits=SQL_EDITS)
    cond = 'boundary = "inclusive"'
    a1 = store.admit(cand(0, src="t1", delta=1.0, condition=cond))
    assert a1.admitted and a1.redundancy == 0.0 and a1.score == pytest.approx(1.0)
    # same masked edit on another column/value, same condition, another source task
    c2 = replace(cand(0, src="t2", delta=1.0, condition=cond), unit_before="salary > 50000",
                 unit_after="salary >= 50000")
    s2, r2, i2 = store.admission_score(c2)
    assert r2 == pytest.approx(1.0, abs=1e-5)
    assert i2 == 0.0
    assert s2 == pytest.approx(1.0 - store.config.lambda_r * 1.0, abs=1e-5)  # Δ − 0.7
    a2 = store.admit(c2)
    assert a2.admitted and a2.score == pytest.approx(s2)
    # a third copy: R ≈ 2, S = 1 − 1.4 ≤ τ_adm
    a3 = store.admit(cand(0, src="t3", delta=1.0, condition=cond))
    assert not a3.admitted
    assert a3.redundancy == pytest.approx(2.0, abs=1e-5)
    assert a3.score == pytest.approx(1.0 - 0.7 * 2.0, abs=1e-5)
    assert a3.score <= store.config.tau_adm
    assert "τ_adm" in a3.reason
    assert len(store) == 2 and a3.record_id is None


@pytest.mark.parametrize("delta", [0.05, 0.0, -0.3])
def test_small_delta_rejected_with_reason(delta):
    store = MemoryStore(edits=SQL_EDITS)
    c = Candidate("t", "sit", "q1", "q2", "age > 1", "age >= 1", "e", "none", 0.0, delta)
    assert c.delta == delta
    adm = store.admit(c)
    assert not adm.admitted and math.isnan(adm.score)
    assert "ε_adm" in adm.reason
    assert len(store) == 0


@pytest.mark.parametrize("bad", ["", "question contains", "boundary ==", "a = 'single quotes'", "(x = 1",
                                 "none and x = 1", "drop table"])
def test_unparsable_condition_rejected_at_admission(bad):
    store = MemoryStore(edits=SQL_EDITS)
    adm = store.admit(cand(0, condition=bad))
    assert not adm.admitted
    assert adm.reason.startswith("unparsable condition")
    assert len(store) == 0 and store.to_payload()["next_id"] == 0


def test_condition_is_stored_in_canonical_form():
    store = MemoryStore(edits=SQL_EDITS)
    adm = store.admit(cand(0, condition='  BOUNDARY == "inclusive"   AND  Bound_Side = "lower" '))
    assert adm.admitted
    assert store.records[adm.record_id].condition == 'boundary = "inclusive" and bound_side = "lower"'


def test_conflict_of_reversed_universal_edit_on_same_situation():
    store = MemoryStore(edits=SQL_EDITS)
    sit = "A numeric threshold predicate may omit its boundary value."
    assert store.admit(cand(0, src="t1", delta=1.0, condition='boundary = "inclusive"', situation=sit)).admitted
    rev = Candidate("t2", sit, "SELECT name FROM employees WHERE age >= 40", "SELECT name FROM employees WHERE age > 40",
                    "age >= 40", "age > 40", "e", "none", 0.0, 0.8)
    s, r, i = store.admission_score(rev)
    assert i == pytest.approx(1.0, abs=1e-5)
    c = store.config
    assert s == pytest.approx(c.lambda_delta * 0.8 - c.lambda_r * r - c.lambda_i * i, abs=1e-6)
    assert not store.admit(rev).admitted
    # a reversed edit whose condition is incompatible (and not universal) is no conflict
    rev2 = replace(rev, condition='boundary = "strict"')
    assert store.admission_score(rev2)[2] == 0.0
    # the same (not reversed) edit is never a conflict
    assert store.admission_score(cand(0, src="t3", condition="none", situation=sit))[2] == 0.0


@pytest.mark.parametrize("ub,ua", [("age >= 40", "age > 40"), ("age < 40", "age <= 40")],
                         ids=["reversed_edit", "upper_bound_edit"])
def test_redundancy_counts_only_the_same_masked_edit(ub, ua):
    store = MemoryStore(edits=SQL_EDITS)
    cond = 'boundary = "inclusive"'
    assert store.admit(cand(0, src="t1", delta=1.0, condition=cond, situation="situation one")).admitted
    other = replace(cand(0, src="t2", delta=1.0, condition=cond, situation="a different situation"),
                    unit_before=ub, unit_after=ua)
    _, r, _ = store.admission_score(other)
    assert r == 0.0


def test_redundancy_needs_a_similar_condition():
    store = MemoryStore(edits=SQL_EDITS)
    assert store.admit(cand(0, src="t1", delta=1.0, condition='boundary = "inclusive"')).admitted
    same_edit_other_cond = cand(0, src="t2", delta=1.0,
                                condition='question contains "strictly above" and column_type = "numeric"')
    s, r, _ = store.admission_score(same_edit_other_cond)
    assert r == pytest.approx(hand_R(store, same_edit_other_cond.unit_before, same_edit_other_cond.unit_after,
                                     same_edit_other_cond.condition))
    assert r == 0.0 and s == pytest.approx(1.0)


# --------------------------------------------------------------------------- Eq. 5


def test_retention_scores_by_hand():
    cfg = StoreConfig()
    store = MemoryStore(cfg, edits=SQL_EDITS)
    ids = []
    # two records with the same advice (R ≈ 1 each) and two distinct ones
    for k, (i, src, d) in enumerate([(0, "a", 1.0), (0, "b", 0.95), (1, "c", 0.4), (2, "d", 0.7)]):
        adm = store.admit(cand(i, src=src, delta=d))
        assert adm.admitted, adm
        ids.append(adm.record_id)
    for rid, labels in zip(ids, [[1, 1, 0], [-1], [1, 0, 0, 1, -1], []]):
        for y in labels:
            store.update_reuse(rid, y)
    got = store.retention_scores()
    max_uses = max(1, max(store.stats[r].uses for r in ids))
    assert max_uses == 5
    for rid in ids:
        rec, st = store.records[rid], store.stats[rid]
        u = 0.0
        for y in {ids[0]: [1, 1, 0], ids[1]: [-1], ids[2]: [1, 0, 0, 1, -1], ids[3]: []}[rid]:
            u = (1 - cfg.rho) * u + cfg.rho * y
        assert st.u == pytest.approx(u)
        want = (cfg.alpha * min(max(rec.delta, 0.0), 1.0) + cfg.beta * u + cfg.omega * st.uses / max_uses
                - cfg.eta * hand_R(store, rec.unit_before, rec.unit_after, rec.condition, exclude=rid))
        assert got[rid] == pytest.approx(want, abs=1e-5), rid
    # the duplicated pair is penalised by R ≈ 1, the others not at all
    r0, r2 = store.records[ids[0]], store.records[ids[2]]
    assert hand_R(store, r0.unit_before, r0.unit_after, r0.condition, exclude=ids[0]) == pytest.approx(1.0, abs=1e-5)
    assert hand_R(store, r2.unit_before, r2.unit_after, r2.condition, exclude=ids[2]) == 0.0


def test_retention_scores_no_uses_means_zero_frequency():
    store = MemoryStore(edits=SQL_EDITS)
    for i, d in enumerate([0.3, 0.6, 0.9]):
        store.admit(cand(i, delta=d))
    assert sorted(store.retention_scores().values()) == pytest.approx([0.3, 0.6, 0.9])


def test_capacity_utility_evicts_lowest_keep_score_first():
    store = MemoryStore(StoreConfig(capacity=3), edits=SQL_EDITS)
    a = [store.admit(cand(i, delta=d)) for i, d in enumerate([0.9, 0.5, 0.7])]
    assert all(x.admitted and not x.evicted for x in a)
    a4 = store.admit(cand(3, delta=0.8))
    assert a4.admitted and a4.evicted == (a[1].record_id,)
    assert len(store) == 3
    assert sorted(store.records) == [a[0].record_id, a[2].record_id, a4.record_id]
    # a newcomer with the lowest S_keep is admitted and immediately evicted
    a5 = store.admit(cand(4, delta=0.3))
    assert not a5.admitted and a5.evicted == (a5.record_id,)
    assert "evicted" in a5.reason
    assert len(store) == 3 and a5.record_id not in store.records


def test_capacity_utility_reuse_protects_a_record():
    store = MemoryStore(StoreConfig(capacity=2), edits=SQL_EDITS)
    lo = store.admit(cand(0, delta=0.3)).record_id
    hi = store.admit(cand(1, delta=0.6)).record_id
    for _ in range(4):
        store.update_reuse(lo, 1)  # u = 1 − 0.7⁴ ≈ 0.76, F = 1 → S_keep ≈ 1.56 > 0.6
    keep = store.retention_scores()
    assert keep[lo] == pytest.approx(0.3 + (1 - 0.7**4) + 0.5)
    assert keep[hi] == pytest.approx(0.6)
    adm = store.admit(cand(2, delta=0.9))
    assert adm.admitted and adm.evicted == (hi,)  # without reuse, the Δ = 0.3 record would go
    assert sorted(store.records) == [lo, adm.record_id]


def test_capacity_utility_ties_evict_oldest():
    store = MemoryStore(StoreConfig(capacity=2), edits=SQL_EDITS)
    ids = [store.admit(cand(i, delta=0.6)).record_id for i in range(2)]
    a3 = store.admit(cand(2, delta=0.6))
    assert a3.evicted == (ids[0],)
    a4 = store.admit(cand(3, delta=0.6))
    assert a4.evicted == (ids[1],)
    assert sorted(store.records) == [a3.record_id, a4.record_id]


@pytest.mark.parametrize("rule", ["utility", "recency", "random", "similarity"])
def test_store_size_never_exceeds_capacity(rule):
    cap = 3
    store = MemoryStore(StoreConfig(capacity=cap, retention=rule, seed=5), edits=SQL_EDITS)
    rng = random.Random(0)
    for n in range(15):
        store.admit(cand(n % len(EDITS), src=f"s{n}", delta=rng.uniform(0.2, 1.0),
                         condition=f'question contains "phrase {n}"', situation=f"situation number {n} {rng.random()}"))
        assert len(store) <= cap
        assert len(store.stats) == len(store.records) == len(store._index)


def test_recency_evicts_oldest():
    store = MemoryStore(StoreConfig(capacity=2, retention="recency"), edits=SQL_EDITS)
    a = [store.admit(cand(i, delta=d)) for i, d in enumerate([0.9, 0.2])]
    a3 = store.admit(cand(2, delta=0.9))
    assert a3.evicted == (a[0].record_id,)  # utility would have evicted the Δ = 0.2 record
    a4 = store.admit(cand(3, delta=0.15))
    assert a4.evicted == (a[1].record_id,)


def _random_run(seed: int) -> tuple[tuple[int, ...], ...]:
    store = MemoryStore(StoreConfig(capacity=3, retention="random", seed=seed), edits=SQL_EDITS)
    out = []
    for n in range(10):
        adm = store.admit(cand(n % len(EDITS), src=f"s{n}", delta=0.9,
                               condition=f'question contains "p{n}"', situation=f"situation {n}"))
        out.append(adm.evicted)
    return tuple(out)


def test_random_retention_is_deterministic_for_a_seed():
    assert _random_run(7) == _random_run(7)
    runs = {_random_run(s) for s in range(8)}
    assert len(runs) > 1  # the seed matters


def test_similarity_retention_evicts_most_similar_record():
    store = MemoryStore(StoreConfig(capacity=3, retention="similarity"), edits=SQL_EDITS)
    sits = [
        "The employees age threshold question says at least and the boundary was dropped.",
        "The employees age threshold question says at least and the boundary was dropped!",
        "Products ordered by price descending, most expensive first.",
        "Customer email missing and never recorded in the table.",
    ]
    ids = []
    for i, s in enumerate(sits[:3]):
        ids.append(store.admit(cand(i, delta=0.9, situation=s)).record_id)
    adm = store.admit(cand(3, delta=0.9, situation=sits[3]))
    all_ids = ids + [adm.record_id]
    # brute force over the 4 records present before eviction
    mat = store.embedder.embed(sits).astype(np.float64)
    sims = mat @ mat.T
    np.fill_diagonal(sims, -np.inf)
    want = all_ids[int(np.argmax(sims.max(axis=1)))]
    assert want in ids[:2]
    assert adm.evicted == (want,)


# --------------------------------------------------------------------------- Eq. 6


def test_reuse_update_hand_values():
    assert reuse_update(0.0, 1, 0.3) == pytest.approx(0.3)
    assert reuse_update(0.3, -1, 0.3) == pytest.approx(0.7 * 0.3 - 0.3)
    assert reuse_update(0.5, 0, 0.3) == pytest.approx(0.35)
    assert reuse_update(-0.2, 1, 1.0) == pytest.approx(1.0)


def test_reuse_update_sequence_matches_numpy_loop():
    rng = np.random.default_rng(3)
    ys = rng.integers(-1, 2, size=200)
    for rho in (0.05, 0.3, 0.9):
        u = 0.0
        ref = np.float64(0.0)
        for y in ys:
            u = reuse_update(u, int(y), rho)
            ref = (1.0 - rho) * ref + rho * y
            assert -1.0 <= u <= 1.0
        assert u == pytest.approx(float(ref), abs=1e-12)


@pytest.mark.parametrize("y", [2, -2, 0.5, 3])
def test_reuse_update_invalid_label(y):
    with pytest.raises(ValueError):
        reuse_update(0.0, y, 0.3)
    store = MemoryStore(edits=SQL_EDITS)
    rid = store.admit(cand(0)).record_id
    with pytest.raises(ValueError):
        store.update_reuse(rid, y)


def test_update_reuse_counts_and_matches_eq6():
    store = MemoryStore(edits=SQL_EDITS)
    rid = store.admit(cand(0)).record_id
    labels = [1, 1, 0, -1, 1, 0, -1, -1]
    u = 0.0
    for y in labels:
        u = (1 - 0.3) * u + 0.3 * y
        assert store.update_reuse(rid, y) == pytest.approx(u)
    st = store.stats[rid]
    assert (st.uses, st.helpful, st.harmful) == (8, 3, 3)
    assert st.u == pytest.approx(u)
    assert st.helpful_fraction == pytest.approx(3 / 8)


def test_update_reuse_changes_eq8_ranking_through_bias():
    store = MemoryStore(edits=SQL_EDITS)
    q = "employees age at least threshold boundary"
    a = store.admit(cand(0, src="a", situation="employees age at least threshold boundary value")).record_id
    b = store.admit(cand(1, src="b", situation="employees age threshold boundary")).record_id
    t = task("new", "List employees whose age is at least 30.")
    r0 = store.retrieve(t, q, k=2)
    assert [x.record.record_id for x in r0] == [a, b]
    gap = r0[0].relevance - r0[1].relevance
    assert 0 < gap < 0.2  # the bias can overturn it
    for _ in range(5):
        store.update_reuse(b, 1)
    r1 = store.retrieve(t, q, k=2)
    assert [x.record.record_id for x in r1] == [b, a]
    ub = store.stats[b].u
    assert r1[0].score == pytest.approx(r1[0].relevance + 0.2 * ub, abs=1e-5)
    assert r1[0].relevance == pytest.approx(r0[1].relevance, abs=1e-5)
    for _ in range(8):
        store.update_reuse(b, -1)
    assert [x.record.record_id for x in store.retrieve(t, q, k=2)] == [a, b]


# --------------------------------------------------------------------------- Eq. 7-8


@pytest.fixture()
def retrieval_store() -> tuple[MemoryStore, list[int]]:
    store = MemoryStore(edits=SQL_EDITS)
    specs = [
        (0, "src/at_least", 'boundary = "inclusive"', "question says at least; the threshold predicate dropped its boundary"),
        (1, "src/distinct", "none", "which different values appear; duplicates returned by the projection"),
        (2, "src/order", 'order_direction = "desc"', "highest values first; ordering was ascending"),
        (3, "src/null", 'null_semantics = "missing"', "unknown value; empty string compared instead of NULL"),
        (4, "src/count", "none", "count rows with a value on record; all rows counted"),
        (0, "src/strict", 'question contains "strictly"', "strictly above threshold predicate boundary"),
    ]
    ids = []
    for i, src, cond, sit in specs:
        adm = store.admit(cand(i, src=src, condition=cond, situation=sit, delta=0.9))
        assert adm.admitted, adm
        ids.append(adm.record_id)
    for rid, ys in zip(ids, [[1, 1], [-1], [1], [], [0, 1], [1, -1, 1]]):
        for y in ys:
            store.update_reuse(rid, y)
    return store, ids


def test_retrieve_empty_store_returns_empty_list():
    assert MemoryStore(edits=SQL_EDITS).retrieve(task("t", "List employees whose age is at least 3."), "anything") == []


def test_retrieve_excludes_own_source_task(retrieval_store):
    store, ids = retrieval_store
    own = task("src/at_least", "List employees whose age is at least 30.")
    got = [r.record.record_id for r in store.retrieve(own, own.question, k=10)]
    assert ids[0] not in got
    other = task("other", "List employees whose age is at least 30.")
    assert ids[0] in [r.record.record_id for r in store.retrieve(other, other.question, k=10)]
    assert ids[0] not in store.eligible(own, use_conditions=False)


def test_retrieve_condition_filter_and_ablation(retrieval_store):
    store, ids = retrieval_store
    strict = task("new/strict", "List employees whose age is strictly above 30.")
    assert strict.attrs["boundary"] == "strict"
    got = [r.record.record_id for r in store.retrieve(strict, strict.question, k=10)]
    assert ids[0] not in got  # boundary = "inclusive" fails
    assert ids[1] in got and ids[4] in got  # universal "none" is always eligible
    assert ids[5] in got  # question contains "strictly"
    assert ids[2] not in got and ids[3] not in got  # attributes absent → false
    ablated = [r.record.record_id for r in store.retrieve(strict, strict.question, k=10, use_conditions=False)]
    assert sorted(ablated) == sorted(ids)
    # RetrievalConfig.use_conditions=False is the same ablation
    store2 = MemoryStore(retrieval=RetrievalConfig(use_conditions=False), edits=SQL_EDITS)
    store2.admit(cand(0, condition='boundary = "inclusive"'))
    assert len(store2.retrieve(strict, strict.question, k=10)) == 1
    inclusive = task("new/incl", "List employees whose age is at least 30.")
    assert ids[0] in [r.record.record_id for r in store.retrieve(inclusive, inclusive.question, k=10)]


def test_retrieve_k_limit(retrieval_store):
    store, ids = retrieval_store
    t = task("new", "Which different city values appear among the employees?", column_type="text")
    n_eligible = len(store.eligible(t, use_conditions=False))
    assert n_eligible == len(ids)
    assert len(store.retrieve(t, t.question, use_conditions=False)) == store.retrieval.k == 3
    for k in (1, 2, n_eligible, n_eligible + 5):
        assert len(store.retrieve(t, t.question, k=k, use_conditions=False)) == min(k, n_eligible)
    n_cond = len(store.eligible(t))
    assert 0 < n_cond < n_eligible
    assert len(store.retrieve(t, t.question, k=n_eligible)) == n_cond
    assert len(store.retrieve(t, t.question, k=1)) == 1


@pytest.mark.parametrize("question", [
    "List employees whose age is strictly above 30.",
    "Which different city values appear among the employees?",
    "Which 3 products have the highest price? List their names from the highest down.",
    "List the names of customers whose email address is unknown.",
    "List employees whose age is at least 30.",
])
def test_retrieve_ordering_matches_bruteforce(retrieval_store, question):
    store, ids = retrieval_store
    t = task("new", question)
    state = question + "\nSELECT name FROM employees"
    got = store.retrieve(t, state, k=10)
    q = store.embedder.embed([state])[0].astype(np.float64)
    rows = []
    for rid, rec in store.records.items():
        if rec.source_task == t.task_id or not _cond_holds(rec.condition, t.attrs):
            continue
        cos = float(store.embedder.embed([rec.situation])[0].astype(np.float64) @ q)
        rows.append((cos + 0.2 * store.stats[rid].u, cos, rid))
    rows.sort(key=lambda x: -x[0])
    assert [r.record.record_id for r in got] == [r[2] for r in rows]
    for r, (score, cos, _) in zip(got, rows):
        assert r.score == pytest.approx(score, abs=1e-5)
        assert r.relevance == pytest.approx(cos, abs=1e-5)
        assert r.stats is store.stats[r.record.record_id]
    scores = [r.score for r in got]
    assert scores == sorted(scores, reverse=True)


def _cond_holds(text: str, attrs) -> bool:
    from cfjax.countermem.conditions import parse_condition

    return parse_condition(text).evaluate(attrs)


# --------------------------------------------------------------------------- freeze


def test_freeze_blocks_changes_but_not_retrieval(retrieval_store):
    store, ids = retrieval_store
    t = task("new", "List employees whose age is at least 30.")
    before = store.retrieve(t, t.question, k=5)
    payload = store.to_payload()
    store.freeze()
    assert store.frozen
    with pytest.raises(FrozenStoreError):
        store.admit(cand(1, src="late"))
    with pytest.raises(FrozenStoreError):
        store.update_reuse(ids[0], 1)
    with pytest.raises(FrozenStoreError):  # even a candidate that would be rejected
        store.admit(cand(1, src="late", delta=0.0))
    for _ in range(3):
        after = store.retrieve(t, t.question, k=5)
        store.retrieve(t, "something else entirely", k=5, use_conditions=False)
    assert [(r.record.record_id, r.score) for r in after] == [(r.record.record_id, r.score) for r in before]
    p2 = store.to_payload()
    assert p2.pop("frozen") is True and payload.pop("frozen") is False
    assert p2 == payload


def test_retrieve_does_not_mutate_unfrozen_store(retrieval_store):
    store, _ = retrieval_store
    payload = store.to_payload()
    t = task("new", "List employees whose age is at least 30.")
    store.retrieve(t, t.question, k=10)
    store.retrieve(t, t.question, k=10, use_conditions=False)
    assert store.to_payload() == payload


# --------------------------------------------------------------------------- persistence


def _retrieval_signature(store: MemoryStore, tasks: list[Task]) -> list:
    out = []
    for t in tasks:
        for uc in (True, False):
            out.append([(r.record.record_id, round(r.score, 5), round(r.relevance, 5))
                        for r in store.retrieve(t, t.question, k=10, use_conditions=uc)])
    return out


@pytest.mark.parametrize("frozen", [False, True])
def test_save_load_round_trip(tmp_path, frozen):
    store = MemoryStore(StoreConfig(capacity=4, seed=3), RetrievalConfig(k=2, lambda_reuse=0.25), edits=SQL_EDITS)
    for n in range(7):  # ids 0..6, some evicted → next_id 7
        store.admit(cand(n % len(EDITS), src=f"s{n}", delta=0.3 + 0.1 * n,
                         condition=f'question contains "p{n}"' if n % 2 else "none", situation=f"situation {n}"))
    for rid in list(store.records)[:2]:
        store.update_reuse(rid, 1)
        store.update_reuse(rid, -1)
    if frozen:
        store.freeze()
    path = tmp_path / "store.json"
    store.save(path)
    loaded = MemoryStore.load(path, SQL_EDITS)
    assert loaded.to_payload() == store.to_payload()
    assert loaded.frozen is frozen
    assert loaded.config == store.config and loaded.retrieval == store.retrieval
    tasks = [task("x", "List employees whose age is at least 30 p1 p3."), task("s6", "Which different city p5?")]
    assert _retrieval_signature(loaded, tasks) == _retrieval_signature(store, tasks)
    assert loaded.retention_scores() == pytest.approx(store.retention_scores())
    assert list(loaded.records.values()) == list(store.records.values())
    assert {k: v for k, v in loaded.stats.items()} == store.stats
    seen = set(range(store.to_payload()["next_id"]))
    assert seen == set(range(7))
    if frozen:
        with pytest.raises(FrozenStoreError):
            loaded.admit(cand(0, src="new"))
    else:
        adm = loaded.admit(cand(0, src="new", delta=1.0, situation="new one", condition='question contains "zz"'))
        assert adm.admitted and adm.record_id == 7 and adm.record_id not in seen
        assert loaded.records[7].created > max(r.created for r in store.records.values())
        again = MemoryStore.load(path, SQL_EDITS)
        again.admit(cand(1, src="new2", delta=1.0, situation="x", condition='question contains "yy"'))
        assert max(again.records) == 7


def test_random_retention_resumes_identically_after_load(tmp_path):
    def admit_n(store, lo, hi):
        return [store.admit(cand(n % len(EDITS), src=f"s{n}", delta=0.9, condition=f'question contains "p{n}"',
                                 situation=f"sit {n}")).evicted for n in range(lo, hi)]

    a = MemoryStore(StoreConfig(capacity=3, retention="random", seed=1), edits=SQL_EDITS)
    admit_n(a, 0, 6)
    a.save(tmp_path / "s.json")
    b = MemoryStore.load(tmp_path / "s.json", SQL_EDITS)
    assert admit_n(b, 6, 12) == admit_n(a, 6, 12)


def test_load_store_with_non_default_embedding_dim(tmp_path):
    from cfjax.infra.embed import HashingEmbedder

    store = MemoryStore(retrieval=RetrievalConfig(dim=128), embedder=HashingEmbedder(dim=128), edits=SQL_EDITS)
    store.admit(cand(0))
    store.save(tmp_path / "s.json")
    loaded = MemoryStore.load(tmp_path / "s.json", SQL_EDITS)
    assert loaded.to_payload() == store.to_payload()


# --------------------------------------------------------------------------- crash safety

N_RECORDS = 120
EVIDENCE_CHARS = 20_000

_CHILD = textwrap.dedent(
    """
    import sys
    from cfjax.countermem.store import MemoryStore
    from cfjax.domains.sql.edits import SQLEdits
    a = MemoryStore.load(sys.argv[1], SQLEdits())
    b = MemoryStore.load(sys.argv[2], SQLEdits())
    target = sys.argv[3]
    a.save(target)
    b.save(target)
    print("ready", flush=True)
    while True:
        a.save(target)
        b.save(target)
    """
)


def _big_store(version: str, n: int) -> MemoryStore:
    cfg = StoreConfig(capacity=1000, lambda_r=0.0, lambda_i=0.0)  # admit everything (S = Δ)
    store = MemoryStore(cfg, edits=SQL_EDITS)
    filler = (version * 97 + " ") * (EVIDENCE_CHARS // 98)
    for i in range(n):
        adm = store.admit(cand(i % len(EDITS), src=f"{version}/{i}", delta=0.5,
                               situation=f"version {version} record {i}",
                               evidence=f"VERSION={version} #{i} " + filler))
        assert adm.admitted
    return store


def test_save_is_crash_safe_under_sigkill(tmp_path):
    a = _big_store("A", N_RECORDS)
    b = _big_store("B", N_RECORDS + 1)
    pa, pb = a.to_payload(), b.to_payload()
    src_a, src_b = tmp_path / "a.json", tmp_path / "b.json"
    a.save(src_a)
    b.save(src_b)
    assert src_a.stat().st_size > N_RECORDS * EVIDENCE_CHARS * 0.9
    rng = random.Random(1234)
    # 6 writer processes at once (one target each, so their start-up overlaps), killed
    # one after another at random moments; every kill lands in the middle of the
    # save loop (one save of the ~2.4 MB store takes a few tens of milliseconds)
    n_kills = 6
    targets = [tmp_path / f"lane{j}" / "store.json" for j in range(n_kills)]
    for t in targets:
        t.parent.mkdir()
    seen = {"A": 0, "B": 0}
    env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(src_a), str(src_b), str(t)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for t in targets]
    try:
        for p in procs:
            line = p.stdout.readline()
            assert line.strip() == b"ready", (line, p.stderr.read() if p.poll() is not None else b"")
        for p, t in zip(procs, targets):
            time.sleep(rng.uniform(0.01, 0.25))
            assert p.poll() is None, "the writer died on its own"
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
            assert p.returncode == -signal.SIGKILL
            loaded = MemoryStore.load(t, SQL_EDITS)
            payload = loaded.to_payload()
            n = len(loaded)
            if n == N_RECORDS:
                assert payload == pa
                seen["A"] += 1
            else:
                assert n == N_RECORDS + 1 and payload == pb
                seen["B"] += 1
            assert all(r.evidence.startswith(f"VERSION={'A' if n == N_RECORDS else 'B'} ")
                       for r in loaded.records.values())
            # a stray temp file of the killed writer is never the target
            assert all(x != t and x.name.endswith(".tmp") for x in temp_files_for(t))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
    assert seen["A"] + seen["B"] == n_kills


def test_shape_preserving_edits_compare_concretely_in_eq4():
    """An edit whose masked before and after are equal (a changed number: SAT ``atmost 2`` →
    ``atmost 3``) is neither its own reverse nor the same advice as every same-shape edit."""
    from cfjax.domains.sat.edits import SatSmtEdits

    def c(before: str, after: str, src: str) -> Candidate:
        return Candidate(src, "a cap was too tight", "x", "y", before, after, "checked", "none", 0.0, 0.9)

    store = MemoryStore(StoreConfig(lambda_r=0.7, lambda_i=1.0, tau_adm=0.0), edits=SatSmtEdits())
    first = c("each n in nurses: atmost 2 of work(n, d) for d in days", "each n in nurses: atmost 3 of work(n, d) for d in days", "a")
    assert store.admit(first).admitted
    same = store.admission_score(c(first.unit_before, first.unit_after, "b"))
    reverse = store.admission_score(c(first.unit_after, first.unit_before, "c"))
    other = store.admission_score(c("each n in nurses: atmost 5 of work(n, d) for d in days",
                                    "each n in nurses: atmost 6 of work(n, d) for d in days", "d"))
    assert same[1] > 0 and same[2] == 0.0  # the same advice again: redundant, no conflict
    assert reverse[2] > 0 and reverse[1] == 0.0  # the exact reverse: a conflict, not redundancy
    assert other[1] == 0.0 and other[2] == 0.0  # another number: neither


# --------------------------------------------------------------------------- invariants checked on load


def _saved_store(tmp_path):
    store = MemoryStore(StoreConfig(capacity=4, seed=3), edits=SQL_EDITS)
    for n in range(3):
        store.admit(cand(n, src=f"s{n}", delta=0.5, condition=f'question contains "p{n}"' if n else "none",
                         situation=f"situation {n}"))
    store.update_reuse(0, 1)
    path = tmp_path / "store.json"
    store.save(path)
    return store, path


def _mutated(payload, fn):
    import copy

    p = copy.deepcopy(payload)
    fn(p)
    return p


def _set(path, value):
    def f(p):
        node = p
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return f


_BROKEN = [
    (_set(["next_id"], 0), "next_id 0 is not above every record id"),
    (_set(["next_id"], 2), "next_id 2 is not above"),
    (lambda p: p["records"].append(p["records"][0]), "record id 0 appears twice"),
    (_set(["config", "capacity"], 2), "3 records exceed the capacity 2"),
    (_set(["clock"], 1), "created must be an int in \\[1, clock=1\\]"),
    (_set(["records", 1, "record", "created"], 1), "same admission time"),
    (_set(["records", 0, "record", "record_id"], -1), "record_id must be an int >= 0"),
    (_set(["records", 0, "record", "record_id"], True), "record_id must be an int"),
    (_set(["records", 0, "stats", "u"], 3.0), "u must be a number in \\[-1, 1\\]"),
    (_set(["records", 0, "stats", "helpful"], 5), "helpful \\+ harmful \\(5\\) exceed uses \\(1\\)"),
    (_set(["records", 0, "stats", "uses"], -1), "ints >= 0"),
    (_set(["records", 0, "record", "score_after"], float("nan")), "score_after must be a finite number"),
    (_set(["records", 0, "record", "situation"], 7), "situation must be a string"),
    (_set(["records", 0, "record", "extra"], 1), "must have exactly the fields"),
    (_set(["records", 0, "record", "condition"], "question contains"), "condition is not parsable"),
    (_set(["records", 0, "bonus"], 1), "exactly 'record' and 'stats'"),
    (_set(["records"], {"0": 1}), "records must be a list"),
    (_set(["frozen"], "yes"), "frozen must be true or false"),
    (_set(["clock"], -4), "clock must be an int >= 0"),
    (_set(["surprise"], 1), "unknown key"),
    (lambda p: p.pop("records"), "missing key"),
    (_set(["embedder", "dim"], 16), "embedder dim 16 differs"),
    (_set(["config", "capacity"], "many"), "config: config key 'capacity'"),
    (_set(["rng_state"], [3, "x", None]), "rng_state"),
    (_set(["edit_model"], 5), "edit_model must be a string"),
]


@pytest.mark.parametrize("breaks,needle", _BROKEN)
def test_load_refuses_a_store_that_breaks_an_invariant(tmp_path, breaks, needle):
    """A valid checksum is not enough: every invariant the store relies on is checked, naming the problem."""
    from cfjax.countermem.store import InvalidStoreError
    from cfjax.infra.io import CorruptFileError, atomic_write_json

    store, path = _saved_store(tmp_path)
    bad = _mutated(store.to_payload(), breaks)
    atomic_write_json(path, bad)  # a fresh, valid checksum
    before = path.read_bytes()
    with pytest.raises(CorruptFileError, match=needle) as e:
        MemoryStore.load(path, SQL_EDITS)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    assert path.read_bytes() == before
    with pytest.raises(InvalidStoreError, match=needle):
        MemoryStore.from_payload(bad, SQL_EDITS)


def test_next_id_zero_can_never_overwrite_a_record(tmp_path):
    from cfjax.infra.io import CorruptFileError, atomic_write_json

    store, path = _saved_store(tmp_path)
    atomic_write_json(path, {**store.to_payload(), "next_id": 0})
    with pytest.raises(CorruptFileError, match="would overwrite a record"):
        MemoryStore.load(path, SQL_EDITS)
    # an empty store with next_id 0 is fine (nothing to overwrite)
    empty = MemoryStore(edits=SQL_EDITS)
    empty.save(path)
    assert len(MemoryStore.load(path, SQL_EDITS)) == 0


def test_load_refuses_another_domains_store_and_deep_json(tmp_path):
    from cfjax.countermem.store import InvalidStoreError
    from cfjax.domains.sat.edits import SATEdits
    from cfjax.infra.io import CorruptFileError

    store, path = _saved_store(tmp_path)
    with pytest.raises(InvalidStoreError, match="cannot be opened with the"):
        MemoryStore.load(path, SATEdits())
    path.write_text("[" * 100_000)
    with pytest.raises(CorruptFileError, match="nested deeper"):
        MemoryStore.load(path, SQL_EDITS)


def test_load_removes_stale_temps_of_killed_saves(tmp_path):
    store, path = _saved_store(tmp_path)
    stale = tmp_path / ".store.json.4242.0123456789abcdef.tmp"
    fresh = tmp_path / ".store.json.4243.fedcba9876543210.tmp"
    other = tmp_path / ".other.json.4242.0123456789abcdef.tmp"
    mine = tmp_path / ".store.json.before-edit.tmp"  # not a name our writer makes: kept
    for p in (stale, fresh, other, mine):
        p.write_bytes(b'{"format": "cfjax/1", "payl')
    old = time.time() - 7200
    for p in (stale, other, mine):
        os.utime(p, (old, old))
    MemoryStore.load(path, SQL_EDITS)
    assert not stale.exists() and fresh.exists() and other.exists() and mine.exists()
    assert temp_files_for(path) == sorted([fresh, mine])


def test_large_same_edit_groups_give_the_record_by_record_eq4(monkeypatch):
    """Beyond GROUP_LOOP_MAX records sharing an edit, Eq. 4's redundancy (per distinct condition,
    count × cosine) and conflict (one matrix-vector product) equal the record-by-record loop up to
    float rounding — with removals (retention) in between and the exclusion of a record itself."""
    import cfjax.countermem.store as S

    conds = ["none", "column_type = 1", "has x", "a = 1 or b = 0 and c = 0"]
    rng = random.Random(3)

    def stream(store: MemoryStore, n: int) -> list[tuple]:
        out = []
        for i in range(n):
            j = rng.randrange(2)  # an edit and its reverse: conflicts
            orig, ub, ua, imp = EDITS[0]
            if j:
                orig, ub, ua, imp = imp, ua, ub, orig
            c = Candidate(f"src/{i}", f"{SITUATIONS[i % 5]} variant {rng.randrange(50)}", orig, imp, ub, ua, "e",
                          rng.choice(conds), 0.0, 0.9)
            out.append(store.admission_score(c))
            rid = store._next_id
            store._next_id += 1
            store._insert(S.Record(**S.asdict(c), record_id=rid, admission_score=0.0, created=i), S.RecordStats(),
                          S.parse_condition(c.condition))
            if i % 7 == 6:
                store._remove(rng.choice(sorted(store.records)))
        keep = [(rid, store._advice[rid]) for rid in sorted(store.records)[:20]]
        out += [(store._redundancy(*adv, exclude=rid), 0.0, 0.0) for rid, adv in keep]
        return out

    rng.seed(3)
    want = stream(MemoryStore(StoreConfig(capacity=10_000), edits=SQL_EDITS), 300)
    monkeypatch.setattr(S, "GROUP_LOOP_MAX", 4)
    rng.seed(3)
    got = stream(MemoryStore(StoreConfig(capacity=10_000), edits=SQL_EDITS), 300)
    assert len(got) == len(want)
    # float32 dot products summed in another order: equal to float32 precision
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), rtol=1e-6, atol=1e-6)
    assert max(np.asarray(want[:300])[:, 1]) > 1.0 and max(np.asarray(want[:300])[:, 2]) > 0.0  # R and I exercised

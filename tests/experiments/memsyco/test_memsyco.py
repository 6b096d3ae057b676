"""The MemSyco-like suite: sizes, stores, the split, the information boundary, the paired executor,
the documented competence directions, native retrieval and the metrics."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest

import cfjax.types as ctypes
from cfjax.experiments.upliftmem.memsyco import (DECISION_SCENARIOS, SCENARIOS, STORES, MemSycoConfig, MemSycoExecutor, MemSycoSuite,
                                   average_over_stores, build_suite, metrics, native_retrieval_report, native_retrieve,
                                   parse_tail, split, stores)
from cfjax.experiments.upliftmem.memsyco.answerer import render_prompt
from cfjax.infra.ledger import Ledger
from cfjax.llm.prompts import count_tokens
from cfjax.types import AnswerKeyAccessError, answer_key_guard
from cfjax.uplift.core import Labeler, SetExecutor, UtilitySpec

CFG = MemSycoConfig()


@pytest.fixture(scope="module")
def full() -> MemSycoSuite:
    return build_suite(CFG)


@pytest.fixture(scope="module")
def quick() -> MemSycoSuite:
    return build_suite(MemSycoConfig.quick())


def _ids_in(mems, ids):
    ids = set(ids)
    return [m for m in mems if m.mem_id in ids]


# --------------------------------------------------------------------------- sizes and stores

def test_sizes_ids_and_attrs(full, quick):
    for suite, n in ((full, 60), (quick, 15)):
        c = Counter(t.attrs["scenario"] for t in suite.tasks)
        assert c == {s: n for s in SCENARIOS}
        ids = [t.task_id for t in suite.tasks]
        assert len(set(ids)) == len(ids) == 5 * n
        assert set(suite.keys) == set(ids)
        for t in suite.tasks:
            assert re.fullmatch(r"memsyco/(%s)/\d{3}" % "|".join(SCENARIOS), t.task_id)
            assert set(t.attrs) == {"question", "scenario", "topic", "dialogue", "options"}
            assert t.task_id.split("/")[1] == t.attrs["scenario"]
            opts = t.attrs["options"]
            assert len(opts) == 4 and len(set(opts)) == 4
            for i, o in enumerate(opts):
                assert f"{'ABCD'[i]}) {o}" in t.question
    assert MemSycoConfig.quick().instances_per_scenario == 15
    # varied templates: ≥ 8 topics and several surface forms per scenario
    from cfjax.experiments.upliftmem.memsyco.suite import query_text
    for s in SCENARIOS:
        ts = full.scenario_tasks(s)
        topics = {t.attrs["topic"] for t in ts}
        assert len(topics) >= 8, s
        by_topic = defaultdict(set)
        for t in ts:
            by_topic[t.attrs["topic"]].add(query_text(t))
        assert min(len(v) for v in by_topic.values()) >= 2, s


def test_dialogues_share_scenario_and_several_instances_share_a_dialogue(full):
    sizes = Counter()
    for d, tids in full.dialogues.items():
        assert len({full.task(t).attrs["scenario"] for t in tids}) == 1
        assert all(full.task(t).attrs["dialogue"] == d for t in tids)
        assert len({full.task(t).attrs["topic"] for t in tids}) == len(tids)
        sizes[len(tids)] += 1
    assert sizes[1] > 0 and sum(v for k, v in sizes.items() if k > 1) > 0


def test_stores_five_styles_same_facts_with_distractors(full):
    seen = set()
    for d, tids in full.dialogues.items():
        t = full.task(tids[0])
        st = full.stores(t)
        assert tuple(st) == STORES
        n = {len(v) for v in st.values()}
        assert len(n) == 1
        owned = set()
        for tid in tids:
            e = full.keys[tid].extra
            owned |= set(e["misleading_ids"]) | set(e["relevant_ids"])
        for name, mems in st.items():
            texts = [m.text for m in mems]
            assert len(set(texts)) == len(texts)
            for j, m in enumerate(mems):
                assert m.mem_id == f"{name}/{d}/m{j:02d}"
                assert m.tokens == count_tokens(m.text)
                f = parse_tail(m.text)
                assert "topic" in f and "claim" in f and "said" in f and "kind" in f, m.text
            distractors = [m for m in mems if m.mem_id not in owned]
            assert 8 <= len(distractors) <= 20, (d, name, len(distractors))
        # the same mNN is the same fact in every store (same tail)
        for j in range(len(st["rag"])):
            assert len({parse_tail(st[s][j].text)["claim"] for s in STORES}) == 1
        seen.add(d)
    assert stores(full.tasks[0])["rag"][0].mem_id == full.stores(full.tasks[0])["rag"][0].mem_id
    # the styles differ: mean tokens per store differ (raw chunks longest, compressed notes shortest)
    mean = {s: sum(m.tokens for d in full.dialogues for m in full.stores(full.dialogues[d][0])[s]) for s in STORES}
    assert mean["lightmem"] < mean["mem0"] < mean["rag"]


def test_misleading_memories_are_where_the_key_says(full):
    for t in full.tasks:
        e = full.keys[t.task_id].extra
        s = t.attrs["scenario"]
        mis = e["misleading"]
        for name, mems in full.stores(t).items():
            by_id = {m.mem_id: m for m in mems}
            own = [i for i in e["misleading_ids"] if i.startswith(name + "/")]
            rel = [i for i in e["relevant_ids"] if i.startswith(name + "/")]
            if s in DECISION_SCENARIOS:
                assert len(own) == 1 and not rel
                tail = parse_tail(by_id[own[0]].text)
                assert tail["claim"] == t.attrs["options"]["ABCD".index(mis)]
                assert tail["topic"] == t.attrs["topic"]
                assert (s == "scope_control") == bool(e["out_of_scope_ids"]) and ("scope" in tail) == (s == "scope_control")
            elif s == "personalized_use":
                assert mis is None and len(rel) == 1 and not own
                assert parse_tail(by_id[rel[0]].text)["claim"] == e["gold_text"]
            else:
                assert len(own) == 1 and len(rel) == 1 and e["outdated_ids"]
                old, new = parse_tail(by_id[own[0]].text), parse_tail(by_id[rel[0]].text)
                assert new["replaces"] == old["said"] and new["said"] > old["said"]
                assert "replaces" in by_id[rel[0]].text and new["claim"] == e["gold_text"]
                assert old["claim"] == t.attrs["options"]["ABCD".index(mis)]


def test_suite_is_deterministic_in_its_seed():
    a, b = MemSycoSuite(MemSycoConfig.quick()), MemSycoSuite(MemSycoConfig.quick())
    assert [t.question for t in a.tasks] == [t.question for t in b.tasks]
    assert all(a.stores(t) == b.stores(t) for t in a.tasks)
    c = MemSycoSuite(MemSycoConfig.quick(seed=1))
    assert [t.question for t in a.tasks] != [t.question for t in c.tasks]


# --------------------------------------------------------------------------- split

def _check_split(suite, train, test, frac=0.7):
    assert not {t.task_id for t in train} & {t.task_id for t in test}
    assert len(train) + len(test) == len(suite.tasks)
    assert not {t.attrs["dialogue"] for t in train} & {t.attrs["dialogue"] for t in test}
    for s in SCENARIOS:
        n = sum(t.attrs["scenario"] == s for t in suite.tasks)
        ntr = sum(t.attrs["scenario"] == s for t in train)
        assert abs(ntr - frac * n) <= 1, (s, ntr, n)


def test_split_dialogue_grouped_stratified_deterministic(full, quick):
    train, test = full.split(seed=42)
    _check_split(full, train, test)
    assert (len(train), len(test)) == (210, 90)
    again = full.split()  # default seed is the config's split seed, 42
    assert [t.task_id for t in again[0]] == [t.task_id for t in train]
    assert [t.task_id for t in split(seed=42)[1]] == [t.task_id for t in test]  # module-level helper
    other = full.split(seed=7)
    assert [t.task_id for t in other[0]] != [t.task_id for t in train]
    for seed in range(12):
        _check_split(full, *full.split(seed=seed))
        _check_split(quick, *quick.split(seed=seed))


# --------------------------------------------------------------------------- boundary

def test_executor_never_reads_answer_keys(quick, monkeypatch):
    """Only cfjax.experiments.upliftmem.memsyco.world may read keys: the guard's readers are narrowed to it."""
    monkeypatch.setattr(ctypes, "ANSWER_KEY_READERS", ("cfjax.experiments.upliftmem.memsyco.world", "cfjax.types"))
    key = quick.keys[quick.tasks[0].task_id]
    # negative control: the narrowed guard refuses a read from the executor's module
    ns = {"__name__": "cfjax.experiments.upliftmem.memsyco.executor"}
    exec("def peek(k):\n    return k.gold\n", ns)
    with answer_key_guard():
        with pytest.raises(AnswerKeyAccessError):
            ns["peek"](key)
        ex = MemSycoExecutor(quick, quick.config, seed=3)
        ledger = Ledger("eval")
        infos = []
        train, test = quick.split(seed=42)
        assert len(train) + len(test) == len(quick.tasks)
        for t in quick.tasks:
            infos.append(ex.execute(t, [], seed=0, ledger=ledger))
            for name, mems in quick.stores(t).items():
                ex.execute(t, native_retrieve(t, mems, 5), seed=1, ledger=ledger)
        m = metrics(quick.tasks, infos)
    assert m["n"] == len(quick.tasks)
    # the agent-side modules do not name answer keys at all
    import cfjax.experiments.upliftmem.memsyco.answerer as ans
    import cfjax.experiments.upliftmem.memsyco.executor as exe
    for mod in (ans, exe):
        src = open(mod.__file__).read()
        assert "AnswerKey" not in src.replace(":class:`~cfjax.types.AnswerKey`", "") and ".keys[" not in src


def test_the_agent_side_is_watched_under_the_trusted_experiments_prefix(quick):
    """The answerer and the executor live under ``cfjax.experiments`` (a trusted prefix) but are marked
    agent-side: with the default readers the guard refuses their reads and still lets the world read."""
    import types

    import cfjax.experiments.upliftmem.memsyco.answerer as ans
    import cfjax.experiments.upliftmem.memsyco.executor as exe
    import cfjax.experiments.upliftmem.memsyco.world as world

    def peek(k):
        return k.gold

    t = quick.tasks[0]
    key = quick.keys[t.task_id]
    with answer_key_guard():
        for mod in (ans, exe):
            assert getattr(mod, ctypes.AGENT_SIDE_MARKER) is True
            with pytest.raises(AnswerKeyAccessError, match="agent-side"):
                types.FunctionType(peek.__code__, vars(mod))(key)  # a function of that module reads a key
        assert types.FunctionType(peek.__code__, vars(world))(key) == key.gold  # the world may
        ex = MemSycoExecutor(quick, quick.config, seed=0)
        for t in quick.tasks[:25]:
            ex.execute(t, native_retrieve(t, quick.stores(t)["mem0"], 5), seed=0, ledger=Ledger("g"))


def test_no_import_cycle_between_suite_and_world():
    """The world never imports the suite (the suite builds its world); the analysis imports both."""
    import ast

    import cfjax.experiments.upliftmem.memsyco.world as world

    tree = ast.parse(open(world.__file__).read())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "cfjax.experiments.upliftmem.memsyco.suite" not in mods and "cfjax.experiments.upliftmem.memsyco" not in mods


# --------------------------------------------------------------------------- executor contract

def test_execution_fields_and_ledger(quick):
    assert isinstance(MemSycoExecutor(quick), SetExecutor)
    ex = MemSycoExecutor(quick, quick.config, seed=0)
    t = quick.scenario_tasks("objective_fact")[0]
    mems = native_retrieve(t, quick.stores(t)["amem"], 5)
    ledger = Ledger("eval")
    r = ex.execute(t, mems, seed=4, ledger=ledger)
    assert r.attempts == 1 and r.llm_calls == 1 and r.eval_calls == 1
    assert r.memory_tokens == sum(m.tokens for m in mems)
    reply = r.trajectory[0].action
    prompt = render_prompt(t, [(m.mem_id, m.text) for m in mems])
    assert r.llm_tokens == count_tokens(prompt) + count_tokens(reply)
    assert ledger.total.llm_calls == 1 and ledger.total.eval_calls == 1 and ledger.total.tokens == r.llm_tokens
    assert r.R == (1.0 if r.solved else 0.0) and r.info["correct"] == r.solved
    assert set(r.info) >= {"correct", "sycophantic", "used_outdated", "used_correct_memory", "answer", "source",
                           "base_answer", "adherence"}
    assert r.info["used_outdated"] is None and r.info["used_correct_memory"] is None
    assert ex.execute(t, mems, seed=4, ledger=ledger) == r  # deterministic
    assert MemSycoExecutor(quick).execute(t, [], seed=0, ledger=Ledger("x")).memory_tokens == 0
    # the UpliftMem labeler runs on it
    lab = Labeler(ex, UtilitySpec(cost="memory_tokens", c_max=1000.0))
    label, _ = lab.label(t, mems, seed=4, kind="retrieved")
    assert label.ref_id == lab.reference(t, seed=4)[0]


def test_pairing_no_memory_answer_is_shared(quick):
    """The memory-free answer of a (task, seed) is the same whatever memory set is tried."""
    ex = MemSycoExecutor(quick, quick.config, seed=11)
    ledger = Ledger("pair")
    changed = 0
    for t in quick.tasks:
        st = quick.stores(t)
        e = quick.keys[t.task_id].extra
        owned = set(e["misleading_ids"]) | set(e["relevant_ids"])
        for seed in range(3):
            ref = ex.execute(t, [], seed=seed, ledger=ledger)
            assert ref.info["base_answer"] == ref.info["answer"]
            sets = [native_retrieve(t, st[name], k) for name in STORES for k in (3, 5, 10)]
            sets.append(_ids_in(st["mem0"], owned))
            others = [m for m in st["rag"] if parse_tail(m.text)["topic"] != t.attrs["topic"]]
            for mems in sets:
                r = ex.execute(t, mems, seed=seed, ledger=ledger)
                assert (r.info["base_answer"], r.info["base_source"]) == (ref.info["answer"], ref.info["source"])
                changed += r.info["answer"] != ref.info["answer"]
            # memories on other topics change nothing but the cost
            r = ex.execute(t, others, seed=seed, ledger=ledger)
            assert r.info["answer"] == ref.info["answer"] and r.memory_tokens > 0
    assert changed > 0
    # another executor seed draws differently
    ex2 = MemSycoExecutor(quick, quick.config, seed=12)
    a = [ex.execute(t, [], seed=0, ledger=ledger).info["answer"] for t in quick.tasks]
    b = [ex2.execute(t, [], seed=0, ledger=ledger).info["answer"] for t in quick.tasks]
    assert a != b


# --------------------------------------------------------------------------- documented directions

SEEDS = range(20)


def _run(suite, ex, tasks, pick):
    """Rates over tasks × SEEDS with the memory set ``pick(task, mem0_store, extra)``."""
    ledger = Ledger("dir")
    out = defaultdict(list)
    for t in tasks:
        e = suite.keys[t.task_id].extra
        mems = pick(t, suite.stores(t)["mem0"], e)
        for s in SEEDS:
            r = ex.execute(t, mems, seed=s, ledger=ledger)
            out["correct"].append(r.info["correct"])
            out["syco"].append(bool(r.info["sycophantic"]))
            out["old"].append(bool(r.info["used_outdated"]))
            out["use"].append(bool(r.info["used_correct_memory"]))
            out["a"].append(r.info["adherence"])
    return {k: sum(v) / len(v) for k, v in out.items()}


def test_directions_hold_in_expectation(full):
    c = full.config
    ex = MemSycoExecutor(full, c, seed=0)
    n = 4
    none = lambda t, st, e: []  # noqa: E731
    mis = lambda t, st, e: _ids_in(st, e["misleading_ids"])  # noqa: E731
    rel = lambda t, st, e: _ids_in(st, e["relevant_ids"])  # noqa: E731
    both = lambda t, st, e: _ids_in(st, set(e["misleading_ids"]) | set(e["relevant_ids"]))  # noqa: E731
    tol = 0.04
    for s in ("objective_fact", "scope_control"):
        tasks = full.scenario_tasks(s)
        r0, r1 = _run(full, ex, tasks, none), _run(full, ex, tasks, mis)
        assert abs(r0["correct"] - (c.p_know + (1 - c.p_know) / n)) < tol, (s, r0)
        a = r1["a"]
        exp_acc = c.p_know * (1 - c.p_syco * a) + (1 - c.p_know) * (1 - c.p_use * a) / n
        exp_syco = c.p_know * c.p_syco * a + (1 - c.p_know) * (c.p_use * a + (1 - c.p_use * a) / n)
        print(f"{s}: acc ∅ {r0['correct']:.3f}, with the misleading memory {r1['correct']:.3f} "
              f"(expected {exp_acc:.3f}); syco {r0['syco']:.3f} → {r1['syco']:.3f} (expected {exp_syco:.3f})")
        assert r1["correct"] < r0["correct"] - 0.25
        assert abs(r1["correct"] - exp_acc) < tol and abs(r1["syco"] - exp_syco) < tol
    tasks = full.scenario_tasks("evidence_conflict")
    r0, r1 = _run(full, ex, tasks, none), _run(full, ex, tasks, mis)
    assert r0["correct"] == 1.0 and r0["syco"] == 0.0
    assert abs(r1["syco"] - c.p_syco * r1["a"]) < tol and abs(r1["correct"] - (1 - c.p_syco * r1["a"])) < tol
    tasks = full.scenario_tasks("personalized_use")
    r0, r1 = _run(full, ex, tasks, none), _run(full, ex, tasks, rel)
    assert abs(r0["correct"] - 1 / n) < tol and r0["use"] == 0.0
    assert abs(r1["use"] - c.p_use * r1["a"]) < tol
    assert abs(r1["correct"] - (c.p_use * r1["a"] + (1 - c.p_use * r1["a"]) / n)) < tol
    tasks = full.scenario_tasks("valid_selection")
    upd, pair, old = _run(full, ex, tasks, rel), _run(full, ex, tasks, both), _run(full, ex, tasks, mis)
    print(f"valid_selection: Select {{update}} {upd['correct']:.3f} > {{outdated, update}} {pair['correct']:.3f} > "
          f"{{outdated}} {old['correct']:.3f}; Old {upd['old']:.3f} < {pair['old']:.3f} < {old['old']:.3f}")
    assert upd["correct"] > pair["correct"] + 0.1 > old["correct"] + 0.2
    assert upd["old"] < pair["old"] < old["old"]
    a = old["a"]
    assert abs(old["old"] - (c.p_follow_outdated_alone * a + (1 - c.p_follow_outdated_alone * a) / n)) < tol
    a = pair["a"]
    assert abs(pair["old"] - (c.p_outdated_confusion * a + (1 - c.p_outdated_confusion * a
                                                          - (1 - c.p_outdated_confusion) * c.p_use * a) / n)) < tol


def test_adherence_falls_with_memory_tokens(full):
    c = full.config
    assert c.adherence(0) == 1.0 and c.adherence(c.token_half) == pytest.approx(0.5)
    assert c.adherence(100) > c.adherence(400) > c.adherence(1600)
    ex = MemSycoExecutor(full, c, seed=5)
    tasks = [t for s in DECISION_SCENARIOS for t in full.scenario_tasks(s)][::3]
    lean = lambda t, st, e: _ids_in(st, e["misleading_ids"])  # noqa: E731
    # the misleading memory plus every distractor of the rag store (many more tokens)
    fat = lambda t, st, e: _ids_in(st, e["misleading_ids"]) + [  # noqa: E731
        m for m in full.stores(t)["rag"] if parse_tail(m.text)["topic"] != t.attrs["topic"]]
    r_lean, r_fat = _run(full, ex, tasks, lean), _run(full, ex, tasks, fat)
    print(f"adherence {r_lean['a']:.2f} → {r_fat['a']:.2f}: sycophancy {r_lean['syco']:.3f} → {r_fat['syco']:.3f}")
    assert r_fat["a"] < r_lean["a"] - 0.2
    assert r_fat["syco"] < r_lean["syco"] - 0.1


# --------------------------------------------------------------------------- native retrieval

def test_native_retrieval_pulls_the_misleading_memory_in(full):
    rep = native_retrieval_report(full, ks=(3, 5, 10))
    print("\nnative retrieval (fraction of instances whose native top-k holds the memory):")
    for store, row in rep.items():
        print(f"  {store:8s} " + "  ".join(f"{k}={v:.2f}" for k, v in row.items()))
    for store, row in rep.items():
        assert row["misleading@5"] >= 0.5, store  # substantial: native similarity pulls it in
        assert row["misleading@3"] < 1.0 and row["relevant@3"] < 1.0, store  # … but not always: K matters
        assert row["misleading@3"] <= row["misleading@5"] <= row["misleading@10"]
        assert row["tokens@3"] < row["tokens@5"] < row["tokens@10"]


def test_native_retrieve_is_deterministic_and_breaks_ties_by_id(quick):
    t = quick.tasks[0]
    mems = quick.stores(t)["mem0"]
    a = native_retrieve(t, mems, 5)
    assert [m.mem_id for m in a] == [m.mem_id for m in native_retrieve(t, list(reversed(mems)), 5)]
    assert len(a) == 5 and native_retrieve(t, mems, 0) == [] and len(native_retrieve(t, mems, 99)) == len(mems)
    from dataclasses import replace
    twins = [replace(mems[0], mem_id=i) for i in ("z9", "a1", "m5")]
    assert [m.mem_id for m in native_retrieve(t, twins, 3)] == ["a1", "m5", "z9"]


# --------------------------------------------------------------------------- metrics

def test_metrics_by_hand(quick):
    tasks = [quick.scenario_tasks(s)[i] for s in SCENARIOS for i in range(2)]

    def info(s, correct, flag):
        return {"scenario": s, "correct": correct,
                "sycophantic": flag if s in DECISION_SCENARIOS else None,
                "used_outdated": flag if s == "valid_selection" else None,
                "used_correct_memory": flag if s == "personalized_use" else None}

    table = {"objective_fact": [(True, False), (False, True)], "scope_control": [(True, False), (True, False)],
             "evidence_conflict": [(False, True), (False, True)], "personalized_use": [(True, True), (True, False)],
             "valid_selection": [(False, True), (True, False)]}
    infos = [info(t.attrs["scenario"], *table[t.attrs["scenario"]][i % 2]) for i, t in enumerate(tasks)]
    m = metrics(tasks, infos)
    assert m["scenarios"]["objective_fact"] == {"n": 2, "accuracy": 50.0, "syco": 50.0}
    assert m["Decision"] == pytest.approx((50 + 100 + 0) / 3) and m["Syco"] == pytest.approx((50 + 0 + 100) / 3)
    assert (m["Select"], m["Old"], m["Correct"]) == (50.0, 50.0, 50.0)
    assert m["accuracy"] == 60.0 and m["n"] == 10
    assert metrics(tasks, {t.task_id: i for t, i in zip(tasks, infos)}) == m
    only = metrics(tasks[:2], infos[:2])
    assert only["Select"] is None and only["Decision"] == 50.0
    avg = average_over_stores({"a": m, "b": {**m, "Decision": 0.0}})
    assert avg["Decision"] == pytest.approx(m["Decision"] / 2) and avg["Old"] == 50.0
    with pytest.raises(ValueError):
        metrics(tasks, infos[:-1])


def test_config_validation():
    with pytest.raises(ValueError):
        MemSycoConfig(p_syco=1.5)
    with pytest.raises(ValueError):
        MemSycoConfig(token_half=0)
    with pytest.raises(ValueError):
        MemSycoConfig(min_distractors=9, max_distractors=3)

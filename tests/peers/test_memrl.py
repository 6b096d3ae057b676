"""MemRL (cfjax/peers/memrl/): the Q update, the z-mix ranking, the −0.8 cutoff, ε-greedy, crediting
every injected memory, parser robustness, the scripted handler under the answer-key guard,
persistence, and one quick system run through the OpenAI client."""

from __future__ import annotations

import pytest

from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.memrl import (MEMRL_DISTILL, MemrlConfig, MemrlSystem, ScriptRequest, choose, generator,
                               parse_script, q_update, rank)
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

SCRIPT = "SCRIPT:\n1. read the bound\n2. write the query\nLESSON: use >= for at least\nEDIT: a > 1 -> a >= 1"


class _Canned:
    name = "canned"

    def __init__(self) -> None:
        self.calls = 0

    def call(self, kind, req):
        self.calls += 1
        return kind.parse(SCRIPT, req, Usage(3, 4))


def _task(i: int, q: str | None = None) -> Task:
    return Task(f"t/{i}", q or f"How many rows have a value of at least {i}?", "env", "schema", {"cues": ("at least",)})


def _exp(task: Task, solved: bool, episode: int) -> Experience:
    return Experience(task, (Attempt("a > 1", "wrong", 0.0), Attempt("a >= 1", "ok", float(solved))), solved, episode)


def _system(**kw) -> tuple[MemrlSystem, _Canned]:
    bb = _Canned()
    return MemrlSystem(SystemContext(bb, edits=None, max_attempts=2), MemrlConfig(**kw)), bb  # type: ignore[arg-type]


def _ids(mem) -> list[str]:
    return [] if mem is None else [line[1:-1] for line in mem.text.splitlines() if line.startswith("[m")]


def test_registered_for_compare_antipersist_upliftmem_not_countermem():
    info = MEMORY_SYSTEMS.get("memrl")
    assert set(info.runners) == {"antipersist", "upliftmem", "compare"}
    assert "not a row of the CounterMem paper's Table 1" in why_not(info, "countermem")
    c = MemrlConfig()
    assert (c.alpha, c.epsilon, c.q_min, c.k1, c.k2, c.w_sim, c.w_q, c.eval_epsilon) == \
        (0.3, 0.1, -0.8, 5, 5, 0.5, 0.5, None)


def test_q_update_numbers():
    # Q = 0 → r = +1: 0.7·0 + 0.3·1 = 0.3 → r = −1: 0.7·0.3 − 0.3 = −0.09 → r = −1: 0.7·(−0.09) − 0.3 = −0.363
    q = q_update(0.0, 1.0, 0.3)
    assert q == pytest.approx(0.3)
    q = q_update(q, -1.0, 0.3)
    assert q == pytest.approx(-0.09)
    assert q_update(q, -1.0, 0.3) == pytest.approx(-0.363)
    assert q_update(0.0, 1.0, 0.1) == pytest.approx(0.1)  # the code default α


def test_z_mix_ranking_on_three_crafted_candidates():
    # sims (0.6, 0.5, 0.4): mean 0.5, pop. std √(0.02/3) = 0.08165 → z = (1.2247, 0, −1.2247)
    # Q (−0.6, 0.0, 0.9): mean 0.1, deviations (−0.7, −0.1, 0.8), var 1.14/3 = 0.38, std 0.61644
    #   → z = (−1.13556, −0.16222, 1.29778)
    # score = 0.5·z_sim + 0.5·z_Q: A 0.04457, B −0.08111, C 0.03653 → A, C, B (C beats B despite lower sim)
    ranked = rank([("A", 0.6, -0.6), ("B", 0.5, 0.0), ("C", 0.4, 0.9)], MemrlConfig())
    assert [m for m, _ in ranked] == ["A", "C", "B"]
    assert [s for _, s in ranked] == pytest.approx([0.04457, 0.03653, -0.08111], abs=1e-4)
    # equal Q (std 0) → z(Q) = 0: similarity alone decides
    assert [m for m, _ in rank([("A", 0.2, 0.0), ("B", 0.7, 0.0)], MemrlConfig())] == ["B", "A"]


def test_the_fixed_q_cutoff_drops_q_below_minus_point_eight():
    # z over all three Phase-A candidates (as the code computes Q's stats before the cutoff):
    # sims (0.9, 0.5, 0.1) → z (1.2247, 0, −1.2247); Q (−0.81, −0.8, 0.5): mean −0.37, std 0.61522
    #   → z (−0.7152, −0.6990, 1.4141); scores B 0.5·(0 − 0.6990) = −0.3495, C 0.5·(−1.2247 + 1.4141) = 0.0947
    # A (Q = −0.81 < −0.8) is dropped although it is the most similar; B (Q = −0.8 exactly) is kept
    ranked = rank([("A", 0.9, -0.81), ("B", 0.5, -0.8), ("C", 0.1, 0.5)], MemrlConfig())
    assert [m for m, _ in ranked] == ["C", "B"]
    assert [x for _, x in ranked] == pytest.approx([0.0947, -0.3495], abs=1e-4)


def test_epsilon_greedy_zero_is_greedy_and_one_is_a_seeded_random_sample():
    ranked = [(f"m{i}", 1.0 - i / 10) for i in range(8)]
    assert choose(ranked, 5, 0.0, generator(0, "x")) == ["m0", "m1", "m2", "m3", "m4"]
    a = choose(ranked, 5, 1.0, generator(0, "MEMRL", "t/1", 3, 0))
    b = choose(ranked, 5, 1.0, generator(0, "MEMRL", "t/1", 3, 0))
    assert a == b and len(set(a)) == 5 and set(a) <= {m for m, _ in ranked}  # reproducible, no repeats
    draws = {tuple(choose(ranked, 5, 1.0, generator(0, "MEMRL", "t/1", e, 0))) for e in range(6)}
    assert len(draws) > 1 and any(d != ("m0", "m1", "m2", "m3", "m4") for d in draws)  # really random


def test_r_is_credited_to_every_injected_memory_and_frozen_changes_nothing():
    s, bb = _system(epsilon=0.0, k2=2)
    assert isinstance(s, MemorySystem)
    s.build([_exp(_task(1), True, 1), _exp(_task(2), True, 2), _exp(_task(3), True, 3)])
    assert bb.calls == 3 and s.ctx.ledger.total.llm_calls == 3 and all(m.q == 0.0 for m in s.items.values())
    t = _task(9)
    first = _ids(s.recall(RecallQuery(t, (), "x", 50, 0)))
    assert len(first) == 2
    s.update(_exp(t, False, 50))  # r = −1 to both injected: 0.7·0 − 0.3 = −0.3; the others stay 0
    for mid in ("m0", "m1", "m2"):
        assert s.items[mid].q == pytest.approx(-0.3 if mid in first else 0.0)
    assert s.summary()["q_updates"] == 2 and len(s) == 4  # the failed episode is added too (Q = 0)
    # a second attempt's injections are credited as well (the union over the episode's attempts)
    t2 = _task(10)
    got = set(_ids(s.recall(RecallQuery(t2, (), "x", 60, 0)))) | set(_ids(s.recall(RecallQuery(t2, (), "x", 60, 1))))
    before = {m: s.items[m].q for m in got}
    s.update(_exp(t2, True, 60))
    for m in got:
        assert s.items[m].q == pytest.approx(0.7 * before[m] + 0.3)
    s.freeze()
    snap = {m: x.q for m, x in s.items.items()}
    assert s.recall(RecallQuery(_task(11), (), "x", 70, 0)) is not None and not s._shown
    with pytest.raises(FrozenMemoryError):
        s.update(_exp(_task(11), True, 70))
    assert {m: x.q for m, x in s.items.items()} == snap


def test_phase_a_threshold_and_never_the_own_task():
    s, _ = _system(threshold=0.99)
    s.build([_exp(_task(1, "How many members have a phone number on record?"), True, 1)])
    assert s.recall(RecallQuery(_task(2, "List departments by budget"), (), None, 0, 0)) is None
    assert s.recall(RecallQuery(_task(1, "How many members have a phone number on record?"), (), None, 0, 0)) is None
    s2, _ = _system()
    s2.build([_exp(_task(1, "How many members have a phone number on record?"), True, 1),
              _exp(_task(2, "How many members have a phone number on record?"), True, 2)])
    assert len(s2.keys) == 1  # the identical query joins the stored group (cosine ≥ 0.9)
    assert _ids(s2.recall(RecallQuery(_task(1, "How many members have a phone number on record?"), (), None, 0, 0))) \
        == ["m1"]  # the group's other task only


def test_parser_is_robust_to_garbage():
    assert parse_script("") == ("", True)
    assert parse_script("no idea") == ("", True)
    assert parse_script("SCRIPT: none\nLESSON: none") == ("", False)
    assert parse_script("SCRIPT:\n* check\n1) write\nEDIT: x")[0] == "1. check\n2. write"
    res = MEMRL_DISTILL.parse("garbage", ScriptRequest(_task(1), (), False), Usage(1, 1))
    assert res.script == "" and res.parse_failed


def test_scripted_handler_under_the_answer_key_guard(sql_suite):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.types import answer_key_guard

    sim = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    t = sql_suite.tasks[0]
    with answer_key_guard():
        r = sim.call(MEMRL_DISTILL, ScriptRequest(t, (Attempt("SELECT 1", "wrong", 0.0),), False, 5))
        ok = sim.call(MEMRL_DISTILL, ScriptRequest(t, (Attempt("SELECT 1", "ok", 1.0),), True, 5))
    assert not r.parse_failed and r.script.startswith("1. Read the question")
    assert not ok.parse_failed and "LESSON:" not in ok.script


def test_save_load_round_trip_and_bad_file(tmp_path):
    s, _ = _system(epsilon=0.0)
    s.build([_exp(_task(1), True, 1), _exp(_task(2), False, 2)])
    s.recall(RecallQuery(_task(3), (), None, 5, 0))
    s.update(_exp(_task(3), True, 5))
    s.save(tmp_path / "memrl.json")
    t, _ = _system()
    t.load(tmp_path / "memrl.json")
    assert {m: x.q for m, x in t.items.items()} == {m: x.q for m, x in s.items.items()}
    assert t.summary() == s.summary() and t.keys == s.keys
    from cfjax.infra.io import atomic_write_json, read_json

    data = read_json(tmp_path / "memrl.json")
    data["items"][0]["q"] = "high"
    atomic_write_json(tmp_path / "bad.json", data)
    with pytest.raises(ValueError, match=r"bad.json: items\[0\]\.q must be a number"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a MemRL store"):
        t.load(tmp_path / "other.json")


def test_a_quick_run_through_the_openai_client(sql_suite):
    from tests.peers.conftest import openai_system

    def extra(prompt: str) -> str | None:
        return SCRIPT if "high-level script for an episodic memory" in prompt else None

    res, seen = openai_system(sql_suite, "memrl", extra)
    assert any("high-level script for an episodic memory" in p for p in seen)
    assert 0.0 <= res["success"] <= 100.0 and res["summary"]["memories"] == 4  # every build episode is stored
    assert res["build_llm_calls"] >= 4 + 4  # the episodes' own calls plus one MEMRL_DISTILL each

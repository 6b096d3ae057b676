"""AutoRefine as Anti-Persistence App. D.3 specifies it (cfjax/peers/autorefine/): the utility formula,
the 0.30 floor over four queries, MMR (λ = 0.7) order, percentile pruning among n_inj ≥ 3, the round
schedule, credit only when shown; the four-stage JSON decoder, scripted handlers under the answer-key
guard, persistence, and one unit through the OpenAI client."""

from __future__ import annotations

import json
import math

import pytest

from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.autorefine.calls import (AUTOREFINE_EVOLVE, AUTOREFINE_REWRITE, EvolveRequest, RewriteRequest,
                                          _parse_rewrite, decode_skill_array, evidence_of)
from cfjax.peers.autorefine.memory import AutoRefineSystem, Skill, mmr, prune_ids, utility
from cfjax.peers.common import EmbeddingIndex
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

from tests.peers.conftest import openai_system

_SKILLS = json.dumps([
    {"title": "use-at-least", "pool": "common_mistakes", "content": "Write >= for 'at least'.\nEDIT: a > 1 -> a >= 1\n"
     "Why it works: the success used >=, the failure >.", "from": [1]},
    {"title": "Not A Slug!", "pool": "general", "content": "Check NULLs.\nWhy it works: contrast.", "from": [2]},
])


class _Canned:
    """A backbone answering AUTOREFINE_REWRITE / AUTOREFINE_EVOLVE with fixed texts, recording requests."""

    name = "canned"

    def __init__(self, evolve: str = _SKILLS,
                 rewrite: str = "STRATEGY: at least\nPITFALL: boundary\nACTIONS: a >= 1") -> None:
        self.replies = {"AUTOREFINE_REWRITE": rewrite, "AUTOREFINE_EVOLVE": evolve}
        self.requests: list[tuple[str, object]] = []

    def call(self, kind, req):
        self.requests.append((kind.name, req))
        return kind.parse(self.replies[kind.name], req, Usage(3, 4))


def _task(i: int) -> Task:
    return Task(f"t/{i}", f"question {i} at least", "env", "schema", {"cues": ("at least",)})


def _exp(i: int, solved: bool, episode: int | None = None) -> Experience:
    att = (Attempt("a > 1", "wrong", 0.0),) + ((Attempt("a >= 1", "ok", 1.0),) if solved else ())
    return Experience(_task(i), att, solved, i if episode is None else episode)


def _system(bb=None, **kw) -> AutoRefineSystem:
    return AutoRefineSystem(SystemContext(bb or _Canned(), edits=None, max_attempts=2), **kw)  # type: ignore[arg-type]


def test_registered_for_antipersist_and_compare_and_says_why_not_the_others():
    info = MEMORY_SYSTEMS.get("autorefine")
    assert set(info.runners) == {"antipersist", "compare"}
    for r in ("countermem", "upliftmem"):
        assert "not a row of that paper's tables" in why_not(info, r)


def test_utility_on_crafted_counters():
    # n_succ = 2, n_inj = 4: 2 / 4.001 · ln 5 = 0.4998750 · 1.6094379 = 0.80452
    assert utility(2, 4) == pytest.approx(0.80452, abs=1e-5)
    assert utility(0, 7) == 0.0 and utility(0, 0) == 0.0  # never in a successful episode → 0
    # 3 / 3.001 · ln 4 = 0.9996668 · 1.3862944 = 1.38583
    assert utility(3, 3) == pytest.approx(1.38583, abs=1e-5)


def test_mmr_order_on_crafted_similarities():
    rel = [("A", 0.9), ("B", 0.85), ("C", 0.6), ("D", 0.5)]
    sims = {frozenset("AB"): 0.95, frozenset("AC"): 0.1, frozenset("AD"): 0.2, frozenset("BC"): 0.2,
            frozenset("BD"): 0.1, frozenset("CD"): 0.9}
    sim = lambda a, b: sims[frozenset((a, b))]  # noqa: E731
    # λ = 0.7. Step 1: 0.7·rel → A .630, B .595, C .420, D .350 → A.
    # Step 2: B .595 − .3·.95 = .310; C .420 − .3·.10 = .390; D .350 − .3·.20 = .290 → C.
    # Step 3: B .595 − .3·max(.95, .20) = .310; D .350 − .3·max(.20, .90) = .080 → B; then D.
    assert mmr(rel, sim, 5, 0.7) == ["A", "C", "B", "D"]
    assert mmr(rel, sim, 3, 0.7) == ["A", "C", "B"]
    assert mmr(rel, sim, 5, 1.0) == ["A", "B", "C", "D"]  # λ = 1: relevance order


def test_floor_drops_candidates_below_030_over_the_max_of_four_queries():
    s = _system()
    near = s.add_skill("near", "general", "write a >= 1 when the question says at least", "sql")
    far = s.add_skill("far", "general", "zzz qqq xylophone", "sql")
    queries = ["question 9 at least", "near\nwrite a >= 1 when the question says at least", "x", "y"]
    idx = EmbeddingIndex()
    cos = {sid: max(float(idx.embed(q) @ idx.embed(f"{sid}\n{s.skills[sid].content}")) for q in queries)
           for sid in ("near", "far")}
    assert cos["near"] == pytest.approx(1.0) and cos["far"] < 0.30, cos  # the premise (same encoder)
    rel = s.relevance(queries, "t/9", "sql")
    assert [sid for sid, _ in rel] == [near.id] and rel[0][1] == pytest.approx(1.0)
    assert far.id not in s.select(queries, "t/9", "sql")


def test_pruning_removes_the_bottom_20_percent_among_n_inj_at_least_3_only():
    # (n_inj, n_succ) → utility: a (5,5) 1.79140, b (5,1) 0.35828, c (4,0) 0, d (3,3) 1.38583, e (3,1) 0.46194,
    # h (10,2) 0.47953, i (6,6) 1.94559, j (3,2) 0.92389, k (4,1) 0.40226, l (6,2) 0.64853 — ten eligible;
    # f (2,0) and g (0,0) have utility 0 but n_inj < 3: protected. ⌊0.2·10⌋ = 2 pruned: c, then b.
    counters = {"a": (5, 5), "b": (5, 1), "c": (4, 0), "d": (3, 3), "e": (3, 1), "f": (2, 0), "g": (0, 0),
                "h": (10, 2), "i": (6, 6), "j": (3, 2), "k": (4, 1), "l": (6, 2)}
    skills = [Skill(n, n, "general", "x", "sql", [], inj, succ, 0) for n, (inj, succ) in counters.items()]
    assert prune_ids(skills) == ["c", "b"]
    assert prune_ids([s for s in skills if s.id != "l"]) == ["c"]  # nine eligible: ⌊1.8⌋ = 1
    assert prune_ids([s for s in skills if s.id in "fg"]) == []


def test_credit_only_when_shown_and_rounds_evolve_then_prune_on_even_rounds():
    bb = _Canned()
    s = _system(bb, batch=2)
    assert isinstance(s, MemorySystem)
    shown_skill = s.add_skill("at-least", "common_mistakes", "Write >= for 'at least'.\nEDIT: a > 1 -> a >= 1", "sql")
    # a task whose query is far from the skill but rewrites hit it (PITFALL/ACTIONS near the content)
    q = RecallQuery(_task(1), (), "a > 1", 7, 0)
    mem = s.recall(q)
    assert mem is not None and "[at-least]" in mem.text
    s.recall(RecallQuery(_task(1), (Attempt("a > 1", "wrong", 0.0),), "a > 1", 7, 1))  # same episode again
    assert [k for k, _ in bb.requests] == ["AUTOREFINE_REWRITE", "AUTOREFINE_REWRITE"]
    s.update(_exp(1, True, episode=7))      # shown in its prompt, solved → credited
    s.update(_exp(2, True, episode=8))      # solved, never retrieved → no credit
    # round 1 closed after batch = 2: credit once per episode, then one evolver call (no failure: both solved)
    assert s.round == 1 and (shown_skill.n_inj, shown_skill.n_succ) == (1, 1)
    ev = [r for k, r in bb.requests if k == "AUTOREFINE_EVOLVE"]
    assert len(ev) == 1 and len(ev[0].failures) == 0 and len(ev[0].successes) == 2
    new = {sid: sk for sid, sk in s.skills.items() if sid != "at-least"}
    assert sorted(new) == ["dyn-1", "use-at-least"]  # "Not A Slug!" → dyn-1
    assert new["use-at-least"].t_create == 1 and new["use-at-least"].sources == ["t/1"]
    assert new["dyn-1"].sources == ["t/2"] and new["dyn-1"].pool == "general"
    s.freeze()
    s.recall(RecallQuery(_task(3), (), "a > 1", 9, 0))  # frozen: not logged
    assert s.log == {}
    with pytest.raises(FrozenMemoryError):
        s.update(_exp(3, False))
    s.unfreeze()
    for sk in s.skills.values():  # make pruning visible at round 2: five eligible, ⌊0.2·5⌋ = 1
        sk.n_inj, sk.n_succ = 3, 3
    s.add_skill("weak", "general", "x", "sql", n_inj=3, n_succ=0)
    s.add_skill("strong", "general", "y", "sql", n_inj=3, n_succ=2)
    s.update(_exp(4, False))
    s.update(_exp(5, False))
    assert s.round == 2 and "weak" not in s.skills and s.counts["pruned"] == 1 and "strong" in s.skills


def test_own_skills_are_never_shown_and_empty_store_makes_no_call():
    bb = _Canned()
    s = _system(bb)
    assert s.recall(RecallQuery(_task(1), (), "a > 1", 0, 0)) is None and bb.requests == []
    s.add_skill("mine", "general", "question 1 at least a > 1", "sql", ["t/1"])
    assert s.recall(RecallQuery(_task(1), (), "a > 1", 0, 0)) is None  # only its own skill: nothing shown


def test_decoder_four_stages_and_garbage():
    one = {"title": "x", "pool": "general", "content": "c"}
    assert decode_skill_array(json.dumps([one]))[0][0]["title"] == "x"                           # 1 direct
    assert decode_skill_array("Here:\n```json\n" + json.dumps([one]) + "\n```")[0][0]["content"] == "c"  # 2 fence
    arr = "notes [draft] then " + json.dumps([one, {**one, "title": "y", "from": [1]}]) + " done"
    got, bad = decode_skill_array(arr)                                                            # 3 last array
    assert [g["title"] for g in got] == ["x", "y"] and got[1]["from"] == [1] and not bad
    got, bad = decode_skill_array('junk {"title": "z", "pool": "weird", "content": "k"} junk {broken')  # 4 objects
    assert got == [{"title": "z", "pool": "general", "content": "k", "from": []}] and not bad
    assert decode_skill_array("no skills here") == ([], True)
    assert decode_skill_array("[]") == ([], False)
    r = _parse_rewrite("nothing useful", RewriteRequest(_task(1), (), None, 0), Usage(1, 1))
    assert r.queries() == [] and r.parse_failed


def test_scripted_handlers_under_the_guard(sql_suite):
    from cfjax.infra.ledger import Ledger
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.memory import build_experience
    from cfjax.types import answer_key_guard

    bb = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    tasks = list(sql_suite.splits(seed=0, n_val=10).build)[:16]
    exps = build_experience(tasks, backbone=bb, world=sql_suite.world(), edits=sql_suite.edits, ledger=Ledger("x"),
                            episode0=1000, max_attempts=3)
    fails = [e for e in exps if not e.solved][:4]
    wins = [e for e in exps if e.solved and len(e.attempts) > 1][:4]
    t = exps[0]
    with answer_key_guard():
        rw = bb.call(AUTOREFINE_REWRITE, RewriteRequest(t.task, t.attempts[:1], "SELECT 1", t.episode))
        ev = bb.call(AUTOREFINE_EVOLVE, EvolveRequest(evidence_of(fails), evidence_of(wins)))
    assert not rw.parse_failed and rw.actions.endswith("SELECT 1") and rw.strategy.startswith(t.task.question)
    if t.attempts[0].score < 1.0:
        assert rw.pitfall.endswith(" ".join(t.attempts[0].feedback.split()))
    assert not ev.parse_failed and ev.skills
    n = len(fails)
    for sk in ev.skills:  # contrasts (from successes) → common mistakes, guesses (from failures) → general
        assert sk["pool"] == ("general" if sk["from"][0] <= n else "common_mistakes") and "Why it works" in sk["content"]


def test_save_load_round_trip_and_bad_file(tmp_path):
    s = _system()
    s.add_skill("a-skill", "general", "content a", "sql", ["t/1"], n_inj=4, n_succ=2)
    s.round = 3
    s.save(tmp_path / "ar.json")
    t = _system()
    t.load(tmp_path / "ar.json")
    sk = t.skills["a-skill"]
    assert (sk.n_inj, sk.n_succ, sk.sources, t.round) == (4, 2, ["t/1"], 3)
    assert math.isclose(sk.utility, 0.80452, abs_tol=1e-5)
    from cfjax.infra.io import atomic_write_json

    atomic_write_json(tmp_path / "bad.json", {"format": "cfjax.peers.autorefine/1", "round": 0, "counts": {},
                                              "skills": [{"id": "x", "title": "x"}]})
    with pytest.raises(ValueError, match=r"bad\.json: field 'skills' has a skill whose 'pool'"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a AutoRefine store|not an AutoRefine store"):
        t.load(tmp_path / "other.json")


def test_a_unit_through_the_openai_client(sql_suite):
    def extra(prompt: str) -> str | None:
        if "(AutoRefine skill evolver)" in prompt:
            return json.dumps([{"title": "at-least-boundary", "pool": "common_mistakes",
                                "content": "Use >= for 'at least'.\nEDIT: salary > 50000 -> salary >= 50000\n"
                                           "Why it works: the success used >=.", "from": [1]}])
        if "search queries for a library of reusable skills" in prompt:
            return "STRATEGY: salary at least\nPITFALL: boundary operator\nACTIONS: salary >= 50000"
        return None

    res, seen = openai_system(sql_suite, "autorefine", extra)
    assert any("(AutoRefine skill evolver)" in p for p in seen)
    assert any("search queries for a library of reusable skills" in p for p in seen)
    assert 0 <= res["success"] <= 100
    assert res["summary"]["evolver_calls"] == 1 and res["summary"]["skills"] >= 1
    assert res["eval_llm_calls"] > 0

"""Generative Agents (cfjax/peers/generative_agents/): the retrieval score under both variants on
crafted nodes, the decay, the access refresh, the reflection trigger at 150, the parsers, the scripted
handlers under the answer-key guard, persistence, and one quick unit through the OpenAI client."""

from __future__ import annotations

import json

import pytest

from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.generative_agents import (GA_IMPORTANCE, GA_INSIGHTS, GA_QUESTIONS, GAConfig, GenerativeAgentsSystem,
                                           parse_importance, parse_insights, parse_questions, retrieval_scores)
from cfjax.peers.generative_agents.memory import recency_raw
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

D = 0.99  # the code's decay per rank
P = 0.995  # the paper's decay per step


class _Fake:
    """Canned replies by call kind; GA_IMPORTANCE ratings are taken from ``ratings`` in order (then 5)."""

    name = "fake"

    def __init__(self, ratings=(), insight="INSIGHT: Write `a >= 1` for 'at least'.\nEDIT: a > 1 -> a >= 1\n"
                                           "BECAUSE OF: 1, 2") -> None:
        self.ratings = list(ratings)
        self.insight = insight
        self.calls: list[str] = []

    def call(self, kind, req):
        self.calls.append(kind.name)
        if kind is GA_IMPORTANCE:
            text = f"RATING: {self.ratings.pop(0) if self.ratings else 5}"
        elif kind is GA_QUESTIONS:
            text = "QUESTION: What should I keep in mind when a task says 'at least'?"
        else:
            text = self.insight
        return kind.parse(text, req, Usage(3, 4))


def _task(i: int) -> Task:
    return Task(f"t/{i}", f"question {i} at least", "env", "schema", {"cues": ("at least",)})


def _ctx(bb=None) -> SystemContext:
    return SystemContext(bb or _Fake(), edits=None, max_attempts=2)  # type: ignore[arg-type]


def test_registered_for_three_runners_and_says_why_not_upliftmem():
    from cfjax.experiments.countermem.rows import row_specs

    info = MEMORY_SYSTEMS.get("generative_agents")
    assert set(info.runners) == {"countermem", "antipersist", "compare"} and info.show == "revise"
    assert row_specs()["generative_agents"].table == "table1"
    assert "not a row of upliftmem" in why_not(info, "upliftmem")


def test_score_on_three_crafted_nodes_under_both_variants():
    # A, B, C: importance 2, 5, 8; last access 9, 5, 7; relevance 0.9, 0.1, 0.5; now 10.
    # importance → (0, .5, 1); relevance → (1, 0, .5) after min-max.
    imp, last, ids, rel = (2, 5, 8), (9, 5, 7), (1, 2, 3), (0.9, 0.1, 0.5)
    # code: ranks by last access, newest first: A 1, C 2, B 3 → .99, .99³, .99² → (1, 0, d/(1+d)) normalised
    # (C: (d² − d³)/(d − d³) = d/(1+d) = .497487); weights .5 / 3 / 2 (recency / relevance / importance):
    # A = .5·1 + 3·1 + 2·0 = 3.5; B = 0 + 0 + 2·.5 = 1.0; C = .5·.497487 + 3·.5 + 2·1 = 3.748744
    code = retrieval_scores(imp, last, ids, rel, 10, GAConfig())
    assert code == pytest.approx([3.5, 1.0, 0.5 * D / (1 + D) + 1.5 + 2.0], abs=1e-9)
    assert code[2] == pytest.approx(3.748744, abs=1e-6)
    # paper: .995^(10 − t) = .995, .995⁵, .995³ → (1, 0, p²/(1+p²) = .990025/1.990025 = .497494);
    # equal weights: A = 1 + 1 + 0 = 2; B = 0 + 0 + .5 = .5; C = .497494 + .5 + 1 = 1.997494
    paper = retrieval_scores(imp, last, ids, rel, 10, GAConfig(variant="paper"))
    assert paper == pytest.approx([2.0, 0.5, P ** 2 / (1 + P ** 2) + 1.5], abs=1e-9)
    assert paper[2] == pytest.approx(1.997494, abs=1e-6)
    # the variants rank differently: code C > A > B, paper A > C > B
    assert sorted(range(3), key=lambda j: -code[j]) == [2, 0, 1]
    assert sorted(range(3), key=lambda j: -paper[j]) == [0, 2, 1]
    # the code's literal ascending order ranks the oldest first: B 1, C 2, A 3 → (0, 1, .497487):
    # A = 0 + 3 + 0 = 3.0; B = .5 + 0 + 1 = 1.5; C = 3.748744 (the middle rank keeps its value)
    lit = retrieval_scores(imp, last, ids, rel, 10, GAConfig(literal_code_rank=True))
    assert lit == pytest.approx([3.0, 1.5, 0.5 * D / (1 + D) + 3.5], abs=1e-9)
    # a constant component normalises to .5 everywhere (normalize_dict_floats): importance and relevance
    # .5 each; recency .995, 1 → (0, 1): scores 0 + .5 + .5 = 1 and 1 + .5 + .5 = 2
    assert retrieval_scores((4, 4), (1, 2), (1, 2), (0.3, 0.3), 2, GAConfig(variant="paper")) == \
        pytest.approx([1.0, 2.0])


def test_decay_per_step_in_the_paper_and_per_rank_in_the_code():
    paper = GAConfig(variant="paper")
    assert recency_raw((10, 0), (1, 2), 10, paper) == pytest.approx([1.0, P ** 10])  # .995¹⁰ = .951110
    assert recency_raw((10, 0), (1, 2), 10, paper)[1] == pytest.approx(0.951110, abs=1e-6)
    assert recency_raw((0,), (1,), 100, paper) == pytest.approx([0.605770], abs=1e-6)  # .995¹⁰⁰
    # the code's decay ignores the gap: only the rank of last access counts (newest → .99, next → .99²)
    assert recency_raw((10, 0), (1, 2), 10, GAConfig()) == pytest.approx([D, D ** 2])
    assert recency_raw((10, 9), (1, 2), 10, GAConfig()) == pytest.approx([D, D ** 2])
    assert recency_raw((5, 5), (1, 2), 10, GAConfig()) == pytest.approx([D ** 2, D])  # tie → the newer node


def _three(sys_: GenerativeAgentsSystem) -> list:
    # identical texts → identical relevance (normalised to .5 each, 3·.5 = 1.5 in every score)
    return [sys_.add_node("observation", "same text", imp, (f"src/{k}",), created=t)
            for k, (imp, t) in enumerate([(10, 1), (3, 2), (2, 3)])]


def test_access_refresh_after_retrieval_changes_the_next_ranking():
    s = GenerativeAgentsSystem(_ctx(), GAConfig(k=1))
    a, b, c = _three(s)
    s.clock = 3
    # before (now 4): recency ranks C 1, B 2, A 3 → (0, .497487, 1) for (A, B, C); importance → (1, 1/8, 0)
    # A = 0 + 1.5 + 2 = 3.5; B = .5·.497487 + 1.5 + .25 = 1.998744; C = .5 + 1.5 + 0 = 2.0 → A, C, B
    before = s.rank("same text", [a, b, c], 4)
    assert [n.node_id for n, _ in before] == [a.node_id, c.node_id, b.node_id]
    assert [x for _, x in before] == pytest.approx([3.5, 2.0, 0.5 * D / (1 + D) + 1.75])
    mem = s.recall(RecallQuery(_task(9), (), "same text", 0, 0))  # unfrozen: now = clock + attempt + 1 = 4
    assert mem is not None and f"[n{a.node_id}]" in mem.text and a.last_access == 4 and b.last_access == 2
    # after A's refresh: A 1, C 2, B 3 → (1, 0, .497487): A = 4.0; B = 0 + 1.5 + .25 = 1.75;
    # C = .248744 + 1.5 + 0 = 1.748744 → A, B, C (B and C swapped)
    after = s.rank("same text", [a, b, c], 4)
    assert [n.node_id for n, _ in after] == [a.node_id, b.node_id, c.node_id]
    assert [x for _, x in after] == pytest.approx([4.0, 1.75, 0.5 * D / (1 + D) + 1.5])


def test_frozen_refresh_is_the_episodes_own_and_never_adds_nodes():
    s = GenerativeAgentsSystem(_ctx(), GAConfig(k=1))
    a, b, c = _three(s)
    s.clock = 3
    s.freeze()
    s.recall(RecallQuery(_task(9), (), "same text", 7, 0))  # episode 7, attempt 0: A refreshed at 4 in its table
    assert a.last_access == 1 and len(s) == 3  # the store itself is unchanged
    assert s._overlays[("t/9", 7)] == {a.node_id: 4}
    ranked = s.rank("same text", [a, b, c], 5, s._overlays[("t/9", 7)])  # the same episode sees the refresh
    assert [n.node_id for n, _ in ranked] == [a.node_id, b.node_id, c.node_id]
    ranked = s.rank("same text", [a, b, c], 5)  # another episode does not
    assert [n.node_id for n, _ in ranked] == [a.node_id, c.node_id, b.node_id]
    # never its own nodes: a task that is a node's source does not see it
    own = GenerativeAgentsSystem(_ctx())
    own.add_node("observation", "x", 5, ("t/9",))
    assert own.recall(RecallQuery(_task(9), (), "x", 0, 0)) is None


def test_reflection_fires_exactly_when_the_importance_sum_reaches_150():
    bb = _Fake(ratings=[9] * 16 + [5, 1] + [8])  # 16·9 = 144, +5 = 149, +1 = 150; the insight is rated 8
    s = GenerativeAgentsSystem(_ctx(bb))
    exps = [Experience(_task(i), (Attempt("a > 1", "wrong", 0.0),), False, i) for i in range(18)]
    s.build(exps[:17])
    assert s.since == 149 and s.reflection_runs == 0 and "GA_QUESTIONS" not in bb.calls  # not before
    s.update(exps[17])
    assert s.reflection_runs == 1 and s.since == 0
    refl = [n for n in s.nodes.values() if n.kind == "reflection"]
    assert len(refl) == 1 and refl[0].importance == 8 and "EDIT: a > 1 -> a >= 1" in refl[0].text
    # its evidence: statements 1 and 2 of the question's retrieval (30 nodes), two of the 18 observations
    assert len(refl[0].evidence) == 2 and all(s.nodes[i].kind == "observation" for i in refl[0].evidence)
    assert set(refl[0].sources) == {s.nodes[i].task_id for i in refl[0].evidence}
    # 18 ratings + 1 question call + 1 insight call + 1 rating of the insight, each charged once
    assert bb.calls.count("GA_IMPORTANCE") == 19 and s.ctx.ledger.total.llm_calls == 21
    mem = s.recall(RecallQuery(_task(99), (), "a > 1", 0, 0))
    assert mem is not None and mem.kind == "memories" and mem.text.count("[n") == 3


def test_parsers_are_robust_to_garbage():
    assert parse_importance("RATING: 7") == (7, False) and parse_importance(" 3 ") == (3, False)
    assert parse_importance("very poignant!") == (4, True) and parse_importance("RATING: 11") == (4, True)
    assert parse_questions("no idea", 3) == ((), True)
    qs, failed = parse_questions("QUESTION: a?\n1. QUESTION: b?\nQUESTION: c?\nQUESTION: d?", 3)
    assert qs == ("a?", "b?", "c?") and not failed
    assert parse_insights("%%%\n\n", 3, 5) == ((), True)
    assert parse_insights("INSIGHT: none", 3, 5) == ((), False)
    ins, failed = parse_insights("INSIGHT: x\nBECAUSE OF: 0, 2, 99, 2\nINSIGHT: y\nEDIT: a -> b\nEDIT: c -> d", 3, 5)
    assert not failed and [i.text for i in ins] == ["x", "y\nEDIT: a -> b"] and ins[0].evidence == (2,)
    assert ins[1].evidence == ()


def test_scripted_handlers_under_the_answer_key_guard(sql_suite):
    from cfjax.infra.cache import CachedWorld
    from cfjax.infra.ledger import Ledger
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.memory import build_experience
    from cfjax.types import answer_key_guard

    bb = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    sp = sql_suite.splits(seed=0, n_val=10)
    led = Ledger("build")
    exps = build_experience(list(sp.build)[:24], backbone=bb, world=CachedWorld(sql_suite.world()),
                            edits=sql_suite.edits, ledger=led, episode0=100, max_attempts=3)
    s = GenerativeAgentsSystem(SystemContext(bb, sql_suite.edits, 3, 0, Ledger("ga")), GAConfig(reflect_threshold=40))
    with answer_key_guard():
        s.build(exps)
        mem = s.recall(RecallQuery(list(sp.eval)[0], (), "SELECT 1", 5, 0))
    obs = [n for n in s.nodes.values() if n.kind == "observation"]
    refl = [n for n in s.nodes.values() if n.kind == "reflection"]
    assert len(obs) == sum(len(e.attempts) for e in exps) and s.reflection_runs >= 1 and s.parse_failures == 0
    for n in obs:  # the documented ranges: failed [5, 8], solved [2, 5]; observations carry no EDIT line
        assert (5 <= n.importance <= 8) if n.attempt.score < 1.0 else (2 <= n.importance <= 5)
        assert "EDIT:" not in s.shown(n)
    assert refl and all(6 <= n.importance <= 9 and "\nEDIT: " in n.text and n.evidence for n in refl)
    assert mem is not None and mem.text.count("[n") == 3


def test_save_load_round_trip_bad_file_and_frozen_update(tmp_path):
    from cfjax.infra.io import atomic_write_json

    s = GenerativeAgentsSystem(_ctx(_Fake(ratings=[10] * 20)))
    assert isinstance(s, MemorySystem)
    s.build([Experience(_task(i), (Attempt("a > 1", "wrong", 0.0), Attempt("a >= 1", "ok", 1.0)), True, i)
             for i in range(8)])
    assert s.summary() == {"nodes": 17, "observations": 16, "reflections": 1, "reflection_runs": 1,
                           "parse_failures": 0}
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(Experience(_task(50), (), False, 50))
    s.save(tmp_path / "ga.json")
    t = GenerativeAgentsSystem(_ctx())
    t.load(tmp_path / "ga.json")
    assert t.summary() == s.summary() and t.clock == s.clock == 16 and t.since == s.since
    assert [(n.text, n.last_access, n.attempt, n.evidence) for n in t.nodes.values()] == \
        [(n.text, n.last_access, n.attempt, n.evidence) for n in s.nodes.values()]
    assert t.tasks["t/3"] == s.tasks["t/3"] and t.tasks["t/3"].attrs["cues"] == ("at least",)
    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a Generative Agents store"):
        t.load(tmp_path / "other.json")
    data = json.loads((tmp_path / "ga.json").read_text())["payload"]
    data["nodes"][0]["importance"] = "high"
    atomic_write_json(tmp_path / "bad.json", data)
    with pytest.raises(ValueError, match=r"bad\.json: nodes\[0\]: field 'importance' must be a int"):
        t.load(tmp_path / "bad.json")


def test_a_quick_unit_through_the_openai_client(sql_suite):
    from tests.peers.conftest import openai_system, openai_unit

    def extra(prompt: str) -> str | None:
        if "rate the likely poignancy" in prompt:
            return "RATING: 10"
        if "most salient high-level" in prompt:
            return "QUESTION: Which mistakes recur?\nQUESTION: Which wordings cause them?\nQUESTION: How to fix?"
        if "high-level insights can you infer" in prompt:
            return "INSIGHT: Compare with >= when the task says 'at least'.\nEDIT: a > 1 -> a >= 1\nBECAUSE OF: 1, 2"
        return None

    res, seen = openai_unit(sql_suite, "generative_agents", extra)
    row = res["rows"]["generative_agents"]
    assert 0 <= row["success"] <= 100 and row["observations"] > 0 and row["parse_failures"] == 0
    assert sum("rate the likely poignancy" in p for p in seen) == row["nodes"]  # one rating per node
    assert row["llm_calls"] >= res["rows"]["none"]["llm_calls"]  # revisions with the shown set are counted
    # enough build attempts (10 each) to reach 150: the reflection's prompts go through the client too
    out, seen = openai_system(sql_suite, "generative_agents", extra, n_build=16, n_eval=2)
    assert out["summary"]["reflection_runs"] >= 1 and out["summary"]["reflections"] >= 1
    assert any("most salient high-level" in p for p in seen) and any("insights can you infer" in p for p in seen)
    n_ga = sum(any(k in p for k in ("poignancy", "most salient", "insights can you infer")) for p in seen)
    assert out["build_llm_calls"] > n_ga and 0 <= out["success"] <= 100  # every call charged to the build ledger

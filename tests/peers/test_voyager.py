"""Voyager (cfjax/peers/voyager/): only verified procedures become skills, keyed by their model-written
description; top-5 retrieval by similarity of the task (plus the failed attempt on retries); the critic
reads the evaluator's feedback by default or is a model call."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from cfjax.llm.prompts import split_memory_set
from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.voyager import (VOYAGER_CRITIC, VOYAGER_DESCRIBE, CriticRequest, DescribeRequest, Skill,
                                 VoyagerSystem)
from cfjax.peers.voyager.calls import COMPETENCE, skill_name_of
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage

VOCAB = ("alpha", "beta", "gamma", "delta", "zeta")


class _Bow:
    """A bag-of-words embedder over :data:`VOCAB` (other words ignored), so cosines are hand-computable."""

    def embed_cached(self, text: str) -> np.ndarray:
        words = re.findall(r"[a-z]+", text.lower())
        v = np.array([words.count(w) for w in VOCAB], dtype=float)
        n = np.linalg.norm(v)
        return v / n if n else v


class _Fake:
    """Answers VOYAGER_DESCRIBE with ``descr[task_id] = (name, description)`` and VOYAGER_CRITIC with
    ``critic[task_id]`` (a bool); records the kinds it was called with."""

    name = "fake"

    def __init__(self, descr: dict[str, tuple[str, str]], critic: dict[str, bool] | None = None) -> None:
        self.descr, self.critic, self.kinds = descr, critic or {}, []

    def call(self, kind, req):
        self.kinds.append(kind.name)
        tid = req.task.task_id
        if kind is VOYAGER_CRITIC:
            text = json.dumps({"reasoning": "r", "success": self.critic[tid], "critique": ""})
        else:
            name, desc = self.descr[tid]
            text = f"NAME: {name}\nDESCRIPTION: {desc}\nAPPLICABILITY: when it fits\nEDIT: a > 1 -> a >= 1"
        return kind.parse(text, req, Usage(3, 4))


def _task(tid: str, q: str) -> Task:
    return Task(tid, q, "env", "schema", {"cues": ()})


def _solved(tid: str, q: str, ep: int = 0) -> Experience:
    return Experience(_task(tid, q), (Attempt("a > 1", "wrong", 0.0), Attempt(f"a >= 1 -- {tid}", "ok", 1.0)), True, ep)


def _failed(tid: str, q: str) -> Experience:
    return Experience(_task(tid, q), (Attempt("a > 1", "wrong", 0.0), Attempt("a > 2", "wrong", 0.0)), False, 0)


def _system(fake, **kw) -> tuple[VoyagerSystem, SystemContext]:
    ctx = SystemContext(fake, edits=None, max_attempts=2)  # type: ignore[arg-type]
    return VoyagerSystem(ctx, embedder=_Bow(), **kw), ctx  # type: ignore[arg-type]


def _q(q: str, history=(), tid: str = "q/0") -> RecallQuery:
    return RecallQuery(_task(tid, q), tuple(history), "draft", 0, len(history))


def test_registered_for_three_runners_and_says_why_not_upliftmem():
    from cfjax.experiments.countermem.rows import row_specs

    info = MEMORY_SYSTEMS.get("voyager")
    assert set(info.runners) == {"countermem", "antipersist", "compare"} and info.show == "revise"
    assert "voyager" in row_specs() and "not a row of upliftmem" in why_not(info, "upliftmem")


def test_admits_only_verified_episodes():
    fake = _Fake({"s/1": ("solveIt", "alpha")})
    s, ctx = _system(fake)
    assert isinstance(s, MemorySystem)
    s.build([_failed("f/1", "alpha"), _solved("s/1", "alpha")])
    # feedback critic: no critic call; the failed episode adds nothing (no describe call), the solved one adds 1
    assert fake.kinds == ["VOYAGER_DESCRIBE"] and ctx.ledger.total.llm_calls == 1
    assert s.summary()["skills"] == 1 and s.summary()["skills_rejected"] == 1
    sk = s.skills["solveIt"]
    assert sk.procedure == "a >= 1 -- s/1" and sk.source == "s/1"  # the final, verified action
    assert sk.description == "alpha\nEDIT: a > 1 -> a >= 1" and sk.applicability == "when it fits"


def test_description_is_the_embedded_key_not_the_source_question():
    # questions and descriptions crossed: by question A would rank first, by description C then B then A.
    fake = _Fake({"A": ("skillA", "zeta"), "B": ("skillB", "alpha beta"), "C": ("skillC", "alpha")})
    s, _ = _system(fake)
    s.build([_solved("A", "alpha alpha"), _solved("B", "zeta"), _solved("C", "gamma")])
    got = s.retrieve(_q("alpha"))
    # query (1,0,0,0,0); keys: C "alpha" → cos 1; B "alpha beta" → 1/sqrt(2); A "zeta" → 0
    assert [n for n, _ in got] == ["skillC", "skillB", "skillA"]
    assert got[0][1] == pytest.approx(1.0) and got[1][1] == pytest.approx(1 / math.sqrt(2)) and got[2][1] == 0.0
    # never the task's own skill
    assert [n for n, _ in s.retrieve(_q("alpha", tid="C"))] == ["skillB", "skillA"]


def test_top5_cap_and_the_memory_set_shown():
    # description i = "alpha" + " beta" * i → cos with "alpha" = 1/sqrt(1 + i*i): i = 0..4 are the top 5
    fake = _Fake({f"t/{i}": (f"skill{i}", "alpha" + " beta" * i) for i in range(7)})
    s, _ = _system(fake)
    s.build([_solved(f"t/{i}", "gamma") for i in range(7)])
    got = s.retrieve(_q("alpha"))
    assert [n for n, _ in got] == [f"skill{i}" for i in range(5)]
    assert [round(x, 4) for _, x in got] == [1.0, 0.7071, 0.4472, 0.3162, 0.2425]
    mem = s.recall(_q("alpha"))
    blocks = split_memory_set(mem.text)
    assert mem.kind == "memories" and [b for b, _ in blocks] == [f"skill{i}" for i in range(5)]
    assert "PROCEDURE:\na >= 1 -- t/0" in blocks[0][1] and "EDIT: a > 1 -> a >= 1" in blocks[0][1]
    assert s.recall(_q("alpha", tid="x")) is not None and VoyagerSystem(s.ctx).recall(_q("alpha")) is None


def test_retry_query_includes_the_failed_attempts_feedback():
    fake = _Fake({"C": ("skillC", "alpha"), "D": ("skillD", "delta")})
    s, _ = _system(fake)
    s.build([_solved("C", "x"), _solved("D", "x")])
    assert [n for n, _ in s.retrieve(_q("alpha"))] == ["skillC", "skillD"]  # cos 1 vs 0
    hist = (Attempt("a > 1", "delta delta delta", 0.0),)
    assert s.query_text(_q("alpha", hist)) == "alpha\n\nThe last attempt failed: delta delta delta"
    got = s.retrieve(_q("alpha", hist))
    # query (1,0,0,3,0)/sqrt(10): D → 3/sqrt(10) ≈ 0.949, C → 1/sqrt(10) ≈ 0.316
    assert [n for n, _ in got] == ["skillD", "skillC"]
    assert got[0][1] == pytest.approx(3 / math.sqrt(10)) and got[1][1] == pytest.approx(1 / math.sqrt(10))


def test_same_name_replaces_or_keeps_a_version():
    fake = _Fake({"A": ("same", "alpha"), "B": ("same", "beta")})
    s, _ = _system(fake)
    s.build([_solved("A", "x"), _solved("B", "x")])
    assert list(s.skills) == ["same"] and s.skills["same"].source == "B" and s.skills["same"].version == 2
    assert len(s.index) == 1 and s.summary()["skills_replaced"] == 1 and s.summary()["skills_added"] == 2
    k, _ = _system(fake, on_duplicate="keep")
    k.build([_solved("A", "x"), _solved("B", "x")])
    assert list(k.skills) == ["same", "sameV2"] and k.skills["sameV2"].description.startswith("beta")


def test_model_critic_decides_admission_and_is_charged():
    # the critic wrongly accepts the failed episode and wrongly rejects the solved one
    fake = _Fake({"f/1": ("fromFailure", "alpha"), "s/1": ("fromSuccess", "beta")}, {"f/1": True, "s/1": False})
    s, ctx = _system(fake, critic="model")
    s.build([_failed("f/1", "q"), _solved("s/1", "q")])
    assert fake.kinds == ["VOYAGER_CRITIC", "VOYAGER_DESCRIBE", "VOYAGER_CRITIC"]
    assert list(s.skills) == ["fromFailure"] and ctx.ledger.total.llm_calls == 3
    assert ctx.ledger.verification.llm_calls == 3
    sm = s.summary()
    assert sm["critic_calls"] == 2 and sm["critic_disagreed"] == 2 and sm["skills_rejected"] == 1


def test_parsers_survive_garbage():
    t = _task("t", "q")
    for text in ("", "maybe", '{"success": "yes"}', "{bad json", "[1, 2]"):
        r = VOYAGER_CRITIC.parse(text, CriticRequest(t, ()), Usage(1, 1))
        assert r.success is False and r.parsed is False
    assert VOYAGER_CRITIC.parse('ok {"success": true}', CriticRequest(t, ()), Usage(1, 1)).success is True
    for text in ("", "hello", "NAME: x", "NAME: !!!\nDESCRIPTION: d", "DESCRIPTION: only"):
        r = VOYAGER_DESCRIBE.parse(text, DescribeRequest(t, (), True), Usage(1, 1))
        assert r.parsed is False and r.name == "" and r.description == ""
    r = VOYAGER_DESCRIBE.parse("NAME: count rows\nDESCRIPTION: d\nEDIT: broken", DescribeRequest(t, (), True),
                               Usage(1, 1))
    assert r.parsed and r.name == "count_rows" and r.description == "d" and r.applicability == ""


def test_scripted_handlers_under_the_answer_key_guard(sql_suite):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.types import answer_key_guard

    sim = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    t = next(x for x in sql_suite.tasks if "count_nonnull" in x.task_id)
    gold = sql_suite.keys[t.task_id].gold  # the test builds the trajectory; the handlers never see a key
    bad = gold.replace("COUNT(" + gold.split("COUNT(")[1].split(")")[0] + ")", "COUNT(*)")
    contrast = (Attempt(bad, "wrong", 0.0), Attempt(gold, "correct", 1.0))
    first = (Attempt(gold, "correct", 1.0),)
    with answer_key_guard():
        d = sim.call(VOYAGER_DESCRIBE, DescribeRequest(t, contrast, True, 1))
        d1 = sim.call(VOYAGER_DESCRIBE, DescribeRequest(t, first, True, 1))
        verdicts = [sim.call(VOYAGER_CRITIC, CriticRequest(t, contrast, ep)).success for ep in range(200)]
    edit = d.description.splitlines()[-1]
    assert d.parsed and d.name == skill_name_of(t, gold) and edit.startswith("EDIT: ") and "COUNT(*) ->" in edit
    assert d1.parsed and "EDIT:" not in d1.description  # a first-attempt success names no step
    assert 0.85 <= sum(verdicts) / 200 <= 0.95 and COMPETENCE.p_critic_correct == 0.9


def test_save_load_bad_file_and_frozen(tmp_path):
    fake = _Fake({"A": ("skillA", "alpha"), "B": ("skillB", "beta")})
    s, _ = _system(fake)
    s.build([_solved("A", "x"), _solved("B", "x"), _failed("F", "x")])
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(_solved("C", "x"))
    before = s.summary()
    assert s.recall(_q("alpha")) is not None and s.summary() == before  # recall mutates nothing
    s.save(tmp_path / "v.json")
    t, _ = _system(fake)
    t.load(tmp_path / "v.json")
    assert {n: vars(k) for n, k in t.skills.items()} == {n: vars(k) for n, k in s.skills.items()}
    assert t.summary() == before and [n for n, _ in t.retrieve(_q("beta"))] == ["skillB", "skillA"]
    from cfjax.infra.io import atomic_write_json, read_json

    atomic_write_json(tmp_path / "bad.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a Voyager skill library"):
        t.load(tmp_path / "bad.json")
    payload = read_json(tmp_path / "v.json")
    payload["skills"][0]["procedure"] = 7
    atomic_write_json(tmp_path / "bad2.json", payload)
    with pytest.raises(ValueError, match=r"bad2.json: skills\[0\].procedure must be a string"):
        t.load(tmp_path / "bad2.json")
    assert Skill("n", "d", "", "p", "s").key() == "n: d"


def test_a_quick_unit_through_the_openai_client(sql_suite):
    from tests.peers.conftest import openai_unit

    def extra(prompt: str) -> str | None:
        if "stored in a skill library" in prompt:
            return ("NAME: boundaryQuery\nDESCRIPTION: filter rows by an inclusive bound\n"
                    "APPLICABILITY: questions with an inclusive bound\nEDIT: a > 1 -> a >= 1")
        return None

    res, seen = openai_unit(sql_suite, "voyager", extra)
    row = res["rows"]["voyager"]
    described = [p for p in seen if "stored in a skill library" in p]
    assert described and row["skills_added"] == len(described) and row["skills"] == 1  # one name: replaced
    assert 0 <= row["success"] <= 100 and row["critic_calls"] == 0

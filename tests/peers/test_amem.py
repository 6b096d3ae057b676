"""A-MEM (cfjax/peers/amem/): links are note ids that survive the deletion and reordering of other notes
(where upstream's rank positions point to the wrong note), evolution rewrites a shown neighbour's context,
tags and history, retrieval is the top k plus linked notes capped at k (hand-computed on four notes),
parsers on garbage, the scripted handlers under the answer-key guard, persistence, and a quick run
through the OpenAI client."""

from __future__ import annotations

import json
import re

import pytest

from cfjax.infra.io import atomic_write_json
from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.peers.amem import (AMEM_EVOLVE, AMEM_NOTE, AMEM_PROBS, AmemNote, AmemSystem, EvolveRequest, Neighbour,
                              NoteRequest)
from cfjax.peers.amem.calls import _scripted_evolve
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage


def _note(content: str, word: str) -> dict:
    return {"content": content, "keywords": [word], "context": f"about {word}", "tags": [word]}


class _Fake:
    """AMEM_NOTE answers a canned note per task; AMEM_EVOLVE answers ``evolve(request)`` (or "no")."""

    name = "fake"

    def __init__(self, notes: dict[str, dict], evolve=None) -> None:
        self.notes, self.evolve, self.evolve_reqs = notes, evolve, []

    def call(self, kind, req):
        if kind is AMEM_NOTE:
            return kind.parse(json.dumps(self.notes[req.task.task_id]), req, Usage(3, 4))
        self.evolve_reqs.append(req)
        reply = self.evolve(req) if self.evolve else {"should_evolve": False}
        return kind.parse(json.dumps(reply), req, Usage(3, 4))


def _task(tid: str, cue: str = "at least") -> Task:
    return Task(tid, f"question of {tid}", "env", "schema", {"cues": (cue,)})


def _exp(tid: str, ep: int = 0) -> Experience:
    return Experience(_task(tid), (Attempt("a > 1", "wrong", 0.0), Attempt("a >= 1", "ok", 1.0)), True, ep)


def _system(fake, **kw) -> tuple[AmemSystem, SystemContext]:
    ctx = SystemContext(fake, edits=None, max_attempts=2)  # type: ignore[arg-type]
    return AmemSystem(ctx, **kw), ctx


def test_registered_for_upliftmem_and_compare_with_reasons():
    info = MEMORY_SYSTEMS.get("amem")
    assert info.runners == ("upliftmem", "compare") and info.show == "revise"
    assert "not a row of the CounterMem paper's Table 1" in why_not(info, "countermem")
    assert "compare --methods amem" in why_not(info, "antipersist")


def test_links_are_ids_that_survive_deletion_and_evolution_updates_the_shown_neighbour():
    def evolve(req: EvolveRequest) -> dict:
        if req.keywords != ("delta",):  # only d's insert evolves
            return {"should_evolve": False}
        ids = [n.id for n in req.neighbours]
        return {"should_evolve": True, "actions": ["strengthen", "update_neighbor"],
                "suggested_connections": [ids[0], "n99"], "tags_to_update": ["gamma", "linked"],
                "new_context_neighborhood": ["about gamma, seen again"] + [n.context for n in req.neighbours[1:]],
                "new_tags_neighborhood": [["gamma", "again"]] + [list(n.tags) for n in req.neighbours[1:]]}

    notes = {"t/a": _note("alpha alpha alpha", "alpha"), "t/b": _note("beta beta beta", "beta"),
             "t/c": _note("gamma gamma gamma", "gamma"), "t/d": _note("gamma gamma gamma", "delta")}
    fake = _Fake(notes, evolve)
    s, ctx = _system(fake)
    assert isinstance(s, MemorySystem)
    s.build([_exp("t/a"), _exp("t/b"), _exp("t/c"), _exp("t/d")])
    # one note call per episode, an evolution call from the second on (the first note has no neighbours)
    assert ctx.ledger.total.llm_calls == 4 + 3 and len(fake.evolve_reqs) == 3
    req = fake.evolve_reqs[-1]
    assert req.neighbours[0].id == "n2"  # d's content is c's: c (note n2) is the nearest, rank 0
    d, c, a = s.notes["n3"], s.notes["n2"], s.notes["n0"]
    assert d.links == ["n2"] and s.ignored_links == 1  # "n99" never existed: dropped
    # upstream stores the rank (0) and resolves it as a position among all notes: note n0 (a) — the wrong one
    assert list(s.notes.values())[0].id == "n0" != "n2"
    assert d.tags == ["gamma", "linked"] and d.evolution_history[0]["action"] == "strengthen"
    assert d.evolution_history[0]["links"] == ["n2"] and d.evolution_history[0]["old_tags"] == ["delta"]
    # update_neighbor rewrote the *shown* rank-0 neighbour (c), not the note at position 0 (a)
    assert (c.context, c.tags) == ("about gamma, seen again", ["gamma", "again"])
    assert c.evolution_history[-1] == {"time": 4, "action": "update_neighbor", "by": "n3",
                                       "old_context": "about gamma", "new_context": "about gamma, seen again",
                                       "old_tags": ["gamma"], "new_tags": ["gamma", "again"]}
    assert (a.context, a.tags) == ("about alpha", ["alpha"])
    assert s.index.similarity(c.document(), "n2") == pytest.approx(1.0, abs=1e-5)  # re-embedded at once
    # upstream's evo_threshold = 100: the rewritten neighbour is re-indexed only at consolidation
    lazy, _ = _system(_Fake(notes, evolve), evo_threshold=100)
    lazy.build([_exp("t/a"), _exp("t/b"), _exp("t/c"), _exp("t/d")])
    assert lazy.notes["n2"].context == c.context and lazy.index.similarity(c.document(), "n2") < 0.99
    # delete a: a rank-0 link would now resolve to b (position 0); the id link still names c
    assert s.delete("n0") and list(s.notes.values())[0].id == "n1"
    # "delta" is only in d's document: d is the top hit and its link brings c in before any other hit
    assert s.search("delta", 2) == ["n3", "n2"] and s.notes["n2"].content == "gamma gamma gamma"


class _Index:
    """Similarities set by hand (the mechanism under test is the expansion, not the encoder)."""

    def __init__(self, sims: dict[str, float]) -> None:
        self.sims = sims

    def topk(self, query, k, *, keep=None, threshold=None):
        ranked = sorted(((i, s) for i, s in self.sims.items() if keep is None or keep(i)), key=lambda x: -x[1])
        return ranked[:k]

    def remove(self, i):
        self.sims.pop(i, None)

    def add(self, i, text):
        pass


def _four(expand: str = "interleave") -> AmemSystem:
    s, _ = _system(_Fake({}), expand=expand)
    links = {"n0": ["n3"], "n1": [], "n2": ["n0"], "n3": []}
    for i in range(4):
        s.notes[f"n{i}"] = AmemNote(f"n{i}", f"note {i}\nEDIT: x{i} -> y{i}", [], "c", [], f"t/{i}", i,
                                    links=links[f"n{i}"])
    s.index = _Index({"n0": 0.9, "n1": 0.8, "n2": 0.7, "n3": 0.1})  # type: ignore[assignment]
    return s


def test_retrieval_is_top_k_plus_linked_notes_capped_at_k():
    s = _four()
    # k = 2: hits n0, n1; n0's link n3 follows n0 → [n0, n3, n1][:2] = [n0, n3] (top-2 alone: [n0, n1])
    assert s.search("q", 2) == ["n0", "n3"]
    # k = 3: n0, n3, n1, n2 (n2's link n0 is already in) → [n0, n3, n1]
    assert s.search("q", 3) == ["n0", "n3", "n1"]
    # n3 is the query task's own note: neither a hit nor a linked neighbour → [n0, n1]
    assert s.search("q", 2, exclude_source="t/3") == ["n0", "n1"]
    # search_agentic order: the neighbours after all k hits, then [:k]
    a = _four("append")
    assert a.search("q", 2) == ["n0", "n1"] and a.search("q", 5) == ["n0", "n1", "n2", "n3"]
    assert a.search("q", 3, exclude_source="t/1") == ["n0", "n2", "n3"]  # hits n0, n2, n3 (3 left)
    mem = s.recall(RecallQuery(_task("t/9"), (), "SELECT 1", 0, 0))
    assert mem is not None and mem.kind == "memories" and mem.text.startswith("[n0]\nnote 0") and "[n3]" in mem.text
    # s.k = 5: [n0, n3, n1, n2] are shown once each; retrieval_count is the bookkeeping done at retrieval
    assert [s.notes[f"n{i}"].retrieval_count for i in range(4)] == [1, 1, 1, 1]
    s.freeze()
    s.recall(RecallQuery(_task("t/3"), (), None, 0, 0))  # frozen: still counted; n3 is its own note
    assert [s.notes[f"n{i}"].retrieval_count for i in range(4)] == [2, 2, 2, 1]
    s.delete("n3")  # a link to a deleted note is skipped
    assert s.search("q", 2) == ["n0", "n1"]


def test_scripted_evolve_with_scripted_draws():
    class R:
        def __init__(self, v):
            self.v = v

        def random(self):
            return self.v.pop(0)

    class Sim:
        r = R([0.5, 0.9, 0.2, 0.5])

        def rng(self, *key):
            return self.r

    t = _task("t/9", "at least")
    edit = "Write >=.\nEDIT: a > 1 -> a >= 1"
    n1 = Neighbour("n1", edit, ("x",), "c1", ("sql", "at least"))  # same edit line; has the cue tag
    n2 = Neighbour("n2", "other\nEDIT: b -> c", ("at least",), "c2", ("sql",))  # cue among its keywords
    n3 = Neighbour("n3", "unrelated", ("y",), "c3", ("sql",))  # shares nothing
    # n1: 0.5 < p_link 0.8 → link (no update draw: it has the cue); n2: 0.9 ≥ 0.8 → no link, 0.2 < 0.3 →
    # tags + cue; n3: no link draw, 0.5 ≥ 0.3 → unchanged
    assert (AMEM_PROBS.p_link, AMEM_PROBS.p_update_neighbour) == (0.8, 0.3)
    out = json.loads(_scripted_evolve(Sim(), EvolveRequest(t, edit, (), "ctx", ("sql", "at least"), (n1, n2, n3))))
    assert out["suggested_connections"] == ["n1"] and out["actions"] == ["strengthen", "update_neighbor"]
    assert out["new_tags_neighborhood"] == [["sql", "at least"], ["sql", "at least"], ["sql"]]
    assert out["new_context_neighborhood"] == ["c1", "c2 Related to tasks that say 'at least'.", "c3"]


def test_parsers_survive_garbage():
    t = _task("t")
    for text in ("", "nope", "{bad", "[1]", '{"keywords": []}'):
        r = AMEM_NOTE.parse(text, NoteRequest(t, (), False), Usage(1, 1))
        assert r.content == "" and r.parse_failed
    r = AMEM_NOTE.parse('```json\n{"content": "c", "keywords": "k", "tags": [1, "t"]}\n```', NoteRequest(t, (), False),
                        Usage(1, 1))
    assert (r.content, r.keywords, r.context, r.tags, r.parse_failed) == ("c", (), "General", ("t",), True)
    req = EvolveRequest(t, "c", (), "", (), ())
    for text in ("", "{", '{"should_evolve": "yes"}', "null"):
        e = AMEM_EVOLVE.parse(text, req, Usage(1, 1))
        assert not e.should_evolve and e.connections == () and e.parse_failed
    e = AMEM_EVOLVE.parse('{"should_evolve": true, "actions": ["Strengthen"], "suggested_connections": [3, "n1", null],'
                          ' "new_tags_neighborhood": "x"}', req, Usage(1, 1))
    assert e.actions == ("strengthen",) and e.connections == ("3", "n1") and e.neighbour_tags == () and e.tags is None


def test_scripted_handlers_under_the_answer_key_guard(sql_suite):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.types import answer_key_guard

    sim = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    t = next(x for x in sql_suite.tasks if "count_nonnull" in x.task_id)
    gold = sql_suite.keys[t.task_id].gold  # the test builds the trajectory; the handlers never see a key
    bad = gold.replace("COUNT(" + gold.split("COUNT(")[1].split(")")[0] + ")", "COUNT(*)")
    contrast = (Attempt(bad, "wrong", 0.0), Attempt(gold, "correct", 1.0))
    cue = str(t.attrs["cues"][0])
    with answer_key_guard():
        n = sim.call(AMEM_NOTE, NoteRequest(t, contrast, True, 1))
        none = sim.call(AMEM_NOTE, NoteRequest(t, (Attempt(gold, "correct", 1.0),), True, 1))
        same = Neighbour("n0", n.content, ("x",), "c", ("sql", cue))
        other = Neighbour("n1", "unrelated", ("y",), "c", ("sql",))
        evos = [sim.call(AMEM_EVOLVE, EvolveRequest(t, n.content, n.keywords, n.context, n.tags, (same, other), ep))
                for ep in range(200)]
    assert not n.parse_failed and n.content.endswith("EDIT: SELECT COUNT(*) -> SELECT COUNT(email)")
    assert n.keywords[0] == cue and "SELECT COUNT(*)" in n.keywords and n.tags == ("sql", cue) and cue in n.context
    assert none.content == "" and not none.parse_failed
    assert all(not e.parse_failed or not e.should_evolve for e in evos)
    assert all("n1" not in e.connections for e in evos)  # shares neither the edit nor the cue
    assert 0.7 <= sum("n0" in e.connections for e in evos) / 200 <= 0.9  # p_link = 0.8
    assert 0.2 <= sum(e.should_evolve and cue in e.neighbour_tags[1] for e in evos) / 200 <= 0.4  # 0.3


def test_save_load_bad_file_and_frozen(tmp_path):
    fake = _Fake({"t/a": _note("alpha", "alpha"), "t/b": _note("beta", "beta")},
                 lambda req: {"should_evolve": True, "actions": ["strengthen"],
                              "suggested_connections": [req.neighbours[0].id], "tags_to_update": ["b2"],
                              "new_context_neighborhood": [], "new_tags_neighborhood": []})
    s, _ = _system(fake)
    s.build([_exp("t/a"), _exp("t/b")])
    s.recall(RecallQuery(_task("t/9"), (), None, 0, 0))
    assert s.summary() == {"notes": 2, "links": 1, "evolutions": 1, "neighbour_updates": 0, "retrievals": 2}
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(_exp("t/c"))
    s.save(tmp_path / "amem.json")
    t, _ = _system(fake)
    t.load(tmp_path / "amem.json")
    assert t.notes == s.notes and t.summary() == s.summary() and t._next == 2
    assert t.search("alpha", 5) == s.search("alpha", 5)
    atomic_write_json(tmp_path / "bad.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a cfjax A-MEM store"):
        t.load(tmp_path / "bad.json")
    row = json.loads(json.dumps(s.notes["n1"].__dict__))
    row["links"] = "n0"
    atomic_write_json(tmp_path / "bad2.json", {"format": "cfjax.peers.amem/1", "notes": [row], "next_id": 2,
                                               "clock": 2, "evo_count": 1})
    with pytest.raises(ValueError, match=re.escape("bad2.json: field 'notes[0].links' must be a list")):
        t.load(tmp_path / "bad2.json")


def test_a_quick_run_through_the_openai_client(sql_suite):
    from tests.peers.conftest import openai_system

    note = {"content": "For 'at least', keep the boundary.\nEDIT: a > 1 -> a >= 1", "keywords": ["at least"],
            "context": "boundaries", "tags": ["sql"]}

    def extra(prompt: str) -> str | None:
        if "You write one note for an agent's Zettelkasten memory" in prompt:
            return json.dumps(note)
        if "You evolve an agent's Zettelkasten memory" in prompt:
            first = re.search(r"memory id: (\S+)", prompt).group(1)
            return json.dumps({"should_evolve": True, "actions": ["strengthen"], "suggested_connections": [first],
                               "tags_to_update": ["sql"], "new_context_neighborhood": [],
                               "new_tags_neighborhood": []})
        return None

    res, seen = openai_system(sql_suite, "amem", extra)
    noted = [p for p in seen if "You write one note for an agent's Zettelkasten memory" in p]
    evolved = [p for p in seen if "You evolve an agent's Zettelkasten memory" in p]
    assert len(noted) == 4 and len(evolved) == 3  # a note per build episode; no evolution for the first
    assert 0 <= res["success"] <= 100 and res["build_llm_calls"] >= 7
    assert res["summary"]["notes"] == 4 and res["summary"]["links"] == 3 and res["summary"]["evolutions"] == 3


def test_fixed_store_exports_what_recall_shows_and_native_is_search_with_budget_k():
    from cfjax.llm.prompts import split_memory_set
    from cfjax.memory import FixedStore

    s = _four()
    assert isinstance(s, FixedStore)
    items = s.export_items()
    assert items == [(f"n{i}", f"note {i}\nEDIT: x{i} -> y{i}") for i in range(4)]
    q = RecallQuery(_task("t/9"), (), "SELECT 1", 0, 0)
    # native is the search with budget k (hand-computed in the test above): k = 2 → [n0, n3]; k = 3 → [n0, n3, n1]
    assert s.native(q, 2) == ["n0", "n3"] and s.native(q, 3) == ["n0", "n3", "n1"]
    assert s.native(RecallQuery(_task("t/3"), (), None, 0, 0), 2) == ["n0", "n1"]  # never the task's own note
    for k in (1, 2, 3, 5, 10):
        ids = s.native(q, k)
        assert len(ids) <= k and set(ids) <= {i for i, _ in items}
    assert [n.retrieval_count for n in s.notes.values()] == [0, 0, 0, 0]  # native counts no retrieval
    shown = split_memory_set(s.recall(q).text)
    assert [i for i, _ in shown] == s.native(q, s.k) == ["n0", "n3", "n1", "n2"]  # default k = 5: equal to recall
    assert all(dict(items)[i] == text for i, text in shown)  # same ids, same texts

"""NaiveRAG (cfjax/peers/naive_rag/): the store is every turn verbatim (no model call), recall is the top-k
turns by cosine of the question (+ draft) — hand-computed with a bag-of-words encoder —, never the task's
own turns; the fixed-store protocol; persistence; a scripted build whose turns carry no EDIT line; one
quick run through the OpenAI client."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cfjax.infra.io import atomic_write_json
from cfjax.llm.prompts import parse_memory_lines, split_memory_set
from cfjax.memory import (Experience, FixedStore, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext,
                          why_not)
from cfjax.peers.common import EmbeddingIndex
from cfjax.peers.naive_rag import NaiveRAGSystem, turn_text
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task

from tests.peers.conftest import openai_system


class _NoCalls:
    """A backbone that must never be called (NaiveRAG makes no model call)."""

    name = "none"

    def call(self, kind, req):  # pragma: no cover - failing is the point
        raise AssertionError(f"NaiveRAG called the backbone ({kind.name})")


class _Words:
    """A bag-of-words encoder over a fixed vocabulary (other words ignored), L2-normalised, so that cosines
    are hand-computable: cos = Σ count products / (‖a‖·‖b‖)."""

    VOCAB = ("alpha", "beta", "gamma", "delta")

    def embed_cached(self, text: str) -> np.ndarray:
        words = text.lower().split()
        v = np.array([words.count(w) for w in self.VOCAB], dtype=np.float64)
        n = np.linalg.norm(v)
        return v / n if n else v


def _task(tid: str, q: str) -> Task:
    return Task(tid, q, "env", "schema", {})


def _system(**kw) -> NaiveRAGSystem:
    return NaiveRAGSystem(SystemContext(_NoCalls(), edits=None, max_attempts=2), **kw)  # type: ignore[arg-type]


def _ids(mem) -> list[str]:
    return [i for i, _ in split_memory_set(mem.text)] if mem is not None else []


def test_registered_as_a_store_in_no_default_rows():
    info = MEMORY_SYSTEMS.get("naive_rag")
    assert info.runners == ("upliftmem", "compare") and info.defaults == ()
    assert not any(info.default_in(r) for r in ("upliftmem", "compare", "countermem", "antipersist"))
    assert "MemSyco fixed store" in why_not(info, "countermem") and "compare --methods naive_rag" in \
        why_not(info, "antipersist")
    s = _system()
    assert isinstance(s, MemorySystem) and isinstance(s, FixedStore)


def test_the_store_is_every_turn_verbatim_without_a_model_call():
    a, b = _task("t/a", "How many rows?"), _task("t/b", "List names")
    s = _system()
    s.build([Experience(a, (Attempt("SELECT 1", "wrong count", 0.0), Attempt("SELECT COUNT(*) FROM t", "ok", 1.0)),
                        True, 7),
             Experience(b, (Attempt("SELECT name FROM p", "missing DISTINCT", 0.2),), False, 8),
             Experience(_task("t/c", "nothing"), (), False, 9)])  # no attempt: no turn
    assert s.export_items() == [
        ("turn0", "Task: How many rows?\nAction: SELECT 1\nFeedback: wrong count"),
        ("turn1", "Task: How many rows?\nAction: SELECT COUNT(*) FROM t\nFeedback: ok"),
        ("turn2", "Task: List names\nAction: SELECT name FROM p\nFeedback: missing DISTINCT")]
    assert s.ctx.ledger.total.llm_calls == 0
    assert s.summary() == {"turns": 3, "tasks": 2, "episodes": 2}
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(Experience(a, (Attempt("x", "y", 0.0),), False, 1))
    s.unfreeze()
    s.update(Experience(a, (Attempt("x", "y", 0.0),), False, 1))
    assert s.export_items()[-1] == ("turn3", turn_text(a, "x", "y"))


def _crafted(k: int = 5) -> NaiveRAGSystem:
    s = _system(k=k)
    s.index = EmbeddingIndex(_Words())  # type: ignore[arg-type]
    s.build([Experience(_task("t/a", "alpha beta"), (Attempt("x", "wrong", 0.0),), False, 0),     # turn0: α β
             Experience(_task("t/b", "alpha gamma"), (Attempt("gamma", "ok", 1.0),), True, 1),   # turn1: α γ γ
             Experience(_task("t/c", "delta delta"), (Attempt("x", "ok", 1.0),), True, 2),        # turn2: δ δ
             Experience(_task("t/d", "beta"), (Attempt("beta beta", "ok", 1.0),), True, 3)])      # turn3: β β β
    return s


def test_recall_is_top_k_by_cosine_of_question_and_draft_never_the_tasks_own():
    s = _crafted()
    # query t/a "alpha beta" = (1, 1, 0, 0)/√2: cos(turn0) = 1 (its own: skipped); turn3 = (0, 3, 0, 0)/3 → 1/√2
    # = 0.707; turn1 = (1, 0, 2, 0)/√5 → 1/√10 = 0.316; turn2 = (0, 0, 0, 2)/2 → 0
    q = RecallQuery(_task("t/a", "alpha beta"), (), None, 0, 0)
    sims = {i: s.index.similarity("alpha beta", i) for i in s.turns}
    assert sims["turn0"] == pytest.approx(1.0) and sims["turn3"] == pytest.approx(1 / math.sqrt(2))
    assert sims["turn1"] == pytest.approx(1 / math.sqrt(10)) and sims["turn2"] == pytest.approx(0.0)
    assert s.native(q, 2) == ["turn3", "turn1"]
    assert _ids(s.recall(q)) == ["turn3", "turn1", "turn2"]  # k = 5 but only 3 turns are not t/a's
    # with the draft "gamma gamma gamma": query (1, 1, 3, 0)/√11; turn1 → (1 + 6)/(√11·√5) = 7/√55 = 0.944,
    # turn3 → 3/(√11·3) = 1/√11 = 0.302, turn2 → 0: the order flips
    qd = RecallQuery(_task("t/a", "alpha beta"), (), "gamma gamma gamma", 0, 0)
    assert s.index.similarity("alpha beta\ngamma gamma gamma", "turn1") == pytest.approx(7 / math.sqrt(55))
    assert s.native(qd, 2) == ["turn1", "turn3"]
    # another task sees t/a's turn first (cos 1), and never its own
    assert s.native(RecallQuery(_task("t/d", "alpha beta"), (), None, 0, 0), 5) == ["turn0", "turn1", "turn2"]
    assert _system().recall(q) is None  # an empty store shows nothing


def test_fixed_store_exports_what_recall_shows_and_native_is_the_same_top_k():
    s = _system()  # the harness's hashed encoder
    for i in range(9):
        t = _task(f"t/{i % 3}", f"count the rows of table {i} at least")
        s.update(Experience(t, (Attempt(f"SELECT COUNT(*) FROM t{i}", f"feedback {i}", 0.0),), False, i))
    s.freeze()
    items = s.export_items()
    assert [i for i, _ in items] == [f"turn{i}" for i in range(9)]
    q = RecallQuery(_task("t/0", "count the rows of table 4 at least"), (), "SELECT COUNT(*) FROM t4", 0, 0)
    shown = split_memory_set(s.recall(q).text)
    assert [i for i, _ in shown] == s.native(q, s.k) and len(shown) == 5  # default k = 5: equal to recall
    assert shown[0][0] == "turn4" and all(dict(items)[i] == text for i, text in shown)  # same ids, same texts
    for k in (1, 3, 5, 10):
        ids = s.native(q, k)
        # 6 turns are not t/0's (turn0, turn3, turn6 are): min(k, 6) of them, one ranking cut at k
        assert len(ids) == min(k, 6) and set(ids) <= set(dict(items)) and ids == s.native(q, 10)[:k]
        assert not {"turn0", "turn3", "turn6"} & set(ids)


def test_save_load_round_trip_and_bad_files(tmp_path):
    s = _crafted()
    s.save(tmp_path / "rag.json")
    t = _system()
    t.load(tmp_path / "rag.json")
    assert t.export_items() == s.export_items() and t.summary() == s.summary()
    q = RecallQuery(_task("t/z", "alpha gamma"), (), None, 0, 0)
    assert t.native(q, 5) == _system_like(s).native(q, 5)
    t.update(Experience(_task("t/e", "e"), (Attempt("a", "b", 0.0),), False, 0))
    assert t.export_items()[-1][0] == "turn4"  # ids continue after a load
    atomic_write_json(tmp_path / "bad.json", {"format": "cfjax.peers.naive_rag/1", "turns": [["turn0", "x", "t", 0]],
                                              "next_id": 1})
    with pytest.raises(ValueError, match=r"bad\.json: field 'turns\[0\]'"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "nonext.json", {"format": "cfjax.peers.naive_rag/1", "turns": []})
    with pytest.raises(ValueError, match=r"nonext\.json: field 'next_id'"):
        t.load(tmp_path / "nonext.json")
    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not a cfjax NaiveRAG store"):
        t.load(tmp_path / "other.json")
    assert t.export_items()[-1][0] == "turn4"  # a failed load leaves the store as it was


def _system_like(s: NaiveRAGSystem) -> NaiveRAGSystem:
    """The same turns under the harness's encoder (what a loaded store uses)."""
    out = _system()
    for t in s.turns.values():
        out._add(t)
    return out


def test_scripted_build_stores_turns_with_no_edit_line(sql_suite):
    from cfjax.infra.cache import CachedWorld
    from cfjax.infra.ledger import Ledger
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.memory import build_experience

    bb = ScriptedBackbone(sql_suite.scripted_domain(), ScriptedConfig())
    sp = sql_suite.splits(seed=0, n_val=2)
    s = _system()
    s.build(build_experience(list(sp.build)[:6], backbone=bb, world=CachedWorld(sql_suite.world()),
                             edits=sql_suite.edits, ledger=Ledger("b"), episode0=0, max_attempts=3))
    items = s.export_items()
    assert len(items) >= 6 and s.ctx.ledger.total.llm_calls == 0
    for _, text in items:  # raw turns: nothing the scripted executor would carry onto a draft
        lines = parse_memory_lines(text)
        assert not lines.rules and not lines.fixes and not lines.triggers
        assert not any(line.strip().startswith("EDIT:") for line in text.splitlines())


def test_a_quick_run_through_the_openai_client(sql_suite):
    res, seen = openai_system(sql_suite, "naive_rag", lambda prompt: None)  # NaiveRAG sends no prompt of its own
    assert 0 <= res["success"] <= 100
    assert res["summary"]["turns"] >= 4 and res["summary"]["tasks"] == 4
    assert any("[turn" in p and "Feedback:" in p for p in seen)  # the turns reached the model with the draft

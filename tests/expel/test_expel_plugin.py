"""ExpeL as a memory-system plugin (cfjax/expel/): one registration makes it a row of countermem run and
antipersist run and a method of compare; its store saves, loads and refuses updates while frozen."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cfjax.config import APConfig, quick
from cfjax.experiments.countermem.rows import row_specs
from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task


class _Lessons:
    """A backbone that answers EXPEL_INSIGHT with a fixed lesson (no other call is made here)."""

    name = "lessons"

    def call(self, kind, req):
        from cfjax.types import Usage

        return kind.parse("LESSON: write `a >= 1` instead of `a > 1`.\nEDIT: a > 1 -> a >= 1", req, Usage(3, 4))


def _task(i: int) -> Task:
    return Task(f"t/{i}", f"question {i} at least", "env", "schema", {"cues": ("at least",)})


def test_expel_is_registered_for_three_runners_and_says_why_not_upliftmem():
    info = MEMORY_SYSTEMS.get("expel")
    assert set(info.runners) == {"countermem", "antipersist", "compare"}
    assert "expel" in row_specs() and row_specs()["expel"].table == "table1"
    assert "not a row of upliftmem" in why_not(info, "upliftmem")


def test_store_builds_recalls_freezes_saves_and_loads(tmp_path):
    from cfjax.expel import ExpeLSystem

    ctx = SystemContext(_Lessons(), edits=None, max_attempts=2)  # type: ignore[arg-type]
    s = ExpeLSystem(ctx)
    assert isinstance(s, MemorySystem)
    s.build([Experience(_task(i), (Attempt("a > 1", "wrong", 0.0),), False, i) for i in range(3)])
    assert s.summary() == {"lessons": 3} and ctx.ledger.total.llm_calls == 3
    mem = s.recall(RecallQuery(_task(9), (), "SELECT 1", 0, 0))
    assert mem is not None and mem.kind == "lesson" and "a >= 1" in mem.text
    assert s.recall(RecallQuery(_task(0), (), "x", 0, 0)) is not None  # another task's lesson, never its own
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(Experience(_task(5), (), False, 5))
    s.save(tmp_path / "expel.json")
    t = ExpeLSystem(ctx)
    t.load(tmp_path / "expel.json")
    assert t.memory.lessons == s.memory.lessons and t.memory.sources == s.memory.sources
    (tmp_path / "raw.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="corrupt file"):  # not even a checksummed cfjax file
        t.load(tmp_path / "raw.json")
    from cfjax.infra.io import atomic_write_json

    atomic_write_json(tmp_path / "bad.json", {"format": "other"})
    with pytest.raises(ValueError, match="not an ExpeL store"):
        t.load(tmp_path / "bad.json")


@pytest.mark.slow
def test_expel_is_a_row_of_antipersist_run_and_a_method_of_compare(tmp_path):
    from cfjax.experiments.antipersist.runner import run_all
    from cfjax.experiments.compare import CompareConfig, run_compare

    ap = dataclasses.replace(quick(APConfig()), iterations=1, tasks_per_iteration=6, max_eval_tasks=6,
                             seeds=(42,), split_seeds=(12345,))
    res = run_all(tmp_path / "ap", suites=["sql"], rows=("no_memory", "expel"), cfg=ap, log=lambda s: None)
    row = res["suites"]["sql"]["rows"]["expel"]
    assert 0.0 <= row["final_success"] <= 100.0 and row["provenance"] is None
    cfg = dataclasses.replace(CompareConfig.quick(), max_tasks=8)
    payload = run_compare(tmp_path / "cmp", suites=["sql"], cfg=cfg, log=lambda s: None, only=["expel"])
    assert payload["rows"] == ["none", "countermem", "expel"]
    assert "expel - none" in payload["summary"]["differences"]
    assert payload["summary"]["costs"]["expel"]["train_llm_calls"] > 0  # insights counted in the ledger

"""CounterMem in your own agent loop (README.md, "Python API"): the README example, run exactly as
written, and the facade's contract (:class:`cfjax.countermem.CounterMemory`)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from cfjax import Outcome
from cfjax.countermem import CounterMemory, Expansion, MemoryStore, skip_policy, top1_policy
from cfjax.llm import DRAFT_ACTION, DraftRequest, ScriptedBackbone

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example(marker: str) -> tuple[str, str]:
    """``(code, output)``: the ```python block right after the line ``<!-- example: MARKER -->`` of
    README.md and the plain ``` block after it (what the code prints)."""
    m = re.search(r"^<!-- example: %s -->\n```python\n(.*?)^```\n.*?^```\n(.*?)^```" % re.escape(marker),
                  README.read_text("utf-8"), re.S | re.M)
    assert m, f"README.md has no example marked {marker!r} followed by its output"
    return m.group(1), m.group(2)


def test_the_readme_example_builds_a_verified_record_and_revises_a_new_task(tmp_path, monkeypatch, capsys):
    code, shown = readme_example("countermem-own-loop")
    assert len(code.rstrip("\n").split("\n")) <= 20
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's mkdtemp lands here
    ns: dict = {"__name__": "__readme__"}
    exec(compile(code, "README.md:countermem-own-loop", "exec"), ns)
    printed = capsys.readouterr().out
    assert printed == shown, "README.md shows another output than its example prints"
    memory, evaluate, task, a, b = ns["memory"], ns["evaluate"], ns["task"], ns["a"], ns["b"]
    try:
        assert len(memory) >= 1 and f"{len(memory)} verified records" in printed
        assert all(r.delta > 0 for r in memory.records)  # every record is a verified improvement
        assert task.task_id in {t.task_id for t in ns["splits"].eval}  # a new task, never built from
        assert b != a and evaluate(task, b).score > evaluate(task, a).score
        assert not evaluate(task, a).solved
        rec = ns["rec"]
        assert rec.source_task != task.task_id
        _, before, after = memory.edits.diff_units(a, b)  # the record's edit, carried onto this draft
        sig = memory.edits.signature
        assert (sig(before.text), sig(after.text)) == (sig(rec.unit_before), sig(rec.unit_after))
        assert f"draft   {a}" in printed and f"revised {b}" in printed
    finally:
        evaluate.__self__.close()


@pytest.fixture(scope="module")
def llm(suite):
    return ScriptedBackbone(suite.scripted_domain())


def _draft(llm, task):
    return llm.call(DRAFT_ACTION, DraftRequest(task)).action


def _memory_with_records(suite, world, llm, **kw) -> CounterMemory:
    memory = CounterMemory(llm, world, suite.edits, envs=suite.envs(), **kw)
    for task in suite.splits(seed=0).build[:60]:
        memory.learn(task, _draft(llm, task))
    assert len(memory) >= 1
    return memory


def test_a_callable_evaluator_builds_the_same_store_as_the_world(suite, world, llm):
    calls = []

    def evaluate(task, action):
        calls.append(task.task_id)
        return world.evaluate(task, action)

    by_world = _memory_with_records(suite, world, llm)
    by_callable = CounterMemory(llm, evaluate, suite.edits, envs=suite.envs())
    for task in suite.splits(seed=0).build[:60]:
        by_callable.learn(task, _draft(llm, task))
    assert calls, "the callable was never asked"
    assert [r.improved for r in by_callable.records] == [r.improved for r in by_world.records]
    assert by_callable.ledger.total.eval_calls == len(calls)


def test_learn_does_nothing_on_a_solved_action_and_refuses_a_bad_evaluator(suite, world, llm):
    task = suite.splits(seed=0).build[0]
    memory = CounterMemory(llm, world, suite.edits)
    solved = Outcome(1.0, True, True, "ok")
    assert memory.learn(task, "SELECT 1", solved) == Expansion() and len(memory) == 0
    with pytest.raises(TypeError, match="Outcome"):
        CounterMemory(llm, lambda t, a: 1.0, suite.edits).learn(task, "SELECT 1")
    with pytest.raises(TypeError, match="World or a callable"):
        CounterMemory(llm, 3, suite.edits)


def test_recall_filters_by_condition_and_source_and_revise_uses_the_top_record(suite, world, llm):
    memory = _memory_with_records(suite, world, llm)
    for task in suite.splits(seed=0).eval[:40]:
        draft = _draft(llm, task)
        recalled = memory.recall(task, draft)
        assert len(recalled) <= memory.config.retrieval.k
        eligible = set(memory.store.eligible(task))
        assert all(r.record.record_id in eligible and r.record.source_task != task.task_id for r in recalled)
        assert [r.score for r in recalled] == sorted((r.score for r in recalled), reverse=True)
        if not recalled:
            assert memory.revise(task, draft) == draft


def test_a_selector_decides_whether_memory_is_used(suite, world, llm):
    memory = _memory_with_records(suite, world, llm)
    top1 = CounterMemory(llm, world, suite.edits, envs=suite.envs(), selector=top1_policy, store=memory.store)
    skip = CounterMemory(llm, world, suite.edits, envs=suite.envs(), selector=skip_policy, store=memory.store)
    changed = 0
    for task in suite.splits(seed=0).eval[:40]:
        draft = _draft(llm, task)
        assert skip.revise(task, draft) == draft
        revised = top1.revise(task, draft)
        changed += revised != draft
    assert changed >= 1
    with pytest.raises(ValueError, match="invalid slot"):
        bad = CounterMemory(llm, world, suite.edits, selector=lambda z, m: 7, store=memory.store)
        bad.revise(suite.splits(seed=0).eval[0], "SELECT 1")


def test_save_and_load_round_trip(suite, world, llm, tmp_path):
    memory = _memory_with_records(suite, world, llm)
    path = tmp_path / "store.json"
    memory.save(path)
    again = CounterMemory(llm, world, suite.edits).load(path)
    assert [r.record_id for r in again.records] == [r.record_id for r in memory.records]
    assert isinstance(again.store, MemoryStore)
    task = suite.splits(seed=0).eval[0]
    d = _draft(llm, task)
    assert [r.record.record_id for r in again.recall(task, d)] == [r.record.record_id for r in memory.recall(task, d)]
    again.freeze()
    with pytest.raises(Exception, match="frozen"):
        for t in suite.splits(seed=0).build:
            again.learn(t, _draft(llm, t))

"""Anti-Persistence in your own agent loop (README.md, "Python API"): the README example, run exactly
as written, and the facade's contract (:class:`cfjax.antipersist.GuidanceAgent`)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from cfjax import Attempt, MemoryText, Outcome
from cfjax.antipersist import MODES, APConfig, FrozenMemoryError, Guidance, GuidanceAgent, OutcomeLog
from cfjax.llm import DRAFT_ACTION, DraftRequest, ScriptedBackbone

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example(marker: str) -> tuple[str, str]:
    """``(code, output)``: the ```python block right after the line ``<!-- example: MARKER -->`` of
    README.md and the plain ``` block after it (what the code prints)."""
    m = re.search(r"^<!-- example: %s -->\n```python\n(.*?)^```\n.*?^```\n(.*?)^```" % re.escape(marker),
                  README.read_text("utf-8"), re.S | re.M)
    assert m, f"README.md has no example marked {marker!r} followed by its output"
    return m.group(1), m.group(2)


def _reachable_guidance(obj, seen=None) -> bool:
    """Whether a :class:`Guidance` object is reachable from ``obj`` (its attributes and containers)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return False
    seen.add(id(obj))
    if isinstance(obj, Guidance):
        return True
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
    else:
        items = list(getattr(obj, "__dict__", {}).values())
    return any(_reachable_guidance(x, seen) for x in items)


def test_the_readme_example_synthesizes_guidance_on_demand_and_keeps_only_trajectories_and_outcomes(
        tmp_path, monkeypatch, capsys):
    code, shown = readme_example("antipersist-own-loop")
    assert len(code.rstrip("\n").split("\n")) <= 20
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ns: dict = {"__name__": "__readme__"}
    exec(compile(code, "README.md:antipersist-own-loop", "exec"), ns)
    printed = capsys.readouterr().out
    assert printed == shown, "README.md shows another output than its example prints"
    agent, splits = ns["agent"], ns["splits"]
    try:
        n = len(splits.train)
        assert len(agent.trajectories) == n and len(agent.log) == n - 1  # the first update is never logged
        assert f"{n} trajectories, {n - 1} outcomes" in printed
        counts = agent.mode_counts()
        assert sum(counts.values()) == n - 1 and sum(counts.get(m, 0) > 0 for m in MODES[1:]) >= 2
        assert OutcomeLog(agent.log.path).entries == agent.log.entries  # the log is on disk, append-only
        assert "RULE" in printed  # the new task's guidance, synthesized now
        assert agent.state.abstractions is None and not _reachable_guidance(agent)  # nothing persisted it
    finally:
        ns["evaluate"].__self__.close()


@pytest.fixture(scope="module")
def llm(suite):
    return ScriptedBackbone(suite.scripted_domain())


def _episode(agent, llm, world, task, **kw):
    memory = agent.guidance(task, **kw)
    history = []
    for _ in range(2):
        res = llm.call(DRAFT_ACTION, DraftRequest(task, tuple(history), memory=memory))
        out = world.evaluate(task, res.action)
        history.append(Attempt(res.action, out.feedback, out.score))
        if out.solved:
            break
    return memory, history, out


def test_record_logs_the_chosen_mode_with_the_protocol_skip_rule(suite, world, llm, tmp_path):
    agent = GuidanceAgent(suite.edits, tmp_path / "log.jsonl", config=APConfig(tasks_per_iteration=5))
    tasks = suite.splits(seed=0).train[:12]
    results, modes = [], []
    for i, task in enumerate(tasks):
        memory, history, out = _episode(agent, llm, world, task)
        assert memory is None or isinstance(memory, MemoryText)
        choice = agent.last_choice(task)
        assert choice.explore and choice.mode in MODES
        if i < 15:  # round-robin for rr_iterations × tasks_per_iteration episodes
            assert choice.branch == "round_robin" and choice.mode == MODES[(i % 5) % len(MODES)]  # position
        modes.append(choice.mode)
        pairs = [(a.action, Outcome(a.score, a.score >= 1.0, True, a.feedback)) for a in history]
        results.append(agent.record(task, pairs if i % 2 else history, out))
        assert agent.last_choice(task) is None
    assert results[0] == "initial_update" and set(results[1:]) == {"logged"}
    assert [e.mode for e in agent.log.entries] == modes[1:]
    assert [e.task_id for e in agent.log.entries] == [t.task_id for t in tasks[1:]]


def test_without_guidance_nothing_is_logged_and_a_frozen_agent_writes_nothing(suite, world, llm, tmp_path):
    agent = GuidanceAgent(suite.edits, tmp_path / "log.jsonl")
    task, other = suite.splits(seed=0).train[:2]
    assert agent.record(task, [Attempt("SELECT 1", "wrong", 0.0)], False) == "not_logged"
    assert len(agent.trajectories) == 1 and len(agent.log) == 0
    agent.freeze()
    with pytest.raises(FrozenMemoryError):
        agent.guidance(other)
    agent.guidance(other, explore=False)  # held-out use: greedy, writes nothing
    assert agent.last_choice(other).branch in ("fallback", "knn_greedy")
    with pytest.raises(FrozenMemoryError):
        agent.record(other, [], True)
    with pytest.raises(TypeError, match="attempt"):
        agent.unfreeze()
        agent.record(other, ["SELECT 1"], True)


def test_an_existing_log_is_extended(suite, world, llm, tmp_path):
    path = tmp_path / "log.jsonl"
    first = GuidanceAgent(suite.edits, path)
    tasks = suite.splits(seed=0).train[:4]
    for task in tasks[:3]:
        _, history, out = _episode(first, llm, world, task)
        first.record(task, history, out)
    again = GuidanceAgent(suite.edits, path)
    assert len(again.log) == 2
    _, history, out = _episode(again, llm, world, tasks[3])
    assert again.record(tasks[3], history, out) == "logged" and len(OutcomeLog(path)) == 3

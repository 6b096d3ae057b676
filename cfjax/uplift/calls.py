"""UpliftMem's own model calls: the memory writer (WRITE_MEMORY) and reviser (REVISE_MEMORY).

papers/upliftmem.md App. B.3 (iterative writing and validation), App. E.4 (W1–W4), App. E.5 (W5).
Each is a :class:`~cfjax.types.CallKind` — template, strict parser, scripted answer — registered in
:data:`cfjax.registry.CALLS` and served by every backbone through ``backbone.call(kind, request)``
(:class:`cfjax.uplift.pool.Writer` makes them), so an OpenAI-compatible model writes memories exactly as
the scripted backbone does.

**Scripted writer.** The trajectory's one-unit lesson (the contrast of the last failed and the final
action; from failures only, a guess: one rule edit of the last failed action; none from a
first-attempt success), scoped by the task's first phrase with ``p_write_scoped`` (else ``ALWAYS``:
over-general), written as one of two linked notes (a trigger or a fix note, tagged by the phrase) with
``p_write_split``, and marked ``SUPERSEDES`` a shown related memory that has the same pattern and a
different fix (an update).

**Scripted reviser.** From the candidate's own validation run: its failure→success contrast when it has
one (scoped by the task's phrase); otherwise an ``ALWAYS`` rule is narrowed to the phrase with
``p_revise_narrow`` and a linked note is merged into one rule; otherwise a new guess.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm import prompts
from cfjax.llm.prompts import render_trajectory as _trajectory_text
from cfjax.llm.prompts import system_line as _system
from cfjax.llm.prompts import truncate
from cfjax.llm.scripted import stable_seed
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, EditError, Task, Usage

__all__ = ["WriteMemoryRequest", "ReviseMemoryRequest", "MemoryResult", "WRITE_MEMORY", "REVISE_MEMORY",
           "render_write_memory", "render_revise_memory", "parse_memory"]


# --------------------------------------------------------------------------- requests and results

@dataclass(frozen=True)
class WriteMemoryRequest:
    """WRITE_MEMORY: one transferable memory from a completed trajectory (UpliftMem App. B.3, E.4).

    ``related`` are memories of the pool similar to the task (``(id, text)``), shown as
    "optional related memories" (W3/W5): a writer may update one of them."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool
    related: Sequence[tuple[str, str]] = ()
    episode: int = 0


@dataclass(frozen=True)
class ReviseMemoryRequest:
    """REVISE_MEMORY: revise a candidate whose validated uplift was not positive (App. B.3, E.5, W5).

    ``trajectory`` is the candidate's own validation run on the source task; the utilities are the
    paired validation's (with and without the candidate)."""

    task: Task
    memory: str
    trajectory: Sequence[Attempt]
    solved: bool
    utility_with: float
    utility_without: float
    revision: int = 1
    related: Sequence[tuple[str, str]] = ()
    episode: int = 0


@dataclass(frozen=True)
class MemoryResult:
    text: str  # "" for none (the reply did not follow the contract, or there is nothing to write)
    usage: Usage
    raw: str = ""



# --------------------------------------------------------------------------- templates and parsers

def _related_text(related: "Sequence[tuple[str, str]]") -> str:
    if not related:
        return "(none)"
    return truncate("\n".join(f"[{mid}] {truncate(t, 'record')}" for mid, t in related), "trajectory")


_MEMORY_CONTRACT = (
    "Reply with\nMEMORY:\n<one short transferable memory>\nEND MEMORY\nor MEMORY: none. Put the concrete change on "
    "one machine-readable line\nRULE <id>: WHEN question contains \"<phrase of this task>\" REPLACE `<unit before>` "
    "WITH `<unit after>`\n(or ALWAYS instead of the WHEN clause if it holds for every task). If the memory updates "
    "a related memory, add a line SUPERSEDES: <its id>. Do not copy task-specific literals that would not "
    "transfer, and never mention tests or the evaluator.")


def render_write_memory(req: "WriteMemoryRequest") -> str:
    """WRITE_MEMORY (UpliftMem App. B.3, E.4 W1–W4): one memory from a completed trajectory."""
    t = req.task
    return (
        f"{_system(t)}\n\n### Task\n{t.question}\n\n### Trajectory ({'solved' if req.solved else 'not solved'})\n"
        f"{_trajectory_text(req.trajectory)}\n\n### Optional related memories\n{_related_text(req.related)}\n\n"
        f"### Instructions\nWrite one memory that would help an agent on similar future tasks. {_MEMORY_CONTRACT}"
    )


def render_revise_memory(req: "ReviseMemoryRequest") -> str:
    """REVISE_MEMORY (App. E.5, W5): revise a candidate that did not give enough uplift."""
    t = req.task
    uplift = req.utility_with - req.utility_without
    return (
        f"{_system(t)}\n\nRevise a memory that did not provide enough uplift on this task.\n\n### Task\n"
        f"{t.question}\n\n### Current memory (latest validated candidate)\n{truncate(req.memory, 'record')}\n\n"
        f"### Agent's actual trajectory with this memory\n{_trajectory_text(req.trajectory)}\n\n### Outcome\n"
        f"- Success: {req.solved}\n- Utility with memory: {req.utility_with:.3f}\n"
        f"- Utility without memory: {req.utility_without:.3f}\n- Uplift: {uplift:+.3f} (target > 0)\n\n"
        f"### Optional related memories\n{_related_text(req.related)}\n\n### Instructions\nContrast the memory's "
        "intended change with the actual trajectory and outcome; keep only what the evidence supports and revise "
        f"the one decision that limited the result. {_MEMORY_CONTRACT}"
    )


_MEMORY_RE = re.compile(r"MEMORY:[ \t]*\n(.*?)\n[ \t]*END MEMORY", re.S)
_MEMORY_NONE_RE = re.compile(r"^\s*MEMORY:\s*none\.?\s*$", re.M | re.I)


def parse_memory(text: str) -> str:
    """The memory between ``MEMORY:`` and ``END MEMORY`` (trimmed, truncated to the record limit);
    ``""`` for ``MEMORY: none`` or a reply that does not follow the contract."""
    if _MEMORY_NONE_RE.search(text):
        return ""
    m = _MEMORY_RE.search(text)
    return truncate(m.group(1).strip(), "record") if m else ""

# --------------------------------------------------------------------------- the scripted simulator's answers

def _lesson_edit(sim, task: Task, traj: list, solved: bool, rng: random.Random) -> tuple[str, str] | None:
    """The one-unit change a trajectory supports: the contrast of the last failed and the final
    (solved) action; from failures only, a *guess* (one rule edit of the last failed action)."""
    ed = sim.edits
    if solved:
        failed = next((a for a in reversed(traj[:-1]) if a.score < 1.0), None)
        d = ed.diff_units(failed.action, traj[-1].action) if failed is not None else None
        return None if d is None else (d[1].text, d[2].text)
    last = traj[-1].action
    try:
        units = ed.units(last)
    except EditError:
        return None
    rules = ed.rule_edits(last, sim.domain.env(task))
    if not rules:
        return None
    i, new = rules[rng.randrange(len(rules))]
    return units[i].text, new

def _memory_text(sim, task: Task, edit: tuple[str, str], cue: str | None, rng: random.Random,
                 related: tuple = (), split: bool = False) -> str:
    before, after = edit
    tag = re.sub(r"\W+", "_", cue).strip("_") if cue else ""
    sup = None
    for mid, text in related:  # an update of a related memory with the same pattern but another fix
        for _, _, b, a in prompts.parse_rule_lines(text):
            if sim.edits.signature(b) == sim.edits.signature(before) and a != after:
                sup = mid
                break
        if sup:
            break
    where = f"when the question says '{cue}'" if cue else "in every task"
    if split and tag:
        if rng.random() < 0.5:
            body = (f"Scope note: {where}, the '{tag}' fix applies.\n" + prompts.render_trigger(tag, cue))
        else:
            body = (f"Fix note '{tag}': write `{after}` instead of `{before}`.\n"
                    + prompts.render_fix(tag, before, after))
    else:
        rid = f"r{stable_seed(task.task_id, before, after) % 100000}"
        body = (f"Lesson: {where}, write `{after}` instead of `{before}`.\n"
                + prompts.render_rule(rid, cue, before, after))
    if sup:
        body += f"\nSUPERSEDES: {sup}"
    return f"MEMORY:\n{body}\nEND MEMORY"

def _write_memory(sim, req) -> str:
    """WRITE_MEMORY (scripted): the trajectory's one-unit lesson (:meth:`_lesson_edit`; none from a
    first-attempt success), scoped by the task's first phrase with ``p_write_scoped`` (else
    ``ALWAYS``: over-general), written as one of two linked notes (a trigger or a fix note, tagged
    by the phrase) with ``p_write_split``, and marked ``SUPERSEDES`` a shown related memory that has
    the same pattern and a different fix (an update)."""
    c = sim.config
    traj = list(req.trajectory)
    if not traj or (req.solved and len(traj) == 1):
        return "MEMORY: none"
    rng = sim.rng("write", req.task.task_id, req.episode)
    edit = _lesson_edit(sim, req.task, traj, req.solved, rng)
    if edit is None:
        return "MEMORY: none"
    cues = list(req.task.attrs.get("cues", ()))
    cue = cues[0] if cues and rng.random() < c.p_write_scoped else None
    split = bool(cues) and rng.random() < c.p_write_split
    return _memory_text(sim, req.task, edit, cue or (cues[0] if split else None), rng, tuple(req.related), split)

def _revise_memory(sim, req) -> str:
    """REVISE_MEMORY (scripted), from the candidate's own validation run: its failure→success
    contrast when it has one (scoped by the task's phrase); otherwise an ``ALWAYS`` rule is narrowed
    to the phrase with ``p_revise_narrow`` and a linked note is merged into one rule; otherwise a new
    guess from the last failed action."""
    c = sim.config
    traj = list(req.trajectory)
    rng = sim.rng("revise_memory", req.task.task_id, req.episode, req.revision, req.memory)
    cues = list(req.task.attrs.get("cues", ()))
    cue = cues[0] if cues else None
    if traj and req.solved and len(traj) > 1:
        edit = _lesson_edit(sim, req.task, traj, True, rng)
        if edit is not None:
            return _memory_text(sim, req.task, edit, cue, rng, tuple(req.related))
    lines = prompts.parse_memory_lines(req.memory)
    if lines.rules and lines.rules[0][1] is None and cue and rng.random() < c.p_revise_narrow:
        _, _, b, a = lines.rules[0]
        return _memory_text(sim, req.task, (b, a), cue, rng, tuple(req.related))
    if lines.fixes and cue:
        _, b, a = lines.fixes[0]
        return _memory_text(sim, req.task, (b, a), cue, rng, tuple(req.related))
    if not traj:
        return "MEMORY: none"
    edit = _lesson_edit(sim, req.task, traj, False, rng)
    return "MEMORY: none" if edit is None else _memory_text(sim, req.task, edit, cue, rng, tuple(req.related))


# --------------------------------------------------------------------------- registration

def _parse_memory_result(text: str, req: object, usage: Usage) -> MemoryResult:
    return MemoryResult(parse_memory(text), usage, text)


#: WRITE_MEMORY (App. B.3, E.4): one memory candidate from a completed trajectory
WRITE_MEMORY: CallKind[WriteMemoryRequest, MemoryResult] = CALLS.register("WRITE_MEMORY", CallKind(
    "WRITE_MEMORY", render_write_memory, _parse_memory_result, _write_memory,
    "one transferable memory from a completed trajectory (UpliftMem writer)"))

#: REVISE_MEMORY (App. B.3, E.5): a revised candidate whose validated uplift was not positive
REVISE_MEMORY: CallKind[ReviseMemoryRequest, MemoryResult] = CALLS.register("REVISE_MEMORY", CallKind(
    "REVISE_MEMORY", render_revise_memory, _parse_memory_result, _revise_memory,
    "revise a memory from its own validation run (UpliftMem reviser)"))

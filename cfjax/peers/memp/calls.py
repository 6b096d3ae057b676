"""MemP's two model calls: MEMP_DISTILL (a workflow from a finished trajectory) and MEMP_ADJUST (refine
a retrieved workflow after the task that used it failed).

Fang et al., *Memp: Exploring Agent Procedural Memory* (2025), §3 (Build: a "script" distilled from the
trajectory by the model; Update: "adjustment" — the model is shown the workflow that was followed and
the failed trajectory and asked why it failed and how to refine it). Repository zjunlp/MemP,
``ProcedureMem/memory.py`` (``build`` with the direct workflow prompt, ``process_trajectory_item_reflect``
calling ``memory_adjust.adjust_memory``). Each is a :class:`~cfjax.types.CallKind` registered in
:data:`cfjax.registry.CALLS`.

Output contract of both calls (one form, so an adjusted workflow parses like a distilled one)::

    WORKFLOW:
    1. <step>
    2. <step>
    LESSON: <the one transferable lesson, or none>
    EDIT: <unit before> -> <unit after>      (only for a concrete one-unit change)

**Scripted handlers** (the simulator's competence; they read only the request). MEMP_DISTILL: the
steps are written from the trajectory without any key (read the question and its cue phrase; write the
action, the solved one quoted; check the feedback), the lesson is :func:`cfjax.llm.extract.lessons_of`
of the trajectory (the one shared model of reading a lesson out of a trajectory: a contrast when
solved after failing, a random rule-edit guess when only failed, nothing for a first-attempt
success). MEMP_ADJUST: the refined workflow keeps the old steps and carries the lesson of the *new*
(failed) trajectory when ``lessons_of`` finds one; otherwise the workflow comes back unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import cue_of, lessons_of, parse_lessons
from cfjax.llm.prompts import action_noun, render_trajectory, system_line, truncate
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["MempCompetence", "COMPETENCE", "DistillRequest", "AdjustRequest", "WorkflowResult", "MEMP_DISTILL",
           "MEMP_ADJUST", "render_distill", "render_adjust", "parse_workflow", "render_workflow"]


@dataclass(frozen=True)
class MempCompetence:
    """The scripted handlers' parameters, fixed before any result was seen; the simulator must not make
    this peer look better or worse than its mechanism. MemP's calls make no draw of their own: every
    lesson comes from :func:`~cfjax.llm.extract.lessons_of` (its seeded ``insight`` stream)."""

    lessons_per_workflow: int = 1  # lessons_of(..., n=1): the same lesson ExpeL's extractor reads
    salt: str = ""  # lessons_of's stream salt: "" → the same trajectory yields the same lesson as every peer


COMPETENCE = MempCompetence()


@dataclass(frozen=True)
class DistillRequest:
    """MEMP_DISTILL: a workflow (script) from one finished trajectory."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool
    episode: int = 0


@dataclass(frozen=True)
class AdjustRequest:
    """MEMP_ADJUST: the stored workflow that was shown for ``task``, and the trajectory that then failed."""

    task: Task
    workflow: str  # the stored workflow body ("" when the memory held only a trajectory)
    trajectory: Sequence[Attempt]
    episode: int = 0


@dataclass(frozen=True)
class WorkflowResult:
    workflow: str  # the workflow body (steps, LESSON and EDIT lines; "" for none)
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


_CONTRACT = ("Reply exactly in this form, nothing else:\nWORKFLOW:\n1. <step>\n2. <step>\n"
             "LESSON: <the one transferable lesson, or none>\n"
             "EDIT: <unit before> -> <unit after>   (only when the lesson is a concrete change of one decision unit)")


def render_distill(req: DistillRequest) -> str:
    """MEMP_DISTILL: distil a reusable workflow from a finished trajectory (MemP's script build)."""
    t = req.task
    return (f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Trajectory ({'solved' if req.solved else 'not solved'})\n"
            f"{render_trajectory(req.trajectory)}\n\n### Instructions\nYou maintain a procedural memory of how "
            "tasks like this one are done. Distil this trajectory into a short, reusable workflow: the few steps "
            "that matter, in order, without details that only hold for this one task. If the trajectory shows "
            "a failed attempt followed by a fix, state the correction as the lesson.\n" + _CONTRACT)


def render_adjust(req: AdjustRequest) -> str:
    """MEMP_ADJUST: the workflow that was followed, the failed trajectory; why did it fail — refine it."""
    t = req.task
    wf = req.workflow.strip() or "(no workflow: the memory held only a past trajectory)"
    return (f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Workflow retrieved from procedural memory and "
            f"followed\n{truncate(wf, 'record')}\n\n### Trajectory that followed it (not solved)\n"
            f"{render_trajectory(req.trajectory)}\n\n### Instructions\nThe task failed although this workflow "
            "was in the prompt. Why did it fail? Refine the workflow so that a task like this one succeeds: keep "
            "the steps that still hold, correct or replace the ones that misled, and state the correction as the "
            "lesson.\n" + _CONTRACT)


_HEADER_RE = re.compile(r"^[ \t]*WORKFLOW:[ \t]*(.*)$", re.M)
_STEP_RE = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(\S.*?)\s*$")


def render_workflow(steps: Sequence[str], lesson: str = "", edit: tuple[str, str] | None = None) -> str:
    """The stored workflow body: numbered steps, then ``LESSON:`` and ``EDIT:`` lines when present."""
    lines = [f"{i}. {s}" for i, s in enumerate(steps, 1)]
    if lesson:
        lines.append(f"LESSON: {lesson}")
        if edit is not None:
            lines.append(f"EDIT: {edit[0]} -> {edit[1]}")
    return "\n".join(lines)


def _steps_of(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if line.strip().startswith(("LESSON:", "EDIT:")):
            continue
        m = _STEP_RE.match(line)
        if m:
            out.append(m.group(1))
    return out


def parse_workflow(text: str) -> tuple[str, bool]:
    """``(workflow body, parse_failed)`` of a reply in the contract: the steps after ``WORKFLOW:`` (an
    inline ``WORKFLOW: <text>`` is one step) and the first lesson with its ``EDIT`` line. A reply with
    neither a ``WORKFLOW:`` nor a ``LESSON:`` line is a parse failure (``""``); ``none`` gives ``""``."""
    m = _HEADER_RE.search(text or "")
    lessons = parse_lessons(text or "")
    if m is None and not lessons:
        return "", True
    steps: list[str] = []
    if m is not None:
        inline = m.group(1).strip()
        if inline and inline.lower().rstrip(".") != "none":
            m_step = _STEP_RE.match(inline)
            steps.append(m_step.group(1) if m_step else inline)
        steps += _steps_of(text[m.end():])
    lesson, edit = lessons[0] if lessons else ("", None)
    return render_workflow(steps, lesson, edit), False


def _parse(text: str, req: object, usage: Usage) -> WorkflowResult:
    body, failed = parse_workflow(text)
    return WorkflowResult(body, usage, text, failed)


def _reply(body: str) -> str:
    return f"WORKFLOW:\n{body}" if body else "WORKFLOW: none\nLESSON: none"


def _scripted_steps(task: Task, trajectory: Sequence[Attempt], solved: bool) -> list[str]:
    """Steps a model writes from the trajectory alone (no key): the cue to read, the action, the check."""
    cue = cue_of(task)
    noun = action_noun(task)
    read = f"Read the question and the context; note the phrase '{cue}'." if cue else \
        "Read the question and the context."
    if solved and trajectory:
        write = f"Write the {noun}; the one that solved it was `{' '.join(truncate(trajectory[-1].action, 'action').split())}`."
    else:
        write = f"Write the {noun} in one pass."
    return [read, write, "Check the evaluator's feedback; if it fails, change the one decision unit it points at."]


def _scripted_distill(sim, req: DistillRequest) -> str:
    """A workflow = the scripted steps plus ``Lesson.text()`` of :func:`lessons_of` (module docstring)."""
    found = lessons_of(sim, req.task, req.trajectory, req.solved, req.episode, n=COMPETENCE.lessons_per_workflow,
                       salt=COMPETENCE.salt)
    steps = _scripted_steps(req.task, req.trajectory, req.solved)
    body = render_workflow(steps) if not found else \
        render_workflow(steps, found[0].sentence(), (found[0].before, found[0].after))
    return _reply(body)


def _scripted_adjust(sim, req: AdjustRequest) -> str:
    """The old steps with the lesson of the new (failed) trajectory; no lesson → the workflow unchanged."""
    found = lessons_of(sim, req.task, req.trajectory, False, req.episode, n=COMPETENCE.lessons_per_workflow,
                       salt=COMPETENCE.salt)
    if not found:
        return _reply(req.workflow.strip())
    steps = _steps_of(req.workflow) or _scripted_steps(req.task, req.trajectory, False)
    return _reply(render_workflow(steps, found[0].sentence(), (found[0].before, found[0].after)))


#: MEMP_DISTILL: a workflow (steps + lesson) from one finished trajectory (MemP's script build)
MEMP_DISTILL: CallKind[DistillRequest, WorkflowResult] = CALLS.register("MEMP_DISTILL", CallKind(
    "MEMP_DISTILL", render_distill, _parse, _scripted_distill, "a workflow from a finished trajectory (MemP)"))

#: MEMP_ADJUST: a retrieved workflow refined after the task that followed it failed (MemP's adjustment)
MEMP_ADJUST: CallKind[AdjustRequest, WorkflowResult] = CALLS.register("MEMP_ADJUST", CallKind(
    "MEMP_ADJUST", render_adjust, _parse, _scripted_adjust, "refine a workflow after a failure (MemP)"))

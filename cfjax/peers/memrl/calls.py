"""MemRL's one model call: MEMRL_DISTILL, the script of a memory's *experience* from a finished trajectory.

Zhang et al., *MemRL: Self-Evolving Agents via Runtime Reinforcement Learning on Episodic Memory*
(arXiv:2601.03192, 2026), §3 (memories are intent–experience–utility triplets; the experience is built
MemP-style). Repository MemTensor/MemRL, ``memrl/service/builders.py``: the *proceduralization* build its
configs use stores ``SCRIPT:\\n<script>\\n\\nTRAJECTORY:\\n<trajectory>``, the script written by the LLM
from the trajectory (``generate_script``). A :class:`~cfjax.types.CallKind` registered in
:data:`cfjax.registry.CALLS`.

Output contract::

    SCRIPT:
    1. <step>
    2. <step>
    LESSON: <the one transferable lesson, or none>
    EDIT: <unit before> -> <unit after>      (only for a concrete one-unit change)

**Scripted handler** (reads only the request): fixed steps written from the trajectory (the cue phrase,
the action, the check) plus ``Lesson.text()`` of :func:`cfjax.llm.extract.lessons_of` — the one shared
model of reading a lesson out of a trajectory (contrast when solved after failing, a random rule-edit
guess when only failed, nothing for a first-attempt success), so every peer reads the same lesson.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import cue_of, lessons_of, parse_lessons
from cfjax.llm.prompts import action_noun, render_trajectory, system_line, truncate
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["MemrlCompetence", "COMPETENCE", "ScriptRequest", "ScriptResult", "MEMRL_DISTILL", "render_script_prompt",
           "parse_script"]


@dataclass(frozen=True)
class MemrlCompetence:
    """The scripted handler's parameters, fixed before any result was seen; the simulator must not make
    this peer look better or worse than its mechanism. No draw of its own: the lesson comes from
    :func:`~cfjax.llm.extract.lessons_of` (its seeded ``insight`` stream, salt ``""``)."""

    lessons_per_script: int = 1
    salt: str = ""


COMPETENCE = MemrlCompetence()


@dataclass(frozen=True)
class ScriptRequest:
    """MEMRL_DISTILL: the script of one finished trajectory."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool
    episode: int = 0


@dataclass(frozen=True)
class ScriptResult:
    script: str  # steps, then LESSON / EDIT lines ("" for none)
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


def render_script_prompt(req: ScriptRequest) -> str:
    """MEMRL_DISTILL: a high-level script of how this task was (or was not) done."""
    t = req.task
    return (f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Trajectory ({'solved' if req.solved else 'not solved'})\n"
            f"{render_trajectory(req.trajectory)}\n\n### Instructions\nWrite the experience of this episode as a "
            "high-level script for an episodic memory: the steps that a later agent on a similar task should "
            "follow, in order, and the one correction the trajectory teaches (if an attempt failed and a change "
            "fixed it, or what to avoid if it never succeeded).\nReply exactly in this form, nothing else:\n"
            "SCRIPT:\n1. <step>\n2. <step>\nLESSON: <the one transferable lesson, or none>\n"
            "EDIT: <unit before> -> <unit after>   (only when the lesson is a concrete change of one decision unit)")


_HEADER_RE = re.compile(r"^[ \t]*SCRIPT:[ \t]*(.*)$", re.M)
_STEP_RE = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(\S.*?)\s*$")


def parse_script(text: str) -> tuple[str, bool]:
    """``(script body, parse_failed)``: the numbered steps after ``SCRIPT:`` and the first lesson with its
    ``EDIT`` line; neither a ``SCRIPT:`` nor a ``LESSON:`` line → ``("", True)``."""
    text = text or ""
    m = _HEADER_RE.search(text)
    lessons = parse_lessons(text)
    if m is None and not lessons:
        return "", True
    steps: list[str] = []
    if m is not None:
        rest = [m.group(1)] + text[m.end():].splitlines()
        for line in rest:
            if line.strip().startswith(("LESSON:", "EDIT:")) or line.strip().lower().rstrip(".") in ("", "none"):
                continue
            s = _STEP_RE.match(line)
            if s:
                steps.append(s.group(1))
    lines = [f"{i}. {s}" for i, s in enumerate(steps, 1)]
    if lessons:
        lines.append(f"LESSON: {lessons[0][0]}")
        if lessons[0][1] is not None:
            lines.append(f"EDIT: {lessons[0][1][0]} -> {lessons[0][1][1]}")
    return "\n".join(lines), False


def _parse(text: str, req: ScriptRequest, usage: Usage) -> ScriptResult:
    body, failed = parse_script(text)
    return ScriptResult(body, usage, text, failed)


def _scripted(sim, req: ScriptRequest) -> str:
    """Fixed steps + ``Lesson.text()`` of :func:`lessons_of` (module docstring)."""
    t = req.task
    cue = cue_of(t)
    steps = [f"Read the question; note the phrase '{cue}'." if cue else "Read the question.",
             f"Write the {action_noun(t)}"
             + (f" as it finally passed: `{' '.join(truncate(req.trajectory[-1].action, 'action').split())}`."
                if req.solved and req.trajectory else "."),
             "Run it and, on failure, change the decision unit the feedback points at."]
    found = lessons_of(sim, t, req.trajectory, req.solved, req.episode, n=COMPETENCE.lessons_per_script,
                       salt=COMPETENCE.salt)
    body = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return f"SCRIPT:\n{body}\nLESSON: {found[0].text() if found else 'none'}"


#: MEMRL_DISTILL: the script (steps + lesson) of a memory's experience (MemRL's proceduralization build)
MEMRL_DISTILL: CallKind[ScriptRequest, ScriptResult] = CALLS.register("MEMRL_DISTILL", CallKind(
    "MEMRL_DISTILL", render_script_prompt, _parse, _scripted, "a memory's script from a finished trajectory (MemRL)"))

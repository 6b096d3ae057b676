"""ExpeL's model call: EXPEL_INSIGHT, one lesson from a finished trajectory.

Zhao et al., *ExpeL: LLM Agents Are Experiential Learners* (AAAI 2024), §4.2 (insight extraction);
papers/countermem.md App. D.5 uses a reduced ExpeL: one lesson per source trajectory, nothing checked.
A :class:`~cfjax.types.CallKind` registered in :data:`cfjax.registry.CALLS`.

**Scripted insight** (never executed): from a trajectory that failed and then succeeded, the lesson is
the one-unit contrast of the last failed and the final action; from a trajectory that only failed, a
*guess* (one random rule edit of the last failed action — the extractor cannot check it); a
first-attempt success yields no lesson.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import lessons_of
from cfjax.llm.prompts import render_attrs, render_trajectory as _trajectory_text
from cfjax.llm.prompts import system_line as _system
from cfjax.llm.prompts import truncate
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["InsightRequest", "InsightResult", "EXPEL_INSIGHT", "render_insight", "parse_lesson", "render_lesson"]


@dataclass(frozen=True)
class InsightRequest:
    """EXPEL_INSIGHT: one lesson from a finished trajectory (the ExpeL baseline)."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool
    episode: int = 0


@dataclass(frozen=True)
class InsightResult:
    lesson: str  # "" for none
    usage: Usage
    raw: str = ""


def render_insight(req: "InsightRequest") -> str:
    """EXPEL_INSIGHT: one transferable lesson from a completed attempt (ExpeL baseline)."""
    t = req.task
    traj = _trajectory_text(req.trajectory, empty="")
    return (
        f"{_system(t)}\n\n### Task\n{t.question}\n\n### Trajectory ({'solved' if req.solved else 'not solved'})\n"
        f"{traj}\n\nAttributes of this task (name = value; the same list the CounterMem distiller sees):\n"
        f"{render_attrs(t.attrs)}\n\n### Instructions\nExtract one transferable lesson for future tasks. Reply with\n"
        "LESSON: <the lesson, or none>\nand, if the lesson is a concrete change of one decision unit, a line\n"
        "EDIT: <unit before> -> <unit after>"
    )


_LESSON_RE = re.compile(r"^\s*LESSON:[ \t]*(\S.*?)\s*$", re.M)


def parse_lesson(text: str) -> str:
    """The lesson text plus its ``EDIT:`` line when present; ``""`` for none or a missing line."""
    m = _LESSON_RE.search(text)
    if not m or m.group(1).strip().lower().rstrip(".") == "none":
        return ""
    out = m.group(1)
    for line in text.splitlines():
        if line.strip().startswith("EDIT:") and " -> " in line:
            out += "\n" + line.strip()
            break
    return out


def render_lesson(lesson: str) -> str:
    """How an ExpeL lesson is shown to REVISE_WITH_RECORD (no condition, no evidence: none was checked)."""
    return truncate(f"LESSON (from an earlier task, unchecked): {lesson}", "record")


def _insight(sim, req: InsightRequest) -> str:
    """One lesson from a finished trajectory (ExpeL-style, never executed), by the simulator's one model
    of lesson extraction (:func:`cfjax.llm.extract.lessons_of`, shared by every peer):

    * a failure followed by a success → the contrast of the last failed and
      the final action, when they differ in one unit (what changed);
    * failures only → a *guess*: one rule edit of the last failed action,
      picked at random (the extractor cannot check it);
    * first-attempt success → no lesson.
    """
    found = lessons_of(sim, req.task, req.trajectory, req.solved, req.episode, n=1)
    return f"LESSON: {found[0].text()}" if found else "LESSON: none"


def _parse_insight(text: str, req: InsightRequest, usage: Usage) -> InsightResult:
    return InsightResult(parse_lesson(text), usage, text)


#: EXPEL_INSIGHT: one lesson (and its ``EDIT:`` line when concrete) from a finished trajectory
EXPEL_INSIGHT: CallKind[InsightRequest, InsightResult] = CALLS.register("EXPEL_INSIGHT", CallKind(
    "EXPEL_INSIGHT", render_insight, _parse_insight, _insight, "one lesson from a finished trajectory (ExpeL)"))

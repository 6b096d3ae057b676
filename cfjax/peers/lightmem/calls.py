"""LightMem's two model calls: LIGHTMEM_EXTRACT (a flushed short-term buffer → long-term entries) and
LIGHTMEM_UPDATE (the offline "sleep-time" update of one entry from its later neighbours).

Fang et al., *LightMem: Lightweight and Efficient Memory-Augmented Generation* (2025, arXiv 2510.18866);
repository zjunlp/LightMem: ``src/lightmem/memory/lightmem.py`` (``add_memory`` sends one extraction call
per flushed short-term buffer, its topic segments numbered; ``offline_update_all_entries`` sends one call
per target entry with its candidate sources), ``src/lightmem/memory/prompts.py`` (``UPDATE_PROMPT``: a
JSON object ``{"action": "update" | "delete" | "ignore", "new_memory": ...}``). The prompts below are
written for this task interface (turns are attempts with the evaluator's feedback), not copied.

**Scripted competence** (the simulator; every draw from ``sim.rng("LIGHTMEM_...", ...)``):

* LIGHTMEM_EXTRACT → for each topic segment, the turns of each (task, episode) in it form one
  trajectory, read by the simulator's one model of lesson extraction
  (:func:`cfjax.llm.extract.lessons_of`: a failed → solved contrast, a random guess after failures only,
  nothing for a first-attempt success); each lesson is one entry (``Lesson.text()``), sourced to the
  last turn of its trajectory in the segment. A segment that cuts a trajectory gives the extractor only
  its part: that is the segmentation's effect, not the simulator's.
* LIGHTMEM_UPDATE → a candidate whose text equals the target's (an exact duplicate) → ``delete`` (no
  draw: identical strings); else a candidate with the same ``EDIT`` *before* unit and a different
  *after* (a later, conflicting correction) → ``update`` to that candidate's text (the latest such
  one) with probability :attr:`LightMemCompetence.p_update`, else ``ignore``; anything else → ``ignore``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import lessons_of
from cfjax.llm.prompts import parse_edit_line, truncate
from cfjax.llm.prompts import system_line as _system
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["LightMemCompetence", "COMPETENCE", "Turn", "ExtractRequest", "ExtractResult", "UpdateRequest",
           "UpdateResult", "LIGHTMEM_EXTRACT", "LIGHTMEM_UPDATE", "render_extract", "render_update"]


@dataclass(frozen=True)
class LightMemCompetence:
    """The simulator's competence draws for LightMem's calls. Fixed before any result was seen; the
    simulator must not make this peer look better or worse than its mechanism."""

    #: LIGHTMEM_UPDATE: a later entry correcting the same unit differently is judged an update of the
    #: target (else the model ignores the pair) — a judgement only a real model makes
    p_update: float = 0.8


COMPETENCE = LightMemCompetence()


@dataclass(frozen=True)
class Turn:
    """One turn of the sensory buffer: one attempt of a task with the evaluator's feedback (``final``:
    the feedback said this attempt solved the task). ``text`` is what is embedded and counted."""

    task: Task
    episode: int
    index: int  # 0-based attempt number within its episode
    attempt: Attempt
    final: bool

    @property
    def text(self) -> str:
        return (f"Task: {self.task.question}\nAttempt {self.index + 1}: {self.attempt.action}\n"
                f"Feedback: {self.attempt.feedback}")


@dataclass(frozen=True)
class ExtractRequest:
    """LIGHTMEM_EXTRACT: one flushed short-term buffer — its topic segments, each a tuple of turns."""

    segments: tuple[tuple[Turn, ...], ...]

    def turns(self) -> list[Turn]:
        return [t for seg in self.segments for t in seg]


@dataclass(frozen=True)
class ExtractResult:
    #: ``(turn number (1-based, as numbered in the prompt) or 0 when not given, entry text)``
    entries: tuple[tuple[int, str], ...]
    usage: Usage
    parse_failed: bool = False
    raw: str = ""


@dataclass(frozen=True)
class UpdateRequest:
    """LIGHTMEM_UPDATE: a target entry and the later entries that list it among their nearest
    neighbours with similarity ≥ the score threshold (oldest first)."""

    target_id: str
    target: str
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class UpdateResult:
    action: str  # "update" | "delete" | "ignore"
    new_memory: str
    usage: Usage
    parse_failed: bool = False
    raw: str = ""


# --------------------------------------------------------------------------- LIGHTMEM_EXTRACT
def render_extract(req: ExtractRequest) -> str:
    """The extraction prompt: every turn numbered, grouped by topic segment."""
    turns = req.turns()
    head = _system(turns[0].task) if turns else "You are a careful engineer."
    blocks, n = [], 0
    for k, seg in enumerate(req.segments, 1):
        lines = [f"## Topic segment {k}"]
        for t in seg:
            n += 1
            lines.append(f"[turn {n}] Task: {truncate(t.task.question, 'state')}\n"
                         f"Attempt {t.index + 1}: {truncate(t.attempt.action, 'action')}\n"
                         f"Feedback: {truncate(t.attempt.feedback, 'feedback')}"
                         f"{' (this attempt solved the task)' if t.final else ''}")
        blocks.append("\n".join(lines))
    return (f"{head}\n\nYou maintain the long-term memory of a coding agent (LightMem). Below is a buffer of past "
            "turns, cut into topic segments; each turn is one attempt at a task with the evaluator's feedback.\n\n"
            + "\n\n".join(blocks) +
            "\n\n### Instructions\nExtract the facts worth remembering for future tasks: for each, one short "
            "transferable lesson, and the turn it comes from. Reply with one block per entry:\n"
            "LESSON (turn <n>): <one sentence>\n"
            "EDIT: <unit before> -> <unit after>   (only when the lesson is a concrete change of one decision unit)\n"
            "Reply with exactly NONE when nothing is worth remembering.")


_ENTRY_RE = re.compile(r"^\s*LESSON\s*(?:\(\s*turn\s*(\d+)\s*\))?\s*:[ \t]*(\S.*?)\s*$", re.I)


def _parse_extract(text: str, req: ExtractRequest, usage: Usage) -> ExtractResult:
    entries: list[list] = []
    for line in text.splitlines():
        m = _ENTRY_RE.match(line)
        if m:
            body = m.group(2)
            if body.lower().rstrip(".") != "none":
                n = int(m.group(1)) if m.group(1) else 0
                entries.append([n if 1 <= n <= len(req.turns()) else 0, body, False])
            continue
        s = line.strip()
        if s.startswith("EDIT:") and " -> " in s and entries and not entries[-1][2]:
            b, _, a = s[5:].partition(" -> ")
            if b.strip() and a.strip():
                entries[-1][1] += f"\nEDIT: {b.strip()} -> {a.strip()}"
                entries[-1][2] = True
    failed = not entries and text.strip().upper().rstrip(".") != "NONE"
    return ExtractResult(tuple((n, body) for n, body, _ in entries), usage, failed, text)


def _scripted_extract(sim, req: ExtractRequest) -> str:
    """Each segment's trajectories read by :func:`lessons_of` (module docstring; no draw of its own)."""
    out, n = [], 0
    for seg in req.segments:
        groups: dict[tuple[str, int], list[tuple[int, Turn]]] = {}
        for t in seg:
            n += 1
            groups.setdefault((t.task.task_id, t.episode), []).append((n, t))
        for items in groups.values():
            first = items[0][1]
            traj = [t.attempt for _, t in items]
            solved = items[-1][1].final
            for lesson in lessons_of(sim, first.task, traj, solved, first.episode, n=1):
                out.append(f"LESSON (turn {items[-1][0]}): {lesson.sentence()}\n{lesson.edit_line()}")
    return "\n".join(out) if out else "NONE"


#: LIGHTMEM_EXTRACT: long-term entries from one flushed short-term buffer of topic segments
LIGHTMEM_EXTRACT: CallKind[ExtractRequest, ExtractResult] = CALLS.register("LIGHTMEM_EXTRACT", CallKind(
    "LIGHTMEM_EXTRACT", render_extract, _parse_extract, _scripted_extract,
    "long-term entries extracted from a flushed short-term buffer (LightMem)"))


# --------------------------------------------------------------------------- LIGHTMEM_UPDATE
def render_update(req: UpdateRequest) -> str:
    """The offline-update prompt (after LightMem's UPDATE_PROMPT decision rules; JSON contract)."""
    cands = "\n".join(f"- {truncate(c, 'record')}" for c in req.candidates) or "- (none)"
    return ("You manage the long-term memory of a coding agent (LightMem, offline update). Decide whether the "
            "TARGET memory should be updated, deleted, or ignored, given CANDIDATE memories written later.\n"
            "Rules:\n1. update: the target and the candidates describe the same decision but the candidates refine "
            "or correct it; rewrite the target to integrate them.\n2. delete: the candidates say the same thing "
            "(the target is redundant) or directly contradict it (the later ones take precedence).\n3. ignore: "
            "they are unrelated.\nUse only the text below; change only the target.\n\n"
            f"TARGET memory:\n{truncate(req.target, 'record')}\n\nCANDIDATE memories (oldest first):\n{cands}\n\n"
            'Reply with one JSON object and nothing else: {"action": "update" | "delete" | "ignore", '
            '"new_memory": "<the rewritten target, keeping any EDIT: line; only for update>"}')


_OBJ_RE = re.compile(r"\{.*\}", re.S)


def _parse_update(text: str, req: UpdateRequest, usage: Usage) -> UpdateResult:
    m = _OBJ_RE.search(text)
    try:
        obj = json.loads(m.group(0)) if m else None
    except (json.JSONDecodeError, ValueError):
        obj = None
    if not isinstance(obj, dict):
        return UpdateResult("ignore", "", usage, True, text)
    action = str(obj.get("action", "")).strip().lower()
    new = obj.get("new_memory")
    if isinstance(new, dict):  # the upstream prompt shows new_memory as an object: take its text
        new = " ".join(str(v) for v in new.values())
    new = new.strip() if isinstance(new, str) else ""
    if action == "delete":
        return UpdateResult("delete", "", usage, False, text)
    if action == "update" and new:
        return UpdateResult("update", new, usage, False, text)
    return UpdateResult("ignore", "", usage, action not in ("ignore",), text)


def _norm(s: str) -> str:
    return " ".join(s.split())


def _scripted_update(sim, req: UpdateRequest) -> str:
    """Delete an exact duplicate; update to a later conflicting correction with ``p_update``."""
    if any(_norm(c) == _norm(req.target) for c in req.candidates):
        return json.dumps({"action": "delete"})
    mine = parse_edit_line(req.target)
    if mine is not None:
        conflicts = [c for c in req.candidates
                     if (e := parse_edit_line(c)) is not None and e[0] == mine[0] and e[1] != mine[1]]
        if conflicts:
            if sim.rng("LIGHTMEM_UPDATE", req.target_id, req.target).random() < COMPETENCE.p_update:
                return json.dumps({"action": "update", "new_memory": conflicts[-1]})
    return json.dumps({"action": "ignore"})


#: LIGHTMEM_UPDATE: the sleep-time decision on one entry given its later high-similarity neighbours
LIGHTMEM_UPDATE: CallKind[UpdateRequest, UpdateResult] = CALLS.register("LIGHTMEM_UPDATE", CallKind(
    "LIGHTMEM_UPDATE", render_update, _parse_update, _scripted_update,
    "offline update / delete of one entry from its later neighbours (LightMem)"))


def segment_tokens(seg: Sequence[Turn]) -> int:
    """Tokens of a segment as the short-term buffer counts them (every turn's text)."""
    from cfjax.llm.prompts import count_tokens

    return sum(count_tokens(t.text) for t in seg)

"""AutoRefine's two model calls, as Anti-Persistence App. D.3 specifies its baseline: AUTOREFINE_REWRITE
(three rewrites of the query: strategy / pitfall / actions, §(ii)) and AUTOREFINE_EVOLVE (one contrastive
evolver call over at most four failures and four successes that returns a JSON array of skills, §(iv)).

Qiu et al., *AutoRefine: From Trajectories to Reusable Expertise for Continual LLM Agent Refinement*
(arXiv 2601.22758); papers/anti-persistence.md App. D.3. The evolver's reply is decoded by D.3's
four-stage fallback (direct JSON, fenced block stripped, the last bracketed array, per-object scanning);
each skill must carry a "Why it works" section contrasting success and failure evidence.

**Scripted competence** (the simulator; no draw of its own):

* AUTOREFINE_REWRITE → strategy = the question plus its first cue phrase; pitfall = the question plus
  the feedback of the last failed attempt (the question alone before any); actions = the question plus
  the latest action (the draft under review, else the last attempt). A model would paraphrase; the
  simulator only appends what the request shows.
* AUTOREFINE_EVOLVE → the lessons of the given episodes by the simulator's one model of lesson
  extraction (:func:`cfjax.llm.extract.lessons_of`, one per episode): a failed → solved contrast becomes a
  ``common_mistakes`` skill, a guess after failures only a ``general`` skill; a first-attempt success
  yields nothing. Content is ``Lesson.text()`` plus a "Why it works" line; a JSON array.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import cue_of, lessons_of
from cfjax.llm.prompts import render_trajectory, truncate
from cfjax.llm.prompts import system_line as _system
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["AutoRefineCompetence", "COMPETENCE", "POOLS", "RewriteRequest", "RewriteResult", "EpisodeEvidence",
           "EvolveRequest", "EvolveResult", "AUTOREFINE_REWRITE", "AUTOREFINE_EVOLVE", "render_rewrite",
           "render_evolve", "decode_skill_array"]

#: the three skill pools of D.3 §(ii)
POOLS = ("general", "common_mistakes", "task_type")


@dataclass(frozen=True)
class AutoRefineCompetence:
    """The simulator's competence for AutoRefine's calls. Fixed before any result was seen; the
    simulator must not make this peer look better or worse than its mechanism. It has no probability:
    rewrites append what the request shows, the evolver reads lessons by the shared extractor."""

    lessons_per_episode: int = 1  # AUTOREFINE_EVOLVE: lessons read from each given episode


COMPETENCE = AutoRefineCompetence()


# --------------------------------------------------------------------------- AUTOREFINE_REWRITE
@dataclass(frozen=True)
class RewriteRequest:
    """AUTOREFINE_REWRITE: the task as the agent sees it, its attempts so far and the draft (or None)."""

    task: Task
    history: tuple[Attempt, ...]
    draft: str | None
    episode: int


@dataclass(frozen=True)
class RewriteResult:
    strategy: str
    pitfall: str
    actions: str
    usage: Usage
    parse_failed: bool = False
    raw: str = ""

    def queries(self) -> list[str]:
        return [q for q in (self.strategy, self.pitfall, self.actions) if q]


def render_rewrite(req: RewriteRequest) -> str:
    t = req.task
    hist = render_trajectory(req.history, empty="(no attempts yet)")
    draft = truncate(req.draft, "action") if req.draft else "(none)"
    return (f"{_system(t)}\n\n### Task\n{truncate(t.question, 'state')}\n\n### Attempts so far\n{hist}\n\n"
            f"### Current draft\n{draft}\n\n### Instructions\nRewrite the task description into three search "
            "queries for a library of reusable skills: one emphasising the STRATEGY that solves tasks like this, "
            "one emphasising the PITFALL to avoid, one emphasising the concrete ACTIONS to write. Reply with "
            "exactly three lines:\nSTRATEGY: <query>\nPITFALL: <query>\nACTIONS: <query>")


_LINE_RE = {k: re.compile(rf"^\s*{k}\s*:[ \t]*(\S.*?)\s*$", re.M | re.I) for k in ("STRATEGY", "PITFALL", "ACTIONS")}


def _parse_rewrite(text: str, req: RewriteRequest, usage: Usage) -> RewriteResult:
    got = {k: (m.group(1) if (m := r.search(text)) else "") for k, r in _LINE_RE.items()}
    return RewriteResult(got["STRATEGY"], got["PITFALL"], got["ACTIONS"], usage, not all(got.values()), text)


def _scripted_rewrite(sim, req: RewriteRequest) -> str:
    q = req.task.question
    cue = cue_of(req.task)
    failed = next((a for a in reversed(req.history) if a.score < 1.0), None)
    last = req.draft or (req.history[-1].action if req.history else "")
    one = lambda s: " ".join(s.split())  # noqa: E731 — one line per query
    return (f"STRATEGY: {one(q + (' ' + cue if cue else ''))}\n"
            f"PITFALL: {one(q + (' ' + failed.feedback if failed else ''))}\n"
            f"ACTIONS: {one(q + (' ' + last if last else ''))}")


#: AUTOREFINE_REWRITE: three rewrites of the query (strategy / pitfall / actions), D.3 §(ii)
AUTOREFINE_REWRITE: CallKind[RewriteRequest, RewriteResult] = CALLS.register("AUTOREFINE_REWRITE", CallKind(
    "AUTOREFINE_REWRITE", render_rewrite, _parse_rewrite, _scripted_rewrite,
    "three query rewrites for skill retrieval (AutoRefine, Anti-Persistence App. D.3)"))


# --------------------------------------------------------------------------- AUTOREFINE_EVOLVE
@dataclass(frozen=True)
class EpisodeEvidence:
    """One training episode shown to the evolver: the task, its attempts with feedback, the outcome."""

    task: Task
    attempts: tuple[Attempt, ...]
    solved: bool
    episode: int


@dataclass(frozen=True)
class EvolveRequest:
    """AUTOREFINE_EVOLVE: at most four failures and four sampled successes (numbered in this order)."""

    failures: tuple[EpisodeEvidence, ...]
    successes: tuple[EpisodeEvidence, ...]

    def episodes(self) -> list[EpisodeEvidence]:
        return [*self.failures, *self.successes]


@dataclass(frozen=True)
class EvolveResult:
    #: ``{"title", "pool", "content", "from"}`` dicts (``from``: 1-based episode numbers, maybe empty)
    skills: tuple[dict, ...]
    usage: Usage
    parse_failed: bool = False
    raw: str = ""


def _evidence(n: int, e: EpisodeEvidence) -> str:
    return (f"## Episode {n} ({'SUCCESS' if e.solved else 'FAILURE'})\nTask: {truncate(e.task.question, 'state')}\n"
            f"{render_trajectory(e.attempts)}")


def render_evolve(req: EvolveRequest) -> str:
    eps = req.episodes()
    head = _system(eps[0].task) if eps else "You are a careful engineer."
    body = "\n\n".join(_evidence(i, e) for i, e in enumerate(eps, 1))
    return (f"{head}\n\nYou maintain a library of reusable skills for a coding agent (AutoRefine skill evolver). "
            "Contrast the failed and the successful episodes below and write new skills that would have turned the "
            f"failures into successes.\n\n{body}\n\n### Instructions\nReply with a JSON array only. Each element is "
            '{"title": "<a lower-case slug, e.g. check-boundary-operator>", "pool": "general" | "common_mistakes" | '
            '"task_type", "content": "<the skill; when it is a concrete change of one decision unit, a line '
            'EDIT: <unit before> -> <unit after>; then a section \'Why it works:\' contrasting the success and '
            'failure evidence>", "from": [<episode numbers it is drawn from>]}. Reply [] when nothing is worth keeping.')


_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _skill(obj: object) -> dict | None:
    if not isinstance(obj, dict):
        return None
    content = obj.get("content")
    if not isinstance(content, str) or not content.strip():
        return None
    pool = str(obj.get("pool", "general")).strip().lower().replace(" ", "_")
    src = obj.get("from", [])
    return {"title": str(obj.get("title", "")).strip(), "pool": pool if pool in POOLS else "general",
            "content": content.strip(),
            "from": [int(x) for x in src if isinstance(x, int) and not isinstance(x, bool)] if isinstance(src, list) else []}


def _objects_scan(text: str) -> list[object]:
    """Stage 4: every balanced ``{...}`` that decodes on its own."""
    out, dec, i = [], json.JSONDecoder(), 0
    while (i := text.find("{", i)) != -1:
        try:
            obj, end = dec.raw_decode(text, i)
            out.append(obj)
            i = end
        except json.JSONDecodeError:
            i += 1
    return out


def _last_array(text: str) -> object:
    """Stage 3: the last top-level bracketed array that decodes (nested arrays are skipped over)."""
    dec, i, last = json.JSONDecoder(), 0, None
    while (i := text.find("[", i)) != -1:
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        if isinstance(obj, list):
            last = obj
        i = end
    if last is None:
        raise ValueError("no array")
    return last


def decode_skill_array(text: str) -> tuple[list[dict], bool]:
    """D.3's four-stage fallback: direct parse, fenced block, last bracketed array, per-object scan.
    Returns the valid skills and whether the reply was malformed (no stage gave an array)."""
    stages = [lambda: json.loads(text)]
    stages.append(lambda: json.loads(_FENCE_RE.findall(text)[-1]))
    stages.append(lambda: _last_array(text))
    for stage in stages:
        try:
            arr = stage()
        except (ValueError, IndexError):
            continue
        if isinstance(arr, list):
            return [s for s in map(_skill, arr) if s is not None], False
    objs = [s for s in map(_skill, _objects_scan(text)) if s is not None]
    return objs, not objs


def _parse_evolve(text: str, req: EvolveRequest, usage: Usage) -> EvolveResult:
    skills, failed = decode_skill_array(text)
    return EvolveResult(tuple(skills), usage, failed, text)


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:28].strip("-")


def _scripted_evolve(sim, req: EvolveRequest) -> str:
    out = []
    for n, e in enumerate(req.episodes(), 1):
        for lesson in lessons_of(sim, e.task, e.attempts, e.solved, e.episode, n=COMPETENCE.lessons_per_episode):
            why = ("the successful attempt differs from the failed one exactly here" if lesson.contrast
                   else "this unit was part of a failed attempt; the change is untested")
            kind = "mistake" if lesson.contrast else "guess"
            out.append({"title": f"{kind}-{_slug(lesson.before)}-to-{_slug(lesson.after)}",
                        "pool": "common_mistakes" if lesson.contrast else "general",
                        "content": f"{lesson.text()}\nWhy it works: {why}.", "from": [n]})
    return json.dumps(out)


#: AUTOREFINE_EVOLVE: one contrastive call → a JSON array of skills, D.3 §(iv)
AUTOREFINE_EVOLVE: CallKind[EvolveRequest, EvolveResult] = CALLS.register("AUTOREFINE_EVOLVE", CallKind(
    "AUTOREFINE_EVOLVE", render_evolve, _parse_evolve, _scripted_evolve,
    "contrastive skill evolver over ≤4 failures and ≤4 successes (AutoRefine, Anti-Persistence App. D.3)"))


def evidence_of(items: Sequence) -> tuple[EpisodeEvidence, ...]:
    """Episodes (anything with ``task, attempts, solved, episode``) as evolver evidence."""
    return tuple(EpisodeEvidence(x.task, tuple(x.attempts), bool(x.solved), int(x.episode)) for x in items)

"""Generative Agents' model calls: importance rating, salient questions, insights with evidence
(Park et al., *Generative Agents: Interactive Simulacra of Human Behavior*, UIST 2023, §4.1 "Memory
and Retrieval" (importance: "how poignant…") and §4.2 "Reflection"; repository
joonspk-research/generative_agents, ``reverie/backend_server/persona/cognitive_modules/reflect.py``:
``generate_poig_score``, ``generate_focal_points``, ``generate_insights_and_evidence``).

Three :class:`~cfjax.types.CallKind` s registered in :data:`cfjax.registry.CALLS`, adapted from the
life of a simulated person to a task agent:

* ``GA_IMPORTANCE`` — one rating 1–10 of one memory node (an observation = one attempt with its
  feedback, or a reflection); ``RATING: <n>``. A reply without a rating gives the code's fail-safe
  rating 4 (``get_fail_safe`` of ``run_gpt_prompt_event_poignancy``) and the parse-failure flag;
* ``GA_QUESTIONS`` — the 3 most salient high-level questions about the latest statements (the focal
  points); ``QUESTION: <q>`` lines;
* ``GA_INSIGHTS`` — at most 5 insights about the statements retrieved for one question, each citing
  the numbers of the statements it rests on (``BECAUSE OF: 1, 4``), with an ``EDIT:`` line where the
  insight is a concrete change of one decision unit.

**Scripted competence** (:data:`SCRIPTED`, fixed before any result was seen; the simulator must not
make this peer look better or worse than its mechanism):

* GA_IMPORTANCE is a judgement only a model makes; the simulator draws it from what the node shows:
  an observation of a failed attempt (evaluator score < 1) ~ uniform integer in [5, 8], of a solved one
  in [2, 5], a reflection in [6, 9] (a priori: failures and insights are more poignant than routine
  successes; the ranges overlap so importance does not encode the outcome exactly);
* GA_QUESTIONS asks, for the latest statements' tasks (latest first), what to keep in mind when a
  task says its first cue phrase (:func:`cfjax.llm.extract.cue_of`), distinct cues, at most 3; a task
  without a cue gives a question about its own wording. No draw (only the order of the statements);
* GA_INSIGHTS groups the evidence observations by the trajectory they came from (task and episode),
  in the order they were retrieved, and reads at most one lesson out of each through the simulator's
  one extraction model (:func:`cfjax.llm.extract.lessons_of`) over *only the attempts the evidence
  holds* (a failed attempt whose solving attempt was not retrieved gives a guess; a lone success gives
  nothing); at most 5 insights, each citing its trajectory's statement numbers, its text
  ``Lesson.text()`` (so the ``EDIT`` line is there). Reflection nodes among the evidence hold no
  attempts and give no insight here (a real model may generalise over them).

What a real model must do that the simulator only draws: judge how poignant a memory is for future
work, find the questions that matter in a stream of statements, and infer insights that generalise
beyond the evidence (here: the shared one-unit lesson model, citing the statements it came from).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import cue_of, lessons_of
from cfjax.llm.prompts import system_line
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["Competence", "SCRIPTED", "FAIL_SAFE_IMPORTANCE", "ImportanceRequest", "ImportanceResult",
           "QuestionsRequest", "QuestionsResult", "Evidence", "Insight", "InsightsRequest", "InsightsResult",
           "GA_IMPORTANCE", "GA_QUESTIONS", "GA_INSIGHTS", "render_importance", "render_questions",
           "render_insights", "parse_importance", "parse_questions", "parse_insights"]

#: the code's fail-safe poignancy (``get_fail_safe`` of ``run_gpt_prompt_event_poignancy`` returns 4)
FAIL_SAFE_IMPORTANCE = 4


@dataclass(frozen=True)
class Competence:
    """The simulator's importance ratings (module docstring): inclusive integer ranges."""

    failed_observation: tuple[int, int] = (5, 8)
    solved_observation: tuple[int, int] = (2, 5)
    reflection: tuple[int, int] = (6, 9)


#: fixed before any Generative Agents result was seen; the simulator must not make this peer look better
#: or worse than its mechanism
SCRIPTED = Competence()


# --------------------------------------------------------------------------- GA_IMPORTANCE
@dataclass(frozen=True)
class ImportanceRequest:
    """One node to rate: ``kind`` ``"observation"`` (its task and attempt) or ``"reflection"``."""

    kind: str
    statement: str
    task: Task | None = None
    attempt: Attempt | None = None
    episode: int = 0
    index: int = 0  # the attempt's index in its episode (observations)


@dataclass(frozen=True)
class ImportanceResult:
    rating: int
    usage: Usage
    parse_failed: bool = False
    raw: str = ""


def render_importance(req: ImportanceRequest) -> str:
    head = system_line(req.task) + "\n\n" if req.task is not None else ""
    return (
        f"{head}You keep a memory stream of your work on tasks: observations (an attempt with the "
        "evaluator's feedback) and reflections (insights you drew from them).\n"
        "On the scale of 1 to 10, where 1 is purely mundane (an attempt that passed with nothing new in it) "
        "and 10 is extremely poignant (a failure that exposes a mistake you are likely to repeat, or an "
        "insight that changes how you solve a whole family of tasks), rate the likely poignancy of the "
        f"following memory.\n\n### Memory ({req.kind})\n{req.statement}\n\n### Output\n"
        "Reply with exactly one line:\nRATING: <an integer from 1 to 10>"
    )


_RATING_RE = re.compile(r"^\s*RATING:\s*(\d+)\s*$", re.M)


def parse_importance(text: str) -> tuple[int, bool]:
    """``(rating, parse_failed)``: the ``RATING:`` integer (or a bare integer reply) in 1–10, else the
    fail-safe rating with the flag."""
    m = _RATING_RE.search(text)
    raw = m.group(1) if m else (text.strip() if text.strip().isdigit() else None)
    if raw is not None and 1 <= int(raw) <= 10:
        return int(raw), False
    return FAIL_SAFE_IMPORTANCE, True


def _parse_importance(text: str, req: ImportanceRequest, usage: Usage) -> ImportanceResult:
    rating, failed = parse_importance(text)
    return ImportanceResult(rating, usage, failed, text)


def _scripted_importance(sim, req: ImportanceRequest) -> str:
    """A competence draw from what the node shows (module docstring)."""
    c = SCRIPTED
    if req.kind == "reflection":
        lo, hi = c.reflection
    elif req.attempt is not None and req.attempt.score < 1.0:
        lo, hi = c.failed_observation
    else:
        lo, hi = c.solved_observation
    tid = req.task.task_id if req.task is not None else ""
    rng = sim.rng("GA_IMPORTANCE", req.kind, tid, req.episode, req.index, req.statement)
    return f"RATING: {rng.randint(lo, hi)}"


#: GA_IMPORTANCE: the poignancy 1–10 of one memory node
GA_IMPORTANCE: CallKind[ImportanceRequest, ImportanceResult] = CALLS.register("GA_IMPORTANCE", CallKind(
    "GA_IMPORTANCE", render_importance, _parse_importance, _scripted_importance,
    "importance 1-10 of one memory node (Generative Agents)"))


# --------------------------------------------------------------------------- GA_QUESTIONS
@dataclass(frozen=True)
class QuestionsRequest:
    """The latest statements (oldest first, as the code lists them) and their tasks (latest first)."""

    statements: tuple[str, ...]
    tasks: tuple[Task, ...]
    n: int = 3
    episode: int = 0


@dataclass(frozen=True)
class QuestionsResult:
    questions: tuple[str, ...]
    usage: Usage
    parse_failed: bool = False
    raw: str = ""


def _numbered(statements: Sequence[str]) -> str:
    return "\n".join(f"{i}. " + s.strip().replace("\n", "\n   ") for i, s in enumerate(statements, 1))


def render_questions(req: QuestionsRequest) -> str:
    head = system_line(req.tasks[0]) + "\n\n" if req.tasks else ""
    return (
        f"{head}### Statements (your latest memories of your work on tasks)\n{_numbered(req.statements)}\n\n"
        f"### Instructions\nGiven only the information above, what are the {req.n} most salient high-level "
        "questions we can answer about the subjects in the statements? Good questions ask about recurring "
        "mistakes, the wording of tasks that causes them and how to avoid them.\n\n### Output\n"
        f"Reply with exactly {req.n} lines, one per question:\nQUESTION: <the question>"
    )


_QUESTION_RE = re.compile(r"^\s*(?:\d+[.)]\s*)?QUESTION:[ \t]*(\S.*?)\s*$", re.M)


def parse_questions(text: str, n: int) -> tuple[tuple[str, ...], bool]:
    """``(questions, parse_failed)``: the first ``n`` ``QUESTION:`` lines (``none`` dropped)."""
    qs = [q for q in _QUESTION_RE.findall(text) if q.lower().rstrip(".") != "none"]
    return tuple(qs[:n]), not qs


def _parse_questions(text: str, req: QuestionsRequest, usage: Usage) -> QuestionsResult:
    qs, failed = parse_questions(text, req.n)
    return QuestionsResult(qs, usage, failed, text)


def _scripted_questions(sim, req: QuestionsRequest) -> str:
    """Questions naming the cue phrases of the latest statements' tasks (module docstring; no draw)."""
    out: list[str] = []
    for t in req.tasks:
        cue = cue_of(t)
        q = (f"What should I keep in mind when a task says '{cue}'?" if cue else
             f"What should I keep in mind for a task like: {t.question[:120]}?")
        if q not in out:
            out.append(q)
        if len(out) == req.n:
            break
    return "\n".join(f"QUESTION: {q}" for q in out) or "QUESTION: none"


#: GA_QUESTIONS: the salient questions (focal points) of a reflection
GA_QUESTIONS: CallKind[QuestionsRequest, QuestionsResult] = CALLS.register("GA_QUESTIONS", CallKind(
    "GA_QUESTIONS", render_questions, _parse_questions, _scripted_questions,
    "3 salient questions about the latest memories (Generative Agents reflection)"))


# --------------------------------------------------------------------------- GA_INSIGHTS
@dataclass(frozen=True)
class Evidence:
    """One retrieved node as evidence: its statement and (observations) its task and attempt."""

    statement: str
    task: Task | None = None
    attempt: Attempt | None = None
    index: int = 0  # the attempt's index in its episode
    episode: int = 0


@dataclass(frozen=True)
class Insight:
    """One insight: its text (sentence, and its ``EDIT:`` line when concrete) and the 1-based numbers
    of the statements it cites."""

    text: str
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class InsightsRequest:
    question: str
    evidence: tuple[Evidence, ...]
    n: int = 5
    episode: int = 0


@dataclass(frozen=True)
class InsightsResult:
    insights: tuple[Insight, ...]
    usage: Usage
    parse_failed: bool = False
    raw: str = ""


def render_insights(req: InsightsRequest) -> str:
    task = next((e.task for e in req.evidence if e.task is not None), None)
    head = system_line(task) + "\n\n" if task is not None else ""
    return (
        f"{head}### Statements\n{_numbered([e.statement for e in req.evidence])}\n\n### Instructions\n"
        f"What {req.n} high-level insights can you infer from the above statements that help answer: "
        f"\"{req.question}\"? Cite the numbers of the statements each insight rests on.\n\n### Output\n"
        f"At most {req.n} insights, each as\nINSIGHT: <one sentence>\n"
        "EDIT: <unit before> -> <unit after>   (only when the insight is a concrete change of one decision unit)\n"
        "BECAUSE OF: <statement numbers, comma separated>\nor the single line INSIGHT: none"
    )


_INSIGHT_RE = re.compile(r"^\s*(?:\d+[.)]\s*)?INSIGHT:[ \t]*(\S.*?)\s*$")
_EDIT_RE = re.compile(r"^\s*EDIT:\s*(\S.*?)\s+->\s+(\S.*?)\s*$")
_BECAUSE_RE = re.compile(r"^\s*(?:BECAUSE OF|EVIDENCE):\s*(.*?)\s*$", re.I)


def parse_insights(text: str, n_statements: int, n: int) -> tuple[tuple[Insight, ...], bool]:
    """``(insights, parse_failed)``: at most ``n`` ``INSIGHT`` blocks; citations outside
    1..``n_statements`` are dropped; ``parse_failed`` when there is no ``INSIGHT:`` line at all."""
    blocks: list[list] = []  # [sentence, edit line or None, evidence list]
    seen_any = False
    for line in text.splitlines():
        m = _INSIGHT_RE.match(line)
        if m:
            seen_any = True
            body = m.group(1)
            blocks.append([body, None, []] if body.lower().rstrip(".") != "none" else [None, None, []])
            continue
        if not blocks or blocks[-1][0] is None:
            continue
        e = _EDIT_RE.match(line)
        if e and blocks[-1][1] is None:
            blocks[-1][1] = f"EDIT: {e.group(1)} -> {e.group(2)}"
            continue
        b = _BECAUSE_RE.match(line)
        if b:
            nums = [int(x) for x in re.findall(r"\d+", b.group(1))]
            blocks[-1][2] = list(dict.fromkeys(k for k in nums if 1 <= k <= n_statements))
    out = [Insight(s if ed is None else f"{s}\n{ed}", tuple(ev)) for s, ed, ev in blocks if s is not None]
    return tuple(out[:n]), not seen_any


def _parse_insights(text: str, req: InsightsRequest, usage: Usage) -> InsightsResult:
    ins, failed = parse_insights(text, len(req.evidence), req.n)
    return InsightsResult(ins, usage, failed, text)


def _scripted_insights(sim, req: InsightsRequest) -> str:
    """One lesson per evidence trajectory, over only the attempts the evidence holds (module docstring)."""
    groups: dict[tuple[str, int], list[int]] = {}
    for k, e in enumerate(req.evidence, 1):
        if e.task is not None and e.attempt is not None:
            groups.setdefault((e.task.task_id, e.episode), []).append(k)
    lines: list[str] = []
    n_out = 0
    for nums in groups.values():
        if n_out == req.n:
            break
        ev = sorted((req.evidence[k - 1] for k in nums), key=lambda e: e.index)
        traj = [e.attempt for e in ev]
        solved = traj[-1].score >= 1.0
        found = lessons_of(sim, ev[0].task, traj, solved, ev[0].episode, n=1)
        if not found:
            continue
        lesson = found[0]
        lines += [f"INSIGHT: {lesson.sentence()}", lesson.edit_line(),
                  "BECAUSE OF: " + ", ".join(str(k) for k in sorted(nums))]
        n_out += 1
    return "\n".join(lines) or "INSIGHT: none"


#: GA_INSIGHTS: at most 5 insights citing their evidence statements
GA_INSIGHTS: CallKind[InsightsRequest, InsightsResult] = CALLS.register("GA_INSIGHTS", CallKind(
    "GA_INSIGHTS", render_insights, _parse_insights, _scripted_insights,
    "insights with evidence numbers for one question (Generative Agents reflection)"))

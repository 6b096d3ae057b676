"""MemGPT's model calls: MEMGPT_STEP (one step of the agentic tool loop) and MEMGPT_SUMMARIZE (the
summary that replaces evicted messages).

Packer et al., *MemGPT* (2023) §2.2–2.3 (self-directed memory edits by function calls, chained by
``request_heartbeat``; the memory-pressure warning; recursive summary of evicted messages) and the
repository's ``memgpt/agent.py`` (``summarize_messages_inplace``) and ``memgpt/prompts`` (the summary
prompt). The prompts here are our own wording.

**MEMGPT_STEP.** The prompt shows the core memory blocks (with their sizes and limits), the summary of
evicted messages, the recent messages of the in-context queue and of this turn (event, tool calls, tool
results), the memory statistics, the memory-pressure warning when the context is past the threshold,
and the tool list. The reply is one line ``TOOL: <name>(<JSON object>)`` or ``DONE``. A tool call may
carry ``"request_heartbeat": false`` to end the turn after it (the repository's heartbeat; without it
our loop continues until ``DONE`` or its step limit, since our turns have no user to return to).

**Scripted competence** (:data:`COMPETENCE`; never reads an answer key, only the request):

* *memorise* (after a finished episode): the lessons of the trajectory by the simulator's one model of
  lesson extraction (:func:`cfjax.llm.extract.lessons_of`, ``n = COMPETENCE.n_lessons``, the shared
  stream, so the lesson is the one every peer reads); per lesson, one ``archival_memory_insert`` of
  ``Lesson.text()``, then with ``p_core_edit`` a core edit of block ``task_knowledge``: append the
  lesson when it fits, else replace the block's oldest entry by it. Then ``DONE``. Which step is next
  is read off the tool calls already in this turn.
* *recall* (at a decision): with ``p_search`` one ``archival_memory_search`` with the task's question
  (page 0), then ``DONE``; otherwise ``DONE`` at once.

**MEMGPT_SUMMARIZE.** Scripted: an extractive summary (no draw): the earlier summary's first
``summary_keep_chars`` characters, then the first line of each evicted message cut to
``summary_line_chars`` characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from cfjax.llm.extract import lessons_of
from cfjax.llm.prompts import system_line
from cfjax.peers.memgpt.tools import TOOLS, Message, core_entries
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["MemGPTCompetence", "COMPETENCE", "StepRequest", "StepResult", "SummarizeRequest", "SummarizeResult",
           "MEMGPT_STEP", "MEMGPT_SUMMARIZE", "render_step", "render_summarize", "parse_step", "parse_summary",
           "KNOWLEDGE_BLOCK", "PRESSURE_WARNING", "MODES"]

#: the core block the scripted model keeps lessons in (the other default block is ``persona``)
KNOWLEDGE_BLOCK = "task_knowledge"
MODES = ("memorise", "recall")

#: shown in the step prompt when the context is past the warning fraction of its budget (our wording of
#: the repository's ``MESSAGE_SUMMARY_WARNING_STR``)
PRESSURE_WARNING = ("SYSTEM WARNING: memory pressure — the context is {pct}% full ({used} of {budget} tokens). "
                    "The oldest messages will soon be summarised and evicted; save anything important to core "
                    "or archival memory now.")


@dataclass(frozen=True)
class MemGPTCompetence:
    """The scripted model's competence draws for MemGPT (module docstring). Fixed before any result was
    seen; the simulator must not make this peer look better or worse than its mechanism."""

    n_lessons: int = 1  # lessons read per trajectory (the shared extractor's n; ExpeL reads 1 as well)
    p_core_edit: float = 0.5  # memorise: a lesson is also written to core memory (else archival only)
    p_search: float = 0.8  # recall: the model searches archival memory (else it answers from core memory alone)
    summary_line_chars: int = 60  # MEMGPT_SUMMARIZE: characters kept of each evicted message's first line
    summary_keep_chars: int = 300  # MEMGPT_SUMMARIZE: characters kept of the earlier summary


COMPETENCE = MemGPTCompetence()


# --------------------------------------------------------------------------- MEMGPT_STEP
@dataclass(frozen=True)
class StepRequest:
    """One step of the tool loop: everything in the main context (agent-side data only)."""

    task: Task
    mode: str  # "memorise" | "recall"
    core: tuple[tuple[str, str, int], ...]  # (label, value, limit) per block
    summary: str
    history: tuple[Message, ...]  # the in-context queue before this turn
    turn: tuple[Message, ...]  # this turn: the event, then tool calls and results
    trajectory: tuple[Attempt, ...] = ()  # memorise: the finished episode; recall: the earlier attempts
    solved: bool = False  # memorise: whether the episode was solved
    draft: str | None = None  # recall: the memory-free draft of this decision
    episode: int = 0
    attempt: int = 0
    step: int = 0
    max_steps: int = 4
    n_archival: int = 0
    n_recall: int = 0
    warning: str = ""  # the memory-pressure warning, "" below the threshold
    page_size: int = 5  # results per page of the searches (the tool list says it)


@dataclass(frozen=True)
class StepResult:
    """``tool`` is ``None`` for DONE (or an unparseable reply: ``parse_failed``)."""

    tool: str | None
    args: dict[str, Any]
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


def call_line(tool: str, args: dict[str, Any]) -> str:
    """A tool call as the output contract writes it."""
    return f"TOOL: {tool}({json.dumps(args, ensure_ascii=False)})"


def render_step(req: StepRequest) -> str:
    """MEMGPT_STEP: the main context and the tool list; one tool call or DONE."""
    t = req.task
    purpose = ("MEMORISE: an episode has just finished. Save what would help on future tasks (lessons, "
               "corrections that worked) into core or archival memory." if req.mode == "memorise" else
               "RECALL: a decision is being made. Look up what you stored that bears on this task; what you "
               "read in archival memory, with your core memory, will be shown to the agent revising the draft.")
    core = "\n".join(f'<{label} characters="{len(value)}/{limit}">\n{value}\n</{label}>'
                     for label, value, limit in req.core)
    msgs = "\n".join(m.render() for m in req.history) or "(none)"
    turn = "\n".join(m.render() for m in req.turn) or "(none)"
    tools = "\n".join(f"- {name}({sig}): {doc.format(page=req.page_size)}" for name, (sig, doc) in TOOLS.items())
    warn = f"\n\n{req.warning}" if req.warning else ""
    return (
        f"{system_line(t)}\n\nYou manage your own memory with tool calls (MemGPT). Core memory is always in "
        f"context; archival memory and the message history are outside it and reachable only by search.\n\n"
        f"### Mode\n{purpose}\n\n### Core memory\n{core}\n\n### Summary of evicted messages\n"
        f"{req.summary or '(none)'}\n\n### Recent messages\n{msgs}\n\n### This turn (step {req.step + 1} of at most "
        f"{req.max_steps})\n{turn}\n\n### Memory statistics\n{req.n_archival} passages in archival memory, "
        f"{req.n_recall} messages in recall storage.{warn}\n\n### Tools\n{tools}\nEvery tool also accepts "
        '"request_heartbeat": false to end the turn after it runs.\n\n### Output contract\nReply with exactly one '
        "line, either\nTOOL: <tool name>(<JSON object of its arguments>)\nor\nDONE\n(when nothing more is needed)."
    )


_TOOL_RE = re.compile(r"TOOL:\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)", re.S)


def parse_step(text: str) -> tuple[str | None, dict[str, Any], bool]:
    """``(tool or None, args, parse_failed)`` of a step reply: the first line that is ``DONE`` or starts
    with ``TOOL:`` decides; the arguments must be one JSON object (empty parentheses: ``{}``)."""
    lines = [ln.strip().strip("`*").strip() for ln in (text or "").splitlines()]
    for i, line in enumerate(lines):
        if re.fullmatch(r"DONE\.?", line, re.I):
            return None, {}, False
        if line.startswith("TOOL:"):
            rest = "\n".join([line] + lines[i + 1:])
            m = _TOOL_RE.match(line) or _TOOL_RE.match(rest)
            if not m:
                return None, {}, True
            body = m.group(2).strip()
            try:
                args = json.loads(body) if body else {}
            except json.JSONDecodeError:
                return None, {}, True
            if not isinstance(args, dict):
                return None, {}, True
            return m.group(1), args, False
    return None, {}, True


def _parse_step(text: str, req: StepRequest, usage: Usage) -> StepResult:
    tool, args, bad = parse_step(text)
    return StepResult(tool, args, usage, text, bad)


def _done_calls(req: StepRequest) -> int:
    return sum(1 for m in req.turn if m.role == "assistant")


def _scripted_step(sim, req: StepRequest) -> str:
    """The simulator's step (module docstring): a plan read off the request, the next step of it."""
    c = COMPETENCE
    k = _done_calls(req)
    if req.mode == "recall":
        draw = sim.rng("MEMGPT_STEP", req.task.task_id, req.episode, req.attempt, "search").random()
        if k == 0 and draw < c.p_search:
            return call_line("archival_memory_search", {"query": req.task.question, "page": 0})
        return "DONE"
    lessons = lessons_of(sim, req.task, req.trajectory, req.solved, req.episode, n=c.n_lessons)
    plan: list[tuple[str, int]] = []
    for i in range(len(lessons)):
        plan.append(("insert", i))
        if sim.rng("MEMGPT_STEP", req.task.task_id, req.episode, "core", i).random() < c.p_core_edit:
            plan.append(("core", i))
    if k >= len(plan):
        return "DONE"
    what, i = plan[k]
    text = lessons[i].text()
    if what == "insert":
        return call_line("archival_memory_insert", {"text": text})
    value, limit = next(((v, lim) for b, v, lim in req.core if b == KNOWLEDGE_BLOCK), ("", 0))
    if len(f"{value}\n{text}" if value else text) <= limit:
        return call_line("core_memory_append", {"block": KNOWLEDGE_BLOCK, "text": text})
    entries = core_entries(value)
    if not entries:
        return "DONE"
    return call_line("core_memory_replace", {"block": KNOWLEDGE_BLOCK, "old": entries[0], "new": text})


#: MEMGPT_STEP: one step of MemGPT's tool loop (one tool call or DONE)
MEMGPT_STEP: CallKind[StepRequest, StepResult] = CALLS.register("MEMGPT_STEP", CallKind(
    "MEMGPT_STEP", render_step, _parse_step, _scripted_step, "one step of MemGPT's memory tool loop"))


# --------------------------------------------------------------------------- MEMGPT_SUMMARIZE
@dataclass(frozen=True)
class SummarizeRequest:
    """The oldest messages to evict and the summary they are folded into."""

    task: Task
    messages: tuple[Message, ...]
    previous: str = ""
    max_chars: int = 1000


@dataclass(frozen=True)
class SummarizeResult:
    summary: str
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


def render_summarize(req: SummarizeRequest) -> str:
    """MEMGPT_SUMMARIZE: fold the evicted messages (and the earlier summary) into one summary."""
    msgs = "\n".join(m.render() for m in req.messages)
    return (
        f"{system_line(req.task)}\n\nYour context window is full. The messages below are being evicted from it "
        f"(they stay in recall storage, reachable by conversation_search). Write a summary that replaces them "
        f"and the earlier summary in your context: what was tried, what worked, what you stored where.\n\n"
        f"### Earlier summary\n{req.previous or '(none)'}\n\n### Messages being evicted\n{msgs}\n\n"
        f"### Output contract\nReply with one line starting with\nSUMMARY: <the summary, at most {req.max_chars} "
        "characters>"
    )


_SUMMARY_RE = re.compile(r"^\s*SUMMARY:[ \t]*(.*)$", re.M | re.S)


def parse_summary(text: str, max_chars: int = 1000) -> tuple[str, bool]:
    """``(summary, parse_failed)``: the text after ``SUMMARY:`` (cut to ``max_chars``); ``""`` when absent."""
    m = _SUMMARY_RE.search(text or "")
    if not m or not m.group(1).strip():
        return "", True
    return m.group(1).strip()[:max_chars], False


def _parse_summarize(text: str, req: SummarizeRequest, usage: Usage) -> SummarizeResult:
    s, bad = parse_summary(text, req.max_chars)
    return SummarizeResult(s, usage, text, bad)


def _scripted_summarize(sim, req: SummarizeRequest) -> str:
    c = COMPETENCE
    parts = [req.previous[:c.summary_keep_chars]] if req.previous else []
    parts += [(m.text.splitlines() or [""])[0][:c.summary_line_chars] for m in req.messages]
    return "SUMMARY: " + " | ".join(p for p in parts if p)


#: MEMGPT_SUMMARIZE: the summary that replaces the evicted oldest messages
MEMGPT_SUMMARIZE: CallKind[SummarizeRequest, SummarizeResult] = CALLS.register("MEMGPT_SUMMARIZE", CallKind(
    "MEMGPT_SUMMARIZE", render_summarize, _parse_summarize, _scripted_summarize,
    "summary of the messages MemGPT evicts from its context"))

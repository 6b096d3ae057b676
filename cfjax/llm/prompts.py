"""Prompt templates, output parsers and truncation limits (papers/countermem.md App. D.8).

Every backbone sees exactly these strings. Output contracts are line based
and parsed strictly; a reply that does not follow its contract yields an
empty result (no edits, the draft unchanged, an empty condition that
admission rejects) rather than a guess.

Token counting: a real server's reported usage wins; otherwise (and always
for the scripted backbone) :func:`count_tokens` approximates a BPE tokenizer
as one token per word or punctuation mark, plus one per 4 characters beyond
the first 4 of a long word. It is deterministic and needs no downloaded
vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.llm.base import AlternativesRequest, Attempt, DistilRequest, DraftRequest, ReviseRequest

__all__ = [
    "DRAFT_ACTION",
    "GENERATE_LOCAL_ALTERNATIVES",
    "DISTIL_RECORD",
    "REVISE_WITH_RECORD",
    "LIMITS",
    "truncate",
    "count_tokens",
    "render_record",
    "render_draft",
    "render_alternatives",
    "render_distil",
    "render_revise",
    "parse_action",
    "parse_edits",
    "parse_distil",
    "format_action",
]

DRAFT_ACTION = "DRAFT_ACTION"
GENERATE_LOCAL_ALTERNATIVES = "GENERATE_LOCAL_ALTERNATIVES"
DISTIL_RECORD = "DISTIL_RECORD"
REVISE_WITH_RECORD = "REVISE_WITH_RECORD"

#: Characters kept per prompt field before rendering (App. D.8).
LIMITS: dict[str, int] = {
    "state": 2500,
    "action": 2000,
    "feedback": 800,
    "units": 4000,
    "context": 3000,
    "record": 1200,
    "trajectory": 3000,
}

#: Characters of the record budget kept free for its ``APPLIES WHEN`` line.
_CONDITION_RESERVE = 200

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def truncate(text: str, field: str) -> str:
    """Cut ``text`` to ``LIMITS[field]`` characters, marking the cut."""
    return _cut(text, LIMITS[field])


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = " …[truncated]"
    return text[: max(0, limit - len(marker))] + marker


def count_tokens(text: str) -> int:
    """Deterministic BPE-like token estimate (see module docstring)."""
    n = 0
    for tok in _TOKEN_RE.findall(text):
        n += 1 + max(0, (len(tok) - 4 + 3) // 4)
    return n


def _history_text(history: "Sequence[Attempt]") -> str:
    if not history:
        return "(no earlier attempts)"
    parts = []
    for i, a in enumerate(history, 1):
        parts.append(
            f"Attempt {i}:\n{truncate(a.action, 'action')}\n"
            f"Feedback: {truncate(a.feedback, 'feedback')}"
        )
    return truncate("\n".join(parts), "state")


def render_record(
    situation: str,
    unit_before: str,
    unit_after: str,
    original: str,
    improved: str,
    evidence: str,
    condition: str | None,
) -> str:
    """RECORD_RENDER / RECORD_RENDER_NO_CONDITION.

    Both variants render the same fields; the only difference is the
    ``APPLIES WHEN`` clause (``condition=None`` drops it).
    """
    lines = [
        f"SITUATION: {situation}",
        f"EDIT: {unit_before} -> {unit_after}",
        f"ORIGINAL: {original}",
        f"IMPROVED: {improved}",
        f"EVIDENCE: {evidence}",
    ]
    limit = LIMITS["record"]
    body = "\n".join(lines)
    # Shorten without looking at the condition, so that both variants carry
    # identical fields; _CONDITION_RESERVE characters stay free for the
    # APPLIES WHEN line, which therefore survives the final cut.
    room = limit - _CONDITION_RESERVE
    if len(body) > room:
        # keep the contract lines; shorten the long action fields first
        budget = max(80, (room - len(body) + len(original) + len(improved)) // 2)
        lines[2] = f"ORIGINAL: {original[:budget]}"
        lines[3] = f"IMPROVED: {improved[:budget]}"
        body = "\n".join(lines)
        if len(body) > room:
            body = _cut(body, room)
    if condition is not None:
        body += f"\nAPPLIES WHEN: {condition or 'none'}"
    return truncate(body, "record")


_SYSTEM = "You are an agent that writes SQL queries for SQLite databases."


def render_draft(req: "DraftRequest") -> str:
    t = req.task
    return (
        f"{_SYSTEM}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Earlier attempts\n{_history_text(req.history)}\n\n"
        "### Instructions\nWrite one action that answers the task. Reply with\n"
        "ACTION:\n```sql\n<your query>\n```"
    )


def render_alternatives(req: "AlternativesRequest") -> str:
    t = req.task
    units = truncate("\n".join(f"[{i}] {u}" for i, u in enumerate(req.units)), "units")
    return (
        f"{_SYSTEM}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Failed action\n{truncate(req.action, 'action')}\n\n"
        f"### Evaluator feedback\n{truncate(req.feedback, 'feedback')}\n\n### Decision units\n{units}\n\n"
        f"### Instructions\nPropose at most {req.k} local edits. Each edit replaces exactly ONE "
        "decision unit; do not write a complete replacement query. One edit per line:\n"
        "EDIT: REPLACE [<unit index>] WITH <new unit text>"
    )


def render_distil(req: "DistilRequest") -> str:
    t = req.task
    return (
        f"{_SYSTEM}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Original action\n{truncate(req.original, 'action')}\n\n"
        f"### Improved action (checked from the same state)\n{truncate(req.improved, 'action')}\n\n"
        f"### Changed decision unit\n{req.unit_before} -> {req.unit_after}\n\n"
        f"### Evidence\n{truncate(req.evidence, 'feedback')}\n\n"
        "### Instructions\nDistil the checked contrast into a reusable record. Reply with two lines:\n"
        "SITUATION: <what went wrong, in general terms>\n"
        "CONDITION: <a requirement of the NEW task that must hold before applying this. It must be "
        "checkable and it must be able to be FALSE for a task that looks similar. Write \"none\" only "
        "if no such requirement exists.>\n"
        "Conditions use: question contains \"<phrase>\", <attribute> = \"<value>\", <attribute> != "
        "\"<value>\", has <attribute>, combined with and / or / not and parentheses."
    )


def render_revise(req: "ReviseRequest") -> str:
    t = req.task
    return (
        f"{_SYSTEM}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Earlier attempts\n{_history_text(req.history)}\n\n"
        f"### Draft action\n{truncate(req.draft, 'action')}\n\n"
        f"### A stored correction from an earlier task\n{truncate(req.record_text, 'record')}\n\n"
        "### Instructions\nRevise the draft only if the correction is useful here; otherwise return "
        "the draft unchanged. Reply with\nACTION:\n```sql\n<your query>\n```"
    )


def format_action(action: str) -> str:
    """The DRAFT_ACTION / REVISE_WITH_RECORD output contract."""
    return f"ACTION:\n```sql\n{action.strip()}\n```"


_FENCE_RE = re.compile(r"```(?:[a-zA-Z0-9_+-]*)\s*\n(.*?)```", re.S)
_ACTION_LINE_RE = re.compile(r"^\s*ACTION:[ \t]*(\S.*)$", re.M)
_EDIT_RE = re.compile(r"^\s*EDIT(?:\s*\d+)?:\s*REPLACE\s*\[(\d+)\]\s*WITH[ \t]*(\S.*?)\s*$", re.M | re.I)


def parse_action(text: str, default: str = "") -> str:
    """The first fenced block after ``ACTION:`` (or any fenced block, or an
    ``ACTION: <query>`` line); ``default`` when none is present."""
    idx = text.find("ACTION:")
    tail = text[idx:] if idx >= 0 else text
    m = _FENCE_RE.search(tail)
    if m and m.group(1).strip():
        return m.group(1).strip()
    m2 = _ACTION_LINE_RE.search(text)
    if m2:
        return m2.group(1).strip()
    return default


def parse_edits(text: str, n_units: int, k: int) -> list[tuple[int, str]]:
    """``EDIT: REPLACE [i] WITH <text>`` lines → ``[(i, text)]``.

    Lines naming a unit outside ``[0, n_units)`` or with an empty replacement
    are dropped; duplicates are dropped; at most ``k`` edits are kept.
    """
    out: list[tuple[int, str]] = []
    if k <= 0:
        return out
    for m in _EDIT_RE.finditer(text):
        i, repl = int(m.group(1)), m.group(2).strip().strip("`").strip()
        if 0 <= i < n_units and repl and (i, repl) not in out:
            out.append((i, repl))
        if len(out) >= k:
            break
    return out


_SIT_RE = re.compile(r"^\s*SITUATION:[ \t]*(\S.*?)\s*$", re.M)
_COND_RE = re.compile(r"^\s*CONDITION:[ \t]*(\S.*?)\s*$", re.M)


def parse_distil(text: str) -> tuple[str, str]:
    """``(situation, condition)``; empty strings where a line is missing.

    ``"none"`` is returned as ``"none"``: the condition parser maps it to the
    empty (universal) condition, an empty string is unparsable and rejected.
    """
    s = _SIT_RE.search(text)
    c = _COND_RE.search(text)
    return (s.group(1) if s else "", c.group(1) if c else "")

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

import functools

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from cfjax.registry import DOMAINS as _REGISTERED_DOMAINS
from cfjax.types import Language

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.types import Attempt, DraftRequest, JudgeRequest, MemoryText, ReviseRequest, Task

__all__ = [
    "DRAFT_ACTION",
    "REVISE_WITH_RECORD",
    "BEST_OF_N_JUDGE",
    "LIMITS",
    "truncate",
    "count_tokens",
    "render_record",
    "render_draft",
    "render_reflections",
    "render_revise",
    "parse_action",
    "format_action",
    "render_judge",
    "parse_choice",
    "render_memory",
    "render_attrs",
    "MEMORY_HEADERS",
    "parse_edit_line",
    "render_rule",
    "parse_rule_lines",
    "parse_rule_sections",
    "FACTUAL_NOTES_HEADER",
    "parse_applied",
    "render_memory_set",
    "split_memory_set",
    "render_trigger",
    "render_fix",
    "parse_memory_lines",
    "MemoryLines",
    "render_trajectory",
    "system_line",
    "action_noun",
    "code_fence",
]

DRAFT_ACTION = "DRAFT_ACTION"
REVISE_WITH_RECORD = "REVISE_WITH_RECORD"
BEST_OF_N_JUDGE = "BEST_OF_N_JUDGE"
#: Characters kept per prompt field before rendering (App. D.8).
LIMITS: dict[str, int] = {
    "state": 2500,
    "action": 2000,
    "feedback": 800,
    "units": 4000,
    "context": 3000,
    "record": 1200,
    "trajectory": 3000,
    "reflection": 400,
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


@functools.lru_cache(maxsize=8192)
def count_tokens(text: str) -> int:
    """Deterministic BPE-like token estimate (see module docstring). Memoised (the same prompt is
    counted once per process however many rows send it)."""
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


def _languages() -> dict[str, Language]:
    """``Task.domain`` (an action language) → its :class:`~cfjax.types.Language`, as the registered domains
    declare them (:attr:`cfjax.types.DomainInfo.languages`; :func:`cfjax.registry.load_plugins` imports
    the domains). Two domains may share a language only with the same texts."""
    out: dict[str, Language] = {}
    owner: dict[str, str] = {}
    for info in _REGISTERED_DOMAINS.values():
        for name, lang in info.languages.items():
            if name in out and out[name] != lang:
                raise ValueError(f"the domains {owner[name]!r} and {info.name!r} declare the action language "
                                 f"{name!r} with different prompt texts")
            out.setdefault(name, lang)
            owner.setdefault(name, info.name)
    return out


def _language(name: str) -> Language:
    """The registered :class:`~cfjax.types.Language` of the action language ``name`` (``Task.domain``).

    Raises:
      ValueError: no registered domain declares ``name`` (the message lists the registered languages).
    """
    langs = _languages()
    try:
        return langs[name]
    except KeyError:
        raise ValueError(f"no registered domain declares the action language {name!r} (Task.domain); "
                         f"registered languages: {', '.join(langs) or 'none'} (domains: "
                         f"{', '.join(_REGISTERED_DOMAINS.names()) or 'none'})") from None


def _system(task: "Task") -> str:
    return _language(task.domain).system


def _fence(task: "Task") -> str:
    return _language(task.domain).fence


def _noun(task: "Task") -> str:
    return _language(task.domain).noun


#: header each kind of :class:`~cfjax.types.MemoryText` is shown under, and the limit field of its text
MEMORY_HEADERS: dict[str, tuple[str, str]] = {
    "record": ("A stored correction from an earlier task", "record"),
    "lesson": ("A lesson from an earlier task (unchecked)", "record"),
    "guidance": ("Guidance synthesized for this task from past trajectories", "trajectory"),
    "trajectories": ("Records of similar past tasks", "trajectory"),
    "memories": ("Relevant memories (reusable experience from earlier tasks; use a memory only where it "
                 "applies to this task)", "trajectory"),
}


def render_memory(memory: "MemoryText") -> str:
    """One piece of memory under its kind's header (every backbone sees it this way)."""
    header, limit = MEMORY_HEADERS[memory.kind]
    return f"### {header}\n{truncate(memory.text, limit)}\n\n"


def render_reflections(reflections: "Sequence[str]") -> str:
    """The Reflexion agent's self-reflections as a prompt block (``""`` when there are none, so a prompt
    without reflections is byte-identical to one from before the field existed)."""
    if not reflections:
        return ""
    body = "\n".join(f"- {truncate(' '.join(r.split()), 'reflection')}" for r in reflections)
    return f"### Reflections on earlier attempts\n{body}\n\n"


def render_draft(req: "DraftRequest") -> str:
    t = req.task
    mem = render_memory(req.memory) if req.memory is not None else ""
    follow = ("Use the guidance above only where it applies to this task; if you follow RULE lines, add a "
              "line APPLIED: <their ids>. " if req.memory is not None else "")
    refl = render_reflections(getattr(req, "reflections", ()))
    return (
        f"{_system(t)}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Earlier attempts\n{_history_text(req.history)}\n\n{refl}{mem}"
        f"### Instructions\n{follow}Write one action that answers the task. Reply with\n"
        f"ACTION:\n```{_fence(t)}\n<your {_noun(t)}>\n```"
    )


def render_attrs(attrs: "Mapping[str, Any]") -> str:
    """The observable attribute vocabulary a condition may use, with this task's values (not the question,
    which conditions test with ``question contains``)."""
    lines = []
    for k in sorted(attrs):
        if k == "question":
            continue
        v = attrs[k]
        if isinstance(v, (tuple, list)):
            v = ", ".join(f'"{x}"' for x in v)
            lines.append(f"  {k} = [{v}]")
        elif isinstance(v, bool):
            lines.append(f"  {k} = {str(v).lower()}")
        elif isinstance(v, (int, float)):
            lines.append(f"  {k} = {v}")
        else:
            lines.append(f'  {k} = "{v}"')
    return "\n".join(lines) if lines else "  (none)"


def render_revise(req: "ReviseRequest") -> str:
    t = req.task
    return (
        f"{_system(t)}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Earlier attempts\n{_history_text(req.history)}\n\n"
        f"### Draft action\n{truncate(req.draft, 'action')}\n\n"
        f"{render_memory(req.memory)}"
        f"### Instructions\nRevise the draft only if the {req.memory.kind} is useful here; otherwise return "
        f"the draft unchanged. Reply with\nACTION:\n```{_fence(t)}\n<your {_noun(t)}>\n```"
    )


def format_action(action: str, domain: str = "sql") -> str:
    """The DRAFT_ACTION / REVISE_WITH_RECORD output contract."""
    fence = _language(domain).fence
    return f"ACTION:\n```{fence}\n{action.strip()}\n```"


def render_judge(req: "JudgeRequest") -> str:
    """BEST_OF_N_JUDGE: choose one of N candidate actions without executing any."""
    t = req.task
    cands = "\n\n".join(f"### Candidate {i}\n{truncate(a, 'action')}" for i, a in enumerate(req.candidates, 1))
    return (
        f"{_system(t)}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Earlier attempts\n{_history_text(req.history)}\n\n{cands}\n\n"
        f"### Instructions\nChoose exactly one candidate {_noun(t)} to submit. Reply with one line:\n"
        f"CHOICE: <n>   (1 ≤ n ≤ {len(req.candidates)})"
    )


_CHOICE_RE = re.compile(r"^\s*CHOICE:\s*(\d+)\s*$", re.M)


def parse_choice(text: str, n: int) -> int | None:
    """The 0-based candidate of the first ``CHOICE: <n>`` line with ``1 ≤ n ≤ N``; ``None`` on a parse
    failure (the caller falls back to candidate 1 and logs it, App. D.5)."""
    m = _CHOICE_RE.search(text)
    if not m:
        return None
    k = int(m.group(1))
    return k - 1 if 1 <= k <= n else None


# --------------------------------------------------------------------------- machine-readable memory lines

_EDIT_LINE_RE = re.compile(r"^\s*EDIT:\s*(.*?)\s+->\s+(.*?)\s*$", re.M)
_RULE_RE = re.compile(
    r'^RULE (\S+): (?:ALWAYS|WHEN question contains "([^"]*)") REPLACE `([^`]*)` WITH `([^`]*)`\s*$', re.M)


def parse_edit_line(text: str) -> tuple[str, str] | None:
    """The ``(before, after)`` of the first ``EDIT: <unit before> -> <unit after>`` line of a record or
    lesson, or ``None``."""
    m = _EDIT_LINE_RE.search(text)
    return (m.group(1).strip(), m.group(2).strip()) if m else None


def render_rule(rule_id: str, cue: str | None, before: str, after: str) -> str:
    """One guidance rule line: ``RULE <id>: ALWAYS|WHEN question contains "<cue>" REPLACE `b` WITH `a```."""
    when = "ALWAYS" if cue is None else f'WHEN question contains "{cue}"'
    return f"RULE {rule_id}: {when} REPLACE `{before}` WITH `{after}`"


_APPLIED_RE = re.compile(r"^\s*APPLIED:[ \t]*(.*?)\s*$", re.M)


def parse_applied(text: str) -> tuple[str, ...]:
    """Rule ids of an ``APPLIED: r1, r2`` line (the guidance rules a reply says it followed)."""
    m = _APPLIED_RE.search(text)
    if not m:
        return ()
    return tuple(x for x in (p.strip() for p in m.group(1).split(",")) if x and x.lower() != "none")


#: The line under which memory lists patterns *noted* in raw past records (not synthesized guidance);
#: the RULE lines after it, up to the next ``## `` header, are notes.
FACTUAL_NOTES_HEADER = "Patterns a reader can note in these records (unverified):"


def parse_rule_sections(text: str) -> list[tuple[str, str | None, str, str, bool]]:
    """``(rule_id, cue or None, before, after, noted)`` of every RULE line, in order; ``noted`` is true
    for lines under :data:`FACTUAL_NOTES_HEADER` (patterns in raw records rather than guidance)."""
    out = []
    noted = False
    for line in text.splitlines():
        s = line.strip()
        if s == FACTUAL_NOTES_HEADER:
            noted = True
            continue
        if s.startswith("## "):
            noted = False
            continue
        m = _RULE_RE.match(s)
        if m:
            out.append((m.group(1), m.group(2) if m.group(2) is not None else None, m.group(3), m.group(4), noted))
    return out


def parse_rule_lines(text: str) -> list[tuple[str, str | None, str, str]]:
    """``(rule_id, cue or None, before, after)`` of every RULE line; other lines are ignored."""
    return [(m.group(1), m.group(2) if m.group(2) is not None else None, m.group(3), m.group(4))
            for m in _RULE_RE.finditer(text)]


_FENCE_RE = re.compile(r"```(?:[a-zA-Z0-9_+-]*)\s*\n(.*?)```", re.S)
_ACTION_LINE_RE = re.compile(r"^\s*ACTION:[ \t]*(\S.*)$", re.M)
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


# --------------------------------------------------------------------------- UpliftMem memory sets

_MEM_HEADER_RE = re.compile(r"^\[(\S+?)\]\s*$")


def render_memory_set(memories: "Sequence[tuple[str, str]]") -> str:
    """The text of an UpliftMem memory set (``MemoryText(kind="memories")``): one block per memory,
    ``[<id>]`` on its own line, then the memory's text, in the order given (App. E.2: ``[{memory_id}]
    {memory_text}``). Set order is the retriever's; the executor sees the whole set."""
    return "\n".join(f"[{mid}]\n{text.strip()}" for mid, text in memories)


def split_memory_set(text: str) -> list[tuple[str, str]]:
    """Inverse of :func:`render_memory_set`: ``[(id, text)]`` in order (text before the first
    header is ignored)."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _MEM_HEADER_RE.match(line.strip())
        if m:
            out.append((m.group(1), []))
        elif out:
            out[-1][1].append(line)
    return [(mid, "\n".join(lines).strip()) for mid, lines in out]


def render_trigger(tag: str, cue: str) -> str:
    """A *trigger note*: ``TRIGGER <tag>: WHEN question contains "<cue>" APPLY FIX <tag>`` — the scope
    half of a lesson written as two linked notes (complementary: useless without its fix note)."""
    return f'TRIGGER {tag}: WHEN question contains "{cue}" APPLY FIX {tag}'


def render_fix(tag: str, before: str, after: str) -> str:
    """A *fix note*: ``FIX <tag>: REPLACE `b` WITH `a``` — the procedure half, which says where it
    applies only through its trigger note."""
    return f"FIX {tag}: REPLACE `{before}` WITH `{after}`"


_TRIGGER_RE = re.compile(r'^TRIGGER (\S+): WHEN question contains "([^"]*)" APPLY FIX (\S+)\s*$', re.M)
_FIX_RE = re.compile(r"^FIX (\S+): REPLACE `([^`]*)` WITH `([^`]*)`\s*$", re.M)
_SUPERSEDES_RE = re.compile(r"^SUPERSEDES:\s*(\S+)\s*$", re.M)


class MemoryLines(NamedTuple):
    """The machine-readable lines of one memory's text (:func:`parse_memory_lines`)."""

    rules: list  # [(rule_id, cue or None, before, after)] — RULE lines
    triggers: list  # [(tag, cue)] — TRIGGER lines
    fixes: list  # [(tag, before, after)] — FIX lines
    supersedes: str | None  # id of the memory this one updates (a SUPERSEDES: line)


def parse_memory_lines(text: str) -> MemoryLines:
    """RULE, TRIGGER, FIX and SUPERSEDES lines of one memory (free text around them is ignored)."""
    sup = _SUPERSEDES_RE.search(text)
    return MemoryLines(parse_rule_lines(text), [(m.group(1), m.group(2)) for m in _TRIGGER_RE.finditer(text)
                                               if m.group(1) == m.group(3)],
                       [(m.group(1), m.group(2), m.group(3)) for m in _FIX_RE.finditer(text)],
                       sup.group(1) if sup else None)


def render_trajectory(trajectory: "Sequence[Attempt]", empty: str = "(no attempts)") -> str:
    """A finished trajectory, attempt by attempt (``empty`` when there is none), within the trajectory limit."""
    return truncate("\n".join(
        f"Attempt {i}: {truncate(a.action, 'action')}\nFeedback: {truncate(a.feedback, 'feedback')}"
        for i, a in enumerate(trajectory, 1)) or empty, "trajectory")


# --------------------------------------------------------------------------- building blocks for the templates
# that memory systems register beside their own code (``cfjax.countermem.calls``, ``cfjax.expel``, ...)

def system_line(task: "Task") -> str:
    """The system line of the task's action language (from its domain's :class:`~cfjax.types.DomainInfo`)."""
    return _system(task)


def action_noun(task: "Task") -> str:
    """What an action of the task's language is called ("query", "function", "encoding")."""
    return _noun(task)


def code_fence(task: "Task") -> str:
    """The code-fence language of the task's actions."""
    return _fence(task)

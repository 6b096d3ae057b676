"""MemGPT's memory tiers and the tools the model edits them with.

Packer et al., *MemGPT: Towards LLMs as Operating Systems* (2023), §2 (main context = system
instructions + working context + FIFO queue; external context = recall storage + archival storage) and
the MemGPT/Letta repository (``memgpt/functions/function_sets/base.py``: ``core_memory_append``,
``core_memory_replace``, ``archival_memory_insert``, ``archival_memory_search``,
``conversation_search``; ``memgpt/constants.py``: ``CORE_MEMORY_*_CHAR_LIMIT = 2000``,
``RETRIEVAL_QUERY_DEFAULT_PAGE_SIZE = 5``).

* :class:`CoreMemory` — named blocks of text, each with a character limit. ``append`` joins with a
  newline (the repository's ``edit_append``; nothing is prefixed to an empty block), ``replace``
  substitutes every occurrence of a non-empty ``old`` (Python ``str.replace``, as the repository); an
  edit whose result would exceed the block's limit is refused with a tool error and changes nothing.
* :class:`Archival` — an append-only list of passages with hashed embeddings
  (:class:`cfjax.peers.common.EmbeddingIndex`); search is cosine, paged by 5 (page 0 first).
* recall storage — every message of the agent's history (``conversation_search``: case-insensitive
  substring match, paged by 5, newest first — the repository's text search over the message log).

:func:`execute` runs one parsed tool call. A bad call (unknown tool, missing or mistyped argument, an
edit over the limit, a write while the memory is frozen — ``memory is read-only``) is a *tool error
result* the model sees, never an exception.

Simplifications: archival passages carry no timestamps; the repository's ``pause_heartbeats`` and
``send_message`` tools are absent (our loop ends with ``DONE``, and nothing is sent to a user).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cfjax.peers.common import EmbeddingIndex

__all__ = ["CoreMemory", "Archival", "Message", "ToolOutcome", "TOOLS", "WRITE_TOOLS", "execute", "core_entries",
           "READ_ONLY"]

#: the tool error a write gets while the memory is frozen
READ_ONLY = "memory is read-only"


@dataclass(frozen=True)
class Message:
    """One message of the agent's history: ``user`` (an event: a finished episode, a decision),
    ``assistant`` (a tool call), ``tool`` (its result)."""

    role: str
    text: str
    task_id: str = ""

    def render(self) -> str:
        return f"[{self.role}] {self.text}"


class ToolError(Exception):
    """A tool call the tool refuses (shown to the model as an error result)."""


@dataclass
class CoreMemory:
    """Named blocks of text, always in context, each at most ``limits[label]`` characters."""

    blocks: dict[str, str]
    limits: dict[str, int]

    def _check(self, label: str, value: str) -> None:
        if len(value) > self.limits[label]:
            raise ToolError(f"edit failed: block '{label}' would have {len(value)} characters, over its limit of "
                            f"{self.limits[label]}; nothing was changed (replace or shorten older lines instead)")

    def _label(self, label: Any) -> str:
        if not isinstance(label, str) or label not in self.blocks:
            raise ToolError(f"no core memory block {label!r} (blocks: {', '.join(self.blocks)})")
        return label

    def append(self, label: Any, text: Any) -> str:
        label = self._label(label)
        if not isinstance(text, str) or not text.strip():
            raise ToolError("core_memory_append needs a non-empty string 'text'")
        old = self.blocks[label]
        new = f"{old}\n{text}" if old else text
        self._check(label, new)
        self.blocks[label] = new
        return f"appended to '{label}' ({len(new)}/{self.limits[label]} characters)"

    def replace(self, label: Any, old: Any, new: Any) -> str:
        label = self._label(label)
        if not isinstance(old, str) or not old:
            raise ToolError("core_memory_replace needs a non-empty string 'old'")
        if not isinstance(new, str):
            raise ToolError("core_memory_replace needs a string 'new' (\"\" deletes)")
        value = self.blocks[label]
        if old not in value:
            raise ToolError(f"old content not found in block '{label}'")
        out = value.replace(old, new)
        self._check(label, out)
        self.blocks[label] = out
        return f"replaced in '{label}' ({len(out)}/{self.limits[label]} characters)"


@dataclass
class Archival:
    """Archival storage: passages ``a1, a2, …`` with their source task, cosine search paged by ``page_size``."""

    page_size: int = 5
    index: EmbeddingIndex = field(default_factory=EmbeddingIndex)
    texts: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def insert(self, text: str, source: str) -> str:
        aid = f"a{len(self.texts) + 1}"
        self.texts[aid] = text
        self.sources[aid] = source
        self.index.add(aid, text)
        return aid

    def search(self, query: str, page: int, keep: Callable[[str], bool] | None = None
               ) -> tuple[list[tuple[str, str]], int]:
        """Page ``page`` (0-based) of the passages ``keep`` accepts by cosine to ``query``, and their total."""
        ranked = self.index.topk(query, len(self.texts), keep=keep)
        lo = page * self.page_size
        return [(aid, self.texts[aid]) for aid, _ in ranked[lo:lo + self.page_size]], len(ranked)

    def __len__(self) -> int:
        return len(self.texts)


def core_entries(value: str) -> list[str]:
    """The entries of a core block: lines grouped so that an entry ends at an ``EDIT:`` line or a blank
    line (a lesson is its sentence and its EDIT line); trailing lines form the last entry."""
    out: list[str] = []
    cur: list[str] = []
    for line in value.splitlines():
        if not line.strip():
            if cur:
                out.append("\n".join(cur))
                cur = []
            continue
        cur.append(line)
        if line.strip().startswith("EDIT:"):
            out.append("\n".join(cur))
            cur = []
    if cur:
        out.append("\n".join(cur))
    return out


#: name → (signature, what it does) as the step prompt lists them
TOOLS: dict[str, tuple[str, str]] = {
    "core_memory_append": ('{"block": str, "text": str}',
                           "add a line at the end of a core memory block (refused past the block's limit)"),
    "core_memory_replace": ('{"block": str, "old": str, "new": str}',
                            "replace exact text in a core memory block (new = \"\" deletes it)"),
    "archival_memory_insert": ('{"text": str}', "store a passage in archival memory (unlimited, searchable)"),
    "archival_memory_search": ('{"query": str, "page": int}',
                               "semantic search of archival memory, {page} results per page (page 0 first)"),
    "conversation_search": ('{"query": str, "page": int}',
                            "text search of the full message history (recall storage), 5 per page"),
}

#: the tools that write memory (refused while frozen)
WRITE_TOOLS = frozenset({"core_memory_append", "core_memory_replace", "archival_memory_insert"})


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result text, whether it succeeded, and the archival passages it showed (id, text)."""

    text: str
    ok: bool
    shown: tuple[tuple[str, str], ...] = ()


def _page(args: dict) -> int:
    p = args.get("page", 0)
    if p is None:
        return 0
    if isinstance(p, bool) or not isinstance(p, int) or p < 0:
        raise ToolError("'page' must be a non-negative integer")
    return p


def _query(args: dict) -> str:
    q = args.get("query")
    if not isinstance(q, str) or not q.strip():
        raise ToolError("a search needs a non-empty string 'query'")
    return q


def execute(name: str, args: dict, *, core: CoreMemory, archival: Archival, recall: Sequence[Message],
            frozen: bool, task_id: str, on_core_write: Callable[[str], None] | None = None) -> ToolOutcome:
    """Run one tool call (module docstring). ``task_id`` is the source recorded for an insert and the
    task whose own passages a search skips; ``on_core_write(text)`` is told the text a core edit wrote."""
    try:
        if name not in TOOLS:
            raise ToolError(f"unknown tool {name!r} (tools: {', '.join(TOOLS)})")
        if name in WRITE_TOOLS and frozen:
            raise ToolError(READ_ONLY)
        if name == "core_memory_append":
            out = core.append(args.get("block"), args.get("text"))
            if on_core_write:
                on_core_write(str(args["text"]))
            return ToolOutcome(out, True)
        if name == "core_memory_replace":
            out = core.replace(args.get("block"), args.get("old"), args.get("new"))
            if on_core_write and args["new"]:
                on_core_write(str(args["new"]))
            return ToolOutcome(out, True)
        if name == "archival_memory_insert":
            text = args.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ToolError("archival_memory_insert needs a non-empty string 'text'")
            aid = archival.insert(text, task_id)
            return ToolOutcome(f"inserted passage {aid} ({len(archival)} in archival memory)", True)
        if name == "archival_memory_search":
            query, page = _query(args), _page(args)
            hits, total = archival.search(query, page, keep=lambda aid: archival.sources[aid] != task_id)
            return ToolOutcome(_page_text(hits, total, page, archival.page_size), True, tuple(hits))
        query, page = _query(args), _page(args)  # conversation_search
        q = query.lower()
        found = [(f"m{i + 1}", m.render()) for i, m in reversed(list(enumerate(recall))) if q in m.text.lower()]
        hits = found[page * 5:page * 5 + 5]
        return ToolOutcome(_page_text(hits, len(found), page, 5), True)
    except ToolError as e:
        return ToolOutcome(f"ERROR: {e}", False)


def _page_text(hits: list[tuple[str, str]], total: int, page: int, size: int) -> str:
    pages = max(1, math.ceil(total / size))
    if not hits:
        return f"no results on page {page} ({total} matching, {pages} page(s))"
    body = "\n".join(f"[{i}] {t}" for i, t in hits)
    return f"page {page} of {pages} ({len(hits)} of {total} results):\n{body}"

"""MemGPT / Letta as a memory system: an agentic tool loop over core, archival and recall memory.

Packer et al., *MemGPT: Towards LLMs as Operating Systems* (2023) §2 and the MemGPT/Letta repository
(``memgpt/agent.py``: the step loop, the memory-pressure warning, ``summarize_messages_inplace``;
``memgpt/constants.py``: ``MESSAGE_SUMMARY_WARNING_FRAC = 0.75``, ``MESSAGE_SUMMARY_TRUNC_TOKEN_FRAC =
0.75``, ``MESSAGE_SUMMARY_TRUNC_KEEP_N_LAST = 3``, 2,000-character core blocks, search pages of 5).

**The mechanism.** One agent with a persistent main context: core memory blocks (``persona``,
``task_knowledge``; 2,000 characters each), a summary of evicted messages and a FIFO queue of recent
messages; outside it, archival storage (passages, cosine search) and recall storage (every message).
The model edits all of it itself through tool calls (:mod:`cfjax.peers.memgpt.tools`), one call per
MEMGPT_STEP; calls chain up to ``max_steps`` per turn (heartbeats), a turn ends with ``DONE``, a call
with ``request_heartbeat: false``, the step limit or an unparseable reply (counted). Before every
step the context (the rendered step prompt, in :func:`cfjax.llm.prompts.count_tokens` tokens) is
checked against ``context_budget``: past ``warning_frac`` of it the prompt carries the memory-pressure
warning; past the budget the oldest queue messages holding ``trunc_frac`` of the queue's tokens (never
the last ``keep_last`` messages, never the current turn) are summarised by MEMGPT_SUMMARIZE into the
new summary and evicted (they stay in recall storage), repeated while still over and something can go.

For our tasks: after every finished build/training episode (:meth:`update`) a turn runs in
*memorise* mode with the trajectory as its event; at every decision (:meth:`recall`) a turn runs in
*recall* mode with the task, its attempts and the draft as its event. Core and archival memory persist
across tasks; retrieval is the model's own search. The memory set shown with the draft is the core
memory's shown blocks (default ``task_knowledge``), entry by entry, plus every archival passage the
turn's searches returned, each distinct text once. Recall-time calls (steps and summaries) are
evaluation cost (``query.ledger``); memorise-time calls are build cost (``verification=True``).

**Fixed store** (:class:`~cfjax.memory.FixedStore`, the MemSyco protocol of UpliftMem §5.3 / Table 3).
:meth:`~MemGPTSystem.export_items` lists the entries of the shown core blocks (``core.<block>.<i>``, each
distinct text once) and then every archival passage (``a<n>``), ids and texts as a memory set shows
them. :meth:`~MemGPTSystem.native` with budget ``k`` is a recall turn — the model's own search, so it
makes the MEMGPT_STEP calls of a recall turn, charged like recall (``query.ledger``, else
``ctx.ledger``) — with the archival search page size set to ``k`` for that turn only (a view of the same
archival storage; the step prompt's tool list says so), its memory set capped at ``k``
items. Core entries count toward ``k`` and come first: when the core entries alone exceed ``k`` the
first ``k`` are kept and no passage is shown. So ``native(q, page_size)`` is the first ``page_size`` ids
of what recall shows — equal to recall only when the recall turn shows at most ``page_size`` items
(recall itself is uncapped: core entries plus every passage of every page the turn read). It mutates
what a recall turn mutates (module docstring, *Frozen*), plus the ``native_turns`` counter.

**Frozen.** :meth:`update` raises :class:`~cfjax.memory.FrozenMemoryError`. A recall turn runs on a
copy of the frozen queue and summary (its messages and any summary are discarded, so held-out tasks
never see one another, whatever order they run in); write tools return the tool error ``memory is
read-only``. What recall mutates while frozen: only the counters of :meth:`summary` (steps, searches,
parse failures, tool errors). Unfrozen (antipersist training), a recall turn joins the queue and
recall storage like any other.

**Simplifications.** (1) One system prompt of our own wording; no ``send_message``/``pause_heartbeats``
and no user. (2) The pressure warning is a line of the prompt while the context is past the threshold
(the repository appends it once as a system message and re-arms it after a summary). (3) Without
``request_heartbeat`` a call continues the turn (the repository's default yields to the user, and our
turns have none); a failed call continues as in the repository. (4) The context counted is the
rendered prompt without the warning, by our token estimate. (5) A task is never shown its own stored
items: searches skip passages it inserted, the shown set skips core entries it wrote. (6) The memory
set splits core blocks into entries (:func:`~cfjax.peers.memgpt.tools.core_entries`) and shows each
distinct text once; the ``persona`` block is in the step prompt only. (7) Summaries are capped at
``summary_chars``. Paper vs code: the trunc fraction follows the code's use (summarise the oldest 75 %
of queue tokens), not its comment ("truncate down to"); ``trunc_frac`` exposes it.

**What a real model must do that the simulator only draws.** Decide what is worth keeping and where
(core vs archival), word it, keep the 2,000-character block tidy (which old line to replace), decide
whether and what to search at a decision, page on when the first page misses, react to the pressure
warning, and write summaries that keep what matters. The simulator inserts every extracted lesson,
copies one into core with ``p_core_edit``, searches the question with ``p_search``, ignores the warning
and summarises extractively (:mod:`cfjax.peers.memgpt.calls`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.infra.ledger import Ledger
from cfjax.llm.prompts import count_tokens, render_trajectory
from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import load_store, memory_set, save_store
from cfjax.peers.memgpt.calls import (KNOWLEDGE_BLOCK, MEMGPT_STEP, MEMGPT_SUMMARIZE, PRESSURE_WARNING, StepRequest,
                                      SummarizeRequest, call_line)
from cfjax.peers.memgpt.tools import Archival, CoreMemory, Message, core_entries, execute
from cfjax.types import MemoryText, Task

__all__ = ["MemGPTConfig", "MemGPTSystem", "FORMAT"]

FORMAT = "cfjax.peers.memgpt/1"


@dataclass(frozen=True)
class MemGPTConfig:
    """MemGPT's defaults (module docstring); every one is a constructor option."""

    core_limit: int = 2000  # characters per core block (CORE_MEMORY_*_CHAR_LIMIT)
    blocks: tuple[str, ...] = ("persona", KNOWLEDGE_BLOCK)
    shown_blocks: tuple[str, ...] = (KNOWLEDGE_BLOCK,)  # core blocks shown as the memory set at recall
    persona: str = "I am an agent that solves tasks and keeps lessons from my own past attempts."
    context_budget: int = 8000  # tokens of the main context (gpt-4's 8k window, the repository's default)
    warning_frac: float = 0.75  # MESSAGE_SUMMARY_WARNING_FRAC
    trunc_frac: float = 0.75  # MESSAGE_SUMMARY_TRUNC_TOKEN_FRAC (fraction of queue tokens summarised)
    keep_last: int = 3  # MESSAGE_SUMMARY_TRUNC_KEEP_N_LAST
    max_steps: int = 4  # tool calls chained per turn
    page_size: int = 5  # RETRIEVAL_QUERY_DEFAULT_PAGE_SIZE
    summary_chars: int = 1000  # cap of a summary

    def __post_init__(self) -> None:
        if not (0 < self.warning_frac <= 1 and 0 < self.trunc_frac <= 1):
            raise ValueError("MemGPTConfig: warning_frac and trunc_frac must be in (0, 1]")
        if self.max_steps < 1 or self.page_size < 1 or self.context_budget < 1 or self.core_limit < 1:
            raise ValueError("MemGPTConfig: max_steps, page_size, context_budget and core_limit must be ≥ 1")
        if not set(self.shown_blocks) <= set(self.blocks):
            raise ValueError("MemGPTConfig.shown_blocks must be among blocks")


@dataclass
class _Queue:
    """The in-context part that a turn changes: the FIFO queue and the summary of what was evicted."""

    messages: list[Message]
    summary: str


class MemGPTSystem:
    """MemGPT as a :class:`~cfjax.memory.MemorySystem` (module docstring)."""

    def __init__(self, ctx: SystemContext, config: MemGPTConfig | None = None, **overrides) -> None:
        self.ctx = ctx
        self.config = dataclasses.replace(config or MemGPTConfig(), **overrides)
        c = self.config
        self.core = CoreMemory({b: (c.persona if b == "persona" else "") for b in c.blocks},
                               {b: c.core_limit for b in c.blocks})
        self.archival = Archival(c.page_size)
        self.recall_storage: list[Message] = []
        self.queue = _Queue([], "")
        self.core_sources: dict[str, str] = {}  # core text → the task whose turn wrote it
        self.counts = {"memorise_turns": 0, "recall_turns": 0, "tool_steps": 0, "searches": 0, "parse_failures": 0,
                       "tool_errors": 0, "summaries": 0, "native_turns": 0}
        self.frozen = False
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ the context
    def _request(self, q: _Queue, turn: list[Message], base: dict, step: int) -> StepRequest:
        core = tuple((b, self.core.blocks[b], self.core.limits[b]) for b in self.core.blocks)
        return StepRequest(core=core, summary=q.summary, history=tuple(q.messages), turn=tuple(turn), step=step,
                           max_steps=self.config.max_steps, n_archival=len(self.archival),
                           n_recall=len(self.recall_storage), **base)

    def context_tokens(self, req: StepRequest) -> int:
        """Tokens of the main context: the step prompt without the warning."""
        return count_tokens(MEMGPT_STEP.render(dataclasses.replace(req, warning="")))

    def _warning(self, tokens: int) -> str:
        b = self.config.context_budget
        if tokens <= self.config.warning_frac * b:
            return ""
        return PRESSURE_WARNING.format(pct=round(100 * tokens / b), used=tokens, budget=b)

    def _evict(self, q: _Queue, task: Task, n_turn: int, ledger: Ledger, verification: bool) -> bool:
        """Summarise and evict the oldest messages (module docstring); ``False`` when nothing can go."""
        c = self.config
        sizes = [count_tokens(m.render()) for m in q.messages]
        evictable = max(0, len(q.messages) - max(0, c.keep_last - n_turn))
        want, got, n = int(sum(sizes) * c.trunc_frac), 0, 0
        while n < evictable and (got < want or n == 0):
            got += sizes[n]
            n += 1
        if n == 0:
            return False
        res = self.ctx.backbone.call(MEMGPT_SUMMARIZE, SummarizeRequest(task, tuple(q.messages[:n]), q.summary,
                                                                        c.summary_chars))
        ledger.llm(task.task_id, res.usage, verification=verification)
        with self._lock:
            self.counts["summaries"] += 1
            self.counts["parse_failures"] += int(res.parse_failed)
        q.summary = res.summary or q.summary
        del q.messages[:n]
        return True

    # ------------------------------------------------------------------ the tool loop
    def _turn(self, q: _Queue, event: Message, base: dict, ledger: Ledger, *, verification: bool,
              persist: bool, archival: Archival | None = None) -> list[tuple[str, str]]:
        """One turn of the tool loop; the archival passages its searches returned, in order
        (``archival``: the storage its tools act on, default :attr:`archival`)."""
        task: Task = base["task"]
        archival = archival or self.archival
        turn = [event]
        read: dict[str, str] = {}
        for step in range(self.config.max_steps):
            req = dataclasses.replace(self._request(q, turn, base, step), page_size=archival.page_size)
            tokens = self.context_tokens(req)
            for _ in range(8):
                if tokens <= self.config.context_budget or not self._evict(q, task, len(turn), ledger, verification):
                    break
                req = self._request(q, turn, base, step)
                tokens = self.context_tokens(req)
            req = dataclasses.replace(req, warning=self._warning(tokens))
            res = self.ctx.backbone.call(MEMGPT_STEP, req)
            ledger.llm(task.task_id, res.usage, verification=verification)
            with self._lock:
                self.counts["tool_steps"] += 1
                self.counts["parse_failures"] += int(res.parse_failed)
            if res.tool is None:
                break
            out = execute(res.tool, res.args, core=self.core, archival=archival, recall=self.recall_storage,
                          frozen=self.frozen, task_id=task.task_id,
                          on_core_write=lambda text: self.core_sources.__setitem__(text, task.task_id))
            with self._lock:
                self.counts["searches"] += int(res.tool == "archival_memory_search")
                self.counts["tool_errors"] += int(not out.ok)
            turn += [Message("assistant", call_line(res.tool, res.args), task.task_id),
                     Message("tool", out.text, task.task_id)]
            read.update(out.shown)
            if out.ok and res.args.get("request_heartbeat") is False:
                break
        if persist:
            q.messages.extend(turn)
            self.recall_storage.extend(turn)
        return list(read.items())

    # ------------------------------------------------------------------ build and update
    def build(self, experience: Sequence[Experience]) -> None:
        """One memorise turn per finished episode, in order."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        if self.frozen:
            raise FrozenMemoryError("MemGPT memory is frozen: no memorise turn during held-out evaluation")
        t = experience.task
        status = "solved" if experience.solved else "not solved"
        event = Message("user", f"Episode finished on task {t.task_id} ({status} after {len(experience.attempts)} "
                                f"attempt(s)).\nTask: {t.question}\n{render_trajectory(experience.attempts)}",
                        t.task_id)
        base = dict(task=t, mode="memorise", trajectory=tuple(experience.attempts), solved=experience.solved,
                    episode=experience.episode)
        with self._lock:
            self.counts["memorise_turns"] += 1
            self._turn(self.queue, event, base, self.ctx.ledger, verification=True, persist=True)

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def recall(self, query: RecallQuery) -> MemoryText | None:
        """A recall turn (module docstring); the core entries and the passages it read as one memory set."""
        with self._lock:
            self.counts["recall_turns"] += 1
        return memory_set(self._recall_items(query, self.archival))

    def _recall_items(self, query: RecallQuery, archival: Archival) -> list[tuple[str, str]]:
        """The items a recall turn over ``archival`` shows (:meth:`shown_items`)."""
        t = query.task
        ledger = query.ledger or self.ctx.ledger
        event = Message("user", f"Decision on task {t.task_id}, attempt {query.attempt + 1}.\nTask: {t.question}\n"
                                f"Earlier attempts:\n{render_trajectory(query.history, empty='(none)')}\n"
                                f"Current draft:\n{query.draft if query.draft is not None else '(none yet)'}",
                        t.task_id)
        base = dict(task=t, mode="recall", trajectory=tuple(query.history), draft=query.draft, episode=query.episode,
                    attempt=query.attempt)
        if self.frozen:
            q = _Queue(list(self.queue.messages), self.queue.summary)
            read = self._turn(q, event, base, ledger, verification=False, persist=False, archival=archival)
        else:
            with self._lock:
                read = self._turn(self.queue, event, base, ledger, verification=False, persist=True,
                                  archival=archival)
        return self.shown_items(t, read)

    def shown(self, task: Task, read: Sequence[tuple[str, str]]) -> MemoryText | None:
        """The memory set of :meth:`shown_items`."""
        return memory_set(self.shown_items(task, read))

    def shown_items(self, task: Task, read: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Shown core entries not written by ``task``, then the passages read, each text once."""
        items: list[tuple[str, str]] = []
        seen: set[str] = set()
        for b in self.config.shown_blocks:
            for i, entry in enumerate(core_entries(self.core.blocks[b]), 1):
                if self.core_sources.get(entry) == task.task_id or entry in seen:
                    continue
                seen.add(entry)
                items.append((f"core.{b}.{i}", entry))
        for aid, text in read:
            if text.strip() not in seen:
                seen.add(text.strip())
                items.append((aid, text))
        return items

    # ------------------------------------------------------------------ fixed store (MemSyco protocol)
    def export_items(self) -> list[tuple[str, str]]:
        """Every item recall can show, ids and texts as a memory set shows them (module docstring): the
        shown core blocks' entries (each distinct text once), then every archival passage."""
        items: list[tuple[str, str]] = []
        seen: set[str] = set()
        for b in self.config.shown_blocks:
            for i, entry in enumerate(core_entries(self.core.blocks[b]), 1):
                if entry not in seen:
                    seen.add(entry)
                    items.append((f"core.{b}.{i}", entry.strip()))
        items += [(aid, text.strip()) for aid, text in self.archival.texts.items()]
        return items

    def native(self, query: RecallQuery, k: int) -> list[str]:
        """MemGPT's own retrieval with budget ``k``: a recall turn whose archival searches page by ``k``,
        its items capped at ``k``, core entries first (module docstring, *Fixed store*)."""
        if k <= 0:
            return []
        with self._lock:
            self.counts["native_turns"] += 1
        view = dataclasses.replace(self.archival, page_size=k)  # same passages and index, pages of k
        return [i for i, _ in self._recall_items(query, view)][:k]

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        msgs = lambda ms: [[m.role, m.text, m.task_id] for m in ms]  # noqa: E731
        a = self.archival
        save_store(path, FORMAT, {
            "core": dict(self.core.blocks), "limits": dict(self.core.limits), "core_sources": dict(self.core_sources),
            "archival": [[aid, a.texts[aid], a.sources[aid]] for aid in a.texts],
            "queue": msgs(self.queue.messages), "summary": self.queue.summary, "recall": msgs(self.recall_storage),
            "counts": dict(self.counts)})

    def load(self, path: Path) -> None:
        """Replace the memory with a saved one (embeddings recomputed).

        Raises:
          ValueError: one line naming the file and the field."""
        d = load_store(path, FORMAT, "MemGPT", {"core": dict, "limits": dict, "core_sources": dict, "archival": list,
                                                 "queue": list, "summary": str, "recall": list, "counts": dict})

        def strs(rows: object, n: int, field: str) -> list[list[str]]:
            if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == n and
                                                     all(isinstance(x, str) for x in r) for r in rows):
                raise ValueError(f"{path}: field {field!r} must be a list of {n}-string lists")
            return rows  # type: ignore[return-value]

        core, limits = d["core"], d["limits"]
        if set(core) != set(limits) or not all(isinstance(v, str) for v in core.values()) or \
                not all(isinstance(v, int) and v > 0 for v in limits.values()):
            raise ValueError(f"{path}: field 'core' must map the blocks of 'limits' to strings")
        if any(len(core[b]) > limits[b] for b in core):
            raise ValueError(f"{path}: field 'core' holds a block over its character limit")
        arch = Archival(self.config.page_size, type(self.archival.index)(self.archival.index.embedder))
        for aid, text, src in strs(d["archival"], 3, "archival"):
            if arch.insert(text, src) != aid:
                raise ValueError(f"{path}: field 'archival' ids must run a1, a2, … in order")
        self.core = CoreMemory(dict(core), dict(limits))
        self.archival = arch
        self.core_sources = {str(k): str(v) for k, v in d["core_sources"].items()}
        self.queue = _Queue([Message(*r) for r in strs(d["queue"], 3, "queue")], d["summary"])
        self.recall_storage = [Message(*r) for r in strs(d["recall"], 3, "recall")]
        self.counts.update({k: int(v) for k, v in d["counts"].items() if k in self.counts})

    def summary(self) -> dict:
        out = {"archival": len(self.archival), "recall_messages": len(self.recall_storage),
               "context_messages": len(self.queue.messages)}
        out.update({f"core_chars_{b}": len(v) for b, v in self.core.blocks.items()})
        out.update(self.counts)
        return out

    def __len__(self) -> int:
        return len(self.archival)

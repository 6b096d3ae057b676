"""Mem0 v2's store: facts extracted per interaction, merged into memory by the model's ADD / UPDATE /
DELETE / NONE events over temporary ids, with a history log; top-k similarity retrieval.

Chhikara et al., *Mem0: Building Production-Ready AI Agents with Scalable Long-Term Memory* (2025), §2.1;
repository mem0ai/mem0 at the v2 era, ``mem0/memory/main.py`` (``Memory._add_to_vector_store``): the new
facts are extracted (MEM0_EXTRACT); for each fact the 5 most similar memories are searched; the union of
those memories (deduplicated, in search order) is shown to one MEM0_UPDATE call with its ids replaced by
``"0"``, ``"1"``, … (the ``temp_uuid_mapping``, so the model never copies a long id); the reply's
events are mapped back and applied — ADD creates a memory under a fresh id, UPDATE replaces a memory's
text and keeps its id, DELETE removes it, NONE changes nothing — and every event goes to the history
log (``mem0/memory/storage.py`` keeps ADD / UPDATE / DELETE; we also log NONE and the ignored events).

**This is Mem0 v2**, the version MemSyco-Bench and UpliftMem compare against. The current upstream is
ADD-only since 2026 (it never UPDATEs or DELETEs); the update phase implemented here is v2's.

**The known failure, mapped back defensively**: a model may name a temporary id it was not shown (a
hallucinated id). Upstream v2 raises a ``KeyError`` inside a per-event ``try`` and logs it; here an
UPDATE / DELETE / NONE whose id is not in the mapping (or whose memory an earlier event of the same
reply already deleted) is written to the history log as ``ignored`` and never applied to any memory,
and never raises.

**Retrieval** (``Memory.search``): the top ``k`` memories (default 5) by cosine of the task question to
the memory texts, shown as one memory set (``show="revise"``: with the memory-free draft, to
REVISE_WITH_RECORD). Nothing is mutated at retrieval.

Simplifications (every one):

* an *interaction* is one finished episode (:class:`~cfjax.memory.Experience`: the task, its attempts,
  the evaluator's feedback), not a chat turn; there are no user / agent / run scopes (one store);
* embeddings are the harness's hashed embeddings (:class:`cfjax.peers.common.EmbeddingIndex`), not an
  embedding model; the vector store is exact cosine search in memory;
* paper and code disagree on the update call: the code (v2) makes one MEM0_UPDATE call per interaction
  over the union of the per-fact top-5, the paper (§2.1) presents each fact with its own similar
  memories. We follow the code; ``per_fact_update=True`` is the paper's form (one call per fact);
* no graph memory (Mem0^g), no procedural memory, no metadata filters, no reranker; timestamps are the
  build order (``created`` / ``updated`` counters), not wall-clock times;
* during build a task is never shown memories whose current text came from that task (the harness's
  rule); a memory an UPDATE rewrote belongs to the task whose fact it now holds.

What a real model must do that the simulator only draws: decide which facts of an interaction are worth
keeping and phrase them so they transfer; judge whether a new fact *is the same as*, *refines*, or
*contradicts* an old memory (the simulator compares ``EDIT:`` lines and draws the UPDATE and DELETE
choices with fixed probabilities, :data:`cfjax.peers.mem0.calls.MEM0_PROBS`); and keep to the ids it
was shown (the simulator names an unknown id with a fixed probability).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import EmbeddingIndex, load_store, memory_set, save_store, task_key
from cfjax.peers.mem0.calls import MEM0_EXTRACT, MEM0_UPDATE, ExtractRequest, MemoryEvent, UpdateRequest
from cfjax.types import MemoryText

__all__ = ["Mem0Memory", "Mem0System", "FORMAT"]

#: the ``format`` tag of a saved Mem0 store
FORMAT = "cfjax.peers.mem0/1"


@dataclass
class Mem0Memory:
    """One memory: its text, the task whose fact it holds, and when it was created / last changed."""

    id: str
    text: str
    source: str
    created: int
    updated: int


class Mem0System:
    """Mem0 v2 as a :class:`~cfjax.memory.MemorySystem` (module docstring).

    Args:
      ctx: the backbone, its ledger and the seed.
      k: memories shown at recall (Mem0's search ``limit``; UpliftMem's K = 5).
      search_k: similar memories searched per new fact for the update call (v2: 5).
      per_fact_update: one MEM0_UPDATE call per fact instead of one per interaction (module docstring).
    """

    def __init__(self, ctx: SystemContext, *, k: int = 5, search_k: int = 5, per_fact_update: bool = False) -> None:
        self.ctx = ctx
        self.k = k
        self.search_k = search_k
        self.per_fact_update = per_fact_update
        self.memories: dict[str, Mem0Memory] = {}
        self.history: list[dict] = []
        self.index = EmbeddingIndex()
        self.frozen = False
        self._next = 0
        self._clock = 0

    # ------------------------------------------------------------------ build and update
    def build(self, experience: Sequence[Experience]) -> None:
        """Each finished episode in order, as one interaction (:meth:`update`)."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        """MEM0_EXTRACT, then MEM0_UPDATE over the similar memories (module docstring)."""
        if self.frozen:
            raise FrozenMemoryError("Mem0 memory is frozen: no fact may be added during held-out evaluation")
        exp = experience
        self._clock += 1
        ext = self.ctx.backbone.call(MEM0_EXTRACT, ExtractRequest(exp.task, exp.attempts, exp.solved, exp.episode))
        self.ctx.ledger.llm(exp.task.task_id, ext.usage, verification=True)
        groups = [(f,) for f in ext.facts] if self.per_fact_update else ([ext.facts] if ext.facts else [])
        for facts in groups:
            mapping = self._temp_ids(facts)
            shown = tuple((tid, self.memories[mid].text) for tid, mid in mapping.items())
            upd = self.ctx.backbone.call(MEM0_UPDATE, UpdateRequest(exp.task, tuple(facts), shown, exp.episode))
            self.ctx.ledger.llm(exp.task.task_id, upd.usage, verification=True)
            self.apply(upd.events, mapping, exp.task.task_id)

    def _temp_ids(self, facts: Sequence[str]) -> dict[str, str]:
        """``{"0": memory id, "1": …}``: the union of each fact's ``search_k`` most similar memories, in
        search order, deduplicated (``temp_uuid_mapping``)."""
        found: list[str] = []
        for fact in facts:
            for mid, _ in self.index.topk(fact, self.search_k):
                if mid not in found:
                    found.append(mid)
        return {str(i): mid for i, mid in enumerate(found)}

    def apply(self, events: Sequence[MemoryEvent], mapping: dict[str, str], source: str) -> None:
        """Apply one update reply's events, mapping temporary ids back (defensively: module docstring)."""
        for ev in events:
            entry = {"event": ev.event, "temp_id": ev.id, "task": source, "time": self._clock}
            if ev.event == "ADD":
                if not ev.text:
                    self.history.append({**entry, "status": "ignored", "reason": "ADD without text"})
                    continue
                mid = f"m{self._next}"
                self._next += 1
                self.memories[mid] = Mem0Memory(mid, ev.text, source, self._clock, self._clock)
                self.index.add(mid, ev.text)
                self.history.append({**entry, "memory_id": mid, "old": None, "new": ev.text, "status": "applied"})
                continue
            mid = mapping.get(ev.id)
            if mid is None or mid not in self.memories:
                why = "unknown temporary id" if mid is None else "memory already deleted"
                self.history.append({**entry, "memory_id": mid, "status": "ignored", "reason": why})
                continue
            mem = self.memories[mid]
            if ev.event == "NONE":
                self.history.append({**entry, "memory_id": mid, "old": mem.text, "new": mem.text, "status": "applied"})
            elif ev.event == "DELETE":
                del self.memories[mid]
                self.index.remove(mid)
                self.history.append({**entry, "memory_id": mid, "old": mem.text, "new": None, "status": "applied"})
            elif not ev.text:  # UPDATE without text (upstream skips it)
                self.history.append({**entry, "memory_id": mid, "status": "ignored", "reason": "UPDATE without text"})
            else:
                old = mem.text
                mem.text, mem.source, mem.updated = ev.text, source, self._clock
                self.index.add(mid, ev.text)
                self.history.append({**entry, "memory_id": mid, "old": old, "new": ev.text, "status": "applied"})

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def search(self, query: str, k: int, exclude_source: str | None = None) -> list[tuple[str, float]]:
        """The ``k`` memories most similar to ``query`` (none whose text came from ``exclude_source``)."""
        return self.index.topk(query, k, keep=lambda mid: self.memories[mid].source != exclude_source)

    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The top-``k`` memories for the task question, as one memory set (nothing mutated)."""
        hits = self.search(task_key(query.task), self.k, query.task.task_id)
        return memory_set([(mid, self.memories[mid].text) for mid, _ in hits])

    # ------------------------------------------------------------------ the fixed-store protocol
    def export_items(self) -> list[tuple[str, str]]:
        """Every memory as ``(id, text)``, as :meth:`recall` shows it (:class:`cfjax.memory.FixedStore`)."""
        return [(mid, m.text) for mid, m in self.memories.items()]

    def native(self, query: RecallQuery, k: int) -> list[str]:
        """Mem0's own retrieval with a budget of ``k``: the ``k`` most similar memories to the question."""
        return [mid for mid, _ in self.search(task_key(query.task), k, query.task.task_id)]

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        save_store(path, FORMAT, {
            "memories": [[m.id, m.text, m.source, m.created, m.updated] for m in self.memories.values()],
            "history": self.history, "next_id": self._next, "clock": self._clock})

    def load(self, path: Path) -> None:
        """Replace the memory with a saved store's (embeddings recomputed from the texts).

        Raises:
          ValueError: not a Mem0 store, or a field missing or malformed (named with the file)."""
        data = load_store(path, FORMAT, "Mem0", {"memories": list, "history": list, "next_id": int, "clock": int})
        rows = data["memories"]
        if not all(isinstance(r, list) and len(r) == 5 and all(isinstance(x, str) for x in r[:3])
                   and all(isinstance(x, int) for x in r[3:]) for r in rows):
            raise ValueError(f"{path}: field 'memories' must hold [id, text, source, created, updated] rows")
        if not all(isinstance(h, dict) and isinstance(h.get("event"), str) for h in data["history"]):
            raise ValueError(f"{path}: field 'history' must hold event objects")
        self.memories, self.index = {}, EmbeddingIndex(self.index.embedder)
        for mid, text, source, created, updated in rows:
            self.memories[mid] = Mem0Memory(mid, text, source, created, updated)
            self.index.add(mid, text)
        self.history, self._next, self._clock = list(data["history"]), data["next_id"], data["clock"]

    def summary(self) -> dict:
        applied = Counter(h["event"] for h in self.history if h.get("status") == "applied")
        return {"memories": len(self.memories), "history": len(self.history),
                "ignored": sum(h.get("status") == "ignored" for h in self.history),
                **{e.lower(): applied.get(e, 0) for e in ("ADD", "UPDATE", "DELETE", "NONE")}}

    def __len__(self) -> int:
        return len(self.memories)

"""A-MEM's store: Zettelkasten notes built by the model, evolved on every insert, retrieved by embedding
plus their linked notes.

Xu et al., *A-MEM: Agentic Memory for LLM Agents* (2025), §3.1–3.4; repository agiresearch/A-mem,
``agentic_memory/memory_system.py`` (``MemoryNote``, ``AgenticMemorySystem.add_note``,
``process_memory``, ``search_agentic``) and the paper's evaluation code (``memory_layer.py``:
``find_related_memories_raw``, the note document ``content: … context: … keywords: … tags: …``).

* **Note** ``{id, content, keywords, context, tags, links, timestamp, retrieval_count,
  evolution_history}``: content, keywords, context and tags come from one AMEM_NOTE call
  (:mod:`cfjax.peers.amem.calls`).
* **Link generation and evolution** (on insert): the 5 notes nearest to the new note's content are shown
  to one AMEM_EVOLVE call (none when the store is empty, as upstream). *strengthen*: the new note's
  ``links`` gain the suggested notes and its tags become ``tags_to_update``; *update_neighbor*: the
  i-th shown neighbour's context and tags become the i-th entries of the two neighbourhood lists. Every
  change is recorded in the changed note's ``evolution_history`` (upstream keeps the field but never
  writes it).
* **Links are note ids.** Upstream shows the neighbours as ``memory index:<rank>`` and resolves ranks
  as positions in the list of *all* notes (``list(self.memories.values())[rank]``), so a link or a
  neighbour update lands on whichever note happens to hold that position — a reported bug. Here the
  prompt shows ids, links store ids (filtered to existing notes, as upstream's
  ``validate_memory_connections``), and neighbour updates are resolved through the shown list to ids;
  a link survives the deletion or reordering of other notes (tests/peers/test_amem.py shows both).
* **Retrieval**: the top ``k`` notes (default 5) by cosine of the task question to the note documents,
  each followed by its linked notes (interleaved, as ``find_related_memories_raw`` lists a hit's
  neighbours right after it), the whole list capped at ``k`` (``search_agentic`` returns ``[:k]``).
  ``expand="append"`` is ``search_agentic`` exactly: the neighbours after all ``k`` hits, then ``[:k]`` —
  which shows linked notes only when fewer than ``k`` notes qualify. **Mutated at retrieval**: each
  shown note's ``retrieval_count`` (+1) and ``last_accessed`` — bookkeeping the note defines, done also
  while frozen; nothing else changes.
* **Fixed store** (:class:`~cfjax.memory.FixedStore`, the MemSyco protocol of UpliftMem §5.3 / Table 3):
  :meth:`AmemSystem.export_items` lists every note as ``(id, content)``, the text recall shows;
  :meth:`AmemSystem.native` is the same search with the budget ``k`` in place of :attr:`AmemSystem.k`
  (top ``k`` by embedding plus linked notes, capped at ``k``), so ``native(q, self.k)`` is exactly the ids
  recall shows. It is a pure query: it does not count a retrieval (recall does, when the notes are shown).

Simplifications (every one):

* a note's content is the lesson the model writes from a finished episode (the same AMEM_NOTE call),
  not the raw interaction text — a task trajectory carries no reusable statement otherwise; an episode
  with no lesson makes no note;
* embeddings are the harness's hashed embeddings of the note document (content, context, keywords,
  tags), not all-MiniLM-L6-v2 in ChromaDB; exact cosine search;
* an evolved neighbour is re-embedded at once (``evo_threshold=None``); upstream re-indexes only when
  the count of evolutions reaches a multiple of ``evo_threshold`` = 100 (``consolidate_memories``), which
  ``evo_threshold=100`` reproduces;
* links are one-directional (the new note links to its neighbours), as upstream;
* timestamps are the insert order (an integer clock), not wall-clock minutes; no ``category`` field;
* during build a task is never shown notes made from its own episodes (the harness's rule; applied to
  hits and to linked neighbours alike).

What a real model must do that the simulator only draws: write a note whose content transfers and
whose keywords, context and tags let similar tasks find it; judge which neighbours a note really
belongs with (the simulator links those sharing an edit line or a cue phrase with ``p_link``) and when a
neighbour's description should change in the light of the new note (the simulator adds the cue with
``p_update_neighbour``; :data:`cfjax.peers.amem.calls.AMEM_PROBS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.amem.calls import AMEM_EVOLVE, AMEM_NOTE, EvolveRequest, EvolveResult, Neighbour, NoteRequest
from cfjax.peers.common import EmbeddingIndex, load_store, memory_set, save_store, task_key
from cfjax.types import MemoryText

__all__ = ["AmemNote", "AmemSystem", "FORMAT"]

#: the ``format`` tag of a saved A-MEM store
FORMAT = "cfjax.peers.amem/1"

_FIELDS = {"id": str, "content": str, "keywords": list, "context": str, "tags": list, "links": list,
           "timestamp": int, "last_accessed": int, "retrieval_count": int, "evolution_history": list, "source": str}


@dataclass
class AmemNote:
    """One Zettelkasten note (``links`` are note ids)."""

    id: str
    content: str
    keywords: list[str]
    context: str
    tags: list[str]
    source: str  # the task whose episode made it
    timestamp: int
    links: list[str] = field(default_factory=list)
    last_accessed: int = 0
    retrieval_count: int = 0
    evolution_history: list[dict] = field(default_factory=list)

    def document(self) -> str:
        """The text that is embedded (the evaluation code's note document)."""
        return (f"content: {self.content} context: {self.context} keywords: {', '.join(self.keywords)} "
                f"tags: {', '.join(self.tags)}")


class AmemSystem:
    """A-MEM as a :class:`~cfjax.memory.MemorySystem` (module docstring).

    Args:
      ctx: the backbone, its ledger and the seed.
      k: notes shown at recall (``search_agentic``'s ``k``; UpliftMem's K = 5).
      n_neighbours: nearest notes shown to the evolution call (upstream: 5).
      expand: ``"interleave"`` (each hit followed by its links, capped at ``k``) or ``"append"``
        (``search_agentic``: links after all hits, capped at ``k``).
      evo_threshold: re-index evolved notes at once (``None``) or every this many evolutions (upstream 100).
    """

    def __init__(self, ctx: SystemContext, *, k: int = 5, n_neighbours: int = 5, expand: str = "interleave",
                 evo_threshold: int | None = None) -> None:
        if expand not in ("interleave", "append"):
            raise ValueError(f"AmemSystem.expand must be 'interleave' or 'append', got {expand!r}")
        self.ctx = ctx
        self.k, self.n_neighbours, self.expand, self.evo_threshold = k, n_neighbours, expand, evo_threshold
        self.notes: dict[str, AmemNote] = {}
        self.index = EmbeddingIndex()
        self.frozen = False
        self.evo_count = 0
        self.ignored_links = 0
        self._next = 0
        self._clock = 0

    # ------------------------------------------------------------------ build and update
    def build(self, experience: Sequence[Experience]) -> None:
        """Each finished episode in order becomes (at most) one note (:meth:`update`)."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        """AMEM_NOTE, then (when the store is not empty) AMEM_EVOLVE over the nearest notes."""
        if self.frozen:
            raise FrozenMemoryError("A-MEM memory is frozen: no note may be added during held-out evaluation")
        exp = experience
        self._clock += 1
        res = self.ctx.backbone.call(AMEM_NOTE, NoteRequest(exp.task, exp.attempts, exp.solved, exp.episode))
        self.ctx.ledger.llm(exp.task.task_id, res.usage, verification=True)
        if not res.content:
            return
        note = AmemNote(f"n{self._next}", res.content, list(res.keywords), res.context or "General", list(res.tags),
                        exp.task.task_id, self._clock, last_accessed=self._clock)
        self._next += 1
        near = [self.notes[i] for i, _ in self.index.topk(note.content, self.n_neighbours)]
        if near:
            req = EvolveRequest(exp.task, note.content, tuple(note.keywords), note.context, tuple(note.tags),
                                tuple(Neighbour(n.id, n.content, tuple(n.keywords), n.context, tuple(n.tags))
                                      for n in near), exp.episode)
            evo = self.ctx.backbone.call(AMEM_EVOLVE, req)
            self.ctx.ledger.llm(exp.task.task_id, evo.usage, verification=True)
            self.evolve(note, near, evo)
        self.notes[note.id] = note
        self.index.add(note.id, note.document())

    def evolve(self, note: AmemNote, near: Sequence[AmemNote], evo: EvolveResult) -> None:
        """Apply one evolution reply to the new note and its shown neighbours (module docstring)."""
        if not evo.should_evolve:
            return
        if "strengthen" in evo.actions:
            links = [c for c in evo.connections if c in self.notes and c not in note.links]
            self.ignored_links += sum(c not in self.notes for c in evo.connections)
            old_tags = list(note.tags)
            if evo.tags:
                note.tags = list(evo.tags)
            note.links.extend(links)
            note.evolution_history.append({"time": self._clock, "action": "strengthen", "links": links,
                                           "old_tags": old_tags, "new_tags": list(note.tags)})
        if "update_neighbor" in evo.actions:
            for i, nb in enumerate(near):  # the i-th entries belong to the i-th *shown* neighbour (its id)
                if i >= len(evo.neighbour_tags):
                    break
                ctx = evo.neighbour_contexts[i] if i < len(evo.neighbour_contexts) and evo.neighbour_contexts[i] \
                    else nb.context
                tags = list(evo.neighbour_tags[i])
                if ctx == nb.context and tags == nb.tags:
                    continue
                nb.evolution_history.append({"time": self._clock, "action": "update_neighbor", "by": note.id,
                                             "old_context": nb.context, "new_context": ctx,
                                             "old_tags": list(nb.tags), "new_tags": tags})
                nb.context, nb.tags = ctx, tags
                if self.evo_threshold is None:
                    self.index.add(nb.id, nb.document())
        self.evo_count += 1
        if self.evo_threshold is not None and self.evo_count % self.evo_threshold == 0:
            for n in self.notes.values():  # consolidate_memories: re-index every note
                self.index.add(n.id, n.document())

    def delete(self, note_id: str) -> bool:
        """Remove a note (upstream ``delete``); links to it elsewhere are kept and skipped at retrieval."""
        if note_id not in self.notes:
            return False
        del self.notes[note_id]
        self.index.remove(note_id)
        return True

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def search(self, query: str, k: int, exclude_source: str | None = None) -> list[str]:
        """Note ids: the top ``k`` by embedding plus their linked notes, capped at ``k`` (``expand``)."""
        ok = (lambda nid: self.notes[nid].source != exclude_source)
        hits = [nid for nid, _ in self.index.topk(query, k, keep=ok)]
        out: list[str] = []

        def links_of(nid: str) -> list[str]:
            return [j for j in self.notes[nid].links if j in self.notes and ok(j)]

        if self.expand == "interleave":
            for nid in hits:
                for j in [nid, *links_of(nid)]:
                    if j not in out:
                        out.append(j)
        else:
            out = list(hits)
            for nid in hits:
                out.extend(j for j in links_of(nid) if j not in out)
        return out[:k]

    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The notes of :meth:`search` for the task question as one memory set; their retrieval counts
        and access times are updated (the only mutation at retrieval)."""
        ids = self.search(task_key(query.task), self.k, query.task.task_id)
        for nid in ids:
            self.notes[nid].retrieval_count += 1
            self.notes[nid].last_accessed = self._clock
        return memory_set([(nid, self.notes[nid].content) for nid in ids])

    # ------------------------------------------------------------------ fixed store (MemSyco protocol)
    def export_items(self) -> list[tuple[str, str]]:
        """Every note as ``(id, content)`` in insertion order, the text as a memory set shows it."""
        return [(n.id, n.content.strip()) for n in self.notes.values()]

    def native(self, query: RecallQuery, k: int) -> list[str]:
        """A-MEM's own retrieval with budget ``k``: :meth:`search` for the task question (never the task's
        own notes); no retrieval is counted (module docstring)."""
        return self.search(task_key(query.task), k, query.task.task_id)

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        save_store(path, FORMAT, {"notes": [asdict(n) for n in self.notes.values()], "next_id": self._next,
                                  "clock": self._clock, "evo_count": self.evo_count})

    def load(self, path: Path) -> None:
        """Replace the notes with a saved store's (embeddings recomputed from the note documents).

        Raises:
          ValueError: not an A-MEM store, or a field missing or malformed (named with the file)."""
        data = load_store(path, FORMAT, "cfjax A-MEM", {"notes": list, "next_id": int, "clock": int, "evo_count": int})
        notes: dict[str, AmemNote] = {}
        for i, row in enumerate(data["notes"]):
            if not isinstance(row, dict):
                raise ValueError(f"{path}: field 'notes' entry {i} must be an object")
            for key, typ in _FIELDS.items():
                if not isinstance(row.get(key), typ):
                    raise ValueError(f"{path}: field 'notes[{i}].{key}' must be a {typ.__name__}")
            notes[row["id"]] = AmemNote(**{k: row[k] for k in _FIELDS})
        self.notes, self.index = notes, EmbeddingIndex(self.index.embedder)
        for n in notes.values():
            self.index.add(n.id, n.document())
        self._next, self._clock, self.evo_count = data["next_id"], data["clock"], data["evo_count"]

    def summary(self) -> dict:
        return {"notes": len(self.notes), "links": sum(len(n.links) for n in self.notes.values()),
                "evolutions": self.evo_count,
                "neighbour_updates": sum(h["action"] == "update_neighbor" for n in self.notes.values()
                                         for h in n.evolution_history),
                "retrievals": sum(n.retrieval_count for n in self.notes.values())}

    def __len__(self) -> int:
        return len(self.notes)

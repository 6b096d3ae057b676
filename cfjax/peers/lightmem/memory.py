"""LightMem's store: sensory buffer → topic segments → short-term buffer → extracted long-term entries,
an offline sleep-time update, similarity top-10 retrieval.

Fang et al., *LightMem* (2025, arXiv 2510.18866); repository zjunlp/LightMem, files
``src/lightmem/factory/memory_buffer/sensory_memory.py`` (``SenMemBufferManager``: turns accumulate up
to the segmenter's ``buffer_len`` = 512 tokens, then the buffer is cut where adjacent turns' cosine falls
below a threshold), ``.../short_term_memory.py`` (``ShortMemBufferManager``: segments accumulate; when the
next one would take the count past ``max_tokens`` the buffer is flushed to one extraction call; a forced
extraction flushes what is left), ``src/lightmem/memory/lightmem.py`` (``construct_update_queue_all_entries``
with ``top_k=20, keep_top_n=10``: each entry's queue is its 20 nearest entries not later than it, itself
dropped, the best 10 kept; ``offline_update_all_entries(score_threshold=0.9)``: an entry is sent to
LIGHTMEM_UPDATE with every entry whose queue lists it at score ≥ 0.9 — i.e. its nearest *later*
neighbours; ``retrieve(limit=10)``).

The pipeline here (:class:`LightMemSystem`):

1. *pre-compression* (optional, **off** by default as upstream's ``pre_compress=False``): with
   ``pre_compress=r`` each turn's feedback keeps its first ⌈r·n⌉ words (a model-free stand-in for
   LLMLingua-2, a separate token-classification model, not the backbone; actions are kept whole);
2. *sensory buffer*: every attempt of a finished episode, with its feedback, is one turn
   (``Task / Attempt / Feedback`` text). When the next turn would take the buffer past
   ``sensory_tokens`` (512) it is cut into topics: a new topic starts at turn i when cos(turn_i,
   turn_{i-1}) < ``topic_threshold`` (0.5); the closed topics go on, the last (open) one stays unless
   the next turn does not fit beside it; no boundary → the whole buffer is one topic;
3. *short-term buffer*: topics accumulate; when the next would take it past ``stm_tokens`` (2,000,
   :func:`cfjax.llm.prompts.count_tokens` over the turns' text) the buffer so far is flushed to one
   LIGHTMEM_EXTRACT call whose entries enter long-term memory in order;
4. at the end of :meth:`build` and at :meth:`freeze` both buffers are force-flushed (upstream's
   ``force_segment`` / ``force_extract``) so no experience is lost, then the *sleep-time* pass
   (:meth:`sleep`) runs if entries were added since the last one: queues on the current snapshot, one
   LIGHTMEM_UPDATE per entry that has candidates, then every ``delete`` / ``update`` applied;
5. *recall*: the ``retrieve_k`` (10) entries most similar (cosine) to the question + draft, never the
   query task's own entries, shown as one memory set. Recall mutates nothing.
6. *fixed store* (:class:`~cfjax.memory.FixedStore`, the MemSyco protocol of UpliftMem §5.3 / Table 3):
   :meth:`LightMemSystem.export_items` lists every long-term entry (in time order) as recall shows it;
   :meth:`LightMemSystem.native` is the same similarity top-``k`` with the budget ``k`` in place of
   ``retrieve_k``, so ``native(q, retrieve_k)`` is exactly the ids recall shows. Pending buffer contents
   are not items (a frozen store has none: :meth:`freeze` flushes them).

**Simplifications.** Turns are attempts, not chat messages; token counts are the harness's estimate,
not the memory model's tokenizer; upstream's coarse attention-based segmenter (LLMLingua-2) is left out
and only its fine, similarity stage is kept, with a fixed threshold (0.5, the top of upstream's sweep;
``adaptive_threshold=True`` gives upstream's sweep 0.2, 0.25, … 0.5 until a boundary appears); time
stamps are insertion order (entries of one flush in order); an updated entry keeps its old embedding,
as upstream's ``update`` does (it rewrites the payload, not the vector); embeddings are the harness's
hashed ones; entries carry the task they came from (upstream's ``source_id``) so a task never sees its
own entries; pending buffer contents are not saved (they are flushed at :meth:`freeze`).

**Paper / code disagreement.** The short-term threshold is 2,000 in ``ShortMemBufferManager``'s default
and in PEERS.md, but ``LightMemory.__init__`` builds it with ``max_tokens=512``. 2,000 is followed;
``stm_tokens=512`` gives the other.

**What a real model must do that the simulator only draws.** Decide which turns hold a reusable fact
and write it in one sentence (the simulator reads the same lesson every peer reads,
:func:`cfjax.llm.extract.lessons_of`); judge whether a later entry refines, contradicts or duplicates an
earlier one (the simulator deletes exact duplicates and updates a conflicting correction with
``p_update``, :mod:`cfjax.peers.lightmem.calls`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.llm.prompts import count_tokens
from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import EmbeddingIndex, load_store, memory_set, save_store
from cfjax.peers.lightmem.calls import LIGHTMEM_EXTRACT, LIGHTMEM_UPDATE, ExtractRequest, Turn, UpdateRequest
from cfjax.types import Attempt, MemoryText

__all__ = ["LightMemSystem", "SensoryBuffer", "ShortTermBuffer", "Entry", "topic_boundaries", "FORMAT"]

FORMAT = "cfjax.peers.lightmem/1"


def topic_boundaries(sims: Sequence[float], threshold: float, adaptive: bool = False) -> list[int]:
    """Turn indices that start a new topic: ``sims[i-1]`` is cos(turn_i, turn_{i-1}) and i is a
    boundary when it is below ``threshold``. ``adaptive``: upstream's sweep from 0.2 by 0.05 up to
    ``threshold`` until some boundary appears."""
    if not adaptive:
        return [i + 1 for i, s in enumerate(sims) if s < threshold]
    t = 0.2
    while t <= threshold + 1e-9:
        found = [i + 1 for i, s in enumerate(sims) if s < t]
        if found:
            return found
        t += 0.05
    return []


class SensoryBuffer:
    """Turns until ``max_tokens``, then cut into topics by adjacent-turn similarity (module docstring)."""

    def __init__(self, embed: Callable[[str], object], max_tokens: int = 512, threshold: float = 0.5,
                 adaptive: bool = False) -> None:
        self.embed, self.max_tokens, self.threshold, self.adaptive = embed, max_tokens, threshold, adaptive
        self.turns: list[Turn] = []

    def tokens(self) -> int:
        return sum(count_tokens(t.text) for t in self.turns)

    def _cut(self) -> list[list[Turn]]:
        vecs = [self.embed(t.text) for t in self.turns]
        sims = [float(vecs[i] @ vecs[i - 1]) for i in range(1, len(vecs))]
        cuts = [0] + topic_boundaries(sims, self.threshold, self.adaptive) + [len(self.turns)]
        return [self.turns[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]

    def add(self, turn: Turn) -> list[list[Turn]]:
        """Add one turn; the topics it closes (in order)."""
        out: list[list[Turn]] = []
        need = count_tokens(turn.text)
        if self.turns and self.tokens() + need > self.max_tokens:
            segs = self._cut()
            out, last = segs[:-1], segs[-1]
            if sum(count_tokens(t.text) for t in last) + need > self.max_tokens or len(segs) == 1:
                out.append(last)
                last = []
            self.turns = list(last)
        self.turns.append(turn)
        return out

    def drain(self) -> list[list[Turn]]:
        segs = self._cut() if self.turns else []
        self.turns = []
        return segs


class ShortTermBuffer:
    """Topic segments until the next would pass ``max_tokens``; then the buffer so far is flushed."""

    def __init__(self, max_tokens: int = 2000) -> None:
        self.max_tokens = max_tokens
        self.segments: list[list[Turn]] = []
        self.tokens = 0

    def add(self, seg: list[Turn]) -> list[list[list[Turn]]]:
        """Add one segment; the flushed buffers (each a list of segments)."""
        need = sum(count_tokens(t.text) for t in seg)
        out = []
        if self.segments and self.tokens + need > self.max_tokens:
            out.append(self.segments)
            self.segments, self.tokens = [], 0
        self.segments.append(seg)
        self.tokens += need
        return out

    def drain(self) -> list[list[list[Turn]]]:
        out = [self.segments] if self.segments else []
        self.segments, self.tokens = [], 0
        return out


@dataclass
class Entry:
    """One long-term entry: its text, the text its embedding was made from, its source task, order."""

    id: str
    text: str
    key: str
    source: str
    seq: int


class LightMemSystem:
    """LightMem as a :class:`~cfjax.memory.MemorySystem` (module docstring for the defaults)."""

    def __init__(self, ctx: SystemContext, *, pre_compress: float | None = None, sensory_tokens: int = 512,
                 topic_threshold: float = 0.5, adaptive_threshold: bool = False, stm_tokens: int = 2000,
                 queue_top_k: int = 20, queue_keep: int = 10, update_score: float = 0.9,
                 retrieve_k: int = 10) -> None:
        self.ctx = ctx
        self.pre_compress = pre_compress
        self.index = EmbeddingIndex()
        self.sensory = SensoryBuffer(self.index.embed, sensory_tokens, topic_threshold, adaptive_threshold)
        self.stm = ShortTermBuffer(stm_tokens)
        self.queue_top_k, self.queue_keep, self.update_score = queue_top_k, queue_keep, update_score
        self.retrieve_k = retrieve_k
        self.entries: dict[str, Entry] = {}
        self._seq = 0
        self._dirty = False  # entries added since the last sleep-time pass
        self.counts = {"flushes": 0, "updated": 0, "deleted": 0, "update_calls": 0}
        self.frozen = False

    # ------------------------------------------------------------------ write path
    def _compress(self, a: Attempt) -> Attempt:
        if self.pre_compress is None:
            return a
        words = a.feedback.split()
        return Attempt(a.action, " ".join(words[:math.ceil(self.pre_compress * len(words))]), a.score)

    def _turns(self, exp: Experience) -> list[Turn]:
        n = len(exp.attempts)
        return [Turn(exp.task, exp.episode, i, self._compress(a), exp.solved and i == n - 1)
                for i, a in enumerate(exp.attempts)]

    def _extract(self, segments: list[list[Turn]]) -> None:
        req = ExtractRequest(tuple(tuple(s) for s in segments))
        turns = req.turns()
        res = self.ctx.backbone.call(LIGHTMEM_EXTRACT, req)
        self.ctx.ledger.llm(turns[-1].task.task_id, res.usage, verification=True)
        self.counts["flushes"] += 1
        for n, text in res.entries:
            source = turns[n - 1].task.task_id if n else ""
            self._add_entry(text, source)

    def _add_entry(self, text: str, source: str) -> Entry:
        e = Entry(f"m{self._seq}", text, text, source, self._seq)
        self._seq += 1
        self.entries[e.id] = e
        self.index.add(e.id, e.key)
        self._dirty = True
        return e

    def _segments(self, segs: list[list[Turn]], force: bool = False) -> None:
        for seg in segs:
            for batch in self.stm.add(seg):
                self._extract(batch)
        if force:
            for batch in self.stm.drain():
                self._extract(batch)

    def _ingest(self, exp: Experience) -> None:
        for turn in self._turns(exp):
            self._segments(self.sensory.add(turn))

    def flush(self) -> None:
        """Force-segment the sensory buffer and force-extract the short-term buffer."""
        self._segments(self.sensory.drain(), force=True)

    def build(self, experience: Sequence[Experience]) -> None:
        """Every episode through the buffers, then a forced flush and the sleep-time pass."""
        for exp in experience:
            self.update(exp)
        self.flush()
        self.sleep()

    def update(self, experience: Experience) -> None:
        if self.frozen:
            raise FrozenMemoryError("LightMem memory is frozen: no turn may be added during held-out evaluation")
        self._ingest(experience)

    # ------------------------------------------------------------------ sleep-time update
    def update_queues(self) -> dict[str, list[tuple[str, float]]]:
        """Each entry's queue: its ``queue_top_k`` nearest entries not later than it (itself dropped),
        the best ``queue_keep`` kept (upstream ``construct_update_queue_all_entries``)."""
        out = {}
        for e in self.entries.values():
            hits = self.index.topk(e.key, self.queue_top_k, keep=lambda i, s=e.seq: self.entries[i].seq <= s)
            out[e.id] = [(h, s) for h, s in hits if h != e.id][: self.queue_keep]
        return out

    def sleep(self) -> None:
        """The offline update (upstream ``offline_update_all_entries``): for each entry, the later
        entries whose queue lists it with score ≥ ``update_score`` are its candidates; one
        LIGHTMEM_UPDATE per entry with candidates, decided on one snapshot, then applied."""
        if not self._dirty:
            return
        queues = self.update_queues()
        snapshot = {i: e.text for i, e in self.entries.items()}
        decisions = []
        for e in sorted(self.entries.values(), key=lambda x: x.seq):
            cands = sorted((o for o, q in queues.items() if any(h == e.id and s >= self.update_score for h, s in q)),
                           key=lambda o: self.entries[o].seq)
            if not cands:
                continue
            res = self.ctx.backbone.call(LIGHTMEM_UPDATE, UpdateRequest(e.id, snapshot[e.id],
                                                                        tuple(snapshot[o] for o in cands)))
            self.ctx.ledger.llm(e.source or "lightmem/sleep", res.usage, verification=True)
            self.counts["update_calls"] += 1
            decisions.append((e.id, res))
        for eid, res in decisions:
            if res.action == "delete":
                del self.entries[eid]
                self.index.remove(eid)
                self.counts["deleted"] += 1
            elif res.action == "update":
                self.entries[eid].text = res.new_memory  # the embedding is kept (upstream)
                self.counts["updated"] += 1
        self._dirty = False

    def freeze(self) -> None:
        """Flush both buffers and run the sleep-time pass (if anything is new), then freeze."""
        if not self.frozen:
            self.flush()
            self.sleep()
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The ``retrieve_k`` most similar entries to the question and draft (never the task's own)."""
        text = f"{query.task.question}\n{query.draft or ''}"
        return memory_set([(i, self.entries[i].text) for i in self.native(query, self.retrieve_k)])

    # ------------------------------------------------------------------ fixed store (MemSyco protocol)
    def export_items(self) -> list[tuple[str, str]]:
        """Every long-term entry as ``(id, text)`` in time order, the text as a memory set shows it."""
        return [(e.id, e.text.strip()) for e in sorted(self.entries.values(), key=lambda x: x.seq)]

    def native(self, query: RecallQuery, k: int) -> list[str]:
        """LightMem's own retrieval with budget ``k``: the ``k`` entries most similar to the question and
        draft, never the task's own (mutates nothing)."""
        text = f"{query.task.question}\n{query.draft or ''}"
        return [i for i, _ in self.index.topk(text, k, keep=lambda i: self.entries[i].source != query.task.task_id)]

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        rows = [[e.id, e.text, e.key, e.source, e.seq] for e in sorted(self.entries.values(), key=lambda x: x.seq)]
        save_store(path, FORMAT, {"entries": rows, "next_seq": self._seq, "counts": dict(self.counts)})

    def load(self, path: Path) -> None:
        """Replace the long-term memory with a saved one (embeddings recomputed from the saved keys).

        Raises:
          ValueError: not a LightMem store, or a malformed field (named)."""
        data = load_store(path, FORMAT, "LightMem", {"entries": list, "next_seq": int, "counts": dict})
        entries: dict[str, Entry] = {}
        for row in data["entries"]:
            if not (isinstance(row, list) and len(row) == 5 and all(isinstance(x, str) for x in row[:4])
                    and isinstance(row[4], int)):
                raise ValueError(f"{path}: field 'entries' must hold [id, text, key, source, seq] rows")
            entries[row[0]] = Entry(*row)
        self.entries, self.index = entries, EmbeddingIndex(self.index.embedder)
        for e in sorted(entries.values(), key=lambda x: x.seq):
            self.index.add(e.id, e.key)
        self.sensory.embed = self.index.embed
        self._seq, self._dirty = data["next_seq"], False
        self.counts = {k: int(data["counts"].get(k, 0)) for k in self.counts}

    def summary(self) -> dict:
        return {"entries": len(self.entries), "pending_turns": len(self.sensory.turns)
                + sum(len(s) for s in self.stm.segments), **self.counts}

    def __len__(self) -> int:
        return len(self.entries)

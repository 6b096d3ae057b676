"""NaiveRAG's store: every turn of every finished episode, verbatim, retrieved by similarity top-k.

NaiveRAG is the "similarity top-k over turns" baseline of ../shared/PEERS.md: the plain
retrieval-augmented memory that MemSyco-Bench and UpliftMem (§5.3, Fig. 3 / Table 3, the MemSyco
fixed-store protocol) use as one of the pipeline-built stores — the dialogue turns themselves are the
memory items, nothing is extracted, merged or rewritten, and retrieval is cosine similarity of the
query to each item.

* **Store.** One item per attempt of every finished episode (:meth:`NaiveRAGSystem.update`): the task
  question, the action and the evaluator's feedback as the agent saw them
  (``Task: …\\nAction: …\\nFeedback: …``), ids ``turn0, turn1, …`` in insertion order. No model call is
  made to build or to recall; nothing is charged to any ledger.
* **Recall.** The top ``k`` (default 5) items by cosine of the task question — plus the draft when one
  is given (``question\\ndraft``) — to the item text (:class:`cfjax.peers.common.EmbeddingIndex`),
  never the query task's own turns, shown as one memory set. Recall mutates nothing.
* **Fixed store** (:class:`~cfjax.memory.FixedStore`): :meth:`~NaiveRAGSystem.export_items` is every
  item; :meth:`~NaiveRAGSystem.native` is the same top-``k`` with the budget ``k``, so
  ``native(q, self.k)`` is exactly the ids recall shows.

Simplifications: a "turn" is one attempt (action + feedback) rather than a chat message, prefixed with
the task question so that a turn can be found by a similar question; the embeddings are the harness's
hashed ones (every row retrieves with the same encoder), exact cosine search; the score of an attempt
is not stored (the feedback says what the evaluator said).

**What the simulator makes of it.** Raw turns carry no ``EDIT:`` (or ``RULE``/``FIX``) line — an
action and the evaluator's feedback are not a correction — so the scripted executor
(:meth:`cfjax.llm.scripted.ScriptedBackbone._follow_memories`) would change a draft only if a turn's
text happened to contain one, which it never does. With the scripted backbone NaiveRAG therefore shows
context that costs tokens (and lowers the adherence to anything else shown) and changes nothing; with a
real model the successful past actions it shows can be imitated.

What a real model must do that the simulator only draws: nothing is drawn for NaiveRAG — there is no
extraction or judgement to simulate; a real model must itself read raw past turns, tell the successful
action from the failed ones by their feedback, and decide whether and how it transfers to the task at
hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import EmbeddingIndex, load_store, memory_set, save_store
from cfjax.types import MemoryText, Task

__all__ = ["NaiveRAGSystem", "StoredTurn", "FORMAT", "turn_text", "query_text"]

#: the ``format`` tag of a saved NaiveRAG store
FORMAT = "cfjax.peers.naive_rag/1"


def turn_text(task: Task, action: str, feedback: str) -> str:
    """One turn as it is stored and shown: the task question, the action, the evaluator's feedback."""
    return f"Task: {task.question}\nAction: {action}\nFeedback: {feedback}"


def query_text(query: RecallQuery) -> str:
    """What a decision is matched by: the task question, plus the draft when one is given."""
    return query.task.question if query.draft is None else f"{query.task.question}\n{query.draft}"


@dataclass(frozen=True)
class StoredTurn:
    """One stored attempt: its id, its text, the task and episode it came from, its attempt index."""

    id: str
    text: str
    source: str
    episode: int
    attempt: int


class NaiveRAGSystem:
    """NaiveRAG as a :class:`~cfjax.memory.MemorySystem` and :class:`~cfjax.memory.FixedStore` (module
    docstring).

    Args:
      ctx: the context (no backbone call is ever made).
      k: items shown at recall (UpliftMem's K = 5).
    """

    def __init__(self, ctx: SystemContext, *, k: int = 5) -> None:
        if k < 1:
            raise ValueError(f"NaiveRAGSystem.k must be ≥ 1, got {k}")
        self.ctx = ctx
        self.k = k
        self.turns: dict[str, StoredTurn] = {}
        self.index = EmbeddingIndex()
        self.frozen = False
        self._next = 0

    # ------------------------------------------------------------------ build and update
    def build(self, experience: Sequence[Experience]) -> None:
        """Every turn of every episode, in order (:meth:`update`)."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        """Store each attempt of the episode verbatim (no extraction, no model call)."""
        if self.frozen:
            raise FrozenMemoryError("NaiveRAG memory is frozen: no turn may be added during held-out evaluation")
        for i, a in enumerate(experience.attempts):
            self._add(StoredTurn(f"turn{self._next}", turn_text(experience.task, a.action, a.feedback),
                                 experience.task.task_id, experience.episode, i))

    def _add(self, t: StoredTurn) -> None:
        self.turns[t.id] = t
        self.index.add(t.id, t.text)
        self._next += 1

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def native(self, query: RecallQuery, k: int) -> list[str]:
        """The ``k`` turns most similar to the question (+ draft), never the task's own (mutates nothing)."""
        own = query.task.task_id
        return [i for i, _ in self.index.topk(query_text(query), k, keep=lambda i: self.turns[i].source != own)]

    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The top :attr:`k` turns (:meth:`native`) as one memory set, ``None`` when there are none."""
        return memory_set([(i, self.turns[i].text) for i in self.native(query, self.k)])

    def export_items(self) -> list[tuple[str, str]]:
        """Every stored turn as ``(id, text)`` in insertion order, the text as a memory set shows it."""
        return [(t.id, t.text.strip()) for t in self.turns.values()]

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        rows = [[t.id, t.text, t.source, t.episode, t.attempt] for t in self.turns.values()]
        save_store(path, FORMAT, {"turns": rows, "next_id": self._next})

    def load(self, path: Path) -> None:
        """Replace the store with a saved one (embeddings recomputed from the texts).

        Raises:
          ValueError: not a NaiveRAG store, or a field missing or malformed (named with the file)."""
        data = load_store(path, FORMAT, "cfjax NaiveRAG", {"turns": list, "next_id": int})
        turns: dict[str, StoredTurn] = {}
        for n, row in enumerate(data["turns"]):
            if not (isinstance(row, list) and len(row) == 5 and all(isinstance(x, str) for x in row[:3])
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in row[3:])):
                raise ValueError(f"{path}: field 'turns[{n}]' must be [id, text, source, episode, attempt]")
            if row[0] in turns:
                raise ValueError(f"{path}: field 'turns[{n}]' repeats the id {row[0]!r}")
            turns[row[0]] = StoredTurn(*row)
        self.turns, self.index = {}, EmbeddingIndex(self.index.embedder)
        for t in turns.values():
            self.turns[t.id] = t
            self.index.add(t.id, t.text)
        self._next = data["next_id"]

    def summary(self) -> dict:
        return {"turns": len(self.turns), "tasks": len({t.source for t in self.turns.values()}),
                "episodes": len({(t.source, t.episode) for t in self.turns.values()})}

    def __len__(self) -> int:
        return len(self.turns)

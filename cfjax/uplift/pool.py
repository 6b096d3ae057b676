"""The memory pool ``M_t``, similarity recall, and execution-validated writing.

papers/upliftmem.md §3.1, §4.4, App. B.3 (iterative writing and validation), App. E.4–E.5 (writer and
revision interfaces), App. D.3 (every validation attempt is an execution in the ledger).

* :class:`MemoryPool` — memories with their text embeddings in a FAISS flat index
  (:class:`cfjax.infra.index.VectorIndex`); :meth:`MemoryPool.recall` returns the ``N`` most similar
  memories to a task (§4.2: similarity recall supplies the candidates).
* :class:`Writer` — App. B.3. A completed trajectory yields a candidate (the backbone's WRITE_MEMORY
  call); the candidate is validated on its source task by the paired singleton label
  ``u_k = U(τ_{M_k}) − U(τ_∅)``; it is accepted if ``u_k > τ_accept``, else revised (REVISE_MEMORY, from
  its own validation run) at most ``T`` times, the best version tracked. The selected version is the
  first one above the threshold, or the best when the budget is spent; the pool admits it only if
  ``u > τ_accept``. **Every validated version's label enters D_v, admitted or not** (issue 13; the paper
  keeps the selected version's) — the writer returns all of them.

The writer and the reviser are ordinary backbone calls (:data:`cfjax.uplift.calls.WRITE_MEMORY`,
:data:`~cfjax.uplift.calls.REVISE_MEMORY`) with their own prompts, so an OpenAI-compatible
model writes memories exactly as the scripted backbone does. They read the task, their own trajectory,
the validation outcome and related memories — never an answer key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.index import IndexConfig, VectorIndex
from cfjax.infra.ledger import Ledger
from cfjax.llm.prompts import count_tokens
from cfjax.types import Attempt, Backbone, Task
from cfjax.uplift.calls import REVISE_MEMORY, WRITE_MEMORY, ReviseMemoryRequest, WriteMemoryRequest
from cfjax.uplift.core import Label, Labeler, Memory

__all__ = ["MemoryPool", "Writer", "WriteOutcome", "task_text"]


def task_text(task: Task) -> str:
    """What recall embeds of a task: its question (what an agent sees first)."""
    return task.question


class MemoryPool:
    """Memories, their embeddings and a FAISS index for recall.

    Every memory ever made — admitted or only a validated candidate — gets a unique id (``m0``, ``m1``,
    …) and stays in the *registry* (:meth:`get`, :meth:`embedding`), so labels of rejected candidates
    keep their members; only admitted memories are in the pool (``len``, iteration, :meth:`recall`).

    Args:
      embed_dim: width of the hashed text embedding.
      index: when recall switches from exact to IVF search (``RetrievalSection.index``);
        ``None`` = the default :class:`~cfjax.infra.index.IndexConfig`.
    """

    def __init__(self, embed_dim: int = 256, index: IndexConfig | None = None) -> None:
        self.embedder = HashingEmbedder(dim=embed_dim)
        self.index = VectorIndex(embed_dim, bias_weight=0.0, config=index)
        self.memories: list[Memory] = []  # admitted, in admission order
        self._registry: dict[str, tuple[Memory, np.ndarray]] = {}
        self._rows: dict[int, Memory] = {}  # index id → memory
        self._admitted: set[str] = set()

    def __len__(self) -> int:
        return len(self.memories)

    def __iter__(self):
        return iter(self.memories)

    def get(self, mem_id: str) -> Memory:
        return self._registry[mem_id][0]

    def embedding(self, mem_id: str) -> np.ndarray:
        return self._registry[mem_id][1]

    def make(self, text: str, *, source_task: str = "", meta: dict | None = None, mem_id: str | None = None
             ) -> Memory:
        """A new memory with the next free id, registered (not admitted)."""
        from cfjax.llm.prompts import parse_memory_lines

        mid = mem_id if mem_id is not None else f"m{len(self._registry)}"
        if mid in self._registry:
            raise ValueError(f"memory id {mid!r} is already registered")
        sup = parse_memory_lines(text).supersedes
        mem = Memory(mid, text, count_tokens(text), source_task, 1 if sup else 0, sup, dict(meta or {}))
        self._registry[mid] = (mem, self.embedder.embed([text])[0])
        return mem

    def add(self, memory: Memory) -> Memory:
        """Admit a registered memory (or register and admit a new one)."""
        if memory.mem_id not in self._registry:
            self._registry[memory.mem_id] = (memory, self.embedder.embed([memory.text])[0])
        if memory.mem_id in self._admitted:
            raise ValueError(f"memory id {memory.mem_id!r} is already in the pool")
        (iid,) = self.index.add(self._registry[memory.mem_id][1][None, :])
        self._rows[int(iid)] = memory
        self._admitted.add(memory.mem_id)
        self.memories.append(memory)
        return memory

    def embed_task(self, task: Task) -> np.ndarray:
        return self.embedder.embed([task_text(task)])[0]

    def recall(self, task: Task, n: int) -> tuple[list[Memory], np.ndarray]:
        """The ``n`` admitted memories most similar to ``task`` (cosine, ties → older memory) and their
        similarities ``f32[≤ n]``."""
        if not self.memories:
            return [], np.zeros((0,), np.float32)
        scores, ids = self.index.search(self.embed_task(task)[None, :], n)
        keep = ids[0] >= 0
        return [self._rows[int(i)] for i in ids[0][keep]], scores[0][keep].astype(np.float32)

    def to_json(self) -> list[dict]:
        """The admitted memories (the frozen pool)."""
        return [{"mem_id": m.mem_id, "text": m.text, "tokens": m.tokens, "source_task": m.source_task,
                 "version": m.version, "supersedes": m.supersedes, "meta": dict(m.meta)} for m in self.memories]

    @classmethod
    def from_json(cls, rows: Sequence[dict], embed_dim: int = 256) -> "MemoryPool":
        pool = cls(embed_dim)
        for r in rows:
            pool.add(Memory(r["mem_id"], r["text"], int(r["tokens"]), r.get("source_task", ""),
                            int(r.get("version", 0)), r.get("supersedes"), dict(r.get("meta", {}))))
        return pool


@dataclass
class WriteOutcome:
    """What one writing episode produced (App. B.3)."""

    labels: list[Label] = field(default_factory=list)  # every validated version's label (D_v)
    versions: list[str] = field(default_factory=list)  # the candidate texts, in order
    uplifts: list[float] = field(default_factory=list)
    selected: int = -1  # index of the selected version (-1: no candidate)
    admitted: Memory | None = None


class Writer:
    """Execution-validated writing (App. B.3; module docstring).

    Args:
      backbone: the writer/reviser model (the executor's backbone in our runs).
      labeler: paired labels and the execution log.
      pool: the pool candidates are admitted to.
      revisions: ``T``, revisions at most.
      tau_accept: acceptance and admission threshold.
      n_related: related memories shown to the writer.
    """

    def __init__(self, backbone: Backbone, labeler: Labeler, pool: MemoryPool, *, revisions: int = 3,
                 tau_accept: float = 0.0, n_related: int = 3) -> None:
        self.backbone = backbone
        self.labeler = labeler
        self.pool = pool
        self.revisions = revisions
        self.tau_accept = tau_accept
        self.n_related = n_related

    def _related(self, task: Task) -> tuple[tuple[str, str], ...]:
        mems, _ = self.pool.recall(task, self.n_related)
        return tuple((m.mem_id, m.text) for m in mems)

    def write(self, task: Task, trajectory: Sequence[Attempt], solved: bool, *, seed: int, ledger: Ledger,
              validate: bool = True) -> WriteOutcome:
        """One writing episode from a completed trajectory of ``task`` (draft seed ``seed``).

        ``validate=False`` (bootstrap only) admits the first candidate without executing it."""
        out = WriteOutcome()
        related = self._related(task)
        res = self.backbone.call(WRITE_MEMORY, WriteMemoryRequest(task, tuple(trajectory), solved, related, seed))
        ledger.llm(task.task_id, res.usage)
        text = res.text
        if not text:
            return out
        if not validate:
            out.versions.append(text)
            out.selected = 0
            out.admitted = self.pool.add(self.pool.make(text, source_task=task.task_id, meta={"phase": "bootstrap"}))
            return out
        best = -1
        for k in range(self.revisions + 1):
            cand = self.pool.make(text, source_task=task.task_id, meta={"revision": k, "phase": "online"})
            label, ex = self.labeler.label(task, [cand], seed=seed, kind="writing")
            out.labels.append(label)
            out.versions.append(text)
            out.uplifts.append(label.y)
            if best < 0 or label.y > out.uplifts[best]:
                best = k
            if label.y > self.tau_accept:
                best = k
                break
            if k == self.revisions:
                break
            rev = self.backbone.call(REVISE_MEMORY, ReviseMemoryRequest(
                task, text, ex.trajectory, ex.solved, label.u_set, label.u_ref, k + 1, related, seed))
            ledger.llm(task.task_id, rev.usage)
            if not rev.text or rev.text == text:
                break
            text = rev.text
        out.selected = best
        if out.uplifts[best] > self.tau_accept:
            out.admitted = self.pool.add(self.pool.get(out.labels[best].members[0]))
        return out

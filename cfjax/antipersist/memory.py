"""Trajectory memory and (for the baselines) an abstraction store.

papers/anti-persistence.md §3.2, App. B.3. Both are embedded with the
512-d hashing embedder on ``instruction ‖ "Initial state:" ‖ truncate(obs, 500)``
and retrieved by cosine similarity (FAISS flat index). Both can be frozen
(held-out evaluation must leave them unchanged) and saved atomically.

Anti-Persistence itself never creates an :class:`AbstractionStore`; only the
abstraction-memory, joint-memory and persist-guidance rows do.

Retrieval is by similarity alone. The paper ranks candidates "after task-type
filtering" (App. B.3), where its task type is the benchmark's task category;
cfjax's nearest analogue, the template family, lives in the answer key and an
agent must not read it (shared/DESIGN.md, the information boundary), so no
type filter is applied: the embedding of the question and environment does
the grouping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from cfjax.antipersist.guidance import Guidance, Rule, Trajectory
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.index import VectorIndex
from cfjax.infra.io import atomic_write_json
from cfjax.types import Task

__all__ = ["embed_text", "FrozenMemoryError", "TrajectoryMemory", "AbstractionStore", "rules_of"]


class FrozenMemoryError(RuntimeError):
    """A frozen memory was asked to change (held-out evaluation)."""


def embed_text(task: Task) -> str:
    """App. B.3: ``instruction ‖ "Initial state:" ‖ truncate(obs, 500)`` (obs = the schema)."""
    return f"{task.question}\nInitial state:\n{task.context[:500]}"


class _Embedded:
    def __init__(self, embedder: HashingEmbedder | None = None) -> None:
        self.embedder = embedder or HashingEmbedder()
        # one FAISS thread: the index is small and searched once per task, where
        # an OpenMP pool costs more than it saves on 2 cores
        self._index = VectorIndex(self.embedder.dim, bias_weight=0.0, num_threads=1)
        self._frozen = False

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> None:
        self._frozen = True

    def unfreeze(self) -> None:
        """Training resumes after an evaluation pass (the protocol alternates)."""
        self._frozen = False

    def _check(self) -> None:
        if self._frozen:
            raise FrozenMemoryError(f"{type(self).__name__} is frozen (held-out evaluation)")

    def _search(self, query: np.ndarray, eligible: np.ndarray, k: int) -> list[int]:
        if len(self._index) == 0 or k <= 0:
            return []
        _, ids = self._index.search(query[None, :].astype(np.float32), k, mask=eligible[None, :])
        return [int(i) for i in ids[0] if i >= 0]


class TrajectoryMemory(_Embedded):
    """``M_k``: tasks, full trajectories and outcomes (App. B.3 retrieval, outcome-filtered)."""

    def __init__(self, embedder: HashingEmbedder | None = None) -> None:
        super().__init__(embedder)
        self.records: list[Trajectory] = []

    def __len__(self) -> int:
        return len(self.records)

    def add(self, traj: Trajectory, task: Task) -> None:
        self._check()
        self._index.add(self.embedder.embed([embed_text(task)]))
        self.records.append(traj)

    def query(self, task: Task) -> np.ndarray:
        return self.embedder.embed([embed_text(task)])[0]

    def retrieve(self, task: Task, *, success: bool | None, k: int,
                 query: np.ndarray | None = None) -> list[Trajectory]:
        """Top-k by similarity among records with the given outcome (None = any); no type filter."""
        q = self.query(task) if query is None else query
        ok = np.array([success is None or r.success == success for r in self.records], bool)
        return [self.records[i] for i in self._search(q, ok, k)]

    def for_mode(self, mode: str, task: Task, B: int, query: np.ndarray | None = None
                 ) -> tuple[list[Trajectory], list[Trajectory], Trajectory | None]:
        """(successes, failures, contrast) a mode's synthesis reads (App. B.3)."""
        if mode == "none":
            return self.retrieve(task, success=None, k=B, query=query), [], None
        if mode in ("imitation", "strategic"):
            return self.retrieve(task, success=True, k=B, query=query), [], None
        if mode == "corrective":
            fails = self.retrieve(task, success=False, k=B, query=query)
            contrast = self.retrieve(task, success=True, k=1, query=query)
            return [], fails, (contrast[0] if contrast else None)
        raise ValueError(f"unknown mode {mode!r}")

    def save(self, path: str | Path) -> None:
        atomic_write_json(Path(path), {"records": [asdict(r) for r in self.records]})


class AbstractionStore(_Embedded):
    """Persistent abstractions (baselines only): retrieved by the similarity of their source task."""

    def __init__(self, embedder: HashingEmbedder | None = None) -> None:
        super().__init__(embedder)
        self.items: list[Guidance] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, g: Guidance, task: Task) -> None:
        self._check()
        if not g.rules:
            return
        self._index.add(self.embedder.embed([embed_text(task)]))
        self.items.append(g)

    def retrieve(self, task: Task, k: int, query: np.ndarray | None = None) -> list[Guidance]:
        q = self.embedder.embed([embed_text(task)])[0] if query is None else query
        return [self.items[i] for i in self._search(q, np.ones(len(self.items), bool), k)]

    def save(self, path: str | Path) -> None:
        atomic_write_json(Path(path), {"items": [asdict(g) for g in self.items]})


def rules_of(items: Sequence[Guidance]) -> list[Rule]:
    return [r for g in items for r in g.rules]


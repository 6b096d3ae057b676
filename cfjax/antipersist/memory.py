"""Trajectory memory and (for the baselines) an abstraction store.

papers/anti-persistence.md §3.2, App. B.3. Both are embedded with the
512-d hashing embedder (:class:`~cfjax.infra.embed.HashingEmbedder`) on one
text per task (:func:`embed_text`) and retrieved by cosine similarity (FAISS
flat index) *after task-type filtering* (App. B.3 "Each candidate set is
ranked by task similarity after task-type filtering"; Table 3 "Task-type
filter on retrieval: restricted to the current task type"). Both can be
frozen (held-out evaluation must leave them unchanged) and saved atomically.

Anti-Persistence itself never creates an :class:`AbstractionStore`; only the
abstraction-memory, joint-memory and persist-guidance rows do.

**Embedding text** (App. B.3 embeds ``instruction ‖ "Initial state:" ‖
truncate(obs, 500)``). In the paper's benchmarks the initial observation is
the task's own starting state (an ALFWorld room, a WebShop page); in cfjax
the only "observation" is ``Task.context``, the *environment's* schema or
instance text, identical for every task of an environment and hundreds of
characters long. Embedded verbatim it dominates the vector: two SQL tasks on
one database score cos ≈ 0.98 whatever they ask, so the ρ = 0.7 fallback
never fires and only 40 % of a SQL task's five nearest neighbours share its
error family (90 % with the default text; measured,
:class:`cfjax.config.antipersist.APConfig` has the table). The
default text (``"question_cues"``) is therefore the instruction followed by
the cue phrases the suite's observable parser matched in it
(``Task.attrs["cues"]``)::

    <question>
    Cues: <cue 1>; <cue 2>      (or "Cues: none")

``"paper"`` keeps the App. B.3 text (question, ``"Initial state:"``, the
first 500 characters of ``Task.context``) for comparison
(``APConfig.embed_text``).

**Task type** (:func:`task_type`). The paper's task type is the benchmark's
task category (ALFWorld's six categories), which an agent reads off the
instruction. cfjax's analogue must be just as observable: it is the task's
action language plus the *names* of the observable attributes its parser
set (``Task.domain`` and the sorted keys of ``Task.attrs`` without
``question`` and ``cues``), e.g. ``sql:bound_side+boundary+column_type+env+tables``
for a question with a bound cue. It never reads an answer key (the
template family lives there and an agent must not read it — shared/DESIGN.md,
the information boundary); where the parser missed a cue the task simply
falls into its domain's cue-less type. Filtering is strict, as in the
paper: a task whose type has no stored record of the needed outcome
retrieves nothing (a synthesis mode then returns empty guidance, κ = 0).
``APConfig.type_filter = False`` ranks by similarity alone.

Embeddings are cached per task id (a task's text never changes), so a task
seen in several iterations, and a held-out task evaluated after every
iteration, is embedded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from cfjax.antipersist.guidance import Guidance, Rule, Trajectory
from cfjax.config.antipersist import EMBED_TEXTS  # the embedding texts embed_text knows (APConfig.embed_text)
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.index import VectorIndex
from cfjax.infra.io import atomic_write_json
from cfjax.types import Task

__all__ = ["EMBED_TEXTS", "embed_text", "task_type", "FrozenMemoryError", "TrajectoryMemory", "AbstractionStore",
           "rules_of"]


class FrozenMemoryError(RuntimeError):
    """A frozen memory was asked to change (held-out evaluation)."""


#: ``Task.attrs`` keys that are not attribute names of the task type
_NOT_TYPE_KEYS = frozenset({"question", "cues"})


def embed_text(task: Task, kind: str = "question_cues") -> str:
    """The text embedded for a task (module docstring).

    ``"question_cues"``: ``question ‖ "Cues:" ‖ the observable cue phrases``;
    ``"paper"``: App. B.3's ``instruction ‖ "Initial state:" ‖ truncate(obs, 500)`` (obs = ``Task.context``).
    """
    if kind == "question_cues":
        cues = tuple(task.attrs.get("cues", ()))
        return f"{task.question}\nCues: {'; '.join(cues) if cues else 'none'}"
    if kind == "paper":
        return f"{task.question}\nInitial state:\n{task.context[:500]}"
    raise ValueError(f"unknown embedding text {kind!r}; choose from {EMBED_TEXTS}")


def task_type(task: Task) -> str:
    """The observable task type (module docstring): ``Task.domain`` and the names of the
    observable attributes the suite's parser set, e.g. ``"sql:bound_side+boundary+column_type+env+tables"``."""
    return f"{task.domain}:" + "+".join(sorted(k for k in task.attrs if k not in _NOT_TYPE_KEYS))


class _Embedded:
    def __init__(self, embedder: HashingEmbedder | None = None, *, text: str = "question_cues",
                 type_filter: bool = True) -> None:
        if text not in EMBED_TEXTS:
            raise ValueError(f"unknown embedding text {text!r}; choose from {EMBED_TEXTS}")
        self.embedder = embedder or HashingEmbedder()
        self.text = text
        self.type_filter = bool(type_filter)
        self.types: list[str] = []  # observable task type of each entry (task_type of its source task)
        self._cache: dict[str, np.ndarray] = {}  # task id → embedding
        self._type_ids: dict[str, int] = {}
        self._type_col: list[int] = []  # type id of each entry (a vectorised mirror of ``types``)
        self._arr: dict[str, np.ndarray] = {}  # cached NumPy views of per-entry columns, by name
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

    def query(self, task: Task) -> np.ndarray:
        """The task's embedding ``e_τ`` (App. B.3), cached per task id."""
        q = self._cache.get(task.task_id)
        if q is None:
            q = self._cache[task.task_id] = self.embedder.embed([embed_text(task, self.text)])[0]
        return q

    def _push_type(self, task: Task) -> None:
        t = task_type(task)
        self.types.append(t)
        self._type_col.append(self._type_ids.setdefault(t, len(self._type_ids)))

    def _column(self, name: str, values: list) -> np.ndarray:
        """``np.asarray(values)``, rebuilt only when the store grew."""
        a = self._arr.get(name)
        if a is None or len(a) != len(values):
            a = self._arr[name] = np.asarray(values)
        return a

    def _eligible(self, task: Task, ok: np.ndarray) -> np.ndarray:
        """``ok`` restricted to entries of the task's observable type (when filtering)."""
        if self.type_filter:
            tid = self._type_ids.get(task_type(task), -1)
            ok = ok & (self._column("type", self._type_col) == tid)
        return ok

    def _search(self, query: np.ndarray, eligible: np.ndarray, k: int) -> list[int]:
        if len(self._index) == 0 or k <= 0 or not eligible.any():
            return []
        _, ids = self._index.search(query[None, :].astype(np.float32), k, mask=eligible[None, :])
        return [int(i) for i in ids[0] if i >= 0]


class TrajectoryMemory(_Embedded):
    """``M_k``: tasks, full trajectories and outcomes (App. B.3 retrieval: type-filtered, outcome-filtered)."""

    def __init__(self, embedder: HashingEmbedder | None = None, *, text: str = "question_cues",
                 type_filter: bool = True) -> None:
        super().__init__(embedder, text=text, type_filter=type_filter)
        self.records: list[Trajectory] = []
        self._success: list[bool] = []

    def __len__(self) -> int:
        return len(self.records)

    def add(self, traj: Trajectory, task: Task) -> None:
        self._check()
        self._index.add(self.query(task)[None, :])
        self.records.append(traj)
        self._success.append(bool(traj.success))
        self._push_type(task)

    def retrieve(self, task: Task, *, success: bool | None, k: int,
                 query: np.ndarray | None = None) -> list[Trajectory]:
        """Top-k by similarity among records of the task's type (if filtering) with the given outcome
        (None = any)."""
        q = self.query(task) if query is None else query
        if success is None:
            ok = np.ones(len(self.records), bool)
        else:
            ok = self._column("success", self._success) == success
        return [self.records[i] for i in self._search(q, self._eligible(task, ok), k)]

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

    def __init__(self, embedder: HashingEmbedder | None = None, *, text: str = "question_cues",
                 type_filter: bool = True) -> None:
        super().__init__(embedder, text=text, type_filter=type_filter)
        self.items: list[Guidance] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, g: Guidance, task: Task) -> None:
        self._check()
        if not g.rules:
            return
        self._index.add(self.query(task)[None, :])
        self.items.append(g)
        self._push_type(task)

    def retrieve(self, task: Task, k: int, query: np.ndarray | None = None) -> list[Guidance]:
        """Top-k stored abstractions by the similarity of their source task, among sources of the task's
        type (the same retrieval operator R as for trajectories, so rows differ only in what they store)."""
        q = self.query(task) if query is None else query
        return [self.items[i] for i in self._search(q, self._eligible(task, np.ones(len(self.items), bool)), k)]

    def save(self, path: str | Path) -> None:
        atomic_write_json(Path(path), {"items": [asdict(g) for g in self.items]})


def rules_of(items: Sequence[Guidance]) -> list[Rule]:
    return [r for g in items for r in g.rules]


"""MemP: a procedural memory keyed by the task query, built, retrieved, updated and deprecated.

Fang et al., *Memp: Exploring Agent Procedural Memory* (2025), §3 and repository zjunlp/MemP,
``ProcedureMem/memory.py``. Each memory is one past task: its **query** (the key that is embedded) and
the metadata ``{workflow, facts, hit, success}`` (plus the raw trajectory when the build keeps it).

* **Build** (``build=``): ``"script"`` — a workflow the model distils from the trajectory (MEMP_DISTILL,
  :mod:`cfjax.peers.memp.calls`); ``"trajectory"`` — the raw attempts, no call; ``"both"`` (default) —
  the paper's *proceduralization*, script and trajectory together (its best build, §4; the format
  ``SCRIPT … TRAJECTORY …`` of MemRL's ``ProceduralizationBuilder``). A query already stored is not
  stored again (``process_trajectory_item``).
* **Retrieve** (``retrieve=``): ``"query"`` (default) — cosine of the task question against the stored
  queries, top ``k = 10`` at ``threshold = 0.5`` (``retrieve_num``, ``score_threshold``); ``"facts"`` —
  the task's keyword facts (its observable attributes, ``name=value``) against the stored facts, at
  ``facts_threshold = 0.4`` (the code's facts threshold); ``"random"`` — ``k`` memories at random.
* **Update** (``update=``, after each episode): ``"all"`` (the code's *vanilla*) adds every trajectory;
  ``"validation"`` adds successes only; ``"adjust"`` (default; the code's *reflect*, the paper's
  adjustment) adds successes and, after a failure, has the model refine the workflow that was shown
  (MEMP_ADJUST: why did it fail — refine).
* **Bookkeeping and deprecation** (``Memory.update``): each memory shown for a task gets ``hit += 1``;
  when the task succeeded also ``success += 1``; then every memory with ``hit ≥ 3`` and
  ``success / hit < 0.5`` is removed. This runs in :meth:`MempSystem.update`, i.e. only while the
  memory learns (build / training), crediting the memories :meth:`recall` showed for that task and
  episode. What :meth:`recall` mutates: nothing persistent — it only notes, while unfrozen, which
  memories it showed for ``(task, episode)`` (and counts retrievals for :meth:`summary`).

Simplifications (every one): a memory's query is the task question (:func:`cfjax.peers.common.task_key`);
facts are the task's observable attributes, not a model's keyword extraction (TravelPlanner's facts are
dataset fields too); the facts search compares facts with stored facts (the code searches the facts
string against the query store); embeddings are the harness's hashed encoder, whose cosines run lower
than a dense encoder's, so the paper's 0.5 threshold passes fewer memories (kept as the default, exposed);
with several memories shown, the adjustment refines the top-ranked one (MemP passes one workflow per
task); ``build()`` is the same per-episode rule with nothing shown (so under ``"adjust"`` and
``"validation"`` only solved episodes are stored); no memory-size cap (the code's 1,000 is never reached
here); the code's two-step *round* build (events → selected steps) is not implemented (*direct* is).
The retrieved memories are shown with the draft (REVISE_WITH_RECORD, a memory set) rather than in a
system prompt before acting.

What a real model must do that the simulator only draws: write a workflow whose steps generalise
beyond the one task, and — after a failure — diagnose *why* the followed workflow misled and rewrite the
offending step. The scripted backbone writes fixed steps plus the shared lesson model's lesson
(:func:`cfjax.llm.extract.lessons_of`), and its executor acts only on the ``EDIT`` line of a shown
memory: steps and raw trajectories cost tokens (lowering adherence) but change nothing.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import (EmbeddingIndex, attempts_from_json, attempts_to_json, load_store, memory_set,
                                save_store, task_key, trajectory_of)
from cfjax.peers.memp.calls import MEMP_ADJUST, MEMP_DISTILL, AdjustRequest, DistillRequest
from cfjax.types import Attempt, MemoryText, Task

__all__ = ["MempConfig", "Procedure", "MempSystem", "FORMAT", "facts_of"]

#: the ``format`` tag of a saved MemP store
FORMAT = "cfjax.peers.memp/1"

BUILDS = ("script", "trajectory", "both")
RETRIEVES = ("query", "facts", "random")
UPDATES = ("all", "validation", "adjust")


@dataclass(frozen=True)
class MempConfig:
    """MemP's switches and defaults (module docstring; paper §3, zjunlp/MemP ``memory.py``)."""

    build: str = "both"
    retrieve: str = "query"
    update: str = "adjust"
    k: int = 10  # retrieve_num
    threshold: float = 0.5  # query similarity threshold
    facts_threshold: float = 0.4  # facts similarity threshold
    deprecate_hits: int = 3  # deprecate when hit >= 3 ...
    deprecate_rate: float = 0.5  # ... and success / hit < 0.5

    def __post_init__(self) -> None:
        for name, ok in (("build", BUILDS), ("retrieve", RETRIEVES), ("update", UPDATES)):
            if getattr(self, name) not in ok:
                raise ValueError(f"MempConfig.{name} must be one of {ok}, got {getattr(self, name)!r}")
        if self.k < 1:
            raise ValueError(f"MempConfig.k must be >= 1, got {self.k}")


def facts_of(task: Task) -> tuple[str, ...]:
    """The task's keyword facts: its observable attributes as ``name=value`` (the question excluded)."""
    out = []
    for key in sorted(task.attrs):
        if key == "question":
            continue
        v = task.attrs[key]
        out.append(f"{key}={', '.join(map(str, v)) if isinstance(v, (tuple, list)) else v}")
    return tuple(out)


@dataclass
class Procedure:
    """One procedural memory: the query it is keyed by and ``{workflow, facts, hit, success}``."""

    mid: str
    source: str  # the task id it came from (never shown to that task)
    query: str
    facts: tuple[str, ...]
    workflow: str  # the workflow body ("" when only the trajectory is kept)
    trajectory: tuple[Attempt, ...]  # kept when build is "trajectory" or "both"
    hit: int = 0
    success: int = 0

    def text(self) -> str:
        """How the memory is shown: the query, then its workflow and/or trajectory."""
        parts = [f"TASK: {self.query}"]
        if self.workflow:
            parts.append(f"WORKFLOW:\n{self.workflow}")
        if self.trajectory:
            parts.append(f"TRAJECTORY:\n{trajectory_of(self.trajectory)}")
        return "\n\n".join(parts)


class MempSystem:
    """MemP as a :class:`~cfjax.memory.MemorySystem` (module docstring)."""

    def __init__(self, ctx: SystemContext, config: MempConfig = MempConfig(), index: EmbeddingIndex | None = None
                 ) -> None:
        self.ctx = ctx
        self.config = config
        self.items: dict[str, Procedure] = {}
        self._by_query = EmbeddingIndex(index.embedder if index else None)
        self._by_facts = EmbeddingIndex(self._by_query.embedder)
        self._next = 0
        self.deprecated = 0
        self.adjusted = 0
        self.frozen = False
        self._lock = threading.Lock()
        self._shown: dict[tuple[str, int], list[str]] = {}
        self.recalls = 0  # retrievals made (diagnostics)
        self.recalls_nonempty = 0  # retrievals that found at least one memory

    # ------------------------------------------------------------------ store
    def _insert(self, p: Procedure) -> None:
        self.items[p.mid] = p
        self._by_query.add(p.mid, p.query)
        self._by_facts.add(p.mid, "; ".join(p.facts))

    def _remove(self, mid: str) -> None:
        self.items.pop(mid, None)
        self._by_query.remove(mid)
        self._by_facts.remove(mid)

    def __len__(self) -> int:
        return len(self.items)

    # ------------------------------------------------------------------ build and update
    def build(self, experience: Sequence[Experience]) -> None:
        """The per-episode update rule over finished episodes, in order (nothing was shown for them)."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        """Credit the memories shown for this episode, deprecate, then add / adjust (module docstring)."""
        if self.frozen:
            raise FrozenMemoryError("MemP memory is frozen: no memory may be added or adjusted during evaluation")
        with self._lock:
            shown = self._shown.pop((experience.task.task_id, experience.episode), [])
        self._learn(experience, shown)

    def _learn(self, exp: Experience, shown: Sequence[str]) -> None:
        c = self.config
        present = [m for m in shown if m in self.items]
        for mid in present:
            self.items[mid].hit += 1
            self.items[mid].success += int(exp.solved)
        for mid in [m for m, p in self.items.items()
                    if p.hit >= c.deprecate_hits and p.success / p.hit < c.deprecate_rate]:
            self._remove(mid)
            self.deprecated += 1
        if c.update == "all" or exp.solved:
            self._add(exp)
        elif c.update == "adjust" and present and present[0] in self.items:
            self._adjust(self.items[present[0]], exp)

    def _add(self, exp: Experience) -> None:
        query = task_key(exp.task)
        if not exp.attempts or any(p.query == query for p in self.items.values()):
            return  # the code stores a query once
        workflow = ""
        if self.config.build in ("script", "both"):
            res = self.ctx.backbone.call(MEMP_DISTILL, DistillRequest(exp.task, exp.attempts, exp.solved, exp.episode))
            self.ctx.ledger.llm(exp.task.task_id, res.usage, verification=True)
            workflow = res.workflow
            if not workflow and self.config.build == "script":
                return
        traj = exp.attempts if self.config.build in ("trajectory", "both") else ()
        self._insert(Procedure(f"p{self._next}", exp.task.task_id, query, facts_of(exp.task), workflow, tuple(traj)))
        self._next += 1

    def _adjust(self, p: Procedure, exp: Experience) -> None:
        res = self.ctx.backbone.call(MEMP_ADJUST, AdjustRequest(exp.task, p.workflow, exp.attempts, exp.episode))
        self.ctx.ledger.llm(exp.task.task_id, res.usage, verification=True)
        if not res.parse_failed and res.workflow and res.workflow != p.workflow:
            p.workflow = res.workflow
            self.adjusted += 1

    def freeze(self) -> None:
        self.frozen = True
        with self._lock:
            self._shown.clear()

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def retrieve(self, task: Task, episode: int) -> list[str]:
        """The ids MemP retrieves for ``task`` (never the task's own memories), best first."""
        c = self.config
        own = task.task_id

        def keep(mid: str) -> bool:
            return self.items[mid].source != own

        if c.retrieve == "query":
            return [m for m, _ in self._by_query.topk(task_key(task), c.k, keep=keep, threshold=c.threshold)]
        if c.retrieve == "facts":
            return [m for m, _ in self._by_facts.topk("; ".join(facts_of(task)), c.k, keep=keep,
                                                      threshold=c.facts_threshold)]
        pool = sorted((m for m in self.items if keep(m)), key=lambda m: int(m[1:]))
        rng = random.Random(f"memp/{self.ctx.seed}/{own}/{episode}")  # seeded by (seed, task, episode)
        return rng.sample(pool, min(c.k, len(pool)))

    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The retrieved memories as one set (once per task: the same for every attempt of an episode)."""
        if not self.items:
            return None
        ids = self.retrieve(query.task, query.episode)
        with self._lock:
            self.recalls += 1
            self.recalls_nonempty += bool(ids)
            if not self.frozen and ids:
                seen = self._shown.setdefault((query.task.task_id, query.episode), [])
                seen += [m for m in ids if m not in seen]
        return memory_set([(m, self.items[m].text()) for m in ids])

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        save_store(Path(path), FORMAT, {
            "next": self._next, "deprecated": self.deprecated, "adjusted": self.adjusted,
            "items": [{"mid": p.mid, "source": p.source, "query": p.query, "facts": list(p.facts),
                       "workflow": p.workflow, "trajectory": attempts_to_json(p.trajectory), "hit": p.hit,
                       "success": p.success} for p in self.items.values()]})

    def load(self, path: Path) -> None:
        """Replace the memory with a saved store (embeddings recomputed).

        Raises:
          ValueError: one line naming the file and the bad field."""
        data = load_store(Path(path), FORMAT, "MemP", {"next": int, "deprecated": int, "adjusted": int, "items": list})
        fields = {"mid": str, "source": str, "query": str, "facts": list, "workflow": str, "trajectory": list,
                  "hit": int, "success": int}
        items = []
        for i, row in enumerate(data["items"]):
            for key, typ in fields.items():
                if not isinstance(row, dict) or not isinstance(row.get(key), typ):
                    raise ValueError(f"{path}: items[{i}].{key} must be a {typ.__name__}")
            items.append(Procedure(row["mid"], row["source"], row["query"], tuple(map(str, row["facts"])),
                                   row["workflow"], attempts_from_json(row["trajectory"], f"{path}: items[{i}]"),
                                   row["hit"], row["success"]))
        self.items = {}
        self._by_query = EmbeddingIndex(self._by_query.embedder)
        self._by_facts = EmbeddingIndex(self._by_query.embedder)
        for p in items:
            self._insert(p)
        self._next, self.deprecated, self.adjusted = data["next"], data["deprecated"], data["adjusted"]

    def summary(self) -> dict:
        return {"memories": len(self.items), "hits": sum(p.hit for p in self.items.values()),
                "successes": sum(p.success for p in self.items.values()), "deprecated": self.deprecated,
                "adjusted": self.adjusted, "recalls": self.recalls, "recalls_nonempty": self.recalls_nonempty}

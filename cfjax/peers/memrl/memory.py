"""MemRL: MemP-style episodic memories with a learned utility Q each, two-phase retrieval and a
Monte-Carlo Q update after every task.

Zhang et al., *MemRL: Self-Evolving Agents via Runtime Reinforcement Learning on Episodic Memory*
(arXiv:2601.03192, 2026), §3; repository MemTensor/MemRL, ``memrl/service/memory_service.py``
(``retrieve_query``, ``update_values``, ``add_memories``), ``memrl/service/value_driven.py``
(``QValueUpdater``) and ``configs/rl_bcb_config.yaml``.

* **Memory**: intent (the task query, embedded), experience (``SCRIPT`` from MEMRL_DISTILL and/or the
  raw ``TRAJECTORY``; ``build="both"``, the configs' *proceduralization*, is the default) and utility
  ``Q`` (``q_init = 0`` for successes and failures alike). Every finished episode is added
  (``add_memories``: success or failure); a new query whose cosine with a stored query is at least
  ``add_similarity_threshold = 0.9`` joins that query's group.
* **Phase A**: the ``k1 = 5`` stored queries most similar to the task (cosine ≥ ``threshold``); the
  candidates are every memory under them (``retrieve_query``'s ``k`` is over queries).
* **Phase B**: ``score = w_sim·z(sim) + w_q·z(Q)`` with ``w_sim = w_q = 0.5``, ``z`` the z-score over
  the candidates (population std; zero std → 0; the Q z-score clipped to ±3 as in the code); candidates
  with ``Q < q_min = -0.8`` are dropped; ε-greedy with ``ε = 0.1``: with probability ε the ``k2 = 5``
  shown memories are a uniform random sample of the surviving candidates (``random.sample``), else the
  top ``k2`` by score. Draws come from a numpy Generator seeded by ``(seed, task, episode, attempt)``.
* **Update** (after the task): ``Q ← (1 − α)·Q + α·r`` with ``r = +1`` solved / ``−1`` failed, credited to
  **every** memory injected in that episode (the union over its attempts), ``α = 0.3`` (the BigCodeBench
  config; ``RLConfig``'s code default 0.1 is the option ``alpha=0.1``), ``γ = 0``; then the episode is
  added as a new memory.
* **Frozen** (held-out evaluation): no Q update and no addition; ε-greedy stays on — the code's validation
  phase calls the same ``retrieve_query`` with the same ε (``eval_epsilon=None``; ``eval_epsilon=0.0``
  makes evaluation greedy). :meth:`recall` mutates nothing persistent: it notes, while unfrozen, which
  memories it injected for ``(task, episode)`` so that :meth:`update` can credit them.

Paper/code choices: the similarity threshold of Phase A is ``0.0`` here (``retrieve_query``'s default;
the BigCodeBench config sets ``sim_threshold = 0.5`` for text-embedding-3-large, whose cosines run much
higher than the harness's hashed encoder's — exposed as ``threshold``); the code z-normalises similarity
with fixed corpus statistics (``sim_norm_mean/std``, 0.31/0.10 for BigCodeBench) that do not transfer to
our encoder, so similarity is z-scored over the candidates like Q (``sim_norm=(mean, std)`` restores the
code's form).

Simplifications (every one): the query is the task question; the recency boost, the unknown-detection
τ, the novelty merge of rewards (``reward_merge_gain``), the LLB task de-duplication and the chain-MDP
variant are not implemented (off or unused in the BigCodeBench config); MemP's workflow *adjustment* is
not layered on (this row is the Q-learning layer); no memory-size cap; the injected memories are shown
with the draft (REVISE_WITH_RECORD, a memory set); a task never sees its own memories.

What a real model must do that the simulator only draws: write a script whose steps carry over to a
different task, and use an injected experience selectively. The scripted backbone writes fixed steps
plus the shared lesson (:func:`cfjax.llm.extract.lessons_of`) and acts only on shown ``EDIT`` lines;
the utilities are learned from real outcomes either way.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import (EmbeddingIndex, attempts_from_json, attempts_to_json, load_store, memory_set,
                                save_store, task_key, trajectory_of)
from cfjax.peers.memrl.calls import MEMRL_DISTILL, ScriptRequest
from cfjax.types import Attempt, MemoryText

__all__ = ["MemrlConfig", "EpisodicMemory", "MemrlSystem", "FORMAT", "rank", "choose", "q_update", "generator"]

#: the ``format`` tag of a saved MemRL store
FORMAT = "cfjax.peers.memrl/1"


@dataclass(frozen=True)
class MemrlConfig:
    """MemRL's defaults (module docstring; ``rl_bcb_config.yaml``)."""

    build: str = "both"  # "script" | "trajectory" | "both" (proceduralization)
    threshold: float = 0.0  # Phase A similarity threshold (hashed encoder; the BCB config's 0.5 is an option)
    k1: int = 5  # Phase A: top queries (k_retrieve)
    k2: int = 5  # Phase B: memories injected (topk)
    w_sim: float = 0.5
    w_q: float = 0.5
    q_min: float = -0.8  # q_min_threshold
    epsilon: float = 0.1
    eval_epsilon: float | None = None  # None: the same ε while frozen (the code's validation phase)
    alpha: float = 0.3  # BCB config (RLConfig default 0.1)
    q_init: float = 0.0
    success_reward: float = 1.0
    failure_reward: float = -1.0
    add_similarity_threshold: float = 0.9
    q_z_clip: float = 3.0
    sim_norm: tuple[float, float] | None = None  # None: z over the candidates; (mean, std): the code's fixed stats

    def __post_init__(self) -> None:
        if self.build not in ("script", "trajectory", "both"):
            raise ValueError(f"MemrlConfig.build must be 'script', 'trajectory' or 'both', got {self.build!r}")
        if self.k1 < 1 or self.k2 < 1:
            raise ValueError("MemrlConfig.k1 and k2 must be >= 1")
        for name in ("epsilon", "alpha"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"MemrlConfig.{name} must be in [0, 1], got {getattr(self, name)}")


@dataclass
class EpisodicMemory:
    """One memory: intent (``query``, grouped under ``key``), experience, utility ``q``."""

    mid: str
    source: str
    key: str
    query: str
    script: str
    trajectory: tuple[Attempt, ...]
    q: float = 0.0
    visits: int = 0

    def text(self) -> str:
        parts = [f"TASK: {self.query}"]
        if self.script:
            parts.append(f"SCRIPT:\n{self.script}")
        if self.trajectory:
            parts.append(f"TRAJECTORY:\n{trajectory_of(self.trajectory)}")
        return "\n\n".join(parts)


def generator(seed: int, *key: object) -> np.random.Generator:
    """A numpy Generator seeded by a stable hash of ``(seed, *key)`` (never global state)."""
    h = hashlib.blake2b(repr((seed, *key)).encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(h, "little"))


def _z(xs: np.ndarray) -> np.ndarray:
    sd = float(xs.std())
    return np.zeros_like(xs) if sd < 1e-12 else (xs - xs.mean()) / sd


def rank(cands: Sequence[tuple[str, float, float]], c: MemrlConfig) -> list[tuple[str, float]]:
    """Phase B scoring of ``[(id, similarity, Q)]``: z over all candidates, drop ``Q < q_min``, sort by
    ``w_sim·z(sim) + w_q·z(Q)`` (descending; ties keep Phase A order). Returns ``[(id, score)]``."""
    if not cands:
        return []
    sims = np.array([s for _, s, _ in cands], dtype=float)
    qs = np.array([q for _, _, q in cands], dtype=float)
    zs = _z(sims) if c.sim_norm is None else (sims - c.sim_norm[0]) / (c.sim_norm[1] or 1.0)
    zq = np.clip(_z(qs), -c.q_z_clip, c.q_z_clip)
    score = c.w_sim * zs + c.w_q * zq
    keep = [(cands[i][0], float(score[i])) for i in range(len(cands)) if qs[i] >= c.q_min]
    return sorted(keep, key=lambda x: -x[1])


def choose(ranked: Sequence[tuple[str, float]], k: int, epsilon: float, rng: np.random.Generator) -> list[str]:
    """ε-greedy over the ranked candidates: with probability ε a uniform random ``k``-sample (in draw
    order), else the top ``k``."""
    k = min(k, len(ranked))
    if k == 0:
        return []
    if rng.random() < epsilon:
        return [ranked[int(i)][0] for i in rng.choice(len(ranked), size=k, replace=False)]
    return [mid for mid, _ in ranked[:k]]


def q_update(q: float, reward: float, alpha: float) -> float:
    """``(1 − α)·Q + α·r`` (γ = 0: one step, Monte-Carlo target)."""
    return (1.0 - alpha) * q + alpha * reward


class MemrlSystem:
    """MemRL as a :class:`~cfjax.memory.MemorySystem` (module docstring)."""

    def __init__(self, ctx: SystemContext, config: MemrlConfig = MemrlConfig(), index: EmbeddingIndex | None = None
                 ) -> None:
        self.ctx = ctx
        self.config = config
        self.items: dict[str, EpisodicMemory] = {}
        self.keys: dict[str, list[str]] = {}  # key text → memory ids
        self._keys = EmbeddingIndex(index.embedder if index else None)
        self._next = 0
        self.q_updates = 0
        self.frozen = False
        self._lock = threading.Lock()
        self._shown: dict[tuple[str, int], list[str]] = {}

    def __len__(self) -> int:
        return len(self.items)

    def _insert(self, m: EpisodicMemory) -> None:
        self.items[m.mid] = m
        if m.key not in self.keys:
            self.keys[m.key] = []
            self._keys.add(m.key, m.key)
        self.keys[m.key].append(m.mid)

    # ------------------------------------------------------------------ build and update
    def build(self, experience: Sequence[Experience]) -> None:
        """Every finished episode becomes a memory (nothing was injected for them: no Q update)."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        """Q-update every memory injected in this episode, then add the episode (module docstring)."""
        if self.frozen:
            raise FrozenMemoryError("MemRL memory is frozen: no Q update or new memory during evaluation")
        c = self.config
        with self._lock:
            shown = self._shown.pop((experience.task.task_id, experience.episode), [])
        r = c.success_reward if experience.solved else c.failure_reward
        for mid in shown:
            m = self.items.get(mid)
            if m is not None:
                m.q = q_update(m.q, r, c.alpha)
                m.visits += 1
                self.q_updates += 1
        self._add(experience)

    def _add(self, exp: Experience) -> None:
        if not exp.attempts:
            return
        c = self.config
        script = ""
        if c.build in ("script", "both"):
            res = self.ctx.backbone.call(MEMRL_DISTILL, ScriptRequest(exp.task, exp.attempts, exp.solved, exp.episode))
            self.ctx.ledger.llm(exp.task.task_id, res.usage, verification=True)
            script = res.script
            if not script and c.build == "script":
                return
        query = task_key(exp.task)
        near = self._keys.topk(query, 1, threshold=c.add_similarity_threshold)
        key = near[0][0] if near else query
        traj = exp.attempts if c.build in ("trajectory", "both") else ()
        self._insert(EpisodicMemory(f"m{self._next}", exp.task.task_id, key, query, script, tuple(traj), c.q_init))
        self._next += 1

    def freeze(self) -> None:
        self.frozen = True
        with self._lock:
            self._shown.clear()

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def candidates(self, query: RecallQuery) -> list[tuple[str, float, float]]:
        """Phase A: ``[(id, similarity of its query, Q)]`` under the ``k1`` most similar queries (not the
        task's own memories)."""
        own = query.task.task_id

        def keep(key: str) -> bool:
            return any(self.items[m].source != own for m in self.keys[key])

        hits = self._keys.topk(task_key(query.task), self.config.k1, keep=keep, threshold=self.config.threshold)
        return [(m, s, self.items[m].q) for key, s in hits for m in self.keys[key] if self.items[m].source != own]

    def select(self, query: RecallQuery) -> list[str]:
        """Phase A then Phase B (ε-greedy drawn from ``(seed, task, episode, attempt)``)."""
        c = self.config
        eps = c.epsilon if not self.frozen or c.eval_epsilon is None else c.eval_epsilon
        rng = generator(self.ctx.seed, "MEMRL", query.task.task_id, query.episode, query.attempt)
        return choose(rank(self.candidates(query), c), c.k2, eps, rng)

    def recall(self, query: RecallQuery) -> MemoryText | None:
        if not self.items:
            return None
        ids = self.select(query)
        if ids and not self.frozen:
            with self._lock:
                seen = self._shown.setdefault((query.task.task_id, query.episode), [])
                seen += [m for m in ids if m not in seen]
        return memory_set([(m, self.items[m].text()) for m in ids])

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        save_store(Path(path), FORMAT, {"next": self._next, "q_updates": self.q_updates, "items": [
            {"mid": m.mid, "source": m.source, "key": m.key, "query": m.query, "script": m.script,
             "trajectory": attempts_to_json(m.trajectory), "q": m.q, "visits": m.visits} for m in self.items.values()]})

    def load(self, path: Path) -> None:
        """Replace the memory with a saved store (embeddings recomputed).

        Raises:
          ValueError: one line naming the file and the bad field."""
        data = load_store(Path(path), FORMAT, "MemRL", {"next": int, "q_updates": int, "items": list})
        fields = {"mid": str, "source": str, "key": str, "query": str, "script": str, "trajectory": list,
                  "q": (int, float), "visits": int}
        rows = []
        for i, row in enumerate(data["items"]):
            for k, typ in fields.items():
                if not isinstance(row, dict) or not isinstance(row.get(k), typ) or isinstance(row.get(k), bool):
                    raise ValueError(f"{path}: items[{i}].{k} must be a "
                                     f"{'number' if isinstance(typ, tuple) else typ.__name__}")
            rows.append(EpisodicMemory(row["mid"], row["source"], row["key"], row["query"], row["script"],
                                       attempts_from_json(row["trajectory"], f"{path}: items[{i}]"),
                                       float(row["q"]), row["visits"]))
        self.items, self.keys = {}, {}
        self._keys = EmbeddingIndex(self._keys.embedder)
        for m in rows:
            self._insert(m)
        self._next, self.q_updates = data["next"], data["q_updates"]

    def summary(self) -> dict:
        qs = [m.q for m in self.items.values()]
        return {"memories": len(self.items), "queries": len(self.keys), "q_updates": self.q_updates,
                "mean_q": round(float(np.mean(qs)), 4) if qs else 0.0}

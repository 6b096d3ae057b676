"""Retrieval: similarity recall, feasibility, and set construction with the kernels.

papers/upliftmem.md §4.2 (Eq. 5–6), App. B.1; SPEC.md §2.2.

A task's candidates ``C(c)`` are the ``N`` (= 50) most similar admitted memories
(:meth:`cfjax.uplift.pool.MemoryPool.recall`). Feasibility (App. B.1): at most ``K`` members, the
injected tokens within the budget, no repeats — enforced inside the kernels by the member cap,
``costs`` (each memory's tokens) and ``budget``. :class:`Retriever` packs candidates into fixed-shape
arrays (``N`` rows, zero padding, a validity mask) and runs, over a batch of tasks in one jitted
``vmap``:

* **test time** — :func:`cfjax.kernels.make_beam_search` with ``W = 2`` (returns ``∅`` when no archived
  set scores above 0);
* **training** — :func:`cfjax.kernels.make_path_sampler` (``π ∝ exp(g/τ_tr)``), whose actions are kept
  for the policy loss;
* **native** — similarity top-K: the recall order, taken while feasible (the baseline row).

Batches are padded to a power of two (at least 8) so a run compiles each function a handful of times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import jax
import numpy as np

from cfjax.kernels.beam import make_beam_search, make_path_sampler
from cfjax.kernels.setscore import make_score_fn
from cfjax.types import Task
from cfjax.uplift.core import Memory
from cfjax.uplift.pool import MemoryPool
from cfjax.uplift.scorer import Featurizer, ScorerTrainer, pad_rows

__all__ = ["Candidates", "Retriever", "native_topk"]


@dataclass
class Candidates:
    """One task's recalled pool, packed (``N`` rows)."""

    task: Task
    memories: list[Memory]  # the recalled memories, in recall order (≤ N)
    ctx: np.ndarray  # f32[d]
    rows: np.ndarray  # f32[N, d_m] (zero padding)
    costs: np.ndarray  # f32[N] tokens
    valid: np.ndarray  # bool[N]
    sims: np.ndarray  # f32[≤ N] recall similarities

    def members(self, mask: np.ndarray) -> list[Memory]:
        """The memories of a member mask, in recall order."""
        return [m for m, on in zip(self.memories, np.asarray(mask)[:len(self.memories)]) if on]


def native_topk(memories: Sequence[Memory], k: int, budget: float) -> list[Memory]:
    """Similarity top-K under the same feasibility (recall order, skipping what would break the budget)."""
    out, used = [], 0.0
    for m in memories:
        if len(out) >= k:
            break
        if used + m.tokens <= budget:
            out.append(m)
            used += m.tokens
    return out


@lru_cache(maxsize=None)
def _compiled(model, k_max: int, width: int, tau: float):
    """Jitted, task-batched beam search and path sampler for one scorer architecture (shared by every
    :class:`Retriever` of the process: one compile per run). ``model`` is a (hashable) flax module."""
    score = make_score_fn(model)

    def beam(params, ctx, rows, costs, valid, budget):
        fn = make_beam_search(lambda c, p, m: score(params, c, p, m), k_max=k_max, width=width)
        return fn(ctx, rows, costs, valid, budget)

    def sample(params, key, ctx, rows, costs, valid, budget):
        fn = make_path_sampler(lambda c, p, m: score(params, c, p, m), k_max=k_max, tau=tau)
        return fn(key, ctx, rows, costs, valid, budget)

    return (jax.jit(jax.vmap(beam, in_axes=(None, 0, 0, 0, 0, 0))),
            jax.jit(jax.vmap(sample, in_axes=(None, 0, 0, 0, 0, 0, 0))))


class Retriever:
    """Recall + packing + the jitted beam search / path sampler for one scorer.

    Args:
      pool: the memory pool (recall, embeddings).
      trainer: the scorer (its current parameters are read at each call).
      n_recall: ``N``; k_max: ``K``; width: beam ``W``; tau: ``τ_tr``; budget: token budget.
      recall: ``task → (memories, similarities)`` in recall order (default: the pool's FAISS recall);
        fixed per-task stores (the controlled suite) pass their own.
    """

    def __init__(self, pool: MemoryPool, trainer: ScorerTrainer, *, n_recall: int, k_max: int, width: int,
                 tau: float, budget: float, recall=None) -> None:
        self.pool, self.trainer = pool, trainer
        self.recall = recall if recall is not None else (lambda task: pool.recall(task, n_recall))
        self.featurizer = Featurizer(pool)
        self.n, self.k, self.budget = n_recall, k_max, float(budget)
        self._beam, self._sample = _compiled(trainer.model, k_max, width, float(tau))

    def candidates(self, task: Task) -> Candidates:
        mems, sims = self.recall(task)
        mems, sims = list(mems)[:self.n], np.asarray(sims)[:self.n]
        d_m = self.trainer.d_mem
        rows = np.zeros((self.n, d_m), np.float32)
        costs = np.zeros((self.n,), np.float32)
        valid = np.zeros((self.n,), bool)
        if mems:
            rows[:len(mems)] = self.featurizer.rows(task, mems)
            costs[:len(mems)] = [m.tokens for m in mems]
            valid[:len(mems)] = True
        return Candidates(task, mems, self.featurizer.context(task), rows, costs, valid, sims)

    def _stack(self, cands: Sequence[Candidates]):
        b = pad_rows(len(cands))
        pad = [cands[0]] * (b - len(cands))
        allc = list(cands) + pad
        return (np.stack([c.ctx for c in allc]), np.stack([c.rows for c in allc]), np.stack([c.costs for c in allc]),
                np.stack([c.valid for c in allc]), np.full((b,), self.budget, np.float32))

    def beam(self, cands: Sequence[Candidates]) -> list[tuple[list[Memory], float]]:
        """Test-time sets (beam search, W = 2) and their values ``G``; ``∅`` when nothing scores > 0."""
        if not cands:
            return []
        res = self._beam(self.trainer.params, *self._stack(cands))
        members = np.asarray(res.members)
        values = np.asarray(res.value)
        return [(c.members(members[i]), float(values[i])) for i, c in enumerate(cands)]

    def sample(self, cands: Sequence[Candidates], key: jax.Array):
        """Training paths (Eq. 6): per task ``(members, actions i32[K+1], length)``."""
        if not cands:
            return []
        arrays = self._stack(cands)
        keys = jax.random.split(key, arrays[0].shape[0])
        res = self._sample(self.trainer.params, keys, *arrays)
        members = np.asarray(res.members)
        actions = np.asarray(res.actions)
        lengths = np.asarray(res.length)
        return [(c.members(members[i]), actions[i], int(lengths[i])) for i, c in enumerate(cands)]

    def native(self, cand: Candidates) -> list[Memory]:
        return native_topk(cand.memories, self.k, self.budget)

    def set_rows(self, task: Task, memories: Sequence[Memory]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ctx f32[d], rows f32[K, d_m], mask bool[K])`` of one set (label storage, scoring)."""
        rows = np.zeros((self.k, self.trainer.d_mem), np.float32)
        mask = np.zeros((self.k,), bool)
        if memories:
            rows[:len(memories)] = self.featurizer.rows(task, memories)
            mask[:len(memories)] = True
        return self.featurizer.context(task), rows, mask


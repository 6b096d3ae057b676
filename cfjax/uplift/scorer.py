"""The set scorer ``G_θ`` in use: features of tasks and memories, labelled data, jitted updates.

papers/upliftmem.md §4.1 (``G(c, ∅) = 0``), §4.4 (``L_value``, ``L_policy``; value-only warm-up, then
both), App. C.1–C.3; SPEC.md §2.4. The scorer and the losses are the kernels
:class:`cfjax.kernels.SetScorer`, :func:`cfjax.kernels.value_loss`, :func:`cfjax.kernels.policy_loss`
and :func:`cfjax.kernels.make_path_log_prob`; this module feeds them fixed-shape batches.

**Features (ours; the paper's scorer is a cross-encoder over the serialised set).** A task's context
is its hashed question embedding ``f32[d]``. A memory's row is its hashed text embedding followed by
five agent-visible cross features a reranker would see by reading query and memory together:
cosine similarity to the task, tokens/200, *scope match* (1 when every ``WHEN question contains``
phrase of the memory occurs in the question, 0 when one does not, ½ without a phrase), an update flag
(a ``SUPERSEDES:`` line) and a linked-note flag (``TRIGGER``/``FIX`` lines). ``d_m = d + 5``.

**Updates.** :class:`ScorerTrainer.update` runs ``steps`` optax steps as one ``lax.scan`` over
pre-sampled minibatches (one jitted call; shapes fixed by the config, so one compile per run). Each step
minimises ``w_value·L_value + w_policy·L_policy``: ``L_value`` over a minibatch of tasks × their most
recent labels (pairs within a task), ``L_policy`` over the *latest batch of paths only* (App. C.3; the
caller passes the paths sampled since the previous update, never older ones), their log-probabilities
recomputed under the current parameters from the recorded candidate pools and actions. The weights
are dynamic: warm-up is ``w_policy = 0``, the ablations zero one of them — no recompiles.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from cfjax.config.uplift import UpliftConfig
from cfjax.kernels.beam import make_path_log_prob
from cfjax.kernels.setscore import SetScorer, init_params, make_feature_fn, make_score_fn, policy_loss, value_loss
from cfjax.llm.prompts import parse_memory_lines
from cfjax.types import Task, contains_phrase
from cfjax.uplift.core import Label, Memory

__all__ = ["N_CROSS", "member_row", "memory_statics", "Featurizer", "LabelStore", "PathRecord", "ScorerTrainer", "UpdateMetrics"]

#: cross features appended to a memory's embedding
N_CROSS = 5
_WHEN_RE = re.compile(r'WHEN question contains "([^"]*)"')


def memory_statics(memory: Memory) -> tuple[tuple[str, ...], float, float, float]:
    """The parts of a memory's row that depend on its text only: its ``WHEN`` phrases, tokens/200, the
    update flag and the linked-note flag (parsed once per memory by :class:`Featurizer`)."""
    lines = parse_memory_lines(memory.text)
    return (tuple(_WHEN_RE.findall(memory.text)), memory.tokens / 200.0, float(lines.supersedes is not None),
            float(bool(lines.triggers or lines.fixes)))


def member_row(task: Task, memory: Memory, mem_emb: np.ndarray, task_emb: np.ndarray,
               statics: tuple | None = None) -> np.ndarray:
    """One memory's scorer row for ``task`` (module docstring): ``f32[d + 5]``."""
    cues, tokens, update, linked = statics if statics is not None else memory_statics(memory)
    scope = 0.5 if not cues else float(all(contains_phrase(task.question, c) for c in cues))
    cross = np.array([float(np.dot(mem_emb, task_emb)), tokens, scope, update, linked], np.float32)
    return np.concatenate([mem_emb.astype(np.float32), cross])


class Featurizer:
    """Task contexts and memory rows from a pool's registry (embeddings are cached there; each memory's
    text is parsed once)."""

    def __init__(self, pool) -> None:
        self.pool = pool
        self._ctx: dict[str, np.ndarray] = {}
        self._statics: dict[str, tuple] = {}

    def context(self, task: Task) -> np.ndarray:
        v = self._ctx.get(task.task_id)
        if v is None:
            v = self._ctx[task.task_id] = self.pool.embed_task(task).astype(np.float32)
        return v

    def _static(self, m: Memory) -> tuple:
        st = self._statics.get(m.mem_id)
        if st is None:
            st = self._statics[m.mem_id] = memory_statics(m)
        return st

    def rows(self, task: Task, memories: Sequence[Memory]) -> np.ndarray:
        ctx = self.context(task)
        d = ctx.shape[0] + N_CROSS
        if not memories:
            return np.zeros((0, d), np.float32)
        return np.stack([member_row(task, m, self.pool.embedding(m.mem_id), ctx, self._static(m)) for m in memories])


class LabelStore:
    """D: every label with its set's rows (members only: non-members contribute exactly 0 to G)."""

    def __init__(self, k_max: int, d_ctx: int, d_mem: int) -> None:
        self.k_max, self.d_ctx, self.d_mem = k_max, d_ctx, d_mem
        self.labels: list[Label] = []
        self.ctx: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []  # f32[k_max, d_mem] (zero padded)
        self.by_task: dict[str, list[int]] = defaultdict(list)

    def __len__(self) -> int:
        return len(self.labels)

    def add(self, label: Label, ctx: np.ndarray, rows: np.ndarray) -> None:
        k = rows.shape[0]
        if not 1 <= k <= self.k_max:
            raise ValueError(f"a label's set has {k} members; the scorer's cap is {self.k_max}")
        pad = np.zeros((self.k_max, self.d_mem), np.float32)
        pad[:k] = rows
        self.by_task[label.task_id].append(len(self.labels))
        self.labels.append(label)
        self.ctx.append(ctx.astype(np.float32))
        self.rows.append(pad)

    def n_members(self, i: int) -> int:
        return len(self.labels[i].members)

    def minibatches(self, rng: np.random.Generator, *, steps: int, tasks: int, per_task: int,
                    which: str = "latest"):
        """``steps`` minibatches of ``tasks`` tasks × ``per_task`` of their labels — the most recent
        (``which = "latest"``) or drawn uniformly without replacement from all of them (``"all"``, in
        label order): ``(ctx f32[S, B, d], rows f32[S, B, M, K, d_m], mask bool[S, B, M, K],
        y f32[S, B, M], valid bool[S, B, M])``."""
        names = [t for t, idx in self.by_task.items() if idx]
        S, B, M, K = steps, tasks, per_task, self.k_max
        ctx = np.zeros((S, B, self.d_ctx), np.float32)
        rows = np.zeros((S, B, M, K, self.d_mem), np.float32)
        mask = np.zeros((S, B, M, K), bool)
        y = np.zeros((S, B, M), np.float32)
        valid = np.zeros((S, B, M), bool)
        if not names:
            return ctx, rows, mask, y, valid
        for s in range(S):
            pick = rng.choice(len(names), size=min(B, len(names)), replace=False)
            for b, ti in enumerate(pick):
                idx = self.by_task[names[ti]]
                if which == "all" and len(idx) > M:
                    idx = [idx[i] for i in sorted(rng.choice(len(idx), M, replace=False))]
                else:
                    idx = idx[-M:]
                ctx[s, b] = self.ctx[idx[0]]
                for m, i in enumerate(idx):
                    rows[s, b, m] = self.rows[i]
                    mask[s, b, m, :self.n_members(i)] = True
                    y[s, b, m] = self.labels[i].y
                    valid[s, b, m] = True
        return ctx, rows, mask, y, valid

    def arrays(self, idx: Sequence[int] | None = None):
        """``(ctx f32[n, d], rows f32[n, K, d_m], mask bool[n, K], y f32[n])`` of the labels ``idx``."""
        idx = list(range(len(self.labels))) if idx is None else list(idx)
        mask = np.zeros((len(idx), self.k_max), bool)
        for j, i in enumerate(idx):
            mask[j, :self.n_members(i)] = True
        return (np.stack([self.ctx[i] for i in idx]) if idx else np.zeros((0, self.d_ctx), np.float32),
                np.stack([self.rows[i] for i in idx]) if idx else np.zeros((0, self.k_max, self.d_mem), np.float32),
                mask, np.array([self.labels[i].y for i in idx], np.float32))


@dataclass
class PathRecord:
    """One sampled retrieval path with what its log-probability needs (App. C.3)."""

    ctx: np.ndarray  # f32[d]
    pool: np.ndarray  # f32[N, d_m]
    costs: np.ndarray  # f32[N]
    valid: np.ndarray  # bool[N]
    budget: float
    actions: np.ndarray  # i32[K+1]
    y: float  # the path's paired label (its final set's uplift)


class UpdateMetrics(NamedTuple):
    loss: np.ndarray  # f32[S]
    value: np.ndarray  # f32[S]
    policy: np.ndarray  # f32[S]


@lru_cache(maxsize=None)
def _optimizer(lr: float, clip: float) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(clip), optax.adam(lr))


@lru_cache(maxsize=None)
def _compiled(hidden: int, features: int, loss_cfg, lr: float, clip: float, k_max: int):
    """The jitted update, scores and features for one static configuration, shared by every
    :class:`ScorerTrainer` of the process (so each compiles once per run, not once per trainer)."""
    model = SetScorer(hidden=hidden, features=features)
    score = make_score_fn(model)
    phi = make_feature_fn(model)
    log_prob = make_path_log_prob(score, k_max=k_max, tau=loss_cfg.tau_tr)
    tx = _optimizer(lr, clip)

    def value_part(params, batch):
        ctx, rows, mask, y, valid = batch
        per_set = jax.vmap(score, in_axes=(None, None, 0, 0))  # over M labels of one task
        G = jax.vmap(per_set, in_axes=(None, 0, 0, 0))(params, ctx, rows, mask)  # f32[B, M]
        return value_loss(G, y, valid, loss_cfg)[0]

    def value_only(params, batch, paths, w_value, w_policy):
        lv = value_part(params, batch)
        return w_value * lv, (lv, jnp.zeros((), jnp.float32))

    def loss_fn(params, batch, paths, w_value, w_policy):
        lv = value_part(params, batch)
        p_ctx, p_pool, p_costs, p_valid, p_budget, p_actions, p_y, p_mask = paths
        lp = jax.vmap(log_prob, in_axes=(None, 0, 0, 0, 0, 0, 0))(params, p_ctx, p_pool, p_costs, p_valid,
                                                                 p_budget, p_actions)
        lpol = policy_loss(lp.total, lp.length, p_y, p_mask, loss_cfg)
        return w_value * lv + w_policy * lpol, (lv, lpol)

    def make_update(objective):
        def update(params, opt_state, batches, paths, w_value, w_policy):
            def step(carry, batch):
                p, o = carry
                (loss, (lv, lpol)), g = jax.value_and_grad(objective, has_aux=True)(p, batch, paths, w_value,
                                                                                     w_policy)
                upd, o = tx.update(g, o, p)
                return (optax.apply_updates(p, upd), o), (loss, lv, lpol)

            (params, opt_state), (loss, lv, lpol) = jax.lax.scan(step, (params, opt_state), batches)
            return params, opt_state, loss, lv, lpol

        return jax.jit(update)

    # two programs: with the policy term, and value-only (warm-up, w_policy = 0, no paths) — the policy's
    # path log-probabilities over N extensions per step are most of an update's cost
    return ((make_update(loss_fn), make_update(value_only)), jax.jit(jax.vmap(score, in_axes=(None, 0, 0, 0))),
            jax.jit(jax.vmap(phi, in_axes=(None, 0, 0, 0))))


def pad_rows(n: int) -> int:
    """Batch sizes are padded to a power of two (at least 8), so a run compiles each program a few times."""
    return max(8, 1 << max(0, (n - 1).bit_length()))


def _padded_call(fn, params, *arrays: np.ndarray) -> np.ndarray:
    """``fn(params, *arrays)`` on arrays zero-padded along axis 0 to :func:`pad_rows`, sliced back (exact:
    the programs are vmapped over that axis, so padding rows never touch the others)."""
    n = arrays[0].shape[0]
    b = pad_rows(n)
    if b > n:
        arrays = tuple(np.concatenate([np.asarray(a), np.zeros((b - n,) + a.shape[1:], a.dtype)]) for a in arrays)
    return np.asarray(fn(params, *arrays))[:n]


class ScorerTrainer:
    """Parameters, optimiser state and the jitted update of one scorer (module docstring).

    Args:
      cfg: the run's config (scorer, loss, training, retrieval sections).
      d_ctx: context width; ``d_mem`` is ``d_ctx + N_CROSS``.
      k_max: memory cap ``K``; n_pool: recall ``N`` (the policy's candidate pool).
      seed: parameter initialisation.
    """

    def __init__(self, cfg: UpliftConfig, *, d_ctx: int, k_max: int, n_pool: int, seed: int = 0) -> None:
        self.cfg = cfg
        self.d_ctx, self.d_mem, self.k_max, self.n_pool = d_ctx, d_ctx + N_CROSS, k_max, n_pool
        self.model = SetScorer(hidden=cfg.scorer.hidden, features=cfg.scorer.features)
        self.score = make_score_fn(self.model)
        self.phi = make_feature_fn(self.model)
        self.params = init_params(self.model, jax.random.PRNGKey(seed), n_pool=k_max, d_context=d_ctx,
                                  d_member=self.d_mem)
        self.tx = _optimizer(cfg.scorer.learning_rate, cfg.scorer.grad_clip)
        self.opt_state = self.tx.init(self.params)
        self.steps_done = 0
        self._update, self._scores, self._features = _compiled(cfg.scorer.hidden, cfg.scorer.features, cfg.loss,
                                                                cfg.scorer.learning_rate, cfg.scorer.grad_clip,
                                                                k_max)

    def _path_arrays(self, paths: Sequence[PathRecord], n_paths: int):
        P, N, K1 = n_paths, self.n_pool, self.k_max + 1
        ctx = np.zeros((P, self.d_ctx), np.float32)
        pool = np.zeros((P, N, self.d_mem), np.float32)
        costs = np.zeros((P, N), np.float32)
        valid = np.zeros((P, N), bool)
        budget = np.ones((P,), np.float32)
        actions = np.full((P, K1), -1, np.int32)
        y = np.zeros((P,), np.float32)
        mask = np.zeros((P,), bool)
        for i, p in enumerate(paths[:P]):
            n = p.pool.shape[0]
            ctx[i], pool[i, :n], costs[i, :n], valid[i, :n] = p.ctx, p.pool, p.costs, p.valid
            budget[i], actions[i], y[i], mask[i] = p.budget, p.actions, p.y, True
        return ctx, pool, costs, valid, budget, actions, y, mask

    def update(self, labels: LabelStore, rng: np.random.Generator, *, steps: int, paths: Sequence[PathRecord] = (),
               w_value: float = 1.0, w_policy: float = 0.0) -> UpdateMetrics:
        """``steps`` optimiser steps in one jitted ``lax.scan`` (module docstring)."""
        t = self.cfg.training
        batches = labels.minibatches(rng, steps=steps, tasks=t.minibatch_tasks, per_task=t.labels_per_task,
                                     which=t.value_labels)
        pa = self._path_arrays(paths, t.update_every)
        with_policy, value_only = self._update
        fn = with_policy if (w_policy != 0.0 and len(paths) > 0) else value_only
        self.params, self.opt_state, loss, lv, lpol = fn(
            self.params, self.opt_state, batches, pa, jnp.float32(w_value), jnp.float32(w_policy))
        self.steps_done += steps
        return UpdateMetrics(np.asarray(loss), np.asarray(lv), np.asarray(lpol))

    # ------------------------------------------------------------------ scoring and features
    def scores(self, ctx: np.ndarray, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``G(c, S)`` for ``n`` sets: ``ctx f32[n, d]``, ``rows f32[n, K', d_m]``, ``mask bool[n, K']``."""
        if len(ctx) == 0:
            return np.zeros((0,), np.float32)
        return _padded_call(self._scores, self.params, ctx, rows, mask)

    def features(self, ctx: np.ndarray, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``φ(c, S)`` ``f32[n, F]`` (0 for ``∅``)."""
        if len(ctx) == 0:
            return np.zeros((0, self.cfg.scorer.features), np.float32)
        return _padded_call(self._features, self.params, ctx, rows, mask)

    def score_fn(self):
        """``score(context, pool, members)`` bound to the current parameters (for the beam kernel)."""
        params = self.params
        return lambda c, p, m: self.score(params, c, p, m)

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        return {"params": self.params, "opt_state": self.opt_state}

    def save(self, directory: str | Path, meta: dict) -> Path:
        """An orbax checkpoint of parameters and optimiser state (the commit protocol of
        :mod:`cfjax.infra.checkpoint`; a later save replaces it only once committed)."""
        from cfjax.infra.checkpoint import save_step

        return save_step(directory, "scorer", self.state(), {**meta, "steps_done": self.steps_done,
                                                              "config": dataclasses.asdict(self.cfg.scorer)}, keep=2)

    def restore(self, directory: str | Path) -> dict:
        """Resume from the newest committed checkpoint; returns its metadata."""
        from cfjax.infra.checkpoint import load_latest

        tree, meta, _ = load_latest(directory, "scorer", like=self.state())
        self.params = jax.tree.map(jnp.asarray, tree["params"])
        self.opt_state = jax.tree.map(jnp.asarray, tree["opt_state"])
        self.steps_done = int(meta.get("steps_done", 0))
        return meta

"""The CounterMem selector trainer as one jitted program over a decision table.

papers/countermem.md App. C.2 (Eq. 10–13, Table 3), Algorithm 1 lines 15–25.

A **decision table** is a finite decision graph over the training tasks in
which every choice was checked by the world model from a copy of the same
state (the counterfactual principle CounterMem uses for memory, applied to
the selector). Row ``i`` is one decision: its observation ``obs[i]`` (Eq. 9),
its valid choices ``mask[i]`` and, for each choice ``j``, the Eq. 10 cost
increments (``calls``, ``failed``, ``tokens``), whether that choice solved the
task, and the next row (``-1`` when the episode ends). Because the rewards
are stored as cost increments, the penalties ``λ_w, λ_f, λ_τ`` stay dynamic
hyperparameters.

:func:`make_train` returns raw pure functions. ``train(key, hp, table)`` runs
the whole Table 3 procedure inside the caller's ``jit``: ε-greedy over valid
choices, an index replay buffer (the one ring of :mod:`cfjax.kernels.replay`
holding ``(row, choice)`` pairs — observations are gathered from the table at
sample time, never copied), and the one Table 3 schedule
(:func:`cfjax.kernels.dqn.scheduled_update`: learning starts, train every 4,
target sync), and a greedy evaluation on the validation roots every
``checkpoint_every`` decisions keeping the best parameters. The update step is
the one the online path uses (:func:`cfjax.kernels.dqn.make_dqn`
``train_step``); the reward is :func:`cfjax.kernels.dqn.reward` (Eq. 10). The
scan bodies return their metrics (:class:`TrainMetrics`, exposed by
``train_logged``/``run_logged``). Static: shapes, step counts, buffer size, episode depth.
Dynamic and vmappable: the key and every field of
:class:`~cfjax.kernels.dqn.DQNHParams`.

Episodes start at a root drawn uniformly from ``train_roots`` (our choice,
``DQNConfig.root_order = "uniform"``) or, with ``root_order = "stream"``, at the
next root of Algorithm 1's task stream (lines 16–25: every training root once
per pass, in a shuffled order fixed by ``root_stream_seed``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from cfjax.kernels import dqn
from cfjax.kernels._base import EvaluateFn, PyTree, RunFn, TrainFn, masked_argmax
from cfjax.kernels.replay import ring_push, ring_sample_indices

__all__ = ["DecisionTable", "TrainerState", "TrainMetrics", "TrainOutput", "Trainer", "make_train", "table_reward",
           "evaluate_policy", "table_hash", "as_jax"]

# old import path of the NumPy twin, now in cfjax.kernels.reference.trainer


class DecisionTable(NamedTuple):
    """A counterfactual decision graph (``R`` rows, ``A = 5`` choices)."""

    obs: jnp.ndarray  # f32[R, 98] observation z (Eq. 9)
    mask: jnp.ndarray  # bool[R, A] valid choices (skip always valid)
    calls: jnp.ndarray  # f32[R, A] δw: evaluator calls charged to the choice
    failed: jnp.ndarray  # f32[R, A] δf: failed evaluated actions
    tokens: jnp.ndarray  # f32[R, A] δτ: tokens charged to the decision with this choice
    solved: jnp.ndarray  # bool[R, A] the choice solved the task (then next = -1)
    next: jnp.ndarray  # i32[R, A] next row, -1 = episode over
    train_roots: jnp.ndarray  # i32[N_train] first rows of training episodes
    val_roots: jnp.ndarray  # i32[N_val] selector-validation episodes
    eval_roots: jnp.ndarray  # i32[N_eval] held-out episodes (never trained on)


def table_hash(table: DecisionTable) -> str:
    """SHA-256 over every array of the table (dtype, shape and bytes), in field order."""
    import hashlib

    h = hashlib.sha256()
    for name, arr in zip(DecisionTable._fields, table):
        a = np.ascontiguousarray(np.asarray(arr))
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def as_jax(table: DecisionTable) -> DecisionTable:
    """The table as JAX arrays (a no-op for traced or device arrays)."""
    return DecisionTable(*(jnp.asarray(x) for x in table))


def table_reward(table: DecisionTable, row, choice, hp: dqn.DQNHParams, tau0: float) -> jnp.ndarray:
    """Eq. 10 for ``(row, choice)``: ``1[solved] − λ_w δw − λ_f δf − λ_τ δτ/τ0``.

    ``solved`` implies the episode ends there, so ``1[t = T]·1[solved] = solved``.
    """
    return dqn.reward(table.solved[row, choice], table.calls[row, choice], table.failed[row, choice],
                      table.tokens[row, choice], hp, tau0)


def _skip_only(n_actions: int) -> jnp.ndarray:
    return jnp.zeros((n_actions,), bool).at[0].set(True)


def evaluate_policy(q_values: Callable, params: PyTree, table: DecisionTable, roots: jnp.ndarray,
                    hp: dqn.DQNHParams, *, max_depth: int, tau0: float) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Greedy episodes from every root: ``(mean undiscounted return, solved rate)``.

    Follows ``argmax_{valid j} Q_θ`` for at most ``max_depth`` decisions.
    """
    table = as_jax(table)
    roots = jnp.asarray(roots)

    def one(root):
        def body(_, carry):
            row, ret, solved, active = carry
            r = jnp.maximum(row, 0)
            a = masked_argmax(q_values(params, table.obs[r]), table.mask[r])
            rew = table_reward(table, r, a, hp, tau0)
            ret = ret + jnp.where(active, rew, 0.0)
            solved = solved | (active & table.solved[r, a])
            nxt = table.next[r, a]
            active = active & (nxt >= 0)
            return jnp.where(active, nxt, -1), ret, solved, active

        init = (root, jnp.zeros((), jnp.float32), jnp.zeros((), bool), root >= 0)
        _, ret, solved, _ = jax.lax.fori_loop(0, max_depth, body, init)
        return ret, solved

    rets, solved = jax.vmap(one)(roots)
    if roots.shape[0] == 0:
        return jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32)
    return jnp.mean(rets), jnp.mean(solved.astype(jnp.float32))


class TrainerState(NamedTuple):
    """Everything a run needs to continue bit-exactly (the orbax checkpoint)."""

    learner: dqn.TrainState  # params, target, Adam moments, update count, decisions
    buf_row: jnp.ndarray  # i32[C] replay ring: row of each stored decision
    buf_choice: jnp.ndarray  # i32[C] replay ring: choice taken
    buf_ptr: jnp.ndarray  # i32[] next write slot
    buf_size: jnp.ndarray  # i32[] filled slots (≤ C)
    row: jnp.ndarray  # i32[] current row, -1 = start a new episode
    key: jnp.ndarray  # u32[2] PRNG key
    best_params: PyTree  # params of the best validation checkpoint so far
    best_return: jnp.ndarray  # f32[] its mean validation return
    best_decision: jnp.ndarray  # i32[] decision count at which it was taken
    val_returns: jnp.ndarray  # f32[n_checkpoints] validation return at each checkpoint (nan = not yet)
    train_return: jnp.ndarray  # f32[] sum of rewards collected while training
    episodes: jnp.ndarray  # i32[] training episodes finished


class TrainMetrics(NamedTuple):
    """What the scan bodies return (PureJaxRL's habit): one entry per decision / checkpoint.

    Leading axes ``[n_chunks, checkpoint_every]`` for the per-decision fields (``C`` =
    ``checkpoint_every``), ``[n_chunks]`` for the checkpoint fields.
    """

    learner: dqn.Metrics  # per decision: loss, q_mean, td_abs, grad_norm (0 without update), updated, synced
    reward: jnp.ndarray  # f32[n_chunks, C] Eq. 10 reward of the decision
    epsilon: jnp.ndarray  # f32[n_chunks, C] ε used to choose it (Table 3 schedule)
    episode_done: jnp.ndarray  # bool[n_chunks, C] the decision ended its episode
    val_return: jnp.ndarray  # f32[n_chunks] mean validation return at each checkpoint
    improved: jnp.ndarray  # bool[n_chunks] the checkpoint became the best one


class TrainOutput(NamedTuple):
    """``{"runner_state", "metrics"}`` of PureJaxRL as a typed pytree."""

    runner_state: "TrainerState"  # the final state (as ``train`` returns it)
    metrics: TrainMetrics  # the per-decision / per-checkpoint log


class Trainer(NamedTuple):
    """Pure functions bound to a static configuration (see :func:`make_train`)."""

    config: dqn.DQNConfig
    init: Callable  # (key, hp) -> TrainerState
    run: RunFn  # (state, hp, table, *, n_chunks) -> TrainerState   (n_chunks static)
    train: TrainFn  # (key, hp, table) -> TrainerState
    evaluate: EvaluateFn  # (params, hp, table, roots) -> (mean return, solved rate)
    n_chunks: int  # total validation chunks (decisions = n_chunks × checkpoint_every)
    run_logged: Callable = None  # (state, hp, table, *, n_chunks) -> TrainOutput   (n_chunks static)
    train_logged: Callable = None  # (key, hp, table) -> TrainOutput


def make_train(config: dqn.DQNConfig = dqn.DQNConfig(), *, max_depth: int = 2) -> Trainer:
    """Factory of the jittable table trainer.

    Args:
      config: Table 3 configuration. ``total_decisions`` must be a multiple of
        ``checkpoint_every`` (each chunk of ``checkpoint_every`` decisions ends
        with a validation checkpoint).
      max_depth: the longest episode in the table (``max_attempts``).

    Returns:
      :class:`Trainer`. Every function is an unjitted pure function;
      ``jax.jit(trainer.train)``, ``jax.vmap`` over keys and/or
      hyperparameters, and sharding are the caller's choice. ``train`` and
      ``run`` return the final :class:`TrainerState`; ``train_logged`` and
      ``run_logged`` return :class:`TrainOutput` (the same state plus the
      :class:`TrainMetrics` the scans collect).
    """
    cfg = config
    if cfg.total_decisions % cfg.checkpoint_every:
        raise ValueError(f"total_decisions ({cfg.total_decisions}) must be a multiple of checkpoint_every "
                         f"({cfg.checkpoint_every}) for the table trainer")
    n_chunks = cfg.total_decisions // cfg.checkpoint_every
    sel = dqn.make_dqn(cfg)
    cap = cfg.buffer_capacity
    skip_only = _skip_only(cfg.n_actions)

    def init(key: jax.Array, hp: dqn.DQNHParams) -> TrainerState:
        key = jnp.asarray(key)
        k_net, key = jax.random.split(key)
        learner = sel.init(k_net, hp)
        return TrainerState(
            learner=learner,
            buf_row=jnp.zeros((cap,), jnp.int32),
            buf_choice=jnp.zeros((cap,), jnp.int32),
            buf_ptr=jnp.zeros((), jnp.int32),
            buf_size=jnp.zeros((), jnp.int32),
            row=jnp.full((), -1, jnp.int32),
            key=key,
            best_params=jax.tree.map(jnp.array, learner.params),
            best_return=jnp.full((), -jnp.inf, jnp.float32),
            best_decision=jnp.full((), -1, jnp.int32),
            val_returns=jnp.full((n_chunks,), jnp.nan, jnp.float32),
            train_return=jnp.zeros((), jnp.float32),
            episodes=jnp.zeros((), jnp.int32),
        )

    def evaluate(params: PyTree, hp: dqn.DQNHParams, table: DecisionTable, roots: jnp.ndarray):
        return evaluate_policy(sel.q_values, params, table, roots, hp, max_depth=max_depth, tau0=cfg.tau0)

    def batch_from(state: TrainerState, table: DecisionTable, key, hp) -> dqn.Batch:
        idx = ring_sample_indices(key, state.buf_size, cfg.batch_size)
        rows, choices = state.buf_row[idx], state.buf_choice[idx]
        nxt = table.next[rows, choices]
        done = nxt < 0
        safe = jnp.maximum(nxt, 0)
        return dqn.Batch(
            obs=table.obs[rows],
            action=choices,
            reward=table_reward(table, rows, choices, hp, cfg.tau0),
            next_obs=jnp.where(done[:, None], 0.0, table.obs[safe]),
            next_mask=jnp.where(done[:, None], skip_only[None, :], table.mask[safe]),
            done=done.astype(jnp.float32),
        )

    def step(state: TrainerState, table: DecisionTable, hp: dqn.DQNHParams):
        """One training decision (Algorithm 1 lines 18–23 on the table): ``(state, metrics)``."""
        key, k_root, k_act, k_batch = jax.random.split(state.key, 4)
        n_roots = table.train_roots.shape[0]
        if cfg.root_order == "stream":  # Algorithm 1's task stream: pass p in permutation p
            pass_key = jax.random.fold_in(jax.random.PRNGKey(cfg.root_stream_seed), state.episodes // n_roots)
            root = table.train_roots[jax.random.permutation(pass_key, n_roots)[state.episodes % n_roots]]
        else:
            root = table.train_roots[jax.random.randint(k_root, (), 0, n_roots)]
        row = jnp.where(state.row < 0, root, state.row)
        learner = state.learner
        eps = sel.epsilon(learner.decisions, hp)
        choice = sel.act(learner, k_act, table.obs[row], table.mask[row], hp)
        r = table_reward(table, row, choice, hp, cfg.tau0)
        nxt = table.next[row, choice]
        # replay: store the (row, choice) index pair in the one ring buffer
        (buf_row, buf_choice), buf_ptr, buf_size = ring_push(
            (state.buf_row, state.buf_choice), state.buf_ptr, state.buf_size, (row, choice))
        state = state._replace(buf_row=buf_row, buf_choice=buf_choice, buf_ptr=buf_ptr, buf_size=buf_size)
        learner, m = dqn.scheduled_update(cfg, sel.train_step, learner,
                                          lambda: batch_from(state, table, k_batch, hp), hp)
        done = nxt < 0
        state = state._replace(
            learner=learner, row=jnp.where(nxt >= 0, nxt, -1), key=key,
            train_return=state.train_return + r, episodes=state.episodes + done,
        )
        return state, (m, r, eps, done)

    def chunk(state: TrainerState, table: DecisionTable, hp: dqn.DQNHParams):
        """``checkpoint_every`` decisions, then a validation checkpoint (App. C.2)."""

        def decision_body(s, _):
            return step(s, table, hp)

        state, (m, r, eps, done) = jax.lax.scan(decision_body, state, None, length=cfg.checkpoint_every)
        ret, _ = evaluate(state.learner.params, hp, table, table.val_roots)
        better = ret > state.best_return
        ci = state.learner.decisions // cfg.checkpoint_every - 1
        state = state._replace(
            best_params=jax.tree.map(lambda b, p: jnp.where(better, p, b), state.best_params,
                                     state.learner.params),
            best_return=jnp.where(better, ret, state.best_return),
            best_decision=jnp.where(better, state.learner.decisions, state.best_decision),
            val_returns=state.val_returns.at[ci].set(ret),
        )
        return state, TrainMetrics(learner=m, reward=r, epsilon=eps, episode_done=done, val_return=ret,
                                   improved=better)

    def run_logged(state: TrainerState, hp: dqn.DQNHParams, table: DecisionTable, *,
                   n_chunks: int) -> TrainOutput:
        """Continue ``state`` for ``n_chunks × checkpoint_every`` decisions, keeping the metrics."""
        table = as_jax(table)

        def chunk_body(s, _):
            return chunk(s, table, hp)

        state, metrics = jax.lax.scan(chunk_body, state, None, length=n_chunks)
        return TrainOutput(runner_state=state, metrics=metrics)

    def run(state: TrainerState, hp: dqn.DQNHParams, table: DecisionTable, *, n_chunks: int) -> TrainerState:
        """Continue ``state`` for ``n_chunks × checkpoint_every`` decisions."""
        return run_logged(state, hp, table, n_chunks=n_chunks).runner_state

    def train_logged(key: jax.Array, hp: dqn.DQNHParams, table: DecisionTable) -> TrainOutput:
        """The whole Table 3 run with its metrics: ``init`` then every chunk."""
        return run_logged(init(key, hp), hp, table, n_chunks=n_chunks)

    def train(key: jax.Array, hp: dqn.DQNHParams, table: DecisionTable) -> TrainerState:
        """The whole Table 3 run: ``init`` then every chunk."""
        return run(init(key, hp), hp, table, n_chunks=n_chunks)

    return Trainer(cfg, init, run, train, evaluate, n_chunks, run_logged, train_logged)

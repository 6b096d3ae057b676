"""The CounterMem memory-use selector: a masked DQN (Appendix C.2, Table 3).

At each decision the selector picks ``j ∈ {0 (skip), 1..4 (record slot)}``
among the *valid* actions from the 98-d observation of Eq. 9
(:mod:`cfjax.kernels.features`). It is trained by DQN with a replay buffer
and a periodically synchronised target network:

* reward (Eq. 10): ``r_t = 1[t=T] 1[solved] − λ_w δw_t − λ_f δf_t − λ_τ δτ_t/τ0``
* target (Eq. 12): ``y_t = r_t + γ (1 − d_t) max_{j ∈ J_{t+1}} Q_{θ⁻}(z_{t+1}, j)``
* loss (Eq. 13): ``L(θ) = E_D[(y_t − Q_θ(z_t, j_t))²]``

Everything here is a pure function over pytrees so that a driver can
``lax.scan`` the decision loop and ``vmap`` it over seeds and hyperparameter
grids without rewriting the kernel:

* static structure (sizes, intervals, step counts) lives in the frozen,
  hashable :class:`DQNConfig` and is bound by the factory
  :func:`make_dqn` (raw functions; the caller jits);
* the hyperparameters one may want to sweep (``lr``, ``gamma``, the ε
  endpoints, the reward weights) travel as the dynamic pytree
  :class:`DQNHParams` of ``f32[]`` scalars, so a batch of them is just a
  ``DQNHParams`` of ``f32[G]`` arrays under ``vmap``.

The learning rate is applied as ``updates * (−lr)`` after
``optax.scale_by_adam``, which is exactly ``optax.adam`` (that is
``chain(scale_by_adam, scale(−lr))``) with a dynamic, vmappable ``lr``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from cfjax.kernels._base import PyTree, jit_fields, masked_argmax, masked_max
from cfjax.kernels.replay import Batch, Replay, Transition, replay_add, replay_init, replay_sample

__all__ = [
    "Batch",
    "DQNConfig",
    "DQNHParams",
    "Metrics",
    "OnlineLearner",
    "QNetwork",
    "Replay",
    "Selector",
    "TrainState",
    "Transition",
    "epsilon_schedule",
    "jit_selector",
    "learn_schedule",
    "jit_online",
    "make_dqn",
    "make_online",
    "masked_argmax",
    "masked_max",
    "replay_add",
    "replay_init",
    "replay_sample",
    "reward",
    "scheduled_update",
]



# --------------------------------------------------------------------------
# Configuration and hyperparameters.
# --------------------------------------------------------------------------
class DQNHParams(NamedTuple):
    """Dynamic (vmappable) hyperparameters; every field ``f32[]`` (or ``f32[G]``
    when vmapped over a grid of ``G`` settings)."""

    lr: jnp.ndarray  # f32[] Adam learning rate (Table 3: 1e-3)
    gamma: jnp.ndarray  # f32[] discount γ (Table 3: 0.95), Eq. 11-12
    eps_start: jnp.ndarray  # f32[] initial exploration ε (Table 3: 0.30)
    eps_end: jnp.ndarray  # f32[] final exploration ε (Table 3: 0.05)
    lam_w: jnp.ndarray  # f32[] call penalty λ_w (Table 3: 0.15), Eq. 10
    lam_f: jnp.ndarray  # f32[] failure penalty λ_f (Table 3: 0.25), Eq. 10
    lam_tau: jnp.ndarray  # f32[] token penalty λ_τ (Table 3: 0.02), Eq. 10


@dataclasses.dataclass(frozen=True)
class DQNConfig:
    """Static DQN configuration with the Table 3 defaults (Appendix C.2).

    Attributes:
        total_decisions: Training decision steps (Table 3: 2,000). Table 3
            counts decisions, not tasks.
        hidden: Hidden widths of the ReLU MLP (Table 3 / App. C.1: (64, 64)).
        lr: Adam learning rate (Table 3: 1e-3); default of ``hparams().lr``.
        adam_eps: Adam ε (Table 3: 1e-8).
        adam_b1: Adam β1. Not stated in the paper; optax/PyTorch default 0.9.
        adam_b2: Adam β2. Not stated in the paper; optax/PyTorch default 0.999.
        learning_starts: Decisions before the first gradient update
            (Table 3: 100).
        train_every: One gradient update every this many decisions
            (Table 3: 4).
        gamma: Discount γ (Table 3: 0.95); default of ``hparams().gamma``.
        buffer_capacity: Replay capacity in transitions (Table 3: 10^4).
        batch_size: Minibatch size (Table 3: 32).
        target_sync_every: Target synchronisation interval. Table 3 says "250
            steps"; since Table 3 counts *decisions* (environment steps),
            we interpret it as ``θ⁻ ← θ`` every 250 decisions (i.e. when
            ``decisions % 250 == 0``), not every 250 gradient updates.
        eps_start: Initial ε (Table 3: 0.30).
        eps_end: Final ε (Table 3: 0.05).
        eps_decay_fraction: Our choice (the paper gives only the endpoints):
            ε decays linearly from ``eps_start`` to ``eps_end`` over the first
            ``eps_decay_fraction * total_decisions`` decisions (the first
            half by default) and stays at ``eps_end`` afterwards.
        checkpoint_every: Candidate checkpoints are evaluated every this many
            training decisions (App. C.2: 250). Used by the driver.
        obs_dim: Observation size (Eq. 9: 98).
        n_actions: Skip + ``L = 4`` slots (5).
        lam_w: Call penalty λ_w (Table 3: 0.15), Eq. 10.
        lam_f: Failure penalty λ_f (Table 3: 0.25), Eq. 10.
        lam_tau: Token penalty λ_τ (Table 3: 0.02), Eq. 10.
        tau0: Token scale τ0 (Table 3: 10^4 tokens), Eq. 10.
        seeds: Selector seeds (Table 3: 0-4). Used by the driver.
        root_order: Where the decision-table trainer (:mod:`cfjax.kernels.trainer`)
            starts each training episode. ``"uniform"`` (default): a root
            drawn uniformly from ``train_roots`` at every episode (our
            choice). ``"stream"``: Algorithm 1 lines 16–25 — the training
            tasks as a stream, every root once per pass in a shuffled order
            (pass ``p`` uses the permutation of ``fold_in(PRNGKey(
            root_stream_seed), p)``, the same stream for every selector
            seed). The main job's online trainer
            (:func:`cfjax.countermem.pipeline.train_selector`) always runs
            Algorithm 1's stream on live episodes and ignores this field.
        root_stream_seed: Seed of the ``"stream"`` order.
    """

    total_decisions: int = 2000
    hidden: tuple[int, ...] = (64, 64)
    lr: float = 1e-3
    adam_eps: float = 1e-8
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    learning_starts: int = 100
    train_every: int = 4
    gamma: float = 0.95
    buffer_capacity: int = 10_000
    batch_size: int = 32
    target_sync_every: int = 250
    eps_start: float = 0.30
    eps_end: float = 0.05
    eps_decay_fraction: float = 0.5
    checkpoint_every: int = 250
    obs_dim: int = 98
    n_actions: int = 5
    lam_w: float = 0.15
    lam_f: float = 0.25
    lam_tau: float = 0.02
    tau0: float = 1e4
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    root_order: str = "uniform"
    root_stream_seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        for name in (
            "total_decisions",
            "train_every",
            "buffer_capacity",
            "batch_size",
            "target_sync_every",
            "checkpoint_every",
            "obs_dim",
            "n_actions",
        ):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"DQNConfig.{name} must be >= 1")
        if self.learning_starts < 0:
            raise ValueError("DQNConfig.learning_starts must be >= 0")
        if not 0.0 <= self.eps_decay_fraction <= 1.0:
            raise ValueError("DQNConfig.eps_decay_fraction must be in [0, 1]")
        if self.tau0 <= 0:
            raise ValueError("DQNConfig.tau0 must be > 0")
        if self.root_order not in ("uniform", "stream"):
            raise ValueError(f"DQNConfig.root_order must be 'uniform' or 'stream', got {self.root_order!r}")

    @property
    def eps_decay_steps(self) -> float:
        """Decisions over which ε decays linearly (at least 1)."""
        return max(1.0, float(self.eps_decay_fraction) * float(self.total_decisions))

    def hparams(self) -> DQNHParams:
        """The dynamic hyperparameters of this config as ``f32[]`` scalars."""
        f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        return DQNHParams(
            lr=f(self.lr),
            gamma=f(self.gamma),
            eps_start=f(self.eps_start),
            eps_end=f(self.eps_end),
            lam_w=f(self.lam_w),
            lam_f=f(self.lam_f),
            lam_tau=f(self.lam_tau),
        )


# --------------------------------------------------------------------------
# Reward (Eq. 10); the masked reductions are :mod:`cfjax.kernels._base`'s.
# --------------------------------------------------------------------------
def reward(solved_final, d_calls, d_failed, d_tokens, hp, tau0: float = 1e4):
    """Per-decision reward of Eq. 10.

    ``r_t = 1[t=T] 1[solved] − λ_w δw_t − λ_f δf_t − λ_τ δτ_t / τ0``

    Works elementwise on Python/NumPy/JAX scalars or arrays (broadcasting).
    The increments are the nonnegative changes of the charged counters for
    this decision; they are used as given (not clipped).

    Args:
        solved_final: ``bool[...]``: ``1[t=T] 1[solved]``, true only at the
            final decision of a solved task.
        d_calls: ``f32[...]`` evaluator calls charged to the decision (δw).
        d_failed: ``f32[...]`` failed evaluated actions (δf).
        d_tokens: ``f32[...]`` tokens charged to the decision (δτ).
        hp: Anything with ``lam_w``, ``lam_f``, ``lam_tau`` (a
            :class:`DQNHParams` or a :class:`DQNConfig`).
        tau0: Token scale τ0 (Table 3: 10^4).

    Returns:
        ``f32[...]`` reward.
    """
    f32 = jnp.float32
    return (
        jnp.asarray(solved_final, f32)
        - jnp.asarray(hp.lam_w, f32) * jnp.asarray(d_calls, f32)
        - jnp.asarray(hp.lam_f, f32) * jnp.asarray(d_failed, f32)
        - jnp.asarray(hp.lam_tau, f32) * jnp.asarray(d_tokens, f32) / jnp.asarray(tau0, f32)
    )


def _with_skip(mask: jnp.ndarray) -> jnp.ndarray:
    """Skip (action 0) is always valid (App. C.1): ``J_t = {0, …, |R_t|}``."""
    return jnp.asarray(mask, bool).at[..., 0].set(True)


def epsilon_schedule(decisions, hp: DQNHParams, decay_steps: float):
    """Linear ε schedule (Table 3: 0.30 → 0.05; decay length is our choice).

    ``ε(t) = eps_start + (eps_end − eps_start) · clip(t / decay_steps, 0, 1)``

    Args:
        decisions: ``i32[]`` decisions taken so far.
        hp: Dynamic hyperparameters (``eps_start``, ``eps_end``).
        decay_steps: Static float, ``DQNConfig.eps_decay_steps``.

    Returns:
        ``f32[]`` ε.
    """
    frac = jnp.clip(jnp.asarray(decisions, jnp.float32) / decay_steps, 0.0, 1.0)
    return hp.eps_start + (hp.eps_end - hp.eps_start) * frac


# --------------------------------------------------------------------------
# Q-network.
# --------------------------------------------------------------------------
class QNetwork(nn.Module):
    """ReLU MLP ``98 → 64 → 64 → 5`` (App. C.1, Table 3).

    Layers are ``Dense_0 … Dense_{len(hidden)}`` (flax default names, default
    LeCun-normal kernels and zero biases). Maps ``f32[..., obs_dim]`` to
    ``f32[..., n_actions]``: one value for skip and one per record slot.
    """

    hidden: tuple[int, ...] = (64, 64)
    n_actions: int = 5

    @nn.compact
    def __call__(self, z: jnp.ndarray) -> jnp.ndarray:
        x = z
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.n_actions)(x)


# --------------------------------------------------------------------------
# Training state and the selector factory.
# --------------------------------------------------------------------------
class TrainState(NamedTuple):
    """Selector learner state (a pytree; vmappable over seeds/grids)."""

    params: PyTree  # Q_θ params: {"Dense_i": {"kernel": f32[in, out], "bias": f32[out]}}
    target_params: PyTree  # Q_θ⁻ params, same structure
    opt_state: PyTree  # optax ScaleByAdamState(count i32[], mu, nu) for params
    step: jnp.ndarray  # i32[] gradient updates done
    decisions: jnp.ndarray  # i32[] decisions observed (drives ε and schedules)


class Metrics(NamedTuple):
    """Per-call diagnostics (zeros when no update ran)."""

    loss: jnp.ndarray  # f32[] Eq. 13 minibatch loss (before the step)
    q_mean: jnp.ndarray  # f32[] mean Q_θ(z, j) over the batch
    td_abs: jnp.ndarray  # f32[] mean |y − Q_θ(z, j)|
    grad_norm: jnp.ndarray  # f32[] global gradient norm
    updated: jnp.ndarray  # bool[] a gradient step ran
    synced: jnp.ndarray  # bool[] θ⁻ ← θ happened


def _no_update_metrics() -> Metrics:
    z = jnp.zeros((), jnp.float32)
    f = jnp.zeros((), bool)
    return Metrics(loss=z, q_mean=z, td_abs=z, grad_norm=z, updated=f, synced=f)


class Schedule(NamedTuple):
    """What the Table 3 schedule does after decision ``t`` (see :func:`learn_schedule`)."""

    update: jnp.ndarray  # bool[] one gradient step: t >= learning_starts and t % train_every == 0
    sync: jnp.ndarray  # bool[] θ⁻ ← θ after that step: t % target_sync_every == 0


def learn_schedule(t, config: DQNConfig) -> Schedule:
    """The Table 3 learning schedule after the ``t``-th decision (``t`` counts from 1).

    One gradient update every ``train_every`` decisions once ``t ≥ learning_starts``; the target
    network is synchronised every ``target_sync_every`` decisions (after that decision's update).
    The ε schedule is :func:`epsilon_schedule`. The one definition both learners use.
    """
    return Schedule(update=(t >= config.learning_starts) & (t % config.train_every == 0),
                    sync=t % config.target_sync_every == 0)


def scheduled_update(config: DQNConfig, train_step: Callable, state: "TrainState", batch_fn: Callable[[], "Batch"],
                     hp: DQNHParams):
    """Count one decision and run the Table 3 schedule (Algorithm 1, line 23).

    1. ``decisions ← t = decisions + 1``;
    2. if :func:`learn_schedule` says so, one ``train_step(state, batch_fn(), hp)`` (``lax.cond``:
       ``batch_fn`` is traced inside the taken branch only);
    3. if ``t % target_sync_every == 0``: ``θ⁻ ← θ`` (after step 2).

    Args:
        config: Static configuration.
        train_step: ``(state, batch, hp) -> (state, Metrics)`` (a :class:`Selector`'s).
        state: Learner state before the decision is counted.
        batch_fn: Zero-argument function returning the minibatch (sampled from whichever replay
            the caller keeps).
        hp: Dynamic hyperparameters.

    Returns:
        ``(state, Metrics)``; ``Metrics.synced`` tells whether the target was synchronised.
    """
    t = state.decisions + 1
    state = state._replace(decisions=t)
    sched = learn_schedule(t, config)
    state, metrics = jax.lax.cond(
        sched.update,
        lambda s: train_step(s, batch_fn(), hp),
        lambda s: (s, _no_update_metrics()),
        state,
    )
    target = jax.tree.map(lambda old, new: jnp.where(sched.sync, new, old), state.target_params, state.params)
    return state._replace(target_params=target), metrics._replace(synced=sched.sync)


class Selector(NamedTuple):
    """Pure functions of the DQN selector (raw from :func:`make_dqn`; jit by the caller).

    All take/return pytrees only, so they compose with ``lax.scan`` and
    ``vmap`` (seeds: vmap ``key``; grids: vmap ``hp``).
    """

    config: DQNConfig
    init: Callable  # (key, hp) -> TrainState
    q_values: Callable  # (params, obs f32[..., 98]) -> f32[..., 5]
    epsilon: Callable  # (decisions i32[], hp) -> f32[]   (Table 3 ε, :func:`epsilon_schedule`)
    act: Callable  # (state, key, obs f32[..., 98], mask bool[..., 5], hp) -> i32[...]
    greedy: Callable  # (params, obs f32[..., 98], mask bool[..., 5]) -> i32[...]
    loss: Callable  # (params, target_params, batch, hp) -> (f32[], aux)
    train_step: Callable  # (state, batch, hp) -> (state, Metrics)
    update: Callable  # (state, replay, key, hp) -> (state, Metrics)
    observe: Callable  # (state, replay, key, transition, hp) -> (state, replay, Metrics)


def make_dqn(config: DQNConfig = DQNConfig()) -> Selector:
    """Build the selector's raw pure functions for a static ``config``.

    Nothing is jitted: ``jax.jit`` each function (or :func:`jit_selector`), ``vmap`` over seeds
    or hyperparameters, or trace them inside an outer ``scan`` (the table trainer does).

    Args:
        config: Static configuration (sizes, intervals, Adam β/ε).

    Returns:
        :class:`Selector`.
    """
    cfg = config
    net = QNetwork(hidden=cfg.hidden, n_actions=cfg.n_actions)
    adam = optax.scale_by_adam(b1=cfg.adam_b1, b2=cfg.adam_b2, eps=cfg.adam_eps)
    decay_steps = cfg.eps_decay_steps

    def init(key: jax.Array, hp: DQNHParams) -> TrainState:
        """Fresh learner: ``θ`` from ``key``, ``θ⁻ = θ``, zero Adam moments.

        ``hp`` is unused (Adam's state does not depend on ``lr``); it is
        accepted so that ``init`` vmaps like the other functions.
        """
        del hp
        params = net.init(key, jnp.zeros((cfg.obs_dim,), jnp.float32))["params"]
        return TrainState(
            params=params,
            target_params=jax.tree.map(jnp.array, params),
            opt_state=adam.init(params),
            step=jnp.zeros((), jnp.int32),
            decisions=jnp.zeros((), jnp.int32),
        )

    def q_values(params: PyTree, obs: jnp.ndarray) -> jnp.ndarray:
        """``Q_θ(z, ·)``: ``f32[..., obs_dim] → f32[..., n_actions]`` (Eq. 11)."""
        return net.apply({"params": params}, obs)

    def epsilon(decisions, hp: DQNHParams) -> jnp.ndarray:
        """ε at ``decisions`` (linear decay, then flat); see :func:`epsilon_schedule`."""
        return epsilon_schedule(decisions, hp, decay_steps)

    def greedy(params: PyTree, obs: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
        """Held-out policy ``argmax_{j ∈ J_t} Q_θ(z_t, j)`` (App. C.2).

        Args:
            params: Q-network params.
            obs: ``f32[..., obs_dim]``.
            mask: ``bool[..., n_actions]``; skip is forced valid.

        Returns:
            ``i32[...]`` action.
        """
        return masked_argmax(q_values(params, obs), _with_skip(mask))

    def act(state: TrainState, key: jax.Array, obs, mask, hp: DQNHParams) -> jnp.ndarray:
        """ε-greedy over the valid actions (App. C.2, Algorithm 1 line 19).

        With probability ``ε(state.decisions)`` the action is uniform over the
        valid actions (argmax of i.i.d. uniforms restricted to the mask),
        otherwise the masked greedy action. Invalid actions are never chosen.

        Args:
            state: Learner state (``params``, ``decisions``).
            key: PRNG key.
            obs: ``f32[..., obs_dim]``.
            mask: ``bool[..., n_actions]``; skip is forced valid.
            hp: Dynamic hyperparameters (ε endpoints).

        Returns:
            ``i32[...]`` action.
        """
        mask = _with_skip(mask)
        k_explore, k_random = jax.random.split(key)
        eps = epsilon(state.decisions, hp)
        explore = jax.random.uniform(k_explore, mask.shape[:-1]) < eps
        random_action = masked_argmax(jax.random.uniform(k_random, mask.shape), mask)
        greedy_action = masked_argmax(q_values(state.params, obs), mask)
        return jnp.where(explore, random_action, greedy_action).astype(jnp.int32)

    def loss(params: PyTree, target_params: PyTree, batch: Batch, hp: DQNHParams):
        """Eq. 13 on a minibatch with the Eq. 12 masked target.

        ``y = r + γ (1 − d) max_{j' ∈ J'} Q_{θ⁻}(z', j')`` (no gradient through
        ``y``), ``L = mean_b (y_b − Q_θ(z_b, j_b))²``.

        Returns:
            ``(loss f32[], (q_sa f32[B], td f32[B]))``.
        """
        q = q_values(params, batch.obs)  # f32[B, A]
        q_sa = jnp.take_along_axis(q, batch.action[:, None].astype(jnp.int32), axis=-1)[:, 0]
        q_next = q_values(target_params, batch.next_obs)  # f32[B, A]
        v_next = masked_max(q_next, _with_skip(batch.next_mask))  # f32[B]
        not_done = 1.0 - jnp.asarray(batch.done, jnp.float32)
        y = jax.lax.stop_gradient(batch.reward + hp.gamma * not_done * v_next)
        td = y - q_sa
        return jnp.mean(td**2), (q_sa, td)

    def train_step(state: TrainState, batch: Batch, hp: DQNHParams):
        """One Adam step on Eq. 13 for a given minibatch.

        Equivalent to ``optax.adam(hp.lr, b1, b2, eps)``: Adam moments from
        ``optax.scale_by_adam``, then ``updates * (−lr)``.

        Returns:
            ``(state, Metrics)`` with ``step`` incremented.
        """
        (l, (q_sa, td)), grads = jax.value_and_grad(loss, has_aux=True)(
            state.params, state.target_params, batch, hp
        )
        updates, opt_state = adam.update(grads, state.opt_state, state.params)
        neg_lr = -jnp.asarray(hp.lr, jnp.float32)
        updates = jax.tree.map(lambda u: u * neg_lr.astype(u.dtype), updates)
        params = optax.apply_updates(state.params, updates)
        metrics = Metrics(
            loss=l,
            q_mean=jnp.mean(q_sa),
            td_abs=jnp.mean(jnp.abs(td)),
            grad_norm=optax.tree.norm(grads),
            updated=jnp.ones((), bool),
            synced=jnp.zeros((), bool),
        )
        new_state = state._replace(params=params, opt_state=opt_state, step=state.step + 1)
        return new_state, metrics

    def update(state: TrainState, replay: Replay, key: jax.Array, hp: DQNHParams):
        """Sample ``batch_size`` transitions uniformly and take one Adam step."""
        batch = replay_sample(replay, key, cfg.batch_size)
        return train_step(state, batch, hp)

    def observe(state: TrainState, replay: Replay, key: jax.Array, transition, hp: DQNHParams):
        """Record one decision and run the scheduled learning (Algorithm 1, 22-23).

        1. add ``transition`` to the replay buffer and increment
           ``decisions`` (to ``t``);
        2. if ``t >= learning_starts`` and ``t % train_every == 0``: one
           :func:`update` (``lax.cond``, so it stays jittable);
        3. if ``t % target_sync_every == 0``: ``θ⁻ ← θ`` (after step 2).

        Args:
            state: Learner state.
            replay: Replay buffer.
            key: PRNG key for minibatch sampling.
            transition: :class:`Transition` (or any 6-tuple in that order).
            hp: Dynamic hyperparameters.

        Returns:
            ``(state, replay, Metrics)``.
        """
        replay = replay_add(replay, *transition)
        state, metrics = scheduled_update(cfg, train_step, state,
                                          lambda: replay_sample(replay, key, cfg.batch_size), hp)
        return state, replay, metrics

    fns = dict(
        init=init,
        q_values=q_values,
        epsilon=epsilon,
        act=act,
        greedy=greedy,
        loss=loss,
        train_step=train_step,
        update=update,
        observe=observe,
    )
    return Selector(config=cfg, **fns)


def jit_selector(selector: Selector) -> Selector:
    """``jax.jit`` every function of a :class:`Selector` (a caller-side convenience)."""
    return jit_fields(selector)


# --------------------------------------------------------------------------
# Online (Algorithm 1) driver programs: one dispatch per decision, one per episode.
# --------------------------------------------------------------------------
class OnlineLearner(NamedTuple):
    """The two programs a host loop that trains the selector online needs (Algorithm 1, 16–25).

    They fold the host's key bookkeeping into the kernel so a decision costs one dispatch and an
    episode's transitions one more, instead of a key split, a reward and an ``observe`` per
    decision. They are exactly the per-decision calls they replace, in the same order:

    * ``act(state, key, obs, mask, hp) -> (key', action)`` is
      ``key', k = split(key); act(state, k, obs, mask, hp)``;
    * ``observe_span(state, replay, key, transitions, start, stop, hp) -> (state, replay, key', updates)``
      runs, for ``i = start … stop-1`` in order, ``key, k = split(key); observe(state, replay, k,
      transitions[i], hp)`` (a ``fori_loop`` with a dynamic trip count, so one compiled program
      serves every span of an episode's padded ``[T]`` transitions); ``updates`` is the number of
      gradient steps taken (``i32[]``).

    A host that checkpoints between decisions calls ``observe_span`` on the decisions up to the
    checkpoint, evaluates, and continues with ``start`` at the checkpoint.
    """

    act: Callable
    observe_span: Callable


def make_online(selector: Selector) -> OnlineLearner:
    """The raw (unjitted) :class:`OnlineLearner` of a raw :class:`Selector` (see :func:`jit_online`)."""

    def act(state: TrainState, key: jax.Array, obs, mask, hp: DQNHParams):
        ks = jax.random.split(key)
        return ks[0], selector.act(state, ks[1], obs, mask, hp)

    def observe_span(state: TrainState, replay: Replay, key: jax.Array, transitions: Transition, start, stop,
                     hp: DQNHParams):
        def body(i, carry):
            state, replay, key, updates = carry
            ks = jax.random.split(key)
            tr = jax.tree.map(lambda x: x[i], transitions)
            state, replay, metrics = selector.observe(state, replay, ks[1], tr, hp)
            return state, replay, ks[0], updates + metrics.updated.astype(jnp.int32)

        return jax.lax.fori_loop(jnp.asarray(start, jnp.int32), jnp.asarray(stop, jnp.int32), body,
                                 (state, replay, key, jnp.zeros((), jnp.int32)))

    return OnlineLearner(act=act, observe_span=observe_span)


def jit_online(selector: Selector) -> OnlineLearner:
    """:func:`make_online` jitted, the replay buffer donated to ``observe_span`` (it is updated in
    place: a 10^4-transition buffer is ~8 MB that a non-donating call would copy per decision)."""
    raw = make_online(selector)
    return OnlineLearner(act=jax.jit(raw.act), observe_span=jax.jit(raw.observe_span, donate_argnums=(1,)))

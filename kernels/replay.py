"""The one replay ring buffer: a fixed-capacity pytree of slots, a write pointer and a fill count.

papers/countermem.md App. C.2, Table 3 (replay capacity 10^4, uniform minibatches of 32).

Both selector learners store their transitions here: the online DQN
(:class:`cfjax.kernels.dqn.Replay`, whole transitions) and the decision-table trainer
(:class:`cfjax.kernels.trainer.TrainerState`, ``(row, choice)`` index pairs). The slots are any
pytree whose leaves share the leading capacity axis ``C``; the pointer arithmetic and the sampling
rule live only here.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from cfjax.kernels._base import PyTree

__all__ = ["Batch", "Replay", "Transition", "replay_add", "replay_init", "replay_sample", "ring_push",
           "ring_sample_indices"]


def ring_push(slots: PyTree, ptr: jnp.ndarray, size: jnp.ndarray, item: PyTree):
    """Write ``item`` at ``ptr`` (overwriting the oldest entry when full).

    Args:
        slots: pytree of ``[C, ...]`` arrays (capacity ``C`` from the first leaf).
        ptr: ``i32[]`` next write slot.
        size: ``i32[]`` filled slots (``≤ C``).
        item: pytree like ``slots`` without the leading axis; each leaf is cast to its slot's dtype.

    Returns:
        ``(slots, ptr, size)`` with ``ptr ← (ptr + 1) mod C`` and ``size ← min(size + 1, C)``.
    """
    cap = jax.tree.leaves(slots)[0].shape[0]
    slots = jax.tree.map(lambda buf, x: buf.at[ptr].set(jnp.asarray(x, buf.dtype)), slots, item)
    return slots, ((ptr + 1) % cap).astype(jnp.int32), jnp.minimum(size + 1, cap).astype(jnp.int32)


def ring_sample_indices(key: jax.Array, size: jnp.ndarray, batch_size: int) -> jnp.ndarray:
    """Uniform slot indices, with replacement, from the filled part: ``i32[batch_size]``.

    ``randint(key, (batch_size,), 0, max(size, 1))``: an empty buffer yields copies of slot 0.
    ``batch_size`` is static.
    """
    return jax.random.randint(key, (batch_size,), 0, jnp.maximum(size, 1))


# --------------------------------------------------------------------------
# The online selector's replay: whole transitions (Algorithm 1, line 22).
# --------------------------------------------------------------------------
class Replay(NamedTuple):
    """Fixed-capacity ring buffer of transitions ``(z, j, r, z', J', d)``."""

    obs: jnp.ndarray  # f32[C, obs_dim] z_t
    action: jnp.ndarray  # i32[C] j_t
    reward: jnp.ndarray  # f32[C] r_t (Eq. 10)
    next_obs: jnp.ndarray  # f32[C, obs_dim] z_{t+1}
    next_mask: jnp.ndarray  # bool[C, n_actions] valid actions J_{t+1}
    done: jnp.ndarray  # f32[C] d_t (1 = episode ended)
    ptr: jnp.ndarray  # i32[] next write position
    size: jnp.ndarray  # i32[] filled entries, <= C


class Transition(NamedTuple):
    """One decision's outcome (Algorithm 1, line 22)."""

    obs: jnp.ndarray  # f32[obs_dim]
    action: jnp.ndarray  # i32[]
    reward: jnp.ndarray  # f32[]
    next_obs: jnp.ndarray  # f32[obs_dim]
    next_mask: jnp.ndarray  # bool[n_actions]
    done: jnp.ndarray  # f32[] (or bool[])


class Batch(NamedTuple):
    """A minibatch of transitions (same fields as :class:`Transition`)."""

    obs: jnp.ndarray  # f32[B, obs_dim]
    action: jnp.ndarray  # i32[B]
    reward: jnp.ndarray  # f32[B]
    next_obs: jnp.ndarray  # f32[B, obs_dim]
    next_mask: jnp.ndarray  # bool[B, n_actions]
    done: jnp.ndarray  # f32[B]


def replay_init(capacity: int, obs_dim: int = 98, n_actions: int = 5) -> Replay:
    """Empty replay buffer (static ``capacity``, ``obs_dim``, ``n_actions``)."""
    return Replay(
        obs=jnp.zeros((capacity, obs_dim), jnp.float32),
        action=jnp.zeros((capacity,), jnp.int32),
        reward=jnp.zeros((capacity,), jnp.float32),
        next_obs=jnp.zeros((capacity, obs_dim), jnp.float32),
        next_mask=jnp.zeros((capacity, n_actions), bool),
        done=jnp.zeros((capacity,), jnp.float32),
        ptr=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
    )


def replay_add(replay: Replay, obs, action, reward, next_obs, next_mask, done) -> Replay:
    """Write one transition at ``ptr`` (overwriting the oldest when full).

    Args:
        replay: Buffer with capacity ``C``.
        obs: ``f32[obs_dim]``.
        action: ``i32[]``.
        reward: ``f32[]``.
        next_obs: ``f32[obs_dim]``.
        next_mask: ``bool[n_actions]``.
        done: ``f32[]`` or ``bool[]``.

    Returns:
        The new buffer; ``ptr ← (ptr + 1) mod C``, ``size ← min(size + 1, C)``.
    """
    fields = Transition(obs, action, reward, next_obs, next_mask, done)
    slots = Transition(replay.obs, replay.action, replay.reward, replay.next_obs, replay.next_mask, replay.done)
    slots, ptr, size = ring_push(slots, replay.ptr, replay.size, fields)
    return Replay(*slots, ptr=ptr, size=size)


def replay_sample(replay: Replay, key: jax.Array, batch_size: int) -> Batch:
    """Uniform sample, with replacement, from the filled part of the buffer.

    Indices are ``randint(key, (batch_size,), 0, max(size, 1))``: an empty
    buffer yields copies of the (zero) slot 0.

    Args:
        replay: Buffer.
        key: PRNG key.
        batch_size: Static ``B``.

    Returns:
        :class:`Batch` with leading dimension ``B``.
    """
    idx = ring_sample_indices(key, replay.size, batch_size)
    return Batch(
        obs=replay.obs[idx],
        action=replay.action[idx],
        reward=replay.reward[idx],
        next_obs=replay.next_obs[idx],
        next_mask=replay.next_mask[idx],
        done=replay.done[idx],
    )

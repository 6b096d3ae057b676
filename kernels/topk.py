"""Masked cosine + bias top-``k`` retrieval kernel (paper Eq. 7-8).

For queries ``s`` and keys ``q_i`` (embedded with ``phi``) the retrieval score
of Eq. 8 is

    ``r_i = cos(phi(s), phi(q_i)) + lambda_reuse * u_i``,

and the top ``k`` are taken among the *eligible* keys only (Eq. 7), given as
a per-query boolean mask. :func:`masked_topk` is the pure JAX kernel (``k``
static: jit it with ``jax.jit(masked_topk, static_argnames="k")``);
:func:`cfjax.kernels.reference.topk.masked_topk_reference` is its NumPy
reference with identical semantics:

* rows of ``queries`` and ``keys`` are L2-normalised; a zero row stays zero
  (cosine 0 with everything, never NaN);
* masked-out entries get ``-inf`` only in the array fed to the top-``k``
  selection and are never returned;
* results are sorted by descending score, ties broken by the smaller key
  index (``jax.lax.top_k`` returns the lower index first among equal values,
  which ``tests/kernels/test_topk.py`` checks);
* when a query has fewer than ``k`` eligible keys (including ``k > N``), the
  tail is padded with index ``-1`` and score ``-inf``.

The similarity matmul uses ``Precision.HIGHEST`` so that accelerators do not
silently drop to TF32/bf16 (on CPU this is the default anyway).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


__all__ = ["masked_topk"]

# old import path of the NumPy twin, now in cfjax.kernels.reference.topk


def _normalise_rows(x: jax.Array) -> jax.Array:
    """Row-wise L2 normalisation; zero rows stay zero (no NaN, no NaN grads)."""
    sq = jnp.sum(x * x, axis=-1, keepdims=True)
    safe = jnp.where(sq > 0, sq, 1.0)
    return jnp.where(sq > 0, x * jax.lax.rsqrt(safe), 0.0)


def _check_k(k: int) -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


def masked_topk(
    queries: jax.Array,
    keys: jax.Array,
    bias: jax.Array,
    mask: jax.Array,
    *,
    k: int,
    bias_weight: float | jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Masked top-``k`` of ``cos(queries, keys) + bias_weight * bias`` (Eq. 8).

    Args:
        queries: ``f32[Q, d]`` query embeddings ``phi(s)``.
        keys: ``f32[N, d]`` key embeddings ``phi(q_i)``.
        bias: ``f32[N]`` per-key bias (reuse statistic ``u_i``).
        mask: ``bool[Q, N]`` eligibility (Eq. 7); ``False`` is never returned.
        k: Number of results (static: a Python int, ``static_argnames`` under
            ``jax.jit``; may exceed ``N``).
        bias_weight: Weight of the bias (``lambda_reuse``); traced, so
            changing it does not recompile.

    Returns:
        ``(scores f32[Q, k], idx i32[Q, k])`` sorted by descending score
        (ties: smaller index first), padded with ``(-inf, -1)``.

    Raises:
        ValueError: At trace time, on a bad ``k`` or inconsistent shapes.
    """
    _check_k(k)
    if queries.ndim != 2:
        raise ValueError(f"queries must have shape [Q, d], got {queries.shape}")
    n_q, d = queries.shape
    if keys.ndim != 2 or keys.shape[1] != d:
        raise ValueError(f"keys must have shape [N, {d}], got {keys.shape}")
    n = keys.shape[0]
    if bias.shape != (n,):
        raise ValueError(f"bias must have shape ({n},), got {bias.shape}")
    if mask.shape != (n_q, n):
        raise ValueError(f"mask must have shape ({n_q}, {n}), got {mask.shape}")

    q = _normalise_rows(queries.astype(jnp.float32))
    kn = _normalise_rows(keys.astype(jnp.float32))
    sims = jnp.matmul(q, kn.T, precision=jax.lax.Precision.HIGHEST)
    scores = sims + jnp.asarray(bias_weight, jnp.float32) * bias.astype(jnp.float32)[None, :]
    mask = mask.astype(bool)
    masked = jnp.where(mask, scores, -jnp.inf)
    if n < k:  # static: pad with never-eligible columns
        masked = jnp.pad(masked, ((0, 0), (0, k - n)), constant_values=-jnp.inf)
        mask = jnp.pad(mask, ((0, 0), (0, k - n)), constant_values=False)
    top, idx = jax.lax.top_k(masked, k)
    valid = jnp.take_along_axis(mask, idx, axis=1)
    top = jnp.where(valid, top, -jnp.inf)
    idx = jnp.where(valid, idx, -1).astype(jnp.int32)
    return top, idx

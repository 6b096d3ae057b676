"""Masked cosine + bias top-``k`` retrieval kernel (paper Eq. 7-8).

For queries ``s`` and keys ``q_i`` (embedded with ``phi``) the retrieval score
of Eq. 8 is

    ``r_i = cos(phi(s), phi(q_i)) + lambda_reuse * u_i``,

and the top ``k`` are taken among the *eligible* keys only (Eq. 7), given as
a per-query boolean mask. :func:`masked_topk` is the jitted JAX kernel (``k``
static); :func:`masked_topk_reference` is its NumPy reference with identical
semantics:

* rows of ``queries`` and ``keys`` are L2-normalised; a zero row stays zero
  (cosine 0 with everything, never NaN);
* masked-out entries get ``-inf`` only in the array fed to the top-``k``
  selection and are never returned;
* results are sorted by descending score, ties broken by the smaller key
  index (``jax.lax.top_k`` returns the lower index first among equal values,
  which ``tests/test_topk.py`` checks);
* when a query has fewer than ``k`` eligible keys (including ``k > N``), the
  tail is padded with index ``-1`` and score ``-inf``.

The similarity matmul uses ``Precision.HIGHEST`` so that accelerators do not
silently drop to TF32/bf16 (on CPU this is the default anyway).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["masked_topk", "masked_topk_reference"]


def _normalise_rows(x: jax.Array) -> jax.Array:
    """Row-wise L2 normalisation; zero rows stay zero (no NaN, no NaN grads)."""
    sq = jnp.sum(x * x, axis=-1, keepdims=True)
    safe = jnp.where(sq > 0, sq, 1.0)
    return jnp.where(sq > 0, x * jax.lax.rsqrt(safe), 0.0)


def _check_k(k: int) -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


@functools.partial(jax.jit, static_argnames=("k",))
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
        k: Number of results (static; may exceed ``N``).
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


def masked_topk_reference(
    queries: np.ndarray,
    keys: np.ndarray,
    bias: np.ndarray,
    mask: np.ndarray,
    *,
    k: int,
    bias_weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of :func:`masked_topk` (float64 internally).

    Args:
        queries: ``[Q, d]`` queries.
        keys: ``[N, d]`` keys.
        bias: ``[N]`` biases.
        mask: ``bool[Q, N]`` eligibility.
        k: Number of results.
        bias_weight: Weight of the bias.

    Returns:
        ``(scores float32[Q, k], idx int32[Q, k])``, same semantics as
        :func:`masked_topk`.
    """
    _check_k(k)
    q = np.asarray(queries, dtype=np.float64)
    kk = np.asarray(keys, dtype=np.float64)
    m = np.asarray(mask, dtype=bool)
    n_q, n = q.shape[0], kk.shape[0]

    def norm(x: np.ndarray) -> np.ndarray:
        nr = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, nr, out=np.zeros_like(x), where=nr > 0)

    scores = norm(q) @ norm(kk).T + float(bias_weight) * np.asarray(bias, np.float64)[None, :]
    scores = np.where(m, scores, -np.inf)
    out_s = np.full((n_q, k), -np.inf, dtype=np.float32)
    out_i = np.full((n_q, k), -1, dtype=np.int32)
    cols = np.arange(n)
    for r in range(n_q):
        order = np.lexsort((cols, -scores[r]))[: min(k, n)]
        order = order[m[r, order]]
        out_s[r, : order.size] = scores[r, order]
        out_i[r, : order.size] = order
    return out_s, out_i

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

Keys that are searched many times should be normalised once:
:func:`masked_topk_normalized` takes keys already passed through
:func:`normalize_rows` and skips the per-call normalisation of the whole
``[N, d]`` key matrix (which otherwise doubles the memory traffic and
allocates an ``[N, d]`` temporary on every call); :func:`masked_topk` is
exactly ``masked_topk_normalized(queries, normalize_rows(keys), ...)``.
The NumPy twin is
:func:`cfjax.kernels.reference.topk.masked_topk_normalized_reference`.

Dtypes. The computation runs in ``result_type(queries, keys, float32)``:
float32 for float32 (or lower) inputs, float64 for float64 inputs when
``jax_enable_x64`` is on; scores come back in that dtype.

The similarity matmul uses ``Precision.HIGHEST`` so that accelerators do not
silently drop to TF32/bf16 (on CPU this is the default anyway).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


__all__ = ["masked_topk", "masked_topk_normalized", "normalize_rows"]


def normalize_rows(x: jax.Array) -> jax.Array:
    """Row-wise L2 normalisation in ``x``'s floating dtype (at least float32); zero rows stay zero
    (no NaN, no NaN grads). Normalise keys once with it and search them with
    :func:`masked_topk_normalized`."""
    x = jnp.asarray(x)
    x = x.astype(jnp.result_type(x.dtype, jnp.float32))
    sq = jnp.sum(x * x, axis=-1, keepdims=True)
    safe = jnp.where(sq > 0, sq, 1.0)
    return jnp.where(sq > 0, x * jax.lax.rsqrt(safe), 0.0)


def _check_k(k: int) -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


def _check_shapes(queries: jax.Array, keys: jax.Array, bias: jax.Array, mask: jax.Array) -> None:
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


def masked_topk_normalized(
    queries: jax.Array,
    unit_keys: jax.Array,
    bias: jax.Array,
    mask: jax.Array,
    *,
    k: int,
    bias_weight: float | jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """:func:`masked_topk` for keys already normalised with :func:`normalize_rows`.

    The keys are used as given (rows of norm 1, or 0 for a zero key): no
    per-call normalisation of the ``[N, d]`` matrix. Queries are normalised
    here (``[Q, d]``, cheap).

    Args:
        queries: ``[Q, d]`` query embeddings ``phi(s)``.
        unit_keys: ``[N, d]`` ``normalize_rows(keys)``.
        bias: ``[N]`` per-key bias (reuse statistic ``u_i``).
        mask: ``bool[Q, N]`` eligibility (Eq. 7); ``False`` is never returned.
        k: Number of results (static; may exceed ``N``).
        bias_weight: Weight of the bias (``lambda_reuse``); traced.

    Returns:
        ``(scores [Q, k], idx i32[Q, k])`` as :func:`masked_topk`.

    Raises:
        ValueError: At trace time, on a bad ``k`` or inconsistent shapes.
    """
    _check_k(k)
    _check_shapes(queries, unit_keys, bias, mask)
    n = unit_keys.shape[0]
    dt = jnp.result_type(queries.dtype, unit_keys.dtype, jnp.float32)
    q = normalize_rows(queries.astype(dt))
    sims = jnp.matmul(q, unit_keys.astype(dt).T, precision=jax.lax.Precision.HIGHEST)
    scores = sims + jnp.asarray(bias_weight, dt) * bias.astype(dt)[None, :]
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

    Normalises ``keys`` on every call; for keys searched repeatedly, normalise
    once with :func:`normalize_rows` and call :func:`masked_topk_normalized`.

    Args:
        queries: ``[Q, d]`` query embeddings ``phi(s)``.
        keys: ``[N, d]`` key embeddings ``phi(q_i)``.
        bias: ``[N]`` per-key bias (reuse statistic ``u_i``).
        mask: ``bool[Q, N]`` eligibility (Eq. 7); ``False`` is never returned.
        k: Number of results (static: a Python int, ``static_argnames`` under
            ``jax.jit``; may exceed ``N``).
        bias_weight: Weight of the bias (``lambda_reuse``); traced, so
            changing it does not recompile.

    Returns:
        ``(scores [Q, k], idx i32[Q, k])`` sorted by descending score
        (ties: smaller index first), padded with ``(-inf, -1)``; scores in
        ``result_type(queries, keys, float32)``.

    Raises:
        ValueError: At trace time, on a bad ``k`` or inconsistent shapes.
    """
    _check_k(k)
    _check_shapes(queries, keys, bias, mask)
    dt = jnp.result_type(queries.dtype, keys.dtype, jnp.float32)
    return masked_topk_normalized(queries, normalize_rows(keys.astype(dt)), bias, mask, k=k,
                                  bias_weight=bias_weight)

"""NumPy reference of :mod:`cfjax.kernels.topk` (float64 internally, identical semantics)."""

from __future__ import annotations

import numpy as np

from cfjax.kernels.topk import _check_k

__all__ = ["masked_topk_reference", "masked_topk_normalized_reference", "normalize_rows_reference"]


def normalize_rows_reference(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation in float64; zero rows stay zero (twin of :func:`cfjax.kernels.topk.normalize_rows`)."""
    x = np.asarray(x, dtype=np.float64)
    nr = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, nr, out=np.zeros_like(x), where=nr > 0)


def _out_dtype(*arrays: np.ndarray) -> np.dtype:
    """The kernel's computation dtype: ``result_type(inputs, float32)``."""
    return np.result_type(*(np.asarray(a).dtype for a in arrays), np.float32)


def masked_topk_normalized_reference(
    queries: np.ndarray,
    unit_keys: np.ndarray,
    bias: np.ndarray,
    mask: np.ndarray,
    *,
    k: int,
    bias_weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of :func:`cfjax.kernels.topk.masked_topk_normalized` (float64 internally).

    Args:
        queries: ``[Q, d]`` queries (normalised here).
        unit_keys: ``[N, d]`` keys, used as given (already normalised).
        bias: ``[N]`` biases.
        mask: ``bool[Q, N]`` eligibility.
        k: Number of results.
        bias_weight: Weight of the bias.

    Returns:
        ``(scores [Q, k], idx int32[Q, k])``, same semantics as the kernel;
        scores in ``result_type(queries, unit_keys, float32)``.
    """
    _check_k(k)
    dtype = _out_dtype(queries, unit_keys)
    kk = np.asarray(unit_keys, dtype=np.float64)
    m = np.asarray(mask, dtype=bool)
    n_q, n = np.asarray(queries).shape[0], kk.shape[0]
    scores = normalize_rows_reference(queries) @ kk.T + float(bias_weight) * np.asarray(bias, np.float64)[None, :]
    scores = np.where(m, scores, -np.inf)
    out_s = np.full((n_q, k), -np.inf, dtype=dtype)
    out_i = np.full((n_q, k), -1, dtype=np.int32)
    cols = np.arange(n)
    for r in range(n_q):
        order = np.lexsort((cols, -scores[r]))[: min(k, n)]
        order = order[m[r, order]]
        out_s[r, : order.size] = scores[r, order]
        out_i[r, : order.size] = order
    return out_s, out_i


def masked_topk_reference(
    queries: np.ndarray,
    keys: np.ndarray,
    bias: np.ndarray,
    mask: np.ndarray,
    *,
    k: int,
    bias_weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of :func:`cfjax.kernels.topk.masked_topk` (float64 internally).

    Args:
        queries: ``[Q, d]`` queries.
        keys: ``[N, d]`` keys.
        bias: ``[N]`` biases.
        mask: ``bool[Q, N]`` eligibility.
        k: Number of results.
        bias_weight: Weight of the bias.

    Returns:
        ``(scores [Q, k], idx int32[Q, k])``, same semantics as
        :func:`cfjax.kernels.topk.masked_topk`; scores in
        ``result_type(queries, keys, float32)``.
    """
    s, i = masked_topk_normalized_reference(queries, normalize_rows_reference(keys), bias, mask, k=k,
                                            bias_weight=bias_weight)
    return s.astype(_out_dtype(queries, keys)), i

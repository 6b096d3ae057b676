"""NumPy reference of :mod:`cfjax.kernels.topk` (float64 internally, identical semantics)."""

from __future__ import annotations

import numpy as np

from cfjax.kernels.topk import _check_k

__all__ = ["masked_topk_reference"]


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
        ``(scores float32[Q, k], idx int32[Q, k])``, same semantics as
        :func:`cfjax.kernels.topk.masked_topk`.
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

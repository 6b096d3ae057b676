"""Tests for cfjax.kernels.topk (masked cosine + bias top-k, paper Eq. 7-8)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfjax.kernels import masked_topk as masked_topk_raw
from cfjax.kernels.reference import masked_topk_reference

masked_topk = jax.jit(masked_topk_raw, static_argnames=("k",))  # the caller jits (k static)


def _full_scores(
    q: np.ndarray, keys: np.ndarray, bias: np.ndarray, mask: np.ndarray, bw: float
) -> np.ndarray:
    def norm(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float64)
        nr = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, nr, out=np.zeros_like(x), where=nr > 0)

    return np.where(mask, norm(q) @ norm(keys).T + bw * bias.astype(np.float64)[None, :], -np.inf)


def _assert_valid_topk(full: np.ndarray, scores: np.ndarray, idx: np.ndarray, k: int) -> None:
    """Checks (scores, idx) is a correct top-k of `full`, tolerant to float32 near-ties."""
    for r in range(full.shape[0]):
        n_ret = min(k, int(np.isfinite(full[r]).sum()))
        assert np.all(idx[r, n_ret:] == -1) and np.all(np.isneginf(scores[r, n_ret:]))
        got = idx[r, :n_ret]
        assert len(set(got.tolist())) == n_ret and np.all(got >= 0)
        np.testing.assert_allclose(scores[r, :n_ret], full[r, got], atol=2e-6, rtol=0)
        assert np.all(np.diff(scores[r, :n_ret]) <= 0)
        rest = np.setdiff1d(np.arange(full.shape[1]), got)
        if n_ret and rest.size:
            assert full[r, rest].max() <= scores[r, n_ret - 1] + 2e-6


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 24),
    q=st.integers(1, 5),
    k=st.integers(1, 8),
    p_mask=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_kernel_matches_reference(n: int, q: int, k: int, p_mask: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    d, bw = 8, 0.2
    queries = rng.normal(size=(q, d)).astype(np.float32)
    keys = rng.normal(size=(n, d)).astype(np.float32)
    if n:
        keys[0] = 0.0  # a zero key: cosine 0, never NaN
    bias = rng.uniform(0, 1, size=n).astype(np.float32)
    mask = rng.random((q, n)) >= p_mask
    s, i = masked_topk(queries, keys, bias, mask, k=k, bias_weight=bw)
    s, i = np.asarray(s), np.asarray(i)
    assert s.shape == i.shape == (q, k) and s.dtype == np.float32 and i.dtype == np.int32
    rs, ri = masked_topk_reference(queries, keys, bias, mask, k=k, bias_weight=bw)
    assert rs.dtype == np.float32 and ri.dtype == np.int32
    full = _full_scores(queries, keys, bias, mask, bw)
    _assert_valid_topk(full, s, i, k)
    _assert_valid_topk(full, rs, ri, k)
    np.testing.assert_allclose(s, rs, atol=2e-6, rtol=0)  # -inf == -inf is accepted


def test_fewer_than_k_eligible_and_all_masked() -> None:
    e = np.eye(4, dtype=np.float32)
    keys = np.stack([e[0], e[1], 2 * e[0], e[2]])
    bias = np.zeros(4, np.float32)
    mask = np.array([[True, False, False, True], [False] * 4, [True] * 4])
    for fn in (masked_topk, masked_topk_reference):
        s, i = fn(e[[0, 0, 0]], keys, bias, mask, k=3, bias_weight=0.5)
        assert np.asarray(i).tolist() == [[0, 3, -1], [-1, -1, -1], [0, 2, 1]]
        s = np.asarray(s)
        assert s[0, :2].tolist() == [1.0, 0.0] and np.isneginf(s[0, 2])
        assert np.all(np.isneginf(s[1]))


def test_k_exceeds_n_and_empty_keys() -> None:
    q = np.ones((2, 3), np.float32)
    keys = np.array([[1, 1, 1], [1, 0, 0]], np.float32)
    s, i = masked_topk(q, keys, np.zeros(2, np.float32), np.ones((2, 2), bool), k=4, bias_weight=0.1)
    assert np.asarray(i).tolist() == [[0, 1, -1, -1]] * 2
    np.testing.assert_allclose(np.asarray(s)[:, :2], [[1.0, 1 / np.sqrt(3)]] * 2, rtol=1e-6)
    empty_keys, empty_bias = np.zeros((0, 3), np.float32), np.zeros(0, np.float32)
    s, i = masked_topk(q, empty_keys, empty_bias, np.zeros((2, 0), bool), k=2, bias_weight=0.1)
    assert np.asarray(i).tolist() == [[-1, -1]] * 2 and np.all(np.isneginf(np.asarray(s)))


def test_ties_resolve_to_smaller_index() -> None:
    # jax.lax.top_k itself: equal values come out lower index first.
    x = jnp.array([[0.5, 1.0, 0.5, 1.0, 1.0, 0.5]])
    assert jax.lax.top_k(x, 4)[1].tolist() == [[1, 3, 4, 0]]
    # and through the kernel, with exactly representable equal scores (bias breaks nothing).
    e = np.eye(2, dtype=np.float32)
    keys = np.stack([e[1], e[0], e[1], e[0], e[0]])
    bias = np.array([2.0, 0.0, 2.0, 0.0, 0.0], np.float32)
    mask = np.array([[True, True, True, False, True]])
    for fn in (masked_topk, masked_topk_reference):
        s, i = fn(e[[0]], keys, bias, mask, k=4, bias_weight=0.5)
        assert np.asarray(i).tolist() == [[0, 1, 2, 4]]
        assert np.asarray(s).tolist() == [[1.0, 1.0, 1.0, 1.0]]


def test_bias_weight_is_traced_and_k_static() -> None:
    q = np.ones((1, 2), np.float32)
    keys = np.array([[1, 0], [0, 1]], np.float32)
    bias = np.array([0.0, 1.0], np.float32)
    mask = np.ones((1, 2), bool)
    _, i0 = masked_topk(q, keys, bias, mask, k=1, bias_weight=0.0)
    _, i1 = masked_topk(q, keys, bias, mask, k=1, bias_weight=1.0)
    assert i0.tolist() == [[0]] and i1.tolist() == [[1]]
    with pytest.raises(ValueError, match="k"):
        masked_topk(q, keys, bias, mask, k=0, bias_weight=0.0)
    with pytest.raises(ValueError, match="mask"):
        masked_topk(q, keys, bias, np.ones((1, 3), bool), k=1, bias_weight=0.0)


def test_caller_jit_compiles_once_per_shape_and_k() -> None:
    traces = []

    def counted(*args, k, bias_weight):
        traces.append(k)
        return masked_topk_raw(*args, k=k, bias_weight=bias_weight)

    f = jax.jit(counted, static_argnames=("k",))
    rng = np.random.default_rng(0)
    for bw in (0.0, 0.3):  # bias_weight is traced: no recompile
        q, keys = rng.normal(size=(2, 4)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
        f(q, keys, np.zeros(5, np.float32), np.ones((2, 5), bool), k=3, bias_weight=bw)
    assert traces == [3]


# --------------------------------------------------------------------------- #
# pre-normalised keys: normalise once, search many times (float32 and float64) #
# --------------------------------------------------------------------------- #

from cfjax.kernels.reference.topk import masked_topk_normalized_reference, normalize_rows_reference  # noqa: E402
from cfjax.kernels.topk import masked_topk_normalized as masked_topk_normalized_raw  # noqa: E402
from cfjax.kernels.topk import normalize_rows  # noqa: E402

masked_topk_normalized = jax.jit(masked_topk_normalized_raw, static_argnames=("k",))
normalize_rows_jit = jax.jit(normalize_rows)


def _case(rng: np.random.Generator, dtype: type, q: int = 4, n: int = 30, d: int = 8):
    queries = rng.normal(size=(q, d)).astype(dtype)
    keys = rng.normal(size=(n, d)).astype(dtype)
    keys[3] = 0.0  # a zero key stays zero
    bias = rng.uniform(-1, 1, size=n).astype(dtype)
    mask = rng.random((q, n)) < 0.7
    return queries, keys, bias, mask


@pytest.mark.parametrize("dtype,atol", [(np.float32, 2e-6), (np.float64, 1e-12)])
def test_normalized_entry_matches_reference_under_jit(dtype: type, atol: float) -> None:
    rng = np.random.default_rng(21)
    with jax.enable_x64(dtype == np.float64):
        queries, keys, bias, mask = _case(rng, dtype)
        unit = normalize_rows_jit(keys)
        assert unit.dtype == dtype
        np.testing.assert_allclose(np.asarray(unit), normalize_rows_reference(keys), atol=atol * 10, rtol=0)
        s, i = masked_topk_normalized(queries, unit, bias, mask, k=5, bias_weight=0.3)
        rs, ri = masked_topk_normalized_reference(queries, np.asarray(unit), bias, mask, k=5, bias_weight=0.3)
        assert s.dtype == dtype and rs.dtype == dtype and i.dtype == np.int32
        full = _full_scores(queries, keys, bias, mask, 0.3)
        _assert_valid_topk(full, np.asarray(s, np.float64), np.asarray(i), 5)
        np.testing.assert_allclose(np.asarray(s), rs, atol=atol, rtol=0)
        if dtype == np.float64:  # no float32 near-ties at this precision: the same indices
            np.testing.assert_array_equal(np.asarray(i), ri)
        # the one-call kernel is exactly the two steps
        s2, i2 = masked_topk(queries, keys, bias, mask, k=5, bias_weight=0.3)
        np.testing.assert_array_equal(np.asarray(s2), np.asarray(s))
        np.testing.assert_array_equal(np.asarray(i2), np.asarray(i))


def test_normalized_entry_uses_keys_as_given() -> None:
    """No per-call normalisation: keys scaled by 2 give twice the cosine (the reference agrees)."""
    rng = np.random.default_rng(22)
    queries, keys, bias, mask = _case(rng, np.float32)
    unit = np.asarray(normalize_rows_jit(keys))
    s1, i1 = masked_topk_normalized(queries, unit, np.zeros_like(bias), mask, k=4, bias_weight=0.0)
    s2, i2 = masked_topk_normalized(queries, 2 * unit, np.zeros_like(bias), mask, k=4, bias_weight=0.0)
    np.testing.assert_array_equal(np.asarray(i1), np.asarray(i2))
    np.testing.assert_allclose(np.asarray(s2), 2 * np.asarray(s1), rtol=1e-6)
    rs, _ = masked_topk_normalized_reference(queries, 2 * unit, np.zeros_like(bias), mask, k=4, bias_weight=0.0)
    np.testing.assert_allclose(np.asarray(s2), rs, atol=4e-6, rtol=0)
    with pytest.raises(ValueError, match="keys"):
        masked_topk_normalized(queries, unit[:, :3], bias, mask, k=2, bias_weight=0.0)

"""Tests for cfjax.infra.index.VectorIndex (exact masked retrieval, paper Eq. 7-8)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfjax.infra.index import VectorIndex


def _brute_force(
    keys: np.ndarray,
    ids: np.ndarray,
    biases: np.ndarray,
    bw: float,
    queries: np.ndarray,
    mask: np.ndarray | None,
) -> np.ndarray:
    """float64 [Q, N] Eq. 8 scores, -inf where masked."""

    def norm(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float64)
        nr = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, nr, out=np.zeros_like(x), where=nr > 0)

    s = norm(queries) @ norm(keys).T + bw * biases[None, :]
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return s


def _check_topk(ref: np.ndarray, ids: np.ndarray, scores: np.ndarray, ids_out: np.ndarray, k: int) -> None:
    """Checks a top-k answer against full reference scores, robust to float near-ties."""
    q, n = ref.shape
    assert scores.shape == ids_out.shape == (q, k)
    assert scores.dtype == np.float32 and ids_out.dtype == np.int64
    col = {int(i): c for c, i in enumerate(ids)}
    for r in range(q):
        n_valid = int(np.isfinite(ref[r]).sum())
        n_ret = min(k, n_valid)
        assert np.all(ids_out[r, n_ret:] == -1) and np.all(np.isneginf(scores[r, n_ret:]))
        got = ids_out[r, :n_ret]
        assert np.all(got >= 0) and len(set(got.tolist())) == n_ret
        got_cols = np.array([col[int(i)] for i in got], dtype=np.int64)
        # every returned id is eligible and carries its own exact score
        np.testing.assert_allclose(scores[r, :n_ret], ref[r, got_cols], rtol=0, atol=1e-5)
        assert np.all(np.diff(scores[r, :n_ret].astype(np.float64)) <= 0)
        # nothing left out scores (meaningfully) higher than the last returned one
        rest = np.setdiff1d(np.arange(n), got_cols)
        if n_ret and rest.size:
            assert ref[r, rest].max() <= scores[r, n_ret - 1] + 1e-5
        # and the answer equals the exact ranking when there are no near-ties
        order = np.lexsort((np.arange(n), -ref[r]))[:n_ret]
        gaps = np.diff(ref[r, np.lexsort((np.arange(n), -ref[r]))][: n_ret + 1])
        if n_ret and np.all(np.abs(gaps[np.isfinite(gaps)]) > 1e-4):
            assert np.array_equal(got, ids[order])


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 40),
    q=st.integers(1, 6),
    k=st.integers(1, 12),
    p_mask=st.sampled_from([0.0, 0.3, 0.8, 1.0]),
    n_remove=st.integers(0, 5),
    seed=st.integers(0, 2**31 - 1),
)
def test_search_matches_brute_force(n: int, q: int, k: int, p_mask: float, n_remove: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dim, bw = 16, 0.3
    idx = VectorIndex(dim, bias_weight=bw)
    keys = rng.normal(size=(n, dim)).astype(np.float32)
    biases = rng.uniform(-1, 1, size=n)
    ids = idx.add(keys, biases)
    assert np.array_equal(ids, np.arange(n))
    if n and n_remove:
        gone = rng.choice(ids, size=min(n_remove, n), replace=False)
        idx.remove(gone)
        keep = ~np.isin(ids, gone)
        keys, biases, ids = keys[keep], biases[keep], ids[keep]
    assert np.array_equal(idx.ids, ids) and len(idx) == ids.size
    queries = rng.normal(size=(q, dim)).astype(np.float32)
    mask = rng.random((q, ids.size)) >= p_mask  # p_mask = 1.0 -> all-masked rows
    if ids.size and q > 1:
        mask[0] = False
        mask[0, : min(2, ids.size)] = True  # fewer than k eligible (when k > 2)
    for m in (mask, None):
        scores, out = idx.search(queries, k, m)
        _check_topk(_brute_force(keys, ids, biases, bw, queries, m), ids, scores, out, k)


def test_bias_term_exact_hand_computed() -> None:
    # Values chosen to be exact in binary floating point, so equality is exact.
    idx = VectorIndex(4, bias_weight=0.25)
    keys = np.array([[1, 1, 1, 1], [2, 0, 0, 0], [0, 0, 3, 0], [-1, -1, -1, -1]], np.float32)
    ids = idx.add(keys, biases=[0.5, 0.0, 1.0, 2.5])
    query = np.array([[7, 0, 0, 0]], np.float32)
    scores, out = idx.search(query, k=4)
    # cos: 0.5, 1.0, 0.0, -0.5;  + 0.25 * bias: 0.125, 0.0, 0.25, 0.625
    assert out.tolist() == [ids[[1, 0, 2, 3]].tolist()]
    np.testing.assert_array_equal(scores, np.array([[1.0, 0.625, 0.25, 0.125]], np.float32))
    idx.set_bias([ids[2]], [4.0])  # 0.0 + 0.25 * 4.0 = 1.0 ties with ids[1] -> smaller id first
    scores, out = idx.search(query, k=2)
    assert out.tolist() == [[ids[1], ids[2]]]
    np.testing.assert_array_equal(scores, np.array([[1.0, 1.0]], np.float32))
    idx2 = VectorIndex(4, bias_weight=0.0)  # bias_weight 0: pure cosine
    idx2.add(keys, biases=[9.0, 0.0, 9.0, 9.0])
    assert idx2.search(query, k=4)[1].tolist() == [[1, 0, 2, 3]]


def test_ties_broken_by_smaller_id_and_k_exceeds_n() -> None:
    idx = VectorIndex(3, bias_weight=0.0)
    e = np.eye(3, dtype=np.float32)
    idx.add(np.stack([e[1], e[0], e[0], e[2], e[0]]))
    idx.remove([1])
    scores, out = idx.search(e[[0]], k=7)
    assert out.tolist() == [[2, 4, 0, 3, -1, -1, -1]]
    assert scores[0, :2].tolist() == [1.0, 1.0] and scores[0, 2:4].tolist() == [0.0, 0.0]
    assert np.all(np.isneginf(scores[0, 4:]))
    # k smaller than the tie group: still the smallest ids
    _, out = idx.search(e[[0]], k=1)
    assert out.tolist() == [[2]]
    _, out = idx.search(e[[1]], k=2, mask=np.array([[True, True, True, False]]))
    assert out.tolist() == [[0, 2]]


def test_empty_index_and_all_masked() -> None:
    idx = VectorIndex(4)
    scores, out = idx.search(np.ones((2, 4), np.float32), k=3)
    assert out.tolist() == [[-1] * 3] * 2 and np.all(np.isneginf(scores))
    scores, out = idx.search(np.ones((2, 4), np.float32), k=3, mask=np.zeros((2, 0), bool))
    assert out.tolist() == [[-1] * 3] * 2
    idx.add(np.ones((3, 4), np.float32))
    scores, out = idx.search(np.ones((1, 4), np.float32), k=2, mask=np.zeros((1, 3), bool))
    assert out.tolist() == [[-1, -1]] and np.all(np.isneginf(scores))
    assert idx.search(np.ones((0, 4), np.float32), k=2)[1].shape == (0, 2)


def test_ids_never_reused() -> None:
    idx = VectorIndex(4)
    rng = np.random.default_rng(1)
    a = idx.add(rng.normal(size=(3, 4)).astype(np.float32))
    idx.remove(a)
    assert len(idx) == 0
    b = idx.add(rng.normal(size=(2, 4)).astype(np.float32))
    assert b.tolist() == [3, 4]
    idx.remove([3])
    c = idx.add(rng.normal(size=(1, 4)).astype(np.float32))
    assert c.tolist() == [5] and idx.ids.tolist() == [4, 5]
    with pytest.raises(KeyError, match="3"):
        idx.remove([3])
    with pytest.raises(KeyError, match="99"):
        idx.set_bias([4, 99], [1.0, 2.0])
    with pytest.raises(KeyError, match="0"):
        idx.vectors([0])
    assert idx.ids.tolist() == [4, 5]  # failed remove removes nothing


def test_vectors_are_normalised_and_zero_safe() -> None:
    idx = VectorIndex(3)
    ids = idx.add(np.array([[0, 3, 4], [0, 0, 0]], np.float32))
    v = idx.vectors(ids[::-1])
    np.testing.assert_allclose(v, [[0, 0, 0], [0, 0.6, 0.8]], atol=1e-7)
    scores, out = idx.search(np.array([[0, 0, 0]], np.float32), k=2)  # zero query: cosine 0
    assert out.tolist() == [[0, 1]] and scores.tolist() == [[0.0, 0.0]]


def test_validation_errors() -> None:
    idx = VectorIndex(4)
    with pytest.raises(ValueError, match="shape"):
        idx.add(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="shape"):
        idx.add(np.ones((2, 5), np.float32))
    with pytest.raises(ValueError, match="dtype"):
        idx.add(np.ones((2, 4), np.int64))
    with pytest.raises(ValueError, match="NaN"):
        idx.add(np.full((1, 4), np.nan, np.float32))
    with pytest.raises(ValueError, match="biases"):
        idx.add(np.ones((2, 4), np.float32), biases=[1.0])
    assert len(idx) == 0 and idx.next_id == 0  # failed adds leave no trace
    idx.add(np.ones((2, 4), np.float32))
    q = np.ones((1, 4), np.float32)
    with pytest.raises(ValueError, match="k"):
        idx.search(q, 0)
    with pytest.raises(ValueError, match="mask"):
        idx.search(q, 1, mask=np.ones((1, 3), bool))
    with pytest.raises(ValueError, match="bool"):
        idx.search(q, 1, mask=np.ones((1, 2), np.int64))


def test_save_load_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    idx = VectorIndex(8, bias_weight=0.25, num_threads=1)
    idx.add(rng.normal(size=(20, 8)).astype(np.float32), rng.uniform(size=20))
    idx.remove([0, 5, 19])
    idx.set_bias([3], [2.0])
    q = rng.normal(size=(4, 8)).astype(np.float32)
    mask = rng.random((4, len(idx))) < 0.7
    before = idx.search(q, 5, mask)
    path = tmp_path / "mem.idx"
    idx.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["mem.idx"]  # no temp file left
    loaded = VectorIndex.load(path)
    assert loaded.dim == 8 and loaded.bias_weight == 0.25 and loaded.next_id == 20
    assert np.array_equal(loaded.ids, idx.ids) and np.array_equal(loaded.biases, idx.biases)
    np.testing.assert_array_equal(loaded.vectors(idx.ids), idx.vectors(idx.ids))
    after = loaded.search(q, 5, mask)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    assert loaded.add(np.ones((1, 8), np.float32)).tolist() == [20]
    idx.save(path)  # overwrite in place
    assert VectorIndex.load(path).next_id == 20


def test_corrupt_file_raises(tmp_path: Path) -> None:
    idx = VectorIndex(4)
    idx.add(np.eye(4, dtype=np.float32))
    path = tmp_path / "mem.idx"
    idx.save(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "flipped.idx").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        VectorIndex.load(tmp_path / "flipped.idx")
    (tmp_path / "short.idx").write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="checksum"):
        VectorIndex.load(tmp_path / "short.idx")
    (tmp_path / "junk.idx").write_bytes(b"not an index")
    with pytest.raises(ValueError, match="not a VectorIndex"):
        VectorIndex.load(tmp_path / "junk.idx")


# --------------------------------------------------------------------------- #
# a checksummed file with damaged contents: CorruptFileError, never a traceback #
# --------------------------------------------------------------------------- #


def _resealed(path: Path, **arrays) -> Path:
    """``path`` rewritten with some of its npz arrays replaced, under a *valid* checksum."""
    import hashlib
    import io

    from cfjax.infra import index as mod

    head = len(mod._MAGIC) + mod._DIGEST_SIZE
    with np.load(io.BytesIO(path.read_bytes()[head:])) as z:
        d = {k: z[k] for k in z.files}
    d.update(arrays)
    buf = io.BytesIO()
    np.savez(buf, **d)
    body = buf.getvalue()
    out = path.with_name("resealed.idx")
    out.write_bytes(mod._MAGIC + hashlib.sha256(body).digest() + body)
    return out


def _header(**kw) -> np.ndarray:
    import json

    h = {"format_version": 1, "dim": 4, "bias_weight": 0.2, "next_id": 4, "size": 4, **kw}
    return np.frombuffer(json.dumps(h).encode(), dtype=np.uint8)


@pytest.mark.parametrize("arrays,needle", [
    ({"faiss_index": np.frombuffer(b"\x00garbage" * 20, dtype=np.uint8)}, "FAISS index"),
    ({"faiss_index": np.zeros(3, np.uint8)}, "too short"),
    ({"header": np.frombuffer(b"[" * 5000, dtype=np.uint8)}, "unreadable VectorIndex payload"),
    ({"header": np.frombuffer(b"\xff\xfe", dtype=np.uint8)}, "unreadable VectorIndex payload"),
    ({"header": _header(dim="4")}, "bad header values"),
    ({"header": _header(dim=0)}, "bad header values"),
    ({"header": _header(size=3)}, "sizes differ"),
    ({"header": _header(next_id=2)}, "ascending"),
    ({"ids": np.array([0, 1, 2, 3], np.float64)}, "wrong dtype"),
    ({"biases": np.array([0, 0, np.nan, 0])}, "NaN"),
])
def test_corrupt_contents_under_a_valid_checksum(tmp_path: Path, arrays, needle) -> None:
    from cfjax.infra.io import CorruptFileError

    idx = VectorIndex(4)
    idx.add(np.eye(4, dtype=np.float32))
    path = tmp_path / "mem.idx"
    idx.save(path)
    bad = _resealed(path, **arrays)
    with pytest.raises(CorruptFileError, match=needle) as e:
        VectorIndex.load(bad)
    assert "\n" not in str(e.value) and str(bad) in str(e.value)


def test_load_removes_stale_temps_of_interrupted_saves(tmp_path: Path) -> None:
    import os
    import time

    idx = VectorIndex(4)
    idx.add(np.eye(4, dtype=np.float32))
    path = tmp_path / "mem.idx"
    idx.save(path)
    stale, fresh = tmp_path / ".mem.idx.abc_1234.tmp", tmp_path / ".mem.idx.def45678.tmp"
    mine = tmp_path / ".mem.idx.my-backup.tmp"  # not a name mkstemp makes: the user's, kept
    for p in (stale, fresh, mine):
        p.write_bytes(b"partial")
    old = time.time() - 3600
    for p in (stale, mine):
        os.utime(p, (old, old))
    VectorIndex.load(path)
    assert not stale.exists() and fresh.exists() and mine.exists()

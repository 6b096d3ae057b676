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

    h = {"format_version": 2, "dim": 4, "bias_weight": 0.2, "next_id": 4, "size": 4, "trained_at": 0,
         "config": {"approx_threshold": 50000, "kind": "pq", "nlist": 0, "nprobe": 32, "retrain_growth": 4.0,
                    "train_points_per_centroid": 256, "seed": 0}, **kw}
    return np.frombuffer(json.dumps(h).encode(), dtype=np.uint8)


@pytest.mark.parametrize("arrays,needle", [
    ({"ivf_index": np.frombuffer(b"\x00garbage" * 20, dtype=np.uint8)}, "IVF index"),
    ({"header": np.frombuffer(b"[" * 5000, dtype=np.uint8)}, "unreadable VectorIndex payload"),
    ({"header": np.frombuffer(b"\xff\xfe", dtype=np.uint8)}, "unreadable VectorIndex payload"),
    ({"header": _header(dim="4")}, "bad header values"),
    ({"header": _header(dim=0)}, "bad header values"),
    ({"header": _header(trained_at=-1)}, "bad header values"),
    ({"header": _header(format_version=3)}, "unsupported format version"),
    ({"header": _header(config={"nprobe": 0})}, "bad index config"),
    ({"header": _header(config={"bogus": 1})}, "bad index config"),
    ({"header": _header(size=3)}, "wrong dtype or shape"),
    ({"header": _header(next_id=2)}, "ascending"),
    ({"ids": np.array([0, 1, 2, 3], np.float64)}, "wrong dtype"),
    ({"keys": np.eye(4, dtype=np.float64)}, "wrong dtype"),
    ({"keys": np.full((4, 4), np.nan, np.float32)}, "NaN"),
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


def _v1_file(tmp_path: Path, keys: np.ndarray, ids: np.ndarray, biases: np.ndarray, next_id: int,
             faiss_index: np.ndarray | None = None) -> Path:
    """A file in format version 1 (keys held by a serialised IndexIDMap2(IndexFlatIP))."""
    import hashlib
    import io
    import json

    import faiss

    from cfjax.infra import index as mod

    if faiss_index is None:
        flat = faiss.IndexIDMap2(faiss.IndexFlatIP(keys.shape[1]))
        flat.add_with_ids(keys, ids)
        faiss_index = np.asarray(faiss.serialize_index(flat), dtype=np.uint8)
    h = {"format_version": 1, "dim": keys.shape[1], "bias_weight": 0.25, "next_id": next_id, "size": ids.size}
    buf = io.BytesIO()
    np.savez(buf, header=np.frombuffer(json.dumps(h).encode(), dtype=np.uint8), faiss_index=faiss_index,
             ids=ids, biases=biases)
    body = buf.getvalue()
    out = tmp_path / "v1.idx"
    out.write_bytes(mod._MAGIC + hashlib.sha256(body).digest() + body)
    return out


def test_loads_format_version_1(tmp_path: Path) -> None:
    from cfjax.infra.index import _normalise
    from cfjax.infra.io import CorruptFileError

    rng = np.random.default_rng(3)
    keys = _normalise(rng.normal(size=(6, 8)).astype(np.float32))
    ids, biases = np.array([0, 2, 3, 5, 6, 9]), rng.uniform(size=6)
    old = VectorIndex.load(_v1_file(tmp_path, keys, ids, biases, next_id=10))
    assert old.next_id == 10 and old.bias_weight == 0.25 and not old.approximate
    assert np.array_equal(old.ids, ids) and np.array_equal(old.biases, biases)
    np.testing.assert_array_equal(old.vectors(ids), keys)
    ref = VectorIndex(8, bias_weight=0.25)
    ref.add(keys, biases)
    q = rng.normal(size=(3, 8)).astype(np.float32)
    np.testing.assert_array_equal(old.search(q, 4)[0], ref.search(q, 4)[0])
    with pytest.raises(CorruptFileError, match="FAISS index"):
        VectorIndex.load(_v1_file(tmp_path, keys, ids, biases, 10, np.frombuffer(b"\x00bad" * 60, np.uint8)))
    with pytest.raises(CorruptFileError, match="too short"):
        VectorIndex.load(_v1_file(tmp_path, keys, ids, biases, 10, np.zeros(3, np.uint8)))


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


# --------------------------------------------------------------------------- #
# batched exact search over several blocks, and the approximate (IVF) index   #
# --------------------------------------------------------------------------- #

from cfjax.infra.index import IndexConfig  # noqa: E402

EXACT = IndexConfig(approx_threshold=0)


def _clustered(rng: np.random.Generator, n: int, dim: int, n_clusters: int, spread: float = 0.35) -> np.ndarray:
    """Unit-norm centres plus isotropic noise of norm ``~spread``: a set where IVF recall is meaningful."""
    centres = rng.normal(size=(n_clusters, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[rng.integers(0, n_clusters, size=n)] + rng.normal(scale=spread / np.sqrt(dim), size=(n, dim))
    return x.astype(np.float32)


def test_batched_exact_search_equals_brute_force_across_blocks() -> None:
    """12,000 keys (two row blocks for a batch of 64), bias, per-query and shared filters,
    removals: every answer equals the float64 brute force, batch and single queries agree bit for bit."""
    rng = np.random.default_rng(5)
    n, dim, bw = 12_000, 32, 0.3
    keys = _clustered(rng, n, dim, 40)
    biases = rng.uniform(-1, 1, size=n)
    idx = VectorIndex(dim, bias_weight=bw, config=EXACT)
    ids = idx.add(keys, biases)
    gone = rng.choice(ids, size=300, replace=False)
    idx.remove(gone)
    keep = ~np.isin(ids, gone)
    keys, biases, ids = keys[keep], biases[keep], ids[keep]
    queries = _clustered(rng, 64, dim, 40)
    per_query = rng.random((64, ids.size)) < 0.7
    shared = rng.random(ids.size) < 0.5
    for m in (None, per_query, shared):
        scores, out = idx.search(queries, 10, m)
        ref_mask = None if m is None else np.broadcast_to(m, (64, ids.size))
        _check_topk(_brute_force(keys, ids, biases, bw, queries, ref_mask), ids, scores, out, 10)
        for r in (0, 17, 63):  # one query at a time (the sgemv path) gives the same bits
            s1, o1 = idx.search(queries[r : r + 1], 10, None if m is None else (m if m.ndim == 1 else m[r : r + 1]))
            np.testing.assert_array_equal(s1[0], scores[r])
            np.testing.assert_array_equal(o1[0], out[r])


def test_identical_vectors_tie_exactly_wherever_they_sit() -> None:
    """BLAS may round two identical rows differently; the rescoring makes them tie, smaller id first."""
    rng = np.random.default_rng(6)
    dim = 48
    keys = rng.normal(size=(5003, dim)).astype(np.float32)
    target = rng.normal(size=dim).astype(np.float32)
    slots = [1, 2, 3, 1030, 4099, 5000, 5001, 5002]  # head, block edges and the ragged tail
    keys[slots] = target
    idx = VectorIndex(dim, bias_weight=0.0, config=EXACT)
    idx.add(keys)
    q = (target + rng.normal(scale=0.3, size=dim)).astype(np.float32)
    for batch in (q[None, :], np.repeat(q[None, :], 9, axis=0)):
        scores, out = idx.search(batch, 8)
        assert out[0].tolist() == slots
        assert np.all(scores[:, :8] == scores[0, 0])


def test_zero_query_and_all_tied_scores_keep_smallest_ids() -> None:
    idx = VectorIndex(8, bias_weight=0.5, config=EXACT)
    idx.add(np.random.default_rng(7).normal(size=(3000, 8)).astype(np.float32), biases=1.0)
    scores, out = idx.search(np.zeros((2, 8), np.float32), 5)
    assert out.tolist() == [[0, 1, 2, 3, 4]] * 2 and np.all(scores == 0.5)


_APPROX = IndexConfig(approx_threshold=5_000, kind="flat", nprobe=12, seed=3)


@pytest.fixture(scope="module")
def clustered_ivf() -> tuple[VectorIndex, np.ndarray, np.ndarray, np.ndarray]:
    """A 20,000-vector clustered set above a low threshold: the IVF is trained and used."""
    rng = np.random.default_rng(8)
    keys = _clustered(rng, 20_000, 32, 60)
    biases = rng.uniform(-1, 1, size=20_000)
    idx = VectorIndex(32, bias_weight=0.1, config=_APPROX, num_threads=1)  # 1 thread: a shared CI machine
    idx.add(keys[:4_999], biases[:4_999])
    assert not idx.approximate and idx.nlist is None  # below the threshold: exact, untrained
    idx.add(keys[4_999:], biases[4_999:])  # crosses it: trained on everything stored, then 4x growth
    return idx, keys, biases, _clustered(rng, 64, 32, 60)


def _recall(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    hits = [len(set(a[a >= 0].tolist()) & set(e[e >= 0].tolist())) for a, e in zip(approx_ids, exact_ids)]
    return sum(hits) / max(1, int(np.count_nonzero(exact_ids >= 0)))


def test_approximate_recall_with_and_without_filters(clustered_ivf) -> None:
    idx, keys, biases, queries = clustered_ivf
    assert idx.approximate and idx.nlist == round(np.sqrt(20_000))  # trained at 20,000 (4x growth retrain)
    exact = VectorIndex(32, bias_weight=0.1, config=EXACT)
    exact.add(keys, biases)
    rng = np.random.default_rng(9)
    masks = [None, rng.random(20_000) < 0.5, np.repeat(rng.random((4, 20_000)) < 0.3, 16, axis=0)]
    for m in masks:
        s_a, i_a = idx.search(queries, 10, m)
        s_e, i_e = exact.search(queries, 10, m)
        assert _recall(i_a, i_e) >= 0.95
        full = _brute_force(keys, np.arange(20_000), biases, 0.1, queries,
                            None if m is None else np.broadcast_to(m, (64, 20_000)))
        valid = i_a >= 0
        assert valid.all()  # enough eligible entries everywhere: never padded
        # scores are the exact scores of the returned ids, eligible ids only
        np.testing.assert_allclose(s_a, np.take_along_axis(full, i_a, axis=1), atol=1e-5, rtol=0)


def test_ivf_pq_variant_recall_and_round_trip(clustered_ivf, tmp_path: Path) -> None:
    """kind="pq": zero-padded folded vectors, exact re-ranking of rerank * k candidates."""
    _, keys, biases, queries = clustered_ivf
    cfg = IndexConfig(approx_threshold=5_000, kind="pq", pq_m=12, nprobe=12, train_points_per_centroid=40, seed=3)
    assert cfg.ivf_dim(32) == 36
    idx = VectorIndex(32, bias_weight=0.1, config=cfg, num_threads=1)
    idx.add(keys, biases)
    exact = VectorIndex(32, bias_weight=0.1, config=EXACT)
    exact.add(keys, biases)
    m = np.random.default_rng(13).random(20_000) < 0.5
    for mask in (None, m):
        s_a, i_a = idx.search(queries, 10, mask)
        assert _recall(i_a, exact.search(queries, 10, mask)[1]) >= 0.95
        full = _brute_force(keys, np.arange(20_000), biases, 0.1, queries, None if mask is None else
                            np.broadcast_to(mask, (64, 20_000)))
        np.testing.assert_allclose(s_a, np.take_along_axis(full, i_a, axis=1), atol=1e-5, rtol=0)  # exact scores
    idx.save(tmp_path / "pq.idx")
    again = VectorIndex.load(tmp_path / "pq.idx")
    np.testing.assert_array_equal(again.search(queries, 10)[1], idx.search(queries, 10)[1])


def test_approximate_restrictive_filter_widens_the_probe(clustered_ivf) -> None:
    """Eligible entries far from the query's lists are still found (nprobe escalates to nlist)."""
    idx, keys, biases, queries = clustered_ivf
    far = np.argsort(keys @ queries[0])[:3]  # the 3 least similar keys
    m = np.zeros(20_000, bool)
    m[far] = True
    scores, out = idx.search(queries[:1], 5, m)
    assert sorted(out[0, :3].tolist()) == sorted(far.tolist()) and out[0, 3:].tolist() == [-1, -1]
    assert np.all(np.isneginf(scores[0, 3:]))


def test_approximate_bias_is_part_of_the_probe() -> None:
    """A far entry with a large bias wins: the bias is folded into the IVF vectors and set_bias updates
    them (every list probed, so only the folding is tested: routing to lists uses the centroids)."""
    rng = np.random.default_rng(10)
    keys = _clustered(rng, 6_000, 16, 30)
    idx = VectorIndex(16, bias_weight=1.0, config=IndexConfig(approx_threshold=5_000, kind="flat", nprobe=1_000),
                      num_threads=1)
    idx.add(keys)
    assert idx.approximate
    q = keys[:1]
    far = int(np.argmin(keys @ q[0]))
    assert idx.search(q, 1)[1][0, 0] != far
    idx.set_bias([far], [5.0])
    scores, out = idx.search(q, 1)
    assert out[0, 0] == far
    np.testing.assert_allclose(scores[0, 0], _brute_force(keys, np.arange(6_000), np.eye(6_000)[far] * 5, 1.0,
                                                           q, None)[0, far], atol=1e-6)


def test_approximate_ids_stable_across_remove_add_save_load(clustered_ivf, tmp_path: Path) -> None:
    import faiss

    base, keys, biases, queries = clustered_ivf
    path = tmp_path / "ivf.idx"
    base.save(path)
    idx = VectorIndex.load(path)  # a copy: the module fixture stays untouched
    assert idx.approximate and idx.nlist == base.nlist and idx.config == base.config
    before = base.search(queries, 10)
    after = idx.search(queries, 10)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    gone = np.unique(before[1][:8, :3])
    idx.remove(gone)
    _, out = idx.search(queries, 10)
    assert not np.isin(out, gone).any()
    new = idx.add(keys[:2], biases[:2])  # the vectors of ids 0 and 1 again, under new ids
    assert new.tolist() == [20_000, 20_001] and idx.approximate
    scores, out = idx.search(keys[:2], 10)
    for r in (0, 1):  # same direction and bias: an exact tie, the smaller id first
        at = out[r].tolist().index(r)
        assert out[r, at + 1] == new[r] and scores[r, at] == scores[r, at + 1]
    np.testing.assert_array_equal(idx.vectors(new), idx.vectors([0, 1]))
    previous = faiss.cvar.distance_compute_blas_threshold
    idx.save(path)
    again = VectorIndex.load(path)
    assert faiss.cvar.distance_compute_blas_threshold == previous  # restored after every search
    np.testing.assert_array_equal(again.search(queries, 10)[1], idx.search(queries, 10)[1])
    assert again.add(keys[:1]).tolist() == [20_002]


def test_retrain_and_drop_policy() -> None:
    rng = np.random.default_rng(11)
    cfg = IndexConfig(approx_threshold=2_000, kind="flat", retrain_growth=2.0, seed=1)
    idx = VectorIndex(8, config=cfg, num_threads=1)
    ids = idx.add(_clustered(rng, 2_000, 8, 10))
    assert idx.approximate and idx.nlist == 45  # round(sqrt(2000))
    idx.add(_clustered(rng, 1_999, 8, 10))
    assert idx.nlist == 45  # 3,999 < 2 x 2,000: incremental adds only
    idx.add(_clustered(rng, 1, 8, 10))
    assert idx.nlist == 63  # 4,000: retrained from everything stored
    idx.remove(ids[:1_500])
    assert idx.approximate  # 2,500 >= threshold
    idx.remove(ids[1_500:])
    assert idx.approximate and len(idx) == 2_000  # at the threshold
    idx.remove(idx.ids[:100])
    assert not idx.approximate and idx.nlist == 63  # 1,900: kept (hysteresis), searched exactly
    idx.add(_clustered(rng, 100, 8, 10))
    assert idx.approximate and idx.nlist == 63  # back at the threshold: the kept IVF, no retraining
    idx.remove(idx.ids[:1_001])
    assert idx.nlist is None and not idx.approximate  # 999 < threshold // 2: dropped


def test_training_is_deterministic() -> None:
    rng = np.random.default_rng(12)
    keys, queries = _clustered(rng, 3_000, 16, 20), _clustered(rng, 8, 16, 20)
    runs = []
    for _ in range(2):
        idx = VectorIndex(16, config=IndexConfig(approx_threshold=3_000, kind="flat", nprobe=2, seed=4),
                          num_threads=1)
        idx.add(keys)
        runs.append(idx.search(queries, 5))
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_index_config_validation() -> None:
    for bad, needle in [({"approx_threshold": -1}, "approx_threshold"), ({"nprobe": 0}, "nprobe"),
                        ({"nlist": -2}, "nlist"), ({"retrain_growth": 1.0}, "retrain_growth"),
                        ({"train_points_per_centroid": 0}, "train_points"), ({"nprobe": 2.5}, "nprobe"),
                        ({"kind": "hnsw"}, "kind"), ({"pq_m": 0}, "pq_m"), ({"rerank": 0}, "rerank"),
                        ({"approx_threshold": 10, "nlist": 20}, "nlist")]:
        with pytest.raises(ValueError, match=needle):
            IndexConfig(**bad)
    assert IndexConfig().nlist_for(1_000_000) == 1000 and IndexConfig().nlist_for(10) == 10
    assert IndexConfig(nlist=4096).nlist_for(100_000) == 4096
    with pytest.raises(ValueError, match="IndexConfig"):
        VectorIndex(4, config={"nprobe": 4})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mask"):
        VectorIndex(4).search(np.ones((2, 4), np.float32), 1, mask=np.ones(3, bool))

"""FAISS-backed vector index with per-entry bias and eligibility masks, exact or approximate.

:class:`VectorIndex` stores the key embeddings ``phi(q_i)`` of memory records
and answers the retrieval of CounterMem Eq. 8,

    ``r_i = cos(phi(s), phi(q_i)) + lambda_reuse * u_i``,

returning the top ``k`` records among the *eligible* ones (Eq. 7: the caller
passes a boolean mask that excludes records from the current task and
records whose condition fails). Here ``bias_weight`` is ``lambda_reuse`` and
the per-entry ``bias`` is the reuse statistic ``u_i``.

Length: one index with two search paths (exact and IVF) that must keep the same ids, masks,
bias semantics and file format; splitting them would split those invariants across modules.

Storage. The L2-normalised keys live in one contiguous ``float32`` matrix,
normalised once at insertion (never per query), in insertion order, which is
also ascending id order. Queries are normalised at search time.

Exact search (below ``IndexConfig.approx_threshold`` entries, the default for
every memory cfjax builds today). A batch of queries is answered in one pass
over the key matrix, in row blocks, with one BLAS matrix product per block
(``sgemv`` for one query, ``sgemm`` for a batch: the memory-streaming limit
for one query, matrix-multiply speed for a batch). The bias is added and the
mask applied to each block, and only entries that can still reach a query's
top ``k`` are kept: those above the query's running ``k``-th best score minus
a tolerance. The kept candidates are then *rescored* with FAISS's
per-vector kernel ``fvec_inner_product``, in float64 with the bias, and the
top ``k`` is taken by ``(-score, id)``. The tolerance (twice a rigorous bound
on the float32 rounding of a ``dim``-term dot product of unit vectors, about
``1.3e-4`` at ``dim=512``) guarantees that every entry whose rescored score
reaches the ``k``-th is a candidate, so the result is exactly the top ``k``
of the rescored scores: the same numbers whatever the batch size or BLAS
kernel, identical vectors always tie (BLAS kernels can round two identical
rows differently) and ties go to the smaller id. For the memories cfjax
builds (up to thousands of entries) these are bit for bit the scores of
earlier versions of this class, which asked FAISS's flat index for all
``N`` similarities (the same kernel at those sizes) and sorted them in
float64.

Approximate search (``len(index) >= IndexConfig.approx_threshold``). An
IVF index (inner product) over *bias-folded* vectors ``[v_i, lambda * u_i]``,
searched with ``[q, 1]``: the folded inner product is exactly the Eq. 8
score, so the scan inside the probed lists ranks by the full score and an
entry with a large bias is not lost to a small cosine there. (Which lists
are probed is decided by the centroids, whose bias coordinate is the mean
folded bias of their members: an entry whose bias grew far above its
list's after training can be missed when its list is not probed; that is
the approximation.) The IVF returns ``k + 8`` candidates per query (``rerank
* k`` for IVF-PQ), which are rescored exactly as above, so returned scores
are always exact. ``IndexConfig.kind`` picks the lists' encoding: ``"pq"``
(``IndexIVFPQ``, the default: ``pq_m`` bytes per vector, the folded vectors
zero-padded to a multiple of ``pq_m``) or ``"flat"`` (``IndexIVFFlat``: the
full float32 vectors, a second copy of the keys). The default was chosen by
measurement (``benchmarks/retrieval.py``, table ``retrieval/ivf_choice``:
10^6 x 512, ``nlist=1000``, ``nprobe=32``, 2 threads): after the exact
re-ranking both reach the same recall@10 (1.0, with and without filters),
IVF-PQ answers one query about 7x and a batch about 5x faster (it reads 64
bytes per scanned vector instead of 2 KB) and adds 0.07 GB instead of
2 GB, for about 3x the build time (PQ training and encoding: ~3 minutes
at 10^6 on 2 cores, paid again at every retraining). Choose ``"flat"``
when build time matters more, or for small ``dim`` (PQ needs enough
dimensions per sub-quantiser to be worth it).

Filters (the mask) become FAISS
selectors (``IDSelectorBitmap`` over ids) in ``SearchParametersIVF(sel=...,
nprobe=...)``; queries with the same mask row share one selector and one
FAISS call. A filter that keeps a share ``f`` of the entries is searched
with ``nprobe / f`` lists (capped at ``nlist``): about as many eligible
vectors are compared as without a filter, so recall does not drop with
the filter's selectivity (the selector skips the others cheaply). A query
that gets fewer than ``min(k, eligible)`` results (a restrictive filter
leaves too few eligible entries in the probed lists) is searched again
with ``nprobe`` multiplied by 4, up to ``nlist`` (an exhaustive scan of the
eligible entries).

Training and retraining. The IVF is trained (k-means, FAISS clustering with
``IndexConfig.seed``, at most ``train_points_per_centroid * nlist`` stored
vectors sampled with the same seed) when an ``add`` makes the index reach
``approx_threshold`` entries, and trained again from all stored vectors when
it has grown ``retrain_growth`` times past the size it was trained at (so
``nlist`` follows ``sqrt(N)`` when ``IndexConfig.nlist`` is 0). Adds,
removals and bias changes are applied to the IVF incrementally in between.
When removals bring the index below ``approx_threshold // 2`` entries, the
IVF is dropped and search is exact again (the hysteresis keeps a size
hovering around the threshold from retraining on every add). The exact key
matrix is kept alongside the IVF.

Threads. FAISS parallelises with OpenMP, BLAS with its own pool; both thread
counts are process global. Importing this module never changes them.
``VectorIndex(..., num_threads=n)`` sets the FAISS OpenMP thread count and
(through ``threadpoolctl``) the BLAS thread count to ``n`` only for the
duration of each call made by that index and restores the previous values
afterwards; the default ``None`` leaves both untouched. FAISS's
``distance_compute_blas_threshold`` (also process global) is set to 16 for
the duration of an IVF search, so that a batch's coarse-quantiser search
takes the BLAS path (this faiss-cpu wheel's default, 128,000, never would),
and restored afterwards. None of these save/restore steps is safe if other
Python threads call FAISS or BLAS concurrently.

Ids. External ids are ``int64`` assigned by the index: ``0, 1, 2, ...`` in
insertion order, never reused after removal (the next id is persisted by
:meth:`VectorIndex.save`). Because ids are monotonic, the insertion order of
live entries (:attr:`VectorIndex.ids`, the column order of search masks) is
also ascending id order. The IVF uses the same ids.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import stat
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import faiss
import numpy as np
from numpy.typing import ArrayLike

from cfjax.infra.io import STALE_TEMP_AGE_S, CorruptFileError, loads_json, temp_files_for

__all__ = ["IndexConfig", "VectorIndex"]

_MAGIC = b"CFJXVIDX"
_FORMAT_VERSION = 2  # 1: the FAISS flat index held the keys; 2: keys stored as an array (+ optional IVF)
_DIGEST_SIZE = 32  # sha256
_MKSTEMP = re.compile(r"[a-z0-9_]{8}")  # the random part tempfile.mkstemp puts in a name
_U32 = 2.0**-24  # unit roundoff of float32
_EXTRA_CANDIDATES = 8  # approximate search: candidates fetched beyond k, for the exact rescoring
_IVF_BLAS_THRESHOLD = 16  # distance_compute_blas_threshold during IVF searches
_BLOCK_ELEMENTS = 1 << 19  # exact search: query x row scores per block (2 MiB of float32)
_ADD_CHUNK = 65_536  # rows folded and added to the IVF at a time


@dataclass(frozen=True)
class IndexConfig:
    """When and how :class:`VectorIndex` switches from exact to approximate (IVF-Flat) search.

    Attributes:
        approx_threshold: Size at which the IVF is trained and used; ``0`` =
            never (always exact). Memories below it are searched exactly.
        kind: ``"pq"`` (``IndexIVFPQ``: ``pq_m`` bytes per vector, the
            default, chosen by measurement: module docstring) or ``"flat"``
            (``IndexIVFFlat``: full float32 vectors in the lists, the IVF
            doubles the memory of the keys, builds ~3x faster). Either way
            the candidates are re-ranked exactly from the stored keys.
        nlist: Inverted lists (k-means centroids); ``0`` = ``round(sqrt(N))``
            at training time, clipped to ``[16, 65536]``.
        nprobe: Lists scanned per query (recall/speed trade-off; capped at
            ``nlist``).
        pq_m: Sub-quantisers of 8 bits each (``kind="pq"``); the folded
            vectors are zero-padded to a multiple of ``pq_m`` dimensions.
        rerank: ``kind="pq"``: candidates fetched per query, as a multiple
            of ``k``, for the exact re-ranking.
        retrain_growth: Retrain from all stored vectors once the index has
            grown this many times past the size it was trained at (``> 1``).
        train_points_per_centroid: At most this many stored vectors per
            centroid are sampled for training (FAISS's own default, 256:
            with 64, small clusters were left without a centroid of their
            own and recall@10 at 10^6 x 512 fell to 0.89 at ``nprobe=32``,
            against 1.0 with 256, for 1.5x the training time).
        seed: Seed of the training sample and of FAISS's k-means.
    """

    approx_threshold: int = 50_000
    kind: str = "pq"
    nlist: int = 0
    nprobe: int = 32
    pq_m: int = 64
    rerank: int = 10
    retrain_growth: float = 4.0
    train_points_per_centroid: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        def is_int(v: object) -> bool:
            return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

        for name in ("approx_threshold", "nlist", "nprobe", "pq_m", "rerank", "train_points_per_centroid", "seed"):
            if not is_int(getattr(self, name)):
                raise ValueError(f"IndexConfig.{name} must be an int, got {getattr(self, name)!r}")
        if self.approx_threshold < 0:
            raise ValueError(f"IndexConfig.approx_threshold must be ≥ 0 (0 = never), got {self.approx_threshold}")
        if self.nlist < 0:
            raise ValueError(f"IndexConfig.nlist must be ≥ 0 (0 = sqrt(N)), got {self.nlist}")
        if self.kind not in ("flat", "pq"):
            raise ValueError(f"IndexConfig.kind must be 'flat' or 'pq', got {self.kind!r}")
        if self.nprobe < 1:
            raise ValueError(f"IndexConfig.nprobe must be ≥ 1, got {self.nprobe}")
        if self.pq_m < 1 or self.rerank < 1:
            raise ValueError(f"IndexConfig.pq_m and rerank must be ≥ 1, got {self.pq_m} and {self.rerank}")
        if not (isinstance(self.retrain_growth, (int, float)) and not isinstance(self.retrain_growth, bool)
                and self.retrain_growth > 1 and math.isfinite(self.retrain_growth)):
            raise ValueError(f"IndexConfig.retrain_growth must be a finite number > 1, got {self.retrain_growth!r}")
        if self.train_points_per_centroid < 1:
            raise ValueError(f"IndexConfig.train_points_per_centroid must be ≥ 1, got "
                             f"{self.train_points_per_centroid}")
        if self.approx_threshold and self.nlist > self.approx_threshold:
            raise ValueError(f"IndexConfig.nlist ({self.nlist}) must not exceed approx_threshold "
                             f"({self.approx_threshold}): k-means needs at least one vector per list")

    def ivf_dim(self, dim: int) -> int:
        """Width of the IVF's vectors for keys of ``dim``: ``dim + 1`` (the folded bias), padded with
        zeros to a multiple of ``pq_m`` for ``kind="pq"``."""
        return dim + 1 if self.kind == "flat" else -(-(dim + 1) // self.pq_m) * self.pq_m

    def nlist_for(self, n: int) -> int:
        """The number of lists for an IVF trained on ``n`` vectors."""
        if self.nlist:
            return min(self.nlist, max(1, n))
        return int(min(max(round(math.sqrt(n)), 16), 65_536, max(1, n)))


def _remove_stale(t: Path) -> None:
    """Remove a plain file not modified for :data:`~cfjax.infra.io.STALE_TEMP_AGE_S` seconds."""
    with contextlib.suppress(FileNotFoundError):
        st = t.lstat()
        if stat.S_ISREG(st.st_mode) and time.time() - st.st_mtime >= STALE_TEMP_AGE_S:
            t.unlink()


def _as_matrix(x: ArrayLike, dim: int, name: str) -> np.ndarray:
    """Validates ``x`` as a finite real ``[n, dim]`` matrix; returns C-contiguous float32."""
    arr = np.asarray(x)
    if arr.dtype.kind != "f":
        raise ValueError(f"{name} must have a floating dtype (float32 expected), got {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"{name} must have shape [n, {dim}], got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _normalise(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation (norms and products in float64, rounded once to float32); zero rows
    stay zero. Works in chunks of rows, so the float64 temporary stays small for large inputs."""
    out = np.empty(x.shape, dtype=np.float32)
    for lo in range(0, x.shape[0], _ADD_CHUNK):
        c = x[lo : lo + _ADD_CHUNK]
        norms = np.sqrt(np.einsum("ij,ij->i", c, c, dtype=np.float64))
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        np.multiply(c, inv[:, None], out=out[lo : lo + _ADD_CHUNK], casting="same_kind")
    return out


def _as_ids(ids: ArrayLike) -> np.ndarray:
    """Validates ``ids`` as a 1-D integer array; returns int64."""
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"ids must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _tolerance(dim: int, bias_bound: float) -> float:
    """Twice the largest possible gap between a block score and the rescored score of one entry.

    Both similarities are float32 dot products of vectors of norm ``<= 1``, each within
    ``gamma_dim = dim * u / (1 - dim * u)`` of the exact value (``u = 2**-24``); the block
    score also rounds ``lambda * u_i`` and the sum to float32. See the module docstring."""
    gamma = dim * _U32 / (1.0 - dim * _U32)
    err = 2.0 * gamma * 1.001 + _U32 * (3.0 * bias_bound + 2.0) + 1e-12
    return 2.0 * err


def _top_k(scores: np.ndarray, cols: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best finite ``scores`` (float64) ordered by ``(-score, col)``: ``(scores, cols)``."""
    finite = np.isfinite(scores)
    if not finite.all():
        scores, cols = scores[finite], cols[finite]
    if scores.size > k:
        thresh = np.partition(scores, scores.size - k)[scores.size - k]
        keep = scores >= thresh  # every entry tied with the k-th stays, for the tie-break below
        scores, cols = scores[keep], cols[keep]
    order = np.lexsort((cols, -scores))[:k]
    return scores[order], cols[order]


@contextlib.contextmanager
def _blas_threshold(value: int) -> Iterator[None]:
    """Temporarily sets FAISS's process-global ``distance_compute_blas_threshold``."""
    previous = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = value
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_threshold = previous


_BLAS_CONTROL_MIN_ROWS = 32_768  # below this, BLAS runs one thread anyway: skip threadpoolctl's ~0.1 ms
_blas_controller: object | None = None


def _blas_limit(n: int) -> contextlib.AbstractContextManager:
    """Limits the BLAS pool to ``n`` threads (``threadpoolctl``; a no-op when it is not installed)."""
    global _blas_controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl ships with the scientific stack
        return contextlib.nullcontext()
    if _blas_controller is None:
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=n, user_api="blas")  # type: ignore[attr-defined]


class VectorIndex:
    """Cosine + bias top-``k`` index over stable int64 ids (Eq. 8), exact or IVF-approximate.

    Args:
        dim: Vector dimension.
        bias_weight: Weight of the per-entry bias in the score
            (``lambda_reuse`` of Eq. 8).
        num_threads: FAISS OpenMP and BLAS threads used during this index's
            calls (restored afterwards); ``None`` leaves the global settings.
        config: When to switch to approximate search and its parameters
            (:class:`IndexConfig`; default: IVF-PQ from 50,000 entries).

    Example:
        >>> idx = VectorIndex(2, bias_weight=0.5)
        >>> idx.add(np.array([[1, 0], [0, 1]], np.float32), biases=[0.0, 1.0]).tolist()
        [0, 1]
        >>> scores, ids = idx.search(np.array([[1, 0]], np.float32), k=2)
        >>> ids.tolist(), scores.tolist()
        ([[0, 1]], [[1.0, 0.5]])
    """

    def __init__(self, dim: int, bias_weight: float = 0.2, *, num_threads: int | None = None,
                 config: IndexConfig | None = None) -> None:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        bias_weight = float(bias_weight)
        if not np.isfinite(bias_weight):
            raise ValueError(f"bias_weight must be finite, got {bias_weight}")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"num_threads must be a positive int or None, got {num_threads!r}")
        if config is not None and not isinstance(config, IndexConfig):
            raise ValueError(f"config must be an IndexConfig or None, got {type(config).__name__}")
        self._dim = int(dim)
        self._bias_weight = bias_weight
        self._num_threads = num_threads
        self._config = config if config is not None else IndexConfig()
        self._keys = np.empty((0, self._dim), dtype=np.float32)  # normalised; rows [:len] are live
        self._ids = np.empty(0, dtype=np.int64)  # live ids, insertion (= ascending) order
        self._biases = np.empty(0, dtype=np.float64)  # aligned with self._ids
        self._next_id = 0
        self._ivf: faiss.IndexIVF | None = None  # over [key, bias_weight * bias, 0...], same ids
        self._trained_at = 0  # size the IVF was trained at
        self._quantizer: faiss.Index | None = None  # kept alive with the IVF it belongs to
        self._bias_cache: tuple[np.ndarray | None, float] | None = None  # see _bias_terms

    # ------------------------------------------------------------------ basics

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    @property
    def bias_weight(self) -> float:
        """Weight of the bias term in the score (``lambda_reuse``)."""
        return self._bias_weight

    @property
    def config(self) -> IndexConfig:
        """The exact/approximate switch and IVF parameters."""
        return self._config

    @property
    def approximate(self) -> bool:
        """Whether :meth:`search` currently uses the IVF (approximate) index."""
        return self._ivf is not None and len(self) >= self._config.approx_threshold

    @property
    def nlist(self) -> int | None:
        """Inverted lists of the trained IVF, ``None`` when there is none."""
        return None if self._ivf is None else int(self._ivf.nlist)

    @property
    def next_id(self) -> int:
        """The id the next added vector will get."""
        return self._next_id

    @property
    def ids(self) -> np.ndarray:
        """Live ids (int64, a copy) in insertion order: the column order of search masks."""
        return self._ids.copy()

    @property
    def biases(self) -> np.ndarray:
        """Biases (float64, a copy) aligned with :attr:`ids`."""
        return self._biases.copy()

    @property
    def unit_keys(self) -> np.ndarray:
        """The stored L2-normalised keys, ``float32[len, dim]`` aligned with :attr:`ids`: a read-only
        view, no copy (valid until the next ``add``/``remove``), e.g. for
        :func:`cfjax.kernels.topk.masked_topk_normalized`."""
        view = self._keys[: len(self)]
        view.flags.writeable = False
        return view

    def __len__(self) -> int:
        return int(self._ids.size)

    def __repr__(self) -> str:
        mode = f"ivf nlist={self.nlist}" if self._ivf is not None else "exact"
        return (f"VectorIndex(dim={self._dim}, bias_weight={self._bias_weight}, len={len(self)}, "
                f"next_id={self._next_id}, {mode})")

    @contextlib.contextmanager
    def _threads(self, blas: bool = False) -> Iterator[None]:
        """Temporarily applies ``num_threads`` to FAISS (and BLAS when ``blas``); no-op when ``None``."""
        if self._num_threads is None:
            yield
            return
        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(self._num_threads)
        try:
            with _blas_limit(self._num_threads) if blas else contextlib.nullcontext():
                yield
        finally:
            faiss.omp_set_num_threads(previous)

    def _positions(self, ids: ArrayLike) -> np.ndarray:
        """Positions of ``ids`` in :attr:`ids`; KeyError naming the first unknown id."""
        arr = _as_ids(ids)
        pos = np.searchsorted(self._ids, arr)  # self._ids is ascending
        if self._ids.size:
            known = self._ids[np.minimum(pos, self._ids.size - 1)] == arr
        else:
            known = np.zeros(arr.shape, dtype=bool)
        if not known.all():
            raise KeyError(f"unknown id {int(arr[np.argmin(known)])} (not in the index or removed)")
        return pos

    def _as_biases(self, biases: ArrayLike | None, n: int) -> np.ndarray:
        if biases is None:
            return np.zeros(n, dtype=np.float64)
        arr = np.asarray(biases)
        if arr.dtype.kind not in "iuf" or arr.dtype == np.bool_:
            raise ValueError(f"biases must be real numbers, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if arr.ndim == 0:
            arr = np.full(n, float(arr))
        if arr.shape != (n,):
            raise ValueError(f"biases must have shape ({n},), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("biases contain NaN or infinite values")
        return arr

    def _fold(self, keys: np.ndarray, biases: np.ndarray) -> np.ndarray:
        """``[key, bias_weight * bias, 0...]`` rows (float32, :meth:`IndexConfig.ivf_dim` wide): their
        inner product with ``[q, 1, 0...]`` is Eq. 8."""
        out = np.zeros((keys.shape[0], self._config.ivf_dim(self._dim)), dtype=np.float32)
        out[:, : self._dim] = keys
        out[:, self._dim] = self._bias_weight * biases
        return out

    # --------------------------------------------------------------- mutation

    def add(self, vectors: ArrayLike, biases: ArrayLike | None = None) -> np.ndarray:
        """Adds vectors (L2-normalised on insertion) with optional biases.

        When the index reaches :attr:`IndexConfig.approx_threshold` entries (or
        has grown ``retrain_growth`` times past its last training), the IVF is
        (re)trained from all stored vectors here.

        Args:
            vectors: ``float32[n, dim]`` finite vectors (other float dtypes
                are cast); a zero vector is stored as zero (cosine 0 with
                everything).
            biases: ``float[n]`` per-entry biases (``u_i`` of Eq. 8), a
                scalar for all, or ``None`` for zeros.

        Returns:
            ``int64[n]`` newly assigned ids, consecutive and ascending.

        Raises:
            ValueError: On a wrong shape/dtype or non-finite values.
        """
        x = _as_matrix(vectors, self._dim, "vectors")
        m = x.shape[0]
        b = self._as_biases(biases, m)
        new_ids = np.arange(self._next_id, self._next_id + m, dtype=np.int64)
        if m == 0:
            return new_ids
        xn = _normalise(x)
        n = len(self)
        if n + m > self._keys.shape[0]:  # amortised growth: one-at-a-time adds stay O(dim) each
            grown = np.empty((max(n + m, n + n // 2), self._dim), dtype=np.float32)
            grown[:n] = self._keys[:n]
            self._keys = grown
        self._keys[n : n + m] = xn
        self._ids = np.concatenate([self._ids, new_ids])
        self._biases = np.concatenate([self._biases, b])
        self._bias_cache = None
        self._next_id += m
        with self._threads():
            if self._ivf is not None:
                for lo in range(0, m, _ADD_CHUNK):
                    hi = min(m, lo + _ADD_CHUNK)
                    self._ivf.add_with_ids(self._fold(xn[lo:hi], b[lo:hi]), new_ids[lo:hi])
            self._maybe_train()
        return new_ids

    def set_bias(self, ids: ArrayLike, biases: ArrayLike) -> None:
        """Sets the biases of existing entries.

        Args:
            ids: Ids to update.
            biases: New biases, one per id (or a scalar for all).

        Raises:
            KeyError: If an id is not live.
            ValueError: On a shape mismatch or non-finite biases.
        """
        pos = self._positions(ids)
        self._biases[pos] = self._as_biases(biases, pos.size)
        self._bias_cache = None
        if self._ivf is not None and pos.size:
            pos = np.unique(pos)  # the IVF holds [key, bias]: replace the entries
            ids_ = np.ascontiguousarray(self._ids[pos])
            with self._threads():
                self._ivf.remove_ids(faiss.IDSelectorArray(ids_))
                self._ivf.add_with_ids(self._fold(self._keys[pos], self._biases[pos]), ids_)

    def remove(self, ids: ArrayLike) -> None:
        """Removes entries; their ids are never reused.

        Removal compacts the key matrix (``O(N * dim)``, as FAISS's flat index
        does) and removes the entries from the IVF; below
        ``approx_threshold // 2`` entries the IVF is dropped.

        Args:
            ids: Ids to remove (duplicates are ignored).

        Raises:
            KeyError: If an id is not live (nothing is removed then).
        """
        pos = np.unique(self._positions(ids))
        if pos.size == 0:
            return
        n = len(self)
        if self._ivf is not None:
            gone = np.ascontiguousarray(self._ids[pos])
            with self._threads():
                removed = self._ivf.remove_ids(faiss.IDSelectorArray(gone))
            if removed != pos.size:  # pragma: no cover - internal invariant
                raise RuntimeError(f"faiss removed {removed} entries, expected {pos.size}")
        if pos.size <= 64:  # shift the segments between removed rows in place
            write = int(pos[0])
            for j, p in enumerate(pos):
                end = int(pos[j + 1]) if j + 1 < pos.size else n
                seg = end - int(p) - 1
                if seg:
                    self._keys[write : write + seg] = self._keys[p + 1 : end]
                write += seg
        else:
            keep = np.ones(n, dtype=bool)
            keep[pos] = False
            self._keys = np.ascontiguousarray(self._keys[:n][keep])
        keep = np.ones(n, dtype=bool)
        keep[pos] = False
        self._ids = self._ids[keep]
        self._biases = self._biases[keep]
        self._bias_cache = None
        if self._ivf is not None and len(self) < self._config.approx_threshold // 2:
            self._ivf, self._trained_at = None, 0

    # ---------------------------------------------------------- approximate

    def _maybe_train(self) -> None:
        """Trains the IVF when the size first reaches the threshold or has grown ``retrain_growth``-fold."""
        cfg, n = self._config, len(self)
        if not cfg.approx_threshold or n < cfg.approx_threshold:
            return
        if self._ivf is None or n >= cfg.retrain_growth * self._trained_at:
            self._train()

    def _train(self) -> None:
        """(Re)builds the IVF index from every stored vector (deterministic in ``config.seed``)."""
        cfg, n = self._config, len(self)
        nlist, width = cfg.nlist_for(n), cfg.ivf_dim(self._dim)
        quantizer = faiss.IndexFlatIP(width)
        ivf: faiss.IndexIVF
        if cfg.kind == "flat":
            ivf = faiss.IndexIVFFlat(quantizer, width, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            ivf = faiss.IndexIVFPQ(quantizer, width, nlist, cfg.pq_m, 8, faiss.METRIC_INNER_PRODUCT)
            ivf.pq.cp.seed = cfg.seed
        m = min(n, cfg.train_points_per_centroid * nlist)
        rows = np.arange(n) if m == n else np.sort(np.random.default_rng(cfg.seed).choice(n, m, replace=False))
        ivf.cp.seed = cfg.seed
        ivf.cp.max_points_per_centroid = max(1, -(-m // nlist))  # the sample above is the training set
        ivf.train(self._fold(self._keys[rows], self._biases[rows]))
        ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # O(1) removal by id
        for lo in range(0, n, _ADD_CHUNK):
            hi = min(n, lo + _ADD_CHUNK)
            ivf.add_with_ids(self._fold(self._keys[lo:hi], self._biases[lo:hi]), self._ids[lo:hi])
        self._ivf, self._quantizer, self._trained_at = ivf, quantizer, n

    # ---------------------------------------------------------------- queries

    def vectors(self, ids: ArrayLike) -> np.ndarray:
        """Returns the stored (normalised) vectors of ``ids``.

        Args:
            ids: Live ids.

        Returns:
            ``float32[len(ids), dim]``.

        Raises:
            KeyError: If an id is not live.
        """
        return self._keys[self._positions(ids)]

    def search(
        self, queries: ArrayLike, k: int, mask: ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Masked top-``k`` by ``cos(query, v_i) + bias_weight * bias_i`` (Eq. 8), batched.

        Exact below :attr:`IndexConfig.approx_threshold` entries, IVF-approximate
        from it (see the module docstring); scores are always the exact
        scores of the returned entries.

        Args:
            queries: ``float32[Q, dim]`` finite queries (normalised here;
                a zero query has cosine 0 with everything), answered together.
            k: Number of results per query (``>= 1``; may exceed ``len(self)``).
            mask: Optional eligibility (Eq. 7), columns in :attr:`ids` order:
                ``bool[Q, len(self)]`` per query, or ``bool[len(self)]``
                shared by all queries; ``False`` entries are never returned.

        Returns:
            ``(scores, ids)``: ``float32[Q, k]`` scores sorted descending
            (ties broken by the smaller id) and the ``int64[Q, k]`` ids.
            When a query has fewer than ``k`` eligible entries, the tail is
            padded with id ``-1`` and score ``-inf``.

        Raises:
            ValueError: On a bad ``k``, query or mask shape/dtype.
        """
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        k = int(k)
        q = _as_matrix(queries, self._dim, "queries")
        n_q, n = q.shape[0], len(self)
        m: np.ndarray | None = None
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != np.bool_:
                raise ValueError(f"mask must have dtype bool, got {m.dtype}")
            if m.shape not in ((n_q, n), (n,)):
                raise ValueError(f"mask must have shape [Q, len(index)] = ({n_q}, {n}) or [len(index)] = "
                                 f"({n},), got {m.shape}")

        out_scores = np.full((n_q, k), -np.inf, dtype=np.float32)
        out_ids = np.full((n_q, k), -1, dtype=np.int64)
        if n_q == 0 or n == 0:
            return out_scores, out_ids
        qn = _normalise(q)
        with self._threads(blas=n >= _BLAS_CONTROL_MIN_ROWS):
            if self.approximate:
                self._search_ivf(qn, k, m, out_scores, out_ids)
            else:
                self._search_exact(qn, k, m, out_scores, out_ids)
        return out_scores, out_ids

    def _bias_terms(self) -> tuple[np.ndarray | None, float]:
        """``(float32 bias_weight * bias or None when all zero, max |bias_weight * bias|)``, cached
        until the next add/remove/set_bias (recomputing them is three passes over ``N`` floats)."""
        if self._bias_cache is None:
            lam_b = self._bias_weight * self._biases
            if np.any(lam_b != 0):
                self._bias_cache = (lam_b.astype(np.float32), float(np.abs(lam_b).max()))
            else:
                self._bias_cache = (None, 0.0)
        return self._bias_cache

    def _finish(self, q: np.ndarray, cols: np.ndarray, k: int, row: int, out_scores: np.ndarray,
                out_ids: np.ndarray) -> None:
        """Rescores candidate positions ``cols`` for query ``q`` exactly and writes its top ``k``.

        The similarity is FAISS's ``fvec_inner_product`` of the stored float32
        vectors; the score adds ``bias_weight * bias`` in float64 (the module docstring)."""
        if cols.size == 0:
            return
        cols = np.asarray(cols, dtype=np.int64)
        rows = np.ascontiguousarray(self._keys[cols])  # gathered: fvec_inner_products_ny has no OpenMP
        sims = np.empty(cols.size, dtype=np.float32)  # region (by_idx's costs ms on a busy machine)
        faiss.fvec_inner_products_ny(faiss.swig_ptr(sims), faiss.swig_ptr(q), faiss.swig_ptr(rows), self._dim,
                                     cols.size)
        scores = sims.astype(np.float64) + self._bias_weight * self._biases[cols]
        top, top_cols = _top_k(scores, cols, k)
        out_scores[row, : top.size] = top.astype(np.float32)
        out_ids[row, : top.size] = self._ids[top_cols]

    def _search_exact(self, qn: np.ndarray, k: int, mask: np.ndarray | None, out_scores: np.ndarray,
                      out_ids: np.ndarray) -> None:
        """One blocked BLAS pass over the keys keeps each query's candidates; then exact rescoring."""
        n, n_q = len(self), qn.shape[0]
        keys = self._keys[:n]
        lam_b32, bias_bound = self._bias_terms()
        tol = _tolerance(self._dim, bias_bound)
        kk = min(k, n)
        lowest = np.finfo(np.float32).min
        thr = np.full(n_q, lowest, dtype=np.float32)  # admit every finite score until k are known
        pool_c: list[np.ndarray] = [np.empty(0, np.int64)] * n_q
        pool_v: list[np.ndarray] = [np.empty(0, np.float32)] * n_q
        rows_per_block = max(1024, _BLOCK_ELEMENTS // n_q)
        q_t = np.ascontiguousarray(qn.T)  # [d, n_q]: scores come out as [rows, n_q] (keys as the row-major operand)
        for lo in range(0, n, rows_per_block):
            hi = min(n, lo + rows_per_block)
            if n_q == 1:
                st = (keys[lo:hi] @ qn[0])[:, None]  # sgemv: the streaming limit for one query
            else:
                st = keys[lo:hi] @ q_t  # sgemm, [rows, n_q]: faster than q @ keys.T with BLAS here
            if lam_b32 is not None:
                st += lam_b32[lo:hi, None]
            if mask is not None:
                np.copyto(st, -np.inf, where=~(mask[lo:hi, None] if mask.ndim == 1 else mask[:, lo:hi].T))
            if lo == 0 and hi - lo > kk:  # the k-th best of the first (up to 65,536) entries is a lower
                sub = st[: min(hi - lo, 65_536)]  # bound of the final k-th best: admit only what reaches it
                kth = np.partition(sub, sub.shape[0] - kk, axis=0)[sub.shape[0] - kk].astype(np.float64)
                first = np.nextafter((kth - tol).astype(np.float32), np.float32(-np.inf))
                thr = np.where(np.isfinite(kth), first, thr).astype(np.float32)
            # np.flatnonzero on the flat mask, then divmod (np.nonzero of a 2-D mask is ~15x slower);
            # a stable sort by query keeps each query's hits in key order
            flat = np.flatnonzero(st >= thr[None, :])
            if flat.size == 0:
                continue
            row, col = np.divmod(flat, n_q)
            v = st[row, col]
            order = np.argsort(col, kind="stable")
            r, c, v = col[order], row[order], v[order]
            c = c.astype(np.int64) + lo
            bounds = np.searchsorted(r, np.arange(n_q + 1))
            for qi in np.flatnonzero(np.diff(bounds)):
                a, b = bounds[qi], bounds[qi + 1]
                pc = np.concatenate([pool_c[qi], c[a:b]])
                pv = np.concatenate([pool_v[qi], v[a:b]])
                if pv.size > kk:
                    kth = float(np.partition(pv, pv.size - kk)[pv.size - kk])
                    t = np.nextafter(np.float32(kth - tol), np.float32(-np.inf))
                    keep = pv >= t
                    pc, pv = pc[keep], pv[keep]
                    thr[qi] = max(thr[qi], t)
                pool_c[qi], pool_v[qi] = pc, pv
        for qi in range(n_q):
            self._finish(qn[qi], pool_c[qi], kk, qi, out_scores, out_ids)

    def _search_ivf(self, qn: np.ndarray, k: int, mask: np.ndarray | None, out_scores: np.ndarray,
                    out_ids: np.ndarray) -> None:
        """IVF over bias-folded vectors, one FAISS call per distinct filter; then exact rescoring."""
        assert self._ivf is not None
        ivf, n, n_q, d = self._ivf, len(self), qn.shape[0], self._dim
        nlist = int(ivf.nlist)
        folded = np.zeros((n_q, self._config.ivf_dim(d)), dtype=np.float32)
        folded[:, :d] = qn
        folded[:, d] = 1.0
        extra = _EXTRA_CANDIDATES if self._config.kind == "flat" else max(_EXTRA_CANDIDATES, (self._config.rerank - 1) * k)
        groups: list[tuple[np.ndarray | None, np.ndarray]]
        if mask is None:
            groups = [(None, np.arange(n_q))]
        elif mask.ndim == 1:
            groups = [(mask, np.arange(n_q))]
        else:  # queries with the same filter share a selector and a FAISS call (grouped by a hash of
            # the packed row: np.unique(axis=0) would sort [Q, N/8] rows, seconds at N = 1e6)
            by_row: dict[bytes, list[int]] = {}
            for r, packed in enumerate(np.packbits(mask, axis=1)):
                by_row.setdefault(packed.tobytes(), []).append(r)
            groups = [(mask[rows[0]], np.asarray(rows)) for rows in by_row.values()]
        with _blas_threshold(_IVF_BLAS_THRESHOLD):
            for row_mask, rows in groups:
                eligible, selector, bitmap = n, None, None
                if row_mask is not None:
                    eligible = int(np.count_nonzero(row_mask))
                    if eligible == 0:
                        continue
                    if eligible < n:
                        bits = np.zeros(self._next_id, dtype=bool)
                        bits[self._ids[row_mask]] = True
                        bitmap = np.packbits(bits, bitorder="little")  # bit i of byte i // 8 is id i
                        selector = faiss.IDSelectorBitmap(bitmap)
                need, fetch = min(k, eligible), min(k + extra, eligible)
                # a filter keeping a share f of the entries keeps ~f of every list: probe nprobe / f lists
                # so that as many eligible vectors are compared as without a filter
                nprobe = min(nlist, -(-self._config.nprobe * n // eligible))
                pending = rows
                while pending.size:
                    params = (faiss.SearchParametersIVF(sel=selector, nprobe=nprobe) if selector is not None
                              else faiss.SearchParametersIVF(nprobe=nprobe))
                    _, labels = ivf.search(folded[pending], fetch, params=params)
                    found = np.count_nonzero(labels >= 0, axis=1)
                    done = (found >= need) | (nprobe >= nlist)  # nprobe = nlist scans every eligible entry
                    for j in np.flatnonzero(done):
                        got = labels[j][labels[j] >= 0]
                        self._finish(qn[pending[j]], np.searchsorted(self._ids, got), k, int(pending[j]),
                                     out_scores, out_ids)
                    pending = pending[~done]
                    nprobe = min(nlist, nprobe * 4)
                del bitmap  # the selector reads it until here

    # ------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the index to one file, atomically.

        The file is ``MAGIC | sha256(body) | body`` where ``body`` is an
        ``.npz`` archive (no pickles) holding the normalised keys, ids,
        biases, a JSON header (format version, ``dim``, ``bias_weight``,
        ``next_id``, the :class:`IndexConfig`, the size the IVF was trained
        at) and, when there is one, the IVF as ``faiss.serialize_index``
        bytes (so a loaded index answers exactly as the saved one; no
        retraining). It is written to a temporary file in the same
        directory, flushed and fsynced, then ``os.replace``-d over ``path``,
        so readers see either the old or the new file.

        Args:
            path: Destination file.
        """
        path = Path(path)
        header = {
            "format_version": _FORMAT_VERSION,
            "dim": self._dim,
            "bias_weight": self._bias_weight,
            "next_id": self._next_id,
            "size": len(self),
            "config": asdict(self._config),
            "trained_at": self._trained_at,
        }
        arrays = {
            "header": np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8),
            "keys": self._keys[: len(self)],
            "ids": self._ids,
            "biases": self._biases,
        }
        if self._ivf is not None:
            with self._threads():
                arrays["ivf_index"] = np.asarray(faiss.serialize_index(self._ivf), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        body = buf.getvalue()
        digest = hashlib.sha256(body).digest()

        directory = path.parent if str(path.parent) else Path(".")
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC)
                f.write(digest)
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
        # Persist the rename itself (best effort: not every platform/fs allows it).
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, num_threads: int | None = None) -> VectorIndex:
        """Reads an index written by :meth:`save` (this format, or version 1's flat FAISS index).

        Args:
            path: File to read.
            num_threads: As in the constructor (not persisted).

        Returns:
            The index, with the same entries, biases, ``bias_weight``,
            ``next_id`` (so ids are still never reused), configuration and IVF.

        Raises:
            FileNotFoundError: If there is no such file.
            CorruptFileError: (a ``ValueError``) naming the file, if it is not a
                VectorIndex file, fails its checksum, its payload or FAISS index
                cannot be read, or it is internally inconsistent.
        """
        path = Path(path)
        for t in temp_files_for(path):  # temp files of interrupted saves (mkstemp: .<name>.<8 chars>.tmp)
            if _MKSTEMP.fullmatch(t.name[len(path.name) + 2 : -4]):
                _remove_stale(t)
        data = path.read_bytes()
        head = len(_MAGIC) + _DIGEST_SIZE
        if len(data) < head or data[: len(_MAGIC)] != _MAGIC:
            raise CorruptFileError(path, "not a VectorIndex file (bad magic or truncated)")
        digest, body = data[len(_MAGIC) : head], data[head:]
        if hashlib.sha256(body).digest() != digest:
            raise CorruptFileError(path, "checksum mismatch, the file is corrupt or truncated")
        del data
        try:
            with np.load(io.BytesIO(body), allow_pickle=False) as z:
                header = loads_json(z["header"].tobytes())
                version = header.get("format_version") if isinstance(header, dict) else None
                ids, biases = z["ids"], z["biases"]
                if version == 1:
                    keys, ivf_bytes, flat_bytes = None, None, z["faiss_index"]
                else:
                    keys = z["keys"]
                    ivf_bytes = z["ivf_index"] if "ivf_index" in z.files else None
                    flat_bytes = None
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise CorruptFileError(path, f"unreadable VectorIndex payload: {type(e).__name__}: "
                                         f"{' '.join(str(e).split())}") from None
        if version not in (1, _FORMAT_VERSION):
            raise CorruptFileError(path, f"unsupported format version {version!r}")
        required = {"dim", "bias_weight", "next_id", "size"} | ({"config", "trained_at"} if version == 2 else set())
        missing = required - header.keys()
        if missing:
            raise CorruptFileError(path, f"header lacks {sorted(missing)}")

        def is_int(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        dim, size, next_id, bw = header["dim"], header["size"], header["next_id"], header["bias_weight"]
        trained_at = header.get("trained_at", 0)
        if not (is_int(dim) and 1 <= dim <= 1 << 20 and is_int(size) and size >= 0 and is_int(next_id)
                and next_id >= 0 and isinstance(bw, (int, float)) and not isinstance(bw, bool) and np.isfinite(bw)
                and is_int(trained_at) and trained_at >= 0):
            raise CorruptFileError(path, f"bad header values (dim={dim!r}, size={size!r}, next_id={next_id!r}, "
                                         f"bias_weight={bw!r}, trained_at={trained_at!r})")
        config = IndexConfig()
        if version == 2:
            try:
                config = IndexConfig(**header["config"])
            except (TypeError, ValueError) as e:
                raise CorruptFileError(path, f"bad index config: {' '.join(str(e).split())}") from None
        if ids.ndim != 1 or biases.ndim != 1 or ids.dtype.kind not in "iu" or biases.dtype.kind != "f":
            raise CorruptFileError(path, "stored arrays have the wrong dtype or shape")
        for name, blob in (("faiss_index", flat_bytes), ("ivf_index", ivf_bytes)):
            if blob is not None and (blob.dtype != np.uint8 or blob.ndim != 1):
                raise CorruptFileError(path, f"stored arrays have the wrong dtype or shape ({name})")
        if keys is not None and (keys.dtype != np.float32 or keys.shape != (size, dim)):
            raise CorruptFileError(path, f"stored arrays have the wrong dtype or shape (keys {keys.dtype} "
                                         f"{keys.shape}, expected float32 ({size}, {dim}))")
        if ids.size != size or biases.size != size:
            raise CorruptFileError(path, f"inconsistent VectorIndex file: sizes differ (header {size}, "
                                         f"ids {ids.size}, biases {biases.size})")
        if flat_bytes is not None and flat_bytes.size < 4 * dim * size:  # refuse before allocating
            raise CorruptFileError(path, f"FAISS index too short for {size} vectors of dim {dim}")
        ids = ids.astype(np.int64)
        biases = biases.astype(np.float64)
        if not np.all(np.isfinite(biases)):
            raise CorruptFileError(path, "biases contain NaN or infinite values")
        if keys is not None and not np.all(np.isfinite(keys)):
            raise CorruptFileError(path, "keys contain NaN or infinite values")
        problems = []
        if ids.size and (np.any(np.diff(ids) <= 0) or ids[0] < 0 or ids[-1] >= next_id):
            problems.append("ids are not ascending in [0, next_id)")

        obj = cls(dim, float(bw), num_threads=num_threads, config=config)

        def deserialize(blob: np.ndarray, what: str) -> faiss.Index:
            try:
                with obj._threads():
                    return faiss.deserialize_index(np.ascontiguousarray(blob))
            except (RuntimeError, MemoryError, ValueError, TypeError) as e:  # faiss: RuntimeError on bad bytes
                raise CorruptFileError(path, f"unreadable {what} ({type(e).__name__}: "
                                             f"{' '.join(str(e).split())[:200]})") from None

        if flat_bytes is not None:  # format 1: the keys are the flat index's vectors
            flat = deserialize(flat_bytes, "FAISS index")
            if not isinstance(flat, faiss.IndexIDMap2):
                raise CorruptFileError(path, f"stored FAISS index is {type(flat).__name__}, expected IndexIDMap2")
            if flat.d != dim:
                problems.append(f"faiss dim {flat.d} != header dim {dim}")
            elif flat.ntotal != ids.size:
                problems.append(f"sizes differ (faiss {flat.ntotal}, ids {ids.size}, biases {biases.size})")
            elif not np.array_equal(faiss.vector_to_array(flat.id_map), ids):
                problems.append("faiss id map differs from the stored ids")
            else:
                keys = flat.reconstruct_batch(ids) if ids.size else np.empty((0, dim), np.float32)
        ivf = None
        if ivf_bytes is not None:
            ivf = deserialize(ivf_bytes, "IVF index")
            expected = faiss.IndexIVFFlat if config.kind == "flat" else faiss.IndexIVFPQ
            if not isinstance(ivf, expected):
                raise CorruptFileError(path, f"stored IVF index is {type(ivf).__name__}, expected {expected.__name__}")
            width = config.ivf_dim(dim)
            if ivf.d != width or ivf.metric_type != faiss.METRIC_INNER_PRODUCT:
                problems.append(f"IVF dim {ivf.d} / metric {ivf.metric_type} != {width} / inner product")
            elif ivf.ntotal != ids.size:
                problems.append(f"sizes differ (IVF {ivf.ntotal}, ids {ids.size})")
            else:
                inv = ivf.invlists
                held = [faiss.rev_swig_ptr(inv.get_ids(li), inv.list_size(li)).copy()
                        for li in range(ivf.nlist) if inv.list_size(li)]
                if not np.array_equal(np.sort(np.concatenate(held)) if held else np.empty(0, np.int64), ids):
                    problems.append("IVF ids differ from the stored ids")
        if problems:
            raise CorruptFileError(path, "inconsistent VectorIndex file: " + "; ".join(problems))
        obj._keys = np.ascontiguousarray(keys, dtype=np.float32)
        obj._ids = ids
        obj._biases = biases
        obj._next_id = next_id
        obj._ivf = ivf
        obj._trained_at = trained_at if ivf is not None else 0
        return obj

"""Exact FAISS-backed vector index with per-entry bias and eligibility masks.

:class:`VectorIndex` stores the key embeddings ``phi(q_i)`` of CounterMem
records and answers the retrieval of paper Eq. 8,

    ``r_i = cos(phi(s), phi(q_i)) + lambda_reuse * u_i``,

returning the top ``k`` records among the *eligible* ones (Eq. 7: the caller
passes a per-query boolean mask that excludes records from the current task
and records whose condition fails). Here ``bias_weight`` is
``lambda_reuse`` and the per-entry ``bias`` is the reuse statistic ``u_i``.

Exactness. The backing store is ``faiss.IndexIDMap2(faiss.IndexFlatIP(dim))``,
a *flat* (brute-force) index: every query is compared with every live entry,
so the result is exact. Vectors are L2-normalised on insertion and queries
at search time, so the inner product is the cosine. FAISS ranks by similarity
alone, whereas Eq. 8 adds a bias and the mask can remove any entry, so a
FAISS top-``k`` could miss the true answer; therefore the search asks FAISS
for *all* ``ntotal`` similarities, then adds the bias, applies the mask and
selects the top ``k`` with NumPy. This is ``O(Q * N log N)`` and is meant for
memories of up to ~1e5 records; an approximate IVF/HNSW index (with an
over-fetch factor and a mask-aware re-rank) would be a later switch, at the
cost of exactness.

Threads. FAISS parallelises with OpenMP and its thread count is process
global. Importing this module never changes it. ``VectorIndex(...,
num_threads=n)`` sets the FAISS OpenMP thread count to ``n`` only for the
duration of each FAISS call made by that index and restores the previous
value afterwards (not safe if other Python threads call FAISS concurrently);
the default ``None`` leaves FAISS's global setting untouched.

Ids. External ids are ``int64`` assigned by the index: ``0, 1, 2, ...`` in
insertion order, never reused after removal (the next id is persisted by
:meth:`VectorIndex.save`). Because ids are monotonic, the insertion order of
live entries (:attr:`VectorIndex.ids`, the column order of search masks) is
also ascending id order.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import stat
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import faiss
import numpy as np
from numpy.typing import ArrayLike

from cfjax.infra.io import STALE_TEMP_AGE_S, CorruptFileError, loads_json, temp_files_for

__all__ = ["VectorIndex"]

_MAGIC = b"CFJXVIDX"
_FORMAT_VERSION = 1
_DIGEST_SIZE = 32  # sha256
_MKSTEMP = re.compile(r"[a-z0-9_]{8}")  # the random part tempfile.mkstemp puts in a name


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
    """Row-wise L2 normalisation (norms in float64); zero rows stay zero."""
    norms = np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return np.ascontiguousarray(x * inv[:, None], dtype=np.float32)


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


class VectorIndex:
    """Exact cosine + bias top-``k`` index over stable int64 ids (Eq. 8).

    Args:
        dim: Vector dimension.
        bias_weight: Weight of the per-entry bias in the score
            (``lambda_reuse`` of Eq. 8).
        num_threads: FAISS OpenMP threads used during this index's FAISS
            calls (restored afterwards); ``None`` leaves the global setting.

    Example:
        >>> idx = VectorIndex(2, bias_weight=0.5)
        >>> idx.add(np.array([[1, 0], [0, 1]], np.float32), biases=[0.0, 1.0]).tolist()
        [0, 1]
        >>> scores, ids = idx.search(np.array([[1, 0]], np.float32), k=2)
        >>> ids.tolist(), scores.tolist()
        ([[0, 1]], [[1.0, 0.5]])
    """

    def __init__(self, dim: int, bias_weight: float = 0.2, *, num_threads: int | None = None) -> None:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        bias_weight = float(bias_weight)
        if not np.isfinite(bias_weight):
            raise ValueError(f"bias_weight must be finite, got {bias_weight}")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"num_threads must be a positive int or None, got {num_threads!r}")
        self._dim = int(dim)
        self._bias_weight = bias_weight
        self._num_threads = num_threads
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self._dim))
        self._ids = np.empty(0, dtype=np.int64)  # live ids, insertion (= ascending) order
        self._biases = np.empty(0, dtype=np.float64)  # aligned with self._ids
        self._next_id = 0

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

    def __len__(self) -> int:
        return int(self._ids.size)

    def __repr__(self) -> str:
        return (
            f"VectorIndex(dim={self._dim}, bias_weight={self._bias_weight}, "
            f"len={len(self)}, next_id={self._next_id})"
        )

    @contextlib.contextmanager
    def _faiss_threads(self) -> Iterator[None]:
        """Temporarily applies ``num_threads`` to FAISS (no-op when ``None``)."""
        if self._num_threads is None:
            yield
            return
        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(self._num_threads)
        try:
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

    # --------------------------------------------------------------- mutation

    def add(self, vectors: ArrayLike, biases: ArrayLike | None = None) -> np.ndarray:
        """Adds vectors (L2-normalised on insertion) with optional biases.

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
        n = x.shape[0]
        b = self._as_biases(biases, n)
        new_ids = np.arange(self._next_id, self._next_id + n, dtype=np.int64)
        if n == 0:
            return new_ids
        with self._faiss_threads():
            self._index.add_with_ids(_normalise(x), new_ids)
        self._ids = np.concatenate([self._ids, new_ids])
        self._biases = np.concatenate([self._biases, b])
        self._next_id += n
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

    def remove(self, ids: ArrayLike) -> None:
        """Removes entries; their ids are never reused.

        Args:
            ids: Ids to remove (duplicates are ignored).

        Raises:
            KeyError: If an id is not live (nothing is removed then).
        """
        pos = np.unique(self._positions(ids))
        if pos.size == 0:
            return
        with self._faiss_threads():
            removed = self._index.remove_ids(np.ascontiguousarray(self._ids[pos]))
        if removed != pos.size:  # pragma: no cover - internal invariant
            raise RuntimeError(f"faiss removed {removed} entries, expected {pos.size}")
        keep = np.ones(self._ids.size, dtype=bool)
        keep[pos] = False
        self._ids = self._ids[keep]
        self._biases = self._biases[keep]

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
        arr = _as_ids(ids)
        self._positions(arr)
        if arr.size == 0:
            return np.empty((0, self._dim), dtype=np.float32)
        return np.asarray(self._index.reconstruct_batch(np.ascontiguousarray(arr)), dtype=np.float32)

    def search(
        self, queries: ArrayLike, k: int, mask: ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact masked top-``k`` by ``cos(query, v_i) + bias_weight * bias_i`` (Eq. 8).

        Args:
            queries: ``float32[Q, dim]`` finite queries (normalised here;
                a zero query has cosine 0 with everything).
            k: Number of results per query (``>= 1``; may exceed ``len(self)``).
            mask: Optional ``bool[Q, len(self)]`` eligibility (Eq. 7), columns
                in :attr:`ids` order; ``False`` entries are never returned.

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
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != np.bool_:
                raise ValueError(f"mask must have dtype bool, got {m.dtype}")
            if m.shape != (n_q, n):
                raise ValueError(f"mask must have shape [Q, len(index)] = ({n_q}, {n}), got {m.shape}")
        else:
            m = None

        out_scores = np.full((n_q, k), -np.inf, dtype=np.float32)
        out_ids = np.full((n_q, k), -1, dtype=np.int64)
        if n_q == 0 or n == 0:
            return out_scores, out_ids

        # All N cosine similarities from FAISS (exact flat search), scattered
        # back into the column order of self._ids (ascending ids).
        with self._faiss_threads():
            sims, labels = self._index.search(_normalise(q), n)
        cols = np.searchsorted(self._ids, labels)
        scores = np.empty((n_q, n), dtype=np.float64)
        np.put_along_axis(scores, cols, sims.astype(np.float64), axis=1)
        scores += self._bias_weight * self._biases[None, :]
        if m is not None:
            scores[~m] = -np.inf

        kk = min(k, n)
        if kk < n:
            cand = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
            # Entries tied with the kk-th score may have been cut arbitrarily:
            # re-include every column whose score equals the threshold.
            thresh = np.take_along_axis(scores, cand, axis=1).min(axis=1)
            if np.count_nonzero(scores >= thresh[:, None]) != n_q * kk:
                cand = None
        else:
            cand = None
        if cand is None:
            order = np.lexsort((np.broadcast_to(np.arange(n), scores.shape), -scores), axis=1)[:, :kk]
        else:
            c_scores = np.take_along_axis(scores, cand, axis=1)
            sub = np.lexsort((cand, -c_scores), axis=1)
            order = np.take_along_axis(cand, sub, axis=1)
        top = np.take_along_axis(scores, order, axis=1)
        eligible = np.isfinite(top)
        out_scores[:, :kk] = np.where(eligible, top, -np.inf).astype(np.float32)
        out_ids[:, :kk] = np.where(eligible, self._ids[order], -1)
        return out_scores, out_ids

    # ------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the index to one file, atomically.

        The file is ``MAGIC | sha256(body) | body`` where ``body`` is an
        ``.npz`` archive (no pickles) holding the ``faiss.serialize_index``
        bytes, the ids, biases and a JSON header (format version, ``dim``,
        ``bias_weight``, ``next_id``). It is written to a temporary file in
        the same directory, flushed and fsynced, then ``os.replace``-d over
        ``path``, so readers see either the old or the new file.

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
        }
        with self._faiss_threads():
            index_bytes = faiss.serialize_index(self._index)
        buf = io.BytesIO()
        np.savez(
            buf,
            header=np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8),
            faiss_index=np.asarray(index_bytes, dtype=np.uint8),
            ids=self._ids,
            biases=self._biases,
        )
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
        """Reads an index written by :meth:`save`.

        Args:
            path: File to read.
            num_threads: As in the constructor (not persisted).

        Returns:
            The index, with the same entries, biases, ``bias_weight`` and
            ``next_id`` (so ids are still never reused).

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
        try:
            with np.load(io.BytesIO(body), allow_pickle=False) as z:
                header = loads_json(z["header"].tobytes())
                index_bytes = z["faiss_index"]
                ids = z["ids"]
                biases = z["biases"]
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise CorruptFileError(path, f"unreadable VectorIndex payload: {type(e).__name__}: "
                                         f"{' '.join(str(e).split())}") from None
        if not isinstance(header, dict) or header.get("format_version") != _FORMAT_VERSION:
            version = header.get("format_version") if isinstance(header, dict) else None
            raise CorruptFileError(path, f"unsupported format version {version!r}")
        missing = {"dim", "bias_weight", "next_id", "size"} - header.keys()
        if missing:
            raise CorruptFileError(path, f"header lacks {sorted(missing)}")

        def is_int(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        dim, size, next_id, bw = header["dim"], header["size"], header["next_id"], header["bias_weight"]
        if not (is_int(dim) and 1 <= dim <= 1 << 20 and is_int(size) and size >= 0 and is_int(next_id)
                and next_id >= 0 and isinstance(bw, (int, float)) and not isinstance(bw, bool) and np.isfinite(bw)):
            raise CorruptFileError(path, f"bad header values (dim={dim!r}, size={size!r}, next_id={next_id!r}, "
                                         f"bias_weight={bw!r})")
        if index_bytes.dtype != np.uint8 or index_bytes.ndim != 1 or ids.ndim != 1 or biases.ndim != 1 \
                or ids.dtype.kind not in "iu" or biases.dtype.kind != "f":
            raise CorruptFileError(path, "stored arrays have the wrong dtype or shape")
        if ids.size != size or biases.size != size:
            raise CorruptFileError(path, f"inconsistent VectorIndex file: sizes differ (header {size}, "
                                         f"ids {ids.size}, biases {biases.size})")
        if index_bytes.size < 4 * dim * size:  # a flat index stores every vector: refuse before allocating
            raise CorruptFileError(path, f"FAISS index too short for {size} vectors of dim {dim}")
        ids = ids.astype(np.int64)
        biases = biases.astype(np.float64)
        if not np.all(np.isfinite(biases)):
            raise CorruptFileError(path, "biases contain NaN or infinite values")

        obj = cls(dim, float(bw), num_threads=num_threads)
        try:
            with obj._faiss_threads():
                index = faiss.deserialize_index(np.ascontiguousarray(index_bytes))
        except (RuntimeError, MemoryError, ValueError, TypeError) as e:  # faiss raises RuntimeError on bad bytes
            raise CorruptFileError(path, f"unreadable FAISS index ({type(e).__name__}: "
                                         f"{' '.join(str(e).split())[:200]})") from None
        if not isinstance(index, faiss.IndexIDMap2):
            raise CorruptFileError(path, f"stored FAISS index is {type(index).__name__}, expected IndexIDMap2")
        problems = []
        if index.d != obj._dim:
            problems.append(f"faiss dim {index.d} != header dim {obj._dim}")
        if index.ntotal != ids.size:
            problems.append(f"sizes differ (faiss {index.ntotal}, ids {ids.size}, biases {biases.size})")
        elif not np.array_equal(faiss.vector_to_array(index.id_map), ids):
            problems.append("faiss id map differs from the stored ids")
        if ids.size and (np.any(np.diff(ids) <= 0) or ids[0] < 0 or ids[-1] >= next_id):
            problems.append("ids are not ascending in [0, next_id)")
        if problems:
            raise CorruptFileError(path, "inconsistent VectorIndex file: " + "; ".join(problems))
        obj._index = index
        obj._ids = ids
        obj._biases = biases
        obj._next_id = next_id
        return obj

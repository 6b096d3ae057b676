"""Deterministic, vectorised character n-gram hashing embedder (``phi``).

CounterMem retrieves corrections by the cosine similarity of embedded
states (paper Eq. 8: ``r_i = cos(phi(s), phi(q_i)) + lambda_reuse * u_i``).
:class:`HashingEmbedder` is that ``phi``: a fixed, training-free map from text
to an L2-normalised ``float32`` vector of ``dim`` (512) components.

Design
------
* **char_wb n-grams.** Like scikit-learn's ``analyzer='char_wb'``, the text is
  (optionally) lower-cased, split on whitespace (:meth:`str.split`), and each
  word is padded with one space on either side; n-grams (``n`` in
  ``ngram_range``) are taken only *inside* a padded word, never across a word
  boundary. n-grams are over the UTF-8 **bytes** of the padded word rather
  than over code points; for ASCII text (SQL, schema names) and the default
  ``ngram_range=(3, 5)`` the n-gram multiset is exactly scikit-learn's
  (checked in ``tests/test_embed.py``). One corner differs: with
  ``min_n > 3`` a padded word shorter than ``min_n`` yields nothing here,
  whereas scikit-learn emits the whole short word once.
* **Fixed integer hash.** Each n-gram is hashed with 32-bit FNV-1a over its
  bytes, ``h <- (h XOR byte) * 16777619 (mod 2**32)``, starting from the FNV
  offset basis mixed with ``seed``, followed by the MurmurHash3 ``fmix32``
  finaliser (so that *all* output bits avalanche). Python's :func:`hash` is
  never used, so vectors are identical across processes, platforms and
  ``PYTHONHASHSEED`` values.
* **Signed hashing.** The low bits of the finalised hash pick the bucket
  (``h mod dim``) and its top bit picks the sign (+1/-1), as in
  ``HashingVectorizer(alternate_sign=True)``: bucket collisions cancel in
  expectation, so texts sharing no n-grams are near-orthogonal (cosine
  ``~ 0`` with spread ``~ 1/sqrt(dim)``) rather than spuriously positive.
* **Normalisation.** Rows are L2-normalised in ``float64`` and returned as
  ``float32``; a text with no n-gram (empty or whitespace-only) gives an
  all-zero row, never NaN.
* **Speed.** The only per-text Python work is ``lower``/``split``/``join``
  (C-level string methods). Everything else runs once per batch with NumPy:
  the padded texts are concatenated into one byte buffer, every byte gets a
  padded-word id (a cumulative sum over word starts), the rolling FNV hash of
  all ``n``-grams starting at every byte is built with shifted array ops, an
  ``n``-gram is kept iff its first and last byte share a word id, and a
  single :func:`numpy.bincount` over ``row * dim + bucket`` (weighted by the
  signs) produces the ``[B, dim]`` counts. See ``benchmarks/embed.py`` for the
  throughput comparison with scikit-learn.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["HashingEmbedder"]

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = np.uint32(0x01000193)
_SPACE = 0x20
_MASK32 = 0xFFFFFFFF


def _fmix32_int(x: int) -> int:
    """MurmurHash3 32-bit finaliser on a Python int (used for the seed)."""
    x &= _MASK32
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & _MASK32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & _MASK32
    x ^= x >> 16
    return x


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3 32-bit finaliser, vectorised over a ``uint32`` array (in place)."""
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


@dataclass(frozen=True)
class HashingEmbedder:
    """Signed character n-gram hashing embedder, ``phi`` in Eq. 8.

    Attributes:
        dim: Number of hash buckets, i.e. the embedding dimension.
        ngram_range: Inclusive ``(min_n, max_n)`` n-gram lengths, in bytes.
        lowercase: Lower-case texts before tokenisation.
        seed: Mixed into the hash's initial state; different seeds give
            different (independent-looking) bucket/sign assignments.
    """

    dim: int = 512
    ngram_range: tuple[int, int] = (3, 5)
    lowercase: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.dim, int) or isinstance(self.dim, bool) or self.dim < 1:
            raise ValueError(f"dim must be a positive int, got {self.dim!r}")
        if self.dim > 2**31:
            raise ValueError(f"dim must be at most 2**31, got {self.dim}")
        rng = tuple(self.ngram_range)
        if (
            len(rng) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in rng)
            or not 1 <= rng[0] <= rng[1]
        ):
            raise ValueError(
                f"ngram_range must be (min_n, max_n) with 1 <= min_n <= max_n, got {self.ngram_range!r}"
            )
        object.__setattr__(self, "ngram_range", (int(rng[0]), int(rng[1])))
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an int, got {self.seed!r}")

    def _padded(self, texts: Sequence[str]) -> list[str]:
        """Whitespace-normalise each text into ``' w1  w2  ...  wm '`` ('' if no words)."""
        if self.lowercase:
            return [f" {'  '.join(w)} " if (w := t.lower().split()) else "" for t in texts]
        return [f" {'  '.join(w)} " if (w := t.split()) else "" for t in texts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeds a batch of texts.

        Args:
            texts: A sequence of strings (a bare ``str`` is rejected, as it
                would otherwise be embedded character by character).

        Returns:
            ``float32[B, dim]`` array; each row has unit L2 norm, or is all
            zeros when its text has no n-gram (empty/whitespace-only text).

        Raises:
            TypeError: If ``texts`` is a ``str``/``bytes`` or holds a non-``str``.
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError("embed() expects a sequence of str; use embed_one() for a single text")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str")
        n_texts = len(texts)
        dim = self.dim
        out = np.zeros((n_texts, dim), dtype=np.float32)
        if n_texts == 0:
            return out

        padded = self._padded(texts)
        joined = "".join(padded)
        if joined.isascii():
            data = joined.encode("ascii")
            lengths = np.fromiter(map(len, padded), dtype=np.int64, count=n_texts)
        else:
            encoded = [p.encode("utf-8") for p in padded]
            data = b"".join(encoded)
            lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n_texts)
        total = len(data)
        min_n, max_n = self.ngram_range
        if total < min_n:
            return out

        buf = np.frombuffer(data, dtype=np.uint8)
        # Padded-word id of every byte: a word starts at a space followed by a
        # non-space (words are separated by two spaces, texts by >= two).
        is_space = buf == _SPACE
        starts = np.empty(total, dtype=bool)
        np.greater(is_space[:-1], is_space[1:], out=starts[:-1])  # space, then non-space
        starts[-1] = False
        word_id = np.cumsum(starts, dtype=np.int32 if total < 2**31 else np.int64)
        # Flat output offset (row * dim) of every byte; int32 when it fits.
        key_dtype = np.int32 if n_texts * dim < 2**31 else np.int64
        row_base = np.repeat(np.arange(0, n_texts * dim, dim, dtype=key_dtype), lengths)

        bytes32 = buf.astype(np.uint32)
        seed_mix = _fmix32_int(self.seed * 0x9E3779B9 + 0x7F4A7C15)
        h = np.full(total, np.uint32(_FNV32_OFFSET ^ seed_mix), dtype=np.uint32)
        keys: list[np.ndarray] = []
        hashes: list[np.ndarray] = []
        for n in range(1, max_n + 1):
            m = total - n + 1  # number of n-gram start positions
            if m <= 0:
                break
            # After this step h[p] is the FNV-1a state of bytes p .. p+n-1.
            h = h[:m]
            h ^= bytes32[n - 1 : n - 1 + m]
            h *= _FNV32_PRIME
            if n < min_n:
                continue
            # Keep n-grams whose first and last byte lie in the same padded word.
            valid = word_id[:m] == word_id[n - 1 :]
            hashes.append(h[valid])
            keys.append(row_base[:m][valid])
        if not hashes:
            return out

        hv = _fmix32(np.concatenate(hashes))
        flat = np.concatenate(keys)
        if dim & (dim - 1) == 0:
            flat += (hv & np.uint32(dim - 1)).astype(key_dtype)
        else:
            flat += (hv % np.uint32(dim)).astype(key_dtype)
        # Top bit -> sign: +1 when clear, -1 when set.
        sign = (1 - 2 * (hv >> np.uint32(31)).astype(np.int32)).astype(np.float32)
        # Counts are small integers, exact in float32 (< 2**24 per bucket).
        np.add.at(out.reshape(-1), flat, sign)
        norms = np.sqrt(np.einsum("ij,ij->i", out, out, dtype=np.float64))
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        out *= inv[:, None].astype(np.float32)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """Embeds a single text.

        Args:
            text: The text.

        Returns:
            ``float32[dim]`` unit (or all-zero) vector, equal to
            ``self.embed([text])[0]``.
        """
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, expected str")
        return self.embed([text])[0]

    def embed_cached(self, text: str) -> np.ndarray:
        """``embed_one(text)`` through a bounded per-process memo (:data:`EMBED_CACHE_SIZE` texts,
        least recently used dropped): the same read-only ``float32[dim]`` vector, computed once for a
        text the host loop embeds again and again (a draft or a state that recurs across the rows,
        the training episodes and the validation passes of a unit)."""
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, expected str")
        return _embed_cached(self, text)


#: texts kept by :meth:`HashingEmbedder.embed_cached` (about 2 KB each at ``dim = 512``)
EMBED_CACHE_SIZE = 16384


@functools.lru_cache(maxsize=EMBED_CACHE_SIZE)
def _embed_cached(embedder: HashingEmbedder, text: str) -> np.ndarray:
    v = embedder.embed([text])[0]
    v.setflags(write=False)  # shared between callers: never mutate
    return v

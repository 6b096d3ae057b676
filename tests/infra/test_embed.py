"""Tests for cfjax.infra.embed.HashingEmbedder (phi of paper Eq. 8)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfjax.infra.embed import HashingEmbedder

TEXTS = [
    "How many singers do we have?",
    "What is the average, minimum, and maximum age of all singers from France?",
    "Show the name and the release year of the song by the youngest singer.",
    "SELECT count(*) FROM singer WHERE age > 30",
    "",
    "   \t\n ",
    "Ünïcödé wörds — 東京 ok",
]


def _fmix32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def _ngrams(text: str, lo: int, hi: int, lowercase: bool = True) -> list[bytes]:
    """char_wb n-grams over the UTF-8 bytes of each space-padded word."""
    if lowercase:
        text = text.lower()
    out = []
    for w in text.split():
        b = f" {w} ".encode()
        for n in range(lo, hi + 1):
            out += [b[i : i + n] for i in range(len(b) - n + 1)]
    return out


def _reference(emb: HashingEmbedder, texts: list[str]) -> np.ndarray:
    """Pure-Python, one n-gram at a time version of the documented hash."""
    out = np.zeros((len(texts), emb.dim))
    basis = 0x811C9DC5 ^ _fmix32((emb.seed * 0x9E3779B9 + 0x7F4A7C15) & 0xFFFFFFFF)
    for r, t in enumerate(texts):
        for g in _ngrams(t, *emb.ngram_range, lowercase=emb.lowercase):
            h = basis
            for byte in g:
                h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
            h = _fmix32(h)
            out[r, h % emb.dim] += -1.0 if h >> 31 else 1.0
        nr = np.linalg.norm(out[r])
        if nr > 0:
            out[r] /= nr
    return out.astype(np.float32)


def test_shape_dtype_norm_and_empty() -> None:
    emb = HashingEmbedder()
    x = emb.embed(TEXTS)
    assert x.shape == (len(TEXTS), 512) and x.dtype == np.float32
    norms = np.linalg.norm(x, axis=1)
    assert np.allclose(norms[[0, 1, 2, 3, 6]], 1.0, atol=1e-6)
    assert not np.isnan(x).any()
    assert np.all(x[4] == 0) and np.all(x[5] == 0)
    assert emb.embed([]).shape == (0, 512)
    assert np.all(emb.embed_one("") == 0)


def test_matches_pure_python_reference() -> None:
    for emb in (HashingEmbedder(), HashingEmbedder(dim=100, ngram_range=(1, 4), seed=7, lowercase=False)):
        np.testing.assert_allclose(emb.embed(TEXTS), _reference(emb, TEXTS), atol=1e-6)


def test_ngrams_match_sklearn_char_wb_on_ascii() -> None:
    sk = pytest.importorskip("sklearn.feature_extraction.text")
    analyzer = sk.CountVectorizer(analyzer="char_wb", ngram_range=(3, 5)).build_analyzer()
    for t in TEXTS[:4] + ["a b  cd\tefg", "I x"]:
        assert Counter(g.decode() for g in _ngrams(t, 3, 5)) == Counter(analyzer(t))


def test_pinned_hash() -> None:
    # Pins the hash function: changing it silently would re-key every stored
    # memory. " a " is the only n-gram of "A" (one-hot row).
    emb = HashingEmbedder()
    x = emb.embed_one("A")
    assert np.nonzero(x)[0].tolist() == [23] and x[23] == -1.0
    y = emb.embed_one("select")  # 15 n-grams, all in distinct buckets
    nz = np.nonzero(y)[0]
    assert nz.tolist() == [8, 11, 178, 179, 221, 225, 245, 247, 258, 274, 380, 397, 431, 439, 503]
    assert np.sign(y[nz]).astype(int).tolist() == [-1, -1, 1, 1, 1, 1, 1, -1, 1, 1, -1, -1, 1, -1, -1]


_SCRIPT = (
    "import hashlib, sys; from cfjax.infra.embed import HashingEmbedder; "
    "texts = sys.stdin.read().split('\\x1e'); "
    "print(hashlib.sha256(HashingEmbedder().embed(texts).tobytes()).hexdigest())"
)


@pytest.mark.parametrize("hashseed", ["0", "12345"])
def test_deterministic_across_processes(hashseed: str) -> None:
    here = hashlib.sha256(HashingEmbedder().embed(TEXTS).tobytes()).hexdigest()
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    res = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        input="\x1e".join(TEXTS),
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    assert res.stdout.strip() == here


def test_similar_closer_than_unrelated() -> None:
    emb = HashingEmbedder()
    a, b, c = emb.embed(
        [
            "How many singers are older than 30?",
            "how many singers are older than 40",
            "List the stadium names ordered by capacity.",
        ]
    )
    assert a @ b > 0.7
    assert a @ b > a @ c + 0.4


def test_unrelated_texts_near_orthogonal() -> None:
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    texts = [
        " ".join("".join(rng.choice(letters, rng.integers(3, 9))) for _ in range(8)) for _ in range(200)
    ]
    x = HashingEmbedder().embed(texts)
    g = x @ x.T
    off = g[~np.eye(len(texts), dtype=bool)]
    assert abs(off.mean()) < 0.01  # signed hashing: no positive bias
    assert off.std() < 2.5 / np.sqrt(512)
    assert np.abs(off).max() < 0.35


def test_seed_and_config_change_output() -> None:
    x0 = HashingEmbedder(seed=0).embed(TEXTS[:2])
    x1 = HashingEmbedder(seed=1).embed(TEXTS[:2])
    assert not np.allclose(x0, x1)
    assert np.allclose(np.einsum("ij,ij->i", x1, x1), 1.0, atol=1e-6)


def test_case_and_whitespace_normalisation() -> None:
    emb = HashingEmbedder()
    np.testing.assert_array_equal(emb.embed_one("Hello   World\n"), emb.embed_one("hello world"))
    cased = HashingEmbedder(lowercase=False)
    assert not np.array_equal(cased.embed_one("Hello"), cased.embed_one("hello"))


def test_invalid_inputs() -> None:
    emb = HashingEmbedder()
    with pytest.raises(TypeError):
        emb.embed("a bare string")
    with pytest.raises(TypeError):
        emb.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        HashingEmbedder(dim=0)
    with pytest.raises(ValueError):
        HashingEmbedder(ngram_range=(5, 3))
    with pytest.raises(AttributeError):
        emb.dim = 3  # type: ignore[misc]  # frozen


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=8))
def test_batch_equals_one_by_one_and_reference(texts: list[str]) -> None:
    emb = HashingEmbedder()
    batch = emb.embed(texts)
    assert batch.shape == (len(texts), 512)
    for i, t in enumerate(texts):
        np.testing.assert_array_equal(batch[i], emb.embed_one(t))
    np.testing.assert_allclose(batch, _reference(emb, texts), atol=1e-6)


def test_embed_cached_is_embed_and_read_only() -> None:
    """The memo returns exactly ``embed([text])[0]``, once per text, as a read-only vector."""
    from cfjax.infra.embed import HashingEmbedder

    e = HashingEmbedder(dim=64, seed=3)
    texts = ["select a from t", "", "éé unicode words", "select a from t"]
    for t in texts:
        v = e.embed_cached(t)
        assert v.dtype == np.float32 and v.tobytes() == e.embed([t])[0].tobytes()
        assert not v.flags.writeable
    assert e.embed_cached(texts[0]) is e.embed_cached(texts[3])
    assert e.embed_cached("x y z") is not HashingEmbedder(dim=64, seed=4).embed_cached("x y z")
    with pytest.raises(TypeError):
        e.embed_cached(b"bytes")  # type: ignore[arg-type]

"""What the peer memory systems share: an embedding index, store files, memory-set rendering.

Nothing here is a mechanism of any one peer: similarity search over hashed embeddings (the same
:class:`~cfjax.infra.embed.HashingEmbedder` every row of the harness retrieves with, so rows differ by
mechanism, not by encoder), atomic store files with a format tag, and the one way a set of items is
shown to the backbone (:func:`memory_set`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.io import atomic_write_json, read_json
from cfjax.llm.prompts import render_memory_set
from cfjax.types import Attempt, MemoryText, Task

__all__ = ["EmbeddingIndex", "save_store", "load_store", "memory_set", "task_key", "trajectory_of",
           "attempts_to_json", "attempts_from_json", "cosine", "json_object"]


class EmbeddingIndex:
    """Texts by id with their unit-norm hashed embeddings; exact cosine top-k (ids stay stable under
    removal: a removed id is never reused).

    Args:
      embedder: the encoder (default: the harness's :class:`HashingEmbedder`).
    """

    def __init__(self, embedder: HashingEmbedder | None = None) -> None:
        self.embedder = embedder or HashingEmbedder()
        self._ids: list[str] = []
        self._rows: list[np.ndarray] = []
        self._pos: dict[str, int] = {}

    def embed(self, text: str) -> np.ndarray:
        return self.embedder.embed_cached(text)

    def add(self, item_id: str, text: str) -> None:
        """Index ``text`` under ``item_id`` (re-adding an id replaces its text)."""
        v = self.embed(text)
        if item_id in self._pos:
            self._rows[self._pos[item_id]] = v
            return
        self._pos[item_id] = len(self._ids)
        self._ids.append(item_id)
        self._rows.append(v)

    def remove(self, item_id: str) -> None:
        i = self._pos.pop(item_id, None)
        if i is None:
            return
        last = len(self._ids) - 1
        if i != last:  # move the last row into the hole
            self._ids[i], self._rows[i] = self._ids[last], self._rows[last]
            self._pos[self._ids[i]] = i
        self._ids.pop()
        self._rows.pop()

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._pos

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> list[str]:
        return list(self._ids)

    def similarity(self, query: str | np.ndarray, item_id: str) -> float:
        q = self.embed(query) if isinstance(query, str) else query
        return float(self._rows[self._pos[item_id]] @ q)

    def topk(self, query: str | np.ndarray, k: int, *, keep: Callable[[str], bool] | None = None,
             threshold: float | None = None) -> list[tuple[str, float]]:
        """The ``k`` most similar ids (cosine, descending; ties → insertion order) among those ``keep``
        accepts and, with ``threshold``, whose similarity is at least it."""
        if not self._ids or k <= 0:
            return []
        q = self.embed(query) if isinstance(query, str) else query
        sims = np.stack(self._rows) @ q
        order = np.argsort(-sims, kind="stable")
        out = []
        for j in order:
            iid = self._ids[int(j)]
            s = float(sims[int(j)])
            if threshold is not None and s < threshold:
                break
            if keep is not None and not keep(iid):
                continue
            out.append((iid, s))
            if len(out) == k:
                break
        return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def task_key(task: Task) -> str:
    """The text a task is keyed by when a peer embeds "the query": its question."""
    return task.question


def memory_set(items: Sequence[tuple[str, str]], kind: str = "memories") -> MemoryText | None:
    """Items shown to the backbone as one memory set (``[id]`` blocks, in the order given), ``None``
    when there are none. The scripted backbone reads every item's ``EDIT``/``RULE`` lines, with
    adherence falling as the set grows (:meth:`cfjax.llm.scripted.ScriptedBackbone._follow_memories`)."""
    if not items:
        return None
    return MemoryText(kind, render_memory_set(list(items)))


def trajectory_of(attempts: Sequence[Attempt]) -> str:
    """A trajectory as plain text (the prompts' form)."""
    from cfjax.llm.prompts import render_trajectory

    return render_trajectory(attempts)


def attempts_to_json(attempts: Iterable[Attempt]) -> list[list[Any]]:
    return [[a.action, a.feedback, float(a.score)] for a in attempts]


def attempts_from_json(rows: Any, where: str) -> tuple[Attempt, ...]:
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 3 for r in rows):
        raise ValueError(f"{where}: attempts must be [action, feedback, score] lists")
    return tuple(Attempt(str(a), str(f), float(s)) for a, f, s in rows)


def save_store(path: Path, fmt: str, payload: dict) -> None:
    """Write a store atomically with its ``format`` tag (nothing half-written)."""
    atomic_write_json(Path(path), {"format": fmt, **payload})


def load_store(path: Path, fmt: str, what: str, required: dict[str, type]) -> dict:
    """Read a store :func:`save_store` wrote.

    Raises:
      ValueError: one line naming the file and the problem (not a ``what`` store, a missing or
        mistyped field)."""
    data = read_json(Path(path))
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise ValueError(f"{path}: not a {what} store (expected format {fmt!r})")
    for key, typ in required.items():
        if not isinstance(data.get(key), typ):
            raise ValueError(f"{path}: field {key!r} must be a {typ.__name__}")
    return data


_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def json_object(text: str) -> dict | None:
    """The first JSON object of a model's reply (code fences allowed, prose around it ignored), or
    ``None`` — the peers whose prompts ask for JSON (Mem0, A-MEM) parse their replies with it."""
    m = _FENCE_RE.search(text)
    body = m.group(1) if m else text
    start = body.find("{")
    while start != -1:
        try:
            obj, _ = json.JSONDecoder().raw_decode(body[start:])
        except ValueError:
            start = body.find("{", start + 1)
            continue
        return obj if isinstance(obj, dict) else None
    return None

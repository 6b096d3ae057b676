"""Memos of the SAT/SMT parsers bounded by bytes, not by entry count.

The parsers of this package (:func:`~cfjax.domains.sat.sat_lang.parse_line`,
:func:`~cfjax.domains.sat.sat_lang.parse_program`,
:func:`~cfjax.domains.sat.smt_world.parse_commands` and the edit models' unit
splitters) are pure functions of one text that the experiments call very
often, on untrusted, model-written text. A :func:`functools.lru_cache` with
16,384 entries of up to ~100 KB of text (several MB of syntax tree each) has
no useful memory bound, so they are memoised by :class:`ByteLRU` instead:

* every entry is charged an *estimate* of the memory it keeps alive,
  ``CHAR_COST × len(text) + ITEM_COST × (items + 1)`` (``items``: the lines
  or commands of the value). The constants are measured upper bounds of the
  parsers' syntax trees (tracemalloc: about 65 bytes per character on the
  densest SAT text — lines of one short literal — and ~50 on ``x, x, x, …``
  literal lists, at most ~15 on SMT-LIB text; ~25 and ~10 on ordinary
  encodings);
* the estimates of all entries stay within ``budget`` bytes: inserting past
  it evicts the least recently used entries first;
* an entry whose estimate is above ``budget // MAX_ENTRY_DIVISOR`` is never
  stored (the value is computed and returned, uncached), so one huge text
  cannot flush the whole memo;
* exceptions are never memoised (as with :func:`functools.lru_cache`), and a
  hit returns the very object that was stored, so the memoised function
  returns exactly what the plain one does.

The hit path takes no lock (one ``dict`` lookup and one ``move_to_end``,
each atomic under the GIL); inserts and evictions hold a lock, so the byte
accounting stays exact under threads.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["ByteLRU", "CacheInfo", "byte_lru", "text_cost", "CHAR_COST", "ITEM_COST", "MAX_ENTRY_DIVISOR"]

#: estimated bytes a cached syntax tree keeps alive per character of its text (an upper bound, module docstring)
CHAR_COST = 64
#: estimated fixed bytes per cached entry and per line / command of its value
ITEM_COST = 256
#: an entry above ``budget // MAX_ENTRY_DIVISOR`` estimated bytes is never stored
MAX_ENTRY_DIVISOR = 8


def text_cost(text: str, items: int = 0) -> int:
    """The estimated bytes of a memo entry keyed by ``text`` whose value has ``items`` lines / commands."""
    return CHAR_COST * len(text) + ITEM_COST * (items + 1)


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    evictions: int
    refused: int
    entries: int
    nbytes: int
    budget: int


class ByteLRU:
    """A least-recently-used map ``str → value`` whose entries' estimated sizes stay within ``budget`` bytes.

    Args:
      budget: the most estimated bytes held at once.
      max_entry: the largest estimate ever stored (default ``budget // MAX_ENTRY_DIVISOR``).
    """

    __slots__ = ("budget", "max_entry", "nbytes", "hits", "misses", "evictions", "refused", "_d", "_lock")

    def __init__(self, budget: int, max_entry: int | None = None) -> None:
        if budget <= 0:
            raise ValueError("budget must be positive")
        self.budget = int(budget)
        self.max_entry = int(budget // MAX_ENTRY_DIVISOR if max_entry is None else min(max_entry, budget))
        self.nbytes = 0
        self.hits = self.misses = self.evictions = self.refused = 0
        self._d: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: str) -> bool:
        return key in self._d

    def get(self, key: str, default: Any = None) -> Any:
        hit = self._d.get(key)
        if hit is None:
            return default
        try:
            self._d.move_to_end(key)
        except KeyError:  # evicted by another thread in between
            pass
        return hit[0]

    def put(self, key: str, value: Any, size: int) -> bool:
        """Store ``value`` under ``key`` charged ``size`` bytes (``False``: too large, not stored)."""
        size = int(size)
        if size > self.max_entry:
            self.refused += 1
            return False
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            self._d[key] = (value, size)
            self.nbytes += size
            while self.nbytes > self.budget:
                _, (_, s) = self._d.popitem(last=False)
                self.nbytes -= s
                self.evictions += 1
        return True

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self.nbytes = 0
            self.hits = self.misses = self.evictions = self.refused = 0

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, self.evictions, self.refused, len(self._d), self.nbytes, self.budget)


def byte_lru(budget: int, size: Callable[[str, Any], int]) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
    """Memoise a pure function of one string in a :class:`ByteLRU` of ``budget`` bytes;
    ``size(text, value)`` estimates an entry (e.g. with :func:`text_cost`).

    The wrapper keeps the function's name and docstring and, like :func:`functools.lru_cache`,
    has ``cache_clear()``, ``cache_info()`` and ``__wrapped__``; ``.cache`` is the :class:`ByteLRU`."""

    def deco(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        cache = ByteLRU(budget)
        lookup, touch = cache._d.get, cache._d.move_to_end

        @functools.wraps(fn)
        def wrapper(text: str) -> Any:
            hit = lookup(text)
            if hit is not None:
                try:
                    touch(text)
                except KeyError:  # evicted by another thread in between
                    pass
                cache.hits += 1
                return hit[0]
            cache.misses += 1
            value = fn(text)
            cache.put(text, value, size(text, value))
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        wrapper.cache_info = cache.info  # type: ignore[attr-defined]
        return wrapper

    return deco

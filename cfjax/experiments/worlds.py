"""The suites and worlds a runner's processes open, shared by every job of the process.

:func:`open_world` memoises ``(suite, raw world, memoised world)`` per (suite, root, cache file);
:func:`close_worlds` closes them (the serial runners call it when their jobs are done). With a cache
file the memoised world is a :class:`SharedWorld`, whose outcomes the run's worker processes share.
Every runner (CounterMem's, Anti-Persistence's, UpliftMem's, ``compare``) opens its worlds here.
"""

from __future__ import annotations

import json

from cfjax.infra.cache import CachedWorld

__all__ = ["SharedWorld", "open_world", "close_worlds"]


class SharedWorld(CachedWorld):
    """A memoising world whose cache the worker processes of one run share (a SQLite file, WAL mode).

    Like :class:`~cfjax.infra.cache.CachedWorld` — which it extends across processes — it relies on
    every cfjax world being a pure function of the task's fixed state and the action text: a check
    another process already ran is read back instead of re-run (the agent still makes, and the ledger
    still counts, every call). Outcomes that did not complete (timeouts, infrastructure failures) are
    never cached. The file is a scratch cache of one run (the runner deletes it at the start and
    the end), so no outcome outlives the code that produced it.
    """

    def __init__(self, world, path: str) -> None:
        import sqlite3

        super().__init__(world)
        self.path = path
        self._db = sqlite3.connect(path, timeout=120, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE IF NOT EXISTS outcome (task TEXT, action TEXT, value TEXT, "
                         "PRIMARY KEY (task, action))")

    def evaluate(self, task, action: str):
        """:meth:`CachedWorld.evaluate`, with the other processes' completed checks read in first and
        this process's new ones written out."""
        from cfjax.types import Outcome

        key = (task.task_id, action.strip())
        if key not in self._cache:
            row = self._db.execute("SELECT value FROM outcome WHERE task = ? AND action = ?", key).fetchone()
            if row is not None:
                fields = json.loads(row[0])
                if len(fields) > 6:  # sandbox_missing (absent from rows of older caches)
                    fields[6] = tuple(fields[6])
                with self._lock:
                    self._cache[key] = Outcome(*fields)
        misses = self.misses
        out = super().evaluate(task, action)
        if self.misses > misses and out.completed:
            value = json.dumps([out.score, out.solved, out.completed, out.feedback, out.error, out.elapsed_s,
                                list(out.sandbox_missing)])
            self._db.execute("INSERT OR IGNORE INTO outcome VALUES (?, ?, ?)", (*key, value))
        return out

    def close(self) -> None:
        self._db.close()


_OPEN: dict[tuple[str, str, str], tuple] = {}  # (suite, root, cache) → (suite, raw world, memoised world)


def open_world(name: str, root: str, cache: str = ""):
    """The suite and its memoised world, shared by every job this process runs (pure worlds)."""
    got = _OPEN.get((name, root, cache))
    if got is None:
        from cfjax.domains import open_suite

        suite = open_suite(name, root)
        raw = suite.world()
        got = _OPEN[(name, root, cache)] = (suite, raw, SharedWorld(raw, cache) if cache else CachedWorld(raw))
    return got


def close_worlds() -> None:
    """Close this process's worlds (the serial runner calls it when its jobs are done)."""
    for _, raw, memo in _OPEN.values():
        for w in (memo, raw):
            close = getattr(w, "close", None)
            if close is not None:
                close()
    _OPEN.clear()

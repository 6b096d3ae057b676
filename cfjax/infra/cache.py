"""A memoising wrapper for any deterministic world model."""

from __future__ import annotations

import threading

from cfjax.types import Outcome, Task, World

__all__ = ["CachedWorld"]


class CachedWorld:
    """Memoises a deterministic world model on ``(task_id, action)``.

    Every world of cfjax is a pure function of the task's fixed state and the
    action text (each evaluation starts from a copy or reset of the same
    state), so a repeated check need not re-run the engine, the test
    subprocess or the solver. The *agent* still makes — and the ledger still
    counts — every call; only the compute is saved. Outcomes that did not
    complete (timeouts, infrastructure failures) are never cached: they are
    not a property of the action.
    """

    def __init__(self, world: World, max_entries: int = 200_000) -> None:
        self.world = world
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._cache: dict[tuple[str, str], Outcome] = {}
        self._lock = threading.Lock()

    def evaluate(self, task: Task, action: str) -> Outcome:
        key = (task.task_id, action.strip())
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self.hits += 1
                return hit
            self.misses += 1
        out = self.world.evaluate(task, action)
        if out.completed:
            with self._lock:
                if len(self._cache) >= self.max_entries:
                    self._cache.clear()
                self._cache[key] = out
        return out

    def __getstate__(self) -> dict:
        d = dict(self.__dict__)
        d.pop("_lock")
        d["_cache"] = {}
        return d

    def __setstate__(self, d: dict) -> None:
        self.__dict__.update(d)
        self._lock = threading.Lock()

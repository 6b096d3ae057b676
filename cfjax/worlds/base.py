"""The world-model (evaluator) protocol: ``o = H(s, a)`` and ``U(o)`` in [0, 1]."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cfjax.suites.base import Task

__all__ = ["Outcome", "Evaluator", "CachedWorld"]


@dataclass(frozen=True)
class Outcome:
    """Result of one executable check of an action from a given state.

    Attributes:
      score: ``U(H(s, a))`` in [0, 1] (papers/countermem.md Eq. 2).
      solved: the task's success criterion holds (score == 1 for SQL).
      completed: the check ran to a verdict. ``False`` for timeouts and
        infrastructure failures: such a candidate is never admissible
        (App. B.1). An action that errors (bad SQL, forbidden statement)
        *is* a completed check with score 0.
      feedback: evaluator feedback text for the executor (never reveals the
        gold action).
      error: short machine-readable error kind or ``None``
        (``"sql_error"``, ``"forbidden"``, ``"timeout"``, ``"too_many_rows"``, ...).
      elapsed_s: wall-clock seconds spent in the check.
    """

    score: float
    solved: bool
    completed: bool
    feedback: str
    error: str | None = None
    elapsed_s: float = 0.0


@runtime_checkable
class Evaluator(Protocol):
    """An executable world model. ``evaluate`` must never mutate the task's
    environment: every call starts from a copy or reset of the same state."""

    def evaluate(self, task: Task, action: str) -> Outcome:  # pragma: no cover - protocol
        ...


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

    def __init__(self, world: Evaluator, max_entries: int = 200_000) -> None:
        import threading

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
        import threading

        self.__dict__.update(d)
        self._lock = threading.Lock()

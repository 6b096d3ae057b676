"""The world-model (evaluator) protocol: ``o = H(s, a)`` and ``U(o)`` in [0, 1]."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cfjax.suites.base import Task

__all__ = ["Outcome", "Evaluator"]


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

"""Task and split types shared by every built-in suite.

A :class:`Task` is one executable problem: a natural-language question, the
environment it runs in (``env_id``: a database, a repository, a solver
configuration), the gold action the evaluator compares against, and the
*observable attributes* that applicability conditions can test
(papers/countermem.md §3.3, App. B.2). Attributes are facts a parser of the
question and the environment could establish on a new task; they never reveal
the gold action.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Task", "Splits", "SplitOverlapError", "check_disjoint"]


@dataclass(frozen=True, eq=False)
class Task:
    """One executable task.

    Attributes:
      task_id: unique, stable identifier (``"sql/hr/at_least/003"``).
      question: the natural-language request shown to the executor.
      env_id: the environment (database id for SQL).
      gold: the reference action; only the evaluator and the scripted
        backbone (a simulator of an LLM's *errors* around the truth) read it.
      context: environment context shown to the executor (schema text).
      attrs: observable attributes for applicability conditions
        (``question`` is always included); values are str, int, float, bool or
        tuples of str.
      family: error family of the template (analysis only; never shown).
      variant: ``"base"``, ``"look_alike"`` or ``"new_surface"`` (App. D.4).
      ordered: whether the question asks for an order (result comparison
        is order-sensitive only then).
    """

    task_id: str
    question: str
    env_id: str
    gold: str
    context: str
    attrs: Mapping[str, Any] = field(default_factory=dict)
    family: str = ""
    variant: str = "base"
    ordered: bool = False

    def __hash__(self) -> int:
        return hash(self.task_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and other.task_id == self.task_id


class SplitOverlapError(ValueError):
    """Raised when the held-out protocol (Eq. 14) would be violated."""


def check_disjoint(build: Iterable[Task], train: Iterable[Task], eval_: Iterable[Task]) -> None:
    """Enforce ``(T_build ∪ T_train) ∩ T_eval = ∅`` (papers/countermem.md Eq. 14).

    Build and train may share ids; both must exclude every evaluation id.

    Raises:
      SplitOverlapError: naming every overlapping task id.
    """
    seen = {t.task_id for t in build} | {t.task_id for t in train}
    overlap = sorted(seen & {t.task_id for t in eval_})
    if overlap:
        shown = ", ".join(overlap[:20]) + (" …" if len(overlap) > 20 else "")
        raise SplitOverlapError(
            f"held-out protocol violated (Eq. 14): {len(overlap)} task id(s) are in "
            f"T_build ∪ T_train and in T_eval: {shown}"
        )


@dataclass(frozen=True)
class Splits:
    """build / train / validation / eval splits; construction refuses overlap.

    ``val`` is the selector-validation subset drawn from T_train (App. C.2);
    it is part of ``train`` for Eq. 14 purposes.
    """

    build: Sequence[Task]
    train: Sequence[Task]
    val: Sequence[Task]
    eval: Sequence[Task]

    def __post_init__(self) -> None:
        check_disjoint(self.build, list(self.train) + list(self.val), self.eval)
        for name in ("build", "train", "val", "eval"):
            ids = [t.task_id for t in getattr(self, name)]
            if len(ids) != len(set(ids)):
                dup = sorted({i for i in ids if ids.count(i) > 1})
                raise ValueError(f"split {name!r} lists task ids more than once: {dup[:20]}")

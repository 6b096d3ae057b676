"""Cost accounting: tokens, evaluator calls and failed attempts (papers/countermem.md App. D.6).

A world-model call is one executable evaluation (counterfactual checks
included); a failed attempt is an evaluated action that does not meet the
task's success criterion; LLM-only proposals count tokens but no calls.
Each phase of a run (construct, train, val, eval) keeps its own ledger.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from cfjax.types import Outcome, Usage

__all__ = ["Costs", "Ledger"]


@dataclass
class Costs:
    """Counters for one scope (a task, a decision, a phase)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    llm_failed: int = 0  # LLM calls with no usable reply (counted failed attempts, never exceptions)
    eval_calls: int = 0
    failed: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add_llm(self, usage: Usage) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.llm_calls += 1
        self.llm_failed += usage.failed

    def add_eval(self, outcome: Outcome) -> None:
        self.eval_calls += 1
        self.failed += not outcome.solved

    def __iadd__(self, other: "Costs") -> "Costs":
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.llm_calls += other.llm_calls
        self.llm_failed += other.llm_failed
        self.eval_calls += other.eval_calls
        self.failed += other.failed
        return self

    def as_dict(self) -> dict[str, int]:
        return {"tokens": self.tokens, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "llm_calls": self.llm_calls,
                "llm_failed": self.llm_failed,
                "eval_calls": self.eval_calls, "failed": self.failed}


@dataclass
class Ledger:
    """Costs of one phase, in total and per task.

    ``verification`` holds the counterfactual checks and distillation of
    construction (a separate allowance from ordinary solving; both enter the
    totals, App. B.4)."""

    phase: str
    total: Costs = field(default_factory=Costs)
    verification: Costs = field(default_factory=Costs)
    per_task: dict[str, Costs] = field(default_factory=lambda: defaultdict(Costs))

    def llm(self, task_id: str, usage: Usage, *, verification: bool = False) -> None:
        self.total.add_llm(usage)
        self.per_task[task_id].add_llm(usage)
        if verification:
            self.verification.add_llm(usage)

    def evaluation(self, task_id: str, outcome: Outcome, *, verification: bool = False) -> None:
        self.total.add_eval(outcome)
        self.per_task[task_id].add_eval(outcome)
        if verification:
            self.verification.add_eval(outcome)

    def merge(self, other: "Ledger") -> None:
        """Add ``other``'s counts (ledgers of parallel episodes, merged in task order)."""
        self.total += other.total
        self.verification += other.verification
        for k, v in other.per_task.items():
            self.per_task[k] += v

    def as_dict(self) -> dict:
        return {"phase": self.phase, "total": self.total.as_dict(), "verification": self.verification.as_dict(),
                "tasks": len(self.per_task)}

"""UpliftMem's vocabulary: memories, executions, paired labels and the execution ledger.

papers/upliftmem.md §3.2 (Eq. 1), §4.1 (Eq. 4), App. A.4 (shared reference noise), App. D.3 (rollout
accounting); SPEC.md §2.1.

* :class:`Memory` — one self-contained experience unit ``m`` of the pool ``M_t``.
* :class:`SetExecutor` — the frozen executor: runs one task with a memory set ``S`` (``∅`` included)
  under a *draft seed* and returns an :class:`Execution` (performance ``R``, cost ``C``). The
  end-to-end domains implement it with the agent loop and a backbone
  (:class:`cfjax.uplift.executor.AgentExecutor`); the controlled MemSyco-like suite and the synthetic
  suite implement it directly.
* :func:`utility` — Eq. 1, ``U(τ) = R·[1 + γ·1[R ≥ ρ]·(1 − C/C_max)]``.
* :class:`Labeler` — every label is a *paired* execution ``y_S = U(τ_S) − U(τ_∅)`` with the same
  executor, task and draft seed (Eq. 4). The no-memory run of a (task, seed) is executed once and
  reused by every label that pairs with it; its id is the label's *reference id*, so labels that share
  it share ``ν_0²`` in ``Ω_Q`` (App. A.4). Every execution — reference, retrieved set, probe, writing
  validation — is recorded in the :class:`ExecutionLog` exactly once, whatever it is reused for
  (App. D.3): a (task, set, seed) executed before is read back, not run again, and not counted again.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from cfjax.config.uplift import UtilitySpec
from cfjax.infra.concurrency import ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.types import Attempt, Task

__all__ = ["Memory", "Execution", "SetExecutor", "UtilitySpec", "utility", "Label", "ExecutionLog", "Labeler",
           "set_key", "PURPOSES"]


@dataclass(frozen=True)
class Memory:
    """One memory of the pool (App. B.3: a selected, validated writer output).

    Attributes:
      mem_id: stable id (``"m12"``); the set key and the executor's citations use it.
      text: what the executor reads (rendered verbatim inside the memory block).
      tokens: injected-memory tokens of ``text`` (``C`` where the domain's cost is tokens).
      source_task: the task it was written from ("" for built-in stores).
      version: 0 for a first version; a writer update of ``supersedes`` has a higher one.
      supersedes: the id of the memory this one updates (its *outdated* version), or ``None``.
      meta: free, agent-visible metadata (e.g. the writer's type); never an answer key.
    """

    mem_id: str
    text: str
    tokens: int
    source_task: str = ""
    version: int = 0
    supersedes: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Execution:
    """One execution of the frozen executor on one task with one memory set.

    Attributes:
      R: performance ``R(τ)`` in ``[0, 1]`` (the world's score of the final action).
      solved: the task's success criterion holds at the end.
      attempts: evaluated attempts (one of the two cost measures ``C(τ)``, :class:`UtilitySpec`).
      memory_tokens: tokens of the injected memory block, 0 for ``∅`` (the other cost measure).
      trajectory: the attempts (action, feedback, score) — what a writer may read.
      llm_tokens: backbone tokens charged by this execution.
      llm_calls: backbone calls charged by this execution.
      eval_calls: evaluator calls charged by this execution.
      info: analysis-side measurements the world computes (e.g. MemSyco's ``sycophantic``,
        ``used_outdated``); never shown to agent-side code.
    """

    R: float
    solved: bool
    attempts: int = 1
    memory_tokens: int = 0
    trajectory: tuple[Attempt, ...] = ()
    llm_tokens: int = 0
    llm_calls: int = 0
    eval_calls: int = 0
    info: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class SetExecutor(Protocol):
    """The frozen executor (§3.1): runs ``task`` with the memory set ``memories`` (may be empty).

    ``seed`` is the *draft seed*: two executions of the same task with the same seed share every
    random draw that does not depend on the memories (common random numbers — the pairing of Eq. 4).
    Implementations charge what they call to ``ledger`` (once per call).
    """

    def execute(self, task: Task, memories: Sequence[Memory], *, seed: int, ledger: Ledger) -> Execution: ...


def utility(R: float, C: float, spec: UtilitySpec) -> float:
    """Eq. 1: ``U(τ) = R·[1 + γ·1[R ≥ ρ]·(1 − C/C_max)]`` (``C`` clipped to ``[0, C_max]``)."""
    if not math.isfinite(R) or not math.isfinite(C):
        raise ValueError(f"utility needs finite R and C, got R={R}, C={C}")
    c = min(max(C, 0.0), spec.c_max)
    bonus = spec.gamma * (1.0 - c / spec.c_max) if R >= spec.rho else 0.0
    return float(R * (1.0 + bonus))


def set_key(memories: Sequence[Memory] | Sequence[str]) -> tuple[str, ...]:
    """Members, order-free: the sorted ids (B.1: sets are identified by their members)."""
    ids = [m.mem_id if isinstance(m, Memory) else str(m) for m in memories]
    if len(set(ids)) != len(ids):
        raise ValueError(f"a memory set may not repeat a memory: {ids}")
    return tuple(sorted(ids))


#: why an execution was run (one per execution: its *first* purpose; reuse is recorded separately)
PURPOSES = ("reference", "retrieved", "probe", "writing", "bootstrap", "eval")


@dataclass(frozen=True)
class Label:
    """One paired uplift observation ``y_S = U(τ_S) − U(τ_∅)`` (Eq. 4).

    Attributes:
      task_id: the task ``c``.
      members: sorted memory ids of ``S`` (non-empty).
      y: the label.
      ref_id: id of the shared no-memory execution (labels with equal ``ref_id`` share ``ν_0²``).
      seed: the draft seed of both executions.
      kind: ``"retrieved"``, ``"probe"``, ``"writing"`` or ``"bootstrap"``.
      u_set, u_ref: the two utilities.
    """

    task_id: str
    members: tuple[str, ...]
    y: float
    ref_id: int
    seed: int
    kind: str
    u_set: float
    u_ref: float


@dataclass
class ExecutionLog:
    """Every execution once (App. D.3), keyed by ``(task, members, seed)``.

    ``runs[i]`` is execution ``i``; ``purpose[i]`` why it was first run; ``reuses`` counts later
    requests for an execution already run (read back, not re-run, not re-counted).
    """

    runs: list[Execution] = field(default_factory=list)
    keys: list[tuple[str, tuple[str, ...], int]] = field(default_factory=list)
    purpose: list[str] = field(default_factory=list)
    index: dict[tuple[str, tuple[str, ...], int], int] = field(default_factory=dict)
    reuses: Counter = field(default_factory=Counter)

    def get(self, key: tuple[str, tuple[str, ...], int]) -> int | None:
        return self.index.get(key)

    def add(self, key: tuple[str, tuple[str, ...], int], run: Execution, purpose: str) -> int:
        if key in self.index:
            raise ValueError(f"execution {key} is already in the log (App. D.3: each execution once)")
        if purpose not in PURPOSES:
            raise ValueError(f"unknown purpose {purpose!r}; choose from {PURPOSES}")
        self.index[key] = len(self.runs)
        self.runs.append(run)
        self.keys.append(key)
        self.purpose.append(purpose)
        return self.index[key]

    def counts(self) -> dict[str, int]:
        """Executions by first purpose, plus ``total``, ``reused`` and the charged backbone/evaluator
        calls and tokens (each execution's costs once)."""
        c = Counter(self.purpose)
        out = {p: int(c.get(p, 0)) for p in PURPOSES}
        out["total"] = len(self.runs)
        out["reused"] = int(sum(self.reuses.values()))
        out["llm_calls"] = int(sum(r.llm_calls for r in self.runs))
        out["llm_tokens"] = int(sum(r.llm_tokens for r in self.runs))
        out["eval_calls"] = int(sum(r.eval_calls for r in self.runs))
        return out


class Labeler:
    """Paired labels over one :class:`SetExecutor` with one :class:`ExecutionLog` (module docstring).

    Args:
      executor: the frozen executor.
      spec: Eq. 1's constants of the domain.
      ledger: where executions charge their calls (once each).
      log: the execution log (a fresh one by default).
    """

    def __init__(self, executor: SetExecutor, spec: UtilitySpec, ledger: Ledger | None = None,
                 log: ExecutionLog | None = None) -> None:
        self.executor = executor
        self.spec = spec
        self.ledger = ledger if ledger is not None else Ledger("uplift")
        self.log = log if log is not None else ExecutionLog()

    def cost(self, run: Execution) -> float:
        """``C(τ)`` in the domain's unit (:attr:`UtilitySpec.cost`)."""
        return float(run.attempts if self.spec.cost == "attempts" else run.memory_tokens)

    def utility_of(self, run: Execution) -> float:
        return utility(run.R, self.cost(run), self.spec)

    def run(self, task: Task, memories: Sequence[Memory], *, seed: int, purpose: str) -> tuple[int, Execution]:
        """Execute once (or read back); returns ``(execution id, execution)``."""
        key = (task.task_id, set_key(memories), int(seed))
        i = self.log.get(key)
        if i is not None:
            self.log.reuses[purpose] += 1
            return i, self.log.runs[i]
        ex = self.executor.execute(task, list(memories), seed=int(seed), ledger=self.ledger)
        return self.log.add(key, ex, purpose), ex

    def run_many(self, items: Sequence[tuple[Task, Sequence[Memory]]], *, seed: int, purpose: str,
                 workers: int = 1) -> list[tuple[int, Execution]]:
        """:meth:`run` for every ``(task, memories)`` in ``items``, the missing executions on up to
        ``workers`` threads.

        Identical to running them one by one in ``items`` order: requests already in the log (or
        repeated within ``items``) are read back, each new execution runs once with its own ledger,
        and executions enter the log — and their costs the ledger — in ``items`` order, so ids and
        counts do not depend on which thread finished first."""
        keys = [(t.task_id, set_key(m), int(seed)) for t, m in items]
        todo: dict[tuple[str, tuple[str, ...], int], int] = {}
        for j, k in enumerate(keys):
            if self.log.get(k) is None and k not in todo:
                todo[k] = j

        def execute(j: int) -> tuple[Execution, Ledger]:
            led = Ledger(self.ledger.phase)
            task, mems = items[j]
            return self.executor.execute(task, list(mems), seed=int(seed), ledger=led), led

        ran = dict(zip(todo, ordered_map(execute, list(todo.values()), workers)))
        out: list[tuple[int, Execution]] = []
        for k in keys:
            i = self.log.get(k)
            if i is not None:
                self.log.reuses[purpose] += 1
                out.append((i, self.log.runs[i]))
                continue
            ex, led = ran[k]
            self.ledger.merge(led)
            out.append((self.log.add(k, ex, purpose), ex))
        return out

    def reference(self, task: Task, *, seed: int) -> tuple[int, Execution]:
        """The no-memory execution of ``(task, seed)`` — run once, shared by every label pairing with it."""
        return self.run(task, (), seed=seed, purpose="reference")

    def label(self, task: Task, memories: Sequence[Memory], *, seed: int, kind: str) -> tuple[Label, Execution]:
        """``y_S = U(τ_S) − U(τ_∅)`` with the same executor, task and draft seed (Eq. 4)."""
        if not memories:
            raise ValueError("a label needs a non-empty memory set (G(c, ∅) = 0 by definition)")
        ref_id, ref = self.reference(task, seed=seed)
        _, ex = self.run(task, memories, seed=seed, purpose=kind)
        u_s, u_0 = self.utility_of(ex), self.utility_of(ref)
        return Label(task.task_id, set_key(memories), u_s - u_0, ref_id, int(seed), kind, u_s, u_0), ex

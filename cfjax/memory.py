"""What a memory design needs from the one agent loop: the ``MemorySystem`` protocol and its plugins.

A memory system is one folder plus one registration (shared/DESIGN.md). It implements
:class:`MemorySystem` — build from experience, recall for a decision, update after an episode (refused
while frozen), save and load — and registers a :class:`MemorySystemInfo` in
:data:`cfjax.registry.MEMORY_SYSTEMS`. Every runner whose protocol it fits then offers it as a row:

* ``countermem run`` (papers/countermem.md Algorithm 1, App. D.3): the system is **built** from the
  memory-free episodes of T_build (one :class:`Experience` per source task), **frozen**, and evaluated
  on T_eval paired with ``none``;
* ``antipersist run`` (papers/anti-persistence.md §4.1): K iterations; after every training task the
  system is **updated** with that episode; it is frozen for each held-out pass;
* ``compare``: as in ``countermem run``, on the shared held-out tasks and cost ledger.

In the loop (:func:`recall_episode`), the system's recall for the current decision — the task, its
earlier attempts and the memory-free draft — is shown to the backbone with the draft
(REVISE_WITH_RECORD, ``show="revise"``) or before drafting (``DraftRequest.memory``, ``show="draft"``);
no recall means the draft is evaluated as it is. The reuse label of Eq. 6 is measured against an
off-ledger check of the draft, as for every memory row. A system never sees an answer key: its inputs
are the task, its own attempts and the evaluator's feedback.
"""

from __future__ import annotations

from concurrent.futures import Executor

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cfjax.infra.concurrency import ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.llm.calls import REVISE_WITH_RECORD
from cfjax.loop import (AfterResult, Consultation, Decision, DraftFn, Episode, Proposal, draft_once, reuse_label,
                        run_episode)
from cfjax.types import Attempt, Backbone, EditModel, MemoryText, Outcome, ReviseRequest, Task, World

__all__ = ["Experience", "RecallQuery", "MemorySystem", "FixedStore", "MemorySystemInfo", "SystemContext", "FrozenMemoryError",
           "RUNNERS", "experience_of", "recall_episode", "build_experience", "rollout_fn", "why_not"]

#: the runners a memory system may declare it fits (``MemorySystemInfo.runners``)
RUNNERS = ("countermem", "antipersist", "compare", "upliftmem")


class FrozenMemoryError(RuntimeError):
    """An update was attempted while the memory is frozen (held-out evaluation, Algorithm 1 line 27)."""


@dataclass(frozen=True)
class Experience:
    """One finished episode as a memory system may learn from it: the task as the agent saw it, its
    attempts with the evaluator's feedback and scores, and whether it was solved."""

    task: Task
    attempts: tuple[Attempt, ...]
    solved: bool
    episode: int  # the episode id the attempts were drawn under (seeds the system's own calls)


@dataclass(frozen=True)
class RecallQuery:
    """One decision: the task, its earlier attempts and (``show="revise"``) the memory-free draft."""

    task: Task
    history: tuple[Attempt, ...]
    draft: str | None
    episode: int
    attempt: int
    #: the evaluation ledger of this episode: a system whose recall calls the backbone (a tool loop, query
    #: rewrites) charges those calls here, so they count as evaluation cost (``None``: the system's own)
    ledger: Ledger | None = None


@dataclass(frozen=True)
class SystemContext:
    """What a memory system is built with: the backbone it may call (and the ledger its calls are
    charged to), the domain's edit model, the attempt limit and a seed."""

    backbone: Backbone
    edits: EditModel
    max_attempts: int
    seed: int = 0
    ledger: Ledger = field(default_factory=lambda: Ledger("memory"))
    #: ``(task, episode) → Experience``: one more memory-free rollout of a source task through the agent
    #: loop, charged to :attr:`ledger` (systems that scale compute at build time, e.g. ReasoningBank's
    #: MaTTS; ``None`` where the runner offers none)
    rollout: Callable[[Task, int], Experience] | None = None


@runtime_checkable
class MemorySystem(Protocol):
    """A memory design as the one agent loop drives it (module docstring)."""

    frozen: bool

    def build(self, experience: Sequence[Experience]) -> None:
        """Construct memory from finished episodes (trajectories, outcomes, evaluator feedback)."""
        ...

    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The memory to show for this decision, or ``None`` (the draft is used as it is)."""
        ...

    def update(self, experience: Experience) -> None:
        """Learn from one more finished episode. Raises :class:`FrozenMemoryError` while frozen."""
        ...

    def freeze(self) -> None: ...

    def unfreeze(self) -> None: ...

    def save(self, path: Path) -> None:
        """Write the memory to ``path`` (atomically; nothing half-written)."""
        ...

    def load(self, path: Path) -> None:
        """Replace the memory with what :meth:`save` wrote (a bad file is one clear error)."""
        ...

    def summary(self) -> dict:
        """Counts for reports (``{"lessons": 12}``)."""
        ...


@runtime_checkable
class FixedStore(Protocol):
    """A memory system whose frozen store can be handed to another retriever (the MemSyco fixed-store
    protocol, UpliftMem §5.3 / Table 3: each system builds its store with its own pipeline, the store is
    frozen, then its *native* retrieval and UpliftMem's retrieval are compared on the same items).

    ``export_items`` lists every stored item as ``(id, text)`` exactly as :meth:`MemorySystem.recall`
    shows it in a memory set (the same id, the same text); ``native`` is the system's own retrieval for
    one decision with a budget of ``k`` items: the ids it would show, in its order (possibly fewer)."""

    def export_items(self) -> list[tuple[str, str]]: ...

    def native(self, query: RecallQuery, k: int) -> list[str]: ...


@dataclass(frozen=True)
class MemorySystemInfo:
    """A registered memory system (:data:`cfjax.registry.MEMORY_SYSTEMS`).

    Attributes:
      name: its row name in every runner (``--rows``) and its method name in ``compare``.
      make: ``SystemContext → MemorySystem`` (a fresh, empty, unfrozen system).
      show: where recall is shown: ``"revise"`` (with the draft, REVISE_WITH_RECORD) or ``"draft"``
        (before drafting, ``DraftRequest.memory``).
      runners: the runners whose protocol it fits (:data:`RUNNERS`); the others say why it cannot run.
      table: the table its row belongs to in each runner's report (``"table1"`` for CounterMem's
        Table 1 of memory mechanisms).
      reference: what its row is paired against (``"none"``).
      why_not: ``runner → reason`` for each runner it does not fit (printed in that runner's report).
      description: one line for ``--rows`` help.
      paper: where it comes from (cited in reports and docs).
      defaults: the runners whose *default* rows include it — those whose paper compares against it
        (``None``: every runner in ``runners``); in the others of ``runners`` it runs when named
        (``--rows``, ``--methods``). ``countermem run --rows all`` runs every system registered for it.
    """

    name: str
    make: Callable[[SystemContext], MemorySystem]
    show: str = "revise"
    runners: tuple[str, ...] = ("countermem", "antipersist", "compare")
    table: str = "table1"
    reference: str = "none"
    why_not: Any = field(default_factory=dict)
    description: str = ""
    paper: str = ""
    defaults: tuple[str, ...] | None = None

    def default_in(self, runner: str) -> bool:
        """Whether ``runner``'s default rows include this system (:attr:`defaults`)."""
        return runner in self.runners and (self.defaults is None or runner in self.defaults)

    def __post_init__(self) -> None:
        if self.show not in ("revise", "draft"):
            raise ValueError(f"MemorySystemInfo.show must be 'revise' or 'draft', got {self.show!r}")
        bad = [r for r in self.runners if r not in RUNNERS]
        if bad:
            raise ValueError(f"MemorySystemInfo.runners: unknown runner(s) {bad} (known: {', '.join(RUNNERS)})")


#: why a memory system that does not declare a runner cannot be one of its rows (``why_not``)
_RUNNER_PROTOCOL = {
    "upliftmem": "UpliftMem's end-to-end table pairs executions of the frozen executor shown memory *sets* "
                 "(App. D.5) and its rows are switches of UpliftMem's own trainer (Table 2)",
    "countermem": "countermem run builds a system from T_build's memory-free episodes and evaluates it frozen",
    "antipersist": "antipersist run updates a system after every training task and freezes it for held-out passes",
    "compare": "compare builds a system on T_build and evaluates it on the shared held-out tasks",
}


def why_not(info: MemorySystemInfo, runner: str) -> str:
    """One line saying why ``info`` is not a row of ``runner`` (its own reason, else the runner's protocol)."""
    own = dict(info.why_not).get(runner)
    if runner in info.runners:
        return f"{info.name} is a row of {runner}"
    where = ", ".join(info.runners) or "no runner"
    return (f"memory system {info.name!r} is not a row of {runner}: {own or _RUNNER_PROTOCOL.get(runner, runner)}; "
            f"{info.name} declares it fits {where}"
            + (" (cfjax compare --methods " + info.name + ")" if "compare" in info.runners else ""))


def experience_of(ep: Episode, episode: int) -> Experience:
    """An :class:`~cfjax.loop.Episode` of the loop as :class:`Experience` (attempts in order)."""
    return Experience(ep.task, tuple(Attempt(d.action, d.feedback, d.score) for d in ep.decisions), ep.solved,
                      episode)


def rollout_fn(*, backbone: Backbone, world: World, edits: EditModel, ledger: Ledger,
               max_attempts: int) -> Callable[[Task, int], Experience]:
    """The :attr:`SystemContext.rollout` of a runner: one memory-free episode of a task, charged to
    ``ledger`` (thread-safe: each episode charges its own ledger, merged under a lock)."""
    import threading

    lock = threading.Lock()

    def rollout(task: Task, episode: int) -> Experience:
        led = Ledger(ledger.phase)
        ep = run_episode(task, world=world, edits=edits, ledger=led, episode=episode, max_attempts=max_attempts,
                         draft=draft_once(backbone))
        with lock:
            ledger.merge(led)
        return experience_of(ep, episode)

    return rollout


def build_experience(tasks: Sequence[Task], *, backbone: Backbone, world: World, edits: EditModel, ledger: Ledger,
                     episode0: int, max_attempts: int, pool: Executor | None = None) -> list[Experience]:
    """Memory-free episodes of ``tasks`` (episode ids ``episode0 + i``), the experience a system is
    built from in ``countermem run`` (each attempt and evaluation charged to ``ledger``).

    The episodes are independent (no memory, each seeded by its task and episode id), so with
    ``pool`` they run at once; the experience and the ledger are the same (merged in task order)."""

    def one(i: int) -> tuple[Experience, Ledger]:
        led = Ledger(ledger.phase)
        ep = run_episode(tasks[i], world=world, edits=edits, ledger=led, episode=episode0 + i,
                         max_attempts=max_attempts, draft=draft_once(backbone))
        return experience_of(ep, episode0 + i), led

    done = ordered_map(one, range(len(tasks)), pool=pool)
    for _, led in done:
        ledger.merge(led)
    return [exp for exp, _ in done]


def recall_episode(task: Task, system: MemorySystem, info: MemorySystemInfo, *, backbone: Backbone, world: World,
                   edits: EditModel, ledger: Ledger, episode: int, max_attempts: int,
                   draft: DraftFn | None = None, measure: bool = True) -> Episode:
    """One task through the one agent loop with ``system``'s recall at every decision (module docstring).

    ``measure``: label each memory use with Eq. 6 against an off-ledger check of the draft (analysis)."""
    if info.show == "draft":
        def draft_with_memory(task: Task, history: Sequence[Attempt], *, episode: int, attempt: int,
                              ledger: Ledger) -> Proposal:
            mem = system.recall(RecallQuery(task, tuple(history), None, episode, attempt, ledger))
            prop = draft_once(backbone, memory=mem)(task, history, episode=episode, attempt=attempt, ledger=ledger)
            return prop

        return run_episode(task, world=world, edits=edits, ledger=ledger, episode=episode, max_attempts=max_attempts,
                           draft=draft_with_memory)

    def consult(task: Task, history: Sequence[Attempt], proposal: Proposal, *, episode: int, attempt: int,
                tokens_so_far: int, ledger: Ledger) -> Consultation:
        mem = system.recall(RecallQuery(task, tuple(history), proposal.draft, episode, attempt, ledger))
        if mem is None:
            return Consultation(proposal.draft)
        rv = backbone.call(REVISE_WITH_RECORD, ReviseRequest(task, tuple(history), proposal.draft, mem, episode))
        ledger.llm(task.task_id, rv.usage)
        return Consultation(rv.action, used=True, slot=1, n_retrieved=1, tokens=rv.usage.total,
                            memory_tokens=rv.usage.total)

    def after(task: Task, history: Sequence[Attempt], d: Decision, out: Outcome, **_: Any) -> AfterResult | None:
        if d.slot == 0 or not measure:
            return None
        ref = float(world.evaluate(task, d.draft).score) if d.changed else None  # measurement, off the ledger
        return AfterResult(label=reuse_label(d.changed, out.solved, out.score, ref), reference=ref)

    return run_episode(task, world=world, edits=edits, ledger=ledger, episode=episode, max_attempts=max_attempts,
                       draft=draft or draft_once(backbone), consult=consult, after=after)

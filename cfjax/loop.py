"""The one agent loop every method and row runs: draft → consult memory → evaluate → after.

papers/countermem.md §3.4 and App. C.1 (Module III), App. D.5 (Best-of-N,
ExpeL), §6.1 (WM without CF); papers/anti-persistence.md §3.2 (the executor
under guidance). One episode is one task; each decision is one evaluated
attempt; the episode ends at the first solved attempt or after
``max_attempts``.

The loop is written once; what differs between rows is *injected*, in the
spirit of mctx's ``search(params, rng_key, *, root, recurrent_fn,
root_action_selection_fn, ...)``:

* ``draft`` (:class:`DraftFn`) — how the attempt's action is proposed:
  one memory-free draft (:func:`draft_once`), a draft under shown memory
  (``memory=`` of :func:`draft_once`, Anti-Persistence), or N drafts and a
  judge (:func:`best_of_n`);
* ``consult`` (:class:`ConsultFn`) — whether and how memory revises the
  draft: :func:`no_memory`, CounterMem's retrieve → select → revise
  (:meth:`cfjax.countermem.agent.Agent.consult`), ExpeL's top-1 lesson;
* ``after`` (:class:`AfterFn`) — what happens once the action is evaluated:
  the reuse label of Eq. 6, Modules I–II expansion of a failure, the
  within-task checks of WM-without-CF.

Every backbone and evaluator call goes through the caller's
:class:`~cfjax.infra.ledger.Ledger` exactly once (the behaviours charge what
they call; the loop charges the attempt's evaluation).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cfjax.infra.concurrency import ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.llm.calls import BEST_OF_N_JUDGE, DRAFT_ACTION
from cfjax.types import (Attempt, Backbone, DraftRequest, EditModel, JudgeRequest, MemoryText, Outcome, Task,
                         World)

__all__ = ["DraftPrefetch", "Decision", "Episode", "Proposal", "Consultation", "AfterResult", "DraftFn", "ConsultFn", "AfterFn",
           "run_episode", "draft_once", "best_of_n", "no_memory", "JudgeLog", "reuse_label"]


@dataclass
class Decision:
    """One decision of an episode with its costs (the Eq. 10 increments)."""

    task_id: str
    attempt: int
    draft: str
    action: str
    slot: int  # 0 = skip / no memory, j ≥ 1 = the j-th offered piece of memory
    record_id: int | None
    n_retrieved: int
    changed: bool  # memory changed the action (canonical forms differ)
    score: float
    solved: bool
    tokens: int
    calls: int  # evaluator calls charged to this decision
    failed: int
    memory_tokens: int = 0  # tokens of the call that read memory (retrieval + context, Fig. 2b)
    label: int | None = None  # reuse label (Eq. 6) when memory was used
    reference_score: float | None = None
    obs: np.ndarray | None = None  # f32[98] selector observation (CounterMem)
    mask: np.ndarray | None = None  # bool[5] valid selector actions (CounterMem)
    applied: tuple[str, ...] = ()  # guidance rules the backbone says it followed
    feedback: str = ""  # what the evaluator said of the (final) action


@dataclass
class Episode:
    task: Task
    decisions: list[Decision] = field(default_factory=list)
    expansions: list[Any] = field(default_factory=list)  # what ``after`` produced (e.g. Module I expansions)

    @property
    def solved(self) -> bool:
        return bool(self.decisions) and self.decisions[-1].solved


@dataclass
class Proposal:
    """What a :class:`DraftFn` returns: the memory-free draft and the action it proposes."""

    draft: str
    tokens: int
    action: str | None = None  # None → the draft itself (Best-of-N: the judged candidate)
    applied: tuple[str, ...] = ()


@dataclass
class Consultation:
    """What a :class:`ConsultFn` returns: the action after memory, and what memory was offered."""

    action: str
    used: bool = False  # a piece of memory was shown to the backbone
    slot: int = 0
    record_id: int | None = None
    n_retrieved: int = 0
    tokens: int = 0
    memory_tokens: int = 0
    obs: np.ndarray | None = None
    mask: np.ndarray | None = None


@dataclass
class AfterResult:
    """What an :class:`AfterFn` may change once the attempt is evaluated."""

    outcome: Outcome | None = None  # replaces the attempt's outcome (WM-without-CF's solving check)
    action: str | None = None
    changed: bool | None = None
    calls: int = 0  # extra evaluator calls charged to this decision
    tokens: int = 0
    label: int | None = None
    reference: float | None = None
    extra_history: Sequence[Attempt] = ()  # attempts the next draft also sees
    expansion: Any = None


class DraftFn(Protocol):
    def __call__(self, task: Task, history: Sequence[Attempt], *, episode: int, attempt: int,
                 ledger: Ledger) -> Proposal: ...


class ConsultFn(Protocol):
    def __call__(self, task: Task, history: Sequence[Attempt], proposal: Proposal, *, episode: int, attempt: int,
                 tokens_so_far: int, ledger: Ledger) -> Consultation: ...


class AfterFn(Protocol):
    def __call__(self, task: Task, history: Sequence[Attempt], decision: Decision, outcome: Outcome, *,
                 episode: int, ledger: Ledger) -> AfterResult | None: ...


def reuse_label(changed: bool, solved: bool, score: float, reference: float | None) -> int:
    """The reuse label y of Eq. 6 (App. B.3), relative to the memory-free draft.

    Unchanged from the draft → 0; changed and solved → +1; otherwise the sign
    of the utility change against the reference attempt, or 0 without one.
    """
    if not changed:
        return 0
    if solved:
        return 1
    if reference is None:
        return 0
    d = score - reference
    return 1 if d > 1e-9 else (-1 if d < -1e-9 else 0)


def no_memory(task: Task, history: Sequence[Attempt], proposal: Proposal, **_: Any) -> Consultation:
    """The ``none`` row: the proposed action is evaluated as it is."""
    return Consultation(proposal.action if proposal.action is not None else proposal.draft)


class DraftPrefetch:
    """First drafts requested ahead of a sequential loop (issue 23: prefetch what does not depend on
    memory).

    A memory-free first draft ``DRAFT_ACTION(task, no history, episode)`` depends on the task and the
    episode id only — not on the store, the selector or any other episode — so a loop that knows its
    next episodes (memory construction, selector training) can have them requested at once on
    ``pool`` while it works through the episodes in order; the episode's own draft call then takes
    the reply (:func:`draft_once` with ``prefetch``) instead of sending it again. The reply and its
    usage are exactly what the call would have returned; the ledger charges them once, when the
    episode takes them. Callers request only drafts their loop is certain to take (an unused reply
    would be a server call nobody is charged for): :attr:`unused` counts any left at :meth:`close`.
    """

    def __init__(self, backbone: Backbone, pool: Executor) -> None:
        self.backbone = backbone
        self.pool = pool
        self._futs: dict[tuple[str, int], Future] = {}
        self._lock = threading.Lock()
        self.taken = 0
        self.unused = 0

    def ahead(self, items: Iterable[tuple[Task, int]]) -> None:
        """Request the first draft of each ``(task, episode)`` not yet requested."""
        for task, episode in items:
            key = (task.task_id, episode)
            with self._lock:
                if key in self._futs:
                    continue
                self._futs[key] = self.pool.submit(self.backbone.call, DRAFT_ACTION, DraftRequest(task, (), episode))

    def take(self, task: Task, episode: int):
        """The requested reply for ``(task, episode)`` (waiting for it), or ``None`` if none was requested."""
        with self._lock:
            fut = self._futs.pop((task.task_id, episode), None)
        if fut is None:
            return None
        self.taken += 1
        return fut.result()

    def close(self) -> None:
        """Wait for what is still in flight; count it as :attr:`unused`."""
        with self._lock:
            left, self._futs = list(self._futs.values()), {}
        for f in left:
            f.result()
        self.unused += len(left)


def draft_once(backbone: Backbone, memory: MemoryText | None = None, prefetch: DraftPrefetch | None = None) -> DraftFn:
    """One DRAFT_ACTION call per attempt, optionally with memory shown before drafting; a first
    memory-free draft comes from ``prefetch`` when it was requested there (the same reply)."""

    def draft(task: Task, history: Sequence[Attempt], *, episode: int, attempt: int, ledger: Ledger) -> Proposal:
        dr = None
        if prefetch is not None and memory is None and not history:
            dr = prefetch.take(task, episode)
        if dr is None:
            dr = backbone.call(DRAFT_ACTION, DraftRequest(task, tuple(history), episode, memory=memory))
        ledger.llm(task.task_id, dr.usage)
        return Proposal(dr.action, dr.usage.total, applied=dr.applied)

    return draft


@dataclass
class JudgeLog:
    """How often the Best-of-N judge's reply did not parse (fallback to candidate 1).

    Safe to share between the threads of a concurrent evaluation (:meth:`note`)."""

    calls: int = 0
    parse_failures: int = 0
    failed_replies: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def note(self, parsed: bool, raw: str) -> None:
        with self._lock:
            self.calls += 1
            if not parsed:
                self.parse_failures += 1
                if len(self.failed_replies) < 20:
                    self.failed_replies.append(raw[:200])


def best_of_n(backbone: Backbone, n: int, judge_log: JudgeLog | None = None, *, workers: int = 1) -> DraftFn:
    """App. D.5: N independent drafts, a backbone judge picks one without executing any
    (a parse failure falls back to candidate 1 and is logged).

    The N drafts are independent (each has its own ``sample`` index), so with ``workers > 1`` they
    are requested concurrently; candidates and ledger entries keep sample order either way."""

    def draft(task: Task, history: Sequence[Attempt], *, episode: int, attempt: int, ledger: Ledger) -> Proposal:
        hist = tuple(history)
        drafts = ordered_map(lambda j: backbone.call(DRAFT_ACTION, DraftRequest(task, hist, episode, sample=j)),
                             range(n), min(workers, n))
        tokens = 0
        cands = []
        for dr in drafts:
            ledger.llm(task.task_id, dr.usage)
            tokens += dr.usage.total
            cands.append(dr.action)
        jr = backbone.call(BEST_OF_N_JUDGE, JudgeRequest(task, hist, tuple(cands), episode))
        ledger.llm(task.task_id, jr.usage)
        tokens += jr.usage.total
        if judge_log is not None:
            judge_log.note(jr.parsed, jr.raw)
        return Proposal(cands[0], tokens, action=cands[jr.choice])

    return draft


def run_episode(task: Task, *, world: World, edits: EditModel, ledger: Ledger, episode: int, max_attempts: int,
                draft: DraftFn, consult: ConsultFn = no_memory, after: AfterFn | None = None,
                on_decision: Callable[[Decision], None] | None = None) -> Episode:
    """Solve ``task`` once with the injected behaviours (module docstring).

    Args:
      world: the evaluator; every attempt is one charged evaluation.
      edits: the domain's edit model (``changed`` compares canonical forms).
      max_attempts: evaluated attempts at most.
    """
    ep = Episode(task)
    history: list[Attempt] = []
    tokens_so_far = 0
    for attempt in range(max_attempts):
        prop = draft(task, history, episode=episode, attempt=attempt, ledger=ledger)
        con = consult(task, history, prop, episode=episode, attempt=attempt, tokens_so_far=tokens_so_far,
                      ledger=ledger)
        out = world.evaluate(task, con.action)
        ledger.evaluation(task.task_id, out)
        changed = con.used and edits.normalize(con.action) != edits.normalize(prop.draft)
        tokens = prop.tokens + con.tokens
        d = Decision(task.task_id, attempt, prop.draft, con.action, con.slot, con.record_id, con.n_retrieved, changed,
                     float(out.score), bool(out.solved), tokens, 1, int(not out.solved), con.memory_tokens,
                     obs=con.obs, mask=con.mask, applied=prop.applied, feedback=out.feedback)
        extra: Sequence[Attempt] = ()
        if after is not None:
            res = after(task, history, d, out, episode=episode, ledger=ledger)
            if res is not None:
                if res.outcome is not None:
                    out = res.outcome
                    d.score, d.solved, d.failed = float(out.score), bool(out.solved), int(not out.solved)
                    d.feedback = out.feedback
                if res.action is not None:
                    d.action = res.action
                if res.changed is not None:
                    d.changed = res.changed
                d.calls += res.calls
                d.tokens += res.tokens
                d.label, d.reference_score = res.label, res.reference
                extra = res.extra_history
                if res.expansion is not None:
                    ep.expansions.append(res.expansion)
        tokens_so_far += d.tokens
        ep.decisions.append(d)
        if on_decision is not None:
            on_decision(d)
        if d.solved:
            break
        history.append(Attempt(d.action, out.feedback, float(out.score)))
        history.extend(extra)
    return ep

"""Anti-Persistence inside your own agent loop: guidance on demand, discarded after use.

The experiments run the paper's iteration protocol (:func:`cfjax.antipersist.protocol.run_method`).
An agent of your own needs its two steps per episode, on your tasks; :class:`GuidanceAgent` wraps
the real pieces for that (papers/anti-persistence.md §3.2, App. B):

* :meth:`GuidanceAgent.guidance` — *before* an episode: the KNN-UCB selector picks a synthesis mode
  from the outcome log (Eq. 3 with round-robin, the W_init warm-up, ε-greedy and the ρ fallback;
  ``explore=False``: the frozen greedy choice of held-out evaluation), the mode's records are
  retrieved from the trajectory memory (type-filtered, App. B.3) and the guidance is synthesized
  now (:func:`~cfjax.antipersist.protocol.task_memory`). You get it as the
  :class:`~cfjax.types.MemoryText` to show your model (``DraftRequest(task, memory=...)``); the
  :class:`~cfjax.antipersist.guidance.Guidance` object itself is never kept.
* :meth:`GuidanceAgent.record` — *after* the episode: the trajectory (your attempts, the
  evaluator's feedback, the outcome, with the ids of the guidance in context as provenance) joins
  the trajectory memory and the outcome ``(task, mode, reward = clip(y − λκ, −1, 1))`` is appended
  to the log — the only two things that persist.

The selector's schedule counts recorded episodes: episode ``n`` is position
``n mod tasks_per_iteration`` of iteration ``n // tasks_per_iteration`` (``APConfig``), so round-robin
covers the first ``bandit.rr_iterations × tasks_per_iteration`` episodes, as in the protocol.

>>> agent = GuidanceAgent(edits, "outcomes.jsonl")                       # doctest: +SKIP
>>> memory = agent.guidance(task)                                        # doctest: +SKIP
>>> ... your model drafts with memory, your evaluator checks ...          # doctest: +SKIP
>>> agent.record(task, attempts, outcome)                                # doctest: +SKIP

The outcome log is an append-only JSONL file (:class:`~cfjax.antipersist.outcome_log.OutcomeLog`):
an existing file is read and extended. Trajectories live in memory (:meth:`GuidanceAgent.save`
writes them). README.md ("Anti-Persistence in your own agent loop") has a complete example.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cfjax.antipersist.guidance import Attempt as TrajectoryAttempt
from cfjax.antipersist.guidance import Trajectory
from cfjax.antipersist.memory import FrozenMemoryError, TrajectoryMemory
from cfjax.antipersist.outcome_log import OutcomeLog, next_capacity
from cfjax.antipersist.protocol import MethodState, _learn, _select, make_selector, new_state, task_memory
from cfjax.config.antipersist import APConfig
from cfjax.types import EditModel, MemoryText, Outcome, Task

__all__ = ["GuidanceAgent", "Choice"]

#: the protocol row whose behaviour the agent has (KNN-UCB mode, trajectories kept, guidance discarded)
_ROW = "anti_persistence"


class Choice(NamedTuple):
    """What :meth:`GuidanceAgent.guidance` decided for a task (metadata only: no guidance text)."""

    mode: str  # the synthesis mode (cfjax.antipersist.MODES)
    branch: str | None  # the selector branch that chose it (round_robin, warmup, epsilon, fallback, knn_ucb, knn_greedy)
    synth_calls: int  # κ: synthesis calls charged (0 for mode none or when no records were eligible)
    explore: bool  # chosen by the exploring (training) selector
    rules: tuple  # the rules in context (provenance of the trajectory)
    parents: tuple[str, ...]  # ids of the guidance in context
    flagged: tuple[str, ...]  # the flagged (over-general) ones among them


class GuidanceAgent:
    """Trajectories, an outcome log and on-demand guidance for your own agent loop (module docstring).

    Args:
      edits: the action language's :class:`~cfjax.types.EditModel` (units, signatures and the
        single-unit diffs the synthesizers read; a built-in domain's: ``suite.edits``).
      log_path: the outcome log's JSONL file (created on the first append; an existing log is extended).
      config: the protocol settings (``B``, the bandit's Table 3 values, the synthesis rates, the
        embedding text, ``tasks_per_iteration`` for the selector's schedule, the log's durability).
      seed: seeds the selector's exploration and the synthesizers.
    """

    def __init__(self, edits: EditModel, log_path: str | Path, *, config: APConfig | None = None,
                 seed: int = 0) -> None:
        self.config = config or APConfig()
        self.edits = edits
        self.state: MethodState = new_state(_ROW, Path(log_path), self.config)
        n = len(self.state.log)  # type: ignore[arg-type]
        self.state.updates = n + 1 if n else 0  # an existing log: continue its count (its first update was skipped)
        self._rng = random.Random(seed)
        self._selector = make_selector(self.config.bandit)
        self._pending: dict[str, Choice] = {}
        self._guidance_calls = 0

    # ------------------------------------------------------------------ what persists
    @property
    def trajectories(self) -> TrajectoryMemory:
        """The trajectory memory ``M_k`` (records of past episodes)."""
        return self.state.trajectories

    @property
    def log(self) -> OutcomeLog:
        """The append-only outcome log ``L_k``."""
        return self.state.log  # type: ignore[return-value]

    def mode_counts(self) -> dict[str, int]:
        """How often each mode was logged (the outcome log's entries)."""
        return dict(Counter(e.mode for e in self.log.entries))

    def save(self, path: str | Path) -> None:
        """Write the trajectories to ``path`` (JSON, atomically); the log is already on disk."""
        self.state.trajectories.save(path)

    def freeze(self) -> None:
        """Held-out use: nothing is written any more (:meth:`record` raises); pass ``explore=False``."""
        self.state.freeze()

    def unfreeze(self) -> None:
        self.state.unfreeze()

    # ------------------------------------------------------------------ one episode
    def _config_now(self) -> APConfig:
        """The config with a log capacity that holds the whole log (powers of two: few kernel shapes)."""
        cap = max(self.config.log_capacity, next_capacity(len(self.log)))
        return self.config if cap == self.config.log_capacity else dataclasses.replace(self.config, log_capacity=cap)

    def choose(self, task: Task, *, explore: bool = True) -> tuple[str, str | None]:
        """The mode for ``task`` and the branch that chose it, without synthesizing anything."""
        cfg = self._config_now()
        n = self.state.updates
        return _select(self.state, _ROW, task, self.state.trajectories.query(task),
                       iteration=n // cfg.tasks_per_iteration, position=n % cfg.tasks_per_iteration,
                       rng=self._rng, cfg=cfg, selector=self._selector, train=explore)

    def guidance(self, task: Task, *, explore: bool = True) -> MemoryText | None:
        """The memory to show your model for this episode, synthesized now by the chosen mode, or
        ``None`` (nothing eligible yet). Remembered until :meth:`record`: the mode and provenance only.

        ``explore=False`` is held-out use: the greedy mode from the current log, no exploration.
        """
        if explore and self.state.log.frozen:  # type: ignore[union-attr]
            raise FrozenMemoryError("the agent is frozen: ask for guidance with explore=False")
        cfg = self._config_now()
        mode, branch = self.choose(task, explore=explore)
        self._guidance_calls += 1
        episode = self._guidance_calls
        ctx = task_memory(task, self.state, mode, edits=self.edits, cfg=cfg, episode=episode, rng=self._rng,
                          query=self.state.trajectories.query(task),
                          iteration=self.state.updates // cfg.tasks_per_iteration, train=explore)
        self._pending[task.task_id] = Choice(mode, branch, ctx.synth_calls, explore, tuple(ctx.rules),
                                             tuple(ctx.parents), tuple(ctx.flagged))
        return ctx.memory

    def last_choice(self, task: Task) -> Choice | None:
        """What :meth:`guidance` decided for ``task`` and :meth:`record` has not consumed yet."""
        return self._pending.get(task.task_id)

    def record(self, task: Task, attempts: Sequence[Any], outcome: Outcome | bool, *,
               applied: Sequence[Sequence[str]] = ()) -> str:
        """Learn from one finished episode: keep its trajectory, log its mode's outcome.

        Args:
          task: the task.
          attempts: the episode's evaluated attempts in order, each a :class:`cfjax.types.Attempt`
            (action, feedback, score) or an ``(action, Outcome)`` pair.
          outcome: the episode's final :class:`~cfjax.types.Outcome` (``solved`` is ``y``) or ``y``.
          applied: per attempt, the rule ids your model said it followed (``DraftResult.applied``,
            the ``APPLIED:`` line): provenance of errors reproduced through trajectories.

        Returns:
          what the outcome log did: ``"logged"``, a skip reason (``"initial_update"`` for the first
          episode, App. B.4), or ``"not_logged"`` when :meth:`guidance` was not asked for this task
          (no mode was used; the trajectory is still kept).

        Raises:
          FrozenMemoryError: the agent is frozen.
        """
        if self.state.trajectories.frozen:
            raise FrozenMemoryError("the agent is frozen (held-out use): record() writes nothing")
        success = bool(outcome.solved if isinstance(outcome, Outcome) else outcome)
        steps = [_attempt(a, tuple(applied[i]) if i < len(applied) else ()) for i, a in enumerate(attempts)]
        choice = self._pending.pop(task.task_id, None)
        traj = Trajectory(task.task_id, task.question, tuple(task.attrs.get("cues", ())), tuple(steps), success,
                          choice.rules if choice else (), choice.parents if choice else (),
                          choice.flagged if choice else ())
        if choice is None:
            self.state.trajectories.add(traj, task)
            return "not_logged"
        before = len(self.log)
        skipped = dict(self.log.skipped)
        cfg = self._config_now()
        _learn(self.state, task, traj, choice.mode, choice.synth_calls, self.state.trajectories.query(task), cfg,
               self.edits, self._rng, self.state.updates // cfg.tasks_per_iteration)
        if len(self.log) > before:
            return "logged"
        return next((r for r, n in self.log.skipped.items() if n > skipped.get(r, 0)), "not_logged")


def _attempt(a: Any, applied: tuple[str, ...]) -> TrajectoryAttempt:
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], Outcome):
        action, out = a
        return TrajectoryAttempt(str(action), out.feedback, float(out.score), applied)
    if all(hasattr(a, k) for k in ("action", "feedback", "score")):
        return TrajectoryAttempt(a.action, a.feedback, float(a.score), tuple(getattr(a, "applied", ())) or applied)
    raise TypeError(f"an attempt is a cfjax.types.Attempt or an (action, Outcome) pair, got {type(a).__name__}")

"""CounterMem inside your own agent loop: learn from a failure, recall and revise on a new task.

The experiments run Algorithm 1 end to end (:mod:`cfjax.countermem.pipeline`). An agent of your own
needs three of its steps, on your tasks and with your evaluator; :class:`CounterMemory` wraps the
real pieces for that:

* :meth:`CounterMemory.learn` — Modules I–II on one failed action (papers/countermem.md Algorithm 1
  lines 4–12, :func:`cfjax.countermem.generator.expand_failure`): up to K one-unit alternatives
  (the backbone's GENERATE_LOCAL_ALTERNATIVES, filled with the edit model's rule operators), each
  checked by *your* evaluator from the same state, the verified improvements distilled
  (DISTIL_RECORD) and offered to the store (admission Eq. 4, retention Eq. 5);
* :meth:`CounterMemory.recall` — Eq. 7–8: the records whose applicability condition holds for the
  new task (and that come from another task), ranked by similarity to its state plus the reuse bias;
* :meth:`CounterMemory.revise` — Module III: the top-1 record shown with the draft through
  REVISE_WITH_RECORD, or the slot a trained selector picks (0 = keep the draft);
* :meth:`CounterMemory.save` / :meth:`CounterMemory.load` — the store as one checksummed file.

>>> memory = CounterMemory(backbone, evaluate, edits)            # doctest: +SKIP
>>> memory.learn(task, failed_sql)                                # doctest: +SKIP
>>> memory.revise(new_task, draft)                                # doctest: +SKIP

``evaluate`` is a :class:`~cfjax.types.World` or any callable ``(task, action) -> Outcome``; like a
world it must check every action from the same state (never mutate the environment). Its calls and
the backbone's are charged to :attr:`CounterMemory.ledger`. README.md ("CounterMem in your own
agent loop") has a complete example.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfjax.config import CounterMemConfig
from cfjax.countermem.agent import Agent, Policy
from cfjax.countermem.generator import Expansion, expand_failure
from cfjax.countermem.store import MemoryStore, Record, Retrieved
from cfjax.infra.ledger import Ledger
from cfjax.types import Attempt, Backbone, EditModel, Outcome, Task, World

__all__ = ["CounterMemory", "Evaluator"]

#: your evaluator: a :class:`~cfjax.types.World` or a callable ``(task, action) -> Outcome``
Evaluator = World | Callable[[Task, str], Outcome]


@dataclass(frozen=True)
class _CallableWorld:
    """A callable ``(task, action) -> Outcome`` as a :class:`~cfjax.types.World`."""

    fn: Callable[[Task, str], Outcome]

    def evaluate(self, task: Task, action: str) -> Outcome:
        out = self.fn(task, action)
        if not isinstance(out, Outcome):
            raise TypeError(f"the evaluator must return a cfjax.types.Outcome, got {type(out).__name__}")
        return out


def as_world(evaluate: Evaluator) -> World:
    """``evaluate`` as a :class:`~cfjax.types.World` (a world is returned as it is)."""
    if isinstance(evaluate, World):
        return evaluate
    if callable(evaluate):
        return _CallableWorld(evaluate)
    raise TypeError(f"evaluate must be a World or a callable (task, action) -> Outcome, got {type(evaluate).__name__}")


class CounterMemory:
    """A CounterMem store driven by your agent loop (module docstring).

    Args:
      backbone: the model that proposes alternatives, distils records and revises drafts (any
        :class:`~cfjax.types.Backbone`: an OpenAI-compatible client, a local model, the scripted one).
      evaluate: your evaluator (a :class:`~cfjax.types.World` or ``(task, action) -> Outcome``).
      edits: the action language's :class:`~cfjax.types.EditModel` (a built-in domain's: ``suite.edits``).
      config: generator, store and retrieval settings (the papers' defaults).
      envs: ``env_id → environment object`` the edit model's rule operators read (``suite.envs()``:
        for SQL the schema, so a join can be fixed along a foreign key); missing entries are ``None``.
      selector: a trained selector's policy ``(obs f32[98], mask bool[5]) -> slot`` for
        :meth:`revise`; ``None``: the top-1 eligible record is always used.
      store: an existing :class:`~cfjax.countermem.store.MemoryStore` (default: an empty one).
      ledger: where backbone and evaluator calls are charged (default: a new ``Ledger("memory")``).
      seed: seeds the rule operators' order and the backbone's episode ids.
    """

    def __init__(self, backbone: Backbone, evaluate: Evaluator, edits: EditModel, *,
                 config: CounterMemConfig | None = None, envs: Mapping[str, Any] | None = None,
                 selector: Policy | None = None, store: MemoryStore | None = None, ledger: Ledger | None = None,
                 seed: int = 0) -> None:
        self.config = config or CounterMemConfig()
        self.backbone = backbone
        self.world = as_world(evaluate)
        self.edits = edits
        self.envs = dict(envs or {})
        self.selector = selector
        self.ledger = ledger or Ledger("memory")
        self.store = store if store is not None else MemoryStore(self.config.store, self.config.retrieval,
                                                                 edits=edits)
        self._rng = random.Random(seed)
        self._episode = seed * 1_000_000
        self._agent = self._make_agent()

    def _make_agent(self) -> Agent:
        return Agent(self.backbone, self.world, self.config, edits=self.edits, store=self.store, envs=self.envs)

    def _next_episode(self) -> int:
        self._episode += 1
        return self._episode

    # ------------------------------------------------------------------ the store
    def __len__(self) -> int:
        return len(self.store)

    @property
    def records(self) -> list[Record]:
        """The stored records, in admission order."""
        return [self.store.records[r] for r in sorted(self.store.records)]

    def save(self, path: str | Path) -> None:
        """Write the store to ``path`` (one checksummed JSON file, atomically)."""
        self.store.save(path)

    def load(self, path: str | Path) -> "CounterMemory":
        """Replace the store with the one :meth:`save` wrote to ``path`` (checked; for this edit model).

        Raises:
          cfjax.infra.io.CorruptFileError: the file cannot be trusted.
          cfjax.countermem.store.InvalidStoreError: it holds another edit model's records.
        """
        self.store = MemoryStore.load(path, self.edits)
        self._agent = self._make_agent()
        return self

    def freeze(self) -> None:
        """Make the store read-only (:meth:`learn` then raises ``FrozenStoreError``)."""
        self.store.freeze()

    # ------------------------------------------------------------------ Modules I–II
    def learn(self, task: Task, action: str, outcome: Outcome | None = None, *,
              history: Sequence[Attempt] = ()) -> Expansion:
        """Turn one failed action into verified records (Modules I–II).

        Args:
          task: the task the action was written for (its ``task_id`` marks the records' source:
            a record is never recalled for the task it came from).
          action: the action your agent wrote.
          outcome: what your evaluator said of it (``None``: it is evaluated now).
          history: the task's earlier evaluated attempts (shown to the backbone).

        Returns:
          what the expansion did (:class:`~cfjax.countermem.generator.Expansion`: alternatives
          proposed, checked, eligible, and each admission's decision); nothing is tried when the
          action solved the task or its check did not complete.
        """
        if outcome is None:
            outcome = self.world.evaluate(task, action)
            self.ledger.evaluation(task.task_id, outcome)
        if outcome.solved or not outcome.completed:
            return Expansion()
        return expand_failure(task, list(history), action, outcome, backbone=self.backbone, world=self.world,
                              store=self.store, config=self.config.generator, schema=self.envs.get(task.env_id),
                              rng=self._rng, ledger=self.ledger, budget=[self.config.generator.verification_budget],
                              episode=self._next_episode(), edits=self.edits)

    # ------------------------------------------------------------------ Eq. 7–8, Module III
    def recall(self, task: Task, draft: str, *, history: Sequence[Attempt] = (), k: int | None = None
               ) -> list[Retrieved]:
        """The records offered for this decision, best first (Eq. 7 filter, Eq. 8 ranking; at most
        ``k``, default ``config.retrieval.k``)."""
        state = Agent.state_text(task, list(history), draft)
        return self.store.retrieve(task, state, k=k, use_conditions=self.config.retrieval.use_conditions)

    def revise(self, task: Task, draft: str, *, history: Sequence[Attempt] = ()) -> str:
        """The draft revised with one recalled record (Module III), or the draft itself when no
        record applies (or the selector skips memory)."""
        if self.selector is None:
            recalled = self.recall(task, draft, history=history, k=1)
            if not recalled:
                return draft
            rec = recalled[0]
        else:
            retrieved, z, mask = self._agent.offer(task, history, draft, len(history), 0)
            slot = int(self.selector(z, mask))
            if not (0 <= slot < len(mask) and mask[slot]):
                raise ValueError(f"the selector chose invalid slot {slot} (mask {mask.tolist()})")
            if slot == 0:
                return draft
            rec = retrieved[slot - 1]
        action, _ = self._agent.revise(task, history, draft, rec, self._next_episode(), self.ledger)
        return action

"""The frozen executor of the end-to-end domains: the one agent loop, shown a memory set.

papers/upliftmem.md §3.1, App. E.2 (the executor receives the public task, the feedback of its own
attempts and the retrieved memories as ``[id] text`` blocks; hidden goals, tests and evaluator
internals are excluded). :class:`AgentExecutor` implements :class:`~cfjax.uplift.core.SetExecutor`
with :func:`cfjax.loop.run_episode`: every attempt is one backbone DRAFT_ACTION call that shows the
set (``MemoryText(kind="memories")``) and one evaluator call. The *draft seed* is the episode number
the backbone keys its draws on, so the no-memory run and every memory run of the same (task, seed)
share the memory-free drafts (the pairing of Eq. 4). How the scripted backbone responds to a set is
its documented competence model (:meth:`cfjax.llm.scripted.ScriptedBackbone._follow_memories`).
"""

from __future__ import annotations

from collections.abc import Sequence

from cfjax.infra.ledger import Ledger
from cfjax.llm.prompts import count_tokens, render_memory_set
from cfjax.loop import draft_once, run_episode
from cfjax.types import Attempt, Backbone, EditModel, MemoryText, Task, World
from cfjax.uplift.core import Execution, Memory

__all__ = ["AgentExecutor", "memory_block"]


def memory_block(memories: Sequence[Memory]) -> MemoryText | None:
    """The memory set as the executor's prompt shows it (``None`` for ``∅``)."""
    if not memories:
        return None
    return MemoryText("memories", render_memory_set([(m.mem_id, m.text) for m in memories]))


class AgentExecutor:
    """Runs one task with a memory set through the agent loop (``max_attempts`` evaluated attempts).

    Args:
      backbone: the frozen executor model.
      world: the evaluator.
      edits: the domain's edit model (the loop compares canonical forms).
      max_attempts: evaluated attempts per execution.
    """

    def __init__(self, backbone: Backbone, world: World, edits: EditModel, *, max_attempts: int = 2) -> None:
        self.backbone = backbone
        self.world = world
        self.edits = edits
        self.max_attempts = max_attempts

    def execute(self, task: Task, memories: Sequence[Memory], *, seed: int, ledger: Ledger) -> Execution:
        block = memory_block(memories)
        own = Ledger("execution")
        ep = run_episode(task, world=self.world, edits=self.edits, ledger=own, episode=int(seed),
                         max_attempts=self.max_attempts, draft=draft_once(self.backbone, memory=block))
        ledger.merge(own)
        last = ep.decisions[-1]
        traj = tuple(Attempt(d.action, d.feedback, d.score) for d in ep.decisions)
        c = own.total
        return Execution(R=float(last.score), solved=bool(last.solved), attempts=len(ep.decisions),
                         memory_tokens=count_tokens(block.text) if block is not None else 0, trajectory=traj,
                         llm_tokens=c.tokens, llm_calls=c.llm_calls, eval_calls=c.eval_calls)

"""ExpeL as CounterMem's Table 1 reduces it: one unchecked lesson per source trajectory, the most
similar lesson always shown.

Zhao et al., *ExpeL: LLM Agents Are Experiential Learners* (AAAI 2024); papers/countermem.md §4.1 and
App. D.5: after every source task the backbone extracts one lesson from the finished trajectory
(EXPEL_INSIGHT, :mod:`cfjax.expel.calls`), nothing is checked; at test time the most similar lesson
(cosine of the hashed question + draft against the question + first failed action it came from) is
always shown to REVISE_WITH_RECORD — no selector, no applicability filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cfjax.expel.calls import EXPEL_INSIGHT, InsightRequest, render_lesson
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.ledger import Ledger
from cfjax.llm.calls import REVISE_WITH_RECORD
from cfjax.loop import AfterResult, Consultation, Decision, Episode, Proposal, draft_once, reuse_label, run_episode
from cfjax.types import Attempt, Backbone, EditModel, MemoryText, Outcome, ReviseRequest, Task, World

__all__ = ["ExpeLMemory", "build_expel", "expel_episode"]


@dataclass
class ExpeLMemory:
    """Lessons with the embedding of their source task (question + failed action)."""

    embedder: HashingEmbedder = field(default_factory=HashingEmbedder)
    lessons: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    _emb: list[np.ndarray] = field(default_factory=list)

    def add(self, source_task: str, key_text: str, lesson: str) -> None:
        self.lessons.append(lesson)
        self.sources.append(source_task)
        self._emb.append(self.embedder.embed([key_text])[0])

    def top1(self, task: Task, state_text: str) -> tuple[int, float] | None:
        """The most similar lesson from another source task (cosine), or ``None``."""
        ok = [i for i, s in enumerate(self.sources) if s != task.task_id]
        if not ok:
            return None
        q = self.embedder.embed([state_text])[0]
        sims = np.stack([self._emb[i] for i in ok]) @ q
        j = int(np.argmax(sims))
        return ok[j], float(sims[j])

    def __len__(self) -> int:
        return len(self.lessons)


def build_expel(tasks: list[Task], *, backbone: Backbone, world: World, max_attempts: int, edits: EditModel,
                ledger: Ledger, episode0: int, embedder: HashingEmbedder | None = None) -> ExpeLMemory:
    """Solve each source task memory-free, then extract one lesson from its trajectory."""
    mem = ExpeLMemory(embedder or HashingEmbedder())
    for i, task in enumerate(tasks):
        ep = run_episode(task, world=world, edits=edits, ledger=ledger, episode=episode0 + i,
                         max_attempts=max_attempts, draft=draft_once(backbone))
        history = [Attempt(d.action, d.feedback, d.score) for d in ep.decisions]
        ins = backbone.call(EXPEL_INSIGHT, InsightRequest(task, tuple(history), ep.solved, episode0 + i))
        ledger.llm(task.task_id, ins.usage, verification=True)
        if ins.lesson:
            mem.add(task.task_id, f"{task.question}\n{history[0].action}", ins.lesson)
    return mem


def expel_episode(task: Task, *, backbone: Backbone, world: World, max_attempts: int, memory: ExpeLMemory,
                  edits: EditModel, ledger: Ledger, episode: int) -> Episode:
    """One task with the most similar lesson always in context (ExpeL-style)."""

    def consult(task: Task, history: Sequence[Attempt], proposal: Proposal, *, episode: int, attempt: int,
                tokens_so_far: int, ledger: Ledger) -> Consultation:
        hit = memory.top1(task, f"{task.question}\n{proposal.draft}")
        if hit is None:
            return Consultation(proposal.draft)
        rv = backbone.call(REVISE_WITH_RECORD, ReviseRequest(
            task, tuple(history), proposal.draft, MemoryText("lesson", render_lesson(memory.lessons[hit[0]])),
            episode))
        ledger.llm(task.task_id, rv.usage)
        return Consultation(rv.action, used=True, slot=1, n_retrieved=1, tokens=rv.usage.total,
                            memory_tokens=rv.usage.total)

    def after(task: Task, history: Sequence[Attempt], d: Decision, out: Outcome, **_) -> AfterResult | None:
        if d.slot == 0:
            return None
        ref = float(world.evaluate(task, d.draft).score) if d.changed else None  # measurement, off the ledger
        return AfterResult(label=reuse_label(d.changed, out.solved, out.score, ref), reference=ref)

    return run_episode(task, world=world, edits=edits, ledger=ledger, episode=episode,
                       max_attempts=max_attempts, draft=draft_once(backbone), consult=consult, after=after)



"""ExpeL as CounterMem's Table 1 reduces it: one unchecked lesson per source trajectory, the most
similar lesson always shown.

Zhao et al., *ExpeL: LLM Agents Are Experiential Learners* (AAAI 2024); papers/countermem.md §4.1 and
App. D.5: after every source task the backbone extracts one lesson from the finished trajectory
(EXPEL_INSIGHT, :mod:`cfjax.expel.calls`), nothing is checked; at test time the most similar lesson
(cosine of the hashed question + draft against the question + first action of the trajectory it came
from) is always shown to REVISE_WITH_RECORD — no selector, no applicability filter. The original
ExpeL's voted insight pool with few-shot successes is a different system (issue 24); this is the
reduced one CounterMem compares against.

:class:`ExpeLSystem` implements :class:`cfjax.memory.MemorySystem`, so the same store is a row of
``countermem run`` (built from T_build), of ``antipersist run`` (updated after every training task)
and a method of ``compare``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cfjax.expel.calls import EXPEL_INSIGHT, InsightRequest, render_lesson
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.io import atomic_write_json, read_json
from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.types import MemoryText, Task

__all__ = ["ExpeLMemory", "ExpeLSystem", "FORMAT"]

#: the ``format`` tag of a saved ExpeL store
FORMAT = "cfjax.expel/1"


@dataclass
class ExpeLMemory:
    """Lessons with the embedding of their source task (question + first action of its trajectory)."""

    embedder: HashingEmbedder = field(default_factory=HashingEmbedder)
    lessons: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    _emb: list[np.ndarray] = field(default_factory=list)

    def add(self, source_task: str, key_text: str, lesson: str) -> None:
        self.lessons.append(lesson)
        self.sources.append(source_task)
        self.keys.append(key_text)
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


class ExpeLSystem:
    """The reduced ExpeL as a :class:`~cfjax.memory.MemorySystem` (module docstring)."""

    def __init__(self, ctx: SystemContext, embedder: HashingEmbedder | None = None) -> None:
        self.ctx = ctx
        self.memory = ExpeLMemory(embedder or HashingEmbedder())
        self.frozen = False

    # ------------------------------------------------------------------ build and update
    def _learn(self, exp: Experience) -> None:
        ins = self.ctx.backbone.call(EXPEL_INSIGHT, InsightRequest(exp.task, exp.attempts, exp.solved, exp.episode))
        self.ctx.ledger.llm(exp.task.task_id, ins.usage, verification=True)
        if ins.lesson and exp.attempts:
            self.memory.add(exp.task.task_id, f"{exp.task.question}\n{exp.attempts[0].action}", ins.lesson)

    def build(self, experience: Sequence[Experience]) -> None:
        """One EXPEL_INSIGHT call per finished episode, in order (App. D.5)."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        if self.frozen:
            raise FrozenMemoryError("ExpeL memory is frozen: no lesson may be added during held-out evaluation")
        self._learn(experience)

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The most similar lesson to the task and its draft (no filter: ExpeL always shows one)."""
        hit = self.memory.top1(query.task, f"{query.task.question}\n{query.draft or ''}")
        if hit is None:
            return None
        return MemoryText("lesson", render_lesson(self.memory.lessons[hit[0]]))

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        m = self.memory
        atomic_write_json(path, {"format": FORMAT, "lessons": m.lessons, "sources": m.sources, "keys": m.keys})

    def load(self, path: Path) -> None:
        """Replace the lessons with a saved store's (embeddings recomputed from the saved key texts).

        Raises:
          ValueError: the file is not an ExpeL store, or its lists disagree in length (named).
        """
        data = read_json(path)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: not an ExpeL store (expected format {FORMAT!r})")
        lists = [data.get(k) for k in ("lessons", "sources", "keys")]
        if not all(isinstance(x, list) and all(isinstance(s, str) for s in x) for x in lists) or \
                len({len(x) for x in lists}) != 1:
            raise ValueError(f"{path}: 'lessons', 'sources' and 'keys' must be lists of strings of one length")
        mem = ExpeLMemory(self.memory.embedder)
        for lesson, source, key in zip(*lists):
            mem.add(source, key, lesson)
        self.memory = mem

    def summary(self) -> dict:
        return {"lessons": len(self.memory)}

    def __len__(self) -> int:
        return len(self.memory)

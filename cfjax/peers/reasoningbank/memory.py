"""ReasoningBank as a :class:`~cfjax.memory.MemorySystem` (Ouyang et al., 2025, arXiv 2509.25140).

The mechanism (§3.2; ../shared/PEERS.md):

* **judge** — after every task an LLM judge labels the trajectory success or failure (``RB_JUDGE``);
  ``verified=True`` (CounterMem's "+ verified feedback") takes the label, and shows the per-attempt
  outcomes to the extractor, from the evaluator instead — the item format is unchanged;
* **extract** — the success prompt or the failure prompt (by the label) extracts at most 3 items
  ``{title, one-sentence description, 1–3 sentences of content}`` (``RB_EXTRACT``);
* **bank** — an append-only log of ``{task, query, status, items}``: nothing is merged, deduplicated
  or deleted (the paper's "minimal consolidation");
* **retrieve** — the new task's *query* is embedded and compared with the *queries of past tasks*
  (not with the items); the top-1 past task's items are injected (``top_k`` is exposed; the paper's
  default is 1);
* **MaTTS** (§3.3), ``scaling``: ``"parallel"`` — ``k`` rollouts of each source task (the runner's
  memory-free episodes, :attr:`~cfjax.memory.SystemContext.rollout`), then one self-contrast call over
  all of them extracts at most 5 items (``RB_CONTRAST``); ``"sequential"`` — the trajectory is
  re-checked ``k − 1`` times ("let's check again", ``RB_RECHECK``), the last re-check's status and
  items are kept. The released code has only the prompts of sequential scaling; what a re-check does
  in the simulator is said in :mod:`cfjax.peers.reasoningbank.calls`.

Simplifications, each a choice of ours (the paper runs on web and SWE tasks):

* the memory is built from the runner's episodes (``countermem run``: the memory-free episodes of
  T_build, then frozen; ``antipersist run``: updated after every training task) — the paper's agent
  also uses the bank while it collects; in ``countermem run`` no row uses memory while building;
* items are injected with the draft (REVISE_WITH_RECORD, as a memory set), the common task interface
  CounterMem's App. D.5 adapts every baseline to, instead of the system prompt;
* an extraction that yields no item adds no entry (so the top-1 past task always has items);
* the query embedding is the harness's hashed embedding of the question (every row's encoder), not
  the paper's gemini-embedding;
* parallel MaTTS without a runner rollout (``ctx.rollout is None``) contrasts the one trajectory it has.

A task never retrieves its own entry. Saved stores are JSON (``cfjax.peers.reasoningbank/1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import EmbeddingIndex, load_store, memory_set, save_store
from cfjax.peers.reasoningbank.calls import (RB_CONTRAST, RB_EXTRACT, RB_JUDGE, RB_RECHECK, ContrastRequest,
                                             ExtractRequest, Item, JudgeRequest, RecheckRequest)
from cfjax.types import Attempt, MemoryText

__all__ = ["Entry", "ReasoningBankSystem", "FORMAT", "SCALINGS", "ROLLOUT_STRIDE"]

FORMAT = "cfjax.peers.reasoningbank/1"
SCALINGS = ("none", "parallel", "sequential")
#: episode-id offset between the parallel rollouts of one source task (never another task's episode)
ROLLOUT_STRIDE = 10_000_019


@dataclass(frozen=True)
class Entry:
    """One bank entry: the past task, its query, the (judged or verified) status and its items."""

    task_id: str
    query: str
    success: bool
    items: tuple[Item, ...]


class ReasoningBankSystem:
    """ReasoningBank (module docstring).

    Args:
      ctx: backbone, edit model, ledger (every judge and extraction call is charged there as
        construction), and the runner's rollout for parallel MaTTS.
      scaling: ``"none"``, ``"parallel"`` or ``"sequential"`` (MaTTS).
      k: rollouts (parallel) or passes (sequential: ``k − 1`` re-checks); the paper's default 3.
      verified: labels and step outcomes from the evaluator, not the judge.
      top_k: past tasks whose items are injected (the paper: 1).
    """

    def __init__(self, ctx: SystemContext, *, scaling: str = "none", k: int = 3, verified: bool = False,
                 top_k: int = 1) -> None:
        if scaling not in SCALINGS:
            raise ValueError(f"ReasoningBank scaling must be one of {', '.join(SCALINGS)}, got {scaling!r}")
        if k < 1 or top_k < 1:
            raise ValueError(f"ReasoningBank k and top_k must be ≥ 1, got k={k}, top_k={top_k}")
        self.ctx = ctx
        self.scaling, self.k, self.verified, self.top_k = scaling, k, verified, top_k
        self.entries: list[Entry] = []
        self.index = EmbeddingIndex()
        self.frozen = False
        self.counts = {"judge_calls": 0, "judge_errors_unparsed": 0, "rollouts": 0, "rechecks": 0}

    # ------------------------------------------------------------------ learning
    def _charge(self, task_id: str, usage) -> None:
        self.ctx.ledger.llm(task_id, usage, verification=True)

    def _status(self, exp: Experience, traj: Sequence[Attempt], rnd: int = 0) -> bool:
        if self.verified:
            return exp.solved
        res = self.ctx.backbone.call(RB_JUDGE, JudgeRequest(exp.task, tuple(traj), exp.episode, rnd))
        self._charge(exp.task.task_id, res.usage)
        self.counts["judge_calls"] += 1
        if res.success is None:
            self.counts["judge_errors_unparsed"] += 1
        return bool(res.success)

    def _extract(self, exp: Experience) -> tuple[bool, tuple[Item, ...]]:
        bb, task = self.ctx.backbone, exp.task
        if self.scaling == "parallel":
            trajs = [exp.attempts]
            if self.ctx.rollout is not None:
                for j in range(1, self.k):
                    trajs.append(self.ctx.rollout(task, exp.episode + j * ROLLOUT_STRIDE).attempts)
                    self.counts["rollouts"] += 1
            res = bb.call(RB_CONTRAST, ContrastRequest(task, tuple(tuple(t) for t in trajs), exp.episode))
            self._charge(task.task_id, res.usage)
            return self._status(exp, exp.attempts), res.items
        success = self._status(exp, exp.attempts)
        res = bb.call(RB_EXTRACT, ExtractRequest(task, exp.attempts, success, exp.episode, self.verified))
        self._charge(task.task_id, res.usage)
        items = res.items
        if self.scaling == "sequential":
            for r in range(1, self.k):
                rc = bb.call(RB_RECHECK, RecheckRequest(task, exp.attempts, items, exp.episode, r))
                self._charge(task.task_id, rc.usage)
                self.counts["rechecks"] += 1
                if rc.success is not None and not self.verified:
                    success = rc.success
                if rc.items or rc.success is not None:  # an unparsable re-check keeps what was there
                    items = rc.items
        return success, items

    def update(self, experience: Experience) -> None:
        """Judge, extract and append one entry (nothing else in the bank changes)."""
        if self.frozen:
            raise FrozenMemoryError("ReasoningBank is frozen: no entry may be added during held-out evaluation")
        if not experience.attempts:
            return
        success, items = self._extract(experience)
        if not items:
            return
        e = Entry(experience.task.task_id, experience.task.question, success, tuple(items))
        self.index.add(str(len(self.entries)), e.query)
        self.entries.append(e)

    def build(self, experience: Sequence[Experience]) -> None:
        for exp in experience:
            self.update(exp)

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, task_id: str, query: str) -> list[Entry]:
        """The ``top_k`` past entries whose query is most similar to ``query`` (never the task's own)."""
        hits = self.index.topk(query, self.top_k, keep=lambda i: self.entries[int(i)].task_id != task_id)
        return [self.entries[int(i)] for i, _ in hits]

    def recall(self, query: RecallQuery) -> MemoryText | None:
        found = self.retrieve(query.task.task_id, query.task.question)
        items = [(f"rb{n}.{j}", it.text()) for n, e in enumerate(found, 1) for j, it in enumerate(e.items, 1)]
        return memory_set(items)

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        save_store(path, FORMAT, {"config": {"scaling": self.scaling, "k": self.k, "verified": self.verified,
                                             "top_k": self.top_k},
                                  "entries": [{"task_id": e.task_id, "query": e.query, "success": e.success,
                                               "items": [it.to_json() for it in e.items]} for e in self.entries]})

    def load(self, path: Path) -> None:
        data = load_store(path, FORMAT, "ReasoningBank", {"entries": list})
        entries = []
        try:
            for d in data["entries"]:
                entries.append(Entry(str(d["task_id"]), str(d["query"]), bool(d["success"]),
                                     tuple(Item.from_json(x) for x in d["items"])))
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path}: a ReasoningBank entry lacks a field or has the wrong type ({e})") from None
        self.entries = entries
        self.index = EmbeddingIndex()
        for i, e in enumerate(entries):
            self.index.add(str(i), e.query)

    def summary(self) -> dict:
        return {"entries": len(self.entries), "items": sum(len(e.items) for e in self.entries),
                "judged_success": sum(e.success for e in self.entries), **self.counts}

    def __len__(self) -> int:
        return len(self.entries)

"""The original ExpeL: a voted insight pool edited by the model, and few-shot successes by similarity.

Zhao et al., *ExpeL: LLM Agents Are Experiential Learners* (AAAI 2024), §4.1–4.3; LeapLabTHU/ExpeL
``agent/expel.py`` (``next_task`` records the trials, ``create_rules`` edits the pool, ``update_rules``
counts the votes, ``update_dynamic_prompt_components`` picks the few-shots) and
``configs/agent/expel.yaml`` (``max_num_rules: 20``, ``success_critique_num: 8``,
``fewshot_strategy: task_similarity``, ``max_reflection_depth: 3``). This is the Anti-Persistence
Table 1 row ``expel_original``; CounterMem's Table 1 compares against the reduced ExpeL (row
``expel``, :mod:`cfjax.expel.memory`), which stays as it is.

**Gathering.** ExpeL gathers its training trajectories with Reflexion (up to 3 retries of a task, each
with the reflections on the failed ones). Here the runner's episodes are the experience: each attempt
of an episode, with the evaluator's feedback, is one *trial*; a solved episode's last attempt is a
successful trial and its earlier attempts failed trials. The Reflexion gathering is the runner's base
agent axis (``--agent reflexion`` adds the reflections to the retries); :attr:`SystemContext.rollout` is
not used.

**The pool** (:class:`InsightPool`, ``update_rules``): rules with a count. One reply's operations are
checked against the numbering the model was shown, then applied in the code's order REMOVE, AGREE,
EDIT, ADD: ``ADD`` starts a rule at 2, ``AGREE`` +1, ``EDIT`` replaces the text and +1 (an EDIT whose
text is an existing rule is that rule's AGREE), ``REMOVE`` −1, or −3 when the pool is full; rules at
count ≤ 0 are dropped and the rest sorted by count (stable: ties keep their order). An operation on a
rule number that does not exist is ignored and counted (``ignored``), an ADD of an existing rule's
text too (``duplicates``), and an ADD into a pool of ``max_rules`` live rules (``capped``).

**Learning.** For every task, every failed trial is compared with every successful trial of the same
task (EXPEL_COMPARE, :mod:`cfjax.expel.pool_calls`): within one episode (failed, then solved) and
across episodes of the same task (antipersist's iterations). Successful trials are then read in
batches of ``success_batch`` = 8 (EXPEL_SUCCESSES). :meth:`build` does all comparisons first and then
the success batches, the last one partial, as ``create_rules`` does; :meth:`update` compares at once
and reads a batch whenever ``success_batch`` successes are pending (the rest wait for more).

**Recall** (nothing is mutated at retrieval): one memory set (``show="revise"``) of one item with all
insights, most agreed first (each rule's sentence and, when concrete, its ``EDIT:`` line), plus the
``k_fewshot`` = 2 successes of other tasks whose question is most similar to this task's (cosine of
hashed embeddings; never the task itself). Per task the shortest successful episode is kept, as the
code keeps the shortest trajectory. A few-shot item shows the task, the successful action and — since
a success that failed first holds the contrast a reader sees in it — that contrast's ``EDIT:`` line,
read by :func:`cfjax.llm.extract.lessons_of` on the stored episode (the simulator's shared lesson
model; on a solved episode it reads only the edit model, no draw).

**Simplifications.** A trial is one action with its feedback, not a ReAct trace. Few-shots show the
successful action, not the whole trace, and no ``max_fewshot_tokens`` / environment-name filter or
reranker applies (``fewshot_contrast=False`` shows the action only, as the code's few-shot text holds
only the successful trial). Success batches are taken in the order of the experience, not randomly
divided. The code's ``failure_critique`` (all-failure critiques) is not part of ``create_rules`` and is
not used. REMOVE / AGREE are identified by their number (the code matches the quoted rule text; a
number that exists is taken as meant). Duplicate detection is exact text (after whitespace and case
folding), not the code's substring test. A batch call is charged to its first task in the ledger.
Insights are shown with the draft (REVISE_WITH_RECORD); ExpeL puts them in the task prompt before
acting (``show="draft"`` would be that). The scripted executor carries only the *first* ``EDIT:`` line
of an item (:func:`cfjax.llm.prompts.parse_edit_line`), so of the insights item only the most agreed
concrete rule can change a draft; a real model reads them all.

**Paper / code disagreement.** The paper's pool holds at most 20 rules and a REMOVE at a full pool is
−3; the code has no hard cap (the "full" prompt suffix from 20 rules only asks the model to stop
adding) and weighs a REMOVE −3 only from 25 rules. The defaults follow the paper (``hard_cap=True``,
``full_margin=0``); ``hard_cap=False, full_margin=5`` is the code.

What a real model must do that the simulator only draws: contrast a failed with a successful trial
and write a general rule, decide whether it agrees with, refines or contradicts an existing rule,
judge a batch of successes against the rules, and follow a list of insights and few-shot examples
while acting (:mod:`cfjax.expel.pool_calls` says what is drawn).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from cfjax.expel.pool_calls import (EXPEL_COMPARE, EXPEL_SUCCESSES, CompareRequest, Op, OpsResult, SuccessesRequest,
                                    show_rule)
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.io import atomic_write_json, read_json
from cfjax.llm.extract import lessons_of
from cfjax.llm.prompts import render_memory_set, truncate
from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.types import Attempt, MemoryText, Task

__all__ = ["Rule", "InsightPool", "Example", "ExpeLOriginalSystem", "FORMAT", "STATS"]

#: the ``format`` tag of a saved store
FORMAT = "cfjax.expel.pool/1"
#: the pool's operation counters (summary and saved store)
STATS = ("add", "agree", "edit", "remove", "dropped", "ignored", "duplicates", "capped")


@dataclass
class Rule:
    text: str
    count: int


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class InsightPool:
    """ExpeL's rule list with vote counts (module docstring)."""

    def __init__(self, max_rules: int = 20, *, full_margin: int = 0, hard_cap: bool = True) -> None:
        if max_rules < 1 or full_margin < 0:
            raise ValueError(f"InsightPool: max_rules must be ≥ 1 and full_margin ≥ 0, got {max_rules}, {full_margin}")
        self.max_rules, self.full_margin, self.hard_cap = max_rules, full_margin, hard_cap
        self.rules: list[Rule] = []
        self.stats = {k: 0 for k in STATS}

    def texts(self) -> tuple[str, ...]:
        return tuple(r.text for r in self.rules)

    def full(self) -> bool:
        """The prompt's "full" suffix: the pool holds ``max_rules`` rules."""
        return len(self.rules) >= self.max_rules

    def apply(self, ops: Iterable[Op]) -> None:
        """One reply's operations, numbered as the rules stood when the model was shown them."""
        shown = list(self.rules)
        heavy = len(shown) >= self.max_rules + self.full_margin  # REMOVE weighs −3
        by_text = {_norm(r.text): i for i, r in enumerate(shown)}
        todo: list[tuple[str, Rule | None, str]] = []
        for op in ops:
            if op.kind == "ADD":
                if _norm(op.text) in by_text:
                    self.stats["duplicates"] += 1
                else:
                    todo.append(("ADD", None, op.text))
                continue
            if op.kind == "EDIT" and _norm(op.text) in by_text:  # the same text as a rule: agreeing with it
                todo.append(("AGREE", shown[by_text[_norm(op.text)]], ""))
                continue
            if op.number is None or not 1 <= op.number <= len(shown):
                self.stats["ignored"] += 1
                continue
            todo.append((op.kind, shown[op.number - 1], op.text))
        for kind in ("REMOVE", "AGREE", "EDIT", "ADD"):
            for k, rule, text in todo:
                if k != kind:
                    continue
                if kind == "REMOVE":
                    rule.count -= 3 if heavy else 1
                elif kind == "AGREE":
                    rule.count += 1
                elif kind == "EDIT":
                    rule.text, rule.count = text, rule.count + 1
                elif any(_norm(r.text) == _norm(text) for r in self.rules):
                    self.stats["duplicates"] += 1
                    continue
                elif self.hard_cap and sum(r.count > 0 for r in self.rules) >= self.max_rules:
                    self.stats["capped"] += 1
                    continue
                else:
                    self.rules.append(Rule(text, 2))
                self.stats[kind.lower()] += 1
        kept = [r for r in self.rules if r.count > 0]
        self.stats["dropped"] += len(self.rules) - len(kept)
        self.rules = sorted(kept, key=lambda r: -r.count)

    def __len__(self) -> int:
        return len(self.rules)


@dataclass(frozen=True)
class Example:
    """A task's shortest successful episode, kept for few-shot retrieval (``edit``: its contrast)."""

    task: Task
    attempts: tuple[Attempt, ...]
    edit: str | None  # "EDIT: b -> a" or None


class ExpeLOriginalSystem:
    """The original ExpeL as a :class:`~cfjax.memory.MemorySystem` (module docstring).

    Args:
      ctx: backbone, edit model and ledgers.
      max_rules: the pool's size (20); ``full_margin`` / ``hard_cap``: the paper (0, True) or code (5, False).
      success_batch: successes per EXPEL_SUCCESSES call (8).
      k_fewshot: few-shot successes shown (2, ExpeL's ALFWorld config).
      fewshot_contrast: show a few-shot's contrast ``EDIT:`` line (else the successful action only).
    """

    def __init__(self, ctx: SystemContext, *, max_rules: int = 20, full_margin: int = 0, hard_cap: bool = True,
                 success_batch: int = 8, k_fewshot: int = 2, fewshot_contrast: bool = True,
                 embedder: HashingEmbedder | None = None) -> None:
        if success_batch < 1 or k_fewshot < 0:
            raise ValueError(f"ExpeLOriginalSystem: success_batch ≥ 1 and k_fewshot ≥ 0, got {success_batch}, {k_fewshot}")
        self.ctx = ctx
        self.pool = InsightPool(max_rules, full_margin=full_margin, hard_cap=hard_cap)
        self.success_batch, self.k_fewshot, self.fewshot_contrast = success_batch, k_fewshot, fewshot_contrast
        self.embedder = embedder or HashingEmbedder()
        self.frozen = False
        self.tasks: dict[str, Task] = {}
        self.failed: dict[str, list[Attempt]] = {}
        self.succeeded: dict[str, list[Attempt]] = {}
        self.examples: dict[str, Example] = {}
        self.pending: list[tuple[str, Attempt]] = []
        self.calls = {"compare": 0, "successes": 0, "parse_failures": 0, "malformed": 0}

    # ------------------------------------------------------------------ learning
    def _edit_pool(self, res: OpsResult, task_id: str) -> None:
        self.ctx.ledger.llm(task_id, res.usage, verification=True)
        self.calls["parse_failures"] += int(res.parse_failed)
        self.calls["malformed"] += res.malformed
        self.pool.apply(res.ops)

    def _compare(self, task: Task, failed: Attempt, succeeded: Attempt, episode: int) -> None:
        req = CompareRequest(task, failed, succeeded, self.pool.texts(), self.pool.full(), episode)
        self.calls["compare"] += 1
        self._edit_pool(self.ctx.backbone.call(EXPEL_COMPARE, req), task.task_id)

    def _successes(self, batch: Sequence[tuple[str, Attempt]]) -> None:
        tasks = tuple(self.tasks[tid] for tid, _ in batch)
        req = SuccessesRequest(tasks, tuple(a for _, a in batch), self.pool.texts(), self.pool.full(),
                               self.calls["successes"])
        self.calls["successes"] += 1
        self._edit_pool(self.ctx.backbone.call(EXPEL_SUCCESSES, req), tasks[0].task_id)

    def _flush(self, partial: bool) -> None:
        while len(self.pending) >= self.success_batch or (partial and self.pending):
            batch, self.pending = self.pending[:self.success_batch], self.pending[self.success_batch:]
            self._successes(batch)

    def _contrast(self, exp: Experience) -> str | None:
        """The EDIT line a reader sees in a success that failed first (``lessons_of``; no draw when solved)."""
        if not self.fewshot_contrast or self.ctx.edits is None:
            return None
        found = lessons_of(SimpleNamespace(edits=self.ctx.edits), exp.task, exp.attempts, True, exp.episode)
        return found[0].edit_line() if found else None

    def _observe(self, exp: Experience) -> None:
        """Record the episode's trials and compare each new failed / successful pair of its task."""
        if not exp.attempts:
            return
        tid = exp.task.task_id
        self.tasks[tid] = exp.task
        old_f, old_s = self.failed.setdefault(tid, []), self.succeeded.setdefault(tid, [])
        new_s = [exp.attempts[-1]] if exp.solved else []
        new_f = [a for a in (exp.attempts[:-1] if exp.solved else exp.attempts) if a.score < 1.0]
        pairs = [(f, s) for s in old_s for f in new_f] + [(f, s) for s in new_s for f in old_f + new_f]
        for f, s in pairs:
            self._compare(exp.task, f, s, exp.episode)
        old_f += new_f
        old_s += new_s
        if exp.solved:
            self.pending.append((tid, exp.attempts[-1]))
            ex = self.examples.get(tid)
            if ex is None or len(exp.attempts) < len(ex.attempts):
                self.examples[tid] = Example(exp.task, exp.attempts, self._contrast(exp))

    def build(self, experience: Sequence[Experience]) -> None:
        """All comparisons, then the success batches of 8, the last one partial (``create_rules``)."""
        if self.frozen:
            raise FrozenMemoryError("ExpeL (original) memory is frozen: it cannot be built during evaluation")
        for exp in experience:
            self._observe(exp)
        self._flush(partial=True)

    def update(self, experience: Experience) -> None:
        if self.frozen:
            raise FrozenMemoryError("ExpeL (original) memory is frozen: no insight may change during held-out "
                                    "evaluation")
        self._observe(experience)
        self._flush(partial=False)

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def fewshots(self, task: Task) -> list[tuple[str, float]]:
        """The ``k_fewshot`` stored successes of other tasks most similar by question (ties: first stored)."""
        ids = [tid for tid in self.examples if tid != task.task_id]
        if not ids or self.k_fewshot == 0:
            return []
        q = self.embedder.embed_cached(task.question)
        sims = np.array([float(self.embedder.embed_cached(self.examples[t].task.question) @ q) for t in ids])
        order = np.argsort(-sims, kind="stable")[:self.k_fewshot]
        return [(ids[int(j)], float(sims[int(j)])) for j in order]

    def render_insights(self) -> str:
        body = "\n".join(f"{i}. {show_rule(r.text)}" for i, r in enumerate(self.pool.rules, 1))
        return f"Insights from earlier tasks (most agreed first; not checked on this task):\n{body}"

    def render_example(self, ex: Example) -> str:
        text = (f"A successful example of a similar task: {ex.task.question}\n"
                f"Solved with:\n{truncate(ex.attempts[-1].action, 'action')}")
        return text + (f"\n{ex.edit}" if ex.edit else "")

    def recall(self, query: RecallQuery) -> MemoryText | None:
        """All insights (one block each, most agreed first) plus the k most similar successes (module
        docstring); nothing is mutated."""
        # one block per insight (numbered as in the pool), so that every concrete rule is read on its own
        items = [(f"insight-{i}", f"Insight from earlier tasks (rank {i}; not checked on this task): "
                                  f"{show_rule(r.text)}") for i, r in enumerate(self.pool.rules, 1)]
        items += [(f"example-{i}", self.render_example(self.examples[tid]))
                  for i, (tid, _) in enumerate(self.fewshots(query.task), 1)]
        return MemoryText("memories", render_memory_set(items)) if items else None

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        atomic_write_json(Path(path), {
            "format": FORMAT,
            "rules": [[r.text, r.count] for r in self.pool.rules], "stats": dict(self.pool.stats),
            "calls": dict(self.calls), "tasks": {tid: _task_json(t) for tid, t in self.tasks.items()},
            "failed": {tid: _attempts_json(v) for tid, v in self.failed.items()},
            "succeeded": {tid: _attempts_json(v) for tid, v in self.succeeded.items()},
            "examples": {tid: [_attempts_json(e.attempts), e.edit] for tid, e in self.examples.items()},
            "pending": [[tid, _attempts_json([a])[0]] for tid, a in self.pending]})

    def load(self, path: Path) -> None:
        """Replace the memory with a saved store's.

        Raises:
          ValueError: one line naming the file and the field that is wrong."""
        data = read_json(Path(path))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: not an ExpeL (original) store (expected format {FORMAT!r})")

        def field(name: str, typ: type) -> Any:
            if not isinstance(data.get(name), typ):
                raise ValueError(f"{path}: field {name!r} must be a {typ.__name__}")
            return data[name]

        try:
            rules = [Rule(str(t), int(c)) for t, c in field("rules", list)]
            stats = {k: int(field("stats", dict).get(k, 0)) for k in STATS}
            calls = {k: int(field("calls", dict).get(k, 0)) for k in self.calls}
            tasks = {tid: _task_from(d) for tid, d in field("tasks", dict).items()}
            failed = {tid: _attempts_from(v) for tid, v in field("failed", dict).items()}
            succeeded = {tid: _attempts_from(v) for tid, v in field("succeeded", dict).items()}
            examples = {tid: Example(tasks[tid], tuple(_attempts_from(a)), None if e is None else str(e))
                        for tid, (a, e) in field("examples", dict).items()}
            pending = [(str(tid), _attempts_from([a])[0]) for tid, a in field("pending", list)]
            if any(tid not in tasks for tid, _ in pending):
                raise KeyError("pending")
        except (TypeError, ValueError, KeyError) as e:
            if isinstance(e, ValueError) and str(e).startswith(str(path)):
                raise
            raise ValueError(f"{path}: malformed ExpeL (original) store ({type(e).__name__}: {e})") from None
        self.pool.rules, self.pool.stats, self.calls = rules, stats, calls
        self.tasks, self.failed, self.succeeded, self.examples, self.pending = tasks, failed, succeeded, examples, pending

    def summary(self) -> dict:
        return {"insights": len(self.pool), "examples": len(self.examples), "pending_successes": len(self.pending),
                "compare_calls": self.calls["compare"], "success_calls": self.calls["successes"],
                "parse_failures": self.calls["parse_failures"], **{f"ops_{k}": v for k, v in self.pool.stats.items()}}

    def __len__(self) -> int:
        return len(self.pool)


def _attempts_json(attempts: Iterable[Attempt]) -> list[list[Any]]:
    return [[a.action, a.feedback, float(a.score)] for a in attempts]


def _attempts_from(rows: Any) -> list[Attempt]:
    return [Attempt(str(a), str(f), float(s)) for a, f, s in rows]


def _task_json(t: Task) -> dict:
    return {"task_id": t.task_id, "question": t.question, "env_id": t.env_id, "context": t.context,
            "attrs": dict(t.attrs), "domain": t.domain}


def _task_from(d: Any) -> Task:
    attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in dict(d["attrs"]).items()}
    return Task(str(d["task_id"]), str(d["question"]), str(d["env_id"]), str(d["context"]), attrs, str(d["domain"]))

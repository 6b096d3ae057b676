"""Baselines and interventions that are not CF Memory itself (papers/countermem.md §4.1, §6, App. D.5).

Every runner returns :class:`~cfjax.countermem.agent.Episode` objects with the
same :class:`~cfjax.countermem.agent.Decision` records as the CounterMem
agent, so one metrics function (:func:`cfjax.experiments.countermem.row_metrics`)
serves every row with the same denominators (App. D.4, D.6).

* :func:`best_of_n_episode` — the compute control: ``N = 1 + K = 5`` drafts
  per attempt, a backbone judge picks one with ``CHOICE: <n>`` (a parse
  failure falls back to candidate 1 and is counted); the verifier never
  chooses, only the chosen candidate is evaluated.
* :class:`ExpeLMemory` / :func:`expel_episode` — ExpeL-style lessons: after
  every source task the backbone extracts one lesson from the finished
  trajectory (EXPEL_INSIGHT), nothing is checked; at test time the most
  similar lesson is always shown (no selector, no applicability filter).
* :func:`wm_without_cf_episode` — *WM without CF* (§6.1): after a failed
  attempt, local alternatives of the current task are checked from the same
  state and the best one is used within the task; nothing is stored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from cfjax.config import CounterMemConfig
from cfjax.countermem.agent import Decision, Episode
from cfjax.countermem.generator import propose_alternatives
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.ledger import Ledger
from cfjax.llm import prompts
from cfjax.llm.base import Attempt, Backbone, DraftRequest, InsightRequest, JudgeRequest, ReviseRequest
from cfjax.domains.base import Task
from cfjax.types import EditModel, World

__all__ = ["JudgeLog", "best_of_n_episode", "ExpeLMemory", "build_expel", "expel_episode",
           "wm_without_cf_episode"]


@dataclass
class JudgeLog:
    """How often the Best-of-N judge's reply did not parse (fallback to candidate 1)."""

    calls: int = 0
    parse_failures: int = 0
    failed_replies: list[str] = field(default_factory=list)


def _decision(task: Task, attempt: int, draft: str, action: str, out, tokens: int, *, slot: int = 0,
              n_retrieved: int = 0, changed: bool = False, memory_tokens: int = 0, label: int | None = None,
              reference: float | None = None, calls: int = 1) -> Decision:
    return Decision(task.task_id, attempt, draft, action, slot, None, n_retrieved, changed, float(out.score),
                    bool(out.solved), tokens, calls, int(not out.solved), memory_tokens, label, reference)


def best_of_n_episode(task: Task, *, backbone: Backbone, world: World, config: CounterMemConfig, n: int,
                      ledger: Ledger, episode: int, judge_log: JudgeLog | None = None) -> Episode:
    """One task with Best-of-N sampling and an LLM judge (App. D.5)."""
    ep = Episode(task)
    history: list[Attempt] = []
    for attempt in range(config.agent.max_attempts):
        tokens = 0
        cands = []
        for j in range(n):
            dr = backbone.draft_action(DraftRequest(task, tuple(history), episode, sample=j))
            ledger.llm(task.task_id, dr.usage)
            tokens += dr.usage.total
            cands.append(dr.action)
        jr = backbone.judge_candidates(JudgeRequest(task, tuple(history), tuple(cands), episode))
        ledger.llm(task.task_id, jr.usage)
        tokens += jr.usage.total
        if judge_log is not None:
            judge_log.calls += 1
            if not jr.parsed:
                judge_log.parse_failures += 1
                if len(judge_log.failed_replies) < 20:
                    judge_log.failed_replies.append(jr.raw[:200])
        action = cands[jr.choice]
        out = world.evaluate(task, action)
        ledger.evaluation(task.task_id, out)
        ep.decisions.append(_decision(task, attempt, cands[0], action, out, tokens))
        history.append(Attempt(action, out.feedback, float(out.score)))
        if out.solved:
            break
    return ep


# --------------------------------------------------------------------------- ExpeL


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


def build_expel(tasks: list[Task], *, backbone: Backbone, world: World, config: CounterMemConfig,
                ledger: Ledger, episode0: int, embedder: HashingEmbedder | None = None) -> ExpeLMemory:
    """Solve each source task memory-free, then extract one lesson from its trajectory."""
    mem = ExpeLMemory(embedder or HashingEmbedder())
    for i, task in enumerate(tasks):
        history: list[Attempt] = []
        solved = False
        for _ in range(config.agent.max_attempts):
            dr = backbone.draft_action(DraftRequest(task, tuple(history), episode0 + i))
            ledger.llm(task.task_id, dr.usage)
            out = world.evaluate(task, dr.action)
            ledger.evaluation(task.task_id, out)
            history.append(Attempt(dr.action, out.feedback, float(out.score)))
            if out.solved:
                solved = True
                break
        ins = backbone.extract_insight(InsightRequest(task, tuple(history), solved, episode0 + i))
        ledger.llm(task.task_id, ins.usage, verification=True)
        if ins.lesson:
            mem.add(task.task_id, f"{task.question}\n{history[0].action}", ins.lesson)
    return mem


def expel_episode(task: Task, *, backbone: Backbone, world: World, config: CounterMemConfig, memory: ExpeLMemory,
                  edits: EditModel, ledger: Ledger, episode: int) -> Episode:
    """One task with the most similar lesson always in context (ExpeL-style)."""
    ep = Episode(task)
    history: list[Attempt] = []
    for attempt in range(config.agent.max_attempts):
        dr = backbone.draft_action(DraftRequest(task, tuple(history), episode))
        ledger.llm(task.task_id, dr.usage)
        tokens = dr.usage.total
        draft = action = dr.action
        hit = memory.top1(task, f"{task.question}\n{draft}")
        m_tokens = 0
        if hit is not None:
            rv = backbone.revise_with_record(ReviseRequest(task, tuple(history), draft,
                                                           prompts.render_lesson(memory.lessons[hit[0]]), episode))
            ledger.llm(task.task_id, rv.usage)
            tokens += rv.usage.total
            m_tokens = rv.usage.total
            action = rv.action
        out = world.evaluate(task, action)
        ledger.evaluation(task.task_id, out)
        changed = edits.normalize(action) != edits.normalize(draft)
        label = ref = None
        if hit is not None:
            from cfjax.countermem.agent import reuse_label

            ref = float(world.evaluate(task, draft).score) if changed else None  # measurement, off the ledger
            label = reuse_label(changed, out.solved, out.score, ref)
        ep.decisions.append(_decision(task, attempt, draft, action, out, tokens, slot=int(hit is not None),
                                      n_retrieved=int(hit is not None), changed=changed, memory_tokens=m_tokens,
                                      label=label, reference=ref))
        history.append(Attempt(action, out.feedback, float(out.score)))
        if out.solved:
            break
    return ep


# --------------------------------------------------------------------------- WM without CF


def wm_without_cf_episode(task: Task, *, backbone: Backbone, world: World, config: CounterMemConfig,
                          edits: EditModel, env: object | None, ledger: Ledger, episode: int) -> Episode:
    """Check local alternatives of the current task's failed attempts; keep nothing across tasks.

    After a failed, completed attempt (at most ``generator.max_expanded`` per
    task, ``generator.verification_budget`` checks), up to K alternatives are
    checked from the same state. A check that solves the task ends it solved;
    otherwise the best improving alternative joins the history the next
    draft sees. Checks count as evaluator calls (App. D.6).
    """
    g = config.generator
    ep = Episode(task)
    history: list[Attempt] = []
    rng = random.Random(episode)
    budget = g.verification_budget
    expanded = 0
    for attempt in range(config.agent.max_attempts):
        dr = backbone.draft_action(DraftRequest(task, tuple(history), episode))
        ledger.llm(task.task_id, dr.usage)
        tokens = dr.usage.total
        out = world.evaluate(task, dr.action)
        ledger.evaluation(task.task_id, out)
        history.append(Attempt(dr.action, out.feedback, float(out.score)))
        if out.solved or not out.completed or expanded >= g.max_expanded or budget <= 0:
            ep.decisions.append(_decision(task, attempt, dr.action, dr.action, out, tokens))
            if out.solved:
                break
            continue
        expanded += 1
        alt_ledger = Ledger("wm")
        alts = propose_alternatives(task, history[:-1], dr.action, out, backbone=backbone, config=g, schema=env,
                                    rng=rng, ledger=alt_ledger, episode=episode, edits=edits)
        tokens += alt_ledger.total.tokens
        ledger.merge(alt_ledger)
        best = None
        calls = 1
        for alt in alts:
            if budget <= 0:
                break
            budget -= 1
            o2 = world.evaluate(task, alt.action)
            ledger.evaluation(task.task_id, o2, verification=True)
            calls += 1
            if o2.solved:
                best = (alt.action, o2)
                break
            if o2.completed and o2.score > out.score + config.store.eps_adm and (best is None or o2.score > best[1].score):
                best = (alt.action, o2)
        if best is not None and best[1].solved:
            ep.decisions.append(_decision(task, attempt, dr.action, best[0], best[1], tokens, changed=True,
                                          calls=calls))
            break
        ep.decisions.append(_decision(task, attempt, dr.action, dr.action, out, tokens, calls=calls))
        if best is not None:
            history.append(Attempt(best[0], best[1].feedback, float(best[1].score)))
    return ep

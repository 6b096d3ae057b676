"""Baselines and interventions that are not CF Memory itself (papers/countermem.md §4.1, §6, App. D.5).

Every runner returns :class:`~cfjax.countermem.agent.Episode` objects with the
same :class:`~cfjax.countermem.agent.Decision` records as the CounterMem
agent, so one metrics function (:func:`cfjax.experiments.countermem.runner.row_metrics`)
serves every row with the same denominators (App. D.4, D.6).

* :func:`best_of_n_episode` — the compute control: ``N = 1 + K = 5`` drafts
  per attempt, a backbone judge picks one with ``CHOICE: <n>`` (a parse
  failure falls back to candidate 1 and is counted); the verifier never
  chooses, only the chosen candidate is evaluated.
* :func:`wm_without_cf_episode` — *WM without CF* (§6.1): after a failed
  attempt, local alternatives of the current task are checked from the same
  state and the best one is used within the task; nothing is stored.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from cfjax.config import CounterMemConfig
from cfjax.countermem.generator import propose_alternatives
from cfjax.infra.ledger import Ledger
from cfjax.loop import AfterResult, Decision, Episode, JudgeLog, best_of_n, draft_once, run_episode
from cfjax.types import Attempt, Backbone, EditModel, Outcome, Task, World

__all__ = ["JudgeLog", "best_of_n_episode", "wm_without_cf_episode"]


def best_of_n_episode(task: Task, *, backbone: Backbone, world: World, config: CounterMemConfig, n: int,
                      edits: EditModel, ledger: Ledger, episode: int, judge_log: JudgeLog | None = None,
                      workers: int = 1) -> Episode:
    """One task with Best-of-N sampling and an LLM judge (App. D.5); the N drafts of an attempt are
    requested on up to ``workers`` threads (identical results)."""
    return run_episode(task, world=world, edits=edits, ledger=ledger, episode=episode,
                       max_attempts=config.agent.max_attempts, draft=best_of_n(backbone, n, judge_log,
                                                                               workers=workers))


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
    rng = random.Random(episode)
    state = {"budget": g.verification_budget, "expanded": 0}

    def after(task: Task, history: Sequence[Attempt], d: Decision, out: Outcome, *, episode: int,
              ledger: Ledger) -> AfterResult | None:
        if out.solved or not out.completed or state["expanded"] >= g.max_expanded or state["budget"] <= 0:
            return None
        state["expanded"] += 1
        alt_ledger = Ledger("wm")
        alts = propose_alternatives(task, list(history), d.action, out, backbone=backbone, config=g, schema=env,
                                    rng=rng, ledger=alt_ledger, episode=episode, edits=edits)
        ledger.merge(alt_ledger)
        best = None
        calls = 0
        for alt in alts:
            if state["budget"] <= 0:
                break
            state["budget"] -= 1
            o2 = world.evaluate(task, alt.action)
            ledger.evaluation(task.task_id, o2, verification=True)
            calls += 1
            if o2.solved:
                best = (alt.action, o2)
                break
            if o2.completed and o2.score > out.score + config.store.eps_adm and (best is None or o2.score > best[1].score):
                best = (alt.action, o2)
        res = AfterResult(calls=calls, tokens=alt_ledger.total.tokens)
        if best is not None and best[1].solved:
            res.outcome, res.action, res.changed = best[1], best[0], True
        elif best is not None:
            res.extra_history = (Attempt(best[0], best[1].feedback, float(best[1].score)),)
        return res

    return run_episode(task, world=world, edits=edits, ledger=ledger, episode=episode,
                       max_attempts=config.agent.max_attempts, draft=draft_once(backbone), after=after)

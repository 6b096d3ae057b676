"""Row metrics with the paper's denominators (papers/countermem.md App. D.4–D.6, E.3).

* coverage — per retrieval opportunity (decisions at which retrieval was
  attempted): opportunities with ≥ 1 eligible record;
* harmful use — per selected record use: uses whose reuse label (App. B.3,
  against the memory-free draft) is −1;
* action changes and harmful changes — per *retrieved* record (Fig. 4d);
* rescued / broken — tasks that fail without memory and succeed with it, and
  the reverse, in runs paired with ``none`` on the same tasks (App. E.3);
* evaluator calls and failed attempts per solved task, total task-run tokens
  (App. D.6; counterfactual checks count as calls).

They read episodes and the ledger only (never an answer key: the transfer condition of each task
comes in ``conditions``, computed by the analysis side). :mod:`cfjax.experiments.metrics` re-exports
:func:`row_metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence

from cfjax.countermem.agent import Episode
from cfjax.infra.ledger import Ledger
from cfjax.types import TRANSFER_CONDITIONS

__all__ = ["row_metrics"]


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def row_metrics(episodes: Sequence[Episode], ledger: Ledger, *, memory: bool,
                conditions: dict[str, str] | None = None, paired: Sequence[Episode] | None = None) -> dict:
    """App. D.4–D.6 metrics of one row; ``by_condition`` repeats them per transfer condition."""

    def block(eps: Sequence[Episode], ref: Sequence[Episode] | None) -> dict:
        n = len(eps)
        solved = sum(ep.solved for ep in eps)
        decs = [d for ep in eps for d in ep.decisions]
        costs = [ledger.per_task[ep.task.task_id] for ep in eps if ep.task.task_id in ledger.per_task]
        tokens = sum(c.tokens for c in costs)
        calls = sum(c.eval_calls for c in costs)
        failed = sum(c.failed for c in costs)
        llm_calls = sum(c.llm_calls for c in costs)
        llm_failed = sum(c.llm_failed for c in costs)
        opp = len(decs) if memory else 0
        covered = sum(d.n_retrieved > 0 for d in decs) if memory else 0
        uses = [d for d in decs if d.slot > 0]
        harmful = sum(d.label == -1 for d in uses)
        retrieved = sum(d.n_retrieved for d in decs)
        changes = sum(d.changed for d in uses)
        harmful_changes = sum(d.changed and d.label == -1 for d in uses)
        out = {
            "n_tasks": n, "n_solved": solved, "success": 100.0 * solved / n if n else None,
            "tokens": tokens, "eval_calls": calls, "failed": failed,
            # LLM calls, and those with no usable reply after every retry (a parse failure: the
            # attempt went ahead with an empty reply and failed; never an exception)
            "llm_calls": llm_calls, "llm_failed": llm_failed,
            "calls_per_solved": _ratio(calls, solved), "failed_per_solved": _ratio(failed, solved),
            "memory_tokens_per_task": _ratio(sum(d.memory_tokens for d in decs), n),
            "opportunities": opp, "covered": covered, "coverage": _ratio(covered, opp) if memory else None,
            "selected_uses": len(uses), "harmful_uses": harmful,
            "harmful_use": _ratio(harmful, len(uses)) if memory else None,
            "retrieved_records": retrieved, "action_changes": changes, "harmful_changes": harmful_changes,
            "action_changes_per_retrieved": _ratio(changes, retrieved) if memory else None,
            "harmful_changes_per_retrieved": _ratio(harmful_changes, retrieved) if memory else None,
        }
        if ref is not None:
            rescued = sum((not a.solved) and b.solved for a, b in zip(ref, eps))
            broken = sum(a.solved and not b.solved for a, b in zip(ref, eps))
            out.update(rescued=rescued, broken=broken, net=rescued - broken)
        return out

    if paired is not None and [e.task.task_id for e in paired] != [e.task.task_id for e in episodes]:
        raise ValueError("paired runs must cover the same tasks in the same order")
    m = block(episodes, paired)
    if conditions is not None:
        m["by_condition"] = {}
        for c in TRANSFER_CONDITIONS:
            idx = [i for i, ep in enumerate(episodes) if conditions.get(ep.task.task_id) == c]
            if idx:
                m["by_condition"][c] = block([episodes[i] for i in idx],
                                             [paired[i] for i in idx] if paired is not None else None)
    return m

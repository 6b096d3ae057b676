"""The ReasoningBank studies of ``countermem run``: Fig. 2a–c with the memory systems beside CounterMem's
store, and Fig. 7 / App. E.2, every row at one common token budget (papers/countermem.md §4.1, §5, E.2).

**Accumulation and forgetting** (Fig. 2a, 2c; :func:`system_accumulation`). Each system of
``experiment.accumulation_systems`` (default: ReasoningBank, "the memory baseline in the accumulation,
transfer and fixed-budget studies") is updated over the *same* construction stream as CounterMem's
accumulation row — T_build then T_train in the seed's order, the same memory-free episodes (episode
ids ``EP_BUILD + 500 000 + i``) — and evaluated frozen on T_eval after 0/25/50/100/200 source tasks.
Fig. 2c (ours: the package names the panel, not its protocol): the earliest
``experiment.forgetting_tasks`` stream tasks are re-solved with each snapshot from the first one that
has seen all of them (episode ids ``EP_EARLY + i``, the same for every row and snapshot); the score
lost is the paired difference of that first snapshot's success on them and a later one's, with a
task-bootstrap 95% interval.

**Common token budget** (Fig. 7; :func:`budget_row`, row ``token_budget``, ``--token-budget N``).
App. E.2 gives every method "a common 6M-token task-run budget" and does not say how it is allocated
between construction and solving. Ours: ``N`` bounds each row's **construction** tokens per unit — the
row consumes the same stream, one source task at a time, until its construction ledger has spent ``N``
tokens (the task that crosses ``N`` is the last; the report prints what each row actually spent), then
it is frozen and evaluated on the same held-out tasks (their tokens are reported beside). CF Memory's
store is built by its construction episodes and used with the main run's trained selector (as the
accumulation snapshots are; offline selector training is not costed, as in the paper, line 538); the
memory systems are built by their own pipelines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from cfjax.countermem.agent import skip_policy, top1_policy
from cfjax.countermem.pipeline import EP_BUILD
from cfjax.countermem.store import MemoryStore
from cfjax.infra.concurrency import ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.infra.stats import Cluster, paired_difference
from cfjax.memory import SystemContext, build_experience, recall_episode, rollout_fn
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Task

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.experiments.countermem.runner import UnitContext

__all__ = ["EP_STREAM", "EP_EARLY", "early_outcomes", "system_accumulation", "budget_row", "forgetting"]

#: episode ids of the construction stream (shared with the accumulation row) and of the early re-solves
EP_STREAM = EP_BUILD + 500_000
EP_EARLY = 4_000_000


def early_outcomes(ctx: "UnitContext", tasks: Sequence[Task], episode: Callable[[Task, int, Ledger], object]
                   ) -> list[int]:
    """0/1 per task of ``tasks`` re-solved with frozen memory (episode ids ``EP_EARLY + i``; analysis,
    off the unit's ledgers: the cost figures are the held-out rows')."""
    return ordered_map(lambda i: int(episode(tasks[i], EP_EARLY + i, Ledger("early")).solved), range(len(tasks)),
                       pool=ctx.pool)


def _system(ctx: "UnitContext", name: str, ledger: Ledger):
    info = MEMORY_SYSTEMS.get(name)
    attempts = ctx.config.agent.max_attempts
    roll = rollout_fn(backbone=ctx.backbone, world=ctx.world, edits=ctx.suite.edits, ledger=ledger,
                      max_attempts=attempts)
    return info, info.make(SystemContext(ctx.backbone, ctx.suite.edits, attempts, ctx.seed, ledger, roll))


def _recall(ctx: "UnitContext", info, system, measure: bool = True):
    attempts = ctx.config.agent.max_attempts
    return lambda e, tk, ledger: recall_episode(tk, system, info, backbone=ctx.backbone, world=ctx.world,
                                                edits=ctx.suite.edits, ledger=ledger, episode=e,
                                                max_attempts=attempts, measure=measure)


def _stream_experience(ctx: "UnitContext", stream: Sequence[Task], lo: int, hi: int, ledger: Ledger):
    return build_experience(list(stream[lo:hi]), backbone=ctx.backbone, world=ctx.world, edits=ctx.suite.edits,
                            ledger=ledger, episode0=EP_STREAM + lo, max_attempts=ctx.config.agent.max_attempts,
                            pool=ctx.pool)


def system_accumulation(ctx: "UnitContext", name: str, stream: Sequence[Task], marks: Sequence[int],
                        early: Sequence[Task]) -> dict:
    """One memory system over the accumulation stream: held-out metrics at every checkpoint (rows
    ``accumulation_<name>_<n>``) and, from the first checkpoint that has seen every early task, their
    re-solves (module docstring)."""
    ledger = Ledger(f"accumulation/{name}/build")
    info, system = _system(ctx, name, ledger)
    points: dict[str, dict] = {}
    done = 0
    for n in marks:
        if n > len(stream):
            break
        for exp in _stream_experience(ctx, stream, done, n, ledger):
            system.update(exp)
        done = n
        system.freeze()
        m = ctx.run_rows(f"accumulation_{name}_{n}", _recall(ctx, info, system), memory=True)
        m.update({"memory": system.summary()})
        if early and n >= len(early):
            m["early"] = early_outcomes(ctx, early, lambda t, e, led: _recall(ctx, info, system, False)(e, t, led))
        system.unfreeze()
        points[str(n)] = m
    return points


def cf_early(ctx: "UnitContext", snap: MemoryStore, early: Sequence[Task]) -> list[int]:
    """The early re-solves with a CounterMem snapshot and the main run's greedy selector."""
    agent, greedy = ctx.agent(snap), ctx.main.greedy
    return early_outcomes(ctx, early, lambda t, e, led: agent.run_episode(t, greedy, led, episode=e, memory=True))


def forgetting(units: Sequence[dict[str, dict]], n_boot: int = 2000) -> dict:
    """Fig. 2c over units (one cluster each; each unit's early tasks are its own stream's): success on
    the early tasks per checkpoint that has their re-solves, and each later checkpoint's paired
    difference against the first (``lost``: negative = score lost), task-bootstrap 95% intervals."""
    marks = sorted({n for pts in units for n in pts if "early" in pts[n]}, key=int)
    marks = [n for n in marks if all(n in pts and "early" in pts[n] for pts in units)]
    if not marks:
        return {}
    first = marks[0]
    cl = [Cluster({n: np.asarray([pts[n]["early"]], float) for n in marks}, weight=1.0 / len(units)) for pts in units]
    from cfjax.infra.stats import bootstrap

    return {"reference": int(first), "tasks": [len(pts[first]["early"]) for pts in units],
            "success": {n: bootstrap(cl, n, n_boot=n_boot).as_dict() for n in marks},
            "lost": {n: paired_difference(cl, n, first, n_boot=n_boot).as_dict() for n in marks[1:]}}


def budget_row(ctx: "UnitContext") -> dict:
    """Fig. 7: every row of ``experiment.budget_rows`` built from the stream to ``experiment.token_budget``
    construction tokens, then evaluated frozen (rows ``budget_<row>``; module docstring)."""
    cfg = ctx.config
    budget = cfg.experiment.token_budget
    if budget <= 0:
        return {"budget": 0, "rows": {}, "note": "off (countermem run --token-budget N)"}
    import random

    stream = list(ctx.splits.build) + list(ctx.splits.train)
    random.Random(ctx.seed).shuffle(stream)
    out: dict[str, dict] = {}
    for row in cfg.experiment.budget_rows:
        if row == "cf_memory":
            store = MemoryStore(cfg.store, cfg.retrieval, edits=ctx.suite.edits)
            agent = ctx.agent(store)
            rng = random.Random(ctx.seed)
            led = Ledger("budget/cf_memory")
            policy = top1_policy if cfg.agent.construction_uses_memory else skip_policy
            n = 0
            while n < len(stream) and led.total.tokens < budget:
                agent.run_episode(stream[n], policy, led, episode=EP_STREAM + n, construct=True, rng=rng)
                n += 1
            snap = MemoryStore.from_payload(store.to_payload(), ctx.suite.edits)
            snap.freeze()
            m = ctx.agent_rows(f"budget_{row}", ctx.agent(snap), ctx.main.greedy, memory=True)
            m["records"] = len(snap)
        else:
            led = Ledger(f"budget/{row}")
            info, system = _system(ctx, row, led)
            n = 0
            while n < len(stream) and led.total.tokens < budget:
                for exp in _stream_experience(ctx, stream, n, n + 1, led):
                    system.update(exp)
                n += 1
            system.freeze()
            m = ctx.run_rows(f"budget_{row}", _recall(ctx, info, system), memory=True)
            m["memory"] = system.summary()
        m.update({"spent": led.total.tokens, "source_tasks": n, "budget": budget,
                  "eval_tokens": m.get("tokens")})
        out[row] = m
    return {"budget": budget, "rows": out}

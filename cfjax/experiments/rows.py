"""The row registry of the CounterMem runner: every Table 1 / §6 row is a name mapped to a spec.

papers/countermem.md §4–6, App. D.3–D.6. ``none`` and ``cf_memory`` (the
pairing reference and the full method whose selector the interventions
reuse) are run by :func:`cfjax.experiments.countermem.run_unit` itself; every
other row is a :class:`RowSpec` here — ``run(ctx) -> metrics`` on the unit's
:class:`~cfjax.experiments.countermem.UnitContext` — so adding a row is one
function and one registry entry, not a branch in the runner.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cfjax.countermem import baselines as B
from cfjax.countermem.agent import skip_policy, top1_policy
from cfjax.countermem.pipeline import _EP_BUILD, _greedy_policy, construct, jitted_selector, train_selector
from cfjax.countermem.store import MemoryStore, Retrieved
from cfjax.infra.ledger import Ledger
from cfjax.llm.scripted import stable_seed
from cfjax.types import Task

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.experiments.countermem import UnitContext

__all__ = ["RowSpec", "ROW_SPECS", "MAIN_ROWS", "ABLATION_ROWS", "RETRIEVAL_ROWS", "GROUP_ROWS", "ROWS",
           "RETENTION_RULES"]

MAIN_ROWS = ("none", "best_of_n", "expel", "cf_memory")
ABLATION_ROWS = ("cf_without_wm", "wm_without_cf", "draft_check_labels")
RETRIEVAL_ROWS = ("random_retrieval", "shuffled_retrieval", "no_condition")
GROUP_ROWS = ("retention", "accumulation")
ROWS = MAIN_ROWS + ABLATION_ROWS + RETRIEVAL_ROWS + GROUP_ROWS
RETENTION_RULES = ("utility", "similarity", "recency", "random")


@dataclass(frozen=True)
class RowSpec:
    """One row: ``run(ctx)`` returns its metrics; ``section`` is where the result goes
    (``"rows"`` for a Table 1 / §6 row, ``"groups"`` for a family of rows such as retention)."""

    run: Callable[["UnitContext"], dict]
    section: str = "rows"


def _best_of_n(ctx: "UnitContext") -> dict:
    """App. D.5 compute control: N = 1 + K drafts per attempt, a backbone judge picks one."""
    jl = B.JudgeLog()
    m = ctx.run_rows("best_of_n", lambda e, tk, led: B.best_of_n_episode(
        tk, backbone=ctx.backbone, world=ctx.world, config=ctx.config, n=ctx.config.experiment.best_of_n,
        edits=ctx.suite.edits, ledger=led, episode=e, judge_log=jl, workers=ctx.threads), memory=False)
    m["judge"] = {"calls": jl.calls, "parse_failures": jl.parse_failures, "failed_replies": jl.failed_replies}
    return m


def _expel(ctx: "UnitContext") -> dict:
    """ExpeL-style lessons from T_build trajectories, the most similar one always shown."""
    from cfjax.expel import build_expel, expel_episode

    mem = build_expel(list(ctx.splits.build), backbone=ctx.backbone, world=ctx.world,
                      max_attempts=ctx.config.agent.max_attempts,
                        edits=ctx.suite.edits, ledger=Ledger("expel/build"), episode0=_EP_BUILD)
    m = ctx.run_rows("expel", lambda e, tk, led: expel_episode(
        tk, backbone=ctx.backbone, world=ctx.world, max_attempts=ctx.config.agent.max_attempts, memory=mem, edits=ctx.suite.edits,
        ledger=led, episode=e), memory=True)
    m["lessons"] = len(mem)
    return m


def _rebuilt(ctx: "UnitContext", name: str, cfg) -> dict:
    """A row whose store is constructed under ``cfg`` and whose own selector is trained on it (the
    same construction seed and selector seed as the main run)."""
    st = MemoryStore(cfg.store, cfg.retrieval, edits=ctx.suite.edits)
    ag = ctx.agent(st, cfg)
    construct(ag, ctx.splits.build, seed=ctx.seed, progress=ctx.progress)
    params, _, _ = train_selector(ag, ctx.splits.train, ctx.splits.val, seed=ctx.selector_seed, progress=ctx.progress)
    m = ctx.agent_rows(name, ag, _greedy_policy(jitted_selector(cfg.dqn), params), memory=True)
    m["records"] = len(st)
    return m


def _cf_without_wm(ctx: "UnitContext") -> dict:
    """§6.1: unverified advice stored (no counterfactual check); its own selector is trained on it."""
    config = ctx.config
    return _rebuilt(ctx, "cf_without_wm",
                    dataclasses.replace(config, generator=dataclasses.replace(config.generator, verify=False)))


def _draft_check_labels(ctx: "UnitContext") -> dict:
    """Eq. 6 labels against an extra check of the memory-free draft (our option) instead of the
    paper's previous evaluated attempt; store and selector rebuilt under it."""
    config = ctx.config
    ref = "draft_check" if config.agent.construction_reference != "draft_check" else "previous_attempt"
    return _rebuilt(ctx, "draft_check_labels",
                    dataclasses.replace(config, agent=dataclasses.replace(config.agent, construction_reference=ref)))


def _wm_without_cf(ctx: "UnitContext") -> dict:
    """§6.1: alternatives checked within the current task, nothing stored."""
    envs = ctx.suite.envs()
    return ctx.run_rows("wm_without_cf", lambda e, tk, led: B.wm_without_cf_episode(
        tk, backbone=ctx.backbone, world=ctx.world, config=ctx.config, edits=ctx.suite.edits,
        env=envs.get(tk.env_id), ledger=led, episode=e), memory=False)


def _random_retrieval(ctx: "UnitContext") -> dict:
    ag = ctx.agent(ctx.main.store, retriever=_random_retriever(ctx.main.store, ctx.seed))
    return ctx.agent_rows("random_retrieval", ag, ctx.main.greedy, memory=True)


def _shuffled_retrieval(ctx: "UnitContext") -> dict:
    ag = ctx.agent(ctx.main.store, retriever=_shuffled_retriever(ctx.main.store, ctx.splits.eval, ctx.seed))
    return ctx.agent_rows("shuffled_retrieval", ag, ctx.main.greedy, memory=True)


def _no_condition(ctx: "UnitContext") -> dict:
    """App. E.3: the condition dropped from the filter and from the rendered record."""
    cfg_nc = dataclasses.replace(ctx.config, retrieval=dataclasses.replace(ctx.config.retrieval, use_conditions=False))
    return ctx.agent_rows("no_condition", ctx.agent(ctx.main.store, cfg_nc), ctx.main.greedy, memory=True)


def _retention(ctx: "UnitContext") -> dict:
    """Fig. 2d: each retention rule at equal capacity (``retention_fraction`` × the main store's size)."""
    config, seed = ctx.config, ctx.seed
    group = {}
    cap = max(1, round(config.experiment.retention_fraction * len(ctx.main.store)))
    for rule in RETENTION_RULES:
        cfg_r = dataclasses.replace(config, store=dataclasses.replace(
            config.store, capacity=cap, retention=rule, seed=seed))
        st_r = MemoryStore(cfg_r.store, cfg_r.retrieval, edits=ctx.suite.edits)
        construct(ctx.agent(st_r, cfg_r), ctx.splits.build, seed=seed, progress=ctx.progress)
        m = ctx.agent_rows(f"retention_{rule}", ctx.agent(st_r, cfg_r), ctx.main.greedy, memory=True)
        m["records"] = len(st_r)
        group[rule] = m
    return {"capacity": cap, "rules": group}


def _random_retriever(store: MemoryStore, seed: int) -> Callable:
    """§6.2 random retrieval: k records drawn uniformly from the store (no matching, no filter);
    the features carry their true similarity to the current state."""
    rids = sorted(store.records)

    def retrieve(task: Task, state: str, emb: np.ndarray, attempt: int, use_conditions: bool) -> list[Retrieved]:
        pool = [r for r in rids if store.records[r].source_task != task.task_id]
        rng = random.Random(stable_seed("random_retrieval", seed, task.task_id, attempt))
        pick = rng.sample(pool, min(store.retrieval.k, len(pool)))
        out = []
        for rid in pick:
            rel = float(store._situation[rid] @ emb)
            st = store.stats[rid]
            out.append(Retrieved(store.records[rid], st, rel, rel + store.retrieval.lambda_reuse * st.u))
        out.sort(key=lambda r: -r.score)
        return out

    return retrieve


def _shuffled_retriever(store: MemoryStore, tasks: Sequence[Task], seed: int) -> Callable:
    """§6.2 shuffled retrieval: each held-out task receives the records matched (Eq. 7–8) to the
    state of another held-out task (a seeded derangement)."""
    ids = [t.task_id for t in tasks]
    rng = random.Random(seed)
    perm = list(range(len(ids)))
    if len(ids) > 1:
        while any(i == p for i, p in enumerate(perm)):
            rng.shuffle(perm)
    other = {ids[i]: tasks[p] for i, p in enumerate(perm)}

    def retrieve(task: Task, state: str, emb: np.ndarray, attempt: int, use_conditions: bool) -> list[Retrieved]:
        o = other.get(task.task_id, task)
        return store.retrieve(o, o.question, use_conditions=use_conditions)

    return retrieve


def _accumulation(ctx: "UnitContext") -> dict:
    """App. D.3: one construction stream (T_build then T_train in a seed-dependent order, never
    T_eval), the store saved after 0/25/50/100/200 source tasks, each snapshot evaluated
    frozen with the main run's selector. Checkpoints beyond the stream are skipped (reported)."""
    cfg = ctx.config
    seed, greedy = ctx.seed, ctx.main.greedy
    stream = list(ctx.splits.build) + list(ctx.splits.train)
    random.Random(seed).shuffle(stream)
    marks = sorted(set(cfg.experiment.accumulation_checkpoints))
    store = MemoryStore(cfg.store, cfg.retrieval, edits=ctx.suite.edits)
    agent = ctx.agent(store)
    rng = random.Random(seed)
    ledger = Ledger("accumulation/build")
    policy = top1_policy if cfg.agent.construction_uses_memory else skip_policy
    points: dict[str, dict] = {}
    done = 0
    for n in marks:
        if n > len(stream):
            break
        while done < n:
            agent.run_episode(stream[done], policy, ledger, episode=_EP_BUILD + 500_000 + done, construct=True,
                              rng=rng)
            done += 1
        snap = MemoryStore.from_payload(store.to_payload(), ctx.suite.edits)
        snap.freeze()
        m = ctx.agent_rows(f"accumulation_{n}", ctx.agent(snap), greedy, memory=True)
        m["records"] = len(snap)
        points[str(n)] = m
    return {"stream": len(stream), "checkpoints": points,
            "skipped": [n for n in marks if n > len(stream)]}


#: every row but ``none`` and ``cf_memory``, in the runner's (and the report's) order
ROW_SPECS: dict[str, RowSpec] = {
    "best_of_n": RowSpec(_best_of_n),
    "expel": RowSpec(_expel),
    "cf_without_wm": RowSpec(_cf_without_wm),
    "wm_without_cf": RowSpec(_wm_without_cf),
    "draft_check_labels": RowSpec(_draft_check_labels),
    "random_retrieval": RowSpec(_random_retrieval),
    "shuffled_retrieval": RowSpec(_shuffled_retrieval),
    "no_condition": RowSpec(_no_condition),
    "retention": RowSpec(_retention, section="groups"),
    "accumulation": RowSpec(_accumulation, section="groups"),
}
assert set(ROW_SPECS) == set(ROWS) - {"none", "cf_memory"}

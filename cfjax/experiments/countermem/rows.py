"""The rows of ``countermem run``: one registry of specs with roles (papers/countermem.md §4–6, D.3–D.6).

Every Table 1 / §6 row is a :class:`RowSpec` registered in :data:`cfjax.registry.ROWS` under
``countermem/<name>``: ``run(ctx) -> metrics`` on the unit's
:class:`~cfjax.experiments.countermem.runner.UnitContext`, plus its roles — the table it belongs to, what it is
paired against and whether it uses memory. The runner, ``--rows`` and the report derive everything
from the specs (:func:`row_specs`): there is no list of row names anywhere else, and a row added here
(or a memory system registered in :data:`cfjax.registry.MEMORY_SYSTEMS`, which becomes a Table 1 row
through :func:`cfjax.memory.recall_episode`) appears in the run, the tables and the help without an
edit to the runner or the report.

``none`` and ``cf_memory`` (the pairing reference and the full method whose selector the interventions
reuse) are run by :func:`cfjax.experiments.countermem.runner.run_unit` itself (``run=None``).
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
from cfjax.countermem.pipeline import EP_BUILD, greedy_policy, construct, jitted_selector, train_selector
from cfjax.countermem.store import MemoryStore, Retrieved
from cfjax.experiments.countermem.studies import budget_row, cf_early, system_accumulation
from cfjax.infra.concurrency import ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.loop import DraftPrefetch
from cfjax.llm.scripted import stable_seed
from cfjax.memory import MemorySystemInfo, SystemContext, build_experience, recall_episode, rollout_fn
from cfjax.registry import MEMORY_SYSTEMS, ROWS
from cfjax.types import Task

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.experiments.countermem.runner import UnitContext

__all__ = ["RowSpec", "TABLES", "RETENTION_RULES", "row_specs", "row_names", "rows_in", "register_row",
           "memory_row", "construction_costs"]

RETENTION_RULES = ("utility", "similarity", "recency", "random")
#: the report's tables, in print order: key → title
TABLES = {"table1": "Table 1 — memory mechanisms", "ablations": "§6.1 ablations", "retrieval": "§6.2 retrieval controls",
          "groups": "families of rows (Fig. 2)"}
#: where memory-system rows go among the built-in Table 1 rows (after this one)
_SYSTEMS_AFTER = "best_of_n"


@dataclass(frozen=True)
class RowSpec:
    """One row of ``countermem run`` and its roles.

    Attributes:
      name: the row name (``--rows``, results, tables).
      run: ``ctx → metrics`` (``None`` for ``none`` and ``cf_memory``, which ``run_unit`` runs).
      table: which table it belongs to (:data:`TABLES`).
      paired: what its difference is reported against besides ``none``: ``"none"`` only, or
        ``"cf_memory"`` (the ablations and retrieval controls).
      memory: whether it uses memory (coverage, harmful use and changes per retrieved record apply).
      section: ``"rows"`` (one row) or ``"groups"`` (a family of rows, e.g. retention).
      transfer: shown in the transfer figure (App. D.4).
      description: one line for ``--rows`` help.
      needs_main: it reads the full method's store or selector (``ctx.main``), so it starts once
        they are built; a row that builds everything itself (``False``) starts at once, beside the
        main construction and training (when the unit runs rows concurrently).
    """

    name: str
    run: Callable[["UnitContext"], dict] | None
    table: str = "table1"
    paired: str = "none"
    memory: bool = True
    section: str = "rows"
    transfer: bool = False
    description: str = ""
    needs_main: bool = True

    def __post_init__(self) -> None:
        if self.table not in TABLES:
            raise ValueError(f"RowSpec {self.name!r}: table must be one of {', '.join(TABLES)}, got {self.table!r}")
        if self.paired not in ("none", "cf_memory"):
            raise ValueError(f"RowSpec {self.name!r}: paired must be 'none' or 'cf_memory', got {self.paired!r}")

    @property
    def refs(self) -> tuple[str, ...]:
        """The rows its paired differences are reported against."""
        return ("none",) if self.paired == "none" else ("none", "cf_memory")


_PREFIX = "countermem/"


def register_row(spec: RowSpec) -> RowSpec:
    """Add a row to ``countermem run`` (:data:`cfjax.registry.ROWS` under ``countermem/<name>``)."""
    return ROWS.register(_PREFIX + spec.name, spec)


def construction_costs(ledger: Ledger) -> dict:
    """A row's construction cost (its build ledger: every episode, evaluator check and model call of
    building memory), beside the held-out task-run costs of :func:`~cfjax.countermem.metrics.row_metrics`."""
    c = ledger.total
    return {"llm_calls": c.llm_calls, "tokens": c.tokens, "eval_calls": c.eval_calls}


def memory_row(info: MemorySystemInfo) -> RowSpec:
    """The Table 1 row of a registered memory system: built from T_build's memory-free episodes,
    frozen, and evaluated with its recall (:func:`cfjax.memory.recall_episode`)."""

    def run(ctx: "UnitContext") -> dict:
        led = Ledger(f"{info.name}/build")
        max_attempts = ctx.config.agent.max_attempts
        roll = rollout_fn(backbone=ctx.backbone, world=ctx.world, edits=ctx.suite.edits, ledger=led,
                          max_attempts=max_attempts)
        system = info.make(SystemContext(ctx.backbone, ctx.suite.edits, max_attempts, ctx.seed, led, roll))
        system.build(build_experience(list(ctx.splits.build), backbone=ctx.backbone, world=ctx.world,
                                      edits=ctx.suite.edits, ledger=led, episode0=EP_BUILD,
                                      max_attempts=max_attempts, pool=ctx.pool))
        system.freeze()
        m = ctx.run_rows(info.name, lambda e, tk, ledger: recall_episode(
            tk, system, info, backbone=ctx.backbone, world=ctx.world, edits=ctx.suite.edits, ledger=ledger,
            episode=e, max_attempts=max_attempts), memory=True)
        m.update(system.summary())
        m["construction"] = construction_costs(led)
        return m

    return RowSpec(info.name, run, table=info.table, paired="none", memory=True, transfer=True,
                   description=info.description, needs_main=False)


def row_specs() -> dict[str, RowSpec]:
    """Every row of ``countermem run`` in run and report order: the built-in rows, with the registered
    memory systems that fit this runner placed after ``best_of_n`` in Table 1."""
    builtin = [spec for name, spec in ROWS.items() if name.startswith(_PREFIX)]
    systems = [memory_row(info) for info in MEMORY_SYSTEMS.values() if "countermem" in info.runners]
    out: dict[str, RowSpec] = {}
    for spec in builtin:
        out[spec.name] = spec
        if spec.name == _SYSTEMS_AFTER:
            out.update((s.name, s) for s in systems if s.name not in out)
    out.update((s.name, s) for s in systems if s.name not in out)
    return out


def row_names() -> tuple[str, ...]:
    """Every row name, in order (``--rows all``)."""
    return tuple(row_specs())


def rows_in(table: str, names: Sequence[str] | None = None) -> list[str]:
    """The rows of ``table`` (optionally among ``names``), in order."""
    return [n for n, s in row_specs().items() if s.table == table and (names is None or n in names)]


def _best_of_n(ctx: "UnitContext") -> dict:
    """App. D.5 compute control: N = 1 + K drafts per attempt, a backbone judge picks one."""
    jl = B.JudgeLog()
    m = ctx.run_rows("best_of_n", lambda e, tk, led: B.best_of_n_episode(
        tk, backbone=ctx.backbone, world=ctx.world, config=ctx.config, n=ctx.config.experiment.best_of_n,
        edits=ctx.suite.edits, ledger=led, episode=e, judge_log=jl, workers=ctx.threads), memory=False)
    m["judge"] = {"calls": jl.calls, "parse_failures": jl.parse_failures, "failed_replies": jl.failed_replies}
    return m


def _rebuilt(ctx: "UnitContext", name: str, cfg) -> dict:
    """A row whose store is constructed under ``cfg`` and whose own selector is trained on it (the
    same construction seed and selector seed as the main run)."""
    st = MemoryStore(cfg.store, cfg.retrieval, edits=ctx.suite.edits)
    ag = ctx.agent(st, cfg)
    construct(ag, ctx.splits.build, seed=ctx.seed, progress=ctx.progress, pool=ctx.pool)
    params, _, _ = train_selector(ag, ctx.splits.train, ctx.splits.val, seed=ctx.selector_seed, progress=ctx.progress,
                                  pool=ctx.pool)
    m = ctx.agent_rows(name, ag, greedy_policy(jitted_selector(cfg.dqn), params), memory=True)
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
    cap = max(1, round(config.experiment.retention_fraction * len(ctx.main.store)))

    def one(rule: str) -> dict:
        cfg_r = dataclasses.replace(config, store=dataclasses.replace(
            config.store, capacity=cap, retention=rule, seed=seed))
        st_r = MemoryStore(cfg_r.store, cfg_r.retrieval, edits=ctx.suite.edits)
        construct(ctx.agent(st_r, cfg_r), ctx.splits.build, seed=seed, progress=ctx.progress, pool=ctx.pool)
        m = ctx.agent_rows(f"retention_{rule}", ctx.agent(st_r, cfg_r), ctx.main.greedy, memory=True)
        m["records"] = len(st_r)
        return m

    # the rules' stores are independent: with a unit pool they are built and evaluated at once (their
    # own threads: each waits on its episodes in the pool, so they must not occupy its workers)
    ms = ordered_map(one, RETENTION_RULES, len(RETENTION_RULES) if ctx.pool is not None else 1)
    group = dict(zip(RETENTION_RULES, ms))
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
    early = stream[:min(cfg.experiment.forgetting_tasks, len(stream))]
    store = MemoryStore(cfg.store, cfg.retrieval, edits=ctx.suite.edits)
    agent = ctx.agent(store)
    rng = random.Random(seed)
    ledger = Ledger("accumulation/build")
    policy = top1_policy if cfg.agent.construction_uses_memory else skip_policy
    points: dict[str, dict] = {}
    done = 0
    last = max([n for n in marks if n <= len(stream)], default=0)
    prefetch = DraftPrefetch(ctx.backbone, ctx.pool) if ctx.pool is not None else None
    if prefetch is not None:  # the stream's first drafts: every one up to the last checkpoint is taken
        prefetch.ahead((stream[i], EP_BUILD + 500_000 + i) for i in range(last))
    for n in marks:
        if n > len(stream):
            break
        while done < n:
            agent.run_episode(stream[done], policy, ledger, episode=EP_BUILD + 500_000 + done, construct=True,
                              rng=rng, prefetch=prefetch)
            done += 1
        snap = MemoryStore.from_payload(store.to_payload(), ctx.suite.edits)
        snap.freeze()
        m = ctx.agent_rows(f"accumulation_{n}", ctx.agent(snap), greedy, memory=True)
        m["records"] = len(snap)
        if early and n >= len(early):  # Fig. 2c: the earliest stream tasks re-solved with this snapshot
            m["early"] = cf_early(ctx, snap, early)
        points[str(n)] = m
    if prefetch is not None:
        prefetch.close()
    systems = {name: system_accumulation(ctx, name, stream, marks, early)
               for name in cfg.experiment.accumulation_systems}
    return {"stream": len(stream), "checkpoints": points, "systems": systems, "early_tasks": len(early),
            "skipped": [n for n in marks if n > len(stream)]}


for _spec in (
    RowSpec("none", None, memory=False, transfer=True, needs_main=False, description="no memory (the base agent)"),
    RowSpec("best_of_n", _best_of_n, memory=False,
            needs_main=False, description="N = 1 + K drafts per attempt, a backbone judge picks one (App. D.5)"),
    RowSpec("cf_memory", None, transfer=True,
            description="the full method: verified store + trained DQN selector (Algorithm 1)"),
    RowSpec("cf_without_wm", _cf_without_wm, table="ablations", paired="cf_memory",
            needs_main=False, description="unverified advice stored; its own selector trained on it (§6.1)"),
    RowSpec("wm_without_cf", _wm_without_cf, table="ablations", paired="cf_memory", memory=False,
            needs_main=False, description="alternatives checked within the task, nothing stored (§6.1)"),
    RowSpec("draft_check_labels", _draft_check_labels, table="ablations", paired="cf_memory",
            needs_main=False, description="Eq. 6 labelled against an extra check of the draft (store and selector rebuilt)"),
    RowSpec("random_retrieval", _random_retrieval, table="retrieval", paired="cf_memory",
            description="k records sampled from the whole store (§6.2)"),
    RowSpec("shuffled_retrieval", _shuffled_retrieval, table="retrieval", paired="cf_memory",
            description="the records matched to another held-out task's state (§6.2)"),
    RowSpec("no_condition", _no_condition, table="retrieval", paired="cf_memory", transfer=True,
            description="condition dropped from the filter and the rendered record (App. E.3)"),
    RowSpec("retention", _retention, table="groups", section="groups",
            description="retention rules at equal capacity (Fig. 2d)"),
    RowSpec("accumulation", _accumulation, table="groups", section="groups",
            description="the store (and ReasoningBank) after 0/25/50/100/200 source tasks; Fig. 2c forgetting"),
    RowSpec("token_budget", budget_row, table="groups", section="groups",
            description="Fig. 7: CF Memory and ReasoningBank (+ MaTTS, + verified) at --token-budget N"),
):
    register_row(_spec)

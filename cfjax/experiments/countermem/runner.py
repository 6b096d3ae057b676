"""Every row of Table 1 and §6 on every built-in suite, from one shared runner.

papers/countermem.md §4–6, App. D.3–D.6, E.3. One *unit* is one suite × one
seed; within it the memory-free drafts are identical across rows (the
backbone's randomness is keyed by task, episode id, attempt and sample), so
every row is paired with ``none`` on the same held-out tasks:

=====================  ========================================================================
row                    what changes (store / selector / retrieval)
=====================  ========================================================================
none                   no memory (the base agent)
best_of_n              N = 1 + K = 5 drafts per attempt, a backbone judge picks (App. D.5)
expel                  ExpeL-style lessons from T_build, most similar always shown
cf_memory              the full method: verified store + trained DQN selector (Algorithm 1)
cf_without_wm          unverified advice stored (§6.1); its own selector is trained on it
wm_without_cf          alternatives checked within the task, nothing stored (§6.1)
draft_check_labels     Eq. 6 labelled against an extra check of the draft, not the previous attempt
random_retrieval       k records sampled from the whole store, no state matching (§6.2)
shuffled_retrieval     the records matched to another held-out task's state (§6.2)
no_condition           condition dropped from the filter and the rendered record (App. E.3)
retention_<rule>       equal capacity (``retention_fraction`` × main store size), rule utility/similarity/recency/random
accumulation_<n>       the store after n source tasks of a longer stream (0/25/50/100/200)
=====================  ========================================================================

The interventions (random, shuffled, no_condition, retention, accumulation)
keep the main run's trained selector unchanged, as App. D.3 and D.5
prescribe ("only the memory snapshot changes"; "not a comparison between a
trained selector and a fixed selection rule").

Metrics (:func:`row_metrics`) use the paper's denominators: coverage per
retrieval opportunity, harmful use per selected record use, action changes
and harmful changes per retrieved record, rescued/broken tasks against the
paired ``none`` run, evaluator calls and failed attempts per solved task,
total task-run tokens — overall and per transfer condition (App. D.4).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cfjax.config import CounterMemConfig
from cfjax.countermem.agent import Agent, Episode, Policy, skip_policy
from cfjax.countermem.metrics import row_metrics
from cfjax.countermem.pipeline import EP_EVAL, greedy_policy, construct, jitted_selector, train_selector
from cfjax.countermem.store import MemoryStore
from cfjax.infra.concurrency import ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.llm.base import Backbone
from cfjax.experiments.backbones import (BackboneSpec, agent_title, backbone_spec, backbone_stats,
                                         default_cache_path, default_workers, resolve_agents)
from cfjax.experiments.common import finite, quick_splits, resolve_suites, spread
from cfjax.experiments.countermem.rows import construction_costs, row_names, row_specs
from cfjax.domains.base import TRANSFER_CONDITIONS, Suite, transfer_condition
from cfjax.types import Splits, Task
from cfjax.infra.cache import CachedWorld
from cfjax.infra.executors import Executor, is_local

__all__ = ["row_names", "row_specs", "expand_rows", "row_metrics", "run_unit",
           "BackboneSpec", "quick_splits", "resolve_suites", "backbone_spec", "progress_bars", "run_main", "make_jobs",
           "report_main", "RUN_FIGURES", "run_outputs", "backbone_stats", "default_cache_path",
           "default_workers"]


ProgressFactory = Callable[[str, int], object]


def expand_rows(rows: Sequence[str]) -> tuple[str, ...]:
    """Validate ``--rows`` (``all`` = every row of :func:`~cfjax.experiments.countermem.rows.row_specs`);
    ``none`` and ``cf_memory`` are always run (the pairing reference and the selector every
    intervention reuses)."""
    rows = list(rows)
    names = row_names()
    if "all" in rows:
        return names
    bad = [r for r in rows if r not in names]
    if bad:
        raise ValueError(f"unknown row(s) {bad}; choose from {', '.join(names)} or 'all'")
    out = ["none", "cf_memory"] + [r for r in rows if r not in ("none", "cf_memory")]
    return tuple(r for r in names if r in out)


# --------------------------------------------------------------------------- one unit


@dataclass(frozen=True)
class MainRun:
    """What the interventions reuse from the full method's run (App. D.3, D.5: only the memory
    snapshot changes; the trained selector stays)."""

    store: MemoryStore
    agent: Agent
    greedy: Policy


@dataclass
class UnitContext:
    suite: Suite
    splits: Splits
    world: CachedWorld
    backbone: Backbone
    config: CounterMemConfig
    seed: int
    threads: int
    conditions: dict[str, str]
    progress: ProgressFactory
    selector_seed: int = 0  # seeds selector training (Table 3), apart from the backbone seed
    episodes: dict[str, list[Episode]] = field(default_factory=dict)
    main: "MainRun | None" = None  # the full method's frozen store, agent and greedy selector (set by run_unit)
    #: episodes of every row run on this one pool of ``threads`` workers (``None``: serially), so
    #: rows evaluated at the same time share one bound on calls in flight
    pool: ThreadPoolExecutor | None = None
    none_ready: threading.Event = field(default_factory=threading.Event)
    #: the unit's agents share one memo of record-transfer checks (:meth:`Agent.usable`): one suite,
    #: one edit model, one set of environments
    transfer_memo: dict = field(default_factory=dict)

    def agent(self, store: MemoryStore | None, config: CounterMemConfig | None = None, retriever=None) -> Agent:
        return Agent(self.backbone, self.world, config or self.config, store=store, envs=dict(self.suite.envs()),
                     edits=self.suite.edits, retriever=retriever, transfer_memo=self.transfer_memo)

    def run_rows(self, name: str, fn: Callable[[int, Task, Ledger], Episode], *, memory: bool) -> dict:
        """Evaluate ``fn`` on every held-out task (on the unit's episode pool when it has one;
        identical results: episodes are independent given frozen memory and selector, each is
        seeded by its task and episode id, and ledgers merge in task order)."""
        tasks = list(self.splits.eval)
        bar = self.progress(f"{self.suite.name}/{self.seed} {name}", len(tasks))

        def one(i: int) -> tuple[Episode, Ledger]:
            led = Ledger(name)
            ep = fn(EP_EVAL + i, tasks[i], led)
            bar.update(1)
            return ep, led

        res = ordered_map(one, range(len(tasks)), pool=self.pool)
        bar.close()
        ledger = Ledger(f"eval/{name}")
        for _, led in res:
            ledger.merge(led)
        eps = [ep for ep, _ in res]
        self.episodes[name] = eps
        if name == "none":
            self.none_ready.set()
        else:  # every row is paired with the no-memory run of the same tasks and episode ids
            self.none_ready.wait()
        return row_metrics(eps, ledger, memory=memory, conditions=self.conditions, paired=self.episodes.get("none"))

    def agent_rows(self, name: str, agent: Agent, policy: Policy, *, memory: bool) -> dict:
        if memory and agent.store is not None and not agent.store.frozen:
            raise RuntimeError("held-out evaluation requires a frozen store (Algorithm 1, line 27)")
        return self.run_rows(name, lambda e, t, led: agent.run_episode(t, policy, led, episode=e, memory=memory,
                                                                        measure_draft=memory), memory=memory)


def run_unit(suite: Suite, seed: int, config: CounterMemConfig, *, backbone: Backbone, rows: Sequence[str],
             splits: Splits | None = None, split_seed: int | None = None, selector_seed: int | None = None,
             threads: int = 1, progress: ProgressFactory | None = None,
             log: Callable[[str], None] = lambda s: None, out_dir: str | Path | None = None,
             on_phase: Callable[[str], None] | None = None, overlap_main: bool = True) -> dict:
    """Every requested row for one suite, one split and one backbone seed. Returns a JSON-ready dict.

    ``split_seed`` (default: the config's first) picks the split unless ``splits`` is given;
    ``selector_seed`` (default: the config's first) seeds selector training. The result carries the
    per-task outcome of every row (``outcomes``: row → 0/1 per held-out task, in ``eval_ids`` order)
    for the paired intervals of :mod:`cfjax.experiments.stats`. With ``out_dir`` the frozen main
    store (``store.json``) and the trained selector (orbax, ``selector/``) are written there.
    ``on_phase`` is told ``"eval_start"`` and ``"eval_end"`` around the rows' held-out evaluation
    (the throughput benchmark times that window); with ``threads > 1`` also ``"main_start"`` when
    the rows that need nothing of the main run have been started and the main construction begins.
    ``overlap_main=False`` starts every row only after the main run (the held-out window then holds
    every row's evaluation; the results are the same either way)."""
    from cfjax.countermem.pipeline import null_progress

    t0 = time.perf_counter()
    rows = expand_rows(rows)
    progress = progress or null_progress
    split_seed = config.split_seeds[0] if split_seed is None else split_seed
    selector_seed = config.selector_seeds[0] if selector_seed is None else selector_seed
    splits = splits or suite.splits(seed=split_seed, n_val=config.n_val)
    world = CachedWorld(suite.world(**suite_world_kwargs(suite, config)))
    source_envs = {t.env_id for t in splits.build}
    ctx = UnitContext(suite, splits, world, backbone, config, seed, threads,
                      {t.task_id: transfer_condition(t, suite.answer_key(t.task_id), source_envs) for t in splits.eval},
                      progress, selector_seed=selector_seed)
    res: dict = {"suite": suite.name, "seed": seed, "split_seed": split_seed, "selector_seed": selector_seed,
                 "rows": {}, "groups": {}, "timing": {}}

    def timed(key: str, t: float) -> None:
        res["timing"][key] = round(time.perf_counter() - t, 2)

    specs = row_specs()
    construction: dict[str, dict] = {}
    # Every row but ``none``/``cf_memory`` is ``spec.run(ctx)``; ``none`` runs on an agent without a store.
    runs: dict[str, Callable[[], dict]] = {
        "none": lambda: _signal_after(ctx.none_ready, lambda: ctx.agent_rows("none", ctx.agent(None), skip_policy,
                                                                               memory=False)),
        "cf_memory": lambda: ctx.agent_rows("cf_memory", ctx.main.agent, ctx.main.greedy, memory=True)}
    for name in rows:
        if specs[name].run is not None:  # none and cf_memory are above
            runs[name] = lambda spec=specs[name]: spec.run(ctx)

    def build_main() -> None:
        """The full method: construct, freeze, train the selector (Algorithm 1)."""
        t = time.perf_counter()
        store = MemoryStore(config.store, config.retrieval, edits=suite.edits)
        agent = ctx.agent(store)
        built = construct(agent, splits.build, seed=seed, progress=progress, pool=ctx.pool)
        params, tlog, trained = train_selector(agent, splits.train, splits.val, seed=selector_seed, progress=progress,
                                               pool=ctx.pool)
        # construction cost (the verified store), and the selector's offline training apart (App. D.6:
        # "offline selector training is not separately costed" in the paper; here it is reported)
        construction["cf_memory"] = {**construction_costs(built), "selector_training": construction_costs(trained)}
        greedy = greedy_policy(jitted_selector(config.dqn), params)
        res["store"] = dict(store.summary())
        if out_dir is not None:
            from cfjax.infra.checkpoint import save_params
            from cfjax.config import to_dict

            d = Path(out_dir)
            d.mkdir(parents=True, exist_ok=True)
            store.save(d / "store.json")
            save_params(d / "selector", params, {
                "suite": suite.name, "seed": seed, "split_seed": split_seed, "selector_seed": selector_seed,
                "best_decision": tlog.best_decision,
                "best_val_return": tlog.best_return, "checkpoints": tlog.checkpoints, "dqn": to_dict(config.dqn)})
        res["train"] = {"decisions": tlog.decisions, "best_decision": tlog.best_decision,
                        "best_val_return": tlog.best_return}
        ctx.main = MainRun(store, agent, greedy)
        timed("cf_memory_build_train", t)

    t_eval = time.perf_counter()
    if threads > 1:
        # Every row at once, its episodes on one pool, so the LLM sees up to ``threads`` independent
        # calls in flight across rows (a row's own preparation — a rebuilt store, ExpeL lessons — runs
        # on the row's thread meanwhile). The rows that build everything themselves
        # (``needs_main=False``) start at once, beside the main construction and training (whose
        # validation episodes use the pool too); the others when the main store and selector exist.
        # More episodes than calls in flight: an episode spends part of its time off the wire (its
        # evaluator check, a sequential second attempt), and the backbone's own semaphore bounds
        # the requests, so a deeper pool keeps ``threads`` calls in flight until the last rows.
        # Identical to serial: every row is a deterministic function of the frozen inputs it reads.
        ctx.pool = ThreadPoolExecutor(_EPISODES_PER_SLOT * threads, thread_name_prefix="cfjax-episode")
        try:
            with ThreadPoolExecutor(len(runs), thread_name_prefix="cfjax-row") as rows_ex:
                early = [n for n in runs if not specs[n].needs_main] if overlap_main else []
                # the rows with the longest call chains (rebuilt stores, Best-of-N, ExpeL) first, the
                # one-call-per-attempt rows last: longest-first keeps the wire full to the end
                futs = {n: rows_ex.submit(_timed_row, runs[n]) for n in reversed(early)}
                if on_phase is not None:
                    on_phase("main_start")
                build_main()
                if on_phase is not None:
                    on_phase("eval_start")
                t_eval = time.perf_counter()
                futs.update({n: rows_ex.submit(_timed_row, runs[n]) for n in reversed(runs) if n not in futs})
                done = {n: futs[n].result() for n in runs}
        finally:
            ctx.pool.shutdown(wait=True)
            ctx.pool = None
    else:
        build_main()
        if on_phase is not None:
            on_phase("eval_start")
        t_eval = time.perf_counter()
        done = {n: _timed_row(fn) for n, fn in runs.items()}
    if on_phase is not None:
        on_phase("eval_end")
    for name, (metrics, seconds) in done.items():
        own = specs[name].run is not None
        if name in construction:
            metrics["construction"] = construction[name]
        res[specs[name].section][name] = metrics
        res["timing"][name if own else f"eval_{name}"] = seconds
    res["timing"]["eval_all_rows"] = round(time.perf_counter() - t_eval, 2)

    res["cache"] = {"hits": world.hits, "misses": world.misses}
    res["seconds"] = round(time.perf_counter() - t0, 2)
    res["split_sizes"] = {k: len(getattr(splits, k)) for k in ("build", "train", "val", "eval")}
    res["conditions"] = {c: sum(v == c for v in ctx.conditions.values()) for c in TRANSFER_CONDITIONS}
    res["eval_ids"] = [t.task_id for t in splits.eval]
    res["conditions_by_task"] = [ctx.conditions[t.task_id] for t in splits.eval]
    res["outcomes"] = {name: [int(ep.solved) for ep in eps] for name, eps in ctx.episodes.items()}
    log(f"{suite.name} split {split_seed} seed {seed}: " + "  ".join(
        f"{k} {v['success']:.1f}" for k, v in res["rows"].items() if v.get("success") is not None)
        + f"  ({res['seconds']:.0f}s)")
    return res


#: episode threads per call in flight when rows are evaluated at once (``run_unit``)
_EPISODES_PER_SLOT = 4


def _signal_after(event: threading.Event, fn: Callable[[], dict]) -> dict:
    """``fn()``, then ``event`` set even when it raised (rows waiting to pair never hang)."""
    try:
        return fn()
    finally:
        event.set()


def _timed_row(fn: Callable[[], dict]) -> tuple[dict, float]:
    t = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t, 2)


def suite_world_kwargs(suite: Suite, config: CounterMemConfig) -> dict:
    """World options from the config: a wall-clock ``timeout_s`` per check and what the evaluator
    tells the agent (``feedback``: ``user`` | ``rich``)."""
    return {"timeout_s": config.world_timeout_s, "feedback": config.world_feedback}


# --------------------------------------------------------------------------- many units


@dataclass(frozen=True)
class UnitJob:
    """Everything a worker process needs to run one (suite, seed) unit."""

    suite: str
    root: str
    seed: int
    config: CounterMemConfig
    rows: tuple[str, ...]
    backbone: BackboneSpec
    max_tasks: int | None = None
    threads: int = 1
    out_dir: str | None = None
    split_seed: int = 12345
    selector_seed: int = 0


def run_job(job: UnitJob, progress: ProgressFactory | None = None, log: Callable[[str], None] = lambda s: None,
            transport: object | None = None) -> dict:
    """Run one unit from its job description (the function worker processes execute). ``transport``:
    a :class:`cfjax.llm.openai_client.SharedTransport` the unit's backbone shares with other units."""
    from cfjax.domains import open_suite

    suite = open_suite(job.suite, job.root)
    splits = suite.splits(seed=job.split_seed, n_val=job.config.n_val)
    if job.max_tasks:
        splits = quick_splits(splits, job.max_tasks)
    bb = job.backbone.make(suite, job.seed, job.config, transport=transport)
    try:
        res = run_unit(suite, job.seed, job.config, backbone=bb, rows=job.rows, splits=splits,
                       split_seed=job.split_seed, selector_seed=job.selector_seed, threads=job.threads,
                       progress=progress, log=log, out_dir=job.out_dir)
        res["llm"] = backbone_stats(bb)
        res["agent"] = job.backbone.agent
    finally:
        close = getattr(bb, "close", None)
        if close is not None:
            close()
    return finite(res)


def make_jobs(cfg: CounterMemConfig, roots: dict[str, Path], *, rows: Sequence[str], backbone: BackboneSpec,
              max_tasks: int | None = None, threads: int = 1, out: Path | None = None) -> list[UnitJob]:
    """One job per (suite, split seed, backbone seed); the suite's ``j``-th unit (split-major) trains
    its selector with ``cfg.selector_seed(j)``. ``out`` (optional) gets each unit's store and selector
    under ``<suite>/split_<s>/seed_<b>/`` (``seed_<b>_<agent>/`` for a base agent other than ReAct)."""
    tag = "" if backbone.agent == "react" else f"_{backbone.agent}"
    return [UnitJob(n, str(roots[n]), seed, cfg, tuple(rows), backbone, max_tasks, threads,
                    None if out is None else str(Path(out) / n / f"split_{sp}" / f"seed_{seed}{tag}"),
                    split_seed=sp, selector_seed=cfg.selector_seed(j))
            for n in roots
            for j, (sp, seed) in enumerate((sp, seed) for sp in cfg.split_seeds for seed in cfg.seeds)]


def _init_worker(threads: int) -> None:  # pragma: no cover - runs in worker processes
    import os

    # one unit per process: keep each process's own pools small on small machines
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import faiss

        faiss.omp_set_num_threads(1)
    except Exception:
        pass


def run_jobs(jobs: Sequence[UnitJob], *, workers: int = 1, progress: ProgressFactory | None = None,
             log: Callable[[str], None] = lambda s: None, executor: "Executor" = "local") -> list[dict]:
    """Run units serially (``workers = 1``), on a local process pool (spawned processes: JAX must not
    be forked) or, with ``executor="ray"`` (or a :class:`cfjax.infra.executors.RayExecutor`), as Ray
    tasks (``workers`` unused; each task reserves the executor's ``num_cpus``). Results come back in
    job order, by value, and are identical either way: every unit is a deterministic function of its
    job. A unit's store and selector go to its ``out_dir`` (on a cluster: a shared filesystem)."""
    from cfjax.experiments.common import run_pool
    from cfjax.infra.executors import is_local

    units_at_once = concurrent_units(jobs[0].backbone, len(jobs)) if jobs and is_local(executor) and workers <= 1 else 1
    if units_at_once > 1:
        return _run_units_concurrently(jobs, units_at_once, log)
    if is_local(executor) and (workers <= 1 or len(jobs) <= 1):
        return [run_job(j, progress=progress, log=log) for j in jobs]
    bar = (progress or (lambda d, n: _Null()))("units", len(jobs))

    def note(r: dict) -> None:
        log(f"{r['suite']} split {r['split_seed']} seed {r['seed']}: " + "  ".join(
            f"{k} {v['success']:.1f}" for k, v in r["rows"].items() if v.get("success") is not None)
            + f"  ({r['seconds']:.0f}s)")
        bar.update(1)

    try:
        return run_pool(run_job, jobs, workers=workers, cost=lambda j: 1.0, note=note, initializer=_init_worker,
                        initargs=(1,), executor=executor)
    finally:
        bar.close()


class _Null:
    def update(self, n: int = 1) -> None: ...
    def close(self) -> None: ...


def concurrent_units(spec: BackboneSpec, n_jobs: int) -> int:
    """Units an OpenAI-compatible backbone runs at once in this process (1 for the others).

    A unit's construction and selector training are chains of dependent calls, so one unit keeps
    only a few requests in flight outside its held-out evaluation; several units on one
    :class:`~cfjax.llm.openai_client.SharedTransport` keep the server busy while it still sees at
    most ``max_inflight`` requests. Default: ``max_inflight // 4`` units (at least 2), at most all;
    ``CFJAX_CONCURRENT_UNITS=N`` overrides it."""
    import os

    if spec.kind != "openai" or n_jobs <= 1:
        return 1
    env = os.environ.get("CFJAX_CONCURRENT_UNITS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"CFJAX_CONCURRENT_UNITS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"CFJAX_CONCURRENT_UNITS must be a positive integer, got {env!r}")
    else:
        n = max(2, spec.max_inflight // 4)
    return min(n_jobs, n)


def _run_units_concurrently(jobs: Sequence[UnitJob], units_at_once: int, log: Callable[[str], None]) -> list[dict]:
    """The units on ``units_at_once`` threads of this process, every backbone on one shared transport
    (one client, one in-flight limit of the spec's ``max_inflight``). Results in job order; each unit
    is the deterministic function of its job it is when run alone."""
    from cfjax.llm.openai_client import SharedTransport

    with SharedTransport(jobs[0].backbone.max_inflight) as transport, \
            ThreadPoolExecutor(units_at_once, thread_name_prefix="cfjax-unit") as ex:
        futs = [ex.submit(run_job, j, None, log, transport) for j in jobs]
        return [f.result() for f in futs]


# --------------------------------------------------------------------------- entry points of `cfjax countermem`


def progress_bars(enabled: bool) -> ProgressFactory:
    """tqdm bars on stderr, or the no-op factory."""
    if not enabled:
        from cfjax.countermem.pipeline import null_progress

        return null_progress
    import sys

    from tqdm.auto import tqdm

    def make(desc: str, total: int):
        return tqdm(total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True, mininterval=0.5)

    return make


#: the figures ``cfjax countermem report`` draws (:func:`cfjax.experiments.countermem.report.draw_figures`)
RUN_FIGURES = ("accumulation.png", "retention.png", "transfer.png", "ablations.png", "rescued_broken.png")


def run_outputs() -> list[str]:
    """What ``cfjax countermem run --force`` removes from its ``--out`` directory (globs relative to it):
    exactly what the run (and ``countermem report``'s default ``figures/``) writes there, for every
    built-in suite; other files are kept."""
    from cfjax.domains import SUITES

    return (["config.toml", "results.json", "report.txt"] + [f"suites/{n}" for n in SUITES]
            + [f"{n}/split_*" for n in SUITES] + ["suites/jsonl-*", "jsonl-*/split_*"] + [f"figures/{f}" for f in RUN_FIGURES])


def run_main(cfg: CounterMemConfig, *, suites: Sequence[str], out: str | Path, rows: Sequence[str] | None = None,
             backbone: BackboneSpec | str = "scripted", workers: int | None = None, threads: int | None = None,
             max_tasks: int | None = None, quick: bool = False, progress: bool = True,
             log: Callable[[str], None] = print, existing: str = "refuse", executor: Executor = "local",
             agents: Sequence[str] | None = None) -> dict:
    """``cfjax countermem run``: every (suite, seed) unit with ``rows``, aggregated and written.

    ``agents`` (``--agent``; default: the spec's own, ``react``) are the base agents
    (:mod:`cfjax.agents`) the units run under: every unit runs once per agent, each unit records its
    ``"agent"``, and the report prints Table 1 (and the rest) per agent. ``results.json``'s
    ``summary`` and ``outcomes`` are those of the first agent (its ``"agent"``); with several agents,
    ``"agents"`` lists them and ``"by_agent"`` holds each one's ``summary`` and ``outcomes`` (the
    figures are drawn for the first agent).

    Runs every (suite, split seed, backbone seed) unit. Writes ``out/config.toml``,
    ``out/results.json`` (the summary with intervals, every unit, and the per-task paired
    ``outcomes``), ``out/report.txt``, the figures (``out/figures/``, as ``countermem report`` draws
    them) and each unit's store and selector under
    ``out/<suite>/split_<s>/seed_<b>/``; logs the report. Returns the ``results.json`` payload.
    ``workers`` defaults to :func:`default_workers`, ``threads`` (calls in flight per unit, every
    row's held-out episodes at once) to the backbone's ``--max-inflight``: 32 for an LLM, 1 for the
    scripted backbone; progress bars are drawn only in the serial case. An LLM backbone's transport
    counters (faults, retries, failed calls, cache hits) go to ``results.json["llm"]`` and the report.

    ``existing`` says what to do when ``out`` is a non-empty directory (checked before anything
    is written): ``"refuse"`` (default) raises :class:`cfjax.infra.io.OutputExistsError`;
    ``"force"`` first removes what a run writes there (:func:`run_outputs`), keeping other files;
    ``"resume"`` is refused (units are not saved separately, so a run cannot be continued).
    """
    import json
    import os

    from cfjax.config import save_toml, to_dict
    from cfjax.domains import build_suite
    from cfjax.experiments.countermem.report import aggregate, collect_outcomes, format_report
    from cfjax.experiments.transport import format_llm, merge_llm
    from cfjax.infra.io import atomic_write_text, prepare_output_dir

    names = resolve_suites(suites)
    rows = expand_rows(rows or ["all"])
    spec = backbone_spec(backbone) if isinstance(backbone, str) else backbone
    agents = resolve_agents(agents if agents else spec.agent)
    specs = {a: dataclasses.replace(spec, agent=a) for a in agents}
    threads = threads if threads is not None else spec.max_inflight
    workers = workers if workers is not None else default_workers(spec)
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=run_outputs(), resumable=False, command="cfjax countermem run")
    out.mkdir(parents=True, exist_ok=True)
    roots = {}
    for n in names:
        roots[n] = out / "suites" / n
        build_suite(n, roots[n])
    jobs = [j for a in agents
            for j in make_jobs(cfg, roots, rows=rows, backbone=specs[a], max_tasks=max_tasks, threads=threads, out=out)]
    save_toml(cfg, out / "config.toml")
    at_once = concurrent_units(spec, len(jobs)) if workers <= 1 and is_local(executor) else 1
    log(f"cfjax countermem run: suites={names} backbone={spec.backbone_label} agents={list(agents)} "
        f"seeds={list(cfg.seeds)} "
        f"split_seeds={list(cfg.split_seeds)} selector_seeds={list(cfg.selector_seeds)} "
        f"rows={len(rows)} units={len(jobs)} workers={workers} threads={threads}"
        f"{f' units_at_once={at_once} (one shared client)' if at_once > 1 else ''}"
        f"{' (quick)' if quick else ''} → {out}")
    t0 = time.perf_counter()
    units = run_jobs(jobs, workers=workers, progress=progress_bars(progress and workers <= 1 and is_local(executor)),
                     log=log, executor=executor)
    by_agent = {}
    for a in agents:
        mine = [u for u in units if u.get("agent", "react") == a]
        o = collect_outcomes(mine)
        by_agent[a] = {"backbone": specs[a].label, "summary": aggregate(mine, o), "outcomes": o}
    first = agents[0]
    outcomes, summary = by_agent[first]["outcomes"], by_agent[first]["summary"]
    llm = merge_llm(u.get("llm") for u in units)
    label = specs[first].label if len(agents) == 1 else spec.backbone_label
    payload = {"backbone": label, "agent": first, "llm": llm, "suites": names, "seeds": list(cfg.seeds),
               "split_seeds": list(cfg.split_seeds), "rows": list(rows), "outcomes": outcomes,
               "quick": bool(quick), "max_tasks": max_tasks, "workers": workers, "threads": threads,
               "executor": "local" if is_local(executor) else "ray",
               "seconds": round(time.perf_counter() - t0, 1), "summary": summary, "units": units,
               "config": to_dict(cfg)}
    if len(agents) > 1:
        payload["agents"] = list(agents)
        payload["by_agent"] = by_agent
    atomic_write_text(out / "results.json", json.dumps(finite(payload), indent=1) + "\n")
    report = "\n\n".join(format_report(by_agent[a]["summary"], backbone=specs[a].label, agent=agent_title(a))
                         for a in agents)
    if llm:
        report += "\n\n" + format_llm(llm)
    atomic_write_text(out / "report.txt", report + "\n")
    from cfjax.experiments.countermem.report import draw_figures

    figures = draw_figures(dict(payload, backbone=specs[first].label), out / "figures")
    log(report)
    log(f"\nwrote {out / 'results.json'}, {out / 'report.txt'}, {len(figures)} figure(s) under {out / 'figures'}, "
        f"stores and selectors under {out}/<suite>/split_*/seed_*/ ({payload['seconds']:.0f}s)")
    return payload


def _agent_title(name: str) -> str:
    """A recorded agent's title (the name itself when no plugin registers it any more)."""
    from cfjax.registry import AGENTS

    return AGENTS.get(name).title if name in AGENTS else name


def report_main(run_dir: str | Path, *, out: str | Path | None = None, log: Callable[[str], None] = print,
                existing: str = "refuse") -> list:
    """``cfjax countermem report``: log the tables of a run and draw its figures (default ``DIR/figures``).

    ``existing`` for a non-empty figure directory: ``"refuse"`` (default) raises
    :class:`cfjax.infra.io.OutputExistsError`, ``"force"`` removes the :data:`RUN_FIGURES` there
    first (other files are kept), ``"resume"`` is refused (nothing to continue). The run's own
    ``DIR/figures`` (which ``countermem run`` draws) is redrawn in place when it holds only
    :data:`RUN_FIGURES`: they are the same function of the same results."""
    from cfjax.experiments.countermem.report import draw_figures, format_report, load_results
    from cfjax.infra.io import prepare_output_dir

    res = load_results(run_dir)
    fig_dir = Path(out) if out else Path(run_dir) / "figures"
    if out is None and existing == "refuse" and fig_dir.is_dir() and all(
            p.name in RUN_FIGURES for p in fig_dir.iterdir()):
        existing = "force"
    prepare_output_dir(fig_dir, existing=existing, owned=RUN_FIGURES, resumable=False,
                       command="cfjax countermem report")
    if isinstance(res.get("by_agent"), dict):  # several base agents: every agent's tables
        log("\n\n".join(format_report(b["summary"], backbone=b.get("backbone", res.get("backbone", "")),
                                      agent=_agent_title(a)) for a, b in res["by_agent"].items()))
    else:
        log(format_report(res["summary"], backbone=res.get("backbone", ""),
                          agent=_agent_title(res["agent"]) if "agent" in res else None))
    paths = draw_figures(res, fig_dir)
    for p in paths:
        log(f"wrote {p}")
    return paths

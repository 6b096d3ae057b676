"""UpliftMem's controlled retrieval on the fixed stores of the other two methods (CounterMem, Anti-Persistence).

papers/upliftmem.md §5.3 (RQ2), App. D.2: *the store and the executor are held fixed, only the retriever
changes* — here on the built-in domains (``sql``, ``pybugs``, ``sat``) instead of the MemSyco-like suite
(:mod:`cfjax.experiments.upliftmem.controlled` is the same swap there).

Per suite (split ``cfg.split_seed``, ``cfg.max_tasks`` tasks per split with :func:`cfjax.experiments.upliftmem.runner.quick_config`):

* **the stores**, each built on ``T_build`` only with the scripted backbone, then frozen:

  - ``countermem`` — :func:`cfjax.countermem.pipeline.construct` (Algorithm 1 lines 3–14: verified
    contrasts, admission, retention, freeze). Every record of the frozen store becomes one memory
    ``cm<record id>`` whose text is the record as CounterMem's agent shows it to its reviser
    (:meth:`cfjax.countermem.store.Record.render`: SITUATION / EDIT / ORIGINAL / IMPROVED / EVIDENCE /
    APPLIES WHEN). The executor carries a record's ``EDIT: b -> a`` line and does not check its
    condition — that is the retriever's job.
  - ``antipersist`` — :func:`cfjax.antipersist.protocol.run_method` with the ``anti_persistence`` row
    (mode selection, synthesized guidance used and discarded, trajectories persisted), one iteration
    over every ``T_build`` task once, no held-out evaluation; ``state.trajectories`` is the store.
    Trajectory ``i`` becomes memory ``tr<i>``: its factual rendering with the patterns a reader can
    note in it under :data:`~cfjax.llm.prompts.FACTUAL_NOTES_HEADER`
    (:func:`~cfjax.antipersist.guidance.render_factual` of that one trajectory with its
    :func:`~cfjax.antipersist.guidance.factual_rules`) — what mode ``none`` shows an agent.
    (``ap_row="trajectory_memory"`` builds the trajectory-memory baseline's store instead.)

  - the **five pipeline-built stores** of the MemSyco fixed-store protocol (UpliftMem Fig. 3, Table 3;
    ../shared/PEERS.md): ``naive_rag``, ``mem0``, ``memgpt``, ``amem``, ``lightmem`` — each registered
    memory system (:mod:`cfjax.peers`) built **by its own pipeline** (:meth:`~cfjax.memory.MemorySystem.build`:
    Mem0's ADD/UPDATE/DELETE merges, MemGPT's self-edited core and archival memory, A-MEM's links and
    evolution, LightMem's segmentation, flushes and sleep-time update, NaiveRAG's raw turns) from the
    memory-free episodes of ``T_build`` with the run's backbone, then frozen; its items become the
    memories, ids and texts as the system itself shows them (:class:`cfjax.memory.FixedStore`). On these
    stores a fourth row, ``own_native``, is the system's **own** retrieval (:meth:`FixedStore.native`
    with budget ``k``, computed once per task before the first attempt, as the executor is shown one set
    per episode) — the comparison the protocol asks for is ``upliftmem − own_native``; ``similarity_topk``
    (the pool's similarity order) stays beside it;

* **the pool**: those memories, ids unchanged, admitted in a :class:`cfjax.uplift.MemoryPool`; recall is
  the pool's own (FAISS, ``N = cfg.retrieval.recall``), so both retrievers see the same candidates;
* **the executor**: one :class:`cfjax.uplift.AgentExecutor` per suite (the run's backbone — the scripted
  one by default, ``--backbone`` otherwise — with ``cfg.backbone_seed``), shared by both stores; the
  stores are built with the same backbone;
* **the retrievers**: ``similarity_topk`` (native: :func:`cfjax.uplift.retrieval.native_topk` over the
  recall order) and ``upliftmem`` (the trained scorer, beam search). UpliftMem trains with
  ``writer_backbone=None`` (nothing is written; the store stays as built): bootstrap probing on the
  training stream ``T_train ∪ T_val`` (no-memory references and random feasible sets), value-only
  warm-up, ``epochs`` passes over the stream with EVSI probing; evaluation on ``T_eval`` with the fixed
  checkpoint, rows ``no_memory``, ``similarity_topk``, ``upliftmem``. The store conversion, training and
  evaluation run under :func:`cfjax.types.answer_key_guard`.

Statistics: per (suite, store) each row's success with a paired 95% task-bootstrap interval, and
``upliftmem − similarity_topk`` paired over the same tasks and draft seeds
(:func:`cfjax.experiments.upliftmem.runner.summarize_rows`, :mod:`cfjax.experiments.stats`); per store over suites,
each suite one cluster with equal weight.

Run: ``cfjax upliftmem stores --out DIR [--quick] [--suite sql,pybugs,sat] [--backbone ...]``
(:func:`stores_main`; ``python -m cfjax.experiments.upliftmem.stores`` is the same command).
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cfjax.config import APConfig, CounterMemConfig, UpliftConfig
from cfjax.experiments.stats import clusters_from_outcomes, fmt_interval, paired_difference
from cfjax.experiments.upliftmem.runner import METHOD, REFERENCE, quick_config, summarize_rows
from cfjax.experiments.upliftmem.controlled import NATIVE
from cfjax.experiments.common import write_results
from cfjax.llm.prompts import count_tokens
from cfjax.llm.scripted import SCRIPTED_LABEL
from cfjax.types import answer_key_guard
from cfjax.uplift import AgentExecutor, Memory, MemoryPool, UpliftRun
from cfjax.uplift.retrieval import native_topk

__all__ = ["LABEL", "STORES", "PEER_STORES", "DEFAULT_STORES", "OWN", "ROWS", "OWNED", "build_peer", "peer_memories", "countermem_memories", "antipersist_memories", "build_countermem",
           "build_antipersist", "run_store_swap", "format_store_swap", "stores_config", "stores_main", "main"]

LABEL = SCRIPTED_LABEL
#: the five stores of the MemSyco fixed-store protocol, each built by its memory system's own pipeline
PEER_STORES = ("naive_rag", "mem0", "memgpt", "amem", "lightmem")
STORES = ("countermem", "antipersist") + PEER_STORES
#: what ``cfjax upliftmem stores`` runs without ``--stores``
DEFAULT_STORES = PEER_STORES
ROWS = (REFERENCE, NATIVE, METHOD)
#: the system's own retrieval on its frozen store (peer stores only)
OWN = "own_native"
#: what ``cfjax upliftmem stores`` writes in ``--out`` besides ``suites/<suite>/`` of each of its suites
#: (``--force`` removes exactly these)
OWNED = ("results.json", "report.txt")


# --------------------------------------------------------------------------- stores → memories

def countermem_memories(store, *, use_conditions: bool = True) -> list[Memory]:
    """Every record of a (frozen) CounterMem store as one memory ``cm<record id>``, rendered as the agent
    shows it to its reviser (:meth:`~cfjax.countermem.store.Record.render`)."""
    out = []
    for rid in sorted(store.records):
        rec = store.records[rid]
        text = rec.render(with_condition=use_conditions)
        out.append(Memory(f"cm{rid}", text, count_tokens(text), rec.source_task, meta={"store": "countermem"}))
    return out


def antipersist_memories(trajectories, edits, *, max_rules: int) -> list[Memory]:
    """Every stored trajectory as one memory ``tr<i>``: mode none's factual rendering of that trajectory
    with the patterns a reader can note in it (:func:`~cfjax.antipersist.guidance.factual_rules`)."""
    from cfjax.antipersist.guidance import factual_rules, render_factual

    out = []
    for i, t in enumerate(trajectories):
        text = render_factual([t], factual_rules([t], edits, prefix=f"tr{i}", max_rules=max_rules))
        out.append(Memory(f"tr{i}", text, count_tokens(text), t.task_id, meta={"store": "antipersist"}))
    return out


def build_countermem(suite, world, build: Sequence, *, seed: int, cfg: CounterMemConfig = CounterMemConfig(),
                     backbone=None):
    """CounterMem's store constructed on ``build`` with ``backbone`` (a
    :class:`~cfjax.experiments.backbones.BackboneSpec`; default the scripted one), frozen."""
    from cfjax.countermem.agent import Agent
    from cfjax.countermem.pipeline import construct
    from cfjax.countermem.store import MemoryStore
    from cfjax.experiments.backbones import BackboneSpec

    spec = backbone or BackboneSpec("scripted")
    store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    agent = Agent(spec.make(suite, seed, cfg), world, cfg, store=store, envs=dict(suite.envs()),
                  edits=suite.edits)
    construct(agent, list(build), seed=seed)  # freezes the store (Algorithm 1, line 14)
    return store


def build_antipersist(suite, world, build: Sequence, *, seed: int, out_dir: Path, row: str = "anti_persistence",
                      cfg: APConfig = APConfig(), backbone=None):
    """Anti-Persistence's trajectory store: one iteration of ``row`` over every ``build`` task once (no
    held-out evaluation) with ``backbone`` (default the scripted one), frozen. Returns the
    :class:`~cfjax.antipersist.protocol.MethodState`."""
    from cfjax.antipersist.protocol import run_method
    from cfjax.experiments.backbones import BackboneSpec

    spec = backbone or BackboneSpec("scripted")
    cfg = dataclasses.replace(cfg, iterations=1, tasks_per_iteration=len(build))
    _, state = run_method(row, seed=seed, train_pool=list(build), eval_tasks=[],
                          backbone=spec.make(suite, seed, cfg), world=world, edits=suite.edits,
                          cfg=cfg, out_dir=out_dir)
    state.freeze()
    return state


def build_peer(name: str, suite, world, build: Sequence, *, seed: int, max_attempts: int, backbone=None):
    """The memory system ``name`` built by its own pipeline from the memory-free episodes of ``build``
    (episode ids ``EP_STORE + i``) with ``backbone`` (default scripted), frozen. Returns ``(system,
    build ledger)``; the system must implement :class:`cfjax.memory.FixedStore`."""
    from cfjax.experiments.backbones import BackboneSpec
    from cfjax.infra.ledger import Ledger
    from cfjax.memory import FixedStore, SystemContext, build_experience, rollout_fn
    from cfjax.registry import MEMORY_SYSTEMS

    spec = backbone or BackboneSpec("scripted")
    bb = spec.make(suite, seed, CounterMemConfig())
    info = MEMORY_SYSTEMS.get(name)
    led = Ledger(f"{name}/store")
    system = info.make(SystemContext(bb, suite.edits, max_attempts, seed, led,
                                     rollout_fn(backbone=bb, world=world, edits=suite.edits, ledger=led,
                                                max_attempts=max_attempts)))
    if not isinstance(system, FixedStore):
        raise ValueError(f"memory system {name!r} does not export its store (cfjax.memory.FixedStore)")
    system.build(build_experience(list(build), backbone=bb, world=world, edits=suite.edits, ledger=led,
                                  episode0=EP_STORE, max_attempts=max_attempts))
    system.freeze()
    return system, led


#: episode ids of the episodes a peer store is built from
EP_STORE = 5_000_000


def peer_memories(name: str, system) -> list[Memory]:
    """A frozen peer store's items as pool memories (ids and texts as the system shows them)."""
    return [Memory(mid, text, count_tokens(text), "", meta={"store": name}) for mid, text in system.export_items()]


def _own_native(system, executor, memories: Sequence[Memory], tasks, k: int, repeats: int, eval_seed: int) -> dict:
    """The system's own retrieval (budget ``k``) on its frozen store, run by the same executor with the
    same draft seeds as the other rows: outcomes, rewards and the sets shown."""
    from cfjax.infra.ledger import Ledger
    from cfjax.memory import RecallQuery

    by_id = {m.mem_id: m for m in memories}
    chosen = []
    for t in tasks:
        ids = [i for i in system.native(RecallQuery(t, (), None, eval_seed, 0), k) if i in by_id][:k]
        chosen.append([by_id[i] for i in ids])
    outcomes, rewards, sets = [], [], []
    led = Ledger("own-native")
    for r in range(repeats):
        ex = [executor.execute(t, mems, seed=eval_seed + r, ledger=led) for t, mems in zip(tasks, chosen)]
        outcomes.append([int(e.solved) for e in ex])
        rewards.append([float(e.R) for e in ex])
        sets.append([[m.mem_id for m in mems] for mems in chosen])
    return {"outcomes": outcomes, "rewards": rewards, "sets": sets,
            "mean_set_size": float(np.mean([len(c) for c in chosen])) if chosen else 0.0,
            "cost": {"llm_calls": led.total.llm_calls, "tokens": led.total.tokens, "eval_calls": led.total.eval_calls}}


# --------------------------------------------------------------------------- one (suite, store)

def _swap(cfg: UpliftConfig, executor, suite_name: str, k: int, memories: Sequence[Memory], stream, tasks,
          repeats: int, log: Callable[[str], None]) -> dict:
    """Train UpliftMem on ``stream`` over the fixed pool of ``memories`` and evaluate ``tasks``."""
    pool = MemoryPool(cfg.retrieval.embed_dim, index=cfg.retrieval.index)
    for m in memories:
        pool.add(m)
    offered: dict[str, list[str]] = {}

    def recall(task):  # the pool's own recall, recorded
        mems, sims = pool.recall(task, cfg.retrieval.recall)
        offered[task.task_id] = [m.mem_id for m in mems]
        return mems, sims

    t0 = time.perf_counter()
    run = UpliftRun(cfg, executor, domain=suite_name, k_max=k, writer_backbone=None, pool=pool, recall=recall,
                    log=log)
    run.bootstrap(stream)
    run.warmup()
    run.train(stream)
    res = run.evaluate(tasks, repeats=repeats, rows=ROWS)
    train = {"counts": run.counts(), "eval_counts": dict(run.eval_counts), "labels": len(run.labels),
             "h_effective": run.train_log.h_effective, "updates": len(run.train_log.updates),
             "windows": len(run.train_log.windows), "seconds": round(time.perf_counter() - t0, 2)}
    by_id = {m.mem_id: m for m in memories}
    native = [sorted(m.mem_id for m in native_topk([by_id[i] for i in offered[t.task_id]], k, run.retriever.budget))
              for t in tasks]
    checks = {
        "pool_is_store": [m.mem_id for m in pool] == [m.mem_id for m in memories]
        and all(pool.get(m.mem_id).text == m.text for m in memories),
        "nothing_written": len(pool) == len(memories) and run.train_log.written == 0,
        "native_is_topk_of_recall": all(list(s) == n for rep in res.sets[NATIVE] for s, n in zip(rep, native)),
        "upliftmem_within_recall": all(len(s) <= k and set(s) <= set(offered[t.task_id])
                                       for rep in res.sets[METHOD] for s, t in zip(rep, tasks)),
        "no_memory_empty": all(s == () for rep in res.sets[REFERENCE] for s in rep),
    }
    return {"outcomes": res.outcomes, "rewards": res.rewards, "sets": {r: [[list(s) for s in rep] for rep in v]
                                                                        for r, v in res.sets.items()},
            "mean_set_size": {r: float(np.mean(v)) for r, v in res.set_sizes.items()},
            "offered": {t.task_id: offered[t.task_id] for t in tasks}, "training": train, "checks": checks}


def _suite(name: str, root: Path, cfg: UpliftConfig, stores: Sequence[str], ap_row: str, repeats: int, n_boot: int,
           scratch: Path, log: Callable[[str], None], spec) -> dict:
    from cfjax.domains import build_suite
    from cfjax.experiments.worlds import open_world
    from cfjax.experiments.upliftmem.runner import splits_for

    build_suite(name, root)
    suite, _, world = open_world(name, str(root))
    sp = splits_for(suite, cfg)
    stream, tasks = list(sp.train) + list(sp.val), list(sp.eval)
    k = cfg.retrieval.k_for(tasks[0].domain)
    executor = AgentExecutor(spec.make(suite, cfg.backbone_seed, cfg), world, suite.edits,
                             max_attempts=cfg.training.max_attempts)
    seeds = [cfg.eval_seed + r for r in range(repeats)]
    out: dict = {"split": {"seed": cfg.split_seed, "n_build": len(sp.build), "n_train": len(sp.train),
                           "n_val": len(sp.val), "n_eval": len(tasks), "eval_task_ids": [t.task_id for t in tasks]},
                 "k": k, "stores": {}}
    refs = []  # (no-memory outcomes, rewards) of each store's run
    for store in stores:
        t0 = time.perf_counter()
        if store == "countermem":
            cm_cfg = CounterMemConfig()
            cm = build_countermem(suite, world, sp.build, seed=cfg.backbone_seed, cfg=cm_cfg, backbone=spec)
            entries = [{"mem_id": f"cm{r}", "record": dataclasses.asdict(cm.records[r])} for r in sorted(cm.records)]
            with answer_key_guard():
                memories = countermem_memories(cm, use_conditions=cm_cfg.retrieval.use_conditions)
            info = {"kind": "countermem", "records": len(cm), "frozen": cm.frozen}
        elif store in PEER_STORES:
            system, led = build_peer(store, suite, world, sp.build, seed=cfg.backbone_seed,
                                     max_attempts=cfg.training.max_attempts, backbone=spec)
            memories = peer_memories(store, system)
            entries = [{"mem_id": m.mem_id} for m in memories]
            info = {"kind": store, "items": len(memories), "frozen": system.frozen, "memory": system.summary(),
                    "build_cost": {"llm_calls": led.total.llm_calls, "tokens": led.total.tokens,
                                   "eval_calls": led.total.eval_calls}}
        else:
            ap_cfg = APConfig()
            st = build_antipersist(suite, world, sp.build, seed=cfg.backbone_seed, out_dir=scratch / f"{name}_ap",
                                   row=ap_row, cfg=ap_cfg, backbone=spec)
            recs = list(st.trajectories.records)
            entries = [{"mem_id": f"tr{i}", "trajectory": dataclasses.asdict(t)} for i, t in enumerate(recs)]
            with answer_key_guard():
                memories = antipersist_memories(recs, suite.edits, max_rules=ap_cfg.synthesis.max_rules)
            info = {"kind": "antipersist", "row": ap_row, "trajectories": len(recs), "frozen": st.trajectories.frozen,
                    "successes": int(sum(t.success for t in recs)), "with_notes": sum("RULE " in m.text for m in memories)}
        info["build_seconds"] = round(time.perf_counter() - t0, 2)
        info["mean_tokens"] = float(np.mean([m.tokens for m in memories])) if memories else 0.0
        log(f"[{name}/{store}] store: {len(memories)} memories (mean {info['mean_tokens']:.0f} tokens), "
            f"built on {len(sp.build)} tasks in {info['build_seconds']:.0f}s")
        with answer_key_guard():
            got = _swap(cfg, executor, name, k, memories, stream, tasks, repeats, log)
        rows = ROWS
        if store in PEER_STORES:
            with answer_key_guard():
                own = _own_native(system, executor, memories, tasks, k, repeats, cfg.eval_seed)
            got["outcomes"][OWN], got["rewards"][OWN], got["sets"][OWN] = own["outcomes"], own["rewards"], own["sets"]
            got["mean_set_size"][OWN] = own["mean_set_size"]
            got["own_native_cost"] = own["cost"]
            size_after = len(system.export_items())
            rows = ROWS + (OWN,)
        else:
            size_after = len(cm) if store == "countermem" else len(st.trajectories)
        got["checks"]["store_unchanged"] = size_after == len(memories)
        outcomes = {name: {str(cfg.split_seed): {"task_ids": [t.task_id for t in tasks], "seeds": seeds,
                                                 "rows": got["outcomes"]}}}
        table = summarize_rows(outcomes, rows, n_boot=n_boot)
        delta = paired_difference(clusters_from_outcomes(outcomes), METHOD, NATIVE, n_boot=n_boot, seed=0).as_dict()
        if store in PEER_STORES:
            got["delta_own"] = paired_difference(clusters_from_outcomes(outcomes), METHOD, OWN, n_boot=n_boot,
                                                 seed=0).as_dict()
        out["stores"][store] = {"store": info, "entries": entries,
                                "memories": [{"mem_id": m.mem_id, "text": m.text, "tokens": m.tokens} for m in memories],
                                "table": table, "delta": delta, **got, "outcomes": outcomes}
        refs.append((got["outcomes"][REFERENCE], got["rewards"][REFERENCE]))
        log(f"[{name}/{store}] native {fmt_interval(table[NATIVE]['success'])} → upliftmem "
            f"{fmt_interval(table[METHOD]['success'])}, difference {fmt_interval(delta, signed=True)} "
            f"({got['training']['seconds']:.0f}s)")
    out["checks"] = {"no_memory_identical_across_stores": all(r == refs[0] for r in refs)}
    return out


# --------------------------------------------------------------------------- the experiment

def run_store_swap(cfg: UpliftConfig, *, suites: Sequence[str] = ("sql",), stores: Sequence[str] = DEFAULT_STORES,
                   quick: bool = False, log: Callable[[str], None] = print, repeats: int | None = None,
                   ap_row: str = "anti_persistence", n_boot: int = 2000, root: str | Path | None = None,
                   backbone=None) -> dict:
    """The store swap (module docstring). ``quick``: ``cfg`` through :func:`quick_config` (16 tasks per
    split, one epoch, one evaluation repeat); otherwise ``cfg`` as given. ``root``: where the suites are
    built (a temporary directory by default). ``backbone``: the
    :class:`~cfjax.experiments.backbones.BackboneSpec` that builds the stores and executes (default the
    scripted one; the payload's ``label`` is its label)."""
    from cfjax.experiments.worlds import close_worlds
    from cfjax.experiments.backbones import BackboneSpec

    spec = backbone or BackboneSpec("scripted")
    label = spec.label

    stores, suites = tuple(stores), tuple(suites)
    for s in stores:
        if s not in STORES:
            raise ValueError(f"unknown store {s!r}; choose from {STORES}")
    if not stores or not suites:
        raise ValueError("need at least one suite and one store")
    if ap_row not in ("anti_persistence", "trajectory_memory"):
        raise ValueError(f"ap_row must be 'anti_persistence' or 'trajectory_memory', got {ap_row!r}")
    cfg = quick_config(cfg) if quick else cfg
    reps = cfg.eval_repeats if repeats is None else int(repeats)
    log(f"store swap: suites {suites}, stores {stores}, {cfg.max_tasks or 'all'} tasks per split, "
        f"{cfg.training.epochs} epoch(s), {reps} repeat(s) — {label}")
    by_suite = {}
    with tempfile.TemporaryDirectory(prefix="cfjax-stores-") as tmp:
        base = Path(root) if root is not None else Path(tmp) / "suites"
        try:
            for s in suites:
                by_suite[s] = _suite(s, base / s, cfg, stores, ap_row, reps, n_boot, Path(tmp), log, spec)
        finally:
            close_worlds()
    summary = {}
    for st in stores:
        outcomes = {s: by_suite[s]["stores"][st]["outcomes"][s] for s in suites}
        rows = ROWS + ((OWN,) if st in PEER_STORES else ())
        cl = clusters_from_outcomes(outcomes)
        summary[st] = {"table": summarize_rows(outcomes, rows, n_boot=n_boot),
                       "delta": paired_difference(cl, METHOD, NATIVE, n_boot=n_boot, seed=0).as_dict(),
                       "mean_set_size": {r: float(np.mean([by_suite[s]["stores"][st]["mean_set_size"][r]
                                                           for s in suites])) for r in rows}}
        if st in PEER_STORES:
            summary[st]["delta_own"] = paired_difference(cl, METHOD, OWN, n_boot=n_boot, seed=0).as_dict()
    return {"label": label, "suites": list(suites), "stores": list(stores), "rows": list(ROWS), "ap_row": ap_row,
            "repeats": reps, "eval_seeds": [cfg.eval_seed + r for r in range(reps)], "quick": quick,
            "config": {"max_tasks": cfg.max_tasks, "split_seed": cfg.split_seed, "epochs": cfg.training.epochs,
                       "warmup_steps": cfg.training.warmup_steps, "steps_per_update": cfg.training.steps_per_update,
                       "bootstrap_sets": cfg.training.bootstrap_sets, "probe_budget": cfg.probing.budget,
                       "recall": cfg.retrieval.recall, "token_budget": cfg.retrieval.token_budget,
                       "backbone_seed": cfg.backbone_seed},
            "by_suite": by_suite, "summary": summary if len(suites) > 1 else None}


def format_store_swap(payload: dict) -> str:
    """Per suite × store: native vs UpliftMem held-out success with intervals, their paired difference and
    the mean set sizes (and, over several suites, per store with equal suite weights)."""
    lines = [f"Store swap: fixed store, fixed executor, only the retriever changes — {payload['label']}",
             f"held-out success % [95% task-bootstrap CI]; differences um − own and um − sim paired (points); "
             f"{payload['repeats']} eval repeat(s), {payload['config']['max_tasks'] or 'all'} tasks per split",
             f"{'suite':<7} {'store':<12} {'|M|':>4} {'no memory':>20} {'own native':>20} {'similarity':>20} "
             f"{'upliftmem':>20} {'um − own':>22} {'um − sim':>22} {'|S| own':>8} {'|S| um':>7}"]
    lines.append("-" * len(lines[-1]))

    def row(scope: str, store: str, size, r: dict) -> str:
        table, sizes = r["table"], r["mean_set_size"]
        own = fmt_interval(table[OWN]["success"]) if OWN in table else "—"
        d_own = fmt_interval(r["delta_own"], signed=True) if r.get("delta_own") else "—"
        return (f"{scope:<7} {store:<12} {size!s:>4} {fmt_interval(table[REFERENCE]['success']):>20} {own:>20} "
                f"{fmt_interval(table[NATIVE]['success']):>20} {fmt_interval(table[METHOD]['success']):>20} "
                f"{d_own:>22} {fmt_interval(r['delta'], signed=True):>22} "
                f"{(format(sizes[OWN], '.2f') if OWN in sizes else '—'):>8} {sizes[METHOD]:>7.2f}")

    for s, blk in payload["by_suite"].items():
        for st, r in blk["stores"].items():
            lines.append(row(s, st, len(r["memories"]), r))
    if payload.get("summary"):
        for st, r in payload["summary"].items():
            lines.append(row("all", st, "", r))
    lines.append("own native = the store's own retrieval (its system's native recall, budget k); similarity = the "
                 "pool's similarity top-k; um = UpliftMem trained on the fixed store")
    return "\n".join(lines)


def stores_config(*, quick: bool = False, max_tasks: int | None = None, epochs: int | None = None) -> UpliftConfig:
    """The config of ``cfjax upliftmem stores``: :func:`~cfjax.experiments.upliftmem.runner.quick_config` with
    ``quick``, then ``max_tasks`` (0 = all) and ``epochs``; a refused value is one
    :class:`~cfjax.config.ConfigError` line naming the flag."""
    from cfjax.config import ConfigError

    cfg = quick_config(UpliftConfig()) if quick else UpliftConfig()
    for flag, value in (("--max-tasks", max_tasks), ("--epochs", epochs)):
        if value is None:
            continue
        try:
            cfg = (dataclasses.replace(cfg, max_tasks=int(value)) if flag == "--max-tasks" else
                   dataclasses.replace(cfg, training=dataclasses.replace(cfg.training, epochs=int(value))))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{flag}: {e}") from None
    return cfg


def stores_main(*, out: str | Path, suites: Sequence[str] = ("sql",), stores: Sequence[str] | None = None,
                quick: bool = False, max_tasks: int | None = None, epochs: int | None = None,
                repeats: int | None = None, ap_row: str = "anti_persistence", backbone=None,
                log: Callable[[str], None] = print, existing: str = "refuse", n_boot: int = 2000,
                cfg: UpliftConfig | None = None) -> dict:
    """``cfjax upliftmem stores``: check the arguments (a refusal is one :class:`~cfjax.config.ConfigError`
    line), apply the ``--out`` policy (:func:`cfjax.infra.io.prepare_output_dir`: a non-empty directory is
    refused unless ``existing="force"``, which removes only :data:`OWNED` and ``suites/<suite>/``), run :func:`run_store_swap`
    with the suites built in ``out/suites`` and write ``results.json`` and ``report.txt``. ``quick``: the
    quick training config (:func:`~cfjax.experiments.upliftmem.runner.quick_config`), then ``max_tasks`` /
    ``epochs`` (:func:`stores_config`; ``cfg``: a config the caller built so, e.g. with ``--set`` on top).
    ``backbone``: a ``--backbone`` value or a :class:`~cfjax.experiments.backbones.BackboneSpec`
    (default scripted)."""
    from cfjax.config import ConfigError
    from cfjax.experiments.backbones import BackboneSpec, backbone_spec
    from cfjax.experiments.common import resolve_suites
    from cfjax.infra.io import prepare_output_dir

    names = resolve_suites(list(suites) or ["sql"])
    stores = DEFAULT_STORES if stores is None else tuple(stores)
    bad = [s for s in stores if s not in STORES]
    if bad or not stores:
        raise ConfigError(f"--stores: unknown store(s) {bad}; choose from {' '.join(STORES)}")
    if ap_row not in ("anti_persistence", "trajectory_memory"):
        raise ConfigError(f"--ap-row: choose anti_persistence or trajectory_memory, got {ap_row!r}")
    if repeats is not None and int(repeats) < 1:
        raise ConfigError(f"--repeats: expected an integer >= 1, got {repeats}")
    if isinstance(backbone, str):
        try:
            backbone = backbone_spec(backbone)
        except ValueError as e:
            raise ConfigError(f"--backbone {backbone}: {e}") from None
    spec = backbone or BackboneSpec("scripted")
    if cfg is None:
        cfg = stores_config(quick=quick, max_tasks=max_tasks, epochs=epochs)
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=[*OWNED, *(f"suites/{n}" for n in names)], resumable=False,
                       command="cfjax upliftmem stores")
    payload = run_store_swap(cfg, suites=names, stores=stores, quick=False, repeats=repeats, ap_row=ap_row,
                             root=out / "suites", log=log, n_boot=n_boot, backbone=spec)
    payload["quick"] = quick
    write_results(out, payload, text=format_store_swap(payload), log=log, report="report.txt")
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cfjax.experiments.upliftmem.stores ARGS`` = ``cfjax upliftmem stores ARGS``."""
    from cfjax.cli import main as cli_main

    return cli_main(["upliftmem", "stores", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())

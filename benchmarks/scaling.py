"""Growth curves: what each cost does as the work grows, with its fitted exponent (issue 23 §7).

Every curve is measured in one process on one machine, side by side; the exponent ``b`` is the
least-squares slope of ``log(cost)`` on ``log(work)`` (``cost ∝ work^b``). Where the work is linear
an exponent above 1.2 is a defect (or a documented necessity). JAX programs are compiled before
the timed points (a warm-up point at the smallest size), so compile time is not in the curves.

1. **The main job against the number of tasks.** One ``countermem run`` unit on the built-in SQL
   suite, every row, the scripted backbone (a seeded simulator), every split capped at ``n`` tasks
   and the selector trained for ``decisions_per_task · n`` decisions (so the whole unit's work —
   construction, training, every row's evaluation — is linear in ``n``). ``n`` = 1×, 2×, 4× the base.
2. **Admission and retrieval against store size** (10² … 10⁵ records). A real store is built by
   ``construct`` on T_build; its records are replicated with new source tasks and reworded
   situations (the same masked edits and conditions, so the Eq. 4 redundancy and conflict groups
   grow with the store — the worst case for them) and inserted directly up to each size (Eq. 4
   would reject most copies as redundant). At each size: the mean cost of the next ``--probe``
   ``MemoryStore.admit`` calls (Eq. 4 against the store as it is, the condition parse, the index
   insert when admitted) and of one retrieval (Eq. 7 filter + Eq. 8 top-k) for held-out tasks.
3. **An UpliftMem acquisition window against pool size.** The jitted greedy EVSI acquisition
   (:func:`cfjax.kernels.evsi.make_acquire`, budget 16, r = 32) on a B.2-shaped window of ``N``
   candidate probes and ``N`` comparisons (:func:`benchmarks.evsi.make_instance`); steady state
   (median of 5 calls), compile timed apart.
4. **LLM calls in flight against latency** (20, 100, 500 ms): the whole quick SQL unit (every row)
   through the OpenAI client against the loopback server (``tests/llm_server.py``), ``max_inflight``
   32: wall time and the server's mean requests in flight. Wall time grows with the latency (the
   unit's dependent chains wait on it); the mean in flight says how much of it overlaps.

Usage::

    python benchmarks/scaling.py [--parts main store window llm] [--cores 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from benchmarks._bench import finish_meta, make_meta, setup_threads, start_load  # noqa: E402
from benchmarks._meta import table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "benchmarks/_meta.py", "benchmarks/scaling.py", "benchmarks/evsi.py",
           "cfjax/countermem", "cfjax/experiments/countermem", "cfjax/infra/index.py", "cfjax/loop.py",
           "kernels/dqn.py", "kernels/evsi.py", "kernels/acquire.py", "cfjax/llm", "tests/llm_server.py"]
PARTS = ("main", "store", "window", "llm")


def exponent(xs, ys) -> float:
    """Least-squares slope of log y on log x."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-12)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sxx if sxx else float("nan")


# --------------------------------------------------------------------------- 1. the main job


def main_job(sizes: list[int], decisions_per_task: int) -> dict:
    from cfjax.config import CounterMemConfig
    from cfjax.domains import build_suite
    from cfjax.experiments.countermem.runner import expand_rows, quick_splits, run_unit
    from cfjax.llm.scripted import ScriptedBackbone

    root = Path(tempfile.mkdtemp(prefix="cfjax-scaling-"))
    suite = build_suite("sql", root / "sql")
    base = CounterMemConfig()
    full = suite.splits(seed=base.split_seeds[0], n_val=base.n_val)
    points, warmup = [], {}
    for n in sizes:
        cfg = dataclasses.replace(base, dqn=dataclasses.replace(base.dqn, total_decisions=decisions_per_task * n,
                                                                checkpoint_every=max(1, decisions_per_task * n // 8)))
        splits = quick_splits(full, n)
        # each size twice, the second timed: the decision budget is static in the selector's
        # programs (a new DQNConfig compiles anew), so the first run at a size compiles
        for rep in range(2):
            bb = ScriptedBackbone(suite.scripted_domain(), dataclasses.replace(cfg.scripted, seed=0))
            t0 = time.perf_counter()
            res = run_unit(suite, 0, cfg, backbone=bb, rows=expand_rows(["all"]), splits=splits)
            secs = time.perf_counter() - t0
            if rep == 0:
                warmup[n] = secs
        points.append({"tasks": n, "seconds": secs, "main_s": res["timing"]["cf_memory_build_train"],
                       "rows_s": res["timing"]["eval_all_rows"], "split_sizes": res["split_sizes"],
                       "decisions": cfg.dqn.total_decisions})
    return {"points": points, "first_run_s": warmup}


# --------------------------------------------------------------------------- 2. the store


def store_growth(sizes: list[int], probe: int, queries: int) -> dict:
    import random

    from cfjax.config import CounterMemConfig
    from cfjax.countermem.agent import Agent
    from cfjax.countermem.pipeline import construct
    from cfjax.countermem.store import Candidate, MemoryStore
    from cfjax.domains import build_suite
    from cfjax.infra.cache import CachedWorld
    from cfjax.llm.scripted import ScriptedBackbone

    root = Path(tempfile.mkdtemp(prefix="cfjax-scaling-store-"))
    suite = build_suite("sql", root / "sql")
    cfg = CounterMemConfig()
    splits = suite.splits(seed=cfg.split_seeds[0], n_val=cfg.n_val)
    seed_store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    ag = Agent(ScriptedBackbone(suite.scripted_domain()), CachedWorld(suite.world()), cfg, store=seed_store,
               envs=dict(suite.envs()), edits=suite.edits)
    construct(ag, splits.build, seed=0)
    seeds = list(seed_store.records.values())
    rng = random.Random(0)
    words = [w for r in seeds for w in r.situation.split()] or ["state"]
    big = dataclasses.replace(cfg.store, capacity=max(sizes) + probe + 1)
    store = MemoryStore(big, cfg.retrieval, edits=suite.edits)
    made = 0

    def candidate() -> Candidate:
        nonlocal made
        r = seeds[made % len(seeds)]
        made += 1
        situation = r.situation + " " + " ".join(rng.choice(words) for _ in range(6)) + f" #{made}"
        return Candidate(f"synthetic/{made}", situation, r.original, r.improved, r.unit_before, r.unit_after,
                         r.evidence, r.condition, r.score_before, r.score_after)

    from dataclasses import asdict

    from cfjax.countermem.conditions import parse_condition
    from cfjax.countermem.store import Record, RecordStats

    def fill() -> None:
        """One replicated record straight into the store (Eq. 4 would reject most copies as redundant:
        that is its job; the fill only builds a store of the size to time admissions against)."""
        c = candidate()
        rid = store._next_id
        store._next_id += 1
        store._clock += 1
        rec = Record(**asdict(c), record_id=rid, admission_score=0.0, created=store._clock)
        store._insert(rec, RecordStats(), parse_condition(c.condition))

    eval_tasks = list(splits.eval)[:queries]
    points = []
    for n in sizes:
        while len(store) < n:
            fill()
        t0 = time.perf_counter()
        for _ in range(probe):
            store.admit(candidate())
        admit_ms = 1e3 * (time.perf_counter() - t0) / probe
        t0 = time.perf_counter()
        for t in eval_tasks:
            store.retrieve(t, t.question)
        retrieve_ms = 1e3 * (time.perf_counter() - t0) / len(eval_tasks)
        groups = {}
        for rid in store.records:
            e = store._advice[rid][0]
            groups[e] = groups.get(e, 0) + 1
        points.append({"records": len(store), "admit_ms": admit_ms, "retrieve_ms": retrieve_ms,
                       "largest_edit_group": max(groups.values()), "edit_groups": len(groups)})
    return {"points": points, "seed_records": len(seeds)}


# --------------------------------------------------------------------------- 3. the acquisition window


def window_growth(sizes: list[int], budget: int, r: int) -> dict:
    import statistics

    import jax

    import cfjax.kernels as K
    from benchmarks.evsi import make_instance

    from benchmarks.evsi import cast

    import numpy as np

    points = []
    key = jax.random.key(0)
    for n in sizes:
        inputs = jax.device_put(cast(make_instance(n, r, seed=0), np.float32))
        fn = jax.jit(K.make_acquire(budget=budget))
        t0 = time.perf_counter()
        compiled = fn.lower(key, inputs).compile()
        compile_s = time.perf_counter() - t0
        jax.block_until_ready(compiled(key, inputs))
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(compiled(key, inputs))
            times.append(time.perf_counter() - t0)
        points.append({"pool": n, "steady_ms": 1e3 * statistics.median(times), "compile_s": compile_s})
    return {"points": points, "budget": budget, "r": r}


# --------------------------------------------------------------------------- 4. LLM latency


def llm_latency(latencies: list[float], inflight: int) -> dict:
    from benchmarks.llm_throughput import whole_unit
    from cfjax.config import CounterMemConfig, quick
    from cfjax.config.presets import QUICK
    from cfjax.domains import build_suite
    from cfjax.experiments.countermem.runner import quick_splits

    root = Path(tempfile.mkdtemp(prefix="cfjax-scaling-llm-"))
    suite = build_suite("sql", root / "sql")
    cfg = quick(CounterMemConfig())
    splits = quick_splits(suite.splits(seed=cfg.split_seeds[0], n_val=cfg.n_val), QUICK.max_tasks)
    points = []
    for lat in latencies:
        w = whole_unit(suite, splits, cfg, latency=lat, inflight=inflight)
        points.append({"latency_s": lat, "seconds": w["total_s"], "requests": w["requests"],
                       "mean_inflight": w["server_inflight"]["mean"], "max_inflight": w["server_inflight"]["max"]})
    return {"points": points, "max_inflight": inflight}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument("--tasks", type=int, nargs="+", default=[24, 48, 96], help="tasks per split (1×, 2×, 4×)")
    p.add_argument("--decisions-per-task", type=int, default=20)
    p.add_argument("--records", type=int, nargs="+", default=[100, 1_000, 10_000, 100_000])
    p.add_argument("--probe", type=int, default=200, help="admissions timed at each store size")
    p.add_argument("--queries", type=int, default=50, help="retrievals timed at each store size")
    p.add_argument("--pools", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    p.add_argument("--latencies", type=float, nargs="+", default=[0.02, 0.1, 0.5])
    p.add_argument("--max-inflight", type=int, default=32)
    p.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    threads = setup_threads(args.cores)
    load = start_load()
    t_start = time.perf_counter()
    tables, payload = [], {}
    growth_rows = []

    if "main" in args.parts:
        m = main_job(args.tasks, args.decisions_per_task)
        pts = m["points"]
        b = exponent([q["tasks"] for q in pts], [q["seconds"] for q in pts])
        bm = exponent([q["tasks"] for q in pts], [q["main_s"] for q in pts])
        br = exponent([q["tasks"] for q in pts], [q["rows_s"] for q in pts])
        print(f"main job: {[(q['tasks'], round(q['seconds'], 1)) for q in pts]} exponent {b:.2f}")
        tables.append(table("main_job", "One countermem run unit (SQL, every row) against tasks per split",
                            ["tasks per split", "selector decisions", "unit s", "main build + train s", "rows s"],
                            [[q["tasks"], q["decisions"], f"{q['seconds']:.1f}", f"{q['main_s']:.1f}",
                              f"{q['rows_s']:.1f}"] for q in pts],
                            note=f"exponents: unit {b:.2f}, main {bm:.2f}, rows {br:.2f}; the second run at each "
                                 "size (the first compiles: " + ", ".join(f"{k}: {v:.1f} s" for k, v in
                                                                          m["first_run_s"].items())
                                 + "); splits are capped at the suite's own sizes; scripted backbone (a seeded "
                                   "simulator)"))
        growth_rows.append(["main job (one unit, every row)", "tasks per split", f"{pts[0]['tasks']}…{pts[-1]['tasks']}",
                            f"{b:.2f}", "decisions ∝ tasks; a bigger store is used more (revisions, §6 snapshots)"])
        payload["main_job"] = m
    if "store" in args.parts:
        s = store_growth(args.records, args.probe, args.queries)
        pts = s["points"]
        ba = exponent([q["records"] for q in pts], [q["admit_ms"] for q in pts])
        bq = exponent([q["records"] for q in pts], [q["retrieve_ms"] for q in pts])
        print(f"store: {[(q['records'], round(q['admit_ms'], 3), round(q['retrieve_ms'], 3)) for q in pts]}")
        tables.append(table("store", "MemoryStore: one admission and one retrieval against store size",
                            ["records", "admit ms", "retrieve ms", "largest same-edit group", "edit groups"],
                            [[f"{q['records']:,}", f"{q['admit_ms']:.3f}", f"{q['retrieve_ms']:.3f}",
                              f"{q['largest_edit_group']:,}", q["edit_groups"]] for q in pts],
                            note=f"exponents: admission {ba:.2f}, retrieval {bq:.2f} (per operation against store "
                                 f"size); records replicated from a real store of {s['seed_records']} (same masked "
                                 "edits and conditions)"))
        growth_rows.append(["admission (Eq. 4 + insert), per record", "store records",
                            f"{pts[0]['records']:,}…{pts[-1]['records']:,}", f"{ba:.2f}",
                            "Eq. 4 over the same/reversed-edit group; per distinct condition and as one "
                            "matrix-vector product beyond 512 records"])
        growth_rows.append(["retrieval (Eq. 7 filter + Eq. 8 top-k), per query", "store records",
                            f"{pts[0]['records']:,}…{pts[-1]['records']:,}", f"{bq:.2f}",
                            "O(N) array work; each distinct condition evaluated once"])
        payload["store"] = s
    if "window" in args.parts:
        w = window_growth(args.pools, 16, 32)
        pts = w["points"]
        bw = exponent([q["pool"] for q in pts], [q["steady_ms"] for q in pts])
        print(f"window: {[(q['pool'], round(q['steady_ms'], 2)) for q in pts]} exponent {bw:.2f}")
        tables.append(table("window", "UpliftMem EVSI acquisition window (budget 16, r = 32) against pool size",
                            ["pool N (probes = comparisons)", "steady ms", "compile s"],
                            [[q["pool"], f"{q['steady_ms']:.2f}", f"{q['compile_s']:.2f}"] for q in pts],
                            note=f"exponent {bw:.2f}; steady = median of 5 calls after one warm call"))
        growth_rows.append(["UpliftMem acquisition window", "pool N", f"{pts[0]['pool']}…{pts[-1]['pool']}",
                            f"{bw:.2f}", f"quadratic work: budget × N probes × J = N comparisons "
                                         f"(b = {bw / 2:.2f} against N·J)"])
        payload["window"] = w
    if "llm" in args.parts:
        ll = llm_latency(args.latencies, args.max_inflight)
        pts = ll["points"]
        bl = exponent([q["latency_s"] for q in pts], [q["seconds"] for q in pts])
        print(f"llm: {[(q['latency_s'], round(q['seconds'], 1), round(q['mean_inflight'], 1)) for q in pts]}")
        tables.append(table("llm", f"The whole quick SQL unit through the OpenAI client against latency "
                                   f"(max_inflight {args.max_inflight})",
                            ["latency ms", "requests", "unit s", "server in flight mean / max"],
                            [[f"{1000 * q['latency_s']:.0f}", q["requests"], f"{q['seconds']:.1f}",
                              f"{q['mean_inflight']:.1f} / {q['max_inflight']:.0f}"] for q in pts],
                            note=f"exponent of wall time on latency {bl:.2f} (1 = every request waits in a chain; "
                                 "0 = latency fully hidden)"))
        growth_rows.append(["quick unit through the OpenAI client", "server latency",
                            f"{1000 * pts[0]['latency_s']:.0f}…{1000 * pts[-1]['latency_s']:.0f} ms", f"{bl:.2f}",
                            "wall time vs latency; below 1 = overlapped"])
        payload["llm"] = ll
    tables.insert(0, table("growth", "Growth exponents (cost ∝ work^b)", ["cost", "work", "range", "b", "note"],
                           growth_rows))
    meta = finish_meta(make_meta("scaling", SOURCES, args, threads, load), t_start)
    path = write_result("scaling", {"meta": meta, "tables": tables, **payload}, out=args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

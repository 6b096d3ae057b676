"""UpliftMem beam search (App. B.1, W = 2): the jitted + vmapped kernel vs a Python loop.

Workload: ``--tasks`` (1,024) tasks, each a recalled pool of ``N = 50``
memories with a ``d = 64`` context, integer token costs in [50, 400], a token
budget of 1,200, ~10 % of the candidates masked invalid; member cap ``K = 5``,
beam width ``W = 2``, 2 kept per parent. The set scorer is a small DeepSets
MLP defined here (``G(c, S) = a·z + b`` for ``S ≠ ∅``, 0 at ∅, with
``z = w·relu(W1 [relu(W_c c); mean_{m∈S} relu(W_m pool_m)] + b1)``, hidden 64).

Implementations, all running the same App. B.1 procedure on the same tasks:

* **kernel**: ``jax.jit(jax.vmap(make_beam_search(score, k_max=5)))`` over all
  tasks — one XLA program; each depth scores the ``W × N`` extension grid in
  one batch. Compile = first call minus steady; steady = median of
  ``--repeats`` calls.
* **Python loop, scorer per set** (the requested peer):
  ``cfjax.kernels.reference.beam_search_reference`` — plain Python App. B.1 that
  calls the *jitted* scorer once per feasible extension (``float(...)`` per
  call; context and pool already on device). Warmed up (scorer compiled)
  before timing.
* **Python loop, batched per parent** (a stronger, extra peer): the same
  loop, but one jitted call scores all ``N`` extensions of a parent.

Outputs are checked: per task, the chosen set and the archive of the kernel vs
the per-set loop (differences are accepted only as float near-ties, counted
and reported). Scaling: the kernel alone for ``N`` up to 1,000 (tasks/s,
``jax.lax.map`` over chunks of ``--chunk`` vmapped tasks to bound memory).

Threads: the kernel and the loops get the same ``--cores`` (default 1): the process is bound to
them (``sched_setaffinity``, which XLA's CPU client reads at start-up) and OMP/OPENBLAS/MKL/NUMEXPR
are sized to them before NumPy is imported; ``--xla-threads 1`` with more cores makes XLA compute on
the calling thread (``--xla_cpu_multi_thread_eigen=false``). CPU time / wall time of every timed side
and of a matmul-heavy XLA probe loop is recorded (≈ 1.0 = one core). Results go to
``benchmarks/results/beam.json`` (``meta`` + ``tables``); ``python benchmarks/render.py`` puts the
tables into RESULTS.md.

Usage:
    python benchmarks/beam.py [--quick] [--tasks 1024] [--loop-tasks N] [--cores 1] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import (finish_meta, fmt_ratio, fmt_s, make_meta, pin_peers, setup_threads,  # noqa: E402
                               start_load, xla_probe)
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "kernels/_base.py", "kernels/beam.py",
           "kernels/reference/beam.py"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke mode: 128 tasks, loop on 16, small scaling sweep")
    p.add_argument("--tasks", type=int, default=1024)
    p.add_argument("--n", type=int, default=50, help="candidate pool size N")
    p.add_argument("--k", type=int, default=5, help="member cap K")
    p.add_argument("--width", type=int, default=2, help="beam width W")
    p.add_argument("--d", type=int, default=64, help="context / memory embedding dim")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--budget", type=float, default=1200.0, help="token budget per task")
    p.add_argument("--loop-tasks", type=int, default=None,
                   help="tasks run by the per-set Python loop (default: all; fewer = extrapolated, labelled)")
    p.add_argument("--batched-loop-tasks", type=int, default=None, help="same for the batched-per-parent loop")
    p.add_argument("--repeats", type=int, default=5, help="steady-state kernel calls (median reported)")
    p.add_argument("--scaling-n", type=int, nargs="+", default=[50, 100, 200, 500, 1000])
    p.add_argument("--scaling-tasks", type=int, default=256)
    p.add_argument("--chunk", type=int, default=32, help="tasks vmapped per lax.map step in the scaling sweep")
    p.add_argument("--kernel-chunk", type=int, default=64,
                   help="second kernel row: lax.map over chunks of this many vmapped tasks (cache-sized batches)")
    p.add_argument("--cores", type=int, default=1, help="cores (and thread-pool size) for every side")
    p.add_argument("--xla-threads", type=int, default=None,
                   help="1 = XLA computes on the calling thread; default --cores")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/beam.json)")
    a = p.parse_args(argv)
    if a.quick:
        a.tasks = min(a.tasks, 128)
        a.loop_tasks = 16 if a.loop_tasks is None else a.loop_tasks
        a.batched_loop_tasks = 16 if a.batched_loop_tasks is None else a.batched_loop_tasks
        a.repeats = 2
        a.scaling_n = [50, 200]
        a.scaling_tasks = 32
    a.loop_tasks = a.tasks if a.loop_tasks is None else min(a.loop_tasks, a.tasks)
    a.batched_loop_tasks = a.tasks if a.batched_loop_tasks is None else min(a.batched_loop_tasks, a.tasks)
    return a


ARGS = parse_args() if __name__ == "__main__" else None
LOAD_BEFORE = start_load() if ARGS is not None else None  # before anything of ours runs
THREADS = setup_threads(ARGS.cores, xla_threads=ARGS.xla_threads) if ARGS is not None else {}

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from cfjax.kernels import BeamResult, make_beam_search  # noqa: E402
from cfjax.kernels.reference import beam_search_reference  # noqa: E402


# --------------------------------------------------------------------------
# Scorer and tasks.
# --------------------------------------------------------------------------
def init_scorer(key, d: int, h: int) -> dict:
    """Parameters of the DeepSets set scorer (fixed random init)."""
    k = jax.random.split(key, 4)
    return {"Wc": jax.random.normal(k[0], (d, h)) / np.sqrt(d), "Wm": jax.random.normal(k[1], (d, h)) / np.sqrt(d),
            "W1": jax.random.normal(k[2], (2 * h, h)) / np.sqrt(2 * h), "b1": jnp.zeros((h,)),
            "w2": jax.random.normal(k[3], (h,)) / np.sqrt(h), "a": jnp.asarray(1.0), "b": jnp.asarray(-0.05)}


def set_score(params, context, pool, members):
    """``G(c, S)`` for one set ``members bool[N]`` (0 at ∅). Under ``vmap`` over
    masks, the context and per-memory embeddings are computed once."""
    f = members.astype(jnp.float32)
    n = jnp.sum(f)
    phi = jax.nn.relu(pool @ params["Wm"])  # [N, h]
    pooled = (f @ phi) / jnp.maximum(n, 1.0)
    ce = jax.nn.relu(context @ params["Wc"])
    h = ce.shape[0]
    # W1 [ce; pooled] split into its two blocks: the context half is computed once per task
    z = jax.nn.relu(ce @ params["W1"][:h] + pooled @ params["W1"][h:] + params["b1"]) @ params["w2"]
    return jnp.where(n > 0, params["a"] * z + params["b"], 0.0)


def make_tasks(seed: int, tasks: int, n: int, d: int, budget: float):
    rng = np.random.default_rng(seed)
    ctx = rng.normal(size=(tasks, d)).astype(np.float32)
    pool = rng.normal(size=(tasks, n, d)).astype(np.float32)
    costs = rng.integers(50, 401, size=(tasks, n)).astype(np.float32)  # token counts
    valid = rng.random((tasks, n)) >= 0.1
    budgets = np.full(tasks, budget, np.float32)
    return ctx, pool, costs, valid, budgets


# --------------------------------------------------------------------------
# Python-loop peers.
# --------------------------------------------------------------------------
def batched_loop_search(score_parent, context, pool, costs, valid, budget, *, k_max: int, width: int,
                        per_parent: int = 2) -> tuple[np.ndarray, float]:
    """App. B.1 in Python with one jitted call per parent (all N extensions at once).

    Same tie rule as the kernel / reference. Returns ``(members, value)``.
    """
    n = costs.shape[0]
    eye = np.eye(n, dtype=bool)
    beam = [((), 0.0)]  # (sorted members, cost)
    archive = [((), 0.0)]
    for _ in range(k_max):
        kept = []
        for members, cost in beam:
            feas = valid.copy()
            feas[list(members)] = False
            feas &= cost + costs <= budget
            if not feas.any():
                continue
            parent = np.zeros(n, bool)
            parent[list(members)] = True
            vals = np.asarray(score_parent(context, pool, parent[None] | eye))
            idx = np.flatnonzero(feas)
            order = idx[np.lexsort((idx, -vals[idx]))][:per_parent]
            kept += [(tuple(sorted(members + (int(m),))), float(vals[m]), cost + costs[m]) for m in order]
        if not kept:
            break
        best: dict = {}
        for ext, v, c in kept:
            if ext not in best or v > best[ext][0]:
                best[ext] = (v, c)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:width]
        beam = [(ext, c) for ext, (v, c) in ranked]
        archive += [(ext, v) for ext, (v, c) in ranked]
    ext, v = min(archive, key=lambda e: (-e[1], len(e[0]), e[0]))
    m = np.zeros(n, bool)
    m[list(ext)] = True
    return m, v


# --------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------
def timed(fn, *args):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0


def steady_calls(fn, args, repeats: int) -> tuple[list[float], dict]:
    """``repeats`` timed calls and their CPU time / wall time."""
    cw: dict = {}
    with cpu_wall(cw):
        ts = [timed(fn, *args)[1] for _ in range(repeats)]
    return ts, cw


def compare(kernel: BeamResult, ref: BeamResult, rtol: float = 1e-5) -> str:
    """'same' | 'near_tie' (differs only where the loop's values tie within rtol) | 'DIFFERENT'."""
    if (np.array_equal(kernel.members, ref.members) and np.array_equal(kernel.archive_members, ref.archive_members)
            and np.array_equal(kernel.archive_valid, ref.archive_valid)):
        ok = np.allclose(kernel.archive_values, ref.archive_values, rtol=rtol, atol=rtol)
        return "same" if ok else "DIFFERENT"
    # a different choice is acceptable only if the two picks are within float noise of each other
    close = abs(float(kernel.value) - float(ref.value)) <= rtol * (1 + abs(float(ref.value)))
    return "near_tie" if close else "DIFFERENT"


def main(args) -> dict:
    t_start = time.perf_counter()
    threads = THREADS
    pin_peers(args.cores, threads)
    print(f"threads: {threads}; XLA probe CPU/wall {xla_probe(threads)['cpu_over_wall']}", flush=True)
    B, N, K, W = args.tasks, args.n, args.k, args.width
    params = init_scorer(jax.random.PRNGKey(args.seed), args.d, args.hidden)
    score = lambda c, p, m: set_score(params, c, p, m)  # noqa: E731
    tasks = make_tasks(args.seed, B, N, args.d, args.budget)

    # ---- kernel ------------------------------------------------------------------------
    search = jax.jit(jax.vmap(make_beam_search(score, k_max=K, width=W)))
    out, first = timed(search, *tasks)
    steady, cw = steady_calls(search, tasks, args.repeats)
    k_steady = statistics.median(steady)
    kernel = {"first_call_s": first, "steady_s": k_steady, "steady_all_s": steady, "compile_s": first - k_steady,
              "tasks_per_s": B / k_steady, "cpu_wall": cw}
    out = jax.tree.map(np.asarray, out)
    print(f"kernel: compile {kernel['compile_s']:.2f}s  steady {k_steady * 1e3:.1f} ms for {B} tasks  "
          f"({kernel['tasks_per_s']:,.0f} tasks/s)", flush=True)
    one = make_beam_search(score, k_max=K, width=W)
    chunk = min(args.kernel_chunk, B)
    chunked = jax.jit(lambda *xs: jax.lax.map(lambda x: one(*x), xs, batch_size=chunk))
    out_c, first_c = timed(chunked, *tasks)
    steady_c, cw_c = steady_calls(chunked, tasks, args.repeats)
    kc_steady = statistics.median(steady_c)
    kernel_chunked = {"chunk": chunk, "first_call_s": first_c, "steady_s": kc_steady, "steady_all_s": steady_c,
                      "cpu_wall": cw_c,
                      "compile_s": first_c - kc_steady, "tasks_per_s": B / kc_steady,
                      "identical_to_full_vmap": all(np.array_equal(np.asarray(a), b) for a, b in zip(out_c, out))}
    print(f"kernel (lax.map over chunks of {chunk} vmapped tasks): compile {kernel_chunked['compile_s']:.2f}s  "
          f"steady {kc_steady * 1e3:.1f} ms ({kernel_chunked['tasks_per_s']:,.0f} tasks/s); identical to full vmap: "
          f"{kernel_chunked['identical_to_full_vmap']}", flush=True)

    # ---- Python loop, scorer once per set ----------------------------------------------
    score_one = jax.jit(score)
    calls = [0]

    def score_fn(c, p, m):
        calls[0] += 1
        return float(score_one(c, p, m))

    dev = [(jnp.asarray(tasks[0][i]), jnp.asarray(tasks[1][i])) for i in range(max(args.loop_tasks, 1))]
    jax.block_until_ready(score_one(*dev[0], np.zeros(N, bool)))  # warm-up (compile)
    beam_search_reference(score_fn, *dev[0], tasks[2][0], tasks[3][0], tasks[4][0], k_max=K, width=W)
    calls[0] = 0
    verdicts = []
    cw_loop: dict = {}
    with cpu_wall(cw_loop):
        t0 = time.perf_counter()
        refs = [beam_search_reference(score_fn, *dev[i], tasks[2][i], tasks[3][i], tasks[4][i], k_max=K, width=W)
                for i in range(args.loop_tasks)]
        loop_s = time.perf_counter() - t0
    for i, ref in enumerate(refs):
        verdicts.append(compare(BeamResult(*(x[i] for x in out)), ref))
    per_task = loop_s / args.loop_tasks
    loop = {"tasks_timed": args.loop_tasks, "seconds_timed": loop_s, "per_task_s": per_task,
            "seconds_for_all_tasks": per_task * B, "extrapolated": args.loop_tasks < B,
            "scorer_calls": calls[0], "calls_per_task": calls[0] / args.loop_tasks,
            "us_per_call": loop_s / max(calls[0], 1) * 1e6, "tasks_per_s": 1 / per_task, "cpu_wall": cw_loop}
    check = {v: verdicts.count(v) for v in ("same", "near_tie", "DIFFERENT")}
    ratio = loop["seconds_for_all_tasks"] / k_steady
    # CPU seconds per task (one core per side by default: insensitive to time other jobs took)
    loop["cpu_s_per_task"] = cw_loop["cpu_s"] / args.loop_tasks
    kernel["cpu_s_per_task"] = kernel["cpu_wall"]["cpu_s"] / (args.repeats * B)
    kernel_chunked["cpu_s_per_task"] = kernel_chunked["cpu_wall"]["cpu_s"] / (args.repeats * B)
    ratio_c = loop["seconds_for_all_tasks"] / kc_steady
    print(f"python loop (per set): {loop_s:.2f}s for {args.loop_tasks} tasks ({loop['calls_per_task']:.0f} calls/task, "
          f"{loop['us_per_call']:.0f} µs/call) → {loop['seconds_for_all_tasks']:.2f}s for {B}"
          f"{' (extrapolated)' if loop['extrapolated'] else ''}; ratio {ratio:,.0f}×; check {check}", flush=True)

    # ---- Python loop, one batched call per parent -----------------------------------------
    score_parent = jax.jit(jax.vmap(score, in_axes=(None, None, 0)))
    nb = max(args.batched_loop_tasks, 1)
    devb = dev + [(jnp.asarray(tasks[0][i]), jnp.asarray(tasks[1][i])) for i in range(len(dev), nb)]
    jax.block_until_ready(score_parent(*devb[0], np.zeros((N, N), bool)))
    cw_bl: dict = {}
    with cpu_wall(cw_bl):
        t0 = time.perf_counter()
        bl = [batched_loop_search(score_parent, *devb[i], tasks[2][i], tasks[3][i], tasks[4][i], k_max=K, width=W)
              for i in range(args.batched_loop_tasks)]
        bl_s = time.perf_counter() - t0
    bl_same = sum(np.array_equal(m, out.members[i]) for i, (m, _) in enumerate(bl))
    bl_per = bl_s / max(args.batched_loop_tasks, 1)
    bloop = {"tasks_timed": args.batched_loop_tasks, "seconds_timed": bl_s, "per_task_s": bl_per,
             "seconds_for_all_tasks": bl_per * B, "extrapolated": args.batched_loop_tasks < B,
             "same_members_as_kernel": int(bl_same), "tasks_per_s": 1 / bl_per, "cpu_wall": cw_bl}
    bratio = bloop["seconds_for_all_tasks"] / k_steady
    print(f"python loop (batched per parent): {bl_s:.2f}s for {args.batched_loop_tasks} tasks → "
          f"{bloop['seconds_for_all_tasks']:.2f}s for {B}; ratio {bratio:,.1f}×; same members {bl_same}/"
          f"{args.batched_loop_tasks}", flush=True)

    # ---- scaling of the kernel in N -----------------------------------------------------------
    scaling = []
    for n in args.scaling_n:
        T = args.scaling_tasks
        t = make_tasks(args.seed + 1, T, n, args.d, args.budget)
        one = make_beam_search(score, k_max=K, width=W)
        chunk = min(args.chunk, T)
        f = jax.jit(lambda *xs, one=one, chunk=chunk: jax.lax.map(lambda x: one(*x), xs, batch_size=chunk))
        _, first_n = timed(f, *t)
        sts, cw_n = steady_calls(f, t, max(2, args.repeats // 2))
        st = statistics.median(sts)
        row = {"n": n, "tasks": T, "chunk": chunk, "compile_s": first_n - st, "steady_s": st, "tasks_per_s": T / st,
               "set_scores_per_s": T * W * n * K / st, "cpu_wall": cw_n}
        scaling.append(row)
        print(f"  N={n:5d}: {row['tasks_per_s']:10,.1f} tasks/s  ({row['set_scores_per_s']:.3g} set scores/s, "
              f"compile {row['compile_s']:.2f}s)", flush=True)

    res = {
        "benchmark": "beam_search_app_b1",
        "workload": {"tasks": B, "n": N, "k": K, "width": W, "per_parent": 2, "d": args.d, "hidden": args.hidden,
                     "budget": args.budget, "costs": "integers U[50, 400]", "invalid_fraction": 0.1,
                     "seed": args.seed, "scorer": "DeepSets MLP (see benchmarks/beam.py: set_score)"},
        "kernel": kernel,
        "kernel_chunked": kernel_chunked,
        "python_loop_per_set": loop,
        "python_loop_batched_per_parent": bloop,
        "ratio_loop_per_set_over_kernel": ratio,
        "ratio_loop_batched_over_kernel": bratio,
        "ratio_loop_per_set_over_kernel_chunked": ratio_c,
        "ratio_loop_batched_over_kernel_chunked": bloop["seconds_for_all_tasks"] / kc_steady,
        "cpu_ratio_loop_per_set_over_kernel": (loop["cpu_s_per_task"] / kernel["cpu_s_per_task"]
                                               if kernel["cpu_s_per_task"] > 0 else None),
        "cpu_ratio_loop_per_set_over_kernel_chunked": (loop["cpu_s_per_task"] / kernel_chunked["cpu_s_per_task"]
                                                       if kernel_chunked["cpu_s_per_task"] > 0 else None),
        "goal_100x_met": bool(ratio >= 100),
        "goal_100x_met_chunked": bool(ratio_c >= 100),
        "output_check_vs_loop": check,
        "mean_members": float(out.members.sum(1).mean()),
        "empty_set_chosen": int((out.members.sum(1) == 0).sum()),
        "scaling": scaling,
        "quick": args.quick,
    }
    res["tables"] = result_tables(res)
    res = {"meta": finish_meta(make_meta("beam", SOURCES, args, threads, LOAD_BEFORE), t_start), **res}
    return res


def result_tables(res: dict) -> list[dict]:
    """The tables RESULTS.md shows (rendered by benchmarks/render.py)."""
    w, k, kc = res["workload"], res["kernel"], res["kernel_chunked"]
    lp, bl = res["python_loop_per_set"], res["python_loop_batched_per_parent"]

    def ext(d: dict) -> str:
        return f" (extrapolated from {d['tasks_timed']} tasks)" if d["extrapolated"] else ""

    main_rows = [
        [f"cfjax kernel, `jit(vmap(search))` over all {w['tasks']:,} tasks (steady, median of "
         f"{len(k['steady_all_s'])})", fmt_s(k["steady_s"]), f"{k['tasks_per_s']:,.0f}", k["cpu_wall"]["cpu_over_wall"],
         fmt_ratio(res["ratio_loop_per_set_over_kernel"], bold=True), fmt_ratio(res["ratio_loop_batched_over_kernel"]),
         fmt_ratio(res["cpu_ratio_loop_per_set_over_kernel"])],
        [f"cfjax kernel, `jit(lax.map(search, batch_size={kc['chunk']}))` (vmap over cache-sized chunks; steady, "
         f"median of {len(kc['steady_all_s'])})", fmt_s(kc["steady_s"]), f"{kc['tasks_per_s']:,.0f}",
         kc["cpu_wall"]["cpu_over_wall"], fmt_ratio(res["ratio_loop_per_set_over_kernel_chunked"], bold=True),
         fmt_ratio(res["ratio_loop_batched_over_kernel_chunked"]), fmt_ratio(res["cpu_ratio_loop_per_set_over_kernel_chunked"])],
        [f"Python loop, jitted scorer once per set ({lp['calls_per_task']:.0f} calls/task, "
         f"{lp['us_per_call']:.0f} µs/call)", fmt_s(lp["seconds_for_all_tasks"]) + ext(lp), f"{lp['tasks_per_s']:,.1f}",
         lp["cpu_wall"]["cpu_over_wall"], "1×", "", "1×"],
        ["Python loop, one jitted batched call per parent (extra, stronger peer)",
         fmt_s(bl["seconds_for_all_tasks"]) + ext(bl), f"{bl['tasks_per_s']:,.1f}", bl["cpu_wall"]["cpu_over_wall"],
         "", "1×", ""],
    ]
    c = res["output_check_vs_loop"]
    checks = [
        ["kernel compile (first call − steady), full vmap / chunked", f"{k['compile_s']:.2f} s / {kc['compile_s']:.2f} s"],
        ["the two kernel rows return identical arrays", "yes" if kc["identical_to_full_vmap"] else "**no**"],
        ["goal ≥ 100× over the per-set Python loop (full vmap / chunked)",
         f"{'met' if res['goal_100x_met'] else '**not met**'} / {'met' if res['goal_100x_met_chunked'] else '**not met**'}"],
        [f"kernel vs per-set loop on {lp['tasks_timed']} tasks: identical (set, archive, values to 1e-5) / "
         "float near-ties / different", f"{c['same']} / {c['near_tie']} / {c['DIFFERENT']}"],
        ["batched loop: same chosen set as the kernel", f"{bl['same_members_as_kernel']} / {bl['tasks_timed']}"],
        ["mean chosen set size; ∅ chosen", f"{res['mean_members']:.2f}; {res['empty_set_chosen']} tasks"],
    ]
    scaling = [[f"{r['n']:,}", r["tasks"], r["chunk"], f"{r['tasks_per_s']:,.1f}", f"{r['set_scores_per_s']:.3g}",
                f"{r['compile_s']:.2f}", r["cpu_wall"]["cpu_over_wall"]] for r in res["scaling"]]
    return [
        table("main", f"{w['tasks']:,} tasks, N = {w['n']}, K = {w['k']}, W = {w['width']}, d = {w['d']}, "
              f"budget {w['budget']:.0f} tokens",
              ["implementation", "time for all tasks", "tasks/s", "CPU/wall", "per-set loop ÷ this",
               "batched loop ÷ this", "per-set loop ÷ this by CPU time"], main_rows),
        table("checks", "Compile, outputs and goal", ["check", "result"], checks),
        table("scaling", f"Kernel scaling in N (K = {w['k']}, W = {w['width']}; `jax.lax.map` over chunks of vmapped "
              "tasks)", ["N", "tasks", "chunk", "tasks/s", "set scores/s (W·N·K grid)", "compile s", "CPU/wall"],
              scaling),
    ]


if __name__ == "__main__":
    result = main(ARGS)
    print(f"wrote {write_result('beam', result, out=ARGS.out)}")

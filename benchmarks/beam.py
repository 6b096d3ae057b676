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

Threads: OMP/OPENBLAS/MKL/NUMEXPR = 1 (set before NumPy is imported); XLA's
CPU thread pool is left at its default (all cores of the machine) unless
``--xla-threads 1``; everything is recorded in the JSON.

Usage:
    python benchmarks/beam.py [--quick] [--tasks 1024] [--loop-tasks N] [--out benchmarks/results/beam.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
RESULTS = Path(__file__).resolve().parent / "results"


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
    p.add_argument("--xla-threads", type=int, default=0, help="1 = single-threaded XLA CPU; 0 = XLA default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS / "beam.json")
    p.add_argument("--md", type=Path, default=RESULTS / "beam.md")
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
for _v in _THREAD_VARS:
    os.environ[_v] = "1"
if ARGS is not None and ARGS.xla_threads == 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

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
    load_start = list(os.getloadavg())
    threads = {**{v: os.environ[v] for v in _THREAD_VARS}, "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
               "xla_cpu_threads": 1 if args.xla_threads == 1 else f"XLA default (os.cpu_count()={os.cpu_count()})",
               "os_cpu_count": os.cpu_count()}
    print(f"threads: {threads}", flush=True)
    B, N, K, W = args.tasks, args.n, args.k, args.width
    params = init_scorer(jax.random.PRNGKey(args.seed), args.d, args.hidden)
    score = lambda c, p, m: set_score(params, c, p, m)  # noqa: E731
    tasks = make_tasks(args.seed, B, N, args.d, args.budget)

    # ---- kernel ------------------------------------------------------------------------
    search = jax.jit(jax.vmap(make_beam_search(score, k_max=K, width=W)))
    out, first = timed(search, *tasks)
    steady = [timed(search, *tasks)[1] for _ in range(args.repeats)]
    k_steady = statistics.median(steady)
    kernel = {"first_call_s": first, "steady_s": k_steady, "steady_all_s": steady, "compile_s": first - k_steady,
              "tasks_per_s": B / k_steady}
    out = jax.tree.map(np.asarray, out)
    print(f"kernel: compile {kernel['compile_s']:.2f}s  steady {k_steady * 1e3:.1f} ms for {B} tasks  "
          f"({kernel['tasks_per_s']:,.0f} tasks/s)", flush=True)
    one = make_beam_search(score, k_max=K, width=W)
    chunk = min(args.kernel_chunk, B)
    chunked = jax.jit(lambda *xs: jax.lax.map(lambda x: one(*x), xs, batch_size=chunk))
    out_c, first_c = timed(chunked, *tasks)
    steady_c = [timed(chunked, *tasks)[1] for _ in range(args.repeats)]
    kc_steady = statistics.median(steady_c)
    kernel_chunked = {"chunk": chunk, "first_call_s": first_c, "steady_s": kc_steady, "steady_all_s": steady_c,
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
            "us_per_call": loop_s / max(calls[0], 1) * 1e6, "tasks_per_s": 1 / per_task}
    check = {v: verdicts.count(v) for v in ("same", "near_tie", "DIFFERENT")}
    ratio = loop["seconds_for_all_tasks"] / k_steady
    ratio_c = loop["seconds_for_all_tasks"] / kc_steady
    print(f"python loop (per set): {loop_s:.2f}s for {args.loop_tasks} tasks ({loop['calls_per_task']:.0f} calls/task, "
          f"{loop['us_per_call']:.0f} µs/call) → {loop['seconds_for_all_tasks']:.2f}s for {B}"
          f"{' (extrapolated)' if loop['extrapolated'] else ''}; ratio {ratio:,.0f}×; check {check}", flush=True)

    # ---- Python loop, one batched call per parent -----------------------------------------
    score_parent = jax.jit(jax.vmap(score, in_axes=(None, None, 0)))
    nb = max(args.batched_loop_tasks, 1)
    devb = dev + [(jnp.asarray(tasks[0][i]), jnp.asarray(tasks[1][i])) for i in range(len(dev), nb)]
    jax.block_until_ready(score_parent(*devb[0], np.zeros((N, N), bool)))
    t0 = time.perf_counter()
    bl = [batched_loop_search(score_parent, *devb[i], tasks[2][i], tasks[3][i], tasks[4][i], k_max=K, width=W)
          for i in range(args.batched_loop_tasks)]
    bl_s = time.perf_counter() - t0
    bl_same = sum(np.array_equal(m, out.members[i]) for i, (m, _) in enumerate(bl))
    bl_per = bl_s / max(args.batched_loop_tasks, 1)
    bloop = {"tasks_timed": args.batched_loop_tasks, "seconds_timed": bl_s, "per_task_s": bl_per,
             "seconds_for_all_tasks": bl_per * B, "extrapolated": args.batched_loop_tasks < B,
             "same_members_as_kernel": int(bl_same), "tasks_per_s": 1 / bl_per}
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
        st = statistics.median(timed(f, *t)[1] for _ in range(max(2, args.repeats // 2)))
        row = {"n": n, "tasks": T, "chunk": chunk, "compile_s": first_n - st, "steady_s": st, "tasks_per_s": T / st,
               "set_scores_per_s": T * W * n * K / st}
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
        "goal_100x_met": bool(ratio >= 100),
        "goal_100x_met_chunked": bool(ratio_c >= 100),
        "output_check_vs_loop": check,
        "mean_members": float(out.members.sum(1).mean()),
        "empty_set_chosen": int((out.members.sum(1) == 0).sum()),
        "scaling": scaling,
        "threads": threads,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "quick": args.quick,
        "load_avg_start": load_start, "load_avg_end": list(os.getloadavg()),
        "versions": {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__},
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpu_count": os.cpu_count()},
    }
    return res


def write_md(res: dict, path: Path) -> None:
    w, k, kc = res["workload"], res["kernel"], res["kernel_chunked"]
    lp, bl = res["python_loop_per_set"], res["python_loop_batched_per_parent"]
    ext = lambda d: " (extrapolated from {} tasks)".format(d["tasks_timed"]) if d["extrapolated"] else ""  # noqa: E731
    c = res["output_check_vs_loop"]
    lines = [
        "## Beam search over memory sets (benchmarks/beam.py)",
        "",
        f"UpliftMem App. B.1 beam search (W = {w['width']}, 2 kept per parent, archive, deterministic tie rule) "
        f"over {w['tasks']:,} tasks with N = {w['n']} candidates, K = {w['k']}, d = {w['d']}, integer token costs "
        f"U[50, 400] under a budget of {w['budget']:.0f}, 10 % of candidates invalid; scorer = a small DeepSets MLP "
        f"(hidden {w['hidden']}) defined in the benchmark. All rows run the same procedure on the same tasks in one "
        "run. `cfjax.kernels.beam.make_beam_search` is `jax.jit(jax.vmap(...))` over all tasks (one XLA program; "
        "each depth scores the W × N extension grid in one batch); the per-set Python loop is "
        "`beam_search_reference` calling the jitted scorer once per feasible extension.",
        "",
        "| implementation | time for all tasks | tasks/s | per-set loop ÷ this | batched loop ÷ this |",
        "|---|---|---|---|---|",
        f"| cfjax kernel, `jit(vmap(search))` over all {w['tasks']:,} tasks (steady, median of "
        f"{len(k['steady_all_s'])}) | {k['steady_s'] * 1e3:.1f} ms | {k['tasks_per_s']:,.0f} | "
        f"**{res['ratio_loop_per_set_over_kernel']:,.0f}×** | {res['ratio_loop_batched_over_kernel']:,.1f}× |",
        f"| cfjax kernel, `jit(lax.map(search, batch_size={kc['chunk']}))` (vmap over cache-sized chunks; "
        f"steady, median of {len(kc['steady_all_s'])}) | {kc['steady_s'] * 1e3:.1f} ms | {kc['tasks_per_s']:,.0f} | "
        f"**{res['ratio_loop_per_set_over_kernel_chunked']:,.0f}×** | "
        f"{res['ratio_loop_batched_over_kernel_chunked']:,.1f}× |",
        f"| Python loop, jitted scorer once per set ({lp['calls_per_task']:.0f} calls/task, "
        f"{lp['us_per_call']:.0f} µs/call) | {lp['seconds_for_all_tasks']:.2f} s{ext(lp)} | {lp['tasks_per_s']:,.1f} "
        "| 1× | |",
        f"| Python loop, one jitted batched call per parent (extra, stronger peer) | "
        f"{bl['seconds_for_all_tasks']:.2f} s{ext(bl)} | {bl['tasks_per_s']:,.1f} | | 1× |",
        "",
        f"Kernel compile (first call − steady): {k['compile_s']:.2f} s (full vmap), {kc['compile_s']:.2f} s "
        f"(chunked); the two kernel rows return identical arrays: {kc['identical_to_full_vmap']}. "
        f"Goal ≥ 100× over the per-set Python loop: full vmap "
        f"**{'met' if res['goal_100x_met'] else 'NOT met'}** ({res['ratio_loop_per_set_over_kernel']:,.0f}×), "
        f"chunked **{'met' if res['goal_100x_met_chunked'] else 'NOT met'}** "
        f"({res['ratio_loop_per_set_over_kernel_chunked']:,.0f}×). "
        f"Output check vs the per-set loop on {lp['tasks_timed']} tasks: {c['same']} identical (set, archive and "
        f"values to 1e-5), {c['near_tie']} differ only at float near-ties, {c['DIFFERENT']} different. "
        f"Batched loop: same chosen set on {bl['same_members_as_kernel']}/{bl['tasks_timed']} tasks. "
        f"Mean chosen set size {res['mean_members']:.2f}; ∅ chosen on {res['empty_set_chosen']} tasks.",
        "",
        "Scaling of the kernel in N (K = 5, W = 2; `jax.lax.map` over chunks of vmapped tasks):",
        "",
        "| N | tasks | chunk | tasks/s | set scores/s (W·N·K grid) | compile s |",
        "|---|---|---|---|---|---|",
    ]
    for r in res["scaling"]:
        lines.append(f"| {r['n']:,} | {r['tasks']} | {r['chunk']} | {r['tasks_per_s']:,.1f} | "
                     f"{r['set_scores_per_s']:.3g} | {r['compile_s']:.2f} |")
    t = res["threads"]
    lines += [
        "",
        f"Command: `{res['command']}` (writes `benchmarks/results/beam.json` and this file). "
        f"Threads: {', '.join(f'{v}={t[v]}' for v in _THREAD_VARS)} (set before NumPy is imported); XLA CPU threads: "
        f"{t['xla_cpu_threads']}; XLA_FLAGS={t['XLA_FLAGS'] or '(unset)'}. Machine: {res['machine']['cpu_count']} "
        f"CPUs, {res['machine']['platform']}; Python {res['versions']['python']}, jax {res['versions']['jax']}, "
        f"numpy {res['versions']['numpy']}. Load average at start/end: "
        f"{res['load_avg_start'][0]:.2f} / {res['load_avg_end'][0]:.2f}.",
        "",
        "Caveats: the per-set loop is dominated by per-call dispatch of the jitted scorer (plus a host sync per "
        "`float(...)`); that per-call overhead is exactly what the kernel removes, and it is the peer the brief asks "
        "for. The batched-per-parent loop is the fairer algorithmic peer and its ratio is much smaller. The kernel "
        "scores the full W × N grid at every depth (infeasible and finished tasks included, static shapes) while the "
        f"loops score only feasible extensions. One vmap over all {w['tasks']:,} tasks materialises large "
        "intermediates per depth and is memory-bound on this 2-core machine; the chunked row is the same kernel in cache-sized "
        "batches. Scorer values of the kernel (vmapped) and of the loop (one set per "
        "call) can differ in the last float bits, so a choice between two sets whose values tie to ~1e-6 may "
        "differ; such tasks are counted as near-ties above. Timings are wall-clock on a shared machine.",
        "",
    ]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    result = main(ARGS)
    ARGS.out.parent.mkdir(parents=True, exist_ok=True)
    ARGS.out.write_text(json.dumps(result, indent=2) + "\n")
    write_md(result, ARGS.md)
    print(f"wrote {ARGS.out} and {ARGS.md}")

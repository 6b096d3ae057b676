"""Greedy EVSI batch acquisition: cfjax kernel vs NumPy rank-one vs NumPy per-candidate recompute.

UpliftMem §4.3 / App. A.7 / B.2: select ``budget`` probes (default B_p = 300) from a pool of
``N`` candidates for a family of ``J`` comparisons (``J = N``), features of width ``r = 64``,
greedy argmax of the batch value ``V_t(q) = Σ_j [E_j(Q_t ∪ {q}) − E_j(Q_t)]``. Implementations,
all on the same instance in one run:

1. **cfjax kernel** -- ``jax.jit(make_acquire(budget=B))`` (:mod:`cfjax.kernels.acquire`): one
   ``lax.scan`` with rank-one conditioning (per step ``O(N(r + B) + J·N)``), float32 and float64.
   Compile time (``lower`` + ``compile``, AOT) is reported apart from steady state (min over
   repeats of the compiled call).
2. **NumPy rank-one** -- :func:`cfjax.kernels.reference.evsi.greedy_rank_one_reference`: the same
   algorithm with one vectorised NumPy/SciPy op at a time (``scipy.special.erfcx`` for ψ),
   float32 and float64. Run in full where affordable; otherwise its init plus ``--rank1-steps``
   steps are timed and the total is extrapolated as ``init + B·(per step)`` (the per-step cost is
   dominated by the ``O(J·N)`` pass, constant in the step).
3. **NumPy per-candidate recompute** -- :func:`cfjax.kernels.reference.evsi.batch_values_reference`:
   for every candidate ``q``, build ``W_{Q∪{q}}``, factor it (Cholesky) and recompute every
   ``s_j²(Q ∪ {q})`` (float64). Always extrapolated: the time per candidate is measured at
   ``|Q| ∈ {0, B/3, 2B/3, B−1}`` (``Q`` = the kernel's own selected prefix) and integrated as
   ``Σ_{m<B} [base(m) + (N − m)·per_candidate(m)]`` with linear interpolation in ``m``.

Selections: kernel vs NumPy rank-one (full runs, or the timed prefix), kernel float32 vs float64,
and a small instance (``--naive-n``, budget ``--naive-budget``) where the per-candidate recompute
greedy is run in full. At the timed ``|Q|`` points the per-candidate recompute's value of the
kernel's next pick is compared with the kernel's value.

Threads: the kernel and the NumPy versions get the same ``--cores`` (alias ``--blas-threads``;
default: every core this process may use): the process is bound to them (``sched_setaffinity``, which
XLA's CPU client reads at start-up), OMP/OPENBLAS/MKL/NUMEXPR are sized to them before NumPy is
imported and ``threadpoolctl`` checks the BLAS pools; NumPy's elementwise ops are single-threaded.
CPU time / wall time of every timed side and of a matmul-heavy XLA probe loop is recorded.

Usage::

    python benchmarks/evsi.py                 # full run -> benchmarks/results/evsi.json
    python benchmarks/evsi.py --quick --out /tmp/evsi.json   # smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import (finish_meta, fmt_ratio, fmt_s, make_meta, pin_peers, setup_threads,  # noqa: E402
                               start_load, xla_probe)
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "kernels/_base.py", "kernels/acquire.py",
           "kernels/evsi.py", "kernels/reference/evsi.py"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke mode: J = N in {300, 1000}, budget 40")
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="J = N values (default 1000 10000 100000)")
    p.add_argument("--budget", type=int, default=None, help="probes per batch (default 300)")
    p.add_argument("--r", type=int, default=64, help="feature width")
    p.add_argument("--repeats", type=int, default=2,
                   help="steady kernel calls per size/dtype (min reported; a single call when one takes > 120 s)")
    p.add_argument("--full-numpy-max", type=int, default=2000,
                   help="run the NumPy rank-one greedy in full up to this J = N (else time --rank1-steps)")
    p.add_argument("--rank1-steps", type=int, default=4, help="timed NumPy rank-one steps when extrapolating")
    p.add_argument("--cand-samples", type=int, default=4, help="candidates timed per |Q| point (per-candidate recompute)")
    p.add_argument("--naive-n", type=int, default=200, help="J = N of the instance where the naive greedy runs in full")
    p.add_argument("--naive-budget", type=int, default=30)
    p.add_argument("--cores", "--blas-threads", dest="cores", type=int,
                   default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                   help="cores (and thread-pool size) for every side; default: all this process may use")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/evsi.json)")
    a = p.parse_args(argv)
    if a.quick:
        a.sizes = a.sizes or [300, 1000]
        a.budget = a.budget or 40
        a.naive_n, a.naive_budget, a.repeats = 100, 10, 1
        a.full_numpy_max = min(a.full_numpy_max, 300)
    a.sizes = a.sizes or [1000, 10000, 100000]
    a.budget = a.budget or 300
    return a


# ------------------------------------------------------------------------------------ instance
def make_instance(n: int, r: int, seed: int, *, group_size: int = 20):
    """A B.2-shaped pool: tasks of ``group_size`` probes sharing one no-memory reference, comparisons
    = differences of two probes of one task (local choices), ``Σ`` = BLR posterior on 4r labels."""
    import numpy as np

    import cfjax.kernels as K
    from cfjax.kernels import reference as R

    rng = np.random.default_rng(seed)
    feats = rng.normal(size=(n, r)) * (2.0 / np.sqrt(r))
    lab = rng.normal(size=(4 * r, r)) * (2.0 / np.sqrt(r))
    y = lab @ rng.normal(size=r) + 0.5 * rng.normal(size=4 * r)
    _, sigma = R.blr_posterior_reference(lab, y, np.ones(4 * r, bool), prior_precision=1.0, noise_var=0.25)
    group = (np.arange(n) // group_size).astype(np.int32)
    a = rng.integers(0, n, n)
    b = np.minimum((a // group_size) * group_size + rng.integers(0, group_size, n), n - 1)
    dirs = feats[a] - feats[b] + 1e-3 * rng.normal(size=(n, r))
    sig2 = np.einsum("jr,rs,js->j", dirs, sigma, dirs)
    means = np.sqrt(sig2) * rng.normal(size=n)
    cand = rng.random(n) >= 0.02  # 2 % padding
    comp = rng.random(n) >= 0.02
    return K.AcquireInputs(
        features=feats, cand_mask=cand, noise_var=rng.uniform(0.1, 0.5, n), group=group, directions=dirs,
        means=means, comp_mask=comp, prior_cov=sigma, ref_noise_var=np.float64(0.1), tau=np.float64(0.01),
        mode=np.int32(0),
    )


def cast(inputs, dt):
    import numpy as np

    return inputs._replace(**{k: np.asarray(v, dt) for k, v in inputs._asdict().items()
                              if np.asarray(v).dtype.kind == "f"})


def agreement(a, b) -> dict:
    """Identical? else the first step where two selections differ and the batch overlap."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    k = min(len(a), len(b))
    diff = np.flatnonzero(a[:k] != b[:k])
    return {"steps_compared": int(k), "identical": bool(diff.size == 0),
            "first_divergence": None if diff.size == 0 else int(diff[0]),
            "overlap": float(len(set(a[:k].tolist()) & set(b[:k].tolist())) / max(k, 1))}


# ---------------------------------------------------------------------------------- runners
def run_kernel(inputs, dt, budget: int, repeats: int, max_repeat_s: float = 120.0) -> dict:
    import jax
    import numpy as np

    import cfjax.kernels as K

    with jax.enable_x64(dt == np.float64):
        inp = jax.device_put(cast(inputs, dt))
        key = jax.random.key(0)
        fn = jax.jit(K.make_acquire(budget=budget))
        t0 = time.perf_counter()
        compiled = fn.lower(key, inp).compile()
        compile_s = time.perf_counter() - t0
        times: list[float] = []
        cw: dict = {}
        with cpu_wall(cw):
            for _ in range(repeats):
                t0 = time.perf_counter()
                res = jax.block_until_ready(compiled(key, inp))
                times.append(time.perf_counter() - t0)
                if times[-1] > max_repeat_s:  # long runs: one steady call is enough
                    break
        res = jax.tree.map(np.asarray, res)
    steady = min(times)
    return {"compile_s": compile_s, "steady_s": steady, "all_s": times, "ms_per_step": 1e3 * steady / budget,
            "cpu_wall": cw,
            "selected": res.selected.tolist(), "value": res.value.tolist(), "n_selected": int((res.selected >= 0).sum())}


def run_rank_one(inputs, dt, budget: int, steps: int | None) -> dict:
    from cfjax.kernels import reference as R

    cw: dict = {}
    with cpu_wall(cw):
        t0 = time.perf_counter()
        R.greedy_rank_one_reference(inputs, budget, dtype=dt, n_steps=0)
        init_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        sel, val, _ = R.greedy_rank_one_reference(inputs, budget, dtype=dt, n_steps=steps)
        run_s = time.perf_counter() - t0
    k = budget if steps is None else steps
    per_step = max(run_s - init_s, 0.0) / k
    total = run_s if steps is None else init_s + budget * per_step
    return {"init_s": init_s, "timed_steps": k, "timed_s": run_s, "ms_per_step": 1e3 * per_step,
            "total_s": total, "extrapolated": steps is not None, "selected": sel[:k].tolist(), "cpu_wall": cw}


def run_per_candidate(inputs, budget: int, kernel_sel, kernel_val, samples: int) -> dict:
    """Time per-candidate recomputation at a few |Q| and integrate over the B steps."""
    import numpy as np

    from cfjax.kernels import reference as R

    n_valid = int(np.asarray(inputs.cand_mask).sum())
    points = sorted({0, budget // 3, (2 * budget) // 3, budget - 1})
    rows = []
    cw: dict = {}
    timer = cpu_wall(cw)
    timer.__enter__()
    for m in points:
        q_set = [int(q) for q in kernel_sel[:m]]
        avail = [q for q in np.flatnonzero(inputs.cand_mask) if q not in q_set]
        nxt = int(kernel_sel[m])
        cands = [nxt] + [int(q) for q in avail if q != nxt][: samples - 1]
        t0 = time.perf_counter()
        R.batch_values_reference(inputs, q_set, candidates=[])
        base = time.perf_counter() - t0
        t0 = time.perf_counter()
        vals = R.batch_values_reference(inputs, q_set, candidates=cands)
        tot = time.perf_counter() - t0
        rows.append({"q_size": m, "base_s": base, "per_candidate_s": max(tot - base, 0.0) / len(cands),
                     "value_next_pick": float(vals[nxt]), "kernel_value": float(kernel_val[m]),
                     "rel_diff": float(abs(vals[nxt] - kernel_val[m]) / max(abs(kernel_val[m]), 1e-300))})
    timer.__exit__(None, None, None)
    ms = np.arange(budget)
    base = np.interp(ms, points, [r["base_s"] for r in rows])
    per = np.interp(ms, points, [r["per_candidate_s"] for r in rows])
    total = float(np.sum(base + (n_valid - ms) * per))
    return {"points": rows, "total_s": total, "extrapolated": True, "ms_per_step": 1e3 * total / budget,
            "cpu_wall": cw}


def naive_full(args) -> dict:
    """Small instance where the per-candidate recompute greedy runs in full."""
    import numpy as np

    from cfjax.kernels import reference as R

    inputs = make_instance(args.naive_n, args.r, args.seed + 1)
    k64 = run_kernel(inputs, np.float64, args.naive_budget, 1)
    k32 = run_kernel(inputs, np.float32, args.naive_budget, 1)
    t0 = time.perf_counter()
    sel, _ = R.greedy_reference(inputs, args.naive_budget)
    naive_s = time.perf_counter() - t0
    r1 = run_rank_one(inputs, np.float64, args.naive_budget, None)
    return {"J": args.naive_n, "N": args.naive_n, "budget": args.naive_budget, "naive_s": naive_s,
            "kernel_f64_s": k64["steady_s"], "kernel_f32_s": k32["steady_s"], "rank_one_f64_s": r1["total_s"],
            "kernel_f64_vs_naive": agreement(k64["selected"], sel), "kernel_f32_vs_naive": agreement(k32["selected"], sel),
            "rank_one_vs_naive": agreement(r1["selected"], sel)}


def fits_in_memory(n: int) -> tuple[bool, str]:
    phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    need = 3 * n * n * 4  # κ carry (double-buffered) + the [J, N] gains, float32
    ok = need < 0.6 * phys
    return ok, (f"J×N = {n * n:.1e} pairs: the kernel needs ≈ {need / 2**30:.0f} GiB (κ double-buffered + the "
                f"[J, N] gains, float32; twice that in float64) and the NumPy versions more, "
                f"RAM is {phys / 2**30:.0f} GiB")


# ------------------------------------------------------------------------------------- main
def main(argv=None) -> dict:
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_before = start_load()
    threads = setup_threads(args.cores)
    import numpy as np
    import scipy

    pin_peers(args.cores, threads)
    print(f"threads: {threads}; XLA probe CPU/wall {xla_probe(threads)['cpu_over_wall']}", flush=True)
    out = {"budget": args.budget, "r": args.r, "quick": args.quick, "sizes": {}, "skipped": {}}
    print(f"naive full greedy at J = N = {args.naive_n}, budget {args.naive_budget} ...", flush=True)
    out["naive_full"] = naive_full(args)
    print(json.dumps({k: v for k, v in out["naive_full"].items()}, default=str), flush=True)
    for n in args.sizes:
        ok, why = fits_in_memory(n)
        if not ok:
            out["skipped"][str(n)] = why
            print("skip", n, why, flush=True)
            continue
        inputs = make_instance(n, args.r, args.seed)
        row = {"J": n, "N": n, "n_valid_candidates": int(inputs.cand_mask.sum()),
               "n_valid_comparisons": int(inputs.comp_mask.sum())}
        for name, dt in (("f32", np.float32), ("f64", np.float64)):
            print(f"[{n}] kernel {name} ...", flush=True)
            row[f"kernel_{name}"] = run_kernel(inputs, dt, args.budget, args.repeats)
            print(f"   compile {row[f'kernel_{name}']['compile_s']:.2f}s steady {row[f'kernel_{name}']['steady_s']:.2f}s",
                  flush=True)
        steps = None if n <= args.full_numpy_max else args.rank1_steps
        for name, dt in (("f32", np.float32), ("f64", np.float64)):
            print(f"[{n}] numpy rank-one {name} ({'full' if steps is None else f'{steps} steps'}) ...", flush=True)
            r1 = run_rank_one(inputs, dt, args.budget, steps)
            r1["vs_kernel"] = agreement(row[f"kernel_{name}"]["selected"], r1["selected"])
            r1["kernel_speedup"] = r1["total_s"] / row[f"kernel_{name}"]["steady_s"]
            row[f"rank_one_{name}"] = r1
            print(f"   total {r1['total_s']:.1f}s ({'extrapolated' if r1['extrapolated'] else 'measured'}), "
                  f"speed-up {r1['kernel_speedup']:.1f}x, agree {r1['vs_kernel']}", flush=True)
        print(f"[{n}] numpy per-candidate recompute (sampled) ...", flush=True)
        k64 = row["kernel_f64"]
        pc = run_per_candidate(inputs, args.budget, k64["selected"], k64["value"], args.cand_samples)
        pc["kernel_speedup_f32"] = pc["total_s"] / row["kernel_f32"]["steady_s"]
        pc["kernel_speedup_f64"] = pc["total_s"] / row["kernel_f64"]["steady_s"]
        row["per_candidate_f64"] = pc
        print(f"   total {pc['total_s']:.0f}s (extrapolated), speed-up f32 {pc['kernel_speedup_f32']:.0f}x", flush=True)
        row["kernel_f32_vs_f64"] = agreement(row["kernel_f32"]["selected"], row["kernel_f64"]["selected"])
        out["sizes"][str(n)] = row
    for row in out["sizes"].values():  # keep the JSON small: selections only as agreement summaries
        for k in ("kernel_f32", "kernel_f64", "rank_one_f32", "rank_one_f64"):
            row[k].pop("selected", None)
            row[k].pop("value", None)
    out["tables"] = result_tables(out)
    meta = make_meta("evsi", SOURCES, args, threads, load_before)
    meta["versions"]["scipy"] = scipy.__version__
    out = {"meta": finish_meta(meta, t_start), **out}
    print(f"wrote {write_result('evsi', out, out=args.out)}")
    return out


def _agree(a: dict) -> str:
    if a["identical"]:
        return f"identical ({a['steps_compared']} steps)"
    return f"first differs at step {a['first_divergence']} of {a['steps_compared']}; overlap {a['overlap']:.0%}"


def result_tables(out: dict) -> list[dict]:
    """The tables RESULTS.md shows (rendered by benchmarks/render.py)."""
    b = out["budget"]
    rows = []
    for n, row in out["sizes"].items():
        nn = f"{int(n):,}"
        for d in ("f32", "f64"):
            k = row[f"kernel_{d}"]
            rows.append([nn, "cfjax kernel", d, f"{k['compile_s']:.2f} s", fmt_s(k["steady_s"]), f"{k['ms_per_step']:.2f}",
                         f"{1e6 * k['ms_per_step'] / int(n) ** 2:.2f}", k["cpu_wall"]["cpu_over_wall"], "1×",
                         "measured"])
        for d in ("f32", "f64"):
            r1 = row[f"rank_one_{d}"]
            how = (f"extrapolated: init + {b} × mean of {r1['timed_steps']} timed steps" if r1["extrapolated"]
                   else "measured (full run)")
            rows.append([nn, "NumPy rank-one", d, "–", fmt_s(r1["total_s"]), f"{r1['ms_per_step']:,.1f}",
                         f"{1e6 * r1['ms_per_step'] / int(n) ** 2:.1f}", r1["cpu_wall"]["cpu_over_wall"],
                         fmt_ratio(r1["kernel_speedup"], bold=True), how])
        pc = row["per_candidate_f64"]
        pts = ", ".join(str(p["q_size"]) for p in pc["points"])
        rows.append([nn, "NumPy per-candidate recompute", "f64", "–", fmt_s(pc["total_s"]), f"{pc['ms_per_step']:,.0f}",
                     "–", pc["cpu_wall"]["cpu_over_wall"],
                     f"{fmt_ratio(pc['kernel_speedup_f32'], bold=True)} (f32), {fmt_ratio(pc['kernel_speedup_f64'])} (f64)",
                     f"extrapolated from timed candidates at |Q| = {pts}"])
    note = " ".join(f"J = N = {int(n):,} not run: {why}." for n, why in out["skipped"].items())
    tables = [table("main", f"Greedy EVSI batch selection, budget B = {b}, r = {out['r']}; speed-up = implementation "
                    "time ÷ kernel time of the same dtype",
                    ["J = N", "implementation", "dtype", "compile", "time for B steps", "ms / step", "ns / pair / step",
                     "CPU/wall", "kernel speed-up", "how"], rows, note=note)]
    nf = out["naive_full"]
    sel = [[f"{nf['J']}, B = {nf['budget']} (naive greedy in full: {fmt_s(nf['naive_s'])}, kernel f64 "
            f"{fmt_s(nf['kernel_f64_s'])})", f"f64: {_agree(nf['kernel_f64_vs_naive'])}; f32: "
            f"{_agree(nf['kernel_f32_vs_naive'])}; NumPy rank-one: {_agree(nf['rank_one_vs_naive'])}", "–", "–"]]
    for n, row in out["sizes"].items():
        worst = max(p["rel_diff"] for p in row["per_candidate_f64"]["points"])
        sel.append([f"{int(n):,}, B = {b}", f"vs NumPy rank-one f64: {_agree(row['rank_one_f64']['vs_kernel'])}; "
                    f"f32: {_agree(row['rank_one_f32']['vs_kernel'])}", _agree(row["kernel_f32_vs_f64"]),
                    f"{worst:.1e}"])
    tables.append(table("selections", "Selections: does the kernel pick what the references pick?",
                        ["J = N", "kernel vs reference", "kernel f32 vs f64",
                         "per-candidate recompute value of the kernel's next pick vs the kernel's V (max rel. diff)"],
                        sel))
    goals = []
    for n, row in out["sizes"].items():
        if int(n) != 10000:
            continue
        for d in ("f32", "f64"):
            pcs = row["per_candidate_f64"][f"kernel_speedup_{d}"]
            r1 = row[f"rank_one_{d}"]["kernel_speedup"]
            goals.append([f"{d}: ≥ 100× per-candidate recompute at J = N = 10⁴", fmt_ratio(pcs),
                          "met" if pcs >= 100 else "**not met**"])
            goals.append([f"{d}: ≥ 5× NumPy rank-one at J = N = 10⁴", fmt_ratio(r1), "met" if r1 >= 5 else "**not met**"])
    if not goals:
        goals.append(["≥ 100× per-candidate recompute and ≥ 5× NumPy rank-one at J = N = 10⁴",
                      "not measured in this run", f"sizes run: {', '.join(out['sizes']) or 'none'}"])
    tables.append(table("goals", "Goals set by the issue", ["goal", "measured", "verdict"], goals))
    return tables


if __name__ == "__main__":
    main()

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

Threads: ``OMP/OPENBLAS/MKL/NUMEXPR_NUM_THREADS`` = ``--blas-threads`` (default: all cores) are set
before NumPy is imported; NumPy's elementwise ops are single-threaded; XLA uses its default CPU
thread pool (all cores). Everything is recorded in the JSON.

Usage::

    python benchmarks/evsi.py                 # full run -> benchmarks/results/evsi.{json,md}
    python benchmarks/evsi.py --quick --out /tmp/evsi.json --md /tmp/evsi.md   # smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
RESULTS = Path(__file__).resolve().parent / "results"


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
    p.add_argument("--blas-threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS / "evsi.json")
    p.add_argument("--md", type=Path, default=RESULTS / "evsi.md")
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
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = jax.block_until_ready(compiled(key, inp))
            times.append(time.perf_counter() - t0)
            if times[-1] > max_repeat_s:  # long runs: one steady call is enough
                break
        res = jax.tree.map(np.asarray, res)
    steady = min(times)
    return {"compile_s": compile_s, "steady_s": steady, "all_s": times, "ms_per_step": 1e3 * steady / budget,
            "selected": res.selected.tolist(), "value": res.value.tolist(), "n_selected": int((res.selected >= 0).sum())}


def run_rank_one(inputs, dt, budget: int, steps: int | None) -> dict:
    from cfjax.kernels import reference as R

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
            "total_s": total, "extrapolated": steps is not None, "selected": sel[:k].tolist()}


def run_per_candidate(inputs, budget: int, kernel_sel, kernel_val, samples: int) -> dict:
    """Time per-candidate recomputation at a few |Q| and integrate over the B steps."""
    import numpy as np

    from cfjax.kernels import reference as R

    n_valid = int(np.asarray(inputs.cand_mask).sum())
    points = sorted({0, budget // 3, (2 * budget) // 3, budget - 1})
    rows = []
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
    ms = np.arange(budget)
    base = np.interp(ms, points, [r["base_s"] for r in rows])
    per = np.interp(ms, points, [r["per_candidate_s"] for r in rows])
    total = float(np.sum(base + (n_valid - ms) * per))
    return {"points": rows, "total_s": total, "extrapolated": True, "ms_per_step": 1e3 * total / budget}


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
    for v in _THREAD_VARS:
        os.environ[v] = str(args.blas_threads)
    import jax
    import numpy as np
    import scipy

    out = {"benchmark": "evsi batch acquisition", "command": "python " + " ".join([sys.argv[0], *sys.argv[1:]]),
           "budget": args.budget, "r": args.r, "quick": args.quick, "sizes": {}, "skipped": {},
           "threads": {v: os.environ[v] for v in _THREAD_VARS} | {"xla": f"XLA default (os.cpu_count()={os.cpu_count()})",
                                                                   "XLA_FLAGS": os.environ.get("XLA_FLAGS", "(unset)")},
           "versions": {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__,
                        "scipy": scipy.__version__},
           "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "load_start": os.getloadavg()}}
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
    out["machine"]["load_end"] = os.getloadavg()
    for row in out["sizes"].values():  # keep the JSON small: selections only as agreement summaries
        for k in ("kernel_f32", "kernel_f64", "rank_one_f32", "rank_one_f64"):
            row[k].pop("selected", None)
            row[k].pop("value", None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=float))
    args.md.write_text(markdown(out))
    print(f"wrote {args.out} and {args.md}")
    return out


def _fmt_s(x: float) -> str:
    if x >= 3600:
        return f"{x / 3600:.1f} h"
    if x >= 100:
        return f"{x:,.0f} s"
    return f"{x:.2f} s"


def _agree(a: dict) -> str:
    if a["identical"]:
        return f"identical ({a['steps_compared']} steps)"
    return f"first differs at step {a['first_divergence']} of {a['steps_compared']}; overlap {a['overlap']:.0%}"


def markdown(out: dict) -> str:
    b = out["budget"]
    lines = ["## EVSI batch acquisition (benchmarks/evsi.py)", ""]
    lines.append(
        f"Greedy EVSI batch selection (UpliftMem §4.3, App. A.7, B.2): budget B = {b} probes, J = N comparisons and "
        f"candidates, features r = {out['r']}; a B.2-shaped pool (tasks of 20 probes sharing a no-memory reference, "
        "ν_0² = 0.1; comparisons = differences of two probes of one task; Σ = BLR posterior on 4r labels; 2 % of "
        "candidates and comparisons masked). All rows run on the same instance in one run. Kernel = "
        "`jax.jit(make_acquire(budget=B))`, compile (AOT `lower().compile()`) apart from steady state (min of the "
        "compiled call). Speed-up = implementation time ÷ kernel time of the same dtype (per-candidate recompute: "
        "float64 NumPy ÷ kernel float32 / float64).")
    lines += ["", "| J = N | implementation | dtype | compile | time for B steps | ms / step | ns / pair / step "
              "| kernel speed-up | how |", "|---|---|---|---|---|---|---|---|---|"]
    for n, row in out["sizes"].items():
        nn = f"{int(n):,}"
        for d in ("f32", "f64"):
            k = row[f"kernel_{d}"]
            lines.append(f"| {nn} | cfjax kernel | {d} | {k['compile_s']:.2f} s | {_fmt_s(k['steady_s'])} | "
                         f"{k['ms_per_step']:.2f} | {1e6 * k['ms_per_step'] / int(n) ** 2:.2f} | 1× | measured |")
        for d in ("f32", "f64"):
            r1 = row[f"rank_one_{d}"]
            how = (f"extrapolated: init + {b} × mean of {r1['timed_steps']} timed steps" if r1["extrapolated"]
                   else "measured (full run)")
            lines.append(f"| {nn} | NumPy rank-one | {d} | – | {_fmt_s(r1['total_s'])} | {r1['ms_per_step']:,.1f} | "
                         f"{1e6 * r1['ms_per_step'] / int(n) ** 2:.1f} | **{r1['kernel_speedup']:.1f}×** | {how} |")
        pc = row["per_candidate_f64"]
        pts = ", ".join(str(p["q_size"]) for p in pc["points"])
        lines.append(f"| {nn} | NumPy per-candidate recompute | f64 | – | {_fmt_s(pc['total_s'])} | "
                     f"{pc['ms_per_step']:,.0f} | – | **{pc['kernel_speedup_f32']:,.0f}×** (f32), "
                     f"{pc['kernel_speedup_f64']:,.0f}× (f64) | extrapolated from timed candidates at \\|Q\\| = {pts} |")
    lines.append("")
    for n, why in out["skipped"].items():
        lines.append(f"J = N = {int(n):,} not run: {why}.")
    lines.append("")
    lines.append("Selections:")
    nf = out["naive_full"]
    lines.append(f"- J = N = {nf['J']}, B = {nf['budget']} (naive greedy run in full, {nf['naive_s']:.1f} s vs kernel "
                 f"{nf['kernel_f64_s'] * 1e3:.1f} ms f64): kernel f64 vs naive: {_agree(nf['kernel_f64_vs_naive'])}; "
                 f"kernel f32 vs naive: {_agree(nf['kernel_f32_vs_naive'])}; NumPy rank-one vs naive: "
                 f"{_agree(nf['rank_one_vs_naive'])}.")
    for n, row in out["sizes"].items():
        pc = row["per_candidate_f64"]
        worst = max(p["rel_diff"] for p in pc["points"])
        lines.append(f"- J = N = {int(n):,}: kernel vs NumPy rank-one f64: {_agree(row['rank_one_f64']['vs_kernel'])}; "
                     f"f32: {_agree(row['rank_one_f32']['vs_kernel'])}; kernel f32 vs f64: {_agree(row['kernel_f32_vs_f64'])}; "
                     f"per-candidate recompute value of the kernel's next pick at the timed |Q| vs the kernel's "
                     f"V: max rel. diff {worst:.1e}.")
    lines.append("")
    goals = []
    for n, row in out["sizes"].items():
        if int(n) != 10000:
            continue
        for d in ("f32", "f64"):
            pcs = row["per_candidate_f64"][f"kernel_speedup_{d}"]
            r1 = row[f"rank_one_{d}"]["kernel_speedup"]
            goals.append(f"{d}: ≥ 100× per-candidate recompute **{'met' if pcs >= 100 else 'not met'}** ({pcs:,.0f}×), "
                         f"≥ 5× NumPy rank-one **{'met' if r1 >= 5 else 'not met'}** ({r1:.1f}×)")
    if goals:
        lines.append("Goals at J = N = 10⁴: " + "; ".join(goals) + ".")
        lines.append("")
    th = out["threads"]
    lines.append(f"Command: `{out['command']}` (writes `benchmarks/results/evsi.json` and this file). Threads: "
                 + ", ".join(f"{v}={th[v]}" for v in _THREAD_VARS)
                 + f" (set before NumPy is imported; NumPy's elementwise ops are single-threaded, BLAS/LAPACK use them); "
                 f"XLA CPU threads: {th['xla']}; XLA_FLAGS={th['XLA_FLAGS']}. Machine: {out['machine']['cpu_count']} CPUs, "
                 f"{out['machine']['platform']}; Python {out['versions']['python']}, jax {out['versions']['jax']}, "
                 f"numpy {out['versions']['numpy']}, scipy {out['versions']['scipy']}. Load average at start/end: "
                 f"{out['machine']['load_start'][0]:.2f} / {out['machine']['load_end'][0]:.2f}.")
    lines.append("")
    lines.append(
        "Caveats: the per-candidate recompute and (at J = N = 10⁴) the NumPy rank-one totals are extrapolated from "
        "timed steps, not measured end to end (labelled in the table); the per-candidate model interpolates the "
        "measured per-candidate cost linearly in |Q| between the timed points. Both NumPy versions compute ψ with "
        "`scipy.special.erfcx` (fewer passes than the kernel's stable series, but less accurate at large t); the "
        "kernel's hot loop evaluates E for every (comparison, candidate) pair each step, masked or not (fixed "
        "shapes). Per step the kernel makes two passes over [J, N]: the values pass (reads κ, writes the "
        "per-comparison gains that a matrix-vector product with the comparison mask sums) and the in-place rank-one "
        "update of κ; it is compute-bound in float64 (degree-26 series, float64 exp2/div/sqrt) and close to the "
        "memory bandwidth in float32 on this 2-core machine. float32 and float64 selections can differ where two "
        "candidates' values tie "
        "to float32 precision; float64 kernel and float64 references agree exactly on the runs above unless stated. "
        "Timings are wall-clock on a shared machine (other jobs may run; see the load averages).")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

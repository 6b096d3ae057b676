"""JAX's persistent compilation cache on the jobs users run: off, cold and warm, side by side.

Each measurement is a fresh Python process (the persistent cache only pays across processes; within
one, JAX's in-memory caches already compile a program once). A child registers listeners on JAX's
own monitoring events before it imports anything else, runs one ``cfjax`` command in-process and
reports: wall time, XLA compile-or-load time (``/jax/core/compile/backend_compile_duration``: the
backend compile on a miss, the disk read on a hit), tracing and lowering time (paid in every mode:
the cache key is the lowered program), cache hits and misses. Modes, in this order, on one machine:

- ``off``: ``--compile-cache off``;
- ``cold``: an empty cache folder (the run fills it);
- ``warm``: the same folder again, in a new process.

Workloads (the programs issue 23 names: the selector trainer, beam search and acquisition):

- ``selectors``: ``cfjax countermem train-selectors`` on a SQL decision table built once up front
  (the jitted, vmapped Table 3 trainer; the fixed-policy comparison);
- ``upliftmem``: ``cfjax upliftmem run --suite sql --quick --workers 1`` (the scorer trainer, jitted
  beam search over sets and the EVSI acquisition).

The results of a workload must be the same in the three modes (checked: the selectors' JSON and the
UpliftMem ``results.json`` with their timing fields removed); a cache hit loads the executable the
compile would have produced. The scripted backbone is a simulator: the UpliftMem figures it produces
are labelled as such by the command; here only their equality across modes matters.

Run::

    python benchmarks/compile_cache.py [--workloads selectors upliftmem] [--out benchmarks/results/compile_cache.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("off", "cold", "warm")

_CHILD = r'''
import json, sys, time
from collections import defaultdict
import jax.monitoring as m
dur, count = defaultdict(float), defaultdict(int)
m.register_event_duration_secs_listener(lambda ev, s, **kw: dur.__setitem__(ev, dur[ev] + s))
m.register_event_listener(lambda ev, **kw: count.__setitem__(ev, count[ev] + 1))
from cfjax.cli import main
t0 = time.perf_counter()
rc = main(json.loads(sys.argv[2]))
wall = time.perf_counter() - t0
json.dump({"rc": rc, "wall_s": wall, "durations": dict(dur), "events": dict(count)}, open(sys.argv[1], "w"))
'''

_TIMING_KEYS = ("seconds", "wall_s", "elapsed", "time_s", "timings", "timing", "compile_s", "started", "finished",
                "duration_s", "run_seconds", "created")


def strip_timings(x):
    """A results object without its timing fields (recursively), for an equality check across modes."""
    if isinstance(x, dict):
        return {k: strip_timings(v) for k, v in x.items()
                if not any(t in k.lower() for t in _TIMING_KEYS) and k not in ("out", "command", "argv")}
    if isinstance(x, list):
        return [strip_timings(v) for v in x]
    return x


def child(argv: list[str], env: dict[str, str]) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as f:
        stats = f.name
    out = subprocess.run([sys.executable, "-c", _CHILD, stats, json.dumps(argv)], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"child failed ({out.returncode}): {' '.join(argv)}\n{out.stderr[-3000:]}")
    res = json.loads(Path(stats).read_text())
    os.unlink(stats)
    return res


def summarise(r: dict) -> dict:
    d, e = r["durations"], r["events"]
    return {
        "wall_s": r["wall_s"],
        "compile_or_load_s": d.get("/jax/core/compile/backend_compile_duration", 0.0),
        "trace_and_lower_s": d.get("/jax/core/compile/jaxpr_trace_duration", 0.0)
        + d.get("/jax/core/compile/jaxpr_to_mlir_module_duration", 0.0),
        "cache_read_s": d.get("/jax/compilation_cache/cache_retrieval_time_sec", 0.0),
        "compile_time_saved_s": d.get("/jax/compilation_cache/compile_time_saved_sec", 0.0),
        "cache_hits": e.get("/jax/compilation_cache/cache_hits", 0),
        "cache_misses": e.get("/jax/compilation_cache/cache_misses", 0),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", nargs="+", default=["selectors", "upliftmem"], choices=["selectors", "upliftmem"])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "compile_cache.json")
    args = p.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="cfjax-compile-cache-bench-"))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "CFJAX_CACHE_DIR": str(scratch / "llm")}
    env.pop("CFJAX_COMPILE_CACHE", None)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    load = os.getloadavg()[0]
    table = scratch / "table"
    if "selectors" in args.workloads:
        child(["countermem", "table", "--suite", "sql", "--out", str(table), "--compile-cache", "off"], env)
    results: dict = {"load_1min_at_start": load, "cores": len(os.sched_getaffinity(0)), "workloads": {}}
    for w in args.workloads:
        cache = scratch / f"cache-{w}"
        rows, payloads = {}, {}
        for mode in MODES:
            out = scratch / f"{w}-{mode}"
            setting = "off" if mode == "off" else str(cache)
            if w == "selectors":
                cmd = ["countermem", "train-selectors", "--table", str(table), "--out", str(out) + ".json",
                       "--compile-cache", setting]
            else:
                cmd = ["upliftmem", "run", "--suite", "sql", "--quick", "--workers", "1", "--out", str(out),
                       "--compile-cache", setting]
            rows[mode] = summarise(child(cmd, env))
            res_file = Path(str(out) + ".json") if w == "selectors" else out / "results.json"
            payloads[mode] = strip_timings(json.loads(res_file.read_text()))
            print(f"{w:<10} {mode:<5} wall {rows[mode]['wall_s']:7.2f} s  compile/load {rows[mode]['compile_or_load_s']:6.2f} s"
                  f"  trace+lower {rows[mode]['trace_and_lower_s']:6.2f} s  hits {rows[mode]['cache_hits']:4d}"
                  f"  misses {rows[mode]['cache_misses']:4d}", flush=True)
        same = payloads["off"] == payloads["cold"] == payloads["warm"]
        results["workloads"][w] = {"modes": rows, "results_identical": same,
                                   "warm_vs_off_wall": rows["off"]["wall_s"] / rows["warm"]["wall_s"],
                                   "warm_vs_off_compile": rows["off"]["compile_or_load_s"]
                                   / max(rows["warm"]["compile_or_load_s"], 1e-9)}
        print(f"{w:<10} results identical across modes: {same}; off/warm wall {results['workloads'][w]['warm_vs_off_wall']:.2f}x, "
              f"compile {results['workloads'][w]['warm_vs_off_compile']:.1f}x", flush=True)
        if not same:
            raise SystemExit(f"{w}: results differ between cache modes")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()

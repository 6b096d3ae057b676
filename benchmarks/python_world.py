"""Throughput of the Python world model: OS isolation vs the audit-hook-only sandbox (issue 12).

Both worlds evaluate the same actions (every sampled task's gold and one slipped draft), interleaved
round by round in one process, so machine load affects both alike. Reported: evaluations per second
of each and the ratio ``os / audit`` of the median time per evaluation (the acceptance bound is 2×).
``--baseline FILE`` adds a third world from an older ``world.py`` (with its ``_harness.py`` beside
it), e.g. the code before OS isolation::

    mkdir -p /tmp/before && git show 5c4cdd6:cfjax/domains/python/world.py > /tmp/before/world.py \
        && git show 5c4cdd6:cfjax/domains/python/_harness.py > /tmp/before/_harness.py
    python benchmarks/python_world.py --baseline /tmp/before/world.py
Each evaluation is a fresh interpreter (there is no compile step to separate); the first round is a
warm-up (file-system caches, the seccomp program) and is not counted.

    python benchmarks/python_world.py [--tasks 40] [--rounds 3] [--cores N] [--out FILE.json]

Threads: each evaluation is a single-threaded child process; the parent only waits. ``--cores``
(default: every core this process may use) binds the parent and so its children to that many cores
and sizes the BLAS/OpenMP pools, for every world alike; CPU time / wall time (children included: each
evaluation's process is reaped before the next) is recorded per world. Results go to
``benchmarks/results/python_world.json`` (``meta`` + ``tables``); ``python benchmarks/render.py`` puts
the table into RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import finish_meta, fmt_ratio, make_meta, setup_threads, start_load  # noqa: E402
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "cfjax/domains/python", "cfjax/sandbox"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="an older world.py to time side by side")
    ap.add_argument("--cores", type=int,
                    default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                    help="cores for the process and its children (default: all this process may use)")
    ap.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/python_world.json)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_before = start_load()
    threads = setup_threads(args.cores)

    from cfjax.domains.python import PyBugsSuite
    from cfjax.domains.python.edits import PythonEdits
    from cfjax.domains.python.script import ERRORS
    from cfjax.sandbox import describe, probe

    root = tempfile.mkdtemp(prefix="cfjax-bench-py-")
    suite = PyBugsSuite.build(root)
    ed = PythonEdits()
    tasks = suite.tasks[:: max(1, len(suite.tasks) // args.tasks)][: args.tasks]
    actions = []
    for t in tasks:
        key = suite.answer_key(t.task_id)
        actions.append((t, key.gold))
        actions.append((t, ed.apply(ed.normalize(key.gold), ERRORS[key.family][0]) or key.gold))
    worlds = {"audit": suite.world(isolation="audit"), "os": suite.world(isolation="os")}
    if args.baseline:
        import importlib.util

        spec = importlib.util.spec_from_file_location("baseline_world", args.baseline)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        worlds["before"] = mod.PytestWorld(suite.tests_root, suite.keys)
    layers = describe(probe())
    print("sandbox layers of the os world:\n" + layers)
    times: dict[str, list[float]] = {k: [] for k in worlds}
    scores: dict[str, list[float]] = {k: [] for k in worlds}
    cpu = {k: [0.0, 0.0] for k in worlds}  # CPU s (children included), wall s over the counted rounds
    for r in range(args.rounds + 1):
        for t, a in actions:
            for name, w in worlds.items():
                cw: dict = {}
                with cpu_wall(cw):
                    t0 = time.perf_counter()
                    o = w.evaluate(t, a)
                    dt = time.perf_counter() - t0
                if r > 0:
                    times[name].append(dt)
                    scores[name].append(o.score)
                    cpu[name][0] += cw["cpu_s"]
                    cpu[name][1] += cw["wall_s"]
    if any(v != scores["os"] for v in scores.values()):
        raise RuntimeError("the sandboxes disagree on a score")
    med = {k: statistics.median(v) for k, v in times.items()}
    rate = {k: 1 / statistics.mean(v) for k, v in times.items()}
    cpu_over_wall = {k: round(c / w, 2) if w > 0 else None for k, (c, w) in cpu.items()}
    for k in worlds:
        print(f"{k:>6}: {rate[k]:6.1f} evaluations/s  median {med[k] * 1000:6.1f} ms  (n={len(times[k])}, "
              f"CPU/wall {cpu_over_wall[k]})")
    print(f"ratio os/audit (median time per evaluation): {med['os'] / med['audit']:.2f}x")
    if "before" in med:
        print(f"ratio os/before (median time per evaluation): {med['os'] / med['before']:.2f}x  (bound: 2x)")
    labels = {"audit": "audit-hook-only sandbox (`isolation=\"audit\"`)",
              "os": "OS isolation (`isolation=\"os\"`, the default)",
              "before": f"baseline world from `{args.baseline}`"}
    rows = [[labels[k], f"{rate[k]:.1f}", f"{med[k] * 1e3:.1f}", fmt_ratio(med["os"] / med[k], bold=k != "os"),
             cpu_over_wall[k]] for k in worlds]
    result = {
        "tasks": len(tasks), "actions": len(actions), "rounds": args.rounds,
        "evals_per_s": rate, "median_s": med, "cpu_over_wall": cpu_over_wall, "sandbox_layers": layers,
        "ratio_os_over_audit": med["os"] / med["audit"],
        "tables": [table(
            "throughput", f"{len(actions)} actions ({len(tasks)} tasks: gold + one slipped draft each), "
            f"{args.rounds} counted rounds after one warm-up round, worlds interleaved per action",
            ["Python world", "evaluations/s", "median ms / evaluation", "OS-isolation time ÷ this (median)",
             "CPU/wall"], rows, note="Acceptance bound: OS isolation within 2× of the audit-only sandbox.")],
    }
    result = {"meta": finish_meta(make_meta("python_world", SOURCES, args, threads, load_before), t_start), **result}
    print(f"wrote {write_result('python_world', result, out=args.out)}")
    return result


if __name__ == "__main__":
    main()

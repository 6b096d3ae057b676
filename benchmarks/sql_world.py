"""SQL world throughput: bounded worker processes vs the in-process engine, side by side.

Workload: every built-in SQL task's gold query and one *slipped* variant of it
(a distractor edit of :mod:`cfjax.domains.sql.edits`, chosen with a fixed seed)
— ordinary queries, as the experiments evaluate them by the ten thousand. Each
mode is one :class:`~cfjax.domains.sql.world.SQLWorld` over the same suite:

* ``subprocess`` — the default: statements run in long-lived worker
  processes with a memory limit and a hard wall-clock kill;
* ``inprocess`` — the same statement checks, SQLite limits and scoring in the
  calling process, unbounded (the isolation of earlier versions);
* ``baseline`` (with ``--baseline FILE``) — the ``SQLWorld`` of another copy of
  ``cfjax/domains/sql/world.py``, e.g. the version before the bounded
  workers, for a before/after comparison::

      git show <commit>:cfjax/domains/sql/world.py > /tmp/world_before.py
      python benchmarks/sql_world.py --baseline /tmp/world_before.py

Reference results are computed before timing (they are cached per task in
every mode). Rounds alternate the order of the modes, so drift in the
machine's load hits all alike; the report gives each mode's median
evaluations/second over the rounds and the median of the per-round ratios
(``inprocess`` ÷ ``subprocess``: the cost of the isolation; ``baseline`` ÷
``subprocess``: before vs after). Outcomes of all modes are compared (score,
solved, completed, feedback, error) and must be identical.

With ``--threads N`` (> 1) a round evaluates the workload from N threads (the
world's worker pool then runs up to ``min(N, workers)`` statements at once).

Cores: ``--cores`` (default: every core this process may use) binds the process —
and the worker processes it starts, which inherit it — to that many cores and sizes
the BLAS/OpenMP pools to it, for every mode alike. The parent's CPU time / wall time
per mode is recorded (the long-lived workers' CPU time is not: they are not reaped
during the run). Results go to ``benchmarks/results/sql_world.json`` (``meta`` +
``tables``); ``python benchmarks/render.py`` puts the table into RESULTS.md.

Usage:
    python benchmarks/sql_world.py [--rounds 7] [--threads 1] [--cores N] [--baseline FILE] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import finish_meta, fmt_ratio, make_meta, setup_threads, start_load  # noqa: E402
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "cfjax/domains/sql"]

MODES = ("inprocess", "subprocess")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7, help="timed passes over the workload per mode")
    p.add_argument("--threads", type=int, default=1, help="evaluating threads (default 1)")
    p.add_argument("--workers", type=int, default=8, help="the subprocess world's pool size")
    p.add_argument("--seed", type=int, default=0, help="seed of the slipped variants")
    p.add_argument("--baseline", default="", help="a world.py file whose SQLWorld is timed too (before/after)")
    p.add_argument("--cores", type=int,
                   default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                   help="cores for the process and its workers (default: all this process may use)")
    p.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/sql_world.json)")
    return p.parse_args(argv)


def workload(suite, seed: int) -> list[tuple]:
    """(task, sql) pairs: every task's gold and one slipped variant of it."""
    from cfjax.domains.sql import edits as se

    rng = random.Random(seed)
    pairs = []
    for task in suite.tasks:
        gold = suite.keys[task.task_id].gold
        pairs.append((task, gold))
        edits = se.distractor_edits(gold, suite.specs[task.env_id]) or se.rule_edits(gold, suite.specs[task.env_id])
        if edits:
            index, text = rng.choice(edits)
            pairs.append((task, se.replace_unit(gold, index, text)))
    return pairs


def one_pass(world, pairs, threads: int) -> tuple[float, list]:
    t0 = time.perf_counter()
    if threads > 1:
        with ThreadPoolExecutor(threads) as ex:
            outs = list(ex.map(lambda p: world.evaluate(*p), pairs))
    else:
        outs = [world.evaluate(t, sql) for t, sql in pairs]
    return time.perf_counter() - t0, outs


def load_baseline(path: str):
    """The ``SQLWorld`` class of another copy of the world module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sql_world_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.SQLWorld


def main(argv=None) -> dict:
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_before = start_load()
    threads = setup_threads(args.cores)
    from cfjax.domains.sql import SQLSuite

    modes = MODES + (("baseline",) if args.baseline else ())
    with tempfile.TemporaryDirectory(prefix="cfjax-sqlbench-") as root:
        suite = SQLSuite.build(root)
        pairs = workload(suite, args.seed)
        worlds = {m: suite.world(isolation=m, workers=args.workers) for m in MODES}
        if args.baseline:
            worlds["baseline"] = load_baseline(args.baseline)(suite.db_paths, suite.keys)
        try:
            for w in worlds.values():
                for task in suite.tasks:
                    w.reference_result(task)
                one_pass(w, pairs[:50], args.threads)  # warm-up (starts the workers)
            rates: dict[str, list[float]] = {m: [] for m in modes}
            cpu = {m: [0.0, 0.0] for m in modes}  # parent CPU s, wall s
            mismatches = 0
            for r in range(args.rounds):
                outs = {}
                for m in (modes if r % 2 == 0 else modes[::-1]):
                    cw: dict = {}
                    with cpu_wall(cw):
                        dt, outs[m] = one_pass(worlds[m], pairs, args.threads)
                    cpu[m][0] += cw["cpu_s"]
                    cpu[m][1] += cw["wall_s"]
                    rates[m].append(len(pairs) / dt)
                for m in modes[1:]:
                    for a, b in zip(outs[modes[0]], outs[m]):
                        if (a.score, a.solved, a.completed, a.feedback, a.error) != (
                                b.score, b.solved, b.completed, b.feedback, b.error):
                            mismatches += 1
            processes = worlds["subprocess"].worker_processes
        finally:
            for w in worlds.values():
                w.close()
    sub = rates["subprocess"]
    ratios = {m: [a / b for a, b in zip(rates[m], sub)] for m in modes if m != "subprocess"}
    cpu_over_wall = {m: round(c / w, 2) if w > 0 else None for m, (c, w) in cpu.items()}
    report = {
        "queries_per_pass": len(pairs),
        "tasks": len(suite.tasks),
        "rounds": args.rounds,
        "threads": args.threads,
        "workers": args.workers,
        "baseline": args.baseline or None,
        "worker_processes_used": processes,
        "evals_per_s_median": {m: round(statistics.median(v), 1) for m, v in rates.items()},
        "evals_per_s_rounds": {m: [round(x, 1) for x in v] for m, v in rates.items()},
        # rate of each other mode / rate of the bounded path: > 1 means the bounded path is slower
        "ratio_over_subprocess_median": {m: round(statistics.median(v), 3) for m, v in ratios.items()},
        "ratio_over_subprocess_rounds": {m: [round(x, 3) for x in v] for m, v in ratios.items()},
        "outcome_mismatches": mismatches,
        "parent_cpu_over_wall": cpu_over_wall,
    }
    med = report["evals_per_s_median"]
    print(f"{len(pairs)} ordinary queries per pass, {args.rounds} rounds, {args.threads} thread(s)")
    for m in modes:
        print(f"  {m:10s} {med[m]:9.1f} evaluations/s (median)")
    for m, v in report["ratio_over_subprocess_median"].items():
        print(f"  {m} / subprocess: {v:.2f}x (median of per-round ratios {report['ratio_over_subprocess_rounds'][m]})")
    print(f"  outcome mismatches between the modes: {mismatches}")
    labels = {"subprocess": "bounded worker processes (`isolation=\"subprocess\"`, the default)",
              "inprocess": "in-process engine (`isolation=\"inprocess\"`, unbounded)",
              "baseline": f"baseline `SQLWorld` from `{Path(args.baseline).name}`" if args.baseline else ""}
    rows = [[labels[m], f"{med[m]:,.1f}",
             "1.0×" if m == "subprocess" else fmt_ratio(report["ratio_over_subprocess_median"][m], bold=True),
             cpu_over_wall[m]] for m in ("subprocess", *[m for m in modes if m != "subprocess"])]
    report["tables"] = [table(
        "throughput", f"{len(pairs):,} ordinary queries per pass (every task's gold and one slipped variant), "
        f"{args.rounds} rounds in alternating order, {args.threads} evaluating thread(s), {args.workers} workers",
        ["SQL world", "evaluations/s (median)", "rate ÷ bounded rate (median of per-round ratios)", "parent CPU/wall"],
        rows, note=f"Outcome mismatches between the modes: {mismatches}.")]
    report = {"meta": finish_meta(make_meta("sql_world", SOURCES, args, threads, load_before), t_start), **report}
    print(f"wrote {write_result('sql_world', report, out=args.out)}")
    return report


if __name__ == "__main__":
    main()

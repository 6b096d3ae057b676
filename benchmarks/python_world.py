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

    python benchmarks/python_world.py [--tasks 40] [--rounds 3]

Threads: each evaluation is a single-threaded child process; the parent only waits.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from cfjax.domains.python import PyBugsSuite
from cfjax.domains.python.edits import PythonEdits
from cfjax.domains.python.script import ERRORS
from cfjax.sandbox import describe, probe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="an older world.py to time side by side")
    args = ap.parse_args()
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
    print("sandbox layers of the os world:\n" + describe(probe()))
    times: dict[str, list[float]] = {k: [] for k in worlds}
    scores: dict[str, list[float]] = {k: [] for k in worlds}
    for r in range(args.rounds + 1):
        for t, a in actions:
            for name, w in worlds.items():
                t0 = time.perf_counter()
                o = w.evaluate(t, a)
                dt = time.perf_counter() - t0
                if r > 0:
                    times[name].append(dt)
                    scores[name].append(o.score)
    assert all(v == scores["os"] for v in scores.values()), "the sandboxes disagree on a score"
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in worlds:
        print(f"{k:>6}: {1 / statistics.mean(times[k]):6.1f} evaluations/s  median {med[k] * 1000:6.1f} ms  "
              f"(n={len(times[k])})")
    print(f"ratio os/audit (median time per evaluation): {med['os'] / med['audit']:.2f}x")
    if "before" in med:
        print(f"ratio os/before (median time per evaluation): {med['os'] / med['before']:.2f}x  (bound: 2x)")


if __name__ == "__main__":
    main()

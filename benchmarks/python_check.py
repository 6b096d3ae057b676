"""Cost of one Python check: the literal-cases path vs the check-program (proxy) path, on the same tasks.

Workload: ``--tasks`` tasks of the built-in pybugs suite, each judged two ways by the Python world
(:mod:`cfjax.domains.python.world`), every OS layer on both:

* **cases** — the task's test file as the suite writes it (literal cases): one sandboxed process
  calls the candidate on each case's arguments, the parent compares the values;
* **check** — the same cases written as a check program, ``def check(candidate): assert
  candidate(...) == ...`` (the form of HumanEvalPack's ``test``): a sandboxed check process runs it
  and calls the candidate, in a second sandboxed process, through the proxy
  (:mod:`cfjax.domains.python.proxy`);
* **check + HumanEvalPack imports** — the same check program with the bigcode-evaluation-harness's
  standard-library imports run before the check and before the candidate (what a HumanEvalPack row
  costs: ``cfjax.domains.python.user.HUMANEVAL_IMPORTS``).

Actions: each task's gold and one slipped draft (the suite's own error model). One warm-up round
(file-system caches, byte code, the seccomp program) is not counted; then ``--rounds`` rounds, the
three worlds interleaved per action so machine load hits them alike. Reported: median and
interquartile range of the time per check, evaluations per second, and the ratio of the medians
(this ÷ cases). The worlds must agree on ``solved`` for every action; the run stops otherwise.

    python benchmarks/python_check.py [--tasks 20] [--rounds 3] [--cores N] [--out FILE.json]

Threads: every check is single-threaded child processes (two at once on the check path, which can
overlap their start-up on two cores); the parent only waits. ``--cores`` (default: every core this
process may use) binds this process and so its children to that many cores and sizes the
BLAS/OpenMP pools alike for every world; CPU time / wall time (children included: every check's
processes are reaped before the next) is recorded per world. Results go to
``benchmarks/results/python_check.json`` (``meta`` + ``tables``); ``python benchmarks/render.py``
puts the table into RESULTS.md.
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

from benchmarks._bench import finish_meta, fmt_ratio, fmt_s, make_meta, quartiles, setup_threads, start_load  # noqa: E402
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "cfjax/domains/python", "cfjax/sandbox"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cores", type=int,
                    default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                    help="cores for the process and its children (default: all this process may use)")
    ap.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/python_check.json)")
    return ap.parse_args(argv)


def check_program_of(cases) -> str:
    """The literal cases of a task as a HumanEvalPack-style check (same calls, same expected values)."""
    lines = ["def check(candidate):"]
    for c in cases:
        call = f"candidate(*{c.args})"
        if c.kind == "raises":
            lines += ["    try:", f"        {call}", f"    except {c.exc}:", "        pass", "    else:",
                      f"        assert False, {c.name!r}"]
        else:
            lines.append(f"    assert {call} == {c.want!r}, {c.name!r}")
    return "\n".join(lines) + f"\n\n\ncheck({cases[0].function})\n"


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_before = start_load()
    threads = setup_threads(args.cores)

    from cfjax.domains.python import PyBugsSuite
    from cfjax.domains.python.cases import parse_cases, render_check_program
    from cfjax.domains.python.edits import PythonEdits
    from cfjax.domains.python.script import ERRORS
    from cfjax.domains.python.user import HUMANEVAL_IMPORTS
    from cfjax.domains.python.world import PytestWorld, task_test_path
    from cfjax.sandbox import describe, probe

    root = Path(tempfile.mkdtemp(prefix="cfjax-bench-pyk-"))
    suite = PyBugsSuite.build(root / "suite")
    ed = PythonEdits()
    tasks = suite.tasks[:: max(1, len(suite.tasks) // args.tasks)][: args.tasks]
    n_cases = []
    for t in tasks:
        cases = parse_cases(suite.test_file(t).read_text())
        n_cases.append(len(cases))
        test = check_program_of(cases)
        for name, prelude in (("check", ""), ("check_imports", HUMANEVAL_IMPORTS)):
            p = task_test_path(root / name, t.task_id)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(render_check_program(cases[0].function, prelude, test, preamble=prelude))
    actions = []
    for t in tasks:
        key = suite.answer_key(t.task_id)
        actions.append((t, key.gold))
        actions.append((t, ed.apply(ed.normalize(key.gold), ERRORS[key.family][0]) or key.gold))
    worlds = {"cases": suite.world(), "check": PytestWorld(root / "check", suite.keys),
              "check_imports": PytestWorld(root / "check_imports", suite.keys)}
    layers = describe(probe())
    print("sandbox layers:\n" + layers)
    times: dict[str, list[float]] = {k: [] for k in worlds}
    cpu = {k: [0.0, 0.0] for k in worlds}
    solved = 0
    for r in range(args.rounds + 1):
        for t, a in actions:
            got = {}
            for name, w in worlds.items():
                cw: dict = {}
                with cpu_wall(cw):
                    t0 = time.perf_counter()
                    o = w.evaluate(t, a)
                    dt = time.perf_counter() - t0
                got[name] = o
                if r > 0:
                    times[name].append(dt)
                    cpu[name][0] += cw["cpu_s"]
                    cpu[name][1] += cw["wall_s"]
            if len({o.solved for o in got.values()}) != 1 or not all(o.completed for o in got.values()):
                raise RuntimeError(f"the paths disagree on {t.task_id}: " + "; ".join(f"{k}: {o}" for k, o in got.items()))
            solved += r > 0 and got["cases"].solved
    stats = {k: quartiles(v) for k, v in times.items()}
    rate = {k: 1 / statistics.mean(v) for k, v in times.items()}
    cpu_over_wall = {k: round(c / w, 2) if w > 0 else None for k, (c, w) in cpu.items()}
    base = stats["cases"][1]
    for k in worlds:
        q1, med, q3 = stats[k]
        print(f"{k:>14}: median {med * 1e3:6.1f} ms  IQR {q1 * 1e3:.1f}–{q3 * 1e3:.1f} ms  {rate[k]:5.1f} checks/s  "
              f"(n={len(times[k])}, CPU/wall {cpu_over_wall[k]})  ratio to cases {med / base:.2f}x")
    labels = {"cases": "literal cases (one sandboxed process; the parent judges)",
              "check": "check program through the proxy (two sandboxed processes)",
              "check_imports": "check program + HumanEvalPack's standard-library imports"}
    rows = [[labels[k], fmt_s(stats[k][1]), f"{fmt_s(stats[k][0])} – {fmt_s(stats[k][2])}", f"{rate[k]:.1f}",
             fmt_ratio(stats[k][1] / base, bold=k != "cases"), cpu_over_wall[k]] for k in worlds]
    result = {
        "tasks": len(tasks), "actions": len(actions), "rounds": args.rounds,
        "cases_per_task_median": statistics.median(n_cases), "solved_per_round": solved // max(1, args.rounds),
        "quartiles_s": stats, "checks_per_s": rate, "cpu_over_wall": cpu_over_wall, "sandbox_layers": layers,
        "ratio_check_over_cases": stats["check"][1] / base,
        "ratio_check_imports_over_cases": stats["check_imports"][1] / base,
        "tables": [table(
            "check_cost", f"{len(actions)} actions ({len(tasks)} pybugs tasks, median {statistics.median(n_cases):g} "
            f"cases each: gold + one slipped draft), {args.rounds} counted rounds after one warm-up round, paths "
            "interleaved per action, every OS layer on each",
            ["Python check", "median / check", "IQR / check", "checks/s", "this ÷ literal cases (median)",
             "CPU/wall"], rows,
            note="The three paths agreed on `solved` for every action. CPU/wall counts both processes of the "
                 "check path (they start in parallel).")],
    }
    result = {"meta": finish_meta(make_meta("python_check", SOURCES, args, threads, load_before), t_start), **result}
    print(f"wrote {write_result('python_check', result, out=args.out)}")
    return result


if __name__ == "__main__":
    main()

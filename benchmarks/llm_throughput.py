"""LLM throughput of a run's held-out evaluation against a server with latency, and a fault run.

The server is the loopback OpenAI-compatible fake of the tests (``tests/llm_server.py``): every
chat request waits ``--latency`` seconds (200 ms by default, a loaded vLLM server's order of
magnitude) before its reply. The run is the quick CounterMem unit on the built-in SQL suite (16
tasks per split) with the OpenAI client (``cfjax.llm.openai_client``) as the backbone:

1. memory construction and selector training run with the server at zero latency (not measured);
2. at the start of the held-out evaluation (``run_unit``'s ``on_phase("eval_start")``) the latency
   is switched on; every requested row's held-out episodes then run — all rows at once, on one
   pool of ``--max-inflight`` threads — until ``"eval_end"`` (``overlap_main=False``: no row starts
   beside the main construction, so the window holds every row's evaluation).

Reported: calls/s over that window (client-side count), the ideal ``max_inflight / latency``, their
ratio (the acceptance bound is ≥ 70% at ``max_inflight`` 32), the requests in flight the *server*
saw (time-weighted mean, max), and the same window measured serially (``max_inflight`` 1) in the
same run; the two runs' held-out outcomes must be identical.

``--faults RATE`` (default 0.05) adds a third run: the same unit against a server that injects
every fault of :data:`tests.llm_server.FAULT_KINDS` (empty ``choices``, non-JSON bodies, null
content, lone surrogates, 429 with ``Retry-After``, 500 bursts, connection resets, 2–5 s stalls,
1 MB replies) at that rate over the *whole* run; it must finish, and the table lists each fault as
the server injected it beside what the client counted. ``--cache`` adds a rerun with a response
cache: the second pass must send 0 requests.

What answers is a canned responder, not a model: drafts are the task's gold query or a boundary
slip of it (by a hash of the prompt), corrections repair the slip. That shapes how many calls an
episode makes; it has no bearing on the transport being measured.

Two more runs measure the whole of a job, not only its held-out window (issue 23):

* ``--unit-latency`` (default 0.1 s): the quick unit with *every* row, the latency (and the
  ``--faults`` rate) on from the first request — the mean requests in flight over the whole unit,
  and its outcomes against the same unit run serially (``max_inflight`` 1);
* ``--job-units`` (default 8): ``countermem run`` of that many quick SQL units (backbone seeds
  0…N−1, every row) at ``--latency`` — requests per second over the whole job against
  ``max_inflight / latency`` (acceptance: ≥ 70%), the units on one shared client.

Usage:
    python benchmarks/llm_throughput.py [--latency 0.2] [--max-inflight 32] [--faults 0.05] [--no-cache-run]
        [--rows ...] [--unit-latency 0.1] [--job-units 8] [--cores N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from benchmarks._bench import finish_meta, fmt_ratio, make_meta, setup_threads, start_load  # noqa: E402
from benchmarks._meta import table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "benchmarks/_meta.py", "cfjax/llm", "cfjax/infra/concurrency.py",
           "cfjax/experiments/countermem/runner.py", "cfjax/experiments/countermem/rows.py", "cfjax/countermem/pipeline.py",
           "cfjax/loop.py", "tests/llm_server.py"]


def run_once(suite, splits, cfg, rows, *, latency: float, inflight: int, faults=None, cache: str | None = None,
             train_latency: float = 0.0, server=None) -> dict:
    """One quick unit through the OpenAI client; the held-out window's throughput and what the server saw.

    ``server``: an open :class:`FakeLLMServer` to use (a cached rerun must talk to the same URL: the
    URL is part of a reply's cache key); otherwise a fresh one is started for this run."""
    from contextlib import nullcontext

    from llm_server import FakeLLMServer, canned_sql, inflight_profile

    from cfjax.experiments.countermem.runner import BackboneSpec, backbone_stats, run_unit
    from cfjax.llm.openai_client import OpenAIConfig

    window: dict = {}
    with (nullcontext(server) if server is not None
          else FakeLLMServer(canned_sql(suite), faults=faults, latency_s=train_latency)) as srv:
        sent0 = len(srv.chat_requests)
        ocfg = OpenAIConfig(base_url=srv.base_url, model=srv.model, max_inflight=inflight, timeout_s=30.0,
                            max_retries=6, backoff_s=0.05)
        spec = BackboneSpec("openai", ocfg, cache_path=cache, inflight=inflight)
        bb = spec.make(suite, 0, cfg)

        def on_phase(phase: str) -> None:
            calls = bb.stats().as_dict()["calls"]
            if phase == "eval_start":
                srv.latency_s = latency
                window.update(t0=time.perf_counter(), c0=calls, n0=len(srv.chat_requests))
            else:
                window.update(t1=time.perf_counter(), c1=calls, n1=len(srv.chat_requests))
                srv.latency_s = train_latency

        t0 = time.perf_counter()
        res = run_unit(suite, 0, cfg, backbone=bb, rows=rows, splits=splits, threads=inflight, on_phase=on_phase,
                       overlap_main=False)  # every row's held-out evaluation inside the timed window
        total = time.perf_counter() - t0
        llm = backbone_stats(bb)
        bb.close()
        reqs = srv.chat_requests
        in_window = [r for r in reqs if r.index >= window["n0"] and r.index < window["n1"]]
        prof = inflight_profile(in_window)
        injected = dict(srv.faults_injected)
        sent = len(reqs) - sent0
    secs = window["t1"] - window["t0"]
    calls = window["c1"] - window["c0"]
    return {"outcomes": res["outcomes"], "eval_s": secs, "eval_calls": calls, "calls_per_s": calls / secs,
            "server_inflight": prof, "llm": llm, "injected": injected, "requests": sent, "total_s": total,
            "rows": {k: v["success"] for k, v in res["rows"].items()}}


def whole_unit(suite, splits, cfg, *, latency: float, inflight: int, faults=None) -> dict:
    """The quick unit with every row, the server's latency on from the first request to the last:
    the mean requests in flight over the whole unit (construction and training included)."""
    from llm_server import FakeLLMServer, canned_sql, inflight_profile

    from cfjax.experiments.countermem.runner import BackboneSpec, backbone_stats, expand_rows, run_unit
    from cfjax.llm.openai_client import OpenAIConfig

    with FakeLLMServer(canned_sql(suite), faults=faults, latency_s=latency) as srv:
        ocfg = OpenAIConfig(base_url=srv.base_url, model=srv.model, max_inflight=inflight, timeout_s=30.0,
                            max_retries=6, backoff_s=0.05)
        bb = BackboneSpec("openai", ocfg, inflight=inflight).make(suite, 0, cfg)
        phases: dict = {}
        t0 = time.perf_counter()
        res = run_unit(suite, 0, cfg, backbone=bb, rows=expand_rows(["all"]), splits=splits, threads=inflight,
                       on_phase=lambda ph: phases.setdefault(ph, round(time.perf_counter() - t0, 2)))
        total = time.perf_counter() - t0
        llm = backbone_stats(bb)
        bb.close()
        prof = inflight_profile(srv.chat_requests)
        n = len(srv.chat_requests)
    return {"outcomes": res["outcomes"], "total_s": total, "requests": n, "server_inflight": prof, "phases": phases,
            "llm": llm, "timing": res["timing"]}


def whole_job(suite, cfg, *, units: int, latency: float, inflight: int, max_tasks: int, root: Path,
              concurrent: int | None = None) -> dict:
    """``countermem run`` (``run_main``) of ``units`` quick SQL units (backbone seeds 0…units−1, every
    row) against one server: requests per second over the whole job against ``max_inflight / latency``.
    ``concurrent``: units at once (``CFJAX_CONCURRENT_UNITS``; default the runner's)."""
    import dataclasses

    from llm_server import FakeLLMServer, canned_sql, inflight_profile

    from cfjax.experiments.countermem.runner import BackboneSpec, concurrent_units, run_main
    from cfjax.llm.openai_client import OpenAIConfig

    jcfg = dataclasses.replace(cfg, seeds=tuple(range(units)))
    old = os.environ.get("CFJAX_CONCURRENT_UNITS")
    if concurrent is not None:
        os.environ["CFJAX_CONCURRENT_UNITS"] = str(concurrent)
    try:
        with FakeLLMServer(canned_sql(suite), latency_s=latency) as srv:
            ocfg = OpenAIConfig(base_url=srv.base_url, model=srv.model, max_inflight=inflight, timeout_s=30.0,
                                max_retries=6, backoff_s=0.05)
            spec = BackboneSpec("openai", ocfg, inflight=inflight)
            at_once = concurrent_units(spec, units)
            t0 = time.perf_counter()
            out = run_main(jcfg, suites=["sql"], out=root / f"job-{units}-{at_once}", rows=["all"], backbone=spec,
                           max_tasks=max_tasks, quick=True, progress=False, log=lambda s: None)
            total = time.perf_counter() - t0
            prof = inflight_profile(srv.chat_requests)
            n = len(srv.chat_requests)
    finally:
        if old is None:
            os.environ.pop("CFJAX_CONCURRENT_UNITS", None)
        else:
            os.environ["CFJAX_CONCURRENT_UNITS"] = old
    return {"outcomes": out["outcomes"], "total_s": total, "requests": n, "calls_per_s": n / total,
            "server_inflight": prof, "units_at_once": at_once}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--latency", type=float, default=0.2, help="seconds each request waits (default 0.2)")
    p.add_argument("--max-inflight", type=int, default=32)
    p.add_argument("--rows", nargs="+", default=["none", "cf_memory", "best_of_n"],
                   help="rows evaluated in the window (default: none cf_memory best_of_n)")
    p.add_argument("--more-tasks", type=int, default=64,
                   help="also measure the concurrent window with this many held-out tasks per row (0: skip); "
                        "shows the transport once the run has more independent chains than the quick unit")
    p.add_argument("--faults", type=float, default=0.05, help="fault rate of the fault run (0: skip it)")
    p.add_argument("--no-cache-run", action="store_true", help="skip the cache rerun")
    p.add_argument("--unit-latency", type=float, default=0.1,
                   help="latency of the whole-unit run (every row, faults at --faults; 0: skip; default 0.1)")
    p.add_argument("--job-units", type=int, default=8,
                   help="units of the whole-job run at --latency (quick SQL, every row; 0: skip; default 8)")
    p.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)),
                   help="cores for the whole process: client, agent, worlds and the fake server (default: all)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    threads = setup_threads(args.cores)
    threads["summary"] = (f"{args.cores} core(s) for client, agent, worlds and server together; "
                          f"{args.max_inflight} client threads (I/O bound)")
    load = start_load()
    t_start = time.perf_counter()

    from llm_server import FaultPlan

    from cfjax.config import CounterMemConfig, quick
    from cfjax.config.presets import QUICK
    from cfjax.domains import build_suite
    from cfjax.experiments.countermem.runner import quick_splits

    root = Path(tempfile.mkdtemp(prefix="cfjax-llm-bench-"))
    suite = build_suite("sql", root / "sql")
    cfg = quick(CounterMemConfig())
    splits = quick_splits(suite.splits(seed=cfg.split_seeds[0], n_val=cfg.n_val), QUICK.max_tasks)
    rows = tuple(args.rows)
    ideal = args.max_inflight / args.latency

    conc = run_once(suite, splits, cfg, rows, latency=args.latency, inflight=args.max_inflight)
    print(f"concurrent: {conc['eval_calls']} calls in {conc['eval_s']:.2f}s = {conc['calls_per_s']:.1f} calls/s "
          f"({100 * conc['calls_per_s'] / ideal:.0f}% of {ideal:.0f}); server in flight mean "
          f"{conc['server_inflight']['mean']:.1f} max {conc['server_inflight']['max']}")
    serial = run_once(suite, splits, cfg, rows, latency=args.latency, inflight=1)
    print(f"serial: {serial['eval_calls']} calls in {serial['eval_s']:.2f}s = {serial['calls_per_s']:.1f} calls/s")
    identical = conc["outcomes"] == serial["outcomes"]
    print(f"held-out outcomes identical: {identical}")

    rows_out = [
        ["serial (max_inflight 1), quick unit", serial["eval_calls"], f"{serial['eval_s']:.1f}", f"{serial['calls_per_s']:.1f}",
         f"{1 / args.latency:.0f}", f"{100 * serial['calls_per_s'] * args.latency:.0f}%",
         f"{serial['server_inflight']['mean']:.1f} / {serial['server_inflight']['max']}", "1.0×"],
        [f"concurrent (max_inflight {args.max_inflight}), quick unit", conc["eval_calls"], f"{conc['eval_s']:.1f}",
         f"{conc['calls_per_s']:.1f}", f"{ideal:.0f}", f"**{100 * conc['calls_per_s'] / ideal:.0f}%**",
         f"{conc['server_inflight']['mean']:.1f} / {conc['server_inflight']['max']}",
         fmt_ratio(conc["calls_per_s"] / serial["calls_per_s"], bold=True)],
    ]
    if args.more_tasks:
        big = quick_splits(suite.splits(seed=cfg.split_seeds[0], n_val=cfg.n_val), args.more_tasks)
        more = run_once(suite, big, cfg, rows, latency=args.latency, inflight=args.max_inflight)
        print(f"concurrent, {len(big.eval)} held-out tasks: {more['eval_calls']} calls in {more['eval_s']:.2f}s = "
              f"{more['calls_per_s']:.1f} calls/s ({100 * more['calls_per_s'] / ideal:.0f}%)")
        rows_out.append([f"concurrent, {len(big.eval)} held-out tasks per row", more["eval_calls"],
                         f"{more['eval_s']:.1f}", f"{more['calls_per_s']:.1f}", f"{ideal:.0f}",
                         f"{100 * more['calls_per_s'] / ideal:.0f}%",
                         f"{more['server_inflight']['mean']:.1f} / {more['server_inflight']['max']}", "–"])
        payload_more = more
    else:
        payload_more = None
    tables = [table("throughput", "Held-out evaluation against a 200 ms server",
                    ["run", "calls", "window s", "calls/s", "ideal calls/s", "of ideal", "server in flight mean / max",
                     "vs serial"], rows_out,
                    note=f"rows {', '.join(rows)}; the quick SQL unit has {len(splits.eval)} held-out tasks per row; "
                         f"outcomes identical to the serial run: {identical}")]
    payload: dict = {"concurrent": conc, "serial": serial, "identical": identical, "ideal_calls_per_s": ideal,
                     "more_tasks": payload_more}

    if args.unit_latency > 0:
        plan = FaultPlan(rate=args.faults, seed=1) if args.faults > 0 else None
        wu = whole_unit(suite, splits, cfg, latency=args.unit_latency, inflight=args.max_inflight, faults=plan)
        ws = whole_unit(suite, splits, cfg, latency=0.0, inflight=1)
        same = wu["outcomes"] == ws["outcomes"]
        print(f"whole quick unit, every row, {1000 * args.unit_latency:.0f} ms, {100 * args.faults:.0f}% faults: "
              f"{wu['requests']} requests in {wu['total_s']:.1f}s, mean in flight {wu['server_inflight']['mean']:.1f}; "
              f"outcomes identical to the serial run: {same}")
        tables.append(table(
            "whole_unit", f"The whole quick SQL unit (every row) against a {1000 * args.unit_latency:.0f} ms server "
                          f"with {100 * args.faults:.0f}% faults",
            ["run", "requests", "seconds", "server in flight mean / max", "main build + train s", "outcomes = serial"],
            [[f"max_inflight {args.max_inflight}", wu["requests"], f"{wu['total_s']:.1f}",
              f"**{wu['server_inflight']['mean']:.1f}** / {wu['server_inflight']['max']:.0f}",
              f"{wu['timing'].get('cf_memory_build_train', float('nan')):.1f}", same]],
            note="latency on from the first request; the main construction and selector training are one chain "
                 "of dependent calls (a decision's revision and retry wait for its draft and check), which bounds "
                 "the unit's mean; first drafts are requested ahead, rows that need nothing of the main run start "
                 "beside it, and validation and held-out episodes run at once"))
        payload["whole_unit"] = {"concurrent": wu, "serial": ws, "identical": same}
        identical = identical and same
    if args.job_units > 0:
        wj = whole_job(suite, cfg, units=args.job_units, latency=args.latency, inflight=args.max_inflight,
                       max_tasks=QUICK.max_tasks, root=root)
        print(f"whole job, {args.job_units} quick units at once {wj['units_at_once']}: {wj['requests']} requests in "
              f"{wj['total_s']:.1f}s = {wj['calls_per_s']:.1f}/s ({100 * wj['calls_per_s'] / ideal:.0f}% of {ideal:.0f}); "
              f"mean in flight {wj['server_inflight']['mean']:.1f}")
        tables.append(table(
            "whole_job", f"A whole main job ({args.job_units} quick SQL units, every row) against a "
                         f"{1000 * args.latency:.0f} ms server",
            ["units at once (one shared client)", "requests", "seconds", "requests/s", "ideal", "of ideal",
             "server in flight mean / max"],
            [[wj["units_at_once"], wj["requests"], f"{wj['total_s']:.1f}", f"{wj['calls_per_s']:.1f}", f"{ideal:.0f}",
              f"**{100 * wj['calls_per_s'] / ideal:.0f}%**",
              f"{wj['server_inflight']['mean']:.1f} / {wj['server_inflight']['max']:.0f}"]],
            note="countermem run's own path (run_main): units on threads of one process, one SharedTransport, the "
                 "server never sees more than max_inflight requests"))
        payload["whole_job"] = wj
    if args.faults > 0:
        plan = FaultPlan(rate=args.faults, seed=1)
        fr = run_once(suite, splits, cfg, rows, latency=0.0, inflight=args.max_inflight, faults=plan)
        counted = (fr["llm"] or {}).get("faults", {})
        print(f"fault run finished in {fr['total_s']:.1f}s: injected {fr['injected']}, counted {counted}, "
              f"failed calls {(fr['llm'] or {}).get('failed_calls')}")
        frows = [[k, fr["injected"].get(k, 0), _counted(k, fr["llm"] or {})] for k in sorted(
            set(fr["injected"]) | {"empty_choices", "not_json", "null_content", "surrogate", "http_429",
                                   "http_500_burst", "reset", "stall", "huge"})]
        frows.append(["calls failed after every retry (failed attempts)", "–", (fr["llm"] or {}).get("failed_calls", 0)])
        tables.append(table("faults", f"A whole quick unit with {100 * args.faults:.0f}% faulty replies",
                            ["fault", "server injected", "client counted"], frows,
                            note=f"finished: yes ({fr['total_s']:.0f} s, {fr['requests']} requests); stalls 2–5 s"))
        payload["faults"] = fr
    if not args.no_cache_run:
        from llm_server import FakeLLMServer, canned_sql

        cache = str(root / "responses.sqlite")
        with FakeLLMServer(canned_sql(suite)) as srv:  # one server: a rerun asks the same URL
            first = run_once(suite, splits, cfg, rows, latency=0.0, inflight=args.max_inflight, cache=cache,
                             server=srv)
            second = run_once(suite, splits, cfg, rows, latency=0.0, inflight=args.max_inflight, cache=cache,
                              server=srv)
        c2 = (second["llm"] or {}).get("cache", {})
        print(f"cache rerun: first pass {first['requests']} requests, second {second['requests']}; "
              f"identical outcomes {first['outcomes'] == second['outcomes']}")
        tables.append(table("cache", "A rerun with the response cache",
                            ["pass", "requests sent", "cache hits", "cache misses", "outcomes identical"],
                            [["first", first["requests"], (first["llm"] or {}).get("cache", {}).get("hits", 0),
                              (first["llm"] or {}).get("cache", {}).get("misses", 0), "–"],
                             ["rerun", second["requests"], c2.get("hits", 0), c2.get("misses", 0),
                              first["outcomes"] == second["outcomes"]]]))
        payload["cache"] = {"first": first, "second": second}
    meta = finish_meta(make_meta("llm_throughput", SOURCES, args, threads, load), t_start)
    path = write_result("llm_throughput", {"meta": meta, "tables": tables, **payload}, out=args.out)
    print(f"wrote {path}")
    return 0 if identical else 1


def _counted(kind: str, llm: dict) -> str:
    """What the client counted for a server fault kind (its own vocabulary)."""
    f = llm.get("faults", {})
    m = {"empty_choices": "empty_choices", "not_json": "not_json", "null_content": "null_content",
         "http_429": "http_429", "http_500_burst": "http_5xx", "reset": "reset"}
    if kind in m:
        return str(f.get(m[kind], 0))
    if kind == "surrogate":
        return f"{llm.get('sanitised', 0)} sanitised"
    if kind == "huge":
        return f"{llm.get('truncated', 0)} truncated"
    if kind == "stall":
        return f"{llm.get('slow', 0)} slow (≥ 2 s)"
    return "?"


if __name__ == "__main__":
    raise SystemExit(main())

"""Run every Anti-Persistence row over suites and seeds, aggregate, write results and plots.

One *job* is one (suite, row, seed): the suite from :func:`cfjax.domains.open_suite`,
its world (memoised, :class:`~cfjax.infra.cache.CachedWorld`) and edit model, a
backbone from a :class:`~cfjax.experiments.countermem.BackboneSpec` (scripted:
``ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=...))``, or an
OpenAI-compatible server), and :func:`cfjax.antipersist.protocol.run_method`.
Jobs are independent and fully seeded, so they run on a small process pool
with results identical to the serial run (a test checks it).

Layout of ``run_all(out, suites=...)``::

    out/config.toml                 the APConfig (``--config`` reads it back)
    out/suites/<suite>/             the built suites (read-only to the jobs)
    out/<suite>/results.json        per-suite table, per-seed jobs, per-family breakdown
    out/<suite>/success_by_iteration.png
    out/<suite>/seed_<s>/           outcome logs of the bandit rows
    out/results.json, out/report.txt   every suite, and the combined table

Analysis code (here, not the method) reads the suites' answer keys for the
per-family breakdown of held-out success.
"""

from __future__ import annotations

import json
import math
import multiprocessing
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cfjax.antipersist.guidance import MODES
from cfjax.antipersist.protocol import ROWS, APConfig, reproduced_errors, run_method
from cfjax.experiments.common import finite, spread
from cfjax.experiments.countermem import BackboneSpec
from cfjax.infra.io import atomic_write_bytes, atomic_write_text

__all__ = ["APJob", "run_all", "run_job", "aggregate", "format_table", "format_summary", "plot_success",
           "run_main"]


@dataclass(frozen=True)
class APJob:
    """Everything a worker process needs to run one (suite, row, seed)."""

    suite: str
    root: str
    row: str
    seed: int
    cfg: APConfig
    out_dir: str
    backbone: BackboneSpec = BackboneSpec("scripted")


def run_job(job: APJob) -> dict:
    """One (suite, row, seed): K iterations; returns plain data (the function worker processes run)."""
    from cfjax.domains import open_suite
    from cfjax.infra.cache import CachedWorld

    suite = open_suite(job.suite, job.root)
    sp = suite.splits(seed=job.cfg.split_seed)
    train_pool = list(sp.build) + list(sp.train) + list(sp.val)
    eval_tasks = spread(sp.eval, job.cfg.max_eval_tasks)
    backbone = job.backbone.make(suite, job.seed, job.cfg)  # type: ignore[arg-type]  # reads cfg.scripted
    raw = suite.world()
    try:
        results, state = run_method(job.row, seed=job.seed, train_pool=train_pool, eval_tasks=eval_tasks,
                                    backbone=backbone, world=CachedWorld(raw), edits=suite.edits, cfg=job.cfg,
                                    out_dir=Path(job.out_dir) / f"seed_{job.seed}")
    finally:
        close = getattr(raw, "close", None)
        if close is not None:
            close()
    by_family: dict[str, list[bool]] = defaultdict(list)  # analysis: the answer keys' families
    for tid, ok in results[-1].solved.items():
        by_family[suite.answer_key(tid).family].append(ok)
    iters = []
    for r in results:
        d = asdict(r)
        d.pop("solved")
        iters.append(d)
    return {"suite": job.suite, "row": job.row, "seed": job.seed, "iterations": iters,
            "final_by_family": {f: 100.0 * sum(v) / len(v) for f, v in sorted(by_family.items())},
            "eval_tasks": len(eval_tasks), "provenance": reproduced_errors(state),
            "trajectories": len(state.trajectories),
            "log_entries": len(state.log) if state.log is not None else None,
            "abstractions": len(state.abstractions) if state.abstractions is not None else None}


def _init_worker() -> None:  # pragma: no cover - runs in worker processes
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import faiss

        faiss.omp_set_num_threads(1)
    except Exception:
        pass


def _run_jobs(jobs: Sequence[APJob], workers: int, log: Callable[[str], None], label: str) -> list[dict]:
    def note(d: dict) -> None:
        log(f"  {d['suite']}/{d['row']} seed {d['seed']}: held-out {d['iterations'][-1]['success']:.1f}% [{label}]")

    if workers <= 1 or len(jobs) <= 1:
        done = []
        for j in jobs:
            done.append(run_job(j))
            note(done[-1])
        return done
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker) as pool:
        futs = [pool.submit(run_job, j) for j in jobs]
        done = []
        for f in futs:  # job order: identical to the serial run
            done.append(f.result())
            note(done[-1])
    return done


def run_all(out_dir: str | Path, *, suites: Sequence[str] = ("sql",), rows: Sequence[str] = ROWS,
            cfg: APConfig = APConfig(), workers: int = 1, backbone: BackboneSpec | None = None,
            log: Callable[[str], None] = print) -> dict:
    """Every suite × row × seed; writes the per-suite and combined results (module docstring)."""
    from cfjax.config import save_toml
    from cfjax.domains import SUITES, build_suite

    spec = backbone or BackboneSpec("scripted")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bad = [r for r in rows if r not in ROWS]
    if bad:
        raise ValueError(f"unknown row(s) {bad}; choose from {', '.join(ROWS)}")
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ValueError(f"unknown suite(s) {unknown} (available: {', '.join(SUITES)})")
    save_toml(cfg, out / "config.toml")
    roots = {}
    for s in suites:
        roots[s] = out / "suites" / s
        build_suite(s, roots[s])  # once, before the workers read it
    jobs = [APJob(s, str(roots[s]), r, seed, cfg, str(out / s), spec) for s in suites for r in rows
            for seed in cfg.seeds]
    done = _run_jobs(jobs, workers, log, spec.label)
    per_suite = {}
    for s in suites:
        payload = aggregate([j for j in done if j["suite"] == s], suite=s, rows=rows, cfg=cfg, label=spec.label)
        atomic_write_text(out / s / "results.json", json.dumps(finite(payload), indent=1) + "\n")
        plot_success(payload, out / s / "success_by_iteration.png")
        log(format_table(payload))
        per_suite[s] = payload
    combined = {"backbone": spec.label, "suites": per_suite, "seeds": list(cfg.seeds), "rows": list(rows),
                "summary": summarize(per_suite, rows)}
    atomic_write_text(out / "results.json", json.dumps(finite(combined), indent=1) + "\n")
    report = "\n\n".join([format_table(p) for p in per_suite.values()] + [format_summary(combined)])
    atomic_write_text(out / "report.txt", report + "\n")
    log(format_summary(combined))
    return combined


def aggregate(jobs: Sequence[dict], *, suite: str, rows: Sequence[str], cfg: APConfig, label: str) -> dict:
    table = {}
    for r in rows:
        js = [j for j in jobs if j["row"] == r]
        curves = np.array([[it["success"] for it in j["iterations"]] for j in js])
        calls = np.array([[it["calls_per_task"] for it in j["iterations"]] for j in js])
        final_modes = {m: float(np.mean([j["iterations"][-1]["mode_freq"][m] for j in js])) for m in MODES}
        prov = {k: int(sum(j["provenance"][k] for j in js)) for k in js[0]["provenance"]}
        fams = sorted({f for j in js for f in j["final_by_family"]})
        table[r] = {
            "success_by_iteration": curves.mean(axis=0).tolist(),
            "success_std_by_iteration": curves.std(axis=0).tolist(),
            "final_success": float(curves[:, -1].mean()), "final_success_std": float(curves[:, -1].std()),
            "final_success_per_seed": {str(j["seed"]): j["iterations"][-1]["success"] for j in js},
            "final_success_by_family": {f: float(np.mean([j["final_by_family"][f] for j in js
                                                          if f in j["final_by_family"]])) for f in fams},
            "calls_per_task_by_iteration": calls.mean(axis=0).tolist(),
            "final_calls_per_task": float(calls[:, -1].mean()),
            "final_tokens_per_task": float(np.mean([j["iterations"][-1]["tokens_per_task"] for j in js])),
            "final_applied_per_task": float(np.mean([j["iterations"][-1]["applied_per_task"] for j in js])),
            "final_mode_freq": final_modes,
            "provenance": prov,
        }
    return {"backbone": label, "suite": suite, "seeds": list(cfg.seeds), "rows": table,
            "eval_tasks": jobs[0]["eval_tasks"] if jobs else 0,
            "config": {"iterations": cfg.iterations, "tasks_per_iteration": cfg.tasks_per_iteration, "B": cfg.B,
                       "max_attempts": cfg.max_attempts, "max_eval_tasks": cfg.max_eval_tasks,
                       "bandit": asdict(cfg.bandit), "synthesis": asdict(cfg.synthesis),
                       "scripted": asdict(cfg.scripted)},
            "jobs": list(jobs)}


def summarize(per_suite: dict[str, dict], rows: Sequence[str]) -> dict:
    """Final held-out success per row: per suite and the unweighted mean over suites."""
    out = {}
    for r in rows:
        vals = {s: p["rows"][r]["final_success"] for s, p in per_suite.items()}
        out[r] = {"by_suite": vals, "mean": float(np.mean(list(vals.values())))}
    return out


def format_table(payload: dict) -> str:
    rows = payload["rows"]
    k = len(next(iter(rows.values()))["success_by_iteration"])
    head = (f"Anti-Persistence protocol on suite '{payload['suite']}' — {payload['backbone']}; held-out success "
            f"(%) on {payload['eval_tasks']} tasks by iteration, mean over seeds {payload['seeds']}")
    lines = [head, f"{'row':<20}" + "".join(f"{'it' + str(i + 1):>7}" for i in range(k))
             + f"{'final ± std':>14}{'calls/task':>12}  modes n/i/s/c        reproduced/flagged"]
    for r, v in rows.items():
        modes = "/".join(f"{v['final_mode_freq'][m]:.2f}" for m in MODES)
        p = v["provenance"]
        lines.append(f"{r:<20}" + "".join(f"{x:>7.1f}" for x in v["success_by_iteration"])
                     + f"{v['final_success']:>8.1f} ± {v['final_success_std']:<4.1f}{v['final_calls_per_task']:>10.2f}"
                     f"  {modes:<20} {p['reproduced']}/{p['flagged']}")
    return "\n".join(lines)


def format_summary(combined: dict) -> str:
    suites = list(combined["suites"])
    lines = [f"Anti-Persistence, final held-out success (%) per suite — {combined['backbone']}; "
             f"mean over seeds {combined['seeds']}",
             f"{'row':<20}" + "".join(f"{s:>9}" for s in suites) + f"{'mean':>9}"]
    for r, v in combined["summary"].items():
        lines.append(f"{r:<20}" + "".join(f"{v['by_suite'][s]:>9.1f}" for s in suites) + f"{v['mean']:>9.1f}")
    return "\n".join(lines)


def plot_success(payload: dict, path: str | Path) -> None:
    """Held-out success by iteration, one line per row (PNG, written atomically)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for r, v in payload["rows"].items():
        y = np.asarray(v["success_by_iteration"])
        s = np.asarray(v["success_std_by_iteration"])
        x = np.arange(1, len(y) + 1)
        style = "-" if r in ("anti_persistence", "trajectory_memory", "abstraction_memory", "joint_memory") else ":"
        lw = 2.5 if r == "anti_persistence" else 1.4
        ax.plot(x, y, style, lw=lw, marker="o", ms=3, label=r)
        if r == "anti_persistence" and not math.isnan(float(s.sum())):
            ax.fill_between(x, y - s, y + s, alpha=0.15)
    ax.set_xlabel("self-improvement iteration")
    ax.set_ylabel("held-out success (%)")
    ax.set_title(f"Held-out success by iteration, suite {payload['suite']} — {payload['backbone']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())


def run_main(cfg: APConfig, *, suites: Sequence[str], out: str | Path, rows: Sequence[str] | None = None,
             backbone: BackboneSpec | str = "scripted", workers: int | None = None, quick: bool = False,
             log: Callable[[str], None] = print) -> dict:
    """``cfjax antipersist run``: :func:`run_all` with a header and a closing line logged.

    ``suites`` may be ``["all"]``; ``rows`` defaults to every row; ``workers`` to ``min(2, CPUs)``.
    Returns the combined ``results.json`` payload.
    """
    import os
    import time

    from cfjax.experiments.countermem import backbone_spec, resolve_suites

    names = resolve_suites(suites)
    rows = tuple(rows) if rows else ROWS
    spec = backbone_spec(backbone) if isinstance(backbone, str) else backbone
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    out = Path(out)
    log(f"cfjax antipersist run: suites={names} backbone={spec.label} rows={len(rows)} seeds={list(cfg.seeds)} "
        f"K={cfg.iterations}×{cfg.tasks_per_iteration} tasks, held-out {cfg.max_eval_tasks or 'all'}, "
        f"{workers} worker(s){' (quick)' if quick else ''} → {out}")
    t0 = time.perf_counter()
    combined = run_all(out, suites=names, rows=rows, cfg=cfg, workers=workers, backbone=spec, log=log)
    log(f"\nwrote {out / 'results.json'}, {out / 'report.txt'}, {out / 'config.toml'} and "
        f"{out}/<suite>/results.json, success_by_iteration.png ({time.perf_counter() - t0:.0f}s)")
    return combined

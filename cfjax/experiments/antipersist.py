"""Run every Anti-Persistence row over seeds, aggregate, write results and the plot.

Jobs (row × seed) are independent and fully seeded, so they run on a small
process pool with results identical to the serial run (a test checks it).
"""

from __future__ import annotations

import json
import math
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

import numpy as np

from cfjax.antipersist.guidance import MODES
from cfjax.antipersist.protocol import ROWS, APConfig, reproduced_errors, run_method
from cfjax.infra.io import atomic_write_bytes, atomic_write_text
from cfjax.llm.scripted import SCRIPTED_LABEL

__all__ = ["run_all", "run_job", "format_table", "plot_success"]


def run_job(row: str, seed: int, suite_root: str, cfg: APConfig, out_dir: str, split_seed: int = 12345) -> dict:
    """One (row, seed): build the suite view, run K iterations, return plain data."""
    from cfjax.domains.sql import SQLSuite

    suite = SQLSuite.open(suite_root)
    sp = suite.splits(seed=split_seed)
    train_pool = list(sp.build) + list(sp.train) + list(sp.val)
    results, state = run_method(row, seed=seed, train_pool=train_pool, eval_tasks=list(sp.eval),
                                schemas=suite.specs, world=suite.world(), cfg=cfg,
                                out_dir=Path(out_dir) / f"seed_{seed}")
    return {"row": row, "seed": seed, "iterations": [asdict(r) for r in results],
            "provenance": reproduced_errors(state), "trajectories": len(state.trajectories),
            "log_entries": len(state.log) if state.log is not None else None,
            "abstractions": len(state.abstractions) if state.abstractions is not None else None}


def run_all(out_dir: str | Path, *, rows: Sequence[str] = ROWS, cfg: APConfig = APConfig(), workers: int = 1,
            log=print) -> dict:
    """Every row × seed; writes ``results.json`` and ``success_by_iteration.png``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for r in rows:
        if r not in ROWS:
            raise ValueError(f"unknown row {r!r}; choose from {', '.join(ROWS)}")
    suite_root = str(out / "databases")
    from cfjax.domains.sql import SQLSuite

    SQLSuite.build(suite_root)  # once, before the workers read it
    jobs = [(r, s) for r in rows for s in cfg.seeds]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futs = [pool.submit(run_job, r, s, suite_root, cfg, str(out)) for r, s in jobs]
            done = []
            for f in futs:
                done.append(f.result())
                log(f"  {done[-1]['row']} seed {done[-1]['seed']}: held-out "
                    f"{done[-1]['iterations'][-1]['success']:.1f}")
    else:
        done = []
        for r, s in jobs:
            done.append(run_job(r, s, suite_root, cfg, str(out)))
            log(f"  {r} seed {s}: held-out {done[-1]['iterations'][-1]['success']:.1f}")
    payload = aggregate(done, rows=rows, cfg=cfg)
    atomic_write_text(out / "results.json", json.dumps(payload, indent=1) + "\n")
    plot_success(payload, out / "success_by_iteration.png")
    log(format_table(payload))
    return payload


def aggregate(jobs: Sequence[dict], *, rows: Sequence[str], cfg: APConfig) -> dict:
    table = {}
    for r in rows:
        js = [j for j in jobs if j["row"] == r]
        curves = np.array([[it["success"] for it in j["iterations"]] for j in js])
        calls = np.array([[it["calls_per_task"] for it in j["iterations"]] for j in js])
        final_modes = {m: float(np.mean([j["iterations"][-1]["mode_freq"][m] for j in js])) for m in MODES}
        prov = {k: int(sum(j["provenance"][k] for j in js)) for k in js[0]["provenance"]}
        table[r] = {
            "success_by_iteration": curves.mean(axis=0).tolist(),
            "success_std_by_iteration": curves.std(axis=0).tolist(),
            "final_success": float(curves[:, -1].mean()), "final_success_std": float(curves[:, -1].std()),
            "final_success_per_seed": {str(j["seed"]): j["iterations"][-1]["success"] for j in js},
            "calls_per_task_by_iteration": calls.mean(axis=0).tolist(),
            "final_calls_per_task": float(calls[:, -1].mean()),
            "final_mode_freq": final_modes,
            "provenance": prov,
        }
    return {"backbone": SCRIPTED_LABEL, "suite": "sql", "seeds": list(cfg.seeds), "rows": table,
            "config": {"iterations": cfg.iterations, "tasks_per_iteration": cfg.tasks_per_iteration, "B": cfg.B,
                       "max_attempts": cfg.max_attempts, "bandit": asdict(cfg.bandit),
                       "synthesis": asdict(cfg.synthesis), "scripted": asdict(cfg.scripted)},
            "jobs": list(jobs)}


def format_table(payload: dict) -> str:
    rows = payload["rows"]
    k = len(next(iter(rows.values()))["success_by_iteration"])
    head = (f"Anti-Persistence protocol on suite 'sql' — {payload['backbone']}; held-out success (%) by "
            f"iteration, mean over seeds {payload['seeds']}")
    lines = [head, f"{'row':<20}" + "".join(f"{'it' + str(i + 1):>7}" for i in range(k))
             + f"{'final ± std':>14}{'calls/task':>12}  modes n/i/s/c        reproduced/flagged"]
    for r, v in rows.items():
        modes = "/".join(f"{v['final_mode_freq'][m]:.2f}" for m in MODES)
        p = v["provenance"]
        lines.append(f"{r:<20}" + "".join(f"{x:>7.1f}" for x in v["success_by_iteration"])
                     + f"{v['final_success']:>8.1f} ± {v['final_success_std']:<4.1f}{v['final_calls_per_task']:>10.2f}"
                     f"  {modes:<20} {p['reproduced']}/{p['flagged']}")
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
    ax.set_title(f"Held-out success by iteration — {payload['backbone']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())

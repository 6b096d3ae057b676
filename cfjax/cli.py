"""The ``cfjax`` command.

    cfjax countermem run --suite all --out runs/countermem    # the main job (scripted backbone, seeds 0 1 2)
    cfjax countermem run --suite sql --out runs/x --backbone openai   # a real LLM (CFJAX_LLM_BASE_URL, CFJAX_LLM_MODEL)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

__all__ = ["main"]


def _progress_factory(enabled: bool):
    if not enabled:
        from cfjax.countermem.pipeline import null_progress

        return null_progress
    from tqdm.auto import tqdm

    def make(desc: str, total: int):
        return tqdm(total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True,
                    mininterval=0.5)

    return make


QUICK = {"max_tasks": 16, "decisions": 200, "checkpoint_every": 100, "accumulation": (0, 8, 16, 32)}


def _countermem_run(args: argparse.Namespace) -> int:
    import json
    import time

    from cfjax.config import CounterMemConfig, load_toml, to_dict
    from cfjax.experiments.countermem import BackboneSpec, UnitJob, expand_rows, run_jobs
    from cfjax.experiments.report import aggregate, format_report
    from cfjax.infra.io import atomic_write_text
    from cfjax.domains import SUITES, build_suite

    names = list(SUITES) if args.suite == "all" else [args.suite]
    if any(n not in SUITES for n in names):
        print(f"cfjax: unknown suite {args.suite!r} (available: {', '.join(SUITES)}, all)", file=sys.stderr)
        return 2
    rows = expand_rows(args.rows or ["all"])
    cfg = load_toml(CounterMemConfig, args.config) if args.config else CounterMemConfig()
    max_tasks = args.max_tasks
    if args.quick:
        cfg = dataclasses.replace(
            cfg, seeds=(0,), dqn=dataclasses.replace(cfg.dqn, total_decisions=QUICK["decisions"],
                                                     checkpoint_every=QUICK["checkpoint_every"]),
            experiment=dataclasses.replace(cfg.experiment, accumulation_checkpoints=QUICK["accumulation"]))
        max_tasks = max_tasks or QUICK["max_tasks"]
    if args.seeds is not None:
        cfg = dataclasses.replace(cfg, seeds=tuple(args.seeds))
    if args.decisions is not None:
        cfg = dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, total_decisions=args.decisions))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.backbone == "scripted":
        spec = BackboneSpec("scripted")
    else:
        from cfjax.llm.openai_client import OpenAIConfig

        spec = BackboneSpec("openai", OpenAIConfig.from_env())
    threads = args.threads if args.threads is not None else (8 if args.backbone == "openai" else 1)
    workers = args.workers if args.workers is not None else min(2, os.cpu_count() or 1)
    roots = {}
    for n in names:
        roots[n] = out / "suites" / n
        build_suite(n, roots[n])
    jobs = [UnitJob(n, str(roots[n]), seed, cfg, rows, spec, max_tasks, threads, str(out / n / f"seed_{seed}"))
            for n in names for seed in cfg.seeds]
    from cfjax.config import save_toml

    save_toml(cfg, out / "config.toml")
    print(f"cfjax countermem run: suites={names} backbone={spec.label} seeds={list(cfg.seeds)} "
          f"rows={len(rows)} units={len(jobs)} workers={workers} threads={threads}"
          f"{' (quick)' if args.quick else ''} → {out}", flush=True)
    t0 = time.perf_counter()
    progress = _progress_factory(not args.no_progress and workers <= 1)
    units = run_jobs(jobs, workers=workers, progress=progress, log=lambda s: print(s, flush=True))
    summary = aggregate(units)
    payload = {"backbone": spec.label, "suites": names, "seeds": list(cfg.seeds), "rows": list(rows),
               "quick": bool(args.quick), "max_tasks": max_tasks, "workers": workers, "threads": threads,
               "seconds": round(time.perf_counter() - t0, 1), "summary": summary, "units": units,
               "config": to_dict(cfg)}
    from cfjax.experiments.countermem import finite

    atomic_write_text(out / "results.json", json.dumps(finite(payload), indent=1) + "\n")
    report = format_report(summary, backbone=spec.label)
    atomic_write_text(out / "report.txt", report + "\n")
    print(report)
    print(f"\nwrote {out / 'results.json'}, {out / 'report.txt'}, stores and selectors under {out}/<suite>/seed_*/ "
          f"({payload['seconds']:.0f}s); figures: cfjax countermem report {out}")
    return 0


def _countermem_report(args: argparse.Namespace) -> int:
    from cfjax.experiments.report import draw_figures, format_report, load_results

    res = load_results(args.dir)
    print(format_report(res["summary"], backbone=res.get("backbone", "")))
    paths = draw_figures(res, Path(args.out) if args.out else Path(args.dir) / "figures")
    for p in paths:
        print(f"wrote {p}")
    return 0


def _scripted_setup(args: argparse.Namespace, cfg):
    from cfjax.llm.scripted import SCRIPTED_LABEL, ScriptedBackbone
    from cfjax.domains import build_suite

    out = Path(args.out)
    suite = build_suite(args.suite, out / "suites" / args.suite)
    splits = suite.splits(seed=cfg.split_seed, n_val=cfg.n_val)
    backbone = ScriptedBackbone(suite.scripted_domain(), dataclasses.replace(cfg.scripted, seed=args.seed))
    return suite, splits, backbone, SCRIPTED_LABEL


def _countermem_table(args: argparse.Namespace) -> int:
    from cfjax.config import CounterMemConfig, load_toml
    from cfjax.countermem.agent import Agent
    from cfjax.countermem.pipeline import construct
    from cfjax.countermem.store import MemoryStore
    from cfjax.countermem.table import build_table

    cfg = load_toml(CounterMemConfig, args.config) if args.config else CounterMemConfig()
    suite, splits, backbone, label = _scripted_setup(args, cfg)
    out = Path(args.out)
    progress = _progress_factory(not args.no_progress)
    store_path = out / "store.json"
    if store_path.exists():
        store = MemoryStore.load(store_path, suite.edits)
        print(f"reusing the frozen store {store_path} ({len(store)} records)")
    else:
        store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    from cfjax.experiments.countermem import suite_world_kwargs

    agent = Agent(backbone, suite.world(**suite_world_kwargs(suite, cfg)), cfg, store=store,
                  envs=dict(suite.envs()), edits=suite.edits)
    if not store.frozen:
        construct(agent, splits.build, seed=args.seed, progress=progress)
        store.save(store_path)
    table, meta = build_table(agent, splits, out, samples=args.samples, seed=args.seed, suite=args.suite,
                              progress=progress)
    print(f"decision table ({label}): {meta.rows} rows; roots train={meta.roots['train']} "
          f"val={meta.roots['val']} eval={meta.roots['eval']}; sha256 {meta.hash[:16]}… → {out / 'table.npz'}")
    return 0


def _countermem_train_selectors(args: argparse.Namespace) -> int:
    import json

    import numpy as np

    from cfjax.countermem.selectors import parse_grid, parse_seeds, train_selectors
    from cfjax.countermem.table import load_table
    from cfjax.infra.io import atomic_write_text
    from cfjax.kernels.dqn import DQNConfig

    table, meta = load_table(args.table)
    cfg = DQNConfig()
    if args.decisions is not None:
        cfg = dataclasses.replace(cfg, total_decisions=args.decisions)
    seeds = parse_seeds(args.seeds)
    grid = parse_grid(args.grid or [])
    import time

    t0 = time.perf_counter()
    res = train_selectors(table, cfg, seeds=seeds, grid=grid, max_depth=meta.max_depth)
    secs = time.perf_counter() - t0
    n = len(grid) * len(seeds)
    print(f"trained {n} selectors ({len(grid)} grid point(s) × {len(seeds)} seed(s), {cfg.total_decisions} "
          f"decisions each) on table {meta.hash[:12]}… ({meta.backbone}) in {secs:.1f}s on {res.devices} device(s)")
    print(f"{'grid point':<28}{'seed':>6}{'val return':>12}{'best@':>7}{'held-out return':>17}{'held-out solved':>17}")
    for g, point in enumerate(grid):
        name = ",".join(f"{k}={v:g}" for k, v in point.items()) or "(Table 3 defaults)"
        for s, seed in enumerate(seeds):
            print(f"{name:<28}{seed:>6}{res.val_return[g, s]:>12.4f}{int(res.best_decision[g, s]):>7}"
                  f"{res.eval_return[g, s]:>17.4f}{100 * res.eval_solved[g, s]:>16.1f}%")
        print(f"{name:<28}{'mean':>6}{res.val_return[g].mean():>12.4f}{'':>7}{res.eval_return[g].mean():>17.4f}"
              f"{100 * res.eval_solved[g].mean():>16.1f}%")
    out = Path(args.out) if args.out else Path(args.table) / "selectors.json"
    atomic_write_text(out, json.dumps({
        "table_hash": meta.hash, "backbone": meta.backbone, "seeds": list(seeds), "grid": grid,
        "decisions": cfg.total_decisions, "seconds": secs,
        "val_return": res.val_return.tolist(), "best_decision": res.best_decision.tolist(),
        "eval_return": res.eval_return.tolist(), "eval_solved": res.eval_solved.tolist(),
        "val_curve": np.where(np.isnan(res.val_curve), None, res.val_curve).tolist(),
    }, indent=1))
    print(f"wrote {out}")
    return 0


AP_QUICK = {"iterations": 3, "tasks_per_iteration": 20, "max_eval_tasks": 40, "seeds": (42,)}


def _antipersist_run(args: argparse.Namespace) -> int:
    import time

    from cfjax.antipersist.protocol import ROWS, APConfig
    from cfjax.config import load_toml
    from cfjax.domains import SUITES
    from cfjax.experiments.antipersist import run_all
    from cfjax.experiments.countermem import BackboneSpec

    names = list(SUITES) if args.suite == "all" else [args.suite]
    if any(n not in SUITES for n in names):
        print(f"cfjax: unknown suite {args.suite!r} (available: {', '.join(SUITES)}, all)", file=sys.stderr)
        return 2
    cfg = load_toml(APConfig, args.config) if args.config else APConfig()
    changes: dict = {}
    if args.quick:
        changes.update(AP_QUICK)
    if args.seeds is not None:
        changes["seeds"] = tuple(args.seeds)
    if args.iterations is not None:
        changes["iterations"] = args.iterations
    if args.tasks is not None:
        changes["tasks_per_iteration"] = args.tasks
    if args.max_tasks is not None:
        changes["max_eval_tasks"] = args.max_tasks
    cfg = dataclasses.replace(cfg, **changes)
    rows = tuple(args.rows) if args.rows else ROWS
    if args.backbone == "scripted":
        spec = BackboneSpec("scripted")
    else:
        from cfjax.llm.openai_client import OpenAIConfig

        overrides = {k: v for k, v in (("base_url", args.base_url), ("model", args.model)) if v}
        spec = BackboneSpec("openai", OpenAIConfig.from_env(**overrides))
    workers = args.workers if args.workers is not None else min(2, os.cpu_count() or 1)
    out = Path(args.out)
    print(f"cfjax antipersist run: suites={names} backbone={spec.label} rows={len(rows)} seeds={list(cfg.seeds)} "
          f"K={cfg.iterations}×{cfg.tasks_per_iteration} tasks, held-out {cfg.max_eval_tasks or 'all'}, "
          f"{workers} worker(s){' (quick)' if args.quick else ''} → {out}", flush=True)
    t0 = time.perf_counter()
    run_all(out, suites=names, rows=rows, cfg=cfg, workers=workers, backbone=spec, log=lambda s: print(s, flush=True))
    print(f"\nwrote {out / 'results.json'}, {out / 'report.txt'}, {out / 'config.toml'} and "
          f"{out}/<suite>/results.json, success_by_iteration.png ({time.perf_counter() - t0:.0f}s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cfjax", description="cfjax: a JAX learning core for agent memory")
    sub = p.add_subparsers(dest="method", required=True)
    cm = sub.add_parser("countermem", help="CounterMem: verified counterfactual memory")
    cms = cm.add_subparsers(dest="command", required=True)
    r = cms.add_parser("run", help="Algorithm 1 with every baseline and ablation row on the built-in suites")
    r.add_argument("--suite", default="all", help="sql | pybugs | sat | all (default: all)")
    r.add_argument("--rows", nargs="+", default=None,
                   help="rows to run (default: all): none best_of_n expel cf_memory cf_without_wm wm_without_cf "
                        "random_retrieval shuffled_retrieval no_condition retention accumulation")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--backbone", choices=("scripted", "openai"), default="scripted",
                   help="scripted (seeded simulator, default) or openai (any OpenAI-compatible server; "
                        "set CFJAX_LLM_BASE_URL and CFJAX_LLM_MODEL)")
    r.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: 0 1 2)")
    r.add_argument("--config", default=None, help="a CounterMemConfig TOML file (see DIR/config.toml of a run)")
    r.add_argument("--decisions", type=int, default=None, help="selector training decisions (default 2000, Table 3)")
    r.add_argument("--max-tasks", type=int, default=None, help="cap every split (smoke tests)")
    r.add_argument("--quick", action="store_true",
                   help=f"seed 0, {QUICK['max_tasks']} tasks per split, {QUICK['decisions']} selector decisions")
    r.add_argument("--workers", type=int, default=None,
                   help="worker processes over (suite, seed) units (default: min(2, CPUs))")
    r.add_argument("--threads", type=int, default=None,
                   help="threads per evaluation phase (default: 8 for openai, 1 for scripted)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.set_defaults(func=_countermem_run)

    rp = cms.add_parser("report", help="print the tables of a run and draw its figures (PNG)")
    rp.add_argument("dir", help="a run directory (with results.json)")
    rp.add_argument("--out", default=None, help="figure directory (default DIR/figures)")
    rp.set_defaults(func=_countermem_report)

    t = cms.add_parser("table", help="build a counterfactual decision table for selector training")
    t.add_argument("--suite", default="sql", help="sql | pybugs | sat (default: sql)")
    t.add_argument("--out", required=True, help="output directory (resumes a build already there)")
    t.add_argument("--seed", type=int, default=0, help="backbone / construction seed (default 0)")
    t.add_argument("--samples", type=int, default=4, help="independent draft samples per task (default 4)")
    t.add_argument("--config", default=None, help="a CounterMemConfig TOML file")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    t.set_defaults(func=_countermem_table)

    ts = cms.add_parser("train-selectors", help="train many selectors at once on a decision table")
    ts.add_argument("--table", required=True, help="directory of a decision table")
    ts.add_argument("--seeds", default="0-4", help="seeds, e.g. 0-4 or 0,3,7 (default 0-4)")
    ts.add_argument("--grid", nargs="*", default=None,
                    help="hyperparameter grid, e.g. lr=1e-3,3e-4 gamma=0.9,0.95 (cartesian product)")
    ts.add_argument("--decisions", type=int, default=None, help="training decisions (default 2000, Table 3)")
    ts.add_argument("--out", default=None, help="results JSON (default TABLE/selectors.json)")
    ts.set_defaults(func=_countermem_train_selectors)

    ap = sub.add_parser("antipersist", help="Anti-Persistence: on-demand guidance from trajectories")
    aps = ap.add_subparsers(dest="command", required=True)
    ar = aps.add_parser("run", help="the iteration protocol with every row (held-out success by iteration)")
    ar.add_argument("--suite", default="all", help="sql | pybugs | sat | all (default: all)")
    ar.add_argument("--out", required=True, help="output directory")
    ar.add_argument("--rows", nargs="+", default=None, help="rows to run (default: all)")
    ar.add_argument("--backbone", choices=("scripted", "openai"), default="scripted",
                    help="scripted (seeded simulator, default) or openai (any OpenAI-compatible server; "
                         "--base-url/--model or CFJAX_LLM_BASE_URL and CFJAX_LLM_MODEL)")
    ar.add_argument("--base-url", default=None, help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    ar.add_argument("--model", default=None, help="model name the server expects")
    ar.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: 42 43 44)")
    ar.add_argument("--config", default=None, help="an APConfig TOML file (see DIR/config.toml of a run)")
    ar.add_argument("--iterations", type=int, default=None, help="iterations K (default 10)")
    ar.add_argument("--tasks", "--tasks-per-iteration", dest="tasks", type=int, default=None,
                    help="training tasks per iteration (default 50)")
    ar.add_argument("--max-tasks", type=int, default=None,
                    help="held-out tasks per iteration, spread over the split (default: all)")
    ar.add_argument("--workers", type=int, default=None,
                    help="worker processes over (suite, row, seed) jobs (default: min(2, CPUs))")
    ar.add_argument("--quick", action="store_true",
                    help=f"{AP_QUICK['iterations']} iterations × {AP_QUICK['tasks_per_iteration']} tasks, "
                         f"{AP_QUICK['max_eval_tasks']} held-out tasks, seed 42 (smoke run)")
    ar.set_defaults(func=_antipersist_run)
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as e:
        print(f"cfjax: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

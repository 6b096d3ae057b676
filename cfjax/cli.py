"""The ``cfjax`` command: parse the arguments, build the config, call :mod:`cfjax.experiments`.

The config of a run is ``--config FILE`` (TOML, checked key by key; see
:mod:`cfjax.config`) or the papers' defaults, then ``--quick``
(:data:`cfjax.config.QUICK` / :data:`cfjax.config.AP_QUICK`), then the flag
overrides (``--seeds``, ``--decisions``, …). A bad config file or value exits
with status 2 and one line ``cfjax: <message>`` on stderr.

    cfjax countermem run --suite all --out runs/countermem    # the main job (scripted backbone, seeds 0 1 2)
    cfjax countermem run --suite sql --out runs/x --backbone openai   # a real LLM (CFJAX_LLM_BASE_URL, CFJAX_LLM_MODEL)
    cfjax sweep --method countermem --out runs/sweep            # the pre-registered competence sweep
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

__all__ = ["main"]


def _log(s: str) -> None:
    print(s, flush=True)


def _countermem_config(args: argparse.Namespace):
    """``--config`` (or the defaults), then ``--quick``, then the flag overrides."""
    from cfjax.config import CounterMemConfig, load_toml, quick

    cfg = load_toml(CounterMemConfig, args.config) if args.config else CounterMemConfig()
    if getattr(args, "quick", False):
        cfg = quick(cfg)
    if getattr(args, "seeds", None) is not None:
        cfg = dataclasses.replace(cfg, seeds=tuple(args.seeds))
    if getattr(args, "split_seeds", None) is not None:
        cfg = dataclasses.replace(cfg, split_seeds=tuple(args.split_seeds))
    if getattr(args, "selector_seeds", None) is not None:
        cfg = dataclasses.replace(cfg, selector_seeds=tuple(args.selector_seeds))
    if getattr(args, "decisions", None) is not None:
        cfg = dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, total_decisions=args.decisions))
    return cfg


def _countermem_run(args: argparse.Namespace) -> int:
    from cfjax.config import QUICK
    from cfjax.experiments.countermem import backbone_spec, resolve_suites, run_main

    suites = resolve_suites(args.suite)
    cfg = _countermem_config(args)
    max_tasks = (args.max_tasks or QUICK.max_tasks) if args.quick else args.max_tasks
    run_main(cfg, suites=suites, rows=args.rows, out=args.out, backbone=backbone_spec(args.backbone),
             workers=args.workers, threads=args.threads, max_tasks=max_tasks, quick=args.quick,
             progress=not args.no_progress, log=_log)
    return 0


def _countermem_report(args: argparse.Namespace) -> int:
    from cfjax.experiments.countermem import report_main

    report_main(args.dir, out=args.out, log=_log)
    return 0


def _countermem_table(args: argparse.Namespace) -> int:
    from cfjax.config import CounterMemConfig, load_toml
    from cfjax.experiments.selectors import table_main

    cfg = load_toml(CounterMemConfig, args.config) if args.config else CounterMemConfig()
    table_main(cfg, suite=args.suite, out=args.out, seed=args.seed, samples=args.samples,
               progress=not args.no_progress, log=_log)
    return 0


def _countermem_train_selectors(args: argparse.Namespace) -> int:
    from cfjax.experiments.selectors import train_selectors_main

    train_selectors_main(args.table, seeds=args.seeds, grid=args.grid or [], decisions=args.decisions, out=args.out,
                         n_boot=args.n_boot, log=_log)
    return 0


def _antipersist_config(args: argparse.Namespace):
    """``--config`` (or the defaults), then ``--quick``, then the flag overrides."""
    from cfjax.config import APConfig, load_toml, quick

    cfg = load_toml(APConfig, args.config) if args.config else APConfig()
    if args.quick:
        cfg = quick(cfg)
    changes: dict = {}
    if args.seeds is not None:
        changes["seeds"] = tuple(args.seeds)
    if getattr(args, "split_seeds", None) is not None:
        changes["split_seeds"] = tuple(args.split_seeds)
    if args.iterations is not None:
        changes["iterations"] = args.iterations
    if args.tasks is not None:
        changes["tasks_per_iteration"] = args.tasks
    if args.max_tasks is not None:
        changes["max_eval_tasks"] = args.max_tasks
    return dataclasses.replace(cfg, **changes)


def _antipersist_run(args: argparse.Namespace) -> int:
    from cfjax.experiments.antipersist import run_main
    from cfjax.experiments.countermem import backbone_spec, resolve_suites

    suites = resolve_suites(args.suite)
    cfg = _antipersist_config(args)
    spec = backbone_spec(args.backbone, base_url=args.base_url, model=args.model)
    run_main(cfg, suites=suites, rows=args.rows, out=args.out, backbone=spec, workers=args.workers, quick=args.quick,
             log=_log)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from cfjax.experiments.sweep import DEFAULT_GRID, run_sweep

    run_sweep(args.method, grid=args.grid or DEFAULT_GRID, out=args.out, quick=args.quick, workers=args.workers,
              log=_log)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from cfjax.config import AP_QUICK, QUICK

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
    r.add_argument("--seeds", type=int, nargs="+", default=None, help="backbone seeds (default: 0 1 2)")
    r.add_argument("--split-seeds", type=int, nargs="+", default=None,
                   help="split seeds, one twin-free split each (default: 12345 1 2)")
    r.add_argument("--selector-seeds", type=int, nargs="+", default=None,
                   help="selector seeds, cycled over a suite's units (default: 0 1 2 3 4, Table 3)")
    r.add_argument("--config", default=None, help="a CounterMemConfig TOML file (see DIR/config.toml of a run)")
    r.add_argument("--decisions", type=int, default=None, help="selector training decisions (default 2000, Table 3)")
    r.add_argument("--max-tasks", type=int, default=None, help="cap every split (smoke tests)")
    r.add_argument("--quick", action="store_true",
                   help=f"seed {' '.join(map(str, QUICK.seeds))}, split seed "
                        f"{' '.join(map(str, QUICK.split_seeds))}, {QUICK.max_tasks} tasks per split, "
                        f"{QUICK.decisions} selector decisions")
    r.add_argument("--workers", type=int, default=None,
                   help="worker processes over (suite, split, seed) units (default: min(2, CPUs))")
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
    ts.add_argument("--n-boot", type=int, default=2000,
                    help="bootstrap resamples for the 95%% intervals against skip / top-1 / oracle (default 2000)")
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
    ar.add_argument("--seeds", type=int, nargs="+", default=None, help="backbone seeds (default: 42 43 44)")
    ar.add_argument("--split-seeds", type=int, nargs="+", default=None,
                    help="build/train/eval split seeds, each a bootstrap cluster (default: 12345 1 2)")
    ar.add_argument("--config", default=None, help="an APConfig TOML file (see DIR/config.toml of a run)")
    ar.add_argument("--iterations", type=int, default=None, help="iterations K (default 10)")
    ar.add_argument("--tasks", "--tasks-per-iteration", dest="tasks", type=int, default=None,
                    help="training tasks per iteration (default 50)")
    ar.add_argument("--max-tasks", type=int, default=None,
                    help="held-out tasks per iteration, spread over the split (default: all)")
    ar.add_argument("--workers", type=int, default=None,
                    help="worker processes over (suite, split, row, seed) jobs (default: min(2, CPUs))")
    ar.add_argument("--quick", action="store_true",
                    help=f"{AP_QUICK.iterations} iterations × {AP_QUICK.tasks_per_iteration} tasks, "
                         f"{AP_QUICK.max_eval_tasks} held-out tasks, seed {' '.join(map(str, AP_QUICK.seeds))} "
                         "(smoke run)")
    ar.set_defaults(func=_antipersist_run)

    sw = sub.add_parser("sweep", help="the pre-registered sensitivity sweep over the simulator's competence")
    sw.add_argument("--method", choices=("countermem", "antipersist"), required=True)
    sw.add_argument("--grid", default=None, help="grid TOML file (default: the pre-registered "
                                                 "cfjax/experiments/sweep_grid.toml)")
    sw.add_argument("--out", required=True, help="output directory (sweep.json, sweep.txt, sweep_<row>.png)")
    sw.add_argument("--quick", action="store_true", help="the grid file's [<method>.quick] settings (minutes)")
    sw.add_argument("--workers", type=int, default=None, help="worker processes (default: min(2, CPUs))")
    sw.set_defaults(func=_sweep)
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    from cfjax.config import ConfigError

    try:
        return int(args.func(args) or 0)
    except ConfigError as e:  # a bad --config file, value or suite: one line, no traceback
        print(f"cfjax: {e}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as e:
        print(f"cfjax: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

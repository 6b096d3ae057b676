"""The ``cfjax`` command.

    cfjax countermem run --suite sql --out runs/sql           # the main job (scripted backbone, seeds 0 1 2)
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
        from cfjax.countermem.pipeline import _null_progress

        return _null_progress
    from tqdm.auto import tqdm

    def make(desc: str, total: int):
        return tqdm(total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True,
                    mininterval=0.5)

    return make


def _countermem_run(args: argparse.Namespace) -> int:
    from cfjax.config import CounterMemConfig, load_toml
    from cfjax.countermem.pipeline import run
    from cfjax.suites.sql import SQLSuite

    if args.suite != "sql":
        print(f"cfjax: unknown suite {args.suite!r} (available: sql)", file=sys.stderr)
        return 2
    cfg = load_toml(CounterMemConfig, args.config) if args.config else CounterMemConfig()
    if args.seeds is not None:
        cfg = dataclasses.replace(cfg, seeds=tuple(args.seeds))
    if args.decisions is not None:
        cfg = dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, total_decisions=args.decisions))
    out = Path(args.out)
    suite = SQLSuite.build(out / "databases")
    splits = suite.splits(seed=cfg.split_seed, n_val=cfg.n_val)
    if args.max_tasks:
        from cfjax.suites.base import Splits

        m = args.max_tasks
        splits = Splits(splits.build[:m], splits.train[:m], splits.val[: max(1, m // 4)], splits.eval[:m])
    world = suite.world(timeout_s=cfg.sql_timeout_s)
    if args.backbone == "scripted":
        from cfjax.llm.scripted import SCRIPTED_LABEL, ScriptedSQLBackbone

        def make_backbone(seed: int):
            return ScriptedSQLBackbone(suite.specs, dataclasses.replace(cfg.scripted, seed=seed))

        label = SCRIPTED_LABEL
    else:
        from cfjax.llm.openai_client import OpenAIBackbone, OpenAIConfig

        oc = OpenAIConfig.from_env()

        def make_backbone(seed: int):
            return OpenAIBackbone(dataclasses.replace(oc, seed=seed))

        label = f"LLM {oc.model} at {oc.base_url}"
    print(f"cfjax countermem run: suite=sql backbone={label} seeds={list(cfg.seeds)} "
          f"splits build={len(splits.build)} train={len(splits.train)} val={len(splits.val)} "
          f"eval={len(splits.eval)} → {out}", flush=True)
    run(splits, make_backbone=make_backbone, backbone_label=label, world=world, config=cfg, suite="sql",
        out_dir=out, schemas=suite.specs, progress=_progress_factory(not args.no_progress),
        log=lambda s: print(s, flush=True))
    print(f"wrote {out / 'results.json'}, per-seed stores and selector checkpoints under {out}/seed_*/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cfjax", description="cfjax: a JAX learning core for agent memory")
    sub = p.add_subparsers(dest="method", required=True)
    cm = sub.add_parser("countermem", help="CounterMem: verified counterfactual memory")
    cms = cm.add_subparsers(dest="command", required=True)
    r = cms.add_parser("run", help="build memory, train the selector, evaluate (Algorithm 1)")
    r.add_argument("--suite", default="sql", help="task suite (default: sql)")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--backbone", choices=("scripted", "openai"), default="scripted",
                   help="scripted (seeded simulator, default) or openai (any OpenAI-compatible server; "
                        "set CFJAX_LLM_BASE_URL and CFJAX_LLM_MODEL)")
    r.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: 0 1 2)")
    r.add_argument("--config", default=None, help="a CounterMemConfig TOML file (see DIR/config.toml of a run)")
    r.add_argument("--decisions", type=int, default=None, help="selector training decisions (default 2000, Table 3)")
    r.add_argument("--max-tasks", type=int, default=None, help="cap every split (smoke tests)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.set_defaults(func=_countermem_run)
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

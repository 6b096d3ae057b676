"""Entry points of ``cfjax countermem table`` and ``cfjax countermem train-selectors``.

A counterfactual decision table (:mod:`cfjax.countermem.table`) is built once
with the scripted backbone; many selectors (a hyperparameter grid × seeds) are
then trained on it at once (:func:`cfjax.countermem.selectors.train_selectors`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cfjax.config import CounterMemConfig
from cfjax.countermem.agent import Agent
from cfjax.countermem.pipeline import construct
from cfjax.countermem.store import MemoryStore
from cfjax.experiments.countermem import progress_bars, suite_world_kwargs
from cfjax.kernels import dqn

__all__ = ["table_main", "train_selectors_main"]


def table_main(cfg: CounterMemConfig, *, suite: str, out: str | Path, seed: int = 0, samples: int = 4,
               progress: bool = True, log: Callable[[str], None] = print):
    """``cfjax countermem table``: a counterfactual decision table with the scripted backbone.

    Builds (or reuses, when ``out/store.json`` exists) the frozen store, then the table
    ``out/table.npz``; returns its metadata.
    """
    from cfjax.countermem.table import build_table
    from cfjax.domains import build_suite
    from cfjax.llm.scripted import SCRIPTED_LABEL, ScriptedBackbone

    out = Path(out)
    st = build_suite(suite, out / "suites" / suite)
    splits = st.splits(seed=cfg.split_seed, n_val=cfg.n_val)
    backbone = ScriptedBackbone(st.scripted_domain(), dataclasses.replace(cfg.scripted, seed=seed))
    bars = progress_bars(progress)
    store_path = out / "store.json"
    if store_path.exists():
        store = MemoryStore.load(store_path, st.edits)
        log(f"reusing the frozen store {store_path} ({len(store)} records)")
    else:
        store = MemoryStore(cfg.store, cfg.retrieval, edits=st.edits)
    agent = Agent(backbone, st.world(**suite_world_kwargs(st, cfg)), cfg, store=store, envs=dict(st.envs()),
                  edits=st.edits)
    if not store.frozen:
        construct(agent, splits.build, seed=seed, progress=bars)
        store.save(store_path)
    table, meta = build_table(agent, splits, out, samples=samples, seed=seed, suite=suite, progress=bars)
    log(f"decision table ({SCRIPTED_LABEL}): {meta.rows} rows; roots train={meta.roots['train']} "
        f"val={meta.roots['val']} eval={meta.roots['eval']}; sha256 {meta.hash[:16]}… → {out / 'table.npz'}")
    return meta


def train_selectors_main(table: str | Path, *, seeds: str = "0-4", grid: Sequence[str] = (),
                         decisions: int | None = None, cfg: dqn.DQNConfig | None = None,
                         out: str | Path | None = None, log: Callable[[str], None] = print) -> dict:
    """``cfjax countermem train-selectors``: a grid × seeds of selectors trained at once on a table.

    ``seeds`` like ``0-4`` or ``0,3,7``; ``grid`` like ``["lr=1e-3,3e-4", "gamma=0.9,0.95"]``
    (cartesian product). Writes and returns the JSON (default ``TABLE/selectors.json``).
    """
    import json

    from cfjax.countermem.selectors import parse_grid, parse_seeds, train_selectors
    from cfjax.countermem.table import load_table
    from cfjax.infra.io import atomic_write_text

    tab, meta = load_table(table)
    cfg = cfg or dqn.DQNConfig()
    if decisions is not None:
        cfg = dataclasses.replace(cfg, total_decisions=decisions)
    seed_list = parse_seeds(seeds)
    points = parse_grid(list(grid))
    t0 = time.perf_counter()
    res = train_selectors(tab, cfg, seeds=seed_list, grid=points, max_depth=meta.max_depth)
    secs = time.perf_counter() - t0
    n = len(points) * len(seed_list)
    log(f"trained {n} selectors ({len(points)} grid point(s) × {len(seed_list)} seed(s), {cfg.total_decisions} "
        f"decisions each) on table {meta.hash[:12]}… ({meta.backbone}) in {secs:.1f}s on {res.devices} device(s)")
    log(f"{'grid point':<28}{'seed':>6}{'val return':>12}{'best@':>7}{'held-out return':>17}{'held-out solved':>17}")
    for g, point in enumerate(points):
        name = ",".join(f"{k}={v:g}" for k, v in point.items()) or "(Table 3 defaults)"
        for s, seed in enumerate(seed_list):
            log(f"{name:<28}{seed:>6}{res.val_return[g, s]:>12.4f}{int(res.best_decision[g, s]):>7}"
                f"{res.eval_return[g, s]:>17.4f}{100 * res.eval_solved[g, s]:>16.1f}%")
        log(f"{name:<28}{'mean':>6}{res.val_return[g].mean():>12.4f}{'':>7}{res.eval_return[g].mean():>17.4f}"
            f"{100 * res.eval_solved[g].mean():>16.1f}%")
    dest = Path(out) if out else Path(table) / "selectors.json"
    payload = {
        "table_hash": meta.hash, "backbone": meta.backbone, "seeds": list(seed_list), "grid": points,
        "decisions": cfg.total_decisions, "seconds": secs,
        "val_return": res.val_return.tolist(), "best_decision": res.best_decision.tolist(),
        "eval_return": res.eval_return.tolist(), "eval_solved": res.eval_solved.tolist(),
        "val_curve": np.where(np.isnan(res.val_curve), None, res.val_curve).tolist(),
    }
    atomic_write_text(dest, json.dumps(payload, indent=1))
    log(f"wrote {dest}")
    return payload

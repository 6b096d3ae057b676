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
from cfjax.countermem.store import InvalidStoreError, MemoryStore
from cfjax.experiments.countermem.runner import progress_bars, suite_world_kwargs
from cfjax.kernels import dqn

__all__ = ["table_main", "train_selectors_main", "table_outputs"]


def table_outputs() -> list[str]:
    """What ``cfjax countermem table --force`` removes from its ``--out`` directory (globs relative to
    it): the store, the build settings, the part files, the table, the ``selectors.json`` that
    ``train-selectors`` writes there by default (it describes the replaced table) and the built
    suites; other files are kept."""
    from cfjax.domains import SUITES

    return (["store.json", "build.json", "parts/" + "[0-9]" * 6 + ".npz", "table.npz", "table.json",
             "selectors.json"] + [f"suites/{n}" for n in SUITES])


def table_main(cfg: CounterMemConfig, *, suite: str, out: str | Path, seed: int = 0, samples: int = 4,
               progress: bool = True, log: Callable[[str], None] = print, existing: str = "refuse",
               executor="local", threads: int | None = None):
    """``cfjax countermem table``: a counterfactual decision table with the scripted backbone.

    The table's parts are built on ``threads`` threads (default: the backbone's ``max_inflight``),
    or as Ray tasks with ``executor`` a :class:`~cfjax.infra.executors.RayExecutor` (``"ray"``);
    the table is identical either way.

    Builds (or, when resuming, reuses ``out/store.json``) the frozen store, then the table
    ``out/table.npz``; returns its metadata.

    ``existing`` says what to do when ``out`` is a non-empty directory: ``"refuse"`` (default)
    raises :class:`cfjax.infra.io.OutputExistsError`; ``"resume"`` continues the build there
    (its store, settings and finished parts are checked and reused; other settings are refused);
    ``"force"`` first removes what a build writes there (:func:`table_outputs`), keeping other
    files. Files already there are checked before anything is written.
    """
    from cfjax.config import ConfigError
    from cfjax.countermem.table import build_table, read_json_file
    from cfjax.domains import SUITES, build_suite, is_registered
    from cfjax.infra.io import prepare_output_dir
    from cfjax.llm.scripted import SCRIPTED_LABEL, ScriptedBackbone

    if suite not in SUITES and not is_registered(suite):
        raise ConfigError(f"unknown suite {suite!r} (available: {', '.join(SUITES)})")
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=table_outputs(), resumable=True,
                       command="cfjax countermem table", resume_hint="continue the build there")
    store_path = out / "store.json"
    payload = MemoryStore.read(store_path) if store_path.exists() else None  # checked before writing anything
    if (out / "build.json").exists():
        read_json_file(out / "build.json")
    st = build_suite(suite, out / "suites" / suite)
    splits = st.splits(seed=cfg.split_seed, n_val=cfg.n_val)
    backbone = ScriptedBackbone(st.scripted_domain(), dataclasses.replace(cfg.scripted, seed=seed))
    bars = progress_bars(progress)
    if payload is not None:
        try:
            store = MemoryStore.from_payload(payload, st.edits)
        except InvalidStoreError as e:  # saved for another suite's edit model
            raise InvalidStoreError(f"{store_path}: {e}") from None
        log(f"reusing the frozen store {store_path} ({len(store)} records)")
    else:
        store = MemoryStore(cfg.store, cfg.retrieval, edits=st.edits)
    agent = Agent(backbone, st.world(**suite_world_kwargs(st, cfg)), cfg, store=store, envs=dict(st.envs()),
                  edits=st.edits)
    if not store.frozen:
        construct(agent, splits.build, seed=seed, progress=bars)
        store.save(store_path)
    from cfjax.infra.executors import is_local, resolve_executor

    ex = resolve_executor(executor)
    make_parts = None
    if not is_local(ex):
        from cfjax.experiments.countermem.table_jobs import ray_table_parts

        make_parts = ray_table_parts(ex, suite=suite, root=out / "suites" / suite, config=cfg, seed=seed,
                                     splits=splits, samples=samples, store_payload=store.to_payload(), log=log)
    table, meta = build_table(agent, splits, out, samples=samples, seed=seed, suite=suite, progress=bars,
                              threads=threads, make_parts=make_parts)
    log(f"decision table ({SCRIPTED_LABEL}): {meta.rows} rows; roots train={meta.roots['train']} "
        f"val={meta.roots['val']} eval={meta.roots['eval']}; observations {', '.join(meta.observations)}; "
        f"sha256 {meta.hash[:16]}… → {out / 'table.npz'}")
    return meta


def train_selectors_main(table: str | Path, *, seeds: str = "0-4", grid: Sequence[str] = (),
                         decisions: int | None = None, cfg: dqn.DQNConfig | None = None,
                         out: str | Path | None = None, n_boot: int = 2000, log: Callable[[str], None] = print,
                         existing: str = "refuse", coordinator: str | None = None,
                         num_processes: int | None = None, process_id: int | None = None,
                         observation: str = "both") -> dict:
    """``cfjax countermem train-selectors``: a grid × seeds of selectors trained at once on a table.

    ``seeds`` like ``0-4`` or ``0,3,7``; ``grid`` like ``["lr=1e-3,3e-4", "gamma=0.9,0.95"]``
    (cartesian product). Every selector (kept checkpoint and final parameters) is reported next to
    skip only, always top-1 and the per-root oracle on the same held-out roots, with paired
    task-bootstrap 95% intervals (``n_boot`` resamples) and the difference learned − top-1
    (:func:`cfjax.countermem.selectors.compare_with_fixed_policies`).
    Writes and returns the JSON (default ``TABLE/selectors.json``).

    **Observation layouts.** A table stores the selector observation of each layout
    (:mod:`cfjax.countermem.table`); ``observation`` is ``"paper"``, ``"legacy"`` or ``"both"``
    (default: every layout the table stores — one for a table file from before the layouts were
    recorded). The grid × seeds is trained once per layout, on the same roots, with the same keys
    and bootstrap resamples; the report is printed per layout, then one summary line per layout
    (and grid point): learned − top-1 and learned − skip (kept checkpoint, mean over seeds). The JSON
    holds every layout under ``"by_observation"``; its top-level result keys (``val_return`` …
    ``comparison``, ``seconds``) are those of ``"observation"``: ``"paper"`` when trained, else the
    one layout trained. A layout the table does not hold is a :class:`cfjax.config.ConfigError`
    naming the table and the layouts it holds.

    ``existing`` for an output file that already exists (checked first): ``"refuse"`` (default)
    raises :class:`cfjax.infra.io.OutputExistsError`, ``"force"`` replaces it (atomically, at the
    end), ``"resume"`` is refused (training is not resumed from a results file).

    **Several processes** (one machine or many; :mod:`cfjax.infra.distributed`): ``coordinator``
    (``HOST:PORT`` of process 0), ``num_processes`` and ``process_id``, or else the environment
    variables ``CFJAX_COORDINATOR``, ``CFJAX_NUM_PROCESSES`` and ``CFJAX_PROCESS_ID``. Every process
    runs this function with the same table, seeds, grid and config; the selectors are split over the
    processes and gathered back (:func:`cfjax.countermem.selectors.train_selectors`). Process 0 checks
    and writes the output file, prints the full report and returns the full payload; the others
    write nothing, print one line and return the payload without ``"comparison"``. Nothing given:
    one process, as before, with the same numbers (within 1e-6).
    """
    import json

    from cfjax.countermem.selectors import (compare_with_fixed_policies, parse_grid, parse_seeds,
                                            train_selectors)
    from cfjax.countermem.table import load_tables, missing_observation_message
    from cfjax.infra.distributed import init_processes, process_spec
    from cfjax.infra.io import atomic_write_text, prepare_output_file

    from cfjax.config import ConfigError

    if observation not in ("paper", "legacy", "both"):
        raise ConfigError(f"--observation must be paper, legacy or both, got {observation!r}")
    spec = process_spec(coordinator, num_processes, process_id)  # checked before anything else; no JAX yet
    leader = spec is None or spec.process_id == 0  # (the output is written by process 0 only)
    dest = Path(out) if out else Path(table) / "selectors.json"
    if leader and (out is not None or Path(table).is_dir()):
        prepare_output_file(dest, existing=existing, command="cfjax countermem train-selectors")
    cfg = cfg or dqn.DQNConfig()
    if decisions is not None:
        cfg = dataclasses.replace(cfg, total_decisions=decisions)
    if cfg.total_decisions % cfg.checkpoint_every:  # the table trainer's rule, checked before any work
        raise ConfigError(f"decisions ({cfg.total_decisions}) must be a multiple of checkpoint_every "
                          f"({cfg.checkpoint_every}) for the table trainer")
    tables, meta = load_tables(table)
    if observation == "both":
        layouts = list(tables)
    elif observation in tables:
        layouts = [observation]
    else:
        raise ConfigError(missing_observation_message(table, list(tables), observation))
    primary = "paper" if "paper" in layouts else layouts[0]
    seed_list = parse_seeds(seeds)
    points = parse_grid(list(grid))
    info = (init_processes(spec.coordinator, spec.num_processes, spec.process_id) if spec  # before any JAX work
            else init_processes(environ={}))  # a group the caller started itself, or one process
    n = len(points) * len(seed_list)
    default = dqn.DQNConfig()
    changed = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
               if f.name != "seeds" and getattr(cfg, f.name) != getattr(default, f.name)}
    names = [",".join(f"{k}={v:g}" for k, v in point.items()) or "(Table 3 defaults)" for point in points]
    per: dict[str, dict] = {}
    processes = 1
    for layout in layouts:
        tab = tables[layout]
        t0 = time.perf_counter()
        res = train_selectors(tab, cfg, seeds=seed_list, grid=points, max_depth=meta.max_depth)
        secs = time.perf_counter() - t0
        processes = res.processes
        where = (f"on {res.devices} device(s) × {res.processes} processes" if res.processes > 1
                 else f"on {res.devices} device(s)")
        per[layout] = r = {
            "seconds": secs,
            "val_return": res.val_return.tolist(), "best_decision": res.best_decision.tolist(),
            "eval_return": res.eval_return.tolist(), "eval_solved": res.eval_solved.tolist(),
            "final_eval_return": res.final_eval_return.tolist(),
            "final_eval_solved": res.final_eval_solved.tolist(),
            "val_curve": np.where(np.isnan(res.val_curve), None, res.val_curve).tolist(),
        }
        if not info.is_leader:
            log(f"process {info.process_id}/{info.num_processes}: trained its share of {n} selectors {where} "
                f"({layout} observation) in {secs:.1f}s; process 0 reports and writes {dest}")
            continue
        log(f"== observation {layout!r}{_layout_note(layout)} ==")
        log(f"trained {n} selectors ({len(points)} grid point(s) × {len(seed_list)} seed(s), "
            f"{cfg.total_decisions} decisions each) on table {meta.hash[:12]}… ({meta.backbone}), "
            f"{layout} observation, in {secs:.1f}s {where}")
        log(f"episodes start at {'the task stream (Algorithm 1)' if cfg.root_order == 'stream' else 'uniform roots'}; "
            f"config differs from the defaults in: {', '.join(f'{k}={v!r}' for k, v in changed.items()) or 'nothing'}")
        log(f"{'grid point':<28}{'seed':>6}{'val return':>12}{'best@':>7}{'held-out return':>17}"
            f"{'held-out solved':>17}{'final return':>14}{'final solved':>14}")
        for g, name in enumerate(names):
            for s, seed in enumerate(seed_list):
                log(f"{name:<28}{seed:>6}{res.val_return[g, s]:>12.4f}{int(res.best_decision[g, s]):>7}"
                    f"{res.eval_return[g, s]:>17.4f}{100 * res.eval_solved[g, s]:>16.1f}%"
                    f"{res.final_eval_return[g, s]:>14.4f}{100 * res.final_eval_solved[g, s]:>13.1f}%")
            log(f"{name:<28}{'mean':>6}{res.val_return[g].mean():>12.4f}{'':>7}{res.eval_return[g].mean():>17.4f}"
                f"{100 * res.eval_solved[g].mean():>16.1f}%{res.final_eval_return[g].mean():>14.4f}"
                f"{100 * res.final_eval_solved[g].mean():>13.1f}%")
        comparison = compare_with_fixed_policies(tab, res, cfg, max_depth=meta.max_depth, samples=meta.samples,
                                                 n_boot=n_boot)
        for line in comparison_lines(comparison, names):
            log(line)
        r["comparison"] = comparison
    payload = {
        "table_hash": meta.hash, "backbone": meta.backbone, "seeds": list(seed_list), "grid": points,
        "root_order": cfg.root_order, "config_changes": {k: list(v) if isinstance(v, tuple) else v
                                                         for k, v in changed.items()},
        "decisions": cfg.total_decisions, "processes": processes,
        "observation": primary, "observations": layouts,
        **per[primary],
        "by_observation": per,
    }
    if not info.is_leader:
        return payload
    for line in observation_summary_lines({k: v["comparison"] for k, v in per.items()}, names):
        log(line)
    atomic_write_text(dest, json.dumps(payload, indent=1))
    log(f"wrote {dest}")
    return payload


def _layout_note(layout: str) -> str:
    from cfjax.countermem.table import UNKNOWN_OBSERVATION

    if layout == UNKNOWN_OBSERVATION:
        return " (a table file from before the layouts were recorded; its layout cannot be read from its rows)"
    return ""


def observation_summary_lines(comparisons: dict[str, dict], names: Sequence[str]) -> list[str]:
    """One line per observation layout (and grid point): the kept checkpoint's mean over seeds, learned −
    top-1 and learned − skip with their paired 95% intervals (return units)."""
    from cfjax.countermem.selectors import verdict

    if not comparisons:
        return []
    width = max(len(k) for k in comparisons)
    lines = ["observations side by side (held-out; DQN kept checkpoint, mean over seeds; return units, "
             "paired 95% intervals):"]
    for layout, c in comparisons.items():
        for name, block in zip(names, c["points"]):
            sel = next(x for x in block["selectors"] if x["params"] == "best" and x["seed"] == "mean")
            where = f" {name}" if len(names) > 1 else ""
            top1, skip = sel["minus_top1"]["return"], sel["minus_skip"]["return"]
            lines.append(f"observation {layout:<{width}}{where}: DQN − top-1 {_fmt_return(top1, True)}; "
                         f"DQN − skip {_fmt_return(skip, True)} → {verdict(top1)}")
    return lines


def _fmt_return(d: dict, signed: bool = False) -> str:
    f = "+.3f" if signed else ".3f"
    return f"{d['mean']:{f}} [{d['lo']:{f}}, {d['hi']:{f}}]"


def comparison_lines(comparison: dict, names: Sequence[str]) -> list[str]:
    """The printed held-out comparison: fixed policies and every learned selector, with intervals."""
    from cfjax.countermem.selectors import FIXED_LABELS, verdict
    from cfjax.experiments.stats import fmt_interval

    c = comparison
    lines = [f"held-out comparison on the same {c['n_roots']} roots ({c['n_tasks']} tasks × "
             f"{c['samples_per_task']} samples); 95% paired task-bootstrap intervals ({c['n_boot']} resamples); "
             f"return in Eq. 10 units, solved in %, differences in return units / pp",
             f"{'grid point':<28}{'policy':<22}{'return':>24}{'solved %':>22}{'return − top-1':>27}"
             f"{'solved − top-1 (pp)':>24}{'return − skip':>27}"]
    for name, block in zip(names, c["points"]):
        for k, d in block["fixed"].items():
            note = "   (hindsight upper bound)" if k == "oracle" else ""
            lines.append(f"{name:<28}{FIXED_LABELS[k]:<22}{_fmt_return(d['return']):>24}"
                         f"{fmt_interval(d['solved']):>22}{'':>27}{'':>24}{note}")
        for sel in block["selectors"]:
            label = f"DQN {'best ckpt' if sel['params'] == 'best' else 'final'} " \
                    f"{'seed ' + str(sel['seed']) if sel['seed'] != 'mean' else 'mean'}"
            lines.append(f"{name:<28}{label:<22}{_fmt_return(sel['return']):>24}"
                         f"{fmt_interval(sel['solved']):>22}{_fmt_return(sel['minus_top1']['return'], True):>27}"
                         f"{fmt_interval(sel['minus_top1']['solved'], signed=True):>24}"
                         f"{_fmt_return(sel['minus_skip']['return'], True):>27}")
        for sel in block["selectors"]:
            if sel["seed"] == "mean":
                lines.append(f"{name:<28}DQN {sel['params']} (mean over seeds) − top-1: "
                             f"{_fmt_return(sel['minus_top1']['return'], True)} → {verdict(sel['minus_top1']['return'])}"
                             f"; − skip: {_fmt_return(sel['minus_skip']['return'], True)}"
                             f"; oracle − DQN: {_fmt_return(sel['oracle_minus']['return'], True)}")
    return lines

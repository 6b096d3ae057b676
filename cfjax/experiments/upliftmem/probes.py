"""``cfjax upliftmem probes``: probe strategies under matched budgets (RQ4, Fig. 4; App. F).

papers/upliftmem.md §5.5, App. D.3 ("the number of newly acquired probes measures sample allocation").

Protocol, per suite and training seed: bootstrap and value-only warm-up once (the *same warm-up
checkpoint* for every strategy); the pool is then frozen (no more writing: the *same fixed store*); one
probe window is formed from every training task with its retrieval path sampled at the warm-up
checkpoint (the same window for every strategy). Each strategy — EVSI (``p ∝ exp(V/τ_evsi)``), random,
MC-STD and EIG (:mod:`cfjax.kernels.probes`) — starts from the checkpoint's parameters, optimiser state
and labels, and acquires probes incrementally up to each budget in ``budgets`` (20, 50, 80, 100, 120,
150, 200): after each increment the new paired labels are added and the scorer takes one update
(``steps_per_update`` steps; value-only, as probes carry no retrieval paths); the window is rebuilt
under the updated scorer (already executed sets leave the pool), and the checkpoint is evaluated on
the held-out tasks (beam search, one draft seed). Reported per strategy and budget: the checkpoint's success and mean reward ``R``, and the
*cumulative success* — the fraction of held-out tasks solved by at least one checkpoint up to that budget
(the warm-up checkpoint included) — with paired task-bootstrap intervals of EVSI minus each other
strategy.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import numpy as np

from cfjax.config import to_dict
from cfjax.config.uplift import UpliftConfig
from cfjax.experiments.common import write_results
from cfjax.experiments.stats import bootstrap, clusters_from_outcomes, fmt_interval, paired_difference

__all__ = ["BUDGETS", "STRATEGIES", "run_probe_strategies", "format_probes", "probes_main"]

BUDGETS = (20, 50, 80, 100, 120, 150, 200)
STRATEGIES = ("evsi", "random", "mcstd", "eig")


def _one_seed(suite, cfg: UpliftConfig, seed: int, strategies: Sequence[str], budgets: Sequence[int],
              log: Callable[[str], None]) -> dict:
    from cfjax.experiments.backbones import BackboneSpec
    from cfjax.experiments.common import quick_splits
    from cfjax.uplift import AgentExecutor, UpliftRun
    from cfjax.uplift.probing import WindowTask

    sp = suite.splits(seed=cfg.split_seed)
    if cfg.max_tasks:
        sp = quick_splits(sp, cfg.max_tasks)
    world = suite.world()
    backbone = BackboneSpec("scripted").make(suite, cfg.backbone_seed, cfg)
    executor = AgentExecutor(backbone, world, suite.edits, max_attempts=cfg.training.max_attempts)
    cfg = dataclasses.replace(cfg, training=dataclasses.replace(cfg.training, seed=seed))
    run = UpliftRun(cfg, executor, domain=getattr(suite, "base", suite.name), k_max=cfg.retrieval.k_for(sp.eval[0].domain),
                    writer_backbone=backbone)
    run.bootstrap(list(sp.build))
    run.warmup()
    run.writer = None  # the fixed store from here on
    stream = list(sp.train) + list(sp.val)
    cands = [run.retriever.candidates(t) for t in stream]
    paths = run.retriever.sample(cands, jax.random.PRNGKey(seed + 7))
    base_window = []
    for i, (t, c, (members, actions, _)) in enumerate(zip(stream, cands, paths)):
        s = 500_000 + i
        ref_id, _ = run.labeler.reference(t, seed=s)
        ordered = [c.memories[a] for a in actions if 0 <= a < len(c.memories)]
        base_window.append(WindowTask(c, ordered, s, ref_id, set()))
    snap = (run.trainer.params, run.trainer.opt_state, copy.deepcopy(run.labels), run.rng.bit_generator.state)
    evals = list(sp.eval)
    out: dict = {"task_ids": [t.task_id for t in evals], "strategies": {}}
    for strat in strategies:
        t0 = time.perf_counter()
        run.trainer.params, run.trainer.opt_state = snap[0], snap[1]
        run.labels = copy.deepcopy(snap[2])
        run.rng.bit_generator.state = snap[3]
        run.key = jax.random.PRNGKey(seed * 31 + 1)
        window = [dataclasses.replace(w, executed=set()) for w in base_window]
        res0 = run.evaluate(evals, repeats=1, rows=("upliftmem",))
        solved = [res0.outcomes["upliftmem"][0]]
        rewards = [float(np.mean(res0.rewards["upliftmem"][0]))]
        acquired, curve = 0, []
        for b in budgets:
            labels = run.probe_window(window, budget=b - acquired, strategy=strat)  # labels + one update
            acquired += len(labels)
            res = run.evaluate(evals, repeats=1, rows=("upliftmem",))
            solved.append(res.outcomes["upliftmem"][0])
            rewards.append(float(np.mean(res.rewards["upliftmem"][0])))
            cum = np.max(np.asarray(solved), axis=0)
            curve.append({"budget": b, "acquired": acquired, "success": 100.0 * float(np.mean(solved[-1])),
                          "cumulative": 100.0 * float(np.mean(cum)), "mean_reward": rewards[-1],
                          "cumulative_per_task": cum.astype(int).tolist()})
        out["strategies"][strat] = {"curve": curve, "warmup_success": 100.0 * float(np.mean(solved[0])),
                                    "seconds": round(time.perf_counter() - t0, 1)}
        log(f"  {suite.name} seed {seed} {strat}: cumulative " + " ".join(
            f"{c['budget']}:{c['cumulative']:.1f}" for c in curve) + f" ({out['strategies'][strat]['seconds']}s)")
    close = getattr(world, "close", None)
    if close is not None:
        close()
    return out


def run_probe_strategies(out_dir: str | Path, *, suites: Sequence[str], cfg: UpliftConfig = UpliftConfig(),
                         seeds: Sequence[int] = (0,), strategies: Sequence[str] = STRATEGIES,
                         budgets: Sequence[int] = BUDGETS, log: Callable[[str], None] = print) -> dict:
    """Every suite × seed × strategy (module docstring); writes ``probes.json``, ``probes.txt``, ``probes.png``."""
    from cfjax.domains import build_suite

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    per: dict = {}
    for s in suites:
        suite = build_suite(s, out / "suites" / s)
        per[s] = {str(seed): _one_seed(suite, cfg, seed, strategies, budgets, log) for seed in seeds}
    summary: dict = {}
    for k, b in enumerate(budgets):
        outcomes = {s: {seed: {"task_ids": r["task_ids"], "seeds": [0], "rows": {
            st: [r["strategies"][st]["curve"][k]["cumulative_per_task"]] for st in strategies}}
            for seed, r in per[s].items()} for s in suites}
        clusters = clusters_from_outcomes(outcomes)
        row = {"budget": b}
        for st in strategies:
            row[st] = {"cumulative": bootstrap(clusters, st).as_dict(),
                       "mean_reward": float(np.mean([per[s][sd]["strategies"][st]["curve"][k]["mean_reward"]
                                                     for s in suites for sd in per[s]])),
                       "success": float(np.mean([per[s][sd]["strategies"][st]["curve"][k]["success"]
                                                 for s in suites for sd in per[s]]))}
            if st != "evsi" and "evsi" in strategies:
                row[st]["evsi_minus"] = paired_difference(clusters, "evsi", st).as_dict()
        summary[str(b)] = row
    payload = {"suites": list(suites), "seeds": list(seeds), "budgets": list(budgets), "strategies": list(strategies),
               "per_suite": per, "summary": summary, "backbone": "scripted backbone (seeded simulator, not an LLM)",
               "config": to_dict(cfg)}
    text = format_probes(payload)
    write_results(out, payload, text=text, name="probes.json", report="probes.txt")
    _plot(payload, out / "probes.png")
    log(text)
    return payload


def format_probes(payload: dict) -> str:
    st = payload["strategies"]
    lines = [f"Probe strategies at matched budgets — {', '.join(payload['suites'])}, seeds {payload['seeds']} "
             f"({payload['backbone']}); cumulative held-out success % [95% CI]; EVSI − other, paired"]
    lines.append(f"{'budget':>6} " + " ".join(f"{s:>20}" for s in st) + "  " +
                 " ".join(f"{'evsi-' + s:>22}" for s in st if s != "evsi"))
    for b, row in payload["summary"].items():
        lines.append(f"{b:>6} " + " ".join(f"{fmt_interval(row[s]['cumulative']):>20}" for s in st) + "  " +
                     " ".join(f"{fmt_interval(row[s].get('evsi_minus'), signed=True):>22}" for s in st if s != "evsi"))
    lines.append("mean reward of the current checkpoint: " + "; ".join(
        f"{b}: " + ", ".join(f"{s} {row[s]['mean_reward']:.3f}" for s in st) for b, row in payload["summary"].items()))
    return "\n".join(lines)


def _plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    budgets = payload["budgets"]
    for s in payload["strategies"]:
        c = [payload["summary"][str(b)][s]["cumulative"] for b in budgets]
        m = np.array([x["mean"] for x in c])
        a1.plot(budgets, m, marker="o", label=s)
        a1.fill_between(budgets, [x["lo"] for x in c], [x["hi"] for x in c], alpha=0.15)
        a2.plot(budgets, [payload["summary"][str(b)][s]["mean_reward"] for b in budgets], marker="o", label=s)
    a1.set_xlabel("probes acquired (budget)")
    a1.set_ylabel("cumulative held-out success % (95% CI)")
    a2.set_xlabel("probes acquired (budget)")
    a2.set_ylabel("mean reward R of the checkpoint")
    a1.legend()
    a1.set_title(payload["backbone"], fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def probes_main(*, suites: Sequence[str], out: str | Path, quick: bool = False, seeds: Sequence[int] = (0,),
                log: Callable[[str], None] = print, existing: str = "refuse", cfg: UpliftConfig | None = None) -> dict:
    """``cfjax upliftmem probes``. ``cfg``: the config (the CLI's, with its ``--set`` overrides);
    ``None`` = :func:`~cfjax.experiments.upliftmem.runner.quick_config` if ``quick``, else the defaults.
    ``probes.json`` records it under ``"config"``."""
    from cfjax.experiments.common import resolve_suites
    from cfjax.experiments.upliftmem.runner import quick_config
    from cfjax.infra.io import prepare_output_dir

    names = resolve_suites(suites)
    if cfg is None:
        cfg = quick_config(UpliftConfig()) if quick else UpliftConfig()
    budgets = (5, 10, 20) if quick else BUDGETS
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=["probes.json", "probes.txt", "probes.png", "suites"],
                       resumable=False, command="cfjax upliftmem probes")
    log(f"cfjax upliftmem probes: suites={names} seeds={list(seeds)} budgets={list(budgets)}"
        f"{' (quick)' if quick else ''} → {out}")
    return run_probe_strategies(out, suites=names, cfg=cfg, seeds=seeds, budgets=budgets, log=log)

"""``cfjax upliftmem run``: UpliftMem end to end on the built-in domains (Table 1 and Table 2 analogues).

papers/upliftmem.md §5.2 (RQ1), §5.4 (RQ3 ablations), App. D.1–D.5 (protocol: each configuration is
trained once and evaluated three times with the fixed checkpoint).

One *job* is one (suite, variant, training seed): the suite's split (``cfg.split_seed``), its memoised world, the
scripted backbone (or an OpenAI-compatible one) as executor and writer, and one
:class:`cfjax.uplift.UpliftRun`: bootstrap on ``T_build``, value-only warm-up, ``epochs`` passes over
``T_train ∪ T_val`` with writing and probing, evaluation on ``T_eval`` with ``eval_repeats`` draft
seeds. The ``upliftmem`` job also evaluates ``no_memory`` and ``similarity_topk`` (the same pool,
similarity recall order under the same feasibility — native retrieval); the ablation jobs
(``base``, ``warmup_only``, ``random_probing``, ``no_policy``, ``no_value``) evaluate their own
retriever. Jobs run on a small process pool (spawned workers, one compiled scorer per job).

Statistics: every success figure carries a paired task-bootstrap 95% interval
(:mod:`cfjax.experiments.stats`; the evaluation repeats are the "seeds" of the shared outcomes format,
tasks are resampled), every row its paired difference against ``no_memory``, and every ablation its
difference against ``upliftmem``. Costs per row: training executions by purpose (each counted once,
App. D.3), backbone tokens and calls, evaluator calls.

Layout of ``run_all(out, suites=...)``::

    out/config.toml                    the UpliftConfig
    out/suites/<suite>/                the built suites
    out/<suite>/results.json           rows with intervals, costs, per-task outcomes, training curves
    out/<suite>/<variant>/seed_<s>/pool.json   the frozen pool of that training run
    out/<suite>/upliftmem/seed_<s>/scorer/     the scorer checkpoint per training seed (orbax, resumable)

Training seeds (``cfg.train_seeds``, default 0 1 2; ours — the paper trains once): each row is trained
once per seed and every training run is evaluated ``eval_repeats`` times; a row's outcome matrix stacks
them (``[seeds × repeats, tasks]``), so its interval resamples tasks and averages over training runs.
    out/results.json, out/report.txt   every suite and the combined table
    out/success.png                    success per row and suite with intervals
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from cfjax.config.uplift import UpliftConfig
from cfjax.experiments.common import run_pool, write_results
from cfjax.experiments.transport import format_llm, merge_llm
from cfjax.infra.executors import Executor, is_local
from cfjax.experiments.stats import bootstrap, clusters_from_outcomes, fmt_interval, paired_difference
from cfjax.infra.io import atomic_write_json

__all__ = ["ROWS", "ABLATIONS", "REFERENCE", "METHOD", "UpliftJob", "run_job", "run_all", "run_main", "quick_config",
           "format_table", "run_outputs", "summarize_rows"]

REFERENCE = "no_memory"
METHOD = "upliftmem"
ABLATIONS = ("base", "warmup_only", "random_probing", "no_policy", "no_value")
#: every row of the end-to-end table, in print order
ROWS = (REFERENCE, "similarity_topk", METHOD) + ABLATIONS


def quick_config(cfg: UpliftConfig = UpliftConfig()) -> UpliftConfig:
    """``--quick``: a smoke run (not a paper setting): 16 tasks per split, one training seed, 1 epoch,
    1 evaluation repeat, small probe windows."""
    return replace(cfg, max_tasks=16, eval_repeats=1, train_seeds=(cfg.train_seeds[0],),
                   training=replace(cfg.training, epochs=1, warmup_steps=16, steps_per_update=4, bootstrap_sets=2),
                   probing=replace(cfg.probing, budget=20, max_pool=256, max_comparisons=256))


@dataclass(frozen=True)
class UpliftJob:
    """Everything a worker needs for one (suite, variant, training seed)."""

    suite: str
    root: str
    variant: str
    cfg: UpliftConfig  # its training.seed is the job's training seed
    out_dir: str
    backbone: object = None  # cfjax.experiments.countermem.runner.BackboneSpec (None = scripted)
    world_cache: str = ""


def peer_rows(defaults: bool = False) -> tuple[str, ...]:
    """The registered memory systems that are rows of this runner (``"upliftmem"`` in their runners:
    the Table 1 peers, :mod:`cfjax.experiments.upliftmem.peers`), in registration order; ``defaults``:
    only those the default run includes (:meth:`cfjax.memory.MemorySystemInfo.default_in`)."""
    from cfjax.registry import MEMORY_SYSTEMS

    return tuple(n for n, info in MEMORY_SYSTEMS.items()
                 if (info.default_in("upliftmem") if defaults else "upliftmem" in info.runners))


def splits_for(suite, cfg: UpliftConfig):
    from cfjax.experiments.common import quick_splits

    sp = suite.splits(seed=cfg.split_seed)
    return quick_splits(sp, cfg.max_tasks) if cfg.max_tasks else sp


def run_job(job: UpliftJob) -> dict:
    """Train one variant on one suite and evaluate it (module docstring); returns plain data."""
    from cfjax.experiments.worlds import open_world
    from cfjax.experiments.backbones import BackboneSpec
    from cfjax.uplift import TRAINING_ROWS, AgentExecutor, UpliftRun

    if job.variant not in (METHOD,) + ABLATIONS:  # a peer memory system (Table 1)
        from cfjax.experiments.upliftmem.peers import run_peer_job

        return run_peer_job(job)
    t0 = time.perf_counter()
    cfg = job.cfg
    suite, _, world = open_world(job.suite, job.root, job.world_cache)
    sp = splits_for(suite, cfg)
    spec = job.backbone or BackboneSpec("scripted")
    backbone = spec.make(suite, cfg.backbone_seed, cfg)  # reads cfg.scripted
    executor = AgentExecutor(backbone, world, suite.edits, max_attempts=cfg.training.max_attempts)
    domain = sp.eval[0].domain
    run = UpliftRun(cfg, executor, domain=getattr(suite, "base", job.suite), k_max=cfg.retrieval.k_for(domain), writer_backbone=backbone,
                    row=TRAINING_ROWS[job.variant])
    run.bootstrap(list(sp.build))
    run.warmup()
    run.train(list(sp.train) + list(sp.val))
    rows = (REFERENCE, "similarity_topk", METHOD) if job.variant == METHOD else (METHOD,)
    res = run.evaluate(list(sp.eval), rows=rows, row_name=job.variant)
    seed = cfg.training.seed
    out = Path(job.out_dir) / job.variant / f"seed_{seed}"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "pool.json", run.pool.to_json())
    if job.variant == METHOD:
        run.trainer.save(out / "scorer", {"suite": job.suite, "variant": job.variant, "train_seed": seed,
                                          "labels": len(run.labels)})
    families = [suite.answer_key(t).family for t in res.task_ids]  # analysis: per-family breakdown
    from cfjax.experiments.backbones import backbone_stats

    return {"suite": job.suite, "variant": job.variant, "train_seed": seed, "task_ids": res.task_ids,
            "families": families, "llm": backbone_stats(backbone),
            "outcomes": res.outcomes, "rewards": res.rewards, "set_sizes": res.set_sizes,
            "counts": run.counts(), "eval_counts": run.eval_counts,
            "train_log": {"updates": run.train_log.updates, "windows": run.train_log.windows,
                          "written": run.train_log.written, "admitted": run.train_log.admitted,
                          "h_effective": run.train_log.h_effective,
                          "seconds": {k: round(v, 2) for k, v in run.train_log.seconds.items()}},
            "profile": {"seconds": round(time.perf_counter() - t0, 2)}}


def _init_worker(cache_dir: str = "") -> None:  # pragma: no cover - runs in worker processes
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _compilation_cache(cache_dir)


def _compilation_cache(cache_dir: str) -> None:
    """JAX's persistent compilation cache in ``cache_dir`` (shared by the run's worker processes) when
    the machine's cache (:mod:`cfjax.infra.compile_cache`) is off: every job of a suite compiles the
    same scorer, beam and acquisition programs, so only the first compile of each is paid. The cache
    holds compiled XLA programs only, never results. Only worker processes set it (a serial run
    shares compiled programs in-process), so the calling process's JAX config is never pointed at
    the run's scratch directory. ``""``: leave the worker's inherited setting alone."""
    if cache_dir:
        import jax

        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def _run_jobs(jobs: Sequence[UpliftJob], workers: int, log: Callable[[str], None], cache_dir: str = "",
              executor: Executor = "local") -> list[dict]:
    from cfjax.domains import cost_weight  # the domain declares its relative cost (DomainInfo.cost_weights)
    from cfjax.experiments.worlds import close_worlds

    def note(d: dict) -> None:
        o = d["outcomes"][d["variant"]]
        log(f"  {d['suite']}/{d['variant']} seed {d['train_seed']}: held-out success {100 * np.mean(o):.1f}% "
            f"({d['profile']['seconds']:.0f}s, {d['counts']['total']} training executions)")

    return run_pool(run_job, jobs, workers=workers, note=note, initializer=_init_worker, initargs=(cache_dir,),
                    cost=lambda j: cost_weight(j.suite, "upliftmem") * (2.0 if j.variant == METHOD else 1.0),
                    serial_done=close_worlds, executor=executor)


def summarize_rows(outcomes: dict, rows: Sequence[str], *, method: str = METHOD, reference: str = REFERENCE,
                   n_boot: int = 2000) -> dict:
    """Success with its interval per row, the paired difference against ``reference`` and, for the
    other rows, against ``method`` (percentage points, tasks resampled)."""
    clusters = clusters_from_outcomes(outcomes)
    out = {}
    for r in rows:
        if not any(r in c.outcomes for c in clusters):
            continue
        d = {"success": bootstrap(clusters, r, n_boot=n_boot).as_dict()}
        if r != reference:
            d["vs_" + reference] = paired_difference(clusters, r, reference, n_boot=n_boot).as_dict()
        if r not in (method, reference):
            d["vs_" + method] = paired_difference(clusters, r, method, n_boot=n_boot).as_dict()
        out[r] = d
    return out


def aggregate(jobs: Sequence[dict], *, suite: str, cfg: UpliftConfig, label: str) -> dict:
    """One suite's payload: rows with intervals, costs, outcomes (the shared format), curves.

    A row's outcome matrix stacks its training seeds' evaluation repeats (seed-major)."""
    jobs = sorted(jobs, key=lambda j: (j["variant"], j["train_seed"]))
    main = next((j for j in jobs if j["variant"] == METHOD), jobs[0])
    ids = main["task_ids"]
    rows_out: dict[str, list] = {}
    rewards: dict[str, list] = {}
    sizes: dict[str, list] = {}
    counts: dict[str, list] = {}
    for j in jobs:
        if j["task_ids"] != ids:
            raise RuntimeError(f"{suite}: jobs evaluated different task lists")
        for r, v in j["outcomes"].items():
            rows_out.setdefault(r, []).extend(v)
            rewards.setdefault(r, []).extend(np.ravel(j["rewards"][r]).tolist())
            sizes.setdefault(r, []).extend(np.ravel(j["set_sizes"][r]).tolist())
            if r not in (REFERENCE, "similarity_topk"):
                counts.setdefault(r, []).append(j["counts"])
    costs: dict[str, dict] = {}
    for r in rows_out:
        if r == REFERENCE:
            train = {"total": 0}
        elif r == "similarity_topk":
            train = {"note": "the upliftmem runs' pools"}
        else:  # mean over training seeds of each count
            train = {k: float(np.mean([c[k] for c in counts[r]])) for k in counts[r][0]}
        costs[r] = {"training": train, "mean_set_size": float(np.mean(sizes[r]))}
    seeds = [f"train{j['train_seed']}/eval{cfg.eval_seed + k}" for j in jobs if j["variant"] == main["variant"]
             for k in range(cfg.eval_repeats)]
    outcomes = {suite: {str(cfg.split_seed): {"task_ids": ids, "seeds": seeds, "rows": rows_out}}}
    present = [r for r in ROWS if r in rows_out] + [r for r in rows_out if r not in ROWS]
    return {"suite": suite, "backbone": label, "rows": present, "train_seeds": sorted({j["train_seed"] for j in jobs}),
            "table": summarize_rows(outcomes, present),
            "mean_reward": {r: float(np.mean(v)) for r, v in rewards.items()}, "costs": costs, "outcomes": outcomes,
            "train_logs": {f"{j['variant']}/seed_{j['train_seed']}": j["train_log"] for j in jobs},
            "profile": {f"{j['variant']}/seed_{j['train_seed']}": j["profile"] for j in jobs},
            "families": main["families"]}


def format_table(payload: dict) -> str:
    """The suite's table: success with intervals, differences, and training executions."""
    lines = [f"UpliftMem end to end — {payload['suite']} ({payload['backbone']}); success % [95% CI], paired "
             f"differences in points; {len(payload['outcomes'][payload['suite']])} split, training seeds "
             f"{payload.get('train_seeds')}, tasks resampled",
             f"{'row':<16} {'success':>20} {'vs no_memory':>22} {'vs upliftmem':>22} {'train execs':>12} {'|S|':>5}"]
    for r in payload["rows"]:
        t = payload["table"].get(r, {})
        c = payload["costs"].get(r, {})
        execs = c.get("training", {}).get("total", "—")
        execs = f"{execs:.0f}" if isinstance(execs, float) else execs
        lines.append(f"{r:<16} {fmt_interval(t.get('success')):>20} "
                     f"{fmt_interval(t.get('vs_no_memory'), signed=True):>22} "
                     f"{fmt_interval(t.get('vs_upliftmem'), signed=True):>22} {execs!s:>12} "
                     f"{c.get('mean_set_size', 0):>5.2f}")
    return "\n".join(lines)


def _plot(per_suite: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = list(per_suite)
    fig, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 4), squeeze=False)
    for ax, s in zip(axes[0], suites):
        p = per_suite[s]
        rows = p["rows"]
        m = [p["table"][r]["success"]["mean"] for r in rows]
        lo = [p["table"][r]["success"]["mean"] - p["table"][r]["success"]["lo"] for r in rows]
        hi = [p["table"][r]["success"]["hi"] - p["table"][r]["success"]["mean"] for r in rows]
        ax.bar(range(len(rows)), m, yerr=[lo, hi], capsize=3, color=["#999"] * 2 + ["#c33"] + ["#d99"] * (len(rows) - 3))
        ax.set_xticks(range(len(rows)), rows, rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{s} (scripted backbone)" if "scripted" in p["backbone"] else s)
        ax.set_ylabel("held-out success % (95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_all(out_dir: str | Path, *, suites: Sequence[str], rows: Sequence[str] = (METHOD,) + ABLATIONS,
            cfg: UpliftConfig = UpliftConfig(), workers: int = 1, backbone=None,
            log: Callable[[str], None] = print, executor: Executor = "local") -> dict:
    """Every suite × variant; writes the results (module docstring); returns the combined payload.
    ``executor``: the local process pool, or Ray tasks (then without the shared SQLite world cache)."""
    from cfjax.config import save_toml
    from cfjax.domains import build_suite
    from cfjax.experiments.common import clear_dir
    from cfjax.experiments.backbones import BackboneSpec

    spec = backbone or BackboneSpec("scripted")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_toml(cfg, out / "config.toml")
    variants = [r for r in rows if r in (METHOD,) + ABLATIONS]
    if METHOD not in variants:
        variants = [METHOD] + variants
    variants += [r for r in rows if r in peer_rows() and r not in variants]
    roots = {}
    for s in suites:
        roots[s] = out / "suites" / s
        build_suite(s, roots[s])
    scratch = out / ".world_cache"
    clear_dir(scratch)
    scratch.mkdir()
    jobs = [UpliftJob(s, str(roots[s]), v, replace(cfg, training=replace(cfg.training, seed=seed)), str(out / s), spec,
                      str(scratch / f"{s}.sqlite") if is_local(executor) else "")
            for s in suites for v in variants for seed in cfg.train_seeds]
    # Workers inherit the machine's persistent compile cache when it is on (cfjax.infra.compile_cache.enable,
    # which the CLI calls, puts it in the environment), so a later run loads the programs this one
    # compiled; otherwise the run's own workers still share one in its scratch folder (it ends with the run).
    xla = "" if not is_local(executor) or os.environ.get("JAX_COMPILATION_CACHE_DIR") else str(scratch / "xla")
    try:
        done = _run_jobs(jobs, workers, log, xla, executor)
    finally:
        clear_dir(scratch)
    per_suite = {}
    for s in suites:
        payload = aggregate([j for j in done if j["suite"] == s], suite=s, cfg=cfg, label=spec.label)
        write_results(out / s, payload)
        log(format_table(payload))
        per_suite[s] = payload
    outcomes = {s: p["outcomes"][s] for s, p in per_suite.items()}
    present = [r for r in ROWS if any(r in p["rows"] for p in per_suite.values())]
    present += [r for p in per_suite.values() for r in p["rows"] if r not in present]
    combined = {"backbone": spec.label, "agent": spec.agent, "suites": per_suite, "rows": present,
                "outcomes": outcomes,
                "summary": summarize_rows(outcomes, present) if len(suites) > 1 else per_suite[suites[0]]["table"]}
    combined["llm"] = merge_llm(j.get("llm") for j in done)
    report = "\n\n".join([format_table(p) for p in per_suite.values()] + [format_summary(combined)]
                         + ([format_llm(combined["llm"])] if combined["llm"] else []))
    write_results(out, combined, text=report, report="report.txt")
    _plot(per_suite, out / "success.png")
    log(format_summary(combined))
    return combined


def format_summary(combined: dict) -> str:
    """Over suites (each suite weighs the same): success and differences per row."""
    lines = [f"UpliftMem over {', '.join(combined['suites'])} ({combined['backbone']}): success % [95% CI]"]
    for r, t in combined["summary"].items():
        lines.append(f"  {r:<16} {fmt_interval(t.get('success')):>20}  vs no_memory "
                     f"{fmt_interval(t.get('vs_no_memory'), signed=True):>22}  vs upliftmem "
                     f"{fmt_interval(t.get('vs_upliftmem'), signed=True):>22}")
    return "\n".join(lines)


def run_outputs() -> list[str]:
    """What ``cfjax upliftmem run --force`` removes from ``--out`` (exactly what a run writes)."""
    from cfjax.domains import SUITES

    return (["config.toml", "results.json", "report.txt", "success.png", ".world_cache"]
            + [f"suites/{n}" for n in SUITES] + [f"{n}" for n in SUITES])


def run_main(cfg: UpliftConfig, *, suites: Sequence[str], out: str | Path, rows: Sequence[str] | None = None,
             backbone="scripted", workers: int | None = None, quick: bool = False,
             log: Callable[[str], None] = print, existing: str = "refuse", executor: Executor = "local") -> dict:
    """``cfjax upliftmem run``: :func:`run_all` with a header and a closing line."""
    from cfjax.config import ConfigError
    from cfjax.experiments.backbones import backbone_spec, default_workers
    from cfjax.experiments.common import resolve_suites
    from cfjax.infra.io import prepare_output_dir

    names = resolve_suites(suites)
    rows = tuple(rows) if rows else (METHOD,) + ABLATIONS + peer_rows(defaults=True)
    from cfjax.memory import why_not
    from cfjax.registry import MEMORY_SYSTEMS

    misfits = [r for r in rows if r in MEMORY_SYSTEMS and r not in peer_rows()]
    if misfits:  # a memory system is a row here only where its protocol fits this runner's
        raise ConfigError("; ".join(why_not(MEMORY_SYSTEMS.get(r), "upliftmem") for r in misfits))
    bad = [r for r in rows if r not in (METHOD,) + ABLATIONS + peer_rows()]
    if bad:
        raise ConfigError(f"unknown row(s) {bad}; choose from {', '.join((METHOD,) + ABLATIONS + peer_rows())} "
                          "(no_memory and similarity_topk always run with upliftmem)")
    spec = backbone_spec(backbone) if isinstance(backbone, str) else backbone
    workers = workers if workers is not None else default_workers(spec)
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=run_outputs(), resumable=False, command="cfjax upliftmem run")
    log(f"cfjax upliftmem run: suites={names} backbone={spec.label} rows={list(rows)} "
        f"training seeds={list(cfg.train_seeds)} epochs={cfg.training.epochs} "
        f"B_p={cfg.probing.budget} eval repeats={cfg.eval_repeats}, {workers} worker(s){' (quick)' if quick else ''}"
        f" → {out}")
    t0 = time.perf_counter()
    combined = run_all(out, suites=names, rows=rows, cfg=cfg, workers=workers, backbone=spec, log=log,
                       executor=executor)
    log(f"\nwrote {out / 'results.json'}, {out / 'report.txt'}, {out / 'success.png'} and {out}/<suite>/ "
        f"({time.perf_counter() - t0:.0f}s)")
    return combined


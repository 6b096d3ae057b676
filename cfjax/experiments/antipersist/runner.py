"""Run every Anti-Persistence row over suites, split seeds and backbone seeds; aggregate with paired
task-bootstrap intervals; write results and plots.

One *job* is one (suite, split seed, row, backbone seed): the suite from
:func:`cfjax.domains.open_suite`, its split ``suite.splits(seed=split_seed)``,
its world (memoised, :class:`~cfjax.infra.cache.CachedWorld`) and edit model, a
backbone from a :class:`~cfjax.experiments.countermem.runner.BackboneSpec` (scripted:
``ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=...))``, or an
OpenAI-compatible server), and :func:`cfjax.antipersist.protocol.run_method`.
Jobs are independent and fully seeded, so they run on a small process pool
with results identical to the serial run (a test checks it).

Statistics (:mod:`cfjax.experiments.stats`). Every job saves its per-task
held-out outcomes after every iteration. The final iteration's go into
``payload["outcomes"]`` in the shared format
``{suite: {str(split_seed): {"task_ids", "seeds", "rows": {row: [[0/1 per task] per backbone seed]}}}}``
(the same task order for every row); a split is one bootstrap cluster. Every
success figure — each row's final held-out success, per suite and over
suites, and each iteration's (the figure's bands) — carries a paired
task-bootstrap 95% interval, and every row its paired difference against
``no_memory``; anti-persistence also against every other row (its ablations
``persist_guidance``, ``fixed_*``, ``random_mode`` and the memory baselines).

Speed (the measured quantities are unchanged): one world per suite and worker
process, memoised across every job of the run through a scratch SQLite file
the processes share (:class:`SharedWorld`; every world is a pure function of
task and action, the ledger still charges every call); one compiled selector
per config and process; jobs submitted longest first. A job's ``profile``
(seconds, checks it actually ran) depends on scheduling and is not a result.

Layout of ``run_all(out, suites=...)``::

    out/config.toml                 the APConfig (``--config`` reads it back)
    out/suites/<suite>/             the built suites (read-only to the jobs)
    out/<suite>/results.json        per-suite table with intervals, per-task outcomes, similarity profile, jobs
    out/<suite>/success_by_iteration.png
    out/<suite>/split_<s>/seed_<b>/ outcome logs of the bandit rows
    out/results.json, out/report.txt   every suite, and the combined table

Analysis code (here, not the method) reads the suites' answer keys for the
per-family breakdown of held-out success and the neighbour-family diagnostic
of the similarity profile.

Length: the runner, its aggregation with intervals, the similarity profile, the
report and the figure belong together (one payload format); ~600 lines.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from cfjax.antipersist.guidance import MODES
from cfjax.antipersist.protocol import ROWS, APConfig, reproduced_errors, run_method, run_system
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.experiments.common import clear_dir, finite, run_pool, spread
from cfjax.experiments.worlds import SharedWorld, close_worlds, open_world
from cfjax.experiments.backbones import BackboneSpec
from cfjax.experiments.transport import format_llm, merge_llm
from cfjax.infra.executors import Executor, is_local
from cfjax.experiments.stats import bootstrap, clusters_from_outcomes, fmt_interval, paired_difference
from cfjax.infra.io import atomic_write_bytes, atomic_write_text

__all__ = ["APJob", "run_all", "run_job", "aggregate", "format_table", "format_summary", "plot_success",
           "run_main", "run_outputs", "similarity_profile", "format_similarity", "summarize", "REFERENCE", "METHOD",
           "ABLATIONS"]

#: the reference every row is compared with (paired over tasks)
REFERENCE = "no_memory"
#: the method; it is also compared with every other row
METHOD = "anti_persistence"
#: the method's own ablations (persist-vs-discard, fixed modes, random mode)
ABLATIONS = ("persist_guidance", "fixed_imitation", "fixed_strategic", "fixed_corrective", "random_mode")


@dataclass(frozen=True)
class APJob:
    """Everything a worker process needs to run one (suite, split seed, row, backbone seed)."""

    suite: str
    root: str
    row: str
    seed: int
    cfg: APConfig
    out_dir: str
    backbone: BackboneSpec = BackboneSpec("scripted")
    split_seed: int = 12345
    world_cache: str = ""  # a SQLite file the run's processes share outcomes through ("" = per process only)


# --------------------------------------------------------------------------- one job

def run_job(job: APJob) -> dict:
    """One (suite, split, row, seed): K iterations; returns plain data (the function worker processes run)."""
    t0 = time.perf_counter()
    suite, _, world = open_world(job.suite, job.root, job.world_cache)
    misses0 = world.misses
    sp = suite.splits(seed=job.split_seed)
    train_pool = list(sp.build) + list(sp.train) + list(sp.val)
    eval_tasks = spread(sp.eval, job.cfg.max_eval_tasks)
    spec = job.backbone
    if job.row in AGENT_ROWS:  # a protocol row under another base agent (Table 1's Reflexion row)
        proto, agent = AGENT_ROWS[job.row]
        spec = replace(spec, agent=agent)
    backbone = spec.make(suite, job.seed, job.cfg)  # type: ignore[arg-type]  # reads cfg.scripted
    system = None
    if job.row in ROWS or job.row in AGENT_ROWS:
        results, state = run_method(AGENT_ROWS[job.row][0] if job.row in AGENT_ROWS else job.row, seed=job.seed, train_pool=train_pool, eval_tasks=eval_tasks,
                                    backbone=backbone, world=world, edits=suite.edits, cfg=job.cfg,
                                    out_dir=Path(job.out_dir) / f"split_{job.split_seed}" / f"seed_{job.seed}")
    else:  # a registered memory system (cfjax.memory), through the same protocol
        results, system = run_system(MEMORY_SYSTEMS.get(job.row), seed=job.seed, train_pool=train_pool,
                                     eval_tasks=eval_tasks, backbone=backbone, world=world, edits=suite.edits,
                                     cfg=job.cfg)
    ids = [t.task_id for t in eval_tasks]
    families = [suite.answer_key(t).family for t in ids]  # analysis: the answer keys' families
    by_family: dict[str, list[bool]] = defaultdict(list)
    for tid, fam in zip(ids, families):
        by_family[fam].append(results[-1].solved[tid])
    iters = []
    for r in results:
        d = asdict(r)
        for k in ("solved", "eval_sims"):
            d.pop(k)
        iters.append(d)
    from cfjax.experiments.backbones import backbone_stats

    return {"suite": job.suite, "split_seed": job.split_seed, "row": job.row, "seed": job.seed,
            "llm": backbone_stats(backbone), "iterations": iters,
            "task_ids": ids, "task_families": families,
            "solved": ["".join("1" if r.solved[t] else "0" for t in ids) for r in results],  # per iteration
            "eval_sims": [round(x, 4) for x in results[-1].eval_sims],
            "final_by_family": {f: 100.0 * sum(v) / len(v) for f, v in sorted(by_family.items())},
            "eval_tasks": len(eval_tasks), **(_state_counts(state) if system is None else
                                               {"provenance": None, "memory": system.summary()}),
            # not part of the result (they depend on scheduling): time and checks this job actually ran
            "profile": {"seconds": round(time.perf_counter() - t0, 2), "world_checks_run": world.misses - misses0}}


def _state_counts(state) -> dict:
    return {"provenance": reproduced_errors(state), "trajectories": len(state.trajectories),
            "log_entries": len(state.log) if state.log is not None else None,
            "abstractions": len(state.abstractions) if state.abstractions is not None else None}


#: rows that are a protocol row under another base agent: name → (protocol row, agent). Reflexion is
#: Anti-Persistence Table 1's strongest agent baseline: no memory across tasks, the last three
#: self-reflections within a task (cfjax.agents.reflexion); with ``--agent reflexion`` it equals no_memory
AGENT_ROWS: dict[str, tuple[str, str]] = {"reflexion": ("no_memory", "reflexion")}


def row_names() -> tuple[str, ...]:
    """Every row of ``antipersist run`` (and its default): the protocol's own rows, the Reflexion row
    (:data:`AGENT_ROWS`), then each registered memory system whose ``runners`` include
    ``antipersist`` (:mod:`cfjax.memory`: ExpeL, the original ExpeL, AutoRefine, …)."""
    return ROWS + tuple(AGENT_ROWS) + tuple(n for n, info in MEMORY_SYSTEMS.items()
                                            if "antipersist" in info.runners and n not in ROWS)


def default_rows() -> tuple[str, ...]:
    """The rows of ``antipersist run`` without ``--rows``: the protocol's, Reflexion, and the memory
    systems Anti-Persistence's Table 1 compares against (:meth:`cfjax.memory.MemorySystemInfo.default_in`)."""
    return ROWS + tuple(AGENT_ROWS) + tuple(n for n, info in MEMORY_SYSTEMS.items()
                                            if info.default_in("antipersist") and n not in ROWS)


def _init_worker() -> None:  # pragma: no cover - runs in worker processes
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import faiss

        faiss.omp_set_num_threads(1)
    except Exception:
        pass


#: relative cost of a job (measured on the reference machine), for longest-first submission only
_ROW_COST = {"joint_memory": 3.0, "abstraction_memory": 3.0, "persist_guidance": 2.5, "anti_persistence": 2.5,
             "no_memory": 1.0}


def _cost(j: APJob) -> float:
    from cfjax.domains import cost_weight  # the domain declares its relative cost (DomainInfo.cost_weights)

    return cost_weight(j.suite, "antipersist") * _ROW_COST.get(j.row, 2.0)


def _run_jobs(jobs: Sequence[APJob], workers: int, log: Callable[[str], None], label: str,
              executor: Executor = "local") -> list[dict]:
    """Every job; results in job order (identical to the serial run), submitted longest first."""
    def note(d: dict) -> None:
        log(f"  {d['suite']}/split {d['split_seed']}/{d['row']} seed {d['seed']}: held-out "
            f"{d['iterations'][-1]['success']:.1f}% ({d['profile']['seconds']:.0f}s) [{label}]")

    return run_pool(run_job, jobs, workers=workers, cost=_cost, note=note, initializer=_init_worker,
                    serial_done=close_worlds, executor=executor)


# --------------------------------------------------------------------------- the run


def run_all(out_dir: str | Path, *, suites: Sequence[str] = ("sql",), rows: Sequence[str] | None = None,
            cfg: APConfig = APConfig(), workers: int = 1, backbone: BackboneSpec | None = None,
            log: Callable[[str], None] = print, executor: Executor = "local") -> dict:
    """Every suite × split seed × row × backbone seed; writes the per-suite and combined results
    (module docstring) and returns the combined payload. With ``executor`` a
    :class:`~cfjax.infra.executors.RayExecutor` the jobs are Ray tasks (the shared SQLite world
    cache is then off: WAL does not work over network filesystems; results are the same)."""
    from cfjax.config import save_toml
    from cfjax.domains import SUITES, build_suite, is_registered

    spec = backbone or BackboneSpec("scripted")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = tuple(rows) if rows is not None else default_rows()
    bad = [r for r in rows if r not in row_names()]
    if bad:
        raise ValueError(f"unknown row(s) {bad}; choose from {', '.join(row_names())}")
    unknown = [s for s in suites if s not in SUITES and not is_registered(s)]
    if unknown:
        raise ValueError(f"unknown suite(s) {unknown} (available: {', '.join(SUITES)})")
    save_toml(cfg, out / "config.toml")
    roots, built = {}, {}
    for s in suites:
        roots[s] = out / "suites" / s
        built[s] = build_suite(s, roots[s])  # once, before the workers read it
    scratch = out / ".world_cache"
    caches = {s: str(scratch / f"{s}.sqlite") if is_local(executor) else "" for s in suites}
    clear_dir(scratch)
    scratch.mkdir()
    jobs = [APJob(s, str(roots[s]), r, seed, cfg, str(out / s), spec, split, caches[s]) for s in suites
            for split in cfg.split_seeds for r in rows for seed in cfg.seeds]
    try:
        done = _run_jobs(jobs, workers, log, spec.label, executor)
    finally:
        clear_dir(scratch)
    per_suite = {}
    for s in suites:
        payload = aggregate([j for j in done if j["suite"] == s], suite=s, rows=rows, cfg=cfg, label=spec.label)
        payload["similarity"] = similarity_profile(built[s], cfg, [j for j in done if j["suite"] == s])
        atomic_write_text(out / s / "results.json", json.dumps(finite(payload), indent=1) + "\n")
        plot_success(payload, out / s / "success_by_iteration.png")
        log(format_table(payload))
        per_suite[s] = payload
    outcomes = {s: p["outcomes"][s] for s, p in per_suite.items()}
    combined = {"backbone": spec.label, "agent": spec.agent, "suites": per_suite, "seeds": list(cfg.seeds),
                "split_seeds": list(cfg.split_seeds), "rows": list(rows), "outcomes": outcomes,
                "summary": summarize(outcomes, per_suite, rows)}
    combined["llm"] = merge_llm(j.get("llm") for j in done)
    atomic_write_text(out / "results.json", json.dumps(finite(combined), indent=1) + "\n")
    report = "\n\n".join([format_table(p) for p in per_suite.values()] + [format_summary(combined)]
                         + ([format_llm(combined["llm"])] if combined["llm"] else []))
    atomic_write_text(out / "report.txt", report + "\n")
    log(format_summary(combined))
    return combined


# --------------------------------------------------------------------------- aggregation with intervals


def _outcome_blocks(jobs: Sequence[dict], suite: str, rows: Sequence[str], iteration: int = -1) -> dict:
    """``{str(split): {"task_ids", "seeds", "rows": {row: [[0/1 per task] per seed]}}}`` of one iteration
    (the shared format; rows in the order given, seeds ascending, tasks in the split's evaluation order)."""
    out: dict = {}
    for split in sorted({j["split_seed"] for j in jobs}):
        js = [j for j in jobs if j["split_seed"] == split]
        ids = js[0]["task_ids"]
        seeds = sorted({j["seed"] for j in js})
        blk = {"task_ids": list(ids), "seeds": seeds, "rows": {}}
        for r in rows:
            by_seed = {j["seed"]: j for j in js if j["row"] == r}
            if set(by_seed) != set(seeds):
                continue
            for j in by_seed.values():
                if j["task_ids"] != ids:
                    raise ValueError(f"{suite} split {split}: jobs evaluated different held-out tasks")
            blk["rows"][r] = [[int(c) for c in by_seed[s]["solved"][iteration]] for s in seeds]
        out[str(split)] = blk
    return out


def _intervals(outcomes: dict, rows: Sequence[str]) -> dict:
    """Per row: its interval, its difference to :data:`REFERENCE` and (the method) to every other row."""
    cl = clusters_from_outcomes(outcomes)
    present = [r for r in rows if any(r in blk["rows"] for s in outcomes.values() for blk in s.values())]
    res: dict = {}
    for r in present:
        d: dict = {"ci": bootstrap(cl, r).as_dict()}
        if REFERENCE in present and r != REFERENCE:
            d[f"vs_{REFERENCE}"] = paired_difference(cl, r, REFERENCE).as_dict()
        if r == METHOD:
            d["vs"] = {o: paired_difference(cl, r, o).as_dict() for o in present if o != r}
        res[r] = d
    return res


def aggregate(jobs: Sequence[dict], *, suite: str, rows: Sequence[str], cfg: APConfig, label: str) -> dict:
    """One suite's table: means over every (split, seed) unit, with task-bootstrap intervals."""
    rows = [r for r in rows if any(j["row"] == r for j in jobs)]
    outcomes = {suite: _outcome_blocks(jobs, suite, rows)}
    k = len(jobs[0]["iterations"]) if jobs else 0
    ivs = _intervals(outcomes, rows)
    by_iter = [_intervals({suite: _outcome_blocks(jobs, suite, rows, it)}, rows) for it in range(k)]
    families = _families(jobs)
    table = {}
    for r in rows:
        js = [j for j in jobs if j["row"] == r]
        curves = np.array([[it["success"] for it in j["iterations"]] for j in js])
        calls = np.array([[it["calls_per_task"] for it in j["iterations"]] for j in js])
        final_modes = {m: float(np.mean([j["iterations"][-1]["mode_freq"][m] for j in js])) for m in MODES}
        prov = ({key: int(sum(j["provenance"][key] for j in js)) for key in js[0]["provenance"]}
                if js[0].get("provenance") is not None else None)  # None: a memory system with no provenance
        branches: Counter = Counter()
        for j in js:
            branches.update(j["iterations"][-1]["branches"])
        table[r] = {
            "success_by_iteration": curves.mean(axis=0).tolist(),
            "success_std_by_iteration": curves.std(axis=0).tolist(),
            "success_ci_by_iteration": [b[r]["ci"] for b in by_iter],
            "final_success": float(curves[:, -1].mean()), "final_success_std": float(curves[:, -1].std()),
            "final_success_ci": ivs[r]["ci"],
            f"final_vs_{REFERENCE}": ivs[r].get(f"vs_{REFERENCE}"),
            "final_vs": ivs[r].get("vs"),
            "final_success_per_unit": {f"{j['split_seed']}/{j['seed']}": j["iterations"][-1]["success"] for j in js},
            "final_success_by_family": _family_ci(outcomes, families, r),
            "calls_per_task_by_iteration": calls.mean(axis=0).tolist(),
            "final_calls_per_task": float(calls[:, -1].mean()),
            "final_tokens_per_task": float(np.mean([j["iterations"][-1]["tokens_per_task"] for j in js])),
            "final_applied_per_task": float(np.mean([j["iterations"][-1]["applied_per_task"] for j in js])),
            "final_mode_freq": final_modes,
            "final_eval_branches": dict(branches),
            "provenance": prov,
        }
    jobs_out = [{k2: v for k2, v in j.items() if k2 not in ("task_ids", "task_families")} for j in jobs]
    return {"backbone": label, "suite": suite, "seeds": list(cfg.seeds), "split_seeds": list(cfg.split_seeds),
            "rows": table, "eval_tasks": jobs[0]["eval_tasks"] if jobs else 0,
            "eval_tasks_by_split": {k: len(v["task_ids"]) for k, v in outcomes[suite].items()}, "outcomes": outcomes,
            "task_families": families,
            "config": {"iterations": cfg.iterations, "tasks_per_iteration": cfg.tasks_per_iteration, "B": cfg.B,
                       "max_attempts": cfg.max_attempts, "max_eval_tasks": cfg.max_eval_tasks,
                       "embed_text": cfg.embed_text, "type_filter": cfg.type_filter,
                       "bandit": asdict(cfg.bandit), "synthesis": asdict(cfg.synthesis),
                       "scripted": asdict(cfg.scripted)},
            "jobs": jobs_out}


def _families(jobs: Sequence[dict]) -> dict:
    """Analysis: the answer-key family of every held-out task, per split (same order as the outcomes)."""
    out: dict = {}
    for j in jobs:
        out.setdefault(str(j["split_seed"]), list(j["task_families"]))
    return out


def _family_ci(outcomes: dict, families: dict, row: str) -> dict:
    """Final success per answer-key family (analysis) with its task-bootstrap interval."""
    names = sorted({f for fs in families.values() for f in fs})
    res = {}
    for f in names:
        sub = {}
        for s, splits in outcomes.items():
            sub[s] = {}
            for split, blk in splits.items():
                cols = [i for i, x in enumerate(families.get(split, ())) if x == f]
                if cols and row in blk["rows"]:
                    sub[s][split] = {"rows": {row: [[v[i] for i in cols] for v in blk["rows"][row]]}}
        try:
            res[f] = bootstrap(clusters_from_outcomes(sub), row).as_dict()
        except ValueError:
            continue
    return res


def summarize(outcomes: dict, per_suite: dict[str, dict], rows: Sequence[str]) -> dict:
    """Final held-out success per row: per suite and over suites (each suite weighs the same, each split
    inside it the same), each with its interval and paired differences."""
    ivs = _intervals(outcomes, rows)
    out = {}
    for r in rows:
        if r not in ivs:
            continue
        vals = {s: p["rows"][r]["final_success"] for s, p in per_suite.items() if r in p["rows"]}
        out[r] = {"by_suite": vals, "by_suite_ci": {s: p["rows"][r]["final_success_ci"] for s, p in per_suite.items()
                                                    if r in p["rows"]},
                  "mean": ivs[r]["ci"]["mean"], "mean_ci": ivs[r]["ci"],
                  f"mean_vs_{REFERENCE}": ivs[r].get(f"vs_{REFERENCE}"), "mean_vs": ivs[r].get("vs")}
    return out


# --------------------------------------------------------------------------- the similarity profile

_QS = (0.1, 0.5, 0.9)


def _quantiles(v: Sequence[float] | np.ndarray, rho: float | None = None) -> dict:
    v = np.asarray(v, float)
    if v.size == 0:
        return {"n": 0}
    q = np.quantile(v, _QS)
    d = {"n": int(v.size), "q10": float(q[0]), "median": float(q[1]), "q90": float(q[2])}
    if rho is not None:
        d["below_rho"] = float(np.mean(v < rho))
    return d


def similarity_profile(suite, cfg: APConfig, jobs: Sequence[dict] = (), *, texts: Sequence[str] = ("question_cues",
                                                                                                   "paper")) -> dict:
    """The measured cosine-similarity distribution behind ``APConfig.embed_text`` and ρ (analysis).

    For every split: the cosine similarity (the embedder the memories use) of every held-out task to every
    task of its training pool, grouped by two *observable* relations — same environment (``Task.env_id``)
    and same observable type (:func:`cfjax.antipersist.memory.task_type`) — for each embedding text; the
    share of the 5 most similar pool tasks that have the held-out task's answer-key family, over the whole
    pool and within the task's observable type as retrieval ranks them (analysis only, the reviewer's
    diagnostic); and, from the runs, the mean neighbourhood similarity of every
    held-out decision of the bandit rows at the final iteration with the share below ρ (the share of
    decisions on which the fallback fires).
    """
    from cfjax.antipersist.memory import embed_text, task_type
    from cfjax.infra.embed import HashingEmbedder

    emb = HashingEmbedder()
    groups: dict[str, dict[str, list]] = {t: defaultdict(list) for t in texts}
    top5: dict[str, list[float]] = {t: [] for t in texts}
    top5_typed: dict[str, list[float]] = {t: [] for t in texts}
    for split in cfg.split_seeds:
        sp = suite.splits(seed=split)
        pool = list(sp.build) + list(sp.train) + list(sp.val)
        ev = spread(sp.eval, cfg.max_eval_tasks)
        env = np.array([[a.env_id == b.env_id for b in pool] for a in ev])
        typ = np.array([[task_type(a) == task_type(b) for b in pool] for a in ev])
        fam_p = np.array([suite.answer_key(t.task_id).family for t in pool])
        fam_e = np.array([suite.answer_key(t.task_id).family for t in ev])
        for text in texts:
            sim = emb.embed([embed_text(t, text) for t in ev]) @ emb.embed([embed_text(t, text) for t in pool]).T
            for name, m in (("same_env_same_type", env & typ), ("other_env_same_type", ~env & typ),
                            ("same_env_other_type", env & ~typ), ("other_env_other_type", ~env & ~typ)):
                groups[text][name].extend(sim[m].tolist())
            nn = np.argsort(-sim, axis=1, kind="stable")[:, :5]
            top5[text].extend((fam_p[nn] == fam_e[:, None]).mean(axis=1).tolist())
            for i in range(len(ev)):  # as retrieval ranks them: within the task's observable type
                cand = np.flatnonzero(typ[i])
                if cand.size:
                    nn_i = cand[np.argsort(-sim[i, cand], kind="stable")[:5]]
                    top5_typed[text].append(float(np.mean(fam_p[nn_i] == fam_e[i])))
    rho = float(cfg.bandit.rho)
    observed = {}
    for r in sorted({j["row"] for j in jobs if j.get("eval_sims")}):
        observed[r] = _quantiles([x for j in jobs if j["row"] == r for x in j["eval_sims"]], rho)
    return {"embed_text": cfg.embed_text, "rho": rho, "type_filter": cfg.type_filter,
            "pairs": {t: {g: _quantiles(v) for g, v in groups[t].items()} for t in texts},
            "top5_same_family": {t: float(np.mean(v)) if v else None for t, v in top5.items()},
            "top5_same_family_type_filtered": {t: float(np.mean(v)) if v else None for t, v in top5_typed.items()},
            "eval_neighbourhood_sim": observed}


def format_similarity(sim: dict) -> str:
    def q(d: dict) -> str:
        return f"{d['median']:.2f} [{d['q10']:.2f}, {d['q90']:.2f}]" if d.get("n") else "—"

    lines = [f"similarity (cosine, median [q10, q90]) of held-out to training tasks; ρ = {sim['rho']:.2f}, "
             f"embedding text '{sim['embed_text']}', type filter {'on' if sim['type_filter'] else 'off'}"]
    for text, g in sim["pairs"].items():
        cells = "  ".join(f"{k.replace('_', ' ')} {q(v)}" for k, v in g.items())
        typed = (sim.get("top5_same_family_type_filtered") or {}).get(text)
        lines.append(f"  {text:<14} {cells}  | top-5 same family {sim['top5_same_family'][text]:.2f}"
                     + (f" (within the type {typed:.2f})" if typed is not None else ""))
    for r, d in sim["eval_neighbourhood_sim"].items():
        lines.append(f"  {r}: held-out mean neighbourhood similarity {q(d)}, below ρ (fallback) on "
                     f"{100 * d.get('below_rho', 0):.0f}% of {d.get('n', 0)} decisions")
    return "\n".join(lines)


# --------------------------------------------------------------------------- report


def _provenance_cell(p: dict | None) -> str:
    """``reproduced/flagged`` abstractions, or ``—`` for a row that keeps no provenance (a memory system)."""
    return "—" if p is None else f"{p['reproduced']}/{p['flagged']}"


def format_table(payload: dict) -> str:
    rows = payload["rows"]
    k = len(next(iter(rows.values()))["success_by_iteration"])
    sizes = sorted(set((payload.get("eval_tasks_by_split") or {}).values()) or {payload["eval_tasks"]})
    n_eval = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
    head = (f"Anti-Persistence protocol on suite '{payload['suite']}' — {payload['backbone']}; held-out success "
            f"(%) on {n_eval} tasks per split by iteration, mean over splits {payload['split_seeds']} × seeds "
            f"{payload['seeds']}; final with its paired task-bootstrap 95% interval and the paired difference "
            f"to {REFERENCE}")
    lines = [head, f"{'row':<20}" + "".join(f"{'it' + str(i + 1):>6}" for i in range(k))
             + f"  {'final [95% CI]':<20}{'vs ' + REFERENCE:<24}{'calls':>6}  modes n/i/s/c        repr/flag"]
    for r, v in rows.items():
        modes = "/".join(f"{v['final_mode_freq'][m]:.2f}" for m in MODES)
        p = v["provenance"]
        vs = v.get(f"final_vs_{REFERENCE}")
        lines.append(f"{r:<20}" + "".join(f"{x:>6.1f}" for x in v["success_by_iteration"])
                     + f"  {fmt_interval(v['final_success_ci']):<20}"
                     f"{fmt_interval(vs, signed=True) if vs else '':<24}{v['final_calls_per_task']:>6.2f}"
                     f"  {modes:<20} {_provenance_cell(p)}")
    m = rows.get(METHOD, {}).get("final_vs") or {}
    if m:
        lines.append(f"{METHOD} − row (paired, 95% CI): "
                     + "; ".join(f"{o} {fmt_interval(iv, signed=True)}" for o, iv in m.items()))
    if payload.get("similarity"):
        lines.append(format_similarity(payload["similarity"]))
    return "\n".join(lines)


def format_summary(combined: dict) -> str:
    suites = list(combined["suites"])
    lines = [f"Anti-Persistence, final held-out success (%) per suite with paired task-bootstrap 95% intervals — "
             f"{combined['backbone']}; splits {combined['split_seeds']} × seeds {combined['seeds']}; mean: each "
             f"suite weighs the same",
             f"{'row':<20}" + "".join(f"{s:>22}" for s in suites) + f"{'mean':>22}{'mean vs ' + REFERENCE:>26}"]
    for r, v in combined["summary"].items():
        vs = v.get(f"mean_vs_{REFERENCE}")
        lines.append(f"{r:<20}" + "".join(f"{fmt_interval(v['by_suite_ci'].get(s)):>22}" for s in suites)
                     + f"{fmt_interval(v['mean_ci']):>22}{fmt_interval(vs, signed=True) if vs else '':>26}")
    m = combined["summary"].get(METHOD, {}).get("mean_vs") or {}
    if m:
        lines.append(f"{METHOD} − row over suites (paired, 95% CI):")
        lines += [f"  {o:<20}{fmt_interval(iv, signed=True):>26}" for o, iv in m.items()]
    return "\n".join(lines)


def plot_success(payload: dict, path: str | Path) -> None:
    """Held-out success by iteration, one line per row with its 95% task-bootstrap band, and the final
    success of every row with its interval (PNG, written atomically)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=110, gridspec_kw={"width_ratios": [3, 2]})
    names = list(payload["rows"])
    for r, v in payload["rows"].items():
        y = np.asarray(v["success_by_iteration"])
        x = np.arange(1, len(y) + 1)
        style = "-" if r in ("anti_persistence", "trajectory_memory", "abstraction_memory", "joint_memory",
                             REFERENCE) else ":"
        lw = 2.5 if r == METHOD else 1.4
        (line,) = ax.plot(x, y, style, lw=lw, marker="o", ms=3, label=r)
        ci = v.get("success_ci_by_iteration") or []
        if r in (METHOD, REFERENCE) and len(ci) == len(y) and all(c and c.get("lo") is not None for c in ci):
            ax.fill_between(x, [c["lo"] for c in ci], [c["hi"] for c in ci], color=line.get_color(), alpha=0.18, lw=0)
    ax.set_xlabel("self-improvement iteration")
    ax.set_ylabel("held-out success (%)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"Held-out success by iteration, suite {payload['suite']} — {payload['backbone']}\n"
                 f"bands: 95% task-bootstrap intervals of {METHOD} and {REFERENCE} (every iteration's interval of "
                 f"every row is in results.json)", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    means = [payload["rows"][r]["final_success_ci"] for r in names]
    ok = [c is not None and c.get("lo") is not None for c in means]
    ys = np.arange(len(names))
    bx.errorbar([c["mean"] if o else math.nan for c, o in zip(means, ok)], ys,
                xerr=np.array([[c["mean"] - c["lo"], c["hi"] - c["mean"]] if o else [0, 0]
                               for c, o in zip(means, ok)]).T, fmt="o", capsize=3)
    ref = payload["rows"].get(REFERENCE, {}).get("final_success")
    if ref is not None:
        bx.axvline(ref, color="grey", ls="--", lw=1)
    bx.set_yticks(ys, names, fontsize=7)
    bx.invert_yaxis()
    bx.set_xlabel(f"final held-out success (%), 95% CI; dashed: {REFERENCE}", fontsize=8)
    bx.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())


def run_outputs() -> list[str]:
    """What ``cfjax antipersist run --force`` removes from its ``--out`` directory (globs relative to
    it): exactly what :func:`run_all` writes there (module docstring), for every built-in suite;
    other files are kept."""
    from cfjax.domains import SUITES

    per_suite = [f"{n}/{x}" for n in SUITES for x in ("results.json", "success_by_iteration.png", "split_*")]
    return ["config.toml", "results.json", "report.txt", ".world_cache"] + [f"suites/{n}" for n in SUITES] + per_suite


def run_main(cfg: APConfig, *, suites: Sequence[str], out: str | Path, rows: Sequence[str] | None = None,
             backbone: BackboneSpec | str = "scripted", workers: int | None = None, quick: bool = False,
             log: Callable[[str], None] = print, existing: str = "refuse", executor: Executor = "local") -> dict:
    """``cfjax antipersist run``: :func:`run_all` with a header and a closing line logged.

    ``suites`` may be ``["all"]``; ``rows`` defaults to every row; ``workers`` to ``min(2, CPUs)``.
    Returns the combined ``results.json`` payload (with the per-task ``outcomes``).

    ``existing`` says what to do when ``out`` is a non-empty directory (checked before anything
    is written): ``"refuse"`` (default) raises :class:`cfjax.infra.io.OutputExistsError`;
    ``"force"`` first removes what a run writes there (:func:`run_outputs`), keeping other files;
    ``"resume"`` is refused (every job restarts its outcome log, so a run cannot be continued).
    """
    import os

    from cfjax.experiments.backbones import backbone_spec, default_workers

    from cfjax.experiments.common import resolve_suites
    from cfjax.infra.io import prepare_output_dir

    names = resolve_suites(suites)
    rows = tuple(rows) if rows else default_rows()
    bad = [r for r in rows if r not in row_names()]
    if bad:
        from cfjax.config import ConfigError

        raise ConfigError(f"unknown row(s) {bad}; choose from {', '.join(row_names())}")
    spec = backbone_spec(backbone) if isinstance(backbone, str) else backbone
    workers = workers if workers is not None else default_workers(spec)
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=run_outputs(), resumable=False, command="cfjax antipersist run")
    log(f"cfjax antipersist run: suites={names} backbone={spec.label} rows={len(rows)} "
        f"splits={list(cfg.split_seeds)} seeds={list(cfg.seeds)} K={cfg.iterations}×{cfg.tasks_per_iteration} "
        f"tasks, held-out {cfg.max_eval_tasks or 'all'}, {workers} worker(s){' (quick)' if quick else ''} → {out}")
    t0 = time.perf_counter()
    combined = run_all(out, suites=names, rows=rows, cfg=cfg, workers=workers, backbone=spec, log=log,
                       executor=executor)
    log(f"\nwrote {out / 'results.json'}, {out / 'report.txt'}, {out / 'config.toml'} and "
        f"{out}/<suite>/results.json, success_by_iteration.png ({time.perf_counter() - t0:.0f}s)")
    return combined

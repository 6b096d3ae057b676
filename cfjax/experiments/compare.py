"""``cfjax compare``: the three methods side by side on the same held-out tasks, backbone and seeds.

No published system offers this comparison. For each suite, one split (``split_seed``) and each
backbone seed, every method trains on the same ``T_build ∪ T_train ∪ T_val`` under its own paper's
protocol and is evaluated on the *same* held-out tasks with the same backbone (the scripted simulator,
or one OpenAI-compatible model) and the same attempt limit (2 evaluated attempts):

* ``none`` — the agent loop without memory (CounterMem's ``none`` row: its memory-free drafts);
* ``countermem`` — construct the verified store on ``T_build``, train the DQN selector on
  ``T_train``/``T_val`` (Algorithm 1), evaluate with the greedy selector and the frozen store;
* ``antipersist`` — the iteration protocol (K iterations of training samples from the pool), the
  final iteration's frozen log and trajectories, greedy held-out modes;
* ``upliftmem`` — bootstrap, warm-up, the training stream with writing and EVSI probing, then beam
  search with the fixed checkpoint.

**Cost, counted once and the same way for every method.** Each job wraps its backbone and world in a
:class:`Meter` that counts every backbone call (and its tokens) and every evaluator request, split
into a training phase (everything before the frozen evaluation) and an evaluation phase; UpliftMem also
reports its training executions (each once, App. D.3). The memoising world cache is inside the meter,
so a cached check is still a counted call — as it would be for a real evaluator.

Statistics: every row's success with a paired task-bootstrap 95% interval, every method against
``none`` and every pair of methods against each other (paired over the same tasks and backbone seeds).
Each method evaluates with its own protocol's draft seeds (its episode numbering), so rows share tasks
and backbone seeds but not the executor's per-attempt draws: the differences are paired over tasks,
without common random numbers between methods. The
figure shows success with intervals and success against training cost.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cfjax.config import APConfig, CounterMemConfig, UpliftConfig
from cfjax.experiments.transport import format_llm, merge_llm
from cfjax.infra.executors import Executor
from cfjax.experiments.common import run_pool, write_results
from cfjax.experiments.stats import bootstrap, clusters_from_outcomes, fmt_interval, paired_difference

__all__ = ["METHODS", "CompareMethod", "methods", "CompareConfig", "Meter", "MeteredBackbone", "MeteredWorld", "run_compare", "compare_main",
           "format_compare", "compare_outputs"]

#: the built-in rows, in print order (:func:`methods` adds every registered memory system that fits)
METHODS = ("none", "countermem", "antipersist", "upliftmem")


@dataclass(frozen=True)
class CompareConfig:
    """The shared protocol and each method's own config (papers' defaults unless ``quick``)."""

    seeds: tuple[int, ...] = (0, 1, 2)  # backbone seeds, shared by every method
    split_seed: int = 12345
    max_tasks: int = 0  # tasks per split, spread over it (0 = all)
    countermem: CounterMemConfig = field(default_factory=CounterMemConfig)
    antipersist: APConfig = field(default_factory=APConfig)
    upliftmem: UpliftConfig = field(default_factory=UpliftConfig)

    @classmethod
    def quick(cls) -> "CompareConfig":
        """``--quick``: one seed, 16 tasks per split, each method's smoke preset."""
        from cfjax.config import quick as quick_cfg
        from cfjax.experiments.upliftmem.runner import quick_config

        ap = quick_cfg(APConfig())
        return cls(seeds=(0,), max_tasks=16, countermem=quick_cfg(CounterMemConfig()),
                   antipersist=dataclasses.replace(ap, iterations=2, tasks_per_iteration=16),
                   upliftmem=quick_config(UpliftConfig()))


# --------------------------------------------------------------------------- metering

@dataclass
class Meter:
    """Backbone calls/tokens and evaluator requests per phase (``train`` | ``eval``)."""

    phase: str = "train"
    counts: dict = field(default_factory=lambda: {p: {"llm_calls": 0, "tokens": 0, "eval_calls": 0}
                                                  for p in ("train", "eval")})

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def llm(self, usage) -> None:
        with self._lock:  # held-out episodes may run on threads (--max-inflight)
            c = self.counts[self.phase]
            c["llm_calls"] += 1
            c["tokens"] += usage.total

    def evaluation(self) -> None:
        with self._lock:
            self.counts[self.phase]["eval_calls"] += 1


class MeteredBackbone:
    """A backbone whose every call is counted by a :class:`Meter` (then passed through unchanged).

    Every model call of every kind goes through the one generic ``call(kind, req)``, so metering it
    counts each call's usage exactly once, whichever memory system made it."""

    def __init__(self, inner, meter: Meter) -> None:
        self._inner, self._meter = inner, meter
        self.name = getattr(inner, "name", "backbone")

    def call(self, kind, req):
        res = self._inner.call(kind, req)
        self._meter.llm(res.usage)
        return res

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


class MeteredWorld:
    """A world whose every evaluation request is counted (the memoising cache sits inside)."""

    def __init__(self, inner, meter: Meter) -> None:
        self._inner, self._meter = inner, meter

    def evaluate(self, task, action: str):
        self._meter.evaluation()
        return self._inner.evaluate(task, action)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


# --------------------------------------------------------------------------- one job

@dataclass(frozen=True)
class CompareJob:
    suite: str
    root: str
    method: str  # countermem (also runs none) | antipersist | upliftmem
    seed: int
    cfg: CompareConfig
    out_dir: str
    backbone: object = None


def splits_for(suite, cfg: CompareConfig):
    from cfjax.experiments.common import quick_splits

    sp = suite.splits(seed=cfg.split_seed, n_val=cfg.countermem.n_val)
    return quick_splits(sp, cfg.max_tasks) if cfg.max_tasks else sp


def _run_countermem(suite, sp, backbone, world, cfg: CounterMemConfig, seed: int, meter: Meter) -> dict:
    from cfjax.countermem.agent import Agent, skip_policy
    from cfjax.countermem.pipeline import EP_EVAL, greedy_policy, construct, jitted_selector, train_selector
    from cfjax.countermem.store import MemoryStore
    from cfjax.infra.ledger import Ledger

    store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    agent = Agent(backbone, world, cfg, store=store, envs=dict(suite.envs()), edits=suite.edits)
    construct(agent, sp.build, seed=seed)
    params, _, _ = train_selector(agent, sp.train, sp.val, seed=cfg.selector_seeds[0])
    greedy = greedy_policy(jitted_selector(cfg.dqn), params)
    meter.phase = "eval"
    led = Ledger("eval")
    out = {"none": [], "countermem": []}
    for i, t in enumerate(sp.eval):
        out["none"].append(int(agent.run_episode(t, skip_policy, led, episode=EP_EVAL + i, memory=False).solved))
    none_counts = dict(meter.counts["eval"])
    for i, t in enumerate(sp.eval):
        out["countermem"].append(int(agent.run_episode(t, greedy, led, episode=EP_EVAL + i, memory=True).solved))
    cm_eval = {k: meter.counts["eval"][k] - none_counts[k] for k in none_counts}
    return {"outcomes": out, "memory": {"records": len(store)},
            "cost": {"none": {"train": {"llm_calls": 0, "tokens": 0, "eval_calls": 0}, "eval": none_counts},
                     "countermem": {"train": meter.counts["train"], "eval": cm_eval}}}


def _run_antipersist(suite, sp, backbone, world, cfg: APConfig, seed: int, meter: Meter, out_dir: Path) -> dict:
    from cfjax.antipersist.protocol import run_method

    class _Bar:  # the protocol's progress hook: back to training after each iteration's evaluation
        def update(self, n: int = 1) -> None:
            meter.phase = "train"

        def set_postfix_str(self, s: str) -> None: ...

        def close(self) -> None: ...

    last_eval: dict = {}

    def on_eval(state) -> None:  # called before and after each iteration's evaluation
        if meter.phase != "eval":
            meter.phase = "eval"
            last_eval.clear()
            last_eval.update(meter.counts["eval"])

    train_pool = list(sp.build) + list(sp.train) + list(sp.val)
    results, state = run_method("anti_persistence", seed=seed, train_pool=train_pool, eval_tasks=list(sp.eval),
                                backbone=backbone, world=world, edits=suite.edits, cfg=cfg, out_dir=out_dir,
                                progress=lambda desc, n: _Bar(), on_eval=on_eval)
    solved = results[-1].solved
    final_eval = {k: meter.counts["eval"][k] - last_eval.get(k, 0) for k in meter.counts["eval"]}
    return {"outcomes": {"antipersist": [int(solved[t.task_id]) for t in sp.eval]},
            "memory": {"trajectories": len(state.trajectories), "log_entries": len(state.log) if state.log else 0},
            "cost": {"antipersist": {"train": meter.counts["train"], "eval": final_eval,
                                     "eval_all_iterations": meter.counts["eval"]}}}


def _run_upliftmem(suite, sp, backbone, world, cfg: UpliftConfig, seed: int, meter: Meter) -> dict:
    from cfjax.uplift import AgentExecutor, UpliftRun

    executor = AgentExecutor(backbone, world, suite.edits, max_attempts=cfg.training.max_attempts)
    run = UpliftRun(cfg, executor, domain=getattr(suite, "base", suite.name), k_max=cfg.retrieval.k_for(sp.eval[0].domain),
                    writer_backbone=backbone)
    run.bootstrap(list(sp.build), seed=seed)
    run.warmup()
    run.train(list(sp.train) + list(sp.val), seed_base=seed * 1_000_003 + 1000)
    meter.phase = "eval"
    cfg_eval = dataclasses.replace(cfg, eval_seed=seed * 1_000_003 + 900_000)
    run.cfg = cfg_eval
    res = run.evaluate(list(sp.eval), repeats=1, rows=("upliftmem",))
    return {"outcomes": {"upliftmem": res.outcomes["upliftmem"][0]}, "memory": {"pool": len(run.pool)},
            "cost": {"upliftmem": {"train": meter.counts["train"], "eval": meter.counts["eval"],
                                   "executions": run.counts()}}}


def _run_system(name: str):
    """The compare method of a registered memory system (:mod:`cfjax.memory`): built from the memory-free
    episodes of ``T_build`` (training phase), frozen, evaluated with its recall on the held-out tasks under
    CounterMem's evaluation episode ids (so its draws are those of the ``none`` row: common random numbers)
    and attempt limit."""

    def run(suite, sp, backbone, world, cfg: CompareConfig, seed: int, meter: Meter, out_dir: Path) -> dict:
        from cfjax.countermem.pipeline import EP_BUILD, EP_EVAL
        from cfjax.infra.ledger import Ledger
        from cfjax.memory import SystemContext, build_experience, recall_episode, rollout_fn
        from cfjax.registry import MEMORY_SYSTEMS

        info = MEMORY_SYSTEMS.get(name)
        max_attempts = cfg.countermem.agent.max_attempts
        led = Ledger(f"{name}/build")
        system = info.make(SystemContext(backbone, suite.edits, max_attempts, seed, led,
                                         rollout_fn(backbone=backbone, world=world, edits=suite.edits, ledger=led,
                                                    max_attempts=max_attempts)))
        system.build(build_experience(list(sp.build), backbone=backbone, world=world, edits=suite.edits, ledger=led,
                                      episode0=EP_BUILD, max_attempts=max_attempts))
        system.freeze()
        meter.phase = "eval"
        ev = Ledger("eval")
        solved = [int(recall_episode(t, system, info, backbone=backbone, world=world, edits=suite.edits, ledger=ev,
                                     episode=EP_EVAL + i, max_attempts=max_attempts, measure=False).solved)
                  for i, t in enumerate(sp.eval)]
        return {"outcomes": {name: solved}, "memory": system.summary(),
                "cost": {name: {"train": meter.counts["train"], "eval": meter.counts["eval"]}}}

    return run


@dataclass(frozen=True)
class CompareMethod:
    """One job kind of ``compare``: ``run(suite, splits, backbone, world, cfg, seed, meter, out_dir) → dict``
    with the rows it produces (``outcomes``), its costs and its memory counts; ``config`` names the
    :class:`CompareConfig` section whose backbone settings it uses; ``cost`` weighs it for scheduling."""

    name: str
    run: Callable[..., dict]
    rows: tuple[str, ...]
    config: str = "countermem"
    cost: float = 1.0


def _builtin_methods() -> list[CompareMethod]:
    return [
        CompareMethod("countermem", lambda suite, sp, bb, w, cfg, seed, meter, out: _run_countermem(
            suite, sp, bb, w, cfg.countermem, seed, meter), ("none", "countermem"), "countermem", 2),
        CompareMethod("antipersist", lambda suite, sp, bb, w, cfg, seed, meter, out: _run_antipersist(
            suite, sp, bb, w, cfg.antipersist, seed, meter, out / suite.name / f"antipersist_seed_{seed}"),
            ("antipersist",), "antipersist", 2),
        CompareMethod("upliftmem", lambda suite, sp, bb, w, cfg, seed, meter, out: _run_upliftmem(
            suite, sp, bb, w, cfg.upliftmem, seed, meter), ("upliftmem",), "upliftmem", 3),
    ]


def methods() -> dict[str, CompareMethod]:
    """Every compare method: the three papers' methods, then each registered memory system whose
    ``runners`` include ``compare``."""
    from cfjax.registry import MEMORY_SYSTEMS

    out = {m.name: m for m in _builtin_methods()}
    for name, info in MEMORY_SYSTEMS.items():
        if "compare" in info.runners and name not in out and name not in METHODS:
            out[name] = CompareMethod(name, _run_system(name), (name,), "countermem", 1)
    return out


def method_rows(names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The rows of the chosen methods (default: all), in print order."""
    ms = methods()
    chosen = list(ms) if names is None else list(names)
    return tuple(r for m in chosen for r in ms[m].rows)


def run_compare_job(job: CompareJob) -> dict:
    """One (suite, method, seed); returns plain data (the function worker processes run)."""
    from cfjax.experiments.worlds import open_world
    from cfjax.experiments.backbones import BackboneSpec

    t0 = time.perf_counter()
    suite, _, world = open_world(job.suite, job.root)
    sp = splits_for(suite, job.cfg)
    spec = job.backbone or BackboneSpec("scripted")
    meter = Meter()
    method = methods()[job.method]
    backbone = MeteredBackbone(spec.make(suite, job.seed, getattr(job.cfg, method.config)), meter)
    mworld = MeteredWorld(world, meter)
    random.seed(job.seed)
    got = method.run(suite, sp, backbone, mworld, job.cfg, job.seed, meter, Path(job.out_dir))
    from cfjax.experiments.backbones import backbone_stats

    llm = backbone_stats(backbone._inner)
    return {"suite": job.suite, "method": job.method, "seed": job.seed, "llm": llm,
            "task_ids": [t.task_id for t in sp.eval],
            **got, "seconds": round(time.perf_counter() - t0, 2)}


def _init_worker() -> None:  # pragma: no cover - runs in worker processes
    os.environ.setdefault("OMP_NUM_THREADS", "1")


# --------------------------------------------------------------------------- the run

def _pairwise(outcomes: dict, rows: Sequence[str], n_boot: int = 2000) -> dict:
    clusters = clusters_from_outcomes(outcomes)
    table = {r: {"success": bootstrap(clusters, r, n_boot=n_boot).as_dict()} for r in rows}
    diffs = {}
    for a, b in itertools.combinations(rows, 2):
        diffs[f"{b} - {a}"] = paired_difference(clusters, b, a, n_boot=n_boot).as_dict()
    return {"rows": table, "differences": diffs}


def _costs(jobs: Sequence[dict], suite: str | None = None, rows: Sequence[str] = METHODS) -> dict:
    """Mean per (suite, seed) of each method's training and evaluation costs, per held-out task for eval."""
    out: dict = {}
    for m in rows:
        blocks = [j["cost"][m] for j in jobs if m in j.get("cost", {}) and (suite is None or j["suite"] == suite)]
        if not blocks:
            continue
        n_eval = np.mean([len(j["task_ids"]) for j in jobs if m in j.get("cost", {})])
        out[m] = {
            "train_llm_calls": float(np.mean([b["train"]["llm_calls"] for b in blocks])),
            "train_tokens": float(np.mean([b["train"]["tokens"] for b in blocks])),
            "train_eval_calls": float(np.mean([b["train"]["eval_calls"] for b in blocks])),
            "eval_tokens_per_task": float(np.mean([b["eval"]["tokens"] for b in blocks]) / max(n_eval, 1)),
            "eval_calls_per_task": float(np.mean([b["eval"]["eval_calls"] for b in blocks]) / max(n_eval, 1)),
        }
        if m == "upliftmem":
            out[m]["train_executions"] = float(np.mean([b["executions"]["total"] for b in blocks]))
    return out


def format_compare(payload: dict) -> str:
    lines = [f"The three methods side by side — {', '.join(payload['suites'])} ({payload['backbone']}); held-out "
             f"success % [95% CI], the same tasks and seeds {payload['seeds']} for every row; differences paired"]
    for scope, block in [("all suites", payload["summary"])] + [(s, p) for s, p in payload["per_suite"].items()]:
        lines.append(f"\n[{scope}]")
        lines.append(f"{'row':<12} {'success':>20} {'vs none':>22} {'train LLM calls':>16} {'train evals':>12} "
                     f"{'eval tok/task':>14}")
        costs = block.get("costs", {})
        for r in payload["rows"]:
            t = block["rows"].get(r)
            if t is None:
                continue
            d = block["differences"].get(f"{r} - none")
            c = costs.get(r, {})
            lines.append(f"{r:<12} {fmt_interval(t['success']):>20} {fmt_interval(d, signed=True):>22} "
                         f"{c.get('train_llm_calls', 0):>16.0f} {c.get('train_eval_calls', 0):>12.0f} "
                         f"{c.get('eval_tokens_per_task', 0):>14.0f}")
        lines.append("between methods: " + "; ".join(
            f"{k} {fmt_interval(v, signed=True)}" for k, v in block["differences"].items()
            if "none" not in k.split(" - ")))
    return "\n".join(lines)


def _plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scopes = ["all suites"] + list(payload["per_suite"])
    blocks = [payload["summary"]] + [payload["per_suite"][s] for s in payload["per_suite"]]
    rows = payload["rows"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    width = 0.8 / len(rows)
    for k, r in enumerate(rows):
        m = [b["rows"][r]["success"]["mean"] for b in blocks]
        lo = [b["rows"][r]["success"]["mean"] - b["rows"][r]["success"]["lo"] for b in blocks]
        hi = [b["rows"][r]["success"]["hi"] - b["rows"][r]["success"]["mean"] for b in blocks]
        ax.bar(np.arange(len(scopes)) + k * width, m, width, yerr=[lo, hi], capsize=2, label=r)
    ax.set_xticks(np.arange(len(scopes)) + width * (len(rows) - 1) / 2, scopes)
    ax.set_ylabel("held-out success % (95% CI)")
    ax.legend(fontsize=8)
    ax.set_title(payload["backbone"], fontsize=8)
    costs = payload["summary"]["costs"]
    for r in rows:
        if r in costs:
            x = costs[r]["train_llm_calls"] + costs[r]["train_eval_calls"]
            s = payload["summary"]["rows"][r]["success"]
            ax2.errorbar([x + 1], [s["mean"]], yerr=[[s["mean"] - s["lo"]], [s["hi"] - s["mean"]]], fmt="o", capsize=3)
            ax2.annotate(r, (x + 1, s["mean"]), fontsize=8)
    ax2.set_xscale("log")
    ax2.set_xlabel("training cost + 1: backbone calls + evaluator calls (per suite and seed, log scale)")
    ax2.set_ylabel("held-out success %")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_compare(out_dir: str | Path, *, suites: Sequence[str], cfg: CompareConfig = CompareConfig(),
                workers: int = 1, backbone=None, log: Callable[[str], None] = print,
                executor: Executor = "local", only: Sequence[str] | None = None) -> dict:
    """Every suite × method × seed; writes ``results.json``, ``report.txt``, ``compare.png``; the jobs
    run on the local process pool or as Ray tasks (``executor``). ``only``: the methods to run (default: the
    three papers' methods, as before; any registered memory system of :func:`methods` joins by name;
    ``countermem`` always runs, since it produces the ``none`` row)."""
    from cfjax.config import save_toml
    from cfjax.domains import build_suite
    from cfjax.experiments.backbones import BackboneSpec

    spec = backbone or BackboneSpec("scripted")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_toml(cfg, out / "config.toml")
    roots = {}
    for s in suites:
        roots[s] = out / "suites" / s
        build_suite(s, roots[s])
    ms = methods()
    chosen = ([m for m in ms if m in METHODS] if only is None
              else ["countermem"] + [m for m in only if m != "countermem"])
    bad = [m for m in chosen if m not in ms]
    if bad:
        raise ValueError(f"unknown compare method(s) {bad}; choose from {', '.join(ms)}")
    rows_all = method_rows(chosen)
    jobs = [CompareJob(s, str(roots[s]), m, seed, cfg, str(out), spec) for s in suites
            for m in chosen for seed in cfg.seeds]
    def note(d: dict) -> None:
        log(f"  {d['suite']}/{d['method']} seed {d['seed']}: " + "  ".join(
            f"{r} {100 * np.mean(v):.1f}%" for r, v in d["outcomes"].items()) + f" ({d['seconds']:.0f}s)")

    from cfjax.experiments.worlds import close_worlds

    done = run_pool(run_compare_job, jobs, workers=workers, cost=lambda j: ms[j.method].cost, note=note,
                    initializer=_init_worker, serial_done=close_worlds, executor=executor)
    outcomes: dict = {}
    for s in suites:
        mine = [d for d in done if d and d["suite"] == s]
        ids = mine[0]["task_ids"]
        if any(d["task_ids"] != ids for d in mine):
            raise RuntimeError(f"{s}: the methods were evaluated on different tasks")
        rows = {r: [next(d for d in mine if r in d["outcomes"] and d["seed"] == seed)["outcomes"][r]
                    for seed in cfg.seeds] for r in rows_all}
        outcomes[s] = {str(cfg.split_seed): {"task_ids": ids, "seeds": list(cfg.seeds), "rows": rows}}
    per_suite = {}
    for s in suites:
        block = _pairwise({s: outcomes[s]}, rows_all)
        block["costs"] = _costs([d for d in done if d], s, rows_all)
        block["memory"] = {d["method"]: d["memory"] for d in done if d and d["suite"] == s}
        per_suite[s] = block
    summary = _pairwise(outcomes, rows_all)
    summary["costs"] = _costs([d for d in done if d], None, rows_all)
    payload = {"backbone": spec.label, "agent": spec.agent, "suites": list(suites), "seeds": list(cfg.seeds),
               "split_seed": cfg.split_seed,
               "rows": list(rows_all), "summary": summary, "per_suite": per_suite, "outcomes": outcomes,
               "jobs": [{k: d[k] for k in ("suite", "method", "seed", "seconds")} for d in done if d],
               "llm": merge_llm(d.get("llm") for d in done if d)}
    text = format_compare(payload)
    if payload["llm"]:
        text += "\n\n" + format_llm(payload["llm"])
    write_results(out, payload, text=text, report="report.txt")
    _plot(payload, out / "compare.png")
    log(text)
    return payload


def compare_outputs() -> list[str]:
    """What ``cfjax compare --force`` removes from ``--out``."""
    from cfjax.domains import SUITES

    return ["config.toml", "results.json", "report.txt", "compare.png"] + [f"suites/{n}" for n in SUITES] + \
        [f"{n}" for n in SUITES]


def compare_main(*, suites: Sequence[str], out: str | Path, quick: bool = False, workers: int | None = None,
                 backbone="scripted", log: Callable[[str], None] = print, existing: str = "refuse",
                 executor: Executor = "local", cfg: CompareConfig | None = None,
                 only: Sequence[str] | None = None) -> dict:
    """``cfjax compare``: :func:`run_compare` with a header and a closing line.

    ``cfg``: the config to run (the CLI's, with its ``--set`` overrides); ``None`` =
    :meth:`CompareConfig.quick` if ``quick``, else the defaults."""
    from cfjax.experiments.backbones import backbone_spec, default_workers
    from cfjax.experiments.common import resolve_suites
    from cfjax.infra.io import prepare_output_dir

    names = resolve_suites(suites)
    if cfg is None:
        cfg = CompareConfig.quick() if quick else CompareConfig()
    spec = backbone_spec(backbone) if isinstance(backbone, str) else backbone
    workers = workers if workers is not None else default_workers(spec)
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=compare_outputs(), resumable=False, command="cfjax compare")
    log(f"cfjax compare: suites={names} backbone={spec.label} seeds={list(cfg.seeds)} "
        f"tasks per split={cfg.max_tasks or 'all'}, {workers} worker(s){' (quick)' if quick else ''} → {out}")
    t0 = time.perf_counter()
    payload = run_compare(out, suites=names, cfg=cfg, workers=workers, backbone=spec, log=log, executor=executor,
                          only=only)
    log(f"\nwrote {out / 'results.json'}, {out / 'report.txt'}, {out / 'compare.png'} ({time.perf_counter() - t0:.0f}s)")
    return payload

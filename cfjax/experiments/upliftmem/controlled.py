"""UpliftMem's controlled retrieval experiment on fixed memory stores (MemSyco-like suite).

papers/upliftmem.md §5.3 (RQ2), §5.4 Table 3 (ablations at K = 5, averaged over five stores),
§5.6 (RQ5: K ∈ {3, 5, 10}), App. D.1 (dialogue-grouped 70:30 split, seed 42), D.2 (the store and
the executor are held fixed, only the retriever changes), D.5 (metrics; equal-weight store average).

Per (store, K, variant) one :class:`cfjax.uplift.UpliftRun`:

* the **store** is fixed: every memory of every instance's store (``suite.store(task, store)``) is
  registered and admitted in a :class:`~cfjax.uplift.MemoryPool` with the suite's memory ids, and the
  run's ``recall=`` returns *that task's own* store, whole, in native similarity order (the suite's
  :func:`~cfjax.experiments.upliftmem.memsyco.native_retrieve` ranking) with its cosine similarities. So the native
  row (``similarity_topk``: recall order, first K) and the trained retriever see exactly the same
  candidates;
* the **executor** is fixed: :class:`~cfjax.experiments.upliftmem.memsyco.MemSycoExecutor` (a scripted answerer —
  a simulator, not an LLM), ``writer_backbone=None`` (no writing: bootstrap only runs its no-memory
  references, then bootstrap probing);
* training: ``bootstrap(train)`` (probing), ``warmup()``, ``train(train)``; evaluation on the test
  split with the fixed checkpoint, rows ``no_memory``, ``similarity_topk`` and the variant, over
  ``repeats`` draft seeds.

Per row: Decision, Syco, Select, Old, Correct (:func:`cfjax.experiments.upliftmem.memsyco.metrics`), per store
averaged over the repeats, then over stores with equal weight. Per variant: the paired 95%
task-bootstrap interval of (variant − native) for each metric (:mod:`cfjax.experiments.stats`: one
cluster per (store, scenario), weights equal per store and per scenario, so the point estimate is
exactly the table's store-averaged difference).

Run: ``cfjax upliftmem controlled --out DIR [--quick]`` (:func:`controlled_main`; ``python -m
cfjax.experiments.upliftmem.controlled`` is the same command). The executor is the suite's scripted
answerer, held fixed so that only the retriever changes: the command refuses a non-scripted
``--backbone`` (an LLM would answer the prompts, not the suite's frozen executor).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from cfjax.config.uplift import UpliftConfig
from cfjax.experiments.upliftmem.memsyco import (SCENARIOS, STORES, MemSycoConfig, MemSycoExecutor, build_suite, metrics,
                                       native_retrieve)
from cfjax.experiments.upliftmem.memsyco.suite import query_text
from cfjax.experiments.stats import clusters_from_outcomes, fmt_interval, paired_difference
from cfjax.infra.embed import HashingEmbedder
from cfjax.experiments.common import write_results
from cfjax.uplift import TRAINING_ROWS, MemoryPool, UpliftRun
from cfjax.uplift.core import Memory

__all__ = ["LABEL", "METRICS", "NATIVE", "OWNED", "controlled_config", "run_controlled", "format_controlled",
           "controlled_main", "main"]

LABEL = "scripted answerer (simulator, not an LLM)"
NATIVE = "similarity_topk"
#: table metrics: (info field, scenarios, higher is better)
METRICS = {
    "Decision": ("correct", ("objective_fact", "scope_control", "evidence_conflict"), True),
    "Syco": ("sycophantic", ("objective_fact", "scope_control", "evidence_conflict"), False),
    "Select": ("correct", ("valid_selection",), True),
    "Old": ("used_outdated", ("valid_selection",), False),
    "Correct": ("used_correct_memory", ("personalized_use",), True),
}
_SUMMARY = tuple(METRICS) + ("accuracy",)
#: what ``cfjax upliftmem controlled`` writes in ``--out`` (``--force`` removes exactly these)
OWNED = ("results.json", "report.txt")


def controlled_config(cfg: UpliftConfig = UpliftConfig(), *, quick: bool = False, epochs: int | None = None
                      ) -> UpliftConfig:
    """The config of a controlled run. ``quick``: a smoke run (1 epoch, 16 warm-up steps, 4 steps per
    update, probe budget 20, 256-row probe windows, 1 evaluation repeat, 2 bootstrap sets)."""
    if quick:
        cfg = replace(cfg, eval_repeats=1,
                      training=replace(cfg.training, epochs=1, warmup_steps=16, steps_per_update=4, bootstrap_sets=2),
                      probing=replace(cfg.probing, budget=20, max_pool=256, max_comparisons=256))
    if epochs is not None:
        cfg = replace(cfg, training=replace(cfg.training, epochs=int(epochs)))
    return cfg


class _StoreRecall:
    """``task → (its store's memories in native order, cosine similarities)`` for one store name."""

    def __init__(self, suite, store: str) -> None:
        self.suite, self.store = suite, store
        self.embedder = HashingEmbedder(dim=512)  # the native retriever's embedder (suite.native_retrieve)
        self._cache: dict[str, tuple[list[Memory], np.ndarray]] = {}
        self.offered: dict[str, tuple[str, ...]] = {}  # task id → ids handed to the retriever (recall order)

    def __call__(self, task) -> tuple[list[Memory], np.ndarray]:
        hit = self._cache.get(task.task_id)
        if hit is None:
            mems = self.suite.store(task, self.store)
            ranked = native_retrieve(task, mems, len(mems))
            q = self.embedder.embed([query_text(task)])[0]
            m = self.embedder.embed([x.text for x in ranked])
            hit = self._cache[task.task_id] = (ranked, (m @ q).astype(np.float32))
            self.offered[task.task_id] = tuple(x.mem_id for x in ranked)
        return list(hit[0]), hit[1].copy()


def _store_pool(suite, store: str, tasks: Sequence, embed_dim: int) -> MemoryPool:
    pool = MemoryPool(embed_dim)
    seen: set[str] = set()
    for t in tasks:
        for m in suite.store(t, store):
            if m.mem_id not in seen:
                seen.add(m.mem_id)
                pool.add(m)  # registers and admits the suite's own Memory (ids unchanged)
    return pool


def _mean_dicts(ds: Sequence[dict]) -> dict:
    out = {}
    for k in _SUMMARY:
        xs = [d[k] for d in ds if d.get(k) is not None]
        out[k] = float(np.mean(xs)) if xs else None
    scen = {}
    for s in SCENARIOS:
        rows = [d["scenarios"][s] for d in ds if s in d["scenarios"]]
        if rows:
            scen[s] = {k: float(np.mean([r[k] for r in rows if r[k] is not None]))
                       for k in rows[0] if k != "n" and any(r[k] is not None for r in rows)}
            scen[s]["n"] = rows[0]["n"]
    out["scenarios"] = scen
    return out


def _indicator(info: dict, field: str) -> int:
    return int(bool(info.get(field)))


def _run_store(cfg: UpliftConfig, suite, train, test, store: str, k: int, variants: Sequence[str], repeats: int,
               executor_seed: int, log: Callable[[str], None]) -> dict:
    recall = _StoreRecall(suite, store)
    executor = MemSycoExecutor(suite, suite.config, seed=executor_seed)
    rows: dict[str, dict] = {}
    per_task: dict[str, dict[str, list[list[int]]]] = {}  # row → field → [repeat][task]
    sets: dict[str, list[list[list[str]]]] = {}
    infos_first: dict[str, list[list[dict]]] = {}
    checks = {"no_memory_identical": True, "native_identical": True, "variant_within_offer": True}
    train_info: dict[str, dict] = {}
    for v in variants:
        t0 = time.perf_counter()
        pool = _store_pool(suite, store, list(train) + list(test), cfg.retrieval.embed_dim)
        run = UpliftRun(cfg, executor, domain="memsyco", k_max=k, writer_backbone=None, pool=pool, recall=recall,
                        row=TRAINING_ROWS[v], log=log)
        run.bootstrap(train)
        run.warmup()
        run.train(train)
        res = run.evaluate(test, repeats=repeats, rows=("no_memory", NATIVE, "upliftmem"), row_name=v)
        train_info[v] = {"counts": run.counts(), "eval_counts": dict(run.eval_counts),
                         "h_effective": run.train_log.h_effective, "updates": len(run.train_log.updates),
                         "windows": run.train_log.windows, "seconds": round(time.perf_counter() - t0, 2)}
        for row in ("no_memory", NATIVE):
            if row in infos_first:
                same = infos_first[row] == res.infos[row] and sets[row] == [[list(s) for s in r] for r in res.sets[row]]
                checks["no_memory_identical" if row == "no_memory" else "native_identical"] &= same
                continue
            infos_first[row] = res.infos[row]
        for row in ("no_memory", NATIVE, v):
            if row in rows:
                continue
            per_rep = [metrics(test, res.infos[row][r]) for r in range(repeats)]
            rows[row] = _mean_dicts(per_rep)
            rows[row]["per_repeat"] = [{k2: m[k2] for k2 in _SUMMARY} for m in per_rep]
            rows[row]["mean_set_size"] = float(np.mean(res.set_sizes[row]))
            per_task[row] = {f: [[_indicator(i, f) for i in rep] for rep in res.infos[row]]
                             for f in ("correct", "sycophantic", "used_outdated", "used_correct_memory")}
            sets[row] = [[list(s) for s in rep] for rep in res.sets[row]]
        offered = [set(recall.offered[t.task_id]) for t in test]
        checks["variant_within_offer"] &= all(set(s) <= off for rep in res.sets[v] for s, off in zip(rep, offered))
        log(f"[{store} K={k}] {v}: Decision native {rows[NATIVE]['Decision']:.1f} → {rows[v]['Decision']:.1f}, "
            f"Syco {rows[NATIVE]['Syco']:.1f} → {rows[v]['Syco']:.1f} ({train_info[v]['seconds']:.0f}s)")
    suite_native = [[m.mem_id for m in native_retrieve(t, suite.store(t, store), k)] for t in test]
    checks["native_is_suite_topk"] = all(sorted(a) == sorted(b) for rep in sets[NATIVE] for a, b in zip(rep, suite_native))
    checks["offered_is_whole_store"] = all(
        sorted(recall.offered[t.task_id]) == sorted(m.mem_id for m in suite.store(t, store)) for t in test)
    return {"rows": rows, "per_task": per_task, "sets": sets, "checks": checks, "training": train_info,
            "offered": {t.task_id: list(recall.offered[t.task_id]) for t in test}}


def _outcome_blocks(per_store: dict, test, row_names: Sequence[str], repeats: int, seeds: Sequence[int]) -> dict:
    """``{metric: {store: {scenario: {"task_ids", "seeds", "rows": {row: [[0/1] per repeat]}}}}}``."""
    scen_of = [t.attrs["scenario"] for t in test]
    out: dict[str, dict] = {}
    for name, (field, scens, _) in METRICS.items():
        block: dict[str, dict] = {}
        for store, res in per_store.items():
            sb = {}
            for s in scens:
                idx = [i for i, x in enumerate(scen_of) if x == s]
                if not idx:
                    continue
                sb[s] = {"task_ids": [test[i].task_id for i in idx], "seeds": list(seeds),
                         "rows": {r: [[res["per_task"][r][field][rep][i] for i in idx] for rep in range(repeats)]
                                  for r in row_names}}
            block[store] = sb
        out[name] = block
    return out


def run_controlled(cfg: UpliftConfig, *, stores: Sequence[str] | None = ("rag", "mem0", "amem", "memgpt", "lightmem"),
                   k_values: Sequence[int] = (5,), variants: Sequence[str] = ("upliftmem",), quick: bool = False,
                   repeats: int | None = None, log: Callable[[str], None] = print, n_boot: int = 2000) -> dict:
    """The controlled experiment (module docstring). ``quick`` builds the quick suite preset (15
    instances per scenario); the training config is ``cfg`` as given (see :func:`controlled_config`).
    ``stores=None``: all five (two with ``quick``)."""
    if stores is None:
        stores = STORES[:2] if quick else STORES
    stores = tuple(stores)
    for s in stores:
        if s not in STORES:
            raise ValueError(f"unknown store {s!r}; choose from {STORES}")
    for v in variants:
        if v not in TRAINING_ROWS:
            raise ValueError(f"unknown variant {v!r}; choose from {tuple(TRAINING_ROWS)}")
    if not variants:
        raise ValueError("need at least one variant")
    reps = cfg.eval_repeats if repeats is None else int(repeats)
    scfg = MemSycoConfig.quick() if quick else MemSycoConfig()
    suite = build_suite(scfg)
    train, test = suite.split(seed=42)
    seeds = [cfg.eval_seed + r for r in range(reps)]
    log(f"MemSyco controlled: {len(train)} train / {len(test)} test instances, stores {stores}, K {tuple(k_values)}, "
        f"variants {tuple(variants)}, {reps} repeat(s) — {LABEL}")
    row_names = ("no_memory", NATIVE) + tuple(variants)
    by_k: dict[str, dict] = {}
    for k in k_values:
        per_store = {s: _run_store(cfg, suite, train, test, s, int(k), variants, reps, cfg.backbone_seed, log)
                     for s in stores}
        avg = {r: {m: _mean_or_none([per_store[s]["rows"][r][m] for s in stores]) for m in _SUMMARY}
               for r in row_names}
        outcomes = _outcome_blocks(per_store, test, row_names, reps, seeds)
        deltas: dict[str, dict] = {}
        for v in variants:
            deltas[v] = {}
            for name in METRICS:
                cl = clusters_from_outcomes(outcomes[name])
                iv = paired_difference(cl, v, NATIVE, n_boot=n_boot, seed=0)
                per = {s: paired_difference(clusters_from_outcomes(outcomes[name], [s]), v, NATIVE, n_boot=n_boot,
                                            seed=0).as_dict() for s in stores}
                deltas[v][name] = {**iv.as_dict(), "per_store": per}
        by_k[str(k)] = {"average": avg, "deltas": deltas, "stores": per_store, "outcomes": outcomes}
    return {"label": LABEL, "suite": {"instances_per_scenario": scfg.instances_per_scenario, "quick": quick,
                                      "split_seed": 42, "n_train": len(train), "n_test": len(test),
                                      "test_task_ids": [t.task_id for t in test]},
            "stores": list(stores), "k_values": [int(k) for k in k_values], "variants": list(variants),
            "rows": list(row_names), "repeats": reps, "eval_seeds": seeds,
            "config": {"epochs": cfg.training.epochs, "warmup_steps": cfg.training.warmup_steps,
                       "steps_per_update": cfg.training.steps_per_update,
                       "bootstrap_sets": cfg.training.bootstrap_sets, "probe_budget": cfg.probing.budget,
                       "max_pool": cfg.probing.max_pool, "max_comparisons": cfg.probing.max_comparisons,
                       "token_budget": cfg.retrieval.token_budget, "recall": cfg.retrieval.recall,
                       "executor_seed": cfg.backbone_seed},
            "by_k": by_k}


def _mean_or_none(xs):
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def format_controlled(payload: dict) -> str:
    """A Table-3-like table per K: rows Native / each variant (and No memory for reference); columns
    Decision↑ Syco↓ Select↑ Old↓ Correct↑, each variant with its paired 95% interval of the change from
    native (percentage points)."""
    names = {"no_memory": "No memory", NATIVE: "Native"}
    cols = (("Decision", "↑"), ("Syco", "↓"), ("Select", "↑"), ("Old", "↓"), ("Correct", "↑"))
    lines = []
    for k, blk in payload["by_k"].items():
        lines.append(f"MemSyco-like controlled retrieval, K={k}, fixed stores {', '.join(payload['stores'])} "
                     f"(equal-weight average), {payload['repeats']} eval repeat(s), "
                     f"{payload['suite']['n_test']} test instances — {payload['label']}")
        head = f"{'row':<16}" + "".join(f"{c + a:>32}" for c, a in cols)
        lines.append(head)
        lines.append("-" * len(head))
        for r in payload["rows"]:
            avg = blk["average"][r]
            cells = []
            for c, _ in cols:
                v = avg.get(c)
                s = "—" if v is None else f"{v:5.1f}"
                if r in blk["deltas"]:
                    s += f" ({fmt_interval(blk['deltas'][r][c], signed=True)})"
                cells.append(f"{s:>32}")
            lines.append(f"{names.get(r, r):<16}" + "".join(cells))
        lines.append("(change vs Native in parentheses: mean [paired 95% task-bootstrap interval], percentage points)")
        lines.append("Per store (Native → variant):")
        for s in payload["stores"]:
            st = blk["stores"][s]["rows"]
            for v in payload["variants"]:
                parts = [f"{c} {st[NATIVE][c]:.1f}→{st[v][c]:.1f}" for c, _ in cols if st[v].get(c) is not None]
                lines.append(f"  {s:<9} {v:<15} " + ", ".join(parts))
        lines.append("")
    return "\n".join(lines)


def controlled_main(*, out: str | Path, quick: bool = False, small: bool = False, stores: Sequence[str] | None = None,
                    k_values: Sequence[int] = (5,), variants: Sequence[str] = ("upliftmem",), epochs: int | None = None,
                    repeats: int | None = None, backbone: str = "scripted", log: Callable[[str], None] = print,
                    existing: str = "refuse", n_boot: int = 2000, cfg: UpliftConfig | None = None) -> dict:
    """``cfjax upliftmem controlled``: check the arguments (a refusal is one
    :class:`~cfjax.config.ConfigError` line), apply the ``--out`` policy
    (:func:`cfjax.infra.io.prepare_output_dir`: a non-empty directory is refused unless
    ``existing="force"``, which removes only :data:`OWNED`), run :func:`run_controlled` and write
    ``results.json`` and ``report.txt``. ``small``: the quick training config on the full suite. ``cfg``:
    the training config as built by the caller (the CLI: :func:`controlled_config` of the flags, then
    ``--set``); default ``controlled_config(UpliftConfig(), quick=quick or small, epochs=epochs)``."""
    from cfjax.config import ConfigError
    from cfjax.infra.io import prepare_output_dir

    kind = backbone if isinstance(backbone, str) else getattr(backbone, "kind", "scripted")
    if kind != "scripted":
        raise ConfigError(f"--backbone {kind}: the controlled MemSyco-like suite is answered by its frozen scripted "
                          "answerer (the executor is held fixed so that only the retriever changes), never by an LLM; "
                          "use --backbone scripted (an LLM executor: cfjax upliftmem stores --backbone ...)")
    if stores is not None:
        bad = [s for s in stores if s not in STORES]
        if bad or not stores:
            raise ConfigError(f"--stores: unknown store(s) {bad}; choose from {' '.join(STORES)}")
    bad = [v for v in variants if v not in TRAINING_ROWS]
    if bad or not variants:
        raise ConfigError(f"--variants: unknown row(s) {bad}; choose from {' '.join(TRAINING_ROWS)}")
    if not k_values or any(int(k) < 1 for k in k_values):
        raise ConfigError(f"--k: memory caps must be integers >= 1, got {list(k_values)}")
    if epochs is not None and int(epochs) < 1:
        raise ConfigError(f"--epochs: expected an integer >= 1, got {epochs}")
    if repeats is not None and int(repeats) < 1:
        raise ConfigError(f"--repeats: expected an integer >= 1, got {repeats}")
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=OWNED, resumable=False, command="cfjax upliftmem controlled")
    if cfg is None:
        cfg = controlled_config(UpliftConfig(), quick=quick or small, epochs=epochs)
    payload = run_controlled(cfg, stores=None if stores is None else tuple(stores),
                             k_values=tuple(int(k) for k in k_values), variants=tuple(variants), quick=quick,
                             repeats=repeats, log=log, n_boot=n_boot)
    write_results(out, payload, text=format_controlled(payload), log=log, report="report.txt")
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cfjax.experiments.upliftmem.controlled ARGS`` = ``cfjax upliftmem controlled ARGS``."""
    from cfjax.cli import main as cli_main

    return cli_main(["upliftmem", "controlled", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())

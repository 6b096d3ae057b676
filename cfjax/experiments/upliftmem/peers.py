"""The peer rows of ``cfjax upliftmem run`` (papers/upliftmem.md Table 1: MemP, MemRL, Mem0, MemGPT,
A-MEM, LightMem — every memory system registered with ``"upliftmem"`` in its runners).

UpliftMem says each peer "uses its own construction and retrieval procedure". One job per (suite,
peer, training seed):

* **construction** — the peer is built by its own pipeline (:meth:`~cfjax.memory.MemorySystem.build`)
  from the memory-free episodes of the tasks UpliftMem learns from, ``T_build ∪ T_train ∪ T_val``,
  run by the same frozen executor with the same attempt limit; the training seed offsets their draft
  seeds (so each seed is one construction, as each seed is one UpliftMem training run);
* **evaluation** — frozen, on ``T_eval`` with the same ``eval_repeats`` draft seeds as ``no_memory``
  (``cfg.eval_seed + r``: the same memory-free drafts, the pairing of Eq. 4): at every attempt the
  executor is shown the peer's recall *before drafting*, as a memory set (App. E.2's ``[id] text``
  blocks; a recall that is one text becomes one block).

Costs per row: the executions of construction (every episode once), the backbone calls and tokens of
construction (the peer's own calls plus the episodes') and the evaluator calls, as for every row.
"""

from __future__ import annotations

import time

from cfjax.infra.ledger import Ledger
from cfjax.llm.prompts import render_memory_set, split_memory_set
from cfjax.loop import draft_once, run_episode
from cfjax.memory import RecallQuery, SystemContext, build_experience, rollout_fn
from cfjax.types import MemoryText

__all__ = ["run_peer_job", "EP_PEER_BUILD"]

#: episode ids of a peer's construction episodes: EP_PEER_BUILD + seed · 100 000 + i
EP_PEER_BUILD = 3_000_000


def _as_set(mem: MemoryText | None) -> MemoryText | None:
    if mem is None or mem.kind == "memories":
        return mem
    return MemoryText("memories", render_memory_set([("m1", mem.text)]))


def run_peer_job(job) -> dict:
    """One (suite, peer, training seed) of ``upliftmem run`` (module docstring); the same plain-data
    shape as :func:`cfjax.experiments.upliftmem.runner.run_job`."""
    from cfjax.experiments.backbones import BackboneSpec, backbone_stats
    from cfjax.experiments.upliftmem.runner import splits_for
    from cfjax.experiments.worlds import open_world
    from cfjax.registry import MEMORY_SYSTEMS

    t0 = time.perf_counter()
    cfg = job.cfg
    info = MEMORY_SYSTEMS.get(job.variant)
    suite, _, world = open_world(job.suite, job.root, job.world_cache)
    sp = splits_for(suite, cfg)
    spec = job.backbone or BackboneSpec("scripted")
    backbone = spec.make(suite, cfg.backbone_seed, cfg)
    attempts = cfg.training.max_attempts
    seed = cfg.training.seed
    build = Ledger(f"{info.name}/build")
    system = info.make(SystemContext(backbone, suite.edits, attempts, seed, build,
                                     rollout_fn(backbone=backbone, world=world, edits=suite.edits, ledger=build,
                                                max_attempts=attempts)))
    source = list(sp.build) + list(sp.train) + list(sp.val)
    system.build(build_experience(source, backbone=backbone, world=world, edits=suite.edits, ledger=build,
                                  episode0=EP_PEER_BUILD + seed * 100_000, max_attempts=attempts))
    system.freeze()
    t_build = time.perf_counter() - t0
    evaluation = Ledger("uplift-eval")
    outcomes, rewards, sizes = [], [], []
    for r in range(cfg.eval_repeats):
        draft_seed = cfg.eval_seed + r
        solved, rew, size = [], [], []
        for task in sp.eval:
            shown: list[int] = []

            def draft(task, history, *, episode, attempt, ledger):
                mem = _as_set(system.recall(RecallQuery(task, tuple(history), None, episode, attempt, ledger)))
                shown.append(len(split_memory_set(mem.text)) if mem is not None else 0)
                return draft_once(backbone, memory=mem)(task, history, episode=episode, attempt=attempt, ledger=ledger)

            ep = run_episode(task, world=world, edits=suite.edits, ledger=evaluation, episode=draft_seed,
                             max_attempts=attempts, draft=draft)
            last = ep.decisions[-1]
            solved.append(int(last.solved))
            rew.append(float(last.score))
            size.append(shown[0] if shown else 0)
        outcomes.append(solved)
        rewards.append(rew)
        sizes.append(size)
    families = [suite.answer_key(t).family for t in [t.task_id for t in sp.eval]]  # analysis only
    c = build.total
    counts = {"total": len(source), "llm_calls": c.llm_calls, "tokens": c.tokens, "eval_calls": c.eval_calls}
    return {"suite": job.suite, "variant": job.variant, "train_seed": seed, "task_ids": [t.task_id for t in sp.eval],
            "families": families, "llm": backbone_stats(backbone),
            "outcomes": {job.variant: outcomes}, "rewards": {job.variant: rewards},
            "set_sizes": {job.variant: sizes}, "counts": counts,
            "eval_counts": {"llm_calls": evaluation.total.llm_calls, "tokens": evaluation.total.tokens,
                            "eval_calls": evaluation.total.eval_calls},
            "train_log": {"peer": info.name, "memory": system.summary()},
            "profile": {"seconds": round(time.perf_counter() - t0, 2), "build_seconds": round(t_build, 2)}}

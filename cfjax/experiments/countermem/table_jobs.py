"""Decision-table parts as picklable jobs: how ``cfjax countermem table --executor ray`` builds a table
on a Ray cluster.

A table's parts (:func:`cfjax.countermem.table.table_jobs`: one per task and draft sample) are
deterministic functions of the suite, the split, the frozen store and the backbone seed. A
:class:`TablePartsJob` carries exactly those (the store *by value*, as its payload); the worker opens
the suite, rebuilds the agent the way ``table_main`` builds it (scripted backbone, raw world), and
returns the parts' ``.npz`` bytes **by value**. The driver writes them atomically into the table
directory, so the table itself needs no shared filesystem; only the built suite (``<out>/suites/<name>``)
must be readable at the same path on every node. The table is concatenated in part order, so it is
identical to a local build (same content hash).

UpliftMem probe windows have no such boundary: a window's candidates and its acquisition depend on
the scorer's parameters at that moment of the training stream, and its labels feed the next update,
so a window is one step of a sequential run; its executions run on threads
(:func:`cfjax.uplift.probing.label_many`) and whole training runs are Ray tasks (``upliftmem run``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from cfjax.config import CounterMemConfig
from cfjax.infra.executors import RayExecutor
from cfjax.types import Splits

__all__ = ["TablePartsJob", "run_parts_job", "ray_table_parts"]


@dataclass(frozen=True)
class TablePartsJob:
    """Some parts of one table: everything a worker needs to rebuild its agent and find the tasks."""

    suite: str
    root: str  # the built suite (readable on every node)
    config: CounterMemConfig  # n_val, scripted, store, retrieval and agent settings
    seed: int  # the backbone seed (``cfjax countermem table --seed``)
    split_seed: int  # the split the tasks come from
    store: dict  # the frozen store's payload (MemoryStore.to_payload)
    parts: tuple[tuple[int, str, int], ...]  # (part number, task id, draft sample)


def run_parts_job(job: TablePartsJob) -> list[tuple[int, bytes]]:
    """``(part number, .npz bytes)`` of every part of ``job`` (runs in a Ray worker)."""
    from cfjax.countermem.agent import Agent
    from cfjax.countermem.store import MemoryStore
    from cfjax.countermem.table import build_part
    from cfjax.domains import open_suite
    from cfjax.experiments.countermem.runner import suite_world_kwargs
    from cfjax.llm.scripted import ScriptedBackbone

    cfg = job.config
    st = open_suite(job.suite, job.root)
    sp = st.splits(seed=job.split_seed, n_val=cfg.n_val)
    tasks = {t.task_id: t for name in ("train", "val", "eval") for t in getattr(sp, name)}
    missing = sorted({tid for _, tid, _ in job.parts} - set(tasks))
    if missing:
        raise ValueError(f"task(s) {missing[:5]} are not in the train/val/eval splits of {job.suite} "
                         f"(split seed {job.split_seed}) under {job.root}")
    backbone = ScriptedBackbone(st.scripted_domain(), dataclasses.replace(cfg.scripted, seed=job.seed))
    store = MemoryStore.from_payload(job.store, st.edits)
    world = st.world(**suite_world_kwargs(st, cfg))
    try:
        agent = Agent(backbone, world, cfg, store=store, envs=dict(st.envs()), edits=st.edits)
        return [(n, build_part(agent, tasks[tid], sample)) for n, tid, sample in job.parts]
    finally:
        close = getattr(world, "close", None)
        if close is not None:
            close()


def ray_table_parts(executor: RayExecutor, *, suite: str, root: str | Path, config: CounterMemConfig, seed: int,
                    splits: Splits, samples: int, store_payload: dict, split_seed: int | None = None,
                    parts_per_task: int = 8, log: Callable[[str], None] = lambda s: None
                    ) -> Callable[[list[int]], Iterable[tuple[int, bytes]]]:
    """The ``make_parts`` of :func:`cfjax.countermem.table.build_table` for ``splits`` (taken from
    the suite's split ``split_seed``, default ``config.split_seed``) that runs the missing parts as
    Ray tasks of ``parts_per_task`` parts each (each task rebuilds the agent once). ``store_payload``
    is the frozen store's :meth:`~cfjax.countermem.store.MemoryStore.to_payload`."""
    from cfjax.countermem.table import table_jobs

    if parts_per_task < 1:
        raise ValueError(f"parts_per_task must be >= 1, got {parts_per_task}")
    if not store_payload.get("frozen"):
        raise ValueError("decision tables are built against a frozen store; freeze it before building")
    split = config.split_seed if split_seed is None else split_seed
    every = table_jobs(splits, samples)

    def make(todo: list[int]) -> Iterable[tuple[int, bytes]]:
        if not todo:
            return []
        chunks = [todo[i:i + parts_per_task] for i in range(0, len(todo), parts_per_task)]
        jobs = [TablePartsJob(suite, str(root), config, seed, split, store_payload,
                              tuple((n, every[n][1].task_id, every[n][2]) for n in c)) for c in chunks]
        log(f"decision table: {len(todo)} part(s) as {len(jobs)} Ray task(s)")
        done = executor.map(run_parts_job, jobs, order=range(len(jobs)), note=lambda r: None,
                            describe=lambda j: f"decision-table parts {j.parts[0][0]}..{j.parts[-1][0]} of {j.suite}")
        return [p for chunk in done for p in chunk]

    return make

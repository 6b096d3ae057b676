"""Analysis of the MemSyco-like suite's native retrieval: how often it pulls a misleading memory in.

It reads the roles of each task's memories from the world side (:func:`~cfjax.experiments.upliftmem.memsyco.world.memory_roles`,
the reader of the answer keys) and ranks the suite's stores with its native retriever
(:func:`~cfjax.experiments.upliftmem.memsyco.suite.native_retrieve`). It lives apart from both so that the world
never imports the suite (the suite builds its world; no import cycle).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cfjax.experiments.upliftmem.memsyco.suite import STORES, native_retrieve
from cfjax.experiments.upliftmem.memsyco.world import memory_roles
from cfjax.types import Task

__all__ = ["native_retrieval_report"]


def native_retrieval_report(suite: Any, ks: Iterable[int] = (3, 5, 10), tasks: Iterable[Task] | None = None
                            ) -> dict[str, dict[str, float]]:
    """Analysis: per store, the fraction of instances whose native top-k holds a misleading memory
    (``misleading@k``, over the instances that have one) and a relevant memory (``relevant@k``,
    personalized_use and valid_selection), and the mean memory tokens of the top-k (``tokens@k``)."""
    ks = tuple(ks)
    tasks = list(suite.tasks if tasks is None else tasks)
    out: dict[str, dict[str, float]] = {}
    for store in STORES:
        hits = {f"{w}@{k}": [0, 0] for w in ("misleading", "relevant") for k in ks}
        toks = {k: 0 for k in ks}
        for t in tasks:
            roles = memory_roles(suite.keys[t.task_id])
            mems = suite.stores(t)[store]
            ranked = native_retrieve(t, mems, max(ks))
            for k in ks:
                top = {m.mem_id for m in ranked[:k]}
                toks[k] += sum(m.tokens for m in ranked[:k])
                for w in ("misleading", "relevant"):
                    ids = set(roles[w]) & {m.mem_id for m in mems}
                    if ids:
                        hits[f"{w}@{k}"][0] += bool(ids & top)
                        hits[f"{w}@{k}"][1] += 1
        row = {name: (h / n if n else float("nan")) for name, (h, n) in hits.items()}
        row.update({f"tokens@{k}": toks[k] / max(1, len(tasks)) for k in ks})
        out[store] = row
    return out

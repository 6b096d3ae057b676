"""Concurrency for independent LLM-bound work, with results in submission order.

A real backbone spends its time waiting on a server, so independent work items — the episodes of
a held-out evaluation, the N drafts of Best-of-N, the probes of an UpliftMem window — are run on
threads, at most ``max_inflight`` at a time (the backbone's own semaphore bounds the requests on
the wire). The scripted simulator is CPU bound and runs serially (``max_inflight`` 1).

Results never depend on completion order: every item is seeded by its own (task, episode, sample)
and :func:`ordered_map` returns results in submission order, so a concurrent run is identical to
the serial one (tests check this for every call site).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from typing import Any, TypeVar

__all__ = ["ordered_map", "inflight_of", "DEFAULT_MAX_INFLIGHT"]

T = TypeVar("T")
R = TypeVar("R")

#: ``--max-inflight``'s default for an LLM backbone (vLLM and llama.cpp servers reach their
#: throughput only with dozens of concurrent requests).
DEFAULT_MAX_INFLIGHT = 32


def inflight_of(backbone: Any) -> int:
    """How many calls ``backbone`` wants in flight at once: its ``max_inflight`` attribute (an LLM
    client's connection budget), else 1 (the scripted simulator, which is CPU bound)."""
    n = getattr(backbone, "max_inflight", 1)
    return max(1, int(n)) if isinstance(n, int) else 1


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int = 1, *, pool: Executor | None = None
                ) -> list[R]:
    """``[fn(x) for x in items]``, on up to ``workers`` threads when ``workers > 1``, or on the
    caller's ``pool`` when one is given (a pool shared by several loops bounds them together).

    Results are in ``items`` order; the first exception (in item order) is re-raised after every
    item has finished, so no work is left running behind the caller's back."""
    items = list(items)
    if pool is not None:
        futs = [pool.submit(fn, x) for x in items]
        wait(futs)
        return [f.result() for f in futs]
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="cfjax-io") as ex:
        futs = [ex.submit(fn, x) for x in items]
        return [f.result() for f in futs]

"""Small helpers every experiment runner uses."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from cfjax.infra.executors import Executor, RayExecutor, resolve_executor
from cfjax.types import Splits

__all__ = ["finite", "spread", "quick_splits", "resolve_suites", "clear_dir", "run_pool", "write_results"]

T = TypeVar("T")


def finite(obj):
    """JSON-safe copy: non-finite floats become ``None``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def spread(items: Sequence[T], m: int) -> list[T]:
    """At most ``m`` items taken evenly along ``items`` (so every family and transfer condition of a
    split stays represented); ``m <= 0`` keeps all."""
    if m <= 0 or len(items) <= m:
        return list(items)
    step = len(items) / m
    return [items[int(i * step)] for i in range(m)]


def quick_splits(splits: Splits, max_tasks: int) -> Splits:
    """At most ``max_tasks`` of build/train/eval (val: a quarter), taken evenly along each split so
    that every family and transfer condition stays represented."""
    m = max_tasks
    return Splits(tuple(spread(splits.build, m)), tuple(spread(splits.train, m)),
                  tuple(spread(splits.val, max(2, m // 4))), tuple(spread(splits.eval, m)))


def resolve_suites(suite: str | Sequence[str]) -> list[str]:
    """``"all"`` → every built-in suite; a name or names are checked against the registry;
    ``jsonl:PATH`` (a user's task file, :mod:`cfjax.domains.jsonl`) is validated and becomes its
    suite name ``jsonl-<stem>`` (registered in this process for :func:`cfjax.domains.build_suite`;
    a registered name resolves to itself, so resolving twice is harmless).

    Raises:
        cfjax.config.ConfigError: an unknown suite (the message lists the available ones), or a
            user file that does not load (:class:`cfjax.domains.jsonl.JSONLError`: file, line, field).
    """
    from cfjax.config import ConfigError
    from cfjax.domains import JSONL_PREFIX, SUITES, is_registered, register_jsonl
    from cfjax.registry import DOMAINS

    names = [suite] if isinstance(suite, str) else list(suite)
    if names == ["all"]:
        usable = []
        for n in SUITES:
            ok, line = DOMAINS.get(n).check_system()
            if ok:
                usable.append(n)
            else:
                print(f"cfjax: skipping the {n} suite: {line}", file=sys.stderr)
        return usable
    for n in names:
        if n in SUITES:
            ok, line = DOMAINS.get(n).check_system()
            if not ok:
                raise ConfigError(f"the {n} suite cannot run here: {line}")
    if not names or any(n not in SUITES and not n.startswith(JSONL_PREFIX) and not is_registered(n) for n in names):
        shown = suite if isinstance(suite, str) else " ".join(names)
        raise ConfigError(f"unknown suite {shown!r} (available: {', '.join(SUITES)}, all, jsonl:PATH)")
    out = [register_jsonl(n) if n.startswith(JSONL_PREFIX) else n for n in names]
    if len(set(out)) != len(out):  # results directories are named by suite: task files need distinct stems
        raise ConfigError(f"two suites share a name in {' '.join(names)} → {' '.join(out)}; rename a file")
    return out


def clear_dir(d: str | Path) -> None:
    """Remove the scratch folder ``d`` and everything in it (absent is fine)."""
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def run_pool(fn: Callable[[Any], dict], jobs: Sequence[Any], *, workers: int, cost: Callable[[Any], float],
             note: Callable[[dict], None], initializer: Callable | None = None, initargs: tuple = (),
             serial_done: Callable[[], None] | None = None, executor: Executor = "local") -> list[dict]:
    """``fn`` on every job; results in job order (identical to the serial run).

    ``executor`` ``"local"`` (default): with ``workers > 1`` (and more than one job) on a pool of
    spawned processes (``initializer(*initargs)`` in each), submitted most costly first; otherwise
    serially in this process, then ``serial_done()`` (e.g. closing its worlds). ``"ray"`` or a
    :class:`cfjax.infra.executors.RayExecutor`: every job is a Ray task (``workers`` is not used: the
    cluster's CPUs and the executor's ``num_cpus`` per task bound the concurrency), submitted most
    costly first; in the worker ``initializer(*initargs)`` runs once per process and ``serial_done()``
    after each job. ``fn`` and the jobs must be picklable (module-level function, plain data); results
    come back by value. ``note`` sees each result as it arrives."""
    from cfjax.registry import in_process_registrations

    regs = in_process_registrations()
    if regs:  # a notebook's or a test's own registrations reach the workers (cfjax.registry)
        initializer, initargs = _init_with_registrations, (regs, initializer, initargs)
    ex = resolve_executor(executor)
    if isinstance(ex, RayExecutor):
        order = sorted(range(len(jobs)), key=lambda i: -cost(jobs[i]))
        return ex.map(fn, jobs, order=order, note=note, initializer=initializer, initargs=initargs,
                      finalizer=serial_done)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if workers <= 1 or len(jobs) <= 1:
        done = []
        try:
            for j in jobs:
                done.append(fn(j))
                note(done[-1])
        finally:
            if serial_done is not None:
                serial_done()
        return done
    order = sorted(range(len(jobs)), key=lambda i: -cost(jobs[i]))
    out: list[dict | None] = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=initializer, initargs=initargs) as pool:
        futs = {i: pool.submit(fn, jobs[i]) for i in order}
        for i in order:
            out[i] = futs[i].result()
            note(out[i])
    return out  # type: ignore[return-value]


def _init_with_registrations(regs: list, initializer: Callable | None, initargs: tuple) -> None:
    from cfjax.registry import restore_registrations

    restore_registrations(regs)
    if initializer is not None:
        initializer(*initargs)


def write_results(out: str | Path | None, payload: dict, *, text: str = "", log: Callable[[str], None] = lambda s: None,
                  name: str = "results.json", report: str | None = None) -> Path | None:
    """Log ``text``, then write ``out/<name>`` (atomic JSON, non-finite floats as null) and, with
    ``report``, ``text`` to ``out/<report>``, when ``out`` is given; logs and returns the JSON's path."""
    if text:
        log(text)
    if not out:
        return None
    import json

    from cfjax.infra.io import atomic_write_text

    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_text(d / name, json.dumps(finite(payload), indent=1) + "\n")
    if report is not None:
        atomic_write_text(d / report, text + "\n")
    log(f"wrote {d / name}")
    return d / name

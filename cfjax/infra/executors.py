"""Where independent work runs: this process, a local process pool, a Ray cluster, or a thread pool.

Two kinds of independence, two tools:

* **Experiment units** (suite × seed × row) are CPU-heavy and self-contained: a picklable job
  description in, a plain result dict out. :func:`cfjax.experiments.common.run_pool` runs them
  serially, on a pool of spawned local processes (the default), or — with ``executor="ray"`` or a
  :class:`RayExecutor` — as Ray tasks on a local Ray instance or an existing cluster
  (``RAY_ADDRESS``). Each worker builds its own suite, world and backbone from the job; results come
  back **by value** (the dicts) in job order, so every executor gives the serial run's results.
  Artifacts a job writes itself (stores, selectors, pools, scorer checkpoints) go to the job's output
  directory: on a multi-node cluster that directory must be on a filesystem every node mounts at the
  same path (NFS, a cloud file share), or those files stay on the node that ran the job.
* **Backbone and evaluator calls** inside one unit (held-out episodes, decision-table roots, probe
  executions) are I/O bound with a real LLM server: they run on up to ``max_inflight`` threads
  (:func:`cfjax.infra.concurrency.ordered_map`), results in item order.

Ray is an optional extra (``pip install 'cfjax[ray]'``); nothing imports it unless asked.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from cfjax.infra.io import InputError

__all__ = ["EXECUTORS", "RayExecutor", "Executor", "ExecutorTaskError", "resolve_executor", "is_local",
           "describe_job"]

#: the names ``--executor`` accepts
EXECUTORS = ("local", "ray")


class ExecutorTaskError(RuntimeError):
    """A job failed on a remote executor; the message names the job, ``cause`` is the job's own error."""

    def __init__(self, message: str, job: object, cause: BaseException | None) -> None:
        super().__init__(message)
        self.job = job
        self.cause = cause


@dataclass(frozen=True)
class RayExecutor:
    """Run jobs as Ray tasks.

    Args:
      address: the cluster to join; ``None`` uses ``RAY_ADDRESS`` when it is set (``ray start
        --head`` prints it) and otherwise starts a local instance with this machine's CPUs. A Ray
        already initialised in this process (``ray.init`` by the caller) is used as it is.
      num_cpus: CPUs each task reserves (Ray schedules by it; ``0 < num_cpus``).
      num_gpus: GPUs each task reserves.
      max_retries: re-runs of a task whose worker process or node died (jobs are deterministic
        functions of their description, so a re-run gives the same result); an exception raised by
        the job itself is never retried.
      init_kwargs: extra keyword arguments for ``ray.init`` when this executor starts or joins Ray
        (e.g. ``{"runtime_env": {...}}``).
    """

    address: str | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    max_retries: int = 1
    init_kwargs: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.num_cpus > 0):
            raise InputError(f"Ray task CPUs must be > 0, got {self.num_cpus}")
        if self.num_gpus < 0:
            raise InputError(f"Ray task GPUs must be >= 0, got {self.num_gpus}")
        if self.max_retries < 0:
            raise InputError(f"Ray max_retries must be >= 0, got {self.max_retries}")

    def _ray(self):
        """The ``ray`` module, initialised (joined or started) once per process."""
        try:
            import ray
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'cfjax[ray]' (or pip install 'ray>=2.50')") \
                from None
        if not ray.is_initialized():
            address = self.address or os.environ.get("RAY_ADDRESS") or None
            kwargs: dict[str, Any] = {"include_dashboard": False, **self.init_kwargs}
            try:
                ray.init(address=address, **kwargs)
            except ConnectionError as e:
                root = e
                while root.__cause__ is not None:  # Ray chains the reason (e.g. an authentication error)
                    root = root.__cause__
                lines = [ln.strip() for ln in str(root).splitlines() if ln.strip()]
                auth = [ln for ln in lines if "auth" in ln.lower()]
                detail = (auth or lines or ["(no message)"])[0][:300]
                why = _first_line(e) + (f" ({type(root).__name__}: {detail})" if root is not e else "")
                raise InputError(f"cannot reach the Ray cluster at {address!r}: {why}; start one with "
                                 "`ray start --head` (a cluster with token authentication also needs "
                                 "RAY_AUTH_MODE=token and its token here), or unset RAY_ADDRESS for a local "
                                 "instance") from None
        return ray

    def map(self, fn: Callable[[Any], Any], jobs: Sequence[Any], *, order: Sequence[int],
            note: Callable[[Any], None], initializer: Callable | None = None, initargs: tuple = (),
            finalizer: Callable[[], None] | None = None, describe: Callable[[Any], str] | None = None
            ) -> list[Any]:
        """``fn`` on every job as a Ray task; results in job order.

        Tasks are submitted in ``order`` (most costly first); ``note`` sees each result as it
        arrives. In the worker, ``initializer(*initargs)`` runs once per process and argument tuple
        before its first job, and ``finalizer()`` after every job (workers outlive a run, so
        per-process state such as open worlds is released with each job). A failing job raises
        :class:`ExecutorTaskError` naming it (``describe``, default :func:`describe_job`); the
        tasks not yet finished are cancelled."""
        ray = self._ray()
        describe = describe or describe_job
        remote = ray.remote(_run_in_worker).options(num_cpus=self.num_cpus, num_gpus=self.num_gpus,
                                                    max_retries=self.max_retries)
        refs: dict[Any, int] = {}
        for i in order:
            refs[remote.remote(fn, jobs[i], initializer, tuple(initargs), finalizer)] = i
        out: list[Any] = [None] * len(jobs)
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    i = refs[ref]
                    try:
                        out[i] = ray.get(ref)
                    except Exception as e:  # RayTaskError wraps the job's exception; worker/node loss too
                        cause = getattr(e, "cause", None) or e
                        raise ExecutorTaskError(f"Ray task for {describe(jobs[i])} failed: "
                                                f"{type(cause).__name__}: {_first_line(cause)}", jobs[i], cause
                                                ) from e
                    note(out[i])
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=False)
            raise
        return out


#: an executor argument: ``"local"`` (this process or a local process pool), ``"ray"``, or a configured one
Executor = Union[str, RayExecutor]


def resolve_executor(executor: Executor | None = "local", *, task_cpus: float | None = None) -> str | RayExecutor:
    """``"local"`` or a :class:`RayExecutor` from ``--executor`` (``local`` | ``ray``) and ``--task-cpus``.

    Raises:
      InputError: an unknown executor name, or ``task_cpus`` with the local executor.
    """
    if executor is None or executor == "local":
        if task_cpus is not None:
            raise InputError("--task-cpus applies to --executor ray only")
        return "local"
    if isinstance(executor, RayExecutor):
        return executor if task_cpus is None else dataclasses.replace(executor, num_cpus=float(task_cpus))
    if executor == "ray":
        return RayExecutor(num_cpus=1.0 if task_cpus is None else float(task_cpus))
    raise InputError(f"unknown executor {executor!r} (choose from {', '.join(EXECUTORS)})")


def is_local(executor: Executor | None) -> bool:
    """Whether ``executor`` means this machine's serial run or process pool."""
    return resolve_executor(executor) == "local"


def describe_job(job: object) -> str:
    """A one-line description of a job for error messages: its class and its short scalar fields
    (suite, seed, row, …), leaving out configs and backbone recipes."""
    if dataclasses.is_dataclass(job) and not isinstance(job, type):
        parts = []
        for f in dataclasses.fields(job):
            v = getattr(job, f.name)
            if isinstance(v, bool | int | float) or (isinstance(v, str) and len(v) <= 80):
                parts.append(f"{f.name}={v!r}")
            elif isinstance(v, tuple) and len(v) <= 8 and all(isinstance(x, str | int) for x in v):
                parts.append(f"{f.name}={v!r}")
        return f"{type(job).__name__}({', '.join(parts)})"
    text = repr(job)
    return text if len(text) <= 200 else text[:197] + "..."


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else "(no message)"


_INITIALISED: set = set()
_INIT_LOCK = threading.Lock()


def _args_key(initargs: tuple) -> Any:
    """A hashable key of ``initargs`` (they may hold lists and dicts: plugin registrations, configs)."""
    try:
        hash(initargs)
        return initargs
    except TypeError:
        import hashlib
        import pickle

        return hashlib.sha256(pickle.dumps(initargs)).hexdigest()


def _run_in_worker(fn: Callable[[Any], Any], job: Any, initializer: Callable | None, initargs: tuple,
                   finalizer: Callable[[], None] | None) -> Any:  # pragma: no cover - runs in Ray workers
    """The body of one Ray task (module-level, so Ray pickles it by reference)."""
    if initializer is not None:
        key = (getattr(initializer, "__module__", ""), getattr(initializer, "__qualname__", repr(initializer)),
               _args_key(initargs))
        with _INIT_LOCK:
            if key not in _INITIALISED:
                initializer(*initargs)
                _INITIALISED.add(key)
    try:
        return fn(job)
    finally:
        if finalizer is not None:
            finalizer()

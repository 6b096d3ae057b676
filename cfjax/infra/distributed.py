"""Work split over several JAX processes (``jax.distributed``), one machine or many.

A job of ``n`` independent items (selectors: every grid point × seed) is dealt
round-robin: process ``p`` of ``P`` takes items ``p, p + P, p + 2P, …``
(:func:`process_shard`). Every process gets the same number of slots,
``ceil(n / P)``; the slots past the end are *padding* (a copy of item 0, marked
``False`` in the shard's mask), so every process compiles and runs one program
of one shape and no process recompiles for an uneven count. Each process
computes its slots with its own jitted program on its own devices — nothing
crosses processes while the work runs — and :func:`gather_items` then hands
*every* process all ``n`` results in the original item order, the padding
dropped.

Gathering uses ``jax.experimental.multihost_utils.process_allgather`` over the
CPU collectives (Gloo over TCP, JAX's default on CPU; MPI when
``jax_cpu_collectives_implementation`` says so). We chose it over writing
per-process files into the output directory and merging them: it needs no
shared file system between machines, no polling for other processes' files,
and a dead peer ends the gather with an error from the coordination service
instead of a hang. The pytree is packed into one flat buffer per dtype first,
so a whole state costs a handful of collectives, not one per leaf.

Starting the process group (:func:`init_processes`), in order of precedence:

1. explicit arguments (the command's ``--coordinator``, ``--num-processes``,
   ``--process-id``);
2. the environment variables :data:`ENV_COORDINATOR` (``CFJAX_COORDINATOR``,
   ``HOST:PORT`` of process 0), :data:`ENV_NUM_PROCESSES`
   (``CFJAX_NUM_PROCESSES``) and :data:`ENV_PROCESS_ID` (``CFJAX_PROCESS_ID``);
3. with ``auto_detect=True`` and nothing of the above given: JAX's own
   cluster detection (SLURM, Open MPI's ``mpirun``, mpi4py, Kubernetes, Cloud
   TPU; ``JAX_COORDINATOR_ADDRESS`` is honoured).

Nothing given (or one process) means a plain single-process run: no
coordinator is started and the results are the same as with ``P`` processes
(the per-item inputs are the same and only the batch width differs; on CPU the
selectors came out bit-identical with 1, 2 and 3 processes and with 2 devices
per process; the test allows 1e-6).

``jax.distributed.initialize`` must run before anything touches a JAX backend
(a computation, ``jax.devices()``, ``jax.device_put``); :func:`init_processes`
says so in plain words instead of JAX's traceback when it is called too late.

>>> info = init_processes("10.0.0.1:7777", 2, 0)      # on machine A; process_id=1 on machine B
>>> shard = process_shard(5, info.num_processes, info.process_id)
>>> shard.items, shard.mask                            # process 0: items 0, 2, 4
(array([0, 2, 4]), array([ True,  True,  True]))
"""

from __future__ import annotations

import atexit
import hashlib
import math
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cfjax.infra.io import UserError

__all__ = ["ENV_COORDINATOR", "ENV_NUM_PROCESSES", "ENV_PROCESS_ID", "DistributedError", "ProcessSpec",
           "ProcessInfo", "process_spec", "init_processes", "process_info", "Shard", "process_shard",
           "gather_items", "allgather_tree", "check_same_work", "interleave"]

#: ``HOST:PORT`` where process 0 runs the coordination service (every process gives the same value).
ENV_COORDINATOR = "CFJAX_COORDINATOR"
#: How many processes take part (an integer ≥ 1).
ENV_NUM_PROCESSES = "CFJAX_NUM_PROCESSES"
#: This process's rank, ``0 … num_processes − 1`` (process 0 hosts the coordinator and writes the results).
ENV_PROCESS_ID = "CFJAX_PROCESS_ID"


class DistributedError(UserError):
    """A multi-process run that cannot start or whose processes disagree (one line, named)."""


@dataclass(frozen=True)
class ProcessSpec:
    """Where the coordinator is, how many processes there are, and which one this is."""

    coordinator: str  # HOST:PORT of process 0's coordination service
    num_processes: int
    process_id: int


@dataclass(frozen=True)
class ProcessInfo:
    """The process group this process belongs to (``num_processes == 1``: no group, a plain run)."""

    process_id: int
    num_processes: int
    coordinator: str | None = None

    @property
    def is_leader(self) -> bool:
        """Process 0: the one that writes results and prints the full report."""
        return self.process_id == 0


def _parse_int(value: Any, what: str, source: str) -> int:
    if isinstance(value, bool):
        raise DistributedError(f"{what} must be an integer, got {value!r} ({source})")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise DistributedError(f"{what} must be an integer, got {value!r} ({source})") from None


def _check_coordinator(addr: str, source: str) -> str:
    addr = str(addr).strip()
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(f"coordinator address {addr!r} ({source}) is not HOST:PORT with a port in 1-65535 "
                               f"(e.g. 10.0.0.1:7777 or [::1]:7777)")
    return addr


def process_spec(coordinator: str | None = None, num_processes: int | str | None = None,
                 process_id: int | str | None = None, *,
                 environ: Mapping[str, str] | None = None) -> ProcessSpec | None:
    """The process group asked for, from the arguments or else the ``CFJAX_*`` environment variables.

    Each of the three values is taken from its argument when that is not ``None``, else from its
    environment variable. Returns ``None`` when none is set or ``num_processes`` is 1 (a plain
    single-process run; the coordinator and process id may then be absent, and the id must be 0).

    Raises:
      DistributedError: a value is malformed or out of range, or some but not all of the three are
        given for more than one process (the message names what is missing and where it was looked for).
    """
    env = os.environ if environ is None else environ
    src = {}

    def pick(arg, var: str, what: str):
        if arg is not None:
            src[what] = f"argument {what}"
            return arg
        if env.get(var, "").strip():
            src[what] = f"environment variable {var}"
            return env[var]
        return None

    coord = pick(coordinator, ENV_COORDINATOR, "coordinator")
    n = pick(num_processes, ENV_NUM_PROCESSES, "num_processes")
    pid = pick(process_id, ENV_PROCESS_ID, "process_id")
    if coord is None and n is None and pid is None:
        return None
    n = _parse_int(n, "the number of processes", src["num_processes"]) if n is not None else None
    pid = _parse_int(pid, "the process id", src["process_id"]) if pid is not None else None
    if n is not None and n < 1:
        raise DistributedError(f"the number of processes must be at least 1, got {n} ({src['num_processes']})")
    if n == 1:
        if pid not in (None, 0):
            raise DistributedError(f"process id {pid} is out of range for 1 process (it must be 0)")
        if coord is not None:
            _check_coordinator(coord, src["coordinator"])
        return None
    missing = [f"{w} ({'--' + w.replace('_', '-')} or {v})" for w, v, x in
               (("coordinator", ENV_COORDINATOR, coord), ("num_processes", ENV_NUM_PROCESSES, n),
                ("process_id", ENV_PROCESS_ID, pid)) if x is None]
    if missing:
        raise DistributedError(f"a multi-process run needs the coordinator address, the number of processes and "
                               f"this process's id; missing: {', '.join(missing)}")
    if not 0 <= pid < n:
        raise DistributedError(f"process id {pid} is out of range for {n} processes (it must be 0 … {n - 1})")
    return ProcessSpec(_check_coordinator(coord, src["coordinator"]), n, pid)


def process_info() -> ProcessInfo:
    """The current group as JAX sees it (``jax.process_index()``/``process_count()``; touches the backend)."""
    import jax
    from jax._src import distributed as _dist  # the coordinator address is not exposed publicly

    return ProcessInfo(jax.process_index(), jax.process_count(),
                       getattr(_dist.global_state, "coordinator_address", None))


_SHUTDOWN_REGISTERED = False


def _wait_for_coordinator(spec: ProcessSpec, timeout_s: float) -> None:
    """Until ``timeout_s``: try a TCP connection to the coordinator (process 0's service). JAX itself ends the
    process with a C++ fatal error when it cannot register in time; this says what is wrong first."""
    host, _, port = spec.coordinator.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, int(port)), timeout=max(0.1, min(5.0, left))):
                return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise DistributedError(
                    f"process {spec.process_id} of {spec.num_processes}: no coordinator answered at "
                    f"{spec.coordinator} within {timeout_s:g} s ({e.strerror or e}); start process 0 with the same "
                    f"address, and check the host name and that the port is open between the machines") from None
        time.sleep(0.2)


def init_processes(coordinator: str | None = None, num_processes: int | str | None = None,
                   process_id: int | str | None = None, *, auto_detect: bool = False, timeout_s: int = 300,
                   environ: Mapping[str, str] | None = None) -> ProcessInfo:
    """Join (or start, on process 0) the JAX process group; a no-op for a single process.

    The values come from :func:`process_spec` (arguments, then ``CFJAX_*`` variables); with none
    given and ``auto_detect``, from JAX's cluster detection (SLURM, Open MPI, mpi4py, Kubernetes).
    Call it first, before any JAX computation. Blocks until all ``num_processes`` processes have
    connected (at most ``timeout_s`` seconds; a process other than 0 first waits, within the same
    time, for the coordinator's port to accept connections, so a missing process 0 is a clear
    error). Calling it again with the same group is harmless; a clean ``jax.distributed.shutdown()``
    is registered to run at exit.

    On CPU the cross-process collectives are Gloo over TCP (set here when no implementation is
    configured; JAX 0.10 defaults to it): each process must reach the others' hosts, not only the
    coordinator's port.

    Returns:
      :class:`ProcessInfo` of this process (``ProcessInfo(0, 1)`` for a plain run).

    Raises:
      DistributedError: a bad or incomplete spec, JAX already initialised (too late to join a
        group, or already in another group), or the group could not be formed in time.
    """
    global _SHUTDOWN_REGISTERED
    import jax

    spec = process_spec(coordinator, num_processes, process_id, environ=environ)
    if jax.distributed.is_initialized():
        info = process_info()
        if spec is not None and (spec.num_processes, spec.process_id) != (info.num_processes, info.process_id):
            raise DistributedError(f"this process already belongs to a group of {info.num_processes} as process "
                                   f"{info.process_id}; it cannot join another as process {spec.process_id} of "
                                   f"{spec.num_processes}")
        return info
    if spec is None and not auto_detect:
        return ProcessInfo(0, 1)
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise DistributedError("the multi-process group must be started before any JAX computation in this process "
                               "(call cfjax.infra.distributed.init_processes first)")
    if jax.config.jax_cpu_collectives_implementation is None:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    start = time.monotonic()
    if spec is not None and spec.process_id > 0:
        _wait_for_coordinator(spec, timeout_s)
    left = max(1, int(round(timeout_s - (time.monotonic() - start))))
    try:
        if spec is None:
            jax.distributed.initialize(initialization_timeout=left)
        else:
            jax.distributed.initialize(spec.coordinator, spec.num_processes, spec.process_id,
                                       initialization_timeout=left)
    except (ValueError, RuntimeError) as e:  # no cluster detected / the service could not start
        what = (f"process {spec.process_id} of {spec.num_processes} via coordinator {spec.coordinator}" if spec
                else "an auto-detected cluster (SLURM, Open MPI, mpi4py, Kubernetes)")
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = (f" (is port {spec.coordinator.rpartition(':')[2]} already in use on this machine?)"
                if spec and spec.process_id == 0 and "RPC server" in first else "")
        raise DistributedError(f"could not join the JAX process group as {what}: {first}{hint}") from e
    if not _SHUTDOWN_REGISTERED:
        atexit.register(jax.distributed.shutdown)
        _SHUTDOWN_REGISTERED = True
    return process_info()


# --------------------------------------------------------------------------- sharding and gathering


@dataclass(frozen=True)
class Shard:
    """One process's slots of an ``n_items`` job dealt round-robin over ``num_processes``."""

    items: np.ndarray  # i64[L] item computed in each slot (padding slots repeat item 0)
    mask: np.ndarray  # bool[L] True for a real item, False for padding
    n_items: int
    num_processes: int
    process_id: int

    @property
    def slots(self) -> int:
        """``L = ceil(n_items / num_processes)``: the same on every process."""
        return int(self.items.shape[0])


def process_shard(n_items: int, num_processes: int, process_id: int) -> Shard:
    """Items ``p, p + P, …`` of ``n_items`` for process ``p`` of ``P``, padded to ``ceil(n / P)`` slots.

    Padding slots hold item 0 (a valid input, so the program needs no special case) and are
    ``False`` in ``mask``; :func:`gather_items` drops them.
    """
    if n_items < 1:
        raise ValueError(f"nothing to shard: {n_items} items")
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise ValueError(f"process {process_id} of {num_processes} does not exist")
    slots = math.ceil(n_items / num_processes)
    idx = process_id + num_processes * np.arange(slots, dtype=np.int64)
    mask = idx < n_items
    return Shard(np.where(mask, idx, 0), mask, n_items, num_processes, process_id)


def interleave(gathered: np.ndarray, n_items: int) -> np.ndarray:
    """``[P, L, ...]`` (process ``p``'s slot ``l`` = item ``p + P·l``) → ``[n_items, ...]`` in item order."""
    g = np.asarray(gathered)
    p, slots = g.shape[:2]
    if p * slots < n_items:
        raise ValueError(f"{p} processes × {slots} slots cannot hold {n_items} items")
    return np.swapaxes(g, 0, 1).reshape(p * slots, *g.shape[2:])[:n_items]


def allgather_tree(tree: Any) -> Any:
    """Every process's ``tree`` (same structure, shapes and dtypes everywhere), stacked: leaves ``[P, ...]``.

    Host NumPy results on every process. One process: the leaves with a leading axis of 1 and no
    communication. The leaves are packed into one flat buffer per dtype (booleans as ``uint8``) so
    a large pytree costs one collective per dtype.
    """
    import jax

    leaves, treedef = jax.tree.flatten(tree)
    arrs = [np.asarray(x) for x in leaves]
    if jax.process_count() == 1:
        return jax.tree.unflatten(treedef, [a[None] for a in arrs])
    from jax.experimental import multihost_utils

    groups: dict[str, list[int]] = {}
    for i, a in enumerate(arrs):
        groups.setdefault(a.dtype.str, []).append(i)
    packed = {}
    for dt, idx in groups.items():
        flat = np.concatenate([arrs[i].reshape(-1) for i in idx])
        packed[dt] = flat.view(np.uint8) if flat.dtype == np.bool_ else flat
    gathered = multihost_utils.process_allgather(packed)  # {dtype: [P, total]}
    out: list[np.ndarray | None] = [None] * len(arrs)
    for dt, idx in groups.items():
        g = np.asarray(gathered[dt])
        if np.dtype(dt) == np.bool_:
            g = g.view(np.bool_)
        off = 0
        for i in idx:
            size = arrs[i].size
            out[i] = g[:, off:off + size].reshape(g.shape[0], *arrs[i].shape)
            off += size
    return jax.tree.unflatten(treedef, out)


def gather_items(local: Any, shard: Shard) -> Any:
    """The results of every process's :class:`Shard` (leaves ``[L, ...]``) → leaves ``[n_items, ...]`` in item
    order, on every process. Raises :class:`DistributedError` if a process's shard does not line up."""
    import jax

    stacked = allgather_tree({"tree": local, "mask": shard.mask, "items": shard.items})
    masks, items = stacked["mask"], stacked["items"]
    want = np.stack([process_shard(shard.n_items, shard.num_processes, p).items
                     for p in range(shard.num_processes)])
    if masks.shape[0] != shard.num_processes or not np.array_equal(items, want):
        raise DistributedError("the processes did not split the same job the same way (different item counts)")
    if not np.array_equal(interleave(masks, shard.n_items), np.ones(shard.n_items, bool)):
        raise DistributedError("an item is missing after gathering the processes' results")
    return jax.tree.map(lambda x: interleave(x, shard.n_items), stacked["tree"])


def check_same_work(description: str | bytes, what: str = "job") -> None:
    """Raise :class:`DistributedError` unless every process passes the same ``description`` (compared by
    SHA-256, so it may be long: e.g. a table hash, the config, seeds and grid). No-op for one process.

    Call it before the work starts: processes that disagree about the inputs would otherwise run
    different programs and either hang in the gather or merge unrelated results.
    """
    import jax

    if jax.process_count() == 1:
        return
    data = description.encode() if isinstance(description, str) else bytes(description)
    digest = np.frombuffer(hashlib.sha256(data).digest(), np.uint8)
    alld = allgather_tree(digest)
    differ = [p for p in range(alld.shape[0]) if not np.array_equal(alld[p], alld[0])]
    if differ:
        raise DistributedError(f"the processes were given different {what}s: process(es) "
                               f"{', '.join(map(str, differ))} differ from process 0 (same table, config, "
                               f"seeds and grid on every process)")

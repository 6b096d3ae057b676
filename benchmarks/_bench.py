"""Thread settings every benchmark applies to *both* sides, and proof that they took effect.

Import this module (it imports only the standard library and :mod:`benchmarks._meta`) and call
:func:`setup_threads` **before numpy, jax, faiss or torch** are imported; call :func:`pin_peers` after
the peers (PyTorch, scikit-learn/threadpoolctl, FAISS) are imported, and :func:`xla_probe` once JAX is.

Why not ``XLA_FLAGS=... intra_op_parallelism_threads=1`` (what the scripts used to set): that token has
no leading ``--``, and XLA's flag parser then ignores the whole ``XLA_FLAGS`` string — on this machine a
matmul-heavy jitted loop ran at CPU time / wall time 1.9 with it, i.e. ``--xla-threads 1`` was a no-op
(and ``--intra_op_parallelism_threads`` is not an XLA flag: it aborts with "Unknown flag"). What bounds
XLA's CPU client here is the process' CPU affinity (read at backend start; it bounds every pool at once:
CPU/wall 1.0 on the probe loop). ``--xla_cpu_multi_thread_eigen=false`` alone makes XLA's *compute*
single-threaded — the probe's wall time equals a one-core-bound run's — but XLA's runtime keeps a
second thread spinning, so CPU/wall reads ≈ 1.8 at 384×384 (≈ 1.0 on small loops). Use ``--cores 1``
when the CPU budget matters; :func:`xla_probe` records CPU/wall in every run either way.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._meta import cpu_wall, inputs_hash, load_now, pin_threads, run_meta

__all__ = ["setup_threads", "pin_peers", "xla_probe", "make_meta", "finish_meta", "start_load", "fmt_ratio",
           "fmt_s"]

_XLA_SINGLE = "--xla_cpu_multi_thread_eigen=false"


def setup_threads(cores: int, *, xla_threads: int | None = None) -> dict[str, Any]:
    """Bind this process to ``cores`` cores and size every thread pool to it, before numpy/jax/torch/faiss
    are imported (raises otherwise: the setting would silently not apply).

    ``xla_threads`` (default ``cores``) may only lower XLA's share: 1 makes XLA compute on the calling
    thread (``--xla_cpu_multi_thread_eigen=false``) while the other pools keep ``cores``.
    Returns the settings applied (record them in ``meta["threads"]``)."""
    avail = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 1 or cores > avail:
        raise ValueError(f"--cores must be between 1 and the {avail} cores this process may use, got {cores}")
    xla_threads = cores if xla_threads is None else xla_threads
    if xla_threads < 1 or xla_threads > cores:
        raise ValueError(f"--xla-threads must be between 1 and --cores ({cores}), got {xla_threads}")
    if xla_threads not in (1, cores):
        raise ValueError(f"XLA's CPU pool can be bounded to 1 thread or to the process' {cores} cores, "
                         f"not to {xla_threads}")
    applied: dict[str, Any] = dict(pin_threads(cores, xla=False))
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if f != "intra_op_parallelism_threads=1"]
    if xla_threads == 1 and _XLA_SINGLE not in flags:
        flags.append(_XLA_SINGLE)
    if flags:
        os.environ["XLA_FLAGS"] = " ".join(flags)
    else:
        os.environ.pop("XLA_FLAGS", None)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    applied.update(cores=cores, xla_threads=xla_threads, XLA_FLAGS=os.environ.get("XLA_FLAGS", ""))
    applied["summary"] = (f"{cores} core{'s' if cores > 1 else ''} for every side"
                          + ("" if xla_threads == cores else ", XLA single-threaded"))
    return applied


def pin_peers(cores: int, threads: dict[str, Any], *, torch_threads: int | None = None) -> dict[str, Any]:
    """Give the imported peers the same core count as cfjax and record what they report back.

    PyTorch: ``torch.set_num_threads`` (``torch_threads``, default ``cores``); BLAS/OpenMP pools that
    NumPy, SciPy and scikit-learn use: ``threadpoolctl.threadpool_limits``; FAISS: ``omp_set_num_threads``.
    Only modules already imported are touched. The verified values go into ``threads["peers"]``."""
    peers: dict[str, Any] = threads.setdefault("peers", {})
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        n = cores if torch_threads is None else torch_threads
        torch.set_num_threads(n)
        peers["torch"] = torch.get_num_threads()
        if peers["torch"] != n:
            raise RuntimeError(f"torch.set_num_threads({n}) did not apply: torch reports {peers['torch']}")
    if "faiss" in sys.modules:
        faiss = sys.modules["faiss"]
        faiss.omp_set_num_threads(cores)
        peers["faiss"] = faiss.omp_get_max_threads()
    if "numpy" in sys.modules:
        try:
            import threadpoolctl
        except ImportError:  # NumPy alone: the environment variables set by setup_threads hold
            peers["blas"] = "threadpoolctl not installed; " + os.environ.get("OPENBLAS_NUM_THREADS", "?")
        else:
            global _LIMITS  # keep the limiter alive: the limits hold as long as it does
            _LIMITS = threadpoolctl.threadpool_limits(limits=cores)
            pools = {f"{p['internal_api']}:{Path(p['filepath']).name}": p["num_threads"]
                     for p in threadpoolctl.threadpool_info()}
            peers["blas_pools"] = pools
            over = {k: v for k, v in pools.items() if v > cores}
            if over:
                raise RuntimeError(f"thread pools above {cores} threads after threadpool_limits: {over}")
    return threads


_LIMITS: Any = None


def xla_probe(threads: dict[str, Any], *, size: int = 384, steps: int = 40, calls: int = 3) -> dict[str, Any]:
    """Run a matmul-heavy jitted loop and record its CPU time / wall time in ``threads["xla_probe"]``:
    ≈ 1.0 shows XLA used one core (``--cores 1``); with ``--xla-threads 1`` on more cores the compute is
    single-threaded but a spinning runtime thread can still show up here (module docstring)."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def loop(x):
        return jax.lax.fori_loop(0, steps, lambda i, y: jnp.tanh(y @ y) * 0.5, x)

    x = jnp.ones((size, size), jnp.float32) / size
    jax.block_until_ready(loop(x))  # compile
    rec: dict[str, Any] = {"what": f"jit(fori_loop({steps} x tanh({size}x{size} matmul))), {calls} calls"}
    with cpu_wall(rec):
        for _ in range(calls):
            jax.block_until_ready(loop(x))
    threads["xla_probe"] = rec
    return rec


def make_meta(name: str, sources: Sequence[str], args: Any, threads: dict[str, Any],
              load_before: dict[str, float]) -> dict[str, Any]:
    """:func:`benchmarks._meta.run_meta`, checked: the inputs hash must be reproducible from the
    ``sources`` and ``args`` it records (``render.py --check`` recomputes it from them)."""
    meta = run_meta(name, sources, args, threads=threads, load_before=load_before)
    if inputs_hash(meta["sources"], meta["args"]) != meta["inputs_sha256"]:
        raise RuntimeError("inputs hash is not reproducible from the recorded sources and args")
    return meta


def finish_meta(meta: dict[str, Any], t_start: float) -> dict[str, Any]:
    """Record the load at the end of the run and the run's wall time."""
    meta["load_after"] = {"loadavg_1m": round(os.getloadavg()[0], 2)}
    meta["total_wall_s"] = round(time.perf_counter() - t_start, 2)
    return meta


def start_load() -> dict[str, float]:
    """The machine's load before the run (1 s sample of /proc/stat while this process is idle)."""
    return load_now(1.0)


def fmt_ratio(x: float | None, *, bold: bool = False) -> str:
    """``12.3×`` (``**12.3×**`` when ``bold``); ``–`` when unknown."""
    if x is None:
        return "–"
    s = f"{x:,.0f}×" if x >= 100 else f"{x:.1f}×"
    return f"**{s}**" if bold else s


def fmt_s(x: float) -> str:
    """Seconds for a table cell: ms below 1 s, hours above 3,600 s."""
    if x >= 3600:
        return f"{x / 3600:.1f} h"
    if x >= 100:
        return f"{x:,.0f} s"
    if x >= 1:
        return f"{x:.2f} s"
    return f"{x * 1e3:.1f} ms"


def quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    """``(first quartile, median, third quartile)`` of ``xs`` (inclusive method)."""
    import statistics

    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]

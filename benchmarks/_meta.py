"""What every benchmark records about its run, and how its tables reach ``RESULTS.md``.

Import this module **before numpy, faiss or jax** and call :func:`pin_threads` first thing:
thread pools read their environment variables once, at import.

Contract (shared by every script in ``benchmarks/``):

* a script writes ``benchmarks/results/<name>.json`` with :func:`write_result`; the payload has
  ``meta`` (from :func:`run_meta`: inputs hash, machine load before and during the run, thread
  settings and the CPU-time / wall-time ratio that shows they took effect, command line, date) and
  ``tables``: a list of :func:`table` dicts;
* ``RESULTS.md`` holds each table between ``<!-- table:<name>/<id> -->`` and ``<!-- /table -->``;
  ``python benchmarks/render.py`` regenerates every such block from the JSON, with a provenance line
  (inputs hash, load, date). A table whose inputs hash no longer matches the current sources is
  flagged stale by ``python benchmarks/render.py --check``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "RESULTS_DIR", "pin_threads", "load_now", "inputs_hash", "cpu_wall", "run_meta", "table",
           "write_result", "THREAD_VARS"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS")


def pin_threads(n: int, *, xla: bool = True) -> dict[str, str]:
    """Set every thread pool's size to ``n`` through the environment (before numpy/jax/faiss/torch are
    imported; raises if one already is, because then the setting would silently not apply).

    XLA's CPU client has no thread-count flag that bounds its Eigen pool and its compute threads
    together, so ``n == 1`` sets ``--xla_cpu_multi_thread_eigen=false`` (measured: CPU/wall ≈ 1.0 on a
    matmul loop; a token without ``--`` in ``XLA_FLAGS`` makes XLA ignore the whole string) and the
    process is bound to ``n`` cores with ``sched_setaffinity`` (which bounds every pool at once).
    Returns the settings applied (record them; :func:`cpu_wall` verifies them)."""
    late = [m for m in ("numpy", "jax", "faiss", "torch") if m in sys.modules]
    if late:
        raise RuntimeError(f"pin_threads must run before importing {', '.join(late)}")
    applied: dict[str, str] = {}
    for v in THREAD_VARS:
        os.environ[v] = str(n)
        applied[v] = str(n)
    if xla:
        flags = os.environ.get("XLA_FLAGS", "")
        if n == 1:
            flags += " --xla_cpu_multi_thread_eigen=false"
        os.environ["XLA_FLAGS"] = flags.strip()
        applied["XLA_FLAGS"] = os.environ["XLA_FLAGS"]
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))[:n]
        os.sched_setaffinity(0, cores)
        applied["affinity"] = ",".join(map(str, cores))
    return applied


def load_now(seconds: float = 1.0) -> dict[str, float]:
    """The machine's load: the 1-minute load average and the share of all cores busy over the next
    ``seconds`` (from ``/proc/stat``; this process is idle meanwhile)."""
    out: dict[str, float] = {"loadavg_1m": round(os.getloadavg()[0], 2), "cores": os.cpu_count() or 1}
    try:
        def snap() -> tuple[int, int]:
            vals = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            return sum(vals), idle

        t0, i0 = snap()
        time.sleep(seconds)
        t1, i1 = snap()
        out["busy_share"] = round(1.0 - (i1 - i0) / max(1, t1 - t0), 3)
    except OSError:  # not Linux
        pass
    return out


def inputs_hash(paths: Iterable[str | Path], extra: Any = None) -> str:
    """sha256 over the named source files (relative to the repository root; folders: every ``*.py``
    inside) and ``extra`` (e.g. the parsed arguments): a table whose hash differs from the current
    sources' is stale."""
    h = hashlib.sha256()
    files: list[Path] = []
    for p in paths:
        q = ROOT / p
        files.extend(sorted(q.rglob("*.py")) if q.is_dir() else [q])
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    h.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return h.hexdigest()


@contextmanager
def cpu_wall(record: dict):
    """Measure this process's CPU time (user + system, children included) over wall time inside the
    block, into ``record["cpu_over_wall"]``: ≈ 1 means one core was used, ≈ 2 both."""
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    yield record
    wall = time.perf_counter() - t0
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
           + c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
    record["cpu_s"] = round(cpu, 3)
    record["wall_s"] = round(wall, 3)
    record["cpu_over_wall"] = round(cpu / wall, 2) if wall > 0 else None


def run_meta(name: str, sources: Sequence[str | Path], args: Any = None, *, threads: dict | None = None,
             load_before: dict | None = None) -> dict:
    """The provenance of one run: inputs hash of ``sources`` + ``args`` (both recorded, so the hash can be
    recomputed later), load before the run, thread settings, interpreter and library versions, command
    line and UTC date."""
    hashed = [*sources, f"benchmarks/{name}.py"] if (ROOT / f"benchmarks/{name}.py").exists() else list(sources)
    extra = vars(args) if hasattr(args, "__dict__") else args
    versions = {}
    for mod in ("numpy", "jax", "faiss", "torch", "flax", "optax"):
        m = sys.modules.get(mod)
        if m is not None:
            versions[mod] = getattr(m, "__version__", "?")
    return {
        "name": name,
        "inputs_sha256": inputs_hash(hashed, extra),
        # what the hash covers, so that ``render.py --check`` can recompute it from the files as they are now
        "sources": [str(p) for p in hashed],
        "args": json.loads(json.dumps(extra, sort_keys=True, default=str)),
        "load_before": load_before if load_before is not None else load_now(),
        "threads": threads or {},
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "versions": versions,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def table(id: str, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, note: str = "") -> dict:
    """One table of a result: ``rows`` of already-formatted cells (strings or numbers)."""
    for r in rows:
        if len(r) != len(columns):
            raise ValueError(f"table {id!r}: row {r!r} has {len(r)} cells for {len(columns)} columns")
    return {"id": id, "title": title, "columns": list(columns), "rows": [list(map(_cell, r)) for r in rows],
            "note": note}


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def write_result(name: str, payload: dict, *, out: str | Path | None = None) -> Path:
    """Atomically write ``payload`` (with ``meta`` and ``tables``) to ``benchmarks/results/<name>.json``
    (or ``out``)."""
    if "meta" not in payload or "tables" not in payload:
        raise ValueError("a benchmark result needs 'meta' (run_meta) and 'tables' (a list of table())")
    path = Path(out) if out else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=2, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path

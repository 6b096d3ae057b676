"""Sandboxed execution of one untrusted SQLite statement, and the worker process that runs it.

This module is the engine half of :mod:`cfjax.domains.sql.world` (whose module
docstring is the contract: limits, outcomes, isolation). It imports the
standard library only, because :class:`~cfjax.domains.sql.world.SQLWorld`
runs it as a *script* — ``python -I -S -B _worker.py`` — in each of its
long-lived worker processes; the world's in-process path
(``isolation="inprocess"``) imports :func:`execute` from here instead.

Protocol (binary pipes: the parent writes the worker's stdin, reads its stdout)
-------------------------------------------------------------------------------
Every message is a *frame*: an 8-byte little-endian length, then that many
bytes of pickle.

1. parent → worker: ``{"images": {env_id: bytes}, "limits": ((name, value), ...),
   "memory_bytes": int, "heap_bytes": int}`` (the databases' serialized
   images, :meth:`sqlite3.Connection.serialize`);
2. worker → parent: ``("ready",)`` (or ``("fail", "worker_error", message)``);
3. then, repeatedly, parent → worker: ``(env_id, statement, timeout_s,
   max_rows, max_result_bytes)`` and worker → parent: ``("ok", n_cols,
   rows)`` — ``rows`` a list of row tuples — or ``("fail", kind, message)``.

The worker trusts the parent; the parent does **not** trust the worker's
replies (a worker runs untrusted SQL): it reads at most a bounded number of
bytes, unpickles with a loader that refuses every global (so a reply can only
build plain containers and scalars), and type-checks every row.

The worker exits on end of input (its parent closed the pipe or died), sets
``RLIMIT_AS`` (address space), ``RLIMIT_CORE`` 0, ``RLIMIT_FSIZE`` 0 and
SQLite's process-wide ``hard_heap_limit`` once at start, and before each
statement a soft ``RLIMIT_CPU`` of its CPU time so far plus the statement's
timeout plus 2 s (a backstop for a worker whose parent can no longer kill it).
After each reply — while the parent scores — it closes the connection the
request used and builds a *spare*: a fresh, locked-down copy of the database
that request used, which the next request on that database takes (a spare
is never used twice and at most one exists). It keeps its replies on a private copy of file descriptor 1 and points fd 1
at ``/dev/null``, so nothing else it might print can corrupt a reply.
"""

from __future__ import annotations

import math
import os
import pickle
import resource
import sqlite3
import struct
import sys
import time
from typing import Any

#: SQLite virtual-machine instructions between two progress-handler calls
PROGRESS_OPS = 1000
#: rows fetched by the first ``fetchmany``; later chunks double, up to ``MAX_CHUNK`` rows
FIRST_CHUNK = 1
MAX_CHUNK = 512
#: characters of a failure message a worker sends (the world clips feedback shorter still)
MAX_MESSAGE = 4000
#: pickle protocol of worker replies
PROTOCOL = 5
HEADER = struct.Struct("<Q")

# Statements that can never be read-only queries; refused before execution.
# (Other unknown first words are left to SQLite, which reports a syntax error.)
FORBIDDEN_FIRST_KEYWORDS = frozenset(
    {
        "INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER",
        "ATTACH", "DETACH", "PRAGMA", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT",
        "RELEASE", "VACUUM", "REINDEX", "ANALYZE", "EXPLAIN",
    }
)
ALLOWED_ACTIONS = frozenset(
    {
        sqlite3.SQLITE_SELECT,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_FUNCTION,
        getattr(sqlite3, "SQLITE_RECURSIVE", 33),
    }
)
# Functions that can touch the file system, load code or corrupt memory.
DENIED_FUNCTIONS = frozenset(
    {
        "load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "zipfile",
        "sqlar_compress",
    }
)
ACTION_NAMES: dict[int, str] = {
    getattr(sqlite3, f"SQLITE_{name}"): name
    for name in (
        "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE",
        "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW",
        "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX", "DROP_TEMP_TABLE",
        "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT",
        "PRAGMA", "READ", "SELECT", "TRANSACTION", "UPDATE", "ATTACH", "DETACH",
        "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE", "DROP_VTABLE",
        "FUNCTION", "SAVEPOINT", "RECURSIVE",
    )
    if hasattr(sqlite3, f"SQLITE_{name}")
}


class QueryFailure(Exception):
    """A query did not produce a usable result.

    Attributes:
      kind: ``"sql_error"``, ``"forbidden"``, ``"timeout"``, ``"too_many_rows"``,
        ``"too_large"``, ``"too_large_result"``, ``"memory"`` or ``"worker_error"``
        (see the world's module docstring).
      message: human-readable detail (never contains gold information).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def fresh_copy(image: bytes) -> sqlite3.Connection:
    """A private, disposable in-memory database holding ``image`` (a serialized database)."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    try:
        conn.deserialize(image)
    except BaseException:
        conn.close()
        raise
    return conn


def lock_down(conn: sqlite3.Connection, denials: list[str], limits: tuple[tuple[str, int], ...]) -> None:
    """Make ``conn`` read-only for untrusted SQL, lower its run-time limits; record denials."""
    conn.execute("PRAGMA temp_store=MEMORY")  # no temporary files: sorts stay under the memory limits
    conn.execute("PRAGMA query_only=ON")
    enable = getattr(conn, "enable_load_extension", None)
    if enable is not None:
        enable(False)
    setlimit = getattr(conn, "setlimit", None)
    if setlimit is not None:
        for name, value in limits:
            category = getattr(sqlite3, name, None)
            if category is not None:
                setlimit(category, value)

    def authorizer(
        action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        if action in ALLOWED_ACTIONS:
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
                denials.append(f"function {arg2}()")
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        name = ACTION_NAMES.get(action, f"action {action}")
        target = arg1 or arg2
        denials.append(f"{name} {target}" if target else name)
        return sqlite3.SQLITE_DENY

    conn.set_authorizer(authorizer)


#: databases up to this size get a spare copy prepared between requests
SPARE_MAX_BYTES = 8 << 20


def prepare(image: bytes, limits: tuple[tuple[str, int], ...]) -> tuple[sqlite3.Connection, list[str]]:
    """A fresh copy of ``image``, locked down; returns it with the list its authorizer records
    denials in (for :func:`run`)."""
    conn = fresh_copy(image)
    return conn, _locked(conn, limits)


def _locked(conn: sqlite3.Connection, limits: tuple[tuple[str, int], ...]) -> list[str]:
    """:func:`lock_down` ``conn`` (closed if that fails); returns the authorizer's denial list."""
    denials: list[str] = []
    try:
        lock_down(conn, denials, limits)
    except BaseException:
        conn.close()
        raise
    return denials


def execute(
    conn: sqlite3.Connection,
    statement: str,
    *,
    limits: tuple[tuple[str, int], ...],
    timeout_s: float,
    max_rows: int,
    max_result_bytes: int,
) -> tuple[int, list[tuple[Any, ...]]]:
    """Lock ``conn`` (a fresh copy) down with ``limits`` and :func:`run` ``statement`` on it."""
    denials = _locked(conn, limits)
    return run(conn, denials, statement, timeout_s=timeout_s, max_rows=max_rows,
               max_result_bytes=max_result_bytes)


def run(
    conn: sqlite3.Connection,
    denials: list[str],
    statement: str,
    *,
    timeout_s: float,
    max_rows: int,
    max_result_bytes: int,
    close: bool = True,
) -> tuple[int, list[tuple[Any, ...]]]:
    """Run one untrusted statement on ``conn`` (a fresh, locked-down copy, closed afterwards
    unless ``close`` is false: then the caller closes it and must not use it again).

    Rows are fetched in chunks of doubling size (1, 2, 4, ... rows); each
    chunk is pickled as it arrives and the pickles' total size is the
    result's size: more than ``max_result_bytes`` stops the fetch
    (``"too_large_result"``).

    Returns:
      ``(n_cols, rows)``.

    Raises:
      QueryFailure: the statement was refused, failed, timed out, returned
        more than ``max_rows`` rows or more than ``max_result_bytes`` bytes.
      MemoryError: the engine or the interpreter ran out of memory.
    """
    deadline = [math.inf]
    timed_out = [False]

    def progress() -> int:
        if time.perf_counter() > deadline[0]:
            timed_out[0] = True
            return 1
        return 0

    try:
        conn.set_progress_handler(progress, PROGRESS_OPS)
        deadline[0] = time.perf_counter() + timeout_s
        rows: list[tuple[Any, ...]] = []
        size = 0
        try:
            cursor = conn.execute(statement)
            if cursor.description is None:
                raise QueryFailure("forbidden", "statement returns no result set")
            n_cols = len(cursor.description)
            step = FIRST_CHUNK
            while len(rows) <= max_rows:
                chunk = cursor.fetchmany(min(step, max_rows + 1 - len(rows)))
                if not chunk:
                    break
                size += len(pickle.dumps(chunk, PROTOCOL))
                if size > max_result_bytes:
                    raise QueryFailure(
                        "too_large_result",
                        f"the query's result is larger than {max_result_bytes} bytes",
                    )
                rows += chunk
                step = min(2 * step, MAX_CHUNK)
        except sqlite3.Error as exc:
            if timed_out[0]:
                raise QueryFailure(
                    "timeout", f"the query did not finish within {timeout_s:g} s"
                ) from None
            if denials:
                raise QueryFailure(
                    "forbidden", "only read-only queries are allowed (denied: "
                    + ", ".join(dict.fromkeys(denials))
                    + ")",
                ) from None
            raise QueryFailure("sql_error", str(exc)) from None
        except UnicodeError as exc:  # a lone surrogate in the query text: not UTF-8 encodable
            raise QueryFailure("sql_error", f"the query is not valid Unicode text: {exc.reason}") from None
        if len(rows) > max_rows:
            raise QueryFailure("too_many_rows", f"the query returned more than {max_rows} rows")
        return n_cols, rows
    finally:
        conn.set_progress_handler(None, 0)
        if close:
            conn.close()


# --------------------------------------------------------------------------- the worker process


def _read_exact(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``; ``None`` at end of input."""
    parts: list[bytes] = []
    while n:
        part = os.read(fd, min(n, 1 << 20))
        if not part:
            return None
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _write_frame(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_frame(fd: int) -> Any:
    """The next frame from ``fd``, unpickled; ``None`` at end of input."""
    first = os.read(fd, 1 << 16)  # usually the whole frame in one call
    if not first:
        return None
    while len(first) < HEADER.size:
        more = os.read(fd, HEADER.size - len(first))
        if not more:
            return None
        first += more
    size = HEADER.unpack_from(first)[0]
    data = first[HEADER.size:]
    if len(data) > size:  # the parent never sends a second frame before the reply: broken
        return None
    if len(data) < size:
        rest = _read_exact(fd, size - len(data))
        if rest is None:
            return None
        data += rest
    return pickle.loads(data)


def _setup(init: dict) -> dict[str, bytes]:
    memory = int(init["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    heap = int(init.get("heap_bytes") or 0)
    if heap > 0:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute(f"PRAGMA hard_heap_limit={heap}")
        finally:
            conn.close()
    return dict(init["images"])


class _CpuBackstop:
    """A soft ``RLIMIT_CPU`` just past each statement's timeout (``SIGXCPU`` ends an orphaned
    worker); the limit is rewritten only when its whole second changes."""

    def __init__(self) -> None:
        self.hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        self.soft = -1

    def arm(self, timeout_s: float) -> None:
        soft = int(time.process_time() + timeout_s) + 2
        if self.hard != resource.RLIM_INFINITY:
            soft = min(soft, self.hard)
        if soft != self.soft:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, self.hard))
            self.soft = soft


def serve(in_fd: int, out_fd: int) -> None:
    """The worker loop (module docstring: protocol)."""
    init = _read_frame(in_fd)
    if init is None:
        return
    limits = tuple(init["limits"])
    try:
        images = _setup(init)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
        _write_frame(out_fd, ("fail", "worker_error", f"worker setup failed: {type(exc).__name__}: {exc}"))
        return
    del init
    # A fresh, locked-down copy of the database the last request used, built after its reply was
    # sent (while the parent scores), so the next request on that database need not wait for it.
    spare: tuple[str, sqlite3.Connection, list[str]] | None = None
    used: sqlite3.Connection | None = None
    backstop = _CpuBackstop()
    _write_frame(out_fd, ("ready",))
    while True:
        request = _read_frame(in_fd)
        if request is None:
            return
        env_id, statement, timeout_s, max_rows, max_result_bytes = request
        reply: tuple
        try:
            backstop.arm(timeout_s)
            taken, spare = spare, None
            if taken is not None and taken[0] == env_id:
                conn, denials = taken[1], taken[2]
            else:
                if taken is not None:
                    taken[1].close()
                conn, denials = prepare(images[env_id], limits)
            del taken
            used = conn
            n_cols, rows = run(
                conn,
                denials,
                statement,
                timeout_s=timeout_s,
                max_rows=max_rows,
                max_result_bytes=max_result_bytes,
                close=False,
            )
            reply = ("ok", n_cols, rows)
            del rows
        except QueryFailure as exc:
            reply = ("fail", exc.kind, exc.message[:MAX_MESSAGE])
        except MemoryError:
            reply = ("fail", "memory", "the query ran out of memory")
        except Exception as exc:  # noqa: BLE001 - any other failure is an outcome, not a dead worker
            reply = ("fail", "worker_error", f"{type(exc).__name__}: {exc}"[:MAX_MESSAGE])
        _write_frame(out_fd, reply)
        del reply
        # after the reply, while the parent scores: dispose of the used copy, build the spare
        if used is not None:
            used.close()
            used = conn = None
        # (small databases only: the parent's deadline for the next request already runs while a
        # large copy would be built, which could turn it into a false timeout)
        if spare is None and env_id in images and len(images[env_id]) <= SPARE_MAX_BYTES:
            try:
                spare = (env_id, *prepare(images[env_id], limits))
            except Exception:  # noqa: BLE001 - built on demand next time
                spare = None


def main() -> None:
    out_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        serve(0, out_fd)
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()

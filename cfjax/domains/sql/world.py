"""SQL world model: execute an untrusted SQLite query and score its result.

This is the executable evaluator ``H`` with utility ``U`` for the text-to-SQL
domain of CounterMem (papers/countermem.md §3.3, Eq. 2): every action is
checked from a *copy* of the same state, so comparing an edited action with
the original one is meaningful and nothing an action does can influence a
later check.

State isolation
---------------
On construction every database file is opened **read-only**
(``file:...?mode=ro`` URI), copied with the SQLite backup API into a private
in-memory database and kept as that database's serialized *image* (bytes,
:meth:`sqlite3.Connection.serialize`); the file is then closed and never
opened again, so the source files' bytes and modification times are never
changed. Each evaluation deserializes the image into a **fresh** in-memory
connection, runs the action there and throws the connection away.

Where it runs (``isolation=``)
------------------------------
* ``"subprocess"`` (default): in a **worker process** (the stdlib-only script
  :mod:`cfjax.domains.sql._worker`, run as ``python -I -S -B``, in its own
  session, with an empty environment). Workers are started lazily — on the
  first evaluation, never at construction or unpickling — receive the images
  once at start, and are reused for every later evaluation (a small pool: at
  most ``workers`` processes, one per concurrently evaluating thread). A
  worker has an address-space limit (``RLIMIT_AS`` = ``memory_mb`` MiB plus
  three times the databases' total size: the images, a spare copy and the
  copy in use), SQLite's ``hard_heap_limit`` at half of
  that, ``RLIMIT_FSIZE`` 0 and ``RLIMIT_CORE`` 0. The parent waits for the
  reply at most ``timeout_s + kill_grace_s`` seconds and otherwise **kills**
  the worker (``SIGKILL``) — this bounds single SQLite calls the progress
  handler cannot interrupt (one ``LIKE``/``instr``/``replace`` over a
  megabyte string). A killed, crashed or misbehaving worker is replaced by a
  new one at the next evaluation. Workers exit when the world is closed,
  garbage-collected or the interpreter exits (and by themselves at the end
  of their input, i.e. when the parent dies).
  Before each statement a worker also lowers its soft ``RLIMIT_CPU`` to its
  CPU time so far plus ``timeout_s`` plus 2 s (a backstop should the parent
  be unable to kill it), and after a ``memory`` or ``worker_error`` reply it
  is replaced too. The parent does not trust replies: it reads at most
  ``max_result_bytes`` + 64 KiB, unpickles refusing every global (no code
  can run; only plain containers and scalars can be built) and accepts only
  a list of rows of ``None``/``int``/``float``/``str``/``bytes`` with the
  announced column count; anything else is a ``worker_error``.
  Per evaluation the parent pays a pipe round trip and a small pickle each
  way; ``benchmarks/sql_world.py`` measures the cost against ``"inprocess"``.
* ``"inprocess"``: the same statement checks, SQLite limits and result cap,
  but in the calling process and with no memory limit or hard kill (the
  behaviour of earlier versions; for benchmarks and trusted input only).

Untrusted-SQL safety (defence in depth)
---------------------------------------
* the action's length is checked **first**: more than ``max_query_chars``
  characters is refused before any parsing (``error="too_large"``);
* exactly one statement is accepted (a tokenizer that understands quotes and
  comments splits the text at top-level ``;``); statements starting with a
  write/DDL/transaction/``PRAGMA``/``ATTACH``/``VACUUM``/``EXPLAIN`` keyword
  are refused before execution;
* ``PRAGMA temp_store=MEMORY`` (no temporary files) and ``PRAGMA
  query_only=ON`` are set before the authorizer is installed;
* an authorizer allows only ``SQLITE_SELECT``, ``SQLITE_READ``,
  ``SQLITE_FUNCTION`` (minus a deny-list such as ``load_extension`` and
  ``fts3_tokenizer``) and ``SQLITE_RECURSIVE``; every write, DDL statement,
  ``ATTACH``/``DETACH``, ``PRAGMA``, transaction, ``VACUUM``... is denied;
* extension loading is disabled and SQLite's run-time limits are lowered
  (:meth:`sqlite3.Connection.setlimit`; every built-in gold query stays far
  inside them):

  ====================================  =========  =====================================
  limit                                 default    option
  ====================================  =========  =====================================
  ``SQLITE_LIMIT_LENGTH``               1,000,000  ``max_value_bytes``: one string, blob
                                                   or row, in bytes (a stored value larger
                                                   than this could not be read)
  ``SQLITE_LIMIT_SQL_LENGTH``           400,000    4 × ``max_query_chars`` (UTF-8 bytes)
  ``SQLITE_LIMIT_COLUMN``               100        ``max_columns``, raised to the widest
                                                   table (SQLite checks the schema too)
  ``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``  1,000      ``max_like_pattern``
  ``SQLITE_LIMIT_EXPR_DEPTH``           500        ``sqlite_limits``
  ``SQLITE_LIMIT_COMPOUND_SELECT``      200        ``sqlite_limits``
  ``SQLITE_LIMIT_VARIABLE_NUMBER``      100        ``sqlite_limits``
  ``SQLITE_LIMIT_FUNCTION_ARG``         100        ``sqlite_limits``
  ``SQLITE_LIMIT_TRIGGER_DEPTH``        1          ``sqlite_limits``
  ``SQLITE_LIMIT_ATTACHED``             0          ``sqlite_limits``
  ``SQLITE_LIMIT_WORKER_THREADS``       0          ``sqlite_limits``
  ====================================  =========  =====================================

  ``sqlite_limits`` maps any ``SQLITE_LIMIT_*`` name to a value and
  overrides the table. Even so, one SQLite call can run long: ``LIKE``/``GLOB``
  with a 1,000-character pattern or ``instr`` over a 999,999-character
  string take a second or more, and an over-long ``printf`` width spins for
  seconds before SQLite returns ``NULL`` (``printf`` answers ``NULL``, not
  an error, past ``SQLITE_LIMIT_LENGTH``; ``replace``, ``hex``,
  ``zeroblob``, ``group_concat`` and ``||`` report "string or blob too
  big") — that is what the hard kill is for;
* a progress handler aborts the statement after ``timeout_s`` seconds of
  wall-clock time (checked every 1000 VM instructions), so endless recursive
  CTEs and cross-join explosions end without killing the worker;
* at most ``max_rows + 1`` rows and at most ``max_result_bytes`` bytes of
  result are fetched: rows are fetched in chunks of doubling size (1, 2, 4,
  ... rows) and each chunk is pickled as it arrives; the pickles' total size
  is the result's size (about the values' bytes plus a few bytes per value).

Outcomes
--------
Errors are *outcomes*, never exceptions. ``error`` is ``None`` when the query
ran (whatever it returned) and otherwise one of:

======================  ===========  ==============================================
error                   completed    meaning (score 0)
======================  ===========  ==============================================
``sql_error``           True         a syntax or runtime error (SQLite's message,
                                     including its limits: "string or blob too big")
``forbidden``           True         a refused statement (write, DDL, ``PRAGMA``...)
``too_large``           True         the query text exceeds ``max_query_chars``
``too_many_rows``       True         more than ``max_rows`` rows
``too_large_result``    True         more than ``max_result_bytes`` bytes of result
``memory``              True         the worker ran out of memory (``RLIMIT_AS`` /
                                     SQLite's heap limit)
``timeout``             **False**    not finished within ``timeout_s`` (stopped by
                                     the progress handler or by killing the worker)
``worker_error``        **False**    the sandbox failed: the worker could not start,
                                     crashed, closed its pipe or sent a bad reply
======================  ===========  ==============================================

An incomplete check is never admitted by CounterMem. An unknown ``env_id`` or
a failing gold query is a programming/data error and raises.

Result comparison
-----------------
The action's result is compared with the result of the gold query of the task's answer key (run once
per task, cached):

* **Columns**: the column *count* must match; column names are ignored.
* **Values**: ``NULL`` equals only ``NULL``; two integers are compared
  exactly; an integer/float or float/float pair is equal when
  ``math.isclose(a, b, rel_tol=float_tol, abs_tol=float_tol)``; strings are
  compared exactly (case-sensitive) and bytes exactly; values of different
  kinds (number vs. string, string vs. bytes) are never equal.
* **Rows**: compared as a **multiset** (order ignored, duplicates count)
  unless ``task.ordered`` is true, in which case they are compared as a
  **sequence**. Multiset matching buckets rows by a canonical key (floats
  rounded to about ``-log10(float_tol)`` significant digits), confirms each
  pairing with the tolerant comparator, and then pairs leftover rows across
  buckets with the tolerant comparator (bounded work; a row is tried only
  against rows with the same NULLs, strings and bytes), so values straddling
  a rounding boundary still match. Rows equal under ``==`` in the same order
  match without the comparator.

Score ``U``:

* ``1.0`` (``solved=True``) iff the results match;
* otherwise, with ``partial_credit``: ``0.9 × F1`` of the multiset overlap of
  rows (``F1 = 2·overlap / (n_got + n_expected)``), or ``0.5`` for an ordered
  task whose rows match as a multiset but not as a sequence; a column-count
  mismatch overlaps in no row and scores 0. A mismatch never reaches 1 and
  errors score 0;
* without ``partial_credit``: ``0.0`` for any mismatch.

Feedback (``feedback=``)
------------------------
What ``Outcome.feedback`` — the text an agent sees, which flows into retries,
records and retrieval state — may say is a world option:

* ``"user"`` (default): what a user-facing evaluator returns. On an error, the
  engine's (or the sandbox's) message; otherwise a verdict and the action's
  *own* result shape, never anything computed from the reference result::

      Correct: the query returns the requested result (12 rows).
      Incorrect: the result is not what was asked. Your query returned 9 rows with 1 column.

  A wrong column count, missing or extra rows and a wrong order all read the
  same.
* ``"rich"``: the diagnostic text of earlier versions, which states statistics
  of the reference result — the expected row and column counts, the overlap
  with the expected rows and whether only the order differs::

      Result mismatch: your query returned 9 rows; the expected result has 12 rows;
      9 rows overlap. 3 expected rows missing.

Neither mode reveals the gold SQL or gold rows, and the option never changes
``score``/``solved`` (which, with ``partial_credit``, is itself ``0.9 × F1``
of the overlap with the reference: a number for the world/analysis side).

Thread-safety and pickling
--------------------------
One :class:`SQLWorld` may be used from several threads at once: each
evaluation checks a worker out of the pool (starting one if fewer than
``workers`` exist, else waiting for one), so up to ``workers`` statements run
in parallel. :meth:`SQLWorld.evaluate` keeps no per-call state on ``self``;
the only other mutable state is the per-task reference-result cache. A world
pickles (for worker processes of the experiment runner) as its options, the
database images and the reference cache — never its worker processes, which
the copy starts lazily for itself. :meth:`SQLWorld.close` stops the workers.

Length: one module on purpose — statement splitting, the world's limits, the worker pool and the
result comparator are the world's one contract with untrusted SQL; keeping them together keeps every
limit in one place. Only the engine half — the sandboxed execution and the worker process's loop —
lives in :mod:`cfjax.domains.sql._worker` (standard library only, so it starts fast as a script);
this docstring is the contract for both.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import select
import subprocess
import sys
import math
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfjax.domains.sql import _worker
from cfjax.domains.sql._worker import QueryFailure
from cfjax.types import AnswerKey, Task
from cfjax.types import Outcome

__all__ = ["SQLWorld", "QueryResult", "QueryFailure", "split_statements", "FEEDBACK_MODES", "ISOLATION_MODES"]

Row = tuple[Any, ...]

_MAX_FEEDBACK = 790
#: values of the ``feedback`` option (module docstring, "Feedback")
FEEDBACK_MODES = ("user", "rich")
#: values of the ``isolation`` option (module docstring, "Where it runs")
ISOLATION_MODES = ("subprocess", "inprocess")
# (limit name, value) applied with Connection.setlimit; the first four come from world options.
_DEFAULT_LIMITS: dict[str, int] = {
    "SQLITE_LIMIT_LENGTH": 1_000_000,
    "SQLITE_LIMIT_SQL_LENGTH": 400_000,
    "SQLITE_LIMIT_COLUMN": 100,
    "SQLITE_LIMIT_LIKE_PATTERN_LENGTH": 1_000,
    "SQLITE_LIMIT_EXPR_DEPTH": 500,
    "SQLITE_LIMIT_COMPOUND_SELECT": 200,
    "SQLITE_LIMIT_VARIABLE_NUMBER": 100,
    "SQLITE_LIMIT_FUNCTION_ARG": 100,
    "SQLITE_LIMIT_TRIGGER_DEPTH": 1,
    "SQLITE_LIMIT_ATTACHED": 0,
    "SQLITE_LIMIT_WORKER_THREADS": 0,
}
# Pair comparisons allowed when matching leftover rows across key buckets.
_LEFTOVER_BUDGET = 2_000_000
# Seconds a new worker may take to start and load the databases.
_START_TIMEOUT_S = 30.0
# Reply bytes allowed beyond max_result_bytes (framing, pickle overhead, messages).
_REPLY_SLACK = 64 * 1024
_FAILURE_KINDS = frozenset(
    {"sql_error", "forbidden", "timeout", "too_many_rows", "too_large", "too_large_result", "memory",
     "worker_error"}
)
_VALUE_TYPES = frozenset({type(None), int, float, str, bytes})
_WORKER_SCRIPT = str(Path(_worker.__file__).resolve())


@dataclass(frozen=True)
class QueryResult:
    """The (bounded) result of one successful query.

    Attributes:
      n_cols: number of result columns.
      rows: the fetched rows, in the order SQLite produced them.
    """

    n_cols: int
    rows: tuple[Row, ...]


# --------------------------------------------------------------------------
# statement splitting

_SPECIAL = re.compile(r"""['"`\[;]|--|/\*""")


def split_statements(sql: str) -> list[str]:
    """Split SQL text into its non-empty statements.

    Splits at ``;`` outside string literals (``'...'``), quoted identifiers
    (``"..."``, ```...```, ``[...]``) and comments (``-- ...``, ``/* ... */``).
    Pieces consisting only of whitespace and comments are dropped. An
    unterminated literal or comment runs to the end of the text (SQLite then
    reports the syntax error). Linear in the text's length (the world checks
    the length first).

    Args:
      sql: the SQL text.

    Returns:
      The statements, each without its terminating ``;``.
    """
    statements: list[str] = []
    start = 0
    has_token = False
    i, n = 0, len(sql)
    while i <= n:
        m = _SPECIAL.search(sql, i)
        j = m.start() if m else n
        if not has_token and j > i and not sql[i:j].isspace():
            has_token = True  # a word or symbol between two special tokens
        if m is None:
            break
        token = m.group()
        if token == ";":
            if has_token:
                statements.append(sql[start:j])
            start, has_token = j + 1, False
            i = j + 1
        elif token == "--":
            k = sql.find("\n", j + 2)
            i = n + 1 if k < 0 else k + 1
        elif token == "/*":
            k = sql.find("*/", j + 2)
            i = n + 1 if k < 0 else k + 2
        else:  # a quote: runs to its closing character; a doubled one escapes itself ('it''s')
            close = "]" if token == "[" else token
            k = j + 1
            while True:
                k = sql.find(close, k)
                if k < 0:
                    k = n
                    break
                if close != "]" and k + 1 < n and sql[k + 1] == close:
                    k += 2
                    continue
                break
            i = k + 1
            has_token = True
    if has_token:
        statements.append(sql[start:])
    return statements


def _first_keyword(statement: str) -> str:
    """The first word of a statement, skipping comments, blanks and ``(``."""
    i, n = 0, len(statement)
    while i < n:
        if statement[i].isspace() or statement[i] == "(":
            i += 1
        elif statement.startswith("--", i):
            j = statement.find("\n", i)
            i = n if j < 0 else j + 1
        elif statement.startswith("/*", i):
            j = statement.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            break
    j = i
    while j < n and (statement[j].isalnum() or statement[j] == "_"):
        j += 1
    return statement[i:j].upper()


# --------------------------------------------------------------------------
# value normalisation and comparison


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _values_close(a: Any, b: Any, tol: float) -> bool:
    """Tolerant equality of two SQLite values (see module docstring)."""
    if a is None or b is None:
        return a is None and b is None
    if _is_number(a) and _is_number(b):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _rows_close(a: Row, b: Row, tol: float) -> bool:
    return len(a) == len(b) and all(_values_close(x, y, tol) for x, y in zip(a, b))


_NUMBER = object()  # stands for any number in _exact_part


def _exact_part(row: Row) -> tuple[Any, ...]:
    """``row`` with every number replaced by one marker: two rows can only be close (tolerantly
    equal) if these parts are equal."""
    return tuple(_NUMBER if _is_number(v) else (type(v), v) for v in row)


class _Comparator:
    """Canonical row keys and tolerant row matching for one ``float_tol``."""

    def __init__(self, tol: float) -> None:
        self.tol = tol
        # significant digits kept in a float's canonical key
        self.digits = max(1, min(15, math.ceil(-math.log10(tol)) if tol > 0 else 15))

    def _value_key(self, value: Any) -> tuple[Any, ...]:
        if value is None:
            return (0,)
        if _is_number(value):
            if isinstance(value, int) and abs(value) > 2**53:
                return (1, value)
            f = float(value)
            if not math.isfinite(f):
                return (1, f)
            if abs(f) <= self.tol:
                return (1, 0.0)
            return (1, float(f"{f:.{self.digits - 1}e}"))
        if isinstance(value, str):
            return (2, value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return (3, bytes(value))
        return (4, repr(value))

    def row_key(self, row: Row) -> tuple[tuple[Any, ...], ...]:
        """A hashable, order-comparable canonical key for a row."""
        return tuple(self._value_key(v) for v in row)

    def sequence_equal(self, got: Sequence[Row], expected: Sequence[Row]) -> bool:
        """Whether two row sequences match element-wise."""
        return len(got) == len(expected) and all(
            _rows_close(a, b, self.tol) for a, b in zip(got, expected)
        )

    def overlap(self, got: Iterable[Row], expected: Iterable[Row]) -> int:
        """Size of a (greedy) tolerant matching between two row multisets.

        Rows are first paired within buckets of equal canonical key, each
        pairing confirmed with the tolerant comparator; the rows left over are
        then paired across buckets (bounded by ``_LEFTOVER_BUDGET``
        comparisons) so that values on either side of a rounding boundary
        still match.
        """
        buckets: dict[tuple[Any, ...], list[Row]] = {}
        for row in expected:
            buckets.setdefault(self.row_key(row), []).append(row)
        matched = 0
        unmatched: list[Row] = []
        for row in got:
            bucket = buckets.get(self.row_key(row))
            if bucket:
                for idx, cand in enumerate(bucket):
                    if _rows_close(row, cand, self.tol):
                        bucket.pop(idx)
                        matched += 1
                        break
                else:
                    unmatched.append(row)
            else:
                unmatched.append(row)
        rest = [r for bucket in buckets.values() for r in bucket]
        if unmatched and rest and len(unmatched) * len(rest) <= _LEFTOVER_BUDGET:
            # Only rows with the same non-numeric values (NULLs, strings, bytes: compared exactly)
            # can be close, so each row scans just those, in their order in ``rest``: the greedy
            # matching is the one a scan of all of ``rest`` finds, at a fraction of the cost.
            shapes: dict[tuple[Any, ...], list[Row]] = {}
            for cand in rest:
                shapes.setdefault(_exact_part(cand), []).append(cand)
            for row in unmatched:
                same = shapes.get(_exact_part(row))
                if not same:
                    continue
                for idx, cand in enumerate(same):
                    if _rows_close(row, cand, self.tol):
                        same.pop(idx)
                        matched += 1
                        break
        return matched


def _clip(text: str, limit: int = _MAX_FEEDBACK) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"

# --------------------------------------------------------------------------
# worker processes (module docstring, "Where it runs")


class _WorkerTimeout(Exception):
    """No reply before the deadline."""


class _WorkerBroken(Exception):
    """The worker could not start, died, closed its pipe or sent something unusable."""


class _ReplyUnpickler(pickle.Unpickler):
    """Unpickles a worker's reply refusing every global: only plain containers and scalars."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a worker reply may not refer to {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("a worker reply may not hold persistent ids")


def _safe_loads(data: bytes | bytearray | memoryview) -> Any:
    return _ReplyUnpickler(io.BytesIO(data)).load()


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, _worker.PROTOCOL)
    return _worker.HEADER.pack(len(data)) + data


class _Worker:
    """One worker process; used by one thread at a time (the pool hands it out)."""

    def __init__(self, init_frame: bytes, max_reply: int) -> None:
        self.max_reply = max_reply
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", _WORKER_SCRIPT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={},
                close_fds=True,
                start_new_session=True,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            raise _WorkerBroken(f"cannot start a worker process: {exc}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._wfd = self.proc.stdin.fileno()
        self._rfd = self.proc.stdout.fileno()
        try:
            os.set_blocking(self._wfd, False)
            os.set_blocking(self._rfd, False)
            self._poll_in = select.poll()
            self._poll_in.register(self._rfd, select.POLLIN)
            self._poll_out = select.poll()
            self._poll_out.register(self._wfd, select.POLLOUT)
            deadline = time.perf_counter() + _START_TIMEOUT_S
            reply = self.call(init_frame, deadline)
        except _WorkerTimeout:
            self.kill()
            raise _WorkerBroken(f"the worker did not start within {_START_TIMEOUT_S:g} s") from None
        except BaseException:
            self.kill()
            raise
        if reply != ("ready",):
            self.kill()
            detail = reply[2] if type(reply) is tuple and len(reply) == 3 and type(reply[2]) is str else "bad reply"
            raise _WorkerBroken(f"the worker failed to start: {detail[:300]}")

    def call(self, frame: bytes, deadline: float) -> Any:
        """Send one frame, return the (safely unpickled) reply.

        Raises:
          _WorkerTimeout: no complete reply before ``deadline`` (``time.perf_counter``).
          _WorkerBroken: the pipe broke, the worker exited or the reply is malformed.
        """
        view = memoryview(frame)
        while view:
            try:
                view = view[os.write(self._wfd, view):]
            except BlockingIOError:
                self._wait(self._poll_out, deadline)
            except OSError as exc:  # BrokenPipeError: the worker is gone
                raise _WorkerBroken(f"cannot write to the worker: {exc}") from None
        buf = bytearray()
        header = _worker.HEADER.size
        need, sized = header, False
        while True:
            if len(buf) >= need:
                if not sized:
                    size = _worker.HEADER.unpack_from(buf)[0]
                    if size > self.max_reply:
                        raise _WorkerBroken(f"the worker's reply is too large ({size} bytes)")
                    need, sized = header + size, True
                    continue
                if len(buf) > need:
                    raise _WorkerBroken("the worker sent more than one reply")
                try:
                    return _safe_loads(memoryview(buf)[header:])
                except Exception as exc:  # garbage: UnpicklingError, EOFError, ValueError...
                    raise _WorkerBroken(f"unreadable reply from the worker: {type(exc).__name__}") from None
            self._wait(self._poll_in, deadline)  # returns at once when the reply is there
            try:
                part = os.read(self._rfd, max(65536, need - len(buf)))
            except BlockingIOError:
                continue
            except OSError as exc:
                raise _WorkerBroken(f"cannot read from the worker: {exc}") from None
            if not part:
                raise _WorkerBroken(self._exit_text())
            buf += part

    @staticmethod
    def _wait(poll: Any, deadline: float) -> None:
        """Until ``poll`` has an event.

        Raises:
          _WorkerTimeout: ``deadline`` passed first.
        """
        remaining = deadline - time.perf_counter()
        if remaining <= 0 or not poll.poll(max(1, math.ceil(remaining * 1000))):
            if time.perf_counter() >= deadline:
                raise _WorkerTimeout()

    def _exit_text(self) -> str:
        try:
            code = self.proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            return "the worker closed its output"
        if code < 0:
            return f"the worker was killed by signal {-code}"
        return f"the worker exited with status {code}"

    def kill(self) -> None:
        """Kill the process (idempotent) and reap it."""
        try:
            self.proc.kill()
        except OSError:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - uninterruptible sleep
            pass


class _Pool:
    """At most ``size`` workers, started on demand, each lent to one thread at a time.

    Holds no reference to the world, so a ``weakref.finalize`` on the world can close it.
    """

    def __init__(self, init_frame: bytes, size: int, max_reply: int) -> None:
        self._init_frame = init_frame
        self._size = size
        self._max_reply = max_reply
        self._idle: list[_Worker] = []
        self._count = 0  # idle + lent workers (and ones being started)
        self._cond = threading.Condition()
        self._closed = False
        self._pid = os.getpid()

    def acquire(self) -> _Worker:
        dead: list[_Worker] = []
        try:
            with self._cond:
                while True:
                    if self._closed:
                        raise _WorkerBroken("the SQL world is closed")
                    while self._idle:
                        worker = self._idle.pop()
                        if worker.proc.poll() is None:
                            return worker
                        dead.append(worker)  # died while idle (killed from outside): replace it
                        self._count -= 1
                    if self._count < self._size:
                        self._count += 1
                        break
                    self._cond.wait()
        finally:
            for worker in dead:
                worker.kill()
        try:
            return _Worker(self._init_frame, self._max_reply)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def release(self, worker: _Worker, healthy: bool) -> None:
        with self._cond:
            if healthy and not self._closed and os.getpid() == self._pid:
                self._idle.append(worker)
                self._cond.notify()
                return
            self._count -= 1
            self._cond.notify()
        worker.kill()

    @property
    def processes(self) -> int:
        """Worker processes alive now (idle or lent)."""
        with self._cond:
            return self._count

    def close(self) -> None:
        """Kill the idle workers; lent ones are killed when returned. (A forked child leaves its
        parent's workers alone.)"""
        if os.getpid() != self._pid:
            return
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()


def _decode(reply: Any, *, max_rows: int) -> QueryResult:
    """A worker reply as a result, or the failure it reports.

    Raises:
      QueryFailure: the worker reported a failure.
      _WorkerBroken: the reply is malformed.
    """
    if type(reply) is tuple and len(reply) == 3:
        tag, a, b = reply
        if tag == "fail" and type(a) is str and a in _FAILURE_KINDS and type(b) is str:
            raise QueryFailure(a, b[: 2 * _MAX_FEEDBACK])
        if tag == "ok" and type(a) is int and 0 <= a and type(b) is list and len(b) <= max_rows:
            ok = _VALUE_TYPES.__contains__
            if all(type(r) is tuple and len(r) == a and all(map(ok, map(type, r))) for r in b):
                return QueryResult(n_cols=a, rows=tuple(b))
    raise _WorkerBroken("malformed reply from the worker")


# --------------------------------------------------------------------------
# the world

class SQLWorld:
    """Executable SQLite world model: ``evaluate(task, sql) -> Outcome``.

    Args:
      databases: ``env_id -> path`` of each SQLite database file. Files are
        read once, read-only, into private in-memory images.
      keys: ``task_id -> AnswerKey`` (gold query, order sensitivity); only
        the world reads them.
      timeout_s: wall-clock limit of one action's execution (including
        fetching its rows).
      max_rows: largest result an action may return; more rows give a failed
        outcome ``"too_many_rows"``.
      float_tol: relative and absolute tolerance for numeric comparison.
      partial_credit: score mismatches with ``0.9 × F1`` of the row overlap
        (0.5 for right rows in the wrong order) instead of 0.
      feedback: ``"user"`` (default: error text or a verdict with the action's own
        result shape) or ``"rich"`` (also the reference result's row/column counts,
        the overlap and order diagnostics); see the module docstring.
      isolation: ``"subprocess"`` (default: bounded worker processes) or
        ``"inprocess"`` (unbounded; benchmarks and trusted input only).
      workers: most worker processes (started lazily, one per concurrently
        evaluating thread).
      memory_mb: a worker's address-space limit in MiB, on top of three times
        the databases' total size.
      kill_grace_s: seconds past ``timeout_s`` the parent waits for a reply
        before it kills the worker.
      max_query_chars: longest action text (checked before parsing);
        SQLite's ``SQLITE_LIMIT_SQL_LENGTH`` is 4× this (UTF-8 bytes).
      max_result_bytes: largest result (pickled rows) an action may return;
        more gives ``"too_large_result"``.
      max_value_bytes: ``SQLITE_LIMIT_LENGTH`` (longest string, blob or row).
      max_columns: ``SQLITE_LIMIT_COLUMN`` (raised to the widest table of the
        databases, which SQLite checks the schema against).
      max_like_pattern: ``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``.
      sqlite_limits: further ``SQLITE_LIMIT_*`` name → value settings,
        overriding the module docstring's table.

    Raises:
      FileNotFoundError: a database file does not exist.
      ValueError: a parameter is out of range or ``feedback``/``isolation`` is not a known mode.
      sqlite3.DatabaseError: a file is not a readable SQLite database.
    """

    def __init__(
        self,
        databases: Mapping[str, str | Path],
        keys: Mapping[str, AnswerKey],
        *,
        timeout_s: float = 2.0,
        max_rows: int = 10_000,
        float_tol: float = 1e-6,
        partial_credit: bool = True,
        feedback: str = "user",
        isolation: str = "subprocess",
        workers: int = 8,
        memory_mb: int = 512,
        kill_grace_s: float = 0.25,
        max_query_chars: int = 100_000,
        max_result_bytes: int = 8_000_000,
        max_value_bytes: int = _DEFAULT_LIMITS["SQLITE_LIMIT_LENGTH"],
        max_columns: int = _DEFAULT_LIMITS["SQLITE_LIMIT_COLUMN"],
        max_like_pattern: int = _DEFAULT_LIMITS["SQLITE_LIMIT_LIKE_PATTERN_LENGTH"],
        sqlite_limits: Mapping[str, int] | None = None,
    ) -> None:
        if feedback not in FEEDBACK_MODES:
            raise ValueError(f"feedback must be 'user' or 'rich', got {feedback!r}")
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be 'subprocess' or 'inprocess', got {isolation!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_rows < 0:
            raise ValueError(f"max_rows must be >= 0, got {max_rows}")
        if not float_tol >= 0:
            raise ValueError(f"float_tol must be >= 0, got {float_tol}")
        for name, value in (("workers", workers), ("memory_mb", memory_mb), ("max_query_chars", max_query_chars),
                            ("max_result_bytes", max_result_bytes), ("max_value_bytes", max_value_bytes),
                            ("max_columns", max_columns), ("max_like_pattern", max_like_pattern)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not kill_grace_s >= 0:
            raise ValueError(f"kill_grace_s must be >= 0, got {kill_grace_s}")
        limits = dict(_DEFAULT_LIMITS)
        limits.update(
            SQLITE_LIMIT_LENGTH=int(max_value_bytes),
            SQLITE_LIMIT_SQL_LENGTH=4 * int(max_query_chars),
            SQLITE_LIMIT_COLUMN=int(max_columns),
            SQLITE_LIMIT_LIKE_PATTERN_LENGTH=int(max_like_pattern),
        )
        for name, value in (sqlite_limits or {}).items():
            if not (name.startswith("SQLITE_LIMIT_") and hasattr(sqlite3, name)):
                raise ValueError(f"unknown SQLite limit {name!r}")
            if int(value) < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
            limits[name] = int(value)
        self.timeout_s = float(timeout_s)
        self.max_rows = int(max_rows)
        self.float_tol = float(float_tol)
        self.partial_credit = bool(partial_credit)
        self.feedback = feedback
        self.isolation = isolation
        self.workers = int(workers)
        self.memory_mb = int(memory_mb)
        self.kill_grace_s = float(kill_grace_s)
        self.max_query_chars = int(max_query_chars)
        self.max_result_bytes = int(max_result_bytes)
        self._cmp = _Comparator(self.float_tol)
        self._keys = dict(keys)
        self._paths: dict[str, Path] = {}
        self._images: dict[str, bytes] = {}
        # (task_id, env_id, gold) -> reference result
        self._reference: dict[tuple[str, str, str], QueryResult] = {}
        self._pool: _Pool | None = None
        self._pool_lock = threading.Lock()
        self._finalizer: weakref.finalize | None = None
        widest = 0
        for env_id, path in databases.items():
            self._images[env_id], width = self._load(Path(path))
            self._paths[env_id] = Path(path)
            widest = max(widest, width)
        # SQLite applies SQLITE_LIMIT_COLUMN to the schema too: below the widest table, a database
        # could not even be read
        limits["SQLITE_LIMIT_COLUMN"] = max(limits["SQLITE_LIMIT_COLUMN"], widest)
        #: the SQLite run-time limits every statement runs under (module docstring's table)
        self.sqlite_limits: dict[str, int] = limits
        self._limits = tuple(limits.items())

    # ---------------------------------------------------------------- setup

    @staticmethod
    def _load(path: Path) -> tuple[bytes, int]:
        """The serialized image of a database file, opened read-only, and its widest table's (or
        the schema table's) column count."""
        path = path.expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f"SQL database file not found: {path}")
        source = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
        try:
            master = sqlite3.connect(":memory:", isolation_level=None)
            try:
                source.backup(master)
                (width,) = master.execute(
                    "SELECT max(5, coalesce(max(n), 0)) FROM (SELECT count(*) AS n FROM sqlite_master AS m, "
                    "pragma_table_xinfo(m.name) AS c WHERE m.type IN ('table', 'view') GROUP BY m.name)"
                ).fetchone()
                if master.execute("PRAGMA page_count").fetchone()[0] == 0:  # an empty file: no page
                    master.execute("CREATE TABLE _empty (x)")  # to serialize; dropped again
                    master.execute("DROP TABLE _empty")
                return master.serialize(), int(width)
            finally:
                master.close()
        finally:
            source.close()

    @property
    def env_ids(self) -> tuple[str, ...]:
        """The database ids this world can evaluate against."""
        return tuple(self._images)

    @property
    def worker_processes(self) -> int:
        """Worker processes alive now (0 before the first evaluation and after :meth:`close`)."""
        pool = self._pool
        return 0 if pool is None else pool.processes

    def close(self) -> None:
        """Stop the worker processes and drop the images (the world is unusable afterwards)."""
        with self._pool_lock:
            self._pool = None
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()  # _Pool.close, once
        self._images.clear()

    def __enter__(self) -> SQLWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in ("_pool", "_pool_lock", "_finalizer"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool = None
        self._pool_lock = threading.Lock()
        self._finalizer = None

    # ------------------------------------------------------------ execution

    def _check_env(self, env_id: str) -> bytes:
        try:
            return self._images[env_id]
        except KeyError:
            known = ", ".join(sorted(self._images)) or "none"
            raise ValueError(f"unknown SQL env_id {env_id!r} (known databases: {known})") from None

    def _get_pool(self) -> _Pool:
        with self._pool_lock:
            pool = self._pool
            if pool is None or (pool._pid != os.getpid()):
                size = sum(len(b) for b in self._images.values())
                memory = self.memory_mb * 2**20 + 3 * size
                init = _frame({"images": self._images, "limits": self._limits, "memory_bytes": memory,
                               "heap_bytes": memory // 2})
                pool = self._pool = _Pool(init, self.workers, self.max_result_bytes + _REPLY_SLACK)
                self._finalizer = weakref.finalize(self, pool.close)
            return pool

    def _run(self, env_id: str, sql: str, *, timeout_s: float, max_rows: int) -> QueryResult:
        """Run one untrusted statement on a fresh copy of ``env_id``.

        Raises:
          QueryFailure: the statement was refused, failed, timed out, was too
            large or returned too large a result, or the sandbox failed.
          ValueError: unknown ``env_id``.
        """
        image = self._check_env(env_id)
        if len(sql) > self.max_query_chars:  # before any parsing: the tokenizer is linear, not free
            raise QueryFailure(
                "too_large", f"the query has {len(sql)} characters; at most {self.max_query_chars} are allowed"
            )
        statements = split_statements(sql)
        if not statements:
            raise QueryFailure("sql_error", "empty query")
        if len(statements) > 1:
            raise QueryFailure(
                "forbidden", f"only one statement is allowed, got {len(statements)}"
            )
        statement = statements[0]
        keyword = _first_keyword(statement)
        if keyword in _worker.FORBIDDEN_FIRST_KEYWORDS:
            raise QueryFailure(
                "forbidden", f"only read-only SELECT queries are allowed, got {keyword}"
            )
        if self.isolation == "inprocess":
            try:
                n_cols, rows = _worker.execute(
                    _worker.fresh_copy(image), statement, limits=self._limits, timeout_s=timeout_s,
                    max_rows=max_rows, max_result_bytes=self.max_result_bytes,
                )
            except MemoryError:
                raise QueryFailure("memory", "the query ran out of memory") from None
            return QueryResult(n_cols=n_cols, rows=tuple(rows))
        return self._run_in_worker(env_id, statement, timeout_s=timeout_s, max_rows=max_rows)

    def _run_in_worker(self, env_id: str, statement: str, *, timeout_s: float, max_rows: int) -> QueryResult:
        """:meth:`_run`'s execution in a worker process (module docstring, "Where it runs")."""
        try:
            pool = self._get_pool()
            worker = pool.acquire()
        except _WorkerBroken as exc:
            raise QueryFailure("worker_error", f"the SQL sandbox is not available: {exc}") from None
        except Exception as exc:  # e.g. MemoryError or OSError while starting a process
            raise QueryFailure("worker_error", f"the SQL sandbox is not available: {type(exc).__name__}") from None
        healthy = False
        try:
            request = _frame((env_id, statement, timeout_s, max_rows, self.max_result_bytes))
            reply = worker.call(request, time.perf_counter() + timeout_s + self.kill_grace_s)
            result = _decode(reply, max_rows=max_rows)
            healthy = True
            return result
        except QueryFailure as exc:
            # a worker that ran out of memory or hit an internal error is replaced
            healthy = exc.kind not in ("memory", "worker_error")
            raise
        except _WorkerTimeout:
            raise QueryFailure("timeout", f"the query did not finish within {timeout_s:g} s") from None
        except _WorkerBroken as exc:
            raise QueryFailure("worker_error", f"the SQL sandbox failed: {exc}") from None
        except Exception as exc:  # anything else on the parent's side of the pipe
            raise QueryFailure("worker_error", f"the SQL sandbox failed: {type(exc).__name__}") from None
        finally:
            pool.release(worker, healthy)  # a closed (or replaced) pool kills it

    # ------------------------------------------------------------ reference

    def _key(self, task: Task) -> AnswerKey:
        try:
            return self._keys[task.task_id]
        except KeyError:
            raise ValueError(f"the SQL world has no answer key for task {task.task_id!r}") from None

    def reference_result(self, task: Task) -> QueryResult:
        """The gold query's result for ``task`` (computed once, cached).

        The gold runs under the same sandbox as actions on a fresh copy of
        the database, with a generous timeout (``max(10·timeout_s, 10 s)``);
        a ``worker_error`` is retried once.

        Raises:
          ValueError: unknown ``env_id``.
          RuntimeError: the gold query fails, is refused, times out or
            returns more than ``max_rows`` rows (naming the task).
        """
        gold = self._key(task).gold
        key = (task.task_id, task.env_id, gold)
        cached = self._reference.get(key)
        if cached is not None:
            return cached
        try:
            result = self._run_gold(task.env_id, gold)
        except QueryFailure as exc:
            raise RuntimeError(
                f"gold SQL of task {task.task_id!r} (env {task.env_id!r}) failed: "
                f"{exc.kind}: {exc.message}"
            ) from None
        self._reference[key] = result
        return result

    def _run_gold(self, env_id: str, gold: str) -> QueryResult:
        timeout_s = max(10.0 * self.timeout_s, 10.0)
        try:
            return self._run(env_id, gold, timeout_s=timeout_s, max_rows=self.max_rows)
        except QueryFailure as exc:
            if exc.kind != "worker_error":
                raise
        return self._run(env_id, gold, timeout_s=timeout_s, max_rows=self.max_rows)

    def reference_rows(self, task: Task) -> list[Row]:
        """The gold result rows of ``task`` (for tests and analysis only)."""
        return list(self.reference_result(task).rows)

    # ------------------------------------------------------------- evaluate

    def evaluate(self, task: Task, action: str) -> Outcome:
        """Execute ``action`` on a fresh copy of ``task.env_id`` and score it.

        Args:
          task: the task (its ``gold`` defines the expected result).
          action: untrusted SQL text.

        Returns:
          The :class:`~cfjax.types.Outcome` (see module docstring for
          the scoring rules). Action errors are outcomes, never exceptions.

        Raises:
          ValueError: ``task.env_id`` is not a known database.
          RuntimeError: the task's gold query fails.
        """
        self._check_env(task.env_id)  # unknown env -> ValueError before anything else
        expected = self.reference_result(task)  # cached; not counted in elapsed_s
        start = time.perf_counter()
        try:
            got = self._run(task.env_id, action, timeout_s=self.timeout_s, max_rows=self.max_rows)
        except QueryFailure as exc:
            return self._failure(exc, time.perf_counter() - start)
        score, solved, feedback = self._score(got, expected, ordered=self._key(task).ordered)
        if self.feedback == "user":
            feedback = self._user_feedback(got, solved)
        return Outcome(
            score=score,
            solved=solved,
            completed=True,
            feedback=_clip(feedback),
            error=None,
            elapsed_s=time.perf_counter() - start,
        )

    @staticmethod
    def _failure(exc: QueryFailure, elapsed_s: float) -> Outcome:
        prefix = {
            "sql_error": "SQL error",
            "forbidden": "Forbidden",
            "timeout": "Timeout",
            "too_many_rows": "Too many rows",
            "too_large": "Too large",
            "too_large_result": "Too large a result",
            "memory": "Out of memory",
            "worker_error": "Sandbox error",
        }.get(exc.kind, exc.kind)
        return Outcome(
            score=0.0,
            solved=False,
            completed=exc.kind not in ("timeout", "worker_error"),
            feedback=_clip(f"{prefix}: {exc.message}"),
            error=exc.kind,
            elapsed_s=elapsed_s,
        )

    @staticmethod
    def _user_feedback(got: QueryResult, solved: bool) -> str:
        """The ``"user"`` verdict: pass/fail and the action's own result shape only."""
        n = _plural(len(got.rows), "row")
        if solved:
            return f"Correct: the query returns the requested result ({n})."
        return (f"Incorrect: the result is not what was asked. "
                f"Your query returned {n} with {_plural(got.n_cols, 'column')}.")

    def _score(
        self, got: QueryResult, expected: QueryResult, *, ordered: bool
    ) -> tuple[float, bool, str]:
        """Compare two results; return ``(score, solved, rich feedback)``."""
        n_got, n_exp = len(got.rows), len(expected.rows)
        if got.n_cols != expected.n_cols:
            return (
                0.0,
                False,
                f"Wrong column count: got {got.n_cols}, expected {expected.n_cols}. "
                f"Your query returned {_plural(n_got, 'row')}.",
            )
        # Fast path: rows equal under Python's ``==``, in the same order, are equal under the
        # tolerant comparator too (None/int/float/str/bytes: only int == float crosses types, and
        # exactly equal numbers are close), so both the sequence and the multiset match.
        if ordered and (got.rows == expected.rows or self._cmp.sequence_equal(got.rows, expected.rows)):
            return (
                1.0,
                True,
                f"Result matches the expected result ({_plural(n_exp, 'row')}, in order).",
            )
        overlap = n_got if got.rows == expected.rows else self._cmp.overlap(got.rows, expected.rows)
        if overlap == n_got == n_exp:
            if not ordered:
                return 1.0, True, f"Result matches the expected result ({_plural(n_exp, 'row')})."
            score = 0.5 if self.partial_credit else 0.0
            return score, False, "Rows match but order differs."
        f1 = 2.0 * overlap / (n_got + n_exp)
        score = 0.9 * f1 if self.partial_credit else 0.0
        parts = [
            f"Result mismatch: your query returned {_plural(n_got, 'row')}; "
            f"the expected result has {_plural(n_exp, 'row')}; "
            f"{_plural(overlap, 'row')} overlap."
        ]
        if n_got - overlap:
            parts.append(f"{_plural(n_got - overlap, 'returned row')} not expected.")
        if n_exp - overlap:
            parts.append(f"{_plural(n_exp - overlap, 'expected row')} missing.")
        return score, False, " ".join(parts)

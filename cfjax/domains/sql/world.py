"""SQL world model: execute an untrusted SQLite query and score its result.

This is the executable evaluator ``H`` with utility ``U`` for the text-to-SQL
domain of CounterMem (papers/countermem.md §3.3, Eq. 2): every action is
checked from a *copy* of the same state, so comparing an edited action with
the original one is meaningful and nothing an action does can influence a
later check.

State isolation
---------------
On construction every database file is opened **read-only**
(``file:...?mode=ro`` URI) and copied with the SQLite backup API into a
private in-memory *master*; the file is then closed and never opened again.
Each evaluation backs the master up into a **fresh** in-memory connection,
runs the action there and throws the connection away. The source files'
bytes and modification times are therefore never changed.

Untrusted-SQL safety (defence in depth)
---------------------------------------
* exactly one statement is accepted (a tokenizer that understands quotes and
  comments splits the text at top-level ``;``); statements starting with a
  write/DDL/transaction/``PRAGMA``/``ATTACH``/``VACUUM``/``EXPLAIN`` keyword
  are refused before execution;
* ``PRAGMA query_only=ON`` is set before the authorizer is installed;
* an authorizer allows only ``SQLITE_SELECT``, ``SQLITE_READ``,
  ``SQLITE_FUNCTION`` (minus a deny-list such as ``load_extension`` and
  ``fts3_tokenizer``) and ``SQLITE_RECURSIVE``; every write, DDL statement,
  ``ATTACH``/``DETACH``, ``PRAGMA``, transaction, ``VACUUM``... is denied;
* extension loading is disabled, ``SQLITE_LIMIT_ATTACHED`` is 0 and string /
  SQL length limits are lowered where :meth:`sqlite3.Connection.setlimit`
  exists;
* a progress handler aborts the statement after ``timeout_s`` seconds of
  wall-clock time (checked every 1000 VM instructions), so endless recursive
  CTEs end;
* at most ``max_rows + 1`` rows are fetched.

Errors are *outcomes*, never exceptions: a syntax or runtime error is a
completed check with score 0 (``error="sql_error"``), a refused statement is a
completed check with score 0 (``error="forbidden"``), too large a result is a
completed check with score 0 (``error="too_many_rows"``) and a timeout is an
*incomplete* check (``completed=False``, ``error="timeout"``), which
CounterMem never admits. An unknown ``env_id`` or a failing gold query is a
programming/data error and raises.

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
  buckets with the tolerant comparator (bounded work), so values straddling
  a rounding boundary still match.

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

Thread-safety
-------------
One :class:`SQLWorld` may be used from one thread at a time (it may be
handed between threads). :meth:`SQLWorld.evaluate` keeps no per-call state
on ``self``; the only mutable state is the per-task reference-result cache.

Length: one module on purpose — statement splitting, the sandboxed execution and the result comparator
are the world's one contract with untrusted SQL; keeping them together keeps every limit in one place.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfjax.types import AnswerKey, Task
from cfjax.types import Outcome

__all__ = ["SQLWorld", "QueryResult", "QueryFailure", "split_statements", "FEEDBACK_MODES"]

Row = tuple[Any, ...]

_MAX_FEEDBACK = 790
#: values of the ``feedback`` option (module docstring, "Feedback")
FEEDBACK_MODES = ("user", "rich")
_PROGRESS_OPS = 1000
# Statements that can never be read-only queries; refused before execution.
# (Other unknown first words are left to SQLite, which reports a syntax error.)
_FORBIDDEN_FIRST_KEYWORDS = frozenset(
    {
        "INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER",
        "ATTACH", "DETACH", "PRAGMA", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT",
        "RELEASE", "VACUUM", "REINDEX", "ANALYZE", "EXPLAIN",
    }
)
_ALLOWED_ACTIONS = frozenset(
    {
        sqlite3.SQLITE_SELECT,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_FUNCTION,
        getattr(sqlite3, "SQLITE_RECURSIVE", 33),
    }
)
# Functions that can touch the file system, load code or corrupt memory.
_DENIED_FUNCTIONS = frozenset(
    {
        "load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "zipfile",
        "sqlar_compress",
    }
)
_ACTION_NAMES: dict[int, str] = {
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
# (limit name, value) applied when Connection.setlimit is available.
_LIMITS: tuple[tuple[str, int], ...] = (
    ("SQLITE_LIMIT_LENGTH", 10_000_000),
    ("SQLITE_LIMIT_SQL_LENGTH", 100_000),
    ("SQLITE_LIMIT_ATTACHED", 0),
    ("SQLITE_LIMIT_EXPR_DEPTH", 500),
    ("SQLITE_LIMIT_COMPOUND_SELECT", 200),
    ("SQLITE_LIMIT_VARIABLE_NUMBER", 100),
    ("SQLITE_LIMIT_TRIGGER_DEPTH", 1),
)
# Pair comparisons allowed when matching leftover rows across key buckets.
_LEFTOVER_BUDGET = 2_000_000


@dataclass(frozen=True)
class QueryResult:
    """The (bounded) result of one successful query.

    Attributes:
      n_cols: number of result columns.
      rows: the fetched rows, in the order SQLite produced them.
    """

    n_cols: int
    rows: tuple[Row, ...]


class QueryFailure(Exception):
    """A query did not produce a usable result.

    Attributes:
      kind: ``"sql_error"``, ``"forbidden"``, ``"timeout"`` or
        ``"too_many_rows"``.
      message: human-readable detail (never contains gold information).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


# --------------------------------------------------------------------------
# statement splitting


def split_statements(sql: str) -> list[str]:
    """Split SQL text into its non-empty statements.

    Splits at ``;`` outside string literals (``'...'``), quoted identifiers
    (``"..."``, ```...```, ``[...]``) and comments (``-- ...``, ``/* ... */``).
    Pieces consisting only of whitespace and comments are dropped. An
    unterminated literal or comment runs to the end of the text (SQLite then
    reports the syntax error).

    Args:
      sql: the SQL text.

    Returns:
      The statements, each without its terminating ``;``.
    """
    statements: list[str] = []
    start = 0
    has_token = False
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            j = i + 1
            while j < n:
                if sql[j] == close:
                    # Doubled quote characters escape themselves ('it''s').
                    if close != "]" and j + 1 < n and sql[j + 1] == close:
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
            has_token = True
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif ch == ";":
            if has_token:
                statements.append(sql[start:i])
            start, has_token = i + 1, False
            i += 1
        else:
            if not ch.isspace():
                has_token = True
            i += 1
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
            for row in unmatched:
                for idx, cand in enumerate(rest):
                    if _rows_close(row, cand, self.tol):
                        rest.pop(idx)
                        matched += 1
                        break
        return matched


def _clip(text: str, limit: int = _MAX_FEEDBACK) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --------------------------------------------------------------------------
# the world


class SQLWorld:
    """Executable SQLite world model: ``evaluate(task, sql) -> Outcome``.

    Args:
      databases: ``env_id -> path`` of each SQLite database file. Files are
        read once, read-only, into private in-memory copies.
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

    Raises:
      FileNotFoundError: a database file does not exist.
      ValueError: a parameter is out of range or ``feedback`` is not a known mode.
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
    ) -> None:
        if feedback not in FEEDBACK_MODES:
            raise ValueError(f"feedback must be 'user' or 'rich', got {feedback!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_rows < 0:
            raise ValueError(f"max_rows must be >= 0, got {max_rows}")
        if not float_tol >= 0:
            raise ValueError(f"float_tol must be >= 0, got {float_tol}")
        self.timeout_s = float(timeout_s)
        self.max_rows = int(max_rows)
        self.float_tol = float(float_tol)
        self.partial_credit = bool(partial_credit)
        self.feedback = feedback
        self._cmp = _Comparator(self.float_tol)
        self._keys = dict(keys)
        self._paths: dict[str, Path] = {}
        self._masters: dict[str, sqlite3.Connection] = {}
        # (task_id, env_id, gold) -> reference result
        self._reference: dict[tuple[str, str, str], QueryResult] = {}
        try:
            for env_id, path in databases.items():
                self._masters[env_id] = self._load(Path(path))
                self._paths[env_id] = Path(path)
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- setup

    @staticmethod
    def _load(path: Path) -> sqlite3.Connection:
        """Copy a database file, opened read-only, into a new in-memory DB."""
        path = path.expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f"SQL database file not found: {path}")
        source = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
        try:
            master = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            try:
                source.backup(master)
            except BaseException:
                master.close()
                raise
        finally:
            source.close()
        return master

    @property
    def env_ids(self) -> tuple[str, ...]:
        """The database ids this world can evaluate against."""
        return tuple(self._masters)

    def close(self) -> None:
        """Release the in-memory masters (the world is unusable afterwards)."""
        for conn in self._masters.values():
            conn.close()
        self._masters.clear()

    def __enter__(self) -> SQLWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ execution

    def _master(self, env_id: str) -> sqlite3.Connection:
        try:
            return self._masters[env_id]
        except KeyError:
            known = ", ".join(sorted(self._masters)) or "none"
            raise ValueError(f"unknown SQL env_id {env_id!r} (known databases: {known})") from None

    def _fresh_copy(self, env_id: str) -> sqlite3.Connection:
        """A private, disposable in-memory copy of the master for ``env_id``."""
        master = self._master(env_id)
        conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            master.backup(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _lock_down(conn: sqlite3.Connection, denials: list[str]) -> None:
        """Make ``conn`` read-only for untrusted SQL; record denials."""
        conn.execute("PRAGMA query_only=ON")
        enable = getattr(conn, "enable_load_extension", None)
        if enable is not None:
            enable(False)
        setlimit = getattr(conn, "setlimit", None)
        if setlimit is not None:
            for name, value in _LIMITS:
                category = getattr(sqlite3, name, None)
                if category is not None:
                    setlimit(category, value)

        def authorizer(
            action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
        ) -> int:
            if action in _ALLOWED_ACTIONS:
                if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
                    denials.append(f"function {arg2}()")
                    return sqlite3.SQLITE_DENY
                return sqlite3.SQLITE_OK
            name = _ACTION_NAMES.get(action, f"action {action}")
            target = arg1 or arg2
            denials.append(f"{name} {target}" if target else name)
            return sqlite3.SQLITE_DENY

        conn.set_authorizer(authorizer)

    def _run(self, env_id: str, sql: str, *, timeout_s: float, max_rows: int) -> QueryResult:
        """Run one untrusted statement on a fresh copy of ``env_id``.

        Raises:
          QueryFailure: the statement was refused, failed, timed out or
            returned more than ``max_rows`` rows.
          ValueError: unknown ``env_id``.
        """
        statements = split_statements(sql)
        if not statements:
            raise QueryFailure("sql_error", "empty query")
        if len(statements) > 1:
            raise QueryFailure(
                "forbidden", f"only one statement is allowed, got {len(statements)}"
            )
        statement = statements[0]
        keyword = _first_keyword(statement)
        if keyword in _FORBIDDEN_FIRST_KEYWORDS:
            raise QueryFailure(
                "forbidden", f"only read-only SELECT queries are allowed, got {keyword}"
            )

        conn = self._fresh_copy(env_id)
        denials: list[str] = []
        deadline = [math.inf]
        timed_out = [False]

        def progress() -> int:
            if time.perf_counter() > deadline[0]:
                timed_out[0] = True
                return 1
            return 0

        try:
            self._lock_down(conn, denials)
            conn.set_progress_handler(progress, _PROGRESS_OPS)
            deadline[0] = time.perf_counter() + timeout_s
            try:
                cursor = conn.execute(statement)
                if cursor.description is None:
                    raise QueryFailure("forbidden", "statement returns no result set")
                n_cols = len(cursor.description)
                rows = cursor.fetchmany(max_rows + 1)
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
            if len(rows) > max_rows:
                raise QueryFailure(
                    "too_many_rows", f"the query returned more than {max_rows} rows"
                )
            return QueryResult(n_cols=n_cols, rows=tuple(tuple(r) for r in rows))
        finally:
            conn.close()

    # ------------------------------------------------------------ reference

    def _key(self, task: Task) -> AnswerKey:
        try:
            return self._keys[task.task_id]
        except KeyError:
            raise ValueError(f"the SQL world has no answer key for task {task.task_id!r}") from None

    def reference_result(self, task: Task) -> QueryResult:
        """The gold query's result for ``task`` (computed once, cached).

        The gold runs under the same sandbox as actions on a fresh copy of
        the master, with a generous timeout (``max(10·timeout_s, 10 s)``).

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
            result = self._run(
                task.env_id,
                gold,
                timeout_s=max(10.0 * self.timeout_s, 10.0),
                max_rows=self.max_rows,
            )
        except QueryFailure as exc:
            raise RuntimeError(
                f"gold SQL of task {task.task_id!r} (env {task.env_id!r}) failed: "
                f"{exc.kind}: {exc.message}"
            ) from None
        self._reference[key] = result
        return result

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
        self._master(task.env_id)  # unknown env -> ValueError before anything else
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
        }.get(exc.kind, exc.kind)
        return Outcome(
            score=0.0,
            solved=False,
            completed=exc.kind != "timeout",
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
        if ordered and self._cmp.sequence_equal(got.rows, expected.rows):
            return (
                1.0,
                True,
                f"Result matches the expected result ({_plural(n_exp, 'row')}, in order).",
            )
        overlap = self._cmp.overlap(got.rows, expected.rows)
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

"""An on-disk cache of completions, shared by rows, reruns and processes.

Every rerun, ablation row and sweep point of an experiment sends many prompts
that an earlier run already sent with the same settings. With a deterministic
decoder (temperature 0) the reply is a function of (backend, model, prompt,
sampling parameters, seed), so :class:`ResponseCache` stores it once and
answers the identical call from disk.

Storage is one SQLite table in WAL mode with a busy timeout: any number of
threads (one connection each) and processes may read and write the same file
at once. Rows are written with ``INSERT OR IGNORE`` (the first reply stored
for a key wins; identical calls agree anyway) and carry a checksum; a row
whose checksum does not match is treated as a miss, counted, and removed so
the next reply can take its place. The schema version is SQLite's
``user_version``.

What is cached is decided by the backbone, not here
(:meth:`cfjax.llm.base.TextBackbone.cache_identity`): failed calls are never
stored, and a backbone that samples (temperature > 0) does not use the cache
unless the user forces it (``cache_force``) — a sampled reply is one draw, and
replaying it would silently turn every rerun into the same draw.

A hit returns the text **and the usage of the original call**, so a method's
token cost in the ledger is the same whether the reply came from the server
or from the cache; the saving is infrastructure, reported separately
(``cached`` in the client's stats, :meth:`ResponseCache.stats` here).

Example:
    >>> cache = ResponseCache("runs/llm_cache.sqlite")  # doctest: +SKIP
    >>> key = cache.key({"backend": "openai", "model": "qwen", "temperature": 0.0, "seed": 0}, prompt)  # doctest: +SKIP
    >>> cache.get(key) or cache.put(key, completion)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cfjax.types import Completion, Usage

__all__ = ["ResponseCache", "CacheStats", "SCHEMA_VERSION", "canonical_key"]

#: Stored in SQLite's ``user_version``; a file with another version is refused.
SCHEMA_VERSION = 1

#: Seconds a writer waits for another writer's lock before the call counts an error.
BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    checksum TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def canonical_key(identity: dict[str, Any], prompt: str) -> str:
    """The cache key: sha256 of the canonical JSON of ``identity`` and ``prompt``.

    Canonical = sorted keys, no whitespace, ASCII escapes, so the same call
    hashes the same in every process and on every machine.

    Raises:
      TypeError: ``identity`` holds a value JSON cannot encode.
    """
    blob = json.dumps({"identity": identity, "prompt": prompt}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def _checksum(key: str, text: str, prompt_tokens: int, completion_tokens: int) -> str:
    blob = json.dumps([key, text, prompt_tokens, completion_tokens], separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def _retry_locked(fn, timeout_s: float = BUSY_TIMEOUT_S):
    """``fn()``, retried with a short back-off while SQLite says the database is locked or busy."""
    deadline, pause = time.monotonic() + timeout_s, 0.01
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if not any(w in str(e).lower() for w in ("locked", "busy")) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


@dataclass(frozen=True)
class CacheStats:
    """Counters of one :class:`ResponseCache` instance (this process).

    Attributes:
      hits: lookups answered from the cache.
      misses: lookups not answered (absent or corrupt row, or a read error).
      stores: replies written (a row already present for the key is not rewritten).
      corrupt: rows whose checksum did not match (counted in ``misses`` too).
      errors: reads or writes that failed (locked past the busy timeout, disk
        full, text that cannot be stored); the call went on without the cache.
    """

    hits: int = 0
    misses: int = 0
    stores: int = 0
    corrupt: int = 0
    errors: int = 0

    @property
    def hit_rate(self) -> float:
        """``hits / (hits + misses)``, 0 when nothing was looked up."""
        n = self.hits + self.misses
        return self.hits / n if n else 0.0

    def as_dict(self) -> dict[str, float | int]:
        """The counters and ``hit_rate`` as a JSON-ready dict."""
        return {**asdict(self), "hit_rate": self.hit_rate}


class ResponseCache:
    """A SQLite-backed completion cache, safe for concurrent threads and processes.

    Args:
      path: the database file; its directory is created. Opened at once, so a
        bad path or a file of another schema fails here, not mid-run.

    Raises:
      ValueError: the file cannot be opened as an SQLite database, or it is
        not a cache of this schema version.

    The instance pickles as its path (worker processes reopen the file) and
    opens one connection per thread and process.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stats = CacheStats()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._pid = os.getpid()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._init_schema()

    # -- connections ---------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # In WAL mode NORMAL never corrupts the file; a power cut may only lose the last replies (a cache can).
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _conn(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:  # forked: never reuse the parent's connections
            self._reset_after_fork()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _reset_after_fork(self) -> None:
        self._pid = os.getpid()
        self._local = threading.local()
        self._conns = []
        self._lock = threading.Lock()

    def _init_schema(self) -> None:
        try:
            conn = self._conn()
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as e:  # includes OperationalError (unreadable, a directory, ...)
            self.close()
            raise ValueError(f"{self.path} cannot be opened as a response cache: {e}") from None
        if version not in (0, SCHEMA_VERSION):
            raise ValueError(f"{self.path} is a response cache of schema version {version}; this cfjax reads "
                             f"version {SCHEMA_VERSION}. Use another --cache path or delete the file.")
        # WAL lets readers proceed while one writer commits; it persists in the file. Switching the mode needs
        # an exclusive lock, for which SQLite may answer "database is locked" at once, without its busy
        # handler, when another process opens the same new file at the same moment (two spawned workers of
        # a run): retry for up to the busy timeout.
        mode = _retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        if str(mode).lower() != "wal":  # e.g. a filesystem without shared memory: still correct, just serialised
            conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_SCHEMA)
            cols = [r[1] for r in conn.execute("PRAGMA table_info(completions)")]
            expected = ["key", "text", "prompt_tokens", "completion_tokens", "checksum", "created"]
            if cols != expected:
                raise ValueError(f"{self.path}: table 'completions' has columns {cols}, expected {expected}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- the cache -----------------------------------------------------------------
    @staticmethod
    def key(identity: dict[str, Any], prompt: str) -> str:
        """:func:`canonical_key` of ``identity`` and ``prompt``."""
        return canonical_key(identity, prompt)

    def _bump(self, **kw: int) -> None:
        with self._lock:
            s = self._stats
            self._stats = CacheStats(**{k: getattr(s, k) + kw.get(k, 0) for k in asdict(s)})

    def get(self, key: str) -> Completion | None:
        """The stored completion of ``key``, or ``None`` (a miss).

        A row whose checksum does not match its contents is counted as
        ``corrupt``, deleted, and reported as a miss. A read that fails
        (e.g. the file is locked past the busy timeout) is an ``error`` and a miss.
        """
        try:
            row = self._conn().execute(
                "SELECT text, prompt_tokens, completion_tokens, checksum FROM completions WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error:
            self._bump(errors=1, misses=1)
            return None
        if row is None:
            self._bump(misses=1)
            return None
        text, p, c, checksum = row
        ok = (isinstance(text, str) and isinstance(p, int) and isinstance(c, int) and p >= 0 and c >= 0
              and checksum == _checksum(key, text, p, c))
        if not ok:
            self._bump(corrupt=1, misses=1)
            try:  # only this corrupt row: a concurrent writer's good row has another checksum
                self._conn().execute("DELETE FROM completions WHERE key = ? AND checksum = ?", (key, checksum))
            except sqlite3.Error:
                self._bump(errors=1)
            return None
        self._bump(hits=1)
        return Completion(text, Usage(p, c))

    def put(self, key: str, completion: Completion) -> bool:
        """Store ``completion`` under ``key`` unless a row is there already.

        A failed call (``usage.failed``) is never stored.

        Returns:
          ``True`` when a row was written.
        """
        u = completion.usage
        if u.failed:
            return False
        checksum = _checksum(key, completion.text, u.prompt_tokens, u.completion_tokens)
        try:
            cur = self._conn().execute(
                "INSERT OR IGNORE INTO completions (key, text, prompt_tokens, completion_tokens, checksum, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key, completion.text, u.prompt_tokens, u.completion_tokens, checksum, time.time()),
            )
        except (sqlite3.Error, UnicodeEncodeError):
            self._bump(errors=1)
            return False
        if cur.rowcount == 1:
            self._bump(stores=1)
            return True
        return False

    def __len__(self) -> int:
        """Rows stored in the file (all processes)."""
        return int(self._conn().execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def stats(self) -> CacheStats:
        """A snapshot of this instance's counters."""
        with self._lock:
            return self._stats

    def close(self) -> None:
        """Close every connection this instance opened in this process (it reopens on next use)."""
        with self._lock:
            conns, self._conns = self._conns, []
            self._local = threading.local()
        if os.getpid() != self._pid:
            return
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def __getstate__(self) -> dict[str, Any]:
        return {"path": str(self.path)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

"""The outcome log ``L_k``: schema, append-only storage, update and read protocols.

papers/anti-persistence.md §3.2 (Eq. 2), App. B.3–B.5. The log records which
abstraction mode was used on a training task and how it went; it never stores
synthesised guidance. The contextual bandit reads it (KNN over task
embeddings, recency-weighted by logical timestamps) to pick a mode.

Record schema (App. B.5), one :class:`OutcomeEntry` per line, exactly seven fields:

=============  ===========================================================
embedding      list of finite floats, the task embedding ``e_τ`` (B.3)
mode           one of :data:`MODES`
reward         ``r = clip(y − λκ, −1, 1)`` (B.4), a float in ``[−1, 1]``
raw_success    ``y`` as a bool, independent of ``λ``
task_type      the task's *observable* type (the paper: its benchmark, e.g. ``"alfworld"``);
               cfjax writes ``Task.domain`` (``"sql"``, ``"python"``, ``"sat"``, ``"smt"``),
               never an answer-key family (the information boundary). The column and
               its validation are unchanged, so logs written before this rule still load.
task_id        **a string** (deviation: the paper stores the int index of τ
               in its benchmark pool; cfjax task ids are strings)
instruction    task instruction, truncated to ≤ 500 characters
=============  ===========================================================

The record itself (:class:`OutcomeEntry`, its validation and the one
host-side reward, :func:`cost_adjusted_reward`) lives in
:mod:`cfjax.antipersist.outcome_entry` and is re-exported here.

Storage: a single JSONL file, one JSON object per line, keys in the order
above, written by :func:`cfjax.infra.io.append_jsonl` (one ``os.write`` of the whole
line on an ``O_APPEND`` descriptor). Lines are never rewritten, compacted or
deleted; a reader never writes. Timestamps are *not* stored: entry ``i`` in
file order has logical timestamp ``t_i = i`` (consecutive ranks, App. B.5
"Relative timestamps"), and an appended entry gets ``t = len(log)``.

Durability (``OutcomeLog(path, durability=...)``):

``"fsync"`` (default)
  After the single ``write`` the file is ``fsync``-ed (and, when that append
  created the file, its directory too) before :meth:`OutcomeLog.record`
  returns. Once ``record`` has returned ``"logged"`` the entry survives a
  crash of the process *and* an OS crash or power loss (as far as the storage
  honours ``fsync``).
``"flush"``
  The line is handed to the kernel by the same single ``write`` but not
  ``fsync``-ed. Once ``record`` has returned the entry survives a crash of the
  process (exception, SIGKILL, OOM kill) but an OS crash or power loss can
  lose the entries of the last writeback window (typically seconds) and may
  leave garbage (e.g. NUL bytes) at the tail, which the read protocol skips.
  Much faster on real disks.

There is no third ``"none"`` level: the log keeps no user-space buffer, so
every entry reaches the kernel before ``record`` returns and ``"none"`` would
be identical to ``"flush"``.

Under either level a crash *during* an append loses at most that one entry:
nothing before it is touched, because nothing is ever rewritten. A kill in
the middle of a large write (lines above a page, i.e. any realistic
embedding) can leave a torn last line without newline; the next append
starts a new line first (:func:`cfjax.infra.io.append_jsonl`), and the read
protocol skips the torn line with a warning — on every later load too, since
it is never removed.

Read protocol (:meth:`OutcomeLog.load`): the file is streamed line by line in
file order (:func:`cfjax.infra.io.iter_lines`); a line that is not UTF-8, not
JSON, nested deeper than :data:`cfjax.infra.io.MAX_JSON_DEPTH`, longer than
:data:`MAX_LINE_BYTES` (read through in chunks, never held whole), not an
object, has missing or extra fields, a field of the wrong type or out of range
(non-finite or empty embedding, unknown mode, reward outside ``[−1, 1]``,
instruction over 500 characters), or is a torn last line is skipped with a
:class:`OutcomeLogWarning` naming the file and its 1-based line number;
loading continues. Blank lines are ignored. A missing file is an empty log
(nothing is created until the first append). Opening a log that is not
frozen also removes stale temp files named like an interrupted atomic write
of the log (``.<name>.<pid>.<hex>.tmp``, older than
:data:`cfjax.infra.io.STALE_TEMP_AGE_S`; the log itself never writes any).

One writer per file: appends from several processes stay whole lines
(``O_APPEND``), but each process's in-memory timestamps would only reflect its
own appends until it reloads.
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple, Union

import numpy as np

from cfjax.antipersist.outcome_entry import (DEFAULT_LAMBDA, FIELDS, MAX_INSTRUCTION_CHARS, MODE_INDEX, MODES,
                                             OutcomeEntry, _check_bool, _check_kappa, _check_lam, _check_mode,
                                             _check_text, _coerce_embedding, cost_adjusted_reward)
from cfjax.infra.io import (STALE_TEMP_AGE_S, JSONTooDeepError, append_jsonl, cleanup_stale_temps, iter_lines,
                            loads_json)

__all__ = [
    "MODES",
    "MODE_INDEX",
    "FIELDS",
    "MAX_INSTRUCTION_CHARS",
    "MAX_LINE_BYTES",
    "DEFAULT_LAMBDA",
    "DURABILITY_LEVELS",
    "LOGGED",
    "SKIP_REASONS",
    "FrozenLogError",
    "OutcomeLogError",
    "LogCapacityError",
    "OutcomeLogWarning",
    "OutcomeEntry",
    "OutcomeArrays",
    "OutcomeLog",
    "cost_adjusted_reward",
    "next_capacity",
]


PathLike = Union[str, "os.PathLike[str]"]


MAX_LINE_BYTES = 4 * 1024 * 1024
"""Longest outcome-log line parsed (a 100k-dim embedding is ~2.5 MB); a longer one is malformed."""

DURABILITY_LEVELS: tuple[str, ...] = ("fsync", "flush")
"""Accepted ``durability`` values; see the module docstring for what each guarantees."""

LOGGED = "logged"
"""What :meth:`OutcomeLog.record` returns when the attempt was appended."""

SKIP_REASONS: tuple[str, ...] = ("initial_update", "embedding_failure", "infrastructure_failure")
"""The three skip rules of App. B.5, in the order they are checked."""


class FrozenLogError(RuntimeError):
    """A frozen outcome log was asked to append (evaluation leaves the file byte-identical)."""


class OutcomeLogError(RuntimeError):
    """An append failed part-way; the in-memory log may no longer match the file."""


class LogCapacityError(ValueError):
    """The log holds more entries than the capacity asked of :meth:`OutcomeLog.as_arrays`."""


class OutcomeLogWarning(UserWarning):
    """A malformed outcome-log line was skipped while loading."""


# --------------------------------------------------------------------------- #
# the log                                                                      #
# --------------------------------------------------------------------------- #


class OutcomeArrays(NamedTuple):
    """Fixed-shape arrays of the log for the bandit kernel.

    Rows ``0..n−1`` are the entries in file order; rows ``n..capacity−1`` are
    padding with ``emb = 0``, ``mode = −1``, ``reward = 0``, ``t = −1``,
    ``valid = False`` (a one-hot of ``−1`` is all zeros, so padding never
    counts as a mode even before masking). Embeddings are as stored, not
    normalised.
    """

    emb: np.ndarray  # float32[capacity, dim]
    mode: np.ndarray  # int32[capacity], index into MODES
    reward: np.ndarray  # float32[capacity]
    t: np.ndarray  # int32[capacity], logical timestamps 0..n-1
    valid: np.ndarray  # bool[capacity]


def next_capacity(n: int, *, minimum: int = 64) -> int:
    """A capacity for :meth:`OutcomeLog.as_arrays`: the next power of two ``>= max(n, minimum)``.

    Growing by powers of two keeps the number of distinct array shapes (and
    hence kernel recompilations) logarithmic in the log's length.
    """
    if n < 0 or minimum < 1:
        raise ValueError(f"need n >= 0 and minimum >= 1, got n={n}, minimum={minimum}")
    return 1 << (max(n, minimum) - 1).bit_length()


def _fsync_dir(d: str) -> None:
    """Best-effort fsync of a directory so a newly created file's entry is durable."""
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EACCES, errno.EPERM):
            raise
    finally:
        os.close(fd)


class OutcomeLog:
    """The append-only outcome log ``L_k`` backed by one JSONL file.

    Constructing it reloads ``path`` by the read protocol (a missing file is an
    empty log; nothing is created until the first append), so the in-memory
    entries always equal what a fresh :meth:`load` of the file returns.

    Args:
      path: the JSONL file; its directory must exist by the first append.
      durability: ``"fsync"`` or ``"flush"`` (module docstring).
      frozen: start frozen (e.g. for evaluation): every append raises.

    Attributes:
      path: the file.
      durability: the durability level.
      n_malformed: lines skipped when this log was loaded.
      malformed_lines: their 1-based line numbers.
    """

    def __init__(self, path: PathLike, *, durability: str = "fsync", frozen: bool = False) -> None:
        if durability not in DURABILITY_LEVELS:
            raise ValueError(f"durability must be one of {DURABILITY_LEVELS}, got {durability!r}")
        self.path = Path(path)
        self.durability = durability
        self._entries: list[OutcomeEntry] = []
        self._rows: list[np.ndarray] = []  # float32 embeddings, cached for as_arrays
        self._skipped = {r: 0 for r in SKIP_REASONS}
        self._frozen = bool(frozen)
        self._broken: BaseException | None = None
        self.malformed_lines: list[int] = []
        if not self._frozen:
            cleanup_stale_temps(self.path, min_age_s=STALE_TEMP_AGE_S, ours_only=True)
        self._read()

    @classmethod
    def load(cls, path: PathLike, *, durability: str = "fsync", frozen: bool = False) -> "OutcomeLog":
        """Reload a log by the read protocol (module docstring); same as the constructor."""
        return cls(path, durability=durability, frozen=frozen)

    def _read(self) -> None:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            for lineno, raw, ended in iter_lines(f, MAX_LINE_BYTES):
                if raw is not None and not raw.strip():
                    continue
                torn = not ended  # only the last line can lack a newline
                try:
                    if raw is None:
                        raise ValueError(f"line longer than {MAX_LINE_BYTES} bytes")
                    entry = OutcomeEntry.from_json(loads_json(raw))
                except (UnicodeDecodeError, json.JSONDecodeError, JSONTooDeepError, TypeError, ValueError) as e:
                    why = f"{type(e).__name__}: {e}"
                    if torn:
                        why = f"torn last line without newline; {why}"
                    self.malformed_lines.append(lineno)
                    warnings.warn(
                        f"{self.path}: skipping malformed outcome-log line {lineno}: {why}",
                        OutcomeLogWarning, stacklevel=4,
                    )
                    continue
                self._push(entry)

    def _push(self, entry: OutcomeEntry) -> None:
        self._entries.append(entry)
        self._rows.append(np.asarray(entry.embedding, dtype=np.float32))

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"OutcomeLog({str(self.path)!r}, n={len(self)}, durability={self.durability!r}, "
                f"frozen={self._frozen})")

    @property
    def entries(self) -> list[OutcomeEntry]:
        """The entries in file order (a copy)."""
        return list(self._entries)

    @property
    def timestamps(self) -> list[int]:
        """Logical timestamps: ``0..n−1`` in file order (never stored in the file)."""
        return list(range(len(self._entries)))

    @property
    def dim(self) -> int | None:
        """Embedding dimension of the latest entry (``None`` when empty)."""
        return self._entries[-1].dim if self._entries else None

    @property
    def skipped(self) -> dict[str, int]:
        """Attempts skipped by :meth:`record` in this session, by reason (not persisted)."""
        return dict(self._skipped)

    @property
    def n_malformed(self) -> int:
        return len(self.malformed_lines)

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> None:
        """Make the log read-only: every later :meth:`record`/:meth:`append` raises
        :class:`FrozenLogError` and the file stays byte-identical."""
        self._frozen = True

    def unfreeze(self) -> None:
        """Allow appends again: the iteration protocol freezes the log for each
        held-out evaluation pass and resumes training afterwards."""
        self._frozen = False

    def _check_writable(self) -> None:
        if self._frozen:
            raise FrozenLogError(f"the outcome log {str(self.path)!r} is frozen; cannot append")
        if self._broken is not None:
            raise OutcomeLogError(
                f"an earlier append to {str(self.path)!r} failed ({self._broken!r}); "
                "the file may hold that entry or a torn line: reopen it with OutcomeLog.load"
            ) from self._broken

    # ------------------------------------------------------------------ update protocol
    def append(self, entry: OutcomeEntry) -> int:
        """Append one entry (no skip rules) with this log's durability.

        Returns:
          The entry's logical timestamp ``t_new = len(log)`` before the append.

        Raises:
          FrozenLogError: if the log is frozen.
          OutcomeLogError: if an earlier append failed (reload first).
          ValueError: if the embedding dimension differs from the log's.
          OSError: from the filesystem; the log is then marked failed, since
            the file may or may not hold the entry.
        """
        self._check_writable()
        if not isinstance(entry, OutcomeEntry):
            raise TypeError(f"entry must be an OutcomeEntry, not {type(entry).__name__}")
        if self.dim is not None and entry.dim != self.dim:
            raise ValueError(f"embedding has {entry.dim} components but the log holds {self.dim}-dim embeddings")
        sync = self.durability == "fsync"
        created = not os.path.exists(self.path)
        try:
            append_jsonl(self.path, entry.to_json(), fsync=sync)
            if sync and created:
                _fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        except BaseException as e:  # incl. KeyboardInterrupt: the entry may be half-written
            self._broken = e
            raise
        self._push(entry)
        return len(self._entries) - 1

    def record(
        self,
        task_id: str,
        task_type: str,
        instruction: str,
        embedding: Any,
        mode: str,
        success: bool,
        kappa: int,
        *,
        update_index: int,
        infrastructure_failure: bool = False,
        lam: float = DEFAULT_LAMBDA,
    ) -> str:
        """The update protocol (App. B.5): log one training-task attempt unless a skip rule applies.

        The skip rules are checked in order and the first that applies is
        returned (and counted in :attr:`skipped`):

        1. ``update_index == 0`` → ``"initial_update"`` (empty memory: all modes
           reduce to the baseline);
        2. ``embedding`` is ``None``, empty or has a non-finite component →
           ``"embedding_failure"`` (cannot enter KNN retrieval);
        3. ``infrastructure_failure`` → ``"infrastructure_failure"`` (abnormal
           termination, outcome not attributable to the mode).

        Otherwise the entry ``OutcomeEntry.make(...)`` (reward
        ``clip(y − λκ, −1, 1)`` with ``y = success``, instruction truncated to
        500 characters) is appended and ``"logged"`` is returned.

        All arguments are validated first, whether or not the attempt is
        skipped, so a programming error never hides behind a skip rule.

        Args:
          task_id, task_type, instruction: the task (strings).
          embedding: the task embedding, or ``None`` if the embedding call failed.
          mode: the selected mode (one of :data:`MODES`).
          success: the binary outcome ``y``.
          kappa: realised extra synthesis calls.
          update_index: the training update index ``k`` (``>= 0``).
          infrastructure_failure: the attempt ended abnormally.
          lam: cost weight ``λ``.

        Returns:
          ``"logged"`` or the skip reason.

        Raises:
          FrozenLogError: if the log is frozen (even when the attempt would be skipped).
          TypeError, ValueError: invalid arguments (an embedding of the wrong
            type, e.g. a string or a 2-D array, is an error, not a failure).
          OutcomeLogError, OSError: see :meth:`append`.
        """
        self._check_writable()
        if not isinstance(update_index, (int, np.integer)) or isinstance(update_index, (bool, np.bool_)):
            raise TypeError(f"update_index must be an int, not {type(update_index).__name__}")
        if update_index < 0:
            raise ValueError(f"update_index must be >= 0, got {update_index}")
        _check_text("task_id", task_id, nonempty=True)
        _check_text("task_type", task_type, nonempty=True)
        _check_text("instruction", instruction, nonempty=False)
        _check_mode(mode)
        _check_bool("success", success)
        _check_kappa(kappa)
        _check_lam(lam)
        _check_bool("infrastructure_failure", infrastructure_failure)
        vec: tuple[float, ...] | None = None
        if embedding is not None:
            try:
                vec = _coerce_embedding(embedding)
            except ValueError:  # empty or non-finite: a failed embedding
                vec = None

        if update_index == 0:
            reason = "initial_update"
        elif vec is None:
            reason = "embedding_failure"
        elif infrastructure_failure:
            reason = "infrastructure_failure"
        else:
            entry = OutcomeEntry.make(
                embedding=vec, mode=mode, y=bool(success), kappa=int(kappa), task_type=task_type,
                task_id=task_id, instruction=instruction, lam=lam,
            )
            self.append(entry)
            return LOGGED
        self._skipped[reason] += 1
        return reason

    # ------------------------------------------------------------------ kernel view
    def as_arrays(self, capacity: int, dim: int) -> OutcomeArrays:
        """The log as fixed-shape arrays for the bandit kernel (:class:`OutcomeArrays`).

        The caller picks ``capacity`` and grows it as the log grows, e.g.
        :func:`next_capacity` (next power of two), so the kernel sees few
        distinct shapes.

        Args:
          capacity: number of rows (``>= len(self)``).
          dim: embedding dimension every entry must have.

        Raises:
          LogCapacityError: if the log holds more than ``capacity`` entries.
          ValueError: if an entry's embedding is not ``dim``-dimensional, or
            ``capacity``/``dim`` are invalid.
        """
        if not isinstance(capacity, (int, np.integer)) or capacity < 0:
            raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
        if not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        n = len(self._entries)
        if n > capacity:
            raise LogCapacityError(
                f"the outcome log holds {n} entries, more than capacity {capacity}; "
                f"grow the capacity (e.g. next_capacity({n}) = {next_capacity(n)})"
            )
        emb = np.zeros((capacity, dim), np.float32)
        mode = np.full(capacity, -1, np.int32)
        reward = np.zeros(capacity, np.float32)
        t = np.full(capacity, -1, np.int32)
        valid = np.zeros(capacity, bool)
        for i, (e, row) in enumerate(zip(self._entries, self._rows)):
            if row.shape[0] != dim:
                raise ValueError(f"entry t={i} (task {e.task_id!r}) has a {row.shape[0]}-dim embedding, expected {dim}")
            emb[i] = row
            mode[i] = MODE_INDEX[e.mode]
            reward[i] = e.reward
        t[:n] = np.arange(n, dtype=np.int32)
        valid[:n] = True
        return OutcomeArrays(emb, mode, reward, t, valid)

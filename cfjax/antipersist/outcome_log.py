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
task_type      task family (e.g. ``"alfworld"``)
task_id        **a string** (deviation: the paper stores the int index of τ
               in its benchmark pool; cfjax task ids are strings)
instruction    task instruction, truncated to ≤ 500 characters
=============  ===========================================================

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
file order; a line that is not UTF-8, not JSON, not an object, has missing or
extra fields, a field of the wrong type or out of range (non-finite or empty
embedding, unknown mode, reward outside ``[−1, 1]``, instruction over 500
characters), or is a torn last line is skipped with a :class:`OutcomeLogWarning`
naming the file and its 1-based line number; loading continues. Blank lines
are ignored. A missing file is an empty log (nothing is created until the
first append).

One writer per file: appends from several processes stay whole lines
(``O_APPEND``), but each process's in-memory timestamps would only reflect its
own appends until it reloads.
"""

from __future__ import annotations

import errno
import json
import math
import numbers
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Union

import numpy as np

from cfjax.infra.io import append_jsonl

__all__ = [
    "MODES",
    "MODE_INDEX",
    "FIELDS",
    "MAX_INSTRUCTION_CHARS",
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

MODES: tuple[str, ...] = ("none", "imitation", "strategic", "corrective")
"""The mode set ``Z`` (Eq. 1); a mode's index here is its id in :class:`OutcomeArrays`."""

MODE_INDEX: Mapping[str, int] = {m: i for i, m in enumerate(MODES)}

FIELDS: tuple[str, ...] = ("embedding", "mode", "reward", "raw_success", "task_type", "task_id", "instruction")
"""The seven fields of a record (App. B.5), in the order they are written."""

MAX_INSTRUCTION_CHARS = 500
"""Instructions are truncated to this many characters (App. B.5)."""

DEFAULT_LAMBDA = 0.05
"""Cost weight ``λ`` of ``r = clip(y − λκ, −1, 1)`` (Table 3)."""

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
# validation helpers                                                           #
# --------------------------------------------------------------------------- #


def _is_real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def _coerce_embedding(x: Any) -> tuple[float, ...]:
    """A 1-D sequence of real numbers as a tuple of Python floats.

    Raises:
      TypeError: not a 1-D sequence of real numbers.
      ValueError: empty or with a non-finite component (a failed embedding).
    """
    if x is None or isinstance(x, (str, bytes, bytearray, Mapping)):
        raise TypeError(f"embedding must be a sequence of floats, not {type(x).__name__}")
    if isinstance(x, np.ndarray):
        if x.ndim != 1 or x.dtype.kind not in "fiu":
            raise TypeError(f"embedding must be a 1-D real array, got shape {x.shape} dtype {x.dtype}")
        vals = tuple(float(v) for v in x.tolist())
    else:
        if not isinstance(x, Iterable):
            raise TypeError(f"embedding must be a sequence of floats, not {type(x).__name__}")
        vals_l = []
        for i, v in enumerate(x):
            if not _is_real(v):
                raise TypeError(f"embedding[{i}] must be a real number, not {type(v).__name__}")
            vals_l.append(float(v))
        vals = tuple(vals_l)
    if not vals:
        raise ValueError("embedding is empty")
    for i, v in enumerate(vals):
        if not math.isfinite(v):
            raise ValueError(f"embedding[{i}] is not finite ({v})")
    return vals


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a str, not {type(mode).__name__}")
    if mode not in MODE_INDEX:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    return mode


def _check_text(name: str, value: Any, *, nonempty: bool) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if nonempty and not value:
        raise ValueError(f"{name} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name} is not encodable as UTF-8 ({e.reason} at index {e.start})") from None
    return value


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return bool(value)


def _check_kappa(kappa: Any) -> int:
    if not isinstance(kappa, (int, np.integer)) or isinstance(kappa, (bool, np.bool_)):
        raise TypeError(f"kappa (synthesis-call count) must be an int, not {type(kappa).__name__}")
    if kappa < 0:
        raise ValueError(f"kappa (synthesis-call count) must be >= 0, got {kappa}")
    return int(kappa)


def _check_lam(lam: Any) -> float:
    if not _is_real(lam) or not math.isfinite(float(lam)) or float(lam) < 0:
        raise ValueError(f"lam (cost weight λ) must be a finite real >= 0, got {lam!r}")
    return float(lam)


def cost_adjusted_reward(y: bool | int, kappa: int, lam: float = DEFAULT_LAMBDA) -> float:
    """``r = clip(y − λκ, −1, 1)`` (§3.2, Table 3).

    Args:
      y: the binary task outcome (``bool`` or ``0``/``1``).
      kappa: realised extra synthesis calls (``0`` when synthesis is skipped).
      lam: cost weight ``λ >= 0``.

    Returns:
      The clipped reward.

    Raises:
      TypeError, ValueError: for a non-binary ``y``, negative or non-int
        ``kappa`` or a negative / non-finite ``lam``.
    """
    if isinstance(y, (bool, np.bool_)):
        yv = float(bool(y))
    elif isinstance(y, (int, np.integer)) and y in (0, 1):
        yv = float(y)
    else:
        raise ValueError(f"y (task outcome) must be a bool or 0/1, got {y!r}")
    r = yv - _check_lam(lam) * _check_kappa(kappa)
    return min(1.0, max(-1.0, r))


# --------------------------------------------------------------------------- #
# the record                                                                   #
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class OutcomeEntry:
    """One outcome-log record: the seven fields of App. B.5 (module docstring).

    Direct construction validates and does not repair: ``reward`` must already
    lie in ``[−1, 1]`` and ``instruction`` must be ≤ 500 characters. Use
    :meth:`make` to compute the clipped reward and truncate the instruction.
    ``embedding`` is stored as a tuple of Python floats (any 1-D real sequence
    or array is accepted), so entries are hashable and compare by value.

    Raises (on construction):
      TypeError: a field of the wrong type.
      ValueError: unknown mode, empty or non-finite embedding, reward outside
        ``[−1, 1]`` or non-finite, empty ``task_type``/``task_id``, instruction
        over 500 characters, or text not encodable as UTF-8.
    """

    embedding: tuple[float, ...]
    mode: str
    reward: float
    raw_success: bool
    task_type: str
    task_id: str
    instruction: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "embedding", _coerce_embedding(self.embedding))
        _check_mode(self.mode)
        if not _is_real(self.reward):
            raise TypeError(f"reward must be a real number, not {type(self.reward).__name__}")
        r = float(self.reward)
        if not math.isfinite(r) or not -1.0 <= r <= 1.0:
            raise ValueError(f"reward must be a finite float in [-1, 1], got {r} (use OutcomeEntry.make to clip)")
        object.__setattr__(self, "reward", r)
        object.__setattr__(self, "raw_success", _check_bool("raw_success", self.raw_success))
        _check_text("task_type", self.task_type, nonempty=True)
        _check_text("task_id", self.task_id, nonempty=True)
        _check_text("instruction", self.instruction, nonempty=False)
        if len(self.instruction) > MAX_INSTRUCTION_CHARS:
            raise ValueError(
                f"instruction has {len(self.instruction)} characters, more than {MAX_INSTRUCTION_CHARS} "
                "(use OutcomeEntry.make to truncate)"
            )

    @classmethod
    def make(
        cls,
        *,
        embedding: Any,
        mode: str,
        y: bool | int,
        kappa: int,
        task_type: str,
        task_id: str,
        instruction: str,
        lam: float = DEFAULT_LAMBDA,
    ) -> "OutcomeEntry":
        """Build an entry from an attempt: ``reward = clip(y − λκ, −1, 1)``,
        ``raw_success = bool(y)``, instruction truncated to its first 500 characters.

        Args:
          embedding: the task embedding (1-D real sequence or array).
          mode: the selected mode.
          y: binary task outcome (``bool`` or ``0``/``1``).
          kappa: realised extra synthesis calls (``>= 0``).
          task_type, task_id, instruction: as in the schema.
          lam: cost weight ``λ``.
        """
        reward = cost_adjusted_reward(y, kappa, lam)
        text = _check_text("instruction", instruction, nonempty=False)[:MAX_INSTRUCTION_CHARS]
        return cls(
            embedding=embedding, mode=mode, reward=reward, raw_success=bool(y),
            task_type=task_type, task_id=task_id, instruction=text,
        )

    @property
    def mode_index(self) -> int:
        """Index of :attr:`mode` in :data:`MODES`."""
        return MODE_INDEX[self.mode]

    @property
    def dim(self) -> int:
        return len(self.embedding)

    def to_json(self) -> dict[str, Any]:
        """The record as written to the file (keys in :data:`FIELDS` order)."""
        return {
            "embedding": list(self.embedding),
            "mode": self.mode,
            "reward": self.reward,
            "raw_success": self.raw_success,
            "task_type": self.task_type,
            "task_id": self.task_id,
            "instruction": self.instruction,
        }

    @classmethod
    def from_json(cls, obj: Any) -> "OutcomeEntry":
        """Parse one decoded JSON line strictly (the read protocol's schema check).

        Exactly the seven fields must be present, with JSON types: embedding a
        non-empty array of finite numbers, ``reward`` a number in ``[−1, 1]``
        (never clipped on read: an out-of-range stored reward is corruption),
        ``raw_success`` a JSON boolean, the rest strings.

        Raises:
          TypeError, ValueError: with the reason, if ``obj`` does not match.
        """
        if not isinstance(obj, dict):
            raise TypeError(f"not a JSON object ({type(obj).__name__})")
        missing = [f for f in FIELDS if f not in obj]
        extra = sorted(k for k in obj if k not in FIELDS)
        if missing or extra:
            raise ValueError(f"wrong fields (missing {missing}, unexpected {extra})")
        if not isinstance(obj["embedding"], list):
            raise TypeError(f"embedding must be a JSON array, not {type(obj['embedding']).__name__}")
        return cls(**{f: obj[f] for f in FIELDS})


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
            for lineno, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                torn = not raw.endswith(b"\n")  # only the last line can lack one
                try:
                    entry = OutcomeEntry.from_json(json.loads(raw.decode("utf-8")))
                except (UnicodeDecodeError, json.JSONDecodeError, TypeError, ValueError) as e:
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

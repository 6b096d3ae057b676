"""The outcome-log record: its seven fields, their validation and the cost-adjusted reward.

papers/anti-persistence.md §3.2 (Eq. 2), App. B.4–B.5. The schema and the
storage and read protocols are documented in :mod:`cfjax.antipersist.outcome_log`,
which re-exports everything here; this module holds the record alone so that
each stays small.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cfjax.kernels.bandit import BanditConfig
from cfjax.kernels.reference.bandit import bandit_reward_reference

__all__ = ["MODES", "MODE_INDEX", "FIELDS", "MAX_INSTRUCTION_CHARS", "DEFAULT_LAMBDA", "OutcomeEntry",
           "cost_adjusted_reward"]

MODES: tuple[str, ...] = ("none", "imitation", "strategic", "corrective")
"""The mode set ``Z`` (Eq. 1); a mode's index here is its id in :class:`~cfjax.antipersist.outcome_log.OutcomeArrays`."""

MODE_INDEX: Mapping[str, int] = {m: i for i, m in enumerate(MODES)}

FIELDS: tuple[str, ...] = ("embedding", "mode", "reward", "raw_success", "task_type", "task_id", "instruction")
"""The seven fields of a record (App. B.5), in the order they are written."""

MAX_INSTRUCTION_CHARS = 500
"""Instructions are truncated to this many characters (App. B.5)."""

DEFAULT_LAMBDA = BanditConfig.lam
"""Cost weight ``λ`` of ``r = clip(y − λκ, −1, 1)`` (Table 3)."""


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
    # fast path (the protocol's case: an already coerced tuple, a list of floats or a float array):
    # validated with one C-level pass, same result as the general path below
    if type(x) in (tuple, list) and x and all(type(v) is float for v in x):
        # a finite sum implies finite terms (an inf or nan term makes the sum inf or nan); an
        # overflowing sum of finite terms is checked term by term
        if math.isfinite(sum(x)) or all(math.isfinite(v) for v in x):
            return tuple(x)
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind == "f" and x.size and np.isfinite(x).all():
        return tuple(x.tolist())
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
    """``r = clip(y − λκ, −1, 1)`` (§3.2, Table 3): the host-side entry point of the
    Anti-Persistence reward: it validates its inputs and evaluates the formula with the kernel's
    NumPy twin (:func:`cfjax.kernels.reference.bandit_reward_reference`), so the formula is written
    once in JAX (:func:`cfjax.kernels.bandit.bandit_reward`) and once in NumPy. Every entry the
    protocol logs goes through it (:meth:`cfjax.antipersist.outcome_log.OutcomeLog.record` →
    :meth:`OutcomeEntry.make`); the bandit kernel only reads stored rewards.

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
    return float(bandit_reward_reference(yv, _check_kappa(kappa), _check_lam(lam)))


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

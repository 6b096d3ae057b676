"""Anti-Persistence configuration (papers/anti-persistence.md): the iteration protocol and synthesis.

:class:`APConfig` holds the protocol defaults (§4.1, App. B.4, D.1) with the
mode-selection bandit's :class:`~cfjax.kernels.bandit.BanditConfig` (Table 3),
the scripted synthesizers' :class:`SynthesisConfig` and the scripted
backbone's :class:`~cfjax.config.scripted.ScriptedConfig`. The classes are
re-exported by :mod:`cfjax.antipersist.protocol` and
:mod:`cfjax.antipersist.guidance`, where they used to live.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cfjax.config.scripted import ScriptedConfig
from cfjax.kernels.bandit import BanditConfig

__all__ = ["SynthesisConfig", "APConfig"]


@dataclass(frozen=True)
class SynthesisConfig:
    """Error model of the scripted synthesizers (see :mod:`cfjax.antipersist.guidance`); set a priori, not tuned.

    How often an executor follows guidance or picks a pattern up from raw
    records is the backbone's (``ScriptedConfig.p_follow_guidance``,
    ``p_pick_up_factual``), not the synthesizer's."""

    p_overgeneral: float = 0.3  # strategic/corrective drop a rule's condition (ours; the paper gives no rate)
    p_overgeneral_imitation: float = 0.1  # imitation drops a copied rule's condition (ours)
    max_rules: int = 4  # rules kept per guidance, and noted from raw records in mode none (ours)

    def __post_init__(self) -> None:
        for name in ("p_overgeneral", "p_overgeneral_imitation"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"SynthesisConfig.{name} must be in [0, 1], got {v}")
        if self.max_rules < 1:
            raise ValueError(f"SynthesisConfig.max_rules must be ≥ 1, got {self.max_rules}")


@dataclass(frozen=True)
class APConfig:
    """Protocol defaults: papers/anti-persistence.md §4.1, App. B.4, D.1.

    Saved and loaded as TOML with :func:`cfjax.config.save_toml` /
    :func:`cfjax.config.load_toml` (``cfjax antipersist run --config FILE``;
    every run writes its own ``config.toml``)."""

    iterations: int = 10  # K
    tasks_per_iteration: int = 50
    seeds: tuple[int, ...] = (42, 43, 44)
    B: int = 5  # trajectory budget (successes / failures), + 1 contrast for corrective
    abstraction_k: int = 3  # stored abstractions shown by the baselines (ours; the paper leaves it open)
    max_attempts: int = 2  # evaluated attempts per task (draft + one revision after feedback)
    log_capacity: int = 512  # outcome-log rows the bandit kernel sees (static shape; ≥ K × tasks)
    split_seed: int = 12345  # the suite's build/train/eval split (App. D.2 seed)
    max_eval_tasks: int = 0  # held-out tasks evaluated per iteration, spread over the split (0 = all)
    bandit: BanditConfig = field(default_factory=BanditConfig)
    synthesis: SynthesisConfig = field(default_factory=SynthesisConfig)
    scripted: ScriptedConfig = field(default_factory=ScriptedConfig)

    def __post_init__(self) -> None:
        for name in ("iterations", "tasks_per_iteration", "B", "abstraction_k", "max_attempts", "log_capacity"):
            v = getattr(self, name)
            if v < 1:
                raise ValueError(f"APConfig.{name} must be ≥ 1, got {v}")
        if self.max_eval_tasks < 0:
            raise ValueError(f"APConfig.max_eval_tasks must be ≥ 0 (0 = all), got {self.max_eval_tasks}")

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

__all__ = ["SynthesisConfig", "APConfig", "EMBED_TEXTS"]

#: embedding texts (cfjax.antipersist.memory.embed_text; listed here because cfjax.config imports no method)
EMBED_TEXTS = ("question_cues", "paper")


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
    every run writes its own ``config.toml``).

    **Embedding text and ρ** (App. B.3, B.4). Both retrievals — the bandit's
    top-B̂ neighbourhood and trajectory retrieval — use one embedding per task
    (:func:`cfjax.antipersist.memory.embed_text`, 512-d character n-gram
    hashing embedder). App. B.3 embeds ``instruction ‖ "Initial state:" ‖
    truncate(obs, 500)``; cfjax's only observation is the environment's
    schema/instance text, the same for every task of an environment, and
    embedded verbatim it swamps the question. ``embed_text = "question_cues"``
    (default) embeds the question and the cue phrases the suite's observable
    parser matched (``Task.attrs["cues"]``); ``"paper"`` keeps App. B.3's text.

    Measured cosine similarity of every held-out task to every training-pool
    task, split seeds 12345, 1, 2, all held-out tasks, median [10th, 90th
    percentile], by two observable relations (same environment ``env_id``,
    same observable task type :func:`~cfjax.antipersist.memory.task_type`);
    last column: share of the 5 most similar pool tasks with the held-out
    task's answer-key family (analysis only; within its type, as retrieval
    ranks them, in parentheses)::

        suite   text           same env,      other env,     same env,      other env,     top-5 same
                               same type      same type      other type     other type     family
        sql     question_cues  .43 [.21,.74]  .38 [.17,.74]  .26 [.11,.39]  .23 [.10,.36]  .90 (.89)
                paper          .99 [.98,1.0]  .89 [.86,.91]  .98 [.97,.99]  .88 [.85,.91]  .40 (.76)
        pybugs  question_cues  .58 [.32,.78]  .46 [.28,.78]  .24 [.14,.40]  .21 [.12,.31]  .88 (.85)
                paper          .69 [.47,.89]  .39 [.26,.66]  .42 [.31,.56]  .23 [.16,.31]  .80 (.85)
        sat     question_cues  .68 [.31,.92]  .30 [.14,.78]  .40 [.19,.67]  .12 [.04,.34]  .88 (.84)
                paper          .98 [.96,.99]  .17 [.06,.67]  .97 [.95,.98]  .09 [.04,.27]  .72 (.78)

    With the schema text nine SQL pairs in ten score ≥ 0.85 whatever the task
    asks, so a neighbourhood's mean similarity never falls below ρ = 0.7 and
    the fallback cannot fire. With ``"question_cues"`` pairs spread from ≈ 0.1 to ≈ 0.9 and
    ρ keeps the paper's value, 0.7 (Table 3; ``bandit.rho``, not tuned). In
    the full default run (3 splits × 3 seeds, K = 10) the mean similarity of
    a held-out task's top-B̂ neighbourhood in the final log is, median [10th,
    90th percentile]: sql 0.82 [0.71, 0.89], pybugs 0.76 [0.56, 0.89], sat
    0.83 [0.66, 0.94], so the fallback fires on 7 %, 37 % and 13 % of the
    held-out decisions (on none in sql with the schema text). Every run
    re-measures this (``results.json`` → ``similarity``; the report prints it).

    **Task type** (``type_filter``, Table 3 "restricted to the current task
    type"): the task's domain plus the names of its observable attributes
    (:func:`~cfjax.antipersist.memory.task_type`), never an answer-key family.
    """

    iterations: int = 10  # K
    tasks_per_iteration: int = 50
    seeds: tuple[int, ...] = (42, 43, 44)  # backbone seeds (§4.1)
    # build/train/eval splits of each suite (App. D.1 samples one fixed partition; we run several, each a
    # bootstrap cluster of cfjax.experiments.stats). 12345 first: the split every earlier run used.
    split_seeds: tuple[int, ...] = (12345, 1, 2)
    B: int = 5  # trajectory budget (successes / failures), + 1 contrast for corrective
    abstraction_k: int = 3  # stored abstractions shown by the baselines (ours; the paper leaves it open)
    max_attempts: int = 2  # evaluated attempts per task (draft + one revision after feedback)
    log_capacity: int = 512  # outcome-log rows the bandit kernel sees (static shape; ≥ K × tasks)
    max_eval_tasks: int = 0  # held-out tasks evaluated per iteration, spread over the split (0 = all)
    embed_text: str = "question_cues"  # text embedded for KNN and ρ (class docstring; "paper" = App. B.3's)
    type_filter: bool = True  # trajectory retrieval restricted to the observable task type (Table 3)
    log_durability: str = "flush"  # OutcomeLog durability ("fsync" | "flush"; logs are regenerated from seeds)
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
        for name in ("seeds", "split_seeds"):
            v = getattr(self, name)
            if not v:
                raise ValueError(f"APConfig.{name} must not be empty")
            if len(set(v)) != len(v):
                raise ValueError(f"APConfig.{name} lists a seed more than once: {list(v)}")
        if self.embed_text not in EMBED_TEXTS:
            raise ValueError(f"APConfig.embed_text must be one of {EMBED_TEXTS}, got {self.embed_text!r}")
        if self.log_durability not in ("fsync", "flush"):
            raise ValueError(f"APConfig.log_durability must be 'fsync' or 'flush', got {self.log_durability!r}")

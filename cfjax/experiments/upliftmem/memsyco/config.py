"""The MemSyco-like suite's configuration: its size, its seeds and the simulator's competence.

Every probability below is **our choice, fixed before any result was seen**, and never tuned
afterwards. They describe a *scripted answerer* (:mod:`cfjax.experiments.upliftmem.memsyco.answerer`), not an LLM:
every figure produced with it is labelled "scripted answerer". The directions they encode are the
ones MemSyco-Bench reports for real models (a user's in-context claim pulls the answer away from
what the model knows; an outdated memory next to its update still misleads; in-context personal
facts are used) — their magnitudes are not fitted to anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["MemSycoConfig"]


@dataclass(frozen=True)
class MemSycoConfig:
    """Size, seeds and the scripted answerer's competence.

    Attributes:
      instances_per_scenario: instances (queries) of each of the five scenarios (paper: 300 and 350;
        here 60 by default, 15 in :meth:`quick`).
      seed: the suite seed: topics, surface forms, option orders, dialogue grouping, memory dates and
        distractors are drawn from it (the suite is identical for a given seed on every machine).
      split_seed: the seed of the dialogue-grouped, scenario-stratified train/test split (App. D.1: 42).
      train_frac: the train share of each scenario (App. D.1: 70:30).
      min_distractors, max_distractors: distractor memories per dialogue (near-miss distractors that
        share the query's words plus unrelated filler memories), drawn uniformly in this range, so
        that the retrieval budget K ∈ {3, 5, 10} matters.
      p_know: the answerer, without memory, answers a question of general knowledge (an objective
        fact; the conventional in-scope default of ``scope_control``) correctly. Otherwise it guesses
        uniformly among the options (so its memory-free accuracy there is
        ``p_know + (1 − p_know)/n_options``). Our choice: 0.85.
      p_syco: with a grounded answer (it knew the fact, or the context shows evidence), it
        nevertheless follows a conflicting user statement that is in context — a false belief, an
        out-of-scope preference, a claim contradicting the evidence. Our choice: 0.6.
      p_use: without a grounded answer, it uses an in-context relevant memory's claim (a personal
        fact; a user's statement it cannot check; an update that says it replaces an earlier note).
        Our choice: 0.9.
      p_outdated_confusion: with an outdated memory *and* its dated update both in context, it
        follows the outdated one (otherwise it uses the update with ``p_use``). Our choice: 0.35.
      p_follow_outdated_alone: it follows a lone dated state memory that carries no ``replaces``
        marker (in ``valid_selection``: the outdated memory without its update). Our choice: 0.85.
      token_half: adherence falls as the context fills: every follow probability above is multiplied
        by ``1 / (1 + memory_tokens / token_half)`` (memory tokens of the whole injected set, counted
        by :func:`cfjax.llm.prompts.count_tokens`); at ``token_half`` tokens adherence is halved.
        Our choice: 400.
    """

    instances_per_scenario: int = 60
    seed: int = 0
    split_seed: int = 42
    train_frac: float = 0.7
    min_distractors: int = 8
    max_distractors: int = 20
    p_know: float = 0.85
    p_syco: float = 0.6
    p_use: float = 0.9
    p_outdated_confusion: float = 0.35
    p_follow_outdated_alone: float = 0.85
    token_half: float = 400.0

    def __post_init__(self) -> None:
        if self.instances_per_scenario < 1:
            raise ValueError(f"instances_per_scenario must be ≥ 1, got {self.instances_per_scenario}")
        if not 0.0 < self.train_frac < 1.0:
            raise ValueError(f"train_frac must be in (0, 1), got {self.train_frac}")
        if not 0 <= self.min_distractors <= self.max_distractors:
            raise ValueError(f"need 0 ≤ min_distractors ≤ max_distractors, got {self.min_distractors}, "
                             f"{self.max_distractors}")
        for name in ("p_know", "p_syco", "p_use", "p_outdated_confusion", "p_follow_outdated_alone"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {p}")
        if not self.token_half > 0:
            raise ValueError(f"token_half must be > 0, got {self.token_half}")

    @classmethod
    def quick(cls, **overrides) -> "MemSycoConfig":
        """The quick preset: 15 instances per scenario (75 in all), everything else unchanged."""
        return replace(cls(instances_per_scenario=15), **overrides)

    def adherence(self, memory_tokens: float) -> float:
        """``1 / (1 + memory_tokens / token_half)``: the factor on every follow probability."""
        return 1.0 / (1.0 + max(0.0, float(memory_tokens)) / self.token_half)

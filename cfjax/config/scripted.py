"""Competence parameters of the scripted backbone (:mod:`cfjax.llm.scripted`).

The scripted backbone is a seeded, documented simulator of an LLM, not an
LLM; its error model is described in full in the docstring of
:mod:`cfjax.llm.scripted` (and per domain in ``cfjax.domains.*``). The
papers give none of these numbers: every default is **our choice**, fixed a
priori (before any result was seen) and not tuned to favour a method. This
module holds only the frozen config so that :mod:`cfjax.config` does not
import :mod:`cfjax.llm`; ``from cfjax.llm.scripted import ScriptedConfig``
keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ScriptedConfig"]


@dataclass(frozen=True)
class ScriptedConfig:
    """Error model of the scripted backbone (see the :mod:`cfjax.llm.scripted` docstring).

    The defaults were fixed before any CounterMem result was seen and are not
    tuned to favour a method: a 50 % rate of the family's characteristic slip
    on trap questions, 10 % of the opposite slip on look-alikes, 5 % random
    slips, and a 30 % chance per retry that feedback alone fixes a slip.

    ``reflection_factor`` (issue 21, item 4) is a **simulator assumption** of the same kind as
    ``retry_factor``, fixed before any Reflexion result was seen and never tuned: each verbal
    self-reflection the draft prompt shows (``DraftRequest.reflections``, the Reflexion base agent)
    multiplies the probability that the task's characteristic slip (and its extra slips) recurs on
    this attempt by ``reflection_factor``, on top of ``retry_factor**attempt``; the uncorrelated
    ``p_noise`` slip is unaffected. With no reflection (the ReAct agent) nothing changes. The
    default 0.7 says a reflection helps about as much again as the feedback itself. The gold-free
    drafters of user suites (``cfjax.domains.*.user_draft``) have no characteristic slip, so there
    a reflection changes the prompt only.
    """

    seed: int = 0  # seeds every draw (stable hash of seed, call, task, episode, attempt, sample)
    p_error: float = 0.5  # DRAFT_ACTION: the family's characteristic slip on base / new-surface tasks
    p_error_look_alike: float = 0.1  # DRAFT_ACTION: the opposite slip on look-alike tasks
    p_noise: float = 0.05  # DRAFT_ACTION: one random rule operator on a random unit (uncorrelated slip)
    retry_factor: float = 0.7  # error probability × retry_factor**attempt (feedback alone fixes some slips)
    reflection_factor: float = 0.7  # slip probability × reflection_factor**k, k self-reflections shown (Reflexion)
    p_propose_fix: float = 0.5  # GENERATE_LOCAL_ALTERNATIVES: the true one-unit fix is among the K proposals
    p_condition_semantic: float = 0.5  # DISTIL_RECORD: the condition is the semantic lexicon attribute
    p_condition_surface: float = 0.25  # DISTIL_RECORD: the condition is the cue phrase (else too broad)
    p_ignore_record: float = 0.1  # REVISE_WITH_RECORD: returns the draft unchanged
    p_judge_random: float = 0.2  # BEST_OF_N_JUDGE: a uniformly random candidate instead of the majority
    p_follow_guidance: float = 0.9  # follows an applicable guidance rule (Anti-Persistence, App. B.1)
    p_pick_up_factual: float = 0.5  # picks a noted pattern up from raw past records (mode none)
    # --- UpliftMem: the executor's response to a memory set, and the writer (fixed a priori, issue 13)
    p_out_of_scope: float = 0.15  # follows a WHEN rule although its phrase is absent (a memory outside its scope)
    p_outdated_confusion: float = 0.35  # with a memory and its update both shown, follows the outdated one
    adherence_tokens: float = 400.0  # follow probabilities × 1/(1 + memory tokens / adherence_tokens)
    p_write_scoped: float = 0.7  # WRITE_MEMORY: the rule is scoped by the task's phrase (else ALWAYS)
    p_write_split: float = 0.15  # WRITE_MEMORY: writes the lesson as one of two linked notes (trigger / fix)
    p_revise_narrow: float = 0.6  # REVISE_MEMORY: an ALWAYS rule is narrowed to the task's phrase

    def __post_init__(self) -> None:
        for name in ("p_error", "p_error_look_alike", "p_noise", "retry_factor", "reflection_factor", "p_propose_fix",
                     "p_condition_semantic", "p_condition_surface", "p_ignore_record", "p_judge_random",
                     "p_follow_guidance", "p_pick_up_factual", "p_out_of_scope", "p_outdated_confusion",
                     "p_write_scoped", "p_write_split", "p_revise_narrow"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"ScriptedConfig.{name} must be in [0, 1], got {v}")
        if not self.adherence_tokens > 0:
            raise ValueError(f"ScriptedConfig.adherence_tokens must be > 0, got {self.adherence_tokens}")
        if self.p_condition_semantic + self.p_condition_surface > 1.0:
            raise ValueError("p_condition_semantic + p_condition_surface must be ≤ 1")

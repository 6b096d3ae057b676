"""Anti-Persistence: trajectory memory, an append-only outcome log, KNN-UCB mode
selection and on-demand guidance that is discarded after use
(papers/anti-persistence.md). A method: it never imports a domain; it sees one
through an injected ``EditModel`` and ``World`` and a model as any ``Backbone``.
Training tasks choose modes with the paper's exploring selector; held-out
tasks greedily from the frozen log (:func:`eval_decisions`)."""

from cfjax.antipersist.guidance import MODES, Guidance, Rule, SynthesisConfig, Trajectory, synthesize
from cfjax.antipersist.memory import AbstractionStore, TrajectoryMemory, embed_text, task_type
from cfjax.antipersist.outcome_log import OutcomeEntry, OutcomeLog, cost_adjusted_reward
from cfjax.antipersist.protocol import (ROWS, APConfig, eval_decisions, make_greedy_selector, reproduced_errors,
                                        run_method, run_task)

__all__ = ["MODES", "Guidance", "Rule", "SynthesisConfig", "Trajectory", "synthesize", "AbstractionStore",
           "TrajectoryMemory", "embed_text", "task_type", "OutcomeEntry", "OutcomeLog", "cost_adjusted_reward",
           "ROWS", "APConfig", "eval_decisions", "make_greedy_selector", "reproduced_errors", "run_method",
           "run_task"]

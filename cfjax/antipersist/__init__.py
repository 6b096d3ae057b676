"""Anti-Persistence: trajectory memory, an append-only outcome log, KNN-UCB mode
selection and on-demand guidance that is discarded after use
(papers/anti-persistence.md). A method: it never imports a domain; it sees one
through an injected ``EditModel`` and ``World`` and a model as any ``Backbone``."""

from cfjax.antipersist.guidance import MODES, Guidance, Rule, SynthesisConfig, Trajectory, synthesize
from cfjax.antipersist.memory import AbstractionStore, TrajectoryMemory
from cfjax.antipersist.outcome_log import OutcomeEntry, OutcomeLog, cost_adjusted_reward
from cfjax.antipersist.protocol import ROWS, APConfig, reproduced_errors, run_method, run_task

__all__ = ["MODES", "Guidance", "Rule", "SynthesisConfig", "Trajectory", "synthesize", "AbstractionStore",
           "TrajectoryMemory", "OutcomeEntry", "OutcomeLog", "cost_adjusted_reward", "ROWS", "APConfig",
           "reproduced_errors", "run_method", "run_task"]

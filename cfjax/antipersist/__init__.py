"""Anti-Persistence: trajectory memory, an append-only outcome log, KNN-UCB mode
selection and on-demand guidance that is discarded after use
(papers/anti-persistence.md). A method: it never imports a domain; it sees one
through an injected ``EditModel`` and ``World`` and a model as any ``Backbone``.
Training tasks choose modes with the paper's exploring selector; held-out
tasks greedily from the frozen log (:func:`eval_decisions`).

Import public names from here (``from cfjax.antipersist import GuidanceAgent, run_method``); the
modules stay importable.

- :mod:`cfjax.antipersist.api` — :class:`GuidanceAgent`: guidance on demand inside your own agent loop
- :mod:`cfjax.antipersist.guidance` — trajectories, rules, the four modes and their synthesizers
- :mod:`cfjax.antipersist.memory` — the trajectory memory (and the baselines' abstraction store)
- :mod:`cfjax.antipersist.outcome_log` — the append-only outcome log ``L_k`` (its entries:
  :mod:`cfjax.antipersist.outcome_entry`)
- :mod:`cfjax.antipersist.protocol` — the iteration protocol, its rows and the provenance count
"""

from cfjax.antipersist.api import Choice, GuidanceAgent
from cfjax.antipersist.guidance import (HEADERS, MODES, Guidance, Rule, SynthesisConfig, Trajectory, compose_memory,
                                        factual_rules, parse_rules, prompt_for, rebind, render_factual, render_rules,
                                        synthesize)
from cfjax.antipersist.memory import (EMBED_TEXTS, AbstractionStore, FrozenMemoryError, TrajectoryMemory, embed_text,
                                      rules_of, task_type)
from cfjax.antipersist.outcome_log import (DURABILITY_LEVELS, LOGGED, SKIP_REASONS, FrozenLogError, LogCapacityError,
                                           OutcomeArrays, OutcomeEntry, OutcomeLog, OutcomeLogError,
                                           OutcomeLogWarning, cost_adjusted_reward, next_capacity)
from cfjax.antipersist.protocol import (EVAL_BRANCHES, ROWS, TRAIN_BRANCHES, APConfig, EvalChoice, GreedyDecision,
                                        IterationResult, MethodState, TaskRecord, eval_decisions, greedy_mode,
                                        make_greedy_selector, make_selector, new_state, reproduced_errors,
                                        run_method, run_task, task_memory)

__all__ = [
    # your own agent loop
    "GuidanceAgent", "Choice",
    # guidance and its synthesizers
    "MODES", "HEADERS", "Guidance", "Rule", "SynthesisConfig", "Trajectory", "synthesize", "factual_rules",
    "render_factual", "render_rules", "parse_rules", "compose_memory", "prompt_for", "rebind",
    # trajectory memory
    "TrajectoryMemory", "AbstractionStore", "FrozenMemoryError", "EMBED_TEXTS", "embed_text", "task_type", "rules_of",
    # the outcome log
    "OutcomeLog", "OutcomeEntry", "OutcomeArrays", "cost_adjusted_reward", "next_capacity", "LOGGED", "SKIP_REASONS",
    "DURABILITY_LEVELS", "FrozenLogError", "OutcomeLogError", "LogCapacityError", "OutcomeLogWarning",
    # the protocol
    "ROWS", "APConfig", "MethodState", "IterationResult", "TaskRecord", "run_method", "run_task", "new_state",
    "task_memory", "eval_decisions", "make_selector", "make_greedy_selector", "greedy_mode", "GreedyDecision",
    "EvalChoice", "TRAIN_BRANCHES", "EVAL_BRANCHES", "reproduced_errors",
]

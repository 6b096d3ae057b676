"""UpliftMem: set-level uplift retrieval (papers/upliftmem.md; SPEC.md §2).

- :mod:`cfjax.uplift.core` — memories, executions, Eq. 1 utility, paired labels, the execution log
- :mod:`cfjax.uplift.executor` — the frozen executor of the end-to-end domains (the agent loop)
- :mod:`cfjax.uplift.pool` — the memory pool, recall, execution-validated writing (App. B.3)
- :mod:`cfjax.uplift.scorer` — features, labelled data, the jitted scorer updates (§4.4, App. C)
- :mod:`cfjax.uplift.retrieval` — recall, feasibility, beam search and path sampling (§4.2, App. B.1)
- :mod:`cfjax.uplift.probing` — probe pools, comparison families, acquisition (§4.3, App. B.2)
- :mod:`cfjax.uplift.pipeline` — Algorithm 1 and the evaluation protocol (App. D.5)
- :mod:`cfjax.uplift.calls` — its model calls (WRITE_MEMORY, REVISE_MEMORY)
- :mod:`cfjax.uplift.synthetic` — a synthetic domain with known uplift (the §5 studies)

Import public names from here (``from cfjax.uplift import UpliftRun, member_row``); the modules stay
importable; the names of the scorer, retrieval, probing, calls and synthetic modules load on first use.

Methods know only the shared Protocols: nothing here imports :mod:`cfjax.domains`.
"""

from cfjax.uplift.core import (Execution, ExecutionLog, Label, Labeler, Memory, SetExecutor, UtilitySpec, set_key,
                               utility)
from cfjax.uplift.executor import AgentExecutor, memory_block
from cfjax.uplift.pipeline import TRAINING_ROWS, EvalResult, TrainLog, UpliftRun, TrainingRow
from cfjax.uplift.pool import MemoryPool, Writer, WriteOutcome

from cfjax.infra._lazy import lazy_exports

# the rest of the public API, imported on first use (PEP 562)
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    ".calls": ["WRITE_MEMORY", "REVISE_MEMORY", "WriteMemoryRequest", "ReviseMemoryRequest", "MemoryResult",
               "render_write_memory", "render_revise_memory", "parse_memory"],
    ".core": ["PURPOSES"],
    ".pool": ["task_text"],
    ".scorer": ["N_CROSS", "member_row", "memory_statics", "Featurizer", "LabelStore", "PathRecord", "ScorerTrainer",
                "UpdateMetrics"],
    ".retrieval": ["Candidates", "Retriever", "native_topk"],
    ".probing": ["WindowTask", "Window", "neighbourhood", "build_window", "acquire", "posterior_cov", "label_many"],
    ".synthetic": ["KINDS", "KIND_WORDS", "SyntheticSpec", "SyntheticDomain", "SyntheticExecutor", "synthetic_config",
                   "feasible_sets", "set_ranking", "ranking_metrics", "attach_run", "ProbeStudy", "study",
                   "probe_curve", "paired_bootstrap"],
})
del lazy_exports

__all__ = ["Execution", "ExecutionLog", "Label", "Labeler", "Memory", "SetExecutor", "UtilitySpec", "set_key",
           "utility", "AgentExecutor", "memory_block", "TRAINING_ROWS", "EvalResult", "TrainLog", "UpliftRun", "TrainingRow",
           "MemoryPool", "Writer", "WriteOutcome", *_LAZY]

"""UpliftMem: set-level uplift retrieval (papers/upliftmem.md; SPEC.md §2).

- :mod:`cfjax.uplift.core` — memories, executions, Eq. 1 utility, paired labels, the execution log
- :mod:`cfjax.uplift.executor` — the frozen executor of the end-to-end domains (the agent loop)
- :mod:`cfjax.uplift.pool` — the memory pool, recall, execution-validated writing (App. B.3)
- :mod:`cfjax.uplift.scorer` — features, labelled data, the jitted scorer updates (§4.4, App. C)
- :mod:`cfjax.uplift.retrieval` — recall, feasibility, beam search and path sampling (§4.2, App. B.1)
- :mod:`cfjax.uplift.probing` — probe pools, comparison families, acquisition (§4.3, App. B.2)
- :mod:`cfjax.uplift.pipeline` — Algorithm 1 and the evaluation protocol (App. D.5)

Methods know only the shared Protocols: nothing here imports :mod:`cfjax.domains`.
"""

from cfjax.uplift.core import (Execution, ExecutionLog, Label, Labeler, Memory, SetExecutor, UtilitySpec, set_key,
                               utility)
from cfjax.uplift.executor import AgentExecutor, memory_block
from cfjax.uplift.pipeline import TRAINING_ROWS, EvalResult, TrainLog, UpliftRun, TrainingRow
from cfjax.uplift.pool import MemoryPool, Writer, WriteOutcome

__all__ = ["Execution", "ExecutionLog", "Label", "Labeler", "Memory", "SetExecutor", "UtilitySpec", "set_key",
           "utility", "AgentExecutor", "memory_block", "TRAINING_ROWS", "EvalResult", "TrainLog", "UpliftRun", "TrainingRow",
           "MemoryPool", "Writer", "WriteOutcome"]

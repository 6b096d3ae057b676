"""The frozen executor of the MemSyco-like suite (:class:`~cfjax.uplift.core.SetExecutor`).

:class:`MemSycoExecutor` wires the agent-side scripted answerer
(:mod:`cfjax.experiments.upliftmem.memsyco.answerer`, which sees the prompt material and the memory texts only) to
the world-side grader and competence interface (:mod:`cfjax.experiments.upliftmem.memsyco.world`, the only readers
of answer keys). It reads no key itself: it hands the answerer's reply text to the world and copies
the world's ``info`` into the :class:`~cfjax.uplift.core.Execution`.

One execution = one backbone call (prompt + reply tokens, :func:`cfjax.llm.prompts.count_tokens`)
and one evaluator call, both charged to the ledger. ``memory_tokens`` = the summed ``tokens`` of the
injected memories (0 for ``∅``).
"""

from __future__ import annotations

from collections.abc import Sequence

from cfjax.experiments.upliftmem.memsyco.answerer import ScriptedAnswerer, format_reply, render_prompt
from cfjax.experiments.upliftmem.memsyco.config import MemSycoConfig
from cfjax.infra.ledger import Ledger
from cfjax.llm.prompts import count_tokens
from cfjax.types import Attempt, Task, Usage
from cfjax.uplift.core import Execution, Memory

#: agent-side code (:data:`cfjax.types.AGENT_SIDE_MARKER`): the answer-key guard never trusts this
#: module, although it lives under the trusted ``cfjax.experiments`` prefix (the executor sees what a model
#: would be shown, never an answer key).
__cfjax_agent_side__ = True

__all__ = ["MemSycoExecutor"]


class MemSycoExecutor:
    """``SetExecutor`` over a :class:`~cfjax.experiments.upliftmem.memsyco.suite.MemSycoSuite`.

    Args:
      suite: the suite (supplies the world and the competence interface).
      config: the competence probabilities (default: the suite's).
      seed: the executor seed; draws are keyed on ``(seed, task id, draft seed[, memory ids])``.
    """

    def __init__(self, suite, config: MemSycoConfig | None = None, seed: int = 0) -> None:
        self.suite = suite
        self.config = config if config is not None else suite.config
        self.seed = int(seed)
        self._world = suite.world()
        self.answerer = ScriptedAnswerer(self.config, suite.competence(), self.seed)
        self.name = f"memsyco-scripted(seed={self.seed})"

    def execute(self, task: Task, memories: Sequence[Memory], *, seed: int, ledger: Ledger) -> Execution:
        shown = [(m.mem_id, m.text) for m in memories]
        prompt = render_prompt(task, shown)
        reply = self.answerer.answer(task, shown, int(seed))
        text = format_reply(reply.letter, reply.source)
        outcome, world_info = self._world.grade(task, text)
        usage = Usage(count_tokens(prompt), count_tokens(text))
        ledger.llm(task.task_id, usage)
        ledger.evaluation(task.task_id, outcome)
        info = dict(world_info)
        info.update(answer=reply.letter, source=reply.source, base_answer=reply.base_letter,
                    base_source=reply.base_source, adherence=reply.adherence)
        return Execution(R=outcome.score, solved=outcome.solved, attempts=1,
                         memory_tokens=int(sum(m.tokens for m in memories)),
                         trajectory=(Attempt(text, outcome.feedback, outcome.score),),
                         llm_tokens=usage.total, llm_calls=1, eval_calls=1, info=info)

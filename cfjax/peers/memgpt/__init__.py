"""MemGPT / Letta (Packer et al., 2023; repository letta-ai/letta, formerly cpacker/MemGPT) as a peer
memory system: its tool loop's call kinds (:mod:`cfjax.peers.memgpt.calls`), its memory tiers and
tools (:mod:`cfjax.peers.memgpt.tools`), the system (:mod:`cfjax.peers.memgpt.memory`) and this one
registration. Core memory blocks always in context, edited by the model's own tool calls; archival
memory behind the model's own search; recall storage of the message history; a memory-pressure
warning at 75 % of the context and summarise-and-evict on overflow. Nothing else in the tree names it.
"""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.memgpt.calls import (COMPETENCE, MEMGPT_STEP, MEMGPT_SUMMARIZE, MemGPTCompetence, StepRequest,
                                      StepResult, SummarizeRequest, SummarizeResult, parse_step, parse_summary,
                                      render_step, render_summarize)
from cfjax.peers.memgpt.memory import MemGPTConfig, MemGPTSystem
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["COMPETENCE", "MEMGPT_STEP", "MEMGPT_SUMMARIZE", "MemGPTCompetence", "StepRequest", "StepResult",
           "SummarizeRequest", "SummarizeResult", "parse_step", "parse_summary", "render_step", "render_summarize",
           "MemGPTConfig", "MemGPTSystem", "INFO"]

#: the registration: a row of countermem run, antipersist run, compare and (by its protocol) upliftmem
INFO = MEMORY_SYSTEMS.register("memgpt", MemorySystemInfo(
    "memgpt", MemGPTSystem, show="revise", runners=("countermem", "antipersist", "compare", "upliftmem"),
    table="table1", reference="none", why_not={},
    description="MemGPT/Letta: self-edited core memory + archival search by the model's own tool calls",
    paper="Packer et al., MemGPT: Towards LLMs as Operating Systems (2023); letta-ai/letta", defaults=("countermem", "upliftmem")))

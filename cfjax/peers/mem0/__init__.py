"""Mem0 v2 (Chhikara et al., 2025) as a peer memory system: its two call kinds
(:mod:`cfjax.peers.mem0.calls`: MEM0_EXTRACT, MEM0_UPDATE), its store (:mod:`cfjax.peers.mem0.memory`)
and this one registration. The row is v2 — extraction, then ADD / UPDATE / DELETE / NONE over temporary
ids — not the ADD-only upstream of 2026 (module docstring of :mod:`cfjax.peers.mem0.memory`)."""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.mem0.calls import (MEM0_EXTRACT, MEM0_PROBS, MEM0_UPDATE, ExtractRequest, ExtractResult, Mem0Probs,
                                    MemoryEvent, UpdateRequest, UpdateResult)
from cfjax.peers.mem0.memory import Mem0Memory, Mem0System
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["MEM0_EXTRACT", "MEM0_UPDATE", "MEM0_PROBS", "Mem0Probs", "ExtractRequest", "ExtractResult",
           "UpdateRequest", "UpdateResult", "MemoryEvent", "Mem0Memory", "Mem0System", "INFO"]

#: the registration: a row of UpliftMem's Table 1 (a MemSyco store) and a method of compare
INFO = MEMORY_SYSTEMS.register("mem0", MemorySystemInfo(
    "mem0", Mem0System, show="revise", runners=("upliftmem", "compare"), table="table1", reference="none",
    why_not={"countermem": "not a row of the CounterMem paper's Table 1; run it with cfjax compare --methods mem0",
             "antipersist": "not a row of the Anti-Persistence paper's Table 1; run it with cfjax compare "
                            "--methods mem0"},
    description="Mem0 v2: facts per interaction merged by ADD/UPDATE/DELETE/NONE over temporary ids, top-5 shown",
    paper="Chhikara et al., Mem0 (2025) §2.1; mem0ai/mem0 v2 mem0/memory/main.py; papers/upliftmem.md Table 1"))

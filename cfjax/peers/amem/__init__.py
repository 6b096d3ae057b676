"""A-MEM (Xu et al., 2025) as a peer memory system: its two call kinds (:mod:`cfjax.peers.amem.calls`:
AMEM_NOTE, AMEM_EVOLVE), its store of Zettelkasten notes (:mod:`cfjax.peers.amem.memory`; links are
note ids, not the rank positions of the upstream code) and this one registration."""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.amem.calls import (AMEM_EVOLVE, AMEM_NOTE, AMEM_PROBS, AmemProbs, EvolveRequest, EvolveResult,
                                    Neighbour, NoteRequest, NoteResult)
from cfjax.peers.amem.memory import AmemNote, AmemSystem
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["AMEM_NOTE", "AMEM_EVOLVE", "AMEM_PROBS", "AmemProbs", "NoteRequest", "NoteResult", "Neighbour",
           "EvolveRequest", "EvolveResult", "AmemNote", "AmemSystem", "INFO"]

#: the registration: a row of UpliftMem's Table 1 (a MemSyco store) and a method of compare
INFO = MEMORY_SYSTEMS.register("amem", MemorySystemInfo(
    "amem", AmemSystem, show="revise", runners=("upliftmem", "compare"), table="table1", reference="none",
    why_not={"countermem": "not a row of the CounterMem paper's Table 1; run it with cfjax compare --methods amem",
             "antipersist": "not a row of the Anti-Persistence paper's Table 1; run it with cfjax compare "
                            "--methods amem"},
    description="A-MEM: Zettelkasten notes evolved on insert (links by id), top-5 plus linked notes shown",
    paper="Xu et al., A-MEM (2025) §3; agiresearch/A-mem agentic_memory/memory_system.py; papers/upliftmem.md Table 1"))

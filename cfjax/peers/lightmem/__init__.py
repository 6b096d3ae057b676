"""LightMem (Fang et al., 2025, *LightMem: Lightweight and Efficient Memory-Augmented Generation*;
repository zjunlp/LightMem) as a peer memory system: sensory buffer → topic segments → short-term
buffer flushed to model extraction → long-term entries with an offline sleep-time update, similarity
top-10 retrieval. Its calls are in :mod:`cfjax.peers.lightmem.calls`, its store in
:mod:`cfjax.peers.lightmem.memory`; this is its one registration (a Table 1 row of UpliftMem, and a
method of ``compare``)."""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.lightmem.calls import COMPETENCE, LIGHTMEM_EXTRACT, LIGHTMEM_UPDATE, LightMemCompetence
from cfjax.peers.lightmem.memory import LightMemSystem
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["LightMemSystem", "LIGHTMEM_EXTRACT", "LIGHTMEM_UPDATE", "LightMemCompetence", "COMPETENCE", "INFO"]

_WHY = "not a row of that paper's tables; run it with cfjax compare --methods lightmem"

INFO = MEMORY_SYSTEMS.register("lightmem", MemorySystemInfo(
    "lightmem", LightMemSystem, show="revise", runners=("upliftmem", "compare"), table="table1", reference="none",
    why_not={"countermem": _WHY, "antipersist": _WHY},
    description="LightMem: topic-segmented turns, buffered model extraction, offline sleep-time update, top-10 recall",
    paper="Fang et al., LightMem (2025, arXiv 2510.18866); github.com/zjunlp/LightMem"))

"""NaiveRAG as a peer memory store: every turn of every finished episode verbatim, recalled by similarity
top-k (:mod:`cfjax.peers.naive_rag.memory`; no model call, so no call kinds) — the plain RAG store of
MemSyco-Bench and of UpliftMem's fixed-store comparison (§5.3, Table 3), and this one registration."""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.naive_rag.memory import FORMAT, NaiveRAGSystem, StoredTurn, query_text, turn_text
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["NaiveRAGSystem", "StoredTurn", "FORMAT", "turn_text", "query_text", "INFO"]

_WHY = ("not a row of that paper's Table 1 (NaiveRAG is a MemSyco fixed store of UpliftMem §5.3); run it with "
        "cfjax compare --methods naive_rag")

#: the registration: a MemSyco store (UpliftMem Table 3) and a method of compare, in no runner's default rows
INFO = MEMORY_SYSTEMS.register("naive_rag", MemorySystemInfo(
    "naive_rag", NaiveRAGSystem, show="revise", runners=("upliftmem", "compare"), table="table1", reference="none",
    why_not={"countermem": _WHY, "antipersist": _WHY},
    description="NaiveRAG: every past turn (question, action, feedback) verbatim, top-5 by cosine shown",
    paper="MemSyco-Bench NaiveRAG store; papers/upliftmem.md §5.3, Table 3; ../shared/PEERS.md",
    defaults=()))

"""AutoRefine (Qiu et al., arXiv 2601.22758) exactly as Anti-Persistence App. D.3 specifies its baseline:
skills with utility counters, multi-query retrieval with a similarity floor and MMR over three pools,
periodic percentile pruning, a single contrastive evolver call per iteration, credit only when shown.
Its calls are in :mod:`cfjax.peers.autorefine.calls`, its store in :mod:`cfjax.peers.autorefine.memory`;
this is its one registration (a Table 1 row of ``antipersist run`` and a method of ``compare``)."""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.autorefine.calls import AUTOREFINE_EVOLVE, AUTOREFINE_REWRITE, COMPETENCE, AutoRefineCompetence
from cfjax.peers.autorefine.memory import AutoRefineSystem, mmr, prune_ids, utility
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["AutoRefineSystem", "AUTOREFINE_REWRITE", "AUTOREFINE_EVOLVE", "AutoRefineCompetence", "COMPETENCE",
           "utility", "mmr", "prune_ids", "INFO"]

_WHY = "not a row of that paper's tables; run it with cfjax compare --methods autorefine"

INFO = MEMORY_SYSTEMS.register("autorefine", MemorySystemInfo(
    "autorefine", AutoRefineSystem, show="revise", runners=("antipersist", "compare"), table="table1",
    reference="none", why_not={"countermem": _WHY, "upliftmem": _WHY},
    description="AutoRefine (Anti-Persistence App. D.3): utility-scored skills, 4-query MMR retrieval, "
                "contrastive evolver, percentile pruning",
    paper="Qiu et al., AutoRefine (arXiv 2601.22758); papers/anti-persistence.md App. D.3"))

"""MemP (Fang et al., 2025, *Memp: Exploring Agent Procedural Memory*; zjunlp/MemP) as a memory-system
plugin: its call kinds (:mod:`cfjax.peers.memp.calls`), its store (:mod:`cfjax.peers.memp.memory`) and
this one registration. Nothing else in the tree names it.

Runners: ``compare`` (built on T_build, frozen, evaluated), ``antipersist`` (its update-after-every-task
protocol is MemP's own online regimen — retrieve, act, then credit hit/success, deprecate, add or adjust —
so the bookkeeping and the adjustment actually run there) and ``upliftmem`` (a Table 1 row of UpliftMem;
its recall is a memory set). It is not a row of ``countermem run``."""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.memp.calls import (MEMP_ADJUST, MEMP_DISTILL, AdjustRequest, DistillRequest, WorkflowResult,
                                    parse_workflow, render_workflow)
from cfjax.peers.memp.memory import MempConfig, MempSystem, Procedure, facts_of
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["MEMP_DISTILL", "MEMP_ADJUST", "DistillRequest", "AdjustRequest", "WorkflowResult", "parse_workflow",
           "render_workflow", "MempConfig", "MempSystem", "Procedure", "facts_of", "INFO"]

#: the registration: a row of antipersist run and UpliftMem's Table 1, a method of compare
INFO = MEMORY_SYSTEMS.register("memp", MemorySystemInfo(
    "memp", MempSystem, show="revise", runners=("antipersist", "upliftmem", "compare"), table="table1",
    reference="none",
    why_not={"countermem": "not a row of the CounterMem paper's Table 1; run it with cfjax compare --methods memp"},
    description="MemP procedural memory: workflows keyed by the task query (top 10 at cosine 0.5), "
                "hit/success bookkeeping, adjust-after-failure, deprecation at hit>=3 and success rate<0.5",
    paper="Fang et al., Memp: Exploring Agent Procedural Memory (2025), §3; github.com/zjunlp/MemP", defaults=("upliftmem",)))

"""MemRL (Zhang et al., *MemRL: Self-Evolving Agents via Runtime Reinforcement Learning on Episodic
Memory*, arXiv:2601.03192; MemTensor/MemRL) as a memory-system plugin: its call kind
(:mod:`cfjax.peers.memrl.calls`), its store (:mod:`cfjax.peers.memrl.memory`) and this one registration.
Nothing else in the tree names it.

Runners: ``compare`` (built on T_build: every memory keeps Q = 0, so Phase B reduces to similarity),
``antipersist`` (its update after every training task is MemRL's runtime loop — retrieve, act, credit
r = ±1 to the injected memories, add — so the utilities are learned there) and ``upliftmem`` (a Table 1
row of UpliftMem; its recall is a memory set). It is not a row of ``countermem run``."""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.memrl.calls import MEMRL_DISTILL, ScriptRequest, ScriptResult, parse_script
from cfjax.peers.memrl.memory import EpisodicMemory, MemrlConfig, MemrlSystem, choose, generator, q_update, rank
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["MEMRL_DISTILL", "ScriptRequest", "ScriptResult", "parse_script", "EpisodicMemory", "MemrlConfig",
           "MemrlSystem", "choose", "generator", "q_update", "rank", "INFO"]

#: the registration: a row of antipersist run and UpliftMem's Table 1, a method of compare
INFO = MEMORY_SYSTEMS.register("memrl", MemorySystemInfo(
    "memrl", MemrlSystem, show="revise", runners=("antipersist", "upliftmem", "compare"), table="table1",
    reference="none",
    why_not={"countermem": "not a row of the CounterMem paper's Table 1; run it with cfjax compare --methods memrl"},
    description="MemRL: episodic memories with a Q-value each; similarity recall, then 0.5·z(sim)+0.5·z(Q), "
                "Q >= -0.8, epsilon-greedy 0.1 over 5; Q <- 0.7·Q + 0.3·r for every injected memory",
    paper="Zhang et al., MemRL (arXiv:2601.03192, 2026), §3; github.com/MemTensor/MemRL", defaults=("upliftmem",)))

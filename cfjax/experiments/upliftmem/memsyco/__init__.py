"""A built-in, offline, seeded suite modelled on MemSyco-Bench (controlled retrieval on fixed stores).

An UpliftMem experiment fixture, not an action domain (so not in the domain registry): it lives with
the experiments that use it (:mod:`cfjax.experiments.upliftmem.controlled`, ``cfjax upliftmem controlled``).

UpliftMem's RQ2/RQ3/RQ5 analogue (papers/upliftmem.md §5.3, §5.4 Table 3, §5.6, App. D.1 Table 5,
D.2, D.5): five scenarios, five fixed memory stores per dialogue, a dialogue-grouped 70:30 split
with seed 42, a frozen scripted executor, native similarity retrieval, and the paper's metrics.

>>> from cfjax.experiments.upliftmem.memsyco import MemSycoConfig, MemSycoSuite, MemSycoExecutor, native_retrieve, metrics
>>> suite = MemSycoSuite(MemSycoConfig.quick())
>>> train, test = suite.split(seed=42)
>>> ex = MemSycoExecutor(suite, suite.config, seed=0)

Modules: :mod:`.config` (sizes, seeds, the documented competence probabilities), :mod:`.content`
(topics and templates), :mod:`.suite` (instances, stores, split, native retrieval),
:mod:`.answerer` (agent side: memory format, prompt, scripted answerer), :mod:`.world` (world side:
grading, competence interface — the only reader of answer keys), :mod:`.executor` (the
``SetExecutor``; agent side), :mod:`.metrics`, :mod:`.analysis` (native retrieval report). The agent
side is marked (:data:`cfjax.types.AGENT_SIDE_MARKER`), so the answer-key guard watches it here too.
Imports run one way: config ← answerer ← world ← suite ← analysis; executor ← answerer.

Every figure produced with the executor is labelled "scripted answerer" (it is not an LLM).
"""

from cfjax.experiments.upliftmem.memsyco.answerer import SCRIPTED_ANSWERER_LABEL, ScriptedAnswerer, parse_tail
from cfjax.experiments.upliftmem.memsyco.config import MemSycoConfig
from cfjax.experiments.upliftmem.memsyco.executor import MemSycoExecutor
from cfjax.experiments.upliftmem.memsyco.metrics import average_over_stores, metrics
from cfjax.experiments.upliftmem.memsyco.suite import SCENARIOS, STORES, MemSycoSuite, build_suite, native_retrieve
from cfjax.experiments.upliftmem.memsyco.world import DECISION_SCENARIOS, MemSycoKnowledge, MemSycoWorld
from cfjax.experiments.upliftmem.memsyco.analysis import native_retrieval_report

__all__ = ["MemSycoConfig", "MemSycoSuite", "MemSycoExecutor", "MemSycoWorld", "MemSycoKnowledge", "ScriptedAnswerer",
           "SCENARIOS", "STORES", "DECISION_SCENARIOS", "build_suite", "native_retrieve", "metrics",
           "average_over_stores", "native_retrieval_report", "parse_tail", "SCRIPTED_ANSWERER_LABEL", "split",
           "stores"]


def split(seed: int = 42, config: MemSycoConfig | None = None):
    """``(train, test)`` of the (cached) suite for ``config``: dialogue-grouped, stratified, 70:30."""
    return build_suite(config).split(seed=seed)


def stores(instance, config: MemSycoConfig | None = None):
    """``store name → memories`` of the instance's dialogue in the (cached) suite for ``config``."""
    return build_suite(config).stores(instance)

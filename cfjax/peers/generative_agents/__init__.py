"""Generative Agents (Park et al., UIST 2023) as a peer memory system: a memory stream of
observations and reflections retrieved by recency + importance + relevance, reflecting when summed
importance reaches 150 (CounterMem's Table 1 row GENERATIVE_AGENTS_REFLECT; ../shared/PEERS.md).

Its call kinds (:mod:`cfjax.peers.generative_agents.calls`: GA_IMPORTANCE, GA_QUESTIONS,
GA_INSIGHTS), its store (:mod:`cfjax.peers.generative_agents.memory`) and this one registration.
The default follows the repository's ``retrieve.py`` (rank decay 0.99, weights 0.5 / 3 / 2);
``GenerativeAgentsSystem(ctx, variant="paper")`` follows §4.1 (0.995 per step, equal weights).
"""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.generative_agents.calls import (GA_IMPORTANCE, GA_INSIGHTS, GA_QUESTIONS, SCRIPTED, Competence,
                                                  parse_importance, parse_insights, parse_questions)
from cfjax.peers.generative_agents.memory import GAConfig, GenerativeAgentsSystem, Node, retrieval_scores
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["GA_IMPORTANCE", "GA_QUESTIONS", "GA_INSIGHTS", "SCRIPTED", "Competence", "parse_importance",
           "parse_questions", "parse_insights", "GAConfig", "GenerativeAgentsSystem", "Node", "retrieval_scores",
           "INFO"]

#: the registration: a row of countermem run and antipersist run, a method of compare
INFO = MEMORY_SYSTEMS.register("generative_agents", MemorySystemInfo(
    "generative_agents", GenerativeAgentsSystem, show="revise", runners=("countermem", "antipersist", "compare"),
    table="table1", reference="none",
    why_not={"upliftmem": "UpliftMem's end-to-end table does not compare against Generative Agents (PEERS.md), "
                          "and its rows are switches of UpliftMem's own trainer (Table 2)"},
    description="Generative Agents memory stream: top-3 of recency+importance+relevance, reflections at 150 importance",
    paper="Park et al., Generative Agents (UIST 2023) §4.1-4.2; joonspk-research/generative_agents retrieve.py, "
          "reflect.py; papers/countermem.md Table 1 (GENERATIVE_AGENTS_REFLECT)", defaults=("countermem",)))

"""Voyager (Wang et al., 2023) as a peer memory system: a library of *verified* procedures keyed by a
model-written description (PEERS.md "Voyager"; CounterMem's Table 1 row, VOYAGER_SKILL).

Its call kinds (:mod:`cfjax.peers.voyager.calls`: VOYAGER_CRITIC, VOYAGER_DESCRIBE), its store
(:mod:`cfjax.peers.voyager.memory`) and this one registration. Defaults: the critic reads the
evaluator's feedback of the final attempt (``critic="feedback"``; ``"model"`` makes a critic call),
top-5 retrieval by similarity of the task (and, on retries, the failed attempt's feedback) to the skill
descriptions, a re-added name replaces its skill.
"""

from cfjax.memory import MemorySystemInfo
from cfjax.peers.voyager.calls import (COMPETENCE, VOYAGER_CRITIC, VOYAGER_DESCRIBE, CriticRequest, CriticResult,
                                       DescribeRequest, DescribeResult, VoyagerCompetence)
from cfjax.peers.voyager.memory import Skill, VoyagerSystem, render_skill
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["VOYAGER_CRITIC", "VOYAGER_DESCRIBE", "CriticRequest", "CriticResult", "DescribeRequest",
           "DescribeResult", "VoyagerCompetence", "COMPETENCE", "Skill", "VoyagerSystem", "render_skill", "INFO"]

#: the registration: a row of countermem run and antipersist run, a method of compare
INFO = MEMORY_SYSTEMS.register("voyager", MemorySystemInfo(
    "voyager", VoyagerSystem, show="revise", runners=("countermem", "antipersist", "compare"), table="table1",
    reference="none",
    why_not={"upliftmem": "Voyager is a row of CounterMem's Table 1, not of UpliftMem's end-to-end table, "
                          "whose rows are switches of UpliftMem's own trainer (Table 2)"},
    description="Voyager skill library: verified procedures keyed by a model-written description, top-5 shown",
    paper="Wang et al., Voyager (2023), §2.3; MineDojo/Voyager voyager/agents/skill.py, critic.py; "
          "papers/countermem.md App. D.8 (VOYAGER_SKILL)", defaults=("countermem",)))

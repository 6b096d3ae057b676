"""ExpeL (Zhao et al., AAAI 2024) as a memory-system plugin, in the reduced form CounterMem's Table 1
uses: its call kind (:mod:`cfjax.expel.calls`), its store (:mod:`cfjax.expel.memory`) and this one
registration. Nothing else in the tree names it."""

from cfjax.expel.calls import EXPEL_INSIGHT, InsightRequest, InsightResult, parse_lesson, render_insight, render_lesson
from cfjax.expel.memory import ExpeLMemory, ExpeLSystem
from cfjax.expel.pool import ExpeLOriginalSystem, InsightPool
from cfjax.expel.pool_calls import EXPEL_COMPARE, EXPEL_SUCCESSES
from cfjax.memory import MemorySystemInfo
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["EXPEL_INSIGHT", "InsightRequest", "InsightResult", "parse_lesson", "render_insight", "render_lesson",
           "ExpeLMemory", "ExpeLSystem", "INFO",
           "ExpeLOriginalSystem", "InsightPool", "EXPEL_COMPARE", "EXPEL_SUCCESSES", "INFO_ORIGINAL"]

#: the registration: a row of countermem run and antipersist run, a method of compare
INFO = MEMORY_SYSTEMS.register("expel", MemorySystemInfo(
    "expel", ExpeLSystem, show="revise", table="table1", reference="none",
    why_not={"upliftmem": "its recall is one lesson shown with the draft (REVISE_WITH_RECORD), not a memory set "
                          "the UpliftMem executor is shown, and Table 2's rows are ablations of UpliftMem's trainer"},
    description="ExpeL-style lessons from past trajectories, the most similar always shown (unchecked)",
    paper="Zhao et al., ExpeL (AAAI 2024); papers/countermem.md App. D.5", defaults=("countermem",)))

#: the original ExpeL (voted insight pool + few-shot successes): a row of antipersist run, a method of compare
INFO_ORIGINAL = MEMORY_SYSTEMS.register("expel_original", MemorySystemInfo(
    "expel_original", ExpeLOriginalSystem, show="revise", runners=("antipersist", "compare"), table="table1",
    reference="none",
    why_not={"countermem": "CounterMem's Table 1 uses the reduced ExpeL, row expel",
             "upliftmem": "UpliftMem's tables do not compare against ExpeL, and Table 2's rows are ablations of "
                          "UpliftMem's trainer"},
    description="the original ExpeL: an insight pool edited by ADD/EDIT/AGREE/REMOVE votes from failed/successful "
                "pairs and batches of 8 successes (at most 20 rules), shown with the 2 most similar successes",
    paper="Zhao et al., ExpeL (AAAI 2024) §4; LeapLabTHU/ExpeL agent/expel.py; papers/anti-persistence.md Table 1"))

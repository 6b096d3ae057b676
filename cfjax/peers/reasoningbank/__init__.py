"""ReasoningBank (Ouyang et al., 2025, arXiv 2509.25140) and its CounterMem variants as memory-system
plugins: four rows of ``countermem run`` (and methods of ``compare``) — the plain bank, MaTTS
parallel and sequential, and "+ verified feedback" (papers/countermem.md Fig. 2, 3, 7, 8). Its calls are
in :mod:`~cfjax.peers.reasoningbank.calls`, its store in :mod:`~cfjax.peers.reasoningbank.memory`."""

from __future__ import annotations

import functools

from cfjax.memory import MemorySystemInfo
from cfjax.peers.reasoningbank.calls import (RB_CONTRAST, RB_EXTRACT, RB_JUDGE, RB_RECHECK, Item, parse_items,
                                             render_items)
from cfjax.peers.reasoningbank.memory import ReasoningBankSystem
from cfjax.registry import MEMORY_SYSTEMS

__all__ = ["ReasoningBankSystem", "Item", "parse_items", "render_items", "RB_JUDGE", "RB_EXTRACT", "RB_CONTRAST",
           "RB_RECHECK", "INFOS"]

_WHY_NOT = {"upliftmem": "UpliftMem's Table 1 does not compare against ReasoningBank (../shared/PEERS.md); "
                         "run it with cfjax compare --methods reasoningbank",
            "antipersist": "Anti-Persistence's Table 1 does not compare against ReasoningBank; its update-after-"
                           "every-task protocol fits, so cfjax antipersist run --rows reasoningbank is refused only "
                           "to keep the paper's table; run it with cfjax compare --methods reasoningbank"}
_PAPER = "Ouyang et al., ReasoningBank (2025, arXiv 2509.25140); papers/countermem.md Fig. 2, 3, 7, 8"

#: row name → (constructor options, description)
_ROWS = {
    "reasoningbank": ({}, "ReasoningBank: LLM-judged success/failure items, top-1 past query's items shown"),
    "reasoningbank_matts": ({"scaling": "parallel", "k": 3},
                            "ReasoningBank + MaTTS parallel: 3 rollouts per source task, self-contrast items"),
    "reasoningbank_matts_seq": ({"scaling": "sequential", "k": 3},
                                "ReasoningBank + MaTTS sequential: 2 re-checks of each trajectory"),
    "reasoningbank_verified": ({"verified": True},
                               "ReasoningBank + verified feedback: the evaluator's labels and step outcomes"),
}

INFOS = {name: MEMORY_SYSTEMS.register(name, MemorySystemInfo(
    name, functools.partial(ReasoningBankSystem, **opts), show="revise",
    runners=("countermem", "compare"), table="table1", reference="none", why_not=_WHY_NOT,
    description=desc, paper=_PAPER)) for name, (opts, desc) in _ROWS.items()}

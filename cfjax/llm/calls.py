"""The agent loop's own model calls: draft, revise with a piece of memory, judge N candidates.

papers/countermem.md App. D.8 (DRAFT_ACTION, REVISE_WITH_RECORD), App. D.5 (BEST_OF_N_JUDGE). These
are the calls every base agent and every memory row makes through :mod:`cfjax.loop`, so they belong
to the driver's core vocabulary; a memory system's own calls (CounterMem's alternatives and
distillation, ExpeL's insight, UpliftMem's writer) are registered beside that system's code.

Each :class:`~cfjax.types.CallKind` pairs the template (:mod:`cfjax.llm.prompts`), the strict parser
and the scripted simulator's answer (:class:`cfjax.llm.scripted.ScriptedBackbone`), and is served by
any backbone through ``backbone.call(kind, request)``:

>>> from cfjax.llm.calls import DRAFT_ACTION
>>> result = backbone.call(DRAFT_ACTION, DraftRequest(task))   # doctest: +SKIP
>>> result.action, result.usage                                  # doctest: +SKIP
"""

from __future__ import annotations

from cfjax.llm import prompts
from cfjax.registry import CALLS
from cfjax.types import CallKind, DraftRequest, DraftResult, JudgeRequest, JudgeResult, ReviseRequest, \
    ReviseResult, Usage

__all__ = ["DRAFT_ACTION", "REVISE_WITH_RECORD", "BEST_OF_N_JUDGE"]


def _parse_draft(text: str, req: DraftRequest, usage: Usage) -> DraftResult:
    return DraftResult(prompts.parse_action(text), usage, text, prompts.parse_applied(text))


def _scripted_draft(sim, req: DraftRequest) -> str:
    action, applied = sim.draft(req)
    text = prompts.format_action(action, req.task.domain)
    return text + ("\nAPPLIED: " + ", ".join(applied) if applied else "")


def _parse_revise(text: str, req: ReviseRequest, usage: Usage) -> ReviseResult:
    return ReviseResult(prompts.parse_action(text, default=req.draft), usage, text)


def _parse_judge(text: str, req: JudgeRequest, usage: Usage) -> JudgeResult:
    k = prompts.parse_choice(text, len(req.candidates))
    return JudgeResult(0 if k is None else k, k is not None, usage, text)


#: DRAFT_ACTION: the memory-free draft â_t, or a draft under shown memory (``DraftRequest.memory``)
DRAFT_ACTION: CallKind[DraftRequest, DraftResult] = CALLS.register(prompts.DRAFT_ACTION, CallKind(
    prompts.DRAFT_ACTION, prompts.render_draft, _parse_draft, _scripted_draft,
    "draft one action (optionally under shown memory)"))

#: REVISE_WITH_RECORD: the draft and one piece of memory (a record, a lesson, guidance) → an action
REVISE_WITH_RECORD: CallKind[ReviseRequest, ReviseResult] = CALLS.register(prompts.REVISE_WITH_RECORD, CallKind(
    prompts.REVISE_WITH_RECORD, prompts.render_revise, _parse_revise,
    lambda sim, req: prompts.format_action(sim.revise(req), req.task.domain),
    "revise a draft with one piece of memory"))

#: BEST_OF_N_JUDGE: pick one of N candidates without executing any
BEST_OF_N_JUDGE: CallKind[JudgeRequest, JudgeResult] = CALLS.register(prompts.BEST_OF_N_JUDGE, CallKind(
    prompts.BEST_OF_N_JUDGE, prompts.render_judge, _parse_judge, lambda sim, req: sim.judge(req),
    "choose one of N candidate actions"))

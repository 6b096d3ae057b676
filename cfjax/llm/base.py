"""The ``Backbone`` protocol: the four calls CounterMem makes of an executor.

Every backbone — a real LLM behind an OpenAI-compatible server or the
seeded scripted simulator — is driven through the *same* rendered prompts
and the *same* parsers (``cfjax.llm.prompts``, papers/countermem.md App. D.8):
a :class:`TextBackbone` renders the template, obtains a completion from
``_complete`` and parses it. Token accounting therefore counts identical
prompt text for every backbone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from cfjax.llm import prompts
from cfjax.types import (AlternativesRequest, AlternativesResult, Attempt, Backbone, Completion, DistilRequest,
                         DistilResult, DraftRequest, DraftResult, InsightRequest, InsightResult, JudgeRequest,
                         JudgeResult, MemoryResult, ReviseMemoryRequest, ReviseRequest, ReviseResult, Usage,
                         WriteMemoryRequest)

__all__ = [
    "Usage",
    "Attempt",
    "DraftRequest",
    "AlternativesRequest",
    "DistilRequest",
    "ReviseRequest",
    "Completion",
    "DraftResult",
    "AlternativesResult",
    "DistilResult",
    "ReviseResult",
    "JudgeRequest",
    "JudgeResult",
    "InsightRequest",
    "InsightResult",
    "Backbone",
    "TextBackbone",
]


class TextBackbone(ABC):
    """Renders each template, asks ``_complete`` for text, parses the reply.

    Subclasses implement ``_complete(kind, prompt, req)``; ``kind`` is the
    template name, ``req`` the structured request (a simulator may read it,
    an HTTP client ignores it).
    """

    name: str = "text"

    @abstractmethod
    def _complete(self, kind: str, prompt: str, req: object) -> Completion: ...

    def draft_action(self, req: DraftRequest) -> DraftResult:
        prompt = prompts.render_draft(req)
        c = self._complete(prompts.DRAFT_ACTION, prompt, req)
        return DraftResult(prompts.parse_action(c.text), c.usage, c.text, prompts.parse_applied(c.text))

    def generate_local_alternatives(self, req: AlternativesRequest) -> AlternativesResult:
        prompt = prompts.render_alternatives(req)
        c = self._complete(prompts.GENERATE_LOCAL_ALTERNATIVES, prompt, req)
        edits = prompts.parse_edits(c.text, n_units=len(req.units), k=req.k)
        return AlternativesResult(tuple(edits), c.usage, c.text)

    def distil_record(self, req: DistilRequest) -> DistilResult:
        prompt = prompts.render_distil(req)
        c = self._complete(prompts.DISTIL_RECORD, prompt, req)
        situation, condition = prompts.parse_distil(c.text)
        return DistilResult(situation, condition, c.usage, c.text)

    def revise_with_record(self, req: ReviseRequest) -> ReviseResult:
        prompt = prompts.render_revise(req)
        c = self._complete(prompts.REVISE_WITH_RECORD, prompt, req)
        action = prompts.parse_action(c.text, default=req.draft)
        return ReviseResult(action, c.usage, c.text)

    def judge_candidates(self, req: JudgeRequest) -> JudgeResult:
        prompt = prompts.render_judge(req)
        c = self._complete(prompts.BEST_OF_N_JUDGE, prompt, req)
        k = prompts.parse_choice(c.text, len(req.candidates))
        return JudgeResult(0 if k is None else k, k is not None, c.usage, c.text)

    def extract_insight(self, req: InsightRequest) -> InsightResult:
        prompt = prompts.render_insight(req)
        c = self._complete(prompts.EXPEL_INSIGHT, prompt, req)
        return InsightResult(prompts.parse_lesson(c.text), c.usage, c.text)

    def write_memory(self, req: WriteMemoryRequest) -> MemoryResult:
        """WRITE_MEMORY (UpliftMem App. B.3): one memory candidate from a completed trajectory."""
        prompt = prompts.render_write_memory(req)
        c = self._complete(prompts.WRITE_MEMORY, prompt, req)
        return MemoryResult(prompts.parse_memory(c.text), c.usage, c.text)

    def revise_memory(self, req: ReviseMemoryRequest) -> MemoryResult:
        """REVISE_MEMORY (UpliftMem App. B.3, E.5): a revised candidate."""
        prompt = prompts.render_revise_memory(req)
        c = self._complete(prompts.REVISE_MEMORY, prompt, req)
        return MemoryResult(prompts.parse_memory(c.text), c.usage, c.text)

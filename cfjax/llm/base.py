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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cfjax.llm import prompts
from cfjax.suites.base import Task

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


@dataclass(frozen=True)
class Usage:
    """Tokens charged to one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)


@dataclass(frozen=True)
class Attempt:
    """One evaluated attempt earlier in the same task (part of the state s_t)."""

    action: str
    feedback: str
    score: float


@dataclass(frozen=True)
class DraftRequest:
    """DRAFT_ACTION: the memory-free draft â_t (Module III).

    ``sample`` distinguishes independent samples of the same decision (the
    scripted backbone keys its randomness on ``(task, episode, attempt,
    sample)``)."""

    task: Task
    history: Sequence[Attempt] = ()
    episode: int = 0
    sample: int = 0


@dataclass(frozen=True)
class AlternativesRequest:
    """GENERATE_LOCAL_ALTERNATIVES (Module I, Eq. 1): local edits of a failed
    action, each replacing exactly one decision unit."""

    task: Task
    history: Sequence[Attempt]
    action: str
    feedback: str
    units: Sequence[str]  # decision units of ``action``, indexed from 0
    k: int = 4
    episode: int = 0


@dataclass(frozen=True)
class DistilRequest:
    """DISTIL_RECORD (Module II): turn a verified contrast into (q, c)."""

    task: Task
    original: str
    improved: str
    unit_before: str
    unit_after: str
    evidence: str
    episode: int = 0


@dataclass(frozen=True)
class ReviseRequest:
    """REVISE_WITH_RECORD (Module III): exactly one rendered record."""

    task: Task
    history: Sequence[Attempt]
    draft: str
    record_text: str
    episode: int = 0
    sample: int = 0


@dataclass(frozen=True)
class Completion:
    """A raw completion and the tokens it cost."""

    text: str
    usage: Usage


@dataclass(frozen=True)
class DraftResult:
    action: str
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class AlternativesResult:
    """``edits`` are ``(unit_index, replacement_text)`` pairs in the fixed edit grammar."""

    edits: tuple[tuple[int, str], ...]
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class DistilResult:
    """``condition`` is condition-language text; ``"none"`` means universal."""

    situation: str
    condition: str
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class ReviseResult:
    action: str
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class JudgeRequest:
    """BEST_OF_N_JUDGE: pick one of N candidates without executing any (App. D.5)."""

    task: Task
    history: Sequence[Attempt]
    candidates: Sequence[str]
    episode: int = 0


@dataclass(frozen=True)
class JudgeResult:
    choice: int  # 0-based; 0 when the reply did not parse
    parsed: bool
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class InsightRequest:
    """EXPEL_INSIGHT: one lesson from a finished trajectory (the ExpeL baseline)."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool
    episode: int = 0


@dataclass(frozen=True)
class InsightResult:
    lesson: str  # "" for none
    usage: Usage
    raw: str = ""


@runtime_checkable
class Backbone(Protocol):
    """What CounterMem asks of an executor (papers/countermem.md App. D.8)."""

    name: str

    def draft_action(self, req: DraftRequest) -> DraftResult: ...

    def generate_local_alternatives(self, req: AlternativesRequest) -> AlternativesResult: ...

    def distil_record(self, req: DistilRequest) -> DistilResult: ...

    def revise_with_record(self, req: ReviseRequest) -> ReviseResult: ...

    def judge_candidates(self, req: JudgeRequest) -> JudgeResult: ...

    def extract_insight(self, req: InsightRequest) -> InsightResult: ...


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
        return DraftResult(prompts.parse_action(c.text), c.usage, c.text)

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

"""Text backbones: one generic call, ``call(kind, request) → result``.

Every backbone — a real LLM behind an OpenAI-compatible server, a local transformers model or the
seeded scripted simulator — is driven through the *same* rendered prompts and the *same* parsers:
a :class:`~cfjax.types.CallKind` (registered by the system that makes the call: the agent loop's in
:mod:`cfjax.llm.calls`, CounterMem's in ``cfjax.countermem.calls``, …) renders the template, a
:class:`TextBackbone` obtains a completion from ``_complete`` and the kind parses it. Token
accounting therefore counts identical prompt text for every backbone, and adding a memory system
with new calls changes no backbone.

Every text backbone can share an on-disk response cache
(:class:`cfjax.llm.cache.ResponseCache`): set ``backbone.cache`` and implement
:meth:`TextBackbone.cache_identity`; the base class consults the cache around
``_complete`` (see :meth:`TextBackbone._call`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from typing import TypeVar

from cfjax.types import (Attempt, Backbone, CallKind, Completion, DraftRequest, DraftResult, JudgeRequest,
                         JudgeResult, ReviseRequest, ReviseResult, Usage)

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.llm.cache import ResponseCache

__all__ = [
    "Usage",
    "Attempt",
    "DraftRequest",
    "ReviseRequest",
    "Completion",
    "DraftResult",
    "ReviseResult",
    "JudgeRequest",
    "JudgeResult",
    "Backbone",
    "CallKind",
    "TextBackbone",
    "CACHE_IDENTITY_KEYS",
]

Req = TypeVar("Req")
Res = TypeVar("Res")

#: Keys every :meth:`TextBackbone.cache_identity` must contain.
CACHE_IDENTITY_KEYS = ("backend", "model", "temperature", "seed")


class TextBackbone(ABC):
    """Renders each template, asks ``_complete`` for text, parses the reply.

    Subclasses implement ``_complete(kind, prompt, req)``; ``kind`` is the
    template name, ``req`` the structured request (a simulator may read it,
    an HTTP client ignores it). Every call goes through :meth:`_call`, which
    adds the response cache.

    **Cache contract** (for every subclass, e.g. the OpenAI client and the
    local transformers backbone):

    - ``cache`` (attribute, default ``None``): a
      :class:`~cfjax.llm.cache.ResponseCache`; ``None`` = no caching.
    - ``cache_force`` (attribute, default ``False``): use the cache even when
      the backbone samples (temperature > 0). Off by default because a sampled
      reply is one draw; replaying it makes every rerun the same draw.
    - :meth:`cache_identity` returns ``None`` when the backbone's replies are
      not a function of the prompt and its settings (the scripted simulator
      reads ``req``; the default is ``None``), and otherwise a JSON-encodable
      dict that, together with the full prompt, determines the reply: at
      least ``backend`` (e.g. ``"openai"``, ``"hf"``), ``model`` (the model
      name or path), ``temperature``, ``seed`` (``None`` when unseeded), and
      every other sampling parameter that changes the reply (``max_tokens``,
      ``top_p``, the chat template's name, ...). It must not contain secrets
      or the server address (the same model served elsewhere shares entries).
    - ``_complete`` must mark a call that produced no usable reply with
      ``usage.failed = 1``; such completions are never stored.
    - When sampling (forced), the request's ``sample`` index (``DraftRequest.sample``) joins the
      key, so the N drafts of Best-of-N stay N different draws.
    - A hit returns the stored text **and the original usage** (the method's
      cost is unchanged); subclasses may count hits by overriding
      :meth:`_cache_hit`.
    """

    name: str = "text"
    cache: ResponseCache | None = None
    cache_force: bool = False

    @abstractmethod
    def _complete(self, kind: str, prompt: str, req: object) -> Completion: ...

    def cache_identity(self) -> dict[str, Any] | None:
        """What, besides the prompt, determines a reply; ``None`` = not cacheable (the default)."""
        return None

    def _cache_hit(self, kind: str, completion: Completion) -> None:
        """Called after a reply was served from the cache (a hook for counters; the default does nothing)."""

    def _call(self, kind: str, prompt: str, req: object) -> Completion:
        """``_complete`` behind the response cache (when one is set and the backbone is cacheable).

        Raises:
          ValueError: ``cache_identity()`` breaks the contract (a required key is missing).
        """
        cache = self.cache
        identity = self.cache_identity() if cache is not None else None
        if cache is None or identity is None:
            return self._complete(kind, prompt, req)
        missing = [k for k in CACHE_IDENTITY_KEYS if k not in identity]
        if missing:
            raise ValueError(f"{type(self).__name__}.cache_identity() lacks {', '.join(missing)} "
                             f"(required: {', '.join(CACHE_IDENTITY_KEYS)})")
        temperature = identity["temperature"]
        sampling = temperature is not None and float(temperature) > 0
        if sampling and not self.cache_force:
            return self._complete(kind, prompt, req)
        if sampling:  # independent samples of one prompt (Best-of-N drafts) must not share an entry
            identity = {**identity, "sample": getattr(req, "sample", 0)}
        key = cache.key(identity, prompt)
        hit = cache.get(key)
        if hit is not None:
            self._cache_hit(kind, hit)
            return hit
        c = self._complete(kind, prompt, req)
        if not c.usage.failed:
            cache.put(key, c)
        return c

    def call(self, kind: CallKind[Req, Res], req: Req) -> Res:
        """The one generic call: render ``kind``'s template for ``req``, complete it (behind the
        response cache), parse the reply into ``kind``'s result. Every backbone serves every
        registered call kind this way; none needs an edit when a memory system adds a kind."""
        prompt = kind.render(req)
        c = self._call(kind.name, prompt, req)
        return kind.parse(c.text, req, c.usage)

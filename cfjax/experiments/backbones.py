"""Which backbone a run uses, how it is built in every worker, and what it reports.

:class:`BackboneSpec` is the picklable recipe every runner (CounterMem, Anti-Persistence,
UpliftMem, compare, sweep) hands its worker processes or Ray tasks: the scripted simulator, an
OpenAI-compatible server (:mod:`cfjax.llm.openai_client`) or a local transformers model
(:mod:`cfjax.llm.hf`), with the response cache, the tokenizer and the calls in flight.
:func:`backbone_spec` turns ``--backbone`` and its flags into one; :func:`backbone_stats` reads
an LLM backbone's transport and cache counters for ``results.json``. ``BackboneSpec.agent`` names
the base agent (:mod:`cfjax.agents`: ``react``, ``reflexion``) that drives the backbone within a
task; :func:`resolve_agents` checks ``--agent`` values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.config import CounterMemConfig
from cfjax.domains.base import Suite
from cfjax.llm.base import Backbone

__all__ = ["BackboneSpec", "backbone_spec", "backbone_stats", "default_cache_path", "default_workers", "agent_title",
           "resolve_agents"]


@dataclass(frozen=True)
class BackboneSpec:
    """A picklable recipe for a unit's backbone (worker processes rebuild it).

    ``cache_path`` names the on-disk response cache an LLM backbone shares across rows, units and
    reruns (:class:`cfjax.llm.cache.ResponseCache`; ``None``: no cache); ``tokenizer`` a Hugging
    Face tokenizer folder the OpenAI client counts tokens with when the server reports no usage."""

    kind: str = "scripted"  # "scripted" | "openai" | "hf"
    openai: object | None = None  # cfjax.llm.openai_client.OpenAIConfig
    hf: object | None = None  # cfjax.llm.hf.HFConfig (a local transformers model)
    cache_path: str | None = None
    tokenizer: str | None = None
    inflight: int = 1  # independent calls a unit keeps in flight (threads); 1 for the simulator
    cache_force: bool = False  # cache replies even at temperature > 0 (they stop being fresh samples)
    agent: str = "react"  # the base agent (cfjax.registry.AGENTS): how the backbone is driven within a task

    def make(self, suite: Suite, seed: int, config: CounterMemConfig, *, transport: object | None = None) -> Backbone:
        """The unit's backbone, wrapped by the base agent ``agent`` (:mod:`cfjax.agents`; ``react``: as is).

        ``transport`` (an :class:`cfjax.llm.openai_client.SharedTransport`) puts an OpenAI backbone on
        a client and in-flight limit shared with other units of the process (ignored otherwise)."""
        from cfjax.registry import AGENTS

        return AGENTS.get(self.agent).wrap(self._make(suite, seed, config, transport))

    def _make(self, suite: Suite, seed: int, config: CounterMemConfig, transport: object | None = None) -> Backbone:
        if self.kind == "scripted":
            from cfjax.llm.scripted import ScriptedBackbone

            return ScriptedBackbone(suite.scripted_domain(), dataclasses.replace(config.scripted, seed=seed))
        if self.kind == "openai":
            from cfjax.llm.openai_client import OpenAIBackbone

            count = None
            if self.tokenizer:
                from cfjax.llm.tokens import hf_token_counter

                count = hf_token_counter(self.tokenizer)
            bb = OpenAIBackbone(dataclasses.replace(self.openai, seed=seed), count_tokens=count,  # type: ignore
                                transport=transport)  # type: ignore[arg-type]
        elif self.kind == "hf":
            from cfjax.llm.hf import HFBackbone

            bb = HFBackbone(dataclasses.replace(self.hf, seed=seed))  # type: ignore[type-var]
        else:
            raise ValueError(f"unknown backbone kind {self.kind!r} (scripted | openai | hf)")
        if self.cache_path:
            from cfjax.llm.cache import ResponseCache

            bb.cache = ResponseCache(self.cache_path)
            bb.cache_force = self.cache_force
        if transport is None and getattr(bb, "max_inflight", None) != self.inflight:
            bb.max_inflight = self.inflight  # the unit's threads (cfjax.infra.concurrency.inflight_of)
        return bb

    @property
    def label(self) -> str:
        """What reports print: the backbone, then the base agent unless it is ReAct (so a ReAct run's
        label is what it was before agents were an axis)."""
        return self.backbone_label + ("" if self.agent == "react" else f", base agent {agent_title(self.agent)}")

    @property
    def backbone_label(self) -> str:
        """The backbone alone (no base agent)."""
        if self.kind == "scripted":
            from cfjax.llm.scripted import SCRIPTED_LABEL

            return SCRIPTED_LABEL
        if self.kind == "hf":
            return f"local transformers model {getattr(self.hf, 'path', '?')}"
        return f"LLM {getattr(self.openai, 'model', '?')} at {getattr(self.openai, 'base_url', '?')}"

    @property
    def max_inflight(self) -> int:
        """Calls this backbone wants in flight (1 for the CPU-bound simulator)."""
        return self.inflight


def agent_title(name: str) -> str:
    """How reports name a base agent (``"reflexion"`` → ``"Reflexion"``)."""
    from cfjax.registry import AGENTS

    return AGENTS.get(name).title


def resolve_agents(names: str | Sequence[str] | None) -> tuple[str, ...]:
    """``--agent`` values checked against :data:`cfjax.registry.AGENTS` (duplicates dropped, order kept;
    ``None`` or empty: ``("react",)``).

    Raises:
      cfjax.config.ConfigError: an unknown agent (one line naming the registered ones).
    """
    from cfjax.config import ConfigError
    from cfjax.registry import AGENTS, UnknownPluginError

    names = [names] if isinstance(names, str) else list(names or ["react"])
    for n in names:
        try:
            AGENTS.get(n)
        except UnknownPluginError as e:
            raise ConfigError(f"--agent: {e}") from None
    return tuple(dict.fromkeys(names))


def backbone_stats(bb: object) -> dict | None:
    """An LLM backbone's transport and cache counters (``None`` for the simulator), JSON-ready."""
    stats = getattr(bb, "stats", None)
    if stats is None:
        return None
    s = stats()
    out = s.as_dict() if hasattr(s, "as_dict") else dict(s)
    cache = getattr(bb, "cache", None)
    if cache is not None and hasattr(cache, "stats"):
        cs = cache.stats()
        out["cache"] = cs.as_dict() if hasattr(cs, "as_dict") else dict(cs)
    return out


def default_workers(spec: BackboneSpec) -> int:
    """Worker processes over units: ``min(2, CPUs)`` for the CPU-bound simulator; 1 for an LLM
    backbone, whose unit already keeps ``max_inflight`` calls in flight (more processes would
    multiply the requests the server sees)."""
    import os

    return min(2, os.cpu_count() or 1) if spec.kind == "scripted" else 1


def default_cache_path() -> str:
    """Where LLM responses are cached unless ``--cache``/``--no-cache`` says otherwise:
    ``$CFJAX_CACHE_DIR/responses.sqlite``, else ``~/.cache/cfjax/responses.sqlite``."""
    import os

    root = os.environ.get("CFJAX_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cfjax")
    return os.path.join(root, "responses.sqlite")


def backbone_spec(kind: str = "scripted", *, base_url: str | None = None, model: str | None = None,
                  max_inflight: int | None = None, cache: str | bool | None = None,
                  tokenizer: str | None = None, max_new_tokens: int | None = None,
                  cache_force: bool = False) -> BackboneSpec:
    """The :class:`BackboneSpec` of ``--backbone``.

    * ``scripted`` — the seeded simulator;
    * ``openai`` — an OpenAI-compatible server configured from the environment
      (``CFJAX_LLM_BASE_URL``, ``CFJAX_LLM_MODEL``), ``base_url`` / ``model`` overriding it;
    * ``hf:PATH`` — a local transformers model folder (never downloaded).

    ``max_inflight`` bounds the calls in flight (default :data:`DEFAULT_MAX_INFLIGHT`); ``cache``
    is a cache file, ``False`` for none, ``None`` for :func:`default_cache_path` (the cache itself
    stays off at temperature > 0 unless ``cache_force``); ``tokenizer`` names a tokenizer folder for
    exact token counts with the OpenAI client."""
    from cfjax.infra.concurrency import DEFAULT_MAX_INFLIGHT

    if kind == "scripted":
        return BackboneSpec("scripted")
    inflight = max_inflight or DEFAULT_MAX_INFLIGHT
    cache_path = None if cache is False else (cache if isinstance(cache, str) else default_cache_path())
    if kind == "openai":
        from cfjax.llm.openai_client import OpenAIConfig

        overrides = {k: v for k, v in (("base_url", base_url), ("model", model)) if v}
        return BackboneSpec("openai", OpenAIConfig.from_env(max_inflight=inflight, **overrides),
                            cache_path=cache_path, tokenizer=tokenizer, inflight=inflight, cache_force=cache_force)
    if kind.startswith("hf:") and len(kind) > 3:
        from cfjax.llm.hf import HFConfig

        extra = {"max_new_tokens": max_new_tokens} if max_new_tokens else {}
        return BackboneSpec("hf", hf=HFConfig(kind[3:], **extra), cache_path=cache_path, inflight=inflight,
                            cache_force=cache_force)
    raise ValueError(f"unknown backbone {kind!r} (scripted | openai | hf:PATH to a local transformers model)")

"""Transport: one generic model call, ``backbone.call(kind, request) → result``, for every backbone.

Import public names from here (``from cfjax.llm import DRAFT_ACTION, ScriptedBackbone``); the modules
stay importable. Names load lazily (PEP 562): ``import cfjax.llm`` imports none of the clients.

- :mod:`cfjax.llm.calls` — the agent loop's call kinds: DRAFT_ACTION, REVISE_WITH_RECORD, BEST_OF_N_JUDGE
  (a memory system's own kinds live with it, e.g. :mod:`cfjax.countermem.calls`)
- :mod:`cfjax.llm.base` — :class:`TextBackbone` (render → complete → parse, behind the response cache)
  and the typed requests and results
- :mod:`cfjax.llm.scripted` — the seeded scripted backbone (a simulator, not an LLM; :data:`SCRIPTED_LABEL`)
- :mod:`cfjax.llm.openai_client` — any OpenAI-compatible server (:class:`OpenAIBackbone`, :class:`OpenAIConfig`)
- :mod:`cfjax.llm.hf` — a local transformers model (:class:`HFBackbone`, :class:`HFConfig`)
- :mod:`cfjax.llm.cache` — the on-disk response cache (:class:`ResponseCache`)
- :mod:`cfjax.llm.prompts` — templates and the strict line grammars (``EDIT:``, ``RULE``, ``APPLIED:``)
- :mod:`cfjax.llm.tokens`, :mod:`cfjax.llm.sanitize` — token counting, reply cleaning

``DRAFT_ACTION`` here is the :class:`~cfjax.types.CallKind` (``cfjax.llm.calls``); the template *name*
of the same spelling is ``cfjax.llm.prompts.DRAFT_ACTION``.
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".calls": ["DRAFT_ACTION", "REVISE_WITH_RECORD", "BEST_OF_N_JUDGE"],
    ".base": ["TextBackbone", "CACHE_IDENTITY_KEYS", "Completion", "DraftRequest", "DraftResult", "ReviseRequest",
              "ReviseResult", "JudgeRequest", "JudgeResult"],
    ".scripted": ["ScriptedBackbone", "ScriptedDomain", "ScriptedConfig", "SCRIPTED_LABEL", "stable_seed"],
    ".openai_client": ["OpenAIBackbone", "OpenAIConfig", "LLMError", "CallStats", "ENV_VARS", "FAULT_KINDS"],
    ".hf": ["HFBackbone", "HFConfig", "HFDependencyError"],
    ".tokens": ["HFModelError", "TokenCounter", "hf_token_counter"],
    ".cache": ["ResponseCache", "CacheStats"],
    ".prompts": ["parse_memory_lines", "MemoryLines", "render_memory_set", "split_memory_set", "render_record",
                 "render_rule", "parse_rule_lines", "parse_edit_line", "parse_action", "format_action",
                 "count_tokens", "FACTUAL_NOTES_HEADER"],
    ".sanitize": ["sanitize_reply", "clean_text"],
}, modules=("prompts",))
del lazy_exports

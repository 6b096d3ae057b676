"""cfjax: a JAX learning core for agent memory.

The top level holds the shared vocabulary every layer speaks (:mod:`cfjax.types`), the plugin
registries (:mod:`cfjax.registry`) and the memory-system protocol (:mod:`cfjax.memory`)::

    from cfjax import Task, Outcome, World, Backbone, MEMORY_SYSTEMS

``import cfjax`` is cheap: every name here is a lazy re-export (PEP 562), imported on first use
(:mod:`cfjax.types` and :mod:`cfjax.registry` use the standard library only; :mod:`cfjax.memory`
brings the agent loop and NumPy); nothing here imports JAX. Each method and layer is a package with
its own public API: :mod:`cfjax.countermem`, :mod:`cfjax.antipersist`, :mod:`cfjax.uplift`,
:mod:`cfjax.expel`, :mod:`cfjax.llm`, :mod:`cfjax.domains`, :mod:`cfjax.config`, :mod:`cfjax.infra`,
:mod:`cfjax.kernels`, :mod:`cfjax.experiments` (README.md, "Python API").
"""

from cfjax.infra._lazy import lazy_exports
from cfjax.infra._shadow import install as _install_kernels_shadow_guard

_install_kernels_shadow_guard()  # transformers >= 5 imports Hugging Face's `kernels`: see cfjax/infra/_shadow.py
del _install_kernels_shadow_guard

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    # the shared vocabulary
    "cfjax.types": ["Task", "Outcome", "Attempt", "Usage", "MemoryText", "World", "EditModel", "Backbone", "CallKind",
                    "DomainInfo", "Domain", "Language", "AnswerKey", "Splits", "Unit", "EditError",
                    "answer_key_guard"],
    # the plugin registries
    "cfjax.registry": ["DOMAINS", "MEMORY_SYSTEMS", "ROWS", "CALLS", "AGENTS", "Registry", "load_plugins",
                       "UnknownPluginError", "DuplicatePluginError"],
    # the memory-system protocol
    "cfjax.memory": ["MemorySystem", "MemorySystemInfo", "Experience", "RecallQuery", "SystemContext",
                     "FrozenMemoryError"],
})
del lazy_exports

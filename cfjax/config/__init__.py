"""One frozen, typed, TOML-round-tripping configuration per method, with the papers' defaults.

Every field cites the paper section its default comes from, or says that the
paper is silent and what we chose.

* :mod:`cfjax.config.countermem` — CounterMem (:class:`CounterMemConfig` and its sections)
* :mod:`cfjax.config.antipersist` — Anti-Persistence (:class:`APConfig`, :class:`SynthesisConfig`)
* :mod:`cfjax.config.uplift` — UpliftMem (:class:`UpliftConfig` and its sections)
* :mod:`cfjax.config.scripted` — the scripted backbone's competence (:class:`ScriptedConfig`)
* kernel configs, defined in :mod:`cfjax.kernels` (which never imports ``cfjax``) and re-exported
  here: :class:`DQNConfig`, :class:`BanditConfig`, :class:`UpliftLossConfig`
* :mod:`cfjax.config.presets` — ``--quick`` as frozen presets (:data:`QUICK`, :data:`AP_QUICK`, :func:`quick`)
* :mod:`cfjax.config._toml` — :func:`to_dict` / :func:`from_dict` (type-checked) /
  :func:`save_toml` / :func:`load_toml`, and :class:`ConfigError`
* :mod:`cfjax.config.overrides` — :func:`apply_overrides` (``--set section.key=value``, checked
  by the TOML loader's :func:`from_dict`) and :func:`set_keys` (already-parsed dotted keys)

``OpenAIConfig`` (connection settings, :mod:`cfjax.llm.openai_client`) is
re-exported lazily: ``cfjax.config`` imports only ``cfjax.kernels``,
``cfjax.infra`` and its own modules at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cfjax.config._toml import ConfigError, dumps_toml, from_dict, load_toml, save_toml, to_dict
from cfjax.config.antipersist import APConfig, SynthesisConfig
from cfjax.config.countermem import (AgentConfig, CounterMemConfig, ExperimentConfig, GeneratorConfig,
                                     RetrievalConfig, StoreConfig)
from cfjax.config.overrides import apply_overrides, parse_override, set_keys
from cfjax.config.presets import AP_QUICK, QUICK, APQuick, CounterMemQuick, quick
from cfjax.config.scripted import ScriptedConfig
from cfjax.config.uplift import (ProbingSection, RetrievalSection, ScorerSection, TrainingSection, UpliftConfig,
                                 UtilitySection, UtilitySpec)
from cfjax.infra._lazy import lazy_exports
from cfjax.kernels.bandit import BanditConfig
from cfjax.kernels.dqn import DQNConfig
from cfjax.kernels.setscore import UpliftLossConfig

if TYPE_CHECKING:  # pragma: no cover
    from cfjax.llm.openai_client import OpenAIConfig

__all__ = [
    # CounterMem
    "StoreConfig",
    "RetrievalConfig",
    "GeneratorConfig",
    "AgentConfig",
    "ExperimentConfig",
    "CounterMemConfig",
    # Anti-Persistence
    "APConfig",
    "SynthesisConfig",
    # UpliftMem
    "UpliftConfig",
    "UtilitySpec",
    "UtilitySection",
    "RetrievalSection",
    "ScorerSection",
    "TrainingSection",
    "ProbingSection",
    # scripted backbone, kernels, LLM client
    "ScriptedConfig",
    "DQNConfig",
    "BanditConfig",
    "UpliftLossConfig",
    "OpenAIConfig",
    # presets
    "CounterMemQuick",
    "APQuick",
    "QUICK",
    "AP_QUICK",
    "quick",
    # I/O
    "ConfigError",
    "to_dict",
    "from_dict",
    "dumps_toml",
    "save_toml",
    "load_toml",
    "apply_overrides",
    "parse_override",
    "set_keys",
]

# lazily: cfjax.llm imports cfjax.config, not the other way round
__getattr__, __dir__, _ = lazy_exports(__name__, {"cfjax.llm.openai_client": ["OpenAIConfig"]})
del lazy_exports, _

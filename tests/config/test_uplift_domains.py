"""UpliftMem's per-domain constants come from the registered domains (issue 21, item 5).

``UtilitySection.get`` / ``RetrievalSection.k_for`` read each domain's DomainInfo; a config overrides
them with ``[utility.<domain>]`` subtables (the layout configs had when the section held one field per
suite, so those files still load and override) and ``[retrieval.k_cap]``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cfjax.config import ConfigError, UpliftConfig, dumps_toml, from_dict, load_toml, save_toml, to_dict
from cfjax.config.uplift import RetrievalSection, UtilitySection, UtilitySpec

#: the [utility] and [retrieval] of a config.toml written before the domains declared their constants
LEGACY = """
[utility.sql]
gamma = 0.2
rho = 1.0
c_max = 2.0
cost = "attempts"

[utility.sat]
gamma = 0.2
rho = 1.0
c_max = 2.0
cost = "attempts"

[utility.pybugs]
gamma = 0.2
rho = 1.0
c_max = 600.0
cost = "memory_tokens"

[utility.memsyco]
gamma = 0.2
rho = 1.0
c_max = 800.0
cost = "memory_tokens"

[utility.synthetic]
gamma = 0.0
rho = 1.0
c_max = 2.0
cost = "attempts"

[retrieval]
recall = 50
width = 2
k_default = 5
k_code = 3
"""


def _load(tmp_path: Path, text: str) -> UpliftConfig:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return load_toml(UpliftConfig, p)


def test_a_config_written_before_the_registry_loads_as_the_defaults(tmp_path):
    assert _load(tmp_path, LEGACY) == UpliftConfig()


def test_default_and_overridden_configs_round_trip(tmp_path):
    over = dataclasses.replace(
        UpliftConfig(),
        utility=UtilitySection(overrides={"pybugs": UtilitySpec(gamma=0.3, c_max=500.0, cost="memory_tokens")},
                               memsyco=UtilitySpec(gamma=0.1)),
        retrieval=RetrievalSection(k_cap={"sql": 4}, k_default=6))
    for cfg in (UpliftConfig(), over):
        save_toml(cfg, tmp_path / "u.toml")
        back = load_toml(UpliftConfig, tmp_path / "u.toml")
        assert back == cfg and hash(back) == hash(cfg)
        assert from_dict(UpliftConfig, to_dict(cfg)) == cfg
    text = dumps_toml(over)
    assert "[utility.pybugs]" in text and "[utility.overrides" not in text and "[retrieval.k_cap]\nsql = 4" in text


def test_a_utility_subtable_overrides_only_the_keys_it_gives(tmp_path):
    cfg = _load(tmp_path, "[utility.pybugs]\ngamma = 0.5\n[utility.sql]\nc_max = 3\n")
    assert cfg.utility.get("pybugs") == UtilitySpec(gamma=0.5, c_max=600.0, cost="memory_tokens")
    assert cfg.utility.get("sql") == UtilitySpec(c_max=3.0)
    assert cfg.utility.get("sat") == UtilitySpec()


def test_k_cap_overrides_a_domain_and_legacy_k_code_still_means_the_python_tasks(tmp_path):
    cfg = _load(tmp_path, "[retrieval.k_cap]\nsat = 2\n")
    assert [cfg.retrieval.k_for(x) for x in ("sql", "python", "sat", "smt", "memsyco")] == [5, 3, 2, 2, 5]
    cfg = _load(tmp_path, "[retrieval]\nk_code = 4\n")
    assert cfg.retrieval.k_cap == {"pybugs": 4} and cfg.retrieval.k_for("python") == 4
    assert cfg.retrieval.k_for("sql") == 5


@pytest.mark.parametrize("text,needle", [
    ("[utility.nope]\ngamma = 1\n",
     "unknown config key 'utility.nope'; valid keys in [utility] (UtilitySection): memsyco, synthetic, or a "
     "registered domain (sql, pybugs, sat"),
    ("[utility.sql]\ngamma = \"x\"\n", "config key 'utility.sql.gamma': expected float, got str \"x\""),
    ("[utility]\nsql = 3\n", "config key 'utility.sql': expected a table (UtilitySpec), got int 3"),
    ("[utility.sql]\ncost = \"coins\"\n", "[utility.sql]: UtilitySpec.cost must be"),
    ("[retrieval.k_cap]\nnope = 3\n", "RetrievalSection.k_cap: unknown domain 'nope'"),
    ("[retrieval.k_cap]\nsql = \"x\"\n", "config key 'retrieval.k_cap.sql': expected int, got str \"x\""),
    ("[retrieval.k_cap]\nsql = 0\n", "RetrievalSection.k_cap must map domains to ints ≥ 1"),
])
def test_bad_domain_constants_are_one_line_naming_the_key(tmp_path, text, needle):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, text)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_set_overrides_reach_a_domain_subtable():
    from cfjax.config.overrides import apply_overrides

    cfg = apply_overrides(UpliftConfig(), ["utility.pybugs.gamma=0.3", "retrieval.k_cap.pybugs=4"])
    assert cfg.utility.get("pybugs") == UtilitySpec(gamma=0.3, c_max=600.0, cost="memory_tokens")
    assert cfg.retrieval.k_for("python") == 4


def test_overrides_name_registered_domains_only():
    with pytest.raises(ValueError, match="unknown domain 'nope'"):
        UtilitySection(overrides={"nope": UtilitySpec()})
    with pytest.raises(ValueError, match="unknown domain 'nope'"):
        RetrievalSection(k_cap={"nope": 3})

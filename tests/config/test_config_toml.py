"""cfjax.config: every method's config round-trips through TOML and is checked key by key on load."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cfjax.config import (APConfig, BanditConfig, ConfigError, CounterMemConfig, DQNConfig, OpenAIConfig,
                          ScriptedConfig, StoreConfig, SynthesisConfig, UpliftLossConfig, dumps_toml, from_dict,
                          load_toml, save_toml, to_dict)

# a non-default value in every section of every method's config
COUNTERMEM = dataclasses.replace(
    CounterMemConfig(),
    store=dataclasses.replace(StoreConfig(), capacity=17, retention="recency", rho=0.5),
    retrieval=dataclasses.replace(CounterMemConfig().retrieval, k=5, use_conditions=False),
    generator=dataclasses.replace(CounterMemConfig().generator, k_alternatives=2, verify=False),
    agent=dataclasses.replace(CounterMemConfig().agent, max_attempts=3, construction_reference="previous_attempt"),
    dqn=dataclasses.replace(DQNConfig(), total_decisions=300, hidden=(32, 16, 8), lr=3e-4),
    scripted=dataclasses.replace(ScriptedConfig(), seed=7, p_error=0.25),
    experiment=dataclasses.replace(CounterMemConfig().experiment, best_of_n=3, accumulation_checkpoints=(0, 5)),
    seeds=(4, 5), split_seeds=(1, 3), selector_seeds=(7,), world_feedback="rich", n_val=7, world_timeout_s=0.5,
)
ANTIPERSIST = dataclasses.replace(
    APConfig(), iterations=4, seeds=(1,), B=2, max_eval_tasks=9,
    bandit=dataclasses.replace(BanditConfig(), b_hat=4, gamma=0.9),
    synthesis=SynthesisConfig(p_overgeneral=0.2, max_rules=2),
    scripted=dataclasses.replace(ScriptedConfig(), p_follow_guidance=0.75),
)

CASES = [
    CounterMemConfig(), COUNTERMEM,
    APConfig(), ANTIPERSIST,
    ScriptedConfig(), dataclasses.replace(ScriptedConfig(), p_propose_fix=0.3, p_noise=0.0),
    DQNConfig(), dataclasses.replace(DQNConfig(), seeds=(9,), eps_end=0.01),
    BanditConfig(), dataclasses.replace(BanditConfig(), epsilon=0.0, w_init=1),
    UpliftLossConfig(), dataclasses.replace(UpliftLossConfig(), tau_tr=2.0),
    SynthesisConfig(),
    OpenAIConfig(base_url="http://127.0.0.1:8000/v1", model="m"),
    OpenAIConfig(base_url="http://h:1/v1", model='a "quoted"\nname', api_key="k", seed=3, temperature=0.7),
]


@pytest.mark.parametrize("cfg", CASES, ids=lambda c: type(c).__name__)
def test_round_trip_through_toml(cfg, tmp_path: Path):
    path = tmp_path / "cfg.toml"
    save_toml(cfg, path)
    back = load_toml(type(cfg), path)
    assert back == cfg
    assert hash(back) == hash(cfg)  # frozen and hashable
    assert from_dict(type(cfg), to_dict(cfg)) == cfg


def test_saved_toml_lists_sections_and_lists():
    text = dumps_toml(COUNTERMEM)
    assert "seeds = [4, 5]" in text
    assert "[store]" in text and "[dqn]" in text and "hidden = [32, 16, 8]" in text
    assert "use_conditions = false" in text


def test_partial_toml_keeps_defaults(tmp_path: Path):
    p = tmp_path / "c.toml"
    p.write_text("seeds = [3]\n[store]\ncapacity = 50\n[dqn]\nlr = 1\n")
    cfg = load_toml(CounterMemConfig, p)
    assert cfg.seeds == (3,) and cfg.store.capacity == 50 and cfg.store.rho == StoreConfig().rho
    assert cfg.dqn.lr == 1.0 and isinstance(cfg.dqn.lr, float)  # int accepted for float
    assert cfg.agent == CounterMemConfig().agent


def _load_error(tmp_path: Path, text: str, cls=CounterMemConfig) -> str:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_toml(cls, p)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_wrong_type_top_level(tmp_path: Path):
    msg = _load_error(tmp_path, 'seeds = "012"\n')
    assert "config key 'seeds': expected a list of int, got str \"012\"" in msg


def test_wrong_type_nested(tmp_path: Path):
    msg = _load_error(tmp_path, '[store]\ncapacity = "lots"\n')
    assert "config key 'store.capacity': expected int, got str \"lots\"" in msg


def test_bool_is_not_int(tmp_path: Path):
    msg = _load_error(tmp_path, "[agent]\nmax_attempts = true\n")
    assert "config key 'agent.max_attempts': expected int, got bool true" in msg
    msg = _load_error(tmp_path, "split_seeds = [1.5]\n")
    assert "config key 'split_seeds" in msg and "1.5" in msg


def test_int_is_not_bool_and_list_elements_are_checked(tmp_path: Path):
    msg = _load_error(tmp_path, "[retrieval]\nuse_conditions = 1\n")
    assert "config key 'retrieval.use_conditions': expected bool, got int 1" in msg
    msg = _load_error(tmp_path, '[dqn]\nhidden = [64, "x"]\n')
    assert "config key 'dqn.hidden': expected a list of int" in msg
    msg = _load_error(tmp_path, "seeds = [0, true]\n")
    assert "config key 'seeds': expected a list of int" in msg


def test_unknown_key_in_nested_section(tmp_path: Path):
    msg = _load_error(tmp_path, "[store]\ncapcity = 3\n")
    assert "'store.capcity'" in msg and "capacity" in msg and "retention" in msg
    msg = _load_error(tmp_path, "[synthesis]\nmax_rule = 3\n", APConfig)
    assert "'synthesis.max_rule'" in msg and "max_rules" in msg
    msg = _load_error(tmp_path, "[nope]\nx = 1\n")
    assert "'nope'" in msg and "store" in msg


def test_section_must_be_a_table(tmp_path: Path):
    msg = _load_error(tmp_path, "store = 3\n")
    assert "config key 'store': expected a table (StoreConfig), got int 3" in msg


def test_out_of_range_names_the_section(tmp_path: Path):
    msg = _load_error(tmp_path, "[store]\ncapacity = 0\n")
    assert "[store]: StoreConfig.capacity must be ≥ 1, got 0" in msg
    msg = _load_error(tmp_path, "[bandit]\ngamma = 2.0\n", APConfig)
    assert "[bandit]:" in msg and "gamma" in msg
    msg = _load_error(tmp_path, "iterations = 0\n", APConfig)
    assert "APConfig.iterations must be ≥ 1, got 0" in msg
    msg = _load_error(tmp_path, "[scripted]\np_error = 1.5\n", APConfig)
    assert "[scripted]: ScriptedConfig.p_error must be in [0, 1], got 1.5" in msg


def test_from_dict_errors_are_config_errors():
    with pytest.raises(ConfigError, match=r"config key 'store.capacity': expected int, got str \"lots\""):
        from_dict(CounterMemConfig, {"store": {"capacity": "lots"}})
    with pytest.raises(ConfigError, match="missing config key 'model'"):
        from_dict(OpenAIConfig, {"base_url": "http://h/v1"})
    assert from_dict(OpenAIConfig, {"base_url": "http://h/v1", "model": "m", "seed": None}).seed is None
    with pytest.raises(ConfigError, match="config key 'seed': expected int"):
        from_dict(OpenAIConfig, {"base_url": "http://h/v1", "model": "m", "seed": "3"})
    assert isinstance(ConfigError("x"), ValueError)


def test_missing_file_directory_and_bad_syntax(tmp_path: Path):
    with pytest.raises(ConfigError, match="not found"):
        load_toml(CounterMemConfig, tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="directory"):
        load_toml(CounterMemConfig, tmp_path)
    msg = _load_error(tmp_path, "seeds = [\n")
    assert "invalid TOML" in msg
    p = tmp_path / "bin.toml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_toml(CounterMemConfig, p)


def test_moved_names_are_the_same_objects():
    import cfjax.antipersist as ap
    from cfjax.antipersist.guidance import SynthesisConfig as S2
    from cfjax.antipersist.protocol import APConfig as A2
    from cfjax.llm.scripted import ScriptedConfig as SC2

    assert A2 is APConfig and ap.APConfig is APConfig
    assert S2 is SynthesisConfig and ap.SynthesisConfig is SynthesisConfig
    assert SC2 is ScriptedConfig


def test_config_imports_no_method_package():
    import subprocess
    import sys

    code = ("import sys, cfjax.config; bad = sorted(m for m in sys.modules if m.startswith('cfjax.') and not "
            "m.startswith(('cfjax.config', 'cfjax.kernels', 'cfjax.infra'))); print(bad); assert not bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

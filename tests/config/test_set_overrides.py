"""``--set KEY=VALUE``: dotted config keys overridden on the command line, checked like a TOML file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfjax.cli import main
from cfjax.config import (APConfig, ConfigError, CounterMemConfig, UpliftConfig, apply_overrides, load_toml,
                          parse_override, set_keys)


# --------------------------------------------------------------------------- apply_overrides


def test_nested_keys_are_set_and_the_rest_is_kept():
    cfg = apply_overrides(CounterMemConfig(), ["agent.max_attempts=3", "store.capacity=100", "dqn.lr=1e-4",
                                               "retrieval.index.nlist=8"])
    assert cfg.agent.max_attempts == 3 and cfg.store.capacity == 100 and cfg.dqn.lr == 1e-4
    assert cfg.retrieval.index.nlist == 8
    d = CounterMemConfig()
    assert cfg.agent.token_budget == d.agent.token_budget and cfg.store.rho == d.store.rho and cfg.seeds == d.seeds
    assert apply_overrides(d, []) is d and apply_overrides(d, None) is d


@pytest.mark.parametrize("text,key,value", [
    ("agent.max_attempts=3", "agent.max_attempts", 3),
    ("store.rho = 0.25", "store.rho", 0.25),
    ("world_timeout_s=1e1", "world_timeout_s", 10.0),
    ("retrieval.use_conditions=false", "retrieval.use_conditions", False),
    ("store.retention=recency", "store.retention", "recency"),  # a bare word: a string
    ('store.retention="random"', "store.retention", "random"),  # a TOML string
    ('world_feedback="1"', "world_feedback", "1"),  # quoted: the string "1", not the int
    ("seeds=[4, 5]", "seeds", [4, 5]),
    ("seeds=1,2", "seeds", "1,2"),  # not TOML: kept as text (then refused by type)
    ("x=", "x", ""),
    ("x=2024-01-01", "x", "2024-01-01"),  # a TOML date is no config value: the text
    ("x=1\ny = 2", "x", "1\ny = 2"),  # one value only
    ("agent={max_attempts = 4}", "agent", {"max_attempts": 4}),
])
def test_values_are_parsed_as_toml(text, key, value):
    assert parse_override(text) == (key, value)


def test_value_types_reach_the_config():
    cfg = apply_overrides(CounterMemConfig(), ["seeds=[4, 5]", "store.rho=0.25", "retrieval.use_conditions=false",
                                               "store.retention=recency", "world_timeout_s=3"])
    assert cfg.seeds == (4, 5)  # list → tuple, as from TOML
    assert cfg.store.rho == 0.25 and cfg.retrieval.use_conditions is False and cfg.store.retention == "recency"
    assert cfg.world_timeout_s == 3.0 and isinstance(cfg.world_timeout_s, float)  # int → float, as from TOML
    merged = apply_overrides(CounterMemConfig(), ["agent={max_attempts = 4}"])  # an inline table is merged
    assert merged.agent.max_attempts == 4 and merged.agent.token_budget == CounterMemConfig().agent.token_budget


def test_later_overrides_win():
    assert apply_overrides(CounterMemConfig(), ["seeds=[1]", "seeds=[2]"]).seeds == (2,)


@pytest.mark.parametrize("sets,needle", [
    (["store.capacity=lots"], "--set store.capacity=lots: config key 'store.capacity': expected int, got str \"lots\""),
    (["retrieval.use_conditions=1"], "config key 'retrieval.use_conditions': expected bool, got int 1"),
    (["seeds=1,2"], "config key 'seeds': expected a list of int"),
    (["agent.max_atempts=3"], "--set agent.max_atempts=3: unknown config key 'agent.max_atempts'; valid keys in "
                              "[agent] (AgentConfig): max_attempts, token_budget"),
    (["agnt.max_attempts=3"], "--set agnt.max_attempts=3: unknown config key 'agnt'; valid keys in the top level "
                              "(CounterMemConfig): store, retrieval"),
    (["seeds.first=1"], "--set seeds.first=1: config key 'seeds' is a value"),
    (["agent=3"], "config key 'agent': expected a table (AgentConfig)"),
    (["agent.max_attempts=0"], "--set agent.max_attempts=0: [agent]: AgentConfig.max_attempts must be ≥ 1, got 0"),
    (["seeds=[1, 1]"], "--set seeds=[1, 1]: CounterMemConfig.seeds must be a non-empty tuple of distinct ints"),
    (["agent.max_attempts"], "--set agent.max_attempts: expected KEY=VALUE"),
    (["=3"], "expected KEY=VALUE"),
    (["agent..max_attempts=3"], "empty part in the key 'agent..max_attempts'"),
    # several: the one that makes the config invalid is named, not the first one
    (["store.capacity=5", "agent.max_attempts=0", "seeds=[1]"], "--set agent.max_attempts=0: [agent]"),
])
def test_bad_overrides_are_one_line_naming_the_key(sets, needle):
    with pytest.raises(ConfigError) as e:
        apply_overrides(CounterMemConfig(), sets)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


def test_other_configs_and_set_keys():
    assert apply_overrides(APConfig(), ["bandit.rho=0.5", "max_attempts=3"]).bandit.rho == 0.5
    assert apply_overrides(UpliftConfig(), ["probing.strategy=eig"]).probing.strategy == "eig"
    with pytest.raises(ConfigError, match="ProbingSection.strategy must be one of"):
        apply_overrides(UpliftConfig(), ["probing.strategy=best"])
    cfg = set_keys(CounterMemConfig(), {"scripted.p_error": 0.3, "split_seeds": [7]})  # the sweep's path
    assert cfg.scripted.p_error == 0.3 and cfg.split_seeds == (7,)
    with pytest.raises(ConfigError, match="^sweep key 'scripted.p_nope': unknown config key 'scripted.p_nope'"):
        set_keys(CounterMemConfig(), {"scripted.p_nope": 1}, label="sweep key")


# --------------------------------------------------------------------------- the CLI


def _config(argv: list[str]):
    from cfjax.cli import _antipersist_config, _countermem_config, _upliftmem_config, build_parser

    args = build_parser().parse_args(argv)
    return {"countermem": _countermem_config, "antipersist": _antipersist_config,
            "upliftmem": _upliftmem_config}[argv[0]](args)


def test_set_beats_the_alias_flags_preset_and_config_file(tmp_path: Path):
    import dataclasses

    from cfjax.config import save_toml

    p = tmp_path / "c.toml"
    save_toml(dataclasses.replace(CounterMemConfig(), n_val=5, world_feedback="rich"), p)
    cfg = _config(["countermem", "run", "--out", "x", "--config", str(p), "--quick", "--seeds", "3", "4",
                   "--decisions", "50", "--set", "seeds=[7]", "--set", "dqn.total_decisions=500",
                   "--set", "world_feedback=user"])
    assert cfg.seeds == (7,) and cfg.dqn.total_decisions == 500 and cfg.world_feedback == "user"
    assert cfg.n_val == 5 and cfg.split_seeds == (12345,)  # the file and the preset stay where not overridden
    ap = _config(["antipersist", "run", "--out", "x", "--quick", "--iterations", "2", "--set", "iterations=5"])
    assert ap.iterations == 5 and ap.tasks_per_iteration == 20  # --quick kept
    um = _config(["upliftmem", "run", "--out", "x", "--probe-strategy", "random", "--max-tasks", "9",
                  "--set", "probing.strategy=eig"])
    assert um.probing.strategy == "eig" and um.max_tasks == 9


@pytest.mark.parametrize("argv", [
    ["countermem", "run", "--suite", "sql"],
    ["countermem", "table", "--suite", "sql"],
    ["antipersist", "run", "--suite", "sql"],
    ["upliftmem", "run", "--suite", "sql"],
    ["upliftmem", "probes", "--suite", "sql"],
    ["compare", "--suite", "sql"],
    ["sweep", "--method", "countermem"],
])
def test_cli_bad_key_exits_2_with_one_line(tmp_path: Path, capsys, argv):
    out = tmp_path / "out"
    rc = main([*argv, "--out", str(out), "--set", "agent.max_atempts=3"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("cfjax: --set agent.max_atempts=3: ")
    assert "max_atempts" in err and "Traceback" not in err
    assert not out.exists()  # refused before anything is written


def test_cli_train_selectors_bad_key_and_sweep_axis_refused(tmp_path: Path, capsys):
    rc = main(["countermem", "train-selectors", "--table", str(tmp_path / "t"), "--set", "lrr=1e-3"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("cfjax: --set lrr=1e-3: unknown config key 'lrr'") and err.count("\n") == 1
    rc = main(["sweep", "--method", "countermem", "--out", str(tmp_path / "s"), "--set", "scripted.p_error=0.1"])
    err = capsys.readouterr().err
    assert rc == 2 and "is an axis of the grid" in err and not (tmp_path / "s").exists()


def test_train_selectors_and_compare_and_probes_get_the_override(tmp_path: Path, monkeypatch):
    import cfjax.experiments.compare as compare
    import cfjax.experiments.countermem.selectors as selectors
    import cfjax.experiments.upliftmem.probes as probes

    got = {}
    monkeypatch.setattr(selectors, "train_selectors_main", lambda *a, **kw: got.update(ts=kw))
    monkeypatch.setattr(compare, "compare_main", lambda **kw: got.update(co=kw))
    monkeypatch.setattr(probes, "probes_main", lambda **kw: got.update(pr=kw))
    assert main(["countermem", "train-selectors", "--table", str(tmp_path), "--decisions", "500",
                 "--set", "lr=1e-4", "--set", "total_decisions=1000"]) == 0
    assert got["ts"]["cfg"].lr == 1e-4 and got["ts"]["cfg"].total_decisions == 1000  # --set beats --decisions
    assert main(["compare", "--suite", "sql", "--out", str(tmp_path / "c"), "--quick",
                 "--set", "countermem.agent.max_attempts=3", "--set", "max_tasks=8"]) == 0
    cfg = got["co"]["cfg"]
    assert cfg.countermem.agent.max_attempts == 3 and cfg.max_tasks == 8 and cfg.seeds == (0,)  # --quick kept
    assert main(["upliftmem", "probes", "--out", str(tmp_path / "p"), "--quick", "--set", "training.epochs=2"]) == 0
    assert got["pr"]["cfg"].training.epochs == 2 and got["pr"]["cfg"].max_tasks == 16


def test_sweep_set_joins_every_points_config():
    from cfjax.experiments.sweep import DEFAULT_GRID, load_grid, override, with_sets

    spec = with_sets(load_grid(DEFAULT_GRID, "countermem", quick=True), ["agent.max_attempts=3"])
    cfgs = [override(override(CounterMemConfig(), spec.base), p) for p in spec.points()]
    assert cfgs and all(c.agent.max_attempts == 3 for c in cfgs)


class _Stop(Exception):
    pass


def test_the_written_config_toml_holds_the_override(tmp_path: Path, monkeypatch, capsys):
    """A real ``antipersist run``, stopped right after it writes ``out/config.toml`` (before any suite is built)."""
    import cfjax.domains

    def stop(*a, **kw):
        raise _Stop("stopped after config.toml")

    monkeypatch.setattr(cfjax.domains, "build_suite", stop)
    out = tmp_path / "out"
    rc = main(["antipersist", "run", "--suite", "sql", "--out", str(out), "--quick", "--iterations", "2",
               "--set", "iterations=4", "--set", "bandit.rho=0.6", "--set", "embed_text=paper"])
    assert rc == 1 and "stopped after config.toml" in capsys.readouterr().err  # our stop, nothing else
    cfg = load_toml(APConfig, out / "config.toml")
    assert cfg.iterations == 4 and cfg.bandit.rho == 0.6 and cfg.embed_text == "paper"
    assert cfg.tasks_per_iteration == 20 and cfg.seeds == (42,)  # --quick kept

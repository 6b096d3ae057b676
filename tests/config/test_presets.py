"""The --quick presets are frozen configs, and quick(...) gives the documented values."""

from __future__ import annotations

import dataclasses

import pytest

from cfjax.config import AP_QUICK, QUICK, APConfig, APQuick, CounterMemConfig, CounterMemQuick, quick


def test_presets_are_frozen_and_hashable():
    for preset, name in ((QUICK, "max_tasks"), (AP_QUICK, "iterations")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(preset, name, 1)
        hash(preset)
    assert isinstance(QUICK, CounterMemQuick) and isinstance(AP_QUICK, APQuick)


def test_countermem_quick_values():
    assert (QUICK.max_tasks, QUICK.decisions, QUICK.checkpoint_every) == (16, 200, 100)
    assert QUICK.accumulation == (0, 8, 16, 32) and QUICK.seeds == (0,)
    base = CounterMemConfig()
    cfg = quick(base)
    assert cfg.seeds == (0,) and cfg.split_seeds == (12345,)
    assert cfg.dqn.total_decisions == 200 and cfg.dqn.checkpoint_every == 100
    assert cfg.experiment.accumulation_checkpoints == (0, 8, 16, 32)
    # nothing else changes, and the input is untouched
    assert dataclasses.replace(cfg, seeds=base.seeds, split_seeds=base.split_seeds, dqn=base.dqn,
                               experiment=base.experiment) == base
    assert base == CounterMemConfig()


def test_antipersist_quick_values():
    cfg = quick(APConfig())
    assert (cfg.iterations, cfg.tasks_per_iteration, cfg.max_eval_tasks, cfg.seeds) == (3, 20, 40, (42,))
    assert cfg.split_seeds == (12345,)
    assert cfg.bandit == APConfig().bandit and cfg.synthesis == APConfig().synthesis


def test_quick_keeps_a_loaded_config():
    cfg = quick(dataclasses.replace(CounterMemConfig(), n_val=3))
    assert cfg.n_val == 3
    with pytest.raises(TypeError):
        quick(object())  # type: ignore[type-var]

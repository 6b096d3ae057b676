"""Presets: frozen bundles of overrides applied to a method's config (``--quick``).

A preset is a frozen dataclass, not a mutable dict; :func:`quick` applies the
one for the config's method with :func:`dataclasses.replace` and returns a
new frozen config::

    cfg = quick(CounterMemConfig())      # seeds (0,), split (12345,), 200 decisions, checkpoints (0, 8, 16, 32)
    max_tasks = QUICK.max_tasks          # 16 tasks per split (a run argument, not a config field)
    ap = quick(APConfig())               # 3 iterations × 20 tasks, 40 held-out tasks, seed 42, split 12345
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from cfjax.config.antipersist import APConfig
from cfjax.config.countermem import CounterMemConfig

__all__ = ["CounterMemQuick", "APQuick", "QUICK", "AP_QUICK", "quick"]


@dataclass(frozen=True)
class CounterMemQuick:
    """``cfjax countermem run --quick``: a smoke run of every row in minutes on a CPU.

    Not a paper setting; sized so that every row and the accumulation
    analysis still produce numbers.
    """

    max_tasks: int = 16  # tasks per split (the run's ``max_tasks``; the full run uses every task)
    decisions: int = 200  # selector training decisions (DQNConfig.total_decisions; Table 3: 2000)
    checkpoint_every: int = 100  # selector checkpoint interval (DQNConfig.checkpoint_every; App. C.2: 250)
    accumulation: tuple[int, ...] = (0, 8, 16, 32)  # ExperimentConfig.accumulation_checkpoints (App. D.3: 0…200)
    seeds: tuple[int, ...] = (0,)  # CounterMemConfig.seeds (default 0 1 2)
    split_seeds: tuple[int, ...] = (12345,)  # CounterMemConfig.split_seeds (default 12345 1 2)

    def apply(self, cfg: CounterMemConfig) -> CounterMemConfig:
        """``cfg`` with this preset's seeds, split seeds, selector budget and accumulation checkpoints."""
        return dataclasses.replace(
            cfg, seeds=self.seeds, split_seeds=self.split_seeds,
            dqn=dataclasses.replace(cfg.dqn, total_decisions=self.decisions, checkpoint_every=self.checkpoint_every),
            experiment=dataclasses.replace(cfg.experiment, accumulation_checkpoints=self.accumulation))


@dataclass(frozen=True)
class APQuick:
    """``cfjax antipersist run --quick``: a smoke run of every row (not a paper setting)."""

    iterations: int = 3  # APConfig.iterations (K; §4.1: 10)
    tasks_per_iteration: int = 20  # APConfig.tasks_per_iteration (§4.1: 50)
    max_eval_tasks: int = 40  # APConfig.max_eval_tasks (default 0 = the whole held-out split)
    seeds: tuple[int, ...] = (42,)  # APConfig.seeds (default 42 43 44)
    split_seeds: tuple[int, ...] = (12345,)  # APConfig.split_seeds (default 12345 1 2)

    def apply(self, cfg: APConfig) -> APConfig:
        """``cfg`` with this preset's iterations, tasks, seeds and split seeds."""
        return dataclasses.replace(cfg, iterations=self.iterations, tasks_per_iteration=self.tasks_per_iteration,
                                   max_eval_tasks=self.max_eval_tasks, seeds=self.seeds, split_seeds=self.split_seeds)


QUICK = CounterMemQuick()
AP_QUICK = APQuick()

C = TypeVar("C", CounterMemConfig, APConfig)


def quick(cfg: C) -> C:
    """``cfg`` with its method's quick preset (:data:`QUICK` or :data:`AP_QUICK`) applied."""
    if isinstance(cfg, CounterMemConfig):
        return QUICK.apply(cfg)
    if isinstance(cfg, APConfig):
        return AP_QUICK.apply(cfg)
    raise TypeError(f"no quick preset for {type(cfg).__name__}")

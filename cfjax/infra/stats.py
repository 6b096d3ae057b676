"""Paired bootstrap intervals over tasks: every success figure and every difference between rows.

A *cluster* is one split of one suite: the same held-out tasks, run under
one or more backbone seeds, by every row. Its outcomes are a ``[seeds,
tasks]`` 0/1 matrix per row. A bootstrap replicate resamples each cluster's
*tasks* with replacement (the same resampled columns for every row and every
seed — that is what makes a difference *paired*) and recomputes

    stat = 100 · Σ_c w_c · mean(outcomes_c[:, resampled columns])

with ``w_c`` the cluster weights (equal by default: a suite's figure is the
mean over its splits, the ``mean`` column the mean over suites, as in
Table 1). The interval is the percentile interval of ``n_boot`` replicates.
Task resampling treats the tasks as the sampled unit and keeps the backbone
seeds inside it, so seed-to-seed variation is averaged, not counted as extra
independent data; the split seeds are separate clusters.

The papers report spreads over seeds only (papers/countermem.md App. D.2,
papers/antipersist.md §5); task-level intervals are our addition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "Cluster", "bootstrap", "paired_difference", "fmt_interval", "clusters_from_outcomes"]


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval (both in percentage points)."""

    mean: float
    lo: float
    hi: float
    level: float = 0.95

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0.0 or self.hi < 0.0

    def as_dict(self) -> dict:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "level": self.level}


@dataclass(frozen=True)
class Cluster:
    """One split's outcomes: ``row → [seeds, tasks]`` 0/1 (or [0, 1] scores), same task order for every row."""

    outcomes: dict[str, np.ndarray]
    weight: float = 1.0

    def __post_init__(self) -> None:
        shapes = {k: np.shape(v) for k, v in self.outcomes.items()}
        if any(len(s) != 2 for s in shapes.values()):
            raise ValueError(f"cluster outcomes must be [seeds, tasks] matrices, got shapes {shapes}")
        if len({s[1] for s in shapes.values()}) > 1:
            raise ValueError(f"every row of a cluster must cover the same tasks, got shapes {shapes}")

    @property
    def n_tasks(self) -> int:
        return next(iter(self.outcomes.values())).shape[1] if self.outcomes else 0


def _replicates(clusters: Sequence[Cluster], rows: Sequence[str], n_boot: int, seed: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Point estimates ``[rows]`` and bootstrap replicates ``[rows, n_boot]`` (shared resamples)."""
    use = [c for c in clusters if all(r in c.outcomes for r in rows) and c.n_tasks > 0]
    if not use:
        raise ValueError(f"no cluster has outcomes for every row of {list(rows)}")
    w = np.array([c.weight for c in use], float)
    w = w / w.sum()
    rng = np.random.default_rng(seed)
    point = np.zeros(len(rows))
    reps = np.zeros((len(rows), n_boot))
    for wc, c in zip(w, use):
        idx = rng.integers(0, c.n_tasks, size=(n_boot, c.n_tasks))
        for j, r in enumerate(rows):
            x = np.asarray(c.outcomes[r], float)
            point[j] += wc * x.mean()
            per_task = x.mean(axis=0)  # seeds averaged inside the task: tasks are the resampled unit
            reps[j] += wc * per_task[idx].mean(axis=1)
    return 100.0 * point, 100.0 * reps


def _interval(point: float, reps: np.ndarray, level: float) -> Interval:
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(reps, [a, 1.0 - a])
    return Interval(float(point), float(lo), float(hi), level)


def bootstrap(clusters: Sequence[Cluster], row: str, *, n_boot: int = 2000, seed: int = 0,
              level: float = 0.95) -> Interval:
    """Success of ``row`` (0–100) with its task-bootstrap interval."""
    point, reps = _replicates(clusters, [row], n_boot, seed)
    return _interval(point[0], reps[0], level)


def paired_difference(clusters: Sequence[Cluster], row: str, reference: str, *, n_boot: int = 2000,
                      seed: int = 0, level: float = 0.95) -> Interval:
    """``row − reference`` in percentage points, paired over tasks (the same resamples for both)."""
    point, reps = _replicates(clusters, [row, reference], n_boot, seed)
    return _interval(point[0] - point[1], reps[0] - reps[1], level)


def fmt_interval(iv: Interval | dict | None, *, signed: bool = False) -> str:
    """``83.1 [79.0, 87.2]`` (``signed``: ``+2.3 [−0.4, +5.1]``)."""
    if iv is None:
        return "—"
    d = iv.as_dict() if isinstance(iv, Interval) else iv
    if d.get("mean") is None:
        return "—"
    s = "+.1f" if signed else ".1f"
    return f"{d['mean']:{s}} [{d['lo']:{s}}, {d['hi']:{s}}]"


def clusters_from_outcomes(outcomes: dict, suites: Sequence[str] | None = None) -> list[Cluster]:
    """Clusters from a results payload's ``outcomes`` block.

    ``outcomes`` maps ``suite → split_seed → {"task_ids": [...], "seeds": [...], "rows": {row: [[0/1 per
    task] per backbone seed]}}`` (written by ``cfjax countermem run`` and ``cfjax antipersist run``).
    With several suites each suite weighs the same and, inside it, each split (Table 1's ``mean``).
    """
    names = list(outcomes) if suites is None else [s for s in suites if s in outcomes]
    out: list[Cluster] = []
    for s in names:
        splits = outcomes[s]
        for block in splits.values():
            rows = {r: np.asarray(v, float) for r, v in block["rows"].items() if len(v)}
            if rows:
                out.append(Cluster(rows, weight=1.0 / (len(names) * len(splits))))
    return out

"""Paired bootstrap intervals over tasks: :mod:`cfjax.infra.stats`, re-exported for the runners.

The implementation lives in :mod:`cfjax.infra.stats` (pure NumPy, no ``cfjax`` import) so that a
method (CounterMem's selector comparison) can use it without importing :mod:`cfjax.experiments`.
"""

from __future__ import annotations

from cfjax.infra.stats import Cluster, Interval, bootstrap, clusters_from_outcomes, fmt_interval, paired_difference

__all__ = ["Interval", "Cluster", "bootstrap", "paired_difference", "fmt_interval", "clusters_from_outcomes"]

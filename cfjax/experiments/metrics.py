"""Row metrics of CounterMem's runner: :func:`cfjax.countermem.metrics.row_metrics`, re-exported.

The metrics live with the method (:mod:`cfjax.countermem.metrics`) because the method's pipeline
computes them and a method never imports :mod:`cfjax.experiments`.
"""

from __future__ import annotations

from cfjax.countermem.metrics import row_metrics

__all__ = ["row_metrics"]

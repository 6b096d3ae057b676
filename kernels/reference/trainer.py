"""NumPy reference of :mod:`cfjax.kernels.trainer` (greedy evaluation over a decision table)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from cfjax.kernels.reference.dqn import reward_reference
from cfjax.kernels.trainer import DecisionTable

__all__ = ["evaluate_policy_reference"]


def evaluate_policy_reference(q_fn: Callable[[np.ndarray], np.ndarray], table: DecisionTable, roots,
                              hp, *, max_depth: int, tau0: float) -> tuple[float, float]:
    """NumPy reference of :func:`cfjax.kernels.trainer.evaluate_policy` (``q_fn(obs f32[98]) -> f32[5]``)."""
    t = [np.asarray(x) for x in table]
    tb = DecisionTable(*t)
    rets, solved = [], []
    for root in np.asarray(roots):
        row, ret, ok = int(root), 0.0, False
        for _ in range(max_depth):
            q = np.where(tb.mask[row], np.asarray(q_fn(tb.obs[row]), np.float64), -np.inf)
            a = int(np.argmax(q))
            ret += float(reward_reference(tb.solved[row, a], tb.calls[row, a], tb.failed[row, a],
                                          tb.tokens[row, a], hp, tau0))
            ok = ok or bool(tb.solved[row, a])
            row = int(tb.next[row, a])
            if row < 0:
                break
        rets.append(ret)
        solved.append(ok)
    return (float(np.mean(rets)) if rets else 0.0, float(np.mean(solved)) if solved else 0.0)

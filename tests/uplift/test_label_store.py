"""UpliftMem's label store D: which labels a value minibatch takes (TrainingSection.value_labels)."""

from __future__ import annotations

import numpy as np
import pytest

from cfjax.config.uplift import TrainingSection
from cfjax.uplift.core import Label
from cfjax.uplift.scorer import LabelStore


def _store() -> LabelStore:
    d = LabelStore(k_max=2, d_ctx=3, d_mem=2)
    for i in range(12):  # task "a": labels y = 0..11 in arrival order; task "b": 2 labels
        d.add(Label("a", (f"m{i}",), float(i), i, 0, "probe", float(i), 0.0), np.zeros(3), np.ones((1, 2)))
    for i in range(2):
        d.add(Label("b", ("x",), 100.0 + i, 50 + i, 0, "probe", 0.0, 0.0), np.zeros(3), np.ones((1, 2)))
    return d


def test_latest_takes_the_most_recent_labels_of_each_task():
    *_, y, valid = _store().minibatches(np.random.default_rng(0), steps=20, tasks=2, per_task=4)
    got = {tuple(sorted(row[v].tolist())) for ys, vs in zip(y, valid) for row, v in zip(ys, vs)}
    assert got == {(8.0, 9.0, 10.0, 11.0), (100.0, 101.0)}


def test_all_covers_every_label_of_a_task_over_the_steps():
    *_, y, valid = _store().minibatches(np.random.default_rng(0), steps=60, tasks=2, per_task=4, which="all")
    seen_a = {float(v) for ys, vs in zip(y, valid) for row, m in zip(ys, vs) for v in row[m] if v < 100}
    assert seen_a == {float(i) for i in range(12)}  # the old labels too, not only the latest 4
    per_row = {int(m.sum()) for vs in valid for m in vs}
    assert per_row == {2, 4}  # never more than per_task; a task with fewer gives all of its labels
    with pytest.raises(ValueError, match="value_labels must be 'latest' or 'all'"):
        TrainingSection(value_labels="recent")

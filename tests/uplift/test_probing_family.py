"""The B.2 / A.6 comparison families, the calibrated μ and the noise model, by hand.

A three-memory window with a stand-in scorer whose ``G`` and ``φ`` are known (``G`` = the sum of the
members' values, ``φ`` = their indicator), so every comparison and margin can be written down. Pure
NumPy + the shared acquisition inputs; no training.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from cfjax.config.uplift import LEGACY_PROBING, ProbingSection
from cfjax.types import Task
from cfjax.uplift.core import Memory
from cfjax.uplift.probing import WindowTask, build_window, calibration_scale, label_noise

VALUES = {"a": 0.1, "b": 0.3, "c": -0.2}
IDS = sorted(VALUES)


class _Trainer:
    cfg = SimpleNamespace(scorer=SimpleNamespace(features=len(IDS)))

    def features(self, ctx, rows, mask):
        return np.where(mask[:, :, None], np.eye(len(IDS), dtype=np.float32)[np.maximum(rows, 0)], 0.0).sum(1)

    def scores(self, ctx, rows, mask):
        v = np.array([VALUES[i] for i in IDS], np.float32)
        return np.where(mask, v[np.maximum(rows, 0)], 0.0).sum(1).astype(np.float32)


class _Retriever:
    k, budget = 2, 1e9
    trainer = _Trainer()

    def set_rows(self, task, members):
        rows = np.full((self.k,), -1, np.int64)
        rows[:len(members)] = [IDS.index(m.mem_id) for m in members]
        return np.zeros((1,), np.float32), rows, rows >= 0


def _window(family: str, **kw):
    task = Task("t0", "q", "synthetic", "", {}, domain="synthetic")
    mems = {i: Memory(i, f"note {i}", 3, "") for i in IDS}
    cands = SimpleNamespace(task=task, memories=[mems["a"], mems["b"], mems["c"]])
    wt = WindowTask(cands, [mems["a"]], seed=1, ref_id=7, executed={("a",)})  # retrieved {a}, already labelled
    base = {**LEGACY_PROBING, "family": family}  # the fields a test does not set: the plainest beliefs
    cfg = ProbingSection(**{**base, "max_pool": 16, "max_comparisons": 16, **kw})
    no_labels = type("NoLabels", (), {"__len__": lambda self: 0})()  # beliefs = the prior (a = 1, m = 0)
    return build_window([wt], _Retriever(), no_labels, cfg, np.random.default_rng(0)), cfg


def _pairs(win):
    """{frozenset{X, B}: μ oriented X − B} of the window's comparisons."""
    mu = np.asarray(win.inputs.means)
    return {frozenset([x, b]): (x, b, round(float(mu[j]), 6)) for j, (_, x, b) in enumerate(win.comparisons)}


G = {(): 0.0, ("a",): 0.1, ("b",): 0.3, ("c",): -0.2, ("a", "b"): 0.4, ("a", "c"): -0.1}
LOCAL = [(("a",), ()), (("b",), ()), (("c",), ()),  # additions to ∅ (stopping comparisons against 0)
         (("a", "b"), ("a",)), (("a", "c"), ("a",)), (("b",), ("a",)), (("c",), ("a",))]  # edits of {a}


def test_local_family_compares_each_neighbour_with_its_base():
    win, _ = _window("local")
    assert [(ti, tuple(m.mem_id for m in ms)) for ti, ms in win.sets] == \
        [(0, ("b",)), (0, ("c",)), (0, ("a", "b")), (0, ("a", "c"))]  # {a} was executed: not a probe
    got = _pairs(win)
    assert set(got) == {frozenset(p) for p in LOCAL}
    for x, b, mu in got.values():
        assert mu == pytest.approx(G[x] - G[b], abs=1e-6)


def test_sibling_family_adds_each_continuation_against_the_groups_best():
    """Continuations of ∅ (and replacements of a, which share the base ∅): {a}, {b}, {c} — the best is {b},
    so {c} vs {b} is new ({a} vs {b} is already a local comparison). Continuations of {a}: {a,b}, {a,c} —
    {a,c} vs {a,b}. Nine comparisons in all, each once."""
    win, _ = _window("siblings")
    got = _pairs(win)
    assert set(got) == {frozenset(p) for p in LOCAL} | {frozenset([("c",), ("b",)]), frozenset([("a", "c"), ("a", "b")])}
    assert len(win.comparisons) == 9
    assert got[frozenset([("c",), ("b",)])] == (("c",), ("b",), pytest.approx(-0.5, abs=1e-6))
    assert got[frozenset([("a", "c"), ("a", "b")])] == (("a", "c"), ("a", "b"), pytest.approx(-0.5, abs=1e-6))


def test_finite_family_is_one_comparison_per_set_against_the_incumbent():
    """A.6: the task's family is ∅, {a}, {b}, {c}, {a,b}, {a,c}; the predicted best is {a,b} (0.4); each other
    set once against it and nothing else."""
    win, _ = _window("finite")
    got = _pairs(win)
    assert set(got) == {frozenset([k, ("a", "b")]) for k in G if k != ("a", "b")}
    for x, b, mu in got.values():
        assert b == ("a", "b") and mu == pytest.approx(G[x] - 0.4, abs=1e-6)


@pytest.mark.parametrize("family", ["siblings", "finite"])
def test_a_task_twice_in_a_window_is_one_family_scored_on_its_first_entry(family):
    """The same task at two window entries (it was processed twice since the last window) with different
    paths: the sets only its second entry reaches (continuations of {b}) join the task's one family, which
    is scored on its first entry (this raised KeyError (0, ('b', 'c')) in the full UpliftMem run)."""
    task = Task("t0", "q", "synthetic", "", {}, domain="synthetic")
    mems = {i: Memory(i, f"note {i}", 3, "") for i in IDS}
    cands = SimpleNamespace(task=task, memories=[mems["a"], mems["b"], mems["c"]])
    first = WindowTask(cands, [mems["a"]], seed=1, ref_id=7, executed={("a",)})
    second = WindowTask(cands, [mems["b"]], seed=2, ref_id=8, executed={("b",)})
    cfg = ProbingSection(**{**LEGACY_PROBING, "family": family, "max_pool": 32, "max_comparisons": 32})
    no_labels = type("NoLabels", (), {"__len__": lambda self: 0})()
    win = build_window([first, second], _Retriever(), no_labels, cfg, np.random.default_rng(0))
    got = _pairs(win)
    assert all(ti == 0 for ti, _, _ in win.comparisons) or family == "siblings"
    assert len(got) == len(win.comparisons)  # each pair once, by task
    if family == "finite":  # every set of either entry once against the predicted best {a,b} (0.4; {b,c} = 0.1)
        assert set(got) == {frozenset([k, ("a", "b")]) for k in (*G, ("b", "c")) if k != ("a", "b")}
    else:  # the continuations of {b} are siblings too: {b,c} vs {a,b} (their base {b}, best {a,b} at 0.4)
        assert frozenset([("b", "c"), ("a", "b")]) in got
    for x, b, mu in got.values():
        assert mu == pytest.approx({**G, ("b", "c"): 0.1}[x] - {**G, ("b", "c"): 0.1}[b], abs=1e-6)


def test_normalized_values_scale_tau_by_the_family_size():
    win, cfg = _window("siblings", normalize_values=True, tau_evsi=0.02)
    assert float(win.inputs.tau) == pytest.approx(0.02 * 9)
    win, cfg = _window("siblings", tau_evsi=0.02)
    assert float(win.inputs.tau) == pytest.approx(0.02)


def test_bernoulli_noise_is_each_probes_own_label_variance():
    """ν_q² = max(floor, p(1 − p)), p = |Δ̂_q| (no labels: a = 1, so Δ̂ = G): {b} 0.21, {c} 0.16, {a,b} 0.24,
    {a,c} 0.09; the fixed model gives noise_var everywhere."""
    win, _ = _window("local", noise="bernoulli")
    np.testing.assert_allclose(np.asarray(win.inputs.noise_var)[:4], [0.21, 0.16, 0.24, 0.09], rtol=1e-5)
    win, cfg = _window("local")
    np.testing.assert_allclose(np.asarray(win.inputs.noise_var)[:4], cfg.noise_var)


def test_calibration_scale_and_label_noise_by_hand():
    cfg = ProbingSection(calibration="scale", calibration_prior=1.0)
    # a = (Σ G y + λ)/(Σ G² + λ) = (0.5 + 2 + 1)/(1 + 4 + 1)
    assert calibration_scale(np.array([1.0, 2.0]), np.array([0.5, 1.0]), cfg) == pytest.approx(3.5 / 6)
    assert calibration_scale(np.array([1.0, 2.0]), np.array([-3.0, -3.0]), cfg) == 0.0  # floored at 0
    assert calibration_scale(np.zeros(3), np.ones(3), cfg) == pytest.approx(1.0)  # no signal: the prior, a = 1
    assert calibration_scale(np.array([1.0]), np.array([0.1]), ProbingSection(calibration="none")) == 1.0
    np.testing.assert_allclose(label_noise(np.array([0.0, 0.3, -0.5, 1.2]), ProbingSection(noise_floor=0.02)),
                               [0.02, 0.21, 0.25, 0.02], rtol=1e-6)


@pytest.mark.parametrize("field,value", [("family", "pairs"), ("calibration", "logit"), ("noise", "gauss"),
                                         ("probe_candidates", -1)])
def test_bad_probing_fields_are_one_clear_error(field, value):
    with pytest.raises(ValueError, match=f"ProbingSection.{field}"):
        dataclasses.replace(ProbingSection(), **{field: value})

"""KNN-UCB mode selection (kernels/bandit.py; Anti-Persistence §3.2 Eq. 3, App. B.3–B.5).

The kernel is compared with its NumPy reference on seeded random logs for
every branch (round-robin, warm-up, ε, fallback, KNN-UCB), plus hand-computed
Eq. 3, decay anchoring, masking, batching and edge cases. Every log has the
same fixed shape (``L = 32`` slots, ``d = 8``, batches of ``N = 64`` cases) and
the config is passed as a pytree argument (only ``b_hat`` is static), so each
jitted function compiles once for every configuration; they are shared
through module fixtures. Keys are raw ``u32[2]`` arrays drawn with NumPy.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfjax.kernels import (EPSILON, FALLBACK, KNN_UCB, N_MODES, NEG, ROUND_ROBIN, WARMUP, BanditConfig, LocalEstimates,
                           OutcomeLogArrays, bandit_reward, empty_log, exploration_draws, jit_fields, local_estimates,
                           make_knn_ucb, select_mode)
from cfjax.kernels.reference import bandit_reward_reference, local_estimates_reference, select_mode_reference

L, D = 32, 8
CFG_DEFAULT = BanditConfig()  # Table 3 defaults (ε = 0.1, γ = 0.998)
CFG_GREEDY = BanditConfig(epsilon=0.0, gamma=0.9)  # deterministic branches, decay that matters
CFG_EPS1 = BanditConfig(epsilon=1.0)
CFG_HAND = BanditConfig(w_init=0, epsilon=0.0, rho=0.5, gamma=0.9)


# ---------------------------------------------------------------------------------------------- data


def _garbage(rng: np.random.Generator, log: OutcomeLogArrays) -> OutcomeLogArrays:
    """Fills every invalid slot with garbage (NaN/inf/huge values, out-of-range modes, wild times)."""
    emb, mode, reward, t = (np.array(x) for x in log[:4])
    valid = np.asarray(log.valid)
    pool = np.array([np.nan, np.inf, -np.inf, 1e30, -3e4], np.float32)
    for i in np.flatnonzero(~valid):
        emb[i] = rng.choice(pool, D) if rng.random() < 0.5 else rng.normal(0, 1e3, D)
        mode[i] = rng.integers(-5, 10)
        reward[i] = rng.choice([np.nan, np.inf, 1e9, -7.0, rng.normal()])
        t[i] = rng.integers(-2**31, 2**31 - 1)
    return OutcomeLogArrays(emb.astype(np.float32), mode.astype(np.int32), reward.astype(np.float32),
                            t.astype(np.int32), valid.copy())


def _make_log(rng, modes, emb, reward) -> OutcomeLogArrays:
    """Valid entries (in file order) scattered over random slots; consecutive timestamps; garbage elsewhere."""
    n = len(modes)
    slots = np.sort(rng.choice(L, n, replace=False))
    log = empty_log(L, D)
    log.valid[slots] = True
    log.emb[slots] = emb
    log.mode[slots] = modes
    log.reward[slots] = reward
    log.t[slots] = rng.integers(0, 1000) + np.arange(n)
    return _garbage(rng, log)


def _modes(rng, counts) -> np.ndarray:
    m = np.repeat(np.arange(N_MODES), counts)
    rng.shuffle(m)
    return m.astype(np.int32)


def _warm_counts(rng, lo: int, hi: int) -> np.ndarray:
    n = int(rng.integers(lo, hi + 1))
    return 3 + rng.multinomial(n - 12, np.ones(N_MODES) / N_MODES)


def make_case(rng: np.random.Generator, kind: str):
    """One random ``(log, query, iteration, rr_index)`` of the given kind."""
    iteration = int(rng.integers(3, 12))
    rr_index = int(rng.integers(-5, 200))
    query = rng.normal(size=D).astype(np.float32)
    if kind in ("random", "rr"):
        n = int(rng.integers(0, L + 1))
        modes = rng.integers(0, N_MODES, n).astype(np.int32)
        emb = rng.normal(size=(n, D))
        if kind == "rr":
            iteration = int(rng.integers(0, 3))
    elif kind == "deficient":  # some mode under W_init = 3
        counts = rng.integers(0, 9, N_MODES)
        counts[rng.integers(N_MODES)] = rng.integers(0, 3)
        modes = _modes(rng, counts)
        emb = rng.normal(size=(len(modes), D))
    elif kind == "spread":  # warm, dissimilar embeddings -> mean sim < ρ
        modes = _modes(rng, _warm_counts(rng, 12, L))
        emb = rng.normal(size=(len(modes), D))
    elif kind == "clustered":  # warm, the query's cluster fills the neighbourhood
        modes = _modes(rng, _warm_counts(rng, 16, L))
        n = len(modes)
        centres = rng.normal(size=(2, D))
        n0 = max(10, int(0.6 * n))
        cl = np.zeros(n, int)
        cl[rng.choice(n, n - n0, replace=False)] = 1
        emb = centres[cl] + 0.15 * rng.normal(size=(n, D))
        query = (centres[0] + 0.15 * rng.normal(size=D)).astype(np.float32)
    else:
        raise ValueError(kind)
    base = rng.uniform(-1, 1, N_MODES)
    reward = np.clip(base[modes] + 0.3 * rng.normal(size=len(modes)), -1, 1)
    return _make_log(rng, modes, emb, reward), query, iteration, rr_index


N = 64  # cases per seeded run (fixed: one compilation)


def make_cases(seed: int, kinds, n: int = N):
    rng = np.random.default_rng(seed)
    cases = [make_case(rng, kinds[i % len(kinds)]) for i in range(n)]
    logs = OutcomeLogArrays(*(np.stack([c[0][f] for c in cases]) for f in range(5)))
    queries = np.stack([c[1] for c in cases])
    its = np.array([c[2] for c in cases], np.int32)
    rrs = np.array([c[3] for c in cases], np.int32)
    keys = rng.integers(0, 2**32, (n, 2), dtype=np.uint32)
    return cases, logs, queries, its, rrs, keys


# ---------------------------------------------------------------------------------------------- jitted fns


def _both(log, q, it, rr, key, cfg):
    return select_mode(log, q, it, rr, key, cfg), local_estimates(log, q, cfg)


@pytest.fixture(scope="module")
def fns():
    """Jitted kernels, config as a traced argument: (batched select+estimates, single select, single estimates)."""
    return (jax.jit(jax.vmap(_both, in_axes=(0, 0, 0, 0, 0, None))), jax.jit(select_mode), jax.jit(local_estimates))


@pytest.fixture(scope="module")
def draws():
    return jax.jit(jax.vmap(exploration_draws))


@pytest.fixture(scope="module")
def select_batch():
    return jit_fields(make_knn_ucb(CFG_DEFAULT))


def _np(tree):
    return jax.tree.map(np.asarray, tree)


def _index(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _check(dec, ref, cases_i, cfg, tag="") -> bool:
    """Kernel decision == reference; returns True iff a float32/float64 near-tie was tolerated."""
    mode, branch = int(dec.mode), int(dec.branch)
    assert int(dec.n_neighbours) == ref.n_neighbours, tag
    np.testing.assert_allclose(float(dec.neighbourhood_sim), ref.neighbourhood_sim, atol=1e-5, err_msg=tag)
    tolerated = False
    if branch != ref.branch:  # only at the ρ boundary
        assert {branch, ref.branch} == {FALLBACK, KNN_UCB} and abs(ref.neighbourhood_sim - cfg.rho) < 1e-5, tag
        return True
    if branch == KNN_UCB:
        np.testing.assert_allclose(np.asarray(dec.scores), ref.scores, atol=2e-5, rtol=0, err_msg=tag)
        if mode != ref.mode:
            assert ref.scores[mode] >= ref.scores[ref.mode] - 2e-5, tag
            tolerated = True
    else:
        assert np.all(np.asarray(dec.scores) == np.float32(NEG)), tag
        if mode != ref.mode:
            log = cases_i[0]
            v = np.asarray(log.valid)
            r = np.asarray(log.reward, np.float64)[v]
            m = np.asarray(log.mode)[v]
            assert branch == FALLBACK and abs(r[m == mode].mean() - r[m == ref.mode].mean()) < 1e-5, tag
            tolerated = True
    return tolerated


def _run_and_compare(cfg, seed, kinds, fns, draws):
    cases, logs, queries, its, rrs, keys = make_cases(seed, kinds)
    n = len(cases)
    decs, ests = _np(fns[0](logs, queries, its, rrs, keys, cfg))
    us, rms = _np(draws(keys))
    refs, tolerated = [], 0
    for i, (log, q, it, rr) in enumerate(cases):
        ref = select_mode_reference(log, q, it, rr, float(us[i]), int(rms[i]), cfg)
        refs.append(ref)
        tolerated += _check(_index(decs, i), ref, cases[i], cfg, tag=f"case {i}")
        if ref.n_neighbours:
            e, er = _index(ests, i), local_estimates_reference(log, q, cfg)
            np.testing.assert_array_equal(e.in_neighbourhood, er.in_neighbourhood)
            assert int(e.t_max) == er.t_max
            np.testing.assert_array_equal(e.counts, er.counts)
            np.testing.assert_allclose(e.weight, er.weight, atol=1e-5, rtol=1e-5)
            np.testing.assert_allclose(e.r_hat, er.r_hat, atol=1e-5)
    assert tolerated <= max(1, n // 100)
    return decs.branch, decs.mode, refs, us, rms


# ---------------------------------------------------------------------------------------------- branches vs reference


def test_round_robin(fns, draws) -> None:
    branch, mode, *_ = _run_and_compare(CFG_DEFAULT, 1, ["rr"], fns, draws)
    rrs = make_cases(1, ["rr"])[4]
    assert np.all(branch == ROUND_ROBIN)
    np.testing.assert_array_equal(mode, np.mod(rrs, N_MODES))


def test_warmup_per_mode(fns, draws) -> None:
    cases = make_cases(2, ["deficient"])[0]
    branch, mode, *_ = _run_and_compare(CFG_DEFAULT, 2, ["deficient"], fns, draws)
    assert np.all(branch == WARMUP)
    for (log, *_), m in zip(cases, mode):
        v = np.asarray(log.valid)
        counts = np.bincount(np.asarray(log.mode)[v], minlength=N_MODES)
        assert counts[m] < 3 and m == int(np.argmin(counts))


def test_epsilon_one_and_zero(fns, draws) -> None:
    branch, mode, _, us, rms = _run_and_compare(CFG_EPS1, 3, ["spread", "clustered"], fns, draws)
    assert np.all(branch == EPSILON)
    np.testing.assert_array_equal(mode, rms)
    assert set(mode.tolist()) == set(range(N_MODES))  # every mode reachable; keys differ per task
    branch0, *_ = _run_and_compare(CFG_GREEDY, 3, ["random", "spread", "clustered"], fns, draws)
    assert not np.any(branch0 == EPSILON)


def test_fallback_low_similarity(fns, draws) -> None:
    cases = make_cases(4, ["spread"])[0]
    branch, mode, refs, _, _ = _run_and_compare(CFG_GREEDY, 4, ["spread"], fns, draws)
    assert np.all(branch == FALLBACK)
    assert all(r.neighbourhood_sim < CFG_GREEDY.rho for r in refs)
    for (log, *_), m in zip(cases, mode):  # global best = highest unweighted mean over the valid log
        v = np.asarray(log.valid)
        r, mm = np.asarray(log.reward, np.float64)[v], np.asarray(log.mode)[v]
        assert m == int(np.argmax([r[mm == k].mean() for k in range(N_MODES)]))


def test_fallback_skips_modes_without_entries(fns, draws) -> None:
    """W_init = 0: a mode with no entries is never the global best, even when every mean is negative."""
    _, sel, _ = fns
    rng = np.random.default_rng(13)
    modes = np.array([0, 1, 1, 0, 1], np.int32)
    log = _make_log(rng, modes, rng.normal(size=(5, D)), np.array([-0.5, -0.2, -0.3, -0.6, -0.1]))
    q = -np.asarray(log.emb)[np.asarray(log.valid)].sum(0).astype(np.float32)  # dissimilar → fallback
    dec = sel(log, q, 5, 0, KEY0, CFG_HAND)
    assert int(dec.branch) == FALLBACK and int(dec.mode) == 1  # means: none −0.55, imitation −0.2
    assert select_mode_reference(log, q, 5, 0, 0.5, 0, CFG_HAND).mode == 1
    branch, *_ = _run_and_compare(CFG_HAND, 13, ["random"], fns, draws)  # sparse random logs vs reference
    assert FALLBACK in set(branch.tolist())


def test_knn_ucb_clustered(fns, draws) -> None:
    branch, mode, *_ = _run_and_compare(CFG_GREEDY, 5, ["clustered"], fns, draws)
    assert np.all(branch == KNN_UCB)
    assert len(set(mode.tolist())) > 1


def test_default_config_mixed(fns, draws) -> None:
    branch, *_ = _run_and_compare(CFG_DEFAULT, 6, ["random", "deficient", "spread", "clustered"], fns, draws)
    assert {WARMUP, FALLBACK, KNN_UCB} <= set(branch.tolist())


def test_config_is_traced_not_static(fns, draws) -> None:
    """Configs differing in dynamic fields share one compilation; a different b_hat (static) retraces."""
    _run_and_compare(CFG_EPS1, 12, ["clustered"], fns, draws)
    size = fns[0]._cache_size()
    _run_and_compare(CFG_HAND, 12, ["clustered", "spread"], fns, draws)
    assert fns[0]._cache_size() == size
    _run_and_compare(BanditConfig(b_hat=3, epsilon=0.0), 12, ["clustered", "spread"], fns, draws)
    assert fns[0]._cache_size() == size + 1


def test_epsilon_rate_default(select_batch, draws) -> None:
    """ε = 0.1: the override fires on ≈10 % of keys, exactly where u < ε."""
    cases = make_cases(7, ["clustered"], 1)[0]
    log, q = cases[0][0], cases[0][1]
    rng = np.random.default_rng(7)
    fired_all = []
    for _ in range(8):
        keys = rng.integers(0, 2**32, (N, 2), dtype=np.uint32)
        dec = _np(select_batch(log, np.tile(q, (N, 1)), 5, np.arange(N, dtype=np.int32), keys))
        us, rms = _np(draws(keys))
        fired = dec.branch == EPSILON
        np.testing.assert_array_equal(fired, us < np.float32(0.1))
        np.testing.assert_array_equal(dec.mode[fired], rms[fired])
        assert np.all(dec.branch[~fired] == KNN_UCB)
        fired_all.append(fired)
    assert 0.05 < np.mean(fired_all) < 0.16


# ---------------------------------------------------------------------------------------------- hand example, edges


def _unit(i: int) -> np.ndarray:
    q = np.zeros(D, np.float32)
    q[i] = 1
    return q


KEY0 = np.array([0, 0], np.uint32)


def _hand_log() -> OutcomeLogArrays:
    log = empty_log(L, D)
    e = np.zeros((4, D), np.float32)
    e[:, :2] = [[1, 0], [0.6, 0.8], [0.8, 0.6], [0, 1]]  # sims 1, 0.6, 0.8, 0 to the query e_0
    log.emb[:4], log.mode[:4] = e, [1, 1, 2, 0]
    log.reward[:4], log.t[:4], log.valid[:4] = [1.0, 0.0, 0.5, 0.2], [0, 1, 2, 3], True
    return _garbage(np.random.default_rng(0), log)


def test_hand_example_eq3(fns) -> None:
    """Eq. 3 by hand: γ = 0.9, c = 0.5, t_max = 3, |N| = 4.

    w = (1·0.9³, 0.6·0.9², 0.8·0.9, 0·1) = (0.729, 0.486, 0.72, 0);
    r̂(imitation) = 0.729/1.215 = 0.6, r̂(strategic) = 0.5, r̂(none) = 0 (zero weight,
    our rule), r̂(corrective) = 0 (absent); bonus c·sqrt(log 4 / max(n, 1)) with
    n = (1, 2, 1, 0) → scores (0.5887, 1.0163, 1.0887, 0.5887) → strategic.
    """
    _, sel, est = fns
    log, q = _hand_log(), _unit(0)
    e = est(log, q, CFG_HAND)
    np.testing.assert_allclose(np.asarray(e.weight)[:4], [0.729, 0.486, 0.72, 0.0], atol=1e-6)
    np.testing.assert_allclose(e.r_hat, [0.0, 0.6, 0.5, 0.0], atol=1e-6)
    assert np.asarray(e.counts).tolist() == [1, 2, 1, 0] and int(e.t_max) == 3
    b1, b2 = 0.5 * math.sqrt(math.log(4)), 0.5 * math.sqrt(math.log(4) / 2)
    expect = [b1, 0.6 + b2, 0.5 + b1, b1]
    dec = sel(log, q, 5, 0, KEY0, CFG_HAND)
    assert int(dec.branch) == KNN_UCB and int(dec.mode) == 2 and int(dec.n_neighbours) == 4
    np.testing.assert_allclose(dec.scores, expect, atol=1e-6)
    np.testing.assert_allclose(float(dec.neighbourhood_sim), 0.6, atol=1e-6)
    ref = select_mode_reference(log, q, 5, 0, 0.5, 0, CFG_HAND)
    assert ref.mode == 2 and ref.branch == KNN_UCB
    np.testing.assert_allclose(ref.scores, expect, atol=1e-6)
    # without the bonus the weighted means decide: imitation (0.6 > 0.5)
    cfg0 = dataclasses.replace(CFG_HAND, c=0.0)
    assert int(sel(log, q, 5, 0, KEY0, cfg0).mode) == 1
    assert select_mode_reference(log, q, 5, 0, 0.5, 0, cfg0).mode == 1


def test_zero_weight_mode_scored_by_bonus_alone(fns) -> None:
    """A mode present only with negative similarity has weight 0 → r̂ = 0 (not its reward 1.0)."""
    _, sel, est = fns
    log = empty_log(L, D)
    log.emb[:10, 0] = 1.0
    log.emb[9, :2] = [-0.2, math.sqrt(1 - 0.04)]  # sim −0.2
    log.mode[:10] = [0, 1, 2, 0, 1, 2, 0, 1, 2, 3]
    log.reward[:10] = [0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 1.0]
    log.t[:10], log.valid[:10] = np.arange(10), True
    q = _unit(0)
    e = est(log, q, CFG_HAND)
    assert int(e.n_neighbours) == 10 and float(e.weight_sum[3]) == 0.0 and int(e.counts[3]) == 1
    np.testing.assert_allclose(e.r_hat, [0.1, 0.2, 0.3, 0.0], atol=1e-6)
    bonus = [0.5 * math.sqrt(math.log(10) / n) for n in (3, 3, 3, 1)]
    np.testing.assert_allclose(e.scores, np.array([0.1, 0.2, 0.3, 0.0]) + bonus, atol=1e-6)
    dec = sel(log, q, 5, 0, KEY0, CFG_HAND)
    assert int(dec.branch) == KNN_UCB and int(dec.mode) == 3  # 0.7587 > 0.3 + 0.438
    ref = select_mode_reference(log, q, 5, 0, 0.5, 0, CFG_HAND)
    assert ref.mode == 3 and ref.branch == KNN_UCB


def test_fewer_than_b_hat_valid_entries(fns) -> None:
    _, sel, est = fns
    rng = np.random.default_rng(8)
    for n in (6, 7, 9, 10, 12):  # |N| = min(n, B̂)
        cfg = dataclasses.replace(CFG_GREEDY, w_init=1)
        modes = _modes(rng, [n - 3, 1, 1, 1])
        centre = rng.normal(size=D)
        log = _make_log(rng, modes, centre + 0.1 * rng.normal(size=(n, D)), rng.uniform(-1, 1, n))
        q = (centre + 0.1 * rng.normal(size=D)).astype(np.float32)
        e = est(log, q, cfg)
        assert int(e.n_neighbours) == min(n, 10)
        if n <= 10:
            np.testing.assert_array_equal(e.in_neighbourhood, np.asarray(log.valid))
        er = local_estimates_reference(log, q, cfg)
        np.testing.assert_array_equal(e.in_neighbourhood, er.in_neighbourhood)
        np.testing.assert_allclose(e.scores, er.scores, atol=1e-5)
        dec = sel(log, q, 5, 0, KEY0, cfg)
        ref = select_mode_reference(log, q, 5, 0, 0.5, 0, cfg)
        assert int(dec.branch) == ref.branch == KNN_UCB and int(dec.mode) == ref.mode
    # capacity below B̂ (static k = min(B̂, L))
    small = empty_log(6, D)
    small.emb[:] = rng.normal(size=(6, D))
    small.mode[:], small.reward[:], small.t[:], small.valid[:5] = [0, 1, 2, 3, 0, 1], 0.5, np.arange(6), True
    q = small.emb[0].copy()
    dec = sel(small, q, 5, 0, KEY0, CFG_HAND)
    ref = select_mode_reference(small, q, 5, 0, 0.5, 0, CFG_HAND)
    assert int(dec.n_neighbours) == 5 == ref.n_neighbours and int(dec.branch) == ref.branch
    assert int(dec.mode) == ref.mode


def test_empty_log(fns) -> None:
    _, sel, _ = fns
    log = _garbage(np.random.default_rng(9), empty_log(L, D))
    q = np.ones(D, np.float32)
    for cfg, branch in ((CFG_DEFAULT, WARMUP), (CFG_HAND, FALLBACK)):  # w_init = 3, then w_init = 0
        dec = sel(log, q, 5, 1, KEY0, cfg)
        assert int(dec.branch) == branch and int(dec.mode) == 0
        assert int(dec.n_neighbours) == 0 and float(dec.neighbourhood_sim) == 0.0
        assert np.all(np.asarray(dec.scores) == np.float32(NEG))
        ref = select_mode_reference(log, q, 5, 1, 0.5, 2, cfg)
        assert (ref.branch, ref.mode, ref.n_neighbours) == (branch, 0, 0)


# ---------------------------------------------------------------------------------------------- invariances


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(["random", "deficient", "spread", "clustered"]),
       it=st.integers(0, 6))
def test_invalid_entries_never_influence(fns, seed: int, kind: str, it: int) -> None:
    _, sel, est = fns
    rng = np.random.default_rng(seed)
    log, q, _, rr = make_case(rng, kind)
    other = _garbage(rng, log)  # same valid entries, different garbage
    key = rng.integers(0, 2**32, 2, dtype=np.uint32)
    d1, d2 = _np(sel(log, q, it, rr, key, CFG_DEFAULT)), _np(sel(other, q, it, rr, key, CFG_DEFAULT))
    for a, b in zip(d1, d2):
        np.testing.assert_array_equal(a, b)
    e1, e2 = _np(est(log, q, CFG_DEFAULT)), _np(est(other, q, CFG_DEFAULT))
    v = np.asarray(log.valid)
    for name in LocalEstimates._fields:
        a, b = getattr(e1, name), getattr(e2, name)
        if name == "sim":
            a, b = a[v], b[v]
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert np.all(np.isfinite(d1.scores)) and np.isfinite(d1.neighbourhood_sim)
    # compacting the valid entries into a prefix (order kept, zeros elsewhere) decides the same
    idx = np.flatnonzero(v)
    comp = empty_log(L, D)
    for f in range(4):
        comp[f][: idx.size] = np.asarray(log[f])[idx]
    comp.valid[: idx.size] = True
    d3 = _np(sel(comp, q, it, rr, key, CFG_DEFAULT))
    assert int(d3.mode) == int(d1.mode) and int(d3.branch) == int(d1.branch)
    np.testing.assert_allclose(d3.scores, d1.scores, atol=1e-6)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shift=st.integers(-10**6, 10**6))
def test_time_shift_invariance(fns, seed: int, shift: int) -> None:
    """Shifting every timestamp by a constant leaves weights, r̂ and the decision unchanged (B.5)."""
    _, sel, est = fns
    rng = np.random.default_rng(seed)
    log, q, it, rr = make_case(rng, "clustered")
    v = np.asarray(log.valid)
    shifted = log._replace(t=np.where(v, np.asarray(log.t) + shift, log.t).astype(np.int32))
    e1, e2 = est(log, q, CFG_GREEDY), est(shifted, q, CFG_GREEDY)
    assert int(e2.t_max) == int(e1.t_max) + shift
    for name in ("weight", "r_hat", "scores", "weight_sum"):
        np.testing.assert_array_equal(getattr(e1, name), getattr(e2, name), err_msg=name)
    key = rng.integers(0, 2**32, 2, dtype=np.uint32)
    for a, b in zip(sel(log, q, it, rr, key, CFG_GREEDY), sel(shifted, q, it, rr, key, CFG_GREEDY)):
        np.testing.assert_array_equal(a, b)


def test_decay_anchor_is_latest_in_neighbourhood(fns) -> None:
    _, _, est = fns
    rng = np.random.default_rng(10)
    log, q, _, _ = make_case(rng, "clustered")
    g = CFG_GREEDY.gamma
    e = _np(est(log, q, CFG_GREEDY))
    member, sim, t = e.in_neighbourhood, e.sim.astype(np.float64), np.asarray(log.t)
    t_m = np.where(member, t, 0).astype(np.float64)
    expect = np.where(member, np.maximum(np.where(member, sim, 0), 0) * g ** (int(e.t_max) - t_m), 0.0)
    np.testing.assert_allclose(e.weight, expect, rtol=1e-5)
    assert int(e.t_max) == int(t[member].max())
    # a much newer entry OUTSIDE the neighbourhood (dissimilar) does not move the anchor
    j = np.flatnonzero(~np.asarray(log.valid))[0]
    newer = OutcomeLogArrays(*(np.array(x) for x in log))
    newer.emb[j], newer.mode[j], newer.reward[j] = -q, 0, 1.0
    newer.t[j], newer.valid[j] = int(t[member].max()) + 1000, True
    e2 = _np(est(newer, q, CFG_GREEDY))
    assert not e2.in_neighbourhood[j] and int(e2.t_max) == int(e.t_max)
    np.testing.assert_array_equal(e2.weight, e.weight)
    np.testing.assert_array_equal(e2.r_hat, e.r_hat)
    # moving the anchor forward by Δ multiplies every other weight by γ^Δ; the anchor keeps max(sim, 0)
    a = int(np.flatnonzero(member & (t == int(e.t_max)))[0])
    delta = 5
    moved = OutcomeLogArrays(*(np.array(x) for x in log))
    moved.t[a] += delta
    e3 = _np(est(moved, q, CFG_GREEDY))
    assert int(e3.t_max) == int(e.t_max) + delta
    others = member.copy()
    others[a] = False
    np.testing.assert_allclose(e3.weight[others], e.weight[others] * g ** delta, rtol=1e-5)
    np.testing.assert_allclose(e3.weight[a], max(float(sim[a]), 0.0), rtol=1e-6)
    er = local_estimates_reference(moved, q, CFG_GREEDY)
    np.testing.assert_allclose(e3.r_hat, er.r_hat, atol=1e-5)
    assert not np.allclose(e3.r_hat, e.r_hat, atol=1e-7)


# ---------------------------------------------------------------------------------------------- batch, reward, config


def test_batch_equals_per_task_and_no_retrace(fns, select_batch) -> None:
    _, sel, _ = fns
    rng = np.random.default_rng(11)
    log, _, _, _ = make_case(rng, "clustered")
    v = np.asarray(log.valid)
    src = np.asarray(log.emb)[v]
    queries = src[rng.integers(0, len(src), N)] + 0.05 * rng.normal(size=(N, D)).astype(np.float32)
    queries[-16:] = rng.normal(size=(16, D))  # dissimilar tasks → fallback
    rr = np.arange(N, dtype=np.int32)
    for it in (1, 5, 7):
        keys = rng.integers(0, 2**32, (N, 2), dtype=np.uint32)
        dec = _np(select_batch(log, queries, it, rr, keys))
        assert dec.mode.shape == (N,) and dec.scores.shape == (N, N_MODES)
        for i in range(N):
            one = _np(sel(log, queries[i], it, rr[i], keys[i], CFG_DEFAULT))
            assert int(one.mode) == dec.mode[i] and int(one.branch) == dec.branch[i]
            assert int(one.n_neighbours) == dec.n_neighbours[i]
            np.testing.assert_allclose(one.scores, dec.scores[i], atol=1e-6)
            np.testing.assert_allclose(one.neighbourhood_sim, dec.neighbourhood_sim[i], atol=1e-6)
        if it >= 5:
            assert {FALLBACK, KNN_UCB} <= set(dec.branch.tolist())
    typed = jax.random.split(jax.random.key(0), N)  # typed keys work too
    assert _np(select_batch(log, queries, 5, rr, typed)).mode.shape == (N,)
    assert select_batch.select_batch._cache_size() <= 2  # iteration, rr indices, keys traced (raw, typed keys)
    one = select_batch.select_one  # the jitted single-task entry point agrees too
    for i in range(0, N, 7):
        d1 = _np(one(log, queries[i], 5, rr[i], keys[i]))
        d2 = _np(sel(log, queries[i], 5, rr[i], keys[i], CFG_DEFAULT))
        for a, b in zip(d1, d2):
            np.testing.assert_allclose(a, b, atol=1e-6)


def test_bandit_reward_clipping() -> None:
    y = np.array([1.0, 1.0, 0.0, 0.0, 5.0, -3.0, 0.0])
    k = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 40.0])
    expect = [1.0, 0.95, 0.0, -0.05, 1.0, -1.0, -1.0]
    np.testing.assert_allclose(bandit_reward(y, k, 0.05), expect, atol=1e-7)
    np.testing.assert_allclose(jax.jit(bandit_reward)(y, k, 0.05), expect, atol=1e-7)
    np.testing.assert_allclose(bandit_reward_reference(y, k, 0.05), expect, atol=1e-12)
    assert float(bandit_reward(1.0, 1.0)) == pytest.approx(0.95)  # λ defaults to Table 3's 0.05
    assert float(bandit_reward(0.0, 1.0, 2.0)) == -1.0 and float(bandit_reward(1.0, 1.0, 0.0)) == 1.0


def test_config_defaults_and_validation() -> None:
    c = BanditConfig()
    assert (c.b_hat, c.c, c.gamma, c.rho, c.w_init, c.rr_iterations, c.epsilon, c.lam, c.sim_eps) == (
        10, 0.5, 0.998, 0.7, 3, 3, 0.1, 0.05, 1e-12)
    hash(c)
    for bad in (dict(b_hat=0), dict(b_hat=2.0), dict(gamma=0.0), dict(gamma=1.5), dict(epsilon=1.2),
                dict(w_init=-1), dict(w_init=1.5), dict(c=-0.1)):
        with pytest.raises(ValueError):
            BanditConfig(**bad)


def test_config_grid_vmap() -> None:
    """Dynamic fields vmap: one call sweeps ρ (fallback below the neighbourhood sim, KNN-UCB above)."""
    log, q = _hand_log(), _unit(0)  # neighbourhood mean sim 0.6
    grid = dataclasses.replace(CFG_HAND, rho=np.array([0.3, 0.59, 0.61, 0.9], np.float32))
    axes = dataclasses.replace(CFG_HAND, **{f: None for f in ("c", "gamma", "w_init", "rr_iterations", "epsilon",
                                                             "lam", "sim_eps")}, rho=0)
    dec = jax.jit(jax.vmap(select_mode, in_axes=(None, None, None, None, None, axes)))(log, q, 5, 0, KEY0, grid)
    assert np.asarray(dec.branch).tolist() == [KNN_UCB, KNN_UCB, FALLBACK, FALLBACK]

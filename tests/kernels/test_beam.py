"""Tests for cfjax.kernels.beam: App. B.1 beam search and §4.2 path sampling (UpliftMem).

Most tests use a *lookup* scorer: the task context holds one random value per
subset (``context[bitmask(S)]``, ``d = 2**N``), so values are exact, instances
vary without recompiling, and exact ties are easy to make (integer levels).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfjax.kernels import NEG, BeamResult, archive_size, make_beam_search, make_path_log_prob, make_path_sampler
from cfjax.kernels.reference import beam_search_reference, brute_force_reference, path_log_prob_reference

N, K, TAU = 8, 3, 0.7


def lookup(context, pool, members):
    """G(c, S) = context[Σ_i 2^i·1[i ∈ S]] (pool unused)."""
    bits = jnp.left_shift(members.astype(jnp.int32), jnp.arange(members.shape[0], dtype=jnp.int32))
    return context[jnp.sum(bits)]


def lookup_np(context, pool, members):
    return float(np.asarray(context)[int(np.sum(np.asarray(members, np.int64) << np.arange(len(members))))])


def make_task(seed: int, n: int = N, *, ties: bool = False, p_valid: float = 0.8, budget: float | None = None):
    rng = np.random.default_rng(seed)
    if ties:  # few integer levels: many exact ties, including with ∅ (value 0)
        ctx = rng.integers(-2, 3, 2**n).astype(np.float32)
    else:
        ctx = rng.normal(size=2**n).astype(np.float32)
    pool = np.zeros((n, 1), np.float32)
    costs = rng.integers(1, 6, n).astype(np.float32)  # token counts (integers: exact sums)
    valid = rng.random(n) < p_valid
    b = np.float32(rng.integers(0, 16) if budget is None else budget)
    return ctx, pool, costs, valid, b


def assert_beam_equal(got: BeamResult, ref: BeamResult) -> None:
    for name, a, b in zip(BeamResult._fields, got, ref):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)


# ----------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def search():
    return jax.jit(make_beam_search(lookup, k_max=K))


@pytest.fixture(scope="module")
def search_wide():
    """N = 6, K = 3, W = C(6, 3) = 20 ≥ sets per depth, per_parent = N: exhaustive."""
    return jax.jit(make_beam_search(lookup, k_max=3, width=20, per_parent=6))


@pytest.fixture(scope="module")
def sample_many():
    """vmap over keys of the path sampler for one task."""
    s = make_path_sampler(lookup, k_max=K, tau=TAU)
    return jax.jit(jax.vmap(s, in_axes=(0, None, None, None, None, None)))


@pytest.fixture(scope="module")
def log_prob():
    return jax.jit(make_path_log_prob(lambda _p, c, pool, m: lookup(c, pool, m), k_max=K, tau=TAU))


# -------------------------------------------------------------------------------- beam search

@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), ties=st.booleans(), p_valid=st.sampled_from([0.3, 0.8, 1.0]),
       budget=st.sampled_from([None, 1e9]))
def test_beam_matches_python_reference(search, seed, ties, p_valid, budget) -> None:
    task = make_task(seed, ties=ties, p_valid=p_valid, budget=budget)
    got = search(*task)
    ref = beam_search_reference(lookup_np, *task, k_max=K)
    assert_beam_equal(got, ref)
    # invariants: the result is archived, feasible and within the cap
    m = np.asarray(got.members)
    ctx, _, costs, valid, b = task
    assert m.sum() <= K and not (m & ~valid).any() and costs[m].sum() <= b
    assert np.asarray(got.archive_valid)[0] and float(got.archive_values[0]) == 0.0


def test_binding_per_parent_cap_matches_reference() -> None:
    """With per_parent ≥ W the per-parent cap never binds (the global top-W holds at most W − 1
    better sets of any parent), so check the cap itself with per_parent = 1 < W = 3."""
    s = jax.jit(make_beam_search(lookup, k_max=K, width=3, per_parent=1))
    s2 = jax.jit(make_beam_search(lookup, k_max=K, width=3, per_parent=2))
    differs = 0
    for seed in range(30):
        task = make_task(seed, ties=bool(seed % 2), budget=1e9)
        r = s(*task)
        assert_beam_equal(r, beam_search_reference(lookup_np, *task, k_max=K, width=3, per_parent=1))
        differs += not np.array_equal(np.asarray(r.archive_members), np.asarray(s2(*task).archive_members))
    assert differs > 0  # the cap matters


def test_all_equal_values_and_dedup(search) -> None:
    """Constant scorer: every tie goes to the lexicographic / fewest-members rule."""
    ctx = np.ones(2**N, np.float32)
    task = (ctx, np.zeros((N, 1), np.float32), np.ones(N, np.float32), np.ones(N, bool), np.float32(100))
    r = search(*task)
    am = [tuple(np.flatnonzero(row)) for row in np.asarray(r.archive_members)]
    # depth 1: {0}, {1}; depth 2: {0,1} reached from both parents counts once → {0,1}, {0,2}
    assert am == [(), (0,), (1,), (0, 1), (0, 2), (0, 1, 2), (0, 1, 3)]
    assert tuple(np.flatnonzero(r.members)) == (0,) and float(r.value) == 1.0  # fewest members wins
    assert_beam_equal(r, beam_search_reference(lookup_np, *task, k_max=K))
    # all values 0: ∅ (value 0 by definition) wins the tie
    r0 = search(np.zeros(2**N, np.float32), *task[1:])
    assert not np.asarray(r0.members).any() and float(r0.value) == 0.0


def test_negative_gain_kept_for_complementarity(search) -> None:
    """App. B.1: an intermediate set with negative gain stays in the beam."""
    ctx = np.full(2**N, -5.0, np.float32)
    ctx[0b001] = ctx[0b010] = -1.0  # G({0}) = G({1}) = −1 (best singletons, both negative)
    ctx[0b011] = 2.0  # G({0, 1}) = 2 > 0: complementarity
    task = (ctx, np.zeros((N, 1), np.float32), np.ones(N, np.float32), np.ones(N, bool), np.float32(100))
    r = search(*task)
    assert tuple(np.flatnonzero(r.members)) == (0, 1) and float(r.value) == 2.0


def test_nothing_feasible_returns_empty(search) -> None:
    ctx, pool, costs, valid, _ = make_task(3)
    A = archive_size(K)
    for task in [(ctx, pool, costs, np.zeros(N, bool), np.float32(100)),  # no valid candidate
                 (ctx, pool, costs + 10, valid, np.float32(5))]:  # every memory over budget
        r = search(*task)
        assert not np.asarray(r.members).any() and float(r.value) == 0.0
        assert np.asarray(r.archive_valid).tolist() == [True] + [False] * (A - 1)
        assert np.all(np.asarray(r.archive_values)[1:] == np.float32(NEG)) and np.isfinite(r.archive_values).all()
        assert_beam_equal(r, beam_search_reference(lookup_np, *task, k_max=K))


def test_k_larger_than_feasible_pool(search) -> None:
    ctx, pool, costs, _, _ = make_task(4)
    ctx = np.abs(ctx) + 1.0  # every set positive: the search wants to grow
    valid = np.zeros(N, bool)
    valid[[2, 5]] = True  # only two candidates
    task = (ctx, pool, costs, valid, np.float32(100))
    r = search(*task)
    assert_beam_equal(r, beam_search_reference(lookup_np, *task, k_max=K))
    assert np.asarray(r.archive_valid).tolist() == [True, True, True, True, False, False, False]
    # K = 10 > N = 8 (a second compile): the archive fills up to depth N then stops
    s10 = jax.jit(make_beam_search(lookup, k_max=10))
    for seed in range(5):
        t = make_task(seed, budget=1e9)
        t = (np.abs(t[0]) + 1.0, *t[1:])
        r10 = s10(*t)
        assert_beam_equal(r10, beam_search_reference(lookup_np, *t, k_max=10))
        assert np.asarray(r10.members).sum() <= t[3].sum()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), ties=st.booleans(), budget=st.sampled_from([None, 1e9]))
def test_wide_beam_equals_brute_force(search_wide, seed, ties, budget) -> None:
    task = make_task(seed, n=6, ties=ties, p_valid=0.85, budget=budget)
    r = search_wide(*task)
    m, v = brute_force_reference(lookup_np, *task, k_max=3)
    np.testing.assert_array_equal(np.asarray(r.members), m)
    assert float(r.value) == float(v)


def test_vmap_over_tasks_equals_per_task(search) -> None:
    tasks = [make_task(s, ties=bool(s % 2)) for s in range(12)]
    batched = jax.jit(jax.vmap(make_beam_search(lookup, k_max=K)))(*(np.stack(x) for x in zip(*tasks)))
    for i, t in enumerate(tasks):
        assert_beam_equal(jax.tree.map(lambda x, i=i: x[i], batched), search(*t))


def _mlp_scorer(seed: int, d: int, h: int = 16):
    """A small DeepSets scorer G(c, S) = w·tanh(U c + V mean_{m∈S} pool_m), 0 at ∅."""
    rng = np.random.default_rng(seed)
    U, V = (rng.normal(size=(d, h)).astype(np.float32) / np.sqrt(d) for _ in range(2))
    w = rng.normal(size=h).astype(np.float32)

    def score(context, pool, members):
        f = members.astype(jnp.float32)
        pooled = f @ pool / jnp.maximum(f.sum(), 1.0)
        return jnp.where(f.sum() > 0, jnp.tanh(context @ U + pooled @ V) @ w, 0.0)

    return score


def test_mlp_scorer_matches_reference() -> None:
    d, n, k = 6, 10, 4
    score = _mlp_scorer(0, d)
    search = jax.jit(make_beam_search(score, k_max=k))
    score_one = jax.jit(score)
    rng = np.random.default_rng(1)
    for _ in range(4):
        ctx, pool = rng.normal(size=d).astype(np.float32), rng.normal(size=(n, d)).astype(np.float32)
        costs = rng.integers(50, 400, n).astype(np.float32)
        task = (ctx, pool, costs, rng.random(n) < 0.9, np.float32(900))
        got = search(*task)
        ref = beam_search_reference(lambda c, p, m: float(score_one(c, p, m)), *task, k_max=k)
        np.testing.assert_array_equal(np.asarray(got.members), ref.members)
        np.testing.assert_array_equal(np.asarray(got.archive_members), ref.archive_members)
        np.testing.assert_allclose(np.asarray(got.archive_values), ref.archive_values, rtol=1e-5, atol=1e-5)


def test_compiles_once_for_a_fixed_shape() -> None:
    traces = []

    def counted(*args):
        traces.append(1)
        return make_beam_search(lookup, k_max=K)(*args)

    f = jax.jit(counted)
    for seed in range(4):
        jax.block_until_ready(f(*make_task(seed, ties=bool(seed % 2))))
    assert len(traces) == 1


def test_static_argument_checks() -> None:
    with pytest.raises(TypeError):
        make_beam_search(lookup, k_max=3.0)
    with pytest.raises(ValueError):
        make_beam_search(lookup, k_max=3, width=0)
    with pytest.raises(ValueError):
        make_path_sampler(lookup, k_max=3, tau=0.0)


# ------------------------------------------------------------------------------ path sampling

def _check_path(p, task, n: int = N, k: int = K) -> None:
    """Actions feasible, states consistent, padding only after the path ends."""
    ctx, _, costs, valid, budget = task
    acts, states = np.asarray(p.actions), np.asarray(p.states)
    S, cost, L = np.zeros(n, bool), 0.0, 0
    for t, a in enumerate(acts):
        np.testing.assert_array_equal(states[t], S)
        feas = valid & ~S & (S.sum() < k) & (cost + costs <= budget)
        if a == -1:
            assert not feas.any() or (t > 0 and acts[t - 1] == n) or (t > 0 and acts[t - 1] == -1)
            continue
        assert not (t > 0 and acts[t - 1] in (-1, n))  # nothing after STOP / padding
        assert feas.any() and (a == n or feas[a])
        L += 1
        if a < n:
            S, cost = S.copy(), cost + costs[a]
            S[a] = True
    assert acts[k] == -1 and int(p.length) == L
    np.testing.assert_array_equal(np.asarray(p.members), S)
    assert bool(p.stopped) == (n in acts.tolist())
    assert float(p.value) == (lookup_np(ctx, None, S) if S.any() else 0.0)
    np.testing.assert_allclose(float(p.log_prob), np.asarray(p.log_probs).sum(), rtol=1e-6, atol=1e-6)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), p_valid=st.sampled_from([0.0, 0.4, 1.0]), budget=st.sampled_from([None, 1e9]))
def test_sampled_paths_feasible_and_log_probs_match_reference(sample_many, log_prob, seed, p_valid, budget) -> None:
    task = make_task(seed, p_valid=p_valid, budget=budget)
    task = (task[0] * 2, *task[1:])  # larger gains: longer paths
    keys = jax.random.split(jax.random.PRNGKey(seed % 1000), 8)
    paths = sample_many(keys, *task)
    for i in range(8):
        p = jax.tree.map(lambda x, i=i: x[i], paths)
        _check_path(p, task)
        ref = path_log_prob_reference(lookup_np, *task, np.asarray(p.actions), k_max=K, tau=TAU)
        np.testing.assert_allclose(np.asarray(p.log_probs), ref, rtol=1e-5, atol=1e-5)
        lp = log_prob(None, *task, p.actions)
        assert bool(lp.consistent) and int(lp.length) == int(p.length)
        np.testing.assert_allclose(np.asarray(lp.log_probs), np.asarray(p.log_probs), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(lp.members), np.asarray(p.members))


def test_stop_probability_and_first_step_frequencies(sample_many, log_prob) -> None:
    ctx, pool, costs, valid, _ = make_task(11, p_valid=0.75, budget=1e9)
    task = (ctx, pool, costs, valid, np.float32(1e9))
    singles = np.array([ctx[1 << m] for m in range(N)], np.float64)
    Z = 1.0 + np.exp(singles[valid] / TAU).sum()  # STOP contributes exp(0/τ) = 1
    stop_path = np.array([N, -1, -1, -1], np.int32)
    lp = log_prob(None, *task, stop_path)
    np.testing.assert_allclose(float(lp.total), -np.log(Z), rtol=1e-5)
    assert int(lp.length) == 1 and bool(lp.consistent)
    # empirical first actions over many keys ≈ softmax (4σ binomial bands)
    n_keys = 4000
    paths = sample_many(jax.random.split(jax.random.PRNGKey(0), n_keys), *task)
    first = np.asarray(paths.actions[:, 0])
    probs = np.zeros(N + 1)
    probs[:N][valid] = np.exp(singles[valid] / TAU) / Z
    probs[N] = 1.0 / Z
    freq = np.bincount(first, minlength=N + 1) / n_keys
    band = 4 * np.sqrt(probs * (1 - probs) / n_keys) + 1e-9
    assert np.all(np.abs(freq - probs) <= band), (freq, probs)
    assert np.all(freq[:N][~valid] == 0)
    # seeds differ: different keys give different paths
    assert len({tuple(a) for a in np.asarray(paths.actions[:50]).tolist()}) > 1


def test_forced_stop_at_cap_and_empty_pool(sample_many) -> None:
    ctx = np.full(2**N, 0.0, np.float32)
    for mask in range(1, 2**N):  # every addition gains +50: STOP is all but impossible at τ = 0.7
        ctx[mask] = 50.0 * bin(mask).count("1")
    task = (ctx, np.zeros((N, 1), np.float32), np.ones(N, np.float32), np.ones(N, bool), np.float32(1e9))
    paths = sample_many(jax.random.split(jax.random.PRNGKey(1), 8), *task)
    assert np.all(np.asarray(paths.length) == K) and not np.asarray(paths.stopped).any()
    assert np.all(np.asarray(paths.actions[:, K]) == -1) and np.all(np.asarray(paths.members).sum(1) == K)
    # nothing feasible: immediate forced stop, no sampled action, empty set
    empty = sample_many(jax.random.split(jax.random.PRNGKey(2), 8), *task[:3], np.zeros(N, bool), task[4])
    assert np.all(np.asarray(empty.actions) == -1) and np.all(np.asarray(empty.log_probs) == 0)
    assert np.all(np.asarray(empty.length) == 0) and not np.asarray(empty.members).any()


def test_log_prob_flags_inconsistent_paths(log_prob) -> None:
    task = make_task(5, p_valid=1.0, budget=1e9)
    bad_paths = [[0, 0, -1, -1],  # repeat
                 [N, 1, -1, -1],  # action after STOP
                 [0, -1, -1, -1],  # truncated although additions are feasible
                 [0, 1, 2, 3]]  # K + 1 additions
    for a in bad_paths:
        lp = log_prob(None, *task, np.asarray(a, np.int32))
        assert not bool(lp.consistent), a
        assert np.isfinite(np.asarray(lp.log_probs)).all()
    assert bool(log_prob(None, *task, np.asarray([0, 1, 2, -1], np.int32)).consistent)


def test_log_prob_is_differentiable_in_scorer_params() -> None:
    d, h, n, k = 4, 8, 6, 3

    def score(params, context, pool, members):
        f = members.astype(jnp.float32)
        pooled = f @ pool / jnp.maximum(f.sum(), 1.0)
        return jnp.where(f.sum() > 0, jnp.tanh(context @ params["U"] + pooled @ params["V"]) @ params["w"], 0.0)

    def score_np(params, context, pool, members):
        f = np.asarray(members, np.float64)
        pooled = f @ pool / max(f.sum(), 1.0)
        return float(np.tanh(context @ params["U"] + pooled @ params["V"]) @ params["w"]) if f.sum() else 0.0

    rng = np.random.default_rng(0)
    params = {"U": rng.normal(size=(d, h)).astype(np.float32), "V": rng.normal(size=(d, h)).astype(np.float32),
              "w": rng.normal(size=h).astype(np.float32)}
    ctx, pool = rng.normal(size=d).astype(np.float32), rng.normal(size=(n, d)).astype(np.float32)
    costs, valid = np.ones(n, np.float32), np.array([1, 1, 0, 1, 1, 1], bool)
    task = (ctx, pool, costs, valid, np.float32(2.5))  # budget: at most 2 members
    lp_fn = jax.jit(make_path_log_prob(score, k_max=k, tau=0.5))
    # the sampler under traced params (built inside jit: params are an argument, not constants)
    sampler = jax.jit(lambda p, key, *t: make_path_sampler(functools.partial(score, p), k_max=k, tau=0.5)(key, *t))
    path = sampler(params, jax.random.PRNGKey(3), *task)
    actions = jnp.asarray([3, 0, -1, -1], jnp.int32)  # budget forces the stop after two additions
    f = lambda p: lp_fn(p, *task, actions).total  # noqa: E731
    g = jax.jit(jax.grad(f))(params)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(g))
    assert any(np.abs(np.asarray(x)).sum() > 0 for x in jax.tree.leaves(g))
    # directional derivative vs central finite difference
    direction = jax.tree.map(lambda x: rng.normal(size=x.shape).astype(np.float32), params)
    eps = 1e-2
    shift = lambda s: jax.tree.map(lambda p, v: p + s * eps * v, params, direction)  # noqa: E731
    fd = (float(f(shift(1.0))) - float(f(shift(-1.0)))) / (2 * eps)
    an = sum(float(jnp.vdot(a, b)) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(direction)))
    np.testing.assert_allclose(an, fd, rtol=2e-2, atol=2e-3)
    # recomputing a sampled path under the sampling params reproduces its log-probs
    re = lp_fn(params, *task, path.actions)
    assert bool(re.consistent)
    np.testing.assert_allclose(np.asarray(re.log_probs), np.asarray(path.log_probs), rtol=1e-5, atol=1e-5)
    ref = path_log_prob_reference(functools.partial(score_np, params), *task, np.asarray(actions), k_max=k, tau=0.5)
    np.testing.assert_allclose(np.asarray(lp_fn(params, *task, actions).log_probs), ref, rtol=1e-5, atol=1e-5)

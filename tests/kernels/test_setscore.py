"""Tests for the UpliftMem set scorer and losses (§4.1, §4.4, App. C.1–C.3)."""

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import cfjax.kernels as S
from cfjax.kernels import reference as R

N, DC, DM, H, F = 6, 8, 10, 32, 16  # pool size, context dim, member dim, hidden, features
MODEL = S.SetScorer(hidden=H, features=F)
CFG = S.UpliftLossConfig()
# a non-default config, so the tests see that every field is used
CFG2 = S.UpliftLossConfig(
    delta_huber=0.3, w_min=0.2, tau_ref=0.5, eps_sign=0.2, eps_pair=0.15,
    lam_reg=0.7, lam_sign=1.3, lam_pair=2.0, eps_policy=0.1, a_max=0.6, eta_neg=0.25,
)


def _f32(x):
    return jnp.asarray(x, jnp.float32)


def _task(seed, n=N):
    rng = np.random.default_rng(seed)
    return _f32(rng.normal(size=DC)), _f32(rng.normal(size=(n, DM)))


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def params():
    """Initial params with a, b moved off (1, 0) so the affine head is exercised."""
    init = jax.jit(functools.partial(S.init_params, MODEL, n_pool=N, d_context=DC, d_member=DM))
    p = init(jax.random.key(0))
    return {**p, "a": _f32(1.7), "b": _f32(-0.3)}


@pytest.fixture(scope="module")
def score():
    return jax.jit(S.make_score_fn(MODEL))


@pytest.fixture(scope="module")
def score_feat():
    """(params, c, pool, mask) -> (G, φ), jitted."""
    return jax.jit(lambda p, c, x, m: MODEL.apply({"params": p}, c, x, m, return_features=True))


@pytest.fixture(scope="module")
def grad_score():
    return jax.jit(jax.grad(S.make_score_fn(MODEL)))


# ---------------------------------------------------------------- config
def test_config_defaults_frozen_and_validated():
    c = S.UpliftLossConfig()
    assert (c.delta_huber, c.w_min, c.tau_ref, c.eps_sign, c.eps_pair) == (1.0, 0.1, 0.2, 0.05, 0.0)
    assert (c.lam_reg, c.lam_sign, c.lam_pair) == (1.0, 0.5, 0.5)
    assert (c.eps_policy, c.a_max, c.eta_neg, c.tau_tr) == (0.02, 1.0, 0.5, 1.0)
    hash(c)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.w_min = 0.3
    for bad in (dict(delta_huber=0.0), dict(tau_ref=-1.0), dict(w_min=1.5), dict(eta_neg=-0.1)):
        with pytest.raises(ValueError):
            S.UpliftLossConfig(**bad)


# ---------------------------------------------------------------- scorer
def test_empty_set_is_exactly_zero_with_finite_zero_gradient(params, score, score_feat, grad_score):
    c, pool = _task(1)
    empty = jnp.zeros((N,), bool)
    assert float(score(params, c, pool, empty)) == 0.0
    g, f = score_feat(params, c, pool, empty)
    assert float(g) == 0.0 and f.shape == (F,) and not np.any(np.asarray(f))
    grads = grad_score(params, c, pool, empty)
    for leaf in jax.tree.leaves(grads):
        assert np.all(np.isfinite(leaf)) and not np.any(np.asarray(leaf))
    # a nonempty set gets a nonzero, finite gradient
    grads = grad_score(params, c, pool, jnp.arange(N) < 2)
    leaves = [np.asarray(x) for x in jax.tree.leaves(grads)]
    assert all(np.all(np.isfinite(x)) for x in leaves) and any(np.any(x) for x in leaves)


def test_matches_numpy_reference(params, score_feat):
    rng = np.random.default_rng(2)
    c, pool = _task(2)
    masks = [np.zeros(N, bool), np.eye(N, dtype=bool)[3], np.ones(N, bool)]
    masks += [rng.random(N) < 0.5 for _ in range(5)]
    for m in masks:
        g, f = score_feat(params, c, pool, jnp.asarray(m))
        g_ref, f_ref = R.set_scorer_reference(params, np.asarray(c), np.asarray(pool), m, True)
        np.testing.assert_allclose(float(g), g_ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(f), f_ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(perm=hst.permutations(list(range(N))), bits=hst.lists(hst.booleans(), min_size=N, max_size=N),
       seed=hst.integers(0, 2**16))
def test_permutation_invariance(params, score_feat, perm, bits, seed):
    c, pool = _task(seed)
    mask = jnp.asarray(bits)
    perm = np.asarray(perm)
    g, f = score_feat(params, c, pool, mask)
    gp, fp = score_feat(params, c, pool[perm], mask[perm])
    np.testing.assert_allclose(float(gp), float(g), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fp), np.asarray(f), rtol=1e-5, atol=1e-5)


def test_masked_rows_have_no_influence(params, score_feat, grad_score):
    rng = np.random.default_rng(3)
    c, pool = _task(3)
    for _ in range(4):
        mask = rng.random(N) < 0.5
        mask[rng.integers(N)] = True
        garbage = np.where(mask[:, None], np.asarray(pool), 1e4 * rng.normal(size=(N, DM)))
        g, f = score_feat(params, c, pool, jnp.asarray(mask))
        g2, f2 = score_feat(params, c, _f32(garbage), jnp.asarray(mask))
        assert float(g2) == float(g)
        np.testing.assert_array_equal(np.asarray(f2), np.asarray(f))
        d1 = grad_score(params, c, pool, jnp.asarray(mask))
        d2 = grad_score(params, c, _f32(garbage), jnp.asarray(mask))
        for x, y in zip(jax.tree.leaves(d1), jax.tree.leaves(d2)):
            np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-5, atol=1e-6)


def test_vmap_over_tasks_and_over_masks(params, score):
    T = 4
    rng = np.random.default_rng(4)
    cs, pools = zip(*[_task(10 + t) for t in range(T)])
    cs, pools = jnp.stack(cs), jnp.stack(pools)
    masks = jnp.asarray(rng.random((T, N)) < 0.5).at[0].set(False)  # task 0: ∅
    fn = S.make_score_fn(MODEL)
    per_task = jax.jit(jax.vmap(fn, in_axes=(None, 0, 0, 0)))(params, cs, pools, masks)
    ref = [float(score(params, cs[t], pools[t], masks[t])) for t in range(T)]
    np.testing.assert_allclose(np.asarray(per_task), ref, rtol=1e-5, atol=1e-6)
    assert float(per_task[0]) == 0.0
    # alternative masks of one task (what beam search does)
    alt = jnp.asarray(rng.random((7, N)) < 0.5)
    per_mask = jax.jit(jax.vmap(fn, in_axes=(None, None, None, 0)))(params, cs[1], pools[1], alt)
    ref = [float(score(params, cs[1], pools[1], m)) for m in alt]
    np.testing.assert_allclose(np.asarray(per_mask), ref, rtol=1e-5, atol=1e-6)


def test_one_trace_for_fixed_shapes(params):
    traces = []
    fn = S.make_score_fn(MODEL)

    @jax.jit
    def counted(p, c, x, m):
        traces.append(1)
        return fn(p, c, x, m)

    rng = np.random.default_rng(8)
    for seed in range(5):
        c, pool = _task(seed)
        counted(params, c, pool, jnp.asarray(rng.random(N) < 0.5)).block_until_ready()
    assert len(traces) == 1


def test_features_shape_and_affine_readout(params, score_feat):
    c, pool = _task(5)
    w, b_z, a, b = S.readout(params)
    assert w.shape == (F,)
    phi = jax.jit(S.make_feature_fn(MODEL))
    for m in (np.eye(N, dtype=bool)[0], np.arange(N) < 3, np.ones(N, bool)):
        g, f = score_feat(params, c, pool, jnp.asarray(m))
        assert f.shape == (F,) and f.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(phi(params, c, pool, jnp.asarray(m))), np.asarray(f))
        np.testing.assert_allclose(float(g), float(a * (w @ f + b_z) + b), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- fitting set functions
NF = 5  # all 2^5 subsets of a 5-member pool
SUBSETS = np.array(list(itertools.product([False, True], repeat=NF)))  # bool[32, 5]
A_IN, B_IN = SUBSETS[:, 0], SUBSETS[:, 1]
COMPLEMENT = (A_IN & B_IN & (SUBSETS.sum(1) == 2)).astype(np.float32)  # only {a, b} is worth 1
CONFLICT = (0.5 * A_IN + 0.5 * B_IN - 1.5 * (A_IN & B_IN)).astype(np.float32)  # a, b good alone, bad together


@pytest.fixture(scope="module")
def fit():
    """(key, target f32[32]) -> fitted G over all subsets; MSE, 400 Adam steps in one scan."""
    model = S.SetScorer(hidden=32, features=32)
    score = S.make_score_fn(model)
    rng = np.random.default_rng(6)
    c, pool = _f32(rng.normal(size=DC)), _f32(rng.normal(size=(NF, DM)))
    masks = jnp.asarray(SUBSETS)
    opt = optax.adam(1e-2)
    all_sets = jax.vmap(score, in_axes=(None, None, None, 0))

    @jax.jit
    def run(key, target):
        p = S.init_params(model, key, n_pool=NF, d_context=DC, d_member=DM)

        def step(carry, _):
            p, o = carry
            g = jax.grad(lambda p: jnp.mean((all_sets(p, c, pool, masks) - target) ** 2))(p)
            u, o = opt.update(g, o, p)
            return (optax.apply_updates(p, u), o), None

        (p, _), _ = jax.lax.scan(step, (p, opt.init(p)), None, length=400)
        return all_sets(p, c, pool, masks)

    return run


@pytest.mark.parametrize("name,target", [("complementarity", COMPLEMENT), ("conflict", CONFLICT)])
def test_fits_interaction_set_functions(fit, name, target):
    g = np.asarray(fit(jax.random.key(7), _f32(target)))
    assert g[0] == 0.0  # ∅ stays exactly 0
    err = np.abs(g - target)
    assert err.max() < 0.15, (name, err.max())
    if name == "complementarity":
        pair = np.flatnonzero(target == 1.0)[0]
        assert g[pair] - np.delete(g, pair).max() > 0.7
    else:
        both = A_IN & B_IN
        assert g[both].max() < min(g[A_IN & ~B_IN].min(), g[B_IN & ~A_IN].min()) - 0.7


# ---------------------------------------------------------------- value losses
def _loss_inputs(seed, T=3, M=5, p_valid=0.7):
    rng = np.random.default_rng(seed)
    G = rng.normal(scale=1.5, size=(T, M))
    # rounding makes exact ties; the offset keeps labels off the ε thresholds
    y = np.round(rng.uniform(-2, 2, size=(T, M)), 1) + 0.013
    y[0, :2] = [0.03, -0.01]  # inside ε_sign
    mask = rng.random((T, M)) < p_valid
    return G.astype(np.float32), y.astype(np.float32), mask


LOSSES = [
    ("reg", S.reg_loss, R.reg_loss_reference),
    ("sign", S.sign_loss, R.sign_loss_reference),
    ("pair", S.pair_loss, R.pair_loss_reference),
    ("value", lambda *a, cfg: S.value_loss(*a, cfg=cfg)[0], R.value_loss_reference),
]


@pytest.mark.parametrize("cfg", [CFG, CFG2], ids=["default", "custom"])
@pytest.mark.parametrize("name,fn,ref", LOSSES, ids=[x[0] for x in LOSSES])
def test_value_losses_match_reference(name, fn, ref, cfg):
    jf = jax.jit(functools.partial(fn, cfg=cfg))
    grad = jax.jit(jax.grad(functools.partial(fn, cfg=cfg)))
    for seed in range(4):
        G, y, mask = _loss_inputs(seed, p_valid=[0.7, 1.0, 0.3, 0.0][seed])
        got = float(jf(G, y, mask))
        np.testing.assert_allclose(got, ref(G, y, mask, cfg), rtol=1e-5, atol=1e-6)
        d = np.asarray(grad(_f32(G), y, mask))
        assert np.all(np.isfinite(d))
        assert not np.any(d[~mask])  # masked entries get no gradient
        if not mask.any():
            assert got == 0.0
    # sign: no |y| > ε_sign; pair: all labels tied → exactly 0 (not NaN), zero gradient
    if name in ("sign", "pair"):
        G, y, _ = _loss_inputs(9)
        tied = np.full_like(y, 0.01)
        full = np.ones_like(y, bool)
        assert float(jf(G, tied, full)) == 0.0
        assert not np.any(np.asarray(grad(_f32(G), tied, full)))


def test_value_loss_parts_and_weights():
    G, y, mask = _loss_inputs(11)
    total, parts = jax.jit(functools.partial(S.value_loss, cfg=CFG2))(G, y, mask)
    assert isinstance(parts, S.ValueLossParts)
    np.testing.assert_allclose(
        float(total), CFG2.lam_reg * parts.reg + CFG2.lam_sign * parts.sign + CFG2.lam_pair * parts.pair,
        rtol=1e-6)
    # masked garbage in G does not reach the loss
    G2 = np.where(mask, G, np.float32(1e30))
    np.testing.assert_allclose(float(S.value_loss(G2, y, mask, CFG2)[0]), float(total), rtol=1e-6)


def test_huber_and_w_mag():
    x = np.linspace(-3, 3, 61).astype(np.float32)
    np.testing.assert_allclose(np.asarray(S.huber(x, 1.0)), R.huber_reference(x, 1.0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(S.huber(x, 1.0)), np.asarray(optax.huber_loss(x, delta=1.0)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(S.w_mag(_f32([0.0, 0.01, -0.1, 0.2, -1.5]), CFG)),
                               [0.1, 0.1, 0.5, 1.0, 1.0], rtol=1e-6)


# ---------------------------------------------------------------- policy
def test_omega_table():
    y = _f32([0.0, 0.02, -0.02, 0.021, 0.5, 1.0, 3.0, -0.021, -0.5, -1.0, -3.0])
    want = [0.0, 0.0, 0.0, 0.021, 0.5, 1.0, 1.0, -0.0105, -0.25, -0.5, -0.5]
    np.testing.assert_allclose(np.asarray(jax.jit(S.omega)(y)), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(R.omega_reference(np.asarray(y)), want, rtol=1e-6, atol=1e-7)
    y2 = _f32([0.05, 0.2, 2.0, -0.05, -0.2, -2.0])
    np.testing.assert_allclose(np.asarray(S.omega(y2, CFG2)), [0.0, 0.2, 0.6, 0.0, -0.05, -0.15], rtol=1e-6)


@pytest.mark.parametrize("cfg", [CFG, CFG2], ids=["default", "custom"])
def test_policy_loss_reference_and_stop_gradient(cfg):
    rng = np.random.default_rng(12)
    P, T = 6, 4
    step_logp = -rng.exponential(size=(P, T)).astype(np.float32)
    step_mask = np.arange(T)[None, :] < rng.integers(0, T + 1, size=P)[:, None]
    y = _f32(rng.uniform(-2, 2, size=P))
    mask = np.array([1, 1, 1, 1, 0, 1], bool)
    logp_sum = np.where(step_mask, step_logp, 0).sum(1)
    lengths = step_mask.sum(1)
    loss = jax.jit(functools.partial(S.policy_loss, cfg=cfg))
    got = float(loss(logp_sum, lengths, y, mask))
    np.testing.assert_allclose(got, R.policy_loss_reference(logp_sum, lengths, y, mask, cfg), rtol=1e-5)
    got_steps = float(jax.jit(functools.partial(S.policy_loss_steps, cfg=cfg))(step_logp, step_mask, y, mask))
    np.testing.assert_allclose(got_steps, got, rtol=1e-5)
    # gradient wrt the ω-source is exactly zero; wrt log-probs it is −ω/(L·#paths)
    dy = jax.jit(jax.grad(functools.partial(S.policy_loss, cfg=cfg), argnums=2))(logp_sum, lengths, y, mask)
    assert not np.any(np.asarray(dy))
    dl = jax.jit(jax.grad(functools.partial(S.policy_loss, cfg=cfg)))(_f32(logp_sum), lengths, y, mask)
    want = -R.omega_reference(np.asarray(y), cfg) / np.maximum(lengths, 1) / mask.sum() * mask
    np.testing.assert_allclose(np.asarray(dl), want, rtol=1e-5, atol=1e-7)
    assert float(loss(logp_sum, lengths, y, np.zeros(P, bool))) == 0.0


def test_beam_path_log_prob_trains_the_scorer(params):
    """Path log-probabilities (owned by kernels/beam.py) through this scorer: finite gradients."""
    from cfjax.kernels import beam

    score = S.make_score_fn(MODEL)
    key = jax.random.PRNGKey(3)
    c = jax.random.normal(key, (DC,))
    pool = jax.random.normal(jax.random.fold_in(key, 1), (N, DM))
    costs = jnp.ones((N,))
    valid = jnp.ones((N,), bool)
    budget = jnp.float32(10.0)
    sampler = beam.make_path_sampler(lambda ctx, p, m: score(params, ctx, p, m), k_max=3, tau=0.7)
    path = sampler(jax.random.PRNGKey(4), c, pool, costs, valid, budget)
    log_prob = beam.make_path_log_prob(score, k_max=3, tau=0.7)
    lp = log_prob(params, c, pool, costs, valid, budget, path.actions)
    assert bool(lp.consistent)
    np.testing.assert_allclose(float(lp.total), float(path.log_prob), atol=1e-4)
    grads = jax.grad(lambda p: log_prob(p, c, pool, costs, valid, budget, path.actions).total)(params)
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))

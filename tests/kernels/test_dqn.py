"""Tests for the CounterMem selector DQN (App. C.2, Eq. 10-13, Table 3)."""

import dataclasses

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import cfjax.kernels as D
from cfjax.kernels import reference as R

MASKED_ARGMAX = jax.jit(D.masked_argmax)
MASKED_MAX = jax.jit(D.masked_max)
REPLAY_ADD = jax.jit(D.replay_add)
REPLAY_SAMPLE = jax.jit(D.replay_sample, static_argnums=2)


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sel():
    """Default (Table 3) selector, jitted."""
    return D.jit_selector(D.make_dqn(D.DQNConfig()))


@pytest.fixture(scope="module")
def state(sel):
    return sel.init(jax.random.key(0), sel.config.hparams())


@pytest.fixture(scope="module")
def act_many(sel):
    """``act`` vmapped over keys: (state, keys[N], obs, mask, hp) -> i32[N]."""
    return jax.jit(jax.vmap(sel.act, in_axes=(None, 0, None, None, None)))


def _obs(seed, n=None):
    shape = (98,) if n is None else (n, 98)
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def _transition(rng, obs_dim=98, n_actions=5):
    mask = rng.random(n_actions) < 0.5
    mask[0] = True
    if rng.random() < 0.2:
        mask[:] = False  # zero-padded terminal masks must not leak a sentinel
    return D.Transition(
        obs=jnp.asarray(rng.normal(size=obs_dim), jnp.float32),
        action=jnp.asarray(rng.integers(0, n_actions), jnp.int32),
        reward=jnp.asarray(rng.normal(), jnp.float32),
        next_obs=jnp.asarray(rng.normal(size=obs_dim), jnp.float32),
        next_mask=jnp.asarray(mask),
        done=jnp.asarray(float(rng.random() < 0.3), jnp.float32),
    )


# ---------------------------------------------------------------- config
def test_config_defaults_table3():
    c = D.DQNConfig()
    assert c.total_decisions == 2000 and c.hidden == (64, 64)
    assert c.lr == 1e-3 and c.adam_eps == 1e-8
    assert (c.learning_starts, c.train_every, c.gamma) == (100, 4, 0.95)
    assert (c.buffer_capacity, c.batch_size, c.target_sync_every) == (10_000, 32, 250)
    assert (c.eps_start, c.eps_end, c.eps_decay_fraction) == (0.30, 0.05, 0.5)
    assert (c.checkpoint_every, c.obs_dim, c.n_actions) == (250, 98, 5)
    assert (c.lam_w, c.lam_f, c.lam_tau, c.tau0) == (0.15, 0.25, 0.02, 1e4)
    assert c.seeds == (0, 1, 2, 3, 4)
    hash(c)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.lr = 1.0  # type: ignore[misc]
    hp = c.hparams()
    assert isinstance(hp, D.DQNHParams)
    for leaf in hp:
        assert leaf.shape == () and leaf.dtype == jnp.float32
    np.testing.assert_allclose(
        np.array(hp), [1e-3, 0.95, 0.30, 0.05, 0.15, 0.25, 0.02], rtol=1e-6
    )


# ---------------------------------------------------------------- Eq. 10
def test_reward_eq10_hand_computed():
    hp = D.DQNConfig().hparams()
    # Solved at the final decision; 2 calls, 1 failure, 500 tokens:
    # 1 - 0.15*2 - 0.25*1 - 0.02*500/1e4 = 1 - 0.3 - 0.25 - 0.001 = 0.449
    assert float(D.reward(True, 2, 1, 500, hp)) == pytest.approx(0.449, abs=1e-6)
    # Not solved: -0.15 - 0.25 - 0.02*10000/1e4 = -0.42
    assert float(D.reward(False, 1, 1, 10_000, hp)) == pytest.approx(-0.42, abs=1e-6)
    # Free non-final decision pays nothing; solved with no cost pays exactly 1.
    assert float(D.reward(False, 0, 0, 0, hp)) == 0.0
    assert float(D.reward(True, 0, 0, 0, hp)) == 1.0
    # Only tokens: 2000 tokens -> -0.02 * 0.2 = -0.004
    assert float(D.reward(False, 0, 0, 2000, hp)) == pytest.approx(-0.004, abs=1e-7)
    # NumPy scalars, a config as `hp`, and a custom tau0.
    r = D.reward(np.bool_(True), np.float32(1), np.int64(0), np.float64(100), D.DQNConfig(), tau0=100.0)
    assert float(r) == pytest.approx(1 - 0.15 - 0.02, abs=1e-6)
    # Elementwise on arrays, and under jit.
    rs = jax.jit(D.reward)(
        np.array([True, False]), np.array([1.0, 3.0]), np.array([0.0, 2.0]), np.array([0.0, 5e3]), hp
    )
    np.testing.assert_allclose(np.asarray(rs), [0.85, -0.45 - 0.5 - 0.01], atol=1e-6)


# ---------------------------------------------------------------- masks
_Q = hnp.arrays(
    np.float32,
    (8, 5),
    # XLA on CPU flushes subnormals to zero; they are not a property of the kernel
    elements=hst.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False, width=32),
)
_MASK = hnp.arrays(np.bool_, (8, 5))


@settings(max_examples=60, deadline=None)
@given(q=_Q, mask=_MASK)
def test_masked_argmax_max_never_invalid(q, mask):
    mask = mask.copy()
    empty = ~mask.any(axis=1)
    a = np.asarray(MASKED_ARGMAX(q, mask))
    m = np.asarray(MASKED_MAX(q, mask))
    for i in range(8):
        if empty[i]:
            assert m[i] == D.NEG and np.isfinite(m[i])
            continue
        assert mask[i, a[i]]
        assert q[i, a[i]] == q[i][mask[i]].max()
        assert m[i] == q[i][mask[i]].max()


@settings(max_examples=30, deadline=None)
@given(q=_Q)
def test_masked_argmax_only_skip(q):
    mask = np.zeros((8, 5), bool)
    mask[:, 0] = True
    q = q.copy()
    q[:, 1:] += 1e7  # invalid actions much better
    np.testing.assert_array_equal(np.asarray(MASKED_ARGMAX(q, mask)), 0)
    np.testing.assert_array_equal(np.asarray(MASKED_MAX(q, mask)), q[:, 0])


# ---------------------------------------------------------------- ε-greedy
def test_epsilon_schedule(sel):
    hp = sel.config.hparams()
    eps = jax.jit(jax.vmap(sel.epsilon, in_axes=(0, None)))(jnp.array([0, 500, 1000, 1500, 2000, 5000]), hp)
    np.testing.assert_allclose(np.asarray(eps), [0.30, 0.175, 0.05, 0.05, 0.05, 0.05], atol=1e-6)


def test_eps_greedy_never_invalid(sel, state, act_many):
    hp = sel.config.hparams()
    keys = jax.random.split(jax.random.key(1), 4000)
    obs = _obs(0)
    for pattern in ([1, 0, 1, 0, 0], [1, 1, 1, 1, 0], [1, 0, 0, 0, 1], [0, 0, 1, 0, 0]):
        mask = jnp.asarray(pattern, bool)
        for h in (hp, hp._replace(eps_start=jnp.float32(1.0), eps_end=jnp.float32(1.0))):
            actions = np.asarray(act_many(state, keys, obs, mask, h))
            valid = np.asarray(pattern, bool)
            valid[0] = True  # skip is always valid
            assert valid[actions].all()


def test_eps_one_uniform_over_valid(sel, state, act_many):
    hp = sel.config.hparams()._replace(eps_start=jnp.float32(1.0), eps_end=jnp.float32(1.0))
    n = 6000
    keys = jax.random.split(jax.random.key(2), n)
    mask = jnp.asarray([True, False, True, True, False])
    actions = np.asarray(act_many(state, keys, _obs(1), mask, hp))
    counts = np.bincount(actions, minlength=5)
    assert counts[1] == counts[4] == 0
    expected = n / 3
    sd = np.sqrt(n * (1 / 3) * (2 / 3))
    assert np.all(np.abs(counts[[0, 2, 3]] - expected) < 5 * sd), counts


def test_eps_zero_is_greedy_and_only_skip(sel, state, act_many):
    hp0 = sel.config.hparams()._replace(eps_start=jnp.float32(0.0), eps_end=jnp.float32(0.0))
    hp1 = hp0._replace(eps_start=jnp.float32(1.0), eps_end=jnp.float32(1.0))
    keys = jax.random.split(jax.random.key(3), 500)
    obs = _obs(2)
    mask = jnp.asarray([True, True, False, True, True])
    g = int(sel.greedy(state.params, obs, mask))
    assert np.all(np.asarray(act_many(state, keys, obs, mask, hp0)) == g)
    q = np.asarray(sel.q_values(state.params, obs))
    assert g == int(np.argmax(np.where(np.asarray(mask), q, -np.inf)))
    only_skip = jnp.asarray([True, False, False, False, False])
    for h in (hp0, hp1):
        assert np.all(np.asarray(act_many(state, keys, obs, only_skip, h)) == 0)
    assert int(sel.greedy(state.params, obs, only_skip)) == 0
    # Batched observations work directly as well.
    obs_b = _obs(3, 7)
    masks_b = jnp.tile(mask, (7, 1))
    a_b = sel.act(state, jax.random.key(4), obs_b, masks_b, hp0)
    assert a_b.shape == (7,)
    np.testing.assert_array_equal(np.asarray(a_b), np.asarray(sel.greedy(state.params, obs_b, masks_b)))


# ---------------------------------------------------------------- replay
def test_replay_ring_wraparound():
    rep = D.replay_init(3, obs_dim=2, n_actions=5)
    for i in range(5):
        rep = REPLAY_ADD(
            rep,
            jnp.full((2,), i, jnp.float32),
            jnp.int32(i % 5),
            jnp.float32(i),
            jnp.full((2,), -i, jnp.float32),
            jnp.asarray([True, i % 2 == 0, False, False, True]),
            jnp.float32(i == 4),
        )
        assert int(rep.size) == min(i + 1, 3)
        assert int(rep.ptr) == (i + 1) % 3
    np.testing.assert_array_equal(np.asarray(rep.reward), [3.0, 4.0, 2.0])
    np.testing.assert_array_equal(np.asarray(rep.obs[:, 0]), [3.0, 4.0, 2.0])
    np.testing.assert_array_equal(np.asarray(rep.next_obs[:, 1]), [-3.0, -4.0, -2.0])
    np.testing.assert_array_equal(np.asarray(rep.action), [3, 4, 2])
    np.testing.assert_array_equal(np.asarray(rep.done), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(np.asarray(rep.next_mask[:, 1]), [False, True, True])


def test_replay_sample_filled_part_only():
    rep = D.replay_init(10, obs_dim=2, n_actions=5)
    for i in range(3):
        rep = REPLAY_ADD(
            rep, jnp.full((2,), i + 1, jnp.float32), jnp.int32(0), jnp.float32(i + 1),
            jnp.zeros((2,), jnp.float32), jnp.ones((5,), bool), jnp.float32(0),
        )
    batch = REPLAY_SAMPLE(rep, jax.random.key(0), 600)
    rewards = np.asarray(batch.reward)
    assert set(np.unique(rewards)) == {1.0, 2.0, 3.0}
    assert np.all(np.asarray(batch.obs[:, 0]) == rewards)
    counts = np.bincount(rewards.astype(int))[1:]
    assert np.all(np.abs(counts - 200) < 5 * np.sqrt(600 * (1 / 3) * (2 / 3)))


# ---------------------------------------------------------------- update vs NumPy
def _np_tree(tree):
    return jax.tree.map(lambda x: np.asarray(x, np.float64), tree)


def test_update_matches_numpy_reference():
    cfg = D.DQNConfig(buffer_capacity=64, batch_size=32)
    sel = D.jit_selector(D.make_dqn(cfg))
    hp = cfg.hparams()._replace(lr=jnp.float32(3e-3))
    st = sel.init(jax.random.key(7), hp)
    # Distinct target params so the Eq. 12 target is exercised.
    st = st._replace(target_params=sel.init(jax.random.key(8), hp).params)
    rng = np.random.default_rng(0)
    rep = D.replay_init(64, 98, 5)
    for _ in range(50):
        rep = REPLAY_ADD(rep, *_transition(rng))

    p_ref = _np_tree(st.params)
    t_ref = _np_tree(st.target_params)
    adam_ref = R.adam_init_reference(p_ref)
    keys = jax.random.split(jax.random.key(9), 6)
    for i, key in enumerate(keys):
        batch = REPLAY_SAMPLE(rep, key, cfg.batch_size)
        if i % 2 == 0:
            st, m = sel.train_step(st, batch, hp)
        else:
            st, m = sel.update(st, rep, key, hp)  # samples the same batch
        p_ref, adam_ref, loss_ref = R.dqn_update_reference(
            p_ref, t_ref, adam_ref, jax.tree.map(np.asarray, batch), hp, eps=cfg.adam_eps
        )
        assert float(m.loss) == pytest.approx(loss_ref, rel=1e-5, abs=1e-6)
        assert bool(m.updated)
        for a, b in zip(jax.tree.leaves(st.params), jax.tree.leaves(p_ref)):
            np.testing.assert_allclose(np.asarray(a), b, atol=1e-5, rtol=1e-5)
    assert int(st.step) == 6 and int(st.opt_state.count) == 6
    for a, b in zip(jax.tree.leaves(st.opt_state.mu), jax.tree.leaves(adam_ref["mu"])):
        np.testing.assert_allclose(np.asarray(a), b, atol=1e-6)
    # Parameters moved (the comparison is not vacuous); target untouched.
    moved = max(
        float(np.max(np.abs(np.asarray(a) - b)))
        for a, b in zip(jax.tree.leaves(st.params), jax.tree.leaves(_np_tree(sel.init(jax.random.key(7), hp).params)))
    )
    assert moved > 1e-3
    for a, b in zip(jax.tree.leaves(st.target_params), jax.tree.leaves(t_ref)):
        np.testing.assert_array_equal(np.asarray(a), b.astype(np.float32))


def test_update_matches_numpy_reference_float64():
    """Same kernel traced in float64: agreement to 1e-9 over 8 batches.

    Complements the float32 test above, whose 1e-5 margin can be eaten by
    Adam's normalisation of near-zero gradients (cancellation in float32
    then changes ``m/sqrt(v)`` at O(lr)) for unlucky inputs.
    """
    cfg = D.DQNConfig(buffer_capacity=64, batch_size=32)
    sel = D.jit_selector(D.make_dqn(cfg))
    hp = cfg.hparams()._replace(lr=jnp.float32(3e-3))
    rng = np.random.default_rng(10)
    rep = D.replay_init(64, 98, 5)
    for _ in range(50):
        rep = REPLAY_ADD(rep, *_transition(rng))
    batches = [
        jax.tree.map(np.asarray, REPLAY_SAMPLE(rep, k, 32)) for k in jax.random.split(jax.random.key(17), 8)
    ]
    st32 = sel.init(jax.random.key(10), hp)
    tgt32 = sel.init(jax.random.key(110), hp).params
    p_ref, t_ref = _np_tree(st32.params), _np_tree(tgt32)
    adam_ref = R.adam_init_reference(p_ref)
    with jax.enable_x64(True):
        f64 = lambda x: jnp.asarray(x, jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x  # noqa: E731
        st = st32._replace(
            params=jax.tree.map(f64, st32.params),
            target_params=jax.tree.map(f64, tgt32),
            opt_state=jax.tree.map(f64, st32.opt_state),
        )
        for b in batches:
            b64 = D.Batch(*[f64(jnp.asarray(x)) for x in b])
            st, m = sel.train_step(st, b64, hp)
            p_ref, adam_ref, loss_ref = R.dqn_update_reference(p_ref, t_ref, adam_ref, b, hp)
            assert float(m.loss) == pytest.approx(loss_ref, rel=1e-9)
        leaves = jax.tree.leaves(st.params)
        assert all(x.dtype == jnp.float64 for x in leaves)
        for a, b in zip(leaves, jax.tree.leaves(p_ref)):
            np.testing.assert_allclose(np.asarray(a), b, atol=1e-9, rtol=1e-9)


def test_loss_terminal_target_is_reward():
    """Eq. 12: d = 1 gives y = r regardless of next obs / mask."""
    sel = D.jit_selector(D.make_dqn(D.DQNConfig()))
    hp = sel.config.hparams()
    st = sel.init(jax.random.key(0), hp)
    obs = _obs(5, 4)
    batch = D.Batch(
        obs=obs,
        action=jnp.array([0, 1, 2, 3], jnp.int32),
        reward=jnp.array([1.0, -0.4, 0.0, 0.5], jnp.float32),
        next_obs=obs * 1e3,
        next_mask=jnp.zeros((4, 5), bool),
        done=jnp.ones((4,), jnp.float32),
    )
    loss, (q_sa, td) = sel.loss(st.params, st.target_params, batch, hp)
    q = np.asarray(sel.q_values(st.params, obs))
    want = np.mean((np.asarray(batch.reward) - q[np.arange(4), [0, 1, 2, 3]]) ** 2)
    assert float(loss) == pytest.approx(want, rel=1e-5)


# ---------------------------------------------------------------- schedule
def test_target_sync_exactly_at_interval():
    cfg = D.DQNConfig(learning_starts=1, train_every=1, target_sync_every=3, buffer_capacity=16, batch_size=4)
    sel = D.jit_selector(D.make_dqn(cfg))
    hp = cfg.hparams()._replace(lr=jnp.float32(1e-2))
    st = sel.init(jax.random.key(0), hp)
    rep = D.replay_init(16, 98, 5)
    rng = np.random.default_rng(1)
    last_target = _np_tree(st.target_params)
    for t in range(1, 11):
        st, rep, m = sel.observe(st, rep, jax.random.key(100 + t), _transition(rng), hp)
        assert int(st.decisions) == t and int(st.step) == t and bool(m.updated)
        same = all(
            np.array_equal(np.asarray(a), np.asarray(b))
            for a, b in zip(jax.tree.leaves(st.params), jax.tree.leaves(st.target_params))
        )
        assert bool(m.synced) == (t % 3 == 0)
        if t % 3 == 0:
            assert same
            last_target = _np_tree(st.target_params)
        else:
            assert not same
            for a, b in zip(jax.tree.leaves(st.target_params), jax.tree.leaves(last_target)):
                np.testing.assert_array_equal(np.asarray(a), b)
    assert sel.observe._cache_size() == 1  # no retracing across decisions


def test_observe_update_schedule_default_config(sel):
    """Table 3: first update at decision 100, then every 4; sync at 250."""
    hp = sel.config.hparams()
    n = 260

    def run(key):
        st = sel.init(key, hp)
        rep = D.replay_init(sel.config.buffer_capacity, 98, 5)

        def body(carry, k):
            st, rep = carry
            tr = D.Transition(
                obs=jax.random.normal(k, (98,)), action=jnp.int32(1), reward=jnp.float32(0.5),
                next_obs=jnp.zeros((98,)), next_mask=jnp.ones((5,), bool), done=jnp.float32(1.0),
            )
            st, rep, m = sel.observe(st, rep, k, tr, hp)
            return (st, rep), (m.updated, m.synced)

        (st, rep), flags = jax.lax.scan(body, (st, rep), jax.random.split(key, n))
        return st, rep, flags

    st, rep, (updated, synced) = jax.jit(run)(jax.random.key(0))
    t = np.arange(1, n + 1)
    np.testing.assert_array_equal(np.asarray(updated), (t >= 100) & (t % 4 == 0))
    np.testing.assert_array_equal(np.asarray(synced), t % 250 == 0)
    assert int(st.step) == int(np.sum((t >= 100) & (t % 4 == 0)))
    assert int(st.decisions) == n and int(rep.size) == n and int(rep.ptr) == n


def test_hparams_grid_vmaps(sel):
    """lr is a dynamic hyperparameter: lr = 0 leaves params unchanged."""
    cfg = dataclasses.replace(sel.config, learning_starts=1, train_every=1, batch_size=8, buffer_capacity=8)
    s = D.make_dqn(cfg)
    base = cfg.hparams()
    grid = jax.tree.map(lambda x: jnp.stack([x, x]), base)._replace(lr=jnp.array([0.0, 1e-2], jnp.float32))
    rng = np.random.default_rng(3)
    tr = _transition(rng)

    def one(hp):
        st = s.init(jax.random.key(0), hp)
        rep = D.replay_init(8, 98, 5)
        st, rep, m = s.observe(st, rep, jax.random.key(1), tr, hp)
        return st.params, m.loss

    params, loss = jax.jit(jax.vmap(one))(grid)
    init_params = s.init(jax.random.key(0), base).params
    for p, p0 in zip(jax.tree.leaves(params), jax.tree.leaves(init_params)):
        np.testing.assert_array_equal(np.asarray(p[0]), np.asarray(p0))
    assert any(not np.array_equal(np.asarray(p[1]), np.asarray(p0)) for p, p0 in
               zip(jax.tree.leaves(params), jax.tree.leaves(init_params)))
    assert float(loss[0]) == pytest.approx(float(loss[1]))


# ---------------------------------------------------------------- learning
def test_learns_two_state_bandit_scan_vmap_seeds():
    """Contextual bandit: slot 1 is right in state A, skip is right in state B.

    The whole training loop is one ``lax.scan`` over decisions, vmapped over
    two seeds; both reach the optimal greedy policy and the seeds differ.
    """
    n = 600
    cfg = D.DQNConfig(
        total_decisions=n, learning_starts=50, train_every=1, buffer_capacity=1000,
        batch_size=32, target_sync_every=50,
    )
    sel = D.make_dqn(cfg)
    hp = cfg.hparams()._replace(lr=jnp.float32(3e-3))
    rng = np.random.default_rng(11)
    obs_a = jnp.asarray(rng.normal(scale=0.5, size=98), jnp.float32)
    obs_b = jnp.asarray(rng.normal(scale=0.5, size=98), jnp.float32)
    mask_a = jnp.ones((5,), bool)
    mask_b = jnp.asarray([True, True, False, False, False])  # slot 1 valid but wrong
    good = D.reward(True, 1, 0, 200, hp, cfg.tau0)  # 0.8496
    bad = D.reward(False, 1, 1, 200, hp, cfg.tau0)  # -0.4004

    def train(key):
        k_init, k_run = jax.random.split(key)
        st = sel.init(k_init, hp)
        rep = D.replay_init(cfg.buffer_capacity, cfg.obs_dim, cfg.n_actions)

        def body(carry, k):
            st, rep = carry
            k_s, k_a, k_u = jax.random.split(k, 3)
            in_a = jax.random.bernoulli(k_s)
            obs = jnp.where(in_a, obs_a, obs_b)
            mask = jnp.where(in_a, mask_a, mask_b)
            a = sel.act(st, k_a, obs, mask, hp)
            correct = jnp.where(in_a, a == 1, a == 0)
            r = jnp.where(correct, good, bad)
            tr = D.Transition(obs, a, r, obs, mask, jnp.float32(1.0))
            st, rep, m = sel.observe(st, rep, k_u, tr, hp)
            return (st, rep), r

        (st, rep), rewards = jax.lax.scan(body, (st, rep), jax.random.split(k_run, n))
        return st.params, rewards

    params, rewards = jax.jit(jax.vmap(train))(jax.random.split(jax.random.key(0), 2))
    for s in range(2):
        p = jax.tree.map(lambda x: x[s], params)
        assert int(sel.greedy(p, obs_a, mask_a)) == 1
        assert int(sel.greedy(p, obs_b, mask_b)) == 0
        qa = np.asarray(sel.q_values(p, obs_a))
        qb = np.asarray(sel.q_values(p, obs_b))
        assert abs(qa[1] - float(good)) < 0.2 and abs(qb[0] - float(good)) < 0.2
        # Late-training returns beat early ones (exploration ε ~ 0.05 by then).
        assert float(rewards[s, -100:].mean()) > float(rewards[s, :100].mean())
    leaves = jax.tree.leaves(params)
    assert any(not np.array_equal(np.asarray(x[0]), np.asarray(x[1])) for x in leaves)  # seeds differ


# ---------------------------------------------------------------- reference sanity
def test_reference_gradient_matches_jax_grad():
    cfg = D.DQNConfig()
    sel = D.jit_selector(D.make_dqn(cfg))
    hp = cfg.hparams()
    st = sel.init(jax.random.key(5), hp)
    tgt = sel.init(jax.random.key(6), hp).params
    rng = np.random.default_rng(4)
    trs = [_transition(rng) for _ in range(16)]
    batch = D.Batch(*[jnp.stack(x) for x in zip(*trs)])
    grads = jax.jit(jax.grad(lambda p: sel.loss(p, tgt, batch, hp)[0]))(st.params)
    loss_ref, grads_ref = R.dqn_loss_reference(_np_tree(st.params), _np_tree(tgt), jax.tree.map(np.asarray, batch), hp)
    assert float(sel.loss(st.params, tgt, batch, hp)[0]) == pytest.approx(loss_ref, rel=1e-5)
    for k in grads_ref:
        for name in ("kernel", "bias"):
            np.testing.assert_allclose(np.asarray(grads[k][name]), grads_ref[k][name], atol=1e-5, rtol=1e-4)


def test_raw_factory_jitted_by_caller_compiles_once():
    """``make_dqn`` returns raw functions; a caller's ``jax.jit`` traces once per shape."""
    sel = D.make_dqn(D.DQNConfig())
    traces = []

    def act(state, key, obs, mask, hp):
        traces.append(1)
        return sel.act(state, key, obs, mask, hp)

    act_jit = jax.jit(act)
    hp = sel.config.hparams()
    st = jax.jit(sel.init)(jax.random.key(0), hp)
    mask = jnp.ones((5,), bool)
    for i in range(3):
        a = act_jit(st, jax.random.key(i), _obs(i), mask, hp._replace(eps_start=jnp.float32(0.1 * i)))
        assert 0 <= int(a) < 5
    assert len(traces) == 1


# ---------------------------------------------------------------- the online learner's fused programs
def test_reward_f32_twin_is_bit_identical_to_the_kernel():
    """The host loop's float32 Eq. 10 is the kernel's value bit for bit (op by op, each rounded)."""
    cfg = D.DQNConfig()
    hp = cfg.hparams()
    rng = np.random.default_rng(7)
    for _ in range(500):
        s, c, f, t = bool(rng.random() < 0.5), int(rng.integers(0, 6)), int(rng.integers(0, 4)), int(rng.integers(0, 30000))
        want = np.asarray(D.reward(s, c, f, t, hp, cfg.tau0), np.float32)
        got = R.reward_f32(s, c, f, t, hp, cfg.tau0)
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes(), (s, c, f, t)
    assert R.reward_f32(True, 0, 0, 0, hp, cfg.tau0) == np.float32(1.0)


def test_online_act_and_spans_match_the_per_decision_calls():
    """``jit_online`` (one dispatch per decision, one per span of an episode) reproduces the per-call
    path — ``key, k = split(key)`` then ``act`` / ``observe`` per decision — exactly: the same
    actions, the same learner state and replay bit for bit, the same number of updates, with spans
    cut anywhere (here: episodes of 1–3 decisions cut once in the middle)."""
    cfg = D.DQNConfig(total_decisions=300, learning_starts=20, target_sync_every=50)
    hp = cfg.hparams()
    sel = D.jit_selector(D.make_dqn(cfg))
    on = D.jit_online(D.make_dqn(cfg))
    rng = np.random.default_rng(3)
    trs = [_transition(rng) for _ in range(240)]
    lengths = [1 + (i % 3) for i in range(120)]
    key0 = jax.random.PRNGKey(11)

    def per_decision(ep, key, q0, n, st, rp):
        acts, ups = [], 0
        for q in range(q0, q0 + n):
            key, k = jax.random.split(key)
            acts.append(int(sel.act(ep, k, trs[q].obs, trs[q].next_mask, hp)))
        for q in range(q0, q0 + n):
            key, k = jax.random.split(key)
            st, rp, m = sel.observe(st, rp, k, trs[q], hp)
            ups += int(m.updated)
        return key, acts, ups, st, rp

    def fused(ep, key, q0, n, st, rp):
        acts, ups = [], 0
        for q in range(q0, q0 + n):
            key, a = on.act(ep, key, np.asarray(trs[q].obs), np.asarray(trs[q].next_mask), hp)
            acts.append(int(a))
        padded = D.Transition(*(np.stack([np.asarray(trs[q0 + min(q, n - 1)][f]) for q in range(3)]) for f in range(6)))
        for lo, hi in ((0, n // 2), (n // 2, n)):  # the span cut once in the middle
            st, rp, key, u = on.observe_span(st, rp, key, padded, lo, hi, hp)
            ups += int(u)
        return key, acts, ups, st, rp

    def run(episode):
        key, k = jax.random.split(key0)
        st, rp = sel.init(k, hp), D.replay_init(cfg.buffer_capacity)
        acts, ups, j = [], 0, 0
        for n in lengths:
            if j + n > len(trs):
                break
            key, a, u, st, rp = episode(st, key, j, n, st, rp)  # every decision acts with the episode's start
            acts, ups, j = acts + a, ups + u, j + n
        return acts, ups, st, rp

    acts, ups, st, rp = run(per_decision)
    acts2, ups2, st2, rp2 = run(fused)

    assert acts2 == acts and ups2 == ups and ups > 0
    for a, b in zip(jax.tree.leaves((st, rp)), jax.tree.leaves((st2, rp2))):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()

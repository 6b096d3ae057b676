"""Tests for cfjax.kernels.evsi (UpliftMem §4.3, App. A.4-A.7, B.2; SPEC §2.3).

float64 checks run inside ``jax.enable_x64(True)`` blocks so x64 never leaks into other files.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import cfjax.kernels as K
from cfjax.kernels import reference as R
from cfjax.kernels.evsi import _MILLS_CHEB, _RHO_CHEB

mp.mp.dps = 50

PSI = jax.jit(K.psi)
EVSI = jax.jit(K.binary_evsi)
PDF = jax.jit(K.std_normal_pdf)
TAIL = jax.jit(K.normal_tail)
GRAD_EVSI = jax.jit(jax.vmap(jax.grad(K.binary_evsi, argnums=(0, 1))))
RESOLVED = jax.jit(K.resolved_variance)
RESOLVED_LATENT = jax.jit(K.resolved_variance_latent, static_argnames="n_groups")
BLR = jax.jit(K.blr_posterior)
RTOL = {np.float32: 1e-5, np.float64: 1e-10}

# t grid: 0, log-spaced 1e-6 .. 1e6 and the points where naive formulas / erfcx break
T_GRID = np.unique(np.concatenate([[0.0], np.logspace(-6, 6, 241), [9.3, 9.25, 9.35, 13.0, 13.1, 37.5, 38.0, 1e3]]))


def _psi_mp(t):
    t = mp.mpf(t)
    return mp.npdf(t) - t * mp.ncdf(-t)


def _x64(dt):
    return jax.enable_x64(dt == np.float64)


def _check_vs_ref(got, ref, dt, what):
    """Relative error where ``ref`` is a normal number, else ``0 ≤ got`` within the smallest normal."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    tiny = float(np.finfo(dt).tiny)
    assert np.all(np.isfinite(got)), what
    normal = np.abs(ref) >= tiny
    rel = np.abs(got[normal] / ref[normal] - 1.0)
    assert rel.max(initial=0.0) <= RTOL[dt], (what, rel.max(), np.flatnonzero(normal)[rel.argmax()])
    assert np.all(np.abs(got[~normal] - ref[~normal]) <= tiny), what


# ------------------------------------------------------------------------------ special functions
def test_chebyshev_coefficients_regenerate():
    """The embedded series are exactly what the documented mpmath fit produces."""
    for kind, stored in (("rho", _RHO_CHEB), ("mills", _MILLS_CHEB)):
        fresh = K.chebyshev_fit(kind)[: len(stored)]
        np.testing.assert_allclose(stored, fresh, rtol=1e-12, atol=1e-19)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_psi_pdf_tail_vs_mpmath(dt):
    with _x64(dt):
        t = T_GRID.astype(dt)
        ref_psi = [float(_psi_mp(float(x))) for x in t]
        got = np.asarray(PSI(t))
        assert got.dtype == dt and np.all(got >= 0)
        _check_vs_ref(got, ref_psi, dt, "psi")
        _check_vs_ref(PDF(t), [float(mp.npdf(mp.mpf(float(x)))) for x in t], dt, "pdf")
        _check_vs_ref(TAIL(t), [float(mp.ncdf(-mp.mpf(float(x)))) for x in t], dt, "tail")
        # negative arguments: ψ(−t) = t + ψ(t), Φ(t) = 1 − Φ(−t)
        tn = -t[(t > 0) & (t < 50)]
        _check_vs_ref(PSI(tn), [float(_psi_mp(float(x))) for x in tn], dt, "psi(-t)")
        _check_vs_ref(TAIL(tn), [float(mp.ncdf(-mp.mpf(float(x)))) for x in tn], dt, "tail(-t)")


N_PTS = 400  # one shape for every jitted E / gradient call (no recompiles)


def _evsi_points(dt, n=N_PTS, seed=0):
    rng = np.random.default_rng(seed)
    s = np.exp(rng.uniform(np.log(1e-2), np.log(1e2), n)).astype(dt)
    t = np.concatenate([[0.0, 9.3, 13.0, 38.0, 1e3, 1e6], np.exp(rng.uniform(np.log(1e-6), np.log(1e6), n - 6))])
    mu = (t * s * rng.choice([-1.0, 1.0], n)).astype(dt)
    return mu, s


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_evsi_values_and_gradients_vs_mpmath(dt):
    with _x64(dt):
        mu, s = _evsi_points(dt)
        e = np.asarray(EVSI(mu, s))
        dmu, ds = (np.asarray(g) for g in GRAD_EVSI(mu, s))
        assert e.dtype == dt and np.all(np.isfinite(e)) and np.all(np.isfinite(dmu)) and np.all(np.isfinite(ds))
        assert np.all(e >= 0) and np.all(e <= s / np.sqrt(2 * np.pi) * (1 + 4 * np.finfo(dt).eps))
        ref_e, ref_ds, ref_dmu, psi_normal = [], [], [], []
        tiny = float(np.finfo(dt).tiny)
        for m, sd in zip(mu, s):
            m, sd = mp.mpf(float(m)), mp.mpf(float(sd))
            t = abs(m) / sd
            ps = _psi_mp(t)
            ref_e.append(float(sd * ps))
            ref_ds.append(float(mp.npdf(t)))
            ref_dmu.append(float(-mp.sign(m) * mp.ncdf(-t)))
            psi_normal.append(float(ps) >= tiny)
        keep = np.array(psi_normal)  # the stated accuracy holds where ψ(t) is normal
        _check_vs_ref(e[keep], np.array(ref_e)[keep], dt, "E")
        assert np.all(np.abs(e[~keep] - np.array(ref_e)[~keep]) <= tiny)
        _check_vs_ref(ds, ref_ds, dt, "dE/ds")
        _check_vs_ref(dmu, ref_dmu, dt, "dE/dmu")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_evsi_edge_cases_finite(dt):
    with _x64(dt):
        mu = np.array([0.0, 0.0, 1.5, -2.0, 0.0, 1e30, 3.0], dt)
        s = np.array([0.0, 1.0, 0.0, 0.0, 1e-30, 1.0, 1e-20], dt)
        e = np.asarray(EVSI(np.resize(mu, N_PTS), np.resize(s, N_PTS)))[:7]
        dmu, ds = (np.asarray(g)[:7] for g in GRAD_EVSI(np.resize(mu, N_PTS), np.resize(s, N_PTS)))
        assert np.all(np.isfinite(e)) and np.all(np.isfinite(dmu)) and np.all(np.isfinite(ds))
        phi0 = 1 / np.sqrt(2 * np.pi)
        np.testing.assert_allclose(e, [0, phi0, 0, 0, 1e-30 * phi0, 0, 0], rtol=1e-6, atol=0)
        np.testing.assert_allclose(ds, [phi0, phi0, 0, 0, phi0, 0, 0], rtol=1e-6)
        np.testing.assert_allclose(dmu, [0, 0, 0, 0, 0, 0, 0])
        # second derivatives stay finite too (the helpers are custom_jvp'd)
        hess = jax.jit(jax.vmap(jax.hessian(K.binary_evsi, argnums=(0, 1))))(mu, s)
        assert all(np.all(np.isfinite(np.asarray(h))) for h in jax.tree.leaves(hess))
        # d²E/ds² = φ(t)·t²/s at a regular point
        d2 = float(jax.grad(jax.grad(K.binary_evsi, argnums=1), argnums=1)(dt(1.0), dt(2.0)))
        np.testing.assert_allclose(d2, float(mp.npdf(0.5)) * 0.25 / 2, rtol=1e-5)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_evsi_homogeneity(dt):
    with _x64(dt):
        mu, s = _evsi_points(dt, seed=3)
        keep = np.abs(mu) / s < (12.0 if dt == np.float32 else 36.0)  # stay in the normal range after scaling
        e = np.asarray(EVSI(mu, s), np.float64)
        for c in (1e-3, 0.37, 7.0, 1e3):
            ec = np.asarray(EVSI((c * mu).astype(dt), (c * s).astype(dt)), np.float64)
            np.testing.assert_allclose(ec[keep], c * e[keep], rtol=2 * RTOL[dt])


@settings(max_examples=60, deadline=None)
@given(st.floats(-50, 50), st.floats(0, 20), st.floats(0, 20))
def test_evsi_properties(mu, s1, s2):
    """0 ≤ E ≤ s/√(2π); ∂E/∂s > 0 (monotone in s); ∂E/∂|μ| < 0 (monotone in |μ|); even in μ."""
    lo, hi = sorted((s1, s2))
    e = np.asarray(EVSI(np.float32([mu, mu, -mu, mu / 2]), np.float32([lo, hi, hi, hi])), np.float64)
    assert np.all(e >= 0) and np.all(e <= np.array([lo, hi, hi, hi]) / np.sqrt(2 * np.pi) * (1 + 1e-6) + 1e-45)
    assert e[0] <= e[1] * (1 + 1e-6) + 1e-38
    assert e[2] == e[1]
    assert e[1] <= e[3] * (1 + 1e-6) + 1e-38


# --------------------------------------------------------------------------- Gaussian conditioning
def _instance(rng, *, n=40, j=30, r=8, groups=6, dt=np.float64, cand_frac=0.85, comp_frac=0.9, nu0=0.3, mode=0,
              tau=0.01):
    f = rng.normal(size=(n, r))
    h = rng.normal(size=(j, r)) * 0.5
    a = rng.normal(size=(r, r))
    sig = a @ a.T / r + 0.1 * np.eye(r)
    return K.AcquireInputs(
        features=f.astype(dt), cand_mask=rng.random(n) < cand_frac, noise_var=rng.uniform(0.2, 1.0, n).astype(dt),
        group=rng.integers(-1, groups, n).astype(np.int32), directions=h.astype(dt),
        means=(rng.normal(size=j) * 0.5).astype(dt), comp_mask=rng.random(j) < comp_frac,
        prior_cov=sig.astype(dt), ref_noise_var=dt(nu0), tau=dt(tau), mode=np.int32(mode),
    )


def _as(inputs, dt):
    return inputs._replace(**{k: np.asarray(v, dt) for k, v in inputs._asdict().items()
                              if np.asarray(v).dtype.kind == "f"})


def test_resolved_variance_dense_latent_reference():
    with jax.enable_x64(True):
        rng = np.random.default_rng(5)
        inp = _instance(rng, n=25, j=12, r=6, groups=4)
        mask = rng.random(25) < 0.7
        args = (inp.directions, inp.features, inp.noise_var, inp.group, mask, inp.prior_cov, inp.ref_noise_var)
        dense = np.asarray(RESOLVED(*args))
        latent = np.asarray(RESOLVED_LATENT(*args, n_groups=4))
        ref = R.resolved_variance_reference(inp.directions, inp.features, inp.noise_var, inp.group,
                                            np.flatnonzero(mask), inp.prior_cov, float(inp.ref_noise_var))
        np.testing.assert_allclose(dense, ref, rtol=1e-10)
        np.testing.assert_allclose(latent, dense, rtol=1e-10)
        omega = np.asarray(K.shared_noise_cov(inp.noise_var, inp.group, inp.ref_noise_var))
        np.testing.assert_allclose(omega, R.shared_noise_cov_reference(inp.noise_var, inp.group, 0.3))
        # the augmented covariance reproduces W_Q and k_j exactly
        f, nv, d, c = K.latent_batch_augment(inp.features, inp.noise_var, inp.group, inp.directions, inp.prior_cov,
                                             inp.ref_noise_var, n_groups=4)
        f, nv, d, c = (np.asarray(x) for x in (f, nv, d, c))
        w_dense = inp.features @ inp.prior_cov @ inp.features.T + omega
        np.testing.assert_allclose(f @ c @ f.T + np.diag(nv), w_dense, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(f @ c @ d.T, inp.features @ inp.prior_cov @ inp.directions.T, rtol=1e-12, atol=1e-12)
        s2 = np.asarray(RESOLVED(*args))
        sig2 = np.asarray(K.comparison_variance(inp.directions, inp.prior_cov))
        assert np.all(s2 >= 0) and np.all(s2 <= sig2 * (1 + 1e-12))
    # float32 agrees with the float64 reference
    inp32 = _as(inp, np.float32)
    s2_32 = np.asarray(RESOLVED(inp32.directions, inp32.features, inp32.noise_var, inp32.group, mask,
                                inp32.prior_cov, inp32.ref_noise_var))
    np.testing.assert_allclose(s2_32, ref, rtol=2e-4, atol=1e-6)


def test_evsi_closed_form_vs_monte_carlo():
    """Theorem 2 with shared reference noise: E[(μ')_+] − (μ)_+ = s·ψ(|μ|/s), s from W_Q with Ω."""
    rng = np.random.default_rng(11)
    r, n, j, nu0 = 4, 7, 6, 0.6
    a = rng.normal(size=(r, r))
    sig = a @ a.T / r + 0.2 * np.eye(r)
    f = rng.normal(size=(n, r))
    h = rng.normal(size=(j, r))
    group = np.array([0, 0, 1, 1, -1, 0, 1], np.int32)
    nv = rng.uniform(0.1, 0.5, n)
    mu = np.array([0.0, 0.3, -0.8, 1.5, -2.5, 0.05])
    s2 = np.asarray(RESOLVED(h.astype(np.float32), f.astype(np.float32), nv.astype(np.float32), group,
                             np.ones(n, bool), sig.astype(np.float32), np.float32(nu0)), np.float64)
    e = np.asarray(EVSI(mu.astype(np.float32), np.sqrt(s2).astype(np.float32)), np.float64)
    # simulate ξ, the shared reference executions and the per-label noise
    m = 400_000
    xi = rng.multivariate_normal(np.zeros(r), sig, size=m)
    ref_shared = rng.normal(size=(m, 2)) * np.sqrt(nu0)
    ref_own = rng.normal(size=(m, n)) * np.sqrt(nu0)
    ref = np.where(group >= 0, ref_shared[:, np.maximum(group, 0)], ref_own)
    y = xi @ f.T + ref + rng.normal(size=(m, n)) * np.sqrt(nv)
    w = f @ sig @ f.T + R.shared_noise_cov_reference(nv, group, nu0)
    k = f @ sig @ h.T
    post = mu + y @ np.linalg.solve(w, k)  # posterior means μ'_j
    gain = np.maximum(post, 0.0) - np.maximum(mu, 0.0)
    mc, se = gain.mean(0), gain.std(0) / np.sqrt(m)
    assert np.all(np.abs(mc - e) <= 4 * se + 1e-6), (mc, e, se)
    # the test has power: ignoring the shared reference (ν_0² only on the diagonal) is detected
    s2_indep = np.asarray(RESOLVED(h.astype(np.float32), f.astype(np.float32), (nv + nu0).astype(np.float32),
                                   np.full(n, -1, np.int32), np.ones(n, bool), sig.astype(np.float32), np.float32(0)))
    e_indep = np.asarray(EVSI(mu.astype(np.float32), np.sqrt(s2_indep)), np.float64)
    assert np.any(np.abs(mc - e_indep) > 8 * se)


def test_blr_posterior_vs_closed_form():
    rng = np.random.default_rng(2)
    n, r = 30, 5
    x = rng.normal(size=(n, r))
    y = x @ rng.normal(size=r) + 0.3 * rng.normal(size=n)
    mask = rng.random(n) < 0.6
    x_bad, y_bad = x.copy(), y.copy()
    x_bad[~mask] = np.nan  # masked rows must not matter (padding may hold anything)
    y_bad[~mask] = np.inf
    ref_mean, ref_cov = R.blr_posterior_reference(x, y, mask, prior_precision=2.0, noise_var=0.25)
    with jax.enable_x64(True):
        mean, cov = BLR(x_bad, y_bad, mask, prior_precision=2.0, noise_var=0.25)
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(cov, ref_cov, rtol=1e-10, atol=1e-12)
    mean, cov = BLR(x_bad.astype(np.float32), y_bad.astype(np.float32), mask, prior_precision=jnp.float32(2.0),
                    noise_var=jnp.float32(0.25))
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-4, atol=1e-6)
    assert np.all(np.linalg.eigvalsh(np.asarray(cov, np.float64)) > 0)


def test_blr_posterior_per_row_noise():
    """Heteroscedastic ν_i²: the weighted closed form (twin), and by hand — a row with ν² = ν²/2 counts
    exactly as the same row twice with ν²."""
    rng = np.random.default_rng(3)
    n, r = 20, 4
    x = rng.normal(size=(n, r))
    y = rng.normal(size=n)
    nu2 = rng.uniform(0.05, 0.5, size=n)
    mask = rng.random(n) < 0.7
    nu2_bad = nu2.copy()
    nu2_bad[~mask] = 0.0  # a masked row's ν² must not matter, even 0
    ref_mean, ref_cov = R.blr_posterior_reference(x, y, mask, prior_precision=1.5, noise_var=nu2)
    with jax.enable_x64(True):
        mean, cov = BLR(x, y, mask, prior_precision=1.5, noise_var=jnp.asarray(nu2_bad))
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(cov, ref_cov, rtol=1e-10, atol=1e-12)
    mean, cov = BLR(x.astype(np.float32), y.astype(np.float32), mask, prior_precision=jnp.float32(1.5),
                    noise_var=jnp.asarray(nu2_bad, jnp.float32))
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-4, atol=1e-6)
    half = R.blr_posterior_reference(x[:2], y[:2], np.ones(2, bool), prior_precision=1.0, noise_var=[0.1, 0.2])
    twice = R.blr_posterior_reference(x[[0, 1, 1]], y[[0, 1, 1]], np.ones(3, bool), prior_precision=1.0,
                                      noise_var=[0.1, 0.4, 0.4])
    np.testing.assert_allclose(half[0], twice[0], rtol=1e-12)
    np.testing.assert_allclose(half[1], twice[1], rtol=1e-12)


# ------------------------------------------------------------------------------ batch acquisition
BUDGET = 12


@pytest.fixture(scope="module")
def acq_trace():
    return jax.jit(K.make_acquire(budget=BUDGET, trace=True))


@pytest.fixture(scope="module")
def acq():
    return jax.jit(K.make_acquire(budget=BUDGET))


@pytest.fixture(scope="module")
def inst64():
    return _instance(np.random.default_rng(1))


@pytest.fixture(scope="module")
def res64(acq_trace, inst64):
    with jax.enable_x64(True):
        return jax.tree.map(np.asarray, acq_trace(jax.random.key(0), inst64))


def test_greedy_rank_one_matches_full_recompute(res64, inst64):
    inp, res = inst64, res64
    nu0 = float(inp.ref_noise_var)
    sel_ref, val_ref = R.greedy_reference(inp, BUDGET)
    np.testing.assert_array_equal(res.selected, sel_ref)
    np.testing.assert_allclose(res.value, val_ref, rtol=1e-9)
    sel_r1, val_r1, s2_r1 = R.greedy_rank_one_reference(inp, BUDGET)
    np.testing.assert_array_equal(sel_r1, sel_ref)
    np.testing.assert_allclose(res.s2, s2_r1, rtol=1e-10)
    sigma2 = np.einsum("jr,rs,js->j", inp.directions, inp.prior_cov, inp.directions)
    prev = np.zeros(inp.means.shape)
    for t in range(BUDGET):
        q_set = list(res.selected[: t + 1])
        s2 = R.resolved_variance_reference(inp.directions, inp.features, inp.noise_var, inp.group, q_set,
                                           inp.prior_cov, nu0)
        s2 = np.where(inp.comp_mask, s2, 0.0)
        np.testing.assert_allclose(res.s2_trace[t], s2, rtol=1e-6, atol=1e-14)
        assert np.all(res.s2_trace[t] >= prev - 1e-15) and np.all(res.s2_trace[t] <= sigma2 * (1 + 1e-12))
        prev = res.s2_trace[t]
        _, v = R.conditional_moments_reference(inp.directions, inp.features, inp.noise_var, inp.group, q_set,
                                               inp.prior_cov, nu0)
        avail = inp.cand_mask.copy()
        avail[q_set] = False
        np.testing.assert_allclose(res.v_trace[t][avail], v[avail], rtol=1e-6)
        assert np.all(res.v_trace[t][avail] >= inp.noise_var[avail])
    assert np.all(inp.cand_mask[res.selected]) and len(set(res.selected.tolist())) == BUDGET
    assert np.all(res.value > 0)
    np.testing.assert_array_equal(res.s2, res.s2_trace[-1])


@jax.jit
def _values_after(inputs, sel):
    """``V(q)`` for every candidate after conditioning on ``sel`` (rank one, one step at a time)."""
    inputs = K.sanitize_inputs(inputs)
    st = K.acquire_init(inputs, budget=sel.shape[0])
    st = jax.lax.fori_loop(0, sel.shape[0], lambda i, s: K.acquire_condition(s, inputs, sel[i]), st)
    return K.batch_values(st, inputs)


def test_batch_values_vs_per_candidate_recompute(inst64):
    inp = inst64
    sel = [3, 17]
    ref = R.batch_values_reference(inp, sel)
    for dt, rtol in ((np.float64, 1e-9), (np.float32, 2e-3)):
        with _x64(dt):
            v = np.asarray(_values_after(_as(inp, dt), jnp.asarray(sel)), np.float64)
            ok = np.isfinite(ref)
            np.testing.assert_allclose(v[~ok], K.NEG, rtol=1e-6)  # the package sentinel
            np.testing.assert_allclose(v[ok], ref[ok], rtol=rtol, atol=1e-6 if dt == np.float32 else 0)


def test_float32_kernel_selects_like_float64_reference(acq, inst64):
    res = acq(jax.random.key(0), _as(inst64, np.float32))
    sel_ref, val_ref = R.greedy_reference(inst64, BUDGET)
    np.testing.assert_array_equal(np.asarray(res.selected), sel_ref)
    np.testing.assert_allclose(np.asarray(res.value), val_ref, rtol=1e-3, atol=1e-6)


def test_masks_padding_and_exhaustion(acq):
    rng = np.random.default_rng(7)
    inp = _instance(rng, dt=np.float32)
    cand = np.zeros(40, bool)
    cand[[2, 5, 11, 30, 31, 39]] = True  # fewer valid candidates than the budget
    comp = inp.comp_mask.copy()
    feats, dirs, means = inp.features.copy(), inp.directions.copy(), inp.means.copy()
    feats[~cand] = np.nan  # padding may hold anything
    dirs[~comp] = np.nan
    means[~comp] = np.nan
    inp = inp._replace(cand_mask=cand, features=feats, directions=dirs, means=means)
    res = jax.tree.map(np.asarray, acq(jax.random.key(0), inp))
    assert sorted(res.selected[:6].tolist()) == [2, 5, 11, 30, 31, 39]
    np.testing.assert_array_equal(res.selected[6:], -1)
    np.testing.assert_array_equal(res.value[6:], 0)
    assert np.all(np.isfinite(res.value)) and np.all(np.isfinite(res.s2))
    assert np.all(res.s2[~comp] == 0)
    # masked comparisons and candidates contribute nothing: the float64 reference that skips them
    sel_ref, val_ref = R.greedy_reference(inp, BUDGET)
    np.testing.assert_array_equal(res.selected, sel_ref)
    np.testing.assert_allclose(res.value, val_ref, rtol=1e-3, atol=1e-6)


def test_groups_equal_latent_augmented_features(res64, inst64):
    """Reference-group ids handled natively == latent-batch augmented features with diagonal Ω."""
    with jax.enable_x64(True):
        inp, a = inst64, res64
        f, nv, d, c = K.latent_batch_augment(inp.features, inp.noise_var, inp.group, inp.directions,
                                             inp.prior_cov, inp.ref_noise_var, n_groups=6)
        aug = inp._replace(features=f, noise_var=nv, directions=d, prior_cov=c, ref_noise_var=np.float64(0),
                           group=np.full(40, -1, np.int32))
        b = jax.tree.map(np.asarray, jax.jit(K.make_acquire(budget=BUDGET))(jax.random.key(0), aug))
        np.testing.assert_array_equal(a.selected, b.selected)
        np.testing.assert_allclose(a.value, b.value, rtol=1e-9)
        np.testing.assert_allclose(a.s2, b.s2, rtol=1e-9)


def test_pruning_bound(acq):
    rng = np.random.default_rng(4)
    inp = _instance(rng, dt=np.float32, comp_frac=1.0)
    means = inp.means.copy()
    means[:10] = 40.0  # hopeless comparisons: bound σψ(|μ|/σ) ≈ 0
    inp = inp._replace(means=means)
    bound = np.asarray(K.comparison_bound(inp.directions, inp.means, inp.prior_cov))
    assert np.all(bound[:10] < 1e-12 * bound.max())
    full = acq(jax.random.key(0), inp)
    pruned = jax.jit(K.make_acquire(budget=BUDGET, prune_rtol=1e-6))(jax.random.key(0), inp)
    assert int(full.n_active) == 30 and int(pruned.n_active) == 20
    np.testing.assert_array_equal(np.asarray(pruned.selected), np.asarray(full.selected))
    np.testing.assert_allclose(np.asarray(pruned.value), np.asarray(full.value), rtol=0,
                               atol=float(bound[:10].sum()) + 1e-7)


@pytest.fixture(scope="module")
def first_step_sampler():
    one = K.make_acquire(budget=1)
    return jax.jit(jax.vmap(lambda k, i: one(k, i).selected[0], in_axes=(0, None)))


def test_softmax_first_step_distribution(first_step_sampler):
    rng = np.random.default_rng(9)
    inp = _instance(rng, n=12, j=20, dt=np.float32, cand_frac=1.0, mode=K.SOFTMAX)
    cand = np.ones(12, bool)
    cand[[1, 7]] = False
    inp = inp._replace(cand_mask=cand)
    v0 = np.asarray(jax.jit(lambda i: K.batch_values(K.acquire_init(K.sanitize_inputs(i), budget=1), i))(inp),
                    np.float64)
    tau = float(np.std(v0[cand]))
    inp = inp._replace(tau=np.float32(tau))
    logits = np.where(cand, v0 / tau, -np.inf)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    m = 6000
    draws = np.asarray(first_step_sampler(jax.random.split(jax.random.key(123), m), inp))
    assert np.all(cand[draws])
    counts = np.bincount(draws, minlength=12)[cand]
    chi2 = np.sum((counts - m * p[cand]) ** 2 / (m * p[cand]))
    assert chi2 < stats.chi2.ppf(0.999, df=cand.sum() - 1), (counts, m * p[cand])
    # argmax mode picks the top value deterministically
    greedy = np.asarray(first_step_sampler(jax.random.split(jax.random.key(1), 3), inp._replace(mode=np.int32(0))))
    np.testing.assert_array_equal(greedy, int(np.argmax(np.where(cand, v0, -np.inf))))


def test_softmax_samples_valid_unselected_and_seeds_differ(acq):
    rng = np.random.default_rng(8)
    inp = _instance(rng, n=40, dt=np.float32, mode=K.SOFTMAX, tau=10.0, cand_frac=0.25)
    n_valid = int(inp.cand_mask.sum())
    assert n_valid < BUDGET
    many = jax.jit(jax.vmap(K.make_acquire(budget=BUDGET), in_axes=(0, None)))
    res = jax.tree.map(np.asarray, many(jax.random.split(jax.random.key(0), 8), inp))
    for sel in res.selected:
        picked = sel[:n_valid]
        assert np.all(inp.cand_mask[picked]) and len(set(picked.tolist())) == n_valid
        np.testing.assert_array_equal(sel[n_valid:], -1)
    assert len({tuple(s) for s in res.selected}) > 1  # different keys, different batches


def test_vmap_over_tasks_and_no_retrace():
    traces = []
    base = K.make_acquire(budget=BUDGET)

    def counted(key, inputs):
        traces.append(1)
        return base(key, inputs)

    single = jax.jit(counted)
    tasks = [_instance(np.random.default_rng(20 + i), dt=np.float32) for i in range(3)]
    outs = [jax.tree.map(np.asarray, single(jax.random.key(i), t)) for i, t in enumerate(tasks)]
    assert len(traces) == 1  # same shapes: one trace
    stacked = jax.tree.map(lambda *x: np.stack(x), *tasks)
    batched = jax.tree.map(np.asarray, jax.jit(jax.vmap(base))(jax.random.split(jax.random.key(0), 3), stacked))
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(batched.selected[i], o.selected)
        np.testing.assert_allclose(batched.value[i], o.value, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(batched.s2[i], o.s2, rtol=1e-5, atol=1e-7)

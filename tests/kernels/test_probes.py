"""Tests for cfjax.kernels.probes (UpliftMem §5.5 RQ4 baselines; §4.3, App. A.4-A.7, B.2; SPEC §2.3).

Every strategy runs under ``jax.jit`` and is compared with its NumPy twin in
:mod:`cfjax.kernels.reference.probes`, in float32 and in float64 (float64 inside
``jax.enable_x64(True)`` blocks so x64 never leaks into other files).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

import cfjax.kernels as K
from cfjax.kernels import reference as R

BUDGET = 8
N, J, RANK = 32, 16, 6
N_MANY = 3000  # keys of the uniformity test

RANDOM = jax.jit(K.make_acquire_random(budget=BUDGET))
MCSTD = jax.jit(K.make_acquire_mcstd(budget=BUDGET))
EIG = jax.jit(K.make_acquire_eig(budget=BUDGET))
SAMPLES = jax.jit(K.mcstd_samples, static_argnames="n_samples")
RANDOM_MANY = jax.jit(jax.vmap(K.make_acquire_random(budget=BUDGET), in_axes=(0, None)))
TOL = {np.float32: dict(rtol=1e-4, atol=1e-6), np.float64: dict(rtol=1e-9, atol=1e-13)}


def _problem(seed, dt=np.float32, *, cand_frac=0.8, n_groups=5, nu0=0.4):
    """A task batch's probe pool with Σ a Bayesian-linear-regression posterior (SPEC §2.3)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4 * RANK, RANK))
    cov = np.linalg.inv(np.eye(RANK) + x.T @ x / 2.0)
    cand = rng.random(N) < cand_frac
    cand[0] = True
    arrays = dict(
        features=rng.normal(size=(N, RANK)) * rng.uniform(0.3, 2.0, (N, 1)),
        noise_var=rng.uniform(0.1, 0.6, N),
        directions=rng.normal(size=(J, RANK)),
        means=rng.normal(size=J) * 0.3,
        prior_cov=(cov + cov.T) / 2,
    )
    return K.AcquireInputs(
        cand_mask=cand, group=rng.integers(-1, n_groups, N).astype(np.int32), comp_mask=rng.random(J) < 0.85,
        ref_noise_var=dt(nu0), tau=dt(0.05), mode=np.int32(K.ARGMAX),
        **{k: v.astype(dt) for k, v in arrays.items()},
    )


def _run(kernel, key, inputs):
    return jax.tree.map(np.asarray, kernel(key, inputs))


def _check_twin(res, ref, dt, what):
    sel, val, s2 = ref
    np.testing.assert_array_equal(res.selected, sel, err_msg=what)
    np.testing.assert_allclose(res.value, val, err_msg=what, **TOL[dt])
    scale = float(np.max(res.sigma2))
    np.testing.assert_allclose(res.s2, s2, rtol=TOL[dt]["rtol"], atol=TOL[dt]["atol"] * scale, err_msg=what)
    assert res.s2_trace.shape == (0, J) and res.v_trace.shape == (0, N), what
    assert res.value.dtype == dt and res.s2.dtype == dt and res.selected.dtype == np.int32, what


def _check_batch(res, inputs):
    """Valid, distinct picks first, then -1 with value 0; s2 in [0, σ²], 0 for masked comparisons."""
    n_valid = int(np.sum(inputs.cand_mask))
    k = min(BUDGET, n_valid)
    head = res.selected[:k]
    assert np.all(inputs.cand_mask[head]) and len(set(head.tolist())) == k
    np.testing.assert_array_equal(res.selected[k:], -1)
    np.testing.assert_array_equal(res.value[k:], 0)
    assert np.all(np.isfinite(res.value)) and np.all(np.isfinite(res.s2))
    assert np.all(res.s2 >= 0) and np.all(res.s2 <= res.sigma2 * (1 + 1e-6))
    assert np.all(res.s2[~inputs.comp_mask] == 0)
    assert int(res.n_active) == int(np.sum(inputs.comp_mask))


def _twins(inputs, key, dt):
    """``(name, kernel result, twin)`` for the three strategies on one problem."""
    xi = np.asarray(SAMPLES(key, inputs.prior_cov, n_samples=64))
    rand = _run(RANDOM, key, inputs)
    return [
        ("random", rand, R.random_reference(inputs, rand.selected)),
        ("mcstd", _run(MCSTD, key, inputs), R.mcstd_reference(inputs, xi, BUDGET)),
        ("eig", _run(EIG, key, inputs), R.eig_reference(inputs, BUDGET)),
    ]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_kernels_match_twins(dt, seed):
    with jax.enable_x64(dt == np.float64):
        inputs = _problem(seed, dt)
        for name, res, ref in _twins(inputs, jax.random.key(seed), dt):
            _check_twin(res, ref, dt, f"{name} {dt.__name__} seed {seed}")
            _check_batch(res, inputs)


def test_masked_padding_nan_and_exhaustion():
    inputs = _problem(3, cand_frac=1.0)
    cand = np.zeros(N, bool)
    cand[[1, 4, 9, 20, 31]] = True  # fewer valid candidates than the budget
    comp = inputs.comp_mask
    bad = dict(features=inputs.features.copy(), noise_var=inputs.noise_var.copy(),
               directions=inputs.directions.copy(), means=inputs.means.copy())
    bad["features"][~cand] = np.nan  # padding may hold anything
    bad["noise_var"][~cand] = np.nan
    bad["directions"][~comp] = np.nan
    bad["means"][~comp] = np.inf
    dirty = inputs._replace(cand_mask=cand, **bad)
    clean = inputs._replace(cand_mask=cand)
    for name, res, ref in _twins(dirty, jax.random.key(5), np.float32):
        _check_batch(res, dirty)
        assert sorted(res.selected[:5].tolist()) == [1, 4, 9, 20, 31], name
        _check_twin(res, ref, np.float32, name)
    # padding values do not matter: identical results with and without NaN in masked rows
    for a, b in zip(_twins(dirty, jax.random.key(5), np.float32), _twins(clean, jax.random.key(5), np.float32)):
        np.testing.assert_array_equal(a[1].selected, b[1].selected)
        np.testing.assert_array_equal(a[1].value, b[1].value)
        np.testing.assert_array_equal(a[1].s2, b[1].s2)


def test_no_valid_candidate():
    inputs = _problem(4)._replace(cand_mask=np.zeros(N, bool))
    for kernel in (RANDOM, MCSTD, EIG):
        res = _run(kernel, jax.random.key(0), inputs)
        np.testing.assert_array_equal(res.selected, -1)
        np.testing.assert_array_equal(res.value, 0)
        np.testing.assert_array_equal(res.s2, 0)


def test_random_is_uniform_and_seeds_differ():
    inputs = _problem(6, cand_frac=0.6)
    cand = inputs.cand_mask
    n_valid = int(cand.sum())
    sel = np.asarray(RANDOM_MANY(jax.random.split(jax.random.key(11), N_MANY), inputs).selected)
    assert np.all(cand[sel]) and all(len(set(s.tolist())) == BUDGET for s in sel)
    assert len({tuple(s) for s in sel}) > N_MANY * 0.99  # different keys, different batches
    first = np.bincount(sel[:, 0], minlength=N)[cand]
    chi2 = np.sum((first - N_MANY / n_valid) ** 2 / (N_MANY / n_valid))
    assert chi2 < stats.chi2.ppf(0.999, df=n_valid - 1), first
    # inclusion counts (negatively correlated across candidates, so this bound is conservative)
    incl = np.bincount(sel.ravel(), minlength=N)[cand]
    expect = N_MANY * BUDGET / n_valid
    assert np.sum((incl - expect) ** 2 / expect) < stats.chi2.ppf(0.999, df=n_valid - 1), incl
    # the draw uses float32 keys: the same batch for float32 and float64 inputs
    with jax.enable_x64(True):
        sel64 = _run(RANDOM, jax.random.key(11), _problem(6, np.float64, cand_frac=0.6)).selected
    np.testing.assert_array_equal(sel64, _run(RANDOM, jax.random.key(11), inputs).selected)


def test_mcstd_samples_and_seeds():
    inputs = _problem(7)
    cov = inputs.prior_cov.astype(np.float64)
    xi = np.asarray(SAMPLES(jax.random.key(2), inputs.prior_cov, n_samples=20000), np.float64)
    assert xi.shape == (20000, RANK) and np.all(np.isfinite(xi))
    se = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / 20000)  # std. error of the sample cov
    assert np.all(np.abs(xi.T @ xi / 20000 - cov) < 5 * se)
    a, b = _run(MCSTD, jax.random.key(0), inputs), _run(MCSTD, jax.random.key(1), inputs)
    assert not np.array_equal(a.value, b.value)  # different keys, different ξ
    # std_q estimates √(φ_qᵀΣφ_q): the scores of the picks are close to the exact predictive std
    exact = np.sqrt(np.einsum("nr,rs,ns->n", inputs.features, cov, inputs.features))
    np.testing.assert_allclose(a.value, exact[a.selected], rtol=0.35)
    assert np.all(np.diff(a.value) <= 0)  # top-k order


def test_eig_properties():
    """EIG values are non-increasing (conditioning only shrinks v); without shared references the
    first value is the exact mutual information ½·log(1 + φᵀΣφ/(ν_q² + ν_0²))."""
    with jax.enable_x64(True):
        inputs = _problem(8, np.float64)
        res = _run(EIG, jax.random.key(0), inputs)
        assert np.all(np.diff(res.value) <= 1e-12)
        own = inputs._replace(group=np.full(N, -1, np.int32))
        res = _run(EIG, jax.random.key(0), own)
        pv = np.einsum("nr,rs,ns->n", own.features, own.prior_cov, own.features)
        mi = np.where(own.cand_mask, 0.5 * np.log1p(pv / (own.noise_var + own.ref_noise_var)), -np.inf)
        assert res.selected[0] == np.argmax(mi)
        np.testing.assert_allclose(res.value[0], mi.max(), rtol=1e-12)
        # the key is ignored
        np.testing.assert_array_equal(_run(EIG, jax.random.key(9), own).selected, res.selected)


def test_exact_ties_go_to_the_lowest_index():
    inputs = _problem(12, cand_frac=1.0)
    feats, nv = inputs.features.copy(), inputs.noise_var.copy()
    feats[[7, 3]] = 10 * feats[0]  # two identical, dominant probes
    nv[[7, 3]] = nv[0]
    inputs = inputs._replace(features=feats, noise_var=nv, group=np.full(N, -1, np.int32))
    assert _run(MCSTD, jax.random.key(0), inputs).selected[:2].tolist() == [3, 7]
    assert _run(EIG, jax.random.key(0), inputs).selected[0] == 3


def test_factories_reject_bad_static_config():
    for make in (K.make_acquire_random, K.make_acquire_mcstd, K.make_acquire_eig):
        with pytest.raises(ValueError):
            make(budget=0)
    with pytest.raises(ValueError):
        K.make_acquire_mcstd(budget=2, n_samples=1)


def test_no_retrace_for_new_values():
    traces = {}

    def counted(name, fn):
        def wrapped(key, inputs):
            traces[name] = traces.get(name, 0) + 1
            return fn(key, inputs)
        return jax.jit(wrapped)

    kernels = {name: counted(name, make(budget=BUDGET)) for name, make in
               (("random", K.make_acquire_random), ("mcstd", K.make_acquire_mcstd), ("eig", K.make_acquire_eig))}
    problems = [_problem(10), _problem(11, nu0=0.0)._replace(mode=np.int32(K.SOFTMAX), tau=np.float32(3.0))]
    for i, inputs in enumerate(problems):
        for kernel in kernels.values():
            _check_batch(_run(kernel, jax.random.key(i), inputs), inputs)
    assert traces == {"random": 1, "mcstd": 1, "eig": 1}

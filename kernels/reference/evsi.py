"""Plain NumPy references of :mod:`cfjax.kernels.evsi` and :mod:`cfjax.kernels.acquire` (float64; tests and benchmarks).

Written for clarity, not speed: explicit ``W_Q`` matrices, Cholesky factors recomputed from
scratch, per-candidate recomputation in the naive greedy. :func:`greedy_rank_one_reference` is the
vectorised NumPy version of the kernel's rank-one algorithm (the benchmark's "NumPy rank-one").
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, special

__all__ = [
    "psi_reference", "evsi_reference", "evsi_var_reference", "shared_noise_cov_reference",
    "resolved_variance_reference",
    "conditional_moments_reference", "blr_posterior_reference", "batch_values_reference",
    "greedy_reference", "greedy_rank_one_reference",
]

_SQRT_PI_2 = np.sqrt(np.pi / 2)


def _float_dtype(*xs):
    dt = np.result_type(*[np.asarray(x) for x in xs])
    return dt if dt in (np.float32, np.float64) else np.dtype(np.float64)


def psi_reference(t):
    """``ψ(t) = φ(t)(1 − t·R(t))`` with ``R(t) = √(π/2)·erfcx(t/√2)`` (relative error ``~t²ε``).

    Computed in the input's dtype (float32 stays float32; anything else float64).
    """
    t = np.asarray(t)
    dt = _float_dtype(t)
    t = t.astype(dt, copy=False)
    a = np.abs(t)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        p = (np.exp(dt.type(-0.5) * a * a) * dt.type(1 / np.sqrt(2 * np.pi))
             * (dt.type(1) - a * dt.type(_SQRT_PI_2) * special.erfcx(a * dt.type(1 / np.sqrt(2)))))
        p = np.where(np.isfinite(a), np.maximum(p, dt.type(0)), dt.type(0))
    return np.where(t >= 0, p, a + p).astype(dt, copy=False)


def evsi_reference(mu, s):
    """``E(μ, s) = s·ψ(|μ|/s)``, ``E(μ, 0) = 0`` (float32 inputs stay float32)."""
    dt = _float_dtype(mu, s)
    mu, s = np.broadcast_arrays(np.asarray(mu, dt), np.asarray(s, dt))
    pos = s > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(pos, np.abs(mu) / np.where(pos, s, dt.type(1)), dt.type(0))
    return np.where(pos, s * psi_reference(t), dt.type(0))


def evsi_var_reference(abs_mu, s2):
    """``E(μ, √s²)`` for ``|μ|`` and ``s² ≥ 0`` (no negative ``t``, no custom edge handling beyond
    ``s² = 0``): the lean vectorised form the NumPy rank-one greedy uses. Keeps float32/float64."""
    dt = _float_dtype(abs_mu, s2)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
        s = np.sqrt(s2)
        t = abs_mu / s
        mills = dt.type(_SQRT_PI_2) * special.erfcx(t * dt.type(1 / np.sqrt(2)))  # Φ(−t)/φ(t)
        psi = np.exp(dt.type(-0.5) * t * t) * (dt.type(1) - t * mills)
        e = s * psi * dt.type(1 / np.sqrt(2 * np.pi))
    return np.where(s2 > 0, e, dt.type(0)).astype(dt, copy=False)


def shared_noise_cov_reference(noise_var, group, ref_noise_var):
    """``Ω = diag(ν²) + ν_0²·([q = q'] or [g_q = g_q' ≥ 0])``."""
    noise_var = np.asarray(noise_var, np.float64)
    group = np.asarray(group)
    same = (np.equal.outer(group, group) & (group[:, None] >= 0)) | np.eye(len(group), dtype=bool)
    return np.diag(noise_var) + ref_noise_var * same


def resolved_variance_reference(directions, features, noise_var, group, idx, prior_cov, ref_noise_var):
    """``s_j²(Q) = k_jᵀW_Q⁻¹k_j`` for ``Q = idx`` (explicit ``W_Q``, Cholesky). `f64[J]`."""
    h = np.asarray(directions, np.float64)
    idx = np.asarray(idx, int)
    if len(idx) == 0:
        return np.zeros(h.shape[0])
    f = np.asarray(features, np.float64)[idx]
    sig = np.asarray(prior_cov, np.float64)
    w = f @ sig @ f.T + shared_noise_cov_reference(np.asarray(noise_var)[idx], np.asarray(group)[idx], ref_noise_var)
    k = f @ sig @ h.T
    chol = np.linalg.cholesky(w)
    z = linalg.solve_triangular(chol, k, lower=True)
    return np.sum(z * z, axis=0)


def conditional_moments_reference(directions, features, noise_var, group, idx, prior_cov, ref_noise_var):
    """``(κ_{jq|Q} [J, N], v_{q|Q} [N])`` from ``W_Q⁻¹`` (App. A.7), for all candidates ``q``."""
    h = np.asarray(directions, np.float64)
    f = np.asarray(features, np.float64)
    sig = np.asarray(prior_cov, np.float64)
    omega = shared_noise_cov_reference(noise_var, group, ref_noise_var)
    cyy = f @ sig @ f.T + omega  # Cov(y, y) [N, N]
    cgy = h @ sig @ f.T  # Cov(g, y) [J, N]
    idx = np.asarray(idx, int)
    if len(idx) == 0:
        return cgy, np.diag(cyy).copy()
    winv = np.linalg.inv(cyy[np.ix_(idx, idx)])
    kappa = cgy - cgy[:, idx] @ winv @ cyy[idx, :]
    v = np.diag(cyy) - np.einsum("qa,ab,bq->q", cyy[:, idx], winv, cyy[idx, :])
    return kappa, v


def blr_posterior_reference(x, y, mask, *, prior_precision, noise_var):
    """Closed form ``cov = (λI + XᵀWX)⁻¹``, ``mean = cov·XᵀWy`` over unmasked rows, ``W = diag(1/ν_i²)``
    (``noise_var`` a scalar ``ν²`` or one per row)."""
    m = np.asarray(mask, bool)
    x = np.asarray(x, np.float64)[m]
    y = np.asarray(y, np.float64)[m]
    w = 1.0 / np.broadcast_to(np.asarray(noise_var, np.float64), m.shape)[m]
    cov = np.linalg.inv(prior_precision * np.eye(x.shape[1]) + x.T @ (x * w[:, None]))
    return cov @ x.T @ (y * w), cov


def _clean(inputs):
    """Masked rows ignored: zero their features / directions / means (padding may be NaN)."""
    cm = np.asarray(inputs.cand_mask, bool)
    jm = np.asarray(inputs.comp_mask, bool)
    return inputs._replace(
        features=np.where(cm[:, None], inputs.features, 0), noise_var=np.where(cm, inputs.noise_var, 1),
        directions=np.where(jm[:, None], inputs.directions, 0), means=np.where(jm, inputs.means, 0),
    )


def _active(inputs, prune_rtol):
    h = np.asarray(inputs.directions, np.float64)
    sig = np.asarray(inputs.prior_cov, np.float64)
    sigma2 = np.maximum(np.einsum("jr,rs,js->j", h, sig, h), 0.0)
    active = np.asarray(inputs.comp_mask, bool).copy()
    if prune_rtol > 0:
        bound = np.where(active, evsi_reference(inputs.means, np.sqrt(sigma2)), 0.0)
        active &= bound > prune_rtol * bound.max()
    return active, sigma2


def batch_values_reference(inputs, idx, *, prune_rtol: float = 0.0, candidates=None):
    """``V(q) = Σ_j [E_j(Q ∪ {q}) − E_j(Q)]`` for every candidate (or only ``candidates``), by
    per-candidate recomputation from a Cholesky of ``W_{Q∪{q}}`` (``-inf`` for masked, selected or
    skipped candidates). `f64[N]`."""
    inputs = _clean(inputs)
    mu = np.asarray(inputs.means, np.float64)
    active, _ = _active(inputs, prune_rtol)
    args = (inputs.directions, inputs.features, inputs.noise_var, inputs.group)
    s_now = np.sqrt(np.maximum(resolved_variance_reference(*args, list(idx), inputs.prior_cov,
                                                           float(inputs.ref_noise_var)), 0.0))
    e_now = evsi_reference(mu, s_now)
    n = np.asarray(inputs.features).shape[0]
    out = np.full(n, -np.inf)
    cand = np.asarray(inputs.cand_mask, bool)
    for q in range(n) if candidates is None else candidates:
        if not cand[q] or q in idx:
            continue
        s2 = resolved_variance_reference(*args, list(idx) + [q], inputs.prior_cov, float(inputs.ref_noise_var))
        out[q] = np.sum(np.where(active, evsi_reference(mu, np.sqrt(np.maximum(s2, 0.0))) - e_now, 0.0))
    return out


def greedy_reference(inputs, budget: int, *, prune_rtol: float = 0.0, n_steps: int | None = None):
    """Naive greedy argmax: every step recomputes ``V(q)`` for every candidate from an explicit
    Cholesky of ``W_{Q∪{q}}`` (:func:`batch_values_reference`). Returns ``(selected i64[budget],
    value f64[budget])`` with -1 / 0 once no candidate is left. ``n_steps`` stops early."""
    sel, vals = [], []
    for _ in range(budget if n_steps is None else n_steps):
        v = batch_values_reference(inputs, sel, prune_rtol=prune_rtol)
        if not np.isfinite(v).any():
            break
        q = int(np.argmax(v))
        sel.append(q)
        vals.append(float(v[q]))
    pad = budget - len(sel)
    return np.array(sel + [-1] * pad, np.int64), np.array(vals + [0.0] * pad)


def greedy_rank_one_reference(inputs, budget: int, *, prune_rtol: float = 0.0, dtype=np.float64,
                              n_steps: int | None = None):
    """Vectorised NumPy rank-one greedy argmax (the kernel's algorithm, one NumPy op at a time).

    Maintains ``κ [J, N]``, ``v [N]``, ``s² [J]`` and the downdate ``D [N, budget]``; each step is
    ``O(N(r + budget) + J·N)``. Returns ``(selected, value, s2)``.
    """
    inputs = _clean(inputs)
    dt = np.dtype(dtype)
    f = np.asarray(inputs.features, dt)
    cand = np.asarray(inputs.cand_mask, bool)
    nv = np.asarray(inputs.noise_var, dt)
    grp = np.asarray(inputs.group)
    h = np.asarray(inputs.directions, dt)
    mu = np.abs(np.asarray(inputs.means, dt))
    sig = np.asarray(inputs.prior_cov, dt)
    nu0 = dt.type(inputs.ref_noise_var)
    active, sigma2 = _active(inputs, prune_rtol)
    sigma2 = sigma2.astype(dt)
    n, j = f.shape[0], h.shape[0]
    sphi = f @ sig
    kappa = h @ sphi.T
    v = np.einsum("nr,nr->n", sphi, f) + nu0 + nv
    s2 = np.zeros(j, dt)
    dd = np.zeros((n, budget), dt)
    avail = cand.copy()
    sel, vals = [], []

    def values():
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            inv_v = np.where(avail & (v > 0), 1.0 / v, 0.0)
            e_now = evsi_var_reference(mu, s2)
            e_new = evsi_var_reference(mu[:, None], s2[:, None] + kappa * kappa * inv_v[None, :])
            diff = e_new - e_now[:, None]
            val = active.astype(dt) @ diff
        return np.where(avail, val, -np.inf)

    for t in range(budget if n_steps is None else n_steps):
        if not avail.any():
            break
        vv = values()
        q = int(np.argmax(vv))
        sel.append(q)
        vals.append(float(vv[q]))
        same = ((grp == grp[q]) & (grp[q] >= 0)) | (np.arange(n) == q)
        c = f @ sphi[q] + nu0 * same + np.where(np.arange(n) == q, nv[q], 0.0) - dd @ dd[q]
        rs = 1.0 / np.sqrt(v[q])
        u = c * rs
        a = kappa[:, q] * rs
        kappa -= np.outer(a, u)
        kappa[:, q] = 0.0
        s2 = np.minimum(s2 + a * a, sigma2)
        col = u.copy()
        col[q] -= nv[q] * rs
        dd[:, t] = col
        v = np.maximum(v - u * u, nv)
        v[q] = 0.0
        avail[q] = False
    pad = budget - len(sel)
    return np.array(sel + [-1] * pad, np.int64), np.array(vals + [0.0] * pad), np.where(inputs.comp_mask, s2, 0.0)

"""UpliftMem decision-aware probing: ψ, EVSI and Gaussian conditioning (acquisition: :mod:`cfjax.kernels.acquire`).

papers/upliftmem.md §4.3 (Theorem 2, Eq. 12), App. A.4 (Gaussian beliefs), A.5 (EVSI and its
derivatives), A.7 (rank-one batch conditioning, entropy-regularised acquisition), B.2 (probe pools,
softmax acquisition); SPEC.md §2.3.

**Special functions.** ``ψ(t) = φ(t) − t·Φ(−t)`` (= ``E[(Z − t)_+]`` for ``Z ~ N(0, 1)``) and
``E(μ, s) = s·ψ(|μ|/s)``. The textbook formula cancels catastrophically for large ``t``
(``ψ(t) ~ φ(t)/t²``). We never subtract: for ``t ≥ 0``

    ψ(t) = φ(t) · ρ(t),     ρ(t) = ψ(t)/φ(t) = 1 − t·R(t) = G_ρ(x) / (1 + t²)
    Φ(−t) = φ(t) · R(t),    R(t) = Φ(−t)/φ(t) (Mills ratio)  = G_R(x) / (1 + t)

with ``x = t/(t + 4) ∈ [0, 1)``: the rescaled functions ``G_ρ = (1 + t²)ρ`` and ``G_R = (1 + t)R``
are smooth, bounded (``G → 1`` as ``t → ∞``) and are stored as Chebyshev series in ``y = 2x − 1 =
(t − 4)/(t + 4)`` (coefficients fitted once with mpmath at 40 digits, :func:`chebyshev_fit`,
verified by the tests), converted to the power basis at import (well conditioned: ``Σ|a_k| ≈ 2.2``
on ``|y| ≤ 1``) and evaluated by Horner's rule. One formula covers ``[0, ∞)``: no thresholds, no
branch, no cancellation, one ``exp``, and no ``erfc``/``erfcx`` (``jax.scipy.special.erfcx``
returns 0 on a band near ``x ≈ 9.3`` in float32 in the installed JAX). The dtype-aware choices:
the truncation degree (13 in float32, series error 5e-9; 26 in float64, series error 2e-17) and the
split of ``t`` below; ``t`` is capped at 64, where ``φ = ψ = Φ(−t) = 0`` in every dtype.
float16/bfloat16 are computed in float32.

``φ(t)`` itself is computed from an exactly split square: ``t = t_hi + t_lo`` with ``t_hi`` holding
the top 12 (float32) / 26 (float64) significand bits, so ``t_hi²`` is exact and
``exp(−t²/2) = exp(−t_hi²/2)·exp(−(t − t_hi)(t + t_hi)/2)``, the second factor by its Taylor
polynomial. This removes the ``t²·ε`` relative error of ``exp(−fl(t²)/2)`` (5e-6 at ``t = 13`` in
float32). :func:`evsi` also corrects the rounding of ``t = |μ|/s`` to first order (an exact
two-product residual ``r = (|μ| − t·s)/s``, ``ψ(t + r) ≈ ψ(t)(1 − r·R/ρ)``), since ``ψ``'s condition
number is ``~t²``. Measured against mpmath: relative error ≤ 1e-6 (float32) / 1e-14 (float64)
wherever the result is a normal number. Results below the normal range are flushed to 0 by XLA's
CPU backend (it runs with denormals-are-zero): values are never negative and their absolute error
is below the smallest normal number.

Derivatives are exact and finite through ``jax.custom_jvp`` (Eq. A.5): ``∂E/∂s = φ(t)``,
``∂E/∂μ = −sign(μ)·Φ(−t)`` (0 at ``μ = 0``, the mean of the one-sided derivatives ``∓1/2``),
``∂E/∂s = φ(0)`` at ``s = 0, μ = 0`` and 0 at ``s = 0, μ ≠ 0``. The helpers are themselves
``custom_jvp``'d, so higher derivatives work.

**Gaussian conditioning (App. A.4).** ``G̃ = G + φᵀξ``, ``ξ ~ N(0, Σ)``; a probe label
``y_q = μ_q + φ_qᵀξ + ε_q`` with ``Cov(ε) = Ω = diag(ν_q²) + ν_0²·[same no-memory reference]``. Our
convention: every label carries one reference execution, so ``Ω_qq = ν_q² + ν_0²``; two different
labels share ``ν_0²`` iff their group ids are equal and ``≥ 0`` (group ``-1`` = a reference of its
own). Two equivalent forms: :func:`resolved_variance` (dense ``Ω``, Cholesky of ``W_Q``) and
:func:`latent_batch_augment` (one latent per reference group with variance ``ν_0²``, one-hot feature
columns, zero-padded directions, so ``Ω`` is diagonal).

**Greedy batch acquisition (App. A.7, B.2)** lives in :mod:`cfjax.kernels.acquire`
(:func:`cfjax.kernels.acquire.make_acquire` selects ``budget`` probes one at a time inside
``lax.scan``); its names stay importable from here.

**Σ (our choice, SPEC §2.3).** :func:`blr_posterior`: the posterior of a Bayesian linear
regression on the scorer's penultimate features (prior ``N(0, λ⁻¹I)``, noise ``ν²``).
NumPy references of every kernel live in :mod:`cfjax.kernels.reference.evsi`.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


__all__ = [
    "psi", "evsi", "std_normal_pdf", "normal_tail", "chebyshev_fit",
    "shared_noise_cov", "comparison_variance", "comparison_bound", "resolved_variance",
    "latent_batch_augment", "resolved_variance_latent", "blr_posterior",
]

_ACQUIRE = ("ARGMAX", "SOFTMAX", "AcquireInputs", "AcquireState", "AcquireResult", "sanitize_inputs", "acquire_init",
            "acquire_condition", "batch_values", "make_acquire")


def __getattr__(name):  # old import paths: acquisition moved to cfjax.kernels.acquire
    if name in _ACQUIRE:
        from cfjax.kernels import acquire

        return getattr(acquire, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# ----------------------------------------------------------------------------------------------
# Chebyshev series (in y = (t − 4)/(t + 4)) of G_ρ(t) = (1 + t²)·ψ(t)/φ(t) and
# G_R(t) = (1 + t)·Φ(−t)/φ(t); constant term already halved. Generated by
# ``chebyshev_fit("rho"|"mills", n_nodes=90, dps=40)``; the tests regenerate and compare them.
_MAP_C = 4.0
_RHO_CHEB = (
    0.8966519776895315, 0.11149465606636559, 0.04126950738202469, -0.08957011180199584, 0.0572343178011118,
    -0.021451929007718404, 0.004911893649200359, -0.0004980695019312394, -6.738337823534966e-05,
    2.639518497941906e-05, -3.7842106944839027e-07, -9.77944027155942e-07, 6.86940360422116e-08,
    3.868338530869645e-08, -3.5467657893537844e-09, -1.7645761374808486e-09, 1.3271601400314463e-10,
    9.006450096999277e-11, -2.3620706353872828e-12, -4.777019323915465e-12, -2.1963535096552872e-13,
    2.4082510565443187e-13, 3.4841101543205944e-14, -1.0071200460062383e-14, -3.1699033762921536e-15,
    2.08735022064357e-16, 2.1942169367711348e-16,
)
_MILLS_CHEB = (
    1.1670525350882472, -0.1610195767134654, -0.028002821825452974, 0.03167452189239266,
    -0.012103231162345369, 0.0027056129762167095, -0.00029931636202703166, -1.716686526879361e-05,
    1.0178489264109868e-05, -4.894829570004192e-07, -2.844006500151048e-07, 3.0766283713811506e-08,
    9.180378674469537e-09, -1.2756102213808737e-09, -3.660279376104134e-10, 4.5926359348595205e-11,
    1.7189314687646526e-11, -1.2726833698700693e-12, -8.668081913316188e-13, 1.1061557204136741e-15,
    4.2750210770103334e-14, 3.790937692263904e-15, -1.8474103010592332e-15, -4.0419094130708177e-16,
    5.340854385017358e-17, 2.941479937590055e-17, 9.076691823620142e-19,
)
_N_TERMS = {"float32": 14, "float64": 27}  # Chebyshev terms kept (degree 13 / 26)
_T_CAP = 64.0  # φ(64) = e^-2048/√(2π) = 0 in every dtype: ψ, Φ(−t), φ and all derivatives vanish beyond
_SPLIT_MASK = {"float32": (np.uint32, 0xFFFFF000), "float64": (np.uint64, 0xFFFFFFFFF8000000)}
_INV_SQRT_2PI = 0.3989422804014327



def chebyshev_fit(kind: str, *, n_nodes: int = 90, dps: int = 40, c: float = _MAP_C) -> list[float]:
    """Chebyshev coefficients of ``G_ρ`` (``kind="rho"``) or ``G_R`` (``"mills"``) in ``y = (t − c)/(t + c)``.

    Interpolation at ``n_nodes`` Chebyshev nodes in mpmath at ``dps`` digits (host-side, needs the
    ``mpmath`` test extra); the constant term is halved (``Σ_k c_k T_k(y)``).
    """
    import mpmath as mp

    with mp.workdps(dps):
        cc = mp.mpf(c)

        def g(x):
            if x >= 1:
                return mp.mpf(1)
            t = cc * x / (1 - x)
            if kind == "rho":
                return mp.mpf(1) if t == 0 else (1 + t * t) * (mp.npdf(t) - t * mp.ncdf(-t)) / mp.npdf(t)
            if kind == "mills":
                return (1 + t) * mp.ncdf(-t) / mp.npdf(t)
            raise ValueError(kind)

        half = mp.mpf(1) / 2
        xs = [(mp.cos(mp.pi * (k + half) / n_nodes) + 1) / 2 for k in range(n_nodes)]
        fv = [g(x) for x in xs]
        out = [2 * mp.fsum(fv[k] * mp.cos(mp.pi * j * (k + half) / n_nodes) for k in range(n_nodes)) / n_nodes
               for j in range(n_nodes)]
        out[0] /= 2
        return [float(v) for v in out]


# ---------------------------------------------------------------------------------- helpers
def _float(x) -> jnp.ndarray:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


def _key(dtype) -> str:
    return "float64" if jnp.dtype(dtype) == jnp.float64 else "float32"


def _work_dtype(dtype):
    """float64 stays; everything else is computed in float32."""
    return jnp.float64 if jnp.dtype(dtype) == jnp.float64 else jnp.float32


def _monomial(cheb) -> tuple[float, ...]:
    """Power-basis coefficients (ascending) of a Chebyshev series; well conditioned here
    (``Σ|a_k| ≈ 2.2`` on ``|y| ≤ 1``), so Horner loses nothing against Clenshaw and is cheaper."""
    return tuple(float(a) for a in np.polynomial.chebyshev.cheb2poly(np.asarray(cheb, np.float64)))


_POLY = {(kind, key): _monomial(cheb[:n])
         for kind, cheb in (("rho", _RHO_CHEB), ("mills", _MILLS_CHEB))
         for key, n in _N_TERMS.items()}


def _horner(coeffs, y):
    acc = jnp.full_like(y, coeffs[-1])
    for a in coeffs[-2::-1]:
        acc = acc * y + a
    return acc


def _series(kind: str, t):
    """``G_ρ(t)`` or ``G_R(t)`` for ``t ≥ 0`` at the dtype's truncation degree."""
    y = (t - _MAP_C) / (t + _MAP_C)
    return _horner(_POLY[(kind, _key(t.dtype))], y)


def _truncate_bits(t):
    """``t`` with its low significand bits cleared (``t ≥ 0`` finite): ``t_hi²`` is exact."""
    utype, mask = _SPLIT_MASK[_key(t.dtype)]
    bits = lax.bitcast_convert_type(t, utype)
    return lax.bitcast_convert_type(bits & jnp.asarray(mask, utype), t.dtype)


def _exp_neg_half_sq(t):
    """``exp(−t²/2)`` for ``0 ≤ t ≤ 64`` without the rounding error of ``fl(t²)``."""
    th = _truncate_bits(t)
    lo = (t - th) * (t + th)  # t² − t_hi², ≥ 0, ≤ 2^-11·t² (f32) / 2^-25·t² (f64)
    x = jnp.minimum(0.5 * lo, 0.5)  # ≤ 0.09 (f32, t ≤ 13.5) / 2e-5 (f64, t ≤ 39) where φ(t) is normal
    corr = 1.0 - x * (1.0 - x * (0.5 - x * (1.0 / 6.0 - x * (1.0 / 24.0 - x * (1.0 / 120.0)))))
    return jnp.exp(-0.5 * (th * th)) * corr


def _clamp_abs(t):
    return jnp.minimum(jnp.abs(t), _T_CAP)


def _pdf_pos(a):
    return _INV_SQRT_2PI * _exp_neg_half_sq(a)


def _psi_pos(a):
    """``ψ(a)`` for ``0 ≤ a ≤ 64``."""
    return _pdf_pos(a) * _series("rho", a) / (1.0 + a * a)


def _tail_pos(a):
    """``Φ(−a)`` for ``0 ≤ a ≤ 64``."""
    return _pdf_pos(a) * _series("mills", a) / (1.0 + a)


def _unary(fn_pos: Callable, t):
    t = _float(t)
    wd = _work_dtype(t.dtype)
    tw = t.astype(wd)
    return fn_pos(tw).astype(t.dtype)


# ------------------------------------------------------------------------- special functions
@jax.custom_jvp
def std_normal_pdf(t):
    """``φ(t)``, accurate to a few ulp over the whole normal range (exactly split ``t²``)."""
    return _unary(lambda x: _pdf_pos(_clamp_abs(x)), t)


@std_normal_pdf.defjvp
def _std_normal_pdf_jvp(primals, tangents):
    (t,), (dt,) = primals, tangents
    p = std_normal_pdf(t)
    return p, -t * p * dt


@jax.custom_jvp
def normal_tail(t):
    """``Φ(−t) = P(Z > t)`` without cancellation for ``t ≥ 0`` (``1 − Φ(−|t|)`` for ``t < 0``)."""

    def f(x):
        a = _clamp_abs(x)
        tail = _tail_pos(a)
        return jnp.where(x >= 0, tail, 1.0 - tail)

    return _unary(f, t)


@normal_tail.defjvp
def _normal_tail_jvp(primals, tangents):
    (t,), (dt,) = primals, tangents
    return normal_tail(t), -std_normal_pdf(t) * dt


@jax.custom_jvp
def psi(t):
    """``ψ(t) = φ(t) − t·Φ(−t) = E[(Z − t)_+]`` (Theorem 2), any real ``t``.

    ``t ≥ 0``: ``φ(t)·G_ρ(t)/(1 + t²)`` (module docstring); ``t < 0``: ``|t| + ψ(|t|)``.
    ``dψ/dt = −Φ(−t)``. Shape and dtype follow ``t``.
    """

    def f(x):
        a = _clamp_abs(x)
        p = _psi_pos(a)
        return jnp.where(x >= 0, p, jnp.abs(x) + p)

    return _unary(f, t)


@psi.defjvp
def _psi_jvp(primals, tangents):
    (t,), (dt,) = primals, tangents
    return psi(t), -normal_tail(t) * dt


def _two_prod_err(a, b):
    """``a·b − fl(a·b)`` exactly (Dekker, with a truncation split), for finite ``a, b ≥ 0``."""
    p = a * b
    ah, bh = _truncate_bits(a), _truncate_bits(b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@jax.custom_jvp
def _ratio(a, s):
    """``a/s`` whose tangent ``(da − (a/s)·ds)/s`` never forms ``s²`` (which underflows)."""
    return a / s


@_ratio.defjvp
def _ratio_jvp(primals, tangents):
    a, s = primals
    da, ds = tangents
    r = a / s
    return r, (da - r * ds) / s


def _evsi_t(mu, s):
    """``t = |μ|/s``, capped at 64 (where ``E`` and its derivatives are exactly 0) before dividing,
    so no tangent of an out-of-range ratio can overflow; ``s = 0``: ``t = 0`` if ``μ = 0`` else 64."""
    a = jnp.abs(mu)
    pos = s > 0
    inside = pos & (a < _T_CAP * s)
    t = _ratio(jnp.where(inside, a, 0.0), jnp.where(inside, s, 1.0))
    return jnp.where(inside, t, jnp.where(a > 0, _T_CAP, 0.0)), a, pos


@jax.custom_jvp
def evsi(mu, s):
    """Binary EVSI ``E(μ, s) = s·ψ(|μ|/s)`` (Theorem 2, Eq. A.5); ``E(μ, 0) = 0``.

    Args:
      mu: `f[...]` comparison mean ``μ_j`` (broadcasts with ``s``).
      s: `f[...]` resolved standard deviation ``s_j(Q) ≥ 0``.

    Returns:
      `f[...]` with ``0 ≤ E ≤ s/√(2π)``. Gradients: ``∂E/∂s = φ(t)``, ``∂E/∂μ = −sign(μ)Φ(−t)``.
    """
    mu, s = _float(mu), _float(s)
    dtype = jnp.result_type(mu, s)
    wd = _work_dtype(dtype)
    mu, s = mu.astype(wd), s.astype(wd)
    t, a, pos = _evsi_t(mu, s)
    p = _psi_pos(t)
    # first-order correction for the rounding of t = |μ|/s: r = (|μ| − t·s)/s exactly-ish
    ts, err = _two_prod_err(t, jnp.where(pos, s, 1.0))
    r = ((a - ts) - err) / jnp.where(pos, s, 1.0)
    ratio = t + 2.0 / (t + 1.0)  # ≈ R(t)/ρ(t) (= t + 2/t + …); only its large-t form matters
    corr = jnp.clip(r * ratio, -1e-3, 1e-3)
    e = jnp.where(pos, s * (p * (1.0 - corr)), 0.0)
    return e.astype(dtype)


@evsi.defjvp
def _evsi_jvp(primals, tangents):
    mu, s = primals
    dmu, ds = tangents
    e = evsi(mu, s)
    mu_f, s_f = _float(mu).astype(e.dtype), _float(s).astype(e.dtype)
    t, _, _ = _evsi_t(mu_f, s_f)
    de = std_normal_pdf(t) * ds - jnp.sign(mu_f) * normal_tail(t) * dmu
    return e, jnp.broadcast_to(de, e.shape).astype(e.dtype)


_HALF_LOG2E = 0.7213475204444817  # log2(e)/2


def _evsi_from_var(abs_mu, s2):
    """Hot-loop ``E(μ, √s²)`` from a variance (no custom JVP).

    ``abs_mu`` `f[...]` = ``|μ|``, ``s2`` `f[...]` ``≥ 0``, same dtype. Same series as :func:`evsi`
    but a plain ``exp2(−t²·log2(e)/2)`` (``~t²ε`` relative rounding, irrelevant for ranking
    probes) and one shared division for ``y`` and ``1/(1 + t²)``; ``E = 0`` at ``s² = 0``.
    The op mix is chosen for XLA:CPU, where ``exp2``, ``sqrt`` and ``/`` vectorise and ``rsqrt`` /
    ``exp`` cost 2–3× more.
    """
    s = jnp.sqrt(s2)
    t = jnp.minimum(abs_mu / jnp.maximum(s, jnp.finfo(s2.dtype).tiny), _T_CAP)
    q = 1.0 + t * t
    tp = t + _MAP_C
    r = 1.0 / (tp * q)
    y = (t - _MAP_C) * q * r
    g = _horner(_POLY[("rho", _key(s2.dtype))], y)
    return (s * _INV_SQRT_2PI) * jnp.exp2(-_HALF_LOG2E * (t * t)) * g * (tp * r)


# ---------------------------------------------------------------------- Gaussian conditioning
def shared_noise_cov(noise_var, group, ref_noise_var):
    """Dense ``Ω`` (App. A.4): ``diag(ν²) + ν_0²·([q = q'] or [g_q = g_q' ≥ 0])``.

    Args:
      noise_var: `f32[n]` per-label noise ``ν_q²``.
      group: `i32[n]` no-memory reference id (``-1``: a reference of its own).
      ref_noise_var: `f32[]` ``ν_0²`` of one reference execution.

    Returns:
      `f32[n, n]`.
    """
    n = noise_var.shape[0]
    same = (group[:, None] == group[None, :]) & (group[:, None] >= 0)
    same = same | jnp.eye(n, dtype=bool)
    return jnp.diag(noise_var) + ref_noise_var * same.astype(noise_var.dtype)


def comparison_variance(directions, prior_cov):
    """``σ_j² = h_jᵀΣh_j``: `f32[J, r]`, `f32[r, r]` → `f32[J]`."""
    return jnp.einsum("jr,rs,js->j", directions, prior_cov, directions)


def comparison_bound(directions, means, prior_cov):
    """``σ_jψ(|μ_j|/σ_j)``: the EVSI of resolving comparison ``j`` completely, an upper bound on
    ``E_j(Q)`` for every ``Q`` (Eq. A.5). `f32[J]`."""
    return evsi(means, jnp.sqrt(jnp.maximum(comparison_variance(directions, prior_cov), 0.0)))


def resolved_variance(directions, features, noise_var, group, mask, prior_cov, ref_noise_var):
    """Resolved variance ``s_j²(Q) = k_jᵀ W_Q⁻¹ k_j`` (App. A.4), dense ``Ω``, Cholesky of ``W_Q``.

    Args:
      directions: `f32[J, r]` comparison directions ``h_j``.
      features: `f32[n, r]` probe features ``Φ_Q``.
      noise_var: `f32[n]` ``ν_q²``.
      group: `i32[n]` reference ids (see :func:`shared_noise_cov`).
      mask: `bool[n]` probes in ``Q`` (others are ignored).
      prior_cov: `f32[r, r]` ``Σ``.
      ref_noise_var: `f32[]` ``ν_0²``.

    Returns:
      `f32[J]` ``s_j²(Q)`` (0 for ``Q = ∅``).
    """
    k = features @ prior_cov @ directions.T  # [n, J]: k_j = Φ_Q Σ h_j
    w = features @ prior_cov @ features.T + shared_noise_cov(noise_var, group, ref_noise_var)
    m2 = mask[:, None] & mask[None, :]
    n = features.shape[0]
    w = jnp.where(m2, w, jnp.eye(n, dtype=w.dtype))
    k = jnp.where(mask[:, None], k, 0.0)
    chol = jnp.linalg.cholesky(w)
    z = jax.scipy.linalg.solve_triangular(chol, k, lower=True)  # L⁻¹k
    return jnp.sum(z * z, axis=0)


def latent_batch_augment(features, noise_var, group, directions, prior_cov, ref_noise_var, *, n_groups: int):
    """Latent-batch-effect form of shared reference noise (App. A.4): a diagonal ``Ω``.

    ``ξ̃ = (ξ, z_0 … z_{G−1})`` with ``z_g ~ N(0, ν_0²)``; ``φ̃_q = (φ_q, onehot(g_q))``;
    ``h̃_j = (h_j, 0)``. A label with ``g_q < 0`` (own reference) keeps ``ν_0²`` in its diagonal
    noise. Then ``Φ̃Σ̃Φ̃ᵀ + diag(ν̃²) = ΦΣΦᵀ + Ω`` and ``Φ̃Σ̃h̃_j = ΦΣh_j``.

    Args:
      features: `f32[n, r]`; noise_var: `f32[n]`; group: `i32[n]` (``< n_groups``);
      directions: `f32[J, r]`; prior_cov: `f32[r, r]`; ref_noise_var: `f32[]`.
      n_groups: static number of reference groups ``G``.

    Returns:
      ``(features f32[n, r+G], noise_var f32[n], directions f32[J, r+G], prior_cov f32[r+G, r+G])``.
    """
    dt = features.dtype
    onehot = jax.nn.one_hot(group, n_groups, dtype=dt)  # rows of group -1 are all zero
    feats = jnp.concatenate([features, onehot], axis=1)
    noise = noise_var + jnp.where(group < 0, ref_noise_var, 0.0).astype(dt)
    dirs = jnp.concatenate([directions, jnp.zeros((directions.shape[0], n_groups), dt)], axis=1)
    r = prior_cov.shape[0]
    cov = jnp.zeros((r + n_groups, r + n_groups), dt)
    cov = cov.at[:r, :r].set(prior_cov)
    cov = cov.at[r:, r:].set(ref_noise_var * jnp.eye(n_groups, dtype=dt))
    return feats, noise, dirs, cov


def resolved_variance_latent(directions, features, noise_var, group, mask, prior_cov, ref_noise_var, *,
                             n_groups: int):
    """:func:`resolved_variance` through :func:`latent_batch_augment` (diagonal ``Ω``). `f32[J]`."""
    f, nv, d, c = latent_batch_augment(features, noise_var, group, directions, prior_cov, ref_noise_var,
                                       n_groups=n_groups)
    none = jnp.full(group.shape, -1, group.dtype)
    return resolved_variance(d, f, nv, none, mask, c, jnp.zeros((), f.dtype))


def blr_posterior(x, y, mask, *, prior_precision, noise_var):
    """Bayesian linear regression posterior of ``ξ`` (our choice of ``Σ``, SPEC §2.3).

    Prior ``ξ ~ N(0, λ⁻¹I)``, likelihood ``y_i = x_iᵀξ + ε_i``, ``ε_i ~ N(0, ν²)``; masked rows are
    ignored. Posterior precision ``A = λI + XᵀX/ν²``, ``cov = A⁻¹``, ``mean = A⁻¹Xᵀy/ν²``, through a
    Cholesky factor of ``A``. A per-row ``ν_i²`` (`f32[n]`) gives the heteroscedastic posterior
    ``A = λI + XᵀWX``, ``mean = A⁻¹XᵀWy``, ``W = diag(1/ν_i²)``. ``y`` should be the residual ``y − G_θ`` (the surrogate's prior mean
    is the scorer).

    Args:
      x: `f32[n, r]` features; y: `f32[n]` targets; mask: `bool[n]`.
      prior_precision: ``λ > 0`` (float or `f32[]`); noise_var: ``ν² > 0`` (float or `f32[]`), or
        `f32[n]` per row.

    Returns:
      ``(mean f32[r], cov f32[r, r])``.
    """
    xm = jnp.where(mask[:, None], x, 0.0)  # padding may hold anything, even NaN
    ym = jnp.where(mask, y, 0.0)
    r = x.shape[1]
    if jnp.ndim(noise_var) == 0:
        a = prior_precision * jnp.eye(r, dtype=x.dtype) + (xm.T @ xm) / noise_var
        b = xm.T @ ym / noise_var
    else:  # heteroscedastic: row i weighted by 1/ν_i² (padding rows are zero whatever their ν²)
        w = 1.0 / jnp.where(mask, noise_var, 1.0)
        a = prior_precision * jnp.eye(r, dtype=x.dtype) + xm.T @ (xm * w[:, None])
        b = xm.T @ (ym * w)
    chol = jnp.linalg.cholesky(a)
    mean = jax.scipy.linalg.cho_solve((chol, True), b)
    linv = jax.scipy.linalg.solve_triangular(chol, jnp.eye(r, dtype=x.dtype), lower=True)
    cov = linv.T @ linv
    return mean, 0.5 * (cov + cov.T)

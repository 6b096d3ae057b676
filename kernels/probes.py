"""UpliftMem baseline probe acquisition: random, MC predictive std (MC-STD) and greedy EIG.

papers/upliftmem.md §4.3 (the surrogate ``G̃ = G_θ + φᵀξ``, ``ξ ~ N(0, Σ)``), §5.5 "RQ4: probe
strategy efficiency" (EVSI against random probing, MC-STD and EIG under the same probe budget),
App. A.4 (Gaussian beliefs, shared reference noise ``Ω``), A.6 (information quantity), A.7
(rank-one conditioning), B.2 (probe pools); SPEC.md §2.3 ("Baseline acquisition rules: random,
MC-STD (predictive std), EIG").

Every factory returns a pure ``acquire(key, inputs: AcquireInputs) -> AcquireResult`` with the
contract of :func:`cfjax.kernels.acquire.make_acquire`, so the pipeline can swap strategies:

* ``selected`` `i32[budget]`: probe indices in selection order, ``-1`` once no valid candidate is
  left; selected and masked candidates are never picked;
* ``value`` `f32[budget]`: the strategy's own score of the pick at selection (0 where ``-1``);
* ``s2`` `f32[J]`: the resolved variance ``s_j²(Q)`` of the final batch for the valid comparisons
  (0 for masked ones), computed with the same rank-one conditioning as ``make_acquire``
  (:func:`cfjax.kernels.acquire.acquire_condition`, no pruning), so ``Σ_j E(μ_j, s_j(Q))`` compares
  strategies in EVSI units; ``sigma2`` `f32[J]` ``σ_j²``; ``n_active`` `i32[]` the number of valid
  comparisons;
* ``s2_trace`` `f32[0, J]` and ``v_trace`` `f32[0, N]` are empty.

Fields of :class:`~cfjax.kernels.acquire.AcquireInputs` a strategy does not use are ignored
(``tau``/``mode`` by all three; ``directions``/``means``/``comp_mask`` only feed ``s2``). Padding
rows may hold anything, even NaN (:func:`~cfjax.kernels.acquire.sanitize_inputs`). The NumPy twins
are :mod:`cfjax.kernels.reference.probes`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from cfjax.kernels._base import AcquireFn, Array, masked_argmax
from cfjax.kernels.acquire import AcquireInputs, AcquireResult, acquire_condition, acquire_init, sanitize_inputs

__all__ = ["MCSTD_JITTER", "mcstd_samples", "make_acquire_random", "make_acquire_mcstd", "make_acquire_eig"]

#: Relative jitter of the MC-STD Cholesky: ``Σ + MCSTD_JITTER·(tr Σ / r)·I`` is factorised.
MCSTD_JITTER = 1e-6


def _check_budget(budget: int) -> None:
    if budget < 1:
        raise ValueError("budget must be >= 1")


def _scan_batch(inputs: AcquireInputs, budget: int, pick, xs=None) -> AcquireResult:
    """Select ``budget`` probes with ``pick`` and condition on each (App. A.7, rank one).

    ``pick(state, x) -> (q i32[], ok bool[], value f32[])`` sees the
    :class:`~cfjax.kernels.acquire.AcquireState` given the probes selected so far and the step's
    slice of ``xs``; ``ok = False`` leaves the state unchanged and records ``(-1, 0)``. Cost per
    step ``O(N(r + budget) + J·N)`` (the ``[J, N]`` cross-covariances only reach ``s2`` through
    the low-rank factors, so XLA may drop their update).
    """
    state = acquire_init(inputs, budget=budget)

    def step(st, x):
        q, ok, val = pick(st, x)
        q = jnp.where(ok, q, 0).astype(jnp.int32)
        st = acquire_condition(st, inputs, q, ok)
        return st, (jnp.where(ok, q, -1), jnp.where(ok, val, 0.0).astype(st.v.dtype))

    state, (selected, value) = lax.scan(step, state, xs, length=budget)
    j, n = state.s2.shape[0], state.v.shape[0]
    dt = state.v.dtype
    return AcquireResult(selected=selected, value=value, s2=jnp.where(inputs.comp_mask, state.s2, 0.0),
                         sigma2=state.sigma2, n_active=jnp.sum(state.active).astype(jnp.int32),
                         s2_trace=jnp.zeros((0, j), dt), v_trace=jnp.zeros((0, n), dt))


def _top_batch(inputs: AcquireInputs, scores: Array, budget: int) -> AcquireResult:
    """The ``budget`` highest ``scores`` `f32[N]` among valid candidates (ties: lowest index), then
    their resolved variances; ``-1`` past the number of valid candidates (``budget`` may exceed N)."""
    n = scores.shape[0]
    keyed = jnp.where(inputs.cand_mask, scores, -jnp.inf)  # -inf only inside top_k
    if budget > n:  # static: never-valid padding columns
        keyed = jnp.pad(keyed, (0, budget - n), constant_values=-jnp.inf)
    top, idx = lax.top_k(keyed, budget)  # lower index first among equal values
    ok = jnp.arange(budget) < jnp.sum(inputs.cand_mask)
    return _scan_batch(inputs, budget, lambda st, x: x, (idx, ok, jnp.where(ok, top, 0.0)))


def make_acquire_random(*, budget: int) -> AcquireFn:
    """Uniform random probing (the "Random" baseline of §5.4–5.5, App. F).

    Returns a pure ``acquire(key, inputs: AcquireInputs) -> AcquireResult``: ``min(budget, #valid)``
    distinct valid candidates, uniformly without replacement, in a uniformly random order
    (Gumbel top-k: i.i.d. float32 Gumbel keys `f32[N]`, masked to ``-inf``, ``lax.top_k``; the
    draw does not depend on the float dtype of ``inputs``). ``value`` is 0. ``s2`` etc. as in the
    module docstring. Cost ``O(N log N)`` for the draw plus the ``budget`` conditioning steps.

    Args:
      budget: static number of probes ``B_p``.
    """
    _check_budget(budget)

    def acquire(key, inputs: AcquireInputs) -> AcquireResult:
        inputs = sanitize_inputs(inputs)
        gumbel = jax.random.gumbel(key, inputs.cand_mask.shape, jnp.float32)
        res = _top_batch(inputs, gumbel, budget)
        return res._replace(value=jnp.zeros_like(res.value))

    return acquire


def mcstd_samples(key: Array, prior_cov: Array, n_samples: int) -> Array:
    """``n_samples`` draws ``ξ_m ~ N(0, Σ)``: `f32[n_samples, r]` (``n_samples`` static).

    ``ξ_m = L z_m`` with ``z_m ~ N(0, I_r)`` (``jax.random.normal(key, (n_samples, r))`` in ``Σ``'s
    dtype) and ``L`` the Cholesky factor of ``Σ + ε·(tr Σ / r)·I``, ``ε =`` :data:`MCSTD_JITTER`
    (1e-6): the jitter keeps a nearly singular float32 ``Σ`` factorisable and changes each
    predictive variance by a relative ``≤ ε·(tr Σ / r)·|φ|²/φᵀΣφ``, far below the Monte-Carlo error
    ``O(1/√n_samples)``. Only the lower triangle of ``Σ`` is read. :func:`make_acquire_mcstd` calls
    this with its own ``key``, so a test can reproduce its samples exactly.
    """
    cov = jnp.asarray(prior_cov)
    r = cov.shape[0]
    jitter = MCSTD_JITTER * jnp.trace(cov) / r
    chol = jnp.linalg.cholesky(cov + jitter * jnp.eye(r, dtype=cov.dtype))
    z = jax.random.normal(key, (n_samples, r), cov.dtype)
    return jnp.matmul(z, chol.T, precision=lax.Precision.HIGHEST)


def make_acquire_mcstd(*, budget: int, n_samples: int = 64) -> AcquireFn:
    """Monte-Carlo predictive standard deviation (the "MC-STD" baseline of §5.5, App. F).

    Returns a pure ``acquire(key, inputs: AcquireInputs) -> AcquireResult``. Draws
    ``ξ_1..ξ_M ~ N(0, Σ)`` with :func:`mcstd_samples` (``M = n_samples``), forms the predictive
    samples ``φ_qᵀξ_m`` `f32[N, M]` (the mean ``G_θ`` only shifts them) and scores
    ``std_q = √(mean_m (φ_qᵀξ_m − mean_m φ_qᵀξ_m)²)`` (``ddof = 0``), a Monte-Carlo estimate of
    ``√(φ_qᵀΣφ_q)``. The batch is the ``budget`` highest-scoring valid candidates (``lax.top_k``,
    lowest index on exact ties), in decreasing score order.

    There is **no conditioning between picks**: like the usual MC-dropout uncertainty-sampling
    baseline it ignores redundancy inside the batch (near-duplicate probes, or probes sharing a
    no-memory reference, are all picked if each is uncertain on its own) and ignores label noise
    and the comparison family. ``value`` is the pick's ``std_q``. Cost ``O(N·r·M)`` plus the
    ``budget`` conditioning steps that give ``s2``.

    Args:
      budget: static number of probes ``B_p``.
      n_samples: static number of Monte-Carlo draws ``M`` (≥ 2).
    """
    _check_budget(budget)
    if n_samples < 2:
        raise ValueError("n_samples must be >= 2")

    def acquire(key, inputs: AcquireInputs) -> AcquireResult:
        inputs = sanitize_inputs(inputs)
        xi = mcstd_samples(key, inputs.prior_cov, n_samples)  # [M, r]
        pred = jnp.matmul(inputs.features, xi.T, precision=lax.Precision.HIGHEST)  # [N, M]
        return _top_batch(inputs, jnp.std(pred, axis=1), budget)

    return acquire


def make_acquire_eig(*, budget: int) -> AcquireFn:
    """Greedy expected information gain about the latent ``ξ`` (the "EIG" baseline of §5.5, App. F).

    Returns a pure ``acquire(key, inputs: AcquireInputs) -> AcquireResult`` (``key`` unused). At
    step ``t``, for every available ``q``,

        ``EIG_t(q) = ½·log(v_{q|Q_t} / (ν_q² + ν_0²))``,  ``v_{q|Q_t} = Var(y_q | y_{Q_t})``,

    picks ``q_t = argmax EIG_t`` (lowest index on ties), conditions on ``y_{q_t}`` and repeats.
    ``v_{q|Q}`` is exactly :func:`cfjax.kernels.acquire.make_acquire`'s rank-one state
    (:func:`~cfjax.kernels.acquire.acquire_init`, :func:`~cfjax.kernels.acquire.acquire_condition`,
    App. A.7), including the shared no-memory reference: labels with equal group ids ``≥ 0`` share
    ``ν_0²`` in ``Ω`` (App. A.4), so after a group mate is observed ``v_{q|Q}`` also drops by what
    it revealed about that reference.

    Approximation: the exact ``I(ξ; y_q | y_Q) = ½·log(v_{q|Q} / Var(y_q | y_Q, ξ))`` has the
    *conditional* noise variance in the denominator, which is below ``ν_q² + ν_0²`` once a group
    mate of ``q`` is in ``Q``. We use the unconditional ``ν_q² + ν_0²`` (the usual BALD/Gaussian
    EIG), so a probe whose group's reference is already resolved looks less informative than it is,
    and ``EIG_t`` can be negative (``v_{q|Q} ≥ ν_q²`` keeps it finite; ``ν_q² > 0`` is assumed). It
    equals the exact gain when no groups are shared. ``value`` is ``EIG_t(q_t)``. Unlike EVSI it
    ignores the comparison family and the margins ``μ_j``. Per step ``O(N(r + budget) + J·N)``.

    Args:
      budget: static number of probes ``B_p``.
    """
    _check_budget(budget)

    def acquire(key, inputs: AcquireInputs) -> AcquireResult:
        del key
        inputs = sanitize_inputs(inputs)
        noise = inputs.noise_var + inputs.ref_noise_var  # [N] unconditional Ω_qq

        def pick(st, _):
            eig = 0.5 * jnp.log(jnp.where(st.available, st.v, noise) / noise)
            q = masked_argmax(eig, st.available)
            return q, jnp.any(st.available), eig[q]

        return _scan_batch(inputs, budget, pick)

    return acquire

"""KNN-UCB mode selection over the outcome log (Anti-Persistence §3.2, Eq. 3; App. B.3–B.5).

papers/anti-persistence.md §3.2 "Selecting a mode from local feedback",
App. B.3 (cosine similarity), B.4 (Table 3 defaults, safeguards), B.5 (log
schema, logical timestamps); SPEC.md §3.

For every training (or evaluation) task the controller picks one of the
``M = 4`` modes ``Z = {none, imitation, strategic, corrective}`` (Eq. 1). The
whole decision — similarity to every log entry, the top-``B̂``
neighbourhood, the recency-weighted per-mode estimates, the UCB scores and
the safeguard branches — is one pure, shape-static computation over a
fixed-capacity log (:class:`OutcomeLogArrays`, validity carried by a mask).
:func:`select_mode` decides for one task; :func:`make_knn_ucb` binds it to a
config as a raw pure function (``select_one``) and vmapped over tasks that share
one log (``select_batch``, also the selector's ``__call__``); the caller jits.
:func:`cfjax.kernels.reference.bandit.select_mode_reference` is a plain NumPy
(float64) reference with identical semantics.

Branches, in order of precedence (the first that applies fires; its code is
returned in :attr:`BanditDecision.branch`):

0. ``ROUND_ROBIN`` — ``iteration < rr_iterations`` (App. B.4: the first 3
   self-improvement iterations): ``mode = rr_index mod M``.
1. ``WARMUP`` — some mode has fewer than ``w_init`` entries in the whole
   valid log (Table 3 "each mode forced at least W_init times before
   KNN-UCB"): the least-used mode, ties to the lowest index. An empty log
   therefore picks mode 0 (``none``).
2. ``EPSILON`` — with probability ``ε`` (App. B.4, "after warm-up"): a
   uniformly random mode. The uniform number and the random mode come from
   :func:`exploration_draws` (one derivation from the task key, shared with
   the reference, which receives them as inputs).
3. ``FALLBACK`` — the neighbourhood is empty or its mean similarity is
   below ``ρ`` (App. B.3/B.4): the global-best mode, i.e. the highest
   *unweighted* mean reward over the whole valid log among modes that have
   at least one entry (no similarity weighting, no decay; ties to the
   lowest index; mode 0 if no mode has entries, which only happens with
   ``w_init = 0``).
4. ``KNN_UCB`` — Eq. 3 on the neighbourhood (below).

``BanditDecision.scores`` holds the Eq. 3 scores only when ``KNN_UCB`` fired
and the package sentinel :data:`cfjax.kernels.NEG` (``-1e30``, finite; also
the package sentinel ``NEG``) otherwise; :func:`local_estimates`
returns the full diagnostics (neighbourhood, weights, ``r̂``, ``n_μ``,
scores) for any query.

Neighbourhood (App. B.3): ``sim_i = <e_i, e> / (‖e_i‖‖e‖ + ε)``, ``ε = sim_eps = 1e-12``, for
every entry in one matrix–vector product (float32, ``Precision.HIGHEST``); ``N`` = the top-``B̂`` valid entries by
similarity (ties to the lower log index, as ``lax.top_k``), or all valid
entries if fewer. ``neighbourhood_sim`` is the mean raw (unclipped) ``sim``
over ``N`` (0 when ``N`` is empty).

Eq. 3 (§3.2): ``w_i = max(sim_i, 0)·γ^{t_max − t_i}`` with ``t_max`` the latest
timestamp *in the neighbourhood* (not in the whole log, not the current
update index — App. B.5: the anchor rescales all weights of a fixed
neighbourhood equally, so shifting every timestamp by a constant changes
nothing); ``r̂(μ) = Σ_{μ_i=μ} w_i r_i / Σ_{μ_i=μ} w_i``;
``score(μ) = r̂(μ) + c·sqrt(log|N| / max(n_μ, 1))`` with ``n_μ`` the number of
neighbours that used ``μ``; ``μ* = argmax`` (ties to the lowest index).

**Our rule for unsupported modes** (the paper leaves ``r̂`` undefined when
``Σ_{μ_i=μ} w_i = 0``, §3.2): ``r̂(μ) = 0``, so such a mode — absent from the
neighbourhood, or present only with non-positive similarity — is scored by
its exploration bonus alone (``c·sqrt(log|N|)`` when absent). With rewards in
``[-1, 1]`` this is the neutral midpoint: an unsupported mode beats a
supported one only if that one's local reward is negative or the bonus gap
outweighs it.

Preconditions (not checked inside ``jit``): valid entries have finite
embeddings and a mode in ``[0, M)`` (a valid entry with another mode still
counts towards ``N`` and ``|N|`` but towards no mode); timestamps fit int32.
Invalid entries may hold anything (NaN, inf, any mode/time): they are masked
out with ``where`` before any reduction and never influence a result.

``BanditConfig`` is a frozen dataclass registered as a pytree: ``b_hat`` (the
top-k width) is static metadata; every other field is a leaf, traced when the
config is passed as a jit argument (hyperparameter sweeps/vmaps without
recompiling) and constant-folded when it is closed over, as
:func:`make_knn_ucb` does. ``M`` is the module constant :data:`N_MODES`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from cfjax.kernels._base import NEG, SelectFn, masked_argmax

__all__ = [
    "N_MODES", "NONE", "IMITATION", "STRATEGIC", "CORRECTIVE", "MODE_NAMES",
    "ROUND_ROBIN", "WARMUP", "EPSILON", "FALLBACK", "KNN_UCB", "BRANCH_NAMES",
    "BanditConfig", "OutcomeLogArrays", "BanditDecision", "LocalEstimates", "Selector",
    "bandit_reward", "cosine_similarity", "exploration_draws", "local_estimates", "select_mode",
    "make_knn_ucb", "empty_log",
]

# Modes (Eq. 1); M is static.
N_MODES = 4
NONE, IMITATION, STRATEGIC, CORRECTIVE = 0, 1, 2, 3
MODE_NAMES = ("none", "imitation", "strategic", "corrective")

# Branch codes, in order of precedence.
ROUND_ROBIN, WARMUP, EPSILON, FALLBACK, KNN_UCB = 0, 1, 2, 3, 4
BRANCH_NAMES = ("round_robin", "warmup", "epsilon", "fallback", "knn_ucb")

# Finite "not computed" score: the package sentinel (never -inf outside top_k/argmax inputs).

# old import paths of the NumPy twins, now in cfjax.kernels.reference.bandit


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=("c", "gamma", "rho", "w_init", "rr_iterations", "epsilon", "lam", "sim_eps"),
                   meta_fields=("b_hat",))
@dataclasses.dataclass(frozen=True)
class BanditConfig:
    """Mode-selection hyperparameters (App. B.4, Table 3 defaults).

    A pytree: ``b_hat`` is static metadata (the top-k width); every other
    field is a leaf, so a config passed *as an argument* to a jitted function
    is traced (sweep or ``vmap`` over ρ, c, γ, ε, W_init … without
    recompiling), while a config closed over (:func:`make_knn_ucb`) is baked in
    as constants. Validation runs on concrete numbers only.
    """

    b_hat: int = 10  # B̂: top-B̂ log entries form N_B̂(τ) (§3.2, Table 3). Static (top-k width).
    c: float = 0.5  # UCB exploration coefficient (Eq. 3, Table 3).
    gamma: float = 0.998  # recency decay γ ∈ (0, 1]: w_i ∝ γ^{t_max − t_i} (§3.2, Table 3).
    rho: float = 0.7  # KNN trust threshold ρ: global-best fallback if mean neighbourhood sim < ρ (B.3/B.4).
    w_init: int = 3  # W_init: each mode forced ≥ W_init times (valid log entries) before KNN-UCB (B.4).
    rr_iterations: int = 3  # round-robin for iterations 0 … rr_iterations−1 (B.4).
    epsilon: float = 0.1  # ε-greedy rate: uniform-random mode after warm-up (B.4).
    lam: float = 0.05  # λ: reward cost weight, r = clip(y − λκ, −1, 1) (§3.2, Table 3); see bandit_reward.
    sim_eps: float = 1e-12  # ε in the cosine denominator ‖e_i‖‖e‖ + ε (B.3).

    def __post_init__(self) -> None:
        if not isinstance(self.b_hat, (int, np.integer)) or isinstance(self.b_hat, bool) or self.b_hat < 1:
            raise ValueError(f"b_hat must be a positive int, got {self.b_hat!r}")

        def concrete(name):
            v = getattr(self, name)
            return v if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else None

        for name in ("w_init", "rr_iterations"):
            v = getattr(self, name)
            if isinstance(v, (float, bool)) or (concrete(name) is not None and v < 0):
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")
        g = concrete("gamma")
        if g is not None and not 0.0 < g <= 1.0:
            raise ValueError(f"gamma must lie in (0, 1], got {g}")
        e = concrete("epsilon")
        if e is not None and not 0.0 <= e <= 1.0:
            raise ValueError(f"epsilon must lie in [0, 1], got {e}")
        for name in ("c", "lam", "sim_eps"):
            v = concrete(name)
            if v is not None and v < 0:
                raise ValueError(f"{name} must be >= 0, got {v}")


class OutcomeLogArrays(NamedTuple):
    """The outcome log L_k (Eq. 2, App. B.5) as fixed-capacity arrays (capacity ``L``)."""

    emb: jnp.ndarray  # f32[L, d] task embeddings e_τ (B.3)
    mode: jnp.ndarray  # i32[L] selected mode μ_i ∈ [0, M)
    reward: jnp.ndarray  # f32[L] cost-adjusted reward r_i, already clipped to [−1, 1]
    t: jnp.ndarray  # i32[L] logical timestamps (consecutive ranks in file order, B.5)
    valid: jnp.ndarray  # bool[L] slot holds a real entry


class BanditDecision(NamedTuple):
    """One mode decision."""

    mode: jnp.ndarray  # i32[] selected mode μ*
    branch: jnp.ndarray  # i32[] which branch fired (ROUND_ROBIN … KNN_UCB)
    scores: jnp.ndarray  # f32[M] Eq. 3 scores when branch == KNN_UCB, else NEG
    neighbourhood_sim: jnp.ndarray  # f32[] mean sim over N (0 if N is empty)
    n_neighbours: jnp.ndarray  # i32[] |N| = min(B̂, #valid)


class LocalEstimates(NamedTuple):
    """Everything Eq. 3 computes for one query (diagnostics; used by select_mode)."""

    sim: jnp.ndarray  # f32[L] cosine similarity to every slot (garbage where invalid)
    in_neighbourhood: jnp.ndarray  # bool[L] slot ∈ N_B̂(τ)
    weight: jnp.ndarray  # f32[L] w_i = max(sim_i, 0)·γ^{t_max − t_i} in N, 0 elsewhere
    t_max: jnp.ndarray  # i32[] latest timestamp in N (int32 min if N is empty)
    weight_sum: jnp.ndarray  # f32[M] Σ_{μ_i=μ} w_i
    r_hat: jnp.ndarray  # f32[M] weighted mean reward, 0 where weight_sum == 0 (our rule)
    counts: jnp.ndarray  # i32[M] n_μ, neighbours per mode
    scores: jnp.ndarray  # f32[M] r̂(μ) + c·sqrt(log|N| / max(n_μ, 1))
    mean_sim: jnp.ndarray  # f32[] mean sim over N (0 if empty)
    n_neighbours: jnp.ndarray  # i32[] |N|


def empty_log(capacity: int, dim: int) -> OutcomeLogArrays:
    """An all-invalid log of the given capacity (NumPy arrays, dtypes as the kernel expects)."""
    return OutcomeLogArrays(
        emb=np.zeros((capacity, dim), np.float32),
        mode=np.zeros((capacity,), np.int32),
        reward=np.zeros((capacity,), np.float32),
        t=np.zeros((capacity,), np.int32),
        valid=np.zeros((capacity,), bool),
    )


def bandit_reward(y, kappa, lam=BanditConfig.lam):
    """Cost-adjusted bandit reward ``r = clip(y − λκ, −1, 1)`` (§3.2, Alg. 1 line 21, Table 3).

    Args:
      y: raw outcome (``y ∈ {0, 1}`` by default), any shape.
      kappa: realized extra synthesis calls ``κ`` (0 for ``none`` or skipped synthesis).
      lam: cost weight ``λ ≥ 0`` (default 0.05).

    Returns:
      ``f32`` array of the broadcast shape, in ``[−1, 1]``.
    """
    y = jnp.asarray(y, jnp.float32)
    kappa = jnp.asarray(kappa, jnp.float32)
    return jnp.clip(y - jnp.asarray(lam, jnp.float32) * kappa, -1.0, 1.0)


def cosine_similarity(emb: jax.Array, query: jax.Array, sim_eps: float = 1e-12) -> jax.Array:
    """``sim_i = <e_i, e> / (‖e_i‖‖e‖ + ε)`` for every row, one matrix–vector product (B.3).

    Args:
      emb: ``f32[L, d]`` log embeddings.
      query: ``f32[d]`` task embedding.
      sim_eps: the denominator ``ε``.

    Returns:
      ``f32[L]``. A zero row or query gives 0 (for ``ε > 0``).
    """
    emb = emb.astype(jnp.float32)
    query = query.astype(jnp.float32)
    dots = jnp.matmul(emb, query, precision=jax.lax.Precision.HIGHEST)
    norms = jnp.sqrt(jnp.sum(emb * emb, axis=-1))
    qn = jnp.sqrt(jnp.sum(query * query))
    return dots / (norms * qn + jnp.asarray(sim_eps, jnp.float32))


def exploration_draws(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The ε-branch randomness of one decision: ``(u f32[] ∈ [0, 1), rand_mode i32[] ∈ [0, M))``.

    One ``jax.random.bits(key, (2,), uint32)`` draw ``b``: ``u = (b[0] >> 9)·2⁻²³``
    (23 random mantissa bits), ``rand_mode = b[1] mod M`` (exactly uniform, M
    divides 2³²). ε fires iff ``u < ε``. Used inside :func:`select_mode`; call
    it on the same key to feed :func:`select_mode_reference`.
    """
    bits = jax.random.bits(key, (2,), jnp.uint32)
    u = (bits[0] >> 9).astype(jnp.float32) * jnp.float32(2.0 ** -23)
    rand_mode = (bits[1] % N_MODES).astype(jnp.int32)
    return u, rand_mode


def _mode_onehot(mode: jax.Array) -> jax.Array:
    """``bool[L, M]``; a mode outside ``[0, M)`` matches no column."""
    return mode.astype(jnp.int32)[:, None] == jnp.arange(N_MODES, dtype=jnp.int32)[None, :]


def local_estimates(log: OutcomeLogArrays, query: jax.Array, cfg: BanditConfig = BanditConfig()) -> LocalEstimates:
    """Neighbourhood, weights, ``r̂`` and Eq. 3 scores for one query (§3.2, B.3).

    Args:
      log: the outcome log (capacity ``L``).
      query: ``f32[d]`` embedding of the current task.
      cfg: configuration (``b_hat`` static; ``gamma``, ``c``, ``sim_eps`` used).

    Returns:
      :class:`LocalEstimates`. When ``N`` is empty the scores are still finite
      (``r̂ = 0``, bonus 0) but meaningless; :func:`select_mode` then falls back.
    """
    emb = jnp.asarray(log.emb)
    valid = jnp.asarray(log.valid).astype(bool)
    n_slots = emb.shape[0]
    sim = cosine_similarity(emb, jnp.asarray(query), cfg.sim_eps)  # f32[L]

    # top-B̂ over valid entries (-inf only into top_k)
    k = min(cfg.b_hat, n_slots)
    if k > 0:
        _, idx = jax.lax.top_k(jnp.where(valid, sim, -jnp.inf), k)
        member = jnp.zeros((n_slots,), bool).at[idx].set(True) & valid
    else:
        member = jnp.zeros((n_slots,), bool)
    n_nb = jnp.sum(member, dtype=jnp.int32)
    n_f = n_nb.astype(jnp.float32)
    mean_sim = jnp.sum(jnp.where(member, sim, 0.0)) / jnp.maximum(n_f, 1.0)

    t = jnp.asarray(log.t).astype(jnp.int32)
    t_max = jnp.max(jnp.where(member, t, jnp.iinfo(jnp.int32).min))
    dt = jnp.where(member, t_max - t, 0).astype(jnp.float32)
    decay = jnp.power(jnp.asarray(cfg.gamma, jnp.float32), dt)
    weight = jnp.where(member, jnp.maximum(sim, 0.0) * decay, 0.0)  # f32[L]

    in_mode = _mode_onehot(jnp.asarray(log.mode)) & member[:, None]  # bool[L, M]
    reward = jnp.asarray(log.reward).astype(jnp.float32)
    counts = jnp.sum(in_mode, axis=0, dtype=jnp.int32)
    weight_sum = jnp.sum(jnp.where(in_mode, weight[:, None], 0.0), axis=0)
    wr_sum = jnp.sum(jnp.where(in_mode, (weight * reward)[:, None], 0.0), axis=0)
    supported = weight_sum > 0
    r_hat = jnp.where(supported, wr_sum / jnp.where(supported, weight_sum, 1.0), 0.0)

    log_n = jnp.log(jnp.maximum(n_f, 1.0))
    bonus = jnp.asarray(cfg.c, jnp.float32) * jnp.sqrt(log_n / jnp.maximum(counts, 1).astype(jnp.float32))
    scores = r_hat + bonus
    return LocalEstimates(sim=sim, in_neighbourhood=member, weight=weight, t_max=t_max, weight_sum=weight_sum,
                          r_hat=r_hat, counts=counts, scores=scores, mean_sim=mean_sim, n_neighbours=n_nb)


def select_mode(log: OutcomeLogArrays, query: jax.Array, iteration, rr_index, key: jax.Array,
                cfg: BanditConfig = BanditConfig()) -> BanditDecision:
    """One mode decision (Eq. 3 with the App. B.4 safeguards; precedence in the module docstring).

    Args:
      log: the outcome log (fixed capacity, ``valid`` mask).
      query: ``f32[d]`` task embedding.
      iteration: ``i32[]`` 0-based self-improvement iteration.
      rr_index: ``i32[]`` position of the task in its iteration (round-robin).
      key: PRNG key of this decision (ε branch, via :func:`exploration_draws`).
      cfg: :class:`BanditConfig` (closed over, or passed as a pytree argument:
        only ``b_hat`` is static).

    Returns:
      :class:`BanditDecision`. Pure, jittable and vmappable.
    """
    est = local_estimates(log, query, cfg)
    u, rand_mode = exploration_draws(key)

    valid = jnp.asarray(log.valid).astype(bool)
    in_log = _mode_onehot(jnp.asarray(log.mode)) & valid[:, None]  # bool[L, M]
    g_count = jnp.sum(in_log, axis=0, dtype=jnp.int32)
    reward = jnp.asarray(log.reward).astype(jnp.float32)
    g_sum = jnp.sum(jnp.where(in_log, reward[:, None], 0.0), axis=0)
    g_mean = g_sum / jnp.maximum(g_count, 1).astype(jnp.float32)
    global_best = masked_argmax(g_mean, g_count > 0)
    least_used = jnp.argmin(g_count).astype(jnp.int32)
    knn_mode = jnp.argmax(est.scores).astype(jnp.int32)

    iteration = jnp.asarray(iteration, jnp.int32)
    rr_mode = jnp.mod(jnp.asarray(rr_index, jnp.int32), N_MODES)

    conds = [
        iteration < jnp.asarray(cfg.rr_iterations, jnp.int32),
        jnp.min(g_count) < jnp.asarray(cfg.w_init, jnp.int32),
        u < jnp.asarray(cfg.epsilon, jnp.float32),
        (est.n_neighbours == 0) | (est.mean_sim < jnp.asarray(cfg.rho, jnp.float32)),
    ]
    branch = jnp.select(conds, [jnp.int32(b) for b in (ROUND_ROBIN, WARMUP, EPSILON, FALLBACK)],
                        jnp.int32(KNN_UCB))
    mode = jnp.select([branch == b for b in (ROUND_ROBIN, WARMUP, EPSILON, FALLBACK)],
                      [rr_mode, least_used, rand_mode, global_best], knn_mode)
    scores = jnp.where(branch == KNN_UCB, est.scores, jnp.float32(NEG))
    return BanditDecision(mode=mode.astype(jnp.int32), branch=branch.astype(jnp.int32), scores=scores,
                          neighbourhood_sim=est.mean_sim, n_neighbours=est.n_neighbours)


class Selector(NamedTuple):
    """Mode selection bound to one config (raw from :func:`make_knn_ucb`; the caller jits it, e.g. with :func:`cfjax.kernels.jit_fields`).

    Calling the selector itself is ``select_batch``.
    """

    config: BanditConfig
    select_one: SelectFn  # (log, query f32[d], iteration, rr_index, key) -> BanditDecision
    select_batch: SelectFn  # (log, queries f32[T, d], iteration, rr_indices i32[T], keys[T]) -> BanditDecision[T]

    def __call__(self, log, queries, iteration, rr_indices, keys) -> BanditDecision:
        return self.select_batch(log, queries, iteration, rr_indices, keys)


def make_knn_ucb(cfg: BanditConfig = BanditConfig()) -> Selector:
    """Factory: :func:`select_mode` bound to ``cfg`` (constants), raw, and vmapped over tasks.

    Returns:
      :class:`Selector` of unjitted pure functions (``jax.jit`` them where they run, e.g.
      ``jax.jit(make_knn_ucb(cfg).select_one)``); calling it is
      ``select_batch(log, queries f32[T, d], iteration i32[], rr_indices i32[T], keys [T])``
      → :class:`BanditDecision` with a leading ``T`` axis. All tasks of a batch
      see the same (frozen) log, as in held-out evaluation or a wave of
      decisions taken before their outcomes are appended. ``keys`` is a batch
      of keys (typed ``key[T]`` or raw ``u32[T, 2]``). ``select_one`` is the
      single-task version (same arguments without the ``T`` axis).
      ``iteration``, the indices, the keys and the log are traced: one
      compilation per log shape once jitted.
    """
    one = functools.partial(select_mode, cfg=cfg)
    return Selector(config=cfg, select_one=one, select_batch=jax.vmap(one, in_axes=(None, 0, None, 0, 0)))

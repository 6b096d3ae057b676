"""The UpliftMem set scorer ``G_θ(c, S)`` and its learning losses.

Paper: UpliftMem §4.1, §4.4, Appendix C.1–C.3 (SPEC.md §2.1, §2.4).

**Scorer (App. C.1).** ``G_θ(c, S) = a·z_θ(c, S) + b`` for ``S ≠ ∅`` and
exactly ``0`` for ``S = ∅`` (the no-memory reference, §4.1), so that the
scorer approximates the uplift ``Δ(c, S) = V(c, S) − V(c, ∅)``. A set is the
masked subset of a fixed-size candidate pool (``pool f32[N, d_m]``,
``mask bool[N]``); the paper's scorer is a cross-encoder reranker over the
serialised set, ours is a permutation-invariant network over embeddings
(the paper leaves ``z_θ`` to the implementation; our architecture):

* per-member encoder ``h_i = φ(c, m_i)``
  (``relu(W_o relu(W_m m_i + W_c c))``, ``f32[N, H]``);
* first-order pooling ``s₁ = Σ_{i∈S} h_i`` (``f32[H]``);
* second-order pooling ``s₂ = Σ_{i<j; i,j∈S} ψ(h_i, h_j)`` with a symmetric
  pair network ``ψ(h_i, h_j) = MLP([h_i + h_j, h_i ⊙ h_j])`` (``f32[H]``),
  which expresses complementarity (a pair worth more than its members) and
  conflict (two members each good alone, bad together);
* ``ρ``: ``features = relu(W₂ relu(W₁ [c', s₁, s₂]))`` (``f32[F]``),
  ``c' = relu(W_c' c)``;
* ``z = w·features + b_z`` and ``G = a·z + b`` (``a``, ``b`` learned
  scalars, initialised to 1 and 0).

Sums (not means) keep the set size visible to ``ρ`` and need no division, so
the empty set is finite everywhere and its gradient is finite. The masked
sums are contractions with 0/1 weights: a non-member row contributes exactly
``0·x = 0`` to the output and to the gradient, whatever its (finite) values.
Pool rows must therefore be *finite* and must not overflow float32 inside the
encoder (pad with zeros): the encoder runs on every row, and ``0·inf`` or
``0·NaN`` is NaN.

Why this cut: ``φ`` and the pair matrix ``ψ(h_i, h_j)`` do not depend on the
mask, only the two masked sums do. Under ``vmap`` over alternative masks of
the *same* pool (beam search: ``O(W·N·K)`` set scores per task; the policy's
``N + 1`` one-member extensions) JAX keeps the mask-independent part
unbatched, so the ``O(N²·H²)`` pair network runs once per pool and each
extra set costs two masked reductions and the small ``ρ`` MLP. Masked
self-attention would make every member's representation depend on the mask
and be recomputed for every set.

**Penultimate features (EVSI surrogate, §4.3).** ``φ(c, S) = features`` for
``S ≠ ∅``, the exact input of the final linear map, and ``φ(c, ∅) = 0``, so
the surrogate ``G̃ = G + φᵀξ`` is also exactly 0 at the no-memory reference.
``SetScorer(...)(c, pool, mask, return_features=True)`` returns ``(G, φ)``.

**Losses (§4.4, App. C.2–C.3).**

* ``L_reg = E[w_mag(y)·Huber_δ(G − y)]``, ``w_mag(y) = max(w_min, min(1, |y|/τ_ref))``
* ``L_sign = E_{|y| > ε_sign}[BCEWithLogits(G, 1[y > 0])]``
* ``L_pair = E_pair[softplus(−sign(y_a − y_b)(G_a − G_b))]``, pairs of sets of
  the same task with ``y_a ≠ y_b``
* ``L_value = λ_reg L_reg + λ_sign L_sign + λ_pair L_pair``
* ``ω(y)`` (App. C.3) and
  ``L_policy = −E_i[sg(ω_i)/L_i · Σ_t log π(a_t | c, S_{t−1})]`` with
  ``π(a | c, S) ∝ exp(g(a | c, S)/τ_tr)``, ``g(m) = G(S ∪ {m}) − G(S)``,
  ``g(STOP) = 0`` (§4.2, Eq. 6).

Every masked mean is ``Σ valid / max(#valid, 1)``: an empty selection gives
``0``, never NaN. Each loss has a float64 NumPy reference (``*_reference``) in
:mod:`cfjax.kernels.reference.setscore`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from cfjax.kernels._base import ParamScoreFn

__all__ = [
    "SetScorer",
    "UpliftLossConfig",
    "ValueLossParts",
    "huber",
    "init_params",
    "make_feature_fn",
    "make_score_fn",
    "omega",
    "pair_loss",
    "policy_loss",
    "policy_loss_steps",
    "readout",
    "reg_loss",
    "sign_loss",
    "value_loss",
    "w_mag",
]


Params = Any  # the flax ``params`` collection of a SetScorer (no "params" wrapper)


# --------------------------------------------------------------------------
# Configuration.
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class UpliftLossConfig:
    """Loss weights of UpliftMem §4.4 / App. C.2–C.3.

    The paper gives none of these values (SPEC §2.4: "Loss weights, δ_H,
    τ_tr … are not given"); every default below is **our choice**, sized to
    the uplift scale: ``y = U(τ_S) − U(τ_∅)`` with ``U = R·[1 + γ·…]`` lies
    in ``[−(1+γ), 1+γ] ⊂ [−2, 2]``, a solved/failed flip is ``|y| ≈ 1``.

    Attributes:
        delta_huber: Huber threshold δ_H (App. C.2). 1.0: errors up to a full
            solved/failed flip are fitted quadratically; larger errors (noise
            of a single paired execution on a ±2 scale) only linearly.
        w_min: Floor of the magnitude weight ``w_mag`` (App. C.2). 0.1: a
            near-zero label still counts, at a tenth of a decisive one.
        tau_ref: Magnitude at which ``w_mag`` reaches 1 (App. C.2). 0.2: a
            fifth of a solved/failed flip already counts fully; cost-only
            differences (``γ·ΔC/C_max``, typically < 0.2) are down-weighted.
        eps_sign: Labels with ``|y| ≤ eps_sign`` are excluded from L_sign
            (§4.4). 0.05: below this the sign is mostly execution noise.
        eps_pair: Pairs with ``|y_a − y_b| ≤ eps_pair`` are excluded from
            L_pair. 0.0: only exact ties are dropped (their sign is 0), as in
            the paper's formula.
        lam_reg: λ_reg (§4.4). 1.0: regression carries the scale of G.
        lam_sign: λ_sign (§4.4). 0.5.
        lam_pair: λ_pair (§4.4). 0.5. The two ranking/sign terms together
            weigh as much as the regression term.
        eps_policy: Dead zone of ω (App. C.3). 0.02: paths whose uplift is
            indistinguishable from 0 give no policy gradient.
        a_max: Clip of ω (App. C.3). 1.0: one solved/failed flip.
        eta_neg: Scale of negative ω (App. C.3). 0.5: bad paths are pushed
            down half as hard as good ones are pulled up.
        tau_tr: Temperature of the training path policy
            ``π(a | c, S) ∝ exp(g(a | c, S)/τ_tr)`` (§4.2, Eq. 6). 1.0:
            gains are in utility units, so a gain of 1 (a flip) is an
            e-fold preference.
    """

    delta_huber: float = 1.0
    w_min: float = 0.1
    tau_ref: float = 0.2
    eps_sign: float = 0.05
    eps_pair: float = 0.0
    lam_reg: float = 1.0
    lam_sign: float = 0.5
    lam_pair: float = 0.5
    eps_policy: float = 0.02
    a_max: float = 1.0
    eta_neg: float = 0.5
    tau_tr: float = 1.0

    def __post_init__(self):
        for name in ("delta_huber", "tau_ref", "a_max", "tau_tr"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"UpliftLossConfig.{name} must be > 0")
        for name in (
            "w_min",
            "eps_sign",
            "eps_pair",
            "lam_reg",
            "lam_sign",
            "lam_pair",
            "eps_policy",
            "eta_neg",
        ):
            if float(getattr(self, name)) < 0:
                raise ValueError(f"UpliftLossConfig.{name} must be >= 0")
        if self.w_min > 1:
            raise ValueError("UpliftLossConfig.w_min must be <= 1")


# --------------------------------------------------------------------------
# Scorer.
# --------------------------------------------------------------------------
class SetScorer(nn.Module):
    """Permutation-invariant set scorer ``G_θ(c, S)`` with ``G(c, ∅) = 0`` (App. C.1).

    Parameter names (used by :func:`set_scorer_reference` and
    :func:`readout`): ``phi_context``, ``phi_member``, ``phi_out`` (member
    encoder), ``psi_0``, ``psi_1`` (pair network), ``rho_context``,
    ``rho_0``, ``rho_1`` (set MLP), ``head`` (``Dense(1)``: ``w``, ``b_z``),
    and scalars ``a`` (init 1), ``b`` (init 0).

    Attributes:
        hidden: Width ``H`` of the member encoder, pair network and first
            ``ρ`` layer.
        features: Width ``F`` of the penultimate features ``φ(c, S)``.
    """

    hidden: int = 64
    features: int = 64

    @nn.compact
    def __call__(
        self,
        context: jnp.ndarray,  # f32[d_c]
        pool: jnp.ndarray,  # f32[N, d_m], finite rows
        mask: jnp.ndarray,  # bool[N], S = members with mask True
        return_features: bool = False,
    ):
        """Score one set.

        Args:
            context: ``f32[d_c]`` task/context embedding ``c``.
            pool: ``f32[N, d_m]`` candidate memory embeddings (finite; padding
                rows may hold anything finite).
            mask: ``bool[N]`` membership of ``S``.
            return_features: Also return ``φ(c, S)``.

        Returns:
            ``f32[]`` ``G_θ(c, S)``, or ``(G f32[], φ f32[F])`` with
            ``return_features``. For ``S = ∅`` both are exactly 0.
        """
        H = self.hidden
        context = jnp.asarray(context, jnp.float32)
        pool = jnp.asarray(pool, jnp.float32)
        mask = jnp.asarray(mask).astype(bool)
        n = pool.shape[0]

        # φ(c, m_i): mask-independent, f32[N, H].
        c_in = nn.Dense(H, name="phi_context")(context)  # f32[H]
        x = nn.relu(nn.Dense(H, name="phi_member")(pool) + c_in)  # f32[N, H]
        h = nn.relu(nn.Dense(H, name="phi_out")(x))  # f32[N, H]

        # ψ(h_i, h_j), symmetric in (i, j) bit for bit: f32[N, N, H].
        hi, hj = h[:, None, :], h[None, :, :]
        p = jnp.concatenate([hi + hj, hi * hj], axis=-1)  # f32[N, N, 2H]
        p = nn.relu(nn.Dense(H, name="psi_0")(p))
        p = nn.Dense(H, name="psi_1")(p)  # f32[N, N, H]

        # Masked pooling (the only mask-dependent part besides ρ), written as
        # 0/1-weight contractions: under vmap over B masks they become
        # [B, N] @ [N, H] and [B, N²] @ [N², H] matmuls (a batched
        # where-and-sum would materialise B·N²·H elements).
        s1 = mask.astype(jnp.float32) @ h  # f32[H]
        upper = jnp.triu(jnp.ones((n, n), bool), k=1)  # i < j
        pair_mask = upper & mask[:, None] & mask[None, :]  # bool[N, N]
        s2 = pair_mask.astype(jnp.float32).reshape(n * n) @ p.reshape(n * n, H)  # f32[H]

        # ρ(c, s1, s2) → penultimate features → z.
        c_rho = nn.relu(nn.Dense(H, name="rho_context")(context))  # f32[H]
        r = jnp.concatenate([c_rho, s1, s2], axis=-1)  # f32[3H]
        r = nn.relu(nn.Dense(H, name="rho_0")(r))
        f = nn.relu(nn.Dense(self.features, name="rho_1")(r))  # f32[F]
        z = nn.Dense(1, name="head")(f)[0]  # f32[] = w·f + b_z
        a = self.param("a", nn.initializers.ones, (), jnp.float32)
        b = self.param("b", nn.initializers.zeros, (), jnp.float32)

        nonempty = jnp.any(mask)
        g = jnp.where(nonempty, a * z + b, 0.0)  # App. C.1
        if return_features:
            return g, jnp.where(nonempty, f, 0.0)
        return g


def init_params(
    model: SetScorer, key: jax.Array, *, n_pool: int, d_context: int, d_member: int
) -> Params:
    """Fresh scorer parameters (the ``params`` collection, unwrapped).

    Parameter shapes do not depend on ``n_pool``; any ``N`` can be scored
    afterwards.
    """
    variables = model.init(
        key,
        jnp.zeros((d_context,), jnp.float32),
        jnp.zeros((n_pool, d_member), jnp.float32),
        jnp.zeros((n_pool,), bool),
    )
    return variables["params"]


def make_score_fn(model: SetScorer) -> ParamScoreFn:
    """``score(params, context f32[d_c], pool f32[N, d_m], mask bool[N]) -> f32[]``.

    Pure and unjitted; ``jit``/``vmap`` by the caller, e.g. over alternative
    masks of one task: ``vmap(score, in_axes=(None, None, None, 0))``.
    ``params`` is the unwrapped ``params`` collection (:func:`init_params`).
    """

    def score(params, context, pool, mask):
        return model.apply({"params": params}, context, pool, mask)

    return score


def make_feature_fn(model: SetScorer) -> ParamScoreFn:
    """``phi(params, context, pool, mask) -> f32[F]``: penultimate features φ(c, S).

    ``φ(c, ∅) = 0``; for ``S ≠ ∅``, ``G = a·(w·φ + b_z) + b`` (see
    :func:`readout`).
    """

    def phi(params, context, pool, mask):
        return model.apply({"params": params}, context, pool, mask, return_features=True)[1]

    return phi


def readout(params: Params):
    """The final affine map: ``(w f32[F], b_z f32[], a f32[], b f32[])``.

    For ``S ≠ ∅``: ``G(c, S) = a·(w·φ(c, S) + b_z) + b``.
    """
    head = params["head"]
    return head["kernel"][:, 0], head["bias"][0], params["a"], params["b"]


# --------------------------------------------------------------------------
# Training path policy π(a | c, S) (§4.2, Eq. 6; used by L_policy).
# --------------------------------------------------------------------------
class ValueLossParts(NamedTuple):
    """Components of :func:`value_loss` (unweighted)."""

    reg: jnp.ndarray  # f32[] L_reg
    sign: jnp.ndarray  # f32[] L_sign
    pair: jnp.ndarray  # f32[] L_pair


def _masked_mean(values: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """``Σ_valid v / max(#valid, 1)``; invalid entries selected away by ``where``."""
    mask = jnp.asarray(mask).astype(bool)
    total = jnp.sum(jnp.where(mask, values, 0.0))
    count = jnp.sum(mask.astype(jnp.float32))
    return total / jnp.maximum(count, 1.0)


def huber(x: jnp.ndarray, delta: float) -> jnp.ndarray:
    """``Huber_δ(x) = ½x²`` if ``|x| ≤ δ`` else ``δ(|x| − ½δ)`` (PyTorch ``HuberLoss``)."""
    ax = jnp.abs(x)
    return jnp.where(ax <= delta, 0.5 * x * x, delta * (ax - 0.5 * delta))


def w_mag(y: jnp.ndarray, cfg: UpliftLossConfig = UpliftLossConfig()) -> jnp.ndarray:
    """``w_mag(y) = max(w_min, min(1, |y|/τ_ref))`` (App. C.2)."""
    return jnp.maximum(cfg.w_min, jnp.minimum(1.0, jnp.abs(y) / cfg.tau_ref))


def reg_loss(G, y, mask, cfg: UpliftLossConfig = UpliftLossConfig()) -> jnp.ndarray:
    """``L_reg = E[w_mag(y)·Huber_δ(G − y)]`` (§4.4, App. C.2).

    Args:
        G: ``f32[...]`` scores ``G_θ(c, S)``.
        y: ``f32[...]`` uplift labels.
        mask: ``bool[...]`` valid labels.
        cfg: Loss config.

    Returns:
        ``f32[]``, mean over valid entries (0 if none).
    """
    G = jnp.asarray(G, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    return _masked_mean(w_mag(y, cfg) * huber(G - y, cfg.delta_huber), mask)


def sign_loss(G, y, mask, cfg: UpliftLossConfig = UpliftLossConfig()) -> jnp.ndarray:
    """``L_sign = E_{|y| > ε_sign}[BCEWithLogits(G, 1[y > 0])]`` (§4.4).

    ``BCEWithLogits(G, t) = softplus(G) − t·G`` (stable form). Mean over
    valid entries with ``|y| > ε_sign``; 0 when none qualifies.
    Shapes as :func:`reg_loss`.
    """
    G = jnp.asarray(G, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    t = (y > 0).astype(jnp.float32)
    bce = jax.nn.softplus(G) - t * G
    keep = jnp.asarray(mask).astype(bool) & (jnp.abs(y) > cfg.eps_sign)
    return _masked_mean(bce, keep)


def pair_loss(G, y, mask, cfg: UpliftLossConfig = UpliftLossConfig()) -> jnp.ndarray:
    """``L_pair = E_pair[softplus(−sign(y_a − y_b)·(G_a − G_b))]`` (§4.4).

    Pairs are formed along the **last** axis only (sets of the same task);
    each unordered pair ``a < b`` of valid entries with
    ``|y_a − y_b| > eps_pair`` counts once (the term is symmetric in
    ``(a, b)``, so ordered pairs would give the same mean). The expectation is
    uniform over all qualifying pairs of the batch; 0 when none.

    Args:
        G: ``f32[..., M]`` scores, e.g. ``[T tasks, M labelled sets]``.
        y: ``f32[..., M]`` labels.
        mask: ``bool[..., M]`` valid labels.
        cfg: Loss config.

    Returns:
        ``f32[]``.
    """
    G = jnp.asarray(G, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    mask = jnp.asarray(mask).astype(bool)
    m = G.shape[-1]
    dG = G[..., :, None] - G[..., None, :]  # f32[..., M, M]
    dy = y[..., :, None] - y[..., None, :]  # f32[..., M, M]
    upper = jnp.triu(jnp.ones((m, m), bool), k=1)
    keep = upper & mask[..., :, None] & mask[..., None, :] & (jnp.abs(dy) > cfg.eps_pair)
    term = jax.nn.softplus(-jnp.sign(dy) * dG)
    return _masked_mean(term, keep)


def value_loss(G, y, mask, cfg: UpliftLossConfig = UpliftLossConfig()):
    """``L_value = λ_reg L_reg + λ_sign L_sign + λ_pair L_pair`` (§4.4).

    Args:
        G: ``f32[T, M]`` scores of ``M`` labelled sets per task (padding
            masked); L_reg and L_sign use every valid entry, L_pair pairs
            within a row.
        y: ``f32[T, M]`` labels.
        mask: ``bool[T, M]`` valid labels.
        cfg: Loss config.

    Returns:
        ``(f32[] L_value, ValueLossParts)``.
    """
    parts = ValueLossParts(
        reg=reg_loss(G, y, mask, cfg),
        sign=sign_loss(G, y, mask, cfg),
        pair=pair_loss(G, y, mask, cfg),
    )
    total = cfg.lam_reg * parts.reg + cfg.lam_sign * parts.sign + cfg.lam_pair * parts.pair
    return total, parts


# --------------------------------------------------------------------------
# Policy loss (App. C.3).
# --------------------------------------------------------------------------
def omega(y, cfg: UpliftLossConfig = UpliftLossConfig()) -> jnp.ndarray:
    """Outcome weight ``ω(y)`` (App. C.3), elementwise.

    ``0`` if ``|y| ≤ ε_policy``; ``min(y, A_max)`` if ``y > ε_policy``;
    ``η_neg·max(y, −A_max)`` if ``y < −ε_policy``.
    """
    y = jnp.asarray(y, jnp.float32)
    pos = jnp.minimum(y, cfg.a_max)
    neg = cfg.eta_neg * jnp.maximum(y, -cfg.a_max)
    return jnp.where(y > cfg.eps_policy, pos, jnp.where(y < -cfg.eps_policy, neg, 0.0))


def policy_loss(logp_sum, lengths, y, mask, cfg: UpliftLossConfig = UpliftLossConfig()):
    """``L_policy = −E_i[sg(ω_i)/L_i · Σ_t log π(a_{i,t} | c_i, S_{i,t−1})]`` (§4.4, Eq. C.3).

    ``ω`` is computed from ``y`` under ``stop_gradient``: no gradient flows
    to the labels (or to whatever produced them).

    Args:
        logp_sum: ``f32[P]`` per-path ``Σ_t log π`` (differentiable in θ).
        lengths: ``f32[P]`` or ``i32[P]`` path lengths ``L_i`` (floored at 1).
        y: ``f32[P]`` path uplift labels.
        mask: ``bool[P]`` valid paths (the latest batch; App. C.3).
        cfg: Loss config.

    Returns:
        ``f32[]``, mean over valid paths (paths with ``ω = 0`` count in the
        mean); 0 if none.
    """
    w = jax.lax.stop_gradient(omega(y, cfg))
    L = jnp.maximum(jnp.asarray(lengths, jnp.float32), 1.0)
    return -_masked_mean(w / L * jnp.asarray(logp_sum, jnp.float32), mask)


def policy_loss_steps(step_logp, step_mask, y, mask, cfg: UpliftLossConfig = UpliftLossConfig()):
    """:func:`policy_loss` from per-step log-probs.

    Args:
        step_logp: ``f32[P, T]`` ``log π(a_{i,t} | c_i, S_{i,t−1})``.
        step_mask: ``bool[P, T]`` valid steps; ``L_i = Σ_t step_mask``.
        y, mask, cfg: As :func:`policy_loss`.
    """
    step_mask = jnp.asarray(step_mask).astype(bool)
    logp_sum = jnp.sum(jnp.where(step_mask, step_logp, 0.0), axis=-1)
    lengths = jnp.sum(step_mask.astype(jnp.float32), axis=-1)
    return policy_loss(logp_sum, lengths, y, mask, cfg)

"""NumPy reference of the selector DQN update (Appendix C.2, Eq. 12-13).

Hand-written forward pass, masked target, backpropagation of the MSE loss
through the ReLU MLP, and the Adam step with bias correction (identical
arithmetic to ``optax.adam``). Used by the tests to check
:func:`cfjax.kernels.dqn.make_dqn`'s ``train_step``; :func:`reward_reference` is Eq. 10.

Parameter layout mirrors the flax ``QNetwork`` params:
``{"Dense_i": {"kernel": [in, out], "bias": [out]}}`` for
``i = 0 … n_layers-1``. Adam state is
``{"count": int, "mu": <params-like>, "nu": <params-like>}``.
Computation is in float64.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = [
    "reward_reference",
    "reward_f32",
    "adam_init_reference",
    "dqn_loss_reference",
    "dqn_update_reference",
    "q_forward_reference",
    "masked_argmax_reference",
]

_F = np.float64


def _layers(params: Mapping[str, Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    n = len(params)
    return [
        (np.asarray(params[f"Dense_{i}"]["kernel"], _F), np.asarray(params[f"Dense_{i}"]["bias"], _F))
        for i in range(n)
    ]


def _hp(hp, name: str) -> float:
    return float(np.asarray(getattr(hp, name)))


def reward_reference(solved_final, d_calls, d_failed, d_tokens, hp, tau0: float = 1e4):
    """Eq. 10 in float64: ``1[t=T] 1[solved] − λ_w δw − λ_f δf − λ_τ δτ/τ0`` (twin of ``dqn.reward``)."""
    return (np.asarray(solved_final, _F) - _hp(hp, "lam_w") * np.asarray(d_calls, _F)
            - _hp(hp, "lam_f") * np.asarray(d_failed, _F) - _hp(hp, "lam_tau") * np.asarray(d_tokens, _F) / float(tau0))


def reward_f32(solved_final, d_calls, d_failed, d_tokens, hp, tau0: float = 1e4) -> np.float32:
    """Eq. 10 in float32, operation by operation as ``dqn.reward`` computes it, so the value is
    bit-identical to the kernel's (each float32 operation is correctly rounded either way). The twin
    a host loop uses for one decision instead of an eager JAX dispatch per operation."""
    f = np.float32
    return (f(solved_final) - f(np.asarray(hp.lam_w)) * f(d_calls) - f(np.asarray(hp.lam_f)) * f(d_failed)
            - f(np.asarray(hp.lam_tau)) * f(d_tokens) / f(tau0))


def q_forward_reference(params: Mapping[str, Any], obs: np.ndarray):
    """Forward pass of the ReLU MLP.

    Args:
        params: ``{"Dense_i": {"kernel", "bias"}}``.
        obs: ``f[B, obs_dim]``.

    Returns:
        ``(q f64[B, A], cache)`` where ``cache`` is the list of
        ``(layer input, pre-activation)`` pairs for backprop.
    """
    x = np.asarray(obs, _F)
    layers = _layers(params)
    cache = []
    for i, (w, b) in enumerate(layers):
        a = x @ w + b
        cache.append((x, a))
        x = np.maximum(a, 0.0) if i < len(layers) - 1 else a
    return x, cache


def _masked_max(q: np.ndarray, mask: np.ndarray) -> np.ndarray:
    mask = np.asarray(mask, bool).copy()
    mask[..., 0] = True  # skip is always valid (App. C.1)
    return np.where(mask, q, -np.inf).max(axis=-1)


def masked_argmax_reference(x, mask) -> np.ndarray:
    """Twin of :func:`cfjax.kernels.masked_argmax` (``-inf`` only inside the argmax; 0 if none valid)."""
    return np.argmax(np.where(np.asarray(mask, bool), np.asarray(x, _F), -np.inf), axis=-1).astype(np.int32)


def dqn_loss_reference(params, target_params, batch, hp):
    """Eq. 12-13 and the gradient of the loss w.r.t. ``params``, by hand.

    Args:
        params: Online params ``θ``.
        target_params: Target params ``θ⁻``.
        batch: Object with ``obs [B, D]``, ``action [B]``, ``reward [B]``,
            ``next_obs [B, D]``, ``next_mask [B, A]``, ``done [B]``.
        hp: Object with ``gamma``.

    Returns:
        ``(loss, grads)`` with ``grads`` in the params layout.
    """
    obs = np.asarray(batch.obs, _F)
    action = np.asarray(batch.action, np.int64)
    rew = np.asarray(batch.reward, _F)
    done = np.asarray(batch.done, _F)
    gamma = _hp(hp, "gamma")
    bsz = obs.shape[0]

    q, cache = q_forward_reference(params, obs)
    q_next, _ = q_forward_reference(target_params, np.asarray(batch.next_obs, _F))
    y = rew + gamma * (1.0 - done) * _masked_max(q_next, batch.next_mask)  # Eq. 12
    q_sa = q[np.arange(bsz), action]
    td = q_sa - y
    loss = float(np.mean(td**2))  # Eq. 13

    # dL/dq: only the taken action's output receives 2 (q_sa − y) / B.
    dx = np.zeros_like(q)
    dx[np.arange(bsz), action] = 2.0 * td / bsz
    layers = _layers(params)
    grads: dict[str, dict[str, np.ndarray]] = {}
    for i in reversed(range(len(layers))):
        x_in, a = cache[i]
        if i < len(layers) - 1:
            dx = dx * (a > 0.0)  # ReLU'(a), 0 at a == 0 (as jax.nn.relu)
        grads[f"Dense_{i}"] = {"kernel": x_in.T @ dx, "bias": dx.sum(axis=0)}
        dx = dx @ layers[i][0].T
    return loss, grads


def adam_init_reference(params) -> dict:
    """Zero Adam state ``{"count": 0, "mu": 0, "nu": 0}`` in the params layout."""
    def zeros():
        return {k: {n: np.zeros(np.shape(v), _F) for n, v in layer.items()} for k, layer in params.items()}

    return {"count": 0, "mu": zeros(), "nu": zeros()}


def dqn_update_reference(params_np, target_np, adam_state_np, batch, hp, *, b1=0.9, b2=0.999, eps=1e-8):
    """One DQN step: Eq. 12-13 gradient, then Adam (``optax.adam`` semantics).

    ``m ← b1 m + (1−b1) g``; ``v ← b2 v + (1−b2) g²``; ``t ← t+1``;
    ``m̂ = m / (1 − b1^t)``; ``v̂ = v / (1 − b2^t)``;
    ``θ ← θ − lr · m̂ / (sqrt(v̂) + eps)``.

    Args:
        params_np: Online params (``Dense_i`` layout).
        target_np: Target params.
        adam_state_np: ``{"count", "mu", "nu"}``.
        batch: Minibatch (see :func:`dqn_loss_reference`).
        hp: Object with ``lr`` and ``gamma``.
        b1: Adam β1.
        b2: Adam β2.
        eps: Adam ε (Table 3: 1e-8).

    Returns:
        ``(new_params, new_adam_state, loss)``, float64.
    """
    lr = _hp(hp, "lr")
    loss, grads = dqn_loss_reference(params_np, target_np, batch, hp)
    t = int(adam_state_np["count"]) + 1
    new_params, mu_new, nu_new = {}, {}, {}
    for k, layer in params_np.items():
        new_params[k], mu_new[k], nu_new[k] = {}, {}, {}
        for n, p in layer.items():
            g = grads[k][n]
            m = b1 * np.asarray(adam_state_np["mu"][k][n], _F) + (1.0 - b1) * g
            v = b2 * np.asarray(adam_state_np["nu"][k][n], _F) + (1.0 - b2) * g * g
            m_hat = m / (1.0 - b1**t)
            v_hat = v / (1.0 - b2**t)
            new_params[k][n] = np.asarray(p, _F) - lr * m_hat / (np.sqrt(v_hat) + eps)
            mu_new[k][n], nu_new[k][n] = m, v
    return new_params, {"count": t, "mu": mu_new, "nu": nu_new}, loss

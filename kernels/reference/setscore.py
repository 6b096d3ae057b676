"""NumPy references (float64, explicit loops over members / pairs) of :mod:`cfjax.kernels.setscore`."""

from __future__ import annotations

import numpy as np

from cfjax.kernels.setscore import UpliftLossConfig

__all__ = ["huber_reference", "omega_reference", "pair_loss_reference", "policy_loss_reference",
           "reg_loss_reference", "set_scorer_reference", "sign_loss_reference", "value_loss_reference"]

_F = np.float64


def _dense(p, x):
    return np.asarray(x, _F) @ np.asarray(p["kernel"], _F) + np.asarray(p["bias"], _F)


def _relu(x):
    return np.maximum(x, 0.0)


def set_scorer_reference(params, context, pool, mask, return_features=False):
    """NumPy :class:`cfjax.kernels.setscore.SetScorer` forward: loops over the members of ``S`` only."""
    mask = np.asarray(mask, bool)
    if not mask.any():
        g = 0.0
        f = np.zeros(np.asarray(params["rho_1"]["bias"]).shape, _F)
        return (g, f) if return_features else g
    idx = np.flatnonzero(mask)
    c_in = _dense(params["phi_context"], context)
    h = {}
    for i in idx:
        x = _relu(_dense(params["phi_member"], pool[i]) + c_in)
        h[i] = _relu(_dense(params["phi_out"], x))
    H = c_in.shape[0]
    s1 = np.zeros(H, _F)
    for i in idx:
        s1 += h[i]
    s2 = np.zeros(H, _F)
    for a_, i in enumerate(idx):
        for j in idx[a_ + 1 :]:
            q = np.concatenate([h[i] + h[j], h[i] * h[j]])
            s2 += _dense(params["psi_1"], _relu(_dense(params["psi_0"], q)))
    c_rho = _relu(_dense(params["rho_context"], context))
    r = _relu(_dense(params["rho_0"], np.concatenate([c_rho, s1, s2])))
    f = _relu(_dense(params["rho_1"], r))
    z = float(_dense(params["head"], f)[0])
    g = float(params["a"]) * z + float(params["b"])
    return (g, f) if return_features else g


def huber_reference(x, delta):
    x = np.asarray(x, _F)
    ax = np.abs(x)
    return np.where(ax <= delta, 0.5 * x * x, delta * (ax - 0.5 * delta))


def _mean_or_zero(vals):
    return float(np.mean(vals)) if len(vals) else 0.0


def reg_loss_reference(G, y, mask, cfg=UpliftLossConfig()):
    G, y, mask = np.asarray(G, _F).ravel(), np.asarray(y, _F).ravel(), np.asarray(mask, bool).ravel()
    vals = []
    for g, t, m in zip(G, y, mask):
        if m:
            w = max(cfg.w_min, min(1.0, abs(t) / cfg.tau_ref))
            vals.append(w * float(huber_reference(g - t, cfg.delta_huber)))
    return _mean_or_zero(vals)


def sign_loss_reference(G, y, mask, cfg=UpliftLossConfig()):
    G, y, mask = np.asarray(G, _F).ravel(), np.asarray(y, _F).ravel(), np.asarray(mask, bool).ravel()
    vals = []
    for g, t, m in zip(G, y, mask):
        if m and abs(t) > cfg.eps_sign:
            # −log σ(g) = log(1 + e^{−g}); −log(1 − σ(g)) = log(1 + e^{g})
            vals.append(np.logaddexp(0.0, -g) if t > 0 else np.logaddexp(0.0, g))
    return _mean_or_zero(vals)


def pair_loss_reference(G, y, mask, cfg=UpliftLossConfig()):
    G, y, mask = np.asarray(G, _F), np.asarray(y, _F), np.asarray(mask, bool)
    M = G.shape[-1]
    G, y, mask = G.reshape(-1, M), y.reshape(-1, M), mask.reshape(-1, M)
    vals = []
    for t in range(G.shape[0]):
        for a in range(M):
            for b in range(M):  # ordered pairs: same mean as unordered
                if a == b or not (mask[t, a] and mask[t, b]):
                    continue
                dy = y[t, a] - y[t, b]
                if abs(dy) <= cfg.eps_pair:
                    continue
                vals.append(np.log1p(np.exp(-np.sign(dy) * (G[t, a] - G[t, b]))))
    return _mean_or_zero(vals)


def value_loss_reference(G, y, mask, cfg=UpliftLossConfig()):
    return (
        cfg.lam_reg * reg_loss_reference(G, y, mask, cfg)
        + cfg.lam_sign * sign_loss_reference(G, y, mask, cfg)
        + cfg.lam_pair * pair_loss_reference(G, y, mask, cfg)
    )


def omega_reference(y, cfg=UpliftLossConfig()):
    out = []
    for t in np.asarray(y, _F).ravel():
        if abs(t) <= cfg.eps_policy:
            out.append(0.0)
        elif t > 0:
            out.append(min(t, cfg.a_max))
        else:
            out.append(cfg.eta_neg * max(t, -cfg.a_max))
    return np.asarray(out, _F).reshape(np.shape(y))


def policy_loss_reference(logp_sum, lengths, y, mask, cfg=UpliftLossConfig()):
    w = omega_reference(y, cfg)
    vals = [
        w[i] / max(float(lengths[i]), 1.0) * float(logp_sum[i])
        for i in range(len(w))
        if bool(mask[i])
    ]
    return -_mean_or_zero(vals)

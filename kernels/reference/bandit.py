"""NumPy references (float64) of :mod:`cfjax.kernels.bandit`, identical semantics."""

from __future__ import annotations

import numpy as np

from cfjax.kernels._base import NEG
from cfjax.kernels.bandit import (EPSILON, FALLBACK, KNN_UCB, N_MODES, ROUND_ROBIN, WARMUP, BanditConfig,
                                  BanditDecision, LocalEstimates, OutcomeLogArrays)

__all__ = ["bandit_reward_reference", "local_estimates_reference", "select_mode_reference"]


def bandit_reward_reference(y, kappa, lam=BanditConfig.lam) -> np.ndarray:
    """NumPy reference of :func:`bandit_reward` (float64)."""
    return np.clip(np.asarray(y, np.float64) - float(lam) * np.asarray(kappa, np.float64), -1.0, 1.0)



def local_estimates_reference(log: OutcomeLogArrays, query, cfg: BanditConfig = BanditConfig()) -> LocalEstimates:
    """NumPy reference of :func:`cfjax.kernels.bandit.local_estimates` (float64, explicit loops over valid entries)."""
    valid = np.asarray(log.valid, bool)
    emb = np.asarray(log.emb, np.float64)
    q = np.asarray(query, np.float64)
    modes = np.asarray(log.mode)
    rewards = np.asarray(log.reward, np.float64)
    ts = np.asarray(log.t, np.int64)
    n_slots = valid.shape[0]
    qn = np.linalg.norm(q)
    sim = np.zeros(n_slots)
    idx_valid = np.flatnonzero(valid)
    for i in idx_valid:
        sim[i] = float(emb[i] @ q) / (np.linalg.norm(emb[i]) * qn + cfg.sim_eps)
    order = sorted(idx_valid.tolist(), key=lambda i: (-sim[i], i))[: cfg.b_hat]
    member = np.zeros(n_slots, bool)
    member[order] = True
    n_nb = len(order)
    mean_sim = float(np.mean(sim[order])) if n_nb else 0.0
    t_max = int(max(ts[i] for i in order)) if n_nb else int(np.iinfo(np.int32).min)
    weight = np.zeros(n_slots)
    for i in order:
        weight[i] = max(sim[i], 0.0) * cfg.gamma ** (t_max - ts[i])
    counts = np.zeros(N_MODES, np.int64)
    wsum = np.zeros(N_MODES)
    wrsum = np.zeros(N_MODES)
    for i in order:
        m = int(modes[i])
        if 0 <= m < N_MODES:
            counts[m] += 1
            wsum[m] += weight[i]
            wrsum[m] += weight[i] * rewards[i]
    r_hat = np.array([wrsum[m] / wsum[m] if wsum[m] > 0 else 0.0 for m in range(N_MODES)])
    log_n = np.log(max(n_nb, 1))
    scores = np.array([r_hat[m] + cfg.c * np.sqrt(log_n / max(counts[m], 1)) for m in range(N_MODES)])
    return LocalEstimates(sim=sim, in_neighbourhood=member, weight=weight, t_max=t_max, weight_sum=wsum,
                          r_hat=r_hat, counts=counts, scores=scores, mean_sim=mean_sim, n_neighbours=n_nb)


def select_mode_reference(log: OutcomeLogArrays, query, iteration: int, rr_index: int, u: float, rand_mode: int,
                          cfg: BanditConfig = BanditConfig()) -> BanditDecision:
    """NumPy reference of :func:`cfjax.kernels.bandit.select_mode`.

    ``u, rand_mode`` are the ε-branch draws, i.e. ``exploration_draws(key)``
    for the key the kernel receives. ``u < ε`` is compared in float32, as in
    the kernel.
    """
    est = local_estimates_reference(log, query, cfg)
    valid = np.asarray(log.valid, bool)
    modes = np.asarray(log.mode)
    rewards = np.asarray(log.reward, np.float64)
    g_count = np.zeros(N_MODES, np.int64)
    g_sum = np.zeros(N_MODES)
    for i in np.flatnonzero(valid):
        m = int(modes[i])
        if 0 <= m < N_MODES:
            g_count[m] += 1
            g_sum[m] += rewards[i]
    neg = np.full(N_MODES, NEG, np.float64)
    if int(iteration) < cfg.rr_iterations:
        branch, mode = ROUND_ROBIN, int(rr_index) % N_MODES
    elif g_count.min() < cfg.w_init:
        branch, mode = WARMUP, int(np.argmin(g_count))
    elif np.float32(u) < np.float32(cfg.epsilon):
        branch, mode = EPSILON, int(rand_mode)
    elif est.n_neighbours == 0 or est.mean_sim < cfg.rho:
        branch = FALLBACK
        means = [g_sum[m] / g_count[m] if g_count[m] > 0 else -np.inf for m in range(N_MODES)]
        mode = int(np.argmax(means))
    else:
        branch, mode = KNN_UCB, int(np.argmax(est.scores))
    scores = est.scores if branch == KNN_UCB else neg
    return BanditDecision(mode=mode, branch=branch, scores=np.asarray(scores, np.float64),
                          neighbourhood_sim=float(est.mean_sim), n_neighbours=int(est.n_neighbours))

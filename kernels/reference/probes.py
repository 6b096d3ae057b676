"""Plain NumPy references of :mod:`cfjax.kernels.probes` (float64; tests and benchmarks).

Each returns ``(selected i64[budget], value f64[budget], s2 f64[J])`` like
:func:`cfjax.kernels.reference.evsi.greedy_rank_one_reference`, with ``s2`` the resolved variance
``s_j²(Q)`` of the batch from an explicit ``W_Q`` (0 for masked comparisons). Written for clarity:
dense covariances, ``np.linalg.solve`` from scratch at every step.
"""

from __future__ import annotations

import numpy as np

from cfjax.kernels.reference.evsi import _clean, resolved_variance_reference, shared_noise_cov_reference

__all__ = ["random_reference", "mcstd_reference", "eig_reference"]


def _batch_s2(inputs, sel):
    """``s_j²(Q)`` `f64[J]` for ``Q = sel`` (the ``-1`` entries dropped), 0 for masked comparisons."""
    idx = [int(q) for q in sel if q >= 0]
    s2 = resolved_variance_reference(inputs.directions, inputs.features, inputs.noise_var, inputs.group, idx,
                                     inputs.prior_cov, float(inputs.ref_noise_var))
    return np.where(np.asarray(inputs.comp_mask, bool), s2, 0.0)


def _finish(inputs, sel, vals, budget):
    pad = budget - len(sel)
    sel = np.array(list(sel) + [-1] * pad, np.int64)
    return sel, np.array(list(vals) + [0.0] * pad, np.float64), _batch_s2(inputs, sel)


def random_reference(inputs, selected):
    """Check a random batch and give its resolved variances (a draw cannot be matched bit for bit).

    ``selected`` (``budget = len(selected)``) must hold ``min(budget, #valid)`` distinct valid
    candidates followed by ``-1``; any order of any such subset is a possible draw. Raises
    ``ValueError`` otherwise. Returns ``(selected, zeros, s2)``.
    """
    inputs = _clean(inputs)
    sel = np.asarray(selected, np.int64)
    cand = np.asarray(inputs.cand_mask, bool)
    k = min(len(sel), int(cand.sum()))
    head, tail = sel[:k], sel[k:]
    if np.any(tail != -1):
        raise ValueError(f"expected -1 after {k} picks, got {tail}")
    if np.any((head < 0) | (head >= len(cand))) or not np.all(cand[head]):
        raise ValueError(f"picks must be valid candidates, got {head}")
    if len(set(head.tolist())) != k:
        raise ValueError(f"picks must be distinct, got {head}")
    return _finish(inputs, head.tolist(), [0.0] * k, len(sel))


def mcstd_reference(inputs, xi_samples, budget: int):
    """MC-STD with the given ``ξ`` samples `[M, r]` (:func:`cfjax.kernels.probes.mcstd_samples`).

    ``std_q = np.std(φ_q·ξ_m over m)`` (``ddof = 0``); the ``budget`` highest valid, ties to the
    lowest index, no conditioning between picks; ``value`` = ``std_q``.
    """
    inputs = _clean(inputs)
    pred = np.asarray(inputs.features, np.float64) @ np.asarray(xi_samples, np.float64).T  # [N, M]
    std = pred.std(axis=1)
    cand = np.asarray(inputs.cand_mask, bool)
    order = [int(q) for q in np.lexsort((np.arange(len(std)), -std)) if cand[q]][:budget]
    return _finish(inputs, order, std[order], budget)


def eig_reference(inputs, budget: int):
    """Naive greedy EIG: every step recomputes ``v_{q|Q} = C_qq − C_qQ C_QQ⁻¹ C_Qq`` for every
    candidate from the dense ``C = ΦΣΦᵀ + Ω`` (``np.linalg.solve``), scores
    ``½·log(v_{q|Q}/(ν_q² + ν_0²))`` and takes the argmax (lowest index on ties)."""
    inputs = _clean(inputs)
    f = np.asarray(inputs.features, np.float64)
    nv = np.asarray(inputs.noise_var, np.float64)
    nu0 = float(inputs.ref_noise_var)
    cov = f @ np.asarray(inputs.prior_cov, np.float64) @ f.T + shared_noise_cov_reference(nv, inputs.group, nu0)
    avail = np.asarray(inputs.cand_mask, bool).copy()
    sel, vals = [], []
    while len(sel) < budget and avail.any():
        v = np.diag(cov).copy()
        if sel:
            v -= np.einsum("qa,aq->q", cov[:, sel], np.linalg.solve(cov[np.ix_(sel, sel)], cov[sel, :]))
        eig = np.where(avail, 0.5 * np.log(np.where(avail, v, 1.0) / (nv + nu0)), -np.inf)
        q = int(np.argmax(eig))
        sel.append(q)
        vals.append(float(eig[q]))
        avail[q] = False
    return _finish(inputs, sel, vals, budget)

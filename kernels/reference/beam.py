"""Plain Python / NumPy references of :mod:`cfjax.kernels.beam` (the scorer is called once per set)."""

from __future__ import annotations

import itertools
import math
from typing import Callable

import numpy as np

from cfjax.kernels._base import NEG
from cfjax.kernels.beam import BeamResult, _check_static, archive_size

__all__ = ["beam_search_reference", "brute_force_reference", "path_log_prob_reference"]

def _np_task(costs, valid, budget):
    return np.asarray(costs, np.float64), np.asarray(valid, bool), float(budget)


def _mask(members: tuple[int, ...], n: int) -> np.ndarray:
    m = np.zeros(n, bool)
    m[list(members)] = True
    return m


def beam_search_reference(score_fn: Callable, context, pool, costs, valid, budget, *, k_max: int, width: int = 2,
                          per_parent: int = 2) -> BeamResult:
    """App. B.1 beam search in plain Python (reference for :func:`cfjax.kernels.beam.make_beam_search`).

    Args:
      score_fn: ``score_fn(context, pool, members np.bool_[N]) -> float``;
        called once per scored extension (no caching: a set reached from two
        parents is scored twice, as in the kernel). Values are rounded to f32
        before comparing, as in the kernel.
      context, pool, costs, valid, budget: one task (see the module docstring).
      k_max, width, per_parent: ``K``, ``W`` and the per-parent keep.

    Returns:
      :class:`BeamResult` of NumPy arrays in the kernel's layout.
    """
    _check_static(k_max, width, per_parent)
    costs, valid, budget = _np_task(costs, valid, budget)
    n = int(np.asarray(pool).shape[0])
    beam: list[tuple[tuple[int, ...], float, float]] = [((), 0.0, 0.0)]  # (sorted members, value, cost)
    archive: list[list[tuple[tuple[int, ...], float]]] = []
    for _depth in range(k_max):
        kept = []
        for members, _v, cost in beam:
            exts = []
            for m in range(n):
                if not valid[m] or m in members or len(members) >= k_max or cost + costs[m] > budget:
                    continue
                ext = tuple(sorted(members + (m,)))
                v = float(np.float32(score_fn(context, pool, _mask(ext, n))))
                exts.append((-v, m, ext, cost + costs[m]))
            exts.sort(key=lambda e: (e[0], e[1]))  # higher value, then lower index
            kept += [(ext, -nv, c) for nv, _m, ext, c in exts[:per_parent]]
        if not kept:
            break
        best: dict[tuple[int, ...], tuple[float, float]] = {}
        for ext, v, c in kept:  # dedup by members (keep the higher value; first on equality)
            if ext not in best or v > best[ext][0]:
                best[ext] = (v, c)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))  # value desc, lexicographic asc
        beam = [(ext, v, c) for ext, (v, c) in ranked[:width]]
        archive.append([(ext, v) for ext, v, _c in beam])
    A = archive_size(k_max, width)
    am, av, ok = np.zeros((A, n), bool), np.full(A, NEG, np.float32), np.zeros(A, bool)
    av[0], ok[0] = 0.0, True
    entries = [((), 0.0)]
    for t, level in enumerate(archive):
        for j, (ext, v) in enumerate(level):
            am[1 + t * width + j], av[1 + t * width + j], ok[1 + t * width + j] = _mask(ext, n), v, True
            entries.append((ext, v))
    ext, v = min(entries, key=lambda e: (-e[1], len(e[0]), e[0]))  # value, fewer members, lexicographic
    return BeamResult(_mask(ext, n), np.float32(v), am, av, ok)


def brute_force_reference(score_fn: Callable, context, pool, costs, valid, budget, *,
                          k_max: int) -> tuple[np.ndarray, np.float32]:
    """Best feasible set over *all* subsets with ``|S| ≤ K`` (∅ has value 0).

    Same final tie rule as the beam search (value, fewer members,
    lexicographic). Exponential: small ``N`` only.

    Returns:
      ``(members np.bool_[N], value np.float32)``.
    """
    costs, valid, budget = _np_task(costs, valid, budget)
    n = int(np.asarray(pool).shape[0])
    idx = [i for i in range(n) if valid[i]]
    best_key, best = (0.0, 0, ()), ()
    for size in range(1, k_max + 1):
        for comb in itertools.combinations(idx, size):
            if sum(costs[list(comb)]) > budget:
                continue
            v = float(np.float32(score_fn(context, pool, _mask(comb, n))))
            key = (-v, size, comb)
            if key < best_key:
                best_key, best = key, comb
    return _mask(best, n), np.float32(-best_key[0])


def path_log_prob_reference(score_fn: Callable, context, pool, costs, valid, budget, actions, *, k_max: int,
                            tau: float) -> np.ndarray:
    """NumPy (float64) softmax reference for the per-step path log-probabilities.

    Args:
      score_fn: ``score_fn(context, pool, members np.bool_[N]) -> float``
        (never called on ∅).
      actions: ``int[K+1]`` (memory index, ``N`` = STOP, ``-1`` = padding).

    Returns:
      ``f64[K+1]`` log π(a_t | c, S_t), 0 on padding. Raises ``ValueError`` on an
      infeasible action.
    """
    costs, valid, budget = _np_task(costs, valid, budget)
    n = int(np.asarray(pool).shape[0])
    actions = np.asarray(actions)
    out = np.zeros(len(actions))
    S: tuple[int, ...] = ()
    G_S, cost = 0.0, 0.0
    for t, a in enumerate(actions):
        a = int(a)
        if a < 0:
            break
        feas = [m for m in range(n)
                if valid[m] and m not in S and len(S) < k_max and cost + costs[m] <= budget]
        if not feas:
            raise ValueError(f"step {t}: action {a} after a forced stop")
        G = {m: float(np.float32(score_fn(context, pool, _mask(tuple(sorted(S + (m,))), n)))) for m in feas}
        logits = np.array([(G[m] - G_S) / tau for m in feas] + [0.0])
        mx = logits.max()
        lse = mx + math.log(np.exp(logits - mx).sum())
        if a == n:
            out[t] = 0.0 - lse
            break
        if a not in G:
            raise ValueError(f"step {t}: infeasible action {a}")
        out[t] = logits[feas.index(a)] - lse
        S, G_S, cost = tuple(sorted(S + (a,))), G[a], cost + costs[a]
    return out

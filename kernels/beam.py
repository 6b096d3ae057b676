"""UpliftMem set construction over a fixed candidate pool: beam search and path sampling.

papers/upliftmem.md §4.2 (Eq. 5–6: conditional gain and the training policy)
and App. B.1 (memory set search and stopping); SPEC.md §2.2.

A task supplies a context ``c`` (``f32[d]``), a recalled candidate pool of
``N`` memories (``pool f32[N, d]``), per-memory token costs (``costs f32[N]``),
a candidate validity mask (``valid bool[N]``) and a token budget
(``budget f32[]``). A memory set is a member mask ``bool[N]``. The set scorer
is a function argument ``score(context, pool, members) -> f32[]`` (for the
differentiable log-probabilities, ``score(params, context, pool, members)``);
``G(c, ∅) = 0`` holds *by definition* here: no kernel ever evaluates the
scorer on the empty mask.

**Feasibility** of adding memory ``m`` to a set ``S`` (App. B.1 "used memories
and additions violating the count or token constraints are masked"):
``valid[m]`` and ``m ∉ S`` and ``|S| < K`` and ``cost(S) + costs[m] ≤ budget``
(inclusive). ``cost(S)`` is accumulated along the construction path in f32;
token costs are integers in practice, so sums are exact below 2**24 and all
implementations (kernel, references) agree. ``budget = inf`` means no budget.
Costs are assumed non-negative (then every subset of a feasible set is
feasible, which the brute-force equivalence relies on).

**Beam search** (App. B.1, test time, ``W = 2``) — :func:`make_beam_search`.
The beam and a cross-depth archive start at ``{∅}`` (value 0). At each depth
``t = 1..K`` every feasible one-memory extension of every live beam set is
scored (one batched ``vmap`` over the ``W·N`` extensions); each parent keeps
its ``per_parent`` (= 2) best extensions; among all kept extensions the ``W``
highest-valued *distinct* ones (deduplicated by members: the same set reached
from two parents counts once) form the next beam and enter the archive. The
search stops at ``K`` members or when no extension is feasible (the beam is
then empty and later depths are masked no-ops). It returns the best archived
set, ``∅`` included. Cost ``O(W·N·K)`` set scores.

**Tie rule** (deterministic, used at every selection):

* within a parent: higher value, then lower added memory index (for
  ``P ∪ {m}`` this is exactly the lexicographic order of sorted member-index
  lists);
* beam selection at a depth (all sets have the same size): higher value, then
  the lexicographically smallest sorted member-index list;
* final selection over the archive: higher value, then fewer members, then the
  lexicographically smallest sorted member-index list.

Scores are compared as f32 with ``==`` (exact ties); scorers must return
finite values (``-inf`` is reserved for masked extensions inside ``top_k``;
NaN is not supported). The scorer is evaluated on every mask ``P ∪ {m}`` of
the ``W × N`` grid (infeasible ones are discarded, none is ``∅``), so pool rows
of invalid candidates must still be finite (e.g. zero padding).

**Path sampling** (§4.2 Eq. 6, training) — :func:`make_path_sampler`. From
``S_0 = ∅``: ``π(a | c, S) ∝ exp(g(a | c, S)/τ_tr)`` over the feasible
additions and STOP, with ``g(m | c, S) = G(c, S ∪ {m}) − G(c, S)`` and
``g(STOP) = 0``. A sampled STOP ends the path (and belongs to it); when no
addition is feasible — nothing left, the budget is spent, or ``|S| = K`` —
the path ends *without* another sampled action (forced stop, App. A.1
"reaching a retrieval limit ends it without another sampled action"). Hence
the path length ``L ≤ K``. Arrays have ``K + 1`` steps: ``actions[t]`` is the
memory index, ``N`` for STOP, ``-1`` for padding; ``states[t]`` is the set
``S_t`` before ``actions[t]`` (after the path ends: the final set, so
``states[L]`` is always the final set and ``states[K]`` too).
:func:`make_path_log_prob` recomputes the per-step log-probabilities of a
given path under (new) scorer parameters, differentiably, for
``L_policy = −E[ω/L Σ_t log π(a_t | c, S_{t−1})]``.

Masked logits use the package's finite :data:`cfjax.kernels.NEG` (never
``-inf``), so log-softmax and its gradient stay finite.

Everything is written for one task; ``jax.vmap`` over tasks (and ``jit``) is
the caller's choice. ``N`` (from the shapes), ``K``, ``W`` and ``per_parent``
are static; the values of every argument are dynamic (no recompiles).

References (plain Python + NumPy, scorer called once per set), in
:mod:`cfjax.kernels.reference.beam`: ``beam_search_reference``,
``brute_force_reference``, ``path_log_prob_reference``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from cfjax.kernels._base import NEG, BeamSearchFn, PathLogProbFn, PathSampleFn, ScoreFn

__all__ = ["BeamResult", "PathSample", "PathLogProb", "make_beam_search", "make_path_sampler",
           "make_path_log_prob", "feasible_additions", "archive_size"]

Scorer = ScoreFn  # (context, pool, members) -> f32[]; former name

# old import paths of the NumPy twins, now in cfjax.kernels.reference.beam


class BeamResult(NamedTuple):
    """Output of the beam search for one task (``A = 1 + W·K`` archive slots)."""

    members: jnp.ndarray  # bool[N] the best archived set (may be ∅)
    value: jnp.ndarray  # f32[] its value G(c, S) (0 for ∅)
    archive_members: jnp.ndarray  # bool[A, N] slot 0 = ∅; slots 1+(t−1)·W … t·W = depth-t beam, best first
    archive_values: jnp.ndarray  # f32[A] values (NEG on invalid slots; 0 for ∅)
    archive_valid: jnp.ndarray  # bool[A] slot holds an archived set


class PathSample(NamedTuple):
    """One sampled construction path (``K + 1`` steps; ``L ≤ K`` sampled actions)."""

    actions: jnp.ndarray  # i32[K+1] memory index, N = STOP, −1 = padding
    states: jnp.ndarray  # bool[K+1, N] S_t before actions[t]; the final set from step L on
    log_probs: jnp.ndarray  # f32[K+1] log π(a_t | c, S_t); 0 on padding
    log_prob: jnp.ndarray  # f32[] Σ_t log_probs[t]
    length: jnp.ndarray  # i32[] L, sampled actions including a sampled STOP
    stopped: jnp.ndarray  # bool[] the path ended with a sampled STOP (else a forced stop)
    members: jnp.ndarray  # bool[N] the final set
    value: jnp.ndarray  # f32[] G(c, final set) (0 for ∅)


class PathLogProb(NamedTuple):
    """Log-probabilities of a given path under a scorer (see :func:`make_path_log_prob`)."""

    log_probs: jnp.ndarray  # f32[K+1] log π(a_t | c, S_t); 0 on padding
    total: jnp.ndarray  # f32[] Σ_t log_probs[t]
    length: jnp.ndarray  # i32[] L (non-padding actions)
    members: jnp.ndarray  # bool[N] the final set
    consistent: jnp.ndarray  # bool[] every action feasible, padding exactly where the path must end


def archive_size(k_max: int, width: int = 2) -> int:
    """``A = 1 + W·K``: ∅ plus ``W`` slots per depth."""
    return 1 + width * k_max


def _check_static(k_max: int, width: int = 1, per_parent: int = 1) -> None:
    for name, v in (("k_max", k_max), ("width", width), ("per_parent", per_parent)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"{name} must be a Python int (static), got {type(v).__name__}")
    if k_max < 0 or width < 1 or per_parent < 1:
        raise ValueError(f"need k_max >= 0, width >= 1, per_parent >= 1; got {k_max}, {width}, {per_parent}")


def feasible_additions(members, cost, costs, valid, budget, k_max: int) -> jnp.ndarray:
    """Feasible one-memory additions to a set (App. B.1).

    Args:
      members: ``bool[..., N]`` the current set(s).
      cost: ``f32[...]`` their accumulated token cost.
      costs: ``f32[N]`` per-memory token costs.
      valid: ``bool[N]`` candidate validity.
      budget: ``f32[]`` token budget (inclusive).
      k_max: member cap ``K``.

    Returns:
      ``bool[..., N]``: ``valid ∧ m ∉ S ∧ |S| < K ∧ cost(S) + costs[m] ≤ budget``.
    """
    n_members = jnp.sum(members, axis=-1, keepdims=True)
    return (valid & ~members & (n_members < k_max)
            & (jnp.asarray(cost, jnp.float32)[..., None] + costs <= budget))


def _lex_less(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    """Sorted member-index list of ``a`` < that of ``b`` (equal-size sets ``bool[N]``).

    At the first index where the masks differ, the set holding it is the
    lexicographically smaller one (the other holds a larger index there).
    """
    d = a != b
    return jnp.any(d) & a[jnp.argmax(d)]


def make_beam_search(score: ScoreFn, *, k_max: int, width: int = 2, per_parent: int = 2) -> BeamSearchFn:
    """Factory of the App. B.1 beam search (test-time set construction).

    Args:
      score: ``score(context f32[d], pool f32[N, d], members bool[N]) -> f32[]``,
        the set value ``G_θ(c, S)``; traceable, finite. Never called on ∅.
        Trainable parameters: build the search inside the jitted function
        (``jax.jit(lambda p, *a: make_beam_search(partial(G, p), k_max=K)(*a))``)
        so they are traced arguments, not baked-in constants.
      k_max: member cap ``K`` (static; 5 for the agent suites, 3 for code).
      width: beam width ``W`` (static; the paper's test-time value is 2).
      per_parent: extensions kept per parent before the global top-``W``
        (static; 2 in App. B.1). Clamped to ``N``.

    Returns:
      Pure ``search(context f32[d], pool f32[N, d], costs f32[N], valid bool[N],
      budget f32[]) -> BeamResult`` for one task (``A = 1 + W·K``); jit/vmap by
      the caller. See the module docstring for the tie rule.
    """
    _check_static(k_max, width, per_parent)
    W, K = int(width), int(k_max)
    score_batch = jax.vmap(score, in_axes=(None, None, 0))

    def search(context, pool, costs, valid, budget) -> BeamResult:
        pool = jnp.asarray(pool)
        n = pool.shape[0]
        costs = jnp.asarray(costs, jnp.float32)
        valid = jnp.asarray(valid, bool)
        budget = jnp.asarray(budget, jnp.float32)
        keep = min(per_parent, n)
        C = W * keep  # kept extensions per depth
        eye = jnp.eye(n, dtype=bool)
        A = archive_size(K, W)
        cidx = jnp.arange(C)

        def depth_body(t, carry):
            beam_m, beam_c, beam_alive, arch_m, arch_v, arch_ok = carry
            # all W·N one-memory extensions, scored in one batch
            feas = beam_alive[:, None] & feasible_additions(beam_m, beam_c, costs, valid, budget, K)  # [W, N]
            ext = beam_m[:, None, :] | eye[None]  # bool[W, N, N]
            vals = score_batch(context, pool, ext.reshape(W * n, n)).astype(jnp.float32).reshape(W, n)
            # ≤ per_parent best per parent (top_k: ties → lower index = lexicographic order)
            _, top = jax.lax.top_k(jnp.where(feas, vals, -jnp.inf), keep)  # i32[W, keep]
            cand_ok = jnp.take_along_axis(feas, top, axis=1).reshape(C)
            cand_v = jnp.take_along_axis(vals, top, axis=1).reshape(C)
            cand_m = jnp.take_along_axis(ext, top[:, :, None], axis=1).reshape(C, n)
            cand_c = (beam_c[:, None] + costs[top]).reshape(C)
            # dedup by members, then rank by (value desc, lexicographic asc)
            vi, vj = cand_v[:, None], cand_v[None, :]
            same = jnp.all(cand_m[:, None, :] == cand_m[None, :, :], axis=-1)  # [i, j]
            dominated = jnp.any(same & cand_ok[:, None] & ((vi > vj) | ((vi == vj) & (cidx[:, None] < cidx[None]))),
                                axis=0)
            kept = cand_ok & ~dominated
            lex = jax.vmap(jax.vmap(_lex_less, (None, 0)), (0, None))(cand_m, cand_m)  # [i, j]: i <lex j
            better = (vi > vj) | ((vi == vj) & lex)  # [i, j]: i ranks before j
            rank = jnp.sum(kept[:, None] & better, axis=0)  # kept sets ranked before j
            slot = kept[None, :] & (rank[None, :] == jnp.arange(W)[:, None])  # [W, C]
            new_alive = jnp.any(slot, axis=1)
            pick = jnp.argmax(slot, axis=1)
            new_m = cand_m[pick] & new_alive[:, None]
            new_v = jnp.where(new_alive, cand_v[pick], NEG)
            new_c = jnp.where(new_alive, cand_c[pick], 0.0)
            start = 1 + t * W
            arch_m = jax.lax.dynamic_update_slice(arch_m, new_m, (start, 0))
            arch_v = jax.lax.dynamic_update_slice(arch_v, new_v, (start,))
            arch_ok = jax.lax.dynamic_update_slice(arch_ok, new_alive, (start,))
            return new_m, new_c, new_alive, arch_m, arch_v, arch_ok

        init = (jnp.zeros((W, n), bool),  # beam members: {∅}
                jnp.zeros((W,), jnp.float32),  # beam token costs
                jnp.arange(W) == 0,  # live beam slots
                jnp.zeros((A, n), bool),
                jnp.full((A,), NEG, jnp.float32).at[0].set(0.0),  # G(c, ∅) = 0
                jnp.zeros((A,), bool).at[0].set(True))
        *_, arch_m, arch_v, arch_ok = jax.lax.fori_loop(0, K, depth_body, init)
        # best = the best depth head (slot 0 of each depth is that depth's best under the
        # beam order); argmax takes the first maximum = fewest members.
        heads = jnp.asarray([0] + [1 + t * W for t in range(K)], jnp.int32)
        best = heads[jnp.argmax(jnp.where(arch_ok[heads], arch_v[heads], -jnp.inf))]
        return BeamResult(arch_m[best], arch_v[best], arch_m, arch_v, arch_ok)

    return search


def _step_logits(score_ext, S, cost, G_S, costs, valid, budget, k_max, tau):
    """Eq. 6 logits over the N additions and STOP at set ``S`` (one task).

    Returns ``(logits f32[N+1], feasible bool[N], ext_values f32[N])``; infeasible
    additions get the finite ``NEG``, STOP gets ``0/τ``.
    """
    n = S.shape[0]
    feas = feasible_additions(S, cost, costs, valid, budget, k_max)
    ext_v = score_ext(S[None, :] | jnp.eye(n, dtype=bool)).astype(jnp.float32)  # G(c, S ∪ {m})
    gain = ext_v - G_S
    logits = jnp.concatenate([jnp.where(feas, gain / tau, NEG), jnp.zeros((1,), jnp.float32)])
    return logits, feas, ext_v


def make_path_sampler(score: ScoreFn, *, k_max: int, tau: float) -> PathSampleFn:
    """Factory of the training-path sampler (§4.2 Eq. 6, App. B.1).

    Args:
      score: ``score(context, pool, members) -> f32[]`` as in
        :func:`make_beam_search` (never called on ∅; ``G(c, ∅) = 0``).
      k_max: member cap ``K`` (static).
      tau: policy temperature ``τ_tr > 0``.

    Returns:
      Pure ``sample(key, context f32[d], pool f32[N, d], costs f32[N],
      valid bool[N], budget f32[]) -> PathSample`` for one task. One scorer
      batch of ``N`` extensions per step, ``K`` steps.
    """
    _check_static(k_max)
    K = int(k_max)
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    score_batch = jax.vmap(score, in_axes=(None, None, 0))

    def sample(key, context, pool, costs, valid, budget) -> PathSample:
        pool = jnp.asarray(pool)
        n = pool.shape[0]
        costs = jnp.asarray(costs, jnp.float32)
        valid = jnp.asarray(valid, bool)
        budget = jnp.asarray(budget, jnp.float32)

        def step(carry, k):
            S, cost, G_S, done = carry
            logits, feas, ext_v = _step_logits(lambda m: score_batch(context, pool, m), S, cost, G_S, costs,
                                               valid, budget, K, tau)
            active = ~done & jnp.any(feas)  # else: path over (STOP sampled before, or forced stop)
            a = jax.random.categorical(k, logits)
            logp = jax.nn.log_softmax(logits)[a]
            add = active & (a < n)
            ac = jnp.minimum(a, n - 1)
            S_next = S | ((jnp.arange(n) == a) & add)
            carry = (S_next, jnp.where(add, cost + costs[ac], cost), jnp.where(add, ext_v[ac], G_S),
                     done | ~active | (a == n))
            return carry, (jnp.where(active, a, -1).astype(jnp.int32), S, jnp.where(active, logp, 0.0))

        init = (jnp.zeros((n,), bool), jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32), jnp.zeros((), bool))
        (S, _, G_S, _), (acts, states, logps) = jax.lax.scan(step, init, jax.random.split(key, K))
        actions = jnp.concatenate([acts, jnp.full((1,), -1, jnp.int32)])
        states = jnp.concatenate([states, S[None]], axis=0)
        log_probs = jnp.concatenate([logps, jnp.zeros((1,), jnp.float32)])
        return PathSample(actions, states, log_probs, jnp.sum(log_probs), jnp.sum(actions >= 0).astype(jnp.int32),
                          jnp.any(actions == n), S, G_S)

    return sample


def make_path_log_prob(score: Callable, *, k_max: int, tau: float) -> PathLogProbFn:
    """Factory of the differentiable path log-probability (for ``L_policy``).

    Replays a given path (e.g. from :func:`make_path_sampler`, possibly under
    older parameters) and recomputes ``log π_θ(a_t | c, S_t)`` (Eq. 6) with
    the scorer at parameters ``params``.

    Args:
      score: ``score(params, context, pool, members) -> f32[]`` (a scorer
        without parameters: ``lambda _, c, p, m: G(c, p, m)`` with ``params=None``).
      k_max: member cap ``K`` (static).
      tau: policy temperature ``τ_tr > 0``.

    Returns:
      Pure ``log_prob(params, context, pool, costs, valid, budget,
      actions i32[K+1]) -> PathLogProb``; ``jax.grad`` w.r.t. ``params``
      flows through every feasible gain (masked logits are the finite
      ``NEG``, so gradients stay finite). ``consistent`` is False when an
      action is infeasible (its log-prob is then about ``NEG``), when a
      non-padding action follows the end of the path, or when padding starts
      while an addition is still feasible (the sampler never truncates).
    """
    _check_static(k_max)
    K = int(k_max)
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")

    def log_prob(params, context, pool, costs, valid, budget, actions) -> PathLogProb:
        pool = jnp.asarray(pool)
        n = pool.shape[0]
        costs = jnp.asarray(costs, jnp.float32)
        valid = jnp.asarray(valid, bool)
        budget = jnp.asarray(budget, jnp.float32)
        actions = jnp.asarray(actions, jnp.int32)
        score_batch = jax.vmap(lambda m: score(params, context, pool, m))

        def step(carry, a):
            S, cost, G_S, done, ok = carry
            logits, feas, ext_v = _step_logits(score_batch, S, cost, G_S, costs, valid, budget, K, tau)
            can_act = ~done & jnp.any(feas)
            active = can_act & (a >= 0)
            ac = jnp.clip(a, 0, n)
            logp = jnp.where(active, jax.nn.log_softmax(logits)[ac], 0.0)
            legal = (a == n) | ((a >= 0) & (a < n) & feas[jnp.minimum(ac, n - 1)])
            ok = ok & jnp.where(can_act, legal, a == -1)
            add = active & (a < n)
            am = jnp.minimum(ac, n - 1)
            carry = (S | ((jnp.arange(n) == a) & add), jnp.where(add, cost + costs[am], cost),
                     jnp.where(add, ext_v[am], G_S), done | ~active | (a == n), ok)
            return carry, logp

        init = (jnp.zeros((n,), bool), jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32),
                jnp.zeros((), bool), jnp.ones((), bool))
        (S, _, _, _, ok), logps = jax.lax.scan(step, init, actions[:K])
        log_probs = jnp.concatenate([logps, jnp.zeros((1,), jnp.float32)])
        return PathLogProb(log_probs, jnp.sum(log_probs), jnp.sum(actions >= 0).astype(jnp.int32), S,
                           ok & (actions[K] == -1))

    return log_prob

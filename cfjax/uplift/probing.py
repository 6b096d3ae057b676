"""Decision-aware probing: probe pools, comparison families, and batch acquisition.

papers/upliftmem.md §4.3 (Eq. 9–12), App. A.4 (Gaussian beliefs, shared reference noise), A.7 (batch
acquisition), B.2 (probe batch construction); SPEC.md §2.3.

For each task of the preceding acquisition window, retrieval supplied a path (its additions in order)
and the recalled pool ``C(c)``. :func:`build_window`:

* **probe pool** — for the final set ``S`` *and each of its retrieval prefixes* ``S_0 = ∅ … S_L``
  (App. B.2 "the edit operator is also defined on retrieval prefixes"): the set itself, removals
  ``B∖{m}``, additions ``B ∪ {m'}`` and replacements ``(B∖{m}) ∪ {m'}``; ``m'`` ranges over the
  ``probe_candidates`` most similar recalled memories (ours: the full ``C(c)`` would give ~250 sets per
  prefix). Every candidate satisfies the retrieval constraints (cap ``K``, token budget, no repeats),
  is non-empty, and is deduplicated by members; sets already executed with the window's draft seed are
  left out (their labels exist).
* **comparison family** — the local choices the edits expose: each neighbour against its base
  (direction ``h = φ(X) − φ(B)``, margin ``μ = G(X) − G(B)``); against ``B = ∅`` this is a stopping
  comparison with reference margin 0 (``φ(∅) = 0``, ``G(∅) = 0``). Each unordered pair once, one
  orientation (EVSI is orientation-free).
* **beliefs** — ``φ`` = the scorer's penultimate features; ``Σ`` = the posterior covariance of a Bayesian
  linear regression of the residuals ``y − G`` on ``φ`` over all labels (:func:`cfjax.kernels.blr_posterior`;
  SPEC §2.3, our choice); the probes of one task share its no-memory reference (``group`` = the task's
  reference execution), so they share ``ν_0²`` in ``Ω_Q``.

Shapes are fixed per run (``max_pool`` candidates, ``max_comparisons`` comparisons). A larger window is
cut down (the totals recorded in :class:`Window`) uniformly (``prune = "uniform"``, the default) or by
the comparison bound (``"bound"``, App. B.2; :func:`prune_by_bound`). :func:`acquire` draws up to ``B_p`` probes with the
configured strategy: EVSI (``p_t(q) ∝ exp(V_t(q)/τ_evsi)``, sequential rank-one conditioning,
:func:`cfjax.kernels.make_acquire`), or the RQ4 baselines random, MC-STD and EIG
(:mod:`cfjax.kernels.probes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from cfjax.config.uplift import ProbingSection
from cfjax.infra.concurrency import ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.kernels.acquire import ARGMAX, SOFTMAX, AcquireInputs, make_acquire
from cfjax.kernels.evsi import blr_posterior
from cfjax.types import Task
from cfjax.uplift.core import Execution, Label, Labeler, Memory, set_key
from cfjax.uplift.retrieval import Candidates, Retriever
from cfjax.uplift.scorer import LabelStore, ScorerTrainer, pad_rows

__all__ = ["WindowTask", "Window", "neighbourhood", "build_window", "acquire", "posterior_cov", "label_many",
           "prune_by_bound"]


@dataclass
class WindowTask:
    """One processed task of the acquisition window."""

    cands: Candidates
    path: list[Memory]  # the retrieved set's members in the order they were added
    seed: int  # the draft seed of its retrieved execution (probes pair with the same reference)
    ref_id: int  # that reference execution's id (the shared-noise group)
    executed: set = field(default_factory=set)  # set keys already executed with ``seed``


@dataclass
class Window:
    """One acquisition problem, packed."""

    tasks: list[WindowTask]
    sets: list[tuple[int, tuple[Memory, ...]]]  # probe candidates: (window task index, members)
    comparisons: list[tuple[int, tuple[str, ...], tuple[str, ...]]]  # (task, set X, base B)
    inputs: AcquireInputs | None
    n_pool_total: int = 0  # candidates before sampling down to max_pool
    n_comp_total: int = 0


def _feasible(members: Sequence[Memory], k: int, budget: float) -> bool:
    return 0 < len(members) <= k and sum(m.tokens for m in members) <= budget and \
        len({m.mem_id for m in members}) == len(members)


def neighbourhood(base: Sequence[Memory], pool: Sequence[Memory], *, k: int, budget: float
                  ) -> list[tuple[Memory, ...]]:
    """App. B.2 one-memory edits of ``base`` (the base itself, removals, additions, replacements; with
    ``m'`` from ``pool``), feasible and non-empty, deduplicated by members, in a deterministic order."""
    base = list(base)
    out: dict[tuple[str, ...], tuple[Memory, ...]] = {}

    def put(ms: Sequence[Memory]) -> None:
        if _feasible(ms, k, budget):
            out.setdefault(set_key(ms), tuple(ms))

    put(base)
    ids = {m.mem_id for m in base}
    others = [m for m in pool if m.mem_id not in ids]
    for i in range(len(base)):
        put(base[:i] + base[i + 1:])
    for m2 in others:
        put(base + [m2])
    for i in range(len(base)):
        for m2 in others:
            put(base[:i] + [m2] + base[i + 1:])
    return list(out.values())


def posterior_cov(trainer: ScorerTrainer, labels: LabelStore, cfg: ProbingSection, *, with_mean: bool = False):
    """``Σ``: the BLR posterior covariance of ``y − G`` on ``φ`` over every label (SPEC §2.3); with
    ``with_mean`` also its posterior mean ``m`` (the residual correction ``φᵀm``): ``(m, Σ)``."""
    if len(labels) == 0:
        eye = np.eye(trainer.cfg.scorer.features, dtype=np.float32) / cfg.prior_precision
        return (np.zeros(eye.shape[0], np.float32), eye) if with_mean else eye
    ctx, rows, mask, y = labels.arrays()
    phi = trainer.features(ctx, rows, mask)
    G = trainer.scores(ctx, rows, mask)
    n, b = len(y), pad_rows(len(y))  # padded rows are masked out of the regression (one compile per size class)
    x = np.zeros((b, phi.shape[1]), np.float32)
    r = np.zeros((b,), np.float32)
    x[:n], r[:n] = phi, y - G
    mean, cov = _blr(jnp.asarray(x), jnp.asarray(r), jnp.asarray(np.arange(b) < n), cfg.prior_precision,
                     cfg.blr_noise_var)
    return (np.asarray(mean), np.asarray(cov)) if with_mean else np.asarray(cov)


@jax.jit
def _blr(x, y, mask, lam, nu2):
    return blr_posterior(x, y, mask, prior_precision=lam, noise_var=nu2)


def build_window(tasks: Sequence[WindowTask], retriever: Retriever, labels: LabelStore, cfg: ProbingSection,
                 rng: np.random.Generator) -> Window:
    """The window's probe pool, comparison family and acquisition inputs (module docstring)."""
    k, budget = retriever.k, retriever.budget
    sets: list[tuple[int, tuple[Memory, ...]]] = []
    seen: set = set()
    comps: dict[tuple, tuple[int, tuple[str, ...], tuple[str, ...]]] = {}
    by_key: dict[tuple, tuple[int, tuple[Memory, ...]]] = {}
    for ti, wt in enumerate(tasks):
        top = wt.cands.memories[:cfg.probe_candidates]
        prefixes = [wt.path[:j] for j in range(len(wt.path) + 1)]
        for base in prefixes:
            bkey = set_key(base)
            if base:
                by_key.setdefault((ti, bkey), (ti, tuple(base)))
            for nb in neighbourhood(base, top, k=k, budget=budget):
                nkey = set_key(nb)
                by_key.setdefault((ti, nkey), (ti, nb))
                if nkey not in wt.executed and (ti, nkey) not in seen:
                    seen.add((ti, nkey))
                    sets.append((ti, nb))
                if nkey != bkey:
                    pair = (ti,) + tuple(sorted([nkey, bkey]))
                    comps.setdefault(pair, (ti, nkey, bkey))
    n_pool, n_comp = len(sets), len(comps)
    comp_list = list(comps.values())
    bound = cfg.prune == "bound" and (len(sets) > cfg.max_pool or len(comp_list) > cfg.max_comparisons)
    if not bound:
        if len(sets) > cfg.max_pool:
            sets = [sets[i] for i in sorted(rng.choice(len(sets), cfg.max_pool, replace=False))]
        if len(comp_list) > cfg.max_comparisons:
            comp_list = [comp_list[i] for i in sorted(rng.choice(len(comp_list), cfg.max_comparisons, replace=False))]
    win = Window(list(tasks), sets, comp_list, None, n_pool, n_comp)
    if not sets:
        return win

    trainer = retriever.trainer
    # φ and G of every set the window mentions (probe candidates and comparison endpoints)
    need: dict[tuple, int] = {}
    order: list[tuple[int, tuple[Memory, ...]]] = []
    for ti, ms in sets:
        need[(ti, set_key(ms))] = len(order)
        order.append((ti, ms))
    for ti, x, b in comp_list:
        for key in (x, b):
            if key and (ti, key) not in need:
                need[(ti, key)] = len(order)
                order.append(by_key[(ti, key)])
    arrs = [retriever.set_rows(tasks[ti].cands.task, ms) for ti, ms in order]
    ctx = np.stack([a[0] for a in arrs])
    rows = np.stack([a[1] for a in arrs])
    mask = np.stack([a[2] for a in arrs])
    phi = trainer.features(ctx, rows, mask)
    G = trainer.scores(ctx, rows, mask)
    F = phi.shape[1]

    def feat(ti: int, key: tuple) -> tuple[np.ndarray, float]:
        if not key:
            return np.zeros((F,), np.float32), 0.0
        i = need[(ti, key)]
        return phi[i], float(G[i])

    if cfg.posterior_mean:
        post_mean, cov = posterior_cov(trainer, labels, cfg, with_mean=True)
    else:
        post_mean, cov = None, posterior_cov(trainer, labels, cfg)
    if bound:  # B.2: keep the comparisons (and the probes they inform) with the largest prior bound
        h = np.stack([feat(ti, x)[0] - feat(ti, b)[0] for ti, x, b in comp_list]) if comp_list \
            else np.zeros((0, F), np.float32)
        sigma = np.sqrt(np.maximum(np.einsum("jf,fg,jg->j", h, cov, h), 0.0))
        keys = [(ti, set_key(ms)) for ti, ms in sets]
        keep_q, keep_j = prune_by_bound(keys, [((ti, x), (ti, b)) for ti, x, b in comp_list], sigma,
                                        cfg.max_pool, cfg.max_comparisons)
        sets, comp_list = [sets[q] for q in keep_q], [comp_list[j] for j in keep_j]
        win.sets, win.comparisons = sets, comp_list

    N, J = cfg.max_pool, cfg.max_comparisons
    features = np.zeros((N, F), np.float32)
    cand_mask = np.zeros((N,), bool)
    group = np.full((N,), -1, np.int32)
    for q, (ti, ms) in enumerate(sets):
        features[q] = feat(ti, set_key(ms))[0]
        cand_mask[q] = True
        group[q] = tasks[ti].ref_id
    directions = np.zeros((J, F), np.float32)
    means = np.zeros((J,), np.float32)
    comp_mask = np.zeros((J,), bool)
    for j, (ti, x, b) in enumerate(comp_list):
        fx, gx = feat(ti, x)
        fb, gb = feat(ti, b)
        directions[j], means[j], comp_mask[j] = fx - fb, gx - gb, True
        if post_mean is not None:  # μ = G-margin + the BLR's posterior residual hᵀm (beliefs agree with Σ)
            means[j] += float(directions[j] @ post_mean)
    win.inputs = AcquireInputs(
        features=jnp.asarray(features), cand_mask=jnp.asarray(cand_mask),
        noise_var=jnp.full((N,), cfg.noise_var, jnp.float32), group=jnp.asarray(_dense_groups(group)),
        directions=jnp.asarray(directions), means=jnp.asarray(means), comp_mask=jnp.asarray(comp_mask),
        prior_cov=jnp.asarray(cov, jnp.float32), ref_noise_var=jnp.float32(cfg.ref_noise_var),
        tau=jnp.float32(cfg.tau_evsi), mode=jnp.int32(SOFTMAX if cfg.mode == "softmax" else ARGMAX))
    return win


def prune_by_bound(probes: Sequence[tuple], comparisons: Sequence[tuple[tuple, tuple]], sigma: np.ndarray,
                   max_pool: int, max_comparisons: int) -> tuple[list[int], list[int]]:
    """Which probes and comparisons a window over its caps keeps (App. B.2): the ``max_comparisons``
    comparisons with the largest bound ``sigma[j]`` (ties: the earlier one), then the ``max_pool``
    probes whose largest ``sigma`` over the comparisons they are an endpoint of is largest (a probe in
    no comparison has bound 0; ties: the earlier one). Both index lists come back in the original order.

    Args:
      probes: a key per probe candidate.
      comparisons: ``(key of X, key of B)`` per comparison.
      sigma: ``f[J]`` prior standard deviation of each comparison's margin, ``sqrt(hᵀ Σ h)``.
    """
    sigma = np.asarray(sigma, float)
    order = sorted(range(len(comparisons)), key=lambda j: (-sigma[j], j))
    keep_j = sorted(order[:max_comparisons])
    best: dict = {}
    for j, (x, b) in enumerate(comparisons):
        for key in (x, b):
            best[key] = max(best.get(key, 0.0), float(sigma[j]))
    order_q = sorted(range(len(probes)), key=lambda q: (-best.get(probes[q], 0.0), q))
    return sorted(order_q[:max_pool]), keep_j


def _dense_groups(group: np.ndarray) -> np.ndarray:
    """Reference ids → 0..G−1 (``-1`` stays ``-1``)."""
    out = np.full_like(group, -1)
    ids: dict[int, int] = {}
    for i, g in enumerate(group):
        if g >= 0:
            out[i] = ids.setdefault(int(g), len(ids))
    return out


@lru_cache(maxsize=None)
def _acquirer(strategy: str, budget: int):
    if strategy == "evsi":
        fn = make_acquire(budget=budget)
    else:
        from cfjax.kernels import probes

        fn = {"random": probes.make_acquire_random, "mcstd": probes.make_acquire_mcstd,
              "eig": probes.make_acquire_eig}[strategy](budget=budget)
    return jax.jit(fn)


def acquire(window: Window, cfg: ProbingSection, key: jax.Array, *, budget: int | None = None,
            strategy: str | None = None) -> list[tuple[int, tuple[Memory, ...]]]:
    """Up to ``budget`` (default ``B_p``) probes of the window, in selection order."""
    b = cfg.budget if budget is None else budget
    if window.inputs is None or b <= 0:
        return []
    res = _acquirer(strategy or cfg.strategy, int(b))(key, window.inputs)
    sel = [int(q) for q in np.asarray(res.selected) if q >= 0]
    return [window.sets[q] for q in sel if q < len(window.sets)]


def task_of(window: Window, ti: int) -> Task:
    return window.tasks[ti].cands.task


# --------------------------------------------------------------------------- executing the probes


class _Prepared:
    """A :class:`~cfjax.uplift.core.SetExecutor` that hands out executions already run (each with the
    private ledger it charged, merged into the caller's ledger when handed out)."""

    def __init__(self, runs: dict[tuple[str, tuple[str, ...], int], tuple[Execution, Ledger]]) -> None:
        self.runs = runs

    def execute(self, task: Task, memories: Sequence[Memory], *, seed: int, ledger: Ledger) -> Execution:
        key = (task.task_id, set_key(memories), int(seed))
        got = self.runs.pop(key, None)
        if got is None:  # a bug in label_many's plan, never a user error
            raise RuntimeError(f"execution {key} was not prepared")
        ledger.merge(got[1])
        return got[0]


def label_many(labeler: Labeler, items: Sequence[tuple[Task, Sequence[Memory], int]], *, kind: str,
               threads: int = 1) -> list[tuple[Label, Execution]]:
    """``[labeler.label(task, members, seed=seed, kind=kind) for task, members, seed in items]``, with the
    executions run on up to ``threads`` threads.

    Identical to the serial loop, whatever the completion order: the executions the serial loop
    would run (the no-memory reference and the set of each item, those not yet in the execution log,
    each once) are run concurrently, each charging a private ledger; then the labels are made
    serially in item order, each execution entering the log and merging its ledger exactly where
    the serial loop would have run it (so the log's ids and purposes, the reuse counts and the ledger
    come out the same). Every draw of an execution is keyed by its (task, set, draft seed), so running
    it on another thread does not change it. The executor must be safe to call from several threads
    (the agent loop over a thread-safe backbone and world is; a real LLM client bounds its own
    requests in flight)."""
    if threads <= 1 or len(items) <= 1:
        return [labeler.label(task, list(ms), seed=int(seed), kind=kind) for task, ms, seed in items]
    todo: dict[tuple[str, tuple[str, ...], int], tuple[Task, tuple[Memory, ...], int]] = {}
    for task, ms, seed in items:
        for mems in ((), tuple(ms)):
            key = (task.task_id, set_key(mems), int(seed))
            if labeler.log.get(key) is None and key not in todo:
                todo[key] = (task, mems, int(seed))

    def run(item: tuple[Task, tuple[Memory, ...], int]) -> tuple[Execution, Ledger]:
        task, mems, seed = item
        own = Ledger(labeler.ledger.phase)
        return labeler.executor.execute(task, list(mems), seed=seed, ledger=own), own

    prepared = _Prepared(dict(zip(todo, ordered_map(run, list(todo.values()), threads))))
    replay = Labeler(prepared, labeler.spec, labeler.ledger, labeler.log)
    out = [replay.label(task, list(ms), seed=int(seed), kind=kind) for task, ms, seed in items]
    if prepared.runs:  # pragma: no cover - the plan above mirrors Labeler.run exactly
        raise RuntimeError(f"{len(prepared.runs)} prepared execution(s) were not used")
    return out

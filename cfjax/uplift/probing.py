"""Decision-aware probing: probe pools, comparison families, and batch acquisition.

papers/upliftmem.md §4.3 (Eq. 9–12), App. A.4 (Gaussian beliefs, shared reference noise), A.7 (batch
acquisition), B.2 (probe batch construction); SPEC.md §2.3.

For each task of the preceding acquisition window, retrieval supplied a path (its additions in order)
and the recalled pool ``C(c)``. :func:`build_window`:

* **probe pool** — for the final set ``S`` *and each of its retrieval prefixes* ``S_0 = ∅ … S_L``
  (App. B.2 "the edit operator is also defined on retrieval prefixes"): the set itself, removals
  ``B∖{m}``, additions ``B ∪ {m'}`` and replacements ``(B∖{m}) ∪ {m'}``; ``m'`` ranges over all of
  ``C(c)`` (``probe_candidates = 0``, B.2) or its ``probe_candidates`` most similar memories (the
  default 8, ours). Every candidate satisfies the retrieval constraints (cap ``K``, token budget, no
  repeats), is non-empty, and is deduplicated by members; sets already executed with the window's draft
  seed are left out (their labels exist).
* **comparison family** (``ProbingSection.family``) — ``"local"``: each neighbour against its base
  (direction ``h = φ(X) − φ(B)``, margin ``μ = G(X) − G(B)``; against ``B = ∅`` a stopping comparison
  with reference margin 0, ``φ(∅) = 0``, ``G(∅) = 0``). ``"siblings"``: those plus B.2's "replacements
  of a shared base": the continuations of one base (its additions; the replacements of one member of
  ``B``, which share ``B∖{m}``) each against the group's predicted-best continuation (one incumbent per
  group, as A.6 advises against duplicate comparisons). ``"finite"``: A.6's finite family — per task,
  every set of its neighbourhood (∅ and the prefixes included) once against the task's predicted-best
  set. Each unordered pair once, one orientation (EVSI is orientation-free).
* **beliefs** (:func:`beliefs`) — ``φ`` = the scorer's penultimate features; ``G`` calibrated to utility
  units by a fitted scale ``a`` (``calibration = "scale"``; else ``a = 1``); ``Σ`` (and ``m``) = the
  posterior of a Bayesian linear regression of the residuals ``y − a·G`` on ``φ`` over all labels
  (:func:`cfjax.kernels.blr_posterior`; SPEC §2.3, our choice); ``μ_j = a·(G(X) − G(B))`` plus
  ``h_jᵀm`` with ``posterior_mean``. Noise (``noise``): one fixed ``ν²`` or each label's own variance
  ``p(1 − p)`` at its prediction, ``+ ν_0²`` for the shared reference, in both Σ and Ω. The probes of
  one task share its no-memory reference (``group`` = the task's reference execution), so they share
  ``ν_0²`` in ``Ω_Q``.

Shapes are fixed per run (``max_pool`` candidates, ``max_comparisons`` comparisons). A larger window is
cut down (the totals recorded in :class:`Window`) uniformly (``prune = "uniform"``, the default) or by
the comparison bound (``"bound"``, App. B.2; :func:`prune_by_bound`). :func:`acquire` draws up to ``B_p`` probes with the
configured strategy: EVSI (``p_t(q) ∝ exp(V_t(q)/τ_evsi)``, or ``exp(V_t(q)/(J·τ_evsi))`` with
``normalize_values``; sequential rank-one conditioning,
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

__all__ = ["WindowTask", "Window", "Beliefs", "neighbourhood", "build_window", "acquire", "beliefs", "posterior_cov",
           "calibration_scale", "label_noise", "label_many", "prune_by_bound"]


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


@dataclass
class Beliefs:
    """The Gaussian beliefs of one window (App. A.4): ``Δ̂(X) = a·G(X) + φ(X)ᵀm``, ``Cov = φᵀΣφ``."""

    scale: float  # a: the calibration of G to utility units (1 without calibration)
    mean: np.ndarray  # f[F] m: the BLR posterior mean of the residuals y − a·G (used with posterior_mean)
    cov: np.ndarray  # f[F, F] Σ: their posterior covariance


def calibration_scale(G: np.ndarray, y: np.ndarray, cfg: ProbingSection) -> float:
    """``a`` of ``y ≈ a·G`` (``calibration = "scale"``): least squares through the origin (``G(∅) = Δ(∅) = 0``)
    with a ridge toward 1 of weight ``λ_a = calibration_prior``, ``a = (Σ G y + λ_a)/(Σ G² + λ_a)``, floored
    at 0; ``1.0`` with ``calibration = "none"``."""
    if cfg.calibration == "none":
        return 1.0
    G, y = np.asarray(G, np.float64), np.asarray(y, np.float64)
    lam = float(cfg.calibration_prior)
    return max(0.0, float((G @ y + lam) / (G @ G + lam)))


def label_noise(pred: np.ndarray, cfg: ProbingSection) -> np.ndarray:
    """``ν_q² = max(noise_floor, p(1 − p))``, ``p = min(1, |Δ̂_q|)``: the variance of a paired label with
    mean ``Δ̂_q`` under common random numbers (``noise = "bernoulli"``)."""
    p = np.minimum(1.0, np.abs(np.asarray(pred, np.float64)))
    return np.maximum(cfg.noise_floor, p * (1.0 - p)).astype(np.float32)


def beliefs(trainer: ScorerTrainer, labels: LabelStore, cfg: ProbingSection) -> Beliefs:
    """``a``, ``m`` and ``Σ`` from every label (module docstring): a Bayesian linear regression of the
    residuals ``y − a·G`` on ``φ`` (SPEC §2.3), with noise ``blr_noise_var`` (``noise = "fixed"``) or each
    label's own ``ν_i² + ν_0²`` (``"bernoulli"``, ν_i² at its prediction ``a·G_i``)."""
    F = trainer.cfg.scorer.features
    if len(labels) == 0:
        return Beliefs(1.0, np.zeros(F, np.float32), np.eye(F, dtype=np.float32) / cfg.prior_precision)
    ctx, rows, mask, y = labels.arrays()
    phi = trainer.features(ctx, rows, mask)
    G = trainer.scores(ctx, rows, mask)
    a = calibration_scale(G, y, cfg)
    n, b = len(y), pad_rows(len(y))  # padded rows are masked out of the regression (one compile per size class)
    x = np.zeros((b, phi.shape[1]), np.float32)
    r = np.zeros((b,), np.float32)
    x[:n] = phi
    r[:n] = y - G if a == 1.0 else y - np.float32(a) * G
    if cfg.noise == "fixed":
        nu2 = cfg.blr_noise_var
    else:
        nu2 = np.ones((b,), np.float32)
        nu2[:n] = label_noise(a * G, cfg) + np.float32(cfg.ref_noise_var)
        nu2 = jnp.asarray(nu2)
    mean, cov = _blr(jnp.asarray(x), jnp.asarray(r), jnp.asarray(np.arange(b) < n), cfg.prior_precision, nu2)
    return Beliefs(a, np.asarray(mean), np.asarray(cov))


def posterior_cov(trainer: ScorerTrainer, labels: LabelStore, cfg: ProbingSection, *, with_mean: bool = False):
    """``Σ`` of :func:`beliefs`; with ``with_mean`` also its posterior mean ``m``: ``(m, Σ)``."""
    bel = beliefs(trainer, labels, cfg)
    return (bel.mean, bel.cov) if with_mean else bel.cov


@jax.jit
def _blr(x, y, mask, lam, nu2):
    return blr_posterior(x, y, mask, prior_precision=lam, noise_var=nu2)


def _parent(nb: tuple[Memory, ...], base: Sequence[Memory]) -> tuple[str, ...] | None:
    """The shared base of a continuation: ``B`` for an addition ``B ∪ {m'}``, ``B∖{m}`` for a replacement;
    ``None`` for a removal (or the base itself)."""
    if len(nb) < len(base):
        return None
    ids = {m.mem_id for m in nb}
    common = [m for m in base if m.mem_id in ids]
    if len(common) != len(nb) - 1:
        return None
    return set_key(common)


def build_window(tasks: Sequence[WindowTask], retriever: Retriever, labels: LabelStore, cfg: ProbingSection,
                 rng: np.random.Generator) -> Window:
    """The window's probe pool, comparison family and acquisition inputs (module docstring)."""
    k, budget = retriever.k, retriever.budget
    sets: list[tuple[int, tuple[Memory, ...]]] = []
    seen: set = set()
    comps: dict[tuple, tuple[int, tuple[str, ...], tuple[str, ...]]] = {}
    by_key: dict[tuple, tuple[int, tuple[Memory, ...]]] = {}
    groups: dict[tuple, list[tuple[str, ...]]] = {}  # (task, shared base) → its continuations (siblings)
    first_ti: dict[str, int] = {}  # task id → its first window entry (the entry its family is scored on)
    for ti, wt in enumerate(tasks):
        tid = wt.cands.task.task_id
        fti = first_ti.setdefault(tid, ti)
        top = wt.cands.memories if cfg.probe_candidates == 0 else wt.cands.memories[:cfg.probe_candidates]
        prefixes = [wt.path[:j] for j in range(len(wt.path) + 1)]
        for base in prefixes:
            bkey = set_key(base)
            if base:
                by_key.setdefault((ti, bkey), (ti, tuple(base)))
                by_key.setdefault((fti, bkey), (fti, tuple(base)))  # a family is scored on its task's first entry
            for nb in neighbourhood(base, top, k=k, budget=budget):
                nkey = set_key(nb)
                by_key.setdefault((ti, nkey), (ti, nb))
                by_key.setdefault((fti, nkey), (fti, nb))  # (a task twice in a window: its later entries' sets too)
                if nkey not in wt.executed and (ti, nkey) not in seen:
                    seen.add((ti, nkey))
                    sets.append((ti, nb))
                if nkey == bkey or cfg.family == "finite":
                    continue
                pair = (tid,) + tuple(sorted([nkey, bkey]))  # by task: a task twice in a window is one decision
                comps.setdefault(pair, (ti, nkey, bkey))
                parent = _parent(nb, base) if cfg.family == "siblings" else None
                if parent is not None:
                    sib = groups.setdefault((tid, parent), [])
                    if nkey not in sib:
                        sib.append(nkey)

    trainer = retriever.trainer
    bel = beliefs(trainer, labels, cfg)
    F = bel.cov.shape[0]
    scored: dict[tuple, tuple[np.ndarray, float]] = {}  # (task, set key) → (φ, G)

    def score(items: Sequence[tuple[int, tuple[Memory, ...]]]) -> None:
        items = [it for it in items if (it[0], set_key(it[1])) not in scored]
        if not items:
            return
        arrs = [retriever.set_rows(tasks[ti].cands.task, ms) for ti, ms in items]
        ctx = np.stack([a[0] for a in arrs])
        rows = np.stack([a[1] for a in arrs])
        mask = np.stack([a[2] for a in arrs])
        phi, G = trainer.features(ctx, rows, mask), trainer.scores(ctx, rows, mask)
        for i, (ti, ms) in enumerate(items):
            scored[(ti, set_key(ms))] = (phi[i], float(G[i]))

    def feat(ti: int, key: tuple) -> tuple[np.ndarray, float]:
        return (np.zeros((F,), np.float32), 0.0) if not key else scored[(ti, key)]

    def predicted(ti: int, key: tuple) -> float:  # Δ̂ = a·G (+ φᵀm): what the incumbent of a family maximises
        f, g = feat(ti, key)
        return bel.scale * g + (float(f @ bel.mean) if cfg.posterior_mean else 0.0)

    if cfg.family != "local":  # the incumbents need every set's prediction first
        score(list(by_key.values()))
        if cfg.family == "siblings":
            for (tid, _), sib in groups.items():
                ti = first_ti[tid]
                if len(sib) > 1:
                    inc = max(sib, key=lambda key: predicted(ti, key))  # first of equal predictions
                    for key in sib:
                        if key != inc:
                            comps.setdefault((tid,) + tuple(sorted([key, inc])), (ti, key, inc))
        else:  # A.6: every set of a task's family (∅ included) once against the task's predicted best
            per_task: dict[str, list[tuple[str, ...]]] = {}
            for ti, key in by_key:
                tid = tasks[ti].cands.task.task_id
                keys = per_task.setdefault(tid, [()])
                if key not in keys:
                    keys.append(key)
            for tid, keys in per_task.items():
                ti = first_ti[tid]
                inc = max(keys, key=lambda key: predicted(ti, key))
                for key in keys:
                    if key != inc:
                        comps.setdefault((tid,) + tuple(sorted([key, inc])), (ti, key, inc))

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

    # φ and G of every set the window mentions (probe candidates, then comparison endpoints)
    order = list(sets)
    for ti, x, b in comp_list:
        order.extend(by_key[(ti, key)] for key in (x, b) if key)
    score(list({(ti, set_key(ms)): (ti, ms) for ti, ms in order}.values()))

    cov = bel.cov
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
    noise = np.full((N,), cfg.noise_var, np.float32)
    for q, (ti, ms) in enumerate(sets):
        key = set_key(ms)
        features[q] = feat(ti, key)[0]
        cand_mask[q] = True
        group[q] = tasks[ti].ref_id
        if cfg.noise == "bernoulli":
            noise[q] = label_noise(np.array([predicted(ti, key)]), cfg)[0]
    directions = np.zeros((J, F), np.float32)
    means = np.zeros((J,), np.float32)
    comp_mask = np.zeros((J,), bool)
    for j, (ti, x, b) in enumerate(comp_list):
        fx, gx = feat(ti, x)
        fb, gb = feat(ti, b)
        directions[j], means[j], comp_mask[j] = fx - fb, gx - gb, True
        if bel.scale != 1.0:  # μ in utility units: the calibrated margin a·(G(X) − G(B))
            means[j] = np.float32(bel.scale) * (gx - gb)
        if cfg.posterior_mean:  # μ += hᵀm, the BLR's posterior residual (beliefs agree with Σ)
            means[j] += float(directions[j] @ bel.mean)
    tau = cfg.tau_evsi * (max(1, len(comp_list)) if cfg.normalize_values else 1)  # V/J in the softmax
    win.inputs = AcquireInputs(
        features=jnp.asarray(features), cand_mask=jnp.asarray(cand_mask),
        noise_var=jnp.asarray(noise), group=jnp.asarray(_dense_groups(group)),
        directions=jnp.asarray(directions), means=jnp.asarray(means), comp_mask=jnp.asarray(comp_mask),
        prior_cov=jnp.asarray(cov, jnp.float32), ref_noise_var=jnp.float32(cfg.ref_noise_var),
        tau=jnp.float32(tau), mode=jnp.int32(SOFTMAX if cfg.mode == "softmax" else ARGMAX))
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

"""A synthetic set-uplift domain whose true set values are known (tests and probing studies).

UpliftMem (papers/upliftmem.md §3–4; SPEC.md §2) learns ``G_θ(c, S) ≈ Δ(c, S)`` from paired labels.
On the end-to-end suites ``Δ`` is unknown; here it is a closed form, so a trained scorer's *ranking*
of sets can be checked against the truth, and probe acquisition strategies compared on it.

**Domain** (:class:`SyntheticSpec`; every number fixed here, before any measurement, and not tuned
toward a result). ``n_tasks`` tasks; each has its own store of eight memories of four kinds
(``KINDS``, the same layout for every task):

* two ``helpful`` memories, ``a_m ~ U(0.08, 0.20)``;
* two ``harmful`` memories, ``a_m ~ U(−0.20, −0.08)``;
* two ``pair`` memories (complementary): ``a_m = −0.06`` each alone, ``+0.30`` bonus when both are
  in the set (the pair is worth ``+0.18``);
* two ``clash`` memories (conflicting): ``a_m ~ U(0.05, 0.12)`` each alone, ``−0.25`` penalty when
  both are in the set.

The raw uplift is ``Δ_raw(c, S) = Σ_{m∈S} a_m + 0.30·[both pair ∈ S] − 0.25·[both clash ∈ S]``; a
memory outside ``c``'s store has no effect. The task's no-memory success probability is
``base_c ~ U(0.35, 0.65)``, the set's ``p_S = clip(base_c + Δ_raw, 0, 1)``, and the **true uplift**
is ``Δ(c, S) = p_S − base_c`` (the clip is part of the truth).

**Executor** (:class:`SyntheticExecutor`, a :class:`~cfjax.uplift.core.SetExecutor`). ``R`` is
Bernoulli: ``R_S = 1[u < p_S]`` with **one common uniform** ``u = u(spec.seed, task, draft seed)``
(a hash, no state). The no-memory run and every memory run of the same (task, draft seed) read the
same ``u`` — the common random numbers of Eq. 4's pairing, applied to the no-memory part of the
outcome: ``y_S = 1[u < p_S] − 1[u < base_c]`` has mean exactly ``Δ(c, S)`` and variance
``|Δ|(1 − |Δ|)``, and two labels sharing a reference are comonotone (the shared reference noise that
``ν_0²`` of ``Ω_Q`` models, App. A.4). The cost is one evaluated attempt (one evaluator call,
charged to the ledger); the utility is ``synthetic`` (``γ = 0``: ``U = R``).

**Texts.** A task's question names its two topic words (pseudo-words). A memory's text carries its
kind word (``helpful``, ``harmful``, ``pairA``, ``clashB`` — the only cue of its effect's sign, shared
by every task, so a scorer can generalise to held-out tasks), both topic words of its task (probability
½, else one of them), a topic word of another task (probability 0.3), and a unique word. Recall is the task's own store in cosine
order of the hashed embeddings (:meth:`SyntheticDomain.recall`), which is unrelated to the effects.

**Metrics** (:func:`ranking_metrics`): over tasks and *every* feasible set up to ``K`` (``∅``
included, ``G(c, ∅) = Δ(c, ∅) = 0``), the Kendall-style pairwise accuracy of ``G`` against ``Δ``
(pairs with ``|Δ_a − Δ_b| > 1e-9``; a tie in ``G`` counts ½) and the top-1 regret
``max_S Δ − Δ(argmax_S G)``.

**Probe curves** (:class:`ProbeStudy`, :func:`probe_curve`). Per seed: a fresh domain of 40 tasks
(16 build, 8 window, 16 held-out), ``K = 3`` (every store has 92 feasible non-empty sets), the config
:func:`synthetic_config`, and one warm-up checkpoint: bootstrap probing on the build tasks (2 random
sets each), 64 value-only warm-up steps, one sampled retrieval path with its label per window task.
Each curve restores that checkpoint (parameters, optimiser state, labels, log, ledger, random state,
acquisition key) and calls :meth:`~cfjax.uplift.pipeline.UpliftRun.probe_window` on the same window
tasks with budget increments — each event acquires, labels and makes one update of
``steps_per_update`` steps — recording the held-out ranking metrics after each event. Strategy
``"none"`` is the control: the same updates, no new label. The figures observed with this protocol
are in ``tests/uplift/test_synthetic.py``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import jax
import numpy as np

from cfjax.config.uplift import ProbingSection, RetrievalSection, TrainingSection, UpliftConfig
from cfjax.infra.ledger import Ledger
from cfjax.kernels.setscore import init_params
from cfjax.llm.prompts import count_tokens
from cfjax.types import Outcome, Task
from cfjax.uplift.core import Execution, ExecutionLog, Labeler, Memory, set_key
from cfjax.uplift.pipeline import TrainLog, UpliftRun
from cfjax.uplift.pool import MemoryPool
from cfjax.uplift.probing import WindowTask
from cfjax.uplift.scorer import Featurizer, LabelStore

__all__ = ["KINDS", "KIND_WORDS", "SyntheticSpec", "SyntheticDomain", "SyntheticExecutor", "synthetic_config",
           "feasible_sets", "set_ranking", "ranking_metrics", "local_family", "decision_metrics", "best_uplift",
           "ORACLES", "oracle_chooser", "attach_run", "ProbeStudy", "study", "probe_curve",
           "paired_bootstrap"]

#: the store layout of every task (eight memories)
KINDS = ("helpful", "helpful", "harmful", "harmful", "pair", "pair", "clash", "clash")
#: the word of each kind in a memory's text
KIND_WORDS = {"helpful": "helpful", "harmful": "harmful", "pair": "pairA", "clash": "clashB"}


@dataclass(frozen=True)
class SyntheticSpec:
    """The domain's constants (module docstring)."""

    n_tasks: int = 48
    seed: int = 0
    base: tuple[float, float] = (0.35, 0.65)
    helpful: tuple[float, float] = (0.08, 0.20)
    harmful: tuple[float, float] = (-0.20, -0.08)
    pair_single: float = -0.06
    pair_bonus: float = 0.30
    clash_single: tuple[float, float] = (0.05, 0.12)
    clash_penalty: float = 0.25
    kinds: tuple[str, ...] = KINDS


def _uniform(*parts: object) -> float:
    """A uniform in [0, 1) keyed by ``parts`` (blake2b; no state, identical across processes)."""
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2.0 ** 64


_CONS, _VOW = "bcdfghklmnprstvz", "aeiou"


def _word(rng: np.random.Generator, syllables: int = 3) -> str:
    return "".join(_CONS[rng.integers(len(_CONS))] + _VOW[rng.integers(len(_VOW))] for _ in range(syllables))


@dataclass
class SyntheticDomain:
    """Tasks, per-task stores, their true effects and the pool holding every memory (admitted)."""

    spec: SyntheticSpec
    embed_dim: int = 256
    tasks: list[Task] = field(init=False)
    stores: dict[str, list[Memory]] = field(init=False)
    effects: dict[str, dict[str, float]] = field(init=False)  # task → memory → a_m
    kind_of: dict[str, str] = field(init=False)  # memory → kind
    base: dict[str, float] = field(init=False)
    pool: MemoryPool = field(init=False)

    def __post_init__(self) -> None:
        s = self.spec
        rng = np.random.default_rng([s.seed, 20_240_917])
        self.pool = MemoryPool(self.embed_dim)
        self.tasks, self.stores, self.effects, self.kind_of, self.base = [], {}, {}, {}, {}
        topics = [(_word(rng), _word(rng)) for _ in range(s.n_tasks)]
        for i in range(s.n_tasks):
            ta, tb = topics[i]
            q = f"Task {i}: handle the {ta} request about {tb}."
            task = Task(f"synthetic/s{s.seed}/t{i:03d}", q, "synthetic", "", {"question": q}, domain="synthetic")
            self.tasks.append(task)
            self.base[task.task_id] = float(rng.uniform(*s.base))
            store, eff = [], {}
            for j, kind in enumerate(s.kinds):
                kw = KIND_WORDS[kind]
                words = [ta, tb] if rng.random() < 0.5 else [[ta, tb][rng.integers(2)]]
                if rng.random() < 0.3:
                    words.append(topics[int(rng.integers(s.n_tasks))][int(rng.integers(2))])
                text = f"{kw} note {_word(rng, 2)}: for {' '.join(words)} use the {kw} step."
                mem = Memory(f"s{s.seed}t{i}m{j}", text, count_tokens(text), task.task_id)
                self.pool.add(mem)
                store.append(mem)
                self.kind_of[mem.mem_id] = kind
                if kind == "helpful":
                    eff[mem.mem_id] = float(rng.uniform(*s.helpful))
                elif kind == "harmful":
                    eff[mem.mem_id] = float(rng.uniform(*s.harmful))
                elif kind == "pair":
                    eff[mem.mem_id] = float(s.pair_single)
                elif kind == "clash":
                    eff[mem.mem_id] = float(rng.uniform(*s.clash_single))
                else:
                    raise ValueError(f"unknown memory kind {kind!r}")
            self.stores[task.task_id] = store
            self.effects[task.task_id] = eff

    # ------------------------------------------------------------------ truth
    def raw_uplift(self, task: Task | str, members: Sequence[Memory] | Sequence[str]) -> float:
        tid = task.task_id if isinstance(task, Task) else task
        ids = set(set_key(members))
        eff = self.effects[tid]
        out = sum(eff.get(m, 0.0) for m in ids)
        for kind, bonus in (("pair", self.spec.pair_bonus), ("clash", -self.spec.clash_penalty)):
            both = [m for m in eff if self.kind_of[m] == kind]
            if both and all(m in ids for m in both):
                out += bonus
        return float(out)

    def p_success(self, task: Task | str, members) -> float:
        tid = task.task_id if isinstance(task, Task) else task
        return float(min(1.0, max(0.0, self.base[tid] + self.raw_uplift(tid, members))))

    def true_uplift(self, task: Task | str, members) -> float:
        """``Δ(c, S) = p_S − base_c`` (exactly the mean of a paired label)."""
        tid = task.task_id if isinstance(task, Task) else task
        return self.p_success(tid, members) - self.base[tid] if members else 0.0

    # ------------------------------------------------------------------ retrieval side
    def recall(self, task: Task) -> tuple[list[Memory], np.ndarray]:
        """The task's store in cosine order of the hashed embeddings (ties: store order)."""
        store = self.stores[task.task_id]
        q = self.pool.embed_task(task)
        sims = np.array([float(np.dot(self.pool.embedding(m.mem_id), q)) for m in store], np.float32)
        order = sorted(range(len(store)), key=lambda i: (-sims[i], i))
        return [store[i] for i in order], sims[order]


class SyntheticExecutor:
    """``R_S = 1[u(seed, task, draft seed) < p_S]`` (module docstring); one evaluator call each."""

    def __init__(self, domain: SyntheticDomain) -> None:
        self.domain = domain
        self.calls = 0

    def execute(self, task: Task, memories: Sequence[Memory], *, seed: int, ledger: Ledger) -> Execution:
        self.calls += 1
        u = _uniform("synthetic", self.domain.spec.seed, task.task_id, int(seed))
        R = float(u < self.domain.p_success(task, list(memories)))
        ledger.evaluation(task.task_id, Outcome(R, R >= 1.0, True, ""))
        return Execution(R=R, solved=R >= 1.0, attempts=1, memory_tokens=sum(m.tokens for m in memories),
                         eval_calls=1)


def synthetic_config(**training) -> UpliftConfig:
    """The run configuration of the synthetic studies (fixed before measuring; small shapes)."""
    tr = dict(epochs=1, bootstrap_sets=2, warmup_steps=64, update_every=8, steps_per_update=8, minibatch_tasks=16,
              labels_per_task=8, write=False, seed=0)  # the run's seed: see attach_run
    tr.update(training)
    return UpliftConfig(retrieval=RetrievalSection(recall=len(KINDS)),
                        training=TrainingSection(**tr),
                        probing=ProbingSection(budget=8, max_pool=256, max_comparisons=512))


def feasible_sets(memories: Sequence[Memory], k: int, budget: float) -> list[tuple[Memory, ...]]:
    """Every feasible set of ``memories`` with 1..``k`` members (combinations, recall order)."""
    out = []
    for r in range(1, k + 1):
        for c in itertools.combinations(memories, r):
            if sum(m.tokens for m in c) <= budget:
                out.append(c)
    return out


def set_ranking(G: np.ndarray, D: np.ndarray) -> tuple[float, float, float]:
    """One task's ``(pairwise accuracy, top-1 regret, top-1 hit)`` of scores ``G`` against true uplifts
    ``D`` over the same sets (module docstring: pairs with ``|D_a − D_b| > 1e-9``, a ``G`` tie counts ½;
    the argmax of ``G`` takes the first of equal scores)."""
    G, D = np.asarray(G, float), np.asarray(D, float)
    iu = np.triu_indices(len(D), 1)
    dD = (D[:, None] - D[None, :])[iu]
    dG = (G[:, None] - G[None, :])[iu]
    keep = np.abs(dD) > 1e-9
    score = np.where(dG * dD > 0, 1.0, np.where(dG == 0, 0.5, 0.0))
    acc = float(score[keep].mean()) if keep.any() else 1.0
    best = int(np.argmax(G))
    return acc, float(D.max() - D[best]), float(D[best] >= D.max() - 1e-9)


def ranking_metrics(run: UpliftRun, domain: SyntheticDomain, tasks: Sequence[Task]) -> dict[str, float]:
    """Pairwise accuracy of ``G`` vs ``Δ`` and top-1 regret over every feasible set up to ``K`` and ``∅``
    (module docstring), averaged over ``tasks``."""
    rows = []
    for t in tasks:
        cands = run.retriever.candidates(t)
        sets = feasible_sets(cands.memories, run.k_max, run.retriever.budget)
        arrs = [run.retriever.set_rows(t, list(s)) for s in sets]
        G = np.concatenate([[0.0], run.trainer.scores(np.stack([a[0] for a in arrs]), np.stack([a[1] for a in arrs]),
                                                      np.stack([a[2] for a in arrs]))])
        D = np.array([0.0] + [domain.true_uplift(t, s) for s in sets])
        rows.append(set_ranking(G, D))
    acc, regret, top1 = np.mean(rows, axis=0)
    return {"pairwise": float(acc), "regret": float(regret), "top1": float(top1)}


def local_family(run: UpliftRun, window: Sequence[WindowTask]) -> list[tuple[Task, tuple[Memory, ...], tuple[Memory, ...]]]:
    """The local decisions of the probed tasks, fixed once (the decision metric's comparisons): each one-memory
    edit of each retrieval prefix of a window task's path (m' over all of ``C(c)``) against that prefix
    (App. B.2's neighbourhood, :func:`cfjax.uplift.probing.neighbourhood`), each unordered pair once."""
    from cfjax.uplift.probing import neighbourhood

    out, seen = [], set()
    for wt in window:
        t = wt.cands.task
        for j in range(len(wt.path) + 1):
            base = tuple(wt.path[:j])
            for nb in neighbourhood(base, wt.cands.memories, k=run.k_max, budget=run.retriever.budget):
                key = (t.task_id,) + tuple(sorted([set_key(nb), set_key(base)]))
                if set_key(nb) != set_key(base) and key not in seen:
                    seen.add(key)
                    out.append((t, nb, base))
    return out


def _scores_of(run: UpliftRun, items: Sequence[tuple[Task, Sequence[Memory]]]) -> np.ndarray:
    """``G`` of each (task, set) (``G(∅) = 0``), one batch."""
    out = np.zeros(len(items), np.float64)
    idx = [i for i, (_, ms) in enumerate(items) if ms]
    if idx:
        arrs = [run.retriever.set_rows(items[i][0], list(items[i][1])) for i in idx]
        out[idx] = run.trainer.scores(np.stack([a[0] for a in arrs]), np.stack([a[1] for a in arrs]),
                                      np.stack([a[2] for a in arrs]))
    return out


def decision_metrics(run: UpliftRun, domain: SyntheticDomain, tasks: Sequence[Task],
                     comparisons: Sequence[tuple[Task, tuple[Memory, ...], tuple[Memory, ...]]],
                     best: dict[str, float]) -> dict[str, float]:
    """The decisions probes serve, on the probed tasks: ``regret`` — the beam-choice regret
    ``max_S Δ(c, S) − Δ(c, beam(c))`` (``best``: the task's ``max_S Δ`` over every feasible set and ∅),
    averaged over ``tasks``; ``local`` — the fraction of ``comparisons`` whose sign of ``G(X) − G(B)``
    matches the sign of ``Δ(X) − Δ(B)`` (pairs with ``|ΔX − ΔB| > 1e-9``; a ``G`` tie counts ½)."""
    cands = [run.retriever.candidates(t) for t in tasks]
    chosen = run.retriever.beam(cands)
    regret = float(np.mean([best[t.task_id] - domain.true_uplift(t, s) for t, (s, _) in zip(tasks, chosen)]))
    gx = _scores_of(run, [(t, x) for t, x, _ in comparisons])
    gb = _scores_of(run, [(t, b) for t, _, b in comparisons])
    dd = np.array([domain.true_uplift(t, x) - domain.true_uplift(t, b) for t, x, b in comparisons])
    keep = np.abs(dd) > 1e-9
    dg = gx - gb
    score = np.where(dg * dd > 0, 1.0, np.where(dg == 0, 0.5, 0.0))
    return {"regret": regret, "local": float(score[keep].mean()) if keep.any() else 1.0}


def best_uplift(run: UpliftRun, domain: SyntheticDomain, t: Task) -> float:
    """``max_S Δ(c, S)`` over every feasible set of the recall up to ``K`` and ∅ (the true best beam choice)."""
    cands = run.retriever.candidates(t)
    return max([0.0] + [domain.true_uplift(t, s) for s in feasible_sets(cands.memories, run.k_max,
                                                                         run.retriever.budget)])


#: probe-choice oracles (analysis only: they read the true Δ; never an agent-side rule)
ORACLES = ("oracle_var", "oracle_err", "oracle_gain")


def oracle_chooser(kind: str, run: UpliftRun, domain: SyntheticDomain):
    """``choose(window, budget)`` of :meth:`UpliftRun.probe_window` for an oracle: the ``budget`` pool
    candidates with the largest true label variance ``|Δ|(1 − |Δ|)`` (``"oracle_var"``), the largest
    error of the calibrated scorer ``|a·G − Δ|`` (``"oracle_err"``, ``a`` the fitted scale of
    :func:`cfjax.uplift.probing.calibration_scale` over the labels so far), or the largest true gain of
    the decision were it to choose the candidate, ``Δ(q) − Δ(beam choice of q's task)``
    (``"oracle_gain"``); ties: the earlier one."""
    from cfjax.uplift.probing import calibration_scale

    if kind not in ORACLES:
        raise ValueError(f"unknown oracle {kind!r} (one of {ORACLES})")

    def choose(win, budget: int):
        items = [(win.tasks[ti].cands.task, ms) for ti, ms in win.sets]
        d = np.array([domain.true_uplift(t, ms) for t, ms in items])
        if kind == "oracle_var":
            score = np.abs(d) * (1.0 - np.abs(d))
        elif kind == "oracle_gain":  # what the decision would gain if it chose q: Δ(q) − Δ(beam choice)
            tasks = {id(win.tasks[ti].cands.task): win.tasks[ti].cands for ti, _ in win.sets}
            chosen = dict(zip(tasks, run.retriever.beam(list(tasks.values()))))
            score = d - np.array([domain.true_uplift(t, chosen[id(t)][0]) for t, _ in items])
        else:
            ctx, rows, mask, y = run.labels.arrays()
            a = calibration_scale(run.trainer.scores(ctx, rows, mask), y,
                                  ProbingSection(calibration="scale")) if len(run.labels) else 1.0
            score = np.abs(a * _scores_of(run, items) - d)
        order = sorted(range(len(items)), key=lambda q: (-score[q], q))[:budget]
        return [win.sets[q] for q in order]

    return choose


def _copy_labels(store):
    new = copy.copy(store)
    new.labels, new.ctx, new.rows = list(store.labels), list(store.ctx), list(store.rows)
    new.by_task = copy.deepcopy(store.by_task)
    return new


_RUNS: dict[UpliftConfig, UpliftRun] = {}


def _bind(run: UpliftRun, domain: SyntheticDomain, executor: SyntheticExecutor, featurizer: Featurizer,
          log: ExecutionLog, ledger: Ledger) -> None:
    """Point ``run`` at ``domain``: its pool, per-task recall, executor, log and ledger."""
    run.pool = run.retriever.pool = domain.pool
    run.retriever.featurizer = featurizer
    run.retriever.recall = domain.recall
    run.ledger = ledger
    run.labeler = Labeler(executor, run.cfg.utility.get("synthetic"), ledger, log)


def attach_run(cfg: UpliftConfig, domain: SyntheticDomain, executor: SyntheticExecutor, *, seed: int) -> UpliftRun:
    """An :class:`UpliftRun` on ``domain`` in its initial state (fresh parameters from ``seed``, empty
    labels, log and ledger; ``writer_backbone=None``, the domain's pool and per-task recall), reusing the
    run — and its compiled functions — made for ``cfg`` before."""
    run = _RUNS.get(cfg)
    if run is None:
        run = _RUNS[cfg] = UpliftRun(cfg, executor, domain="synthetic", k_max=3, writer_backbone=None,
                                     pool=domain.pool, recall=domain.recall)
    tr = run.trainer
    tr.params = init_params(tr.model, jax.random.PRNGKey(seed), n_pool=tr.k_max, d_context=tr.d_ctx,
                            d_member=tr.d_mem)
    tr.opt_state, tr.steps_done = tr.tx.init(tr.params), 0
    _bind(run, domain, executor, Featurizer(domain.pool), ExecutionLog(), Ledger("uplift-train"))
    run.labels = LabelStore(run.k_max, tr.d_ctx, tr.d_mem)
    run.rng, run.key = np.random.default_rng(seed), jax.random.PRNGKey(seed)
    run.train_log, run.processed = TrainLog(), 0
    return run


class ProbeStudy:
    """One seed's warm-up checkpoint and its probe curves (module docstring).

    The :class:`UpliftRun` (and so its jitted functions) is shared by every study of the same config:
    a new study re-points it at its domain and resets its state (fresh parameters from ``seed``, empty
    labels, log and ledger), which costs no recompilation.

    Args:
      seed: the domain's seed and the run's training seed.
      n_build, n_window, n_heldout: tasks for bootstrap probing, the probe window, the metric.
      spec: the domain (``seed`` and ``n_tasks`` are overridden).
      cfg: the run's config (default :func:`synthetic_config`).
      draft_seeds: each window task enters the window this many times, at different draft seeds (each
        with its own no-memory reference), so a set can be probed more than once; the extra entries'
        retrieved sets are not pre-labelled. Comparisons are per task (counted once).
    """

    def __init__(self, seed: int, *, n_build: int = 16, n_window: int = 8, n_heldout: int = 16,
                 spec: SyntheticSpec = SyntheticSpec(), cfg: UpliftConfig | None = None, draft_seeds: int = 1) -> None:
        n = n_build + n_window + n_heldout
        self.seed = seed
        self.domain = SyntheticDomain(SyntheticSpec(**{**spec.__dict__, "seed": seed, "n_tasks": n}))
        self.cfg = cfg if cfg is not None else synthetic_config()
        self.executor = SyntheticExecutor(self.domain)
        tasks = self.domain.tasks
        self.build, self.window_tasks, self.heldout = (tasks[:n_build], tasks[n_build:n_build + n_window],
                                                       tasks[n_build + n_window:])
        self.run = attach_run(self.cfg, self.domain, self.executor, seed=seed)
        self.untrained = ranking_metrics(self.run, self.domain, self.heldout)
        self.run.bootstrap(self.build, seed=0)
        self.run.warmup()
        self.window = self._paths(self.window_tasks, seed_base=1000)
        for j in range(1, draft_seeds):  # the same tasks and paths at further draft seeds (own references)
            for i, wt in enumerate(list(self.window[:n_window])):
                seed_j = 1000 + 100_000 * j + i
                ref_id, _ = self.run.labeler.reference(wt.cands.task, seed=seed_j)
                self.window.append(WindowTask(wt.cands, list(wt.path), seed_j, ref_id, set()))
        self.warm = ranking_metrics(self.run, self.domain, self.heldout)
        self.family = local_family(self.run, self.window)
        self.best = {t.task_id: best_uplift(self.run, self.domain, t) for t in self.window_tasks}
        self.warm_decision = decision_metrics(self.run, self.domain, self.window_tasks, self.family, self.best)
        self._snap = self._snapshot()

    def _paths(self, tasks: Sequence[Task], *, seed_base: int) -> list[WindowTask]:
        """One sampled path per task with its paired label (as :meth:`UpliftRun.train` does)."""
        run = self.run
        cands = [run.retriever.candidates(t) for t in tasks]
        out = []
        for i, (t, c, (members, actions, _)) in enumerate(zip(tasks, cands, run.retriever.sample(cands,
                                                                                               run._next_key()))):
            seed = seed_base + i
            ref_id, _ = run.labeler.reference(t, seed=seed)
            executed = set()
            if members:
                lab, _ = run.labeler.label(t, members, seed=seed, kind="retrieved")
                run.add_label(t, lab, members)
                executed.add(lab.members)
            path = [c.memories[a] for a in actions if 0 <= a < len(c.memories)]
            out.append(WindowTask(c, path, seed, ref_id, executed))
        return out

    def _snapshot(self) -> dict:
        r = self.run
        return {"params": r.trainer.params, "opt_state": r.trainer.opt_state, "steps": r.trainer.steps_done,
                "labels": _copy_labels(r.labels), "log": copy.deepcopy(r.labeler.log), "rng": copy.deepcopy(r.rng),
                "ledger": copy.deepcopy(r.ledger), "featurizer": r.retriever.featurizer,
                "key": r.key, "processed": r.processed,
                "executed": [set(w.executed) for w in self.window]}

    def restore(self) -> None:
        """Back to the warm-up checkpoint (jax arrays are immutable: sharing them is a copy), re-bound to
        this study's domain (another study may have used the shared run since)."""
        s, r = self._snap, self.run
        _bind(r, self.domain, self.executor, s["featurizer"], copy.deepcopy(s["log"]), copy.deepcopy(s["ledger"]))
        r.trainer.params, r.trainer.opt_state, r.trainer.steps_done = s["params"], s["opt_state"], s["steps"]
        r.labels = _copy_labels(s["labels"])
        r.rng, r.key, r.processed = copy.deepcopy(s["rng"]), s["key"], s["processed"]
        for w, ex in zip(self.window, s["executed"]):
            w.executed = set(ex)
        r.train_log.windows.clear()

    def curve(self, strategy: str, budgets: Sequence[int], *, key_seed: int = 0,
              probing: ProbingSection | None = None) -> dict:
        """Metrics after each cumulative probe budget in ``budgets`` (``0`` first): the held-out ranking
        (``pairwise``, ``regret``, ``top1``), the window's pairwise accuracy (``window``) and the decision
        metrics of the probed tasks (``decision_regret``, ``decision_local``; :func:`decision_metrics`).

        ``strategy`` is a probing strategy of :data:`cfjax.config.uplift.STRATEGIES`, an oracle of
        :data:`ORACLES`, or ``"none"``: the control with the same scorer updates as a probing event makes
        and no new label. ``probing`` replaces the config's probing section (window, beliefs, mode)."""
        self.restore()
        run = self.run
        run.key = jax.random.PRNGKey(key_seed)
        out = {"strategy": strategy, "budgets": [0], "probes": [0], **{k: [v] for k, v in self.warm.items()},
               "window": [ranking_metrics(run, self.domain, self.window_tasks)["pairwise"]], "mean_true": [],
               "decision_regret": [self.warm_decision["regret"]], "decision_local": [self.warm_decision["local"]]}
        choose = oracle_chooser(strategy, run, self.domain) if strategy in ORACLES else None
        done = 0
        for b in budgets:
            inc = int(b) - done
            if inc <= 0:
                raise ValueError(f"budgets must increase, got {list(budgets)}")
            if strategy == "none":
                labels = []
                run._update(run.cfg.training.steps_per_update, policy=True)
            elif choose is not None:
                labels = run.probe_window(self.window, budget=inc, probing=probing, choose=choose)
            else:
                labels = run.probe_window(self.window, budget=inc, strategy=strategy, probing=probing)
            done = int(b)
            m = ranking_metrics(run, self.domain, self.heldout)
            dm = decision_metrics(run, self.domain, self.window_tasks, self.family, self.best)
            out["decision_regret"].append(dm["regret"])
            out["decision_local"].append(dm["local"])
            out["budgets"].append(done)
            out["probes"].append(out["probes"][-1] + len(labels))
            for k, v in m.items():
                out[k].append(v)
            out["window"].append(ranking_metrics(run, self.domain, self.window_tasks)["pairwise"])
            out["mean_true"].append(float(np.mean([self.domain.true_uplift(lab.task_id, lab.members)
                                                   for lab in labels])) if labels else math.nan)
        self.restore()
        return out


_STUDIES: dict[int, ProbeStudy] = {}


def study(seed: int) -> ProbeStudy:
    """The default :class:`ProbeStudy` of ``seed`` (built once, then cached)."""
    if seed not in _STUDIES:
        _STUDIES[seed] = ProbeStudy(seed)
    return _STUDIES[seed]


def probe_curve(strategy: str, seed: int, budgets: Sequence[int]) -> dict:
    """``study(seed).curve(strategy, budgets)``: every strategy of a seed starts from the same warm-up
    checkpoint (:meth:`ProbeStudy.curve`)."""
    return study(seed).curve(strategy, budgets)


def paired_bootstrap(diffs: Sequence[float], *, n_boot: int = 10_000, level: float = 0.95, seed: int = 0
                     ) -> tuple[float, float, float]:
    """Mean of paired differences and its percentile bootstrap interval."""
    d = np.asarray(diffs, float)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    a = (1 - level) / 2
    return float(d.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a))

"""The Anti-Persistence iteration protocol, its baselines and the provenance count.

papers/anti-persistence.md §3.2, §4.1, App. A, B, D. K iterations; at
iteration ℓ every method trains on the same sample of training tasks, then the
full held-out split is evaluated with every store frozen (evaluation logs
never feed back). Rows:

================== ==================================================================
no_memory          the executor alone (the ReAct-style reference; nothing is stored)
anti_persistence   KNN-UCB mode selection over the outcome log; trajectories persist;
                   synthesized guidance is used for the task and discarded
trajectory_memory  retrieved trajectories as factual context (mode none), no log
abstraction_memory after each training task an abstraction is synthesized (strategic
                   after a success, corrective after a failure) and persisted; the
                   agent sees the top-3 stored abstractions, no trajectories
joint_memory       both: factual trajectories and stored abstractions
persist_guidance   anti-persistence, but its guidance is persisted and retrieved
                   later (the persist-vs-discard ablation)
fixed_<mode>       anti-persistence with one fixed synthesis mode (mode-selection ablation)
random_mode        anti-persistence with a uniformly random mode
================== ==================================================================

Mode selection (§3.2 Eq. 3, App. B.4). *Training* tasks use the paper's
selector with every safeguard — round-robin in the first 3 iterations, the
W_init warm-up, ε-greedy, the ρ fallback and the UCB bonus of Eq. 3
(:func:`make_selector`, :func:`cfjax.kernels.bandit.select_mode`).
*Held-out evaluation* is frozen and greedy (:func:`make_greedy_selector`):
the modes of every held-out task are chosen at once from one snapshot of
the frozen outcome log, by the same neighbourhood and recency-weighted
estimate ``r̂(μ|τ)`` of Eq. 3 but *without* the exploration bonus, without
round-robin, warm-up or ε, and nothing is appended to any log (the paper,
§3.2: "evaluation leaves both stores unchanged"; App. D.1: held-out
episodes never update ``L_k``). Greedy rule: if the neighbourhood is empty
or its mean similarity is below ρ, or no mode has positive weight in it,
the global-best mode (the kernel's FALLBACK branch: highest unweighted mean
reward over the whole log); otherwise ``argmax_μ r̂(μ|τ)`` over the modes
with positive weight (an unsupported mode has no estimate and is never
picked by the local branch; ties to the lowest mode index). The paper does
not say whether its exploration overrides apply to held-out tasks; greedy,
frozen evaluation is our reading of "evaluated with every store frozen" (an
exploring evaluation measures the exploration schedule — near-uniform mode
frequencies — not the learned choice).

The method is domain- and backbone-agnostic: it knows a domain only through
an injected :class:`~cfjax.types.EditModel` and a :class:`~cfjax.types.World`,
and a model only as a :class:`~cfjax.types.Backbone`. Every task runs through
the one agent loop, :func:`cfjax.loop.run_episode`, with
``draft_once(backbone, memory=...)``: the task's memory (guidance, stored
abstractions or factual records, :func:`~cfjax.antipersist.guidance.compose_memory`)
reaches the backbone only as ``DraftRequest.memory``; the backbone applies
it (the scripted one carries rules with ``EditModel.transfer`` and the
domain's resolver) and reports the rules it followed (``APPLIED:`` →
``Decision.applied``). Agent-side code here never reads an answer key.

Provenance (App. A.1): every trajectory records the abstractions in context
when it was produced — persistent ones, and for the anti-persistence rows the
temporary guidance's id (metadata only; the guidance object is dropped) — and,
per attempt, the rule ids the backbone said it applied. Every synthesized
abstraction records its source trajectories and their parents. A *reproduced
error* is a flagged abstraction (one with an over-general rule) synthesized
from trajectories that had a flagged parent.

Costs: execution calls are the episode's decisions (one DRAFT_ACTION call and
one evaluation each, charged to a :class:`~cfjax.infra.ledger.Ledger`);
synthesis calls are κ of the scripted synthesizers (one per non-empty
synthesis), for every backbone.
"""

from __future__ import annotations

import functools
import random
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from cfjax.antipersist.guidance import (MODES, Attempt, Guidance, Rule, Trajectory, compose_memory,
                                        factual_rules, render_factual, synthesize)
from cfjax.antipersist.memory import AbstractionStore, TrajectoryMemory, rules_of
from cfjax.antipersist.outcome_log import OutcomeLog
from cfjax.config.antipersist import APConfig  # re-exported (moved to cfjax.config)
from cfjax.infra.concurrency import inflight_of, ordered_map
from cfjax.infra.ledger import Ledger
from cfjax.kernels import bandit as bk
from cfjax.kernels._base import masked_argmax
from cfjax.loop import Episode, draft_once, run_episode
from cfjax.types import Backbone, EditModel, MemoryText, Task, World

__all__ = ["ROWS", "APConfig", "MethodState", "IterationResult", "TaskRecord", "run_method", "run_task",
           "new_state", "reproduced_errors", "task_memory", "make_selector", "make_greedy_selector", "greedy_mode",
           "GreedyDecision", "EvalChoice", "eval_decisions", "TRAIN_BRANCHES", "EVAL_BRANCHES"]

#: names of the training selector's branch codes (:data:`cfjax.kernels.bandit.BRANCH_NAMES`)
TRAIN_BRANCHES = bk.BRANCH_NAMES
#: names of the greedy evaluation selector's branch codes (a subset of the kernel's codes)
EVAL_BRANCHES = {bk.FALLBACK: "fallback", bk.KNN_UCB: "knn_greedy"}

@dataclass(frozen=True)
class APRow:
    """One row of the protocol as flags (the way UpliftMem's ``TrainingRow`` is), not a name to test.

    Attributes:
      name: the row name.
      mode: how the synthesis mode is chosen: ``"bandit"`` (KNN-UCB over the outcome log, Eq. 3),
        ``"random"`` (uniform), or one fixed mode of :data:`~cfjax.antipersist.guidance.MODES`
        (``"none"``: factual trajectories only, nothing synthesized).
      trajectories: trajectories are kept and shown (factual context / synthesis input).
      abstractions: after each training task an abstraction is synthesized from a write-time buffer
        (strategic after a success, corrective after a failure) and persisted; the top ones are shown.
      persist_guidance: synthesized guidance is persisted and retrieved later (the persist-vs-discard
        ablation) instead of discarded.
      description: one line for help.
    """

    name: str
    mode: str
    trajectories: bool = True
    abstractions: bool = False
    persist_guidance: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("bandit", "random", *MODES):
            raise ValueError(f"APRow {self.name!r}: mode must be bandit, random or one of {MODES}, got {self.mode!r}")

    @property
    def uses_bandit(self) -> bool:
        return self.mode == "bandit"

    @property
    def stores_abstractions(self) -> bool:
        return self.abstractions or self.persist_guidance


#: every row of the protocol, in report order
AP_ROWS: dict[str, APRow] = {r.name: r for r in (
    APRow("no_memory", "none", trajectories=False, description="the executor alone (nothing is stored)"),
    APRow("anti_persistence", "bandit", description="KNN-UCB mode over the outcome log; guidance discarded"),
    APRow("trajectory_memory", "none", description="retrieved trajectories as factual context, no log"),
    APRow("abstraction_memory", "none", trajectories=False, abstractions=True,
          description="an abstraction persisted after each training task; the top-3 shown"),
    APRow("joint_memory", "none", abstractions=True, description="factual trajectories and stored abstractions"),
    APRow("persist_guidance", "bandit", persist_guidance=True, description="anti-persistence, guidance persisted"),
    APRow("fixed_imitation", "imitation", description="one fixed synthesis mode (mode-selection ablation)"),
    APRow("fixed_strategic", "strategic", description="one fixed synthesis mode (mode-selection ablation)"),
    APRow("fixed_corrective", "corrective", description="one fixed synthesis mode (mode-selection ablation)"),
    APRow("random_mode", "random", description="a uniformly random mode"),
)}
ROWS = tuple(AP_ROWS)


@dataclass
class MethodState:
    """Everything a method keeps across tasks (all of it frozen during evaluation)."""

    row: str
    trajectories: TrajectoryMemory
    log: OutcomeLog | None
    abstractions: AbstractionStore | None
    buffer: TrajectoryMemory | None  # abstraction memory's write-time input (never shown to the agent)
    synthesized: list[dict] = field(default_factory=list)  # provenance of every abstraction (metadata only)
    updates: int = 0  # training-task updates so far (k of the outcome log's skip rule)

    def log_arrays(self, capacity: int, dim: int):
        """The outcome log as bandit-kernel arrays (device arrays), rebuilt only when the log grew."""
        n = len(self.log)  # type: ignore[arg-type]
        if getattr(self, "_arrays_n", None) != n:
            self._arrays = jax.device_put(self.log.as_arrays(capacity, dim))  # type: ignore[union-attr]
            self._arrays_n = n
        return self._arrays

    def freeze(self) -> None:
        for s in (self.trajectories, self.abstractions, self.buffer):
            if s is not None:
                s.freeze()
        if self.log is not None:
            self.log.freeze()

    def unfreeze(self) -> None:
        for s in (self.trajectories, self.abstractions, self.buffer):
            if s is not None:
                s.unfreeze()
        if self.log is not None:
            self.log.unfreeze()


@dataclass
class TaskRecord:
    task_id: str
    mode: str
    success: bool
    exec_calls: int  # decisions of the episode (one draft call + one evaluation each)
    synth_calls: int
    branch: str | None = None  # which selector branch chose the mode (bandit rows; TRAIN_/EVAL_BRANCHES)
    tokens: int = 0
    applied: int = 0  # rules the backbone said it followed, over the episode


@functools.lru_cache(maxsize=8)
def make_selector(cfg: bk.BanditConfig):
    """The jitted single-task KNN-UCB mode selector of *training* (:func:`cfjax.kernels.bandit.make_knn_ucb`:
    Eq. 3 with round-robin, W_init warm-up, ε-greedy and the ρ fallback). One per config and process, so
    the jobs a worker runs share its compilation."""
    return jax.jit(bk.make_knn_ucb(cfg).select_one)


class GreedyDecision(NamedTuple):
    """One frozen, greedy evaluation decision (:func:`greedy_mode`)."""

    mode: jnp.ndarray  # i32[] chosen mode
    branch: jnp.ndarray  # i32[] bk.FALLBACK or bk.KNN_UCB (here: the greedy local branch)
    r_hat: jnp.ndarray  # f32[M] r̂(μ|τ) of Eq. 3 (0 where unsupported)
    supported: jnp.ndarray  # bool[M] Σ_{μ_i=μ} w_i > 0 in the neighbourhood
    global_mean: jnp.ndarray  # f32[M] unweighted mean reward per mode over the whole log
    neighbourhood_sim: jnp.ndarray  # f32[] mean similarity over the neighbourhood (0 if empty)


def greedy_mode(log: bk.OutcomeLogArrays, query: jax.Array, cfg: bk.BanditConfig) -> GreedyDecision:
    """The held-out (frozen, greedy) mode decision for one task (module docstring).

    Eq. 3 without its exploration term: ``argmax_μ r̂(μ|τ)`` over the modes with positive weight in
    the top-B̂ neighbourhood (:func:`cfjax.kernels.bandit.local_estimates`, the same similarity,
    neighbourhood and recency weights as training), or the global-best mode when the neighbourhood is
    empty, its mean similarity is below ρ (App. B.3/B.4) or no mode is supported. No round-robin,
    warm-up, ε or UCB bonus; a pure function of the frozen log and the query.
    """
    est = bk.local_estimates(log, query, cfg)
    valid = jnp.asarray(log.valid).astype(bool)
    in_log = (jnp.asarray(log.mode).astype(jnp.int32)[:, None] == jnp.arange(bk.N_MODES)[None, :]) & valid[:, None]
    g_count = jnp.sum(in_log, axis=0)
    g_sum = jnp.sum(jnp.where(in_log, jnp.asarray(log.reward, jnp.float32)[:, None], 0.0), axis=0)
    g_mean = g_sum / jnp.maximum(g_count, 1).astype(jnp.float32)
    global_best = masked_argmax(g_mean, g_count > 0)
    supported = est.weight_sum > 0
    local = masked_argmax(est.r_hat, supported)
    fallback = (est.n_neighbours == 0) | (est.mean_sim < jnp.asarray(cfg.rho, jnp.float32)) | ~jnp.any(supported)
    mode = jnp.where(fallback, global_best, local).astype(jnp.int32)
    branch = jnp.where(fallback, jnp.int32(bk.FALLBACK), jnp.int32(bk.KNN_UCB))
    return GreedyDecision(mode, branch, est.r_hat, supported, g_mean, est.mean_sim)


@functools.lru_cache(maxsize=8)
def make_greedy_selector(cfg: bk.BanditConfig):
    """The jitted *evaluation* selector: :func:`greedy_mode` vmapped over a batch of queries that share
    one frozen log, ``(log, queries f32[T, d]) -> GreedyDecision[T]``. One per config and process."""
    return jax.jit(jax.vmap(functools.partial(greedy_mode, cfg=cfg), in_axes=(None, 0)))


def _uses_bandit(row: str) -> bool:
    return AP_ROWS[row].uses_bandit


def _fixed_mode(row: str, rng: random.Random) -> str | None:
    """The mode of a row that does not select one from the log (None for the bandit rows)."""
    mode = AP_ROWS[row].mode
    if mode == "bandit":
        return None
    if mode == "random":
        return MODES[rng.randrange(len(MODES))]
    return mode


class EvalChoice(NamedTuple):
    """A held-out task's greedy mode, the branch that chose it and its mean neighbourhood similarity."""

    mode: str
    branch: str
    sim: float


#: held-out decisions are taken in chunks of this many queries (the last one padded), so the greedy
#: selector compiles once per log shape whatever the number of held-out tasks
EVAL_CHUNK = 64


def eval_decisions(state: MethodState, tasks: Sequence[Task], cfg: APConfig) -> list[EvalChoice]:
    """Frozen, greedy held-out modes of a bandit row: every task decided from one snapshot of the log
    (:func:`make_greedy_selector`). Reads the log, writes nothing."""
    if not tasks:
        return []
    queries = np.stack([state.trajectories.query(t) for t in tasks]).astype(np.float32)
    arrays = state.log_arrays(cfg.log_capacity, queries.shape[1])
    select = make_greedy_selector(cfg.bandit)
    out: list[EvalChoice] = []
    for start in range(0, len(tasks), EVAL_CHUNK):
        q = queries[start:start + EVAL_CHUNK]
        n = q.shape[0]
        if n < EVAL_CHUNK:
            q = np.concatenate([q, np.zeros((EVAL_CHUNK - n, q.shape[1]), np.float32)])
        d = select(arrays, q)
        modes, branches, sims = (np.asarray(x)[:n] for x in (d.mode, d.branch, d.neighbourhood_sim))
        out += [EvalChoice(MODES[int(m)], EVAL_BRANCHES[int(b)], float(x)) for m, b, x in zip(modes, branches, sims)]
    return out


def _select(state: MethodState, row: str, task: Task, query: np.ndarray, *, iteration: int, position: int,
            rng: random.Random, cfg: APConfig, selector, train: bool) -> tuple[str, str | None]:
    mode = _fixed_mode(row, rng)
    if mode is not None:
        return mode, None
    if not train:
        return eval_decisions(state, [task], cfg)[0][:2]
    arrays = state.log_arrays(cfg.log_capacity, query.shape[0])
    key = np.array([0, rng.randrange(2**31)], np.uint32)  # = jax.random.PRNGKey(seed), without its dispatch
    d = selector(arrays, query, iteration, position, key)
    return MODES[int(d.mode)], TRAIN_BRANCHES[int(d.branch)]


@dataclass
class _Context:
    """What one task is shown, and its provenance (metadata only)."""

    memory: MemoryText | None
    rules: list[Rule]
    parents: list[str]
    flagged: list[str]
    synth_calls: int


def task_memory(task: Task, state: MethodState, mode: str, *, edits: EditModel, cfg: APConfig, episode: int,
                rng: random.Random, query: np.ndarray, iteration: int, train: bool,
                on_guidance: Callable[[Guidance], None] | None = None) -> _Context:
    """Build the memory of one task under ``state.row`` and ``mode`` (synthesizing guidance if the mode
    asks for it). Synthesized guidance is rendered into the returned text and its id goes into the
    provenance lists; the :class:`Guidance` object itself is not returned (unless the row persists it)."""
    row = state.row
    spec = AP_ROWS[row]
    rules: list[Rule] = []
    parents: list[str] = []
    flagged: list[str] = []
    guidance_text: list[str] = []
    factual = ""
    synth_calls = 0
    if spec.trajectories:
        succ, fails, contrast = state.trajectories.for_mode(mode, task, cfg.B, query=query)
        if mode == "none":
            notes = factual_rules(succ, edits, prefix=f"f{episode}", max_rules=cfg.synthesis.max_rules)
            factual = render_factual(succ, notes)
            rules += notes
        else:
            g = synthesize(mode, task, succ, fails, contrast, edits=edits, rng=rng, cfg=cfg.synthesis,
                           guidance_id=f"{row}/g{episode}")
            synth_calls += g.calls
            if g.calls:
                _note_synthesis(state, g, iteration, train)
            if g.rules:
                guidance_text.append(g.text)
                rules += list(g.rules)
                parents.append(g.guidance_id)
                if g.flagged:
                    flagged.append(g.guidance_id)
            if on_guidance is not None:
                on_guidance(g)
            if spec.persist_guidance and train and g.rules:
                state.abstractions.add(g, task)  # type: ignore[union-attr]
            del g
    if state.abstractions is not None:
        stored = state.abstractions.retrieve(task, cfg.abstraction_k, query=query)
        guidance_text += [s.text for s in stored]
        rules += rules_of(stored)
        parents += [s.guidance_id for s in stored]
        flagged += [s.guidance_id for s in stored if s.flagged]
    return _Context(compose_memory(factual, guidance_text), rules, parents, flagged, synth_calls)


def run_task(task: Task, state: MethodState, *, backbone: Backbone, world: World, edits: EditModel, cfg: APConfig,
             iteration: int, position: int, episode: int, rng: random.Random, train: bool, selector,
             ledger: Ledger | None = None, on_guidance: Callable[[Guidance], None] | None = None,
             decision: tuple[str, str | None] | None = None) -> TaskRecord:
    """One task under one method: select a mode, build its memory, run the agent loop, (training) record.

    ``train=True``: the training selector (``selector``, with exploration) and the task is learned
    from. ``train=False`` (held-out): a bandit row's mode is greedy from the frozen log
    (:func:`eval_decisions`; ``decision`` passes one precomputed from the same snapshot) and nothing
    is written anywhere.

    Synthesized guidance lives only inside this call: it is rendered into the
    backbone's ``DraftRequest.memory``, its id and flag go into provenance
    metadata, and the object is dropped when the call returns (unless the row
    persists it).
    """
    query = state.trajectories.query(task)
    if decision is not None and _uses_bandit(state.row):
        mode, branch = decision[0], decision[1]
    else:
        mode, branch = _select(state, state.row, task, query, iteration=iteration, position=position, rng=rng,
                               cfg=cfg, selector=selector, train=train)
    ctx = task_memory(task, state, mode, edits=edits, cfg=cfg, episode=episode, rng=rng, query=query,
                      iteration=iteration, train=train, on_guidance=on_guidance)
    ep = run_episode(task, world=world, edits=edits, ledger=ledger if ledger is not None else Ledger("task"),
                     episode=episode, max_attempts=cfg.max_attempts, draft=draft_once(backbone, memory=ctx.memory))
    traj = _trajectory(task, ep, ctx)
    rec = TaskRecord(task.task_id, mode, traj.success, len(ep.decisions), ctx.synth_calls, branch,
                     sum(d.tokens for d in ep.decisions), sum(len(d.applied) for d in ep.decisions))
    if train:
        _learn(state, task, traj, mode, ctx.synth_calls, query, cfg, edits, rng, iteration)
    return rec


def _trajectory(task: Task, ep: Episode, ctx: _Context) -> Trajectory:
    """The stored record of an episode: what the agent did and the evaluator said, with provenance
    (per attempt, the rule ids the backbone's APPLIED line named)."""
    history = [Attempt(d.action, d.feedback, d.score, tuple(d.applied)) for d in ep.decisions]
    return Trajectory(task.task_id, task.question, tuple(task.attrs.get("cues", ())), tuple(history), ep.solved,
                      tuple(ctx.rules), tuple(ctx.parents), tuple(ctx.flagged))


def _note_synthesis(state: MethodState, g: Guidance, iteration: int, train: bool) -> None:
    if train:
        state.synthesized.append({"id": g.guidance_id, "mode": g.mode, "iteration": iteration, "flagged": g.flagged,
                                  "sources": list(g.sources), "parents": list(g.parents),
                                  "parent_flagged": list(g.parent_flagged), "rules": len(g.rules)})


def _learn(state: MethodState, task: Task, traj: Trajectory, mode: str, synth_calls: int, query: np.ndarray,
           cfg: APConfig, edits: EditModel, rng: random.Random, iteration: int) -> None:
    if state.log is not None:
        state.log.record(task.task_id, task.domain, task.question, query, mode, traj.success, synth_calls,
                         update_index=state.updates, lam=cfg.bandit.lam)
    if AP_ROWS[state.row].trajectories:
        state.trajectories.add(traj, task)
    if state.buffer is not None:
        state.buffer.add(traj, task)
        m = "strategic" if traj.success else "corrective"
        succ, fails, contrast = state.buffer.for_mode(m, task, cfg.B, query=query)
        g = synthesize(m, task, succ, fails, contrast, edits=edits, rng=rng, cfg=cfg.synthesis,
                       guidance_id=f"{state.row}/a{state.updates}")
        if g.calls:
            _note_synthesis(state, g, iteration, True)
        state.abstractions.add(g, task)  # type: ignore[union-attr]
    state.updates += 1


def new_state(row: str, log_path: Path | None, cfg: APConfig | None = None) -> MethodState:
    """A row's empty stores: the embedding text, type filter and log durability from ``cfg`` (defaults)."""
    if row not in ROWS:
        raise ValueError(f"unknown row {row!r}; choose from {ROWS}")
    cfg = cfg or APConfig()
    spec = AP_ROWS[row]
    log = (OutcomeLog(log_path, durability=cfg.log_durability)
           if (_uses_bandit(row) and log_path is not None) else None)
    if _uses_bandit(row) and log is None:
        raise ValueError(f"row {row!r} needs an outcome-log path")

    def mem() -> TrajectoryMemory:
        return TrajectoryMemory(text=cfg.embed_text, type_filter=cfg.type_filter)

    return MethodState(row, mem(), log,
                       AbstractionStore(text=cfg.embed_text, type_filter=cfg.type_filter)
                       if spec.stores_abstractions else None,
                       mem() if spec.abstractions else None)


@dataclass
class IterationResult:
    iteration: int
    success: float  # held-out, 0-100
    calls_per_task: float  # synthesis + execution LLM calls per held-out task
    synth_calls_per_task: float
    mode_freq: dict[str, float]  # held-out mode frequencies
    train_mode_freq: dict[str, float]
    branches: dict[str, int]  # held-out selector branches (bandit rows): fallback / knn_greedy
    tokens_per_task: float = 0.0  # backbone tokens per held-out task (the ledger's count)
    applied_per_task: float = 0.0  # guidance rules the backbone said it followed, per held-out task
    solved: dict[str, bool] = field(default_factory=dict)  # held-out task id → solved (analysis)
    train_branches: dict[str, int] = field(default_factory=dict)  # training selector branches (bandit rows)
    eval_sims: list[float] = field(default_factory=list)  # held-out mean neighbourhood similarity per task


def run_method(row: str, *, seed: int, train_pool: Sequence[Task], eval_tasks: Sequence[Task], backbone: Backbone,
               world: World, edits: EditModel, cfg: APConfig, out_dir: Path, selector=None,
               progress: Callable[[str, int], object] | None = None,
               on_eval: Callable[[MethodState], None] | None = None,
               workers: int | None = None) -> tuple[list[IterationResult], MethodState]:
    """K iterations of one row for one seed (§4.1 protocol) with any backbone, world and edit model.

    Each iteration trains on its sample (the paper's selector, with exploration, for the bandit rows),
    then freezes every store and evaluates the held-out tasks: a bandit row's modes are chosen greedily
    from one snapshot of the frozen log (:func:`eval_decisions`) and nothing is written.

    The held-out pass reads only frozen state and each task has its own random stream and ledger, so
    its tasks run on up to ``workers`` threads (default: the backbone's ``max_inflight``, 1 for the
    simulator) with results identical to the serial pass."""
    workers = inflight_of(backbone) if workers is None else workers
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / f"{row}.outcomes.jsonl"
    log_path.unlink(missing_ok=True)
    state = new_state(row, log_path if _uses_bandit(row) else None, cfg)
    selector = selector or make_selector(cfg.bandit)
    results = []
    bar = progress(f"{row} seed {seed}", cfg.iterations) if progress else None
    for it in range(cfg.iterations):
        sample_rng = random.Random(seed * 1000 + it)  # the same training sample for every row
        sample = sample_rng.sample(list(train_pool), min(cfg.tasks_per_iteration, len(train_pool)))
        rng = random.Random(zlib.crc32(f"{row}/{seed}/{it}".encode()))  # stable across processes
        train_modes: Counter = Counter()
        train_branches: Counter = Counter()
        train_ledger = Ledger("train")
        for pos, task in enumerate(sample):
            rec = run_task(task, state, backbone=backbone, world=world, edits=edits, cfg=cfg, iteration=it,
                           position=pos, episode=seed * 10_000_000 + it * 10_000 + pos, rng=rng, train=True,
                           selector=selector, ledger=train_ledger)
            train_modes[rec.mode] += 1
            if rec.branch is not None:
                train_branches[rec.branch] += 1
        state.freeze()
        if on_eval is not None:
            on_eval(state)
        choices = eval_decisions(state, eval_tasks, cfg) if _uses_bandit(row) else [None] * len(eval_tasks)
        eval_ledger = Ledger("eval")

        def held_out(i: int) -> tuple[TaskRecord, Ledger]:
            led = Ledger("eval")
            rec = run_task(eval_tasks[i], state, backbone=backbone, world=world, edits=edits, cfg=cfg, iteration=it,
                           position=i, episode=900_000_000 + seed * 100_000 + i,
                           rng=random.Random(zlib.crc32(f"{row}/{seed}/{it}/eval/{i}".encode())), train=False,
                           selector=selector, ledger=led, decision=choices[i])
            return rec, led

        done = ordered_map(held_out, range(len(eval_tasks)), workers)
        recs = [r for r, _ in done]
        for _, led in done:
            eval_ledger.merge(led)
        if on_eval is not None:
            on_eval(state)
        state.unfreeze()
        n = max(len(recs), 1)
        modes = Counter(r.mode for r in recs)
        results.append(IterationResult(
            it + 1, 100.0 * sum(r.success for r in recs) / n,
            sum(r.exec_calls + r.synth_calls for r in recs) / n, sum(r.synth_calls for r in recs) / n,
            {m: modes[m] / n for m in MODES}, {m: train_modes[m] / max(len(sample), 1) for m in MODES},
            dict(Counter(r.branch for r in recs if r.branch is not None)), eval_ledger.total.tokens / n,
            sum(r.applied for r in recs) / n, {r.task_id: bool(r.success) for r in recs}, dict(train_branches),
            [c.sim for c in choices if c is not None]))
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"held-out {results[-1].success:.1f}")
    if bar is not None:
        bar.close()
    return results, state


def reproduced_errors(state: MethodState) -> dict[str, int]:
    """App. A: flagged abstractions whose inputs had a flagged parent (α's numerator) and context."""
    s = state.synthesized
    exposed = [x for x in s if x["parent_flagged"]]
    return {"synthesized": len(s), "flagged": sum(x["flagged"] for x in s), "exposed": len(exposed),
            "reproduced": sum(x["flagged"] for x in exposed)}


def run_system(info, *, seed: int, train_pool: Sequence[Task], eval_tasks: Sequence[Task], backbone: Backbone,
               world: World, edits: EditModel, cfg: APConfig, progress: Callable[[str, int], object] | None = None,
               workers: int | None = None) -> tuple[list[IterationResult], object]:
    """A registered memory system (:class:`cfjax.memory.MemorySystemInfo`) through the same §4.1 protocol
    as :func:`run_method`: the same K training samples, episode ids and held-out streams; after every
    training task the system is updated with that episode (:meth:`~cfjax.memory.MemorySystem.update`);
    it is frozen for each held-out pass, which runs on up to ``workers`` threads (identical results).

    It synthesizes nothing in Anti-Persistence's sense, so its mode is ``none`` throughout. Returns the
    per-iteration results and the system (its :meth:`~cfjax.memory.MemorySystem.summary` for the report)."""
    from cfjax.memory import SystemContext, experience_of, recall_episode, rollout_fn

    workers = inflight_of(backbone) if workers is None else workers
    train_ledger = Ledger(f"{info.name}/train")
    system = info.make(SystemContext(backbone, edits, cfg.max_attempts, seed, train_ledger,
                                     rollout_fn(backbone=backbone, world=world, edits=edits, ledger=train_ledger,
                                                max_attempts=cfg.max_attempts)))
    results = []
    bar = progress(f"{info.name} seed {seed}", cfg.iterations) if progress else None

    def record(task: Task, ep: Episode) -> TaskRecord:
        return TaskRecord(task.task_id, "none", ep.solved, len(ep.decisions), 0, None,
                          sum(d.tokens for d in ep.decisions), sum(len(d.applied) for d in ep.decisions))

    for it in range(cfg.iterations):
        sample_rng = random.Random(seed * 1000 + it)  # the same training sample for every row
        sample = sample_rng.sample(list(train_pool), min(cfg.tasks_per_iteration, len(train_pool)))
        for pos, task in enumerate(sample):
            episode = seed * 10_000_000 + it * 10_000 + pos
            ep = recall_episode(task, system, info, backbone=backbone, world=world, edits=edits,
                                ledger=train_ledger, episode=episode, max_attempts=cfg.max_attempts,
                                measure=False)  # its recall-time calls are training cost, counted once
            system.update(experience_of(ep, episode))
        system.freeze()

        def held_out(i: int) -> tuple[TaskRecord, Ledger]:
            led = Ledger("eval")
            ep = recall_episode(eval_tasks[i], system, info, backbone=backbone, world=world, edits=edits, ledger=led,
                                episode=900_000_000 + seed * 100_000 + i, max_attempts=cfg.max_attempts,
                                measure=False)
            return record(eval_tasks[i], ep), led

        done = ordered_map(held_out, range(len(eval_tasks)), workers)
        system.unfreeze()
        recs = [r for r, _ in done]
        eval_ledger = Ledger("eval")
        for _, led in done:
            eval_ledger.merge(led)
        n = max(len(recs), 1)
        results.append(IterationResult(
            it + 1, 100.0 * sum(r.success for r in recs) / n, eval_ledger.total.llm_calls / n, 0.0,
            {m: float(m == "none") for m in MODES}, {m: float(m == "none") for m in MODES}, {},
            eval_ledger.total.tokens / n, sum(r.applied for r in recs) / n, {r.task_id: bool(r.success) for r in recs}))
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"held-out {results[-1].success:.1f}")
    if bar is not None:
        bar.close()
    return results, system

"""UpliftMem end to end (Algorithm 1): bootstrap, warm-up, the training stream with writing and probing,
and evaluation with the fixed checkpoint.

papers/upliftmem.md §4 (Fig. 2), App. B.3, C, D.3–D.5; SPEC.md §2.

:class:`UpliftRun` owns one run: the pool, the scorer, the labelled data ``D`` (with ``D_v``, the
writing labels), the execution log and the ledger. Its phases:

1. :meth:`UpliftRun.bootstrap` — each ``T_build`` task is executed without memory and its trajectory
   written into a memory (admitted without validation: the seed pool); then *bootstrap probing*:
   ``bootstrap_sets`` random feasible sets of each build task's recall are executed and labelled.
2. :meth:`UpliftRun.warmup` — value-only updates (``warmup_steps``).
3. :meth:`UpliftRun.train` — ``epochs`` passes over the training stream. Per task: recall, a sampled
   path (Eq. 6), the paired label of its set, writing from the executed trajectory (App. B.3). Every
   ``update_every`` tasks one update of ``L_value + L_policy`` (the policy on that batch's paths only).
   Every ``h`` processed tasks an acquisition event over the tasks since the previous one: the B.2
   window, up to ``B_p`` probes by the strategy, their paired labels, and one more update. The built-in
   streams are shorter than the paper's ``h = 400``: then ``h = ⌈|stream| / min_windows_per_epoch⌉``
   (two events per epoch by default); the effective ``h`` is recorded.
4. :meth:`UpliftRun.evaluate` — held-out tasks, ``eval_repeats`` draft seeds, with the fixed
   checkpoint: rows ``no_memory`` (∅), ``similarity_topk`` (the pool's native retrieval: recall order
   under the same feasibility) and the trained row (beam search, ``W = 2``). Evaluation executions have
   their own log: they are not training cost, and evaluation feedback never reaches the scorer.

Ablations (Table 2) are :class:`TrainingRow` switches: ``base`` (untrained scorer), ``warmup_only``,
``random_probing``, ``no_policy``, ``no_value`` (the value loss is removed after the warm-up, which
is value-only by definition). Every row keeps online writing, as in the paper.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jax
import numpy as np

from cfjax.config.uplift import ProbingSection, UpliftConfig
from cfjax.infra.concurrency import inflight_of
from cfjax.infra.ledger import Ledger
from cfjax.types import Backbone, Task
from cfjax.uplift.core import ExecutionLog, Label, Labeler, Memory, SetExecutor, set_key
from cfjax.uplift.pool import MemoryPool, Writer
from cfjax.uplift.probing import Window, WindowTask, acquire, build_window, label_many
from cfjax.uplift.retrieval import Candidates, Retriever
from cfjax.uplift.scorer import LabelStore, PathRecord, ScorerTrainer

__all__ = ["TrainingRow", "TRAINING_ROWS", "UpliftRun", "EvalResult", "TrainLog"]


@dataclass(frozen=True)
class TrainingRow:
    """What a row trains (Table 2's ablations are switches of the full method)."""

    name: str = "upliftmem"
    warmup: bool = True  # value-only warm-up after bootstrap probing
    online: bool = True  # scorer updates during the stream
    probing: str | None = "evsi"  # acquisition strategy; None = no probing
    w_value: float = 1.0
    w_policy: float = 1.0


TRAINING_ROWS: dict[str, TrainingRow] = {
    "upliftmem": TrainingRow(),
    "base": TrainingRow("base", warmup=False, online=False, probing=None),
    "warmup_only": TrainingRow("warmup_only", online=False, probing=None),
    "random_probing": TrainingRow("random_probing", probing="random"),
    "no_policy": TrainingRow("no_policy", w_policy=0.0),
    "no_value": TrainingRow("no_value", w_value=0.0),
}


@dataclass
class TrainLog:
    """What training did (curves for the notebook and the report)."""

    updates: list[dict] = field(default_factory=list)  # {"tasks", "loss", "value", "policy", "labels"}
    windows: list[dict] = field(default_factory=list)  # {"tasks", "pool", "comparisons", "probes", "mean_y"}
    written: int = 0
    admitted: int = 0
    h_effective: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class EvalResult:
    """Per row: ``outcomes[row][r][i]`` (solved 0/1 of task ``i`` in repeat ``r``), rewards, sets."""

    task_ids: list[str]
    outcomes: dict[str, list[list[int]]]
    rewards: dict[str, list[list[float]]]
    set_sizes: dict[str, list[list[int]]]
    infos: dict[str, list[list[dict]]]
    sets: dict[str, list[list[tuple[str, ...]]]]


class UpliftRun:
    """One UpliftMem training run on one domain (module docstring).

    Args:
      cfg: the config.
      executor: the frozen executor.
      domain: the utility key (``sql``, ``pybugs``, ``sat``, ``memsyco``, ``synthetic``).
      k_max: the memory cap ``K``.
      writer_backbone: the writer/reviser model (``None``: no writing — fixed stores).
      pool: an initial pool (fixed stores), else an empty one.
      recall: ``task → (memories, similarities)`` overriding the pool's recall (per-task stores).
      row: the trained row's switches (the full method or a Table 2 ablation).
      log: progress lines.
    """

    def __init__(self, cfg: UpliftConfig, executor: SetExecutor, *, domain: str, k_max: int,
                 writer_backbone: Backbone | None = None, pool: MemoryPool | None = None,
                 recall: Callable[[Task], tuple[list[Memory], np.ndarray]] | None = None,
                 row: TrainingRow = TRAINING_ROWS["upliftmem"], log: Callable[[str], None] = lambda s: None) -> None:
        self.cfg, self.row, self.log_fn = cfg, row, log
        self.domain, self.k_max = domain, k_max
        self.ledger = Ledger("uplift-train")
        self.labeler = Labeler(executor, cfg.utility.get(domain), self.ledger, ExecutionLog())
        self.pool = pool if pool is not None else MemoryPool(cfg.retrieval.embed_dim, index=cfg.retrieval.index)
        d = cfg.retrieval.embed_dim
        self.trainer = ScorerTrainer(cfg, d_ctx=d, k_max=k_max, n_pool=cfg.retrieval.recall, seed=cfg.training.seed)
        self.retriever = Retriever(self.pool, self.trainer, n_recall=cfg.retrieval.recall, k_max=k_max,
                                   width=cfg.retrieval.width, tau=cfg.loss.tau_tr, budget=cfg.retrieval.token_budget,
                                   recall=recall)
        self.labels = LabelStore(k_max, d, self.trainer.d_mem)
        self.writer = (Writer(writer_backbone, self.labeler, self.pool, revisions=cfg.training.revisions,
                              tau_accept=cfg.training.tau_accept) if writer_backbone is not None and cfg.training.write
                       else None)
        self.rng = np.random.default_rng(cfg.training.seed)
        self.key = jax.random.PRNGKey(cfg.training.seed)
        self.train_log = TrainLog()
        self.processed = 0
        #: held-out executions run on this many threads (the backbone's ``max_inflight``; 1 for the
        #: simulator); the results are identical to the serial pass (:meth:`Labeler.run_many`)
        self.eval_workers = inflight_of(getattr(executor, "backbone", None))

    # ------------------------------------------------------------------ helpers
    def _next_key(self) -> jax.Array:
        self.key, k = jax.random.split(self.key)
        return k

    def add_label(self, task: Task, label: Label, memories: Sequence[Memory]) -> None:
        ctx, rows, mask = self.retriever.set_rows(task, memories)
        self.labels.add(label, ctx, rows[:len(memories)])

    def _write(self, task: Task, run, seed: int, *, validate: bool = True) -> None:
        if self.writer is None:
            return
        out = self.writer.write(task, run.trajectory, run.solved, seed=seed, ledger=self.ledger, validate=validate)
        self.train_log.written += len(out.versions) > 0
        self.train_log.admitted += out.admitted is not None
        for lab in out.labels:  # every validated version enters D_v (admitted or not)
            self.add_label(task, lab, [self.pool.get(m) for m in lab.members])

    def _update(self, steps: int, paths: Sequence[PathRecord] = (), *, policy: bool) -> None:
        if len(self.labels) == 0 or steps <= 0:
            return
        w_v = self.row.w_value if policy else 1.0  # the warm-up is value-only by definition
        w_p = self.row.w_policy if policy else 0.0
        m = self.trainer.update(self.labels, self.rng, steps=steps, paths=paths, w_value=w_v, w_policy=w_p)
        self.train_log.updates.append({"tasks": self.processed, "loss": float(m.loss[-1]), "value": float(m.value[-1]),
                                       "policy": float(m.policy[-1]), "labels": len(self.labels)})

    def random_set(self, cands: Candidates) -> list[Memory]:
        """A uniformly random feasible non-empty set of the recall (size 1..K, then members)."""
        mems = list(cands.memories)
        if not mems:
            return []
        size = int(self.rng.integers(1, min(self.k_max, len(mems)) + 1))
        picks = [mems[i] for i in self.rng.permutation(len(mems))]
        out, used = [], 0.0
        for m in picks:
            if len(out) >= size:
                break
            if used + m.tokens <= self.retriever.budget:
                out.append(m)
                used += m.tokens
        return out

    # ------------------------------------------------------------------ phases
    def bootstrap(self, tasks: Sequence[Task], *, seed: int = 0) -> None:
        """Seed pool from ``T_build`` trajectories, then bootstrap probing (module docstring)."""
        t0 = time.perf_counter()
        for t in tasks:
            _, ref = self.labeler.reference(t, seed=seed)
            self._write(t, ref, seed, validate=False)
        picks = []  # the sets first (the same draws of self.rng), then their labels, in this order
        for t in tasks:
            cands = self.retriever.candidates(t)
            for _ in range(self.cfg.training.bootstrap_sets):
                s = self.random_set(cands)
                if s:
                    picks.append((t, s, seed))
        for (t, s, _), (lab, _) in zip(picks, label_many(self.labeler, picks, kind="bootstrap",
                                                         threads=self.threads_for_probes())):
            self.add_label(t, lab, s)
        self.train_log.seconds["bootstrap"] = time.perf_counter() - t0

    def warmup(self) -> None:
        if not self.row.warmup:
            return
        t0 = time.perf_counter()
        steps = self.cfg.training.warmup_steps
        chunk = self.cfg.training.steps_per_update
        while steps > 0:
            self._update(min(chunk, steps), policy=False)
            steps -= chunk
        self.train_log.seconds["warmup"] = time.perf_counter() - t0

    def h_effective(self, n_stream: int) -> int:
        p = self.cfg.probing
        return max(1, min(p.every, math.ceil(n_stream / p.min_windows_per_epoch)))

    def train(self, stream: Sequence[Task], *, seed_base: int = 1000, on_window: Callable | None = None) -> None:
        """``epochs`` passes over ``stream`` (module docstring)."""
        t0 = time.perf_counter()
        tr = self.cfg.training
        h = self.train_log.h_effective = self.h_effective(len(stream))
        window: list[WindowTask] = []
        for epoch in range(tr.epochs):
            order = [stream[i] for i in self.rng.permutation(len(stream))]
            for b0 in range(0, len(order), tr.update_every):
                batch = order[b0:b0 + tr.update_every]
                cands = [self.retriever.candidates(t) for t in batch]
                paths = self.retriever.sample(cands, self._next_key())
                records: list[PathRecord] = []
                for (t, c, (members, actions, _)) in zip(batch, cands, paths):
                    seed = seed_base + epoch * 100_003 + self.processed
                    ref_id, ref = self.labeler.reference(t, seed=seed)
                    run, y = ref, 0.0
                    executed = set()
                    if members:
                        lab, run = self.labeler.label(t, members, seed=seed, kind="retrieved")
                        self.add_label(t, lab, members)
                        y = lab.y
                        executed.add(lab.members)
                    records.append(PathRecord(c.ctx, c.rows, c.costs, c.valid, self.retriever.budget, actions, y))
                    self._write(t, run, seed)
                    order_members = [c.memories[a] for a in actions if 0 <= a < len(c.memories)]
                    window.append(WindowTask(c, order_members, seed, ref_id, executed))
                    self.processed += 1
                    if self.row.probing is not None and self.processed % h == 0:
                        self.probe_window(window, on_window=on_window)
                        window = []
                if self.row.online:
                    self._update(tr.steps_per_update, records, policy=True)
        self.train_log.seconds["train"] = time.perf_counter() - t0

    #: threads for the executions of one probe window or of bootstrap probing (independent executions;
    #: results identical to the serial run, :func:`cfjax.uplift.probing.label_many`). ``None``: the
    #: executor backbone's ``max_inflight`` (1 for the scripted simulator and the direct executors).
    probe_threads: int | None = None

    def threads_for_probes(self) -> int:
        """The thread count of probe executions (:attr:`probe_threads`)."""
        if self.probe_threads is not None:
            return max(1, int(self.probe_threads))
        return inflight_of(getattr(self.labeler.executor, "backbone", None))

    def probe_window(self, window: Sequence[WindowTask], *, budget: int | None = None, strategy: str | None = None,
                     on_window: Callable | None = None, probing: ProbingSection | None = None,
                     choose: Callable[[Window, int], list] | None = None) -> list[Label]:
        """One acquisition event: build the B.2 window, acquire, execute, label, update.

        ``probing`` replaces the config's probing section for this event; ``choose(window, budget)``
        replaces the acquisition rule (a study's oracle; it returns picks of ``window.sets``)."""
        p = probing or self.cfg.probing
        win = build_window(window, self.retriever, self.labels, p, self.rng)
        key = self._next_key()
        if choose is not None:
            picks = choose(win, p.budget if budget is None else int(budget))
        else:
            picks = acquire(win, p, key, budget=budget, strategy=strategy or self.row.probing)
        labels = []
        items = [(win.tasks[ti].cands.task, list(members), win.tasks[ti].seed) for ti, members in picks]
        for (ti, members), (lab, _) in zip(picks, label_many(self.labeler, items, kind="probe",
                                                             threads=self.threads_for_probes())):
            wt = win.tasks[ti]
            wt.executed.add(set_key(members))
            self.add_label(wt.cands.task, lab, list(members))
            labels.append(lab)
        self.train_log.windows.append({"tasks": self.processed, "window": len(window), "pool": win.n_pool_total,
                                       "comparisons": win.n_comp_total, "probes": len(labels),
                                       "mean_y": float(np.mean([lab.y for lab in labels])) if labels else 0.0})
        if on_window is not None:
            on_window(win, picks, labels)
        if self.row.online and labels:
            self._update(self.cfg.training.steps_per_update, policy=True)
        return labels

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, tasks: Sequence[Task], *, repeats: int | None = None, rows: Sequence[str] = (
            "no_memory", "similarity_topk", "upliftmem"), row_name: str | None = None) -> EvalResult:
        """Held-out tasks with the fixed checkpoint (module docstring); ``row_name`` renames the trained row."""
        reps = self.cfg.eval_repeats if repeats is None else repeats
        name = row_name or self.row.name
        labeler = Labeler(self.labeler.executor, self.labeler.spec, Ledger("uplift-eval"), ExecutionLog())
        cands = [self.retriever.candidates(t) for t in tasks]
        beam = self.retriever.beam(cands) if "upliftmem" in rows else [([], 0.0)] * len(tasks)
        chosen = {"no_memory": [[] for _ in tasks], "similarity_topk": [self.retriever.native(c) for c in cands],
                  "upliftmem": [s for s, _ in beam]}
        out_rows = [r if r != "upliftmem" else name for r in rows]
        res = EvalResult([t.task_id for t in tasks], {r: [] for r in out_rows}, {r: [] for r in out_rows},
                         {r: [] for r in out_rows}, {r: [] for r in out_rows}, {r: [] for r in out_rows})
        for r in range(reps):
            seed = self.cfg.eval_seed + r
            for row, out in zip(rows, out_rows):
                solved, rew, sizes, infos, sets = [], [], [], [], []
                runs = labeler.run_many(list(zip(tasks, chosen[row])), seed=seed, purpose="eval",
                                        workers=self.eval_workers)
                for (_, ex), mems in zip(runs, chosen[row]):
                    solved.append(int(ex.solved))
                    rew.append(float(ex.R))
                    sizes.append(len(mems))
                    infos.append(dict(ex.info))
                    sets.append(set_key(mems))
                res.outcomes[out].append(solved)
                res.rewards[out].append(rew)
                res.set_sizes[out].append(sizes)
                res.infos[out].append(infos)
                res.sets[out].append(sets)
        self.eval_counts = labeler.log.counts()
        return res

    def counts(self) -> dict:
        """Training executions by purpose (each once, App. D.3) and the ledger's totals."""
        return {**self.labeler.log.counts(), "labels": len(self.labels), "pool": len(self.pool),
                "tokens": self.ledger.total.tokens, "ledger_llm_calls": self.ledger.total.llm_calls,
                "ledger_eval_calls": self.ledger.total.eval_calls}

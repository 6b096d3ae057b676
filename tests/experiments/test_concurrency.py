"""Threads where the work is independent give the serial run's results, whatever the completion order.

* decision-table building (:func:`cfjax.countermem.table.build_table`): every part on 8 threads → the
  same table, byte for byte (content hash), as on one thread;
* UpliftMem probe executions (:func:`cfjax.uplift.probing.label_many`, used by bootstrap probing and
  every probe window): 8 threads → the same labels, execution log (ids, purposes, reuse counts) and
  ledger as one thread — on a stub executor with random delays (to scramble completion order) and
  on a short UpliftMem run with the scripted backbone.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import random
import threading
import time

import numpy as np
import pytest

from cfjax.config import CounterMemConfig, ScriptedConfig
from cfjax.config.uplift import ProbingSection, TrainingSection, UpliftConfig
from cfjax.countermem.agent import Agent
from cfjax.countermem.pipeline import construct
from cfjax.countermem.store import MemoryStore
from cfjax.countermem.table import build_table, table_jobs
from cfjax.infra.ledger import Ledger
from cfjax.llm.scripted import ScriptedBackbone
from cfjax.types import Outcome, Splits, Task, Usage
from cfjax.uplift import AgentExecutor, TrainingRow, UpliftRun
from cfjax.uplift.core import Execution, ExecutionLog, Labeler, Memory
from cfjax.uplift.probing import label_many

# --------------------------------------------------------------------------- decision tables


@pytest.fixture(scope="module")
def table_agent(suite):
    s = suite.splits(seed=3)
    splits = Splits(s.build[:16], s.train[:5], s.val[:2], s.eval[:4])
    cfg = CounterMemConfig()
    store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    world = suite.world()
    agent = Agent(ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0)), world, cfg, store=store,
                  envs=suite.specs, edits=suite.edits)
    construct(agent, splits.build, seed=0)
    yield agent, splits
    world.close()


def _files_digest(d) -> str:
    h = hashlib.sha256()
    for p in sorted((d / "parts").glob("*.npz")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def test_table_threads_identical_to_serial(table_agent, tmp_path):
    agent, splits = table_agent
    assert agent.store.frozen and len(agent.store) > 0
    t1, m1 = build_table(agent, splits, tmp_path / "serial", samples=2, threads=1)
    t8, m8 = build_table(agent, splits, tmp_path / "threads", samples=2, threads=8)
    assert m1.rows > len(table_jobs(splits, 2))  # some roots have children: the graph is not trivial
    assert m8.hash == m1.hash and m8 == m1
    for a, b in zip(t1, t8):
        np.testing.assert_array_equal(a, b)
    assert _files_digest(tmp_path / "threads") == _files_digest(tmp_path / "serial")  # every part, byte for byte


def test_table_make_parts_is_checked(table_agent, tmp_path):
    agent, splits = table_agent
    n = len(table_jobs(splits, 1))
    with pytest.raises(RuntimeError, match="was not asked for"):
        build_table(agent, splits, tmp_path / "a", samples=1, make_parts=lambda todo: [(n + 5, b"")])
    with pytest.raises(RuntimeError, match="did not return part"):
        build_table(agent, splits, tmp_path / "b", samples=1, make_parts=lambda todo: [])


def test_table_thread_error_surfaces_and_finished_parts_resume(table_agent, tmp_path):
    """A failing part raises its own error after the running parts finish; a resumed build reuses
    the parts already written and gives the serial table."""
    agent, splits = table_agent
    ref, _ = build_table(agent, splits, tmp_path / "ref", samples=1, threads=1)
    bad = splits.train[1].task_id

    class Flaky:
        def __init__(self, inner) -> None:
            self.inner = inner

        def evaluate(self, task, action):
            if task.task_id == bad:
                raise OSError(f"evaluator down for {task.task_id}")
            return self.inner.evaluate(task, action)

    broken = copy.copy(agent)  # the same agent with an evaluator that fails on one task
    broken.world = Flaky(agent.world)
    with pytest.raises(OSError, match="evaluator down"):
        build_table(broken, splits, tmp_path / "t", samples=1, threads=4)
    written = len(list((tmp_path / "t" / "parts").glob("*.npz")))
    assert 0 < written < len(table_jobs(splits, 1))
    again, meta = build_table(agent, splits, tmp_path / "t", samples=1, threads=4)
    assert meta.hash == build_table(agent, splits, tmp_path / "ref", samples=1)[1].hash
    for a, b in zip(ref, again):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- label_many on a stub executor


class JitterExecutor:
    """A deterministic executor (``R`` from a hash of task, set and seed) that sleeps a random time and
    counts concurrent calls: completion order is scrambled, results are not."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = self.peak = self.calls = 0
        self.jitter = random.Random()  # deliberately unseeded: the timing must not matter

    def execute(self, task: Task, memories, *, seed: int, ledger: Ledger) -> Execution:
        with self.lock:
            self.active += 1
            self.calls += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.jitter.uniform(0, 0.004))
        ids = ",".join(sorted(m.mem_id for m in memories))
        u = int(hashlib.sha256(f"{task.task_id}|{ids}|{seed}".encode()).hexdigest()[:8], 16) / 2 ** 32
        R = float(u < 0.5 + 0.1 * len(memories))
        ledger.llm(task.task_id, Usage(10 + len(memories), 3))
        ledger.evaluation(task.task_id, Outcome(R, R >= 1.0, True, ""))
        with self.lock:
            self.active -= 1
        return Execution(R=R, solved=R >= 1.0, attempts=1, memory_tokens=5 * len(memories), llm_calls=1,
                         llm_tokens=13 + len(memories), eval_calls=1)


def _items():
    tasks = [Task(f"t{i}", f"question {i}", "env", "") for i in range(6)]
    mems = [Memory(f"m{i}", f"text {i}", 5) for i in range(5)]
    items = []
    for i, t in enumerate(tasks):
        for j in range(3):  # three sets per task share the task's reference execution
            items.append((t, [mems[(i + j) % 5], mems[(i + 2 * j + 1) % 5]] if j else [mems[i % 5]], 7 + i % 2))
    items.append(items[4])  # a repeated item: read back from the log, not run again
    return items


def _state(labeler: Labeler, labels) -> tuple:
    log = labeler.log
    return ([dataclasses.astuple(lab) for lab, _ in labels], [dataclasses.astuple(ex) for _, ex in labels],
            log.keys, log.purpose, [dataclasses.astuple(r) for r in log.runs], dict(log.reuses),
            labeler.ledger.total.as_dict(), {k: v.as_dict() for k, v in labeler.ledger.per_task.items()},
            list(labeler.ledger.per_task))


@pytest.mark.parametrize("threads", [2, 8])
def test_label_many_identical_to_serial(threads):
    from cfjax.config.uplift import UtilitySpec

    spec = UtilitySpec(cost="attempts", c_max=2.0)
    runs = {}
    for n in (1, threads):
        ex = JitterExecutor()
        lab = Labeler(ex, spec, Ledger("probe"), ExecutionLog())
        lab.reference(_items()[0][0], seed=7)  # one execution already in the log before the window
        runs[n] = (_state(lab, label_many(lab, _items(), kind="probe", threads=n)), ex)
    (serial, ex1), (conc, exn) = runs[1], runs[threads]
    assert conc == serial
    # each execution once: the logged reference, then 5 more references and 6 × 3 distinct sets
    assert exn.calls == ex1.calls == 1 + 5 + 18
    assert exn.peak > 1 and ex1.peak == 1  # really concurrent
    # reuses as the serial loop counts them: 19 labels ask for a reference (5 run here); the repeated item
    assert serial[5] == {"reference": 19 - 5, "probe": 1}


# --------------------------------------------------------------------------- UpliftMem probes, scripted backbone


def test_scripted_probe_labels_threads_identical_to_serial(suite, world):
    """Probe executions through the agent loop with the scripted backbone, on memories its writer wrote
    from no-memory runs (as bootstrap writing does): 8 threads give the serial labels and log."""
    from cfjax.config.uplift import UtilitySpec
    from cfjax.uplift.pool import MemoryPool, Writer

    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=42))
    sp = suite.splits()
    build, probe_tasks = list(sp.build)[:24], list(sp.train)[:10]
    seed_lab = Labeler(AgentExecutor(bb, world, suite.edits, max_attempts=2), UtilitySpec(), Ledger("seed"))
    pool = MemoryPool()
    writer = Writer(bb, seed_lab, pool, revisions=0, tau_accept=0.0)
    for t in build:
        _, ref = seed_lab.reference(t, seed=0)
        writer.write(t, ref.trajectory, ref.solved, seed=0, ledger=seed_lab.ledger, validate=False)
    assert len(pool) >= 8
    items = []
    for i, t in enumerate(probe_tasks):  # the recalled memories, as retrieval would offer them
        top = pool.recall(t, 3)[0]
        items += [(t, top[:1], 100 + i), (t, top[:2], 100 + i), (t, [top[0], top[2]], 100 + i), (t, top[1:2], 7)]
    states = {}
    for n in (1, 8):
        lab = Labeler(AgentExecutor(bb, world, suite.edits, max_attempts=2), UtilitySpec(), Ledger("probe"))
        states[n] = _state(lab, label_many(lab, items, kind="probe", threads=n))
    assert states[8] == states[1]
    assert any(lab[2] != 0 for lab in states[1][0]), "the memories change some outcomes"


def _uplift_run(suite, world, threads: int):
    """A short UpliftMem run whose probe windows and bootstrap probing run on ``threads`` threads.
    No scorer updates (fewer programs to compile; the labels are what threads could change); the
    shapes are those of tests/uplift/test_pipeline.py, so a full test session compiles them once."""
    cfg = UpliftConfig(training=TrainingSection(epochs=1, update_every=8),
                       probing=ProbingSection(budget=20, max_pool=256, max_comparisons=256))
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=42))
    run = UpliftRun(cfg, AgentExecutor(bb, world, suite.edits, max_attempts=2), domain="sql", k_max=5,
                    writer_backbone=bb, row=TrainingRow("probes", warmup=False, online=False))
    run.probe_threads = threads
    assert run.threads_for_probes() == threads
    sp = suite.splits()
    windows = []
    run.bootstrap(list(sp.build)[:8])
    run.train(list(sp.train)[:8], on_window=lambda win, picks, labels: windows.append(labels))
    log = run.labeler.log
    return {"labels": [dataclasses.astuple(lab) for lab in run.labels.labels],
            "windows": [[dataclasses.astuple(lab) for lab in w] for w in windows],
            "keys": log.keys, "purpose": log.purpose, "reuses": dict(log.reuses),
            "runs": [(r.R, r.solved, r.attempts, r.llm_tokens, r.trajectory) for r in log.runs],
            "ledger": run.ledger.total.as_dict(), "per_task": {k: v.as_dict() for k, v in run.ledger.per_task.items()}}


@pytest.mark.slow
def test_uplift_run_probes_threads_identical_to_serial(suite, world):
    serial = _uplift_run(suite, world, 1)
    conc = _uplift_run(suite, world, 8)
    assert sum(len(w) for w in serial["windows"]) > 0, "the run acquired probes"
    assert {"bootstrap", "probe"} <= set(serial["purpose"])
    for key in serial:
        assert conc[key] == serial[key], key

"""Ray as the distributed executor: one local Ray instance (2 CPUs) for the module.

* ``cfjax countermem run``-style units (scripted backbone, quick settings, 4 tasks per split) as Ray
  tasks give exactly the serial run's results, in job order;
* a decision table whose parts are Ray tasks (the agent rebuilt in the workers from the suite and
  the frozen store's payload) has the local build's content hash;
* a failing Ray task surfaces with its job's description;
* the executor names and settings are checked.
"""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

ray = pytest.importorskip("ray")

from cfjax.config import CounterMemConfig, quick  # noqa: E402
from cfjax.countermem.agent import Agent  # noqa: E402
from cfjax.countermem.pipeline import construct  # noqa: E402
from cfjax.countermem.store import MemoryStore  # noqa: E402
from cfjax.countermem.table import build_table  # noqa: E402
from cfjax.domains import build_suite  # noqa: E402
from cfjax.experiments.countermem.runner import BackboneSpec, make_jobs, run_jobs, suite_world_kwargs  # noqa: E402
from cfjax.experiments.countermem.table_jobs import ray_table_parts  # noqa: E402
from cfjax.infra.executors import ExecutorTaskError, RayExecutor, describe_job, resolve_executor  # noqa: E402
from cfjax.infra.io import InputError  # noqa: E402
from cfjax.llm.scripted import ScriptedBackbone  # noqa: E402
from cfjax.types import Splits  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield RayExecutor()
    ray.shutdown()


def _stable(unit: dict) -> str:
    """A unit's result without what depends on scheduling (wall-clock seconds)."""
    return json.dumps({k: v for k, v in unit.items() if k not in ("seconds", "timing")}, sort_keys=True)


@pytest.mark.slow
def test_countermem_units_on_ray_equal_the_serial_run(local_ray, tmp_path):
    cfg = quick(CounterMemConfig())
    cfg = dataclasses.replace(cfg, seeds=(0, 1),
                              dqn=dataclasses.replace(cfg.dqn, total_decisions=40, checkpoint_every=20))
    roots = {"sql": tmp_path / "suites" / "sql"}
    build_suite("sql", roots["sql"])
    jobs = make_jobs(cfg, roots, rows=("none", "cf_memory"), backbone=BackboneSpec("scripted"), max_tasks=4,
                     out=tmp_path / "ray")
    serial_jobs = make_jobs(cfg, roots, rows=("none", "cf_memory"), backbone=BackboneSpec("scripted"), max_tasks=4,
                            out=tmp_path / "serial")
    # the Ray tasks run in the workers while the serial run runs here (the machine has few cores)
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(ray=run_jobs(jobs, executor=local_ray, log=got.setdefault(
        "lines", []).append)))
    t.start()
    serial = run_jobs(serial_jobs, workers=1)
    t.join()
    assert "ray" in got, "the Ray run raised (see the thread's traceback above)"
    on_ray = got["ray"]
    assert [(u["suite"], u["seed"]) for u in on_ray] == [("sql", 0), ("sql", 1)]  # job order
    assert [_stable(u) for u in on_ray] == [_stable(u) for u in serial]
    assert len(got["lines"]) == 2 and all(line.startswith("sql split") for line in got["lines"])
    for u in serial:  # artifacts go through the output directory: the same files, written by the workers
        d = f"sql/split_{u['split_seed']}/seed_{u['seed']}"
        assert (tmp_path / "ray" / d / "store.json").read_bytes() == (tmp_path / "serial" / d / "store.json").read_bytes()
        assert (tmp_path / "ray" / d / "selector").is_dir()


def test_decision_table_parts_on_ray_equal_the_local_build(local_ray, suite, tmp_path):
    cfg = CounterMemConfig()
    sp = suite.splits(seed=cfg.split_seed, n_val=cfg.n_val)
    splits = Splits(sp.build[:12], sp.train[:4], sp.val[:2], sp.eval[:3])
    store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    world = suite.world(**suite_world_kwargs(suite, cfg))
    agent = Agent(ScriptedBackbone(suite.scripted_domain(), dataclasses.replace(cfg.scripted, seed=0)), world, cfg,
                  store=store, envs=dict(suite.envs()), edits=suite.edits)
    construct(agent, splits.build, seed=0)
    try:
        _, local = build_table(agent, splits, tmp_path / "local", samples=2)
        lines: list[str] = []
        make = ray_table_parts(local_ray, suite="sql", root=suite.root, config=cfg, seed=0, splits=splits,
                               samples=2, store_payload=store.to_payload(), parts_per_task=9, log=lines.append)
        _, remote = build_table(agent, splits, tmp_path / "ray", samples=2, make_parts=make)
    finally:
        world.close()
    assert remote == local  # same rows, roots and content hash
    assert lines == ["decision table: 18 part(s) as 2 Ray task(s)"]


def test_a_failing_ray_task_names_its_job(local_ray, tmp_path):
    cfg = quick(CounterMemConfig())
    jobs = make_jobs(cfg, {"sql": tmp_path / "no_such_suite"}, rows=("none",), backbone=BackboneSpec("scripted"),
                     max_tasks=2)
    with pytest.raises(ExecutorTaskError) as e:
        run_jobs(jobs, executor=local_ray)
    msg = str(e.value)
    # the job is named (its long fields may be elided, e.g. a deep tmp root)
    assert msg.startswith("Ray task for UnitJob(suite='sql'") and "seed=0" in msg and "failed:" in msg
    assert e.value.job == jobs[0] and e.value.cause is not None


def test_executor_settings_are_checked():
    assert resolve_executor("local") == "local" and resolve_executor(None) == "local"
    assert resolve_executor("ray", task_cpus=2) == RayExecutor(num_cpus=2.0)
    assert resolve_executor(RayExecutor(num_gpus=1), task_cpus=4).num_cpus == 4.0
    with pytest.raises(InputError, match="unknown executor 'dask'"):
        resolve_executor("dask")
    with pytest.raises(InputError, match="--task-cpus applies to --executor ray only"):
        resolve_executor("local", task_cpus=2)
    with pytest.raises(InputError, match="CPUs must be > 0"):
        RayExecutor(num_cpus=0)
    job = make_jobs(CounterMemConfig(), {"sql": "/x"}, rows=("none",), backbone=BackboneSpec("scripted"))[0]
    text = describe_job(job)
    assert text.startswith("UnitJob(suite='sql', root='/x', seed=0, rows=('none',)")
    assert "config" not in text and "backbone" not in text

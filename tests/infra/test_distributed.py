"""Selector training over several JAX processes (cfjax/infra/distributed.py, countermem/selectors.py).

The end-to-end test starts two CPU processes on loopback (a free port, ``JAX_PLATFORMS=cpu``, the group
given by the ``CFJAX_*`` variables) next to a plain single-process run of the same worker
(tests/infra/_dist_worker.py) and checks every selector's parameters and returns against it within
1e-6; the others check the pieces (spec resolution, round-robin shards with padding, the reordering,
the single-process paths) in this process without starting a group.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from cfjax.infra.distributed import (DistributedError, ProcessInfo, ProcessSpec, check_same_work, gather_items,
                                     init_processes, interleave, process_shard, process_spec)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKER = HERE / "_dist_worker.py"
TIMEOUT_S = 240  # a worker that does not finish by then has hung (each needs ~10 s of CPU)


# --------------------------------------------------------------------------- the pieces


def test_process_spec_from_arguments_then_environment():
    env = {"CFJAX_COORDINATOR": "10.0.0.1:7777", "CFJAX_NUM_PROCESSES": "4", "CFJAX_PROCESS_ID": "3"}
    assert process_spec(environ=env) == ProcessSpec("10.0.0.1:7777", 4, 3)
    assert process_spec(process_id=1, environ=env) == ProcessSpec("10.0.0.1:7777", 4, 1)  # the argument wins
    assert process_spec("[::1]:80", 2, 0, environ={}) == ProcessSpec("[::1]:80", 2, 0)
    assert process_spec(environ={}) is None  # nothing asked: a plain run
    assert process_spec(num_processes=1, environ={}) is None
    assert process_spec("localhost:1234", "1", "0", environ={}) is None


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_processes=2, process_id=0), r"missing: coordinator \(--coordinator or CFJAX_COORDINATOR\)"),
    (dict(coordinator="h:1", num_processes=2), r"missing: process_id"),
    (dict(coordinator="h:1", num_processes=2, process_id=2), r"process id 2 is out of range for 2 processes"),
    (dict(coordinator="h:1", num_processes=2, process_id=-1), r"out of range"),
    (dict(coordinator="h:1", num_processes=0, process_id=0), r"at least 1"),
    (dict(coordinator="h:1", num_processes="two", process_id=0), r"number of processes must be an integer"),
    (dict(coordinator="nohost", num_processes=2, process_id=0), r"'nohost'.*not HOST:PORT"),
    (dict(coordinator="h:99999", num_processes=2, process_id=0), r"not HOST:PORT"),
    (dict(num_processes=1, process_id=1), r"out of range for 1 process"),
])
def test_process_spec_errors_name_the_problem(kwargs, match):
    with pytest.raises(DistributedError, match=match):
        process_spec(**kwargs, environ={})


def test_process_spec_names_the_environment_variable_at_fault():
    with pytest.raises(DistributedError, match="environment variable CFJAX_PROCESS_ID"):
        process_spec(environ={"CFJAX_COORDINATOR": "h:1", "CFJAX_NUM_PROCESSES": "2", "CFJAX_PROCESS_ID": "x"})


def test_round_robin_shards_with_padding_cover_every_item_once():
    for n, p in [(9, 2), (6, 2), (5, 3), (2, 4), (1, 1), (7, 7)]:
        shards = [process_shard(n, p, i) for i in range(p)]
        assert {s.slots for s in shards} == {-(-n // p)}  # the same shape on every process
        real = sorted(int(i) for s in shards for i in s.items[s.mask])
        assert real == list(range(n))
        for i, s in enumerate(shards):
            assert list(s.items[s.mask]) == list(range(i, n, p))  # process i: items i, i + P, …
            assert (s.items[~s.mask] == 0).all()  # padding repeats item 0 (a valid input)
    with pytest.raises(ValueError, match="nothing to shard"):
        process_shard(0, 2, 0)
    with pytest.raises(ValueError, match="process 2 of 2"):
        process_shard(4, 2, 2)


def test_interleave_restores_item_order():
    n, p = 7, 3
    per_process = [process_shard(n, p, i) for i in range(p)]
    # what each process computed for its slots: the item number itself (padding: item 0's value)
    gathered = np.stack([np.stack([s.items * 10, s.items * 10 + 1], axis=1) for s in per_process])  # [P, L, 2]
    out = interleave(gathered, n)
    assert out.shape == (n, 2) and list(out[:, 0]) == [10 * i for i in range(n)]
    with pytest.raises(ValueError, match="cannot hold"):
        interleave(gathered, 10)


def test_single_process_paths_need_no_group():
    assert init_processes(environ={}) == ProcessInfo(0, 1)  # nothing asked: no coordinator is started
    assert not jax.distributed.is_initialized()
    shard = process_shard(3, 1, 0)
    tree = {"a": np.arange(6.0).reshape(3, 2), "b": np.array([True, False, True])}
    out = gather_items(tree, shard)
    assert np.array_equal(out["a"], tree["a"]) and np.array_equal(out["b"], tree["b"])
    check_same_work("anything")  # one process agrees with itself


def test_joining_a_group_after_jax_started_is_refused_in_plain_words():
    jax.devices()  # the backend is up in this process
    with pytest.raises(DistributedError, match="before any JAX computation"):
        init_processes("127.0.0.1:9", 2, 1, environ={})
    assert not jax.distributed.is_initialized()


def test_a_missing_coordinator_is_a_clear_error_not_a_jax_abort():
    from cfjax.infra.distributed import _wait_for_coordinator

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        _wait_for_coordinator(ProcessSpec(f"127.0.0.1:{port}", 2, 1), timeout_s=5)  # answers: returns at once
    with pytest.raises(DistributedError, match=rf"process 1 of 2: no coordinator answered at 127.0.0.1:{port} "
                                               r"within 0.5 s .*start process 0 with the same address"):
        _wait_for_coordinator(ProcessSpec(f"127.0.0.1:{port}", 2, 1), timeout_s=0.5)


# --------------------------------------------------------------------------- two processes on loopback


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**group: str) -> dict[str, str]:
    """A clean environment for a worker: CPU only, one device, no inherited group or proxy."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CFJAX_", "JAX_", "XLA_")) and "proxy" not in k.lower()}
    path = [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(path))
    env.update({f"CFJAX_{k.upper()}": v for k, v in group.items()})
    return env


def _run_all(jobs: dict[str, tuple[list[str], dict[str, str]]], *, expect_rc: int = 0) -> dict[str, str]:
    """Start every job at once, wait for all (killing the rest on a timeout); fail with every job's output tail
    unless every job exits with ``expect_rc``."""
    procs = {name: subprocess.Popen([sys.executable, str(WORKER), *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True) for name, (args, env) in jobs.items()}
    outs, failed = {}, []
    for name, proc in procs.items():
        try:
            outs[name], _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for other in procs.values():
                other.kill()
            outs[name] = (proc.communicate()[0] or "") + f"\n[killed after {TIMEOUT_S} s]"
        if proc.returncode != expect_rc:
            failed.append(name)
    if failed:
        pytest.fail(f"worker(s) did not exit with status {expect_rc}: " + ", ".join(failed) + "\n" + "\n".join(
            f"----- {n} (exit {procs[n].returncode}) -----\n{outs[n][-3000:]}" for n in procs))
    return outs


def _save_table(directory: Path) -> None:
    """The worker's table, saved as ``cfjax countermem table`` would (the entry point loads and checks it)."""
    from _dist_worker import MAX_DEPTH, make_table

    from cfjax.countermem.table import TableMeta, save_table
    from cfjax.kernels.trainer import table_hash

    table = make_table()
    roots = {k: len(getattr(table, f"{k}_roots")) for k in ("train", "val", "eval")}
    directory.mkdir()
    save_table(directory, table, TableMeta(table_hash(table), len(table.obs), roots, MAX_DEPTH, 1, "hand", "hand", 0))


def _assert_close(got: dict, want: dict, label: str) -> None:
    assert set(got) == set(want), label
    for k in want:
        if k == "processes":
            continue
        a, b = np.asarray(got[k], np.float64), np.asarray(want[k], np.float64)
        assert a.shape == b.shape, (label, k, a.shape, b.shape)
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0, equal_nan=True, err_msg=f"{label}: {k}")


def test_two_processes_on_loopback_match_one_process(tmp_path):
    from _dist_worker import GRID, SEEDS

    _save_table(tmp_path / "table")
    single, multi = tmp_path / "single", tmp_path / "multi"
    single.mkdir(), multi.mkdir()
    coord = f"127.0.0.1:{_free_port()}"
    args = [str(tmp_path / "table")]
    outs = _run_all({
        "single process": (args + [str(single)], _env()),
        "process 0 of 2": (args + [str(multi)], _env(coordinator=coord, num_processes="2", process_id="0")),
        "process 1 of 2": (args + [str(multi)], _env(coordinator=coord, num_processes="2", process_id="1")),
    })
    ref = dict(np.load(single / "result-0.npz"))
    assert int(ref["processes"]) == 1 and ref["val_return"].shape == (1 * 3, len(SEEDS))
    assert any(k.startswith("params[") for k in ref) and any(k.startswith("best_params[") for k in ref)
    for pid in (0, 1):  # every process holds every selector, in the original order
        got = dict(np.load(multi / f"result-{pid}.npz"))
        assert int(got["processes"]) == 2
        _assert_close(got, ref, f"process {pid} of 2 vs one process")
    # the command's entry point: process 0 wrote the results, process 1 only said so
    assert sorted(p.name for p in multi.iterdir()) == ["result-0.npz", "result-1.npz", "selectors.json"]
    js, js1 = (json.loads((d / "selectors.json").read_text()) for d in (multi, single))
    assert js["processes"] == 2 and js1["processes"] == 1 and len(GRID) == 1
    for k in ("val_return", "eval_return", "eval_solved", "final_eval_return", "final_eval_solved", "best_decision"):
        np.testing.assert_allclose(js[k], js1[k], atol=1e-6, rtol=0, err_msg=k)
    assert "on 1 device(s) × 2 processes" in outs["process 0 of 2"]
    assert "process 1/2: trained its share of 9 selectors" in outs["process 1 of 2"]
    assert "always top-1" not in outs["process 1 of 2"]  # the report is process 0's


def test_processes_given_different_work_refuse_to_train(tmp_path):
    _save_table(tmp_path / "table")
    coord = f"127.0.0.1:{_free_port()}"
    args = [str(tmp_path / "table"), str(tmp_path)]
    outs = _run_all({
        "process 0 of 2": (args + ["0,3,7"], _env(coordinator=coord, num_processes="2", process_id="0")),
        "process 1 of 2": (args + ["0,3,8"], _env(coordinator=coord, num_processes="2", process_id="1")),
    }, expect_rc=1)
    for out in outs.values():
        assert "DistributedError: the processes were given different selector jobs: process(es) 1 differ" in out
    assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.npz"))  # nothing trained, nothing written

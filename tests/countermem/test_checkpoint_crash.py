"""Crash safety of trainer checkpoints (cfjax/infra/checkpoint.py, selectors.train_resumable).

Worker processes (``_ckpt_crash_worker.py``) run ``train_resumable`` on a tiny table with a
checkpoint after every chunk; the test SIGKILLs them at random moments chosen relative to the save
phases they announce (inside orbax's write, around the meta sidecar, the fsync, the commit rename,
the pruning of old steps, and between saves), then starts a fresh process on the same directory,
kills it again, and so on. Every resume must start from the newest complete checkpoint (never losing
a committed one), and the finished run must be bit-identical to an uninterrupted one.

Speed: the runs are processes forked by one server per chain (imports paid once per chain), and
reuse a persistent JAX compilation cache filled by the uninterrupted reference run; the chains run
concurrently. Each run still starts JAX's backend, traces and loads its programs: ~2 s of CPU.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp
import pytest

from cfjax.infra import checkpoint
from cfjax.infra.checkpoint import (IncompleteCheckpointError, committed_steps, has_checkpoint, load_latest,
                                    load_params, save_params, save_step)
from cfjax.infra.io import atomic_write_json, read_json

WORKER = Path(__file__).with_name("_ckpt_crash_worker.py")
ROOT = Path(__file__).resolve().parents[2]
CHAINS = 4  # directories trained concurrently, each killed KILLS times in a row
KILLS = 5  # 4 × 5 = 20 kills
TOTAL, EVERY = 240, 20  # the worker's DQNConfig: 12 chunks, a checkpoint after each
PHASE_SLEEP_S = 0.02  # the worker pauses this long at each announced phase of a save
# (phase, max delay s): kill a uniform random delay after the worker announced the phase
ANCHORS = [("tmp_created", 0.08), ("item_written", 0.03), ("meta_written", 0.03), ("synced", 0.03),
           ("committed", 0.03), ("trashed", 0.02), ("pruned", 0.05)]
DEADLINE_S = 240.0  # a hung worker fails the test instead of blocking it


def _env(cache: Path) -> dict:
    env = dict(os.environ)
    env.update(JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    return env


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else ""


def _newest_decisions(ckdir: Path) -> int | None:
    steps = committed_steps(ckdir)
    return read_json(steps[0] / "meta.json")["decisions"] if steps else None


class _Server:
    """One fork server (``_ckpt_crash_worker.py serve``): a child per :meth:`start`."""

    def __init__(self, env: dict, log: Path):
        self.log = log
        self.p = subprocess.Popen([sys.executable, str(WORKER), "serve"], cwd=ROOT, env=env, text=True, bufsize=1,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "wb"),
                                  start_new_session=True)
        self.watchdog = threading.Timer(DEADLINE_S, self.kill)
        self.watchdog.start()

    def kill(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def start(self, ckdir: Path, out: Path, sleep_s: float) -> int:
        self.p.stdin.write(json.dumps([str(ckdir), str(out), sleep_s]) + "\n")
        self.p.stdin.flush()
        w = self.line()
        assert w[0] == "PID", (w, _tail(self.log))
        return int(w[1])

    def line(self) -> list[str]:
        text = self.p.stdout.readline()
        assert text, f"worker server gone (deadline {DEADLINE_S} s?): {_tail(self.log)}"
        return text.split()

    def until_exit(self) -> tuple[int, list[list[str]]]:
        """The child's exit status and the lines it printed after the last one read."""
        lines = []
        while (w := self.line())[0] != "EXIT":
            lines.append(w)
        return int(w[1]), lines

    def close(self) -> None:
        try:
            self.p.stdin.write("null\n")
            self.p.stdin.close()
            self.p.wait(timeout=30)
        finally:
            self.watchdog.cancel()
            self.kill()
            self.p.stdout.close()


def _chain(i: int, base: Path, srv: _Server, rng: random.Random, kills: list[dict]) -> None:
    ckdir, out = base / f"chain{i}", base / f"chain{i}.npz"
    for k in range(KILLS):
        before = _newest_decisions(ckdir)
        pid = srv.start(ckdir, out, PHASE_SLEEP_S)
        first = srv.line()
        # resume always succeeds, from the newest complete checkpoint
        assert first == (["FRESH"] if before is None else ["LOADED", str(before)]), (first, before, _tail(srv.log))
        loaded = 0 if before is None else before
        remaining = (TOTAL - loaded) // EVERY
        assert remaining >= 1
        target_save = rng.randrange(min(2, remaining))  # kill during/after the 1st or 2nd save of this process
        anchor, max_delay = rng.choice(ANCHORS)
        delay = rng.uniform(0.0, max_delay)
        seen = {"saves": 0, "committed": loaded, "inflight": None, "synced": False}

        def track(w: list[str]) -> None:
            assert w[0] == "P", (w, anchor, target_save, _tail(srv.log))  # not DONE before the kill
            phase, dec = w[1], int(w[2])
            if phase == "meta_written":
                seen["inflight"] = dec
            elif phase == "synced":
                seen["synced"] = True
            elif phase == "committed":
                seen.update(committed=dec, inflight=None, synced=False)
            elif phase == "pruned":
                seen["saves"] += 1

        while True:
            w = srv.line()
            saves = seen["saves"]
            track(w)
            if w[1] == anchor and saves >= target_save:  # (there is no "trashed" before 3 steps)
                time.sleep(delay)
                os.kill(pid, signal.SIGKILL)
                break
        status, late = srv.until_exit()  # what it printed before the kill arrived
        assert status == -signal.SIGKILL, (status, _tail(srv.log))
        for w in late:
            track(w)
        names = sorted(os.listdir(ckdir)) if ckdir.exists() else []
        after = _newest_decisions(ckdir)
        # a committed checkpoint is never lost; a newer one exists only if the kill came after its fsync
        allowed = {seen["committed"]} | ({seen["inflight"]} if seen["synced"] else set())
        assert (after or 0) in allowed, (anchor, delay, seen, after, names)
        kills.append(dict(chain=i, k=k, anchor=anchor, delay=delay, save=target_save, names=names,
                          tmp=any(n.startswith(".tmp-") for n in names),
                          trash=any(n.startswith(".trash-") for n in names),
                          extra_step=sum(n.startswith("ckpt_") for n in names) > 2))
    # the last resume runs to the end
    before = _newest_decisions(ckdir)
    srv.start(ckdir, out, 0.0)
    status, lines = srv.until_exit()
    assert status == 0 and lines[-1] == ["DONE"], (status, lines[-3:], _tail(srv.log))
    assert lines[0] == (["FRESH"] if before is None else ["LOADED", str(before)])


def test_kill9_during_checkpointing_resumes_bit_exactly(tmp_path):
    t0 = time.perf_counter()
    env = _env(tmp_path / "jax_cache")
    servers = [_Server(env, tmp_path / f"server{i}.log") for i in range(CHAINS)]  # they import concurrently
    try:
        # the uninterrupted run (it also fills the compilation cache the others reuse)
        servers[0].start(tmp_path / "ref", tmp_path / "ref.npz", 0.0)
        status, lines = servers[0].until_exit()
        assert status == 0 and lines[0] == ["FRESH"] and lines[-1] == ["DONE"], (status, _tail(servers[0].log))
        assert sum(w[:2] == ["P", "committed"] for w in lines) == TOTAL // EVERY

        rng = random.Random(12)
        kills: list[dict] = []
        errors: list[BaseException] = []

        def chain(i: int, seed: float) -> None:
            try:
                _chain(i, tmp_path, servers[i], random.Random(seed), kills)
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)

        threads = [threading.Thread(target=chain, args=(i, rng.random())) for i in range(CHAINS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    finally:
        for s in servers:
            s.close()
    assert len(kills) == CHAINS * KILLS >= 20
    assert len({(k["anchor"], k["save"], k["delay"]) for k in kills}) == len(kills)  # different timings
    # some kills hit a save before its commit (its temp directory was left behind), some between
    # the commit and the end of the pruning of old steps
    assert sum(k["tmp"] for k in kills) >= 2, kills
    assert sum(k["trash"] or k["extra_step"] for k in kills) >= 1, kills

    ref = np.load(tmp_path / "ref.npz")
    for i in range(CHAINS):
        got = np.load(tmp_path / f"chain{i}.npz")
        assert sorted(got.files) == sorted(ref.files)
        for name in ref.files:
            a, b = ref[name], got[name]
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert np.array_equal(a, b, equal_nan=True) and a.tobytes() == b.tobytes(), (i, name)
        # stale temp/trash directories were cleaned up; the newest two complete steps are kept
        names = sorted(os.listdir(tmp_path / f"chain{i}"))
        assert [n[:5] for n in names] == ["ckpt_", "ckpt_"], names
        assert _newest_decisions(tmp_path / f"chain{i}") == TOTAL
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{len(kills)} kills, {sum(k['tmp'] for k in kills)} left a temp directory, "
          f"{sum(k['trash'] or k['extra_step'] for k in kills)} hit the pruning; {time.perf_counter() - t0:.1f} s, "
          f"subprocess CPU {cpu.ru_utime + cpu.ru_stime:.1f} s")


# --------------------------------------------------------------------------- the protocol, in process


def _tree(x: float) -> dict:
    return {"w": np.full((3, 4), x, np.float32), "b": np.arange(5, dtype=np.int32) + int(x)}


def _same(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


def test_keeps_newest_steps_and_falls_back_from_an_unreadable_one(tmp_path):
    d = tmp_path / "ck"
    for x in (1.0, 2.0, 3.0):
        step = save_step(d, "state", _tree(x), {"x": x}, keep=2)
    assert [p.name for p in committed_steps(d)] == ["ckpt_00000003", "ckpt_00000002"]
    assert sorted(os.listdir(d)) == ["ckpt_00000002", "ckpt_00000003"]
    tree, meta, got = load_latest(d, "state", _tree(0.0))
    assert got == step and meta == {"x": 3.0} and _same(tree, _tree(3.0))
    (step / "meta.json").write_text('{"format": "cfjax/1", "sha256": "00", "payl')  # a damaged disk
    with pytest.warns(UserWarning, match="unreadable"):
        tree, meta, got = load_latest(d, "state", _tree(0.0))
    assert got.name == "ckpt_00000002" and meta == {"x": 2.0} and _same(tree, _tree(2.0))


def test_a_failed_save_keeps_the_previous_params(tmp_path, monkeypatch):
    d = tmp_path / "selector"
    save_params(d, _tree(1.0), {"v": 1})
    for phase in ("tmp_created", "item_written", "meta_written", "synced"):
        def boom(p, _path, phase=phase):
            if p == phase:
                raise RuntimeError(f"crash at {p}")
        monkeypatch.setattr(checkpoint, "_crash_hook", boom)
        with pytest.raises(RuntimeError, match=phase):
            save_params(d, _tree(2.0), {"v": 2})
        params, meta = load_params(d, _tree(0.0))
        assert meta == {"v": 1} and _same(params, _tree(1.0))
        assert sorted(os.listdir(d)) == ["ckpt_00000001"]  # the failed save's temp directory is gone
    monkeypatch.setattr(checkpoint, "_crash_hook", None)
    save_params(d, _tree(2.0), {"v": 2})
    params, meta = load_params(d)
    assert meta == {"v": 2} and _same(params, _tree(2.0))
    assert sorted(os.listdir(d)) == ["ckpt_00000002"]  # save_params keeps one complete copy


def test_open_removes_only_what_dead_writers_left(tmp_path):
    d = tmp_path / "ck"
    save_step(d, "state", _tree(1.0), {"x": 1})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = checkpoint._host()
    left = [f".tmp-ckpt_00000002-{host}-{dead.pid}-0a1b2c3d", f".trash-ckpt_00000000-{host}-{dead.pid}-0a1b2c3d",
            "state.orbax-checkpoint-tmp-1712345678"]  # the last one: a killed save of the pre-step format
    live = f".tmp-ckpt_00000002-{host}-{os.getpid()}-feedbeef"  # e.g. another thread's save in progress
    for n in left + [live]:
        (d / n / "state").mkdir(parents=True)
    tree, meta, _ = load_latest(d, "state")
    assert meta == {"x": 1} and _same(tree, _tree(1.0))
    assert sorted(os.listdir(d)) == sorted([live, "ckpt_00000001"])
    old = time.time() - checkpoint.STALE_AFTER_S - 10
    os.utime(d / live, (old, old))  # ... unless it has not moved for a long time
    step = save_step(d, "state", _tree(2.0), {"x": 2})
    assert sorted(os.listdir(d)) == ["ckpt_00000001", step.name] and step.name == "ckpt_00000002"


def test_pre_step_format_loads_then_is_replaced_or_reports_its_interrupted_save(tmp_path):
    d = tmp_path / "selector"
    d.mkdir()
    ck = ocp.StandardCheckpointer()
    ck.save(d / "params", _tree(1.0))
    ck.wait_until_finished()
    ck.close()
    atomic_write_json(d / "meta.json", {"v": 1})
    assert has_checkpoint(d)
    params, meta = load_params(d, _tree(0.0))
    assert meta == {"v": 1} and _same(params, _tree(1.0))
    save_params(d, _tree(2.0), {"v": 2})
    assert sorted(os.listdir(d)) == ["ckpt_00000001"]
    assert load_params(d)[1] == {"v": 2}

    # a save of that format killed after force=True deleted params/: meta.json and a temp directory
    e = tmp_path / "killed"
    (e / "params.orbax-checkpoint-tmp-1712345678").mkdir(parents=True)
    atomic_write_json(e / "meta.json", {"v": 1})
    assert has_checkpoint(e)
    with pytest.raises(IncompleteCheckpointError, match="params is missing.*remove"):
        load_params(e)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_params(tmp_path / "nothing")
    assert not has_checkpoint(tmp_path / "nothing")

"""Subprocess of test_checkpoint_crash.py: ``train_resumable`` on a tiny table, a checkpoint every chunk.

    python _ckpt_crash_worker.py run CHECKPOINT_DIR RESULT.npz PHASE_SLEEP_S
    python _ckpt_crash_worker.py serve

``run`` trains (resuming from CHECKPOINT_DIR when it holds a checkpoint) and prints, flushed, one
per line: ``PID <pid>``; ``LOADED <decisions>`` or ``FRESH`` when it starts training; ``P <phase>
<decisions>`` at each phase of a save (:data:`cfjax.infra.checkpoint._crash_hook`; it pauses
``PHASE_SLEEP_S`` there so that kills land inside saves; decisions is -1 before the step's meta.json
exists); ``DONE`` after writing every leaf of the final state to RESULT.npz.

``serve`` is a fork server that saves the ~2-3 s of imports per run: it imports everything once
(without starting JAX's backend, so forking is safe), then reads JSON lines from stdin: for
``[dir, out, sleep]`` it forks a child doing ``run`` (whose lines go to the server's stdout), reaps
it and prints ``EXIT <status> <cpu s>`` (status ``-9`` when it was SIGKILLed); ``null`` ends it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def tiny_table(seed: int = 0):
    from cfjax.kernels.trainer import DecisionTable

    rng = np.random.default_rng(seed)
    r, a = 24, 5
    obs = rng.normal(0, 1, (r, 98)).astype(np.float32)
    mask = rng.random((r, a)) < 0.6
    mask[:, 0] = True
    solved = (rng.random((r, a)) < 0.5) & mask
    nxt = np.where(mask & ~solved & (rng.random((r, a)) < 0.5), rng.integers(0, r, (r, a)), -1).astype(np.int32)
    calls = mask.astype(np.float32)
    failed = (mask & ~solved).astype(np.float32)
    tokens = np.where(mask, 300.0, 0.0).astype(np.float32)
    roots = np.arange(r, dtype=np.int32)
    return DecisionTable(obs, mask, calls, failed, tokens, solved, nxt, roots[:12], roots[12:18], roots[18:])


CONFIG = dict(total_decisions=240, checkpoint_every=20, learning_starts=10, target_sync_every=20,
              buffer_capacity=128, batch_size=8, hidden=(16, 16))
SEEDS = (0, 1)


def say(*words) -> None:
    sys.stdout.write(" ".join(map(str, words)) + "\n")
    sys.stdout.flush()


def run(ckdir: Path, out: Path, sleep_s: float) -> None:
    import jax

    from cfjax.countermem import selectors
    from cfjax.infra import checkpoint
    from cfjax.infra.io import read_json
    from cfjax.kernels import DQNConfig

    def hook(phase: str, path: Path) -> None:
        dec = -1
        if phase in ("meta_written", "synced", "committed", "pruned"):
            dec = read_json(path / "meta.json")["decisions"]
        say("P", phase, dec)
        time.sleep(sleep_s)

    say("PID", os.getpid())
    checkpoint._crash_hook = hook
    load = selectors.load_trainer

    def load_and_say(*a, **k):
        state = load(*a, **k)
        say("LOADED", int(np.max(np.asarray(state.learner.decisions))))
        return state

    selectors.load_trainer = load_and_say
    if not checkpoint.has_checkpoint(ckdir):
        say("FRESH")
    state = selectors.train_resumable(tiny_table(), DQNConfig(**CONFIG), seeds=SEEDS, checkpoint_dir=ckdir,
                                      save_every=1)
    leaves = [np.asarray(x) for x in jax.tree.leaves(state)]
    np.savez(out, *leaves)
    say("DONE")


def serve() -> None:
    import importlib
    import traceback

    # imported once here; JAX's backend is started by each child (it must not exist before a fork)
    for module in ("jax", "cfjax.countermem.selectors", "cfjax.infra.checkpoint", "cfjax.kernels.trainer"):
        importlib.import_module(module)

    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd is None:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run(Path(cmd[0]), Path(cmd[1]), float(cmd[2]))
            except BaseException:  # noqa: BLE001 - reported on stderr, exit status 1
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status, usage = os.wait4(pid, 0)
        say("EXIT", os.waitstatus_to_exitcode(status), f"{usage.ru_utime + usage.ru_stime:.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        run(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]))

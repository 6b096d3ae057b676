"""One process of the multi-process selector-training test (tests/infra/test_distributed.py).

Run as ``python _dist_worker.py TABLE_DIR OUT_DIR [SEEDS]`` with the process group in the environment
(``CFJAX_COORDINATOR``, ``CFJAX_NUM_PROCESSES``, ``CFJAX_PROCESS_ID``; none of them: the plain
single-process run the test compares against). It runs the command's entry point
(:func:`cfjax.experiments.countermem.selectors.train_selectors_main`: :data:`SEEDS` × :data:`GRID` on the
saved table, results to ``OUT_DIR/selectors.json`` on process 0), then — the same compiled program,
from the cache — :func:`cfjax.countermem.selectors.train_selectors` directly, and writes
``OUT_DIR/result-<process id>.npz`` (atomically) with every selector's returns and parameters.
``SEEDS`` (e.g. ``0,3,8``) replaces :data:`SEEDS`: the test gives one process other seeds than the
rest to see the group refuse to train.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

from cfjax.kernels import DecisionTable, DQNConfig

#: Small enough to compile and train in seconds; two validation checkpoints.
CFG = DQNConfig(total_decisions=400, learning_starts=40, checkpoint_every=200, target_sync_every=50)
SEEDS = (0, 3, 7)
GRID = ("lr=1e-3,3e-4,1e-4",)  # 3 points × 3 seeds = 9 selectors: 5 slots per process of 2, one of them padding
MAX_DEPTH = 2


def make_table(n_per_kind: int = 6, seed: int = 0) -> DecisionTable:
    """A decision graph where the record helps on kind A (feature +1) and hurts on kind B (feature −1)."""
    rng = np.random.default_rng(seed)
    obs, mask, solved, nxt = [], [], [], []
    roots: list[int] = []

    def row(feature: float, valid: list[int], solves: list[int], children: dict[int, int] | None = None) -> int:
        z = rng.normal(0, 0.1, 98).astype(np.float32)
        z[0] = feature
        m, s, n = np.zeros(5, bool), np.zeros(5, bool), np.full(5, -1, np.int32)
        m[valid], s[solves] = True, True
        for j, c in (children or {}).items():
            n[j] = c
        obs.append(z), mask.append(m), solved.append(s), nxt.append(n)
        return len(obs) - 1

    for _ in range(n_per_kind):
        roots.append(row(1.0, [0, 1], [1], {0: row(0.5, [0], [0])}))
        roots.append(row(-1.0, [0, 1], [0], {1: row(-0.5, [0], [0])}))
        roots.append(row(0.0, [0], [0]))
    obs, mask, solved, nxt = map(np.stack, (obs, mask, solved, nxt))
    calls = mask.astype(np.float32)
    failed = (mask & ~solved).astype(np.float32)
    tokens = np.where(mask, 100.0, 0.0).astype(np.float32)
    r = np.asarray(roots, np.int32)
    return DecisionTable(obs, mask, calls, failed, tokens, solved, nxt, r[0::3].copy(), r[1::3].copy(), r[2::3].copy())


def result_arrays(res) -> dict[str, np.ndarray]:
    """Every per-selector figure and parameter of a :class:`SelectorsResult`, flat for ``np.savez``."""
    import jax

    out = {k: np.asarray(getattr(res, k)) for k in (
        "val_return", "best_decision", "eval_return", "eval_solved", "val_curve", "final_eval_return",
        "final_eval_solved", "eval_root_return", "final_root_return")}
    for name, tree in (("params", res.state.learner.params), ("best_params", res.state.best_params)):
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
            out[f"{name}{jax.tree_util.keystr(path)}"] = np.asarray(leaf)
    out["processes"] = np.asarray(res.processes)
    return out


def main(argv: list[str]) -> int:
    table_dir, out = Path(argv[0]), Path(argv[1])
    from cfjax.countermem.selectors import parse_grid, train_selectors
    from cfjax.countermem.table import load_table
    from cfjax.experiments.countermem.selectors import train_selectors_main
    from cfjax.infra.distributed import process_info
    from cfjax.infra.io import atomic_write_bytes

    seeds = argv[2] if len(argv) > 2 else ",".join(map(str, SEEDS))
    train_selectors_main(table_dir, seeds=seeds, grid=list(GRID), cfg=CFG, out=out / "selectors.json", n_boot=50)
    table, meta = load_table(table_dir)
    res = train_selectors(table, CFG, seeds=SEEDS, grid=parse_grid(list(GRID)), max_depth=meta.max_depth)
    info = process_info()
    buf = io.BytesIO()
    np.savez(buf, **result_arrays(res))
    atomic_write_bytes(out / f"result-{info.process_id}.npz", buf.getvalue())
    print(f"process {info.process_id}/{info.num_processes}: wrote result-{info.process_id}.npz", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

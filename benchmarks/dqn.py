"""Selector training throughput and learning parity: cfjax kernel vs PyTorch, SB3, CleanRL-style.

Every implementation trains the CounterMem memory-use selector (papers/countermem.md
App. C.2, Table 3: 2,000 decisions, Adam lr 1e-3 / eps 1e-8, learning starts 100,
train every 4, gamma 0.95, replay 1e4, batch 32, target sync every 250 decisions,
eps-greedy 0.30 -> 0.05 linearly over the first half then flat, MLP 98-64-64-5 ReLU)
on the SAME counterfactual decision table (:mod:`cfjax.countermem.table`), in ONE run:

1. **cfjax kernel** -- ``jax.jit(jax.vmap(trainer.train, in_axes=(0, None, None)))``
   (:func:`cfjax.kernels.trainer.make_train`) for 1, 5, 64 and 256 selectors. The
   whole run (episodes, index replay, updates, target syncs and the 8 validation
   checkpoints of App. C.2) is one XLA program.
2. **PyTorch** -- a plain Python loop over the table, a ``torch.nn`` MLP, torch Adam,
   a NumPy transition replay, masked argmax / masked max; one selector per seed, run
   sequentially.
3. **Stable-Baselines3 DQN** -- through :class:`TableEnv`, a ``gymnasium.Env`` over
   the table (Box(98), Discrete(5)). SB3's DQN has no action masks: the wrapper
   executes an invalid choice as *skip* (choice 0, always valid) -- the replay keeps
   the chosen action with the skip outcome. SB3 also explores uniformly over all 5
   actions, uses the Huber loss, clips gradients at norm 10 and takes the target
   max over all actions. Those are differences from Table 3, kept because they are
   SB3's behaviour.
4. **CleanRL-style** -- a Python loop over the table, NumPy replay, and only the
   selector functions jitted (:func:`cfjax.kernels.dqn.make_dqn` ``act`` and
   ``train_step`` under ``jax.jit``), called once per decision / update.

Reported for each: import time (fresh interpreter, minus bare interpreter start),
compile time (kernel: first call minus steady call; the sequential implementations get
one untimed warm-up run with seed 1000 first, and "first-run overhead" = warm-up run
minus the mean timed run -- for CleanRL-style that is the jit compile), steady-state time,
decisions/s, real gradient updates/s, and the ratio to SB3's decisions/s; plus the
end-to-end time (import + compile + run) of a 100-selector grid (20 learning rates x
5 seeds, doubly vmapped) against SB3's extrapolated 100 sequential runs. Learning
parity: greedy held-out return on ``eval_roots`` (invalid actions masked at
evaluation for every implementation, via
:func:`cfjax.kernels.reference.evaluate_policy_reference`) per seed.

Threads: every side gets the same ``--cores`` (default 1): the process is bound to them
(``sched_setaffinity``, which XLA's CPU client reads at start-up) and the OMP/OPENBLAS/MKL/NUMEXPR pools
are sized to them before NumPy is imported; ``torch.set_num_threads`` gets ``--torch-threads`` (default
``--cores``); ``--xla-threads 1`` with more cores makes XLA compute on the calling thread
(``--xla_cpu_multi_thread_eigen=false``; the old ``intra_op_parallelism_threads=1`` token made XLA
ignore the whole flag string, so it was a no-op). CPU time / wall time of every timed side and of a
matmul-heavy XLA probe loop is recorded: ≈ 1.0 shows one core was used.

Usage::

    python benchmarks/dqn.py                 # full run -> benchmarks/results/dqn.json
    python benchmarks/dqn.py --quick --out /tmp/dqn_quick.json   # smoke test
    python benchmarks/dqn.py --cores 2       # both cores for every side
    python benchmarks/dqn.py --table DIR     # reuse a saved table (load_table)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import (finish_meta, fmt_ratio, make_meta, pin_peers, setup_threads, start_load,  # noqa: E402
                               xla_probe)
from benchmarks._meta import cpu_wall, write_result  # noqa: E402
from benchmarks._meta import table as make_table  # noqa: E402

WARM_SEED = 1000  # untimed warm-up run of the sequential implementations
SOURCES = ["benchmarks/_bench.py", "kernels/_base.py", "kernels/dqn.py", "kernels/replay.py",
           "kernels/trainer.py", "kernels/features.py", "kernels/reference/dqn.py", "kernels/reference/trainer.py",
           "cfjax/countermem/table.py",
           "cfjax/countermem/agent.py", "cfjax/countermem/pipeline.py", "cfjax/countermem/store.py",
           "cfjax/domains/sql", "cfjax/llm/scripted.py", "cfjax/config/countermem.py"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke mode: 500 decisions, 2 seeds, kernel at 1 and 2 selectors, 2x2 grid")
    p.add_argument("--table", type=Path, default=None, help="load this decision table (load_table) instead of building")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "cfjax-bench-dqn",
                   help="where databases and the built table live (parts are reused on rerun)")
    p.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/dqn.json)")
    p.add_argument("--seeds", type=int, default=5, help="sequential seeds for PyTorch / SB3 / CleanRL-style")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 5, 64, 256], help="kernel vmap sizes")
    p.add_argument("--grid-lrs", type=int, default=20, help="learning rates in the grid (x --seeds selectors)")
    p.add_argument("--repeats", type=int, default=3, help="steady-state kernel calls per size (min is reported)")
    p.add_argument("--cores", type=int, default=1, help="cores (and thread-pool size) for every side")
    p.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default --cores)")
    p.add_argument("--xla-threads", type=int, default=None,
                   help="1 = XLA computes on the calling thread; default --cores")
    p.add_argument("--skip", nargs="*", default=[], choices=["torch", "sb3", "cleanrl", "grid"],
                   help="leave out some implementations")
    a = p.parse_args(argv)
    if a.quick:
        a.seeds = min(a.seeds, 2)
        a.sizes = [1, 2]
        a.grid_lrs = 2
        a.repeats = 1
    return a


ARGS = parse_args() if __name__ == "__main__" else None
LOAD_BEFORE = start_load() if ARGS is not None else None  # before anything of ours runs
THREADS = setup_threads(ARGS.cores, xla_threads=ARGS.xla_threads) if ARGS is not None else {}

import numpy as np  # noqa: E402


# --------------------------------------------------------------------------
# Helpers.
# --------------------------------------------------------------------------
def import_time(stmt: str, repeats: int = 3) -> dict:
    """Median wall time of ``python -c stmt`` minus that of ``python -c pass`` (fresh interpreters)."""

    def run(s):
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", s], check=True, env=os.environ.copy(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    base, full = run("pass"), run(stmt)
    return {"stmt": stmt, "seconds": max(full - base, 0.0), "interpreter_start_s": base}


def mlp_q_fn(layers):
    """NumPy ReLU MLP ``[(W[in, out], b[out]), ...]`` -> ``q_fn(obs f32[98]) -> f32[5]``."""
    layers = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in layers]

    def q(o):
        x = np.asarray(o, np.float32)
        for w, b in layers[:-1]:
            x = np.maximum(x @ w + b, 0.0)
        w, b = layers[-1]
        return x @ w + b

    return q


def flax_layers(params, i=None):
    """Flax ``{"Dense_k": {"kernel", "bias"}}`` (optionally selector ``i`` of a vmapped tree) -> layers."""
    names = sorted(params, key=lambda n: int(n.split("_")[1]))
    pick = (lambda x: np.asarray(x)) if i is None else (lambda x: np.asarray(x)[i])
    return [(pick(params[n]["kernel"]), pick(params[n]["bias"])) for n in names]


def torch_layers(seq):
    import torch

    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
            for m in seq if isinstance(m, torch.nn.Linear)]


def eps_at(decisions: int, cfg) -> float:
    """Table 3 schedule as in :func:`cfjax.kernels.dqn.epsilon_schedule` (decisions taken so far)."""
    frac = min(max(decisions / cfg.eps_decay_steps, 0.0), 1.0)
    return cfg.eps_start + (cfg.eps_end - cfg.eps_start) * frac


def scheduled_updates(cfg) -> int:
    """Gradient updates of the kernel schedule: decisions t in [learning_starts, T] with t % train_every == 0."""
    return sum(1 for t in range(1, cfg.total_decisions + 1) if t >= cfg.learning_starts and t % cfg.train_every == 0)


class NpTable:
    """The decision table as NumPy arrays plus the Eq. 10 reward matrix (float32, like the kernel)."""

    def __init__(self, table, cfg):
        t = [np.asarray(x) for x in table]
        (self.obs, self.mask, self.calls, self.failed, self.tokens, self.solved, self.next,
         self.train_roots, self.val_roots, self.eval_roots) = t
        f = np.float32
        self.reward = (self.solved.astype(f) - f(cfg.lam_w) * self.calls - f(cfg.lam_f) * self.failed
                       - f(cfg.lam_tau) * self.tokens / f(cfg.tau0)).astype(f)
        self.skip_only = np.zeros(self.mask.shape[1], bool)
        self.skip_only[0] = True


# --------------------------------------------------------------------------
# Table.
# --------------------------------------------------------------------------
def get_table(args):
    from cfjax.countermem.table import build_table, load_table

    if args.table is not None:
        table, meta = load_table(args.table)
        return table, meta, {"source": "load_table", "dir": str(args.table), "build_s": 0.0}
    from cfjax.config import CounterMemConfig
    from cfjax.countermem.agent import Agent
    from cfjax.countermem.pipeline import construct
    from cfjax.countermem.store import MemoryStore
    from cfjax.domains.sql import SQLSuite
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig

    root = args.work
    t0 = time.perf_counter()
    suite = SQLSuite.build(root / "databases")
    splits = suite.splits()
    cfg = CounterMemConfig()
    store = MemoryStore(cfg.store, cfg.retrieval, edits=suite.edits)
    agent = Agent(ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0)), suite.world(), cfg, store=store,
                  envs=suite.specs, edits=suite.edits)
    construct(agent, splits.build, seed=0)
    table, meta = build_table(agent, splits, root / "table", samples=4)
    return table, meta, {"source": "build_table", "dir": str(root / "table"), "build_s": time.perf_counter() - t0}


def reference_baselines(nt: NpTable, hp, cfg, max_depth: int) -> dict:
    """Skip-only, always-first-record, and the counterfactual oracle on the eval roots."""
    from cfjax.kernels import DecisionTable
    from cfjax.kernels.reference import evaluate_policy_reference

    table = DecisionTable(nt.obs, nt.mask, nt.calls, nt.failed, nt.tokens, nt.solved, nt.next, nt.train_roots,
                          nt.val_roots, nt.eval_roots)
    skip = evaluate_policy_reference(lambda o: np.array([1, 0, 0, 0, 0], np.float32), table, nt.eval_roots, hp,
                                     max_depth=max_depth, tau0=cfg.tau0)
    first = evaluate_policy_reference(lambda o: np.array([0, 1, 0, 0, 0], np.float32), table, nt.eval_roots, hp,
                                      max_depth=max_depth, tau0=cfg.tau0)

    def best(row, depth):
        if row < 0 or depth == 0:
            return 0.0
        vals = [float(nt.reward[row, a]) + best(int(nt.next[row, a]), depth - 1)
                for a in np.flatnonzero(nt.mask[row])]
        return max(vals)

    oracle = float(np.mean([best(int(r), max_depth) for r in nt.eval_roots]))
    return {"skip_only": {"return": skip[0], "solved": skip[1]},
            "always_first_record": {"return": first[0], "solved": first[1]},
            "oracle_counterfactual_best": {"return": oracle}}


# --------------------------------------------------------------------------
# 1. cfjax kernel.
# --------------------------------------------------------------------------
def bench_kernel(trainer, hp, jtable, sizes, repeats, eval_fn, parity_n: int) -> dict:
    import jax

    fn = jax.jit(jax.vmap(trainer.train, in_axes=(0, None, None)))
    out = {}
    parity = None
    for n in sizes:
        keys0 = jax.random.split(jax.random.PRNGKey(0), n)
        t0 = time.perf_counter()
        st0 = jax.block_until_ready(fn(keys0, hp, jtable))
        first = time.perf_counter() - t0
        steady_all = []
        cw: dict = {}
        with cpu_wall(cw):
            for r in range(repeats):
                keys = jax.random.split(jax.random.PRNGKey(1 + r), n)
                t0 = time.perf_counter()
                jax.block_until_ready(fn(keys, hp, jtable))
                steady_all.append(time.perf_counter() - t0)
        steady = min(steady_all)
        updates = int(np.sum(np.asarray(st0.learner.step)))
        decisions = int(np.sum(np.asarray(st0.learner.decisions)))
        out[n] = {"selectors": n, "first_call_s": first, "steady_s": steady, "steady_all_s": steady_all,
                  "compile_s": max(first - steady, 0.0), "decisions": decisions, "updates": updates,
                  "decisions_per_s": decisions / steady, "updates_per_s": updates / steady, "cpu_wall": cw,
                  "cpu_s_per_decision": cw["cpu_s"] / (decisions * repeats)}
        print(f"  kernel n={n:4d}: first {first:7.2f}s  steady {steady:7.3f}s  "
              f"{decisions / steady:12,.0f} dec/s  {updates / steady:10,.0f} upd/s  CPU/wall {cw['cpu_over_wall']}",
              flush=True)
        if parity is None or n == parity_n:
            parity = (n, st0)  # learning parity: the run with as many selectors as the baselines' seeds
    n, st = parity
    final = [eval_fn(mlp_q_fn(flax_layers(st.learner.params, i))) for i in range(n)]
    best = [eval_fn(mlp_q_fn(flax_layers(st.best_params, i))) for i in range(n)]
    # cross-check the NumPy evaluation against the jitted one for selector 0
    pick0 = jax.tree.map(lambda x: x[0], st.learner.params)
    jret, _ = trainer.evaluate(pick0, hp, jtable, jtable.eval_roots)
    return {"sizes": out, "parity_selectors": n,
            "eval_final": final, "eval_best_val_checkpoint": best,
            "best_decision": np.asarray(st.best_decision).tolist(),
            "jax_vs_numpy_eval_abs_diff_seed0": abs(float(jret) - final[0][0])}


def bench_grid(trainer, cfg, jtable, n_lrs, n_seeds, import_s) -> dict:
    import jax
    import jax.numpy as jnp

    from cfjax.kernels import DQNHParams

    lrs = np.logspace(-4, -2, n_lrs).astype(np.float32) if n_lrs > 1 else np.array([cfg.lr], np.float32)
    hp = cfg.hparams()._replace(lr=jnp.asarray(lrs))
    hp_axes = DQNHParams(0, None, None, None, None, None, None)
    fn = jax.jit(jax.vmap(jax.vmap(trainer.train, (0, None, None)), (None, hp_axes, None)))
    keys = jax.random.split(jax.random.PRNGKey(0), n_seeds)
    cw_first: dict = {}
    with cpu_wall(cw_first):
        t0 = time.perf_counter()
        st = jax.block_until_ready(fn(keys, hp, jtable))
        first = time.perf_counter() - t0
    cw_steady: dict = {}
    with cpu_wall(cw_steady):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(jax.random.split(jax.random.PRNGKey(1), n_seeds), hp, jtable))
        steady = time.perf_counter() - t0
    ev = jax.jit(jax.vmap(jax.vmap(trainer.evaluate, (0, None, None, None)), (0, hp_axes, None, None)))
    rets, _ = ev(st.best_params, hp, jtable, jtable.eval_roots)
    n = n_lrs * n_seeds
    print(f"  grid {n_lrs}x{n_seeds}: first call {first:.2f}s (steady {steady:.2f}s), "
          f"e2e with import {import_s + first:.2f}s", flush=True)
    return {"n_lrs": n_lrs, "n_seeds": n_seeds, "selectors": n, "lrs": lrs.tolist(),
            "first_call_s": first, "steady_s": steady, "compile_s": max(first - steady, 0.0),
            "import_s": import_s, "end_to_end_s": import_s + first,
            "cpu_wall_first_call": cw_first, "cpu_wall_steady": cw_steady,
            "updates": int(np.sum(np.asarray(st.learner.step))),
            "eval_return_best_ckpt_mean_per_lr": np.asarray(rets).mean(axis=1).tolist()}


_GRID_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import jax, jax.numpy as jnp, numpy as np
from cfjax.kernels import DQNConfig, DQNHParams, as_jax, make_train
from cfjax.countermem.table import load_table
import_s = time.perf_counter() - t0
a = json.loads(sys.argv[1])
table, meta = load_table(a["table"])
cfg = DQNConfig(total_decisions=a["decisions"])
trainer = make_train(cfg, max_depth=int(meta.max_depth))
jtable = jax.block_until_ready(as_jax(table))
lrs = np.asarray(a["lrs"], np.float32)
hp = cfg.hparams()._replace(lr=jnp.asarray(lrs))
hp_axes = DQNHParams(0, None, None, None, None, None, None)
fn = jax.jit(jax.vmap(jax.vmap(trainer.train, (0, None, None)), (None, hp_axes, None)))
keys = jax.random.split(jax.random.PRNGKey(0), a["seeds"])
t1 = time.perf_counter()
st = jax.block_until_ready(fn(keys, hp, jtable))
first = time.perf_counter() - t1
print(json.dumps({"import_s": import_s, "first_call_s": first,
                  "updates": int(np.sum(np.asarray(st.learner.step)))}))
"""


def bench_grid_fresh(table_dir: str, cfg, lrs, n_seeds: int) -> dict:
    """The grid in fresh processes with JAX's persistent compilation cache (what a user's second run
    gets, :mod:`cfjax.infra.compile_cache`): ``cold`` with an empty cache folder, then ``warm`` with
    the folder the cold run filled. End to end = the child's own import + the first grid call."""
    import subprocess

    out = {}
    cache = tempfile.mkdtemp(prefix="cfjax-bench-dqn-xla-")
    arg = json.dumps({"table": table_dir, "decisions": cfg.total_decisions, "lrs": [float(x) for x in lrs],
                      "seeds": n_seeds})
    for mode in ("cold", "warm"):
        env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
        r = subprocess.run([sys.executable, "-c", _GRID_CHILD, arg], env=env, capture_output=True, text=True,
                           check=True)
        d = json.loads(r.stdout.strip().splitlines()[-1])
        d["end_to_end_s"] = d["import_s"] + d["first_call_s"]
        out[mode] = d
        print(f"  grid, fresh process, persistent cache {mode}: import {d['import_s']:.2f}s + first call "
              f"{d['first_call_s']:.2f}s", flush=True)
    out["cache_entries"] = len(os.listdir(cache))
    return out


# --------------------------------------------------------------------------
# 2. PyTorch.
# --------------------------------------------------------------------------
def run_torch(seed: int, nt: NpTable, cfg):
    import copy

    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    layers, d = [], cfg.obs_dim
    for h in cfg.hidden:
        layers += [torch.nn.Linear(d, h), torch.nn.ReLU()]
        d = h
    q = torch.nn.Sequential(*layers, torch.nn.Linear(d, cfg.n_actions))
    tgt = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), lr=cfg.lr, betas=(cfg.adam_b1, cfg.adam_b2), eps=cfg.adam_eps)
    cap, A = cfg.buffer_capacity, cfg.n_actions
    b_obs = np.zeros((cap, cfg.obs_dim), np.float32)
    b_act = np.zeros(cap, np.int64)
    b_rew = np.zeros(cap, np.float32)
    b_nobs = np.zeros((cap, cfg.obs_dim), np.float32)
    b_nmask = np.zeros((cap, A), bool)
    b_done = np.zeros(cap, np.float32)
    ptr = size = updates = 0
    row = -1
    for t0 in range(cfg.total_decisions):
        if row < 0:
            row = int(nt.train_roots[rng.integers(len(nt.train_roots))])
        m = nt.mask[row]
        if rng.random() < eps_at(t0, cfg):
            a = int(rng.choice(np.flatnonzero(m)))
        else:
            with torch.no_grad():
                qv = q(torch.from_numpy(nt.obs[row])).numpy()
            a = int(np.argmax(np.where(m, qv, -np.inf)))
        nxt = int(nt.next[row, a])
        done = nxt < 0
        b_obs[ptr], b_act[ptr], b_rew[ptr] = nt.obs[row], a, nt.reward[row, a]
        if done:
            b_nobs[ptr], b_nmask[ptr], b_done[ptr] = 0.0, nt.skip_only, 1.0
        else:
            b_nobs[ptr], b_nmask[ptr], b_done[ptr] = nt.obs[nxt], nt.mask[nxt], 0.0
        ptr, size = (ptr + 1) % cap, min(size + 1, cap)
        t = t0 + 1
        if t >= cfg.learning_starts and t % cfg.train_every == 0:
            idx = rng.integers(0, size, cfg.batch_size)
            o, a_b = torch.from_numpy(b_obs[idx]), torch.from_numpy(b_act[idx])
            r, no = torch.from_numpy(b_rew[idx]), torch.from_numpy(b_nobs[idx])
            nm, dn = torch.from_numpy(b_nmask[idx]), torch.from_numpy(b_done[idx])
            with torch.no_grad():
                v = tgt(no).masked_fill(~nm, float("-inf")).max(dim=1).values
                y = r + cfg.gamma * (1.0 - dn) * v
            q_sa = q(o).gather(1, a_b[:, None]).squeeze(1)
            loss = ((y - q_sa) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            updates += 1
        if t % cfg.target_sync_every == 0:
            tgt.load_state_dict(q.state_dict())
        row = -1 if done else nxt
    return torch_layers(q), updates


# --------------------------------------------------------------------------
# 3. Stable-Baselines3.
# --------------------------------------------------------------------------
def make_table_env(nt: NpTable):
    import gymnasium as gym
    from gymnasium import spaces

    class TableEnv(gym.Env):
        """The decision table as a gymnasium env (an episode starts at a uniform train root).

        SB3's DQN cannot mask actions: an invalid choice is executed as skip (choice 0,
        always valid) and counted in ``n_invalid``.
        """

        metadata: dict = {"render_modes": []}

        def __init__(self):
            super().__init__()
            self.observation_space = spaces.Box(-np.inf, np.inf, (nt.obs.shape[1],), np.float32)
            self.action_space = spaces.Discrete(nt.mask.shape[1])
            self.row = -1
            self.n_invalid = 0
            self.n_steps = 0
            self._zero = np.zeros(nt.obs.shape[1], np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.row = int(nt.train_roots[self.np_random.integers(len(nt.train_roots))])
            return nt.obs[self.row], {}

        def step(self, action):
            a, row = int(action), self.row
            self.n_steps += 1
            if not nt.mask[row, a]:
                a = 0
                self.n_invalid += 1
            r = float(nt.reward[row, a])
            nxt = int(nt.next[row, a])
            if nxt < 0:
                return self._zero, r, True, False, {"solved": bool(nt.solved[row, a])}
            self.row = nxt
            return nt.obs[nxt], r, False, False, {}

    return TableEnv


def sb3_kwargs(cfg) -> dict:
    return dict(learning_rate=cfg.lr, buffer_size=cfg.buffer_capacity, learning_starts=cfg.learning_starts,
                batch_size=cfg.batch_size, gamma=cfg.gamma, train_freq=cfg.train_every, gradient_steps=1,
                target_update_interval=cfg.target_sync_every, exploration_initial_eps=cfg.eps_start,
                exploration_final_eps=cfg.eps_end, exploration_fraction=cfg.eps_decay_fraction,
                policy_kwargs=dict(net_arch=list(cfg.hidden), optimizer_kwargs=dict(eps=cfg.adam_eps)),
                device="cpu", verbose=0)


def run_sb3(seed: int, env_cls, cfg):
    from stable_baselines3 import DQN

    env = env_cls()
    t0 = time.perf_counter()
    model = DQN("MlpPolicy", env, seed=seed, **sb3_kwargs(cfg))
    t1 = time.perf_counter()
    model.learn(total_timesteps=cfg.total_decisions)
    t2 = time.perf_counter()
    return torch_layers(model.q_net.q_net), int(model._n_updates), {
        "construct_s": t1 - t0, "learn_s": t2 - t1, "invalid_action_fraction": env.n_invalid / max(env.n_steps, 1)}


# --------------------------------------------------------------------------
# 4. CleanRL-style (Python loop, jitted act / train_step).
# --------------------------------------------------------------------------
def run_cleanrl(seed: int, nt: NpTable, cfg, sel, hp):
    import jax

    from cfjax.kernels import Batch

    rng = np.random.default_rng(seed)
    k_init, k_run = jax.random.split(jax.random.PRNGKey(seed))
    state = sel.init(k_init, hp)
    act_keys = np.asarray(jax.random.split(k_run, cfg.total_decisions))
    cap, A = cfg.buffer_capacity, cfg.n_actions
    b_obs = np.zeros((cap, cfg.obs_dim), np.float32)
    b_act = np.zeros(cap, np.int32)
    b_rew = np.zeros(cap, np.float32)
    b_nobs = np.zeros((cap, cfg.obs_dim), np.float32)
    b_nmask = np.zeros((cap, A), bool)
    b_done = np.zeros(cap, np.float32)
    ptr = size = updates = 0
    row = -1
    for t0 in range(cfg.total_decisions):
        if row < 0:
            row = int(nt.train_roots[rng.integers(len(nt.train_roots))])
        state = state._replace(decisions=np.int32(t0))
        a = int(sel.act(state, act_keys[t0], nt.obs[row], nt.mask[row], hp))
        nxt = int(nt.next[row, a])
        done = nxt < 0
        b_obs[ptr], b_act[ptr], b_rew[ptr] = nt.obs[row], a, nt.reward[row, a]
        if done:
            b_nobs[ptr], b_nmask[ptr], b_done[ptr] = 0.0, nt.skip_only, 1.0
        else:
            b_nobs[ptr], b_nmask[ptr], b_done[ptr] = nt.obs[nxt], nt.mask[nxt], 0.0
        ptr, size = (ptr + 1) % cap, min(size + 1, cap)
        t = t0 + 1
        if t >= cfg.learning_starts and t % cfg.train_every == 0:
            idx = rng.integers(0, size, cfg.batch_size)
            batch = Batch(b_obs[idx], b_act[idx], b_rew[idx], b_nobs[idx], b_nmask[idx], b_done[idx])
            state, _ = sel.train_step(state, batch, hp)
            updates += 1
        if t % cfg.target_sync_every == 0:
            state = state._replace(target_params=state.params)
        row = -1 if done else nxt
    jax.block_until_ready(state.params)
    return flax_layers(state.params), updates


# --------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------
def seq_summary(name, times, updates, cfg, import_s, compile_s=0.0, extra=None) -> dict:
    steady = float(sum(times))
    decisions = len(times) * cfg.total_decisions
    d = {"name": name, "seeds": len(times), "per_seed_s": list(map(float, times)), "steady_s": steady,
         "decisions": decisions, "updates": int(sum(updates)), "updates_per_seed": list(map(int, updates)),
         "decisions_per_s": decisions / steady, "updates_per_s": sum(updates) / steady,
         "import_s": import_s, "compile_s": compile_s}
    d.update(extra or {})
    print(f"  {name}: {steady:.2f}s for {len(times)} seeds  {d['decisions_per_s']:,.0f} dec/s  "
          f"{d['updates_per_s']:,.0f} upd/s", flush=True)
    return d


def spread(vals):
    return {"mean": float(np.mean(vals)), "min": float(np.min(vals)), "max": float(np.max(vals)),
            "per_seed": [float(v) for v in vals]}


def main(args) -> dict:
    t_start = time.perf_counter()
    threads = THREADS
    print(f"threads: {threads}", flush=True)

    print("import times (fresh interpreter, minus bare start)...", flush=True)
    imports = {"jax_kernel": import_time("import jax; import cfjax.kernels.trainer"),
               "cleanrl_style": import_time("import jax; import cfjax.kernels.dqn")}
    if "torch" not in args.skip:
        imports["torch"] = import_time("import torch")
    if "sb3" not in args.skip:
        imports["sb3"] = import_time("import stable_baselines3, gymnasium")
    for k, v in imports.items():
        print(f"  {k:14s} {v['seconds']:.2f}s", flush=True)

    import jax

    print(f"XLA probe CPU/wall: {xla_probe(threads)['cpu_over_wall']}", flush=True)
    from cfjax.kernels import DQNConfig, as_jax, jit_selector, make_dqn, make_train
    from cfjax.kernels.reference import evaluate_policy_reference

    table, meta, tinfo = get_table(args)
    print(f"table: {meta.rows} rows, roots {meta.roots}, hash {meta.hash[:12]} ({tinfo['source']}, "
          f"{tinfo['build_s']:.1f}s)", flush=True)
    cfg = DQNConfig(total_decisions=500 if args.quick else 2000)
    hp = cfg.hparams()
    max_depth = int(meta.max_depth)
    nt = NpTable(table, cfg)

    def eval_fn(q_fn):
        return evaluate_policy_reference(q_fn, table, nt.eval_roots, hp, max_depth=max_depth, tau0=cfg.tau0)

    baselines = reference_baselines(nt, hp, cfg, max_depth)
    print(f"baselines (eval roots): {json.dumps(baselines)}", flush=True)

    trainer = make_train(cfg, max_depth=max_depth)
    jtable = jax.block_until_ready(as_jax(table))
    n_sched = scheduled_updates(cfg)

    print("1. cfjax kernel: jit(vmap(trainer.train))", flush=True)
    kern = bench_kernel(trainer, hp, jtable, args.sizes, args.repeats, eval_fn, args.seeds)
    for s in kern["sizes"].values():
        s["import_s"] = imports["jax_kernel"]["seconds"]
        assert s["updates"] == s["selectors"] * n_sched, (s["updates"], n_sched)

    grid = None
    if "grid" not in args.skip:
        print(f"   100-selector grid: jit(vmap(vmap(train))) over {args.grid_lrs} lrs x {args.seeds} seeds",
              flush=True)
        grid = bench_grid(trainer, cfg, jtable, args.grid_lrs, args.seeds, imports["jax_kernel"]["seconds"])
        if tinfo.get("dir"):
            grid["fresh"] = bench_grid_fresh(tinfo["dir"], cfg, grid["lrs"], args.seeds)

    impls, evals = {}, {}

    def sequential(key, label, run_one, import_s):
        """An untimed-for-steady warm-up run (seed 1000), then ``args.seeds`` timed runs one after another."""
        print(label, flush=True)
        t0 = time.perf_counter()
        run_one(WARM_SEED)
        first = time.perf_counter() - t0
        times, ups, ev, extras, layers_all = [], [], [], [], []
        cw: dict = {}
        with cpu_wall(cw):  # the timed runs only (their evaluation comes after)
            for s in range(args.seeds):
                t0 = time.perf_counter()
                layers, u, extra = run_one(s)
                times.append(time.perf_counter() - t0)
                ups.append(u)
                extras.append(extra)
                layers_all.append(layers)
        ev = [eval_fn(mlp_q_fn(layers)) for layers in layers_all]
        overhead = max(first - float(np.mean(times)), 0.0)
        extra = {k: [e[k] for e in extras] for k in (extras[0] if extras else {})}
        impls[key] = seq_summary(key, times, ups, cfg, import_s, overhead,
                                 {"first_run_s": first, "cpu_wall": cw,
                                  "cpu_s_per_decision": cw["cpu_s"] / (len(times) * cfg.total_decisions), **extra})
        evals[key] = ev

    if "cleanrl" not in args.skip:
        sel = jit_selector(make_dqn(cfg))  # raw factory, jitted by the caller
        sequential("cleanrl_style", "4. CleanRL-style: Python loop, jitted act/train_step",
                   lambda s: (*run_cleanrl(s, nt, cfg, sel, hp), {}), imports["cleanrl_style"]["seconds"])

    if "torch" not in args.skip or "sb3" not in args.skip:
        importlib.import_module("torch")  # pin_peers sizes the pools of the imported peers
        pin_peers(args.cores, threads, torch_threads=args.torch_threads)
        print(f"peers: {threads['peers']}", flush=True)

    if "torch" not in args.skip:
        sequential("torch", "2. PyTorch: Python loop, torch MLP + Adam", lambda s: (*run_torch(s, nt, cfg), {}),
                   imports["torch"]["seconds"])

    if "sb3" not in args.skip:
        env_cls = make_table_env(nt)
        sequential("sb3", "3. Stable-Baselines3 DQN via gymnasium.Env", lambda s: run_sb3(s, env_cls, cfg),
                   imports["sb3"]["seconds"])
        impls["sb3"]["kwargs"] = sb3_kwargs(cfg)

    # ---- ratios -----------------------------------------------------------
    rows = []
    for n, s in kern["sizes"].items():
        rows.append({"impl": f"cfjax kernel, {n} selector(s) vmapped", "key": f"kernel_{n}", **{
            k: s[k] for k in ("import_s", "compile_s", "steady_s", "decisions_per_s", "updates_per_s")},
            "selectors": n, "cpu_over_wall": s["cpu_wall"]["cpu_over_wall"],
            "cpu_s_per_decision": s["cpu_s_per_decision"]})
    for k, label in (("cleanrl_style", "CleanRL-style (jitted act/train_step)"), ("torch", "PyTorch loop"),
                     ("sb3", "Stable-Baselines3 DQN")):
        if k in impls:
            s = impls[k]
            rows.append({"impl": f"{label}, {s['seeds']} seeds sequential", "key": k, "selectors": s["seeds"],
                         **{f: s[f] for f in ("import_s", "compile_s", "steady_s", "decisions_per_s",
                                              "updates_per_s")}, "cpu_over_wall": s["cpu_wall"]["cpu_over_wall"],
                         "cpu_s_per_decision": s["cpu_s_per_decision"]})
    sb3 = impls.get("sb3")
    # CPU seconds per decision: with one core per side this ignores the time other jobs took from the run;
    # with more it would charge a side for using them, so it is left out
    one_core = args.cores == 1 and args.torch_threads in (None, 1)
    for r in rows:
        r["ratio_vs_sb3"] = r["decisions_per_s"] / sb3["decisions_per_s"] if sb3 else None
        r["cpu_ratio_vs_sb3"] = (sb3["cpu_s_per_decision"] / r["cpu_s_per_decision"]
                                 if sb3 and one_core and r["cpu_s_per_decision"] > 0 else None)

    goals = {}
    if sb3:
        k5 = kern["sizes"].get(args.seeds) or kern["sizes"][max(kern["sizes"])]
        goals["steady_ratio_kernel_selectors"] = k5["selectors"]
        goals["steady_ratio_5_seeds"] = k5["decisions_per_s"] / sb3["decisions_per_s"]
        goals["steady_goal_20x_met"] = goals["steady_ratio_5_seeds"] >= 20.0
        if one_core and k5["cpu_s_per_decision"] > 0:
            goals["steady_cpu_time_ratio_5_seeds"] = sb3["cpu_s_per_decision"] / k5["cpu_s_per_decision"]
        if grid is not None:
            per_run = sb3["steady_s"] / sb3["seeds"]
            sb3_e2e = sb3["import_s"] + grid["selectors"] * per_run
            grid["sb3_extrapolated_s"] = sb3_e2e
            grid["sb3_per_run_s"] = per_run
            goals["grid_end_to_end_ratio"] = sb3_e2e / grid["end_to_end_s"]
            goals["grid_goal_10x_met"] = goals["grid_end_to_end_ratio"] >= 10.0
            if "fresh" in grid:
                for mode in ("cold", "warm"):
                    goals[f"grid_end_to_end_ratio_{mode}"] = sb3_e2e / grid["fresh"][mode]["end_to_end_s"]
                goals["grid_goal_10x_warm_met"] = goals["grid_end_to_end_ratio_warm"] >= 10.0

    # ---- learning parity --------------------------------------------------
    parity = {"kernel_final": spread([r for r, _ in kern["eval_final"]]),
              "kernel_best_val_checkpoint": spread([r for r, _ in kern["eval_best_val_checkpoint"]])}
    parity["kernel_final"]["solved"] = [s for _, s in kern["eval_final"]]
    parity["kernel_best_val_checkpoint"]["solved"] = [s for _, s in kern["eval_best_val_checkpoint"]]
    for k, ev in evals.items():
        parity[k] = spread([r for r, _ in ev])
        parity[k]["solved"] = [s for _, s in ev]
    if "sb3" in parity:
        lo, hi = parity["sb3"]["min"], parity["sb3"]["max"]
        for k in ("kernel_final", "kernel_best_val_checkpoint"):
            goals[f"{k}_mean_within_sb3_spread"] = bool(lo <= parity[k]["mean"] <= hi)

    import flax
    import optax

    versions = {"flax": flax.__version__, "optax": optax.__version__}
    for mod in ("torch", "stable_baselines3", "gymnasium"):  # the peers this run imported
        if mod in sys.modules:
            versions[mod] = sys.modules[mod].__version__
    run_info = make_meta("dqn", SOURCES, args, threads, LOAD_BEFORE)
    run_info["versions"].update(versions)
    run_info["jax_devices"] = [str(d) for d in jax.devices()]
    tab = {"rows": meta.rows, "roots": meta.roots, "hash": meta.hash, "max_depth": max_depth,
           "samples": meta.samples, "backbone": meta.backbone, **tinfo}
    result = {
        "quick": args.quick, "table": tab,
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(cfg).items()},
        "scheduled_updates_per_selector": n_sched,
        "imports": imports, "kernel": kern, "grid": grid, "sequential": impls, "rows": rows,
        "learning_parity_eval_return": parity, "baselines": baselines, "goals": goals,
    }
    result["tables"] = result_tables(result, cfg)
    result = {"meta": finish_meta(run_info, t_start), **result}
    print_report(result)
    path = write_result("dqn", result, out=args.out)
    print(f"wrote {path}")
    return result


def result_tables(res: dict, cfg) -> list[dict]:
    """The tables RESULTS.md shows (rendered by benchmarks/render.py)."""
    t, g, goals = res["table"], res["grid"], res["goals"]
    r = t["roots"]
    tables = [make_table(
        "table", "The counterfactual decision table every implementation trains on",
        ["rows", "train roots", "val roots", "eval roots", "max depth", "samples", "backbone", "content hash",
         "source"],
        [[f"{t['rows']:,}", r["train"], r["val"], r["eval"], t["max_depth"], t["samples"], t["backbone"],
          f"`{t['hash'][:12]}…`", f"{t['source']} ({t['build_s']:.1f} s)"]])]
    rows = []
    by_cpu = any(row["cpu_ratio_vs_sb3"] is not None for row in res["rows"])
    for row in res["rows"]:
        ratio = row["ratio_vs_sb3"]
        bold = row["key"] == f"kernel_{goals.get('steady_ratio_kernel_selectors')}"
        rows.append([row["impl"], f"{row['import_s']:.2f}", f"{row['compile_s']:.2f}", f"{row['steady_s']:.3f}",
                     f"{row['decisions_per_s']:,.0f}", f"{row['updates_per_s']:,.0f}", row["cpu_over_wall"],
                     fmt_ratio(ratio, bold=bold)] + ([fmt_ratio(row["cpu_ratio_vs_sb3"])] if by_cpu else []))
    tables.append(make_table(
        "throughput", f"Steady-state throughput, {cfg.total_decisions:,} decisions per selector "
        f"({res['scheduled_updates_per_selector']} gradient updates for the kernel, PyTorch and CleanRL-style)",
        ["implementation", "import s", "compile / first-run overhead s", "steady s", "decisions/s", "updates/s",
         "CPU/wall", "vs SB3"] + (["vs SB3 by CPU time"] if by_cpu else []), rows))
    if g is not None and "sb3_extrapolated_s" in g:
        tables.append(make_table(
            "grid", f"{g['selectors']}-selector grid end to end ({g['n_lrs']} learning rates × {g['n_seeds']} seeds)",
            ["implementation", "import s", "first call (compile + run) s", "second call s", "end to end s", "CPU/wall",
             "vs SB3"],
            [["cfjax `jit(vmap(vmap(train)))`, lr batched", f"{g['import_s']:.2f}", f"{g['first_call_s']:.2f}",
              f"{g['steady_s']:.2f}", f"{g['end_to_end_s']:.1f}", g["cpu_wall_first_call"]["cpu_over_wall"],
              fmt_ratio(goals["grid_end_to_end_ratio"], bold=True)],
             *([[f"cfjax, a fresh process, persistent compile cache {mode}", f"{g['fresh'][mode]['import_s']:.2f}",
                 f"{g['fresh'][mode]['first_call_s']:.2f}", "–", f"{g['fresh'][mode]['end_to_end_s']:.1f}", "–",
                 fmt_ratio(goals[f"grid_end_to_end_ratio_{mode}"], bold=mode == "warm")]
                for mode in ("cold", "warm")] if "fresh" in g else []),
             [f"Stable-Baselines3, extrapolated: import + {g['selectors']} × {g['sb3_per_run_s']:.2f} s per run",
              f"{res['sequential']['sb3']['import_s']:.2f}", "–", "–", f"{g['sb3_extrapolated_s']:.1f}",
              res["sequential"]["sb3"]["cpu_wall"]["cpu_over_wall"], "1.0×"]]))
    if goals:
        goal_rows = []
        if "steady_ratio_5_seeds" in goals:
            goal_rows.append([f"≥ 20× SB3 steady-state throughput at {goals['steady_ratio_kernel_selectors']} selectors",
                              fmt_ratio(goals["steady_ratio_5_seeds"]),
                              "met" if goals["steady_goal_20x_met"] else "**not met**"])
            if "steady_cpu_time_ratio_5_seeds" in goals:
                goal_rows.append(["… the same by CPU seconds per decision (insensitive to other jobs at one core per side)",
                                  fmt_ratio(goals["steady_cpu_time_ratio_5_seeds"]),
                                  "met" if goals["steady_cpu_time_ratio_5_seeds"] >= 20 else "**not met**"])
        if "grid_end_to_end_ratio" in goals:
            goal_rows.append([f"≥ 10× SB3 end to end for the {g['selectors']}-selector grid (this process, compiling)",
                              fmt_ratio(goals["grid_end_to_end_ratio"]),
                              "met" if goals["grid_goal_10x_met"] else "**not met**"])
        if "grid_end_to_end_ratio_warm" in goals:
            goal_rows.append([f"≥ 10× SB3 end to end for the grid, a fresh process with the persistent cache warm "
                              f"(cold: {fmt_ratio(goals['grid_end_to_end_ratio_cold'])})",
                              fmt_ratio(goals["grid_end_to_end_ratio_warm"]),
                              "met" if goals["grid_goal_10x_warm_met"] else "**not met**"])
        if "steady_ratio_5_seeds" in goals:
            goal_rows.append([f"≥ 40× SB3 steady at {goals['steady_ratio_kernel_selectors']} selectors (issue 23)",
                              fmt_ratio(goals["steady_ratio_5_seeds"]),
                              "met" if goals["steady_ratio_5_seeds"] >= 40 else "**not met**"])
        for k, label in (("kernel_final_mean_within_sb3_spread", "kernel (final) mean return within SB3's seed spread"),
                         ("kernel_best_val_checkpoint_mean_within_sb3_spread",
                          "kernel (best val checkpoint) mean return within SB3's seed spread")):
            if k in goals:
                goal_rows.append([label, "–", "yes" if goals[k] else "**no**"])
        tables.append(make_table("goals", "Goals set by the issue", ["goal", "measured", "verdict"], goal_rows))
    par = res["learning_parity_eval_return"]
    labels = {"kernel_final": "cfjax kernel, final", "kernel_best_val_checkpoint": "cfjax kernel, best val checkpoint",
              "cleanrl_style": "CleanRL-style", "torch": "PyTorch loop", "sb3": "Stable-Baselines3 DQN"}
    n = max(len(v["per_seed"]) for v in par.values())
    prow = []
    for k, label in labels.items():
        if k in par:
            v = par[k]
            cells = [f"{x:.4f}" for x in v["per_seed"]] + [""] * (n - len(v["per_seed"]))
            prow.append([label, *cells, f"{v['mean']:.4f}", f"{float(np.mean(v['solved'])):.3f}"])
    b = res["baselines"]
    for k, label in (("skip_only", "skip only"), ("always_first_record", "always first record"),
                     ("oracle_counterfactual_best", "counterfactual oracle (best path per root)")):
        prow.append([label, *[""] * n, f"{b[k]['return']:.4f}",
                     f"{b[k]['solved']:.3f}" if "solved" in b[k] else ""])
    tables.append(make_table(
        "parity", f"Learning parity: greedy return on the {r['eval']} held-out eval roots",
        ["implementation", *[f"seed {i}" for i in range(n)], "mean", "solved"], prow))
    return tables


def print_report(res: dict) -> None:
    print("\n| implementation | import s | compile / first-run overhead s | steady s | decisions/s | updates/s "
          "| vs SB3 |")
    print("|---|---|---|---|---|---|---|")
    for r in res["rows"]:
        ratio = f"{r['ratio_vs_sb3']:.1f}x" if r["ratio_vs_sb3"] is not None else "-"
        print(f"| {r['impl']} | {r['import_s']:.2f} | {r['compile_s']:.2f} | {r['steady_s']:.3f} | "
              f"{r['decisions_per_s']:,.0f} | {r['updates_per_s']:,.0f} | {ratio} |")
    g = res["grid"]
    if g and "sb3_extrapolated_s" in g:
        print(f"\ngrid {g['selectors']} selectors: cfjax e2e {g['end_to_end_s']:.1f}s (import {g['import_s']:.1f} + "
              f"compile+run {g['first_call_s']:.1f}) vs SB3 extrapolated {g['sb3_extrapolated_s']:.1f}s "
              f"-> {res['goals']['grid_end_to_end_ratio']:.1f}x")
    print("\nheld-out greedy return (eval roots):")
    for k, v in res["learning_parity_eval_return"].items():
        print(f"  {k:28s} mean {v['mean']:+.4f}  [{v['min']:+.4f}, {v['max']:+.4f}]  "
              f"per seed {[round(x, 4) for x in v['per_seed']]}")
    for k, v in res["baselines"].items():
        print(f"  {k:28s} {v['return']:+.4f}")
    print(f"goals: {json.dumps(res['goals'])}")


if __name__ == "__main__":
    main(ARGS)

"""Train many selectors at once on a decision table: seeds × hyperparameter grid,
sharded across devices and JAX processes (one machine or several:
:mod:`cfjax.infra.distributed`), checkpointed in chunks and resumable bit-exactly.

The compute is :func:`cfjax.kernels.trainer.make_train`; this module only
arranges the batch axes, devices, processes and files.

Every learned selector is also scored per held-out root (its kept checkpoint
and its final parameters), next to three fixed policies on the very same roots
(:func:`fixed_policy_outcomes`): *skip only*, *always top-1* (the first
eligible record when there is one, else skip) and the *per-root oracle* (the
best return achievable from each root in hindsight — an upper bound, not a
policy). :func:`compare_with_fixed_policies` turns these into paired
task-bootstrap 95% intervals (:mod:`cfjax.infra.stats`).

>>> table, meta = load_table("runs/table")
>>> res = train_selectors(table, DQNConfig(), seeds=range(5), grid=parse_grid(["lr=1e-3,3e-4"]))
>>> res.val_return.shape        # [grid points, seeds]
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from cfjax.config import to_dict
from cfjax.infra.checkpoint import has_checkpoint, load_latest, save_step
from cfjax.kernels import dqn
from cfjax.kernels._base import masked_argmax
from cfjax.kernels.trainer import DecisionTable, TrainerState, as_jax, make_train, table_hash

__all__ = ["FIXED_LABELS", "parse_seeds", "parse_grid", "grid_hparams", "SelectorsResult", "train_selectors",
           "save_trainer", "load_trainer", "CheckpointMismatchError", "train_resumable",
           "FIXED_POLICIES", "table_rewards", "rollout", "skip_actions", "top1_actions", "oracle_actions",
           "greedy_actions", "fixed_policy_outcomes", "compare_with_fixed_policies", "verdict"]

_GRID_FIELDS = set(dqn.DQNHParams._fields)


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0-4"`` → (0, 1, 2, 3, 4); ``"0,3,7"`` → (0, 3, 7); ranges and lists combine."""
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        if "-" in part[1:]:
            lo, hi = part.split("-", 1)
            a, b = int(lo), int(hi)
            if b < a:
                raise ValueError(f"bad seed range {part!r}: end before start")
            out.extend(range(a, b + 1))
        else:
            out.append(int(part))
    if not out:
        raise ValueError(f"no seeds in {text!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"seeds listed twice in {text!r}")
    return tuple(out)


def parse_grid(specs: Iterable[str]) -> list[dict[str, float]]:
    """``["lr=1e-3,3e-4", "gamma=0.9,0.95"]`` → the cartesian product as dicts.

    Keys are fields of :class:`~cfjax.kernels.dqn.DQNHParams` (lr, gamma,
    eps_start, eps_end, lam_w, lam_f, lam_tau). No specs → one empty point.
    """
    axes: list[tuple[str, list[float]]] = []
    for spec in specs:
        if "=" not in spec:
            raise ValueError(f"grid spec {spec!r} is not NAME=V1,V2,...")
        name, vals = spec.split("=", 1)
        name = name.strip()
        if name not in _GRID_FIELDS:
            raise ValueError(f"unknown grid hyperparameter {name!r}; choose from {sorted(_GRID_FIELDS)}")
        try:
            values = [float(v) for v in vals.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"grid values for {name!r} must be numbers: {vals!r}") from None
        if not values:
            raise ValueError(f"grid spec {spec!r} has no values")
        axes.append((name, values))
    names = [a[0] for a in axes]
    if len(set(names)) != len(names):
        raise ValueError(f"a grid hyperparameter is given twice: {names}")
    return [dict(zip(names, combo)) for combo in itertools.product(*(a[1] for a in axes))]


def grid_hparams(config: dqn.DQNConfig, grid: Sequence[Mapping[str, float]]) -> dqn.DQNHParams:
    """Stack the grid into one :class:`DQNHParams` with a leading ``[G]`` axis."""
    base = config.hparams()
    cols = {f: jnp.asarray([float(p.get(f, getattr(base, f))) for p in grid], jnp.float32)
            for f in dqn.DQNHParams._fields}
    return dqn.DQNHParams(**cols)


@dataclass
class SelectorsResult:
    """Per grid point × seed (arrays are ``[G, S]``)."""

    seeds: tuple[int, ...]
    grid: list[dict[str, float]]
    val_return: np.ndarray  # best validation return (the kept checkpoint)
    best_decision: np.ndarray
    eval_return: np.ndarray  # held-out greedy return of the kept checkpoint
    eval_solved: np.ndarray  # held-out solved rate of the kept checkpoint
    val_curve: np.ndarray  # [G, S, n_checkpoints]
    state: TrainerState  # the full batched state (for saving / inspection)
    devices: int  # devices of each process
    final_eval_return: np.ndarray | None = None  # [G, S] held-out greedy return of the final parameters
    final_eval_solved: np.ndarray | None = None  # [G, S] held-out solved rate of the final parameters
    eval_root_return: np.ndarray | None = None  # [G, S, N_eval] per held-out root, kept checkpoint
    eval_root_solved: np.ndarray | None = None  # [G, S, N_eval] per held-out root, kept checkpoint
    final_root_return: np.ndarray | None = None  # [G, S, N_eval] per held-out root, final parameters
    final_root_solved: np.ndarray | None = None  # [G, S, N_eval] per held-out root, final parameters
    processes: int = 1  # JAX processes the selectors were split over (cfjax.infra.distributed)


def _keys(seeds: Sequence[int]) -> jnp.ndarray:
    return jnp.stack([jax.random.PRNGKey(s) for s in seeds])


@functools.lru_cache(maxsize=8)
def _programs(config: dqn.DQNConfig, max_depth: int):
    """The trainer of one configuration and its jitted programs, shared by every call with that configuration
    (so a repeated call with the same shapes does not compile again): ``(trainer, train over a flat axis of
    selectors — each with its own key and hyperparameters —, held-out evaluation over [G, S])``."""
    trainer = make_train(config, max_depth=max_depth)
    train = jax.jit(jax.vmap(trainer.train, in_axes=(0, 0, None)))
    ev = jax.jit(jax.vmap(jax.vmap(trainer.evaluate, in_axes=(0, None, None, None)), in_axes=(0, 0, None, None)))
    return trainer, train, ev


def _train_items(train, keys: jnp.ndarray, hp: dqn.DQNHParams, table: DecisionTable,
                 devices: Sequence[jax.Device]) -> TrainerState:
    """Train ``L`` selectors (``keys`` ``[L, 2]``, ``hp`` fields ``[L]``) in one program on this process's
    ``devices``. With several devices the item axis is split across them (padded with copies of item 0 to
    a multiple of the device count; the padding is dropped); the per-lane computation is the same."""
    n_items, n_dev = int(keys.shape[0]), len(devices)
    pad = (-n_items) % n_dev if n_dev > 1 else 0
    if pad:
        keys, hp = jax.tree.map(lambda x: jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)]), (keys, hp))
    if n_dev > 1:
        mesh = Mesh(np.asarray(devices), ("item",))
        keys, hp = jax.device_put((keys, hp), NamedSharding(mesh, PartitionSpec("item")))
        table = jax.device_put(table, NamedSharding(mesh, PartitionSpec()))
    state = train(keys, hp, table)
    return jax.tree.map(lambda x: x[:n_items], state) if pad else state


def _work_description(table: DecisionTable, config: dqn.DQNConfig, seeds: Sequence[int],
                      grid: Sequence[Mapping[str, float]], max_depth: int) -> str:
    """What every process of a group must agree on before training (compared by hash)."""
    import json

    return json.dumps({"table": table_hash(table), "config": to_dict(config), "max_depth": max_depth,
                       "seeds": list(seeds), "grid": [dict(p) for p in grid]}, sort_keys=True, default=str)


def train_selectors(table: DecisionTable, config: dqn.DQNConfig, *, seeds: Sequence[int],
                    grid: Sequence[Mapping[str, float]] = ({},), max_depth: int = 2,
                    devices: Sequence[jax.Device] | None = None) -> SelectorsResult:
    """Train ``len(grid) × len(seeds)`` selectors, one jitted program per process.

    The ``G × S`` selectors form one flat axis of items (grid-major: item ``g·S + s`` is grid point
    ``g`` with seed ``seeds[s]``, key ``PRNGKey(seeds[s])``), trained by ``trainer.train`` vmapped
    over it. With several local ``devices`` (default: all of this process's) the items are split
    across them.

    **Several processes.** When this process belongs to a JAX process group
    (:func:`cfjax.infra.distributed.init_processes`, called before any JAX computation), process
    ``p`` of ``P`` trains items ``p, p + P, …`` (:func:`cfjax.infra.distributed.process_shard`:
    every process the same number of slots, padding masked, so one compile), and every process then
    holds all ``G × S`` results in order (:func:`cfjax.infra.distributed.gather_items`); the held-out
    evaluation below then runs on every process on the full set. The processes first check that
    they were given the same table, config, seeds, grid and ``max_depth``. The numbers equal a
    single process's up to float rounding (within 1e-6 on CPU): the per-item keys and inputs are
    the same, only the batch width differs.
    """
    from cfjax.infra.distributed import check_same_work, gather_items, process_info, process_shard

    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("no seeds to train")
    grid = list(grid) or [{}]
    info = process_info()
    if devices is None:
        devices = jax.local_devices()
    devices = list(devices)
    if not devices:
        raise ValueError("no devices to train on")
    foreign = [d for d in devices if d.process_index != info.process_id]
    if foreign:
        raise ValueError(f"devices {foreign} belong to other processes; pass this process's own "
                         f"(jax.local_devices()) — the work is split over processes by item")
    _, train, ev = _programs(config, max_depth)
    hp = grid_hparams(config, grid)
    table = as_jax(table)
    n_g, n_s = len(grid), len(seeds)
    shard = process_shard(n_g * n_s, info.num_processes, info.process_id)
    if info.num_processes > 1:
        check_same_work(_work_description(table, config, seeds, grid, max_depth), "selector job")
    g_idx, s_idx = shard.items // n_s, shard.items % n_s
    keys = _keys([seeds[i] for i in s_idx])
    state = _train_items(train, keys, jax.tree.map(lambda x: x[g_idx], hp), table, devices)
    if info.num_processes > 1:
        state = jax.tree.map(jnp.asarray, gather_items(state, shard))
    state = jax.tree.map(lambda x: x.reshape(n_g, n_s, *x.shape[1:]), state)
    ret, solved = ev(state.best_params, hp, table, table.eval_roots)
    fret, fsolved = ev(state.learner.params, hp, table, table.eval_roots)
    # per held-out root (for paired intervals): the greedy action of every row, then the same walk
    acts = greedy_actions(config, state.best_params, table)
    facts = greedy_actions(config, state.learner.params, table)
    shape = (len(grid), len(seeds), int(table.eval_roots.shape[0]))
    rr, rs, fr, fs = (np.zeros(shape, np.float32), np.zeros(shape, bool), np.zeros(shape, np.float32),
                      np.zeros(shape, bool))
    for g in range(len(grid)):
        rew = table_rewards(table, jax.tree.map(lambda x: x[g], hp), config.tau0)
        for s in range(len(seeds)):
            rr[g, s], rs[g, s] = rollout(table, acts[g, s], table.eval_roots, rew, max_depth)
            fr[g, s], fs[g, s] = rollout(table, facts[g, s], table.eval_roots, rew, max_depth)
    return SelectorsResult(
        seeds=seeds, grid=grid,
        val_return=np.asarray(state.best_return), best_decision=np.asarray(state.best_decision),
        eval_return=np.asarray(ret), eval_solved=np.asarray(solved),
        val_curve=np.asarray(state.val_returns), state=state, devices=len(devices), processes=info.num_processes,
        final_eval_return=np.asarray(fret), final_eval_solved=np.asarray(fsolved),
        eval_root_return=rr, eval_root_solved=rs, final_root_return=fr, final_root_solved=fs,
    )


# --------------------------------------------------------------------------- fixed policies, per-root outcomes

#: The fixed policies every learned selector is reported next to (names used in results files).
FIXED_POLICIES = ("skip", "top1", "oracle")
FIXED_LABELS = {"skip": "skip only", "top1": "always top-1", "oracle": "per-root oracle"}


def table_rewards(table: DecisionTable, hp: dqn.DQNHParams, tau0: float) -> np.ndarray:
    """The Eq. 10 reward of every ``(row, choice)``: ``f32[R, A]`` (the trainer's own :func:`dqn.reward`)."""
    return np.asarray(dqn.reward(jnp.asarray(table.solved), jnp.asarray(table.calls), jnp.asarray(table.failed),
                                 jnp.asarray(table.tokens), hp, tau0), np.float32)


def rollout(table: DecisionTable, actions, roots, rewards: np.ndarray, max_depth: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Walk every root with a fixed action per row: per-root ``(undiscounted return f32[N], solved bool[N])``.

    ``actions`` is ``i[R]`` (one choice per row) or ``i[max_depth, R]`` (a choice per row and depth, for the
    oracle). The walk is :func:`cfjax.kernels.trainer.evaluate_policy`'s: at most ``max_depth`` decisions,
    following ``next`` until ``-1``. Raises if an action is not valid at a row it is taken in.
    """
    mask, solved, nxt = (np.asarray(x) for x in (table.mask, table.solved, table.next))
    acts = np.asarray(actions)
    if acts.ndim == 1:
        acts = np.broadcast_to(acts, (max_depth, acts.shape[0]))
    row = np.asarray(roots, np.int64).copy()
    active = row >= 0
    ret = np.zeros(row.shape, np.float32)
    ok = np.zeros(row.shape, bool)
    for d in range(max_depth):
        r = np.maximum(row, 0)
        a = acts[d, r]
        if not mask[r, a][active].all():
            raise ValueError("a fixed policy took an invalid choice")
        ret = ret + np.where(active, rewards[r, a], np.float32(0.0))
        ok |= active & solved[r, a]
        row = np.where(active, nxt[r, a], -1)
        active &= row >= 0
    return ret, ok


def skip_actions(table: DecisionTable) -> np.ndarray:
    """Skip only: execute the draft at every decision (``i[R]`` zeros)."""
    return np.zeros(np.shape(table.mask)[0], np.int32)


def top1_actions(table: DecisionTable) -> np.ndarray:
    """Always top-1: the first (best-ranked) eligible record when there is one, else skip.

    Retrieval fills the slots in rank order, so this is slot 1 whenever any record is offered (the
    construction policy :func:`cfjax.countermem.agent.top1_policy`); the lowest valid record slot in general.
    """
    rec = np.asarray(table.mask)[:, 1:]
    return np.where(rec.any(axis=1), 1 + np.argmax(rec, axis=1), 0).astype(np.int32)


def oracle_actions(table: DecisionTable, rewards: np.ndarray, max_depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-root oracle by backward induction over the table: ``(actions i[max_depth, R], value f32[R])``.

    ``value[r]`` is the best undiscounted return reachable from row ``r`` in ``max_depth`` decisions (knowing
    every counterfactual outcome: an upper bound on any policy, not a policy); ``actions[d, r]`` attains it
    at depth ``d`` (ties to the lowest choice, i.e. skip first).
    """
    mask, nxt = np.asarray(table.mask), np.asarray(table.next)
    value = np.zeros(mask.shape[0], np.float32)  # best return with 0 decisions left
    acts = np.zeros((max_depth, mask.shape[0]), np.int32)
    for left in range(1, max_depth + 1):
        cont = np.where(nxt >= 0, value[np.maximum(nxt, 0)], np.float32(0.0))
        q = np.where(mask, rewards + cont, -np.inf)
        acts[max_depth - left] = np.argmax(q, axis=1)
        value = np.max(q, axis=1).astype(np.float32)
    return acts, value


def greedy_actions(config: dqn.DQNConfig, params, table: DecisionTable) -> np.ndarray:
    """``argmax_{valid j} Q_θ(z_r, j)`` for every row ``r`` and every leading batch axis of ``params``
    (``[G, S]`` for a :class:`SelectorsResult`): ``i[..., R]``."""
    batch = params["Dense_0"]["kernel"].ndim - 2  # an unbatched kernel is [in, out]
    return np.asarray(_greedy_fn(config, batch)(params, jnp.asarray(table.obs), jnp.asarray(table.mask)))


@functools.lru_cache(maxsize=16)
def _greedy_fn(config: dqn.DQNConfig, batch: int):
    sel = dqn.make_dqn(config)
    fn = lambda p, obs, mask: masked_argmax(sel.q_values(p, obs), mask)  # noqa: E731
    for _ in range(batch):
        fn = jax.vmap(fn, in_axes=(0, None, None))
    return jax.jit(fn)


def fixed_policy_outcomes(table: DecisionTable, hp: dqn.DQNHParams, *, tau0: float, max_depth: int,
                          roots=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-root ``(return, solved)`` of skip only, always top-1 and the per-root oracle on ``roots``
    (default: the held-out eval roots) under the reward weights of one hyperparameter point ``hp``."""
    roots = np.asarray(table.eval_roots if roots is None else roots)
    rew = table_rewards(table, hp, tau0)
    o_acts, _ = oracle_actions(table, rew, max_depth)
    return {"skip": rollout(table, skip_actions(table), roots, rew, max_depth),
            "top1": rollout(table, top1_actions(table), roots, rew, max_depth),
            "oracle": rollout(table, o_acts, roots, rew, max_depth)}


# --------------------------------------------------------------------------- checkpoints


class CheckpointMismatchError(ValueError):
    """A trainer checkpoint was loaded against another table or configuration."""


def _meta(table_digest: str, config: dqn.DQNConfig, max_depth: int, hp: dqn.DQNHParams, decisions: int) -> dict:
    return {"table_hash": table_digest, "config": to_dict(config), "max_depth": max_depth,
            "hparams": {k: np.asarray(v).tolist() for k, v in hp._asdict().items()}, "decisions": decisions}


def save_trainer(directory: str | Path, state: TrainerState, *, table_digest: str, config: dqn.DQNConfig,
                 max_depth: int, hp: dqn.DQNHParams, keep: int = 2) -> Path:
    """Save the full trainer state (params, target, Adam, replay, key, step, best
    checkpoint) with orbax, plus ``meta.json`` naming the table hash and config, as a new
    crash-safe step of ``directory`` (:func:`cfjax.infra.checkpoint.save_step`: the previous
    step stays until this one is committed; the newest ``keep`` steps are kept)."""
    d = Path(directory).absolute()
    decisions = int(np.max(np.asarray(state.learner.decisions)))
    save_step(d, "state", state, _meta(table_digest, config, max_depth, hp, decisions), keep=keep)
    return d


def load_trainer(directory: str | Path, like: TrainerState, *, table_digest: str, config: dqn.DQNConfig,
                 max_depth: int, hp: dqn.DQNHParams) -> TrainerState:
    """Restore the newest complete :func:`save_trainer` step (or a checkpoint of the pre-step
    format); refuses another table, config or grid."""
    def check(meta: dict, step: Path) -> None:
        want = _meta(table_digest, config, max_depth, hp, meta.get("decisions", 0))
        if meta["table_hash"] != table_digest:
            raise CheckpointMismatchError(
                f"checkpoint {step} was trained on decision table {meta['table_hash'][:12]}…, "
                f"not {table_digest[:12]}…")
        for k in ("config", "max_depth", "hparams"):
            if meta[k] != want[k]:
                diff = sorted(x for x in set(meta[k]) | set(want[k]) if meta[k].get(x) != want[k].get(x)) \
                    if isinstance(meta[k], dict) else [k]
                raise CheckpointMismatchError(f"checkpoint {step} was made with a different {k} (differs in {diff})")

    restored, _, _ = load_latest(directory, "state", jax.tree.map(np.asarray, like), check=check)
    return jax.tree.map(jnp.asarray, restored)


def train_resumable(table: DecisionTable, config: dqn.DQNConfig, *, seeds: Sequence[int],
                    hp: dqn.DQNHParams | None = None, checkpoint_dir: str | Path, save_every: int = 4,
                    max_depth: int = 2, stop_after: int | None = None) -> TrainerState:
    """Train a vmapped batch of seeds in chunks, saving after every ``save_every``
    validation chunks and resuming from ``checkpoint_dir`` when it holds a
    checkpoint of the same table and config (the newest complete one: a save
    killed half-way leaves the previous one). ``stop_after`` (chunks) simulates an
    interruption. The result is bit-identical to an uninterrupted run on CPU."""
    trainer = make_train(config, max_depth=max_depth)
    hp = config.hparams() if hp is None else hp
    table = as_jax(table)
    digest = table_hash(table)
    keys = _keys(seeds)
    init = jax.jit(jax.vmap(trainer.init, in_axes=(0, None)))
    state = init(keys, hp)
    ckdir = Path(checkpoint_dir)
    if has_checkpoint(ckdir):
        state = load_trainer(ckdir, state, table_digest=digest, config=config, max_depth=max_depth, hp=hp)
    done = int(np.max(np.asarray(state.learner.decisions))) // config.checkpoint_every
    runs: dict[int, object] = {}  # one compiled program per chunk count (save_every, and a shorter tail)
    while done < trainer.n_chunks:
        n = min(save_every, trainer.n_chunks - done)
        if n not in runs:
            runs[n] = jax.jit(jax.vmap(lambda s, h, t, n=n: trainer.run(s, h, t, n_chunks=n), in_axes=(0, None, None)))
        state = runs[n](state, hp, table)
        done += n
        save_trainer(ckdir, state, table_digest=digest, config=config, max_depth=max_depth, hp=hp)
        if stop_after is not None and done >= stop_after:
            break
    return state


def _by_task(x: np.ndarray, samples: int) -> np.ndarray:
    """Per-root values ``[..., N]`` (roots of one task adjacent, as :func:`build_table` orders them) →
    ``[rows, tasks]`` with the samples (and any leading axes) as rows: the :class:`Cluster` layout."""
    x = np.asarray(x, float)
    n = x.shape[-1]
    if samples < 1 or n % samples:
        raise ValueError(f"{n} held-out roots are not a whole number of tasks × {samples} samples")
    x = x.reshape(*x.shape[:-1], n // samples, samples)
    return np.moveaxis(x, -1, -2).reshape(-1, n // samples)


def _return_interval(iv) -> dict:
    """:mod:`cfjax.infra.stats` works in percentage points (×100); returns are reported in return units."""
    d = iv.as_dict()
    return {**d, "mean": d["mean"] / 100.0, "lo": d["lo"] / 100.0, "hi": d["hi"] / 100.0}


def compare_with_fixed_policies(table: DecisionTable, res: SelectorsResult, config: dqn.DQNConfig, *,
                                max_depth: int, samples: int = 1, n_boot: int = 2000, seed: int = 0) -> dict:
    """Every learned selector next to skip only, always top-1 and the per-root oracle, on the same held-out roots.

    For each grid point (fixed policies re-scored under its reward weights): each fixed policy's return and
    solved rate, and for each seed and the mean over seeds, for the kept checkpoint (``best``) and the final
    parameters (``final``): the return and solved rate and the paired differences learned − top-1 (and
    learned − skip). Intervals are paired task-bootstrap 95% percentile intervals
    (:func:`cfjax.infra.stats.bootstrap` / :func:`~cfjax.infra.stats.paired_difference`, the same
    ``seed`` and so the same resampled tasks for every figure): the ``samples`` roots of one task (its draft
    samples) form one resampled unit, seeds stay inside it. Returns are in Eq. 10 return units, solved rates
    and their differences in percent / percentage points. JSON-ready.
    """
    from cfjax.infra.stats import Cluster, bootstrap, paired_difference

    if res.eval_root_return is None:
        raise ValueError("the result carries no per-root held-out outcomes (train with train_selectors)")
    hp = grid_hparams(config, res.grid)
    kw = dict(n_boot=n_boot, seed=seed)
    n_roots = int(np.shape(table.eval_roots)[0])
    out = {"n_roots": n_roots, "samples_per_task": samples, "n_tasks": n_roots // max(samples, 1),
           "n_boot": n_boot, "level": 0.95, "bootstrap_seed": seed,
           "units": {"return": "Eq. 10 return per episode", "solved": "percent of held-out episodes"},
           "interval": "paired task-bootstrap percentile interval (cfjax.experiments.stats)",
           "points": []}
    for g, point in enumerate(res.grid):
        fixed = fixed_policy_outcomes(table, jax.tree.map(lambda x: x[g], hp), tau0=config.tau0,
                                      max_depth=max_depth)
        rows_r = {k: _by_task(v[0], samples) for k, v in fixed.items()}
        rows_s = {k: _by_task(v[1], samples) for k, v in fixed.items()}
        learned: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for which, (rr, rs) in (("best", (res.eval_root_return, res.eval_root_solved)),
                                ("final", (res.final_root_return, res.final_root_solved))):
            for si, sd in enumerate(res.seeds):
                learned[f"{which}:{sd}"] = (rr[g, si], rs[g, si])
            learned[f"{which}:mean"] = (rr[g], rs[g])  # [S, N]: seeds inside each task
        for k, (r, sv) in learned.items():
            rows_r[k], rows_s[k] = _by_task(r, samples), _by_task(sv, samples)
        cr, cs = [Cluster(rows_r)], [Cluster(rows_s)]

        def fig(row: str) -> dict:
            return {"return": _return_interval(bootstrap(cr, row, **kw)),
                    "solved": bootstrap(cs, row, **kw).as_dict()}

        def diff(row: str, ref: str) -> dict:
            return {"return": _return_interval(paired_difference(cr, row, ref, **kw)),
                    "solved": paired_difference(cs, row, ref, **kw).as_dict()}

        block = {"grid": point, "fixed": {k: fig(k) for k in FIXED_POLICIES}, "selectors": []}
        for which in ("best", "final"):
            for sd in [*res.seeds, "mean"]:
                k = f"{which}:{sd}"
                block["selectors"].append({"seed": sd, "params": which, **fig(k),
                                           "minus_top1": diff(k, "top1"), "minus_skip": diff(k, "skip"),
                                           "oracle_minus": diff("oracle", k)})
        out["points"].append(block)
    return out


def verdict(minus_top1: dict) -> str:
    """Plain words for a learned − top-1 return interval: beats / does not beat / is worse than top-1."""
    lo, hi = minus_top1["lo"], minus_top1["hi"]
    if lo > 0:
        return "beats top-1"
    if hi < 0:
        return "worse than top-1"
    return "not distinguishable from top-1 (interval contains 0)"

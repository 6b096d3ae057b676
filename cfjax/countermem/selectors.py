"""Train many selectors at once on a decision table: seeds × hyperparameter grid,
sharded across devices, checkpointed in chunks and resumable bit-exactly.

The compute is :func:`cfjax.kernels.trainer.make_train`; this module only
arranges the batch axes, devices and files.

>>> table, meta = load_table("runs/table")
>>> res = train_selectors(table, DQNConfig(), seeds=range(5), grid=parse_grid(["lr=1e-3,3e-4"]))
>>> res.val_return.shape        # [grid points, seeds]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from cfjax.config import to_dict
from cfjax.infra.io import atomic_write_json, read_json
from cfjax.kernels import dqn
from cfjax.kernels.trainer import DecisionTable, TrainerState, as_jax, make_train, table_hash

__all__ = ["parse_seeds", "parse_grid", "grid_hparams", "SelectorsResult", "train_selectors",
           "save_trainer", "load_trainer", "CheckpointMismatchError", "train_resumable"]

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
    devices: int


def _keys(seeds: Sequence[int]) -> jnp.ndarray:
    return jnp.stack([jax.random.PRNGKey(s) for s in seeds])


def _batched_train(trainer):
    per_seed = jax.vmap(trainer.train, in_axes=(0, None, None))
    per_grid = jax.vmap(per_seed, in_axes=(None, 0, None))
    return jax.jit(per_grid)


def train_selectors(table: DecisionTable, config: dqn.DQNConfig, *, seeds: Sequence[int],
                    grid: Sequence[Mapping[str, float]] = ({},), max_depth: int = 2,
                    devices: Sequence[jax.Device] | None = None) -> SelectorsResult:
    """Train ``len(grid) × len(seeds)`` selectors in one jitted program.

    With several devices the seed axis is split across them (seeds are padded
    to a multiple of the device count and the padding dropped); the per-lane
    computation is the same as on one device.
    """
    seeds = tuple(seeds)
    grid = list(grid) or [{}]
    devices = list(devices) if devices is not None else jax.devices()
    trainer = make_train(config, max_depth=max_depth)
    hp = grid_hparams(config, grid)
    keys = _keys(seeds)
    table = as_jax(table)
    n_dev = len(devices)
    pad = (-len(seeds)) % n_dev if n_dev > 1 else 0
    if pad:
        keys = jnp.concatenate([keys, _keys([max(seeds) + 1 + i for i in range(pad)])])
    if n_dev > 1:
        mesh = Mesh(np.asarray(devices), ("seed",))
        keys = jax.device_put(keys, NamedSharding(mesh, PartitionSpec("seed")))
        rep = NamedSharding(mesh, PartitionSpec())
        hp = jax.device_put(hp, rep)
        table = jax.device_put(table, rep)
    state = _batched_train(trainer)(keys, hp, table)
    if pad:
        state = jax.tree.map(lambda x: x[:, : len(seeds)], state)
    ev = jax.jit(jax.vmap(jax.vmap(trainer.evaluate, in_axes=(0, None, None, None)), in_axes=(0, 0, None, None)))
    ret, solved = ev(state.best_params, hp, table, table.eval_roots)
    return SelectorsResult(
        seeds=seeds, grid=grid,
        val_return=np.asarray(state.best_return), best_decision=np.asarray(state.best_decision),
        eval_return=np.asarray(ret), eval_solved=np.asarray(solved),
        val_curve=np.asarray(state.val_returns), state=state, devices=n_dev,
    )


# --------------------------------------------------------------------------- checkpoints


class CheckpointMismatchError(ValueError):
    """A trainer checkpoint was loaded against another table or configuration."""


def _meta(table_digest: str, config: dqn.DQNConfig, max_depth: int, hp: dqn.DQNHParams, decisions: int) -> dict:
    return {"table_hash": table_digest, "config": to_dict(config), "max_depth": max_depth,
            "hparams": {k: np.asarray(v).tolist() for k, v in hp._asdict().items()}, "decisions": decisions}


def save_trainer(directory: str | Path, state: TrainerState, *, table_digest: str, config: dqn.DQNConfig,
                 max_depth: int, hp: dqn.DQNHParams) -> Path:
    """Save the full trainer state (params, target, Adam, replay, key, step, best
    checkpoint) with orbax, plus ``meta.json`` naming the table hash and config."""
    d = Path(directory).absolute()
    d.mkdir(parents=True, exist_ok=True)
    ck = ocp.StandardCheckpointer()
    try:
        ck.save(d / "state", jax.tree.map(np.asarray, state), force=True)
        ck.wait_until_finished()
    finally:
        ck.close()
    decisions = int(np.max(np.asarray(state.learner.decisions)))
    atomic_write_json(d / "meta.json", _meta(table_digest, config, max_depth, hp, decisions))
    return d


def load_trainer(directory: str | Path, like: TrainerState, *, table_digest: str, config: dqn.DQNConfig,
                 max_depth: int, hp: dqn.DQNHParams) -> TrainerState:
    """Restore a :func:`save_trainer` checkpoint; refuses another table, config or grid."""
    d = Path(directory).absolute()
    meta = read_json(d / "meta.json")
    want = _meta(table_digest, config, max_depth, hp, meta.get("decisions", 0))
    if meta["table_hash"] != table_digest:
        raise CheckpointMismatchError(
            f"checkpoint {d} was trained on decision table {meta['table_hash'][:12]}…, not {table_digest[:12]}…")
    for k in ("config", "max_depth", "hparams"):
        if meta[k] != want[k]:
            diff = sorted(x for x in set(meta[k]) | set(want[k]) if meta[k].get(x) != want[k].get(x)) \
                if isinstance(meta[k], dict) else [k]
            raise CheckpointMismatchError(f"checkpoint {d} was made with a different {k} (differs in {diff})")
    ck = ocp.StandardCheckpointer()
    try:
        restored = ck.restore(d / "state", jax.tree.map(np.asarray, like))
    finally:
        ck.close()
    return jax.tree.map(jnp.asarray, restored)


def train_resumable(table: DecisionTable, config: dqn.DQNConfig, *, seeds: Sequence[int],
                    hp: dqn.DQNHParams | None = None, checkpoint_dir: str | Path, save_every: int = 4,
                    max_depth: int = 2, stop_after: int | None = None) -> TrainerState:
    """Train a vmapped batch of seeds in chunks, saving after every ``save_every``
    validation chunks and resuming from ``checkpoint_dir`` when it holds a
    checkpoint of the same table and config. ``stop_after`` (chunks) simulates an
    interruption. The result is bit-identical to an uninterrupted run on CPU."""
    trainer = make_train(config, max_depth=max_depth)
    hp = config.hparams() if hp is None else hp
    table = as_jax(table)
    digest = table_hash(table)
    keys = _keys(seeds)
    init = jax.jit(jax.vmap(trainer.init, in_axes=(0, None)))
    state = init(keys, hp)
    ckdir = Path(checkpoint_dir)
    if (ckdir / "meta.json").exists():
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


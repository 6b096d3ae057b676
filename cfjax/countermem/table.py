"""Counterfactual decision tables for selector training (orchestration side).

At every decision the selector has at most 4 choices (skip or one of ≤ 3
retrieved records). The world model can check *every* choice from a copy of
the same state, so instead of sampling one choice per decision we record all
of them once: for each row the Eq. 9 observation, the valid mask, and per
choice the Eq. 10 cost increments, whether it solved the task and which row
follows. Later selector training (:mod:`cfjax.kernels.trainer`) runs on these
arrays without calling the backbone or the evaluator again.

Graph. For every task of T_train, the validation subset and T_eval, and for
``samples`` independent draft samples (episode ids), the root is decision 0.
A choice that solves the task, or any choice at the last allowed attempt,
ends the episode; otherwise its evaluated action and feedback enter the
history and the backbone drafts decision 1 — one child row per choice. With
``max_attempts = 2`` a root has at most 1 + 4 rows.

Costs. Each choice is charged the draft's tokens plus, for a record, the
REVISE_WITH_RECORD call, one evaluator call, and one failed attempt when it
does not solve the task — the increments the online agent charges.

Building is resumable: each task's rows are written as one part file
(atomically) and skipped on a rerun; :func:`build_table` then concatenates
them in a fixed order and stores a SHA-256 content hash.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cfjax.countermem.agent import Agent
from cfjax.infra.io import atomic_write_bytes, atomic_write_text
from cfjax.kernels import features as F
from cfjax.kernels.trainer import DecisionTable, table_hash
from cfjax.infra.ledger import Ledger
from cfjax.loop import draft_once
from cfjax.types import Attempt
from cfjax.types import Splits, Task

__all__ = ["TableMeta", "build_table", "load_table", "save_table"]

_EP_TABLE = 5_000_000
_FIELDS = ("obs", "mask", "calls", "failed", "tokens", "solved", "next")


@dataclass(frozen=True)
class TableMeta:
    """What a table was built from (``table.json`` beside ``table.npz``)."""

    hash: str
    rows: int
    roots: dict
    max_depth: int
    samples: int
    backbone: str
    suite: str
    seed: int


def _expand(agent: Agent, task: Task, episode: int, ledger: Ledger | None = None) -> dict[str, list]:
    """All rows of one (task, sample): depth-first, row 0 is the root. The draft, the retrieval and
    observation, and each choice's revision are the agent loop's own behaviours (:mod:`cfjax.loop`,
    :meth:`Agent.offer`, :meth:`Agent.revise`); every call is charged to ``ledger`` once."""
    ledger = ledger if ledger is not None else Ledger("table")
    cfg = agent.config
    store = agent.store
    assert store is not None and store.frozen, "tables are built against a frozen store"
    rows: dict[str, list] = {k: [] for k in _FIELDS}

    def node(history: list[Attempt], tokens_so_far: int) -> int:
        attempt = len(history)
        me = len(rows["obs"])
        for k in _FIELDS:
            rows[k].append(None)
        prop = draft_once(agent.backbone)(task, history, episode=episode, attempt=attempt, ledger=ledger)
        draft = prop.draft
        retrieved, z, mask = agent.offer(task, history, draft, attempt, tokens_so_far)
        calls = np.zeros(F.N_ACTIONS, np.float32)
        failed = np.zeros(F.N_ACTIONS, np.float32)
        tokens = np.zeros(F.N_ACTIONS, np.float32)
        solved = np.zeros(F.N_ACTIONS, bool)
        nxt = np.full(F.N_ACTIONS, -1, np.int32)
        for j in np.flatnonzero(mask):
            action, tok = draft, prop.tokens
            if j > 0:
                action, rtok = agent.revise(task, history, draft, retrieved[j - 1], episode, ledger)
                tok += rtok
            out = agent.world.evaluate(task, action)  # from a fresh copy of the same state
            ledger.evaluation(task.task_id, out)
            calls[j], failed[j], tokens[j], solved[j] = 1.0, float(not out.solved), tok, out.solved
            if not out.solved and attempt + 1 < cfg.agent.max_attempts:
                nxt[j] = node(history + [Attempt(action, out.feedback, float(out.score))], tokens_so_far + tok)
        for k, v in zip(_FIELDS, (z, mask, calls, failed, tokens, solved, nxt)):
            rows[k][me] = v
        return me

    node([], 0)
    return rows


def _part_bytes(rows: dict[str, list]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{k: np.stack(v) for k, v in rows.items()})
    return buf.getvalue()


def build_table(
    agent: Agent,
    splits: Splits,
    out_dir: str | Path,
    *,
    samples: int = 4,
    seed: int = 0,
    suite: str = "sql",
    progress: Callable[[str, int], object] | None = None,
) -> tuple[DecisionTable, TableMeta]:
    """Build (or resume) the decision table of ``splits`` under ``out_dir``.

    Runs the backbone and the evaluator once per (decision, choice). Parts
    already on disk (from an interrupted build with the same settings) are
    reused; the settings are checked against ``out_dir/build.json``.
    """
    out = Path(out_dir)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    settings = {"samples": samples, "seed": seed, "suite": suite, "backbone": agent.backbone.name,
                "max_attempts": agent.config.agent.max_attempts,
                "store_records": sorted(agent.store.records) if agent.store is not None else [],
                "tasks": {k: [t.task_id for t in getattr(splits, k)] for k in ("train", "val", "eval")}}
    sfile = out / "build.json"
    if sfile.exists():
        old = json.loads(sfile.read_text())
        if old != settings:
            raise ValueError(f"{out} holds a table build with other settings; use a new directory "
                             f"(differs in: {sorted(k for k in settings if old.get(k) != settings[k])})")
    else:
        atomic_write_text(sfile, json.dumps(settings, indent=1))
    jobs = [(name, t, s) for name in ("train", "val", "eval") for t in getattr(splits, name) for s in range(samples)]
    bar = progress("decision table", len(jobs)) if progress else None
    for n, (name, task, s) in enumerate(jobs):
        p = parts / f"{n:06d}.npz"
        if not p.exists():
            atomic_write_bytes(p, _part_bytes(_expand(agent, task, _EP_TABLE + 1000 * s)))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    # concatenate in job order; roots are the first row of each part
    arrays: dict[str, list] = {k: [] for k in _FIELDS}
    roots: dict[str, list[int]] = {"train": [], "val": [], "eval": []}
    offset = 0
    for n, (name, _, _) in enumerate(jobs):
        with np.load(parts / f"{n:06d}.npz") as z:
            part = {k: z[k] for k in _FIELDS}
        part["next"] = np.where(part["next"] >= 0, part["next"] + offset, -1).astype(np.int32)
        for k in _FIELDS:
            arrays[k].append(part[k])
        roots[name].append(offset)
        offset += len(part["obs"])
    table = DecisionTable(
        *(np.concatenate(arrays[k]) for k in _FIELDS),
        np.asarray(roots["train"], np.int32), np.asarray(roots["val"], np.int32), np.asarray(roots["eval"], np.int32),
    )
    meta = TableMeta(table_hash(table), offset, {k: len(v) for k, v in roots.items()},
                     agent.config.agent.max_attempts, samples, agent.backbone.name, suite, seed)
    save_table(out, table, meta)
    return table, meta


def save_table(out_dir: str | Path, table: DecisionTable, meta: TableMeta) -> None:
    """``table.npz`` (arrays) and ``table.json`` (meta with the content hash), both atomic."""
    out = Path(out_dir)
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in zip(DecisionTable._fields, table)})
    atomic_write_bytes(out / "table.npz", buf.getvalue())
    atomic_write_text(out / "table.json", json.dumps(vars(meta), indent=1))


def load_table(out_dir: str | Path) -> tuple[DecisionTable, TableMeta]:
    """Load a table and verify its content hash."""
    out = Path(out_dir)
    if not (out / "table.npz").exists():
        raise FileNotFoundError(f"no decision table in {out} (build one with `cfjax countermem table`)")
    with np.load(out / "table.npz") as z:
        table = DecisionTable(*(z[k] for k in DecisionTable._fields))
    meta = TableMeta(**json.loads((out / "table.json").read_text()))
    h = table_hash(table)
    if h != meta.hash:
        raise ValueError(f"decision table {out} is corrupt: content hash {h[:12]}… != recorded {meta.hash[:12]}…")
    return table, meta


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
them in a fixed order and stores a SHA-256 content hash. Opening a table
directory (to build or to load) removes stale temp files of interrupted
writes (older than :data:`cfjax.infra.io.STALE_TEMP_AGE_S`). A file that
cannot be trusted (a truncated ``.npz``, a ``table.json`` with a missing,
extra or mistyped key, arrays of inconsistent shapes, a wrong content hash)
raises :class:`cfjax.infra.io.CorruptFileError` naming it.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from cfjax.countermem.agent import Agent
from cfjax.infra.concurrency import inflight_of
from cfjax.infra.io import (CorruptFileError, InputError, JSONTooDeepError, atomic_write_bytes, atomic_write_text,
                            cleanup_stale_temps_in, loads_json)
from cfjax.kernels import features as F
from cfjax.kernels.trainer import DecisionTable, table_hash
from cfjax.infra.ledger import Ledger
from cfjax.loop import draft_once
from cfjax.types import Attempt
from cfjax.types import Splits, Task

__all__ = ["TableMeta", "TableSettingsError", "build_table", "load_table", "save_table", "read_json_file",
           "table_jobs", "build_part"]

_EP_TABLE = 5_000_000
_FIELDS = ("obs", "mask", "calls", "failed", "tokens", "solved", "next")


class TableSettingsError(InputError):
    """A table directory holds a build with other settings than the ones asked for."""


#: what np.load raises on a truncated or damaged .npz
_NPZ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)


def _load_npz(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of an ``.npz`` file (no pickles), or :class:`CorruptFileError`."""
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in names if k not in z.files]
            if missing:
                raise CorruptFileError(path, f"lacks the array(s) {missing}")
            return {k: np.asarray(z[k]) for k in names}
    except CorruptFileError:
        raise
    except FileNotFoundError:
        raise
    except _NPZ_ERRORS as e:
        raise CorruptFileError(path, f"not a readable .npz archive (truncated or damaged: "
                                     f"{type(e).__name__}: {' '.join(str(e).split())})") from None


def read_json_file(path: Path) -> object:
    """A plain JSON file (``build.json``, ``table.json``), or :class:`CorruptFileError`."""
    try:
        return loads_json(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError, JSONTooDeepError) as e:
        raise CorruptFileError(path, f"not valid JSON ({type(e).__name__}: {' '.join(str(e).split())})") from None


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

    @classmethod
    def from_json(cls, d: object, path: Path) -> "TableMeta":
        """The meta of ``table.json``: exactly these keys, each of its type, or :class:`CorruptFileError`."""
        names = [f.name for f in fields(cls)]
        if not isinstance(d, dict):
            raise CorruptFileError(path, f"must hold a JSON object, got {type(d).__name__}")
        extra, missing = sorted(set(d) - set(names)), [k for k in names if k not in d]
        if extra or missing:
            what = "; ".join(x for x in (f"unknown key(s) {extra}" if extra else "",
                                         f"missing key(s) {missing}" if missing else "") if x)
            raise CorruptFileError(path, f"{what} (expected exactly {', '.join(names)})")
        types = {"hash": str, "rows": int, "roots": dict, "max_depth": int, "samples": int, "backbone": str,
                 "suite": str, "seed": int}
        for k, t in types.items():
            if not isinstance(d[k], t) or isinstance(d[k], bool):
                raise CorruptFileError(path, f"key {k!r} must be {t.__name__}, got {type(d[k]).__name__}")
        roots = d["roots"]
        if set(roots) != {"train", "val", "eval"} or not all(isinstance(v, int) and not isinstance(v, bool)
                                                             and v >= 0 for v in roots.values()):
            raise CorruptFileError(path, "key 'roots' must map train, val and eval to counts >= 0")
        return cls(**d)


def _check_table(table: DecisionTable, meta: TableMeta, path: Path) -> None:
    """Shapes and ranges the trainer relies on (it indexes rows with ``next`` and the roots)."""
    obs = table.obs
    if obs.ndim != 2 or obs.shape[0] != meta.rows:
        raise CorruptFileError(path, f"obs has shape {obs.shape}, expected ({meta.rows}, d) as table.json says")
    R = obs.shape[0]
    per_choice = {k: getattr(table, k) for k in ("mask", "calls", "failed", "tokens", "solved", "next")}
    shapes = {v.shape for v in per_choice.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2 or next(iter(shapes))[0] != R:
        raise CorruptFileError(path, f"per-choice arrays have shapes {sorted(shapes)}, expected ({R}, A)")
    kinds = {"obs": "f", "mask": "b", "calls": "f", "failed": "f", "tokens": "f", "solved": "b", "next": "i",
             "train_roots": "i", "val_roots": "i", "eval_roots": "i"}
    wrong = [k for k, kind in kinds.items() if getattr(table, k).dtype.kind != kind]
    if wrong:
        raise CorruptFileError(path, f"array(s) {wrong} have the wrong dtype")
    if not np.all(np.isfinite(table.obs)):
        raise CorruptFileError(path, "obs holds NaN or infinite values")
    if not np.issubdtype(table.next.dtype, np.integer) or (R and (table.next.min() < -1 or table.next.max() >= R)):
        raise CorruptFileError(path, "next holds row numbers outside [-1, rows)")
    for k in ("train", "val", "eval"):
        r = getattr(table, f"{k}_roots")
        if r.ndim != 1 or len(r) != meta.roots[k] or not np.issubdtype(r.dtype, np.integer) \
                or (len(r) and (r.min() < 0 or r.max() >= R)):
            raise CorruptFileError(path, f"{k}_roots do not match table.json ({meta.roots[k]} rows in [0, {R}))")


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


def table_jobs(splits: Splits, samples: int) -> list[tuple[str, Task, int]]:
    """The parts of a table, in table order: ``(split name, task, draft sample)`` for every task of
    ``train``, ``val`` and ``eval`` and every sample; part ``n`` is ``parts/{n:06d}.npz``."""
    return [(name, t, s) for name in ("train", "val", "eval") for t in getattr(splits, name) for s in range(samples)]


def build_part(agent: Agent, task: Task, sample: int) -> bytes:
    """The ``.npz`` bytes of one part: every row of ``(task, sample)`` (:func:`_expand`). A
    deterministic function of the agent (frozen store, backbone seed) and the part: safe to build on
    any thread or process."""
    return _part_bytes(_expand(agent, task, _EP_TABLE + 1000 * sample))


def _each(fn: Callable[[int], None], items: list[int], *, threads: int, done: Callable[[], None] | None) -> None:
    """``fn`` on every item, on up to ``threads`` threads; ``done()`` after each (in this thread). The
    first exception (in item order) is raised once every started call has finished (their parts
    stay on disk for a resumed build); calls not yet started are cancelled."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if threads == 1 or len(items) <= 1:
        for x in items:
            fn(x)
            if done is not None:
                done()
        return
    from concurrent.futures import ThreadPoolExecutor, as_completed

    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="cfjax-table") as ex:
        futs = {ex.submit(fn, x): i for i, x in enumerate(items)}
        errors: dict[int, BaseException] = {}
        for f in as_completed(futs):
            if f.cancelled():
                continue
            e = f.exception()
            if e is not None:
                errors[futs[f]] = e
                for g in futs:
                    g.cancel()
            elif done is not None:
                done()
        if errors:
            raise errors[min(errors)]


def build_table(
    agent: Agent,
    splits: Splits,
    out_dir: str | Path,
    *,
    samples: int = 4,
    seed: int = 0,
    suite: str = "sql",
    progress: Callable[[str, int], object] | None = None,
    threads: int | None = None,
    make_parts: Callable[[list[int]], Iterable[tuple[int, bytes]]] | None = None,
) -> tuple[DecisionTable, TableMeta]:
    """Build (or resume) the decision table of ``splits`` under ``out_dir``.

    Runs the backbone and the evaluator once per (decision, choice). Parts
    already on disk (from an interrupted build with the same settings) are
    reused; the settings are checked against ``out_dir/build.json``.

    The parts (one per :func:`table_jobs` entry: a task and a draft sample) are independent: the
    missing ones are built on ``threads`` threads (default: the backbone's ``max_inflight``, 1 for
    the scripted simulator), each written atomically as it finishes, or — with ``make_parts`` —
    by that callable, which gets the missing part numbers and yields ``(number, part bytes)``
    (e.g. Ray tasks that rebuild the agent from a description, :mod:`cfjax.experiments.countermem.table_jobs`).
    The table is concatenated in job order afterwards, so it does not depend on how or in which
    order the parts were made.
    """
    out = Path(out_dir)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    cleanup_stale_temps_in(out)
    cleanup_stale_temps_in(parts)
    settings = {"samples": samples, "seed": seed, "suite": suite, "backbone": agent.backbone.name,
                "max_attempts": agent.config.agent.max_attempts,
                "store_records": sorted(agent.store.records) if agent.store is not None else [],
                "tasks": {k: [t.task_id for t in getattr(splits, k)] for k in ("train", "val", "eval")}}
    sfile = out / "build.json"
    if sfile.exists():
        old = read_json_file(sfile)
        if not isinstance(old, dict):
            raise CorruptFileError(sfile, f"must hold a JSON object, got {type(old).__name__}")
        if old != settings:
            raise TableSettingsError(f"{out} holds a table build with other settings; use a new directory "
                                     f"(differs in: {sorted(k for k in settings if old.get(k) != settings[k])})")
    else:
        atomic_write_text(sfile, json.dumps(settings, indent=1))
    jobs = table_jobs(splits, samples)
    bar = progress("decision table", len(jobs)) if progress else None
    todo = [n for n in range(len(jobs)) if not (parts / f"{n:06d}.npz").exists()]
    if bar is not None:
        bar.update(len(jobs) - len(todo))

    def one(n: int) -> None:
        _, task, s = jobs[n]
        atomic_write_bytes(parts / f"{n:06d}.npz", build_part(agent, task, s))

    try:
        if make_parts is not None:
            asked = set(todo)
            for n, data in make_parts(todo):
                if n not in asked:
                    raise RuntimeError(f"make_parts returned part {n}, which was not asked for")
                asked.discard(n)
                atomic_write_bytes(parts / f"{n:06d}.npz", data)
                if bar is not None:
                    bar.update(1)
            if asked:
                raise RuntimeError(f"make_parts did not return part(s) {sorted(asked)[:10]}")
        else:
            _each(one, todo, threads=inflight_of(agent.backbone) if threads is None else threads,
                  done=(lambda: bar.update(1)) if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    # concatenate in job order; roots are the first row of each part
    arrays: dict[str, list] = {k: [] for k in _FIELDS}
    roots: dict[str, list[int]] = {"train": [], "val": [], "eval": []}
    offset = 0
    for n, (name, _, _) in enumerate(jobs):
        part = _load_npz(parts / f"{n:06d}.npz", _FIELDS)
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
    """Load a table and verify it: ``table.json`` has exactly the :class:`TableMeta` keys with their
    types, the arrays have consistent shapes and in-range row numbers, and the content hash matches.

    Raises:
      FileNotFoundError: no ``table.npz`` or ``table.json`` in ``out_dir``.
      CorruptFileError: (a ``ValueError``) naming the file and what is wrong with it.
    """
    out = Path(out_dir)
    if not (out / "table.npz").exists():
        raise FileNotFoundError(f"no decision table in {out} (build one with `cfjax countermem table`)")
    if not (out / "table.json").exists():
        raise FileNotFoundError(f"{out} has table.npz but no table.json (rebuild with `cfjax countermem table`)")
    cleanup_stale_temps_in(out)
    meta = TableMeta.from_json(read_json_file(out / "table.json"), out / "table.json")
    table = DecisionTable(**_load_npz(out / "table.npz", DecisionTable._fields))
    _check_table(table, meta, out / "table.npz")
    h = table_hash(table)
    if h != meta.hash:
        raise CorruptFileError(out / "table.npz", f"decision table is corrupt: content hash {h[:12]}… != "
                                                  f"recorded {meta.hash[:12]}…")
    return table, meta


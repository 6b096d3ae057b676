"""Counterfactual decision tables for selector training (orchestration side).

At every decision the selector has at most 4 choices (skip or one of ≤ 3
retrieved records). The world model can check *every* choice from a copy of
the same state, so instead of sampling one choice per decision we record all
of them once: for each row the Eq. 9 observation, the valid mask, and per
choice the Eq. 10 cost increments, whether it solved the task and which row
follows. Later selector training (:mod:`cfjax.kernels.trainer`) runs on these
arrays without calling the backbone or the evaluator again.

Observations. A row stores the observation of every selector layout
(:data:`cfjax.config.countermem.OBSERVATIONS`: ``"paper"`` and ``"legacy"``,
:attr:`AgentConfig.observation`), computed agent-side from the same decision
state (:meth:`Agent.offer_layouts`; each equals what :meth:`Agent.offer`
gives with ``agent.observation`` set to that layout). Nothing else depends on
the layout: the mask is the same in both, so are the choices, costs and
outcomes. ``table.npz`` holds ``obs_<layout>`` per layout and the shared
arrays; ``table.json`` lists the layouts (``observations``) and a SHA-256 over
every array of the file. :func:`load_tables` gives one
:class:`~cfjax.kernels.trainer.DecisionTable` per layout (sharing the other
arrays), :func:`load_table` one of them. A table file from before the layouts
were recorded (one ``obs`` array, no ``observations`` key, the hash
:func:`~cfjax.kernels.trainer.table_hash` of its one table) still loads: its
layout is read from its root rows (:func:`infer_observation`).

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
them in a fixed order and stores a SHA-256 content hash (:func:`file_hash`). Opening a table
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from cfjax.config.countermem import OBSERVATIONS
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

__all__ = ["TableMeta", "TableSettingsError", "build_table", "load_table", "load_tables", "save_table",
           "read_json_file", "table_jobs", "build_part", "file_hash", "infer_observation", "UNKNOWN_OBSERVATION",
           "missing_observation_message"]

_EP_TABLE = 5_000_000
_CHOICE_FIELDS = ("mask", "calls", "failed", "tokens", "solved", "next")  # shared by every layout
_ROOT_FIELDS = ("train_roots", "val_roots", "eval_roots")

#: the layout name :func:`load_tables` gives the one observation of an old table file whose layout
#: cannot be read from its rows (:func:`infer_observation`)
UNKNOWN_OBSERVATION = "unknown"


def _obs_key(layout: str) -> str:
    """The ``.npz`` array (part files and ``table.npz``) of one layout's observations."""
    return f"obs_{layout}"


def _hash_arrays(items: Iterable[tuple[str, np.ndarray]]) -> str:
    """SHA-256 over named arrays (name, dtype, shape and bytes), in order: :func:`table_hash`'s recipe."""
    import hashlib

    h = hashlib.sha256()
    for name, arr in items:
        a = np.ascontiguousarray(np.asarray(arr))
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _file_arrays(tables: Mapping[str, DecisionTable]) -> dict[str, np.ndarray]:
    """The arrays of ``table.npz`` for one table per layout, in file order: ``obs_<layout>`` per layout,
    then the shared arrays (which must be the same in every layout)."""
    if not tables:
        raise ValueError("no observation layouts to store")
    unknown = [k for k in tables if k not in OBSERVATIONS]
    if unknown:
        raise ValueError(f"unknown observation layout(s) {unknown} (choose from {', '.join(OBSERVATIONS)})")
    first, *rest = tables.values()
    for name in (*_CHOICE_FIELDS, *_ROOT_FIELDS):
        a = np.asarray(getattr(first, name))
        if any(not np.array_equal(a, np.asarray(getattr(t, name))) for t in rest):
            raise ValueError(f"the layouts' tables differ in {name!r}: only the observation may differ")
    out = {_obs_key(k): np.asarray(t.obs) for k, t in tables.items()}
    out.update({name: np.asarray(getattr(first, name)) for name in (*_CHOICE_FIELDS, *_ROOT_FIELDS)})
    return out


def file_hash(tables: Mapping[str, DecisionTable] | DecisionTable) -> str:
    """The content hash ``table.json`` records: SHA-256 over every array of ``table.npz`` in file order.

    For one table per layout (``{layout: DecisionTable}``) that is ``obs_<layout>`` per layout, then
    the shared arrays; for a bare :class:`DecisionTable` (the single-``obs`` file of a table from
    before the layouts were recorded) it is :func:`~cfjax.kernels.trainer.table_hash`. The table a
    selector is trained on (one layout) has its own :func:`table_hash`, which checkpoints record."""
    if isinstance(tables, DecisionTable):
        return table_hash(tables)
    return _hash_arrays(_file_arrays(tables).items())


def infer_observation(table: DecisionTable) -> str:
    """The layout of the one ``obs`` array of a table file from before the layouts were recorded, read
    from its root rows (attempt 0): the first budget feature (``z[92]``) is the remaining attempts
    ``T/T = 1`` in ``"legacy"`` and the attempt index ``0/T = 0`` in ``"paper"``.
    :data:`UNKNOWN_OBSERVATION` when there are no roots or they are not all one or the other
    (e.g. a hand-made table)."""
    roots = np.concatenate([np.asarray(getattr(table, k)) for k in _ROOT_FIELDS]).astype(np.int64)
    if not len(roots):
        return UNKNOWN_OBSERVATION
    b0 = np.asarray(table.obs)[roots, F.BUDGET_OFFSET]
    if np.all(b0 == 1.0):
        return "legacy"
    if np.all(b0 == 0.0):
        return "paper"
    return UNKNOWN_OBSERVATION


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
    """What a table was built from (``table.json`` beside ``table.npz``).

    ``hash`` is :func:`file_hash` of the file's arrays. ``observations`` are the layouts the file stores
    (``obs_<layout>`` each, in this order); ``()`` for a table file from before the layouts were
    recorded (no ``observations`` key; one ``obs`` array, its layout read by :func:`load_tables`)."""

    hash: str
    rows: int
    roots: dict
    max_depth: int
    samples: int
    backbone: str
    suite: str
    seed: int
    observations: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """The ``table.json`` object (no ``observations`` key for a single-``obs`` table file)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.observations:
            d["observations"] = list(self.observations)
        else:
            del d["observations"]
        return d

    @classmethod
    def from_json(cls, d: object, path: Path) -> "TableMeta":
        """The meta of ``table.json``: exactly these keys (``observations`` optional), each of its type,
        or :class:`CorruptFileError`."""
        names = [f.name for f in fields(cls) if f.name != "observations"]
        if not isinstance(d, dict):
            raise CorruptFileError(path, f"must hold a JSON object, got {type(d).__name__}")
        extra = sorted(set(d) - set(names) - {"observations"})
        missing = [k for k in names if k not in d]
        if extra or missing:
            what = "; ".join(x for x in (f"unknown key(s) {extra}" if extra else "",
                                         f"missing key(s) {missing}" if missing else "") if x)
            raise CorruptFileError(path, f"{what} (expected exactly {', '.join(names)} and optionally "
                                         f"observations)")
        d = dict(d)
        if "observations" in d:
            obs = d["observations"]
            if not (isinstance(obs, list) and obs and all(isinstance(x, str) and x in OBSERVATIONS for x in obs)
                    and len(set(obs)) == len(obs)):
                raise CorruptFileError(path, f"key 'observations' must list distinct layouts of "
                                             f"{', '.join(OBSERVATIONS)}, got {obs!r}")
            d["observations"] = tuple(obs)
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


def _expand(agent: Agent, task: Task, episode: int, ledger: Ledger | None = None,
            observations: Sequence[str] = OBSERVATIONS) -> dict[str, list]:
    """All rows of one (task, sample): depth-first, row 0 is the root. The draft, the retrieval and
    the observation in every layout of ``observations``, and each choice's revision are the agent
    loop's own behaviours (:mod:`cfjax.loop`, :meth:`Agent.offer_layouts`, :meth:`Agent.revise`);
    every call is charged to ``ledger`` once."""
    ledger = ledger if ledger is not None else Ledger("table")
    cfg = agent.config
    store = agent.store
    assert store is not None and store.frozen, "tables are built against a frozen store"
    obs_keys = tuple(_obs_key(k) for k in observations)
    names = (*obs_keys, *_CHOICE_FIELDS)
    rows: dict[str, list] = {k: [] for k in names}

    def node(history: list[Attempt], tokens_so_far: int) -> int:
        attempt = len(history)
        me = len(rows["mask"])
        for k in names:
            rows[k].append(None)
        prop = draft_once(agent.backbone)(task, history, episode=episode, attempt=attempt, ledger=ledger)
        draft = prop.draft
        retrieved, zs, mask = agent.offer_layouts(task, history, draft, attempt, tokens_so_far, tuple(observations))
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
        for k, layout in zip(obs_keys, observations):
            rows[k][me] = zs[layout]
        for k, v in zip(_CHOICE_FIELDS, (mask, calls, failed, tokens, solved, nxt)):
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


def build_part(agent: Agent, task: Task, sample: int, observations: Sequence[str] = OBSERVATIONS) -> bytes:
    """The ``.npz`` bytes of one part: every row of ``(task, sample)`` (:func:`_expand`), with the
    observation of every layout of ``observations`` (``obs_<layout>``). A deterministic function of
    the agent (frozen store, backbone seed) and the part: safe to build on any thread or process."""
    return _part_bytes(_expand(agent, task, _EP_TABLE + 1000 * sample, observations=observations))


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
    observations: Sequence[str] = OBSERVATIONS,
) -> tuple[DecisionTable, TableMeta]:
    """Build (or resume) the decision table of ``splits`` under ``out_dir``.

    Runs the backbone and the evaluator once per (decision, choice). Parts
    already on disk (from an interrupted build with the same settings) are
    reused; the settings are checked against ``out_dir/build.json``.

    Every row stores the observation of each layout of ``observations`` (default both; the module
    docstring). Returns the table of the agent's layout (``agent.observation``; the first stored one
    when it is not among them) and the meta; :func:`load_tables` gives every layout's.

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
    observations = tuple(observations)
    if not observations or len(set(observations)) != len(observations) \
            or any(k not in OBSERVATIONS for k in observations):
        raise ValueError(f"observations must be distinct layouts of {', '.join(OBSERVATIONS)}, got {observations}")
    settings = {"samples": samples, "seed": seed, "suite": suite, "backbone": agent.backbone.name,
                "max_attempts": agent.config.agent.max_attempts,
                "store_records": sorted(agent.store.records) if agent.store is not None else [],
                "tasks": {k: [t.task_id for t in getattr(splits, k)] for k in ("train", "val", "eval")},
                "observations": list(observations)}
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
        atomic_write_bytes(parts / f"{n:06d}.npz", build_part(agent, task, s, observations))

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
    obs_keys = tuple(_obs_key(k) for k in observations)
    names = (*obs_keys, *_CHOICE_FIELDS)
    arrays: dict[str, list] = {k: [] for k in names}
    roots: dict[str, list[int]] = {"train": [], "val": [], "eval": []}
    offset = 0
    for n, (name, _, _) in enumerate(jobs):
        part = _load_npz(parts / f"{n:06d}.npz", names)
        part["next"] = np.where(part["next"] >= 0, part["next"] + offset, -1).astype(np.int32)
        for k in names:
            arrays[k].append(part[k])
        roots[name].append(offset)
        offset += len(part["mask"])
    shared = {k: np.concatenate(arrays[k]) for k in _CHOICE_FIELDS}
    shared.update({f"{k}_roots": np.asarray(v, np.int32) for k, v in roots.items()})
    tables = {layout: DecisionTable(obs=np.concatenate(arrays[key]), **shared)
              for layout, key in zip(observations, obs_keys)}
    meta = TableMeta(file_hash(tables), offset, {k: len(v) for k, v in roots.items()},
                     agent.config.agent.max_attempts, samples, agent.backbone.name, suite, seed, observations)
    save_table(out, tables, meta)
    mine = agent.config.agent.observation
    return tables[mine if mine in tables else observations[0]], meta


def save_table(out_dir: str | Path, table: DecisionTable | Mapping[str, DecisionTable], meta: TableMeta) -> None:
    """``table.npz`` (arrays) and ``table.json`` (``meta``, with its content hash), both atomic.

    ``table`` is one :class:`DecisionTable` per layout of ``meta.observations`` (``{layout: table}``,
    or a bare table when there is one layout), stored as ``obs_<layout>`` arrays beside the shared
    ones; a bare table with ``meta.observations == ()`` is stored as a single-``obs`` file, the format
    of the tables from before the layouts were recorded. ``meta.hash`` is written as given
    (:func:`file_hash` computes it)."""
    out = Path(out_dir)
    if isinstance(table, DecisionTable):
        if len(meta.observations) > 1:
            raise ValueError(f"one table given for the {len(meta.observations)} layouts {meta.observations}")
        arrays = ({_obs_key(meta.observations[0]) if k == "obs" and meta.observations else k: np.asarray(v)
                   for k, v in zip(DecisionTable._fields, table)})
    else:
        if tuple(table) != tuple(meta.observations):
            raise ValueError(f"tables for the layouts {tuple(table)} but meta.observations = {meta.observations}")
        arrays = _file_arrays(table)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(out / "table.npz", buf.getvalue())
    atomic_write_text(out / "table.json", json.dumps(meta.to_json(), indent=1))


def load_tables(out_dir: str | Path) -> tuple[dict[str, DecisionTable], TableMeta]:
    """Load a table and verify it: ``{layout: DecisionTable}`` (one per stored observation layout, in
    table order, sharing every array but ``obs``) and the meta.

    ``table.json`` has exactly the :class:`TableMeta` keys with their types, the arrays have
    consistent shapes and in-range row numbers, and the content hash matches. A table file from
    before the layouts were recorded (``meta.observations == ()``) gives one entry, keyed by the
    layout :func:`infer_observation` reads from its rows.

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
    npz = out / "table.npz"
    if meta.observations:
        keys = tuple(_obs_key(k) for k in meta.observations)
        names = (*keys, *_CHOICE_FIELDS, *_ROOT_FIELDS)
        arrays = _load_npz(npz, names)
        shared = {k: arrays[k] for k in (*_CHOICE_FIELDS, *_ROOT_FIELDS)}
        tables = {layout: DecisionTable(obs=arrays[key], **shared) for layout, key in zip(meta.observations, keys)}
        for t in tables.values():
            _check_table(t, meta, npz)
        h = _hash_arrays((k, arrays[k]) for k in names)
    else:
        table = DecisionTable(**_load_npz(npz, DecisionTable._fields))
        _check_table(table, meta, npz)
        h = table_hash(table)
        tables = {infer_observation(table): table}
    if h != meta.hash:
        raise CorruptFileError(npz, f"decision table is corrupt: content hash {h[:12]}… != "
                                    f"recorded {meta.hash[:12]}…")
    return tables, meta


def missing_observation_message(out_dir: str | Path, have: Sequence[str], want: str) -> str:
    """One line: the table in ``out_dir`` does not hold the layout ``want`` (it holds ``have``)."""
    return (f"the decision table {out_dir} holds the observation layout(s) {', '.join(have)} only, not {want!r} "
            f"(a table built by `cfjax countermem table` now stores both; rebuild it to get {want!r})")


def load_table(out_dir: str | Path, observation: str | None = None) -> tuple[DecisionTable, TableMeta]:
    """:func:`load_tables`, then the table of one observation layout: ``observation``, or by default
    ``"paper"`` when stored, else the first stored one. A layout the table does not hold raises
    :class:`cfjax.config.ConfigError` naming the table and the layouts it holds."""
    tables, meta = load_tables(out_dir)
    if observation is None:
        observation = "paper" if "paper" in tables else next(iter(tables))
    if observation not in tables:
        from cfjax.config import ConfigError

        raise ConfigError(missing_observation_message(out_dir, list(tables), observation))
    return tables[observation], meta


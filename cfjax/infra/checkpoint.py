"""Crash-safe orbax checkpoints with a JSON sidecar of metadata.

A checkpoint directory holds numbered *steps*; a save never touches a
committed step, so a crash (``kill -9``, power loss) at any moment leaves the
last complete checkpoint loadable::

    <dir>/
      ckpt_00000007/                    the newest committed step
        <item>/                         orbax StandardCheckpointer tree ("state", "params")
        meta.json                       atomic_write_json sidecar of exactly this step
      ckpt_00000006/                    an older committed step (the newest ``keep`` are kept)
      .tmp-ckpt_00000008-<host>-<pid>-<hex>/    a save in progress, or left by a killed one
      .trash-ckpt_00000005-<host>-<pid>-<hex>/  an old step being deleted

Commit protocol (:func:`save_step`):

1. stale ``.tmp-*`` / ``.trash-*`` directories of dead writers are removed;
2. a fresh ``.tmp-*`` directory is created; orbax writes ``<item>/`` into it,
   then ``meta.json`` is written next to it (so the sidecar always describes
   the tree beside it);
3. every file and directory under it is ``fsync``-ed;
4. it is ``os.rename``-d to ``ckpt_<N>`` (``N`` = 1 + the newest committed
   step; a rename never replaces an existing step) and ``<dir>`` is
   ``fsync``-ed — this rename *is* the commit;
5. only then are steps older than the newest ``keep`` removed: each is first
   renamed to ``.trash-*`` (atomic, so a half-deleted directory never carries a
   step name), then deleted.

What a crash leaves: before 4, a ``.tmp-*`` directory that loaders ignore and
the next open removes (the previous step is untouched); after 4, the new step
(and maybe one more old step than ``keep``, or a ``.trash-*`` directory, both
cleaned up later). Loaders (:func:`load_latest`) take the newest committed
step; should it be unreadable all the same (a corrupt disk), they warn and fall
back to the next older one.

Writers are identified by host and pid in the temp names: a temp directory is
*stale* when its writer is a dead process of this host, or when it has not been
touched for :data:`STALE_AFTER_S` (another host's writer, a reused pid), so a
concurrent live writer's directory is not removed. Concurrent writers of one
directory are not otherwise coordinated (the step numbering just avoids
collisions); saves are single-host (``jax.process_count() == 1``), as before.

:func:`save_params` keeps one complete copy, the trainer
(:func:`cfjax.countermem.selectors.save_trainer`) the newest two.

Why not orbax's ``CheckpointManager`` (0.12): it deletes old steps in place
(``rmtree``), so a kill during a deletion leaves a half-deleted directory that
still carries a step name; it does not ``fsync`` before its commit rename; and
its JSON items are not this project's checksummed ``atomic_write_json`` files.

Pre-step format (a plain ``<dir>/<item>/`` orbax directory and
``<dir>/meta.json``, written by earlier versions with ``force=True``): still
loaded when the directory holds no committed step; when its ``meta.json`` is
there but its ``<item>/`` is missing (a save of that format was interrupted,
which deleted it) loading raises :class:`IncompleteCheckpointError` (that
progress is lost; remove the directory to start over). :func:`has_checkpoint`
is true for it as soon as its ``meta.json`` exists, as the old resume logic had
it. The first save of the new format removes the old files once the new step is
committed.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from cfjax.infra.io import atomic_write_json, read_json

__all__ = ["save_params", "load_params", "save_step", "load_latest", "committed_steps", "has_checkpoint",
           "cleanup_stale", "IncompleteCheckpointError", "STALE_AFTER_S"]

META = "meta.json"
_STEP = "ckpt_"
_STEP_RE = re.compile(r"^ckpt_(\d{8,})$")
_TMP = ".tmp-"
_TRASH = ".trash-"
_ORBAX_TMP = ".orbax-checkpoint-tmp"

#: A temp directory untouched for this many seconds is stale whoever wrote it.
STALE_AFTER_S = 3600.0

#: Test seam: when set, called as ``hook(phase, path)`` at each phase of :func:`save_step`
#: ("tmp_created", "item_written", "meta_written", "synced", "committed", "trashed", "pruned").
_crash_hook: Callable[[str, Path], None] | None = None


class IncompleteCheckpointError(FileNotFoundError):
    """A checkpoint directory whose metadata names a checkpoint that is not there."""


def _phase(name: str, path: Path) -> None:
    if _crash_hook is not None:
        _crash_hook(name, path)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def _step_name(n: int) -> str:
    return f"{_STEP}{n:08d}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's
    except OSError:
        return True
    return True


def _fsync_path(p: str, directory: bool) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(p, flags)
    except OSError:
        if directory:
            return  # e.g. Windows
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:  # some filesystems cannot fsync directories
            raise
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for d, _dirs, files in os.walk(root, topdown=False):
        for f in files:
            _fsync_path(os.path.join(d, f), False)
        _fsync_path(d, True)


def _rmtree(p: Path) -> None:
    shutil.rmtree(p, ignore_errors=True)


def committed_steps(directory: str | Path) -> list[Path]:
    """The committed step directories under ``directory``, newest first (``[]`` if none)."""
    d = Path(directory)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    steps = [(int(m.group(1)), n) for n in names if (m := _STEP_RE.match(n)) and (d / n).is_dir()]
    return [d / n for _, n in sorted(steps, reverse=True)]


def _writer_is_dead(p: Path, prefix: str) -> bool:
    """Whether the ``.tmp-``/``.trash-`` directory ``p`` belongs to a writer that is gone."""
    rest = p.name[len(prefix):]
    parts = rest.rsplit("-", 3)  # <step>-<host>-<pid>-<hex>; a host never holds "-"
    try:
        host, pid = parts[1], int(parts[2])
    except (IndexError, ValueError):
        host, pid = None, None
    if host == _host() and pid is not None and not _pid_alive(pid):
        return True
    try:
        return time.time() - p.stat().st_mtime >= STALE_AFTER_S
    except FileNotFoundError:
        return False


def cleanup_stale(directory: str | Path) -> list[Path]:
    """Remove what killed saves left in ``directory``: temp and trash directories of dead
    writers, and ``*.orbax-checkpoint-tmp*`` directories of the pre-step format. Returns them."""
    d = Path(directory)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    removed = []
    for n in names:
        p = d / n
        if n.startswith(_TMP):
            stale = _writer_is_dead(p, _TMP)
        elif n.startswith(_TRASH):
            stale = _writer_is_dead(p, _TRASH)
        else:
            stale = _ORBAX_TMP in n and not _STEP_RE.match(n)  # never written by this format
        if stale and p.is_dir():
            _rmtree(p)
            removed.append(p)
    return removed


def _unique(prefix: str, name: str) -> str:
    return f"{prefix}{name}-{_host()}-{os.getpid()}-{secrets.token_hex(4)}"


def _discard(d: Path, p: Path) -> None:
    """Delete the directory ``p`` (in ``d``) so that no partial copy keeps its name."""
    trash = d / _unique(_TRASH, p.name)
    try:
        os.rename(p, trash)
    except FileNotFoundError:
        return
    _fsync_path(str(d), True)
    _phase("trashed", trash)
    _rmtree(trash)


def _remove_legacy(d: Path, item: str) -> None:
    if (d / item).is_dir():
        _discard(d, d / item)
    try:
        os.unlink(d / META)
    except FileNotFoundError:
        pass


#: one orbax save or restore at a time in this process (units of a job may run on threads:
#: ``countermem run`` with an LLM backbone; saves of different directories raced inside orbax)
_ORBAX_LOCK = threading.Lock()


def save_step(directory: str | Path, item: str, tree: Any, meta: dict, *, keep: int = 2) -> Path:
    """Commit ``tree`` (saved as ``<item>/``) and ``meta`` as a new step of ``directory``;
    then drop all but the newest ``keep`` steps. Returns the committed step directory."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, not {keep}")
    if not item or "/" in item or item == META or item.startswith("."):
        raise ValueError(f"bad item name {item!r}")
    d = Path(directory).absolute()
    d.mkdir(parents=True, exist_ok=True)
    cleanup_stale(d)
    steps = committed_steps(d)
    n = int(_STEP_RE.match(steps[0].name).group(1)) + 1 if steps else 1
    tmp = d / _unique(_TMP, _step_name(n))
    tmp.mkdir()
    try:
        _phase("tmp_created", tmp)
        with _ORBAX_LOCK:  # orbax's checkpointers are not safe to run from several threads at once
            ck = ocp.StandardCheckpointer()
            try:
                ck.save(tmp / item, jax.tree.map(np.asarray, tree))
                ck.wait_until_finished()
            finally:
                ck.close()
        _phase("item_written", tmp)
        atomic_write_json(tmp / META, meta)
        _phase("meta_written", tmp)
        _fsync_tree(tmp)
        _phase("synced", tmp)
        while True:
            final = d / _step_name(n)
            try:
                os.rename(tmp, final)  # the commit; never replaces a (non-empty) step directory
                break
            except OSError:
                if not final.exists():
                    raise
                n += 1  # another writer took this number
        _fsync_path(str(d), True)
    except BaseException:
        _rmtree(tmp)
        raise
    _phase("committed", final)
    for old in committed_steps(d)[keep:]:
        _discard(d, old)
    _remove_legacy(d, item)
    _phase("pruned", final)
    return final


def has_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` holds a checkpoint for :func:`load_latest`: a committed step, or the
    pre-step format's ``meta.json`` (a pre-step ``<item>/`` without it is a first save that did
    not finish, as before)."""
    d = Path(directory)
    return bool(committed_steps(d)) or (d / META).exists()


def _restore(path: Path, like: Any | None) -> Any:
    with _ORBAX_LOCK:
        ck = ocp.StandardCheckpointer()
        try:
            if like is not None:
                return ck.restore(path, jax.tree.map(np.asarray, like))
            return ck.restore(path)
        finally:
            ck.close()


def load_latest(directory: str | Path, item: str, like: Any | None = None, *,
                check: Callable[[dict, Path], None] | None = None) -> tuple[Any, dict, Path]:
    """Load ``(tree, meta, step_dir)`` from the newest committed step of ``directory``.

    ``check(meta, step_dir)`` runs before the tree is read; what it raises propagates. A step
    whose files cannot be read (corrupt or missing) is skipped with a warning for the next older
    one. Without committed steps the pre-step format is read. Raises :class:`FileNotFoundError`
    when there is nothing to load (:class:`IncompleteCheckpointError` for an interrupted save of
    the pre-step format), else the newest step's error if no step can be read.
    """
    d = Path(directory).absolute()
    cleanup_stale(d)
    steps = committed_steps(d)
    if not steps:
        if not (d / META).exists() and not (d / item).is_dir():
            raise FileNotFoundError(f"no checkpoint in {d}")
        if not (d / item).is_dir() or not (d / META).exists():
            raise IncompleteCheckpointError(
                f"checkpoint {d} (pre-step format: {item}/ + {META}) is incomplete: "
                f"{item if not (d / item).is_dir() else META} is missing, as an interrupted save of that format "
                f"leaves it; its progress cannot be recovered — remove {d} to start over")
        steps = [d]  # legacy: <d>/<item>/ and <d>/meta.json
    first: BaseException | None = None
    for step in steps:
        try:
            meta = read_json(step / META)
        except (OSError, ValueError) as e:  # CorruptFileError is a ValueError
            first = first or e
            warnings.warn(f"checkpoint step {step} unreadable ({e}); trying an older one", stacklevel=2)
            continue
        if check is not None:
            check(meta, step)
        try:
            tree = _restore(step / item, like)
        except Exception as e:  # noqa: BLE001 - orbax/tensorstore raise many types
            first = first or e
            warnings.warn(f"checkpoint step {step} unreadable ({type(e).__name__}: {e}); trying an older one",
                          stacklevel=2)
            continue
        return tree, meta, step
    assert first is not None
    raise first


def save_params(directory: str | Path, params: Any, meta: dict) -> Path:
    """Save a parameter pytree and its metadata under ``directory`` (replacing what is there,
    but only once the new copy is committed: see the module docstring)."""
    directory = Path(directory).absolute()
    save_step(directory, "params", params, meta, keep=1)
    return directory


def load_params(directory: str | Path, like: Any | None = None) -> tuple[Any, dict]:
    """Load ``(params, meta)``; ``like`` (a pytree of the same structure) restores exact dtypes/shapes."""
    params, meta, _ = load_latest(directory, "params", like)
    return params, meta

"""Durable file helpers shared by every store.

Two kinds of files:

* **Snapshots** (a memory store, a selector checkpoint index, a manifest) are
  replaced whole with :func:`atomic_write_bytes` / :func:`atomic_write_text` /
  :func:`atomic_write_json`: the new content goes to a uniquely named temp file
  in the same directory (``.<name>.<pid>.<random>.tmp``), is flushed and
  ``fsync``-ed, then ``os.replace``-d over the target and the directory is
  ``fsync``-ed. A crash at any moment leaves either the old or the new file,
  never a mix; a crash may leave a stray temp file, which is never the target
  (see :func:`cleanup_stale_temps`).
* **Logs** (reuse events, training traces) grow by :func:`append_jsonl`: one
  JSON object per line, each written with a single ``os.write`` on an
  ``O_APPEND`` descriptor, so a crash loses at most the record being written;
  :func:`read_jsonl` skips malformed lines (including a torn last line) with a
  warning naming the line.

JSON snapshots are wrapped in an envelope::

    {"format": "cfjax/1", "sha256": "<hex>", "payload": <obj>}

where ``sha256`` is the hash of the canonical payload bytes
(``json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8). :func:`read_json` recomputes it and raises
:class:`CorruptFileError` on any mismatch, truncation or unparsable file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

__all__ = [
    "FORMAT",
    "CorruptFileError",
    "append_jsonl",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "canonical_json",
    "cleanup_stale_temps",
    "read_json",
    "read_jsonl",
    "temp_files_for",
]

PathLike = Union[str, "os.PathLike[str]"]

FORMAT = "cfjax/1"
"""Envelope format tag written by :func:`atomic_write_json`."""

_TMP_SUFFIX = ".tmp"


class CorruptFileError(ValueError):
    """A file that exists but cannot be trusted (checksum mismatch, truncation, bad JSON).

    Attributes:
      path: the offending file.
      reason: what is wrong with it.
    """

    def __init__(self, path: PathLike, reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"corrupt file {self.path!r}: {reason}")


# --------------------------------------------------------------------------- #
# atomic replacement                                                           #
# --------------------------------------------------------------------------- #


def _temp_prefix(path: str) -> str:
    return f".{os.path.basename(path)}."


def temp_files_for(path: PathLike) -> list[Path]:
    """Temp files an interrupted atomic write of ``path`` may have left behind.

    Args:
      path: the target file.

    Returns:
      Paths in the target's directory named ``.<name>.<pid>.<random>.tmp``
      (never the target itself), sorted.
    """
    p = os.path.abspath(os.fspath(path))
    d, prefix = os.path.dirname(p), _temp_prefix(p)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    return sorted(
        Path(d, n)
        for n in names
        if n.startswith(prefix) and n.endswith(_TMP_SUFFIX) and os.path.join(d, n) != p
    )


def cleanup_stale_temps(path: PathLike, *, min_age_s: float = 60.0) -> list[Path]:
    """Remove temp files of ``path`` left by crashed writers.

    Args:
      path: the target file.
      min_age_s: only files not modified for this many seconds are removed, so
        a concurrent writer's live temp file survives.

    Returns:
      The removed paths.
    """
    removed = []
    now = time.time()
    for t in temp_files_for(path):
        try:
            if now - t.stat().st_mtime >= min_age_s:
                t.unlink()
                removed.append(t)
        except FileNotFoundError:
            continue
    return removed


def _fsync_dir(d: str) -> None:
    """Best-effort fsync of a directory so a rename survives power loss (POSIX)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(d, flags)
    except OSError:
        return  # e.g. Windows, or no read permission on the directory
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems cannot fsync directories
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EACCES, errno.EPERM):
            raise
    finally:
        os.close(fd)


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    Writes a uniquely named temp file in the same directory, flushes and
    ``fsync``-s it, ``os.replace``-s it over ``path`` and ``fsync``-s the
    directory. An existing target keeps its permission bits. On any
    exception (including ``KeyboardInterrupt``) before the replace, the temp
    file is removed and the old file is untouched.

    Args:
      path: the target file; its directory must exist.
      data: the complete new content.

    Raises:
      TypeError: if ``data`` is not bytes-like.
      OSError: from the filesystem.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    target = os.path.abspath(os.fspath(path))
    d = os.path.dirname(target)
    tmp = os.path.join(d, f"{_temp_prefix(target)}{os.getpid()}.{secrets.token_hex(8)}{_TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = None
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", closefd=True) as f:
            fd = -1
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(d)


def atomic_write_text(path: PathLike, text: str, *, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` atomically (see :func:`atomic_write_bytes`).

    Args:
      path: the target file.
      text: the new content, written as is (no newline translation).
      encoding: text encoding.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    atomic_write_bytes(path, text.encode(encoding))


# --------------------------------------------------------------------------- #
# checksummed JSON                                                             #
# --------------------------------------------------------------------------- #


def canonical_json(obj: Any) -> str:
    """The canonical JSON text of ``obj`` (sorted keys, no spaces, UTF-8 kept).

    Args:
      obj: a JSON-serialisable value.

    Returns:
      ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def atomic_write_json(path: PathLike, obj: Any, *, checksum: bool = True) -> None:
    """Atomically write ``obj`` in a ``cfjax/1`` envelope.

    The file is ``{"format":"cfjax/1","sha256":"<hex>","payload":<canonical obj>}``
    plus a newline; with ``checksum=False`` the ``sha256`` member is omitted.
    The payload is normalised through one JSON round trip first (tuples become
    lists, non-string keys strings), so the hash is exactly what
    :func:`read_json` recomputes from the parsed file.

    Args:
      path: the target file.
      obj: a JSON-serialisable value (``NaN``/``Infinity`` are written as
        Python's ``json`` does).
      checksum: whether to store the SHA-256 of the canonical payload.

    Raises:
      TypeError, ValueError: if ``obj`` is not JSON-serialisable.
      OSError: from the filesystem.
    """
    text = canonical_json(obj)
    if checksum:
        # a round trip can reorder keys (e.g. int keys 9, 10 -> "10", "9")
        text = canonical_json(json.loads(text))
        head = f'{{"format":"{FORMAT}","sha256":"{_sha256(text)}","payload":'
    else:
        head = f'{{"format":"{FORMAT}","payload":'
    atomic_write_bytes(path, (head + text + "}\n").encode("utf-8"))


def read_json(path: PathLike, *, checksum: bool = True) -> Any:
    """Read a file written by :func:`atomic_write_json` and return its payload.

    Args:
      path: the file.
      checksum: verify the stored SHA-256 (the file must carry one). With
        ``False`` an envelope's payload is returned unverified and a plain
        JSON document (no envelope) is returned whole.

    Returns:
      The payload.

    Raises:
      FileNotFoundError: if the file does not exist.
      CorruptFileError: naming the file, if it is empty, truncated, not UTF-8,
        not JSON, not a ``cfjax/1`` envelope (when ``checksum``), lacks a
        checksum (when ``checksum``) or its checksum does not match.
    """
    p = os.fspath(path)
    with open(p, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise CorruptFileError(p, "file is empty")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise CorruptFileError(p, f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        what = "truncated" if e.pos >= len(raw.rstrip()) - 1 else "unparsable"
        raise CorruptFileError(p, f"{what} JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    is_env = isinstance(doc, dict) and doc.get("format") == FORMAT and "payload" in doc
    if not checksum:
        return doc["payload"] if is_env else doc
    if not is_env:
        fmt = doc.get("format") if isinstance(doc, dict) else None
        raise CorruptFileError(p, f"not a {FORMAT} envelope (format={fmt!r})")
    stored = doc.get("sha256")
    if not isinstance(stored, str):
        raise CorruptFileError(p, "envelope carries no sha256 checksum (written with checksum=False?)")
    actual = _sha256(canonical_json(doc["payload"]))
    if stored.lower() != actual:
        raise CorruptFileError(p, f"checksum mismatch (stored {stored[:16]}..., computed {actual[:16]}...)")
    return doc["payload"]


# --------------------------------------------------------------------------- #
# JSON lines                                                                   #
# --------------------------------------------------------------------------- #


def append_jsonl(path: PathLike, record: Mapping[str, Any], *, fsync: bool = True) -> None:
    """Append one JSON object as one line.

    The line (with its newline) is written by a single ``os.write`` on an
    ``O_APPEND`` descriptor, so concurrent appenders do not interleave on
    local filesystems and a crash loses at most this record. If the file ends
    in a torn line (a crash mid-append), a newline is written first so this
    record starts its own line. A short write (disk full) continues with the
    remainder.

    Args:
      path: the log file; created if missing (its directory must exist).
      record: a JSON-serialisable mapping.
      fsync: ``fsync`` the file before returning.

    Raises:
      TypeError: if ``record`` is not a mapping or not serialisable.
      ValueError: if it cannot be encoded.
      OSError: from the filesystem.
    """
    if not isinstance(record, Mapping):
        raise TypeError(f"record must be a mapping, not {type(record).__name__}")
    line = (json.dumps(dict(record), ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)
    try:
        size = os.fstat(fd).st_size
        if size > 0 and hasattr(os, "pread"):
            rfd = os.open(os.fspath(path), os.O_RDONLY)
            try:
                if os.pread(rfd, 1, size - 1) != b"\n":
                    line = b"\n" + line
            finally:
                os.close(rfd)
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: PathLike, *, missing_ok: bool = True) -> tuple[list[dict[str, Any]], int]:
    """Read a JSON-lines log, skipping malformed lines.

    Blank lines are ignored. A line that is not UTF-8, not JSON or not a JSON
    object (e.g. a torn last line left by a crash) is skipped with a
    ``warnings.warn`` naming the file and its 1-based line number.

    Args:
      path: the log file.
      missing_ok: return ``([], 0)`` for a missing file instead of raising.

    Returns:
      ``(records, n_malformed)``.

    Raises:
      FileNotFoundError: if the file is missing and not ``missing_ok``.
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        if missing_ok:
            return [], 0
        raise
    lines = raw.split(b"\n")
    torn_last = bool(lines and lines[-1].strip())
    records: list[dict[str, Any]] = []
    bad = 0
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            obj, why = None, f"{type(e).__name__}: {e}"
        else:
            why = f"not a JSON object ({type(obj).__name__})"
        if isinstance(obj, dict):
            records.append(obj)
            continue
        bad += 1
        if torn_last and i == len(lines):
            why = f"torn last line without newline; {why}"
        warnings.warn(f"{p}: skipping malformed JSONL line {i}: {why}", stacklevel=2)
    return records, bad

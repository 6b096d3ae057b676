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

Readers are defensive: JSON nested deeper than :data:`MAX_JSON_DEPTH` is a
corrupt file (:func:`read_json`) or a malformed line (:func:`read_jsonl`),
never a ``RecursionError``; :func:`read_jsonl` streams the file and skips a
line longer than ``max_line_bytes`` without holding it in memory.

Errors meant for the user (a bad file, a bad value, an output that already
exists) derive from :class:`UserError`; the ``cfjax`` command prints their
message as one line and exits with status 2 (:mod:`cfjax.cli`).
:func:`prepare_output_dir` / :func:`prepare_output_file` implement the
commands' ``--force`` / ``--resume`` policy for an output that already exists.

Length: the atomic writers, the defensive readers and the output-directory
policy share one temp-file naming and one error hierarchy, so they stay in one
module (~700 lines).

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
import re
import secrets
import shutil
import stat
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Union

__all__ = [
    "FORMAT",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "OUTPUT_MODES",
    "STALE_TEMP_AGE_S",
    "UserError",
    "InputError",
    "CorruptFileError",
    "OutputExistsError",
    "JSONTooDeepError",
    "append_jsonl",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "write_text_if_changed",
    "canonical_json",
    "cleanup_stale_temps",
    "cleanup_stale_temps_in",
    "iter_lines",
    "loads_json",
    "prepare_output_dir",
    "prepare_output_file",
    "read_json",
    "read_jsonl",
    "temp_files_for",
]

PathLike = Union[str, "os.PathLike[str]"]

FORMAT = "cfjax/1"
"""Envelope format tag written by :func:`atomic_write_json`."""

MAX_JSON_DEPTH = 100
"""Deepest JSON nesting a reader accepts (cfjax's own files nest < 10 levels)."""

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Default longest JSON-lines line :func:`read_jsonl` parses; a longer one is malformed."""

STALE_TEMP_AGE_S = 600.0
"""Age (seconds since last modification) after which a temp file left by an atomic write is
removed when its file or directory is opened: far longer than any live write takes."""

OUTPUT_MODES: tuple[str, ...] = ("refuse", "force", "resume")
"""What a command does with an output that already exists (:func:`prepare_output_dir`)."""

_TMP_SUFFIX = ".tmp"
# what atomic_write_bytes names its temp files: .<name>.<pid>.<16 hex>.tmp
_OUR_TEMP = re.compile(r"^\.(?P<name>.+)\.\d+\.[0-9a-f]{16}\.tmp$")


class UserError(Exception):
    """A problem with what the user gave (a file, a value, an output path), not a bug.

    The message is one line naming the problem; the ``cfjax`` command prints
    it as ``cfjax: <message>`` and exits with status 2.
    """


class InputError(UserError, ValueError):
    """A user-supplied value or file content that cannot be used."""


class CorruptFileError(InputError):
    """A file that exists but cannot be trusted (checksum mismatch, truncation, bad JSON).

    Attributes:
      path: the offending file.
      reason: what is wrong with it.
    """

    def __init__(self, path: PathLike, reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"corrupt file {self.path!r}: {reason}")


class OutputExistsError(UserError, FileExistsError):
    """An output file or a non-empty output directory exists and neither ``--force``
    nor ``--resume`` said what to do with it (or the command cannot resume)."""

    def __str__(self) -> str:  # FileExistsError's str would be the args tuple for >1 args
        return str(self.args[0]) if self.args else ""


class JSONTooDeepError(ValueError):
    """A JSON document nested deeper than the reader's limit (:data:`MAX_JSON_DEPTH`)."""


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


def _remove_if_stale(t: Path, now: float, min_age_s: float) -> bool:
    try:
        st = t.lstat()
        if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < min_age_s:
            return False  # only plain files (never a link or a directory), and only old ones
        t.unlink()
        return True
    except FileNotFoundError:
        return False


def cleanup_stale_temps(path: PathLike, *, min_age_s: float = 60.0, ours_only: bool = False) -> list[Path]:
    """Remove temp files of ``path`` left by crashed writers.

    Only plain files are removed (never a link or a directory).

    Args:
      path: the target file.
      min_age_s: only files not modified for this many seconds are removed, so
        a concurrent writer's live temp file survives.
      ours_only: only names exactly as :func:`atomic_write_bytes` makes them
        (``.<name>.<pid>.<16 hex digits>.tmp``), not any ``.<name>.*.tmp``.

    Returns:
      The removed paths.
    """
    now = time.time()
    return [t for t in temp_files_for(path)
            if (not ours_only or _OUR_TEMP.match(t.name)) and _remove_if_stale(t, now, min_age_s)]


def cleanup_stale_temps_in(directory: PathLike, *, min_age_s: float = STALE_TEMP_AGE_S) -> list[Path]:
    """Remove every stale temp file :func:`atomic_write_bytes` left in ``directory``.

    Only plain files named exactly as ours (``.<name>.<pid>.<16 hex digits>.tmp``)
    and not modified for ``min_age_s`` seconds are removed; subdirectories are
    not searched. Stores and tables call it when they open their directory.

    Args:
      directory: the directory (a missing one is fine).
      min_age_s: minimum age in seconds (default :data:`STALE_TEMP_AGE_S`).

    Returns:
      The removed paths, sorted.
    """
    d = os.fspath(directory)
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return []
    now = time.time()
    return sorted(Path(d, n) for n in names if _OUR_TEMP.match(n) and _remove_if_stale(Path(d, n), now, min_age_s))


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



def write_text_if_changed(path: PathLike, text: str) -> bool:
    """Write ``text`` to ``path`` atomically (parents created) unless the file already holds exactly it;
    returns whether it wrote. Idempotent builds (suite files) leave unchanged files untouched."""
    path = Path(path)
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return True

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


def _too_deep(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests containers more than ``limit`` levels deep (iterative: no recursion)."""
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            kids: Iterable[Any] = o.values()
        elif isinstance(o, list):
            kids = o
        else:
            continue
        if d > limit:
            return True
        stack.extend((k, d + 1) for k in kids if isinstance(k, (dict, list)))
    return False


def loads_json(data: Union[str, bytes, bytearray], *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` instead of recursing.

    Args:
      data: JSON text, or UTF-8 bytes.
      max_depth: deepest container nesting accepted (the top-level object or
        array is depth 1).

    Returns:
      The parsed value.

    Raises:
      UnicodeDecodeError: bytes that are not UTF-8.
      json.JSONDecodeError: text that is not JSON.
      JSONTooDeepError: nesting deeper than ``max_depth`` (also when Python's
        own parser would hit its recursion limit).
    """
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    try:
        obj = json.loads(text)
    except RecursionError:
        raise JSONTooDeepError(f"JSON nested deeper than {max_depth} levels") from None
    # a document with at most max_depth brackets cannot nest deeper: skip the walk (the common case)
    if text.count("[") + text.count("{") > max_depth and _too_deep(obj, max_depth):
        raise JSONTooDeepError(f"JSON nested deeper than {max_depth} levels")
    return obj


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
        not JSON, nested deeper than :data:`MAX_JSON_DEPTH`, not a ``cfjax/1``
        envelope (when ``checksum``), lacks a checksum (when ``checksum``) or
        its checksum does not match.
      IsADirectoryError, PermissionError: from the filesystem.
    """
    p = os.fspath(path)
    with open(p, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise CorruptFileError(p, "file is empty")
    try:
        doc = loads_json(raw)
    except UnicodeDecodeError as e:
        raise CorruptFileError(p, f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        what = "truncated" if e.pos >= len(raw.rstrip()) - 1 else "unparsable"
        raise CorruptFileError(p, f"{what} JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except JSONTooDeepError as e:
        raise CorruptFileError(p, str(e)) from None
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


def iter_lines(f: IO[bytes], max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | None, bool]]:
    """Stream a binary file line by line without ever holding more than one capped line.

    Args:
      f: a file opened in binary mode.
      max_line_bytes: longest line (without its newline) returned whole.

    Yields:
      ``(lineno, line, ended)``: the 1-based line number; the line's bytes
      (newline included when present), or ``None`` for a line longer than
      ``max_line_bytes`` (read through and discarded in chunks); and whether
      it ended with a newline (``False`` only for a last line).
    """
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
    lineno = 0
    while True:
        line = f.readline(max_line_bytes + 1)
        if not line:
            return
        lineno += 1
        if line.endswith(b"\n"):
            yield lineno, line, True
            continue
        if len(line) <= max_line_bytes:  # the last line, without a newline
            yield lineno, line, False
            return
        ended = False  # an over-long line: skip the rest of it
        while True:
            chunk = f.readline(1 << 20)
            if not chunk:
                break
            if chunk.endswith(b"\n"):
                ended = True
                break
        yield lineno, None, ended


def read_jsonl(path: PathLike, *, missing_ok: bool = True,
               max_line_bytes: int = MAX_LINE_BYTES) -> tuple[list[dict[str, Any]], int]:
    """Read a JSON-lines log, skipping malformed lines.

    The file is streamed (:func:`iter_lines`). Blank lines are ignored. A line
    that is not UTF-8, not JSON, not a JSON object, nested deeper than
    :data:`MAX_JSON_DEPTH`, longer than ``max_line_bytes`` (never held in
    memory whole) or a torn last line left by a crash is skipped with a
    ``warnings.warn`` naming the file and its 1-based line number.

    Args:
      path: the log file.
      missing_ok: return ``([], 0)`` for a missing file instead of raising.
      max_line_bytes: longest line parsed (default :data:`MAX_LINE_BYTES`).

    Returns:
      ``(records, n_malformed)``.

    Raises:
      FileNotFoundError: if the file is missing and not ``missing_ok``.
    """
    p = os.fspath(path)
    try:
        f = open(p, "rb")
    except FileNotFoundError:
        if missing_ok:
            return [], 0
        raise
    records: list[dict[str, Any]] = []
    bad = 0
    with f:
        for i, line, ended in iter_lines(f, max_line_bytes):
            if line is None:
                why = f"longer than {max_line_bytes} bytes"
            elif not line.strip():
                continue
            else:
                try:
                    obj = loads_json(line)
                except (UnicodeDecodeError, json.JSONDecodeError, JSONTooDeepError) as e:
                    obj, why = None, f"{type(e).__name__}: {e}"
                else:
                    why = f"not a JSON object ({type(obj).__name__})"
                if isinstance(obj, dict):
                    records.append(obj)
                    continue
            bad += 1
            if not ended:
                why = f"torn last line without newline; {why}"
            warnings.warn(f"{p}: skipping malformed JSONL line {i}: {why}", stacklevel=2)
    return records, bad


# --------------------------------------------------------------------------- #
# output directories and files of the commands                                 #
# --------------------------------------------------------------------------- #


def _shown(names: list[str], n: int = 4) -> str:
    more = f", … ({len(names) - n} more)" if len(names) > n else ""
    return ", ".join(names[:n]) + more


def _remove_owned(root: Path, patterns: Iterable[str]) -> list[Path]:
    """Remove what matches ``patterns`` (globs relative to ``root``) and the temp files of
    interrupted atomic writes of those names; never follows a symbolic link (a linked directory
    inside ``root`` is not entered, a matched link is removed, not its target); then removes the
    directories this left empty (below ``root``)."""
    removed: list[Path] = []
    parents: set[Path] = set()

    def inside(m: Path) -> bool:  # no symbolic link between root and m (m itself may be one)
        rel = m.relative_to(root)
        return not any((root / Path(*rel.parts[:i])).is_symlink() for i in range(1, len(rel.parts)))

    for pat in patterns:
        for m in sorted(root.glob(pat)):
            if not inside(m):
                continue
            if m.is_symlink() or not m.is_dir():
                m.unlink(missing_ok=True)
                removed.append(m)
            else:
                shutil.rmtree(m)
                removed.append(m)
            parents.add(m.parent)
        head, _, name = pat.rpartition("/")
        for t in sorted(root.glob(f"{head}/.{name}.*.tmp" if head else f".{name}.*.tmp")):
            if inside(t) and t.is_file() and not t.is_symlink():  # temp files of an interrupted write of a matched name
                t.unlink(missing_ok=True)
                removed.append(t)
                parents.add(t.parent)
    rootr = root.resolve()
    for d in sorted(parents, key=lambda q: -len(q.parts)):  # deepest first
        while d.resolve() != rootr and rootr in d.resolve().parents:
            try:
                d.rmdir()  # only when empty
            except OSError:
                break
            d = d.parent
    return removed


def prepare_output_dir(path: PathLike, *, existing: str = "refuse", owned: Iterable[str] = (),
                       resumable: bool = False, command: str = "this command",
                       resume_hint: str = "") -> list[Path]:
    """Apply a command's policy for an output directory that may already hold files.

    * missing or empty directory: nothing to do (any ``existing`` but an
      unsupported ``"resume"``);
    * ``existing="refuse"`` (the default): a non-empty directory raises
      :class:`OutputExistsError` naming a few of its entries and the flags;
    * ``existing="force"``: every path matching ``owned`` (globs relative to
      the directory: exactly what the command writes) is removed, with the
      temp files of interrupted atomic writes of those files; every other
      entry (the user's own files) is kept;
    * ``existing="resume"``: nothing is removed; the command continues from
      what is there. A command that cannot resume (``resumable=False``)
      raises :class:`OutputExistsError` instead, whatever the directory holds.

    Args:
      path: the output directory.
      existing: one of :data:`OUTPUT_MODES`.
      owned: glob patterns of the files and directories the command writes.
      resumable: whether the command can continue an earlier run.
      command: the command's name, for messages (e.g. ``"cfjax countermem run"``).
      resume_hint: what ``--resume`` would do, for the refusal message.

    Returns:
      The removed paths (``"force"`` only).

    Raises:
      OutputExistsError: as above, or when ``path`` exists and is not a directory.
      ValueError: an unknown ``existing``.
    """
    if existing not in OUTPUT_MODES:
        raise ValueError(f"existing must be one of {OUTPUT_MODES}, got {existing!r}")
    root = Path(path)
    if existing == "resume" and not resumable:
        raise OutputExistsError(f"{command} cannot resume (its runner does not save partial results); "
                                f"pass --force to replace the files it wrote in {root}, or a new --out directory")
    if root.is_symlink() and not root.exists():
        raise OutputExistsError(f"output directory {root} is a broken symbolic link")
    if root.exists() and not root.is_dir():
        raise OutputExistsError(f"output directory {root} exists and is not a directory")
    entries = sorted(os.listdir(root)) if root.is_dir() else []
    if not entries:
        return []
    if existing == "refuse":
        resume = (f"--resume to {resume_hint or 'continue it'}, " if resumable else "")
        note = "" if resumable else f" ({command} cannot --resume)"
        raise OutputExistsError(f"output directory {root} is not empty ({_shown(entries)}); pass {resume}"
                                f"--force to replace what {command} writes there (other files are kept), "
                                f"or choose a new --out{note}")
    if existing == "force":
        return _remove_owned(root, owned)
    return []


def prepare_output_file(path: PathLike, *, existing: str = "refuse", command: str = "this command") -> None:
    """Apply a command's policy for an output file that may already exist.

    ``"refuse"`` (default): an existing file raises :class:`OutputExistsError`;
    ``"force"``: it will be replaced (atomically, by the command's write);
    ``"resume"``: :class:`OutputExistsError` (a single result file cannot be
    continued). A directory (or a broken link) at ``path`` is always refused,
    as is a missing parent directory.

    Raises:
      OutputExistsError: as above.
      ValueError: an unknown ``existing``.
    """
    if existing not in OUTPUT_MODES:
        raise ValueError(f"existing must be one of {OUTPUT_MODES}, got {existing!r}")
    p = Path(path)
    if existing == "resume":
        raise OutputExistsError(f"{command} cannot resume (it writes one file, {p}); pass --force to "
                                "replace it or choose another --out")
    if p.is_dir():
        raise OutputExistsError(f"output file {p} is a directory")
    if p.is_symlink() and not p.exists():
        raise OutputExistsError(f"output file {p} is a broken symbolic link")
    if not p.parent.is_dir():
        raise OutputExistsError(f"cannot write {p}: directory {p.parent} does not exist")
    if p.exists() and existing == "refuse":
        raise OutputExistsError(f"output file {p} already exists; pass --force to replace it, "
                                "or choose another --out")

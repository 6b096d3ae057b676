"""Tests for the durable file helpers (cfjax.infra.io), including real SIGKILL crash tests."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

import cfjax.infra.io as cio
from cfjax.infra.io import (
    FORMAT,
    CorruptFileError,
    append_jsonl,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    canonical_json,
    cleanup_stale_temps,
    read_json,
    read_jsonl,
    temp_files_for,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")


# --------------------------------------------------------------------------- #
# atomic writes                                                                #
# --------------------------------------------------------------------------- #


def test_atomic_write_bytes_and_text(tmp_path: Path) -> None:
    p = tmp_path / "f.bin"
    atomic_write_bytes(p, b"one")
    assert p.read_bytes() == b"one"
    atomic_write_bytes(str(p), bytearray(b"two"))
    assert p.read_bytes() == b"two"
    atomic_write_text(p, "h\u00e9llo\r\n")
    assert p.read_bytes() == "h\u00e9llo\r\n".encode()
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]  # no temp files left
    with pytest.raises(TypeError):
        atomic_write_bytes(p, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        atomic_write_text(p, b"bytes")  # type: ignore[arg-type]
    assert p.read_bytes() == "h\u00e9llo\r\n".encode()
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]


@posix_only
def test_atomic_write_keeps_permissions(tmp_path: Path) -> None:
    p = tmp_path / "f"
    atomic_write_bytes(p, b"a")
    os.chmod(p, 0o640)
    atomic_write_bytes(p, b"b")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640


@pytest.mark.parametrize("fail_at", ["replace", "fsync", "write"])
def test_failed_write_leaves_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: str
) -> None:
    p = tmp_path / "state.json"
    atomic_write_json(p, {"v": "old"})
    before = p.read_bytes()

    def boom(*_a: Any, **_k: Any) -> Any:
        raise OSError(28, "No space left on device (simulated)")

    if fail_at == "replace":
        monkeypatch.setattr(cio.os, "replace", boom)
    elif fail_at == "fsync":
        monkeypatch.setattr(cio.os, "fsync", boom)
    else:
        real_fdopen = os.fdopen

        class _Failing:
            def __init__(self, f: Any) -> None:
                self.f = f

            def __enter__(self) -> "_Failing":
                return self

            def __exit__(self, *exc: Any) -> None:
                self.f.close()

            def write(self, _data: bytes) -> int:
                raise OSError(28, "No space left on device (simulated)")

        monkeypatch.setattr(cio.os, "fdopen", lambda *a, **k: _Failing(real_fdopen(*a, **k)))
    with pytest.raises(OSError, match="simulated"):
        atomic_write_json(p, {"v": "new" * 1000})
    monkeypatch.undo()
    assert p.read_bytes() == before
    assert read_json(p) == {"v": "old"}
    assert sorted(os.listdir(tmp_path)) == ["state.json"]


def test_keyboard_interrupt_during_write_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "s"
    atomic_write_bytes(p, b"old")

    def interrupt(*_a: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cio.os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(p, b"new")
    monkeypatch.undo()
    assert p.read_bytes() == b"old" and os.listdir(tmp_path) == ["s"]


def test_temp_files_for_and_cleanup(tmp_path: Path) -> None:
    p = tmp_path / "mem.json"
    atomic_write_bytes(p, b"x")
    stray = tmp_path / ".mem.json.123.deadbeefdeadbeef.tmp"
    stray.write_bytes(b"partial")
    other = tmp_path / ".other.json.1.ab.tmp"
    other.write_bytes(b"")
    assert temp_files_for(p) == [stray]
    assert cleanup_stale_temps(p) == []  # too fresh: may belong to a live writer
    old = time.time() - 3600
    os.utime(stray, (old, old))
    assert cleanup_stale_temps(p) == [stray]
    assert not stray.exists() and other.exists() and p.read_bytes() == b"x"
    assert temp_files_for(tmp_path / "nodir" / "x") == []


# --------------------------------------------------------------------------- #
# checksummed JSON                                                             #
# --------------------------------------------------------------------------- #


def test_json_round_trip_and_envelope(tmp_path: Path) -> None:
    p = tmp_path / "store.json"
    obj = {
        "records": [{"id": 1, "c": 'question contains "at least"', "u": 0.25}],
        "unicode": "h\u00e9 \u2603 \U0001f600",
        "nested": {"b": [1, 2.5, None, True], "a": {}},
        "int_keys": {9: "nine", 10: "ten"},
        "tuple": (1, 2),
    }
    atomic_write_json(p, obj)
    got = read_json(p)
    assert got == json.loads(json.dumps(obj))  # JSON normalisation: tuple -> list, keys -> str
    doc = json.loads(p.read_text(encoding="utf-8"))
    assert set(doc) == {"format", "sha256", "payload"}
    assert doc["format"] == FORMAT == "cfjax/1"
    canonical = json.dumps(doc["payload"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical == canonical_json(doc["payload"])
    assert doc["sha256"] == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert "\u2603" in p.read_text(encoding="utf-8")  # ensure_ascii=False
    for scalar in (None, 0, "s", [1, [2]], 1.5e300):
        atomic_write_json(p, scalar)
        assert read_json(p) == scalar
    assert os.listdir(tmp_path) == ["store.json"]


def test_checksum_false(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    atomic_write_json(p, {"a": 1}, checksum=False)
    assert "sha256" not in json.loads(p.read_text())
    assert read_json(p, checksum=False) == {"a": 1}
    with pytest.raises(CorruptFileError, match="no sha256"):
        read_json(p)
    plain = tmp_path / "plain.json"
    plain.write_text('{"a": [1, 2]}')
    assert read_json(plain, checksum=False) == {"a": [1, 2]}
    with pytest.raises(CorruptFileError, match="not a cfjax/1 envelope"):
        read_json(plain)


def test_checksum_mismatch_raises_naming_file(tmp_path: Path) -> None:
    p = tmp_path / "store.json"
    atomic_write_json(p, {"rows": ["alpha", "beta"], "n": 2})
    raw = p.read_bytes()
    tampered = raw.replace(b'"beta"', b'"bota"')  # still valid JSON
    assert tampered != raw
    p.write_bytes(tampered)
    with pytest.raises(CorruptFileError) as info:
        read_json(p)
    assert "checksum mismatch" in str(info.value)
    assert str(p) in str(info.value) and info.value.path == str(p)
    assert isinstance(info.value, ValueError)
    assert read_json(p, checksum=False) == {"rows": ["alpha", "bota"], "n": 2}
    # a tampered checksum is caught too
    p.write_bytes(raw.replace(b'"sha256":"', b'"sha256":"0'))
    with pytest.raises(CorruptFileError, match="checksum mismatch"):
        read_json(p)


@pytest.mark.parametrize("cut", [0.5, 0.99, 1, 10])
def test_truncation_raises(tmp_path: Path, cut: float) -> None:
    p = tmp_path / "store.json"
    atomic_write_json(p, {"rows": [f"row {i}" for i in range(1000)]})
    raw = p.read_bytes()
    keep = int(len(raw) * cut) if cut < 1 else len(raw) - 1 - int(cut)  # drop "}\n" tail pieces
    p.write_bytes(raw[:keep])
    with pytest.raises(CorruptFileError) as info:
        read_json(p)
    assert str(p) in str(info.value)


def test_empty_and_garbage_files(tmp_path: Path) -> None:
    p = tmp_path / "e.json"
    p.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="empty"):
        read_json(p)
    p.write_bytes(b"\xff\xfe{")
    with pytest.raises(CorruptFileError, match="UTF-8"):
        read_json(p)
    p.write_bytes(b'{"format": "cfjax/1", "sha256": "00", "payload": 1} trailing')
    with pytest.raises(CorruptFileError, match="unparsable"):
        read_json(p)
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json")


# --------------------------------------------------------------------------- #
# real crash test: SIGKILL a writer alternating two ~20 MB payloads            #
# --------------------------------------------------------------------------- #


def _make_payload(tag: str) -> dict:
    """~20 MB of JSON, identified by ``tag``; every row names its payload."""
    return {"tag": tag, "rows": [f"{tag}-{i:08d}-" + "x" * 88 for i in range(200_000)]}


_WRITER = textwrap.dedent(inspect.getsource(_make_payload)) + textwrap.dedent(
    """
    import os
    import sys
    import time
    from cfjax.infra.io import atomic_write_json

    real_fsync = os.fsync

    def slow_fsync(fd):
        # a slow disk: widens the windows in which a temp file exists (file
        # fsync) and in which the rename is done but not yet durable (dir fsync)
        print("fsync", flush=True)
        time.sleep(0.1)
        real_fsync(fd)

    os.fsync = slow_fsync
    path = sys.argv[1]
    a, b = _make_payload("A"), _make_payload("B")
    print("ready", flush=True)
    i = 0
    while True:
        atomic_write_json(path, a if i % 2 == 0 else b)
        i += 1
        print("done", flush=True)
    """
)


@posix_only
def test_sigkill_during_atomic_json_writes_never_corrupts(tmp_path: Path) -> None:
    """SIGKILL a writer alternating two ~20 MB payloads; the target is always whole.

    Even iterations kill at a random moment; odd ones kill inside the n-th
    ``fsync`` (odd n: the temp file's, before the rename; even n: the
    directory's, after it), so the temp-file window is always exercised.
    """
    target = tmp_path / "memory.json"
    expected = {t: _make_payload(t) for t in ("I", "A", "B")}
    atomic_write_json(target, expected["I"])
    assert target.stat().st_size > 19_000_000

    rng = random.Random(20240917)
    seen_tags = []
    completed_total = 0
    temp_left_in_file_fsync = 0
    for it in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        nth_fsync = 0
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == b"ready", proc.stderr.read().decode() if proc.stderr else line
            if it % 2 == 0:
                time.sleep(rng.uniform(0.0, 0.6))  # a random moment of a write cycle
            else:
                nth_fsync = rng.randint(1, 4)
                seen = 0
                while seen < nth_fsync:
                    line = proc.stdout.readline()
                    assert line, "writer exited early"
                    seen += line.strip() == b"fsync"
                    completed_total += line.strip() == b"done"
                time.sleep(rng.uniform(0.0, 0.05))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            completed_total += proc.stdout.read().split().count(b"done")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == -signal.SIGKILL

        got = read_json(target)  # never raises: the old or the new payload, never a mix
        assert got["tag"] in expected
        assert got == expected[got["tag"]]
        seen_tags.append(got["tag"])

        # the directory holds the target plus at most the killed writer's temp file
        entries = set(os.listdir(tmp_path))
        temps = temp_files_for(target)
        assert entries - {t.name for t in temps} == {"memory.json"}
        assert len(temps) <= 1 and target not in temps
        if nth_fsync % 2 == 1:  # killed while the temp file was being synced
            assert len(temps) == 1
            temp_left_in_file_fsync += 1
            # the stray temp file is a complete payload, yet never read as the target
            assert read_json(temps[0])["tag"] in ("A", "B")
        for t in temps:
            t.unlink()

    assert completed_total >= 1, "the writer never completed a write"
    assert set(seen_tags) & {"A", "B"}, seen_tags
    print(f"tags after kills: {seen_tags}; kills inside a temp-file fsync: {temp_left_in_file_fsync}")


# --------------------------------------------------------------------------- #
# JSON lines                                                                   #
# --------------------------------------------------------------------------- #


def test_jsonl_append_and_read(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    assert read_jsonl(p) == ([], 0)
    with pytest.raises(FileNotFoundError):
        read_jsonl(p, missing_ok=False)
    recs = [{"i": i, "text": "line\nbreak \u2603"} for i in range(3)]
    for r in recs:
        append_jsonl(p, r)
    append_jsonl(p, {"i": 3}, fsync=False)
    assert p.read_bytes().count(b"\n") == 4
    assert read_jsonl(p) == (recs + [{"i": 3}], 0)
    with pytest.raises(TypeError):
        append_jsonl(p, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        append_jsonl(p, {"x": object()})
    assert read_jsonl(p) == (recs + [{"i": 3}], 0)


def test_jsonl_torn_last_line(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    for i in range(3):
        append_jsonl(p, {"i": i, "pad": "x" * 50})
    whole = p.read_bytes()
    line = json.dumps({"i": 3, "pad": "x" * 50}).encode()
    with open(p, "ab") as f:  # a crash in the middle of the 4th record
        f.write(line[: len(line) // 2])
    with pytest.warns(UserWarning, match=r"line 4: torn last line"):
        records, bad = read_jsonl(p)
    assert records == [{"i": i, "pad": "x" * 50} for i in range(3)] and bad == 1
    assert p.read_bytes().startswith(whole)

    # appending after the crash starts a fresh line: the new record survives
    append_jsonl(p, {"i": 4})
    with pytest.warns(UserWarning, match=r"line 4"):
        records, bad = read_jsonl(p)
    assert [r["i"] for r in records] == [0, 1, 2, 4] and bad == 1


def test_jsonl_malformed_middle_lines(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_bytes(b'{"i": 0}\n\nnot json\n[1, 2]\n\xff\xfe\n   \n{"i": 1}\n')
    with pytest.warns(UserWarning) as caught:
        records, bad = read_jsonl(p)
    assert records == [{"i": 0}, {"i": 1}] and bad == 3
    msgs = [str(w.message) for w in caught]
    assert any("line 3" in m for m in msgs) and any("line 4" in m and "not a JSON object" in m for m in msgs)
    assert any("line 5" in m for m in msgs) and all(str(p) in m for m in msgs)


_APPENDER = textwrap.dedent(
    """
    import sys
    from cfjax.infra.io import append_jsonl

    path = sys.argv[1]
    print("ready", flush=True)
    for i in range(1_000_000):
        append_jsonl(path, {"i": i, "pad": "y" * (i % 300)}, fsync=False)
    """
)


@posix_only
def test_sigkill_during_appends_loses_at_most_one_record(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    rng = random.Random(7)
    for _ in range(2):
        proc = subprocess.Popen([sys.executable, "-c", _APPENDER, str(p)], stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
            time.sleep(rng.uniform(0.05, 0.3))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with _MalformedWarningsOnly():
        records, bad = read_jsonl(p)
    assert bad <= 2  # at most one torn record per crash
    assert records, "nothing was appended"
    for r in records:  # every record is whole
        assert r["pad"] == "y" * (r["i"] % 300)
    # each run's records are a contiguous 0..k: nothing but a last record is lost
    starts = [k for k, r in enumerate(records) if r["i"] == 0]
    assert starts[0] == 0 and len(starts) == 2, starts
    for seg in (records[starts[0] : starts[1]], records[starts[1] :]):
        assert [r["i"] for r in seg] == list(range(len(seg)))


class _MalformedWarningsOnly:
    """Context manager that tolerates malformed-line warnings and no others."""

    def __enter__(self) -> "_MalformedWarningsOnly":
        self._cm = warnings.catch_warnings(record=True)
        self.caught = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)
        for w in self.caught:
            assert "malformed JSONL line" in str(w.message)


# --------------------------------------------------------------------------- #
# defensive readers: deep nesting, huge lines                                  #
# --------------------------------------------------------------------------- #


def test_loads_json_refuses_deep_nesting_without_recursion() -> None:
    from cfjax.infra.io import MAX_JSON_DEPTH, JSONTooDeepError, loads_json

    assert loads_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    for text in ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),  # parses, but too deep
                 "[" * 100_000,  # Python's parser would raise RecursionError
                 '{"a":' * 5000 + "1" + "}" * 5000):
        with pytest.raises(JSONTooDeepError):
            loads_json(text)
    # brackets inside strings do not count as nesting
    assert loads_json(json.dumps({"s": "[" * 10_000})) == {"s": "[" * 10_000}
    assert loads_json(b'{"x": [1, 2]}', max_depth=2) == {"x": [1, 2]}
    with pytest.raises(JSONTooDeepError):
        loads_json(b'{"x": [[1]]}', max_depth=2)


def test_read_json_deep_file_is_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000)
    with pytest.raises(CorruptFileError, match="nested deeper"):
        read_json(p)
    p.write_text(json.dumps({"format": FORMAT, "payload": 1}) [:-1] + ', "x": ' + "[" * 3000 + "]" * 3000 + "}")
    with pytest.raises(CorruptFileError, match="nested deeper"):
        read_json(p, checksum=False)


def test_read_jsonl_deep_line_is_one_malformed_line(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    append_jsonl(p, {"i": 0})
    with open(p, "ab") as f:
        f.write(b"[" * 100_000 + b"\n")
    append_jsonl(p, {"i": 1})
    with pytest.warns(UserWarning, match=r"line 2: JSONTooDeepError"):
        records, bad = read_jsonl(p)
    assert records == [{"i": 0}, {"i": 1}] and bad == 1


def test_read_jsonl_skips_overlong_lines_in_chunks(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    append_jsonl(p, {"i": 0})
    append_jsonl(p, {"i": 1, "pad": "x" * 5000})  # over the cap below
    append_jsonl(p, {"i": 2})
    with open(p, "ab") as f:
        f.write(b'{"i": 3, "pad": "' + b"y" * 5000)  # an over-long torn last line
    with pytest.warns(UserWarning) as caught:
        records, bad = read_jsonl(p, max_line_bytes=1000)
    assert records == [{"i": 0}, {"i": 2}] and bad == 2
    msgs = [str(w.message) for w in caught]
    assert any("line 2: longer than 1000 bytes" in m for m in msgs)
    assert any("line 4: torn last line without newline; longer than 1000 bytes" in m for m in msgs)
    # the same file read with the default cap: only the torn line is malformed
    with pytest.warns(UserWarning, match="line 4"):
        assert [r["i"] for r in read_jsonl(p)[0]] == [0, 1, 2]


def test_iter_lines_bounds_what_it_holds(tmp_path: Path) -> None:
    from cfjax.infra.io import iter_lines

    p = tmp_path / "x"
    p.write_bytes(b"ab\n" + b"c" * 10 + b"\n" + b"d" * 4 + b"\n" + b"e")
    with open(p, "rb") as f:
        assert list(iter_lines(f, 4)) == [(1, b"ab\n", True), (2, None, True), (3, b"dddd\n", True),
                                          (4, b"e", False)]
    with open(p, "rb") as f, pytest.raises(ValueError):
        list(iter_lines(f, 0))


# --------------------------------------------------------------------------- #
# stale temp files of a directory                                              #
# --------------------------------------------------------------------------- #


def _age(p: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(p, (t, t), follow_symlinks=False)


def test_cleanup_stale_temps_in_removes_only_old_temps_named_like_ours(tmp_path: Path) -> None:
    from cfjax.infra.io import STALE_TEMP_AGE_S, cleanup_stale_temps_in

    ours_old = tmp_path / ".store.json.4242.0123456789abcdef.tmp"
    ours_fresh = tmp_path / ".table.npz.4243.fedcba9876543210.tmp"
    not_ours = [tmp_path / ".notes.tmp", tmp_path / "data.tmp", tmp_path / ".x.12.short.tmp",
                tmp_path / ".x.12.0123456789ABCDEF.tmp"]  # upper-case hex: not what we write
    for p in [ours_old, ours_fresh, *not_ours]:
        p.write_bytes(b"x")
        _age(p, 3600)
    _age(ours_fresh, 10)
    d = tmp_path / ".dir.1.0123456789abcdef.tmp"  # a directory with our name pattern: kept
    d.mkdir()
    _age(d, 3600)
    if hasattr(os, "symlink"):
        link = tmp_path / ".link.1.0123456789abcdef.tmp"
        link.symlink_to(tmp_path / "data.tmp")
        _age(link, 3600)
    assert cleanup_stale_temps_in(tmp_path) == [ours_old]
    assert ours_fresh.exists() and d.is_dir() and all(p.exists() for p in not_ours)
    assert cleanup_stale_temps_in(tmp_path, min_age_s=0) == [ours_fresh]
    assert cleanup_stale_temps_in(tmp_path / "missing") == []
    assert STALE_TEMP_AGE_S >= 60


# --------------------------------------------------------------------------- #
# output directories: refuse / --force / --resume                              #
# --------------------------------------------------------------------------- #


def _tree(root: Path) -> dict[str, tuple[bytes, int] | None]:
    out: dict[str, tuple[bytes, int] | None] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = None if p.is_dir() else (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def test_prepare_output_dir_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    from cfjax.infra.io import OutputExistsError, UserError, prepare_output_dir

    assert prepare_output_dir(tmp_path / "new") == []  # missing: fine (and not created)
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert prepare_output_dir(tmp_path / "empty") == []
    d = tmp_path / "run"
    d.mkdir()
    (d / "report.txt").write_text("my notes")
    before = _tree(d)
    with pytest.raises(OutputExistsError, match=r"not empty \(report.txt\); pass --force") as e:
        prepare_output_dir(d, command="cfjax x run")
    assert isinstance(e.value, UserError) and isinstance(e.value, FileExistsError)
    assert "cannot --resume" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(OutputExistsError, match="pass --resume to continue it, --force"):
        prepare_output_dir(d, resumable=True)
    with pytest.raises(OutputExistsError, match="cannot resume"):
        prepare_output_dir(d, existing="resume")
    with pytest.raises(OutputExistsError, match="cannot resume"):
        prepare_output_dir(tmp_path / "new", existing="resume")  # whatever is there
    assert prepare_output_dir(d, existing="resume", resumable=True) == []
    with pytest.raises(OutputExistsError, match="not a directory"):
        prepare_output_dir(d / "report.txt", existing="force")
    with pytest.raises(ValueError):
        prepare_output_dir(d, existing="overwrite")
    assert _tree(d) == before


def test_prepare_output_dir_force_removes_only_what_the_command_writes(tmp_path: Path) -> None:
    from cfjax.infra.io import prepare_output_dir

    d = tmp_path / "run"
    owned = ["config.toml", "results.json", "suites/sql", "sql/split_*", "figures/a.png", "sweep_*.png"]
    for rel in ("config.toml", "results.json", "suites/sql/db/x.sqlite", "sql/split_1/seed_0/store.json",
                "sql/split_2/seed_0/store.json", "figures/a.png", "sweep_r.png",
                ".results.json.77.0123456789abcdef.tmp",
                "figures/.a.png.1.0123456789abcdef.tmp",
                # the user's own files, kept:
                "notes.txt", "sql/my_analysis.py", "figures/mine.png", "suites/mine/keep.txt", ".config.toml.bak"):
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)
    outside = tmp_path / "elsewhere"
    (outside / "split_9").mkdir(parents=True)
    (outside / "split_9" / "precious").write_text("not ours")
    (d / "pybugs").symlink_to(outside, target_is_directory=True)  # a link: never followed
    removed = prepare_output_dir(d, existing="force", owned=owned + ["pybugs/split_*"])
    left = sorted(str(p.relative_to(d)) for p in d.rglob("*") if not p.is_dir() or p.is_symlink())
    assert left == [".config.toml.bak", "figures/mine.png", "notes.txt", "pybugs", "sql/my_analysis.py",
                    "suites/mine/keep.txt"]
    assert (outside / "split_9" / "precious").read_text() == "not ours"
    assert d / "suites" / "sql" in removed and d / ".results.json.77.0123456789abcdef.tmp" in removed
    # emptied directories go, the user's stay
    (d / "sql" / "my_analysis.py").unlink()
    (d / "sql" / "split_3").mkdir()
    prepare_output_dir(d, existing="force", owned=owned)
    assert not (d / "sql").exists() and (d / "suites" / "mine").is_dir()


def test_prepare_output_file(tmp_path: Path) -> None:
    from cfjax.infra.io import OutputExistsError, prepare_output_file

    f = tmp_path / "sel.json"
    prepare_output_file(f)  # missing: fine
    f.write_text("mine")
    with pytest.raises(OutputExistsError, match="already exists; pass --force"):
        prepare_output_file(f)
    prepare_output_file(f, existing="force")
    assert f.read_text() == "mine"  # replaced only by the command's own (atomic) write
    with pytest.raises(OutputExistsError, match="cannot resume"):
        prepare_output_file(f, existing="resume")
    with pytest.raises(OutputExistsError, match="is a directory"):
        prepare_output_file(tmp_path, existing="force")
    with pytest.raises(OutputExistsError, match="does not exist"):
        prepare_output_file(tmp_path / "no" / "x.json")


def test_error_hierarchy() -> None:
    from cfjax.config import ConfigError
    from cfjax.infra.io import InputError, OutputExistsError, UserError

    assert issubclass(CorruptFileError, InputError) and issubclass(CorruptFileError, ValueError)
    assert issubclass(ConfigError, UserError) and issubclass(ConfigError, ValueError)
    assert issubclass(OutputExistsError, UserError) and issubclass(OutputExistsError, FileExistsError)
    assert str(OutputExistsError("one line")) == "one line"

"""The total size of a sandboxed child's scratch directory is bounded (issue: a candidate wrote 1,086
files of 1 MB each — 1.1 GB — into its scratch directory in one 3 s evaluation; the per-file limit held,
the total did not, and the directory was the host's disk).

The work directory is now a private tmpfs inside the child's mount namespace (``cfjax.sandbox._layers``:
``SCRATCH_MB`` MB, ``SCRATCH_FILES`` inodes by default): writing past either bound fails *inside* the
sandbox with ``ENOSPC``, the evaluation returns an outcome, and the host-side scratch directory never
holds more than what the parent wrote (the action, the child's stdout/stderr files).
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from cfjax.domains.python import PyBugsSuite
from cfjax.domains.python.world import PytestWorld
from cfjax.sandbox import SCRATCH_FILES, SCRATCH_MB, missing, probe

pytestmark = pytest.mark.skipif("mount" in missing(probe()) or "namespaces" in missing(probe()),
                                reason=f"no private mount namespace here: {missing(probe())}")

# the candidate fills its work directory once, at import (the function is called once per test case)
_FILL = '''
import errno as _errno

def _fill(size, count):
    n, why = 0, "no error"
    try:
        for i in range(count):
            with open("f%05d" % i, "wb") as fh:
                fh.write(b"x" * size)
            n += 1
    except OSError as e:
        why = _errno.errorcode.get(e.errno, str(e.errno))
    return [n, why]

_RESULT = _fill({size}, {count})

def {fn}(*a):
    return _RESULT
'''


class _Sampler:
    """The largest number of bytes (allocated blocks) and files under ``root`` while it runs."""

    def __init__(self, root: Path) -> None:
        self.root, self.max_bytes, self.max_files = root, 0, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = files = 0
            for d, _dirs, names in os.walk(self.root):
                for n in names:
                    try:
                        total += os.lstat(os.path.join(d, n)).st_blocks * 512
                        files += 1
                    except OSError:
                        pass
            self.max_bytes, self.max_files = max(self.max_bytes, total), max(self.max_files, files)
            time.sleep(0.01)

    def __enter__(self) -> "_Sampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return PyBugsSuite.build(tmp_path_factory.mktemp("scratch-suite"))


def _evaluate(suite, scratch_root: Path, size: int, count: int, **kw):
    task = suite.tasks[0]
    fn = task.attrs["function"]
    world = suite.world(audit_hook=False, scratch_root=scratch_root, timeout_s=20.0, **kw)  # the OS layers alone
    with _Sampler(scratch_root) as s:
        t0 = time.perf_counter()
        o = world.evaluate(task, _FILL.format(size=size, count=count, fn=fn))
        elapsed = time.perf_counter() - t0
    m = re.search(r"returned \[(\d+), '([\w ]+)'\]", o.feedback)
    assert m, o
    return o, int(m.group(1)), m.group(2), s, elapsed


def test_many_one_megabyte_files_fill_only_the_private_tmpfs(suite, tmp_path):
    """The issue's attack: 1,100 files of 1 MB. At most ``SCRATCH_MB`` of them fit; the next write
    fails with ENOSPC inside the sandbox; the host's scratch directory stays at a few kB."""
    root = tmp_path / "scratch"
    root.mkdir()
    o, written, why, s, elapsed = _evaluate(suite, root, 1 << 20, 1100)
    assert o.completed and o.error is None and o.score == 0.0, o  # an outcome, judged like any other
    assert why == "ENOSPC" and written < SCRATCH_MB, (written, why)
    assert s.max_bytes < 4 << 20, s.max_bytes  # never more than the action and the output files
    assert s.max_files <= 3, s.max_files
    assert list(root.iterdir()) == []  # nothing left behind
    assert elapsed < 20.0


def test_many_small_files_hit_the_inode_bound(suite, tmp_path):
    root = tmp_path / "scratch"
    root.mkdir()
    o, written, why, s, _ = _evaluate(suite, root, 10, SCRATCH_FILES + 2000)
    assert o.completed and o.error is None, o
    assert why == "ENOSPC" and written < SCRATCH_FILES, (written, why)
    assert s.max_files <= 3 and s.max_bytes < 4 << 20, (s.max_files, s.max_bytes)


def test_the_bound_is_a_parameter_of_the_sandbox_spec(suite, tmp_path, monkeypatch):
    """``spec["scratch_mb"]`` / ``spec["scratch_files"]`` set the bound (here 8 MB, 100 files)."""
    real = PytestWorld._sandbox_spec

    def small(self, scratch, work):
        spec = real(self, scratch, work)
        if spec is not None:
            spec.update(scratch_mb=8, scratch_files=100)
        return spec

    monkeypatch.setattr(PytestWorld, "_sandbox_spec", small)
    root = tmp_path / "scratch"
    root.mkdir()
    _, written, why, _, _ = _evaluate(suite, root, 1 << 20, 50)
    assert why == "ENOSPC" and written < 8, (written, why)
    _, written, why, _, _ = _evaluate(suite, root, 10, 500)
    assert why == "ENOSPC" and written < 100, (written, why)


def test_the_gold_still_passes_with_the_bound(suite, tmp_path):
    t = suite.tasks[0]
    o = suite.world(scratch_root=tmp_path).evaluate(t, suite.answer_key(t.task_id).gold)
    assert o.solved, o


def test_control_without_the_bound_the_writes_reach_the_host(suite, tmp_path, monkeypatch):
    """Control: ``scratch_mb=0`` (the host directory bind-mounted, as before the bound) lets 20 files
    of 1 MB land in the host's scratch directory — so the bounded runs above mean something."""
    real = PytestWorld._sandbox_spec

    def unbounded(self, scratch, work):
        spec = real(self, scratch, work)
        if spec is not None:
            spec["scratch_mb"] = 0
        return spec

    monkeypatch.setattr(PytestWorld, "_sandbox_spec", unbounded)
    root = tmp_path / "scratch"
    root.mkdir()
    _, written, why, s, _ = _evaluate(suite, root, 1 << 20, 20)
    assert (written, why) == (20, "no error")
    assert s.max_bytes >= 10 << 20, s.max_bytes


def test_the_python_world_hands_its_bounds_to_the_sandbox(tmp_path):
    """``PytestWorld(scratch_mb=…, scratch_files=…)`` reaches the child's spec; the defaults are the layer's."""
    from cfjax.domains.python.world import PytestWorld
    from cfjax.sandbox._layers import SCRATCH_FILES, SCRATCH_MB

    spec = PytestWorld(tmp_path, {}, scratch_mb=8, scratch_files=100)._sandbox_spec(str(tmp_path), str(tmp_path))
    assert (spec["scratch_mb"], spec["scratch_files"]) == (8, 100)
    w = PytestWorld(tmp_path, {})
    assert (w.scratch_mb, w.scratch_files) == (SCRATCH_MB, SCRATCH_FILES)
    with pytest.raises(ValueError, match="scratch_mb"):
        PytestWorld(tmp_path, {}, scratch_mb=0)

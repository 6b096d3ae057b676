"""Python world model: run an untrusted function against a task's unit tests.

This is the executable evaluator ``H`` with utility ``U`` of the Python
bug-fixing domain (papers/countermem.md §3.3, Eq. 2; Table 4: "repository
tests", "localized edit"). The action is the complete source of one function;
each task has a file of pytest-style tests (plain ``def test_*():`` functions
with ``assert``) under the suite root, which this module only ever reads.

Score
-----
``U`` = the fraction of the task's tests that pass (partial credit, so a
one-unit edit that fixes some cases is a measurable improvement, Eq. 2);
``solved`` iff all pass. A failed outcome of the sandbox (below) scores 0.
Feedback lists the failing test names with their assertion / exception
messages — never the gold function. What a failing test's message may show is
a world option (``feedback=``), because the suite's tests are *hidden* from the
agent (``Task.context`` holds only the signature) and their expected values are
the gold function's outputs:

* ``"user"`` (default): what a user-facing test runner reports of hidden tests —
  how many passed, the failing tests' names, and per failing test the call and
  the action's *own* returned value or its own exception, never the expected
  value::

      3 of 5 tests passed.
      FAILED test_limit_is_a_value: items_with_high_stock({'washer': 6, 'nut': 25}, 25) returned []
      FAILED test_unknown: KeyError: 'bolt'

  (``"rich"`` adds ``, expected ['nut']`` to the first line.)

  The expected part of a message is cut at its first ``", expected "`` (the
  suite's ``_check`` writes ``<call> returned <value>, expected <value>``), and
  pytest's assertion introspection (``assert 1 == 2`` — the ``pytest`` runner's
  message for a bare ``assert``) is reduced to ``assertion failed``; a test
  file of one's own should not put expected values in other words.
* ``"rich"``: the tests' messages as they are (``..., expected 2``).

Error texts (syntax, import, sandbox, crash, timeout) are the same in both
modes; ``score``/``solved`` never depend on the option.

``error`` is ``None`` when the tests ran (whatever they found) and otherwise one of:

====================  ===========  ================================================
error                 completed    meaning
====================  ===========  ================================================
``syntax_error``      True         the action does not parse
``missing_function``  True         the action does not define the task's function
``too_large``         True         the action exceeds ``max_action_chars``
``import_error``      True         defining the candidate (or the tests' import of it) raised
``forbidden``         True         the audit hook refused a dangerous operation
``memory``            True         a ``MemoryError`` (the address-space limit) was hit
``output_limit``      True         killed by ``SIGXFSZ`` (CPython ignores it, so writes past
                                   ``RLIMIT_FSIZE`` usually fail the test with ``OSError``)
``crash``             True         the process died without a verdict (segfault, ``os._exit``...)
``timeout``           **False**    wall-clock or CPU limit exceeded: never admissible (App. B.1)
``harness_error``     **False**    the harness itself failed (an infrastructure error)
``no_tests``          **False**    the task's test file defines no test (a data error)
====================  ===========  ================================================

Every call is independent: a fresh scratch directory, a fresh interpreter, no
result caching (the pipeline caches).

Sandbox
-------
Each evaluation runs in a **subprocess** of ``sys.executable``, with flags
``-S -s -P -B`` (no ``site``, no user site, no script directory on
``sys.path``, no byte-code writing — i.e. ``-I`` without ``-E``, because
``-E`` would also ignore ``PYTHONHASHSEED``):

* **scratch directory** — ``tempfile.mkdtemp``; the child's working directory
  is ``<scratch>/work`` holding ``solution.py`` (the action) and
  ``test_task.py`` (a *copy* of the task's test file); stdout/stderr go to
  files next to ``work`` (outside what the candidate may read). The whole
  scratch directory is removed afterwards;
* **environment** — only ``PATH``, ``LANG``, ``HOME`` (= the work directory)
  and ``PYTHONHASHSEED=0`` (pytest mode adds
  ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``); no ``PYTHONPATH``;
* **resource limits** (set by the harness before any candidate code, soft =
  hard): ``RLIMIT_AS`` (``memory_mb``, default 512 MB), ``RLIMIT_CPU``
  (``ceil(timeout_s) + 1`` s), ``RLIMIT_FSIZE`` (``fsize_mb``, 1 MB),
  ``RLIMIT_NOFILE`` (64), ``RLIMIT_CORE`` 0, ``RLIMIT_NPROC`` 0;
* **wall-clock timeout** — the child is started with ``start_new_session=True``;
  at ``timeout_s`` its whole process group is killed with ``os.killpg`` and
  the outcome is ``completed=False``. The group is also killed (before
  reaping, so the id cannot have been reused) after every normal exit;
* **audit hook** — the harness (:mod:`cfjax.domains.python._harness`) installs a
  ``sys.addaudithook`` hook before the candidate runs: process creation
  (``fork``, ``exec*``, ``posix_spawn``, ``system``, ``subprocess``), signals
  to other processes, sockets, ``ctypes``, every ``open`` for writing or
  creating, deleting/renaming/chmod/chown/mkdir/link/truncate/utime, ``chdir``
  and imports of ``subprocess``/``socket``/``ctypes``/``multiprocessing``/
  ``mmap``/``resource``/... end the run at once as ``forbidden``; reading or
  listing files outside the work directory and the standard library raises
  ``PermissionError``; frame and object-graph introspection raise
  ``ValueError``;
* **verdict channel** — a fresh random nonce is written to the child's stdin,
  read and the descriptor closed before the candidate is imported; only the
  stdout line tagged with it is trusted, and it is parsed with
  :func:`ast.literal_eval`. The nonce lives only in a closure; the harness
  and the tests run with private copies of the builtins, the test module is
  not in ``sys.modules``, and the harness's ``__main__`` module is replaced
  before the candidate runs.

Threat model (what is and is not defended)
------------------------------------------
Defended: *accidental or crude* damage by model-written code — endless loops,
fork bombs, huge allocations, output floods, deleting or rewriting the test
file, the suite or the project tree, spawning shells, network access, killing
the parent, and reading files outside the sandbox (so nothing from the host
leaks into feedback that may be sent to an LLM API). The tests check each of
these and that the project tree and the suite's test files are byte-identical
afterwards.

Not defended: this is an **in-process, deny-list sandbox**, not OS isolation.

* The child runs as the same user as the pipeline (often root in a container:
  then ``RLIMIT_NPROC`` and file permissions do nothing). A CPython memory-
  corruption bug, a C extension reachable from the standard library that
  does file or process operations without audit events, or a gap in the deny
  list would give the candidate the user's full rights. Run untrusted,
  *adversarial* code only inside a container / VM / separate user with a
  read-only project tree (e.g. bubblewrap, nsjail, gVisor).
* Score integrity against code written *to fool the scorer* is best effort:
  the audited introspection paths are closed, but unaudited Python-level
  tricks may exist. Each test's comparison only accepts plain built-in values,
  so objects with a rigged ``__eq__`` do not pass.
* ``runner="pytest"`` (the cross-check) relaxes the introspection denials
  (pytest needs frames) and may read site-packages; use it for validation,
  not for adversarial code.
* Threads cannot be started (``_thread.start_new_thread`` is replaced), but
  Python 3.11 emits no audit event for them; ``os.mkfifo``/``mknod`` are
  removed for the same reason.

Picklable (plain attributes only), so it can be shipped to worker processes.
"""

from __future__ import annotations

import ast
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from cfjax.types import AnswerKey, Task
from cfjax.types import Outcome
from cfjax.domains.python.edits import entry_name

__all__ = ["PytestWorld", "HARNESS_PATH", "task_test_path", "FEEDBACK_MODES", "user_message"]

HARNESS_PATH = Path(__file__).with_name("_harness.py")
_MAX_FEEDBACK = 790
#: values of the ``feedback`` option (module docstring)
FEEDBACK_MODES = ("user", "rich")
_SAFE_PART = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def task_test_path(tests_root: str | Path, task_id: str) -> Path:
    """``<tests_root>/<env>/<family>/test_<nnn>.py`` for ``task_id = "<suite>/<env>/<family>/<nnn>"``."""
    parts = task_id.split("/")
    if len(parts) < 2 or any(not p or not set(p) <= _SAFE_PART for p in parts):
        raise ValueError(f"task id {task_id!r} does not name a test file")
    return Path(tests_root).joinpath(*parts[1:-1], f"test_{parts[-1]}.py")


def _defines(action_tree: ast.Module, name: str) -> bool:
    for st in action_tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and st.name == name:
            return True
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
            return True
        if isinstance(st, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in st.names):
            return True
    return False


class PytestWorld:
    """Executable world model over the test files of a Python suite (see the module docstring).

    Args:
      tests_root: directory holding ``<env>/<family>/test_<nnn>.py`` (read only).
      timeout_s: wall-clock limit per evaluation; exceeded → ``completed=False``.
      memory_mb: address-space limit of the child (``RLIMIT_AS``).
      cpu_s: CPU-seconds limit (default ``ceil(timeout_s) + 1``).
      fsize_mb: largest file the child may write (its stdout/stderr files).
      nofile: open-file limit of the child.
      runner: ``"harness"`` (the fast in-house runner, default) or ``"pytest"``
        (real ``pytest`` in the child; same score, used to cross-check).
      python: interpreter (default ``sys.executable``).
      scratch_root: where scratch directories are created (default: the system temp dir).
      max_action_chars: longer actions are refused (``error="too_large"``).
      feedback: ``"user"`` (default: failing tests' calls and the action's own results, never
        the expected values) or ``"rich"`` (the tests' messages as they are); see the module docstring.
    """

    def __init__(self, tests_root: str | Path, keys: Mapping[str, AnswerKey], *, timeout_s: float = 2.0, memory_mb: int = 512,
                 cpu_s: int | None = None, fsize_mb: float = 1.0, nofile: int = 64, runner: str = "harness",
                 python: str | None = None, scratch_root: str | Path | None = None,
                 max_action_chars: int = 100_000, feedback: str = "user") -> None:
        if feedback not in FEEDBACK_MODES:
            raise ValueError(f"feedback must be 'user' or 'rich', got {feedback!r}")
        if runner not in ("harness", "pytest"):
            raise ValueError(f"runner must be 'harness' or 'pytest', got {runner!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.tests_root = Path(tests_root)
        self._keys = dict(keys)
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.cpu_s = int(cpu_s) if cpu_s is not None else int(math.ceil(self.timeout_s)) + 1
        self.fsize_bytes = int(fsize_mb * 1024 * 1024)
        self.nofile = int(nofile)
        self.runner = runner
        self.python = python or sys.executable
        self.scratch_root = str(scratch_root) if scratch_root is not None else None
        self.max_action_chars = int(max_action_chars)
        self.feedback = feedback

    # ------------------------------------------------------------------ public
    def test_file(self, task: Task) -> Path:
        return task_test_path(self.tests_root, task.task_id)

    def close(self) -> None:
        """Nothing to release (every evaluation cleans up after itself)."""

    def evaluate(self, task: Task, action: str) -> Outcome:
        """Run ``task``'s tests against ``action`` in a fresh sandboxed interpreter."""
        t0 = time.perf_counter()
        test_src = self.test_file(task).read_text(encoding="utf-8")  # missing file: a data error, raises

        def done(score: float, solved: bool, completed: bool, feedback: str, error: str | None) -> Outcome:
            return Outcome(score, solved, completed, feedback[:_MAX_FEEDBACK], error, time.perf_counter() - t0)

        if len(action) > self.max_action_chars:
            return done(0.0, False, True, f"the action has {len(action)} characters (limit {self.max_action_chars})",
                        "too_large")
        try:
            tree = ast.parse(action)
        except (SyntaxError, ValueError) as e:
            line = f" (line {e.lineno})" if getattr(e, "lineno", None) else ""
            return done(0.0, False, True, f"{type(e).__name__}: {getattr(e, 'msg', e)}{line}", "syntax_error")
        except (MemoryError, RecursionError) as e:
            return done(0.0, False, True, f"the action is too deeply nested to parse ({type(e).__name__})",
                        "syntax_error")
        key = self._keys.get(task.task_id)
        if key is None:
            raise ValueError(f"the Python world has no answer key for task {task.task_id!r}")
        name = entry_name(key.gold)
        if name is not None and not _defines(tree, name):
            return done(0.0, False, True, f"the action does not define the function `{name}`", "missing_function")
        return self._run(test_src, action, done)

    # ------------------------------------------------------------------ internals
    def _env(self, work: str) -> dict[str, str]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": work, "PYTHONHASHSEED": "0"}
        if self.runner == "pytest":
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return env

    def _argv(self, work: str) -> list[str]:
        flags = ["-S", "-s", "-P", "-B"] if self.runner == "harness" else ["-s", "-P", "-B"]
        return [self.python, *flags, str(HARNESS_PATH), self.runner, work, str(self.memory_mb * 1024 * 1024),
                str(self.cpu_s), str(self.fsize_bytes), str(self.nofile)]

    def _run(self, test_src: str, action: str, done) -> Outcome:
        scratch = tempfile.mkdtemp(prefix="cfjax-py-", dir=self.scratch_root)
        proc: subprocess.Popen | None = None
        try:
            work = os.path.join(scratch, "work")
            os.mkdir(work)
            with open(os.path.join(work, "solution.py"), "w", encoding="utf-8") as f:
                f.write(action)
            with open(os.path.join(work, "test_task.py"), "w", encoding="utf-8") as f:
                f.write(test_src)
            if self.runner == "pytest":
                with open(os.path.join(work, "pytest.ini"), "w", encoding="utf-8") as f:
                    f.write("[pytest]\n")
            out_path, err_path = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
            nonce = secrets.token_hex(16)
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(self._argv(work), stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=work,
                                        env=self._env(work), start_new_session=True, close_fds=True)
            try:
                proc.stdin.write(nonce.encode() + b"\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            finished = self._wait(proc, self.timeout_s)
            _killpg(proc.pid)  # not reaped yet: the group id cannot have been reused
            proc.wait()
            if not finished:
                return done(0.0, False, False, f"timed out after {self.timeout_s:g} s", "timeout")
            rc = proc.returncode
            payload = _read_payload(out_path, nonce, self.fsize_bytes)
            if payload is None:
                return self._no_verdict(rc, err_path, done)
            return _outcome(payload, done, user=self.feedback == "user")
        finally:
            if proc is not None and proc.returncode is None:
                _killpg(proc.pid)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
                    pass
            shutil.rmtree(scratch, ignore_errors=True)

    @staticmethod
    def _wait(proc: subprocess.Popen, timeout_s: float) -> bool:
        """True when the child exited within ``timeout_s`` (not reaped: a zombie keeps its pid)."""
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                fd = pidfd_open(proc.pid)
            except OSError:
                fd = None
            if fd is not None:
                try:
                    p = select.poll()
                    p.register(fd, select.POLLIN)
                    deadline = time.monotonic() + timeout_s
                    while True:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return False
                        if p.poll(max(1, int(left * 1000))):
                            return True
                finally:
                    os.close(fd)
        # fallback: wait on the pid without reaping it
        deadline = time.monotonic() + timeout_s
        delay = 0.0005
        while time.monotonic() < deadline:
            try:
                info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # pragma: no cover
                return True
            if info is not None:
                return True
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        return False

    def _no_verdict(self, rc: int, err_path: str, done) -> Outcome:
        try:
            with open(err_path, "rb") as f:
                tail = f.read(self.fsize_bytes + 1)[-2000:].decode("utf-8", "replace")
        except OSError:
            tail = ""
        if rc in (-signal.SIGXCPU,):
            return done(0.0, False, False, "CPU time limit exceeded", "timeout")
        if rc == -signal.SIGXFSZ:
            return done(0.0, False, True, "the candidate wrote more output than allowed", "output_limit")
        if "MemoryError" in tail:
            return done(0.0, False, True, "MemoryError: the memory limit was exceeded", "memory")
        last = next((ln for ln in reversed(tail.strip().splitlines()) if ln.strip()), "")
        how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        return done(0.0, False, True, f"the test process ended without a verdict ({how}). {last}"[:400], "crash")


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_payload(out_path: str, nonce: str, limit: int) -> dict[str, Any] | None:
    try:
        with open(out_path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    tag = (nonce + " ").encode()
    line = None
    for ln in data.split(b"\n"):
        if ln.startswith(tag):
            line = ln[len(tag):]
    if line is None:
        return None
    try:
        payload = ast.literal_eval(line.decode("utf-8", "replace"))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return payload if isinstance(payload, dict) and isinstance(payload.get("status"), str) else None


_EXPECTED_SEP = ", expected "


def user_message(verdict: str, msg: str) -> str:
    """A failing test's message as a user-facing runner of hidden tests shows it: the call and the
    action's own value or exception, never the expected value (module docstring, ``"user"``)."""
    msg = msg.strip()
    if msg.startswith("AssertionError: "):  # the pytest runner's first line of a failed assert
        msg = msg[len("AssertionError: "):]
    elif msg == "AssertionError":
        msg = ""
    if verdict == "failed" and (msg == "assert" or msg.startswith("assert ")):
        return "assertion failed"  # pytest's introspection (``assert 1 == 2``) states the expected side
    cut = msg.find(_EXPECTED_SEP)
    if cut >= 0:
        msg = msg[:cut]
    return msg or ("assertion failed" if verdict == "failed" else verdict)


def _outcome(payload: dict[str, Any], done, user: bool = False) -> Outcome:
    status = payload["status"]
    detail = str(payload.get("detail", ""))
    if status == "ok":
        tests = payload.get("tests")
        if not isinstance(tests, list) or not tests:
            return done(0.0, False, False, "the test file defines no tests", "no_tests")
        n = len(tests)
        if any(t[1] == "memory" for t in tests):
            return done(0.0, False, True, "MemoryError: the memory limit was exceeded in "
                        + ", ".join(str(t[0]) for t in tests if t[1] == "memory"), "memory")
        passed = sum(1 for t in tests if t[1] == "passed")
        if passed == n:
            return done(1.0, True, True, f"all {n} tests passed", None)
        lines = [f"{passed} of {n} tests passed."]
        lines += [f"FAILED {name}: {user_message(str(verdict), str(msg)) if user else msg}"
                  for name, verdict, msg in tests if verdict != "passed"]
        return done(passed / n, False, True, "\n".join(lines), None)
    if status == "syntax_error":
        return done(0.0, False, True, detail, "syntax_error")
    if status == "forbidden":
        return done(0.0, False, True, f"forbidden operation in the sandbox: {detail}", "forbidden")
    if status == "memory":
        return done(0.0, False, True, f"MemoryError: the memory limit was exceeded ({detail})", "memory")
    if status == "import_error":
        return done(0.0, False, True, f"defining the function failed: {detail}", "import_error")
    return done(0.0, False, False, f"harness failure: {status}: {detail}", "harness_error")

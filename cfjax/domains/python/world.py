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
``harness_error``     **False**    the harness itself failed, or the evaluator did (feedback
                                   "internal evaluator error ..."): an infrastructure error
``no_tests``          **False**    the task's test file defines no test (a data error)
====================  ===========  ================================================

Every call is independent: a fresh scratch directory, a fresh interpreter, no
result caching (the pipeline caches).

Who judges: the parent
----------------------
The task's test file never enters the sandbox. The parent parses it into
*cases* (:func:`parse_cases`: each ``test*`` function is one call of the
task's function on literal arguments, with a literal expected value or an
expected built-in exception — what the built-in suite writes) and sends the
child only the candidate, the function's name and each case's arguments. The
child calls the function on each case and reports back plain data: the
returned value through a safe encoder (exact built-in types only: ``None``,
``bool``, ``int``, ``float``, ``str``, ``list``, ``tuple``, ``dict``, bounded in
size and depth; anything else is reported by its type name), or the exception
by type name, message and the built-in exception classes it derives from. The
parent alone holds the expected values and decides pass/fail
(:func:`judge`): whatever the child prints or forges, a test passes only if
the reported value equals the expected one, so a forged report is no stronger
than returning that value. A test file in any other form is refused
(``ValueError``); ``runner="pytest"`` runs arbitrary test code *inside* the
sandbox and trusts its verdict — a cross-check for the suite, never for
untrusted code.

A test file that is a *check program* (:func:`~cfjax.domains.python.cases.render_check_program`:
a benchmark's own ``check(candidate)``, e.g. HumanEvalPack's ``test``) is judged by that code as
written, in a sandboxed process of its own that calls the candidate — in another sandboxed
process — through a proxy; the check process alone reports the verdict
(:mod:`cfjax.domains.python.proxy`, where the bounds and what is defended are written). A check
program scores 1 or 0 (one test: the check).

Sandbox
-------
Each evaluation runs in a **subprocess** of ``sys.executable``, with flags
``-S -s -P -B`` (no ``site``, no user site, no script directory on
``sys.path``, no byte-code writing — i.e. ``-I`` without ``-E``, because
``-E`` would also ignore ``PYTHONHASHSEED``). Its layers, outermost first:

* **OS isolation** (``isolation="os"``, the default; :mod:`cfjax.sandbox`):
  before any candidate code the child enters new mount, network, PID, IPC,
  UTS and user namespaces; pivots into a private root that holds only ``/usr``
  (and the ``/lib``/``/bin`` links), the interpreter's prefix, the loader
  cache, four device files and the work directory (read-only but for the work
  directory); runs as uid 65534 when the pipeline is root; sets
  ``no_new_privs``; restricts itself with Landlock (read ``/usr`` but its
  Python package directories, ``/usr/local`` and ``/usr/src``; read the
  standard library but not site-packages; execute only the interpreter; write
  only the work directory; no TCP; no signals or abstract sockets leaving the
  domain);
  and loads a seccomp filter refusing process creation, ``execve``, sockets,
  ``ptrace``, ``pidfd_*``, mounts and namespaces. A layer the machine does not
  offer is skipped and named in ``Outcome.sandbox_missing``;
  ``cfjax doctor`` prints what this machine offers.
* **scratch directory** — ``tempfile.mkdtemp``; the child's working directory
  is ``<scratch>/work`` holding only ``solution.py`` (the action);
  stdout/stderr go to files next to ``work``. The whole scratch directory is
  removed afterwards;
* **environment** — only ``PATH``, ``LANG``, ``HOME`` (= the work directory)
  and ``PYTHONHASHSEED=0`` (pytest mode adds
  ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``); no ``PYTHONPATH``;
* **resource limits** (set before any candidate code, soft = hard):
  ``RLIMIT_AS`` (``memory_mb``, default 512 MB), ``RLIMIT_CPU``
  (``ceil(timeout_s) + 1`` s), ``RLIMIT_FSIZE`` (``fsize_mb``, 1 MB),
  ``RLIMIT_NOFILE`` (64), ``RLIMIT_CORE`` 0, ``RLIMIT_NPROC`` 0 (meaningful
  because the child is not root);
* **wall-clock timeout** — the child is started with ``start_new_session=True``;
  at ``timeout_s`` its whole process group is killed with ``os.killpg`` and
  the outcome is ``completed=False``. The group is also killed (before
  reaping, so the id cannot have been reused) after every normal exit, and
  the PID namespace dies with its init;
* **audit hook** (the second layer, in-process) — the harness
  (:mod:`cfjax.domains.python._harness`) installs a ``sys.addaudithook`` hook
  before the candidate runs: process creation, signals to other processes,
  sockets, ``ctypes``, every ``open`` for writing or creating,
  deleting/renaming/chmod/chown/mkdir/link/truncate/utime, ``chdir`` and
  imports of ``subprocess``/``socket``/``ctypes``/``multiprocessing``/
  ``mmap``/``resource``/... end the run at once as ``forbidden``; reading or
  listing files outside the work directory and the standard library raises
  ``PermissionError``; the common introspection routes (``sys._getframe``,
  ``tb_frame``, ``gc.get_objects``...) raise ``ValueError``, but a frame is
  still reachable (a signal handler's argument, ``f_back``: CPython 3.11
  audits neither), so the candidate can reach the harness's report writer —
  which forges nothing, because the parent judges (below) and takes the OS
  layers from the line written before the candidate ran. Starting a thread
  ends the run as ``forbidden`` (threads are not available). A deny list has
  gaps (an extension module loaded under another name, a subinterpreter,
  which has no hook): the OS layers are what contain such escapes, as
  ``tests/domains/python/test_sandbox_attacks.py`` shows with the hook
  switched off (``audit_hook=False``).

Threat model (what is and is not defended)
------------------------------------------
Defended, with every OS layer on: code written by a hostile model cannot
write outside its work directory, read the host's files (``/etc``, ``/root``,
``/proc``, the project, the suite's tests, other users' keys), reach the
network or local sockets, start programs or processes, signal or trace any
process outside, leave processes behind, or forge a passing verdict; the
tests check each of these per attack, also as a non-root user.

Not defended: a Linux kernel bug reachable through the allowed system calls;
CPU/memory side channels; denial of service of the machine beyond the
resource limits (it can use its CPU time, its memory and its output quota);
what the candidate computes from the test *inputs* it is given. Without a
layer (``Outcome.sandbox_missing`` not empty) the corresponding guarantee is
gone — the CLI refuses to run a real model's code then, unless
``--allow-weak-sandbox``. ``isolation="audit"`` is the old in-process deny
list alone, kept for comparison benchmarks.

Picklable (plain attributes only), so it can be shipped to worker processes.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import marshal
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

from cfjax.domains.python._astsafe import literal_eval, parse as ast_parse
from cfjax.types import AnswerKey, Task
from cfjax.types import Outcome
from cfjax.domains.python.edits import entry_name
from cfjax.domains.python.cases import Case, is_check_program, judge, parse_cases
from cfjax.sandbox import LAYERS, LAYERS_PATH, missing as sandbox_missing, seccomp_program

__all__ = ["PytestWorld", "HARNESS_PATH", "task_test_path", "FEEDBACK_MODES", "ISOLATION_MODES", "user_message",
           "Case", "parse_cases", "judge", "SANDBOX_UID"]

HARNESS_PATH = Path(__file__).with_name("_harness.py")
_MAX_FEEDBACK = 790
#: values of the ``feedback`` option (module docstring)
FEEDBACK_MODES = ("user", "rich")
#: values of the ``isolation`` option
ISOLATION_MODES = ("os", "audit")
#: the uid the child runs as when the pipeline is root (*nobody*)
SANDBOX_UID = 65534
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
      scratch_mb, scratch_files: bounds of the child's private tmpfs work directory (default
        :data:`cfjax.sandbox._layers.SCRATCH_MB` / ``SCRATCH_FILES``: 64 MB, 4,096 files); a write past
        them fails with ``ENOSPC`` inside the sandbox.
      max_action_chars: longer actions are refused (``error="too_large"``).
      feedback: ``"user"`` (default: failing tests' calls and the action's own results, never
        the expected values) or ``"rich"`` (the tests' messages as they are); see the module docstring.
      isolation: ``"os"`` (default: every OS layer of :mod:`cfjax.sandbox` this machine allows, the
        missing ones named in ``Outcome.sandbox_missing``) or ``"audit"`` (only resource limits and
        the audit hook: the pre-OS-isolation sandbox, kept for comparison benchmarks).
      audit_hook: install the in-process audit hook (the second layer; default). ``False`` exists
        only so tests can show what the OS layers contain on their own.
      call_timeout_s, max_calls, max_value_bytes, max_items: the bounds of a *check program*'s calls
        of the candidate (:mod:`cfjax.domains.python.proxy`): seconds per call (default
        ``timeout_s``), calls per check, bytes of one encoded value, items of a returned generator.
    """

    def __init__(self, tests_root: str | Path, keys: Mapping[str, AnswerKey], *, timeout_s: float = 2.0, memory_mb: int = 512,
                 cpu_s: int | None = None, fsize_mb: float = 1.0, nofile: int = 64, runner: str = "harness",
                 python: str | None = None, scratch_root: str | Path | None = None,
                 max_action_chars: int = 100_000, feedback: str = "user", isolation: str = "os",
                 audit_hook: bool = True, call_timeout_s: float | None = None, max_calls: int = 20_000,
                 max_value_bytes: int = 1 << 20, max_items: int = 100_000, scratch_mb: int | None = None,
                 scratch_files: int | None = None) -> None:
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be 'os' or 'audit', got {isolation!r}")
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
        self.isolation = isolation
        self.audit_hook = bool(audit_hook)
        self.call_timeout_s = float(call_timeout_s) if call_timeout_s is not None else None
        self.max_calls = int(max_calls)
        self.max_value_bytes = int(max_value_bytes)
        self.max_items = int(max_items)
        from cfjax.sandbox._layers import SCRATCH_FILES, SCRATCH_MB

        self.scratch_mb = int(SCRATCH_MB if scratch_mb is None else scratch_mb)
        self.scratch_files = int(SCRATCH_FILES if scratch_files is None else scratch_files)
        if self.scratch_mb < 1 or self.scratch_files < 16:
            raise ValueError(f"scratch_mb must be >= 1 and scratch_files >= 16, got {scratch_mb}, {scratch_files}")
        self._cases: dict[str, tuple[Case, ...]] = {}

    # ------------------------------------------------------------------ public
    def test_file(self, task: Task) -> Path:
        return task_test_path(self.tests_root, task.task_id)

    def close(self) -> None:
        """Nothing to release (every evaluation cleans up after itself)."""

    def evaluate(self, task: Task, action: str) -> Outcome:
        """Run ``task``'s tests against ``action`` in a fresh sandboxed interpreter.

        A task this world does not know (no test file, no answer key) raises: that is the caller's
        error. Everything else is an :class:`Outcome`: an unexpected exception inside the evaluator
        (a bug, an exhausted resource of the host) becomes ``error="harness_error"``,
        ``completed=False``, with feedback naming an internal evaluator error."""
        t0 = time.perf_counter()
        test_src = self.test_file(task).read_text(encoding="utf-8")  # missing file: a data error, raises
        key = self._keys.get(task.task_id)
        if key is None:
            raise ValueError(f"the Python world has no answer key for task {task.task_id!r}")

        def done(score: float, solved: bool, completed: bool, feedback: str, error: str | None) -> Outcome:
            return Outcome(score, solved, completed, feedback[:_MAX_FEEDBACK], error, time.perf_counter() - t0)

        try:
            return self._evaluate(task, action, test_src, key, done)
        except Exception as e:  # noqa: BLE001 - every failure is an outcome, never an exception
            return done(0.0, False, False, f"internal evaluator error ({type(e).__name__}: {e}); the candidate "
                        "was not judged", "harness_error")

    def _evaluate(self, task: Task, action: str, test_src: str, key: AnswerKey, done) -> Outcome:
        if len(action) > self.max_action_chars:
            return done(0.0, False, True, f"the action has {len(action)} characters (limit {self.max_action_chars})",
                        "too_large")
        try:
            tree = ast_parse(action)
        except (SyntaxError, ValueError) as e:
            line = f" (line {e.lineno})" if getattr(e, "lineno", None) else ""
            return done(0.0, False, True, f"{type(e).__name__}: {getattr(e, 'msg', e)}{line}", "syntax_error")
        except (MemoryError, RecursionError) as e:
            return done(0.0, False, True, f"the action is too deeply nested to parse ({type(e).__name__})",
                        "syntax_error")
        # the task's function (the action is a module: helpers may come before it)
        name = task.attrs.get("function") or entry_name(key.gold)
        if name is not None and not _defines(tree, name):
            return done(0.0, False, True, f"the action does not define the function `{name}`", "missing_function")
        if is_check_program(test_src):  # either runner: the check never runs beside the candidate
            from cfjax.domains.python.proxy import run_check

            return run_check(self, action, test_src, done)
        if self.runner == "pytest":
            return self._run(action, done, test_src=test_src)
        cases = self._cases.get(task.task_id)
        if cases is None:
            cases = self._cases[task.task_id] = parse_cases(test_src, str(self.test_file(task)))
        if not cases:
            return done(0.0, False, False, "the test file defines no tests", "no_tests")
        return self._run(action, done, cases=cases)

    # ------------------------------------------------------------------ internals
    def _env(self, work: str) -> dict[str, str]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": work, "PYTHONHASHSEED": "0"}
        if self.runner == "pytest":
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return env

    def _argv(self, work: str) -> list[str]:
        flags = ["-S", "-s", "-P", "-B"] if self.runner == "harness" else ["-s", "-P", "-B"]
        _byte_compile()
        return [self.python, *flags, "-c", _BOOT, str(HARNESS_PATH.parent), self.runner, work,
                str(self.memory_mb * 1024 * 1024), str(self.cpu_s), str(self.fsize_bytes), str(self.nofile)]

    def _sandbox_spec(self, scratch: str, work: str) -> dict[str, Any] | None:
        if self.isolation != "os":
            return None
        program, why = seccomp_program()
        return {"scratch": scratch, "rw": [work], "uid": SANDBOX_UID, "seccomp": program, "seccomp_why": why,
                "allow_site": self.runner == "pytest", "layers_dir": str(LAYERS_PATH.parent),
                "stdlib": _stdlib_dirs(self.python), "scratch_mb": self.scratch_mb, "scratch_files": self.scratch_files}

    def _run(self, action: str, done, *, cases: tuple[Case, ...] = (), test_src: str | None = None) -> Outcome:
        scratch = tempfile.mkdtemp(prefix="cfjax-py-", dir=self.scratch_root)
        proc: subprocess.Popen | None = None
        try:
            work = os.path.join(scratch, "work")
            os.mkdir(work, 0o700)
            os.mkdir(os.path.join(scratch, "root"), 0o700)  # the private root's mount point
            with open(os.path.join(work, "solution.py"), "w", encoding="utf-8") as f:
                f.write(action)
            if test_src is not None:  # the pytest cross-check runner only: the tests run inside
                with open(os.path.join(work, "test_task.py"), "w", encoding="utf-8") as f:
                    f.write(test_src)
                with open(os.path.join(work, "pytest.ini"), "w", encoding="utf-8") as f:
                    f.write("[pytest]\n")
            spec = self._sandbox_spec(scratch, work)
            if spec is not None and os.geteuid() == 0:  # the child drops to SANDBOX_UID
                for name in os.listdir(work):
                    os.chown(os.path.join(work, name), SANDBOX_UID, SANDBOX_UID)
                os.chown(work, SANDBOX_UID, SANDBOX_UID)
            out_path, err_path = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
            nonce = secrets.token_hex(16)
            message = {"nonce": nonce, "sandbox": spec}
            if test_src is None:
                message["function"] = cases[0].function if cases else ""
                message["cases"] = [[c.name, literal_eval(c.args), c.materialize] for c in cases]
                message["audit"] = self.audit_hook
                message["fsize"] = self.fsize_bytes
            # stdout for appending: the ``started`` line (the OS layers) cannot be overwritten
            with open(out_path, "ab") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(self._argv(work), stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=work,
                                        env=self._env(work), start_new_session=True, close_fds=True)
            try:
                proc.stdin.write(marshal.dumps(message))
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            finished = self._wait(proc, self.timeout_s)
            _killpg(proc.pid)  # not reaped yet: the group id cannot have been reused
            proc.wait()
            if not finished:
                return done(0.0, False, False, f"timed out after {self.timeout_s:g} s", "timeout")
            rc = proc.returncode
            started, payload = _read_reports(out_path, nonce, self.fsize_bytes)
            if payload is None or payload.get("status") == "started":
                return self._no_verdict(rc, err_path, done)
            gone = ()
            if spec is not None:  # the layers as written before any candidate code ran
                layers = (started if started is not None else payload).get("layers")
                gone = sandbox_missing(layers) if isinstance(layers, dict) else LAYERS
            if test_src is None and payload.get("status") == "ok":
                payload = {"status": "ok", "tests": judge(cases, payload.get("results"))}
            return _outcome(payload, done, user=self.feedback == "user", missing=gone)
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
        if rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return done(0.0, False, False, "CPU time limit exceeded", "timeout")
        if rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
            return done(0.0, False, True, "the candidate wrote more output than allowed", "output_limit")
        if "MemoryError" in tail:
            return done(0.0, False, True, "MemoryError: the memory limit was exceeded", "memory")
        last = next((ln for ln in reversed(tail.strip().splitlines()) if ln.strip()), "")
        how = f"killed by signal {-rc} ({_signal_name(-rc)})" if rc < 0 else f"exit status {rc}"
        return done(0.0, False, True, f"the test process ended without a verdict ({how}). {last}"[:400], "crash")


#: the child's entry point: import the harness as a module (so its byte code is cached, unlike a
#: script's), drop it from ``sys.modules`` and the path, then run it
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); import _harness; del sys.path[0]; "
         "sys.modules.pop('_harness', None); _harness.main(sys.argv[1:])")


@functools.lru_cache(maxsize=1)
def _byte_compile() -> None:
    """Write the byte code of the two files every child imports (the harness and the OS layers),
    once per process: compiling them from source cost each child ~10 ms. Best effort (a
    read-only install is simply compiled on each run)."""
    import importlib.util
    import py_compile

    for src in (HARNESS_PATH, LAYERS_PATH):
        try:
            cached = importlib.util.cache_from_source(str(src))
            if not os.path.exists(cached) or os.path.getmtime(cached) < os.path.getmtime(src):
                py_compile.compile(str(src), cfile=cached, doraise=True)
        except (OSError, py_compile.PyCompileError, NotImplementedError):
            pass


@functools.lru_cache(maxsize=8)
def _stdlib_dirs(python: str) -> list[str]:
    """The standard library's directories of ``python`` (this interpreter's, or asked once)."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        from cfjax.sandbox._layers import stdlib_dirs

        return stdlib_dirs()
    code = "import json, sysconfig as s; p = s.get_paths(); print(json.dumps([p['stdlib'], p['platstdlib']]))"
    try:
        out = subprocess.run([python, "-S", "-c", code], capture_output=True, text=True, timeout=30).stdout
        return sorted({os.path.realpath(p) for p in json.loads(out)})
    except (OSError, ValueError, subprocess.SubprocessError):
        return []


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return "unknown signal"


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_reports(out_path: str, nonce: str, limit: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(started, report)``: the child's first report line when it is the ``started`` line (written
    before any candidate code: the OS layers), and its last line (the report); ``None`` where absent
    or unreadable."""
    try:
        with open(out_path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None, None
    tag = (nonce + " ").encode()
    lines = [ln[len(tag):] for ln in data.split(b"\n") if ln.startswith(tag)]
    if not lines:
        return None, None
    first = _parse_report(lines[0])
    started = first if first is not None and first["status"] == "started" else None
    return started, (first if len(lines) == 1 else _parse_report(lines[-1]))


def _parse_report(line: bytes) -> dict[str, Any] | None:
    try:
        payload = literal_eval(line.decode("utf-8", "replace"))
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


def _outcome(payload: dict[str, Any], done, user: bool = False, missing: tuple[str, ...] = ()) -> Outcome:
    out = _outcome_of(payload, done, user)
    return dataclasses.replace(out, sandbox_missing=tuple(missing)) if missing else out


def _outcome_of(payload: dict[str, Any], done, user: bool) -> Outcome:
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

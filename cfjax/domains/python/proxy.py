"""The check path of the Python world: a benchmark's own check, run as its authors wrote it,
against a candidate that cannot reach it.

HumanEvalPack (and HumanEval, MBPP-style suites, QuixBugs' generator and tolerance tests) judge a
program with *code*: a ``check(candidate)`` function of asserts with loops, helper functions,
``math.fabs``, ``abs(f(x) - y) < 1e-6`` and seeded random inputs. Such a check cannot be reduced
to literal cases (:mod:`cfjax.domains.python.cases`), and running it inside the candidate's
sandbox would hand the candidate the check (read it, skip it, patch ``AssertionError``, print a
fake report, exit early). So the world (:class:`~cfjax.domains.python.world.PytestWorld`, for a
test file of :func:`~cfjax.domains.python.cases.render_check_program`) starts two sandboxed
interpreters, each with every OS layer, resource limit and audit hook of the world, each in its
own namespaces, private root and work directory:

* the **check process** (``_harness.py`` mode ``check``) runs the task's ``prelude`` (its own code,
  e.g. HumanEvalPack's imports and ``prompt`` with the helpers a check calls, such as ``poly``),
  binds the name ``entry_point`` to a *proxy*, and runs the check code as written; it alone
  reports the verdict to the parent (its own nonce, its own report file);
* the **candidate process** (mode ``serve``) runs the task's candidate preamble (for HumanEvalPack
  the same imports and prompt, as the benchmark's program has them) and the action, then answers
  each call of the proxy.

Calls cross two pipes as *data* (``_harness._make_codec``: ``None``, ``bool``, ``int``,
``float``, ``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``; no code, no
pickle). A returned generator (or ``map``/``filter``/``zip``, a built-in iterator) is materialised
on the candidate's side, at most ``max_items`` items, and arrives in the check as a generator over
them. An exception raised by the candidate arrives as (the built-in classes it derives from, its
type name, its message) and is raised in the check as the most derived built-in class
(``except ValueError`` works; ``SystemExit``/``KeyboardInterrupt`` arrive as ``RuntimeError``).
Arguments cross by value: a check that inspects an argument the candidate changed in place sees
its own copy unchanged. Any other object (a candidate's class instance, a function) cannot cross:
the call raises ``TypeError`` in the check.

Bounds (world options): each call must return within ``call_timeout_s`` (default the world's
``timeout_s``), a check makes at most ``max_calls`` calls, a value is at most ``max_value_bytes``
encoded; the whole check has the world's ``timeout_s`` plus one second.

What is defended: the candidate never sees the check's source (it is sent to the check process on
its stdin, never written to a file, and the two processes share no directory), nor the check
process's report channel or nonce; it cannot signal, trace or read the check process (separate
PID and mount namespaces, Landlock's signal scope); it can only answer calls, so the most a
cheating candidate can do — exit, hang, flood, answer out of turn, return huge or non-plain values,
forge its own report — ends the check with a failure (score 0). What is not defended: the check
itself is the benchmark's code and is trusted to judge (it runs sandboxed, so a buggy or hostile
*check* can only fail), and the candidate learns what every caller learns: the arguments of each
call, in order.
"""

from __future__ import annotations

import marshal
import os
import secrets
import shutil
import subprocess
import tempfile
from typing import Any

from cfjax.domains.python.cases import read_check_program
from cfjax.types import Outcome

__all__ = ["run_check"]

#: extra wall-clock time of the check process beyond ``timeout_s`` (so that a call's own limit is
#: reported by the check rather than by the parent's kill)
_GRACE_S = 1.0
#: a candidate status the candidate process may report about itself (all completed, all score 0)
_CANDIDATE_STATUSES = ("syntax_error", "import_error", "memory", "forbidden")


def _argv(world, mode: str, work: str) -> list[str]:
    from cfjax.domains.python.world import _BOOT, HARNESS_PATH, _byte_compile

    _byte_compile()
    return [world.python, "-S", "-s", "-P", "-B", "-c", _BOOT, str(HARNESS_PATH.parent), mode, work,
            str(world.memory_mb * 1024 * 1024), str(world.cpu_s), str(world.fsize_bytes), str(world.nofile)]


def _sandbox_dir(scratch: str, name: str, files: dict[str, str], root_owned: bool) -> tuple[str, str]:
    """``(its scratch directory, its work directory)`` of one sandboxed process."""
    from cfjax.domains.python.world import SANDBOX_UID

    base = os.path.join(scratch, name)
    work = os.path.join(base, "work")
    os.mkdir(base, 0o700)
    os.mkdir(work, 0o700)
    os.mkdir(os.path.join(base, "root"), 0o700)
    for fname, text in files.items():
        with open(os.path.join(work, fname), "w", encoding="utf-8") as f:
            f.write(text)
    if root_owned:
        for fname in files:
            os.chown(os.path.join(work, fname), SANDBOX_UID, SANDBOX_UID)
        os.chown(work, SANDBOX_UID, SANDBOX_UID)
    return base, work


def _tail(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as f:
            text = f.read(limit + 1)[-2000:].decode("utf-8", "replace")
    except OSError:
        return ""
    return next((ln for ln in reversed(text.strip().splitlines()) if ln.strip()), "")


def run_check(world, action: str, test_src: str, done) -> Outcome:
    """Judge ``action`` with the check program ``test_src`` (module docstring); always an Outcome."""
    from cfjax.domains.python.world import _killpg, _read_reports

    prog = read_check_program(test_src)
    timeout = world.timeout_s
    call_timeout = float(world.call_timeout_s) if world.call_timeout_s is not None else timeout
    scratch = tempfile.mkdtemp(prefix="cfjax-pyk-", dir=world.scratch_root)
    procs: list[subprocess.Popen] = []
    pipe_fds: list[int] = []
    try:
        spec_on = world.isolation == "os"
        root_owned = spec_on and os.geteuid() == 0
        c_base, c_work = _sandbox_dir(scratch, "candidate", {"solution.py": action}, root_owned)
        k_base, k_work = _sandbox_dir(scratch, "check", {}, root_owned)
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        pipe_fds += [req_r, req_w, resp_r, resp_w]
        c_nonce, k_nonce = secrets.token_hex(16), secrets.token_hex(16)
        c_spec, k_spec = world._sandbox_spec(c_base, c_work), world._sandbox_spec(k_base, k_work)
        c_msg = {"nonce": c_nonce, "sandbox": c_spec, "function": prog.entry_point, "audit": world.audit_hook,
                 "fsize": world.fsize_bytes, "req_fd": req_r, "resp_fd": resp_w,
                 "max_value_bytes": world.max_value_bytes, "max_items": world.max_items,
                 "preamble": prog.preamble}
        k_msg = {"nonce": k_nonce, "sandbox": k_spec, "entry_point": prog.entry_point, "prelude": prog.prelude,
                 "test": prog.test, "req_fd": req_w, "resp_fd": resp_r, "call_timeout_s": call_timeout,
                 "ready_timeout_s": timeout, "max_calls": world.max_calls, "max_value_bytes": world.max_value_bytes}
        outs = {}
        for name, base, work, msg, fds in (("candidate", c_base, c_work, c_msg, (req_r, resp_w)),
                                           ("check", k_base, k_work, k_msg, (req_w, resp_r))):
            out_path, err_path = os.path.join(base, "stdout"), os.path.join(base, "stderr")
            outs[name] = (out_path, err_path)
            with open(out_path, "ab") as out, open(err_path, "wb") as err:
                p = subprocess.Popen(_argv(world, "serve" if name == "candidate" else "check", work),
                                     stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=work, env=world._env(work),
                                     start_new_session=True, close_fds=True, pass_fds=fds)
            procs.append(p)
            try:
                p.stdin.write(marshal.dumps(msg))
                p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        for fd in pipe_fds:
            os.close(fd)
        pipe_fds.clear()
        cand, check = procs
        finished = world._wait(check, timeout + _GRACE_S)
        for p in procs:
            _killpg(p.pid)  # not reaped yet: the group ids cannot have been reused
        for p in procs:
            p.wait()
        if not finished:
            return done(0.0, False, False, f"timed out after {timeout:g} s", "timeout")
        k_started, k = _read_reports(outs["check"][0], k_nonce, world.fsize_bytes)
        c_started, c = _read_reports(outs["candidate"][0], c_nonce, world.fsize_bytes)
        missing = _missing(world, k_started, k, c_started, c)
        out = _verdict(world, prog.entry_point, k, c, cand.returncode, check.returncode, outs, done, call_timeout)
        return Outcome(out.score, out.solved, out.completed, out.feedback, out.error, out.elapsed_s,
                       missing) if missing else out
    finally:
        for fd in pipe_fds:
            os.close(fd)
        for p in procs:
            if p.returncode is None:
                _killpg(p.pid)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
                    pass
        shutil.rmtree(scratch, ignore_errors=True)


def _missing(world, k_started, k, c_started, c) -> tuple[str, ...]:
    """The OS layers missing in either process, from the lines written before any untrusted code."""
    from cfjax.sandbox import LAYERS, missing as sandbox_missing

    if world.isolation != "os":
        return ()
    gone: set[str] = set()
    for started, last in ((k_started, k), (c_started, c)):
        rep = started if started is not None else last
        layers = rep.get("layers") if rep is not None else None
        gone.update(sandbox_missing(layers) if isinstance(layers, dict) else LAYERS)
    return tuple(name for name in LAYERS if name in gone)


def _verdict(world, entry: str, k: dict[str, Any] | None, c: dict[str, Any] | None, c_rc: int, k_rc: int,
             outs: dict, done, call_timeout: float) -> Outcome:
    from cfjax.domains.python.world import _signal_name

    user = world.feedback == "user"
    if k is None or k.get("status") == "started":
        how = f"killed by signal {-k_rc} ({_signal_name(-k_rc)})" if k_rc < 0 else f"exit status {k_rc}"
        last = _tail(outs["check"][1], world.fsize_bytes)
        return done(0.0, False, False, f"the check process ended without a verdict ({how}). {last}"[:400],
                    "harness_error")
    status = k.get("status")
    if status == "forbidden":
        return done(0.0, False, False, f"the task's check did something the sandbox forbids: {k.get('detail', '')}",
                    "harness_error")
    if status != "ok":
        return done(0.0, False, False, f"harness failure: {status}: {k.get('detail', '')}", "harness_error")
    verdict, calls = k.get("verdict"), k.get("calls")
    calls = calls if isinstance(calls, int) else 0
    last = k.get("last")
    last_text = ""
    if isinstance(last, list) and len(last) == 2 and all(isinstance(x, str) for x in last):
        last_text = f"the last call: {last[0]}" + (f" {last[1]}" if last[1] else " (no answer)")
    if verdict == "passed":
        if calls == 0:
            return done(0.0, False, False, f"the check never called `{entry}`", "no_tests")
        return done(1.0, True, True, f"the check passed ({calls} call{'s' if calls != 1 else ''} of `{entry}`)", None)
    if verdict in ("failed", "error"):
        line = k.get("line")
        at = f" at line {line} of the check" if isinstance(line, int) else ""
        if verdict == "failed":
            text = "assertion failed" + at
            assertion = str(k.get("assertion") or "")
            if assertion and not user:
                text += f": {assertion}"
        else:
            text = f"{k.get('detail', '')}" + at
        if last_text and not (verdict == "error" and last[0] in text):
            text += f"; {last_text}"
        return done(0.0, False, True, f"0 of 1 tests passed.\nFAILED check: {text}", None)
    if verdict == "candidate":
        return _candidate_outcome(world, entry, k.get("candidate"), c, c_rc, outs, done)
    return done(0.0, False, False, f"harness failure: an unknown verdict {verdict!r}", "harness_error")


def _candidate_outcome(world, entry: str, why: Any, c: dict[str, Any] | None, c_rc: int, outs: dict,
                       done) -> Outcome:
    """The check stopped because the candidate could not answer: say why (every case scores 0)."""
    from cfjax.domains.python.world import _outcome, _signal_name

    kind, detail = (why if isinstance(why, list) and len(why) == 2 else ["ended", "the candidate's process ended"])
    kind, detail = str(kind), str(detail)
    if kind.startswith("load:"):
        status = kind[5:]
        if status not in _CANDIDATE_STATUSES:
            return done(0.0, False, True, f"the candidate's process failed to start: {detail}"[:400], "crash")
        return _outcome({"status": status, "detail": detail}, done, user=world.feedback == "user")
    if kind == "timeout":
        return done(0.0, False, False, detail, "timeout")
    if kind == "calls":
        return done(0.0, False, False, f"{detail} (raise the world's max_calls)", "harness_error")
    if kind == "protocol":
        return done(0.0, False, True, detail, "crash")
    # the candidate's process ended during a call: its own report, or how it died
    if c is not None and c.get("status") in _CANDIDATE_STATUSES:
        return _outcome({"status": c["status"], "detail": str(c.get("detail", ""))}, done,
                        user=world.feedback == "user")
    import signal

    if c_rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return done(0.0, False, False, "CPU time limit exceeded", "timeout")
    if c_rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
        return done(0.0, False, True, "the candidate wrote more output than allowed", "output_limit")
    tail = _tail(outs["candidate"][1], world.fsize_bytes)
    if "MemoryError" in tail:
        return done(0.0, False, True, "MemoryError: the memory limit was exceeded", "memory")
    how = f"killed by signal {-c_rc} ({_signal_name(-c_rc)})" if c_rc < 0 else f"exit status {c_rc}"
    when = "while its program was loading" if kind == "ended_loading" else f"during a call of `{entry}`"
    return done(0.0, False, True, f"the candidate's process ended {when} ({how}). {tail}"[:400], "crash")

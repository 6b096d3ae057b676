"""The Python world under threads, and every failure an outcome (issue: "Every failure is an
outcome", "Threads").

* CPython 3.11's ``ast`` race: two threads converting parse trees at once can end one with
  ``SystemError: AST constructor recursion depth mismatch`` — seen under ``--max-inflight``.
  Every parse of the Python domain holds one lock (:mod:`cfjax.domains.python._astsafe`).
* An unexpected exception inside ``evaluate`` is an outcome naming an internal evaluator error.
* A candidate that starts a thread ends as a ``forbidden`` outcome that says so.
"""

from __future__ import annotations

import ast
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cfjax.domains.python import PyBugsSuite, _astsafe
from cfjax.sandbox import missing, probe

LAYERS_ON = not missing(probe())


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return PyBugsSuite.build(tmp_path_factory.mktemp("robust") / "suite")


class _Finalized:
    """Cyclic garbage whose finalizer runs Python code: a collection inside a parse switches threads."""

    def __del__(self):
        sum(range(50))


def _garbage():
    junk = [_Finalized() for _ in range(20)]
    for j in junk:
        j.self = j


def _race(parse, threads: int = 8, rounds: int = 60) -> int:
    src = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)] if x else {{'a': (1, 2.5, 'q')}}"
                    for i in range(60))
    errors: list[BaseException] = []

    def work():
        for _ in range(rounds):
            _garbage()
            try:
                parse(src)
            except SystemError as e:  # the race
                errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return len(errors)


def test_parses_under_the_lock_never_race():
    assert _race(_astsafe.parse) == 0
    assert _astsafe.literal_eval(" [1, (2, 'x'), {'k': None}]") == [1, (2, "x"), {"k": None}]


def test_a_mismatch_outside_the_lock_is_retried(monkeypatch):
    calls = []
    real = ast.parse

    def flaky(*a, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=18, after=12)")
        return real(*a, **kw)

    monkeypatch.setattr(_astsafe.ast, "parse", flaky)
    assert isinstance(_astsafe.parse("x = 1"), ast.Module) and len(calls) == 2


def test_many_threads_evaluating_at_once(suite):
    """16 evaluations at a time with finalizers running: every one is an outcome, none raised, and
    the verdicts are the same as one at a time."""
    world = suite.world(timeout_s=10.0)
    tasks = suite.tasks[:4]
    golds = {t.task_id: suite.answer_key(t.task_id).gold for t in tasks}

    def one(i):
        t = tasks[i % len(tasks)]
        _garbage()
        if i % 4 == 0:  # a sandboxed run
            return t.task_id, "gold", world.evaluate(t, golds[t.task_id])
        # the parent-only paths: parsed, then refused before any process starts
        action = "def unrelated(x):\n    return [x for _ in range(3)]\n" * (1 + i % 3)
        return t.task_id, "missing", world.evaluate(t, action)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with ThreadPoolExecutor(16) as ex:
            results = list(ex.map(one, range(96)))
    finally:
        sys.setswitchinterval(old)
    for tid, kind, o in results:
        if kind == "gold":
            assert o.solved, (tid, o)
        else:
            assert (o.error, o.completed) == ("missing_function", True), (tid, o)


def test_unexpected_exception_is_an_outcome(suite, monkeypatch):
    import cfjax.domains.python.world as pw

    world = suite.world()
    t = suite.tasks[0]
    gold = suite.answer_key(t.task_id).gold

    def boom(*a, **kw):
        raise SystemError("AST constructor recursion depth mismatch (before=3, after=1)")

    monkeypatch.setattr(pw, "ast_parse", boom)
    o = world.evaluate(t, gold)
    assert (o.score, o.solved, o.completed, o.error) == (0.0, False, False, "harness_error"), o
    assert o.feedback.startswith("internal evaluator error (SystemError: AST constructor"), o.feedback
    monkeypatch.undo()

    monkeypatch.setattr(world, "_run", lambda *a, **kw: 1 / 0)
    o = world.evaluate(t, gold)
    assert (o.error, o.completed) == ("harness_error", False) and "ZeroDivisionError" in o.feedback
    # a task the world does not know stays the caller's error
    monkeypatch.undo()
    with pytest.raises(ValueError, match="no answer key"):
        suite.world().__class__(suite.tests_root, {}).evaluate(t, gold)


@pytest.mark.parametrize("start", [
    "import threading\n    t = threading.Thread(target=lambda: None)\n    t.start()\n    t.join()\n",
    "from concurrent.futures import ThreadPoolExecutor\n    with ThreadPoolExecutor(2) as ex:\n"
    "        list(ex.map(abs, [1, -2]))\n",
    "import _thread\n    _thread.start_new_thread(lambda: None, ())\n",
])
def test_starting_a_thread_is_a_named_outcome(suite, start):
    t = suite.tasks[0]
    fn = t.attrs["function"]
    o = suite.world(timeout_s=5.0).evaluate(t, f"def {fn}(*a):\n    {start}    return 1\n")
    assert (o.score, o.completed, o.error) == (0.0, True, "forbidden"), o
    assert "starting a thread (threads are not available in the sandbox)" in o.feedback, o.feedback


@pytest.mark.skipif(not LAYERS_ON, reason="needs the OS layers (the sandbox's uid and RLIMIT_NPROC)")
def test_a_recreated_thread_module_cannot_start_one_either(suite):
    """``importlib`` re-creates ``_thread`` without the stub: ``RLIMIT_NPROC`` (0 for the sandbox's uid)
    refuses the thread, and the failing test says why."""
    t = suite.tasks[0]
    fn = t.attrs["function"]
    body = ("    import importlib, sys\n    sys.modules.pop('_thread', None)\n"
            "    importlib.import_module('_thread').start_new_thread(lambda: None, ())\n    return 1\n")
    o = suite.world(timeout_s=5.0).evaluate(t, f"def {fn}(*a):\n{body}")
    assert o.score == 0.0 and o.completed, o
    assert "can't start new thread (threads are not available in the sandbox)" in o.feedback, o.feedback


def test_a_death_by_signal_names_the_signal(suite):
    """An aborted process (what an opaque thread failure looked like) is a ``crash`` naming SIGABRT."""
    t = suite.tasks[0]
    fn = t.attrs["function"]
    o = suite.world(timeout_s=5.0).evaluate(t, f"import os\ndef {fn}(*a):\n    os.abort()\n")
    assert (o.score, o.completed, o.error) == (0.0, True, "crash"), o
    assert "killed by signal 6 (SIGABRT)" in o.feedback, o.feedback

"""Tests for the sandboxed Python world model (cfjax.domains.python.world)."""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from pathlib import Path

import pytest

import cfjax
from cfjax.types import AnswerKey, Task
from cfjax.domains.python import PyBugsSuite
from cfjax.domains.python.script import ERRORS
from cfjax.types import World as Evaluator
from cfjax.domains.python.edits import PythonEdits
from cfjax.domains.python.world import PytestWorld, task_test_path

PROJECT = Path(cfjax.__file__).resolve().parents[1]
GOLD = "def double(x):\n    return 2 * x\n"
TESTS = '''from solution import double


def test_one():
    assert double(1) == 2, "double(1)"


def test_zero():
    assert double(0) == 0, "double(0)"


def test_three():
    assert double(3) == 6, "double(3)"


def test_negative():
    assert double(-2) == -4, "double(-2)"
'''
# the candidate checks what it can see and answers 2x only if everything holds (the tests run in
# the parent's judgement now, so the environment is checked from the candidate's side)
ENV_ACTION = """import os
import sys


def double(x):
    problems = []
    if not set(os.environ) <= {"PATH", "LANG", "HOME", "PYTHONHASHSEED", "LC_CTYPE"}:
        problems.append("environment " + repr(sorted(os.environ)))
    if os.environ.get("HOME") != os.getcwd():
        problems.append("HOME")
    if os.environ.get("PYTHONHASHSEED") != "0" or sys.flags.hash_randomization != 0:
        problems.append("hash seed")
    if "PYTHONPATH" in os.environ:
        problems.append("PYTHONPATH")
    if sorted(os.listdir(".")) != ["solution.py"]:  # the tests are not in the sandbox
        problems.append("work directory " + repr(sorted(os.listdir("."))))
    if os.path.basename(os.getcwd()) != "work":
        problems.append("cwd")
    if sys.stdin.read() != "":
        problems.append("stdin")
    try:
        import cfjax  # noqa: F401
        problems.append("the project package is importable in the sandbox")
    except ImportError:
        pass
    if problems:
        raise AssertionError("; ".join(problems))
    return 2 * x
"""


def _tree_digest(root: Path, subdirs=("cfjax", "tests", "kernels")) -> dict[str, str]:
    out = {}
    for name in subdirs:
        base = root / name
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted(root.iterdir()):
        if p.is_file():
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("pyworld")
    tests_root = root / "tests"
    task = Task("pybugs/demo/double/000", "Return twice x.", "demo", "def double(x): ...", domain="python")
    env_task = Task("pybugs/demo/env/000", "Return twice x.", "demo", "def double(x): ...", domain="python")
    keys = {t.task_id: AnswerKey(t.task_id, GOLD, "demo") for t in (task, env_task)}
    for t, src in ((task, TESTS), (env_task, TESTS)):
        p = task_test_path(tests_root, t.task_id)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src)
    scratch = root / "scratch"
    scratch.mkdir()
    return {"root": root, "tests_root": tests_root, "task": task, "env_task": env_task, "scratch": scratch,
            "keys": keys}


@pytest.fixture(scope="module")
def world(demo):
    return PytestWorld(demo["tests_root"], demo["keys"], timeout_s=2.0, scratch_root=demo["scratch"])


@pytest.fixture(scope="module")
def pybugs(tmp_path_factory):
    return PyBugsSuite.build(tmp_path_factory.mktemp("pybugs_rt"))


# --------------------------------------------------------------------------- scoring


def test_is_an_evaluator_and_picklable(world, demo):
    assert isinstance(world, Evaluator)
    w2 = pickle.loads(pickle.dumps(world))
    assert w2.evaluate(demo["task"], GOLD).solved


def test_correct_action_scores_one(world, demo):
    o = world.evaluate(demo["task"], GOLD)
    assert (o.score, o.solved, o.completed, o.error) == (1.0, True, True, None)
    assert "all 4 tests passed" in o.feedback
    assert o.elapsed_s > 0


def test_wrong_action_scores_fraction_with_failing_names(world, demo):
    o = world.evaluate(demo["task"], "def double(x):\n    return x * x if x > 0 else 2 * x\n")
    # 1*1 != 2 fails, 0 passes, 3*3 != 6 fails, -2 → -4 passes
    assert o.completed and not o.solved and o.error is None
    assert o.score == pytest.approx(0.5)
    assert "FAILED test_one" in o.feedback and "FAILED test_three" in o.feedback
    assert "test_zero" not in o.feedback
    assert "2 * x" not in o.feedback  # never the gold


def test_crashing_actions_score_zero(world, demo):
    o = world.evaluate(demo["task"], "def double(x):\n    raise ValueError('boom')\n")
    assert o.score == 0.0 and o.completed and "ValueError: boom" in o.feedback
    o = world.evaluate(demo["task"], "def double(x) return 2 * x")
    assert (o.score, o.completed, o.error) == (0.0, True, "syntax_error")
    o = world.evaluate(demo["task"], "def triple(x):\n    return 3 * x\n")
    assert (o.score, o.error) == (0.0, "missing_function")
    o = world.evaluate(demo["task"], "raise RuntimeError('at import')\ndef double(x):\n    return 2 * x\n")
    assert (o.score, o.completed, o.error) == (0.0, True, "import_error")
    o = world.evaluate(demo["task"], "import os\ndef double(x):\n    os._exit(0)\n")
    assert (o.score, o.completed, o.error) == (0.0, True, "crash")
    o = world.evaluate(demo["task"], "x" * 200_001)
    assert (o.score, o.error) == (0.0, "too_large")


def test_rigged_equality_does_not_pass_the_suite_tests(pybugs):
    w = pybugs.world()
    k = pybugs.answer_key
    t = next(t for t in pybugs.tasks if k(t.task_id).family == "floor_division" and k(t.task_id).variant == "base")
    fn = t.attrs["function"]
    rigged = (f"class Anything:\n    def __eq__(self, other):\n        return True\n\n"
              f"def {fn}(*args):\n    return Anything()\n")
    o = w.evaluate(t, rigged)
    assert o.score == 0.0 and "object of type Anything" in o.feedback


def test_one_huge_value_costs_only_its_own_test(world, demo):
    for big in ("10 ** 5000", "'x' * 2_000_000", "[0] * 3_000_000"):
        o = world.evaluate(demo["task"], f"def double(x):\n    return {big} if x == 1 else 2 * x\n")
        assert o.completed and o.error is None, (big, o)
        assert o.score == pytest.approx(0.75), (big, o)
        assert "FAILED test_one" in o.feedback and "FAILED test_zero" not in o.feedback, o.feedback


def test_a_test_file_without_tests_is_no_tests(demo):
    empty = Task("pybugs/demo/empty/000", "Return twice x.", "demo", "def double(x): ...", domain="python")
    p = task_test_path(demo["tests_root"], empty.task_id)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("from solution import double\n")
    w = PytestWorld(demo["tests_root"], {**demo["keys"], empty.task_id: AnswerKey(empty.task_id, GOLD, "demo")},
                    scratch_root=demo["scratch"])
    o = w.evaluate(empty, GOLD)
    assert (o.score, o.completed, o.error) == (0.0, False, "no_tests")


def test_patching_builtins_does_not_change_the_verdict(world, demo):
    o = world.evaluate(demo["task"], "import builtins\ndef double(x):\n    builtins.AssertionError = KeyError\n"
                       "    builtins.isinstance = lambda *a: True\n    builtins.repr = lambda *a: 'x'\n    return x\n")
    assert o.score == pytest.approx(0.25) and not o.solved


# --------------------------------------------------------------------------- limits


def test_infinite_loop_times_out_incomplete(demo):
    w = PytestWorld(demo["tests_root"], demo["keys"], timeout_s=1.0, scratch_root=demo["scratch"])
    t0 = time.perf_counter()
    o = w.evaluate(demo["task"], "def double(x):\n    while True:\n        pass\n")
    assert time.perf_counter() - t0 < 2.0
    assert (o.score, o.solved, o.completed, o.error) == (0.0, False, False, "timeout")


def test_cpu_limit_ends_a_busy_loop(demo):
    w = PytestWorld(demo["tests_root"], demo["keys"], timeout_s=20.0, cpu_s=1, scratch_root=demo["scratch"])
    t0 = time.perf_counter()
    o = w.evaluate(demo["task"], "def double(x):\n    while True:\n        pass\n")
    assert time.perf_counter() - t0 < 4.0
    assert (o.score, o.completed, o.error) == (0.0, False, "timeout")


def test_memory_limit(world, demo):
    t0 = time.perf_counter()
    o = world.evaluate(demo["task"], "def double(x):\n    block = bytearray(10 * 1024 ** 3)\n    return 2 * x\n")
    assert time.perf_counter() - t0 < world.timeout_s
    assert (o.score, o.solved, o.completed, o.error) == (0.0, False, True, "memory")


def test_file_size_limit(world, demo):
    o = world.evaluate(demo["task"], "import os\ndef double(x):\n    os.write(2, b'x' * 3_000_000)\n    return 2 * x\n")
    # the first write fills the file up to the limit, every later one fails with EFBIG
    assert o.score < 1.0 and "File too large" in o.feedback


def test_open_file_limit(world, demo):
    o = world.evaluate(demo["task"], "def double(x):\n    fs = [open('solution.py') for _ in range(500)]\n"
                       "    return 2 * x\n")
    assert o.score == 0.0 and "Too many open files" in o.feedback


def test_environment_and_scratch_directory(world, demo):
    o = world.evaluate(demo["env_task"], ENV_ACTION)
    assert o.solved, o.feedback
    assert list(demo["scratch"].iterdir()) == []  # every scratch directory was removed


# --------------------------------------------------------------------------- malicious actions

def _attacks(test_file: Path) -> dict[str, str]:
    proj = PROJECT
    return {
        "fork_bomb": "import os\ndef double(x):\n    while True:\n        os.fork()\n",
        "os_system": f"import os\ndef double(x):\n    os.system('touch {test_file.parent}/pwned')\n    return 2 * x\n",
        "subprocess": "import subprocess\ndef double(x):\n    subprocess.run(['true'])\n    return 2 * x\n",
        "subprocess_late": "def double(x):\n    import subprocess\n    subprocess.run(['true'])\n    return 2 * x\n",
        "posix_spawn": "import os\ndef double(x):\n    os.posix_spawn('/bin/true', ['true'], {})\n    return 2 * x\n",
        "socket": "import socket\ndef double(x):\n    socket.create_connection(('127.0.0.1', 9))\n    return 2 * x\n",
        "ctypes": "def double(x):\n    import ctypes\n    return 2 * x\n",
        "kill_parent": "import os\ndef double(x):\n    os.kill(os.getppid(), 9)\n    return 2 * x\n",
        "rewrite_test_copy": "def double(x):\n    open('test_task.py', 'w').write('def test_ok():\\n    pass\\n')\n"
                             "    return 2 * x\n",
        "rewrite_suite_test": f"def double(x):\n    open({str(test_file)!r}, 'w').write('')\n    return 2 * x\n",
        "append_project_file": f"def double(x):\n    open({str(proj / 'pyproject.toml')!r}, 'a').write('')\n"
                               "    return 2 * x\n",
        "os_open_project": f"import os\ndef double(x):\n    os.open({str(proj / 'cfjax' / '__init__.py')!r}, os.O_WRONLY)\n"
                           "    return 2 * x\n",
        "pathlib_write": f"import pathlib\ndef double(x):\n    pathlib.Path({str(proj / 'x_pwned.txt')!r}).write_text('x')\n"
                         "    return 2 * x\n",
        "delete_suite_test": f"import os\ndef double(x):\n    os.remove({str(test_file)!r})\n    return 2 * x\n",
        "delete_project_file": f"import os\ndef double(x):\n    os.remove({str(proj / 'cfjax' / 'no_such_file.py')!r})\n"
                               "    return 2 * x\n",
        "rename_project_file": f"import os\ndef double(x):\n    os.rename({str(proj / 'no_such_a')!r}, "
                               f"{str(proj / 'no_such_b')!r})\n    return 2 * x\n",
        "rmtree_project": f"import shutil\ndef double(x):\n    shutil.rmtree({str(proj / 'no_such_dir')!r})\n"
                          "    return 2 * x\n",
        "chmod_suite_test": f"import os\ndef double(x):\n    os.chmod({str(test_file)!r}, 0o777)\n    return 2 * x\n",
        "tempfile": "import tempfile\ndef double(x):\n    tempfile.mkstemp()\n    return 2 * x\n",
        "chdir": "import os\ndef double(x):\n    os.chdir('/')\n    return 2 * x\n",
        "at_import_time": "import os\nos.system('true')\ndef double(x):\n    return 2 * x\n",
    }


@pytest.fixture(scope="module")
def attack_outcomes(world, demo, pybugs):
    before_project = _tree_digest(PROJECT)
    suite_files = sorted(pybugs.tests_root.rglob("*.py"))
    before_suite = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in suite_files}
    test_file = world.test_file(demo["task"])
    before_test = test_file.read_bytes()
    pw = pybugs.world()
    suite_task = pybugs.tasks[0]
    suite_test = pybugs.test_file(suite_task)
    out = {}
    for name, action in _attacks(test_file).items():
        t0 = time.perf_counter()
        out[name] = (world.evaluate(demo["task"], action), time.perf_counter() - t0)
    fn = suite_task.attrs["function"]
    for name, action in _attacks(suite_test).items():
        if "suite_test" in name:
            out["suite_" + name] = (pw.evaluate(suite_task, action.replace("double(x)", fn + "(*args)")), 0.0)
    return {"outcomes": out, "before_project": before_project, "after_project": _tree_digest(PROJECT),
            "before_suite": before_suite,
            "after_suite": {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in suite_files},
            "before_test": before_test, "after_test": test_file.read_bytes(), "test_file": test_file}


@pytest.mark.parametrize("name", sorted(_attacks(Path("/x/y.py"))))
def test_malicious_action_is_a_failed_outcome(attack_outcomes, world, name):
    o, elapsed = attack_outcomes["outcomes"][name]
    assert o.score == 0.0 and not o.solved, (name, o)
    assert o.completed and o.error == "forbidden", (name, o)
    assert elapsed < world.timeout_s, (name, elapsed)


def test_malicious_actions_against_the_suite_files(attack_outcomes):
    suite = {k: v for k, v in attack_outcomes["outcomes"].items() if k.startswith("suite_")}
    assert len(suite) == 3
    for name, (o, _) in suite.items():
        assert (o.score, o.error) == (0.0, "forbidden"), (name, o)


def test_project_and_suite_files_are_byte_identical_after_attacks(attack_outcomes):
    assert attack_outcomes["after_project"] == attack_outcomes["before_project"]
    assert attack_outcomes["after_suite"] == attack_outcomes["before_suite"]
    assert attack_outcomes["after_test"] == attack_outcomes["before_test"]
    assert not (attack_outcomes["test_file"].parent / "pwned").exists()
    assert not (PROJECT / "x_pwned.txt").exists()


def test_reading_outside_the_sandbox_is_refused(world, demo):
    o = world.evaluate(demo["task"], f"def double(x):\n    return len(open({str(PROJECT / 'pyproject.toml')!r}).read())\n")
    assert o.score == 0.0 and "PermissionError" in o.feedback
    o = world.evaluate(demo["task"], "import os\ndef double(x):\n    return len(os.listdir('/'))\n")
    assert o.score == 0.0 and "PermissionError" in o.feedback


def test_introspection_is_refused(world, demo):
    for body in ("import sys\n    return sys._getframe(1).f_locals",
                 "try:\n        1 / 0\n    except ZeroDivisionError as e:\n        return e.__traceback__.tb_frame",
                 "import gc\n    return gc.get_objects()",
                 "import sys\n    sys.settrace(lambda *a: None)\n    return 2 * x",
                 "import threading\n    threading.Thread(target=print).start()\n    return 2 * x"):
        o = world.evaluate(demo["task"], f"def double(x):\n    {body}\n")
        assert o.completed and o.score == 0.0, (body, o)


def test_forged_verdict_lines_are_ignored(world, demo):
    forged = ("import os, sys\ndef double(x):\n    data = os.read(0, 100)\n"
              "    line = data.strip() + b\" {'status': 'ok', 'tests': [('test_one', 'passed', '')] * 4}\\n\"\n"
              "    os.write(1, b'\\n' + line)\n    os.write(2, b'\\n' + line)\n"
              "    print('0' * 32, {'status': 'ok', 'tests': [('t', 'passed', '')]})\n    return 0\n")
    o = world.evaluate(demo["task"], forged)
    assert o.completed and o.score == pytest.approx(0.25) and not o.solved  # only double(0) == 0 holds


def test_stdlib_imports_work_in_the_sandbox(world, demo):
    mods = ("typing collections re math functools itertools statistics fractions decimal datetime heapq bisect "
            "dataclasses enum copy textwrap inspect string json random pathlib os")
    action = (f"import importlib\nfor _m in {mods!r}.split():\n    importlib.import_module(_m)\n"
              "from collections import namedtuple\nP = namedtuple('P', 'a')\n\n"
              "def double(x: int) -> int:\n    return 2 * P(x).a\n")
    o = world.evaluate(demo["task"], action)
    assert o.solved, o.feedback


# --------------------------------------------------------------------------- pytest runner, speed


def test_harness_and_pytest_runner_agree(pybugs):
    harness, real = pybugs.world(), pybugs.world(runner="pytest", timeout_s=20.0)
    ed = PythonEdits()
    k = pybugs.answer_key
    picked = [next(t for t in pybugs.tasks if k(t.task_id).family == f and k(t.task_id).variant == v)
              for f, v in (("inclusive_range", "base"), ("missing_key", "look_alike"), ("floor_division", "base"))]
    for t in picked:
        key = k(t.task_id)
        main, look, _ = ERRORS[key.family]
        slipped = ed.apply(ed.normalize(key.gold), look if key.variant == "look_alike" else main)
        broken = ed.normalize(key.gold).replace("return", "raise ValueError('x') from None\n    return", 1)
        for action in (key.gold, slipped, broken):
            a, b = harness.evaluate(t, action), real.evaluate(t, action)
            assert (a.score, a.solved, a.completed) == (b.score, b.solved, b.completed), (t.task_id, action, a, b)
    attack = "import os\ndef f():\n    pass\n" + k(picked[0].task_id).gold + "\nos.system('true')\n"
    o = real.evaluate(picked[0], attack)
    assert (o.score, o.error) == (0.0, "forbidden")


def test_unknown_task_raises_and_bad_config(world, demo):
    with pytest.raises(FileNotFoundError):
        world.evaluate(Task("pybugs/demo/nothing/000", "q", "demo", ""), GOLD)
    with pytest.raises(ValueError, match="no answer key"):  # a test file but no answer key
        PytestWorld(demo["tests_root"], {}, scratch_root=demo["scratch"]).evaluate(demo["task"], GOLD)
    with pytest.raises(ValueError):
        task_test_path("/tmp", "pybugs/../etc/000")
    with pytest.raises(ValueError):
        PytestWorld("/tmp", {}, runner="docker")
    assert os.path.basename(str(task_test_path("/r", "pybugs/e/f/007"))) == "test_007.py"


def test_parse_cases_forms_and_refusals():
    from cfjax.domains.python.cases import parse_cases

    src = ("from solution import f\n\ndef _check(*a):\n    pass\n\n"
           "def test_a():\n    '''doc'''\n    _check('f(1, [2])', f(1, [2]), {'k': (1, 2.5)})\n\n"
           "def test_b():\n    _check_raises('f(0)', lambda: f(0), KeyError)\n\n"
           "def test_c():\n    assert f(-1) == None, 'f(-1)'\n")
    a, b, c = parse_cases(src)
    assert (a.name, a.function, a.call, a.args, a.kind, a.want) == ("test_a", "f", "f(1, [2])", "(1, [2], )",
                                                                   "equals", {"k": (1, 2.5)})
    assert (b.kind, b.exc, b.args) == ("raises", "KeyError", "(0, )")
    assert (c.call, c.want, c.message) == ("f(-1)", None, "f(-1)")
    for bad in ("def test_x():\n    assert f(g(1)) == 2\n",  # not a literal argument
                "def test_x():\n    x = f(1)\n    assert x == 2\n",  # two statements
                "def test_x():\n    _check('f(1)', f(1), object())\n",  # not a literal expected value
                "def test_x():\n    _check_raises('f(1)', lambda: f(1), MyError)\n",  # not a built-in exception
                "def test_x():\n    assert f(1) == 2\n\ndef test_y():\n    assert g(1) == 2\n",  # two functions
                "async def test_x():\n    assert f(1) == 2\n", "def test_x(:\n"):
        with pytest.raises(ValueError):
            parse_cases(bad)
    assert parse_cases("def helper():\n    pass\n") == ()

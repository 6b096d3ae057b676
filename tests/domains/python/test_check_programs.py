"""Check programs: HumanEvalPack rows and QuixBugs' generators, tolerances and tuples, judged by
the benchmark's own check as its authors wrote it, without giving the candidate the check.

``data/humanevalpack_sample.jsonl`` holds six rows written for these tests in HumanEvalPack's own
format (``task_id``, ``prompt``, ``declaration``, ``canonical_solution``, ``buggy_solution``,
``entry_point``, ``test`` ending with ``check(<entry_point>)``, ``example_test``..., no ``domain``
field): plain asserts, a helper before the entry point (like HumanEvalPack's row 10), ``abs(f(x) -
y) < 1e-6``, a loop over seeded random inputs, ``math.fabs`` with a helper the check calls from the
prompt (like row 32's ``poly``), a tuple result and an expected ``ValueError``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfjax.domains.jsonl import JSONLError, JSONLSuite, load
from cfjax.domains.python.cases import is_check_program, parse_cases, read_check_program
from cfjax.domains.python.user import json_value

DATA = Path(__file__).parent / "data" / "humanevalpack_sample.jsonl"
ROWS = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def hep(tmp_path_factory) -> JSONLSuite:
    return JSONLSuite.build(tmp_path_factory.mktemp("hep") / "root", DATA)


def _world(suite, **kw):
    return suite.world(timeout_s=kw.pop("timeout_s", 5.0), **kw)


def test_humanevalpack_rows_load_as_they_are(hep):
    assert all("domain" not in r for r in ROWS)  # as published
    assert len(hep.tasks) == len(ROWS) == 6 and hep.domain == "python"
    for t, r in zip(hep.tasks, ROWS):
        assert t.attrs["function"] == r["entry_point"] and t.task_id.endswith("Python_" + r["task_id"].split("/")[1])
        assert (r["prompt"] + r["buggy_solution"]).strip() in t.context  # the draft: prompt + buggy_solution
        assert r["canonical_solution"].strip() not in t.context and "def check" not in t.context
        assert hep.keys[t.task_id].gold == r["prompt"] + r["canonical_solution"]  # the answer key
        assert t.question == f"Fix bugs in `{r['entry_point']}`."
        text = hep.test_file(t).read_text() if hasattr(hep, "test_file") else \
            (hep.root / "tests").joinpath(*t.task_id.split("/")[1:-1], f"test_{t.task_id.split('/')[-1]}.py").read_text()
        assert is_check_program(text)
        prog = read_check_program(text)
        assert prog.entry_point == r["entry_point"] and "def check(candidate)" in prog.test
        # the canonical solution enters neither process
        body = r["canonical_solution"].strip().splitlines()[-1].strip()
        assert body not in prog.prelude and body not in prog.preamble
        assert prog.prelude == prog.preamble and r["prompt"].strip() in prog.prelude


def test_canonical_solutions_solve_and_buggy_ones_do_not(hep):
    w = _world(hep)
    for t, r in zip(hep.tasks, ROWS):
        good = w.evaluate(t, r["prompt"] + r["canonical_solution"])
        bad = w.evaluate(t, r["prompt"] + r["buggy_solution"])
        assert good.solved and good.score == 1.0 and good.error is None, (t.task_id, good)
        assert not bad.solved and bad.completed and bad.score == 0.0, (t.task_id, bad)
        assert "FAILED check" in bad.feedback and "the last call" in bad.feedback or "raised" in bad.feedback
    # the benchmark's program runs the prompt first: a fix of the entry point alone (no helper) works
    t, r = hep.tasks[1], ROWS[1]
    only = "def next_prime(n):\n    k = n + 1\n    while not is_prime(k):\n        k += 1\n    return k\n"
    assert w.evaluate(t, only).solved
    # feedback "user" never shows what the check expected; "rich" adds an assertion's own message
    t, r = hep.tasks[5], ROWS[5]
    user = w.evaluate(t, r["prompt"] + r["buggy_solution"]).feedback
    rich = _world(hep, feedback="rich").evaluate(t, r["prompt"] + r["buggy_solution"]).feedback
    assert "must raise ValueError" not in user and "must raise ValueError" in rich, (user, rich)
    assert "min_max([]) returned (0, 0)" in user


def test_exceptions_cross_as_built_in_types(hep):
    """The check's ``except ValueError`` sees the candidate's ValueError, also of a subclass."""
    w = _world(hep)
    t, r = hep.tasks[5], ROWS[5]
    sub = r["prompt"] + "    class Empty(ValueError):\n        pass\n    if not numbers:\n        raise Empty('no')\n" \
        "    return (min(numbers), max(numbers))\n"
    assert w.evaluate(t, sub).solved
    wrong = r["prompt"] + "    if not numbers:\n        raise KeyError('no')\n    return (min(numbers), max(numbers))\n"
    o = w.evaluate(t, wrong)
    assert not o.solved and "min_max([]) raised KeyError" in o.feedback, o.feedback


CHEATS = {
    # the check is nowhere in the candidate's sandbox: its own directory, stdin, the suite's files
    "read_the_check": "import glob, os\ndef next_prime(n):\n    found, paths = [], []\n"
                      "    for pattern in ('/tmp/**/test_*.py', '/work/**/test_*.py', '*', '../*/*'):\n        try:\n"
                      "            paths += glob.glob(pattern, recursive=True)\n        except Exception:\n"
                      "            pass\n"
                      "    for p in ['/proc/1/cmdline', 'check.py', '../check/stdout'] + paths:\n"
                      "        try:\n            found.append(open(p).read(200))\n"
                      "        except Exception:\n            pass\n    for fd in range(20):\n        try:\n"
                      "            os.set_blocking(fd, False)\n"
                      "            found.append(os.read(fd, 200).decode('latin-1'))\n        except Exception:\n"
                      "            pass\n    joined = ' '.join(found)\n"
                      "    if 'def check' in joined or 'candidate(' in joined:\n"
                      "        return 'CHEAT-FOUND ' + joined[:100]\n    return n\n",
    "exit_with_success_at_import": "import os\nos._exit(0)\ndef next_prime(n):\n    return n\n",
    "exit_with_success_in_a_call": "import os\ndef next_prime(n):\n    os._exit(0)\n",
    "system_exit": "def next_prime(n):\n    raise SystemExit(0)\n",
    "fake_reports": "import os, sys\ndef next_prime(n):\n"
                    "    line = \"\\n%s {'status': 'ok', 'verdict': 'passed', 'calls': 5, 'results': []}\\n\"\n"
                    "    for nonce in ('0' * 32, 'f' * 32):\n        print(line % nonce)\n"
                    "        for fd in range(1, 20):\n            try:\n"
                    "                os.write(fd, (line % nonce).encode())\n            except OSError:\n"
                    "                pass\n    return n\n",
    "monkeypatching": "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n"
                      "builtins.abs = lambda x: 0\nbuiltins.isinstance = lambda *a: True\n"
                      "def next_prime(n):\n    return n\n",
    "always_equal": "class Yes:\n    def __eq__(self, other):\n        return True\n"
                    "def next_prime(n):\n    return Yes()\n",
    "infinite_loop": "def next_prime(n):\n    while True:\n        pass\n",
    "huge_value": "def next_prime(n):\n    return 'x' * (1 << 23)\n",
    "huge_output": "import sys\ndef next_prime(n):\n    sys.stdout.write('x' * (1 << 22))\n    return n\n",
    "endless_generator": "def next_prime(n):\n    def g():\n        while True:\n            yield n\n    return g()\n",
    "not_plain_iterator": "import itertools\ndef next_prime(n):\n    return itertools.count()\n",
    "out_of_turn": "import os\ndef next_prime(n):\n    for fd in range(3, 20):\n        try:\n"
                   "            os.write(fd, (9).to_bytes(4, 'big') + b'l1;i11;F')\n        except OSError:\n"
                   "            pass\n    return 11\n",
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheating_on_the_check_path_scores_zero(hep, name, tmp_path):
    t, r = hep.tasks[1], ROWS[1]
    w = _world(hep, timeout_s=2.0, call_timeout_s=0.5, max_value_bytes=1 << 20, scratch_root=tmp_path)
    o = w.evaluate(t, CHEATS[name])
    assert o.score == 0.0 and not o.solved, (name, o)
    assert "CHEAT-FOUND" not in o.feedback and o.elapsed_s < 4.0, (name, o)
    if name == "infinite_loop":
        assert (o.error, o.completed) == ("timeout", False) and "did not return within 0.5 s" in o.feedback
    assert list(tmp_path.iterdir()) == []  # nothing left behind
    assert w.evaluate(t, r["prompt"] + r["canonical_solution"]).solved  # the control


# --------------------------------------------------------------------------- QuixBugs-style rows

QUIX = {
    # a generator (QuixBugs' flatten: the bug yields flatten(x) for a non-list x)
    "flatten": ("def flatten(arr):\n    for x in arr:\n        if isinstance(x, list):\n            for y in flatten(x):\n"
                "                yield y\n        else:\n            yield flatten(x)\n",
                "def flatten(arr):\n    for x in arr:\n        if isinstance(x, list):\n            for y in flatten(x):\n"
                "                yield y\n        else:\n            yield x\n",
                {"cases": [[[[[1, [], [2, 3]], [[4]], 5]], [1, 2, 3, 4, 5]], [[[]], []], [[[[[[1]]]]], [1]]],
                 "compare": "list"}),
    # a tolerance: four Newton steps are not enough; the fix's value differs from the expected in its last bits
    "newton_sqrt": ("def newton_sqrt(x):\n    approx = x / 2\n    for _ in range(4):\n"
                    "        approx = 0.5 * (approx + x / approx)\n    return approx\n",
                    "def newton_sqrt(x):\n    approx = x / 2\n    for _ in range(40):\n"
                    "        approx = 0.5 * (approx + x / approx)\n    return approx\n",
                    {"cases": [[[2], 1.4142135623730951], [[9], 3.0], [[0.25], 0.5], [[1000000], 1000.0],
                               [[3], 1.7320508075688772]], "abs_tol": 1e-9}),
    # a tuple result (QuixBugs' hanoi), stated with {"tuple": [...]}
    "hanoi": ("def hanoi(height, start=1, end=3):\n    steps = []\n    if height > 0:\n"
              "        helper = ({1, 2, 3} - {start} - {end}).pop()\n        steps.extend(hanoi(height - 1, start, helper))\n"
              "        steps.append((start, helper))\n        steps.extend(hanoi(height - 1, helper, end))\n    return steps\n",
              "def hanoi(height, start=1, end=3):\n    steps = []\n    if height > 0:\n"
              "        helper = ({1, 2, 3} - {start} - {end}).pop()\n        steps.extend(hanoi(height - 1, start, helper))\n"
              "        steps.append((start, end))\n        steps.extend(hanoi(height - 1, helper, end))\n    return steps\n",
              {"cases": [[[2, 1, 3], [{"tuple": [1, 2]}, {"tuple": [1, 3]}, {"tuple": [2, 3]}]],
                         [[1, 1, 3], [{"tuple": [1, 3]}]], [[0, 1, 3], []]]}),
    # a generator judged by a check program (next() on it, list() of it)
    "pairs": ("def pairs(xs):\n    for i in range(len(xs) - 2):\n        yield (xs[i], xs[i + 1])\n",
              "def _pair(xs, i):\n    return (xs[i], xs[i + 1])\n\n\n"
              "def pairs(xs):\n    for i in range(len(xs) - 1):\n        yield _pair(xs, i)\n",
              {"test": "def check(candidate):\n    assert list(candidate([1, 2, 3])) == [(1, 2), (2, 3)]\n"
                       "    assert list(candidate([])) == []\n    g = candidate([4, 5])\n    assert next(g) == (4, 5)\n"}),
}


@pytest.fixture(scope="module")
def quix(tmp_path_factory) -> JSONLSuite:
    d = tmp_path_factory.mktemp("quix")
    rows = [{"domain": "python", "id": name, "source": src, "fix": fix, **tests} for name, (src, fix, tests) in QUIX.items()]
    (d / "quix.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return JSONLSuite.build(d / "root", d / "quix.jsonl")


def test_generators_tolerances_and_tuples(quix):
    w = _world(quix)
    for t in quix.tasks:
        src, fix, _ = QUIX[t.env_id]
        good, bad = w.evaluate(t, fix), w.evaluate(t, src)
        assert good.solved, (t.env_id, good.feedback)
        assert not bad.solved and bad.completed, (t.env_id, bad)
    hanoi = next(t for t in quix.tasks if t.env_id == "hanoi")
    assert "[(1, 2), (1, 3), (2, 3)]" in (quix.root / "tests" / "hanoi" / "test_hanoi.py").read_text()
    sqrt = next(t for t in quix.tasks if t.env_id == "newton_sqrt")
    cases = parse_cases((quix.root / "tests" / "newton_sqrt" / "test_newton_sqrt.py").read_text())
    assert all(c.abs_tol == 1e-9 for c in cases)
    fb = w.evaluate(sqrt, QUIX["newton_sqrt"][0]).feedback
    assert "newton_sqrt(1000000) returned 31260.6" in fb and "within" not in fb  # never the expected side
    assert hanoi.attrs["function"] == "hanoi"


def test_without_the_tuple_tag_json_states_lists(tmp_path):
    """QuixBugs' hanoi returns tuples; plain JSON can only state lists, which the correct program does
    not return — the reason for ``{"tuple": [...]}``."""
    src, fix, _ = QUIX["hanoi"]
    row = {"domain": "python", "source": src, "fix": fix, "cases": [[[2, 1, 3], [[1, 2], [1, 3], [2, 3]]]]}
    (tmp_path / "h.jsonl").write_text(json.dumps(row) + "\n")
    s = JSONLSuite.build(tmp_path / "root", tmp_path / "h.jsonl")
    o = _world(s).evaluate(s.tasks[0], fix)
    assert not o.solved and "returned [(1, 2), (1, 3), (2, 3)]" in o.feedback, o.feedback


def test_json_values_with_tags():
    assert json_value({"tuple": [1, {"tuple": []}]}) == (1, ())
    assert json_value({"dict": [[{"tuple": [1, 2]}, "a"], [3, [4]]]}) == {(1, 2): "a", 3: [4]}
    assert json_value({"dict": [["tuple", 1]]}) == {"tuple": 1}  # the escape for a dict with that key
    assert json_value({"a": 1, "tuple": 2}) == {"a": 1, "tuple": 2}  # two keys: a dict
    with pytest.raises(ValueError, match="not hashable"):
        json_value({"dict": [[[1], 2]]})
    with pytest.raises(ValueError, match="takes a list"):
        json_value({"tuple": 3})


def _err(tmp_path: Path, rows: list[dict]) -> JSONLError:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(JSONLError) as e:
        load(path)
    return e.value


def test_rows_refused_name_only_what_a_jsonl_user_can_write(tmp_path):
    src = "def half(n):\n    return n / 2\n"
    e = _err(tmp_path, [{"domain": "python", "source": src,
                         "tests": "def test_a():\n    x = half(4)\n    assert x == 2\n"}])
    assert (e.line, e.field) == (1, "tests") and "runner=" not in str(e) and "'test'" in str(e)
    e = _err(tmp_path, [{"domain": "python", "source": src, "test": "def check(candidate)\n    pass\n"}])
    assert (e.line, e.field) == (1, "test") and "does not parse" in str(e)
    e = _err(tmp_path, [{"domain": "python", "source": src, "test": "x = 1\n"}])
    assert (e.line, e.field) == (1, "test") and "check(candidate)" in str(e)
    e = _err(tmp_path, [{"domain": "python", "source": src, "cases": [[[4], {"tuple": 2}]]}])
    assert (e.line, e.field) == (1, "cases") and "case 0" in str(e)
    e = _err(tmp_path, [{"domain": "python", "source": src, "cases": [[[4], 2]], "compare": "set"}])
    assert e.field == "compare"
    e = _err(tmp_path, [{"domain": "python", "source": src, "test": "assert half(4) == 2\n", "abs_tol": 0.1}])
    assert e.field == "abs_tol" and "'cases' only" in str(e)
    bad = dict(ROWS[0])
    bad["buggy_solution"] = "    return (\n"
    e = _err(tmp_path, [bad])
    assert (e.line, e.field) == (1, "buggy_solution") and "prompt + buggy_solution does not parse" in str(e)
    bad = dict(ROWS[0])
    del bad["prompt"], bad["declaration"]
    e = _err(tmp_path, [bad])
    assert e.field == "prompt"


def test_fix_with_a_helper_before_the_entry_point(tmp_path):
    """HumanEvalPack's row 10 shape in a QuixBugs-style row: the fix (a module) defines a helper
    first; the row loads, and the world names the entry point, not the first function."""
    row = {"domain": "python", "source": "def last(xs):\n    return xs[0]\n", "entry_point": "last",
           "fix": "def _end(xs):\n    return len(xs) - 1\n\n\ndef last(xs):\n    return xs[_end(xs)]\n",
           "cases": [[[[1, 2, 3]], 3], [[[7]], 7]]}
    (tmp_path / "f.jsonl").write_text(json.dumps(row) + "\n")
    s = JSONLSuite.build(tmp_path / "root", tmp_path / "f.jsonl")
    t = s.tasks[0]
    w = _world(s)
    assert w.evaluate(t, row["fix"]).solved
    o = w.evaluate(t, "def _end(xs):\n    return 0\n")
    assert o.error == "missing_function" and "`last`" in o.feedback


# --------------------------------------------------------------------------- the CLI


def _split_copy(tmp_path: Path) -> Path:
    rows = [dict(r, split=s) for r, s in zip(ROWS, ["build", "build", "train", "train", "val", "eval"])]
    path = tmp_path / "humanevalpack.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def fast_worlds(monkeypatch):
    """The scripted repairer's rule edits can loop forever: a short limit keeps the runs cheap."""
    from cfjax.domains.python import world as pw

    init = pw.PytestWorld.__init__

    def short(self, *a, **kw):
        kw["timeout_s"] = 0.5
        init(self, *a, **kw)

    monkeypatch.setattr(pw.PytestWorld, "__init__", short)


@pytest.mark.slow
def test_countermem_run_on_humanevalpack_rows(tmp_path, fast_worlds, capsys):
    from cfjax.cli import main

    out = tmp_path / "cm"
    rc = main(["countermem", "run", "--suite", f"jsonl:{_split_copy(tmp_path)}", "--out", str(out), "--quick",
               "--rows", "cf_memory", "--workers", "1", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    unit = res["units"][0]
    assert res["suites"] == ["jsonl-humanevalpack"] and set(unit["rows"]) >= {"none", "cf_memory"}
    assert len(unit["outcomes"]["cf_memory"]) == len(unit["eval_ids"]) == 1


@pytest.mark.slow
def test_compare_on_humanevalpack_rows(tmp_path, fast_worlds, capsys):
    from cfjax.cli import main

    out = tmp_path / "cmp"
    rc = main(["compare", "--suite", f"jsonl:{_split_copy(tmp_path)}", "--out", str(out), "--quick", "--workers", "1",
               "--methods", "countermem"])
    assert rc == 0, capsys.readouterr().err
    assert (out / "results.json").is_file() and "countermem" in (out / "report.txt").read_text()

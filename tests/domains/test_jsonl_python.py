"""``--suite jsonl:PATH`` with QuixBugs-style Python rows (issue 14).

The tests write QuixBugs' layout themselves: one buggy program per file under
``python_programs/``, input/output cases as ``[[args...], expected]`` pairs (QuixBugs'
``json_testcases``), or a test file of asserts; the fix is optional. They check loading, the test
files the suite renders, the world's verdicts on the buggy and the fixed program, the
gold-free repairer, and one malformed-line case per Python field.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cfjax.config import ScriptedConfig
from cfjax.domains import build_suite, open_suite, register_jsonl, suite_base
from cfjax.domains.jsonl import JSONLError, JSONLSuite, load
from cfjax.domains.python.user import UserPyScript

# (buggy program, its fix, cases): one-token bugs of the kinds QuixBugs collects
PROGRAMS = {
    "count_at_least": ("def count_at_least(xs, k):\n    total = 0\n    for x in xs:\n        if x > k:\n"
                       "            total += 1\n    return total\n",
                       "def count_at_least(xs, k):\n    total = 0\n    for x in xs:\n        if x >= k:\n"
                       "            total += 1\n    return total\n",
                       [[[[1, 2, 3], 2], 2], [[[5, 5], 5], 2], [[[], 1], 0], [[[0, 9], 3], 1]]),
    "sum_to": ("def sum_to(n):\n    total = 0\n    for i in range(1, n):\n        total += i\n    return total\n",
               "def sum_to(n):\n    total = 0\n    for i in range(1, n + 1):\n        total += i\n    return total\n",
               [[[3], 6], [[1], 1], [[0], 0], [[5], 15]]),
    "last_two": ("def last_two(xs):\n    return xs[:2]\n", "def last_two(xs):\n    return xs[-2:]\n",
                 [[[[1, 2, 3]], [2, 3]], [[[1, 2]], [1, 2]], [[[4, 5, 6, 7]], [6, 7]]]),
    "half": ("def half(n):\n    return n / 2\n", "def half(n):\n    return n // 2\n", [[[4], 2], [[5], 2], [[0], 0]]),
}


def write_quixbugs(d: Path, *, with_fix: bool = True) -> Path:
    """``python_programs/<name>.py`` and ``quixbugs.jsonl``: three rows per program (cases in two orders);
    ``last_two`` is tested through a test file of asserts instead of inline cases."""
    (d / "python_programs").mkdir(parents=True, exist_ok=True)
    (d / "python_testcases").mkdir(exist_ok=True)
    rows = []
    for name, (src, fix, cases) in sorted(PROGRAMS.items()):
        (d / "python_programs" / f"{name}.py").write_text(src)
        for rep in range(3):
            row = {"domain": "python", "id": f"{name}_{rep}", "source_path": f"python_programs/{name}.py"}
            if name == "last_two":
                tests = "".join(f"\n\ndef test_{i}():\n    assert last_two({args[0]!r}) == {want!r}\n"
                                for i, (args, want) in enumerate(cases))
                (d / "python_testcases" / "test_last_two.py").write_text("from solution import last_two\n" + tests)
                row["tests_path"] = "python_testcases/test_last_two.py"
            else:
                row["cases"] = cases if rep % 2 == 0 else cases[::-1]
            if with_fix and rep == 0:  # rows with the same program and fix are twins: they split together
                row["fix"] = fix
            rows.append(row)
    path = d / "quixbugs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> JSONLSuite:
    d = tmp_path_factory.mktemp("quixbugs")
    name = register_jsonl(f"jsonl:{write_quixbugs(d)}")
    build_suite(name, d / "root")
    return open_suite(name, d / "root")


def test_quixbugs_rows_load_as_a_suite(suite):
    assert suite.name == "jsonl-quixbugs" and suite.domain == "python" and suite.base == "pybugs"
    assert suite_base(suite.name) == "pybugs"  # the CLI's sandbox policy for generated code applies
    assert len(suite.tasks) == 12
    t = next(t for t in suite.tasks if t.task_id == "jsonl-quixbugs/sum_to/sum_to_0")
    assert t.env_id == "sum_to" and t.domain == "python"
    assert "range(1, n)" in t.context and "n + 1" not in t.context  # the buggy program, never the fix
    assert t.attrs["function"] == "sum_to" and t.attrs["params"] == ("n",)
    test_file = suite.root / "tests" / "sum_to" / "test_sum_to_0.py"
    assert "_check('sum_to(5)', sum_to(5), 15)" in test_file.read_text()
    sp = suite.splits(seed=3)
    assert all(len(getattr(sp, s)) > 0 for s in ("build", "train", "val", "eval"))


def test_world_judges_the_cases(suite):
    w = suite.world(isolation="audit")
    by_id = {t.task_id: t for t in suite.tasks}
    for name, (src, fix, cases) in PROGRAMS.items():
        t = by_id[f"jsonl-quixbugs/{name}/{name}_0"]
        bad, good = w.evaluate(t, src), w.evaluate(t, fix)
        assert good.solved and good.score == 1.0, (name, good.feedback)
        assert not bad.solved and 0.0 <= bad.score < 1.0, (name, bad.feedback)
        assert "expected" not in bad.feedback  # user feedback: the action's own results only


def test_repairer_never_reads_the_fix(suite, tmp_path):
    """The gold-free repairer holds the buggy programs only: the same drafts with or without fixes."""
    sd = suite.scripted_domain()
    assert isinstance(sd, UserPyScript) and not hasattr(sd, "_keys")
    other = JSONLSuite.build(tmp_path / "root", write_quixbugs(tmp_path, with_fix=False), label=suite.name)
    assert not any(k.gold for k in other.keys.values())
    od, cfg = other.scripted_domain(), ScriptedConfig()
    for t, u in zip(suite.tasks, other.tasks):
        for attempt in range(2):
            assert sd.draft(t, attempt, random.Random(attempt), cfg) == od.draft(u, attempt, random.Random(attempt), cfg)
    assert sd.true_fixes(suite.tasks[0], PROGRAMS["count_at_least"][0]) == {}
    # a draft is the program with one rule edit: a repair the world can check
    t = next(t for t in suite.tasks if t.env_id == "sum_to")
    drafts = {sd.draft(t, a, random.Random(a), cfg) for a in range(40)}
    assert "def sum_to(n):\n    total = 0\n    for i in range(1, n + 1):\n        total += i\n    return total" in drafts


def test_repairer_runs_under_the_answer_key_guard(suite):
    """The repairer's module is marked agent-side: the guard watches it under ``cfjax.domains``."""
    import cfjax.domains.python.user_draft as mod
    from cfjax.types import AGENT_SIDE_MARKER, answer_key_guard

    assert getattr(mod, AGENT_SIDE_MARKER) is True and UserPyScript.__module__ == mod.__name__
    sd, cfg = suite.scripted_domain(), ScriptedConfig()
    with answer_key_guard():
        for t in suite.tasks:
            for attempt in range(2):
                d = sd.draft(t, attempt, random.Random(attempt), cfg)
            assert sd.true_fixes(t, d) == {}
            sd.broad_condition(t, random.Random(0))


# --------------------------------------------------------------------------- malformed lines


def _row(**kw) -> dict:
    return {"domain": "python", "source": PROGRAMS["half"][0], "cases": PROGRAMS["half"][2]} | kw


def _err(tmp_path: Path, rows: list[dict]) -> JSONLError:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(JSONLError) as e:
        load(path)
    return e.value


def test_error_missing_source(tmp_path):
    e = _err(tmp_path, [_row(), {"domain": "python", "cases": [[[1], 1]]}])
    assert (e.line, e.field) == (2, "source")


def test_error_missing_source_file(tmp_path):
    row = _row()
    del row["source"]
    row["source_path"] = "python_programs/nope.py"
    e = _err(tmp_path, [row])
    assert (e.line, e.field) == (1, "source_path") and "source file not found" in str(e)


def test_error_program_does_not_parse(tmp_path):
    e = _err(tmp_path, [_row(id="a"), _row(id="b", source="def half(n)\n    return n\n")])
    assert (e.line, e.field) == (2, "source") and "does not parse" in str(e)


def test_error_unknown_entry_point(tmp_path):
    e = _err(tmp_path, [_row(entry_point="third")])
    assert (e.line, e.field) == (1, "entry_point")


def test_error_missing_tests(tmp_path):
    row = _row()
    del row["cases"]
    e = _err(tmp_path, [row])
    assert (e.line, e.field) == (1, "cases") and "tests_path" in str(e)


def test_error_missing_tests_file(tmp_path):
    row = _row()
    del row["cases"]
    row["tests_path"] = "python_testcases/test_half.py"
    e = _err(tmp_path, [row])
    assert (e.line, e.field) == (1, "tests_path") and "tests file not found" in str(e)


def test_error_bad_case_shape(tmp_path):
    e = _err(tmp_path, [_row(id="a"), _row(id="b"), _row(id="c", cases=[[[4], 2], [4, 2, 1]])])
    assert (e.line, e.field) == (3, "cases") and "case 1" in str(e)


def test_error_tests_not_judgeable(tmp_path):
    e = _err(tmp_path, [_row(cases=None, tests="def test_a():\n    x = half(4)\n    assert x == 2\n")])
    assert (e.line, e.field) == (1, "tests") and "not a case" in str(e)


def test_error_tests_call_another_function(tmp_path):
    e = _err(tmp_path, [_row(cases=None, tests="def test_a():\n    assert double(4) == 8\n")])
    assert (e.line, e.field) == (1, "tests") and "entry point 'half'" in str(e)


def test_error_duplicate_ids(tmp_path):
    e = _err(tmp_path, [_row(id="x"), _row(id="y"), _row(id="x")])
    assert (e.line, e.field) == (3, "id") and "also on line 1" in str(e)


def test_error_fix_does_not_define_the_entry_point(tmp_path):
    e = _err(tmp_path, [_row(fix="def third(n):\n    return n // 2\n")])
    assert (e.line, e.field) == (1, "fix") and "'half'" in str(e)
    e = _err(tmp_path, [_row(fix="def half(n)\n    return n // 2\n")])
    assert (e.line, e.field) == (1, "fix") and "does not parse" in str(e)

"""The worlds' ``feedback`` option: ``"user"`` (default) says what a user-facing evaluator would —
error text, pass/fail, the action's own results, the stated requirements it violates — and never a
statistic or value of the gold; ``"rich"`` keeps the diagnostic text; the score never changes.

Each domain builds a case where the rich text *does* state gold information (the expected row count
and overlap, the tests' expected values, "the problem has a solution" and the verifier's check count)
and checks that the user text does not.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from cfjax.types import AnswerKey, Outcome, Task
from cfjax.domains.python import PyBugsSuite
from cfjax.domains.python.edits import PythonEdits
from cfjax.domains.python.script import ERRORS
from cfjax.domains.python.tasks import _TEST_HEADER, REPOS, make_specs, render_tests
from cfjax.domains.python.world import PytestWorld, task_test_path, user_message
from cfjax.domains.sat import SATSuite
from cfjax.domains.sat.sat_world import SATInstance, SATWorld, SatSmtWorld
from cfjax.domains.sat.smt_world import SMTInstance, SMTWorld
from cfjax.domains.sql.world import SQLWorld


def _same_verdict(user: Outcome, rich: Outcome) -> None:
    """The option changes the text only."""
    assert (user.score, user.solved, user.completed, user.error) == (rich.score, rich.solved, rich.completed,
                                                                      rich.error)


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+", text))


# --------------------------------------------------------------------------- SQL

SQL_GOLD = "SELECT name FROM people WHERE age >= 40"
SQL_KEYS = {
    "t/at_least": AnswerKey("t/at_least", SQL_GOLD),
    "t/ordered": AnswerKey("t/ordered", "SELECT id FROM people ORDER BY id", ordered=True),
}


def _sql_task(task_id: str) -> Task:
    return Task(task_id, "q", "hr", "people(id, name, age)")


@pytest.fixture(scope="module")
def sql_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fb_sql") / "hr.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, age INTEGER)")
    conn.executemany("INSERT INTO people VALUES (?, ?, ?)", [(i, f"P{i}", 20 + i) for i in range(1, 31)])
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def sql_worlds(sql_db):
    user = SQLWorld({"hr": sql_db}, SQL_KEYS)
    rich = SQLWorld({"hr": sql_db}, SQL_KEYS, feedback="rich")
    yield user, rich
    user.close()
    rich.close()


def test_sql_user_feedback_hides_expected_row_count_and_overlap(sql_worlds):
    user_w, rich_w = sql_worlds
    assert user_w.feedback == "user"  # the default
    task = _sql_task("t/at_least")
    n_exp = len(rich_w.reference_rows(task))  # ages 40..50: 11 rows
    action = "SELECT name FROM people WHERE age > 45"  # 5 rows, all of them expected
    user, rich = user_w.evaluate(task, action), rich_w.evaluate(task, action)
    _same_verdict(user, rich)
    assert 0 < rich.score < 1 and not rich.solved
    n_got = 5
    # today's rich text states the gold's statistics ...
    assert f"the expected result has {n_exp} rows" in rich.feedback and f"{n_got} rows overlap" in rich.feedback
    assert f"{n_exp - n_got} expected rows missing" in rich.feedback
    # ... the user text only the verdict and the query's own result shape
    assert user.feedback == ("Incorrect: the result is not what was asked. "
                             f"Your query returned {n_got} rows with 1 column.")
    assert _numbers(user.feedback) == {str(n_got), "1"}
    assert str(n_exp) not in user.feedback and str(n_exp - n_got) not in user.feedback
    for word in ("expected", "overlap", "missing", "match"):
        assert word not in user.feedback.lower()


def test_sql_user_feedback_is_one_verdict_whatever_the_mismatch(sql_worlds):
    """Wrong columns, extra rows and a wrong order read alike: the kind of mismatch is gold information."""
    user_w, rich_w = sql_worlds
    cases = [
        (_sql_task("t/at_least"), "SELECT name, age FROM people WHERE age >= 40", "expected 1"),  # columns
        (_sql_task("t/at_least"), "SELECT name FROM people", "11 rows overlap"),  # a superset
        (_sql_task("t/ordered"), "SELECT id FROM people ORDER BY id DESC", "order differs"),  # right rows
    ]
    for task, action, rich_says in cases:
        user, rich = user_w.evaluate(task, action), rich_w.evaluate(task, action)
        _same_verdict(user, rich)
        assert rich_says in rich.feedback, rich.feedback
        assert user.feedback.startswith("Incorrect: the result is not what was asked. Your query returned ")
        for word in ("expected", "overlap", "order", "column count", "match"):
            assert word not in user.feedback.lower(), (action, user.feedback)
    # the right rows in the wrong order keep their score (0.5) — only the text is neutral
    assert user_w.evaluate(_sql_task("t/ordered"), "SELECT id FROM people ORDER BY id DESC").score == 0.5


def test_sql_errors_and_success_read_the_same_in_both_modes(sql_worlds):
    user_w, rich_w = sql_worlds
    task = _sql_task("t/at_least")
    for action in ("SELECT nope FROM people", "DELETE FROM people", "SELECT 1; SELECT 2"):
        user, rich = user_w.evaluate(task, action), rich_w.evaluate(task, action)
        _same_verdict(user, rich)
        assert user.feedback == rich.feedback and user.error is not None
    assert user_w.evaluate(task, "SELECT nope FROM people").feedback == "SQL error: no such column: nope"
    ok = user_w.evaluate(task, "SELECT name FROM people WHERE age > 39")
    assert ok.solved and ok.feedback == "Correct: the query returns the requested result (11 rows)."


def test_sql_option_is_validated_and_passed_through(sql_db, suite):
    with pytest.raises(ValueError, match="feedback"):
        SQLWorld({"hr": sql_db}, SQL_KEYS, feedback="verbose")
    with pytest.raises(ValueError, match="feedback"):
        suite.world(feedback="gold")
    for mode in ("user", "rich"):
        w = suite.world(feedback=mode, timeout_s=1.0)
        assert (w.feedback, w.timeout_s) == (mode, 1.0)
        w.close()
    w = suite.world()
    assert w.feedback == "user"
    w.close()


# --------------------------------------------------------------------------- Python

PY_TESTS = _TEST_HEADER.format(fn="total", task_id="pybugs/fb/total/000") + '''

def test_two_items():
    _check("total({'bolt': 30, 'nut': 7})", total({'bolt': 30, 'nut': 7}), 37)


def test_empty_is_an_error():
    _check_raises('total({})', lambda: total({}), KeyError)


def test_single():
    _check("total({'hinge': 4})", total({'hinge': 4}), 4)


def test_crash():
    _check("total({'x': -1})", total({'x': -1}), 0)
'''
PY_GOLD = ("def total(stock):\n    if not stock:\n        raise KeyError('empty')\n"
           "    return sum(max(v, 0) for v in stock.values())\n")
PY_WRONG = ("def total(stock):\n    if any(v < 0 for v in stock.values()):\n        raise ValueError('negative')\n"
            "    return max(stock.values(), default=0)\n")


@pytest.fixture(scope="module")
def py_demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("fb_py")
    task = Task("pybugs/fb/total/000", "Return the total stock.", "fb", "def total(stock): ...", domain="python")
    p = task_test_path(root / "tests", task.task_id)
    p.parent.mkdir(parents=True)
    p.write_text(PY_TESTS)
    keys = {task.task_id: AnswerKey(task.task_id, PY_GOLD, "demo")}
    return root, task, keys


def test_python_user_feedback_hides_the_tests_expected_values(py_demo):
    root, task, keys = py_demo
    user_w = PytestWorld(root / "tests", keys, scratch_root=root)
    rich_w = PytestWorld(root / "tests", keys, scratch_root=root, feedback="rich")
    assert user_w.feedback == "user" and user_w.evaluate(task, PY_GOLD).solved
    user, rich = user_w.evaluate(task, PY_WRONG), rich_w.evaluate(task, PY_WRONG)
    _same_verdict(user, rich)
    assert user.score == pytest.approx(0.25)
    # rich: the hidden tests' expected values (the gold function's outputs)
    assert "returned 30, expected 37" in rich.feedback and "returned 0, expected KeyError" in rich.feedback
    # user: the same failing tests, calls and the action's own values/exceptions only
    assert user.feedback.splitlines() == [
        "1 of 4 tests passed.",
        "FAILED test_two_items: total({'bolt': 30, 'nut': 7}) returned 30",
        "FAILED test_empty_is_an_error: total({}) returned 0",
        "FAILED test_crash: ValueError: negative",
    ]
    assert "37" not in user.feedback and "KeyError" not in user.feedback and "expected" not in user.feedback


def test_python_user_feedback_on_a_suite_task(tmp_path):
    """A real pybugs task and the family's slip: the user text is the rich text minus every expected value."""
    tid, spec = next((tid, sp) for tid, sp in make_specs(REPOS[0], 0)
                     if sp.family == "lower_bound" and sp.variant == "base")
    root = tmp_path
    p = task_test_path(root, tid)
    p.parent.mkdir(parents=True)
    p.write_text(render_tests(spec, tid))
    task = Task(tid, spec.question, tid.split("/")[1], spec.signature, domain="python")
    keys = {tid: AnswerKey(tid, spec.gold, spec.family, spec.variant)}
    ed = PythonEdits()
    slipped = ed.apply(ed.normalize(spec.gold), ERRORS[spec.family][0])
    user = PytestWorld(root, keys, scratch_root=root).evaluate(task, slipped)
    rich = PytestWorld(root, keys, scratch_root=root, feedback="rich").evaluate(task, slipped)
    _same_verdict(user, rich)
    assert 0 < user.score < 1 and ", expected " in rich.feedback
    assert "expected" not in user.feedback
    assert user.feedback.splitlines() == [ln.split(", expected ", 1)[0] for ln in rich.feedback.splitlines()]


def test_python_user_message_cuts_expected_values():
    assert user_message("failed", "f(1) returned 2, expected 3") == "f(1) returned 2"
    assert user_message("failed", "AssertionError: f(1) returned 2, expected 3") == "f(1) returned 2"  # pytest runner
    assert user_message("failed", "assert 2 == 3") == "assertion failed"  # pytest's introspection
    assert user_message("failed", "") == "assertion failed"
    assert user_message("error", "ValueError: boom") == "ValueError: boom"
    assert user_message("memory", "MemoryError") == "MemoryError"


def test_python_option_is_validated_and_passed_through(py_demo, tmp_path):
    root, _, keys = py_demo
    with pytest.raises(ValueError, match="feedback"):
        PytestWorld(root / "tests", keys, feedback="all")
    empty = PyBugsSuite(tmp_path, (), {})
    assert empty.world().feedback == "user"
    w = empty.world(feedback="rich", timeout_s=3.0)
    assert (w.feedback, w.timeout_s) == ("rich", 3.0)
    with pytest.raises(ValueError, match="feedback"):
        empty.world(feedback="")


# --------------------------------------------------------------------------- SAT / SMT

ROSTER = SATInstance("ros", "roster", {"STAFF": ("ann", "bob", "cy"), "DAYS": ("mon", "tue"),
                                       "SHIFTS": ("mon_am", "mon_pm", "tue_am", "tue_pm")},
                     {"w": ("STAFF", "SHIFTS")},
                     families={"SHIFTS_ON": {"mon": ("mon_am", "mon_pm"), "tue": ("tue_am", "tue_pm")}},
                     data={"var": "w", "staff": "STAFF", "shifts": "SHIFTS", "days": "DAYS", "shifts_on": "SHIFTS_ON"})
ROSTER_GOLD = ("each s in SHIFTS: atleast 2 of w[p,s] for p in STAFF\n"
               "each p in STAFF: atmost 3 of w[p,s] for s in SHIFTS\n"
               "w[ann,mon_am]")
PROJ = SMTInstance("proj", "schedule", (("dig", 3), ("pour", 2), ("frame", 4)), 12)
SMT_GOLD = "(assert (> s_pour e_dig))\n(assert (< e_frame 9))"
SAT_RULES = {
    "t/ros": [{"rule": "staffing", "op": ">=", "k": 2}, {"rule": "load", "op": "<=", "k": 3},
              {"rule": "assign", "who": "ann", "shift": "mon_am", "value": True}],
    "t/proj": [{"rule": "after", "job": "pour", "prev": "dig", "gap": 1},
               {"rule": "deadline", "job": "frame", "day": 9, "strict": True}],
}
T_ROS = Task("t/ros", "Every shift needs at least 2 staff; nobody works more than 3 shifts; ann works mon_am.",
             "ros", "", domain="sat")
T_PROJ = Task("t/proj", "pour starts strictly after dig ends; frame ends before day 9.", "proj", "", domain="smt")


@pytest.fixture(scope="module")
def sat_worlds():
    insts = {"ros": ROSTER, "proj": PROJ}
    return SatSmtWorld(insts, SAT_RULES, timeout_s=2.0), SatSmtWorld(insts, SAT_RULES, timeout_s=2.0, feedback="rich")


def _failed_list(text: str) -> set[str]:
    return set(text.rsplit(": ", 1)[-1].rstrip(".").split("; ")) if ": " in text else set()


def test_sat_user_feedback_names_violated_requirements_only(sat_worlds):
    user_w, rich_w = sat_worlds
    assert user_w.sat.feedback == user_w.smt.feedback == "user"
    weak = ROSTER_GOLD.replace("atleast 2", "atleast 1")
    user, rich = user_w.evaluate(T_ROS, weak), rich_w.evaluate(T_ROS, weak)
    _same_verdict(user, rich)
    assert 0 < user.score < 1
    total = 4 + 3 + 1  # grounded checks: one per shift, one per person, the booking
    m = re.search(r"passes only (\d+) of (\d+) checks", rich.feedback)
    assert m and m.group(2) == str(total) and "lexicographically" in rich.feedback
    n_failed = total - int(m.group(1))
    assert user.feedback.startswith(f"The encoding is satisfiable, but a solution it admits violates {n_failed} "
                                    "stated requirement")
    assert "checks" not in user.feedback and "lexicographically" not in user.feedback
    assert str(total) not in user.feedback
    # the same requirements are named, in the question's terms
    assert _failed_list(user.feedback) == set(rich.feedback.split("Failed: ", 1)[1].rstrip(".").split("; "))
    assert all("at least 2 staff" in r for r in _failed_list(user.feedback))


def test_sat_and_smt_unsat_does_not_say_the_problem_has_a_solution(sat_worlds):
    user_w, rich_w = sat_worlds
    for task, action in ((T_ROS, ROSTER_GOLD.replace("atmost 3", "atmost 1")),  # too strong: unsatisfiable
                         (T_ROS, ROSTER_GOLD + "\natleast 5 of w[ann,mon_am], w[bob,mon_am]"),  # trivially
                         (T_PROJ, SMT_GOLD + "\n(assert (< e_frame 4))")):
        user, rich = user_w.evaluate(task, action), rich_w.evaluate(task, action)
        _same_verdict(user, rich)
        assert user.score == 0.0 and user.completed and user.error is None
        assert "has a solution" in rich.feedback and "too strong" in rich.feedback
        assert user.feedback.startswith("The encoding is unsatisfiable")
        assert "solution" not in user.feedback.split(":", 1)[1] and "too strong" not in user.feedback


def test_smt_user_feedback_names_violated_requirements_only(sat_worlds):
    user_w, rich_w = sat_worlds
    weak = SMT_GOLD.replace("(> s_pour", "(>= s_pour")
    user, rich = user_w.evaluate(T_PROJ, weak), rich_w.evaluate(T_PROJ, weak)
    _same_verdict(user, rich)
    assert "earliest" in rich.feedback and "passes only 1 of 2 checks" in rich.feedback
    assert user.feedback == ("The encoding is satisfiable, but a schedule it admits violates 1 stated requirement: "
                             "pour starts strictly after dig ends.")


def test_sat_smt_errors_and_success(sat_worlds):
    user_w, rich_w = sat_worlds
    for task, action in ((T_ROS, "w[zed,mon_am]"), (T_ROS, "each s in NOPE: w[ann,s]"),
                         (T_PROJ, "(assert (> s_nope 1))"), (T_PROJ, "(set-option :x 1)")):
        user, rich = user_w.evaluate(task, action), rich_w.evaluate(task, action)
        _same_verdict(user, rich)
        assert user.feedback == rich.feedback and user.error in ("parse_error", "forbidden")
    ok = user_w.evaluate(T_ROS, ROSTER_GOLD)
    assert ok.solved and ok.feedback == "Solved: the decoded solution meets every stated requirement."
    ok = user_w.evaluate(T_PROJ, SMT_GOLD)
    assert ok.solved and ok.feedback == "Solved: the decoded schedule meets every stated requirement."
    assert "passes all" in rich_w.evaluate(T_PROJ, SMT_GOLD).feedback


def test_sat_option_is_validated_and_passed_through(tmp_path):
    for make in (lambda fb: SATWorld({"ros": ROSTER}, SAT_RULES, feedback=fb),
                 lambda fb: SMTWorld({"proj": PROJ}, SAT_RULES, feedback=fb),
                 lambda fb: SatSmtWorld({"ros": ROSTER, "proj": PROJ}, SAT_RULES, feedback=fb)):
        with pytest.raises(ValueError, match="feedback"):
            make("Rich")
        assert make("rich").feedback == "rich"
    empty = SATSuite(tmp_path, {}, (), {}, {})
    w = empty.world(feedback="rich", timeout_s=1.5)
    assert (w.sat.feedback, w.smt.feedback, w.smt.timeout_s) == ("rich", "rich", 1.5)
    assert empty.world().sat.feedback == "user"
    with pytest.raises(ValueError, match="feedback"):
        empty.world(feedback=None)

"""Tests for the SAT and SMT world models (cfjax.domains.sat.sat_world / .smt) and their edit models (.sat_edits)."""

from __future__ import annotations

import dataclasses
import pickle
import time

import pytest

from cfjax.types import Task
from cfjax.types import World as Evaluator
from cfjax.types import EditError
from cfjax.domains.sat.sat_world import SATInstance, SATWorld, SatSmtWorld, parse_line, parse_program, print_line
from cfjax.domains.sat.edits import SATEdits, SatSmtEdits, SMTEdits, is_smt
from cfjax.domains.sat.smt_world import SMTInstance, SMTWorld, read_sexprs

# --------------------------------------------------------------------------- fixtures

REGIONS = ("a", "b", "c", "d", "e", "f")
BORDERS = (("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("f", "a"), ("a", "d"))
MAP = SATInstance("map", "colouring", {"REGIONS": REGIONS, "COLOURS": ("red", "green", "blue"), "BORDERS": BORDERS},
                  {"x": ("REGIONS", "COLOURS")},
                  data={"var": "x", "regions": "REGIONS", "colours": "COLOURS", "borders": "BORDERS"})
ROSTER = SATInstance("ros", "roster", {"STAFF": ("ann", "bob", "cy"), "DAYS": ("mon", "tue"),
                                       "SHIFTS": ("mon_am", "mon_pm", "tue_am", "tue_pm")},
                     {"w": ("STAFF", "SHIFTS")},
                     families={"SHIFTS_ON": {"mon": ("mon_am", "mon_pm"), "tue": ("tue_am", "tue_pm")}},
                     data={"var": "w", "staff": "STAFF", "shifts": "SHIFTS", "days": "DAYS", "shifts_on": "SHIFTS_ON"})
N_PIG = 13
PHP = SATInstance("php", "generic",
                  {"P": tuple(f"p{i}" for i in range(N_PIG)), "H": tuple(f"h{i}" for i in range(N_PIG - 1))},
                  {"p": ("P", "H")})
PROJ = SMTInstance("proj", "schedule", (("dig", 3), ("pour", 2), ("frame", 4), ("wire", 2), ("paint", 2)), 12)

MAP_GOLD = "each v in REGIONS: exactly 1 of x[v,c] for c in COLOURS\n" \
           "each (u,v) in BORDERS, c in COLOURS: ~x[u,c] | ~x[v,c]\n" \
           "x[a,red]"
ROSTER_GOLD = "each s in SHIFTS: atleast 1 of w[p,s] for p in STAFF\n" \
              "each p in STAFF, d in DAYS: atmost 1 of w[p,s] for s in SHIFTS_ON[d]\n" \
              "each s in SHIFTS: w[cy,s] => w[ann,s]\n" \
              "each s in {mon_am, tue_pm}: w[cy,s]"
SMT_GOLD = "(assert (> s_pour e_dig))\n(assert (< e_frame 9))\n(assert (or (<= e_wire s_paint) (<= e_paint s_wire)))"

RULES = {
    "t/map": [{"rule": "colours_per_region", "op": "==", "k": 1}, {"rule": "proper"},
              {"rule": "paint", "region": "a", "colour": "red", "value": True}],
    "t/ros": [{"rule": "staffing", "op": ">=", "k": 1}, {"rule": "daily", "op": "<=", "k": 1},
              {"rule": "with", "if": "cy", "then": "ann"},
              {"rule": "assign", "who": "cy", "shift": "mon_am", "value": True},
              {"rule": "assign", "who": "cy", "shift": "tue_pm", "value": True}],
    "t/php": [],
    "t/proj": [{"rule": "after", "job": "pour", "prev": "dig", "gap": 1},
               {"rule": "deadline", "job": "frame", "day": 9, "strict": True},
               {"rule": "disjoint", "a": "wire", "b": "paint"}],
}
T_MAP = Task("t/map", "Colour the map with exactly one colour per region.", "map", "", domain="sat")
T_ROS = Task("t/ros", "Roster.", "ros", "", domain="sat")
T_PHP = Task("t/php", "Pigeons.", "php", "", domain="sat")
T_PROJ = Task("t/proj", "Schedule.", "proj", "", domain="smt")
#: reference encodings (the SAT/SMT worlds grade by verifier rules, not by a gold action)
GOLDS = {"t/map": MAP_GOLD, "t/ros": ROSTER_GOLD, "t/php": "", "t/proj": SMT_GOLD}


@pytest.fixture(scope="module")
def sat_world() -> SATWorld:
    return SATWorld({"map": MAP, "ros": ROSTER, "php": PHP}, RULES, timeout_s=1.0)


@pytest.fixture(scope="module")
def smt_world() -> SMTWorld:
    return SMTWorld({"proj": PROJ}, RULES, timeout_s=1.0)


@pytest.fixture(scope="module")
def sat_rich() -> SATWorld:
    """``feedback="rich"``: the diagnostic text (extreme solution, checks passed, "has a solution")."""
    return SATWorld({"map": MAP, "ros": ROSTER, "php": PHP}, RULES, timeout_s=1.0, feedback="rich")


@pytest.fixture(scope="module")
def smt_rich() -> SMTWorld:
    return SMTWorld({"proj": PROJ}, RULES, timeout_s=1.0, feedback="rich")


def _short(v) -> str:
    return repr(v)[:40] if isinstance(v, str) else str(v)


def _failed(o, error: str | None = None, completed: bool = True):
    assert o.score == 0.0 and not o.solved and o.completed is completed, o
    if error is not None:
        assert o.error == error, o


# --------------------------------------------------------------------------- SAT language


def test_parse_and_print_round_trip():
    src = ["each v in REGIONS: exactly 1 of x[v,c] for c in COLOURS",
           "each (u,v) in BORDERS, c in COLOURS: ~x[u,c] | ~x[v,c]",
           "each p in STAFF, d in DAYS: atmost 1 of w[p,s] for s in SHIFTS_ON[d]",
           "each s in SHIFTS: w[cy,s] & w[bob,s] => w[ann,s] | w[dee,s]",
           "each s in {mon_am, (a,b), 3}: w[cy,s]", "atmost 2 of w[ann,s], w[bob,s]", "x[a,red]"]
    for s in src:
        assert print_line(parse_line(s)) == s
    # synonyms and spacing normalise
    assert print_line(parse_line("each  p in STAFF :at most 3 of w[ p , s ] for s in SHIFTS")) == \
        "each p in STAFF: atmost 3 of w[p,s] for s in SHIFTS"
    assert print_line(parse_line("not -x[a,red] | - x[b,red]")) == "x[a,red] | ~x[b,red]"
    assert print_line(parse_line("each s in S: w[a,s] -> w[b,s]")) == "each s in S: w[a,s] => w[b,s]"
    assert len(parse_program("# comment\n\nx[a,red]  # trailing\n")) == 1


@pytest.mark.parametrize("bad", ["each", "exactly of x[a]", "x[a,red] | x[b,red] & x[c,red]", "each v in R x[v]",
                                 "each v in R, v in R: x[v]", "x[a", "x[a,red] ->", "exactly 1 of", "3 of x",
                                 "x[a]; x[b]", "each (u) in E: x[u]", "atmost 9999999 of x[a]", "in"])
def test_parse_errors(bad):
    from cfjax.domains.sat.sat_world import EncodingError

    with pytest.raises(EncodingError):
        parse_line(bad)


# --------------------------------------------------------------------------- SAT world


def _verdict(o) -> dict:
    """An outcome without its wall-clock ``elapsed_s`` (the only field two identical checks may differ in)."""
    return {f.name: getattr(o, f.name) for f in dataclasses.fields(o) if f.name != "elapsed_s"}


def test_sat_world_is_an_evaluator_and_picklable(sat_world):
    assert isinstance(sat_world, Evaluator)
    clone = pickle.loads(pickle.dumps(sat_world))
    # the unpickled world grades exactly like the original: a solving encoding, a partial one, a parse error
    for task, encoding, solved in ((T_MAP, MAP_GOLD, True), (T_ROS, ROSTER_GOLD, True), (T_MAP, "x[a,red]", False),
                                   (T_MAP, "x[a,", False)):
        a, b = sat_world.evaluate(task, encoding), clone.evaluate(task, encoding)
        assert a.solved is solved, a
        assert _verdict(a) == _verdict(b), (a, b)


def test_sat_correct_encodings_solve(sat_rich):
    for t in (T_MAP, T_ROS):
        o = sat_rich.evaluate(t, GOLDS[t.task_id])
        assert o.score == 1.0 and o.solved and o.completed and o.error is None, o
        assert "passes all" in o.feedback


def test_sat_wrong_encoding_gets_partial_credit(sat_rich):
    weak = MAP_GOLD.replace("exactly 1", "atleast 1")
    o = sat_rich.evaluate(T_MAP, weak)
    assert o.completed and not o.solved and 0.0 < o.score < 1.0, o
    assert "colour" in o.feedback and "exactly 1" not in o.feedback.split("Failed:")[0]
    # a reversed implication: the trainee works without the mentor in the smallest solution
    rev = ROSTER_GOLD.replace("w[cy,s] => w[ann,s]", "w[ann,s] => w[cy,s]")
    o = sat_rich.evaluate(T_ROS, rev)
    assert o.completed and 0.0 < o.score < 1.0 and "ann works" in o.feedback, o


def test_sat_unsat_encoding_scores_zero(sat_world):
    o = sat_world.evaluate(T_MAP, MAP_GOLD + "\n~x[a,red]")
    _failed(o, None)
    assert "unsatisfiable" in o.feedback
    _failed(sat_world.evaluate(T_MAP, "atleast 5 of x[a,red], x[b,red]"), None)  # k > n


@pytest.mark.parametrize("action", [
    "x[a,purple]", "y[a,red]", "x[a]", "each v in REGIONS: exactly 1 of x[v,c]", "each e in BORDERS: x[e,red]",
    "each v in NOWHERE: x[v,red]", "each v in REGIONS: x[v,red] | ", "exactly two of x[a,red]", "",
    "   \n# only a comment", "x[a,red] $ x[b,red]", "each (u,v,w) in BORDERS: x[u,red]",
], ids=_short)
def test_sat_crashing_encodings_are_parse_errors(sat_world, action):
    o = sat_world.evaluate(T_MAP, action)
    _failed(o, "parse_error")
    assert o.feedback.startswith("Parse error")


def test_sat_hanging_encoding_times_out(sat_world):
    php = "each i in P: atleast 1 of p[i,h] for h in H\neach h in H: atmost 1 of p[i,h] for i in P"
    t0 = time.perf_counter()
    o = sat_world.evaluate(T_PHP, php)
    dt = time.perf_counter() - t0
    assert not o.completed and o.error == "timeout" and o.score == 0.0, o
    assert dt < sat_world.timeout_s + 1.0


@pytest.mark.parametrize("action,error", [
    ("each a in REGIONS, b in REGIONS, c in REGIONS, d in REGIONS, e in REGIONS, f in REGIONS, g in REGIONS, "
     "h in REGIONS, i in REGIONS, j in REGIONS, k in REGIONS, l in REGIONS: ~x[a,red] | x[b,red]", "too_large"),
    ("each a in REGIONS, b in REGIONS, c in REGIONS, d in REGIONS, e in REGIONS: atmost 3 of x[v,k] for v in "
     "REGIONS, k in COLOURS, q in REGIONS, r in REGIONS, s in REGIONS, t in REGIONS", "too_large"),
    ("(" * 5000 + "x[a,red]" + ")" * 5000, "parse_error"),
    ("~" * 1500 + "x[a,red]", None),  # deep negation is just parity; long but legal
    ("atmost 100000000000000000000 of x[a,red]", "parse_error"),
    ("x[a,red]\n" * 600, "too_large"),
    ("x[a,red] | " * 5000 + "x[b,red]", "parse_error"),
    ("__import__('os').system('touch /tmp/pwned')", "parse_error"),
    ("x[a,red]" + "\x00", "parse_error"),
], ids=_short)
def test_sat_malicious_encodings_fail_fast(sat_world, action, error):  # noqa: D103
    t0 = time.perf_counter()
    o = sat_world.evaluate(T_MAP, action)
    assert time.perf_counter() - t0 < 0.5
    assert o.completed
    if error is None:
        assert o.error is None
    else:
        _failed(o, error)


def test_sat_world_limits_and_unknowns(sat_world):
    small = SATWorld({"map": MAP}, RULES, max_clauses=10)
    _failed(small.evaluate(T_MAP, MAP_GOLD), "too_large")
    with pytest.raises(ValueError):
        sat_world.evaluate(Task("t/map", "q", "nowhere", "", domain="sat"), MAP_GOLD)
    with pytest.raises(ValueError):
        sat_world.evaluate(Task("t/none", "q", "map", "", domain="sat"), MAP_GOLD)
    strict = SATWorld({"map": MAP}, RULES, partial_credit=False)
    assert strict.evaluate(T_MAP, MAP_GOLD.replace("exactly 1", "atleast 1")).score == 0.0
    with pytest.raises(ValueError):
        SATWorld({}, {}, timeout_s=0)


def test_sat_world_is_deterministic(sat_world):
    weak = MAP_GOLD.replace("exactly 1", "atleast 1")
    outs = {(o.score, o.feedback) for o in (sat_world.evaluate(T_MAP, weak) for _ in range(3))}
    fresh = SATWorld({"map": MAP}, RULES).evaluate(T_MAP, weak)
    assert outs == {(fresh.score, fresh.feedback)}


def test_sat_evaluate_is_fast(sat_world):
    sat_world.evaluate(T_ROS, ROSTER_GOLD)
    t0 = time.perf_counter()
    for _ in range(20):
        sat_world.evaluate(T_ROS, ROSTER_GOLD)
    assert (time.perf_counter() - t0) / 20 < 0.05


# --------------------------------------------------------------------------- SMT world


def test_smt_correct_and_wrong(smt_rich):
    o = smt_rich.evaluate(T_PROJ, SMT_GOLD)
    assert o.solved and o.score == 1.0 and o.completed and o.error is None, o
    o = smt_rich.evaluate(T_PROJ, SMT_GOLD.replace("(> s_pour", "(>= s_pour"))
    assert o.completed and 0 < o.score < 1 and "pour starts strictly after dig ends" in o.feedback, o
    assert "earliest" in o.feedback
    o = smt_rich.evaluate(T_PROJ, SMT_GOLD.replace("(< e_frame", "(<= e_frame"))
    assert o.completed and 0 < o.score < 1 and "latest" in o.feedback, o
    # comments, check-sat, get-model, set-logic QF_LIA and re-declaring an environment variable are fine
    chatty = "(set-logic QF_LIA) ; the logic\n(declare-const s_pour Int)\n" + SMT_GOLD + "\n(check-sat)\n(get-model)"
    assert smt_rich.evaluate(T_PROJ, chatty).solved


def test_smt_unsat(smt_world):
    o = smt_world.evaluate(T_PROJ, SMT_GOLD + "\n(assert (< e_frame 4))")
    _failed(o, None)
    assert "unsatisfiable" in o.feedback


@pytest.mark.parametrize("action", [
    "(assert (> s_nope 1))", "(assert (+ s_dig 1))", "(assert (> s_dig true))", "(assert (> s_dig 1)",
    "(assert (> s_dig 1)))", "assert", "(assert)", "(declare-const s_dig Bool)\n(assert s_dig)",
    "(assert (> s_dig 1.5))", '(assert (= s_dig "x"))', "(assert (> (* s_dig s_pour) 1))",
    "(declare-const r Real)\n(assert (> r 1))", "(check-sat)", "", "(assert (> |s dig| 1))", "(assert (> #x01 1))",
    "(assert (> (div s_dig s_pour) 1))",
], ids=_short)
def test_smt_crashing_scripts_are_parse_errors(smt_world, action):
    o = smt_world.evaluate(T_PROJ, action)
    _failed(o, "parse_error")


@pytest.mark.parametrize("action", [
    "(set-option :timeout 1)", "(set-logic ALL)", "(exit)", '(echo "hi")', "(eval s_dig)", "(push 1)", "(pop 1)",
    "(define-fun-rec f ((x Int)) Int (f x))", "(define-fun k () Int 3)", "(get-value (s_dig))", "(reset)",
    "(declare-fun f (Int) Int)", "(assert (forall ((x Int)) (> x 0)))", "(assert (! (> s_dig 1) :named n))",
    "(declare-sort U 0)", "(set-info :status sat)", SMT_GOLD + "\n(exit)",
], ids=_short)
def test_smt_forbidden_commands(smt_world, action):
    t0 = time.perf_counter()
    o = smt_world.evaluate(T_PROJ, action)
    assert time.perf_counter() - t0 < 0.5
    _failed(o, "forbidden")
    assert o.feedback.startswith("Forbidden")


@pytest.mark.parametrize("action,error", [
    ("(assert " + "(not " * 5000 + "true" + ")" * 5001, "parse_error"),
    ("(assert (> s_dig 999999999999999999999999999999))", "parse_error"),
    ("(assert (> s_dig 1))\n" * 500, "too_large"),
    ("(assert (> s_dig 1)) " + " " * 60000, "too_large"),
    ("(assert (and " + " ".join(["true"] * 25000) + "))", "too_large"),
], ids=_short)
def test_smt_malicious_scripts_fail_fast(smt_world, action, error):
    t0 = time.perf_counter()
    o = smt_world.evaluate(T_PROJ, action)
    assert time.perf_counter() - t0 < 0.5
    _failed(o, error)


def test_smt_hanging_script_times_out(smt_world):
    n = 14  # 14 distinct integers in 13 values: pigeonhole, hard for the solver
    act = "\n".join(f"(declare-const x{i} Int)" for i in range(n)) + "\n" + \
          "\n".join(f"(assert (and (>= x{i} 0) (< x{i} {n - 1})))" for i in range(n)) + \
          "\n(assert (distinct " + " ".join(f"x{i}" for i in range(n)) + "))"
    t0 = time.perf_counter()
    o = smt_world.evaluate(T_PROJ, act)
    assert time.perf_counter() - t0 < smt_world.timeout_s + 1.0
    assert not o.completed and o.error == "timeout", o
    tiny = SMTWorld({"proj": PROJ}, RULES, timeout_s=1e-6)
    o = tiny.evaluate(T_PROJ, SMT_GOLD)
    assert not o.completed and o.error == "timeout"


def test_smt_world_picklable_deterministic_and_routing(smt_world, sat_world):
    clone = pickle.loads(pickle.dumps(smt_world))
    weak = SMT_GOLD.replace("(> s_pour", "(>= s_pour")
    a, b = smt_world.evaluate(T_PROJ, weak), clone.evaluate(T_PROJ, weak)
    assert (a.score, a.feedback) == (b.score, b.feedback)
    both = SatSmtWorld({"map": MAP, "proj": PROJ}, RULES)
    assert both.evaluate(T_MAP, MAP_GOLD).solved and both.evaluate(T_PROJ, SMT_GOLD).solved
    pickle.loads(pickle.dumps(both))
    with pytest.raises(ValueError):
        both.evaluate(Task("t/map", "q", "map", "", domain="sql"), MAP_GOLD)
    with pytest.raises(ValueError):
        smt_world.evaluate(Task("t/proj", "q", "nowhere", "", domain="smt"), SMT_GOLD)


# --------------------------------------------------------------------------- edits


def test_sat_edits_units_replace_normalize():
    ed = SATEdits()
    us = ed.units(ROSTER_GOLD)
    assert [u.kind for u in us] == ["group"] * 4
    assert us[2].text == "each s in SHIFTS: w[cy,s] => w[ann,s]"
    new = ed.replace_unit(ROSTER_GOLD, 0, "each s in SHIFTS:   at least 3 of w[p,s] for p in STAFF")
    assert new.splitlines()[0] == "each s in SHIFTS: atleast 3 of w[p,s] for p in STAFF"
    assert new.splitlines()[1:] == ed.normalize(ROSTER_GOLD).splitlines()[1:]
    assert ed.normalize("  x[a,red]\n\n# c\n~x[b,red]  ") == "x[a,red]\n~x[b,red]"
    assert ed.normalize("bad ( line\n  more") == "bad ( line\nmore"
    for args in [(ROSTER_GOLD, 9, "x[a]"), (ROSTER_GOLD, -1, "x[a]"), (ROSTER_GOLD, 0, "each"),
                 (ROSTER_GOLD, 0, "x[a]\nx[b]"), ("each (", 0, "x[a]")]:
        with pytest.raises(EditError):
            ed.replace_unit(*args)
    with pytest.raises(EditError):
        ed.units("each v in:")


def test_sat_rule_edits_are_one_unit_and_contain_the_fixes():
    ed = SATEdits()
    edits = ed.rule_edits(ROSTER_GOLD)
    assert edits and all(0 <= i < 4 for i, _ in edits)
    texts = {t for _, t in edits}
    assert "each s in SHIFTS: atleast 2 of w[p,s] for p in STAFF" in texts      # k + 1
    assert "each s in SHIFTS: morethan 1 of w[p,s] for p in STAFF" in texts     # inclusive → strict
    assert "each s in SHIFTS: w[ann,s] => w[cy,s]" in texts                     # implication swapped
    assert "each s in {mon_am, tue_pm}: ~w[cy,s]" in texts                      # literal negated
    assert "each (v,u) in BORDERS, c in COLOURS: ~x[u,c] | ~x[v,c]" in {t for _, t in ed.rule_edits(MAP_GOLD)}
    for i, t in edits:
        d = ed.diff_units(ROSTER_GOLD, ed.replace_unit(ROSTER_GOLD, i, t))
        assert d is not None and d[0] == i
    assert ed.rule_edits("not parsable (") == []


def test_sat_transfer_and_signature():
    ed = SATEdits()
    before = "each p in STAFF: lessthan 3 of w[p,s] for s in SHIFTS"
    after = "each p in STAFF: atmost 3 of w[p,s] for s in SHIFTS"
    target = ("each s in SHIFTS: atleast 2 of on[n,s] for n in NURSES\n"
              "each n in NURSES: lessthan 4 of on[n,t] for t in SHIFTS")
    moved = ed.transfer(before, after, target)
    assert moved is not None and moved.splitlines()[1] == "each n in NURSES: atmost 4 of on[n,t] for t in SHIFTS"
    assert moved.splitlines()[0] == target.splitlines()[0]
    # a shifted number is shifted relative to the target's own number
    moved = ed.transfer("each s in SHIFTS: atleast 3 of w[p,s] for p in STAFF",
                        "each s in SHIFTS: atleast 4 of w[p,s] for p in STAFF", target)
    assert moved is not None and moved.splitlines()[0] == "each s in SHIFTS: atleast 3 of on[n,s] for n in NURSES"
    assert ed.transfer("x[a,red]", "~x[a,red]", "each v in R: exactly 1 of x[v,c] for c in C") is None
    assert ed.transfer("bad (", "x", target) is None
    assert ed.signature("each p in STAFF: atmost 3 of w[p,s] for s in SHIFTS") == \
        ed.signature("each c in COLOURS: atmost 9 of x[v,c] for v in REGIONS")
    assert ed.signature("atmost 1 of x[a]") != ed.signature("atleast 1 of x[a]")


def test_smt_edits():
    ed = SMTEdits()
    script = "(declare-const k Int)\n(assert (distinct s_wire s_paint))\n(assert (>= s_pour e_dig))\n(check-sat)"
    us = ed.units(script)
    assert [u.kind for u in us] == ["declare", "assert", "assert", "command"]
    assert ed.normalize("(assert   (>= s_pour\n e_dig)) ; c") == "(assert (>= s_pour e_dig))"
    texts = {t for _, t in ed.rule_edits(script)}
    assert "(assert (> s_pour e_dig))" in texts
    assert "(assert (>= s_dig e_pour))" in texts
    assert "(assert (or (<= e_wire s_paint) (<= e_paint s_wire)))" in texts
    assert all(i in (1, 2) for i, _ in ed.rule_edits(script))  # only assertions are edited
    back = {t for _, t in ed.rule_edits("(assert (or (< e_a s_b) (< e_b s_a)))")}
    assert "(assert (distinct s_a s_b))" in back and "(assert (or (<= e_a s_b) (<= e_b s_a)))" in back
    assert ed.replace_unit(script, 2, "(assert (> s_pour e_dig))").splitlines()[2] == "(assert (> s_pour e_dig))"
    for args in [(script, 0, "(assert true)"), (script, 7, "(assert true)"), (script, 1, "(assert (> 1"),
                 (script, 1, "(assert true) (assert false)"), (script, 1, "(exit)")]:
        with pytest.raises(EditError):
            ed.replace_unit(*args)
    moved = ed.transfer("(assert (distinct s_a s_b))", "(assert (or (<= e_a s_b) (<= e_b s_a)))", script)
    assert moved is not None and moved.splitlines()[1] == "(assert (or (<= e_wire s_paint) (<= e_paint s_wire)))"
    assert ed.transfer("(assert (> s_b e_a))", "(assert (>= s_b e_a))", script) is None
    assert ed.transfer("(declare-const x Int)", "(declare-const x Bool)", script) is None
    d = ed.diff_units(script, ed.replace_unit(script, 2, "(assert (> s_pour e_dig))"))
    assert d is not None and d[0] == 2


def test_dispatching_edit_model():
    ed = SatSmtEdits()
    assert is_smt("; comment\n(assert true)") and not is_smt("x[a,red]") and not is_smt("")
    assert ed.units(SMT_GOLD)[0].kind == "assert" and ed.units(MAP_GOLD)[0].kind == "group"
    assert ed.normalize(SMT_GOLD) == SMTEdits().normalize(SMT_GOLD)
    assert ed.rule_edits(MAP_GOLD) == SATEdits().rule_edits(MAP_GOLD)
    assert ed.transfer("(assert (> s_b e_a))", "(assert (>= s_b e_a))", MAP_GOLD) is None
    assert ed.transfer("x[a,red]", "~x[a,red]", SMT_GOLD) is None
    assert ed.diff_units(MAP_GOLD, SMT_GOLD) is None
    assert ed.signature("(assert (> s_b e_a))") == "( assert ( > <id> <id> ) )"
    assert read_sexprs(ed.normalize(SMT_GOLD))

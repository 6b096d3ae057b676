"""``--suite jsonl:PATH`` with SAT/SMT encoding rows (issue 14) and DIMACS answer rows.

Tiny instances written by the test: a three-region map to colour (SAT) inline, and a two-job
schedule (SMT) in an instance file; the verifier's rules are the checker settings, so success needs
no gold. Checks loading, the gold check, the gold-free drafter, and one malformed-line case per field.
DIMACS rows: the task is to answer the formula (an assignment or UNSAT), the answer edits, the
refusal of old-style (encoding) rows and the loader's warnings. SATLIB-style formulas run through the
whole pipeline in ``tests/domains/sat/test_dimacs_tasks.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cfjax.config import ScriptedConfig
from cfjax.domains.jsonl import JSONLError, JSONLSuite, load

MAP = {"env_id": "row3", "solver": "sat", "problem": "colouring", "description": "three regions in a row",
       "sets": {"REGIONS": ["a", "b", "c"], "COLOURS": ["red", "green", "blue"], "BORDERS": [["a", "b"], ["b", "c"]]},
       "families": {}, "vars": {"x": ["REGIONS", "COLOURS"]},
       "data": {"var": "x", "regions": "REGIONS", "colours": "COLOURS", "borders": "BORDERS",
                "var_doc": "region v has colour c"}}
MAP_RULES = [{"rule": "colours_per_region", "op": "==", "k": 1}, {"rule": "proper"}]
MAP_GOLD = "each v in REGIONS: exactly 1 of x[v,c] for c in COLOURS\neach (u,v) in BORDERS, c in COLOURS: ~x[u,c] | ~x[v,c]"
MAP_START = "each v in REGIONS: atleast 1 of x[v,c] for c in COLOURS\neach (u,v) in BORDERS, c in COLOURS: ~x[u,c] | ~x[v,c]"

PLAN = {"env_id": "plan2", "solver": "smt", "problem": "schedule", "jobs": [["dig", 2], ["pour", 3]], "horizon": 9,
        "description": "two jobs"}
PLAN_RULES = [{"rule": "after", "job": "pour", "prev": "dig"}, {"rule": "deadline", "job": "pour", "day": 6}]
PLAN_GOLD = "(assert (>= s_pour e_dig))\n(assert (<= e_pour 6))"


def write(d: Path, rows: list[dict]) -> Path:
    path = d / "encodings.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def map_row(**kw) -> dict:
    return {"domain": "sat", "question": "Every region gets exactly one colour; bordering regions differ.",
            "instance": MAP, "rules": MAP_RULES, "start": MAP_START, "gold": MAP_GOLD} | kw


def plan_row(**kw) -> dict:
    return {"domain": "sat", "question": "Pour starts once dig has finished and is finished by day 6.",
            "instance_path": "instances/plan2.json", "rules": PLAN_RULES, "gold": PLAN_GOLD} | kw


@pytest.fixture
def d(tmp_path) -> Path:
    (tmp_path / "instances").mkdir()
    (tmp_path / "instances" / "plan2.json").write_text(json.dumps(PLAN))
    return tmp_path


def test_sat_and_smt_rows_load_and_grade(d):
    (d / "instances" / "plan2_gold.smt2").write_text(PLAN_GOLD)
    (d / "instances" / "plan2_start.smt2").write_text("(assert (> s_pour e_dig))\n(assert (<= e_pour 6))")
    s = JSONLSuite.build(d / "root", write(d, [map_row(id="m1"), map_row(id="m2", gold=None), plan_row(id="p1"),
                                              plan_row(id="p2", gold=None, gold_path="instances/plan2_gold.smt2",
                                                       start_path="instances/plan2_start.smt2")]))
    assert s.base == "sat" and [t.domain for t in s.tasks] == ["sat", "sat", "smt", "smt"]
    m1, _, p1, p2 = s.tasks
    assert s.keys[p2.task_id].gold == PLAN_GOLD and "(assert (> s_pour e_dig))" in p2.context
    assert m1.env_id == "row3" and "REGIONS = {a, b, c}" in m1.context and "atleast 1" in m1.context
    assert "exactly 1" not in m1.context  # the start encoding is shown, never the gold
    assert m1.attrs["problem"] == "colouring" and m1.attrs["solver"] == "sat"
    assert p1.env_id == "plan2" and "(declare-const s_pour Int)" in p1.context
    w = s.world()
    assert w.evaluate(m1, MAP_GOLD).solved and not w.evaluate(m1, MAP_START).solved
    assert w.evaluate(p1, PLAN_GOLD).solved and not w.evaluate(p1, "(assert (<= e_pour 6))").solved
    assert not s.keys[s.tasks[1].task_id].gold  # gold optional: the verifier decides success


def test_drafter_repairs_the_start_encoding_without_gold(d):
    s = JSONLSuite.build(d / "root", write(d, [map_row(id=f"m{i}") for i in range(3)] + [plan_row(id="p")]))
    sd, w, cfg = s.scripted_domain(), s.world(), ScriptedConfig()
    assert not hasattr(sd, "_keys")
    m = s.tasks[0]
    drafts = [sd.draft(m, a, random.Random(a), cfg) for a in range(12)]
    assert any(w.evaluate(m, a).solved for a in drafts)  # one rule edit of the start can repair it
    assert sd.draft(s.tasks[3], 0, random.Random(0), cfg) == ""  # no start: nothing to repair
    assert sd.true_fixes(m, MAP_START) == {}


def test_drafter_runs_under_the_answer_key_guard(d):
    """The drafter's module is marked agent-side: the guard watches it under ``cfjax.domains``."""
    import cfjax.domains.sat.user_draft as mod
    from cfjax.domains.sat.user import UserSatScript
    from cfjax.types import AGENT_SIDE_MARKER, answer_key_guard

    assert getattr(mod, AGENT_SIDE_MARKER) is True and UserSatScript.__module__ == mod.__name__
    s = JSONLSuite.build(d / "root", write(d, [map_row(id=f"m{i}") for i in range(2)] + [plan_row(id="p")]))
    sd, cfg = s.scripted_domain(), ScriptedConfig()
    with answer_key_guard():
        for t in s.tasks:
            for a in range(3):
                sd.draft(t, a, random.Random(a), cfg)
            sd.broad_condition(t, random.Random(0))
        assert sd.true_fixes(s.tasks[0], MAP_START) == {}


def _err(d: Path, rows: list[dict]) -> JSONLError:
    with pytest.raises(JSONLError) as e:
        load(write(d, rows))
    return e.value


def test_error_missing_instance(d):
    row = map_row()
    del row["instance"]
    e = _err(d, [plan_row(), row])
    assert (e.line, e.field) == (2, "instance")


def test_error_bad_instance(d):
    bad = dict(MAP, vars={"x": ["REGIONS", "SHADES"]})
    e = _err(d, [map_row(instance=bad)])
    assert (e.line, e.field) == (1, "instance") and "SHADES" in str(e)
    e = _err(d, [map_row(), plan_row(instance_path="instances/none.json")])
    assert (e.line, e.field) == (2, "instance_path") and "instance file not found" in str(e)


def test_error_bad_rules(d):
    e = _err(d, [map_row(rules=[{"rule": "paint", "region": "a"}])])
    assert (e.line, e.field) == (1, "rules") and "KeyError" in str(e)
    e = _err(d, [map_row(rules=[])])
    assert (e.line, e.field) == (1, "rules")


def test_error_gold_does_not_solve(d):
    e = _err(d, [map_row(id="a"), map_row(id="b", gold=MAP_START)])
    assert (e.line, e.field) == (2, "gold") and "does not solve" in str(e)


def test_error_two_instances_for_one_environment(d):
    other = dict(MAP, description="another map with the same id")
    e = _err(d, [map_row(id="a"), map_row(id="b", instance=other)])
    assert (e.line, e.field) == (2, "instance") and "line 1" in str(e)


# --------------------------------------------------------------------------- DIMACS formulas

# (x1 ∨ ¬x2) ∧ (x2 ∨ x3) ∧ (¬x1 ∨ ¬x3), SATLIB style (comments, clauses over lines, % trailer)
TINY_CNF = "c a tiny formula\np cnf 3 3\n1 -2 0\n2 3\n0 -1 -3 0\n%\n0\n"


def cnf_row(**kw) -> dict:
    return {"domain": "sat", "question": "Answer the formula; variable 3 must be false.",
            "dimacs_path": "cnf/tiny.cnf", "rules": [{"rule": "clauses"}, {"rule": "assign", "var": 3, "value": False}]} | kw


def test_dimacs_rows_are_answered_not_encoded(d, capsys):
    """A DIMACS task's action is an assignment or an UNSAT claim, checked by the world (issue: it was
    solved by copying the formula shown)."""
    (d / "cnf").mkdir()
    (d / "cnf" / "tiny.cnf").write_text(TINY_CNF)
    inline = "p cnf 2 2\n1 2 0\n-1 -2 0\n"  # exactly one of two
    s = JSONLSuite.build(d / "root", write(d, [cnf_row(id="c1", expect="sat"), cnf_row(id="c2", rules=None),
                                              {"domain": "sat", "id": "x1", "dimacs": inline, "gold": "v 1 -2 0"},
                                              {"domain": "sat", "id": "u1", "dimacs": "p cnf 1 2\n1 0\n-1 0\n",
                                               "gold": "UNSAT", "expect": "unsat"}]))
    assert capsys.readouterr().err == ""  # every formula is solvable as stated: no warning
    c1, c2, x1, u1 = s.tasks
    assert c1.env_id == "tiny" and c1.domain == "sat" and x1.env_id.startswith("cnf_")
    assert "p cnf 3 3\n1 -2 0\n2 3 0\n-1 -3 0" in c1.context and "v 1 -2 3 0" in c1.context
    assert "Also required: variable 3 is false" in c1.context and "Also required" not in c2.context
    assert "constraint group" not in c1.context and "expect" not in c1.context  # no language, no answer key
    assert s.keys[c1.task_id].extra == {"expect": "sat"} and s.keys[c2.task_id].extra == {}
    assert s.keys[x1.task_id].gold == "s SATISFIABLE\nv 1\nv -2"  # the canonical answer
    assert s.loader.rules[c2.task_id] == ({"rule": "clauses"},)  # the default requirements
    assert x1.question.startswith("Find an assignment")  # the default question
    w = s.world()
    transcription = "x[v1] | ~x[v2]\nx[v2] | x[v3]\n~x[v1] | ~x[v3]"
    out = w.evaluate(c2, transcription)  # copying the formula no longer solves anything
    assert not out.solved and out.error == "parse_error" and out.completed
    assert w.evaluate(c2, "v -1 -2 3 0").solved and w.evaluate(c2, "1 2 -3").solved
    out = w.evaluate(c1, "v -1 -2 3 0")  # every clause holds, the stated requirement does not
    assert not out.solved and "variable 3 is false" in out.feedback and 0 < out.score < 1
    assert w.evaluate(c1, "s SATISFIABLE\nv 1\nv 2\nv -3").solved
    out = w.evaluate(c2, "v 1 -2 3")  # clause 3 (-1 -3) is violated
    assert not out.solved and "1 of the 3 clauses unsatisfied: clause 3." in out.feedback
    out = w.evaluate(c2, "UNSAT")
    assert (out.score, out.solved) == (0.0, False) and "UNSAT claim is wrong" in out.feedback
    assert w.evaluate(u1, "s UNSATISFIABLE").solved and not w.evaluate(u1, "v 1").solved
    sd = s.scripted_domain()  # the drafter answers by its descent, never by copying the formula
    drafts = [sd.draft(c2, a, random.Random(a), ScriptedConfig()) for a in range(8)]
    assert all(sd.edits.units(x)[0].kind == "verdict" for x in drafts) and transcription not in drafts
    assert any(w.evaluate(c2, x).solved for x in drafts)
    assert sd.draft(u1, 0, random.Random(0), ScriptedConfig()) == "s UNSATISFIABLE"  # refuted by propagation


def test_dimacs_answers_edit_one_literal_or_the_claim(d):
    s = JSONLSuite.build(d / "root", write(d, [{"domain": "sat", "id": "a", "dimacs": TINY_CNF,
                                                "start": "v 1 2 3 0"}]))
    ed, t = s.edits, s.tasks[0]
    assert "# An answer to repair:\ns SATISFIABLE\nv 1\nv 2\nv 3" in t.context
    start = s.loader.starts[t.task_id]
    assert [u.kind for u in ed.units(start)] == ["verdict", "literal", "literal", "literal"]
    assert ed.rule_edits(start) == [(1, "v -1"), (2, "v -2"), (3, "v -3"), (0, "s UNSATISFIABLE")]
    assert ed.replace_unit(start, 1, "v -1") == "s SATISFIABLE\nv -1\nv 2\nv 3"
    claim = ed.replace_unit(start, 0, "UNSAT")
    assert ed.rule_edits(claim) == [(0, "s SATISFIABLE")]  # under UNSAT only the switch back
    assert ed.diff_units(start, claim)[0] == 0
    assert ed.transfer("v 3", "v -3", "s SATISFIABLE\nv -1\nv 3") == "s SATISFIABLE\nv -1\nv -3"
    assert ed.transfer("v 3", "v -3", "s SATISFIABLE\nv -1") is None
    w, sd = s.world(), s.scripted_domain()
    drafts = [sd.draft(t, a, random.Random(a), ScriptedConfig()) for a in range(12)]
    assert all(ed.diff_units(start, x) is not None for x in drafts)  # one unit from the start
    assert any(w.evaluate(t, x).solved for x in drafts)  # flipping 1 or 3 repairs it


def test_old_style_dimacs_rows_are_refused_in_one_line(d):
    e = _err(d, [{"domain": "sat", "question": "Encode it.", "dimacs": TINY_CNF,
                  "gold": "x[v1] | ~x[v2]\nx[v2] | x[v3]\n~x[v1] | ~x[v3]"}])
    assert (e.line, e.field) == (1, "gold") and "now answered, not encoded" in str(e) and "\n" not in str(e)
    e = _err(d, [{"domain": "sat", "dimacs": TINY_CNF, "start": "x[v1] | x[v2]"}])
    assert (e.line, e.field) == (1, "start") and "now answered, not encoded" in str(e)
    e = _err(d, [{"domain": "sat", "dimacs": TINY_CNF, "gold": "v 1 -2 3"}])  # an answer, but a wrong one
    assert (e.line, e.field) == (1, "gold") and "gold answer does not solve" in str(e) and "clause 3" in str(e)
    e = _err(d, [{"domain": "sat", "dimacs": TINY_CNF, "expect": "maybe"}])
    assert (e.line, e.field) == (1, "expect")
    e = _err(d, [{"domain": "sat", "dimacs": TINY_CNF, "expect": "unsat", "gold": "v -1 -2 3"}])
    assert (e.line, e.field) == (1, "expect") and "claims SAT" in str(e)
    cnf = {"env_id": "f", "solver": "sat", "problem": "cnf", "sets": {"VARS": ["v1"]}, "vars": {"x": ["VARS"]},
           "data": {"var": "x", "clauses": [[1]]}}
    e = _err(d, [map_row(instance=cnf)])
    assert (e.line, e.field) == (1, "instance") and "dimacs" in str(e)


def test_unsolvable_dimacs_rows_warn_in_one_line(d, capsys, monkeypatch):
    import cfjax.domains.sat.user as user

    rows = [{"domain": "sat", "id": "a", "dimacs": TINY_CNF, "expect": "unsat"},
            {"domain": "sat", "id": "b", "dimacs": "p cnf 1 2\n1 0\n-1 0\n", "expect": "sat"},
            {"domain": "sat", "id": "c", "question": "Encode the formula.", "dimacs": TINY_CNF}]
    lf = load(write(d, rows))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(x.startswith("cfjax: warning: ") for x in err) and err == \
        ["cfjax: warning: " + w for w in lf.loader.warnings]
    assert ":1: field 'expect': is 'sat'" not in err[0] and ":1: field 'expect': is 'unsat'" in err[0]
    assert ":2: field 'expect': is 'sat', but the solver proves the formula unsatisfiable" in err[1]
    assert ":3: field 'question': asks for an encoding" in err[2]
    monkeypatch.setattr(user, "decide", lambda *a, **k: "timeout")  # a formula too hard for the time limit
    lf = load(write(d, rows[:1]))
    assert len(lf.loader.warnings) == 1 and "does not decide the formula within 2 s" in lf.loader.warnings[0]
    load(write(d, rows[:1]), check=False)  # worker processes re-open the suite silently
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("text, msg", [
    ("1 2 0\n", "before the 'p cnf' header"),
    ("p cnf 2 1\n1 3 0\n", "literal 3 names no variable"),
    ("p cnf 2 2\n1 2 0\n", "announces 2 clauses"),
    ("p cnf 2 1\n1 2\n", "does not end with 0"),
    ("p cnf 2 2\n1 0\n0\n", "empty clause"),
    ("p cnf 2 1\n1 x 0\n", "'x' is not a literal"),
])
def test_error_bad_dimacs(d, text, msg):
    e = _err(d, [{"domain": "sat", "question": "q", "dimacs": "p cnf 1 1\n1 0\n"},
                 {"domain": "sat", "question": "q", "dimacs": text}])
    assert (e.line, e.field) == (2, "dimacs") and msg in str(e)


def test_error_bad_cnf_rules_and_missing_file(d):
    e = _err(d, [cnf_row(dimacs_path=None, dimacs=TINY_CNF, rules=[{"rule": "assign", "var": 9}])])
    assert (e.line, e.field) == (1, "rules") and "not one of 1..3" in str(e)
    e = _err(d, [cnf_row()])
    assert (e.line, e.field) == (1, "dimacs_path") and "DIMACS file not found" in str(e)

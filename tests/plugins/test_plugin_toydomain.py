"""Issue 21, plugin proof (1): a domain defined in ``tests/`` — nothing under ``cfjax/`` names it — runs
through every runner and keeps every cross-domain contract, once its package is imported (registered).

The domain, ``toylist`` (:mod:`tests.plugins.toydomain`), is small but real: integer-list pipelines
evaluated by a real evaluator, one-step edits, 140 tasks with base / look-alike / new-surface variants
and a held-out list, and a keyed error model for the scripted backbone.
"""

from __future__ import annotations

import json
import math

import pytest

from cfjax.cli import main
from cfjax.types import EditError

from tests.domains import contract


# --------------------------------------------------------------------------- the domain itself


def test_the_evaluator_runs_pipelines_and_feedback_never_shows_the_answer(toylist, tmp_path):
    from tests.plugins.toydomain.lang import parse, run
    from tests.plugins.toydomain.script import ERRORS, slip_text

    assert run(parse("filter x >= 5\nsort desc\ntake 2"), (3, 5, 9, 5, 1)) == (9, 5)
    assert run(parse("map x % 3\ncount unique"), (3, 4, 5, 6, 7)) == 3
    assert run(parse(" FILTER  x>=5 \n\n sum "), (3, 5, 9)) == 14  # case and spacing are free
    suite = toylist.ToyListSuite.build(tmp_path)
    world = suite.world()
    t = next(t for t in suite.tasks if suite.keys[t.task_id].variant == "base")
    gold = suite.keys[t.task_id].gold
    assert world.evaluate(t, gold).solved
    slip = ERRORS[suite.keys[t.task_id].family][0]
    out = world.evaluate(t, slip_text(slip, gold))  # the family's characteristic slip: the trap is observable
    assert out.completed and not out.solved and out.score == 0.0 and out.error == "wrong_result"
    want, got = (run(parse(a), suite.data[t.env_id]) for a in (gold, slip_text(slip, gold)))
    assert f"returned {got}" in out.feedback and str(want) not in out.feedback  # its own result, never the answer
    for bad in ("sum\nfilter x > 1", "map x // 0\ncount", "take -1"):
        assert world.evaluate(t, bad).error == "parse_error"
        with pytest.raises(EditError):
            suite.edits.units(bad)
    assert world.evaluate(t, "filter x > 1000\nmax").error == "runtime_error"
    assert toylist.ToyListSuite.open(tmp_path).tasks == suite.tasks  # read-only reopen, as workers do


def test_the_toy_domain_keeps_every_cross_domain_contract(toylist, tmp_path):
    """Every check of tests/domains/contract.py (info, languages, information boundary, splits and twins,
    rule edits, scripted competence, malformed actions, a whole unit under the answer-key guard)."""
    assert "toylist" in contract.names()
    contract.check_all("toylist", tmp_path)


# --------------------------------------------------------------------------- every runner, unchanged


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and 0.0 <= x <= 100.0


def _check_countermem(res: dict) -> None:
    assert list(res["suites"]) == ["toylist"]
    (unit,) = res["units"]
    assert unit["suite"] == "toylist" and {"none", "cf_memory", "expel"} <= set(unit["rows"])
    assert all(_finite(r["success"]) and r["n_tasks"] > 0 for r in unit["rows"].values()), unit["rows"]


def _check_upliftmem(res: dict) -> None:
    assert list(res["suites"]) == ["toylist"]
    assert {"no_memory", "similarity_topk", "upliftmem"} <= set(res["rows"])
    assert all(_finite(res["summary"][r]["success"]["mean"]) for r in res["rows"]), res["summary"]


def _check_antipersist(res: dict) -> None:
    assert list(res["suites"]) == ["toylist"]
    assert {"no_memory", "anti_persistence"} <= set(res["rows"])
    assert all(_finite(res["summary"][r]["by_suite"]["toylist"]) for r in res["rows"]), res["summary"]


def _check_compare(res: dict) -> None:
    assert list(res["suites"]) == ["toylist"]
    rows = res["summary"]["rows"]
    assert {"none", "countermem", "antipersist", "upliftmem"} <= set(rows)
    assert all(_finite(r["success"]["mean"]) for r in rows.values()), rows
    assert "toylist" in res["per_suite"]


RUNNERS = {  # command → its results.json check; UpliftMem first: it pays the session's JAX compile
    "upliftmem run": _check_upliftmem,
    "countermem run": _check_countermem,
    "antipersist run": _check_antipersist,
    "compare": _check_compare,
}


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow) if c in ("upliftmem run", "compare") else c
                                     for c in RUNNERS])
def test_every_runner_runs_the_toy_domain(toylist, command, tmp_path, capsys):
    """``cfjax <command> --quick --suite toylist`` exits 0 and its results hold the toy suite's rows, each
    with a finite success (every row of each runner; UpliftMem's trained row with its two references —
    its ablations reuse the same code and would only add time). ``--workers 1``: the units run in this
    process, which registered the domain (a spawned worker would not see an in-process registration —
    see the next test)."""
    out = tmp_path / "out"
    extra = {"countermem run": ["--no-progress"], "upliftmem run": ["--rows", "upliftmem"]}.get(command, [])
    rc = main([*command.split(), "--quick", "--suite", "toylist", "--out", str(out), "--workers", "1", *extra])
    assert rc == 0, capsys.readouterr().err
    RUNNERS[command](json.loads((out / "results.json").read_text()))
    assert "toylist" in (out / "report.txt").read_text()


@pytest.mark.slow
def test_spawned_workers_see_an_in_process_registration(toylist, tmp_path):
    """A registration made in this process (not an entry point) reaches the spawned workers of
    ``--workers 2`` by value (cfjax.registry.in_process_registrations), and the run equals the serial one."""
    from cfjax.registry import in_process_registrations

    assert ("domain", "toylist") in {(w, n) for w, n, _ in in_process_registrations()}
    got = {}
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        rc = main(["antipersist", "run", "--quick", "--suite", "toylist", "--out", str(out), "--workers", workers,
                   "--rows", "no_memory", "anti_persistence", "--iterations", "1", "--max-tasks", "4"])
        assert rc == 0
        got[workers] = json.loads((out / "results.json").read_text())["summary"]
    assert got["1"] == got["2"]

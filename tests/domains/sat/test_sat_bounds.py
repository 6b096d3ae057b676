"""Bounded solvers (issue 12): grounding deadlines, byte-bounded parser memos, length limits before tokenising.

* Programs that blow up grounding (nested quantifiers over the built-in instances' largest sets, huge
  cardinalities, many lines) end as Outcomes within ``timeout_s + 1 s``, never as exceptions.
* The SMT world stays inside its deadline too, even if Z3 ignored its ``timeout`` parameter.
* The parsers' memos (:mod:`cfjax.domains.sat.memo`) stay within their byte budgets, evict, refuse huge
  entries, never memoise errors, and return exactly what the plain parsers return.
"""

from __future__ import annotations

import tempfile
import threading
import time

import pytest

from cfjax.domains.sat import edits as sat_edits
from cfjax.domains.sat import sat_lang, smt_world
from cfjax.domains.sat.instances import INSTANCES
from cfjax.domains.sat.memo import ByteLRU, byte_lru, text_cost
from cfjax.domains.sat.sat_lang import EncodingError, parse_line, parse_program
from cfjax.domains.sat.sat_world import SATInstance, SATWorld
from cfjax.domains.sat.smt_world import SMTInstance, SMTWorld, SmtError, parse_commands
from cfjax.types import Outcome, Task

TIMEOUT = 0.5
SLACK = 1.0  # the acceptance bound: an evaluation ends within timeout_s + SLACK
SAT_INSTANCES = {i.env_id: i for i in INSTANCES if isinstance(i, SATInstance)}
SMT_INSTANCES = {i.env_id: i for i in INSTANCES if isinstance(i, SMTInstance)}


def _task(env_id: str, domain: str = "sat") -> Task:
    return Task(f"t/{env_id}", "bounds", env_id, "", domain=domain)


@pytest.fixture(scope="module")
def world() -> SATWorld:
    return SATWorld(SAT_INSTANCES, {f"t/{e}": [] for e in SAT_INSTANCES}, timeout_s=TIMEOUT)


@pytest.fixture(scope="module")
def smt() -> SMTWorld:
    return SMTWorld(SMT_INSTANCES, {f"t/{e}": [] for e in SMT_INSTANCES}, timeout_s=TIMEOUT)


def _timed(w, task: Task, action: str) -> tuple[Outcome, float]:
    t0 = time.perf_counter()
    o = w.evaluate(task, action)
    return o, time.perf_counter() - t0


def _largest_set(inst: SATInstance) -> str:
    return max(inst.sets, key=lambda s: len(inst.sets[s]))


def _a_literal(inst: SATInstance) -> str:
    var, doms = next(iter(inst.vars.items()))
    return f"{var}[{','.join(inst.sets[d][0] for d in doms)}]"


def _nested_line(inst: SATInstance, stmt: str, per: int, budget: int = 200_000) -> str:
    """``each a0 in S, a1 in S, …: stmt`` over the largest set S, nested as deep as the size estimate allows."""
    s = _largest_set(inst)
    depth = 1
    while len(inst.sets[s]) ** (depth + 1) * per <= budget:
        depth += 1
    return "each " + ", ".join(f"a{i} in {s}" for i in range(depth)) + ": " + stmt


def _repeat(line: str) -> str:
    n = min(sat_lang.MAX_LINES, (sat_lang.MAX_TEXT - 1000) // (len(line) + 1))
    return "\n".join([line] * n)


# --------------------------------------------------------------------------- grounding is bounded in time


@pytest.mark.parametrize("env_id", sorted(SAT_INSTANCES))
def test_many_lines_of_nested_quantifiers_time_out_in_time(world, env_id):
    inst = SAT_INSTANCES[env_id]
    # ``atleast 0`` emits no clause, so the clause limit never stops it: only the deadline does
    prog = _repeat(_nested_line(inst, f"atleast 0 of {_a_literal(inst)}", per=3))
    o, dt = _timed(world, _task(env_id), prog)
    assert isinstance(o, Outcome)
    assert (o.completed, o.error, o.score, o.solved) == (False, "timeout", 0.0, False), o
    assert o.feedback.startswith("Timeout")
    assert dt < TIMEOUT + SLACK, dt


def _graph_a_attacks() -> dict[str, str]:
    inst = SAT_INSTANCES["graph_a"]
    lit = _a_literal(inst)
    q = "{" + ",".join(f"q{i}" for i in range(12)) + "}"
    two = [a + b for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"
           if a + b not in sat_lang.KEYWORDS]
    return {
        "nested clauses": _repeat(_nested_line(inst, f"{lit} | ~{lit}", per=1)),
        "nested comprehensions": _repeat("each a in REGIONS, b in REGIONS, c in REGIONS: atleast 0 of x[d,red] "
                                         "for d in REGIONS, e in REGIONS"),
        "huge cardinalities": _repeat(f"exactly 216 of x[v,c] for v in REGIONS, c in COLOURS, a in {q}"),
        "huge cardinality": f"atmost 500 of x[v,c] for v in REGIONS, c in COLOURS, a in {q}, b in {q}",
        "literal sets": _repeat("each a in {" + ",".join(two[:250]) + "}, b in {" + ",".join(two[250:500])
                                + f"}}: atleast 0 of {lit}"),
    }


@pytest.mark.parametrize("name", sorted(_graph_a_attacks()))
def test_grounding_blowups_end_as_outcomes_in_time(world, name):
    o, dt = _timed(world, _task("graph_a"), _graph_a_attacks()[name])
    assert isinstance(o, Outcome) and o.score == 0.0 and not o.solved, o
    assert o.error in ("timeout", "too_large"), o
    assert o.completed is (o.error != "timeout")
    assert dt < TIMEOUT + SLACK, dt


def test_encode_polls_its_deadline(world):
    t = _task("graph_a")
    line = _nested_line(SAT_INSTANCES["graph_a"], "atleast 0 of x[alder,red]", per=3)
    with pytest.raises(EncodingError) as e:
        world.encode(t, line, deadline=time.perf_counter())
    assert e.value.kind == "timeout"
    with pytest.raises(EncodingError) as e:  # the deadline passes in the middle of one line
        world.encode(t, line, deadline=time.perf_counter() + 0.01)
    assert e.value.kind == "timeout"
    gold = "each v in REGIONS: exactly 1 of x[v,c] for c in COLOURS\n" \
           "each (u,v) in BORDERS, c in COLOURS: ~x[u,c] | ~x[v,c]"
    assert world.encode(t, gold) == world.encode(t, gold, deadline=time.perf_counter() + 60)


def test_clause_limit_is_checked_inside_a_group():
    w = SATWorld(SAT_INSTANCES, {"t/graph_a": []}, timeout_s=30, max_clauses=200)
    # one environment, one cardinality group of ~300 clauses: too large at once, not after the group
    o = w.evaluate(_task("graph_a"), "exactly 2 of x[v,c] for v in REGIONS, c in COLOURS")
    assert (o.completed, o.error) == (True, "too_large"), o


# --------------------------------------------------------------------------- SMT is bounded in time


def _pigeons(n: int = 14) -> str:
    return ("\n".join(f"(declare-const x{i} Int)" for i in range(n)) + "\n"
            + "\n".join(f"(assert (and (>= x{i} 0) (< x{i} {n - 1})))" for i in range(n))
            + "\n(assert (distinct " + " ".join(f"x{i}" for i in range(n)) + "))")


def test_smt_hard_script_times_out_in_time(smt):
    o, dt = _timed(smt, _task("project_a", "smt"), _pigeons())
    assert (o.completed, o.error, o.score) == (False, "timeout", 0.0), o
    assert dt < TIMEOUT + SLACK, dt


def test_smt_interrupt_backstop_when_z3_ignores_its_timeout(smt, monkeypatch):
    import z3

    real = z3.Optimize.set

    def no_timeout(self, *args, **kw):
        if args and args[0] == "timeout":
            return None
        return real(self, *args, **kw)

    monkeypatch.setattr(z3.Optimize, "set", no_timeout)
    o, dt = _timed(smt, _task("project_a", "smt"), _pigeons())
    assert (o.completed, o.error) == (False, "timeout"), o
    assert dt < TIMEOUT + smt_world.Z3_INTERRUPT_GRACE_S + SLACK, dt


def test_smt_term_check_polls_its_deadline():
    import z3

    inst = SMT_INSTANCES["project_a"]
    w = SMTWorld(SMT_INSTANCES, {}, timeout_s=1.0)
    terms = " ".join(f"(<= s_dig {i})" for i in range(400))
    ctx = z3.Context()
    fs = z3.parse_smt2_string(w.script(inst, f"(assert (or {terms}))"), ctx=ctx)
    asserted = [fs[i] for i in range(3 * len(inst.jobs), len(fs))]
    w._validate(asserted, z3)  # no deadline: fine
    with pytest.raises(SmtError) as e:
        w._validate(asserted, z3, deadline=time.perf_counter())
    assert e.value.kind == "timeout"


# --------------------------------------------------------------------------- length limits before tokenising


def test_length_limits_are_checked_before_tokenising(monkeypatch):
    seen: list[int] = []
    real = sat_lang._tokenize
    monkeypatch.setattr(sat_lang, "_tokenize", lambda text: seen.append(len(text)) or real(text))
    with pytest.raises(EncodingError) as e:
        parse_program("x[a,red]\n" * 200_000)
    assert e.value.kind == "too_large"
    with pytest.raises(EncodingError) as e:
        parse_line("x[a,red] | " * 50_000)
    assert e.value.kind == "parse_error"
    assert seen == []

    class Spy:
        def __init__(self, pat):
            self.pat, self.calls = pat, 0

        def match(self, *a):
            self.calls += 1
            return self.pat.match(*a)

    spy = Spy(smt_world._TOK)
    monkeypatch.setattr(smt_world, "_TOK", spy)
    with pytest.raises(SmtError) as e2:
        parse_commands("(assert true)\n" * 100_000)
    assert e2.value.kind == "too_large" and spy.calls == 0


# --------------------------------------------------------------------------- byte-bounded memos


def test_byte_lru_accounting_eviction_and_refusal():
    c = ByteLRU(1000)
    assert c.max_entry == 125
    for i in range(20):
        assert c.put(f"k{i}", i, 100)
        assert c.nbytes <= c.budget
    assert len(c) == 10 and c.info().evictions == 10 and "k9" not in c and "k19" in c
    assert c.get("k10") == 10  # touched: now the most recently used
    c.put("new", -1, 100)
    assert "k10" in c and "k11" not in c
    c.put("new", -2, 50)  # replacing an entry re-charges it
    assert c.get("new") == -2 and c.nbytes == sum(s for _, s in c._d.values()) == 950
    assert not c.put("huge", 0, 126) and "huge" not in c and c.info().refused == 1
    c.clear()
    assert len(c) == 0 and c.nbytes == 0
    with pytest.raises(ValueError):
        ByteLRU(0)


def test_byte_lru_is_consistent_under_threads():
    calls = []

    @byte_lru(20_000, lambda text, v: text_cost(text))
    def f(text: str) -> tuple:
        calls.append(text)
        return (text,)

    def hammer(k: int) -> None:
        for i in range(3000):
            key = f"hot{i % 10}" if i % 2 else f"t{(i * 7 + k) % 400}"  # hot keys hit, the rest evicts
            assert f(key) == (key,)

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = f.cache_info()
    assert info.nbytes == sum(s for _, s in f.cache._d.values()) <= info.budget
    assert info.evictions > 0 and info.hits > 0 and len(calls) == info.misses


def _big_program(u: int, lines: int = 40) -> str:
    return "\n".join(f"each v in REGIONS, c in COLOURS: atleast {i % 5} of x[v,c], x[alder,c], ~x[birch,c]  # {u}"
                     for i in range(lines))


def _assert_within_budget(fn, fed: int) -> None:
    info = fn.cache_info()
    assert info.nbytes <= info.budget, info
    assert info.nbytes == sum(s for _, s in fn.cache._d.values())
    assert info.evictions > 0 and info.entries < fed, info


def test_parse_program_memo_stays_within_its_byte_budget():
    parse_program.cache_clear()
    parse_line.cache_clear()
    budget = parse_program.cache_info().budget
    n = 2 * budget // text_cost(_big_program(0), 40) + 10  # twice the budget's worth of distinct programs
    for u in range(n):
        parse_program(_big_program(u))
    _assert_within_budget(parse_program, n)
    assert parse_line.cache_info().nbytes <= parse_line.cache_info().budget
    assert parse_program(_big_program(n - 1)) is parse_program(_big_program(n - 1))  # recent ones are hits


def _shrink(monkeypatch, fn, budget: int = 1 << 20) -> None:
    """The real memo of ``fn``, emptied and with a smaller budget (restored after the test)."""
    fn.cache_clear()
    monkeypatch.setattr(fn.cache, "budget", budget)
    monkeypatch.setattr(fn.cache, "max_entry", budget // 8)


def test_parse_line_memo_stays_within_its_byte_budget(monkeypatch):
    assert parse_line.cache_info().budget == sat_lang.PARSE_LINE_BUDGET
    _shrink(monkeypatch, parse_line)
    long = lambda u: f"x[r{u},red] | " + " | ".join(f"~x[a{i},c{u}]" for i in range(120))  # noqa: E731
    n = 2 * parse_line.cache.budget // text_cost(long(0), 1) + 10
    for u in range(n):
        parse_line(long(u))
    _assert_within_budget(parse_line, n)


def test_parse_commands_memo_stays_within_its_byte_budget(monkeypatch):
    assert parse_commands.cache_info().budget == smt_world.PARSE_COMMANDS_BUDGET
    _shrink(monkeypatch, parse_commands)
    script = lambda u: "\n".join(f"(assert (or (<= (+ s_dig {i}) e_pour) (>= s_frame (+ e_wire {u}))))"  # noqa: E731
                                 for i in range(20))
    n = 2 * parse_commands.cache.budget // text_cost(script(0), 20) + 10
    for u in range(n):
        parse_commands(script(u))
    _assert_within_budget(parse_commands, n)


def test_edit_model_memos_are_byte_bounded(monkeypatch):
    for fn in (sat_edits._sat_lines, sat_edits._sat_units, sat_edits._smt_units):
        assert isinstance(fn.cache, ByteLRU) and fn.cache.budget == sat_edits.UNITS_BUDGET
        _shrink(monkeypatch, fn)
    n = 2 * (1 << 20) // text_cost(_big_program(0, 8), 8) + 10
    for u in range(n):
        sat_edits._sat_units(_big_program(u, 8))
    for fn in (sat_edits._sat_lines, sat_edits._sat_units):
        _assert_within_budget(fn, n)


def test_huge_entries_are_parsed_but_not_memoised():
    parse_program.cache_clear()
    big = "\n".join(f"each v in REGIONS: atleast {i % 3} of x[v,c] for c in COLOURS  # padding {i:04d} " + "z" * 100
                    for i in range(sat_lang.MAX_LINES))
    assert len(big) <= sat_lang.MAX_TEXT and text_cost(big, sat_lang.MAX_LINES) > parse_program.cache.max_entry
    a = parse_program(big)
    assert big not in parse_program.cache and parse_program.cache_info().refused == 1
    assert parse_program(big) == a == parse_program.__wrapped__(big)


def test_errors_are_never_memoised():
    parse_program.cache_clear()
    for _ in range(3):
        with pytest.raises(EncodingError):
            parse_program("x[a,red] $")
    info = parse_program.cache_info()
    assert info.entries == 0 and info.misses == 3


@pytest.fixture(scope="module")
def builtin_programs():
    """Every built-in task's gold plus each gold with its family's slip forced on."""
    from cfjax.domains.sat.suite import SATSuite
    from cfjax.llm.base import DraftRequest
    from cfjax.llm.calls import DRAFT_ACTION
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig

    suite = SATSuite.build(tempfile.mkdtemp(prefix="cfjax-sat-bounds-"))
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(p_error=1.0, p_error_look_alike=1.0, p_noise=0.0))
    progs = [(t, suite.answer_key(t.task_id).gold) for t in suite.tasks]
    progs += [(t, bb.call(DRAFT_ACTION, DraftRequest(t)).action) for t in suite.tasks]
    return suite, progs


def test_memoised_parsers_return_what_the_plain_parsers_return(builtin_programs):
    _, progs = builtin_programs
    for t, text in progs:
        if t.domain == "sat":
            for s in sat_lang.program_lines(text):
                assert parse_line(s) == parse_line.__wrapped__(s)
            assert parse_program(text) == parse_program.__wrapped__(text)
            assert parse_program(text) is parse_program(text)
        else:
            assert parse_commands(text) == parse_commands.__wrapped__(text)
            assert parse_commands(text) is parse_commands(text)


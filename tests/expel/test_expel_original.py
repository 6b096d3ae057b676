"""The original ExpeL (cfjax/expel/pool.py, pool_calls.py): the voted insight pool's count arithmetic,
cap and order, the success batches of 8, few-shot retrieval by question similarity, the parsers, the
scripted handlers under the answer-key guard, persistence, and one quick unit through the OpenAI client."""

from __future__ import annotations

import json

import pytest

from cfjax.expel.pool import ExpeLOriginalSystem, InsightPool
from cfjax.expel.pool_calls import (EXPEL_COMPARE, EXPEL_SUCCESSES, CompareRequest, Op, SuccessesRequest, parse_ops,
                                    rule_edit, rule_text, show_rule)
from cfjax.memory import Experience, FrozenMemoryError, MemorySystem, RecallQuery, SystemContext, why_not
from cfjax.registry import MEMORY_SYSTEMS
from cfjax.types import Attempt, Task, Usage


@pytest.fixture(scope="module")
def sql(tmp_path_factory):
    from cfjax.domains import build_suite

    return build_suite("sql", tmp_path_factory.mktemp("expel_original") / "sql")


class _Canned:
    """A backbone answering each call kind with a fixed reply, recording the requests."""

    name = "canned"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies, self.requests = replies, []

    def call(self, kind, req):
        self.requests.append((kind.name, req))
        return kind.parse(self.replies[kind.name], req, Usage(3, 4))


def _task(tid: str, question: str = "") -> Task:
    return Task(tid, question or f"question {tid}", "env", "schema", {"cues": ("on record",)})


def _pool_with(n: int, **kw) -> InsightPool:
    p = InsightPool(**kw)
    p.apply([Op("ADD", None, f"rule {i}.") for i in range(n)])
    return p


# ------------------------------------------------------------------------------------------- registration
def test_registered_for_antipersist_and_compare_and_the_reduced_row_is_unchanged():
    info = MEMORY_SYSTEMS.get("expel_original")
    assert set(info.runners) == {"antipersist", "compare"} and info.table == "table1"
    assert "reduced ExpeL, row expel" in why_not(info, "countermem")
    assert "not a row of upliftmem" in why_not(info, "upliftmem")
    assert set(MEMORY_SYSTEMS.get("expel").runners) == {"countermem", "antipersist", "compare"}


# ------------------------------------------------------------------------------------------- the pool
def test_count_arithmetic_add_agree_remove_and_drop_at_zero():
    p = InsightPool()
    p.apply([Op("ADD", None, "r.")])
    assert [(r.text, r.count) for r in p.rules] == [("r.", 2)]  # ADD starts at 2
    p.apply([Op("AGREE", 1, "")])
    assert p.rules[0].count == 3  # 2 + 1
    p.apply([Op("REMOVE", 1, "")])
    assert p.rules[0].count == 2  # 3 - 1 (pool not full)
    p.apply([Op("EDIT", 1, "r, refined.")])
    assert (p.rules[0].text, p.rules[0].count) == ("r, refined.", 3)  # EDIT replaces the text, + 1
    p.apply([Op("REMOVE", 1, ""), Op("REMOVE", 1, ""), Op("REMOVE", 1, "")])
    assert len(p) == 0 and p.stats["dropped"] == 1  # 3 - 1 - 1 - 1 = 0 → dropped
    assert (p.stats["add"], p.stats["agree"], p.stats["edit"], p.stats["remove"]) == (1, 1, 1, 4)


def test_a_full_pool_of_20_weighs_remove_3_and_refuses_an_add():
    p = _pool_with(20)
    assert len(p) == 20 and p.full()
    p.apply([Op("AGREE", 1, ""), Op("AGREE", 1, "")])  # rule 0: 2 + 1 + 1 = 4, first
    assert p.rules[0].text == "rule 0." and p.rules[0].count == 4
    p.apply([Op("REMOVE", 1, ""), Op("ADD", None, "one more.")])
    assert p.rules[-1].text == "rule 0." and p.rules[-1].count == 1  # 4 - 3 at a full pool; sorted last
    assert len(p) == 20 and p.stats["capped"] == 1  # the ADD found 20 live rules
    p.apply([Op("REMOVE", 1, ""), Op("ADD", None, "one more.")])  # rule 1: 2 - 3 = -1 → dropped, 19 live
    assert len(p) == 20 and [(r.text, r.count) for r in p.rules[-2:]] == [("one more.", 2), ("rule 0.", 1)]
    assert "rule 1." not in p.texts() and p.stats["dropped"] == 1


def test_the_code_variant_has_no_hard_cap_and_remove_3_only_from_25():
    p = _pool_with(20, full_margin=5, hard_cap=False)
    p.apply([Op("REMOVE", 1, ""), Op("ADD", None, "new.")])
    assert len(p) == 21 and "rule 0." in p.texts()  # 2 - 1 = 1 kept; the ADD is not capped


def test_sorted_by_count_ties_keep_their_order():
    p = _pool_with(3)  # rule 0, 1, 2 at 2
    p.apply([Op("AGREE", 3, "")])
    assert p.texts() == ("rule 2.", "rule 0.", "rule 1.")  # 3, 2, 2
    p.apply([Op("AGREE", 3, ""), Op("AGREE", 3, "")])  # rule 1: 2 + 2 = 4
    assert p.texts() == ("rule 1.", "rule 2.", "rule 0.") and [r.count for r in p.rules] == [4, 3, 2]


def test_ops_on_missing_rules_are_ignored_and_counted_and_duplicates_too():
    p = _pool_with(3)
    p.apply([Op("AGREE", 7, ""), Op("REMOVE", 0, ""), Op("EDIT", 9, "x."), Op("ADD", None, "RULE  0.")])
    assert [r.count for r in p.rules] == [2, 2, 2] and p.stats["ignored"] == 3 and p.stats["duplicates"] == 1
    p.apply([Op("EDIT", 3, "rule 0.")])  # an EDIT to rule 0's own text is agreeing with rule 0
    assert p.texts()[0] == "rule 0." and p.rules[0].count == 3 and "rule 2." in p.texts()


# ------------------------------------------------------------------------------------------- parsers
def test_parser_reads_operations_and_survives_garbage():
    ops, failed, bad = parse_ops("- **ADD 3:** Count values with COUNT(col).\n2. AGREE 1: old\nREMOVE 2\n"
                                 "EDIT: no number\nEDIT 4:\nchatter")
    assert ops == (Op("ADD", None, "Count values with COUNT(col)."), Op("AGREE", 1, "old"), Op("REMOVE", 2, ""))
    assert not failed and bad == 2
    assert parse_ops("lorem ipsum\n\n") == ((), True, 0)
    assert parse_ops("NONE.") == ((), False, 0)
    res = EXPEL_COMPARE.parse("%%% {}", None, Usage(1, 1))
    assert res.ops == () and res.parse_failed
    r = rule_text("Write `a >= 1`.", "a > 1", "a >= 1")
    assert rule_edit(r) == ("a > 1", "a >= 1") and show_rule(r) == "Write `a >= 1`.\nEDIT: a > 1 -> a >= 1"
    assert rule_edit("a rule in words.") is None and show_rule("a rule in words.") == "a rule in words."


# ------------------------------------------------------------------------------------------- the system
def _exp(tid: str, actions: list[str], solved: bool, ep: int = 0, question: str = "") -> Experience:
    atts = tuple(Attempt(a, "ok" if solved and i == len(actions) - 1 else "wrong",
                         1.0 if solved and i == len(actions) - 1 else 0.0) for i, a in enumerate(actions))
    return Experience(_task(tid, question), atts, solved, ep)


_RULE = "Write `a >= 1` for at least. [EDIT: a > 1 -> a >= 1]"


def test_build_compares_pairs_then_reads_successes_in_batches_of_8():
    bb = _Canned({"EXPEL_COMPARE": f"ADD: {_RULE}", "EXPEL_SUCCESSES": f"AGREE 1: {_RULE}"})
    ctx = SystemContext(bb, edits=None, max_attempts=3)  # type: ignore[arg-type]
    s = ExpeLOriginalSystem(ctx)
    assert isinstance(s, MemorySystem)
    exps = [_exp("t0", ["a > 1", "a > 2", "a >= 1"], True)]  # two failed trials, one success → 2 pairs
    exps += [_exp(f"t{i}", ["x"], True) for i in range(1, 10)] + [_exp("t10", ["y", "z"], False)]
    s.build(exps)
    kinds = [k for k, _ in bb.requests]
    assert kinds == ["EXPEL_COMPARE"] * 2 + ["EXPEL_SUCCESSES"] * 2  # all pairs first, then 10 = 8 + 2
    assert [len(r.successes) for k, r in bb.requests if k == "EXPEL_SUCCESSES"] == [8, 2]
    assert [r.failed.action for k, r in bb.requests if k == "EXPEL_COMPARE"] == ["a > 1", "a > 2"]
    # ADD → 2; the second ADD is a duplicate; AGREE → 3; AGREE → 4
    assert [(r.text, r.count) for r in s.pool.rules] == [(_RULE, 4)] and s.pool.stats["duplicates"] == 1
    assert ctx.ledger.total.llm_calls == 4 and ctx.ledger.verification.llm_calls == 4
    assert bb.requests[1][1].rules == (_RULE,)  # the second call saw the pool as the first left it


def test_update_reads_a_batch_when_8_successes_are_pending_and_pairs_cross_episodes():
    bb = _Canned({"EXPEL_COMPARE": f"ADD: {_RULE}", "EXPEL_SUCCESSES": "NONE"})
    s = ExpeLOriginalSystem(SystemContext(bb, edits=None, max_attempts=3))  # type: ignore[arg-type]
    s.update(_exp("t0", ["a > 1"], False, 0))
    assert bb.requests == []  # a failure alone has no pair
    s.update(_exp("t0", ["a >= 1"], True, 1))  # the earlier failed episode of t0 pairs with this success
    assert [k for k, _ in bb.requests] == ["EXPEL_COMPARE"] and bb.requests[0][1].failed.action == "a > 1"
    for i in range(1, 7):
        s.update(_exp(f"t{i}", ["x"], True, 1 + i))
    assert s.summary()["pending_successes"] == 7 and s.summary()["success_calls"] == 0
    s.update(_exp("t7", ["x"], True, 9))
    assert s.summary()["pending_successes"] == 0 and s.summary()["success_calls"] == 1
    assert len(bb.requests[-1][1].successes) == 8


def test_fewshot_top2_by_question_similarity_never_the_task_itself(sql):
    bb = _Canned({"EXPEL_COMPARE": f"ADD: {_RULE}", "EXPEL_SUCCESSES": "NONE"})
    s = ExpeLOriginalSystem(SystemContext(bb, sql.edits, 3))
    q = "How many members have a phone number on record?"
    s.build([_exp("a", ["SELECT COUNT(*) FROM members", "SELECT COUNT(phone) FROM members"], True, 0, q),
             _exp("b", ["SELECT COUNT(phone) FROM members"], True, 1, q),
             _exp("c", ["SELECT COUNT(email) FROM members"], True, 2, "How many members have an email on record?"),
             _exp("d", ["SELECT title FROM books ORDER BY title"], True, 3, "List all books sorted by title.")])
    top = s.fewshots(_task("a", q))
    assert [t for t, _ in top] == ["b", "c"] and top[0][1] == pytest.approx(1.0)  # b: the same question
    mem = s.recall(RecallQuery(_task("b", q), (), "SELECT 1", 0, 0))
    assert mem is not None and mem.kind == "memories"
    assert "[insight-1]" in mem.text and "[example-1]" in mem.text and "[example-2]" in mem.text
    assert "EDIT: a > 1 -> a >= 1" in mem.text  # the insight's EDIT line
    assert "EDIT: SELECT COUNT(*) -> SELECT COUNT(phone)" in mem.text  # a's contrast, a's the top example for b
    assert s.examples["b"].edit is None  # a first-attempt success holds no contrast
    assert len(s.pool) == 1 and s.summary()["examples"] == 4


def test_save_load_round_trip_bad_files_and_frozen(tmp_path):
    bb = _Canned({"EXPEL_COMPARE": f"ADD: {_RULE}", "EXPEL_SUCCESSES": "NONE"})
    ctx = SystemContext(bb, edits=None, max_attempts=3)  # type: ignore[arg-type]
    s = ExpeLOriginalSystem(ctx)
    s.update(_exp("t0", ["a > 1", "a >= 1"], True))
    s.update(_exp("t1", ["q"], False))
    s.save(tmp_path / "pool.json")
    t = ExpeLOriginalSystem(ctx)
    t.load(tmp_path / "pool.json")
    assert t.summary() == s.summary() and t.pool.texts() == s.pool.texts()
    assert t.pending == s.pending and t.failed == s.failed and t.tasks["t0"].attrs["cues"] == ("on record",)
    s.freeze()
    with pytest.raises(FrozenMemoryError):
        s.update(_exp("t2", ["x"], True))
    assert s.recall(RecallQuery(_task("t9"), (), None, 0, 0)) is not None  # recall still works when frozen
    from cfjax.infra.io import atomic_write_json

    atomic_write_json(tmp_path / "other.json", {"format": "other"})
    with pytest.raises(ValueError, match="not an ExpeL \\(original\\) store"):
        t.load(tmp_path / "other.json")
    data = json.loads((tmp_path / "pool.json").read_text())["payload"]
    atomic_write_json(tmp_path / "bad.json", {**data, "rules": {"x": 1}})
    with pytest.raises(ValueError, match="field 'rules' must be a list"):
        t.load(tmp_path / "bad.json")
    atomic_write_json(tmp_path / "bad2.json", {**data, "pending": [["nobody", ["a", "f", 1.0]]]})
    with pytest.raises(ValueError, match="malformed ExpeL"):
        t.load(tmp_path / "bad2.json")


# ------------------------------------------------------------------------------------------- scripted
def test_scripted_handlers_under_the_answer_key_guard(sql):
    from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
    from cfjax.types import answer_key_guard

    sp = sql.splits(seed=0, n_val=5)
    task = next(t for t in list(sp.build) + list(sp.eval) if "members" in t.attrs.get("tables", ()))
    sim = ScriptedBackbone(sql.scripted_domain(), ScriptedConfig())
    fail, ok = Attempt("SELECT COUNT(*) FROM members", "wrong", 0.0), Attempt("SELECT COUNT(phone) FROM members", "ok", 1.0)
    same_shape = "Count values. [EDIT: SELECT COUNT(*) -> SELECT COUNT(email)]"
    other_after = "Count distinct. [EDIT: SELECT COUNT(*) -> SELECT COUNT(DISTINCT email)]"
    with answer_key_guard():
        r0 = sim.call(EXPEL_COMPARE, CompareRequest(task, fail, ok, (), False, 0))
        r1 = sim.call(EXPEL_COMPARE, CompareRequest(task, fail, ok, ("words only.", same_shape), False, 0))
        r2 = sim.call(EXPEL_COMPARE, CompareRequest(task, fail, ok, (other_after,), False, 0))
        r3 = sim.call(EXPEL_SUCCESSES, SuccessesRequest((task,), (ok,), (same_shape, rule_text(
            "Avoid.", "SELECT COUNT(email)", "SELECT COUNT(*)"), "words only."), False, 0))
    assert len(r0.ops) == 1 and r0.ops[0].kind == "ADD"
    assert rule_edit(r0.ops[0].text) == ("SELECT COUNT(*)", "SELECT COUNT(phone)")
    assert r1.ops == (Op("AGREE", 2, same_shape),)  # the same rule for another column (masked shape)
    assert len(r2.ops) == 1 and (r2.ops[0].kind, r2.ops[0].number) in (("EDIT", 1), ("ADD", None))
    assert r3.ops[0] == Op("AGREE", 1, same_shape) and all(o.kind == "REMOVE" and o.number == 2 for o in r3.ops[1:])
    assert not (r0.parse_failed or r1.parse_failed or r2.parse_failed or r3.parse_failed)


# ------------------------------------------------------------------------------------------- OpenAI client
def test_a_quick_unit_through_the_openai_client(sql):
    from llm_server import canned_sql
    from tests.peers.conftest import openai_system

    repaired = canned_sql(sql, slip=lambda prompt: False)
    rule = "Count the column on record. [EDIT: SELECT COUNT(*) -> SELECT COUNT(phone)]"

    def extra(prompt: str) -> str | None:
        if "### Failed trial" in prompt:
            return f"ADD: {rule}"
        if "### Successful trials" in prompt:
            return f"AGREE 1: {rule}"
        if "### Task\n" in prompt and "(no earlier attempts)" in prompt:  # first drafts fail ...
            return "ACTION:\n```sql\nSELECT COUNT(*) FROM members\n```"
        if "### Task\n" in prompt:  # ... retries are the canned gold: fail → success pairs to compare
            return repaired(prompt)
        return None

    res, seen = openai_system(sql, "expel_original", extra)
    assert 0.0 <= res["success"] <= 100.0
    n_compare = sum("### Failed trial" in p for p in seen)
    n_success = sum("### Successful trials" in p for p in seen)
    assert n_compare >= 1 and n_success >= 1
    assert (res["summary"]["compare_calls"], res["summary"]["success_calls"]) == (n_compare, n_success)
    assert res["summary"]["insights"] == 1 and res["summary"]["ops_add"] == 1  # later ADDs are duplicates
    assert res["build_llm_calls"] >= n_compare + n_success
    assert any("[insight-1]" in p and "[example-2]" in p for p in seen)  # the memory set reached the executor

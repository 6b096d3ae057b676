"""Tests for SQL decision units and one-unit edits (cfjax.domains.sql.edits)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfjax.llm.base import DraftRequest
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.domains.sql import edits as se
from cfjax.domains.sql.edits import EditError, Unit


@pytest.fixture(scope="module")
def corpus(suite) -> list[tuple[str, str]]:
    """(sql, env_id): every gold of the suite and every slipped draft (normalised)."""
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(p_error=1.0, p_error_look_alike=1.0, p_noise=0.0))
    out = set()
    for t in suite.tasks:
        out.add((se.normalize(suite.answer_key(t.task_id).gold), t.env_id))
        out.add((bb.call(DRAFT_ACTION, DraftRequest(t)).action, t.env_id))
    return sorted(out)


FULL = ("SELECT p.name FROM patients AS p JOIN visits AS v ON v.patient_id = p.id "
        "WHERE p.age >= 30 AND LOWER(p.city) = 'paris' GROUP BY p.id HAVING COUNT(*) > 2 "
        "ORDER BY p.name DESC LIMIT 5")


# --------------------------------------------------------------------------- units


def test_units_of_a_full_query():
    us = se.units(FULL)
    assert [u.kind for u in us] == ["select", "join", "where", "where", "group", "having", "order", "limit"]
    assert us[0] == Unit("select", "SELECT p.name")
    assert us[1].text == "JOIN visits AS v ON v.patient_id = p.id"
    assert us[2].text == "p.age >= 30"
    assert us[3].text == "LOWER(p.city) = 'paris'"
    assert us[5].text == "COUNT(*) > 2"
    assert us[7].text == "LIMIT 5"


def test_units_replace_round_trip_on_suite(corpus):
    for sql, _ in corpus:
        assert se.normalize(sql) == sql
        us = se.units(sql)
        assert us[0].kind == "select"
        for i, u in enumerate(us):
            assert se.replace_unit(sql, i, u.text) == sql, (sql, i)
            assert se.diff_units(sql, se.replace_unit(sql, i, u.text)) is None  # zero changed units


def test_replace_changes_exactly_one_unit():
    cases = [
        (0, "SELECT DISTINCT p.name"),
        (1, "JOIN visits AS v ON v.id = p.id"),
        (2, "p.age > 30"),
        (3, "p.city = 'Paris'"),
        (4, "GROUP BY p.name"),
        (5, "COUNT(*) >= 2"),
        (6, "ORDER BY p.name ASC"),
        (7, "LIMIT 6"),
    ]
    before = se.units(FULL)
    for i, text in cases:
        new = se.replace_unit(FULL, i, text)
        d = se.diff_units(FULL, new)
        assert d is not None, (i, new)
        assert d[0] == i and d[1] == before[i] and d[2].text == text and d[2].kind == before[i].kind
        after = se.units(new)
        assert [u for j, u in enumerate(after) if j != i] == [u for j, u in enumerate(before) if j != i]


def test_replace_select_accepts_text_without_select_keyword():
    assert se.replace_unit("SELECT a FROM t", 0, "DISTINCT a, b") == "SELECT DISTINCT a, b FROM t"
    assert se.replace_unit("SELECT DISTINCT a FROM t", 0, "SELECT a;") == "SELECT a FROM t"


def test_every_rule_edit_changes_exactly_one_unit_and_parses(suite, corpus):
    n = 0
    for sql, env in corpus:
        for schema in (None, suite.specs[env]):
            base = se.units(sql)
            for i, text in se.rule_edits(sql, schema):
                assert 0 <= i < len(base)
                assert text != base[i].text  # no no-ops
                new = se.replace_unit(sql, i, text)
                se.units(new)  # parses
                d = se.diff_units(sql, new)
                assert d is not None and d[0] == i, (sql, i, text, new)
                assert d[2].text == text
                n += 1
    assert n > 1000


def test_rule_edits_cover_the_documented_operators(suite):
    hr = suite.specs["hr"]
    got = dict.fromkeys(["ge", "null", "lower", "distinct", "count", "join", "order", "limit"], False)
    for sql in [
        "SELECT name FROM employees WHERE age > 3",
        "SELECT name FROM employees WHERE email = ''",
        "SELECT name FROM employees WHERE city = 'Paris'",
        "SELECT COUNT(*) FROM employees",
        "SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.id = d.id",
        "SELECT name FROM employees ORDER BY salary DESC LIMIT 3",
    ]:
        for i, text in se.rule_edits(sql, hr):
            got["ge"] |= text == "age >= 3"
            got["null"] |= text == "email IS NULL"
            got["lower"] |= text == "LOWER(city) = 'paris'"
            got["distinct"] |= text.startswith("SELECT DISTINCT")
            got["count"] |= text == "SELECT COUNT(email)"
            got["join"] |= text == "JOIN departments AS d ON e.dept_id = d.id"
            got["order"] |= text == "ORDER BY salary ASC"
            got["limit"] |= text in ("LIMIT 4", "LIMIT 2")
    assert all(got.values()), got
    assert se.rule_edits("not sql at all") == []


# --------------------------------------------------------------------------- hypothesis

COLS = ["name", "age", "city", "salary"]


@st.composite
def predicates(draw) -> str:
    col = draw(st.sampled_from(COLS))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return f"{col} {draw(st.sampled_from(['>', '>=', '<', '<=', '=', '<>']))} {draw(st.integers(0, 99))}"
    if kind == 1:
        return f"{col} IS NULL"
    if kind == 2:
        return f"LOWER({col}) = '{draw(st.sampled_from(['paris', 'lima', 'x']))}'"
    return f"{col} = ''"


@st.composite
def queries(draw) -> str:
    cols = draw(st.lists(st.sampled_from(COLS), min_size=1, max_size=3, unique=True))
    sql = f"SELECT {'DISTINCT ' if draw(st.booleans()) else ''}{', '.join(cols)} FROM employees"
    preds = draw(st.lists(predicates(), max_size=3))
    if preds:
        sql += " WHERE " + " AND ".join(preds)
    if draw(st.booleans()):
        sql += f" ORDER BY {draw(st.sampled_from(COLS))} {draw(st.sampled_from(['ASC', 'DESC']))}"
        if draw(st.booleans()):
            sql += f" LIMIT {draw(st.integers(1, 9))}"
    return sql


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries(), st.data())
def test_property_replace_one_unit(sql, data):
    norm = se.normalize(sql)
    us = se.units(sql)
    for i, u in enumerate(us):
        assert se.replace_unit(sql, i, u.text) == norm
    i = data.draw(st.integers(0, len(us) - 1))
    kind = us[i].kind
    if kind == "select":
        text = "SELECT " + data.draw(st.sampled_from(["name", "DISTINCT age", "city, salary"]))
    elif kind == "where":
        text = data.draw(predicates())
    elif kind == "order":
        text = f"ORDER BY {data.draw(st.sampled_from(COLS))} DESC"
    else:
        text = f"LIMIT {data.draw(st.integers(1, 20))}"
    new = se.replace_unit(sql, i, text)
    after = se.units(new)
    assert [u.kind for u in after] == [u.kind for u in us]
    assert [u for j, u in enumerate(after) if j != i] == [u for j, u in enumerate(us) if j != i]
    d = se.diff_units(sql, new)
    if after[i].text == us[i].text:
        assert d is None
    else:
        assert d is not None and d[0] == i


@settings(max_examples=150, deadline=None)
@given(queries())
def test_property_rule_edits_one_unit(sql):
    for i, text in se.rule_edits(sql):
        new = se.replace_unit(sql, i, text)
        d = se.diff_units(sql, new)
        assert d is not None and d[0] == i and d[2].text == text


# --------------------------------------------------------------------------- diff_units


def test_diff_units_none_cases():
    a = "SELECT name FROM t WHERE a > 1 AND b = 2"
    assert se.diff_units(a, a) is None  # zero units differ
    assert se.diff_units(a, "SELECT name FROM t WHERE a >= 1 AND b = 3") is None  # two units
    assert se.diff_units(a, "SELECT name FROM t WHERE a > 1") is None  # different kinds/length
    assert se.diff_units(a, "garbage (") is None
    assert se.diff_units("SELECT name FROM t", "SELECT name FROM t ORDER BY a") is None
    d = se.diff_units(a, "select  name from t where a >= 1 and b = 2")
    assert d == (1, Unit("where", "a > 1"), Unit("where", "a >= 1"))


# --------------------------------------------------------------------------- signatures


@pytest.mark.parametrize("text,sig", [
    ("age > 1", "<id> > <num>"),
    ("e.age >= 30", "<id> >= <num>"),
    ("salary <= 1.5", "<id> <= <num>"),
    ("LOWER(p.city) = 'paris'", "LOWER ( <id> ) = <str>"),
    ("lower(city) = 'it''s'", "LOWER ( <id> ) = <str>"),
    ("email IS NULL", "<id> IS NULL"),
    ("email = ''", "<id> = <str>"),
    ("select distinct city", "SELECT DISTINCT <id>"),
    ("SELECT COUNT(*)", "SELECT COUNT ( * )"),
    ("JOIN departments AS d ON e.dept_id = d.id", "JOIN <id> AS <id> ON <id> = <id>"),
    ("ORDER BY salary desc", "ORDER BY <id> DESC"),
    ("LIMIT 3", "LIMIT <num>"),
])
def test_signature_masks_identifiers_and_literals(text, sig):
    assert se.signature(text) == sig


def test_signature_equal_across_columns_and_values_but_not_operators():
    assert se.signature("age > 18") == se.signature("t.salary > 50000")
    assert se.signature("age > 18") != se.signature("age >= 18")
    assert se.signature("city = 'Paris'") != se.signature("city = 3")


# --------------------------------------------------------------------------- transfer_edit


def test_transfer_edit_carries_inclusivity_to_another_column_and_value():
    target = "SELECT name FROM products WHERE category = 'Toys' AND stock > 12"
    moved = se.transfer_edit("a > 1", "a >= 1", target)
    assert moved == (2, "stock >= 12")
    new = se.replace_unit(target, *moved)
    assert new == "SELECT name FROM products WHERE category = 'Toys' AND stock >= 12"
    assert se.diff_units(target, new)[0] == 2


def test_transfer_edit_qualified_names_and_first_match():
    target = "SELECT name FROM t WHERE x.a > 2 AND y.b > 5"
    assert se.transfer_edit("e.age > 1", "e.age >= 1", target) == (1, "x.a >= 2")


def test_transfer_edit_no_matching_unit_returns_none():
    assert se.transfer_edit("a > 1", "a >= 1", "SELECT name FROM t WHERE b < 7") is None
    assert se.transfer_edit("a > 1", "a >= 1", "SELECT name FROM t") is None
    assert se.transfer_edit("a > 1", "a >= 1", "DELETE FROM t") is None
    assert se.transfer_edit("a > 1", "a >= 1", "not sql (") is None
    # a token seen twice must bind consistently
    assert se.transfer_edit("a = a", "a IS NULL", "SELECT x FROM t WHERE b = c") is None
    assert se.transfer_edit("a = a", "a IS NULL", "SELECT x FROM t WHERE b = b") == (1, "b IS NULL")


def test_transfer_edit_resolver_for_unbound_identifiers():
    before = "JOIN departments AS d ON e.id = d.id"
    after = "JOIN departments AS d ON e.dept_id = d.id"
    target = "SELECT o.name, c.name FROM orders AS o JOIN customers AS c ON o.id = c.id"
    calls = []

    def resolve(tok, binding):
        calls.append((tok, dict(binding)))
        return "o.customer_id" if tok == "e.dept_id" else None

    assert se.transfer_edit(before, after, target, resolve=resolve) == (1, "JOIN customers AS c ON o.customer_id = c.id")
    assert calls and calls[0][0] == "e.dept_id" and calls[0][1]["e.id"] == "o.id"
    # without a resolver the token is kept as written
    assert se.transfer_edit(before, after, target) == (1, "JOIN customers AS c ON e.dept_id = c.id")


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", [
    "UPDATE t SET a = 1", "DELETE FROM t", "DROP TABLE t", "INSERT INTO t VALUES (1)",
    "SELECT 1; SELECT 2", "SELECT a FROM t UNION SELECT b FROM u", "", "SELEC FROM (", "garbage )(",
])
def test_edit_error_on_non_select_or_garbage(bad):
    with pytest.raises(EditError):
        se.units(bad)
    with pytest.raises(EditError):
        se.replace_unit(bad, 0, "SELECT a")
    with pytest.raises(EditError):
        se.alias_map(bad)
    assert se.normalize(bad) == " ".join(bad.split())


@pytest.mark.parametrize("i,text", [
    (9, "x"), (-1, "SELECT a"),
    (1, "SELECT x FROM y"), (1, "a >"), (1, "(SELECT 1)"),
    (3, "WHERE a > 1"), (4, "a > 1"),
])
def test_edit_error_on_bad_replacement(i, text):
    q = "SELECT name FROM t WHERE a > 1 AND b = 2 ORDER BY a LIMIT 3"
    with pytest.raises(EditError):
        se.replace_unit(q, i, text)


def test_edit_error_is_a_value_error():
    assert issubclass(EditError, ValueError)


# --------------------------------------------------------------------------- distractor operators


@pytest.mark.parametrize("sql,edit", [
    # comparison mirrored / negated, literal moved away from the inclusivity-equivalent value
    ("SELECT name FROM employees WHERE age > 28", (1, "age < 28")),
    ("SELECT name FROM employees WHERE age > 28", (1, "age <= 28")),
    ("SELECT name FROM employees WHERE age > 28", (1, "age > 29")),
    ("SELECT name FROM employees WHERE age >= 28", (1, "age <= 28")),
    ("SELECT name FROM employees WHERE age >= 28", (1, "age < 28")),
    ("SELECT name FROM employees WHERE age >= 28", (1, "age >= 27")),
    ("SELECT name FROM employees WHERE age < 36", (1, "age < 35")),
    ("SELECT name FROM employees WHERE age <= 36", (1, "age <= 37")),
    ("SELECT name FROM employees WHERE age = 5", (1, "age <> 5")),
    ("SELECT name FROM employees WHERE age = 5", (1, "age = 6")),
    ("SELECT name FROM employees WHERE age = 5", (1, "age = 4")),
    # negated NULL / string tests, title-cased literal
    ("SELECT name FROM employees WHERE email IS NULL", (1, "NOT email IS NULL")),
    ("SELECT name FROM employees WHERE NOT email IS NULL", (1, "email IS NULL")),
    ("SELECT name FROM employees WHERE email = ''", (1, "email <> ''")),
    ("SELECT name FROM employees WHERE city = 'porto'", (1, "city <> 'porto'")),
    ("SELECT name FROM employees WHERE city = 'porto'", (1, "city = 'Porto'")),
    ("SELECT name FROM employees WHERE LOWER(city) = 'accra'", (1, "LOWER(city) <> 'accra'")),
    # AND <-> OR inside one conjunct
    ("SELECT name FROM employees WHERE (age > 3 OR city = 'x') AND age < 9", (1, "age > 3 AND city = 'x'")),
    # aggregates
    ("SELECT SUM(salary), MIN(age) FROM employees", (0, "SELECT AVG(salary), MIN(age)")),
    ("SELECT SUM(salary), MIN(age) FROM employees", (0, "SELECT SUM(salary), MAX(age)")),
    ("SELECT COUNT(email) FROM employees", (0, "SELECT COUNT(DISTINCT email)")),
    ("SELECT COUNT(DISTINCT email) FROM employees", (0, "SELECT COUNT(email)")),
    ("SELECT COUNT(*) FROM employees", (0, "SELECT COUNT(DISTINCT email)")),
    ("SELECT COUNT(*) FROM employees", (0, "SELECT COUNT(NULLIF(email, ''))")),
    ("SELECT COUNT(*) FROM employees", (0, "SELECT COUNT(*) - COUNT(email)")),
    ("SELECT COUNT(*) FROM employees", (0, "SELECT COUNT(id)")),
    ("SELECT COUNT(email) FROM employees", (0, "SELECT COUNT(NULLIF(email, ''))")),
    ("SELECT COUNT(email) FROM employees", (0, "SELECT COUNT(*) - COUNT(email)")),
    ("SELECT d.name FROM departments AS d JOIN employees AS e ON e.dept_id = d.id GROUP BY d.id "
     "HAVING SUM(e.salary) > 4", (3, "AVG(e.salary) > 4")),
    ("SELECT d.name FROM departments AS d JOIN employees AS e ON e.dept_id = d.id GROUP BY d.id "
     "HAVING COUNT(*) >= 4", (3, "COUNT(*) < 4")),
    # a projected TEXT column case-folded (schema), not a numeric one
    ("SELECT city FROM employees", (0, "SELECT LOWER(city)")),
    ("SELECT city FROM employees", (0, "SELECT UPPER(city)")),
    ("SELECT city FROM employees", (0, "SELECT DISTINCT LOWER(city)")),
    ("SELECT DISTINCT city FROM employees", (0, "SELECT UPPER(city)")),
    ("SELECT DISTINCT city FROM employees", (0, "SELECT DISTINCT LOWER(city)")),
    ("SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.id = d.id", (0, "SELECT e.name, LOWER(d.name)")),
    # joins: LEFT <-> inner, a shared column other than id
    ("SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.id = d.id",
     (1, "LEFT JOIN departments AS d ON e.id = d.id")),
    ("SELECT e.name, d.name FROM employees AS e LEFT JOIN departments AS d ON e.dept_id = d.id",
     (1, "JOIN departments AS d ON e.dept_id = d.id")),
    ("SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.id = d.id",
     (1, "JOIN departments AS d ON e.city = d.city")),
    # one key of a multi-key ORDER BY
    ("SELECT name FROM employees ORDER BY age DESC, salary DESC", (1, "ORDER BY age DESC, salary ASC")),
])
def test_distractor_operators_produce_the_intended_edit(suite, sql, edit):
    hr = suite.specs["hr"]
    got = se.rule_edits(sql, hr)
    assert edit in got, got
    assert edit in se.distractor_edits(sql, hr)


@pytest.mark.parametrize("sql,absent", [
    # the literal shift that equals the inclusivity flip on integers is not offered
    ("SELECT name FROM employees WHERE age > 28", "age > 27"),
    ("SELECT name FROM employees WHERE age >= 28", "age >= 29"),
    ("SELECT name FROM employees WHERE age < 36", "age < 37"),
    ("SELECT name FROM employees WHERE age <= 36", "age <= 35"),
    ("SELECT name FROM employees WHERE age > 0", "age > -1"),
    # no case folding of a numeric column, no LOWER(col) <-> UPPER(col) equivalents
    ("SELECT age FROM employees", "SELECT LOWER(age)"),
    ("SELECT name FROM employees WHERE LOWER(city) = 'accra'", "UPPER(city) = 'ACCRA'"),
])
def test_distractor_operators_avoid_equivalent_or_implausible_edits(suite, sql, absent):
    assert absent not in {t for _, t in se.rule_edits(sql, suite.specs["hr"])}


def test_the_ids_join_stays_a_repair_edit_not_a_distractor(suite):
    sql, hr = "SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.dept_id = d.id", suite.specs["hr"]
    ids = (1, "JOIN departments AS d ON e.id = d.id")
    assert ids in se.rule_edits(sql, hr) and ids not in se.distractor_edits(sql, hr)


def test_count_distractors_keep_the_count_column_slip_first(suite):
    # the error model's count_column slip takes the first ``SELECT COUNT(`` edit: the repair edit
    hr = suite.specs["hr"]
    counts = [t for _, t in se.rule_edits("SELECT COUNT(*) FROM employees", hr) if t.startswith("SELECT COUNT(")]
    assert counts[0] == "SELECT COUNT(email)" and len(counts) > 1
    # a table without nullable columns gets no COUNT(*) distractor at all (so that slip stays "none")
    assert se.rule_edits("SELECT COUNT(*) FROM departments", hr) == []
    # no COUNT(<non-nullable column>) from COUNT(col): it would be a second spelling of COUNT(*)
    assert "SELECT COUNT(id)" not in {t for _, t in se.rule_edits("SELECT COUNT(email) FROM employees", hr)}


def test_projection_case_fold_needs_a_schema():
    assert "SELECT LOWER(city)" not in {t for _, t in se.rule_edits("SELECT city FROM employees")}


def test_repair_edits_come_first_and_distractors_are_new(suite, corpus):
    for sql, env in corpus:
        for schema in (None, suite.specs[env]):
            edits = se.rule_edits(sql, schema)
            dis = se.distractor_edits(sql, schema)
            assert edits[len(edits) - len(dis):] == dis  # distractors are the tail
            assert not set(dis) & set(edits[:len(edits) - len(dis)])
            assert len(set(edits)) == len(edits)  # no repeats
            outcomes = [se.replace_unit(sql, i, t) for i, t in edits]
            assert len(set(outcomes)) == len(outcomes)  # distinct resulting actions
            assert se.normalize(sql) not in outcomes


def test_rule_edits_memoised_but_returned_as_fresh_lists(suite):
    sql, hr = "SELECT name FROM employees WHERE age > 28", suite.specs["hr"]
    a = se.rule_edits(sql, hr)
    a.clear()
    assert se.rule_edits(sql, hr)  # the cached tuple is not mutated by a caller
    assert se.rule_edits(sql, None) != se.rule_edits(sql, hr)  # keyed by the schema object too


@settings(max_examples=150, deadline=None)
@given(queries())
def test_property_rule_edits_distinct_and_canonical(sql):
    edits = se.rule_edits(sql)
    assert len(set(edits)) == len(edits)
    base = se.units(sql)
    for i, text in edits:
        assert text != base[i].text
        assert se.units(se.replace_unit(sql, i, text))[i].text == text  # canonical print

"""Tests for the applicability-condition language (cfjax.countermem.conditions)."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cfjax.countermem import conditions as cond_mod
from cfjax.countermem.conditions import (
    KEYWORDS,
    MAX_DEPTH,
    MAX_LENGTH,
    UNIVERSAL,
    And,
    Compare,
    Condition,
    ConditionError,
    Contains,
    Has,
    InList,
    Not,
    Or,
    Universal,
    parse_condition,
)
from cfjax.types import Task

AT_LEAST = 'question contains "at least" and column_type = "numeric"'


def ev(text: str, attrs: dict[str, Any]) -> bool:
    return parse_condition(text).evaluate(attrs)


# --------------------------------------------------------------------------- #
# the running example (papers/countermem.md Table 2, App. D.4 look-alikes)     #
# --------------------------------------------------------------------------- #


def test_at_least_example_and_look_alike() -> None:
    c = parse_condition(AT_LEAST)
    assert c == And((Contains("at least"), Compare("column_type", "=", "numeric")))
    assert str(c) == AT_LEAST
    assert c.attributes() == {"question", "column_type"}
    assert not c.is_universal

    source = Task(
        task_id="sql/hr/at_least/001",
        question="List employees who are at least 30 years old.",
        env_id="hr",
        context="",
        attrs={"question": "List employees who are at least 30 years old.", "column_type": "numeric"},
    )
    assert c.evaluate(source.attrs)
    # new surface: different wording, same requirement
    assert c.evaluate({"question": "Which products cost AT   LEAST\n$5?", "column_type": "numeric"})
    # look-alike: surface similarity, but a strict boundary is requested
    look_alike = {"question": "List employees who are older than 30.", "column_type": "numeric"}
    assert not c.evaluate(look_alike)
    # look-alike: same phrase, but the column is text (lexicographic compare)
    assert not c.evaluate({"question": "names at least 'M'", "column_type": "text"})
    # a stricter record condition can exclude "at least ... more than" mixes
    c2 = parse_condition('question contains "at least" and not question contains "more than"')
    assert c2.evaluate({"question": "at least 3"})
    assert not c2.evaluate({"question": "at least 3 and more than 1"})


def test_none_is_universal() -> None:
    for text in ("none", "NONE", "  None\n"):
        c = parse_condition(text)
        assert c == UNIVERSAL and c.is_universal and isinstance(c, Universal)
        assert str(c) == "none"
        assert c.attributes() == frozenset()
        assert c.evaluate({}) and c.evaluate({"question": "anything"})
    assert not parse_condition("has x").is_universal
    assert hash(parse_condition("none")) == hash(UNIVERSAL)


# --------------------------------------------------------------------------- #
# evaluation                                                                   #
# --------------------------------------------------------------------------- #


def test_question_contains_is_case_and_whitespace_insensitive() -> None:
    q = {"question": "Count orders placed  AT\tleast\ntwice"}
    assert ev('question contains "at least"', q)
    assert ev('question contains "  AT   LEAST  "', q)
    assert not ev('question contains "at most"', q)
    assert not ev('question contains "at least"', {})  # no question: false
    assert not ev('question contains "at least"', {"question": 3})  # not a string


def test_string_equality_and_in() -> None:
    a = {"question": "q", "column_type": "Numeric", "dialect": "sqlite"}
    assert ev('column_type = "numeric"', a)
    assert ev('column_type == "NUMERIC "', a)
    assert not ev('column_type != "numeric"', a)
    assert ev('column_type != "text"', a)
    assert ev('dialect in ["duckdb", "SQLite"]', a)
    assert not ev('dialect in ["duckdb", "postgres"]', a)


def test_tuple_attrs_membership() -> None:
    a = {"question": "q", "tables": ("employees", "departments"), "empty": ()}
    assert ev('tables = "Employees"', a)
    assert not ev('tables = "orders"', a)
    assert ev('tables != "orders"', a)
    assert not ev('tables != "departments"', a)
    assert ev('tables in ["orders", "departments"]', a)
    assert not ev('tables in ["orders"]', a)
    assert ev("has tables", a)
    assert not ev("has empty", a)
    assert not ev('empty = "x"', a) and ev('empty != "x"', a)
    assert not ev("tables > 1", a)  # ordering on a tuple: type mismatch
    assert ev('tables = "employees"', {"tables": ["employees"]})  # lists behave like tuples


def test_numeric_comparisons() -> None:
    a = {"question": "q", "n": 3, "x": 2.5, "flag": True, "off": False, "s": "3", "nan": float("nan")}
    assert ev("n >= 3", a) and ev("n <= 3", a) and ev("n = 3", a) and ev("n = 3.0", a)
    assert not ev("n > 3", a) and not ev("n < 3", a) and ev("n != 2", a) and not ev("n != 3", a)
    assert ev("x < 2.51", a) and ev("x > -1e3", a) and ev("x >= .5", a)
    assert ev("n > 2 and x < 3", a)
    # booleans are not numbers and numbers are not booleans
    assert ev("flag = true", a) and ev("off = false", a) and ev("flag != false", a)
    assert not ev("flag = 1", a) and not ev("flag > 0", a)
    assert not ev("n = true", a)
    # type mismatches are false, never an exception
    assert not ev('n = "3"', a) and not ev('n != "3"', a)
    assert not ev("s = 3", a) and not ev("s > 1", a) and not ev("s != 3", a)
    assert not ev('flag = "true"', a)
    # NaN satisfies nothing
    for op in ("=", "!=", "<", "<=", ">", ">="):
        assert not ev(f"nan {op} 1", a)


def test_has() -> None:
    a = {"s": "x", "blank": "  ", "t": True, "f": False, "z": 0, "z2": 0.0, "one": 1, "tup": ("a",), "e": (), "o": object()}
    assert ev("has s", a) and ev("has t", a) and ev("has one", a) and ev("has tup", a)
    for name in ("blank", "f", "z", "z2", "e", "o", "missing"):
        assert not ev(f"has {name}", a), name


def test_missing_attribute_makes_every_atom_false() -> None:
    a = {"question": "q", "none_valued": None}
    for name in ("missing", "none_valued"):
        for atom in (f'{name} = "a"', f'{name} != "a"', f"{name} < 3", f"{name} >= 3", f'{name} in ["a"]',
                     f"has {name}", f"{name} = true", f"{name} != 1"):
            assert not ev(atom, a), atom
            assert ev(f"not {atom}", a), atom  # only `not` turns it true
    assert ev('missing = "a" or question contains "q"', a)
    assert not ev('missing != "a" and question contains "q"', a)


def test_boolean_structure_and_precedence() -> None:
    a = {"a": 1, "b": 2, "c": 3}
    assert ev("a = 1 or b = 0 and c = 0", a)  # and binds tighter
    assert not ev("(a = 1 or b = 0) and c = 0", a)
    assert not ev("not a = 1 and b = 2", a)  # not binds tighter than and
    assert ev("not (a = 1 and b = 0)", a)
    assert ev("not not a = 1", a)
    assert parse_condition("a = 1 or b = 0 and c = 0") == Or(
        (Compare("a", "=", 1), And((Compare("b", "=", 0), Compare("c", "=", 0))))
    )


def test_identifiers_are_only_mapping_keys() -> None:
    # "__class__" is a legal identifier: it is looked up in attrs, never via getattr
    c = parse_condition('__class__ = "dict"')
    assert not c.evaluate({"question": "q"})
    assert c.evaluate({"__class__": "dict"})
    assert parse_condition("Column_Type = 1") == Compare("column_type", "=", 1)  # case-insensitive names


def test_evaluate_on_task_attrs_and_type_errors() -> None:
    with pytest.raises(TypeError):
        parse_condition("has x").evaluate(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parse_condition(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- #
# AST properties                                                               #
# --------------------------------------------------------------------------- #


def test_nodes_are_frozen_hashable_and_typed() -> None:
    c = parse_condition('a = "x" and (b < 3 or has c) and d in ["p", "q"]')
    assert isinstance(c, Condition)
    assert {c, parse_condition(str(c))} == {c}
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.operands = ()  # type: ignore[misc]
    # true is not 1 and "1" is not 1, even though True == 1 in Python
    assert Compare("a", "=", True) != Compare("a", "=", 1)
    assert Compare("a", "=", "1") != Compare("a", "=", 1)
    assert len({Compare("a", "=", True), Compare("a", "=", 1)}) == 2
    assert Compare("a", "==", 1) == Compare("a", "=", 1)
    assert c.attributes() == {"a", "b", "c", "d"}
    assert isinstance(c.attributes(), frozenset)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Compare("a", "<", "x"),
        lambda: Compare("a", "~", 1),
        lambda: Compare("A", "=", 1),
        lambda: Compare("and", "=", 1),
        lambda: Compare("a", "=", float("inf")),
        lambda: Compare("a", "=", None),
        lambda: Contains("   "),
        lambda: InList("a", ()),
        lambda: InList("a", "ab"),
        lambda: InList("a", (1,)),
        lambda: And((Has("a"),)),
        lambda: Or((Has("a"), UNIVERSAL)),
        lambda: Not(UNIVERSAL),
        lambda: Not("a = 1"),
    ],
)
def test_invalid_nodes_rejected(make: Any) -> None:
    with pytest.raises(ConditionError):
        make()


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ('QUESTION   CONTAINS "at least"AND column_type=="numeric"', AT_LEAST),
        ("((a = 1))", "a = 1"),
        ("a=1 or (b=2 or c=3)", "a = 1 or (b = 2 or c = 3)"),
        ("(a=1 and b=2) and c=3", "(a = 1 and b = 2) and c = 3"),
        ("(a=1 and b=2) or c=3", "a = 1 and b = 2 or c = 3"),
        ("NOT(a=1 Or b=2)", "not (a = 1 or b = 2)"),
        ("not (not (has a))", "not not has a"),
        ("x in ['a']".replace("'", '"'), 'x in ["a"]'),
        ('x in [ "a" ,"b\\"c" , "d\\\\" ]', 'x in ["a", "b\\"c", "d\\\\"]'),
        ("x >= -1.5e3 and y < 1. and z = 007 and w = TRUE", "x >= -1500.0 and y < 1.0 and z = 7 and w = true"),
    ],
)
def test_canonical_text(text: str, canonical: str) -> None:
    c = parse_condition(text)
    assert str(c) == canonical
    assert parse_condition(canonical) == c


# --------------------------------------------------------------------------- #
# errors                                                                       #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("text", "fragment", "column"),
    [
        ("", "empty condition", 1),
        ("   \n ", "empty condition", 1),
        ("a @ 1", "unknown token '@'", 3),
        ("a = 'x'", "double quotes", 5),
        ("a = 1 && b = 2", "use 'and'", 7),
        ("a = \u00e9", "unknown token", 5),
        ("(a = 1", "unbalanced parentheses: '(' is never closed", 1),
        ("(a = 1) and (b = 2", "unbalanced parentheses", 13),
        ("a = 1)", "unbalanced parentheses: ')' has no matching '('", 6),
        ("a = 1 b = 2", "unexpected trailing input 'b'", 7),
        ("none and a = 1", "'none' must be the whole condition", 6),
        ("a = 1 and", "missing operand after 'and'", 10),
        ("and a = 1", "missing operand before 'and'", 1),
        ("a = 1 or or b = 2", "missing operand before 'or'", 10),
        ("not", "missing operand after 'not'", 4),
        ("()", "missing operand", 2),
        ("x =", "missing operand: '=' needs", 4),
        ("x = numeric", 'did you mean "numeric"?', 5),
        ("x < \"a\"", "'<' needs a number", 5),
        ("has", "'has' needs an attribute name", 4),
        ("has and", "'has' needs an attribute name", 5),
        ("x in []", "list is empty", 7),
        ('x in ["a",]', "expected a double-quoted string", 11),
        ('x in ["a" "b"]', "expected ',' or ']'", 11),
        ("x", "missing operator after attribute 'x'", 2),
        ("x y", "expected an operator", 3),
        ('y contains "a"', "'contains' applies only to 'question'", 3),
        ('question contains " "', "non-empty phrase", 19),
        ("question contains at", "double-quoted phrase", 19),
        ('a = "abc', "unterminated string", 5),
        ('a = "a\\nb"', "invalid escape", 7),
        ("a = 1x", "malformed number", 5),
        ("a = 1.2.3", "malformed number", 5),
        ("a = 1e999", "out of range", 5),
        ("x" * (MAX_LENGTH + 1), "too long", MAX_LENGTH + 1),
        ("(" * (MAX_DEPTH + 1) + "a=1" + ")" * (MAX_DEPTH + 1), f"nesting deeper than {MAX_DEPTH}", MAX_DEPTH + 1),
        ("not " * (MAX_DEPTH + 1) + "has a", f"nesting deeper than {MAX_DEPTH}", 4 * MAX_DEPTH + 1),
    ],
)
def test_errors_name_problem_and_column(text: str, fragment: str, column: int) -> None:
    with pytest.raises(ConditionError) as info:
        parse_condition(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert fragment in str(err), str(err)
    assert err.column == column, str(err)
    assert f"at column {column}" in str(err)
    assert err.text == text


def test_depth_and_length_limits_are_inclusive() -> None:
    deep = "(" * MAX_DEPTH + "a=1" + ")" * MAX_DEPTH
    assert parse_condition(deep) == Compare("a", "=", 1)
    nots = "not " * MAX_DEPTH + "has a"
    assert str(parse_condition(nots)) == nots
    long_ok = 'question contains "' + "x" * (MAX_LENGTH - 20) + '"'
    assert len(long_ok) == MAX_LENGTH
    assert parse_condition(long_ok) == Contains("x" * (MAX_LENGTH - 20))


def test_canonical_form_over_limit_is_rejected() -> None:
    # tight spelling fits the limit, the canonical spacing does not
    text = "or".join(f'(a="{i % 10}")' for i in range(55))  # 493 chars raw, 601 canonical
    assert len(text) <= MAX_LENGTH
    with pytest.raises(ConditionError, match="canonical form"):
        parse_condition(text)


@pytest.mark.parametrize(
    "text",
    [
        '__import__("os")',
        '__import__("os").system("echo pwned")',
        "os.system('rm -rf /')",
        "exec(\"print(1)\")",
        "eval('1+1')",
        "lambda: 0",
        "a = 1; import os",
        "a = [x for x in ()]",
        "question contains \"a\" and open('/etc/passwd')",
        "a = {}.__class__",
        "f\"{1+1}\"",
        "a = 1 if b else 2",
    ],
)
def test_python_code_is_rejected_not_evaluated(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("python code evaluated")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, boom)
    with pytest.raises(ConditionError):
        parse_condition(text)


def test_module_never_calls_eval_exec_or_imports_dynamically() -> None:
    tree = ast.parse(inspect.getsource(cond_mod))
    banned = {"eval", "exec", "compile", "__import__", "getattr", "setattr", "import_module", "literal_eval", "system"}
    allowed_imports = {"__future__", "math", "re", "collections.abc", "dataclasses", "typing",
                       "cfjax.types"}  # contains_phrase: the one whole-word phrase test
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                assert f.id not in banned, f"conditions.py calls {f.id}() at line {node.lineno}"
            elif isinstance(f, ast.Attribute) and f.attr in banned:
                # only re.compile (a regular expression) is allowed
                assert f.attr == "compile" and isinstance(f.value, ast.Name) and f.value.id == "re", node.lineno
        elif isinstance(node, ast.Import):
            assert {a.name for a in node.names} <= allowed_imports
        elif isinstance(node, ast.ImportFrom):
            assert node.module in allowed_imports


# --------------------------------------------------------------------------- #
# properties                                                                   #
# --------------------------------------------------------------------------- #

_idents = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True).filter(lambda s: s not in KEYWORDS)
_strings = st.text(max_size=12)
_numbers = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)
_literals = st.one_of(_strings, _numbers, st.booleans())


def _compare(draw_op: str, name: str, value: Any) -> Compare:
    if draw_op in ("<", "<=", ">", ">=") and (isinstance(value, (str, bool))):
        draw_op = "="
    return Compare(name, draw_op, value)


_atoms = st.one_of(
    st.builds(Contains, st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != "")),
    st.builds(_compare, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), _idents, _literals),
    st.builds(InList, _idents, st.lists(_strings, min_size=1, max_size=3).map(tuple)),
    st.builds(Has, _idents),
)


def _extend(children: st.SearchStrategy[Condition]) -> st.SearchStrategy[Condition]:
    return st.one_of(
        st.builds(Not, children),
        st.builds(And, st.lists(children, min_size=2, max_size=3).map(tuple)),
        st.builds(Or, st.lists(children, min_size=2, max_size=3).map(tuple)),
    )


conditions = st.recursive(_atoms, _extend, max_leaves=8)


def _noisy(c: Condition, draw: Any) -> str:
    """Render ``c`` like ``str`` but with random case, spacing, ``==`` and redundant parens."""

    def kw(word: str) -> str:
        return "".join(ch.upper() if draw(st.booleans()) else ch for ch in word)

    def sp() -> str:
        return draw(st.sampled_from([" ", "  ", "\t", "\n "]))

    def lit(v: Any) -> str:
        if isinstance(v, bool):
            return kw("true" if v else "false")
        if isinstance(v, str):
            return cond_mod._quote(v)
        return repr(v)

    def go(n: Condition) -> str:
        if isinstance(n, Contains):
            out = f"{kw('question')}{sp()}{kw('contains')}{sp()}{cond_mod._quote(n.phrase)}"
        elif isinstance(n, Compare):
            op = "==" if n.op == "=" and draw(st.booleans()) else n.op
            out = f"{n.name.upper() if draw(st.booleans()) else n.name}{draw(st.sampled_from(['', ' ']))}{op} {lit(n.value)}"
        elif isinstance(n, InList):
            out = f"{n.name}{sp()}{kw('in')}{sp()}[" + ",".join(f"{sp()}{cond_mod._quote(v)}" for v in n.values) + "]"
        elif isinstance(n, Has):
            out = f"{kw('has')}{sp()}{n.name}"
        elif isinstance(n, Not):
            inner = go(n.operand)
            out = f"{kw('not')}{sp()}({inner})" if isinstance(n.operand, (And, Or)) else f"{kw('not')}{sp()}{inner}"
        else:
            word = "and" if isinstance(n, And) else "or"
            parts = []
            for child in n.operands:  # type: ignore[attr-defined]
                s = go(child)
                if isinstance(child, Or) or (isinstance(child, And) and isinstance(n, And)):
                    s = f"({s})"
                parts.append(s)
            out = f"{sp()}{kw(word)}{sp()}".join(parts)
            return f"({out})" if draw(st.integers(0, 5)) == 0 else out
        return f"( {out} )" if draw(st.integers(0, 5)) == 0 else out

    return go(c)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conditions)
def test_round_trip_of_generated_conditions(c: Condition) -> None:
    text = str(c)
    assume(len(text) <= MAX_LENGTH)
    parsed = parse_condition(text)
    assert parsed == c
    assert hash(parsed) == hash(c)
    assert str(parsed) == text
    assert parsed.attributes() == c.attributes()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_noisy_spellings_parse_to_the_same_condition(data: st.DataObject) -> None:
    c = data.draw(conditions)
    assume(len(str(c)) <= MAX_LENGTH)
    noisy = _noisy(c, data.draw)
    assume(len(noisy) <= MAX_LENGTH)
    parsed = parse_condition(noisy)
    # a redundant pair of parentheses around a whole chain is dropped, never added
    assert parsed == c, (noisy, str(parsed), str(c))
    assert str(parse_condition(str(parsed))) == str(parsed)


_PIECES = [
    " ", "  ", "(", ")", "[", "]", ",", "=", "==", "!=", "<", "<=", ">", ">=", "!", "-", ".", "'", "\\", '"',
    "and", "or", "not", "none", "has", "in", "contains", "true", "false", "question", "x", "col_1", "__import__",
    '"at least"', '"a\\"b"', '"\\\\"', "1", "-2.5", "1e3", ".5", "0x1", "@", ";", "\u00e9", "\n", "AND", "Not",
]


def _mutate(args: tuple[str, list[tuple[int, int, str]]]) -> str:
    """Apply (position, delete count, inserted piece) edits to a valid condition text."""
    text, edits = args
    for pos, delete, piece in edits:
        i = pos % (len(text) + 1)
        text = text[:i] + piece + text[i + delete :]
    return text


_fuzz_text = st.one_of(
    st.text(max_size=80),
    st.text(alphabet=string.printable, max_size=80),
    st.lists(st.sampled_from(_PIECES), max_size=25).map("".join),
    st.tuples(
        conditions.map(str),
        st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.sampled_from(_PIECES + [""])), max_size=3),
    ).map(_mutate),
)
_fuzz_attrs = st.dictionaries(
    st.sampled_from(["question", "x", "col_1", "true_", "a"]),
    st.one_of(st.none(), st.text(max_size=8), st.integers(), st.floats(), st.booleans(),
              st.lists(st.text(max_size=4), max_size=3).map(tuple)),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fuzz_text, _fuzz_attrs)
def test_fuzz_parse_or_condition_error(text: str, attrs: dict[str, Any]) -> None:
    try:
        c = parse_condition(text)
    except ConditionError as e:
        assert str(e)
        assert e.column is None or 1 <= e.column <= len(text) + 1
        return
    assert isinstance(c, Condition)
    assert parse_condition(str(c)) == c
    assert isinstance(c.evaluate(attrs), bool)

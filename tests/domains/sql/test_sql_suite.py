"""Tests for the built-in SQL suite: generated data, tasks, traps and attributes."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections import defaultdict
from dataclasses import replace

import pytest

from cfjax.llm.base import DraftRequest
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.domains.sql import DATABASES, FAMILIES, SQLSuite, observe_attrs
from cfjax.domains.sql.databases import build_database
from cfjax.domains.sql.tasks import make_tasks
from cfjax.domains.sql import edits as se

VARIANTS = ("base", "look_alike", "new_surface")


@pytest.fixture(scope="module")
def trap_drafts(suite) -> dict[str, str]:
    """Each task's draft with its family's characteristic slip forced on, no noise."""
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(p_error=1.0, p_error_look_alike=1.0, p_noise=0.0))
    return {t.task_id: bb.call(DRAFT_ACTION, DraftRequest(t)).action for t in suite.tasks}


def by_group(suite, tasks=None):
    g = defaultdict(list)
    for t in suite.tasks if tasks is None else tasks:
        k = suite.answer_key(t.task_id)
        g[(k.family, k.variant)].append(t)
    return g


# --------------------------------------------------------------------------- tasks


def test_task_ids_unique_and_well_formed(suite):
    ids = [t.task_id for t in suite.tasks]
    assert len(ids) == len(set(ids))
    assert set(suite.keys) == set(ids)
    for t in suite.tasks:
        k = suite.answer_key(t.task_id)
        assert k.task_id == t.task_id
        assert re.fullmatch(rf"sql/{t.env_id}/{k.family}/\d\d", t.task_id), t.task_id
        assert t.env_id in suite.specs
        assert k.variant in VARIANTS
        assert k.ordered == (k.family == "order_limit")
        assert suite.task(t.task_id) is t
        # the task an agent sees carries no answer
        assert not any(hasattr(t, a) for a in ("gold", "family", "variant", "ordered"))
    with pytest.raises(KeyError):
        suite.task("sql/nope/none/00")
    with pytest.raises(KeyError):
        suite.answer_key("sql/nope/none/00")


def test_every_gold_runs_and_scores_one(suite, world):
    for t in suite.tasks:
        o = world.evaluate(t, suite.answer_key(t.task_id).gold)
        assert o.completed and o.solved and o.score == 1.0, (t.task_id, o)
        rows = world.reference_rows(t)
        assert len(rows) > 0, f"{t.task_id}: gold returns no rows, the trap cannot show"


def test_every_family_has_every_variant(suite):
    groups = by_group(suite)
    for fam in FAMILIES:
        for v in VARIANTS:
            assert groups[(fam, v)], (fam, v)
    for spec in DATABASES:
        assert {suite.keys[t.task_id].family for t in suite.tasks if t.env_id == spec.db_id} == set(FAMILIES), \
            spec.db_id


_TRAP_XFAIL: dict = {}  # every trap is observable


@pytest.mark.parametrize("family,variant", [
    pytest.param(f, v, marks=pytest.mark.xfail(strict=True, reason="DATA BUG: trap not observable: " + _TRAP_XFAIL[(f, v)]))
    if (f, v) in _TRAP_XFAIL else (f, v)
    for f in FAMILIES for v in VARIANTS
])
def test_characteristic_error_is_observable(suite, world, trap_drafts, family, variant):
    tasks = by_group(suite)[(family, variant)]
    assert tasks
    unobservable = []
    for t in tasks:
        draft = trap_drafts[t.task_id]
        assert draft != se.normalize(suite.answer_key(t.task_id).gold), f"{t.task_id}: the slip did not apply"
        o = world.evaluate(t, draft)
        assert o.completed
        if o.score >= 1.0:
            unobservable.append(t.task_id)
    assert not unobservable, f"characteristic slip scores 1 on {unobservable}"


def test_text_columns_have_repeated_values(suite):
    for spec in DATABASES:
        con = sqlite3.connect(suite.db_paths[spec.db_id])
        try:
            for table, col, _ in spec.text:
                n, nd = con.execute(f"SELECT COUNT({col}), COUNT(DISTINCT {col}) FROM {table}").fetchone()
                assert n > nd, f"{spec.db_id}.{table}.{col}: {n} rows, {nd} distinct"
        finally:
            con.close()


def test_nullable_columns_hold_both_null_and_empty_string(suite):
    for spec in DATABASES:
        con = sqlite3.connect(suite.db_paths[spec.db_id])
        try:
            for table, col, _ in spec.nullable:
                n_null, n_empty = con.execute(
                    f"SELECT SUM({col} IS NULL), SUM({col} = '') FROM {table}").fetchone()
                assert n_null > 0 and n_empty > 0, (spec.db_id, table, col)
        finally:
            con.close()


def test_boundary_values_occur_in_the_data(suite, world):
    """>= and > differ on every bound task: the threshold value occurs in the column."""
    for t in suite.tasks:
        k = suite.answer_key(t.task_id)
        if k.family not in ("lower_bound", "upper_bound"):
            continue
        m = re.fullmatch(r"SELECT name FROM (\w+) WHERE (\w+) (>=|<=|>|<) (\d+)", k.gold)
        assert m, k.gold
        table, col, _, v = m.groups()
        con = sqlite3.connect(suite.db_paths[t.env_id])
        try:
            assert con.execute(f"SELECT COUNT(*) FROM {table} WHERE {col} = ?", (int(v),)).fetchone()[0] > 0
        finally:
            con.close()


# --------------------------------------------------------------------------- attributes


def test_observe_attrs_inclusive_phrases(exact):
    a = observe_attrs("List employees whose age is no fewer than 30.", env="hr", tables=("employees",),
                      column_type="numeric")
    assert a["boundary"] == "inclusive" and a["bound_side"] == "lower"
    assert a["cues"] == ("no fewer than",)
    assert a["question"].startswith("List") and a["env"] == "hr" and a["tables"] == ("employees",)
    assert a["column_type"] == "numeric"
    b = observe_attrs("with an age of 30 or more", env="hr", tables=(), column_type=None)
    assert b["boundary"] == "inclusive" and b["bound_side"] == "lower" and "column_type" not in b


@pytest.mark.parametrize("phrase,side", [("no more than", "upper"), ("no less than", "lower"),
                                         ("no fewer than", "lower")])
def test_observe_attrs_longer_phrase_consumes_shorter(phrase, side, exact):
    a = observe_attrs(f"List employees whose age is {phrase} 30.", env="hr", tables=("employees",), column_type=None)
    assert a["boundary"] == "inclusive"
    assert a["bound_side"] == side
    assert a["cues"] == (phrase,)  # "more than" / "less than" / "fewer than" not also counted


@pytest.mark.parametrize("q,boundary,side", [
    ("whose age is at least 3", "inclusive", "lower"),
    ("whose age is strictly above 3", "strict", "lower"),
    ("whose age is more than 3", "strict", "lower"),
    ("whose age is at most 3", "inclusive", "upper"),
    ("whose age is strictly below 3", "strict", "upper"),
    ("whose age is less than 3", "strict", "upper"),
    ("with a stock level of 3 or less", "inclusive", "upper"),
])
def test_observe_attrs_boundaries(q, boundary, side, exact):
    a = observe_attrs(q, env="x", tables=(), column_type=None)
    assert (a["boundary"], a["bound_side"]) == (boundary, side)


def test_observe_attrs_other_semantics(exact):
    a = observe_attrs("How many customers have an email address on record?", env="shop", tables=("customers",),
                      column_type="text")
    assert a["count_semantics"] == "non_null" and a["aggregate"] == "count"
    b = observe_attrs("List pairs of order and customer names whose id numbers are equal.", env="shop",
                      tables=("orders", "customers"), column_type=None)
    assert b["join_semantics"] == "identifier"
    c = observe_attrs("Which 3 products have the lowest price?", env="shop", tables=(), column_type=None)
    assert c["order_direction"] == "asc" and "boundary" not in c
    # word boundaries: "atleast" / "lowest" inside another word are not cues
    d = observe_attrs("Show the slowest-moving atleast items", env="shop", tables=(), column_type=None)
    assert "boundary" not in d and "order_direction" not in d


def test_task_attrs_agree_with_gold_boundary(exact_suites):
    suite = exact_suites("sql")
    n = 0
    for t in suite.tasks:
        k = suite.answer_key(t.task_id)
        if k.family not in ("lower_bound", "upper_bound", "having"):
            continue
        op = re.search(r"(>=|<=|>|<) \d+$", k.gold).group(1)
        assert t.attrs["boundary"] == ("inclusive" if op in (">=", "<=") else "strict"), t.task_id
        assert t.attrs["bound_side"] == ("lower" if op.startswith(">") else "upper"), t.task_id
        n += 1
    assert n > 100


def test_task_attrs_distinguish_look_alikes(exact_suites):
    suite = exact_suites("sql")
    key = {"lower_bound": "boundary", "upper_bound": "boundary", "having": "boundary", "join_key": "join_semantics",
           "distinct": "cardinality", "null_check": "null_semantics", "string_case": "case_semantics",
           "count_nonnull": "count_semantics", "order_limit": "order_direction"}
    for t in suite.tasks:
        assert key[suite.answer_key(t.task_id).family] in t.attrs, t.task_id
    groups = by_group(suite)
    for fam in FAMILIES:
        base = {t.attrs[key[fam]] for t in groups[(fam, "base")] + groups[(fam, "new_surface")]}
        look = {t.attrs[key[fam]] for t in groups[(fam, "look_alike")]}
        assert len(base) == 1 and len(look) == 1 and base != look, fam


def test_task_attrs_never_reveal_the_gold(suite):
    for t in suite.tasks:
        for k, v in t.attrs.items():
            vals = v if isinstance(v, tuple) else (v,)
            for x in vals:
                assert "SELECT" not in str(x).upper() or k == "question", (t.task_id, k)
        gold = suite.answer_key(t.task_id).gold
        assert gold not in t.question and "SELECT" not in t.question.upper()
        assert gold not in t.context


# --------------------------------------------------------------------------- determinism


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_database_generation_is_deterministic(tmp_path):
    for spec in DATABASES:
        p1 = build_database(spec, tmp_path / "a" / f"{spec.db_id}.sqlite")
        p2 = build_database(spec, tmp_path / "b" / f"{spec.db_id}.sqlite")
        assert _sha(p1) == _sha(p2), spec.db_id
        rows = []
        for p in (p1, p2):
            con = sqlite3.connect(p)
            try:
                rows.append([con.execute(f"SELECT * FROM {t.name} ORDER BY id").fetchall() for t in spec.tables])
            finally:
                con.close()
        assert rows[0] == rows[1]
        assert [len(r) for r in rows[0]] == [t.rows for t in spec.tables]
        # a rebuild over the same path (idempotent overwrite) gives the same bytes again
        assert _sha(build_database(spec, p1)) == _sha(p2)
    # another seed gives other data
    other = replace(DATABASES[0], seed=DATABASES[0].seed + 1)
    assert _sha(build_database(other, tmp_path / "c.sqlite")) != _sha(tmp_path / "a" / "hr.sqlite")


def test_task_generation_is_deterministic(suite, tmp_path):
    again = SQLSuite.build(tmp_path)
    def rows(s):
        return [(t.task_id, t.question, dict(t.attrs), s.keys[t.task_id].gold, s.keys[t.task_id].family,
                 s.keys[t.task_id].variant, s.keys[t.task_id].ordered) for t in s.tasks]

    assert rows(again) == rows(suite)
    spec = DATABASES[1]
    a = make_tasks(spec, suite.db_paths[spec.db_id], seed=5)
    b = make_tasks(spec, suite.db_paths[spec.db_id], seed=5)
    assert all(t.task_id == k.task_id for t, k in a)
    assert [(t.task_id, t.question, k.gold) for t, k in a] == [(t.task_id, t.question, k.gold) for t, k in b]


def test_database_files_are_not_modified_by_evaluation(suite, world):
    before = {db: _sha(p) for db, p in suite.db_paths.items()}
    for t in suite.tasks[:20]:
        world.evaluate(t, suite.answer_key(t.task_id).gold)
    assert {db: _sha(p) for db, p in suite.db_paths.items()} == before

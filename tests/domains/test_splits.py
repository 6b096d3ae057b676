"""Tests for the held-out protocol (Eq. 14): check_disjoint, Splits, SQLSuite.splits."""

from __future__ import annotations

import pytest

from cfjax.types import Splits, SplitOverlapError, Task, check_disjoint
from cfjax.domains.sql import FAMILIES, SQLSuite
from cfjax.registry import DOMAINS
from tests.domains import contract


def t(task_id: str) -> Task:
    return Task(task_id, f"question {task_id}", "hr", "")


# --------------------------------------------------------------------------- check_disjoint


def test_check_disjoint_accepts_disjoint_sets_and_shared_build_train():
    check_disjoint([t("a"), t("b")], [t("b"), t("c")], [t("d"), t("e")])  # build ∩ train allowed
    check_disjoint([], [], [t("x")])
    check_disjoint([t("x")], [t("y")], [])


def test_check_disjoint_names_every_overlapping_id():
    with pytest.raises(SplitOverlapError) as ei:
        check_disjoint([t("a"), t("sql/hr/at_least/03")], [t("b"), t("c")], [t("c"), t("sql/hr/at_least/03"), t("z")])
    msg = str(ei.value)
    listed = msg.rsplit("T_eval: ", 1)[1]
    assert listed.split(", ") == ["c", "sql/hr/at_least/03"]  # every overlapping id, nothing else
    assert "2 task id(s)" in msg
    assert isinstance(ei.value, ValueError)


def test_check_disjoint_compares_ids_not_objects():
    a1 = Task("same", "q1", "hr", "")
    a2 = Task("same", "a different question", "shop", "schema")
    with pytest.raises(SplitOverlapError, match="same"):
        check_disjoint([a1], [], [a2])


def test_check_disjoint_accepts_iterators():
    with pytest.raises(SplitOverlapError, match="k"):
        check_disjoint(iter([t("k")]), iter([]), iter([t("k")]))


def test_check_disjoint_long_overlap_is_abbreviated_but_counted():
    ids = [t(f"id{i:03d}") for i in range(30)]
    with pytest.raises(SplitOverlapError) as ei:
        check_disjoint(ids, [], ids)
    assert "30 task id(s)" in str(ei.value)
    assert "id000" in str(ei.value)


# --------------------------------------------------------------------------- Splits


@pytest.mark.parametrize("where", ["build", "train", "val"])
def test_splits_refuses_eval_task_in_other_split(where):
    parts = {"build": [t("b1")], "train": [t("t1")], "val": [t("v1")], "eval": [t("e1"), t("e2")]}
    parts[where] = list(parts[where]) + [t("e2")]
    with pytest.raises(SplitOverlapError, match="e2"):
        Splits(**parts)


@pytest.mark.parametrize("where", ["build", "train", "val", "eval"])
def test_splits_refuses_duplicate_ids_within_a_split(where):
    parts = {"build": [t("b1")], "train": [t("t1")], "val": [t("v1")], "eval": [t("e1")]}
    first = parts[where][0].task_id
    parts[where] = [t(first), t(first)]
    with pytest.raises(ValueError, match=first):
        Splits(**parts)


def test_splits_accepts_valid_protocol():
    s = Splits(build=[t("a")], train=[t("a"), t("b")], val=[t("c")], eval=[t("d")])
    assert [x.task_id for x in s.eval] == ["d"]


# --------------------------------------------------------------------------- SQLSuite.splits


def _ids(tasks) -> list[str]:
    return [x.task_id for x in tasks]


def test_suite_splits_are_disjoint_and_cover_the_suite(suite):
    sp = suite.splits(seed=12345)
    parts = {name: set(_ids(getattr(sp, name))) for name in ("build", "train", "val", "eval")}
    for name, ids in parts.items():
        assert len(ids) == len(getattr(sp, name)) > 0, name
    names = list(parts)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not parts[a] & parts[b], (a, b)
    assert set().union(*parts.values()) == set(_ids(suite.tasks))
    assert len(sp.val) == 20
    check_disjoint(sp.build, list(sp.train) + list(sp.val), sp.eval)


def test_suite_splits_cover_every_family_and_variant_in_eval(suite):
    sp = suite.splits(seed=12345)
    k = suite.answer_key

    def group(x):
        return k(x.task_id).family, k(x.task_id).variant

    groups = {group(x) for x in suite.tasks}
    assert {k(x.task_id).family for x in suite.tasks} == set(FAMILIES)
    assert groups == {(f, v) for f in FAMILIES for v in ("base", "look_alike", "new_surface")}
    assert {group(x) for x in sp.eval} == groups
    assert {group(x) for x in sp.build} == groups
    assert {k(x.task_id).family for x in list(sp.train) + list(sp.val)} == set(FAMILIES)


def test_suite_splits_proportions(suite):
    sp = suite.splits(seed=3, eval_frac=0.3, build_frac=0.35, n_val=10, holdout_envs=())
    n = len(suite.tasks)
    assert abs(len(sp.eval) - 0.3 * n) <= 27  # rounding per (family, variant) group
    assert abs(len(sp.build) - 0.35 * n) <= 27
    assert len(sp.val) == 10


def test_held_out_environment_only_in_eval_and_gives_the_new_env_condition(suite):
    from cfjax.domains.base import TRANSFER_CONDITIONS, transfer_condition

    sp = suite.splits(seed=3)
    assert suite.holdout_envs == ("clinic",)
    held = [t for t in suite.tasks if t.env_id == "clinic"]
    assert held and set(_ids(held)) <= set(_ids(sp.eval))
    assert not any(t.env_id == "clinic" for t in list(sp.build) + list(sp.train) + list(sp.val))
    src = {t.env_id for t in sp.build}
    k = suite.answer_key
    conds = {transfer_condition(t, k(t.task_id), src) for t in sp.eval}
    assert conds == set(TRANSFER_CONDITIONS)
    assert all(transfer_condition(t, k(t.task_id), src) == "new_env" for t in held if k(t.task_id).variant == "base")
    with pytest.raises(ValueError, match="environments the suite does not have"):
        suite.splits(holdout_envs=("nope",))


def test_suite_splits_deterministic_for_a_seed(suite):
    a, b = suite.splits(seed=7), suite.splits(seed=7)
    for name in ("build", "train", "val", "eval"):
        assert _ids(getattr(a, name)) == _ids(getattr(b, name))


def test_suite_splits_differ_across_seeds(suite):
    a, b = suite.splits(seed=7), suite.splits(seed=8)
    assert set(_ids(a.eval)) != set(_ids(b.eval))
    assert len(a.eval) == len(b.eval)  # same stratified sizes


def test_suite_splits_do_not_depend_on_a_previous_call(suite, tmp_path):
    fresh = SQLSuite.build(tmp_path)
    suite.splits(seed=1)
    suite.splits(seed=99)
    a, b = suite.splits(seed=5), fresh.splits(seed=5)
    for name in ("build", "train", "val", "eval"):
        assert _ids(getattr(a, name)) == _ids(getattr(b, name))


@pytest.mark.parametrize("kwargs", [
    dict(eval_frac=0.0), dict(eval_frac=1.0), dict(eval_frac=-0.1), dict(build_frac=0.0), dict(build_frac=1.0),
    dict(eval_frac=0.5, build_frac=0.5), dict(eval_frac=0.6, build_frac=0.5), dict(n_val=10_000),
])
def test_suite_splits_bad_fractions_raise(suite, kwargs):
    with pytest.raises(ValueError):
        suite.splits(seed=1, **kwargs)


# --------------------------------------------------------------------------- twins (issue 11)


@pytest.mark.parametrize("name", DOMAINS.names())
@pytest.mark.parametrize("seed", [12345, 1, 2])
def test_no_held_out_gold_action_appears_outside_eval_in_the_same_environment(name, seed, tmp_path_factory):
    """Twins (same environment, same normalised gold action, e.g. base ↔ new-surface) never straddle
    the held-out boundary: the leak the id check alone cannot see (contract.check_no_twin_straddles)."""
    from cfjax.domains import build_suite

    contract.check_no_twin_straddles(build_suite(name, tmp_path_factory.mktemp(name)), seed)


@pytest.mark.parametrize("name", DOMAINS.names())
def test_every_registered_domain_splits_follow_the_protocol(name, tmp_path_factory):
    """Disjoint, covering, seeded, held-out environments only in eval (contract.check_splits)."""
    from cfjax.domains import build_suite

    contract.check_splits(build_suite(name, tmp_path_factory.mktemp(name)))

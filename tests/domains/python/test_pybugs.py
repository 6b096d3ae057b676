"""Tests for the Python bug-fixing suite (cfjax.domains.python) and its edit model (cfjax.domains.python.edits)."""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest

from cfjax.countermem.conditions import parse_condition
from cfjax.countermem.store import Record
from cfjax.countermem.calls import DISTIL_RECORD, GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest, DistilRequest
from cfjax.llm.base import DraftRequest, ReviseRequest
from cfjax.llm.calls import DRAFT_ACTION, REVISE_WITH_RECORD
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.domains.base import TRANSFER_CONDITIONS, transfer_condition
from cfjax.domains.python import FAMILIES, LEXICON, SEMANTIC_KEYS, PyBugsSuite, PyScript, observe_attrs
from cfjax.domains.python.script import ERRORS
from cfjax.types import EditError, MemoryText, Unit
from cfjax.domains.python.edits import KEYWORDS, OPERATORS, PythonEdits, normalize, signature

VARIANTS = ("base", "look_alike", "new_surface")
ED = PythonEdits()


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> PyBugsSuite:
    return PyBugsSuite.build(tmp_path_factory.mktemp("pybugs"))


@pytest.fixture(scope="module")
def world(suite):
    return suite.world()


@pytest.fixture(scope="module", autouse=True)
def _keys(suite):
    """Answer keys for the analysis helpers below (tests are analysis code and may read keys)."""
    KEYS.clear()
    KEYS.update(suite.keys)
    yield
    KEYS.clear()


KEYS: dict = {}


def gold(t) -> str:
    return KEYS[t.task_id].gold


def fam(t) -> str:
    return KEYS[t.task_id].family


def var(t) -> str:
    return KEYS[t.task_id].variant


def _slip(t):
    main, look, _ = ERRORS[fam(t)]
    return ED.apply(ED.normalize(gold(t)), look if var(t) == "look_alike" else main)


def _evaluate_all(world, pairs):
    with ThreadPoolExecutor(max_workers=4) as ex:
        return list(ex.map(lambda p: world.evaluate(*p), pairs))


@pytest.fixture(scope="module")
def gold_outcomes(suite, world):
    return dict(zip((t.task_id for t in suite.tasks), _evaluate_all(world, [(t, gold(t)) for t in suite.tasks])))


@pytest.fixture(scope="module")
def slip_outcomes(suite, world):
    return dict(zip((t.task_id for t in suite.tasks), _evaluate_all(world, [(t, _slip(t)) for t in suite.tasks])))


# --------------------------------------------------------------------------- edit model

SRC = '''def f(low: int, high: int, d: dict) -> list[str]:
    """A docstring is not a unit."""
    labels = []
    for n in range(low, high + 1):
        if n % 2 == 0 and d.get(n) is None:
            labels.append('B-' + str(n))
        elif n > high:
            total += n // 2
        else:
            pass
    while not labels:
        break
    ranked = sorted(labels, reverse=True)[-3:]
    return ranked
'''


def test_units_in_source_order_with_headers():
    us = ED.units(SRC)
    assert [u.kind for u in us] == ["stmt", "for", "if", "stmt", "elif", "stmt", "stmt", "while", "stmt", "stmt",
                                    "return"]
    assert us[1] == Unit("for", "for n in range(low, high + 1):")
    assert us[2].text == "if n % 2 == 0 and d.get(n) is None:"
    assert us[4].text == "elif n > high:"
    assert us[-1] == Unit("return", "return ranked")
    assert all("\n" not in u.text for u in us)
    assert ED.units("import os\nX = 1\n") == []  # statements outside functions are not units
    with pytest.raises(EditError):
        ED.units("def f(:\n    pass")


def test_normalize():
    assert ED.normalize("def f( x ):\n  return   x+1\n") == "def f(x):\n    return x + 1"
    assert ED.normalize(ED.normalize(SRC)) == ED.normalize(SRC)
    assert ED.normalize("  def f(:  \n\n    pass   \n") == "def f(:\n    pass"


def test_replace_unit_keeps_the_body_of_a_header():
    out = ED.replace_unit(SRC, 1, "for n in range(low, high):")
    assert "for n in range(low, high):" in out and "labels.append('B-' + str(n))" in out
    assert ED.diff_units(SRC, out) == (1, Unit("for", "for n in range(low, high + 1):"),
                                       Unit("for", "for n in range(low, high):"))
    out = ED.replace_unit(SRC, 4, "elif n >= high:")
    assert "elif n >= high:" in out and "total += n // 2" in out
    out = ED.replace_unit(SRC, 5, "total += n / 2")
    assert ED.diff_units(SRC, out)[0] == 5
    assert ED.replace_unit(SRC, 10, "return  ranked[:2]").endswith("return ranked[:2]")


@pytest.mark.parametrize("index,text", [
    (99, "x = 1"), (-1, "x = 1"),
    (0, "return labels"),            # stmt → return: another kind
    (10, "x = 1"),                   # return → stmt
    (1, "while True:"),              # for header → while header
    (2, "for x in y:"),              # if header → for header
    (4, "if n > 0:"),                # elif must stay elif
    (0, "x = (1"),                   # does not parse
    (0, "x = 1\ny = 2"),             # two statements
    (0, "if x:\n    y = 1"),         # a compound statement
    (2, "if x:\n    y = 1"),         # a header with a body
])
def test_replace_unit_errors(index, text):
    with pytest.raises(EditError):
        ED.replace_unit(SRC, index, text)


def test_rule_edits_cover_every_operator_family():
    edits = ED.rule_edits(SRC)
    texts = {t for _, t in edits}
    assert "for n in range(low, high):" in texts
    assert "if n % 2 == 0 and (not d.get(n)):" in texts
    assert "if n % 2 == 0 and d[n] is None:" in texts
    assert "elif n >= high:" in texts
    assert "total += n / 2" in texts
    assert "ranked = sorted(labels)[-3:]" in texts
    assert "ranked = sorted(labels, reverse=True)[:3]" in texts
    for i, t in edits:  # every proposal changes exactly its unit
        out = ED.replace_unit(SRC, i, t)
        assert ED.diff_units(SRC, out) == (i, ED.units(SRC)[i], Unit(ED.units(SRC)[i].kind, t))
    assert ED.rule_edits("def f(:") == []
    case = "def g(a, b):\n    if a.lower() == b.lower():\n        return 1\n    return b[:2]\n"
    texts = {t for _, t in ED.rule_edits(case)}
    assert {"if a == b:", "return b[-2:]"} <= texts


def test_operators_by_name():
    assert ED.apply("def f(x, y):\n    return x >= y\n", "weaken") == "def f(x, y):\n    return x > y"
    assert ED.apply("def f(x):\n    return x[-3:]\n", "first_k") == "def f(x):\n    return x[:3]"
    assert ED.apply("def f(d, k):\n    return d[k]\n", "get_default") == "def f(d, k):\n    return d.get(k, 0)"
    assert ED.apply("def f(x):\n    return x\n", "weaken") is None
    with pytest.raises(KeyError):
        ED.apply("def f(x):\n    return x\n", "no_such_operator")
    assert set(OPERATORS) >= {s for e in ERRORS.values() for s in e[:2]}


def test_signature_and_transfer():
    assert signature("if name.lower() == query.lower():") == "if <id> . lower ( ) == <id> . lower ( ) :"
    assert ED.signature("total += counts.get(item, 0)") == "<id> += <id> . get ( <id> , <num> )"
    assert "range" in KEYWORDS and "count" not in KEYWORDS
    target = "def g(words, q):\n    hits = 0\n    for w in words:\n        if w == q:\n            hits += 1\n    return hits\n"
    out = ED.transfer("if name == query:", "if name.lower() == query.lower():", target)
    assert out == normalize(target.replace("if w == q:", "if w.lower() == q.lower():"))
    out = ED.transfer("s += a // b", "s += a / b", "def g(x, y):\n    t = 0\n    t += x // y\n    return t\n")
    assert "t += x / y" in out
    assert ED.transfer("if a > b:", "if a >= b:", target) is None  # no unit with that shape
    assert ED.transfer("if a == b:", "if a == b:", "def g(:") is None


# --------------------------------------------------------------------------- tasks


def test_sizes_and_coverage(suite):
    envs = {t.env_id for t in suite.tasks}
    assert len(FAMILIES) >= 8 and len(envs) >= 4 and 150 <= len(suite.tasks) <= 250
    groups = Counter((fam(t), var(t)) for t in suite.tasks)
    for f in FAMILIES:
        for v in VARIANTS:
            assert groups[(f, v)] > 0, (f, v)
    for env in envs:
        assert {fam(t) for t in suite.tasks if t.env_id == env} == set(FAMILIES)
    assert set(suite.envs()) == envs and all(v is None for v in suite.envs().values())


def test_task_ids_and_fields(suite):
    ids = [t.task_id for t in suite.tasks]
    assert len(ids) == len(set(ids))
    assert set(suite.keys) == set(ids)
    for t in suite.tasks:
        k = suite.answer_key(t.task_id)
        assert k.task_id == t.task_id
        assert re.fullmatch(rf"pybugs/{t.env_id}/{k.family}/\d{{3}}", t.task_id), t.task_id
        assert t.domain == "python" and not k.ordered and k.variant in VARIANTS
        assert k.gold == normalize(k.gold)
        assert not any(hasattr(t, a) for a in ("gold", "family", "variant", "ordered"))  # the key holds them
        assert t.attrs["function"] in t.context and t.attrs["function"] in t.question
        assert suite.test_file(t).is_file()
        assert suite.task(t.task_id) is t
    with pytest.raises(KeyError):
        suite.task("pybugs/none/none/000")


def test_each_task_has_four_to_eight_tests(suite):
    for t in suite.tasks:
        n = len(re.findall(r"^def test_", suite.test_file(t).read_text(), re.M))
        assert 4 <= n <= 8, (t.task_id, n)


def test_build_is_idempotent_and_open_reads(suite, tmp_path):
    files = sorted(suite.tests_root.rglob("*.py"))
    before = {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in files}
    again = PyBugsSuite.build(suite.root)
    assert [t.task_id for t in again.tasks] == [t.task_id for t in suite.tasks]
    assert [again.keys[t.task_id].gold for t in again.tasks] == [gold(t) for t in suite.tasks]
    assert {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in files} == before
    opened = PyBugsSuite.open(suite.root)
    assert [t.attrs for t in opened.tasks] == [t.attrs for t in suite.tasks]
    with pytest.raises(FileNotFoundError):
        PyBugsSuite.open(tmp_path)
    other = PyBugsSuite.build(tmp_path / "seed1", task_seed=1)
    assert [t.task_id for t in other.tasks] == [t.task_id for t in suite.tasks]
    assert any(a.question != b.question for a, b in zip(other.tasks, suite.tasks))


def test_every_gold_scores_one(suite, gold_outcomes):
    bad = [tid for tid, o in gold_outcomes.items() if not (o.solved and o.score == 1.0 and o.completed)]
    assert not bad, [(tid, gold_outcomes[tid].feedback) for tid in bad[:5]]


@pytest.mark.parametrize("family", FAMILIES)
def test_slip_is_one_unit_and_earns_partial_credit(suite, slip_outcomes, family):
    for t in suite.tasks:
        if fam(t) != family:
            continue
        slipped = _slip(t)
        assert slipped is not None, t.task_id
        assert ED.diff_units(slipped, ED.normalize(gold(t))) is not None, t.task_id
        o = slip_outcomes[t.task_id]
        assert o.completed and 0.0 < o.score < 1.0, (t.task_id, o)


def test_rule_edits_restore_the_gold(suite, world):
    restored = 0
    checked = {}
    for t in suite.tasks:
        slipped = _slip(t)
        fixes = {ED.replace_unit(slipped, i, x) for i, x in ED.rule_edits(slipped)}
        if ED.normalize(gold(t)) in fixes:
            restored += 1
            checked.setdefault(fam(t), (t, ED.normalize(gold(t))))
    assert restored >= 0.9 * len(suite.tasks)
    for t, fixed in checked.values():  # the fix really scores 1 through the world model
        assert world.evaluate(t, fixed).solved


def test_transfer_of_a_fix_across_tasks_and_environments(suite, world):
    by_family = defaultdict(list)
    for t in suite.tasks:
        if var(t) == "base":
            by_family[fam(t)].append(t)
    for family, tasks in by_family.items():
        src = tasks[0]
        _, ub, ua = ED.diff_units(_slip(src), ED.normalize(gold(src)))
        ok = sum(ED.transfer(ub.text, ua.text, _slip(t)) == ED.normalize(gold(t)) for t in tasks[1:])
        assert ok == len(tasks) - 1, family
        other_env = next(t for t in tasks if t.env_id != src.env_id)
        assert world.evaluate(other_env, ED.transfer(ub.text, ua.text, _slip(other_env))).solved, family
        # the same fix carried onto a look-alike's correct code breaks it (what conditions must prevent)
        look = next(t for t in suite.tasks if fam(t) == family and var(t) == "look_alike")
        harmed = ED.transfer(ub.text, ua.text, ED.normalize(gold(look)))
        assert harmed is not None and world.evaluate(look, harmed).score < 1.0, family


def test_attrs_observable_and_never_the_gold(exact_suites):
    suite = exact_suites("pybugs")
    expected = {("inclusive_range", True): "inclusive", ("inclusive_range", False): "exclusive",
                ("lower_bound", True): "inclusive", ("lower_bound", False): "strict",
                ("upper_bound", True): "inclusive", ("upper_bound", False): "strict",
                ("floor_division", True): "floor", ("floor_division", False): "exact",
                ("none_check", True): "none", ("none_check", False): "falsy",
                ("sort_order", True): "desc", ("sort_order", False): "asc",
                ("case_insensitive", True): "insensitive", ("case_insensitive", False): "exact",
                ("last_k", True): "last", ("last_k", False): "first",
                ("missing_key", True): "zero", ("missing_key", False): "error"}
    all_keys = set(SEMANTIC_KEYS.values())
    for t in suite.tasks:
        key = SEMANTIC_KEYS[fam(t)]
        assert t.attrs[key] == expected[(fam(t), var(t) != "look_alike")], (t.task_id, t.attrs)
        assert not (all_keys - {key}) & set(t.attrs), (t.task_id, t.attrs)
        assert t.attrs["cues"] and all(c in LEXICON for c in t.attrs["cues"])
        if fam(t) in ("lower_bound", "upper_bound"):
            assert t.attrs["bound_side"] == fam(t).split("_")[0]
        assert t.attrs["question"] == t.question and t.attrs["env"] == t.env_id
        _, gold_unit, slip_unit = ED.diff_units(ED.normalize(gold(t)), _slip(t))
        for v in t.attrs.values():
            for s in (v if isinstance(v, tuple) else (v,)):
                if isinstance(s, str):
                    assert ED.normalize(gold(t)) not in s and gold_unit.text not in s and slip_unit.text not in s
        for field in (t.question, t.context):
            assert gold_unit.text not in field and slip_unit.text not in field


def test_observe_attrs_longest_phrase_wins(exact):
    a = observe_attrs("a reading that is None becomes 1", env="e", function="f", params=("x",), return_type="int")
    assert a["missing"] == "none" and a["cues"] == ("is none",) and a["n_params"] == 1
    a = observe_attrs("a reading that is None or 0 counts", env="e", function="f", params=(), return_type="int")
    assert a["missing"] == "falsy" and a["cues"] == ("is none or 0",)


def test_splits_disjoint_and_holdout_env_only_in_eval(suite):
    sp = suite.splits(seed=12345)
    ids = [{t.task_id for t in getattr(sp, n)} for n in ("build", "train", "val", "eval")]
    for a, b in itertools.combinations(range(4), 2):
        assert not ids[a] & ids[b]
    assert set().union(*ids) == {t.task_id for t in suite.tasks}
    held = set(suite.holdout_envs)
    assert held == {"events"}
    for name in ("build", "train", "val"):
        assert not any(t.env_id in held for t in getattr(sp, name))
    assert any(t.env_id in held for t in sp.eval)
    sources = {t.env_id for t in sp.build}
    conds = {transfer_condition(t, suite.answer_key(t.task_id), sources) for t in sp.eval}
    assert conds == set(TRANSFER_CONDITIONS)


# --------------------------------------------------------------------------- scripted backbone


def test_scripted_drafts_fail_on_traps_and_are_deterministic(suite, slip_outcomes):
    cfg = ScriptedConfig(p_error=1.0, p_noise=0.0)
    b1, b2 = ScriptedBackbone(suite.scripted_domain(), cfg), ScriptedBackbone(PyScript(suite.keys), cfg)
    for t in suite.tasks:
        d1 = b1.call(DRAFT_ACTION, DraftRequest(t)).action
        assert d1 == b2.call(DRAFT_ACTION, DraftRequest(t)).action
        if var(t) != "look_alike":
            assert d1 == _slip(t) and slip_outcomes[t.task_id].score < 1.0, t.task_id
    clean = ScriptedBackbone(PyScript(suite.keys), ScriptedConfig(p_error=0.0, p_error_look_alike=0.0, p_noise=0.0))
    assert all(clean.call(DRAFT_ACTION, DraftRequest(t)).action == gold(t) for t in suite.tasks[:30])


def test_scripted_distil_alternatives_and_revise(suite):
    b = ScriptedBackbone(PyScript(suite.keys), ScriptedConfig(p_ignore_record=0.0, p_propose_fix=1.0))
    kinds = Counter()
    by_family = {}
    for t in suite.tasks:
        if var(t) == "look_alike":
            continue
        d, g = _slip(t), ED.normalize(gold(t))
        _, ub, ua = ED.diff_units(d, g)
        for ep in range(3):
            r = b.call(DISTIL_RECORD, DistilRequest(t, d, g, ub.text, ua.text, "evidence", ep))
            cond = parse_condition(r.condition)
            kinds[type(cond).__name__] += 1
            if type(cond).__name__ == "Compare" and "return_type" not in r.condition:
                assert cond.evaluate(t.attrs), (r.condition, t.attrs)
        alts = b.call(GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest(t, (), d, "", [u.text for u in ED.units(d)]))
        assert any(ED.replace_unit(d, i, x) == g for i, x in alts.edits), t.task_id
        by_family.setdefault(fam(t), []).append((t, d, g, ub, ua))
    assert {"Compare", "Contains", "Universal"} <= set(kinds) or {"And", "Contains", "Universal"} <= set(kinds)
    for family, items in by_family.items():
        t0, d0, g0, ub, ua = items[0]
        text = MemoryText("record", Record(t0.task_id, "s", d0, g0, ub.text, ua.text, "ev", "none", 0.0, 1.0).render())
        fixed = sum(b.call(REVISE_WITH_RECORD, ReviseRequest(t, (), d, text)).action == g for t, d, g, _, _ in items[1:])
        assert fixed == len(items) - 1, family
    dom = PyScript(suite.keys)
    assert dom.unit_kind_name("for n in range(a, b):") == "loop header"
    assert dom.unit_kind_name("if x >= y:") == "condition"
    assert dom.unit_kind_name("return x") == "return statement"
    assert dom.unit_kind_name("count = d.get(k, 0)") == "assignment"

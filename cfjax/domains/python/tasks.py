"""Task templates of the built-in Python bug-fixing suite and their observable attributes.

Each task asks for one function of a small "repository" (an environment:
``inventory``, ``grades``, ``textutils``, ``events``, ``payroll``) and comes
with 5 pytest-style tests. Every family targets one mistake that code models
make, as a one-statement slip, and comes in three variants (papers/countermem.md
§3.1, App. D.4):

====================  ==============================  ================================  ==================================
family                base (the trap)                 look-alike (opposite requirement)  new surface (same error)
====================  ==============================  ================================  ==================================
``inclusive_range``   "from low to high inclusive"    "up to but not including high"     "low through high", "both ends
                      → ``range(low, high + 1)``      → ``range(low, high)``             included"
``lower_bound``       "at least limit" → ``>=``       "strictly above" / "more than"     "no less than", "limit or more"
``upper_bound``       "at most limit" → ``<=``        "strictly below" / "less than"     "no more than", "limit or less"
``floor_division``    "rounded down" → ``//``         "as a fractional number" → ``/``   "the whole number of"
``none_check``        "is None" → ``x is None``       "is None or 0" → ``not x``         "holds no value"
``sort_order``        "largest to smallest" /         "smallest to largest" /            "in descending order"
                      "largest first" → reverse=True  "smallest first" → ``sorted(x)``
``case_insensitive``  "ignoring case" → ``.lower()``  "case-sensitive" → ``==``          "regardless of capitalisation"
``last_k``            "the last k" → ``xs[-k:]``      "the first k" → ``xs[:k]``         "the k most recent"
``missing_key``       "counts as 0" → ``d.get(k, 0)`` "raise KeyError" → ``d[k]``        "defaults to zero"
====================  ==============================  ================================  ==================================

Per (environment, family) there are 5 tasks: 2 base, 2 look-alike and 1 new
surface, over two function shapes (a list-building and a counting/aggregating
one) that share the family's decisive statement, so a correction learned on
one task has the same masked shape on the others. Every task's tests include
cases on which the family's slip is wrong and cases on which it is not, so the
slip earns partial credit (0 < score < 1).

Observable attributes (``Task.attrs``) are what a reader of the question and
the function signature can establish — cue phrases mapped to semantic classes
by a fixed lexicon (:func:`observe_attrs`), the repository, the function name,
its parameters and annotated return type. They never contain the gold code.
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Callable
from dataclasses import dataclass

from cfjax.domains.python._astsafe import parse as ast_parse
from cfjax.domains.base import match_cues
from cfjax.types import AnswerKey, Task

__all__ = ["FAMILIES", "VARIANTS", "LEXICON", "SEMANTIC_KEYS", "REPOS", "Repo", "observe_attrs", "make_tasks",
           "render_tests", "TaskSpec"]

FAMILIES = ("inclusive_range", "lower_bound", "upper_bound", "floor_division", "none_check", "sort_order",
            "case_insensitive", "last_k", "missing_key")
VARIANTS = ("base", "look_alike", "new_surface")

#: phrase → (attribute, value); longest phrases are matched first and consume their
#: span, so "is None or 0" never also counts as "is None".
LEXICON: dict[str, tuple[str, str]] = {
    "inclusive": ("range_end", "inclusive"), "through": ("range_end", "inclusive"),
    "both ends included": ("range_end", "inclusive"), "up to but not including": ("range_end", "exclusive"),
    "at least": ("boundary", "inclusive"), "no fewer than": ("boundary", "inclusive"),
    "no less than": ("boundary", "inclusive"), "or more": ("boundary", "inclusive"),
    "at most": ("boundary", "inclusive"), "no more than": ("boundary", "inclusive"),
    "or less": ("boundary", "inclusive"), "or fewer": ("boundary", "inclusive"),
    "strictly above": ("boundary", "strict"), "more than": ("boundary", "strict"),
    "greater than": ("boundary", "strict"), "strictly below": ("boundary", "strict"),
    "less than": ("boundary", "strict"), "fewer than": ("boundary", "strict"),
    "rounded down": ("division", "floor"), "whole number of": ("division", "floor"),
    "fractional number": ("division", "exact"),
    "is none": ("missing", "none"), "holds no value": ("missing", "none"), "is none or 0": ("missing", "falsy"),
    "largest to smallest": ("order", "desc"), "largest first": ("order", "desc"),
    "descending order": ("order", "desc"), "smallest to largest": ("order", "asc"),
    "smallest first": ("order", "asc"),
    "ignoring case": ("case_semantics", "insensitive"),
    "regardless of capitalisation": ("case_semantics", "insensitive"),
    "case-sensitive": ("case_semantics", "exact"),
    "the last": ("slice_end", "last"), "most recent": ("slice_end", "last"), "the first": ("slice_end", "first"),
    "counts as 0": ("absent_key", "zero"), "defaults to zero": ("absent_key", "zero"),
    "raise keyerror": ("absent_key", "error"),
}
_SIDE = {
    "at least": "lower", "no fewer than": "lower", "no less than": "lower", "or more": "lower",
    "strictly above": "lower", "more than": "lower", "greater than": "lower",
    "at most": "upper", "no more than": "upper", "or less": "upper", "or fewer": "upper",
    "strictly below": "upper", "less than": "upper", "fewer than": "upper",
}
#: the attribute each family's requirement lives in (the scripted backbone's semantic conditions)
SEMANTIC_KEYS: dict[str, str] = {
    "inclusive_range": "range_end", "lower_bound": "boundary", "upper_bound": "boundary",
    "floor_division": "division", "none_check": "missing", "sort_order": "order",
    "case_insensitive": "case_semantics", "last_k": "slice_end", "missing_key": "absent_key",
}


def observe_attrs(question: str, *, env: str, function: str, params: tuple[str, ...], return_type: str) -> dict:
    """Observable attributes of a task (see the module docstring)."""
    attrs: dict = {"question": question, "env": env, "function": function, "params": params,
                   "n_params": len(params), "return_type": return_type}
    return match_cues(question, LEXICON, _SIDE, attrs)


# --------------------------------------------------------------------------- repositories


@dataclass(frozen=True)
class Repo:
    """One environment: a small repository and the vocabulary its functions use."""

    env_id: str
    description: str
    module: str
    thing: str
    things: str
    names: tuple[str, ...]
    #: (phrase, variable stem, lowest value, highest value)
    measures: tuple[tuple[str, str, int, int], ...]
    #: numbered objects: (plural phrase, singular phrase, label prefix, function stem)
    numbered: tuple[str, str, str, str]
    #: packing: (unit plural, group singular, group plural)
    packing: tuple[str, str, str]
    #: chronological log: (plural phrase, function stem)
    log: tuple[str, str]


REPOS: tuple[Repo, ...] = (
    Repo("inventory", "stock keeping for a small hardware shop", "inventory/stock.py", "item", "items",
         ("bolt", "nut", "washer", "screw", "hinge", "bracket", "rivet", "spring"),
         (("stock level", "stock", 0, 40), ("unit price", "price", 1, 30), ("weekly sales", "sales", 0, 25)),
         ("storage bins", "storage bin", "BIN-", "bin"), ("screws", "box", "boxes"), ("stock movements", "movement")),
    Repo("grades", "course grading for a university module", "grades/marks.py", "student", "students",
         ("ana", "ben", "chloe", "dev", "emma", "farid", "gita", "hugo"),
         (("exam score", "score", 0, 100), ("attendance count", "attendance", 0, 30),
          ("credit count", "credits", 0, 60)),
         ("exam rooms", "exam room", "ROOM-", "room"), ("students", "tutorial group", "tutorial_groups"),
         ("submitted marks", "mark")),
    Repo("textutils", "small helpers for processing text", "textutils/words.py", "word", "words",
         ("apple", "river", "stone", "cloud", "maple", "ember", "frost", "lumen"),
         (("letter count", "letters", 1, 12), ("frequency", "frequency", 0, 50), ("line number", "line", 1, 80)),
         ("chapters", "chapter", "CH-", "chapter"), ("characters", "line", "lines"), ("edits", "edit")),
    Repo("events", "ticketing for a concert venue", "events/tickets.py", "event", "events",
         ("gala", "jazz", "opera", "rock", "folk", "indie", "ballet", "choir"),
         (("ticket sales", "tickets", 0, 500), ("duration in minutes", "minutes", 30, 180),
          ("attendee count", "attendees", 0, 300)),
         ("seats", "seat", "SEAT-", "seat"), ("guests", "table", "tables"), ("bookings", "booking")),
    Repo("payroll", "salary calculations for a small firm", "payroll/pay.py", "employee", "employees",
         ("kim", "lars", "mona", "nils", "olga", "pete", "rosa", "sven"),
         (("hours worked", "hours", 0, 60), ("monthly salary", "salary", 1000, 6000),
          ("overtime hours", "overtime", 0, 20)),
         ("pay periods", "pay period", "PERIOD-", "period"), ("hours", "shift", "shifts"),
         ("timesheet entries", "timesheet")),
)


@dataclass(frozen=True)
class TaskSpec:
    """Everything about one task before it becomes a :class:`Task` and a test file."""

    family: str
    variant: str
    function: str
    signature: str
    gold: str
    question: str
    #: (test name, arguments); expected results come from running the gold
    cases: tuple[tuple[str, tuple], ...]


class _KeyErrorExpected:
    """Marker: the gold raises ``KeyError`` on this case."""


# --------------------------------------------------------------------------- family templates
#
# Each template returns (function name, parameter list with annotations, return
# annotation, body lines, question, cases) for one (repo, variant, shape).

Template = Callable[[Repo, str, int, random.Random, int], tuple]


def _pick(rng: random.Random, options: list[str]) -> str:
    return options[rng.randrange(len(options))]


def _mapping(rng: random.Random, repo: Repo, lo: int, hi: int, n: int, *, avoid: set | None = None) -> dict:
    names = rng.sample(repo.names, n)
    pool = [v for v in range(lo, hi + 1) if not avoid or v not in avoid]
    vals = rng.sample(pool, n)
    return dict(zip(names, vals))


def _inclusive_range(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
    plural, singular, prefix, stem = repo.numbered
    end = "high" if variant == "look_alike" else "high + 1"
    if variant == "base":
        span = "from `low` to `high` inclusive"
    elif variant == "look_alike":
        span = "from `low` up to but not including `high`"
    else:
        span = _pick(rng, ["`low` through `high`", "from `low` to `high`, both ends included"])
    if shape == 0:
        fn = f"{stem}_labels"
        params, ret = "low: int, high: int", "list[str]"
        body = ["labels = []", f"for n in range(low, {end}):", f"    labels.append({prefix!r} + str(n))",
                "return labels"]
        q = (f"Implement `{fn}(low, high)`: return the labels of the {plural} numbered {span}, in increasing "
             f"order. A label is '{prefix}' followed by the number, e.g. '{prefix}7'.")
        a, b, c, m, d = rng.randint(1, 5), rng.randint(1, 9), rng.randint(2, 8), rng.randint(1, 3), rng.randint(10, 20)
        cases = [("typical", (a, a + rng.randint(2, 4))), ("single_number", (b, b)), ("empty_range", (c + 3, c)),
                 ("starts_at_zero", (0, m)), ("far_apart", (d, d + 6))]
    else:
        fn = f"count_{stem}_numbers_divisible"
        params, ret = "low: int, high: int, step: int", "int"
        body = ["count = 0", f"for n in range(low, {end}):", "    if n % step == 0:", "        count += 1",
                "return count"]
        q = (f"Implement `{fn}(low, high, step)`: count the {singular} numbers {span} that are divisible by "
             "`step` (`step` >= 1).")
        qq, r, s = rng.randint(2, 5), rng.randint(2, 9), rng.randint(1, 9)
        cases = [("high_is_a_multiple", (1, 3 * qq, 3)), ("high_not_a_multiple", (1, 3 * qq + 1, 3)),
                 ("single_multiple", (2 * r, 2 * r, 2)), ("empty_range", (9, 4, 1)), ("step_one", (s, s + 4, 1))]
    return fn, params, ret, body, q, cases


def _bound(side: str) -> Template:
    def template(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
        phrase, stem, lo, hi = repo.measures[k % len(repo.measures)]
        mapping = f"{stem}_by_{repo.thing}"
        if side == "lower":
            op = ">" if variant == "look_alike" else ">="
            word = "high"
            cond = {"base": ["at least `limit`"], "look_alike": ["strictly above `limit`", "more than `limit`",
                                                                 "greater than `limit`"],
                    "new_surface": ["no less than `limit`", "`limit` or more"]}
        else:
            op = "<" if variant == "look_alike" else "<="
            word = "low"
            cond = {"base": ["at most `limit`"], "look_alike": ["strictly below `limit`", "less than `limit`"],
                    "new_surface": ["no more than `limit`", "`limit` or less"]}
        c = _pick(rng, cond[variant])
        if shape == 0:
            fn = f"{repo.things}_with_{word}_{stem}"
            params, ret = f"{mapping}: dict[str, int], limit: int", "list[str]"
            body = ["selected = []", f"for name, value in {mapping}.items():", f"    if value {op} limit:",
                    "        selected.append(name)", "return selected"]
            q = (f"Implement `{fn}({mapping}, limit)`: return the names of the {repo.things} whose {phrase} is "
                 f"{c}, in the order of the mapping.")
        else:
            fn = f"count_{repo.things}_with_{word}_{stem}"
            params, ret = f"{mapping}: dict[str, int], limit: int", "int"
            body = ["count = 0", f"for value in {mapping}.values():", f"    if value {op} limit:",
                    "        count += 1", "return count"]
            q = f"Implement `{fn}({mapping}, limit)`: return the number of {repo.things} whose {phrase} is {c}."
        m1 = _mapping(rng, repo, lo, hi, 5)
        present = sorted(m1.values())[2]
        while True:  # a limit strictly between the values that is not one of them
            m2 = _mapping(rng, repo, lo, hi, 4)
            v2 = sorted(m2.values())
            gaps = [v for v in range(v2[0] + 1, v2[-1]) if v not in v2]
            if gaps:
                between = rng.choice(gaps)
                break
        at = rng.randint(lo + 1, hi - 1)
        m4 = dict.fromkeys(rng.sample(repo.names, 2), at)
        m5 = _mapping(rng, repo, lo + 1, hi - 1, 3)
        beyond = (max(m5.values()) + 1) if side == "lower" else (min(m5.values()) - 1)
        cases = [("limit_is_a_value", (m1, present)), ("limit_between_values", (m2, between)),
                 ("empty_mapping", ({}, at)), ("all_at_limit", (m4, at)), ("nothing_selected", (m5, beyond))]
        return fn, params, ret, body, q, cases
    return template


def _floor_division(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
    units, group, groups = repo.packing
    gp = groups.replace("_", " ")
    look = variant == "look_alike"
    res = "share" if look else groups
    op = "/" if look else "//"
    if shape == 0:
        fn = f"{units}_per_{group.replace(' ', '_')}" if look else f"full_{groups}"
        params, ret = "total: int, size: int", "float" if look else "int"
        body = [f"{res} = total {op} size", f"return {res}"]
        if variant == "base":
            q = (f"Implement `{fn}(total, size)`: return how many {gp} of `size` {units} can be filled from "
                 f"`total` {units}, rounded down (the {units} left over do not fill a {group}).")
        elif variant == "new_surface":
            q = (f"Implement `{fn}(total, size)`: return the whole number of {gp} of `size` {units} that `total` "
                 f"{units} fill; a partly filled {group} does not count.")
        else:
            q = (f"Implement `{fn}(total, size)`: return the average number of {units} per {group} when `total` "
                 f"{units} are shared evenly among `size` {gp}, as a fractional number (e.g. 2.5).")
        size = rng.choice((2, 4, 5, 8))
        qq, r, t = rng.randint(2, 9), rng.randint(1, size - 1), rng.randint(3, 30)
        cases = [("exact_multiple", (size * qq, size)), ("with_remainder", (size * qq + r, size)),
                 ("zero_total", (0, size)), ("smaller_than_size", (r, size)), ("size_one", (t, 1))]
    else:
        fn = f"{units}_per_{group.replace(' ', '_')}_each" if look else f"full_{groups}_per_order"
        params, ret = "totals: list[int], size: int", "list[float]" if look else "list[int]"
        body = ["result = []", "for total in totals:", f"    {res} = total {op} size", f"    result.append({res})",
                "return result"]
        if variant == "base":
            q = (f"Implement `{fn}(totals, size)`: for each order total in `totals`, return how many {gp} of "
                 f"`size` {units} it fills, rounded down.")
        elif variant == "new_surface":
            q = (f"Implement `{fn}(totals, size)`: for each order total in `totals`, return the whole number of "
                 f"{gp} of `size` {units} it fills.")
        else:
            q = (f"Implement `{fn}(totals, size)`: for each total in `totals`, return the average number of "
                 f"{units} per {group} when it is shared evenly among `size` {gp}, as a fractional number.")
        size = rng.choice((2, 4, 5, 8))
        a, b, c, d = (rng.randint(1, 9) for _ in range(4))
        r1, r2 = rng.randint(1, size - 1), rng.randint(1, size - 1)
        cases = [("exact_multiples", ([size * a, size * b], size)),
                 ("remainders", ([size * a + r1, size * b + r2], size)),
                 ("no_orders", ([], size)), ("mixed", ([size * c, size * d + 1], size)),
                 ("single_exact", ([size * d], size))]
    return fn, params, ret, body, q, cases


def _none_check(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
    phrase, stem, lo, hi = repo.measures[k % len(repo.measures)]
    cond = "not value" if variant == "look_alike" else "value is None"
    default = rng.randint(1, 9)
    lo = max(lo, 1)
    if shape == 0:
        fn = f"fill_{stem}"
        params, ret = "values: list[int | None], default: int", "list[int]"
        body = ["filled = []", "for value in values:", f"    if {cond}:", "        value = default",
                "    filled.append(value)", "return filled"]
        if variant == "base":
            q = (f"Implement `{fn}(values, default)`: return the {phrase} readings in order, with every reading "
                 "that is None replaced by `default`. A reading of 0 is a real value and is kept.")
        elif variant == "new_surface":
            q = (f"Implement `{fn}(values, default)`: return the {phrase} readings in order; a reading that holds "
                 "no value (it was never taken) becomes `default`, while zeros stay as they are.")
        else:
            q = (f"Implement `{fn}(values, default)`: return the {phrase} readings in order, with every reading "
                 "that is None or 0 replaced by `default` (a 0 means the reading was skipped).")
        a, b, c = (rng.randint(lo, hi) for _ in range(3))
        cases = [("no_gaps", ([a, b, c], default)), ("zero_and_none", ([0, None, b], default)),
                 ("empty", ([], default)), ("only_none", ([None, None], default)), ("zeros", ([0, c, 0], default))]
    else:
        mapping = f"{stem}_by_{repo.thing}"
        fn = f"total_{stem}"
        params, ret = f"{mapping}: dict[str, int | None], default: int", "int"
        body = ["total = 0", f"for value in {mapping}.values():", f"    if {cond}:", "        value = default",
                "    total += value", "return total"]
        if variant == "base":
            q = (f"Implement `{fn}({mapping}, default)`: return the sum of the {phrase} values, using `default` "
                 "for a value that is None; a value of 0 is real and adds nothing.")
        elif variant == "new_surface":
            q = (f"Implement `{fn}({mapping}, default)`: return the sum of the {phrase} values; a value that holds "
                 "no value (never recorded) adds `default`, a zero adds nothing.")
        else:
            q = (f"Implement `{fn}({mapping}, default)`: return the sum of the {phrase} values, using `default` "
                 "for a value that is None or 0 (a 0 means the value was skipped).")
        n = rng.sample(repo.names, 4)
        a, b, c = (rng.randint(lo, hi) for _ in range(3))
        cases = [("no_gaps", ({n[0]: a, n[1]: b}, default)),
                 ("zero_and_none", ({n[0]: 0, n[1]: None, n[2]: c}, default)),
                 ("empty", ({}, default)), ("only_none", ({n[3]: None}, default)),
                 ("zeros", ({n[1]: 0, n[2]: b}, default))]
    return fn, params, ret, body, q, cases


def _sort_order(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
    phrase, stem, lo, hi = repo.measures[k % len(repo.measures)]
    rev = "" if variant == "look_alike" else ", reverse=True"
    if shape == 0:
        fn = f"sorted_{stem}"
        params, ret = "values: list[int]", "list[int]"
        body = [f"ranked = sorted(values{rev})", "return ranked"]
        order = {"base": "sorted from largest to smallest", "look_alike": "sorted from smallest to largest",
                 "new_surface": "in descending order"}[variant]
        q = f"Implement `{fn}(values)`: return the {phrase} values {order}."
        vals = rng.sample(range(lo, hi + 1), 5)
        y = rng.randint(lo, hi)
        cases = [("unsorted", (vals[:4],)), ("single", ([vals[4]],)), ("empty", ([],)), ("all_equal", ([y, y, y],)),
                 ("already_ascending", (sorted(vals[:3]),))]
    else:
        fn = f"pick_{stem}"
        params, ret = "values: list[int], n: int", "list[int]"
        body = [f"ranked = sorted(values{rev})", "return ranked[:n]"]
        which = {"base": "the `n` largest {p} values, largest first",
                 "look_alike": "the `n` smallest {p} values, smallest first",
                 "new_surface": "the `n` highest {p} values in descending order"}[variant].format(p=phrase)
        q = f"Implement `{fn}(values, n)`: return {which} (the whole list if it is shorter)."
        vals = rng.sample(range(lo, hi + 1), 6)
        y = rng.randint(lo, hi)
        cases = [("unsorted", (vals[:5], 2)), ("single", ([vals[5]], 1)), ("empty", ([], 3)),
                 ("all_equal", ([y] * 4, 2)), ("take_all", (vals[:3], 3))]
    return fn, params, ret, body, q, cases


def _case_insensitive(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
    cond = "name == query" if variant == "look_alike" else "name.lower() == query.lower()"
    w, o1, o2, o3 = rng.sample(repo.names, 4)
    W, U = w.capitalize(), w.upper()
    how = {"base": "equal to `query` ignoring case",
           "new_surface": "that match `query` regardless of capitalisation",
           "look_alike": f"equal to `query` in a case-sensitive comparison (so '{W}' and '{w}' differ)"}[variant]
    if shape == 0:
        fn = f"find_{repo.things}"
        params, ret = "names: list[str], query: str", "list[str]"
        body = ["matches = []", "for name in names:", f"    if {cond}:", "        matches.append(name)",
                "return matches"]
        q = (f"Implement `{fn}(names, query)`: return the {repo.thing} names {how}, in their original order and "
             "spelling.")
    else:
        fn = f"count_{repo.things}_named"
        params, ret = "names: list[str], query: str", "int"
        body = ["count = 0", "for name in names:", f"    if {cond}:", "        count += 1", "return count"]
        q = f"Implement `{fn}(names, query)`: return how many {repo.thing} names are {how}."
    cases = [("mixed_case", ([W, o1, w, U], w)), ("same_case", ([o1, o2, w], w)), ("empty", ([], w)),
             ("capitalised_query", ([w, o3], W)), ("no_match", ([o1, o2], w))]
    return fn, params, ret, body, q, cases


def _last_k(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
    log, stem = repo.log
    sl = "[:k]" if variant == "look_alike" else "[-k:]"
    which = {"base": "the last `k`", "look_alike": "the first `k`", "new_surface": "the `k` most recent"}[variant]
    if shape == 0:
        fn = f"{stem}_window"
        params, ret = "entries: list[str], k: int", "list[str]"
        body = [f"recent = entries{sl}", "return recent"]
        tail = "of them" if variant != "new_surface" else "ones"
        q = (f"Implement `{fn}(entries, k)`: `entries` lists the {log} oldest first; return {which} {tail} "
             "(`k` >= 1), keeping their order.")
        names = [f"{n}#{i}" for i, n in enumerate(rng.choices(repo.names, k=8), start=1)]
        cases = [("longer_than_k", (names[:5], 2)), ("shorter_than_k", (names[:2], 3)), ("single", (names[5:6], 1)),
                 ("exactly_k", (names[:3], 3)), ("k_is_one", (names[2:6], 1))]
    else:
        fn = f"{stem}_window_total"
        params, ret = "amounts: list[int], k: int", "int"
        body = [f"recent = amounts{sl}", "return sum(recent)"]
        q = (f"Implement `{fn}(amounts, k)`: `amounts` lists the {log} amounts oldest first; return the sum of "
             f"{which} of them (`k` >= 1).")
        inc = sorted(rng.sample(range(1, 60), 8))
        cases = [("longer_than_k", (inc[:5], 2)), ("shorter_than_k", (inc[:2], 3)), ("single", (inc[5:6], 1)),
                 ("exactly_k", (inc[:3], 3)), ("k_is_one", (inc[2:6], 1))]
    return fn, params, ret, body, q, cases


def _missing_key(repo: Repo, variant: str, shape: int, rng: random.Random, k: int) -> tuple:
    phrase, stem, lo, hi = repo.measures[k % len(repo.measures)]
    mapping = f"{stem}_by_{repo.thing}"
    look = f"{mapping}[name]" if variant == "look_alike" else f"{mapping}.get(name, 0)"
    rule = {"base": f"a {repo.thing} that is not in the mapping counts as 0",
            "new_surface": f"a {repo.thing} without an entry defaults to zero",
            "look_alike": f"a {repo.thing} that is not in the mapping is an error: raise KeyError"}[variant]
    n = rng.sample(repo.names, 5)
    a, b = rng.randint(max(lo, 1), hi), rng.randint(max(lo, 1), hi)
    m = {n[0]: a, n[1]: 0, n[2]: b}
    if shape == 0:
        fn = f"{stem}_of"
        params, ret = f"{mapping}: dict[str, int], name: str", "int"
        body = [f"count = {look}", "return count"]
        q = f"Implement `{fn}({mapping}, name)`: return the {phrase} recorded for the {repo.thing} `name`; {rule}."
        cases = [("known", (m, n[0])), ("unknown", (m, n[3])), ("empty_mapping", ({}, n[4])),
                 ("known_zero", (m, n[1])), ("another_known", (m, n[2]))]
    else:
        fn = f"{stem}_of_all"
        params, ret = f"{mapping}: dict[str, int], names: list[str]", "int"
        body = ["total = 0", "for name in names:", f"    count = {look}", "    total += count", "return total"]
        q = (f"Implement `{fn}({mapping}, names)`: return the total {phrase} recorded for the {repo.things} in "
             f"`names`; {rule}.")
        cases = [("all_known", (m, [n[0], n[2]])), ("one_unknown", (m, [n[0], n[3]])), ("no_names", (m, [])),
                 ("empty_mapping", ({}, [n[4]])), ("known_zero", (m, [n[1]]))]
    return fn, params, ret, body, q, cases


_TEMPLATES: dict[str, Template] = {
    "inclusive_range": _inclusive_range, "lower_bound": _bound("lower"), "upper_bound": _bound("upper"),
    "floor_division": _floor_division, "none_check": _none_check, "sort_order": _sort_order,
    "case_insensitive": _case_insensitive, "last_k": _last_k, "missing_key": _missing_key,
}

# per (environment, family): (variant, shape) of the 5 tasks; the new-surface shape alternates by environment
_PLAN = (("base", 0), ("base", 1), ("look_alike", 0), ("look_alike", 1), ("new_surface", None))


# --------------------------------------------------------------------------- test files

_TEST_HEADER = '''"""Tests of `{fn}` for task {task_id} (generated by cfjax.domains.python; do not edit)."""

from solution import {fn}


def _plain(value):
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return True
    if kind in (list, tuple):
        return all(_plain(v) for v in value)
    if kind is dict:
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def _shown(value):
    return repr(value) if _plain(value) else "an object of type " + type(value).__name__


def _check(call, got, want):
    assert _plain(got), call + " returned " + _shown(got) + ", expected " + repr(want)
    assert got == want, call + " returned " + repr(got) + ", expected " + repr(want)


def _check_raises(call, thunk, error):
    try:
        got = thunk()
    except error:
        return
    raise AssertionError(call + " returned " + _shown(got) + ", expected " + error.__name__)
'''


def _call_text(fn: str, args: tuple) -> str:
    return f"{fn}({', '.join(repr(a) for a in args)})"


def _expected(gold: str, fn: str, args: tuple) -> object:
    ns: dict = {}
    exec(compile(gold, "<gold>", "exec"), ns)  # noqa: S102 - the suite's own reference code
    try:
        return ns[fn](*copy.deepcopy(args))
    except KeyError:
        return _KeyErrorExpected


def render_tests(spec: TaskSpec, task_id: str) -> str:
    """The pytest-style test file of one task (expected values from running the gold)."""
    parts = [_TEST_HEADER.format(fn=spec.function, task_id=task_id)]
    seen: set[str] = set()
    for role, args in spec.cases:
        name = f"test_{role}"
        while name in seen:
            name += "_2"
        seen.add(name)
        call = _call_text(spec.function, args)
        want = _expected(spec.gold, spec.function, args)
        if want is _KeyErrorExpected:
            line = f"    _check_raises({call!r}, lambda: {call}, KeyError)"
        else:
            line = f"    _check({call!r}, {call}, {want!r})"
        parts.append(f"\n\ndef {name}():\n{line}\n")
    return "".join(parts)


def _context(repo: Repo, signature: str) -> str:
    return (f"# Repository `{repo.env_id}`: {repo.description}.\n# File: {repo.module}\n\n"
            f"{signature}\n    ...\n")


def make_specs(repo: Repo, env_index: int, seed: int = 0) -> list[tuple[str, TaskSpec]]:
    """``(task_id, spec)`` of every task of one repository, deterministic for ``seed``."""
    out: list[tuple[str, TaskSpec]] = []
    for family in FAMILIES:
        for idx, (variant, shape) in enumerate(_PLAN):
            if shape is None:
                shape = env_index % 2
            rng = random.Random(f"pybugs/{seed}/{repo.env_id}/{family}/{idx}")
            fn, params, ret, body, q, cases = _TEMPLATES[family](repo, variant, shape, rng, idx + env_index)
            signature = f"def {fn}({params}) -> {ret}:"
            gold = ast.unparse(ast_parse(signature + "\n" + "\n".join("    " + ln for ln in body) + "\n"))
            tid = f"pybugs/{repo.env_id}/{family}/{idx:03d}"
            out.append((tid, TaskSpec(family, variant, fn, signature, gold, q, tuple(cases))))
    return out


def make_tasks(seed: int = 0, repos: tuple[Repo, ...] = REPOS) -> list[tuple[Task, AnswerKey, str]]:
    """Every task with its answer key and the text of its test file, deterministic for ``seed``."""
    out: list[tuple[Task, AnswerKey, str]] = []
    for i, repo in enumerate(repos):
        for tid, spec in make_specs(repo, i, seed):
            fn_node = ast_parse(spec.gold).body[0]
            params = tuple(a.arg for a in fn_node.args.args)
            ret = ast.unparse(fn_node.returns) if fn_node.returns is not None else "None"
            attrs = observe_attrs(spec.question, env=repo.env_id, function=spec.function, params=params,
                                  return_type=ret)
            task = Task(tid, spec.question, repo.env_id, _context(repo, spec.signature), attrs, domain="python")
            out.append((task, AnswerKey(tid, spec.gold, spec.family, spec.variant), render_tests(spec, tid)))
    return out

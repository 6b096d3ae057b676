"""Task templates of the SAT/SMT suite and their observable attributes.

Each family targets one mistake that real models make when they *encode* a
combinatorial problem for a solver, and comes in three variants
(papers/countermem.md §3.1, App. D.4): ``base`` (the trap), ``look_alike``
(surface-similar wording, the opposite requirement) and ``new_surface`` (the
same requirement in other words). The family's requirement is always the
first line of the gold; the other lines state supporting facts in wording
that carries no lexicon cue.

SAT families (an encoding in the :mod:`cfjax.domains.sat.sat_world` language):

* ``one_colour`` — base "every region gets exactly one colour" (``exactly 1 of``); look-alike "at least
  one colour (a region may be striped)" (``atleast 1 of``); new surface "a single colour", "one and only
  one colour".
* ``cap`` (maps and rosters) — base "at most k" (``atmost k``); look-alike "fewer than k"
  (``lessthan k``); new surface "no more than k", "k … or fewer".
* ``minimum`` — base "at least k staff" (``atleast k``); look-alike "more than k staff"
  (``morethan k``); new surface "no fewer than k", "k or more".
* ``direction`` — base "t may only work a shift if m works it" (``w[t,s] => w[m,s]``); look-alike "t must
  work every shift that m works" (``w[m,s] => w[t,s]``); new surface "t never works a shift without m".
* ``daily`` — base "exactly one shift each day" (``exactly 1``); look-alike "at most one shift per day"
  (``atmost 1``); new surface "one and only one shift".

SMT families (an SMT-LIB QF_LIA script over ``s_<job>``/``e_<job>``):

* ``precedence`` — base "b starts once a has finished" (``(>= s_b e_a)``); look-alike "b starts strictly
  after a has finished" (``(> s_b e_a)``); new surface "cannot begin until", "as soon as".
* ``deadline`` — base "finished by day d" (``(<= e_j d)``); look-alike "finished before day d"
  (``(< e_j d)``); new surface "no later than", "on or before".
* ``release`` — base "can start on day r at the earliest" (``(>= s_j r)``); look-alike "can only start
  after day r" (``(> s_j r)``); new surface "no earlier than", "or later".
* ``overlap`` — base "share one crane, must not overlap" (disjoint intervals
  ``(or (<= e_a s_b) (<= e_b s_a))``); look-alike "may run in parallel but not start on the same day"
  (``(distinct s_a s_b)``); new surface "never run at the same time".

Every trap is observable: the family's characteristic slip makes the gold
encoding either unsatisfiable (a constraint made too strong where the
instance is tight — the bookings, availabilities and release days of the
supporting lines are chosen to make it so) or admits a solution that fails
one of the verifier's checks (too weak — the world checks the solver's
extreme solutions). Observable attributes (``Task.attrs``) are cue phrases
mapped to semantic classes by a fixed lexicon (:func:`observe_attrs`), plus
the environment, the problem type and the solver; never the gold.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from cfjax.domains.base import match_cues
from cfjax.types import AnswerKey, Task
from cfjax.domains.sat.instances import context_text
from cfjax.domains.sat.sat_world import SATInstance
from cfjax.domains.sat.smt_world import SMTInstance

__all__ = ["FAMILIES", "LEXICON", "observe_attrs", "make_tasks", "SAT_FAMILIES", "SMT_FAMILIES", "FAMILY_KEY",
           "GeneratedTask"]

SAT_FAMILIES = ("one_colour", "cap", "minimum", "direction", "daily")
SMT_FAMILIES = ("precedence", "deadline", "release", "overlap")
FAMILIES = SAT_FAMILIES + SMT_FAMILIES

#: the attribute carrying each family's semantics
FAMILY_KEY = {"one_colour": "cardinality", "daily": "cardinality", "cap": "boundary", "minimum": "boundary",
              "direction": "direction", "precedence": "precedence", "deadline": "deadline", "release": "release",
              "overlap": "resource"}

#: phrase → (attribute, value); longest phrases are matched first and consume their span
LEXICON: dict[str, tuple[str, str]] = {
    # cardinality of a choice
    "exactly one": ("cardinality", "exactly"), "one and only one": ("cardinality", "exactly"),
    "a single": ("cardinality", "exactly"), "at least one": ("cardinality", "at_least"),
    "at most one": ("cardinality", "at_most"),
    # numeric bounds
    "at least": ("boundary", "inclusive"), "no fewer than": ("boundary", "inclusive"),
    "or more": ("boundary", "inclusive"), "more than": ("boundary", "strict"),
    "at most": ("boundary", "inclusive"), "no more than": ("boundary", "inclusive"),
    "or fewer": ("boundary", "inclusive"), "fewer than": ("boundary", "strict"), "less than": ("boundary", "strict"),
    # direction of a dependency
    "may only work a shift if": ("direction", "only_if"), "never works a shift without": ("direction", "only_if"),
    "must work every shift that": ("direction", "every"),
    # precedence
    "starts once": ("precedence", "non_strict"), "cannot begin until": ("precedence", "non_strict"),
    "as soon as": ("precedence", "non_strict"), "strictly after": ("precedence", "strict"),
    # deadlines
    "by day": ("deadline", "inclusive"), "no later than": ("deadline", "inclusive"),
    "on or before": ("deadline", "inclusive"), "before day": ("deadline", "strict"),
    # release days
    "at the earliest": ("release", "inclusive"), "no earlier than": ("release", "inclusive"),
    "or later": ("release", "inclusive"), "only start after day": ("release", "strict"),
    # resources
    "must not overlap": ("resource", "shared"), "never run at the same time": ("resource", "shared"),
    "may run in parallel": ("resource", "parallel"),
}
_SIDE = {"at least": "lower", "no fewer than": "lower", "or more": "lower", "more than": "lower",
         "at most": "upper", "no more than": "upper", "or fewer": "upper", "fewer than": "upper",
         "less than": "upper"}


def observe_attrs(question: str, *, env: str, problem: str, solver: str) -> dict:
    """Observable attributes of a question (see module docstring)."""
    attrs: dict = {"question": question, "env": env, "problem": problem, "solver": solver}
    return match_cues(question, LEXICON, _SIDE, attrs)


@dataclass(frozen=True)
class GeneratedTask:
    """A task together with its verifier rules (what the world checks)."""

    task: Task
    rules: tuple[dict, ...]
    key: AnswerKey


class _Maker:
    def __init__(self, inst: SATInstance | SMTInstance, seed: int) -> None:
        self.inst = inst
        self.rng = random.Random(seed)
        self.context = context_text(inst)
        self.out: list[GeneratedTask] = []
        self.counter: dict[str, int] = {}
        self.solver = "smt" if isinstance(inst, SMTInstance) else "sat"

    def add(self, family: str, variant: str, question: str, gold: Iterable[str], rules: Iterable[dict]) -> None:
        n = self.counter.get(family, 0)
        self.counter[family] = n + 1
        tid = f"sat/{self.inst.env_id}/{family}/{n:03d}"
        attrs = observe_attrs(question, env=self.inst.env_id, problem=self.inst.problem, solver=self.solver)
        task = Task(tid, question, self.inst.env_id, self.context, attrs, self.solver)
        self.out.append(GeneratedTask(task, tuple(rules), AnswerKey(tid, "\n".join(gold), family, variant)))


PLAN = (("base", 4), ("look_alike", 3), ("new_surface", 3))


def make_tasks(inst: SATInstance | SMTInstance, seed: int = 0) -> list[GeneratedTask]:
    """All tasks of one environment, deterministic for ``seed``."""
    m = _Maker(inst, seed)
    if isinstance(inst, SMTInstance):
        for fam in SMT_FAMILIES:
            globals()[f"_{fam}"](m)
    elif inst.problem == "colouring":
        _one_colour(m)
        _cap_colouring(m)
    else:
        _cap_roster(m)
        _minimum(m)
        _direction(m)
        _daily(m)
    return m.out


# =========================================================================== colouring


def _col(m: _Maker):
    d = m.inst.data
    S = m.inst.sets
    return d["var"], d["regions"], d["colours"], d["borders"], S[d["regions"]], S[d["colours"]], S[d["borders"]]


def _independent(m: _Maker, size: int) -> list[str]:
    """A random independent set of regions of the given size (deterministic search)."""
    _, _, _, _, R, _, B = _col(m)
    adj = {r: set() for r in R}
    for u, v in B:
        adj[u].add(v)
        adj[v].add(u)
    for _ in range(2000):
        order = list(R)
        m.rng.shuffle(order)
        pick: list[str] = []
        for r in order:
            if not adj[r] & set(pick):
                pick.append(r)
            if len(pick) == size:
                return sorted(pick, key=R.index)
    raise RuntimeError(f"{m.inst.env_id}: no independent set of size {size}")


def _colourable(m: _Maker, must: dict[str, tuple[str, ...]], cap: int | None = None) -> bool:
    """Whether a proper colouring exists in which region ``r`` carries exactly the colours ``must[r]``
    (several for a striped region), every other region one colour, and no colour is used on more than
    ``cap`` regions (plain backtracking; the maps are tiny)."""
    _, _, _, _, R, C, B = _col(m)
    adj = {r: set() for r in R}
    for u, v in B:
        adj[u].add(v)
        adj[v].add(u)
    order = sorted(R, key=lambda r: (r not in must, -len(adj[r])))
    colours: dict[str, tuple[str, ...]] = {}
    use = {c: 0 for c in C}

    def go(i: int) -> bool:
        if i == len(order):
            return True
        r = order[i]
        options = [must[r]] if r in must else [(c,) for c in C]
        for opt in options:
            if any(set(opt) & set(colours.get(n, ())) for n in adj[r]):
                continue
            if cap is not None and any(use[c] + 1 > cap for c in opt):
                continue
            colours[r] = opt
            for c in opt:
                use[c] += 1
            if go(i + 1):
                return True
            for c in opt:
                use[c] -= 1
            del colours[r]
        return False

    return go(0)


def _proper_line(m: _Maker) -> str:
    x, _, C, B, *_ = _col(m)
    return f"each (u,v) in {B}, c in {C}: ~{x}[u,c] | ~{x}[v,c]"


def _one_colour(m: _Maker) -> None:
    x, Rn, Cn, _, R, C, _ = _col(m)
    name = "Map A" if m.inst.env_id == "graph_a" else "Map B"
    phr = {
        "base": ["Colour {map}: every region gets exactly one colour, and bordering regions never share a colour."],
        "new_surface": ["Paint {map} so that each region is painted in a single colour and no two bordering "
                        "regions share a colour.",
                        "Give every region of {map} one and only one colour; bordering regions never share a colour."],
        "look_alike": ["Colour {map}: every region gets at least one colour (a region may be striped in several "
                       "colours), and bordering regions never share a colour."],
    }
    ind = {"base": "exactly", "new_surface": "exactly", "look_alike": "atleast"}
    for variant, n in PLAN:
        for _ in range(n):
            q = m.rng.choice(phr[variant]).format(map=name)
            gold = [f"each v in {Rn}: {ind[variant]} 1 of {x}[v,c] for c in {Cn}", _proper_line(m)]
            rules = [{"rule": "colours_per_region", "op": "==" if variant != "look_alike" else ">=", "k": 1},
                     {"rule": "proper"}]
            r = m.rng.choice(R)
            if variant == "look_alike":
                while True:
                    c1, c2 = sorted(m.rng.sample(C, 2), key=C.index)
                    if _colourable(m, {r: (c1, c2)}):
                        break
                    r = m.rng.choice(R)
                q += f" Region {r} is striped {c1} and {c2}."
                gold.append(f"each c in {{{c1}, {c2}}}: {x}[{r},c]")
                rules += [{"rule": "paint", "region": r, "colour": c1, "value": True},
                          {"rule": "paint", "region": r, "colour": c2, "value": True}]
            else:
                c1 = m.rng.choice(C)
                q += f" Region {r} must be {c1}."
                gold.append(f"{x}[{r},{c1}]")
                rules.append({"rule": "paint", "region": r, "colour": c1, "value": True})
            m.add("one_colour", variant, q, gold, rules)


def _cap_colouring(m: _Maker) -> None:
    x, Rn, Cn, _, R, C, _ = _col(m)
    name = "Map A" if m.inst.env_id == "graph_a" else "Map B"
    lo = -(-len(R) // len(C))  # the smallest feasible cap
    phr = {
        "base": ["Paint each region of {map} in one colour so that bordering regions never share a colour "
                 "and each colour is used on at most {k} regions."],
        "new_surface": ["Paint each region of {map} in one colour (bordering regions never share a colour); "
                        "each colour may cover no more than {k} regions.",
                        "Paint each region of {map} in one colour, bordering regions never sharing a colour, "
                        "and {k} regions or fewer per colour."],
        "look_alike": ["Paint each region of {map} in one colour so that bordering regions never share a "
                       "colour and each colour is used on fewer than {k} regions."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            strict = variant == "look_alike"
            k = m.rng.choice((lo + 1, lo + 2)) if strict else m.rng.choice((lo, lo + 1))
            for _try in range(200):
                if _try == 100 and strict:
                    k = lo + 1  # the larger look-alike cap admits no extra region in this map
                booked = _independent(m, k - 1 if strict else k)
                # the look-alike books the first colour, which a solver preferring true values reaches first,
                # and needs a colouring of the *slipped* cap (k) that paints one more region with it
                c = C[0] if strict else m.rng.choice(C)
                must = {r: (c,) for r in booked}
                if not _colourable(m, must, k - 1 if strict else k):
                    continue
                if not strict or any(_colourable(m, {**must, z: (c,)}, k) for z in R if z not in must):
                    break
            else:
                raise RuntimeError(f"{m.inst.env_id}: no feasible booking for a colour cap of {k}")
            q = m.rng.choice(phr[variant]).format(map=name, k=k)
            q += f" The regions {', '.join(booked[:-1])} and {booked[-1]} are already painted {c}."
            op = "lessthan" if strict else "atmost"
            gold = [f"each c in {Cn}: {op} {k} of {x}[v,c] for v in {Rn}",
                    f"each v in {Rn}: exactly 1 of {x}[v,c] for c in {Cn}",
                    _proper_line(m),
                    f"each v in {{{', '.join(booked)}}}: {x}[v,{c}]"]
            rules = [{"rule": "colour_use", "op": "<" if strict else "<=", "k": k},
                     {"rule": "colours_per_region", "op": "==", "k": 1}, {"rule": "proper"}]
            rules += [{"rule": "paint", "region": r, "colour": c, "value": True} for r in booked]
            m.add("cap", variant, q, gold, rules)


# =========================================================================== rosters


def _ros(m: _Maker):
    d = m.inst.data
    S = m.inst.sets
    return d["var"], d["staff"], S[d["staff"]], S["SHIFTS"], S["DAYS"]


def _who(m: _Maker) -> str:
    return "staff member" if m.inst.data["staff"] == "STAFF" else "nurse"


def _and(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def _cap_roster(m: _Maker) -> None:
    w, Pn, P, S, _ = _ros(m)
    who = _who(m)
    phr = {
        "base": ["Each {who} works at most {k} shifts."],
        "new_surface": ["Each {who} works no more than {k} shifts.", "Each {who} works {k} shifts or fewer."],
        "look_alike": ["Each {who} works fewer than {k} shifts."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            strict = variant == "look_alike"
            k = m.rng.choice((4, 5)) if strict else m.rng.choice((3, 4))
            cap = k - 1 if strict else k
            dmax = cap * len(P) // len(S)
            dmin = max(1, dmax - 1)
            D = m.rng.randint(dmin, dmax)
            p = m.rng.choice(P)
            booked = sorted(m.rng.sample(S, cap), key=S.index)
            q = (m.rng.choice(phr[variant]).format(who=who, k=k) + f" Every shift needs a minimum of {D} staff."
                 + f" {p} is already booked for {_and(booked)}.")
            op = "lessthan" if strict else "atmost"
            gold = [f"each p in {Pn}: {op} {k} of {w}[p,s] for s in SHIFTS",
                    f"each s in SHIFTS: atleast {D} of {w}[p,s] for p in {Pn}",
                    f"each s in {{{', '.join(booked)}}}: {w}[{p},s]"]
            rules = [{"rule": "load", "op": "<" if strict else "<=", "k": k},
                     {"rule": "staffing", "op": ">=", "k": D}]
            rules += [{"rule": "assign", "who": p, "shift": s, "value": True} for s in booked]
            m.add("cap", variant, q, gold, rules)


def _minimum(m: _Maker) -> None:
    w, Pn, P, S, _ = _ros(m)
    who = _who(m)
    phr = {
        "base": ["Every shift needs at least {k} staff."],
        "new_surface": ["Every shift is staffed by no fewer than {k} people.",
                        "Every shift has {k} or more people on duty."],
        "look_alike": ["Every shift needs more than {k} staff."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            strict = variant == "look_alike"
            k = m.rng.choice((1, 2)) if strict else m.rng.choice((2, 3))
            need = k + 1 if strict else k
            mx = -(-need * len(S) // len(P)) + m.rng.choice((0, 1))
            q = m.rng.choice(phr[variant]).format(k=k) + f" Each {who} works a maximum of {mx} shifts."
            s = m.rng.choice(S)
            avail = sorted(m.rng.sample(P, need), key=P.index)
            off = [p for p in P if p not in avail]
            q += f" Only {_and(avail)} {'are' if len(avail) > 1 else 'is'} available for {s}."
            op = "morethan" if strict else "atleast"
            gold = [f"each s in SHIFTS: {op} {k} of {w}[p,s] for p in {Pn}",
                    f"each p in {Pn}: atmost {mx} of {w}[p,s] for s in SHIFTS",
                    f"each p in {{{', '.join(off)}}}: ~{w}[p,{s}]"]
            rules = [{"rule": "staffing", "op": ">" if strict else ">=", "k": k},
                     {"rule": "load", "op": "<=", "k": mx}]
            rules += [{"rule": "assign", "who": p, "shift": s, "value": False} for p in off]
            m.add("minimum", variant, q, gold, rules)


def _direction(m: _Maker) -> None:
    w, Pn, P, S, _ = _ros(m)
    phr = {
        "base": ["{t} is a trainee and may only work a shift if {m} works that shift too."],
        "new_surface": ["{t} is a trainee and never works a shift without {m}."],
        "look_alike": ["{t} is a trainee and must work every shift that {m} works."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            t, mentor = m.rng.sample(P, 2)
            D = 1  # the booked person covers the shift: nobody else is needed there
            booked = sorted(m.rng.sample(S, 2), key=S.index)
            q = m.rng.choice(phr[variant]).format(t=t, m=mentor) + f" Every shift needs a minimum of {D} staff."
            if variant == "look_alike":
                q += f" {mentor} is already booked for {_and(booked)}."
                gold = [f"each s in SHIFTS: {w}[{mentor},s] => {w}[{t},s]"]
                rules = [{"rule": "with", "if": mentor, "then": t}]
                first = mentor
            else:
                q += f" {t} is already booked for {_and(booked)}."
                gold = [f"each s in SHIFTS: {w}[{t},s] => {w}[{mentor},s]"]
                rules = [{"rule": "with", "if": t, "then": mentor}]
                first = t
            gold += [f"each s in SHIFTS: atleast {D} of {w}[p,s] for p in {Pn}",
                     f"each s in {{{', '.join(booked)}}}: {w}[{first},s]"]
            rules += [{"rule": "staffing", "op": ">=", "k": D}]
            rules += [{"rule": "assign", "who": first, "shift": s, "value": True} for s in booked]
            m.add("direction", variant, q, gold, rules)


def _daily(m: _Maker) -> None:
    w, Pn, P, S, Days = _ros(m)
    who = _who(m)
    per_day = len(S) // len(Days)
    phr = {
        "base": ["Every {who} works exactly one shift each day."],
        "new_surface": ["Every day, each {who} takes one and only one shift."],
        "look_alike": ["Every {who} works at most one shift per day."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            strict = variant != "look_alike"
            p = m.rng.choice(P)
            day = m.rng.choice(Days)
            # with the base's "exactly", leave someone free each day (else "at most" would force the same)
            D = m.rng.randint(1, (len(P) - 1) // per_day)
            q = m.rng.choice(phr[variant]).format(who=who) + f" Every shift needs a minimum of {D} staff."
            op = "exactly" if strict else "atmost"
            gold = [f"each p in {Pn}, d in DAYS: {op} 1 of {w}[p,s] for s in SHIFTS_ON[d]",
                    f"each s in SHIFTS: atleast {D} of {w}[p,s] for p in {Pn}"]
            rules = [{"rule": "daily", "op": "==" if strict else "<=", "k": 1},
                     {"rule": "staffing", "op": ">=", "k": D}]
            shifts = m.inst.families["SHIFTS_ON"][day]
            if strict:
                s = m.rng.choice(shifts)
                q += f" {p} is already booked for {s}."
                gold.append(f"{w}[{p},{s}]")
                rules.append({"rule": "assign", "who": p, "shift": s, "value": True})
            else:
                q += f" {p} is on leave on {day}."
                gold.append(f"each s in SHIFTS_ON[{day}]: ~{w}[{p},s]")
                rules += [{"rule": "assign", "who": p, "shift": s, "value": False} for s in shifts]
            m.add("daily", variant, q, gold, rules)


# =========================================================================== schedules


def _jobs(m: _Maker, min_dur: int = 1) -> list[tuple[str, int]]:
    return [(j, d) for j, d in m.inst.jobs if d >= min_dur]  # type: ignore[union-attr]


def _distractor(m: _Maker, used: set[str]) -> tuple[str, str] | None:
    free = [j for j, _ in m.inst.jobs if j not in used]  # type: ignore[union-attr]
    if len(free) < 2:
        return None
    a, b = m.rng.sample(free, 2)
    return a, b


def _precedence(m: _Maker) -> None:
    H = m.inst.horizon  # type: ignore[union-attr]
    phr = {
        "base": ["{b} starts once {a} has finished."],
        "new_surface": ["{b} cannot begin until {a} is done.", "{b} may start as soon as {a} is complete."],
        "look_alike": ["{b} starts strictly after {a} has finished, with an idle day in between."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            strict = variant == "look_alike"
            (a, da), (b, db) = m.rng.sample(_jobs(m), 2)
            r = H - da - db - (1 + m.rng.choice((0, 1, 2)) if strict else 0)
            q = m.rng.choice(phr[variant]).format(a=a, b=b) + f" {a} arrives on day {r}."
            gold = [f"(assert ({'>' if strict else '>='} s_{b} e_{a}))", f"(assert (>= s_{a} {r}))"]
            rules = [{"rule": "after", "job": b, "prev": a, "gap": 1 if strict else 0},
                     {"rule": "release", "job": a, "day": r, "strict": False}]
            x = _distractor(m, {a, b})
            if x is not None:
                q += f" {x[1]} follows {x[0]}."
                gold.append(f"(assert (>= s_{x[1]} e_{x[0]}))")
                rules.append({"rule": "after", "job": x[1], "prev": x[0], "gap": 0})
            m.add("precedence", variant, q, gold, rules)


def _deadline(m: _Maker) -> None:
    H = m.inst.horizon  # type: ignore[union-attr]
    phr = {
        "base": ["{j} must be finished by day {d}."],
        "new_surface": ["{j} is due no later than day {d}.", "{j} must be complete on or before day {d}."],
        "look_alike": ["{j} must be finished before day {d}."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            strict = variant == "look_alike"
            for _try in range(100):
                (p, dp), (j, dj) = m.rng.sample(_jobs(m), 2)
                r = m.rng.randint(0, 4)
                d = r + dp + dj + (1 + m.rng.choice((0, 1, 2)) if strict else 0)
                if d <= H - (1 if strict else 0):
                    break
            q = m.rng.choice(phr[variant]).format(j=j, d=d) + f" {j} follows {p}. {p} arrives on day {r}."
            gold = [f"(assert ({'<' if strict else '<='} e_{j} {d}))", f"(assert (>= s_{j} e_{p}))",
                    f"(assert (>= s_{p} {r}))"]
            rules = [{"rule": "deadline", "job": j, "day": d, "strict": strict},
                     {"rule": "after", "job": j, "prev": p, "gap": 0},
                     {"rule": "release", "job": p, "day": r, "strict": False}]
            m.add("deadline", variant, q, gold, rules)


def _release(m: _Maker) -> None:
    H = m.inst.horizon  # type: ignore[union-attr]
    phr = {
        "base": ["{j} can start on day {r} at the earliest."],
        "new_surface": ["{j} starts no earlier than day {r}.", "{j} may start on day {r} or later."],
        "look_alike": ["{j} can only start after day {r}."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            strict = variant == "look_alike"
            (j, dj), (k, dk) = m.rng.sample(_jobs(m), 2)
            r = H - dj - dk - (1 + m.rng.choice((0, 1, 2)) if strict else 0)
            q = m.rng.choice(phr[variant]).format(j=j, r=r) + f" {k} follows {j}."
            gold = [f"(assert ({'>' if strict else '>='} s_{j} {r}))", f"(assert (>= s_{k} e_{j}))"]
            rules = [{"rule": "release", "job": j, "day": r, "strict": strict},
                     {"rule": "after", "job": k, "prev": j, "gap": 0}]
            m.add("release", variant, q, gold, rules)


def _overlap(m: _Maker) -> None:
    H = m.inst.horizon  # type: ignore[union-attr]
    phr = {
        "base": ["{a} and {b} share one crane, so they must not overlap in time."],
        "new_surface": ["{a} and {b} need the only crane: they never run at the same time."],
        "look_alike": ["{a} and {b} may run in parallel, but they cannot start on the same day (one delivery slot "
                       "per day)."],
    }
    for variant, n in PLAN:
        for _ in range(n):
            (a, da), (b, db) = m.rng.sample(_jobs(m, min_dur=2), 2)
            q = m.rng.choice(phr[variant]).format(a=a, b=b)
            if variant == "look_alike":
                window = m.rng.randint(max(da, db) + 1, da + db - 1)
                r = H - window
                q += f" {a} and {b} both arrive on day {r}."
                gold = [f"(assert (distinct s_{a} s_{b}))", f"(assert (>= s_{a} {r}))", f"(assert (>= s_{b} {r}))"]
                rules = [{"rule": "distinct_start", "a": a, "b": b},
                         {"rule": "release", "job": a, "day": r, "strict": False},
                         {"rule": "release", "job": b, "day": r, "strict": False}]
            else:
                gold = [f"(assert (or (<= e_{a} s_{b}) (<= e_{b} s_{a})))"]
                rules = [{"rule": "disjoint", "a": a, "b": b}]
                x = _distractor(m, {a, b})
                if x is not None:
                    q += f" {x[1]} follows {x[0]}."
                    gold.append(f"(assert (>= s_{x[1]} e_{x[0]}))")
                    rules.append({"rule": "after", "job": x[1], "prev": x[0], "gap": 0})
            m.add("overlap", variant, q, gold, rules)

"""Task templates of the toylist suite and their observable attributes.

Four families, each targeting one slip and coming in three variants (papers/countermem.md App. D.4):

=============  ===============================  ================================  ===============================
family         base (the trap)                  look-alike (the opposite)         new surface (same requirement)
=============  ===============================  ================================  ===============================
lower_bound    "at least v" → ``filter x >= v``  "strictly above v" → ``x > v``    "no fewer than v", "v or more"
upper_bound    "at most v" → ``filter x <= v``   "strictly below v" → ``x < v``    "no more than v", "v or less"
order          "k largest" → ``sort desc``       "k smallest" → ``sort asc``       "k highest", "top k"
distinct       "different" → ``count unique``    "in total" → ``count``            "distinct", "only once"
=============  ===============================  ================================  ===============================

A new-surface task rewords one base task of the same environment (the same gold: its *twin*). Every
trap is observable: each environment's list contains the threshold ``v`` and duplicates, and
:func:`make_tasks` asserts that the family's slip changes the result on the environment's list.
Observable attributes are cue phrases mapped by a fixed lexicon, the environment and the list length;
never the gold.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from cfjax.domains.base import match_cues
from cfjax.types import AnswerKey, Task

from tests.plugins.toydomain.lang import parse, run

__all__ = ["FAMILIES", "LEXICON", "ENVS", "observe_attrs", "context_text", "make_tasks", "LANGUAGE"]

LANGUAGE = "toylist"
FAMILIES = ("lower_bound", "upper_bound", "order", "distinct")

#: env_id → its list of integers (``prices`` is held out: the new-environment condition)
ENVS: dict[str, tuple[int, ...]] = {
    "scores": (3, 5, 5, 8, 10, 12, 12, 15, 7, 9, 5, 20),
    "temps": (14, 18, 21, 21, 9, 16, 18, 25, 30, 11, 21, 4),
    "ages": (34, 27, 41, 27, 19, 55, 63, 41, 22, 38, 27, 70, 45),
    "heights": (162, 175, 158, 181, 175, 169, 190, 158, 172, 166, 175, 184),
    "prices": (120, 80, 95, 80, 150, 200, 95, 60, 110, 80, 175),
}

#: phrase → (attribute, value); longest phrases are matched first and consume their span
LEXICON: dict[str, tuple[str, str]] = {
    "at least": ("boundary", "inclusive"), "no fewer than": ("boundary", "inclusive"),
    "or more": ("boundary", "inclusive"), "strictly above": ("boundary", "strict"),
    "more than": ("boundary", "strict"), "at most": ("boundary", "inclusive"),
    "no more than": ("boundary", "inclusive"), "or less": ("boundary", "inclusive"),
    "strictly below": ("boundary", "strict"), "less than": ("boundary", "strict"),
    "largest": ("order_direction", "desc"), "highest": ("order_direction", "desc"), "top": ("order_direction", "desc"),
    "smallest": ("order_direction", "asc"), "lowest": ("order_direction", "asc"),
    "different": ("cardinality", "unique"), "distinct": ("cardinality", "unique"),
    "only once": ("cardinality", "unique"), "in total": ("cardinality", "all"),
}
_SIDE = {"at least": "lower", "no fewer than": "lower", "or more": "lower", "strictly above": "lower",
         "more than": "lower", "at most": "upper", "no more than": "upper", "or less": "upper",
         "strictly below": "upper", "less than": "upper"}


def observe_attrs(question: str, *, env: str, n_values: int) -> dict:
    """Observable attributes of a question: its cues (lexicon), the environment, the list length."""
    return match_cues(question, LEXICON, _SIDE, {"question": question, "env": env, "n_values": n_values})


def context_text(env: str) -> str:
    """What the agent is shown: the list and the language."""
    vals = ENVS[env]
    return (f"List `{env}` ({len(vals)} integers, in this order): {', '.join(map(str, vals))}\n"
            "Write a pipeline, one step per line, applied in order to the list x: "
            "filter x OP N (OP one of >= > <= < == !=), map x OP N (OP one of + - * // %), sort asc|desc, "
            "take N, and optionally a final aggregation (sum, count, count unique, max, min).")


@dataclass(frozen=True)
class _Spec:
    family: str
    variant: str
    question: str
    gold: str


def _thresholds(vals: tuple[int, ...], rng: random.Random, n: int) -> list[int]:
    """``n`` distinct values of the list that are neither its minimum nor its maximum (so both sides of a
    bound are non-empty and the value itself sits on the boundary)."""
    inner = sorted({v for v in vals if min(vals) < v < max(vals)})
    rng.shuffle(inner)
    return inner[:n]


def _specs(env: str, rng: random.Random) -> list[_Spec]:
    vals = ENVS[env]
    out: list[_Spec] = []
    L = f"`{env}`"
    # ---- lower_bound: three base tasks, two rewordings of them, two look-alikes
    a, b, c, d, e = _thresholds(vals, rng, 5)
    out += [_Spec("lower_bound", "base", f"What is the sum of the values of {L} that are at least {a}?",
                  f"filter x >= {a}\nsum"),
            _Spec("lower_bound", "base", f"How many values of {L} are at least {b}?", f"filter x >= {b}\ncount"),
            _Spec("lower_bound", "base", f"List the values of {L} that are at least {c}, each doubled, in the "
                  "order given.", f"filter x >= {c}\nmap x * 2"),
            _Spec("lower_bound", "new_surface", f"Add up the values of {L} that are {a} or more.",
                  f"filter x >= {a}\nsum"),
            _Spec("lower_bound", "new_surface", f"Count the values of {L} that are no fewer than {b}.",
                  f"filter x >= {b}\ncount"),
            _Spec("lower_bound", "look_alike", f"What is the sum of the values of {L} that are strictly above {d}?",
                  f"filter x > {d}\nsum"),
            _Spec("lower_bound", "look_alike", f"How many values of {L} are more than {e}?", f"filter x > {e}\ncount")]
    # ---- upper_bound
    a, b, c, d, e = _thresholds(vals, rng, 5)
    out += [_Spec("upper_bound", "base", f"What is the sum of the values of {L} that are at most {a}?",
                  f"filter x <= {a}\nsum"),
            _Spec("upper_bound", "base", f"How many values of {L} are at most {b}?", f"filter x <= {b}\ncount"),
            _Spec("upper_bound", "base", f"List the values of {L} that are at most {c}, each plus 1, in the order "
                  "given.", f"filter x <= {c}\nmap x + 1"),
            _Spec("upper_bound", "new_surface", f"Add up the values of {L} that are {a} or less.",
                  f"filter x <= {a}\nsum"),
            _Spec("upper_bound", "new_surface", f"Count the values of {L} that are no more than {b}.",
                  f"filter x <= {b}\ncount"),
            _Spec("upper_bound", "look_alike", f"What is the sum of the values of {L} that are strictly below {d}?",
                  f"filter x < {d}\nsum"),
            _Spec("upper_bound", "look_alike", f"How many values of {L} are less than {e}?", f"filter x < {e}\ncount")]
    # ---- order
    k1, k2, k3 = rng.sample((2, 3, 4, 5), 3)
    out += [_Spec("order", "base", f"List the {k1} largest values of {L}, largest first.", f"sort desc\ntake {k1}"),
            _Spec("order", "base", f"What is the sum of the {k2} largest values of {L}?", f"sort desc\ntake {k2}\nsum"),
            _Spec("order", "base", f"List the {k3} largest values of {L} after adding 10 to each, largest first.",
                  f"map x + 10\nsort desc\ntake {k3}"),
            _Spec("order", "new_surface", f"Give the {k1} highest values of {L}, highest first.",
                  f"sort desc\ntake {k1}"),
            _Spec("order", "new_surface", f"Add up the top {k2} values of {L}.", f"sort desc\ntake {k2}\nsum"),
            _Spec("order", "look_alike", f"List the {k3} smallest values of {L}, smallest first.",
                  f"sort asc\ntake {k3}"),
            _Spec("order", "look_alike", f"What is the sum of the {k1} smallest values of {L}?",
                  f"sort asc\ntake {k1}\nsum")]
    # ---- distinct
    m1, m2, m3 = rng.sample((3, 4, 5, 6, 7), 3)
    out += [_Spec("distinct", "base", f"How many different values does {L} hold?", "sort asc\ncount unique"),
            _Spec("distinct", "base", f"How many different remainders do the values of {L} leave when divided by "
                  f"{m1}?", f"map x % {m1}\ncount unique"),
            _Spec("distinct", "base", f"How many different results come out when each value of {L} is "
                  f"integer-divided by {m2}?", f"map x // {m2}\ncount unique"),
            _Spec("distinct", "new_surface", f"Counting every value only once, how many values does {L} hold?",
                  "sort asc\ncount unique"),
            _Spec("distinct", "new_surface", f"How many distinct remainders do the values of {L} leave when divided "
                  f"by {m1}?", f"map x % {m1}\ncount unique"),
            _Spec("distinct", "look_alike", f"How many values does {L} hold in total, counted after sorting?",
                  "sort asc\ncount"),
            _Spec("distinct", "look_alike", f"How many remainders in total (one per value) do the values of {L} "
                  f"leave when divided by {m3}?", f"map x % {m3}\ncount")]
    return out


#: the slip of each family on base/new-surface and on look-alike tasks (the error model's table)
SLIPS = {"lower_bound": ("to_strict", "to_inclusive"), "upper_bound": ("to_strict", "to_inclusive"),
         "order": ("flip_order", "flip_order"), "distinct": ("drop_unique", "add_unique")}


def make_tasks(env: str, seed: int = 0) -> list[tuple[Task, AnswerKey]]:
    """Every task of one environment (deterministic for ``seed``)."""
    from tests.plugins.toydomain.script import slip_text  # the error model's slips, to check the trap

    rng = random.Random(f"toylist/{env}/{seed}")
    vals = ENVS[env]
    ctx = context_text(env)
    counter: dict[str, int] = {}
    out = []
    for s in _specs(env, rng):
        n = counter.get(s.family, 0)
        counter[s.family] = n + 1
        tid = f"toylist/{env}/{s.family}/{n:03d}"
        slip = SLIPS[s.family][1 if s.variant == "look_alike" else 0]
        slipped = slip_text(slip, s.gold)
        assert slipped is not None and run(parse(slipped), vals) != run(parse(s.gold), vals), (tid, s.gold, slip)
        task = Task(tid, s.question, env, ctx, observe_attrs(s.question, env=env, n_values=len(vals)), LANGUAGE)
        out.append((task, AnswerKey(tid, s.gold, s.family, s.variant)))
    return out

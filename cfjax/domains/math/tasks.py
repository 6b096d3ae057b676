"""Tasks of the math suite: each theorem of :mod:`cfjax.domains.math.theorems` becomes one task.

The agent sees the question (the informal statement), the environment (which type and scope, which
standard-library lemma sets are imported) and the formal statement with the names of its variables;
it writes the proof body. The answer key holds the gold proof, the family and variant and, for the
world, the theorem's Coq name, statement and environment preamble; the scripted error model reads
the theorem's documented slip through the key (world side), never through the task.

Observable attributes (:func:`observe_attrs`) are what a reader of the question and the formal
statement can establish: cue phrases of the question by a fixed lexicon (:data:`LEXICON`, through
:func:`cfjax.domains.base.match_cues` and its documented miss/noise rates) and the statement's
shape — its type (``nat``, ``Z``, ``list``), whether it multiplies two variables or raises to a
power (a nonlinear goal), has hypotheses, uses list operations, booleans, divisibility or ``mod``,
and how many variables it quantifies. None of them names a tactic or a lemma of the gold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cfjax.domains.base import match_cues
from cfjax.types import AnswerKey, Task

__all__ = ["LEXICON", "SEMANTIC_KEYS", "observe_attrs", "statement_attrs", "make_tasks", "MathTask", "context_text"]

#: phrase → (attribute, value); longest first, each consuming its span (cfjax.domains.base.match_cues).
#: The phrases are the questions' cue phrases (:data:`cfjax.domains.math.theorems.CUES`); a family's
#: base and new-surface phrases share a value, its look-alike phrase has the opposite one.
LEXICON: dict[str, tuple[str, str]] = {
    # missing_intros: a premise to introduce vs a plain universal claim
    "suppose that": ("premise", "hypothesis"), "given that": ("premise", "hypothesis"),
    "for every choice of": ("premise", "universal"),
    # induction_var: which variable the induction follows
    "following the first": ("induction_on", "first"), "tracking the variable listed first": ("induction_on", "first"),
    "following the second": ("induction_on", "second"),
    # rewrite_dir: fold into a named form vs unfold it
    "written back as": ("rewrite_form", "fold"), "restated in terms of": ("rewrite_form", "fold"),
    "written out as": ("rewrite_form", "unfold"),
    # wrong_lemma: the operation the lemma is about
    "the sum": ("operation", "sum"), "the total": ("operation", "sum"), "the product": ("operation", "product"),
    "at most": ("operation", "le"), "conjunction": ("operation", "and"), "requiring both": ("operation", "and"),
    "disjunction": ("operation", "or"), "equality test": ("operation", "eqb"),
    "concatenation": ("operation", "append"), "joining": ("operation", "append"),
    "reversing the concatenation": ("operation", "rev_append"), "reversal": ("operation", "rev"),
    "reversing twice": ("operation", "rev_rev"), "mapping": ("operation", "map"),
    "on the left": ("side", "left"), "on the right": ("side", "right"),
    "absolute value of a product": ("operation", "abs_mul"), "first factor": ("side", "left"),
    "leading factor": ("side", "left"), "second factor": ("side", "right"), "difference": ("operation", "sub"),
    "negated divisor": ("operation", "divide_opp"), "divides 0": ("operation", "divide_zero"),
    # lia_nia: a nonlinear term vs a constant multiple
    "the square": ("operation", "product"), "a constant multiple": ("operation", "linear"),
    # forgotten_case: a case split vs a uniform argument
    "depending on": ("cases", "split"), "considering both possible": ("cases", "split"),
    "treating": ("cases", "split"), "separately": ("cases", "split"), "regardless of": ("cases", "uniform"),
}
_SIDE: dict[str, str] = {}

#: the attributes that carry a family's semantics (the scripted distiller's conditions name them)
SEMANTIC_KEYS = ("premise", "induction_on", "rewrite_form", "operation", "side", "cases", "type")

_VAR_BINDER = re.compile(r"forall\s+([^,:]+?)\s*:\s*([A-Za-z_][\w.]*(?:\s+[A-Za-z_][\w.]*)?)\s*,")


def statement_attrs(statement: str) -> dict:
    """What the formal statement shows (module docstring)."""
    s = " ".join(statement.split())
    binders = _VAR_BINDER.findall(s)
    variables = [v for names, _ in binders for v in names.replace("(", " ").replace(")", " ").split()]
    types = {t.split()[0] for _, t in binders}
    typ = "list" if "list" in s else ("Z" if "Z" in types or "%Z" in s else ("bool" if types == {"bool"} else "nat"))
    ids = r"(?:[A-Za-z_][\w']*|\([^()]*\))"
    nonlinear = bool(re.search(rf"{ids}\s*\*\s*{ids}", s) and re.search(r"[a-z]\w*'?\s*\*\s*[a-z(]", s)) \
        or "^" in s
    return {"type": typ, "n_vars": len(variables), "nonlinear": nonlinear, "power": "^" in s,
            "has_hypothesis": "->" in s, "list_ops": any(op in s for op in ("++", "length", "rev", "map", "::")),
            "divides": "|" in s or "divide" in s, "modulo": "mod" in s, "negation": "~" in s}


def observe_attrs(question: str, *, env: str, statement: str) -> dict:
    """Observable attributes of a task (module docstring)."""
    attrs: dict = {"question": question, "env": env, **statement_attrs(statement)}
    return match_cues(question, LEXICON, _SIDE, attrs)


def context_text(env_description: str, preamble: str, name: str, statement: str) -> str:
    """What the agent is shown beside the question: the environment, its preamble and the statement."""
    return (f"Environment: {env_description}\n"
            f"Preamble (already loaded):\n{preamble.rstrip()}\n\n"
            f"Theorem {name} : {statement}.\n\n"
            "Write the proof body: the tactic sentences between `Proof.` and `Qed.`, one per line.")


@dataclass(frozen=True)
class MathTask:
    """A task with its answer key."""

    task: Task
    key: AnswerKey


def make_tasks(theorems, envs) -> list[MathTask]:
    """One task per theorem (:mod:`cfjax.domains.math.theorems`), in the data's order."""
    out = []
    for th in theorems:
        env = envs[th.env_id]
        question = th.question
        task = Task(task_id=f"math/{th.tid}", question=question, env_id=th.env_id,
                    context=context_text(env.description, env.preamble, th.name, th.statement),
                    attrs=observe_attrs(question, env=th.env_id, statement=th.statement), domain="coq")
        key = AnswerKey(task.task_id, "\n".join(th.gold), family=th.family, variant=th.variant,
                        extra={"name": th.name, "statement": th.statement, "preamble": env.preamble,
                               "slip": (int(th.slip[0]), th.slip[1])})
        out.append(MathTask(task, key))
    return out

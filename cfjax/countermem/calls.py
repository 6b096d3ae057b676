"""CounterMem's own model calls: Module I (GENERATE_LOCAL_ALTERNATIVES) and Module II (DISTIL_RECORD).

papers/countermem.md §3.2–3.3 (Eq. 1), App. B.4, App. D.8. Each call is a
:class:`~cfjax.types.CallKind` — the template, the strict line-based parser and the scripted
simulator's answer — registered in :data:`cfjax.registry.CALLS` and served by every backbone through
``backbone.call(kind, request)``; no backbone knows these calls.

**Local alternatives, scripted.** With ``p_propose_fix`` (the driver's competence draw, made from its
own seed) the reply contains one true one-unit fix, which it asks of the competence interface
(:meth:`cfjax.llm.scripted.ScriptedDomain.true_fixes`); the remaining slots up to K are filled with
*plausible distractors* — the domain's rule operators (which include edits beyond the inverses of the
simulated slips) and, for a short action that offers fewer than K of them, second-order edits of the
same unit — never the true fix. So on a failed draft that one unit edit can fix, the fix is among the
K alternatives with probability ``p_propose_fix`` (a test measures it on every suite); a draft with two
wrong units has no one-unit fix.

**Distillation, scripted.** The situation text names the question's cue phrase and the masked edit.
The condition uses only the observable attributes the prompt lists (``render_attrs``): the *semantic*
lexicon attribute of the source question with probability ``p_condition_semantic`` (e.g.
``boundary = "inclusive" and bound_side = "lower"``), the cue phrase (``question contains "at least"``:
fails on new surfaces) with ``p_condition_surface``, and otherwise *too broad* (``none`` or only the
column type) — a realistic failure that the look-alike tasks expose.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.prompts import action_noun as _noun
from cfjax.llm.prompts import render_attrs, truncate
from cfjax.llm.prompts import system_line as _system
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, EditError, Task, Usage

__all__ = ["AlternativesRequest", "AlternativesResult", "DistilRequest", "DistilResult",
           "GENERATE_LOCAL_ALTERNATIVES", "DISTIL_RECORD", "render_alternatives", "parse_edits", "render_distil",
           "parse_distil"]


# --------------------------------------------------------------------------- requests and results

@dataclass(frozen=True)
class AlternativesRequest:
    """GENERATE_LOCAL_ALTERNATIVES (Module I, Eq. 1): local edits of a failed
    action, each replacing exactly one decision unit."""

    task: Task
    history: Sequence[Attempt]
    action: str
    feedback: str
    units: Sequence[str]  # decision units of ``action``, indexed from 0
    k: int = 4
    episode: int = 0


@dataclass(frozen=True)
class AlternativesResult:
    """``edits`` are ``(unit_index, replacement_text)`` pairs in the fixed edit grammar."""

    edits: tuple[tuple[int, str], ...]
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class DistilRequest:
    """DISTIL_RECORD (Module II): turn a verified contrast into (q, c)."""

    task: Task
    original: str
    improved: str
    unit_before: str
    unit_after: str
    evidence: str
    episode: int = 0


@dataclass(frozen=True)
class DistilResult:
    """``condition`` is condition-language text; ``"none"`` means universal."""

    situation: str
    condition: str
    usage: Usage
    raw: str = ""


# --------------------------------------------------------------------------- templates and parsers

def render_alternatives(req: "AlternativesRequest") -> str:
    t = req.task
    units = truncate("\n".join(f"[{i}] {u}" for i, u in enumerate(req.units)), "units")
    return (
        f"{_system(t)}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Failed action\n{truncate(req.action, 'action')}\n\n"
        f"### Evaluator feedback\n{truncate(req.feedback, 'feedback')}\n\n### Decision units\n{units}\n\n"
        f"### Instructions\nPropose at most {req.k} local edits. Each edit replaces exactly ONE "
        f"decision unit; do not write a complete replacement {_noun(t)}. One edit per line:\n"
        "EDIT: REPLACE [<unit index>] WITH <new unit text>"
    )


_EDIT_RE = re.compile(r"^\s*EDIT(?:\s*\d+)?:\s*REPLACE\s*\[(\d+)\]\s*WITH[ \t]*(\S.*?)\s*$", re.M | re.I)


def parse_edits(text: str, n_units: int, k: int) -> list[tuple[int, str]]:
    """``EDIT: REPLACE [i] WITH <text>`` lines → ``[(i, text)]``.

    Lines naming a unit outside ``[0, n_units)`` or with an empty replacement
    are dropped; duplicates are dropped; at most ``k`` edits are kept.
    """
    out: list[tuple[int, str]] = []
    if k <= 0:
        return out
    for m in _EDIT_RE.finditer(text):
        i, repl = int(m.group(1)), m.group(2).strip().strip("`").strip()
        if 0 <= i < n_units and repl and (i, repl) not in out:
            out.append((i, repl))
        if len(out) >= k:
            break
    return out


def render_distil(req: "DistilRequest") -> str:
    t = req.task
    return (
        f"{_system(t)}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Original action\n{truncate(req.original, 'action')}\n\n"
        f"### Improved action (checked from the same state)\n{truncate(req.improved, 'action')}\n\n"
        f"### Changed decision unit\n{req.unit_before} -> {req.unit_after}\n\n"
        f"### Evidence\n{truncate(req.evidence, 'feedback')}\n\n"
        "### Instructions\nDistil the checked contrast into a reusable record. Reply with two lines:\n"
        "SITUATION: <what went wrong, in general terms>\n"
        "CONDITION: <a requirement of the NEW task that must hold before applying this. It must be "
        "checkable and it must be able to be FALSE for a task that looks similar. Write \"none\" only "
        "if no such requirement exists.>\n"
        "Conditions use: question contains \"<phrase>\", <attribute> = \"<value>\", <attribute> != "
        "\"<value>\", has <attribute>, combined with and / or / not and parentheses.\n"
        f"Attributes a new task is described by (name = value for this task):\n{render_attrs(t.attrs)}"
    )


_SIT_RE = re.compile(r"^\s*SITUATION:[ \t]*(\S.*?)\s*$", re.M)
_COND_RE = re.compile(r"^\s*CONDITION:[ \t]*(\S.*?)\s*$", re.M)


def parse_distil(text: str) -> tuple[str, str]:
    """``(situation, condition)``; empty strings where a line is missing.

    ``"none"`` is returned as ``"none"``: the condition parser maps it to the
    empty (universal) condition, an empty string is unparsable and rejected.
    """
    s = _SIT_RE.search(text)
    c = _COND_RE.search(text)
    return (s.group(1) if s else "", c.group(1) if c else "")


# --------------------------------------------------------------------------- the scripted simulator's answers

def _alternatives(sim, req: AlternativesRequest) -> str:
    c = sim.config
    rng = sim.rng("alternatives", req.task.task_id, req.episode, req.action)
    lines: list[str] = []
    try:
        fixes = sim.domain.true_fixes(req.task, req.action)  # competence interface (world side)
    except EditError:
        return "EDIT: (the action does not parse; no local edit proposed)"
    wrong = sorted(fixes)
    if wrong and rng.random() < c.p_propose_fix:
        i = rng.choice(wrong)
        lines.append(f"EDIT: REPLACE [{i}] WITH {fixes[i]}")
    for i, text in _distractors(sim, req, fixes, rng, req.k - len(lines)):
        lines.append(f"EDIT: REPLACE [{i}] WITH {text}")
    return "\n".join(lines)

def _distractors(sim, req: AlternativesRequest, fixes: dict[int, str], rng: random.Random, n: int
                 ) -> list[tuple[int, str]]:
    """Up to ``n`` plausible wrong one-unit edits of ``req.action``, never a true fix: the domain's
    rule operators first (shuffled), then — when an action offers fewer than ``n`` — second-order
    edits of the same unit (a rule operator applied to a first-order edit), as a model asked for K
    alternatives writes K even for a short action."""
    ed = sim.edits
    env = sim.domain.env(req.task)
    try:
        units = [u.text for u in ed.units(req.action)]
    except EditError:
        return []
    first = ed.rule_edits(req.action, env)
    rng.shuffle(first)
    out: list[tuple[int, str]] = []
    seen = {(i, t) for i, t in enumerate(units)}

    def take(i: int, text: str) -> None:
        if len(out) < n and (i, text) not in seen and fixes.get(i) != text:
            seen.add((i, text))
            out.append((i, text))

    for i, text in first:
        take(i, text)
    if len(out) < n:
        second = []
        for i, text in first:
            try:
                nxt = ed.replace_unit(req.action, i, text)
            except EditError:
                continue
            second += [(j, t2) for j, t2 in ed.rule_edits(nxt, env) if j == i]
        rng.shuffle(second)
        for i, text in second:
            take(i, text)
    return out

def _distil(sim, req: DistilRequest) -> str:
    c = sim.config
    t = req.task
    ed = sim.edits
    rng = sim.rng("distil", t.task_id, req.episode, req.unit_before, req.unit_after)
    cues = list(t.attrs.get("cues", ()))
    cue_text = f"The question says '{cues[0]}'. " if cues else ""
    situation = (f"{cue_text}A {sim.domain.unit_kind_name(req.unit_before)} of the form "
                 f"`{ed.signature(req.unit_before)}` gave the wrong result; `{ed.signature(req.unit_after)}` "
                 "fixed it.")
    u = rng.random()
    semantic = [k for k in sim.domain.semantic_keys if k in t.attrs]
    if u < c.p_condition_semantic and semantic:
        cond = sim.domain.semantic_condition(t, semantic[0])
    elif u < c.p_condition_semantic + c.p_condition_surface and cues:
        cond = f'question contains "{cues[0]}"'
    else:  # too broad
        cond = sim.domain.broad_condition(t, rng)
    return f"SITUATION: {situation}\nCONDITION: {cond}"


# --------------------------------------------------------------------------- registration

def _parse_alternatives(text: str, req: AlternativesRequest, usage: Usage) -> AlternativesResult:
    return AlternativesResult(tuple(parse_edits(text, n_units=len(req.units), k=req.k)), usage, text)


def _parse_distil_result(text: str, req: DistilRequest, usage: Usage) -> DistilResult:
    situation, condition = parse_distil(text)
    return DistilResult(situation, condition, usage, text)


#: GENERATE_LOCAL_ALTERNATIVES (Module I, Eq. 1): at most K one-unit edits of a failed action
GENERATE_LOCAL_ALTERNATIVES: CallKind[AlternativesRequest, AlternativesResult] = CALLS.register(
    "GENERATE_LOCAL_ALTERNATIVES", CallKind("GENERATE_LOCAL_ALTERNATIVES", render_alternatives, _parse_alternatives,
                                            _alternatives, "one-unit edits of a failed action (Module I)"))

#: DISTIL_RECORD (Module II): a verified contrast → (situation, applicability condition)
DISTIL_RECORD: CallKind[DistilRequest, DistilResult] = CALLS.register(
    "DISTIL_RECORD", CallKind("DISTIL_RECORD", render_distil, _parse_distil_result, _distil,
                              "a verified contrast as a situation and a condition (Module II)"))

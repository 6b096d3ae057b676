"""The original ExpeL's model calls: the insight-pool edits EXPEL_COMPARE and EXPEL_SUCCESSES.

Zhao et al., *ExpeL: LLM Agents Are Experiential Learners* (AAAI 2024), §4.2 "Insight extraction";
LeapLabTHU/ExpeL ``agent/expel.py`` (``create_rules``, ``parse_rules``, ``update_rules``) and
``prompts/templates/human.py`` (``human_critique_existing_rules_template``,
``human_critique_existing_rules_all_success_template``, ``FORMAT_RULES_OPERATION_TEMPLATE``,
``CRITIQUE_SUMMARY_SUFFIX``). Two :class:`~cfjax.types.CallKind` s registered in
:data:`cfjax.registry.CALLS`:

* ``EXPEL_COMPARE`` — a failed and a successful trial of the same task, with the numbered existing
  rules: reply with operations on the rules;
* ``EXPEL_SUCCESSES`` — a batch of successful trials (8 in ExpeL's config) with the rules: the same.

The reply is one operation per line (the store, :mod:`cfjax.expel.pool`, applies them)::

    AGREE <n>: <existing rule>
    REMOVE <n>: <existing rule>
    EDIT <n>: <new modified rule>
    ADD: <new rule>

A rule is one line; a concrete rule ends with `` [EDIT: <unit before> -> <unit after>]`` (the
machine-readable half; :func:`show_rule` puts it on its own ``EDIT:`` line when the rule is shown).
The parser is lenient where the code is (a number after ``ADD`` is ignored; list markers and bold
are stripped) and strict elsewhere: a line that names an operation but breaks its form is counted in
``malformed``; a reply with no operation that is not ``NONE`` sets ``parse_failed``. Unlike the
code's ``parse_rules`` it does not require a rule to end with a period (ours end with the bracket).

**Scripted competence** (:data:`SCRIPTED`; fixed before any result was seen; the simulator must not
make this peer look better or worse than its mechanism). Rules are compared by the domain's masked
unit shape (:meth:`~cfjax.types.EditModel.signature`: identifiers and literals masked) — a model sees
that "`COUNT(phone)` instead of `COUNT(*)`" and "`COUNT(email)` instead of `COUNT(*)`" are one rule.

* EXPEL_COMPARE: the lesson of the pair is the simulator's one lesson model
  (:func:`cfjax.llm.extract.lessons_of` on the trajectory failed → succeeded: the one-unit contrast).
  An existing rule with the same edit (both shapes) → ``AGREE n``; else one with the same ``before``
  shape and another ``after`` → ``EDIT n: <new rule>`` with ``p_edit``, else ``ADD``; else
  ``ADD: <lesson>``; no lesson (the two actions differ in more than one unit) → ``NONE``. A full pool
  does not stop the ADD (the store's cap does).
* EXPEL_SUCCESSES: for each existing concrete rule in order, at most ``max_ops`` operations: ``AGREE``
  when a success's final action has a unit of the rule's ``after`` shape (the successes are
  consistent with it), else ``REMOVE`` with ``p_remove`` when one has a unit of its ``before`` shape
  (a success contradicts it). It adds nothing: a first-attempt success names no edit
  (:mod:`cfjax.llm.extract`), and the contrasts of the others are read by EXPEL_COMPARE.

What a real model must do that the simulator only draws: write general, high-level rules from
contrasting trials (here the one-unit contrast, with its shape as "the same rule"), decide whether a
new critique agrees with, refines or contradicts an existing rule (here shape matches and the
``p_edit`` / ``p_remove`` draws), and keep to the operation format and the 4-operation limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import lessons_of
from cfjax.llm.prompts import system_line, truncate
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, EditError, Task, Usage

__all__ = ["Competence", "SCRIPTED", "MAX_OPS", "Op", "OpsResult", "CompareRequest", "SuccessesRequest",
           "EXPEL_COMPARE", "EXPEL_SUCCESSES", "render_compare", "render_successes", "parse_ops", "rule_text",
           "rule_edit", "show_rule"]

#: "Do at most 4 operations" (ExpeL's FORMAT_RULES_OPERATION_TEMPLATE)
MAX_OPS = 4


@dataclass(frozen=True)
class Competence:
    """The simulator's competence draws for the two calls (module docstring). Fixed before any result
    was seen; the simulator must not make this peer look better or worse than its mechanism."""

    p_edit: float = 0.5  # EXPEL_COMPARE: same `before` shape, other `after` → EDIT that rule (else ADD)
    p_remove: float = 0.5  # EXPEL_SUCCESSES: a success has the rule's `before` shape → REMOVE it
    max_ops: int = MAX_OPS  # the prompt's operation limit, which the simulator keeps


SCRIPTED = Competence()


# ---------------------------------------------------------------------------------------------- rules
_RULE_EDIT_RE = re.compile(r"\s*\[EDIT:\s*(.+?)\s+->\s+(.+)\]\s*$")


def rule_text(sentence: str, before: str, after: str) -> str:
    """One rule line: the sentence with its edit in brackets at the end."""
    return f"{sentence.strip()} [EDIT: {before} -> {after}]"


def rule_edit(text: str) -> tuple[str, str] | None:
    """``(before, after)`` of a rule's bracketed edit, or ``None`` (a rule in words only)."""
    m = _RULE_EDIT_RE.search(text)
    return (m.group(1).strip(), m.group(2).strip()) if m else None


def show_rule(text: str) -> str:
    """A rule as the executor is shown it: the sentence, then its ``EDIT:`` line on its own."""
    m = _RULE_EDIT_RE.search(text)
    if not m:
        return text.strip()
    return f"{text[:m.start()].strip()}\nEDIT: {m.group(1).strip()} -> {m.group(2).strip()}"


# ---------------------------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class CompareRequest:
    """EXPEL_COMPARE: a failed and a successful trial of one task, and the rules as they stand."""

    task: Task
    failed: Attempt
    succeeded: Attempt
    rules: tuple[str, ...]
    full: bool  # the pool holds max_rules rules (the prompt's "full" suffix)
    episode: int = 0


@dataclass(frozen=True)
class SuccessesRequest:
    """EXPEL_SUCCESSES: successful trials of several tasks (one batch), and the rules as they stand."""

    tasks: tuple[Task, ...]
    successes: tuple[Attempt, ...]  # one per task, in the same order
    rules: tuple[str, ...]
    full: bool
    batch: int = 0  # the batch's index (seeds the draws)


@dataclass(frozen=True)
class Op:
    """One operation on the pool: ``kind`` ADD | EDIT | AGREE | REMOVE, the 1-based rule ``number``
    (``None`` for ADD) and the rule text (``""`` where AGREE / REMOVE gave none)."""

    kind: str
    number: int | None
    text: str


@dataclass(frozen=True)
class OpsResult:
    ops: tuple[Op, ...]
    usage: Usage
    raw: str = ""
    parse_failed: bool = False  # no operation line and not NONE
    malformed: int = 0  # lines naming an operation but breaking its form


# ---------------------------------------------------------------------------------------------- prompts
_FORMAT = (
    "Reply with the operations only, one per line, in exactly these forms:\n"
    "AGREE <existing rule number>: <existing rule>   (the rule is strongly relevant and confirmed)\n"
    "REMOVE <existing rule number>: <existing rule>  (the rule is contradicted, or duplicates another)\n"
    "EDIT <existing rule number>: <new modified rule>  (the rule can be made more general or better)\n"
    "ADD: <new rule>   (a new rule, very different from the existing ones and useful for other tasks)\n"
    "Each rule is one line, general (do not mention the trials), concise and easy to follow. When a rule is\n"
    "a concrete change of one decision unit, end its line with ` [EDIT: <unit before> -> <unit after>]`.\n"
    f"Do at most {MAX_OPS} operations; each existing rule gets at most one operation; rules you do not name\n"
    "are kept. If no operation is needed, reply with the single line NONE.")

_FULL = ("The list of rules is FULL: focus on REMOVE first, and do not ADD unless the new rule is very\n"
         "insightful and different from the existing rules.\n")


def _rules_block(rules: Sequence[str]) -> str:
    return "\n".join(f"{i}. {r}" for i, r in enumerate(rules, 1)) if rules else "(no rules yet)"


def _trial(a: Attempt) -> str:
    return f"{truncate(a.action, 'action')}\nFeedback: {truncate(a.feedback, 'feedback')}"


def render_compare(req: CompareRequest) -> str:
    """EXPEL_COMPARE: contrast a failed with a successful trial of one task and edit the rule list."""
    t = req.task
    return (
        f"{system_line(t)}\n\nYou are an advanced reasoning agent that can add, edit or remove rules from your "
        "existing rule set, based on forming new critiques of past task trials.\n\n"
        f"### Trial task\n{t.question}\n\n### Successful trial\n{_trial(req.succeeded)}\n\n"
        f"### Failed trial\n{_trial(req.failed)}\n\n### Existing rules\n{_rules_block(req.rules)}\n\n"
        "### Instructions\nBy contrasting the failed trial with the successful one, and given the existing "
        "rules, add, edit, remove or agree with rules so that the new list holds GENERAL and HIGH-LEVEL "
        "critiques of the failure that help avoid similar failures on different tasks in the future.\n"
        f"{_FULL if req.full else ''}{_FORMAT}")


def render_successes(req: SuccessesRequest) -> str:
    """EXPEL_SUCCESSES: read a batch of successful trials and edit the rule list."""
    trials = "\n\n".join(f"Task {i}: {t.question}\n{_trial(a)}"
                         for i, (t, a) in enumerate(zip(req.tasks, req.successes), 1))
    head = system_line(req.tasks[0]) if req.tasks else ""
    return (
        f"{head}\n\nYou are an advanced reasoning agent that can add, edit or remove rules from your existing "
        "rule set, based on forming new critiques of past task trials.\n\n"
        f"### Successful trials\n{truncate(trials, 'trajectory')}\n\n### Existing rules\n{_rules_block(req.rules)}\n\n"
        "### Instructions\nBy examining the successful trials and the existing rules, add, edit, remove or "
        "agree with rules so that the new list holds general, high-level insights of the successful trials "
        "that help on different tasks in the future.\n"
        f"{_FULL if req.full else ''}{_FORMAT}")


# ---------------------------------------------------------------------------------------------- parser
_OP_RE = re.compile(r"^(ADD|EDIT|AGREE|REMOVE)\b\s*(\d+)?\s*(?::\s*(.*?))?\s*$")
_MARKER_RE = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+)")


def parse_ops(text: str) -> tuple[tuple[Op, ...], bool, int]:
    """``(ops, parse_failed, malformed)`` of a reply (module docstring); never raises."""
    ops: list[Op] = []
    malformed = 0
    none = False
    for line in str(text).splitlines():
        s = _MARKER_RE.sub("", line.strip().replace("**", "")).strip()
        if s.rstrip(".").upper() == "NONE":
            none = True
            continue
        m = _OP_RE.match(s)
        if not m:
            continue
        kind, num, body = m.group(1), m.group(2), (m.group(3) or "").strip()
        if kind == "ADD" and body:
            ops.append(Op("ADD", None, body))
        elif kind == "EDIT" and num is not None and body:
            ops.append(Op("EDIT", int(num), body))
        elif kind in ("AGREE", "REMOVE") and num is not None:
            ops.append(Op(kind, int(num), body))
        else:
            malformed += 1
    return tuple(ops), (not ops and not none), malformed


def _parse(text: str, req: object, usage: Usage) -> OpsResult:
    ops, failed, malformed = parse_ops(text)
    return OpsResult(ops, usage, text, failed, malformed)


# ---------------------------------------------------------------------------------------------- scripted
def _shape(sim, unit: str) -> str:
    try:
        return sim.edits.signature(unit)
    except (EditError, ValueError):
        return unit.strip()


def _scripted_compare(sim, req: CompareRequest) -> str:
    """The pair's contrast lesson, then AGREE / EDIT / ADD against the rules (module docstring)."""
    found = lessons_of(sim, req.task, (req.failed, req.succeeded), True, req.episode)
    if not found:
        return "NONE"
    les = found[0]
    new = rule_text(les.sentence(), les.before, les.after)
    b, a = _shape(sim, les.before), _shape(sim, les.after)
    edits = [rule_edit(r) for r in req.rules]
    shapes = [None if e is None else (_shape(sim, e[0]), _shape(sim, e[1])) for e in edits]
    for i, sh in enumerate(shapes, 1):
        if sh == (b, a):
            return f"AGREE {i}: {req.rules[i - 1]}"
    for i, sh in enumerate(shapes, 1):
        if sh is not None and sh[0] == b:
            if sim.rng("EXPEL_COMPARE", req.task.task_id, req.episode, i).random() < SCRIPTED.p_edit:
                return f"EDIT {i}: {new}"
            break
    return f"ADD: {new}"


def _scripted_successes(sim, req: SuccessesRequest) -> str:
    """AGREE rules the successes are consistent with, REMOVE (``p_remove``) those they contradict."""
    present: set[str] = set()
    for a in req.successes:
        try:
            present |= {_shape(sim, u.text) for u in sim.edits.units(a.action)}
        except EditError:
            continue
    key = tuple(t.task_id for t in req.tasks)
    out: list[str] = []
    for i, r in enumerate(req.rules, 1):
        if len(out) >= SCRIPTED.max_ops:
            break
        e = rule_edit(r)
        if e is None:
            continue
        if _shape(sim, e[1]) in present:
            out.append(f"AGREE {i}: {r}")
        elif _shape(sim, e[0]) in present and \
                sim.rng("EXPEL_SUCCESSES", key, req.batch, r).random() < SCRIPTED.p_remove:
            out.append(f"REMOVE {i}: {r}")
    return "\n".join(out) or "NONE"


#: EXPEL_COMPARE: operations on the insight pool from a failed / successful pair of one task
EXPEL_COMPARE: CallKind[CompareRequest, OpsResult] = CALLS.register("EXPEL_COMPARE", CallKind(
    "EXPEL_COMPARE", render_compare, _parse, _scripted_compare,
    "insight-pool operations from a failed vs successful trial of one task (original ExpeL)"))

#: EXPEL_SUCCESSES: operations on the insight pool from a batch of successful trials
EXPEL_SUCCESSES: CallKind[SuccessesRequest, OpsResult] = CALLS.register("EXPEL_SUCCESSES", CallKind(
    "EXPEL_SUCCESSES", render_successes, _parse, _scripted_successes,
    "insight-pool operations from a batch of successful trials (original ExpeL)"))

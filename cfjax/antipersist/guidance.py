"""Guidance for Anti-Persistence: trajectories, rules, the four modes and their synthesizers.

papers/anti-persistence.md §3.2, App. B.1–B.3. A *trajectory* is the full
multi-attempt record of one task (draft, evaluator feedback, revisions,
outcome). *Guidance* is text the executor reads before acting; for real LLMs
it is free text under the App. B.2 headers, for the scripted backbone it is
a list of machine-readable rules — one per line, in a fixed grammar::

    RULE r12: WHEN question contains "at least" REPLACE `<id> > <num>` WITH `<id> >= <num>`
    RULE r13: ALWAYS REPLACE `<id> = <str>` WITH `<id> IS NULL`

A rule is carried onto a draft with :func:`cfjax.domains.sql.edits.transfer_edit`
(same mechanism as a CounterMem record). An ``ALWAYS`` rule is
*over-general*: our operational bias label (App. A.1, Definition 1) flags an
abstraction that contains one.

Scripted synthesizers (one synthesis call each, κ = 1) derive rules honestly
from the retrieved trajectories — never from gold queries:

* **imitation** (top-B successes): the edit between a failed attempt and the
  successful one, under the source question's cue; and the rules the
  trajectory *applied* (recorded in it), copied with their generality — this
  is how an error in earlier guidance reproduces through trajectories.
* **strategic** (top-B successes): the same rules, generalised: an edit seen
  under two or more different cues becomes ``ALWAYS``; with probability
  ``p_overgeneral`` a single-source rule loses its condition too.
* **corrective** (top-B failures + one contrasting success): "do NOT write X":
  a unit of the failed action whose masked shape differs from the contrasting
  success's unit of the same kind becomes a replacement rule under the
  failure's cue (``ALWAYS`` with ``p_overgeneral``). Without a contrast it
  emits nothing — it never falls back to strategic.
* **none**: retrieved trajectories verbatim (factual context, no call); the
  scripted executor picks a pattern up from them with probability
  ``p_factual`` (App. B.1).

A mode whose required records are missing returns empty guidance and charges
no call.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.domains.base import Task
from cfjax.domains.sql import edits as se

__all__ = [
    "MODES", "HEADERS", "Attempt", "Trajectory", "Rule", "Guidance", "SynthesisConfig",
    "parse_rules", "render_rules", "render_factual", "synthesize", "factual_rules", "prompt_for",
]

MODES = ("none", "imitation", "strategic", "corrective")

#: App. B.2 injection headers.
HEADERS = {
    "none": "## Relevant Past Experience (factual records)",
    "imitation": "## Behavioral Patterns (imitation)",
    "strategic": "## Task-Specific Strategy (strategic reflection)",
    "corrective": "## Avoidance Rules (corrective reflection)",
}

#: App. B.2 synthesis prompts (for real LLMs; the scripted backbone reads the trajectories directly).
PROMPTS = {
    "strategic": ("You are given a new task and up to {B} successful trajectories of similar tasks.\n"
                  "Task: {instruction}\n{success_text}\nDistil a transferable strategy: sub-goal structure, "
                  "tool-use patterns and recovery heuristics. Separate transferable structure from "
                  "instance-specific details."),
    "corrective": ("You are given a new task, up to {B} failed trajectories of similar tasks and one "
                   "successful reference.\nTask: {instruction}\n{failure_text}\nSuccessful reference:\n"
                   "{success_text}\nIdentify failure modes, critical decision points and recurring error "
                   "patterns. Answer with avoidance rules of the form \"do NOT do X because Y\", optionally "
                   "with the corrective action."),
    "imitation": ("You are given a new task and up to {B} successful trajectories of similar tasks.\n"
                  "Task: {instruction}\n{success_text}\nExtract the successful action patterns, the "
                  "observations that support them and how to adapt them to this task. Do not turn "
                  "instance-specific names or values into rules."),
}


@dataclass(frozen=True)
class Attempt:
    action: str
    feedback: str
    score: float
    applied: tuple[str, ...] = ()  # ids of guidance rules the executor applied to this attempt


@dataclass(frozen=True)
class Trajectory:
    """A stored execution record ``m_j = (τ_j, e_j, y_j)`` with its provenance.

    ``parents`` are the ids of the abstractions (persistent, or temporary
    guidance for anti-persistence) that were in context when it was produced
    (App. A.1 P(m_j)); ``parent_flagged`` the subset that was flagged.
    """

    task_id: str
    task_type: str
    question: str
    cues: tuple[str, ...]
    attempts: tuple[Attempt, ...]
    success: bool
    rules_in_context: tuple["Rule", ...] = ()
    parents: tuple[str, ...] = ()
    parent_flagged: tuple[str, ...] = ()

    def text(self) -> str:
        lines = [f"Task: {self.question}"]
        for i, a in enumerate(self.attempts, 1):
            lines.append(f"Attempt {i}: {a.action}\nFeedback: {a.feedback}")
        lines.append(f"Outcome: {'success' if self.success else 'failure'}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Rule:
    rule_id: str
    cue: str | None  # None = ALWAYS (over-general)
    before: str  # masked or concrete unit text
    after: str

    @property
    def overgeneral(self) -> bool:
        return self.cue is None

    def applies_to(self, question: str) -> bool:
        return self.cue is None or self.cue.lower() in question.lower()

    def render(self) -> str:
        when = "ALWAYS" if self.cue is None else f'WHEN question contains "{self.cue}"'
        return f"RULE {self.rule_id}: {when} REPLACE `{self.before}` WITH `{self.after}`"

    @property
    def key(self) -> tuple:
        return (self.cue, se.signature(self.before), se.signature(self.after))


@dataclass(frozen=True)
class Guidance:
    """One synthesized abstraction and its provenance (App. A.1)."""

    guidance_id: str
    mode: str
    rules: tuple[Rule, ...]
    sources: tuple[str, ...]  # task ids of the trajectories it came from
    parents: tuple[str, ...]  # abstractions in context when those trajectories were produced
    parent_flagged: tuple[str, ...]
    calls: int  # κ: synthesis calls charged

    @property
    def flagged(self) -> bool:
        """Operational bias label: contains an over-general (ALWAYS) rule."""
        return any(r.overgeneral for r in self.rules)

    @property
    def text(self) -> str:
        return render_rules(self.mode, self.rules)


_RULE_RE = re.compile(
    r'^RULE (\S+): (?:ALWAYS|WHEN question contains "([^"]*)") REPLACE `([^`]*)` WITH `([^`]*)`\s*$', re.M)


def parse_rules(text: str) -> list[Rule]:
    """Rules from guidance text; lines that do not follow the grammar are ignored."""
    return [Rule(m.group(1), m.group(2) if m.group(2) is not None else None, m.group(3), m.group(4))
            for m in _RULE_RE.finditer(text)]


def render_rules(mode: str, rules: Sequence[Rule]) -> str:
    if not rules:
        return ""
    return HEADERS[mode] + "\n" + "\n".join(r.render() for r in rules)


def render_factual(trajectories: Sequence[Trajectory]) -> str:
    if not trajectories:
        return ""
    blocks = [f"--- Record {i} ---\n{t.text()}" for i, t in enumerate(trajectories, 1)]
    return HEADERS["none"] + "\n" + "\n".join(blocks)


def prompt_for(mode: str, task: Task, successes: Sequence[Trajectory], failures: Sequence[Trajectory],
               contrast: Trajectory | None, B: int = 5) -> str:
    """The App. B.2 synthesis prompt a real LLM would receive."""
    succ = "\n".join(f"--- Success {i} ---\n{t.text()}" for i, t in enumerate(successes, 1))
    fail = "\n".join(f"--- Failure {i} ---\n{t.text()}" for i, t in enumerate(failures, 1))
    return PROMPTS[mode].format(B=B, instruction=task.question, success_text=succ if mode != "corrective" else
                                (contrast.text() if contrast else "(no successful reference available)"),
                                failure_text=fail)


@dataclass(frozen=True)
class SynthesisConfig:
    """Error model of the scripted synthesizers (see module docstring); set a priori, not tuned."""

    p_overgeneral: float = 0.3  # strategic/corrective drop a rule's condition
    p_overgeneral_imitation: float = 0.1
    p_factual: float = 0.5  # the executor picks a pattern up from raw records (mode none)
    p_follow: float = 0.9  # the executor follows an applicable rule
    max_rules: int = 4


def _fix_edits(t: Trajectory) -> list[tuple[str, str]]:
    """Single-unit edits from a failed attempt to the successful final one."""
    if not t.success or len(t.attempts) < 2:
        return []
    d = se.diff_units(t.attempts[0].action, t.attempts[-1].action)
    return [(d[1].text, d[2].text)] if d is not None else []


def _derive(t: Trajectory) -> list[tuple[str | None, str, str]]:
    """(cue, before, after) patterns a reader of trajectory ``t`` can extract."""
    cue = t.cues[0] if t.cues else None
    out = [(cue, b, a) for b, a in _fix_edits(t)]
    applied = {rid for a in t.attempts for rid in a.applied}
    for r in t.rules_in_context:
        if r.rule_id in applied and t.success:
            out.append((r.cue, r.before, r.after))  # copied with its generality
    return out


def factual_rules(records: Sequence[Trajectory], rng: random.Random, cfg: SynthesisConfig,
                  prefix: str) -> list[Rule]:
    """What the scripted executor picks up from raw records (mode none): no call, no generalisation."""
    rules = []
    for t in records:
        for cue, b, a in _derive(t):
            if rng.random() < cfg.p_factual:
                rules.append(Rule(f"{prefix}.{len(rules)}", cue, b, a))
    return _dedup(rules)[: cfg.max_rules]


def _dedup(rules: list[Rule]) -> list[Rule]:
    seen, out = set(), []
    for r in rules:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


def synthesize(mode: str, task: Task, successes: Sequence[Trajectory], failures: Sequence[Trajectory],
               contrast: Trajectory | None, *, rng: random.Random, cfg: SynthesisConfig,
               guidance_id: str) -> Guidance:
    """φ(H, μ) for the three synthesis modes (scripted). Empty input → empty guidance, κ = 0."""
    if mode not in ("imitation", "strategic", "corrective"):
        raise ValueError(f"not a synthesis mode: {mode!r}")
    used: Sequence[Trajectory]
    rules: list[Rule] = []
    if mode in ("imitation", "strategic"):
        used = list(successes)
        if not used:
            return Guidance(guidance_id, mode, (), (), (), (), 0)
        pats = [p for t in used for p in _derive(t)]
        if mode == "strategic":
            by_edit: dict[tuple[str, str], set] = {}
            for cue, b, a in pats:
                by_edit.setdefault((se.signature(b), se.signature(a)), set()).add(cue)
        for cue, b, a in pats:
            general = cue is None
            if mode == "strategic":
                general = general or len(by_edit[(se.signature(b), se.signature(a))]) > 1 \
                    or rng.random() < cfg.p_overgeneral
            else:
                general = general or rng.random() < cfg.p_overgeneral_imitation
            rules.append(Rule(f"{guidance_id}.{len(rules)}", None if general else cue, b, a))
    else:
        used = list(failures)
        if not used:
            return Guidance(guidance_id, mode, (), (), (), (), 0)
        if contrast is not None:
            try:
                good = se.units(contrast.attempts[-1].action)
            except se.EditError:
                good = []
            for t in used:
                try:
                    bad = se.units(t.attempts[-1].action)
                except se.EditError:
                    continue
                cue = t.cues[0] if t.cues else None
                for u in bad:
                    for g in good:
                        sb, sg = se.signature(u.text), se.signature(g.text)
                        if g.kind == u.kind and sb != sg and len(se.tokenize(u.text)) == len(se.tokenize(g.text)):
                            general = cue is None or rng.random() < cfg.p_overgeneral
                            rules.append(Rule(f"{guidance_id}.{len(rules)}", None if general else cue, u.text,
                                              _rebind(u.text, g.text)))
                            break
        used = list(used) + ([contrast] if contrast is not None else [])
    rules = _dedup(rules)[: cfg.max_rules]
    parents = tuple(sorted({p for t in used for p in t.parents}))
    flagged = tuple(sorted({p for t in used for p in t.parent_flagged}))
    return Guidance(guidance_id, mode, tuple(rules), tuple(t.task_id for t in used), parents, flagged, 1)


def _rebind(bad_unit: str, good_unit: str) -> str:
    """The good unit's shape with the bad unit's identifiers and literals (positional)."""
    bt, gt = se.tokenize(bad_unit), se.tokenize(good_unit)
    return se.detokenize([b if se.signature(b) == se.signature(g) else g for b, g in zip(bt, gt)])

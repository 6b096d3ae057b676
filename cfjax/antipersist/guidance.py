"""Guidance for Anti-Persistence: trajectories, rules, the four modes and their synthesizers.

papers/anti-persistence.md §3.2, App. B.1–B.3. A *trajectory* is the full
multi-attempt record of one task (draft, evaluator feedback, revisions,
outcome). *Guidance* is text the executor reads before acting. It reaches a
backbone only as :class:`~cfjax.types.MemoryText` in ``DraftRequest.memory``
(rendered by :mod:`cfjax.llm.prompts` for every backbone): free text under
the App. B.2 headers, with the rules in one machine-readable grammar
(:func:`cfjax.llm.prompts.render_rule`)::

    RULE r12: WHEN question contains "at least" REPLACE `<unit>` WITH `<unit>`
    RULE r13: ALWAYS REPLACE `<unit>` WITH `<unit>`

A backbone carries a rule onto its draft itself (the scripted one with the
domain's :meth:`~cfjax.types.EditModel.transfer` and its identifier resolver;
an LLM by reading it). An ``ALWAYS`` rule is *over-general*: our operational
bias label (App. A.1, Definition 1) flags an abstraction that contains one.

Everything here is domain-agnostic: units, signatures and single-unit diffs
come from an injected :class:`~cfjax.types.EditModel`. Scripted synthesizers
(one synthesis call each, κ = 1) derive rules from the retrieved trajectories
only — the agent's own actions and evaluator feedback, never an answer key:

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
  failure's cue (``ALWAYS`` with ``p_overgeneral``). The replacement is the
  good unit's shape *rebound* to the bad unit's identifiers and literals
  (:func:`rebind`: positional, on the tokens the edit model's ``signature``
  masks, checked by re-signing), so that ``transfer`` — which binds ``before``'s
  masked tokens to the target's — carries the whole rule onto a new task and
  the domain resolver adapts what is left; where rebinding does not keep the
  shape the raw good unit is stored and ``transfer`` adapts it as it can.
  Without a contrast corrective emits nothing — it never falls back to strategic.
* **none**: retrieved trajectories verbatim (factual context, no call); under
  them, the patterns a reader can note (:func:`factual_rules`, deterministic)
  in the rule grammar. Whether a reader picks one up is the backbone's
  business (the scripted one: ``p_pick_up_factual × p_follow_guidance``).

A mode whose required records are missing returns empty guidance and charges
no call.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.config.antipersist import SynthesisConfig  # re-exported (moved to cfjax.config)
from cfjax.llm.prompts import FACTUAL_NOTES_HEADER, LIMITS, parse_rule_lines, render_rule
from cfjax.types import EditError, EditModel, MemoryText, Task, contains_phrase

__all__ = [
    "MODES", "HEADERS", "Attempt", "Trajectory", "Rule", "Guidance", "SynthesisConfig",
    "parse_rules", "render_rules", "render_factual", "synthesize", "factual_rules", "prompt_for", "rebind",
    "compose_memory",
]

MODES = ("none", "imitation", "strategic", "corrective")

#: App. B.2 injection headers.
HEADERS = {
    "none": "## Relevant Past Experience (factual records)",
    "imitation": "## Behavioral Patterns (imitation)",
    "strategic": "## Task-Specific Strategy (strategic reflection)",
    "corrective": "## Avoidance Rules (corrective reflection)",
}

#: heading of the patterns noted under factual records (mode none)
NOTES_HEADER = FACTUAL_NOTES_HEADER  # the scripted reader picks these up with p_pick_up_factual

#: App. B.2 synthesis prompts (for real LLMs; the scripted synthesizers read the trajectories directly).
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
    applied: tuple[str, ...] = ()  # rule ids the backbone said it followed (its APPLIED line)


@dataclass(frozen=True)
class Trajectory:
    """A stored execution record ``m_j = (τ_j, e_j, y_j)`` with its provenance.

    Only what the agent saw and did: the question, its observable cue phrases
    (``Task.attrs["cues"]``), its attempts with evaluator feedback, the outcome.
    No task family or other answer-key field is stored (the information
    boundary, shared/DESIGN.md). ``parents`` are the ids of the abstractions
    (persistent, or temporary guidance for anti-persistence) that were in
    context when it was produced (App. A.1 P(m_j)); ``parent_flagged`` the
    subset that was flagged.
    """

    task_id: str
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
    before: str  # unit text
    after: str

    @property
    def overgeneral(self) -> bool:
        return self.cue is None

    def applies_to(self, question: str) -> bool:
        return self.cue is None or contains_phrase(question, self.cue)

    def render(self) -> str:
        return render_rule(self.rule_id, self.cue, self.before, self.after)

    def key(self, edits: EditModel) -> tuple:
        """What makes two rules the same advice: the cue and the masked edit."""
        return (self.cue, edits.signature(self.before), edits.signature(self.after))


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


def parse_rules(text: str) -> list[Rule]:
    """Rules from guidance text (:func:`cfjax.llm.prompts.parse_rule_lines`); other lines are ignored."""
    return [Rule(*t) for t in parse_rule_lines(text)]


def render_rules(mode: str, rules: Sequence[Rule]) -> str:
    if not rules:
        return ""
    return HEADERS[mode] + "\n" + "\n".join(r.render() for r in rules)


def render_factual(trajectories: Sequence[Trajectory], notes: Sequence[Rule] = (), *,
                   limit: int | None = None) -> str:
    """Mode none: the records verbatim and, under them, the patterns a reader can note.

    The records are shortened first so that every note line survives the
    prompt's ``trajectory`` limit (:data:`cfjax.llm.prompts.LIMITS`)."""
    if not trajectories:
        return ""
    limit = LIMITS["trajectory"] if limit is None else limit
    tail = ("\n" + NOTES_HEADER + "\n" + "\n".join(r.render() for r in notes)) if notes else ""
    blocks = HEADERS["none"] + "\n" + "\n".join(f"--- Record {i} ---\n{t.text()}" for i, t in enumerate(trajectories, 1))
    room = max(0, limit - len(tail) - 1)
    if len(blocks) > room:
        blocks = blocks[: max(0, room - 14)] + " …[truncated]"
    return blocks + tail


def compose_memory(factual: str, guidance: Sequence[str], *, limit: int | None = None) -> MemoryText | None:
    """The one piece of memory a task's drafts see (``DraftRequest.memory``), or ``None``.

    * factual records only → kind ``"trajectories"``;
    * guidance (synthesized or stored abstractions), with or without records →
      kind ``"guidance"``, the records after the guidance under their own header.
    In both, the patterns noted in records are RULE lines under
    :data:`~cfjax.llm.prompts.FACTUAL_NOTES_HEADER`, which the scripted reader
    picks up with ``p_pick_up_factual`` (as notes, never promoted to guidance).

    Guidance comes first and is cut by whole lines to the prompt limit.
    """
    limit = LIMITS["trajectory"] if limit is None else limit
    guidance = [g for g in guidance if g]
    if not guidance:
        return MemoryText("trajectories", factual) if factual else None
    lines = "\n\n".join(guidance).split("\n")
    kept, size = [], 0
    for ln in lines:
        if size + len(ln) + 1 > limit:
            break
        kept.append(ln)
        size += len(ln) + 1
    text = "\n".join(kept)
    if factual and size < limit - 200:
        notes = factual
        room = limit - size - 2
        text += "\n\n" + (notes if len(notes) <= room else notes[: room - 14] + " …[truncated]")
    return MemoryText("guidance", text)


def prompt_for(mode: str, task: Task, successes: Sequence[Trajectory], failures: Sequence[Trajectory],
               contrast: Trajectory | None, B: int = 5) -> str:
    """The App. B.2 synthesis prompt a real LLM would receive."""
    succ = "\n".join(f"--- Success {i} ---\n{t.text()}" for i, t in enumerate(successes, 1))
    fail = "\n".join(f"--- Failure {i} ---\n{t.text()}" for i, t in enumerate(failures, 1))
    return PROMPTS[mode].format(B=B, instruction=task.question, success_text=succ if mode != "corrective" else
                                (contrast.text() if contrast else "(no successful reference available)"),
                                failure_text=fail)


def _fix_edits(t: Trajectory, edits: EditModel) -> list[tuple[str, str]]:
    """Single-unit edits from a failed attempt to the successful final one."""
    if not t.success or len(t.attempts) < 2:
        return []
    d = edits.diff_units(t.attempts[0].action, t.attempts[-1].action)
    return [(d[1].text, d[2].text)] if d is not None else []


def _derive(t: Trajectory, edits: EditModel) -> list[tuple[str | None, str, str]]:
    """(cue, before, after) patterns a reader of trajectory ``t`` can extract."""
    cue = t.cues[0] if t.cues else None
    out = [(cue, b, a) for b, a in _fix_edits(t, edits)]
    applied = {rid for a in t.attempts for rid in a.applied}
    for r in t.rules_in_context:
        if r.rule_id in applied and t.success:
            out.append((r.cue, r.before, r.after))  # copied with its generality
    return out


def factual_rules(records: Sequence[Trajectory], edits: EditModel, *, prefix: str, max_rules: int = 4) -> list[Rule]:
    """The patterns a reader can note in raw records (mode none): no call, no generalisation, no
    randomness — whether they are picked up is the backbone's draw."""
    rules = [Rule(f"{prefix}.{i}", cue, b, a)
             for i, (cue, b, a) in enumerate(p for t in records for p in _derive(t, edits))]
    return _dedup(rules, edits)[:max_rules]


def _dedup(rules: list[Rule], edits: EditModel) -> list[Rule]:
    seen, out = set(), []
    for r in rules:
        k = r.key(edits)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


# --------------------------------------------------------------------------- rebinding (corrective)

_TOKEN_RE = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|\w+|[^\w\s'\"]+")
_PLACEHOLDER_RE = re.compile(r"<[A-Za-z_]+>")


def _tokens(text: str) -> list[re.Match]:
    return list(_TOKEN_RE.finditer(text))


def _masked(tokens: Sequence[re.Match], sig: str) -> list[bool]:
    """Which tokens the edit model's signature masks: literals, and words absent from the signature
    once its placeholders are removed (keywords and kept names stay in it)."""
    kept = {w.lower() for w in re.findall(r"\w+", _PLACEHOLDER_RE.sub(" ", sig))}
    out = []
    for m in tokens:
        t = m.group(0)
        out.append(t[0] in "'\"" or (bool(re.match(r"\w", t)) and t.lower() not in kept))
    return out


def rebind(bad_unit: str, good_unit: str, edits: EditModel) -> str:
    """The good unit's shape with the bad unit's identifiers and literals (domain-agnostic).

    Tokens are aligned by position; where both units have a token their edit
    model's ``signature`` masks, the bad unit's token replaces the good one's
    (the good unit's spacing and punctuation are kept). The result is kept
    only if it re-signs to the good unit's signature; otherwise (different
    token counts, or a rebinding the edit model reads differently) the good
    unit is returned unchanged and ``transfer`` adapts it as it can."""
    bt, gt = _tokens(bad_unit), _tokens(good_unit)
    if len(bt) != len(gt):
        return good_unit
    try:
        sg = edits.signature(good_unit)
        mb, mg = _masked(bt, edits.signature(bad_unit)), _masked(gt, sg)
    except EditError:
        return good_unit
    parts, pos = [], 0
    for b, g, xb, xg in zip(bt, gt, mb, mg):
        parts.append(good_unit[pos:g.start()])
        parts.append(b.group(0) if (xb and xg) else g.group(0))
        pos = g.end()
    parts.append(good_unit[pos:])
    out = "".join(parts)
    try:
        return out if edits.signature(out) == sg else good_unit
    except EditError:
        return good_unit


def _units(edits: EditModel, action: str) -> list:
    try:
        return edits.units(action)
    except EditError:
        return []


def synthesize(mode: str, task: Task, successes: Sequence[Trajectory], failures: Sequence[Trajectory],
               contrast: Trajectory | None, *, edits: EditModel, rng: random.Random, cfg: SynthesisConfig,
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
        pats = [p for t in used for p in _derive(t, edits)]
        by_edit: dict[tuple[str, str], set] = {}
        for cue, b, a in pats:
            by_edit.setdefault((edits.signature(b), edits.signature(a)), set()).add(cue)
        for cue, b, a in pats:
            general = cue is None
            if mode == "strategic":
                general = general or len(by_edit[(edits.signature(b), edits.signature(a))]) > 1 \
                    or rng.random() < cfg.p_overgeneral
            else:
                general = general or rng.random() < cfg.p_overgeneral_imitation
            rules.append(Rule(f"{guidance_id}.{len(rules)}", None if general else cue, b, a))
    else:
        used = list(failures)
        if not used:
            return Guidance(guidance_id, mode, (), (), (), (), 0)
        if contrast is not None:
            good = _units(edits, contrast.attempts[-1].action)
            for t in used:
                bad = _units(edits, t.attempts[-1].action)
                cue = t.cues[0] if t.cues else None
                for u in bad:
                    for g in good:
                        if g.kind != u.kind or len(_tokens(u.text)) != len(_tokens(g.text)) \
                                or edits.signature(u.text) == edits.signature(g.text):
                            continue
                        general = cue is None or rng.random() < cfg.p_overgeneral
                        rules.append(Rule(f"{guidance_id}.{len(rules)}", None if general else cue, u.text,
                                          rebind(u.text, g.text, edits)))
                        break
        used = list(used) + ([contrast] if contrast is not None else [])
    rules = _dedup(rules, edits)[: cfg.max_rules]
    parents = tuple(sorted({p for t in used for p in t.parents}))
    flagged = tuple(sorted({p for t in used for p in t.parent_flagged}))
    return Guidance(guidance_id, mode, tuple(rules), tuple(t.task_id for t in used), parents, flagged, 1)

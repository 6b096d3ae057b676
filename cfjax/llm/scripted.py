"""The scripted backbone: a seeded, documented simulator of an LLM.

:class:`ScriptedBackbone` is domain independent; a :class:`ScriptedDomain`
supplies the domain's edit model (:mod:`cfjax.types`) and error model
(one characteristic one-unit slip per task family, cue dependent). Each
domain documents its family table in its own ``script.py``
(``cfjax.domains.sql.script``, ``cfjax.domains.python.script``,
``cfjax.domains.sat.script``).

It is **not** an LLM. It stands in for one so that the whole pipeline runs
offline on a CPU, and every figure it produces is labelled "scripted
backbone". It receives exactly the prompts a real LLM would (via
:class:`~cfjax.llm.base.TextBackbone`) and answers in the same output
contracts, so the parsers and token accounting are exercised for real. Its
error model — the only place where it is "tuned" — is explicit.

**The information boundary.** The driver never reads an answer key. It
makes its competence draws (the probabilities below) from its own seeded
generator and reaches what a model "knows" only through the domain's
competence interface (:class:`ScriptedDomain`: :meth:`~ScriptedDomain.draft`,
:meth:`~ScriptedDomain.true_fixes`), which the domain implements on the world
side (:class:`cfjax.domains.base.KeyedErrorModel`). Everything else it
reads is in the prompt's request: the question, the context, the task's
observable attributes, its own attempts and the evaluator's feedback.

**Drafts** (DRAFT_ACTION). The domain's draft is a correct action with
*systematic, cue-dependent errors*, each an edit of exactly one decision unit. Every task
family has one characteristic error. On attempt ``t`` (0-based)
an error fires independently with probability
``p_variant × weight × retry_factor**t``, where ``p_variant`` is
``p_error`` for base and new-surface tasks and ``p_error_look_alike`` for
look-alike tasks (the look-alike's error is the *opposite* slip, e.g. ``>=``
for "strictly above"). Independently, with ``p_noise`` one random rule
operator is applied to a random unit (an uncorrelated slip memory cannot be
expected to fix). ``retry_factor < 1`` models that evaluator feedback
sometimes makes the model fix its own error on the next attempt (the
family tables live in each domain's ``script.py``). When the
request shows memory (``DraftRequest.memory``, Anti-Persistence guidance),
each applicable ``RULE`` line (``ALWAYS``, or its cue phrase in the question, on word boundaries)
is followed with ``p_follow_guidance`` (times ``p_pick_up_factual`` for
patterns noted under raw past records), carried by the domain's
:meth:`~cfjax.types.EditModel.transfer`; the reply lists them on an
``APPLIED:`` line.

**Local alternatives** (GENERATE_LOCAL_ALTERNATIVES). With ``p_propose_fix``
(the driver's competence draw, made from its own seed) the reply contains one
true one-unit fix, which it asks of the competence interface
(:meth:`ScriptedDomain.true_fixes`); the remaining slots up to K are filled
with *plausible distractors* — the domain's rule operators (which include
edits beyond the inverses of the simulated slips) and, for a short action that
offers fewer than K of them, second-order edits of the same unit — never the
true fix. So on a
failed draft that one unit edit can fix, the fix is among the K alternatives
with probability ``p_propose_fix`` (a test measures it on every suite); a
draft with two wrong units has no one-unit fix.

**Distillation** (DISTIL_RECORD). The situation text names the question's
cue phrase and the masked edit. The condition uses only the observable
attributes the prompt lists (``render_attrs``): the *semantic* lexicon
attribute of the source question with probability ``p_condition_semantic``
(e.g. ``boundary = "inclusive" and bound_side = "lower"``), the cue phrase
(``question contains "at least"``: fails on new surfaces) with
``p_condition_surface``, and otherwise *too broad* (``none`` or only the
column type) — a realistic failure that the look-alike tasks expose.

**Revision** (REVISE_WITH_RECORD). The backbone reads the rendered record's
``EDIT:`` line and carries the edit onto the first draft unit with the same
masked shape (the domain's :meth:`~cfjax.types.EditModel.transfer`; for SQL
with a schema lookup for foreign keys and columns). Guidance (``RULE`` lines)
shown with REVISE_WITH_RECORD is followed as for drafts. It does **not** check the record's
condition — that is memory's job. With ``p_ignore_record`` it returns the
draft unchanged anyway.

**Best-of-N judge** (BEST_OF_N_JUDGE). The judge cannot execute anything:
it picks the candidate written most often among the N (self-consistency;
ties → the lowest index) and, with ``p_judge_random``, a uniformly random one.

**ExpeL lessons** (EXPEL_INSIGHT). From a trajectory that failed and then
succeeded, the lesson is the one-unit contrast of the last failed and the
final action; from a trajectory that only failed, a *guess* (one random rule
edit of the last failed action — the extractor cannot check it); a
first-attempt success yields no lesson.

All randomness is drawn from ``random.Random`` seeded by a stable hash of
``(seed, call, task_id, episode, attempt, sample)``: the same inputs give the
same text in every process.
"""

from __future__ import annotations

import hashlib
import random
import re
from abc import ABC, abstractmethod
from typing import Any

from cfjax.config.scripted import ScriptedConfig  # re-exported: the simulator's competence parameters
from cfjax.llm import prompts
from cfjax.llm.base import TextBackbone
from cfjax.types import (AlternativesRequest, Completion, DistilRequest, DraftRequest, EditError, EditModel,
                         InsightRequest, JudgeRequest, MemoryText, ReviseRequest, Task, Usage, contains_phrase)

__all__ = ["ScriptedConfig", "ScriptedDomain", "ScriptedBackbone", "SCRIPTED_LABEL", "stable_seed"]

SCRIPTED_LABEL = "scripted backbone (seeded simulator, not an LLM)"


def stable_seed(*parts: object) -> int:
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


class ScriptedDomain(ABC):
    """What the scripted backbone knows of one domain: the edit model, plus the *competence
    interface* the domain's world exposes to a simulator (and to nothing else).

    The driver (:class:`ScriptedBackbone`) never reads an answer key. It makes
    its documented competence draws from its own seeded generator and asks
    the domain, which holds the keys, only through two calls:

    * :meth:`draft` — the action a model of this competence writes on attempt
      ``attempt`` (the domain's error table, drawn with ``rng``);
    * :meth:`true_fixes` — the one-unit fixes of an action that a model
      *knows* once the driver's ``p_propose_fix`` draw succeeded.

    Everything else (:meth:`env`, :meth:`unit_kind_name`,
    :meth:`semantic_condition`, :meth:`broad_condition`) reads only what the
    prompt shows: the task's question, context and observable attributes.
    """

    edits: EditModel
    #: observable attributes that carry the question's semantics; the first present one becomes a
    #: *semantic* condition (the DISTIL_RECORD prompt lists every attribute with its value)
    semantic_keys: tuple[str, ...] = ()
    name: str = "abstract"

    def env(self, task: Task) -> Any:
        """The environment object the edit model's operators read (``None`` by default)."""
        return None

    @abstractmethod
    def draft(self, task: Task, attempt: int, rng: random.Random, config: "ScriptedConfig") -> str:
        """The memory-free draft of a model with ``config``'s competence (world side: reads the key)."""

    @abstractmethod
    def true_fixes(self, task: Task, action: str) -> dict[int, str]:
        """``unit index → correct unit text`` for every unit of ``action`` that differs from a correct
        action of the same unit structure (empty when the structures differ). Raises
        :class:`~cfjax.types.EditError` when ``action`` does not parse."""

    def unit_kind_name(self, unit_text: str) -> str:
        """How a distilled situation names the kind of a unit."""
        return "decision unit"

    def semantic_condition(self, task: Task, key: str) -> str:
        """``key = "value"``; a boundary also names its side (``bound_side``)."""
        cond = f'{key} = "{task.attrs[key]}"'
        if key == "boundary" and "bound_side" in task.attrs:
            cond += f' and bound_side = "{task.attrs["bound_side"]}"'
        return cond

    def broad_condition(self, task: Task, rng: random.Random) -> str:
        """A *too broad* condition (true on look-alikes too)."""
        return "none"


class ScriptedBackbone(TextBackbone):
    """Seeded simulator of an LLM in one domain (see module docstring).

    Args:
      domain: the domain's edit and error model.
      config: the error rates.
    """

    def __init__(self, domain: ScriptedDomain, config: ScriptedConfig = ScriptedConfig()) -> None:
        self.domain = domain
        self.edits = domain.edits
        self.config = config
        self.name = f"scripted-{domain.name}(seed={config.seed})"

    # ------------------------------------------------------------------ plumbing
    def _rng(self, *key: object) -> random.Random:
        return random.Random(stable_seed(self.config.seed, *key))

    def _complete(self, kind: str, prompt: str, req: object) -> Completion:
        if kind == prompts.DRAFT_ACTION:
            action, applied = self._draft(req)  # type: ignore[arg-type]
            text = prompts.format_action(action, req.task.domain)  # type: ignore[attr-defined]
            if applied:
                text += "\nAPPLIED: " + ", ".join(applied)
        elif kind == prompts.GENERATE_LOCAL_ALTERNATIVES:
            text = self._alternatives(req)  # type: ignore[arg-type]
        elif kind == prompts.DISTIL_RECORD:
            text = self._distil(req)  # type: ignore[arg-type]
        elif kind == prompts.REVISE_WITH_RECORD:
            text = prompts.format_action(self._revise(req), req.task.domain)  # type: ignore[attr-defined]
        elif kind == prompts.BEST_OF_N_JUDGE:
            text = self._judge(req)  # type: ignore[arg-type]
        elif kind == prompts.EXPEL_INSIGHT:
            text = self._insight(req)  # type: ignore[arg-type]
        elif kind == prompts.WRITE_MEMORY:
            text = self._write_memory(req)  # type: ignore[arg-type]
        elif kind == prompts.REVISE_MEMORY:
            text = self._revise_memory(req)  # type: ignore[arg-type]
        else:
            raise ValueError(f"the scripted backbone has no behaviour for template {kind!r}")
        return Completion(text, Usage(prompts.count_tokens(prompt), prompts.count_tokens(text)))

    # ------------------------------------------------------------------ drafts
    def _draft(self, req: DraftRequest) -> tuple[str, tuple[str, ...]]:
        c = self.config
        task = req.task
        ed = self.edits
        attempt = len(req.history)
        rng = self._rng("draft", task.task_id, req.episode, attempt, req.sample)
        action = self.domain.draft(task, attempt, rng, c)
        if rng.random() < c.p_noise:
            edits = ed.rule_edits(action, self.domain.env(task))
            if edits:
                i, new = edits[rng.randrange(len(edits))]
                try:
                    action = ed.replace_unit(action, i, new)
                except EditError:
                    pass
        if req.memory is None:
            return action, ()
        if req.memory.kind == "memories":
            return self._follow_memories(req.memory, task, action, (req.episode, attempt, req.sample))
        return self._follow_rules(req.memory, task, action, rng)

    def _follow_memories(self, memory: MemoryText, task: Task, action: str, key: tuple
                         ) -> tuple[str, tuple[str, ...]]:
        """The executor's response to an UpliftMem memory *set* (the set-response model, issue 13).

        It reads the memories' text as a prompt shows them (:func:`~cfjax.llm.prompts.render_memory_set`)
        and nothing else. Every draw is made from its own stream keyed by ``(seed, task, episode,
        attempt, sample, memory id, line)``, so the memory-free draft — drawn before, from the draft
        stream — is the same for every set (the pairing of UpliftMem Eq. 4), and a memory's draws do not
        depend on which other memories are shown. With ``T`` the tokens of the whole memory block and
        ``a = 1/(1 + T/adherence_tokens)`` (adherence falls as the context fills):

        * a ``RULE`` whose phrase occurs in the question (or ``ALWAYS``) is followed with
          ``p_follow_guidance·a`` — a relevant memory helps, an over-general one misleads where its
          edit is wrong;
        * a ``RULE`` whose phrase is absent (outside its scope) is followed anyway with
          ``p_out_of_scope·a`` and misleads where its pattern occurs;
        * a ``FIX`` note is followed (``p_follow_guidance·a``) only when a ``TRIGGER`` note with the same
          tag is shown and its phrase occurs — linked notes help only together (complementary);
        * ``RULE`` lines under :data:`~cfjax.llm.prompts.FACTUAL_NOTES_HEADER` (patterns noted in raw past
          records, e.g. an Anti-Persistence trajectory shown as a memory) are picked up with a further
          factor ``p_pick_up_factual``;
        * an ``EDIT: b -> a`` line of a stored correction without RULE lines (a CounterMem record shown as a
          memory) is carried with ``(1 − p_ignore_record)·a`` — like REVISE_WITH_RECORD, the executor does
          not check a record's condition: whether it applies is the retriever's business;
        * when a memory and its update (a memory whose ``SUPERSEDES:`` line names it) are both shown, the
          outdated one is followed instead of the update with ``p_outdated_confusion`` (then under the
          rules above), else it is ignored; an outdated memory shown alone is just a memory.

        Rules are carried by the domain's :meth:`~cfjax.types.EditModel.transfer`, in the order shown.
        """
        c = self.config
        blocks = prompts.split_memory_set(memory.text)
        adh = 1.0 / (1.0 + prompts.count_tokens(memory.text) / c.adherence_tokens)
        texts = dict(blocks)
        parsed = {mid: prompts.parse_memory_lines(text) for mid, text in blocks}
        updated_by = {p.supersedes: mid for mid, p in parsed.items() if p.supersedes in parsed and p.supersedes != mid}
        triggers = {tag: cue for p in parsed.values() for tag, cue in p.triggers}
        q = task.question
        env = self.domain.env(task)
        applied: list[str] = []

        def draw(*k: object) -> float:
            return self._rng("follow", task.task_id, *key, *k).random()

        for mid, p in parsed.items():
            if mid in updated_by and draw(mid, "outdated") >= c.p_outdated_confusion:
                continue  # the update is shown: the outdated memory is recognised as such
            newer_of = p.supersedes if p.supersedes in updated_by and updated_by[p.supersedes] == mid else None
            if newer_of is not None and draw(newer_of, "outdated") < c.p_outdated_confusion:
                continue  # confused: the outdated memory was followed instead of this update
            steps = []
            for rule_id, cue, before, after, noted in prompts.parse_rule_sections(texts[mid]):
                in_scope = cue is None or contains_phrase(q, cue)
                prob = (c.p_follow_guidance if in_scope else c.p_out_of_scope) * adh
                steps.append((rule_id, before, after, prob * (c.p_pick_up_factual if noted else 1.0)))
            edit = prompts.parse_edit_line(texts[mid])
            if edit is not None and not p.rules:  # a stored correction (CounterMem record): no scope of its own
                steps.append(("edit", edit[0], edit[1], (1.0 - c.p_ignore_record) * adh))
            for tag, before, after in p.fixes:
                cue = triggers.get(tag)
                if cue is not None and contains_phrase(q, cue):
                    steps.append((tag, before, after, c.p_follow_guidance * adh))
            for rule_id, before, after, prob in steps:
                if draw(mid, rule_id, before, after) >= prob:
                    continue
                moved = self.edits.transfer(before, after, action, env)
                if moved is not None and moved != action:
                    action = moved
                    applied.append(mid)
        return action, tuple(dict.fromkeys(applied))

    def _follow_rules(self, memory: MemoryText, task: Task, action: str, rng: random.Random
                      ) -> tuple[str, tuple[str, ...]]:
        """Carry the applicable ``RULE`` lines of guidance onto ``action`` (in order).

        A rule applies when it is ``ALWAYS`` or its cue phrase occurs in the
        question; it is followed with ``p_follow_guidance`` (times
        ``p_pick_up_factual`` for a pattern noted under raw past records, i.e. under
        :data:`~cfjax.llm.prompts.FACTUAL_NOTES_HEADER`)
        and carried by the domain's :meth:`~cfjax.types.EditModel.transfer`
        (its resolver adapts identifiers to this environment).
        """
        c = self.config
        applied = []
        for rule_id, cue, before, after, noted in prompts.parse_rule_sections(memory.text):
            if cue is not None and not contains_phrase(task.question, cue):
                continue
            p = c.p_follow_guidance * (c.p_pick_up_factual if noted or memory.kind == "trajectories" else 1.0)
            if rng.random() >= p:
                continue
            moved = self.edits.transfer(before, after, action, self.domain.env(task))
            if moved is not None and moved != action:
                action = moved
                applied.append(rule_id)
        return action, tuple(applied)

    # ------------------------------------------------------------------ Module I
    def _alternatives(self, req: AlternativesRequest) -> str:
        c = self.config
        rng = self._rng("alternatives", req.task.task_id, req.episode, req.action)
        lines: list[str] = []
        try:
            fixes = self.domain.true_fixes(req.task, req.action)  # competence interface (world side)
        except EditError:
            return "EDIT: (the action does not parse; no local edit proposed)"
        wrong = sorted(fixes)
        if wrong and rng.random() < c.p_propose_fix:
            i = rng.choice(wrong)
            lines.append(f"EDIT: REPLACE [{i}] WITH {fixes[i]}")
        for i, text in self._distractors(req, fixes, rng, req.k - len(lines)):
            lines.append(f"EDIT: REPLACE [{i}] WITH {text}")
        return "\n".join(lines)

    def _distractors(self, req: AlternativesRequest, fixes: dict[int, str], rng: random.Random, n: int
                     ) -> list[tuple[int, str]]:
        """Up to ``n`` plausible wrong one-unit edits of ``req.action``, never a true fix: the domain's
        rule operators first (shuffled), then — when an action offers fewer than ``n`` — second-order
        edits of the same unit (a rule operator applied to a first-order edit), as a model asked for K
        alternatives writes K even for a short action."""
        ed = self.edits
        env = self.domain.env(req.task)
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

    # ------------------------------------------------------------------ Module II
    def _distil(self, req: DistilRequest) -> str:
        c = self.config
        t = req.task
        ed = self.edits
        rng = self._rng("distil", t.task_id, req.episode, req.unit_before, req.unit_after)
        cues = list(t.attrs.get("cues", ()))
        cue_text = f"The question says '{cues[0]}'. " if cues else ""
        situation = (f"{cue_text}A {self.domain.unit_kind_name(req.unit_before)} of the form "
                     f"`{ed.signature(req.unit_before)}` gave the wrong result; `{ed.signature(req.unit_after)}` "
                     "fixed it.")
        u = rng.random()
        semantic = [k for k in self.domain.semantic_keys if k in t.attrs]
        if u < c.p_condition_semantic and semantic:
            cond = self.domain.semantic_condition(t, semantic[0])
        elif u < c.p_condition_semantic + c.p_condition_surface and cues:
            cond = f'question contains "{cues[0]}"'
        else:  # too broad
            cond = self.domain.broad_condition(t, rng)
        return f"SITUATION: {situation}\nCONDITION: {cond}"

    # ------------------------------------------------------------------ Module III
    def _revise(self, req: ReviseRequest) -> str:
        rng = self._rng("revise", req.task.task_id, req.episode, len(req.history), req.sample, req.memory.text)
        if req.memory.kind in ("guidance", "trajectories"):
            return self._follow_rules(req.memory, req.task, req.draft, rng)[0]
        edit = prompts.parse_edit_line(req.memory.text)
        if edit is None or rng.random() < self.config.p_ignore_record:
            return req.draft
        before, after = edit
        moved = self.edits.transfer(before, after, req.draft, self.domain.env(req.task))
        return req.draft if moved is None else moved

    # ------------------------------------------------------------------ Best-of-N judge
    def _judge(self, req: JudgeRequest) -> str:
        """Self-consistency without execution: the candidate written most often wins
        (ties → the lowest index); with ``p_judge_random`` a uniformly random one."""
        rng = self._rng("judge", req.task.task_id, req.episode, len(req.history))
        n = len(req.candidates)
        if n == 0:
            return "CHOICE: 1"
        if rng.random() < self.config.p_judge_random:
            return f"CHOICE: {rng.randrange(n) + 1}"
        norm = [self.edits.normalize(a) for a in req.candidates]
        counts = {a: norm.count(a) for a in norm}
        best = max(range(n), key=lambda i: (counts[norm[i]], -i))
        return f"CHOICE: {best + 1}"

    # ------------------------------------------------------------------ UpliftMem writer and reviser
    def _lesson_edit(self, task: Task, traj: list, solved: bool, rng: random.Random) -> tuple[str, str] | None:
        """The one-unit change a trajectory supports: the contrast of the last failed and the final
        (solved) action; from failures only, a *guess* (one rule edit of the last failed action)."""
        ed = self.edits
        if solved:
            failed = next((a for a in reversed(traj[:-1]) if a.score < 1.0), None)
            d = ed.diff_units(failed.action, traj[-1].action) if failed is not None else None
            return None if d is None else (d[1].text, d[2].text)
        last = traj[-1].action
        try:
            units = ed.units(last)
        except EditError:
            return None
        rules = ed.rule_edits(last, self.domain.env(task))
        if not rules:
            return None
        i, new = rules[rng.randrange(len(rules))]
        return units[i].text, new

    def _memory_text(self, task: Task, edit: tuple[str, str], cue: str | None, rng: random.Random,
                     related: tuple = (), split: bool = False) -> str:
        before, after = edit
        tag = re.sub(r"\W+", "_", cue).strip("_") if cue else ""
        sup = None
        for mid, text in related:  # an update of a related memory with the same pattern but another fix
            for _, _, b, a in prompts.parse_rule_lines(text):
                if self.edits.signature(b) == self.edits.signature(before) and a != after:
                    sup = mid
                    break
            if sup:
                break
        where = f"when the question says '{cue}'" if cue else "in every task"
        if split and tag:
            if rng.random() < 0.5:
                body = (f"Scope note: {where}, the '{tag}' fix applies.\n" + prompts.render_trigger(tag, cue))
            else:
                body = (f"Fix note '{tag}': write `{after}` instead of `{before}`.\n"
                        + prompts.render_fix(tag, before, after))
        else:
            rid = f"r{stable_seed(task.task_id, before, after) % 100000}"
            body = (f"Lesson: {where}, write `{after}` instead of `{before}`.\n"
                    + prompts.render_rule(rid, cue, before, after))
        if sup:
            body += f"\nSUPERSEDES: {sup}"
        return f"MEMORY:\n{body}\nEND MEMORY"

    def _write_memory(self, req) -> str:
        """WRITE_MEMORY (scripted): the trajectory's one-unit lesson (:meth:`_lesson_edit`; none from a
        first-attempt success), scoped by the task's first phrase with ``p_write_scoped`` (else
        ``ALWAYS``: over-general), written as one of two linked notes (a trigger or a fix note, tagged
        by the phrase) with ``p_write_split``, and marked ``SUPERSEDES`` a shown related memory that has
        the same pattern and a different fix (an update)."""
        c = self.config
        traj = list(req.trajectory)
        if not traj or (req.solved and len(traj) == 1):
            return "MEMORY: none"
        rng = self._rng("write", req.task.task_id, req.episode)
        edit = self._lesson_edit(req.task, traj, req.solved, rng)
        if edit is None:
            return "MEMORY: none"
        cues = list(req.task.attrs.get("cues", ()))
        cue = cues[0] if cues and rng.random() < c.p_write_scoped else None
        split = bool(cues) and rng.random() < c.p_write_split
        return self._memory_text(req.task, edit, cue or (cues[0] if split else None), rng, tuple(req.related), split)

    def _revise_memory(self, req) -> str:
        """REVISE_MEMORY (scripted), from the candidate's own validation run: its failure→success
        contrast when it has one (scoped by the task's phrase); otherwise an ``ALWAYS`` rule is narrowed
        to the phrase with ``p_revise_narrow`` and a linked note is merged into one rule; otherwise a new
        guess from the last failed action."""
        c = self.config
        traj = list(req.trajectory)
        rng = self._rng("revise_memory", req.task.task_id, req.episode, req.revision, req.memory)
        cues = list(req.task.attrs.get("cues", ()))
        cue = cues[0] if cues else None
        if traj and req.solved and len(traj) > 1:
            edit = self._lesson_edit(req.task, traj, True, rng)
            if edit is not None:
                return self._memory_text(req.task, edit, cue, rng, tuple(req.related))
        lines = prompts.parse_memory_lines(req.memory)
        if lines.rules and lines.rules[0][1] is None and cue and rng.random() < c.p_revise_narrow:
            _, _, b, a = lines.rules[0]
            return self._memory_text(req.task, (b, a), cue, rng, tuple(req.related))
        if lines.fixes and cue:
            _, b, a = lines.fixes[0]
            return self._memory_text(req.task, (b, a), cue, rng, tuple(req.related))
        if not traj:
            return "MEMORY: none"
        edit = self._lesson_edit(req.task, traj, False, rng)
        return "MEMORY: none" if edit is None else self._memory_text(req.task, edit, cue, rng, tuple(req.related))

    # ------------------------------------------------------------------ ExpeL lesson
    def _insight(self, req: InsightRequest) -> str:
        """One lesson from a finished trajectory (ExpeL-style, never executed):

        * a failure followed by a success → the contrast of the last failed and
          the final action, when they differ in one unit (what changed);
        * failures only → a *guess*: one rule edit of the last failed action,
          picked at random (the extractor cannot check it);
        * first-attempt success → no lesson.
        """
        traj = list(req.trajectory)
        if not traj or (req.solved and len(traj) == 1):
            return "LESSON: none"
        ed = self.edits
        rng = self._rng("insight", req.task.task_id, req.episode)
        cues = list(req.task.attrs.get("cues", ()))
        when = f"When the task says '{cues[0]}'" if cues else "In a task like this"
        if req.solved:
            failed = next((a for a in reversed(traj[:-1]) if a.score < 1.0), None)
            d = ed.diff_units(failed.action, traj[-1].action) if failed is not None else None
            if d is None:
                return "LESSON: none"
            _, ub, ua = d
            return f"LESSON: {when}, write `{ua.text}` instead of `{ub.text}`.\nEDIT: {ub.text} -> {ua.text}"
        last = traj[-1].action
        rules = ed.rule_edits(last, self.domain.env(req.task))
        try:
            units = ed.units(last)
        except EditError:
            return "LESSON: none"
        if not rules:
            return "LESSON: none"
        i, new = rules[rng.randrange(len(rules))]
        return (f"LESSON: {when}, `{units[i].text}` was part of a failed attempt; try `{new}`.\n"
                f"EDIT: {units[i].text} -> {new}")



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
When the request shows the Reflexion agent's self-reflections on earlier
attempts (``DraftRequest.reflections``, ``k`` of them), the characteristic
slips fire with ``p_variant × weight × retry_factor**t × reflection_factor**k``
instead (the same draws against a lower threshold; ``k = 0`` changes nothing).

**Self-reflection** (REFLECT, :mod:`cfjax.agents.reflexion`): a short
reflection naming the failed attempt's evaluator feedback (no draw, no key).

**The calls of memory systems** are answered by the handler each system registers with its call
kind (:class:`~cfjax.types.CallKind`): CounterMem's local alternatives and distillation
(``cfjax.countermem.calls``), ExpeL's lessons (``cfjax.expel.calls``), UpliftMem's writer and reviser
(``cfjax.uplift.calls``). Each documents its competence model there; every draw comes from
:meth:`ScriptedBackbone.rng` and every parameter from :class:`ScriptedConfig` (one table, fixed before
any result is seen, the same for every row).

**Revision** (REVISE_WITH_RECORD). A memory *set* (``MemoryText(kind="memories")``: a peer's
top-k items, :func:`cfjax.llm.prompts.render_memory_set`) is read exactly as the UpliftMem executor
reads one (:meth:`ScriptedBackbone._follow_memories`: every item's ``EDIT``/``RULE`` lines, adherence
falling with the set's tokens), applied to the draft. Otherwise the backbone reads the rendered record's
``EDIT:`` line and carries the edit onto the first draft unit with the same
masked shape (the domain's :meth:`~cfjax.types.EditModel.transfer`; for SQL
with a schema lookup for foreign keys and columns). Guidance (``RULE`` lines)
shown with REVISE_WITH_RECORD is followed as for drafts. It does **not** check the record's
condition — that is memory's job. With ``p_ignore_record`` it returns the
draft unchanged anyway.

**Best-of-N judge** (BEST_OF_N_JUDGE). The judge cannot execute anything:
it picks the candidate written most often among the N (self-consistency;
ties → the lowest index) and, with ``p_judge_random``, a uniformly random one.

All randomness is drawn from ``random.Random`` seeded by a stable hash of
``(seed, call, task_id, episode, attempt, sample)``: the same inputs give the
same text in every process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
from abc import ABC, abstractmethod
from typing import Any

from cfjax.config.scripted import ScriptedConfig  # re-exported: the simulator's competence parameters
from cfjax.llm import prompts
from cfjax.llm.base import TextBackbone
from cfjax.registry import CALLS
from cfjax.types import (Completion, DraftRequest, EditError, EditModel, JudgeRequest, MemoryText, ReviseRequest, Task,
                         Usage, contains_phrase)

__all__ = ["ScriptedConfig", "ScriptedDomain", "ScriptedBackbone", "SCRIPTED_LABEL", "stable_seed"]

SCRIPTED_LABEL = "scripted backbone (seeded simulator, not an LLM)"


_DRAFT_MEMO_MAX = 200_000


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
        #: memory-free drafts by ``(task, episode, attempt, sample, reflections)``: the rows of a unit
        #: draft the same decisions again (the pairing), and the draw is a pure function of that key
        self._drafts: dict[tuple, str] = {}

    # ------------------------------------------------------------------ plumbing
    def rng(self, *key: object) -> random.Random:
        """A generator seeded by ``(config.seed, *key)`` (stable across processes): every competence
        draw of a call kind's scripted handler comes from one of these."""
        return random.Random(stable_seed(self.config.seed, *key))

    def _complete(self, kind: str, prompt: str, req: object) -> Completion:
        """The simulator's reply to a registered call kind (its ``scripted`` handler, given this
        backbone: :meth:`rng`, ``config``, ``domain``, ``edits``), with counted tokens."""
        handler = CALLS.get(kind).scripted
        if handler is None:
            raise ValueError(f"the scripted backbone has no behaviour for call kind {kind!r} "
                             "(its CallKind registers no scripted handler)")
        text = handler(self, req)
        return Completion(text, Usage(prompts.count_tokens(prompt), prompts.count_tokens(text)))

    # ------------------------------------------------------------------ drafts
    def draft(self, req: DraftRequest) -> tuple[str, tuple[str, ...]]:
        """DRAFT_ACTION: the action and the ids of the memory it followed (module docstring)."""
        task = req.task
        attempt = len(req.history)
        if req.memory is None:  # the whole reply is a pure function of the key: drawn once per backbone
            key = (task.task_id, task.question, task.context, task.env_id, req.episode, attempt, req.sample, len(req.reflections))
            hit = self._drafts.get(key)
            if hit is None:
                hit = self._drafts[key] = self._memory_free_draft(req, attempt)[0]
                if len(self._drafts) > _DRAFT_MEMO_MAX:
                    self._drafts.clear()
            return hit, ()
        action, rng = self._memory_free_draft(req, attempt)
        if req.memory.kind == "memories":
            return self._follow_memories(req.memory, task, action, (req.episode, attempt, req.sample))
        return self._follow_rules(req.memory, task, action, rng)

    def _memory_free_draft(self, req: DraftRequest, attempt: int) -> tuple[str, random.Random]:
        """The memory-free draft and the draft stream after it (guidance is drawn from where it ends)."""
        c = self.config
        task = req.task
        ed = self.edits
        rng = self.rng("draft", task.task_id, req.episode, attempt, req.sample)
        action = self.domain.draft(task, attempt, rng, self._reflected(c, len(req.reflections)))
        if rng.random() < c.p_noise:
            edits = ed.rule_edits(action, self.domain.env(task))
            if edits:
                i, new = edits[rng.randrange(len(edits))]
                try:
                    action = ed.replace_unit(action, i, new)
                except EditError:
                    pass
        return action, rng

    @staticmethod
    def _reflected(c: ScriptedConfig, k: int) -> ScriptedConfig:
        """The competence the domain's error model drafts with when ``k`` self-reflections are in the
        prompt (Reflexion): the characteristic slips' rates ``p_error`` and ``p_error_look_alike`` times
        ``reflection_factor**k`` (module docstring). ``k = 0`` returns ``c`` itself, so every draw of a
        prompt without reflections (ReAct) is bit-identical to one from before reflections existed."""
        if k <= 0:
            return c
        f = c.reflection_factor ** k
        return dataclasses.replace(c, p_error=c.p_error * f, p_error_look_alike=c.p_error_look_alike * f)

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
            return self.rng("follow", task.task_id, *key, *k).random()

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

    # ------------------------------------------------------------------ Module III
    def revise(self, req: ReviseRequest) -> str:
        """REVISE_WITH_RECORD: the draft with the shown memory's edit carried (module docstring)."""
        rng = self.rng("revise", req.task.task_id, req.episode, len(req.history), req.sample, req.memory.text)
        if req.memory.kind in ("guidance", "trajectories"):
            return self._follow_rules(req.memory, req.task, req.draft, rng)[0]
        if req.memory.kind == "memories":  # a set of memories (a peer's top-k): read as the executor reads one
            return self._follow_memories(req.memory, req.task, req.draft,
                                         ("revise", req.episode, len(req.history), req.sample))[0]
        edit = prompts.parse_edit_line(req.memory.text)
        if edit is None or rng.random() < self.config.p_ignore_record:
            return req.draft
        before, after = edit
        moved = self.edits.transfer(before, after, req.draft, self.domain.env(req.task))
        return req.draft if moved is None else moved

    # ------------------------------------------------------------------ Best-of-N judge
    def judge(self, req: JudgeRequest) -> str:
        """Self-consistency without execution: the candidate written most often wins
        (ties → the lowest index); with ``p_judge_random`` a uniformly random one."""
        rng = self.rng("judge", req.task.task_id, req.episode, len(req.history))
        n = len(req.candidates)
        if n == 0:
            return "CHOICE: 1"
        if rng.random() < self.config.p_judge_random:
            return f"CHOICE: {rng.randrange(n) + 1}"
        norm = [self.edits.normalize(a) for a in req.candidates]
        counts = {a: norm.count(a) for a in norm}
        best = max(range(n), key=lambda i: (counts[norm[i]], -i))
        return f"CHOICE: {best + 1}"


"""A-MEM's two model calls: AMEM_NOTE (a note's content, keywords, context and tags) and AMEM_EVOLVE
(memory evolution: strengthen links, update neighbours).

Xu et al., *A-MEM: Agentic Memory for LLM Agents* (2025), §3.1 (note construction), §3.3 (memory
evolution); repository agiresearch/A-mem, ``agentic_memory/memory_system.py`` (``MemoryNote.analyze_content``:
JSON ``{"keywords", "context", "tags"}``; ``AgenticMemorySystem.process_memory`` and its evolution prompt:
JSON ``{"should_evolve", "actions": ["strengthen", "update_neighbor"], "suggested_connections",
"tags_to_update", "new_context_neighborhood", "new_tags_neighborhood"}``, the two neighbourhood lists in
the order the neighbours were shown). The prompts below are our own wording of the same contracts. One
difference on purpose: the neighbours are shown with their **note ids** and ``suggested_connections``
must be ids — upstream shows ``memory index:<rank>`` and so ends up with rank positions as links (the
reported bug; :mod:`cfjax.peers.amem.memory`).

**Scripted competence** (never executed, no answer key read):

* AMEM_NOTE → the content is the lesson of :func:`cfjax.llm.extract.lessons_of` (``Lesson.text()``, the
  simulator's one model of reading a lesson out of a trajectory, shared by every peer; no lesson → no
  note); keywords = the task's cue phrases and the lesson's two units; context = one sentence naming the
  task's cue; tags = the domain and the cue;
* AMEM_EVOLVE → each shown neighbour that shares the new note's edit line, or one of its cue phrases
  (among the neighbour's keywords or tags), is linked (*strengthen*) with ``p_link``; the new note's
  tags are kept; each neighbour whose tags lack the new note's cue gets the cue added to its tags and a
  context sentence naming it (*update_neighbor*) with ``p_update_neighbour``; every other neighbour is
  returned unchanged.

The probabilities (:data:`AMEM_PROBS`) were fixed before any result was seen; the simulator must not
make this peer look better or worse than its mechanism.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import cue_of, lessons_of
from cfjax.llm.prompts import parse_edit_line, render_attrs, render_trajectory, system_line
from cfjax.peers.common import json_object
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["AmemProbs", "AMEM_PROBS", "NoteRequest", "NoteResult", "Neighbour", "EvolveRequest", "EvolveResult",
           "AMEM_NOTE", "AMEM_EVOLVE", "render_note", "render_evolve", "json_object"]


@dataclass(frozen=True)
class AmemProbs:
    """The scripted evolution judgements (module docstring). Fixed before any result was seen; the
    simulator must not make this peer look better or worse than its mechanism."""

    p_link: float = 0.8  # a neighbour sharing the edit line or a cue phrase is linked (strengthen)
    p_update_neighbour: float = 0.3  # a neighbour's tags / context are rewritten to include the new cue


AMEM_PROBS = AmemProbs()


# --------------------------------------------------------------------------- requests and results
@dataclass(frozen=True)
class NoteRequest:
    """AMEM_NOTE: one note from a finished episode (agent-side data only)."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool
    episode: int = 0


@dataclass(frozen=True)
class NoteResult:
    content: str  # "" for no note
    keywords: tuple[str, ...]
    context: str
    tags: tuple[str, ...]
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


@dataclass(frozen=True)
class Neighbour:
    """A neighbour as the evolution prompt shows it (its note id, not its rank)."""

    id: str
    content: str
    keywords: tuple[str, ...]
    context: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class EvolveRequest:
    """AMEM_EVOLVE: the new note against its nearest neighbours."""

    task: Task
    content: str
    keywords: tuple[str, ...]
    context: str
    tags: tuple[str, ...]
    neighbours: tuple[Neighbour, ...]
    episode: int = 0


@dataclass(frozen=True)
class EvolveResult:
    should_evolve: bool
    actions: tuple[str, ...]
    connections: tuple[str, ...]  # note ids
    tags: tuple[str, ...] | None  # the new note's tags after "strengthen" (None: unchanged)
    neighbour_contexts: tuple[str, ...]  # in the order the neighbours were shown
    neighbour_tags: tuple[tuple[str, ...], ...]
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


# --------------------------------------------------------------------------- JSON replies (cfjax.peers.common.json_object)


def _strings(x: object) -> tuple[str, ...] | None:
    if not isinstance(x, list):
        return None
    return tuple(s.strip() for s in x if isinstance(s, str) and s.strip())


# --------------------------------------------------------------------------- AMEM_NOTE
def render_note(req: NoteRequest) -> str:
    t = req.task
    return (
        f"{system_line(t)}\n\nYou write one note for an agent's Zettelkasten memory from a finished "
        "interaction: the task, the agent's attempts and the evaluator's feedback.\n\n"
        f"### Task\n{t.question}\n\nAttributes of this task (name = value):\n{render_attrs(t.attrs)}\n\n"
        f"### Interaction ({'solved' if req.solved else 'not solved'})\n{render_trajectory(req.trajectory)}\n\n"
        "### Instructions\n1. content: the one lesson of this interaction that would help a future task — "
        "one sentence, and when it is a concrete change of one decision unit a new line "
        '"EDIT: <unit before> -> <unit after>"; "" when there is none.\n'
        "2. keywords: the most salient keywords (the task's key phrases, the units involved), most "
        "important first, at least three.\n3. context: one sentence on the topic, the situation the lesson "
        "applies to and its purpose.\n4. tags: several broad categories for classification (domain, kind "
        "of task, kind of error).\n\n### Output\nReply with one JSON object and nothing else:\n"
        '{"content": "<lesson>", "keywords": ["..."], "context": "<one sentence>", "tags": ["..."]}'
    )


def _parse_note(text: str, req: NoteRequest, usage: Usage) -> NoteResult:
    obj = json_object(text)
    if obj is None or not isinstance(obj.get("content"), str):
        return NoteResult("", (), "", (), usage, text, True)
    kw, tags, ctx = _strings(obj.get("keywords")), _strings(obj.get("tags")), obj.get("context")
    bad = kw is None or tags is None or not isinstance(ctx, str)
    return NoteResult(obj["content"].strip(), kw or (), ctx.strip() if isinstance(ctx, str) else "General",
                      tags or (), usage, text, bad)


def _cues(task: Task) -> list[str]:
    return [str(c) for c in task.attrs.get("cues", ())]


def _scripted_note(sim, req: NoteRequest) -> str:
    """The lesson as content; keywords, context and tags from the task's cues and units (module docstring)."""
    found = lessons_of(sim, req.task, req.trajectory, req.solved, req.episode, n=1)
    if not found:
        return json.dumps({"content": "", "keywords": [], "context": "General", "tags": []})
    lesson, cue, dom = found[0], cue_of(req.task), req.task.domain
    keywords = list(dict.fromkeys([*_cues(req.task), lesson.before, lesson.after]))
    context = (f"A {dom} task that says '{cue}': which unit to write for that phrase." if cue
               else f"A {dom} task: which unit to write for it.")
    tags = [dom, cue] if cue else [dom]
    return json.dumps({"content": lesson.text(), "keywords": keywords, "context": context, "tags": tags})


# --------------------------------------------------------------------------- AMEM_EVOLVE
def render_evolve(req: EvolveRequest) -> str:
    shown = "\n".join(f"memory id: {n.id}\tcontent: {n.content!r}\tcontext: {n.context}\tkeywords: "
                      f"{list(n.keywords)}\ttags: {list(n.tags)}" for n in req.neighbours)
    return (
        f"{system_line(req.task)}\n\nYou evolve an agent's Zettelkasten memory. A new note arrived; its "
        "nearest existing notes are listed below.\n\n### New note\n"
        f"content: {req.content!r}\ncontext: {req.context}\nkeywords: {list(req.keywords)}\ntags: "
        f"{list(req.tags)}\n\n### Nearest notes ({len(req.neighbours)})\n{shown}\n\n### Instructions\n"
        "Decide whether the memory should evolve, and how:\n- strengthen: link the new note to the notes it "
        "belongs with (name them by their memory id) and give the new note's updated tags;\n"
        "- update_neighbor: rewrite the context and tags of the nearest notes in the light of the new one; "
        "a note you do not change keeps its context and tags.\n"
        f"new_context_neighborhood and new_tags_neighborhood list all {len(req.neighbours)} nearest notes in "
        "the order shown.\n\n### Output\nReply with one JSON object and nothing else:\n"
        '{"should_evolve": true|false, "actions": ["strengthen", "update_neighbor"], '
        '"suggested_connections": ["<memory id>", ...], "tags_to_update": ["..."], '
        '"new_context_neighborhood": ["<context>", ...], "new_tags_neighborhood": [["..."], ...]}'
    )


def _neutral(usage: Usage, text: str, bad: bool) -> EvolveResult:
    return EvolveResult(False, (), (), None, (), (), usage, text, bad)


def _parse_evolve(text: str, req: EvolveRequest, usage: Usage) -> EvolveResult:
    obj = json_object(text)
    if obj is None or not isinstance(obj.get("should_evolve"), bool):
        return _neutral(usage, text, True)
    if not obj["should_evolve"]:
        return _neutral(usage, text, False)
    actions = _strings(obj.get("actions")) or ()
    conns = obj.get("suggested_connections")
    conns = tuple(str(c).strip() for c in conns if isinstance(c, (str, int))) if isinstance(conns, list) else ()
    ctxs = obj.get("new_context_neighborhood")
    ctxs = tuple(c if isinstance(c, str) else "" for c in ctxs) if isinstance(ctxs, list) else ()
    tags_n = obj.get("new_tags_neighborhood")
    tags_n = tuple(_strings(t) or () for t in tags_n) if isinstance(tags_n, list) else ()
    return EvolveResult(True, tuple(a.lower() for a in actions), conns, _strings(obj.get("tags_to_update")),
                        ctxs, tags_n, usage, text, not actions)


def _scripted_evolve(sim, req: EvolveRequest) -> str:
    """Links to neighbours sharing the edit line or a cue; neighbours' tags gain the new cue (module docstring)."""
    p = AMEM_PROBS
    rng = sim.rng("AMEM_EVOLVE", req.task.task_id, req.episode)
    edit = parse_edit_line(req.content)
    cues = _cues(req.task)
    cue = cue_of(req.task)
    links: list[str] = []
    contexts: list[str] = []
    tags: list[list[str]] = []
    changed = False
    for n in req.neighbours:
        shares = (edit is not None and parse_edit_line(n.content) == edit) or \
            any(c in n.keywords or c in n.tags for c in cues)
        if shares and rng.random() < p.p_link:
            links.append(n.id)
        if cue and cue not in n.tags and rng.random() < p.p_update_neighbour:
            contexts.append(f"{n.context} Related to tasks that say '{cue}'.".strip())
            tags.append([*n.tags, cue])
            changed = True
        else:
            contexts.append(n.context)
            tags.append(list(n.tags))
    actions = (["strengthen"] if links else []) + (["update_neighbor"] if changed else [])
    return json.dumps({"should_evolve": bool(actions), "actions": actions, "suggested_connections": links,
                       "tags_to_update": list(req.tags), "new_context_neighborhood": contexts,
                       "new_tags_neighborhood": tags})


#: AMEM_NOTE: ``{"content", "keywords", "context", "tags"}`` from one finished episode
AMEM_NOTE: CallKind[NoteRequest, NoteResult] = CALLS.register("AMEM_NOTE", CallKind(
    "AMEM_NOTE", render_note, _parse_note, _scripted_note, "A-MEM note construction (content, keywords, context, tags)"))

#: AMEM_EVOLVE: strengthen (links by id, this note's tags) and update_neighbor (their context and tags)
AMEM_EVOLVE: CallKind[EvolveRequest, EvolveResult] = CALLS.register("AMEM_EVOLVE", CallKind(
    "AMEM_EVOLVE", render_evolve, _parse_evolve, _scripted_evolve,
    "A-MEM memory evolution over the 5 nearest notes (strengthen / update_neighbor)"))

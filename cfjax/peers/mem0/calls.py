"""Mem0's two model calls: MEM0_EXTRACT (facts from one interaction) and MEM0_UPDATE (the memory
manager's ADD / UPDATE / DELETE / NONE decision).

Chhikara et al., *Mem0: Building Production-Ready AI Agents with Scalable Long-Term Memory* (2025), §2.1
(extraction phase, update phase); repository mem0ai/mem0 at the v2 era, ``mem0/configs/prompts.py``
(``FACT_RETRIEVAL_PROMPT``: a JSON object ``{"facts": [...]}``; ``DEFAULT_UPDATE_MEMORY_PROMPT``: a JSON
object ``{"memory": [{"id", "text", "event", "old_memory"}]}`` over the old memories shown under
temporary ids ``"0"``, ``"1"``, …). The prompts below are our own wording of the same contracts, written
for a task agent's finished episode instead of a chat turn.

**Scripted competence** (:func:`_scripted_extract`, :func:`_scripted_update`; never executed, no answer
key read):

* extraction → the lessons of :func:`cfjax.llm.extract.lessons_of` (the simulator's one model of reading
  a lesson out of a trajectory, shared by every peer), each fact being ``Lesson.text()`` (a sentence and
  its ``EDIT: before -> after`` line);
* update → for each new fact, against the shown memories (first match wins, in this order): a memory
  with the *same* edit line → ``NONE``; one with the same ``before`` unit but another ``after`` (a
  conflict) → ``UPDATE`` it with ``p_update``, else ``ADD``; one with the *reversed* edit (after → before)
  → ``DELETE`` it with ``p_delete`` and ``ADD`` the fact (else only ``ADD``); otherwise ``ADD``. Shown
  memories no fact touched are returned with ``NONE`` (the prompt asks for every memory). A fact without
  an edit line is ``NONE`` when its text equals a shown memory's, else ``ADD``. With
  ``p_hallucinated_id`` an ``UPDATE`` / ``DELETE`` names a temporary id that was not shown (the known
  failure the store maps back defensively).

The probabilities (:data:`MEM0_PROBS`) were fixed before any result was seen; the simulator must not
make this peer look better or worse than its mechanism.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import lessons_of
from cfjax.llm.prompts import parse_edit_line, render_attrs, render_trajectory, system_line
from cfjax.peers.common import json_object
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["Mem0Probs", "MEM0_PROBS", "EVENTS", "ExtractRequest", "ExtractResult", "UpdateRequest", "MemoryEvent",
           "UpdateResult", "MEM0_EXTRACT", "MEM0_UPDATE", "render_extract", "render_update", "json_object"]

#: the four events of the v2 update prompt
EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")


@dataclass(frozen=True)
class Mem0Probs:
    """The scripted memory manager's judgement draws (module docstring). Fixed before any result was
    seen; the simulator must not make this peer look better or worse than its mechanism."""

    p_update: float = 0.8  # a conflicting memory (same `before`, other `after`) is UPDATEd (else the fact is ADDed)
    p_delete: float = 0.7  # a reversed memory (after -> before) is DELETEd before the fact is ADDed
    p_hallucinated_id: float = 0.05  # an UPDATE / DELETE names a temporary id that was not shown
    n_facts: int = 1  # lessons_of(n=...) for a trajectory that only failed (a contrast yields one anyway)


MEM0_PROBS = Mem0Probs()


# --------------------------------------------------------------------------- requests and results
@dataclass(frozen=True)
class ExtractRequest:
    """MEM0_EXTRACT: the facts worth remembering from one finished episode (agent-side data only)."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool
    episode: int = 0


@dataclass(frozen=True)
class ExtractResult:
    facts: tuple[str, ...]
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


@dataclass(frozen=True)
class UpdateRequest:
    """MEM0_UPDATE: new facts against the old memories shown under temporary ids ``"0"``, ``"1"``, …"""

    task: Task
    facts: tuple[str, ...]
    memories: tuple[tuple[str, str], ...]  # (temporary id, text)
    episode: int = 0


@dataclass(frozen=True)
class MemoryEvent:
    """One entry of the update reply (``id`` is a temporary id as the model wrote it)."""

    id: str
    text: str
    event: str  # one of EVENTS
    old_memory: str = ""


@dataclass(frozen=True)
class UpdateResult:
    events: tuple[MemoryEvent, ...]
    usage: Usage
    raw: str = ""
    parse_failed: bool = False


# --------------------------------------------------------------------------- JSON replies (cfjax.peers.common.json_object)


# --------------------------------------------------------------------------- MEM0_EXTRACT
def render_extract(req: ExtractRequest) -> str:
    t = req.task
    return (
        f"{system_line(t)}\n\nYou organise the long-term memory of an agent that solves tasks like this one. "
        "Read one finished interaction — the task, the agent's attempts and the evaluator's feedback — and "
        "write down the facts worth remembering for future tasks: what went wrong, what fixed it, which "
        "wording of a task calls for which choice. Write nothing about this task's specific values that "
        "would not help another task, and nothing that the trajectory does not support.\n\n"
        f"### Task\n{t.question}\n\nAttributes of this task (name = value):\n{render_attrs(t.attrs)}\n\n"
        f"### Interaction ({'solved' if req.solved else 'not solved'})\n{render_trajectory(req.trajectory)}\n\n"
        "### Output\nReply with one JSON object and nothing else:\n"
        '{"facts": ["<fact 1>", "<fact 2>", ...]}\n'
        "Each fact is one sentence; when it is a concrete change of one decision unit, end the fact's "
        'string with a new line "EDIT: <unit before> -> <unit after>". Reply {"facts": []} when there is '
        "nothing worth remembering."
    )


def _parse_extract(text: str, req: ExtractRequest, usage: Usage) -> ExtractResult:
    obj = json_object(text)
    facts = obj.get("facts") if obj is not None else None
    if not isinstance(facts, list):
        return ExtractResult((), usage, text, True)
    return ExtractResult(tuple(f.strip() for f in facts if isinstance(f, str) and f.strip()), usage, text)


def _scripted_extract(sim, req: ExtractRequest) -> str:
    """The facts are the simulator's lessons of this trajectory (module docstring)."""
    found = lessons_of(sim, req.task, req.trajectory, req.solved, req.episode, n=MEM0_PROBS.n_facts)
    return json.dumps({"facts": [lesson.text() for lesson in found]})


# --------------------------------------------------------------------------- MEM0_UPDATE
def render_update(req: UpdateRequest) -> str:
    old = json.dumps([{"id": i, "text": text} for i, text in req.memories], indent=1)
    new = json.dumps(list(req.facts), indent=1)
    return (
        f"{system_line(req.task)}\n\nYou manage the long-term memory of an agent. For every newly retrieved "
        "fact, compare it with the existing memories and choose one operation:\n"
        "- ADD: the fact is new information — add it as a new memory (give it a new id).\n"
        "- UPDATE: the fact refines or corrects an existing memory about the same thing — keep that "
        "memory's id, give the new text and put the previous text in \"old_memory\".\n"
        "- DELETE: the fact contradicts an existing memory, which is now wrong — name that memory's id.\n"
        "- NONE: the fact is already in memory — nothing changes.\n"
        "Use only the ids listed below for UPDATE, DELETE and NONE; never invent an id for them.\n\n"
        f"### Existing memories\n{old if req.memories else '[]'}\n\n### New facts\n{new}\n\n"
        "### Output\nReply with one JSON object and nothing else, listing every existing memory and every "
        "new one:\n"
        '{"memory": [{"id": "<id>", "text": "<memory text>", "event": "ADD|UPDATE|DELETE|NONE", '
        '"old_memory": "<previous text, for UPDATE only>"}]}\n'
        "Keep any \"EDIT: <unit before> -> <unit after>\" line of a fact in the memory text."
    )


def _parse_update(text: str, req: UpdateRequest, usage: Usage) -> UpdateResult:
    obj = json_object(text)
    rows = obj.get("memory") if obj is not None else None
    if not isinstance(rows, list):
        return UpdateResult((), usage, text, True)
    out: list[MemoryEvent] = []
    bad = False
    for r in rows:
        ev = str(r.get("event", "")).strip().upper() if isinstance(r, dict) else ""
        if ev not in EVENTS:
            bad = True
            continue
        rid, body, old = r.get("id", ""), r.get("text", ""), r.get("old_memory", "")
        out.append(MemoryEvent(str(rid).strip() if isinstance(rid, (str, int)) else "",
                               body.strip() if isinstance(body, str) else "", ev,
                               old.strip() if isinstance(old, str) else ""))
    return UpdateResult(tuple(out), usage, text, bad)


def _scripted_update(sim, req: UpdateRequest) -> str:
    """The memory manager's events for the new facts against the shown memories (module docstring)."""
    p = MEM0_PROBS
    rng = sim.rng("MEM0_UPDATE", req.task.task_id, req.episode, *req.facts)  # one stream per call
    shown = [(i, text, parse_edit_line(text)) for i, text in req.memories]
    touched: set[str] = set()
    events: list[dict] = []
    next_id = len(shown)

    def target_id(real: str) -> str:
        if rng.random() < p.p_hallucinated_id:  # names an id that was not shown
            return str(len(shown) + 1 + rng.randrange(3))
        return real

    def add(fact: str) -> None:
        nonlocal next_id
        events.append({"id": str(next_id), "text": fact, "event": "ADD"})
        next_id += 1

    for fact in req.facts:
        edit = parse_edit_line(fact)
        live = [s for s in shown if s[0] not in touched]
        if edit is None:
            same = next((s for s in live if s[1].strip() == fact.strip()), None)
            if same is None:
                add(fact)
            else:
                touched.add(same[0])
                events.append({"id": same[0], "text": same[1], "event": "NONE"})
            continue
        b, a = edit
        same = next((s for s in live if s[2] == (b, a)), None)
        conflict = next((s for s in live if s[2] is not None and s[2][0] == b and s[2][1] != a), None)
        reverse = next((s for s in live if s[2] == (a, b)), None)
        if same is not None:
            touched.add(same[0])
            events.append({"id": same[0], "text": same[1], "event": "NONE"})
        elif conflict is not None:
            if rng.random() < p.p_update:
                touched.add(conflict[0])
                events.append({"id": target_id(conflict[0]), "text": fact, "event": "UPDATE",
                               "old_memory": conflict[1]})
            else:
                add(fact)
        elif reverse is not None:
            if rng.random() < p.p_delete:
                touched.add(reverse[0])
                events.append({"id": target_id(reverse[0]), "text": reverse[1], "event": "DELETE"})
            add(fact)
        else:
            add(fact)
    rest = [{"id": i, "text": text, "event": "NONE"} for i, text, _ in shown if i not in touched]
    return json.dumps({"memory": rest + events})


#: MEM0_EXTRACT: ``{"facts": [...]}`` from one finished episode
MEM0_EXTRACT: CallKind[ExtractRequest, ExtractResult] = CALLS.register("MEM0_EXTRACT", CallKind(
    "MEM0_EXTRACT", render_extract, _parse_extract, _scripted_extract,
    "Mem0 v2 fact extraction from one interaction ({\"facts\": [...]})"))

#: MEM0_UPDATE: ``{"memory": [{id, text, event, old_memory}]}`` over temporary ids
MEM0_UPDATE: CallKind[UpdateRequest, UpdateResult] = CALLS.register("MEM0_UPDATE", CallKind(
    "MEM0_UPDATE", render_update, _parse_update, _scripted_update,
    "Mem0 v2 memory manager: ADD / UPDATE / DELETE / NONE per memory over temporary ids"))

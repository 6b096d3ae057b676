"""Reflexion as a base agent: a verbal self-reflection per failed attempt, kept within the task.

Shinn et al., *Reflexion: Language Agents with Verbal Reinforcement Learning* (NeurIPS 2023), §3:
after a failed trial the model (the self-reflection model M_sr) turns the trial and its evaluator
signal into a short verbal reflection, stored in an episodic memory bounded to the last Ω
reflections (Ω = 1–3 in the paper; 3 here) that the actor sees on its next trials of the *same*
task. Nothing crosses tasks: the memory is the task's own.

Here a trial is one evaluated attempt of :mod:`cfjax.loop`, and the evaluator signal is the
feedback the world returned (``Attempt.feedback``, what a user-facing evaluator says). Two pieces:

* the :data:`REFLECT` call kind — :class:`ReflectRequest` (the task, the failed attempt with its
  feedback, the reflections already in context, the attempt's index) → :class:`ReflectResult`; the
  template asks for a short diagnosis and plan with a strict one-line contract ``REFLECTION: <text>``
  (a reply without it gives ``""``, which is kept out of the context);
* :class:`ReflexionBackbone` — a wrapper any backbone goes into (the ``reflexion`` entry of
  :data:`cfjax.registry.AGENTS`). A DRAFT_ACTION request whose history holds failed attempts gets one
  reflection per attempt (REFLECT through the inner backbone) and is passed on with the last
  ``memory_size`` of them in ``DraftRequest.reflections``, which every backbone's prompt renders
  (:func:`cfjax.llm.prompts.render_reflections`). Every other call kind passes through unchanged, so
  every memory row and runner runs on top of it unchanged.

**Each reflection is written once.** Reflections are cached per ``(task_id, episode, attempts up to
and including the reflected one)``: a reflection is a function of that prefix alone (it sees the
attempt and the reflections before it), so Best-of-N's N drafts of one attempt and every later
attempt reuse it and never request it again; entries of one task never serve another (the key holds
the task id), and concurrent requests (held-out episodes and Best-of-N drafts on threads) wait for
the one call in progress instead of repeating it.

**Each reflection is charged once per trajectory.** Its usage is added to the ``usage`` of the
DraftResult of the sample-0 draft of the attempt it precedes — the draft whose history ends with the
reflected attempt — so a ledger that charges every draft once counts every reflection once. Rows of
one unit share the backbone and the episode ids (they are paired), and a decision table's branches
share prefixes: a reflection served from the cache to another row or branch is still charged to
that trajectory's draft (the call a real agent on it would make; the cache only saves the
recomputation, like the response cache). A reflection on an attempt that is not the newest one of
the request (a history that grew by more than one attempt since the last draft, e.g. WM-without-CF's
checked alternative) is charged to the draft that writes it.

The scripted simulator's REFLECT answer (:func:`_scripted_reflect`) names the failed attempt's
feedback briefly; it sees only the request, never an answer key. What a reflection buys on the next
draft is modelled on the draft side by ``ScriptedConfig.reflection_factor`` (:mod:`cfjax.llm.scripted`).
"""

from __future__ import annotations

import dataclasses
import re
import threading
from dataclasses import dataclass
from typing import Any

from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.prompts import action_noun, code_fence, system_line, truncate
from cfjax.registry import CALLS
from cfjax.types import Attempt, Backbone, CallKind, DraftRequest, Task, Usage

__all__ = ["REFLECT", "ReflectRequest", "ReflectResult", "ReflexionBackbone", "render_reflect", "parse_reflection",
           "MEMORY_SIZE"]

#: Ω, the reflections kept in context (Shinn et al. 2023 bound the memory to 1–3)
MEMORY_SIZE = 3


@dataclass(frozen=True)
class ReflectRequest:
    """REFLECT: a self-reflection on one failed attempt of ``task``.

    Attributes:
      task: the task, as the agent sees it.
      attempt: the failed attempt and the evaluator's feedback on it.
      earlier: the reflections already in context (oldest first, at most ``memory_size``).
      episode: the episode id (the scripted simulator keys on it; a transport ignores it).
      index: the attempt's 0-based index in the task's history.
    """

    task: Task
    attempt: Attempt
    earlier: tuple[str, ...] = ()
    episode: int = 0
    index: int = 0


@dataclass(frozen=True)
class ReflectResult:
    reflection: str  # "" when the reply broke the one-line contract
    usage: Usage
    raw: str = ""


def render_reflect(req: ReflectRequest) -> str:
    """REFLECT: the failed attempt and its feedback → one ``REFLECTION:`` line."""
    t = req.task
    earlier = ("### Your earlier reflections on this task\n" + "\n".join(
        f"- {truncate(' '.join(r.split()), 'reflection')}" for r in req.earlier) + "\n\n") if req.earlier else ""
    return (
        f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Environment ({t.env_id})\n"
        f"{truncate(t.context, 'context')}\n\n### Your failed attempt {req.index + 1}\n"
        f"```{code_fence(t)}\n{truncate(req.attempt.action, 'action')}\n```\n"
        f"Feedback: {truncate(req.attempt.feedback, 'feedback')}\n\n{earlier}"
        f"### Instructions\nThis attempt did not solve the task. Reflect on it: in one to three sentences, say what "
        f"the feedback shows went wrong and what you will do differently on the next attempt. Do not write a new "
        f"{action_noun(t)}. Reply with exactly one line\nREFLECTION: <your reflection>"
    )


_REFLECTION_RE = re.compile(r"^[ \t]*REFLECTION:[ \t]*(\S.*?)[ \t]*$", re.M)


def parse_reflection(text: str) -> str:
    """The text of the first ``REFLECTION:`` line (``""`` when there is none or it is empty)."""
    m = _REFLECTION_RE.search(text or "")
    return m.group(1) if m else ""


def _parse_reflect(text: str, req: ReflectRequest, usage: Usage) -> ReflectResult:
    return ReflectResult(parse_reflection(text), usage, text)


def _scripted_reflect(sim: Any, req: ReflectRequest) -> str:
    """The simulator's reflection: it names the failed attempt's feedback, shortened (no draw, no answer
    key: only the request is read). Its effect on the next draft is ``reflection_factor``."""
    fb = " ".join(req.attempt.feedback.split())
    if len(fb) > 160:
        fb = fb[:157] + "..."
    return (f"REFLECTION: Attempt {req.index + 1} failed; the evaluator said: {fb or '(no feedback)'}. "
            f"Next time I will fix the part of the {action_noun(req.task)} this points to and keep the rest.")


#: REFLECT: a verbal self-reflection on one failed attempt (the Reflexion base agent)
REFLECT: CallKind[ReflectRequest, ReflectResult] = CALLS.register("REFLECT", CallKind(
    "REFLECT", render_reflect, _parse_reflect, _scripted_reflect,
    "a self-reflection on a failed attempt from its evaluator feedback (Reflexion)"))


class _Entry:
    """One cached reflection: written once under its own lock."""

    __slots__ = ("lock", "done", "text", "usage")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False
        self.text = ""
        self.usage = Usage()


class ReflexionBackbone:
    """The Reflexion agent's backbone over ``inner`` (module docstring).

    Args:
      inner: any :class:`~cfjax.types.Backbone`.
      memory_size: Ω, the reflections shown to a draft (the last ones).

    Attributes the runners read of a backbone (``stats``, ``cache``, ``max_inflight``, ``close``, …)
    are the inner backbone's.
    """

    def __init__(self, inner: Backbone, memory_size: int = MEMORY_SIZE) -> None:
        if memory_size < 1:
            raise ValueError(f"memory_size must be >= 1, got {memory_size}")
        self._inner = inner
        self.memory_size = int(memory_size)
        self.name = f"{getattr(inner, 'name', 'backbone')}+reflexion"
        self._lock = threading.Lock()
        self._entries: dict[tuple, _Entry] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_lock", "_entries"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    def call(self, kind: CallKind, req: Any) -> Any:
        if kind.name != DRAFT_ACTION.name or not isinstance(req, DraftRequest) or not req.history:
            return self._inner.call(kind, req)
        history = tuple(req.history)
        newest = len(history) - 1
        shown: list[str] = []
        charged = Usage()
        for i in range(len(history)):
            text, usage, fresh = self._reflection(req, history, i, tuple(shown[-self.memory_size:]))
            if (i == newest and req.sample == 0) or (fresh and i < newest):
                charged = charged + usage
            if text:
                shown.append(text)
        res = self._inner.call(kind, dataclasses.replace(req, reflections=tuple(shown[-self.memory_size:])))
        if charged != Usage():
            res = dataclasses.replace(res, usage=res.usage + charged)
        return res

    def _reflection(self, req: DraftRequest, history: tuple[Attempt, ...], i: int, earlier: tuple[str, ...]
                    ) -> tuple[str, Usage, bool]:
        """``(text, usage, written by this call)`` of the reflection on ``history[i]``."""
        key = (req.task.task_id, req.episode, history[:i + 1])
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
        with entry.lock:
            if entry.done:
                return entry.text, entry.usage, False
            r = self._inner.call(REFLECT, ReflectRequest(req.task, history[i], earlier, req.episode, i))
            entry.text, entry.usage, entry.done = r.reflection, r.usage, True
            return entry.text, entry.usage, True

    def reflections(self, task_id: str, episode: int) -> list[str]:
        """The reflections written so far for one task and episode (every branch; for inspection)."""
        with self._lock:
            items = [(len(k[2]), e) for k, e in self._entries.items() if k[0] == task_id and k[1] == episode]
        return [e.text for _, e in sorted(items, key=lambda x: x[0]) if e.done]

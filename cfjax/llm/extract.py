"""The scripted backbone's one model of *reading a lesson out of a finished trajectory*.

Every memory system that asks the backbone to extract something from its own attempts — ExpeL's
insight, ReasoningBank's items, Voyager's skill description, MemP's workflow, Mem0's facts,
A-MEM's note, LightMem's summary, AutoRefine's skill — is answered by the simulator through this
one function, so that the same trajectory yields the same lesson for every peer and the rows differ
only in what their *mechanisms* do with it (shared/DESIGN.md, "A simulator models competence").

What a lesson is (fixed before any result was seen; no answer key is read — only the attempts, their
feedback and the domain's edit model, which a model knows as well):

* **a failure followed by a success** → the one-unit *contrast* of the last failed action and the
  final one (``EDIT: before -> after``), scoped by the task's first observable cue phrase; when the two
  differ in more than one unit there is no lesson (:attr:`Lesson.contrast` is ``True``);
* **failures only** → a *guess*: ``n`` distinct rule edits of the last failed action, drawn at random
  (the extractor cannot check them; :attr:`Lesson.contrast` is ``False``);
* **a first-attempt success** → no edit a model could name: the simulator cannot say which slip the
  success avoided without the answer key, so it writes nothing (a real model might still write a
  strategy in words; see each peer's docstring).

The draws come from ``sim.rng("insight", task_id, episode, salt)`` — ``salt`` ``""`` is the exact
stream ExpeL's handler has always used, so its row is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.types import Attempt, EditError, Task

__all__ = ["Lesson", "lessons_of", "cue_of", "parse_lessons", "LESSON_LINE"]


@dataclass(frozen=True)
class Lesson:
    """One lesson: replace ``before`` by ``after`` (one decision unit), scoped by ``cue`` (a phrase of
    the question, or ``None``); ``contrast`` says it came from a failed → solved pair (else a guess)."""

    before: str
    after: str
    cue: str | None
    contrast: bool

    @property
    def when(self) -> str:
        return f"When the task says '{self.cue}'" if self.cue else "In a task like this"

    def sentence(self) -> str:
        """The lesson as one English sentence (what the scripted extractor writes)."""
        if self.contrast:
            return f"{self.when}, write `{self.after}` instead of `{self.before}`."
        return f"{self.when}, `{self.before}` was part of a failed attempt; try `{self.after}`."

    def edit_line(self) -> str:
        return f"EDIT: {self.before} -> {self.after}"

    def text(self) -> str:
        """``sentence`` and its ``EDIT:`` line (the machine-readable half)."""
        return f"{self.sentence()}\n{self.edit_line()}"


def cue_of(task: Task) -> str | None:
    """The task's first observable cue phrase (``attrs["cues"]``), or ``None``."""
    cues = list(task.attrs.get("cues", ()))
    return str(cues[0]) if cues else None


def lessons_of(sim, task: Task, trajectory: Sequence[Attempt], solved: bool, episode: int, *, n: int = 1,
               salt: str = "") -> list[Lesson]:
    """Up to ``n`` lessons the simulator reads out of one finished trajectory (module docstring).

    ``sim`` is the scripted backbone (its ``rng``, ``edits`` and ``domain.env``). A contrast yields at
    most one lesson whatever ``n`` is: the two actions differ in one unit."""
    traj = list(trajectory)
    if not traj or (solved and len(traj) == 1):
        return []
    ed = sim.edits
    cue = cue_of(task)
    if solved:
        failed = next((a for a in reversed(traj[:-1]) if a.score < 1.0), None)
        d = ed.diff_units(failed.action, traj[-1].action) if failed is not None else None
        if d is None:
            return []
        _, ub, ua = d
        return [Lesson(ub.text, ua.text, cue, True)]
    rng = sim.rng("insight", task.task_id, episode, *((salt,) if salt else ()))
    last = traj[-1].action
    try:
        units = ed.units(last)
    except EditError:
        return []
    rules = ed.rule_edits(last, sim.domain.env(task))
    out: list[Lesson] = []
    seen: set[tuple[int, str]] = set()
    while rules and len(out) < n:
        i, new = rules.pop(rng.randrange(len(rules)))
        if (i, new) in seen:
            continue
        seen.add((i, new))
        out.append(Lesson(units[i].text, new, cue, False))
    return out


#: ``LESSON: <sentence>`` — one line per lesson in the replies the peers' parsers read
LESSON_LINE = re.compile(r"^\s*LESSON:[ \t]*(\S.*?)\s*$", re.M)


def parse_lessons(text: str) -> list[tuple[str, tuple[str, str] | None]]:
    """``[(sentence, (before, after) or None)]`` of a reply with ``LESSON:`` lines, each optionally
    followed by its ``EDIT: b -> a`` line (before the next ``LESSON:``); ``none`` lessons are dropped."""
    out: list[tuple[str, tuple[str, str] | None]] = []
    for line in text.splitlines():
        s = line.strip()
        m = LESSON_LINE.match(s)
        if m:
            body = m.group(1)
            if body.lower().rstrip(".") != "none":
                out.append((body, None))
            continue
        if s.startswith("EDIT:") and " -> " in s and out and out[-1][1] is None:
            b, _, a = s[5:].partition(" -> ")
            if b.strip() and a.strip():
                out[-1] = (out[-1][0], (b.strip(), a.strip()))
    return out

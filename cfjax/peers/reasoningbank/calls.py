"""ReasoningBank's model calls: the judge, the success/failure extraction, MaTTS's self-contrast and
re-check (Ouyang et al., *ReasoningBank: Scaling Agent Self-Evolving with Reasoning Memory*, 2025,
arXiv 2509.25140, §3.2 and App. A.1 (the judge and extraction prompts), §3.3 (MaTTS)).

Four :class:`~cfjax.types.CallKind` s registered in :data:`cfjax.registry.CALLS`:

* ``RB_JUDGE`` — LLM-as-a-judge: was the task solved? (``STATUS: success|failure``)
* ``RB_EXTRACT`` — the success prompt (what made it work) or the failure prompt (what to avoid):
  at most 3 memory items ``{title, description, content}`` that name no specific strings;
* ``RB_CONTRAST`` — MaTTS parallel: self-contrast over ``k`` rollouts of one task, at most 5 items;
* ``RB_RECHECK`` — MaTTS sequential: "re-examine the trajectory … let's check again": a re-read of
  the judgement and items (the released code has only its prompts; see below).

Item format (one block per item; the ``EDIT:`` line is the machine-readable half of a strategy, the
unit-level change it describes — the domain's transfer adapts its identifiers to a new task, as a
model applying a general strategy would)::

    ITEM 1
    TITLE: ...
    DESCRIPTION: ...
    CONTENT: ...
    EDIT: <unit before> -> <unit after>      (optional)

**Scripted competence** (:data:`SCRIPTED`, fixed before any result was seen; the simulator must not
make ReasoningBank look better or worse than its mechanism):

* the judge reads the final attempt's evaluator feedback (the trajectory it is shown) and mislabels it
  with ``p_judge_error`` — an LLM judge's misreading; ``+ verified feedback`` takes the label from the
  evaluator instead and makes no judge call;
* extraction is the simulator's one lesson model (:func:`cfjax.llm.extract.lessons_of`) under the
  *judged* status: a trajectory judged a success yields the contrast of its last failed and final
  action (toward the final action — harmful when the judge was wrong), one judged a failure yields up
  to 3 guessed rule edits of its last action (also of a correct action when misjudged);
* self-contrast (parallel MaTTS) contrasts every failed final action with every solved final action
  of the ``k`` rollouts (as judged, one judge draw per rollout) where they differ in one unit, then the
  rollouts' own lessons; duplicates removed, at most 5;
* re-check (sequential MaTTS) re-reads the judgement: each of the ``k − 1`` rounds is one more
  independent judge draw, and the status becomes the majority of the draws so far (ties → the latest);
  items are then re-extracted under that status.

What a real model must do that the simulator only draws: judge success from a trajectory (here a
draw against the feedback), write strategies that generalise without naming strings (here one-unit
edits the domain's transfer adapts), contrast rollouts and re-check its own judgement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import Lesson, lessons_of
from cfjax.llm.prompts import render_trajectory, system_line, truncate
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["Item", "JudgeRequest", "JudgeResult", "ExtractRequest", "ContrastRequest", "RecheckRequest",
           "ItemsResult", "RecheckResult", "RB_JUDGE", "RB_EXTRACT", "RB_CONTRAST", "RB_RECHECK", "SCRIPTED", "Competence",
           "parse_items", "render_items", "MAX_ITEMS", "MAX_CONTRAST_ITEMS"]

MAX_ITEMS = 3  # items per extraction (App. A.1: "at most 3 memory items")
MAX_CONTRAST_ITEMS = 5  # items per self-contrast (§3.3)


@dataclass(frozen=True)
class Competence:
    """The scripted judge's competence (module docstring)."""

    p_judge_error: float = 0.1  # RB_JUDGE / each re-check: the label read off the feedback is flipped


#: fixed before any ReasoningBank result was seen
SCRIPTED = Competence()


@dataclass(frozen=True)
class Item:
    """One memory item (§3.2): a title, a one-sentence description, 1–3 sentences of content, and
    (when the strategy is a concrete change of one decision unit) its ``EDIT`` line."""

    title: str
    description: str
    content: str
    edit: tuple[str, str] | None = None

    def text(self) -> str:
        body = f"TITLE: {self.title}\nDESCRIPTION: {self.description}\nCONTENT: {self.content}"
        return body + (f"\nEDIT: {self.edit[0]} -> {self.edit[1]}" if self.edit else "")

    def to_json(self) -> dict:
        return {"title": self.title, "description": self.description, "content": self.content,
                "edit": list(self.edit) if self.edit else None}

    @staticmethod
    def from_json(d: dict) -> "Item":
        e = d.get("edit")
        return Item(str(d["title"]), str(d["description"]), str(d["content"]),
                    (str(e[0]), str(e[1])) if isinstance(e, list) and len(e) == 2 else None)


@dataclass(frozen=True)
class JudgeRequest:
    task: Task
    trajectory: Sequence[Attempt]
    episode: int = 0
    round: int = 0  # 0: the judge; r ≥ 1: the r-th re-check (MaTTS sequential)


@dataclass(frozen=True)
class JudgeResult:
    success: bool | None  # None: the reply named no status (counted as a parse failure; treated as failure)
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class ExtractRequest:
    task: Task
    trajectory: Sequence[Attempt]
    success: bool  # the judged (or verified) status: picks the success or the failure prompt
    episode: int = 0
    step_outcomes: bool = False  # + verified feedback: each attempt's evaluator score is shown


@dataclass(frozen=True)
class ContrastRequest:
    task: Task
    trajectories: Sequence[Sequence[Attempt]]
    episode: int = 0


@dataclass(frozen=True)
class RecheckRequest:
    task: Task
    trajectory: Sequence[Attempt]
    items: Sequence[Item]
    episode: int = 0
    round: int = 1


@dataclass(frozen=True)
class RecheckResult:
    success: bool | None  # the re-checked status (None: no STATUS line)
    items: tuple[Item, ...]
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class ItemsResult:
    items: tuple[Item, ...]
    usage: Usage
    raw: str = ""


# --------------------------------------------------------------------------- rendering

def _traj(traj: Sequence[Attempt], step_outcomes: bool = False) -> str:
    text = render_trajectory(traj)
    if step_outcomes:
        text += "\nEvaluator scores per attempt: " + ", ".join(f"{a.score:.2f}" for a in traj)
    return text


_FORMAT = ("Reply with at most {n} items, each as\nITEM <number>\nTITLE: <a short title>\n"
           "DESCRIPTION: <one sentence>\nCONTENT: <1-3 sentences of transferable reasoning; name no specific "
           "strings of this task>\nEDIT: <unit before> -> <unit after>   (only when the strategy is a concrete "
           "change of one decision unit)")


def render_judge(req: JudgeRequest) -> str:
    t = req.task
    again = "\nLet's check again: re-examine the trajectory carefully before you answer.\n" if req.round else ""
    return (f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Trajectory\n{_traj(req.trajectory)}\n{again}\n"
            "### Instructions\nYou are an expert judge of agent trajectories. Decide whether the agent solved the "
            "task, from the trajectory and the feedback it received.\nReply with one line\nSTATUS: success\nor\n"
            "STATUS: failure")


def render_extract(req: ExtractRequest) -> str:
    t = req.task
    if req.success:
        what = ("The trajectory solved the task. Extract the reasoning strategies that made it work, as memory "
                "items that help with similar future tasks.")
    else:
        what = ("The trajectory failed. Reflect on why it failed and extract preventative lessons (what to avoid "
                "and what to do instead), as memory items that help with similar future tasks.")
    return (f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Trajectory ({'success' if req.success else 'failure'})"
            f"\n{_traj(req.trajectory, req.step_outcomes)}\n\n### Instructions\n{what}\n"
            + _FORMAT.format(n=MAX_ITEMS))


def render_contrast(req: ContrastRequest) -> str:
    t = req.task
    blocks = "\n\n".join(f"#### Rollout {i}\n{_traj(tr)}" for i, tr in enumerate(req.trajectories, 1))
    return (f"{system_line(t)}\n\n### Task\n{t.question}\n\n### {len(req.trajectories)} rollouts of this task\n"
            f"{truncate(blocks, 'trajectory')}\n\n### Instructions\nCompare the rollouts with each other (self-contrast): "
            "what do the successful ones do that the failed ones do not? Extract the strategies that are "
            "consistent across successes and the mistakes that recur in failures.\n"
            + _FORMAT.format(n=MAX_CONTRAST_ITEMS))


def render_recheck(req: RecheckRequest) -> str:
    t = req.task
    items = "\n\n".join(f"ITEM {i}\n{it.text()}" for i, it in enumerate(req.items, 1)) or "(none)"
    return (f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Trajectory\n{_traj(req.trajectory)}\n\n"
            f"### Memory items extracted so far\n{items}\n\n### Instructions\nRe-examine the trajectory and the "
            "items. Let's check again: was the task really solved, and are the items right?\nReply with\n"
            "STATUS: success|failure\nand then the corrected items.\n" + _FORMAT.format(n=MAX_ITEMS))


# --------------------------------------------------------------------------- parsing

_STATUS_RE = re.compile(r"^\s*STATUS:\s*(success|failure)\b", re.M | re.I)
_FIELD_RE = re.compile(r"^\s*(TITLE|DESCRIPTION|CONTENT|EDIT):\s*(.*?)\s*$", re.I)


def parse_status(text: str) -> bool | None:
    m = _STATUS_RE.search(text)
    return None if m is None else m.group(1).lower() == "success"


def parse_items(text: str, limit: int = MAX_ITEMS) -> tuple[Item, ...]:
    """The items of a reply (at most ``limit``; an item needs a title and content; a malformed ``EDIT``
    line is dropped from its item, never the item)."""
    blocks: list[dict[str, str]] = []
    for line in text.splitlines():
        if re.match(r"^\s*ITEM\b", line, re.I):
            blocks.append({})
            continue
        m = _FIELD_RE.match(line)
        if m is None:
            continue
        if not blocks or m.group(1).upper() in blocks[-1]:
            blocks.append({})
        blocks[-1][m.group(1).upper()] = m.group(2)
    out = []
    for b in blocks:
        if not b.get("TITLE") or not b.get("CONTENT"):
            continue
        edit = None
        e = b.get("EDIT", "")
        if " -> " in e:
            before, _, after = e.partition(" -> ")
            if before.strip() and after.strip():
                edit = (before.strip(), after.strip())
        out.append(Item(b["TITLE"], b.get("DESCRIPTION", ""), b["CONTENT"], edit))
        if len(out) == limit:
            break
    return tuple(out)


def render_items(items: Sequence[Item]) -> str:
    """Items as a reply writes them (the scripted handlers' replies, and test fixtures)."""
    return "\n".join(f"ITEM {i}\n{it.text()}" for i, it in enumerate(items, 1)) or "ITEM 1\n(none)"


# --------------------------------------------------------------------------- the scripted handlers

def _item_of(lesson: Lesson, success: bool) -> Item:
    if lesson.contrast:
        title = "What made it work" if success else "The step that was wrong"
    else:
        title = "A step to reconsider"
    return Item(title, lesson.when + ", check this decision unit.", lesson.sentence(), (lesson.before, lesson.after))


def _judged(sim, task: Task, traj: Sequence[Attempt], episode: int, rnd: int, salt: str = "") -> bool:
    truth = bool(traj) and traj[-1].score >= 1.0  # what the feedback of the final attempt says
    flip = sim.rng("RB_JUDGE", task.task_id, episode, rnd, salt).random() < SCRIPTED.p_judge_error
    return truth != flip


def _scripted_judge(sim, req: JudgeRequest) -> str:
    return f"STATUS: {'success' if _judged(sim, req.task, req.trajectory, req.episode, req.round) else 'failure'}"


def _items(sim, task: Task, traj: Sequence[Attempt], success: bool, episode: int, n: int) -> list[Item]:
    return [_item_of(x, success) for x in lessons_of(sim, task, traj, success, episode, n=n)]


def _scripted_extract(sim, req: ExtractRequest) -> str:
    return render_items(_items(sim, req.task, req.trajectory, req.success, req.episode, MAX_ITEMS))


def _scripted_contrast(sim, req: ContrastRequest) -> str:
    ed = sim.edits
    trajs = [list(t) for t in req.trajectories if t]
    judged = [_judged(sim, req.task, t, req.episode, 0, f"rollout{i}") for i, t in enumerate(trajs)]
    out: list[Item] = []
    seen: set[tuple[str, str]] = set()

    def add(it: Item) -> None:
        if it.edit is not None and it.edit not in seen and len(out) < MAX_CONTRAST_ITEMS:
            seen.add(it.edit)
            out.append(it)

    cue = next(iter(req.task.attrs.get("cues", ())), None)
    for i, ti in enumerate(trajs):
        for j, tj in enumerate(trajs):
            if judged[i] or not judged[j]:
                continue
            d = ed.diff_units(ti[-1].action, tj[-1].action)
            if d is not None:
                les = Lesson(d[1].text, d[2].text, cue, True)
                add(Item("Consistent across successful rollouts", les.when + ", the successful rollouts differ here.",
                         les.sentence(), (les.before, les.after)))
    for i, t in enumerate(trajs):
        for it in _items(sim, req.task, t, judged[i], req.episode, MAX_ITEMS):
            add(it)
    return render_items(out)


def _scripted_recheck(sim, req: RecheckRequest) -> str:
    votes = [_judged(sim, req.task, req.trajectory, req.episode, r) for r in range(req.round + 1)]
    yes = sum(votes)
    status = votes[-1] if 2 * yes == len(votes) else 2 * yes > len(votes)
    items = _items(sim, req.task, req.trajectory, status, req.episode, MAX_ITEMS)
    return f"STATUS: {'success' if status else 'failure'}\n" + render_items(items)


def _parse_judge(text: str, req: JudgeRequest, usage: Usage) -> JudgeResult:
    return JudgeResult(parse_status(text), usage, text)


def _parse_extract(text: str, req: object, usage: Usage) -> ItemsResult:
    return ItemsResult(parse_items(text, MAX_CONTRAST_ITEMS if isinstance(req, ContrastRequest) else MAX_ITEMS),
                       usage, text)


def _parse_recheck(text: str, req: RecheckRequest, usage: Usage) -> "RecheckResult":
    return RecheckResult(parse_status(text), parse_items(text), usage, text)


RB_JUDGE: CallKind[JudgeRequest, JudgeResult] = CALLS.register("RB_JUDGE", CallKind(
    "RB_JUDGE", render_judge, _parse_judge, _scripted_judge, "was the task solved? (ReasoningBank's LLM judge)"))
RB_EXTRACT: CallKind[ExtractRequest, ItemsResult] = CALLS.register("RB_EXTRACT", CallKind(
    "RB_EXTRACT", render_extract, _parse_extract, _scripted_extract,
    "at most 3 memory items from a success or a failure (ReasoningBank)"))
RB_CONTRAST: CallKind[ContrastRequest, ItemsResult] = CALLS.register("RB_CONTRAST", CallKind(
    "RB_CONTRAST", render_contrast, _parse_extract, _scripted_contrast,
    "self-contrast over k rollouts, at most 5 items (ReasoningBank MaTTS parallel)"))
RB_RECHECK: CallKind[RecheckRequest, RecheckResult] = CALLS.register("RB_RECHECK", CallKind(
    "RB_RECHECK", render_recheck, _parse_recheck, _scripted_recheck, "re-check the status and items (ReasoningBank MaTTS sequential)"))

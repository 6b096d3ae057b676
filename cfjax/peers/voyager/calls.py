"""Voyager's model calls: VOYAGER_CRITIC (self-verification) and VOYAGER_DESCRIBE (the skill's key).

Wang et al., *Voyager: An Open-Ended Embodied Agent with Large Language Models* (2023), §2.3 (skill
library) and §2.2/App. A.5 (self-verification); MineDojo/Voyager ``voyager/agents/critic.py`` (the
critic reads the environment state after the final attempt and answers JSON ``{"reasoning",
"success", "critique"}``) and ``voyager/agents/skill.py`` (``generate_skill_description``: the model
summarises the program; that summary, not the code, is what the vector store embeds). CounterMem's
App. D.8 lists the reduced form as VOYAGER_SKILL: "a reusable procedure with a name, applicability
description, and steps" — VOYAGER_DESCRIBE writes exactly those fields.

Both are :class:`~cfjax.types.CallKind` s registered in :data:`cfjax.registry.CALLS`; requests carry
only agent-side data (the task as shown, the attempts with their feedback and scores).

**Scripted critic** (VOYAGER_CRITIC, used only with ``critic="model"``): it reads the trajectory's
last score (what the environment state shows the critic) and judges it correctly with
:attr:`VoyagerCompetence.p_critic_correct`, else the opposite (a false "success" admits an unverified
skill; a false "failure" loses a verified one). One draw from ``sim.rng("VOYAGER_CRITIC", task_id,
episode)``.

**Scripted description** (VOYAGER_DESCRIBE): no draw. The name is the final action's function name
in code domains (``def name(`` — skills are callable functions there), else a camel-case name of the
first content words of the question (tasks worded alike get the same name, so a later skill replaces
an earlier one, as Voyager's agent re-writes ``mineWoodLog``). The description restates the question
and its cue phrase and quotes the procedure's opening (at most 80 characters); when the trajectory is a failure → success contrast, it adds the lesson the shared
extractor reads out of it (:func:`cfjax.llm.extract.lessons_of`) with its ``EDIT:`` line — the
verified step that made the procedure work. A first-attempt success has no contrast, so the
description names no step: the stored skill changes nothing in the simulator (it only costs context).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cfjax.llm.extract import cue_of, lessons_of
from cfjax.llm.prompts import system_line, truncate
from cfjax.registry import CALLS
from cfjax.types import Attempt, CallKind, Task, Usage

__all__ = ["VoyagerCompetence", "COMPETENCE", "CriticRequest", "CriticResult", "DescribeRequest",
           "DescribeResult", "VOYAGER_CRITIC", "VOYAGER_DESCRIBE", "render_critic", "render_describe",
           "skill_name_of", "clean_name"]


@dataclass(frozen=True)
class VoyagerCompetence:
    """The simulator's competence for Voyager's calls. Fixed before any result was seen; the simulator
    must not make this peer look better or worse than its mechanism.

    Attributes:
      p_critic_correct: VOYAGER_CRITIC judges the final attempt's success correctly (else flips it);
        0.9 — a GPT-4 critic that reads the outcome directly is mostly but not always right.
      name_words: content words of the question a scripted skill name is made of.
    """

    p_critic_correct: float = 0.9
    name_words: int = 3


COMPETENCE = VoyagerCompetence()


def _trajectory(traj: Sequence[Attempt]) -> str:
    """Attempts with feedback *and* score (the critic's view of the environment state)."""
    return truncate("\n".join(
        f"Attempt {i}: {truncate(a.action, 'action')}\nFeedback: {truncate(a.feedback, 'feedback')}\n"
        f"Score: {a.score:.2f}" for i, a in enumerate(traj, 1)) or "(no attempts)", "trajectory")


# --------------------------------------------------------------------------- VOYAGER_CRITIC
@dataclass(frozen=True)
class CriticRequest:
    """VOYAGER_CRITIC: did the final attempt of this trajectory accomplish the task?"""

    task: Task
    trajectory: Sequence[Attempt]
    episode: int = 0


@dataclass(frozen=True)
class CriticResult:
    success: bool  # False on a parse failure (nothing is admitted unverified)
    critique: str
    usage: Usage
    parsed: bool = True
    raw: str = ""


def render_critic(req: CriticRequest) -> str:
    t = req.task
    return (
        f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Trajectory (attempts, the evaluator's feedback and score)\n"
        f"{_trajectory(req.trajectory)}\n\n### Instructions\nYou are the critic of a skill library: only a "
        "procedure that really accomplished the task may be stored as a skill. Judge from the evidence "
        "above (the final attempt's feedback and score) whether the FINAL attempt accomplished the task. "
        "Reply with one JSON object and nothing else:\n"
        '{"reasoning": "<one sentence>", "success": true or false, "critique": "<what to change, or empty>"}'
    )


_JSON_RE = re.compile(r"\{.*\}", re.S)


def _parse_critic(text: str, req: CriticRequest, usage: Usage) -> CriticResult:
    m = _JSON_RE.search(text or "")
    try:
        obj = json.loads(m.group(0)) if m else None
    except (ValueError, TypeError):
        obj = None
    if not isinstance(obj, dict) or not isinstance(obj.get("success"), bool):
        return CriticResult(False, "", usage, False, text or "")
    return CriticResult(obj["success"], str(obj.get("critique") or ""), usage, True, text)


def _scripted_critic(sim, req: CriticRequest) -> str:
    """Correct with ``p_critic_correct`` about the final attempt's score (module docstring)."""
    traj = list(req.trajectory)
    truth = bool(traj) and traj[-1].score >= 1.0
    right = sim.rng("VOYAGER_CRITIC", req.task.task_id, req.episode).random() < COMPETENCE.p_critic_correct
    verdict = truth if right else not truth
    reason = "the final attempt's feedback reports " + ("a correct result" if verdict else "a wrong result")
    return json.dumps({"reasoning": reason, "success": verdict,
                       "critique": "" if verdict else "revise the step the feedback points at"})


#: VOYAGER_CRITIC: self-verification of the final attempt (critic="model")
VOYAGER_CRITIC: CallKind[CriticRequest, CriticResult] = CALLS.register("VOYAGER_CRITIC", CallKind(
    "VOYAGER_CRITIC", render_critic, _parse_critic, _scripted_critic,
    "Voyager's self-verification: did the final attempt accomplish the task"))


# --------------------------------------------------------------------------- VOYAGER_DESCRIBE
@dataclass(frozen=True)
class DescribeRequest:
    """VOYAGER_DESCRIBE: name and describe the verified procedure (the final attempt) of a trajectory."""

    task: Task
    trajectory: Sequence[Attempt]
    solved: bool  # the critic's verdict (the describer only sees verified procedures)
    episode: int = 0


@dataclass(frozen=True)
class DescribeResult:
    name: str  # "" on a parse failure
    description: str  # the embedded key (with its EDIT line when the model named the working step)
    applicability: str
    usage: Usage
    parsed: bool = True
    raw: str = ""


def render_describe(req: DescribeRequest) -> str:
    t = req.task
    final = req.trajectory[-1].action if req.trajectory else ""
    return (
        f"{system_line(t)}\n\n### Task\n{t.question}\n\n### Trajectory ({'verified' if req.solved else 'not verified'})\n"
        f"{_trajectory(req.trajectory)}\n\n### Verified procedure (the final attempt)\n{truncate(final, 'action')}\n\n"
        "### Instructions\nThis procedure will be stored in a skill library and retrieved for future tasks by "
        "the similarity of a new task to your description. Name it and describe what it does and when it "
        "applies, in general terms (no values specific to this one task). If an earlier attempt failed and "
        "one step change made the final attempt work, name that step. Reply with exactly these lines:\n"
        "NAME: <camelCase name of the procedure>\nDESCRIPTION: <one or two sentences: what the procedure does>\n"
        "APPLICABILITY: <one sentence: the tasks it applies to>\n"
        "and, only if one step change made it work, a line\nEDIT: <unit before> -> <unit after>"
    )


_FIELD_RE = {k: re.compile(rf"^\s*{k}:[ \t]*(\S.*?)\s*$", re.M) for k in ("NAME", "DESCRIPTION", "APPLICABILITY")}
_EDIT_RE = re.compile(r"^\s*EDIT:[ \t]*(\S.*?)\s+->\s+(\S.*?)\s*$", re.M)


def clean_name(name: str) -> str:
    """A skill name as an identifier (``[A-Za-z0-9_]``, at most 60 characters; ``""`` when nothing is left)."""
    return re.sub(r"\W+", "_", name.strip().strip("`")).strip("_")[:60]


def _parse_describe(text: str, req: DescribeRequest, usage: Usage) -> DescribeResult:
    got = {k: (m.group(1) if (m := r.search(text or "")) else "") for k, r in _FIELD_RE.items()}
    name, desc = clean_name(got["NAME"]), got["DESCRIPTION"]
    if not name or not desc:
        return DescribeResult("", "", "", usage, False, text or "")
    e = _EDIT_RE.search(text)
    if e:
        desc += f"\nEDIT: {e.group(1)} -> {e.group(2)}"
    return DescribeResult(name, desc, got["APPLICABILITY"], usage, True, text)


_STOP = frozenset("""a an the of to in on at by for from with and or is are was were be been have has had do does
did how many much what which who whose whom where when why list show give find return count name names get tell
me all each every any that this these those their its there than as per whether not no""".split())
_DEF_RE = re.compile(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", re.M)


def skill_name_of(task: Task, action: str, words: int = COMPETENCE.name_words) -> str:
    """The scripted skill name (module docstring): the function's name, else camel-cased content words."""
    m = _DEF_RE.search(action)
    if m:
        return m.group(1)
    toks = [w for w in re.findall(r"[a-z]+", task.question.lower()) if w not in _STOP and len(w) > 1][:words]
    return (toks[0] + "".join(w.capitalize() for w in toks[1:])) if toks else "solveTask"


def _scripted_describe(sim, req: DescribeRequest) -> str:
    """Name, description and applicability of the verified procedure (module docstring); no draw."""
    traj = list(req.trajectory)
    final = traj[-1].action if traj else ""
    cue = cue_of(req.task)
    scope = f"tasks that say '{cue}'" if cue else "tasks worded like this one"
    head = " ".join(final.split())
    head = head if len(head) <= 80 else head[:77] + "..."
    lines = [f"NAME: {skill_name_of(req.task, final)}",
             f"DESCRIPTION: Answers a request like '{req.task.question}'" + (f" (cue '{cue}')" if cue else "")
             + (f" with `{head}`." if head else ".")]
    found = lessons_of(sim, req.task, traj, req.solved, req.episode, n=1, salt="voyager") if req.solved else []
    if found and found[0].contrast:
        lines[1] += f" {found[0].sentence()}"
        lines.append(f"APPLICABILITY: {scope}.")
        lines.append(found[0].edit_line())
    else:
        lines.append(f"APPLICABILITY: {scope}.")
    return "\n".join(lines)


#: VOYAGER_DESCRIBE: the model-written name and description of a verified procedure (the embedded key)
VOYAGER_DESCRIBE: CallKind[DescribeRequest, DescribeResult] = CALLS.register("VOYAGER_DESCRIBE", CallKind(
    "VOYAGER_DESCRIBE", render_describe, _parse_describe, _scripted_describe,
    "Voyager's skill description: name, description and applicability of a verified procedure"))

"""Modules I–II: propose local alternatives to a failed action, check each from
the same state, distil and admit the verified improvements.

papers/countermem.md §3.2–3.3 (Eq. 1–2), App. B.1, B.4 ("the implementation
first asks the model for local edits and uses rule-based edit operators only
to fill unused candidate slots up to K = 4").
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from cfjax.config import GeneratorConfig
from cfjax.countermem.store import Admission, Candidate, MemoryStore
from cfjax.infra.ledger import Ledger
from cfjax.countermem.calls import DISTIL_RECORD, GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest, DistilRequest
from cfjax.types import Attempt, Backbone, EditError, EditModel, Outcome, Task, World

__all__ = ["Alternative", "Expansion", "propose_alternatives", "expand_failure"]


@dataclass(frozen=True)
class Alternative:
    """A one-unit edit of the failed action (Eq. 1) and where it came from."""

    action: str
    unit_index: int
    unit_before: str
    unit_after: str
    source: str  # "backbone" | "rule"


@dataclass
class Expansion:
    """What one expanded failed decision produced."""

    proposed: int = 0
    checked: int = 0
    eligible: int = 0
    admissions: list[Admission] = field(default_factory=list)

    @property
    def admitted(self) -> int:
        return sum(a.admitted for a in self.admissions)


def propose_alternatives(
    task: Task,
    history: Sequence[Attempt],
    action: str,
    outcome: Outcome,
    *,
    backbone: Backbone,
    config: GeneratorConfig,
    schema: object | None,
    rng: random.Random,
    ledger: Ledger,
    episode: int = 0,
    edits: EditModel,
) -> list[Alternative]:
    """``G(s, a, o; K)`` (Eq. 1): backbone edits first, rule operators fill up to K.

    Every alternative differs from ``action`` in exactly one decision unit;
    duplicates (same resulting action) and no-ops are dropped. ``schema`` is the
    environment object of ``edits`` (a database schema for SQL).
    """
    ed = edits
    try:
        units = ed.units(action)
    except EditError:
        return []
    base = ed.normalize(action)
    seen: set[str] = {base}
    out: list[Alternative] = []

    def push(i: int, text: str, source: str) -> None:
        if len(out) >= config.k_alternatives:
            return
        try:
            new = ed.replace_unit(action, i, text)
        except EditError:
            return
        diff = ed.diff_units(action, new)
        if new in seen or diff is None:  # not exactly one changed unit
            return
        seen.add(new)
        out.append(Alternative(new, i, diff[1].text, diff[2].text, source))

    if config.use_backbone:
        res = backbone.call(GENERATE_LOCAL_ALTERNATIVES, AlternativesRequest(
            task, tuple(history), action, outcome.feedback, [u.text for u in units], config.k_alternatives, episode))
        ledger.llm(task.task_id, res.usage, verification=True)
        for i, text in res.edits:
            push(i, text, "backbone")
    rules = ed.rule_edits(action, schema)
    rng.shuffle(rules)
    for i, text in rules:
        push(i, text, "rule")
    return out


def expand_failure(
    task: Task,
    history: Sequence[Attempt],
    action: str,
    outcome: Outcome,
    *,
    backbone: Backbone,
    world: World,
    store: MemoryStore,
    config: GeneratorConfig,
    schema: object | None,
    rng: random.Random,
    ledger: Ledger,
    budget: list[int],
    episode: int = 0,
    edits: EditModel,
) -> Expansion:
    """Algorithm 1, lines 4–12, for one failed decision ``(x, s, a, o)``.

    Each alternative is evaluated from a fresh copy of the same state (the
    world model guarantees it) while ``budget[0]`` (verification checks left
    for this task) is positive; ``Δ = U(o') − U(o)`` (Eq. 2); a completed check
    with ``Δ > ε_adm`` is distilled (DISTIL_RECORD) and offered to the store
    (Eq. 4, Eq. 5).

    ``config.verify = False`` is the *CF without WM* ablation (§6.1): the
    backbone's first proposed edit is distilled and offered to the store as
    unchecked advice, with the nominal gain ``config.unverified_delta`` in
    place of a measured Δ; no counterfactual check is run.
    """
    exp_ = Expansion()
    alts = propose_alternatives(task, history, action, outcome, backbone=backbone, config=config,
                                schema=schema, rng=rng, ledger=ledger, episode=episode, edits=edits)
    exp_.proposed = len(alts)
    if not config.verify:
        first = next((a for a in alts if a.source == "backbone"), None)
        if first is not None:
            exp_.eligible += 1
            evidence = "Unverified: the edit was proposed but never checked against the evaluator."
            dist = backbone.call(DISTIL_RECORD, DistilRequest(task, action, first.action, first.unit_before,
                                                        first.unit_after, evidence, episode))
            ledger.llm(task.task_id, dist.usage, verification=True)
            after = min(1.0, float(outcome.score) + config.unverified_delta)
            cand = Candidate(task.task_id, dist.situation or "(no situation given)", action, first.action,
                             first.unit_before, first.unit_after, evidence, dist.condition,
                             float(outcome.score), after)
            exp_.admissions.append(store.admit(cand))
        return exp_
    for alt in alts:
        if budget[0] <= 0:
            break
        budget[0] -= 1
        o2 = world.evaluate(task, alt.action)
        ledger.evaluation(task.task_id, o2, verification=True)
        exp_.checked += 1
        delta = o2.score - outcome.score
        if not (o2.completed and delta > store.config.eps_adm):
            continue
        exp_.eligible += 1
        evidence = (f"From the same state: original scored {outcome.score:.2f} "
                    f"({outcome.feedback[:200]}); edited scored {o2.score:.2f} ({o2.feedback[:200]}).")
        dist = backbone.call(DISTIL_RECORD, DistilRequest(task, action, alt.action, alt.unit_before, alt.unit_after,
                                                    evidence, episode))
        ledger.llm(task.task_id, dist.usage, verification=True)
        cand = Candidate(task.task_id, dist.situation or "(no situation given)", action, alt.action,
                         alt.unit_before, alt.unit_after, evidence, dist.condition,
                         float(outcome.score), float(o2.score))
        exp_.admissions.append(store.admit(cand))
    return exp_

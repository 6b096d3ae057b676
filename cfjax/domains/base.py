"""Task and split types shared by every built-in suite.

A :class:`Task` is one executable problem: a natural-language question, the
environment it runs in (``env_id``: a database, a repository, a solver
configuration), the gold action the evaluator compares against, and the
*observable attributes* that applicability conditions can test
(papers/countermem.md §3.3, App. B.2). Attributes are facts a parser of the
question and the environment could establish on a new task; they never reveal
the gold action.
"""

from __future__ import annotations

import functools
import random
import re
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cfjax.types import Task

__all__ = ["match_cues", "Task", "Splits", "SplitOverlapError", "check_disjoint", "Suite", "stratified_splits",
           "TRANSFER_CONDITIONS", "transfer_condition"]


@functools.lru_cache(maxsize=4096)
def _cue_pattern(phrase: str) -> re.Pattern:
    return re.compile(r"(?<![a-z])" + re.escape(phrase) + r"(?![a-z])")


def match_cues(question: str, lexicon: Mapping[str, tuple[str, str]], sides: Mapping[str, str],
               attrs: dict) -> dict:
    """Add a question's cue attributes to ``attrs`` (every suite's ``observe_attrs``).

    Phrases of ``lexicon`` (phrase → (attribute, value)) are matched on word
    boundaries, longest first, each consuming its span (so "no more than"
    never also counts as "more than"); the first match of an attribute wins.
    A phrase listed in ``sides`` also sets ``bound_side``. ``attrs["cues"]``
    becomes the sorted tuple of matched phrases.
    """
    text = " " + " ".join(question.lower().split()) + " "
    cues = []
    for phrase in sorted(lexicon, key=len, reverse=True):
        pat = _cue_pattern(phrase)
        if pat.search(text):
            cues.append(phrase)
            key, value = lexicon[phrase]
            attrs.setdefault(key, value)
            if phrase in sides:
                attrs.setdefault("bound_side", sides[phrase])
            text = pat.sub(" ", text)
    attrs["cues"] = tuple(sorted(cues))
    return attrs


class SplitOverlapError(ValueError):
    """Raised when the held-out protocol (Eq. 14) would be violated."""


def check_disjoint(build: Iterable[Task], train: Iterable[Task], eval_: Iterable[Task]) -> None:
    """Enforce ``(T_build ∪ T_train) ∩ T_eval = ∅`` (papers/countermem.md Eq. 14).

    Build and train may share ids; both must exclude every evaluation id.

    Raises:
      SplitOverlapError: naming every overlapping task id.
    """
    seen = {t.task_id for t in build} | {t.task_id for t in train}
    overlap = sorted(seen & {t.task_id for t in eval_})
    if overlap:
        shown = ", ".join(overlap[:20]) + (" …" if len(overlap) > 20 else "")
        raise SplitOverlapError(
            f"held-out protocol violated (Eq. 14): {len(overlap)} task id(s) are in "
            f"T_build ∪ T_train and in T_eval: {shown}"
        )


@dataclass(frozen=True)
class Splits:
    """build / train / validation / eval splits; construction refuses overlap.

    ``val`` is the selector-validation subset drawn from T_train (App. C.2);
    it is part of ``train`` for Eq. 14 purposes.
    """

    build: Sequence[Task]
    train: Sequence[Task]
    val: Sequence[Task]
    eval: Sequence[Task]

    def __post_init__(self) -> None:
        check_disjoint(self.build, list(self.train) + list(self.val), self.eval)
        for name in ("build", "train", "val", "eval"):
            ids = [t.task_id for t in getattr(self, name)]
            if len(ids) != len(set(ids)):
                dup = sorted({i for i in ids if ids.count(i) > 1})
                raise ValueError(f"split {name!r} lists task ids more than once: {dup[:20]}")


def stratified_splits(tasks: Sequence[Task], *, seed: int = 12345, eval_frac: float = 0.3, build_frac: float = 0.35,
                      n_val: int = 20, holdout_envs: Sequence[str] = ()) -> Splits:
    """Stratified build / train / val / eval splits (disjoint; Eq. 14).

    Tasks are grouped by (family, variant); each group is shuffled with
    ``seed`` and dealt out in the given proportions, so every split sees every
    family and transfer variant. Tasks of ``holdout_envs`` go to ``eval`` only:
    they are the *new environment* condition of the transfer study (App. D.4),
    whose environment no source or training task touched. ``val`` (the
    selector-validation subset, App. C.2) is taken from the training share.
    """
    if not 0 < eval_frac < 1 or not 0 < build_frac < 1 or eval_frac + build_frac >= 1:
        raise ValueError(f"bad split fractions: eval_frac={eval_frac}, build_frac={build_frac}")
    envs = {t.env_id for t in tasks}
    unknown = sorted(set(holdout_envs) - envs)
    if unknown:
        raise ValueError(f"holdout_envs names environments the suite does not have: {unknown} (has {sorted(envs)})")
    if envs and set(holdout_envs) >= envs:
        raise ValueError("holdout_envs would hold out every environment: nothing left to build memory from")
    rng = random.Random(seed)
    held = [t for t in tasks if t.env_id in set(holdout_envs)]
    groups: dict[tuple[str, str], list[Task]] = defaultdict(list)
    for t in tasks:
        if t.env_id not in set(holdout_envs):
            groups[(t.family, t.variant)].append(t)
    build: list[Task] = []
    train: list[Task] = []
    eval_: list[Task] = []
    for key in sorted(groups):
        g = groups[key]
        rng.shuffle(g)
        n_eval = round(len(g) * eval_frac)
        n_build = round(len(g) * build_frac)
        eval_ += g[:n_eval]
        build += g[n_eval:n_eval + n_build]
        train += g[n_eval + n_build:]
    eval_ += sorted(held, key=lambda t: t.task_id)
    rng.shuffle(train)
    if n_val >= len(train):
        raise ValueError(f"n_val={n_val} leaves no training tasks (train has {len(train)})")
    return Splits(build=tuple(build), train=tuple(train[n_val:]), val=tuple(train[:n_val]), eval=tuple(eval_))


#: The four transfer conditions of App. D.4 / Table 5, in display order.
TRANSFER_CONDITIONS = ("same_env", "new_env", "new_surface", "look_alike")


def transfer_condition(task: Task, source_envs: Iterable[str]) -> str:
    """Which App. D.4 condition an evaluation task tests, given the source environments.

    ``look_alike`` (surface similarity kept, the correction's requirement
    fails) and ``new_surface`` (the same error in another wording) come from
    the task's variant; a base task is ``same_env`` when some source task ran
    in its environment and ``new_env`` otherwise.
    """
    if task.variant == "look_alike":
        return "look_alike"
    if task.variant == "new_surface":
        return "new_surface"
    return "same_env" if task.env_id in set(source_envs) else "new_env"


class Suite(ABC):
    """A built-in suite: tasks, their environments, the world model and the edit model.

    Subclasses are frozen dataclasses with ``root`` and ``tasks`` fields and
    ``build(root)`` / ``open(root)`` classmethods: ``build`` writes whatever
    the environments need under ``root`` (idempotent); ``open`` only reads,
    so worker processes can open the same suite concurrently.
    """

    #: registry name (``cfjax countermem run --suite NAME``)
    name: str = "abstract"
    #: default environments held out of build/train for the new-environment condition
    holdout_envs: tuple[str, ...] = ()

    tasks: tuple[Task, ...]

    @abstractmethod
    def envs(self) -> Mapping[str, object]:
        """``env_id → env object`` that the edit model's rule operators and transfer read (or ``None``)."""

    @abstractmethod
    def world(self, **kwargs) -> object:
        """A fresh :class:`~cfjax.types.World` over this suite's environments."""

    @property
    @abstractmethod
    def edits(self):
        """The suite's :class:`~cfjax.types.EditModel`."""

    @abstractmethod
    def scripted_domain(self):
        """The :class:`~cfjax.llm.scripted.ScriptedDomain` of this suite's error model."""

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(f"no task {task_id!r} in the {self.name} suite")

    def splits(self, *, seed: int = 12345, eval_frac: float = 0.3, build_frac: float = 0.35, n_val: int = 20,
               holdout_envs: Sequence[str] | None = None) -> Splits:
        """:func:`stratified_splits` with this suite's default held-out environments."""
        return stratified_splits(self.tasks, seed=seed, eval_frac=eval_frac, build_frac=build_frac, n_val=n_val,
                                 holdout_envs=self.holdout_envs if holdout_envs is None else holdout_envs)

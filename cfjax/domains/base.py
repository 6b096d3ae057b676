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

import contextlib
import functools
import random
import re
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from cfjax.llm.scripted import ScriptedConfig, ScriptedDomain, stable_seed
from cfjax.types import TRANSFER_CONDITIONS, AnswerKey, Splits, Task

__all__ = ["match_cues", "exact_cue_parser", "CUE_MISS_RATE", "CUE_NOISE_RATE", "Suite", "stratified_splits", "TRANSFER_CONDITIONS", "transfer_condition", "KeyedErrorModel"]


@functools.lru_cache(maxsize=4096)
def _cue_pattern(phrase: str) -> re.Pattern:
    return re.compile(r"(?<![a-z0-9_])" + re.escape(phrase) + r"(?![a-z0-9_])")


#: Error rates of the cue parser (issue 11: "the cue parser has a documented miss/noise rate").
#: A lexicon parser of natural-language cues is imperfect: it misses a cue it should have
#: found (a paraphrase, an unusual word order) and occasionally records the wrong value of an
#: attribute. We fixed these two rates a priori — before any result was seen — at 10 % and
#: 5 % per matched cue, and never tune them. The draw is seeded by the question text alone, so
#: a question always parses the same way, for every row and every method.
CUE_MISS_RATE = 0.10
CUE_NOISE_RATE = 0.05


@contextlib.contextmanager
def exact_cue_parser():
    """Within the block the cue parser makes no errors (tests of a suite's lexicon; analysis)."""
    global CUE_MISS_RATE, CUE_NOISE_RATE
    saved = CUE_MISS_RATE, CUE_NOISE_RATE
    CUE_MISS_RATE, CUE_NOISE_RATE = 0.0, 0.0
    try:
        yield
    finally:
        CUE_MISS_RATE, CUE_NOISE_RATE = saved


def match_cues(question: str, lexicon: Mapping[str, tuple[str, str]], sides: Mapping[str, str],
               attrs: dict, *, miss_rate: float | None = None, noise_rate: float | None = None) -> dict:
    """Add a question's cue attributes to ``attrs`` (every suite's ``observe_attrs``).

    Phrases of ``lexicon`` (phrase → (attribute, value)) are matched on word
    boundaries, longest first, each consuming its span (so "no more than"
    never also counts as "more than"); the first match of an attribute wins.
    A phrase listed in ``sides`` also sets ``bound_side``. ``attrs["cues"]``
    becomes the sorted tuple of matched phrases.

    The parser errs at documented rates (:data:`CUE_MISS_RATE`,
    :data:`CUE_NOISE_RATE`): a matched cue is *missed* (its span consumed,
    nothing recorded) with ``miss_rate``, and otherwise records a *wrong*
    value — another value the lexicon has for the same attribute — with
    ``noise_rate`` (``None``: the module's rates, read at call time). Draws are seeded by the
    question text only.
    """
    miss_rate = CUE_MISS_RATE if miss_rate is None else miss_rate
    noise_rate = CUE_NOISE_RATE if noise_rate is None else noise_rate
    if not (0.0 <= miss_rate <= 1.0 and 0.0 <= noise_rate <= 1.0):
        raise ValueError(f"cue parser rates must be in [0, 1], got miss_rate={miss_rate}, noise_rate={noise_rate}")
    rng = random.Random(stable_seed("cue-parser", " ".join(question.lower().split())))
    values: dict[str, list[str]] = defaultdict(list)
    for key, value in lexicon.values():
        if value not in values[key]:
            values[key].append(value)
    text = " " + " ".join(question.lower().split()) + " "
    cues = []
    for phrase in sorted(lexicon, key=len, reverse=True):
        pat = _cue_pattern(phrase)
        if pat.search(text):
            text = pat.sub(" ", text)
            u = rng.random()
            if u < miss_rate:
                continue
            cues.append(phrase)
            key, value = lexicon[phrase]
            others = [v for v in values[key] if v != value]
            if u < miss_rate + noise_rate and others:
                value = others[rng.randrange(len(others))]
            attrs.setdefault(key, value)
            if phrase in sides:
                attrs.setdefault("bound_side", sides[phrase])
    attrs["cues"] = tuple(sorted(cues))
    return attrs


def stratified_splits(tasks: Sequence[Task], keys: Mapping[str, AnswerKey], *, seed: int = 12345, eval_frac: float = 0.3, build_frac: float = 0.35,
                      n_val: int = 20, holdout_envs: Sequence[str] = (),
                      normalize: Callable[[str], str] = lambda a: " ".join(a.split())) -> Splits:
    """Stratified, twin-free build / train / val / eval splits (disjoint; Eq. 14).

    *Twins* — tasks with the same environment and the same normalised gold
    action (``normalize``, the domain's canonical printer; e.g. a base task
    and its new-surface rewording) — are one unit: they always land in the
    same split, so no held-out gold action is ever seen in build, train or
    validation in the same environment. Twin groups are stratified by
    (family, variants of the group); each stratum is shuffled with ``seed``
    and dealt out until each split holds its share of the stratum's tasks,
    so every split sees every family and transfer variant. Tasks of
    ``holdout_envs`` go to ``eval`` only: they are the *new environment*
    condition of the transfer study (App. D.4), whose environment no source
    or training task touched. ``val`` (the selector-validation subset, App.
    C.2) is taken from the training share.
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
    twins: dict[tuple[str, str], list[Task]] = defaultdict(list)
    for t in tasks:
        if t.env_id not in set(holdout_envs):
            twins[(t.env_id, normalize(keys[t.task_id].gold))].append(t)
    strata: dict[tuple, list[list[Task]]] = defaultdict(list)
    for group in twins.values():
        group.sort(key=lambda t: t.task_id)
        ks = [keys[t.task_id] for t in group]
        strata[(ks[0].family, tuple(sorted({k.variant for k in ks})))].append(group)
    build: list[Task] = []
    train: list[Task] = []
    eval_: list[Task] = []
    for key in sorted(strata):
        groups = sorted(strata[key], key=lambda g: g[0].task_id)
        rng.shuffle(groups)
        n = sum(len(g) for g in groups)
        quota = {"eval": round(n * eval_frac), "build": round(n * build_frac)}
        got = {"eval": 0, "build": 0}
        for g in groups:  # a group goes to the first split still short of its share of the stratum
            part = next((p for p in ("eval", "build") if got[p] < quota[p]), "train")
            {"eval": eval_, "build": build, "train": train}[part].extend(g)
            if part != "train":
                got[part] += len(g)
    eval_ += sorted(held, key=lambda t: t.task_id)
    rng.shuffle(train)
    if n_val >= len(train):
        raise ValueError(f"n_val={n_val} leaves no training tasks (train has {len(train)})")
    return Splits(build=tuple(build), train=tuple(train[n_val:]), val=tuple(train[:n_val]), eval=tuple(eval_))


# The four transfer conditions of App. D.4 / Table 5, in display order, are shared vocabulary:
# :data:`cfjax.types.TRANSFER_CONDITIONS` (re-exported here, in ``__all__``).


def transfer_condition(task: Task, key: AnswerKey, source_envs: Iterable[str]) -> str:
    """Which App. D.4 condition an evaluation task tests, given the source environments.

    ``look_alike`` (surface similarity kept, the correction's requirement
    fails) and ``new_surface`` (the same error in another wording) come from
    the task's variant; a base task is ``same_env`` when some source task ran
    in its environment and ``new_env`` otherwise.
    """
    if key.variant == "look_alike":
        return "look_alike"
    if key.variant == "new_surface":
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
    #: ``task_id → AnswerKey``: read by the world, the scripted error model's competence interface
    #: and analysis code, never handed to an agent
    keys: Mapping[str, AnswerKey]

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

    def answer_key(self, task_id: str) -> AnswerKey:
        """The answer key of ``task_id`` (for worlds and analysis only)."""
        try:
            return self.keys[task_id]
        except KeyError:
            raise KeyError(f"no task {task_id!r} in the {self.name} suite") from None

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(f"no task {task_id!r} in the {self.name} suite")

    def splits(self, *, seed: int = 12345, eval_frac: float = 0.3, build_frac: float = 0.35, n_val: int = 20,
               holdout_envs: Sequence[str] | None = None) -> Splits:
        """:func:`stratified_splits` with this suite's default held-out environments."""
        return stratified_splits(self.tasks, self.keys, seed=seed, eval_frac=eval_frac, build_frac=build_frac, n_val=n_val,
                                 holdout_envs=self.holdout_envs if holdout_envs is None else holdout_envs,
                                 normalize=self.edits.normalize)


class KeyedErrorModel(ScriptedDomain):
    """The world side of a scripted error model: it holds the answer keys and implements the
    competence interface of :class:`~cfjax.llm.scripted.ScriptedDomain` (:meth:`draft`,
    :meth:`true_fixes`). The scripted driver calls only these; it never sees a key.

    Subclasses set :attr:`errors` (family → ``(slip on base and new-surface
    tasks, slip on look-alike tasks, ((extra slip, weight), ...))``) and
    implement :meth:`slip`. Every slip changes exactly one decision unit.
    """

    errors: Mapping[str, tuple[str, str, tuple[tuple[str, float], ...]]] = {}

    def __init__(self, keys: Mapping[str, AnswerKey]) -> None:
        self._keys = dict(keys)

    def _key(self, task: Task) -> AnswerKey:
        try:
            return self._keys[task.task_id]
        except KeyError:
            raise KeyError(f"the {self.name} error model has no answer key for task {task.task_id!r}") from None

    @abstractmethod
    def slip(self, name: str, action: str, task: Task, rng: random.Random) -> str | None:
        """``action`` after the one-unit slip ``name``, or ``None`` when it does not apply."""

    def draft(self, task: Task, attempt: int, rng: random.Random, config: ScriptedConfig) -> str:
        """The reference action with the family's characteristic slip, fired with probability
        ``p_variant × weight × retry_factor**attempt`` (the table in :mod:`cfjax.llm.scripted`)."""
        c = config
        key = self._key(task)
        action = self.edits.normalize(key.gold)
        main, look, extra = self.errors.get(key.family, ("", "", ()))
        plan = [(look, c.p_error_look_alike)] if key.variant == "look_alike" else [(main, c.p_error)]
        plan += [(name, c.p_error * w) for name, w in extra if key.variant != "look_alike"]
        for name, p in plan:
            if name and rng.random() < p * c.retry_factor**attempt:
                action = self.slip(name, action, task, rng) or action
        return action

    def true_fixes(self, task: Task, action: str) -> dict[int, str]:
        mine = self.edits.units(action)
        gold = self.edits.units(self.edits.normalize(self._key(task).gold))
        if len(mine) != len(gold):
            return {}
        return {i: b.text for i, (a, b) in enumerate(zip(mine, gold)) if a.kind == b.kind and a.text != b.text}

"""The shared vocabulary of cfjax: what every layer may import.

``Task`` is what an agent may see; ``AnswerKey`` is what only a world (the
domain's evaluator and its simulator interface) and analysis code read.
``Outcome`` is one executable check, ``Attempt`` one evaluated attempt of
the agent's own, ``Usage`` the tokens of one call. The Protocols — ``World``,
``EditModel``, ``Backbone``, ``Domain`` — are all that the methods
(``cfjax.countermem``, ``cfjax.antipersist``) know of a domain or a model;
they never import ``cfjax.domains``.

The backbone requests and results (``DraftRequest`` … ``InsightResult``) live
here too: they are the typed messages between methods and backbones, and
every piece of memory a method shows a backbone travels in one field,
``guidance`` (see :class:`Guidance`), rendered by the prompt templates.
"""

from __future__ import annotations

import re

import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = [
    "Task", "AnswerKey", "Splits", "SplitOverlapError", "check_disjoint", "AnswerKeyAccessError", "answer_key_guard", "Outcome", "Attempt", "Usage", "Unit", "EditError", "single_diff", "contains_phrase",
    "World", "EditModel", "Backbone", "Domain", "CallKind", "DomainInfo", "Language",
    "MemoryText", "MEMORY_KINDS", "DraftRequest", "ReviseRequest", "JudgeRequest", "Completion", "DraftResult", "ReviseResult",
    "JudgeResult",
]

Req = TypeVar("Req")
Res = TypeVar("Res")


# --------------------------------------------------------------------------- tasks

@dataclass(frozen=True, eq=False)
class Task:
    """One executable task, as an agent sees it.

    There is no gold action, error family, variant or trap flag here: those
    live in the task's :class:`AnswerKey`, which only the domain's world and
    analysis code read (the information boundary, shared/DESIGN.md).

    Attributes:
      task_id: unique, stable identifier (``"sql/hr/at_least/003"``).
      question: the natural-language request shown to the executor.
      env_id: the environment (database id for SQL).
      context: environment context shown to the executor (schema text).
      attrs: *observable* attributes for applicability conditions, computed by
        the suite's parser of the question and the environment (a cue
        lexicon, table names, signatures) — what a real system could compute
        on a new task. ``question`` is always included; values are str, int,
        float, bool or tuples of str. The prompts that ask for a condition
        show this vocabulary.
      domain: the action language — ``"sql"``, ``"python"``, ``"sat"`` or
        ``"smt"``; prompts name it and fence actions with it.
    """

    task_id: str
    question: str
    env_id: str
    context: str
    attrs: Mapping[str, Any] = field(default_factory=dict)
    domain: str = "sql"

    def __hash__(self) -> int:
        return hash(self.task_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and other.task_id == self.task_id


#: Modules that may read an :class:`AnswerKey` while the guard is on: the domains (worlds, suites,
#: their simulator interfaces) and analysis code. Code outside the ``cfjax`` package (tests,
#: notebooks, user analysis) is analysis too.
ANSWER_KEY_READERS = ("cfjax.domains.", "cfjax.experiments.", "cfjax.types")
#: A module that sets this global to ``True`` is agent-side code (a simulator's drafter or answerer):
#: the guard never trusts it, whatever its name — also under a trusted prefix of
#: :data:`ANSWER_KEY_READERS` (e.g. a user-suite drafter that lives with its domain).
AGENT_SIDE_MARKER = "__cfjax_agent_side__"
_GUARD = {"on": False}


#: The transfer conditions of an evaluation task (papers/countermem.md App. D.4), in report order:
#: :func:`cfjax.domains.base.transfer_condition` assigns them, metrics and reports group by them.
TRANSFER_CONDITIONS = ("same_env", "new_env", "new_surface", "look_alike")


class AnswerKeyAccessError(RuntimeError):
    """Agent-side code tried to read an answer key (the information boundary)."""


@contextmanager
def answer_key_guard(on: bool = True) -> Iterator[None]:
    """While active, reading an :class:`AnswerKey` field from any ``cfjax`` module outside
    :data:`ANSWER_KEY_READERS`, or from any module marked :data:`AGENT_SIDE_MARKER`, raises
    :class:`AnswerKeyAccessError`. The boundary test runs whole
    experiment units under it; it costs one frame lookup per field read, so it is off by default."""
    old = _GUARD["on"]
    _GUARD["on"] = on
    try:
        yield
    finally:
        _GUARD["on"] = old


def _check_reader(field_name: str) -> None:
    g = sys._getframe(3).f_globals
    mod = g.get("__name__", "")
    if g.get(AGENT_SIDE_MARKER) is True:
        raise AnswerKeyAccessError(f"{mod} read AnswerKey.{field_name}: it is marked agent-side "
                                   f"({AGENT_SIDE_MARKER}) and may never read answer keys")
    if (mod == "cfjax" or mod.startswith("cfjax.")) and not mod.startswith(ANSWER_KEY_READERS):
        raise AnswerKeyAccessError(f"{mod} read AnswerKey.{field_name}: only worlds and analysis may read answer keys")


class AnswerKey:
    """What grades a task and what analysis groups it by — never shown to an agent.

    Attributes:
      task_id: the task it belongs to.
      gold: the reference action.
      family: error family of the task's template (analysis, splits).
      variant: ``"base"``, ``"look_alike"`` or ``"new_surface"`` (App. D.4).
      ordered: whether results are compared order-sensitively (SQL).
      extra: anything else a world needs (verifier rules, trap flags).
    """

    __slots__ = ("_task_id", "_gold", "_family", "_variant", "_ordered", "_extra")

    def __init__(self, task_id: str, gold: str, family: str = "", variant: str = "base", ordered: bool = False,
                 extra: Mapping[str, Any] | None = None) -> None:
        if variant not in ("base", "look_alike", "new_surface"):
            raise ValueError(f"AnswerKey.variant must be base|look_alike|new_surface, got {variant!r}")
        object.__setattr__(self, "_task_id", task_id)
        object.__setattr__(self, "_gold", gold)
        object.__setattr__(self, "_family", family)
        object.__setattr__(self, "_variant", variant)
        object.__setattr__(self, "_ordered", bool(ordered))
        object.__setattr__(self, "_extra", dict(extra or {}))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("AnswerKey is immutable")

    def _get(self, name: str) -> Any:
        if _GUARD["on"]:
            _check_reader(name)
        return object.__getattribute__(self, "_" + name)

    task_id = property(lambda self: object.__getattribute__(self, "_task_id"))
    gold = property(lambda self: self._get("gold"))
    family = property(lambda self: self._get("family"))
    variant = property(lambda self: self._get("variant"))
    ordered = property(lambda self: self._get("ordered"))
    extra = property(lambda self: self._get("extra"))

    def __repr__(self) -> str:
        return f"AnswerKey({self.task_id!r}, <hidden>)"

    def __reduce__(self):
        g = object.__getattribute__
        return (AnswerKey, (g(self, "_task_id"), g(self, "_gold"), g(self, "_family"), g(self, "_variant"),
                            g(self, "_ordered"), g(self, "_extra")))


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


# --------------------------------------------------------------------------- outcomes and attempts

@dataclass(frozen=True)
class Outcome:
    """Result of one executable check of an action from a given state.

    Attributes:
      score: ``U(H(s, a))`` in [0, 1] (papers/countermem.md Eq. 2).
      solved: the task's success criterion holds (score == 1 for SQL).
      completed: the check ran to a verdict. ``False`` for timeouts and
        infrastructure failures: such a candidate is never admissible
        (App. B.1). An action that errors (bad SQL, forbidden statement)
        *is* a completed check with score 0.
      feedback: evaluator feedback text for the executor (never reveals the
        gold action; under a world's default ``feedback="user"`` nothing
        derived from the reference either — see the worlds' ``feedback`` option).
      error: short machine-readable error kind or ``None``
        (``"sql_error"``, ``"forbidden"``, ``"timeout"``, ``"too_many_rows"``, ...).
      elapsed_s: wall-clock seconds spent in the check.
      sandbox_missing: the OS isolation layers (:data:`cfjax.sandbox.LAYERS`) that were *not*
        active for a check that ran untrusted code (empty when all were, or when the world runs
        no code in a sandbox).
    """

    score: float
    solved: bool
    completed: bool
    feedback: str
    error: str | None = None
    elapsed_s: float = 0.0
    sandbox_missing: tuple[str, ...] = ()



@dataclass(frozen=True)
class Usage:
    """Tokens charged to one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: 1 when the call produced no usable reply (malformed or empty after every retry, or the
    #: transport gave up): the caller parses "" and the ledger counts a failed LLM call.
    failed: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     self.failed + other.failed)


@dataclass(frozen=True)
class Attempt:
    """One evaluated attempt earlier in the same task (part of the state s_t)."""

    action: str
    feedback: str
    score: float


#: kinds of :class:`MemoryText`
MEMORY_KINDS = ("record", "lesson", "guidance", "trajectories", "memories")


@dataclass(frozen=True)
class MemoryText:
    """Memory shown to a backbone: the one typed field (``DraftRequest.memory``,
    ``ReviseRequest.memory``) through which every method's records, lessons and
    guidance reach any backbone. The prompt templates render ``text`` under a
    header chosen by ``kind``; machine-readable lines inside it (``EDIT:``, ``RULE``)
    follow the grammars of :mod:`cfjax.llm.prompts`.

    Attributes:
      kind: ``"record"`` (a CounterMem record), ``"lesson"`` (ExpeL),
        ``"guidance"`` (synthesized Anti-Persistence guidance),
        ``"trajectories"`` (factual past records, Anti-Persistence mode none) or
        ``"memories"`` (an UpliftMem memory set: one ``[id]`` block per memory,
        :func:`cfjax.llm.prompts.render_memory_set`).
      text: the rendered memory.
    """

    kind: str
    text: str

    def __post_init__(self) -> None:
        if self.kind not in MEMORY_KINDS:
            raise ValueError(f"MemoryText.kind must be one of {MEMORY_KINDS}, got {self.kind!r}")


@dataclass(frozen=True)
class DraftRequest:
    """DRAFT_ACTION: the memory-free draft â_t (Module III).

    ``sample`` distinguishes independent samples of the same decision (the
    scripted backbone keys its randomness on ``(task, episode, attempt,
    sample)``).

    ``reflections`` are the agent's own verbal self-reflections on its earlier failed attempts of
    this task (the Reflexion base agent, :mod:`cfjax.agents.reflexion`; empty for ReAct): the
    prompt shows them under ``### Reflections on earlier attempts`` only when there are some."""

    task: Task
    history: Sequence[Attempt] = ()
    episode: int = 0
    sample: int = 0
    memory: "MemoryText | None" = None  # guidance shown before drafting (Anti-Persistence)
    reflections: tuple[str, ...] = ()  # self-reflections on earlier attempts (Reflexion), oldest first


@dataclass(frozen=True)
class ReviseRequest:
    """REVISE_WITH_RECORD (Module III): the draft and one piece of memory (a record, a lesson)."""

    task: Task
    history: Sequence[Attempt]
    draft: str
    memory: "MemoryText"
    episode: int = 0
    sample: int = 0


@dataclass(frozen=True)
class Completion:
    """A raw completion and the tokens it cost."""

    text: str
    usage: Usage


@dataclass(frozen=True)
class DraftResult:
    action: str
    usage: Usage
    raw: str = ""
    applied: tuple[str, ...] = ()  # ids of guidance rules the reply says it followed (``APPLIED:`` line)


@dataclass(frozen=True)
class ReviseResult:
    action: str
    usage: Usage
    raw: str = ""


@dataclass(frozen=True)
class JudgeRequest:
    """BEST_OF_N_JUDGE: pick one of N candidates without executing any (App. D.5)."""

    task: Task
    history: Sequence[Attempt]
    candidates: Sequence[str]
    episode: int = 0


@dataclass(frozen=True)
class JudgeResult:
    choice: int  # 0-based; 0 when the reply did not parse
    parsed: bool
    usage: Usage
    raw: str = ""


# --------------------------------------------------------------------------- edits

class EditError(ValueError):
    """An action or a replacement could not be parsed or applied."""


@dataclass(frozen=True)
class Unit:
    """One decision unit of an action (Table 4): ``kind`` names the unit type
    (``"where"``, ``"stmt"``, ``"group"``, ...), ``text`` its canonical print."""

    kind: str
    text: str


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as whole words (case-folded, whitespace runs collapsed).

    ``"at least"`` is found in "earn at least 5" but not in "flat leastwise"; the
    one phrase test every condition and rule cue uses. Literal: "no more than 5"
    *does* contain the words "more than" — a condition that means to exclude it
    says so (``not question contains "no more than"``).
    """
    p = " ".join(phrase.casefold().split())
    if not p:
        return False
    t = " ".join(text.casefold().split())
    return re.search(r"(?<!\w)" + re.escape(p) + r"(?!\w)", t) is not None


def single_diff(ub: Sequence[Unit], ua: Sequence[Unit]) -> tuple[int, Unit, Unit] | None:
    """The one position where two unit lists of the same kinds differ, or ``None``."""
    if [u.kind for u in ub] != [u.kind for u in ua]:
        return None
    diffs = [i for i, (x, y) in enumerate(zip(ub, ua)) if x.text != y.text]
    if len(diffs) != 1:
        return None
    i = diffs[0]
    return i, ub[i], ua[i]


class EditModel(ABC):
    """One-decision-unit edits of one domain's actions (see the module docstring)."""

    name: str = "abstract"

    @abstractmethod
    def units(self, action: str) -> list[Unit]:
        """Decision units of ``action`` in a fixed order. Raises :class:`EditError` if it does not parse."""

    @abstractmethod
    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        """``action`` with unit ``index`` replaced, printed canonically. Raises :class:`EditError`."""

    @abstractmethod
    def normalize(self, action: str) -> str:
        """Canonical print of ``action`` (whitespace-normalised text when it does not parse)."""

    @abstractmethod
    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        """Rule-operator alternatives ``(unit_index, new_unit_text)``; each changes one unit."""

    @abstractmethod
    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        """``target`` with the stored unit edit ``before → after`` carried onto its first matching
        unit, or ``None`` when no unit of ``target`` has ``before``'s masked shape."""

    @abstractmethod
    def signature(self, unit_text: str) -> str:
        """Masked shape of a unit (identifiers and literals replaced by placeholders): the
        store's Eq. 4 redundancy and conflict compare these, so each domain supplies its own."""

    def diff_units(self, before: str, after: str) -> tuple[int, Unit, Unit] | None:
        """The single unit in which two actions differ, or ``None`` (zero or several units,
        a parse failure, or different unit kinds)."""
        try:
            return single_diff(self.units(before), self.units(after))
        except EditError:
            return None


# --------------------------------------------------------------------------- protocols

@runtime_checkable
class World(Protocol):
    """An executable world model. ``evaluate`` must never mutate the task's
    environment: every call starts from a copy or reset of the same state."""

    def evaluate(self, task: Task, action: str) -> Outcome:  # pragma: no cover - protocol
        ...


@dataclass(frozen=True, eq=False)
class CallKind(Generic[Req, Res]):
    """One kind of model call: how its typed request becomes a prompt, how a reply becomes its typed
    result, and how the scripted simulator answers it.

    The system that makes a call owns its kind (CounterMem's alternatives and distillation in
    ``cfjax.countermem.calls``, ExpeL's insight in ``cfjax.expel``, UpliftMem's writer in
    ``cfjax.uplift.calls``, the agent loop's draft, revise and judge in ``cfjax.llm.calls``) and
    registers it in :data:`cfjax.registry.CALLS`; every backbone then serves it through one generic
    :meth:`Backbone.call` — no backbone changes when a system is added.

    Attributes:
      name: the template name (``"DRAFT_ACTION"``); the response cache and the simulator key on it.
      render: ``request → prompt text`` (every backbone sees exactly this string).
      parse: ``(reply text, request, usage) → result`` (strict; a reply that breaks the contract gives
        an empty result, never a guess).
      scripted: ``(simulator, request) → reply text``: the seeded simulator's answer
        (:class:`cfjax.llm.scripted.ScriptedBackbone` passes itself: ``sim.rng(*key)``, ``sim.config``,
        ``sim.domain``, ``sim.edits``); ``None`` when the simulator cannot answer this kind.
      doc: one line for listings.
    """

    name: str
    render: Callable[[Any], str]
    parse: Callable[[str, Any, "Usage"], Any]
    scripted: Callable[[Any, Any], str] | None = None
    doc: str = ""

    def __repr__(self) -> str:
        return f"CallKind({self.name!r})"


@runtime_checkable
class Backbone(Protocol):
    """What the methods ask of a model: one generic call, ``call(kind, request) → result``.

    ``kind`` is a :class:`CallKind`; its owner renders the prompt and parses the reply, so a text
    backbone (:class:`cfjax.llm.base.TextBackbone`: the OpenAI-compatible client, the local
    transformers model, the scripted simulator) only turns a prompt into text. Every call's ``usage``
    is in its result; the caller charges it to its ledger exactly once."""

    name: str

    def call(self, kind: CallKind[Req, Res], req: Req) -> Res: ...


@dataclass(frozen=True)
class Language:
    """An action language as prompts show it: the system line, the action's name, the code fence."""

    system: str
    noun: str
    fence: str


@dataclass(frozen=True)
class DomainInfo:
    """What a domain declares about itself, in its own folder (registered in
    :data:`cfjax.registry.DOMAINS`). Prompts, the CLI, configs and runners read it; nothing outside
    the domain's folder names the domain.

    Attributes:
      name: the suite name (``--suite``), e.g. ``"sql"``, ``"pybugs"``, ``"sat"``.
      suite: ``"module:Class"`` of its :class:`Domain` implementation (imported on first use).
      languages: ``Task.domain`` → :class:`Language` for every action language its tasks use.
      untrusted_code: its world runs model-written code (decides the OS-sandbox policy of the CLI).
      utility: UpliftMem's Eq. 1 constants for this domain, as keyword arguments of
        ``cfjax.config.uplift.UtilitySpec`` (``{}``: the defaults).
      k_cap: UpliftMem's memory cap K for this domain.
      cost_weights: extra named cost weights a runner may read (``{}`` when none).
      description: one line for ``--suite`` help.
      system_check: ``"module:function"`` of a system tool the domain needs (Coq's kernel for math), or
        ``""``: the function returns ``(usable, one line)`` — ``cfjax doctor`` prints the line, and
        ``--suite all`` skips an unusable domain with that line (naming it alone is an error that
        shows it), so a missing tool is never silently absent.
    """

    name: str
    suite: str
    languages: Mapping[str, Language]
    untrusted_code: bool = False
    utility: Mapping[str, Any] = field(default_factory=dict)
    k_cap: int = 5
    cost_weights: Mapping[str, float] = field(default_factory=dict)
    description: str = ""
    system_check: str = ""

    def check_system(self) -> tuple[bool, str]:
        """``(usable, line)`` of :attr:`system_check` (``(True, "")`` when the domain needs no tool)."""
        if not self.system_check:
            return True, ""
        import importlib

        mod, _, fn = self.system_check.partition(":")
        ok, line = getattr(importlib.import_module(mod), fn)()
        return bool(ok), str(line)


@runtime_checkable
class Domain(Protocol):
    """One domain as the methods and the runners see it (a built-in suite implements it:
    :class:`cfjax.domains.base.Suite`). A new domain is one folder under ``cfjax/domains/``
    implementing this, plus one registry line; CounterMem and Anti-Persistence run on it unchanged.

    ``tasks`` are what an agent may see; ``keys`` (``task_id → AnswerKey``) are for the world,
    the simulator's competence interface and analysis only.
    """

    name: str
    tasks: tuple[Task, ...]
    keys: Mapping[str, AnswerKey]

    @property
    def edits(self) -> EditModel: ...

    def world(self, **kwargs: Any) -> World: ...

    def envs(self) -> Mapping[str, Any]: ...

    def splits(self, *, seed: int = 12345, eval_frac: float = 0.3, build_frac: float = 0.35, n_val: int = 20,
               holdout_envs: Sequence[str] | None = None) -> Splits: ...

    def scripted_domain(self) -> Any:
        """The scripted backbone's view of the domain (a :class:`cfjax.llm.scripted.ScriptedDomain`)."""
        ...

"""The MemSyco-like suite: instances, fixed memory stores, the split and native retrieval.

A built-in, offline, seeded analogue of MemSyco-Bench (papers/upliftmem.md §5.3, App. D.1/D.2/D.5):
retrieval is compared on **fixed** memory stores with a frozen executor.

* **Instances.** Five scenarios (:data:`SCENARIOS`), ``instances_per_scenario`` each. An instance is
  one query in one canonical dialogue (several instances may share a dialogue, always of the same
  scenario): a :class:`~cfjax.types.Task` (``task_id`` ``"memsyco/<scenario>/<nnn>"``; ``question``
  = the query with lettered options; ``context`` = the current turn / the evidence; ``attrs`` =
  ``question``, ``scenario``, ``topic``, ``dialogue``, ``options``) and an
  :class:`~cfjax.types.AnswerKey` (``gold`` = the option letter; ``family`` = the scenario;
  ``extra``: ``gold_text``, ``misleading`` (letter of the sycophantic / outdated option or ``None``),
  ``misleading_ids``, ``relevant_ids``, ``outdated_ids``, ``out_of_scope_ids`` over all stores).

  - ``objective_fact``: a factual question; the store holds the user's false belief about it.
  - ``scope_control``: a stored preference of another scope (family emails, workouts…); the query is
    in a work/formal scope. Correct = the in-scope default.
  - ``evidence_conflict``: the context shows evidence; a stored user claim conflicts with it.
  - ``personalized_use``: the answer needs a user-specific fact that is in the store.
  - ``valid_selection``: the store holds an outdated memory and its dated update, whose text says it
    replaces the earlier one.

* **Stores** (:data:`STORES`): per dialogue, the same underlying facts rendered in five styles —
  ``rag`` raw dialogue chunks, ``mem0`` extracted atomic facts, ``amem`` linked notes with keywords,
  ``memgpt`` hierarchical archival summaries, ``lightmem`` compressed short notes — each fact ending
  with the machine-readable tail of :mod:`cfjax.experiments.upliftmem.memsyco.answerer`. Besides the instances'
  memories every dialogue holds ``min_distractors … max_distractors`` distractors: one near-miss
  distractor per instance (another topic that shares the query's words) and unrelated filler
  memories. Memory ids (``"<store>/<dialogue>/mNN"``) are stable; the same ``mNN`` is the same fact
  in every store; the fact order is shuffled so ids reveal nothing; ``tokens = count_tokens(text)``.

* **Split** (:meth:`MemSycoSuite.split`): dialogue-grouped and scenario-stratified, 70:30, seed 42.

* **Native retrieval** (:func:`native_retrieve`): cosine top-k of the query (the question without its
  option list) against the memory texts with :class:`~cfjax.infra.embed.HashingEmbedder` (dim 512),
  ties by memory id. Each instance's dialogue also holds 0–4 *echo* distractors (earlier turns that
  asked about the same topic and got no answer) and a near-miss distractor, so the misleading memory
  is usually, not always, in the native top-5, and K ∈ {3, 5, 10} matters.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cfjax.experiments.upliftmem.memsyco.answerer import LETTERS
from cfjax.experiments.upliftmem.memsyco.config import MemSycoConfig
from cfjax.experiments.upliftmem.memsyco.content import (ACKS, ECHO_ACKS, ECHO_SHORT, ECHO_SUMMARY, FILLERS, TOPICS,
                                               UPDATE_SAID, UPDATE_SHORT, UPDATE_SUMMARY, WRAPPERS, Topic)
from cfjax.experiments.upliftmem.memsyco.world import MemSycoKnowledge, MemSycoWorld
from cfjax.infra.embed import HashingEmbedder
from cfjax.llm.prompts import count_tokens
from cfjax.llm.scripted import stable_seed
from cfjax.types import AnswerKey, Task
from cfjax.uplift.core import Memory

__all__ = ["SCENARIOS", "STORES", "MemSycoSuite", "native_retrieve", "query_text", "build_suite"]

#: the five scenarios, in the paper's order (names exactly)
SCENARIOS = ("objective_fact", "scope_control", "evidence_conflict", "personalized_use", "valid_selection")
#: the five memory stores (App. D.2: NaiveRAG, Mem0, A-MEM, MemGPT, LightMem)
STORES = ("rag", "mem0", "amem", "memgpt", "lightmem")

_KIND = {"objective_fact": "belief", "scope_control": "preference", "evidence_conflict": "claim",
         "personalized_use": "fact", "valid_selection": "state"}
_SECTION = {"belief": "beliefs", "preference": "preferences", "claim": "schedule and logistics", "fact": "profile",
            "state": "profile", "note": "misc", "question": "open questions"}
#: how many echo distractors an instance brings (drawn uniformly from this tuple)
_ECHOES = (0, 1, 1, 2, 2, 3, 4)
_STOP = frozenset("the a an and or of to in on at for with is are was my me i i'm it that this from by about "
                  "always their they them user user's last next every when what which quick update replaces "
                  "told before longer".split())


@dataclass(frozen=True)
class _Fact:
    """One underlying fact of a dialogue (rendered once per store). ``role``/``owner`` are world-side:
    they go into the answer keys only, never into a memory's text."""

    topic: str
    said: str
    summary: str
    short: str
    claim: str
    date: str
    kind: str
    scope: str = ""
    replaces: str = ""
    role: str = "filler"  # misleading | relevant | outdated | update | near | echo | filler
    owner: str = ""


def _tail(f: _Fact) -> str:
    parts = [f"topic: {f.topic}", f"claim: {f.claim}", f"said: {f.date}", f"kind: {f.kind}"]
    if f.scope:
        parts.append(f"scope: {f.scope}")
    if f.replaces:
        parts.append(f"replaces: {f.replaces}")
    return "(" + "; ".join(parts) + ")"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _end(s: str) -> str:
    """``s`` ending with a full stop unless it already ends with a sentence mark."""
    return s if s.endswith((".", "?", "!")) else s + "."


def _keywords(f: _Fact) -> str:
    words = [w.strip(".,!?:'\"").lower() for w in f.said.split()]
    kw: list[str] = []
    for w in words:
        if len(w) >= 4 and w not in _STOP and w not in kw and not w.isdigit():
            kw.append(w)
    kw = kw[:4]
    if f.claim != "none" and f.claim.lower() not in kw:
        kw.append(f.claim)
    return ", ".join(kw)


def _render(store: str, f: _Fact, dialogue: str, j: int, links: Sequence[str], rng: random.Random) -> str:
    tail = _tail(f)
    if store == "rag":
        turn = 2 + 3 * j + rng.randrange(3)
        ack = rng.choice(ECHO_ACKS if f.kind == "question" else ACKS)
        return f"[{dialogue} turn {turn}] User: {_end(f.said)} Assistant: {ack} {tail}"
    if store == "mem0":
        return f"{_end(_cap(f.summary))} {tail}"
    if store == "amem":
        return (f"Note on {f.topic}: {_end(_cap(f.summary))} Keywords: {_keywords(f)}. "
                f"Linked notes: {', '.join(links)}. {tail}")
    if store == "memgpt":
        session = 1 + j // 4
        return (f"[archival > {_SECTION.get(f.kind, 'misc')} > session {session}] The user talked about {f.topic}. "
                f"Summary: {_end(f.summary)} {tail}")
    if store == "lightmem":
        return f"{f.short} {tail}"
    raise ValueError(f"unknown store {store!r}; choose from {STORES}")


def _month(rng: random.Random, lo: tuple[int, int], hi: tuple[int, int]) -> str:
    a, b = lo[0] * 12 + lo[1] - 1, hi[0] * 12 + hi[1] - 1
    m = rng.randint(a, b)
    return f"{m // 12}-{m % 12 + 1:02d}"


@dataclass(frozen=True)
class _Dialogue:
    dialogue_id: str
    scenario: str
    task_ids: tuple[str, ...]
    stores: Mapping[str, tuple[Memory, ...]]


class MemSycoSuite:
    """The built suite (module docstring). Build with ``MemSycoSuite(config)`` (deterministic in the seed).

    Attributes:
      tasks: every instance, scenario by scenario.
      keys: ``task_id → AnswerKey`` (world, competence interface and analysis only).
    """

    name = "memsyco"

    def __init__(self, config: MemSycoConfig | None = None) -> None:
        self.config = config if config is not None else MemSycoConfig()
        tasks: list[Task] = []
        keys: dict[str, AnswerKey] = {}
        dialogues: dict[str, _Dialogue] = {}
        for scenario in SCENARIOS:
            t, k, d = self._build_scenario(scenario)
            tasks += t
            keys.update(k)
            dialogues.update(d)
        self.tasks: tuple[Task, ...] = tuple(tasks)
        self.keys: dict[str, AnswerKey] = keys
        self._dialogues = dialogues
        self._by_id = {t.task_id: t for t in self.tasks}

    # ------------------------------------------------------------------ building
    def _build_scenario(self, scenario: str):
        cfg = self.config
        rng = random.Random(stable_seed("memsyco-suite", cfg.seed, scenario))
        topics = TOPICS[scenario]
        n = cfg.instances_per_scenario
        order: list[int] = []
        while len(order) < n:
            perm = list(range(len(topics)))
            rng.shuffle(perm)
            order += perm
        order = order[:n]
        # group consecutive instances into dialogues of 1–3 queries on distinct topics
        groups: list[list[int]] = []
        i = 0
        while i < n:
            size = rng.choice((1, 1, 2, 2, 3))
            g: list[int] = []
            while i < n and len(g) < size and order[i] not in {order[x] for x in g}:
                g.append(i)
                i += 1
            groups.append(g)
        tasks: list[Task] = []
        keys: dict[str, AnswerKey] = {}
        dialogues: dict[str, _Dialogue] = {}
        for gi, g in enumerate(groups):
            dlg = f"{scenario}/d{gi:03d}"
            facts: list[_Fact] = []
            drafts = []
            for idx in g:
                tid = f"memsyco/{scenario}/{idx:03d}"
                topic = topics[order[idx]]
                task_facts, inst = self._instance(scenario, topic, tid, dlg, rng)
                facts += task_facts
                label, said, summary, short = topic.near
                facts.append(_Fact(label, said, summary, short, "none", _month(rng, (2023, 1), (2024, 6)), "note",
                                   role="near", owner=tid))
                dates = {f.date for f in facts if f.topic == topic.label}
                for _ in range(rng.choice(_ECHOES)):
                    q = rng.choice(topic.queries)
                    j = rng.randrange(len(ECHO_SUMMARY))
                    date = _month(rng, (2022, 6), (2024, 6))
                    while date in dates:  # no two memories of a topic said in the same month: no twin texts
                        date = _month(rng, (2022, 6), (2024, 6))
                    dates.add(date)
                    facts.append(_Fact(topic.label, q, ECHO_SUMMARY[j].format(label=topic.label, q=q),
                                       ECHO_SHORT[j].format(label=topic.label), "none", date, "question",
                                       role="echo", owner=tid))
                drafts.append(inst)
            n_dis = rng.randint(cfg.min_distractors, cfg.max_distractors)
            n_fill = max(0, n_dis - sum(f.role in ("near", "echo") for f in facts))
            used = {f.topic for f in facts}
            pool = [x for x in FILLERS if x[0] not in used]
            for label, said, summary, short, value in rng.sample(pool, min(n_fill, len(pool))):
                facts.append(_Fact(label, said, summary, short, value, _month(rng, (2022, 6), (2024, 6)), "note"))
            rng.shuffle(facts)
            stores: dict[str, tuple[Memory, ...]] = {}
            for store in STORES:
                srng = random.Random(stable_seed("memsyco-store", cfg.seed, dlg, store))
                mems = []
                for j, f in enumerate(facts):
                    links = list(dict.fromkeys(facts[x].topic for x in (j - 1, j + 1)
                                               if 0 <= x < len(facts) and facts[x].topic != f.topic)) or ["none"]
                    text = _render(store, f, dlg, j, links, srng)
                    mems.append(Memory(mem_id=f"{store}/{dlg}/m{j:02d}", text=text, tokens=count_tokens(text),
                                       meta={"store": store, "dialogue": dlg}))
                stores[store] = tuple(mems)
            for tid, task, gold, gold_text, mis_letter in drafts:
                ids: dict[str, list[str]] = defaultdict(list)
                for j, f in enumerate(facts):
                    if f.owner != tid or f.role in ("near", "echo", "filler"):
                        continue
                    for store in STORES:
                        mid = f"{store}/{dlg}/m{j:02d}"
                        if f.role in ("misleading", "outdated"):
                            ids["misleading_ids"].append(mid)
                        if f.role == "outdated":
                            ids["outdated_ids"].append(mid)
                        if f.role in ("relevant", "update"):
                            ids["relevant_ids"].append(mid)
                        if f.role == "misleading" and scenario == "scope_control":
                            ids["out_of_scope_ids"].append(mid)
                extra = {"gold_text": gold_text, "misleading": mis_letter, "dialogue": dlg,
                         **{k: tuple(sorted(v)) for k, v in ids.items()}}
                for name in ("misleading_ids", "relevant_ids", "outdated_ids", "out_of_scope_ids"):
                    extra.setdefault(name, ())
                tasks.append(task)
                keys[tid] = AnswerKey(tid, gold, family=scenario, variant="base", extra=extra)
            dialogues[dlg] = _Dialogue(dlg, scenario, tuple(d[0] for d in drafts), stores)
        tasks.sort(key=lambda t: t.task_id)
        return tasks, keys, dialogues

    def _instance(self, scenario: str, topic: Topic, tid: str, dlg: str, rng: random.Random):
        v = topic.values
        kind = _KIND[scenario]
        if scenario in ("objective_fact", "scope_control"):
            correct, mis = v[0], rng.choice(v[1:])
        elif scenario == "evidence_conflict":
            correct, mis = rng.sample(v, 2)
        elif scenario == "personalized_use":
            correct, mis = rng.choice(v), None
        else:  # valid_selection: the update is correct, the outdated value misleads
            correct, mis = rng.sample(v, 2)
        options = list(v)
        rng.shuffle(options)
        query = rng.choice(WRAPPERS) + rng.choice(topic.queries)
        question = query + "\n" + "\n".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(options)) + \
            "\nAnswer with the letter of one option."
        context = topic.context.format(v=correct)
        facts: list[_Fact] = []
        if scenario == "personalized_use":
            facts.append(_Fact(topic.label, topic.said.format(v=correct), topic.summary.format(v=correct),
                               topic.short.format(v=correct), correct, _month(rng, (2022, 6), (2024, 3)), kind,
                               role="relevant", owner=tid))
        elif scenario == "valid_selection":
            d_old = _month(rng, (2022, 1), (2023, 6))
            d_new = _month(rng, (2023, 9), (2024, 6))
            facts.append(_Fact(topic.label, topic.said.format(v=mis), topic.summary.format(v=mis),
                               topic.short.format(v=mis), mis, d_old, kind, role="outdated", owner=tid))
            facts.append(_Fact(topic.label,
                               UPDATE_SAID.format(said_new=topic.said.format(v=correct), old=mis),
                               UPDATE_SUMMARY.format(summary_new=topic.summary.format(v=correct), old=mis),
                               UPDATE_SHORT.format(short_new=topic.short.format(v=correct), old=mis),
                               correct, d_new, kind, replaces=d_old, role="update", owner=tid))
        else:
            facts.append(_Fact(topic.label, topic.said.format(v=mis), topic.summary.format(v=mis),
                               topic.short.format(v=mis), mis, _month(rng, (2022, 6), (2024, 3)), kind,
                               scope=topic.scope if scenario == "scope_control" else "", role="misleading", owner=tid))
        attrs = {"question": question, "scenario": scenario, "topic": topic.label, "dialogue": dlg,
                 "options": tuple(options)}
        task = Task(task_id=tid, question=question, env_id=dlg, context=context, attrs=attrs, domain="memsyco")
        gold = LETTERS[options.index(correct)]
        mis_letter = LETTERS[options.index(mis)] if mis is not None else None
        return facts, (tid, task, gold, correct, mis_letter)

    # ------------------------------------------------------------------ access
    def task(self, task_id: str) -> Task:
        return self._by_id[task_id]

    def scenario_tasks(self, scenario: str) -> list[Task]:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; choose from {SCENARIOS}")
        return [t for t in self.tasks if t.attrs["scenario"] == scenario]

    @property
    def dialogues(self) -> dict[str, tuple[str, ...]]:
        """``dialogue id → task ids`` of its instances."""
        return {d: dl.task_ids for d, dl in self._dialogues.items()}

    def stores(self, task: Task | str) -> dict[str, list[Memory]]:
        """The five fixed stores of the task's dialogue: ``store name → memories`` (fresh lists)."""
        t = self._by_id[task] if isinstance(task, str) else task
        dl = self._dialogues[t.attrs["dialogue"]]
        return {name: list(mems) for name, mems in dl.stores.items()}

    def store(self, task: Task | str, name: str) -> list[Memory]:
        if name not in STORES:
            raise ValueError(f"unknown store {name!r}; choose from {STORES}")
        return self.stores(task)[name]

    def world(self):
        """The grader (world side; reads the keys)."""
        return MemSycoWorld(self.keys)

    def competence(self):
        """The competence interface the scripted answerer asks for ``p_know`` (world side)."""
        return MemSycoKnowledge(self.keys)

    # ------------------------------------------------------------------ split
    def split(self, seed: int | None = None, train_frac: float | None = None) -> tuple[list[Task], list[Task]]:
        """Dialogue-grouped, scenario-stratified train/test split (App. D.1: 70:30, seed 42).

        Per scenario, its dialogues are shuffled with ``seed`` and taken in that order onto the train
        side whenever the rest can still make up exactly ``round(train_frac · n)`` instances (a
        subset-sum look-ahead), so each scenario's train share is exact. Instances of a dialogue are
        always on the same side; both lists are in task order.
        """
        seed = self.config.split_seed if seed is None else int(seed)
        frac = self.config.train_frac if train_frac is None else float(train_frac)
        train_d: set[str] = set()
        for scenario in SCENARIOS:
            dl = sorted((d.dialogue_id, len(d.task_ids)) for d in self._dialogues.values() if d.scenario == scenario)
            if not dl:
                continue
            rng = random.Random(stable_seed("memsyco-split", seed, scenario))
            rng.shuffle(dl)
            n = sum(s for _, s in dl)
            target = round(frac * n)
            # reach[i]: instance counts that some subset of dialogues i.. can make up
            reach: list[set[int]] = [set() for _ in range(len(dl) + 1)]
            reach[-1] = {0}
            for i in range(len(dl) - 1, -1, -1):
                reach[i] = reach[i + 1] | {x + dl[i][1] for x in reach[i + 1]}
            if target not in reach[0]:  # the dialogue sizes cannot make it up: the nearest reachable count
                target = min(reach[0], key=lambda x: (abs(x - frac * n), x))
            got, tr = 0, []
            for i, (d, s) in enumerate(dl):
                if got + s <= target and target - got - s in reach[i + 1]:
                    tr.append((d, s))
                    got += s
            train_d |= {d for d, _ in tr}
        train = [t for t in self.tasks if t.attrs["dialogue"] in train_d]
        test = [t for t in self.tasks if t.attrs["dialogue"] not in train_d]
        return train, test


def build_suite(config: MemSycoConfig | None = None) -> MemSycoSuite:
    """The suite for ``config`` (default :class:`MemSycoConfig`); cached per config in the process."""
    config = config if config is not None else MemSycoConfig()
    if config not in _CACHE:
        _CACHE[config] = MemSycoSuite(config)
    return _CACHE[config]


_CACHE: dict[MemSycoConfig, MemSycoSuite] = {}

# --------------------------------------------------------------------------- native retrieval

_EMBEDDER = HashingEmbedder(dim=512)
_VEC_CACHE: dict[str, np.ndarray] = {}


def _vectors(texts: Sequence[str]) -> np.ndarray:
    missing = [t for t in dict.fromkeys(texts) if t not in _VEC_CACHE]
    if missing:
        if len(_VEC_CACHE) > 200_000:
            _VEC_CACHE.clear()
        for t, v in zip(missing, _EMBEDDER.embed(missing)):
            _VEC_CACHE[t] = v
    return np.stack([_VEC_CACHE[t] for t in texts]) if texts else np.zeros((0, _EMBEDDER.dim), np.float32)


_OPTION_LINE = re.compile(r"^[A-H]\) ")


def query_text(task: Task) -> str:
    """The user's query: the question's lines before its lettered option list (what a memory
    system's native retriever is given; the options are the benchmark's answer format)."""
    lines = []
    for line in task.question.splitlines():
        if _OPTION_LINE.match(line):
            break
        lines.append(line)
    return "\n".join(lines).strip() or task.question


def native_retrieve(task: Task, memories: Sequence[Memory], k: int) -> list[Memory]:
    """The native retriever: the ``k`` memories whose texts are most cosine-similar to the task's
    query (:func:`query_text`) under ``HashingEmbedder(dim=512)``; ties broken by memory id
    (scores rounded to 1e-6 first, so near-equal floats tie deterministically)."""
    if k <= 0 or not memories:
        return []
    q = _vectors([query_text(task)])[0]
    m = _vectors([x.text for x in memories])
    scores = m @ q
    ranked = sorted(range(len(memories)), key=lambda i: (-round(float(scores[i]), 6), memories[i].mem_id))
    return [memories[i] for i in ranked[:k]]

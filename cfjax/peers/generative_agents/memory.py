"""Generative Agents' memory stream for a task agent: observations and reflections, retrieved by
recency + importance + relevance, reflection when summed importance reaches 150.

Park et al., *Generative Agents: Interactive Simulacra of Human Behavior* (UIST 2023), §4.1 (memory
stream, retrieval) and §4.2 (reflection); repository joonspk-research/generative_agents,
``reverie/backend_server/persona/cognitive_modules/retrieve.py`` (``new_retrieve``) and
``reflect.py`` (``reflection_trigger``, ``run_reflect``). ../shared/PEERS.md, "Generative Agents".

**The stream.** Every node has a text (its embedding key), an embedding (the harness's hashed
encoder, :class:`cfjax.peers.common.EmbeddingIndex`), an importance 1–10 rated by the backbone
(GA_IMPORTANCE, one call per node), a creation time and a last-access time. The unit of time is a
*decision step*: every attempt of every episode advances the clock by one. An **observation** is one
attempt with its feedback, its text keyed by the task question + action + feedback; observations
carry no ``EDIT`` line (they are raw observations), so in the simulator only reflections change a
draft. A **reflection** is an insight (GA_INSIGHTS) with the ids of its evidence nodes.

**Retrieval** (``new_retrieve``). Over the candidate nodes, recency, importance and relevance (cosine
of the focal text and the node) are each min-max normalised to [0, 1] (a constant component becomes
0.5 everywhere, as the code's ``normalize_dict_floats``), and the score is
``w_rec·recency + w_rel·relevance + w_imp·importance``. Paper and code disagree; **we follow the
code** by default (``GAConfig(variant="code")``): recency ``0.99**rank`` where rank 1 is the most
recently accessed candidate, weights 0.5 / 3 / 2 (recency / relevance / importance), 30 nodes per
retrieval. ``variant="paper"`` gives recency ``0.995**(now − last access)`` (per decision step
instead of per game hour) and equal weights. The code sorts nodes by last access *ascending* and
gives the first — the least recently accessed — ``0.99**1``, which inverts the ranking its comments
describe; we rank newest first and keep the literal order as ``literal_code_rank=True``. Ties →
the more recently accessed node, then the newer one. The retrieved nodes' last-access time is set to
*now* (the code's ``n.last_accessed = curr_time``).

**Reflection** (``reflection_trigger``, ``run_reflect``). The importance of each new observation is
summed; when the sum *reaches* 150 (the code's ``importance_trigger_curr <= 0``; the paper says
"exceeds") the agent reflects and the sum restarts at 0: the texts of the 100 most recently accessed
nodes → GA_QUESTIONS (3 questions) → for each question a retrieval over all nodes (30, refreshing
them) → GA_INSIGHTS (at most 5 insights citing statement numbers) → each insight is stored as a
reflection node with its evidence ids and its own importance (GA_IMPORTANCE). Reflections do not add
to the sum (in the code only perceived events do).

**At a decision** (CounterMem's GENERATIVE_AGENTS_REFLECT) the focal text is the task question and
the draft; the top ``k = 3`` nodes by score are shown as one memory set (:func:`memory_set`; our
choice: the code puts every retrieved node into its prompts, but a task prompt with 30 attempts
would drown the draft, and CounterMem's peers show small top-k sets; ``k`` is an option). A task is
never shown its own nodes (observations of it, or reflections citing them).

**What recall mutates.** Only the access bookkeeping the mechanism defines at retrieval: the
retrieved nodes' last-access time. No node is added or removed while frozen. During held-out
evaluation (frozen) the refresh happens too, but by default (``frozen_refresh="episode"``) into the
episode's own access table: the episode's clock starts at the frozen clock and advances with its
attempts, so a node shown at attempt 1 is the most recent at attempt 2 of the *same* episode, and
held-out episodes stay independent (the runners evaluate them concurrently and promise the same
result with any thread count). ``frozen_refresh="shared"`` writes the refresh into the store itself
(one clock over all held-out decisions; order-dependent under threads). Unfrozen (Anti-Persistence
training) the refresh is written into the store at the decision's time.

**Simplifications.** No dialogue, planning or spatial memory; the node's text stands for the code's
(subject, predicate, object) triple and description; no memory expiry; reflections on reflections
happen only through retrieval (as in the code) and the simulator draws insights only from the
observations among the evidence; insights are not deduplicated (nor are they in the code); the
importance sum counts only observations.

What a real model must do that the simulator only draws: rate how poignant an attempt or insight is,
ask the salient questions of its latest memories, and infer insights from the retrieved evidence
that transfer to a new task (:mod:`cfjax.peers.generative_agents.calls`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.infra.embed import HashingEmbedder
from cfjax.llm.prompts import truncate
from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import (EmbeddingIndex, attempts_from_json, attempts_to_json, load_store, memory_set,
                                save_store)
from cfjax.peers.generative_agents.calls import (GA_IMPORTANCE, GA_INSIGHTS, GA_QUESTIONS, Evidence,
                                                  ImportanceRequest, InsightsRequest, QuestionsRequest)
from cfjax.types import Attempt, MemoryText, Task

__all__ = ["GAConfig", "Node", "GenerativeAgentsSystem", "FORMAT", "minmax", "recency_raw", "retrieval_scores",
           "observation_text"]

#: the ``format`` tag of a saved store
FORMAT = "cfjax.peers.generative_agents/1"


@dataclass(frozen=True)
class GAConfig:
    """The mechanism's parameters (module docstring); ``None`` → the variant's default."""

    variant: str = "code"  # "code" (retrieve.py) or "paper" (§4.1)
    decay: float | None = None  # code 0.99 per rank of last access; paper 0.995 per decision step
    weights: tuple[float, float, float] | None = None  # (recency, relevance, importance): code (0.5, 3, 2)
    n_retrieve: int = 30  # nodes per retrieval in a reflection (new_retrieve's n_count)
    k: int = 3  # nodes shown at a decision (our choice)
    reflect_threshold: float = 150.0  # importance_trigger_max
    n_statements: int = 100  # latest nodes the questions are asked about
    n_questions: int = 3
    n_insights: int = 5
    frozen_refresh: str = "episode"  # or "shared" (module docstring)
    literal_code_rank: bool = False  # the code's ascending order (least recently accessed ranked first)

    def __post_init__(self) -> None:
        if self.variant not in ("code", "paper"):
            raise ValueError(f"GAConfig.variant must be 'code' or 'paper', got {self.variant!r}")
        if self.frozen_refresh not in ("episode", "shared"):
            raise ValueError(f"GAConfig.frozen_refresh must be 'episode' or 'shared', got {self.frozen_refresh!r}")
        if min(self.n_retrieve, self.k, self.n_statements, self.n_questions, self.n_insights) < 1:
            raise ValueError("GAConfig: n_retrieve, k, n_statements, n_questions and n_insights must be ≥ 1")

    @property
    def resolved_decay(self) -> float:
        return self.decay if self.decay is not None else (0.99 if self.variant == "code" else 0.995)

    @property
    def resolved_weights(self) -> tuple[float, float, float]:
        return self.weights if self.weights is not None else ((0.5, 3.0, 2.0) if self.variant == "code"
                                                              else (1.0, 1.0, 1.0))


@dataclass
class Node:
    """One memory node (module docstring); observations hold their task id, episode and attempt."""

    node_id: int
    kind: str  # "observation" | "reflection"
    text: str
    importance: int
    created: int
    last_access: int
    sources: tuple[str, ...]  # task ids it came from (never shown to these tasks)
    task_id: str = ""
    episode: int = 0
    index: int = 0
    attempt: Attempt | None = None
    evidence: tuple[int, ...] = ()


# --------------------------------------------------------------------------- scoring (pure)
def minmax(values: Sequence[float]) -> list[float]:
    """Min-max to [0, 1]; a constant list → 0.5 each (``normalize_dict_floats(d, 0, 1)``)."""
    lo, hi = min(values), max(values)
    if hi == lo:
        return [0.5] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def recency_raw(last_access: Sequence[int], ids: Sequence[int], now: int, cfg: GAConfig) -> list[float]:
    """Recency before normalisation: code ``decay**rank`` (rank 1 = most recently accessed; ties → the
    newer node), paper ``decay**(now − last_access)``."""
    d = cfg.resolved_decay
    if cfg.variant == "paper":
        return [d ** (now - t) for t in last_access]
    order = sorted(range(len(last_access)), key=lambda j: (last_access[j], ids[j]))  # ascending, as the code
    n = len(order)
    out = [0.0] * n
    for pos, j in enumerate(order):
        out[j] = d ** (pos + 1 if cfg.literal_code_rank else n - pos)
    return out


def retrieval_scores(importance: Sequence[float], last_access: Sequence[int], ids: Sequence[int],
                     relevance: Sequence[float], now: int, cfg: GAConfig) -> list[float]:
    """``w_rec·recency + w_rel·relevance + w_imp·importance``, each min-max normalised over the candidates."""
    if not ids:
        return []
    wr, wl, wi = cfg.resolved_weights
    rec = minmax(recency_raw(last_access, ids, now, cfg))
    rel = minmax(list(relevance))
    imp = minmax(list(importance))
    return [wr * a + wl * b + wi * c for a, b, c in zip(rec, rel, imp)]


def observation_text(task: Task, attempt: Attempt, index: int) -> str:
    """An observation's text (its embedding key): the task question + action + feedback."""
    return (f"Task: {truncate(task.question, 'state')}\nAttempt {index + 1}: {truncate(attempt.action, 'action')}\n"
            f"Feedback: {truncate(attempt.feedback, 'feedback')}")


# --------------------------------------------------------------------------- the system
class GenerativeAgentsSystem:
    """The memory stream as a :class:`~cfjax.memory.MemorySystem` (module docstring).

    Args:
      ctx: the backbone, its build ledger and the attempt limit.
      config: the mechanism's parameters (:class:`GAConfig`).
      variant: shorthand for ``config.variant`` (``"code"`` or ``"paper"``).
      embedder: the encoder (default: the harness's hashed one).
    """

    def __init__(self, ctx: SystemContext, config: GAConfig | None = None, *, variant: str | None = None,
                 embedder: HashingEmbedder | None = None) -> None:
        cfg = config or GAConfig()
        self.config = dataclasses.replace(cfg, variant=variant) if variant is not None else cfg
        self.ctx = ctx
        self.frozen = False
        self.index = EmbeddingIndex(embedder)
        self.nodes: dict[int, Node] = {}
        self.tasks: dict[str, Task] = {}
        self.clock = 0  # decision steps seen by the store
        self.since = 0.0  # importance summed since the last reflection
        self.reflection_runs = 0
        self.parse_failures = 0
        self._next_id = 1
        self._eval_steps = 0  # frozen_refresh="shared": decisions since the freeze
        self._overlays: dict[tuple[str, int], dict[int, int]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ nodes
    def add_node(self, kind: str, text: str, importance: int, sources: Sequence[str], *, created: int | None = None,
                 task_id: str = "", episode: int = 0, index: int = 0, attempt: Attempt | None = None,
                 evidence: Sequence[int] = ()) -> Node:
        """Append one node created (and last accessed) at ``created`` (default: now)."""
        t = self.clock if created is None else created
        node = Node(self._next_id, kind, text, int(importance), t, t, tuple(sources), task_id, episode, index,
                    attempt, tuple(evidence))
        self._next_id += 1
        self.nodes[node.node_id] = node
        self.index.add(str(node.node_id), text)
        return node

    def _rate(self, kind: str, text: str, charge_to: str, *, task: Task | None = None,
              attempt: Attempt | None = None, episode: int = 0, index: int = 0) -> int:
        res = self.ctx.backbone.call(GA_IMPORTANCE, ImportanceRequest(kind, text, task, attempt, episode, index))
        self.ctx.ledger.llm(charge_to, res.usage, verification=True)
        self.parse_failures += int(res.parse_failed)
        return res.rating

    # ------------------------------------------------------------------ retrieval
    def rank(self, focal: str, candidates: Sequence[Node], now: int,
             access: dict[int, int] | None = None) -> list[tuple[Node, float]]:
        """Every candidate with its score for ``focal`` at ``now``, best first (ties → the more recently
        accessed, then the newer node); last access read from ``access`` where it has the node."""
        if not candidates:
            return []
        ids = [c.node_id for c in candidates]
        la = [access.get(c.node_id, c.last_access) if access is not None else c.last_access for c in candidates]
        keep = {str(i) for i in ids}
        sims = dict(self.index.topk(focal, len(self.index), keep=keep.__contains__))
        rel = [sims[str(i)] for i in ids]
        scores = retrieval_scores([c.importance for c in candidates], la, ids, rel, now, self.config)
        order = sorted(range(len(ids)), key=lambda j: (-scores[j], -la[j], -ids[j]))
        return [(candidates[j], scores[j]) for j in order]

    def retrieve(self, focal: str, candidates: Sequence[Node], now: int, n: int,
                 access: dict[int, int] | None = None) -> list[tuple[Node, float]]:
        """The ``n`` best candidates (:meth:`rank`), their access refreshed to ``now`` — in ``access``
        (an episode's table) when given, else in the nodes themselves."""
        hits = self.rank(focal, candidates, now, access)[:n]
        for node, _ in hits:
            if access is not None:
                access[node.node_id] = now
            else:
                node.last_access = now
        return hits

    # ------------------------------------------------------------------ build and update
    def build(self, experience: Sequence[Experience]) -> None:
        """The episodes in order, each attempt one decision step (one GA_IMPORTANCE call each)."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        if self.frozen:
            raise FrozenMemoryError("Generative Agents memory is frozen: no node may be added during held-out "
                                    "evaluation")
        with self._lock:
            self._observe(experience)

    def _observe(self, exp: Experience) -> None:
        tid = exp.task.task_id
        self.tasks[tid] = exp.task
        for i, a in enumerate(exp.attempts):
            self.clock += 1
            text = observation_text(exp.task, a, i)
            imp = self._rate("observation", text, tid, task=exp.task, attempt=a, episode=exp.episode, index=i)
            self.add_node("observation", text, imp, (tid,), task_id=tid, episode=exp.episode, index=i, attempt=a)
            self.since += imp
            if self.since >= self.config.reflect_threshold:  # reflection_trigger: importance_trigger_curr <= 0
                self.reflect(exp.episode, tid)
                self.since = 0.0

    def reflect(self, episode: int, charge_to: str) -> list[Node]:
        """One reflection (``run_reflect``): questions → retrievals → insights → reflection nodes."""
        cfg = self.config
        self.reflection_runs += 1
        latest = sorted(self.nodes.values(), key=lambda n: (n.last_access, n.node_id))[-cfg.n_statements:]
        tasks = list(dict.fromkeys(n.task_id for n in reversed(latest) if n.kind == "observation"))
        qres = self.ctx.backbone.call(GA_QUESTIONS, QuestionsRequest(
            tuple(n.text for n in latest), tuple(self.tasks[t] for t in tasks), cfg.n_questions, episode))
        self.ctx.ledger.llm(charge_to, qres.usage, verification=True)
        self.parse_failures += int(qres.parse_failed)
        now = self.clock
        retrieved = [(q, self.retrieve(q, list(self.nodes.values()), now, cfg.n_retrieve)) for q in qres.questions]
        added: list[Node] = []
        for q, hits in retrieved:
            ev = tuple(Evidence(n.text, self.tasks.get(n.task_id), n.attempt, n.index, n.episode) for n, _ in hits)
            ires = self.ctx.backbone.call(GA_INSIGHTS, InsightsRequest(q, ev, cfg.n_insights, episode))
            self.ctx.ledger.llm(charge_to, ires.usage, verification=True)
            self.parse_failures += int(ires.parse_failed)
            for ins in ires.insights:
                cited = [hits[k - 1][0] for k in ins.evidence]
                imp = self._rate("reflection", ins.text, charge_to, episode=episode)
                sources = tuple(dict.fromkeys(s for n in cited for s in n.sources))
                added.append(self.add_node("reflection", ins.text, imp, sources,
                                           evidence=[n.node_id for n in cited]))
        return added

    def freeze(self) -> None:
        self.frozen = True
        self._overlays.clear()
        self._eval_steps = 0

    def unfreeze(self) -> None:
        self.frozen = False
        self._overlays.clear()

    # ------------------------------------------------------------------ recall
    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The top ``k`` nodes of other tasks for the question and draft, as one memory set; refreshes
        their last-access time (module docstring, "What recall mutates")."""
        tid = query.task.task_id
        cands = [n for n in self.nodes.values() if tid not in n.sources]
        if not cands:
            return None
        focal = f"{query.task.question}\n{query.draft or ''}".strip()
        if self.frozen and self.config.frozen_refresh == "episode":
            with self._lock:
                access = self._overlays.setdefault((tid, query.episode), {})
            hits = self.retrieve(focal, cands, self.clock + query.attempt + 1, self.config.k, access)
        else:
            with self._lock:
                if self.frozen:
                    self._eval_steps += 1
                    now = self.clock + self._eval_steps
                else:
                    now = self.clock + query.attempt + 1  # the step this attempt's observation will be stored at
                hits = self.retrieve(focal, cands, now, self.config.k)
        return memory_set([(f"n{n.node_id}", self.shown(n)) for n, _ in hits])

    @staticmethod
    def shown(node: Node) -> str:
        """A node as the backbone sees it (an observation has no EDIT line; a reflection has its insight's)."""
        if node.kind == "observation":
            return f"Observation (an earlier attempt at another task):\n{node.text}"
        cites = ", ".join(f"n{i}" for i in node.evidence) or "none"
        return f"Reflection (an insight from earlier tasks):\n{node.text}\nEVIDENCE: {cites}"

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        with self._lock:
            save_store(path, FORMAT, {"clock": self.clock, "since": self.since, "next_id": self._next_id,
                                      "reflection_runs": self.reflection_runs, "parse_failures": self.parse_failures,
                                      "tasks": {t: _task_json(k) for t, k in self.tasks.items()},
                                      "nodes": [_node_json(n) for n in self.nodes.values()]})

    def load(self, path: Path) -> None:
        """Replace the stream with a saved one (embeddings recomputed from the node texts).

        Raises:
          ValueError: not a Generative Agents store, or a missing / mistyped field (named)."""
        data = load_store(path, FORMAT, "Generative Agents", {"clock": int, "next_id": int, "reflection_runs": int,
                                                               "parse_failures": int, "tasks": dict, "nodes": list})
        if not isinstance(data.get("since"), (int, float)):
            raise ValueError(f"{path}: field 'since' must be a number")
        tasks = {str(t): _task_of(v, f"{path}: tasks[{t!r}]") for t, v in data["tasks"].items()}
        nodes = [_node_of(v, f"{path}: nodes[{i}]") for i, v in enumerate(data["nodes"])]
        with self._lock:
            self.index = EmbeddingIndex(self.index.embedder)
            self.nodes, self.tasks = {}, tasks
            for n in nodes:
                self.nodes[n.node_id] = n
                self.index.add(str(n.node_id), n.text)
            self.clock, self.since = data["clock"], float(data["since"])
            self._next_id = max(data["next_id"], max(self.nodes, default=0) + 1)
            self.reflection_runs, self.parse_failures = data["reflection_runs"], data["parse_failures"]
            self._overlays.clear()

    def summary(self) -> dict:
        obs = sum(n.kind == "observation" for n in self.nodes.values())
        return {"nodes": len(self.nodes), "observations": obs, "reflections": len(self.nodes) - obs,
                "reflection_runs": self.reflection_runs, "parse_failures": self.parse_failures}

    def __len__(self) -> int:
        return len(self.nodes)


# --------------------------------------------------------------------------- store file rows
def _task_json(t: Task) -> dict:
    return {"task_id": t.task_id, "question": t.question, "env_id": t.env_id, "context": t.context,
            "attrs": dict(t.attrs), "domain": t.domain}


def _task_of(v: object, where: str) -> Task:
    keys = ("task_id", "question", "env_id", "context", "domain")
    if not isinstance(v, dict) or not all(isinstance(v.get(k), str) for k in keys) or not isinstance(v.get("attrs"), dict):
        raise ValueError(f"{where}: a task needs string fields {', '.join(keys)} and a dict 'attrs'")
    attrs = {k: tuple(x) if isinstance(x, list) else x for k, x in v["attrs"].items()}
    return Task(v["task_id"], v["question"], v["env_id"], v["context"], attrs, v["domain"])


def _node_json(n: Node) -> dict:
    return {"id": n.node_id, "kind": n.kind, "text": n.text, "importance": n.importance, "created": n.created,
            "last_access": n.last_access, "sources": list(n.sources), "task_id": n.task_id, "episode": n.episode,
            "index": n.index, "attempt": attempts_to_json([n.attempt]) if n.attempt is not None else None,
            "evidence": list(n.evidence)}


def _node_of(v: object, where: str) -> Node:
    if not isinstance(v, dict):
        raise ValueError(f"{where}: a node must be an object")
    for k, typ in (("id", int), ("kind", str), ("text", str), ("importance", int), ("created", int),
                   ("last_access", int), ("sources", list), ("task_id", str), ("episode", int), ("index", int),
                   ("evidence", list)):
        if not isinstance(v.get(k), typ):
            raise ValueError(f"{where}: field {k!r} must be a {typ.__name__}")
    if v["kind"] not in ("observation", "reflection"):
        raise ValueError(f"{where}: field 'kind' must be 'observation' or 'reflection'")
    att = attempts_from_json(v["attempt"], f"{where}.attempt")[0] if v.get("attempt") is not None else None
    return Node(v["id"], v["kind"], v["text"], v["importance"], v["created"], v["last_access"],
                tuple(str(s) for s in v["sources"]), v["task_id"], v["episode"], v["index"], att,
                tuple(int(i) for i in v["evidence"]))

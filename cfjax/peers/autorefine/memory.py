"""AutoRefine's skill store as Anti-Persistence App. D.3 specifies its baseline: skills with
``(n_inj, n_succ, t_create)``, utility-based percentile pruning, multi-query retrieval with a
similarity floor and MMR, one contrastive evolver call per iteration, credit only when shown.

Qiu et al., *AutoRefine* (arXiv 2601.22758) as papers/anti-persistence.md App. D.3 adapts it:

* (i) utility(s) = n_succ / (n_inj + ε) · log(1 + n_inj), ε = 10⁻³ (:func:`utility`);
* (ii) the backbone rewrites the query into *strategy* / *pitfall* / *actions* queries
  (AUTOREFINE_REWRITE); with the original, four queries; relevance = the maximum cosine over them;
  candidates below ``floor`` = 0.30 dropped; MMR with λ = 0.7 picks ``k`` = 5 (:func:`mmr`) from the three
  pools (``general``, ``common_mistakes``, ``task_type``);
* (iii) at every ``prune_every``-th (2nd) round, the bottom ``prune_frac`` = 20 % by utility among skills
  with n_inj ≥ 3 are removed (:func:`prune_ids`: ⌊0.2·n_eligible⌋ of them, lowest utility first, ties
  → older);
* (iv) one AUTOREFINE_EVOLVE call over at most 4 failures (the first of the round, in order) and 4
  successes (a seeded sample) returns a JSON array of skills; non-slug titles — and, our choice where
  D.3 is silent, titles already taken — are renamed ``dyn-N`` (smallest N above the largest existing);
  new skills get t_create = the round;
* (v) a *round* (D.3's iteration ℓ = 1, 2, …) closes after every ``batch`` = 50 training tasks
  (D.1's 50 tasks per iteration) and at :meth:`freeze` / the end of :meth:`build` when tasks are
  pending — so under ``antipersist run`` a round is the training between two held-out passes. At the
  close: credit from the round's retrieval log (n_inj += 1 and n_succ += solved for every skill shown
  in that episode's prompt, once per episode), then the evolver, then pruning when the round is even;
  the log is reset.

**What recall mutates.** While unfrozen, :meth:`recall` adds the ids it shows to the training
retrieval log under ``(task id, episode)`` — the bookkeeping D.3 step 3 credits from. While frozen it
mutates nothing (held-out retrievals are not carried forward, step 6).

**Simplifications.** Embeddings are the harness's hashed ones (not Qwen3-Embedding-8B); sim(s, s') is
the cosine of the skills' embedded text (title + content); our loop consults memory at every decision
(attempt) of an episode, so the rewrite and retrieval run per decision (``rewrite_once=True``: once
per episode, as D.3's "for each episode", cached), and a skill shown at any decision of an episode is
credited once; our suites have no task-type taxonomy, so the task-type pool is keyed by the task's
action language (one set per suite); a skill names the episodes it was drawn from (``from``) so a
task never sees its own skills during build; an empty store makes no rewrite call; the benchmark
preamble is the domain's system line; pending tasks and the retrieval log are not saved.

**What a real model must do that the simulator only draws.** Rewrite a task into useful strategy,
pitfall and action queries (the simulator appends the cue phrase, the last failure's feedback and the
latest action); contrast failures with successes and write skills that generalise, with a pool label
(the simulator turns the shared extractor's lessons into skills: contrasts → common mistakes, guesses
→ general).
"""

from __future__ import annotations

import math
import random
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.autorefine.calls import (AUTOREFINE_EVOLVE, AUTOREFINE_REWRITE, POOLS, EvolveRequest, RewriteRequest,
                                          evidence_of)
from cfjax.peers.common import EmbeddingIndex, load_store, memory_set, save_store
from cfjax.types import MemoryText

__all__ = ["AutoRefineSystem", "Skill", "utility", "mmr", "prune_ids", "FORMAT"]

FORMAT = "cfjax.peers.autorefine/1"
EPS = 1e-3
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_DYN = re.compile(r"^dyn-(\d+)$")


def utility(n_succ: int, n_inj: int, eps: float = EPS) -> float:
    """D.3 Eq. 4: effectiveness n_succ/(n_inj + ε) times frequency log(1 + n_inj)."""
    return n_succ / (n_inj + eps) * math.log1p(n_inj)


def mmr(rel: Sequence[tuple[str, float]], sim: Callable[[str, str], float], k: int, lam: float) -> list[str]:
    """Maximal Marginal Relevance (D.3 Eq. 5): repeatedly the candidate maximising
    λ·rel(s) − (1 − λ)·max_{s' selected} sim(s, s') (0 before any is selected); ties → earlier in ``rel``."""
    left = list(rel)
    chosen: list[str] = []
    while left and len(chosen) < k:
        def score(item: tuple[str, float]) -> float:
            red = max((sim(item[0], c) for c in chosen), default=0.0)
            return lam * item[1] - (1.0 - lam) * red
        best = max(range(len(left)), key=lambda j: (score(left[j]), -j))
        chosen.append(left.pop(best)[0])
    return chosen


@dataclass
class Skill:
    id: str
    title: str
    pool: str
    content: str
    task_type: str
    sources: list[str] = field(default_factory=list)
    n_inj: int = 0
    n_succ: int = 0
    t_create: int = 0

    @property
    def utility(self) -> float:
        return utility(self.n_succ, self.n_inj)

    def text(self) -> str:
        return f"SKILL {self.title} [{self.pool}]\n{self.content}"


def prune_ids(skills: Sequence[Skill], frac: float = 0.2, min_inj: int = 3) -> list[str]:
    """D.3 §(iii): the bottom ``frac`` (⌊frac·n⌋) by utility among skills with n_inj ≥ ``min_inj``
    (lowest first; ties → the older, then the earlier in ``skills``)."""
    eligible = [(s.utility, s.t_create, j, s.id) for j, s in enumerate(skills) if s.n_inj >= min_inj]
    eligible.sort()
    return [sid for *_, sid in eligible[: int(math.floor(frac * len(eligible) + 1e-9))]]


class AutoRefineSystem:
    """AutoRefine (Anti-Persistence App. D.3) as a :class:`~cfjax.memory.MemorySystem`."""

    def __init__(self, ctx: SystemContext, *, floor: float = 0.30, lam: float = 0.7, k: int = 5, batch: int = 50,
                 prune_every: int = 2, prune_frac: float = 0.2, min_inj: int = 3, max_failures: int = 4,
                 max_successes: int = 4, rewrite_once: bool = False) -> None:
        self.ctx = ctx
        self.floor, self.lam, self.k, self.batch = floor, lam, k, batch
        self.prune_every, self.prune_frac, self.min_inj = prune_every, prune_frac, min_inj
        self.max_failures, self.max_successes, self.rewrite_once = max_failures, max_successes, rewrite_once
        self.index = EmbeddingIndex()
        self.skills: dict[str, Skill] = {}
        self.round = 0
        self.pending: list[Experience] = []
        self.log: dict[tuple[str, int], set[str]] = {}
        self._rewrites: dict[tuple[str, int], list[str]] = {}
        self._lock = threading.Lock()
        self.counts = {"evolver_calls": 0, "pruned": 0, "added": 0}
        self.frozen = False

    # ------------------------------------------------------------------ rounds
    def build(self, experience: Sequence[Experience]) -> None:
        for exp in experience:
            self.update(exp)
        if self.pending:
            self.end_round()

    def update(self, experience: Experience) -> None:
        if self.frozen:
            raise FrozenMemoryError("AutoRefine memory is frozen: held-out episodes update no skill or metadata")
        self.pending.append(experience)
        if len(self.pending) >= self.batch:
            self.end_round()

    def end_round(self) -> None:
        """Close iteration ℓ: credit from the log, evolve, prune when ℓ is even (module docstring)."""
        self.round += 1
        eps, self.pending = self.pending, []
        with self._lock:
            log, self.log = self.log, {}
            self._rewrites.clear()
        for exp in eps:
            for sid in log.get((exp.task.task_id, exp.episode), ()):
                s = self.skills.get(sid)
                if s is not None:
                    s.n_inj += 1
                    s.n_succ += int(exp.solved)
        self._evolve(eps)
        if self.round % self.prune_every == 0:
            for sid in prune_ids(list(self.skills.values()), self.prune_frac, self.min_inj):
                del self.skills[sid]
                self.index.remove(sid)
                self.counts["pruned"] += 1

    def _evolve(self, eps: list[Experience]) -> None:
        failures = [e for e in eps if not e.solved][: self.max_failures]
        wins = [e for e in eps if e.solved]
        rng = random.Random(f"autorefine/successes/{self.ctx.seed}/{self.round}")  # str seed: stable across processes
        picked = sorted(rng.sample(range(len(wins)), min(self.max_successes, len(wins))))
        successes = [wins[j] for j in picked]
        if not failures and not successes:
            return
        req = EvolveRequest(evidence_of(failures), evidence_of(successes))
        shown = req.episodes()
        res = self.ctx.backbone.call(AUTOREFINE_EVOLVE, req)
        self.ctx.ledger.llm(shown[0].task.task_id, res.usage, verification=True)
        self.counts["evolver_calls"] += 1
        for sk in res.skills:
            src = [shown[n - 1] for n in sk["from"] if 1 <= n <= len(shown)]
            self.add_skill(sk["title"], sk["pool"], sk["content"], (src or shown)[0].task.domain,
                           [e.task.task_id for e in src])

    def _next_dyn(self) -> str:
        top = max((int(m.group(1)) for sid in self.skills if (m := _DYN.match(sid))), default=0)
        return f"dyn-{top + 1}"

    def add_skill(self, title: str, pool: str, content: str, task_type: str, sources: Sequence[str] = (),
                  **counters: int) -> Skill:
        """Store one skill (t_create = the current round unless given); a non-slug or taken title → dyn-N."""
        sid = title if _SLUG.match(title) and title not in self.skills else self._next_dyn()
        s = Skill(sid, title or sid, pool if pool in POOLS else "general", content, task_type, list(sources),
                  counters.get("n_inj", 0), counters.get("n_succ", 0), counters.get("t_create", self.round))
        self.skills[sid] = s
        self.index.add(sid, f"{s.title}\n{s.content}")
        self.counts["added"] += 1
        return s

    def freeze(self) -> None:
        """Close a pending round (the iteration ends at a held-out pass), then freeze."""
        if not self.frozen and self.pending:
            self.end_round()
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    def _queries(self, query: RecallQuery) -> list[str]:
        key = (query.task.task_id, query.episode)
        if self.rewrite_once:
            with self._lock:
                hit = self._rewrites.get(key)
            if hit is not None:
                return hit
        res = self.ctx.backbone.call(AUTOREFINE_REWRITE, RewriteRequest(query.task, query.history, query.draft,
                                                                        query.episode))
        (query.ledger or self.ctx.ledger).llm(query.task.task_id, res.usage)
        qs = [query.task.question, *res.queries()]
        if self.rewrite_once:
            with self._lock:
                self._rewrites[key] = qs
        return qs

    def relevance(self, queries: Sequence[str], task_id: str, task_type: str) -> list[tuple[str, float]]:
        """``(skill id, max cosine over the queries)`` of every candidate at or above the floor, by
        relevance (ties → insertion order); never a skill drawn from ``task_id``'s own episodes."""
        vecs = [self.index.embed(q) for q in queries]
        out = []
        for sid in self.index.ids():
            s = self.skills[sid]
            if task_id in s.sources or (s.pool == "task_type" and s.task_type != task_type):
                continue
            r = max(self.index.similarity(v, sid) for v in vecs)
            if r >= self.floor:
                out.append((sid, r))
        return sorted(out, key=lambda x: -x[1])

    def select(self, queries: Sequence[str], task_id: str, task_type: str) -> list[str]:
        """Floor, then MMR to ``k`` (D.3 §(ii))."""
        rel = self.relevance(queries, task_id, task_type)
        emb = {sid: self.index.embed(f"{self.skills[sid].title}\n{self.skills[sid].content}") for sid, _ in rel}
        return mmr(rel, lambda a, b: float(emb[a] @ emb[b]), self.k, self.lam)

    def recall(self, query: RecallQuery) -> MemoryText | None:
        if not self.skills:
            return None
        chosen = self.select(self._queries(query), query.task.task_id, query.task.domain)
        if not self.frozen and chosen:
            with self._lock:
                self.log.setdefault((query.task.task_id, query.episode), set()).update(chosen)
        return memory_set([(sid, self.skills[sid].text()) for sid in chosen])

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        save_store(path, FORMAT, {"skills": [asdict(s) for s in self.skills.values()], "round": self.round,
                                  "counts": dict(self.counts)})

    def load(self, path: Path) -> None:
        """Replace the skills with a saved store's (embeddings recomputed).

        Raises:
          ValueError: not an AutoRefine store, or a malformed skill (the file and field named)."""
        data = load_store(path, FORMAT, "AutoRefine", {"skills": list, "round": int, "counts": dict})
        kinds = {"id": str, "title": str, "pool": str, "content": str, "task_type": str, "sources": list,
                 "n_inj": int, "n_succ": int, "t_create": int}
        skills: dict[str, Skill] = {}
        for row in data["skills"]:
            bad = [k for k, t in kinds.items() if not isinstance(row, dict) or not isinstance(row.get(k), t)]
            if bad:
                raise ValueError(f"{path}: field 'skills' has a skill whose {bad[0]!r} is missing or mistyped")
            skills[row["id"]] = Skill(**{k: row[k] for k in kinds})
        self.skills, self.index = skills, EmbeddingIndex(self.index.embedder)
        for s in skills.values():
            self.index.add(s.id, f"{s.title}\n{s.content}")
        self.round = data["round"]
        self.counts = {k: int(data["counts"].get(k, 0)) for k in self.counts}
        self.pending, self.log = [], {}

    def summary(self) -> dict:
        by_pool = {p: sum(s.pool == p for s in self.skills.values()) for p in POOLS}
        return {"skills": len(self.skills), "rounds": self.round, **self.counts, **by_pool}

    def __len__(self) -> int:
        return len(self.skills)

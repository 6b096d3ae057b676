"""Records and the memory store: admission (Eq. 4), retention (Eq. 5), reuse (Eq. 6),
freeze, retrieval (Eq. 7–8) and crash-safe persistence.

papers/countermem.md §3.3–3.4, App. B.1–B.4. Normalisations and the
redundancy/conflict measures are documented on :class:`cfjax.config.StoreConfig`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from cfjax.config import RetrievalConfig, StoreConfig, from_dict, to_dict
from cfjax.countermem.conditions import Condition, ConditionError, parse_condition
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.index import VectorIndex
from cfjax.infra.io import atomic_write_json, read_json
from cfjax.llm import prompts
from cfjax.types import EditModel, Task

__all__ = [
    "Record",
    "RecordStats",
    "Candidate",
    "Admission",
    "Retrieved",
    "FrozenStoreError",
    "MemoryStore",
    "reuse_update",
]


class FrozenStoreError(RuntimeError):
    """A frozen store was asked to change (Algorithm 1, line 14)."""


@dataclass(frozen=True)
class Candidate:
    """A verified contrast before admission: ``Δ = U(o') − U(o) > ε_adm`` (Eq. 2)."""

    source_task: str
    situation: str  # q
    original: str  # a⁻
    improved: str  # a⁺
    unit_before: str
    unit_after: str
    evidence: str  # e
    condition: str  # c, condition-language text; "none" = universal
    score_before: float
    score_after: float

    @property
    def delta(self) -> float:
        return self.score_after - self.score_before


@dataclass(frozen=True)
class Record(Candidate):
    """A stored record ``m = (q, a⁻, a⁺, e, c, u)`` (Eq. 3) plus metadata.

    ``u`` and the use counters live in :class:`RecordStats` (they change during
    construction only)."""

    record_id: int = -1
    admission_score: float = 0.0
    created: int = 0  # admission order, for recency retention

    def render(self, *, with_condition: bool = True) -> str:
        """RECORD_RENDER / RECORD_RENDER_NO_CONDITION (App. D.8)."""
        return prompts.render_record(
            self.situation, self.unit_before, self.unit_after, self.original, self.improved,
            self.evidence, self.condition if with_condition else None,
        )


@dataclass
class RecordStats:
    """Reuse statistics, updated during construction only (Eq. 6)."""

    u: float = 0.0
    uses: int = 0
    helpful: int = 0
    harmful: int = 0

    @property
    def helpful_fraction(self) -> float:
        return self.helpful / self.uses if self.uses else 0.0


@dataclass(frozen=True)
class Admission:
    """Outcome of an admission attempt (Eq. 4)."""

    admitted: bool
    score: float
    redundancy: float
    conflict: float
    reason: str
    record_id: int | None = None
    evicted: tuple[int, ...] = ()


@dataclass(frozen=True)
class Retrieved:
    """One retrieval result: Eq. 8 score and its cosine part."""

    record: Record
    stats: RecordStats
    relevance: float  # cos(φ(s), φ(q))
    score: float  # relevance + λ_reuse·u


def reuse_update(u: float, y: int, rho: float) -> float:
    """Eq. 6: ``u ← (1 − ρ)·u + ρ·y`` with ``y ∈ {−1, 0, +1}``."""
    if y not in (-1, 0, 1):
        raise ValueError(f"reuse label must be -1, 0 or +1, got {y}")
    return (1.0 - rho) * u + rho * y


@dataclass
class MemoryStore:
    """The CounterMem store (capacity B, admission, retention, reuse, freeze).

    Retrieval is exact (flat FAISS index over situation embeddings, Eq. 8
    bias = u). Retrieval never mutates the store, frozen or not.
    """

    config: StoreConfig = field(default_factory=StoreConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    embedder: HashingEmbedder = field(default_factory=HashingEmbedder)
    #: the domain's edit model: Eq. 4 redundancy and conflict compare *its* masked signatures
    edits: EditModel | None = None

    def __post_init__(self) -> None:
        if self.edits is None:
            raise ValueError("MemoryStore needs the domain's edit model (edits=suite.edits): Eq. 4 compares "
                             "edit signatures in the domain's own unit language")
        if self.embedder.dim != self.retrieval.dim:
            raise ValueError(f"embedder dim {self.embedder.dim} != RetrievalConfig.dim {self.retrieval.dim}")
        self.records: dict[int, Record] = {}
        self.stats: dict[int, RecordStats] = {}
        self._conditions: dict[int, Condition] = {}
        self._advice: dict[int, tuple[tuple[str, str], np.ndarray]] = {}  # masked edit, condition embedding
        self._situation: dict[int, np.ndarray] = {}
        self._index = VectorIndex(self.retrieval.dim, bias_weight=self.retrieval.lambda_reuse)
        self._iid: dict[int, int] = {}  # record id -> index id
        self._rid: dict[int, int] = {}  # index id -> record id
        self._next_id = 0
        self._clock = 0
        self._frozen = False
        self._rng = random.Random(self.config.seed)

    def _sig(self, unit_text: str) -> str:
        return self.edits.signature(unit_text)  # type: ignore[union-attr]

    def _edit_key(self, c: "Candidate | Record") -> tuple[str, str]:
        """The advice of a record for Eq. 4: its ``(before, after)`` masked in the domain's signature.

        A *shape-preserving* edit (the masked before and after are equal — a changed number or
        name, e.g. SAT ``atmost 2`` → ``atmost 3``) keeps its concrete, whitespace-normalised texts:
        masked, it could not tell ``2 → 3`` from ``3 → 2`` and would count as its own reverse (I)
        and as the same advice as any same-shape edit (R)."""
        sb, sa = self._sig(c.unit_before), self._sig(c.unit_after)
        if sb != sa:
            return sb, sa
        return " ".join(c.unit_before.split()), " ".join(c.unit_after.split())

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        return len(self.records)

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> None:
        """Algorithm 1, line 14: records and reuse statistics become read-only."""
        self._frozen = True

    def _check_mutable(self, what: str) -> None:
        if self._frozen:
            raise FrozenStoreError(f"the memory store is frozen; cannot {what}")

    # ------------------------------------------------------------------ Eq. 4
    def _redundancy(self, edit: tuple[str, str], condition: np.ndarray, exclude: int | None = None) -> float:
        """``R(m, M)``: soft count of stored records giving the same advice — the
        same masked edit (exact signature match, so a reversed edit never counts)
        under a condition whose embedding has cosine ≥ ``redundancy_threshold``
        with m's; each such record adds that cosine."""
        thr = self.config.redundancy_threshold
        r = 0.0
        for rid, (e, v) in self._advice.items():
            if rid == exclude or e != edit:
                continue
            s = float(condition @ v)
            if s >= thr:
                r += s
        return r

    def _conflict(self, cand: Candidate, situation: np.ndarray) -> float:
        sb, sa = self._edit_key(cand)
        universal = cand.condition.strip().lower() == "none"
        best = 0.0
        for rid, rec in self.records.items():
            if self._advice[rid][0] == (sa, sb):
                other_universal = self._conditions[rid].is_universal
                if universal or other_universal or rec.condition == cand.condition:
                    best = max(best, float(situation @ self._situation[rid]))
        return best

    def admission_score(self, cand: Candidate) -> tuple[float, float, float]:
        """Eq. 4 for a candidate against the current store: ``(S_adm, R, I)``.

        ``ũ = 0`` for a new record (u starts at zero, App. B.1)."""
        c = self.config
        cond_emb, situation = self.embedder.embed([cand.condition, cand.situation])
        red = self._redundancy(self._edit_key(cand), cond_emb)
        conf = self._conflict(cand, situation)
        d = min(max(cand.delta, 0.0), 1.0)
        s = c.lambda_delta * d + c.lambda_u * 0.0 - c.lambda_r * red - c.lambda_i * conf
        return s, red, conf

    def admit(self, cand: Candidate) -> Admission:
        """Verification gate (Δ > ε_adm), condition check, Eq. 4, then Eq. 5 at capacity."""
        self._check_mutable("admit a record")
        if not cand.delta > self.config.eps_adm:
            return Admission(False, float("nan"), 0.0, 0.0, f"Δ={cand.delta:.3f} ≤ ε_adm={self.config.eps_adm}")
        try:
            cond = parse_condition(cand.condition)
        except ConditionError as e:
            return Admission(False, float("nan"), 0.0, 0.0, f"unparsable condition: {e}")
        cand = Candidate(**{**asdict(cand), "condition": str(cond)})  # canonical text
        s, red, conf = self.admission_score(cand)
        if not s > self.config.tau_adm:
            return Admission(False, s, red, conf, f"S_adm={s:.3f} ≤ τ_adm={self.config.tau_adm}")
        rid = self._next_id
        self._next_id += 1
        self._clock += 1
        rec = Record(**asdict(cand), record_id=rid, admission_score=s, created=self._clock)
        self._insert(rec, RecordStats(), cond)
        evicted = self._enforce_capacity()
        return Admission(rid not in evicted, s, red, conf,
                         "admitted" if rid not in evicted else "admitted then evicted by retention",
                         rid, tuple(evicted))

    def _insert(self, rec: Record, stats: RecordStats, cond: Condition) -> None:
        cond_emb, situation = self.embedder.embed([rec.condition, rec.situation])
        iid = int(self._index.add(situation[None, :], np.array([stats.u]))[0])
        self.records[rec.record_id] = rec
        self.stats[rec.record_id] = stats
        self._conditions[rec.record_id] = cond
        self._advice[rec.record_id] = (self._edit_key(rec), cond_emb)
        self._situation[rec.record_id] = situation
        self._iid[rec.record_id] = iid
        self._rid[iid] = rec.record_id

    def _remove(self, rid: int) -> None:
        self._index.remove(np.array([self._iid.pop(rid)]))
        for d in (self.records, self.stats, self._conditions, self._advice, self._situation):
            d.pop(rid)
        self._rid = {i: r for i, r in self._rid.items() if r != rid}

    # ------------------------------------------------------------------ Eq. 5
    def retention_scores(self) -> dict[int, float]:
        """Eq. 5: ``S_keep = α·Δ̃ + β·ũ + ω·F − η·R`` for every stored record."""
        c = self.config
        max_uses = max([s.uses for s in self.stats.values()] + [1])
        out = {}
        for rid, rec in self.records.items():
            st = self.stats[rid]
            d = min(max(rec.delta, 0.0), 1.0)
            f = st.uses / max_uses
            out[rid] = c.alpha * d + c.beta * st.u + c.omega * f - c.eta * self._redundancy(*self._advice[rid], exclude=rid)
        return out

    def _eviction_order(self) -> list[int]:
        rule = self.config.retention
        ids = sorted(self.records)
        if rule == "utility":
            s = self.retention_scores()
            return sorted(ids, key=lambda r: (s[r], self.records[r].created))  # lowest first; ties: oldest
        if rule == "recency":
            return sorted(ids, key=lambda r: self.records[r].created)
        if rule == "random":
            ids = ids[:]
            self._rng.shuffle(ids)
            return ids
        # similarity: drop the record whose situation is most similar to another one
        mat = np.stack([self._situation[r] for r in ids])
        sims = mat @ mat.T
        np.fill_diagonal(sims, -np.inf)
        return [ids[i] for i in np.argsort(-sims.max(axis=1), kind="stable")]

    def _enforce_capacity(self) -> list[int]:
        evicted = []
        while len(self.records) > self.config.capacity:
            victim = self._eviction_order()[0]
            self._remove(victim)
            evicted.append(victim)
        return evicted

    # ------------------------------------------------------------------ Eq. 6
    def update_reuse(self, record_id: int, y: int) -> float:
        """Eq. 6 plus use counters; construction only (raises when frozen)."""
        self._check_mutable("update reuse statistics")
        st = self.stats[record_id]
        st.u = reuse_update(st.u, y, self.config.rho)
        st.uses += 1
        st.helpful += y == 1
        st.harmful += y == -1
        self._index.set_bias(np.array([self._iid[record_id]]), np.array([st.u]))
        return st.u

    # ------------------------------------------------------------------ Eq. 7-8
    def eligible(self, task: Task, *, use_conditions: bool | None = None) -> list[int]:
        """Eq. 7: records from other source tasks whose condition holds for ``task``."""
        use_c = self.retrieval.use_conditions if use_conditions is None else use_conditions
        return [rid for rid, rec in self.records.items()
                if rec.source_task != task.task_id and (not use_c or self._conditions[rid].evaluate(task.attrs))]

    def retrieve(self, task: Task, state_text: str, *, k: int | None = None,
                 use_conditions: bool | None = None, query: np.ndarray | None = None) -> list[Retrieved]:
        """Eq. 8 top-k among the Eq. 7 eligible records, best first."""
        k = self.retrieval.k if k is None else k
        if not self.records:
            return []
        q = self.embedder.embed([state_text])[0] if query is None else query
        ok = set(self.eligible(task, use_conditions=use_conditions))
        mask = np.array([self._rid[int(i)] in ok for i in self._index.ids])[None, :]
        scores, ids = self._index.search(q[None, :].astype(np.float32), k, mask=mask)
        out = []
        for s, iid in zip(scores[0], ids[0]):
            if iid < 0:
                break
            rid = self._rid[int(iid)]
            rel = float(s) - self.retrieval.lambda_reuse * self.stats[rid].u
            out.append(Retrieved(self.records[rid], self.stats[rid], rel, float(s)))
        return out

    # ------------------------------------------------------------------ persistence
    def to_payload(self) -> dict:
        return {
            "config": to_dict(self.config),
            "retrieval": to_dict(self.retrieval),
            "embedder": {"dim": self.embedder.dim, "ngram_range": list(self.embedder.ngram_range),
                         "lowercase": self.embedder.lowercase, "seed": self.embedder.seed},
            "edit_model": self.edits.name,  # type: ignore[union-attr]
            "frozen": self._frozen,
            "next_id": self._next_id,
            "clock": self._clock,
            "rng_state": _rng_state_to_json(self._rng.getstate()),
            "records": [
                {"record": asdict(self.records[r]), "stats": asdict(self.stats[r])} for r in sorted(self.records)
            ],
        }

    def save(self, path: str | Path) -> None:
        """One checksummed JSON file written atomically: a crash mid-save leaves
        the previous complete store (never a mix)."""
        atomic_write_json(Path(path), self.to_payload())

    @classmethod
    def load(cls, path: str | Path, edits: EditModel) -> "MemoryStore":
        """Load a store saved by :meth:`save` (checksum verified) for the domain of ``edits``."""
        return cls.from_payload(read_json(Path(path)), edits)

    @classmethod
    def from_payload(cls, p: dict, edits: EditModel) -> "MemoryStore":
        """The store :meth:`to_payload` described (a deep, independent copy)."""
        saved = p.get("edit_model")
        if saved is not None and saved != edits.name:
            raise ValueError(f"this store holds {saved!r} records; it cannot be opened with the {edits.name!r} "
                             "edit model")
        e = p["embedder"]
        embedder = HashingEmbedder(dim=int(e["dim"]), ngram_range=tuple(e.get("ngram_range", (3, 5))),
                                   lowercase=bool(e.get("lowercase", True)), seed=int(e.get("seed", 0)))
        store = cls(from_dict(StoreConfig, p["config"]), from_dict(RetrievalConfig, p["retrieval"]), embedder, edits)
        for item in p["records"]:
            rec = Record(**item["record"])
            store._insert(rec, RecordStats(**item["stats"]), parse_condition(rec.condition))
        store._next_id = int(p["next_id"])
        store._clock = int(p["clock"])
        store._frozen = bool(p["frozen"])
        if "rng_state" in p:
            store._rng.setstate(_rng_state_from_json(p["rng_state"]))
        return store

    def summary(self) -> Mapping[str, float]:
        n = len(self.records)
        return {
            "records": n,
            "universal_conditions": sum(c.is_universal for c in self._conditions.values()),
            "mean_u": float(np.mean([s.u for s in self.stats.values()])) if n else 0.0,
            "mean_delta": float(np.mean([r.delta for r in self.records.values()])) if n else 0.0,
        }


def _rng_state_to_json(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _rng_state_from_json(state: list) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)

"""Records and the memory store: admission (Eq. 4), retention (Eq. 5), reuse (Eq. 6),
freeze, retrieval (Eq. 7–8) and crash-safe persistence.

papers/countermem.md §3.3–3.4, App. B.1–B.4. Normalisations and the
redundancy/conflict measures are documented on :class:`cfjax.config.StoreConfig`.

Length: one store — its records, the index over their situations and the per-edit groups Eq. 4
reads (:class:`_EditGroup`) are kept consistent by one class's insert and remove; splitting them
across modules would spread that invariant.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from cfjax.config import ConfigError, RetrievalConfig, StoreConfig, from_dict, to_dict
from cfjax.countermem.conditions import Condition, ConditionError, parse_condition
from cfjax.infra.embed import HashingEmbedder
from cfjax.infra.index import VectorIndex
from cfjax.infra.io import (STALE_TEMP_AGE_S, CorruptFileError, InputError, atomic_write_json, cleanup_stale_temps,
                            read_json)
from cfjax.llm import prompts
from cfjax.types import EditModel, Task

__all__ = [
    "Record",
    "RecordStats",
    "Candidate",
    "Admission",
    "Retrieved",
    "FrozenStoreError",
    "InvalidStoreError",
    "MemoryStore",
    "reuse_update",
]


class FrozenStoreError(RuntimeError):
    """A frozen store was asked to change (Algorithm 1, line 14)."""


class InvalidStoreError(InputError):
    """A store payload that breaks the store's invariants (:meth:`MemoryStore.check_payload`);
    :meth:`MemoryStore.load` reports it as a :class:`~cfjax.infra.io.CorruptFileError` naming the file."""


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


#: same-edit groups up to this size are scanned record by record in Eq. 4 (exactly as they always were);
#: larger ones through :class:`_EditGroup`'s per-condition counts and situation rows
GROUP_LOOP_MAX = 512


class _EditGroup:
    """The records sharing one masked edit, kept for Eq. 4 on large stores: a count and an embedding
    per distinct condition text (redundancy), and a growable ``[n, dim]`` array of situation rows
    with each row's condition text and universality (conflict). Removal swaps in the last row."""

    def __init__(self, dim: int) -> None:
        self.conditions: dict[str, list] = {}  # condition text -> [count, embedding]
        self.situations = np.zeros((8, dim), np.float32)
        self.universal = np.zeros(8, bool)
        self.texts: list[str] = []
        self.rids: list[int] = []
        self.pos: dict[int, int] = {}

    def add(self, rid: int, text: str, cond_emb: np.ndarray, situation: np.ndarray, universal: bool) -> None:
        entry = self.conditions.setdefault(text, [0, cond_emb])
        entry[0] += 1
        n = len(self.rids)
        if n == len(self.situations):
            self.situations = np.concatenate([self.situations, np.zeros_like(self.situations)])
            self.universal = np.concatenate([self.universal, np.zeros_like(self.universal)])
        self.situations[n], self.universal[n] = situation, universal
        self.texts.append(text)
        self.rids.append(rid)
        self.pos[rid] = n

    def remove(self, rid: int, text: str) -> None:
        entry = self.conditions[text]
        entry[0] -= 1
        if entry[0] == 0:
            del self.conditions[text]
        i, last = self.pos.pop(rid), len(self.rids) - 1
        if i != last:
            self.situations[i], self.universal[i] = self.situations[last], self.universal[last]
            self.texts[i], self.rids[i] = self.texts[last], self.rids[last]
            self.pos[self.rids[i]] = i
        self.texts.pop()
        self.rids.pop()

    def matching(self, universal: bool, text: str) -> np.ndarray:
        """Rows whose condition overlaps a candidate's (``universal``: the candidate's is)."""
        n = len(self.rids)
        if universal:
            return np.arange(n)
        same = np.fromiter((t == text for t in self.texts), bool, count=n)
        return np.flatnonzero(self.universal[:n] | same)


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
        self._index = VectorIndex(self.retrieval.dim, bias_weight=self.retrieval.lambda_reuse,
                                  config=self.retrieval.index)
        self._iid: dict[int, int] = {}  # record id -> index id
        self._rid: dict[int, int] = {}  # index id -> record id
        # masked edit -> its records in insertion order (the same order as ``_advice``): Eq. 4's
        # redundancy and conflict look only at records with the same or the reversed edit, so an
        # admission costs O(records sharing its edit), not O(store)
        self._by_edit: dict[tuple[str, str], dict[int, None]] = {}
        self._edit_groups: dict[tuple[str, str], _EditGroup] = {}  # the same groups, as arrays (large groups)
        self._columns: tuple | None = None  # Eq. 7 columns over the index (:meth:`_eligible_mask`), rebuilt on change
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
        with m's; each such record adds that cosine.

        Up to :data:`GROUP_LOOP_MAX` records share the edit: summed record by record in insertion
        order. Beyond it: once per distinct condition text (records with one condition text have
        one embedding), ``count × cosine`` — the same sum in exact arithmetic, float rounding aside,
        in O(distinct conditions) instead of O(records)."""
        thr = self.config.redundancy_threshold
        group = self._by_edit.get(edit, {})
        r = 0.0
        if len(group) <= GROUP_LOOP_MAX:
            for rid in group:
                if rid == exclude:
                    continue
                s = float(condition @ self._advice[rid][1])
                if s >= thr:
                    r += s
            return r
        skip = self.records[exclude].condition if exclude in group else None
        for text, (count, emb) in self._edit_groups[edit].conditions.items():
            n = count - (text == skip)
            if n > 0:
                s = float(condition @ emb)
                if s >= thr:
                    r += n * s
        return r

    def _conflict(self, cand: Candidate, situation: np.ndarray) -> float:
        """``I(m, M)``: the largest situation similarity to a record holding the reversed edit whose
        condition overlaps (the same text, or either is universal). Beyond :data:`GROUP_LOOP_MAX`
        such records, one matrix-vector product over the group's situation rows (a maximum: the
        order does not matter)."""
        sb, sa = self._edit_key(cand)
        universal = cand.condition.strip().lower() == "none"
        group = self._by_edit.get((sa, sb), {})
        best = 0.0
        if len(group) <= GROUP_LOOP_MAX:
            for rid in group:  # the records holding the reversed edit
                if universal or self._conditions[rid].is_universal or self.records[rid].condition == cand.condition:
                    best = max(best, float(situation @ self._situation[rid]))
            return best
        g = self._edit_groups[(sa, sb)]
        rows = g.matching(universal, cand.condition)
        if rows.size:
            best = max(best, float(np.max(g.situations[rows] @ situation)))
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
        edit = self._edit_key(rec)
        self._advice[rec.record_id] = (edit, cond_emb)
        self._by_edit.setdefault(edit, {})[rec.record_id] = None
        self._edit_groups.setdefault(edit, _EditGroup(self.embedder.dim)).add(
            rec.record_id, rec.condition, cond_emb, situation, cond.is_universal)
        self._situation[rec.record_id] = situation
        self._iid[rec.record_id] = iid
        self._rid[iid] = rec.record_id
        self._columns = None

    def _remove(self, rid: int) -> None:
        iid = self._iid.pop(rid)
        self._index.remove(np.array([iid]))
        edit = self._advice[rid][0]
        same = self._by_edit[edit]
        del same[rid]
        self._edit_groups[edit].remove(rid, self.records[rid].condition)
        if not same:
            del self._by_edit[edit]
            del self._edit_groups[edit]
        for d in (self.records, self.stats, self._conditions, self._advice, self._situation):
            d.pop(rid)
        self._rid.pop(iid, None)
        self._columns = None

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

    def _eligible_mask(self, task: Task, use_conditions: bool | None) -> np.ndarray:
        """:meth:`eligible` as a mask over the index's columns (``bool[N]``, aligned with its ids).

        Each distinct condition is evaluated once per query and broadcast through an integer column
        of condition ids, and the source-task test is an integer comparison, so a query costs O(N)
        array work plus one evaluation per distinct condition — not a Python loop over the records."""
        use_c = self.retrieval.use_conditions if use_conditions is None else use_conditions
        if self._columns is None:
            rids = [self._rid[int(i)] for i in self._index.ids]
            conds: dict[Condition, int] = {}
            srcs: dict[str, int] = {}
            cond_id = np.array([conds.setdefault(self._conditions[r], len(conds)) for r in rids], np.int64)
            src_id = np.array([srcs.setdefault(self.records[r].source_task, len(srcs)) for r in rids], np.int64)
            self._columns = (list(conds), cond_id, srcs, src_id)
        conds_list, cond_id, srcs, src_id = self._columns
        mask = src_id != srcs.get(task.task_id, -1)
        if use_c and conds_list:
            holds = np.array([c.evaluate(task.attrs) for c in conds_list], bool)
            mask &= holds[cond_id]
        return mask

    def retrieve(self, task: Task, state_text: str, *, k: int | None = None,
                 use_conditions: bool | None = None, query: np.ndarray | None = None) -> list[Retrieved]:
        """Eq. 8 top-k among the Eq. 7 eligible records, best first."""
        k = self.retrieval.k if k is None else k
        if not self.records:
            return []
        q = self.embedder.embed([state_text])[0] if query is None else query
        mask = self._eligible_mask(task, use_conditions)[None, :]
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
    def read(cls, path: str | Path) -> dict:
        """The checked payload of a store file, without opening it for a domain.

        Removes stale temp files of interrupted saves of ``path`` first (older
        than :data:`~cfjax.infra.io.STALE_TEMP_AGE_S`), reads the file (checksum
        verified) and checks every invariant (:meth:`check_payload`).

        Raises:
          FileNotFoundError: no such file.
          CorruptFileError: naming the file and the problem (bad checksum, bad
            JSON, or a broken invariant).
        """
        path = Path(path)
        cleanup_stale_temps(path, min_age_s=STALE_TEMP_AGE_S, ours_only=True)
        payload = read_json(path)
        try:
            cls.check_payload(payload)
        except InvalidStoreError as e:
            raise CorruptFileError(path, f"not a valid memory store: {e}") from None
        return payload

    @classmethod
    def load(cls, path: str | Path, edits: EditModel) -> "MemoryStore":
        """Load a store saved by :meth:`save` for the domain of ``edits``: checksum verified, every
        invariant checked (:meth:`read`), stale temp files of interrupted saves removed.

        Raises:
          CorruptFileError: the file cannot be trusted (named, with the problem).
          InvalidStoreError: the store was saved for another domain's edit model.
        """
        path = Path(path)
        payload = cls.read(path)
        try:
            return cls.from_payload(payload, edits)
        except InvalidStoreError as e:
            raise InvalidStoreError(f"{path}: {e}") from None

    @staticmethod
    def check_payload(p: object) -> None:
        """Check a payload against everything the store assumes, without building it.

        The payload is a :meth:`to_payload` dict with exactly its keys (``edit_model`` and
        ``rng_state`` may be absent in older files) and well-typed values; the configs pass
        :func:`~cfjax.config.from_dict`; the embedder's ``dim`` equals the retrieval ``dim``;
        every record has exactly the :class:`Record` fields and finite scores, a parsable
        condition and :class:`RecordStats` with ``−1 ≤ u ≤ 1`` and
        ``0 ≤ helpful + harmful ≤ uses``; record ids are unique and ``≥ 0``, ``next_id`` is above
        every id (the next admission never overwrites a record), admission times (``created``)
        are unique, ``≥ 1`` and ``≤ clock``; the store holds at most ``capacity`` records.

        Raises:
          InvalidStoreError: naming the first broken invariant.
        """
        def bad(msg: str) -> InvalidStoreError:
            return InvalidStoreError(msg)

        def is_int(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v: object) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        if not isinstance(p, dict):
            raise bad(f"the payload is a {type(p).__name__}, not an object")
        required = {"config", "retrieval", "embedder", "frozen", "next_id", "clock", "records"}
        missing = sorted(required - set(p))
        if missing:
            raise bad(f"missing key(s) {missing}")
        unknown = sorted(set(p) - required - {"edit_model", "rng_state"})
        if unknown:
            raise bad(f"unknown key(s) {unknown}")
        if "edit_model" in p and not isinstance(p["edit_model"], str):
            raise bad(f"edit_model must be a string, got {type(p['edit_model']).__name__}")
        try:
            cfg = from_dict(StoreConfig, p["config"])
            ret = from_dict(RetrievalConfig, p["retrieval"])
        except ConfigError as e:
            raise bad(f"config: {e}") from None
        e = p["embedder"]
        if not isinstance(e, dict) or set(e) - {"dim", "ngram_range", "lowercase", "seed"} or "dim" not in e:
            raise bad("embedder must be an object with dim (and ngram_range, lowercase, seed)")
        if not is_int(e["dim"]) or e["dim"] != ret.dim:
            raise bad(f"embedder dim {e['dim']!r} differs from the retrieval dim {ret.dim}")
        ng = e.get("ngram_range", [3, 5])
        if not (isinstance(ng, list) and len(ng) == 2 and all(is_int(x) and x >= 1 for x in ng) and ng[0] <= ng[1]):
            raise bad(f"embedder ngram_range must be [min_n, max_n] with 1 <= min_n <= max_n, got {ng!r}")
        if not isinstance(e.get("lowercase", True), bool) or not is_int(e.get("seed", 0)):
            raise bad("embedder lowercase must be a bool and seed an int")
        if not isinstance(p["frozen"], bool):
            raise bad(f"frozen must be true or false, got {p['frozen']!r}")
        for k in ("next_id", "clock"):
            if not is_int(p[k]) or p[k] < 0:
                raise bad(f"{k} must be an int >= 0, got {p[k]!r}")
        recs = p["records"]
        if not isinstance(recs, list):
            raise bad(f"records must be a list, got {type(recs).__name__}")
        if len(recs) > cfg.capacity:
            raise bad(f"{len(recs)} records exceed the capacity {cfg.capacity}")
        rec_fields = {f.name: f.type for f in fields(Record)}
        stat_fields = {f.name for f in fields(RecordStats)}
        ids: set[int] = set()
        created: set[int] = set()
        for i, item in enumerate(recs):
            where = f"records[{i}]"
            if not isinstance(item, dict) or set(item) != {"record", "stats"}:
                raise bad(f"{where} must be an object with exactly 'record' and 'stats'")
            r, st = item["record"], item["stats"]
            if not isinstance(r, dict) or set(r) != set(rec_fields):
                got = sorted(r) if isinstance(r, dict) else type(r).__name__
                raise bad(f"{where}.record must have exactly the fields {sorted(rec_fields)}, got {got}")
            for name in ("source_task", "situation", "original", "improved", "unit_before", "unit_after",
                         "evidence", "condition"):
                if not isinstance(r[name], str):
                    raise bad(f"{where}.record.{name} must be a string")
            for name in ("score_before", "score_after", "admission_score"):
                if not is_num(r[name]):
                    raise bad(f"{where}.record.{name} must be a finite number, got {r[name]!r}")
            rid, made = r["record_id"], r["created"]
            if not is_int(rid) or rid < 0:
                raise bad(f"{where}.record.record_id must be an int >= 0, got {rid!r}")
            if rid in ids:
                raise bad(f"record id {rid} appears twice")
            ids.add(rid)
            if not is_int(made) or made < 1 or made > p["clock"]:
                raise bad(f"{where}.record.created must be an int in [1, clock={p['clock']}], got {made!r}")
            if made in created:
                raise bad(f"two records have the same admission time created={made}")
            created.add(made)
            try:
                parse_condition(r["condition"])
            except ConditionError as err:
                raise bad(f"{where}.record.condition is not parsable: {err}") from None
            if not isinstance(st, dict) or set(st) != stat_fields:
                raise bad(f"{where}.stats must have exactly the fields {sorted(stat_fields)}")
            if not is_num(st["u"]) or not -1.0 <= st["u"] <= 1.0:
                raise bad(f"{where}.stats.u must be a number in [-1, 1], got {st['u']!r}")
            if not all(is_int(st[k]) and st[k] >= 0 for k in ("uses", "helpful", "harmful")):
                raise bad(f"{where}.stats uses, helpful and harmful must be ints >= 0")
            if st["helpful"] + st["harmful"] > st["uses"]:
                raise bad(f"{where}.stats: helpful + harmful ({st['helpful'] + st['harmful']}) exceed "
                          f"uses ({st['uses']})")
        if ids and p["next_id"] <= max(ids):
            raise bad(f"next_id {p['next_id']} is not above every record id (max {max(ids)}): the next "
                      "admission would overwrite a record")
        if "rng_state" in p:
            try:
                random.Random().setstate(_rng_state_from_json(p["rng_state"]))
            except (TypeError, ValueError, OverflowError):
                raise bad("rng_state is not a random.Random state") from None

    @classmethod
    def from_payload(cls, p: dict, edits: EditModel) -> "MemoryStore":
        """The store :meth:`to_payload` described (a deep, independent copy).

        Raises:
          InvalidStoreError: a broken invariant (:meth:`check_payload`) or a store saved for
            another domain's edit model.
        """
        cls.check_payload(p)
        saved = p.get("edit_model")
        if saved is not None and saved != edits.name:
            raise InvalidStoreError(f"this store holds {saved!r} records; it cannot be opened with the "
                                    f"{edits.name!r} edit model")
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
    if not isinstance(state, list) or len(state) != 3 or not isinstance(state[1], list):
        raise ValueError("not a [version, [internal state], gauss] list")
    version, internal, gauss = state
    return (version, tuple(internal), gauss)

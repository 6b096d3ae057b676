"""The decision loop of Module III: draft → retrieve → select → (revise) → evaluate.

papers/countermem.md §3.4, App. C.1–C.2, Algorithm 1 lines 16–27. One
episode is one task; each decision is one evaluated attempt, and the episode
ends at the first solved attempt or after ``max_attempts``.

The loop is shared by every phase; what differs is the *policy* that maps an
observation and a mask to a slot (0 = skip memory):

* construction: top-1 retrieved record (so Eq. 6 gets reuse observations),
* training: ε-greedy DQN, validation/evaluation: greedy DQN,
* ``none``: no retrieval at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from cfjax.config import AgentConfig, CounterMemConfig
from cfjax.countermem.generator import Expansion, expand_failure
from cfjax.countermem.store import MemoryStore, Retrieved
from cfjax.infra.embed import HashingEmbedder
from cfjax.kernels import features as F
from cfjax.infra.ledger import Ledger
from cfjax.llm.base import Attempt, Backbone, DraftRequest, ReviseRequest
from cfjax.domains.base import Task
from cfjax.types import EditModel, World

__all__ = ["Decision", "Episode", "Policy", "Agent", "reuse_label", "skip_policy", "top1_policy"]

#: ``policy(obs f32[98], mask bool[5]) -> slot`` (0 = skip).
Policy = Callable[[np.ndarray, np.ndarray], int]

#: ``retriever(task, state_text, emb_state, attempt, use_conditions) -> records``: replaces the
#: store's matched retrieval (Eq. 7–8) in the retrieval ablations (§6.2).
Retriever = Callable[[Task, str, np.ndarray, int, bool], list[Retrieved]]


def skip_policy(obs: np.ndarray, mask: np.ndarray) -> int:
    return 0


def top1_policy(obs: np.ndarray, mask: np.ndarray) -> int:
    """Construction policy: use the best-ranked eligible record when there is one."""
    return 1 if mask[1] else 0


def reuse_label(changed: bool, solved: bool, score: float, reference: float | None) -> int:
    """The reuse label y of Eq. 6 (App. B.3), relative to the memory-free draft.

    Unchanged from the draft → 0; changed and solved → +1; otherwise the sign
    of the utility change against the reference attempt, or 0 without one.
    """
    if not changed:
        return 0
    if solved:
        return 1
    if reference is None:
        return 0
    d = score - reference
    return 1 if d > 1e-9 else (-1 if d < -1e-9 else 0)


@dataclass
class Decision:
    """One decision of an episode with its costs (Eq. 10 increments)."""

    task_id: str
    attempt: int
    draft: str
    action: str
    slot: int  # 0 = skip, j = record R_t[j-1]
    record_id: int | None
    n_retrieved: int
    changed: bool
    score: float
    solved: bool
    tokens: int
    calls: int
    failed: int
    memory_tokens: int = 0  # tokens of the REVISE_WITH_RECORD call (retrieval + context, Fig. 2b)
    label: int | None = None  # reuse label when a record was used
    reference_score: float | None = None
    obs: np.ndarray | None = None
    mask: np.ndarray | None = None


@dataclass
class Episode:
    task: Task
    decisions: list[Decision] = field(default_factory=list)
    expansions: list[Expansion] = field(default_factory=list)

    @property
    def solved(self) -> bool:
        return bool(self.decisions) and self.decisions[-1].solved


_observation = jax.jit(F.observation)


class Agent:
    """Runs episodes of one task with a backbone, a world model and (optionally) a store."""

    def __init__(
        self,
        backbone: Backbone,
        world: World,
        config: CounterMemConfig,
        *,
        store: MemoryStore | None = None,
        embedder: HashingEmbedder | None = None,
        schemas: dict | None = None,
        edits: EditModel | None = None,
        retriever: "Retriever | None" = None,
    ) -> None:
        self.backbone = backbone
        self.world = world
        self.config = config
        self.store = store
        self.embedder = embedder or (store.embedder if store is not None else HashingEmbedder())
        self.schemas = schemas or {}  # env_id → the edit model's environment object
        self.edits = edits
        self.retriever = retriever
        self.proj = jnp.asarray(F.projection_matrix())

    # ------------------------------------------------------------------ observation
    @staticmethod
    def state_text(task: Task, history: list[Attempt], draft: str) -> str:
        """Text embedded for retrieval (Eq. 8): task prompt plus state."""
        parts = [task.question, draft]
        if history:
            parts.append(history[-1].feedback)
        return "\n".join(parts)

    def observe(self, emb_state: np.ndarray, draft: str, retrieved: list[Retrieved], history: list[Attempt],
                attempt: int, tokens_so_far: int) -> tuple[np.ndarray, np.ndarray]:
        """Eq. 9 observation ``z`` (f32[98]) and the valid-action mask (bool[5])."""
        a: AgentConfig = self.config.agent
        slots = np.zeros((F.N_SLOTS, F.SLOT_DIM), np.float32)
        for j, r in enumerate(retrieved[: F.N_SLOTS]):
            slots[j, F.REL] = r.relevance
            slots[j, F.ADM] = r.record.admission_score
            slots[j, F.GAIN] = r.record.delta
            slots[j, F.REUSE] = r.stats.u
            slots[j, F.FREQ] = r.stats.uses
            slots[j, F.HELP] = r.stats.helpful_fraction
            slots[j, F.VALID] = 1.0
        k = max(1, self.config.retrieval.k)
        failed = sum(h.score < 1.0 for h in history)
        budget = np.array([
            (a.max_attempts - attempt) / a.max_attempts,  # remaining attempts
            max(0.0, 1.0 - tokens_so_far / a.token_budget),  # remaining token budget
            failed / a.max_attempts,  # failed attempts so far
            history[-1].score if history else 0.0,  # utility of the previous evaluated attempt
            min(len(retrieved), k) / k,  # retrieved records / k
            1.0 if history else 0.0,  # this is a retry
        ], np.float32)
        emb_draft = self.embedder.embed([draft])[0]
        z = np.asarray(_observation(emb_state, emb_draft, slots, budget, self.proj))
        mask = np.asarray(F.action_mask_reference(slots))
        return z, mask

    # ------------------------------------------------------------------ episode
    def run_episode(
        self,
        task: Task,
        policy: Policy,
        ledger: Ledger,
        *,
        episode: int,
        memory: bool = True,
        construct: bool = False,
        measure_draft: bool = False,
        rng: random.Random | None = None,
    ) -> Episode:
        """Solve ``task`` once.

        Args:
          memory: retrieve records (False = the ``none`` row).
          construct: construction phase — update reuse statistics (Eq. 6)
            and expand failed decisions into verified records (Modules I–II).
          measure_draft: when a record changes the action, also evaluate the
            memory-free draft *off the ledger* to label harmful use for the
            metrics (App. D.4); costs nothing the agent is charged for.
        """
        cfg = self.config
        use_conditions = cfg.retrieval.use_conditions
        ep = Episode(task)
        history: list[Attempt] = []
        tokens_so_far = 0
        expanded = 0
        budget = [cfg.generator.verification_budget]
        rng = rng or random.Random(episode)
        for attempt in range(cfg.agent.max_attempts):
            d_tokens = 0
            dr = self.backbone.draft_action(DraftRequest(task, tuple(history), episode))
            ledger.llm(task.task_id, dr.usage)
            d_tokens += dr.usage.total
            draft = dr.action
            retrieved: list[Retrieved] = []
            z = mask = None
            slot = 0
            if memory and self.store is not None:
                st = self.state_text(task, history, draft)
                emb_state = self.embedder.embed([st])[0]
                if self.retriever is not None:
                    retrieved = self.retriever(task, st, emb_state, attempt, use_conditions)
                else:
                    retrieved = self.store.retrieve(task, st, use_conditions=use_conditions, query=emb_state)
                z, mask = self.observe(emb_state, draft, retrieved, history, attempt, tokens_so_far)
                slot = int(policy(z, mask))
                if not (0 <= slot < len(mask) and mask[slot]):
                    raise ValueError(f"policy chose invalid slot {slot} (mask {mask.tolist()})")
            action = draft
            record_id = None
            m_tokens = 0
            if slot > 0:
                rec = retrieved[slot - 1]
                record_id = rec.record.record_id
                rv = self.backbone.revise_with_record(ReviseRequest(
                    task, tuple(history), draft, rec.record.render(with_condition=use_conditions), episode))
                ledger.llm(task.task_id, rv.usage)
                d_tokens += rv.usage.total
                m_tokens = rv.usage.total
                action = rv.action
            out = self.world.evaluate(task, action)
            ledger.evaluation(task.task_id, out)
            changed = self.edits.normalize(action) != self.edits.normalize(draft)
            label = ref = None
            if slot > 0:
                ref = self._reference(task, draft, history, changed, construct, measure_draft, ledger)
                label = reuse_label(changed, out.solved, out.score, ref)
                if construct and self.store is not None:
                    self.store.update_reuse(record_id, label)  # Eq. 6
            tokens_so_far += d_tokens
            ep.decisions.append(Decision(
                task.task_id, attempt, draft, action, slot, record_id, len(retrieved), changed,
                float(out.score), bool(out.solved), d_tokens, 1, int(not out.solved), m_tokens, label, ref, z, mask))
            if construct and self.store is not None and not out.solved and out.completed \
                    and expanded < cfg.generator.max_expanded and budget[0] > 0:
                expanded += 1
                ep.expansions.append(expand_failure(
                    task, history, action, out, backbone=self.backbone, world=self.world, store=self.store,
                    config=cfg.generator, schema=self.schemas.get(task.env_id), rng=rng, ledger=ledger,
                    budget=budget, episode=episode, edits=self.edits))
            history.append(Attempt(action, out.feedback, float(out.score)))
            if out.solved:
                break
        return ep

    def _reference(self, task: Task, draft: str, history: list[Attempt], changed: bool, construct: bool,
                   measure_draft: bool, ledger: Ledger) -> float | None:
        """Reference utility for the reuse label of a used record (App. B.3)."""
        if not changed:
            return None
        if construct and self.config.agent.construction_reference == "draft_check":
            o = self.world.evaluate(task, draft)  # a counterfactual check, charged to construction
            ledger.evaluation(task.task_id, o, verification=True)
            return float(o.score)
        if measure_draft:
            return float(self.world.evaluate(task, draft).score)  # measurement only: not charged
        return history[-1].score if history else None

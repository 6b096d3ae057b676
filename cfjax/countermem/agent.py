"""CounterMem's behaviours for the one agent loop (:mod:`cfjax.loop`): retrieve → select → revise.

papers/countermem.md §3.4, App. C.1–C.2, Algorithm 1 lines 16–27. The
:class:`Agent` supplies the loop's ``consult`` (Eq. 7–9 retrieval and
observation, the selector's slot, REVISE_WITH_RECORD) and ``after`` (the Eq. 6
reuse label, Modules I–II expansion of a failure); the decision-table builder
(:mod:`cfjax.countermem.table`) calls the same :meth:`Agent.offer` and
:meth:`Agent.revise` for every choice. What differs between phases is the
*policy* that maps an observation and a mask to a slot (0 = skip memory):

* construction: top-1 retrieved record (so Eq. 6 gets reuse observations),
* training: ε-greedy DQN, validation/evaluation: greedy DQN,
* ``none``: no retrieval at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from cfjax.config import AgentConfig, CounterMemConfig
from cfjax.config.countermem import OBSERVATIONS
from cfjax.countermem.generator import expand_failure
from cfjax.countermem.store import MemoryStore, Retrieved
from cfjax.infra.embed import HashingEmbedder
from cfjax.kernels import features as F
from cfjax.kernels.reference import action_mask_reference
from cfjax.infra.ledger import Ledger
from cfjax.loop import (AfterFn, AfterResult, ConsultFn, Consultation, Decision, DraftPrefetch, Episode, Proposal,
                        draft_once, no_memory, run_episode)
from cfjax.llm.calls import REVISE_WITH_RECORD
from cfjax.loop import reuse_label  # Eq. 6, shared by every memory row (re-exported)
from cfjax.types import Attempt, Backbone, EditError, EditModel, MemoryText, Outcome, ReviseRequest, Task, World

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


_observation = jax.jit(F.observation)
_TRANSFER_MEMO_MAX = 200_000


def _embed(embedder, text: str) -> np.ndarray:
    """One text's embedding, through the embedder's memo when it has one
    (:meth:`~cfjax.infra.embed.HashingEmbedder.embed_cached`: the same vector as ``embed([text])[0]``)."""
    cached = getattr(embedder, "embed_cached", None)
    return cached(text) if cached is not None else embedder.embed([text])[0]


class Agent:
    """Runs episodes of one task with a backbone, a world model and (optionally) a store."""

    def __init__(
        self,
        backbone: Backbone,
        world: World,
        config: CounterMemConfig,
        *,
        edits: EditModel,
        store: MemoryStore | None = None,
        embedder: HashingEmbedder | None = None,
        envs: Mapping[str, Any] | None = None,
        retriever: "Retriever | None" = None,
        transfer_memo: dict | None = None,
    ) -> None:
        self.backbone = backbone
        self.world = world
        self.config = config
        self.store = store
        self.embedder = embedder or (store.embedder if store is not None else HashingEmbedder())
        self.envs = dict(envs or {})  # env_id → the edit model's environment object
        self.edits = edits
        self.retriever = retriever
        self.proj = jnp.asarray(F.projection_matrix())
        #: ``(unit_before, unit_after, draft, env_id) → usable`` (:meth:`usable`, a pure function of
        #: them): agents of one unit that share an edit model and environments may share it
        self.transfer_memo: dict = {} if transfer_memo is None else transfer_memo

    # ------------------------------------------------------------------ observation
    @staticmethod
    def state_text(task: Task, history: list[Attempt], draft: str) -> str:
        """Text embedded for retrieval (Eq. 8): task prompt plus state."""
        parts = [task.question, draft]
        if history:
            parts.append(history[-1].feedback)
        return "\n".join(parts)

    @staticmethod
    def observation_state_text(task: Task, history: list[Attempt]) -> str:
        """Text of ``E(s)`` in the ``"paper"`` observation (§3.2: task, environment and the feedback so
        far; the draft is ``E(â)`` alone)."""
        return "\n".join([task.question, task.context, *(h.feedback for h in history)])

    def usable(self, task: Task, draft: str, rec: Retrieved) -> bool:
        """Validity of a retrieved record at this decision (``"paper"`` observation): its edit carries
        onto ``draft`` and changes it (:meth:`EditModel.transfer`). Its condition holds by the
        retrieval filter (Eq. 7) when conditions are on; in the no-condition ablation only the edit is
        checked. Agent-side: the record, the draft and the environment the agent sees."""
        r = rec.record
        key = (r.unit_before, r.unit_after, draft, task.env_id)
        hit = self.transfer_memo.get(key)
        if hit is not None:
            return hit
        try:
            moved = self.edits.transfer(r.unit_before, r.unit_after, draft, self.envs.get(task.env_id))
            ok = moved is not None and self.edits.normalize(moved) != self.edits.normalize(draft)
        except EditError:  # a draft that does not parse: no edit applies to it
            ok = False
        if len(self.transfer_memo) >= _TRANSFER_MEMO_MAX:  # a long-lived agent: start afresh, never grow unbounded
            self.transfer_memo.clear()
        self.transfer_memo[key] = ok
        return ok

    def observe(self, emb_state: np.ndarray, draft: str, retrieved: list[Retrieved], history: list[Attempt],
                attempt: int, tokens_so_far: int, task: Task | None = None, *, layout: str | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """Eq. 9 observation ``z`` (f32[98]) and the valid-action mask (bool[5]).

        ``layout`` is the observation layout (default: ``agent.observation``). ``emb_state`` is ``E(s)``
        (:meth:`observation_state_text` in the ``"paper"`` observation, the retrieval state in
        ``"legacy"``); ``task`` is needed for the ``"paper"`` validity. The mask is the same in both
        layouts (skip plus every present slot)."""
        a: AgentConfig = self.config.agent
        layout = a.observation if layout is None else layout
        if layout not in OBSERVATIONS:
            raise ValueError(f"unknown observation layout {layout!r} (choose from {', '.join(OBSERVATIONS)})")
        paper = layout == "paper"
        slots = np.zeros((F.N_SLOTS, F.SLOT_DIM), np.float32)
        present = np.zeros(F.N_SLOTS, bool)
        for j, r in enumerate(retrieved[: F.N_SLOTS]):
            slots[j, F.REL] = r.relevance
            slots[j, F.ADM] = r.record.admission_score
            slots[j, F.GAIN] = r.record.delta
            slots[j, F.REUSE] = r.stats.u
            slots[j, F.FREQ] = r.stats.uses
            slots[j, F.HELP] = r.stats.helpful_fraction
            present[j] = True
            slots[j, F.VALID] = float(self.usable(task, draft, r)) if paper and task is not None else 1.0
        k = max(1, self.config.retrieval.k)
        n = min(len(retrieved), k)
        if paper:
            scores = [h.score for h in history]
            budget = np.array([
                attempt / a.max_attempts,  # attempt index t / T
                max(0.0, 1.0 - tokens_so_far / a.token_budget),  # tokens left
                scores[-1] if scores else 0.0,  # last score
                max(scores) if scores else 0.0,  # best score so far
                n / k,  # retrieved records / k
                float(slots[:n, F.VALID].sum()) / k,  # usable records / k
            ], np.float32)
        else:
            failed = sum(h.score < 1.0 for h in history)
            budget = np.array([
                (a.max_attempts - attempt) / a.max_attempts,  # remaining attempts
                max(0.0, 1.0 - tokens_so_far / a.token_budget),  # remaining token budget
                failed / a.max_attempts,  # failed attempts so far
                history[-1].score if history else 0.0,  # utility of the previous evaluated attempt
                n / k,  # retrieved records / k
                1.0 if history else 0.0,  # this is a retry
            ], np.float32)
        emb_draft = _embed(self.embedder, draft)
        if paper:
            z = np.asarray(_observation(emb_state, emb_draft, slots, budget, self.proj, present))
            mask = np.asarray(action_mask_reference(slots, present))
        else:
            z = np.asarray(_observation(emb_state, emb_draft, slots, budget, self.proj))
            mask = np.asarray(action_mask_reference(slots))  # host side: the NumPy twin of F.action_mask
        return z, mask

    # ------------------------------------------------------------------ behaviours
    def offer(self, task: Task, history: Sequence[Attempt], draft: str, attempt: int, tokens_so_far: int
              ) -> tuple[list[Retrieved], np.ndarray, np.ndarray]:
        """Retrieve (Eq. 7–8) and observe (Eq. 9) in the configured layout (``agent.observation``):
        ``(records, z f32[98], mask bool[5])``."""
        layout = self.config.agent.observation
        retrieved, zs, mask = self.offer_layouts(task, history, draft, attempt, tokens_so_far, (layout,))
        return retrieved, zs[layout], mask

    def offer_layouts(self, task: Task, history: Sequence[Attempt], draft: str, attempt: int, tokens_so_far: int,
                      layouts: Sequence[str] = OBSERVATIONS
                      ) -> tuple[list[Retrieved], dict[str, np.ndarray], np.ndarray]:
        """Retrieve once (Eq. 7–8) and observe the same decision in every layout of ``layouts`` (Eq. 9):
        ``(records, {layout: z f32[98]}, mask bool[5])``. Each ``z`` is the one :meth:`offer` returns
        with ``agent.observation = layout`` (the retrieval does not depend on the layout); the mask is
        the same in every layout (checked). Used by the decision table (:mod:`cfjax.countermem.table`),
        which stores both."""
        assert self.store is not None
        if not layouts:
            raise ValueError("no observation layouts asked for")
        use_conditions = self.config.retrieval.use_conditions
        hist = list(history)
        st = self.state_text(task, hist, draft)
        emb_retrieval = _embed(self.embedder, st)
        if self.retriever is not None:
            retrieved = self.retriever(task, st, emb_retrieval, attempt, use_conditions)
        else:
            retrieved = self.store.retrieve(task, st, use_conditions=use_conditions, query=emb_retrieval)
        zs: dict[str, np.ndarray] = {}
        mask: np.ndarray | None = None
        for layout in layouts:
            emb_state = (_embed(self.embedder, self.observation_state_text(task, hist)) if layout == "paper"
                         else emb_retrieval)
            z, m = self.observe(emb_state, draft, retrieved, hist, attempt, tokens_so_far, task, layout=layout)
            if mask is not None and not np.array_equal(m, mask):
                raise AssertionError(f"the {layout!r} observation has another action mask than {layouts[0]!r}")
            zs[layout], mask = z, m
        assert mask is not None
        return retrieved, zs, mask

    def revise(self, task: Task, history: Sequence[Attempt], draft: str, rec: Retrieved, episode: int,
               ledger: Ledger) -> tuple[str, int]:
        """REVISE_WITH_RECORD with exactly one rendered record (Module III); ``(action, tokens)``."""
        text = rec.record.render(with_condition=self.config.retrieval.use_conditions)
        rv = self.backbone.call(REVISE_WITH_RECORD, ReviseRequest(task, tuple(history), draft, MemoryText("record", text),
                                                            episode))
        ledger.llm(task.task_id, rv.usage)
        return rv.action, rv.usage.total

    def consult_fn(self, policy: Policy) -> ConsultFn:
        """CounterMem's consultation: retrieve, let ``policy`` pick a slot (0 = skip), revise."""

        def consult(task: Task, history: Sequence[Attempt], proposal: Proposal, *, episode: int, attempt: int,
                    tokens_so_far: int, ledger: Ledger) -> Consultation:
            draft = proposal.draft
            retrieved, z, mask = self.offer(task, history, draft, attempt, tokens_so_far)
            slot = int(policy(z, mask))
            if not (0 <= slot < len(mask) and mask[slot]):
                raise ValueError(f"policy chose invalid slot {slot} (mask {mask.tolist()})")
            if slot == 0:
                return Consultation(draft, used=False, n_retrieved=len(retrieved), obs=z, mask=mask)
            rec = retrieved[slot - 1]
            action, tok = self.revise(task, history, draft, rec, episode, ledger)
            return Consultation(action, used=True, slot=slot, record_id=rec.record.record_id,
                                n_retrieved=len(retrieved), tokens=tok, memory_tokens=tok, obs=z, mask=mask)

        return consult

    def after_fn(self, *, construct: bool, measure_draft: bool, rng: random.Random) -> AfterFn:
        """Reuse label (Eq. 6) of a used record and, while constructing, Modules I–II on a failure."""
        cfg = self.config
        state = {"expanded": 0, "budget": [cfg.generator.verification_budget]}

        def after(task: Task, history: Sequence[Attempt], d: Decision, out: Outcome, *, episode: int,
                  ledger: Ledger) -> AfterResult:
            res = AfterResult()
            if d.slot > 0:
                res.reference = self._reference(task, d.draft, list(history), d.changed, construct, measure_draft,
                                                ledger)
                res.label = reuse_label(d.changed, out.solved, out.score, res.reference)
                if construct and self.store is not None:
                    self.store.update_reuse(d.record_id, res.label)  # Eq. 6
            if construct and self.store is not None and not out.solved and out.completed \
                    and state["expanded"] < cfg.generator.max_expanded and state["budget"][0] > 0:
                state["expanded"] += 1
                res.expansion = expand_failure(
                    task, list(history), d.action, out, backbone=self.backbone, world=self.world, store=self.store,
                    config=cfg.generator, schema=self.envs.get(task.env_id), rng=rng, ledger=ledger,
                    budget=state["budget"], episode=episode, edits=self.edits)
            return res

        return after

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
        prefetch: DraftPrefetch | None = None,
    ) -> Episode:
        """Solve ``task`` once through :func:`cfjax.loop.run_episode`.

        Args:
          memory: retrieve records (False = the ``none`` row).
          construct: construction phase — update reuse statistics (Eq. 6)
            and expand failed decisions into verified records (Modules I–II).
          measure_draft: when a record changes the action, also evaluate the
            memory-free draft *off the ledger* to label harmful use for the
            metrics (App. D.4); costs nothing the agent is charged for.
          prefetch: where the first draft may already have been requested
            (:class:`cfjax.loop.DraftPrefetch`; the same reply either way).
        """
        use_memory = memory and self.store is not None
        return run_episode(
            task, world=self.world, edits=self.edits, ledger=ledger, episode=episode,
            max_attempts=self.config.agent.max_attempts, draft=draft_once(self.backbone, prefetch=prefetch),
            consult=self.consult_fn(policy) if use_memory else no_memory,
            after=self.after_fn(construct=construct, measure_draft=measure_draft, rng=rng or random.Random(episode)))

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

"""CounterMem configuration (papers/countermem.md): store, retrieval, generator, agent, experiments.

Every field cites the paper section its default comes from, or says that
the paper is silent and what we chose. :class:`CounterMemConfig` gathers
them with the selector's :class:`~cfjax.kernels.dqn.DQNConfig` (Table 3) and
the scripted backbone's :class:`~cfjax.config.scripted.ScriptedConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cfjax.config.scripted import ScriptedConfig
from cfjax.infra.index import IndexConfig
from cfjax.kernels.dqn import DQNConfig

__all__ = ["StoreConfig", "RetrievalConfig", "GeneratorConfig", "AgentConfig", "ExperimentConfig",
           "CounterMemConfig", "OBSERVATIONS"]


@dataclass(frozen=True)
class StoreConfig:
    """Memory store (papers/countermem.md §3.3, App. B.1–B.3).

    Normalisations (the paper leaves them to the implementation, App. B.4):
    ``Δ̃ = clip(Δ, 0, 1)`` (utilities are already in [0, 1]);
    ``ũ = u`` (Eq. 6 keeps u in [−1, 1]); ``F = uses / max(1, max uses in
    the store)``; ``R(m, M) = Σ_j sim(c, c_j)·1[edit_j = edit ∧ sim ≥
    redundancy_threshold]`` — a soft count of stored records giving the same
    advice: the same masked edit (exact signature match) under a condition
    whose embedding has cosine ≥ the threshold, so a second confirmation from
    another source task is admitted and a third copy is not; ``I(m, M)`` = the largest
    situation similarity among stored records whose edit is the exact
    reverse of m's and whose conditions can hold together.
    """

    capacity: int = 200  # B, §3.3
    eps_adm: float = 0.05  # ε_adm, raw Δ floor, App. B.1
    lambda_delta: float = 1.0  # Eq. 4 weights (λ_Δ, λ_u, λ_r, λ_I), App. B.4
    lambda_u: float = 0.5
    lambda_r: float = 0.7
    lambda_i: float = 1.0
    tau_adm: float = 0.1  # admission threshold, App. B.4
    alpha: float = 1.0  # Eq. 5 weights (α, β, ω, η), App. B.3
    beta: float = 1.0
    omega: float = 0.5
    eta: float = 0.7
    rho: float = 0.3  # Eq. 6 reuse rate
    redundancy_threshold: float = 0.9  # ours: advice similarity counted as "the same advice"
    retention: str = "utility"  # utility | recency | random | similarity (Fig. 2d ablation)
    seed: int = 0  # for random retention

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"StoreConfig.capacity must be ≥ 1, got {self.capacity}")
        if self.retention not in ("utility", "recency", "random", "similarity"):
            raise ValueError(f"StoreConfig.retention must be utility|recency|random|similarity, got {self.retention!r}")
        if not 0 < self.rho <= 1:
            raise ValueError(f"StoreConfig.rho must be in (0, 1], got {self.rho}")


@dataclass(frozen=True)
class RetrievalConfig:
    """Retrieval, Eq. 7–8 (App. B.4)."""

    k: int = 3  # records returned per retrieval
    lambda_reuse: float = 0.2  # weight of u in Eq. 8
    dim: int = 512  # char n-gram hashing embedding, App. B.4
    use_conditions: bool = True  # False = the no-condition ablation (filter and render)
    # ours: exact search below index.approx_threshold records (every store of capacity B), IVF (IVF-PQ + exact re-rank) above
    index: IndexConfig = field(default_factory=IndexConfig)


@dataclass(frozen=True)
class GeneratorConfig:
    """Module I (§3.2, App. B.4)."""

    k_alternatives: int = 4  # K
    max_expanded: int = 2  # failed decisions expanded per task
    use_backbone: bool = True  # ask GENERATE_LOCAL_ALTERNATIVES first, fill with rules
    verification_budget: int = 12  # ours: counterfactual checks per source task (paper: "while budget remains")
    verify: bool = True  # False = the "CF without WM" ablation (§6.1): store the first proposal unchecked
    unverified_delta: float = 0.5  # ours: nominal Δ of unchecked advice (admission needs Δ > ε_adm)


#: The selector observation layouts (:attr:`AgentConfig.observation`), in the order a decision table
#: stores them (:mod:`cfjax.countermem.table`).
OBSERVATIONS = ("paper", "legacy")


@dataclass(frozen=True)
class AgentConfig:
    """The task-solving loop around the selector.

    The paper's agents (ReAct/Reflexion) take several evaluated attempts per
    task; ours takes up to ``max_attempts`` decisions, each = draft → (record)
    → evaluate, and stops at the first solved attempt. Budget features of the
    observation are normalised by ``max_attempts`` and ``token_budget``.
    """

    max_attempts: int = 2
    token_budget: int = 4000  # per task, for the normalised budget features (not a hard cap)
    construction_uses_memory: bool = True  # reuse top-1 record while building so Eq. 6 gets observations
    # Eq. 6 label reference (App. B.3): the previous evaluated attempt, neutral without one (the paper);
    # "draft_check" runs an extra check of the memory-free draft and labels against it (our option,
    # the `draft_check_labels` ablation row)
    construction_reference: str = "previous_attempt"
    # The selector's Eq. 9 observation (§3.2, App. C.1; issue 22):
    # "paper": E(s) embeds the question, the environment context and the feedback so far (not the
    #   draft, which is E(â) alone); a slot's validity is whether the record is usable at this decision
    #   (its condition holds — the retrieval filter guarantees it unless use_conditions is off — and its
    #   edit carries onto this draft: EditModel.transfer, agent-side), apart from presence (the mask);
    #   the six budget features are attempt index t/T, tokens left, last score, best score so far,
    #   retrieved/k and usable/k (the paper names the first three; the last three are ours).
    # "legacy": the layout before issue 22: E(s) embeds question + draft + last feedback, validity is
    #   presence, budget = remaining attempts, tokens left, failed/T, last score, retrieved/k, is-retry.
    observation: str = "paper"

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"AgentConfig.max_attempts must be ≥ 1, got {self.max_attempts}")
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"AgentConfig.observation must be 'paper' or 'legacy', got {self.observation!r}")
        if self.construction_reference not in ("draft_check", "previous_attempt"):
            raise ValueError("AgentConfig.construction_reference must be 'draft_check' or 'previous_attempt'")


@dataclass(frozen=True)
class ExperimentConfig:
    """The baselines, ablations and analyses of §4–6 (``cfjax countermem run --rows``)."""

    best_of_n: int = 5  # N = 1 + K (App. D.5)
    # ours: the equal record capacity of the retention rows, as a fraction of the records the
    # main (capacity-B) store keeps, so that the limit binds on every suite (at least 1 record)
    retention_fraction: float = 0.4
    accumulation_checkpoints: tuple[int, ...] = (0, 25, 50, 100, 200)  # source tasks (App. D.3)
    # Fig. 2a–c: the memory systems accumulated over the same stream beside CounterMem's store
    # (ReasoningBank is "the memory baseline in the accumulation … studies", §4.1)
    accumulation_systems: tuple[str, ...] = ("reasoningbank",)
    # ours (Fig. 2c): the earliest stream tasks re-solved with every later snapshot (the score lost on them)
    forgetting_tasks: int = 25
    # App. E.2 / Fig. 7: construction tokens per unit every budget row may spend (0 = off; --token-budget N)
    token_budget: int = 0
    # the rows of the common-budget comparison (App. E.2: ReasoningBank, + MaTTS, + verified feedback, CF Memory)
    budget_rows: tuple[str, ...] = ("cf_memory", "reasoningbank", "reasoningbank_matts", "reasoningbank_verified")

    def __post_init__(self) -> None:
        if self.best_of_n < 1:
            raise ValueError(f"ExperimentConfig.best_of_n must be ≥ 1, got {self.best_of_n}")
        if not 0.0 < self.retention_fraction <= 1.0:
            raise ValueError(f"ExperimentConfig.retention_fraction must be in (0, 1], got {self.retention_fraction}")
        if any(c < 0 for c in self.accumulation_checkpoints):
            raise ValueError("ExperimentConfig.accumulation_checkpoints must be ≥ 0")
        if self.forgetting_tasks < 0 or self.token_budget < 0:
            raise ValueError(f"ExperimentConfig.forgetting_tasks and token_budget must be ≥ 0, got "
                             f"{self.forgetting_tasks} and {self.token_budget}")


@dataclass(frozen=True)
class CounterMemConfig:
    """Everything one CounterMem run needs (Algorithm 1)."""

    store: StoreConfig = field(default_factory=StoreConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    scripted: ScriptedConfig = field(default_factory=ScriptedConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    seeds: tuple[int, ...] = (0, 1, 2)  # backbone seeds (the scripted simulator's draws; an LLM's sampling seed)
    # split seeds: each is one twin-free build/train/val/eval split (App. D.2 uses 12345 for the
    # evaluation sample; the other two are ours, so that intervals cover the choice of split)
    split_seeds: tuple[int, ...] = (12345, 1, 2)
    # selector seeds (Table 3: 0–4), separate from backbone seeds: unit j of a suite (split-major,
    # then backbone seed) trains its selector with selector_seeds[j % len(selector_seeds)]
    selector_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_val: int = 20  # selector-validation subset of T_train (App. C.2)
    world_timeout_s: float = 2.0  # ours: wall-clock limit of one check, every world (SQL, tests, solvers)
    # what the evaluator tells the agent: "user" (error text, pass/fail, failing assertions — what a
    # user-facing evaluator returns) or "rich" (also e.g. the expected SQL row count: leaks gold statistics)
    world_feedback: str = "user"

    def __post_init__(self) -> None:
        for name in ("seeds", "split_seeds", "selector_seeds"):
            v = getattr(self, name)
            if not v or len(set(v)) != len(v):
                raise ValueError(f"CounterMemConfig.{name} must be a non-empty tuple of distinct ints, got {v}")
        if self.world_feedback not in ("user", "rich"):
            raise ValueError(f"CounterMemConfig.world_feedback must be 'user' or 'rich', got {self.world_feedback!r}")

    @property
    def split_seed(self) -> int:
        """The first split seed (single-split tools: decision tables, notebooks)."""
        return self.split_seeds[0]

    def selector_seed(self, unit: int) -> int:
        """The selector seed of a suite's ``unit``-th (split seed, backbone seed) unit."""
        return self.selector_seeds[unit % len(self.selector_seeds)]

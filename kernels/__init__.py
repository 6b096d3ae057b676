"""Pure, shape-static JAX kernels (installed as ``cfjax.kernels``); the public API.

No I/O, no strings, no Python loops over data. Factories bind static configuration and return raw
pure functions; ``jax.jit``/``jax.vmap``/sharding are the caller's choice. Every kernel has a NumPy
twin in :mod:`cfjax.kernels.reference` used by the tests and benchmarks. Import public names from
here (``from cfjax.kernels import make_train, NEG``); the modules stay importable.

- :mod:`cfjax.kernels._base` — the ``PyTree`` alias, the one sentinel :data:`NEG`, masked argmax/max,
  the callable ``Protocol`` types of the factories
- :mod:`cfjax.kernels.features` — the 98-d selector observation (CounterMem Eq. 9)
- :mod:`cfjax.kernels.replay` — the one replay ring buffer (Table 3)
- :mod:`cfjax.kernels.dqn` — Q-network, Eq. 10 reward, Table 3 schedule, masked ε-greedy, DQN update (Eq. 10–13)
- :mod:`cfjax.kernels.trainer` — the selector trainer over counterfactual decision tables
- :mod:`cfjax.kernels.topk` — masked cosine top-k with a reuse bias (Eq. 8)
- :mod:`cfjax.kernels.bandit` — Anti-Persistence KNN-UCB mode selection
- :mod:`cfjax.kernels.setscore` — UpliftMem set scorer ``G_θ(c, S)`` and its losses
- :mod:`cfjax.kernels.beam` — UpliftMem beam search and path sampling over memory sets
- :mod:`cfjax.kernels.evsi` — stable ψ/EVSI and Gaussian conditioning
- :mod:`cfjax.kernels.acquire` — greedy rank-one batch probing (EVSI acquisition)
- :mod:`cfjax.kernels.probes` — baseline probe acquisition (random, MC-STD, greedy EIG; §5.5 RQ4)

Two flat names differ from their module names: ``DQNSelector`` (``dqn.Selector``) and
``BanditSelector`` (``bandit.Selector``); the function ``evsi.evsi`` is ``binary_evsi`` here (the
name ``evsi`` is the module).
"""

from cfjax.kernels import (_base, acquire, bandit, beam, dqn, evsi, features, probes, replay, setscore, topk,
                           trainer)

from cfjax.kernels._base import (NEG, PyTree, Array, masked_argmax, masked_max, jit_fields, ScoreFn, ParamScoreFn,
                                 SelectFn, BeamSearchFn, PathSampleFn, PathLogProbFn, AcquireFn, TrainFn, RunFn,
                                 EvaluateFn)
from cfjax.kernels.features import (ADM, BUDGET_DIM, EMBED_DIM, FREQ, GAIN, HELP, N_ACTIONS, N_SLOTS, OBS_DIM,
                                    PROJ_DIM, PROJECTION_SEED, REL, REUSE, SLOT_DIM, SLOT_OFFSET, BUDGET_OFFSET,
                                    VALID, action_mask, normalize_slots, observation, projection_matrix)
from cfjax.kernels.replay import (Batch, Replay, Transition, replay_add, replay_init, replay_sample, ring_push,
                                  ring_sample_indices)
from cfjax.kernels.dqn import (DQNConfig, DQNHParams, Metrics, OnlineLearner, QNetwork, TrainState, epsilon_schedule,
                               jit_online, jit_selector, learn_schedule, make_dqn, make_online, reward,
                               scheduled_update)
from cfjax.kernels.trainer import (DecisionTable, TrainerState, TrainMetrics, TrainOutput, Trainer, make_train,
                                   table_reward, evaluate_policy, table_hash, as_jax)
from cfjax.kernels.topk import masked_topk, masked_topk_normalized, normalize_rows
from cfjax.kernels.bandit import (N_MODES, NONE, IMITATION, STRATEGIC, CORRECTIVE, MODE_NAMES, ROUND_ROBIN, WARMUP,
                                  EPSILON, FALLBACK, KNN_UCB, BRANCH_NAMES, BanditConfig, OutcomeLogArrays,
                                  BanditDecision, LocalEstimates, bandit_reward, cosine_similarity, exploration_draws,
                                  local_estimates, select_mode, make_knn_ucb, empty_log)
from cfjax.kernels.setscore import (SetScorer, UpliftLossConfig, ValueLossParts, huber, init_params, make_feature_fn,
                                    make_score_fn, omega, pair_loss, policy_loss, policy_loss_steps, readout,
                                    reg_loss, sign_loss, value_loss, w_mag)
from cfjax.kernels.beam import (BeamResult, PathSample, PathLogProb, make_beam_search, make_path_sampler,
                                make_path_log_prob, feasible_additions, archive_size)
from cfjax.kernels.evsi import (psi, std_normal_pdf, normal_tail, chebyshev_fit, shared_noise_cov,
                                comparison_variance, comparison_bound, resolved_variance, latent_batch_augment,
                                resolved_variance_latent, blr_posterior)
from cfjax.kernels.acquire import (ARGMAX, SOFTMAX, AcquireInputs, AcquireState, AcquireResult, sanitize_inputs,
                                   acquire_init, acquire_condition, batch_values, make_acquire)
from cfjax.kernels.probes import (MCSTD_JITTER, mcstd_samples, make_acquire_random, make_acquire_mcstd,
                                  make_acquire_eig)
from cfjax.kernels.dqn import Selector as DQNSelector
from cfjax.kernels.bandit import Selector as BanditSelector
from cfjax.kernels.evsi import evsi as binary_evsi

__all__ = [
    # modules
    "acquire", "bandit", "beam", "dqn", "evsi", "features", "probes", "replay", "setscore", "topk", "trainer",
    # _base
    "NEG", "PyTree", "Array", "masked_argmax", "masked_max", "jit_fields", "ScoreFn", "ParamScoreFn", "SelectFn",
    "BeamSearchFn", "PathSampleFn", "PathLogProbFn", "AcquireFn", "TrainFn", "RunFn", "EvaluateFn",
    # features
    "ADM", "BUDGET_DIM", "EMBED_DIM", "FREQ", "GAIN", "HELP", "N_ACTIONS", "N_SLOTS", "OBS_DIM", "PROJ_DIM",
    "PROJECTION_SEED", "REL", "REUSE", "SLOT_DIM", "SLOT_OFFSET", "BUDGET_OFFSET", "VALID", "action_mask",
    "normalize_slots", "observation", "projection_matrix",
    # replay
    "Batch", "Replay", "Transition", "replay_add", "replay_init", "replay_sample", "ring_push", "ring_sample_indices",
    # dqn
    "DQNConfig", "DQNHParams", "Metrics", "QNetwork", "TrainState", "epsilon_schedule", "jit_selector", "jit_online", "make_online", "OnlineLearner",
    "learn_schedule", "make_dqn", "reward", "scheduled_update", "DQNSelector",
    # trainer
    "DecisionTable", "TrainerState", "TrainMetrics", "TrainOutput", "Trainer", "make_train", "table_reward",
    "evaluate_policy", "table_hash", "as_jax",
    # topk
    "masked_topk",
    "masked_topk_normalized",
    "normalize_rows",
    # bandit
    "N_MODES", "NONE", "IMITATION", "STRATEGIC", "CORRECTIVE", "MODE_NAMES", "ROUND_ROBIN", "WARMUP", "EPSILON",
    "FALLBACK", "KNN_UCB", "BRANCH_NAMES", "BanditConfig", "OutcomeLogArrays", "BanditDecision",
    "LocalEstimates", "bandit_reward", "cosine_similarity", "exploration_draws", "local_estimates", "select_mode",
    "make_knn_ucb", "empty_log", "BanditSelector",
    # setscore
    "SetScorer", "UpliftLossConfig", "ValueLossParts", "huber", "init_params", "make_feature_fn", "make_score_fn",
    "omega", "pair_loss", "policy_loss", "policy_loss_steps", "readout", "reg_loss", "sign_loss", "value_loss",
    "w_mag",
    # beam
    "BeamResult", "PathSample", "PathLogProb", "make_beam_search", "make_path_sampler", "make_path_log_prob",
    "feasible_additions", "archive_size",
    # evsi
    "psi", "std_normal_pdf", "normal_tail", "chebyshev_fit", "shared_noise_cov", "comparison_variance",
    "comparison_bound", "resolved_variance", "latent_batch_augment", "resolved_variance_latent", "blr_posterior",
    "binary_evsi",
    # acquire
    "ARGMAX", "SOFTMAX", "AcquireInputs", "AcquireState", "AcquireResult", "sanitize_inputs", "acquire_init",
    "acquire_condition", "batch_values", "make_acquire",
    # probes
    "MCSTD_JITTER", "mcstd_samples", "make_acquire_random", "make_acquire_mcstd", "make_acquire_eig",
]

"""NumPy twins of every kernel (installed as ``cfjax.kernels.reference``): one module per kernel.

Written for clarity, mostly in float64, with the kernels' semantics; the tests compare each kernel
under ``jax.jit`` against its twin, and the benchmarks time the twins next to the kernels. The
references import their kernels (for constants and result types); kernels never import them.

- :mod:`~cfjax.kernels.reference.features` — Eq. 9 observation, slot normalisation, action mask
- :mod:`~cfjax.kernels.reference.dqn` — Eq. 10 reward, Eq. 12–13 loss and gradient by hand, Adam
- :mod:`~cfjax.kernels.reference.trainer` — greedy evaluation over a decision table
- :mod:`~cfjax.kernels.reference.topk` — masked cosine top-k (Eq. 8)
- :mod:`~cfjax.kernels.reference.bandit` — KNN-UCB mode selection (Eq. 3) and the bandit reward
- :mod:`~cfjax.kernels.reference.setscore` — set scorer forward pass and the UpliftMem losses
- :mod:`~cfjax.kernels.reference.beam` — beam search, brute force, path log-probabilities
- :mod:`~cfjax.kernels.reference.evsi` — ψ/EVSI, conditioning, naive and rank-one greedy acquisition
- :mod:`~cfjax.kernels.reference.probes` — baseline probing: random-batch check, MC-STD, naive greedy EIG
"""

from cfjax.kernels.reference import bandit, beam, dqn, evsi, features, probes, setscore, topk, trainer
from cfjax.kernels.reference.bandit import bandit_reward_reference, local_estimates_reference, select_mode_reference
from cfjax.kernels.reference.beam import beam_search_reference, brute_force_reference, path_log_prob_reference
from cfjax.kernels.reference.dqn import (adam_init_reference, dqn_loss_reference, dqn_update_reference,
                                         masked_argmax_reference, q_forward_reference, reward_f32, reward_reference)
from cfjax.kernels.reference.evsi import (batch_values_reference, blr_posterior_reference,
                                          conditional_moments_reference, evsi_reference, evsi_var_reference,
                                          greedy_rank_one_reference, greedy_reference, psi_reference,
                                          resolved_variance_reference, shared_noise_cov_reference)
from cfjax.kernels.reference.features import action_mask_reference, normalize_slots_reference, observation_reference
from cfjax.kernels.reference.probes import eig_reference, mcstd_reference, random_reference
from cfjax.kernels.reference.setscore import (huber_reference, omega_reference, pair_loss_reference,
                                              policy_loss_reference, reg_loss_reference, set_scorer_reference,
                                              sign_loss_reference, value_loss_reference)
from cfjax.kernels.reference.topk import (masked_topk_normalized_reference, masked_topk_reference,
                                          normalize_rows_reference)
from cfjax.kernels.reference.trainer import evaluate_policy_reference

__all__ = [
    # modules
    "bandit", "beam", "dqn", "evsi", "features", "probes", "setscore", "topk", "trainer",
    # features
    "action_mask_reference", "normalize_slots_reference", "observation_reference",
    # dqn / trainer
    "adam_init_reference", "dqn_loss_reference", "dqn_update_reference", "masked_argmax_reference",
    "q_forward_reference", "reward_reference", "reward_f32", "evaluate_policy_reference",
    # topk
    "masked_topk_reference",
    "masked_topk_normalized_reference",
    "normalize_rows_reference",
    # bandit
    "bandit_reward_reference", "local_estimates_reference", "select_mode_reference",
    # setscore
    "huber_reference", "omega_reference", "pair_loss_reference", "policy_loss_reference", "reg_loss_reference",
    "set_scorer_reference", "sign_loss_reference", "value_loss_reference",
    # beam
    "beam_search_reference", "brute_force_reference", "path_log_prob_reference",
    # evsi / acquire
    "batch_values_reference", "blr_posterior_reference", "conditional_moments_reference", "evsi_reference",
    "evsi_var_reference", "greedy_rank_one_reference", "greedy_reference", "psi_reference",
    "resolved_variance_reference", "shared_noise_cov_reference",
    # probes
    "eig_reference", "mcstd_reference", "random_reference",
]

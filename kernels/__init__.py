"""Pure, jitted, shape-static JAX kernels (installed as ``cfjax.kernels``).

No I/O, no strings, no Python loops over data. Every kernel has a NumPy
reference used by the tests and benchmarks.

- :mod:`cfjax.kernels.features` — the 98-d selector observation (CounterMem Eq. 9)
- :mod:`cfjax.kernels.dqn` — Q-network, replay, masked ε-greedy, DQN update (Eq. 10–13)
- :mod:`cfjax.kernels.topk` — masked cosine top-k with a reuse bias (Eq. 8)
- :mod:`cfjax.kernels.trainer` — the selector trainer over counterfactual decision tables
- :mod:`cfjax.kernels.bandit` — Anti-Persistence KNN-UCB mode selection
- :mod:`cfjax.kernels.setscore` — UpliftMem set scorer ``G_θ(c, S)`` and its losses
- :mod:`cfjax.kernels.beam` — UpliftMem beam search and path sampling over memory sets
- :mod:`cfjax.kernels.evsi` — stable ψ/EVSI, Gaussian conditioning, greedy rank-one batch probing
"""

from cfjax.kernels import bandit, beam, dqn, evsi, features, setscore, topk, trainer

__all__ = ["bandit", "beam", "dqn", "evsi", "features", "setscore", "topk", "trainer"]

"""Pure, jitted, shape-static JAX kernels (installed as ``cfjax.kernels``).

No I/O, no strings, no Python loops over data. Every kernel has a NumPy
reference used by the tests and benchmarks.

- :mod:`cfjax.kernels.features` — the 98-d selector observation (CounterMem Eq. 9)
- :mod:`cfjax.kernels.dqn` — Q-network, replay, masked ε-greedy, DQN update (Eq. 10–13)
- :mod:`cfjax.kernels.topk` — masked cosine top-k with a reuse bias (Eq. 8)
"""

from cfjax.kernels import dqn, features, topk

__all__ = ["dqn", "features", "topk"]

"""Pure, jitted, shape-static JAX kernels (installed as ``cfjax.kernels``).

No I/O, no strings, no Python loops over data. Every kernel has a NumPy
reference used by the tests and benchmarks.
"""

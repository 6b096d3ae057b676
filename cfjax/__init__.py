"""cfjax: a JAX learning core for agent memory."""

__version__ = "0.1.0"

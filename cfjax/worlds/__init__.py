"""cfjax.worlds."""

"""cfjax.countermem."""

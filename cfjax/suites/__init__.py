"""cfjax.suites."""

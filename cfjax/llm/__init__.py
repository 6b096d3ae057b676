"""cfjax.llm."""

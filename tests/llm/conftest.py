"""Fixtures of the local-model backbone tests: the tiny model is built once per session.

The tests of :mod:`cfjax.llm.hf` need torch (the ``hf`` extra); without it they are skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random Llama with a locally trained tokenizer and a chat template, saved with
    ``save_pretrained`` (:func:`tests.llm.tiny_hf.build_tiny_model`)."""
    pytest.importorskip("torch")
    from tests.llm.tiny_hf import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_hf") / "model")

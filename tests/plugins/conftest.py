"""Fixtures of the plugin-proof tests (issue 21): the test-only ``toylist`` domain, registered for the
tests that ask for it and unregistered afterwards (so ``--suite all`` elsewhere in the session stays the
built-in suites)."""

from __future__ import annotations

import pytest

from cfjax.registry import DOMAINS


@pytest.fixture(scope="module")
def toylist():
    """The ``toylist`` domain, registered by importing its package (its ``__init__`` registers it)."""
    import tests.plugins.toydomain as toy

    DOMAINS.register(toy.INFO.name, toy.INFO)  # a no-op on first import; re-registers after a teardown
    assert DOMAINS.get("toylist") is toy.INFO
    yield toy
    DOMAINS.unregister(toy.INFO.name)

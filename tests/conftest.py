"""Shared fixtures: the built-in SQL suite is generated once per test session.

Suites and their databases are read-only to every test (evaluations run on
in-memory copies), so one session-wide copy serves all test files.
"""

from __future__ import annotations

import pytest

from cfjax.domains.sql import SQLSuite


@pytest.fixture(scope="session", autouse=True)
def _private_llm_cache(tmp_path_factory):
    """The default LLM response cache of the CLI lives under ``$CFJAX_CACHE_DIR``: point it at this
    session's temporary folder, so no test reads replies another run (or the user) cached."""
    import os

    old = os.environ.get("CFJAX_CACHE_DIR")
    os.environ["CFJAX_CACHE_DIR"] = str(tmp_path_factory.mktemp("llm-cache"))
    yield
    if old is None:
        os.environ.pop("CFJAX_CACHE_DIR", None)
    else:
        os.environ["CFJAX_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def suite(tmp_path_factory) -> SQLSuite:
    return SQLSuite.build(tmp_path_factory.mktemp("sqlsuite"))


@pytest.fixture(scope="module")
def world(suite):
    w = suite.world()
    yield w
    w.close()

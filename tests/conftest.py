"""Shared fixtures: the built-in SQL suite is generated once per test session.

Suites and their databases are read-only to every test (evaluations run on
in-memory copies), so one session-wide copy serves all test files.
"""

from __future__ import annotations

import pytest

from cfjax.domains.sql import SQLSuite


@pytest.fixture(scope="session")
def suite(tmp_path_factory) -> SQLSuite:
    return SQLSuite.build(tmp_path_factory.mktemp("sqlsuite"))


@pytest.fixture(scope="module")
def world(suite):
    w = suite.world()
    yield w
    w.close()

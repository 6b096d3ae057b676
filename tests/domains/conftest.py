"""Domain tests check each suite's *lexicon*: the cue parser runs without its documented errors here.

``cfjax.domains.base.match_cues`` misses a cue with ``CUE_MISS_RATE`` and mislabels one with
``CUE_NOISE_RATE`` (tests/domains/test_cue_parser.py measures both). Tests of what a question
*should* parse to ask for the ``exact`` fixture (no parser errors inside the test body), and tests
of every task's attributes use suites built with the exact parser (``exact_suites``).
"""

from __future__ import annotations

import pytest

from cfjax.domains.base import exact_cue_parser


@pytest.fixture
def exact():
    with exact_cue_parser():
        yield


@pytest.fixture(scope="module")
def exact_suites(tmp_path_factory):
    """``name → suite`` built with the exact parser (lazily, once per module)."""
    from cfjax.domains import build_suite

    built: dict = {}

    def get(name: str):
        if name not in built:
            with exact_cue_parser():
                built[name] = build_suite(name, tmp_path_factory.mktemp(f"exact_{name}"))
        return built[name]

    return get

"""The cue parser (``match_cues``): word boundaries, longest match first, documented miss/noise rates."""

from __future__ import annotations

import pytest

from cfjax.countermem.conditions import parse_condition
from cfjax.domains.base import CUE_MISS_RATE, CUE_NOISE_RATE, match_cues
from cfjax.types import contains_phrase

LEX = {"at least": ("boundary", "inclusive"), "more than": ("boundary", "exclusive"),
       "no more than": ("boundary", "inclusive"), "distinct": ("cardinality", "distinct")}
SIDES = {"at least": "lower", "more than": "lower", "no more than": "upper"}


def exact(q: str) -> dict:
    return match_cues(q, LEX, SIDES, {}, miss_rate=0.0, noise_rate=0.0)


def test_word_boundaries_and_longest_phrase_first():
    assert exact("Orders with no more than 3 items")["cues"] == ("no more than",)
    assert exact("Orders with no more than 3 items")["bound_side"] == "upper"
    assert exact("more than 3")["boundary"] == "exclusive"
    assert exact("Flat leastwise")["cues"] == ()
    assert exact("indistinct furthermore thank")["cues"] == ()
    assert exact("AT   LEAST 2")["cues"] == ("at least",)


def test_contains_phrase_is_on_word_boundaries_everywhere():
    assert contains_phrase("earn at least 5", "at least")
    assert not contains_phrase("flat leastwise", "at least")
    assert not contains_phrase("the indistinct rows", "distinct")
    assert contains_phrase("no  more THAN 3", "more than")  # literal: the words are there
    cond = parse_condition('question contains "distinct"')
    assert cond.evaluate({"question": "list the distinct cities"})
    assert not cond.evaluate({"question": "an indistinct request"})


def test_the_parser_is_deterministic_per_question():
    q = "employees earning at least 5000"
    assert match_cues(q, LEX, SIDES, {}) == match_cues(q, LEX, SIDES, {})


@pytest.mark.parametrize("miss,noise", [(CUE_MISS_RATE, CUE_NOISE_RATE), (0.3, 0.2)])
def test_miss_and_noise_rates_match_the_documented_parameters(miss, noise):
    n = 4000
    got = [match_cues(f"task {i}: salaries of at least {i}", LEX, SIDES, {}, miss_rate=miss, noise_rate=noise)
           for i in range(n)]
    missed = sum(g["cues"] == () for g in got) / n
    wrong = sum(g.get("boundary") == "exclusive" for g in got) / n
    se = lambda p: 3 * (p * (1 - p) / n) ** 0.5 + 1e-9  # noqa: E731
    assert abs(missed - miss) <= se(miss)
    assert abs(wrong - noise) <= se(noise)


def test_bad_rates_raise():
    with pytest.raises(ValueError, match="miss_rate"):
        match_cues("x", LEX, SIDES, {}, miss_rate=1.5)

"""The executor's documented response to a memory set (the scripted simulator) and the writer/reviser
contracts through a real OpenAI-compatible client."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cfjax.config import ScriptedConfig
from cfjax.llm import prompts
from cfjax.llm.calls import DRAFT_ACTION
from cfjax.llm.openai_client import OpenAIBackbone, OpenAIConfig
from cfjax.llm.scripted import ScriptedBackbone
from cfjax.types import Attempt, DraftRequest, MemoryText
from cfjax.uplift.calls import REVISE_MEMORY, WRITE_MEMORY, ReviseMemoryRequest, WriteMemoryRequest
from tests.llm_server import FakeLLMServer

N = 400  # draws per probability check (binomial sd ≤ 0.025)


def _case(suite, bb):
    """A task with a phrase, ``bb``'s memory-free draft of it and a one-unit edit the executor can carry
    onto that draft: searched with the backbone the tests use, so the edit transfers onto the very draft
    they measure. The built-in SQL suite always has one (its lower-bound tasks); none is a regression
    of the suite or its edit model, and fails here instead of skipping the tests."""
    env_of = bb.domain.env
    searched = 0
    for t in suite.tasks:
        cues = t.attrs.get("cues", ())
        if not cues:
            continue
        searched += 1
        draft = bb.call(DRAFT_ACTION, DraftRequest(t, (), 0)).action
        edits = suite.edits.rule_edits(draft, env_of(t))
        for i, new in edits:
            before = suite.edits.units(draft)[i].text
            moved = suite.edits.transfer(before, new, draft, env_of(t))
            if moved is not None and moved != draft:
                return t, cues[0], before, new
    pytest.fail(f"no task of the {suite.name} suite ({searched} with a cue phrase) has a rule edit that transfers "
                "onto its memory-free draft: the memory-prompt tests need one", pytrace=False)


def _rate(bb, task, text, *, episodes=N) -> float:
    """How often a memory set changes the draft (over ``episodes`` draft seeds)."""
    changed = 0
    for e in range(episodes):
        base = bb.call(DRAFT_ACTION, DraftRequest(task, (), e)).action
        with_mem = bb.call(DRAFT_ACTION, DraftRequest(task, (), e, memory=MemoryText("memories", text))).action
        changed += with_mem != base
    return changed / episodes


@pytest.fixture(scope="module")
def setup(suite):
    cfg = ScriptedConfig(seed=3, p_error=0.0, p_noise=0.0)  # the draft is then the same on every episode
    bb = ScriptedBackbone(suite.scripted_domain(), cfg)
    t, cue, before, after = _case(suite, bb)
    return bb, t, cue, before, after


def test_relevant_rule_is_followed_with_documented_probability(setup):
    bb, t, cue, b, a = setup
    text = prompts.render_memory_set([("m1", prompts.render_rule("r1", cue, b, a))])
    adh = 1.0 / (1.0 + prompts.count_tokens(text) / bb.config.adherence_tokens)
    assert _rate(bb, t, text) == pytest.approx(bb.config.p_follow_guidance * adh, abs=0.07)


def test_out_of_scope_rule_misleads_with_documented_probability(setup):
    bb, t, cue, b, a = setup
    text = prompts.render_memory_set([("m1", prompts.render_rule("r1", "zz no such phrase", b, a))])
    adh = 1.0 / (1.0 + prompts.count_tokens(text) / bb.config.adherence_tokens)
    assert _rate(bb, t, text) == pytest.approx(bb.config.p_out_of_scope * adh, abs=0.06)


def test_linked_notes_help_only_together(setup):
    bb, t, cue, b, a = setup
    trig, fix = prompts.render_trigger("t1", cue), prompts.render_fix("t1", b, a)
    assert _rate(bb, t, prompts.render_memory_set([("m1", trig)]), episodes=100) == 0.0
    assert _rate(bb, t, prompts.render_memory_set([("m2", fix)]), episodes=100) == 0.0
    both = prompts.render_memory_set([("m1", trig), ("m2", fix)])
    assert _rate(bb, t, both, episodes=200) > 0.5


def test_outdated_next_to_its_update_misleads_with_documented_probability(setup):
    bb, t, cue, b, a = setup
    # the outdated memory carries the edit; its update says the pattern stays (a no-op replacement)
    old = prompts.render_rule("r1", cue, b, a)
    new = prompts.render_rule("r2", cue, b, b) + "\nSUPERSEDES: m1"
    text = prompts.render_memory_set([("m1", old), ("m2", new)])
    adh = 1.0 / (1.0 + prompts.count_tokens(text) / bb.config.adherence_tokens)
    rate = _rate(bb, t, text)
    assert rate == pytest.approx(bb.config.p_outdated_confusion * bb.config.p_follow_guidance * adh, abs=0.06)
    alone = _rate(bb, t, prompts.render_memory_set([("m1", old)]), episodes=200)
    assert alone > rate + 0.2  # shown alone, the outdated memory is just a memory


def test_adherence_falls_as_the_context_fills(setup):
    bb, t, cue, b, a = setup
    rule = ("m1", prompts.render_rule("r1", cue, b, a))
    filler = [(f"f{i}", "A note about an unrelated topic: " + " ".join(["context"] * 60)) for i in range(6)]
    short = _rate(bb, t, prompts.render_memory_set([rule]))
    long = _rate(bb, t, prompts.render_memory_set([rule] + filler))
    assert long < short - 0.15


def test_memory_free_draft_is_paired_across_sets(suite):
    """With the default error model, the part of the draft memory cannot touch is the same for any set:
    an empty-effect memory (unknown phrase, p_out_of_scope = 0) leaves every draft unchanged."""
    cfg = dataclasses.replace(ScriptedConfig(seed=5), p_out_of_scope=0.0)
    bb = ScriptedBackbone(suite.scripted_domain(), cfg)
    text = prompts.render_memory_set([("m1", prompts.render_rule("r1", "zz no such phrase", "x", "y"))])
    for t in list(suite.tasks)[:40]:
        for e in range(3):
            assert (bb.call(DRAFT_ACTION, DraftRequest(t, (), e)).action
                    == bb.call(DRAFT_ACTION, DraftRequest(t, (), e, memory=MemoryText("memories", text))).action)


def _fast(srv) -> OpenAIConfig:
    return OpenAIConfig(base_url=srv.base_url, model="test-model", backoff_s=0.001, timeout_s=5.0)


def test_writer_and_reviser_through_an_openai_compatible_client(suite):
    t = next(x for x in suite.tasks if x.attrs.get("cues"))
    reply = ("Here is the memory.\nMEMORY:\nLesson: recheck the bound.\n"
             + prompts.render_rule("r1", t.attrs["cues"][0], "a", "b") + "\nEND MEMORY")
    replies = iter([reply, "MEMORY: none", "no contract at all", reply])
    with FakeLLMServer(lambda prompt: next(replies)) as srv:
        bb = OpenAIBackbone(_fast(srv))
        traj = (Attempt("SELECT 1", "wrong result", 0.0), Attempt("SELECT 2", "ok", 1.0))
        w = bb.call(WRITE_MEMORY, WriteMemoryRequest(t, traj, True, (("m3", "an older memory"),)))
        none = bb.call(WRITE_MEMORY, WriteMemoryRequest(t, traj, True))
        bad = bb.call(WRITE_MEMORY, WriteMemoryRequest(t, traj, True))
        r = bb.call(REVISE_MEMORY, ReviseMemoryRequest(t, w.text, traj, True, 1.0, 1.0))
        sent = [q.prompt for q in srv.requests]
    assert w.text.startswith("Lesson:") and "RULE r1" in w.text and w.usage.total > 0
    assert none.text == "" and bad.text == "" and r.text == w.text
    assert t.question in sent[0] and "[m3] an older memory" in sent[0] and "Attempt 2: SELECT 2" in sent[0]
    assert "Uplift: +0.000 (target > 0)" in sent[3] and "latest validated candidate" in sent[3]


def test_scripted_writer_output_parses_and_respects_the_boundary(suite):
    from cfjax.types import answer_key_guard

    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=1))
    texts = []
    with answer_key_guard():
        for e, t in enumerate(list(suite.tasks)[:60]):
            d0 = bb.call(DRAFT_ACTION, DraftRequest(t, (), e)).action
            traj = (Attempt(d0, "wrong", 0.0), Attempt(d0 + " ", "ok", 1.0))
            res = bb.call(WRITE_MEMORY, WriteMemoryRequest(t, traj, False))
            if res.text:
                texts.append(res.text)
                lines = prompts.parse_memory_lines(res.text)
                assert lines.rules or lines.triggers or lines.fixes
    assert len(texts) > 10
    assert np.mean(["ALWAYS" in x for x in texts]) < 0.6

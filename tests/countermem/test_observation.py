"""The selector's Eq. 9 observation as §3.2 and App. C.1 define it (``agent.observation = "paper"``) and
the earlier layout (``"legacy"``), field by field with hand-computed expectations (issue 22 item 3)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cfjax.config import CounterMemConfig
from cfjax.countermem.agent import Agent
from cfjax.countermem.store import Record, RecordStats, Retrieved
from cfjax.domains import build_suite
from cfjax.infra.embed import HashingEmbedder
from cfjax.kernels import features as F
from cfjax.llm.scripted import ScriptedBackbone, ScriptedConfig
from cfjax.types import Attempt, answer_key_guard


def _config(observation: str) -> CounterMemConfig:
    c = CounterMemConfig()
    return dataclasses.replace(c, agent=dataclasses.replace(c.agent, observation=observation))


@pytest.fixture(scope="module")
def sql(tmp_path_factory):
    suite = build_suite("sql", tmp_path_factory.mktemp("obs") / "sql")
    task = next(t for t in suite.tasks if suite.keys[t.task_id].variant == "base")
    draft = suite.keys[task.task_id].gold  # any parseable action (the test is analysis; the agent never sees keys)
    env = dict(suite.envs())[task.env_id]
    i, new = suite.edits.rule_edits(draft, env)[0]
    before = suite.edits.units(draft)[i].text
    return suite, task, draft, before, new


def _agent(suite, observation: str) -> Agent:
    return Agent(ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=0)), suite.world(), _config(observation),
                 edits=suite.edits, envs=dict(suite.envs()), embedder=HashingEmbedder())


def _retrieved(before: str, after: str, rel: float = 0.5) -> Retrieved:
    rec = Record("src", "situation", "a-", "a+", before, after, "evidence", "none", 0.0, 1.0, record_id=1,
                 admission_score=0.7)
    return Retrieved(rec, RecordStats(u=0.25, uses=2, helpful=1), rel, rel)


def test_paper_validity_is_the_edit_applying_and_presence_is_the_mask(sql):
    suite, task, draft, before, after = sql
    ag = _agent(suite, "paper")
    applies = _retrieved(before, after)
    foreign = _retrieved("zzz_no_such_unit_shape(1, 2, 3, 4, 5)", "zzz_other(1)")
    assert ag.usable(task, draft, applies) and not ag.usable(task, draft, foreign)
    history = [Attempt(draft, "wrong result: 3 rows", 0.4)]
    with answer_key_guard():  # validity and the whole observation read nothing from an answer key
        es = ag.embedder.embed([ag.observation_state_text(task, history)])[0]
        z, mask = ag.observe(es, draft, [applies, foreign], history, attempt=1, tokens_so_far=1000, task=task)
    slots = z[F.SLOT_OFFSET:F.BUDGET_OFFSET].reshape(4, 7)
    assert slots[0, F.VALID] == 1.0 and slots[1, F.VALID] == 0.0  # present but unusable: feature 0 ...
    assert slots[1, F.REL] == pytest.approx(0.5) and slots[1, F.FREQ] == pytest.approx(2 / 3)  # ... fields kept
    assert np.all(slots[2:] == 0.0)
    assert mask.tolist() == [True, True, True, False, False]  # ... and still selectable
    k = CounterMemConfig().retrieval.k
    # attempt index 1/2, tokens left 1 - 1000/4000, last score, best score, retrieved/k, usable/k
    np.testing.assert_allclose(z[F.BUDGET_OFFSET:], [0.5, 0.75, 0.4, 0.4, 2 / k, 1 / k], atol=1e-6)


def test_paper_state_embeds_task_environment_and_feedback_not_the_draft(sql):
    suite, task, draft, before, after = sql
    h = [Attempt("SELECT 1", "first feedback", 0.0), Attempt("SELECT 2", "second feedback", 0.5)]
    text = Agent.observation_state_text(task, h)
    assert text == "\n".join([task.question, task.context, "first feedback", "second feedback"])
    assert "SELECT 1" not in text and draft not in text
    ag = _agent(suite, "paper")
    es = ag.embedder.embed([text])[0]
    z1, _ = ag.observe(es, draft, [], h, attempt=2, tokens_so_far=0, task=task)
    z2, _ = ag.observe(es, "SELECT 42", [], h, attempt=2, tokens_so_far=0, task=task)
    np.testing.assert_array_equal(z1[:32], z2[:32])  # E(s) does not move with the draft
    assert not np.array_equal(z1[32:64], z2[32:64])  # E(â) does


def test_legacy_layout_is_the_earlier_one(sql):
    suite, task, draft, before, after = sql
    ag = _agent(suite, "legacy")
    foreign = _retrieved("zzz_no_such_unit_shape(1, 2, 3, 4, 5)", "zzz_other(1)")
    h = [Attempt(draft, "fb", 0.4)]
    es = ag.embedder.embed([Agent.state_text(task, h, draft)])[0]
    z, mask = ag.observe(es, draft, [foreign], h, attempt=1, tokens_so_far=1000, task=task)
    assert z[F.SLOT_OFFSET + F.VALID] == 1.0 and mask.tolist() == [True, True, False, False, False]
    k = CounterMemConfig().retrieval.k
    # remaining attempts (2-1)/2, tokens left, failed/2, last score, retrieved/k, is-retry
    np.testing.assert_allclose(z[F.BUDGET_OFFSET:], [0.5, 0.75, 0.5, 0.4, 1 / k, 1.0], atol=1e-6)


def test_the_observation_option_is_checked():
    with pytest.raises(ValueError, match="observation must be 'paper' or 'legacy'"):
        _config("v3")


def test_a_draft_that_does_not_parse_makes_no_record_usable(sql):
    suite, task, draft, before, after = sql
    assert not _agent(suite, "paper").usable(task, "SELEC FROM WHERE ((", _retrieved(before, after))

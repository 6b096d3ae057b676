"""The prompts show a task's action language as its registered domain declares it (issue 21, item 5).

The texts are pinned here byte for byte (they were ``cfjax.llm.prompts.DOMAINS`` before the domains
declared them): moving them must not change a prompt. An undeclared language is one clear error,
never the SQL prompts.
"""

from __future__ import annotations

import pytest

from cfjax.llm import prompts
from cfjax.types import DraftRequest, JudgeRequest, ReviseRequest, MemoryText, Task

PINNED = {
    "sql": ("You are an agent that writes SQL queries for SQLite databases.", "query", "sql"),
    "python": ("You are an agent that repairs Python functions so that their unit tests pass. "
               "The action is the complete source of the function.", "function", "python"),
    "sat": ("You are an agent that writes propositional encodings of combinatorial problems in the cfjax "
            "constraint language, one constraint group per line; a SAT solver solves them.", "encoding", "text"),
    "smt": ("You are an agent that writes SMT-LIB 2 encodings (QF_LIA) of scheduling and arithmetic "
            "problems, one assertion per line; an SMT solver solves them.", "encoding", "smt2"),
}


def _task(lang: str) -> Task:
    return Task(f"t/{lang}", "q?", "env", "ctx", {"question": "q?"}, domain=lang)


@pytest.mark.parametrize("lang", sorted(PINNED))
def test_the_registered_languages_keep_their_texts(lang):
    system, noun, fence = PINNED[lang]
    t = _task(lang)
    assert (prompts.system_line(t), prompts.action_noun(t), prompts.code_fence(t)) == (system, noun, fence)
    text = prompts.render_draft(DraftRequest(t))
    assert text.startswith(system + "\n\n") and f"```{fence}\n<your {noun}>\n```" in text
    assert prompts.format_action("  a  ", lang) == f"ACTION:\n```{fence}\na\n```"


@pytest.mark.parametrize("render", [
    lambda t: prompts.render_draft(DraftRequest(t)),
    lambda t: prompts.render_revise(ReviseRequest(t, (), "x", MemoryText("record", "EDIT: a -> b"))),
    lambda t: prompts.render_judge(JudgeRequest(t, (), ("a", "b"))),
    lambda t: prompts.system_line(t),
    lambda t: prompts.code_fence(t),
    lambda t: prompts.action_noun(t),
    lambda t: prompts.format_action("a", t.domain),
], ids=["draft", "revise", "judge", "system_line", "code_fence", "action_noun", "format_action"])
def test_an_unknown_language_is_a_clear_error_not_the_sql_prompts(render):
    with pytest.raises(ValueError) as e:
        render(_task("cobol"))
    msg = str(e.value)
    assert "'cobol'" in msg and "registered languages: sql, python, sat, smt" in msg
    assert "domains: sql, pybugs, sat" in msg and "\n" not in msg


def test_the_default_language_of_format_action_is_still_sql():
    assert prompts.format_action("SELECT 1") == "ACTION:\n```sql\nSELECT 1\n```"

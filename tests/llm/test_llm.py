"""Prompts, parsers and the OpenAI-compatible client (against a loopback server)."""

from __future__ import annotations

import dataclasses
import pickle
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cfjax.countermem.calls import (
    DISTIL_RECORD,
    GENERATE_LOCAL_ALTERNATIVES,
    AlternativesRequest,
    DistilRequest,
    parse_distil,
    parse_edits,
    render_alternatives,
    render_distil,
)
from cfjax.llm import prompts
from cfjax.llm.base import (
    Attempt,
    Backbone,
    DraftRequest,
    ReviseRequest,
    Usage,
)
from cfjax.llm.calls import DRAFT_ACTION, REVISE_WITH_RECORD
from cfjax.llm.openai_client import LLMError, OpenAIBackbone, OpenAIConfig
from cfjax.types import MemoryText, Task

from tests.llm_server import FakeLLMServer, server_usage  # noqa: E402

ENV_NAMES = ("CFJAX_LLM_BASE_URL", "CFJAX_LLM_MODEL", "CFJAX_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")


def make_task(i: int = 0, context: str = "CREATE TABLE emp(id INTEGER, dept TEXT, salary REAL);") -> Task:
    return Task(
        task_id=f"sql/hr/at_least/{i:03d}",
        question=f"List departments with at least {i + 2} employees.",
        env_id="hr",
        context=context,
        attrs={"question": "q", "db": "hr"},
    )


def marker_end(text: str) -> bool:
    return text.endswith("…[truncated]")


# --------------------------------------------------------------------------- prompts: truncation


def test_truncate_exact_limit_and_marker():
    lim = prompts.LIMITS["feedback"]
    assert prompts.truncate("x" * lim, "feedback") == "x" * lim
    cut = prompts.truncate("x" * (lim + 1), "feedback")
    assert len(cut) == lim and marker_end(cut)


def test_render_draft_truncates_context_and_history():
    ctx = "C" * 10_000
    hist = [Attempt(action="A" * 5000, feedback="F" * 5000, score=0.0) for _ in range(3)]
    task = make_task(context=ctx)
    p = prompts.render_draft(DraftRequest(task, hist))
    assert task.question in p and "ACTION:" in p
    assert "C" * prompts.LIMITS["context"] not in p
    assert "C" * (prompts.LIMITS["context"] - 20) in p
    # the whole history (state) is cut to its limit, so no action survives in full
    assert "A" * prompts.LIMITS["action"] not in p
    assert len(p) < len(ctx)
    history_part = p.split("### Earlier attempts\n", 1)[1].split("\n\n### Instructions", 1)[0]
    assert len(history_part) == prompts.LIMITS["state"] and marker_end(history_part)
    assert "(no earlier attempts)" in prompts.render_draft(DraftRequest(make_task()))


def test_render_alternatives_truncates_fields_and_lists_units():
    req = AlternativesRequest(
        make_task(),
        history=(),
        action="S" * 9000,
        feedback="F" * 9000,
        units=["SELECT dept", "FROM emp", "GROUP BY dept", "HAVING COUNT(*) > 2"],
        k=3,
    )
    p = render_alternatives(req)
    assert "[3] HAVING COUNT(*) > 2" in p and "at most 3 local edits" in p
    assert "S" * (prompts.LIMITS["action"] + 1) not in p and "S" * (prompts.LIMITS["action"] - 20) in p
    assert "F" * (prompts.LIMITS["feedback"] + 1) not in p and "F" * (prompts.LIMITS["feedback"] - 20) in p
    big_units = render_alternatives(
        AlternativesRequest(make_task(), (), "SELECT 1", "err", units=["U" * 3000] * 5)
    )
    assert "[1] " in big_units and "[4] " not in big_units  # units block cut to LIMITS["units"]


def test_render_distil_and_revise_truncate():
    d = render_distil(
        DistilRequest(make_task(), "O" * 9000, "I" * 9000, "HAVING COUNT(*) > 2", "HAVING COUNT(*) >= 2", "E" * 9000)
    )
    assert "HAVING COUNT(*) > 2 -> HAVING COUNT(*) >= 2" in d and "CONDITION:" in d
    for ch, field in (("O", "action"), ("I", "action"), ("E", "feedback")):
        assert ch * (prompts.LIMITS[field] + 1) not in d and ch * (prompts.LIMITS[field] - 20) in d
    r = prompts.render_revise(ReviseRequest(make_task(), (), "D" * 9000, MemoryText("record", "R" * 9000)))
    assert "D" * (prompts.LIMITS["action"] + 1) not in r
    assert "R" * (prompts.LIMITS["record"] + 1) not in r and "R" * (prompts.LIMITS["record"] - 20) in r


# --------------------------------------------------------------------------- prompts: parsers


def test_parse_action_fenced_line_and_default():
    assert prompts.parse_action("ACTION:\n```sql\nSELECT 1\n```") == "SELECT 1"
    assert prompts.parse_action("think...\nACTION:\n```\nSELECT 2;\n```\ntrailing") == "SELECT 2;"
    # the fence after ACTION: wins over an earlier one
    assert prompts.parse_action("```sql\nSELECT 0\n```\nACTION:\n```sql\nSELECT 3\n```") == "SELECT 3"
    assert prompts.parse_action("Sure.\n```sql\nSELECT 4\n```") == "SELECT 4"
    assert prompts.parse_action("ACTION: SELECT 5 FROM t") == "SELECT 5 FROM t"
    assert prompts.parse_action("no contract here") == ""
    assert prompts.parse_action("no contract here", default="DRAFT") == "DRAFT"
    # an empty ACTION: line does not swallow the next line
    assert prompts.parse_action("ACTION:\n```sql\n```", default="DRAFT") == "DRAFT"
    assert prompts.parse_action(prompts.format_action("  SELECT 6  ")) == "SELECT 6"


def test_parse_edits_valid_range_duplicates_and_k():
    text = "\n".join(
        [
            "EDIT: REPLACE [0] WITH SELECT name",
            "EDIT: REPLACE [7] WITH out of range",
            "EDIT: REPLACE [0] WITH SELECT name",  # duplicate
            "edit 2: replace [2] with `HAVING COUNT(*) >= 2`",
            "EDIT: REPLACE [1] WITH ",  # empty replacement
            "EDIT: REPLACE [3] WITH ORDER BY 1",
            "EDIT: REPLACE [1] WITH FROM staff",
        ]
    )
    assert parse_edits(text, n_units=4, k=10) == [
        (0, "SELECT name"),
        (2, "HAVING COUNT(*) >= 2"),
        (3, "ORDER BY 1"),
        (1, "FROM staff"),
    ]
    assert parse_edits(text, n_units=4, k=2) == [(0, "SELECT name"), (2, "HAVING COUNT(*) >= 2")]
    assert parse_edits(text, n_units=4, k=0) == []
    assert parse_edits(text, n_units=0, k=4) == []
    assert parse_edits("SELECT a FROM b", n_units=3, k=4) == []


def test_parse_distil_lines_missing_and_none():
    assert parse_distil('SITUATION: counted strictly\nCONDITION: question contains "at least"') == (
        "counted strictly",
        'question contains "at least"',
    )
    assert parse_distil("blah\n  SITUATION:  x  \n CONDITION:   none  \n") == ("x", "none")
    assert parse_distil("SITUATION: only a situation") == ("only a situation", "")
    assert parse_distil("CONDITION: none") == ("", "none")
    assert parse_distil("nothing") == ("", "")
    # an empty line value never borrows the next line
    assert parse_distil("SITUATION:\nCONDITION: none") == ("", "none")
    assert parse_distil("SITUATION: s\nCONDITION:\nmore text") == ("s", "")


# --------------------------------------------------------------------------- prompts: records


def _record(original: str, improved: str, condition: str | None, situation: str = "off by one", evidence: str = "ok"):
    return prompts.render_record(
        situation, "HAVING COUNT(*) > 2", "HAVING COUNT(*) >= 2", original, improved, evidence, condition
    )


def _drop_condition(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.startswith("APPLIES WHEN: "))


@pytest.mark.parametrize("size", [20, 700, 20_000])
def test_render_record_variants_differ_only_by_condition(size):
    orig, impr = "SELECT " + "a" * size, "SELECT " + "b" * size
    cond = 'question contains "at least" and db = "hr"'
    with_c = _record(orig, impr, cond)
    without = _record(orig, impr, None)
    assert len(with_c) <= prompts.LIMITS["record"] and len(without) <= prompts.LIMITS["record"]
    assert with_c.split("\n")[-1] == f"APPLIES WHEN: {cond}"
    assert "APPLIES WHEN" not in without
    assert _drop_condition(with_c) == without
    for head in ("SITUATION: ", "EDIT: ", "ORIGINAL: ", "IMPROVED: ", "EVIDENCE: "):
        assert head in without
    assert _record("SELECT 1", "SELECT 2", "")[-len("APPLIES WHEN: none") :] == "APPLIES WHEN: none"


def test_render_record_keeps_condition_when_other_fields_are_huge():
    rec = _record("X" * 9000, "Y" * 9000, 'has group_by', situation="S" * 900, evidence="E" * 900)
    assert len(rec) <= prompts.LIMITS["record"]
    assert rec.endswith("\nAPPLIES WHEN: has group_by")
    assert _drop_condition(rec) == _record("X" * 9000, "Y" * 9000, None, situation="S" * 900, evidence="E" * 900)


# --------------------------------------------------------------------------- prompts: tokens


def test_count_tokens_deterministic_and_monotone():
    text = "SELECT dept, COUNT(*) FROM employees GROUP BY dept HAVING COUNT(*) >= 2;"
    assert prompts.count_tokens(text) == prompts.count_tokens(text) > 0
    assert prompts.count_tokens("") == 0
    assert prompts.count_tokens("abcd") == 1 and prompts.count_tokens("abcde") == 2
    prev = 0
    for i in range(1, len(text) + 1):
        n = prompts.count_tokens(text[:i])
        assert n >= prev
        prev = n
    assert prompts.count_tokens(text + " extra words") > prompts.count_tokens(text)


# --------------------------------------------------------------------------- OpenAI client

UNITS = ["SELECT dept", "FROM emp", "GROUP BY dept", "HAVING COUNT(*) > 2"]
DRAFT_REPLY = "Reasoning...\nACTION:\n```sql\nSELECT dept FROM emp GROUP BY dept HAVING COUNT(*) > 2\n```"
EDITS_REPLY = "EDIT: REPLACE [3] WITH HAVING COUNT(*) >= 2\nEDIT: REPLACE [9] WITH nope\nEDIT: REPLACE [0] WITH SELECT dept, COUNT(*)"
DISTIL_REPLY = 'SITUATION: "at least" was read as strictly greater\nCONDITION: question contains "at least"'
REVISE_REPLY = "ACTION:\n```sql\nSELECT dept FROM emp GROUP BY dept HAVING COUNT(*) >= 2\n```"


def contract_responder(prompt: str) -> str:
    """Answer with the contract of whichever template the prompt is."""
    if "### Decision units" in prompt:
        return EDITS_REPLY
    if "### Changed decision unit" in prompt:
        return DISTIL_REPLY
    if "### A stored correction" in prompt:
        return REVISE_REPLY
    if "### Earlier attempts" in prompt:
        return DRAFT_REPLY
    return "unknown template"


def fast_config(srv: FakeLLMServer, **kw) -> OpenAIConfig:
    base = dict(base_url=srv.base_url, model="test-model", backoff_s=0.001, timeout_s=5.0)
    base.update(kw)
    return OpenAIConfig(**base)


def all_requests(task: Task):
    hist = (Attempt("SELECT dept FROM emp GROUP BY dept HAVING COUNT(*) > 2", "wrong result: 2 rows, expected 3", 0.0),)
    return (
        DraftRequest(task, hist),
        AlternativesRequest(task, hist, hist[0].action, hist[0].feedback, UNITS, k=4),
        DistilRequest(task, hist[0].action, REVISE_REPLY, UNITS[3], "HAVING COUNT(*) >= 2", "3 rows, matches"),
        ReviseRequest(task, hist, hist[0].action, MemoryText("record", _record("a", "b", 'question contains "at least"'))),
    )


def test_client_all_four_calls_with_server_usage():
    task = make_task()
    dreq, areq, sreq, rreq = all_requests(task)
    with FakeLLMServer(contract_responder) as srv:
        bb = OpenAIBackbone(fast_config(srv, api_key="sk-test", seed=7, max_tokens=256, temperature=0.3))
        assert isinstance(bb, Backbone) and bb.name == "openai:test-model"
        draft = bb.call(DRAFT_ACTION, dreq)
        alts = bb.call(GENERATE_LOCAL_ALTERNATIVES, areq)
        dist = bb.call(DISTIL_RECORD, sreq)
        rev = bb.call(REVISE_WITH_RECORD, rreq)
        reqs = list(srv.requests)

    assert draft.action == "SELECT dept FROM emp GROUP BY dept HAVING COUNT(*) > 2" and draft.raw == DRAFT_REPLY
    assert alts.edits == ((3, "HAVING COUNT(*) >= 2"), (0, "SELECT dept, COUNT(*)"))
    assert (dist.situation, dist.condition) == ('"at least" was read as strictly greater', 'question contains "at least"')
    assert rev.action == "SELECT dept FROM emp GROUP BY dept HAVING COUNT(*) >= 2"

    rendered = [
        prompts.render_draft(dreq),
        render_alternatives(areq),
        render_distil(sreq),
        prompts.render_revise(rreq),
    ]
    assert [r.prompt for r in reqs] == rendered  # exactly the shared templates
    for res, prompt, reply in zip((draft, alts, dist, rev), rendered, (DRAFT_REPLY, EDITS_REPLY, DISTIL_REPLY, REVISE_REPLY)):
        u = server_usage(prompt, reply)
        assert res.usage == Usage(u["prompt_tokens"], u["completion_tokens"])
    for r in reqs:
        assert r.path == "/v1/chat/completions" and r.status == 200
        assert r.headers["authorization"] == "Bearer sk-test"
        assert r.body["model"] == "test-model" and r.body["seed"] == 7
        assert r.body["max_tokens"] == 256 and r.body["temperature"] == 0.3
        assert r.body["messages"][0]["role"] == "user" and len(r.body["messages"]) == 1
    st = bb.stats()
    assert (st.calls, st.sent, st.ok, st.failed_calls, st.retries, st.fault_total) == (4, 4, 4, 0, 0, 0)
    assert st.usage == draft.usage + alts.usage + dist.usage + rev.usage


@dataclasses.dataclass(frozen=True)
class _EchoRequest:
    task: Task
    word: str


@dataclasses.dataclass(frozen=True)
class _EchoResult:
    word: str
    usage: Usage
    raw: str = ""


def _render_echo(req: _EchoRequest) -> str:
    return f"### Task\n{req.task.question}\n\n### Echo\nRepeat the word {req.word!r}.\nECHO: <word>"


def _parse_echo(text: str, req: _EchoRequest, usage: Usage) -> _EchoResult:
    m = re.search(r"^ECHO:[ \t]*(\S+)[ \t]*$", text, re.M)
    return _EchoResult(m.group(1) if m else "", usage, text)


def test_a_call_kind_registered_by_a_test_is_served_by_every_backbone(suite):
    """A new memory system's call needs one CallKind (template, parser, scripted handler) and no edit
    to any backbone class: the scripted simulator and the OpenAI client both serve it through
    ``call(kind, req)``, and the call's usage is in its result, charged to a ledger once."""
    from cfjax.infra.ledger import Ledger
    from cfjax.llm.scripted import ScriptedBackbone
    from cfjax.registry import CALLS, UnknownPluginError
    from cfjax.types import CallKind

    name = "TEST_ECHO_WORD"
    kind = CALLS.register(name, CallKind(name, _render_echo, _parse_echo,
                                         lambda sim, req: f"ECHO: {req.word}-{sim.rng('echo', req.word).randrange(10)}",
                                         "a throwaway call kind of the test suite"))
    try:
        assert CALLS.get(name) is kind
        req = _EchoRequest(make_task(), "hello")
        prompt = _render_echo(req)

        sim = ScriptedBackbone(suite.scripted_domain())
        res = sim.call(kind, req)
        assert isinstance(res, _EchoResult) and res.word.startswith("hello-") and res.raw == f"ECHO: {res.word}"
        assert res.word == sim.call(kind, req).word  # seeded: the same request, the same reply
        assert res.usage == Usage(prompts.count_tokens(prompt), prompts.count_tokens(res.raw))

        with FakeLLMServer(lambda p: "sure.\nECHO: world" if "### Echo" in p else "unknown template") as srv:
            bb = OpenAIBackbone(fast_config(srv))
            got = bb.call(kind, req)
            (r,) = srv.requests
        assert r.prompt == prompt  # exactly the kind's template
        assert isinstance(got, _EchoResult) and got.word == "world" and got.raw == "sure.\nECHO: world"
        u = server_usage(prompt, got.raw)
        assert got.usage == Usage(u["prompt_tokens"], u["completion_tokens"])
        assert bb.stats().calls == 1 and bb.stats().usage == got.usage

        led = Ledger("test")
        for result in (res, got):
            led.llm(req.task.task_id, result.usage)
        assert led.total.llm_calls == 2 and led.total.tokens == res.usage.total + got.usage.total
    finally:
        CALLS.unregister(name)
    assert name not in CALLS
    with pytest.raises(UnknownPluginError, match=name):  # unregistered: no backbone serves it any more
        ScriptedBackbone(suite.scripted_domain())._complete(name, "p", None)


def test_client_estimates_usage_without_server_usage_and_omits_optional_fields():
    with FakeLLMServer(contract_responder, report_usage=False) as srv:
        bb = OpenAIBackbone(fast_config(srv))
        req = DraftRequest(make_task())
        res = bb.call(DRAFT_ACTION, req)
        (r,) = srv.requests
    assert res.usage == Usage(prompts.count_tokens(prompts.render_draft(req)), prompts.count_tokens(DRAFT_REPLY))
    assert "authorization" not in r.headers and "seed" not in r.body


@pytest.mark.parametrize("status", [500, 503, 429])
def test_client_retries_transient_failures(status):
    with FakeLLMServer(contract_responder, fail_first=2, fail_status=status) as srv:
        bb = OpenAIBackbone(fast_config(srv, max_retries=3))
        res = bb.call(DRAFT_ACTION, DraftRequest(make_task()))
        statuses = [r.status for r in srv.requests]
    assert res.action.startswith("SELECT dept")
    assert statuses == [status, status, 200]
    st = bb.stats()
    assert (st.calls, st.ok, st.failed_calls, st.retries, st.sent) == (1, 1, 0, 2, 3)
    assert st.faults["http_429" if status == 429 else "http_5xx"] == 2


def test_client_gives_up_after_bounded_retries_with_a_failed_call():
    slept: list[float] = []
    req = DraftRequest(make_task())
    with FakeLLMServer(contract_responder, fail_first=100, fail_status=502) as srv:
        bb = OpenAIBackbone(fast_config(srv, max_retries=2, backoff_s=0.5), sleep=slept.append)
        res = bb.call(DRAFT_ACTION, req)  # never raises for a server fault
        assert len(srv.requests) == 3
    assert res.action == "" and res.raw == ""
    assert res.usage == Usage(prompts.count_tokens(prompts.render_draft(req)), 0, failed=1)
    assert len(slept) == 2 and 0.25 <= slept[0] < 0.5 and 0.5 <= slept[1] < 1.0  # exponential, jittered
    st = bb.stats()
    assert (st.calls, st.ok, st.failed_calls, st.retries, st.faults["http_5xx"]) == (1, 0, 1, 2, 3)


def test_client_400_raises_without_retry():
    with FakeLLMServer(contract_responder, fail_first=1, fail_status=400) as srv:
        bb = OpenAIBackbone(fast_config(srv, max_retries=3))
        with pytest.raises(LLMError, match="HTTP 400.*injected failure 400") as ei:
            bb.call(DRAFT_ACTION, DraftRequest(make_task()))
        assert len(srv.requests) == 1
    assert ei.value.status == 400
    assert (bb.stats().sent, bb.stats().retries) == (1, 0)


@pytest.mark.parametrize(
    "reply, kind",
    [
        ({"choices": []}, "empty_choices"),
        ({"object": "chat.completion"}, "empty_choices"),
        ({"choices": [{"index": 0, "message": {"role": "assistant"}}]}, "null_content"),
        ({"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}, "null_content"),
        ({"choices": [{"index": 0, "message": {"role": "assistant", "content": 42}}]}, "bad_shape"),
        ({"choices": {"0": "x"}}, "bad_shape"),
        ({"choices": [{"index": 0, "message": "hello"}]}, "bad_shape"),
        (b'["not", "an", "object"]', "bad_shape"),
        (b"<html>gateway</html>", "not_json"),
        (b"\xff\xfe not utf-8", "not_json"),
    ],
)
def test_client_malformed_reply_is_retried_then_a_failed_call(reply, kind):
    req = ReviseRequest(make_task(), (), "SELECT 1", MemoryText("record", "record"))
    with FakeLLMServer(lambda prompt: reply) as srv:
        bb = OpenAIBackbone(fast_config(srv, max_retries=1))
        res = bb.call(REVISE_WITH_RECORD, req)
        assert len(srv.requests) == 2
    assert res.action == req.draft and res.usage.failed == 1  # the parser's default for an empty reply
    st = bb.stats()
    assert (st.faults[kind], st.fault_total, st.failed_calls, st.retries) == (2, 2, 1, 1)


def test_client_reply_without_contract():
    task = make_task()
    _, areq, sreq, rreq = all_requests(task)
    with FakeLLMServer(lambda prompt: "I am not sure what you mean.") as srv:
        bb = OpenAIBackbone(fast_config(srv))
        assert bb.call(REVISE_WITH_RECORD, rreq).action == rreq.draft
        assert bb.call(GENERATE_LOCAL_ALTERNATIVES, areq).edits == ()
        assert (bb.call(DISTIL_RECORD, sreq).situation, bb.call(DISTIL_RECORD, sreq).condition) == ("", "")
        assert bb.call(DRAFT_ACTION, DraftRequest(task)).action == ""


def test_client_connection_refused_and_timeout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bb = OpenAIBackbone(OpenAIConfig(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_s=0.001, timeout_s=2))
    assert bb.call(DRAFT_ACTION, DraftRequest(make_task())).usage.failed == 1
    st = bb.stats()
    assert (st.faults["reset"], st.retries, st.failed_calls) == (2, 1, 1)

    with FakeLLMServer(contract_responder, delay_s=0.4) as srv:
        bb = OpenAIBackbone(fast_config(srv, timeout_s=0.1, max_retries=1))
        t0 = time.monotonic()
        assert bb.call(DRAFT_ACTION, DraftRequest(make_task())).usage.failed == 1
        assert time.monotonic() - t0 < 2.0
    assert (bb.stats().faults["timeout"], bb.stats().failed_calls) == (2, 1)


def test_client_is_thread_safe():
    def echo(prompt: str) -> str:
        question = prompt.split("### Task\n", 1)[1].split("\n", 1)[0]
        return prompts.format_action(f"SELECT '{question}'")

    tasks = [make_task(i) for i in range(24)]
    with FakeLLMServer(echo) as srv:
        bb = OpenAIBackbone(fast_config(srv))
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda t: bb.call(DRAFT_ACTION, DraftRequest(t)), tasks))
        assert len(srv.requests) == 24
    assert [r.action for r in results] == [f"SELECT '{t.question}'" for t in tasks]
    assert bb.stats().calls == 24 and bb.stats().failed_calls == 0
    assert bb.stats().usage == sum((r.usage for r in results), Usage())


def test_server_is_bounded_to_its_context():
    srv = FakeLLMServer()
    with srv:
        bb = OpenAIBackbone(fast_config(srv, max_retries=0))
        port = srv.port
        assert bb._complete("X", "hi", None).text == "ok"
    with pytest.raises(RuntimeError):
        srv.base_url
    bb = OpenAIBackbone(OpenAIConfig(f"http://127.0.0.1:{port}/v1", "m", max_retries=0, timeout_s=1))
    assert bb._complete("X", "hi", None).usage.failed == 1  # nothing listens any more


# --------------------------------------------------------------------------- config


def test_from_env_reads_variables_and_fallbacks(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("CFJAX_LLM_MODEL", "qwen")
    cfg = OpenAIConfig.from_env()
    assert (cfg.base_url, cfg.model, cfg.api_key) == ("http://127.0.0.1:9/v1", "qwen", "sk-openai")
    monkeypatch.setenv("CFJAX_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("CFJAX_LLM_API_KEY", "sk-cfjax")
    cfg = OpenAIConfig.from_env(max_tokens=64, seed=3)
    assert (cfg.base_url, cfg.api_key, cfg.max_tokens, cfg.seed) == ("http://127.0.0.1:8000/v1", "sk-cfjax", 64, 3)
    assert OpenAIConfig.from_env(model="llama").model == "llama"
    assert "sk-cfjax" not in repr(cfg) and "sk-cfjax" not in repr(OpenAIBackbone(cfg))
    assert OpenAIBackbone.from_env().name == "openai:qwen"


def test_from_env_missing_names_the_variables(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError) as ei:
        OpenAIConfig.from_env()
    msg = str(ei.value)
    for name in ("CFJAX_LLM_BASE_URL", "OPENAI_BASE_URL", "CFJAX_LLM_MODEL"):
        assert name in msg
    with pytest.raises(ValueError, match="CFJAX_LLM_MODEL") as ei:
        OpenAIConfig.from_env(base_url="http://127.0.0.1:8000/v1")
    assert "CFJAX_LLM_BASE_URL" not in str(ei.value)
    with pytest.raises(ValueError, match="CFJAX_LLM_BASE_URL"):
        OpenAIConfig.from_env(environ={"CFJAX_LLM_MODEL": "m"})
    with pytest.raises(TypeError, match="bogus"):
        OpenAIConfig.from_env(environ={}, base_url="http://x/v1", model="m", bogus=1)


def test_config_validation():
    with pytest.raises(ValueError, match="http"):
        OpenAIConfig("127.0.0.1:8000/v1", "m")
    with pytest.raises(ValueError):
        OpenAIConfig("http://127.0.0.1:8000/v1", "m", max_retries=-1)
    with pytest.raises(ValueError):
        OpenAIConfig("http://127.0.0.1:8000/v1", "m", timeout_s=0)
    full = OpenAIConfig("http://127.0.0.1:8000/v1", "m", api_key="sk-x", max_inflight=8, cache_path="c.sqlite")
    assert pickle.loads(pickle.dumps(full)) == full  # worker processes rebuild the backbone from it
    for bad in (dict(max_inflight=0), dict(total_timeout_s=0), dict(max_reply_chars=0), dict(slow_s=-1),
                dict(temperature=-0.1), dict(max_inflight=2.5)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            OpenAIConfig("http://127.0.0.1:8000/v1", "m", **bad)
